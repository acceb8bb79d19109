#!/usr/bin/python3
"""fuzz/make-seeds.py - write the committed hand-made seeds under fuzz/seeds/<target>/.

Run with Debian's /usr/bin/python3 (numpy, onnx, PIL).  The files are
committed (a few hundred KB in all), so running this is only needed to change
them; scripts/fuzz.sh adds the big inputs (real models, node tests, photos)
to the generated corpora by reference, see fuzz/make-corpus.sh.
"""
import io
import json
import os
import sys

import numpy as np
import onnx
from onnx import TensorProto as T
from onnx import helper, numpy_helper
from PIL import Image

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), 'seeds')


def out(target, name, data):
    d = os.path.join(ROOT, target)
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, name), 'wb') as f:
        f.write(data if isinstance(data, bytes) else data.encode())


def model(name, nodes, inputs, outputs, inits=(), opset=13):
    g = helper.make_graph(nodes, name, inputs, outputs, initializer=list(inits))
    m = helper.make_model(g, opset_imports=[helper.make_opsetid('', opset)], ir_version=8)
    out('model', name + '.onnx', m.SerializeToString())


def vi(name, dt, shape):
    return helper.make_tensor_value_info(name, dt, shape)


def models():
    rng = np.random.default_rng(1)
    w = numpy_helper.from_array(rng.standard_normal((8, 3, 3, 3)).astype(np.float32), 'w')
    b = numpy_helper.from_array(rng.standard_normal((8,)).astype(np.float32), 'b')
    model('conv_relu', [helper.make_node('Conv', ['x', 'w', 'b'], ['c'], pads=[1, 1, 1, 1]),
                        helper.make_node('Relu', ['c'], ['y'])],
          [vi('x', T.FLOAT, ['N', 3, 8, 8])], [vi('y', T.FLOAT, ['N', 8, 8, 8])], [w, b])
    # A Conv of two constants (folded at load) feeding a node with a graph input (issue 14, item 1).
    cx = numpy_helper.from_array(rng.standard_normal((1, 3, 6, 6)).astype(np.float32), 'cx')
    model('conv_folded', [helper.make_node('Conv', ['cx', 'w'], ['c']),
                          helper.make_node('Add', ['c', 'x'], ['y'])],
          [vi('x', T.FLOAT, ['N', 8, 4, 4])], [vi('y', T.FLOAT, ['N', 8, 4, 4])], [cx, w])
    shape = numpy_helper.from_array(np.array([0, -1], np.int64), 'shape')
    gw = numpy_helper.from_array(rng.standard_normal((48, 10)).astype(np.float32), 'gw')
    model('reshape_gemm', [helper.make_node('Reshape', ['x', 'shape'], ['r']),
                           helper.make_node('Gemm', ['r', 'gw'], ['g']),
                           helper.make_node('Softmax', ['g'], ['y'], axis=1)],
          [vi('x', T.FLOAT, ['N', 3, 4, 4])], [vi('y', T.FLOAT, ['N', 10])], [shape, gw])
    model('pool_concat', [helper.make_node('MaxPool', ['x'], ['p'], kernel_shape=[2, 2], strides=[2, 2]),
                          helper.make_node('GlobalAveragePool', ['x'], ['a']),
                          helper.make_node('Resize', ['a', '', 'scales'], ['ra'], mode='nearest'),
                          helper.make_node('Concat', ['p', 'ra'], ['y'], axis=1)],
          [vi('x', T.FLOAT, ['N', 2, 4, 4])], [vi('y', T.FLOAT, ['N', 4, 2, 2])],
          [numpy_helper.from_array(np.array([1, 1, 2, 2], np.float32), 'scales')])
    # Shape arithmetic resolved per batch.
    model('shape_chain', [helper.make_node('Shape', ['x'], ['s']),
                          helper.make_node('Gather', ['s', 'i0'], ['n'], axis=0),
                          helper.make_node('Unsqueeze', ['n', 'ax'], ['n1']),
                          helper.make_node('Concat', ['n1', 'm1'], ['t'], axis=0),
                          helper.make_node('Reshape', ['x', 't'], ['y'])],
          [vi('x', T.FLOAT, ['N', 2, 3])], [vi('y', T.FLOAT, ['N', 6])],
          [numpy_helper.from_array(np.array(0, np.int64), 'i0'),
           numpy_helper.from_array(np.array([0], np.int64), 'ax'),
           numpy_helper.from_array(np.array([-1], np.int64), 'm1')])
    # int8: QuantizeLinear -> DequantizeLinear.
    model('quant', [helper.make_node('QuantizeLinear', ['x', 'sc', 'zp'], ['q']),
                    helper.make_node('DequantizeLinear', ['q', 'sc', 'zp'], ['y'])],
          [vi('x', T.FLOAT, ['N', 4])], [vi('y', T.FLOAT, ['N', 4])],
          [numpy_helper.from_array(np.array(0.1, np.float32), 'sc'),
           numpy_helper.from_array(np.array(3, np.uint8), 'zp')])
    # External data (the file is not there: a load from a file must say so).
    ext = numpy_helper.from_array(np.ones((4,), np.float32), 'e')
    ext.ClearField('raw_data')
    ext.data_location = T.EXTERNAL
    for k, v in (('location', 'weights.bin'), ('offset', '0'), ('length', '16')):
        e = ext.external_data.add()
        e.key, e.value = k, v
    model('external', [helper.make_node('Add', ['x', 'e'], ['y'])],
          [vi('x', T.FLOAT, ['N', 4])], [vi('y', T.FLOAT, ['N', 4])], [ext])


def npys():
    def save(name, a, **kw):
        f = io.BytesIO()
        np.lib.format.write_array(f, a, **kw)
        out('npy', name, f.getvalue())
    save('f32_2x4.npy', np.arange(8, dtype=np.float32).reshape(2, 4))
    save('i64_3x2.npy', np.arange(6, dtype=np.int64).reshape(3, 2))
    save('f16_2x4.npy', np.arange(8, dtype=np.float16).reshape(2, 4))
    save('f64_be_2x4.npy', np.arange(8, dtype='>f8').reshape(2, 4))
    save('bool_2x2.npy', np.array([[True, False], [False, True]]))
    save('u8_1x4x4x3.npy', np.arange(48, dtype=np.uint8).reshape(1, 4, 4, 3))
    save('scalar.npy', np.array(3.5, np.float32))
    save('empty_0x4.npy', np.zeros((0, 4), np.float32))
    save('nan_2x4.npy', np.array([[np.nan, 1, 2, 3], [np.inf, -np.inf, 0, 1]], np.float32))
    save('v2_2x4.npy', np.ones((2, 4), np.float32), version=(2, 0))
    save('fortran_4x2.npy', np.asfortranarray(np.ones((4, 2), np.float32)))
    save('i32_rank3.npy', np.arange(24, dtype=np.int32).reshape(2, 3, 4))


def texts():
    out('csv', 'plain.csv', '1,2,3,4\n5,6,7,8\n')
    out('csv', 'header.csv', 'a,b,c,d\n1,2,3,4\n0.5,-1e3,inf,nan\n')
    out('csv', 'index_header.csv', '0,1,2,3\n1,2,3,4\n')
    out('csv', 'crlf_bom.csv', '\ufeffa,b\r\n1,2\r\n\r\n3,4\r\n')
    out('csv', 'odd.csv', '1,,3,4\n0x10,1e400,-0,+5\n"1","2",3,4\n1;2;3;4\n1\t2\t3\t4\n')
    out('csv', 'k.csv', '1,2\n3,4\n-9223372036854775808,9223372036854775807\n1.5,2.5\n')
    out('jsonl', 'two.jsonl', '{"x": [1, 2, 3, 4], "k": [1, 2]}\n{"x": [0.5, -1, 1e30, 0], "k": [-1, 3]}\n')
    out('jsonl', 'one.jsonl', '{"x": [1, 2, 3, 4]}\n\n{"x": [5, 6, 7, 8]}\n')
    out('jsonl', 'other_key.jsonl', '{"v": [1, 2, 3, 4]}\n{"v": [[1, 2], [3, 4]]}\n')
    out('jsonl', 'odd.jsonl', '{"x": [1, 2, 3], "k": [1.5, null]}\n{"x": "abc"}\n[1, 2]\n{"x": [1e999, 2, 3, 4]}\n'
        '{"x": [true, false, 1, 2], "k": [9223372036854775807, -9223372036854775808]}\n{"x\\u0000": 1}\n')
    jobs = [
        {'model': 'm.onnx', 'input': 'x.npy', 'output': 'out.jsonl', 'batch_size': 8},
        {'model': 'm.onnx', 'inputs': {'x': 'a.csv', 'k': 'b.jsonl'}, 'output': 'out/', 'batch_size': 'auto',
         'preprocess': 'resize=224x224,scale=1/255', 'postprocess': 'softmax,topk=5', 'labels': 'l.txt',
         'workers': 2, 'prefetch': 0, 'infer_workers': 2, 'threads': 1, 'shard': '1/4', 'resume': True,
         'fail_fast': False, 'errors': 'e.jsonl', 'checkpoint_every': 0.5, 'tune': 't.json',
         'progress': 'lines', 'csv_header': 'no'},
        {'model': '/abs/m.onnx', 'input': ['x=a.npy', 'k=b.npy'], 'output': 'r.sqlite', 'batch_size': 'all'},
    ]
    for i, j in enumerate(jobs):
        out('jobfile', 'job%d.json' % i, json.dumps(j, indent=1))
    out('jobfile', 'bad.json', '{"model": "m.onnx", "model": "n.onnx", "batch_size": 8.7, "unknown": 1}')


def configs():
    """serveconfig: model configurations as config.pbtxt and config.json (docs/serve.md)."""
    out('serveconfig', 'densenet.pbtxt',
        'name: "densenet_onnx"\nplatform: "onnxruntime_onnx"\nmax_batch_size : 0\n'
        'input [ { name: "data_0" data_type: TYPE_FP32 format: FORMAT_NCHW dims: [ 3, 224, 224 ]\n'
        '  reshape { shape: [ 1, 3, 224, 224 ] } } ]\n'
        'output [ { name: "fc6_1" data_type: TYPE_FP32 dims: [ 1000 ] label_filename: "labels.txt" } ]\n')
    out('serveconfig', 'dynamic.pbtxt',
        '# batched\nname: "cls"\nmax_batch_size: 16\n'
        'dynamic_batching {\n  preferred_batch_size: [ 4, 8 ]\n  max_queue_delay_microseconds: 100\n'
        '  priority_levels: 2\n  default_priority_level: 1\n'
        '  default_queue_policy { timeout_action: DELAY default_timeout_microseconds: 5000 '
        'allow_timeout_override: true max_queue_size: 10 }\n'
        '  priority_queue_policy { key: 2 value: { max_queue_size: 3 } }\n}\n'
        'instance_group [ { count: 2, kind: KIND_CPU } ]\nresponse_cache < enable: 1 >;\n'
        'version_policy: { specific: { versions: 1 versions: [ 0x3 ] } }\n'
        "model_warmup { name: 'w' batch_size: 4 inputs { key: \"x\" value: { data_type: 11 dims: 3 "
        'random_data: true } } }\n'
        'parameters { key: "qdq_int8_all" value: { string_value: "tr\\x75e" } }\n')
    out('serveconfig', 'cls.json', json.dumps({
        'name': 'cls', 'max_batch_size': 32,
        'dynamic_batching': {'preferred_batch_size': [8, 16], 'max_queue_delay_microseconds': '5000',
                             'priority_levels': 2, 'default_priority_level': 2,
                             'priority_queue_policy': {'1': {'max_queue_size': 16}}},
        'instance_group': [{'count': 2, 'kind': 'KIND_CPU'}],
        'input': [{'name': 'x', 'data_type': 'TYPE_FP32', 'dims': [3, 48, -1]}]}, indent=1))
    out('serveconfig', 'bad.pbtxt', 'name: "m"\nmax_batch_size 8\ninput { dims: [1, 2 }\nname: "\\q\n')


def images():
    rng = np.random.default_rng(2)
    rgb = Image.fromarray(rng.integers(0, 255, (12, 16, 3), dtype=np.uint8))
    def save(name, im, fmt, **kw):
        f = io.BytesIO()
        im.save(f, fmt, **kw)
        out('image', name, f.getvalue())
    save('rgb.png', rgb, 'PNG')
    save('gray.png', rgb.convert('L'), 'PNG')
    save('rgba.png', rgb.convert('RGBA'), 'PNG')
    save('palette.png', rgb.convert('P'), 'PNG')
    save('gray16.png', Image.fromarray((np.arange(64, dtype=np.uint16).reshape(8, 8) * 1000)), 'PNG')
    save('rgb.jpg', rgb, 'JPEG', quality=80)
    save('gray.jpg', rgb.convert('L'), 'JPEG')
    save('progressive.jpg', rgb.resize((40, 30)), 'JPEG', progressive=True)
    save('cmyk.jpg', rgb.convert('CMYK'), 'JPEG')
    save('tiny.png', Image.new('RGB', (1, 1)), 'PNG')


if __name__ == '__main__':
    models()
    npys()
    texts()
    images()
    configs()
    print('seeds written to', ROOT, file=sys.stderr)
