#!/usr/bin/python3
"""Overlap of decoding and inference in a batch job: the same image job with prefetch on and off.

  tests/pipeline_bench.py [--toplu build/toplu] [--copies 3] [--runs 3] [--threads 1,0] [--batch-size 8]

Builds a folder of the cache's photos (scripts/fetch-models.sh; mixed sizes, JPEG and PNG) repeated
--copies times, then runs MobileNetV2 int8 over it to JSONL top-5, alternating --prefetch 2 and
--prefetch 0, --runs times each per thread count (0: all cores).  Prints a Markdown table of wall time,
rows/s and the inference stage's busy share (from the job's final report), medians over the runs, and
checks that both settings wrote the same bytes.  Not a test: it asserts nothing about speed.
"""
import argparse
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
SHARED = os.path.normpath(os.path.join(HERE, '..', '..', 'shared'))
CACHE = os.environ.get('TOPLU_CACHE') or os.path.join(os.path.expanduser('~'), '.cache', 'toplu')
MODEL = os.path.join(SHARED, 'models', 'imagenet-mobilenet', 'mobilenet_v2_1.0_224_int8_per_tensor.onnx')
LABELS = os.path.join(SHARED, 'models', 'imagenet-mobilenet', 'labels_imagenet_2012.txt')


def run_job(toplu, folder, out, threads, prefetch, batch):
    cmd = [toplu, 'run', MODEL, '--input', folder, '--output', out, '--batch-size', str(batch), '--preprocess',
           'resize=224x224,color=rgb,layout=nhwc,dtype=uint8', '--postprocess', 'topk=5', '--labels', LABELS,
           '--prefetch', str(prefetch), '--progress', 'none']
    if threads:
        cmd += ['--threads', str(threads)]
    p = subprocess.run(cmd, capture_output=True, text=True)
    if p.returncode != 0:
        sys.exit('toplu failed: ' + p.stderr)
    wall = float(re.search(r'in ([0-9.]+) s, ([0-9.]+) rows/s', p.stderr).group(1))
    busy = {m.group(1): (float(m.group(2)), float(m.group(3)))
            for m in re.finditer(r'^\s+(\w+)\s+\d+\s+([0-9.]+)\s+([0-9.]+)%', p.stderr, re.M)}
    return wall, busy


def main():
    ap = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    ap.add_argument('--toplu', default=os.path.join(HERE, '..', 'build', 'toplu'))
    ap.add_argument('--copies', type=int, default=3)
    ap.add_argument('--runs', type=int, default=3)
    ap.add_argument('--threads', default='1,0')
    ap.add_argument('--batch-size', type=int, default=8)
    a = ap.parse_args()
    photos = sorted(f for f in os.listdir(os.path.join(CACHE, 'images')) if f.lower().endswith(('.jpg', '.jpeg', '.png')))
    work = tempfile.mkdtemp(prefix='toplu-pipeline-bench-')
    folder = os.path.join(work, 'photos')
    os.makedirs(folder)
    for k in range(a.copies):
        for f in photos:
            shutil.copy(os.path.join(CACHE, 'images', f), os.path.join(folder, '%d-%s' % (k, f)))
    n = len(os.listdir(folder))
    print('%d photos (%d distinct, mixed sizes, JPEG and PNG), MobileNetV2 int8, batch %d, load average %.1f'
          % (n, len(photos), a.batch_size, os.getloadavg()[0]))
    print()
    print('| threads | prefetch | wall s (median of %d) | rows/s | infer busy | read+preprocess busy |' % a.runs)
    print('| ---: | ---: | ---: | ---: | ---: | ---: |')
    for th in [int(t) for t in a.threads.split(',')]:
        res = {2: [], 0: []}
        for _ in range(a.runs):
            for pf in (2, 0):
                res[pf].append(run_job(a.toplu, folder, os.path.join(work, 'out%d.jsonl' % pf), th, pf, a.batch_size))
        same = open(os.path.join(work, 'out2.jsonl'), 'rb').read() == open(os.path.join(work, 'out0.jsonl'), 'rb').read()
        for pf in (2, 0):
            wall = statistics.median(r[0] for r in res[pf])
            infer = statistics.median(r[1]['infer'][1] for r in res[pf])
            rp = statistics.median(r[1]['read'][0] + r[1]['preprocess'][0] for r in res[pf])
            print('| %s | %d | %.2f | %.1f | %.0f%% | %.2f s |' % (th or 'all', pf, wall, n / wall, infer, rp))
        if not same:
            print('WARNING: prefetch on and off wrote different results')
    print('\nload average at the end %.1f' % os.getloadavg()[0])
    shutil.rmtree(work, ignore_errors=True)


if __name__ == '__main__':
    main()
