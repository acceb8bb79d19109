/*
 * ops/pool.c - pooling kernels:
 *   MaxPool-1/8/10/11/12, AveragePool-1/7/10/11, LpPool-1/2/11,
 *   GlobalAveragePool-1, GlobalMaxPool-1, GlobalLpPool-1/2.
 *
 * Float MaxPool (without Indices) and AveragePool with 1 to 3 spatial dims
 * are offered to oneDNN as one pooling primitive over the whole batch (plain
 * NC[D]HW layouts, user scratchpad in the plan's workspace; ceil_mode becomes
 * extra end padding, exact for max and for averages that exclude padding).
 * On plain layouts oneDNN 2.6 on x86 has only its reference-grade
 * "simple_nchw" implementation (16x slower than the loops here on
 * [16,64,112,112] 3x3/2 max), so a primitive is kept only when oneDNN picks
 * an optimised one; otherwise float pools run pool_f32_plane: per output row,
 * one vectorised pass per kernel tap, at memory bandwidth.  The Indices
 * output, LpPool and integer, double and float16 tensors run pool_plane,
 * per (n, c) plane in double.  Window geometry follows graph/schema_pool.c.
 */
#include <math.h>
#include <omp.h>
#include <string.h>

#include "ops/onednn/onednn.h"
#include "ops/kernel.h"
#include "ops/reduce_util.h"

#define POOL_SP 3 /* spatial dims the kernels handle (1-D and 2-D are padded to 3) */

typedef enum pool_kind { POOL_MAX, POOL_AVG, POOL_LP } pool_kind_t;

typedef struct pool_state {
  pool_kind_t kind;
  int ns;                 /* spatial dims of the tensor (1..3) */
  int64_t nc;             /* N * C planes */
  int64_t in[POOL_SP], out[POOL_SP], k[POOL_SP], s[POOL_SP], d[POOL_SP], pb[POOL_SP], pe[POOL_SP];
  int count_include_pad;
  int storage_order;
  double p;               /* LpPool exponent */
  toplu__dnnl_prim_t dp;   /* dp.prim NULL: C loops */
  int fast;               /* float max/avg without Indices: pool_f32_plane */
  int fast_int;           /* uint8/int8 MaxPool without Indices: pool_max_u8_plane / pool_max_s8_plane */
  float *inv[POOL_SP];    /* AveragePool: 1 / window taps counted per dim and output position */
} pool_state_t;

/* ---- dtype conversion of whole planes (outside the inner loops) ---- */

/* dst[i] = src[i] as double, for the dtypes pooling takes. */
static void pool_to_double(double *dst, const void *src, toplu_dtype_t dt, int64_t n) {
  switch (dt) {
    case TOPLU_DTYPE_FLOAT: for (int64_t i = 0; i < n; i++) dst[i] = ((const float *)src)[i]; break;
    case TOPLU_DTYPE_DOUBLE: memcpy(dst, src, (size_t)n * sizeof(double)); break;
    case TOPLU_DTYPE_FLOAT16:
      for (int64_t i = 0; i < n; i++) dst[i] = toplu_half_to_float(((const uint16_t *)src)[i]);
      break;
    case TOPLU_DTYPE_INT8: for (int64_t i = 0; i < n; i++) dst[i] = ((const int8_t *)src)[i]; break;
    case TOPLU_DTYPE_UINT8: for (int64_t i = 0; i < n; i++) dst[i] = ((const uint8_t *)src)[i]; break;
    default: break;
  }
}

/* dst[i] = src[i] converted to dt (integers are exact maxima here). */
static void pool_from_double(void *dst, const double *src, toplu_dtype_t dt, int64_t n) {
  switch (dt) {
    case TOPLU_DTYPE_FLOAT: for (int64_t i = 0; i < n; i++) ((float *)dst)[i] = (float)src[i]; break;
    case TOPLU_DTYPE_DOUBLE: memcpy(dst, src, (size_t)n * sizeof(double)); break;
    case TOPLU_DTYPE_FLOAT16:
      for (int64_t i = 0; i < n; i++) ((uint16_t *)dst)[i] = toplu_float_to_half((float)src[i]);
      break;
    case TOPLU_DTYPE_INT8: for (int64_t i = 0; i < n; i++) ((int8_t *)dst)[i] = (int8_t)src[i]; break;
    case TOPLU_DTYPE_UINT8: for (int64_t i = 0; i < n; i++) ((uint8_t *)dst)[i] = (uint8_t)src[i]; break;
    default: break;
  }
}

/* Lowest value of dt: the max of a window that covers no input element. */
static double pool_lowest(toplu_dtype_t dt) {
  switch (dt) {
    case TOPLU_DTYPE_INT8: return -128.0;
    case TOPLU_DTYPE_UINT8: return 0.0;
    case TOPLU_DTYPE_FLOAT16: return -65504.0;
    case TOPLU_DTYPE_DOUBLE: return -1.7976931348623157e308;
    default: return -3.4028234663852886e38;
  }
}

/* ---- geometry ---- */

/* Read an INTS attribute with n values into out (dflt when absent). */
static toplu_status_t pool_attr_ints(toplu__kernel_ctx_t *ctx, const char *name, int n, int64_t dflt, int64_t *out) {
  int64_t cnt;
  if (toplu__node_attr_ints_n(ctx->node, name, n, dflt, out, &cnt)) return TOPLU_OK;
  return toplu__kernel_error(ctx, TOPLU_ERR_INVALID_MODEL, "attribute %s has %lld values, expected %d", name,
                            (long long)cnt, n);
}

/* Fill st's window geometry from the node's attributes and X's dims: the
 * spatial dims are right-aligned in 3 slots, unused slots are size 1. */
static toplu_status_t pool_geometry(toplu__kernel_ctx_t *ctx, pool_state_t *st) {
  const toplu_tensor_t *x = &ctx->in[0], *y = &ctx->out[0];
  int ns = x->ndim - 2;
  if (ns < 1 || ns > POOL_SP)
    return toplu__kernel_error(ctx, TOPLU_ERR_UNSUPPORTED, "pooling over %d spatial dims (toplu handles 1 to 3)", ns);
  st->ns = ns;
  st->nc = x->dims[0] * x->dims[1];
  int64_t k[POOL_SP], s[POOL_SP], d[POOL_SP], pads[2 * POOL_SP];
  toplu_status_t e;
  if ((e = pool_attr_ints(ctx, "kernel_shape", ns, 1, k)) || (e = pool_attr_ints(ctx, "strides", ns, 1, s)) ||
      (e = pool_attr_ints(ctx, "dilations", ns, 1, d)) || (e = pool_attr_ints(ctx, "pads", 2 * ns, 0, pads)))
    return e;
  const char *ap = toplu__node_attr_string(ctx->node, "auto_pad", "NOTSET");
  int upper = !strcmp(ap, "SAME_UPPER"), lower = !strcmp(ap, "SAME_LOWER"), valid = !strcmp(ap, "VALID");
  for (int i = 0; i < POOL_SP; i++) {
    st->in[i] = st->out[i] = st->k[i] = st->s[i] = st->d[i] = 1;
    st->pb[i] = st->pe[i] = 0;
  }
  for (int i = 0; i < ns; i++) {
    int j = POOL_SP - ns + i;
    if (k[i] < 1 || s[i] < 1 || d[i] < 1 || pads[i] < 0 || pads[ns + i] < 0)
      return toplu__kernel_error(ctx, TOPLU_ERR_INVALID_MODEL, "kernel_shape, strides, dilations or pads out of range");
    st->in[j] = x->dims[2 + i];
    st->out[j] = y->dims[2 + i];
    st->k[j] = k[i];
    st->s[j] = s[i];
    st->d[j] = d[i];
    if (upper || lower) {
      int64_t need = (st->out[j] - 1) * s[i] + (k[i] - 1) * d[i] + 1 - st->in[j];
      if (need < 0) need = 0;
      st->pb[j] = upper ? need / 2 : need - need / 2;
      st->pe[j] = need - st->pb[j];
    } else if (!valid) {
      st->pb[j] = pads[i];
      st->pe[j] = pads[ns + i];
    }
  }
  return TOPLU_OK;
}

/* ---- oneDNN path ---- */

/* Try to make a oneDNN pooling primitive for st (float only); leaves
 * st->dp.prim NULL when oneDNN cannot do this case exactly. */
static toplu_status_t pool_try_dnnl(toplu__kernel_ctx_t *ctx, pool_state_t *st, toplu__kernel_info_t *info) {
  if (ctx->in[0].dtype != TOPLU_DTYPE_FLOAT || st->kind == POOL_LP || !ctx->backend) return TOPLU_OK;
  if (st->kind == POOL_MAX && ctx->n_out > 1 && ctx->out[1].ndim >= 0) return TOPLU_OK; /* Indices */
  dnnl_dims_t strides, kernel, dil, pl, pr;
  int ns = st->ns;
  for (int i = 0; i < ns; i++) {
    int j = POOL_SP - ns + i;
    int64_t ek = (st->k[j] - 1) * st->d[j] + 1;
    strides[i] = st->s[j];
    kernel[i] = st->k[j];
    dil[i] = st->d[j] - 1;
    pl[i] = st->pb[j];
    /* End padding that gives exactly out windows (ceil_mode adds some). */
    int64_t r = (st->out[j] - 1) * st->s[j] + ek - st->in[j] - st->pb[j];
    if ((st->in[j] + st->pb[j] + st->pe[j] - ek) / st->s[j] + 1 == st->out[j]) r = st->pe[j];
    if (r < 0) return TOPLU_OK;
    if (r > st->pe[j] && st->kind == POOL_AVG && st->count_include_pad) return TOPLU_OK; /* divisor would count it */
    pr[i] = r;
    if (pl[i] >= ek || pr[i] >= ek) return TOPLU_OK; /* windows entirely in padding */
  }
  dnnl_alg_kind_t alg = st->kind == POOL_MAX   ? dnnl_pooling_max
                        : st->count_include_pad ? dnnl_pooling_avg_include_padding
                                                : dnnl_pooling_avg_exclude_padding;
  dnnl_memory_desc_t src_md, dst_md;
  if (toplu__dnnl_plain_md(&src_md, &ctx->in[0]) != dnnl_success ||
      toplu__dnnl_plain_md(&dst_md, &ctx->out[0]) != dnnl_success)
    return TOPLU_OK;
  dnnl_pooling_v2_desc_t desc;
  if (dnnl_pooling_v2_forward_desc_init(&desc, dnnl_forward_inference, alg, &src_md, &dst_md, strides, kernel, dil, pl,
                                        pr) != dnnl_success)
    return TOPLU_OK;
  dnnl_primitive_attr_t attr = NULL;
  if (dnnl_primitive_attr_create(&attr) != dnnl_success) return TOPLU_OK;
  dnnl_primitive_desc_t pd = NULL;
  toplu_status_t e = TOPLU_OK;
  const char *impl = NULL;
  if (dnnl_primitive_attr_set_scratchpad_mode(attr, dnnl_scratchpad_mode_user) == dnnl_success &&
      dnnl_primitive_desc_create(&pd, &desc, attr, toplu__dnnl_engine(ctx->backend), NULL) == dnnl_success) {
    /* Plain layouts often get only oneDNN's reference-grade implementation
     * ("simple_nchw", "ref:any"), which is far slower than the C loops. */
    if (dnnl_primitive_desc_query(pd, dnnl_query_impl_info_str, 0, &impl) != dnnl_success || !impl ||
        !strncmp(impl, "simple", 6) || strstr(impl, "ref")) {
      dnnl_primitive_desc_destroy(pd);
      dnnl_primitive_attr_destroy(attr);
      return TOPLU_OK;
    }
    e = toplu__dnnl_prim_create(ctx, &st->dp, pd, 0, info);
    if (e == TOPLU_OK) {
      toplu__dnnl_prim_arg(&st->dp, DNNL_ARG_SRC, TOPLU_DNNL_FROM_INPUT, 0, NULL, &src_md);
      toplu__dnnl_prim_arg(&st->dp, DNNL_ARG_DST, TOPLU_DNNL_FROM_OUTPUT, 0, NULL, &dst_md);
    }
  }
  dnnl_primitive_attr_destroy(attr);
  return e;
}

/* Per exec context memory objects for the primitive (none for the loops). */
static toplu_status_t bind_pool(toplu__kernel_ctx_t *ctx) {
  const pool_state_t *st = ctx->state;
  if (!st || !st->dp.prim) return TOPLU_OK;
  return toplu__dnnl_prim_bind(ctx, &st->dp, &ctx->exec_state);
}

/* Free bind_pool's memory objects. */
static void unbind_pool(toplu__kernel_ctx_t *ctx) {
  toplu__dnnl_prim_unbind(ctx->exec_state);
  ctx->exec_state = NULL;
}

/* ---- C loops ---- */

/* Floor and ceiling of a / b for b >= 1 and any sign of a. */
static int64_t floor_div(int64_t a, int64_t b) { return a >= 0 ? a / b : -((-a + b - 1) / b); }
static int64_t ceil_div(int64_t a, int64_t b) { return a >= 0 ? (a + b - 1) / b : -(-a / b); }

/* The taps j in [*j0, *j1) of a window of k taps, dilation d >= 1, starting
 * at `start`, whose position start + j * d falls in [lo, hi).  O(1): a
 * kernel of 2^32 taps over a 5-wide input (fuzz finding F3) once cost 2^32
 * steps per output at plan time and again per output at run time. */
static void pool_tap_range(int64_t start, int64_t k, int64_t d, int64_t lo, int64_t hi, int64_t *j0, int64_t *j1) {
  int64_t a = ceil_div(lo - start, d), b = hi > start ? floor_div(hi - 1 - start, d) + 1 : 0;
  if (a < 0) a = 0;
  if (b > k) b = k;
  *j0 = a;
  *j1 = b > a ? b : a;
}

/* Number of window taps (dim i) starting at `start` that fall in [lo, hi). */
static int64_t pool_taps_in(int64_t start, int64_t k, int64_t d, int64_t lo, int64_t hi) {
  int64_t j0, j1;
  pool_tap_range(start, k, d, lo, hi, &j0, &j1);
  return j1 - j0;
}

/* Pool one (n, c) plane: x is the input plane, y the output plane (both in
 * double), ind (may be NULL) the Indices plane; base is the flattened index
 * of the plane's first input element. */
static void pool_plane(const pool_state_t *st, const double *x, double *y, int64_t *ind, int64_t base, double lowest) {
  const int64_t I0 = st->in[0], I1 = st->in[1], I2 = st->in[2];
  int64_t o = 0;
  for (int64_t o0 = 0; o0 < st->out[0]; o0++) {
    int64_t a0 = o0 * st->s[0] - st->pb[0];
    for (int64_t o1 = 0; o1 < st->out[1]; o1++) {
      int64_t a1 = o1 * st->s[1] - st->pb[1];
      for (int64_t o2 = 0; o2 < st->out[2]; o2++, o++) {
        int64_t a2 = o2 * st->s[2] - st->pb[2];
        double acc = st->kind == POOL_MAX ? lowest : 0.0;
        int64_t arg = -1, cnt = 0;
        int64_t k0a, k0b, k1a, k1b, k2a, k2b; /* only the taps inside the input */
        pool_tap_range(a0, st->k[0], st->d[0], 0, I0, &k0a, &k0b);
        pool_tap_range(a1, st->k[1], st->d[1], 0, I1, &k1a, &k1b);
        pool_tap_range(a2, st->k[2], st->d[2], 0, I2, &k2a, &k2b);
        for (int64_t k0 = k0a; k0 < k0b; k0++) {
          int64_t i0 = a0 + k0 * st->d[0];
          if (i0 < 0 || i0 >= I0) continue;
          for (int64_t k1 = k1a; k1 < k1b; k1++) {
            int64_t i1 = a1 + k1 * st->d[1];
            if (i1 < 0 || i1 >= I1) continue;
            const double *row = x + (i0 * I1 + i1) * I2;
            for (int64_t k2 = k2a; k2 < k2b; k2++) {
              int64_t i2 = a2 + k2 * st->d[2];
              if (i2 < 0 || i2 >= I2) continue;
              double v = row[i2];
              if (st->kind == POOL_MAX) {
                if (v > acc || arg < 0) {
                  acc = v;
                  arg = st->storage_order ? (i2 * I1 + i1) * I0 + i0 : (i0 * I1 + i1) * I2 + i2;
                }
              } else if (st->kind == POOL_AVG) {
                acc += v;
              } else {
                acc += st->p == 2.0 ? v * v : pow(fabs(v), st->p);
              }
              cnt++;
            }
          }
        }
        if (st->kind == POOL_AVG) {
          int64_t div = cnt;
          if (st->count_include_pad)
            div = pool_taps_in(a0, st->k[0], st->d[0], -st->pb[0], I0 + st->pe[0]) *
                  pool_taps_in(a1, st->k[1], st->d[1], -st->pb[1], I1 + st->pe[1]) *
                  pool_taps_in(a2, st->k[2], st->d[2], -st->pb[2], I2 + st->pe[2]);
          acc = div ? acc / (double)div : 0.0;
        } else if (st->kind == POOL_LP) {
          acc = st->p == 2.0 ? sqrt(acc) : pow(acc, 1.0 / st->p);
        }
        y[o] = acc;
        if (ind) ind[o] = arg < 0 ? -1 : base + arg;
      }
    }
  }
}

/* Float max/avg of one (n, c) plane straight from the input rows: for each
 * output row and each valid (kd, kh) tap, every kw tap is one pass over the
 * output row (contiguous for stride 1), so the compiler vectorises it. */
static void pool_f32_plane(const pool_state_t *st, const float *x, float *y) {
  const int64_t D = st->in[0], H = st->in[1], W = st->in[2];
  const int64_t OD = st->out[0], OH = st->out[1], OW = st->out[2];
  const int64_t sw = st->s[2], kwn = st->k[2], dw = st->d[2], pl = st->pb[2];
  const int is_max = st->kind == POOL_MAX;
  for (int64_t od = 0; od < OD; od++) {
    int64_t a0 = od * st->s[0] - st->pb[0];
    for (int64_t oh = 0; oh < OH; oh++) {
      int64_t a1 = oh * st->s[1] - st->pb[1];
      float *yr = y + (od * OH + oh) * OW;
      float init = is_max ? -INFINITY : 0.f;
      for (int64_t ow = 0; ow < OW; ow++) yr[ow] = init;
      /* only the taps that reach the input (for some ow, along W) */
      int64_t k0a, k0b, k1a, k1b, kwa, kwb;
      pool_tap_range(a0, st->k[0], st->d[0], 0, D, &k0a, &k0b);
      pool_tap_range(a1, st->k[1], st->d[1], 0, H, &k1a, &k1b);
      pool_tap_range(-pl, kwn, dw, -(OW - 1) * sw, W, &kwa, &kwb);
      for (int64_t k0 = k0a; k0 < k0b; k0++) {
        int64_t id = a0 + k0 * st->d[0];
        if (id < 0 || id >= D) continue;
        for (int64_t k1 = k1a; k1 < k1b; k1++) {
          int64_t ih = a1 + k1 * st->d[1];
          if (ih < 0 || ih >= H) continue;
          const float *xr = x + (id * H + ih) * W;
          for (int64_t kw = kwa; kw < kwb; kw++) {
            int64_t off = kw * dw - pl; /* iw = ow * sw + off */
            int64_t lo = off >= 0 ? 0 : (-off + sw - 1) / sw;
            int64_t hi = W - 1 - off < 0 ? 0 : (W - 1 - off) / sw + 1;
            if (hi > OW) hi = OW;
            const float *xp = xr + off;
            if (is_max) {
              if (sw == 1) {
#pragma omp simd
                for (int64_t ow = lo; ow < hi; ow++) yr[ow] = xp[ow] > yr[ow] || xp[ow] != xp[ow] ? xp[ow] : yr[ow];
              } else {
#pragma omp simd
                for (int64_t ow = lo; ow < hi; ow++)
                  yr[ow] = xp[ow * sw] > yr[ow] || xp[ow * sw] != xp[ow * sw] ? xp[ow * sw] : yr[ow];
              }
            } else {
              if (sw == 1) {
                for (int64_t ow = lo; ow < hi; ow++) yr[ow] += xp[ow];
              } else {
                for (int64_t ow = lo; ow < hi; ow++) yr[ow] += xp[ow * sw];
              }
            }
          }
        }
      }
      if (!is_max) {
        float f = st->inv[0][od] * st->inv[1][oh];
        const float *iw = st->inv[2];
        for (int64_t ow = 0; ow < OW; ow++) yr[ow] *= f * iw[ow];
      }
    }
  }
}

/* MaxPool of one uint8 or int8 plane, the loops of pool_f32_plane: the integers compared as they are (exact, no
 * NaN), where the double path converted every plane there and back (the integer MaxPool of a QDQ graph,
 * graph/fuse.c int8_elementwise, on a CPU whose convolutions before it are float). */
#define POOL_MAX_INT_PLANE(NAME, T, LOWEST)                                                                   \
  static void NAME(const pool_state_t *st, const T *x, T *y) {                                                \
    const int64_t D = st->in[0], H = st->in[1], W = st->in[2];                                                 \
    const int64_t OD = st->out[0], OH = st->out[1], OW = st->out[2];                                           \
    const int64_t sw = st->s[2], kwn = st->k[2], dw = st->d[2], pl = st->pb[2];                                \
    for (int64_t od = 0; od < OD; od++) {                                                                      \
      int64_t a0 = od * st->s[0] - st->pb[0];                                                                  \
      for (int64_t oh = 0; oh < OH; oh++) {                                                                    \
        int64_t a1 = oh * st->s[1] - st->pb[1];                                                                \
        T *yr = y + (od * OH + oh) * OW;                                                                       \
        for (int64_t ow = 0; ow < OW; ow++) yr[ow] = (LOWEST);                                                 \
        int64_t k0a, k0b, k1a, k1b, kwa, kwb;                                                                  \
        pool_tap_range(a0, st->k[0], st->d[0], 0, D, &k0a, &k0b);                                              \
        pool_tap_range(a1, st->k[1], st->d[1], 0, H, &k1a, &k1b);                                              \
        pool_tap_range(-pl, kwn, dw, -(OW - 1) * sw, W, &kwa, &kwb);                                           \
        for (int64_t k0 = k0a; k0 < k0b; k0++) {                                                               \
          int64_t id = a0 + k0 * st->d[0];                                                                     \
          for (int64_t k1 = k1a; k1 < k1b; k1++) {                                                             \
            int64_t ih = a1 + k1 * st->d[1];                                                                   \
            const T *xr = x + (id * H + ih) * W;                                                               \
            for (int64_t kw = kwa; kw < kwb; kw++) {                                                           \
              int64_t off = kw * dw - pl;                                                                      \
              int64_t lo = off >= 0 ? 0 : (-off + sw - 1) / sw;                                                \
              int64_t hi = W - 1 - off < 0 ? 0 : (W - 1 - off) / sw + 1;                                       \
              if (hi > OW) hi = OW;                                                                            \
              const T *xp = xr + off;                                                                          \
              if (sw == 1) {                                                                                   \
                for (int64_t ow = lo; ow < hi; ow++) yr[ow] = xp[ow] > yr[ow] ? xp[ow] : yr[ow];               \
              } else {                                                                                         \
                for (int64_t ow = lo; ow < hi; ow++) yr[ow] = xp[ow * sw] > yr[ow] ? xp[ow * sw] : yr[ow];     \
              }                                                                                                \
            }                                                                                                  \
          }                                                                                                    \
        }                                                                                                      \
      }                                                                                                        \
    }                                                                                                          \
  }
POOL_MAX_INT_PLANE(pool_max_u8_plane, uint8_t, 0)
POOL_MAX_INT_PLANE(pool_max_s8_plane, int8_t, -128)
#undef POOL_MAX_INT_PLANE

/* The integer MaxPool over all planes. */
static toplu_status_t pool_run_int(toplu__kernel_ctx_t *ctx, const pool_state_t *st) {
  int64_t isz = st->in[0] * st->in[1] * st->in[2], osz = st->out[0] * st->out[1] * st->out[2];
  int64_t nc = st->nc;
  int nt = ctx->threads > 1 && nc > 1 && nc * isz >= 32768 ? ctx->threads : 1;
  int u8 = ctx->in[0].dtype == TOPLU_DTYPE_UINT8;
  const unsigned char *x = ctx->in[0].data;
  unsigned char *y = ctx->out[0].data;
  (void)nt; /* read only by OpenMP pragmas */
#pragma omp parallel for num_threads(nt) if (nt > 1) schedule(static)
  for (int64_t c = 0; c < nc; c++) {
    if (u8) pool_max_u8_plane(st, x + c * isz, y + c * osz);
    else pool_max_s8_plane(st, (const int8_t *)x + c * isz, (int8_t *)y + c * osz);
  }
  return TOPLU_OK;
}

/* Float fast path over all planes. */
static toplu_status_t pool_run_f32(toplu__kernel_ctx_t *ctx, const pool_state_t *st) {
  int64_t isz = st->in[0] * st->in[1] * st->in[2], osz = st->out[0] * st->out[1] * st->out[2];
  int64_t nc = st->nc;
  int nt = ctx->threads > 1 && nc > 1 && nc * isz >= 32768 ? ctx->threads : 1;
  const float *x = ctx->in[0].data;
  float *y = ctx->out[0].data;
  (void)nt; /* read only by OpenMP pragmas */
#pragma omp parallel for num_threads(nt) if (nt > 1) schedule(static)
  for (int64_t c = 0; c < nc; c++) pool_f32_plane(st, x + c * isz, y + c * osz);
  return TOPLU_OK;
}

/* C path: planes converted to double in the workspace, one per thread. */
static toplu_status_t pool_run_loops(toplu__kernel_ctx_t *ctx, const pool_state_t *st) {
  const toplu_tensor_t *x = &ctx->in[0];
  toplu_tensor_t *y = &ctx->out[0];
  int64_t *ind = ctx->n_out > 1 ? ctx->out[1].data : NULL;
  toplu_dtype_t dt = x->dtype;
  size_t es = toplu_dtype_size(dt);
  int64_t isz = st->in[0] * st->in[1] * st->in[2], osz = st->out[0] * st->out[1] * st->out[2];
  int64_t nc = st->nc, work = nc * isz;
  int nt = ctx->threads < 1 ? 1 : ctx->threads;
  if (nt > nc) nt = (int)(nc > 0 ? nc : 1);
  if (work < 32768) nt = 1;
  double lowest = pool_lowest(dt);
  const unsigned char *xb = x->data;
  unsigned char *yb = y->data;
  double *wsbase = ctx->workspace;
#pragma omp parallel num_threads(nt) if (nt > 1)
  {
    double *xp = wsbase + (size_t)omp_get_thread_num() * (size_t)(isz + osz), *yp = xp + isz;
#pragma omp for schedule(static)
    for (int64_t c = 0; c < nc; c++) {
      pool_to_double(xp, xb + (size_t)(c * isz) * es, dt, isz);
      pool_plane(st, xp, yp, ind ? ind + c * osz : NULL, c * isz, lowest);
      pool_from_double(yb + (size_t)(c * osz) * es, yp, dt, osz);
    }
  }
  return TOPLU_OK;
}

/* ---- MaxPool / AveragePool / LpPool ---- */

static void release_pool(toplu__kernel_ctx_t *ctx);

/* Shared prepare: geometry, attributes, oneDNN primitive or loop scratch. */
static toplu_status_t pool_prepare_state(toplu__kernel_ctx_t *ctx, toplu__kernel_info_t *info, pool_kind_t kind) {
  const toplu_tensor_t *x = &ctx->in[0];
  toplu_dtype_t dt = x->dtype;
  if (dt != TOPLU_DTYPE_FLOAT && dt != TOPLU_DTYPE_DOUBLE && dt != TOPLU_DTYPE_FLOAT16 &&
      !(kind == POOL_MAX && (dt == TOPLU_DTYPE_INT8 || dt == TOPLU_DTYPE_UINT8)))
    return toplu__kernel_error(ctx, TOPLU_ERR_UNSUPPORTED, "%s on %s tensors is not supported", ctx->node->op_type,
                              toplu_dtype_name(dt));
  int64_t nout = 0;
  for (int i = 2; i < x->ndim; i++) nout += ctx->out[0].dims[i];
  size_t bytes = sizeof(pool_state_t) + (size_t)(nout + POOL_SP) * sizeof(float);
  pool_state_t *st = toplu__kernel_alloc(ctx, bytes);
  if (!st) return toplu__kernel_error(ctx, TOPLU_ERR_OUT_OF_MEMORY, "out of memory preparing pooling");
  memset(st, 0, bytes);
  ctx->state = st;
  st->kind = kind;
  toplu_status_t e = pool_geometry(ctx, st);
  if (e) return e;
  st->count_include_pad = (int)toplu__node_attr_int(ctx->node, "count_include_pad", 0);
  st->storage_order = (int)toplu__node_attr_int(ctx->node, "storage_order", 0);
  st->p = 2.0;
  const toplu__attr_t *pa = toplu__node_attr(ctx->node, "p");
  if (pa) st->p = pa->type == TOPLU_ATTR_FLOAT ? (double)pa->f : (double)pa->i;
  if (kind == POOL_LP && !(st->p > 0))
    return toplu__kernel_error(ctx, TOPLU_ERR_INVALID_MODEL, "LpPool p = %g must be positive", st->p);
  int want_idx = kind == POOL_MAX && ctx->n_out > 1 && ctx->out[1].ndim >= 0;
  st->fast = x->dtype == TOPLU_DTYPE_FLOAT && kind != POOL_LP && !want_idx;
  if (st->fast) {
    float *f = (float *)(st + 1);
    for (int j = 0; j < POOL_SP; j++) {
      st->inv[j] = f;
      for (int64_t o = 0; o < st->out[j]; o++) {
        int64_t a = o * st->s[j] - st->pb[j];
        int64_t c = st->count_include_pad ? pool_taps_in(a, st->k[j], st->d[j], -st->pb[j], st->in[j] + st->pe[j])
                                          : pool_taps_in(a, st->k[j], st->d[j], 0, st->in[j]);
        f[o] = c ? 1.f / (float)c : 0.f;
      }
      f += st->out[j];
    }
  }
  st->fast_int = kind == POOL_MAX && !want_idx && (x->dtype == TOPLU_DTYPE_UINT8 || x->dtype == TOPLU_DTYPE_INT8);
  if ((e = pool_try_dnnl(ctx, st, info))) return e;
  if (st->dp.prim) st->fast = 0;
  if (!st->dp.prim && !st->fast && !st->fast_int) {
    int64_t isz = st->in[0] * st->in[1] * st->in[2], osz = st->out[0] * st->out[1] * st->out[2];
    int nt = ctx->threads < 1 ? 1 : ctx->threads;
    info->workspace_bytes = (size_t)nt * (size_t)(isz + osz) * sizeof(double);
  }
  info->state_bytes = bytes;
  return TOPLU_OK;
}

/* pool_prepare_state, freeing the state when it fails (folding calls no
 * release after a failed prepare). */
static toplu_status_t pool_prepare(toplu__kernel_ctx_t *ctx, toplu__kernel_info_t *info, pool_kind_t kind) {
  toplu_status_t e = pool_prepare_state(ctx, info, kind);
  if (e) release_pool(ctx);
  return e;
}

/* MaxPool prepare. */
static toplu_status_t prepare_maxpool(toplu__kernel_ctx_t *ctx, toplu__kernel_info_t *info) {
  return pool_prepare(ctx, info, POOL_MAX);
}

/* AveragePool prepare. */
static toplu_status_t prepare_avgpool(toplu__kernel_ctx_t *ctx, toplu__kernel_info_t *info) {
  return pool_prepare(ctx, info, POOL_AVG);
}

/* LpPool prepare. */
static toplu_status_t prepare_lppool(toplu__kernel_ctx_t *ctx, toplu__kernel_info_t *info) {
  return pool_prepare(ctx, info, POOL_LP);
}

/* Run a windowed pool: oneDNN when prepared, else the loops. */
static toplu_status_t run_pool(toplu__kernel_ctx_t *ctx) {
  const pool_state_t *st = ctx->state;
  if (st->nc == 0) return TOPLU_OK;
  if (st->fast) return pool_run_f32(ctx, st);
  if (st->fast_int) return pool_run_int(ctx, st);
  if (!st->dp.prim) return pool_run_loops(ctx, st);
  if (!ctx->exec_state) return toplu__kernel_error(ctx, TOPLU_ERR_INTERNAL, "pooling run without bind");
  return toplu__dnnl_prim_execute(ctx, &st->dp, ctx->exec_state);
}

/* Free the primitive and state. */
static void release_pool(toplu__kernel_ctx_t *ctx) {
  pool_state_t *st = ctx->state;
  if (!st) return;
  toplu__dnnl_prim_destroy(&st->dp);
  toplu__kernel_free(ctx, st);
  ctx->state = NULL;
}

/* ---- global pools ---- */

/* Global pools: one value per (n, c) plane. */
static toplu_status_t run_global(toplu__kernel_ctx_t *ctx, pool_kind_t kind) {
  const toplu_tensor_t *x = &ctx->in[0];
  toplu_dtype_t dt = x->dtype;
  int64_t nc = x->dims[0] * x->dims[1], hw = 1;
  for (int i = 2; i < x->ndim; i++) hw *= x->dims[i];
  int nt = ctx->threads < 1 ? 1 : ctx->threads;
  int par = nc * hw >= 32768 && nt > 1 && nc > 1;
  double p = 2.0;
  const toplu__attr_t *pa = toplu__node_attr(ctx->node, "p");
  if (pa) p = pa->type == TOPLU_ATTR_FLOAT ? (double)pa->f : (double)pa->i;
  if (hw == 0 || nc == 0) {
    if (nc) {
      double *z = ctx->workspace;
      for (int64_t c = 0; c < nc; c++) z[c] = kind == POOL_MAX ? pool_lowest(dt) : 0.0;
      pool_from_double(ctx->out[0].data, z, dt, nc);
    }
    return TOPLU_OK;
  }
  if (dt == TOPLU_DTYPE_FLOAT && kind != POOL_LP) {
    const float *xp = x->data;
    float *yp = ctx->out[0].data;
    float inv = 1.0f / (float)hw;
    if (kind == POOL_AVG) {
#pragma omp parallel for num_threads(nt) if (par) schedule(static)
      for (int64_t c = 0; c < nc; c++) yp[c] = toplu__row_sum(xp + c * hw, hw) * inv;
    } else {
#pragma omp parallel for num_threads(nt) if (par) schedule(static)
      for (int64_t c = 0; c < nc; c++) yp[c] = toplu__row_max(xp + c * hw, hw);
    }
    return TOPLU_OK;
  }
  /* Other dtypes and Lp: per plane in double (workspace: nt planes + nc outputs). */
  size_t es = toplu_dtype_size(dt);
  double *res = ctx->workspace, *planes = res + nc;
  const unsigned char *xb = x->data;
  if (!par) nt = 1;
#pragma omp parallel num_threads(nt) if (par)
  {
    double *buf = planes + (size_t)omp_get_thread_num() * (size_t)hw;
#pragma omp for schedule(static)
    for (int64_t c = 0; c < nc; c++) {
      pool_to_double(buf, xb + (size_t)(c * hw) * es, dt, hw);
      double a = kind == POOL_MAX ? buf[0] : 0.0;
      for (int64_t i = 0; i < hw; i++) {
        if (kind == POOL_MAX) a = buf[i] > a ? buf[i] : a;
        else if (kind == POOL_AVG) a += buf[i];
        else a += p == 2.0 ? buf[i] * buf[i] : pow(fabs(buf[i]), p);
      }
      res[c] = kind == POOL_AVG ? a / (double)hw : kind == POOL_LP ? pow(a, 1.0 / p) : a;
    }
  }
  pool_from_double(ctx->out[0].data, res, dt, nc);
  return TOPLU_OK;
}

/* Global pools' scratch: only the non-float and Lp paths use any. */
static toplu_status_t prepare_global(toplu__kernel_ctx_t *ctx, toplu__kernel_info_t *info) {
  const toplu_tensor_t *x = &ctx->in[0];
  toplu_dtype_t dt = x->dtype;
  if (dt != TOPLU_DTYPE_FLOAT && dt != TOPLU_DTYPE_DOUBLE && dt != TOPLU_DTYPE_FLOAT16)
    return toplu__kernel_error(ctx, TOPLU_ERR_UNSUPPORTED, "%s on %s tensors is not supported", ctx->node->op_type,
                              toplu_dtype_name(dt));
  if (x->ndim < 3) return toplu__kernel_error(ctx, TOPLU_ERR_SHAPE, "input X has rank %d, expected >= 3", x->ndim);
  int64_t nc = x->dims[0] * x->dims[1], hw = 1;
  for (int i = 2; i < x->ndim; i++) hw *= x->dims[i];
  int nt = ctx->threads < 1 ? 1 : ctx->threads;
  int fast = dt == TOPLU_DTYPE_FLOAT && strcmp(ctx->node->op_type, "GlobalLpPool") != 0;
  info->workspace_bytes = (size_t)(nc + (fast ? 0 : (int64_t)nt * hw)) * sizeof(double);
  return TOPLU_OK;
}

/* GlobalAveragePool: mean over the spatial dims. */
static toplu_status_t run_gap(toplu__kernel_ctx_t *ctx) { return run_global(ctx, POOL_AVG); }
/* GlobalMaxPool: max over the spatial dims. */
static toplu_status_t run_gmp(toplu__kernel_ctx_t *ctx) { return run_global(ctx, POOL_MAX); }
/* GlobalLpPool: (sum |x|^p)^(1/p) over the spatial dims. */
static toplu_status_t run_glp(toplu__kernel_ctx_t *ctx) { return run_global(ctx, POOL_LP); }

const toplu__kernel_t toplu__kernels_pool[] = {
    {"MaxPool", "", prepare_maxpool, run_pool, release_pool, 0, bind_pool, unbind_pool, NULL},
    {"AveragePool", "", prepare_avgpool, run_pool, release_pool, 0, bind_pool, unbind_pool, NULL},
    {"LpPool", "", prepare_lppool, run_pool, release_pool, 0, bind_pool, unbind_pool, NULL},
    {"GlobalAveragePool", "", prepare_global, run_gap, NULL, 0, NULL, NULL, NULL},
    {"GlobalMaxPool", "", prepare_global, run_gmp, NULL, 0, NULL, NULL, NULL},
    {"GlobalLpPool", "", prepare_global, run_glp, NULL, 0, NULL, NULL, NULL},
    {NULL, NULL, NULL, NULL, NULL, 0, NULL, NULL, NULL},
};
