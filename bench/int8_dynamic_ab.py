#!/usr/bin/env python3
"""bench/int8_dynamic_ab.py - dynamic int8 (toplu quantize --dynamic) against fp32 and ONNX Runtime.

Times, per cell (batch), four processes per round, alternating and with the
order rotated every round so a busy phase of a shared machine falls on all:
  toplu fp32   build/toplu_bench on the float model;
  toplu int8   build/toplu_bench on the model `toplu quantize --dynamic` wrote
               (MatMul weights int8 per column, activations quantized at run
               time: toplu.DynamicQuantizeMatMul steps);
  ORT int8     bench/ort_bench.js (onnxruntime-node 1.30) on that same file;
  ORT fp32     bench/ort_bench.js on the float model (for reference).
Per process the median run time; per variant the median over rounds; the
ratios are of those medians, with every round's own ratio listed; the
1-minute load average before and after each cell (quote ratios, not times).

    bench/int8_dynamic_ab.py [--model PATH] [--batches 1,4] [--rounds 3] [--runs 5]
                             [--threads 2] [--shape NAME=Bx128x768]

Default model: the BERT-base-like encoder of bench/export_models.py
(12 layers, hidden 768, FFN 3072, float embeddings [B, 128, 768], random
weights) in ~/.cache/toplu/models/speed/; its dynamic int8 file is written
beside it (bert_base_like.dynamic.onnx) when missing or older.
"""
import argparse
import json
import os
import statistics
import subprocess
import sys

root = os.path.join(os.path.dirname(os.path.abspath(__file__)), '..')
ap = argparse.ArgumentParser()
ap.add_argument('--model', default=os.path.expanduser('~/.cache/toplu/models/speed/bert_base_like.onnx'))
ap.add_argument('--batches', default='1,4')
ap.add_argument('--rounds', type=int, default=3)
ap.add_argument('--runs', type=int, default=5)
ap.add_argument('--threads', type=int, default=2)
ap.add_argument('--input', default='input', help='the input shaped [B, SEQ, HIDDEN]')
ap.add_argument('--seq', type=int, default=128)
ap.add_argument('--hidden', type=int, default=768)
ap.add_argument('--no-ort-fp32', action='store_true')
args = ap.parse_args()
build = os.environ.get('TOPLU_BUILD', os.path.join(root, 'build'))
bench, cli = os.path.join(build, 'toplu_bench'), os.path.join(build, 'toplu')
for exe in (bench, cli):
    if not os.path.exists(exe):
        sys.exit(f'int8_dynamic_ab: no {exe}: build the project first')
dyn = os.path.splitext(args.model)[0] + '.dynamic.onnx'
if not os.path.exists(dyn) or os.path.getmtime(dyn) < os.path.getmtime(args.model) or os.path.getmtime(dyn) < os.path.getmtime(cli):
    r = subprocess.run([cli, 'quantize', args.model, '--dynamic', '--output', dyn], capture_output=True, text=True)
    if r.returncode:
        sys.exit(f'int8_dynamic_ab: toplu quantize --dynamic: {r.stderr.strip()[-300:]}')
    print(r.stderr.strip(), flush=True)


def one(variant, batch):
    side, prec = variant.split()
    model = dyn if prec == 'int8' else args.model
    shape = f'{args.input}={batch}x{args.seq}x{args.hidden}'
    common = ['--batch', str(batch), '--threads', str(args.threads), '--warmup', '1', '--runs', str(args.runs),
              '--seconds', '0', '--shape', shape]
    cmd = [bench, model] + common if side == 'toplu' else ['node', os.path.join(root, 'bench', 'ort_bench.js'), model] + common
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode:
        sys.exit(f'int8_dynamic_ab: {" ".join(cmd)}: exit {r.returncode}: {r.stderr.strip()[-300:]}')
    return json.loads(r.stdout.strip().splitlines()[-1])['median_ms']


variants = ['toplu fp32', 'toplu int8', 'ORT int8'] + ([] if args.no_ort_fp32 else ['ORT fp32'])
print(f'model {args.model}, seq {args.seq}, {args.threads} threads, {args.rounds} rounds of {args.runs} runs per process',
      flush=True)
print('| batch | ' + ' | '.join(f'{v} ms' for v in variants) +
      ' | toplu fp32 / int8 | ORT int8 / toplu int8 | per-round (fp32/int8; ORT/int8) | load before, after |')
print('| ---: ' * (len(variants) + 3) + '| --- |', flush=True)
for batch in (int(b) for b in args.batches.split(',')):
    load0 = os.getloadavg()[0]
    t = {v: [] for v in variants}
    for r in range(args.rounds):
        order = variants[r % len(variants):] + variants[:r % len(variants)]
        for v in order:
            t[v].append(one(v, batch))
    load1 = os.getloadavg()[0]
    med = {v: statistics.median(t[v]) for v in variants}
    rounds = ' '.join(f'{f / q:.2f};{o / q:.2f}' for f, q, o in zip(t['toplu fp32'], t['toplu int8'], t['ORT int8']))
    print(f'| {batch} | ' + ' | '.join(f'{med[v]:.1f}' for v in variants) +
          f' | {med["toplu fp32"] / med["toplu int8"]:.2f} | {med["ORT int8"] / med["toplu int8"]:.2f} | {rounds} | '
          f'{load0:.1f}, {load1:.1f} |', flush=True)
