"""tests/test_sequence_cases.py - sequence and optional ops on hand-built models, against numpy.

The ONNX 1.12 node tests cover SequenceInsert, SequenceMap, the optional
ops and sequences through If and Loop; the other sequence ops
(SplitToSequence, ConcatFromSequence, SequenceErase, SequenceAt,
SequenceLength, SequenceConstruct, SequenceEmpty) appear there only inside
function expansions.  Here each is built into a model of its own, in the
node-test layout (model.onnx, test_data_set_N/input_M.pb, output_M.pb with
onnx's SequenceProto and OptionalProto for sequence and optional values),
with expected outputs computed by numpy from the ONNX operator
specification, and run by toplu's conformance runner (one process per
model, every data set in one session, so a model run at two sequence
lengths builds two plans):
  SplitToSequence   no split (keepdims 1 and 0), a scalar split that leaves a
                    short last piece, split lengths, a negative axis, a
                    symbolic dim (two data sets of different lengths)
  ConcatFromSequence axis and new_axis (stack), negative axes
  SequenceErase     default (last), negative and positive positions
  SequenceAt        negative positions; SequenceLength; SequenceConstruct of
                    items with different shapes; SequenceEmpty + Insert
  Optional          of a tensor: OptionalHasElement true, OptionalGetElement
and the errors: a position computed from tensor data at run time
(UNSUPPORTED, naming the node and the tensor), a position out of range
(the node named), ConcatFromSequence of an empty sequence.

Usage: test_sequence_cases.py --runner build/toplu-conformance
"""
import argparse
import os
import shutil
import subprocess
import sys
import tempfile

import numpy as np
import onnx
from onnx import TensorProto as T
from onnx import helper as h
from onnx import numpy_helper as nh

ap = argparse.ArgumentParser()
ap.add_argument('--runner', required=True)
args = ap.parse_args()
work = tempfile.mkdtemp(prefix='toplu-sequence-cases-')
fails = 0
checks = 0
rng = np.random.default_rng(7)


def check(ok, what, why=''):
    global fails, checks
    checks += 1
    if not ok:
        print(f'FAIL: {what}: {why}', flush=True)
    fails += 0 if ok else 1


def seq_type(elem=T.FLOAT):
    return h.make_sequence_type_proto(h.make_tensor_type_proto(elem, None))


def seq_vi(name, elem=T.FLOAT):
    return h.make_value_info(name, seq_type(elem))


def tensor_vi(name, elem=T.FLOAT, shape=None):
    return h.make_tensor_value_info(name, elem, shape)


def proto_of(value, name):
    """A numpy array, a list of them (a sequence) or None (an empty optional)."""
    if isinstance(value, list):
        return h.make_sequence(name, onnx.SequenceProto.TENSOR, [nh.from_array(v) for v in value])
    return nh.from_array(value, name)


def case(name, nodes, inputs, outputs, data_sets, opset=17):
    """Write a node-test directory; data_sets: [(inputs list, outputs list)]."""
    d = os.path.join(work, name)
    os.makedirs(d)
    g = h.make_graph(nodes, name, inputs, outputs)
    m = h.make_model(g, opset_imports=[h.make_opsetid('', opset)])
    m.ir_version = 8
    onnx.save(m, os.path.join(d, 'model.onnx'))
    for k, (ins, outs) in enumerate(data_sets):
        sd = os.path.join(d, f'test_data_set_{k}')
        os.makedirs(sd)
        for i, v in enumerate(ins):
            with open(os.path.join(sd, f'input_{i}.pb'), 'wb') as f:
                f.write(proto_of(v, inputs[i].name).SerializeToString())
        for i, v in enumerate(outs):
            with open(os.path.join(sd, f'output_{i}.pb'), 'wb') as f:
                f.write(proto_of(v, outputs[i].name).SerializeToString())
    return d


def run(d):
    r = subprocess.run([args.runner, d], capture_output=True, text=True, timeout=120)
    return r.stdout + r.stderr


def expect_pass(name, *a, **k):
    out = run(case(name, *a, **k))
    check(f'{name}: PASS' in out, name, out.strip()[-600:])


def expect_error(name, verdict, words, *a, **k):
    out = run(case(name, *a, **k))
    ok = f'{name}: {verdict}' in out and all(w in out for w in words)
    check(ok, name, f'want {verdict} naming {words}; got: ' + out.strip()[-600:])


x = rng.standard_normal((5, 4)).astype(np.float32)

# SplitToSequence without split: pieces of 1 along the axis, kept or squeezed
for keep in (1, 0):
    items = [x[i:i + 1] if keep else x[i] for i in range(5)]
    expect_pass(f'split_to_sequence_nosplit_keep{keep}',
                [h.make_node('SplitToSequence', ['x'], ['s'], axis=0, keepdims=keep)],
                [tensor_vi('x', shape=[5, 4])], [seq_vi('s')], [([x], [items])])

# a scalar split leaving a short last piece, along a negative axis
expect_pass('split_to_sequence_scalar',
            [h.make_node('SplitToSequence', ['x', 'k'], ['s'], axis=-1)],
            [tensor_vi('x', shape=[5, 4]), tensor_vi('k', T.INT64, [])], [seq_vi('s')],
            [([x, np.array(3, np.int64)], [[x[:, 0:3], x[:, 3:4]]])])

# split lengths, then ConcatFromSequence puts x back together
expect_pass('split_concat_roundtrip',
            [h.make_node('SplitToSequence', ['x', 'lens'], ['s'], axis=1),
             h.make_node('ConcatFromSequence', ['s'], ['y'], axis=1),
             h.make_node('SequenceLength', ['s'], ['n'])],
            [tensor_vi('x', shape=[5, 4]), tensor_vi('lens', T.INT64, [3])],
            [tensor_vi('y'), tensor_vi('n', T.INT64, [])],
            [([x, np.array([1, 0, 3], np.int64)], [x, np.array(3, np.int64)])])

# a symbolic dim: two data sets of different lengths in one session (two plans)
xs = [rng.standard_normal((n, 3)).astype(np.float32) for n in (2, 4)]
expect_pass('split_to_sequence_symbolic',
            [h.make_node('SplitToSequence', ['x'], ['s'], keepdims=0),
             h.make_node('ConcatFromSequence', ['s'], ['y'], axis=-1, new_axis=1)],
            [tensor_vi('x', shape=['N', 3])], [seq_vi('s'), tensor_vi('y')],
            [([v], [[r for r in v], v.T.copy()]) for v in xs])

# ConcatFromSequence with new_axis: a stack along axis 0 of a sequence input
a, b, c = (rng.standard_normal((2, 3)).astype(np.float32) for _ in range(3))
expect_pass('concat_from_sequence_stack',
            [h.make_node('ConcatFromSequence', ['s'], ['y'], axis=0, new_axis=1)],
            [seq_vi('s')], [tensor_vi('y')], [([[a, b, c]], [np.stack([a, b, c])])])

# SequenceErase: default (the last), negative and positive positions
for pos in (None, -3, 1):
    items = [a, b, c]
    want = list(items)
    del want[-1 if pos is None else pos]
    ins = [seq_vi('s')] + ([] if pos is None else [tensor_vi('p', T.INT64, [])])
    data = [items] + ([] if pos is None else [np.array(pos, np.int64)])
    expect_pass(f'sequence_erase_{"default" if pos is None else pos}'.replace('-', 'm'),
                [h.make_node('SequenceErase', ['s'] + ([] if pos is None else ['p']), ['t'])],
                ins, [seq_vi('t')], [(data, [want])])

# SequenceConstruct of items of different shapes, SequenceAt from the back,
# SequenceInsert into the middle, SequenceLength
d1 = rng.standard_normal((3,)).astype(np.float32)
d2 = rng.standard_normal((2, 2)).astype(np.float32)
d3 = rng.standard_normal((1, 1, 4)).astype(np.float32)
p1 = h.make_tensor('p1', T.INT64, [], [1])
pm2 = h.make_tensor('pm2', T.INT32, [], [-2])
expect_pass('sequence_construct_at_insert',
            [h.make_node('SequenceConstruct', ['d1', 'd2'], ['s']),
             h.make_node('Constant', [], ['one'], value=p1),
             h.make_node('SequenceInsert', ['s', 'd3', 'one'], ['t']),
             h.make_node('Constant', [], ['m2'], value=pm2),
             h.make_node('SequenceAt', ['t', 'm2'], ['y']),
             h.make_node('SequenceLength', ['t'], ['n'])],
            [tensor_vi('d1'), tensor_vi('d2'), tensor_vi('d3')],
            [seq_vi('t'), tensor_vi('y'), tensor_vi('n', T.INT64, [])],
            [([d1, d2, d3], [[d1, d3, d2], d3, np.array(3, np.int64)])])

# SequenceEmpty + SequenceInsert (the default position: the end), twice
expect_pass('sequence_empty_insert',
            [h.make_node('SequenceEmpty', [], ['e'], dtype=T.FLOAT),
             h.make_node('SequenceInsert', ['e', 'd2'], ['s']),
             h.make_node('SequenceInsert', ['s', 'd1'], ['t'])],
            [tensor_vi('d1'), tensor_vi('d2')], [seq_vi('t')], [([d1, d2], [[d2, d1]])])

# Optional of a tensor: present, its element back
expect_pass('optional_of_tensor',
            [h.make_node('Optional', ['d2'], ['o']),
             h.make_node('OptionalHasElement', ['o'], ['has']),
             h.make_node('OptionalGetElement', ['o'], ['y'])],
            [tensor_vi('d2')], [tensor_vi('has', T.BOOL, []), tensor_vi('y')],
            [([d2], [np.array(True), d2])])

# SplitToSequence and ConcatFromSequence of strings (the pieces are Slices of pointers)
words = np.array([['ab', 'c'], ['de', ''], ['f', 'gh']], dtype=object)
expect_pass('split_to_sequence_strings',
            [h.make_node('SplitToSequence', ['w'], ['s'], axis=0, keepdims=0),
             h.make_node('ConcatFromSequence', ['s'], ['y'], axis=0, new_axis=1)],
            [tensor_vi('w', T.STRING, [3, 2])], [seq_vi('s', T.STRING), tensor_vi('y', T.STRING)],
            [([words], [[r for r in words], words])])

# errors: a position computed from tensor data, one out of range, an empty concat
expect_error('sequence_at_data_position', 'UNSUPPORTED', ["'SequenceAt_data'", "'pos'", 'run time'],
             [h.make_node('ArgMax', ['v'], ['pos'], keepdims=0),
              h.make_node('SequenceAt', ['s', 'pos'], ['y'], name='SequenceAt_data')],
             [seq_vi('s'), tensor_vi('v', shape=[3])], [tensor_vi('y')],
             [([[a, b, c], np.array([0.1, 0.9, 0.2], np.float32)], [b])])
expect_error('sequence_at_out_of_range', 'FAIL', ["'SequenceAt_far'", 'position 3'],
             [h.make_node('Constant', [], ['three'], value=h.make_tensor('three', T.INT64, [], [3])),
              h.make_node('SequenceAt', ['s', 'three'], ['y'], name='SequenceAt_far')],
             [seq_vi('s')], [tensor_vi('y')], [([[a, b, c]], [a])])
expect_error('concat_from_empty', 'FAIL', ["'concat_empty'", 'empty'],
             [h.make_node('SequenceEmpty', [], ['e']),
              h.make_node('ConcatFromSequence', ['e'], ['y'], axis=0, name='concat_empty')],
             [tensor_vi('unused')], [tensor_vi('y')], [([a], [a])])

shutil.rmtree(work, ignore_errors=True)
print(f'{checks - fails} of {checks} sequence cases passed')
sys.exit(1 if fails else 0)
