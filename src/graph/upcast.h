/*
 * graph/upcast.h - float16 and bfloat16 models through the float32 kernels.
 *
 * toplu's convolution, matrix, normalisation, softmax, linear/cubic resize
 * and recurrent kernels take float32 only.  A model exported in half
 * precision (model.half() before torch.onnx.export) was refused at its
 * first Conv or MatMul (a fresh user's finding, 2026-12-06).  This pass
 * does what ONNX Runtime's CPU provider does on x86 (InsertCastTransformer,
 * then the removal of Cast pairs between float32 nodes): every node that
 * computes on half float inputs (all ops but Cast, CastLike, Shape, Size,
 * Identity, control flow and sequence ops) reads them through a Cast to
 * float32, constants converted once at load; its half outputs get a Cast
 * back to their type, which only readers outside the float32 region (a
 * graph output, a Cast, a sequence op) keep: a reader that is itself
 * converted takes the float32 value.  So a half model runs as its float32
 * original would, fusions included, rounding to half only at its outputs
 * and at the ops left in half: MobileNetV2 and ResNet-18 in float16 gave
 * ONNX Runtime's logits within one float16 step (1.2e-4 and 2.4e-4 on
 * values up to 0.64 and 1.9), and ran at the float32 model's speed.
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
