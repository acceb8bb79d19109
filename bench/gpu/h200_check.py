#!/usr/bin/python3
"""bench/gpu/h200_check.py - toplu's H200 predictions against an H200 measured here.

usage: bench/gpu/h200_check.py [--predicted bench/gpu/h200_predictions.csv]
                               [--measured bench/gpu/h200_measured.csv] [--toplu build/toplu] [--calibrated]

The predictions were written (bench/gpu/h200_predictions.csv, committed)
before the GPU was measured (bench/gpu/measure_torch.py on the lent H200,
its output committed as bench/gpu/h200_measured.csv).  Per (model,
precision), with issue 11's criteria as bench/gpu/holdout.py applies them:
batch-1 latency within 30%, plateau (the most throughput over the measured
batch sizes) within 25%, the measured knee (smallest batch within 5% of the
best measured throughput) inside the predicted knee range.

--calibrated also runs `toplu plan --calibration` with ONE measured row (the
batch-1 latency, as a CSV of BATCH,LATENCY_MS) and again with two (batch 1
and the largest measured batch), and gives the plateau error then: what a
user with one or two measurements of their own GPU gets for the rest of the
curve.
"""
import argparse
import csv
import os
import subprocess
import sys
import json
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import common  # noqa: E402


def read(path):
    with open(path) as f:
        return list(csv.DictReader(l for l in f if l.strip() and not l.startswith('#')))


def calibrated_plateau(toplu, model, device, precision, runtime, rows, batches):
    with tempfile.NamedTemporaryFile('w', suffix='.csv', delete=False) as f:
        for b, lat in rows:
            f.write(f'{b},{lat}\n')
        path = f.name
    try:
        cmd = [toplu, 'plan', common.model_path(model), '--device', device, '--precision', precision, '--runtime',
               runtime, '--shape', f'input=B,{common.MODELS[model][1]}', '--batch-sizes',
               ','.join(str(b) for b in batches), '--calibration', path, '--json']
        out = subprocess.run(cmd, capture_output=True, text=True)
        if out.returncode:
            return None, out.stderr.strip()[-200:]
        p = json.loads(out.stdout)
        return max(r['throughput'] for r in p['batch_sizes']), None
    finally:
        os.unlink(path)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    ap.add_argument('--predicted', default=os.path.join(HERE, 'h200_predictions.csv'))
    ap.add_argument('--measured', default=os.path.join(HERE, 'h200_measured.csv'))
    ap.add_argument('--toplu', default=os.path.join(common.ROOT, 'build', 'toplu'))
    ap.add_argument('--calibrated', action='store_true')
    a = ap.parse_args()
    pred, meas = {}, {}
    for r in read(a.predicted):
        pred.setdefault((r['model'], r['device'], r['precision'], r['runtime']), []).append(r)
    for r in read(a.measured):
        meas.setdefault((r['model'], r['device'], r['precision'], r['runtime']), []).append(r)
    head = '| model | precision | batch-1 ms meas / pred | err | plateau /s meas / pred | err | knee meas / pred range |'
    if a.calibrated:
        head += ' plateau err, calibrated on B=1 / on B=1 and max |'
    head += ' within |'
    print(head)
    print('|' + ' --- |' * (head.count('|') - 1))
    passed = total = 0
    for key in sorted(meas):
        if key not in pred:
            continue
        m = sorted((int(r['batch']), float(r['throughput']), float(r['latency_ms'])) for r in meas[key])
        p = {int(r['batch']): r for r in pred[key]}
        batches = [b for b, _, _ in m if b in p]
        mthr = [t for b, t, _ in m if b in p]
        pthr = [float(p[b]['throughput']) for b in batches]
        m1 = next(l for b, _, l in m if b == 1)
        p1 = float(p[1]['latency_ms'])
        e1 = p1 / m1 - 1
        ep = max(pthr) / max(mthr) - 1
        mk = common.knee(batches, mthr)
        lo, hi = int(p[1]['knee_lo']), int(p[1]['knee_hi'])
        ok = abs(e1) <= 0.30 and abs(ep) <= 0.25 and lo <= mk <= hi
        passed += ok
        total += 1
        line = (f'| {key[0]} | {key[2]} | {m1:.2f} / {p1:.2f} | {e1:+.0%} | {max(mthr):,.0f} / {max(pthr):,.0f} | '
                f'{ep:+.0%} | {mk} / {lo}-{hi} |')
        if a.calibrated:
            c1, err1 = calibrated_plateau(a.toplu, key[0], key[1], key[2], key[3], [(1, m1)], batches)
            c2, err2 = calibrated_plateau(a.toplu, key[0], key[1], key[2], key[3], [(1, m1), (m[-1][0], m[-1][2])],
                                          batches)
            f1 = f'{c1 / max(mthr) - 1:+.0%}' if c1 else f'failed: {err1}'
            f2 = f'{c2 / max(mthr) - 1:+.0%}' if c2 else f'failed: {err2}'
            line += f' {f1} / {f2} |'
        print(line + (' yes |' if ok else ' no |'))
    print(f'\n{passed} of {total} (model, precision) tables within issue 11\'s bounds')


if __name__ == '__main__':
    main()
