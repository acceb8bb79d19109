/*
 * ops/norm.c - normalization kernels (float tensors):
 *   BatchNormalization-6/7/9/14/15: y = scale (x - mean) / sqrt(var + eps) + B
 *     per channel (per element for opset-7 spatial = 0); with training_mode = 1
 *     (opset 14+) mean and var are the batch's (population variance) and the
 *     outputs running_mean = mean * momentum + batch_mean * (1 - momentum),
 *     running_var likewise, as the ONNX reference does;
 *   InstanceNormalization-1/6: per (n, c) plane statistics;
 *   LayerNormalization-17: statistics over X's dims from axis on, Scale and B
 *     broadcast to them, optional Mean and InvStdDev outputs;
 *   LRN-1/13: x / (bias + alpha / size * sum of x^2 over size channels)^beta;
 *   MeanVarianceNormalization-9/13: (x - E[x]) / (sqrt(E[x^2] - E[x]^2) + 1e-9)
 *     over `axes` (default [0, 2, 3]), as the op's function body says;
 *   LpNormalization-1: x / ||x||_p along axis, p 1 or 2 (ONNX's definition;
 *     the norm in double);
 *   GroupNormalization-18/21: per (n, group) statistics over the group's
 *     C / num_groups channels and spatial dims (contiguous in NCHW), then
 *     scale and bias per group (opset 18) or per channel (21), as the ONNX
 *     operator spec says for each.
 * Parameters (scale, B, mean, var) may be any float type and need not be
 * constant: each run turns them into per-channel float factors first.
 */
#include <math.h>
#include <string.h>

#include "core/checked.h"
#include "graph/schema.h"
#include "ops/kernel.h"
#include "ops/reduce_util.h"

#define NORM_PAR 32768 /* elements below which loops stay on one thread */

/* X must be float; the parameters any float type. */
static toplu_status_t norm_check_float(toplu__kernel_ctx_t *ctx) {
  if (ctx->in[0].dtype != TOPLU_DTYPE_FLOAT)
    return toplu__kernel_error(ctx, TOPLU_ERR_UNSUPPORTED, "%s on %s tensors is not supported (float only)",
                              ctx->node->op_type, toplu_dtype_name(ctx->in[0].dtype));
  for (int i = 1; i < ctx->n_in; i++) {
    toplu_dtype_t dt = ctx->in[i].dtype;
    if (ctx->in[i].ndim >= 0 && dt != TOPLU_DTYPE_FLOAT && dt != TOPLU_DTYPE_DOUBLE && dt != TOPLU_DTYPE_FLOAT16 &&
        dt != TOPLU_DTYPE_BFLOAT16)
      return toplu__kernel_error(ctx, TOPLU_ERR_UNSUPPORTED, "input %d is %s; expected a float type", i,
                                toplu_dtype_name(dt));
  }
  return TOPLU_OK;
}

/* Store v at element k of a float, double or float16 tensor. */
static void norm_store(toplu_tensor_t *t, int64_t k, double v) {
  if (!t->data) return;
  switch (t->dtype) {
    case TOPLU_DTYPE_DOUBLE: ((double *)t->data)[k] = v; break;
    case TOPLU_DTYPE_FLOAT16: ((uint16_t *)t->data)[k] = toplu_float_to_half((float)v); break;
    case TOPLU_DTYPE_BFLOAT16: ((uint16_t *)t->data)[k] = toplu_float_to_bfloat16((float)v); break;
    default: ((float *)t->data)[k] = (float)v; break;
  }
}

/* Number of threads for a loop over `work` elements. */
static int norm_threads(const toplu__kernel_ctx_t *ctx, int64_t work) {
  return work >= NORM_PAR && ctx->threads > 1 ? ctx->threads : 1;
}

/* ---- BatchNormalization ---- */

/* Elements per channel parameter: C, or C * spatial for opset-7 spatial = 0. */
static int64_t bn_param_count(const toplu__kernel_ctx_t *ctx) { return toplu_tensor_numel(&ctx->in[1]); }

/* Validate dtypes and shapes; scratch for the factors and batch statistics. */
static toplu_status_t prepare_batchnorm(toplu__kernel_ctx_t *ctx, toplu__kernel_info_t *info) {
  toplu_status_t st = norm_check_float(ctx);
  if (st) return st;
  const toplu_tensor_t *x = &ctx->in[0];
  int64_t c = x->dims[1], hw = 1;
  for (int d = 2; d < x->ndim; d++) hw *= x->dims[d];
  int64_t p = bn_param_count(ctx);
  if (p != c && p != c * hw)
    return toplu__kernel_error(ctx, TOPLU_ERR_SHAPE, "scale has %lld elements; expected %lld (one per channel)",
                              (long long)p, (long long)c);
  for (int i = 2; i < 5; i++)
    if (toplu_tensor_numel(&ctx->in[i]) != p)
      return toplu__kernel_error(ctx, TOPLU_ERR_SHAPE, "input %d has %lld elements, scale has %lld", i,
                                (long long)toplu_tensor_numel(&ctx->in[i]), (long long)p);
  int training = ctx->node->opset >= 14 && toplu__node_attr_int(ctx->node, "training_mode", 0) != 0;
  if (training && p != c)
    return toplu__kernel_error(ctx, TOPLU_ERR_UNSUPPORTED, "training_mode needs per-channel parameters");
  info->workspace_bytes = (size_t)p * 2 * sizeof(float) + (training ? (size_t)c * 2 * sizeof(double) : 0);
  return TOPLU_OK;
}

/* Batch mean and population variance per channel of x [N, C, HW]. */
static void bn_batch_stats(const float *x, int64_t n, int64_t c, int64_t hw, double *mean, double *var, int nt) {
  (void)nt; /* read only by OpenMP pragmas */
#pragma omp parallel for num_threads(nt) if (nt > 1) schedule(static)
  for (int64_t ch = 0; ch < c; ch++) {
    double s = 0, q = 0;
    for (int64_t b = 0; b < n; b++) s += toplu__row_sum(x + (b * c + ch) * hw, hw);
    double cnt = (double)(n * hw);
    double m = cnt > 0 ? s / cnt : 0.0;
    for (int64_t b = 0; b < n; b++) q += toplu__row_sqdev(x + (b * c + ch) * hw, hw, (float)m);
    mean[ch] = m;
    var[ch] = cnt > 0 ? q / cnt : 0.0;
  }
}

/* y = x * a + b per channel (or per channel and position). */
static toplu_status_t run_batchnorm(toplu__kernel_ctx_t *ctx) {
  const toplu_tensor_t *x = &ctx->in[0];
  int64_t n = x->dims[0], c = x->dims[1], hw = 1;
  for (int d = 2; d < x->ndim; d++) hw *= x->dims[d];
  int64_t p = bn_param_count(ctx);
  float eps = toplu__node_attr_float(ctx->node, "epsilon", 1e-5f);
  float momentum = toplu__node_attr_float(ctx->node, "momentum", 0.9f);
  int training = ctx->node->opset >= 14 && toplu__node_attr_int(ctx->node, "training_mode", 0) != 0;
  float *a = ctx->workspace, *b = a + p;
  const float *xp = x->data;
  float *yp = ctx->out[0].data;
  int nt = norm_threads(ctx, n * c * hw);
  if (training) {
    double *bm = (double *)(b + p), *bv = bm + c;
    bn_batch_stats(xp, n, c, hw, bm, bv, nt);
    for (int64_t ch = 0; ch < c; ch++) {
      double rm = toplu__tensor_get_double(&ctx->in[3], ch), rv = toplu__tensor_get_double(&ctx->in[4], ch);
      if (ctx->n_out > 1) norm_store(&ctx->out[1], ch, rm * momentum + bm[ch] * (1.0 - momentum));
      if (ctx->n_out > 2) norm_store(&ctx->out[2], ch, rv * momentum + bv[ch] * (1.0 - momentum));
      double s = toplu__tensor_get_double(&ctx->in[1], ch) / sqrt(bv[ch] + eps);
      a[ch] = (float)s;
      b[ch] = (float)(toplu__tensor_get_double(&ctx->in[2], ch) - bm[ch] * s);
    }
  } else {
    for (int64_t k = 0; k < p; k++) {
      double m = toplu__tensor_get_double(&ctx->in[3], k), v = toplu__tensor_get_double(&ctx->in[4], k);
      double s = toplu__tensor_get_double(&ctx->in[1], k) / sqrt(v + eps);
      a[k] = (float)s;
      b[k] = (float)(toplu__tensor_get_double(&ctx->in[2], k) - m * s);
      /* Legacy (opset < 14) extra outputs: the statistics are unchanged. */
      for (int j = 1; j < ctx->n_out; j++) norm_store(&ctx->out[j], k, (j & 1) ? m : v);
    }
  }
  if (p == c) {
#pragma omp parallel for num_threads(nt) if (nt > 1) schedule(static)
    for (int64_t nc = 0; nc < n * c; nc++) {
      float s = a[nc % c], t = b[nc % c];
      const float *xr = xp + nc * hw;
      float *yr = yp + nc * hw;
      for (int64_t i = 0; i < hw; i++) yr[i] = xr[i] * s + t;
    }
  } else {
#pragma omp parallel for num_threads(nt) if (nt > 1) schedule(static)
    for (int64_t bi = 0; bi < n; bi++) {
      const float *xr = xp + bi * p;
      float *yr = yp + bi * p;
      for (int64_t i = 0; i < p; i++) yr[i] = xr[i] * a[i] + b[i];
    }
  }
  return TOPLU_OK;
}

/* ---- InstanceNormalization ---- */

/* Float X, parameters with C elements. */
static toplu_status_t prepare_instancenorm(toplu__kernel_ctx_t *ctx, toplu__kernel_info_t *info) {
  (void)info;
  toplu_status_t st = norm_check_float(ctx);
  if (st) return st;
  int64_t c = ctx->in[0].dims[1];
  if (toplu_tensor_numel(&ctx->in[1]) != c || toplu_tensor_numel(&ctx->in[2]) != c)
    return toplu__kernel_error(ctx, TOPLU_ERR_SHAPE, "scale and B need %lld elements (one per channel)", (long long)c);
  return TOPLU_OK;
}

/* Statistics per (n, group) over its contiguous channels (C / groups of them) and spatial dims, then each channel's
 * affine map, its scale and bias at the group's index or, per_channel, the channel's (safe in place):
 * InstanceNormalization is one group per channel, GroupNormalization num_groups of them. */
static toplu_status_t run_groups(toplu__kernel_ctx_t *ctx, int64_t g, int per_channel) {
  const toplu_tensor_t *x = &ctx->in[0], *sc = &ctx->in[1], *bi = &ctx->in[2];
  int64_t n = x->dims[0], c = x->dims[1], hw = 1;
  for (int d = 2; d < x->ndim; d++) hw *= x->dims[d];
  int64_t cg = g > 0 ? c / g : 0, len = cg * hw;
  float eps = toplu__node_attr_float(ctx->node, "epsilon", 1e-5f);
  const float *xp = x->data;
  float *yp = ctx->out[0].data;
  int nt = norm_threads(ctx, n * c * hw);
  (void)nt; /* read only by OpenMP pragmas */
#pragma omp parallel for num_threads(nt) if (nt > 1) schedule(static)
  for (int64_t ng = 0; ng < n * g; ng++) {
    const float *xr = xp + ng * len;
    float *yr = yp + ng * len;
    float m = len ? toplu__row_sum(xr, len) / (float)len : 0.f;
    float v = len ? toplu__row_sqdev(xr, len, m) / (float)len : 0.f;
    double sd = sqrt((double)v + eps);
    int64_t grp = ng % g;
    for (int64_t k = 0; k < cg; k++) {
      int64_t at = per_channel ? grp * cg + k : grp;
      float s = (float)(toplu__tensor_get_double(sc, at) / sd);
      float t = (float)toplu__tensor_get_double(bi, at) - m * s;
      for (int64_t i = 0; i < hw; i++) yr[k * hw + i] = xr[k * hw + i] * s + t;
    }
  }
  return TOPLU_OK;
}

static toplu_status_t run_instancenorm(toplu__kernel_ctx_t *ctx) { return run_groups(ctx, ctx->in[0].dims[1], 1); }

/* ---- LayerNormalization ---- */

/* Rows (dims before axis) and columns (from axis on) of X. */
static void ln_split(const toplu__kernel_ctx_t *ctx, int64_t *rows, int64_t *cols, int *axis) {
  const toplu_tensor_t *x = &ctx->in[0];
  int64_t a = toplu__node_attr_int(ctx->node, "axis", -1);
  if (a < 0) a += x->ndim;
  *axis = (int)a;
  *rows = 1;
  *cols = 1;
  for (int d = 0; d < x->ndim; d++) {
    if (d < a) *rows *= x->dims[d];
    else *cols *= x->dims[d];
  }
}

/* Whether Scale/B (input i) can be read in place: float with cols elements. */
static int ln_direct(const toplu__kernel_ctx_t *ctx, int i, int64_t cols) {
  const toplu_tensor_t *t = &ctx->in[i];
  return t->ndim >= 0 && t->dtype == TOPLU_DTYPE_FLOAT && toplu_tensor_numel(t) == cols;
}

/* Axis in range; scratch for Scale and B broadcast to the row length. */
static toplu_status_t prepare_layernorm(toplu__kernel_ctx_t *ctx, toplu__kernel_info_t *info) {
  toplu_status_t st = norm_check_float(ctx);
  if (st) return st;
  int64_t rows, cols;
  int axis;
  ln_split(ctx, &rows, &cols, &axis);
  if (axis < 0 || axis >= ctx->in[0].ndim)
    return toplu__kernel_error(ctx, TOPLU_ERR_INVALID_MODEL, "axis is out of range for rank %d", ctx->in[0].ndim);
  info->workspace_bytes = (size_t)cols * 2 * sizeof(float);
  return TOPLU_OK;
}

/* Broadcast parameter tensor t (trailing-aligned to X's dims from axis on)
 * into dst[cols]; absent t gives fill. */
static void ln_expand(const toplu_tensor_t *x, int axis, const toplu_tensor_t *t, float *dst, int64_t cols,
                      float fill) {
  if (t->ndim < 0 || !t->data) {
    for (int64_t i = 0; i < cols; i++) dst[i] = fill;
    return;
  }
  int r = x->ndim - axis;
  int64_t idx[TOPLU_MAX_DIMS] = {0};
  for (int64_t i = 0; i < cols; i++) {
    int64_t off = 0, stride = 1;
    for (int d = r - 1; d >= 0; d--) {
      int td = t->ndim - (r - d);
      if (td >= 0) {
        int64_t sz = t->dims[td];
        off += (sz == 1 ? 0 : idx[d]) * stride;
        stride *= sz;
      }
    }
    dst[i] = (float)toplu__tensor_get_double(t, off);
    for (int d = r - 1; d >= 0; d--) {
      if (++idx[d] < x->dims[axis + d]) break;
      idx[d] = 0;
    }
  }
}

/* Per row: mean, 1/sqrt(var + eps), y = (x - mean) * inv * scale + B. */
static toplu_status_t run_layernorm(toplu__kernel_ctx_t *ctx) {
  const toplu_tensor_t *x = &ctx->in[0];
  int64_t rows, cols;
  int axis;
  ln_split(ctx, &rows, &cols, &axis);
  float eps = toplu__node_attr_float(ctx->node, "epsilon", 1e-5f);
  const toplu_tensor_t *sct = &ctx->in[1], *bt = ctx->n_in > 2 ? &ctx->in[2] : NULL;
  float *ws = ctx->workspace;
  const float *sc, *bi;
  if (ln_direct(ctx, 1, cols)) {
    sc = sct->data;
  } else {
    ln_expand(x, axis, sct, ws, cols, 1.f);
    sc = ws;
  }
  if (bt && ln_direct(ctx, 2, cols)) {
    bi = bt->data;
  } else {
    toplu_tensor_t none = {.ndim = -1};
    ln_expand(x, axis, bt ? bt : &none, ws + cols, cols, 0.f);
    bi = ws + cols;
  }
  toplu_tensor_t *mo = ctx->n_out > 1 && ctx->out[1].data ? &ctx->out[1] : NULL;
  toplu_tensor_t *io = ctx->n_out > 2 && ctx->out[2].data ? &ctx->out[2] : NULL;
  const float *xp = x->data;
  float *yp = ctx->out[0].data;
  int nt = norm_threads(ctx, rows * cols);
  (void)nt; /* read only by OpenMP pragmas */
#pragma omp parallel for num_threads(nt) if (nt > 1) schedule(static)
  for (int64_t r = 0; r < rows; r++) {
    const float *xr = xp + r * cols;
    float *yr = yp + r * cols;
    float m = cols ? toplu__row_sum(xr, cols) / (float)cols : 0.f;
    float v = cols ? toplu__row_sqdev(xr, cols, m) / (float)cols : 0.f;
    float inv = (float)(1.0 / sqrt((double)v + eps));
    for (int64_t i = 0; i < cols; i++) yr[i] = (xr[i] - m) * inv * sc[i] + bi[i];
    if (mo) norm_store(mo, r, m);
    if (io) norm_store(io, r, inv);
  }
  return TOPLU_OK;
}

/* ---- LRN ---- */

/* Float X; size positive. */
static toplu_status_t prepare_lrn(toplu__kernel_ctx_t *ctx, toplu__kernel_info_t *info) {
  (void)info;
  toplu_status_t st = norm_check_float(ctx);
  if (st) return st;
  if (toplu__node_attr_int(ctx->node, "size", 0) < 1)
    return toplu__kernel_error(ctx, TOPLU_ERR_INVALID_MODEL, "attribute size must be positive");
  return TOPLU_OK;
}

/* Across channels: channel c sums squares over [c - (size-1)/2, c + ceil((size-1)/2)]. */
static toplu_status_t run_lrn(toplu__kernel_ctx_t *ctx) {
  const toplu_tensor_t *x = &ctx->in[0];
  int64_t n = x->dims[0], c = x->dims[1], hw = 1;
  for (int d = 2; d < x->ndim; d++) hw *= x->dims[d];
  int64_t size = toplu__node_attr_int(ctx->node, "size", 1);
  float alpha = toplu__node_attr_float(ctx->node, "alpha", 1e-4f);
  float beta = toplu__node_attr_float(ctx->node, "beta", 0.75f);
  float bias = toplu__node_attr_float(ctx->node, "bias", 1.0f);
  float k = alpha / (float)size;
  int64_t lo = (size - 1) / 2, hi = size - 1 - lo;
  const float *xp = x->data;
  float *yp = ctx->out[0].data;
  /* The work estimate, checked (size may be 2^62; the window never spans
   * more than the c channels) and saturated: it only picks a thread count. */
  bool ok = true;
  int64_t work = toplu__mul_i64_ok(n * c * hw, size < c ? size : c, &ok);
  int nt = norm_threads(ctx, ok ? work : INT64_MAX);
  (void)nt; /* read only by OpenMP pragmas */
#pragma omp parallel for num_threads(nt) if (nt > 1) schedule(static)
  for (int64_t nc = 0; nc < n * c; nc++) {
    int64_t b = nc / c, ch = nc % c;
    int64_t c0 = ch - lo < 0 ? 0 : ch - lo, c1 = ch + hi >= c ? c - 1 : ch + hi;
    float *yr = yp + nc * hw;
    const float *xr = xp + nc * hw;
    for (int64_t i = 0; i < hw; i++) yr[i] = 0.f;
    for (int64_t j = c0; j <= c1; j++) {
      const float *xj = xp + (b * c + j) * hw;
      for (int64_t i = 0; i < hw; i++) yr[i] += xj[i] * xj[i];
    }
    for (int64_t i = 0; i < hw; i++) yr[i] = xr[i] * powf(bias + k * yr[i], -beta);
  }
  return TOPLU_OK;
}

/* ---- MeanVarianceNormalization ---- */

/* Reduced dims of X (red[d] = 1) from the axes attribute. */
static toplu_status_t mvn_axes(toplu__kernel_ctx_t *ctx, uint8_t *red) {
  const toplu_tensor_t *x = &ctx->in[0];
  const int64_t *av;
  int64_t na = toplu__node_attr_ints(ctx->node, "axes", &av);
  static const int64_t dflt[3] = {0, 2, 3};
  if (na < 0) {
    na = 3;
    av = dflt;
  }
  memset(red, 0, TOPLU_MAX_DIMS);
  for (int64_t i = 0; i < na; i++) {
    int64_t a = av[i] < 0 ? av[i] + x->ndim : av[i];
    if (a < 0 || a >= x->ndim)
      return toplu__kernel_error(ctx, TOPLU_ERR_INVALID_MODEL, "axes value %lld is out of range for rank %d",
                                (long long)av[i], x->ndim);
    red[a] = 1;
  }
  return TOPLU_OK;
}

/* Statistics per kept index: scratch for sum and sum of squares (double). */
static toplu_status_t prepare_mvn(toplu__kernel_ctx_t *ctx, toplu__kernel_info_t *info) {
  toplu_status_t st = norm_check_float(ctx);
  if (st) return st;
  uint8_t red[TOPLU_MAX_DIMS];
  if ((st = mvn_axes(ctx, red))) return st;
  int64_t groups = 1;
  for (int d = 0; d < ctx->in[0].ndim; d++)
    if (!red[d]) groups *= ctx->in[0].dims[d];
  info->workspace_bytes = (size_t)(groups > 0 ? groups : 1) * 2 * sizeof(double);
  return TOPLU_OK;
}

/* Walk x in order with the index of its statistics group in g (odometer
 * over the dims, kept dims have strides in gs). */
#define MVN_WALK(x, gs, BODY)                                       \
  do {                                                              \
    int64_t idx_[TOPLU_MAX_DIMS] = {0}, g = 0;                      \
    int64_t n_ = toplu_tensor_numel(x);                             \
    for (int64_t i = 0; i < n_; i++) {                              \
      BODY;                                                         \
      for (int d_ = (x)->ndim - 1; d_ >= 0; d_--) {                 \
        g += (gs)[d_];                                              \
        if (++idx_[d_] < (x)->dims[d_]) break;                      \
        g -= (gs)[d_] * (x)->dims[d_];                              \
        idx_[d_] = 0;                                               \
      }                                                             \
    }                                                               \
  } while (0)

/* Two passes: sums per group, then the normalisation. */
static toplu_status_t run_mvn(toplu__kernel_ctx_t *ctx) {
  const toplu_tensor_t *x = &ctx->in[0];
  uint8_t red[TOPLU_MAX_DIMS];
  toplu_status_t st = mvn_axes(ctx, red);
  if (st) return st;
  int64_t gs[TOPLU_MAX_DIMS], groups = 1, cnt = 1;
  for (int d = x->ndim - 1; d >= 0; d--) {
    gs[d] = red[d] ? 0 : groups;
    if (red[d]) cnt *= x->dims[d];
    else groups *= x->dims[d];
  }
  double *sum = ctx->workspace, *sq = sum + groups;
  for (int64_t k = 0; k < groups; k++) sum[k] = sq[k] = 0.0;
  const float *xp = x->data;
  float *yp = ctx->out[0].data;
  MVN_WALK(x, gs, {
    sum[g] += xp[i];
    sq[g] += (double)xp[i] * xp[i];
  });
  for (int64_t k = 0; k < groups; k++) {
    double m = cnt ? sum[k] / (double)cnt : 0.0;
    double v = cnt ? sq[k] / (double)cnt - m * m : 0.0;
    sum[k] = m;
    sq[k] = 1.0 / (sqrt(v > 0 ? v : 0.0) + 1e-9);
  }
  MVN_WALK(x, gs, { yp[i] = (float)((xp[i] - sum[g]) * sq[g]); });
  return TOPLU_OK;
}

/* LpNormalization: y = x / ||x||_p along axis (p 1: the sum of |x|; p 2: the
 * square root of the sum of squares), summed in double; a zero norm gives
 * x / 0 (NaN for 0 / 0), as the ONNX reference's numpy division. */
static toplu_status_t prepare_lpnorm(toplu__kernel_ctx_t *ctx, toplu__kernel_info_t *info) {
  (void)info;
  return norm_check_float(ctx);
}

static toplu_status_t run_lpnorm(toplu__kernel_ctx_t *ctx) {
  const toplu_tensor_t *x = &ctx->in[0];
  if (x->ndim < 1) { /* a scalar: its own norm */
    float v = ((const float *)x->data)[0];
    ((float *)ctx->out[0].data)[0] = v / fabsf(v);
    return TOPLU_OK;
  }
  int64_t axis = toplu__node_attr_int(ctx->node, "axis", -1), p = toplu__node_attr_int(ctx->node, "p", 2);
  if (axis < 0) axis += x->ndim;
  int64_t outer = 1, n = x->dims[axis], inner = 1;
  for (int d = 0; d < axis; d++) outer *= x->dims[d];
  for (int d = (int)axis + 1; d < x->ndim; d++) inner *= x->dims[d];
  const float *xp = x->data;
  float *yp = ctx->out[0].data;
  for (int64_t o = 0; o < outer; o++)
    for (int64_t i = 0; i < inner; i++) {
      const float *xs = xp + o * n * inner + i;
      float *ys = yp + o * n * inner + i;
      double acc = 0.0;
      for (int64_t k = 0; k < n; k++) {
        double v = xs[k * inner];
        acc += p == 1 ? fabs(v) : v * v;
      }
      double norm = p == 1 ? acc : sqrt(acc);
      for (int64_t k = 0; k < n; k++) ys[k * inner] = (float)((double)xs[k * inner] / norm);
    }
  return TOPLU_OK;
}

/* ---- GroupNormalization ---- */

static toplu_status_t prepare_groupnorm(toplu__kernel_ctx_t *ctx, toplu__kernel_info_t *info) {
  (void)info;
  return norm_check_float(ctx);
}

static toplu_status_t run_groupnorm(toplu__kernel_ctx_t *ctx) {
  return run_groups(ctx, toplu__node_attr_int(ctx->node, "num_groups", 1), ctx->node->opset >= 21);
}

const toplu__kernel_t toplu__kernels_norm[] = {
    {"BatchNormalization", "", prepare_batchnorm, run_batchnorm, NULL, TOPLU_KERNEL_INPLACE, NULL, NULL, NULL},
    {"InstanceNormalization", "", prepare_instancenorm, run_instancenorm, NULL, TOPLU_KERNEL_INPLACE, NULL, NULL, NULL},
    {"LayerNormalization", "", prepare_layernorm, run_layernorm, NULL, TOPLU_KERNEL_INPLACE, NULL, NULL, NULL},
    {"LRN", "", prepare_lrn, run_lrn, NULL, 0, NULL, NULL, NULL},
    {"MeanVarianceNormalization", "", prepare_mvn, run_mvn, NULL, TOPLU_KERNEL_INPLACE, NULL, NULL, NULL},
    {"LpNormalization", "", prepare_lpnorm, run_lpnorm, NULL, TOPLU_KERNEL_INPLACE, NULL, NULL, NULL},
    {"GroupNormalization", "", prepare_groupnorm, run_groupnorm, NULL, TOPLU_KERNEL_INPLACE, NULL, NULL, NULL},
    {NULL, NULL, NULL, NULL, NULL, 0, NULL, NULL, NULL},
};
