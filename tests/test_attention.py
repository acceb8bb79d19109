"""tests/test_attention.py - the fused scaled dot-product attention
(graph/fuse.c rewrite_attention, ops/onednn/attention.c) against the
unfused graph and numpy, and on PyTorch exports against ONNX Runtime.

1. Hand-built attention graphs as exporters write them: Q [B,H,T,d],
   K [B,H,T,d] transposed to KT, V [B,H,T,dv]; scores divided by sqrt(d)
   (a power of two and not), multiplied by a scalar, or the scale on Q; no
   mask, an additive mask [B,1,1,T] (a run-time input), [1,1,T,T] (a
   constant causal mask) and [T,T], a bool [1,1,T,T] mask through Where
   (either branch order), at odd T (1, 7, 13, 400: several row blocks), batch
   1 and 3, 1 and 2 threads.  Each runs fused (the plan has a
   ScaledDotProductAttention step and no Softmax) and unfused
   (TOPLU_NO_FUSE=attention: the Softmax step is there): both against
   float64 numpy, and fused against unfused, max abs diff <= 1e-5 relative
   to the output's scale.  Graphs the rewrite must leave alone (the scores
   also a graph output, a Softmax over another axis) stay unfused and right.
2. A 2-layer BERT-like encoder and a 2-layer GPT-2-like decoder exported by
   PyTorch (the layer code of ../shared/accept/breadth.py, smaller): every
   layer's attention fuses (the count of ScaledDotProductAttention steps)
   with the heads' four Transposes folded in (no Transpose step left),
   and the outputs match ONNX Runtime (scripts/ort-run.js) within 1e-4 at
   batch 1 and 3, with rows of the BERT batch padded and masked.

Usage: test_attention.py --toplu build/toplu [--source-dir .]
Exit 0 when every check passes, 1 otherwise, 77 when torch is missing for
part 2 (part 1 still runs and must pass).
"""
import argparse
import math
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
ap.add_argument('--source-dir', default=os.path.join(os.path.dirname(os.path.abspath(__file__)), '..'))
args = ap.parse_args()
work = tempfile.mkdtemp(prefix='toplu-attention-')
fails = 0
rng = np.random.default_rng(5)


def check(ok, what, why=''):
    global fails
    print(('ok: ' if ok else 'FAIL: ') + what + ('' if ok else f': {why}'), flush=True)
    fails += 0 if ok else 1


def run(model, feeds, fused=True, threads=None):
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
    env = dict(os.environ, TOPLU_PLAN_DUMP='1')
    env.pop('TOPLU_NO_FUSE', None)
    if not fused:
        env['TOPLU_NO_FUSE'] = 'attention'
    r = subprocess.run(cmd, capture_output=True, text=True, env=env)
    if r.returncode:
        return None, r.stderr.strip()[-400:]
    labels = [l.split()[1] for l in r.stderr.splitlines() if len(l.split()) > 2 and l.split()[0].isdigit()]
    return {f[:-4]: np.load(os.path.join(out, f)) for f in os.listdir(out) if f.endswith('.npy')}, labels


def save(nodes, ins, outs, inits, name, opset=13):
    g = h.make_graph(nodes, 'g', ins, outs, inits)
    m = h.make_model(g, opset_imports=[h.make_opsetid('', opset)])
    m.ir_version = 8
    path = os.path.join(work, name)
    onnx.save(m, path)
    return path


def softmax(x):
    e = np.exp(x - x.max(-1, keepdims=True))
    return e / e.sum(-1, keepdims=True)


# ---- 1. hand-built graphs ----

def case(name, B, H, Tn, d, dv, scale_form, mask_form, threads=None, expect_fused=True, extra_output=False, axis=-1):
    q = rng.standard_normal((B, H, Tn, d)).astype(np.float32)
    k = rng.standard_normal((B, H, Tn, d)).astype(np.float32)
    v = rng.standard_normal((B, H, Tn, dv)).astype(np.float32)
    feeds = {'q': q, 'k': k, 'v': v}
    ins = [h.make_tensor_value_info(n, T.FLOAT, ['B', H, 'T', w]) for n, w in (('q', d), ('k', d), ('v', dv))]
    inits, nodes = [], [h.make_node('Transpose', ['k'], ['kt'], perm=[0, 1, 3, 2])]
    c = math.sqrt(d)
    Q, K, V = (a.astype(np.float64) for a in (q, k, v))
    qin = 'q'
    if scale_form == 'q_mul':  # the scale on Q before the product
        inits.append(nh.from_array(np.array(1 / c, np.float32), 'c'))
        nodes.append(h.make_node('Mul', ['q', 'c'], ['qs']))
        qin = 'qs'
    nodes.append(h.make_node('MatMul', [qin, 'kt'], ['s0']))
    s = Q @ K.transpose(0, 1, 3, 2)
    last = 's0'
    if scale_form in ('div', 'mul'):
        cv = np.float32(c) if scale_form == 'div' else np.float32(1 / c)
        inits.append(nh.from_array(np.array(cv, np.float32), 'c'))
        nodes.append(h.make_node('Div' if scale_form == 'div' else 'Mul', ['s0', 'c'] if scale_form == 'div' else ['c', 's0'],
                                 ['s1']))
        last = 's1'
        s = s / float(cv) if scale_form == 'div' else s * float(cv)
    else:
        s = s / c if scale_form == 'q_mul' else s
    if mask_form == 'b11t':  # additive, per row's padding, a run-time input
        keep = np.ones((B, Tn), np.float32)
        for b in range(B):
            keep[b, Tn - b % max(1, Tn // 2):] = 0 if b else 1
        m = ((1 - keep) * -10000.0)[:, None, None, :].astype(np.float32)
        feeds['mask'] = m
        ins.append(h.make_tensor_value_info('mask', T.FLOAT, ['B', 1, 1, 'T']))
        nodes.append(h.make_node('Add', [last, 'mask'], ['s2']))
        s = s + m
        last = 's2'
    elif mask_form in ('11tt', 'tt'):  # additive constant causal mask
        m = np.triu(np.full((Tn, Tn), -1e9, np.float32), 1)
        m = m[None, None] if mask_form == '11tt' else m
        inits.append(nh.from_array(m, 'mask'))
        nodes.append(h.make_node('Add', ['mask', last], ['s2']))
        s = s + m
        last = 's2'
    elif mask_form in ('where', 'where_rev'):  # bool causal mask with a fill
        cond = np.tril(np.ones((Tn, Tn), bool))[None, None]
        fill = np.float32(np.finfo(np.float32).min)
        inits += [nh.from_array(cond if mask_form == 'where' else ~cond, 'cond'), nh.from_array(np.array(fill), 'fill')]
        nodes.append(h.make_node('Where', ['cond', last, 'fill'] if mask_form == 'where' else ['cond', 'fill', last], ['s2']))
        s = np.where(cond, s, float(fill))
        last = 's2'
    nodes.append(h.make_node('Softmax', [last], ['p'], axis=axis))
    nodes.append(h.make_node('MatMul', ['p', 'v'], ['y']))
    outs = [h.make_tensor_value_info('y', T.FLOAT, None)]
    if extra_output:
        outs.append(h.make_tensor_value_info(last, T.FLOAT, None))
    model = save(nodes, ins, outs, inits, f'{name}.onnx')
    if axis == -1:
        want = softmax(s) @ V
    else:
        e = np.exp(s - s.max(axis, keepdims=True))
        want = (e / e.sum(axis, keepdims=True)) @ V
    tol = 1e-5 * max(1.0, float(np.abs(want).max()))
    got_f, lab_f = run(model, feeds, fused=True, threads=threads)
    got_u, lab_u = run(model, feeds, fused=False, threads=threads)
    if got_f is None or got_u is None:
        check(False, name, lab_f if got_f is None else lab_u)
        return
    fused = 'ScaledDotProductAttention' in lab_f
    check(fused == expect_fused and ('Softmax' not in lab_f) == expect_fused,
          f'{name}: {"fused" if expect_fused else "left unfused"}', f'steps {lab_f}')
    check('ScaledDotProductAttention' not in lab_u and 'Softmax' in lab_u, f'{name}: TOPLU_NO_FUSE=attention leaves it out',
          f'steps {lab_u}')
    df = float(np.abs(got_f['y'] - want).max())
    du = float(np.abs(got_u['y'] - want).max())
    dfu = float(np.abs(got_f['y'] - got_u['y']).max())
    check(got_f['y'].shape == want.shape and df <= tol, f'{name}: fused against numpy', f'max abs diff {df:.3g} > {tol:.3g}')
    check(du <= tol, f'{name}: unfused against numpy', f'max abs diff {du:.3g}')
    check(dfu <= tol, f'{name}: fused against unfused', f'max abs diff {dfu:.3g} > {tol:.3g}')


MASKS = ('none', 'b11t', '11tt', 'tt', 'where', 'where_rev')
for B in (1, 3):
    for Tn in (7, 13):
        for mask_form in MASKS:  # d 5 at T 13: a scale 1/sqrt(5), not a power of two
            case(f'b{B}_t{Tn}_div_{mask_form}', B, 2, Tn, 8 if Tn != 13 else 5, 6, 'div', mask_form)
    for mask_form in ('b11t', 'where'):
        case(f'b{B}_t1_div_{mask_form}', B, 2, 1, 8, 6, 'div', mask_form)
for scale_form in ('mul', 'q_mul', 'none'):
    for mask_form in ('none', 'b11t', 'where'):
        case(f'b3_t7_{scale_form}_{mask_form}', 3, 2, 7, 8, 6, scale_form, mask_form)
case('b1_h1_t400_2threads_b11t', 1, 1, 400, 16, 16, 'div', 'b11t', threads=2)
case('b3_t400_1thread_where', 3, 2, 400, 8, 8, 'div', 'where', threads=1)
case('b1_t37_2threads_11tt', 1, 3, 37, 64, 64, 'div', '11tt', threads=2)


def widening_case(name, q_rows, k_rows):
    """A mask that widens the scores: Q with 1 row or K with 1 row under a [1,1,T,T] mask."""
    B, H, Tn, d = 2, 2, 5, 4
    q = rng.standard_normal((B, H, q_rows, d)).astype(np.float32)
    k = rng.standard_normal((B, H, k_rows, d)).astype(np.float32)
    v = rng.standard_normal((B, H, Tn, d)).astype(np.float32)
    m = rng.standard_normal((1, 1, Tn, Tn)).astype(np.float32)
    nodes = [h.make_node('Transpose', ['k'], ['kt'], perm=[0, 1, 3, 2]), h.make_node('MatMul', ['q', 'kt'], ['s0']),
             h.make_node('Div', ['s0', 'c'], ['s1']), h.make_node('Add', ['s1', 'mask'], ['s2']),
             h.make_node('Softmax', ['s2'], ['p'], axis=-1), h.make_node('MatMul', ['p', 'v'], ['y'])]
    ins = [h.make_tensor_value_info('q', T.FLOAT, ['B', H, q_rows, d]), h.make_tensor_value_info('k', T.FLOAT, ['B', H, k_rows, d]),
           h.make_tensor_value_info('v', T.FLOAT, ['B', H, Tn, d])]
    model = save(nodes, ins, [h.make_tensor_value_info('y', T.FLOAT, None)],
                 [nh.from_array(np.array(2.0, np.float32), 'c'), nh.from_array(m, 'mask')], f'{name}.onnx')
    s = q.astype(np.float64) @ k.astype(np.float64).transpose(0, 1, 3, 2) / 2.0 + m
    want = softmax(s) @ v.astype(np.float64)
    got, labels = run(model, {'q': q, 'k': k, 'v': v})
    if got is None:
        check(False, name, labels)
        return
    check('ScaledDotProductAttention' in labels, f'{name}: fused', f'steps {labels}')
    dd = float(np.abs(got['y'] - want).max())
    check(got['y'].shape == want.shape and dd <= 1e-5 * max(1.0, float(np.abs(want).max())), f'{name}: against numpy',
          f'shape {got["y"].shape}, max abs diff {dd:.3g}')


widening_case('one_query_row_under_a_TxT_mask', 1, 5)
widening_case('one_key_under_a_TxT_mask', 5, 1)
case('scores_also_an_output', 2, 2, 7, 8, 8, 'div', 'b11t', expect_fused=False, extra_output=True)
case('softmax_over_axis_2', 2, 2, 7, 8, 8, 'div', 'none', expect_fused=False, axis=2)


# ---- 2. PyTorch exports against ONNX Runtime ----

try:
    import torch
    import torch.nn as nn
    import torch.nn.functional as F
except ImportError:
    print('SKIP: no torch for the exported models')
    sys.exit(1 if fails else 77)

torch.manual_seed(0)


class BertLayer(nn.Module):  # as ../shared/accept/breadth.py
    def __init__(s, hidden, heads, ffn):
        super().__init__()
        s.h, s.d = heads, hidden // heads
        s.q, s.k, s.v, s.o = (nn.Linear(hidden, hidden) for _ in range(4))
        s.ln1, s.ln2 = nn.LayerNorm(hidden, eps=1e-12), nn.LayerNorm(hidden, eps=1e-12)
        s.fc1, s.fc2 = nn.Linear(hidden, ffn), nn.Linear(ffn, hidden)

    def forward(s, x, mask):
        b, t, c = x.shape
        q, k, v = (y.view(b, t, s.h, s.d).transpose(1, 2) for y in (s.q(x), s.k(x), s.v(x)))
        a = torch.softmax(q @ k.transpose(-1, -2) / math.sqrt(s.d) + mask, dim=-1)
        x = s.ln1(x + s.o((a @ v).transpose(1, 2).reshape(b, t, c)))
        return s.ln2(x + s.fc2(F.gelu(s.fc1(x))))


class Bert(nn.Module):
    def __init__(s, layers, hidden=96, heads=4, vocab=500, maxpos=128, ffn=192):
        super().__init__()
        s.word, s.pos, s.tok = nn.Embedding(vocab, hidden), nn.Embedding(maxpos, hidden), nn.Embedding(2, hidden)
        s.ln = nn.LayerNorm(hidden, eps=1e-12)
        s.layers = nn.ModuleList(BertLayer(hidden, heads, ffn) for _ in range(layers))

    def forward(s, input_ids, attention_mask):
        pos = torch.arange(input_ids.shape[1], dtype=torch.long).unsqueeze(0)
        x = s.ln(s.word(input_ids) + s.pos(pos) + s.tok(torch.zeros_like(input_ids)))
        mask = (1.0 - attention_mask[:, None, None, :].to(x.dtype)) * -10000.0
        for layer in s.layers:
            x = layer(x, mask)
        return x


class GptBlock(nn.Module):
    def __init__(s, hidden, heads, maxpos):
        super().__init__()
        s.h, s.d = heads, hidden // heads
        s.ln_1, s.ln_2 = nn.LayerNorm(hidden), nn.LayerNorm(hidden)
        s.c_attn, s.c_proj = nn.Linear(hidden, 3 * hidden), nn.Linear(hidden, hidden)
        s.c_fc, s.mlp_proj = nn.Linear(hidden, 4 * hidden), nn.Linear(4 * hidden, hidden)
        s.register_buffer('bias', torch.tril(torch.ones(maxpos, maxpos, dtype=torch.bool)).view(1, 1, maxpos, maxpos))

    def forward(s, x):
        b, t, c = x.shape
        q, k, v = (y.view(b, t, s.h, s.d).transpose(1, 2) for y in s.c_attn(s.ln_1(x)).split(c, dim=2))
        w = q @ k.transpose(-1, -2) / math.sqrt(s.d)
        w = torch.where(s.bias[:, :, :t, :t], w, torch.tensor(torch.finfo(w.dtype).min, dtype=w.dtype))
        x = x + s.c_proj((torch.softmax(w, dim=-1) @ v).transpose(1, 2).reshape(b, t, c))
        return x + s.mlp_proj(F.gelu(s.c_fc(s.ln_2(x)), approximate='tanh'))


class Gpt(nn.Module):
    def __init__(s, layers, hidden=96, heads=4, vocab=500, maxpos=128):
        super().__init__()
        s.wte, s.wpe = nn.Embedding(vocab, hidden), nn.Embedding(maxpos, hidden)
        s.h = nn.ModuleList(GptBlock(hidden, heads, maxpos) for _ in range(layers))
        s.ln_f = nn.LayerNorm(hidden)

    def forward(s, input_ids):
        x = s.wte(input_ids) + s.wpe(torch.arange(input_ids.shape[1], dtype=torch.long).unsqueeze(0))
        for blk in s.h:
            x = blk(x)
        return s.ln_f(x) @ s.wte.weight.t()


import warnings
warnings.filterwarnings('ignore')
seq = {0: 'batch', 1: 'seq'}
bert_path, gpt_path = os.path.join(work, 'bert2.onnx'), os.path.join(work, 'gpt2.onnx')
with torch.no_grad():
    torch.onnx.export(Bert(2).eval(), (torch.randint(0, 500, (2, 16)), torch.ones(2, 16, dtype=torch.long)), bert_path,
                      input_names=['input_ids', 'attention_mask'], output_names=['last_hidden_state'],
                      dynamic_axes={'input_ids': seq, 'attention_mask': seq, 'last_hidden_state': seq}, opset_version=14)
    torch.onnx.export(Gpt(2).eval(), (torch.randint(0, 500, (2, 16)),), gpt_path, input_names=['input_ids'],
                      output_names=['logits'], dynamic_axes={'input_ids': seq, 'logits': seq}, opset_version=17)


def ort(model, feeds):
    out = os.path.join(work, 'ort-out')
    subprocess.run(['rm', '-rf', out], check=True)
    cmd = ['node', os.path.join(args.source_dir, 'scripts', 'ort-run.js'), model, '--output', out]
    for k, v in feeds.items():
        f = os.path.join(work, f'ort_{k}.npy')
        np.save(f, v)
        cmd += ['--input', f'{k}={f}']
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode:
        return None, r.stderr.strip()[-300:]
    return {f[:-4]: np.load(os.path.join(out, f)) for f in os.listdir(out) if f.endswith('.npy')}, ''


for label, path, out_name in (('BERT-like', bert_path, 'last_hidden_state'), ('GPT-2-like', gpt_path, 'logits')):
    for B, Tn in ((1, 16), (3, 37)):
        feeds = {'input_ids': rng.integers(0, 500, (B, Tn)).astype(np.int64)}
        if label == 'BERT-like':
            am = np.ones((B, Tn), np.int64)
            for b in range(1, B):
                am[b, Tn - 5 * b:] = 0  # padded rows
            feeds['attention_mask'] = am
        want, why = ort(path, feeds)
        if want is None:
            check(False, f'{label} B={B} T={Tn}: ONNX Runtime', why)
            continue
        got, labels = run(path, feeds)
        if got is None:
            check(False, f'{label} B={B} T={Tn}: toplu', labels)
            continue
        n = labels.count('ScaledDotProductAttention')
        check(n == 2 and 'Softmax' not in labels, f'{label} B={B} T={Tn}: both layers\' attention fused', f'{n} fused, steps {labels}')
        check('Transpose' not in labels, f'{label} B={B} T={Tn}: the heads\' Transposes folded into the attention '
              '(it reads Q, K, V and writes Y as [B, T, H, d])', f'steps {labels}')
        w = want[out_name]
        d = float(np.abs(got[out_name] - w).max())
        tol = 1e-4 * max(1.0, float(np.abs(w).max()))
        check(d <= tol, f'{label} B={B} T={Tn}: against ONNX Runtime', f'max abs diff {d:.3g} > {tol:.3g}')
        unf, _ = run(path, feeds, fused=False)
        if unf is not None:
            du = float(np.abs(got[out_name] - unf[out_name]).max())
            check(du <= tol, f'{label} B={B} T={Tn}: fused against unfused', f'max abs diff {du:.3g}')

subprocess.run(['rm', '-rf', work])
print(f'{fails} failed' if fails else 'all passed')
sys.exit(1 if fails else 0)
