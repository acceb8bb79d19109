"""tests/test_rnn_cases.py - LSTM, GRU and RNN nodes against a float64 numpy
reference written from the ONNX operator spec's equations.

Beyond the ONNX node tests (which never set direction, sequence_lens, clip,
input_forget or other activations), every op at:
  - direction forward, reverse and bidirectional, layout 0 and 1 (opset 14;
    opset 7 for some layout-0 cases);
  - no optional input, and all of them: B, sequence_lens of different
    lengths (the reverse direction starting at each row's own end, Y zero
    after it), initial_h, initial_c and peepholes P (LSTM);
  - weights as initializers (packed at plan time) and as run-time inputs
    (packed per run);
  - GRU with linear_before_reset 0 and 1, LSTM with input_forget and clip,
    activations other than the defaults with activation_alpha/beta, and
    nodes producing only some of their outputs;
  - 1 and 2 threads (the 2-thread plan steps directions and row blocks on
    threads of their own), hidden sizes not a multiple of 16 and rows not a
    multiple of 6 (the GEMM's edge tiles);
and batched rows equal to each row run alone.

Rows equal bit for bit: the products run on toplu's own kernels, whose rows
do not depend on the rows beside them.  A build with -DTOPLU_RNN_ISA_MAX=0
(dnnl_sgemm, for CPUs without AVX2) gives rows equal to rounding only: run it
with --rows-tol 1e-6.

Usage: test_rnn_cases.py --toplu build/toplu [--rows-tol X]
"""
import atexit
import json
import argparse
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
ap.add_argument('--rows-tol', type=float, default=0.0, help='rows alone against batched rows (default 0: the same bits)')
args = ap.parse_args()
work = tempfile.mkdtemp(prefix='toplu-rnn-cases-')
atexit.register(shutil.rmtree, work, True)  # the models and outputs it made go with it
fails = 0
rng = np.random.default_rng(11)


def check(ok, what, why=''):
    global fails
    print(('ok: ' if ok else 'FAIL: ') + what + ('' if ok else f': {why}'), flush=True)
    fails += 0 if ok else 1


# ---- the reference ----

def act(name, x, alpha, beta):
    n = name.lower()
    if n == 'relu':
        return np.maximum(x, 0)
    if n == 'tanh':
        return np.tanh(x)
    if n == 'sigmoid':
        return 1 / (1 + np.exp(-x))
    if n == 'affine':
        return alpha * x + beta
    if n == 'leakyrelu':
        return np.where(x >= 0, x, alpha * x)
    if n == 'thresholdedrelu':
        return np.where(x >= alpha, x, 0)
    if n == 'scaledtanh':
        return alpha * np.tanh(beta * x)
    if n == 'hardsigmoid':
        return np.clip(alpha * x + beta, 0, 1)
    if n == 'elu':
        return np.where(x >= 0, x, alpha * (np.exp(x) - 1))
    if n == 'softsign':
        return x / (1 + np.abs(x))
    if n == 'softplus':
        return np.log1p(np.exp(x))
    raise ValueError(name)


# activation -> (takes alpha, takes beta, default alpha, default beta)
ACT_PARAMS = {'affine': (1, 1, 1.0, 0.0), 'leakyrelu': (1, 0, 0.01, 0.0), 'thresholdedrelu': (1, 0, 1.0, 0.0),
              'scaledtanh': (1, 1, 1.0, 1.0), 'hardsigmoid': (1, 1, 0.2, 0.5), 'elu': (1, 0, 1.0, 0.0)}
GATES = {'LSTM': 4, 'GRU': 3, 'RNN': 1}
DEFAULT_ACTS = {'LSTM': ['Sigmoid', 'Tanh', 'Tanh'], 'GRU': ['Sigmoid', 'Tanh'], 'RNN': ['Tanh']}


def reference(op, X, W, R, B=None, lens=None, h0=None, c0=None, P=None, **at):
    """Y, Y_h, Y_c (Y_c None but for LSTM) in float64."""
    layout = at.get('layout', 0)
    X = X.astype(np.float64)
    if layout:
        X = X.transpose(1, 0, 2)
        h0 = None if h0 is None else h0.transpose(1, 0, 2)
        c0 = None if c0 is None else c0.transpose(1, 0, 2)
    S, N, _ = X.shape
    D, H = W.shape[0], R.shape[2]
    direction = at.get('direction', 'forward')
    per = len(DEFAULT_ACTS[op])
    names = at.get('activations', DEFAULT_ACTS[op] * D)
    if len(names) == per:
        names = names * D
    alphas, betas = list(at.get('activation_alpha', [])), list(at.get('activation_beta', []))
    acts = []
    for nm in names:
        ua, ub, da, db = ACT_PARAMS.get(nm.lower(), (0, 0, 0.0, 0.0))
        a = alphas.pop(0) if ua and alphas else da
        b = betas.pop(0) if ub and betas else db
        acts.append(lambda x, nm=nm, a=a, b=b: act(nm, x, a, b))
    clip = at.get('clip')
    cl = (lambda v: np.clip(v, -clip, clip)) if clip is not None else (lambda v: v)
    Y = np.zeros((S, D, N, H))
    Yh = np.zeros((D, N, H))
    Yc = np.zeros((D, N, H))
    for d in range(D):
        rev = d == 1 or direction == 'reverse'
        f, g = acts[d * per], acts[d * per + 1] if per > 1 else None
        hh = acts[d * per + 2] if per > 2 else None
        Wd, Rd = W[d].astype(np.float64), R[d].astype(np.float64)
        Bd = np.zeros(2 * GATES[op] * H) if B is None else B[d].astype(np.float64)
        Wb, Rb = Bd[:GATES[op] * H], Bd[GATES[op] * H:]
        for b in range(N):
            L = S if lens is None else int(lens[b])
            hs = np.zeros(H) if h0 is None else h0[d, b].astype(np.float64)
            cs = np.zeros(H) if c0 is None else c0[d, b].astype(np.float64)
            for s in range(L):
                t = L - 1 - s if rev else s
                x = X[t, b]
                if op == 'LSTM':
                    gt = Wd @ x + Rd @ hs + Wb + Rb
                    gi, go, gf, gc = np.split(gt, 4)
                    pi, po, pf = (np.zeros(H),) * 3 if P is None else np.split(P[d].astype(np.float64), 3)
                    i = f(cl(gi + pi * cs))
                    fg = 1 - i if at.get('input_forget') else f(cl(gf + pf * cs))
                    cs = fg * cs + i * g(cl(gc))
                    o = f(cl(go + po * cs))
                    hs = o * hh(cs)
                elif op == 'GRU':
                    xz, xr, xh = np.split(Wd @ x + Wb, 3)
                    Rz, Rr, Rh = np.split(Rd, 3)
                    bz, br, bh = np.split(Rb, 3)
                    z = f(cl(xz + Rz @ hs + bz))
                    r = f(cl(xr + Rr @ hs + br))
                    if at.get('linear_before_reset'):
                        ht = g(cl(xh + r * (Rh @ hs + bh)))
                    else:
                        ht = g(cl(xh + Rh @ (r * hs) + bh))
                    hs = (1 - z) * ht + z * hs
                else:
                    hs = f(cl(Wd @ x + Rd @ hs + Wb + Rb))
                Y[t, d, b] = hs
            Yh[d, b], Yc[d, b] = hs, cs
    if layout:
        Y, Yh, Yc = Y.transpose(2, 0, 1, 3), Yh.transpose(1, 0, 2), Yc.transpose(1, 0, 2)
    return Y, Yh, (Yc if op == 'LSTM' else None)


# ---- toplu ----

def run(model, feeds, threads):
    """Run toplu on feeds; ({output: array}, stderr)."""
    out = os.path.join(work, 'out')
    subprocess.run(['rm', '-rf', out], check=True)
    cmd = [args.toplu, 'run', model, '--output', out, '--threads', str(threads), '--quiet']
    for k, v in feeds.items():
        f = os.path.join(work, f'{k}.npy')
        np.save(f, v)
        cmd += ['--input', f'{k}={f}']
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode:
        return None, r.stderr
    return {f[:-4]: np.load(os.path.join(out, f)) for f in os.listdir(out) if f.endswith('.npy')}, r.stderr


INPUT_NAMES = ['X', 'W', 'R', 'B', 'sequence_lens', 'initial_h', 'initial_c', 'P']


def make_model(op, vals, const, outs, opset, at):
    """A model with one op node; vals: input name -> array (None: absent); const: names made initializers."""
    names = [n for n in INPUT_NAMES[:8 if op == 'LSTM' else 6]]
    node_in = [n if vals.get(n) is not None else '' for n in names]
    while node_in and not node_in[-1]:
        node_in.pop()
    ins, inits = [], []
    for n in node_in:
        if not n:
            continue
        v = vals[n]
        if n in const:
            inits.append(nh.from_array(v, n))
        else:
            dt = T.INT32 if v.dtype == np.int32 else T.FLOAT
            ins.append(h.make_tensor_value_info(n, dt, list(v.shape)))
    node_out = [o if o in outs else '' for o in (['Y', 'Y_h', 'Y_c'] if op == 'LSTM' else ['Y', 'Y_h'])]
    while node_out and not node_out[-1]:
        node_out.pop()
    node = h.make_node(op, node_in, node_out, **at)
    g = h.make_graph([node], 'g', ins, [h.make_tensor_value_info(o, T.FLOAT, None) for o in node_out if o], inits)
    m = h.make_model(g, opset_imports=[h.make_opsetid('', opset)])
    m.ir_version = 8
    path = os.path.join(work, f'{op}.onnx')
    onnx.save(m, path)
    return path, {n: vals[n] for n in node_in if n and n not in const}


def case(op, what, S=6, N=5, I=7, H=20, full=False, const=True, outs=None, opset=14, threads=(1, 2),
         rows_alone=False, **at):
    """One node against the reference; at: the node's attributes."""
    G = GATES[op]
    D = 2 if at.get('direction') == 'bidirectional' else 1
    layout = at.get('layout', 0)
    at = dict(at, hidden_size=H)
    vals = {'X': rng.standard_normal((N, S, I) if layout else (S, N, I)).astype(np.float32),
            'W': (rng.standard_normal((D, G * H, I)) * 0.4).astype(np.float32),
            'R': (rng.standard_normal((D, G * H, H)) * 0.4).astype(np.float32)}
    hshape = (N, D, H) if layout else (D, N, H)
    if full:
        vals['B'] = (rng.standard_normal((D, 2 * G * H)) * 0.3).astype(np.float32)
        vals['sequence_lens'] = np.array([S - (b % 3) * (S // 3) for b in range(N)], dtype=np.int32)
        vals['initial_h'] = rng.standard_normal(hshape).astype(np.float32)
        if op == 'LSTM':
            vals['initial_c'] = rng.standard_normal(hshape).astype(np.float32)
            vals['P'] = (rng.standard_normal((D, 3 * H)) * 0.3).astype(np.float32)
    outs = outs or (['Y', 'Y_h', 'Y_c'] if op == 'LSTM' else ['Y', 'Y_h'])
    consts = {'W', 'R', 'B', 'P'} if const else set()
    model, feeds = make_model(op, vals, consts, outs, opset, at)
    want = dict(zip(['Y', 'Y_h', 'Y_c'], reference(op, vals['X'], vals['W'], vals['R'], vals.get('B'),
                                                   vals.get('sequence_lens'), vals.get('initial_h'),
                                                   vals.get('initial_c'), vals.get('P'), **at)))
    label = f'{op} {what} ({at.get("direction", "forward")}, layout {layout}, opset {opset}, ' \
            f'{"constant" if const else "run-time"} weights{", all optional inputs" if full else ""})'
    results = {}
    for th in threads:
        got, err = run(model, feeds, th)
        if got is None:
            check(False, f'{label}, {th} thread(s)', err.strip()[-300:])
            continue
        results[th] = got
        worst = []
        for o in outs:
            if o not in got:
                worst.append(f'{o} missing')
                continue
            w = want[o]
            if got[o].shape != w.shape:
                worst.append(f'{o} shape {got[o].shape} != {w.shape}')
                continue
            dmax = float(np.abs(got[o] - w).max())
            if dmax > 1e-4 * max(1.0, float(np.abs(w).max())):
                worst.append(f'{o} max abs diff {dmax:.3g}')
        check(not worst, f'{label}, {th} thread(s)', '; '.join(worst))
    if len(results) == 2:
        same = all(np.array_equal(results[1][o], results[2][o]) for o in outs if o in results[1] and o in results[2])
        check(same, f'{label}: 1 and 2 threads give the same bits')
    if rows_alone and results:
        got = results[max(results)]
        bax = 0 if layout else 1  # the batch axis of X, Y_h
        worst = 0.0
        for b in range(N):
            one = dict(feeds)
            one['X'] = np.take(vals['X'], [b], axis=bax)
            for k in ('initial_h', 'initial_c'):
                if k in one:
                    one[k] = np.take(vals[k], [b], axis=bax)
            if 'sequence_lens' in one:
                one['sequence_lens'] = vals['sequence_lens'][b:b + 1]
            m1, f1 = make_model(op, dict(vals, **one), consts, outs, opset, at)
            g1, err = run(m1, f1, 1)
            if g1 is None:
                check(False, f'{label}: row {b} alone', err.strip()[-300:])
                return
            for o in outs:
                ax = (0 if layout else 2) if o == 'Y' else bax
                worst = max(worst, float(np.abs(np.take(got[o], [b], axis=ax) - g1[o]).max()))
        check(worst <= args.rows_tol, f'{label}: each of the {N} batch rows equals the row run alone'
              + (f' (max abs diff {worst:.2g})' if args.rows_tol else ''), f'max abs diff {worst:.3g}')


for op in ('LSTM', 'GRU', 'RNN'):
    for direction in ('forward', 'reverse', 'bidirectional'):
        for layout in (0, 1):
            case(op, 'bare', direction=direction, layout=layout)
            case(op, 'full', full=True, const=layout == 0, direction=direction, layout=layout,
                 rows_alone=direction == 'bidirectional')
    case(op, 'opset 7', opset=7, full=True, direction='bidirectional')
    case(op, 'hidden 32, 8 rows, 13 steps', S=13, N=8, H=32, full=True, direction='bidirectional')
    case(op, 'one step, one row', S=1, N=1, H=16, full=True, direction='bidirectional')
    case(op, 'clip 0.5', full=True, clip=0.5, direction='bidirectional')
    case(op, 'only Y_h', outs=['Y_h'], full=True, direction='reverse')
    case(op, 'only Y', outs=['Y'], direction='forward', layout=1)

for direction in ('forward', 'reverse', 'bidirectional'):
    for layout in (0, 1):
        case('GRU', 'linear_before_reset', full=True, linear_before_reset=1, direction=direction, layout=layout,
             rows_alone=direction == 'bidirectional' and layout == 1)
case('LSTM', 'input_forget', full=True, input_forget=1, direction='bidirectional')
case('LSTM', 'input_forget and clip, run-time weights', full=True, const=False, input_forget=1, clip=0.7)
case('LSTM', 'HardSigmoid/LeakyRelu/ScaledTanh per direction', full=True, direction='bidirectional',
     activations=['HardSigmoid', 'LeakyRelu', 'ScaledTanh', 'Sigmoid', 'Elu', 'Softsign'],
     activation_alpha=[0.3, 0.05, 0.9, 0.7], activation_beta=[0.4, 1.1])
case('LSTM', 'activations given once for both directions', full=True, direction='bidirectional',
     activations=['Sigmoid', 'Tanh', 'Relu'])
case('GRU', 'Affine/ThresholdedRelu', full=True, activations=['HardSigmoid', 'Affine'],
     activation_alpha=[0.25, 0.5], activation_beta=[0.45, 0.1])
case('GRU', 'Softplus, linear_before_reset', full=True, linear_before_reset=1, activations=['Sigmoid', 'Softplus'])
case('RNN', 'Relu', full=True, activations=['Relu'], direction='bidirectional')
case('RNN', 'ThresholdedRelu/Softsign', full=True, direction='bidirectional',
     activations=['ThresholdedRelu', 'Softsign'], activation_alpha=[0.2])

# TOPLU_MAX_CPU_ISA=avx2 caps the RNN kernels as it caps the others (they read the CPU alone until 2026-12-06, so
# on an AVX-512 machine the cap never ran their AVX2 path): the profile names the AVX2 kernel, and the outputs
# stay those of the reference.
for op in ('LSTM', 'GRU'):
    at = dict(hidden_size=32, direction='bidirectional')
    D, G, S, N, I = 2, GATES[op], 9, 6, 11
    vals = {'X': rng.standard_normal((S, N, I)).astype(np.float32),
            'W': (rng.standard_normal((D, G * 32, I)) * 0.4).astype(np.float32),
            'R': (rng.standard_normal((D, G * 32, 32)) * 0.4).astype(np.float32)}
    outs = ['Y', 'Y_h']
    model, feeds = make_model(op, vals, {'W', 'R'}, outs, 14, at)
    want = dict(zip(['Y', 'Y_h'], reference(op, vals['X'], vals['W'], vals['R'], None, None, None, None, None, **at)))
    out, prof = os.path.join(work, 'out_isa'), os.path.join(work, 'isa.json')
    subprocess.run(['rm', '-rf', out], check=True)
    xf = os.path.join(work, 'X_isa.npy')
    np.save(xf, vals['X'])
    r = subprocess.run([args.toplu, 'run', model, '--input', f'X={xf}', '--output', out, '--threads', '1', '--quiet',
                        '--profile', prof], capture_output=True, text=True, env=dict(os.environ, TOPLU_MAX_CPU_ISA='avx2'))
    if r.returncode:
        check(False, f'{op} under TOPLU_MAX_CPU_ISA=avx2', r.stderr.strip()[-300:])
        continue
    with open(prof) as f:
        impls = [e['args'].get('impl', '') for e in json.load(f)['traceEvents'] if e.get('cat') == op]
    check(impls and all('rnn' in i and 'avx2' in i and 'avx512' not in i for i in impls),
          f'{op} under TOPLU_MAX_CPU_ISA=avx2 runs the AVX2 kernel', impls)
    dmax = max(float(np.abs(np.load(os.path.join(out, f'{o}.npy')) - want[o]).max()) for o in outs)
    check(dmax <= 1e-4 * max(1.0, float(np.abs(want['Y']).max())), f'{op} under the cap: the reference\'s outputs',
          f'max abs diff {dmax:.3g}')

print(f'{fails} failed', flush=True)
sys.exit(1 if fails else 0)
