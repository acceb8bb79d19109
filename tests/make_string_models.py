"""tests/make_string_models.py - small ONNX models on string tensors for
tests/test_strings.c, written with /usr/bin/python3's onnx (Debian's
python3-onnx).

Usage: make_string_models.py OUT_DIR
Each model is OUT_DIR/<name>.onnx; what each computes is checked in
tests/test_strings.c.
"""
import os
import sys

import onnx
from onnx import TensorProto as T
from onnx import helper as h

out = sys.argv[1]
os.makedirs(out, exist_ok=True)


def save(name, nodes, inputs, outputs, inits=(), opset=13):
    g = h.make_graph(nodes, name, inputs, outputs, initializer=list(inits))
    m = h.make_model(g, opset_imports=[h.make_opsetid('', opset)])
    m.ir_version = 8
    onnx.checker.check_model(m)
    onnx.save(m, os.path.join(out, name + '.onnx'))


S = T.STRING
# StringNormalizer: upper case, case-insensitive stopwords (one with a non-ASCII letter)
save('norm_upper', [h.make_node('StringNormalizer', ['x'], ['y'], name='norm', case_change_action='UPPER',
                                is_case_sensitive=0, stopwords=['the', 'ÄPFEL'])],
     [h.make_tensor_value_info('x', S, ['C'])], [h.make_tensor_value_info('y', S, ['K'])])
# StringNormalizer: lower case, case-sensitive stopwords, [1, C]
save('norm_lower', [h.make_node('StringNormalizer', ['x'], ['y'], name='norm', case_change_action='LOWER',
                                is_case_sensitive=1, stopwords=['Monday'], locale='en_US')],
     [h.make_tensor_value_info('x', S, [1, 'C'])], [h.make_tensor_value_info('y', S, [1, 'K'])])
# float -> string -> float, both returned
save('cast_round', [h.make_node('Cast', ['x'], ['s'], name='to_str', to=S),
                    h.make_node('Cast', ['s'], ['z'], name='to_float', to=T.FLOAT)],
     [h.make_tensor_value_info('x', T.FLOAT, ['N'])],
     [h.make_tensor_value_info('s', S, ['N']), h.make_tensor_value_info('z', T.FLOAT, ['N'])])
# string -> double, string -> int64 (CastLike), int32 -> string
save('cast_parse', [h.make_node('Cast', ['x'], ['d'], name='to_double', to=T.DOUBLE),
                    h.make_node('CastLike', ['x', 'like'], ['i'], name='to_int'),
                    h.make_node('Cast', ['n'], ['ns'], name='int_to_str', to=S)],
     [h.make_tensor_value_info('x', S, ['N']), h.make_tensor_value_info('n', T.INT32, ['M'])],
     [h.make_tensor_value_info('d', T.DOUBLE, ['N']), h.make_tensor_value_info('i', T.INT64, ['N']),
      h.make_tensor_value_info('ns', S, ['M'])],
     inits=[h.make_tensor('like', T.INT64, [1], [0])], opset=15)
# moves: Concat with a string initializer, Gather, Reshape, Identity of an input
save('moves', [h.make_node('Concat', ['x', 'c'], ['xc'], name='cat', axis=0),
               h.make_node('Gather', ['xc', 'idx'], ['g'], name='pick', axis=0),
               h.make_node('Reshape', ['g', 'shape'], ['y'], name='reshape'),
               h.make_node('Identity', ['x'], ['same'], name='same')],
     [h.make_tensor_value_info('x', S, [2])],
     [h.make_tensor_value_info('y', S, [1, 3]), h.make_tensor_value_info('same', S, [2])],
     inits=[h.make_tensor('c', S, [1], ['ünï ☃'.encode()]), h.make_tensor('idx', T.INT64, [3], [2, 0, 2]),
            h.make_tensor('shape', T.INT64, [2], [1, 3])])
# a string constant folded through Cast: the plan holds the result
save('const_fold', [h.make_node('Constant', [], ['k'], name='k', value_strings=['2.5', '-INF']),
                    h.make_node('Cast', ['k'], ['y'], name='parse', to=T.FLOAT)],
     [], [h.make_tensor_value_info('y', T.FLOAT, [2])])
# an op that does not take strings
save('transpose', [h.make_node('Transpose', ['x'], ['y'], name='flip')],
     [h.make_tensor_value_info('x', S, [2, 3])], [h.make_tensor_value_info('y', S, [3, 2])])


# malformed string initializers (not checked with onnx.checker): the loader refuses them
def bad(name, fill):
    t = onnx.TensorProto(name='c', data_type=S, dims=[2])
    fill(t)
    g = h.make_graph([h.make_node('Identity', ['c'], ['y'], name='same')], name, [],
                     [h.make_tensor_value_info('y', S, [2])], initializer=[t])
    m = h.make_model(g, opset_imports=[h.make_opsetid('', 13)])
    m.ir_version = 8
    onnx.save(m, os.path.join(out, name + '.onnx'))


bad('bad_raw', lambda t: setattr(t, 'raw_data', b'ab'))          # strings cannot be raw_data
bad('bad_count', lambda t: t.string_data.extend([b'only one']))   # 1 string for dims [2]
bad('bad_nul', lambda t: t.string_data.extend([b'a\x00b', b'c']))  # a NUL inside a string

# sequences of strings (main's sequence lowering): a sequence output, and ConcatFromSequence
save('seq', [h.make_node('SequenceConstruct', ['x', 'c'], ['s'], name='make'),
             h.make_node('ConcatFromSequence', ['s'], ['y'], name='join', axis=0)],
     [h.make_tensor_value_info('x', S, [2])],
     [h.make_tensor_sequence_value_info('s', S, None), h.make_tensor_value_info('y', S, [3])],
     inits=[h.make_tensor('c', S, [1], [b'z'])], opset=13)
