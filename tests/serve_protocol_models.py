"""Tiny ONNX models for tests/test_serve_protocol.c: one Identity graph per
KServe v2 datatype (input x of that type, shape [N, 3] -> output y, same),
so the protocol codec can be checked for dtypes no real model has.

usage: serve_protocol_models.py DIR   (writes DIR/identity_<dtype>.onnx)
"""
import os
import sys

import onnx
from onnx import TensorProto, helper

TYPES = {
    'bool': TensorProto.BOOL, 'uint8': TensorProto.UINT8, 'uint16': TensorProto.UINT16,
    'uint32': TensorProto.UINT32, 'uint64': TensorProto.UINT64, 'int8': TensorProto.INT8,
    'int16': TensorProto.INT16, 'int32': TensorProto.INT32, 'int64': TensorProto.INT64,
    'float16': TensorProto.FLOAT16, 'float32': TensorProto.FLOAT, 'float64': TensorProto.DOUBLE,
}


def main():
    out = sys.argv[1]
    os.makedirs(out, exist_ok=True)
    for name, t in TYPES.items():
        x = helper.make_tensor_value_info('x', t, ['N', 3])
        y = helper.make_tensor_value_info('y', t, ['N', 3])
        g = helper.make_graph([helper.make_node('Identity', ['x'], ['y'])], f'identity_{name}', [x], [y])
        m = helper.make_model(g, opset_imports=[helper.make_opsetid('', 13)], producer_name='serve_protocol_models')
        m.ir_version = 8
        onnx.checker.check_model(m)
        onnx.save(m, os.path.join(out, f'identity_{name}.onnx'))
    # two inputs, two outputs: for missing/duplicate inputs, row agreement, output selection
    a = helper.make_tensor_value_info('a', TensorProto.FLOAT, ['N', 3])
    b = helper.make_tensor_value_info('b', TensorProto.INT64, ['N', 2])
    ya = helper.make_tensor_value_info('ya', TensorProto.FLOAT, ['N', 3])
    yb = helper.make_tensor_value_info('yb', TensorProto.INT64, ['N', 2])
    g = helper.make_graph([helper.make_node('Identity', ['a'], ['ya']), helper.make_node('Identity', ['b'], ['yb'])],
                          'two', [a, b], [ya, yb])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid('', 13)], producer_name='serve_protocol_models')
    m.ir_version = 8
    onnx.checker.check_model(m)
    onnx.save(m, os.path.join(out, 'two.onnx'))
    # y = Reshape(x, s): a shape from the request's data
    x = helper.make_tensor_value_info('x', TensorProto.FLOAT, [2, 2])
    sh = helper.make_tensor_value_info('s', TensorProto.INT64, [2])
    y = helper.make_tensor_value_info('y', TensorProto.FLOAT, ['A', 'B'])
    g = helper.make_graph([helper.make_node('Reshape', ['x', 's'], ['y'])], 'reshape_s', [x, sh], [y])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid('', 13)], producer_name='serve_protocol_models')
    m.ir_version = 8
    onnx.checker.check_model(m)
    onnx.save(m, os.path.join(out, 'reshape_s.onnx'))
    # an input of unknown rank (no shape at all): its metadata
    x = helper.make_tensor_value_info('x', TensorProto.FLOAT, None)
    y = helper.make_tensor_value_info('y', TensorProto.FLOAT, None)
    g = helper.make_graph([helper.make_node('Identity', ['x'], ['y'])], 'any_rank', [x], [y])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid('', 13)], producer_name='serve_protocol_models')
    m.ir_version = 8  # (onnx 1.12's checker wants a shape on graph inputs; ONNX Runtime loads it without)
    onnx.save(m, os.path.join(out, 'any_rank.onnx'))


if __name__ == '__main__':
    main()
