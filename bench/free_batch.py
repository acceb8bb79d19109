#!/usr/bin/python3
"""bench/free_batch.py - copy a model whose file fixes the batch dim to 1 with that dim freed.

    free_batch.py IN.onnx OUT.onnx

For ONNX Runtime's side of the benchmark on MNIST: graph inputs and outputs get
dim 0 = 'N', constant Reshape targets [1, ...] applied to activations become
[-1, ...], and the stale intermediate shapes (value_info) are dropped.  On the
8 digits of ../shared/fixtures/mnist, ONNX Runtime on the copy at batch 8 gives
the same logits as on the original one row at a time.
"""
import sys

import numpy as np
import onnx
from onnx import numpy_helper


def free_batch(model):
    """Change the model in place; returns how many Reshape targets changed."""
    g = model.graph
    inits = {t.name: t for t in g.initializer}
    weights = set(inits)
    for v in list(g.input) + list(g.output):
        dims = v.type.tensor_type.shape.dim
        if len(dims) and dims[0].HasField('dim_value') and dims[0].dim_value == 1:
            dims[0].ClearField('dim_value')
            dims[0].dim_param = 'N'
    changed = 0
    for n in g.node:
        if n.op_type != 'Reshape' or n.input[0] in weights or n.input[1] not in inits:
            continue
        shape = numpy_helper.to_array(inits[n.input[1]]).copy()
        if shape.size and shape[0] == 1:
            shape[0] = -1
            inits[n.input[1]].CopyFrom(numpy_helper.from_array(shape.astype(np.int64), n.input[1]))
            changed += 1
    del g.value_info[:]
    return changed


def main():
    """Read, free, check, write."""
    if len(sys.argv) != 3:
        sys.exit('usage: free_batch.py IN.onnx OUT.onnx')
    m = onnx.load(sys.argv[1])
    changed = free_batch(m)
    onnx.checker.check_model(m)
    onnx.save(m, sys.argv[2])
    print(f'free_batch: {sys.argv[2]}: batch dim freed, {changed} Reshape target(s) changed')


if __name__ == '__main__':
    main()
