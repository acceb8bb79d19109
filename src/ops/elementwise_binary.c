/*
 * ops/elementwise_binary.c - loops of the binary element-wise ops for the
 * broadcast driver (ops/broadcast.h): Add-14, Sub-14, Mul-14, Div-14,
 * Mod-13, Pow-15, Max-13, Min-13, Equal-13, Less-13, Greater-13,
 * LessOrEqual-16, GreaterOrEqual-16, And-7, Or-7, Xor-7, PRelu-16 and
 * BitShift-11.
 *
 * Every op has three loops per dtype (vv, vs, sv: see toplu__binary_loops_t)
 * written as plain `for` loops over restrict pointers with the scalar side
 * hoisted, so float loops vectorise.  Integer arithmetic wraps (it goes
 * through the unsigned type: no signed overflow); integer Div and Mod
 * truncate like C and give 0 for a zero divisor instead of trapping.
 * float16/bfloat16 convert blocks to float, run the float loop, round back.
 */
#include <math.h>
#include <stddef.h>
#include <string.h>

#include "ops/elementwise_loops.h"

/*
 * BIN(NAME, SFX, TA, TB, TY, PRE, EXPR): loops NAME_SFX_{vv,vs,sv} and the
 * table entry NAME_SFX.  EXPR computes y from x0 (element of a) and x1
 * (element of b); PRE runs once before each loop.
 */
#define BIN(NAME, SFX, TA, TB, TY, PRE, EXPR)                                                       \
  static void NAME##_##SFX##_vv(int64_t n, const void *a_, const void *b_, void *y_) {              \
    const TA *restrict a = a_;                                                                    \
    const TB *restrict b = b_;                                                                    \
    TY *restrict y = y_;                                                                          \
    PRE;                                                                                          \
    for (int64_t i = 0; i < n; i++) {                                                             \
      const TA x0 = a[i];                                                                         \
      const TB x1 = b[i];                                                                         \
      y[i] = (TY)(EXPR);                                                                          \
    }                                                                                             \
  }                                                                                               \
  static void NAME##_##SFX##_vs(int64_t n, const void *a_, const void *b_, void *y_) {              \
    const TA *restrict a = a_;                                                                    \
    const TB x1 = *(const TB *)b_;                                                                \
    TY *restrict y = y_;                                                                          \
    PRE;                                                                                          \
    for (int64_t i = 0; i < n; i++) {                                                             \
      const TA x0 = a[i];                                                                         \
      y[i] = (TY)(EXPR);                                                                          \
    }                                                                                             \
  }                                                                                               \
  static void NAME##_##SFX##_sv(int64_t n, const void *a_, const void *b_, void *y_) {              \
    const TA x0 = *(const TA *)a_;                                                                \
    const TB *restrict b = b_;                                                                    \
    TY *restrict y = y_;                                                                          \
    PRE;                                                                                          \
    for (int64_t i = 0; i < n; i++) {                                                             \
      const TB x1 = b[i];                                                                         \
      y[i] = (TY)(EXPR);                                                                          \
    }                                                                                             \
  }                                                                                               \
  static const toplu__binary_loops_t NAME##_##SFX = {NAME##_##SFX##_vv, NAME##_##SFX##_vs, NAME##_##SFX##_sv, \
                                                    sizeof(TA), sizeof(TB), sizeof(TY)};

#define NOTHING ((void)0)

/* Element-wise helpers with NaN propagation like numpy's maximum/minimum. */
#define FMAX(a, b) ((a) > (b) || (a) != (a) ? (a) : (b))
#define FMIN(a, b) ((a) < (b) || (a) != (a) ? (a) : (b))

/* Floor modulo (result takes the divisor's sign), as Mod with fmod=0. */
static inline double py_fmod(double a, double b) {
  double r = fmod(a, b);
  return r != 0 && ((r < 0) != (b < 0)) ? r + b : r;
}
static inline float py_fmodf(float a, float b) {
  float r = fmodf(a, b);
  return r != 0 && ((r < 0) != (b < 0)) ? r + b : r;
}

/* ---- floating point ---- */

#define FLOAT_OPS(SFX, T, FMODF, PYMOD)                                                   \
  BIN(add, SFX, T, T, T, NOTHING, x0 + x1)                                                \
  BIN(sub, SFX, T, T, T, NOTHING, x0 - x1)                                                \
  BIN(mul, SFX, T, T, T, NOTHING, x0 * x1)                                                \
  BIN(div, SFX, T, T, T, NOTHING, x0 / x1)                                                \
  BIN(mod, SFX, T, T, T, NOTHING, PYMOD(x0, x1))                                          \
  BIN(fmod, SFX, T, T, T, NOTHING, FMODF(x0, x1))                                         \
  BIN(max, SFX, T, T, T, NOTHING, FMAX(x0, x1))                                           \
  BIN(min, SFX, T, T, T, NOTHING, FMIN(x0, x1))                                           \
  BIN(prelu, SFX, T, T, T, NOTHING, x0 < 0 ? x0 * x1 : x0)                                \
  BIN(eq, SFX, T, T, uint8_t, NOTHING, x0 == x1)                                          \
  BIN(lt, SFX, T, T, uint8_t, NOTHING, x0 < x1)                                           \
  BIN(gt, SFX, T, T, uint8_t, NOTHING, x0 > x1)                                           \
  BIN(le, SFX, T, T, uint8_t, NOTHING, x0 <= x1)                                          \
  BIN(ge, SFX, T, T, uint8_t, NOTHING, x0 >= x1)

FLOAT_OPS(f32, float, fmodf, py_fmodf)
FLOAT_OPS(f64, double, fmod, py_fmod)

/* ---- integers ---- */

/* UT: the unsigned type arithmetic wraps in (at least int's width). */
#define INT_COMMON(SFX, T, UT)                                                            \
  BIN(add, SFX, T, T, T, NOTHING, (UT)x0 + (UT)x1)                                         \
  BIN(sub, SFX, T, T, T, NOTHING, (UT)x0 - (UT)x1)                                         \
  BIN(mul, SFX, T, T, T, NOTHING, (UT)x0 * (UT)x1)                                         \
  BIN(max, SFX, T, T, T, NOTHING, x0 > x1 ? x0 : x1)                                      \
  BIN(min, SFX, T, T, T, NOTHING, x0 < x1 ? x0 : x1)                                      \
  BIN(eq, SFX, T, T, uint8_t, NOTHING, x0 == x1)                                          \
  BIN(lt, SFX, T, T, uint8_t, NOTHING, x0 < x1)                                           \
  BIN(gt, SFX, T, T, uint8_t, NOTHING, x0 > x1)                                           \
  BIN(le, SFX, T, T, uint8_t, NOTHING, x0 <= x1)                                          \
  BIN(ge, SFX, T, T, uint8_t, NOTHING, x0 >= x1)

/* Signed division and remainder without traps: x / 0 = 0, x / -1 = -x (wrapping). */
#define SDIV(T, UT, a, b) ((b) == 0 ? (T)0 : (b) == -1 ? (T)(UT)(0u - (UT)(a)) : (T)((a) / (b)))
#define SREM(a, b) ((b) == 0 || (b) == -1 ? 0 : (a) % (b))
#define SMOD(a, b) (SREM(a, b) != 0 && ((SREM(a, b) < 0) != ((b) < 0)) ? SREM(a, b) + (b) : SREM(a, b))

#define SIGNED_OPS(SFX, T, UT)                                                            \
  INT_COMMON(SFX, T, UT)                                                                  \
  BIN(div, SFX, T, T, T, NOTHING, SDIV(T, UT, x0, x1))                                     \
  BIN(fmod, SFX, T, T, T, NOTHING, SREM(x0, x1))                                           \
  BIN(mod, SFX, T, T, T, NOTHING, SMOD(x0, x1))                                            \
  BIN(prelu, SFX, T, T, T, NOTHING, x0 < 0 ? (UT)x0 * (UT)x1 : (UT)x0)

#define UNSIGNED_OPS(SFX, T, UT)                                                          \
  INT_COMMON(SFX, T, UT)                                                                  \
  BIN(div, SFX, T, T, T, NOTHING, x1 == 0 ? 0 : x0 / x1)                                  \
  BIN(fmod, SFX, T, T, T, NOTHING, x1 == 0 ? 0 : x0 % x1)                                 \
  BIN(mod, SFX, T, T, T, NOTHING, x1 == 0 ? 0 : x0 % x1)                                  \
  BIN(prelu, SFX, T, T, T, NOTHING, ((void)x1, x0))

/* BitShift: a shift by the type's width or more gives 0 (no undefined shift). */
#define SHIFT_OPS(SFX, T, UT)                                                                 \
  BIN(shl, SFX, T, T, T, NOTHING, x1 >= sizeof(T) * 8 ? 0 : (UT)x0 << x1)                 \
  BIN(shr, SFX, T, T, T, NOTHING, x1 >= sizeof(T) * 8 ? 0 : x0 >> x1)
SHIFT_OPS(u8, uint8_t, unsigned)
SHIFT_OPS(u16, uint16_t, unsigned)
SHIFT_OPS(u32, uint32_t, uint32_t)
SHIFT_OPS(u64, uint64_t, uint64_t)

SIGNED_OPS(i8, int8_t, unsigned)
SIGNED_OPS(i16, int16_t, unsigned)
SIGNED_OPS(i32, int32_t, uint32_t)
SIGNED_OPS(i64, int64_t, uint64_t)
UNSIGNED_OPS(u8, uint8_t, unsigned)
UNSIGNED_OPS(u16, uint16_t, unsigned)
UNSIGNED_OPS(u32, uint32_t, uint32_t)
UNSIGNED_OPS(u64, uint64_t, uint64_t)

/* ---- bool ---- */

BIN(and, bool, uint8_t, uint8_t, uint8_t, NOTHING, (x0 != 0) & (x1 != 0))
BIN(or, bool, uint8_t, uint8_t, uint8_t, NOTHING, (x0 != 0) | (x1 != 0))
BIN(xor, bool, uint8_t, uint8_t, uint8_t, NOTHING, (x0 != 0) ^ (x1 != 0))
BIN(eq, bool, uint8_t, uint8_t, uint8_t, NOTHING, (x0 != 0) == (x1 != 0))

/* ---- float16 / bfloat16 through float ---- */

#define HALF_BLOCK 256

/* Load m halves (or bfloat16s) as floats. */
static void load_half(float *dst, const uint16_t *src, int m, int bf16) {
  if (bf16)
    for (int k = 0; k < m; k++) dst[k] = toplu_bfloat16_to_float(src[k]);
  else
    for (int k = 0; k < m; k++) dst[k] = toplu_half_to_float(src[k]);
}

/*
 * Run float loops f (mode 0 vv, 1 vs, 2 sv) on half inputs by blocks.
 * b_half: b holds halves (else floats, for Pow's exponent); half_out: y is
 * half (else f's own output type, bool for comparisons).
 */
static void half_bin(int mode, const toplu__binary_loops_t *f, int bf16, int b_half, int half_out, int64_t n,
                     const void *a, const void *b, void *y) {
  float fa[HALF_BLOCK], fb[HALF_BLOCK], fy[HALF_BLOCK];
  const uint16_t *a16 = a;
  const uint16_t *b16 = b;
  const float *b32 = b;
  if (mode == 2) load_half(fa, a16, 1, bf16);
  if (mode == 1) {
    if (b_half) load_half(fb, b16, 1, bf16);
    else fb[0] = b32[0];
  }
  for (int64_t i0 = 0; i0 < n; i0 += HALF_BLOCK) {
    int m = n - i0 < HALF_BLOCK ? (int)(n - i0) : HALF_BLOCK;
    if (mode != 2) load_half(fa, a16 + i0, m, bf16);
    const float *pb = fb;
    if (mode != 1) {
      if (b_half) load_half(fb, b16 + i0, m, bf16);
      else pb = b32 + i0;
    }
    void *out = half_out ? (void *)fy : (void *)((char *)y + i0 * (int64_t)f->y_size);
    if (mode == 0) f->vv(m, fa, pb, out);
    else if (mode == 1) f->vs(m, fa, pb, out);
    else f->sv(m, fa, pb, out);
    if (half_out) {
      uint16_t *y16 = (uint16_t *)y + i0;
      if (bf16)
        for (int k = 0; k < m; k++) y16[k] = toplu_float_to_bfloat16(fy[k]);
      else
        for (int k = 0; k < m; k++) y16[k] = toplu_float_to_half(fy[k]);
    }
  }
}

/* f16 and bf16 variants NAME_f16 / NAME_bf16 of the float loops NAME_f32. */
#define HALF_BIN(NAME, B_HALF, HALF_OUT)                                                                   \
  static void NAME##_f16_vv(int64_t n, const void *a, const void *b, void *y) {                            \
    half_bin(0, &NAME##_f32, 0, B_HALF, HALF_OUT, n, a, b, y);                                             \
  }                                                                                                        \
  static void NAME##_f16_vs(int64_t n, const void *a, const void *b, void *y) {                            \
    half_bin(1, &NAME##_f32, 0, B_HALF, HALF_OUT, n, a, b, y);                                             \
  }                                                                                                        \
  static void NAME##_f16_sv(int64_t n, const void *a, const void *b, void *y) {                            \
    half_bin(2, &NAME##_f32, 0, B_HALF, HALF_OUT, n, a, b, y);                                             \
  }                                                                                                        \
  static void NAME##_bf16_vv(int64_t n, const void *a, const void *b, void *y) {                           \
    half_bin(0, &NAME##_f32, 1, B_HALF, HALF_OUT, n, a, b, y);                                             \
  }                                                                                                        \
  static void NAME##_bf16_vs(int64_t n, const void *a, const void *b, void *y) {                           \
    half_bin(1, &NAME##_f32, 1, B_HALF, HALF_OUT, n, a, b, y);                                             \
  }                                                                                                        \
  static void NAME##_bf16_sv(int64_t n, const void *a, const void *b, void *y) {                           \
    half_bin(2, &NAME##_f32, 1, B_HALF, HALF_OUT, n, a, b, y);                                             \
  }                                                                                                        \
  static const toplu__binary_loops_t NAME##_f16 = {NAME##_f16_vv, NAME##_f16_vs, NAME##_f16_sv, 2,          \
                                                  (B_HALF) ? 2 : 4, (HALF_OUT) ? 2 : 1};                   \
  static const toplu__binary_loops_t NAME##_bf16 = {NAME##_bf16_vv, NAME##_bf16_vs, NAME##_bf16_sv, 2,      \
                                                   (B_HALF) ? 2 : 4, (HALF_OUT) ? 2 : 1};

HALF_BIN(add, 1, 1)
HALF_BIN(sub, 1, 1)
HALF_BIN(mul, 1, 1)
HALF_BIN(div, 1, 1)
HALF_BIN(mod, 1, 1)
HALF_BIN(fmod, 1, 1)
HALF_BIN(max, 1, 1)
HALF_BIN(min, 1, 1)
HALF_BIN(prelu, 1, 1)
HALF_BIN(eq, 1, 0)
HALF_BIN(lt, 1, 0)
HALF_BIN(gt, 1, 0)
HALF_BIN(le, 1, 0)
HALF_BIN(ge, 1, 0)

/* ---- Pow ---- */

/* x^e for integers by squaring (wrapping); negative e: 1, +-1 or 0. */
static inline int64_t ipow(int64_t x, int64_t e) {
  if (e < 0) return x == 1 ? 1 : x == -1 ? ((e & 1) ? -1 : 1) : 0;
  uint64_t r = 1, b = (uint64_t)x;
  while (e) {
    if (e & 1) r *= b;
    b *= b;
    e >>= 1;
  }
  return (int64_t)r;
}

/* double to int64 truncating toward zero, saturating, NaN to 0. */
static inline int64_t sat_i64(double v) {
  if (!(v == v)) return 0;
  if (v >= 9223372036854775807.0) return INT64_MAX;
  if (v <= -9223372036854775808.0) return INT64_MIN;
  return (int64_t)v;
}

/* float base, float exponent; the scalar-exponent loop special-cases the
 * exponents models use (x^2 in variance, x^0.5, x^3 in GELU). */
static void pow_f32_vv(int64_t n, const void *a_, const void *b_, void *y_) {
  const float *restrict a = a_, *restrict b = b_;
  float *restrict y = y_;
  for (int64_t i = 0; i < n; i++) y[i] = powf(a[i], b[i]);
}
static void pow_f32_vs(int64_t n, const void *a_, const void *b_, void *y_) {
  const float *restrict a = a_;
  const float e = *(const float *)b_;
  float *restrict y = y_;
  if (e == 2.0f)
    for (int64_t i = 0; i < n; i++) y[i] = a[i] * a[i];
  else if (e == 1.0f)
    for (int64_t i = 0; i < n; i++) y[i] = a[i];
  else if (e == 3.0f)
    for (int64_t i = 0; i < n; i++) y[i] = a[i] * a[i] * a[i];
  else if (e == 0.5f)
    for (int64_t i = 0; i < n; i++) y[i] = sqrtf(a[i]);
  else if (e == -1.0f)
    for (int64_t i = 0; i < n; i++) y[i] = 1.0f / a[i];
  else
    for (int64_t i = 0; i < n; i++) y[i] = powf(a[i], e);
}
static void pow_f32_sv(int64_t n, const void *a_, const void *b_, void *y_) {
  const float x = *(const float *)a_;
  const float *restrict b = b_;
  float *restrict y = y_;
  for (int64_t i = 0; i < n; i++) y[i] = powf(x, b[i]);
}
static const toplu__binary_loops_t pow_f32 = {pow_f32_vv, pow_f32_vs, pow_f32_sv, 4, 4, 4};

BIN(pow, f64, double, double, double, NOTHING, pow(x0, x1))
BIN(pow, i32i, int32_t, int64_t, int32_t, NOTHING, ipow(x0, x1))
BIN(pow, i64i, int64_t, int64_t, int64_t, NOTHING, ipow(x0, x1))
BIN(pow, i32f, int32_t, double, int32_t, NOTHING, sat_i64(pow((double)x0, x1)))
BIN(pow, i64f, int64_t, double, int64_t, NOTHING, sat_i64(pow((double)x0, x1)))
HALF_BIN(pow, 0, 1)

/* Floating-point dtypes. */
static int is_float_dtype(toplu_dtype_t t) {
  return t == TOPLU_DTYPE_FLOAT || t == TOPLU_DTYPE_DOUBLE || t == TOPLU_DTYPE_FLOAT16 || t == TOPLU_DTYPE_BFLOAT16;
}

/* Pow loops by base dtype (and exponent kind for integer bases). */
const toplu__binary_loops_t *toplu__ew_pow_lookup(toplu_dtype_t base, toplu_dtype_t exponent, toplu_dtype_t *exp_dtype) {
  int fe = is_float_dtype(exponent);
  switch (base) {
    case TOPLU_DTYPE_FLOAT: *exp_dtype = TOPLU_DTYPE_FLOAT; return &pow_f32;
    case TOPLU_DTYPE_FLOAT16: *exp_dtype = TOPLU_DTYPE_FLOAT; return &pow_f16;
    case TOPLU_DTYPE_BFLOAT16: *exp_dtype = TOPLU_DTYPE_FLOAT; return &pow_bf16;
    case TOPLU_DTYPE_DOUBLE: *exp_dtype = TOPLU_DTYPE_DOUBLE; return &pow_f64;
    case TOPLU_DTYPE_INT32:
      *exp_dtype = fe ? TOPLU_DTYPE_DOUBLE : TOPLU_DTYPE_INT64;
      return fe ? &pow_i32f : &pow_i32i;
    case TOPLU_DTYPE_INT64:
      *exp_dtype = fe ? TOPLU_DTYPE_DOUBLE : TOPLU_DTYPE_INT64;
      return fe ? &pow_i64f : &pow_i64i;
    default: return NULL;
  }
}

/* ---- table ---- */

#define N_DTYPES 17
#define FLOATS(NAME)                                                                      \
  [TOPLU_DTYPE_FLOAT] = &NAME##_f32, [TOPLU_DTYPE_DOUBLE] = &NAME##_f64,                  \
  [TOPLU_DTYPE_FLOAT16] = &NAME##_f16, [TOPLU_DTYPE_BFLOAT16] = &NAME##_bf16
#define INTS(NAME)                                                                        \
  [TOPLU_DTYPE_INT8] = &NAME##_i8, [TOPLU_DTYPE_INT16] = &NAME##_i16,                     \
  [TOPLU_DTYPE_INT32] = &NAME##_i32, [TOPLU_DTYPE_INT64] = &NAME##_i64,                   \
  [TOPLU_DTYPE_UINT8] = &NAME##_u8, [TOPLU_DTYPE_UINT16] = &NAME##_u16,                   \
  [TOPLU_DTYPE_UINT32] = &NAME##_u32, [TOPLU_DTYPE_UINT64] = &NAME##_u64
#define NUMERIC(NAME) FLOATS(NAME), INTS(NAME)

static const toplu__binary_loops_t *const binary_table[TOPLU_EW_BINARY_COUNT][N_DTYPES] = {
    [TOPLU_EW_ADD] = {NUMERIC(add)},
    [TOPLU_EW_SUB] = {NUMERIC(sub)},
    [TOPLU_EW_MUL] = {NUMERIC(mul)},
    [TOPLU_EW_DIV] = {NUMERIC(div)},
    [TOPLU_EW_MOD] = {NUMERIC(mod)},
    [TOPLU_EW_FMOD] = {NUMERIC(fmod)},
    [TOPLU_EW_MAX] = {NUMERIC(max)},
    [TOPLU_EW_MIN] = {NUMERIC(min)},
    [TOPLU_EW_EQUAL] = {NUMERIC(eq), [TOPLU_DTYPE_BOOL] = &eq_bool},
    [TOPLU_EW_LESS] = {NUMERIC(lt)},
    [TOPLU_EW_GREATER] = {NUMERIC(gt)},
    [TOPLU_EW_LESS_EQUAL] = {NUMERIC(le)},
    [TOPLU_EW_GREATER_EQUAL] = {NUMERIC(ge)},
    [TOPLU_EW_AND] = {[TOPLU_DTYPE_BOOL] = &and_bool},
    [TOPLU_EW_OR] = {[TOPLU_DTYPE_BOOL] = &or_bool},
    [TOPLU_EW_XOR] = {[TOPLU_DTYPE_BOOL] = &xor_bool},
    [TOPLU_EW_PRELU] = {NUMERIC(prelu)},
    [TOPLU_EW_SHIFT_LEFT] = {[TOPLU_DTYPE_UINT8] = &shl_u8, [TOPLU_DTYPE_UINT16] = &shl_u16,
                             [TOPLU_DTYPE_UINT32] = &shl_u32, [TOPLU_DTYPE_UINT64] = &shl_u64},
    [TOPLU_EW_SHIFT_RIGHT] = {[TOPLU_DTYPE_UINT8] = &shr_u8, [TOPLU_DTYPE_UINT16] = &shr_u16,
                              [TOPLU_DTYPE_UINT32] = &shr_u32, [TOPLU_DTYPE_UINT64] = &shr_u64},
};

/* Table lookup with range checks. */
const toplu__binary_loops_t *toplu__ew_binary_lookup(toplu__ew_binary_op_t op, toplu_dtype_t dtype) {
  if ((int)op < 0 || op >= TOPLU_EW_BINARY_COUNT || (int)dtype < 0 || (int)dtype >= N_DTYPES) return NULL;
  return binary_table[op][dtype];
}
