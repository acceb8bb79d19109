/*
 * ops/elementwise_loops.h - the typed inner loops of the element-wise
 * kernels (ops/elementwise.c), looked up once per node at prepare.
 *
 *   unary  (ops/elementwise_unary.c):  y[i] = f(x[i]) over n contiguous
 *          elements, with the node's attributes in toplu__ew_params_t;
 *   binary (ops/elementwise_binary.c): vv/vs/sv loops for the broadcast
 *          driver of ops/broadcast.h;
 *   cast   (ops/elementwise_cast.c):   y[i] = (D)x[i] for any pair of
 *          numeric dtypes.
 * float16 and bfloat16 compute in float and round back (to nearest even).
 * A lookup returns NULL when the op does not take that dtype.
 */
#ifndef TOPLU_OPS_ELEMENTWISE_LOOPS_H
#define TOPLU_OPS_ELEMENTWISE_LOOPS_H

#include <stdint.h>

#include "ops/broadcast.h"
#include "toplu/tensor.h"

/* Attributes and bounds of a unary op. */
typedef struct toplu__ew_params {
  float alpha, beta, gamma;   /* LeakyRelu/Elu/Selu alpha, HardSigmoid alpha and beta, Selu gamma */
  double dlo, dhi;            /* Clip bounds for floating-point dtypes (-inf/+inf when absent) */
  int64_t ilo, ihi;           /* Clip bounds for signed integers (INT64_MIN/INT64_MAX when absent) */
  uint64_t ulo, uhi;          /* Clip bounds for unsigned integers (0/UINT64_MAX when absent) */
  int detect_negative, detect_positive; /* IsInf */
} toplu__ew_params_t;

typedef void (*toplu__ew_unary_fn)(int64_t n, const void *x, void *y, const toplu__ew_params_t *p);

typedef enum toplu__ew_unary_op {
  TOPLU_EW_RELU, TOPLU_EW_LEAKY_RELU, TOPLU_EW_SIGMOID, TOPLU_EW_TANH, TOPLU_EW_HARD_SIGMOID,
  TOPLU_EW_HARD_SWISH, TOPLU_EW_SQRT, TOPLU_EW_EXP, TOPLU_EW_LOG, TOPLU_EW_ABS, TOPLU_EW_NEG,
  TOPLU_EW_RECIPROCAL, TOPLU_EW_FLOOR, TOPLU_EW_CEIL, TOPLU_EW_ROUND, TOPLU_EW_ERF, TOPLU_EW_SOFTPLUS,
  TOPLU_EW_ELU, TOPLU_EW_SELU, TOPLU_EW_SIGN, TOPLU_EW_NOT, TOPLU_EW_CLIP, TOPLU_EW_SOFTSIGN,
  TOPLU_EW_SIN, TOPLU_EW_COS, TOPLU_EW_TAN, TOPLU_EW_ASIN, TOPLU_EW_ACOS, TOPLU_EW_ATAN,
  TOPLU_EW_SINH, TOPLU_EW_COSH, TOPLU_EW_ASINH, TOPLU_EW_ACOSH, TOPLU_EW_ATANH,
  TOPLU_EW_CELU,             /* alpha */
  TOPLU_EW_THRESHOLDED_RELU, /* alpha */
  TOPLU_EW_SHRINK,           /* lambd in alpha, bias in beta */
  TOPLU_EW_GELU,             /* approximate in alpha: 0 none (erf), 1 tanh (Gelu-20) */
  TOPLU_EW_MISH,             /* x * tanh(softplus(x)) (Mish-18) */
  TOPLU_EW_ISNAN, TOPLU_EW_ISINF, /* bool output */
  TOPLU_EW_UNARY_COUNT
} toplu__ew_unary_op_t;

/* The loop of a unary op for input dtype (the output has the same dtype,
 * except bool for IsNaN and IsInf), or NULL. */
toplu__ew_unary_fn toplu__ew_unary_lookup(toplu__ew_unary_op_t op, toplu_dtype_t dtype);

typedef enum toplu__ew_binary_op {
  TOPLU_EW_ADD, TOPLU_EW_SUB, TOPLU_EW_MUL, TOPLU_EW_DIV,
  TOPLU_EW_MOD, TOPLU_EW_FMOD, /* Mod with fmod=0 (sign of the divisor) and fmod=1 (sign of the dividend) */
  TOPLU_EW_MAX, TOPLU_EW_MIN,
  TOPLU_EW_EQUAL, TOPLU_EW_LESS, TOPLU_EW_GREATER, TOPLU_EW_LESS_EQUAL, TOPLU_EW_GREATER_EQUAL, /* bool out */
  TOPLU_EW_AND, TOPLU_EW_OR, TOPLU_EW_XOR,                                                     /* bool in/out */
  TOPLU_EW_PRELU, /* a < 0 ? a * b : a */
  TOPLU_EW_SHIFT_LEFT, TOPLU_EW_SHIFT_RIGHT, /* BitShift on unsigned integers (shifts >= the width give 0) */
  TOPLU_EW_BINARY_COUNT
} toplu__ew_binary_op_t;

/* Loops of a binary op whose inputs are both `dtype`, or NULL. */
const toplu__binary_loops_t *toplu__ew_binary_lookup(toplu__ew_binary_op_t op, toplu_dtype_t dtype);

/*
 * Pow-15 with base dtype `base`: the loops (NULL when the base dtype is not
 * supported) and, in *exp_dtype, the dtype the exponent must be converted
 * to first (float for floating bases; int64 or double for integer bases,
 * after whether the exponent is an integer or floating dtype `exponent`).
 */
const toplu__binary_loops_t *toplu__ew_pow_lookup(toplu_dtype_t base, toplu_dtype_t exponent, toplu_dtype_t *exp_dtype);

typedef void (*toplu__ew_cast_fn)(int64_t n, const void *x, void *y);

/*
 * Conversion from `from` to `to` (numeric dtypes and bool; not string).
 * Floating to integer truncates toward zero (NaN gives 0, out of range
 * saturates at int64 before narrowing); anything to bool is x != 0;
 * float16 rounds to nearest even, bfloat16 truncates toward zero (as the
 * ONNX 1.12 Cast tests expect; see ops/elementwise_cast.c).  NULL when
 * unsupported.
 */
toplu__ew_cast_fn toplu__ew_cast_lookup(toplu_dtype_t from, toplu_dtype_t to);

#endif
