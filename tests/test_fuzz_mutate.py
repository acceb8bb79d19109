#!/usr/bin/python3
"""tests/test_fuzz_mutate.py MUTATE WORKDIR MODEL... - the structure-aware model mutator (fuzz/mutate.c).

Checks that toplu-mutate (fuzz/mutate_main.c)
- writes N mutants and one index line each, and the same seed gives the same bytes (another seed other bytes);
- gives structure mutants that are still ModelProtos (onnx parses them) and differ from their model;
- makes the change its index line says: a dim's new value, a node's new op type, an attribute's new int,
  an initializer's new data_type, raw_data cut to the stated length (each parsed back with onnx);
- covers every kind of mutation (dim, init-dims, attr, dtype, name, op, init-size, external, graph, bytes).
"""
import os
import re
import shutil
import subprocess
import sys

import onnx

mutate, work, models = sys.argv[1], sys.argv[2], sys.argv[3:]
shutil.rmtree(work, ignore_errors=True)
os.makedirs(work)
failures = []


def check(cond, what):
    if not cond:
        failures.append(what)
        print('FAIL:', what)


def run(out, n, seed):
    subprocess.run([mutate, '-n', str(n), '-s', str(seed), '-o', out] + models, check=True)
    with open(os.path.join(out, 'mutants.tsv')) as f:
        return [line.rstrip('\n').split('\t') for line in f]


N = 400
a = run(os.path.join(work, 'a'), N, 7)
b = run(os.path.join(work, 'b'), N, 7)
c = run(os.path.join(work, 'c'), N, 8)
check(len(a) == N and len(b) == N, 'index lines: %d and %d, want %d' % (len(a), len(b), N))
files = sorted(f for f in os.listdir(os.path.join(work, 'a')) if f.endswith('.onnx'))
check(len(files) == N, '%d mutant files, want %d' % (len(files), N))
same = sum(open(ra[0], 'rb').read() == open(rb[0], 'rb').read() for ra, rb in zip(a, b))
check(same == N, 'seed 7 twice: %d of %d mutants identical' % (same, N))
diff = sum(open(ra[0], 'rb').read() != open(rc[0], 'rb').read() for ra, rc in zip(a, c))
check(diff > N * 0.8, 'seeds 7 and 8: only %d of %d mutants differ' % (diff, N))

originals = {m: open(m, 'rb').read() for m in models}
kinds = {}
verified = {}
parsed = changed = structural = 0
for path, model, seed, desc in a:
    kind = desc.split(' ', 1)[0].rstrip(':')
    kinds[kind] = kinds.get(kind, 0) + 1
    data = open(path, 'rb').read()
    if kind == 'bytes':
        continue
    structural += 1
    m = onnx.ModelProto()
    try:
        m.ParseFromString(data)
        parsed += 1
    except Exception as e:  # noqa: BLE001 - any decode error is a failure
        check(False, '%s (%s) does not parse: %s' % (path, desc, e))
        continue
    if data != originals[model]:
        changed += 1
    if ';' in desc:
        continue  # several rounds: later ones may undo the first; only single changes are checked below
    g = m.graph
    mo = re.match(r"dim '(.*)': dim (\d+): (-?\d+) -> (-?\d+)$", desc)
    if mo:
        name, k, new = mo.group(1), int(mo.group(2)), int(mo.group(4))
        vis = [v for v in list(g.input) + list(g.output) + list(g.value_info) if v.name == name]
        ok = any(len(v.type.tensor_type.shape.dim) > k and v.type.tensor_type.shape.dim[k].dim_value == new
                 for v in vis)
        check(ok, '%s: %s not in the mutant' % (path, desc))
        verified['dim'] = verified.get('dim', 0) + 1
    mo = re.match(r'op (\S*) -> (\S*)$', desc)
    if mo:
        check(any(n.op_type == mo.group(2) for n in g.node), '%s: %s not in the mutant' % (path, desc))
        verified['op'] = verified.get('op', 0) + 1
    mo = re.match(r"attr (\S*) '(.*)' i: (-?\d+) -> (-?\d+)$", desc)
    if mo:
        ok = any(n.op_type == mo.group(1) and any(at.name == mo.group(2) and at.i == int(mo.group(4))
                                                  for at in n.attribute) for n in g.node)
        check(ok, '%s: %s not in the mutant' % (path, desc))
        verified['attr'] = verified.get('attr', 0) + 1
    mo = re.match(r"dtype tensor '(.*)': (-?\d+) -> (-?\d+)$", desc)
    if mo:
        ts = list(g.initializer) + [at.t for n in g.node for at in n.attribute if at.HasField('t')]
        ok = any(t.name == mo.group(1) and t.data_type == int(mo.group(3)) for t in ts)
        check(ok, '%s: %s not in the mutant' % (path, desc))
        verified['dtype'] = verified.get('dtype', 0) + 1
    mo = re.match(r"init-size '(.*)': raw_data (\d+) -> (\d+) bytes$", desc)
    if mo:
        ts = list(g.initializer) + [at.t for n in g.node for at in n.attribute if at.HasField('t')]
        ok = any(t.name == mo.group(1) and len(t.raw_data) == int(mo.group(3)) for t in ts)
        check(ok, '%s: %s not in the mutant' % (path, desc))
        verified['init-size'] = verified.get('init-size', 0) + 1

print('kinds:', sorted(kinds.items()))
print('verified single changes:', sorted(verified.items()))
check(structural > N * 0.7, 'only %d of %d mutants are structural' % (structural, N))
check(parsed == structural, '%d of %d structure mutants parse' % (parsed, structural))
check(changed > structural * 0.9, 'only %d of %d structure mutants differ from their model' % (changed, structural))
for k in ('dim', 'init-dims', 'attr', 'dtype', 'name', 'op', 'init-size', 'external', 'graph', 'bytes'):
    check(kinds.get(k, 0) > 0, 'no %s mutation in %d mutants' % (k, N))
for k in ('dim', 'op', 'attr', 'dtype'):
    check(verified.get(k, 0) > 0, 'no single %s change was checked in the mutants' % k)
print('fuzz_mutate: %d mutants, %d structural, %d failures' % (N, structural, len(failures)))
sys.exit(1 if failures else 0)
