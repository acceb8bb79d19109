/*
 * ops/resize.c - Resize-10/11/13/18/19 and Upsample-7/9 kernels.
 *
 * prepare() turns the node into one table per axis: for every output index,
 * the input indices it reads (clamped to the edge) and their weights, from
 * the coordinate transform (half_pixel, half_pixel_symmetric,
 * pytorch_half_pixel, align_corners, asymmetric, tf_half_pixel_for_nn,
 * tf_crop_and_resize) and the mode:
 *   nearest  one tap (nearest_mode round_prefer_floor/ceil, floor, ceil;
 *            Resize-10 and Upsample floor when upsampling, ceil when
 *            downsampling, as ONNX Runtime does for those versions)
 *   linear   two taps, or the stretched triangle filter with antialias (18)
 *   cubic    four taps (cubic_coeff_a, exclude_outside), or the stretched
 *            cubic filter with antialias
 * tf_crop_and_resize writes extrapolation_value where the source coordinate
 * falls outside the input.  Resize-10 and Upsample use asymmetric coordinates.
 *
 * run() then takes one of three paths:
 *   nearest    any 1/2/4/8-byte type: row gathers through the tables; an
 *              output row equal to the one before it (upsampled rows) is a
 *              memcpy, and integer-factor widening repeats elements
 *   plane      float linear/cubic resizing the last two axes only (NCHW):
 *              per plane, a horizontal pass over the input rows it needs
 *              into per-thread scratch, then a vectorised vertical pass
 *   separable  float linear/cubic over any axes: one pass per resized axis
 *              (shrinking axes first) through two scratch buffers
 * OpenMP over planes or rows once the output has 32768 elements or more.
 */
#include <math.h>
#include <omp.h>
#include <string.h>

#include "graph/schema_resize.h"
#include "ops/kernel.h"

#define RS_PARALLEL_MIN 32768

enum { CT_HALF_PIXEL, CT_HALF_PIXEL_SYM, CT_PYTORCH, CT_ALIGN, CT_ASYM, CT_TF_NN, CT_CROP, CT_ALIGN_REF };
enum { NM_ROUND_FLOOR, NM_ROUND_CEIL, NM_FLOOR, NM_CEIL, NM_SIMPLE };
enum { RM_NEAREST, RM_LINEAR, RM_CUBIC };
enum { PATH_COPY, PATH_NEAREST, PATH_PLANE, PATH_SEPARABLE };

typedef struct rs_axis {
  int64_t in, out;
  int ntaps;
  int identity;     /* output index o reads input o with weight 1 */
  int any_outside;  /* some output index takes extrapolation_value */
  int64_t lo, hi;   /* input indices the taps read */
  int64_t *idx;     /* [out * ntaps] input index, clamped */
  float *w;         /* [out * ntaps] weights */
  uint8_t *outside; /* [out] 1: extrapolation_value */
  int64_t *off;     /* nearest: [out] idx * input stride, -1 outside */
  /* Doubling (out = 2 in, linear or cubic): inputs i in [p_lo, p_hi) give
   * outputs 2i + p from fixed offsets i + pd[p][k] and weights pw[p][k], a
   * loop without index tables (p_hi <= p_lo: none). */
  int64_t p_lo, p_hi;
  int64_t pd[2][4];
  float pw[2][4];
} rs_axis_t;

typedef struct rs_state {
  int ndim, path, esize, threads, any_outside;
  int repeat;       /* nearest: last axis is widened by this integer factor (0: no) */
  int n_pass, pass_axis[TOPLU_MAX_DIMS];
  size_t buf_elems[2];  /* separable: scratch buffers (elements) */
  size_t plane_floats;  /* plane: scratch floats per thread */
  float ext;            /* extrapolation_value as float */
  unsigned char ext_bytes[8]; /* ... in the element type */
  int64_t in_dims[TOPLU_MAX_DIMS], out_dims[TOPLU_MAX_DIMS];
  rs_axis_t ax[TOPLU_MAX_DIMS];
} rs_state_t;

/* Source coordinate of output index x along one axis, in single precision
 * and in the order ONNX Runtime computes it, so that nearest picks the same
 * index where the coordinate lands next to a rounding tie (1.5 / 0.6f gives
 * 2.5f here, but 2.4999999 in double precision). */
static float rs_coord(int ct, float x, float s, int64_t in, int64_t out, float r0, float r1) {
  float fin = (float)in, fout = (float)out;
  switch (ct) {
    case CT_HALF_PIXEL_SYM: {
      float adj = fout / (s * fin), center = fin / 2.0f;
      return center * (1.0f - adj) + (x + 0.5f) / s - 0.5f;
    }
    case CT_PYTORCH: return out > 1 ? (x + 0.5f) / s - 0.5f : 0.0f;
    case CT_ALIGN:
      /* x * (in - 1) / (out - 1) with the integer output length, for models
       * a framework exported (graph/graph.c marks their Resize nodes,
       * toplu_output_length): PyTorch (F.interpolate(..., align_corners=True),
       * whose exporter writes scales like 2.5), TensorFlow and Paddle all
       * compute it so, as ONNX Runtime and TVM do; with the reference's
       * unrounded length such a PyTorch model came out up to 1.04 off torch
       * (a fresh user's finding, 2026-12-06). */
      return out > 1 ? x * (fin - 1.0f) / (fout - 1.0f) : 0.0f;
    case CT_ALIGN_REF: {
      /* Other models: the ONNX reference divides by the unrounded resized
       * length in * scale (onnx/onnx#2462: intended), which differs from the
       * integer output length when scales give a fractional one (0.6 of 4:
       * the node tests test_resize_downsample_scales_*_align_corners). */
      float len = fin * s;
      if (fabsf(len - fout) <= 1e-4f * fout) len = fout;
      return len != 1.0f && out > 1 ? x * (fin - 1.0f) / (len - 1.0f) : 0.0f;
    }
    case CT_ASYM: return x / s;
    case CT_TF_NN: return (x + 0.5f) / s;
    case CT_CROP:
      return out > 1 ? r0 * (fin - 1.0f) + x * (r1 - r0) * (fin - 1.0f) / (fout - 1.0f)
                     : 0.5f * (r0 + r1) * (fin - 1.0f);
    default: return (x + 0.5f) / s - 0.5f;
  }
}

/* Cubic convolution kernel at distance d >= 0 with coefficient A. */
static double cubic_weight(double d, double A) {
  if (d <= 1.0) return ((A + 2.0) * d - (A + 3.0)) * d * d + 1.0;
  if (d < 2.0) return ((A * d - 5.0 * A) * d + 8.0 * A) * d - 4.0 * A;
  return 0.0;
}

/* Clamp an index to [0, n-1]. */
static int64_t clamp_index(int64_t i, int64_t n) { return i < 0 ? 0 : i >= n ? n - 1 : i; }

typedef struct rs_opts {
  int mode, ct, nm, exclude_outside, antialias;
  double A;
} rs_opts_t;

/* Taps per output index along an axis of scale s. */
static int axis_taps(const rs_opts_t *o, double s) {
  if (o->mode == RM_NEAREST) return 1;
  double support = o->mode == RM_LINEAR ? 1.0 : 2.0;
  if (o->antialias && s < 1.0) support /= s;
  double k = 2.0 * ceil(support - 1e-9);
  return k > 1.0e6 ? 1000000 : (int)k;
}

/* Fill an axis's index/weight table. */
static void build_axis(rs_axis_t *a, const rs_opts_t *op, double s, double r0, double r1) {
  int K = a->ntaps;
  double ss = op->antialias && s < 1.0 ? s : 1.0;
  /* An axis of scale 1 keeps its size and is not resized at all, as in ONNX
   * Runtime (tf_half_pixel_for_nn would otherwise shift it by half a pixel). */
  int trivial = s == 1.0 && a->in == a->out && op->ct != CT_CROP;
  a->any_outside = 0;
  for (int64_t o = 0; o < a->out; o++) {
    int64_t *ix = a->idx + o * K;
    float *wt = a->w + o * K;
    double x = trivial ? (double)o : (double)rs_coord(op->ct, (float)o, (float)s, a->in, a->out, (float)r0, (float)r1);
    a->outside[o] = 0;
    if (op->ct == CT_CROP && (x < 0.0 || x > (double)(a->in - 1))) {
      a->outside[o] = 1;
      a->any_outside = 1;
      for (int k = 0; k < K; k++) ix[k] = 0, wt[k] = 0.0f;
      continue;
    }
    if (op->mode == RM_NEAREST) {
      double f = floor(x), r = x - f;
      double i;
      switch (op->nm) {
        case NM_ROUND_CEIL: i = r < 0.5 ? f : f + 1.0; break;
        case NM_FLOOR: i = f; break;
        case NM_CEIL: i = ceil(x); break;
        case NM_SIMPLE: i = s < 1.0 ? ceil(x) : f; break;
        default: i = r <= 0.5 ? f : f + 1.0; break;
      }
      i = i < 0.0 ? 0.0 : i > (double)(a->in - 1) ? (double)(a->in - 1) : i;
      ix[0] = (int64_t)i;
      wt[0] = 1.0f;
      continue;
    }
    int64_t j0 = (int64_t)floor(x) - K / 2 + 1;
    double sum = 0.0;
    for (int pass = 0; pass < 2; pass++) {
      double norm = pass == 0 ? 1.0 : ((ss < 1.0 || op->exclude_outside) && sum != 0.0) ? 1.0 / sum : 1.0;
      for (int k = 0; k < K; k++) {
        int64_t j = j0 + k;
        double d = fabs((double)j - x) * ss;
        double v = op->mode == RM_LINEAR ? (d < 1.0 ? 1.0 - d : 0.0) : cubic_weight(d, op->A);
        if (op->exclude_outside && (j < 0 || j >= a->in)) v = 0.0;
        if (pass == 0) {
          sum += v;
        } else {
          ix[k] = clamp_index(j, a->in);
          wt[k] = (float)(v * norm);
        }
      }
    }
  }
  /* identity and the input range read */
  a->identity = a->in == a->out && !a->any_outside;
  a->lo = a->in, a->hi = -1;
  for (int64_t o = 0; o < a->out; o++) {
    if (a->outside[o]) continue;
    const int64_t *ix = a->idx + o * K;
    const float *wt = a->w + o * K;
    int one = 0;
    for (int k = 0; k < K; k++) {
      if (ix[k] < a->lo) a->lo = ix[k];
      if (ix[k] > a->hi) a->hi = ix[k];
      if (wt[k] != 0.0f && !(ix[k] == o && wt[k] == 1.0f)) a->identity = 0;
      if (ix[k] == o && wt[k] == 1.0f) one = 1;
    }
    if (!one) a->identity = 0;
  }
  if (a->hi < a->lo) a->lo = a->hi = 0;
}

/* Find the doubling pattern of an axis (see rs_axis_t): the taps of outputs
 * 2i and 2i + 1 in the middle give offsets and weights; the range grows
 * while every output in it matches them exactly (edges clamp, so differ). */
static void find_doubling(rs_axis_t *a) {
  int K = a->ntaps;
  a->p_lo = a->p_hi = 0;
  if (a->identity || a->any_outside || a->out != 2 * a->in || a->in < 8 || (K != 2 && K != 4)) return;
  int64_t mid = a->in / 2;
  for (int p = 0; p < 2; p++)
    for (int k = 0; k < K; k++) {
      a->pd[p][k] = a->idx[(2 * mid + p) * K + k] - mid;
      a->pw[p][k] = a->w[(2 * mid + p) * K + k];
    }
  int64_t lo = mid, hi = mid;
  for (;;) { /* does input i match for both outputs? */
    int64_t i = lo - 1;
    int ok = i >= 0;
    for (int p = 0; ok && p < 2; p++)
      for (int k = 0; ok && k < K; k++)
        ok = a->idx[(2 * i + p) * K + k] == i + a->pd[p][k] && a->w[(2 * i + p) * K + k] == a->pw[p][k];
    if (!ok) break;
    lo = i;
  }
  for (;;) {
    int64_t i = hi;
    int ok = i < a->in;
    for (int p = 0; ok && p < 2; p++)
      for (int k = 0; ok && k < K; k++)
        ok = a->idx[(2 * i + p) * K + k] == i + a->pd[p][k] && a->w[(2 * i + p) * K + k] == a->pw[p][k];
    if (!ok) break;
    hi = i + 1;
  }
  if (hi - lo >= 4) a->p_lo = lo, a->p_hi = hi;
}

/* Index of s in a NULL-terminated list (0 when absent). */
static int word_index(const char *const *list, const char *s) {
  for (int i = 0; list[i]; i++)
    if (!strcmp(list[i], s)) return i;
  return 0;
}

/* extrapolation_value in the output's element type. */
static void ext_to_bytes(toplu_dtype_t t, float v, unsigned char *b) {
  memset(b, 0, 8);
  switch (t) {
    case TOPLU_DTYPE_FLOAT: memcpy(b, &v, 4); break;
    case TOPLU_DTYPE_DOUBLE: { double d = v; memcpy(b, &d, 8); break; }
    case TOPLU_DTYPE_FLOAT16: { uint16_t h = toplu_float_to_half(v); memcpy(b, &h, 2); break; }
    case TOPLU_DTYPE_BFLOAT16: { uint16_t h = toplu_float_to_bfloat16(v); memcpy(b, &h, 2); break; }
    case TOPLU_DTYPE_INT8: { int8_t i = (int8_t)v; memcpy(b, &i, 1); break; }
    case TOPLU_DTYPE_UINT8: case TOPLU_DTYPE_BOOL: { uint8_t i = (uint8_t)v; memcpy(b, &i, 1); break; }
    case TOPLU_DTYPE_INT16: { int16_t i = (int16_t)v; memcpy(b, &i, 2); break; }
    case TOPLU_DTYPE_UINT16: { uint16_t i = (uint16_t)v; memcpy(b, &i, 2); break; }
    case TOPLU_DTYPE_INT32: { int32_t i = (int32_t)v; memcpy(b, &i, 4); break; }
    case TOPLU_DTYPE_UINT32: { uint32_t i = (uint32_t)v; memcpy(b, &i, 4); break; }
    case TOPLU_DTYPE_INT64: { int64_t i = (int64_t)v; memcpy(b, &i, 8); break; }
    case TOPLU_DTYPE_UINT64: { uint64_t i = (uint64_t)v; memcpy(b, &i, 8); break; }
    default: break;
  }
}

/* Round up to a multiple of 64 bytes. */

/* Build the tables and pick a path. */
static toplu_status_t prepare_resize(toplu__kernel_ctx_t *ctx, toplu__kernel_info_t *info) {
  static const char *const cts[] = {"half_pixel", "half_pixel_symmetric", "pytorch_half_pixel", "align_corners",
                                    "asymmetric", "tf_half_pixel_for_nn", "tf_crop_and_resize", NULL};
  static const char *const nms[] = {"round_prefer_floor", "round_prefer_ceil", "floor", "ceil", NULL};
  const toplu__node_t *n = ctx->node;
  const toplu_tensor_t *x = &ctx->in[0], *y = &ctx->out[0];
  int upsample = !strcmp(n->op_type, "Upsample");
  int64_t opset = n->opset > 0 ? n->opset : 1000;
  int legacy = upsample || opset < 11;

  toplu__infer_ctx_t ic = {.graph = (toplu__graph_t *)ctx->graph, .node = n, .n_in = ctx->n_in, .n_out = ctx->n_out,
                          .in = ctx->in, .out = ctx->out, .concrete = 1, .err = ctx->err};
  int64_t od[TOPLU_MAX_DIMS];
  double sc[TOPLU_MAX_DIMS], r0[TOPLU_MAX_DIMS], r1[TOPLU_MAX_DIMS];
  int known;
  toplu_status_t st = toplu__resize_params(&ic, od, sc, r0, r1, &known);
  if (st) return st;
  if (!known) return toplu__kernel_error(ctx, TOPLU_ERR_UNSUPPORTED, "scales, sizes or roi are not constants");
  int nd = x->ndim;
  if (nd < 1 || nd != y->ndim) return toplu__kernel_error(ctx, TOPLU_ERR_INTERNAL, "output rank does not match X");
  for (int d = 0; d < nd; d++)
    if (od[d] != y->dims[d]) return toplu__kernel_error(ctx, TOPLU_ERR_INTERNAL, "output dim %d does not match", d);

  rs_opts_t op;
  const char *mode = toplu__node_attr_string(n, "mode", "nearest");
  op.mode = !strcmp(mode, "cubic") ? RM_CUBIC : (!strcmp(mode, "linear") || !strcmp(mode, "bilinear")) ? RM_LINEAR
                                                                                                       : RM_NEAREST;
  op.ct = legacy ? CT_ASYM : word_index(cts, toplu__node_attr_string(n, "coordinate_transformation_mode", "half_pixel"));
  if (op.ct == CT_ALIGN && !toplu__node_attr_int(n, "toplu_output_length", 0)) op.ct = CT_ALIGN_REF;
  op.nm = legacy ? NM_SIMPLE : word_index(nms, toplu__node_attr_string(n, "nearest_mode", "round_prefer_floor"));
  op.A = legacy ? -0.75 : toplu__node_attr_float(n, "cubic_coeff_a", -0.75f);
  op.exclude_outside = legacy ? 0 : (int)toplu__node_attr_int(n, "exclude_outside", 0);
  op.antialias = !legacy && opset >= 18 ? (int)toplu__node_attr_int(n, "antialias", 0) : 0;
  float ext = legacy ? 0.0f : toplu__node_attr_float(n, "extrapolation_value", 0.0f);

  size_t es = toplu_dtype_size(x->dtype);
  if (op.mode == RM_NEAREST) {
    if (es != 1 && es != 2 && es != 4 && es != 8)
      return toplu__kernel_error(ctx, TOPLU_ERR_UNSUPPORTED, "nearest resize of %s is not supported",
                                toplu_dtype_name(x->dtype));
  } else if (x->dtype != TOPLU_DTYPE_FLOAT) {
    return toplu__kernel_error(ctx, TOPLU_ERR_UNSUPPORTED, "%s resize of %s is not supported (float32 only)", mode,
                              toplu_dtype_name(x->dtype));
  }
  int64_t in_numel = toplu_tensor_numel(x), out_numel = toplu_tensor_numel(y);
  if (in_numel == 0 && out_numel > 0)
    return toplu__kernel_error(ctx, TOPLU_ERR_SHAPE, "cannot resize an empty tensor to a non-empty one");

  /* One block: the state, then every axis's tables. */
  int taps[TOPLU_MAX_DIMS];
  size_t bytes = toplu__align64(sizeof(rs_state_t));
  for (int d = 0; d < nd; d++) {
    taps[d] = axis_taps(&op, sc[d]);
    size_t o = (size_t)od[d];
    bytes += toplu__align64(o * (size_t)taps[d] * sizeof(int64_t)) + toplu__align64(o * (size_t)taps[d] * sizeof(float)) +
             toplu__align64(o) + toplu__align64(o * sizeof(int64_t));
  }
  unsigned char *mem = toplu__kernel_alloc(ctx, bytes);
  if (!mem) return toplu__kernel_error(ctx, TOPLU_ERR_OUT_OF_MEMORY, "out of memory for resize tables");
  memset(mem, 0, bytes);
  rs_state_t *s = (rs_state_t *)mem;
  ctx->state = s;
  size_t at = toplu__align64(sizeof(rs_state_t));
  s->ndim = nd;
  s->esize = (int)es;
  s->threads = ctx->threads > 0 ? ctx->threads : 1;
  s->ext = ext;
  ext_to_bytes(x->dtype, ext, s->ext_bytes);
  int64_t stride = 1;
  for (int d = nd - 1; d >= 0; d--) {
    rs_axis_t *a = &s->ax[d];
    size_t o = (size_t)od[d];
    s->in_dims[d] = a->in = x->dims[d];
    s->out_dims[d] = a->out = od[d];
    a->ntaps = taps[d];
    a->idx = (int64_t *)(mem + at), at += toplu__align64(o * (size_t)taps[d] * sizeof(int64_t));
    a->w = (float *)(mem + at), at += toplu__align64(o * (size_t)taps[d] * sizeof(float));
    a->outside = mem + at, at += toplu__align64(o);
    a->off = (int64_t *)(mem + at), at += toplu__align64(o * sizeof(int64_t));
    if (a->in > 0) {
      build_axis(a, &op, sc[d], r0[d], r1[d]);
      if (op.mode != RM_NEAREST) find_doubling(a);
    } else {
      a->identity = a->out == 0;
    }
    if (op.mode == RM_NEAREST)
      for (int64_t i = 0; i < a->out; i++) a->off[i] = a->outside[i] ? -1 : a->idx[i] * stride;
    if (a->any_outside) s->any_outside = 1;
    stride *= a->in;
  }
  info->state_bytes = bytes;

  int n_resized = 0, outer_resized = 0;
  for (int d = 0; d < nd; d++)
    if (!s->ax[d].identity) {
      n_resized++;
      if (d < nd - 2) outer_resized = 1;
    }
  if (n_resized == 0 || out_numel == 0) {
    s->path = PATH_COPY;
    return TOPLU_OK;
  }
  if (op.mode == RM_NEAREST) {
    s->path = PATH_NEAREST;
    rs_axis_t *a = &s->ax[nd - 1];
    if (!a->identity && !a->any_outside && a->in > 0 && a->out % a->in == 0 && a->out / a->in >= 2) {
      int64_t f = a->out / a->in;
      int ok = 1;
      for (int64_t i = 0; i < a->out && ok; i++) ok = a->idx[i] == i / f;
      if (ok) s->repeat = (int)(f > 1000000 ? 0 : f);
    }
    return TOPLU_OK;
  }
  if (nd >= 2 && !outer_resized) {
    s->path = PATH_PLANE;
    const rs_axis_t *h = &s->ax[nd - 2], *w = &s->ax[nd - 1];
    if (!h->identity && !w->identity) s->plane_floats = (size_t)(h->hi - h->lo + 1) * (size_t)w->out;
    info->workspace_bytes = (size_t)s->threads * toplu__align64(s->plane_floats * sizeof(float));
    return TOPLU_OK;
  }
  /* separable: shrinking axes first keeps the scratch small */
  s->path = PATH_SEPARABLE;
  for (int d = 0; d < nd; d++)
    if (!s->ax[d].identity) s->pass_axis[s->n_pass++] = d;
  for (int i = 1; i < s->n_pass; i++)
    for (int j = i; j > 0; j--) {
      const rs_axis_t *p = &s->ax[s->pass_axis[j - 1]], *q = &s->ax[s->pass_axis[j]];
      if ((double)q->out / (double)q->in < (double)p->out / (double)p->in) {
        int t = s->pass_axis[j];
        s->pass_axis[j] = s->pass_axis[j - 1];
        s->pass_axis[j - 1] = t;
      }
    }
  int64_t cur[TOPLU_MAX_DIMS];
  memcpy(cur, s->in_dims, sizeof cur);
  for (int p = 0; p + 1 < s->n_pass; p++) {
    cur[s->pass_axis[p]] = s->out_dims[s->pass_axis[p]];
    size_t e = 1;
    for (int d = 0; d < nd; d++) e *= (size_t)cur[d];
    if (e > s->buf_elems[p % 2]) s->buf_elems[p % 2] = e;
  }
  info->workspace_bytes = toplu__align64(s->buf_elems[0] * sizeof(float)) + toplu__align64(s->buf_elems[1] * sizeof(float));
  return TOPLU_OK;
}

/* Frees the tables. */
static void release_resize(toplu__kernel_ctx_t *ctx) {
  if (ctx->state) toplu__kernel_free(ctx, ctx->state);
  ctx->state = NULL;
}

/* ---- float interpolation rows ---- */

/* Outputs [o0, o1) of a row through the tables: dst[o] = sum_k w * src[idx]. */
static void interp_range(const rs_axis_t *a, const float *restrict src, float *restrict dst, int64_t o0, int64_t o1) {
  const int64_t *restrict ix = a->idx;
  const float *restrict w = a->w;
  switch (a->ntaps) {
    case 1:
      for (int64_t o = o0; o < o1; o++) dst[o] = src[ix[o]];
      break;
    case 2:
      for (int64_t o = o0; o < o1; o++) dst[o] = w[2 * o] * src[ix[2 * o]] + w[2 * o + 1] * src[ix[2 * o + 1]];
      break;
    case 4:
      for (int64_t o = o0; o < o1; o++) {
        const int64_t *i4 = ix + 4 * o;
        const float *w4 = w + 4 * o;
        dst[o] = w4[0] * src[i4[0]] + w4[1] * src[i4[1]] + w4[2] * src[i4[2]] + w4[3] * src[i4[3]];
      }
      break;
    default: {
      int K = a->ntaps;
      for (int64_t o = o0; o < o1; o++) {
        float acc = 0.0f;
        for (int k = 0; k < K; k++) acc += w[o * K + k] * src[ix[o * K + k]];
        dst[o] = acc;
      }
    }
  }
}

/* The doubling range of a row (see rs_axis_t): contiguous loads, no gathers. */
static void interp_doubling(const rs_axis_t *a, const float *restrict src, float *restrict dst) {
  const int64_t i0 = a->p_lo, i1 = a->p_hi;
  const int64_t a0 = a->pd[0][0], a1 = a->pd[0][1], b0 = a->pd[1][0], b1 = a->pd[1][1];
  const float u0 = a->pw[0][0], u1 = a->pw[0][1], v0 = a->pw[1][0], v1 = a->pw[1][1];
  if (a->ntaps == 2) {
    for (int64_t i = i0; i < i1; i++) {
      float e = u0 * src[i + a0] + u1 * src[i + a1];
      float f = v0 * src[i + b0] + v1 * src[i + b1];
      dst[2 * i] = e;
      dst[2 * i + 1] = f;
    }
    return;
  }
  const int64_t a2 = a->pd[0][2], a3 = a->pd[0][3], b2 = a->pd[1][2], b3 = a->pd[1][3];
  const float u2 = a->pw[0][2], u3 = a->pw[0][3], v2 = a->pw[1][2], v3 = a->pw[1][3];
  for (int64_t i = i0; i < i1; i++) {
    float e = u0 * src[i + a0] + u1 * src[i + a1] + u2 * src[i + a2] + u3 * src[i + a3];
    float f = v0 * src[i + b0] + v1 * src[i + b1] + v2 * src[i + b2] + v3 * src[i + b3];
    dst[2 * i] = e;
    dst[2 * i + 1] = f;
  }
}

/* One row along an axis whose input row is contiguous. */
static void interp_row(const rs_axis_t *a, const float *restrict src, float *restrict dst, float ext) {
  int64_t n = a->out;
  if (a->identity) {
    memcpy(dst, src, (size_t)n * sizeof(float));
    return;
  }
  if (a->p_hi > a->p_lo) {
    interp_range(a, src, dst, 0, 2 * a->p_lo);
    interp_doubling(a, src, dst);
    interp_range(a, src, dst, 2 * a->p_hi, n);
  } else {
    interp_range(a, src, dst, 0, n);
  }
  if (a->any_outside)
    for (int64_t o = 0; o < n; o++)
      if (a->outside[o]) dst[o] = ext;
}

/* Output index o along an axis whose elements are rows of `inner` floats:
 * dst = sum_k w * row(idx - lo) of src (row stride inner). */
static void interp_rows(const rs_axis_t *a, int64_t o, const float *restrict src, int64_t lo, int64_t inner,
                        float *restrict dst, float ext) {
  if (a->outside[o]) {
    for (int64_t i = 0; i < inner; i++) dst[i] = ext;
    return;
  }
  int K = a->ntaps;
  const int64_t *ix = a->idx + o * K;
  const float *w = a->w + o * K;
  if (a->identity) {
    memcpy(dst, src + (o - lo) * inner, (size_t)inner * sizeof(float));
    return;
  }
  if (K == 1) {
    memcpy(dst, src + (ix[0] - lo) * inner, (size_t)inner * sizeof(float));
  } else if (K == 2) {
    const float *p0 = src + (ix[0] - lo) * inner, *p1 = src + (ix[1] - lo) * inner;
    float w0 = w[0], w1 = w[1];
    if (w1 == 0.0f) memcpy(dst, p0, (size_t)inner * sizeof(float));
    else if (w0 == 0.0f) memcpy(dst, p1, (size_t)inner * sizeof(float));
    else
      for (int64_t i = 0; i < inner; i++) dst[i] = w0 * p0[i] + w1 * p1[i];
  } else if (K == 4) {
    const float *p0 = src + (ix[0] - lo) * inner, *p1 = src + (ix[1] - lo) * inner;
    const float *p2 = src + (ix[2] - lo) * inner, *p3 = src + (ix[3] - lo) * inner;
    float w0 = w[0], w1 = w[1], w2 = w[2], w3 = w[3];
    for (int64_t i = 0; i < inner; i++) dst[i] = w0 * p0[i] + w1 * p1[i] + w2 * p2[i] + w3 * p3[i];
  } else {
    const float *p0 = src + (ix[0] - lo) * inner;
    float w0 = w[0];
    for (int64_t i = 0; i < inner; i++) dst[i] = w0 * p0[i];
    for (int k = 1; k < K; k++) {
      if (w[k] == 0.0f) continue;
      const float *pk = src + (ix[k] - lo) * inner;
      float wk = w[k];
      for (int64_t i = 0; i < inner; i++) dst[i] += wk * pk[i];
    }
  }
}

/* ---- plane path: resize the last two axes of every plane ---- */

/* Horizontal pass of input rows [r0, r1) (absolute) of one plane into tmp rows r - lo. */
static void plane_h(const rs_state_t *s, const float *xp, float *tmp, int64_t r0, int64_t r1) {
  const rs_axis_t *h = &s->ax[s->ndim - 2], *w = &s->ax[s->ndim - 1];
  for (int64_t r = r0; r < r1; r++) interp_row(w, xp + r * w->in, tmp + (r - h->lo) * w->out, s->ext);
}

/* Vertical pass of output rows [o0, o1) of one plane from src rows (idx - lo). */
static void plane_v(const rs_state_t *s, const float *src, int64_t lo, float *yp, int64_t o0, int64_t o1) {
  const rs_axis_t *h = &s->ax[s->ndim - 2], *w = &s->ax[s->ndim - 1];
  for (int64_t o = o0; o < o1; o++) interp_rows(h, o, src, lo, w->out, yp + o * w->out, s->ext);
}

/* One whole plane on the calling thread.  An identity axis (never with
 * extrapolated indices) skips its pass. */
static void plane_one(const rs_state_t *s, const float *xp, float *yp, float *tmp) {
  const rs_axis_t *h = &s->ax[s->ndim - 2], *w = &s->ax[s->ndim - 1];
  if (h->identity) {
    for (int64_t r = 0; r < h->out; r++) interp_row(w, xp + r * w->in, yp + r * w->out, s->ext);
  } else if (w->identity) {
    plane_v(s, xp, 0, yp, 0, h->out);
  } else {
    plane_h(s, xp, tmp, h->lo, h->hi + 1);
    plane_v(s, tmp, h->lo, yp, 0, h->out);
  }
}

/* Plane path: threads over planes when there are enough of them, else over
 * the rows of each plane (horizontal pass, then vertical pass). */
static void run_plane(const rs_state_t *s, const float *x, float *y, float *ws, int threads) {
  const rs_axis_t *h = &s->ax[s->ndim - 2], *w = &s->ax[s->ndim - 1];
  int64_t planes = 1;
  for (int d = 0; d < s->ndim - 2; d++) planes *= s->out_dims[d];
  int64_t in_plane = h->in * w->in, out_plane = h->out * w->out;
  size_t per = toplu__align64(s->plane_floats * sizeof(float)) / sizeof(float);
  if (threads <= 1 || planes * out_plane < RS_PARALLEL_MIN) {
    for (int64_t p = 0; p < planes; p++) plane_one(s, x + p * in_plane, y + p * out_plane, ws);
    return;
  }
  if (planes >= 4 * (int64_t)threads || out_plane < RS_PARALLEL_MIN / 4) {
#pragma omp parallel for num_threads(threads) schedule(static)
    for (int64_t p = 0; p < planes; p++)
      plane_one(s, x + p * in_plane, y + p * out_plane, ws + (size_t)omp_get_thread_num() * per);
    return;
  }
  for (int64_t p = 0; p < planes; p++) {
    const float *xp = x + p * in_plane;
    float *yp = y + p * out_plane;
    if (h->identity) {
#pragma omp parallel for num_threads(threads) schedule(static)
      for (int64_t r = 0; r < h->out; r++) interp_row(w, xp + r * w->in, yp + r * w->out, s->ext);
    } else if (w->identity) {
#pragma omp parallel for num_threads(threads) schedule(static)
      for (int64_t o = 0; o < h->out; o++) plane_v(s, xp, 0, yp, o, o + 1);
    } else {
#pragma omp parallel for num_threads(threads) schedule(static)
      for (int64_t r = h->lo; r <= h->hi; r++) plane_h(s, xp, ws, r, r + 1);
#pragma omp parallel for num_threads(threads) schedule(static)
      for (int64_t o = 0; o < h->out; o++) plane_v(s, ws, h->lo, yp, o, o + 1);
    }
  }
}

/* ---- separable path: one pass per resized axis ---- */

/* Resize axis d of src (dims cur) into dst; updates cur. */
static void sep_pass(const rs_state_t *s, int d, int64_t *cur, const float *src, float *dst, int threads) {
  const rs_axis_t *a = &s->ax[d];
  int64_t outer = 1, inner = 1;
  for (int k = 0; k < d; k++) outer *= cur[k];
  for (int k = d + 1; k < s->ndim; k++) inner *= cur[k];
  int par = threads > 1 && outer * a->out * inner >= RS_PARALLEL_MIN;
  (void)par; /* read only by the OpenMP pragmas, which a build without OpenMP drops */
  if (inner == 1) {
#pragma omp parallel for num_threads(threads) schedule(static) if (par)
    for (int64_t o = 0; o < outer; o++) interp_row(a, src + o * a->in, dst + o * a->out, s->ext);
  } else {
    int64_t rows = outer * a->out;
#pragma omp parallel for num_threads(threads) schedule(static) if (par)
    for (int64_t r = 0; r < rows; r++) {
      int64_t o = r / a->out, j = r % a->out;
      interp_rows(a, j, src + o * a->in * inner, 0, inner, dst + r * inner, s->ext);
    }
  }
  cur[d] = a->out;
}

/* Separable path through the two scratch buffers. */
static void run_separable(const rs_state_t *s, const float *x, float *y, float *ws, int threads) {
  float *buf[2] = {ws, ws + toplu__align64(s->buf_elems[0] * sizeof(float)) / sizeof(float)};
  int64_t cur[TOPLU_MAX_DIMS];
  memcpy(cur, s->in_dims, sizeof cur);
  const float *src = x;
  for (int p = 0; p < s->n_pass; p++) {
    float *dst = p + 1 == s->n_pass ? y : buf[p % 2];
    sep_pass(s, s->pass_axis[p], cur, src, dst, threads);
    src = dst;
  }
}

/* ---- nearest path: row gathers for any element size ---- */

/* Gather one output row of the last axis from the input row at src.  Sizes
 * and tables are read into locals first so that the stores cannot alias them
 * and the copy loops vectorise. */
#define DEFINE_GATHER(NAME, T)                                                                         \
  static void NAME(const rs_state_t *s, const void *src_v, void *dst_v) {                             \
    const rs_axis_t *a = &s->ax[s->ndim - 1];                                                          \
    const T *restrict src = src_v;                                                                     \
    T *restrict dst = dst_v;                                                                           \
    const int64_t n = a->out, n_in = a->in, f = s->repeat;                                             \
    if (a->identity) {                                                                                 \
      memcpy(dst, src, (size_t)n * sizeof(T));                                                         \
    } else if (f == 2) {                                                                               \
      for (int64_t i = 0; i < n_in; i++) {                                                             \
        T v = src[i];                                                                                  \
        dst[2 * i] = v;                                                                                \
        dst[2 * i + 1] = v;                                                                            \
      }                                                                                                \
    } else if (f > 0) {                                                                                \
      for (int64_t i = 0; i < n_in; i++) {                                                             \
        T v = src[i];                                                                                  \
        for (int64_t k = 0; k < f; k++) dst[i * f + k] = v;                                            \
      }                                                                                                \
    } else {                                                                                           \
      const int64_t *restrict ix = a->idx;                                                             \
      for (int64_t o = 0; o < n; o++) dst[o] = src[ix[o]];                                             \
      if (a->any_outside) {                                                                            \
        const uint8_t *outside = a->outside;                                                           \
        T e;                                                                                           \
        memcpy(&e, s->ext_bytes, sizeof e);                                                            \
        for (int64_t o = 0; o < n; o++)                                                                \
          if (outside[o]) dst[o] = e;                                                                  \
      }                                                                                                \
    }                                                                                                  \
  }                                                                                                    \
  /* Fill n elements with extrapolation_value. */                                                      \
  static void NAME##_fill(const rs_state_t *s, void *dst_v, int64_t n) {                               \
    T e, *dst = dst_v;                                                                                 \
    memcpy(&e, s->ext_bytes, sizeof e);                                                                \
    for (int64_t o = 0; o < n; o++) dst[o] = e;                                                        \
  }
DEFINE_GATHER(gather8, uint8_t)
DEFINE_GATHER(gather16, uint16_t)
DEFINE_GATHER(gather32, uint32_t)
DEFINE_GATHER(gather64, uint64_t)

/* Rows [r0, r1) of the output (all axes but the last). */
static void nearest_rows(const rs_state_t *s, const unsigned char *x, unsigned char *y, int64_t r0, int64_t r1) {
  int nd = s->ndim, es = s->esize;
  int64_t W = s->out_dims[nd - 1];
  size_t row_bytes = (size_t)W * (size_t)es;
  int64_t coord[TOPLU_MAX_DIMS] = {0}, rem = r0;
  for (int d = nd - 2; d >= 0; d--) {
    coord[d] = rem % s->out_dims[d];
    rem /= s->out_dims[d];
  }
  int64_t prev = -2;
  for (int64_t r = r0; r < r1; r++) {
    int64_t off = 0;
    int out = 0;
    for (int d = 0; d < nd - 1; d++) {
      int64_t v = s->ax[d].off[coord[d]];
      if (v < 0) out = 1;
      off += v;
    }
    unsigned char *dst = y + (size_t)r * row_bytes;
    if (out) {
      off = -2;
      switch (es) {
        case 1: gather8_fill(s, dst, W); break;
        case 2: gather16_fill(s, dst, W); break;
        case 4: gather32_fill(s, dst, W); break;
        default: gather64_fill(s, dst, W); break;
      }
    } else if (off == prev && r > r0) {
      memcpy(dst, dst - row_bytes, row_bytes);
    } else {
      const unsigned char *src = x + (size_t)off * (size_t)es;
      switch (es) {
        case 1: gather8(s, src, dst); break;
        case 2: gather16(s, src, dst); break;
        case 4: gather32(s, src, dst); break;
        default: gather64(s, src, dst); break;
      }
    }
    prev = off;
    for (int d = nd - 2; d >= 0; d--) {
      if (++coord[d] < s->out_dims[d]) break;
      coord[d] = 0;
    }
  }
}

/* Nearest path: contiguous blocks of rows per thread (so a row can copy the one before). */
static void run_nearest(const rs_state_t *s, const void *x, void *y, int64_t out_numel, int threads) {
  int nd = s->ndim;
  int64_t rows = 1;
  for (int d = 0; d < nd - 1; d++) rows *= s->out_dims[d];
  int chunks = out_numel >= RS_PARALLEL_MIN && threads > 1 ? threads : 1;
  if (chunks > rows) chunks = (int)rows;
#pragma omp parallel for num_threads(threads) schedule(static, 1) if (chunks > 1)
  for (int c = 0; c < chunks; c++) nearest_rows(s, x, y, rows * c / chunks, rows * (c + 1) / chunks);
}

/* Resize / Upsample. */
static toplu_status_t run_resize(toplu__kernel_ctx_t *ctx) {
  const rs_state_t *s = ctx->state;
  const toplu_tensor_t *x = &ctx->in[0];
  toplu_tensor_t *y = &ctx->out[0];
  int64_t n = toplu_tensor_numel(y);
  int threads = ctx->threads < s->threads ? ctx->threads : s->threads;
  if (threads < 1) threads = 1;
  if (n == 0) return TOPLU_OK;
  switch (s->path) {
    case PATH_COPY:
      if (y->data != x->data) memcpy(y->data, x->data, toplu_tensor_nbytes(y));
      break;
    case PATH_NEAREST: run_nearest(s, x->data, y->data, n, threads); break;
    case PATH_PLANE: run_plane(s, x->data, y->data, ctx->workspace, threads); break;
    default: run_separable(s, x->data, y->data, ctx->workspace, threads); break;
  }
  return TOPLU_OK;
}

const toplu__kernel_t toplu__kernels_resize[] = {
    {.op_type = "Resize", .domain = "", .prepare = prepare_resize, .run = run_resize, .release = release_resize},
    {.op_type = "Upsample", .domain = "", .prepare = prepare_resize, .run = run_resize, .release = release_resize},
    {.op_type = NULL},
};
