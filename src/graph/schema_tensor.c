/* graph/schema_tensor.c - schemas of ops that move or describe data:
 * Constant, Identity, Shape, Reshape (more in this family: see the table). */
#include <string.h>

#include "graph/schema.h"

/* Constant-13: exactly one of value, value_float(s), value_int(s). */
static toplu_status_t infer_constant(toplu_infer_ctx_t *ctx) {
  const toplu_node_t *n = ctx->node;
  const toplu_attr_t *a;
  if ((a = toplu_node_attr(n, "value")) && a->type == TOPLU_ATTR_TENSOR) {
    toplu_infer_set(ctx, 0, a->t.dtype, a->t.ndim, a->t.dims);
    return toplu_infer_set_const(ctx, 0, a->t.data);
  }
  if ((a = toplu_node_attr(n, "value_float")) && a->type == TOPLU_ATTR_FLOAT) {
    toplu_infer_set(ctx, 0, TOPLU_DTYPE_FLOAT, 0, NULL);
    return toplu_infer_set_const(ctx, 0, &a->f);
  }
  if ((a = toplu_node_attr(n, "value_int")) && a->type == TOPLU_ATTR_INT) {
    toplu_infer_set(ctx, 0, TOPLU_DTYPE_INT64, 0, NULL);
    return toplu_infer_set_const(ctx, 0, &a->i);
  }
  if ((a = toplu_node_attr(n, "value_floats")) && a->type == TOPLU_ATTR_FLOATS) {
    toplu_infer_set(ctx, 0, TOPLU_DTYPE_FLOAT, 1, &a->n);
    return toplu_infer_set_const(ctx, 0, a->floats);
  }
  if ((a = toplu_node_attr(n, "value_ints")) && a->type == TOPLU_ATTR_INTS) {
    toplu_infer_set(ctx, 0, TOPLU_DTYPE_INT64, 1, &a->n);
    return toplu_infer_set_const(ctx, 0, a->ints);
  }
  if (toplu_node_attr(n, "sparse_value") || toplu_node_attr(n, "value_string") || toplu_node_attr(n, "value_strings"))
    return toplu_infer_error(ctx, TOPLU_ERR_UNSUPPORTED, "sparse and string constants are not supported");
  return toplu_infer_error(ctx, TOPLU_ERR_INVALID_MODEL, "Constant without a value attribute");
}

static toplu_status_t infer_identity(toplu_infer_ctx_t *ctx) {
  toplu_infer_same(ctx, 0, 0);
  if (ctx->in[0].data) return toplu_infer_set_const(ctx, 0, ctx->in[0].data);
  return TOPLU_OK;
}

/* Shape-15: optional start/end slice of the shape (clamped). */
static toplu_status_t infer_shape(toplu_infer_ctx_t *ctx) {
  int r = ctx->in[0].ndim;
  int64_t start = toplu_node_attr_int(ctx->node, "start", 0), end = toplu_node_attr_int(ctx->node, "end", r);
  if (start < 0) start += r;
  if (end < 0) end += r;
  if (start < 0) start = 0;
  if (start > r) start = r;
  if (end < 0) end = 0;
  if (end > r) end = r;
  int64_t len = end > start ? end - start : 0;
  toplu_infer_set(ctx, 0, TOPLU_DTYPE_INT64, 1, &len);
  for (int64_t i = start; i < end; i++)
    if (ctx->in[0].dims[i] < 0) return TOPLU_OK; /* symbolic: value known once a plan binds it */
  return toplu_infer_set_const(ctx, 0, ctx->in[0].dims + start);
}

/* Reshape-14: 0 copies the input dim (unless allowzero), -1 is inferred. */
static toplu_status_t infer_reshape(toplu_infer_ctx_t *ctx) {
  const toplu_tensor_t *x = &ctx->in[0], *s = &ctx->in[1];
  if (s->ndim != 1) return toplu_infer_error(ctx, TOPLU_ERR_INVALID_MODEL, "shape input must be 1-D (rank %d)", s->ndim);
  int64_t r = s->dims[0];
  if (r < 0) return TOPLU_OK; /* rank unknown until bound */
  if (r > TOPLU_MAX_DIMS) return toplu_infer_error(ctx, TOPLU_ERR_UNSUPPORTED, "rank %lld is too high", (long long)r);
  int64_t dims[TOPLU_MAX_DIMS];
  if (!s->data) {
    for (int64_t i = 0; i < r; i++) dims[i] = toplu_infer_new_dim(ctx);
    toplu_infer_set(ctx, 0, x->dtype, (int)r, dims);
    return TOPLU_OK;
  }
  int allowzero = (int)toplu_node_attr_int(ctx->node, "allowzero", 0);
  int infer_at = -1;
  int64_t known_out = 1; /* product of the known output dims */
  uint8_t sym_out[TOPLU_MAX_DIMS] = {0};
  for (int64_t i = 0; i < r; i++) {
    int64_t d = toplu_tensor_get_int(s, i);
    if (d == 0 && !allowzero) {
      if (i >= x->ndim)
        return toplu_infer_error(ctx, TOPLU_ERR_SHAPE, "shape[%lld] = 0 copies a dim the rank-%d input lacks",
                                 (long long)i, x->ndim);
      dims[i] = x->dims[i];
      if (dims[i] < 0) sym_out[i] = 1;
      else known_out *= dims[i];
    } else if (d == -1) {
      if (infer_at >= 0) return toplu_infer_error(ctx, TOPLU_ERR_INVALID_MODEL, "shape has more than one -1");
      infer_at = (int)i;
      dims[i] = -1;
    } else if (d < -1) {
      return toplu_infer_error(ctx, TOPLU_ERR_INVALID_MODEL, "shape[%lld] = %lld is invalid", (long long)i, (long long)d);
    } else {
      dims[i] = d;
      known_out *= d;
    }
  }
  /* Known part of the input; symbolic input dims must reappear in the output
   * (copied) for the element counts to be comparable. */
  int64_t known_in = 1;
  int unmatched = 0;
  uint8_t used[TOPLU_MAX_DIMS] = {0};
  for (int i = 0; i < x->ndim; i++) {
    if (x->dims[i] >= 0) {
      known_in *= x->dims[i];
      continue;
    }
    int found = 0;
    for (int64_t k = 0; k < r && !found; k++)
      if (sym_out[k] && !used[k] && dims[k] == x->dims[i]) used[k] = 1, found = 1;
    if (!found) unmatched = 1;
  }
  for (int64_t k = 0; k < r; k++)
    if (sym_out[k] && !used[k]) unmatched = 1;
  if (unmatched) {
    if (infer_at >= 0) dims[infer_at] = toplu_infer_new_dim(ctx);
  } else if (infer_at >= 0) {
    if (known_out == 0 || known_in % known_out)
      return toplu_infer_error(ctx, TOPLU_ERR_SHAPE,
                               "cannot reshape %lld elements with -1 and the other dims multiplying to %lld",
                               (long long)known_in, (long long)known_out);
    dims[infer_at] = known_in / known_out;
  } else if (known_out != known_in) {
    char a1[160], b1[160];
    return toplu_infer_error(ctx, TOPLU_ERR_SHAPE, "cannot reshape %s (%lld elements) to %s (%lld elements)",
                             toplu_shape_format(x->ndim, x->dims, a1, sizeof a1), (long long)known_in,
                             toplu_shape_format((int)r, dims, b1, sizeof b1), (long long)known_out);
  }
  toplu_infer_set(ctx, 0, x->dtype, (int)r, dims);
  return TOPLU_OK;
}

const toplu_schema_t toplu_schemas_tensor[] = {
    {"Constant", "", 1, 0, 0, 1, 1, 0, infer_constant, NULL},
    {"Identity", "", 1, 1, 1, 1, 1, 0, infer_identity, NULL},
    {"Shape", "", 1, 1, 1, 1, 1, 0, infer_shape, NULL},
    {"Reshape", "", 5, 2, 2, 1, 1, 1u << 1, infer_reshape, NULL},
    {NULL, NULL, 0, 0, 0, 0, 0, 0, NULL, NULL},
};
