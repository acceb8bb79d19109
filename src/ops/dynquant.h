/*
 * ops/dynquant.h - ONNX DynamicQuantizeLinear-11's arithmetic (ops/quant.c),
 * shared by its kernel and by the fused dynamic int8 MatMul
 * (toplu.DynamicQuantizeMatMul: ops/quant_matmul.c, ops/onednn/qmatmul.c),
 * so the fused node quantizes its input bit for bit as the unfused graph.
 */
#ifndef TOPLU_OPS_DYNQUANT_H
#define TOPLU_OPS_DYNQUANT_H
#include <stdint.h>

/* The range of x[0..n-1] widened to hold 0: *scale = (max - min) / 255 (the
 * op's y_scale output, 0 when x is all zeros), *zp = saturate(round_half_even(
 * -min / scale)) as a float in [0, 255], *qscale the scale to divide by (1
 * when *scale is 0 or not finite).  NaN values are skipped.  Up to threads
 * OpenMP threads; the result does not depend on them. */
void toplu__dynamic_qparams(const float *x, int64_t n, int threads, float *scale, float *zp, float *qscale);

/* y[i] = saturate_u8(round_half_even(x[i] / s) + zp), as QuantizeLinear; up to threads threads. */
void toplu__quantize_u8(const float *x, uint8_t *y, int64_t n, float s, float zp, int threads);

/* QuantizeLinear's arithmetic on n floats with one scale and zero point,
 * into y of type t (uint8, int8, uint16 or int16); DequantizeLinear's from
 * x of type t (those or int32) into n floats.  The calling thread only;
 * also the layout-aware per-tensor kernels' (ops/onednn/blocked.c), so a
 * tensor in a blocked layout is (de)quantized bit for bit as in plain. */
#include "toplu/tensor.h"
void toplu__quantize_span(toplu_dtype_t t, const float *x, void *y, int64_t n, float s, float zp);
void toplu__dequantize_span(toplu_dtype_t t, const void *x, float *y, int64_t n, float s, int32_t zp);

/* toplu.QLinearLookup (graph/fuse.c int8_lookup): table[b] is the node's result for the input element
 * whose raw byte is b (an int8 input reads b as (int8_t)b): dequantized as DequantizeLinear, through the
 * float function of attribute op (a unary op U of ops/elementwise_unary.c with the node's attributes; with
 * attribute times_x 1, x * U(x); op "": none), with the scalar steps of attributes pre_ops/pre_vals before it and
 * post_ops/post_vals after it (0 Mul, 1 Add, 2 Sub t - c, 3 Sub c - t, 4 Div t / c, 5 Div c / t, each in float32
 * as the node it stands for), quantized as QuantizeLinear.  TOPLU_ERR_UNSUPPORTED when the parameters are not
 * constant positive scalars, op is unknown or the steps do not match.  Called from prepare. */
struct toplu__kernel_ctx;
toplu_status_t toplu__qlookup_table(struct toplu__kernel_ctx *ctx, uint8_t table[256]);
/* y[i] = table[x[i]] for i < n, up to threads OpenMP threads (AVX-512 VBMI where the CPU has it).  x and y may
 * be the same. */
void toplu__qlookup_run(const uint8_t table[256], const uint8_t *x, uint8_t *y, int64_t n, int threads);

/* com.microsoft QLinearAdd / QLinearMul's constants (ops/quant_binary.c): scales and zero points of A, B and C. */
typedef struct toplu__qbin {
  int mul; /* QLinearMul */
  int u8;  /* uint8 (else int8) */
  float sa, sb, sc;
  int32_t za, zb, zc;
} toplu__qbin_t;
/* Read them from the node's inputs 1, 2, 4, 5, 6, 7 (constants); TOPLU_ERR_UNSUPPORTED or TOPLU_ERR_INVALID_MODEL
 * with the kernel's error set when they are not constants or C_scale is not positive.  Called from prepare. */
toplu_status_t toplu__qbin_params(struct toplu__kernel_ctx *ctx, toplu__qbin_t *q);
/* c[i] = the op of a[i] and b[i] for i < n (same shapes, any one layout), up to threads OpenMP threads; the
 * arithmetic of the plain kernel, bit for bit. */
void toplu__qbin_flat(const toplu__qbin_t *q, const void *a, const void *b, void *c, int64_t n, int threads);

/* toplu.DynamicQuantizeMatMul's fused post-ops (graph/fuse.c: node->post of
 * the kernel ctx's node), applied in order to its float output y after the
 * product and bias: TOPLU_POST_SUM adds input po->input (the output's
 * shape), the activations, GELU and LINEAR as ops/onednn/onednn.h's
 * toplu__post_apply.  One pass, up to threads threads (ops/quant_matmul.c). */
struct toplu__kernel_ctx;
void toplu__dqmm_post(const struct toplu__kernel_ctx *ctx, float *y, int64_t total, int threads);
/* The same on y[b..e-1] on the calling thread. */
void toplu__dqmm_post_range(const struct toplu__kernel_ctx *ctx, float *y, int64_t b, int64_t e);
/* 1 when every post-op of the node is one toplu__dqmm_post applies. */
struct toplu__node;
int toplu__dqmm_post_ok(const struct toplu__node *n);

#endif
