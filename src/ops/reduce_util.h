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

#define TOPLU_LANES 16

/* Sum of x[0..n-1]. */
static inline float toplu_row_sum(const float *x, int64_t n) {
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
static inline float toplu_row_sqdev(const float *x, int64_t n, float m) {
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
static inline int32_t toplu_float_ord(float f) {
  int32_t i;
  memcpy(&i, &f, sizeof i);
  return i ^ (int32_t)((uint32_t)(i >> 31) & 0x7FFFFFFFu);
}

/* Inverse of toplu_float_ord. */
static inline float toplu_ord_float(int32_t o) {
  o ^= (int32_t)((uint32_t)(o >> 31) & 0x7FFFFFFFu);
  float f;
  memcpy(&f, &o, sizeof f);
  return f;
}

/* Max of x[0..n-1], n >= 1. */
static inline float toplu_row_max(const float *x, int64_t n) {
  int32_t m = toplu_float_ord(x[0]);
  for (int64_t i = 1; i < n; i++) {
    int32_t o = toplu_float_ord(x[i]);
    m = o > m ? o : m;
  }
  return toplu_ord_float(m);
}

/* Min of x[0..n-1], n >= 1. */
static inline float toplu_row_min(const float *x, int64_t n) {
  int32_t m = toplu_float_ord(x[0]);
  for (int64_t i = 1; i < n; i++) {
    int32_t o = toplu_float_ord(x[i]);
    m = o < m ? o : m;
  }
  return toplu_ord_float(m);
}

/*
 * e^x in float, within 2 ulp, branch-free so loops calling it vectorise:
 * x = n ln2 + r with |r| <= ln2/2 (n rounded by the 1.5 * 2^23 trick, ln2
 * split in two so r is exact), e^r by its degree-7 Taylor polynomial
 * (truncation error < 1e-8 relative), 2^n built in the exponent bits.  The
 * clamps work on the bit pattern (integer compares, which vectorise without
 * -fno-trapping-math): x below -87.3 (also -inf) gives 0, x above 88.3 (also
 * +inf and NaN) gives e^88.3.  Callers subtract a finite maximum first.
 */
static inline float toplu_expf(float x) {
  const int32_t lo_bits = (int32_t)0xC2AE999Au; /* -87.3f */
  const int32_t hi_bits = 0x42B0999A;           /* 88.3f */
  int32_t xi;
  memcpy(&xi, &x, sizeof xi);
  int32_t lo = -(int32_t)((xi < 0) & (xi > lo_bits)); /* all ones when x < -87.3 */
  int32_t hi = -(int32_t)(xi > hi_bits);
  xi = (xi & ~(lo | hi)) | (lo_bits & lo) | (hi_bits & hi);
  memcpy(&x, &xi, sizeof x);
  float kf = x * 1.44269504088896341f + 12582912.f; /* round(x / ln2) + 1.5 * 2^23 */
  float n = kf - 12582912.f;
  int32_t ki;
  memcpy(&ki, &kf, sizeof ki);
  ki -= 0x4B400000; /* bits of 1.5 * 2^23 */
  float r = x - n * 0.693145751953125f;
  r = r - n * 1.428606765330187045e-06f;
  float p = 1.f / 5040.f;
  p = p * r + 1.f / 720.f;
  p = p * r + 1.f / 120.f;
  p = p * r + 1.f / 24.f;
  p = p * r + 1.f / 6.f;
  p = p * r + 0.5f;
  p = p * r + 1.f;
  p = p * r + 1.f;
  int32_t sb = (int32_t)((uint32_t)(ki + 127) << 23);
  float scale;
  memcpy(&scale, &sb, sizeof scale);
  float res = p * scale;
  int32_t rb;
  memcpy(&rb, &res, sizeof rb);
  rb &= ~lo;
  memcpy(&res, &rb, sizeof res);
  return res;
}

/* Sum of e^(x - m); when y is not NULL also stores each e^(x - m) there. */
static inline float toplu_row_expsum(const float *x, float *y, int64_t n, float m) {
  float s = 0.f;
  if (y) {
#pragma omp simd reduction(+ : s)
    for (int64_t i = 0; i < n; i++) {
      float e = toplu_expf(x[i] - m);
      y[i] = e;
      s += e;
    }
  } else {
#pragma omp simd reduction(+ : s)
    for (int64_t i = 0; i < n; i++) s += toplu_expf(x[i] - m);
  }
  return s;
}

#endif
