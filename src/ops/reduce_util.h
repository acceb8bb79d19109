/*
 * ops/reduce_util.h - small vectorisable helpers shared by the pooling,
 * normalization and reduction kernels: row sums in 16 lanes (the compiler
 * turns the lane loops into SIMD without -ffast-math), maxima and minima as
 * integer reductions, and an expf the compiler can vectorise.
 */
#ifndef TOPLU_OPS_REDUCE_UTIL_H
#define TOPLU_OPS_REDUCE_UTIL_H

#include <stdint.h>
#include <string.h>

#include "ops/fastmath.h"

#define TOPLU_LANES 16

/* Sum of x[0..n-1]. */
static inline float toplu__row_sum(const float *x, int64_t n) {
  float acc[TOPLU_LANES] = {0};
  int64_t i = 0;
  for (; i + TOPLU_LANES <= n; i += TOPLU_LANES)
    for (int j = 0; j < TOPLU_LANES; j++) acc[j] += x[i + j];
  float s = 0;
  for (; i < n; i++) s += x[i];
  for (int j = 0; j < TOPLU_LANES; j++) s += acc[j];
  return s;
}

/* Sum of (x[i] - m)^2. */
static inline float toplu__row_sqdev(const float *x, int64_t n, float m) {
  float acc[TOPLU_LANES] = {0};
  int64_t i = 0;
  for (; i + TOPLU_LANES <= n; i += TOPLU_LANES)
    for (int j = 0; j < TOPLU_LANES; j++) {
      float d = x[i + j] - m;
      acc[j] += d * d;
    }
  float s = 0;
  for (; i < n; i++) s += (x[i] - m) * (x[i] - m);
  for (int j = 0; j < TOPLU_LANES; j++) s += acc[j];
  return s;
}

/* A float's bits as an int32 that orders like the float (for non-NaN
 * values; +NaN sorts above +inf): integer max/min reductions vectorise with
 * both gcc and clang, float ones need -ffast-math. */
static inline int32_t toplu__float_ord(float f) {
  int32_t i;
  memcpy(&i, &f, sizeof i);
  return i ^ (int32_t)((uint32_t)(i >> 31) & 0x7FFFFFFFu);
}

/* Inverse of toplu__float_ord. */
static inline float toplu__ord_float(int32_t o) {
  o ^= (int32_t)((uint32_t)(o >> 31) & 0x7FFFFFFFu);
  float f;
  memcpy(&f, &o, sizeof f);
  return f;
}

/* 1 when the bits of f (as toplu__float_ord's memcpy) are a NaN's, either sign. */
static inline int32_t toplu__bits_nan(float f) {
  int32_t i;
  memcpy(&i, &f, sizeof i);
  return (i & 0x7FFFFFFF) > 0x7F800000;
}

/* Max of x[0..n-1], n >= 1; NaN when any element is NaN, whatever its sign
 * bit (np.maximum.reduce, the ONNX reference: a NaN made by x86 arithmetic,
 * sqrt(-1) or 0 * inf, has the sign bit set and ordered below every number,
 * so ReduceMax dropped it: a fresh user's finding of 2026-12-06). */
static inline float toplu__row_max(const float *x, int64_t n) {
  int32_t m = toplu__bits_nan(x[0]) ? INT32_MAX : toplu__float_ord(x[0]);
  for (int64_t i = 1; i < n; i++) {
    int32_t o = toplu__bits_nan(x[i]) ? INT32_MAX : toplu__float_ord(x[i]);
    m = o > m ? o : m;
  }
  return toplu__ord_float(m); /* INT32_MAX: a NaN */
}

/* Min of x[0..n-1], n >= 1; NaN when any element is NaN. */
static inline float toplu__row_min(const float *x, int64_t n) {
  int32_t m = toplu__bits_nan(x[0]) ? INT32_MIN : toplu__float_ord(x[0]);
  for (int64_t i = 1; i < n; i++) {
    int32_t o = toplu__bits_nan(x[i]) ? INT32_MIN : toplu__float_ord(x[i]);
    m = o < m ? o : m;
  }
  return toplu__ord_float(m); /* INT32_MIN: a NaN */
}

/* e^x: toplu__expf from ops/fastmath.h. */

/* Sum of e^(x - m); when y is not NULL also stores each e^(x - m) there. */
static inline float toplu__row_expsum(const float *x, float *y, int64_t n, float m) {
  float s = 0.f;
  if (y) {
#pragma omp simd reduction(+ : s)
    for (int64_t i = 0; i < n; i++) {
      float e = toplu__expf(x[i] - m);
      y[i] = e;
      s += e;
    }
  } else {
#pragma omp simd reduction(+ : s)
    for (int64_t i = 0; i < n; i++) s += toplu__expf(x[i] - m);
  }
  return s;
}

#endif
