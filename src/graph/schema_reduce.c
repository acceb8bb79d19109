/*
 * graph/schema_reduce.c - schemas of reductions and softmax:
 *   ReduceMean, ReduceSum, ReduceMax, ReduceMin, ReduceProd, ReduceL1,
 *   ReduceL2, ReduceSumSquare, ReduceLogSum, ReduceLogSumExp (opset 1-18:
 *   `axes` attribute up to opset 17, ReduceSum's `axes` input from opset 13
 *   and the others' from opset 18; keepdims; noop_with_empty_axes),
 *   ArgMax/ArgMin-1/11/12/13 (keepdims, select_last_index),
 *   Softmax, LogSoftmax, Hardmax (opset 1-12: 2-D coercion at `axis`,
 *   default 1; opset 13: one `axis`, default -1).
 */
#include <string.h>

#include "graph/schema.h"


/* 1 when the node takes axes as input 1 rather than an attribute. */
static int reduce_axes_from_input(const toplu__node_t *n) {
  return n->opset >= 18 || (n->opset >= 13 && !strcmp(n->op_type, "ReduceSum"));
}

/* Numeric dtypes reductions take. */
static int reduce_dtype_ok(toplu_dtype_t dt) {
  switch (dt) {
    case TOPLU_DTYPE_FLOAT: case TOPLU_DTYPE_DOUBLE: case TOPLU_DTYPE_FLOAT16: case TOPLU_DTYPE_INT32:
    case TOPLU_DTYPE_INT64: case TOPLU_DTYPE_INT8: case TOPLU_DTYPE_UINT8: case TOPLU_DTYPE_UINT32:
    case TOPLU_DTYPE_UINT64: return 1;
    default: return 0;
  }
}

/* Reduce*: output dims (reduced dims become 1 with keepdims, else vanish). */
static toplu_status_t infer_reduce(toplu__infer_ctx_t *ctx) {
  const toplu_tensor_t *x = &ctx->in[0];
  const toplu__node_t *n = ctx->node;
  if (!reduce_dtype_ok(x->dtype))
    return toplu__infer_error(ctx, TOPLU_ERR_UNSUPPORTED, "input data is %s; %s takes numeric tensors",
                             toplu_dtype_name(x->dtype), n->op_type);
  int keep = toplu__node_attr_int(n, "keepdims", 1) != 0;
  int noop = toplu__node_attr_int(n, "noop_with_empty_axes", 0) != 0;
  int r = x->ndim;
  uint8_t red[TOPLU_MAX_DIMS] = {0};
  int64_t count = 0;
  if (reduce_axes_from_input(n)) {
    /* The attribute is gone at this opset (ONNX Runtime refuses it too); reading
     * past it would reduce over every axis. */
    if (toplu__node_attr(n, "axes"))
      return toplu__infer_error(ctx, TOPLU_ERR_INVALID_MODEL,
                               "%s at opset %d takes axes as input 1; the axes attribute ended before opset %d",
                               n->op_type, (int)n->opset, strcmp(n->op_type, "ReduceSum") ? 18 : 13);
    if (toplu__infer_has_input(ctx, 1)) {
      const toplu_tensor_t *a = &ctx->in[1];
      if (a->dtype != TOPLU_DTYPE_INT64 && a->dtype != TOPLU_DTYPE_INT32)
        return toplu__infer_error(ctx, TOPLU_ERR_INVALID_MODEL, "input axes is %s; expected int64",
                                 toplu_dtype_name(a->dtype));
      if (a->ndim > 1) return toplu__infer_error(ctx, TOPLU_ERR_INVALID_MODEL, "input axes must be 1-D");
      if (!a->data) {
        /* Axes known only at run: with keepdims the rank is known. */
        if (a->ndim == 1 && a->dims[0] == 0 && noop) {
          toplu__infer_same(ctx, 0, 0);
          return TOPLU_OK;
        }
        if (!keep) return TOPLU_OK;
        int64_t dims[TOPLU_MAX_DIMS];
        for (int d = 0; d < r; d++) dims[d] = x->dims[d] == 1 ? 1 : toplu__infer_new_dim(ctx);
        toplu__infer_set(ctx, 0, x->dtype, r, dims);
        return TOPLU_OK;
      }
      count = toplu_tensor_numel(a);
      for (int64_t i = 0; i < count; i++) {
        int ax;
        toplu_status_t st = toplu__infer_axis(ctx, toplu__tensor_get_int(a, i), r, "axes value", &ax);
        if (st) return st;
        red[ax] = 1;
      }
    }
  } else {
    const int64_t *av;
    count = toplu__node_attr_ints(n, "axes", &av);
    for (int64_t i = 0; i < count; i++) {
      int ax;
      toplu_status_t st = toplu__infer_axis(ctx, av[i], r, "axes value", &ax);
      if (st) return st;
      red[ax] = 1;
    }
    if (count < 0) count = 0;
  }
  if (count == 0) {
    if (noop) {
      toplu__infer_same(ctx, 0, 0);
      return TOPLU_OK;
    }
    for (int d = 0; d < r; d++) red[d] = 1;
  }
  int64_t dims[TOPLU_MAX_DIMS];
  int nd = 0;
  for (int d = 0; d < r; d++) {
    if (!red[d]) dims[nd++] = x->dims[d];
    else if (keep) dims[nd++] = 1;
  }
  toplu__infer_set(ctx, 0, x->dtype, nd, dims);
  return TOPLU_OK;
}

/* ArgMax/ArgMin: int64 indices along axis. */
static toplu_status_t infer_arg(toplu__infer_ctx_t *ctx) {
  const toplu_tensor_t *x = &ctx->in[0];
  if (!reduce_dtype_ok(x->dtype))
    return toplu__infer_error(ctx, TOPLU_ERR_UNSUPPORTED, "input data is %s; %s takes numeric tensors",
                             toplu_dtype_name(x->dtype), ctx->node->op_type);
  int axis;
  toplu_status_t st = toplu__infer_axis(ctx, toplu__node_attr_int(ctx->node, "axis", 0), x->ndim, "axis", &axis);
  if (st) return st;
  int keep = toplu__node_attr_int(ctx->node, "keepdims", 1) != 0;
  int64_t dims[TOPLU_MAX_DIMS];
  int nd = 0;
  for (int d = 0; d < x->ndim; d++) {
    if (d != axis) dims[nd++] = x->dims[d];
    else if (keep) dims[nd++] = 1;
  }
  toplu__infer_set(ctx, 0, TOPLU_DTYPE_INT64, nd, dims);
  return TOPLU_OK;
}

/* Softmax, LogSoftmax, Hardmax: same shape; axis in range. */
static toplu_status_t infer_softmax(toplu__infer_ctx_t *ctx) {
  const toplu_tensor_t *x = &ctx->in[0];
  if (x->dtype != TOPLU_DTYPE_FLOAT && x->dtype != TOPLU_DTYPE_DOUBLE && x->dtype != TOPLU_DTYPE_FLOAT16)
    return toplu__infer_error(ctx, TOPLU_ERR_UNSUPPORTED, "input is %s; %s takes float tensors",
                             toplu_dtype_name(x->dtype), ctx->node->op_type);
  int axis;
  int64_t dflt = ctx->node->opset >= 13 ? -1 : 1;
  int64_t a = toplu__node_attr_int(ctx->node, "axis", dflt);
  if (x->ndim == 0) return toplu__infer_error(ctx, TOPLU_ERR_SHAPE, "input is a scalar; %s needs rank >= 1",
                                             ctx->node->op_type);
  toplu_status_t st = toplu__infer_axis(ctx, a, x->ndim, "axis", &axis);
  if (st) return st;
  toplu__infer_same(ctx, 0, 0);
  return TOPLU_OK;
}

/* One op per input element. */
static int64_t flops_input(const toplu__infer_ctx_t *ctx) { return toplu_tensor_numel(&ctx->in[0]); }
/* max, subtract, exp, sum, scale: about 5 per element. */
static int64_t flops_softmax(const toplu__infer_ctx_t *ctx) { return 5 * toplu_tensor_numel(&ctx->in[0]); }

const toplu__schema_t toplu__schemas_reduce[] = {
    {"ReduceMean", "", 1, 1, 2, 1, 1, 1u << 1, infer_reduce, flops_input, toplu__rows_reduce},
    {"ReduceSum", "", 1, 1, 2, 1, 1, 1u << 1, infer_reduce, flops_input, toplu__rows_reduce},
    {"ReduceMax", "", 1, 1, 2, 1, 1, 1u << 1, infer_reduce, flops_input, toplu__rows_reduce},
    {"ReduceMin", "", 1, 1, 2, 1, 1, 1u << 1, infer_reduce, flops_input, toplu__rows_reduce},
    {"ReduceProd", "", 1, 1, 2, 1, 1, 1u << 1, infer_reduce, flops_input, toplu__rows_reduce},
    {"ReduceL1", "", 1, 1, 2, 1, 1, 1u << 1, infer_reduce, flops_input, toplu__rows_reduce},
    {"ReduceL2", "", 1, 1, 2, 1, 1, 1u << 1, infer_reduce, flops_input, toplu__rows_reduce},
    {"ReduceSumSquare", "", 1, 1, 2, 1, 1, 1u << 1, infer_reduce, flops_input, toplu__rows_reduce},
    {"ReduceLogSum", "", 1, 1, 2, 1, 1, 1u << 1, infer_reduce, flops_input, toplu__rows_reduce},
    {"ReduceLogSumExp", "", 1, 1, 2, 1, 1, 1u << 1, infer_reduce, flops_input, toplu__rows_reduce},
    {"ArgMax", "", 1, 1, 1, 1, 1, 0, infer_arg, flops_input, toplu__rows_axis0},
    {"ArgMin", "", 1, 1, 1, 1, 1, 0, infer_arg, flops_input, toplu__rows_axis0},
    {"Softmax", "", 1, 1, 1, 1, 1, 0, infer_softmax, flops_softmax, toplu__rows_softmax},
    {"LogSoftmax", "", 1, 1, 1, 1, 1, 0, infer_softmax, flops_softmax, toplu__rows_softmax},
    {"Hardmax", "", 1, 1, 1, 1, 1, 0, infer_softmax, flops_softmax, toplu__rows_softmax},
    {NULL, NULL, 0, 0, 0, 0, 0, 0, NULL, NULL, NULL},
};
