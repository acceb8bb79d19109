"""tests/test_text_cases.py - TfIdfVectorizer on hand-built models, against numpy.

The ONNX node tests cover mode TF only, with one pool; here every mode (TF,
IDF, TFIDF, with and without weights), int32 and int64 X, 1-D and 2-D X,
1- to 3-grams, min/max_gram_length, skips from 0 to past the row,
ngram_indexes that are shuffled or leave gaps, an empty row, and the load
errors of inconsistent attributes (naming the node and the attribute).
The reference counts n-grams by brute force over a dict of the pool (the
kernel sorts the pool and binary-searches it): ONNX's definition, as ONNX
Runtime 1.30 computes it (unigrams counted once, longer n-grams once per
skip distance d = 1..max_skip_count+1; weights[k] is the k-th pool
n-gram's, at coordinate ngram_indexes[k]; where n-grams share a coordinate,
TF and TFIDF add up and IDF takes the weight of the last hit in ONNX
Runtime's scan order: skip distance, then start, then length).  Models like these,
shuffled and shared ngram_indexes included, were run through ONNX Runtime
1.30 (scripts/ort-node-test.js) when this was written, and it agreed.

Usage: test_text_cases.py --toplu build/toplu
"""
import argparse
import os
import subprocess
import sys
import tempfile

import numpy as np
import onnx
from onnx import TensorProto as T
from onnx import helper as h

ap = argparse.ArgumentParser()
ap.add_argument('--toplu', required=True)
args = ap.parse_args()
work = tempfile.mkdtemp(prefix='toplu-text-cases-')
fails = 0
checks = 0


def check(ok, what, why=''):
    global fails, checks
    checks += 1
    if not ok:
        print(f'FAIL: {what}: {why}', flush=True)
    fails += 0 if ok else 1


def tfidf_model(x_dtype, x_shape, name='tfidf', **attrs):
    node = h.make_node('TfIdfVectorizer', ['X'], ['Y'], name=name, **attrs)
    g = h.make_graph([node], 'g', [h.make_tensor_value_info('X', x_dtype, x_shape)],
                     [h.make_tensor_value_info('Y', T.FLOAT, None)])
    m = h.make_model(g, opset_imports=[h.make_opsetid('', 9)])
    m.ir_version = 8
    path = os.path.join(work, 'tfidf.onnx')
    onnx.save(m, path)
    return path


def run(model, x):
    out = os.path.join(work, 'out')
    subprocess.run(['rm', '-rf', out], check=True)
    f = os.path.join(work, 'X.npy')
    np.save(f, x)
    r = subprocess.run([args.toplu, 'run', model, '--input', f'X={f}', '--output', out],
                       capture_output=True, text=True)
    if r.returncode:
        return None, r.stderr
    return np.load(os.path.join(out, 'Y.npy')), r.stderr


def tfidf_ref(x, mode, min_n, max_n, max_skip, counts, pool, indexes, weights=None):
    grams, k = {}, 0  # n-gram -> its position k in the pool
    for li, b in enumerate(counts):
        n = li + 1
        e = counts[li + 1] if li + 1 < len(counts) else len(pool)
        for j in range(b, e, n):
            grams[tuple(pool[j:j + n])] = k
            k += 1
    rows = x if x.ndim == 2 else x[None]
    y = np.zeros((rows.shape[0], max(indexes) + 1), np.float32)
    for r, row in enumerate(rows):
        c = len(row)
        for d in range(1, max_skip + 2):  # ONNX Runtime's scan order: skip distance, start, length
            for i in range(c):
                for n in range(min_n if d == 1 else max(min_n, 2), max_n + 1):
                    if i + (n - 1) * d >= c:
                        break
                    g = tuple(int(row[i + t * d]) for t in range(n))
                    if g in grams:
                        kk = grams[g]
                        wk = np.float32(1 if weights is None else weights[kk])
                        if mode == 'TF':
                            y[r, indexes[kk]] += 1
                        elif mode == 'TFIDF':
                            y[r, indexes[kk]] += wk
                        else:  # IDF: the last hit's weight
                            y[r, indexes[kk]] = wk
    return y if x.ndim == 2 else y[0]


rng = np.random.default_rng(11)


def random_pool(lengths_counts):
    """Distinct n-grams over 0..5: {n: how many}; returns (ngram_counts, pool)."""
    counts, pool = [], []
    for n in range(1, max(lengths_counts) + 1):
        counts.append(len(pool))
        seen = set()
        while len(seen) < lengths_counts.get(n, 0):
            seen.add(tuple(int(v) for v in rng.integers(0, 6, n)))
        for g in sorted(seen, key=lambda _: rng.random()):
            pool += list(g)
    return counts, pool


cases = 0
for x_dtype, np_dtype in ((T.INT64, np.int64), (T.INT32, np.int32)):
    for mode in ('TF', 'IDF', 'TFIDF'):
        for weighted in (False, True):
            for min_n, max_n in ((1, 1), (1, 2), (2, 3), (1, 3), (3, 4)):
                for max_skip in (0, 2, 50):
                    counts, pool = random_pool({1: 4, 2: 6, 3: 5})
                    total = 4 + 6 + 5
                    style = ('permuted', 'gaps', 'shared')[cases % 3]
                    if style == 'permuted':
                        indexes = [int(v) for v in rng.permutation(total)]
                    elif style == 'gaps':  # coordinates nothing counts into stay 0
                        indexes = [int(v) for v in rng.permutation(total + 4)[:total]]
                    else:  # several n-grams count into one coordinate
                        indexes = [int(v) for v in rng.integers(0, 6, total)]
                    weights = [float(v) for v in np.round(rng.random(total) * 4, 3)] if weighted else None
                    attrs = dict(mode=mode, min_gram_length=min_n, max_gram_length=max_n,
                                 max_skip_count=max_skip, ngram_counts=counts, ngram_indexes=indexes,
                                 pool_int64s=pool)
                    if weights is not None:
                        attrs['weights'] = weights
                    x = rng.integers(0, 6, (5, 17)).astype(np_dtype)
                    x[3, :] = 7  # a row no n-gram matches
                    want = tfidf_ref(x, mode, min_n, max_n, max_skip, counts, pool, indexes, weights)
                    what = (f'TfIdfVectorizer {mode} {"weighted " if weighted else ""}{np.dtype(np_dtype).name} '
                            f'[5, 17] n={min_n}..{max_n} skip={max_skip} {style} ngram_indexes')
                    got, err = run(tfidf_model(x_dtype, ['N', 17], **attrs), x)
                    if got is None:
                        check(False, what, err.strip())
                    else:
                        check(got.shape == want.shape and np.allclose(got, want, rtol=1e-6, atol=0), what,
                              f'got {got.tolist()}, want {want.tolist()}')
                    cases += 1

# 1-D X: one document; the output has no batch dim.
counts, pool = random_pool({1: 3, 2: 8})
indexes = list(range(11))
x1 = rng.integers(0, 6, 40).astype(np.int64)
want = tfidf_ref(x1, 'TFIDF', 1, 2, 3, counts, pool, indexes, [0.5] * 11)
got, err = run(tfidf_model(T.INT64, [40], mode='TFIDF', min_gram_length=1, max_gram_length=2, max_skip_count=3,
                           ngram_counts=counts, ngram_indexes=indexes, pool_int64s=pool, weights=[0.5] * 11), x1)
check(got is not None and got.shape == (11,) and np.allclose(got, want, rtol=1e-6, atol=0),
      'TfIdfVectorizer 1-D X [40] TFIDF', err if got is None else f'got {got.tolist()}, want {want.tolist()}')
# Counts over 1: a row of one repeated value, unigram and bigram of it.
xr = np.full((2, 9), 4, np.int64)
got, err = run(tfidf_model(T.INT64, ['N', 9], mode='TF', min_gram_length=1, max_gram_length=2, max_skip_count=1,
                           ngram_counts=[0, 1], ngram_indexes=[1, 0], pool_int64s=[4, 4, 4]), xr)
want = np.array([[8 + 7, 9]] * 2, np.float32)  # bigrams at distance 1 (8) and 2 (7); 9 unigrams
check(got is not None and np.array_equal(got, want), 'TfIdfVectorizer repeated value, skip 1',
      err if got is None else f'got {got.tolist()}, want {want.tolist()}')

# Load errors: status, node and attribute named.
base = dict(mode='TF', min_gram_length=1, max_gram_length=2, max_skip_count=0, ngram_counts=[0, 2],
            ngram_indexes=[0, 1, 2, 3], pool_int64s=[1, 2, 3, 4, 5, 6])
bad = [
    (dict(ngram_counts=[0, 3]), '2-grams take 3 pool values'),
    (dict(ngram_counts=[1, 2]), 'ngram_counts must start with 0'),
    (dict(ngram_counts=[0, 9]), 'ngram_counts[1] = 9'),
    (dict(ngram_indexes=[0, 1, 2]), 'ngram_indexes has 3 values for 4 n-grams'),
    (dict(ngram_indexes=[0, 1, 2, -1]), 'ngram_indexes[3] = -1'),
    (dict(mode='BM25'), "mode 'BM25'"),
    (dict(min_gram_length=0), 'min_gram_length 0'),
    (dict(min_gram_length=3, max_gram_length=2), 'need 1 <= min <= max'),
    (dict(max_skip_count=-1), 'max_skip_count -1'),
    (dict(weights=[1.0, 2.0]), 'weights has 2 values; expected one per n-gram of the pool (4)'),
    (dict(pool_strings=['a', 'b']), 'pool_strings'),
    (dict(pool_int64s=[1, 2, 3, 4, 3, 4]), "pool_int64s lists a 2-gram twice (the pool's n-grams 2 and 3"),
]
for change, msg in bad:
    attrs = dict(base, **change)
    if 'pool_strings' in change:
        del attrs['pool_int64s']
    got, err = run(tfidf_model(T.INT64, ['N', 5], name='vec7', **attrs), np.zeros((1, 5), np.int64))
    check(got is None and msg in err and "'vec7'" in err, f'TfIdfVectorizer refuses {change}',
          f'exit 0' if got is not None else err.strip())
# A length that is not counted may repeat an n-gram (ONNX Runtime loads only the counted lengths).
xd = np.array([[3, 4, 1, 1, 5, 6]], np.int64)
got, err = run(tfidf_model(T.INT64, ['N', 6], **dict(base, min_gram_length=2, pool_int64s=[1, 1, 3, 4, 5, 6])), xd)
check(got is not None and np.array_equal(got, [[0, 0, 1, 1]]), 'TfIdfVectorizer: repeated 1-grams, only 2-grams counted',
      err if got is None else f'got {got.tolist()}')
attrs = dict(base)
del attrs['max_skip_count']
got, err = run(tfidf_model(T.INT64, ['N', 5], name='vec7', **attrs), np.zeros((1, 5), np.int64))
check(got is None and "'max_skip_count' is missing" in err, 'TfIdfVectorizer refuses a missing max_skip_count',
      'exit 0' if got is not None else err.strip())

print(f'{checks - fails} of {checks} checks passed ({cases} random TfIdfVectorizer models)')
sys.exit(1 if fails else 0)
