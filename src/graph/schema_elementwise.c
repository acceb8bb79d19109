/*
 * graph/schema_elementwise.c - schemas of the element-wise ops: shape and
 * type inference (symbolic dims allowed) and type checks that hold for every
 * binding.  Kernels: ops/elementwise.c.
 *
 * ONNX versions followed (since_version is the oldest opset accepted; later
 * versions only widened the types):
 *   unary (output = input): Relu-6/13/14, LeakyRelu-6/16, Sigmoid-6/13,
 *     Tanh-6/13, HardSigmoid-6, HardSwish-14, Sqrt/Exp/Log-6/13,
 *     Abs/Neg/Reciprocal/Floor/Ceil-6/13, Round-11, Erf-9/13, Softplus-1,
 *     Softsign-1, Elu-6, Selu-6, Celu-12, ThresholdedRelu-10, Shrink-9,
 *     Sign-9/13, Not-1, Sin/Cos/Tan/Asin/Acos/Atan-7,
 *     Sinh/Cosh/Asinh/Acosh/Atanh-9; IsNaN-9/13 and IsInf-10 (bool output);
 *   Clip-6 (min/max attributes) and Clip-11/12/13 (optional scalar inputs 1
 *     and 2, bound by position: an empty name is absent);
 *   binary with multidirectional broadcasting: Add/Sub/Mul/Div-7/13/14,
 *     Pow-7/12/13/15 (base and exponent may differ in type; output takes
 *     the base's), Mod-10/13, Equal/Less/Greater-7/9/11/13 and
 *     LessOrEqual/GreaterOrEqual-12/16 (bool output), And/Or/Xor-7 (bool),
 *     PRelu-7/9/16 (slope broadcasts to X; output is X's shape), BitShift-11;
 *   Max/Min/Sum/Mean-6/8/13 (1..N inputs, broadcasting), Where-9/16;
 *   Cast-6/9/13 (`to` attribute), CastLike-15 (type of input 1).
 */
#include <string.h>

#include "graph/schema.h"

/* Most inputs a variadic op takes here. */
#define MAX_VARIADIC 64

/* Error unless inputs i and j have one dtype (unknown dtypes pass). */
static toplu_status_t same_dtype(toplu__infer_ctx_t *ctx, int i, int j) {
  toplu_dtype_t a = ctx->in[i].dtype, b = ctx->in[j].dtype;
  if (a == TOPLU_DTYPE_UNDEFINED || b == TOPLU_DTYPE_UNDEFINED || a == b) return TOPLU_OK;
  return toplu__infer_error(ctx, TOPLU_ERR_SHAPE, "inputs %d and %d have different types (%s and %s)", i, j,
                           toplu_dtype_name(a), toplu_dtype_name(b));
}

/* Error unless input i is bool (or unknown). */
static toplu_status_t need_bool(toplu__infer_ctx_t *ctx, int i) {
  toplu_dtype_t t = ctx->in[i].dtype;
  if (t == TOPLU_DTYPE_UNDEFINED || t == TOPLU_DTYPE_BOOL) return TOPLU_OK;
  return toplu__infer_error(ctx, TOPLU_ERR_SHAPE, "input %d must be bool, not %s", i, toplu_dtype_name(t));
}

/* Output 0 = broadcast of the inputs listed in idx, with dtype dt; an input
 * of unknown rank makes the output's rank unknown. */
static toplu_status_t set_broadcast(toplu__infer_ctx_t *ctx, const int *idx, int n, toplu_dtype_t dt) {
  for (int k = 0; k < n; k++)
    if (ctx->in[idx[k]].ndim < 0) {
      toplu__infer_set(ctx, 0, dt, -1, NULL);
      return TOPLU_OK;
    }
  int nd;
  int64_t dims[TOPLU_MAX_DIMS];
  toplu_status_t st = toplu__infer_broadcast(ctx, idx, n, &nd, dims);
  if (st) return st;
  toplu__infer_set(ctx, 0, dt, nd, dims);
  return TOPLU_OK;
}

/* Relu, Sigmoid, ...: output is the input's type and shape. */
/* Gelu-20: approximate is "none" or "tanh" (ONNX operator spec); the rest as a unary op. */
static toplu_status_t infer_gelu(toplu__infer_ctx_t *ctx) {
  const char *a = toplu__node_attr_string(ctx->node, "approximate", "none");
  if (strcmp(a, "none") && strcmp(a, "tanh"))
    return toplu__infer_error(ctx, TOPLU_ERR_INVALID_MODEL, "approximate is '%s'; expected none or tanh", a);
  toplu_dtype_t dt = ctx->in[0].dtype;
  if (dt != TOPLU_DTYPE_FLOAT && dt != TOPLU_DTYPE_DOUBLE && dt != TOPLU_DTYPE_FLOAT16 && dt != TOPLU_DTYPE_BFLOAT16)
    return toplu__infer_error(ctx, TOPLU_ERR_UNSUPPORTED, "input is %s; expected a float type",
                             toplu_dtype_name(ctx->in[0].dtype));
  toplu__infer_same(ctx, 0, 0);
  return TOPLU_OK;
}

static toplu_status_t infer_unary(toplu__infer_ctx_t *ctx) {
  if (ctx->in[0].dtype == TOPLU_DTYPE_STRING)
    return toplu__infer_error(ctx, TOPLU_ERR_SHAPE, "%s does not take strings", ctx->node->op_type);
  toplu__infer_same(ctx, 0, 0);
  return TOPLU_OK;
}

/* Not-1: bool in, bool out. */
static toplu_status_t infer_not(toplu__infer_ctx_t *ctx) {
  toplu_status_t st = need_bool(ctx, 0);
  if (st) return st;
  toplu__infer_same(ctx, 0, 0);
  return TOPLU_OK;
}

/* IsNaN, IsInf: bool output of the input's shape. */
static toplu_status_t infer_classify(toplu__infer_ctx_t *ctx) {
  toplu__infer_set(ctx, 0, TOPLU_DTYPE_BOOL, ctx->in[0].ndim, ctx->in[0].dims);
  return TOPLU_OK;
}

/* Clip-6 takes one input; Clip-11+ takes optional scalar min and max of the
 * input's type. */
static toplu_status_t infer_clip(toplu__infer_ctx_t *ctx) {
  if (ctx->node->opset < 11 && ctx->n_in > 1 && (toplu__infer_has_input(ctx, 1) || toplu__infer_has_input(ctx, 2)))
    return toplu__infer_error(ctx, TOPLU_ERR_INVALID_MODEL, "Clip before opset 11 takes min and max as attributes, not inputs");
  for (int i = 1; i <= 2; i++) {
    if (!toplu__infer_has_input(ctx, i)) continue;
    const toplu_tensor_t *t = &ctx->in[i];
    toplu_status_t st = same_dtype(ctx, 0, i);
    if (st) return st;
    int64_t n = 1;
    int known = t->ndim >= 0;
    for (int d = 0; d < t->ndim; d++) {
      if (t->dims[d] < 0) known = 0;
      else n *= t->dims[d];
    }
    if (known && n != 1)
      return toplu__infer_error(ctx, TOPLU_ERR_SHAPE, "%s must be a scalar (it has %lld elements)", i == 1 ? "min" : "max",
                               (long long)n);
  }
  toplu__infer_same(ctx, 0, 0);
  return TOPLU_OK;
}

/* Add, Sub, Mul, Div, Mod, BitShift: same types, broadcast. */
static toplu_status_t infer_arith(toplu__infer_ctx_t *ctx) {
  toplu_status_t st = same_dtype(ctx, 0, 1);
  if (st) return st;
  if (ctx->in[0].dtype == TOPLU_DTYPE_STRING || ctx->in[0].dtype == TOPLU_DTYPE_BOOL)
    return toplu__infer_error(ctx, TOPLU_ERR_SHAPE, "%s does not take %s inputs", ctx->node->op_type,
                             toplu_dtype_name(ctx->in[0].dtype));
  if (!strcmp(ctx->node->op_type, "Mod") && toplu__node_attr_int(ctx->node, "fmod", 0) == 0) {
    toplu_dtype_t t = ctx->in[0].dtype;
    if (t == TOPLU_DTYPE_FLOAT || t == TOPLU_DTYPE_DOUBLE || t == TOPLU_DTYPE_FLOAT16 || t == TOPLU_DTYPE_BFLOAT16)
      return toplu__infer_error(ctx, TOPLU_ERR_INVALID_MODEL, "Mod on %s inputs needs fmod=1", toplu_dtype_name(t));
  }
  if (!strcmp(ctx->node->op_type, "BitShift")) {
    const char *dir = toplu__node_attr_string(ctx->node, "direction", "");
    if (strcmp(dir, "LEFT") && strcmp(dir, "RIGHT"))
      return toplu__infer_error(ctx, TOPLU_ERR_INVALID_MODEL, "direction must be LEFT or RIGHT, not '%s'", dir);
  }
  static const int idx[2] = {0, 1};
  return set_broadcast(ctx, idx, 2, ctx->in[0].dtype);
}

/* Pow: base and exponent types may differ; the output has the base's. */
static toplu_status_t infer_pow(toplu__infer_ctx_t *ctx) {
  static const int idx[2] = {0, 1};
  return set_broadcast(ctx, idx, 2, ctx->in[0].dtype);
}

/* Equal, Less, Greater, LessOrEqual, GreaterOrEqual: bool output. */
static toplu_status_t infer_compare(toplu__infer_ctx_t *ctx) {
  toplu_status_t st = same_dtype(ctx, 0, 1);
  if (st) return st;
  static const int idx[2] = {0, 1};
  return set_broadcast(ctx, idx, 2, TOPLU_DTYPE_BOOL);
}

/* And, Or, Xor: bool inputs and output. */
static toplu_status_t infer_logic(toplu__infer_ctx_t *ctx) {
  toplu_status_t st;
  if ((st = need_bool(ctx, 0)) || (st = need_bool(ctx, 1))) return st;
  static const int idx[2] = {0, 1};
  return set_broadcast(ctx, idx, 2, TOPLU_DTYPE_BOOL);
}

/* PRelu: the slope broadcasts to X (unidirectionally); output is X's shape. */
static toplu_status_t infer_prelu(toplu__infer_ctx_t *ctx) {
  toplu_status_t st = same_dtype(ctx, 0, 1);
  if (st) return st;
  const toplu_tensor_t *x = &ctx->in[0], *s = &ctx->in[1];
  if (x->ndim >= 0 && s->ndim >= 0) {
    if (s->ndim > x->ndim)
      return toplu__infer_error(ctx, TOPLU_ERR_SHAPE, "slope has rank %d, above X's %d", s->ndim, x->ndim);
    for (int d = 0; d < s->ndim; d++) {
      int64_t a = x->dims[x->ndim - s->ndim + d], b = s->dims[d];
      if (a >= 0 && b >= 0 && b != 1 && a != b) {
        char sx[160], ss[160];
        return toplu__infer_error(ctx, TOPLU_ERR_SHAPE, "slope %s does not broadcast to X %s",
                                 toplu__graph_shape_format(ctx->graph, s->ndim, s->dims, ss, sizeof ss),
                                 toplu__graph_shape_format(ctx->graph, x->ndim, x->dims, sx, sizeof sx));
      }
    }
  }
  toplu__infer_same(ctx, 0, 0);
  return TOPLU_OK;
}

/* Max, Min, Sum, Mean: 1..N inputs of one type, broadcast together. */
static toplu_status_t infer_variadic(toplu__infer_ctx_t *ctx) {
  int idx[MAX_VARIADIC];
  int n = ctx->n_in;
  if (n > MAX_VARIADIC)
    return toplu__infer_error(ctx, TOPLU_ERR_UNSUPPORTED, "%d inputs; at most %d are supported", n, MAX_VARIADIC);
  for (int i = 0; i < n; i++) {
    if (!toplu__infer_has_input(ctx, i)) return toplu__infer_error(ctx, TOPLU_ERR_INVALID_MODEL, "input %d is empty", i);
    toplu_status_t st = same_dtype(ctx, 0, i);
    if (st) return st;
    idx[i] = i;
  }
  return set_broadcast(ctx, idx, n, ctx->in[0].dtype);
}

/* Where: bool condition, X and Y of one type; all three broadcast. */
static toplu_status_t infer_where(toplu__infer_ctx_t *ctx) {
  toplu_status_t st;
  if ((st = need_bool(ctx, 0)) || (st = same_dtype(ctx, 1, 2))) return st;
  static const int idx[3] = {0, 1, 2};
  return set_broadcast(ctx, idx, 3, ctx->in[1].dtype);
}

/* Cast: output type from `to`, shape of the input. */
static toplu_status_t infer_cast(toplu__infer_ctx_t *ctx) {
  const toplu__attr_t *a = toplu__node_attr(ctx->node, "to");
  if (!a || a->type != TOPLU_ATTR_INT)
    return toplu__infer_error(ctx, TOPLU_ERR_INVALID_MODEL, "Cast needs an integer attribute 'to'");
  toplu_dtype_t to = (toplu_dtype_t)a->i;
  if ((a->i == TOPLU_DTYPE_STRING || ctx->in[0].dtype == TOPLU_DTYPE_STRING) &&
      (a->i == TOPLU_DTYPE_BOOL || ctx->in[0].dtype == TOPLU_DTYPE_BOOL))
    return toplu__infer_error(ctx, TOPLU_ERR_UNSUPPORTED, "casts between bool and string are not supported");
  if (a->i < 0 || a->i > 64 || toplu_dtype_size(to) == 0)
    return toplu__infer_error(ctx, TOPLU_ERR_UNSUPPORTED, "Cast to type %lld is not supported", (long long)a->i);
  toplu__infer_set(ctx, 0, to, ctx->in[0].ndim, ctx->in[0].dims);
  return TOPLU_OK;
}

/* CastLike: output type of input 1, shape of input 0. */
static toplu_status_t infer_castlike(toplu__infer_ctx_t *ctx) {
  toplu_dtype_t to = ctx->in[1].dtype;
  if ((to == TOPLU_DTYPE_STRING || ctx->in[0].dtype == TOPLU_DTYPE_STRING) &&
      (to == TOPLU_DTYPE_BOOL || ctx->in[0].dtype == TOPLU_DTYPE_BOOL))
    return toplu__infer_error(ctx, TOPLU_ERR_UNSUPPORTED, "casts between bool and string are not supported");
  toplu__infer_set(ctx, 0, to, ctx->in[0].ndim, ctx->in[0].dims);
  return TOPLU_OK;
}

#define UNARY(NAME, SINCE) {NAME, "", SINCE, 1, 1, 1, 1, 0, infer_unary, NULL, NULL}
#define ARITH(NAME, SINCE) {NAME, "", SINCE, 2, 2, 1, 1, 0, infer_arith, NULL, NULL}
#define COMPARE(NAME, SINCE) {NAME, "", SINCE, 2, 2, 1, 1, 0, infer_compare, NULL, NULL}
#define LOGIC(NAME) {NAME, "", 7, 2, 2, 1, 1, 0, infer_logic, NULL, NULL}
#define VARIADIC(NAME) {NAME, "", 6, 1, MAX_VARIADIC, 1, 1, 0, infer_variadic, NULL, NULL}

const toplu__schema_t toplu__schemas_elementwise[] = {
    UNARY("Relu", 6),
    UNARY("LeakyRelu", 6),
    UNARY("Sigmoid", 6),
    UNARY("Tanh", 6),
    UNARY("HardSigmoid", 6),
    UNARY("HardSwish", 14),
    UNARY("Sqrt", 6),
    UNARY("Exp", 6),
    UNARY("Log", 6),
    UNARY("Abs", 6),
    UNARY("Neg", 6),
    UNARY("Reciprocal", 6),
    UNARY("Floor", 6),
    UNARY("Ceil", 6),
    UNARY("Round", 11),
    UNARY("Erf", 9),
    UNARY("Softplus", 1),
    {"Gelu", "", 20, 1, 1, 1, 1, 0, infer_gelu, NULL, NULL},
    UNARY("Mish", 18),
    UNARY("Softsign", 1),
    UNARY("Elu", 6),
    UNARY("Selu", 6),
    UNARY("Sign", 9),
    UNARY("Sin", 7),
    UNARY("Cos", 7),
    UNARY("Tan", 7),
    UNARY("Asin", 7),
    UNARY("Acos", 7),
    UNARY("Atan", 7),
    UNARY("Sinh", 9),
    UNARY("Cosh", 9),
    UNARY("Asinh", 9),
    UNARY("Acosh", 9),
    UNARY("Atanh", 9),
    UNARY("Celu", 12),
    UNARY("ThresholdedRelu", 10),
    UNARY("Shrink", 9),
    {"IsNaN", "", 9, 1, 1, 1, 1, 0, infer_classify, NULL, NULL},
    {"IsInf", "", 10, 1, 1, 1, 1, 0, infer_classify, NULL, NULL},
    {"Not", "", 1, 1, 1, 1, 1, 0, infer_not, NULL, NULL},
    {"Clip", "", 6, 1, 3, 1, 1, 0, infer_clip, NULL, NULL},
    ARITH("Add", 7),
    ARITH("Sub", 7),
    ARITH("Mul", 7),
    ARITH("Div", 7),
    ARITH("Mod", 10),
    {"Pow", "", 7, 2, 2, 1, 1, 0, infer_pow, NULL, NULL},
    COMPARE("Equal", 7),
    COMPARE("Less", 7),
    COMPARE("Greater", 7),
    COMPARE("LessOrEqual", 12),
    COMPARE("GreaterOrEqual", 12),
    LOGIC("And"),
    LOGIC("Or"),
    LOGIC("Xor"),
    {"PRelu", "", 7, 2, 2, 1, 1, 0, infer_prelu, NULL, NULL},
    ARITH("BitShift", 11),
    VARIADIC("Max"),
    VARIADIC("Min"),
    VARIADIC("Sum"),
    VARIADIC("Mean"),
    {"Where", "", 9, 3, 3, 1, 1, 0, infer_where, NULL, NULL},
    {"Cast", "", 6, 1, 1, 1, 1, 0, infer_cast, NULL, NULL},
    {"CastLike", "", 15, 2, 2, 1, 1, 0, infer_castlike, NULL, NULL},
    {NULL, NULL, 0, 0, 0, 0, 0, 0, NULL, NULL, NULL},
};
