#!/usr/bin/python3
"""NaN and large values through toplu's own kernels, against numpy (the ONNX reference's semantics), run by CTest
(tests/elementwise.cmake):

  test_nan_semantics.py TOPLU WORKDIR

A fresh user's findings of 2026-12-06, each checked here on a one-node model through `toplu run --allow-nonfinite`:
MaxPool over a window of NaN gave -inf (a window with one NaN dropped it); ReduceMax, ReduceMin and GlobalMaxPool
kept or dropped a NaN by its sign bit (x86 makes sqrt(-1) and 0 * inf with the sign bit set); LogSoftmax lost
the low bits of large logits (x - (max + log sum)); Celu turned NaN into 0.  Exit status 0 pass, 1 fail.
"""
import os
import subprocess
import sys

import numpy as np
import onnx
from onnx import TensorProto as T, helper, numpy_helper

TOPLU, WORK = sys.argv[1], sys.argv[2]
failures = []


def check(ok, what, *detail):
    if not ok:
        failures.append(what)
        print('FAIL:', what, *detail)


def model(name, op, x_shape, attrs=None, extra_inputs=(), opset=18):
    vi = helper.make_tensor_value_info
    inits = [numpy_helper.from_array(v, k) for k, v in extra_inputs]
    node = helper.make_node(op, ['x'] + [k for k, _ in extra_inputs], ['y'], **(attrs or {}))
    g = helper.make_graph([node], name, [vi('x', T.FLOAT, x_shape)], [vi('y', T.FLOAT, None)], inits)
    m = helper.make_model(g, opset_imports=[helper.make_opsetid('', opset)], producer_name='toplu-test')
    m.ir_version = 8
    path = os.path.join(WORK, name + '.onnx')
    onnx.save(m, path)
    return path


def run(path, x):
    src = os.path.join(WORK, os.path.basename(path) + '.in.npy')
    out = os.path.join(WORK, os.path.basename(path)[:-5] + '_out')
    np.save(src, x)
    p = subprocess.run([TOPLU, 'run', path, '--input', 'x=' + src, '--output', out, '--batch-size', 'all',
                        '--allow-nonfinite', '--overwrite', '-q', '--threads', '2'], capture_output=True, text=True)
    if p.returncode:
        check(False, 'toplu run ' + path, p.stderr)
        return None
    return np.load(os.path.join(out, 'y.npy'))


def neg_nan():
    return np.array([0xffc00000], np.uint32).view(np.float32)[0]  # what sqrt(-1) gives on x86


os.makedirs(WORK, exist_ok=True)
nan, nnan = np.float32(np.nan), neg_nan()
check(np.isnan(nnan) and np.signbit(nnan), 'a NaN with the sign bit set')

# MaxPool: a window of NaN is NaN (not -inf), a window with one NaN is NaN (numpy's maximum propagates it)
x = np.array([[[[nan] * 8, [1, 2, 3, 4, 5, 6, 7, nan], [1, 2, 3, 4, 5, 6, 7, 8], [nnan] * 8]]], np.float32)
y = run(model('mp_row', 'MaxPool', [1, 1, 4, 8], {'kernel_shape': [1, 8]}), x)
if y is not None:
    got = y.reshape(-1)
    check(np.isnan(got[0]) and np.isnan(got[1]) and got[2] == 8 and np.isnan(got[3]),
          'MaxPool: NaN windows give NaN, the plain row its max', got)
y = run(model('mp_3x3', 'MaxPool', [1, 1, 4, 8], {'kernel_shape': [2, 2], 'strides': [2, 2]}), x)
if y is not None:
    ref = np.maximum.reduce([x[0, 0, 0::2, 0::2], x[0, 0, 0::2, 1::2], x[0, 0, 1::2, 0::2], x[0, 0, 1::2, 1::2]])
    check(np.array_equal(np.isnan(y.reshape(ref.shape)), np.isnan(ref)) and
          np.allclose(np.nan_to_num(y.reshape(ref.shape)), np.nan_to_num(ref)), 'MaxPool 2x2/2 against numpy', y, ref)

# ReduceMax / ReduceMin / GlobalMaxPool: NaN of either sign, in any position, gives NaN
rows = np.array([[1, 2, 3, 4], [1, nnan, 3, 4], [1, 2, nan, 4], [4, 3, 2, nnan]], np.float32)
for op in ('ReduceMax', 'ReduceMin'):
    y = run(model('r_' + op, op, [4, 4], {'keepdims': 0}, [('axes', np.array([1], np.int64))]), rows)
    if y is not None:
        check(y[0] == (4 if op == 'ReduceMax' else 1) and all(np.isnan(y[1:])), op + ' over the last axis', y)
    y = run(model('c_' + op, op, [4, 4], {'keepdims': 0}, [('axes', np.array([0], np.int64))]), rows)
    if y is not None:
        ref = (np.max if op == 'ReduceMax' else np.min)(rows, axis=0)
        check(np.array_equal(np.isnan(y), np.isnan(ref)) and np.allclose(np.nan_to_num(y), np.nan_to_num(ref)),
              op + ' over axis 0 against numpy', y, ref)
y = run(model('gmp', 'GlobalMaxPool', [1, 4, 2, 2]), rows.reshape(1, 4, 2, 2))
if y is not None:
    got = y.reshape(-1)
    check(got[0] == 4 and all(np.isnan(got[1:])), 'GlobalMaxPool: NaN of either sign kept', got)

# LogSoftmax: large logits keep their low bits; [1e30, 1e30, 0, -1e30] gives log(1/2) twice
rng = np.random.default_rng(7)
base = rng.standard_normal((4, 1000)).astype(np.float32)
for off in (1e4, 1e6):
    z = base + np.float32(off)
    y = run(model('lsm%d' % int(np.log10(off)), 'LogSoftmax', [4, 1000], {'axis': -1}, opset=13), z)
    if y is not None:
        z64 = z.astype(np.float64)
        ref = z64 - z64.max(1, keepdims=True) - np.log(np.exp(z64 - z64.max(1, keepdims=True)).sum(1, keepdims=True))
        err = np.abs(y - ref).max()
        check(err < 2e-5, 'LogSoftmax at offset %g: max error %g (it was 4.8e-4 at 1e4, 0.03 at 1e6)' % (off, err))
y = run(model('lsm_big', 'LogSoftmax', [1, 4], {'axis': -1}, opset=13), np.array([[1e30, 1e30, 0, -1e30]], np.float32))
if y is not None:
    check(abs(y[0, 0] - np.log(0.5)) < 1e-6 and abs(y[0, 1] - np.log(0.5)) < 1e-6, 'LogSoftmax of [1e30, 1e30, ...]', y)

# Celu keeps NaN (fminf dropped it)
y = run(model('celu', 'Celu', [1, 4], {'alpha': 1.0}, opset=13), np.array([[-1, 0.5, nan, nnan]], np.float32))
if y is not None:
    check(abs(y[0, 0] - (np.exp(-1) - 1)) < 1e-6 and y[0, 1] == 0.5 and np.isnan(y[0, 2]) and np.isnan(y[0, 3]),
          'Celu: NaN kept', y)

print('FAIL: %d' % len(failures) if failures else 'ok')
sys.exit(1 if failures else 0)
