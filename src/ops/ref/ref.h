/*
 * ops/ref/ref.h - plain-C reference kernels: a second, independent backend
 * for the ops MNIST and torchvision resnet18 need after graph/fuse.c, and an
 * oracle for kernel tests.
 *
 * Written for clarity and exactness, not speed: no oneDNN, no packed
 * weights, no blocked layouts (never TOPLU_KERNEL_LAYOUT: every tensor is
 * dense row-major, as include/toplu/tensor.h describes, and every kernel
 * reads its inputs exactly as the graph gives them).  Dot products and sums
 * accumulate in double and round to float once per output element; fused
 * post-ops then run in float32 in node->post order, which is what the
 * unfused ONNX graph computes (Conv output rounded to float, then Add, then
 * Relu).  NaN propagates as ONNX says (Relu, Clip, MaxPool and Softmax keep
 * a NaN; oneDNN's turn it into a number, see docs/design.md).
 *
 * Ops (ai.onnx domain, float32 only unless said otherwise):
 *   Conv-1/11           1 to 3 spatial axes: X [N, C, D.., H.., W], W [M, C/group,
 *                       k...], optional B [M]; group, strides, pads, dilations,
 *                       auto_pad (NOTSET, SAME_UPPER, SAME_LOWER, VALID) and
 *                       kernel_shape (geometry: graph/schema_conv.h); then the
 *                       node's fused post-ops, TOPLU_POST_SUM included: the
 *                       addend is node input post[i].input (graph/fuse.c puts it
 *                       at index 3, after an absent or present B), same shape as Y.
 *   Gemm-7/9/11/13      alpha, beta, transA, transB, optional C broadcast to
 *                       [M, N] (scalar, [N], [1, N], [M, 1], [M, N]); C is
 *                       ignored when beta == 0 (as ONNX Runtime and ops/matmul.c).
 *   MatMul-1/9/13       numpy matmul: batch dims broadcast, a 1-D operand is
 *                       promoted and its added dim removed again.
 *     Conv, Gemm and MatMul apply every post-op kind (graph/graph.h), SUM too.
 *   Add, Sub, Mul, Div-7/13/14  numpy multidirectional broadcasting.
 *   Relu-6/13/14
 *   MaxPool-1/8/10/11/12  1 to 3 spatial axes; kernel_shape, strides, pads,
 *                       dilations, auto_pad, ceil_mode (through the output
 *                       shape graph/schema_pool.c infers); storage_order only
 *                       matters for Indices, which is not supported.  A window
 *                       over no input element gives -FLT_MAX (ONNX Runtime's
 *                       lowest()).
 *   GlobalAveragePool-1 mean over every axis after the first two.
 *   Softmax-1/11/13     opset < 13: the input coerced to 2-D at `axis`
 *                       (default 1); opset >= 13: along the single `axis`
 *                       (default -1); max-subtracted, sum in double.
 *   Reshape-5/13/14, Flatten-1/9/11/13  views (TOPLU_KERNEL_VIEW): output 0 is
 *                       input 0's bytes, any dtype; the output shape is the
 *                       schema's.  run() copies when called on two buffers.
 *
 * Errors from prepare (via toplu__kernel_error, naming model and node):
 *   TOPLU_ERR_UNSUPPORTED   another dtype, ConvTranspose, MaxPool's Indices
 *                           output, more than 3 spatial axes, an unknown
 *                           post-op kind;
 *   TOPLU_ERR_SHAPE         shapes that disagree with the node (the planner's
 *                           inference normally rules these out);
 *   TOPLU_ERR_INVALID_MODEL bad attributes (axis out of range, ...);
 *   TOPLU_ERR_OUT_OF_MEMORY the kernel state could not be allocated.
 * A failed prepare leaves ctx->state NULL (nothing to release).  run never
 * fails once prepare succeeded.
 *
 * Threads: run parallelises its outer loop (batch x channels, or rows) with
 * OpenMP over at most ctx->threads threads when the library is built with
 * it; the scratch it asks for (info->workspace_bytes) is per thread, sized by
 * ctx->threads at prepare.  State is read-only after prepare, so several
 * threads may run one prepared kernel at once on different buffers.
 *
 * In place: Add/Sub/Mul/Div, Relu and Softmax are TOPLU_KERNEL_INPLACE; Conv,
 * Gemm and MatMul with a SUM post-op report info->inplace_input = the addend
 * (each output element reads its addend element before writing it), as
 * ops/conv.c does.
 */
#ifndef TOPLU_OPS_REF_REF_H
#define TOPLU_OPS_REF_REF_H

#include "ops/kernel.h"

/* The reference backend's kernels, ending with an entry whose op_type is NULL. */
extern const toplu__kernel_t toplu__kernels_ref[];

/* The reference kernel for an op ("" or "ai.onnx" domain), or NULL. */
const toplu__kernel_t *toplu__kernel_find_ref(const char *domain, const char *op_type);

#endif
