"""tests/test_profile.py - `toplu run --profile FILE.json`: the Chrome trace and the top steps.

    test_profile.py TOPLU CACHE_DIR SHARED_DIR WORKDIR CASE

CASE resnet50: torchvision ResNet-50 at batch 2 (the issue's check that its trace opens
in Perfetto); mnist: the same checks on MNIST at batch 4 (quick, also under the sanitizers);
bad: a trace that cannot be written fails the command (exit 1) naming the file.
Checked against the Trace Event Format (every event "ph": "X" with numeric ts, dur >= 0,
a name and args), the plan's order (events ordered, not overlapping), and FLOPs counted
here from the ONNX file itself (2 * N * C_out * H_out * W_out * C_in/group * kH * kW per
Conv), not from toplu: their sum must equal the trace's Conv FLOPs (within 0.5%), and for
ResNet-50 also the published ~4.1 GMAC per image (8.2 GFLOP, within 5%).  A model that is
missing FAILS naming it.  Exit 0 pass, 1 fail.
"""
import json, os, re, subprocess, sys

import numpy as np
import onnx
from onnx import shape_inference

TOPLU, CACHE, SHARED, WORK, CASE = sys.argv[1:6]
failures = []


def check(cond, msg):
    print(('ok: ' if cond else 'FAIL: ') + msg, flush=True)
    if not cond:
        failures.append(msg)
    return cond


def need(path):
    if not os.path.isfile(path):
        print(f'FAIL: {path} missing (scripts/fetch-models.sh)')
        sys.exit(1)


def conv_flops(path, batch):
    """2 * MACs of every Conv of the model at this batch, from the file's weights and inferred shapes."""
    m = onnx.load(path)
    inits = {t.name: list(t.dims) for t in m.graph.initializer}
    m = shape_inference.infer_shapes(m)
    shapes = {}
    for vi in list(m.graph.value_info) + list(m.graph.output) + list(m.graph.input):
        shapes[vi.name] = [d.dim_value if d.HasField('dim_value') else None for d in vi.type.tensor_type.shape.dim]
    total = 0
    for n in m.graph.node:
        if n.op_type != 'Conv':
            continue
        w = inits[n.input[1]]                     # [C_out, C_in/group, kH, kW]
        out = shapes[n.output[0]]                 # [N, C_out, H_out, W_out]
        macs = batch * w[0] * int(np.prod(out[2:])) * int(np.prod(w[1:]))
        total += 2 * macs
    return total


def profile_run(model, inp, shape, batch, trace, extra=()):
    x = np.random.default_rng(3).random((batch,) + tuple(shape), dtype=np.float32)
    npy = os.path.join(WORK, f'{CASE}_x.npy')
    np.save(npy, x)
    out = os.path.join(WORK, f'{CASE}_out')
    args = [TOPLU, 'run', model, '--input', f'{inp}={npy}', '--output', out + '/', '--batch-size', str(batch),
            '--threads', '2', '--overwrite', '--progress', 'none', '--profile', trace] + list(extra)
    return subprocess.run(args, capture_output=True, text=True, timeout=900)


def check_trace(model, batch, trace, stderr, conv_expected, published=None):
    with open(trace) as f:
        tr = json.load(f)
    ev = tr.get('traceEvents')
    check(isinstance(ev, list) and len(ev) > 3, f'traceEvents: {len(ev or [])} events')
    check(tr.get('displayTimeUnit') == 'ms', 'displayTimeUnit ms')
    num = (int, float)
    check(all(e.get('ph') == 'X' for e in ev), 'every event is a complete event (ph "X")')
    check(all(isinstance(e.get('ts'), num) and isinstance(e.get('dur'), num) and e['ts'] >= 0 and e['dur'] >= 0
              for e in ev), 'every event has numeric ts and dur >= 0')
    check(all(isinstance(e.get('name'), str) and e['name'] and isinstance(e.get('pid'), int)
              and isinstance(e.get('tid'), int) for e in ev), 'every event has a name, pid and tid')
    check(all(isinstance(e.get('args'), dict) and all(k in e['args'] for k in ('op_type', 'impl', 'flops', 'bytes',
                                                                              'inputs', 'outputs', 'fused'))
              for e in ev), 'every event has args op_type, impl, flops, bytes, inputs, outputs, fused')
    bad_order = [i for i in range(1, len(ev)) if ev[i]['ts'] + 1e-3 < ev[i - 1]['ts'] + ev[i - 1]['dur']]
    check(not bad_order, f'events are in run order and do not overlap (first offender: {bad_order[:1]})')
    od = tr.get('otherData', {})
    check(od.get('batch') == batch and od.get('threads') == 2 and os.path.basename(od.get('model', '')) ==
          os.path.basename(model), f'otherData model, batch {batch}, threads 2: {od}')
    peak = od.get('peak_gflops')
    check(isinstance(peak, num) and 1 < peak < 20000, f'otherData peak_gflops plausible: {peak}')
    convs = [e for e in ev if e['args']['op_type'].split('+')[0] == 'Conv']
    total = sum(e['args']['flops'] for e in convs)
    check(conv_expected > 0 and abs(total - conv_expected) <= 0.005 * conv_expected,
          f'Conv FLOPs in the trace {total} = {conv_expected} counted from the ONNX file')
    if published:
        check(abs(total - published) <= 0.05 * published, f'Conv FLOPs {total / 1e9:.3f} G within 5% of the '
              f'published {published / 1e9:.2f} G')
    dnnl = re.compile(r'^(jit|brg|brgconv|gemm|ref|wino|x64|ncsp|nspc|jit_uni)[:_a-z0-9]*')
    impls = sorted({e['args']['impl'] for e in convs})
    check(any(dnnl.match(i) and not i.startswith('toplu') for i in impls), f'a Conv names a oneDNN implementation: {impls}')
    check(all(e['args']['impl'] for e in ev), 'every event names its implementation')
    first = convs[0]['args']['inputs'][0] if convs else {}
    # oneDNN picks the layouts by CPU: blocked (nChw8c, "aBcd8b") on AVX2, channels-last ("acdb") on
    # AVX-512, where the first Conv already reads a reordered input
    tag = re.compile(r'[a-fA-F]+(\d+[a-f])*')
    check(first.get('shape', [None])[0] == batch and first.get('dtype') == 'float32' and
          (first.get('layout') == 'plain' or tag.fullmatch(first.get('layout', ''))),
          f'first Conv reads a float32 batch of {batch}, plain or in a oneDNN format tag: {first}')
    lays = {o['layout'] for e in ev for o in e['args']['outputs'] if o}
    check(any(l != 'plain' and tag.fullmatch(l) and l != ''.join(sorted(l)) for l in lays),
          f'a layout other than plain appears as a oneDNN format tag: {sorted(lays)[:6]}')
    check(any(e['args']['fused'] and '+' in e['args']['op_type'] for e in convs), 'a fused Conv names its fused nodes')
    rates = [e['args']['gflops_per_s'] for e in convs if e['dur'] > 0]
    check(all(isinstance(r, num) and r >= 0 for r in rates) and any(r > 0 for r in rates), 'Conv gflops_per_s set')
    top = [l for l in stderr.splitlines() if re.match(r'^toplu run: note:   \S', l) and 'GFLOP/s' not in l]
    check('top 10 steps by time' in stderr or (len(ev) < 10 and 'steps by time' in stderr), 'top steps announced')
    check(len(top) == min(10, len(ev)), f'{len(top)} top-step lines printed')
    ms = [float(l.split()[6]) for l in top] if top else []
    check(ms == sorted(ms, reverse=True), f'top steps slowest first: {ms}')


def case_model(model, inp, shape, batch, published=None):
    need(model)
    trace = os.path.join(WORK, f'{CASE}_trace.json')
    p = profile_run(model, inp, shape, batch, trace)
    check(p.returncode == 0, f'toplu run --profile exit 0 ({p.stderr.strip()[-400:]})')
    if p.returncode == 0:
        check_trace(model, batch, trace, p.stderr, conv_flops(model, batch), published)


os.makedirs(WORK, exist_ok=True)
if CASE == 'resnet50':  # published: 4.09 GMAC per image (torchvision's table), 2 FLOP each, batch 2
    case_model(os.path.join(CACHE, 'models', 'torchvision', 'resnet50.onnx'), 'input', (3, 224, 224), 2, 2 * 4.09e9 * 2)
elif CASE == 'mnist':
    case_model(os.path.join(SHARED, 'models', 'mnist', 'mnist.onnx'), 'Input3', (1, 28, 28), 4)
elif CASE == 'bad':
    model = os.path.join(SHARED, 'models', 'mnist', 'mnist.onnx')
    need(model)
    trace = os.path.join(WORK, 'no-such-dir', 'trace.json')
    p = profile_run(model, 'Input3', (1, 28, 28), 2, trace)
    check(p.returncode == 1, f'an unwritable trace: exit 1 (got {p.returncode})')
    check(trace in p.stderr and 'profile' in p.stderr, f'the message names the trace file: {p.stderr.strip()[-300:]}')
    p = subprocess.run([TOPLU, 'run', model, '--input', 'x.npy', '--output', 'o/', '--profile', '--quiet'],
                       capture_output=True, text=True, timeout=60)
    check(p.returncode == 2 and '--profile' in p.stderr, f'--profile without a file: usage error ({p.stderr.strip()[:200]})')
else:
    sys.exit(f'unknown case {CASE}')
sys.exit(1 if failures else 0)
