#!/usr/bin/env python3
"""Integer MatMul (issue 9): oneDNN's integer matmul against the plain-C kernels.

    test_int8_matmul.py TOPLU WORKDIR CASE

Every model runs twice: as toplu runs it here (ops/onednn/qmatmul.c on a CPU
with VNNI) and with DNNL_MAX_CPU_ISA=AVX2 (toplu__cpu_int8_exact is 0 there,
so the exact plain-C kernels of ops/quant_matmul.c run); both are compared
with a reference computed here in numpy (int64 sums, float32 arithmetic in
the ONNX graph's order).  The profile says which kernel ran ("impl": a oneDNN
implementation or toplu:cpu), and on a VNNI CPU the first run must be oneDNN's.

CASE:
  matmul_integer  MatMulInteger on random shapes: 2-D, 3-D x 2-D (the batch
                  folded into M), batched 3-D x 3-D, 4-D with broadcast batch
                  dims ([2,1,M,K] x [1,3,K,N]), 1-D A and 1-D B; uint8 and
                  int8 A; A's zero point absent, a constant, or a graph input
                  (read at run time); B an initializer or a graph input.
                  int32 results: both kernels equal the reference bit for bit.
  qlinear_matmul  QLinearMatMul on the same shapes, per-tensor and per-column
                  b_scale, uint8 and int8 outputs with zero points.  Plain C
                  bit for bit; oneDNN at most one step off on at most 0.1% of
                  the elements (its requantization may round a tie after
                  adding the zero point).
  qdq_matmul      QDQ graphs as quantizers write them: DequantizeLinear(x_q)
                  -> MatMul(DequantizeLinear(W_q)) -> Add(bias) [-> Relu]
                  [-> QuantizeLinear], and Gemm transB with C: one step on
                  oneDNN (toplu.QLinearMatMul, int8 or float out), the float
                  QDQ graph's output within one step on <= 1% of the
                  elements (int8 out) or 1e-5 of the scale (float out); with
                  no VNNI the graph stays float (DequantizeLinear, MatMul,
                  QuantizeLinear steps) and meets the same bounds.
  qlinear_matmul_bias  toplu.QLinearMatMul written in a model file (int32 B
                  and u8 out, float B and float out): oneDNN and plain C
                  against the exact integer reference.
  dynamic         ONNX Runtime's dynamic quantization chain
                  DynamicQuantizeLinear -> MatMulInteger -> Cast -> Mul(x_scale
                  * w_scale) [-> Add(bias)] fused into one
                  toplu.DynamicQuantizeMatMul (the profile shows one step
                  "DynamicQuantizeMatMul+Cast+Mul[+Add]"), per-column and
                  per-tensor w_scale, with and without bias, [B,S,K] and 2-D x,
                  two MatMuls sharing one DynamicQuantizeLinear: equal to the
                  unfused graph computed here (float32, same order) bit for
                  bit, on oneDNN and in plain C.
Exit 0 when every check passes, 1 otherwise.
"""
import glob
import json
import os
import subprocess
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

TOPLU, WORK, CASE = sys.argv[1], sys.argv[2], sys.argv[3]
os.makedirs(WORK, exist_ok=True)
fails = []
rng = np.random.default_rng(11)


def int8_cpu():
    with open('/proc/cpuinfo') as f:
        flags = f.read()
    return ' avx512_vnni' in flags or ' avx_vnni' in flags


VNNI = int8_cpu()
print(f'oneDNN integer matmul on this CPU: {"yes" if VNNI else "no (no VNNI: both runs are the plain-C kernels)"}')


def check(ok, what, detail=''):
    print(('ok: ' if ok else 'FAIL: ') + what + (f' ({detail})' if detail else ''), flush=True)
    if not ok:
        fails.append(what)


def tt(dt):
    return onnx.mapping.NP_TYPE_TO_TENSOR_TYPE[np.dtype(dt)]


def save(nodes, inputs, inits, name, out_type):
    g = helper.make_graph(nodes, 'g', [helper.make_tensor_value_info(n, tt(a.dtype), list(a.shape)) for n, a in inputs],
                          [helper.make_tensor_value_info('y', out_type, None)],
                          initializer=[numpy_helper.from_array(a, n) for n, a in inits])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid('', 13)])
    m.ir_version = 8
    path = os.path.join(WORK, name + '.onnx')
    onnx.save(m, path)
    return path


def run(model, inputs, name, plain_c):
    """Run with every input whole (--batch-size all); returns (y, impl of the first step)."""
    args = [TOPLU, 'run', model, '-q', '--batch-size', 'all', '--threads', '2']
    for n, a in inputs:
        f = os.path.join(WORK, f'{name}_{n}.npy')
        np.save(f, a)
        args += ['--input', f'{n}={f}']
    tag = 'c' if plain_c else 'd'
    out = os.path.join(WORK, f'{name}_{tag}_out')
    prof = os.path.join(WORK, f'{name}_{tag}_prof.json')
    subprocess.run(['rm', '-rf', out])
    env = dict(os.environ)
    if plain_c:
        env['DNNL_MAX_CPU_ISA'] = 'AVX2'
    r = subprocess.run(args + ['--output', out + '/', '--profile', prof], capture_output=True, text=True, env=env)
    if r.returncode != 0:
        check(False, f'{name}: toplu run ({"plain C" if plain_c else "default"})', r.stderr[-600:])
        return None, None
    y = np.load(glob.glob(os.path.join(out, '*.npy'))[0])
    with open(prof) as f:
        steps = [e for e in json.load(f)['traceEvents'] if e.get('ph') == 'X']
    return y, steps


def impl_of(steps, op):
    for e in steps:
        if op in e['args'].get('op_type', ''):
            return e['args'].get('impl', '')
    return None


def qrand(dt, shape):
    lo, hi = (0, 255) if dt == np.uint8 else (-128, 127)
    return rng.integers(lo, hi + 1, size=shape).astype(dt)


def np_matmul_int(a, b):
    """numpy matmul in int64 (1-D operands promoted as ONNX does)."""
    return np.matmul(a.astype(np.int64), b.astype(np.int64))


SHAPES = [  # (A shape, B shape)
    ((5, 40), (40, 24)),
    ((3, 7, 64), (64, 33)),
    ((2, 6, 40), (2, 40, 17)),
    ((2, 1, 5, 24), (1, 3, 24, 16)),
    ((2, 3, 4, 8), (8, 70)),
    ((32,), (32, 20)),
    ((4, 32), (32,)),
]


def case_matmul_integer():
    for i, (sa, sb) in enumerate(SHAPES):
        adt = np.uint8 if i % 2 == 0 else np.int8
        a = qrand(adt, sa)
        b = qrand(np.int8, sb)
        b[b == -128] = -127
        for azp_mode in ('none', 'const', 'input'):
            for b_const in (True, False):
                if azp_mode == 'none' and not b_const:
                    continue
                azp = np.array(qrand(adt, ()), adt)
                ins = ['a', 'b']
                inputs = [('a', a)]
                inits = []
                (inits if b_const else inputs).append(('b', b))
                if azp_mode != 'none':
                    ins.append('azp')
                    (inits if azp_mode == 'const' else inputs).append(('azp', azp))
                    ins.append('bzp')
                    inits.append(('bzp', np.array(0, np.int8)))
                want = np_matmul_int(a.astype(np.int64) - (int(azp) if azp_mode != 'none' else 0), b).astype(np.int32)
                name = f'mmi{i}_{azp_mode}_{int(b_const)}'
                model = save([helper.make_node('MatMulInteger', ins, ['y'])], inputs, inits, name, TensorProto.INT32)
                tag = f'MatMulInteger {list(sa)} x {list(sb)} {np.dtype(adt).name} A, zero point {azp_mode}, B {"constant" if b_const else "an input"}'
                for plain_c in (False, True):
                    y, steps = run(model, inputs, name, plain_c)
                    if y is None:
                        continue
                    impl = impl_of(steps, 'MatMulInteger')
                    ok = y.dtype == np.int32 and y.shape == want.shape and np.array_equal(y, want)
                    check(ok, f'{tag}, {"plain C" if plain_c else "default"} ({impl}): equals the reference bit for bit',
                          '' if y.shape != want.shape else f'max diff {int(np.abs(y.astype(np.int64) - want).max())}')
                    if not plain_c and VNNI:
                        check(impl is not None and not impl.startswith('toplu'), f'{tag}: oneDNN ran it', impl)
                    if plain_c:
                        check(impl == 'toplu:cpu', f'{tag}: the plain-C kernel ran without VNNI', impl)


def ref_qlinear(a, a_s, a_z, b, b_s, y_s, y_z, ydt):
    acc = np_matmul_int(a.astype(np.int64) - int(a_z), b)
    scale = (np.float32(a_s) * np.asarray(b_s, np.float32) / np.float32(y_s)).astype(np.float32)
    v = np.rint(acc.astype(np.float32) * scale) + np.float32(y_z)
    lo, hi = (0, 255) if ydt == np.uint8 else (-128, 127)
    return np.clip(v, lo, hi).astype(ydt)


def case_qlinear_matmul():
    for i, (sa, sb) in enumerate(SHAPES):
        adt = np.uint8 if i % 2 == 0 else np.int8
        ydt = np.int8 if i % 3 == 0 else np.uint8
        a = qrand(adt, sa)
        b = qrand(np.int8, sb)
        n = sb[-1] if len(sb) > 1 else 1
        for per_col in ((False, True) if len(sb) > 1 else (False,)):
            k = sa[-1]
            b_s = rng.uniform(0.5, 1.5, n).astype(np.float32) * 0.01 if per_col else np.array(0.01, np.float32)
            vals = [('a_scale', np.array(0.02, np.float32)), ('a_zero_point', np.array(qrand(adt, ()), adt)),
                    ('b_scale', b_s), ('b_zero_point', np.zeros(n, np.int8) if per_col else np.array(0, np.int8)),
                    ('y_scale', np.array(0.02 * 0.01 * 74 * 74 * np.sqrt(k) / 40, np.float32)),
                    ('y_zero_point', np.array(qrand(ydt, ()), ydt))]
            names = ['a', 'a_scale', 'a_zero_point', 'b', 'b_scale', 'b_zero_point', 'y_scale', 'y_zero_point']
            V = dict(vals)
            want = ref_qlinear(a, V['a_scale'], V['a_zero_point'], b, b_s, V['y_scale'], V['y_zero_point'], ydt)
            name = f'qlmm{i}_{int(per_col)}'
            model = save([helper.make_node('QLinearMatMul', names, ['y'])], [('a', a)], vals + [('b', b)], name, tt(ydt))
            tag = f'QLinearMatMul {list(sa)} x {list(sb)} {np.dtype(adt).name} -> {np.dtype(ydt).name}, b_scale {"per column" if per_col else "per tensor"}'
            for plain_c in (False, True):
                y, steps = run(model, [('a', a)], name, plain_c)
                if y is None:
                    continue
                impl = impl_of(steps, 'QLinearMatMul')
                if y.shape != want.shape or y.dtype != want.dtype:
                    check(False, f'{tag}: dtype and shape', f'{y.dtype}{list(y.shape)} against {want.dtype}{list(want.shape)}')
                    continue
                d = np.abs(y.astype(np.int32) - want.astype(np.int32))
                spread = len(np.unique(want))
                if plain_c:
                    check(d.max() == 0, f'{tag}, plain C: equals the reference bit for bit', f'{int((d > 0).sum())} differ')
                    check(impl == 'toplu:cpu', f'{tag}: the plain-C kernel ran without VNNI', impl)
                else:
                    check(d.max() <= 1 and (d > 0).mean() <= 0.001, f'{tag}, default ({impl}): equals the reference',
                          f'{int((d > 0).sum())} of {d.size} one step off, max {int(d.max())}; {spread} distinct values')
                    if VNNI:
                        check(impl is not None and not impl.startswith('toplu'), f'{tag}: oneDNN ran it', impl)
            check(spread_ok(want), f'{tag}: the reference spreads over the output range', f'{len(np.unique(want))} values')


def spread_ok(want):
    return len(np.unique(want)) >= min(20, want.size // 2)


def ref_dynamic(x, w, ws, bias, wz=0):
    mn, mx = min(np.float32(0), x.min()), max(np.float32(0), x.max())
    s = np.float32((np.float32(mx) - np.float32(mn)) / np.float32(255))
    zp = np.float32(np.clip(np.rint(-np.float32(mn) / s), 0, 255))
    xq = np.clip(np.rint(x / s) + zp, 0, 255).astype(np.int64)
    acc = np.matmul(xq - int(zp), w.astype(np.int64) - np.asarray(wz, np.int64)).astype(np.int32)
    y = acc.astype(np.float32) * (np.float32(s) * ws)
    return y + bias if bias is not None else y


def dyn_nodes(x, tag, w, ws, bias, out, dql=True, wz=None):
    nodes = []
    if dql:
        nodes.append(helper.make_node('DynamicQuantizeLinear', [x], [x + '_q', x + '_s', x + '_z']))
    nodes += [helper.make_node('MatMulInteger', [x + '_q', tag + '_w', x + '_z', tag + '_wz'], [tag + '_acc'], name=tag),
              helper.make_node('Cast', [tag + '_acc'], [tag + '_accf'], to=TensorProto.FLOAT),
              helper.make_node('Mul', [x + '_s', tag + '_ws'], [tag + '_scale']),
              helper.make_node('Mul', [tag + '_accf', tag + '_scale'], [tag + '_mm' if bias is not None else out])]
    inits = [(tag + '_w', w), (tag + '_ws', ws), (tag + '_wz', np.zeros(ws.shape, np.int8) if wz is None else wz)]
    if bias is not None:
        nodes.append(helper.make_node('Add', [tag + '_mm', tag + '_b'], [out]))
        inits.append((tag + '_b', bias))
    return nodes, inits


def case_dynamic():
    # (x shape, N, per-column w_scale, bias, uint8 W with zero point 128: the plain-C kernel's general path)
    cfgs = [((2, 16, 96), 80, True, True, False), ((3, 7, 64), 48, False, True, False), ((20, 128), 24, True, False, False),
            ((1, 128, 768), 768, True, True, False), ((2, 9, 40), 24, True, True, True)]
    for i, (sx, n, per_col, with_bias, w_u8) in enumerate(cfgs):
        k = sx[-1]
        x = rng.normal(0.3, 1.0, sx).astype(np.float32)
        w = rng.integers(0, 256, (k, n)).astype(np.uint8) if w_u8 else rng.integers(-127, 128, (k, n)).astype(np.int8)
        ws = rng.uniform(0.001, 0.01, n).astype(np.float32) if per_col else np.array(0.004, np.float32)
        bias = rng.normal(0, 1, n).astype(np.float32) if with_bias else None
        wz = np.full(ws.shape, 128, np.uint8) if w_u8 else None
        nodes, inits = dyn_nodes('x', 'mm', w, ws, bias, 'y', wz=wz)
        name = f'dyn{i}'
        model = save(nodes, [('x', x)], inits, name, TensorProto.FLOAT)
        want = ref_dynamic(x, w, ws, bias, 128 if w_u8 else 0)
        tag = f'dynamic {list(sx)} x [{k},{n}] {"uint8 W, zero point 128" if w_u8 else "int8 W"}, w_scale {"per column" if per_col else "per tensor"}, {"bias" if with_bias else "no bias"}'
        for plain_c in (False, True):
            y, steps = run(model, [('x', x)], name, plain_c)
            if y is None:
                continue
            ops = [e['args'].get('op_type', '') for e in steps]
            check(len(steps) == 1 and ops[0].startswith('DynamicQuantizeMatMul+Cast+Mul'), f'{tag}: one fused step', ','.join(ops))
            impl = impl_of(steps, 'DynamicQuantizeMatMul')
            scale = float(np.abs(want).max())
            d = float(np.abs(y - want).max()) if y.shape == want.shape else float('inf')
            check(d == 0, f'{tag}, {"plain C" if plain_c else "default"} ({impl}): equals the unfused graph bit for bit',
                  f'max diff {d:g} of {scale:g}')
            if not plain_c:
                if VNNI and not w_u8:
                    check(impl is not None and not impl.startswith('toplu'), f'{tag}: oneDNN ran it', impl)
                if w_u8:
                    check(impl == 'toplu:cpu', f'{tag}: uint8 W stays on the plain-C kernel', impl)
    # Q and K of an attention layer: two MatMulIntegers reading one DynamicQuantizeLinear
    x = rng.normal(0, 2, (2, 9, 32)).astype(np.float32)
    w1, w2 = (rng.integers(-127, 128, (32, 16)).astype(np.int8) for _ in range(2))
    s1, s2 = (rng.uniform(0.001, 0.01, 16).astype(np.float32) for _ in range(2))
    b1 = rng.normal(0, 1, 16).astype(np.float32)
    n1, i1 = dyn_nodes('x', 'q', w1, s1, b1, 'yq')
    n2, i2 = dyn_nodes('x', 'k', w2, s2, None, 'yk', dql=False)
    model = save(n1 + n2 + [helper.make_node('Sub', ['yq', 'yk'], ['y'])], [('x', x)], i1 + i2, 'dyn_shared', TensorProto.FLOAT)
    want = ref_dynamic(x, w1, s1, b1) - ref_dynamic(x, w2, s2, None)
    for plain_c in (False, True):
        y, steps = run(model, [('x', x)], 'dyn_shared', plain_c)
        if y is None:
            continue
        ops = sorted(e['args'].get('op_type', '') for e in steps)
        check(ops == ['DynamicQuantizeMatMul+Cast+Mul', 'DynamicQuantizeMatMul+Cast+Mul+Add', 'Sub'],
              f'shared DynamicQuantizeLinear ({"plain C" if plain_c else "default"}): both chains fused, it is gone', ','.join(ops))
        d = float(np.abs(y - want).max())
        check(d == 0, 'shared DynamicQuantizeLinear: equals the unfused graph bit for bit', f'max diff {d:g}')


def qdq_matmul_model(name, xq, sx, zx, wq, sw, bias, gemm_trans=False, out_q=None, relu=False):
    """DequantizeLinear(x_q) -> MatMul(DequantizeLinear(W_q)) -> Add(bias) [-> Relu] [-> QuantizeLinear] as a
    quantizer writes it; gemm_trans: a Gemm with transB and C instead (W_q stored [N, K])."""
    per_col = np.ndim(sw) == 1
    inits = [('sx', np.array(sx, np.float32)), ('zx', np.array(zx, xq.dtype)),
             ('wq', wq.T.copy() if gemm_trans else wq), ('sw', np.asarray(sw, np.float32)),
             ('zw', np.zeros(np.shape(sw), np.int8)), ('bias', bias)]
    nodes = [helper.make_node('DequantizeLinear', ['x', 'sx', 'zx'], ['xf']),
             helper.make_node('DequantizeLinear', ['wq', 'sw', 'zw'], ['wf'], **({'axis': 0 if gemm_trans else 1} if per_col else {}))]
    if gemm_trans:
        nodes.append(helper.make_node('Gemm', ['xf', 'wf', 'bias'], ['mb'], transB=1))
    else:
        nodes += [helper.make_node('MatMul', ['xf', 'wf'], ['m']), helper.make_node('Add', ['m', 'bias'], ['mb'])]
    cur = 'mb'
    if relu:
        nodes.append(helper.make_node('Relu', [cur], ['r']))
        cur = 'r'
    if out_q is not None:
        sy, zy = out_q
        inits += [('sy', np.array(sy, np.float32)), ('zy', zy)]
        nodes.append(helper.make_node('QuantizeLinear', [cur, 'sy', 'zy'], ['y']))
        out_type = tt(zy.dtype)
    else:
        nodes.append(helper.make_node('Identity', [cur], ['y']))
        out_type = TensorProto.FLOAT
    return save(nodes, [('x', xq)], inits, name, out_type)


def ref_qdq_float(xq, sx, zx, wq, sw, bias, relu=False):
    """The float graph: float32 dequantized operands, the product in float64 (float32 rounding aside)."""
    xf = ((xq.astype(np.int32) - int(zx)).astype(np.float32) * np.float32(sx)).astype(np.float64)
    wf = (wq.astype(np.float32) * np.asarray(sw, np.float32)).astype(np.float64)
    y = np.matmul(xf, wf) + bias.astype(np.float64)
    return np.maximum(y, 0) if relu else y


def case_qdq_matmul():
    # (x shape, N, x dtype, per-column w scale, Gemm transB, output: 'u8' | 's8' | 'float', relu)
    cfgs = [((2, 16, 96), 80, np.uint8, True, False, 'u8', False),
            ((24, 64), 40, np.int8, False, True, 's8', False),
            ((3, 10, 48), 32, np.uint8, True, False, 'float', True),
            ((12, 80), 24, np.uint8, True, True, 'float', False),
            ((1, 128, 768), 768, np.uint8, True, False, 'u8', False)]
    for i, (sx_shape, n, xdt, per_col, gemm, out, relu) in enumerate(cfgs):
        k = sx_shape[-1]
        xq = qrand(xdt, sx_shape)
        zx = np.array(qrand(xdt, ()), xdt) if xdt == np.uint8 else np.array(0, np.int8)
        sx = np.float32(0.03)
        wq = rng.integers(-127, 128, (k, n)).astype(np.int8)
        sw = rng.uniform(0.002, 0.006, n).astype(np.float32) if per_col else np.float32(0.004)
        bias = rng.normal(0, 2, n).astype(np.float32)
        want_f = ref_qdq_float(xq, sx, zx, wq, sw, bias, relu)
        out_q = None
        if out != 'float':
            ydt = np.uint8 if out == 'u8' else np.int8
            sy = np.float32(np.abs(want_f).max() / 100)
            zy = np.array(100 if ydt == np.uint8 else 0, ydt)
            out_q = (sy, zy)
        name = f'qdqmm{i}'
        model = qdq_matmul_model(name, xq, sx, zx, wq, sw, bias, gemm, out_q, relu)
        tag = f'QDQ {"Gemm transB" if gemm else "MatMul"} {list(sx_shape)} x [{k},{n}] {np.dtype(xdt).name}, ' \
              f'w_scale {"per column" if per_col else "per tensor"}, {out} out{" + Relu" if relu else ""}'
        for plain in (False, True):
            y, steps = run(model, [('x', xq)], name, plain)
            if y is None:
                continue
            ops = [e['args'].get('op_type', '') for e in steps]
            impl = steps[0]['args'].get('impl', '') if steps else ''
            if VNNI and not plain:
                check(len(ops) == 1 and (out == 'float' or ops[0].endswith('+QuantizeLinear')) and impl and not impl.startswith('toplu'),
                      f'{tag}: one integer matmul step on oneDNN', f'{ops} {impl}')
                # its FLOPs are the product's 2 M N K (they counted one per output element until 2026-12-05)
                fl, want_fl = steps[0]['args'].get('flops'), 2 * int(np.prod(sx_shape)) * n
                check(fl == want_fl, f'{tag}: the step counts 2 M N K operations', f'{fl} against {want_fl}')
            else:
                check('DequantizeLinear' in ops and any(o.startswith('MatMul') or o.startswith('Gemm') for o in ops) and
                      (out == 'float' or 'QuantizeLinear' in ops), f'{tag}, no VNNI: the float graph', f'{ops}')
            if out == 'float':
                d = float(np.abs(y.astype(np.float64) - want_f).max())
                scale = float(np.abs(want_f).max())
                check(d <= 1e-5 * scale, f'{tag} ({"plain" if plain else "default"}): equals the float graph', f'max diff {d:.3g} of {scale:.3g}')
            else:
                lo, hi = (0, 255) if ydt == np.uint8 else (-128, 127)
                wq_ = np.clip(np.rint(want_f / np.float64(sy)) + int(zy), lo, hi)
                dd = np.abs(y.astype(np.int32) - wq_.astype(np.int32))
                check(y.dtype == ydt and dd.max() <= 1 and (dd > 0).mean() <= 0.01,
                      f'{tag} ({"plain" if plain else "default"}): the float QDQ graph\'s output within one step, on <= 1% of elements',
                      f'{int((dd > 0).sum())} of {dd.size} one step off, max {int(dd.max())}; {len(np.unique(wq_))} levels')


def case_qlinear_matmul_bias():
    """toplu.QLinearMatMul written in a file: oneDNN and plain C against the exact reference."""
    for i, (sa, n, per_col, out) in enumerate((((2, 9, 40), 24, True, 'u8'), ((7, 33), 17, False, 'float'),
                                               ((3, 5, 64), 48, True, 'float'))):
        k = sa[-1]
        a = qrand(np.uint8, sa)
        b = rng.integers(-127, 128, (k, n)).astype(np.int8)
        bs = rng.uniform(0.5, 1.5, n).astype(np.float32) * 0.01 if per_col else np.array(0.01, np.float32)
        az = np.array(qrand(np.uint8, ()), np.uint8)
        acc = np_matmul_int(a.astype(np.int64) - int(az), b)
        vals = [('a_scale', np.array(0.02, np.float32)), ('a_zero_point', az), ('b_scale', bs),
                ('b_zero_point', np.zeros(np.shape(bs), np.int8))]
        if out == 'float':
            B = rng.normal(0, 1, n).astype(np.float32)
            want = acc.astype(np.int32).astype(np.float32) * (np.float32(0.02) * bs) + B
            names = ['a', 'a_scale', 'a_zero_point', 'b', 'b_scale', 'b_zero_point', '', '', 'B']
            yt = TensorProto.FLOAT
        else:
            B = rng.integers(-5000, 5000, n).astype(np.int32)
            ys = np.float32(0.02 * 0.01 * 74 * 74 * np.sqrt(k) / 40)
            yz = np.array(120, np.uint8)
            vals += [('y_scale', np.array(ys, np.float32)), ('y_zero_point', yz)]
            scale = (np.float32(0.02) * bs / ys).astype(np.float32)
            want = np.clip(np.rint((acc + B).astype(np.float32) * scale) + np.float32(120), 0, 255).astype(np.uint8)
            names = ['a', 'a_scale', 'a_zero_point', 'b', 'b_scale', 'b_zero_point', 'y_scale', 'y_zero_point', 'B']
            yt = TensorProto.UINT8
        vals += [('B', B), ('b', b)]
        node = helper.make_node('QLinearMatMul', names, ['y'], domain='toplu')
        g = helper.make_graph([node], 'g', [helper.make_tensor_value_info('a', TensorProto.UINT8, list(sa))],
                              [helper.make_tensor_value_info('y', yt, None)],
                              initializer=[numpy_helper.from_array(v, nm) for nm, v in vals])
        m = helper.make_model(g, opset_imports=[helper.make_opsetid('', 13), helper.make_opsetid('toplu', 1)])
        m.ir_version = 8
        path = os.path.join(WORK, f'qlmmb{i}.onnx')
        onnx.save(m, path)
        tag = f'toplu.QLinearMatMul {list(sa)} x [{k},{n}] B {B.dtype.name}, {out} out'
        for plain in (False, True):
            y, steps = run(path, [('a', a)], f'qlmmb{i}', plain)
            if y is None:
                continue
            impl = impl_of(steps, 'QLinearMatMul')
            d = np.abs(y.astype(np.float64) - want.astype(np.float64))
            if plain or out == 'float':
                check(d.max() == 0, f'{tag}, {"plain C" if plain else "default"} ({impl}): equals the reference bit for bit',
                      f'max diff {d.max():.3g}')
            else:
                check(d.max() <= 1 and (d > 0).mean() <= 0.001, f'{tag}, default ({impl}): equals the reference',
                      f'{int((d > 0).sum())} one step off')
            check((impl == 'toplu:cpu') == (plain or not VNNI), f'{tag}: {"plain C" if plain or not VNNI else "oneDNN"} ran it', impl)


{'matmul_integer': case_matmul_integer, 'qlinear_matmul': case_qlinear_matmul, 'dynamic': case_dynamic,
 'qdq_matmul': case_qdq_matmul, 'qlinear_matmul_bias': case_qlinear_matmul_bias}[CASE]()
print(f'{len(fails)} failed' if fails else 'all passed')
sys.exit(1 if fails else 0)
