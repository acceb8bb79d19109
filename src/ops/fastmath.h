/*
 * ops/fastmath.h - float math the compiler can vectorise, shared by the
 * element-wise (Exp, Sigmoid, Tanh, Elu, ...) and softmax/reduction kernels.
 */
#ifndef TOPLU_OPS_FASTMATH_H
#define TOPLU_OPS_FASTMATH_H

#include <math.h>
#include <stdint.h>
#include <string.h>

/* exp(x) for float: 2 * 2^(k-1) * p(r), k = round(x / ln2), |r| <= ln2/2
 * (the scale is 2^(k-1) so k = 128 still fits a float exponent).  Limits:
 * 0 below -87.34, +inf above 88.72, NaN stays NaN; between -87.34 and
 * -86.9 (results below 2e-38) it returns exp(-86.9). */
static inline float toplu__expf(float x) {
  float xc = x < -86.9f ? -86.9f : x;
  xc = xc > 88.72283f ? 88.72283f : xc;
  float kf = xc * 1.44269504088896341f + 12582912.0f; /* 1.5 * 2^23: rounds to an integer */
  uint32_t kb;
  memcpy(&kb, &kf, sizeof kb);
  kf -= 12582912.0f;
  float r = xc - kf * 0.693359375f;
  r = r - kf * -2.12194440e-4f;
  float p = 1.0f / 720.0f;
  p = p * r + 1.0f / 120.0f;
  p = p * r + 1.0f / 24.0f;
  p = p * r + 1.0f / 6.0f;
  p = p * r + 0.5f;
  p = p * r + 1.0f;
  p = p * r + 1.0f;
  uint32_t sb = (kb - 0x4B400000u + 126u) << 23; /* 2^(k-1) */
  float s;
  memcpy(&s, &sb, sizeof s);
  float y = (p + p) * s;
  y = x < -87.33654f ? 0.0f : y;
  y = x > 88.72283f ? INFINITY : y;
  return y;
}

/* erf(x) for float, branch-free so loops over it vectorise: Abramowitz and
 * Stegun, Handbook of Mathematical Functions (1964), 7.1.26:
 * erf(x) = 1 - (a1 t + ... + a5 t^5) exp(-x^2), t = 1 / (1 + p x), x >= 0,
 * odd in x; absolute error at most 1.5e-7.  NaN stays NaN. */
static inline float toplu__erff(float x) {
  float ax = fabsf(x);
  float t = 1.0f / (1.0f + 0.3275911f * ax);
  float y = 1.061405429f;
  y = y * t - 1.453152027f;
  y = y * t + 1.421413741f;
  y = y * t - 0.284496736f;
  y = y * t + 0.254829592f;
  float e = toplu__expf(-ax * ax);
  float r = 1.0f - y * t * e;
  r = x != x ? x : r;
  return x < 0.0f ? -r : r;
}

/* GELU with erf (GELU-20, approximate "none"): x/2 (1 + erf(x / sqrt 2)). */
static inline float toplu__gelu_erff(float x) { return 0.5f * x * (1.0f + toplu__erff(x * 0.70710678118654752f)); }

/* 1 when this CPU has AVX-512F (with AVX2 and FMA) and the environment
 * variable TOPLU_MAX_CPU_ISA is not "avx2" (read once per process; for A/B
 * timing): toplu's own AVX-512 loops and kernels may run.  Thread-safe. */
int toplu__cpu_avx512_ok(void);

/* y[i] = toplu__gelu_erff(y[i]) for i < n, in AVX-512 registers where the
 * CPU has them and TOPLU_MAX_CPU_ISA is not "avx2" (the same steps; results
 * within 2.4e-7 of the scalar function, 1.7x faster measured on an Intel
 * Xeon with AVX-512), else the scalar loop.  Thread-safe. */
void toplu__gelu_erf_f32(float *y, int64_t n);

/* 1 / (1 + exp(-x)). */
static inline float toplu__sigmoidf(float x) { return 1.0f / (1.0f + toplu__expf(-x)); }

/* tanh: (1 - e) / (1 + e) with e = exp(-2|x|), an odd polynomial below 0.125
 * (where the quotient loses digits). */
static inline float toplu__tanhf(float x) {
  float ax = fabsf(x);
  float e = toplu__expf(-2.0f * ax);
  float t = copysignf((1.0f - e) / (1.0f + e), x);
  float x2 = x * x;
  float s = x * (1.0f + x2 * (-1.0f / 3.0f + x2 * (2.0f / 15.0f + x2 * (-17.0f / 315.0f))));
  return ax < 0.125f ? s : t;
}

#endif
