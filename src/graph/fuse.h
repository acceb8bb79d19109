/*
 * graph/fuse.h - graph rewrites that make fewer, bigger kernels.
 *
 *  - BatchNormalization (inference mode, constant statistics) after a Conv
 *    with constant weights is folded into the Conv's weights and bias:
 *      s = scale / sqrt(var + epsilon);  W' = W * s[co];  B' = (B - mean) * s + bias
 *    (ONNX BatchNormalization-15, Conv-11).
 *  - An activation (Relu, LeakyRelu, Clip, Sigmoid, Tanh, HardSigmoid,
 *    HardSwish) that is the only reader of a Conv, ConvTranspose, Gemm or
 *    MatMul output becomes a post-op of that node (oneDNN post-ops).
 *  - Add(Conv(x), y) with y of the same shape, computed before the Conv,
 *    becomes a `sum` post-op of the Conv (the residual add of ResNets).
 *  - x * Clip(x + 3, 0, 6) / 6, as exporters write HardSwish out, becomes a
 *    HardSwish node (HardSwish-14).
 *  - Mul or Add of a per-channel (or scalar) constant right after a Conv is
 *    folded into its weights and bias (ONNX Runtime's ConvMulFusion and
 *    ConvAddFusion).
 *  - A scalar Mul, Add, Sub (or Div by a power of two) after a fused
 *    activation becomes a `linear` post-op alpha x + beta.
 *  - MatMul + a constant row along the last axis ([N] or [1, ..., N])
 *    becomes the MatMul's `bias` post-op; a scalar Mul or Div by a power
 *    of two right after a MatMul a `linear` post-op; Add(MatMul(+bias), y),
 *    y of the output's shape computed before, a `sum` post-op.
 *  - GELU with erf written out (x / sqrt 2 -> Erf -> + 1 -> * x -> * 0.5, as
 *    PyTorch exports it before opset 20) after a Conv, Gemm or MatMul
 *    becomes a `gelu_erf` post-op (GELU-20, approximate "none").
 *  - LayerNorm written out (ReduceMean, Sub, Pow 2, ReduceMean, Add eps,
 *    Sqrt, Div, Mul gamma, Add beta over the last axis, as PyTorch exports
 *    it before opset 17) becomes a LayerNormalization-17 node (axis -1).
 *  - Scaled dot-product attention written out (MatMul(Q, KT), a scalar Div
 *    or Mul (or a scalar Mul/Div on Q or KT), an optional mask: Add of a
 *    float tensor or Where(bool, scores, constant), Softmax over the last
 *    axis, MatMul by V; every intermediate read by the next node alone)
 *    becomes one toplu.ScaledDotProductAttention(Q, KT, V[, mask]) node with
 *    attributes scale (and mask_fill, mask_keep for a bool mask), run by
 *    ops/onednn/attention.c; not with TOPLU_FUSE_NO_ATTENTION.
 *  - A 1x1 Conv (stride 1, no pads) [+ activations] read only by a 3x3
 *    depthwise Conv (stride 1 or 2, pads 1) [+ activations], float, constant
 *    weights (MobileNetV2's expansion and depthwise layers) becomes one
 *    toplu.PointwiseDepthwiseConv (graph/schema_conv.c; ops/onednn/conv_dw.c);
 *    not with TOPLU_FUSE_NO_DEPTHWISE.  With TOPLU_FUSE_DW_PROJECT, the 1x1
 *    Conv [+ residual Add] [+ activations] that alone reads such a node's
 *    output (the block's projection) joins it too, where the node's E per
 *    image passes toplu__pwdw_own_expand_ok and Clip, Relu or nothing
 *    after each of its convolutions (the own kernel's case,
 *    ops/onednn/pwdw_own.h); and a depthwise 3x3 Conv [+ Clip | Relu] that
 *    no 1x1 expansion precedes, read only by such a 1x1 Conv, becomes one
 *    toplu.DepthwisePointwiseConv (MobileNetV2's first block).
 *  - QDQ graphs on a CPU with VNNI: DequantizeLinear -> Conv -> QuantizeLinear
 *    becomes QLinearConv (integer convolution); integer Relu/Min/Max/Pad and
 *    their folding into it; the residual Add of a block, QLinearConv ->
 *    DequantizeLinear -> Add(., DequantizeLinear(b)) [-> Relu] ->
 *    QuantizeLinear, a TOPLU_POST_QSUM post-op of that QLinearConv (not with
 *    TOPLU_FUSE_NO_QDQ_RESIDUAL); other Add/Mul between DequantizeLinear and
 *    QuantizeLinear QLinearAdd/QLinearMul (fuse.c says each rule's limits).
 *    DequantizeLinear -> MatMul/Gemm (constant int8 weights) [-> QuantizeLinear]
 *    becomes toplu.QLinearMatMul (integer matmul; int8 or float out).
 *  - ONNX Runtime's dynamic quantization chain DynamicQuantizeLinear ->
 *    MatMulInteger -> Cast -> Mul(x_scale * w_scale) [-> Add bias] becomes
 *    toplu.DynamicQuantizeMatMul, which takes post-ops like MatMul.
 *    DequantizeLinear -> f -> QuantizeLinear, f an element-wise function of
 *    one float (Sigmoid, Tanh, HardSwish, GELU, x * Sigmoid(x), ...), 8-bit
 *    per-tensor: toplu.QLinearLookup, a table of f's 256 quantized results
 *    (not with TOPLU_FUSE_NO_QDQ_LOOKUP).
 *  - GELU written out that no step before it takes as a post-op becomes one
 *    Gelu-20 node; x * HardSigmoid(x, 1/6, 0.5) a HardSwish node.
 *  - QuantizeLinear -> DequantizeLinear with the same constant scale and zero
 *    point becomes one toplu.QuantizeDequantizeLinear node (QDQ graphs).
 * Passes only rewrite what the kernels' post-op support covers; node names
 * keep the first node's name and fused_name records "Conv+Add+Relu".
 */
#ifndef TOPLU_GRAPH_FUSE_H
#define TOPLU_GRAPH_FUSE_H

#include "graph/graph.h"

/* toplu__graph_fuse flags. */
#define TOPLU_FUSE_QDQ_INT8_ALL 1u /* fuse a QDQ Conv whose Relu/Clip is not redundant too (toplu_model_options_t.qdq_int8_all) */
#define TOPLU_FUSE_QDQ_CONV 2u     /* fuse QDQ Convs into QLinearConv at all (the CPU runs integer convolutions exactly) */
#define TOPLU_FUSE_NO_ATTENTION 4u  /* leave attention written out (toplu_model_options_t.no_fuse_attention) */
#define TOPLU_FUSE_NO_DEPTHWISE 16u  /* leave a 1x1 Conv and the depthwise 3x3 Conv after it apart
                                         (toplu_model_options_t.no_fuse_depthwise) */
#define TOPLU_FUSE_NO_QDQ_RESIDUAL 8u /* leave a QDQ residual Add out of the QLinearConv before it
                                         (toplu_model_options_t.no_fuse_qdq_residual) */
#define TOPLU_FUSE_NO_QDQ_LOOKUP 32u /* leave DequantizeLinear -> f -> QuantizeLinear as float steps
                                        (toplu_model_options_t.no_fuse_qdq_lookup) */
#define TOPLU_FUSE_DW_PROJECT 64u /* fuse the 1x1 Conv after a depthwise one into its step (a
                                     PointwiseDepthwiseConv's projection, or a DepthwisePointwiseConv): set by
                                     runtime/model.c where the CPU has AVX-512 (X then arrives channels last
                                     and the own kernel runs the block) unless
                                     toplu_model_options_t.no_fuse_projection */

/* 1 when E (the expanded tensor, h x w x m floats per image) is large enough that the own pointwise +
 * depthwise kernel is the default (ops/onednn/conv_dw.c) and a projection may join it: 1 MiB (Zen 5's L2,
 * twice Zen 3's), or 512 KiB where m is a multiple of 16 (the kernel's channel-block path).  Measured on
 * MobileNetV2, MNASNet and MobileNetV3 (docs/performance.md, "The own pointwise + depthwise kernel").
 * The depthwise + pointwise rewrite asks this of its depthwise output (h x w x m). */
static inline int toplu__pwdw_own_size_ok(int64_t h, int64_t w, int64_t m) {
  const int64_t e = h * w * m * (int64_t)sizeof(float);
  return e >= ((int64_t)1 << 20) || (e >= ((int64_t)1 << 19) && m % 16 == 0);
}

/* The rule for an expansion 1x1 -> depthwise 3x3 at stride s (1 or 2) on h x w: toplu__pwdw_own_size_ok,
 * or E of 256 KiB with m a multiple of 16 where the output has 196 pixels or more (MobileNetV2's 14x14
 * blocks 8-13: 7-15% faster than oneDNN's pair and projection at batch 1, 2-7% at batch 8, two threads,
 * Intel Xeon with AVX-512, 2026-12-07; its 7x7 blocks and the stride-2 block to 7x7 ran 3-16% slower: a
 * band of a few output rows recomputes its E halo rows, and each 6-pixel tile reads the whole weights). */
static inline int toplu__pwdw_own_expand_ok(int64_t h, int64_t w, int64_t m, int64_t s) {
  const int64_t e = h * w * m * (int64_t)sizeof(float), out = ((h - 1) / s + 1) * ((w - 1) / s + 1);
  return toplu__pwdw_own_size_ok(h, w, m) || (m % 16 == 0 && e >= ((int64_t)1 << 18) && out >= 196);
}

/* Run all fusion passes.  Errors: TOPLU_ERR_OUT_OF_MEMORY. */
toplu_status_t toplu__graph_fuse(toplu__graph_t *g, unsigned flags, toplu_error_t *err);

#endif
