"""tests/models/common.py - helpers for the real-model tests (run by CTest, see tests/models.cmake).

Each test script takes --toplu (the built CLI), --cache (scripts/fetch-models.sh's
cache) and --shared (the ../shared folder beside the project), prints one line per
check (`ok: ...` / `FAIL: ...`), and exits 0 (all passed) or 1 (a check failed,
or what it needs is missing: missing() names it and says how to get it).
Nothing here skips: a model test that cannot run has not passed.
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile
import time

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, os.path.join(ROOT, 'scripts'))


def parse_args(extra=None):
    """Common arguments; extra(parser) may add more."""
    ap = argparse.ArgumentParser()
    ap.add_argument('--toplu', required=True, help='path of the toplu CLI')
    ap.add_argument('--cache', default=os.environ.get('TOPLU_CACHE') or
                    os.path.join(os.path.expanduser('~'), '.cache', 'toplu'))
    ap.add_argument('--shared', default=os.environ.get('TOPLU_SHARED') or os.path.join(os.path.dirname(ROOT), 'shared'))
    if extra:
        extra(ap)
    args = ap.parse_args()
    os.environ['TOPLU_CACHE'] = args.cache
    return args


def missing(msg):
    """Fail (exit 1) because an input is missing; msg names it and how to get it."""
    print(f'FAIL: {msg}', flush=True)
    sys.exit(1)


class Report:
    """Counts checks; end() prints the totals and exits."""

    def __init__(self):
        self.passed = 0
        self.failed = 0
        self.failed_msgs = []

    def check(self, cond, msg, why=''):
        """Record one check; print `ok:` or `FAIL:` with the reason."""
        if cond:
            self.passed += 1
            print(f'ok: {msg}', flush=True)
        else:
            self.failed += 1
            self.failed_msgs.append(msg)
            print(f'FAIL: {msg}' + (f': {why}' if why else ''), flush=True)
        return cond

    def end_expecting(self, must_fail):
        """For a test of the checks: exit 0 when exactly the checks in must_fail
        failed (each one, a prefix of a check's message) and nothing else; else 1."""
        caught = [m for m in must_fail if any(f.startswith(m) for f in self.failed_msgs)]
        missed = [m for m in must_fail if m not in caught]
        other = [f for f in self.failed_msgs if not any(f.startswith(m) for m in must_fail)]
        print(f'checks of the checks: {len(caught)} of {len(must_fail)} expected failures seen'
              + (f'; NOT caught: {missed}' if missed else '') + (f'; other failures: {other}' if other else ''),
              flush=True)
        sys.exit(0 if must_fail and not missed and not other else 1)

    def end(self):
        """Print 'N passed, M failed' and exit 0 or 1."""
        print(f'{self.passed} passed, {self.failed} failed', flush=True)
        sys.exit(1 if self.failed else 0)


def npm_dir(cache, spec):
    """Where fetch-models.sh unpacks an npm package (the folder holding package/)."""
    return os.path.join(cache, 'npm', spec.replace('/', '_').replace('@', '_'))


def model_path(ref, cache, shared):
    """A fixture's model reference (npm:SPEC:PATH, shared:PATH, cache:PATH) as a local path."""
    kind, rest = ref.split(':', 1)
    if kind == 'shared':
        return os.path.join(shared, rest)
    if kind == 'cache':
        return os.path.join(cache, rest)
    if kind == 'npm':
        spec, path = rest.rsplit(':', 1)
        return os.path.join(npm_dir(cache, spec), path)
    raise ValueError(f'unknown model reference {ref!r}')


def out_file(outdir, name):
    """The file `toplu run` writes for output `name`: characters outside [A-Za-z0-9._-] -> '_'."""
    safe = ''.join(c if (c.isalnum() and c.isascii()) or c in '._-' else '_' for c in name)
    return os.path.join(outdir, safe + '.npy')


def run(cmd, timeout=1200):
    """Run a command: (exit code, stdout, stderr, seconds)."""
    t = time.monotonic()
    try:
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
        return p.returncode, p.stdout, p.stderr, time.monotonic() - t
    except subprocess.TimeoutExpired:
        return 124, '', f'timed out after {timeout}s', time.monotonic() - t


def toplu_run(toplu, model, feeds, outdir, batch=None, timeout=1200):
    """`toplu run MODEL --input NAME=FILE ... --output DIR [--batch-size B]`."""
    cmd = [toplu, 'run', model, '--output', outdir]
    for k, v in feeds.items():
        cmd += ['--input', f'{k}={v}']
    if batch:
        cmd += ['--batch-size', str(batch)]
    return run(cmd, timeout)


def tail(code, out, err, n=400):
    """The end of a failed command's output, for a message."""
    text = (err or '').strip() or (out or '').strip()
    return f'exit {code}: {text[-n:]}'


def compare(got, want, max_abs):
    """'' when got matches want (shape, dtype, NaN positions, max abs diff), else why; and the diff."""
    if got.shape != want.shape:
        return f'shape {list(got.shape)}, expected {list(want.shape)}', None
    if got.dtype != want.dtype:
        return f'dtype {got.dtype}, expected {want.dtype}', None
    if want.dtype.kind not in 'fc':
        return ('' if np.array_equal(got, want) else 'values differ'), None
    g, w = got.astype(np.float64), want.astype(np.float64)
    if not np.array_equal(np.isnan(g), np.isnan(w)):
        return 'NaN positions differ', None
    m = ~np.isnan(w)
    d = float(np.abs(g[m] - w[m]).max()) if m.any() else 0.0
    if d > max_abs:
        return f'max abs diff {d:.3g} > {max_abs}', d
    return '', d


def argmax_mismatch(got, want, tol):
    """Positions where the argmax along the last axis differs, ignoring positions
    whose reference top-2 gap is within 2*tol (a tie at this precision)."""
    g = got.reshape(-1, got.shape[-1])
    w = want.reshape(-1, want.shape[-1])
    ga, wa = g.argmax(-1), w.argmax(-1)
    top2 = np.sort(w, axis=-1)[:, -2:] if w.shape[-1] > 1 else np.zeros((len(w), 2))
    tie = (top2[:, 1] - top2[:, 0]) <= 2 * tol
    bad = (ga != wa) & ~tie
    return int(bad.sum()), int(((ga != wa) & tie).sum()), len(wa)


def load_meta(d):
    """A fixture folder's meta.json."""
    with open(os.path.join(d, 'meta.json')) as f:
        return json.load(f)


def workdir(prefix):
    """A fresh temporary folder for outputs."""
    return tempfile.mkdtemp(prefix=f'toplu-{prefix}-')
