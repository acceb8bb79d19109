"""tests/test_tester_cases.py - defects a tester found, kept so they stay fixed.

Each case is one CTest test (tests/cli.cmake), run as
  test_tester_cases.py --toplu build/toplu CASE
relu_nan:     Relu keeps NaN (ONNX max(0, x); ONNX Runtime keeps it): the
              element-wise Relu and the Relu fused into toplu's own GEMM
              (MatMul+Relu) give NaN exactly where their input is NaN.
              oneDNN's fused and blocked Relu map NaN to 0 (docs/conformance.md).
conv_empty_batch: a .npy input of 0 rows through a Conv whose input height and
              width are symbolic: the empty result has the Conv output's
              spatial dims from shape inference ((0, 32, 4, 5) for 7x9 rows,
              3x3 stride 2 pads 1), not the declared unknown dims as 0.
"""
import argparse
import atexit
import os
import shutil
import subprocess
import sys
import tempfile

import numpy as np
import onnx
from onnx import TensorProto as T
from onnx import helper as h
from onnx import numpy_helper as nh

ap = argparse.ArgumentParser()
ap.add_argument('--toplu', required=True)
ap.add_argument('case')
args = ap.parse_args()
work = tempfile.mkdtemp(prefix='toplu-tester-cases-')
atexit.register(shutil.rmtree, work, True)
fails = 0


def check(ok, what, why=''):
    global fails
    print(('ok: ' if ok else 'FAIL: ') + what + ('' if ok else f': {why}'), flush=True)
    fails += 0 if ok else 1


def vi(name, shape):
    return h.make_tensor_value_info(name, T.FLOAT, shape)


def save(nodes, ins, outs, inits, name, opset=13):
    m = h.make_model(h.make_graph(nodes, name, ins, outs, inits), opset_imports=[h.make_opsetid('', opset)])
    m.ir_version = 8
    path = os.path.join(work, name + '.onnx')
    onnx.save(m, path)
    return path


def toplu(*argv, env=None):
    return subprocess.run([args.toplu, *argv], capture_output=True, text=True,
                          env=dict(os.environ, **(env or {})))


def run(model, x, extra=(), env=None):
    """toplu run with input x; (y or None, stderr)."""
    out = os.path.join(work, 'out')
    shutil.rmtree(out, True)
    xf = os.path.join(work, 'x.npy')
    np.save(xf, x)
    r = toplu('run', model, '--input', 'x=' + xf, '--output', out, '-q', *extra, env=env)
    if r.returncode:
        return None, r.stderr
    return np.load(os.path.join(out, 'y.npy')), r.stderr


def case_relu_nan():
    rng = np.random.default_rng(3)
    x = rng.standard_normal((3, 4, 5, 6)).astype(np.float32)
    x[0, 1, 2, 3] = x[2, 0, 0, 0] = x[1, 3, 4, 5] = np.nan
    m = save([h.make_node('Relu', ['x'], ['y'])], [vi('x', ['N', 4, 5, 6])], [vi('y', ['N', 4, 5, 6])], [], 'relu')
    y, err = run(m, x, ['--allow-nonfinite'])
    want = np.where(np.isnan(x), np.nan, np.maximum(x, 0))
    check(y is not None and np.array_equal(np.isnan(y), np.isnan(x)) and np.array_equal(y, want, equal_nan=True),
          'Relu: NaN where the input is NaN, max(0, x) elsewhere', err if y is None else np.isnan(y).sum())
    # MatMul with a constant B wider than deep: toplu's own GEMM, Relu fused as its post-op
    b = rng.standard_normal((16, 64)).astype(np.float32)
    x = rng.standard_normal((7, 16)).astype(np.float32)
    x[1, 3] = x[5, 0] = np.nan
    m = save([h.make_node('MatMul', ['x', 'B'], ['c']), h.make_node('Relu', ['c'], ['y'])], [vi('x', ['N', 16])],
             [vi('y', ['N', 64])], [nh.from_array(b, 'B')], 'matmul_relu')
    y, err = run(m, x, ['--allow-nonfinite'])
    want = np.maximum(x.astype(np.float64) @ b, 0)
    nan_rows = np.isnan(x).any(axis=1)
    ok = y is not None and np.isnan(y[nan_rows]).all() and not np.isnan(y[~nan_rows]).any() and \
        np.allclose(y[~nan_rows], want[~nan_rows], rtol=1e-4, atol=1e-4)
    check(ok, 'MatMul+Relu (fused): NaN in the rows whose input has NaN (64 each), max(0, x B) elsewhere',
          err if y is None else f'{np.isnan(y).sum()} NaN, want {64 * nan_rows.sum()}')


def case_conv_empty_batch():
    rng = np.random.default_rng(5)
    w = rng.standard_normal((32, 3, 3, 3)).astype(np.float32)
    m = save([h.make_node('Conv', ['x', 'W'], ['c'], strides=[2, 2], pads=[1, 1, 1, 1]),
              h.make_node('Relu', ['c'], ['y'])],
             [vi('x', ['N', 3, 'H', 'W'])], [vi('y', ['N', 32, 'H2', 'W2'])], [nh.from_array(w, 'W')], 'conv_dyn')
    y, err = run(m, np.zeros((0, 3, 7, 9), np.float32))
    check(y is not None and y.shape == (0, 32, 4, 5) and y.dtype == np.float32,
          'Conv on 0 rows of 3x7x9: output shape (0, 32, 4, 5)', err if y is None else y.shape)
    # the same with rows: the shape a run gives (so the empty result is what rows would give)
    y1, err = run(m, rng.standard_normal((2, 3, 7, 9)).astype(np.float32))
    check(y1 is not None and y1.shape == (2, 32, 4, 5), 'Conv on 2 rows: (2, 32, 4, 5)',
          err if y1 is None else y1.shape)


CASES = {'relu_nan': case_relu_nan, 'conv_empty_batch': case_conv_empty_batch}
if args.case not in CASES:
    sys.exit(f'unknown case {args.case}: {", ".join(CASES)}')
CASES[args.case]()
sys.exit(1 if fails else 0)
