/*
 * ops/index.c - kernels of the indexing ops (ONNX operator spec,
 * https://onnx.ai/onnx/operators/; shapes in graph/schema_index.c):
 *   Trilu-14: keep j - i >= k (upper) or j - i <= k (lower) of the last two
 *     dims, zero elsewhere;
 *   EyeLike-9: ones on the k-th diagonal;
 *   OneHot-9/11: on where the index (negative ones counted from depth) is the
 *     position along axis, off elsewhere; indices outside [-depth, depth)
 *     give all off;
 *   CumSum-11/14: inclusive or exclusive, forward or reverse sums along axis
 *     (floats summed in double, integers wrapping);
 *   ScatterElements-11/13/16/18, Scatter-9/11, ScatterND-11/13/16/18: data
 *     copied, then updates written (or added, multiplied, max, min) in index
 *     order, so later duplicates win;
 *   GatherND-11/12/13, ReverseSequence-10;
 *   TopK-1/10/11: per slice a stable merge sort of positions by value
 *     (largest first, or smallest), equal values in index order;
 *   Compress-9/11, NonZero-9/13 (row-major order), Unique-11 (sorted or in
 *     order of first occurrence, with indices, inverse_indices and counts).
 * Data of any dtype moves by element size; arithmetic goes through
 * ops/elem_io.h.  Sorting scratch is the workspace.
 */
#include <string.h>

#include "ops/elem_io.h"
#include "ops/kernel.h"
#include "ops/tensor_copy.h"

static toplu_status_t check_bytes(toplu__kernel_ctx_t *ctx, int i) {
  if (!toplu__copy_esize(ctx->in[i].dtype) || !toplu__is_numeric_dtype(ctx->in[i].dtype))
    return toplu__kernel_error(ctx, TOPLU_ERR_UNSUPPORTED, "%s on %s tensors is not supported", ctx->node->op_type,
                              toplu_dtype_name(ctx->in[i].dtype));
  return TOPLU_OK;
}

static toplu_status_t prepare_any(toplu__kernel_ctx_t *ctx, toplu__kernel_info_t *info) {
  (void)info;
  return check_bytes(ctx, 0);
}

static int axis_attr(const toplu__kernel_ctx_t *ctx, int r, int64_t dflt) {
  int64_t a = toplu__node_attr_int(ctx->node, "axis", dflt);
  if (a < 0) a += r;
  return a < 0 ? 0 : a >= r ? (r > 0 ? r - 1 : 0) : (int)a;
}

/* Copy element s of src to element d of dst (es bytes each). */
static inline void elem_copy(void *dst, int64_t d, const void *src, int64_t s, size_t es) {
  memcpy((unsigned char *)dst + (size_t)d * es, (const unsigned char *)src + (size_t)s * es, es);
}

static void copy_input(toplu__kernel_ctx_t *ctx) {
  if (ctx->out[0].data != ctx->in[0].data)
    toplu__copy_bytes(ctx->out[0].data, ctx->in[0].data, toplu_tensor_nbytes(&ctx->out[0]), ctx->threads);
}

/* ---- Trilu, EyeLike ---- */

static toplu_status_t run_trilu(toplu__kernel_ctx_t *ctx) {
  const toplu_tensor_t *x = &ctx->in[0];
  toplu_tensor_t *y = &ctx->out[0];
  const int r = x->ndim;
  const int64_t rows = x->dims[r - 2], cols = x->dims[r - 1], mats = toplu__dims_prod(x->dims, 0, r - 2);
  const size_t es = toplu_dtype_size(x->dtype);
  int64_t k = ctx->n_in > 1 && ctx->in[1].ndim >= 0 ? toplu__tensor_get_int(&ctx->in[1], 0) : 0;
  const int upper = toplu__node_attr_int(ctx->node, "upper", 1) != 0;
  /* Clamp k so that i + k cannot overflow; beyond +-cols it changes nothing. */
  if (k > cols + 1) k = cols + 1;
  if (k < -rows - 1) k = -rows - 1;
  copy_input(ctx);
  for (int64_t m = 0; m < mats; m++)
    for (int64_t i = 0; i < rows; i++) {
      unsigned char *row = (unsigned char *)y->data + (size_t)((m * rows + i) * cols) * es;
      int64_t edge = i + k; /* upper: zero j < edge; lower: zero j > edge */
      if (upper) {
        int64_t z = edge < 0 ? 0 : edge > cols ? cols : edge;
        memset(row, 0, (size_t)z * es);
      } else {
        int64_t z = edge + 1 < 0 ? 0 : edge + 1 > cols ? cols : edge + 1;
        memset(row + (size_t)z * es, 0, (size_t)(cols - z) * es);
      }
    }
  return TOPLU_OK;
}

static toplu_status_t prepare_eyelike(toplu__kernel_ctx_t *ctx, toplu__kernel_info_t *info) {
  (void)info;
  if (!toplu__is_numeric_dtype(ctx->out[0].dtype))
    return toplu__kernel_error(ctx, TOPLU_ERR_UNSUPPORTED, "EyeLike to %s is not supported",
                              toplu_dtype_name(ctx->out[0].dtype));
  return TOPLU_OK;
}

static toplu_status_t run_eyelike(toplu__kernel_ctx_t *ctx) {
  toplu_tensor_t *y = &ctx->out[0];
  const int64_t rows = y->dims[0], cols = y->dims[1], k = toplu__node_attr_int(ctx->node, "k", 0);
  memset(y->data, 0, toplu_tensor_nbytes(y));
  for (int64_t i = 0; i < rows; i++) {
    if (k > cols || k < -rows) break;
    int64_t j = i + k;
    if (j >= 0 && j < cols) toplu__store_int(y, i * cols + j, 1);
  }
  return TOPLU_OK;
}

/* ---- OneHot ---- */

static toplu_status_t prepare_onehot(toplu__kernel_ctx_t *ctx, toplu__kernel_info_t *info) {
  (void)info;
  toplu_status_t st;
  if ((st = check_bytes(ctx, 0)) || (st = check_bytes(ctx, 2))) return st;
  return TOPLU_OK;
}

static toplu_status_t run_onehot(toplu__kernel_ctx_t *ctx) {
  const toplu_tensor_t *ix = &ctx->in[0], *v = &ctx->in[2];
  toplu_tensor_t *y = &ctx->out[0];
  const int r = y->ndim, axis = axis_attr(ctx, r, -1);
  const int64_t depth = y->dims[axis], outer = toplu__dims_prod(y->dims, 0, axis),
                inner = toplu__dims_prod(y->dims, axis + 1, r);
  const size_t es = toplu_dtype_size(y->dtype);
  for (int64_t o = 0; o < outer; o++)
    for (int64_t i = 0; i < inner; i++) {
      double dv = toplu__tensor_get_double(ix, o * inner + i);
      int64_t hot = -1;
      if (dv >= (double)-depth && dv < (double)depth) {
        hot = (int64_t)dv;
        if (hot < 0) hot += depth;
      }
      for (int64_t d = 0; d < depth; d++) elem_copy(y->data, (o * depth + d) * inner + i, v->data, d == hot, es);
    }
  return TOPLU_OK;
}

/* ---- CumSum ---- */

static toplu_status_t prepare_cumsum(toplu__kernel_ctx_t *ctx, toplu__kernel_info_t *info) {
  (void)info;
  toplu_dtype_t dt = ctx->in[0].dtype;
  if (!toplu__is_numeric_dtype(dt) || dt == TOPLU_DTYPE_BOOL)
    return toplu__kernel_error(ctx, TOPLU_ERR_UNSUPPORTED, "CumSum on %s tensors is not supported", toplu_dtype_name(dt));
  return TOPLU_OK;
}

static toplu_status_t run_cumsum(toplu__kernel_ctx_t *ctx) {
  const toplu_tensor_t *x = &ctx->in[0];
  toplu_tensor_t *y = &ctx->out[0];
  const int r = x->ndim;
  int64_t a = toplu__tensor_get_int(&ctx->in[1], 0);
  if (a < 0) a += r;
  if (a < 0 || a >= r)
    return toplu__kernel_error(ctx, TOPLU_ERR_INVALID_ARGUMENT, "axis %lld is out of range for rank %d",
                              (long long)toplu__tensor_get_int(&ctx->in[1], 0), r);
  const int axis = (int)a;
  const int excl = toplu__node_attr_int(ctx->node, "exclusive", 0) != 0;
  const int rev = toplu__node_attr_int(ctx->node, "reverse", 0) != 0;
  const int64_t n = x->dims[axis], outer = toplu__dims_prod(x->dims, 0, axis),
                inner = toplu__dims_prod(x->dims, axis + 1, r);
  const int fl = toplu__is_float_dtype(x->dtype);
  for (int64_t o = 0; o < outer; o++)
    for (int64_t i = 0; i < inner; i++) {
      double sd = 0;
      uint64_t si = 0;
      for (int64_t s = 0; s < n; s++) {
        int64_t j = rev ? n - 1 - s : s, k = (o * n + j) * inner + i;
        if (fl) {
          double v = toplu__tensor_get_double(x, k);
          if (!excl) sd += v;
          toplu__store_double(y, k, sd);
          if (excl) sd += v;
        } else {
          uint64_t v = (uint64_t)toplu__tensor_get_int(x, k);
          if (!excl) si += v;
          toplu__store_int(y, k, (int64_t)si);
          if (excl) si += v;
        }
      }
    }
  return TOPLU_OK;
}

/* ---- Scatter family, GatherND ---- */

typedef enum { RD_NONE, RD_ADD, RD_MUL, RD_MAX, RD_MIN } reduction_t;

static reduction_t reduction_of(const toplu__kernel_ctx_t *ctx) {
  const char *r = toplu__node_attr_string(ctx->node, "reduction", "none");
  return !strcmp(r, "add") ? RD_ADD : !strcmp(r, "mul") ? RD_MUL : !strcmp(r, "max") ? RD_MAX
         : !strcmp(r, "min") ? RD_MIN : RD_NONE;
}

/* y[d] (op)= u[s]. */
static void scatter_one(toplu_tensor_t *y, int64_t d, const toplu_tensor_t *u, int64_t s, reduction_t rd, size_t es) {
  if (rd == RD_NONE) {
    elem_copy(y->data, d, u->data, s, es);
  } else if (toplu__is_float_dtype(y->dtype)) {
    double a = toplu__tensor_get_double(y, d), b = toplu__tensor_get_double(u, s);
    toplu__store_double(y, d, rd == RD_ADD ? a + b : rd == RD_MUL ? a * b : rd == RD_MAX ? (b > a ? b : a)
                                                                    : (b < a ? b : a));
  } else if (y->dtype == TOPLU_DTYPE_UINT64) {
    uint64_t a = ((const uint64_t *)y->data)[d], b = ((const uint64_t *)u->data)[s];
    ((uint64_t *)y->data)[d] = rd == RD_ADD ? a + b : rd == RD_MUL ? a * b : rd == RD_MAX ? (b > a ? b : a)
                                                                    : (b < a ? b : a);
  } else {
    int64_t a = toplu__tensor_get_int(y, d), b = toplu__tensor_get_int(u, s);
    int64_t v = rd == RD_ADD ? (int64_t)((uint64_t)a + (uint64_t)b) : rd == RD_MUL ? (int64_t)((uint64_t)a * (uint64_t)b)
                : rd == RD_MAX ? (b > a ? b : a) : (b < a ? b : a);
    toplu__store_int(y, d, v);
  }
}

static toplu_status_t bad_index(toplu__kernel_ctx_t *ctx, int64_t v, int64_t at, int64_t dim) {
  return toplu__kernel_error(ctx, TOPLU_ERR_INVALID_ARGUMENT, "index %lld (at %lld) is out of range for a dim of %lld",
                            (long long)v, (long long)at, (long long)dim);
}

static toplu_status_t run_scatter_elements(toplu__kernel_ctx_t *ctx) {
  const toplu_tensor_t *ix = &ctx->in[1], *u = &ctx->in[2];
  toplu_tensor_t *y = &ctx->out[0];
  const int r = y->ndim, axis = axis_attr(ctx, r, 0);
  const size_t es = toplu_dtype_size(y->dtype);
  const reduction_t rd = reduction_of(ctx);
  int64_t ystr[TOPLU_MAX_DIMS];
  toplu__dense_strides(y, ystr);
  copy_input(ctx);
  const int64_t n = toplu_tensor_numel(ix);
  for (int64_t e = 0; e < n; e++) {
    int64_t rem = e, off = 0;
    for (int d = r - 1; d >= 0; d--) {
      int64_t c = rem % ix->dims[d];
      rem /= ix->dims[d];
      if (d != axis) {
        if (c >= y->dims[d]) return bad_index(ctx, c, e, y->dims[d]);
        off += c * ystr[d];
      }
    }
    int64_t k = toplu__tensor_get_int(ix, e), kk = k < 0 ? k + y->dims[axis] : k;
    if (kk < 0 || kk >= y->dims[axis]) return bad_index(ctx, k, e, y->dims[axis]);
    scatter_one(y, off + kk * ystr[axis], u, e, rd, es);
  }
  return TOPLU_OK;
}

/* Offset of the slice an index tuple of k values names in data dims[0..k-1]
 * (strides str), or -1 with *bad set to the offending value. */
static int64_t tuple_offset(const toplu_tensor_t *ix, int64_t at, int64_t k, const int64_t *dims, const int64_t *str,
                            int64_t *bad, int64_t *bad_dim) {
  int64_t off = 0;
  for (int64_t j = 0; j < k; j++) {
    int64_t v = toplu__tensor_get_int(ix, at + j), vv = v < 0 ? v + dims[j] : v;
    if (vv < 0 || vv >= dims[j]) {
      *bad = v;
      *bad_dim = dims[j];
      return -1;
    }
    off += vv * str[j];
  }
  return off;
}

static toplu_status_t run_scatter_nd(toplu__kernel_ctx_t *ctx) {
  const toplu_tensor_t *ix = &ctx->in[1], *u = &ctx->in[2];
  toplu_tensor_t *y = &ctx->out[0];
  const int64_t k = ix->dims[ix->ndim - 1], m = toplu__dims_prod(ix->dims, 0, ix->ndim - 1);
  const int64_t slice = toplu__dims_prod(y->dims, (int)k, y->ndim);
  const size_t es = toplu_dtype_size(y->dtype);
  const reduction_t rd = reduction_of(ctx);
  if (toplu_tensor_numel(u) != m * slice)
    return toplu__kernel_error(ctx, TOPLU_ERR_SHAPE, "updates hold %lld values; expected %lld",
                              (long long)toplu_tensor_numel(u), (long long)(m * slice));
  int64_t ystr[TOPLU_MAX_DIMS];
  toplu__dense_strides(y, ystr);
  copy_input(ctx);
  for (int64_t t = 0; t < m; t++) {
    int64_t bad = 0, bad_dim = 0, off = tuple_offset(ix, t * k, k, y->dims, ystr, &bad, &bad_dim);
    if (off < 0) return bad_index(ctx, bad, t, bad_dim);
    if (rd == RD_NONE) {
      memcpy((unsigned char *)y->data + (size_t)off * es, (const unsigned char *)u->data + (size_t)(t * slice) * es,
             (size_t)slice * es);
    } else {
      for (int64_t s = 0; s < slice; s++) scatter_one(y, off + s, u, t * slice + s, rd, es);
    }
  }
  return TOPLU_OK;
}

static toplu_status_t run_gather_nd(toplu__kernel_ctx_t *ctx) {
  const toplu_tensor_t *x = &ctx->in[0], *ix = &ctx->in[1];
  toplu_tensor_t *y = &ctx->out[0];
  const int b = (int)toplu__node_attr_int(ctx->node, "batch_dims", 0), q = ix->ndim;
  const int64_t k = ix->dims[q - 1], batches = toplu__dims_prod(x->dims, 0, b);
  const int64_t per = toplu__dims_prod(ix->dims, b, q - 1), slice = toplu__dims_prod(x->dims, b + (int)k, x->ndim);
  const int64_t xbatch = toplu__dims_prod(x->dims, b, x->ndim);
  const size_t es = toplu_dtype_size(x->dtype);
  int64_t xstr[TOPLU_MAX_DIMS];
  toplu__dense_strides(x, xstr);
  for (int64_t bi = 0; bi < batches; bi++)
    for (int64_t t = 0; t < per; t++) {
      int64_t at = bi * per + t, bad = 0, bad_dim = 0;
      int64_t off = tuple_offset(ix, at * k, k, x->dims + b, xstr + b, &bad, &bad_dim);
      if (off < 0) return bad_index(ctx, bad, at, bad_dim);
      memcpy((unsigned char *)y->data + (size_t)(at * slice) * es,
             (const unsigned char *)x->data + (size_t)(bi * xbatch + off) * es, (size_t)slice * es);
    }
  return TOPLU_OK;
}

/* ---- ReverseSequence ---- */

static toplu_status_t run_reverse_sequence(toplu__kernel_ctx_t *ctx) {
  const toplu_tensor_t *x = &ctx->in[0], *sl = &ctx->in[1];
  toplu_tensor_t *y = &ctx->out[0];
  const int ta = (int)toplu__node_attr_int(ctx->node, "time_axis", 0), ba = 1 - ta;
  const int64_t steps = x->dims[ta], batch = x->dims[ba], inner = toplu__dims_prod(x->dims, 2, x->ndim);
  const size_t es = toplu_dtype_size(x->dtype), row = (size_t)inner * es;
  for (int64_t bi = 0; bi < batch; bi++) {
    int64_t len = toplu__tensor_get_int(sl, bi);
    if (len < 0 || len > steps)
      return toplu__kernel_error(ctx, TOPLU_ERR_INVALID_ARGUMENT, "sequence_lens[%lld] = %lld is not in [0, %lld]",
                                (long long)bi, (long long)len, (long long)steps);
    for (int64_t t = 0; t < steps; t++) {
      int64_t src = t < len ? len - 1 - t : t;
      int64_t yo = ta == 0 ? t * batch + bi : bi * steps + t, xo = ta == 0 ? src * batch + bi : bi * steps + src;
      memcpy((unsigned char *)y->data + (size_t)yo * row, (const unsigned char *)x->data + (size_t)xo * row, row);
    }
  }
  return TOPLU_OK;
}

/* ---- sorting (stable, bottom-up merge sort of positions) ---- */

typedef int (*less_fn)(const void *c, int64_t a, int64_t b);

/* Sort a[0..n-1] with tmp of n; a ends sorted. */
static void merge_sort(int64_t *a, int64_t *tmp, int64_t n, less_fn less, const void *c) {
  int64_t *src = a, *dst = tmp;
  for (int64_t w = 1; w < n; w *= 2) {
    for (int64_t lo = 0; lo < n; lo += 2 * w) {
      int64_t mid = lo + w < n ? lo + w : n, hi = lo + 2 * w < n ? lo + 2 * w : n, i = lo, j = mid, o = lo;
      while (i < mid && j < hi) dst[o++] = less(c, src[j], src[i]) ? src[j++] : src[i++];
      while (i < mid) dst[o++] = src[i++];
      while (j < hi) dst[o++] = src[j++];
    }
    int64_t *t = src;
    src = dst;
    dst = t;
  }
  if (src != a) memcpy(a, src, (size_t)n * sizeof *a);
}

/* Values compared as numbers; NaN after every number and equal to NaN. */
static int val_cmp(const toplu_tensor_t *x, int64_t a, int64_t b) {
  if (toplu__is_float_dtype(x->dtype)) {
    double va = toplu__tensor_get_double(x, a), vb = toplu__tensor_get_double(x, b);
    int na = va != va, nb = vb != vb;
    if (na || nb) return na == nb ? 0 : na ? 1 : -1;
    return va < vb ? -1 : va > vb;
  }
  if (x->dtype == TOPLU_DTYPE_UINT64) {
    uint64_t va = ((const uint64_t *)x->data)[a], vb = ((const uint64_t *)x->data)[b];
    return va < vb ? -1 : va > vb;
  }
  int64_t va = toplu__tensor_get_int(x, a), vb = toplu__tensor_get_int(x, b);
  return va < vb ? -1 : va > vb;
}

/* ---- TopK ---- */

typedef struct topk_cmp {
  const toplu_tensor_t *x;
  int64_t base, stride;
  int largest;
} topk_cmp_t;

static int topk_less(const void *cv, int64_t a, int64_t b) {
  const topk_cmp_t *c = cv;
  int r = val_cmp(c->x, c->base + a * c->stride, c->base + b * c->stride);
  return c->largest ? r > 0 : r < 0;
}

static toplu_status_t prepare_topk(toplu__kernel_ctx_t *ctx, toplu__kernel_info_t *info) {
  toplu_status_t st = check_bytes(ctx, 0);
  if (st) return st;
  const int axis = axis_attr(ctx, ctx->in[0].ndim, -1);
  info->workspace_bytes = 2 * (size_t)ctx->in[0].dims[axis] * sizeof(int64_t);
  return TOPLU_OK;
}

static toplu_status_t run_topk(toplu__kernel_ctx_t *ctx) {
  const toplu_tensor_t *x = &ctx->in[0];
  toplu_tensor_t *y = &ctx->out[0], *yi = &ctx->out[1];
  const int r = x->ndim, axis = axis_attr(ctx, r, -1);
  const int64_t n = x->dims[axis], k = y->dims[axis], outer = toplu__dims_prod(x->dims, 0, axis),
                inner = toplu__dims_prod(x->dims, axis + 1, r);
  const size_t es = toplu_dtype_size(x->dtype);
  int64_t *pos = ctx->workspace, *tmp = pos + n;
  topk_cmp_t c = {x, 0, inner, toplu__node_attr_int(ctx->node, "largest", 1) != 0};
  for (int64_t o = 0; o < outer; o++)
    for (int64_t i = 0; i < inner; i++) {
      c.base = o * n * inner + i;
      for (int64_t j = 0; j < n; j++) pos[j] = j;
      merge_sort(pos, tmp, n, topk_less, &c);
      for (int64_t j = 0; j < k; j++) {
        int64_t d = (o * k + j) * inner + i;
        if (y->data) elem_copy(y->data, d, x->data, c.base + pos[j] * inner, es);
        if (yi->data) ((int64_t *)yi->data)[d] = pos[j];
      }
    }
  return TOPLU_OK;
}

/* ---- Compress, NonZero ---- */

static toplu_status_t run_compress(toplu__kernel_ctx_t *ctx) {
  const toplu_tensor_t *x = &ctx->in[0], *cond = &ctx->in[1];
  toplu_tensor_t *y = &ctx->out[0];
  const toplu__attr_t *aa = toplu__node_attr(ctx->node, "axis");
  const size_t es = toplu_dtype_size(x->dtype);
  const uint8_t *c = cond->data;
  int64_t nc = cond->dims[0];
  if (!aa) {
    int64_t n = toplu_tensor_numel(x), o = 0;
    for (int64_t i = 0; i < n && i < nc; i++)
      if (c[i]) elem_copy(y->data, o++, x->data, i, es);
    return TOPLU_OK;
  }
  const int r = x->ndim, axis = axis_attr(ctx, r, 0);
  const int64_t len = x->dims[axis], kept = y->dims[axis], outer = toplu__dims_prod(x->dims, 0, axis);
  const size_t row = (size_t)toplu__dims_prod(x->dims, axis + 1, r) * es;
  for (int64_t o = 0; o < outer; o++) {
    int64_t j = 0;
    for (int64_t i = 0; i < len && i < nc; i++)
      if (c[i])
        memcpy((unsigned char *)y->data + (size_t)(o * kept + j++) * row,
               (const unsigned char *)x->data + (size_t)(o * len + i) * row, row);
  }
  return TOPLU_OK;
}

static toplu_status_t run_nonzero(toplu__kernel_ctx_t *ctx) {
  const toplu_tensor_t *x = &ctx->in[0];
  int64_t *y = ctx->out[0].data;
  const int r = x->ndim;
  const int64_t n = toplu_tensor_numel(x), nnz = ctx->out[0].dims[1];
  int64_t c = 0;
  for (int64_t e = 0; e < n && c < nnz; e++) {
    if (toplu__tensor_get_double(x, e) == 0) continue;
    int64_t rem = e;
    for (int d = r - 1; d >= 0; d--) {
      y[d * nnz + c] = rem % x->dims[d];
      rem /= x->dims[d];
    }
    c++;
  }
  return TOPLU_OK;
}

/* ---- Unique ---- */

typedef struct uq {
  const toplu_tensor_t *x;
  int64_t outer, rows, inner;
  const int64_t *first; /* for ordering groups by first occurrence */
} uq_t;

static int uq_row_cmp(const uq_t *u, int64_t a, int64_t b) {
  for (int64_t o = 0; o < u->outer; o++)
    for (int64_t i = 0; i < u->inner; i++) {
      int r = val_cmp(u->x, (o * u->rows + a) * u->inner + i, (o * u->rows + b) * u->inner + i);
      if (r) return r;
    }
  return 0;
}

static int uq_less(const void *c, int64_t a, int64_t b) { return uq_row_cmp(c, a, b) < 0; }

static int uq_first_less(const void *c, int64_t a, int64_t b) {
  const uq_t *u = c;
  return u->first[a] < u->first[b];
}

static int64_t uq_rows(const toplu__kernel_ctx_t *ctx) {
  const toplu__attr_t *aa = toplu__node_attr(ctx->node, "axis");
  return aa ? ctx->in[0].dims[axis_attr(ctx, ctx->in[0].ndim, aa->i)] : toplu_tensor_numel(&ctx->in[0]);
}

static toplu_status_t prepare_unique(toplu__kernel_ctx_t *ctx, toplu__kernel_info_t *info) {
  toplu_status_t st = check_bytes(ctx, 0);
  if (st) return st;
  info->workspace_bytes = 7 * (size_t)uq_rows(ctx) * sizeof(int64_t);
  return TOPLU_OK;
}

static toplu_status_t run_unique(toplu__kernel_ctx_t *ctx) {
  const toplu_tensor_t *x = &ctx->in[0];
  const toplu__attr_t *aa = toplu__node_attr(ctx->node, "axis");
  const int r = x->ndim, axis = aa ? axis_attr(ctx, r, aa->i) : -1;
  const int64_t rows = uq_rows(ctx);
  uq_t u = {x, aa ? toplu__dims_prod(x->dims, 0, axis) : 1, rows, aa ? toplu__dims_prod(x->dims, axis + 1, r) : 1, NULL};
  int64_t *order = ctx->workspace, *tmp = order + rows, *grp = tmp + rows, *first = grp + rows, *count = first + rows,
          *gorder = count + rows, *grank = gorder + rows;
  for (int64_t i = 0; i < rows; i++) order[i] = i;
  merge_sort(order, tmp, rows, uq_less, &u);
  int64_t g = -1;
  for (int64_t i = 0; i < rows; i++) {
    if (i == 0 || uq_row_cmp(&u, order[i - 1], order[i])) {
      g++;
      first[g] = order[i]; /* stable: the first occurrence */
      count[g] = 0;
    }
    grp[order[i]] = g;
    count[g]++;
  }
  const int64_t ng = g + 1;
  if (ng != (ctx->n_out > 1 && ctx->out[1].ndim > 0 ? ctx->out[1].dims[0] : ng) ||
      ng != (aa ? ctx->out[0].dims[axis] : ctx->out[0].dims[0]))
    return toplu__kernel_error(ctx, TOPLU_ERR_INTERNAL, "Unique found %lld values, the plan expected another count",
                              (long long)ng);
  for (int64_t i = 0; i < ng; i++) gorder[i] = i;
  if (!toplu__node_attr_int(ctx->node, "sorted", 1)) {
    u.first = first;
    merge_sort(gorder, tmp, ng, uq_first_less, &u);
  }
  for (int64_t i = 0; i < ng; i++) grank[gorder[i]] = i;
  const size_t es = toplu_dtype_size(x->dtype), row = (size_t)u.inner * es;
  toplu_tensor_t *y = &ctx->out[0];
  for (int64_t o = 0; o < u.outer; o++)
    for (int64_t i = 0; i < ng; i++)
      memcpy((unsigned char *)y->data + (size_t)(o * ng + i) * row,
             (const unsigned char *)x->data + (size_t)(o * rows + first[gorder[i]]) * row, row);
  if (ctx->n_out > 1 && ctx->out[1].data)
    for (int64_t i = 0; i < ng; i++) ((int64_t *)ctx->out[1].data)[i] = first[gorder[i]];
  if (ctx->n_out > 2 && ctx->out[2].data)
    for (int64_t i = 0; i < rows; i++) ((int64_t *)ctx->out[2].data)[i] = grank[grp[i]];
  if (ctx->n_out > 3 && ctx->out[3].data)
    for (int64_t i = 0; i < ng; i++) ((int64_t *)ctx->out[3].data)[i] = count[gorder[i]];
  return TOPLU_OK;
}

const toplu__kernel_t toplu__kernels_index[] = {
    {"Trilu", "", prepare_any, run_trilu, NULL, TOPLU_KERNEL_INPLACE, NULL, NULL, NULL},
    {"EyeLike", "", prepare_eyelike, run_eyelike, NULL, 0, NULL, NULL, NULL},
    {"OneHot", "", prepare_onehot, run_onehot, NULL, 0, NULL, NULL, NULL},
    {"CumSum", "", prepare_cumsum, run_cumsum, NULL, TOPLU_KERNEL_INPLACE, NULL, NULL, NULL},
    {"ScatterElements", "", prepare_any, run_scatter_elements, NULL, TOPLU_KERNEL_INPLACE, NULL, NULL, NULL},
    {"Scatter", "", prepare_any, run_scatter_elements, NULL, TOPLU_KERNEL_INPLACE, NULL, NULL, NULL},
    {"ScatterND", "", prepare_any, run_scatter_nd, NULL, TOPLU_KERNEL_INPLACE, NULL, NULL, NULL},
    {"GatherND", "", prepare_any, run_gather_nd, NULL, 0, NULL, NULL, NULL},
    {"ReverseSequence", "", prepare_any, run_reverse_sequence, NULL, 0, NULL, NULL, NULL},
    {"TopK", "", prepare_topk, run_topk, NULL, 0, NULL, NULL, NULL},
    {"Compress", "", prepare_any, run_compress, NULL, 0, NULL, NULL, NULL},
    {"NonZero", "", prepare_any, run_nonzero, NULL, 0, NULL, NULL, NULL},
    {"Unique", "", prepare_unique, run_unique, NULL, 0, NULL, NULL, NULL},
    {NULL, NULL, NULL, NULL, NULL, 0, NULL, NULL, NULL},
};
