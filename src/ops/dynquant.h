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

#endif
