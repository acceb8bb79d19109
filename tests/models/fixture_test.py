#!/usr/bin/python3
"""tests/models/fixture_test.py - one real model against its ONNX Runtime fixture.

    fixture_test.py --toplu build/toplu [--cache DIR] [--shared DIR] NAME

NAME is a folder of ../shared/fixtures or of the cache's fixtures/ (made by
scripts/fetch-models.sh): meta.json, input_N.npy, output_N.npy.  Checks:
  - `toplu info MODEL` exits 0 and lists the inputs;
  - `toplu run` with the input as given (one run), with --batch-size 1, and with
    --batch-size 8 (the input tiled to 8 rows when it has fewer), each output
    against ONNX Runtime: shape, dtype, max abs diff <= meta tolerance.max_abs
    (times the output's largest magnitude when that is above 1: see
    scaled_tolerance), and the same argmax for class-score outputs;
  - the batch-8 rows equal the batch-1 rows within the same tolerance.
Models whose meta says per_sample (the file fixes batch 1) run at batch 1 and N.
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


def scaled_tolerance(want, tol):
    """The tolerance for one output: tol, times the output's scale when that is above 1.

    float32 results of two implementations differ by a few ulps of the largest
    terms summed, so an absolute tolerance only means something for outputs of
    scale ~1 (probabilities, normalised logits: every fixture but MNIST, whose
    logits reach ~8000; there ONNX Runtime differs from its own fixture by 1e-3
    depending on the optimisation level).  Returns (tolerance, text)."""
    scale = float(np.nanmax(np.abs(want))) if want.dtype.kind == 'f' and want.size else 0.0
    if scale <= 1.0:
        return tol, f'{tol:g}'
    return tol * scale, f'{tol:g} x output scale {scale:.4g} = {tol * scale:.3g}'


def tiled(x, rows):
    """x with its rows repeated to `rows` rows (row i is x[i % len(x)])."""
    return x[np.arange(rows) % len(x)]


def main():
    """Run the checks for one fixture."""
    args = common.parse_args(lambda ap: ap.add_argument('name'))
    d = find_fixture(args.name, args.cache, args.shared)
    if d is None:
        common.skip(f'fixture {args.name} not found in {args.shared}/fixtures or {args.cache}/fixtures '
                    '(run scripts/fetch-models.sh)')
    meta = common.load_meta(d)
    model = common.model_path(meta['model'], args.cache, args.shared)
    if not os.path.isfile(model):
        common.skip(f'model {meta["model"]} not at {model} (run scripts/fetch-models.sh)')
    if not os.access(args.toplu, os.X_OK):
        common.skip(f'no toplu binary at {args.toplu}')
    tol = float(meta.get('tolerance', {}).get('max_abs', 1e-4))
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
            got_all[oname] = got
            otol, tol_text = scaled_tolerance(want, tol)
            why, diff = common.compare(got, tiled(want, rows), otol)
            detail = f'max abs diff {diff:.2g} <= {tol_text}' if diff is not None else 'equal'
            r.check(not why, f'{label}: {oname} matches ONNX Runtime ({detail})', why)
            is_class = want.dtype.kind == 'f' and want.shape[-1] > 1 and (
                want.ndim == 2 or oname in CLASS_OUTPUTS_3D.get(name, []))
            if is_class and got.shape == tiled(want, rows).shape:
                bad, ties, total = common.argmax_mismatch(got, tiled(want, rows), otol)
                r.check(bad == 0, f'{label}: {oname} argmax same as ONNX Runtime at {total - bad - ties}/{total}'
                        + (f' ({ties} near-ties within {2 * otol:g} ignored)' if ties else ''),
                        f'{bad} differ')
        results[b] = (rows, got_all)

    # Batched rows must equal the rows of the one-at-a-time run.
    if 1 in results:
        for b, (rows, got_b) in results.items():
            if b in (1, None):
                continue
            for oname, g in got_b.items():
                one = results[1][1].get(oname)
                if one is None or g.shape[1:] != one.shape[1:]:
                    continue
                why, diff = common.compare(g, tiled(one, rows), scaled_tolerance(wants[oname], tol)[0])
                r.check(not why, f'{name}: batch {b} rows equal batch 1 rows for {oname}'
                        + (f' (max abs diff {diff:.2g})' if diff is not None else ''), why)
    shutil.rmtree(work, ignore_errors=True)
    r.end()


if __name__ == '__main__':
    main()
