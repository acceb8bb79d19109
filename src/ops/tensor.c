/*
 * ops/tensor.c - kernels of ops that move or describe data, and the
 * family's kernel table.  Follows ONNX Constant-13, Identity-16, Shape-15,
 * Size-13, Reshape-14, Flatten-13, Squeeze-13 / Unsqueeze-13 (and their
 * attribute forms of opsets 1-12), Concat-13, Split-18 (and -2/-13),
 * Gather-13, GatherElements-13, ConstantOfShape-9 and Range-11; the layout
 * kernels (Transpose, Slice, Expand, Tile, Pad, DepthToSpace, SpaceToDepth)
 * are in ops/tensor_layout.c.  All of them work on any dtype by element size.
 */
#include <omp.h>
#include <string.h>

#include "graph/schema.h"
#include "ops/tensor_copy.h"

/* Views never run (the planner aliases the buffers); this copy serves callers
 * that run a kernel directly. */
static toplu_status_t run_copy(toplu__kernel_ctx_t *ctx) {
  if (ctx->out[0].data != ctx->in[0].data)
    toplu__copy_bytes(ctx->out[0].data, ctx->in[0].data, toplu_tensor_nbytes(&ctx->out[0]), ctx->threads);
  return TOPLU_OK;
}

/* Accept any dtype whose elements are 1, 2, 4 or 8 bytes. */
static toplu_status_t prepare_bytes(toplu__kernel_ctx_t *ctx, toplu__kernel_info_t *info) {
  (void)info;
  if (!toplu__copy_esize(ctx->in[0].dtype))
    return toplu__kernel_error(ctx, TOPLU_ERR_UNSUPPORTED, "tensors of type %s are not supported",
                              toplu_dtype_name(ctx->in[0].dtype));
  return TOPLU_OK;
}

/* Axis attribute normalised against rank r (infer has checked it). */
static int axis_of(const toplu__kernel_ctx_t *ctx, int r, int64_t dflt) {
  int64_t a = toplu__node_attr_int(ctx->node, "axis", dflt);
  if (a < 0) a += r;
  return a < 0 ? 0 : a >= r ? (r > 0 ? r - 1 : 0) : (int)a;
}

/* Product of dims[a..b-1]. */
static int64_t prod(const int64_t *dims, int a, int b) {
  int64_t p = 1;
  for (int i = a; i < b; i++) p *= dims[i];
  return p;
}

/* ---- Constant, Shape, Size ---- */

/* Constant (normally folded at load): the attribute's value. */
static toplu_status_t run_constant(toplu__kernel_ctx_t *ctx) {
  const toplu__node_t *n = ctx->node;
  const toplu__attr_t *a;
  size_t bytes = toplu_tensor_nbytes(&ctx->out[0]);
  const void *src = NULL;
  if ((a = toplu__node_attr(n, "value")) && a->type == TOPLU_ATTR_TENSOR) src = a->t.data;
  else if ((a = toplu__node_attr(n, "value_float")) && a->type == TOPLU_ATTR_FLOAT) src = &a->f;
  else if ((a = toplu__node_attr(n, "value_int")) && a->type == TOPLU_ATTR_INT) src = &a->i;
  else if ((a = toplu__node_attr(n, "value_floats")) && a->type == TOPLU_ATTR_FLOATS) src = a->floats;
  else if ((a = toplu__node_attr(n, "value_ints")) && a->type == TOPLU_ATTR_INTS) src = a->ints;
  if (!src && bytes) return toplu__kernel_error(ctx, TOPLU_ERR_INVALID_MODEL, "Constant without a value");
  if (bytes) memcpy(ctx->out[0].data, src, bytes);
  return TOPLU_OK;
}

/* Shape-15 (normally folded at plan time): dims[start:end] as int64. */
static toplu_status_t run_shape(toplu__kernel_ctx_t *ctx) {
  int r = ctx->in[0].ndim;
  int64_t start = toplu__node_attr_int(ctx->node, "start", 0);
  if (start < 0) start += r;
  if (start < 0) start = 0;
  if (start > r) start = r;
  int64_t n = ctx->out[0].dims[0];
  if (start + n > r) return toplu__kernel_error(ctx, TOPLU_ERR_INTERNAL, "shape output longer than the rank");
  if (n) memcpy(ctx->out[0].data, ctx->in[0].dims + start, (size_t)n * sizeof(int64_t));
  return TOPLU_OK;
}

/* Size-13 (normally folded at plan time). */
static toplu_status_t run_size(toplu__kernel_ctx_t *ctx) {
  int64_t n = toplu_tensor_numel(&ctx->in[0]);
  memcpy(ctx->out[0].data, &n, sizeof n);
  return TOPLU_OK;
}

/* ---- ConstantOfShape, Range ---- */

/* ConstantOfShape-9: fill with the value attribute (default float 0). */
static toplu_status_t run_constant_of_shape(toplu__kernel_ctx_t *ctx) {
  const toplu__attr_t *a = toplu__node_attr(ctx->node, "value");
  static const unsigned char zero[8] = {0};
  const void *v = zero;
  int es = toplu__copy_esize(ctx->out[0].dtype);
  if (!es)
    return toplu__kernel_error(ctx, TOPLU_ERR_UNSUPPORTED, "tensors of type %s are not supported",
                              toplu_dtype_name(ctx->out[0].dtype));
  if (a && a->type == TOPLU_ATTR_TENSOR && a->t.data) v = a->t.data;
  toplu__fill_elems(ctx->out[0].data, v, toplu_tensor_numel(&ctx->out[0]), es, ctx->threads);
  return TOPLU_OK;
}

/* One Range loop per numeric type: y[i] = start + i * delta.  Every y[i]
 * lies between start and limit, but i * delta need not fit (start
 * INT64_MIN, delta 2^62: 3 * 2^62), so integers are computed modulo 2^64
 * (unsigned, defined to wrap) and the exact result converted back. */
#define RANGE_LOOP(T)                                                                                    \
  do {                                                                                                   \
    const T s0 = *(const T *)ctx->in[0].data, d0 = *(const T *)ctx->in[2].data;                          \
    T *y = ctx->out[0].data;                                                                             \
    for (int64_t i = 0; i < n; i++) y[i] = (T)(s0 + (T)i * d0);                                          \
  } while (0)
#define RANGE_LOOP_INT(T)                                                                                \
  do {                                                                                                   \
    const uint64_t s0 = (uint64_t)(int64_t)(*(const T *)ctx->in[0].data);                              \
    const uint64_t d0 = (uint64_t)(int64_t)(*(const T *)ctx->in[2].data);                              \
    T *y = ctx->out[0].data;                                                                             \
    for (int64_t i = 0; i < n; i++) y[i] = (T)(int64_t)(s0 + (uint64_t)i * d0);                          \
  } while (0)

/* Range-11: the output's length was computed by infer. */
static toplu_status_t run_range(toplu__kernel_ctx_t *ctx) {
  int64_t n = toplu_tensor_numel(&ctx->out[0]);
  switch (ctx->out[0].dtype) {
    case TOPLU_DTYPE_FLOAT: RANGE_LOOP(float); break;
    case TOPLU_DTYPE_DOUBLE: RANGE_LOOP(double); break;
    case TOPLU_DTYPE_INT16: RANGE_LOOP_INT(int16_t); break;
    case TOPLU_DTYPE_INT32: RANGE_LOOP_INT(int32_t); break;
    case TOPLU_DTYPE_INT64: RANGE_LOOP_INT(int64_t); break;
    default:
      return toplu__kernel_error(ctx, TOPLU_ERR_UNSUPPORTED, "Range of %s is not supported",
                                toplu_dtype_name(ctx->out[0].dtype));
  }
  return TOPLU_OK;
}

/* ---- Concat, Split ---- */

/* Concat-13: out row o is the concatenation of every input's row o, a row
 * being all dims from axis on. */
static toplu_status_t run_concat(toplu__kernel_ctx_t *ctx) {
  const toplu_tensor_t *y = &ctx->out[0];
  const int r = y->ndim, axis = axis_of(ctx, r, 1);
  const size_t es = toplu_dtype_size(y->dtype);
  const int64_t outer = prod(y->dims, 0, axis), inner = prod(y->dims, axis + 1, r);
  const size_t row_out = (size_t)(y->dims[axis] * inner) * es, total = (size_t)outer * row_out;
  const int n = ctx->n_in;
  int nt = ctx->threads > 1 && total >= TOPLU_COPY_PAR_BYTES ? ctx->threads : 1;
  if (nt > 1 && outer >= 2 * (int64_t)nt) {
#pragma omp parallel for num_threads(nt) schedule(static)
    for (int64_t o = 0; o < outer; o++) {
      unsigned char *dst = (unsigned char *)y->data + (size_t)o * row_out;
      for (int i = 0; i < n; i++) {
        size_t row = (size_t)(ctx->in[i].dims[axis] * inner) * es;
        if (row) memcpy(dst, (const unsigned char *)ctx->in[i].data + (size_t)o * row, row);
        dst += row;
      }
    }
    return TOPLU_OK;
  }
  unsigned char *dst = y->data;
  for (int64_t o = 0; o < outer; o++)
    for (int i = 0; i < n; i++) {
      size_t row = (size_t)(ctx->in[i].dims[axis] * inner) * es;
      toplu__copy_bytes(dst, (const unsigned char *)ctx->in[i].data + (size_t)o * row, row, nt);
      dst += row;
    }
  return TOPLU_OK;
}

/* Split: the size of every part along the axis (outputs nobody reads have
 * no dims in the ctx, so the sizes are worked out here and kept). */
static toplu_status_t prepare_split(toplu__kernel_ctx_t *ctx, toplu__kernel_info_t *info) {
  toplu_status_t st = prepare_bytes(ctx, info);
  if (st) return st;
  const toplu_tensor_t *x = &ctx->in[0];
  const int n = ctx->n_out, axis = axis_of(ctx, x->ndim, 0);
  const int64_t dim = x->dims[axis];
  int64_t *sizes = toplu__kernel_alloc(ctx, (size_t)n * sizeof *sizes);
  if (!sizes) return toplu__kernel_error(ctx, TOPLU_ERR_OUT_OF_MEMORY, "out of memory");
  ctx->state = sizes;
  info->state_bytes = (size_t)n * sizeof *sizes;
  const int64_t *attr = NULL;
  int64_t na = ctx->node->opset < 13 ? toplu__node_attr_ints(ctx->node, "split", &attr) : -1;
  const toplu_tensor_t *sp = ctx->node->opset >= 13 && ctx->n_in > 1 && ctx->in[1].ndim >= 0 ? &ctx->in[1] : NULL;
  if (sp && !sp->data) return toplu__kernel_error(ctx, TOPLU_ERR_UNSUPPORTED, "input split must be a constant");
  int64_t sum = 0, part = n ? (dim + n - 1) / n : 0;
  for (int i = 0; i < n; i++) {
    if (na >= 0) sizes[i] = i < na ? attr[i] : 0;
    else if (sp) sizes[i] = i < toplu_tensor_numel(sp) ? toplu__tensor_get_int(sp, i) : 0;
    else sizes[i] = i < n - 1 ? part : dim - part * (n - 1);
    if (sizes[i] < 0) return toplu__kernel_error(ctx, TOPLU_ERR_INVALID_MODEL, "split size %d is negative", i);
    sum += sizes[i];
  }
  if (sum != dim)
    return toplu__kernel_error(ctx, TOPLU_ERR_SHAPE, "split sizes add up to %lld, axis %d has %lld", (long long)sum, axis,
                              (long long)dim);
  return TOPLU_OK;
}

/* Split-18: the reverse of Concat; outputs nobody reads are skipped. */
static toplu_status_t run_split(toplu__kernel_ctx_t *ctx) {
  const toplu_tensor_t *x = &ctx->in[0];
  const int64_t *sizes = ctx->state;
  const int r = x->ndim, axis = axis_of(ctx, r, 0);
  const size_t es = toplu_dtype_size(x->dtype);
  const int64_t outer = prod(x->dims, 0, axis), inner = prod(x->dims, axis + 1, r);
  const size_t row_in = (size_t)(x->dims[axis] * inner) * es, total = (size_t)outer * row_in;
  const int n = ctx->n_out;
  int nt = ctx->threads > 1 && total >= TOPLU_COPY_PAR_BYTES ? ctx->threads : 1;
  if (nt > 1 && outer >= 2 * (int64_t)nt) {
#pragma omp parallel for num_threads(nt) schedule(static)
    for (int64_t o = 0; o < outer; o++) {
      const unsigned char *src = (const unsigned char *)x->data + (size_t)o * row_in;
      for (int i = 0; i < n; i++) {
        size_t row = (size_t)(sizes[i] * inner) * es;
        if (row && ctx->out[i].data) memcpy((unsigned char *)ctx->out[i].data + (size_t)o * row, src, row);
        src += row;
      }
    }
    return TOPLU_OK;
  }
  const unsigned char *src = x->data;
  for (int64_t o = 0; o < outer; o++)
    for (int i = 0; i < n; i++) {
      size_t row = (size_t)(sizes[i] * inner) * es;
      if (ctx->out[i].data) toplu__copy_bytes((unsigned char *)ctx->out[i].data + (size_t)o * row, src, row, nt);
      src += row;
    }
  return TOPLU_OK;
}

/* ---- Gather, GatherElements ---- */

/* Gather: indices normalised into the workspace each run. */
static toplu_status_t prepare_gather(toplu__kernel_ctx_t *ctx, toplu__kernel_info_t *info) {
  toplu_status_t st = prepare_bytes(ctx, info);
  if (st) return st;
  const toplu_tensor_t *ix = &ctx->in[1];
  if (ix->dtype != TOPLU_DTYPE_INT64 && ix->dtype != TOPLU_DTYPE_INT32)
    return toplu__kernel_error(ctx, TOPLU_ERR_UNSUPPORTED, "indices of type %s", toplu_dtype_name(ix->dtype));
  info->workspace_bytes = (size_t)toplu_tensor_numel(ix) * sizeof(int64_t);
  return TOPLU_OK;
}

/* Check indices against an axis of size n and make them non-negative. */
static toplu_status_t normalise_indices(toplu__kernel_ctx_t *ctx, const toplu_tensor_t *ix, int64_t n, int64_t *out) {
  int64_t m = toplu_tensor_numel(ix), bad = 0, bad_at = -1;
  if (ix->dtype == TOPLU_DTYPE_INT64) {
    const int64_t *p = ix->data;
    for (int64_t k = 0; k < m; k++) {
      int64_t i = p[k] < 0 ? p[k] + n : p[k];
      if ((i < 0 || i >= n) && bad_at < 0) bad_at = k, bad = p[k]; /* the first bad one, value and place */
      if (i < 0 || i >= n) i = 0;
      out[k] = i;
    }
  } else {
    const int32_t *p = ix->data;
    for (int64_t k = 0; k < m; k++) {
      int64_t i = p[k] < 0 ? (int64_t)p[k] + n : p[k];
      if ((i < 0 || i >= n) && bad_at < 0) bad_at = k, bad = p[k]; /* the first bad one, value and place */
      if (i < 0 || i >= n) i = 0;
      out[k] = i;
    }
  }
  if (bad_at >= 0)
    return toplu__kernel_error(ctx, TOPLU_ERR_INVALID_ARGUMENT, "index %lld (at %lld) is out of range for a dim of %lld",
                              (long long)bad, (long long)bad_at, (long long)n);
  return TOPLU_OK;
}

/* Typed Gather along an innermost axis (rows of single elements). */
#define GATHER_ELEMS(T)                                                                                     \
  do {                                                                                                      \
    const T *s = (const T *)x->data;                                                                        \
    T *d = (T *)y->data;                                                                                    \
    _Pragma("omp parallel for num_threads(nt) if(nt > 1) schedule(static)")                                 \
    for (int64_t o = 0; o < outer; o++)                                                                     \
      for (int64_t k = 0; k < m; k++) d[o * m + k] = s[o * ad + idx[k]];                                    \
  } while (0)

/* Gather-13: out[o, k, i] = data[o, indices[k], i]. */
static toplu_status_t run_gather(toplu__kernel_ctx_t *ctx) {
  const toplu_tensor_t *x = &ctx->in[0], *ix = &ctx->in[1], *y = &ctx->out[0];
  const int r = x->ndim, axis = axis_of(ctx, r, 0);
  const int64_t ad = x->dims[axis], outer = prod(x->dims, 0, axis), inner = prod(x->dims, axis + 1, r);
  const int64_t m = toplu_tensor_numel(ix);
  const int es = toplu__copy_esize(x->dtype);
  int64_t *idx = ctx->workspace;
  if (m == 0 || toplu_tensor_numel(y) == 0) return TOPLU_OK;
  toplu_status_t st = normalise_indices(ctx, ix, ad, idx);
  if (st) return st;
  int nt = ctx->threads > 1 && (size_t)toplu_tensor_nbytes(y) >= TOPLU_COPY_PAR_BYTES ? ctx->threads : 1;
  if (inner == 1 && outer >= nt) {
    switch (es) {
      case 1: GATHER_ELEMS(e1_t); break;
      case 2: GATHER_ELEMS(e2_t); break;
      case 4: GATHER_ELEMS(e4_t); break;
      default: GATHER_ELEMS(e8_t); break;
    }
    return TOPLU_OK;
  }
  const size_t row = (size_t)inner * (size_t)es;
  const unsigned char *src = x->data;
  unsigned char *dst = y->data;
  const int64_t items = outer * m;
#pragma omp parallel for num_threads(nt) if (nt > 1) schedule(static)
  for (int64_t w = 0; w < items; w++) {
    int64_t o = w / m, k = w - o * m;
    memcpy(dst + (size_t)w * row, src + (size_t)(o * ad + idx[k]) * row, row);
  }
  return TOPLU_OK;
}

/* GatherElements-13: out[..i_axis..] = data[..indices[..i_axis..]..]. */
static toplu_status_t run_gather_elements(toplu__kernel_ctx_t *ctx) {
  const toplu_tensor_t *x = &ctx->in[0], *ix = &ctx->in[1], *y = &ctx->out[0];
  const int r = x->ndim, axis = axis_of(ctx, r, 0);
  const size_t es = toplu_dtype_size(x->dtype);
  const int64_t n = toplu_tensor_numel(y), ad = x->dims[axis];
  if (ix->dtype != TOPLU_DTYPE_INT64 && ix->dtype != TOPLU_DTYPE_INT32)
    return toplu__kernel_error(ctx, TOPLU_ERR_UNSUPPORTED, "indices of type %s", toplu_dtype_name(ix->dtype));
  for (int d = 0; d < r; d++)
    if (d != axis && ix->dims[d] > x->dims[d])
      return toplu__kernel_error(ctx, TOPLU_ERR_SHAPE, "indices dim %d (%lld) exceeds data's (%lld)", d,
                                (long long)ix->dims[d], (long long)x->dims[d]);
  int64_t xstr[TOPLU_MAX_DIMS], idx[TOPLU_MAX_DIMS] = {0}, off = 0;
  toplu__dense_strides(x, xstr);
  const unsigned char *src = x->data;
  unsigned char *dst = y->data;
  for (int64_t e = 0; e < n; e++) {
    int64_t k = ix->dtype == TOPLU_DTYPE_INT64 ? ((const int64_t *)ix->data)[e] : ((const int32_t *)ix->data)[e];
    int64_t kk = k < 0 ? k + ad : k;
    if (kk < 0 || kk >= ad)
      return toplu__kernel_error(ctx, TOPLU_ERR_INVALID_ARGUMENT, "index %lld (at %lld) is out of range for a dim of %lld",
                                (long long)k, (long long)e, (long long)ad);
    memcpy(dst + (size_t)e * es, src + (size_t)(off + kk * xstr[axis]) * es, es);
    for (int d = r - 1; d >= 0; d--) {
      if (d != axis) off += xstr[d];
      if (++idx[d] < y->dims[d]) break;
      if (d != axis) off -= xstr[d] * y->dims[d];
      idx[d] = 0;
    }
  }
  return TOPLU_OK;
}

const toplu__kernel_t toplu__kernels_tensor[] = {
    {"Constant", "", NULL, run_constant, NULL, 0, NULL, NULL, NULL},
    {"Identity", "", NULL, run_copy, NULL, TOPLU_KERNEL_VIEW, NULL, NULL, NULL},
    {"Shape", "", NULL, run_shape, NULL, 0, NULL, NULL, NULL},
    {"Size", "", NULL, run_size, NULL, 0, NULL, NULL, NULL},
    {"Reshape", "", NULL, run_copy, NULL, TOPLU_KERNEL_VIEW, NULL, NULL, NULL},
    {"Flatten", "", NULL, run_copy, NULL, TOPLU_KERNEL_VIEW, NULL, NULL, NULL},
    {"Squeeze", "", NULL, run_copy, NULL, TOPLU_KERNEL_VIEW, NULL, NULL, NULL},
    {"Unsqueeze", "", NULL, run_copy, NULL, TOPLU_KERNEL_VIEW, NULL, NULL, NULL},
    {"Transpose", "", toplu__transpose_prepare, toplu__strided_run, toplu__tensor_release, 0, NULL, NULL, NULL},
    {"Concat", "", prepare_bytes, run_concat, NULL, 0, NULL, NULL, NULL},
    {"Split", "", prepare_split, run_split, toplu__tensor_release, 0, NULL, NULL, NULL},
    {"Slice", "", toplu__slice_prepare, toplu__strided_run, toplu__tensor_release, 0, NULL, NULL, NULL},
    {"Gather", "", prepare_gather, run_gather, NULL, 0, NULL, NULL, NULL},
    {"GatherElements", "", prepare_bytes, run_gather_elements, NULL, 0, NULL, NULL, NULL},
    {"Expand", "", toplu__expand_prepare, toplu__strided_run, toplu__tensor_release, 0, NULL, NULL, NULL},
    {"Tile", "", toplu__tile_prepare, toplu__strided_run, toplu__tensor_release, 0, NULL, NULL, NULL},
    {"ConstantOfShape", "", NULL, run_constant_of_shape, NULL, 0, NULL, NULL, NULL},
    {"Range", "", NULL, run_range, NULL, 0, NULL, NULL, NULL},
    {"Pad", "", toplu__pad_prepare, toplu__pad_run, toplu__tensor_release, 0, NULL, NULL, NULL},
    {"DepthToSpace", "", toplu__depth_to_space_prepare, toplu__strided_run, toplu__tensor_release, 0, NULL, NULL, NULL},
    {"SpaceToDepth", "", toplu__space_to_depth_prepare, toplu__strided_run, toplu__tensor_release, 0, NULL, NULL, NULL},
    {NULL, NULL, NULL, NULL, NULL, 0, NULL, NULL, NULL},
};
