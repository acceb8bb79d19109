#!/usr/bin/python3
"""tests/models/recurrent_test.py - a PyTorch LSTM or GRU model against ONNX Runtime.

    recurrent_test.py --toplu build/toplu [--cache DIR] [--shared DIR] NAME

NAME is lstm_bi2 or gru_bi2 (torch.nn.LSTM / GRU, 2 layers, bidirectional,
input 40, hidden 128, sequence-first input x [S, N, 40] with S and N dynamic,
opset 14: bench/export_models.py), with the fixtures of
scripts/make-rnn-fixtures.py in the cache's fixtures/NAME.  At each sequence
length of the fixture (1, 17 and 100):
  - `toplu run` at batch 8 and at batch 1 (row 0), every output against ONNX
    Runtime's on the same input: shape, dtype, max abs diff <= the fixture's
    tolerance (1e-4);
  - each of the 8 rows run alone: equal to its row of the batch-8 run
    (within the same tolerance; the max diff is printed, 0 when bit for bit).
The model, fixture or binary missing is a failure naming it (never a skip).
"""
import os
import shutil
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import common  # noqa: E402

# dim of each output that holds the batch (N): y [S, N, 256], h_n / c_n [4, N, 128]
BATCH_AXIS = {'y': 1, 'h_n': 1, 'c_n': 1}


def main():
    args = common.parse_args(lambda ap: ap.add_argument('name'))
    d = os.path.join(args.cache, 'fixtures', args.name)
    if not os.path.isfile(os.path.join(d, 'meta.json')):
        common.missing(f'fixture {args.name} not found in {args.cache}/fixtures (run scripts/fetch-models.sh)')
    meta = common.load_meta(d)
    model = common.model_path(meta['model'], args.cache, args.shared)
    if not os.path.isfile(model):
        common.missing(f'model {meta["model"]} not at {model} (run scripts/fetch-models.sh)')
    if not os.access(args.toplu, os.X_OK):
        common.missing(f'no toplu binary at {args.toplu}')
    tol = float(meta['tolerance']['max_abs'])
    name, inp, outputs, nb = args.name, meta['input'], meta['outputs'], meta['batch']
    r = common.Report()
    work = common.workdir(name)

    def run(x, label):
        """toplu run on x; {output: array} or None (the failure recorded)."""
        f = os.path.join(work, 'x.npy')
        np.save(f, x)
        out = os.path.join(work, 'out')
        shutil.rmtree(out, ignore_errors=True)
        code, so, se, secs = common.toplu_run(args.toplu, model, {inp: f}, out)
        if not r.check(code == 0, f'{label}: toplu run ({secs:.1f}s)', common.tail(code, so, se)):
            return None
        got = {}
        for o in outputs:
            p = common.out_file(out, o)
            if r.check(os.path.isfile(p), f'{label}: output {o} written', f'no {p}'):
                got[o] = np.load(p)
        return got

    for s in meta['seqs']:
        batched = None
        for b in (nb, 1):
            label = f'{name} sequence {s} batch {b}'
            x = np.load(os.path.join(d, f'x_s{s}_b{b}.npy'))
            got = run(x, label)
            if got is None:
                continue
            for o in outputs:
                want = np.load(common.out_file(os.path.join(d, f'ort_s{s}_b{b}'), o))
                if o not in got:
                    continue
                why, diff = common.compare(got[o], want, tol)
                detail = f'max abs diff {diff:.2g} <= {tol:g}' if diff is not None else 'compared'
                r.check(not why, f'{label}: {o} matches ONNX Runtime ({detail})', why)
            if b == nb:
                batched = (x, got)
        # each row alone against its row of the batched run
        if not r.check(batched is not None and all(o in batched[1] for o in outputs),
                       f'{name} sequence {s}: the batch-{nb} run produced every output to compare rows with'):
            continue
        x, got = batched
        worst, ok = 0.0, True
        for row in range(nb):
            one = run(np.ascontiguousarray(x[:, row:row + 1]), f'{name} sequence {s} row {row} alone')
            if one is None or any(o not in one for o in outputs):
                ok = False
                continue
            for o in outputs:
                ref = np.take(got[o], [row], axis=BATCH_AXIS[o])
                if one[o].shape != ref.shape:
                    r.check(False, f'{name} sequence {s} row {row}: {o} shape', f'{one[o].shape} != {ref.shape}')
                    ok = False
                    continue
                worst = max(worst, float(np.abs(one[o] - ref).max()))
        r.check(ok and worst <= tol, f'{name} sequence {s}: each of the {nb} rows run alone equals its row of the '
                f'batch-{nb} run (max abs diff {worst:.2g} <= {tol:g})')
    shutil.rmtree(work, ignore_errors=True)
    r.end()


if __name__ == '__main__':
    main()
