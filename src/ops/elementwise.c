/*
 * ops/elementwise.c - element-wise kernels.
 *
 * Ops (ONNX versions whose semantics they follow):
 *   unary   Relu-14, LeakyRelu-16, Sigmoid-13, Tanh-13, HardSigmoid-6,
 *           HardSwish-14, Sqrt-13, Exp-13, Log-13, Abs-13, Neg-13,
 *           Reciprocal-13, Floor-13, Ceil-13, Round-11, Erf-13, Softplus-1,
 *           Softsign-1, Elu-6, Selu-6, Celu-12, ThresholdedRelu-10, Shrink-9,
 *           Sign-13, Not-1, Sin/Cos/Tan/Asin/Acos/Atan-7,
 *           Sinh/Cosh/Asinh/Acosh/Atanh-9, IsNaN-13 and IsInf-10 (bool out),
 *           Clip-6 (min/max attributes) and Clip-11/12/13 (optional inputs
 *           1 and 2, read at run time, so they need not be constant);
 *   binary  Add/Sub/Mul/Div-14, Pow-15 (mixed base/exponent dtypes), Mod-13,
 *           Equal/Less/Greater-13, LessOrEqual/GreaterOrEqual-16,
 *           And/Or/Xor-7, PRelu-16 (slope broadcast to X), BitShift-11;
 *   n-ary   Max/Min/Sum/Mean-13 (1..N inputs, broadcasting), Where-16;
 *   cast    Cast-13, CastLike-15.
 *
 * prepare() picks the typed loops (ops/elementwise_loops.h) and, for the
 * broadcasting ops, the coalesced broadcast description (ops/broadcast.h),
 * and keeps both in a small state; run() only walks memory.  Output 0 may
 * share the buffer of the input that has the output's size (the planner
 * decides; info->inplace_input tells it which input).
 */
#include <math.h>
#include <stdint.h>
#include <string.h>

#include "graph/schema.h"
#include "ops/strings.h"
#include "ops/broadcast.h"
#include "ops/dynquant.h"
#include "ops/elementwise_loops.h"
#include "ops/fastmath.h"
#include "ops/kernel.h"

typedef enum ew_kind { EW_UNARY, EW_BINARY, EW_POW, EW_VARIADIC, EW_WHERE, EW_CAST } ew_kind_t;

/* Which op a node type maps to. */
typedef struct ew_op {
  const char *op_type;
  ew_kind_t kind;
  int op; /* toplu__ew_unary_op_t or toplu__ew_binary_op_t; for EW_VARIADIC the binary op; Mod: MOD */
} ew_op_t;

static const ew_op_t ew_ops[] = {
    {"Relu", EW_UNARY, TOPLU_EW_RELU},
    {"LeakyRelu", EW_UNARY, TOPLU_EW_LEAKY_RELU},
    {"Sigmoid", EW_UNARY, TOPLU_EW_SIGMOID},
    {"Tanh", EW_UNARY, TOPLU_EW_TANH},
    {"HardSigmoid", EW_UNARY, TOPLU_EW_HARD_SIGMOID},
    {"HardSwish", EW_UNARY, TOPLU_EW_HARD_SWISH},
    {"Sqrt", EW_UNARY, TOPLU_EW_SQRT},
    {"Exp", EW_UNARY, TOPLU_EW_EXP},
    {"Log", EW_UNARY, TOPLU_EW_LOG},
    {"Abs", EW_UNARY, TOPLU_EW_ABS},
    {"Neg", EW_UNARY, TOPLU_EW_NEG},
    {"Reciprocal", EW_UNARY, TOPLU_EW_RECIPROCAL},
    {"Floor", EW_UNARY, TOPLU_EW_FLOOR},
    {"Ceil", EW_UNARY, TOPLU_EW_CEIL},
    {"Round", EW_UNARY, TOPLU_EW_ROUND},
    {"Erf", EW_UNARY, TOPLU_EW_ERF},
    {"Softplus", EW_UNARY, TOPLU_EW_SOFTPLUS},
    {"Gelu", EW_UNARY, TOPLU_EW_GELU},
    {"Mish", EW_UNARY, TOPLU_EW_MISH},
    {"Softsign", EW_UNARY, TOPLU_EW_SOFTSIGN},
    {"Elu", EW_UNARY, TOPLU_EW_ELU},
    {"Selu", EW_UNARY, TOPLU_EW_SELU},
    {"Sign", EW_UNARY, TOPLU_EW_SIGN},
    {"Not", EW_UNARY, TOPLU_EW_NOT},
    {"Clip", EW_UNARY, TOPLU_EW_CLIP},
    {"Sin", EW_UNARY, TOPLU_EW_SIN},
    {"Cos", EW_UNARY, TOPLU_EW_COS},
    {"Tan", EW_UNARY, TOPLU_EW_TAN},
    {"Asin", EW_UNARY, TOPLU_EW_ASIN},
    {"Acos", EW_UNARY, TOPLU_EW_ACOS},
    {"Atan", EW_UNARY, TOPLU_EW_ATAN},
    {"Sinh", EW_UNARY, TOPLU_EW_SINH},
    {"Cosh", EW_UNARY, TOPLU_EW_COSH},
    {"Asinh", EW_UNARY, TOPLU_EW_ASINH},
    {"Acosh", EW_UNARY, TOPLU_EW_ACOSH},
    {"Atanh", EW_UNARY, TOPLU_EW_ATANH},
    {"Celu", EW_UNARY, TOPLU_EW_CELU},
    {"ThresholdedRelu", EW_UNARY, TOPLU_EW_THRESHOLDED_RELU},
    {"Shrink", EW_UNARY, TOPLU_EW_SHRINK},
    {"IsNaN", EW_UNARY, TOPLU_EW_ISNAN},
    {"IsInf", EW_UNARY, TOPLU_EW_ISINF},
    {"Add", EW_BINARY, TOPLU_EW_ADD},
    {"Sub", EW_BINARY, TOPLU_EW_SUB},
    {"Mul", EW_BINARY, TOPLU_EW_MUL},
    {"Div", EW_BINARY, TOPLU_EW_DIV},
    {"Mod", EW_BINARY, TOPLU_EW_MOD},
    {"Equal", EW_BINARY, TOPLU_EW_EQUAL},
    {"Less", EW_BINARY, TOPLU_EW_LESS},
    {"Greater", EW_BINARY, TOPLU_EW_GREATER},
    {"LessOrEqual", EW_BINARY, TOPLU_EW_LESS_EQUAL},
    {"GreaterOrEqual", EW_BINARY, TOPLU_EW_GREATER_EQUAL},
    {"And", EW_BINARY, TOPLU_EW_AND},
    {"Or", EW_BINARY, TOPLU_EW_OR},
    {"Xor", EW_BINARY, TOPLU_EW_XOR},
    {"PRelu", EW_BINARY, TOPLU_EW_PRELU},
    {"BitShift", EW_BINARY, TOPLU_EW_SHIFT_LEFT},
    {"Pow", EW_POW, 0},
    {"Max", EW_VARIADIC, TOPLU_EW_MAX},
    {"Min", EW_VARIADIC, TOPLU_EW_MIN},
    {"Sum", EW_VARIADIC, TOPLU_EW_ADD},
    {"Mean", EW_VARIADIC, TOPLU_EW_ADD},
    {"Where", EW_WHERE, 0},
    {"Cast", EW_CAST, 0},
    {"CastLike", EW_CAST, 0},
};

/* Per-node state, made by prepare (read-only in run). */
typedef struct ew_state {
  toplu__ew_unary_fn unary;            /* EW_UNARY */
  toplu__ew_params_t params;           /* EW_UNARY attributes and Clip-6 bounds */
  int clip_inputs;                    /* Clip-11+: bounds come from inputs 1 and 2 */
  const toplu__binary_loops_t *binary; /* EW_BINARY, EW_POW, EW_VARIADIC */
  toplu__ew_cast_fn cast;              /* EW_CAST; EW_POW: exponent conversion (NULL: none) */
  void *exponent;                     /* EW_POW: converted constant exponent (NULL: convert at run) */
  size_t exponent_size;               /* EW_POW: element size after conversion */
  const toplu__binary_loops_t *div;    /* Mean: division by the input count */
  unsigned char count[8];             /* Mean: the input count in the dtype */
  size_t elem_size;                   /* EW_WHERE, EW_VARIADIC with one input: bytes per element */
  int n_bc;                           /* broadcast descriptions that follow */
  toplu__bcast_t bc[];                 /* EW_BINARY/EW_POW: 1; EW_WHERE: 1 (3 inputs); EW_VARIADIC: n_in - 1 */
} ew_state_t;

/* The ew_ops entry of a node, or NULL. */
static const ew_op_t *find_op(const char *op_type) {
  for (size_t i = 0; i < sizeof ew_ops / sizeof ew_ops[0]; i++)
    if (!strcmp(ew_ops[i].op_type, op_type)) return &ew_ops[i];
  return NULL;
}

/* 1 when input i is given (not an empty name) and has data or a shape. */
static int has_input(const toplu__kernel_ctx_t *ctx, int i) {
  return i < ctx->n_in && ctx->node->inputs[i] >= 0 && ctx->in[i].ndim >= 0;
}

/* Unsigned integer dtypes (bool included). */
static int is_unsigned(toplu_dtype_t t) {
  return t == TOPLU_DTYPE_UINT8 || t == TOPLU_DTYPE_UINT16 || t == TOPLU_DTYPE_UINT32 || t == TOPLU_DTYPE_UINT64 ||
         t == TOPLU_DTYPE_BOOL;
}

/* Floating-point dtypes. */
static int is_floating(toplu_dtype_t t) {
  return t == TOPLU_DTYPE_FLOAT || t == TOPLU_DTYPE_DOUBLE || t == TOPLU_DTYPE_FLOAT16 || t == TOPLU_DTYPE_BFLOAT16;
}

/* Read the one element of a Clip bound into the field its dtype uses. */
static void read_bound(const toplu_tensor_t *t, int upper, toplu__ew_params_t *p) {
  if (is_floating(t->dtype)) {
    double v = toplu__tensor_get_double(t, 0);
    if (upper) p->dhi = v;
    else p->dlo = v;
  } else if (is_unsigned(t->dtype)) {
    uint64_t v = t->dtype == TOPLU_DTYPE_UINT64 ? ((const uint64_t *)t->data)[0] : (uint64_t)toplu__tensor_get_int(t, 0);
    if (upper) p->uhi = v;
    else p->ulo = v;
  } else {
    int64_t v = toplu__tensor_get_int(t, 0);
    if (upper) p->ihi = v;
    else p->ilo = v;
  }
}

/* Bounds that clip nothing. */
static void clip_defaults(toplu__ew_params_t *p) {
  p->dlo = -INFINITY;
  p->dhi = INFINITY;
  p->ilo = INT64_MIN;
  p->ihi = INT64_MAX;
  p->ulo = 0;
  p->uhi = UINT64_MAX;
}

/* Allocate the state with room for n_bc broadcast descriptions. */
static ew_state_t *state_new(toplu__kernel_ctx_t *ctx, toplu__kernel_info_t *info, int n_bc, size_t extra) {
  size_t bytes = sizeof(ew_state_t) + (size_t)n_bc * sizeof(toplu__bcast_t) + extra;
  ew_state_t *s = toplu__kernel_alloc(ctx, bytes);
  if (!s) return NULL;
  memset(s, 0, bytes);
  s->n_bc = n_bc;
  info->state_bytes = bytes;
  ctx->state = s;
  return s;
}

/* Describe broadcasting ins[0..n-1] (node inputs idx[0..n-1]; -1: the
 * output itself) to the output; the error names the input that does not fit. */
static toplu_status_t make_bcast(toplu__kernel_ctx_t *ctx, toplu__bcast_t *bc, int n, const toplu_tensor_t *const *ins,
                                 const int *idx) {
  if (toplu__bcast_init(bc, n, ins, &ctx->out[0]) == 0) return TOPLU_OK;
  int bad = n - 1;
  for (int k = 0; k < n; k++) {
    toplu__bcast_t one;
    if (toplu__bcast_init(&one, 1, &ins[k], &ctx->out[0])) {
      bad = k;
      break;
    }
  }
  char s0[160], s1[160];
  return toplu__kernel_error(ctx, TOPLU_ERR_SHAPE, "input %d has shape %s, which does not broadcast to the output shape %s",
                            idx[bad], toplu_shape_format(ins[bad]->ndim, ins[bad]->dims, s0, sizeof s0),
                            toplu_shape_format(ctx->out[0].ndim, ctx->out[0].dims, s1, sizeof s1));
}

/* Let output 0 take over the buffer of the first of the listed inputs with its element count. */
static void pick_inplace(toplu__kernel_ctx_t *ctx, toplu__kernel_info_t *info, const int *cand, int n) {
  info->inplace_input = -1;
  int64_t ny = toplu_tensor_numel(&ctx->out[0]);
  for (int k = 0; k < n; k++) {
    int i = cand[k];
    if (has_input(ctx, i) && ctx->in[i].dtype == ctx->out[0].dtype && toplu_tensor_numel(&ctx->in[i]) == ny) {
      info->inplace_input = i;
      return;
    }
  }
}

/* TOPLU_ERR_UNSUPPORTED naming the op and the dtype. */
static toplu_status_t unsupported_dtype(toplu__kernel_ctx_t *ctx, toplu_dtype_t t) {
  return toplu__kernel_error(ctx, TOPLU_ERR_UNSUPPORTED, "toplu has no %s kernel for %s input", ctx->node->op_type,
                            toplu_dtype_name(t));
}

/* ---- prepare ---- */

/* A unary op's attributes (and Clip-6's bounds) from node n into p. */
static void unary_params(const toplu__node_t *n, toplu__ew_unary_op_t op, toplu__ew_params_t *p) {
  clip_defaults(p);
  switch (op) {
    case TOPLU_EW_LEAKY_RELU: p->alpha = toplu__node_attr_float(n, "alpha", 0.01f); break;
    case TOPLU_EW_HARD_SIGMOID:
      p->alpha = toplu__node_attr_float(n, "alpha", 0.2f);
      p->beta = toplu__node_attr_float(n, "beta", 0.5f);
      break;
    case TOPLU_EW_ELU: p->alpha = toplu__node_attr_float(n, "alpha", 1.0f); break;
    case TOPLU_EW_SELU:
      p->alpha = toplu__node_attr_float(n, "alpha", 1.67326319217681884765625f);
      p->gamma = toplu__node_attr_float(n, "gamma", 1.05070102214813232421875f);
      break;
    case TOPLU_EW_CELU: p->alpha = toplu__node_attr_float(n, "alpha", 1.0f); break;
    case TOPLU_EW_GELU: p->alpha = !strcmp(toplu__node_attr_string(n, "approximate", "none"), "tanh"); break;
    case TOPLU_EW_THRESHOLDED_RELU: p->alpha = toplu__node_attr_float(n, "alpha", 1.0f); break;
    case TOPLU_EW_SHRINK:
      p->alpha = toplu__node_attr_float(n, "lambd", 0.5f);
      p->beta = toplu__node_attr_float(n, "bias", 0.0f);
      break;
    case TOPLU_EW_ISINF:
      p->detect_negative = toplu__node_attr_int(n, "detect_negative", 1) != 0;
      p->detect_positive = toplu__node_attr_int(n, "detect_positive", 1) != 0;
      break;
    case TOPLU_EW_CLIP:
      if (n->opset < 11) {
        p->dlo = toplu__node_attr_float(n, "min", -INFINITY);
        p->dhi = toplu__node_attr_float(n, "max", INFINITY);
      }
      break;
    default: break;
  }
}

/* Unary ops and Clip: the loop for the dtype and the attributes (Clip-6 bounds). */
static toplu_status_t prepare_unary(toplu__kernel_ctx_t *ctx, toplu__kernel_info_t *info, toplu__ew_unary_op_t op) {
  const toplu__node_t *n = ctx->node;
  toplu_dtype_t dt = ctx->in[0].dtype;
  toplu__ew_unary_fn fn = toplu__ew_unary_lookup(op, dt);
  if (!fn) return unsupported_dtype(ctx, dt);
  toplu_dtype_t out_dt = op == TOPLU_EW_ISNAN || op == TOPLU_EW_ISINF ? TOPLU_DTYPE_BOOL : dt;
  if (ctx->out[0].dtype != out_dt || toplu_tensor_numel(&ctx->out[0]) != toplu_tensor_numel(&ctx->in[0]))
    return toplu__kernel_error(ctx, TOPLU_ERR_INTERNAL, "output type or size is not what the op makes");
  int clip_inputs = 0;
  if (op == TOPLU_EW_CLIP && n->opset >= 11) {
    for (int i = 1; i <= 2; i++) {
      if (!has_input(ctx, i)) continue;
      const toplu_tensor_t *t = &ctx->in[i];
      if (t->dtype != dt)
        return toplu__kernel_error(ctx, TOPLU_ERR_SHAPE, "%s is %s, the input is %s", i == 1 ? "min" : "max",
                                  toplu_dtype_name(t->dtype), toplu_dtype_name(dt));
      if (toplu_tensor_numel(t) != 1)
        return toplu__kernel_error(ctx, TOPLU_ERR_SHAPE, "%s must hold one value (it has %lld)", i == 1 ? "min" : "max",
                                  (long long)toplu_tensor_numel(t));
      clip_inputs = 1;
    }
  }
  ew_state_t *s = state_new(ctx, info, 0, 0);
  if (!s) return toplu__kernel_error(ctx, TOPLU_ERR_OUT_OF_MEMORY, "out of memory");
  s->unary = fn;
  s->clip_inputs = clip_inputs;
  unary_params(n, op, &s->params);
  return TOPLU_OK;
}

/* Broadcasting binary ops: same input dtypes, loops, broadcast description. */
static toplu_status_t prepare_binary(toplu__kernel_ctx_t *ctx, toplu__kernel_info_t *info, toplu__ew_binary_op_t op) {
  const toplu_tensor_t *a = &ctx->in[0], *b = &ctx->in[1];
  if (a->dtype != b->dtype)
    return toplu__kernel_error(ctx, TOPLU_ERR_SHAPE, "inputs have different types (%s and %s)",
                              toplu_dtype_name(a->dtype), toplu_dtype_name(b->dtype));
  if (op == TOPLU_EW_MOD && toplu__node_attr_int(ctx->node, "fmod", 0)) op = TOPLU_EW_FMOD;
  if (op == TOPLU_EW_SHIFT_LEFT) {
    const char *dir = toplu__node_attr_string(ctx->node, "direction", "");
    if (!strcmp(dir, "RIGHT")) op = TOPLU_EW_SHIFT_RIGHT;
    else if (strcmp(dir, "LEFT"))
      return toplu__kernel_error(ctx, TOPLU_ERR_INVALID_MODEL, "direction must be LEFT or RIGHT, not '%s'", dir);
  }
  const toplu__binary_loops_t *f = toplu__ew_binary_lookup(op, a->dtype);
  if (!f) return unsupported_dtype(ctx, a->dtype);
  if (toplu_dtype_size(ctx->out[0].dtype) != f->y_size)
    return toplu__kernel_error(ctx, TOPLU_ERR_INTERNAL, "output type %s does not fit", toplu_dtype_name(ctx->out[0].dtype));
  ew_state_t *s = state_new(ctx, info, 1, 0);
  if (!s) return toplu__kernel_error(ctx, TOPLU_ERR_OUT_OF_MEMORY, "out of memory");
  s->binary = f;
  const toplu_tensor_t *ins[2] = {a, b};
  static const int idx[2] = {0, 1};
  toplu_status_t st = make_bcast(ctx, &s->bc[0], 2, ins, idx);
  if (st) return st;
  /* PRelu's output is X's shape; the others may take either side. */
  static const int cand[2] = {0, 1};
  pick_inplace(ctx, info, cand, op == TOPLU_EW_PRELU ? 1 : 2);
  return TOPLU_OK;
}

/* Pow-15: loops for the base dtype; the exponent is converted to the dtype they
 * read (once here when it is constant, else into the workspace per run). */
static toplu_status_t prepare_pow(toplu__kernel_ctx_t *ctx, toplu__kernel_info_t *info) {
  const toplu_tensor_t *a = &ctx->in[0], *b = &ctx->in[1];
  toplu_dtype_t et = TOPLU_DTYPE_UNDEFINED;
  const toplu__binary_loops_t *f = toplu__ew_pow_lookup(a->dtype, b->dtype, &et);
  if (!f) return unsupported_dtype(ctx, a->dtype);
  toplu__ew_cast_fn conv = NULL;
  if (b->dtype != et && !(conv = toplu__ew_cast_lookup(b->dtype, et)))
    return toplu__kernel_error(ctx, TOPLU_ERR_UNSUPPORTED, "Pow does not take a %s exponent", toplu_dtype_name(b->dtype));
  int64_t nb = toplu_tensor_numel(b);
  size_t esz = toplu_dtype_size(et);
  size_t keep = conv && b->data ? (size_t)nb * esz : 0; /* constant exponent: converted once here */
  ew_state_t *s = state_new(ctx, info, 1, keep);
  if (!s) return toplu__kernel_error(ctx, TOPLU_ERR_OUT_OF_MEMORY, "out of memory");
  s->binary = f;
  s->exponent_size = esz;
  if (conv && b->data) {
    s->exponent = (unsigned char *)s + sizeof(ew_state_t) + sizeof(toplu__bcast_t);
    conv(nb, b->data, s->exponent);
  } else if (conv) {
    s->cast = conv;
    info->workspace_bytes = (size_t)nb * esz;
  }
  const toplu_tensor_t *ins[2] = {a, b};
  static const int idx[2] = {0, 1};
  toplu_status_t st = make_bcast(ctx, &s->bc[0], 2, ins, idx);
  if (st) return st;
  static const int cand[1] = {0};
  pick_inplace(ctx, info, cand, 1);
  return TOPLU_OK;
}

/* Max/Min/Sum/Mean: folded pairwise into the output; Mean divides at the end. */
static toplu_status_t prepare_variadic(toplu__kernel_ctx_t *ctx, toplu__kernel_info_t *info, toplu__ew_binary_op_t op) {
  int n = ctx->n_in;
  toplu_dtype_t dt = ctx->in[0].dtype;
  for (int i = 0; i < n; i++) {
    if (!has_input(ctx, i)) return toplu__kernel_error(ctx, TOPLU_ERR_INVALID_MODEL, "input %d is empty", i);
    if (ctx->in[i].dtype != dt)
      return toplu__kernel_error(ctx, TOPLU_ERR_SHAPE, "input %d is %s, input 0 is %s", i,
                                toplu_dtype_name(ctx->in[i].dtype), toplu_dtype_name(dt));
  }
  int mean = !strcmp(ctx->node->op_type, "Mean");
  const toplu__binary_loops_t *f = toplu__ew_binary_lookup(op, dt);
  const toplu__binary_loops_t *div = mean ? toplu__ew_binary_lookup(TOPLU_EW_DIV, dt) : NULL;
  if (!f || (mean && (!div || !is_floating(dt)))) return unsupported_dtype(ctx, dt);
  ew_state_t *s = state_new(ctx, info, n > 1 ? n - 1 : 0, 0);
  if (!s) return toplu__kernel_error(ctx, TOPLU_ERR_OUT_OF_MEMORY, "out of memory");
  s->binary = f;
  s->elem_size = toplu_dtype_size(dt);
  if (mean && n > 1) {
    double cnt = n;
    s->div = div;
    toplu__ew_cast_fn c = toplu__ew_cast_lookup(TOPLU_DTYPE_DOUBLE, dt);
    if (!c) return unsupported_dtype(ctx, dt);
    c(1, &cnt, s->count);
  }
  toplu_status_t st;
  if (n == 1) {
    if (toplu_tensor_numel(&ctx->in[0]) != toplu_tensor_numel(&ctx->out[0]))
      return toplu__kernel_error(ctx, TOPLU_ERR_INTERNAL, "output size differs from the input's");
  } else {
    const toplu_tensor_t *ins[2] = {&ctx->in[0], &ctx->in[1]};
    const int idx[2] = {0, 1};
    if ((st = make_bcast(ctx, &s->bc[0], 2, ins, idx))) return st;
    for (int k = 2; k < n; k++) {
      const toplu_tensor_t *acc[2] = {&ctx->out[0], &ctx->in[k]};
      const int acc_idx[2] = {-1, k};
      if ((st = make_bcast(ctx, &s->bc[k - 1], 2, acc, acc_idx))) return st;
    }
  }
  /* In place on input 0 unless a later input (read after the first step
   * wrote the output) is the same value. */
  static const int cand[1] = {0};
  pick_inplace(ctx, info, cand, 1);
  for (int k = 2; k < n; k++)
    if (ctx->node->inputs[k] == ctx->node->inputs[0]) info->inplace_input = -1;
  return TOPLU_OK;
}

/* Where: bool condition, X and Y of one dtype (copied by element size). */
static toplu_status_t prepare_where(toplu__kernel_ctx_t *ctx, toplu__kernel_info_t *info) {
  const toplu_tensor_t *c = &ctx->in[0], *x = &ctx->in[1], *y = &ctx->in[2];
  if (c->dtype != TOPLU_DTYPE_BOOL)
    return toplu__kernel_error(ctx, TOPLU_ERR_SHAPE, "condition is %s, not bool", toplu_dtype_name(c->dtype));
  if (x->dtype != y->dtype)
    return toplu__kernel_error(ctx, TOPLU_ERR_SHAPE, "X is %s and Y is %s", toplu_dtype_name(x->dtype),
                              toplu_dtype_name(y->dtype));
  size_t es = toplu_dtype_size(x->dtype);
  if (es != 1 && es != 2 && es != 4 && es != 8) return unsupported_dtype(ctx, x->dtype);
  ew_state_t *s = state_new(ctx, info, 1, 0);
  if (!s) return toplu__kernel_error(ctx, TOPLU_ERR_OUT_OF_MEMORY, "out of memory");
  s->elem_size = es;
  const toplu_tensor_t *ins[3] = {c, x, y};
  static const int idx[3] = {0, 1, 2};
  toplu_status_t st = make_bcast(ctx, &s->bc[0], 3, ins, idx);
  if (st) return st;
  static const int cand[2] = {1, 2};
  pick_inplace(ctx, info, cand, 2);
  return TOPLU_OK;
}

/* Cast and CastLike: the conversion loop for the pair of dtypes. */
static toplu_status_t prepare_cast(toplu__kernel_ctx_t *ctx, toplu__kernel_info_t *info) {
  toplu_dtype_t from = ctx->in[0].dtype, to = ctx->out[0].dtype;
  toplu__ew_cast_fn fn = toplu__ew_cast_lookup(from, to);
  if (!fn)
    return toplu__kernel_error(ctx, TOPLU_ERR_UNSUPPORTED, "cast from %s to %s is not supported", toplu_dtype_name(from),
                              toplu_dtype_name(to));
  if (toplu_tensor_numel(&ctx->out[0]) != toplu_tensor_numel(&ctx->in[0]))
    return toplu__kernel_error(ctx, TOPLU_ERR_INTERNAL, "output size differs from the input's");
  ew_state_t *s = state_new(ctx, info, 0, 0);
  if (!s) return toplu__kernel_error(ctx, TOPLU_ERR_OUT_OF_MEMORY, "out of memory");
  s->cast = fn;
  return TOPLU_OK;
}

/* Common prepare: dispatch on the node's op type. */
static toplu_status_t prepare_ew(toplu__kernel_ctx_t *ctx, toplu__kernel_info_t *info) {
  const ew_op_t *op = find_op(ctx->node->op_type);
  if (!op) return toplu__kernel_error(ctx, TOPLU_ERR_INTERNAL, "not an element-wise op");
  if (ctx->n_out < 1 || ctx->out[0].ndim < 0)
    return toplu__kernel_error(ctx, TOPLU_ERR_INVALID_MODEL, "output 0 is not produced");
  if (op->kind == EW_CAST && (ctx->in[0].dtype == TOPLU_DTYPE_STRING || ctx->out[0].dtype == TOPLU_DTYPE_STRING))
    return toplu__strcast_prepare(ctx); /* ops/strings.c; no state: run_cast dispatches on the dtypes */
  for (int i = 0; i < ctx->n_in && i < 3; i++)
    if (has_input(ctx, i) && ctx->in[i].dtype == TOPLU_DTYPE_STRING) return unsupported_dtype(ctx, TOPLU_DTYPE_STRING);
  switch (op->kind) {
    case EW_UNARY: return prepare_unary(ctx, info, (toplu__ew_unary_op_t)op->op);
    case EW_BINARY: return prepare_binary(ctx, info, (toplu__ew_binary_op_t)op->op);
    case EW_POW: return prepare_pow(ctx, info);
    case EW_VARIADIC: return prepare_variadic(ctx, info, (toplu__ew_binary_op_t)op->op);
    case EW_WHERE: return prepare_where(ctx, info);
    case EW_CAST: return prepare_cast(ctx, info);
  }
  return toplu__kernel_error(ctx, TOPLU_ERR_INTERNAL, "unknown element-wise kind");
}

/* Free the state made by prepare. */
static void release_ew(toplu__kernel_ctx_t *ctx) {
  toplu__kernel_free(ctx, ctx->state);
  ctx->state = NULL;
}

/* ---- run ---- */

typedef struct unary_job {
  toplu__ew_unary_fn fn;
  const char *x;
  char *y;
  size_t xs, ys;
  const toplu__ew_params_t *p;
} unary_job_t;

/* Elements [s, e) of a unary op. */
static void unary_range(int64_t s, int64_t e, void *user) {
  const unary_job_t *j = user;
  j->fn(e - s, j->x + s * (int64_t)j->xs, j->y + s * (int64_t)j->ys, j->p);
}

/* Unary ops; Clip-11+ reads its bounds from inputs 1 and 2 here. */
static toplu_status_t run_unary(toplu__kernel_ctx_t *ctx) {
  const ew_state_t *s = ctx->state;
  toplu__ew_params_t p = s->params;
  if (s->clip_inputs) {
    if (has_input(ctx, 1) && ctx->in[1].data) read_bound(&ctx->in[1], 0, &p);
    if (has_input(ctx, 2) && ctx->in[2].data) read_bound(&ctx->in[2], 1, &p);
  }
  unary_job_t j = {s->unary, ctx->in[0].data, ctx->out[0].data, toplu_dtype_size(ctx->in[0].dtype),
                   toplu_dtype_size(ctx->out[0].dtype), &p};
  toplu__parallel_ranges(toplu_tensor_numel(&ctx->out[0]), ctx->threads, TOPLU_BCAST_PAR_MIN, unary_range, &j);
  return TOPLU_OK;
}

/* Binary ops through the broadcast driver. */
static toplu_status_t run_binary(toplu__kernel_ctx_t *ctx) {
  const ew_state_t *s = ctx->state;
  toplu__bcast_binary(&s->bc[0], s->binary, ctx->in[0].data, ctx->in[1].data, ctx->out[0].data, ctx->threads);
  return TOPLU_OK;
}

/* Pow: convert a non-constant exponent if needed, then broadcast. */
static toplu_status_t run_pow(toplu__kernel_ctx_t *ctx) {
  const ew_state_t *s = ctx->state;
  const void *e = ctx->in[1].data;
  if (s->exponent) {
    e = s->exponent;
  } else if (s->cast) {
    s->cast(toplu_tensor_numel(&ctx->in[1]), e, ctx->workspace);
    e = ctx->workspace;
  }
  toplu__bcast_binary(&s->bc[0], s->binary, ctx->in[0].data, e, ctx->out[0].data, ctx->threads);
  return TOPLU_OK;
}

typedef struct scale_job {
  const toplu__binary_loops_t *div;
  char *y;
  const void *count;
} scale_job_t;

/* Elements [s, e) of Mean's final division. */
static void scale_range(int64_t s, int64_t e, void *user) {
  const scale_job_t *j = user;
  char *p = j->y + s * (int64_t)j->div->y_size;
  j->div->vs(e - s, p, j->count, p);
}

/* y = op(in0, in1), then y = op(y, in_k) for k >= 2 (in place on y). */
static toplu_status_t run_variadic(toplu__kernel_ctx_t *ctx) {
  const ew_state_t *s = ctx->state;
  void *y = ctx->out[0].data;
  int64_t ny = toplu_tensor_numel(&ctx->out[0]);
  if (ctx->n_in == 1) {
    if (y != ctx->in[0].data) memcpy(y, ctx->in[0].data, (size_t)ny * s->elem_size);
    return TOPLU_OK;
  }
  toplu__bcast_binary(&s->bc[0], s->binary, ctx->in[0].data, ctx->in[1].data, y, ctx->threads);
  for (int k = 2; k < ctx->n_in; k++) toplu__bcast_binary(&s->bc[k - 1], s->binary, y, ctx->in[k].data, y, ctx->threads);
  if (s->div) {
    scale_job_t j = {s->div, y, s->count};
    toplu__parallel_ranges(ny, ctx->threads, TOPLU_BCAST_PAR_MIN, scale_range, &j);
  }
  return TOPLU_OK;
}

/* Where rows: y[i] = c[i * sc] ? x[i * sx] : z[i * sz] for element type T. */
#define WHERE_ROW(NAME, T)                                                                                   \
  static void NAME(int64_t n, const uint8_t *restrict c, int64_t sc, const T *restrict x, int64_t sx,        \
                   const T *restrict z, int64_t sz, T *restrict y) {                                         \
    if (sc && sx && sz)                                                                                      \
      for (int64_t i = 0; i < n; i++) y[i] = c[i] ? x[i] : z[i];                                             \
    else                                                                                                     \
      for (int64_t i = 0; i < n; i++) y[i] = c[i * sc] ? x[i * sx] : z[i * sz];                              \
  }
WHERE_ROW(where_row1, uint8_t)
WHERE_ROW(where_row2, uint16_t)
WHERE_ROW(where_row4, uint32_t)
WHERE_ROW(where_row8, uint64_t)

typedef struct where_job {
  const toplu__bcast_t *bc;
  const uint8_t *c;
  const char *x, *z;
  char *y;
  size_t es;
} where_job_t;

/* Output elements [s, e) of Where, row by row (rows may be cut at s and e). */
static void where_range(int64_t s, int64_t e, void *user) {
  const where_job_t *j = user;
  const toplu__bcast_t *bc = j->bc;
  const int64_t L = bc->dims[bc->ndim - 1];
  const int64_t sc = toplu__bcast_row_step(bc, 0), sx = toplu__bcast_row_step(bc, 1), sz = toplu__bcast_row_step(bc, 2);
  const int64_t es = (int64_t)j->es;
  toplu__bcast_iter_t it;
  toplu__bcast_iter_seek(bc, &it, s / L);
  int64_t pos = s, off = s % L;
  while (pos < e) {
    int64_t len = L - off < e - pos ? L - off : e - pos;
    const uint8_t *pc = j->c + it.off[0] + off * sc;
    const char *px = j->x + (it.off[1] + off * sx) * es;
    const char *pz = j->z + (it.off[2] + off * sz) * es;
    char *py = j->y + pos * es;
    switch (es) {
      case 1: where_row1(len, pc, sc, (const uint8_t *)px, sx, (const uint8_t *)pz, sz, (uint8_t *)py); break;
      case 2: where_row2(len, pc, sc, (const uint16_t *)px, sx, (const uint16_t *)pz, sz, (uint16_t *)py); break;
      case 4: where_row4(len, pc, sc, (const uint32_t *)px, sx, (const uint32_t *)pz, sz, (uint32_t *)py); break;
      default: where_row8(len, pc, sc, (const uint64_t *)px, sx, (const uint64_t *)pz, sz, (uint64_t *)py); break;
    }
    pos += len;
    off = 0;
    if (pos < e) toplu__bcast_iter_next(bc, &it);
  }
}

/* Where over the three-input broadcast description. */
static toplu_status_t run_where(toplu__kernel_ctx_t *ctx) {
  const ew_state_t *s = ctx->state;
  if (s->bc[0].numel <= 0) return TOPLU_OK;
  where_job_t j = {&s->bc[0], ctx->in[0].data, ctx->in[1].data, ctx->in[2].data, ctx->out[0].data, s->elem_size};
  toplu__parallel_ranges(s->bc[0].numel, ctx->threads, TOPLU_BCAST_PAR_MIN, where_range, &j);
  return TOPLU_OK;
}

typedef struct cast_job {
  toplu__ew_cast_fn fn;
  const char *x;
  char *y;
  size_t xs, ys;
} cast_job_t;

/* Elements [s, e) of a cast. */
static void cast_range(int64_t s, int64_t e, void *user) {
  const cast_job_t *j = user;
  j->fn(e - s, j->x + s * (int64_t)j->xs, j->y + s * (int64_t)j->ys);
}

/* Cast and CastLike. */
static toplu_status_t run_cast(toplu__kernel_ctx_t *ctx) {
  if (ctx->in[0].dtype == TOPLU_DTYPE_STRING || ctx->out[0].dtype == TOPLU_DTYPE_STRING)
    return toplu__strcast_run(ctx);
  const ew_state_t *s = ctx->state;
  cast_job_t j = {s->cast, ctx->in[0].data, ctx->out[0].data, toplu_dtype_size(ctx->in[0].dtype),
                  toplu_dtype_size(ctx->out[0].dtype)};
  toplu__parallel_ranges(toplu_tensor_numel(&ctx->out[0]), ctx->threads, TOPLU_BCAST_PAR_MIN, cast_range, &j);
  return TOPLU_OK;
}

/* ---- toplu.QLinearLookup (graph/fuse.c int8_lookup) ---- */

/* QLinearLookup's scalar steps (graph/fuse.c int8_lookup: codes 0 Mul, 1 Add, 2 Sub t - c, 3 Sub c - t, 4 Div t / c,
 * 5 Div c / t) of attributes ops_name/vals_name applied to the 256 values v in order, each in float as the node it
 * replaces computes it; 0, or -1 with the kernel's error set for codes or counts that do not match. */
static int lookup_steps(toplu__kernel_ctx_t *ctx, const char *ops_name, const char *vals_name, float v[256]) {
  const int64_t *ops = NULL;
  const float *vals = NULL;
  int64_t n = toplu__node_attr_ints(ctx->node, ops_name, &ops), nv = toplu__node_attr_floats(ctx->node, vals_name, &vals);
  if (n < 0 && nv < 0) return 0; /* no steps */
  if (n != nv || n < 0 || (n && (!ops || !vals))) {
    toplu__kernel_error(ctx, TOPLU_ERR_UNSUPPORTED, "QLinearLookup: %s and %s differ in length", ops_name, vals_name);
    return -1;
  }
  for (int64_t s = 0; s < n; s++) {
    float c = vals[s];
    switch (ops[s]) {
    case 0: for (int k = 0; k < 256; k++) v[k] = v[k] * c; break;
    case 1: for (int k = 0; k < 256; k++) v[k] = v[k] + c; break;
    case 2: for (int k = 0; k < 256; k++) v[k] = v[k] - c; break;
    case 3: for (int k = 0; k < 256; k++) v[k] = c - v[k]; break;
    case 4: for (int k = 0; k < 256; k++) v[k] = v[k] / c; break;
    case 5: for (int k = 0; k < 256; k++) v[k] = c / v[k]; break;
    default:
      toplu__kernel_error(ctx, TOPLU_ERR_UNSUPPORTED, "QLinearLookup: %s holds %lld, not a step (0-5)", ops_name,
                          (long long)ops[s]);
      return -1;
    }
  }
  return 0;
}

toplu_status_t toplu__qlookup_table(toplu__kernel_ctx_t *ctx, uint8_t table[256]) {
  const toplu__node_t *n = ctx->node;
  toplu_dtype_t xt = ctx->in[0].dtype, yt = ctx->out[0].dtype;
  if ((xt != TOPLU_DTYPE_UINT8 && xt != TOPLU_DTYPE_INT8) || (yt != TOPLU_DTYPE_UINT8 && yt != TOPLU_DTYPE_INT8))
    return toplu__kernel_error(ctx, TOPLU_ERR_UNSUPPORTED, "QLinearLookup takes and makes uint8 or int8");
  float sc[2];
  int32_t zp[2] = {0, 0};
  for (int k = 0; k < 2; k++) {
    const toplu_tensor_t *t = &ctx->in[1 + 2 * k];
    if (!t->data || t->dtype != TOPLU_DTYPE_FLOAT || toplu_tensor_numel(t) != 1 || !(*(const float *)t->data > 0.f))
      return toplu__kernel_error(ctx, TOPLU_ERR_UNSUPPORTED, "QLinearLookup needs constant positive scalar scales");
    sc[k] = *(const float *)t->data;
    if (has_input(ctx, 2 + 2 * k)) {
      const toplu_tensor_t *z = &ctx->in[2 + 2 * k];
      if (!z->data || toplu_tensor_numel(z) != 1)
        return toplu__kernel_error(ctx, TOPLU_ERR_UNSUPPORTED, "QLinearLookup needs constant scalar zero points");
      zp[k] = (int32_t)toplu__tensor_get_int(z, 0);
    }
  }
  const char *op = toplu__node_attr_string(n, "op", "");
  int times_x = toplu__node_attr_int(n, "times_x", 0) != 0;
  const ew_op_t *e = NULL;
  for (size_t k = 0; k < sizeof ew_ops / sizeof ew_ops[0] && !e; k++)
    if (ew_ops[k].kind == EW_UNARY && !strcmp(ew_ops[k].op_type, op)) e = &ew_ops[k];
  toplu__ew_unary_fn fn = e ? toplu__ew_unary_lookup((toplu__ew_unary_op_t)e->op, TOPLU_DTYPE_FLOAT) : NULL;
  if (*op && (!fn || e->op == TOPLU_EW_ISNAN || e->op == TOPLU_EW_ISINF))
    return toplu__kernel_error(ctx, TOPLU_ERR_UNSUPPORTED, "QLinearLookup: no float function '%s'", op);
  /* every level of x as its raw byte (an int8 x reads byte b as (int8_t)b), dequantized as DequantizeLinear
   * does, through the scalar steps before, the op's float loop (none for op "") and the steps after, quantized
   * as QuantizeLinear does */
  uint8_t levels[256];
  float xs[256], ys[256];
  for (int k = 0; k < 256; k++) levels[k] = (uint8_t)k;
  toplu__dequantize_span(xt, levels, xs, 256, sc[0], zp[0]);
  if (lookup_steps(ctx, "pre_ops", "pre_vals", xs)) return TOPLU_ERR_UNSUPPORTED;
  if (*op) {
    toplu__ew_params_t p;
    unary_params(n, (toplu__ew_unary_op_t)e->op, &p);
    fn(256, xs, ys, &p);
    if (times_x)
      for (int k = 0; k < 256; k++) ys[k] = xs[k] * ys[k]; /* Mul(x, U(x)): SiLU, HardSwish */
  } else {
    memcpy(ys, xs, sizeof ys);
  }
  if (lookup_steps(ctx, "post_ops", "post_vals", ys)) return TOPLU_ERR_UNSUPPORTED;
  toplu__quantize_span(yt, ys, table, 256, sc[1], (float)zp[1]);
  return TOPLU_OK;
}

#if (defined(__x86_64__) || defined(__i386__)) && (defined(__GNUC__) || defined(__clang__))
#include <immintrin.h>
#define LOOKUP_VBMI_TARGET __attribute__((target("avx512f,avx512bw,avx512vbmi")))

/* 1 when the CPU has AVX-512 VBMI (and toplu's AVX-512 loops may run: ops/fastmath.h). */
static int lookup_vbmi_ok(void) {
  static int ok = -1; /* a benign race: every thread computes the same value */
  int v = __atomic_load_n(&ok, __ATOMIC_RELAXED);
  if (v < 0) {
    v = toplu__cpu_avx512_ok() && __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512vbmi");
    __atomic_store_n(&ok, v, __ATOMIC_RELAXED);
  }
  return v;
}

/* y[i] = table[x[i]], 64 bytes at a time: two vpermt2b over the table's halves (index bits 0-6), bit 7 choosing
 * between them. */
LOOKUP_VBMI_TARGET static void lookup_vbmi(const uint8_t table[256], const uint8_t *x, uint8_t *y, int64_t n) {
  const __m512i t0 = _mm512_loadu_si512(table), t1 = _mm512_loadu_si512(table + 64);
  const __m512i t2 = _mm512_loadu_si512(table + 128), t3 = _mm512_loadu_si512(table + 192);
  int64_t i = 0;
  for (; i + 64 <= n; i += 64) {
    __m512i v = _mm512_loadu_si512(x + i);
    __m512i lo = _mm512_permutex2var_epi8(t0, v, t1), hi = _mm512_permutex2var_epi8(t2, v, t3);
    _mm512_storeu_si512(y + i, _mm512_mask_blend_epi8(_mm512_movepi8_mask(v), lo, hi));
  }
  if (i < n) {
    __mmask64 m = (__mmask64)(~0ULL >> (64 - (n - i)));
    __m512i v = _mm512_maskz_loadu_epi8(m, x + i);
    __m512i lo = _mm512_permutex2var_epi8(t0, v, t1), hi = _mm512_permutex2var_epi8(t2, v, t3);
    _mm512_mask_storeu_epi8(y + i, m, _mm512_mask_blend_epi8(_mm512_movepi8_mask(v), lo, hi));
  }
}
#else
static int lookup_vbmi_ok(void) { return 0; }
static void lookup_vbmi(const uint8_t table[256], const uint8_t *x, uint8_t *y, int64_t n) {
  for (int64_t i = 0; i < n; i++) y[i] = table[x[i]];
}
#endif

void toplu__qlookup_run(const uint8_t table[256], const uint8_t *x, uint8_t *y, int64_t n, int threads) {
  int64_t chunk = 65536, nb = (n + chunk - 1) / chunk;
  int vbmi = lookup_vbmi_ok();
#pragma omp parallel for num_threads(threads) schedule(static) if (n >= 262144)
  for (int64_t b = 0; b < nb; b++) {
    int64_t e = (b + 1) * chunk < n ? (b + 1) * chunk : n;
    if (vbmi) lookup_vbmi(table, x + b * chunk, y + b * chunk, e - b * chunk);
    else
      for (int64_t i = b * chunk; i < e; i++) y[i] = table[x[i]];
  }
}

static toplu_status_t prepare_lookup(toplu__kernel_ctx_t *ctx, toplu__kernel_info_t *info) {
  uint8_t *table = toplu__kernel_alloc(ctx, 256);
  if (!table) return toplu__kernel_error(ctx, TOPLU_ERR_OUT_OF_MEMORY, "out of memory");
  ctx->state = table;
  toplu_status_t st = toplu__qlookup_table(ctx, table);
  if (st) return st;
  info->inplace_input = 0;
  return TOPLU_OK;
}

static toplu_status_t run_lookup(toplu__kernel_ctx_t *ctx) {
  toplu__qlookup_run(ctx->state, ctx->in[0].data, ctx->out[0].data, toplu_tensor_numel(&ctx->in[0]), ctx->threads);
  return TOPLU_OK;
}

static void release_lookup(toplu__kernel_ctx_t *ctx) {
  toplu__kernel_free(ctx, ctx->state);
  ctx->state = NULL;
}

/* ---- table ---- */

#define EW(NAME, RUN) {.op_type = NAME, .domain = "", .prepare = prepare_ew, .run = RUN, .release = release_ew, \
                       .flags = TOPLU_KERNEL_INPLACE}

const toplu__kernel_t toplu__kernels_elementwise[] = {
    EW("Relu", run_unary),
    EW("LeakyRelu", run_unary),
    EW("Sigmoid", run_unary),
    EW("Tanh", run_unary),
    EW("HardSigmoid", run_unary),
    EW("HardSwish", run_unary),
    EW("Sqrt", run_unary),
    EW("Exp", run_unary),
    EW("Log", run_unary),
    EW("Abs", run_unary),
    EW("Neg", run_unary),
    EW("Reciprocal", run_unary),
    EW("Floor", run_unary),
    EW("Ceil", run_unary),
    EW("Round", run_unary),
    EW("Erf", run_unary),
    EW("Softplus", run_unary),
    EW("Gelu", run_unary),
    EW("Mish", run_unary),
    EW("Softsign", run_unary),
    EW("Elu", run_unary),
    EW("Selu", run_unary),
    EW("Sign", run_unary),
    EW("Not", run_unary),
    EW("Clip", run_unary),
    EW("Sin", run_unary),
    EW("Cos", run_unary),
    EW("Tan", run_unary),
    EW("Asin", run_unary),
    EW("Acos", run_unary),
    EW("Atan", run_unary),
    EW("Sinh", run_unary),
    EW("Cosh", run_unary),
    EW("Asinh", run_unary),
    EW("Acosh", run_unary),
    EW("Atanh", run_unary),
    EW("Celu", run_unary),
    EW("ThresholdedRelu", run_unary),
    EW("Shrink", run_unary),
    EW("IsNaN", run_unary),
    EW("IsInf", run_unary),
    EW("Add", run_binary),
    EW("Sub", run_binary),
    EW("Mul", run_binary),
    EW("Div", run_binary),
    EW("Mod", run_binary),
    EW("Equal", run_binary),
    EW("Less", run_binary),
    EW("Greater", run_binary),
    EW("LessOrEqual", run_binary),
    EW("GreaterOrEqual", run_binary),
    EW("And", run_binary),
    EW("Or", run_binary),
    EW("Xor", run_binary),
    EW("PRelu", run_binary),
    EW("BitShift", run_binary),
    EW("Pow", run_pow),
    EW("Max", run_variadic),
    EW("Min", run_variadic),
    EW("Sum", run_variadic),
    EW("Mean", run_variadic),
    EW("Where", run_where),
    /* bind/unbind: the pool a cast to STRING writes its text in (ops/strings.h) */
    {.op_type = "Cast", .domain = "", .prepare = prepare_ew, .run = run_cast, .release = release_ew,
     .flags = TOPLU_KERNEL_INPLACE, .bind = toplu__strcast_bind, .unbind = toplu__strcast_unbind},
    {.op_type = "CastLike", .domain = "", .prepare = prepare_ew, .run = run_cast, .release = release_ew,
     .flags = TOPLU_KERNEL_INPLACE, .bind = toplu__strcast_bind, .unbind = toplu__strcast_unbind},
    {.op_type = "QLinearLookup", .domain = "toplu", .prepare = prepare_lookup, .run = run_lookup,
     .release = release_lookup, .flags = TOPLU_KERNEL_INPLACE},
    {.op_type = NULL},
};
