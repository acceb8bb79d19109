"""tests/test_control_cases.py - If, Loop and Scan (graph/control.h) on small hand-built models numpy checks.

1. If on a small int64 input (as Silero VAD's sample rate): the plan is keyed
   on its value, each value takes its branch; the branches read an outer
   input and an outer initializer, one branch holds a nested If whose
   condition is a shape (Shape -> Gather -> Equal) and reads a value two
   scopes out; batched rows (B=3) equal numpy.
2. If whose branches give different shapes, chosen by the input's shape.
3. Loop with its trip count from an input, a loop-carried value, a scan
   output, an outer initializer read in the body and a body condition that
   stops it early (iter < limit): numpy's loop.
4. Scan (opset 13): two states, two scan inputs (one reversed, one along
   axis 1), two scan outputs (one reversed, one along axis 1).
5. Errors: an If whose condition is computed from a tensor's values, and a
   Loop whose body condition is, are refused with a message naming the node
   and the tensor; a subgraph reading a name nothing produces, or using an
   op toplu lacks, is refused at load naming the node and the name; a
   branch malformed only where it is inlined is refused when chosen, and
   the other branch still runs; nested loops of 4096 x 4096 iterations stop
   at the expanded graph's node limit.
6. Scan-8 (batch dim, sequence along dim 1) at batch 3 with a reversed
   scan input.

Usage: test_control_cases.py --toplu build/toplu
"""
import atexit
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
ap.add_argument('--toplu', required=True)
args = ap.parse_args()
work = tempfile.mkdtemp(prefix='toplu-control-cases-')
atexit.register(shutil.rmtree, work, True)  # the models and outputs it made go with it
fails = 0


def check(ok, what, why=''):
    global fails
    print(('ok: ' if ok else 'FAIL: ') + what + ('' if ok else f': {why}'), flush=True)
    fails += 0 if ok else 1


def save(graph, name, opset=13):
    m = h.make_model(graph, opset_imports=[h.make_opsetid('', opset)])
    m.ir_version = 8
    path = os.path.join(work, name)
    onnx.save(m, path)
    return path


def run(model, feeds):
    """Run toplu; return ({output name: array} or None, stderr)."""
    out = os.path.join(work, 'out')
    subprocess.run(['rm', '-rf', out], check=True)
    cmd = [args.toplu, 'run', model, '--output', out]
    for k, v in feeds.items():
        f = os.path.join(work, f'{k}.npy')
        np.save(f, v)
        cmd += ['--input', f'{k}={f}']
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode:
        return None, r.stderr
    return {f[:-4]: np.load(os.path.join(out, f)) for f in os.listdir(out) if f.endswith('.npy')}, r.stderr


def close(got, want, name, tol=1e-5):
    if got is None:
        return 'no output'
    g = got.get(name)
    if g is None:
        return f'no output {name}'
    if g.shape != want.shape:
        return f'shape {g.shape}, expected {want.shape}'
    d = float(np.abs(g.astype(np.float64) - want).max()) if g.size else 0.0
    return '' if d <= tol else f'max abs diff {d:.3g}'


rng = np.random.default_rng(11)
f32 = np.float32

# 1. If on a value input, nested If on a shape, outer-scope reads two levels out.
w = rng.standard_normal(4).astype(f32)
inner_then = h.make_graph([h.make_node('Mul', ['x', 'w'], ['it'])], 'inner_then', [],
                          [h.make_tensor_value_info('it', T.FLOAT, None)])
inner_else = h.make_graph([h.make_node('Sub', ['x', 'w'], ['ie'])], 'inner_else', [],
                          [h.make_tensor_value_info('ie', T.FLOAT, None)])
then_b = h.make_graph([
    h.make_node('Constant', [], ['k1'], value_int=1),
    h.make_node('Shape', ['x'], ['shp']),
    h.make_node('Gather', ['shp', 'k1'], ['d1'], axis=0),
    h.make_node('Constant', [], ['four'], value=nh.from_array(np.array(4, np.int64))),
    h.make_node('Equal', ['d1', 'four'], ['is4']),
    h.make_node('If', ['is4'], ['nested'], then_branch=inner_then, else_branch=inner_else),
    h.make_node('Add', ['nested', 'x'], ['t_out'])], 'then', [], [h.make_tensor_value_info('t_out', T.FLOAT, None)])
else_b = h.make_graph([h.make_node('Relu', ['x'], ['e_out'])], 'else', [],
                      [h.make_tensor_value_info('e_out', T.FLOAT, None)])
g = h.make_graph([
    h.make_node('Constant', [], ['c16k'], value=nh.from_array(np.array(16000, np.int64))),
    h.make_node('Equal', ['sr', 'c16k'], ['is16k']),
    h.make_node('If', ['is16k'], ['y'], then_branch=then_b, else_branch=else_b)], 'if_value',
    [h.make_tensor_value_info('x', T.FLOAT, ['N', 4]), h.make_tensor_value_info('sr', T.INT64, [])],
    [h.make_tensor_value_info('y', T.FLOAT, ['N', 4])], [nh.from_array(w, 'w')])
m_if = save(g, 'if_value.onnx')
x = rng.standard_normal((3, 4)).astype(f32)
for sr, want, what in ((16000, x * w + x, 'then branch, nested If on dim 1 == 4 takes its then branch'),
                       (8000, np.maximum(x, 0), 'else branch')):
    got, err = run(m_if, {'x': x, 'sr': np.array(sr, np.int64)})
    why = close(got, want.astype(np.float64), 'y')
    check(not why, f'If on int64 input sr={sr} at batch 3: {what}', why or err[-300:])
got, err = run(m_if, {'x': x[:1], 'sr': np.array(16000, np.int64)})
why = close(got, (x[:1] * w + x[:1]).astype(np.float64), 'y')
check(not why, 'If on sr=16000 at batch 1 equals the batch-3 row', why or err[-300:])

# 2. Branches of different shapes, chosen by the input's shape.
g = h.make_graph([
    h.make_node('Shape', ['x'], ['s']),
    h.make_node('Constant', [], ['zero'], value=nh.from_array(np.array(0, np.int64))),
    h.make_node('Gather', ['s', 'zero'], ['n'], axis=0),
    h.make_node('Constant', [], ['two'], value=nh.from_array(np.array(2, np.int64))),
    h.make_node('Greater', ['n', 'two'], ['big']),
    h.make_node('If', ['big'], ['y'],
                then_branch=h.make_graph([h.make_node('ReduceSum', ['x'], ['r'], keepdims=0)], 't', [],
                                         [h.make_tensor_value_info('r', T.FLOAT, None)]),
                else_branch=h.make_graph([h.make_node('Transpose', ['x'], ['tr'])], 'e', [],
                                         [h.make_tensor_value_info('tr', T.FLOAT, None)]))], 'if_shape',
    [h.make_tensor_value_info('x', T.FLOAT, ['N', 5])], [h.make_tensor_value_info('y', T.FLOAT, None)])
m_shape = save(g, 'if_shape.onnx')
for n in (4, 2):
    xs = rng.standard_normal((n, 5)).astype(f32)
    want = xs.astype(np.float64).sum() if n > 2 else xs.T.astype(np.float64)
    got, err = run(m_shape, {'x': xs})
    why = close(got, np.asarray(want), 'y', 1e-4)
    check(not why, f'If on the batch dim ({n} > 2): {"ReduceSum to a scalar" if n > 2 else "Transpose to [5, 2]"}',
          why or err[-300:])

# 3. Loop: trip count from an input, carried value, scan output, early stop.
bias = rng.standard_normal(3).astype(f32)
body = h.make_graph([
    h.make_node('Cast', ['i'], ['fi'], to=T.FLOAT),
    h.make_node('Mul', ['acc_in', 'fi'], ['m']),
    h.make_node('Add', ['m', 'bias'], ['acc_out']),
    h.make_node('Identity', ['acc_out'], ['scan_out']),
    h.make_node('Constant', [], ['limit'], value=nh.from_array(np.array(4, np.int64))),
    h.make_node('Less', ['i', 'limit'], ['cond_out'])], 'body',
    [h.make_tensor_value_info('i', T.INT64, []), h.make_tensor_value_info('cond_in', T.BOOL, []),
     h.make_tensor_value_info('acc_in', T.FLOAT, [3])],
    [h.make_tensor_value_info('cond_out', T.BOOL, []), h.make_tensor_value_info('acc_out', T.FLOAT, [3]),
     h.make_tensor_value_info('scan_out', T.FLOAT, [3])])
g = h.make_graph([
    h.make_node('Constant', [], ['yes'], value=nh.from_array(np.array(True))),
    h.make_node('Loop', ['trips', 'yes', 'a0'], ['acc', 'hist'], body=body)], 'loop',
    [h.make_tensor_value_info('trips', T.INT64, []), h.make_tensor_value_info('a0', T.FLOAT, [3])],
    [h.make_tensor_value_info('acc', T.FLOAT, [3]), h.make_tensor_value_info('hist', T.FLOAT, None)],
    [nh.from_array(bias, 'bias')])
m_loop = save(g, 'loop.onnx')
a0 = rng.standard_normal(3).astype(f32)
for trips in (3, 9):
    acc, hist = a0.astype(np.float64), []
    for i in range(trips):
        acc = acc * i + bias
        hist.append(acc)
        if not i < 4:
            break
    got, err = run(m_loop, {'trips': np.array(trips, np.int64), 'a0': a0})
    why = close(got, acc, 'acc') or close(got, np.stack(hist), 'hist')
    check(not why, f'Loop M={trips}: carried value and scan output ({len(hist)} iterations'
          f'{", stopped by the body condition" if len(hist) < trips else ""})', why or err[-300:])

# 4. Scan, opset 13: states s (sum) and p (running product), scan inputs a (reversed) and b (axis 1).
L = 5
sbody = h.make_graph([
    h.make_node('Add', ['s_in', 'a_t'], ['s_out']),
    h.make_node('Mul', ['p_in', 'b_t'], ['p_out']),
    h.make_node('Sub', ['s_out', 'p_out'], ['d_t']),
    h.make_node('Identity', ['s_out'], ['s_t'])], 'sbody',
    [h.make_tensor_value_info('s_in', T.FLOAT, [2]), h.make_tensor_value_info('p_in', T.FLOAT, [2]),
     h.make_tensor_value_info('a_t', T.FLOAT, [2]), h.make_tensor_value_info('b_t', T.FLOAT, [2])],
    [h.make_tensor_value_info('s_out', T.FLOAT, [2]), h.make_tensor_value_info('p_out', T.FLOAT, [2]),
     h.make_tensor_value_info('d_t', T.FLOAT, [2]), h.make_tensor_value_info('s_t', T.FLOAT, [2])])
g = h.make_graph([h.make_node('Scan', ['s0', 'p0', 'a', 'b'], ['s', 'p', 'd', 'st'], body=sbody, num_scan_inputs=2,
                              scan_input_directions=[1, 0], scan_input_axes=[0, 1],
                              scan_output_directions=[1, 0], scan_output_axes=[0, 1])], 'scan',
                 [h.make_tensor_value_info('s0', T.FLOAT, [2]), h.make_tensor_value_info('p0', T.FLOAT, [2]),
                  h.make_tensor_value_info('a', T.FLOAT, [L, 2]), h.make_tensor_value_info('b', T.FLOAT, [2, L])],
                 [h.make_tensor_value_info(n, T.FLOAT, None) for n in ('s', 'p', 'd', 'st')])
m_scan = save(g, 'scan.onnx')
s0, p0 = rng.standard_normal(2).astype(f32), rng.standard_normal(2).astype(f32)
a, b = rng.standard_normal((L, 2)).astype(f32), rng.standard_normal((2, L)).astype(f32)
s, p, ds, sts = s0.astype(np.float64), p0.astype(np.float64), [], []
for t in range(L):
    s = s + a[L - 1 - t]
    p = p * b[:, t]
    ds.append(s - p)
    sts.append(s)
want_d = np.stack(ds[::-1], axis=0)   # output 0 reversed, axis 0
want_st = np.stack(sts, axis=1)       # output 1 along axis 1
got, err = run(m_scan, {'s0': s0, 'p0': p0, 'a': a, 'b': b})
why = close(got, s, 's') or close(got, p, 'p') or close(got, want_d, 'd') or close(got, want_st, 'st')
check(not why, f'Scan over {L} steps: states, a reversed scan input, a scan input on axis 1, a reversed scan output, '
      'a scan output on axis 1', why or err[-300:])

# 5. Errors name the node and the tensor.
g = h.make_graph([
    h.make_node('ReduceSum', ['x'], ['total'], keepdims=0),
    h.make_node('Constant', [], ['z'], value=nh.from_array(np.array(0, f32))),
    h.make_node('Greater', ['total', 'z'], ['positive']),
    h.make_node('If', ['positive'], ['y'], name='data_if',
                then_branch=h.make_graph([h.make_node('Neg', ['x'], ['n'])], 't', [],
                                         [h.make_tensor_value_info('n', T.FLOAT, None)]),
                else_branch=h.make_graph([h.make_node('Abs', ['x'], ['ab'])], 'e', [],
                                         [h.make_tensor_value_info('ab', T.FLOAT, None)]))], 'if_data',
    [h.make_tensor_value_info('x', T.FLOAT, ['N', 3])], [h.make_tensor_value_info('y', T.FLOAT, ['N', 3])])
got, err = run(save(g, 'if_data.onnx'), {'x': x[:, :3]})
check(got is None and 'data_if' in err and "'positive'" in err and 'run time' in err,
      'If on a condition computed from tensor values: refused naming the node and the tensor', err[-400:])

lbody = h.make_graph([
    h.make_node('ReduceSum', ['v_in'], ['tot'], keepdims=0),
    h.make_node('Constant', [], ['lim'], value=nh.from_array(np.array(10, f32))),
    h.make_node('Less', ['tot', 'lim'], ['go']),
    h.make_node('Add', ['v_in', 'v_in'], ['v_out'])], 'lbody',
    [h.make_tensor_value_info('i', T.INT64, []), h.make_tensor_value_info('c', T.BOOL, []),
     h.make_tensor_value_info('v_in', T.FLOAT, [3])],
    [h.make_tensor_value_info('go', T.BOOL, []), h.make_tensor_value_info('v_out', T.FLOAT, [3])])
g = h.make_graph([h.make_node('Loop', ['', '', 'v0'], ['v'], body=lbody, name='while_loop')], 'while',
                 [h.make_tensor_value_info('v0', T.FLOAT, [3])], [h.make_tensor_value_info('v', T.FLOAT, [3])])
got, err = run(save(g, 'while.onnx'), {'v0': np.ones(3, f32)})
check(got is None and 'while_loop' in err and "'go'" in err, 'a while-loop on tensor values: refused naming the node '
      'and the body condition', err[-400:])

g = h.make_graph([h.make_node('If', ['c'], ['y'], name='bad_ref',
                              then_branch=h.make_graph([h.make_node('Neg', ['nowhere'], ['n'])], 't', [],
                                                       [h.make_tensor_value_info('n', T.FLOAT, None)]),
                              else_branch=h.make_graph([h.make_node('Neg', ['x'], ['n2'])], 'e', [],
                                                       [h.make_tensor_value_info('n2', T.FLOAT, None)]))], 'bad',
                 [h.make_tensor_value_info('c', T.BOOL, []), h.make_tensor_value_info('x', T.FLOAT, [2])],
                 [h.make_tensor_value_info('y', T.FLOAT, None)])
m = h.make_model(g, opset_imports=[h.make_opsetid('', 13)])
m.ir_version = 8
bad = os.path.join(work, 'bad_ref.onnx')
onnx.save(m, bad)
got, err = run(bad, {'c': np.array(True), 'x': np.ones(2, f32)})
check(got is None and 'bad_ref' in err and "'nowhere'" in err, 'a subgraph reading a name nothing produces: refused '
      'at load naming the node and the name', err[-400:])

# A branch using an op toplu lacks is refused at load, even when no plan would take it.
def if_on_sr(then_nodes, then_out, inits, name):
    g = h.make_graph([
        h.make_node('Constant', [], ['c16k'], value=nh.from_array(np.array(16000, np.int64))),
        h.make_node('Equal', ['sr', 'c16k'], ['is16k']),
        h.make_node('If', ['is16k'], ['y'], name=name,
                    then_branch=h.make_graph(then_nodes, 't', [], [h.make_tensor_value_info(then_out, T.FLOAT, None)],
                                             inits),
                    else_branch=h.make_graph([h.make_node('Neg', ['x'], ['n2'])], 'e', [],
                                             [h.make_tensor_value_info('n2', T.FLOAT, None)]))], name,
        [h.make_tensor_value_info('x', T.FLOAT, [2]), h.make_tensor_value_info('sr', T.INT64, [])],
        [h.make_tensor_value_info('y', T.FLOAT, None)])
    m = h.make_model(g, opset_imports=[h.make_opsetid('', 13)])
    m.ir_version = 8
    path = os.path.join(work, name + '.onnx')
    onnx.save(m, path)
    return path


got, err = run(if_on_sr([h.make_node('NoSuchOp', ['x'], ['q'])], 'q', [], 'odd_op'),
               {'x': np.ones(2, f32), 'sr': np.array(8000, np.int64)})
check(got is None and 'odd_op' in err and "'NoSuchOp'" in err, 'a branch using an op toplu lacks: refused at load '
      'naming the node and the op', err[-400:])
# A branch that is wrong only where it is inlined (an Add with one input, beside a branch initializer).
bad_then = if_on_sr([h.make_node('Add', ['x'], ['q'])], 'q', [nh.from_array(np.ones(2, f32), 'branch_init')],
                    'one_input_add')
got, err = run(bad_then, {'x': np.ones(2, f32), 'sr': np.array(8000, np.int64)})
why = close(got, -np.ones(2), 'y')
check(not why, 'the other branch of that model runs (sr=8000)', why or err[-300:])
got, err = run(bad_then, {'x': np.ones(2, f32), 'sr': np.array(16000, np.int64)})
check(got is None and 'one_input_add' in err and 'Add' in err, 'the malformed branch, when chosen: refused naming the '
      'node', err[-400:])

# Nested loops of 4096 x 4096 iterations (a hostile file): refused once the unrolled graph passes its node limit.
def loop_body(name, inner=None, width=1):
    if inner is not None:
        nodes = [h.make_node('Loop', ['M', '', 'v_in'], ['w'], body=inner), h.make_node('Add', ['w', 'one'], ['v_out'])]
    else:
        nodes = [h.make_node('Add', ['v_in' if k == 0 else f'a{k - 1}', 'one'], [f'a{k}' if k < width - 1 else 'v_out'])
                 for k in range(width)]
    nodes.append(h.make_node('Identity', ['c'], ['c_out']))
    return h.make_graph(nodes, name, [h.make_tensor_value_info('i', T.INT64, []), h.make_tensor_value_info('c', T.BOOL, []),
                                      h.make_tensor_value_info('v_in', T.FLOAT, [1])],
                        [h.make_tensor_value_info('c_out', T.BOOL, []), h.make_tensor_value_info('v_out', T.FLOAT, [1])])


g = h.make_graph([h.make_node('Loop', ['M', '', 'x'], ['y'], name='outer_loop',
                              body=loop_body('outer', loop_body('inner', width=64)))], 'nested',
                 [h.make_tensor_value_info('x', T.FLOAT, [1])], [h.make_tensor_value_info('y', T.FLOAT, [1])],
                 [nh.from_array(np.array(4096, np.int64), 'M'), nh.from_array(np.ones(1, f32), 'one')])
got, err = run(save(g, 'nested_loops.onnx'), {'x': np.zeros(1, f32)})
check(got is None and 'more than 262144 nodes' in err, 'nested loops of 4096 x 4096 iterations: refused at the '
      'node limit', err[-400:])

# 6. Scan-8 (opset 8): batch 3, a state, two scan inputs (one reversed), sequence 4.
B, L8 = 3, 4
body8 = h.make_graph([
    h.make_node('Add', ['acc_in', 'u_t'], ['a1']),
    h.make_node('Mul', ['a1', 'v_t'], ['acc_out']),
    h.make_node('Identity', ['a1'], ['o_t'])], 'body8',
    [h.make_tensor_value_info('acc_in', T.FLOAT, [2]), h.make_tensor_value_info('u_t', T.FLOAT, [2]),
     h.make_tensor_value_info('v_t', T.FLOAT, [2])],
    [h.make_tensor_value_info('acc_out', T.FLOAT, [2]), h.make_tensor_value_info('o_t', T.FLOAT, [2])])
g = h.make_graph([h.make_node('Scan', ['', 'acc0', 'u', 'v'], ['acc', 'o'], body=body8, num_scan_inputs=2,
                              directions=[0, 1])], 'scan8',
                 [h.make_tensor_value_info('acc0', T.FLOAT, [B, 2]), h.make_tensor_value_info('u', T.FLOAT, [B, L8, 2]),
                  h.make_tensor_value_info('v', T.FLOAT, [B, L8, 2])],
                 [h.make_tensor_value_info('acc', T.FLOAT, [B, 2]), h.make_tensor_value_info('o', T.FLOAT, [B, L8, 2])])
m8 = save(g, 'scan8.onnx', opset=8)
acc0 = rng.standard_normal((B, 2)).astype(f32)
u, v = rng.standard_normal((B, L8, 2)).astype(f32), rng.standard_normal((B, L8, 2)).astype(f32)
want_acc, want_o = np.zeros((B, 2)), np.zeros((B, L8, 2))
for bi in range(B):
    a_ = acc0[bi].astype(np.float64)
    for t in range(L8):
        a1 = a_ + u[bi, t]
        a_ = a1 * v[bi, L8 - 1 - t]
        want_o[bi, t] = a1
    want_acc[bi] = a_
got, err = run(m8, {'acc0': acc0, 'u': u, 'v': v})
why = close(got, want_acc, 'acc') or close(got, want_o, 'o')
check(not why, f'Scan-8 at batch {B}, sequence {L8}: state and scan output, one scan input reversed', why or err[-300:])

print(f'{fails} failed', flush=True)
sys.exit(1 if fails else 0)
