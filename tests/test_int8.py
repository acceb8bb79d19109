#!/usr/bin/env python3
"""Integer convolution (issue 9): QLinearConv and the QDQ Conv fusion.

    test_int8.py TOPLU WORKDIR CASE [TOPLU_BENCH]

CASE:
  qlinearconv  QLinearConv models with every parameter an initializer (the
               oneDNN integer path) and the same models with the parameters
               as graph inputs (the plain-C path), uint8/int8 in and out,
               per-tensor and per-channel weight scales, zero points, groups
               (depthwise), strides, padding: both paths against an exact
               integer reference computed here with numpy (int64
               accumulation, float32 requantization, round half to even).
               The plain-C path must be exact; oneDNN's may differ by one
               step on at most 0.1% of the elements (its depthwise kernel
               rounds the float requantization in another order).
  qdq          DequantizeLinear -> Conv -> [Relu | Clip] -> QuantizeLinear
               graphs as quantizers write them: toplu fuses them into one
               integer convolution (the profile's step is "Conv+...+
               QuantizeLinear" writing int8) and the outputs equal the exact
               integer reference; a Relu the quantization makes redundant
               goes; a Clip(0, 6) before a quantization whose top is above
               6 keeps the float Conv (ONNX Runtime does the same, and its
               outputs are the reference toplu's tests compare with);
               with toplu_model_options_t.qdq_int8_all (TOPLU_BENCH
               --qdq-int8-all) that Conv runs in int8 with the Clip as its
               post-op;
               DequantizeLinear -> Relu / Min(per-channel) / Pad ->
               QuantizeLinear around the integer convolutions runs on the
               integers and folds into them (no float step left);
               DequantizeLinear -> MaxPool -> QuantizeLinear with one scale
               and zero point is an integer MaxPool, exact, in the integer
               convolution's layout before it;
               DequantizeLinear + DequantizeLinear -> Add / Mul ->
               QuantizeLinear becomes com.microsoft QLinearAdd / QLinearMul
               on the integers, bit-identical to the float nodes (the same
               model loaded with its QuantizeLinear output kept float and
               quantized here).
  qdq_layout   a float Conv -> QuantizeLinear, an integer Conv ->
               DequantizeLinear -> a float Conv: the per-tensor
               QuantizeLinear and DequantizeLinear run on the layout the
               convolution wrote (no Reorder to plain and back around them),
               bit for bit equal to the plain kernels (TOPLU_NO_BLOCKED);
               with 24 channels (a padded 16-channel block) as well.
  qdq_lookup   DequantizeLinear -> f -> QuantizeLinear for f Sigmoid,
               HardSwish, LeakyRelu, GELU written out (Div, Erf, Add, Mul,
               Mul), SiLU (Mul(x, Sigmoid(x))), x * HardSigmoid(x), a
               HardSwish between scalar Mul/Add steps (PaddleOCR's
               PP-LCNetV3 blocks) and scalar Mul/Sub/Div steps alone: one
               toplu.QLinearLookup step (a table of f's 256 quantized
               results) on uint8 and int8, equal to the unfused graph
               (TOPLU_NO_FUSE=qdq_lookup) and within one step of numpy's f.
  qdq_binary_layout  two integer convolutions -> DequantizeLinear each ->
               Add (Mul) -> QuantizeLinear: the QLinearAdd (QLinearMul) on
               the convolutions' uint8 layout, fewer Reorder steps, equal to
               the plain kernel (TOPLU_NO_BLOCKED=QLinearAdd,QLinearMul).
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
TOPLU_BENCH = sys.argv[4] if len(sys.argv) > 4 else None


def int8_cpu():
    """Does toplu run integer convolutions here (ops/kernel.h toplu__cpu_int8_exact:
    oneDNN's ISA has VNNI)?  DNNL_MAX_CPU_ISA caps it, as the *_no_vnni tests do."""
    cap = os.environ.get('DNNL_MAX_CPU_ISA', '').upper()
    if cap and cap not in ('ALL', 'AVX512_CORE_VNNI', 'AVX512_CORE_BF16', 'AVX512_CORE_AMX', 'AVX2_VNNI'):
        return False
    with open('/proc/cpuinfo') as f:
        flags = f.read()
    return ' avx512_vnni' in flags or ' avx_vnni' in flags


INT8 = int8_cpu()
print(f'integer convolutions on this CPU: {"yes" if INT8 else "no (no VNNI: QDQ Convs stay float, QLinearConv runs in plain C)"}')
os.makedirs(WORK, exist_ok=True)
fails = []
rng = np.random.default_rng(7)


def check(ok, what, detail=''):
    print(('ok: ' if ok else 'FAIL: ') + what + (f' ({detail})' if detail else ''), flush=True)
    if not ok:
        fails.append(what)
    return ok


def qrange(dt):
    return (0, 255) if dt == np.uint8 else (-128, 127)


def ref_qconv(x, xs, xz, w, ws, wz, ys, yz, b, group, stride, pads, ydt, post=None):
    """Exact QLinearConv: int64 accumulation, float32 requantization."""
    n, c, h, wd = x.shape
    m, icg, kh, kw = w.shape
    xp = np.pad(x.astype(np.int64) - int(xz), ((0, 0), (0, 0), (pads[0], pads[2]), (pads[1], pads[3])))
    oh = (h + pads[0] + pads[2] - kh) // stride + 1
    ow = (wd + pads[1] + pads[3] - kw) // stride + 1
    acc = np.zeros((n, m, oh, ow), np.int64)
    ocg = m // group
    wz = np.broadcast_to(np.asarray(wz, np.int64), (m,))
    for oc in range(m):
        g = oc // ocg
        for ic in range(icg):
            for ky in range(kh):
                for kx in range(kw):
                    acc[:, oc] += xp[:, g * icg + ic, ky:ky + stride * oh:stride, kx:kx + stride * ow:stride] * \
                        (int(w[oc, ic, ky, kx]) - int(wz[oc]))
    if b is not None:
        acc += b[None, :, None, None]
    wsb = np.broadcast_to(np.asarray(ws, np.float32), (m,))[None, :, None, None]
    if post is None:
        v = acc.astype(np.float32) * ((np.float32(xs) * wsb) / np.float32(ys)).astype(np.float32)
    else:
        real = acc.astype(np.float32) * (np.float32(xs) * wsb).astype(np.float32)
        real = post(real)
        v = real / np.float32(ys)
    lo, hi = qrange(ydt)
    return np.clip(np.rint(v) + np.float32(yz), lo, hi).astype(ydt)


def save(model, name):
    model.ir_version = 8
    path = os.path.join(WORK, name)
    onnx.save(model, path)
    return path


def run(model, x, name, profile=False):
    xin = os.path.join(WORK, name + '_x.npy')
    np.save(xin, x)
    out = os.path.join(WORK, name + '_out')
    subprocess.run(['rm', '-rf', out])
    cmd = [TOPLU, 'run', model, '--input', 'x=' + xin, '--output', out + '/', '-q', '--threads', '2']
    prof = os.path.join(WORK, name + '_profile.json')
    if profile:
        cmd += ['--profile', prof]
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode != 0:
        check(False, f'{name}: toplu run', r.stderr[-600:])
        return None, None
    y = np.load(glob.glob(os.path.join(out, '*.npy'))[0])
    steps = None
    if profile:
        with open(prof) as f:
            steps = [e for e in json.load(f)['traceEvents'] if e.get('ph') == 'X']
    return y, steps


def case_qlinearconv():
    # (N, C, H, W, M, k, group, stride, pad, x dtype, y dtype, per-channel w_scale)
    cfgs = [(2, 16, 12, 12, 32, 3, 1, 1, 1, np.uint8, np.uint8, True),
            (2, 32, 12, 12, 32, 3, 32, 1, 1, np.int8, np.int8, False),
            (1, 8, 9, 9, 16, 1, 1, 2, 0, np.int8, np.uint8, True),
            (3, 24, 10, 10, 24, 3, 24, 2, 1, np.uint8, np.int8, True),
            (2, 12, 7, 11, 20, 3, 2, 1, 1, np.uint8, np.uint8, False)]
    for i, (n, c, h, wd, m, k, g, s, p, xdt, ydt, perch) in enumerate(cfgs):
        lo, hi = qrange(xdt)
        x = rng.integers(lo, hi + 1, size=(n, c, h, wd)).astype(xdt)
        w = rng.integers(-127, 128, size=(m, c // g, k, k)).astype(np.int8)
        vals = {
            'x_scale': np.array(0.02, np.float32),
            'x_zero_point': np.array(rng.integers(lo, hi + 1), xdt),
            'w': w,
            'w_scale': rng.uniform(0.001, 0.01, size=m).astype(np.float32) if perch else np.array(0.005, np.float32),
            'w_zero_point': np.zeros(m, np.int8) if perch else np.array(0, np.int8),
            'y_scale': np.array(0.05, np.float32),
            'y_zero_point': np.array(rng.integers(*qrange(ydt)), ydt),
            'B': rng.integers(-3000, 3000, size=m).astype(np.int32),
        }
        names = list(vals)
        want = ref_qconv(x, vals['x_scale'], vals['x_zero_point'], w, vals['w_scale'], 0, vals['y_scale'],
                         vals['y_zero_point'], vals['B'], g, s, [p] * 4, ydt)
        for const in (True, False):
            node = helper.make_node('QLinearConv', ['x'] + names, ['y'], kernel_shape=[k, k], group=g,
                                    strides=[s, s], pads=[p] * 4)
            xt = TensorProto.UINT8 if xdt == np.uint8 else TensorProto.INT8
            inputs = [helper.make_tensor_value_info('x', xt, ['N', c, h, wd])]
            inits = []
            for nm in names:
                if const:
                    inits.append(numpy_helper.from_array(vals[nm], nm))
                else:
                    inputs.append(helper.make_tensor_value_info(
                        nm, onnx.mapping.NP_TYPE_TO_TENSOR_TYPE[vals[nm].dtype], list(vals[nm].shape)))
            yt = TensorProto.UINT8 if ydt == np.uint8 else TensorProto.INT8
            graph = helper.make_graph([node], 'g', inputs, [helper.make_tensor_value_info('y', yt, None)], initializer=inits)
            model = save(helper.make_model(graph, opset_imports=[helper.make_opsetid('', 13)]), f'qconv{i}_{int(const)}.onnx')
            tag = f'QLinearConv config {i} ({"initializers: oneDNN" if const and INT8 else "initializers: plain C, no VNNI" if const else "inputs: plain C"})'
            if const:
                y, _ = run(model, x, f'qconv{i}')
            else:
                # parameters as inputs: one .npy per input, whole (no batch dim)
                args = [TOPLU, 'run', model, '--input', 'x=' + os.path.join(WORK, f'qconv{i}_xin.npy')]
                np.save(os.path.join(WORK, f'qconv{i}_xin.npy'), x)
                for nm in names:
                    f = os.path.join(WORK, f'qconv{i}_{nm}.npy')
                    np.save(f, vals[nm])
                    args += ['--input', f'{nm}={f}']
                out = os.path.join(WORK, f'qconv{i}_ref_out')
                subprocess.run(['rm', '-rf', out])
                r = subprocess.run(args + ['--output', out + '/', '-q', '--batch-size', 'all'], capture_output=True, text=True)
                if r.returncode != 0:
                    check(False, tag + ': toplu run', r.stderr[-600:])
                    continue
                y = np.load(glob.glob(os.path.join(out, '*.npy'))[0])
            if y is None:
                continue
            check(y.dtype == want.dtype and y.shape == want.shape, f'{tag}: dtype and shape',
                  f'{y.dtype}{list(y.shape)} against {want.dtype}{list(want.shape)}')
            if y.shape != want.shape:
                continue
            d = np.abs(y.astype(np.int32) - want.astype(np.int32))
            if const:
                check(d.max() <= 1 and (d > 0).mean() <= 0.001, f'{tag}: equals the exact integer reference',
                      f'{int((d > 0).sum())} of {d.size} elements one step off, max {int(d.max())}')
            else:
                check(d.max() == 0, f'{tag}: equals the exact integer reference bit for bit',
                      f'{int((d > 0).sum())} elements differ, max {int(d.max())}')


def qdq_model(name, x_dt, xs, xz, convs, tail=None):
    """x (x_dt) -> DequantizeLinear -> [Conv -> act -> QuantizeLinear -> DequantizeLinear]... -> output float.
    convs: list of dicts (w int8 [M,C,k,k], ws, b float or None, act None|'relu'|('clip', lo, hi), ys, yz,
    group, pads, between: None|'relu'|'min'|'pad' (a QDQ op on the int8 output before the next conv))."""
    nodes, inits = [], []
    xt = TensorProto.UINT8 if x_dt == np.uint8 else TensorProto.INT8

    def init(nm, a):
        inits.append(numpy_helper.from_array(np.asarray(a), nm))
        return nm
    cur = 'x'
    s, z = init('xs', np.float32(xs)), init('xz', np.array(xz, x_dt))
    nodes.append(helper.make_node('DequantizeLinear', [cur, s, z], ['x_f']))
    cur = 'x_f'
    for i, cv in enumerate(convs):
        wq = init(f'w{i}_q', cv['w'])
        wsn = init(f'w{i}_s', cv['ws'])
        wzn = init(f'w{i}_z', np.zeros(np.shape(cv['ws']), np.int8))
        dq_args = dict(axis=0) if np.ndim(cv['ws']) == 1 else {}
        nodes.append(helper.make_node('DequantizeLinear', [wq, wsn, wzn], [f'w{i}'], **dq_args))
        ins = [cur, f'w{i}']
        if cv['b'] is not None:
            ins.append(init(f'b{i}', cv['b']))
        nodes.append(helper.make_node('Conv', ins, [f'c{i}'], group=cv['group'], pads=cv['pads'],
                                      kernel_shape=list(cv['w'].shape[2:])))
        out = f'c{i}'
        if cv['act'] == 'relu':
            nodes.append(helper.make_node('Relu', [out], [f'a{i}']))
            out = f'a{i}'
        elif cv['act']:
            _, lo, hi = cv['act']
            nodes.append(helper.make_node('Clip', [out, init(f'lo{i}', np.float32(lo)), init(f'hi{i}', np.float32(hi))], [f'a{i}']))
            out = f'a{i}'
        ydt = np.int8 if isinstance(cv['yz'], np.int8) else np.uint8
        ysn, yzn = init(f'ys{i}', np.float32(cv['ys'])), init(f'yz{i}', np.array(cv['yz'], ydt))
        nodes.append(helper.make_node('QuantizeLinear', [out, ysn, yzn], [f'q{i}']))
        nodes.append(helper.make_node('DequantizeLinear', [f'q{i}', ysn, yzn], [f'd{i}']))
        cur = f'd{i}'
        if cv.get('between'):
            kind = cv['between']
            if kind == 'relu':
                nodes.append(helper.make_node('Relu', [cur], [f'e{i}']))
            elif kind == 'min':
                bound = cv['min_bound']
                nodes.append(helper.make_node('Min', [cur, init(f'mb{i}', bound)], [f'e{i}']))
            elif kind == 'pad':
                nodes.append(helper.make_node('Pad', [cur, init(f'pp{i}', np.array([0, 0, 1, 1, 0, 0, 1, 1], np.int64))], [f'e{i}']))
            elif kind == 'maxpool':  # ResNet's stem pooling
                nodes.append(helper.make_node('MaxPool', [cur], [f'e{i}'], kernel_shape=[3, 3], strides=[2, 2],
                                              pads=[1, 1, 1, 1]))
            nodes.append(helper.make_node('QuantizeLinear', [f'e{i}', ysn, yzn], [f'eq{i}']))
            nodes.append(helper.make_node('DequantizeLinear', [f'eq{i}', ysn, yzn], [f'ed{i}']))
            cur = f'ed{i}'
    nodes.append(helper.make_node('Identity', [cur], ['y']))
    graph = helper.make_graph(nodes, 'qdq', [helper.make_tensor_value_info('x', xt, ['N', convs[0]['w'].shape[1] * convs[0]['group'], 10, 10])],
                              [helper.make_tensor_value_info('y', TensorProto.FLOAT, None)], initializer=inits)
    return save(helper.make_model(graph, opset_imports=[helper.make_opsetid('', 13)]), name)


def case_qdq():
    n, c = 2, 16
    x = rng.integers(0, 256, size=(n, c, 10, 10)).astype(np.uint8)
    xs, xz = np.float32(0.03), 120
    w0 = rng.integers(-127, 128, size=(32, c, 3, 3)).astype(np.int8)
    ws0 = rng.uniform(0.002, 0.006, size=32).astype(np.float32)
    b0q = rng.integers(-2000, 2000, size=32).astype(np.int32)
    b0 = (b0q.astype(np.float32) * (xs * ws0)).astype(np.float32)
    w1 = rng.integers(-127, 128, size=(32, 1, 3, 3)).astype(np.int8)
    ys0, yz0 = np.float32(0.04), np.int8(-128)
    ys1, yz1 = np.float32(0.05), np.int8(-128)
    mb_q = rng.integers(-60, 100, size=32).astype(np.int8)  # per-channel bounds as the int8 levels
    mb = ((mb_q.astype(np.float32) - np.float32(yz1)) * ys1).astype(np.float32).reshape(1, 32, 1, 1)
    convs = [dict(w=w0, ws=ws0, b=b0, act='relu', ys=ys0, yz=yz0, group=1, pads=[1, 1, 1, 1], between='pad'),
             dict(w=w1, ws=np.float32(0.004), b=None, act=None, ys=ys1, yz=yz1, group=32, pads=[0, 0, 0, 0],
                  between='min', min_bound=mb)]
    model = qdq_model('qdq_chain.onnx', np.uint8, xs, xz, convs)
    y, steps = run(model, x, 'qdq_chain', profile=True)
    if y is not None:
        # exact: conv0 (+relu, redundant at zero point -128) -> pad with the zero point -> conv1 (depthwise)
        # -> per-channel min at the int8 levels
        q0 = ref_qconv(x, xs, xz, w0, ws0, 0, ys0, yz0, b0q, 1, 1, [1, 1, 1, 1], np.int8)
        q0p = np.pad(q0, ((0, 0), (0, 0), (1, 1), (1, 1)), constant_values=yz0)
        q1 = ref_qconv(q0p, ys0, yz0, w1, np.float32(0.004), 0, ys1, yz1, None, 32, 1, [0, 0, 0, 0], np.int8)
        q1 = np.minimum(q1, mb_q.reshape(1, 32, 1, 1))
        want = (q1.astype(np.float32) - np.float32(yz1)) * ys1
        d = np.abs(y - want) / ys1
        check(y.shape == want.shape and d.max() <= 1.01 and (d > 0.5).mean() <= 0.001,
              'QDQ chain (Conv+Relu, Pad, depthwise Conv, per-channel Min) equals the exact integer reference',
              f'max {d.max():.2f} steps, {(d > 0.5).sum()} of {d.size} elements off')
        names = [e['cat'] for e in steps]
        convs_int8 = [e for e in steps if 'Conv' in e['cat'] and 'QuantizeLinear' in e['cat']
                      and e['args']['outputs'][0]['dtype'] in ('int8', 'uint8')]
        if INT8:
            check(len(convs_int8) == 2, 'both convolutions run as integer convolutions writing int8', ', '.join(names))
            left = [nm for nm in names if nm in ('Pad', 'Min', 'Relu', 'Max', 'QuantizeLinear', 'QuantizeDequantizeLinear')]
            check(not left, 'the Pad, the Relu and the per-channel Min fold into the integer convolutions', ', '.join(names))
            check(any('Min' in e['cat'] for e in convs_int8), 'the per-channel Min is a post-op of the depthwise convolution',
                  ', '.join(names))
        else:
            convs = [e for e in steps if 'Conv' in e['cat']]
            check(not convs_int8 and len(convs) == 2 and all(e['args']['outputs'][0]['dtype'] == 'float32' for e in convs),
                  'without VNNI both convolutions stay float', ', '.join(names))
    # DequantizeLinear -> MaxPool -> QuantizeLinear (one scale and zero point, as toplu quantize and ONNX Runtime's
    # quantizer write it): MaxPool on the integers, after an integer convolution (its blocked layout) and on a
    # graph input (plain), exact
    def ref_maxpool(q):  # 3x3, stride 2, pads 1: the padding never wins
        lo = np.iinfo(q.dtype).min
        p = np.pad(q, ((0, 0), (0, 0), (1, 1), (1, 1)), constant_values=lo)
        h, w = (q.shape[2] - 1) // 2 + 1, (q.shape[3] - 1) // 2 + 1
        return np.max([p[:, :, i:i + 2 * h:2, j:j + 2 * w:2] for i in range(3) for j in range(3)], axis=0)
    ys2, yz2 = np.float32(0.05), np.uint8(0)  # a Relu before it: zero point 0, the Relu redundant
    convs = [dict(w=w0, ws=ws0, b=b0, act='relu', ys=ys2, yz=yz2, group=1, pads=[1, 1, 1, 1], between='maxpool')]
    model = qdq_model('qdq_maxpool.onnx', np.uint8, xs, xz, convs)
    y, steps = run(model, x, 'qdq_maxpool', profile=True)
    if y is not None:
        q0 = ref_qconv(x, xs, xz, w0, ws0, 0, ys2, yz2, b0q, 1, 1, [1, 1, 1, 1], np.uint8)
        want = (ref_maxpool(q0).astype(np.float32) - np.float32(yz2)) * ys2
        d = np.abs(y - want) / ys2
        check(y.shape == want.shape and d.max() <= 1.01 and (d > 0.5).mean() <= 0.001,
              'QDQ Conv+Relu -> MaxPool equals the exact integer reference',
              f'{y.shape} {want.shape} max {d.max():.2f} steps, {(d > 0.5).sum()} of {d.size} elements off')
        pools = [e for e in steps if e['cat'] == 'MaxPool']
        names = [e['cat'] for e in steps]
        check(len(pools) == 1 and pools[0]['args']['inputs'][0]['dtype'] == 'uint8' and
              pools[0]['args']['outputs'][0]['dtype'] == 'uint8' and names.count('QuantizeLinear') <= (0 if INT8 else 1)
              and 'QuantizeDequantizeLinear' not in names,
              'the MaxPool runs on the uint8 integers, no QuantizeLinear after it' +
              (' nor before it' if INT8 else ' (before it, the float Conv\'s)'), ', '.join(names))
        if INT8:
            check(pools[0]['args']['inputs'][0]['layout'] != 'plain',
                  "after an integer convolution it pools the convolution's own layout (no reorder)",
                  pools[0]['args']['inputs'][0]['layout'])
    # on a graph input (plain layout): uint8 3x3 stride 2 pads 1; int8 2x2 stride 1 dilation 2
    xq = rng.integers(0, 256, size=(2, 3, 9, 9)).astype(np.uint8)
    xs8 = rng.integers(-128, 128, size=(2, 3, 9, 11)).astype(np.int8)
    want8 = np.max([xs8[:, :, i:i + 7, j:j + 9] for i in (0, 2) for j in (0, 2)], axis=0)
    for dt, xin, attrs, want in ((np.uint8, xq, dict(kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1]), ref_maxpool(xq)),
                                 (np.int8, xs8, dict(kernel_shape=[2, 2], dilations=[2, 2]), want8)):
        tp = TensorProto.UINT8 if dt == np.uint8 else TensorProto.INT8
        nodes = [helper.make_node('DequantizeLinear', ['x', 's', 'z'], ['xf']),
                 helper.make_node('MaxPool', ['xf'], ['p'], **attrs),
                 helper.make_node('QuantizeLinear', ['p', 's', 'z'], ['y'])]
        inits = [numpy_helper.from_array(np.float32(0.1), 's'), numpy_helper.from_array(np.array(7, dt), 'z')]
        graph = helper.make_graph(nodes, 'qdq_pool', [helper.make_tensor_value_info('x', tp, ['N', 3, 9, xin.shape[3]])],
                                  [helper.make_tensor_value_info('y', tp, None)], initializer=inits)
        tag = f'qdq_pool_plain_{np.dtype(dt).name}'
        model = save(helper.make_model(graph, opset_imports=[helper.make_opsetid('', 13)]), tag + '.onnx')
        y, steps = run(model, xin, tag, profile=True)
        if y is not None:
            check(y.dtype == dt and np.array_equal(y, want) and [e['cat'] for e in steps] == ['MaxPool'],
                  f'DequantizeLinear -> MaxPool {attrs} -> QuantizeLinear on a {np.dtype(dt).name} graph input: one '
                  'integer MaxPool, exact', f'{[e["cat"] for e in steps]} {y.shape} {want.shape}')
    # Clip(0, 6) before a quantization whose top (255 - zp) * scale is above 6: stays a float Conv
    ys, yz = np.float32(0.023529412), np.int8(-128)  # top 6.0000001, as MobileNetV2 int8 writes it
    convs = [dict(w=w0, ws=ws0, b=b0, act=('clip', 0.0, 6.0), ys=ys, yz=yz, group=1, pads=[1, 1, 1, 1])]
    model = qdq_model('qdq_clip.onnx', np.uint8, xs, xz, convs)
    y, steps = run(model, x, 'qdq_clip', profile=True)
    if y is not None:
        conv = [e for e in steps if 'Conv' in e['cat']]
        check(len(conv) == 1 and conv[0]['args']['outputs'][0]['dtype'] == 'float32',
              'a Conv with a Clip the quantization does not make redundant stays float (as ONNX Runtime runs it)',
              ', '.join(f"{e['cat']}->{e['args']['outputs'][0]['dtype']}" for e in conv))
        q = ref_qconv(x, xs, xz, w0, ws0, 0, ys, yz, b0q, 1, 1, [1, 1, 1, 1], np.int8,
                      post=lambda r: np.clip(r, 0, 6))
        want = (q.astype(np.float32) - np.float32(yz)) * ys
        d = np.abs(y - want) / ys
        check(d.max() <= 1.01, 'its outputs are within one step of the exact integer reference', f'max {d.max():.2f} steps')
    # toplu run --qdq-int8-all: the same through the job options
    xin = os.path.join(WORK, 'qdq_clip_x.npy')
    out = os.path.join(WORK, 'qdq_clip_all_out')
    prof = os.path.join(WORK, 'qdq_clip_all_run.json')
    subprocess.run(['rm', '-rf', out])
    r = subprocess.run([TOPLU, 'run', model, '--input', 'x=' + xin, '--output', out + '/', '-q', '--qdq-int8-all',
                        '--profile', prof], capture_output=True, text=True)
    check(r.returncode == 0, 'toplu run --qdq-int8-all runs the Clip model', r.stderr[-400:])
    if r.returncode == 0:
        with open(prof) as f:
            conv = [e for e in json.load(f)['traceEvents'] if e.get('ph') == 'X' and 'Conv' in e['cat']]
        want_dt = 'int8' if INT8 else 'float32'
        check(len(conv) == 1 and conv[0]['args']['outputs'][0]['dtype'] == want_dt,
              f'toplu run --qdq-int8-all: the Clip Conv writes {want_dt}',
              ', '.join(f"{e['cat']}->{e['args']['outputs'][0]['dtype']}" for e in conv))
    if TOPLU_BENCH:
        prof = os.path.join(WORK, 'qdq_clip_all.json')
        r = subprocess.run([TOPLU_BENCH, model, '--batch', '2', '--runs', '2', '--seconds', '0', '--qdq-int8-all',
                            '--profile', prof], capture_output=True, text=True)
        check(r.returncode == 0, 'toplu_bench --qdq-int8-all runs the Clip model', r.stderr[-400:])
        if r.returncode == 0:
            with open(prof) as f:
                conv = [e for e in json.load(f)['traceEvents'] if e.get('ph') == 'X' and 'Conv' in e['cat']]
            want_dt = 'int8' if INT8 else 'float32'
            check(len(conv) == 1 and conv[0]['args']['outputs'][0]['dtype'] == want_dt and 'Clip' in conv[0]['cat'],
                  'with qdq_int8_all the Conv with the non-redundant Clip runs in int8, the Clip its post-op' if INT8 else
                  'with qdq_int8_all and no VNNI the Conv still stays float',
                  ', '.join(f"{e['cat']}->{e['args']['outputs'][0]['dtype']}" for e in conv))


def case_qdq_binary():
    for op in ('Add', 'Mul'):
        for dt, tp in ((np.uint8, TensorProto.UINT8), (np.int8, TensorProto.INT8)):
            lo, hi = qrange(dt)
            a = rng.integers(lo, hi + 1, size=(3, 8, 5, 7)).astype(dt)  # 840 elements: 52 vectors of 16 and 8 more
            b = rng.integers(lo, hi + 1, size=(3, 8, 5, 7) if op == 'Add' else (8, 1, 1)).astype(dt)
            za, zb, zc = (dt(rng.integers(lo, hi + 1)) for _ in range(3))
            sa, sb, sc = np.float32(0.037), np.float32(0.021), np.float32(0.05 if op == 'Add' else 0.3)
            inits = [numpy_helper.from_array(np.asarray(v), n) for n, v in
                     (('sa', sa), ('za', np.array(za, dt)), ('sb', sb), ('zb', np.array(zb, dt)), ('sc', sc), ('zc', np.array(zc, dt)))]
            nodes = [helper.make_node('DequantizeLinear', ['a', 'sa', 'za'], ['af']),
                     helper.make_node('DequantizeLinear', ['b', 'sb', 'zb'], ['bf']),
                     helper.make_node(op, ['af', 'bf'], ['cf']),
                     helper.make_node('QuantizeLinear', ['cf', 'sc', 'zc'], ['c'])]
            ins = [helper.make_tensor_value_info('a', tp, list(a.shape)), helper.make_tensor_value_info('b', tp, list(b.shape))]
            graph = helper.make_graph(nodes, 'q', ins, [helper.make_tensor_value_info('c', tp, None)], initializer=inits)
            model = save(helper.make_model(graph, opset_imports=[helper.make_opsetid('', 13)]), f'qbin_{op}_{dt.__name__}.onnx')
            fa, fb = os.path.join(WORK, 'qa.npy'), os.path.join(WORK, 'qb.npy')
            np.save(fa, a)
            np.save(fb, b)
            out = os.path.join(WORK, f'qbin_{op}_out')
            subprocess.run(['rm', '-rf', out])
            prof = os.path.join(WORK, f'qbin_{op}.json')
            r = subprocess.run([TOPLU, 'run', model, '--input', 'a=' + fa, '--input', 'b=' + fb, '--output', out + '/', '-q',
                                '--batch-size', 'all', '--profile', prof], capture_output=True, text=True)
            tag = f'QDQ {op} ({dt.__name__})'
            if r.returncode != 0:
                check(False, tag + ': toplu run', r.stderr[-500:])
                continue
            y = np.load(glob.glob(os.path.join(out, '*.npy'))[0])
            af = (a.astype(np.int32) - int(za)).astype(np.float32) * sa
            bf = (b.astype(np.int32) - int(zb)).astype(np.float32) * sb
            cf = af + bf if op == 'Add' else af * bf
            want = np.clip(np.rint(cf / sc) + np.float32(zc), lo, hi).astype(dt)
            check(y.dtype == want.dtype and np.array_equal(y, want), f'{tag} equals the float nodes bit for bit',
                  f'{int((y != want).sum())} of {want.size} differ')
            with open(prof) as f:
                cats = [e['cat'] for e in json.load(f)['traceEvents'] if e.get('ph') == 'X']
            check(cats == [f'{op}+QuantizeLinear'], f'{tag} runs as one integer step (com.microsoft QLinear{op})', ', '.join(cats))


def case_qdq_float_out():
    """A QDQ Conv that no QuantizeLinear follows (a float island of a model quantized in part: the Conv before a
    node left float): an integer convolution writing float (QLinearConvFloat) with VNNI, equal to the float Conv of
    the dequantized x and W; its float bias need not be a multiple of x_scale * w_scale."""
    n, c = 2, 16
    x = rng.integers(0, 256, size=(n, c, 10, 10)).astype(np.uint8)
    xs, xz = np.float32(0.03), 120
    cases = [('relu, per-channel, float bias', 32, 1, 'relu', True, True),
             ('clip, per-tensor, no bias', 24, 1, ('clip', -0.5, 0.7), False, False),
             ('depthwise, no activation', 16, 16, None, True, True)]
    for tag, m, group, act, per_ch, bias in cases:
        w = rng.integers(-127, 128, size=(m, c // group, 3, 3)).astype(np.int8)
        ws = rng.uniform(0.002, 0.006, size=m).astype(np.float32) if per_ch else np.float32(0.004)
        b = rng.normal(0, 0.5, size=m).astype(np.float32) if bias else None
        inits = [numpy_helper.from_array(np.float32(xs), 'xs'), numpy_helper.from_array(np.array(xz, np.uint8), 'xz'),
                 numpy_helper.from_array(w, 'wq'), numpy_helper.from_array(np.asarray(ws), 'ws'),
                 numpy_helper.from_array(np.zeros(np.shape(ws), np.int8), 'wz')]
        nodes = [helper.make_node('DequantizeLinear', ['x', 'xs', 'xz'], ['xf']),
                 helper.make_node('DequantizeLinear', ['wq', 'ws', 'wz'], ['w'], **(dict(axis=0) if per_ch else {}))]
        ins = ['xf', 'w']
        if bias:
            inits.append(numpy_helper.from_array(b, 'b'))
            ins.append('b')
        nodes.append(helper.make_node('Conv', ins, ['cv'], group=group, pads=[1, 1, 1, 1], kernel_shape=[3, 3]))
        if act == 'relu':
            nodes.append(helper.make_node('Relu', ['cv'], ['y']))
        elif act:
            inits += [numpy_helper.from_array(np.float32(act[1]), 'lo'), numpy_helper.from_array(np.float32(act[2]), 'hi')]
            nodes.append(helper.make_node('Clip', ['cv', 'lo', 'hi'], ['y']))
        else:
            nodes.append(helper.make_node('Identity', ['cv'], ['y']))
        graph = helper.make_graph(nodes, 'qdq_float', [helper.make_tensor_value_info('x', TensorProto.UINT8, ['N', c, 10, 10])],
                                  [helper.make_tensor_value_info('y', TensorProto.FLOAT, None)], initializer=inits)
        name = 'qdq_float_' + tag.split(',')[0]
        model = save(helper.make_model(graph, opset_imports=[helper.make_opsetid('', 13)]), name + '.onnx')
        y, steps = run(model, x, name, profile=True)
        if y is None:
            continue
        xf = (x.astype(np.float64) - xz) * float(xs)
        wf = w.astype(np.float64) * (np.asarray(ws, np.float64).reshape(-1, 1, 1, 1) if per_ch else float(ws))
        xp = np.pad(xf, ((0, 0), (0, 0), (1, 1), (1, 1)))
        want = np.zeros((n, m, 10, 10))
        cg, mg = c // group, m // group
        for g in range(group):
            for i in range(10):
                for j in range(10):
                    want[:, g * mg:(g + 1) * mg, i, j] = np.einsum('nckl,mckl->nm', xp[:, g * cg:(g + 1) * cg, i:i + 3, j:j + 3],
                                                                   wf[g * mg:(g + 1) * mg])
        if bias:
            want += b.reshape(1, -1, 1, 1)
        if act == 'relu':
            want = np.maximum(want, 0)
        elif act:
            want = np.clip(want, act[1], act[2])
        d = float(np.abs(y - want).max())
        check(y.shape == want.shape and d <= 1e-5 * max(1.0, float(np.abs(want).max())),
              f'{tag}: the float Conv of the dequantized x and W (max diff {d:.2e})')
        conv = [e for e in steps if 'Conv' in e['cat']]
        ops = ', '.join(f"{e['args']['op_type']}:{e['args']['inputs'][0]['dtype']}->{e['args']['outputs'][0]['dtype']}" for e in conv)
        if INT8:
            check(len(conv) == 1 and conv[0]['args']['inputs'][0]['dtype'] == 'uint8'
                  and conv[0]['args']['outputs'][0]['dtype'] == 'float32',
                  f'{tag}: one integer convolution reading uint8, writing float', ops)
        else:
            check(len(conv) == 1 and conv[0]['args']['inputs'][0]['dtype'] == 'float32', f'{tag}: without VNNI a float Conv', ops)


def case_qdq_layout():
    """float Conv -> Q -> DQ -> Conv(DQ weights) -> Q -> DQ -> float Conv: the Q after the float Conv reads its
    layout and writes the integer Conv's, the DQ after the integer Conv reads its layout and writes the float Conv's,
    so no Reorder runs between the three convolutions (before, each side had a Reorder to plain and one back); the
    outputs equal the plain kernels' (TOPLU_NO_BLOCKED=QuantizeLinear,DequantizeLinear) bit for bit."""
    lrng = np.random.default_rng(11)  # its own generator: the other cases' data stay as they were
    n = 2
    # (channels, groups of the float Conv): ResNeXt's grouped convolutions (4 channels a group) write aBcd4b, a
    # layout oneDNN's integer convolution has only its reference kernel for (4.5 s a run on ResNeXt-50, 2026-12-07)
    for m, group in ((32, 1), (24, 1), (32, 8)):
        c = 16 if group == 1 else m
        x = lrng.normal(0, 1, size=(n, c, 12, 12)).astype(np.float32)
        w0 = (lrng.normal(0, 0.2, size=(m, c // group, 3, 3))).astype(np.float32)
        w1 = lrng.integers(-127, 128, size=(m, m, 1, 1)).astype(np.int8)
        w2 = (lrng.normal(0, 0.2, size=(16, m, 1, 1))).astype(np.float32)
        inits = [numpy_helper.from_array(a, nm) for a, nm in (
            (w0, 'w0'), (np.float32(0.02), 's0'), (np.array(7, np.uint8), 'z0'), (w1, 'w1q'),
            (lrng.uniform(0.002, 0.006, size=m).astype(np.float32), 'w1s'), (np.zeros(m, np.int8), 'w1z'),
            (np.float32(0.05), 's1'), (np.array(128, np.uint8), 'z1'), (w2, 'w2'))]
        nodes = [helper.make_node('Conv', ['x', 'w0'], ['c0'], pads=[1, 1, 1, 1], kernel_shape=[3, 3], group=group),
                 helper.make_node('Relu', ['c0'], ['r0']),
                 helper.make_node('QuantizeLinear', ['r0', 's0', 'z0'], ['q0']),
                 helper.make_node('DequantizeLinear', ['q0', 's0', 'z0'], ['d0']),
                 helper.make_node('DequantizeLinear', ['w1q', 'w1s', 'w1z'], ['w1'], axis=0),
                 helper.make_node('Conv', ['d0', 'w1'], ['c1'], kernel_shape=[1, 1]),
                 helper.make_node('QuantizeLinear', ['c1', 's1', 'z1'], ['q1']),
                 helper.make_node('DequantizeLinear', ['q1', 's1', 'z1'], ['d1']),
                 helper.make_node('Conv', ['d1', 'w2'], ['y'], kernel_shape=[1, 1])]
        graph = helper.make_graph(nodes, 'qdq_layout', [helper.make_tensor_value_info('x', TensorProto.FLOAT, ['N', c, 12, 12])],
                                  [helper.make_tensor_value_info('y', TensorProto.FLOAT, None)], initializer=inits)
        name = f'qdq_layout_{m}_g{group}'
        tag = f'{m} channels' + (f', {group} groups' if group > 1 else '')
        model = save(helper.make_model(graph, opset_imports=[helper.make_opsetid('', 13)]), name + '.onnx')
        y, steps = run(model, x, name, profile=True)
        os.environ['TOPLU_NO_BLOCKED'] = 'QuantizeLinear,DequantizeLinear'
        try:
            y_plain, steps_plain = run(model, x, name + '_plain', profile=True)
        finally:
            del os.environ['TOPLU_NO_BLOCKED']
        if y is None or y_plain is None:
            continue
        check(y.shape == y_plain.shape and np.array_equal(y, y_plain),
              f'{tag}: the same output as the plain QuantizeLinear/DequantizeLinear, bit for bit',
              f'max diff {float(np.abs(y - y_plain).max()):.3g}')
        desc = lambda st: ', '.join(f"{e['args']['op_type']}({e['args']['inputs'][0]['dtype']}:{e['args']['inputs'][0]['layout']})"
                                     for e in st)
        qdq = [e for e in steps if e['args']['op_type'] in ('QuantizeLinear', 'DequantizeLinear')]
        reorders = sum(e['args']['op_type'] == 'Reorder' for e in steps)
        reorders_plain = sum(e['args']['op_type'] == 'Reorder' for e in steps_plain)
        on_layout = [e for e in qdq if e['args']['inputs'][0]['layout'] != 'plain']
        if on_layout:
            # each (de)quantization on a layout saves a Reorder to plain before it and one back after it (grouped:
            # the uint8 is still reordered from aBcd4b into the integer convolution's layout, one fewer saved)
            saved = 2 * len(on_layout) - (1 if group > 1 else 0)
            check(reorders <= reorders_plain - saved and
                  all(e['args']['outputs'][0]['layout'] == e['args']['inputs'][0]['layout'] for e in on_layout),
                  f'{tag}: {len(on_layout)} QuantizeLinear/DequantizeLinear on the convolutions\' layout, '
                  f'{reorders} Reorder steps (plain kernels: {reorders_plain})', desc(steps))
        slow = [f"{e['name']} ({e['args']['impl']})" for e in steps if e['args']['impl'].startswith('ref')]
        check(not slow, f'{tag}: no step on a oneDNN reference kernel', ', '.join(slow))
        if m == 32 and group == 1:  # 32 channels fill two 16-channel blocks (or are channels last): nothing is padded
            want = 2 if INT8 else 0  # without VNNI the Q -> DQ pairs are float round trips
            check(len(on_layout) >= want, f'{m} channels: QuantizeLinear and DequantizeLinear on a layout '
                  f'({len(on_layout)}, want >= {want})', desc(steps))


def case_qdq_binary_layout():
    """Two integer convolutions -> DequantizeLinear each -> Add (Mul) -> QuantizeLinear: the QLinearAdd (QLinearMul)
    reads both uint8 operands in the convolutions' layout and writes it (no Reorder to plain and back around it), the
    outputs equal the plain kernel's (TOPLU_NO_BLOCKED=QLinearAdd,QLinearMul) bit for bit.  The residual fusion is
    off here (TOPLU_NO_FUSE=qdq_residual): it would take the Add into the second convolution."""
    lrng = np.random.default_rng(13)
    n, c, m = 2, 16, 32
    x = lrng.normal(0, 1, size=(n, c, 10, 10)).astype(np.float32)
    for op in ('Add', 'Mul'):
        inits = [numpy_helper.from_array(a, nm) for a, nm in (
            (np.float32(0.03), 'sx'), (np.array(128, np.uint8), 'zx'),
            (lrng.integers(-127, 128, size=(m, c, 3, 3)).astype(np.int8), 'w1q'),
            (lrng.integers(-127, 128, size=(m, c, 1, 1)).astype(np.int8), 'w2q'),
            (lrng.uniform(0.001, 0.003, size=m).astype(np.float32), 'ws'), (np.zeros(m, np.int8), 'wz'),
            (np.float32(0.08), 'sa'), (np.array(120, np.uint8), 'za'), (np.float32(0.06), 'sb'), (np.array(131, np.uint8), 'zb'),
            (np.float32(0.1 if op == 'Add' else 0.4), 'sc'), (np.array(100, np.uint8), 'zc'),
            (lrng.normal(0, 0.2, size=(8, m, 1, 1)).astype(np.float32), 'w3'))]
        nodes = [helper.make_node('QuantizeLinear', ['x', 'sx', 'zx'], ['xq']),
                 helper.make_node('DequantizeLinear', ['xq', 'sx', 'zx'], ['xd']),
                 helper.make_node('DequantizeLinear', ['w1q', 'ws', 'wz'], ['w1'], axis=0),
                 helper.make_node('DequantizeLinear', ['w2q', 'ws', 'wz'], ['w2'], axis=0),
                 helper.make_node('Conv', ['xd', 'w1'], ['c1'], kernel_shape=[3, 3], pads=[1, 1, 1, 1]),
                 helper.make_node('Conv', ['xd', 'w2'], ['c2'], kernel_shape=[1, 1]),
                 helper.make_node('QuantizeLinear', ['c1', 'sa', 'za'], ['aq']),
                 helper.make_node('QuantizeLinear', ['c2', 'sb', 'zb'], ['bq']),
                 helper.make_node('DequantizeLinear', ['aq', 'sa', 'za'], ['a']),
                 helper.make_node('DequantizeLinear', ['bq', 'sb', 'zb'], ['b']),
                 helper.make_node(op, ['a', 'b'], ['s']),
                 helper.make_node('QuantizeLinear', ['s', 'sc', 'zc'], ['sq']),
                 helper.make_node('DequantizeLinear', ['sq', 'sc', 'zc'], ['sd']),
                 helper.make_node('Conv', ['sd', 'w3'], ['y'], kernel_shape=[1, 1])]
        graph = helper.make_graph(nodes, 'qdq_binary_layout', [helper.make_tensor_value_info('x', TensorProto.FLOAT, ['N', c, 10, 10])],
                                  [helper.make_tensor_value_info('y', TensorProto.FLOAT, None)], initializer=inits)
        name = f'qdq_binary_layout_{op.lower()}'
        model = save(helper.make_model(graph, opset_imports=[helper.make_opsetid('', 13)]), name + '.onnx')
        os.environ['TOPLU_NO_FUSE'] = 'qdq_residual'
        try:
            y, steps = run(model, x, name, profile=True)
            os.environ['TOPLU_NO_BLOCKED'] = 'QLinearAdd,QLinearMul'
            try:
                y_plain, steps_plain = run(model, x, name + '_plain', profile=True)
            finally:
                del os.environ['TOPLU_NO_BLOCKED']
        finally:
            del os.environ['TOPLU_NO_FUSE']
        if y is None or y_plain is None:
            continue
        check(y.shape == y_plain.shape and np.array_equal(y, y_plain),
              f'{op}: the same output as the plain QLinear{op}, bit for bit', f'max diff {float(np.abs(y - y_plain).max()):.3g}')
        qb = [e for e in steps if e['args']['op_type'].startswith(op + '+')]
        reorders = sum(e['args']['op_type'] == 'Reorder' for e in steps)
        reorders_plain = sum(e['args']['op_type'] == 'Reorder' for e in steps_plain)
        desc = ', '.join(f"{e['args']['op_type']}({e['args']['inputs'][0]['layout']})" for e in steps)
        check(len(qb) == 1, f'{op}: one QLinear{op} step', desc)
        if INT8 and qb:  # integer convolutions write a blocked or channels-last uint8 layout
            lay = qb[0]['args']['inputs'][0]['layout']
            check(lay != 'plain' and qb[0]['args']['outputs'][0]['layout'] == lay and reorders < reorders_plain,
                  f'{op}: QLinear{op} on the convolutions\' layout ({lay}), {reorders} Reorder steps (plain kernel: '
                  f'{reorders_plain})', desc)


def case_qdq_lookup():
    """A function of one float between two quantizations is a 256-entry table (toplu.QLinearLookup)."""
    import math
    lrng = np.random.default_rng(12)
    erf = np.vectorize(math.erf)
    sig = lambda v: 1 / (1 + np.exp(-v))
    funcs = {  # name: (nodes from 'x' to 'f', extra initializers, numpy f)
        'sigmoid': ([helper.make_node('Sigmoid', ['x'], ['f'])], [], sig),
        'hardswish': ([helper.make_node('HardSwish', ['x'], ['f'])], [], lambda v: v * np.clip(v / 6 + 0.5, 0, 1)),
        'leakyrelu': ([helper.make_node('LeakyRelu', ['x'], ['f'], alpha=0.1)], [], lambda v: np.where(v < 0, 0.1 * v, v)),
        'gelu': ([helper.make_node('Div', ['x', 'sqrt2'], ['g0']), helper.make_node('Erf', ['g0'], ['g1']),
                  helper.make_node('Add', ['g1', 'one'], ['g2']), helper.make_node('Mul', ['x', 'g2'], ['g3']),
                  helper.make_node('Mul', ['g3', 'half'], ['f'])],
                 [numpy_helper.from_array(np.float32(math.sqrt(2)), 'sqrt2'), numpy_helper.from_array(np.float32(1), 'one'),
                  numpy_helper.from_array(np.float32(0.5), 'half')], lambda v: 0.5 * v * (1 + erf(v / math.sqrt(2)))),
        'silu': ([helper.make_node('Sigmoid', ['x'], ['s']), helper.make_node('Mul', ['x', 's'], ['f'])], [],
                 lambda v: v * sig(v)),
        'x_hardsigmoid': ([helper.make_node('HardSigmoid', ['x'], ['s'], alpha=1 / 6), helper.make_node('Mul', ['s', 'x'], ['f'])],
                          [], lambda v: v * np.clip(v / 6 + 0.5, 0, 1)),
        # PaddleOCR's PP-LCNetV3 blocks: a learnable scalar affine before and after the activation (scalars of rank 1
        # and of x's rank, the constant on either side)
        'affine_hardswish_affine': (
            [helper.make_node('Mul', ['x', 'a'], ['t1']), helper.make_node('Add', ['t1', 'b'], ['t2']),
             helper.make_node('HardSwish', ['t2'], ['t3']), helper.make_node('Mul', ['c', 't3'], ['t4']),
             helper.make_node('Add', ['d', 't4'], ['f'])],
            [numpy_helper.from_array(np.array([1.3], np.float32), 'a'), numpy_helper.from_array(np.array([-0.4], np.float32), 'b'),
             numpy_helper.from_array(np.full((1, 1, 1, 1), 0.8, np.float32), 'c'), numpy_helper.from_array(np.float32(0.25), 'd')],
            lambda v: 0.8 * ((1.3 * v - 0.4) * np.clip((1.3 * v - 0.4) / 6 + 0.5, 0, 1)) + 0.25),
        # the scalar steps alone: Mul, Sub with the constant first, Div
        'steps_alone': (
            [helper.make_node('Mul', ['x', 'a'], ['t1']), helper.make_node('Sub', ['b', 't1'], ['t2']),
             helper.make_node('Div', ['t2', 'c'], ['f'])],
            [numpy_helper.from_array(np.float32(0.7), 'a'), numpy_helper.from_array(np.float32(0.5), 'b'),
             numpy_helper.from_array(np.float32(1.5), 'c')],
            lambda v: (0.5 - 0.7 * v) / 1.5),
    }
    for name, (fnodes, finits, fref) in funcs.items():
        for dt, tp in ((np.uint8, TensorProto.UINT8), (np.int8, TensorProto.INT8)):
            lo, hi = qrange(dt)
            xq = lrng.integers(lo, hi + 1, size=(2, 8, 5, 7)).astype(dt)
            xs, xz, ys, yz = np.float32(0.045), dt(3 if dt == np.uint8 else -5), np.float32(0.03), dt(40 if dt == np.uint8 else -20)
            inits = [numpy_helper.from_array(xs, 'xs'), numpy_helper.from_array(np.array(xz, dt), 'xz'),
                     numpy_helper.from_array(ys, 'ys'), numpy_helper.from_array(np.array(yz, dt), 'yz')] + finits
            nodes = [helper.make_node('DequantizeLinear', ['xq', 'xs', 'xz'], ['x'])] + fnodes + \
                    [helper.make_node('QuantizeLinear', ['f', 'ys', 'yz'], ['y'])]
            graph = helper.make_graph(nodes, 'lookup', [helper.make_tensor_value_info('xq', tp, ['N', 8, 5, 7])],
                                      [helper.make_tensor_value_info('y', tp, None)], initializer=inits)
            tag = f'{name} ({np.dtype(dt).name})'
            model = save(helper.make_model(graph, opset_imports=[helper.make_opsetid('', 14)]), f'lookup_{name}_{np.dtype(dt).name}.onnx')
            xin = os.path.join(WORK, f'lookup_{name}_x.npy')
            np.save(xin, xq)
            outs = {}
            for fused in (True, False):
                out = os.path.join(WORK, f'lookup_{name}_{np.dtype(dt).name}_{int(fused)}')
                prof = out + '.json'
                subprocess.run(['rm', '-rf', out])
                env = dict(os.environ)
                if not fused:
                    env['TOPLU_NO_FUSE'] = 'qdq_lookup'
                r = subprocess.run([TOPLU, 'run', model, '--input', 'xq=' + xin, '--output', out + '/', '-q', '--profile', prof],
                                   capture_output=True, text=True, env=env)
                if not check(r.returncode == 0, f'{tag}: toplu run ({"fused" if fused else "unfused"})', r.stderr[-400:]):
                    break
                with open(prof) as f:
                    ops = [e['args']['op_type'] for e in json.load(f)['traceEvents'] if e.get('ph') == 'X']
                outs[fused] = (np.load(os.path.join(out, 'y.npy')), ops)
            if len(outs) < 2:
                continue
            (yf, ops_f), (yu, ops_u) = outs[True], outs[False]
            # the profile names a step by its fused label ("QuantizeLinear+HardSwish"); the test read 'QLinearLookup' and
            # never got here until 2026-12-07 (its check() returned None, so the first run's check ended the loop)
            check(len(ops_f) == 1 and ops_f[0].startswith('QuantizeLinear+'), f'{tag}: one QLinearLookup step', ops_f)
            check(len(ops_u) > 1, f'{tag}: unfused: float steps', ops_u)
            check(yf.dtype == dt and np.array_equal(yf, yu), f'{tag}: the same integers as the unfused graph',
                  f'{int((yf != yu).sum())} of {yf.size} differ, by up to {int(np.abs(yf.astype(int) - yu.astype(int)).max())}')
            # in float32, as the graph computes (a float64 reference flips the ties of LeakyRelu's identity side, where
            # 0.045 / 0.03 puts every other level on a half step)
            xv = (xq.astype(np.float32) - np.float32(xz)) * xs
            want = np.clip(np.rint(fref(xv).astype(np.float32) / ys) + int(yz), lo, hi)
            d = np.abs(yf.astype(int) - want.astype(int))
            check(d.max() <= 1 and (d > 0).mean() < 0.01, f'{tag}: within one step of numpy\'s function '
                  f'({int((d > 0).sum())} of {d.size} one step off)')

    # a scalar step whose output something else reads too (here a graph output): the steps stay, the table does
    # not take them (their nodes would die with the fusion and leave that reader without its value)
    dt, tp = np.uint8, TensorProto.UINT8
    xq = lrng.integers(0, 256, size=(2, 8, 5, 7)).astype(dt)
    inits = [numpy_helper.from_array(np.float32(0.045), 'xs'), numpy_helper.from_array(np.array(3, dt), 'xz'),
             numpy_helper.from_array(np.float32(0.03), 'ys'), numpy_helper.from_array(np.array(40, dt), 'yz'),
             numpy_helper.from_array(np.float32(1.3), 'a')]
    nodes = [helper.make_node('DequantizeLinear', ['xq', 'xs', 'xz'], ['x']), helper.make_node('Mul', ['x', 'a'], ['t']),
             helper.make_node('HardSwish', ['t'], ['f']), helper.make_node('QuantizeLinear', ['f', 'ys', 'yz'], ['y'])]
    graph = helper.make_graph(nodes, 'lookup_shared', [helper.make_tensor_value_info('xq', tp, ['N', 8, 5, 7])],
                              [helper.make_tensor_value_info('y', tp, None), helper.make_tensor_value_info('t', TensorProto.FLOAT, None)],
                              initializer=inits)
    model = save(helper.make_model(graph, opset_imports=[helper.make_opsetid('', 14)]), 'lookup_shared.onnx')
    xin = os.path.join(WORK, 'lookup_shared_x.npy')
    np.save(xin, xq)
    got = {}
    for fused in (True, False):
        out = os.path.join(WORK, f'lookup_shared_{int(fused)}')
        subprocess.run(['rm', '-rf', out])
        env = dict(os.environ)
        if not fused:
            env['TOPLU_NO_FUSE'] = 'qdq_lookup'
        r = subprocess.run([TOPLU, 'run', model, '--input', 'xq=' + xin, '--output', out + '/', '-q'], capture_output=True,
                           text=True, env=env)
        if check(r.returncode == 0, f'a shared scalar step: toplu run ({"fused" if fused else "unfused"})', r.stderr[-400:]):
            got[fused] = (np.load(os.path.join(out, 'y.npy')), np.load(os.path.join(out, 't.npy')))
    if len(got) == 2:
        t_want = (xq.astype(np.float32) - np.float32(3)) * np.float32(0.045) * np.float32(1.3)
        check(np.array_equal(got[True][0], got[False][0]) and np.array_equal(got[True][1], got[False][1]) and
              np.allclose(got[True][1], t_want, rtol=1e-6, atol=1e-6),
              'a shared scalar step: both outputs as the unfused graph\'s, the step\'s own values right',
              f'y differs in {int((got[True][0] != got[False][0]).sum())}, t max diff {float(np.abs(got[True][1] - t_want).max()):.3g}')


{'qlinearconv': case_qlinearconv, 'qdq': case_qdq, 'qdq_binary': case_qdq_binary,
 'qdq_float_out': case_qdq_float_out, 'qdq_layout': case_qdq_layout, 'qdq_lookup': case_qdq_lookup,
 'qdq_binary_layout': case_qdq_binary_layout}[CASE]()
print(f'{CASE}: {len(fails)} failed', flush=True)
sys.exit(1 if fails else 0)
