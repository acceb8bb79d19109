/*
 * graph/schema_tensor.c - schemas of ops that move or describe data.
 *
 * Follows the ONNX operator versions:
 *   Constant-1/9/11/12/13, Identity-1/13/14/16, Shape-1/13/15, Size-1/13,
 *   Reshape-5/13/14 (allowzero), Flatten-1/9/11/13, Squeeze-1/11/13,
 *   Unsqueeze-1/11/13, Transpose-1/13, Concat-1/4/11/13,
 *   Split-2/11/13/18 (num_outputs), Slice-1/10/11/13, Gather-1/11/13,
 *   GatherElements-11/13, Expand-8/13, Tile-6/13, ConstantOfShape-9/20,
 *   Range-11, Pad-2/11/13/18/19 (constant, edge, reflect, wrap),
 *   DepthToSpace-1/11/13 (DCR, CRD), SpaceToDepth-1/13.
 * Older opsets that took attributes (Slice-1 starts/ends/axes, Squeeze-1 and
 * Unsqueeze-1 axes, Split-2 split, Pad-2 pads/value) are read from the
 * attributes when node->opset says so; the later forms read constant inputs
 * (flagged in const_inputs so a plan requires them).  At load, when such an
 * input is not constant yet, infer gives the rank when it can and fresh
 * symbols for the dims it cannot know.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/checked.h"
#include "graph/schema.h"

#define MAX_LIST 64 /* longest integer list read from an attribute or input */

/* An integer list from an attribute or a constant 1-D input. */
typedef struct int_list {
  int present; /* attribute or input given */
  int known;   /* values available (v[0..n-1]) */
  int64_t n;   /* length; -1 when unknown (symbolic length) */
  int64_t v[MAX_LIST];
} int_list_t;

/* Read input i as an integer list (int32 or int64, rank 0 or 1).  Absent
 * inputs give present = 0; non-constant ones known = 0. */
static toplu_status_t input_list(toplu__infer_ctx_t *ctx, int i, const char *what, int_list_t *l) {
  memset(l, 0, sizeof *l);
  l->n = -1;
  if (!toplu__infer_has_input(ctx, i)) return TOPLU_OK;
  const toplu_tensor_t *t = &ctx->in[i];
  l->present = 1;
  if (t->dtype != TOPLU_DTYPE_INT64 && t->dtype != TOPLU_DTYPE_INT32)
    return toplu__infer_error(ctx, TOPLU_ERR_INVALID_MODEL, "input %d (%s) must be int64 or int32, not %s", i, what,
                             toplu_dtype_name(t->dtype));
  if (t->ndim > 1)
    return toplu__infer_error(ctx, TOPLU_ERR_INVALID_MODEL, "input %d (%s) must be 1-D (rank %d)", i, what, t->ndim);
  l->n = t->ndim == 0 ? 1 : t->dims[0];
  if (l->n > MAX_LIST)
    return toplu__infer_error(ctx, TOPLU_ERR_UNSUPPORTED, "input %d (%s) has %lld values; at most %d are supported", i,
                             what, (long long)l->n, MAX_LIST);
  if (t->data && l->n >= 0) {
    l->known = 1;
    for (int64_t k = 0; k < l->n; k++) l->v[k] = toplu__tensor_get_int(t, k);
  }
  return TOPLU_OK;
}

/* Read an INTS attribute as an integer list. */
static toplu_status_t attr_list(toplu__infer_ctx_t *ctx, const char *name, int_list_t *l) {
  memset(l, 0, sizeof *l);
  const int64_t *vals = NULL;
  int64_t n = toplu__node_attr_ints(ctx->node, name, &vals);
  l->n = -1;
  if (n < 0) return TOPLU_OK;
  if (n > MAX_LIST)
    return toplu__infer_error(ctx, TOPLU_ERR_UNSUPPORTED, "attribute %s has %lld values; at most %d are supported", name,
                             (long long)n, MAX_LIST);
  l->present = l->known = 1;
  l->n = n;
  if (n) memcpy(l->v, vals, (size_t)n * sizeof *vals);
  return TOPLU_OK;
}

/* Product of n dims: known when all are known; a lone symbol times known
 * ones equal to 1 stays that symbol; otherwise a fresh symbol (0 when a known
 * dim is 0). */
static int64_t dims_product(toplu__infer_ctx_t *ctx, const int64_t *d, int n) {
  int64_t p = 1, sym = 0;
  int n_sym = 0;
  for (int i = 0; i < n; i++) {
    if (d[i] < 0) {
      n_sym++;
      sym = d[i];
    } else {
      p *= d[i];
    }
  }
  if (n_sym == 0 || p == 0) return p;
  if (n_sym == 1 && p == 1) return sym;
  return toplu__infer_new_dim(ctx);
}

/* Give out[0] input 0's bytes when input 0 is constant (views). */
static toplu_status_t view_const(toplu__infer_ctx_t *ctx) {
  if (!ctx->in[0].data) return TOPLU_OK;
  return toplu__infer_set_const(ctx, 0, ctx->in[0].data);
}

/* Data movement has no arithmetic. */
static int64_t flops_zero(const toplu__infer_ctx_t *ctx) {
  (void)ctx;
  return 0;
}

/* ---- Constant, Identity, Shape, Size ---- */

/* Constant-13: exactly one of value, value_float(s), value_int(s), value_string(s). */
static toplu_status_t infer_constant(toplu__infer_ctx_t *ctx) {
  const toplu__node_t *n = ctx->node;
  const toplu__attr_t *a;
  if ((a = toplu__node_attr(n, "value")) && a->type == TOPLU_ATTR_TENSOR) {
    if (toplu_dtype_size(a->t.dtype) == 0)
      return toplu__infer_error(ctx, TOPLU_ERR_UNSUPPORTED, "constants of type %s are not supported",
                               toplu_dtype_name(a->t.dtype));
    toplu__infer_set(ctx, 0, a->t.dtype, a->t.ndim, a->t.dims);
    return toplu__infer_set_const(ctx, 0, a->t.data);
  }
  if ((a = toplu__node_attr(n, "value_float")) && a->type == TOPLU_ATTR_FLOAT) {
    toplu__infer_set(ctx, 0, TOPLU_DTYPE_FLOAT, 0, NULL);
    return toplu__infer_set_const(ctx, 0, &a->f);
  }
  if ((a = toplu__node_attr(n, "value_int")) && a->type == TOPLU_ATTR_INT) {
    toplu__infer_set(ctx, 0, TOPLU_DTYPE_INT64, 0, NULL);
    return toplu__infer_set_const(ctx, 0, &a->i);
  }
  if ((a = toplu__node_attr(n, "value_floats")) && a->type == TOPLU_ATTR_FLOATS) {
    toplu__infer_set(ctx, 0, TOPLU_DTYPE_FLOAT, 1, &a->n);
    return toplu__infer_set_const(ctx, 0, a->floats);
  }
  if ((a = toplu__node_attr(n, "value_ints")) && a->type == TOPLU_ATTR_INTS) {
    toplu__infer_set(ctx, 0, TOPLU_DTYPE_INT64, 1, &a->n);
    return toplu__infer_set_const(ctx, 0, a->ints);
  }
  if ((a = toplu__node_attr(n, "value_string")) && a->type == TOPLU_ATTR_STRING) {
    toplu__infer_set(ctx, 0, TOPLU_DTYPE_STRING, 0, NULL);
    const char *one[1] = {a->s};
    return toplu__infer_set_const(ctx, 0, one);
  }
  if ((a = toplu__node_attr(n, "value_strings")) && a->type == TOPLU_ATTR_STRINGS) {
    toplu__infer_set(ctx, 0, TOPLU_DTYPE_STRING, 1, &a->n);
    return toplu__infer_set_const(ctx, 0, a->strings);
  }
  if (toplu__node_attr(n, "sparse_value"))
    return toplu__infer_error(ctx, TOPLU_ERR_UNSUPPORTED, "sparse constants are not supported");
  return toplu__infer_error(ctx, TOPLU_ERR_INVALID_MODEL, "Constant without a value attribute");
}

/* Identity: same type and shape; a constant input stays constant. */
static toplu_status_t infer_identity(toplu__infer_ctx_t *ctx) {
  toplu__infer_same(ctx, 0, 0);
  return view_const(ctx);
}

/* Shape-15: optional start/end slice of the shape (clamped). */
static toplu_status_t infer_shape(toplu__infer_ctx_t *ctx) {
  int r = ctx->in[0].ndim;
  int64_t start = toplu__node_attr_int(ctx->node, "start", 0), end = toplu__node_attr_int(ctx->node, "end", r);
  if (start < 0) start += r;
  if (end < 0) end += r;
  if (start < 0) start = 0;
  if (start > r) start = r;
  if (end < 0) end = 0;
  if (end > r) end = r;
  int64_t len = end > start ? end - start : 0;
  toplu__infer_set(ctx, 0, TOPLU_DTYPE_INT64, 1, &len);
  for (int64_t i = start; i < end; i++)
    if (ctx->in[0].dims[i] < 0) return TOPLU_OK; /* symbolic: value known once a plan binds it */
  return toplu__infer_set_const(ctx, 0, ctx->in[0].dims + start);
}

/* Size-13: element count as an int64 scalar. */
static toplu_status_t infer_size(toplu__infer_ctx_t *ctx) {
  toplu__infer_set(ctx, 0, TOPLU_DTYPE_INT64, 0, NULL);
  for (int i = 0; i < ctx->in[0].ndim; i++)
    if (ctx->in[0].dims[i] < 0) return TOPLU_OK;
  int64_t n = toplu_tensor_numel(&ctx->in[0]);
  return toplu__infer_set_const(ctx, 0, &n);
}

/* ---- views: Reshape, Flatten, Squeeze, Unsqueeze ---- */

static toplu_status_t reshape_too_large(toplu__infer_ctx_t *ctx, int64_t i, int64_t d) {
  return toplu__infer_error(ctx, TOPLU_ERR_SHAPE, "shape[%lld] = %lld makes the dims multiply out to more than 2^63",
                           (long long)i, (long long)d);
}

/* Reshape-14: 0 copies the input dim (unless allowzero), -1 is inferred. */
static toplu_status_t infer_reshape(toplu__infer_ctx_t *ctx) {
  const toplu_tensor_t *x = &ctx->in[0], *s = &ctx->in[1];
  if (s->dtype != TOPLU_DTYPE_INT64 && s->dtype != TOPLU_DTYPE_INT32)
    return toplu__infer_error(ctx, TOPLU_ERR_INVALID_MODEL, "shape input must be int64, not %s",
                             toplu_dtype_name(s->dtype));
  if (s->ndim != 1) return toplu__infer_error(ctx, TOPLU_ERR_INVALID_MODEL, "shape input must be 1-D (rank %d)", s->ndim);
  int64_t r = s->dims[0];
  if (r < 0) return TOPLU_OK; /* rank unknown until bound */
  if (r > TOPLU_MAX_DIMS) return toplu__infer_error(ctx, TOPLU_ERR_UNSUPPORTED, "rank %lld is too high", (long long)r);
  int64_t dims[TOPLU_MAX_DIMS];
  if (!s->data) {
    for (int64_t i = 0; i < r; i++) dims[i] = toplu__infer_new_dim(ctx);
    toplu__infer_set(ctx, 0, x->dtype, (int)r, dims);
    return TOPLU_OK;
  }
  int allowzero = (int)toplu__node_attr_int(ctx->node, "allowzero", 0);
  int infer_at = -1;
  int64_t known_out = 1; /* product of the known output dims */
  uint8_t sym_out[TOPLU_MAX_DIMS] = {0};
  for (int64_t i = 0; i < r; i++) {
    int64_t d = toplu__tensor_get_int(s, i);
    if (d == 0 && !allowzero) {
      if (i >= x->ndim)
        return toplu__infer_error(ctx, TOPLU_ERR_SHAPE, "shape[%lld] = 0 copies a dim the rank-%d input lacks",
                                 (long long)i, x->ndim);
      dims[i] = x->dims[i];
      if (dims[i] < 0) sym_out[i] = 1;
      else if (!toplu__mul_i64(known_out, dims[i], &known_out)) return reshape_too_large(ctx, i, dims[i]);
    } else if (d == -1) {
      /* (a shape value, which may come from the request's data: TOPLU_ERR_SHAPE, a 400 when served, as shape[i] = 5
       * that does not fit is; it was a 500 BACKEND, a fresh user's finding of 2026-12-06) */
      if (infer_at >= 0) return toplu__infer_error(ctx, TOPLU_ERR_SHAPE, "shape has more than one -1");
      infer_at = (int)i;
      dims[i] = -1;
    } else if (d < -1) {
      return toplu__infer_error(ctx, TOPLU_ERR_SHAPE, "shape[%lld] = %lld is invalid", (long long)i, (long long)d);
    } else {
      dims[i] = d;
      if (!toplu__mul_i64(known_out, d, &known_out)) return reshape_too_large(ctx, i, d);
    }
  }
  /* Known part of the input; symbolic input dims must reappear in the output
   * (copied) for the element counts to be comparable. */
  int64_t known_in = 1;
  int unmatched = 0;
  uint8_t used[TOPLU_MAX_DIMS] = {0};
  for (int i = 0; i < x->ndim; i++) {
    if (x->dims[i] >= 0) {
      if (!toplu__mul_i64(known_in, x->dims[i], &known_in))
        return toplu__infer_error(ctx, TOPLU_ERR_SHAPE, "input dims multiply out to more than 2^63 elements");
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
    if (infer_at >= 0) dims[infer_at] = toplu__infer_new_dim(ctx);
  } else if (infer_at >= 0) {
    if (known_out == 0 || known_in % known_out)
      return toplu__infer_error(ctx, TOPLU_ERR_SHAPE,
                               "cannot reshape %lld elements with -1 and the other dims multiplying to %lld",
                               (long long)known_in, (long long)known_out);
    dims[infer_at] = known_in / known_out;
  } else if (known_out != known_in) {
    char a1[160], b1[160];
    return toplu__infer_error(ctx, TOPLU_ERR_SHAPE, "cannot reshape %s (%lld elements) to %s (%lld elements)",
                             toplu__graph_shape_format(ctx->graph, x->ndim, x->dims, a1, sizeof a1), (long long)known_in,
                             toplu__graph_shape_format(ctx->graph, (int)r, dims, b1, sizeof b1), (long long)known_out);
  }
  toplu__infer_set(ctx, 0, x->dtype, (int)r, dims);
  return view_const(ctx);
}

/* Flatten-13: [prod(dims[:axis]), prod(dims[axis:])]; negative axis from
 * opset 11. */
static toplu_status_t infer_flatten(toplu__infer_ctx_t *ctx) {
  const toplu_tensor_t *x = &ctx->in[0];
  int r = x->ndim;
  int64_t axis = toplu__node_attr_int(ctx->node, "axis", 1);
  if (axis < 0) axis += r;
  if (axis < 0 || axis > r)
    return toplu__infer_error(ctx, TOPLU_ERR_INVALID_MODEL, "axis %lld is out of range for rank %d",
                             (long long)toplu__node_attr_int(ctx->node, "axis", 1), r);
  int64_t dims[2] = {dims_product(ctx, x->dims, (int)axis), dims_product(ctx, x->dims + axis, r - (int)axis)};
  toplu__infer_set(ctx, 0, x->dtype, 2, dims);
  return view_const(ctx);
}

/* Squeeze-1/11 (axes attribute) and -13 (axes input): without axes every
 * dim of 1 goes (symbolic dims are taken to be other than 1). */
static toplu_status_t infer_squeeze(toplu__infer_ctx_t *ctx) {
  const toplu_tensor_t *x = &ctx->in[0];
  int r = x->ndim;
  int_list_t axes;
  toplu_status_t st = ctx->node->opset >= 13 ? input_list(ctx, 1, "axes", &axes) : attr_list(ctx, "axes", &axes);
  if (st) return st;
  int64_t dims[TOPLU_MAX_DIMS];
  int nd = 0;
  if (axes.present && !axes.known) {
    if (axes.n < 0) return TOPLU_OK; /* rank unknown until bound */
    if (axes.n > r)
      return toplu__infer_error(ctx, TOPLU_ERR_INVALID_MODEL, "%lld axes to squeeze from rank %d", (long long)axes.n, r);
    int ones = 0, syms = 0;
    for (int i = 0; i < r; i++) ones += x->dims[i] == 1, syms += x->dims[i] < 0;
    for (int i = 0; i < r; i++) {
      if (!syms && ones == axes.n) {
        if (x->dims[i] != 1) dims[nd++] = x->dims[i];
      } else if (nd < r - axes.n) {
        dims[nd++] = toplu__infer_new_dim(ctx);
      }
    }
    toplu__infer_set(ctx, 0, x->dtype, nd, dims);
    return TOPLU_OK;
  }
  uint8_t drop[TOPLU_MAX_DIMS] = {0};
  if (axes.present) {
    for (int64_t k = 0; k < axes.n; k++) {
      int a;
      if ((st = toplu__infer_axis(ctx, axes.v[k], r, "squeeze axis", &a))) return st;
      if (drop[a]) return toplu__infer_error(ctx, TOPLU_ERR_INVALID_MODEL, "axis %d is listed twice", a);
      if (x->dims[a] >= 0 && x->dims[a] != 1)
        return toplu__infer_error(ctx, TOPLU_ERR_SHAPE, "cannot squeeze axis %d of size %lld", a,
                                 (long long)x->dims[a]);
      drop[a] = 1;
    }
  } else {
    for (int i = 0; i < r; i++) drop[i] = x->dims[i] == 1;
  }
  for (int i = 0; i < r; i++)
    if (!drop[i]) dims[nd++] = x->dims[i];
  toplu__infer_set(ctx, 0, x->dtype, nd, dims);
  return view_const(ctx);
}

/* Unsqueeze-1/11 (axes attribute) and -13 (axes input): axes index the
 * output, negative ones from opset 11. */
static toplu_status_t infer_unsqueeze(toplu__infer_ctx_t *ctx) {
  const toplu_tensor_t *x = &ctx->in[0];
  int r = x->ndim;
  int_list_t axes;
  toplu_status_t st = ctx->node->opset >= 13 ? input_list(ctx, 1, "axes", &axes) : attr_list(ctx, "axes", &axes);
  if (st) return st;
  if (!axes.present) return toplu__infer_error(ctx, TOPLU_ERR_INVALID_MODEL, "axes are missing");
  if (axes.n < 0) return TOPLU_OK;
  int64_t out_r = r + axes.n;
  if (out_r > TOPLU_MAX_DIMS)
    return toplu__infer_error(ctx, TOPLU_ERR_UNSUPPORTED, "output rank %lld is above %d", (long long)out_r,
                             TOPLU_MAX_DIMS);
  int64_t dims[TOPLU_MAX_DIMS];
  if (!axes.known) {
    for (int64_t i = 0; i < out_r; i++) dims[i] = toplu__infer_new_dim(ctx);
    toplu__infer_set(ctx, 0, x->dtype, (int)out_r, dims);
    return TOPLU_OK;
  }
  uint8_t ins[TOPLU_MAX_DIMS] = {0};
  for (int64_t k = 0; k < axes.n; k++) {
    int a;
    if ((st = toplu__infer_axis(ctx, axes.v[k], (int)out_r, "unsqueeze axis", &a))) return st;
    if (ins[a]) return toplu__infer_error(ctx, TOPLU_ERR_INVALID_MODEL, "axis %d is listed twice", a);
    ins[a] = 1;
  }
  for (int i = 0, j = 0; i < out_r; i++) dims[i] = ins[i] ? 1 : x->dims[j++];
  toplu__infer_set(ctx, 0, x->dtype, (int)out_r, dims);
  return view_const(ctx);
}

/* ---- Transpose, Concat, Split ---- */

/* Transpose-13: perm (default: reversed dims) must be a permutation. */
static toplu_status_t infer_transpose(toplu__infer_ctx_t *ctx) {
  const toplu_tensor_t *x = &ctx->in[0];
  int r = x->ndim;
  const int64_t *perm = NULL;
  int64_t np = toplu__node_attr_ints(ctx->node, "perm", &perm);
  int64_t dims[TOPLU_MAX_DIMS];
  if (np < 0) {
    for (int i = 0; i < r; i++) dims[i] = x->dims[r - 1 - i];
  } else {
    if (np != r)
      return toplu__infer_error(ctx, TOPLU_ERR_INVALID_MODEL, "perm has %lld entries for a rank-%d input",
                               (long long)np, r);
    uint8_t seen[TOPLU_MAX_DIMS] = {0};
    for (int i = 0; i < r; i++) {
      if (perm[i] < 0 || perm[i] >= r || seen[perm[i]])
        return toplu__infer_error(ctx, TOPLU_ERR_INVALID_MODEL, "perm is not a permutation of 0..%d", r - 1);
      seen[perm[i]] = 1;
      dims[i] = x->dims[perm[i]];
    }
  }
  toplu__infer_set(ctx, 0, x->dtype, r, dims);
  return TOPLU_OK;
}

/* Concat-13: same dtype and rank, dims equal except along axis. */
static toplu_status_t infer_concat(toplu__infer_ctx_t *ctx) {
  const toplu_tensor_t *x0 = &ctx->in[0];
  int r = x0->ndim;
  const toplu__attr_t *aa = toplu__node_attr(ctx->node, "axis");
  if (!aa && ctx->node->opset >= 4) return toplu__infer_error(ctx, TOPLU_ERR_INVALID_MODEL, "attribute axis is missing");
  int axis;
  toplu_status_t st = toplu__infer_axis(ctx, toplu__node_attr_int(ctx->node, "axis", 1), r, "axis", &axis);
  if (st) return st;
  if (r == 0) return toplu__infer_error(ctx, TOPLU_ERR_INVALID_MODEL, "cannot concatenate scalars");
  int64_t dims[TOPLU_MAX_DIMS];
  memcpy(dims, x0->dims, sizeof dims);
  int64_t sum = 0, sym = 0;
  int n_sym = 0;
  for (int i = 0; i < ctx->n_in; i++) {
    const toplu_tensor_t *x = &ctx->in[i];
    if (!toplu__infer_has_input(ctx, i)) return toplu__infer_error(ctx, TOPLU_ERR_INVALID_MODEL, "input %d is empty", i);
    if (x->dtype != x0->dtype)
      return toplu__infer_error(ctx, TOPLU_ERR_SHAPE, "input %d is %s, input 0 is %s", i, toplu_dtype_name(x->dtype),
                               toplu_dtype_name(x0->dtype));
    if (x->ndim != r)
      return toplu__infer_error(ctx, TOPLU_ERR_SHAPE, "input %d has rank %d, input 0 has rank %d", i, x->ndim, r);
    for (int d = 0; d < r; d++) {
      if (d == axis) continue;
      if (x->dims[d] >= 0 && dims[d] >= 0 && x->dims[d] != dims[d]) {
        char a[160], b[160];
        return toplu__infer_error(ctx, TOPLU_ERR_SHAPE, "input %d %s and input 0 %s differ in dim %d (axis is %d)", i,
                                 toplu__graph_shape_format(ctx->graph, r, x->dims, a, sizeof a),
                                 toplu__graph_shape_format(ctx->graph, r, x0->dims, b, sizeof b), d, axis);
      }
      if (dims[d] < 0 && x->dims[d] >= 0) dims[d] = x->dims[d];
    }
    if (x->dims[axis] < 0) n_sym++, sym = x->dims[axis];
    else if (!toplu__add_i64(sum, x->dims[axis], &sum))
      return toplu__infer_error(ctx, TOPLU_ERR_SHAPE, "the inputs' dims on axis %d add up past 2^63", axis);
  }
  dims[axis] = n_sym == 0 ? sum : n_sym == 1 && sum == 0 ? sym : toplu__infer_new_dim(ctx);
  toplu__infer_set(ctx, 0, x0->dtype, r, dims);
  /* Small constant inputs (shape arithmetic) are concatenated here. */
  int all_const = 1;
  for (int i = 0; i < ctx->n_in; i++) all_const &= ctx->in[i].data != NULL;
  if (!all_const || n_sym) return TOPLU_OK;
  size_t es = toplu_dtype_size(x0->dtype);
  int64_t total = toplu_tensor_numel(&ctx->out[0]);
  if (es == 0 || total > 4096) return TOPLU_OK; /* big ones fold through the kernel */
  unsigned char *buf = malloc(total ? (size_t)total * es : 1);
  if (!buf) return toplu__infer_error(ctx, TOPLU_ERR_OUT_OF_MEMORY, "out of memory");
  int64_t outer = 1, inner = 1;
  for (int d = 0; d < axis; d++) outer *= dims[d];
  for (int d = axis + 1; d < r; d++) inner *= dims[d];
  unsigned char *p = buf;
  for (int64_t o = 0; o < outer; o++)
    for (int i = 0; i < ctx->n_in; i++) {
      size_t row = (size_t)(ctx->in[i].dims[axis] * inner) * es;
      if (row) memcpy(p, (const unsigned char *)ctx->in[i].data + (size_t)o * row, row);
      p += row;
    }
  st = toplu__infer_set_const(ctx, 0, buf);
  free(buf);
  return st;
}

/* Split-2/11 (split attribute), -13 (split input), -18 (num_outputs, last
 * part smaller when the dim does not divide). */
static toplu_status_t infer_split(toplu__infer_ctx_t *ctx) {
  const toplu_tensor_t *x = &ctx->in[0];
  int r = x->ndim, axis;
  toplu_status_t st = toplu__infer_axis(ctx, toplu__node_attr_int(ctx->node, "axis", 0), r, "axis", &axis);
  if (st) return st;
  int_list_t split;
  st = ctx->node->opset >= 13 ? input_list(ctx, 1, "split", &split) : attr_list(ctx, "split", &split);
  if (st) return st;
  int n = ctx->n_out;
  int64_t num = toplu__node_attr_int(ctx->node, "num_outputs", -1);
  if (num >= 0 && num != n)
    return toplu__infer_error(ctx, TOPLU_ERR_INVALID_MODEL, "num_outputs is %lld but the node has %d outputs",
                             (long long)num, n);
  if (split.present && num >= 0)
    return toplu__infer_error(ctx, TOPLU_ERR_INVALID_MODEL, "both split and num_outputs are given");
  int64_t dim = x->dims[axis];
  int64_t dims[TOPLU_MAX_DIMS];
  memcpy(dims, x->dims, sizeof dims);
  if (split.present && split.known) {
    if (split.n != n)
      return toplu__infer_error(ctx, TOPLU_ERR_INVALID_MODEL, "split has %lld sizes for %d outputs", (long long)split.n, n);
    int64_t sum = 0;
    for (int i = 0; i < n; i++) {
      if (split.v[i] < 0)
        return toplu__infer_error(ctx, TOPLU_ERR_INVALID_MODEL, "split[%d] = %lld is negative", i, (long long)split.v[i]);
      if (!toplu__add_i64(sum, split.v[i], &sum))
        return toplu__infer_error(ctx, TOPLU_ERR_INVALID_MODEL, "split sizes add up past 2^63 (split[%d] = %lld)", i,
                                 (long long)split.v[i]);
    }
    if (dim >= 0 && sum != dim)
      return toplu__infer_error(ctx, TOPLU_ERR_SHAPE, "split sizes add up to %lld but axis %d has %lld", (long long)sum,
                               axis, (long long)dim);
    for (int i = 0; i < n; i++) {
      dims[axis] = split.v[i];
      toplu__infer_set(ctx, i, x->dtype, r, dims);
    }
    return TOPLU_OK;
  }
  if (split.present || dim < 0) { /* sizes known once bound */
    int64_t same = toplu__infer_new_dim(ctx);
    for (int i = 0; i < n; i++) {
      dims[axis] = split.present || (num >= 0 && i == n - 1) ? toplu__infer_new_dim(ctx) : same;
      toplu__infer_set(ctx, i, x->dtype, r, dims);
    }
    return TOPLU_OK;
  }
  int64_t part = dim / n;
  if (dim % n) {
    if (ctx->node->opset < 18 || num < 0)
      return toplu__infer_error(ctx, TOPLU_ERR_SHAPE, "axis %d of size %lld does not split into %d equal parts", axis,
                               (long long)dim, n);
    part = (dim + n - 1) / n;
    if (part * (n - 1) > dim)
      return toplu__infer_error(ctx, TOPLU_ERR_SHAPE, "axis %d of size %lld cannot make %d parts", axis,
                               (long long)dim, n);
  }
  for (int i = 0; i < n; i++) {
    dims[axis] = i < n - 1 ? part : dim - part * (n - 1);
    toplu__infer_set(ctx, i, x->dtype, r, dims);
  }
  return TOPLU_OK;
}

/* ---- Slice ---- */

/* Clamp start/end of one sliced axis of size dim as ONNX Slice-13 says;
 * returns the output length and sets *first to the first index. */
static int64_t slice_len(int64_t dim, int64_t start, int64_t end, int64_t step, int64_t *first) {
  if (step < -INT64_MAX) step = -INT64_MAX;
  if (start < 0) start += dim;
  if (end < 0) end += dim;
  if (step > 0) {
    start = start < 0 ? 0 : start > dim ? dim : start;
    end = end < 0 ? 0 : end > dim ? dim : end;
    *first = start;
    return end > start ? (end - start - 1) / step + 1 : 0;
  }
  start = start < 0 ? 0 : start > dim - 1 ? dim - 1 : start;
  end = end < -1 ? -1 : end > dim - 1 ? dim - 1 : end;
  *first = start;
  return start > end ? (start - end - 1) / -step + 1 : 0;
}

/* Slice-1 (starts/ends/axes attributes) and Slice-10/11/13 (inputs
 * starts, ends, axes, steps). */
static toplu_status_t infer_slice(toplu__infer_ctx_t *ctx) {
  const toplu_tensor_t *x = &ctx->in[0];
  int r = x->ndim;
  int_list_t starts, ends, axes, steps;
  toplu_status_t st;
  if (ctx->node->opset < 10) {
    if ((st = attr_list(ctx, "starts", &starts)) || (st = attr_list(ctx, "ends", &ends)) ||
        (st = attr_list(ctx, "axes", &axes)))
      return st;
    memset(&steps, 0, sizeof steps);
    if (!starts.present || !ends.present)
      return toplu__infer_error(ctx, TOPLU_ERR_INVALID_MODEL, "attributes starts and ends are required");
  } else {
    if (!toplu__infer_has_input(ctx, 1) || !toplu__infer_has_input(ctx, 2))
      return toplu__infer_error(ctx, TOPLU_ERR_INVALID_MODEL, "inputs starts and ends are required");
    if ((st = input_list(ctx, 1, "starts", &starts)) || (st = input_list(ctx, 2, "ends", &ends)) ||
        (st = input_list(ctx, 3, "axes", &axes)) || (st = input_list(ctx, 4, "steps", &steps)))
      return st;
  }
  int64_t dims[TOPLU_MAX_DIMS];
  memcpy(dims, x->dims, sizeof dims);
  int known = starts.known && ends.known && (!axes.present || axes.known) && (!steps.present || steps.known);
  if (!known) {
    /* Load time: the sliced axes (all when axes are unknown) get fresh dims. */
    for (int d = 0; d < r; d++) {
      int sliced = !axes.present ? (starts.n < 0 || d < starts.n) : !axes.known;
      for (int64_t k = 0; axes.known && k < axes.n; k++)
        if (axes.v[k] == d || axes.v[k] + r == d) sliced = 1;
      if (sliced) dims[d] = toplu__infer_new_dim(ctx);
    }
    toplu__infer_set(ctx, 0, x->dtype, r, dims);
    return TOPLU_OK;
  }
  int64_t n = starts.n;
  if (ends.n != n || (axes.present && axes.n != n) || (steps.present && steps.n != n))
    return toplu__infer_error(ctx, TOPLU_ERR_INVALID_MODEL, "starts, ends, axes and steps differ in length");
  uint8_t seen[TOPLU_MAX_DIMS] = {0};
  for (int64_t k = 0; k < n; k++) {
    int a;
    if ((st = toplu__infer_axis(ctx, axes.present ? axes.v[k] : k, r, "slice axis", &a))) return st;
    if (seen[a]) return toplu__infer_error(ctx, TOPLU_ERR_INVALID_MODEL, "axis %d is sliced twice", a);
    seen[a] = 1;
    int64_t step = steps.present ? steps.v[k] : 1, first;
    if (step == 0) return toplu__infer_error(ctx, TOPLU_ERR_INVALID_MODEL, "step 0 on axis %d", a);
    if (x->dims[a] >= 0) {
      dims[a] = slice_len(x->dims[a], starts.v[k], ends.v[k], step, &first);
    } else if (!(step == 1 && starts.v[k] == 0 && ends.v[k] >= INT32_MAX)) {
      dims[a] = toplu__infer_new_dim(ctx); /* [0:"end"] keeps the symbol */
    }
  }
  toplu__infer_set(ctx, 0, x->dtype, r, dims);
  /* Slices of small constant 1-D tensors (shape arithmetic) are taken here. */
  if (!x->data || r != 1 || dims[0] > 4096) return TOPLU_OK;
  size_t es = toplu_dtype_size(x->dtype);
  if (!es) return TOPLU_OK;
  int64_t step = steps.present ? steps.v[0] : 1, first;
  slice_len(x->dims[0], starts.v[0], ends.v[0], step, &first);
  unsigned char *buf = malloc(dims[0] ? (size_t)dims[0] * es : 1);
  if (!buf) return toplu__infer_error(ctx, TOPLU_ERR_OUT_OF_MEMORY, "out of memory");
  for (int64_t i = 0; i < dims[0]; i++)
    memcpy(buf + (size_t)i * es, (const unsigned char *)x->data + (size_t)(first + i * step) * es, es);
  st = toplu__infer_set_const(ctx, 0, buf);
  free(buf);
  return st;
}

/* ---- Gather, GatherElements ---- */

/* Gather-13: data[:axis] + indices.shape + data[axis+1:]. */
static toplu_status_t infer_gather(toplu__infer_ctx_t *ctx) {
  const toplu_tensor_t *x = &ctx->in[0], *ix = &ctx->in[1];
  int r = x->ndim, q = ix->ndim, axis;
  if (r < 1) return toplu__infer_error(ctx, TOPLU_ERR_INVALID_MODEL, "data must have rank 1 or more");
  toplu_status_t st = toplu__infer_axis(ctx, toplu__node_attr_int(ctx->node, "axis", 0), r, "axis", &axis);
  if (st) return st;
  if (ix->dtype != TOPLU_DTYPE_INT64 && ix->dtype != TOPLU_DTYPE_INT32)
    return toplu__infer_error(ctx, TOPLU_ERR_INVALID_MODEL, "indices must be int32 or int64, not %s",
                             toplu_dtype_name(ix->dtype));
  if (r - 1 + q > TOPLU_MAX_DIMS)
    return toplu__infer_error(ctx, TOPLU_ERR_UNSUPPORTED, "output rank %d is above %d", r - 1 + q, TOPLU_MAX_DIMS);
  int64_t dims[TOPLU_MAX_DIMS];
  int nd = 0;
  for (int d = 0; d < axis; d++) dims[nd++] = x->dims[d];
  for (int d = 0; d < q; d++) dims[nd++] = ix->dims[d];
  for (int d = axis + 1; d < r; d++) dims[nd++] = x->dims[d];
  toplu__infer_set(ctx, 0, x->dtype, nd, dims);
  const int64_t ad = x->dims[axis];
  if (ix->data && ad >= 0) { /* constant indices are checked once, here */
    int64_t n_idx = 1;
    for (int d = 0; d < q; d++) n_idx *= ix->dims[d];
    for (int64_t k = 0; k < n_idx; k++) {
      int64_t i = toplu__tensor_get_int(ix, k);
      if (i < -ad || i >= ad)
        return toplu__infer_error(ctx, TOPLU_ERR_SHAPE, "index %lld is out of range for axis %d of size %lld",
                                 (long long)i, axis, (long long)ad);
    }
  }
  /* Small constant gathers (an element of a shape) are taken here. */
  if (!x->data || !ix->data) return TOPLU_OK;
  int64_t total = toplu_tensor_numel(&ctx->out[0]), n_idx = toplu_tensor_numel(ix), outer = 1, inner = 1;
  size_t es = toplu_dtype_size(x->dtype);
  if (total > 4096 || !es) return TOPLU_OK;
  for (int d = 0; d < axis; d++) outer *= x->dims[d];
  for (int d = axis + 1; d < r; d++) inner *= x->dims[d];
  unsigned char *buf = malloc(total ? (size_t)total * es : 1);
  if (!buf) return toplu__infer_error(ctx, TOPLU_ERR_OUT_OF_MEMORY, "out of memory");
  size_t row = (size_t)inner * es;
  unsigned char *p = buf;
  for (int64_t o = 0; o < outer; o++)
    for (int64_t k = 0; k < n_idx; k++, p += row) {
      int64_t i = toplu__tensor_get_int(ix, k);
      if (i < -ad || i >= ad) {
        free(buf);
        return toplu__infer_error(ctx, TOPLU_ERR_SHAPE, "index %lld is out of range for axis %d of size %lld",
                                 (long long)i, axis, (long long)ad);
      }
      if (i < 0) i += ad;
      if (row) memcpy(p, (const unsigned char *)x->data + (size_t)((o * ad + i) * inner) * es, row);
    }
  st = toplu__infer_set_const(ctx, 0, buf);
  free(buf);
  return st;
}

/* GatherElements-13: output has the indices' shape. */
static toplu_status_t infer_gather_elements(toplu__infer_ctx_t *ctx) {
  const toplu_tensor_t *x = &ctx->in[0], *ix = &ctx->in[1];
  int r = x->ndim, axis;
  if (r < 1) return toplu__infer_error(ctx, TOPLU_ERR_INVALID_MODEL, "data must have rank 1 or more");
  toplu_status_t st = toplu__infer_axis(ctx, toplu__node_attr_int(ctx->node, "axis", 0), r, "axis", &axis);
  if (st) return st;
  if (ix->dtype != TOPLU_DTYPE_INT64 && ix->dtype != TOPLU_DTYPE_INT32)
    return toplu__infer_error(ctx, TOPLU_ERR_INVALID_MODEL, "indices must be int32 or int64, not %s",
                             toplu_dtype_name(ix->dtype));
  if (ix->ndim != r)
    return toplu__infer_error(ctx, TOPLU_ERR_SHAPE, "indices have rank %d, data rank %d", ix->ndim, r);
  toplu__infer_set(ctx, 0, x->dtype, r, ix->dims);
  return TOPLU_OK;
}

/* ---- Expand, Tile, ConstantOfShape, Range ---- */

/* Expand-13: numpy broadcast of the data's shape with the shape input. */
static toplu_status_t infer_expand(toplu__infer_ctx_t *ctx) {
  const toplu_tensor_t *x = &ctx->in[0];
  int_list_t shp;
  toplu_status_t st = input_list(ctx, 1, "shape", &shp);
  if (st) return st;
  if (shp.n < 0) return TOPLU_OK;
  int r = x->ndim;
  int64_t out_r = shp.n > r ? shp.n : r;
  if (out_r > TOPLU_MAX_DIMS)
    return toplu__infer_error(ctx, TOPLU_ERR_UNSUPPORTED, "output rank %lld is above %d", (long long)out_r,
                             TOPLU_MAX_DIMS);
  int64_t dims[TOPLU_MAX_DIMS];
  for (int64_t i = 0; i < out_r; i++) {
    int64_t xi = i - (out_r - r), si = i - (out_r - shp.n);
    int64_t a = xi >= 0 ? x->dims[xi] : 1;
    if (!shp.known) {
      dims[i] = a >= 0 && a != 1 ? a : toplu__infer_new_dim(ctx);
      continue;
    }
    int64_t s = si >= 0 ? shp.v[si] : 1;
    if (s < 0) return toplu__infer_error(ctx, TOPLU_ERR_INVALID_MODEL, "shape[%lld] = %lld is negative", (long long)si, (long long)s);
    if (a < 0) dims[i] = s == 1 ? a : s;
    else if (a == s || s == 1) dims[i] = a;
    else if (a == 1) dims[i] = s;
    else {
      char b[160];
      return toplu__infer_error(ctx, TOPLU_ERR_SHAPE, "input %s does not broadcast to the shape (dim %lld: %lld vs %lld)",
                               toplu__graph_shape_format(ctx->graph, r, x->dims, b, sizeof b), (long long)i, (long long)a,
                               (long long)s);
    }
  }
  toplu__infer_set(ctx, 0, x->dtype, (int)out_r, dims);
  return TOPLU_OK;
}

/* Tile-13: dims times repeats. */
static toplu_status_t infer_tile(toplu__infer_ctx_t *ctx) {
  const toplu_tensor_t *x = &ctx->in[0];
  int r = x->ndim;
  int_list_t rep;
  toplu_status_t st = input_list(ctx, 1, "repeats", &rep);
  if (st) return st;
  if (rep.n >= 0 && rep.n != r)
    return toplu__infer_error(ctx, TOPLU_ERR_INVALID_MODEL, "repeats has %lld values for a rank-%d input",
                             (long long)rep.n, r);
  int64_t dims[TOPLU_MAX_DIMS];
  for (int i = 0; i < r; i++) {
    if (!rep.known) {
      dims[i] = x->dims[i] == 0 ? 0 : toplu__infer_new_dim(ctx);
      continue;
    }
    if (rep.v[i] < 0)
      return toplu__infer_error(ctx, TOPLU_ERR_INVALID_MODEL, "repeats[%d] = %lld is negative", i, (long long)rep.v[i]);
    if (x->dims[i] >= 0 && !toplu__mul_i64(x->dims[i], rep.v[i], &dims[i]))
      return toplu__infer_error(ctx, TOPLU_ERR_SHAPE, "repeats[%d] = %lld times dim %lld is more than 2^63", i,
                               (long long)rep.v[i], (long long)x->dims[i]);
    if (x->dims[i] < 0) dims[i] = rep.v[i] == 1 ? x->dims[i] : rep.v[i] == 0 ? 0 : toplu__infer_new_dim(ctx);
  }
  toplu__infer_set(ctx, 0, x->dtype, r, dims);
  return TOPLU_OK;
}

/* ConstantOfShape-9: value attribute (one element, default float 0). */
static toplu_status_t infer_constant_of_shape(toplu__infer_ctx_t *ctx) {
  int_list_t shp;
  toplu_status_t st = input_list(ctx, 0, "shape", &shp);
  if (st) return st;
  const toplu__attr_t *a = toplu__node_attr(ctx->node, "value");
  toplu_dtype_t dt = TOPLU_DTYPE_FLOAT;
  if (a) {
    if (a->type != TOPLU_ATTR_TENSOR || toplu_tensor_numel(&a->t) != 1 || !toplu_dtype_size(a->t.dtype))
      return toplu__infer_error(ctx, TOPLU_ERR_INVALID_MODEL, "value must be a one-element numeric tensor");
    dt = a->t.dtype;
  }
  if (shp.n < 0) return TOPLU_OK;
  if (shp.n > TOPLU_MAX_DIMS)
    return toplu__infer_error(ctx, TOPLU_ERR_UNSUPPORTED, "output rank %lld is above %d", (long long)shp.n, TOPLU_MAX_DIMS);
  int64_t dims[TOPLU_MAX_DIMS];
  for (int64_t i = 0; i < shp.n; i++) {
    if (shp.known && shp.v[i] < 0)
      return toplu__infer_error(ctx, TOPLU_ERR_INVALID_MODEL, "shape[%lld] = %lld is negative", (long long)i,
                               (long long)shp.v[i]);
    dims[i] = shp.known ? shp.v[i] : toplu__infer_new_dim(ctx);
  }
  toplu__infer_set(ctx, 0, dt, (int)shp.n, dims);
  return TOPLU_OK;
}

/* Range-11: scalars start, limit, delta of one numeric type;
 * max(ceil((limit - start) / delta), 0) elements. */
static toplu_status_t infer_range(toplu__infer_ctx_t *ctx) {
  toplu_dtype_t dt = ctx->in[0].dtype;
  for (int i = 0; i < 3; i++) {
    if (ctx->in[i].dtype != dt)
      return toplu__infer_error(ctx, TOPLU_ERR_INVALID_MODEL, "start, limit and delta must share a type");
    if (ctx->in[i].ndim > 1 || (ctx->in[i].ndim == 1 && ctx->in[i].dims[0] != 1))
      return toplu__infer_error(ctx, TOPLU_ERR_INVALID_MODEL, "input %d must be a scalar", i);
  }
  if (dt != TOPLU_DTYPE_FLOAT && dt != TOPLU_DTYPE_DOUBLE && dt != TOPLU_DTYPE_INT16 && dt != TOPLU_DTYPE_INT32 &&
      dt != TOPLU_DTYPE_INT64)
    return toplu__infer_error(ctx, TOPLU_ERR_UNSUPPORTED, "Range of %s is not supported", toplu_dtype_name(dt));
  int64_t n;
  if (!ctx->in[0].data || !ctx->in[1].data || !ctx->in[2].data) {
    n = toplu__infer_new_dim(ctx);
  } else if (dt == TOPLU_DTYPE_FLOAT || dt == TOPLU_DTYPE_DOUBLE) {
    double s = toplu__tensor_get_double(&ctx->in[0], 0), l = toplu__tensor_get_double(&ctx->in[1], 0),
           d = toplu__tensor_get_double(&ctx->in[2], 0);
    if (d == 0) return toplu__infer_error(ctx, TOPLU_ERR_INVALID_MODEL, "delta is 0");
    double diff = dt == TOPLU_DTYPE_FLOAT ? (double)((float)l - (float)s) : l - s;
    double c = ceil(diff / d);
    if (!(c < 9.0e15)) return toplu__infer_error(ctx, TOPLU_ERR_INVALID_MODEL, "range is too long");
    n = c > 0 ? (int64_t)c : 0;
  } else {
    int64_t s = toplu__tensor_get_int(&ctx->in[0], 0), l = toplu__tensor_get_int(&ctx->in[1], 0),
            d = toplu__tensor_get_int(&ctx->in[2], 0);
    if (d == 0) return toplu__infer_error(ctx, TOPLU_ERR_INVALID_MODEL, "delta is 0");
    /* In unsigned arithmetic so that extreme values cannot overflow. */
    uint64_t span = d > 0 ? (l > s ? (uint64_t)l - (uint64_t)s : 0) : (s > l ? (uint64_t)s - (uint64_t)l : 0);
    uint64_t step = d > 0 ? (uint64_t)d : (uint64_t)(-(d + 1)) + 1;
    uint64_t count = span ? (span - 1) / step + 1 : 0;
    if (count > (uint64_t)1 << 53) return toplu__infer_error(ctx, TOPLU_ERR_INVALID_MODEL, "range is too long");
    n = (int64_t)count;
  }
  toplu__infer_set(ctx, 0, dt, 1, &n);
  return TOPLU_OK;
}

/* ---- Pad, DepthToSpace, SpaceToDepth ---- */

/* Pad-2 (pads attribute), -11/13 (pads input), -18 (axes input), -19 (wrap). */
static toplu_status_t infer_pad(toplu__infer_ctx_t *ctx) {
  const toplu_tensor_t *x = &ctx->in[0];
  int r = x->ndim;
  const char *mode = toplu__node_attr_string(ctx->node, "mode", "constant");
  if (strcmp(mode, "constant") && strcmp(mode, "edge") && strcmp(mode, "reflect") && strcmp(mode, "wrap"))
    return toplu__infer_error(ctx, TOPLU_ERR_UNSUPPORTED, "mode '%s' is not supported", mode);
  int_list_t pads, axes;
  toplu_status_t st;
  memset(&axes, 0, sizeof axes);
  if (ctx->node->opset < 11) {
    if ((st = attr_list(ctx, "pads", &pads))) return st;
    if (!pads.present) return toplu__infer_error(ctx, TOPLU_ERR_INVALID_MODEL, "attribute pads is missing");
  } else {
    if (!toplu__infer_has_input(ctx, 1)) return toplu__infer_error(ctx, TOPLU_ERR_INVALID_MODEL, "input pads is missing");
    if ((st = input_list(ctx, 1, "pads", &pads)) || (st = input_list(ctx, 3, "axes", &axes))) return st;
    if (toplu__infer_has_input(ctx, 2) && ctx->in[2].dtype != x->dtype)
      return toplu__infer_error(ctx, TOPLU_ERR_INVALID_MODEL, "constant_value is %s, data is %s",
                               toplu_dtype_name(ctx->in[2].dtype), toplu_dtype_name(x->dtype));
  }
  int64_t dims[TOPLU_MAX_DIMS];
  memcpy(dims, x->dims, sizeof dims);
  if (!pads.known || (axes.present && !axes.known)) {
    for (int d = 0; d < r; d++) {
      int padded = !axes.known;
      for (int64_t k = 0; axes.known && k < axes.n; k++)
        if (axes.v[k] == d || axes.v[k] + r == d) padded = 1;
      if (padded) dims[d] = toplu__infer_new_dim(ctx);
    }
    toplu__infer_set(ctx, 0, x->dtype, r, dims);
    return TOPLU_OK;
  }
  int64_t na = axes.present ? axes.n : r;
  if (pads.n != 2 * na)
    return toplu__infer_error(ctx, TOPLU_ERR_INVALID_MODEL, "pads has %lld values for %lld axes", (long long)pads.n,
                             (long long)na);
  uint8_t seen[TOPLU_MAX_DIMS] = {0};
  for (int64_t k = 0; k < na; k++) {
    int a = (int)k;
    if (axes.present && (st = toplu__infer_axis(ctx, axes.v[k], r, "pad axis", &a))) return st;
    if (seen[a]) return toplu__infer_error(ctx, TOPLU_ERR_INVALID_MODEL, "axis %d is listed twice", a);
    seen[a] = 1;
    int64_t add;
    if (!toplu__add_i64(pads.v[k], pads.v[k + na], &add) || !toplu__add_i64(x->dims[a] < 0 ? 0 : x->dims[a], add, &dims[a]))
      return toplu__infer_error(ctx, TOPLU_ERR_SHAPE, "pads %lld and %lld on axis %d do not fit in 64 bits",
                               (long long)pads.v[k], (long long)pads.v[k + na], a);
    if (x->dims[a] < 0) {
      dims[a] = x->dims[a];
      if (add) dims[a] = toplu__infer_new_dim(ctx);
      continue;
    }
    if (dims[a] < 0)
      return toplu__infer_error(ctx, TOPLU_ERR_SHAPE, "pads crop axis %d of size %lld below 0", a, (long long)x->dims[a]);
    if (strcmp(mode, "constant") && x->dims[a] == 0 && dims[a] > 0)
      return toplu__infer_error(ctx, TOPLU_ERR_SHAPE, "mode '%s' cannot pad the empty axis %d", mode, a);
  }
  toplu__infer_set(ctx, 0, x->dtype, r, dims);
  return TOPLU_OK;
}

/* DepthToSpace-13 / SpaceToDepth-13: 4-D input, blocksize > 0. */
static toplu_status_t infer_depth_space(toplu__infer_ctx_t *ctx, int to_space) {
  const toplu_tensor_t *x = &ctx->in[0];
  if (x->ndim != 4) return toplu__infer_error(ctx, TOPLU_ERR_INVALID_MODEL, "input must be 4-D (rank %d)", x->ndim);
  int64_t b = toplu__node_attr_int(ctx->node, "blocksize", 0);
  if (b <= 0 || b > 65536) return toplu__infer_error(ctx, TOPLU_ERR_INVALID_MODEL, "blocksize %lld is invalid", (long long)b);
  const char *mode = toplu__node_attr_string(ctx->node, "mode", "DCR");
  if (to_space && strcmp(mode, "DCR") && strcmp(mode, "CRD"))
    return toplu__infer_error(ctx, TOPLU_ERR_INVALID_MODEL, "mode '%s' is not DCR or CRD", mode);
  int64_t dims[4] = {x->dims[0], 0, 0, 0};
  if (to_space) {
    if (x->dims[1] >= 0 && x->dims[1] % (b * b))
      return toplu__infer_error(ctx, TOPLU_ERR_SHAPE, "channels %lld do not divide by blocksize^2 = %lld",
                               (long long)x->dims[1], (long long)(b * b));
    dims[1] = x->dims[1] >= 0 ? x->dims[1] / (b * b) : toplu__infer_new_dim(ctx);
    dims[2] = x->dims[2] >= 0 ? x->dims[2] * b : toplu__infer_new_dim(ctx);
    dims[3] = x->dims[3] >= 0 ? x->dims[3] * b : toplu__infer_new_dim(ctx);
  } else {
    for (int d = 2; d < 4; d++)
      if (x->dims[d] >= 0 && x->dims[d] % b)
        return toplu__infer_error(ctx, TOPLU_ERR_SHAPE, "dim %d (%lld) does not divide by blocksize %lld", d,
                                 (long long)x->dims[d], (long long)b);
    /* C * b^2 can pass 2^63 when H and W are 0 (C up to 2^40, b^2 up to 2^32) */
    bool ok = true;
    dims[1] = x->dims[1] >= 0 ? toplu__mul_i64_ok(x->dims[1], b * b, &ok) : toplu__infer_new_dim(ctx);
    if (!ok)
      return toplu__infer_error(ctx, TOPLU_ERR_SHAPE, "channels %lld times blocksize^2 = %lld is more than 2^63",
                               (long long)x->dims[1], (long long)(b * b));
    dims[2] = x->dims[2] >= 0 ? x->dims[2] / b : toplu__infer_new_dim(ctx);
    dims[3] = x->dims[3] >= 0 ? x->dims[3] / b : toplu__infer_new_dim(ctx);
  }
  toplu__infer_set(ctx, 0, x->dtype, 4, dims);
  return TOPLU_OK;
}

/* DepthToSpace: [N, C, H, W] -> [N, C/b^2, H*b, W*b]. */
static toplu_status_t infer_depth_to_space(toplu__infer_ctx_t *ctx) { return infer_depth_space(ctx, 1); }

/* SpaceToDepth: [N, C, H, W] -> [N, C*b^2, H/b, W/b]. */
static toplu_status_t infer_space_to_depth(toplu__infer_ctx_t *ctx) { return infer_depth_space(ctx, 0); }

#define MANY 2147483647

const toplu__schema_t toplu__schemas_tensor[] = {
    {"Constant", "", 1, 0, 0, 1, 1, 0, infer_constant, flops_zero, NULL},
    {"Identity", "", 1, 1, 1, 1, 1, 0, infer_identity, flops_zero, NULL},
    {"Shape", "", 1, 1, 1, 1, 1, 0, infer_shape, flops_zero, NULL},
    {"Size", "", 1, 1, 1, 1, 1, 0, infer_size, flops_zero, NULL},
    {"Reshape", "", 5, 2, 2, 1, 1, 1u << 1, infer_reshape, flops_zero, NULL},
    {"Flatten", "", 1, 1, 1, 1, 1, 0, infer_flatten, flops_zero, NULL},
    {"Squeeze", "", 1, 1, 2, 1, 1, 1u << 1, infer_squeeze, flops_zero, NULL},
    {"Unsqueeze", "", 1, 1, 2, 1, 1, 1u << 1, infer_unsqueeze, flops_zero, NULL},
    {"Transpose", "", 1, 1, 1, 1, 1, 0, infer_transpose, flops_zero, toplu__rows_transpose},
    {"Concat", "", 1, 1, MANY, 1, 1, 0, infer_concat, flops_zero, toplu__rows_axis0},
    {"Split", "", 2, 1, 2, 1, MANY, 1u << 1, infer_split, flops_zero, toplu__rows_axis0},
    {"Slice", "", 1, 1, 5, 1, 1, 0x1Eu, infer_slice, flops_zero, NULL},
    {"Gather", "", 1, 2, 2, 1, 1, 0, infer_gather, flops_zero, toplu__rows_gather},
    {"GatherElements", "", 11, 2, 2, 1, 1, 0, infer_gather_elements, flops_zero, NULL},
    {"Expand", "", 8, 2, 2, 1, 1, 1u << 1, infer_expand, flops_zero, NULL},
    {"Tile", "", 6, 2, 2, 1, 1, 1u << 1, infer_tile, flops_zero, NULL},
    {"ConstantOfShape", "", 9, 1, 1, 1, 1, 1u << 0, infer_constant_of_shape, flops_zero, NULL},
    {"Range", "", 11, 3, 3, 1, 1, 0x7u, infer_range, NULL, NULL},
    {"Pad", "", 2, 1, 4, 1, 1, (1u << 1) | (1u << 3), infer_pad, flops_zero, NULL},
    {"DepthToSpace", "", 1, 1, 1, 1, 1, 0, infer_depth_to_space, flops_zero, NULL},
    {"SpaceToDepth", "", 1, 1, 1, 1, 1, 0, infer_space_to_depth, flops_zero, NULL},
    {NULL, NULL, 0, 0, 0, 0, 0, 0, NULL, NULL, NULL},
};
