/*
 * ops/elementwise_unary.c - loops of the unary element-wise ops (see
 * ops/elementwise_loops.h): Relu-14, LeakyRelu-16, Sigmoid-13, Tanh-13,
 * HardSigmoid-6, HardSwish-14, Sqrt-13, Exp-13, Log-13, Abs-13, Neg-13,
 * Reciprocal-13, Floor-13, Ceil-13, Round-11, Erf-13, Softplus-1, Elu-6,
 * Selu-6, Sign-13, Not-1, Clip-6/11/13, Softsign-1, Sin/Cos/Tan/Asin/Acos/
 * Atan-7, Sinh/Cosh/Asinh/Acosh/Atanh-9, Celu-12, ThresholdedRelu-10,
 * Shrink-9, IsNaN-13 and IsInf-10.
 *
 * float32 loops are plain `for` loops over restrict pointers that GCC and
 * clang vectorise at -O3; exp-based ops (Exp, Sigmoid, Tanh, Elu, Selu) use
 * an inlined exp with Cody-Waite range reduction and a degree-6 polynomial
 * (about 2 ulp), so they vectorise too.  double uses libm.  float16 and
 * bfloat16 convert blocks to float, run the float32 loop, and round back.
 */
#include <math.h>
#include <stddef.h>
#include <string.h>

#include "ops/elementwise_loops.h"
#include "ops/fastmath.h"

/* ---- vectorisable float helpers (sigmoid and tanh: ops/fastmath.h) ---- */

/* min(max(t, 0), 1) with compares (vectorises; fminf/fmaxf may not). */
static inline float clamp01f(float t) {
  t = t < 0.0f ? 0.0f : t;
  return t > 1.0f ? 1.0f : t;
}

/* ---- float32 ---- */

#define F32_LOOP(NAME, PRE, EXPR)                                                       \
  static void NAME##_f32(int64_t n, const void *x_, void *y_, const toplu__ew_params_t *p) { \
    const float *restrict x = x_;                                                       \
    float *restrict y = y_;                                                             \
    (void)p;                                                                            \
    PRE;                                                                                \
    for (int64_t i = 0; i < n; i++) {                                                   \
      const float v = x[i];                                                             \
      y[i] = (EXPR);                                                                    \
    }                                                                                   \
  }

#define F64_LOOP(NAME, PRE, EXPR)                                                       \
  static void NAME##_f64(int64_t n, const void *x_, void *y_, const toplu__ew_params_t *p) { \
    const double *restrict x = x_;                                                      \
    double *restrict y = y_;                                                            \
    (void)p;                                                                            \
    PRE;                                                                                \
    for (int64_t i = 0; i < n; i++) {                                                   \
      const double v = x[i];                                                            \
      y[i] = (EXPR);                                                                    \
    }                                                                                   \
  }

#define NOTHING ((void)0)

F32_LOOP(relu, NOTHING, v < 0.0f ? 0.0f : v)
F32_LOOP(leaky_relu, const float al = p->alpha, v < 0.0f ? al * v : v)
F32_LOOP(sigmoid, NOTHING, toplu__sigmoidf(v))
F32_LOOP(tanh, NOTHING, toplu__tanhf(v))
F32_LOOP(hard_sigmoid, const float al = p->alpha; const float be = p->beta, clamp01f(al * v + be))
F32_LOOP(hard_swish, NOTHING, v * clamp01f(v * (1.0f / 6.0f) + 0.5f))
F32_LOOP(sqrt, NOTHING, sqrtf(v))
F32_LOOP(exp, NOTHING, toplu__expf(v))
F32_LOOP(log, NOTHING, logf(v))
F32_LOOP(abs, NOTHING, fabsf(v))
F32_LOOP(neg, NOTHING, -v)
F32_LOOP(reciprocal, NOTHING, 1.0f / v)
F32_LOOP(floor, NOTHING, floorf(v))
F32_LOOP(ceil, NOTHING, ceilf(v))
F32_LOOP(round, NOTHING, nearbyintf(v))
F32_LOOP(erf, NOTHING, toplu__erff(v)) /* branch-free, vectorised: 1.5e-7 absolute (ops/fastmath.h) */
F32_LOOP(softplus, NOTHING, v > 20.0f ? v : log1pf(expf(v)))
F32_LOOP(elu, const float al = p->alpha, v < 0.0f ? al * (toplu__expf(v) - 1.0f) : v)
F32_LOOP(selu, const float al = p->alpha; const float ga = p->gamma,
         v > 0.0f ? ga * v : ga * (al * toplu__expf(v) - al))
F32_LOOP(sign, NOTHING, v > 0.0f ? 1.0f : v < 0.0f ? -1.0f : v)
F32_LOOP(softsign, NOTHING, v / (1.0f + fabsf(v)))
F32_LOOP(sin, NOTHING, sinf(v))
F32_LOOP(cos, NOTHING, cosf(v))
F32_LOOP(tan, NOTHING, tanf(v))
F32_LOOP(asin, NOTHING, asinf(v))
F32_LOOP(acos, NOTHING, acosf(v))
F32_LOOP(atan, NOTHING, atanf(v))
F32_LOOP(sinh, NOTHING, sinhf(v))
F32_LOOP(cosh, NOTHING, coshf(v))
F32_LOOP(asinh, NOTHING, asinhf(v))
F32_LOOP(acosh, NOTHING, acoshf(v))
F32_LOOP(atanh, NOTHING, atanhf(v))
F32_LOOP(celu, const float al = p->alpha; const float inv = 1.0f / al,
         v != v ? v : (v > 0.0f ? v : 0.0f) + fminf(0.0f, al * (expf(v * inv) - 1.0f))) /* NaN kept (fminf drops it) */
F32_LOOP(thresholded_relu, const float al = p->alpha, v > al ? v : 0.0f)
F32_LOOP(shrink, const float la = p->alpha; const float bi = p->beta, v < -la ? v + bi : v > la ? v - bi : 0.0f)
/* Gelu-20: 0.5 x (1 + erf(x / sqrt 2)), or with approximate "tanh" 0.5 x (1 + tanh(sqrt(2 / pi) (x + 0.044715
 * x^3))) (ONNX operator spec); Mish-18: x tanh(softplus(x)). */
F32_LOOP(gelu_tanh, NOTHING, 0.5f * v * (1.0f + tanhf(0.7978845608028654f * (v + 0.044715f * v * v * v))))
/* erf: ops/fastmath.h's toplu__gelu_erf_f32, in AVX-512 registers where the CPU has them (the step after a
 * MatMul uses it as a post-op too); until 2026-12-07 libm's erff, element by element (4 ns an element). */
static void gelu_f32(int64_t n, const void *x, void *y, const toplu__ew_params_t *p) {
  if (p->alpha != 0.0f) {
    gelu_tanh_f32(n, x, y, p);
    return;
  }
  if (x != y) memcpy(y, x, (size_t)n * sizeof(float));
  toplu__gelu_erf_f32(y, n);
}
F32_LOOP(mish, NOTHING, v * tanhf(v > 20.0f ? v : log1pf(expf(v))))
/* NaN passes through; min > max gives max (Clip-13). */
F32_LOOP(clip, const float lo = (float)p->dlo; const float hi = (float)p->dhi,
         (v < lo ? lo : v) > hi ? hi : (v < lo ? lo : v))

/* ---- double ---- */

F64_LOOP(relu, NOTHING, v < 0.0 ? 0.0 : v)
F64_LOOP(leaky_relu, const double al = p->alpha, v < 0.0 ? al * v : v)
F64_LOOP(sigmoid, NOTHING, 1.0 / (1.0 + exp(-v)))
F64_LOOP(tanh, NOTHING, tanh(v))
F64_LOOP(hard_sigmoid, const double al = p->alpha; const double be = p->beta, fmin(fmax(al * v + be, 0.0), 1.0))
F64_LOOP(hard_swish, NOTHING, v * fmin(fmax(v / 6.0 + 0.5, 0.0), 1.0))
F64_LOOP(sqrt, NOTHING, sqrt(v))
F64_LOOP(exp, NOTHING, exp(v))
F64_LOOP(log, NOTHING, log(v))
F64_LOOP(abs, NOTHING, fabs(v))
F64_LOOP(neg, NOTHING, -v)
F64_LOOP(reciprocal, NOTHING, 1.0 / v)
F64_LOOP(floor, NOTHING, floor(v))
F64_LOOP(ceil, NOTHING, ceil(v))
F64_LOOP(round, NOTHING, nearbyint(v))
F64_LOOP(erf, NOTHING, erf(v))
F64_LOOP(softplus, NOTHING, v > 40.0 ? v : log1p(exp(v)))
F64_LOOP(elu, const double al = p->alpha, v < 0.0 ? al * expm1(v) : v)
F64_LOOP(selu, const double al = p->alpha; const double ga = p->gamma, v > 0.0 ? ga * v : ga * (al * exp(v) - al))
F64_LOOP(sign, NOTHING, v > 0.0 ? 1.0 : v < 0.0 ? -1.0 : v)
F64_LOOP(softsign, NOTHING, v / (1.0 + fabs(v)))
F64_LOOP(clip, const double lo = p->dlo; const double hi = p->dhi, (v < lo ? lo : v) > hi ? hi : (v < lo ? lo : v))

F64_LOOP(sin, NOTHING, sin(v))
F64_LOOP(cos, NOTHING, cos(v))
F64_LOOP(tan, NOTHING, tan(v))
F64_LOOP(asin, NOTHING, asin(v))
F64_LOOP(acos, NOTHING, acos(v))
F64_LOOP(atan, NOTHING, atan(v))
F64_LOOP(sinh, NOTHING, sinh(v))
F64_LOOP(cosh, NOTHING, cosh(v))
F64_LOOP(asinh, NOTHING, asinh(v))
F64_LOOP(acosh, NOTHING, acosh(v))
F64_LOOP(atanh, NOTHING, atanh(v))
F64_LOOP(celu, const double al = p->alpha, v != v ? v : (v > 0.0 ? v : 0.0) + fmin(0.0, al * expm1(v / al)))
F64_LOOP(thresholded_relu, const double al = p->alpha, v > al ? v : 0.0)
F64_LOOP(gelu, const int ta = p->alpha != 0.0f,
         ta ? 0.5 * v * (1.0 + tanh(0.7978845608028654 * (v + 0.044715 * v * v * v)))
            : 0.5 * v * (1.0 + erf(v * 0.7071067811865476)))
F64_LOOP(mish, NOTHING, v * tanh(v > 40.0 ? v : log1p(exp(v))))
F64_LOOP(shrink, const double la = p->alpha; const double bi = p->beta, v < -la ? v + bi : v > la ? v - bi : 0.0)

/* ---- IsNaN, IsInf: bool output ---- */

#define CLASSIFY_LOOPS(SFX, T, TOF)                                                                 \
  static void isnan_##SFX(int64_t n, const void *x_, void *y_, const toplu__ew_params_t *p) {      \
    const T *restrict x = x_;                                                                     \
    uint8_t *restrict y = y_;                                                                     \
    (void)p;                                                                                      \
    for (int64_t i = 0; i < n; i++) {                                                             \
      const float v = TOF(x[i]);                                                                  \
      y[i] = v != v;                                                                              \
    }                                                                                             \
  }                                                                                               \
  static void isinf_##SFX(int64_t n, const void *x_, void *y_, const toplu__ew_params_t *p) {      \
    const T *restrict x = x_;                                                                     \
    uint8_t *restrict y = y_;                                                                     \
    const int neg = p->detect_negative, pos = p->detect_positive;                                 \
    for (int64_t i = 0; i < n; i++) {                                                             \
      const double v = TOF(x[i]);                                                                 \
      y[i] = (uint8_t)((pos && v == INFINITY) || (neg && v == -INFINITY));                        \
    }                                                                                             \
  }
#define TOF_SAME(v) (v)
CLASSIFY_LOOPS(f32, float, TOF_SAME)
CLASSIFY_LOOPS(f64, double, TOF_SAME)
CLASSIFY_LOOPS(f16, uint16_t, toplu_half_to_float)
CLASSIFY_LOOPS(bf16, uint16_t, toplu_bfloat16_to_float)

/* ---- float16 / bfloat16 through float ---- */

#define HALF_BLOCK 256

/* Convert blocks of x to float, apply f, round back into y (y may be x). */
static void via_float(int64_t n, const uint16_t *x, uint16_t *y, const toplu__ew_params_t *p, toplu__ew_unary_fn f,
                      int bf16) {
  float bx[HALF_BLOCK], by[HALF_BLOCK];
  for (int64_t i0 = 0; i0 < n; i0 += HALF_BLOCK) {
    int m = n - i0 < HALF_BLOCK ? (int)(n - i0) : HALF_BLOCK;
    for (int k = 0; k < m; k++) bx[k] = bf16 ? toplu_bfloat16_to_float(x[i0 + k]) : toplu_half_to_float(x[i0 + k]);
    f(m, bx, by, p);
    for (int k = 0; k < m; k++) y[i0 + k] = bf16 ? toplu_float_to_bfloat16(by[k]) : toplu_float_to_half(by[k]);
  }
}

#define HALF_WRAP(NAME)                                                                  \
  static void NAME##_f16(int64_t n, const void *x, void *y, const toplu__ew_params_t *p) {  \
    via_float(n, x, y, p, NAME##_f32, 0);                                                \
  }                                                                                      \
  static void NAME##_bf16(int64_t n, const void *x, void *y, const toplu__ew_params_t *p) { \
    via_float(n, x, y, p, NAME##_f32, 1);                                                \
  }

HALF_WRAP(relu)
HALF_WRAP(leaky_relu)
HALF_WRAP(sigmoid)
HALF_WRAP(tanh)
HALF_WRAP(hard_sigmoid)
HALF_WRAP(hard_swish)
HALF_WRAP(sqrt)
HALF_WRAP(exp)
HALF_WRAP(log)
HALF_WRAP(abs)
HALF_WRAP(neg)
HALF_WRAP(reciprocal)
HALF_WRAP(floor)
HALF_WRAP(ceil)
HALF_WRAP(round)
HALF_WRAP(erf)
HALF_WRAP(softplus)
HALF_WRAP(elu)
HALF_WRAP(selu)
HALF_WRAP(sign)
HALF_WRAP(softsign)
HALF_WRAP(clip)
HALF_WRAP(sin)
HALF_WRAP(cos)
HALF_WRAP(tan)
HALF_WRAP(asin)
HALF_WRAP(acos)
HALF_WRAP(atan)
HALF_WRAP(sinh)
HALF_WRAP(cosh)
HALF_WRAP(asinh)
HALF_WRAP(acosh)
HALF_WRAP(atanh)
HALF_WRAP(celu)
HALF_WRAP(thresholded_relu)
HALF_WRAP(shrink)
HALF_WRAP(gelu)
HALF_WRAP(mish)

/* ---- integers ---- */

/* Signed: negation through the unsigned type so INT_MIN wraps instead of
 * overflowing. */
#define INT_LOOPS(SFX, T, UT, TMIN, TMAX)                                                           \
  static void relu_##SFX(int64_t n, const void *x_, void *y_, const toplu__ew_params_t *p) {         \
    const T *restrict x = x_;                                                                     \
    T *restrict y = y_;                                                                           \
    (void)p;                                                                                      \
    for (int64_t i = 0; i < n; i++) y[i] = x[i] < 0 ? 0 : x[i];                                   \
  }                                                                                               \
  static void abs_##SFX(int64_t n, const void *x_, void *y_, const toplu__ew_params_t *p) {          \
    const T *restrict x = x_;                                                                     \
    T *restrict y = y_;                                                                           \
    (void)p;                                                                                      \
    for (int64_t i = 0; i < n; i++) y[i] = x[i] < 0 ? (T)(UT)(0u - (UT)x[i]) : x[i];              \
  }                                                                                               \
  static void neg_##SFX(int64_t n, const void *x_, void *y_, const toplu__ew_params_t *p) {          \
    const T *restrict x = x_;                                                                     \
    T *restrict y = y_;                                                                           \
    (void)p;                                                                                      \
    for (int64_t i = 0; i < n; i++) y[i] = (T)(UT)(0u - (UT)x[i]);                                \
  }                                                                                               \
  static void sign_##SFX(int64_t n, const void *x_, void *y_, const toplu__ew_params_t *p) {         \
    const T *restrict x = x_;                                                                     \
    T *restrict y = y_;                                                                           \
    (void)p;                                                                                      \
    for (int64_t i = 0; i < n; i++) y[i] = (T)(x[i] > 0 ? 1 : x[i] < 0 ? -1 : 0);                 \
  }                                                                                               \
  static void clip_##SFX(int64_t n, const void *x_, void *y_, const toplu__ew_params_t *p) {         \
    const T *restrict x = x_;                                                                     \
    T *restrict y = y_;                                                                           \
    const T lo = (T)(p->ilo < (TMIN) ? (TMIN) : p->ilo > (TMAX) ? (TMAX) : p->ilo);               \
    const T hi = (T)(p->ihi < (TMIN) ? (TMIN) : p->ihi > (TMAX) ? (TMAX) : p->ihi);               \
    for (int64_t i = 0; i < n; i++) {                                                             \
      T v = x[i] < lo ? lo : x[i];                                                                \
      y[i] = v > hi ? hi : v;                                                                     \
    }                                                                                             \
  }

#define UINT_LOOPS(SFX, T, TMAX)                                                                    \
  static void copy_##SFX(int64_t n, const void *x_, void *y_, const toplu__ew_params_t *p) {         \
    (void)p;                                                                                      \
    if (x_ != y_) memmove(y_, x_, (size_t)n * sizeof(T));                                         \
  }                                                                                               \
  static void sign_##SFX(int64_t n, const void *x_, void *y_, const toplu__ew_params_t *p) {         \
    const T *restrict x = x_;                                                                     \
    T *restrict y = y_;                                                                           \
    (void)p;                                                                                      \
    for (int64_t i = 0; i < n; i++) y[i] = (T)(x[i] > 0 ? 1 : 0);                                 \
  }                                                                                               \
  static void clip_##SFX(int64_t n, const void *x_, void *y_, const toplu__ew_params_t *p) {         \
    const T *restrict x = x_;                                                                     \
    T *restrict y = y_;                                                                           \
    const T lo = (T)(p->ulo > (TMAX) ? (TMAX) : p->ulo);                                          \
    const T hi = (T)(p->uhi > (TMAX) ? (TMAX) : p->uhi);                                          \
    for (int64_t i = 0; i < n; i++) {                                                             \
      T v = x[i] < lo ? lo : x[i];                                                                \
      y[i] = v > hi ? hi : v;                                                                     \
    }                                                                                             \
  }

INT_LOOPS(i8, int8_t, unsigned, INT8_MIN, INT8_MAX)
INT_LOOPS(i16, int16_t, unsigned, INT16_MIN, INT16_MAX)
INT_LOOPS(i32, int32_t, uint32_t, INT32_MIN, INT32_MAX)
INT_LOOPS(i64, int64_t, uint64_t, INT64_MIN, INT64_MAX)
UINT_LOOPS(u8, uint8_t, UINT8_MAX)
UINT_LOOPS(u16, uint16_t, UINT16_MAX)
UINT_LOOPS(u32, uint32_t, UINT32_MAX)
UINT_LOOPS(u64, uint64_t, UINT64_MAX)

/* Not-1 on bool (bytes 0/1; any nonzero byte counts as true). */
static void not_bool(int64_t n, const void *x_, void *y_, const toplu__ew_params_t *p) {
  const uint8_t *restrict x = x_;
  uint8_t *restrict y = y_;
  (void)p;
  for (int64_t i = 0; i < n; i++) y[i] = x[i] == 0;
}

/* ---- table ---- */

#define FLOATS(NAME)                                                                     \
  [TOPLU_DTYPE_FLOAT] = NAME##_f32, [TOPLU_DTYPE_DOUBLE] = NAME##_f64,                   \
  [TOPLU_DTYPE_FLOAT16] = NAME##_f16, [TOPLU_DTYPE_BFLOAT16] = NAME##_bf16
#define SIGNED(NAME)                                                                     \
  [TOPLU_DTYPE_INT8] = NAME##_i8, [TOPLU_DTYPE_INT16] = NAME##_i16,                      \
  [TOPLU_DTYPE_INT32] = NAME##_i32, [TOPLU_DTYPE_INT64] = NAME##_i64
#define UNSIGNED(NAME)                                                                   \
  [TOPLU_DTYPE_UINT8] = NAME##_u8, [TOPLU_DTYPE_UINT16] = NAME##_u16,                    \
  [TOPLU_DTYPE_UINT32] = NAME##_u32, [TOPLU_DTYPE_UINT64] = NAME##_u64

#define N_DTYPES 17

static const toplu__ew_unary_fn unary_table[TOPLU_EW_UNARY_COUNT][N_DTYPES] = {
    [TOPLU_EW_RELU] = {FLOATS(relu), SIGNED(relu)},
    [TOPLU_EW_LEAKY_RELU] = {FLOATS(leaky_relu)},
    [TOPLU_EW_SIGMOID] = {FLOATS(sigmoid)},
    [TOPLU_EW_TANH] = {FLOATS(tanh)},
    [TOPLU_EW_HARD_SIGMOID] = {FLOATS(hard_sigmoid)},
    [TOPLU_EW_HARD_SWISH] = {FLOATS(hard_swish)},
    [TOPLU_EW_SQRT] = {FLOATS(sqrt)},
    [TOPLU_EW_EXP] = {FLOATS(exp)},
    [TOPLU_EW_LOG] = {FLOATS(log)},
    [TOPLU_EW_ABS] = {FLOATS(abs), SIGNED(abs), UNSIGNED(copy)},
    [TOPLU_EW_NEG] = {FLOATS(neg), SIGNED(neg)},
    [TOPLU_EW_RECIPROCAL] = {FLOATS(reciprocal)},
    [TOPLU_EW_FLOOR] = {FLOATS(floor)},
    [TOPLU_EW_CEIL] = {FLOATS(ceil)},
    [TOPLU_EW_ROUND] = {FLOATS(round)},
    [TOPLU_EW_ERF] = {FLOATS(erf)},
    [TOPLU_EW_SOFTPLUS] = {FLOATS(softplus)},
    [TOPLU_EW_ELU] = {FLOATS(elu)},
    [TOPLU_EW_SELU] = {FLOATS(selu)},
    [TOPLU_EW_SIGN] = {FLOATS(sign), SIGNED(sign), UNSIGNED(sign)},
    [TOPLU_EW_NOT] = {[TOPLU_DTYPE_BOOL] = not_bool},
    [TOPLU_EW_CLIP] = {FLOATS(clip), SIGNED(clip), UNSIGNED(clip)},
    [TOPLU_EW_SOFTSIGN] = {FLOATS(softsign)},
    [TOPLU_EW_SIN] = {FLOATS(sin)},
    [TOPLU_EW_COS] = {FLOATS(cos)},
    [TOPLU_EW_TAN] = {FLOATS(tan)},
    [TOPLU_EW_ASIN] = {FLOATS(asin)},
    [TOPLU_EW_ACOS] = {FLOATS(acos)},
    [TOPLU_EW_ATAN] = {FLOATS(atan)},
    [TOPLU_EW_SINH] = {FLOATS(sinh)},
    [TOPLU_EW_COSH] = {FLOATS(cosh)},
    [TOPLU_EW_ASINH] = {FLOATS(asinh)},
    [TOPLU_EW_ACOSH] = {FLOATS(acosh)},
    [TOPLU_EW_ATANH] = {FLOATS(atanh)},
    [TOPLU_EW_CELU] = {FLOATS(celu)},
    [TOPLU_EW_THRESHOLDED_RELU] = {FLOATS(thresholded_relu)},
    [TOPLU_EW_SHRINK] = {FLOATS(shrink)},
    [TOPLU_EW_GELU] = {FLOATS(gelu)},
    [TOPLU_EW_MISH] = {FLOATS(mish)},
    [TOPLU_EW_ISNAN] = {FLOATS(isnan)},
    [TOPLU_EW_ISINF] = {FLOATS(isinf)},
};

/* Table lookup with range checks. */
toplu__ew_unary_fn toplu__ew_unary_lookup(toplu__ew_unary_op_t op, toplu_dtype_t dtype) {
  if ((int)op < 0 || op >= TOPLU_EW_UNARY_COUNT || (int)dtype < 0 || (int)dtype >= N_DTYPES) return NULL;
  return unary_table[op][dtype];
}
