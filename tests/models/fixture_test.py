#!/usr/bin/python3
"""tests/models/fixture_test.py - one real model against its ONNX Runtime fixture.

    fixture_test.py --toplu build/toplu [--cache DIR] [--shared DIR] NAME

NAME is a folder of ../shared/fixtures or of the cache's fixtures/ (made by
scripts/fetch-models.sh): meta.json, input_N.npy, output_N.npy.  Checks:
  - `toplu info MODEL` exits 0 and lists the inputs;
  - `toplu run` with the input as given (one run), with --batch-size 1, and with
    --batch-size 8 (the input tiled to 8 rows when it has fewer), each output
    against ONNX Runtime: shape, dtype, max abs diff <= the fixture's own
    tolerance (meta.json tolerance.max_abs, required; not scaled), and the same
    argmax for class-score outputs;
  - the batched rows equal the batch-1 rows within the same tolerance, for
    every output (same shape after tiling, or the check fails).
Models whose meta says per_sample (the file fixes batch 1) run at batch 1 and N.
A fixture, model or binary that is missing is a failure naming it.

    fixture_test.py ... --perturb value|column NAME

checks that the checks can fail: toplu's outputs of the batched runs (every
run but batch 1) are altered after reading (value: 4x the tolerance added to
the first element; column: the last column dropped), and the test passes only when
exactly the checks that must catch that fail (the batched run against ONNX
Runtime, and its rows against batch 1) and every other check passes.
"""
import os
import shutil
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import common  # noqa: E402

# Class-score outputs with more than two dims (argmax along the last axis is
# the prediction); 2-D float outputs [N, classes] are class scores too.
CLASS_OUTPUTS_3D = {'ppocr_rec': ['softmax_11.tmp_0'], 'ultraface_rfb320': ['scores']}


def find_fixture(name, cache, shared):
    """The fixture folder: ../shared/fixtures/NAME, else cache/fixtures/NAME, else None."""
    for d in (os.path.join(shared, 'fixtures', name), os.path.join(cache, 'fixtures', name)):
        if os.path.isfile(os.path.join(d, 'meta.json')):
            return d
    return None


def tiled(x, rows):
    """x with its rows repeated to `rows` rows (row i is x[i % len(x)])."""
    return x[np.arange(rows) % len(x)]


def main():
    """Run the checks for one fixture."""
    def more(ap):
        ap.add_argument('--perturb', choices=['value', 'column'])
        ap.add_argument('name')
    args = common.parse_args(more)
    d = find_fixture(args.name, args.cache, args.shared)
    if d is None:
        common.missing(f'fixture {args.name} not found in {args.shared}/fixtures or {args.cache}/fixtures '
                    '(run scripts/fetch-models.sh)')
    meta = common.load_meta(d)
    model = common.model_path(meta['model'], args.cache, args.shared)
    if not os.path.isfile(model):
        common.missing(f'model {meta["model"]} not at {model} (run scripts/fetch-models.sh)')
    if not os.access(args.toplu, os.X_OK):
        common.missing(f'no toplu binary at {args.toplu}')
    tol = meta.get('tolerance', {}).get('max_abs')
    if not isinstance(tol, (int, float)) or not tol >= 0:
        common.missing(f'{d}/meta.json has no tolerance.max_abs (the fixture states its own tolerance)')
    tol = float(tol)
    name = args.name
    r = common.Report()
    work = common.workdir(name)

    code, out, err, _ = common.run([args.toplu, 'info', model], timeout=300)
    missing = [k for k in meta['inputs'] if k not in out]
    r.check(code == 0 and not missing, f'{name}: toplu info lists the inputs',
            common.tail(code, out, err) if code else f'missing {missing}')

    inputs = {k: np.load(os.path.join(d, v['file'])) for k, v in meta['inputs'].items()}
    wants = {k: np.load(os.path.join(d, v['file'])) for k, v in meta['outputs'].items()}
    n = len(next(iter(inputs.values())))
    batches = [1, n] if meta.get('per_sample') else [None, 1, 8]
    results = {}
    expect_fail = []  # with --perturb: the checks that must fail
    for b in batches:
        rows = max(n, b or 0)
        label = f'{name} batch {b or "as given"}' + (f' ({rows} rows: input tiled)' if rows > n else '')
        feeds = {}
        for k, x in inputs.items():
            p = os.path.join(work, f'in-{b}-{len(feeds)}.npy')
            np.save(p, tiled(x, rows))
            feeds[k] = p
        outdir = os.path.join(work, f'out-{b}')
        code, out, err, secs = common.toplu_run(args.toplu, model, feeds, outdir, b)
        if not r.check(code == 0, f'{label}: toplu run ({secs:.1f}s)', common.tail(code, out, err)):
            continue
        got_all = {}
        for oname, want in wants.items():
            f = common.out_file(outdir, oname)
            if not r.check(os.path.isfile(f), f'{label}: output {oname} written', f'no {f}'):
                continue
            got = np.load(f)
            if args.perturb and b != 1 and got.dtype.kind == 'f' and got.ndim >= 1 and len(got) > 1:
                got = got.copy()
                if args.perturb == 'value':
                    got.reshape(-1)[0] += np.float32(4 * tol)
                else:
                    got = got[..., :-1]
                expect_fail += [f'{label}: {oname} matches ONNX Runtime',
                                f'{name}: batch {b or "as given"} rows equal batch 1 rows for {oname}']
            got_all[oname] = got
            otol = tol
            why, diff = common.compare(got, tiled(want, rows), otol)
            detail = f'max abs diff {diff:.2g} <= {otol:g}' if diff is not None else ('equal' if not why else 'compared')
            r.check(not why, f'{label}: {oname} matches ONNX Runtime ({detail})', why)
            is_class = want.dtype.kind == 'f' and want.shape[-1] > 1 and (
                want.ndim == 2 or oname in CLASS_OUTPUTS_3D.get(name, []))
            if is_class and got.shape == tiled(want, rows).shape:
                bad, ties, total = common.argmax_mismatch(got, tiled(want, rows), otol)
                r.check(bad == 0, f'{label}: {oname} argmax same as ONNX Runtime at {total - bad - ties}/{total}'
                        + (f' ({ties} near-ties within {2 * otol:g} ignored)' if ties else ''),
                        f'{bad} differ')
        results[b] = (rows, got_all)

    # Batched rows must equal the rows of the one-at-a-time run: every output
    # of every batched run, tiled to the same rows; a missing run or output, or
    # shapes that differ, is a failure (the comparison cannot be skipped).
    batched = [b for b in batches if b != 1]
    if r.check(1 in results, f'{name}: the batch-1 run produced outputs to compare the batched runs with'):
        one_got = results[1][1]
        for b in batched:
            if not r.check(b in results, f'{name}: batch {b or "as given"} produced outputs to compare with batch 1'):
                continue
            rows, got_b = results[b]
            for oname in wants:
                g, one = got_b.get(oname), one_got.get(oname)
                if not r.check(g is not None and one is not None,
                               f'{name}: {oname} written at batch {b or "as given"} and batch 1'):
                    continue
                ref = tiled(one, rows) if one.ndim else one
                why, diff = common.compare(g, ref, tol)
                r.check(not why, f'{name}: batch {b or "as given"} rows equal batch 1 rows for {oname}'
                        + (f' (max abs diff {diff:.2g} <= {tol:g})' if diff is not None else ''), why)
    shutil.rmtree(work, ignore_errors=True)
    if args.perturb:
        r.end_expecting(expect_fail)
    r.end()


if __name__ == '__main__':
    main()
