#!/usr/bin/env python3
"""`toplu quantize --dynamic` (issue 9), on small models built here.

    test_quantize_dynamic.py TOPLU WORKDIR CASE SOURCE_DIR

Models (random weights, torch export, opset 13):
  mlp      x[B,6,32] -> Linear(32,48) -> ReLU -> Linear(48,16), plus a
           Linear(32,16) of x added (two MatMuls share x), -> y;
  encoder  two post-LayerNorm encoder layers (hidden 64, 4 heads, FFN 128,
           erf GELU: the BERT-base-like layer of bench/export_models.py,
           smaller) on x[B,12,64], then Linear(64,10) on token 0 (a 2-D Gemm
           with transB) -> y.

CASE:
  file     the written model: it passes onnx.checker, keeps opset 13, has no
           float MatMul/Gemm with a constant weight left; one MatMulInteger
           per MatMul/Gemm, one DynamicQuantizeLinear per distinct input
           (the MatMuls reading x share one), each followed by Cast(float)
           and Mul(., Mul(x_scale, W_scale)); W_q equals
           clip(round(W / s), -127, 127) with s = max_k |W[k, n]| / 127 per
           column computed here (the Gemm's transB weights transposed to
           [K, N], its bias kept as an Add of a [N] row), zero points 0;
           --per-tensor writes one scale; --exclude leaves that node float;
           --op-types Gemm leaves the MatMuls float; bad calls exit 2 naming
           the problem (--calibration or --report with --dynamic, an op type
           other than MatMul/Gemm, an unknown node to exclude, a model with
           nothing to quantize) and write nothing.
  accuracy toplu runs the dynamic models with every chain fused
           (profile: DynamicQuantizeMatMul steps, no MatMulInteger, Cast or
           Mul left; GELU, the FFN residual Adds and the Gemm's bias row fused
           into them); the encoder's output against the
           float model's: cosine >= 0.999 per token; ONNX Runtime 1.30
           (scripts/ort-run.js) loads and runs the same file: on the MLP
           (integer matmuls and float Adds only) toplu equals it within 1e-5
           of the output's scale; on the encoder (where float rounding of
           GELU, LayerNorm and softmax can move an activation across a
           quantization step) within a quarter of the quantization error
           (max |toplu int8 - ORT int8| <= 0.25 max |int8 - float|) and
           cosine >= 0.9999.  Without node and onnxruntime-node the ORT part
           is skipped with a note.
Exit 0 when every check passes, 1 otherwise.
"""
import glob
import json
import math
import os
import shutil
import subprocess
import sys

import numpy as np
import onnx
from onnx import numpy_helper

try:
    import torch
    from torch import nn
except ImportError:
    print('skipped: no torch (Debian python3-torch) to export the models')
    sys.exit(77)

TOPLU, WORK, CASE, SRC = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4]
os.makedirs(WORK, exist_ok=True)
fails = []


def check(ok, what, detail=''):
    print(('ok: ' if ok else 'FAIL: ') + what + (f' ({detail})' if detail else ''), flush=True)
    if not ok:
        fails.append(what)
    return ok


class Mlp(nn.Module):
    def __init__(s):
        super().__init__()
        s.a, s.b, s.c = nn.Linear(32, 48), nn.Linear(48, 16), nn.Linear(32, 16)

    def forward(s, x):
        return s.b(torch.relu(s.a(x))) + s.c(x)


class Layer(nn.Module):  # bench/export_models.py's EncoderLayer, smaller
    def __init__(s, d=64, heads=4, ffn=128):
        super().__init__()
        s.heads, s.dk = heads, d // heads
        s.q, s.k, s.v, s.o = (nn.Linear(d, d) for _ in range(4))
        s.ln1, s.ln2 = nn.LayerNorm(d, eps=1e-12), nn.LayerNorm(d, eps=1e-12)
        s.up, s.down = nn.Linear(d, ffn), nn.Linear(ffn, d)

    def hf(s, t):
        b, n, _ = t.shape
        return t.view(b, n, s.heads, s.dk).transpose(1, 2)

    def forward(s, x):
        b, n, d = x.shape
        q, k, v = s.hf(s.q(x)), s.hf(s.k(x)), s.hf(s.v(x))
        w = torch.softmax(q @ k.transpose(-1, -2) / math.sqrt(s.dk), dim=-1)
        x = s.ln1(x + s.o((w @ v).transpose(1, 2).reshape(b, n, d)))
        return s.ln2(x + s.down(nn.functional.gelu(s.up(x))))


class Encoder(nn.Module):
    def __init__(s):
        super().__init__()
        s.layers = nn.Sequential(Layer(), Layer())
        s.head = nn.Linear(64, 10)

    def forward(s, x):
        return s.head(s.layers(x)[:, 0, :])


torch.manual_seed(3)
MODELS = {'mlp': (Mlp(), (2, 6, 32)), 'encoder': (Encoder(), (2, 12, 64))}


def export(name):
    path = os.path.join(WORK, name + '.onnx')
    if not os.path.exists(path):
        m, shape = MODELS[name]
        with torch.no_grad():
            torch.onnx.export(m.eval(), torch.randn(*shape), path, opset_version=13, input_names=['x'],
                              output_names=['y'], dynamic_axes={'x': {0: 'B'}, 'y': {0: 'B'}})
    return path


def quantize(model, out, *extra):
    if os.path.exists(out):
        os.remove(out)
    r = subprocess.run([TOPLU, 'quantize', model, '--dynamic', '--output', out, '-q'] + list(extra),
                       capture_output=True, text=True)
    return r.returncode, r.stderr


def inits(m):
    return {t.name: numpy_helper.to_array(t) for t in m.graph.initializer}


def float_weighted(m):
    """MatMul/Gemm nodes whose B is a float initializer."""
    I = inits(m)
    return [n for n in m.graph.node if n.op_type in ('MatMul', 'Gemm') and n.input[1] in I and I[n.input[1]].dtype == np.float32]


def case_file():
    for name in ('mlp', 'encoder'):
        src = export(name)
        fm = onnx.load(src)
        weighted = float_weighted(fm)
        out = os.path.join(WORK, name + '_dyn.onnx')
        rc, err = quantize(src, out)
        if not check(rc == 0 and os.path.exists(out), f'{name}: toplu quantize --dynamic', err[-400:]):
            continue
        m = onnx.load(out)
        try:
            onnx.checker.check_model(m)
            check(True, f'{name}: onnx.checker accepts the file')
        except Exception as e:  # noqa: BLE001
            check(False, f'{name}: onnx.checker accepts the file', str(e)[:300])
        check([o.version for o in m.opset_import if o.domain in ('', 'ai.onnx')] == [13], f'{name}: opset 13 kept')
        check(not float_weighted(m), f'{name}: no float MatMul/Gemm with a constant weight left')
        ops = [n.op_type for n in m.graph.node]
        check(ops.count('MatMulInteger') == len(weighted), f'{name}: one MatMulInteger per weighted node',
              f'{ops.count("MatMulInteger")} for {len(weighted)}')
        dq_inputs = {n.input[0] for n in weighted}
        check(ops.count('DynamicQuantizeLinear') == len(dq_inputs), f'{name}: one DynamicQuantizeLinear per distinct input',
              f'{ops.count("DynamicQuantizeLinear")} for {len(dq_inputs)}')
        I, FI = inits(m), inits(fm)
        prod = {o: n for n in m.graph.node for o in n.output}
        checked = 0
        for n in fm.graph.node:
            if n not in weighted:
                continue
            w = FI[n.input[1]]
            if n.op_type == 'Gemm' and any(a.name == 'transB' and a.i for a in n.attribute):
                w = w.T
            # the new chain ends in the node's output
            last = prod.get(n.output[0])
            # walk back from the output: [Add] <- Mul <- Cast <- MatMulInteger
            node = last
            if node is not None and node.op_type == 'Add':
                node = next((prod[i] for i in node.input if i in prod and prod[i].op_type == 'Mul'), None)
            cast = next((prod[i] for i in node.input if i in prod and prod[i].op_type == 'Cast'), None) if node is not None else None
            mm = prod.get(cast.input[0]) if cast is not None else None
            if not check(mm is not None and mm.op_type == 'MatMulInteger', f'{name} {n.name}: output <- Mul <- Cast <- MatMulInteger'):
                continue
            dql = prod.get(mm.input[0])
            check(dql is not None and dql.op_type == 'DynamicQuantizeLinear' and dql.input[0] == n.input[0] and
                  mm.input[2] == dql.output[2], f'{name} {n.name}: MatMulInteger reads DynamicQuantizeLinear(x) and its zero point')
            smul = next((prod[i] for i in node.input if i in prod and prod[i].op_type == 'Mul'), None)
            check(smul is not None and dql is not None and dql.output[1] in smul.input, f'{name} {n.name}: scale = Mul(x_scale, W_scale)')
            wq, wz = I[mm.input[1]], I[mm.input[3]]
            ws = I[[i for i in smul.input if i in I][0]] if smul is not None else None
            s = (np.abs(w).max(axis=0) / 127).astype(np.float32)
            want = np.clip(np.rint(w.astype(np.float64) / s.astype(np.float64)), -127, 127).astype(np.int8)
            check(wq.dtype == np.int8 and wq.shape == w.shape and np.array_equal(wq, want),
                  f'{name} {n.name}: W_q = round(W / s) per column, [K, N]', f'{wq.dtype}{list(wq.shape)}')
            check(ws is not None and ws.shape == s.shape and np.allclose(ws, s, rtol=1e-6, atol=0),
                  f'{name} {n.name}: W_scale = max|W[:, n]| / 127')
            check(wz.dtype == np.int8 and wz.shape == s.shape and not wz.any(), f'{name} {n.name}: zero points 0 per column')
            if n.op_type == 'Gemm':
                check(last.op_type == 'Add' and any(i in I and np.allclose(I[i], FI[n.input[2]]) for i in last.input),
                      f'{name} {n.name}: Gemm bias kept as an Add of the [N] row')
            checked += 1
        check(checked == len(weighted), f'{name}: every weighted node checked', f'{checked} of {len(weighted)}')
    # options
    src = export('encoder')
    out = os.path.join(WORK, 'opt.onnx')
    rc, err = quantize(src, out, '--per-tensor')
    m = onnx.load(out) if rc == 0 else None
    scales = [inits(m)[n.input[1]] for n in m.graph.node if n.op_type == 'Mul' and n.input[0].endswith('_scale')] if m else []
    check(rc == 0 and scales and all(s.shape == () for s in scales), '--per-tensor: one W_scale per weight', err[-300:])
    fm = onnx.load(src)
    victim = [n.name for n in float_weighted(fm) if n.op_type == 'MatMul'][0]
    rc, err = quantize(src, out, '--exclude', victim)
    m = onnx.load(out) if rc == 0 else None
    check(m is not None and [n.name for n in float_weighted(m)] == [victim], f'--exclude {victim}: that MatMul stays float', err[-300:])
    rc, err = quantize(src, out, '--op-types', 'Gemm')
    m = onnx.load(out) if rc == 0 else None
    check(m is not None and {n.op_type for n in float_weighted(m)} == {'MatMul'} and
          [n.op_type for n in m.graph.node].count('MatMulInteger') == 1, '--op-types Gemm: only the Gemm quantized', err[-300:])
    for args, word in ((['--calibration', src], '--calibration'), (['--report', out + '.json'], '--report'),
                       (['--op-types', 'Conv'], 'Conv'), (['--exclude', 'nosuchnode'], 'nosuchnode')):
        if os.path.exists(out):
            os.remove(out)
        rc, err = quantize(src, out, *args)
        first = err.strip().splitlines()[0] if err.strip() else ''
        check(rc == 2 and word in first and not os.path.exists(out), f'--dynamic {" ".join(args[:1])}: exit 2 naming {word}',
              f'rc {rc}: {first[-200:]}')
    # nothing to quantize: a model whose MatMul has no constant weight
    from onnx import TensorProto, helper
    g = helper.make_graph([helper.make_node('MatMul', ['a', 'b'], ['y'])], 'g',
                          [helper.make_tensor_value_info('a', TensorProto.FLOAT, [2, 3]),
                           helper.make_tensor_value_info('b', TensorProto.FLOAT, [3, 4])],
                          [helper.make_tensor_value_info('y', TensorProto.FLOAT, [2, 4])])
    nm = os.path.join(WORK, 'noweights.onnx')
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid('', 13)]), nm)
    rc, err = quantize(nm, out)
    check(rc == 2 and 'nothing to quantize' in err and not os.path.exists(out), 'no constant weights: exit 2, nothing to quantize',
          f'rc {rc}: {err.strip()[-200:]}')
    # weights behind Identity nodes, one initializer read by two MatMuls (torch's export of layers that are copies
    # of one another): both quantized (until 2026-12-06 both stayed float, with no word), the Identities gone
    w = np.random.default_rng(9).standard_normal((8, 8)).astype(np.float32)
    g = helper.make_graph([helper.make_node('Identity', ['w'], ['w1']), helper.make_node('Identity', ['w'], ['w2']),
                           helper.make_node('MatMul', ['x', 'w1'], ['h']), helper.make_node('Relu', ['h'], ['r']),
                           helper.make_node('MatMul', ['r', 'w2'], ['y'])], 'ident',
                          [helper.make_tensor_value_info('x', TensorProto.FLOAT, ['B', 8])],
                          [helper.make_tensor_value_info('y', TensorProto.FLOAT, ['B', 8])],
                          [numpy_helper.from_array(w, 'w')])
    im = os.path.join(WORK, 'identity_weights.onnx')
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid('', 13)]), im)
    iq = os.path.join(WORK, 'identity_weights_dyn.onnx')
    rc, err = quantize(im, iq)
    ops = [n.op_type for n in onnx.load(iq).graph.node] if rc == 0 and os.path.exists(iq) else []
    check(rc == 0 and ops.count('MatMulInteger') == 2 and 'Identity' not in ops,
          'weights behind Identity nodes: both MatMuls quantized', f'rc {rc}: {ops} {err.strip()[-200:]}')


def toplu_run(model, x, tag, profile=False):
    xin = os.path.join(WORK, tag + '_x.npy')
    np.save(xin, x)
    out = os.path.join(WORK, tag + '_out')
    shutil.rmtree(out, ignore_errors=True)
    cmd = [TOPLU, 'run', model, '--input', 'x=' + xin, '--output', out + '/', '-q', '--batch-size', 'all']
    prof = os.path.join(WORK, tag + '_prof.json')
    if profile:
        cmd += ['--profile', prof]
    r = subprocess.run(cmd, capture_output=True, text=True)
    if not check(r.returncode == 0, f'{tag}: toplu run', r.stderr[-400:]):
        return None, None
    y = np.load(glob.glob(os.path.join(out, '*.npy'))[0])
    steps = None
    if profile:
        with open(prof) as f:
            steps = [e['args'].get('op_type', '') for e in json.load(f)['traceEvents'] if e.get('ph') == 'X']
    return y, steps


def ort_run(model, x, tag):
    xin = os.path.join(WORK, tag + '_x.npy')
    np.save(xin, x)
    yout = os.path.join(WORK, tag + '_ort.npy')
    try:
        r = subprocess.run(['node', os.path.join(SRC, 'scripts', 'ort-run.js'), model, xin, yout], capture_output=True, text=True)
    except FileNotFoundError:
        return None, 'node is not installed'
    if r.returncode:
        return None, r.stderr.strip()[-300:]
    return np.load(yout), ''


def cos_rows(a, b):
    a, b = a.reshape(-1, a.shape[-1]).astype(np.float64), b.reshape(-1, b.shape[-1]).astype(np.float64)
    return (a * b).sum(1) / np.linalg.norm(a, axis=1) / np.linalg.norm(b, axis=1)


def case_accuracy():
    rng = np.random.default_rng(5)
    for name, shape in (('mlp', (4, 6, 32)), ('encoder', (3, 12, 64))):
        src = export(name)
        dyn = os.path.join(WORK, name + '_acc_dyn.onnx')
        rc, err = quantize(src, dyn)
        if not check(rc == 0, f'{name}: quantize --dynamic', err[-300:]):
            continue
        x = rng.normal(0, 1, shape).astype(np.float32)
        yf, _ = toplu_run(src, x, name + '_f32')
        yq, steps = toplu_run(dyn, x, name + '_int8', profile=True)
        if yf is None or yq is None:
            continue
        nmm = len(float_weighted(onnx.load(src)))
        fused = [s for s in steps if s.startswith('DynamicQuantizeMatMul')]
        check(len(fused) == nmm and not any('MatMulInteger' in s or s in ('DynamicQuantizeLinear', 'Cast', 'Mul') for s in steps),
              f'{name}: every chain one DynamicQuantizeMatMul step', f'{len(fused)} of {nmm}: {sorted(set(steps))}')
        if name == 'encoder':
            check(sum('Gelu' in s for s in fused) == 2 and sum(s.endswith('+Add+Add') for s in fused) >= 2 and
                  fused[-1] == 'DynamicQuantizeMatMul+Cast+Mul+Add',
                  'encoder: the GELUs and the FFN residual Adds fused into the integer matmuls', ','.join(fused))
        c = cos_rows(yq, yf)
        qerr = float(np.abs(yq - yf).max())
        check(c.min() >= 0.999, f'{name}: int8 against float, cosine per row >= 0.999', f'min {c.min():.6f}, max abs {qerr:.4g}')
        yo, why = ort_run(dyn, x, name)
        if yo is None:
            print(f'note: ONNX Runtime part skipped ({why})')
            continue
        d = float(np.abs(yo - yq).max())
        if name == 'mlp':
            check(d <= 1e-5 * float(np.abs(yo).max()), 'mlp: toplu equals ONNX Runtime on the same int8 file',
                  f'max diff {d:.3g} of {float(np.abs(yo).max()):.3g}')
        else:
            co = cos_rows(yq, yo)
            check(d <= 0.25 * qerr and co.min() >= 0.9999, 'encoder: toplu within a quarter of the quantization error of ONNX Runtime',
                  f'max diff {d:.3g} against int8-float {qerr:.3g}, cosine min {co.min():.6f}')


{'file': case_file, 'accuracy': case_accuracy}[CASE]()
print(f'{len(fails)} failed' if fails else 'all passed')
sys.exit(1 if fails else 0)
