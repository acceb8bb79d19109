/*
 * ops/elementwise_cast.c - conversion loops between every pair of numeric
 * dtypes (and bool) for Cast-13 and CastLike-15 (see ops/elementwise_loops.h).
 *
 * Each source element is loaded as one of three carriers: double (floating
 * dtypes), int64 (signed integers and bool) or uint64 (unsigned integers),
 * and each destination has a store from each carrier:
 *   - to a floating dtype: C conversion (float16 rounds to nearest even
 *     through float); to bfloat16 through float, then truncated toward zero
 *     (the low 16 bits dropped; NaN stays a quiet NaN), because that is what
 *     the ONNX 1.12 node tests expect (test_cast_FLOAT_to_BFLOAT16: the
 *     generator takes the high half of each float32, and 0.48033667 must
 *     give 0x3ef5, where round-to-nearest-even gives 0x3ef6).  ONNX Runtime
 *     and newer ONNX references round to nearest even instead, so a
 *     bfloat16 result may differ from them by one bfloat16 ulp (2^-8
 *     relative);
 *   - to bool: x != 0 (NaN is true, as numpy);
 *   - floating to integer: truncation toward zero as C does, with NaN 0 and
 *     values outside int64 saturated before narrowing (no undefined
 *     conversions), narrowing wraps like numpy on two's complement;
 *   - integer to integer: C conversion (wraps).
 * Same dtype is a copy.
 */
#include <stddef.h>
#include <string.h>

#include "ops/elementwise_loops.h"

/* ---- loads: element -> carrier ---- */

#define LD_f32(v) ((double)(v))
#define LD_f64(v) ((double)(v))
#define LD_f16(v) ((double)toplu_half_to_float(v))
#define LD_bf16(v) ((double)toplu_bfloat16_to_float(v))
#define LD_i8(v) ((int64_t)(v))
#define LD_i16(v) ((int64_t)(v))
#define LD_i32(v) ((int64_t)(v))
#define LD_i64(v) ((int64_t)(v))
#define LD_bool(v) ((int64_t)((v) != 0))
#define LD_u8(v) ((uint64_t)(v))
#define LD_u16(v) ((uint64_t)(v))
#define LD_u32(v) ((uint64_t)(v))
#define LD_u64(v) ((uint64_t)(v))

/* Carrier kind of each source: D double, I int64, U uint64. */
#define KIND_f32 D
#define KIND_f64 D
#define KIND_f16 D
#define KIND_bf16 D
#define KIND_i8 I
#define KIND_i16 I
#define KIND_i32 I
#define KIND_i64 I
#define KIND_bool I
#define KIND_u8 U
#define KIND_u16 U
#define KIND_u32 U
#define KIND_u64 U

/* double -> int64, truncating toward zero, saturating, NaN to 0. */
static inline int64_t d_to_i64(double v) {
  if (!(v == v)) return 0;
  if (v >= 9223372036854775807.0) return INT64_MAX;
  if (v <= -9223372036854775808.0) return INT64_MIN;
  return (int64_t)v;
}

/* double -> uint64: negative values go through int64 (wrapping as C's
 * conversion of a negative integer would). */
static inline uint64_t d_to_u64(double v) {
  if (!(v == v)) return 0;
  if (v >= 18446744073709551615.0) return UINT64_MAX;
  if (v >= 9223372036854775808.0) return (uint64_t)v;
  return (uint64_t)d_to_i64(v);
}

/* ---- stores: carrier -> element ---- */

/* float -> bfloat16 by truncation (see the top of the file). */
static inline uint16_t f32_to_bf16_trunc(float f) {
  uint32_t x;
  memcpy(&x, &f, 4);
  if ((x & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((x >> 16) | 0x40); /* NaN: keep it a (quiet) NaN */
  return (uint16_t)(x >> 16);
}

/* ST_<dst>_<kind>(v) */
#define ST_f32_D(v) ((float)(v))
#define ST_f32_I(v) ((float)(v))
#define ST_f32_U(v) ((float)(v))
#define ST_f64_D(v) ((double)(v))
#define ST_f64_I(v) ((double)(v))
#define ST_f64_U(v) ((double)(v))
#define ST_f16_D(v) toplu_float_to_half((float)(v))
#define ST_f16_I(v) toplu_float_to_half((float)(v))
#define ST_f16_U(v) toplu_float_to_half((float)(v))
#define ST_bf16_D(v) f32_to_bf16_trunc((float)(v))
#define ST_bf16_I(v) f32_to_bf16_trunc((float)(v))
#define ST_bf16_U(v) f32_to_bf16_trunc((float)(v))
#define ST_bool_D(v) ((uint8_t)((v) != 0))
#define ST_bool_I(v) ((uint8_t)((v) != 0))
#define ST_bool_U(v) ((uint8_t)((v) != 0))
#define ST_i8_D(v) ((int8_t)d_to_i64(v))
#define ST_i8_I(v) ((int8_t)(v))
#define ST_i8_U(v) ((int8_t)(v))
#define ST_i16_D(v) ((int16_t)d_to_i64(v))
#define ST_i16_I(v) ((int16_t)(v))
#define ST_i16_U(v) ((int16_t)(v))
#define ST_i32_D(v) ((int32_t)d_to_i64(v))
#define ST_i32_I(v) ((int32_t)(v))
#define ST_i32_U(v) ((int32_t)(v))
#define ST_i64_D(v) d_to_i64(v)
#define ST_i64_I(v) ((int64_t)(v))
#define ST_i64_U(v) ((int64_t)(v))
#define ST_u8_D(v) ((uint8_t)d_to_i64(v))
#define ST_u8_I(v) ((uint8_t)(v))
#define ST_u8_U(v) ((uint8_t)(v))
#define ST_u16_D(v) ((uint16_t)d_to_i64(v))
#define ST_u16_I(v) ((uint16_t)(v))
#define ST_u16_U(v) ((uint16_t)(v))
#define ST_u32_D(v) ((uint32_t)d_to_i64(v))
#define ST_u32_I(v) ((uint32_t)(v))
#define ST_u32_U(v) ((uint32_t)(v))
#define ST_u64_D(v) d_to_u64(v)
#define ST_u64_I(v) ((uint64_t)(v))
#define ST_u64_U(v) ((uint64_t)(v))

/* Storage type of each dtype tag. */
#define CT_f32 float
#define CT_f64 double
#define CT_f16 uint16_t
#define CT_bf16 uint16_t
#define CT_i8 int8_t
#define CT_i16 int16_t
#define CT_i32 int32_t
#define CT_i64 int64_t
#define CT_bool uint8_t
#define CT_u8 uint8_t
#define CT_u16 uint16_t
#define CT_u32 uint32_t
#define CT_u64 uint64_t

#define CAT3_(a, b, c) a##b##c
#define CAT3(a, b, c) CAT3_(a, b, c)
#define STORE(D, K, v) CAT3(ST_, D, CAT3(_, K, ))(v)

/* One conversion loop cast_S_D. */
#define CAST_FN(S, D)                                                          \
  static void cast_##S##_##D(int64_t n, const void *x_, void *y_) {           \
    const CT_##S *restrict x = x_;                                            \
    CT_##D *restrict y = y_;                                                  \
    for (int64_t i = 0; i < n; i++) y[i] = STORE(D, KIND_##S, LD_##S(x[i]));  \
  }

/* X(A, tag, dtype) over every dtype; two copies because a macro cannot
 * expand itself, and the tables nest one list in the other. */
#define DTYPES_OUTER(X, A)            \
  X(A, f32, TOPLU_DTYPE_FLOAT)        \
  X(A, f64, TOPLU_DTYPE_DOUBLE)       \
  X(A, f16, TOPLU_DTYPE_FLOAT16)      \
  X(A, bf16, TOPLU_DTYPE_BFLOAT16)    \
  X(A, i8, TOPLU_DTYPE_INT8)          \
  X(A, i16, TOPLU_DTYPE_INT16)        \
  X(A, i32, TOPLU_DTYPE_INT32)        \
  X(A, i64, TOPLU_DTYPE_INT64)        \
  X(A, bool, TOPLU_DTYPE_BOOL)        \
  X(A, u8, TOPLU_DTYPE_UINT8)         \
  X(A, u16, TOPLU_DTYPE_UINT16)       \
  X(A, u32, TOPLU_DTYPE_UINT32)       \
  X(A, u64, TOPLU_DTYPE_UINT64)
#define DTYPES_INNER(X, A)            \
  X(A, f32, TOPLU_DTYPE_FLOAT)        \
  X(A, f64, TOPLU_DTYPE_DOUBLE)       \
  X(A, f16, TOPLU_DTYPE_FLOAT16)      \
  X(A, bf16, TOPLU_DTYPE_BFLOAT16)    \
  X(A, i8, TOPLU_DTYPE_INT8)          \
  X(A, i16, TOPLU_DTYPE_INT16)        \
  X(A, i32, TOPLU_DTYPE_INT32)        \
  X(A, i64, TOPLU_DTYPE_INT64)        \
  X(A, bool, TOPLU_DTYPE_BOOL)        \
  X(A, u8, TOPLU_DTYPE_UINT8)         \
  X(A, u16, TOPLU_DTYPE_UINT16)       \
  X(A, u32, TOPLU_DTYPE_UINT32)       \
  X(A, u64, TOPLU_DTYPE_UINT64)

/* The 13 x 13 loops (the diagonal too: tiny, and replaced by copies). */
#define GEN_PAIR(S, D, DDT) CAST_FN(S, D)
#define GEN_FOR_SRC(_, S, SDT) DTYPES_INNER(GEN_PAIR, S)
DTYPES_OUTER(GEN_FOR_SRC, _)

#define ENTRY(S, D, DDT) [DDT] = cast_##S##_##D,
#define ROW(_, S, SDT) [SDT] = {DTYPES_INNER(ENTRY, S)},
static const toplu__ew_cast_fn cast_table[17][17] = {DTYPES_OUTER(ROW, _)};

/* Plain copies for same-dtype casts of 1, 2, 4, 8-byte elements (y may be x). */
static void copy1(int64_t n, const void *x, void *y) {
  if (x != y) memmove(y, x, (size_t)n);
}
static void copy2(int64_t n, const void *x, void *y) {
  if (x != y) memmove(y, x, (size_t)n * 2);
}
static void copy4(int64_t n, const void *x, void *y) {
  if (x != y) memmove(y, x, (size_t)n * 4);
}
static void copy8(int64_t n, const void *x, void *y) {
  if (x != y) memmove(y, x, (size_t)n * 8);
}

/* The table entry, or a copy for same-dtype casts. */
toplu__ew_cast_fn toplu__ew_cast_lookup(toplu_dtype_t from, toplu_dtype_t to) {
  if ((int)from < 0 || (int)from >= 17 || (int)to < 0 || (int)to >= 17) return NULL;
  if (!cast_table[from][to]) return NULL;
  if (from == to) {
    switch (toplu_dtype_size(from)) {
      case 1: return copy1;
      case 2: return copy2;
      case 4: return copy4;
      case 8: return copy8;
      default: return NULL;
    }
  }
  return cast_table[from][to];
}
