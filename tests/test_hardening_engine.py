"""tests/test_hardening_engine.py - the engine side of the hardening issue.

Models an adversarial user could hand toplu, built here with /usr/bin/python3's
onnx and numpy, each run through `toplu info` / `toplu run` (the ASan+UBSan
build runs the same cases: tests/hardening_engine.cmake registers them in
every build tree).  Each case prints ok/FAIL lines and exits 1 on a failure.

Cases:
  fold_conv     a Conv or ConvTranspose whose inputs are all constant (two
                initializers, or a Constant node) is folded at load time,
                then feeds an Add with a graph input.  The folded values
                must match numpy for output channels that are and are not a
                multiple of oneDNN's channel block (toplu once overran the
                folded buffer: "free(): invalid pointer", or gave values up
                to 8.5 off when the channels filled whole blocks).
  extdata       external data: a symlink inside the model's folder pointing
                outside it is refused (it was read as weights), a name like
                `w..bin` is accepted (it was refused), a FIFO as the
                location is refused without hanging, a location that is a
                directory is refused, `../x` still is, an offset past the
                end and an offset of 2^63-1 are refused.
  model_file    the model path itself: /dev/zero and a FIFO are refused at
                once (the first grew to GBs, the second hung).
  overflow      sizes that do not fit in 64 bits are refused, not wrapped:
                a Conv input dim of INT64_MAX, Conv group 2^62, a Reshape to
                a dim of 2^62 (once printed `[0, 2]` and succeeded).
  arch          `toplu plan --arch` on transformer configs whose sizes
                multiply out past 2^63 (it printed "-16 B of weights").
  sizes         the rest of item 10's review, each once a UBSan report or a
                wrapped size: Split sizes adding past 2^63; Range whose
                start + i * delta passes int64/int32 on the way (values
                checked exactly); LRN with size 2^62 at run time; shapes
                with a zero dim beside dims that multiply past 2^40
                (ConstantOfShape, an initializer's dims, a graph input, a
                .npy header: (2, 2^63-1, 0) wrapped toplu_tensor_numel);
                Resize-18 keep_aspect_ratio_policy with sizes 2^63-1 (a
                double past int64 converted); Slice with INT64_MIN/MAX
                starts, ends and steps (values checked against numpy);
                SpaceToDepth with H = W = 0 (C * b^2 past 2^63); pooling
                FLOPs with kernel dims of 2^31 (they saturate, values run);
                external data located at the model's folder itself (fuzz
                finding F2), AveragePool with a 2^32-tap kernel (fuzz
                finding F3: O(kernel) per output to plan and to run; now
                planned at once, values against numpy), both reproducers
                in tests/data/hardening/.

Usage: test_hardening_engine.py --toplu build/toplu CASE
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
ap.add_argument('case')
args = ap.parse_args()
work = tempfile.mkdtemp(prefix='toplu-hardening-engine-')
atexit.register(shutil.rmtree, work, True)  # the models and outputs it made go with it
fails = 0
INT64_MAX = 2**63 - 1


def check(ok, what, why=''):
    global fails
    print(('ok: ' if ok else 'FAIL: ') + what + ('' if ok else f': {why}'), flush=True)
    fails += 0 if ok else 1


def save(graph, path, opset=13):
    m = h.make_model(graph, opset_imports=[h.make_opsetid('', opset)])
    m.ir_version = 8
    onnx.save(m, path)
    return path


def toplu(*argv, timeout=60):
    """Run the CLI; (returncode, stdout, stderr).  A hang is a failure of its own."""
    try:
        r = subprocess.run([args.toplu, *argv], capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        return None, '', f'timed out after {timeout} s'
    return r.returncode, r.stdout, r.stderr


def sanitizer_clean(stderr):
    return not any(s in stderr for s in ('AddressSanitizer', 'runtime error:', 'LeakSanitizer', 'invalid pointer'))


def run(model, feeds, name):
    """Run toplu on feeds; ({output: array} or None, stderr)."""
    out = os.path.join(work, f'out-{name}')
    argv = ['run', model, '--output', out, '--quiet']
    for k, v in feeds.items():
        f = os.path.join(work, f'{name}-{k}.npy')
        np.save(f, v)
        argv += ['--input', f'{k}={f}']
    rc, _, err = toplu(*argv)
    if rc != 0:
        return None, err
    return {f[:-4]: np.load(os.path.join(out, f)) for f in os.listdir(out) if f.endswith('.npy')}, err


# ---- numpy references (float64) ----

def conv2d(x, w, pad, group=1):
    """x [N, C, H, W], w [M, C/g, kh, kw], stride 1, symmetric pads."""
    n, c, hh, ww = x.shape
    m, cg, kh, kw = w.shape
    xp = np.pad(x, ((0, 0), (0, 0), (pad, pad), (pad, pad)))
    oh, ow = hh + 2 * pad - kh + 1, ww + 2 * pad - kw + 1
    y = np.zeros((n, m, oh, ow))
    mg = m // group
    for g in range(group):
        xs = xp[:, g * cg:(g + 1) * cg]
        for i in range(kh):
            for j in range(kw):
                y[:, g * mg:(g + 1) * mg] += np.einsum('nchw,mc->nmhw', xs[:, :, i:i + oh, j:j + ow],
                                                       w[g * mg:(g + 1) * mg, :, i, j])
    return y


def conv_transpose2d(x, w, pad):
    """x [N, C, H, W], w [C, M, kh, kw], stride 1, group 1, symmetric pads."""
    n, c, hh, ww = x.shape
    _, m, kh, kw = w.shape
    full = np.zeros((n, m, hh + kh - 1, ww + kw - 1))
    for i in range(kh):
        for j in range(kw):
            full[:, :, i:i + hh, j:j + ww] += np.einsum('nchw,cm->nmhw', x, w[:, :, i, j])
    return full[:, :, pad:full.shape[2] - pad, pad:full.shape[3] - pad]


# ---- cases ----

def case_fold_conv():
    rng = np.random.default_rng(14)
    hw = 6
    for op in ('Conv', 'ConvTranspose'):
        for co in (3, 8, 12, 16):
            for source in ('initializers', 'constant_node'):
                for relu in (0, 1):
                    x = rng.standard_normal((1, 4, hw, hw)).astype(np.float32)
                    w = (rng.standard_normal((co, 4, 3, 3) if op == 'Conv' else (4, co, 3, 3)) * 0.5).astype(np.float32)
                    b = rng.standard_normal(co).astype(np.float32)
                    z = rng.standard_normal((2, co, hw, hw)).astype(np.float32)
                    ref = (conv2d if op == 'Conv' else conv_transpose2d)(x.astype(np.float64), w.astype(np.float64), 1)
                    ref = ref + b.reshape(1, co, 1, 1)
                    if relu:
                        ref = np.maximum(ref, 0)
                    ref = ref + z
                    nodes, inits = [], [nh.from_array(b, 'B')]
                    if source == 'initializers':
                        inits += [nh.from_array(x, 'X'), nh.from_array(w, 'W')]
                    else:
                        nodes += [h.make_node('Constant', [], ['X'], value=nh.from_array(x, 'xv')),
                                  h.make_node('Constant', [], ['W'], value=nh.from_array(w, 'wv'))]
                    nodes.append(h.make_node(op, ['X', 'W', 'B'], ['Y'], pads=[1, 1, 1, 1]))
                    last = 'Y'
                    if relu:
                        nodes.append(h.make_node('Relu', ['Y'], ['R']))
                        last = 'R'
                    nodes.append(h.make_node('Add', [last, 'Z'], ['O']))
                    g = h.make_graph(nodes, 'fold', [h.make_tensor_value_info('Z', T.FLOAT, ['N', co, hw, hw])],
                                     [h.make_tensor_value_info('O', T.FLOAT, None)], inits)
                    name = f'{op}-{co}-{source}-{"relu" if relu else "plain"}'
                    path = save(g, os.path.join(work, name + '.onnx'))
                    rc, _, err = toplu('info', path)
                    check(rc == 0 and sanitizer_clean(err), f'fold {name}: info', f'rc {rc}: {err[-800:]}')
                    outs, err = run(path, {'Z': z}, name)
                    if outs is None:
                        check(False, f'fold {name}: run', err[-800:])
                        continue
                    d = float(np.max(np.abs(outs['O'].astype(np.float64) - ref)))
                    check(outs['O'].shape == ref.shape and d < 1e-4 and sanitizer_clean(err),
                          f'fold {name}: values match numpy (max diff {d:.2g})', f'shape {outs["O"].shape}')


def ext_model(folder, location, offset=None, length=None, n=4):
    """A model Y = X + W where W [n] float32 lives in external data."""
    w = onnx.TensorProto()
    w.name = 'W'
    w.data_type = T.FLOAT
    w.dims.extend([n])
    w.data_location = onnx.TensorProto.EXTERNAL
    for k, v in (('location', location), ('offset', offset), ('length', length)):
        if v is not None:
            e = w.external_data.add()
            e.key, e.value = k, str(v)
    g = h.make_graph([h.make_node('Add', ['X', 'W'], ['Y'])], 'ext', [h.make_tensor_value_info('X', T.FLOAT, ['N', n])],
                     [h.make_tensor_value_info('Y', T.FLOAT, ['N', n])], [w])
    m = h.make_model(g, opset_imports=[h.make_opsetid('', 13)])
    m.ir_version = 8
    path = os.path.join(folder, 'model.onnx')
    with open(path, 'wb') as f:  # onnx.save would try to resolve the external data itself
        f.write(m.SerializeToString())
    return path


def case_extdata():
    wv = np.array([1.5, -2.0, 3.25, 4.0], np.float32)
    x = np.array([[10, 20, 30, 40]], np.float32)

    def folder(name):
        d = os.path.join(work, name)
        os.makedirs(d)
        return d

    # a legitimate name with two dots runs and its values are the file's
    d = folder('dots')
    wv.tofile(os.path.join(d, 'w..bin'))
    m = ext_model(d, 'w..bin')
    outs, err = run(m, {'X': x}, 'dots')
    check(outs is not None and np.array_equal(outs['Y'], x + wv), "external data 'w..bin' is read", err[-500:])
    # in a subfolder, with an offset
    os.makedirs(os.path.join(d, 'sub'))
    with open(os.path.join(d, 'sub', 'w.bin'), 'wb') as f:
        f.write(b'\xff' * 8 + wv.tobytes())
    m = ext_model(d, 'sub/w.bin', offset=8, length=16)
    outs, err = run(m, {'X': x}, 'sub')
    check(outs is not None and np.array_equal(outs['Y'], x + wv), "external data 'sub/w.bin' at offset 8 is read",
          err[-500:])
    # a symlink inside the folder to a file inside it is fine
    d = folder('inner_link')
    wv.tofile(os.path.join(d, 'real.bin'))
    os.symlink('real.bin', os.path.join(d, 'w.bin'))
    outs, err = run(ext_model(d, 'w.bin'), {'X': x}, 'inner_link')
    check(outs is not None and np.array_equal(outs['Y'], x + wv), 'a symlink to a file in the folder is read', err[-500:])

    def refused(name, d, location, must, **kw):
        m = ext_model(d, location, **kw)
        rc, _, err = toplu('info', m, timeout=20)
        check(rc not in (0, None) and must in err and sanitizer_clean(err), f'external data {name} is refused',
              f'rc {rc}, wanted "{must}" in: {err[-500:]}')

    # a symlink pointing outside the model's folder (the secret is 16 bytes, the size W needs)
    outside = os.path.join(work, 'secret.bin')
    with open(outside, 'wb') as f:
        f.write(b'0123456789abcdef')
    d = folder('escape')
    os.symlink(outside, os.path.join(d, 'w.bin'))
    refused('symlinked outside the folder', d, 'w.bin', "leaves the model's directory")
    d = folder('escape_dir')
    os.symlink(work, os.path.join(d, 'up'))
    refused('through a symlinked folder', d, 'up/secret.bin', "leaves the model's directory")
    d = folder('passwd')
    os.symlink('/etc/passwd', os.path.join(d, 'w.bin'))
    refused('symlinked to /etc/passwd', d, 'w.bin', "leaves the model's directory", offset=0, length=16)
    d = folder('dotdot')
    refused("'../secret.bin'", d, '../secret.bin', "leaves the model's directory")
    refused('an absolute path', d, outside, "leaves the model's directory")
    d = folder('fifo')
    os.mkfifo(os.path.join(d, 'w.bin'))
    refused('a FIFO', d, 'w.bin', 'not a regular file')
    d = folder('dir')
    os.makedirs(os.path.join(d, 'w.bin'))
    refused('a directory', d, 'w.bin', 'not a regular file')
    d = folder('short')
    wv.tofile(os.path.join(d, 'w.bin'))
    refused('past the end of the file', d, 'w.bin', 'shorter than', offset=4)
    refused('at offset 2^63-1', d, 'w.bin', 'offset', offset=INT64_MAX)
    refused('at offset 2^64', d, 'w.bin', 'offset', offset=2**64)
    refused('at offset 12abc', d, 'w.bin', 'offset', offset='12abc')
    refused('with a wrong length', d, 'w.bin', 'length', length=12)
    refused('missing', d, 'nothere.bin', 'cannot open')


def case_model_file():
    for path, what in (('/dev/zero', 'a character device'),):
        rc, _, err = toplu('info', path, timeout=20)
        check(rc not in (0, None) and 'not a regular file' in err, f'model {path} ({what}) is refused', f'rc {rc}: {err[-300:]}')
    fifo = os.path.join(work, 'model.onnx')
    os.mkfifo(fifo)
    rc, _, err = toplu('info', fifo, timeout=20)
    check(rc not in (0, None) and 'not a regular file' in err, 'a FIFO model path is refused without hanging',
          f'rc {rc}: {err[-300:]}')
    rc, _, err = toplu('run', fifo, '--input', f'x={fifo}', '--output', os.path.join(work, 'o'), timeout=20)
    check(rc not in (0, None) and 'not a regular file' in err, 'run on a FIFO model path is refused without hanging',
          f'rc {rc}: {err[-300:]}')


def case_overflow():
    def refused(name, g, must, opset=13):
        path = save(g, os.path.join(work, name + '.onnx'), opset)
        rc, out, err = toplu('info', path, timeout=30)
        check(rc not in (0, None) and must in err and sanitizer_clean(err), f'{name} is refused',
              f'rc {rc}, wanted "{must}" in: {err[-600:]} {out[-300:]}')

    w = nh.from_array(np.ones((2, 1, 1, 1), np.float32), 'W')
    # Conv input dim INT64_MAX (spatial)
    g = h.make_graph([h.make_node('Conv', ['X', 'W'], ['Y'], pads=[1, 1, 1, 1])], 'c',
                     [h.make_tensor_value_info('X', T.FLOAT, ['N', 1, INT64_MAX, 4])],
                     [h.make_tensor_value_info('Y', T.FLOAT, None)], [w])
    refused('Conv input dim INT64_MAX', g, 'more than 2^40 elements')
    # a graph input declared that large is a bad model: exit 2, as for other invalid models (it was 1, "out of
    # memory", for info, plan and tune; a fresh user's finding of 2026-12-05)
    g = h.make_graph([h.make_node('Relu', ['X'], ['Y'])], 'r', [h.make_tensor_value_info('X', T.FLOAT, ['N', 2**40, 2**40])],
                     [h.make_tensor_value_info('Y', T.FLOAT, None)])
    p = save(g, os.path.join(work, 'huge_input.onnx'))
    for cmd in (['info', p], ['plan', p], ['tune', p, '--out', os.path.join(work, 'huge_tune')]):
        rc, _, err = toplu(*cmd, timeout=30)
        check(rc == 2 and "input 'X' has shape [N, 1099511627776, 1099511627776]: more than 2^40 elements" in err,
              f'toplu {cmd[0]} on an input declared past 2^40 elements: exit 2', f'rc {rc}: {err[-300:]}')
    # Conv group 2^62 (W's 4 channels per group x 2^62 wraps), and ConvTranspose's
    for op in ('Conv', 'ConvTranspose'):
        g = h.make_graph([h.make_node(op, ['X', 'W'], ['Y'], group=2**62)], 'c',
                         [h.make_tensor_value_info('X', T.FLOAT, ['N', 4, 4, 4])],
                         [h.make_tensor_value_info('Y', T.FLOAT, None)],
                         [nh.from_array(np.ones((4, 4, 1, 1), np.float32), 'W')])
        refused(f'{op} group 2^62', g, 'group')
    # ConvTranspose with a stride that overflows the output size
    g = h.make_graph([h.make_node('ConvTranspose', ['X', 'W'], ['Y'], strides=[2**62, 1])], 'c',
                     [h.make_tensor_value_info('X', T.FLOAT, ['N', 2, 4, 4])],
                     [h.make_tensor_value_info('Y', T.FLOAT, None)], [w])
    refused('ConvTranspose stride 2^62', g, 'too large')
    # Conv with a huge dilation
    g = h.make_graph([h.make_node('Conv', ['X', 'W'], ['Y'], dilations=[2**62, 1])], 'c',
                     [h.make_tensor_value_info('X', T.FLOAT, ['N', 1, 4, 4])],
                     [h.make_tensor_value_info('Y', T.FLOAT, None)], [nh.from_array(np.ones((2, 1, 3, 1), np.float32), 'W')])
    refused('Conv dilation 2^62', g, 'too large')
    # Reshape with a dim of 2^62 (and a -1 next to it)
    for shape in ([2**62, 2], [2**62, -1], [-1, 2**62, 4], [INT64_MAX, INT64_MAX]):
        g = h.make_graph([h.make_node('Reshape', ['X', 'S'], ['Y'])], 'r',
                         [h.make_tensor_value_info('X', T.FLOAT, [2, 4])],
                         [h.make_tensor_value_info('Y', T.FLOAT, None)],
                         [nh.from_array(np.array(shape, np.int64), 'S')])
        refused(f'Reshape of [2, 4] to {shape}', g, 'Reshape')
    # other schemas whose attributes or constant inputs multiply or add dims
    X = lambda *s: [h.make_tensor_value_info('X', T.FLOAT, list(s))]
    Y = [h.make_tensor_value_info('Y', T.FLOAT, None)]
    i64 = lambda n, a: nh.from_array(np.array(a, np.int64), n)
    for name, node, xs, inits, must in (
            ('Tile repeats 2^62', h.make_node('Tile', ['X', 'R'], ['Y']), X(2, 4), [i64('R', [2**62, 1])], 'more than 2^63'),
            ('Pad pads INT64_MAX', h.make_node('Pad', ['X', 'P'], ['Y']), X(2, 4), [i64('P', [INT64_MAX, 0, INT64_MAX, 0])],
             'do not fit'),
            ('Pad pads -INT64_MAX', h.make_node('Pad', ['X', 'P'], ['Y']), X(2, 4), [i64('P', [-INT64_MAX, 0, -INT64_MAX, 0])],
             'do not fit'),
            ('MaxPool pads INT64_MAX', h.make_node('MaxPool', ['X'], ['Y'], kernel_shape=[2, 2], pads=[INT64_MAX, 0, INT64_MAX, 0]),
             X(1, 1, 4, 4), [], 'too large'),
            ('Concat of inputs of INT64_MAX', h.make_node('Concat', ['X', 'X'], ['Y'], axis=0), X(INT64_MAX, 1), [], '2^40'),
            ('Expand to [2^62, 2^62]', h.make_node('Expand', ['X', 'S'], ['Y']), X(1, 1), [i64('S', [2**62, 2**62])], '2^40'),
            ('ConstantOfShape [INT64_MAX, INT64_MAX]', h.make_node('ConstantOfShape', ['S'], ['Y']), [],
             [i64('S', [INT64_MAX, INT64_MAX])], '2^40')):
        refused(name, h.make_graph([node], 'o', xs, Y, inits), must)
    # an output its constants put past 2^40 elements is a bad model: exit 2, as an input declared that large (it was
    # 1, "out of memory", a fresh user's finding of 2026-12-07)
    path = save(h.make_graph([h.make_node('Tile', ['X', 'R'], ['Y'], name='ti')], 'o', X(2, 4), Y,
                             [i64('R', [1, 2**40])]), os.path.join(work, 'tile_2_40.onnx'))
    rc, _, err = toplu('info', path, timeout=30)
    check(rc == 2 and "node 0 'ti' (Tile): output 0 would have shape [2, 4398046511104]: more than 2^40 elements" in err,
          'Tile repeats to 2^42 elements: exit 2, naming the node', f'rc {rc}: {err[-300:]}')
    # control bytes of names come out escaped: a name with a terminal escape and a newline no longer clears a
    # screen or forges a log line (a fresh user's finding of 2026-12-07)
    path = save(h.make_graph([h.make_node('Add', ['X', 'w\x1b[2J\nFAKE: all good'], ['Y'], name='n\x07ode')], 'o',
                             X(2, 4), Y), os.path.join(work, 'esc.onnx'))
    rc, _, err = toplu('info', path, timeout=30)
    check(rc == 2 and "node 0 'n\\x07ode' (Add): input 1 'w\\x1b[2J\\x0aFAKE: all good'" in err and
          '\x1b' not in err and '\x07' not in err and err.count('\n') == 1,
          'control bytes of names escaped in errors', f'rc {rc}: {err[-300:]!r}')
    # LRN's FLOPs with size 2^62 saturate instead of wrapping: the model is fine
    path = save(h.make_graph([h.make_node('LRN', ['X'], ['Y'], size=2**62)], 'l', X(1, 4, 2, 2), Y), os.path.join(work, 'lrn.onnx'))
    rc, _, err = toplu('info', path)
    check(rc == 0 and sanitizer_clean(err), 'LRN size 2^62: FLOPs do not overflow', err[-400:])


def case_arch():
    import json
    base = {'model_type': 'llama', 'architectures': ['LlamaForCausalLM'], 'num_hidden_layers': 32,
            'hidden_size': 4096, 'num_attention_heads': 32, 'vocab_size': 32000, 'intermediate_size': 11008,
            'max_position_embeddings': 4096}

    def plan(name, **over):
        path = os.path.join(work, name + '.json')
        with open(path, 'w') as f:
            json.dump({**base, **over}, f)
        return toplu('plan', '--arch', path, '--memory', '1000000000000', timeout=30)

    rc, out, err = plan('sane')
    check(rc == 0 and 'parameters' in out + err and sanitizer_clean(err), 'a Llama-2-7B-sized config plans', err[-300:])
    for name, over, must in (
            ('huge', {'num_hidden_layers': 4 * 10**9, 'hidden_size': 4 * 10**9, 'intermediate_size': 4 * 10**9,
                      'num_attention_heads': 1}, 'past 2^63'),
            ('huge_vocab', {'vocab_size': 2**62}, 'past 2^63'),
            ('huge_experts', {'num_local_experts': 2**40, 'model_type': 'mixtral'}, 'past 2^63'),
            ('huge_gpt2_positions', {'model_type': 'gpt2', 'max_position_embeddings': 2**62}, 'past 2^63'),
            ('huge_context', {'max_position_embeddings': 2**62}, 'more than 2^63 bytes'),
            # a real too large for int64_t (converting it was undefined: "hidden -9223372036854775808")
            ('real_1e300', {'hidden_size': 1e300}, '"hidden_size" must be a positive integer'),
            ('real_1e15', {'hidden_size': 1e15}, 'past 2^63')):
        rc, out, err = plan(name, **over)
        check(rc not in (0, None) and must in err and ' -' not in out and sanitizer_clean(err),
              f'config {name} is refused, not wrapped to negative sizes', f'rc {rc}: {err[-400:]} {out[-300:]}')


def case_sizes():
    here = os.path.dirname(os.path.abspath(__file__))
    X = lambda *s, name='X', t=T.FLOAT: h.make_tensor_value_info(name, t, list(s))
    Y = [h.make_tensor_value_info('Y', T.FLOAT, None)]
    i64 = lambda n, a: nh.from_array(np.array(a, np.int64), n)

    def model(name, nodes, xs, inits, opset=13, outs=None):
        g = h.make_graph(nodes if isinstance(nodes, list) else [nodes], name, xs, outs or Y, inits)
        return save(g, os.path.join(work, name + '.onnx'), opset)

    def refused(name, path, must, cmd='info'):
        rc, out, err = toplu(cmd, path, timeout=30) if cmd == 'info' else toplu(
            'run', path, '--output', os.path.join(work, 'out-' + name), '--quiet', timeout=30)
        check(rc not in (0, None) and must in err and sanitizer_clean(err), f'{name} is refused',
              f'rc {rc}, wanted "{must}" in: {err[-600:]} {out[-300:]}')

    # Split sizes that add up past 2^63 (they wrapped to -2, then "add up to -2")
    two = [X(name='A'), X(name='B')]
    refused('Split sizes [2^63-1, 2^63-1]', model('split_huge', h.make_node('Split', ['X', 's'], ['A', 'B']), [X(2, 4)],
            [i64('s', [INT64_MAX, INT64_MAX])], outs=two), 'past 2^63')
    refused('Split-11 split attribute [2^63-1, 3]', model('split_attr', h.make_node('Split', ['X'], ['A', 'B'],
            split=[INT64_MAX, 3]), [X(2, 4)], [], opset=11, outs=two), 'past 2^63')

    # Range whose i * delta passes the type's range although every value fits
    for dt, npt, (st, lim, d) in ((T.INT64, np.int64, (-2**63, INT64_MAX, 2**62)),
                                  (T.INT64, np.int64, (INT64_MAX, -2**63, -2**62)),
                                  (T.INT64, np.int64, (-5, INT64_MAX, 2**62 + 1)),
                                  (T.INT32, np.int32, (-2**31, 2**31 - 1, 2**30)),
                                  (T.INT32, np.int32, (2**31 - 1, -2**31, -2**31))):
        name = f'range_{np.dtype(npt).name}_{st}_{lim}_{d}'
        ins = [h.make_tensor_value_info('Z', T.FLOAT, [1])]
        path = model(name, [h.make_node('Range', ['s', 'l', 'd'], ['R']), h.make_node('Identity', ['Z'], ['Y'])], ins,
                     [nh.from_array(np.array(v, npt), k) for k, v in (('s', st), ('l', lim), ('d', d))],
                     outs=[h.make_tensor_value_info('R', dt, None), Y[0]])
        got, err = run(path, {'Z': np.zeros(1, np.float32)}, name)
        want = list(range(st, lim, d))
        check(got is not None and got['R'].tolist() == want and sanitizer_clean(err),
              f'Range({st}, {lim}, {d}) as {np.dtype(npt).name} is exact',
              f'wanted {want}, got {None if got is None else got["R"].tolist()}: {err[-500:]}')

    # LRN with size 2^62: the kernel's work estimate multiplied it out
    path = model('lrn_huge', h.make_node('LRN', ['X'], ['Y'], size=2**62, alpha=1.0, beta=1.0, bias=1.0), [X(1, 3, 2, 2)], [])
    xv = np.arange(12, dtype=np.float32).reshape(1, 3, 2, 2)
    got, err = run(path, {'X': xv}, 'lrn_huge')
    # window over all 3 channels, alpha / size = 2^-62: y = x / (1 + 2^-62 * sum) = x in float32
    check(got is not None and np.allclose(got['Y'], xv, rtol=1e-6) and sanitizer_clean(err),
          'LRN size 2^62 runs, the window clamped to the channels', err[-500:])

    # a zero dim beside dims that multiply past 2^40: no data, but the dims
    # wrapped int64 wherever they were multiplied
    for sh in ([2, INT64_MAX, 0], [2**62, 4, 0], [INT64_MAX, INT64_MAX, 0]):
        refused(f'ConstantOfShape {sh}', model(f'cos_{len(sh)}_{sh[0]}_{sh[1]}', [h.make_node('ConstantOfShape', ['S'], ['C']),
                h.make_node('Add', ['C', 'X'], ['Y'])], [X(1, 1, 1)], [i64('S', sh)]), '2^40')
        w = onnx.TensorProto(name='W', data_type=T.FLOAT, dims=sh)
        refused(f'an initializer of dims {sh}', model(f'init_{sh[0]}_{sh[1]}', h.make_node('Add', ['W', 'X'], ['Y']),
                [X(1, 1, 1)], [w]), '2^40')
        refused(f'a graph input of dims {sh}', model(f'input_{sh[0]}_{sh[1]}', h.make_node('Relu', ['X'], ['Y']), [X(*sh)], []),
                '2^40')
    # the same in a .npy header fed to a model with symbolic dims
    path = model('relu_sym', h.make_node('Relu', ['X'], ['Y']), [X('N', 'A', 'B')], [])
    for sh in ((2, INT64_MAX, 0), (2**62, 4, 0), (0, 2**62, 2**62)):
        npy = os.path.join(work, f'bad_{sh[0]}_{sh[1]}.npy')
        hdr = ("{'descr': '<f4', 'fortran_order': False, 'shape': (%d, %d, %d), }" % sh).encode()
        hdr += b' ' * (63 - (10 + len(hdr)) % 64) + b'\n'
        with open(npy, 'wb') as f:
            f.write(b'\x93NUMPY\x01\x00' + len(hdr).to_bytes(2, 'little') + hdr)
        rc, out, err = toplu('run', path, '--input', f'X={npy}', '--output', os.path.join(work, f'o-{sh[0]}'), '--quiet')
        check(rc not in (0, None) and '2^40' in err and sanitizer_clean(err), f'a .npy of shape {sh} is refused',
              f'rc {rc}: {err[-500:]}')

    # SpaceToDepth of C = 2^40 with H = W = 0: C * blocksize^2 passed 2^63
    refused('SpaceToDepth of [1, 2^40, 0, 0], blocksize 65536', model('s2d_zero', h.make_node('SpaceToDepth', ['X'], ['Y'],
            blocksize=65536), [X(1, 2**40, 0, 0)], []), 'more than 2^63')

    # pooling with three kernel dims of 2^31 (padded, a huge stride: one
    # output element): the FLOPs multiplied past 2^63; they saturate, and
    # the one window holds the one input element
    K = 2**31
    for op, extra in (('MaxPool', {}), ('AveragePool', {}), ('LpPool', {'p': 2})):
        path = model(f'{op}_bigkernel', h.make_node(op, ['X'], ['Y'], kernel_shape=[K, K, K], pads=[K - 1] * 6,
                     strides=[2**40] * 3, **extra), [X(1, 1, 1, 1, 1)], [])
        rc, out, err = toplu('info', path, timeout=30)
        check(rc == 0 and 'FLOPs per sample: 9,223,372,036,854,775,807' in out and sanitizer_clean(err),
              f'{op} with kernel [2^31]*3: FLOPs saturate', f'rc {rc}: {err[-400:]} {out[-400:]}')
        got, err = run(path, {'X': np.full((1, 1, 1, 1, 1), 3.0, np.float32)}, f'{op}_bigkernel')
        check(got is not None and got['Y'].tolist() == [[[[[3.0]]]]] and sanitizer_clean(err),
              f'{op} with kernel [2^31]*3 runs', f'{None if got is None else got["Y"].tolist()}: {err[-400:]}')

    # fuzz finding F3: AveragePool, kernel [2^32, 3], SAME_UPPER, on 5 x 5:
    # counting the window's taps one by one took 12 s to plan (2^32 per
    # output) and as long again to run; the taps inside the input are now
    # found in O(1).  Dim 0's window covers all 5 rows, dim 1's is 3 wide.
    f3 = os.path.join(here, 'data', 'hardening', 'fuzz_F3_avgpool_kernel_2e32.onnx')
    rc, out, err = toplu('info', f3, timeout=60)
    check(rc == 0 and 'plan at batch 1' in out and sanitizer_clean(err), 'AveragePool kernel [2^32, 3] plans (fuzz F3)',
          f'rc {rc}: {err[-400:]}')
    xv = np.arange(25, dtype=np.float32).reshape(1, 1, 5, 5)
    want = np.stack([xv[0, 0, :, max(0, j - 1):j + 2].mean() for j in range(5)])
    got, err = run(f3, {'x': xv}, 'f3')
    check(got is not None and got['y'].shape == (1, 1, 5, 5) and np.allclose(got['y'], np.broadcast_to(want, (1, 1, 5, 5)),
                                                                            rtol=1e-6) and sanitizer_clean(err),
          'AveragePool kernel [2^32, 3] runs and matches numpy (fuzz F3)',
          f'wanted rows of {want.tolist()}, got {None if got is None else got["y"].tolist()}: {err[-400:]}')
    # the same with 2^40 taps: it would have taken hours (the 60 s hang guard)
    m = onnx.load(f3)
    for a in m.graph.node[0].attribute:
        if a.name == 'kernel_shape':
            a.ints[0] = 2**40
    f3b = os.path.join(work, 'f3_2e40.onnx')
    onnx.save(m, f3b)
    got, err = run(f3b, {'x': xv}, 'f3b')
    check(got is not None and np.allclose(got['y'], np.broadcast_to(want, (1, 1, 5, 5)), rtol=1e-6) and sanitizer_clean(err),
          'AveragePool kernel [2^40, 3] plans and runs', err[-400:])

    # Resize-18 keep_aspect_ratio_policy: sizes 2^63-1 over a dim of 1 give
    # a scale whose output size, a double, was converted past int64
    for pol in ('not_larger', 'not_smaller'):
        refused(f'Resize {pol} to sizes 2^63-1', model(f'resize_{pol}', h.make_node('Resize', ['X', '', '', 's'], ['Y'],
                keep_aspect_ratio_policy=pol, axes=[2, 3]), [X(1, 1, 1, 1)], [i64('s', [INT64_MAX, INT64_MAX])], opset=18),
                'out of range')

    # Slice with extreme starts, ends and steps, on a graph input and on a
    # constant (shape arithmetic), against numpy
    xv = np.arange(10, dtype=np.float32).reshape(2, 5)
    cv = np.arange(1, 6, dtype=np.int64)
    ext = (-2**63, -INT64_MAX, -1, 0, 2, INT64_MAX)
    k = 0
    for st in ext:
        for en in ext:
            for sp in (-2**63, -INT64_MAX, -2, 1, 3, INT64_MAX):
                if sp < 0 and st < -5:
                    # a start before the axis with a negative step: ONNX's text
                    # clamps it to 0 (one element), numpy to empty; not a size question
                    continue
                k += 1
                ref = xv[:, slice(max(min(st, 99), -99), max(min(en, 99), -99), max(min(sp, 99), -99))]
                cref = cv[slice(max(min(st, 99), -99), max(min(en, 99), -99), max(min(sp, 99), -99))]
                path = model(f'slice_{k}', [h.make_node('Slice', ['X', 's', 'e', 'a', 'p'], ['Y']),
                                            h.make_node('Slice', ['C', 's', 'e', 'z', 'p'], ['S']),
                                            h.make_node('Shape', ['S'], ['N'])], [X(2, 5)],
                             [i64('s', [st]), i64('e', [en]), i64('a', [1]), i64('z', [0]), i64('p', [sp]), i64('C', cv)],
                             outs=[Y[0], h.make_tensor_value_info('S', T.INT64, None),
                                   h.make_tensor_value_info('N', T.INT64, None)])
                got, err = run(path, {'X': xv}, f'slice_{k}')
                ok = (got is not None and sanitizer_clean(err) and got['Y'].shape == ref.shape and
                      np.array_equal(got['Y'], ref) and got['S'].tolist() == cref.tolist() and
                      got['N'].tolist() == [len(cref)])
                if not ok:
                    check(False, f'Slice [{st}:{en}:{sp}] matches numpy',
                          f'wanted {ref.tolist()} / {cref.tolist()}, got '
                          f'{None if got is None else (got["Y"].tolist(), got["S"].tolist())}: {err[-400:]}')
    check(True, f'{k} Slices with starts, ends and steps out to INT64_MIN/MAX checked against numpy')

    # external data located at the model's folder itself ("."): fuzz
    # finding F2 (a 2^32-element tensor; once a 16 GiB malloc)
    d = os.path.join(work, 'f2')
    os.makedirs(d, exist_ok=True)
    src = os.path.join(here, 'data', 'hardening', 'fuzz_F2_external_location_dir.onnx')
    dst = os.path.join(d, 'm.onnx')
    with open(src, 'rb') as f, open(dst, 'wb') as g:
        g.write(f.read())
    refused('external data located at the model\'s folder (fuzz F2)', dst, "is not a regular file (it is the model's folder)")


def case_reduce_axes_attr():
    # ReduceSum at opset 13 with axes as an attribute (ONNX Runtime refuses it): toplu ignored it and summed
    # every axis, a scalar for a declared [3] (fresh-user finding F19 of issue 13).  The same with axes as input 1
    # is the real thing and still runs.
    import onnx
    from onnx import TensorProto as T, helper
    vi = helper.make_tensor_value_info
    g = helper.make_graph([helper.make_node('ReduceSum', ['x'], ['y'], keepdims=0, axes=[0])], 'rs13',
                          [vi('x', T.FLOAT, ['N', 3])], [vi('y', T.FLOAT, [3])])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid('', 13)])
    m.ir_version = 8
    bad = os.path.join(work, 'rs13_attr.onnx')
    onnx.save(m, bad)
    rc, _, err = toplu('info', bad)
    check(rc == 2 and "'ReduceSum_0'" in err and 'takes axes as input 1' in err,
          'ReduceSum opset 13 with an axes attribute is refused naming the node', f'rc {rc}: {err[-300:]}')
    g = helper.make_graph([helper.make_node('ReduceSum', ['x', 'axes'], ['y'], keepdims=0)], 'rs13in',
                          [vi('x', T.FLOAT, ['N', 3])], [vi('y', T.FLOAT, [3])],
                          [helper.make_tensor('axes', T.INT64, [1], [0])])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid('', 13)])
    m.ir_version = 8
    good = os.path.join(work, 'rs13_input.onnx')
    onnx.save(m, good)
    x = np.arange(1, 7, dtype=np.float32).reshape(2, 3)
    np.save(os.path.join(work, 'rs13_x.npy'), x)
    out = os.path.join(work, 'rs13_out')
    rc, _, err = toplu('run', good, '--input', f'x={work}/rs13_x.npy', '--output', out, '--batch-size', 'all', '-q')
    y = np.load(os.path.join(out, 'y.npy')) if rc == 0 else None
    check(y is not None and y.tolist() == [5, 7, 9], 'ReduceSum opset 13 with axes as input sums axis 0', f'rc {rc}: {err[-300:]} {y}')


def case_bad_index():
    # Gather with out-of-range indices: the error named the last bad index's value at the first bad one's
    # place ("index -100 (at 2)" for ids [0, 0, 100, -100]; fresh-user finding of 2026-12-05).  Both the value
    # and the place are the first bad index's now; in-range negative indices still count from the end.
    import onnx
    from onnx import TensorProto as T, helper
    vi = helper.make_tensor_value_info
    table = np.arange(20, dtype=np.float32).reshape(10, 2)
    g = helper.make_graph([helper.make_node('Gather', ['table', 'ids'], ['y'], axis=0)], 'emb',
                          [vi('ids', T.INT64, ['N', 2])], [vi('y', T.FLOAT, ['N', 2, 2])],
                          [nh.from_array(table, 'table')])
    path = save(g, os.path.join(work, 'gather_emb.onnx'))
    # (toplu run retries a failed batch row by row, so the place is within the failing row)
    for ids, want in (([[0, 0], [100, -100]], ['row 1', 'index 100 (at 0)']),
                      ([[0, 9], [10, -11]], ['row 1', 'index 10 (at 0)']),
                      ([[0, -11], [10, 3]], ['row 0', 'index -11 (at 1)', 'row 1', 'index 10 (at 0)'])):
        y, err = run(path, {'ids': np.array(ids, dtype=np.int64)}, 'gather_bad')
        check(all(w in err for w in want) and 'out of range for a dim of 10' in err and "'Gather_0'" in err,
              f'Gather ids {ids}: the error names the first bad index, value and place ({", ".join(want)})',
              err[-400:])
    y, err = run(path, {'ids': np.array([[0, -1], [9, -10]], dtype=np.int64)}, 'gather_ok')
    check(y is not None and np.array_equal(y['y'], table[[[0, 9], [9, 0]]]), 'Gather with negative ids in range',
          err[-300:])


CASES = {'fold_conv': case_fold_conv, 'extdata': case_extdata, 'model_file': case_model_file,
         'overflow': case_overflow, 'arch': case_arch,
         'sizes': case_sizes, 'reduce_axes_attr': case_reduce_axes_attr, 'bad_index': case_bad_index}
if args.case not in CASES:
    sys.exit(f'unknown case {args.case}; cases: {", ".join(CASES)}')
CASES[args.case]()
print(f'{args.case}: {fails} failure(s)')
sys.exit(1 if fails else 0)
