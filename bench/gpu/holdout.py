#!/usr/bin/python3
"""bench/gpu/holdout.py - toplu's GPU predictions against the published tables.

usage: bench/gpu/holdout.py [--toplu build/toplu] [--write-docs] [--check-docs] [--only-held-out]

For every table of src/plan/gpu_measurements.csv, runs the real
`toplu plan MODEL --device D --precision P --runtime R --json --batch-sizes
<the table's batch sizes>` and compares:
  batch-1 latency: the row at B = 1 against the table's average latency;
  plateau: the most predicted throughput over the table's batch sizes
           against the most measured;
  knee:    the measured knee (the smallest listed B within 5% of the best
           measured throughput) against the predicted knee range over the
           same batch sizes (from the smallest to the largest listed B that
           is within the predicted knee x the profile's knee_factor[0] to
           x knee_factor[1], or whose predicted throughput is within
           knee_share[0] to knee_share[1] of the most predicted, both from
           the JSON; the planner's own range, over its candidate sizes).
A table passes when |batch-1 error| <= 30%, |plateau error| <= 25% and the
range holds the measured knee (issue 11's acceptance).  Prints a Markdown
table and a summary for the tables the fit used and each held-out set apart:
'held out R1-2' (common.HELD_OUT, looked at in issue 11's first two rounds),
'held out R3' (common.HELD_OUT_R3, the third round's fresh tables, declared
before any fit saw them), 'held out R4' (common.HELD_OUT_R4, the fourth
round's fresh CNN tables, declared before any prediction was made on them)
and 'held out R5' (common.HELD_OUT_R5, MLPerf's ResNet-50 under NVIDIA's
TensorRT harness: three scenarios, not a sweep, so batch-1 latency and
plateau are judged and the knee is not); --write-docs puts them into docs/plan-tune.md between its
gpu-holdout markers, --check-docs exits 1 when the docs differ from this
run (the stored numbers and the code must agree).
"""
import argparse
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import common  # noqa: E402

DOC = os.path.join(common.ROOT, 'docs', 'plan-tune.md')
BEGIN, END = '<!-- gpu-holdout:begin -->', '<!-- gpu-holdout:end -->'


def knee_range(batches, thr, factors, shares=(1, 1)):
    k = common.knee(batches, thr)
    best = max(thr)
    use_shares = 0 < shares[0] < shares[1]
    inside = [b for b, t in zip(batches, thr) if k * factors[0] * (1 - 1e-9) <= b <= k * factors[1] * (1 + 1e-9)
              or (use_shares and shares[0] <= t / best <= shares[1])]
    return min(inside), max(inside)


def evaluate(toplu, key, table, runtime_override=None):
    model, device, precision, runtime = key
    runtime = runtime_override or runtime
    batches = [r[0] for r in table['rows']]
    p = common.plan_json(toplu, model, device, precision, runtime, batches)
    rows = {r['batch_size']: r for r in p['batch_sizes']}
    pred_thr = [rows[b]['throughput'] for b in batches]
    meas_thr = [r[1] for r in table['rows']]
    b1 = next((r for r in table['rows'] if r[0] == 1), None)
    kf = p['runtime']['knee_factor'] if p.get('runtime') else [1, 1]
    ks = p['runtime'].get('knee_share', [1, 1]) if p.get('runtime') else [1, 1]
    lo, hi = knee_range(batches, pred_thr, kf, ks)
    sweep = table['source'] not in common.NO_KNEE_SOURCES
    mk = common.knee(batches, meas_thr) if sweep else None
    res = {
        'key': key,
        'held_out': key in common.ALL_HELD_OUT,
        'set': common.held_out_set(key),
        'b1_meas': b1[2] if b1 else None,
        'b1_pred': rows[1]['latency_ms'] if b1 else None,
        'plateau_meas': max(meas_thr),
        'plateau_pred': max(pred_thr),
        'plateau_band': [max(rows[b]['throughput_band'][0] for b in batches),
                         max(rows[b]['throughput_band'][1] for b in batches)] if rows[1].get('throughput_band') else None,
        'b1_band': rows[1].get('latency_band_ms') if b1 else None,
        'knee_meas': mk,
        'knee_lo': lo,
        'knee_hi': hi,
    }
    res['b1_err'] = res['b1_pred'] / res['b1_meas'] - 1 if b1 else None
    res['plateau_err'] = res['plateau_pred'] / res['plateau_meas'] - 1
    res['ok_b1'] = b1 is not None and abs(res['b1_err']) <= 0.30
    res['ok_plateau'] = abs(res['plateau_err']) <= 0.25
    res['ok_knee'] = lo <= mk <= hi if sweep else None  # None: not a sweep, no knee to judge
    res['ok'] = res['ok_b1'] and res['ok_plateau'] and res['ok_knee'] is not False
    return res


def pct(x):
    return f'{100 * x:+.0f}%'


def render(results, ideal=None):
    out = ['| set | model | device | precision | runtime | batch-1 ms: measured / predicted | plateau img/s: measured / '
           'predicted (band) | knee: measured / predicted range | pass |',
           '| --- | --- | --- | --- | --- | --- | --- | --- | --- |']
    order = {'R5': 0, 'R4': 1, 'R3': 2, 'R1-2': 3, None: 4}
    for r in sorted(results, key=lambda r: (order[r['set']], r['key'][3], r['key'][0], r['key'][1], r['key'][2])):
        m, d, pr, rt = r['key']
        band = f" ({r['plateau_band'][0]:,.0f}-{r['plateau_band'][1]:,.0f})" if r['plateau_band'] else ''
        out.append(f"| {'held out ' + r['set'] if r['held_out'] else 'fit'} | {m} | {d} | {pr} | {rt} | "
                   f"{r['b1_meas']:.2f} / {r['b1_pred']:.2f} ({pct(r['b1_err'])}) | "
                   f"{r['plateau_meas']:,.0f} / {r['plateau_pred']:,.0f}{band} ({pct(r['plateau_err'])}) | "
                   + (f"{r['knee_meas']} / {r['knee_lo']}-{r['knee_hi']} | " if r['ok_knee'] is not None
                      else "not a sweep | ")
                   + f"{'yes' if r['ok'] else 'no'}{'' if r['ok_knee'] is not None else ' (knee not judged)'} |")
    out.append('')
    for name, sel in (('held out R5 (MLPerf, fifth round; no knee)', [r for r in results if r['set'] == 'R5']),
                      ('held out R4 (fresh, fourth round)', [r for r in results if r['set'] == 'R4']),
                      ('held out R3 (fresh, third round)', [r for r in results if r['set'] == 'R3']),
                      ('held out R1-2 (looked at in rounds 1-2)', [r for r in results if r['set'] == 'R1-2']),
                      ('fit', [r for r in results if not r['held_out']])):
        if not sel:
            continue
        n = len(sel)
        mb1 = sorted(abs(r['b1_err']) for r in sel)[n // 2]
        mpl = sorted(abs(r['plateau_err']) for r in sel)[n // 2]
        sweeps = all(r['ok_knee'] is not None for r in sel)
        knees = (f"knee in the predicted range in {sum(bool(r['ok_knee']) for r in sel)}, all three" if sweeps
                 else 'no knee (not a sweep), both')
        out.append(f"- {name} ({n} tables): batch-1 latency within 30% in {sum(r['ok_b1'] for r in sel)}, plateau "
                   f"within 25% in {sum(r['ok_plateau'] for r in sel)}, {knees} in {sum(r['ok'] for r in sel)} "
                   f"({100 * sum(r['ok'] for r in sel) / n:.0f}%); median |error|: batch-1 latency {100 * mb1:.0f}%, "
                   f"plateau {100 * mpl:.0f}%; the measured value inside the predicted band: batch-1 latency "
                   f"{sum(bool(r['b1_band']) and r['b1_band'][0] <= r['b1_meas'] <= r['b1_band'][1] for r in sel)}, "
                   f"plateau {sum(bool(r['plateau_band']) and r['plateau_band'][0] <= r['plateau_meas'] <= r['plateau_band'][1] for r in sel)}")
    ideal = ideal or []
    for name, sel in (('R5', [r for r in ideal if r['set'] == 'R5']), ('R4', [r for r in ideal if r['set'] == 'R4']),
                      ('R3', [r for r in ideal if r['set'] == 'R3']),
                      ('R1-2', [r for r in ideal if r['set'] == 'R1-2'])):
        if sel:
            out.append(ideal_line(name, sel))
    return '\n'.join(out) + '\n'


def ideal_line(name, ideal):
    if ideal:
        n = len(ideal)
        mb1 = sorted(abs(r['b1_err']) for r in ideal)[n // 2]
        mpl = sorted(abs(r['plateau_err']) for r in ideal)[n // 2]
        lo = min(r['plateau_pred'] / r['plateau_meas'] for r in ideal)
        hi = max(r['plateau_pred'] / r['plateau_meas'] for r in ideal)
        b1lo = min(r['b1_meas'] / r['b1_pred'] for r in ideal)
        b1hi = max(r['b1_meas'] / r['b1_pred'] for r in ideal)
        return (f"- the bare roofline (`--runtime ideal`) on the same {n} held-out {name} tables: batch-1 latency within "
                   f"30% in {sum(r['ok_b1'] for r in ideal)}, plateau within 25% in "
                   f"{sum(r['ok_plateau'] for r in ideal)}, "
                   + (f"knee in range in {sum(bool(r['ok_knee']) for r in ideal)}; "
                      if all(r['ok_knee'] is not None for r in ideal) else 'no knee; ')
                   + f"median |error|: batch-1 latency {100 * mb1:.0f}%, plateau {100 * mpl:.0f}%; plateau "
                f"{lo:.1f}-{hi:.1f}x the measured, batch-1 latency {b1lo:.2g}-{b1hi:.2g}x below it (measured / predicted)")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument('--toplu', default=os.path.join(common.ROOT, 'build', 'toplu'))
    ap.add_argument('--write-docs', action='store_true')
    ap.add_argument('--check-docs', action='store_true')
    ap.add_argument('--only-held-out', action='store_true')
    a = ap.parse_args()
    tables = common.load_tables()
    results = [evaluate(a.toplu, k, t) for k, t in sorted(tables.items())
               if not a.only_held_out or k in common.ALL_HELD_OUT]
    ideal = [evaluate(a.toplu, k, t, 'ideal') for k, t in sorted(tables.items()) if k in common.ALL_HELD_OUT]
    text = render(results, ideal)
    print(text)
    if a.write_docs or a.check_docs:
        doc = open(DOC).read()
        i, j = doc.index(BEGIN) + len(BEGIN), doc.index(END)
        if a.write_docs:
            open(DOC, 'w').write(doc[:i] + '\n' + text + doc[j:])
        elif doc[i:j].strip() != text.strip():
            print(f'{DOC}: the table between the gpu-holdout markers differs from this run: rerun '
                  f'bench/gpu/holdout.py --write-docs', file=sys.stderr)
            return 1
    return 0


if __name__ == '__main__':
    sys.exit(main())
