/*
 * ops/tensor_layout.c - kernels that rearrange a tensor's elements:
 * Transpose-13, Slice-1/10/13 (attributes or constant inputs, negative
 * steps), Expand-13, Tile-13, DepthToSpace-13 (DCR, CRD), SpaceToDepth-13
 * and Pad-2/11/13/18/19 (constant, edge, reflect, wrap; negative pads crop).
 * All but Pad are a toplu__strided_t built in prepare (ops/tensor_copy.h) and
 * run by toplu__strided_run; they work for any dtype by element size.
 */
#include <omp.h>
#include <string.h>

#include "graph/schema.h"
#include "ops/tensor_copy.h"

/* Keep a strided description (simplified) as the kernel state. */
static toplu_status_t keep_strided(toplu__kernel_ctx_t *ctx, toplu__kernel_info_t *info, toplu__strided_t *s) {
  toplu__strided_simplify(s);
  toplu__strided_t *k = toplu__kernel_alloc(ctx, sizeof *k);
  if (!k) return toplu__kernel_error(ctx, TOPLU_ERR_OUT_OF_MEMORY, "out of memory");
  *k = *s;
  ctx->state = k;
  info->state_bytes = sizeof *k;
  return TOPLU_OK;
}

/* Element size of input 0, or an error for dtypes bytes cannot move. */
static toplu_status_t esize_of(toplu__kernel_ctx_t *ctx, int *es) {
  *es = toplu__copy_esize(ctx->in[0].dtype);
  if (!*es)
    return toplu__kernel_error(ctx, TOPLU_ERR_UNSUPPORTED, "tensors of type %s are not supported",
                              toplu_dtype_name(ctx->in[0].dtype));
  return TOPLU_OK;
}

/* Release for kernels whose state is one toplu__kernel_alloc block. */
void toplu__tensor_release(toplu__kernel_ctx_t *ctx) {
  toplu__kernel_free(ctx, ctx->state);
  ctx->state = NULL;
}

/* Run for kernels whose state is a toplu__strided_t. */
toplu_status_t toplu__strided_run(toplu__kernel_ctx_t *ctx) {
  toplu__strided_copy(ctx->state, ctx->out[0].data, ctx->in[0].data, ctx->threads);
  return TOPLU_OK;
}

/* Transpose: output dim i reads input dim perm[i] (default: reversed). */
toplu_status_t toplu__transpose_prepare(toplu__kernel_ctx_t *ctx, toplu__kernel_info_t *info) {
  const toplu_tensor_t *x = &ctx->in[0];
  toplu__strided_t s = {.ndim = x->ndim};
  toplu_status_t st = esize_of(ctx, &s.esize);
  if (st) return st;
  int64_t istr[TOPLU_MAX_DIMS];
  toplu__dense_strides(x, istr);
  const int64_t *perm = NULL;
  int64_t np = toplu__node_attr_ints(ctx->node, "perm", &perm);
  if (np >= 0 && np != x->ndim)
    return toplu__kernel_error(ctx, TOPLU_ERR_INVALID_MODEL, "perm has %lld entries for rank %d", (long long)np, x->ndim);
  for (int i = 0; i < x->ndim; i++) {
    int64_t p = np < 0 ? x->ndim - 1 - i : perm[i];
    if (p < 0 || p >= x->ndim) return toplu__kernel_error(ctx, TOPLU_ERR_INVALID_MODEL, "perm[%d] = %lld", i, (long long)p);
    s.dims[i] = x->dims[p];
    s.str[i] = istr[p];
  }
  return keep_strided(ctx, info, &s);
}

/* Read up to cap integers of constant input i; -1 when absent. */
static int64_t const_input(toplu__kernel_ctx_t *ctx, int i, int64_t *v, int64_t cap, toplu_status_t *st) {
  *st = TOPLU_OK;
  if (i >= ctx->n_in || ctx->in[i].ndim < 0) return -1;
  const toplu_tensor_t *t = &ctx->in[i];
  if (!t->data) {
    *st = toplu__kernel_error(ctx, TOPLU_ERR_UNSUPPORTED, "input %d must be a constant", i);
    return -1;
  }
  int64_t n = toplu_tensor_numel(t);
  if (n > cap) {
    *st = toplu__kernel_error(ctx, TOPLU_ERR_UNSUPPORTED, "input %d has %lld values, at most %lld expected", i,
                             (long long)n, (long long)cap);
    return -1;
  }
  for (int64_t k = 0; k < n; k++) v[k] = toplu__tensor_get_int(t, k);
  return n;
}

/* Read INTS attribute name into v (at most cap); -1 when absent. */
static int64_t attr_ints(toplu__kernel_ctx_t *ctx, const char *name, int64_t *v, int64_t cap, toplu_status_t *st) {
  const int64_t *a = NULL;
  int64_t n = toplu__node_attr_ints(ctx->node, name, &a);
  *st = TOPLU_OK;
  if (n > cap) {
    *st = toplu__kernel_error(ctx, TOPLU_ERR_UNSUPPORTED, "attribute %s has %lld values, at most %lld expected", name,
                             (long long)n, (long long)cap);
    return -1;
  }
  for (int64_t k = 0; k < n; k++) v[k] = a[k];
  return n;
}

/* Slice: per sliced axis, clamp start/end as Slice-13 says; output dim d
 * reads input index first + i * step. */
toplu_status_t toplu__slice_prepare(toplu__kernel_ctx_t *ctx, toplu__kernel_info_t *info) {
  const toplu_tensor_t *x = &ctx->in[0];
  const int r = x->ndim;
  toplu__strided_t s = {.ndim = r};
  toplu_status_t st = esize_of(ctx, &s.esize);
  if (st) return st;
  int64_t starts[TOPLU_MAX_DIMS], ends[TOPLU_MAX_DIMS], axes[TOPLU_MAX_DIMS], steps[TOPLU_MAX_DIMS];
  int64_t ns, ne, na, nst = -1;
  if (ctx->node->opset < 10) {
    if ((ns = attr_ints(ctx, "starts", starts, r, &st)), st) return st;
    if ((ne = attr_ints(ctx, "ends", ends, r, &st)), st) return st;
    if ((na = attr_ints(ctx, "axes", axes, r, &st)), st) return st;
  } else {
    if ((ns = const_input(ctx, 1, starts, r, &st)), st) return st;
    if ((ne = const_input(ctx, 2, ends, r, &st)), st) return st;
    if ((na = const_input(ctx, 3, axes, r, &st)), st) return st;
    if ((nst = const_input(ctx, 4, steps, r, &st)), st) return st;
  }
  if (ns < 0 || ne != ns || (na >= 0 && na != ns) || (nst >= 0 && nst != ns))
    return toplu__kernel_error(ctx, TOPLU_ERR_INVALID_MODEL, "starts, ends, axes and steps differ in length");
  int64_t istr[TOPLU_MAX_DIMS];
  toplu__dense_strides(x, istr);
  for (int d = 0; d < r; d++) {
    s.dims[d] = x->dims[d];
    s.str[d] = istr[d];
  }
  for (int64_t k = 0; k < ns; k++) {
    int64_t a = na >= 0 ? axes[k] : k;
    if (a < 0) a += r;
    int64_t step = nst >= 0 ? steps[k] : 1, dim = x->dims[a >= 0 && a < r ? a : 0];
    if (a < 0 || a >= r || step == 0)
      return toplu__kernel_error(ctx, TOPLU_ERR_INVALID_MODEL, "bad axis %lld or step %lld", (long long)a, (long long)step);
    int64_t b = starts[k], e = ends[k], len;
    if (step < -INT64_MAX) step = -INT64_MAX;
    if (b < 0) b += dim;
    if (e < 0) e += dim;
    if (step > 0) {
      b = b < 0 ? 0 : b > dim ? dim : b;
      e = e < 0 ? 0 : e > dim ? dim : e;
      len = e > b ? (e - b - 1) / step + 1 : 0;
    } else {
      b = b < 0 ? 0 : b > dim - 1 ? dim - 1 : b;
      e = e < -1 ? -1 : e > dim - 1 ? dim - 1 : e;
      len = b > e ? (b - e - 1) / -step + 1 : 0;
    }
    if (len != ctx->out[0].dims[a])
      return toplu__kernel_error(ctx, TOPLU_ERR_INTERNAL, "slice of axis %lld has %lld elements, the plan says %lld",
                                (long long)a, (long long)len, (long long)ctx->out[0].dims[a]);
    s.dims[a] = len;
    if (len) s.off += b * istr[a];
    s.str[a] = len > 1 ? step * istr[a] : istr[a]; /* |step| < dim when len > 1 */
  }
  return keep_strided(ctx, info, &s);
}

/* Expand: numpy broadcast; dims of 1 that grow read with stride 0. */
toplu_status_t toplu__expand_prepare(toplu__kernel_ctx_t *ctx, toplu__kernel_info_t *info) {
  const toplu_tensor_t *x = &ctx->in[0], *y = &ctx->out[0];
  toplu__strided_t s = {.ndim = y->ndim};
  toplu_status_t st = esize_of(ctx, &s.esize);
  if (st) return st;
  int64_t istr[TOPLU_MAX_DIMS];
  toplu__dense_strides(x, istr);
  for (int d = 0; d < y->ndim; d++) {
    int xd = d - (y->ndim - x->ndim);
    s.dims[d] = y->dims[d];
    s.str[d] = xd < 0 || x->dims[xd] == 1 ? 0 : istr[xd];
    if (xd >= 0 && x->dims[xd] != 1 && x->dims[xd] != y->dims[d])
      return toplu__kernel_error(ctx, TOPLU_ERR_SHAPE, "dim %d of size %lld cannot expand to %lld", xd,
                                (long long)x->dims[xd], (long long)y->dims[d]);
  }
  return keep_strided(ctx, info, &s);
}

/* Tile: each output dim d becomes (repeat, dim) with the repeat at stride 0. */
toplu_status_t toplu__tile_prepare(toplu__kernel_ctx_t *ctx, toplu__kernel_info_t *info) {
  const toplu_tensor_t *x = &ctx->in[0], *y = &ctx->out[0];
  toplu__strided_t s = {.ndim = 2 * x->ndim};
  toplu_status_t st = esize_of(ctx, &s.esize);
  if (st) return st;
  int64_t istr[TOPLU_MAX_DIMS];
  toplu__dense_strides(x, istr);
  for (int d = 0; d < x->ndim; d++) {
    int64_t rep = x->dims[d] ? y->dims[d] / x->dims[d] : 0;
    s.dims[2 * d] = rep;
    s.str[2 * d] = 0;
    s.dims[2 * d + 1] = x->dims[d];
    s.str[2 * d + 1] = istr[d];
  }
  return keep_strided(ctx, info, &s);
}

/* Blocksize attribute of DepthToSpace/SpaceToDepth. */
static toplu_status_t blocksize(toplu__kernel_ctx_t *ctx, int64_t *b) {
  *b = toplu__node_attr_int(ctx->node, "blocksize", 0);
  if (*b <= 0 || ctx->in[0].ndim != 4)
    return toplu__kernel_error(ctx, TOPLU_ERR_INVALID_MODEL, "needs a 4-D input and a positive blocksize");
  return TOPLU_OK;
}

/* DepthToSpace: DCR reads [N, b1, b2, C', H, W] as [N, C', H, b1, W, b2];
 * CRD reads [N, C', b1, b2, H, W] the same way. */
toplu_status_t toplu__depth_to_space_prepare(toplu__kernel_ctx_t *ctx, toplu__kernel_info_t *info) {
  const toplu_tensor_t *x = &ctx->in[0];
  toplu__strided_t s = {.ndim = 6};
  int64_t b;
  toplu_status_t st = esize_of(ctx, &s.esize);
  if (st || (st = blocksize(ctx, &b))) return st;
  int64_t n = x->dims[0], c = x->dims[1], h = x->dims[2], w = x->dims[3], cc = c / (b * b), hw = h * w;
  int crd = !strcmp(toplu__node_attr_string(ctx->node, "mode", "DCR"), "CRD");
  int64_t dims[6] = {n, cc, h, b, w, b};
  int64_t dcr[6] = {c * hw, hw, w, b * cc * hw, 1, cc * hw};
  int64_t crd_s[6] = {c * hw, b * b * hw, w, b * hw, 1, hw};
  memcpy(s.dims, dims, sizeof dims);
  memcpy(s.str, crd ? crd_s : dcr, sizeof dcr);
  return keep_strided(ctx, info, &s);
}

/* SpaceToDepth: reads [N, C, H', b1, W', b2] as [N, b1, b2, C, H', W']. */
toplu_status_t toplu__space_to_depth_prepare(toplu__kernel_ctx_t *ctx, toplu__kernel_info_t *info) {
  const toplu_tensor_t *x = &ctx->in[0];
  toplu__strided_t s = {.ndim = 6};
  int64_t b;
  toplu_status_t st = esize_of(ctx, &s.esize);
  if (st || (st = blocksize(ctx, &b))) return st;
  int64_t n = x->dims[0], c = x->dims[1], h = x->dims[2], w = x->dims[3];
  int64_t dims[6] = {n, b, b, c, h / b, w / b};
  int64_t str[6] = {c * h * w, w, 1, h * w, b * w, b};
  memcpy(s.dims, dims, sizeof dims);
  memcpy(s.str, str, sizeof str);
  return keep_strided(ctx, info, &s);
}

/* ---- Pad ---- */

enum { PAD_CONSTANT, PAD_EDGE, PAD_REFLECT, PAD_WRAP };

typedef struct pad_state {
  int mode;
  int64_t pb[TOPLU_MAX_DIMS], pe[TOPLU_MAX_DIMS]; /* pads before/after per dim */
  unsigned char value[8];                         /* constant mode fill */
} pad_state_t;

/* Write value v as one element of dtype dt at out. */
static void encode_scalar(double v, toplu_dtype_t dt, void *out) {
  switch (dt) {
    case TOPLU_DTYPE_FLOAT: { float f = (float)v; memcpy(out, &f, 4); break; }
    case TOPLU_DTYPE_DOUBLE: memcpy(out, &v, 8); break;
    case TOPLU_DTYPE_FLOAT16: { uint16_t h = toplu_float_to_half((float)v); memcpy(out, &h, 2); break; }
    case TOPLU_DTYPE_BFLOAT16: { uint16_t h = toplu_float_to_bfloat16((float)v); memcpy(out, &h, 2); break; }
    case TOPLU_DTYPE_INT8: { int8_t i = (int8_t)v; memcpy(out, &i, 1); break; }
    case TOPLU_DTYPE_UINT8: { uint8_t i = (uint8_t)v; memcpy(out, &i, 1); break; }
    case TOPLU_DTYPE_BOOL: { uint8_t i = v != 0; memcpy(out, &i, 1); break; }
    case TOPLU_DTYPE_INT16: { int16_t i = (int16_t)v; memcpy(out, &i, 2); break; }
    case TOPLU_DTYPE_UINT16: { uint16_t i = (uint16_t)v; memcpy(out, &i, 2); break; }
    case TOPLU_DTYPE_INT32: { int32_t i = (int32_t)v; memcpy(out, &i, 4); break; }
    case TOPLU_DTYPE_UINT32: { uint32_t i = (uint32_t)v; memcpy(out, &i, 4); break; }
    case TOPLU_DTYPE_INT64: { int64_t i = (int64_t)v; memcpy(out, &i, 8); break; }
    case TOPLU_DTYPE_UINT64: { uint64_t i = (uint64_t)v; memcpy(out, &i, 8); break; }
    default: memset(out, 0, 8); break;
  }
}

/* Pad: mode, per-dim pads (from the attribute, or the pads and axes inputs)
 * and the constant fill value, checked against the planned output. */
toplu_status_t toplu__pad_prepare(toplu__kernel_ctx_t *ctx, toplu__kernel_info_t *info) {
  const toplu_tensor_t *x = &ctx->in[0], *y = &ctx->out[0];
  const int r = x->ndim;
  int es;
  toplu_status_t st = esize_of(ctx, &es);
  if (st) return st;
  pad_state_t p;
  memset(&p, 0, sizeof p);
  const char *mode = toplu__node_attr_string(ctx->node, "mode", "constant");
  if (!strcmp(mode, "constant")) p.mode = PAD_CONSTANT;
  else if (!strcmp(mode, "edge")) p.mode = PAD_EDGE;
  else if (!strcmp(mode, "reflect")) p.mode = PAD_REFLECT;
  else if (!strcmp(mode, "wrap")) p.mode = PAD_WRAP;
  else return toplu__kernel_error(ctx, TOPLU_ERR_UNSUPPORTED, "mode '%s' is not supported", mode);
  int64_t pads[2 * TOPLU_MAX_DIMS], axes[TOPLU_MAX_DIMS], np, na = -1;
  if (ctx->node->opset < 11) {
    if ((np = attr_ints(ctx, "pads", pads, 2 * r, &st)), st) return st;
    encode_scalar(toplu__node_attr_float(ctx->node, "value", 0.0f), x->dtype, p.value);
  } else {
    if ((np = const_input(ctx, 1, pads, 2 * r, &st)), st) return st;
    if ((na = const_input(ctx, 3, axes, r, &st)), st) return st;
    const toplu_tensor_t *v = ctx->n_in > 2 ? &ctx->in[2] : NULL;
    if (v && v->ndim >= 0 && v->data && toplu_tensor_numel(v) > 0) memcpy(p.value, v->data, (size_t)es);
  }
  if (na < 0) {
    na = r;
    for (int d = 0; d < r; d++) axes[d] = d;
  }
  if (np != 2 * na)
    return toplu__kernel_error(ctx, TOPLU_ERR_INVALID_MODEL, "pads has %lld values for %lld axes", (long long)np,
                              (long long)na);
  for (int64_t k = 0; k < na; k++) {
    int64_t a = axes[k] < 0 ? axes[k] + r : axes[k];
    if (a < 0 || a >= r) return toplu__kernel_error(ctx, TOPLU_ERR_INVALID_MODEL, "pad axis %lld", (long long)axes[k]);
    p.pb[a] = pads[k];
    p.pe[a] = pads[k + na];
  }
  for (int d = 0; d < r; d++) {
    if (x->dims[d] + p.pb[d] + p.pe[d] != y->dims[d])
      return toplu__kernel_error(ctx, TOPLU_ERR_INTERNAL, "padded dim %d is %lld, the plan says %lld", d,
                                (long long)(x->dims[d] + p.pb[d] + p.pe[d]), (long long)y->dims[d]);
    if (p.mode != PAD_CONSTANT && x->dims[d] == 0 && y->dims[d] > 0)
      return toplu__kernel_error(ctx, TOPLU_ERR_SHAPE, "mode '%s' cannot pad the empty axis %d", mode, d);
  }
  pad_state_t *k = toplu__kernel_alloc(ctx, sizeof *k);
  if (!k) return toplu__kernel_error(ctx, TOPLU_ERR_OUT_OF_MEMORY, "out of memory");
  *k = p;
  ctx->state = k;
  info->state_bytes = sizeof *k;
  return TOPLU_OK;
}

/* Input index for padded position i of an axis of size n (non-constant modes). */
static int64_t pad_map(int64_t i, int64_t n, int mode) {
  if (i >= 0 && i < n) return i;
  if (mode == PAD_EDGE || n == 1) return i < 0 ? 0 : n - 1;
  if (mode == PAD_WRAP) return (i % n + n) % n;
  int64_t period = 2 * (n - 1);
  i = (i % period + period) % period;
  return i < n ? i : period - i;
}

/* Output rows (innermost dim) w0..w1 of Pad. */
static void pad_rows(const pad_state_t *p, const toplu_tensor_t *x, const toplu_tensor_t *y, const unsigned char *value,
                     int es, int64_t w0, int64_t w1) {
  const int L = x->ndim - 1;
  const int64_t ol = y->dims[L], il = x->dims[L], pb = p->pb[L];
  int64_t istr[TOPLU_MAX_DIMS], idx[TOPLU_MAX_DIMS], rem = w0;
  toplu__dense_strides(x, istr);
  for (int d = L - 1; d >= 0; d--) {
    idx[d] = rem % y->dims[d];
    rem /= y->dims[d];
  }
  /* The part of each row copied straight: output [c0, c0 + cnt) from input [i0, ...). */
  int64_t c0 = pb < 0 ? 0 : pb > ol ? ol : pb, i0 = c0 - pb, cnt = il - i0 < ol - c0 ? il - i0 : ol - c0;
  if (cnt < 0) cnt = 0;
  const unsigned char *src = x->data;
  for (int64_t w = w0; w < w1; w++) {
    unsigned char *dst = (unsigned char *)y->data + (size_t)(w * ol) * (size_t)es;
    int64_t soff = 0;
    int outside = 0;
    for (int d = 0; d < L; d++) {
      int64_t i = idx[d] - p->pb[d];
      if (i < 0 || i >= x->dims[d]) {
        if (p->mode == PAD_CONSTANT) outside = 1;
        else i = pad_map(i, x->dims[d], p->mode);
      }
      soff += i * istr[d];
    }
    if (outside) {
      toplu__fill_elems(dst, value, ol, es, 1);
    } else {
      const unsigned char *row = src + (size_t)soff * (size_t)es;
      if (p->mode == PAD_CONSTANT) {
        toplu__fill_elems(dst, value, c0, es, 1);
        toplu__fill_elems(dst + (size_t)(c0 + cnt) * (size_t)es, value, ol - c0 - cnt, es, 1);
      } else {
        for (int64_t c = 0; c < c0; c++) memcpy(dst + c * es, row + pad_map(c - pb, il, p->mode) * es, (size_t)es);
        for (int64_t c = c0 + cnt; c < ol; c++) memcpy(dst + c * es, row + pad_map(c - pb, il, p->mode) * es, (size_t)es);
      }
      if (cnt) memcpy(dst + c0 * es, row + i0 * es, (size_t)(cnt * es));
    }
    for (int d = L - 1; d >= 0; d--) {
      if (++idx[d] < y->dims[d]) break;
      idx[d] = 0;
    }
  }
}

/* Pad: output rows split across threads; a non-constant constant_value
 * input is read here. */
toplu_status_t toplu__pad_run(toplu__kernel_ctx_t *ctx) {
  const pad_state_t *p = ctx->state;
  const toplu_tensor_t *x = &ctx->in[0], *y = &ctx->out[0];
  int es = toplu__copy_esize(x->dtype);
  const unsigned char *value = p->value;
  if (ctx->node->opset >= 11 && ctx->n_in > 2 && ctx->in[2].ndim >= 0 && ctx->in[2].data &&
      toplu_tensor_numel(&ctx->in[2]) > 0)
    value = ctx->in[2].data;
  int64_t total = toplu_tensor_numel(y);
  if (total == 0) return TOPLU_OK;
  if (x->ndim == 0) {
    memcpy(y->data, x->data, (size_t)es);
    return TOPLU_OK;
  }
  int64_t rows = total / y->dims[x->ndim - 1];
  int nt = ctx->threads > 1 && (size_t)total * (size_t)es >= TOPLU_COPY_PAR_BYTES ? ctx->threads : 1;
  if (rows < nt) nt = (int)rows;
#pragma omp parallel num_threads(nt) if (nt > 1)
  {
    int t = omp_get_thread_num(), n = omp_get_num_threads();
    pad_rows(p, x, y, value, es, rows * t / n, rows * (t + 1) / n);
  }
  return TOPLU_OK;
}
