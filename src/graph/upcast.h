/*
 * graph/upcast.h - float16 and bfloat16 through the float32 kernels.
 *
 * toplu's convolution, matrix, normalisation, softmax, linear/cubic resize
 * and recurrent kernels take float32 only; element-wise ops, reductions,
 * pooling and Cast also take float16.  A model exported in half precision
 * (model.half() before torch.onnx.export) was refused at its first Conv or
 * MatMul (a fresh user's finding, 2026-12-06).  ONNX Runtime's CPU provider
 * does what this pass does (its InsertCastTransformer): each such node whose
 * float inputs are float16 or bfloat16 reads them through a Cast to float32
 * (a constant input is converted once, at load) and its half outputs come
 * back through a Cast to their type; where its input is such a Cast back
 * from another upcast node's float32 output, it reads that output directly
 * (no round trip through float16 between two float32 kernels, as ONNX
 * Runtime removes those pairs).  So results are those of float32 kernels
 * rounded to the half type at the boundaries: within a few half-precision
 * steps of ONNX Runtime's.
 */
#ifndef TOPLU_GRAPH_UPCAST_H
#define TOPLU_GRAPH_UPCAST_H

#include "graph/graph.h"
#include "toplu/status.h"

/*
 * Rewrite g (after toplu__graph_infer: dtypes known) as above.  Nodes keep
 * topological order; new values are named "<value>::f32" and new nodes
 * "<node>::cast_in<j>" / "::cast_out<j>".  A graph without such nodes is
 * untouched.  Errors: TOPLU_ERR_OUT_OF_MEMORY (g is then freed by the
 * caller, as after any failed pass).  Not thread-safe on one g.
 */
toplu_status_t toplu__graph_upcast_half(toplu__graph_t *g, toplu_error_t *err);

#endif
