/*
 * ops/quant_binary.c - com.microsoft QLinearAdd and QLinearMul, plain C.
 *
 * ONNX Runtime's contrib ops (docs/ContribOperators.md in onnxruntime):
 *   QLinearAdd(A, A_scale, A_zero_point, B, B_scale, B_zero_point, C_scale, C_zero_point):
 *     C = saturate(round(((A - A_zp) A_scale + (B - B_zp) B_scale) / C_scale) + C_zp)
 *   QLinearMul: the same with the product ((A - A_zp) A_scale) ((B - B_zp) B_scale).
 * A, B and C uint8 or int8 (one type), scales float scalars, zero points
 * scalars (absent: 0), numpy broadcasting of A and B; round to nearest,
 * ties to even, in float32 exactly as DequantizeLinear, Add (Mul) and
 * QuantizeLinear compute it one after the other (ops/quant.c): (A - A_zp)
 * A_scale + (B - B_zp) B_scale, divided by C_scale.  So the node graph/fuse.c
 * writes for a QDQ residual Add (DequantizeLinear + DequantizeLinear -> Add
 * -> QuantizeLinear) gives the float graph's bits, int8 in and int8 out with
 * no float tensor in between.  (ONNX Runtime's x86 kernel uses 21-bit
 * fixed-point scale ratios instead and may round a value at a .5 boundary
 * the other way.)
 */
#include <math.h>
#include <string.h>

#include "ops/broadcast.h"
#include "ops/dynquant.h"
#include "ops/elem_io.h"
#include "ops/kernel.h"

typedef struct qbin_state {
  toplu__qbin_t q;
  toplu__bcast_t bc;
} qbin_state_t;

toplu_status_t toplu__qbin_params(toplu__kernel_ctx_t *ctx, toplu__qbin_t *q) {
  memset(q, 0, sizeof *q);
  q->mul = !strcmp(ctx->node->op_type, "QLinearMul");
  for (int i = 1; i < 8 && i < ctx->n_in; i++) {
    if (i == 3) continue;
    const toplu_tensor_t *t = &ctx->in[i];
    if (t->ndim >= 0 && !t->data)
      return toplu__kernel_error(ctx, TOPLU_ERR_UNSUPPORTED, "input %d (a scale or zero point) must be a constant", i);
  }
  q->sa = *(const float *)ctx->in[1].data;
  q->sb = *(const float *)ctx->in[4].data;
  q->sc = *(const float *)ctx->in[6].data;
  if (!(q->sc > 0.f)) return toplu__kernel_error(ctx, TOPLU_ERR_INVALID_MODEL, "C_scale must be positive");
  q->za = toplu__zero_point_at(&ctx->in[2], 0);
  q->zb = toplu__zero_point_at(&ctx->in[5], 0);
  q->zc = ctx->n_in > 7 ? toplu__zero_point_at(&ctx->in[7], 0) : 0;
  q->u8 = ctx->out[0].dtype == TOPLU_DTYPE_UINT8;
  return TOPLU_OK;
}

static toplu_status_t qbin_prepare(toplu__kernel_ctx_t *ctx, toplu__kernel_info_t *info) {
  (void)info;
  qbin_state_t *st = toplu__kernel_alloc(ctx, sizeof *st);
  if (!st) return toplu__kernel_error(ctx, TOPLU_ERR_OUT_OF_MEMORY, "out of memory");
  memset(st, 0, sizeof *st);
  ctx->state = st;
  toplu_status_t s = toplu__qbin_params(ctx, &st->q);
  if (s) return s;
  const toplu_tensor_t *const ab[2] = {&ctx->in[0], &ctx->in[3]};
  if (toplu__bcast_init(&st->bc, 2, ab, &ctx->out[0]))
    return toplu__kernel_error(ctx, TOPLU_ERR_SHAPE, "A and B do not broadcast to C");
  return TOPLU_OK;
}

/* One contiguous run of n elements: a[i * sa], b[i * sb] -> c[i] (sa, sb 0 or 1). */
#define QBIN_RUN(T, LO, HI)                                                                    \
  static void qbin_##T(const toplu__qbin_t *st, const T *a, int64_t sa, const T *b, int64_t sb, T *c, \
                       int64_t n) {                                                            \
    const float fa = st->sa, fb = st->sb, sc = st->sc, zc = (float)st->zc;                     \
    const int32_t za = st->za, zb = st->zb;                                                   \
    if (st->mul) {                                                                             \
      for (int64_t i = 0; i < n; i++) {                                                        \
        float v = ((float)(a[i * sa] - za) * fa) * ((float)(b[i * sb] - zb) * fb) / sc;        \
        v = rintf(v) + zc;                                                                     \
        c[i] = (T)(v < LO ? LO : v > HI ? HI : v);                                             \
      }                                                                                        \
    } else {                                                                                   \
      for (int64_t i = 0; i < n; i++) {                                                        \
        float v = ((float)(a[i * sa] - za) * fa + (float)(b[i * sb] - zb) * fb) / sc;          \
        v = rintf(v) + zc;                                                                     \
        c[i] = (T)(v < LO ? LO : v > HI ? HI : v);                                             \
      }                                                                                        \
    }                                                                                          \
  }
QBIN_RUN(uint8_t, 0.f, 255.f)
QBIN_RUN(int8_t, -128.f, 127.f)

#define QBIN_CHUNK 16384

void toplu__qbin_flat(const toplu__qbin_t *q, const void *a, const void *b, void *c, int64_t n, int threads) {
  int64_t chunks = (n + QBIN_CHUNK - 1) / QBIN_CHUNK;
#pragma omp parallel for num_threads(threads) if (n >= TOPLU_BCAST_PAR_MIN && threads > 1)
  for (int64_t k = 0; k < chunks; k++) {
    int64_t i0 = k * QBIN_CHUNK, m = n - i0 < QBIN_CHUNK ? n - i0 : QBIN_CHUNK;
    if (q->u8) qbin_uint8_t(q, (const uint8_t *)a + i0, 1, (const uint8_t *)b + i0, 1, (uint8_t *)c + i0, m);
    else qbin_int8_t(q, (const int8_t *)a + i0, 1, (const int8_t *)b + i0, 1, (int8_t *)c + i0, m);
  }
}

static toplu_status_t qbin_run(toplu__kernel_ctx_t *ctx) {
  const qbin_state_t *st = ctx->state;
  const toplu__bcast_t *bc = &st->bc;
  const char *a = ctx->in[0].data, *b = ctx->in[3].data;
  char *c = ctx->out[0].data;
  if (bc->numel == 0) return TOPLU_OK;
  if (bc->kind == TOPLU_BCAST_SAME) { /* one flat loop, in chunks over the threads */
    toplu__qbin_flat(&st->q, a, b, c, bc->numel, ctx->threads);
    return TOPLU_OK;
  }
  int64_t len = bc->dims[bc->ndim - 1], rows = bc->numel / len;
  int64_t sa = bc->strides[0][bc->ndim - 1], sb = bc->strides[1][bc->ndim - 1];
#pragma omp parallel for num_threads(ctx->threads) if (bc->numel >= TOPLU_BCAST_PAR_MIN && ctx->threads > 1)
  for (int64_t r = 0; r < rows; r++) {
    toplu__bcast_iter_t it;
    toplu__bcast_iter_seek(bc, &it, r);
    if (st->q.u8)
      qbin_uint8_t(&st->q, (const uint8_t *)a + it.off[0], sa, (const uint8_t *)b + it.off[1], sb, (uint8_t *)c + r * len, len);
    else
      qbin_int8_t(&st->q, (const int8_t *)a + it.off[0], sa, (const int8_t *)b + it.off[1], sb, (int8_t *)c + r * len, len);
  }
  return TOPLU_OK;
}

static void qbin_release(toplu__kernel_ctx_t *ctx) {
  toplu__kernel_free(ctx, ctx->state);
  ctx->state = NULL;
}

const toplu__kernel_t toplu__kernels_quant_binary[] = {
    {.op_type = "QLinearAdd", .domain = "com.microsoft", .prepare = qbin_prepare, .run = qbin_run, .release = qbin_release},
    {.op_type = "QLinearMul", .domain = "com.microsoft", .prepare = qbin_prepare, .run = qbin_run, .release = qbin_release},
    {.op_type = NULL},
};
