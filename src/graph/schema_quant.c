/*
 * graph/schema_quant.c - schemas of linear quantization:
 *   QuantizeLinear-10/13/19/21, DequantizeLinear-10/13/19/21,
 *   DynamicQuantizeLinear-11,
 * com.microsoft QLinearAdd and QLinearMul (ONNX Runtime's contrib ops, which
 * graph/fuse.c also writes for a QDQ Add or Mul),
 * and toplu.QuantizeDequantizeLinear, a QuantizeLinear->DequantizeLinear pair
 * with one scale and zero point that a graph pass may fuse into one node.
 *
 * QuantizeLinear's output type is the zero point's (uint8 when it is absent;
 * opset 21's output_dtype attribute when given).  Opset 10 takes per-tensor
 * scales only; from 13 a 1-D scale of dims[axis] elements quantizes per axis.
 * Types toplu computes: float32 on the float side; uint8, int8, uint16, int16
 * (and int32 for DequantizeLinear) on the integer side.  float8 and int4
 * (opset 19/21) and blocked quantization (block_size, opset 21) are rejected
 * with TOPLU_ERR_UNSUPPORTED.
 */
#include <math.h>

#include "graph/schema.h"

/* Integer types the quantized side may have; int32 only for dequantizing. */
static int quant_int_type(toplu_dtype_t t, int allow_int32) {
  return t == TOPLU_DTYPE_UINT8 || t == TOPLU_DTYPE_INT8 || t == TOPLU_DTYPE_UINT16 || t == TOPLU_DTYPE_INT16 ||
         (allow_int32 && t == TOPLU_DTYPE_INT32);
}

/* Check scale (input 1) and zero point (input 2) against x (input 0): both
 * scalars (or [1]) for per-tensor, or 1-D of x.dims[axis] for per-axis.  A
 * constant scale must be finite, and positive where it divides (divides:
 * QuantizeLinear's x / y_scale): a scale of 0 quantized every value to the
 * saturated end or NaN, and a NaN or Inf one made every output NaN, each run
 * answering without a word (a fresh user's finding of 2026-12-07: a
 * quantizer wrote y_scale 0 from calibration values of 1e-44). */
static toplu_status_t check_scale(toplu__infer_ctx_t *ctx, const char *scale_name, const char *zp_name, int divides) {
  const toplu_tensor_t *x = &ctx->in[0], *s = &ctx->in[1];
  if (toplu__node_attr_int(ctx->node, "block_size", 0) != 0)
    return toplu__infer_error(ctx, TOPLU_ERR_UNSUPPORTED, "blocked quantization (block_size) is not supported");
  if (s->dtype != TOPLU_DTYPE_FLOAT)
    return toplu__infer_error(ctx, TOPLU_ERR_UNSUPPORTED, "%s is %s; toplu supports float32 scales", scale_name,
                             toplu_dtype_name(s->dtype));
  if (s->data && s->ndim >= 0) {
    int64_t n = 1;
    for (int k = 0; k < s->ndim; k++) n *= s->dims[k] > 0 ? s->dims[k] : 0;
    const float *v = s->data;
    for (int64_t i = 0; i < n; i++)
      if (!isfinite(v[i]) || (divides && !(v[i] > 0)))
        return toplu__infer_error(ctx, TOPLU_ERR_INVALID_MODEL, "%s '%s' element %lld is %g: a scale must be %s",
                                 scale_name, ctx->graph->values[ctx->node->inputs[1]].name, (long long)i, (double)v[i],
                                 divides ? "finite and above 0 (x is divided by it)" : "finite");
  }
  int per_tensor = s->ndim == 0 || (s->ndim == 1 && s->dims[0] == 1);
  if (!per_tensor) {
    if (s->ndim != 1)
      return toplu__infer_error(ctx, TOPLU_ERR_INVALID_MODEL, "%s must be a scalar or 1-D (rank %d)", scale_name,
                               s->ndim);
    if (!ctx->node->domain[0] && ctx->node->opset > 0 && ctx->node->opset < 13)
      return toplu__infer_error(ctx, TOPLU_ERR_INVALID_MODEL, "%s must be a scalar before opset 13", scale_name);
    if (x->ndim < 1)
      return toplu__infer_error(ctx, TOPLU_ERR_INVALID_MODEL, "a 1-D %s needs an input of rank 1 or more", scale_name);
    int axis;
    toplu_status_t st =
        toplu__infer_axis(ctx, toplu__node_attr_int(ctx->node, "axis", 1), x->ndim, "axis", &axis);
    if (st) return st;
    if (s->dims[0] >= 0 && x->dims[axis] >= 0 && s->dims[0] != x->dims[axis])
      return toplu__infer_error(ctx, TOPLU_ERR_SHAPE, "%s has %lld elements but x has %lld along axis %d", scale_name,
                               (long long)s->dims[0], (long long)x->dims[axis], axis);
  }
  if (toplu__infer_has_input(ctx, 2)) {
    const toplu_tensor_t *z = &ctx->in[2];
    int same = z->ndim == s->ndim;
    for (int k = 0; same && k < z->ndim; k++)
      if (z->dims[k] >= 0 && s->dims[k] >= 0 && z->dims[k] != s->dims[k]) same = 0;
    if (per_tensor && (z->ndim == 0 || (z->ndim == 1 && z->dims[0] == 1))) same = 1; /* [] and [1] mix */
    if (!same) {
      char a[96], b[96];
      return toplu__infer_error(ctx, TOPLU_ERR_SHAPE, "%s %s and %s %s differ in shape", scale_name,
                               toplu__graph_shape_format(ctx->graph, s->ndim, s->dims, a, sizeof a), zp_name,
                               toplu__graph_shape_format(ctx->graph, z->ndim, z->dims, b, sizeof b));
    }
  }
  return TOPLU_OK;
}

/* QuantizeLinear: y has x's shape and the zero point's type. */
static toplu_status_t infer_quantize(toplu__infer_ctx_t *ctx) {
  const toplu_tensor_t *x = &ctx->in[0];
  if (x->dtype != TOPLU_DTYPE_FLOAT)
    return toplu__infer_error(ctx, TOPLU_ERR_UNSUPPORTED, "x is %s; toplu quantizes float32",
                             toplu_dtype_name(x->dtype));
  toplu_dtype_t yt = TOPLU_DTYPE_UINT8;
  int64_t odt = toplu__node_attr_int(ctx->node, "output_dtype", 0);
  if (toplu__infer_has_input(ctx, 2)) {
    yt = ctx->in[2].dtype;
    if (odt && odt != (int64_t)yt)
      return toplu__infer_error(ctx, TOPLU_ERR_INVALID_MODEL, "output_dtype %lld differs from y_zero_point's type %s",
                               (long long)odt, toplu_dtype_name(yt));
  } else if (odt) {
    yt = (toplu_dtype_t)odt;
  }
  if (!quant_int_type(yt, 0))
    return toplu__infer_error(ctx, TOPLU_ERR_UNSUPPORTED, "quantizing to %s is not supported (uint8, int8, uint16, int16)",
                             toplu_dtype_name(yt));
  toplu_status_t st = check_scale(ctx, "y_scale", "y_zero_point", 1);
  if (st) return st;
  toplu__infer_set(ctx, 0, yt, x->ndim, x->dims);
  return TOPLU_OK;
}

/* DequantizeLinear: y has x's shape and the scale's type. */
static toplu_status_t infer_dequantize(toplu__infer_ctx_t *ctx) {
  const toplu_tensor_t *x = &ctx->in[0];
  if (!quant_int_type(x->dtype, 1))
    return toplu__infer_error(ctx, TOPLU_ERR_UNSUPPORTED,
                             "x is %s; toplu dequantizes uint8, int8, uint16, int16 and int32",
                             toplu_dtype_name(x->dtype));
  if (toplu__infer_has_input(ctx, 2) && ctx->in[2].dtype != x->dtype)
    return toplu__infer_error(ctx, TOPLU_ERR_INVALID_MODEL, "x_zero_point is %s but x is %s",
                             toplu_dtype_name(ctx->in[2].dtype), toplu_dtype_name(x->dtype));
  toplu_status_t st = check_scale(ctx, "x_scale", "x_zero_point", 0);
  if (st) return st;
  toplu__infer_set(ctx, 0, ctx->in[1].dtype, x->ndim, x->dims);
  return TOPLU_OK;
}

/* DynamicQuantizeLinear-11: y uint8 like x, y_scale float scalar, y_zero_point uint8 scalar. */
static toplu_status_t infer_dynamic_quantize(toplu__infer_ctx_t *ctx) {
  const toplu_tensor_t *x = &ctx->in[0];
  if (x->dtype != TOPLU_DTYPE_FLOAT)
    return toplu__infer_error(ctx, TOPLU_ERR_UNSUPPORTED, "x is %s; toplu quantizes float32",
                             toplu_dtype_name(x->dtype));
  toplu__infer_set(ctx, 0, TOPLU_DTYPE_UINT8, x->ndim, x->dims);
  if (ctx->n_out > 1) toplu__infer_set(ctx, 1, TOPLU_DTYPE_FLOAT, 0, NULL);
  if (ctx->n_out > 2) toplu__infer_set(ctx, 2, TOPLU_DTYPE_UINT8, 0, NULL);
  return TOPLU_OK;
}

/* toplu.QuantizeDequantizeLinear (a fused QuantizeLinear->DequantizeLinear
 * pair): float x in, float y of x's shape out; inputs as QuantizeLinear. */
static toplu_status_t infer_fake_quant(toplu__infer_ctx_t *ctx) {
  if (ctx->in[0].dtype != TOPLU_DTYPE_FLOAT)
    return toplu__infer_error(ctx, TOPLU_ERR_UNSUPPORTED, "x is %s; toplu quantizes float32",
                             toplu_dtype_name(ctx->in[0].dtype));
  if (toplu__infer_has_input(ctx, 2) && !quant_int_type(ctx->in[2].dtype, 0))
    return toplu__infer_error(ctx, TOPLU_ERR_UNSUPPORTED, "zero point type %s is not supported",
                             toplu_dtype_name(ctx->in[2].dtype));
  toplu_status_t st = check_scale(ctx, "scale", "zero_point", 1);
  if (st) return st;
  toplu__infer_same(ctx, 0, 0);
  return TOPLU_OK;
}

/* com.microsoft QLinearAdd / QLinearMul (ONNX Runtime's contrib ops): A,
 * A_scale, A_zero_point, B, B_scale, B_zero_point, C_scale, C_zero_point ->
 * C of A's type (uint8 or int8) and A and B broadcast; scales float
 * scalars, zero points scalars of A's type. */
static toplu_status_t infer_qlinear_binary(toplu__infer_ctx_t *ctx) {
  toplu_dtype_t t = ctx->in[0].dtype;
  if (t != TOPLU_DTYPE_UINT8 && t != TOPLU_DTYPE_INT8)
    return toplu__infer_error(ctx, TOPLU_ERR_UNSUPPORTED, "A is %s; toplu takes uint8 or int8", toplu_dtype_name(t));
  if (ctx->in[3].dtype != t)
    return toplu__infer_error(ctx, TOPLU_ERR_INVALID_MODEL, "A is %s but B is %s", toplu_dtype_name(t), toplu_dtype_name(ctx->in[3].dtype));
  for (int i = 1; i < ctx->n_in; i++) {
    if (i == 3 || !toplu__infer_has_input(ctx, i)) continue;
    const toplu_tensor_t *x = &ctx->in[i];
    int scale = i == 1 || i == 4 || i == 6;
    int64_t n = 1;
    for (int k = 0; k < x->ndim; k++) n *= x->dims[k];
    if (n != 1 || (scale ? x->dtype != TOPLU_DTYPE_FLOAT : x->dtype != t))
      return toplu__infer_error(ctx, TOPLU_ERR_UNSUPPORTED, "input %d must be a %s scalar", i, scale ? "float32" : toplu_dtype_name(t));
  }
  if (!toplu__infer_has_input(ctx, 6)) return toplu__infer_error(ctx, TOPLU_ERR_INVALID_MODEL, "C_scale is missing");
  int idx[2] = {0, 3}, nd;
  int64_t dims[TOPLU_MAX_DIMS];
  toplu_status_t st = toplu__infer_broadcast(ctx, idx, 2, &nd, dims);
  if (st) return st;
  toplu__infer_set(ctx, 0, t, nd, dims);
  return TOPLU_OK;
}

/* toplu.QLinearLookup (graph/fuse.c int8_lookup): x (uint8 or int8), x_scale, x_zero_point, y_scale,
 * y_zero_point -> y of x's shape and y_zero_point's type (uint8 when absent); scales float32 scalars,
 * zero points 8-bit scalars of x's and y's type. */
static toplu_status_t infer_qlinear_lookup(toplu__infer_ctx_t *ctx) {
  toplu_dtype_t t = ctx->in[0].dtype, yt = toplu__infer_has_input(ctx, 4) ? ctx->in[4].dtype : TOPLU_DTYPE_UINT8;
  if (t != TOPLU_DTYPE_UINT8 && t != TOPLU_DTYPE_INT8)
    return toplu__infer_error(ctx, TOPLU_ERR_UNSUPPORTED, "x is %s; toplu takes uint8 or int8", toplu_dtype_name(t));
  if (yt != TOPLU_DTYPE_UINT8 && yt != TOPLU_DTYPE_INT8)
    return toplu__infer_error(ctx, TOPLU_ERR_UNSUPPORTED, "y_zero_point is %s; toplu takes uint8 or int8",
                             toplu_dtype_name(yt));
  for (int i = 1; i < ctx->n_in; i++) {
    if (!toplu__infer_has_input(ctx, i)) continue;
    const toplu_tensor_t *x = &ctx->in[i];
    int scale = i == 1 || i == 3;
    int64_t n = 1;
    for (int k = 0; k < x->ndim; k++) n *= x->dims[k];
    if (n != 1 || (scale ? x->dtype != TOPLU_DTYPE_FLOAT : x->dtype != (i == 2 ? t : yt)))
      return toplu__infer_error(ctx, TOPLU_ERR_UNSUPPORTED, "input %d must be a %s scalar", i,
                               scale ? "float32" : toplu_dtype_name(i == 2 ? t : yt));
  }
  if (!toplu__infer_has_input(ctx, 3)) return toplu__infer_error(ctx, TOPLU_ERR_INVALID_MODEL, "y_scale is missing");
  toplu__infer_set(ctx, 0, yt, ctx->in[0].ndim, ctx->in[0].dims);
  return TOPLU_OK;
}

/* Two float ops (divide or multiply, add) per element. */
static int64_t flops_quant(const toplu__infer_ctx_t *ctx) {
  int64_t n = 1;
  for (int k = 0; k < ctx->in[0].ndim; k++) n *= ctx->in[0].dims[k];
  return 2 * n;
}

const toplu__schema_t toplu__schemas_quant[] = {
    {"QuantizeLinear", "", 10, 2, 3, 1, 1, 0, infer_quantize, flops_quant, NULL},
    {"DequantizeLinear", "", 10, 2, 3, 1, 1, 0, infer_dequantize, flops_quant, NULL},
    {"DynamicQuantizeLinear", "", 11, 1, 1, 3, 3, 0, infer_dynamic_quantize, NULL, NULL},
    {"QuantizeDequantizeLinear", "toplu", 1, 2, 3, 1, 1, 0, infer_fake_quant, flops_quant, NULL},
    {"QLinearAdd", "com.microsoft", 1, 7, 8, 1, 1, 0, infer_qlinear_binary, NULL, NULL},
    {"QLinearMul", "com.microsoft", 1, 7, 8, 1, 1, 0, infer_qlinear_binary, NULL, NULL},
    {"QLinearLookup", "toplu", 1, 4, 5, 1, 1, 0, infer_qlinear_lookup, NULL, NULL},
    {NULL, NULL, 0, 0, 0, 0, 0, 0, NULL, NULL, NULL},
};
