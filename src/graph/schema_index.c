/*
 * graph/schema_index.c - schemas of the indexing ops (ONNX operator spec,
 * https://onnx.ai/onnx/operators/):
 *   Trilu-14, EyeLike-9, OneHot-9/11, CumSum-11/14, ScatterElements-11/13/16/18
 *   (reduction none/add/mul/max/min), Scatter-9/11 (ScatterElements without
 *   reduction), ScatterND-11/13/16/18, GatherND-11/12/13 (batch_dims),
 *   ReverseSequence-10, TopK-1/10/11, Compress-9/11, NonZero-9/13, Unique-11.
 *
 * Output shapes that depend on tensor values are handled the engine's way
 * (graph/infer.c, toplu__graph_mark_value_inputs): the inputs that decide
 * them are flagged in const_inputs, so at plan time they hold values (a
 * graph input among them keys the plan on its values) and infer counts the
 * output; at load, without values, the counted dim is a fresh symbol.
 * These inputs are OneHot's depth, TopK's K, Compress's condition, and the
 * data of NonZero and Unique (whose nodes then always fold).
 */
#include <stdlib.h>
#include <string.h>

#include "graph/infer.h"
#include "graph/schema.h"

static int rank_of(const toplu__node_t *n, const void *tv, int i) {
  const toplu__value_table_t *t = tv;
  return n->n_inputs > i && n->inputs[i] >= 0 ? t->vals[n->inputs[i]].ndim : 0;
}

static int is_index_type(toplu_dtype_t dt) { return dt == TOPLU_DTYPE_INT32 || dt == TOPLU_DTYPE_INT64; }

/* Numeric or bool: what toplu stores. */
static int is_data_type(toplu_dtype_t dt) {
  return toplu_dtype_size(dt) > 0 && dt != TOPLU_DTYPE_STRING && dt != TOPLU_DTYPE_BFLOAT16;
}

static toplu_status_t check_data(toplu__infer_ctx_t *ctx, int i, const char *what) {
  if (!is_data_type(ctx->in[i].dtype))
    return toplu__infer_error(ctx, TOPLU_ERR_UNSUPPORTED, "input %s is %s, which %s does not support", what,
                             toplu_dtype_name(ctx->in[i].dtype), ctx->node->op_type);
  return TOPLU_OK;
}

/* Input i, when present, is a one-element tensor (rank 0 or [1]). */
static toplu_status_t check_scalar(toplu__infer_ctx_t *ctx, int i, const char *what) {
  if (!toplu__infer_has_input(ctx, i)) return TOPLU_OK;
  const toplu_tensor_t *t = &ctx->in[i];
  if (t->ndim > 1 || (t->ndim == 1 && t->dims[0] >= 0 && t->dims[0] != 1))
    return toplu__infer_error(ctx, TOPLU_ERR_SHAPE, "input %s must be a scalar", what);
  return TOPLU_OK;
}

/* ---- Trilu, EyeLike ---- */

static toplu_status_t infer_trilu(toplu__infer_ctx_t *ctx) {
  toplu_status_t st;
  if ((st = check_data(ctx, 0, "input")) || (st = check_scalar(ctx, 1, "k"))) return st;
  if (ctx->in[0].ndim < 2) return toplu__infer_error(ctx, TOPLU_ERR_SHAPE, "input has rank %d; Trilu needs >= 2", ctx->in[0].ndim);
  if (toplu__infer_has_input(ctx, 1) && ctx->in[1].dtype != TOPLU_DTYPE_INT64)
    return toplu__infer_error(ctx, TOPLU_ERR_INVALID_MODEL, "k is %s; expected int64", toplu_dtype_name(ctx->in[1].dtype));
  toplu__infer_same(ctx, 0, 0);
  return TOPLU_OK;
}

/* Trilu on a matrix whose rows are dim 0 keeps a different part of each row. */
static int rows_trilu(const toplu__node_t *n, const void *t) { return rank_of(n, t, 0) <= 2; }

static toplu_status_t infer_eyelike(toplu__infer_ctx_t *ctx) {
  toplu_status_t st = check_data(ctx, 0, "input");
  if (st) return st;
  if (ctx->in[0].ndim != 2) return toplu__infer_error(ctx, TOPLU_ERR_SHAPE, "input has rank %d; EyeLike needs 2", ctx->in[0].ndim);
  toplu_dtype_t dt = ctx->in[0].dtype;
  const toplu__attr_t *a = toplu__node_attr(ctx->node, "dtype");
  if (a) {
    if (a->type != TOPLU_ATTR_INT || a->i < 0 || a->i > 64 || !is_data_type((toplu_dtype_t)a->i))
      return toplu__infer_error(ctx, TOPLU_ERR_UNSUPPORTED, "dtype %lld is not supported", (long long)a->i);
    dt = (toplu_dtype_t)a->i;
  }
  toplu__infer_set(ctx, 0, dt, 2, ctx->in[0].dims);
  return TOPLU_OK;
}

static int rows_always(const toplu__node_t *n, const void *t) {
  (void)n, (void)t;
  return 1;
}

/* ---- OneHot ---- */

static toplu_status_t infer_onehot(toplu__infer_ctx_t *ctx) {
  const toplu_tensor_t *ix = &ctx->in[0], *dp = &ctx->in[1], *vals = &ctx->in[2];
  toplu_status_t st;
  if ((st = check_data(ctx, 0, "indices")) || (st = check_data(ctx, 1, "depth")) || (st = check_data(ctx, 2, "values")) ||
      (st = check_scalar(ctx, 1, "depth")))
    return st;
  if (vals->ndim != 1 || (vals->dims[0] >= 0 && vals->dims[0] != 2))
    return toplu__infer_error(ctx, TOPLU_ERR_SHAPE, "values must hold two elements [off, on]");
  int r = ix->ndim, axis;
  if (r + 1 > TOPLU_MAX_DIMS) return toplu__infer_error(ctx, TOPLU_ERR_UNSUPPORTED, "output rank above %d", TOPLU_MAX_DIMS);
  if ((st = toplu__infer_axis(ctx, toplu__node_attr_int(ctx->node, "axis", -1), r + 1, "axis", &axis))) return st;
  int64_t depth;
  if (dp->data) {
    double d = toplu__tensor_get_double(dp, 0);
    if (!(d >= 1 && d < 9.0e15)) return toplu__infer_error(ctx, TOPLU_ERR_INVALID_MODEL, "depth %g is not positive", d);
    depth = (int64_t)d;
  } else {
    depth = toplu__infer_new_dim(ctx);
  }
  int64_t dims[TOPLU_MAX_DIMS];
  for (int d = 0, k = 0; d <= r; d++) dims[d] = d == axis ? depth : ix->dims[k++];
  toplu__infer_set(ctx, 0, vals->dtype, r + 1, dims);
  return TOPLU_OK;
}

static int rows_onehot(const toplu__node_t *n, const void *t) {
  int64_t axis = toplu__node_attr_int(n, "axis", -1);
  if (axis < 0) axis += rank_of(n, t, 0) + 1;
  return axis == 0;
}

/* ---- CumSum ---- */

static toplu_status_t infer_cumsum(toplu__infer_ctx_t *ctx) {
  toplu_status_t st;
  if ((st = check_data(ctx, 0, "x")) || (st = check_scalar(ctx, 1, "axis"))) return st;
  if (ctx->in[0].dtype == TOPLU_DTYPE_BOOL)
    return toplu__infer_error(ctx, TOPLU_ERR_INVALID_MODEL, "CumSum does not take bool tensors");
  if (!is_index_type(ctx->in[1].dtype))
    return toplu__infer_error(ctx, TOPLU_ERR_INVALID_MODEL, "axis is %s; expected int32 or int64",
                             toplu_dtype_name(ctx->in[1].dtype));
  if (ctx->in[0].ndim == 0) return toplu__infer_error(ctx, TOPLU_ERR_SHAPE, "x is a scalar; CumSum needs rank >= 1");
  if (ctx->in[1].data) {
    int a;
    if ((st = toplu__infer_axis(ctx, toplu__tensor_get_int(&ctx->in[1], 0), ctx->in[0].ndim, "axis", &a))) return st;
  }
  toplu__infer_same(ctx, 0, 0);
  return TOPLU_OK;
}

static int rows_cumsum(const toplu__node_t *n, const void *tv) {
  const toplu__value_table_t *t = tv;
  if (n->n_inputs < 2 || n->inputs[1] < 0 || !t->vals[n->inputs[1]].data) return 1;
  int64_t a = toplu__tensor_get_int(&t->vals[n->inputs[1]], 0);
  return (a < 0 ? a + rank_of(n, tv, 0) : a) == 0;
}

/* ---- Scatter, ScatterElements, ScatterND, GatherND ---- */

/* ScatterND keeps data's rows apart when its indices are known at plan time
 * (computed from shapes: PyTorch's y[:, 0] = x[:, -1] gives indices built
 * from arange(batch)), their dim 0 runs along the rows, and each tuple's
 * first coordinate is its own row: row r of the output is data's row r with
 * updates' row r written into it.  Otherwise (indices from data, or a tuple
 * pointing at another row) it counts as mixing, as before (a fresh user's
 * finding of 2026-12-06: every ScatterND was refused). */
static int rows_scatter_nd(const toplu__node_t *n, const void *tv) {
  const toplu__value_table_t *t = tv;
  if (n->n_inputs < 3 || n->inputs[0] < 0 || n->inputs[1] < 0) return 1;
  const toplu_tensor_t *x = &t->vals[n->inputs[0]], *ix = &t->vals[n->inputs[1]];
  if (!ix->data || ix->ndim < 2 || x->ndim < 1 || ix->dims[0] != x->dims[0] || ix->dims[ix->ndim - 1] < 1) return 1;
  int64_t k = ix->dims[ix->ndim - 1], tuples = toplu_tensor_numel(ix) / k, per_row = ix->dims[0] ? tuples / ix->dims[0] : 0;
  for (int64_t q = 0; q < tuples; q++) {
    int64_t r = toplu__tensor_get_int(ix, q * k);
    if (r < 0) r += x->dims[0];
    if (r != q / per_row) return 1;
  }
  return 0;
}

static toplu_status_t check_reduction(toplu__infer_ctx_t *ctx) {
  const char *r = toplu__node_attr_string(ctx->node, "reduction", "none");
  if (strcmp(r, "none") && strcmp(r, "add") && strcmp(r, "mul") && strcmp(r, "max") && strcmp(r, "min"))
    return toplu__infer_error(ctx, TOPLU_ERR_INVALID_MODEL, "reduction '%s' is not none, add, mul, max or min", r);
  if (strcmp(r, "none") && ctx->in[0].dtype == TOPLU_DTYPE_BOOL)
    return toplu__infer_error(ctx, TOPLU_ERR_UNSUPPORTED, "reduction '%s' on bool tensors is not supported", r);
  return TOPLU_OK;
}

static toplu_status_t infer_scatter_elements(toplu__infer_ctx_t *ctx) {
  const toplu_tensor_t *x = &ctx->in[0], *ix = &ctx->in[1], *u = &ctx->in[2];
  toplu_status_t st;
  if ((st = check_data(ctx, 0, "data")) || (st = check_reduction(ctx))) return st;
  if (!is_index_type(ix->dtype))
    return toplu__infer_error(ctx, TOPLU_ERR_INVALID_MODEL, "indices are %s; expected int32 or int64", toplu_dtype_name(ix->dtype));
  if (u->dtype != x->dtype)
    return toplu__infer_error(ctx, TOPLU_ERR_INVALID_MODEL, "updates are %s, data %s", toplu_dtype_name(u->dtype),
                             toplu_dtype_name(x->dtype));
  if (ix->ndim != x->ndim || u->ndim != x->ndim)
    return toplu__infer_error(ctx, TOPLU_ERR_SHAPE, "data, indices and updates must have one rank (%d, %d, %d)", x->ndim,
                             ix->ndim, u->ndim);
  for (int d = 0; d < ix->ndim; d++)
    if (ix->dims[d] >= 0 && u->dims[d] >= 0 && ix->dims[d] != u->dims[d])
      return toplu__infer_error(ctx, TOPLU_ERR_SHAPE, "indices and updates differ at dim %d", d);
  int a;
  if (x->ndim && (st = toplu__infer_axis(ctx, toplu__node_attr_int(ctx->node, "axis", 0), x->ndim, "axis", &a))) return st;
  toplu__infer_same(ctx, 0, 0);
  return TOPLU_OK;
}

static toplu_status_t infer_scatter_nd(toplu__infer_ctx_t *ctx) {
  const toplu_tensor_t *x = &ctx->in[0], *ix = &ctx->in[1], *u = &ctx->in[2];
  toplu_status_t st;
  if ((st = check_data(ctx, 0, "data")) || (st = check_reduction(ctx))) return st;
  if (ix->dtype != TOPLU_DTYPE_INT64)
    return toplu__infer_error(ctx, TOPLU_ERR_INVALID_MODEL, "indices are %s; expected int64", toplu_dtype_name(ix->dtype));
  if (u->dtype != x->dtype)
    return toplu__infer_error(ctx, TOPLU_ERR_INVALID_MODEL, "updates are %s, data %s", toplu_dtype_name(u->dtype),
                             toplu_dtype_name(x->dtype));
  if (ix->ndim < 1) return toplu__infer_error(ctx, TOPLU_ERR_SHAPE, "indices must have rank >= 1");
  int64_t k = ix->dims[ix->ndim - 1];
  if (k >= 0) {
    if (k > x->ndim)
      return toplu__infer_error(ctx, TOPLU_ERR_SHAPE, "index tuples of %lld for data of rank %d", (long long)k, x->ndim);
    if (u->ndim != ix->ndim - 1 + x->ndim - (int)k)
      return toplu__infer_error(ctx, TOPLU_ERR_SHAPE, "updates have rank %d; expected %d", u->ndim,
                               ix->ndim - 1 + x->ndim - (int)k);
  }
  toplu__infer_same(ctx, 0, 0);
  return TOPLU_OK;
}

static toplu_status_t infer_gather_nd(toplu__infer_ctx_t *ctx) {
  const toplu_tensor_t *x = &ctx->in[0], *ix = &ctx->in[1];
  toplu_status_t st = check_data(ctx, 0, "data");
  if (st) return st;
  if (ix->dtype != TOPLU_DTYPE_INT64)
    return toplu__infer_error(ctx, TOPLU_ERR_INVALID_MODEL, "indices are %s; expected int64", toplu_dtype_name(ix->dtype));
  int64_t b = toplu__node_attr_int(ctx->node, "batch_dims", 0);
  int q = ix->ndim, r = x->ndim;
  if (q < 1 || r < 1) return toplu__infer_error(ctx, TOPLU_ERR_SHAPE, "data and indices must have rank >= 1");
  if (b < 0 || b >= q || b >= r)
    return toplu__infer_error(ctx, TOPLU_ERR_INVALID_MODEL, "batch_dims %lld is not below both ranks", (long long)b);
  int64_t k = ix->dims[q - 1];
  if (k < 0) return TOPLU_OK; /* rank unknown until the tuples' length is */
  if (k < 1 || b + k > r)
    return toplu__infer_error(ctx, TOPLU_ERR_SHAPE, "index tuples of %lld for data of rank %d and %lld batch dims",
                             (long long)k, r, (long long)b);
  int64_t dims[TOPLU_MAX_DIMS];
  int nd = 0;
  for (int d = 0; d < q - 1; d++) dims[nd++] = ix->dims[d];
  for (int d = (int)(b + k); d < r; d++) dims[nd++] = x->dims[d];
  for (int d = 0; d < b; d++)
    if (x->dims[d] >= 0 && ix->dims[d] >= 0 && x->dims[d] != ix->dims[d])
      return toplu__infer_error(ctx, TOPLU_ERR_SHAPE, "batch dim %d differs between data and indices", d);
  toplu__infer_set(ctx, 0, x->dtype, nd, dims);
  return TOPLU_OK;
}

static int rows_gather_nd(const toplu__node_t *n, const void *t) {
  (void)t;
  return toplu__node_attr_int(n, "batch_dims", 0) < 1;
}

/* ---- ReverseSequence ---- */

static toplu_status_t infer_reverse_sequence(toplu__infer_ctx_t *ctx) {
  const toplu_tensor_t *x = &ctx->in[0], *sl = &ctx->in[1];
  toplu_status_t st = check_data(ctx, 0, "input");
  if (st) return st;
  if (x->ndim < 2) return toplu__infer_error(ctx, TOPLU_ERR_SHAPE, "input must have rank >= 2");
  int64_t ta = toplu__node_attr_int(ctx->node, "time_axis", 0), ba = toplu__node_attr_int(ctx->node, "batch_axis", 1);
  if (!((ta == 0 && ba == 1) || (ta == 1 && ba == 0)))
    return toplu__infer_error(ctx, TOPLU_ERR_INVALID_MODEL, "time_axis and batch_axis must be 0 and 1 (or 1 and 0)");
  if (sl->dtype != TOPLU_DTYPE_INT64 || sl->ndim != 1)
    return toplu__infer_error(ctx, TOPLU_ERR_INVALID_MODEL, "sequence_lens must be a 1-D int64 tensor");
  if (sl->dims[0] >= 0 && x->dims[ba] >= 0 && sl->dims[0] != x->dims[ba])
    return toplu__infer_error(ctx, TOPLU_ERR_SHAPE, "sequence_lens has %lld values for a batch of %lld",
                             (long long)sl->dims[0], (long long)x->dims[ba]);
  toplu__infer_same(ctx, 0, 0);
  return TOPLU_OK;
}

static int rows_reverse_sequence(const toplu__node_t *n, const void *t) {
  (void)t;
  return toplu__node_attr_int(n, "time_axis", 0) == 0;
}

/* ---- TopK ---- */

static toplu_status_t infer_topk(toplu__infer_ctx_t *ctx) {
  const toplu_tensor_t *x = &ctx->in[0];
  toplu_status_t st = check_data(ctx, 0, "X");
  if (st) return st;
  if (x->dtype == TOPLU_DTYPE_BOOL) return toplu__infer_error(ctx, TOPLU_ERR_INVALID_MODEL, "TopK does not take bool tensors");
  int axis;
  if (x->ndim == 0) return toplu__infer_error(ctx, TOPLU_ERR_SHAPE, "X is a scalar; TopK needs rank >= 1");
  if ((st = toplu__infer_axis(ctx, toplu__node_attr_int(ctx->node, "axis", -1), x->ndim, "axis", &axis))) return st;
  int64_t k;
  if (ctx->node->opset < 10) {
    k = toplu__node_attr_int(ctx->node, "k", -1);
  } else {
    if (!toplu__infer_has_input(ctx, 1)) return toplu__infer_error(ctx, TOPLU_ERR_INVALID_MODEL, "input K is missing");
    const toplu_tensor_t *kt = &ctx->in[1];
    if (kt->dtype != TOPLU_DTYPE_INT64 || kt->ndim != 1 || (kt->dims[0] >= 0 && kt->dims[0] != 1))
      return toplu__infer_error(ctx, TOPLU_ERR_INVALID_MODEL, "K must be a 1-D int64 tensor of one value");
    k = kt->data ? toplu__tensor_get_int(kt, 0) : toplu__infer_new_dim(ctx);
  }
  if (ctx->node->opset < 10 || ctx->in[1].data) {
    if (k < 0) return toplu__infer_error(ctx, TOPLU_ERR_INVALID_MODEL, "k %lld is negative", (long long)k);
    if (x->dims[axis] >= 0 && k > x->dims[axis])
      return toplu__infer_error(ctx, TOPLU_ERR_SHAPE, "k %lld is larger than axis %d (%lld)", (long long)k, axis,
                               (long long)x->dims[axis]);
  }
  int64_t dims[TOPLU_MAX_DIMS];
  memcpy(dims, x->dims, sizeof dims);
  dims[axis] = k;
  toplu__infer_set(ctx, 0, x->dtype, x->ndim, dims);
  if (ctx->n_out > 1) toplu__infer_set(ctx, 1, TOPLU_DTYPE_INT64, x->ndim, dims);
  return TOPLU_OK;
}

static int rows_topk(const toplu__node_t *n, const void *t) {
  int64_t axis = toplu__node_attr_int(n, "axis", -1);
  if (axis < 0) axis += rank_of(n, t, 0);
  return axis == 0;
}

/* ---- Compress, NonZero, Unique ---- */

static toplu_status_t infer_compress(toplu__infer_ctx_t *ctx) {
  const toplu_tensor_t *x = &ctx->in[0], *c = &ctx->in[1];
  toplu_status_t st = check_data(ctx, 0, "input");
  if (st) return st;
  if (c->dtype != TOPLU_DTYPE_BOOL || c->ndim != 1)
    return toplu__infer_error(ctx, TOPLU_ERR_INVALID_MODEL, "condition must be a 1-D bool tensor");
  const toplu__attr_t *aa = toplu__node_attr(ctx->node, "axis");
  int axis = -1;
  if (aa && (st = toplu__infer_axis(ctx, aa->i, x->ndim, "axis", &axis))) return st;
  int64_t len = -1; /* the axis' length, or numel without axis */
  if (axis >= 0) len = x->dims[axis];
  else {
    len = 1;
    for (int d = 0; d < x->ndim && len >= 0; d++) len = x->dims[d] < 0 ? -1 : len * x->dims[d];
  }
  int64_t n;
  if (c->data && len >= 0) {
    int64_t nc = c->dims[0];
    n = 0;
    for (int64_t i = 0; i < nc; i++)
      if (((const uint8_t *)c->data)[i]) {
        if (i >= len)
          return toplu__infer_error(ctx, TOPLU_ERR_SHAPE, "condition selects element %lld of an axis of %lld",
                                   (long long)i, (long long)len);
        n++;
      }
  } else {
    n = toplu__infer_new_dim(ctx);
  }
  if (axis < 0) {
    toplu__infer_set(ctx, 0, x->dtype, 1, &n);
  } else {
    int64_t dims[TOPLU_MAX_DIMS];
    memcpy(dims, x->dims, sizeof dims);
    dims[axis] = n;
    toplu__infer_set(ctx, 0, x->dtype, x->ndim, dims);
  }
  return TOPLU_OK;
}

static int rows_compress(const toplu__node_t *n, const void *t) {
  const toplu__attr_t *a = toplu__node_attr(n, "axis");
  if (!a) return 1;
  int64_t axis = a->i < 0 ? a->i + rank_of(n, t, 0) : a->i;
  return axis == 0;
}

static toplu_status_t infer_nonzero(toplu__infer_ctx_t *ctx) {
  const toplu_tensor_t *x = &ctx->in[0];
  toplu_status_t st = check_data(ctx, 0, "X");
  if (st) return st;
  int64_t dims[2] = {x->ndim, 0};
  if (x->data) {
    int64_t n = toplu_tensor_numel(x);
    for (int64_t i = 0; i < n; i++) dims[1] += toplu__tensor_get_double(x, i) != 0;
  } else {
    dims[1] = toplu__infer_new_dim(ctx);
  }
  toplu__infer_set(ctx, 0, TOPLU_DTYPE_INT64, 2, dims);
  return TOPLU_OK;
}

/* Unique: rows are slices along axis (elements without axis), compared by
 * value; sorting them groups the equal ones, whose number is the output's. */
typedef struct uq_row {
  const toplu_tensor_t *x;
  int64_t row, outer, rows, inner;
} uq_row_t;

static int uq_cmp(const void *pa, const void *pb) {
  const uq_row_t *a = pa, *b = pb;
  const toplu_tensor_t *x = a->x;
  int fl = x->dtype == TOPLU_DTYPE_FLOAT || x->dtype == TOPLU_DTYPE_DOUBLE || x->dtype == TOPLU_DTYPE_FLOAT16;
  for (int64_t o = 0; o < a->outer; o++)
    for (int64_t i = 0; i < a->inner; i++) {
      int64_t ka = (o * a->rows + a->row) * a->inner + i, kb = (o * a->rows + b->row) * a->inner + i;
      if (fl) {
        double va = toplu__tensor_get_double(x, ka), vb = toplu__tensor_get_double(x, kb);
        int na = va != va, nb = vb != vb; /* NaN after every number, equal to NaN */
        if (na || nb) {
          if (na != nb) return na ? 1 : -1;
        } else if (va != vb) {
          return va < vb ? -1 : 1;
        }
      } else {
        int64_t va = toplu__tensor_get_int(x, ka), vb = toplu__tensor_get_int(x, kb);
        if (va != vb) return va < vb ? -1 : 1;
      }
    }
  return 0;
}

static toplu_status_t infer_unique(toplu__infer_ctx_t *ctx) {
  const toplu_tensor_t *x = &ctx->in[0];
  toplu_status_t st = check_data(ctx, 0, "X");
  if (st) return st;
  const toplu__attr_t *aa = toplu__node_attr(ctx->node, "axis");
  int axis = -1;
  if (aa && (st = toplu__infer_axis(ctx, aa->i, x->ndim, "axis", &axis))) return st;
  int64_t u;
  int64_t rows = axis >= 0 ? x->dims[axis] : -1;
  if (x->data) {
    int64_t outer = 1, inner = 1;
    if (axis >= 0) {
      for (int d = 0; d < axis; d++) outer *= x->dims[d];
      for (int d = axis + 1; d < x->ndim; d++) inner *= x->dims[d];
    } else {
      rows = toplu_tensor_numel(x);
    }
    uq_row_t *r = malloc((size_t)(rows ? rows : 1) * sizeof *r);
    if (!r) return toplu__infer_error(ctx, TOPLU_ERR_OUT_OF_MEMORY, "out of memory");
    for (int64_t i = 0; i < rows; i++) r[i] = (uq_row_t){x, i, outer, rows, inner};
    qsort(r, (size_t)rows, sizeof *r, uq_cmp);
    u = rows ? 1 : 0;
    for (int64_t i = 1; i < rows; i++) u += uq_cmp(&r[i - 1], &r[i]) != 0;
    free(r);
  } else {
    u = toplu__infer_new_dim(ctx);
  }
  if (axis < 0) {
    toplu__infer_set(ctx, 0, x->dtype, 1, &u);
  } else {
    int64_t dims[TOPLU_MAX_DIMS];
    memcpy(dims, x->dims, sizeof dims);
    dims[axis] = u;
    toplu__infer_set(ctx, 0, x->dtype, x->ndim, dims);
  }
  if (rows < 0) {
    rows = 1;
    for (int d = 0; d < x->ndim && rows >= 0; d++) rows = x->dims[d] < 0 ? -1 : rows * x->dims[d];
    if (rows < 0) rows = toplu__infer_new_dim(ctx);
  }
  if (ctx->n_out > 1) toplu__infer_set(ctx, 1, TOPLU_DTYPE_INT64, 1, &u);
  if (ctx->n_out > 2) toplu__infer_set(ctx, 2, TOPLU_DTYPE_INT64, 1, &rows);
  if (ctx->n_out > 3) toplu__infer_set(ctx, 3, TOPLU_DTYPE_INT64, 1, &u);
  return TOPLU_OK;
}

static int64_t flops_zero(const toplu__infer_ctx_t *ctx) {
  (void)ctx;
  return 0;
}

/* Sorting: about log2(n) comparisons per element. */
static int64_t flops_sort(const toplu__infer_ctx_t *ctx) {
  int64_t n = toplu_tensor_numel(&ctx->in[0]), l = 1;
  while ((int64_t)1 << l < n && l < 62) l++;
  return n * l;
}

const toplu__schema_t toplu__schemas_index[] = {
    {"Trilu", "", 14, 1, 2, 1, 1, 0, infer_trilu, flops_zero, rows_trilu},
    {"EyeLike", "", 9, 1, 1, 1, 1, 0, infer_eyelike, flops_zero, rows_always},
    {"OneHot", "", 9, 3, 3, 1, 1, 1u << 1, infer_onehot, NULL, rows_onehot},
    {"CumSum", "", 11, 2, 2, 1, 1, 0, infer_cumsum, NULL, rows_cumsum},
    {"ScatterElements", "", 11, 3, 3, 1, 1, 0, infer_scatter_elements, flops_zero, toplu__rows_axis0},
    {"Scatter", "", 9, 3, 3, 1, 1, 0, infer_scatter_elements, flops_zero, toplu__rows_axis0},
    {"ScatterND", "", 11, 3, 3, 1, 1, 0, infer_scatter_nd, flops_zero, rows_scatter_nd},
    {"GatherND", "", 11, 2, 2, 1, 1, 0, infer_gather_nd, flops_zero, rows_gather_nd},
    {"ReverseSequence", "", 10, 2, 2, 1, 1, 0, infer_reverse_sequence, flops_zero, rows_reverse_sequence},
    {"TopK", "", 1, 1, 2, 2, 2, 1u << 1, infer_topk, flops_sort, rows_topk},
    {"Compress", "", 9, 2, 2, 1, 1, 1u << 1, infer_compress, flops_zero, rows_compress},
    {"NonZero", "", 9, 1, 1, 1, 1, 1u << 0, infer_nonzero, NULL, rows_always},
    {"Unique", "", 11, 1, 1, 1, 4, 1u << 0, infer_unique, flops_sort, rows_always},
    {NULL, NULL, 0, 0, 0, 0, 0, 0, NULL, NULL, NULL},
};
