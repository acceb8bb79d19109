#!/usr/bin/env python3
"""bench/op_compare.py - where each engine spends one run, op type by op type.

Runs toplu (toplu_bench --profile: the Chrome trace of toplu's last run) and
ONNX Runtime (bench/ort_bench.js --profile: ONNX Runtime's own profiler,
`enableProfiling`) on the same model, batch and threads, and prints, per op
type, milliseconds per run on each side and the ratio.  The two engines fuse
differently (ONNX Runtime's FusedConv/FusedMatMul, toplu's Conv+Relu,
MatMul+Add+Gelu, LayerNormalization), so ops are grouped by their first
(compute) op: Conv, ConvTranspose, MatMul, Gemm, pooling, and the rest by
name; a layout change toplu inserted is "Reorder", ONNX Runtime's
"ReorderInput"/"ReorderOutput" likewise.  Toplu's times are its last run;
ONNX Runtime's are the mean over its profiled runs (each node appears once
per run).

    bench/op_compare.py MODEL [--batch B] [--threads T] [--seconds S] [--shape NAME=D0xD1x...] [--top N]
                          [--nodes N]

--nodes N adds the N steps whose time is furthest over ONNX Runtime's node
that writes the same output (matched by output tensor name).
"""
import argparse
import collections
import glob
import json
import os
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)

ALIASES = {'FusedConv': 'Conv', 'FusedMatMul': 'MatMul', 'FusedGemm': 'Gemm', 'NchwcConv': 'Conv',
           'ReorderInput': 'Reorder', 'ReorderOutput': 'Reorder', 'NhwcMaxPool': 'MaxPool',
           'NchwcMaxPool': 'MaxPool', 'NchwcGlobalAveragePool': 'GlobalAveragePool',
           'NchwcAveragePool': 'AveragePool', 'NchwcUpsample': 'Resize', 'QuickGelu': 'Gelu',
           'BiasGelu': 'Gelu', 'FastGelu': 'Gelu', 'SkipLayerNormalization': 'LayerNormalization',
           'SimplifiedLayerNormalization': 'LayerNormalization'}


def group(op):
    base = op.split('+')[0]
    return ALIASES.get(base, base)


def toplu_side(model, args, work):
    tb = os.path.join(os.environ.get('TOPLU_BUILD', os.path.join(ROOT, 'build')), 'toplu_bench')
    trace = os.path.join(work, 'toplu.json')
    cmd = [tb, model, '--batch', str(args.batch), '--threads', str(args.threads), '--seconds', str(args.seconds),
           '--profile', trace] + sum((['--shape', s] for s in args.shape), [])
    p = subprocess.run(cmd, capture_output=True, text=True)
    if p.returncode:
        sys.exit(f'toplu_bench failed: {p.stderr.strip()[-300:]}')
    ops = collections.defaultdict(float)
    steps = [e for e in json.load(open(trace))['traceEvents'] if e.get('ph') == 'X']
    for e in steps:
        ops[group(e['args'].get('op_type', e['name']))] += e['dur'] / 1000.0
    return ops, json.loads(p.stdout.strip().splitlines()[-1]), steps


def ort_side(model, args, work):
    prefix = os.path.join(work, 'ort')
    cmd = ['node', os.path.join(HERE, 'ort_bench.js'), model, '--batch', str(args.batch), '--threads',
           str(args.threads), '--seconds', str(args.seconds), '--profile', prefix] + \
        sum((['--shape', s] for s in args.shape), [])
    p = subprocess.run(cmd, capture_output=True, text=True, cwd=work)
    if p.returncode:
        sys.exit(f'ort_bench.js failed: {p.stderr.strip()[-300:]}')
    files = sorted(glob.glob(prefix + '*.json'))
    if not files:
        sys.exit('ONNX Runtime wrote no profile')
    per_node = collections.defaultdict(list)
    for e in json.load(open(files[-1])):
        if e.get('cat') == 'Node' and e.get('name', '').endswith('_kernel_time'):
            per_node[(e['name'], e['args'].get('op_name', '?'))].append(e['dur'] / 1000.0)
    ops = collections.defaultdict(float)
    for (_, op), durs in per_node.items():
        ops[group(op)] += sum(durs) / len(durs)
    nodes = {name[:-len('_kernel_time')]: sum(d) / len(d) for (name, _), d in per_node.items()}
    return ops, json.loads(p.stdout.strip().splitlines()[-1]), nodes


def print_nodes(steps, nodes, n):
    """The n toplu steps that take longest over ONNX Runtime's node for the same output.  ONNX Runtime's
    profile names a node by its output tensor (with "_nchwc" where it runs blocked), toplu's trace a step by
    its first node with the fused ones in args.fused: a step is matched by its last fused node's output, or
    its own.  Toplu's times are one run's, ONNX Runtime's a mean: single rows move with the run."""
    rows, used = [], set()
    for e in steps:
        fused = e['args'].get('fused', '')
        outs = [(fused.split(',')[-1].strip() if fused else e['name']) + '_output_0', e['name'] + '_output_0']
        key = next((k for o in outs for k in (o + '_nchwc', o) if k in nodes), None)
        if key:
            used.add(key)
        rows.append((e['dur'] / 1000.0, nodes.get(key), e['name'], e['args'].get('impl', '')))
    rows.sort(key=lambda r: -(r[0] - (r[1] or 0)))
    print(f'# steps by toplu ms - ONNX Runtime ms ({sum(1 for r in rows if r[1] is not None)} of {len(rows)} matched; '
          f'ONNX Runtime nodes unmatched: {sum(v for k, v in nodes.items() if k not in used):.2f} ms)')
    print(f'{"step":48s} {"kernel":36s} {"toplu ms":>9s} {"ORT ms":>9s}')
    for a, b, name, impl in rows[:n]:
        ort_ms = f'{b:9.3f}' if b is not None else f'{"-":>9s}'
        print(f'{name[-48:]:48s} {impl[:36]:36s} {a:9.3f} {ort_ms}')


def main():
    ap = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    ap.add_argument('model')
    ap.add_argument('--batch', type=int, default=1)
    ap.add_argument('--threads', type=int, default=2)
    ap.add_argument('--seconds', type=float, default=3)
    ap.add_argument('--shape', action='append', default=[])
    ap.add_argument('--top', type=int, default=15)
    ap.add_argument('--nodes', type=int, default=0, help='also list the N steps furthest over ONNX Runtime\'s node')
    args = ap.parse_args()
    work = tempfile.mkdtemp(prefix='toplu-opcmp-')
    t, tr, steps = toplu_side(os.path.abspath(args.model), args, work)
    o, orr, nodes = ort_side(os.path.abspath(args.model), args, work)
    tt, ot = sum(t.values()), sum(o.values())
    print(f'# {os.path.basename(args.model)} batch {args.batch}, {args.threads} threads; per run: toplu {tt:.2f} ms '
          f'of steps (median run {tr["median_ms"]:.2f} ms), ONNX Runtime {ot:.2f} ms of nodes (median run '
          f'{orr["median_ms"]:.2f} ms)')
    print(f'{"op":24s} {"toplu ms":>9s} {"share":>6s} {"ORT ms":>9s} {"share":>6s} {"ORT/toplu":>9s}')
    keys = sorted(set(t) | set(o), key=lambda k: -max(t.get(k, 0), o.get(k, 0)))[:args.top]
    for k in keys:
        a, b = t.get(k, 0.0), o.get(k, 0.0)
        ratio = f'{b / a:9.2f}' if a > 0 and b > 0 else f'{"-":>9s}'
        print(f'{k:24s} {a:9.2f} {100 * a / tt if tt else 0:5.1f}% {b:9.2f} {100 * b / ot if ot else 0:5.1f}% {ratio}')
    if args.nodes:
        print_nodes(steps, nodes, args.nodes)
    subprocess.run(['rm', '-rf', work])


if __name__ == '__main__':
    main()
