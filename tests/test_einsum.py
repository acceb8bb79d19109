#!/usr/bin/env python3
"""Einsum (ONNX Einsum-12): two float32 inputs as batched GEMMs (ops/onednn/einsum.c), the rest through the
general loop (ops/linalg.c), against numpy's einsum in float64.

    test_einsum.py TOPLU WORKDIR

Equations: attention scores ('bhtd,bhsd->bhts'), a projection ('btd,de->bte'), plain and broadcast "..." batched
products, a row-wise dot, an outer product (no summed label), a diagonal term ('ii,ij->ij'), a scalar result, an
implicit output, a transposed output, zero-size dims (no rows; a sum over nothing), labels summed within one input
only; and three inputs and int32 inputs (the general loop).  Each model is run by `toplu run --profile`: the
result within 1e-5 of the largest |value| (float32 sums), and the two-input float32 ones on the GEMM kernel
(impl 'toplu:einsum:sgemm'), the others not.  Exit 0 when every check passes, 1 otherwise.
"""
import glob
import json
import os
import subprocess
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper

TOPLU, WORK = sys.argv[1], sys.argv[2]
os.makedirs(WORK, exist_ok=True)
rng = np.random.default_rng(5)
fails = []

CASES = [  # (equation, input shapes, dtype, GEMM kernel expected)
    ('bhtd,bhsd->bhts', [(2, 3, 5, 4), (2, 3, 6, 4)], np.float32, True),
    ('btd,de->bte', [(2, 5, 4), (4, 7)], np.float32, True),
    ('ij,jk->ik', [(3, 4), (4, 5)], np.float32, True),
    ('...ij,...jk->...ik', [(2, 1, 3, 4), (1, 3, 4, 5)], np.float32, True),
    ('ij,ij->i', [(4, 6), (4, 6)], np.float32, True),
    ('i,j->ij', [(5,), (3,)], np.float32, True),
    ('ii,ij->ij', [(4, 4), (4, 3)], np.float32, True),
    ('ij,kj->', [(3, 4), (5, 4)], np.float32, True),
    ('ij,jk', [(2, 3), (3, 4)], np.float32, True),
    ('bij,bjk->bki', [(2, 3, 4), (2, 4, 5)], np.float32, True),
    ('bij,bjk->bik', [(2, 0, 3), (2, 3, 4)], np.float32, True),
    ('ij,jk->ik', [(3, 0), (0, 4)], np.float32, True),
    ('ijk,kl->il', [(2, 3, 4), (4, 5)], np.float32, True),
    ('ij,jk,kl->il', [(2, 3), (3, 4), (4, 2)], np.float32, False),
    ('ij,jk->ik', [(3, 4), (4, 5)], np.int32, False),
]


def run_case(idx, eq, shapes, dt, gemm):
    tp = TensorProto.FLOAT if dt == np.float32 else TensorProto.INT32
    names = [f'x{i}' for i in range(len(shapes))]
    xs = [(rng.standard_normal(s) if dt == np.float32 else rng.integers(-5, 6, size=s)).astype(dt) for s in shapes]
    want = np.einsum(eq, *[x.astype(np.float64) for x in xs])
    g = helper.make_graph([helper.make_node('Einsum', names, ['y'], equation=eq, name='einsum')], f'einsum{idx}',
                          [helper.make_tensor_value_info(n, tp, list(s)) for n, s in zip(names, shapes)],
                          [helper.make_tensor_value_info('y', tp, None)])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid('', 12)])
    m.ir_version = 8
    path = os.path.join(WORK, f'einsum{idx}.onnx')
    onnx.save(m, path)
    args = []
    for n, x in zip(names, xs):
        f = os.path.join(WORK, f'einsum{idx}_{n}.npy')
        np.save(f, x)
        args += ['--input', f'{n}={f}']
    out, prof = os.path.join(WORK, f'einsum{idx}_out'), os.path.join(WORK, f'einsum{idx}_profile.json')
    subprocess.run(['rm', '-rf', out])
    r = subprocess.run([TOPLU, 'run', path, *args, '--output', out + '/', '--threads', '2', '-q', '--profile', prof],
                       capture_output=True, text=True)
    what = f'{eq} {shapes} {np.dtype(dt).name}'
    if r.returncode != 0:
        fails.append(f'{what}: toplu run exit {r.returncode}: {r.stderr[-400:]}')
        return
    y = np.load(glob.glob(os.path.join(out, '*.npy'))[0])
    scale = max(float(np.abs(want).max()) if want.size else 0.0, 1.0)
    ok = y.shape == want.shape and (y.size == 0 or float(np.abs(y - want).max()) <= 1e-5 * scale)
    with open(prof) as f:
        impls = [e['args'].get('impl', '') for e in json.load(f)['traceEvents']
                 if e.get('ph') == 'X' and e['args'].get('op_type') == 'Einsum']
    on_gemm = impls == ['toplu:einsum:sgemm']
    err = float(np.abs(y - want).max()) if y.shape == want.shape and y.size else 0.0
    print(f'{"ok" if ok and on_gemm == gemm else "FAIL"}: {what}: {y.shape}, max |diff| {err:.3g}, kernel {impls}')
    if not ok:
        fails.append(f'{what}: {y.shape} against {want.shape}, max |diff| {err:.3g}')
    if on_gemm != gemm:
        fails.append(f'{what}: kernel {impls}, GEMM expected: {gemm}')


for i, c in enumerate(CASES):
    run_case(i, *c)
for f in fails:
    print('FAIL:', f)
sys.exit(1 if fails else 0)
