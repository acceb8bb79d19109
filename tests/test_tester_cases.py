"""tests/test_tester_cases.py - defects a tester found, kept so they stay fixed.

Each case is one CTest test (tests/cli.cmake), run as
  test_tester_cases.py --toplu build/toplu CASE
relu_nan:     Relu keeps NaN (ONNX max(0, x); ONNX Runtime keeps it): the
              element-wise Relu, the Relu fused into toplu's own GEMM
              (MatMul+Relu), the Relu on a convolution's blocked layout and
              the Relu fused into toplu's Winograd 3x3 convolution (AVX2)
              give NaN where their input is NaN.  A Relu fused into a
              oneDNN convolution or Gemm maps NaN to 0 (docs/conformance.md).
conv_empty_batch: a .npy input of 0 rows through a Conv whose input height and
              width are symbolic: the empty result has the Conv output's
              spatial dims from shape inference ((0, 32, 4, 5) for 7x9 rows,
              3x3 stride 2 pads 1), not the declared unknown dims as 0.
conv_dw_env:  TOPLU_CONV_DW with a value other than fused or separate (a typo)
              is refused with an error naming the variable, its value, the
              model and the node, rather than ignored; fused, separate and
              unset run a 1x1 + depthwise 3x3 pair right.
no_fuse_plan_tune: `toplu plan` and `toplu tune` load the model as `toplu run`
              does under TOPLU_NO_FUSE: with TOPLU_NO_FUSE=depthwise the
              plan counts the 4 steps run's plan dump shows (3 fused), and
              plan's batch-1 total bytes and tune's predicted bytes are those
              of the unfused plan.  A name TOPLU_NO_FUSE does not know is
              refused by run, info, plan and tune (exit 2, naming it).
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


def run(model, x, extra=(), env=None, quiet=True):
    """toplu run with input x; (y or None, stderr)."""
    out = os.path.join(work, 'out')
    shutil.rmtree(out, True)
    xf = os.path.join(work, 'x.npy')
    np.save(xf, x)
    r = toplu('run', model, '--input', 'x=' + xf, '--output', out, *(['-q'] if quiet else []), *extra, env=env)
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
    # a Relu on a convolution's layout (two 1x1 Convs, Concat, Relu: the blocked Relu kernel, not fused)
    w = rng.standard_normal((8, 4, 1, 1)).astype(np.float32)
    x = rng.standard_normal((2, 4, 6, 7)).astype(np.float32)
    x[0, 1, 2, 3] = x[1, 3, 5, 6] = np.nan
    m = save([h.make_node('Conv', ['x', 'W'], ['a']), h.make_node('Conv', ['x', 'W'], ['b']),
              h.make_node('Concat', ['a', 'b'], ['c'], axis=1), h.make_node('Relu', ['c'], ['y'])],
             [vi('x', ['N', 4, 6, 7])], [vi('y', ['N', 16, 6, 7])], [nh.from_array(w, 'W')], 'concat_relu')
    y, err = run(m, x, ['--allow-nonfinite'], env={'TOPLU_PLAN_DUMP': '1'})
    a = np.einsum('nchw,mc->nmhw', x.astype(np.float64), w[:, :, 0, 0])
    want = np.concatenate([a, a], axis=1)
    want = np.where(np.isnan(want), np.nan, np.maximum(want, 0))
    check(y is not None and ' Relu ' in err and np.array_equal(np.isnan(y), np.isnan(want)) and
          np.allclose(y, want, rtol=1e-4, atol=1e-4, equal_nan=True),
          'Conv, Concat, Relu (Relu a step of its own on the convolutions\' layout): 32 NaN where the input had 2',
          err if y is None else f'{np.isnan(y).sum()} NaN, want {np.isnan(want).sum()}')
    # a 3x3 convolution after another one, on AVX2 kernels: toplu's Winograd F(4x4, 3x3) with Relu fused
    # (its transforms spread a NaN over the whole 4x4 output tile, so NaN at least where numpy has it)
    w0 = (rng.standard_normal((16, 8, 1, 1)) * 0.3).astype(np.float32)
    w1 = (rng.standard_normal((16, 16, 3, 3)) * 0.1).astype(np.float32)
    x = rng.standard_normal((1, 8, 12, 16)).astype(np.float32)
    x[0, 2, 5, 7] = np.nan
    m = save([h.make_node('Conv', ['x', 'w0'], ['a']), h.make_node('Conv', ['a', 'w1'], ['c'], pads=[1, 1, 1, 1]),
              h.make_node('Relu', ['c'], ['y'])],
             [vi('x', ['N', 8, 12, 16])], [vi('y', ['N', 16, 12, 16])],
             [nh.from_array(w0, 'w0'), nh.from_array(w1, 'w1')], 'winograd_relu')
    prof = os.path.join(work, 'profile.json')
    y, err = run(m, x, ['--allow-nonfinite', '--profile', prof], env={'TOPLU_MAX_CPU_ISA': 'avx2'}, quiet=False)
    a = np.einsum('nchw,mc->nmhw', x.astype(np.float64), w0[:, :, 0, 0])
    ap = np.pad(a, ((0, 0), (0, 0), (1, 1), (1, 1)))
    want = sum(np.einsum('nchw,mc->nmhw', ap[:, :, i:i + 12, j:j + 16], w1[:, :, i, j]) for i in range(3) for j in range(3))
    want = np.where(np.isnan(want), np.nan, np.maximum(want, 0))
    if y is not None and 'toplu:winograd' not in err:
        print('note: the plan took no Winograd kernel here (an AVX-512-only or non-AVX2 CPU): the Winograd case is '
              'not checked', flush=True)
    else:
        fin = ~np.isnan(y) if y is not None else None
        check(y is not None and np.isnan(y[np.isnan(want)]).all() and
              np.allclose(y[fin], want[fin], rtol=1e-4, atol=1e-4),
              'Winograd 3x3 Conv+Relu: NaN wherever numpy has NaN (144), max(0, conv) elsewhere',
              err[-300:] if y is None else f'{np.isnan(y).sum()} NaN')


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


def case_conv_dw_env():
    rng = np.random.default_rng(9)
    w1 = (rng.standard_normal((16, 8, 1, 1)) * 0.3).astype(np.float32)
    wd = (rng.standard_normal((16, 1, 3, 3)) * 0.3).astype(np.float32)
    m = save([h.make_node('Conv', ['x', 'W1'], ['e'], name='pw'), h.make_node('Relu', ['e'], ['r']),
              h.make_node('Conv', ['r', 'Wd'], ['y'], group=16, pads=[1, 1, 1, 1], name='dw')],
             [vi('x', ['N', 8, 10, 10])], [vi('y', ['N', 16, 10, 10])],
             [nh.from_array(w1, 'W1'), nh.from_array(wd, 'Wd')], 'pw_dw')
    x = rng.standard_normal((2, 8, 10, 10)).astype(np.float32)
    e = np.maximum(np.einsum('nchw,mc->nmhw', x.astype(np.float64), w1[:, :, 0, 0]), 0)
    ep = np.pad(e, ((0, 0), (0, 0), (1, 1), (1, 1)))
    want = sum(ep[:, :, i:i + 10, j:j + 10] * wd[None, :, 0, i, j, None, None] for i in range(3) for j in range(3))
    env0 = {k: v for k, v in os.environ.items() if k not in ('TOPLU_CONV_DW', 'TOPLU_NO_FUSE')}
    for val in (None, 'fused', 'separate'):
        env = dict(env0, TOPLU_PLAN_DUMP='1', **({'TOPLU_CONV_DW': val} if val else {}))
        out = os.path.join(work, 'out')
        shutil.rmtree(out, True)
        np.save(os.path.join(work, 'x.npy'), x)
        r = subprocess.run([args.toplu, 'run', m, '--input', 'x=' + os.path.join(work, 'x.npy'), '--output', out],
                           capture_output=True, text=True, env=env)
        y = np.load(os.path.join(out, 'y.npy')) if r.returncode == 0 else None
        check(y is not None and 'Conv+Relu+DepthwiseConv' in r.stderr and np.allclose(y, want, rtol=1e-4, atol=1e-4),
              f'TOPLU_CONV_DW={val}: one Conv+Relu+DepthwiseConv step, right values', (r.stderr[:700], None if y is None else float(np.abs(y - want).max())))
    for val in ('fusd', 'Fused', 'separated'):
        out = os.path.join(work, 'out')
        shutil.rmtree(out, True)
        r = subprocess.run([args.toplu, 'run', m, '--input', 'x=' + os.path.join(work, 'x.npy'), '--output', out],
                           capture_output=True, text=True, env=dict(env0, TOPLU_CONV_DW=val))
        msg = r.stderr
        check(r.returncode == 2 and f"TOPLU_CONV_DW is '{val}'" in msg and "expected 'own', 'fused' or 'separate'" in msg and
              'pw_dw.onnx' in msg and "'pw'" in msg and not os.path.exists(os.path.join(out, 'y.npy')),
              f'TOPLU_CONV_DW={val}: refused (exit 2), naming the value, the model and the node', f'{r.returncode} {msg}')


def pw_dw_model():
    rng = np.random.default_rng(11)
    w1 = (rng.standard_normal((16, 8, 1, 1)) * 0.3).astype(np.float32)
    wd = (rng.standard_normal((16, 1, 3, 3)) * 0.3).astype(np.float32)
    return save([h.make_node('Conv', ['x', 'W1'], ['e'], name='pw'), h.make_node('Relu', ['e'], ['r']),
                 h.make_node('Conv', ['r', 'Wd'], ['y'], group=16, pads=[1, 1, 1, 1], name='dw')],
                [vi('x', ['N', 8, 10, 10])], [vi('y', ['N', 16, 10, 10])],
                [nh.from_array(w1, 'W1'), nh.from_array(wd, 'Wd')], 'pw_dw_plan')


def case_no_fuse_plan_tune():
    import json
    import re
    m = pw_dw_model()
    xf = os.path.join(work, 'x.npy')
    np.save(xf, np.ones((1, 8, 10, 10), np.float32))
    env0 = {k: v for k, v in os.environ.items() if k not in ('TOPLU_CONV_DW', 'TOPLU_NO_FUSE', 'TOPLU_PLAN_DUMP')}
    got = {}
    for nf in ('', 'depthwise'):
        env = dict(env0, **({'TOPLU_NO_FUSE': nf} if nf else {}))
        out = os.path.join(work, 'out')
        shutil.rmtree(out, True)
        r = subprocess.run([args.toplu, 'run', m, '--input', 'x=' + xf, '--output', out], capture_output=True,
                           text=True, env=dict(env, TOPLU_PLAN_DUMP='1'))
        steps = re.search(r': (\d+) steps', r.stderr)
        steps = int(steps.group(1)) if r.returncode == 0 and steps else None
        r = subprocess.run([args.toplu, 'plan', m, '--json', '--batch-sizes', '1'], capture_output=True, text=True,
                           env=env)
        plan = json.loads(r.stdout) if r.returncode == 0 else None
        tdir = os.path.join(work, 'tune' + nf)
        r2 = subprocess.run([args.toplu, 'tune', m, '--batch-sizes', '1', '--max-seconds', '0.2', '--out', tdir],
                            capture_output=True, text=True, env=env)
        tune = json.load(open(os.path.join(tdir, 'tune.json'))) if r2.returncode == 0 else None
        pred = None
        if tune:
            pred = [b.get('predicted_bytes') for b in tune['results']
                    if b.get('batch_size') == 1]
            pred = pred[0] if pred else None
        got[nf] = (steps, plan and plan['latency_model']['nodes'], plan and plan['batch_sizes'][0]['total_bytes'], pred)
        what = f'TOPLU_NO_FUSE={nf}'
        check(steps == (4 if nf else 3), f'{what}: toplu run plans {4 if nf else 3} steps', (steps, r.stderr[-300:]))
        check(plan is not None and plan['latency_model']['nodes'] == steps,
              f'{what}: toplu plan counts the steps toplu run plans ({steps})', got[nf])
        check(plan is not None and pred == plan['batch_sizes'][0]['total_bytes'],
              f"{what}: toplu tune's predicted bytes at batch 1 are toplu plan's", (got[nf], r2.stderr[-300:]))
    check(got[''][2] != got['depthwise'][2], 'toplu plan: the fused and unfused plans differ in bytes', got)
    check(got[''][3] != got['depthwise'][3], 'toplu tune: the fused and unfused predictions differ in bytes', got)
    # a name TOPLU_NO_FUSE does not know is refused by every command that loads a model (exit 2, naming it),
    # not ignored with the fusion left on; known names with an empty entry pass
    for nf, want in (('depthwise,bogus', 2), ('projektion', 2), ('depthwise,,projection,', 0)):
        env = dict(env0, TOPLU_NO_FUSE=nf)
        out = os.path.join(work, 'out_nf')
        shutil.rmtree(out, True)
        cmds = {'run': ['run', m, '--input', 'x=' + xf, '--output', out], 'info': ['info', m],
                'plan': ['plan', m, '--batch-sizes', '1'],
                'tune': ['tune', m, '--batch-sizes', '1', '--max-seconds', '0.2', '--out', os.path.join(work, 'tune_nf')]}
        for name, cmd in cmds.items():
            r = subprocess.run([args.toplu] + cmd, capture_output=True, text=True, env=env)
            bad = nf.split(',')[-1] if want else None
            ok = r.returncode == want and (not want or (f"'{bad}'" in r.stderr and 'TOPLU_NO_FUSE' in r.stderr))
            check(ok, f'TOPLU_NO_FUSE={nf}: toplu {name} exits {want}', (r.returncode, r.stderr[-300:]))


CASES = {'relu_nan': case_relu_nan, 'conv_empty_batch': case_conv_empty_batch, 'conv_dw_env': case_conv_dw_env,
         'no_fuse_plan_tune': case_no_fuse_plan_tune}
if args.case not in CASES:
    sys.exit(f'unknown case {args.case}: {", ".join(CASES)}')
CASES[args.case]()
sys.exit(1 if fails else 0)
