#!/usr/bin/env python3
"""bench/attention_ab.py - the fused attention kernel against the unfused graph.

Times a transformer model twice per round with build/toplu_bench: as loaded
by default (attention fused into toplu.ScaledDotProductAttention steps) and
with --no-fuse-attention (MatMul, scale, mask, Softmax, MatMul as separate
steps; every other fusion on in both).  The two alternate process by
process, their order swapped every round, so a slow phase of a shared
machine falls on both.  Per cell: each process's median run time, the median
of those per variant, and unfused / fused (above 1: the fused kernel is
faster), with the 1-minute load average before and after the cell (the
machine may be shared: quote ratios, not times).

    bench/attention_ab.py [--model PATH] [--cells 128:1,128:8,384:1,384:8]
                          [--rounds 3] [--runs 3] [--seconds 0] [--threads 2]

Default model: the BERT-base-like encoder of ../shared/accept/breadth.py
(12 layers, hidden 768, 12 heads) in ~/.cache/toplu-accept/breadth/.
Cells are SEQ:BATCH; the inputs are input_ids and attention_mask of
[BATCH, SEQ] (toplu_bench fills them with random bytes).
"""
import argparse
import json
import os
import statistics
import subprocess
import sys

root = os.path.join(os.path.dirname(os.path.abspath(__file__)), '..')
ap = argparse.ArgumentParser()
ap.add_argument('--model', default=os.path.expanduser('~/.cache/toplu-accept/breadth/bert_base_like_l12_opset14.onnx'))
ap.add_argument('--cells', default='128:1,128:8,384:1,384:8')
ap.add_argument('--rounds', type=int, default=3)
ap.add_argument('--runs', type=int, default=3)
ap.add_argument('--seconds', type=float, default=0)
ap.add_argument('--threads', type=int, default=2)
ap.add_argument('--inputs', default='input_ids,attention_mask', help='inputs shaped [BATCH, SEQ]')
args = ap.parse_args()
exe = os.path.join(os.environ.get('TOPLU_BUILD', os.path.join(root, 'build')), 'toplu_bench')
if not os.path.exists(exe):
    sys.exit(f'attention_ab: no {exe}: build the project first')


def one(seq, batch, fused):
    cmd = [exe, args.model, '--batch', str(batch), '--threads', str(args.threads), '--warmup', '1',
           '--runs', str(args.runs), '--seconds', str(args.seconds)]
    for name in args.inputs.split(','):
        cmd += ['--shape', f'{name}={batch}x{seq}']
    if not fused:
        cmd.append('--no-fuse-attention')
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode:
        sys.exit(f'attention_ab: {" ".join(cmd)}: exit {r.returncode}: {r.stderr.strip()[-300:]}')
    return json.loads(r.stdout.strip().splitlines()[-1])['median_ms']


print(f'model {args.model}, {args.threads} threads, {args.rounds} rounds of {args.runs} runs per process', flush=True)
print('| seq | batch | fused ms (median) | unfused ms (median) | unfused / fused | per-round ratios | load avg before, after |')
print('| ---: | ---: | ---: | ---: | ---: | --- | --- |', flush=True)
for cell in args.cells.split(','):
    seq, batch = (int(x) for x in cell.split(':'))
    load0 = os.getloadavg()[0]
    f, u = [], []
    for r in range(args.rounds):
        order = (True, False) if r % 2 == 0 else (False, True)
        for fused in order:
            (f if fused else u).append(one(seq, batch, fused))
    load1 = os.getloadavg()[0]
    ratios = ' '.join(f'{b / a:.2f}' for a, b in zip(f, u))
    fm, um = statistics.median(f), statistics.median(u)
    print(f'| {seq} | {batch} | {fm:.1f} | {um:.1f} | {um / fm:.3f} | {ratios} | {load0:.1f}, {load1:.1f} |', flush=True)
