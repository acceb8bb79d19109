/*
 * ops/quant_matmul.c - MatMulInteger-10 and QLinearMatMul-10, plain C.
 *
 * ONNX MatMulInteger (https://onnx.ai/onnx/operators/onnx__MatMulInteger.html):
 *   Y = (A - a_zero_point) (B - b_zero_point), int32, numpy matmul shapes
 *   (batch dims broadcast; a 1-D A is a row, a 1-D B a column); a_zero_point
 *   scalar or one per row of A ([M]), b_zero_point scalar or one per column
 *   of B ([N]).
 * toplu.QLinearMatMul (graph/fuse.c's QDQ MatMul/Gemm, graph/schema_matmul.c):
 *   QLinearMatMul plus B [N] (int32, added to the sums before requantizing;
 *   with no y_scale a float32 output float32(acc) * (a_scale b_scale[n]) +
 *   B[n], B float32, then the node's post-ops).
 * ONNX QLinearMatMul (https://onnx.ai/onnx/operators/onnx__QLinearMatMul.html):
 *   y = saturate(round((a - a_zp)(b - b_zp) * a_scale * b_scale / y_scale) + y_zp),
 *   round to nearest, ties to even; a_scale/a_zp per tensor or per row of a,
 *   b_scale/b_zp per tensor or per column of b.
 * toplu.DynamicQuantizeMatMul (graph/fuse.c's fusion of ONNX Runtime's
 * dynamic quantization chain DynamicQuantizeLinear -> MatMulInteger -> Cast
 * -> Mul -> [Add]; graph/schema_matmul.c): x quantized as
 * DynamicQuantizeLinear does (ops/dynquant.h), then
 *   y[r, n] = (float)sat32(sum_k (x_q - x_zp)(w - w_zp[n])) * (x_scale * w_scale[n]) [+ bias[n]]
 * in the unfused graph's float32 operations, so it equals that graph bit for bit.
 * Accumulation is exact (int64, stored saturated to int32 for
 * MatMulInteger); the requantization is float32 like QLinearConv's
 * (ops/onednn/qconv.c).  These are the exact reference and the fallback:
 * ops/onednn/qmatmul.c runs the same ops on oneDNN's integer matmul where
 * it can (constant symmetric int8 B, a CPU with VNNI).  MatMulInteger and
 * QLinearMatMul run on one thread; DynamicQuantizeMatMul's rows on the
 * plan's threads, and with int8 W and zero points 0 (what quantizers
 * write) in int32 sums over blocks of 4 rows per pass over W, a loop the
 * compiler vectorises: on a CPU without VNNI this is the path of every
 * dynamic model (measured with DNNL_MAX_CPU_ISA=AVX2 on Zen 5: [128 x 768]
 * x [768 x 3072] 10.6 ms on one thread, against 3.2 ms for the fp32 MatMul
 * and 847 ms for the general loop).
 */
#include <math.h>
#ifdef _OPENMP
#include <omp.h>
#endif
#include <string.h>

#include "ops/dynquant.h"
#include "ops/elem_io.h"
#include "ops/fastmath.h"
#include "ops/kernel.h"

/* Element i of a uint8/int8 operand. */
static int32_t int8_at(const toplu_tensor_t *t, int64_t i) {
  return t->dtype == TOPLU_DTYPE_UINT8 ? ((const uint8_t *)t->data)[i] : ((const int8_t *)t->data)[i];
}

static float param_float(const toplu_tensor_t *t, int64_t i) {
  return ((const float *)t->data)[toplu_tensor_numel(t) == 1 ? 0 : i];
}

typedef struct qmm_shape {
  int64_t m, k, n, batches;
  int nb;                                  /* batch dims of the output */
  int64_t ydims[TOPLU_MAX_DIMS];           /* the output's batch dims */
  int64_t astride[TOPLU_MAX_DIMS], bstride[TOPLU_MAX_DIMS]; /* per output batch dim, in matrices (0: broadcast) */
} qmm_shape_t;

/* numpy matmul geometry of a [.., M, K] x b [.., K, N]. */
static toplu_status_t qmm_geometry(toplu__kernel_ctx_t *ctx, const toplu_tensor_t *a, const toplu_tensor_t *b,
                                   qmm_shape_t *g) {
  memset(g, 0, sizeof *g);
  if (a->ndim < 1 || b->ndim < 1) return toplu__kernel_error(ctx, TOPLU_ERR_SHAPE, "operands must have rank >= 1");
  g->m = a->ndim >= 2 ? a->dims[a->ndim - 2] : 1;
  g->k = a->dims[a->ndim - 1];
  g->n = b->ndim >= 2 ? b->dims[b->ndim - 1] : 1;
  int64_t kb = b->ndim >= 2 ? b->dims[b->ndim - 2] : b->dims[0];
  if (kb != g->k) return toplu__kernel_error(ctx, TOPLU_ERR_SHAPE, "inner dims %lld and %lld differ", (long long)g->k, (long long)kb);
  int ba = a->ndim > 2 ? a->ndim - 2 : 0, bb = b->ndim > 2 ? b->ndim - 2 : 0;
  g->nb = ba > bb ? ba : bb;
  int64_t sa = 1, sb = 1;
  g->batches = 1;
  for (int i = g->nb - 1; i >= 0; i--) {
    int ia = i - (g->nb - ba), ib = i - (g->nb - bb);
    int64_t da = ia >= 0 ? a->dims[ia] : 1, db = ib >= 0 ? b->dims[ib] : 1;
    g->ydims[i] = da > db ? da : db;
    g->astride[i] = da == 1 ? 0 : sa;
    g->bstride[i] = db == 1 ? 0 : sb;
    sa *= da;
    sb *= db;
    g->batches *= g->ydims[i];
  }
  return TOPLU_OK;
}

/* The a and b matrix indices of output batch t. */
static void qmm_batch(const qmm_shape_t *g, int64_t t, int64_t *ia, int64_t *ib) {
  *ia = *ib = 0;
  for (int i = g->nb - 1; i >= 0; i--) {
    int64_t d = t % g->ydims[i];
    t /= g->ydims[i];
    *ia += d * g->astride[i];
    *ib += d * g->bstride[i];
  }
}

typedef struct qmm_state {
  int qlinear; /* QLinearMatMul (else MatMulInteger) */
} qmm_state_t;

static toplu_status_t qmm_prepare(toplu__kernel_ctx_t *ctx, toplu__kernel_info_t *info) {
  (void)info;
  qmm_state_t *st = toplu__kernel_alloc(ctx, sizeof *st);
  if (!st) return toplu__kernel_error(ctx, TOPLU_ERR_OUT_OF_MEMORY, "out of memory");
  st->qlinear = !strcmp(ctx->node->op_type, "QLinearMatMul");
  ctx->state = st;
  if (ctx->node->n_post && !(ctx->out[0].dtype == TOPLU_DTYPE_FLOAT && toplu__dqmm_post_ok(ctx->node)))
    return toplu__kernel_error(ctx, TOPLU_ERR_INTERNAL, "a fused post-op it cannot apply");
  qmm_shape_t g;
  return qmm_geometry(ctx, &ctx->in[0], &ctx->in[st->qlinear ? 3 : 1], &g);
}

static toplu_status_t qmm_run(toplu__kernel_ctx_t *ctx) {
  const qmm_state_t *st = ctx->state;
  int q = st->qlinear;
  const toplu_tensor_t *a = &ctx->in[0], *b = &ctx->in[q ? 3 : 1];
  const toplu_tensor_t *az = ctx->n_in > 2 ? &ctx->in[2] : NULL, *bz = ctx->n_in > (q ? 5 : 3) ? &ctx->in[q ? 5 : 3] : NULL;
  qmm_shape_t g;
  toplu_status_t s = qmm_geometry(ctx, a, b, &g);
  if (s) return s;
  toplu_tensor_t *y = &ctx->out[0];
  int y_u8 = y->dtype == TOPLU_DTYPE_UINT8;
  int ext = q && ctx->node->domain[0]; /* toplu.QLinearMatMul: B, maybe a float output */
  int float_out = ext && y->dtype == TOPLU_DTYPE_FLOAT;
  float ys = q && !float_out ? ((const float *)ctx->in[6].data)[0] : 1.f;
  int32_t yz = q && !float_out ? toplu__zero_point_at(&ctx->in[7], 0) : 0;
  const void *bias = ext && ctx->n_in > 8 && ctx->in[8].ndim >= 0 ? ctx->in[8].data : NULL;
  for (int64_t t = 0; t < g.batches; t++) {
    int64_t ma, mb;
    qmm_batch(&g, t, &ma, &mb);
    for (int64_t i = 0; i < g.m; i++)
      for (int64_t j = 0; j < g.n; j++) {
        int32_t za = toplu__zero_point_at(az, i), zb = toplu__zero_point_at(bz, j);
        int64_t acc = 0;
        for (int64_t k = 0; k < g.k; k++)
          acc += (int64_t)(int8_at(a, (ma * g.m + i) * g.k + k) - za) * (int8_at(b, (mb * g.k + k) * g.n + j) - zb);
        int64_t yi = (t * g.m + i) * g.n + j;
        if (float_out) { /* float32(acc) * (a_scale b_scale[j]) + B[j], as ops/onednn/qmatmul.c */
          int32_t a32 = acc > INT32_MAX ? INT32_MAX : acc < INT32_MIN ? INT32_MIN : (int32_t)acc;
          float v = (float)a32 * (param_float(&ctx->in[1], i) * param_float(&ctx->in[4], j) / ys);
          ((float *)y->data)[yi] = bias ? v + ((const float *)bias)[j] : v;
          continue;
        }
        if (bias) acc += ((const int32_t *)bias)[j];
        if (!q) {
          ((int32_t *)y->data)[yi] = acc > INT32_MAX ? INT32_MAX : acc < INT32_MIN ? INT32_MIN : (int32_t)acc;
          continue;
        }
        float scale = param_float(&ctx->in[1], i) * param_float(&ctx->in[4], j) / ys;
        float v = rintf((float)acc * scale) + (float)yz;
        float lo = y_u8 ? 0.f : -128.f, hi = y_u8 ? 255.f : 127.f;
        v = v < lo ? lo : v > hi ? hi : v;
        if (y_u8) ((uint8_t *)y->data)[yi] = (uint8_t)v;
        else ((int8_t *)y->data)[yi] = (int8_t)v;
      }
  }
  if (float_out) toplu__dqmm_post(ctx, y->data, toplu_tensor_numel(y), ctx->threads);
  return TOPLU_OK;
}

static void qmm_release(toplu__kernel_ctx_t *ctx) {
  toplu__kernel_free(ctx, ctx->state);
  ctx->state = NULL;
}

/* ---- toplu.DynamicQuantizeMatMul, plain C ---- */

int toplu__dqmm_post_ok(const toplu__node_t *n) {
  for (int i = 0; i < n->n_post; i++)
    switch (n->post[i].kind) {
      case TOPLU_POST_MIN_CHANNEL:
      case TOPLU_POST_QSUM:
      case TOPLU_POST_BIAS: return 0;
      default: break;
    }
  return 1;
}

void toplu__dqmm_post(const toplu__kernel_ctx_t *ctx, float *y, int64_t total, int threads) {
  if (!ctx->node->n_post) return;
  int64_t chunk = 4096, nch = (total + chunk - 1) / chunk;
#pragma omp parallel for num_threads(threads) if (threads > 1 && nch > 1) schedule(static)
  for (int64_t c = 0; c < nch; c++) toplu__dqmm_post_range(ctx, y, c * chunk, c * chunk + chunk < total ? c * chunk + chunk : total);
}

void toplu__dqmm_post_range(const toplu__kernel_ctx_t *ctx, float *y, int64_t b, int64_t e) {
  const toplu__node_t *nd = ctx->node;
  {
    for (int i = 0; i < nd->n_post; i++) {
      const toplu__post_op_t *p = &nd->post[i];
      float a = p->alpha, be = p->beta;
      switch (p->kind) {
        case TOPLU_POST_SUM: {
          const float *add = ctx->in[p->input].data;
          for (int64_t k = b; k < e; k++) y[k] += add[k];
          break;
        }
        case TOPLU_POST_RELU:
          for (int64_t k = b; k < e; k++) y[k] = y[k] < 0.f ? 0.f : y[k]; /* NaN stays NaN */
          break;
        case TOPLU_POST_LEAKY_RELU:
          for (int64_t k = b; k < e; k++) y[k] = y[k] >= 0.f ? y[k] : a * y[k];
          break;
        case TOPLU_POST_CLIP:
          for (int64_t k = b; k < e; k++) y[k] = y[k] < a ? a : y[k] > be ? be : y[k];
          break;
        case TOPLU_POST_SIGMOID:
          for (int64_t k = b; k < e; k++) y[k] = 1.f / (1.f + expf(-y[k]));
          break;
        case TOPLU_POST_TANH:
          for (int64_t k = b; k < e; k++) y[k] = tanhf(y[k]);
          break;
        case TOPLU_POST_HARD_SIGMOID:
          for (int64_t k = b; k < e; k++) {
            float v = a * y[k] + be;
            y[k] = v < 0.f ? 0.f : v > 1.f ? 1.f : v;
          }
          break;
        case TOPLU_POST_HARD_SWISH:
          for (int64_t k = b; k < e; k++) {
            float v = y[k] / 6.f + 0.5f;
            y[k] *= v < 0.f ? 0.f : v > 1.f ? 1.f : v;
          }
          break;
        case TOPLU_POST_SWISH:
          for (int64_t k = b; k < e; k++) y[k] = y[k] / (1.f + expf(-y[k]));
          break;
        case TOPLU_POST_LINEAR:
          for (int64_t k = b; k < e; k++) y[k] = a * y[k] + be;
          break;
        case TOPLU_POST_GELU_ERF:
          toplu__gelu_erf_f32(y + b, e - b);
          break;
        default: break; /* refused in prepare (toplu__dqmm_post_ok) */
      }
    }
  }
}

#define DQMM_ROWS 4 /* rows sharing one pass over W (the fast path) */

typedef struct dqmm_state {
  int64_t rows, k, n;
  size_t off_acc; /* per thread: DQMM_ROWS x n int64 sums */
  int fast;       /* W int8 with zero points all 0 and |sums| < 2^31: int32 sums, DQMM_ROWS rows per pass */
} dqmm_state_t;

static toplu_status_t dqmm_prepare(toplu__kernel_ctx_t *ctx, toplu__kernel_info_t *info) {
  const toplu_tensor_t *x = &ctx->in[0], *w = &ctx->in[1];
  if (x->dtype != TOPLU_DTYPE_FLOAT || w->ndim != 2 || (w->dtype != TOPLU_DTYPE_INT8 && w->dtype != TOPLU_DTYPE_UINT8) ||
      x->ndim < 1)
    return toplu__kernel_error(ctx, TOPLU_ERR_UNSUPPORTED, "float32 x and 2-D int8/uint8 w expected");
  if (!ctx->in[2].data && ctx->in[2].ndim >= 0)
    return toplu__kernel_error(ctx, TOPLU_ERR_UNSUPPORTED, "w_scale must be a constant");
  if (!toplu__dqmm_post_ok(ctx->node)) return toplu__kernel_error(ctx, TOPLU_ERR_INTERNAL, "a fused post-op it cannot apply");
  dqmm_state_t *st = toplu__kernel_alloc(ctx, sizeof *st);
  if (!st) return toplu__kernel_error(ctx, TOPLU_ERR_OUT_OF_MEMORY, "out of memory");
  ctx->state = st;
  st->k = w->dims[0];
  st->n = w->dims[1];
  st->rows = st->k ? toplu_tensor_numel(x) / st->k : 0;
  size_t xq = ((size_t)toplu_tensor_numel(x) + 63) & ~(size_t)63;
  st->off_acc = xq;
  info->workspace_bytes = xq + (size_t)ctx->threads * DQMM_ROWS * (size_t)(st->n > 0 ? st->n : 1) * sizeof(int64_t);
  const toplu_tensor_t *wz = ctx->n_in > 3 && ctx->in[3].ndim >= 0 ? &ctx->in[3] : NULL;
  st->fast = w->dtype == TOPLU_DTYPE_INT8 && st->k < 65000 && (!wz || wz->data);
  for (int64_t j = 0; st->fast && wz && j < toplu_tensor_numel(wz); j++) st->fast = toplu__zero_point_at(wz, j) == 0;
  return TOPLU_OK;
}

static toplu_status_t dqmm_run(toplu__kernel_ctx_t *ctx) {
  const dqmm_state_t *st = ctx->state;
  const float *x = ctx->in[0].data;
  const toplu_tensor_t *w = &ctx->in[1], *ws = &ctx->in[2];
  const toplu_tensor_t *wz = ctx->n_in > 3 && ctx->in[3].ndim >= 0 ? &ctx->in[3] : NULL;
  const float *bias = ctx->n_in > 4 && ctx->in[4].ndim >= 0 ? ctx->in[4].data : NULL;
  int64_t rows = st->rows, k = st->k, n = st->n;
  float xs, zf, qs;
  toplu__dynamic_qparams(x, rows * k, ctx->threads, &xs, &zf, &qs);
  uint8_t *xq = ctx->workspace;
  toplu__quantize_u8(x, xq, rows * k, qs, zf, ctx->threads);
  int32_t zx = (int32_t)zf;
  float *y = ctx->out[0].data;
  int nt = ctx->threads;
  if (st->fast) {
    /* int32 sums (|sum| <= K 255 128 < 2^31), DQMM_ROWS rows per pass over W: the same integers, vectorised */
    const int8_t *w8 = w->data;
    int64_t nblk = (rows + DQMM_ROWS - 1) / DQMM_ROWS;
#pragma omp parallel for num_threads(nt) if (nt > 1 && rows * n * k > 65536) schedule(static)
    for (int64_t blk = 0; blk < nblk; blk++) {
      int tid = 0;
#ifdef _OPENMP
      tid = omp_get_thread_num();
#endif
      int64_t r0 = blk * DQMM_ROWS, nb = rows - r0 < DQMM_ROWS ? rows - r0 : DQMM_ROWS;
      int32_t *acc = (int32_t *)((char *)ctx->workspace + st->off_acc) + (int64_t)tid * DQMM_ROWS * n;
      memset(acc, 0, (size_t)(nb * n) * sizeof *acc);
      for (int64_t kk = 0; kk < k; kk++) {
        const int8_t *wr = w8 + kk * n;
        for (int64_t b = 0; b < nb; b++) {
          int32_t xv = (int32_t)xq[(r0 + b) * k + kk] - zx;
          if (!xv) continue;
          int32_t *ab = acc + b * n;
#pragma omp simd
          for (int64_t j = 0; j < n; j++) ab[j] += xv * (int32_t)wr[j];
        }
      }
      for (int64_t b = 0; b < nb; b++)
        for (int64_t j = 0; j < n; j++) {
          float v = (float)acc[b * n + j] * (xs * param_float(ws, j)); /* Cast, Mul(., Mul(x_scale, w_scale)) */
          y[(r0 + b) * n + j] = bias ? v + bias[j] : v;
        }
    }
    toplu__dqmm_post(ctx, y, rows * n, nt);
    return TOPLU_OK;
  }
#pragma omp parallel for num_threads(nt) if (nt > 1 && rows * n * k > 65536) schedule(static)
  for (int64_t r = 0; r < rows; r++) {
    int tid = 0;
#ifdef _OPENMP
    tid = omp_get_thread_num();
#endif
    int64_t *acc = (int64_t *)((char *)ctx->workspace + st->off_acc) + (int64_t)tid * n;
    for (int64_t j = 0; j < n; j++) acc[j] = 0;
    for (int64_t kk = 0; kk < k; kk++) {
      int64_t xv = (int64_t)xq[r * k + kk] - zx;
      if (!xv) continue;
      for (int64_t j = 0; j < n; j++) acc[j] += xv * (int8_at(w, kk * n + j) - toplu__zero_point_at(wz, j));
    }
    for (int64_t j = 0; j < n; j++) {
      int64_t a = acc[j];
      int32_t a32 = a > INT32_MAX ? INT32_MAX : a < INT32_MIN ? INT32_MIN : (int32_t)a;
      float v = (float)a32 * (xs * param_float(ws, j)); /* Cast, Mul(., Mul(x_scale, w_scale)) */
      y[r * n + j] = bias ? v + bias[j] : v;
    }
  }
  toplu__dqmm_post(ctx, y, rows * n, nt);
  return TOPLU_OK;
}

const toplu__kernel_t toplu__kernels_quant_matmul[] = {
    {.op_type = "MatMulInteger", .domain = "", .prepare = qmm_prepare, .run = qmm_run, .release = qmm_release},
    {.op_type = "QLinearMatMul", .domain = "", .prepare = qmm_prepare, .run = qmm_run, .release = qmm_release},
    {.op_type = "QLinearMatMul", .domain = "toplu", .prepare = qmm_prepare, .run = qmm_run, .release = qmm_release},
    {.op_type = "DynamicQuantizeMatMul", .domain = "toplu", .prepare = dqmm_prepare, .run = dqmm_run, .release = qmm_release},
    {.op_type = NULL},
};
