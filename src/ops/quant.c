/*
 * ops/quant.c - linear quantization kernels:
 *   QuantizeLinear-10/13/19/21   y = saturate(round_half_even(x / y_scale) + y_zero_point)
 *   DequantizeLinear-10/13/19/21 y = (x - x_zero_point) * x_scale
 *   DynamicQuantizeLinear-11     uint8 with scale and zero point from x's range
 *   toplu.QuantizeDequantizeLinear  a Q->DQ pair in one pass (float to float)
 * Per tensor (scalar scale) or per axis (1-D scale along `axis`, opset 13).
 * Scales and zero points are read at run time, so they need not be constants.
 *
 * Quantizing rounds with the float trick (v + 1.5*2^23) - 1.5*2^23, which
 * rounds half to even in the default rounding mode for |v| < 2^22; v is first
 * clamped to [qmin - zp, qmax - zp], so the loops are branch-free and the
 * compiler vectorises them.  NaN clamps to qmin - zp.
 */
#include <math.h>
#include <string.h>

#include "graph/schema.h"
#include "ops/dynquant.h"
#include "ops/kernel.h"

#define QUANT_BLOCK 16384           /* elements per parallel chunk */
#define QUANT_PARALLEL_MIN 131072   /* fewer elements run on one thread */
#define ROUND_MAGIC 12582912.0f     /* 1.5 * 2^23 */

/* Round half to even for |v| < 2^22 (v already clamped). */
static inline float round_even(float v) { return (v + ROUND_MAGIC) - ROUND_MAGIC; }

/* Smallest and largest value of an integer type. */
static void int_range(toplu_dtype_t t, float *lo, float *hi) {
  switch (t) {
    case TOPLU_DTYPE_INT8: *lo = -128.0f, *hi = 127.0f; break;
    case TOPLU_DTYPE_UINT16: *lo = 0.0f, *hi = 65535.0f; break;
    case TOPLU_DTYPE_INT16: *lo = -32768.0f, *hi = 32767.0f; break;
    default: *lo = 0.0f, *hi = 255.0f; break;
  }
}

/* Quantize n floats with one scale and zero point into type T. */
#define DEFINE_QUANT(NAME, T)                                                                          \
  static void NAME(const float *restrict x, T *restrict y, int64_t n, float s, float zp, float lo,     \
                   float hi) {                                                                         \
    float l = lo - zp, h = hi - zp;                                                                    \
    for (int64_t i = 0; i < n; i++) {                                                                  \
      float v = x[i] / s;                                                                              \
      v = v >= l ? v : l;                                                                              \
      v = v <= h ? v : h;                                                                              \
      v = (v + ROUND_MAGIC) - ROUND_MAGIC;                                                             \
      y[i] = (T)(int32_t)(v + zp);                                                                     \
    }                                                                                                  \
  }                                                                                                    \
  /* Quantize n floats with per-element scales and zero points (axis innermost). */                   \
  static void NAME##_vec(const float *restrict x, T *restrict y, int64_t n, const float *restrict s,  \
                         const float *restrict zp, float lo, float hi) {                              \
    for (int64_t i = 0; i < n; i++) {                                                                  \
      float v = x[i] / s[i], l = lo - zp[i], h = hi - zp[i];                                           \
      v = v >= l ? v : l;                                                                              \
      v = v <= h ? v : h;                                                                              \
      v = (v + ROUND_MAGIC) - ROUND_MAGIC;                                                             \
      y[i] = (T)(int32_t)(v + zp[i]);                                                                  \
    }                                                                                                  \
  }
DEFINE_QUANT(quant_u8, uint8_t)
DEFINE_QUANT(quant_i8, int8_t)
DEFINE_QUANT(quant_u16, uint16_t)
DEFINE_QUANT(quant_i16, int16_t)

/* Dequantize n integers with one scale and zero point. */
#define DEFINE_DEQUANT(NAME, T)                                                                        \
  static void NAME(const T *restrict x, float *restrict y, int64_t n, float s, int32_t zp) {           \
    for (int64_t i = 0; i < n; i++) y[i] = (float)((int32_t)x[i] - zp) * s;                            \
  }                                                                                                    \
  /* Dequantize n integers with per-element scales and zero points (axis innermost). */               \
  static void NAME##_vec(const T *restrict x, float *restrict y, int64_t n, const float *restrict s,  \
                         const int32_t *restrict zp) {                                                 \
    for (int64_t i = 0; i < n; i++) y[i] = (float)((int32_t)x[i] - zp[i]) * s[i];                      \
  }
DEFINE_DEQUANT(dequant_u8, uint8_t)
DEFINE_DEQUANT(dequant_i8, int8_t)
DEFINE_DEQUANT(dequant_u16, uint16_t)
DEFINE_DEQUANT(dequant_i16, int16_t)

/* int32 (biases): the difference is taken in 64 bits so it cannot overflow. */
static void dequant_i32(const int32_t *restrict x, float *restrict y, int64_t n, float s, int32_t zp) {
  if (zp == 0) {
    for (int64_t i = 0; i < n; i++) y[i] = (float)x[i] * s;
  } else {
    for (int64_t i = 0; i < n; i++) y[i] = (float)((int64_t)x[i] - zp) * s;
  }
}

/* int32 with per-element scales. */
static void dequant_i32_vec(const int32_t *restrict x, float *restrict y, int64_t n, const float *restrict s,
                            const int32_t *restrict zp) {
  for (int64_t i = 0; i < n; i++) y[i] = (float)((int64_t)x[i] - zp[i]) * s[i];
}

/* Per-axis layout: outer blocks of `ch` channels of `inner` elements. */
typedef struct quant_layout {
  int64_t n, outer, ch, inner;
  int per_axis;
} quant_layout_t;

/* Find the layout from x and the scale; the schema already checked shapes. */
static toplu_status_t quant_layout(toplu__kernel_ctx_t *ctx, quant_layout_t *q) {
  const toplu_tensor_t *x = &ctx->in[0], *s = &ctx->in[1];
  q->n = toplu_tensor_numel(x);
  q->outer = 1, q->ch = 1, q->inner = q->n;
  q->per_axis = 0;
  if (s->dtype != TOPLU_DTYPE_FLOAT)
    return toplu__kernel_error(ctx, TOPLU_ERR_UNSUPPORTED, "scale is %s; toplu supports float32",
                              toplu_dtype_name(s->dtype));
  if (toplu_tensor_numel(s) == 1 && s->ndim <= 1) return TOPLU_OK;
  int64_t axis = toplu__node_attr_int(ctx->node, "axis", 1);
  if (axis < 0) axis += x->ndim;
  if (axis < 0 || axis >= x->ndim || s->ndim != 1 || s->dims[0] != x->dims[axis])
    return toplu__kernel_error(ctx, TOPLU_ERR_SHAPE, "scale of %lld elements does not fit x along axis %lld",
                              (long long)toplu_tensor_numel(s), (long long)axis);
  q->per_axis = 1;
  q->ch = x->dims[axis];
  q->outer = 1;
  for (int64_t k = 0; k < axis; k++) q->outer *= x->dims[k];
  q->inner = 1;
  for (int64_t k = axis + 1; k < x->ndim; k++) q->inner *= x->dims[k];
  return TOPLU_OK;
}

/* Integer inputs read as int32 (zero points). */
static int32_t zp_at(const toplu_tensor_t *z, int64_t k) {
  return z && z->data ? (int32_t)toplu__tensor_get_int(z, k) : 0;
}

/* Check dtypes and shapes once at plan time; per-axis runs with the axis
 * innermost need per-element scale rows in the workspace. */
static toplu_status_t prepare_quant(toplu__kernel_ctx_t *ctx, toplu__kernel_info_t *info) {
  quant_layout_t q;
  toplu_status_t st = quant_layout(ctx, &q);
  if (st) return st;
  int quantize = ctx->node->op_type[0] == 'Q';
  if (quantize && ctx->in[0].dtype != TOPLU_DTYPE_FLOAT)
    return toplu__kernel_error(ctx, TOPLU_ERR_UNSUPPORTED, "x is %s; toplu quantizes float32",
                              toplu_dtype_name(ctx->in[0].dtype));
  if (!quantize && ctx->out[0].dtype != TOPLU_DTYPE_FLOAT)
    return toplu__kernel_error(ctx, TOPLU_ERR_UNSUPPORTED, "y is %s; toplu dequantizes to float32",
                              toplu_dtype_name(ctx->out[0].dtype));
  if (q.per_axis && q.inner == 1) info->workspace_bytes = (size_t)q.ch * 2 * sizeof(float);
  return TOPLU_OK;
}

/* Quantize one contiguous run with one scale. */
static void quant_run(toplu_dtype_t t, const float *x, void *y, int64_t off, int64_t n, float s, float zp) {
  float lo, hi;
  int_range(t, &lo, &hi);
  switch (t) {
    case TOPLU_DTYPE_INT8: quant_i8(x + off, (int8_t *)y + off, n, s, zp, lo, hi); break;
    case TOPLU_DTYPE_UINT16: quant_u16(x + off, (uint16_t *)y + off, n, s, zp, lo, hi); break;
    case TOPLU_DTYPE_INT16: quant_i16(x + off, (int16_t *)y + off, n, s, zp, lo, hi); break;
    default: quant_u8(x + off, (uint8_t *)y + off, n, s, zp, lo, hi); break;
  }
}

/* Quantize one contiguous run with per-element scales. */
static void quant_run_vec(toplu_dtype_t t, const float *x, void *y, int64_t off, int64_t n, const float *s,
                          const float *zp) {
  float lo, hi;
  int_range(t, &lo, &hi);
  switch (t) {
    case TOPLU_DTYPE_INT8: quant_i8_vec(x + off, (int8_t *)y + off, n, s, zp, lo, hi); break;
    case TOPLU_DTYPE_UINT16: quant_u16_vec(x + off, (uint16_t *)y + off, n, s, zp, lo, hi); break;
    case TOPLU_DTYPE_INT16: quant_i16_vec(x + off, (int16_t *)y + off, n, s, zp, lo, hi); break;
    default: quant_u8_vec(x + off, (uint8_t *)y + off, n, s, zp, lo, hi); break;
  }
}

/* QuantizeLinear. */
static toplu_status_t run_quantize(toplu__kernel_ctx_t *ctx) {
  quant_layout_t q;
  toplu_status_t st = quant_layout(ctx, &q);
  if (st) return st;
  const float *x = ctx->in[0].data, *s = ctx->in[1].data;
  const toplu_tensor_t *z = ctx->n_in > 2 && ctx->in[2].data ? &ctx->in[2] : NULL;
  void *y = ctx->out[0].data;
  toplu_dtype_t t = ctx->out[0].dtype;
  if (q.n == 0) return TOPLU_OK;
  if (!q.per_axis) {
    float sc = s[0], zp = (float)zp_at(z, 0);
    int64_t nb = (q.n + QUANT_BLOCK - 1) / QUANT_BLOCK;
#pragma omp parallel for num_threads(ctx->threads) schedule(static) if (q.n >= QUANT_PARALLEL_MIN)
    for (int64_t b = 0; b < nb; b++) {
      int64_t off = b * QUANT_BLOCK, len = q.n - off < QUANT_BLOCK ? q.n - off : QUANT_BLOCK;
      quant_run(t, x, y, off, len, sc, zp);
    }
    return TOPLU_OK;
  }
  if (q.inner == 1) { /* axis innermost: per-element scale rows */
    float *ss = ctx->workspace, *zz = ss + q.ch;
    for (int64_t c = 0; c < q.ch; c++) ss[c] = s[c], zz[c] = (float)zp_at(z, c);
#pragma omp parallel for num_threads(ctx->threads) schedule(static) if (q.n >= QUANT_PARALLEL_MIN)
    for (int64_t o = 0; o < q.outer; o++) quant_run_vec(t, x, y, o * q.ch, q.ch, ss, zz);
    return TOPLU_OK;
  }
  int64_t rows = q.outer * q.ch;
#pragma omp parallel for num_threads(ctx->threads) schedule(static) if (q.n >= QUANT_PARALLEL_MIN)
  for (int64_t r = 0; r < rows; r++) {
    int64_t c = r % q.ch;
    quant_run(t, x, y, r * q.inner, q.inner, s[c], (float)zp_at(z, c));
  }
  return TOPLU_OK;
}

/* Dequantize one contiguous run with one scale. */
static void dequant_run(toplu_dtype_t t, const void *x, float *y, int64_t off, int64_t n, float s, int32_t zp) {
  switch (t) {
    case TOPLU_DTYPE_INT8: dequant_i8((const int8_t *)x + off, y + off, n, s, zp); break;
    case TOPLU_DTYPE_UINT16: dequant_u16((const uint16_t *)x + off, y + off, n, s, zp); break;
    case TOPLU_DTYPE_INT16: dequant_i16((const int16_t *)x + off, y + off, n, s, zp); break;
    case TOPLU_DTYPE_INT32: dequant_i32((const int32_t *)x + off, y + off, n, s, zp); break;
    default: dequant_u8((const uint8_t *)x + off, y + off, n, s, zp); break;
  }
}

/* Dequantize one contiguous run with per-element scales. */
static void dequant_run_vec(toplu_dtype_t t, const void *x, float *y, int64_t off, int64_t n, const float *s,
                            const int32_t *zp) {
  switch (t) {
    case TOPLU_DTYPE_INT8: dequant_i8_vec((const int8_t *)x + off, y + off, n, s, zp); break;
    case TOPLU_DTYPE_UINT16: dequant_u16_vec((const uint16_t *)x + off, y + off, n, s, zp); break;
    case TOPLU_DTYPE_INT16: dequant_i16_vec((const int16_t *)x + off, y + off, n, s, zp); break;
    case TOPLU_DTYPE_INT32: dequant_i32_vec((const int32_t *)x + off, y + off, n, s, zp); break;
    default: dequant_u8_vec((const uint8_t *)x + off, y + off, n, s, zp); break;
  }
}

/* DequantizeLinear. */
static toplu_status_t run_dequantize(toplu__kernel_ctx_t *ctx) {
  quant_layout_t q;
  toplu_status_t st = quant_layout(ctx, &q);
  if (st) return st;
  const void *x = ctx->in[0].data;
  const float *s = ctx->in[1].data;
  const toplu_tensor_t *z = ctx->n_in > 2 && ctx->in[2].data ? &ctx->in[2] : NULL;
  float *y = ctx->out[0].data;
  toplu_dtype_t t = ctx->in[0].dtype;
  if (q.n == 0) return TOPLU_OK;
  if (!q.per_axis) {
    float sc = s[0];
    int32_t zp = zp_at(z, 0);
    int64_t nb = (q.n + QUANT_BLOCK - 1) / QUANT_BLOCK;
#pragma omp parallel for num_threads(ctx->threads) schedule(static) if (q.n >= QUANT_PARALLEL_MIN)
    for (int64_t b = 0; b < nb; b++) {
      int64_t off = b * QUANT_BLOCK, len = q.n - off < QUANT_BLOCK ? q.n - off : QUANT_BLOCK;
      dequant_run(t, x, y, off, len, sc, zp);
    }
    return TOPLU_OK;
  }
  if (q.inner == 1) {
    float *ss = ctx->workspace;
    int32_t *zz = (int32_t *)(ss + q.ch);
    for (int64_t c = 0; c < q.ch; c++) ss[c] = s[c], zz[c] = zp_at(z, c);
#pragma omp parallel for num_threads(ctx->threads) schedule(static) if (q.n >= QUANT_PARALLEL_MIN)
    for (int64_t o = 0; o < q.outer; o++) dequant_run_vec(t, x, y, o * q.ch, q.ch, ss, zz);
    return TOPLU_OK;
  }
  int64_t rows = q.outer * q.ch;
#pragma omp parallel for num_threads(ctx->threads) schedule(static) if (q.n >= QUANT_PARALLEL_MIN)
  for (int64_t r = 0; r < rows; r++) {
    int64_t c = r % q.ch;
    dequant_run(t, x, y, r * q.inner, q.inner, s[c], zp_at(z, c));
  }
  return TOPLU_OK;
}

/* One pass of QuantizeLinear then DequantizeLinear with the same scale and
 * zero point: y = s * clamp(round_half_even(x / s), lo - zp, hi - zp), equal
 * to the pair bit for bit.  x and y may be one buffer (in place), so each
 * loop has an in-place copy whose single restrict pointer stays valid. */
#define FAKE_QUANT_LOOP(SRC, DST, S, L, H)                  \
  for (int64_t i = 0; i < n; i++) {                          \
    float v = (SRC)[i] / (S), l_ = (L), h_ = (H);            \
    v = v >= l_ ? v : l_;                                    \
    v = v <= h_ ? v : h_;                                    \
    (DST)[i] = ((v + ROUND_MAGIC) - ROUND_MAGIC) * (S);      \
  }
static void fake_quant(const float *x, float *y, int64_t n, float s, float zp, float lo, float hi) {
  float l = lo - zp, h = hi - zp;
  if (x == y) {
    float *restrict p = y;
    FAKE_QUANT_LOOP(p, p, s, l, h)
  } else {
    const float *restrict a = x;
    float *restrict b = y;
    FAKE_QUANT_LOOP(a, b, s, l, h)
  }
}

/* fake_quant with per-element scales and zero points (axis innermost). */
static void fake_quant_vec(const float *x, float *y, int64_t n, const float *restrict s, const float *restrict zp,
                           float lo, float hi) {
  if (x == y) {
    float *restrict p = y;
    FAKE_QUANT_LOOP(p, p, s[i], lo - zp[i], hi - zp[i])
  } else {
    const float *restrict a = x;
    float *restrict b = y;
    FAKE_QUANT_LOOP(a, b, s[i], lo - zp[i], hi - zp[i])
  }
}

/* QuantizeDequantizeLinear (domain "toplu"): a QuantizeLinear->DequantizeLinear
 * pair fused by the graph; inputs x, scale, zero point (its type gives the
 * integer range, uint8 when absent), attribute axis as QuantizeLinear-13. */
static toplu_status_t run_fake_quant(toplu__kernel_ctx_t *ctx) {
  quant_layout_t q;
  toplu_status_t st = quant_layout(ctx, &q);
  if (st) return st;
  const float *x = ctx->in[0].data, *s = ctx->in[1].data;
  const toplu_tensor_t *z = ctx->n_in > 2 && ctx->in[2].data ? &ctx->in[2] : NULL;
  float *y = ctx->out[0].data, lo, hi;
  int_range(z ? z->dtype : TOPLU_DTYPE_UINT8, &lo, &hi);
  if (!q.per_axis) {
    float sc = s[0], zp = (float)zp_at(z, 0);
    int64_t nb = (q.n + QUANT_BLOCK - 1) / QUANT_BLOCK;
#pragma omp parallel for num_threads(ctx->threads) schedule(static) if (q.n >= QUANT_PARALLEL_MIN)
    for (int64_t b = 0; b < nb; b++) {
      int64_t off = b * QUANT_BLOCK, len = q.n - off < QUANT_BLOCK ? q.n - off : QUANT_BLOCK;
      fake_quant(x + off, y + off, len, sc, zp, lo, hi);
    }
    return TOPLU_OK;
  }
  if (q.inner == 1) {
    float *ss = ctx->workspace, *zz = ss + q.ch;
    for (int64_t c = 0; c < q.ch; c++) ss[c] = s[c], zz[c] = (float)zp_at(z, c);
#pragma omp parallel for num_threads(ctx->threads) schedule(static) if (q.n >= QUANT_PARALLEL_MIN)
    for (int64_t o = 0; o < q.outer; o++) fake_quant_vec(x + o * q.ch, y + o * q.ch, q.ch, ss, zz, lo, hi);
    return TOPLU_OK;
  }
  int64_t rows = q.outer * q.ch;
#pragma omp parallel for num_threads(ctx->threads) schedule(static) if (q.n >= QUANT_PARALLEL_MIN)
  for (int64_t r = 0; r < rows; r++) {
    int64_t c = r % q.ch;
    fake_quant(x + r * q.inner, y + r * q.inner, q.inner, s[c], (float)zp_at(z, c), lo, hi);
  }
  return TOPLU_OK;
}

/* DynamicQuantizeLinear-11's parameters (ops/dynquant.h). */
void toplu__dynamic_qparams(const float *x, int64_t n, int threads, float *scale, float *zp, float *qscale) {
  float mn = 0.0f, mx = 0.0f;
  /* min and max are exact in any order (NaN is skipped by the compares), so the threads change nothing */
#pragma omp parallel for num_threads(threads) if (threads > 1 && n >= QUANT_PARALLEL_MIN) reduction(min : mn) reduction(max : mx) schedule(static)
  for (int64_t i = 0; i < n; i++) {
    mn = x[i] < mn ? x[i] : mn;
    mx = x[i] > mx ? x[i] : mx;
  }
  float s = (mx - mn) / 255.0f, z = 0.0f;
  *scale = s;
  if (s > 0.0f && isfinite(s)) {
    z = -mn / s;
    z = z < 0.0f ? 0.0f : z > 255.0f ? 255.0f : z;
    z = round_even(z);
  } else {
    s = s > 0.0f ? s : 1.0f; /* all zeros: any scale gives y = 0 */
  }
  *zp = z;
  *qscale = s;
}

void toplu__quantize_u8(const float *x, uint8_t *y, int64_t n, float s, float zp, int threads) {
  int64_t nch = (n + QUANT_BLOCK - 1) / QUANT_BLOCK;
#pragma omp parallel for num_threads(threads) if (threads > 1 && n >= QUANT_PARALLEL_MIN) schedule(static)
  for (int64_t c = 0; c < nch; c++) {
    int64_t b = c * QUANT_BLOCK, e = b + QUANT_BLOCK < n ? b + QUANT_BLOCK : n;
    quant_u8(x + b, y + b, e - b, s, zp, 0.0f, 255.0f);
  }
}

void toplu__quantize_span(toplu_dtype_t t, const float *x, void *y, int64_t n, float s, float zp) {
  quant_run(t, x, y, 0, n, s, zp);
}

void toplu__dequantize_span(toplu_dtype_t t, const void *x, float *y, int64_t n, float s, int32_t zp) {
  dequant_run(t, x, y, 0, n, s, zp);
}

/* DynamicQuantizeLinear-11: scale = (max(0, max x) - min(0, min x)) / 255,
 * zero point = saturate(round(-min / scale)), then QuantizeLinear to uint8. */
static toplu_status_t run_dynamic_quantize(toplu__kernel_ctx_t *ctx) {
  if (ctx->in[0].dtype != TOPLU_DTYPE_FLOAT)
    return toplu__kernel_error(ctx, TOPLU_ERR_UNSUPPORTED, "x is %s; toplu quantizes float32",
                              toplu_dtype_name(ctx->in[0].dtype));
  const float *x = ctx->in[0].data;
  int64_t n = toplu_tensor_numel(&ctx->in[0]);
  float scale, zp, qs;
  toplu__dynamic_qparams(x, n, ctx->threads, &scale, &zp, &qs);
  if (ctx->out[0].data) toplu__quantize_u8(x, ctx->out[0].data, n, qs, zp, ctx->threads);
  if (ctx->n_out > 1 && ctx->out[1].data) *(float *)ctx->out[1].data = scale;
  if (ctx->n_out > 2 && ctx->out[2].data) *(uint8_t *)ctx->out[2].data = (uint8_t)(int32_t)zp;
  return TOPLU_OK;
}

const toplu__kernel_t toplu__kernels_quant[] = {
    {.op_type = "QuantizeLinear", .domain = "", .prepare = prepare_quant, .run = run_quantize},
    {.op_type = "DequantizeLinear", .domain = "", .prepare = prepare_quant, .run = run_dequantize},
    {.op_type = "DynamicQuantizeLinear", .domain = "", .run = run_dynamic_quantize},
    {.op_type = "QuantizeDequantizeLinear", .domain = "toplu", .prepare = prepare_quant, .run = run_fake_quant,
     .flags = TOPLU_KERNEL_INPLACE},
    {.op_type = NULL},
};
