#!/usr/bin/python3
"""fuzz/run_mutants.py - run mutants of real models through `toplu info` and `toplu run`.

  run_mutants.py --toplu BIN --mutate BIN -n N --out DIR [--seed S] [--jobs J] [--timeout T] MODEL...

Makes N mutants, taking the models in turn (toplu-mutate, one at a time, so
only the mutants worth keeping take disk space), and runs each through
  toplu info MUTANT
  toplu run MUTANT --input NAME=IN.npy ... --output OUT/ --batch-size 1 --threads 1 --quiet
with a zero input of batch 1 per model input (shapes read from the mutant
with onnx, else from the model it came from; symbolic dims other than the
batch dim set to 32; inputs of more than 2^24 elements are not made and
the run is skipped).  Each command has T seconds (default 20).  Classes:
  crash     killed by a signal (SIGSEGV, SIGABRT...)
  hang      still running after T seconds
  sanitizer AddressSanitizer, UndefinedBehaviorSanitizer or LeakSanitizer
            wrote a report to stderr (whatever the exit code)
  exit N    an ordinary exit with status N
Mutants with a crash, hang or sanitizer report are kept in DIR/findings/
with their stderr; DIR/report.tsv has one line per mutant (file, model,
seed, mutation, info class, run class, first line of stderr).  Prints the
counts; exit 0 when there was no crash, hang or sanitizer report, 1 else.
"""
import argparse
import concurrent.futures
import os
import shutil
import signal
import subprocess
import sys
import tempfile

import numpy as np
import onnx

SAN_MARKS = ('ERROR: AddressSanitizer', 'ERROR: LeakSanitizer', 'runtime error:', 'SUMMARY: UndefinedBehaviorSanitizer',
             'SUMMARY: AddressSanitizer')
NP_DTYPES = {1: np.float32, 2: np.uint8, 3: np.int8, 4: np.uint16, 5: np.int16, 6: np.int32, 7: np.int64,
             9: np.bool_, 10: np.float16, 11: np.float64, 12: np.uint32, 13: np.uint64}
MAX_ELEMS = 1 << 24


def graph_inputs(path):
    """[(name, np dtype, shape)] of the non-initializer inputs, or None when the file does not parse."""
    try:
        m = onnx.load(path, load_external_data=False)
    except Exception:  # noqa: BLE001 - a mutant may not parse
        return None
    inits = {t.name for t in m.graph.initializer}
    res = []
    for v in m.graph.input:
        if v.name in inits:
            continue
        tt = v.type.tensor_type
        dt = NP_DTYPES.get(tt.elem_type)
        if dt is None or not tt.HasField('shape'):
            return []
        shape = []
        for k, d in enumerate(tt.shape.dim):
            if d.HasField('dim_value') and d.dim_value >= 0:
                shape.append(1 if k == 0 else d.dim_value)
            else:
                shape.append(1 if k == 0 else 32)
        n = 1
        for s in shape:
            n *= s
        if n > MAX_ELEMS:
            return []
        res.append((v.name, dt, shape))
    return res


def classify(cmd, timeout, env):
    try:
        p = subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, timeout=timeout, env=env)
    except subprocess.TimeoutExpired as e:
        err = (e.stderr or b'').decode('utf-8', 'replace')
        return 'hang', err
    err = p.stderr.decode('utf-8', 'replace')
    if any(s in err for s in SAN_MARKS):
        return 'sanitizer', err
    if p.returncode < 0:
        return 'crash (%s)' % signal.Signals(-p.returncode).name, err
    return 'exit %d' % p.returncode, err


def first_line(err):
    for line in err.splitlines():
        if line.strip():
            return line.strip()[:300]
    return ''


def one(args, i, model, fallback_inputs):
    work = tempfile.mkdtemp(prefix='mut%05d-' % i, dir=os.path.join(args.out, 'tmp'))
    try:
        seed = args.seed * 1000000 + i
        subprocess.run([args.mutate, '-n', '1', '-s', str(seed), '-o', work, model], check=True,
                       stderr=subprocess.DEVNULL)
        with open(os.path.join(work, 'mutants.tsv')) as f:
            path, _, _, desc = f.readline().rstrip('\n').split('\t', 3)
        env = dict(os.environ, OMP_NUM_THREADS='1')
        info_cls, info_err = classify([args.toplu, 'info', path], args.timeout, env)
        ins = graph_inputs(path)
        if ins is None:
            ins = fallback_inputs
        run_cls, run_err = 'skipped', ''
        if ins:
            cmd = [args.toplu, 'run', path]
            for k, (name, dt, shape) in enumerate(ins):
                npy = os.path.join(work, 'in%d.npy' % k)
                np.save(npy, np.zeros(shape, dt))
                cmd += ['--input', '%s=%s' % (name, npy)]
            cmd += ['--output', os.path.join(work, 'out') + '/', '--batch-size', '1', '--threads', '1', '--quiet']
            run_cls, run_err = classify(cmd, args.timeout, env)
        bad = [c for c in (info_cls, run_cls) if c in ('hang', 'sanitizer') or c.startswith('crash')]
        kept = ''
        if bad:
            fd = os.path.join(args.out, 'findings')
            kept = os.path.join(fd, '%s-%05d.onnx' % (os.path.basename(model)[:-5], i))
            shutil.copy(path, kept)
            with open(kept + '.info.stderr', 'w') as f:
                f.write(info_err)
            with open(kept + '.run.stderr', 'w') as f:
                f.write(run_err)
        err = first_line(info_err if info_cls != 'exit 0' else run_err)
        return (kept or os.path.basename(path), model, seed, desc, info_cls, run_cls, err)
    finally:
        shutil.rmtree(work, ignore_errors=True)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument('--toplu', required=True)
    ap.add_argument('--mutate', required=True)
    ap.add_argument('-n', type=int, required=True)
    ap.add_argument('--out', required=True)
    ap.add_argument('--seed', type=int, default=1)
    ap.add_argument('--jobs', type=int, default=1)
    ap.add_argument('--timeout', type=float, default=20)
    ap.add_argument('models', nargs='+')
    args = ap.parse_args()
    os.makedirs(os.path.join(args.out, 'tmp'), exist_ok=True)
    os.makedirs(os.path.join(args.out, 'findings'), exist_ok=True)
    fallback = {m: graph_inputs(m) or [] for m in args.models}
    counts = {}
    rows = []
    with concurrent.futures.ThreadPoolExecutor(max_workers=max(1, args.jobs)) as ex:
        futs = [ex.submit(one, args, i, args.models[i % len(args.models)], fallback[args.models[i % len(args.models)]])
                for i in range(args.n)]
        for k, fu in enumerate(futs):
            r = fu.result()
            rows.append(r)
            for cmd, cls in (('info', r[4]), ('run', r[5])):
                counts[(cmd, cls)] = counts.get((cmd, cls), 0) + 1
            if (k + 1) % 50 == 0:
                print('mutants: %d of %d done' % (k + 1, args.n), file=sys.stderr, flush=True)
    with open(os.path.join(args.out, 'report.tsv'), 'w') as f:
        f.write('file\tmodel\tseed\tmutation\tinfo\trun\tmessage\n')
        for r in rows:
            f.write('\t'.join(str(x).replace('\t', ' ') for x in r) + '\n')
    shutil.rmtree(os.path.join(args.out, 'tmp'), ignore_errors=True)
    bad = {k: v for k, v in counts.items() if k[1] in ('hang', 'sanitizer') or k[1].startswith('crash')}
    print('mutants: %d of %d models, %d s timeout' % (args.n, len(args.models), args.timeout))
    for cmd in ('info', 'run'):
        cls = sorted((c, v) for (k, c), v in counts.items() if k == cmd)
        print('  toplu %-4s %s' % (cmd, ', '.join('%s: %d' % (c, v) for c, v in cls)))
    n_bad = sum(1 for r in rows if r[0].startswith(os.path.join(args.out, 'findings')))
    print('  crashes %d, hangs %d, sanitizer reports %d (mutants kept: %d, in %s/findings)' % (
        sum(v for (k, c), v in bad.items() if c.startswith('crash')), sum(v for (k, c), v in bad.items() if c == 'hang'),
        sum(v for (k, c), v in bad.items() if c == 'sanitizer'), n_bad, args.out))
    print('  report: %s/report.tsv' % args.out)
    return 1 if bad else 0


if __name__ == '__main__':
    sys.exit(main())
