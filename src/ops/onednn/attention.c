/*
 * ops/onednn/attention.c - toplu.ScaledDotProductAttention (graph/fuse.c
 * makes it from MatMul, scale, mask, Softmax, MatMul):
 *
 *   Y[..., T, dv] = softmax(scale * Q[..., T, d] . KT[..., d, S] (+ mask | Where mask), last axis) . V[..., S, dv]
 *
 * Inputs Q, KT, V float32, plain row-major, or (attributes q_bshd,
 * k_bshd, v_bshd, y_bshd: graph/fuse.c folded the heads' Transposes) Q, V
 * and Y as [B, T|S, H, d] and K as [B, S, H, d] (KT's transpose), read and
 * written in place by strides: rows H x d apart, K through a transposed
 * product; an optional mask (input 3):
 * float32, added to the scaled scores, or bool, a Where with the node's
 * mask_fill (mask_keep 1: the score where the mask is true, else the fill;
 * 0: the reverse).  Every dim broadcasts as the unfused ops would: the
 * leading ones across all four inputs, right-aligned; a mask's T and S over
 * Q's T and KT's S when those are 1.
 *
 * Work: one task per (leading index, block of query rows).  A task computes
 * its block's scores [rows][S] = scale Q_blk . KT with dnnl_sgemm into its
 * thread's scratch (the plan's workspace: threads x rows x S floats, never
 * more than one head's score matrix per thread), applies the mask, a
 * max-subtracted softmax per row (the same row functions as the Softmax
 * kernel, ops/reduce_util.h), and writes P . V with a second dnnl_sgemm
 * straight into Y.  Tasks are split over the plan's threads (OpenMP; inside
 * the parallel region each sgemm runs on its own thread), so both cores work
 * at batch 1 as long as heads x blocks >= 2.
 */
#include <omp.h>
#include <stdlib.h>
#include <string.h>

#include "graph/schema.h"
#include "ops/onednn/onednn.h"
#include "ops/reduce_util.h"

/* Scratch per thread: rows x S floats with rows chosen so one block's
 * scores take about this many bytes (in L2 next to its K and V), at least
 * SDPA_MIN_ROWS rows (the products' efficiency) and at most T. */
#define SDPA_BLOCK_BYTES (96 * 1024)
#define SDPA_MIN_ROWS 16

enum { SDPA_Q, SDPA_K, SDPA_V, SDPA_M, SDPA_Y, SDPA_N };

typedef struct sdpa_state {
  int nlead;                         /* leading dims of the output */
  int64_t lead[TOPLU_MAX_DIMS];      /* their sizes */
  int64_t str[SDPA_N][TOPLU_MAX_DIMS]; /* per input, element stride of each leading dim (0: broadcast) */
  int64_t nheads;                    /* product of lead[] */
  int64_t t, s, d, dv;               /* output rows T, keys S, depth d, value width dv */
  int q_rows_bcast, k_cols_bcast;    /* Q's T is 1 under a wider T; KT's S is 1 under a wider S */
  int64_t m_row, m_col;              /* mask strides along T and S (0: broadcast) */
  int mask;                          /* 0 none, 1 additive float, 2 bool (Where) */
  float scale, fill;
  int keep;
  int64_t ld[SDPA_N];                /* row stride (elements) of Q, KT (K with k_trans), V and Y's matrices */
  int k_trans;                       /* K is [S, d] rows (k_bshd): the product reads it transposed */
  int64_t rows;                      /* query rows per task */
  int64_t scratch;                   /* floats per thread (rows * S rounded up to 16) */
  int threads;                       /* threads the workspace was sized for */
} sdpa_state_t;

/* Broadcast input x (rank nx) onto the output's leading dims (rank nl,
 * right-aligned against the output's rank nd), with x's last two dims
 * (its matrix) of `mat` elements. */
static int lead_strides(const toplu_tensor_t *x, int nd, int nl, const int64_t *lead, int64_t mat, int64_t *str) {
  int64_t st = mat;
  for (int k = nl - 1; k >= 0; k--) {
    int j = k - (nd - x->ndim);
    int64_t xd = j >= 0 ? x->dims[j] : 1;
    if (xd != 1 && xd != lead[k]) return -1;
    str[k] = xd == 1 ? 0 : st;
    st *= xd;
  }
  return 0;
}

/* A dim of an input that must be 1 or the output's. */
static int fits(int64_t x, int64_t out) { return x == 1 || x == out; }

/* Leading strides and row stride of a [B, X, H, D] tensor seen as [B, H, X, D] (q_bshd and the like): the
 * heads are D apart, the rows H x D; a leading dim of 1 under a wider output dim broadcasts (stride 0). */
static int bshd_strides(const toplu_tensor_t *phys, int nl, const int64_t *lead, int64_t *str, int64_t *ld) {
  if (phys->ndim != 4 || nl != 2) return -1;
  int64_t b = phys->dims[0], h = phys->dims[2], x = phys->dims[1], d = phys->dims[3];
  if (!fits(b, lead[0]) || !fits(h, lead[1])) return -1;
  str[0] = b == 1 ? 0 : x * h * d;
  str[1] = h == 1 ? 0 : d;
  *ld = h * d;
  return 0;
}

static toplu_status_t sdpa_prepare(toplu__kernel_ctx_t *ctx, toplu__kernel_info_t *info) {
  /* q_bshd, k_bshd, v_bshd, y_bshd (graph/fuse.c folded the heads' Transposes): that tensor is [B, T|S, H, d];
   * the shape checks see its [B, H, T, d] view (K: [B, H, d, S]), the products walk it by strides */
  static const char *const bshd_name[4] = {"q_bshd", "k_bshd", "v_bshd", "y_bshd"};
  int bshd[4];
  toplu_tensor_t views[4];
  for (int i = 0; i < 4; i++) {
    const toplu_tensor_t *x = i < 3 ? &ctx->in[i] : &ctx->out[0];
    bshd[i] = toplu__node_attr_int(ctx->node, bshd_name[i], 0) != 0;
    if (bshd[i] && x->ndim != 4)
      return toplu__kernel_error(ctx, TOPLU_ERR_SHAPE, "%s needs a rank-4 tensor, not rank %d", bshd_name[i], x->ndim);
    views[i] = *x;
    if (bshd[i]) toplu__sdpa_view(x, i == 1, &views[i]); /* Y [B, T, H, dv]: Q's permutation */
  }
  const toplu_tensor_t *q = &views[0], *kt = &views[1], *v = &views[2], *y = &views[3];
  const toplu_tensor_t *m = ctx->n_in > 3 && ctx->in[3].ndim >= 0 ? &ctx->in[3] : NULL;
  for (int i = 0; i < 3; i++)
    if (ctx->in[i].dtype != TOPLU_DTYPE_FLOAT || ctx->in[i].ndim < 2)
      return toplu__kernel_error(ctx, TOPLU_ERR_UNSUPPORTED, "input %d must be float32 of rank >= 2", i);
  if (m && m->dtype != TOPLU_DTYPE_FLOAT && m->dtype != TOPLU_DTYPE_BOOL)
    return toplu__kernel_error(ctx, TOPLU_ERR_UNSUPPORTED, "mask is %s; float32 or bool expected", toplu_dtype_name(m->dtype));
  int nd = y->ndim;
  if (nd < 2 || y->dtype != TOPLU_DTYPE_FLOAT) return toplu__kernel_error(ctx, TOPLU_ERR_UNSUPPORTED, "output must be float32 of rank >= 2");
  sdpa_state_t *st = toplu__kernel_alloc(ctx, sizeof *st);
  if (!st) return toplu__kernel_error(ctx, TOPLU_ERR_OUT_OF_MEMORY, "out of memory");
  memset(st, 0, sizeof *st);
  ctx->state = st;
  st->t = y->dims[nd - 2];
  st->dv = y->dims[nd - 1];
  st->d = q->dims[q->ndim - 1];
  int64_t tq = q->dims[q->ndim - 2], sk = kt->dims[kt->ndim - 1];
  st->s = v->dims[v->ndim - 2];
  if (kt->dims[kt->ndim - 2] != st->d || v->dims[v->ndim - 1] != st->dv || !fits(tq, st->t) || !fits(sk, st->s))
    return toplu__kernel_error(ctx, TOPLU_ERR_SHAPE, "Q, KT, V and Y do not agree on T, S, d and dv");
  st->q_rows_bcast = tq != st->t;
  st->k_cols_bcast = sk != st->s;
  st->nlead = nd - 2;
  st->nheads = 1;
  for (int k = 0; k < st->nlead; k++) st->lead[k] = y->dims[k], st->nheads *= y->dims[k];
  st->k_trans = bshd[1];
  st->ld[SDPA_Q] = st->d;
  st->ld[SDPA_K] = sk;
  st->ld[SDPA_V] = st->dv;
  st->ld[SDPA_Y] = st->dv;
  int bad = (bshd[0] ? bshd_strides(&ctx->in[0], st->nlead, st->lead, st->str[SDPA_Q], &st->ld[SDPA_Q])
                     : lead_strides(q, nd, st->nlead, st->lead, tq * st->d, st->str[SDPA_Q])) ||
            (bshd[1] ? bshd_strides(&ctx->in[1], st->nlead, st->lead, st->str[SDPA_K], &st->ld[SDPA_K])
                     : lead_strides(kt, nd, st->nlead, st->lead, st->d * sk, st->str[SDPA_K])) ||
            (bshd[2] ? bshd_strides(&ctx->in[2], st->nlead, st->lead, st->str[SDPA_V], &st->ld[SDPA_V])
                     : lead_strides(v, nd, st->nlead, st->lead, st->s * st->dv, st->str[SDPA_V])) ||
            (bshd[3] ? bshd_strides(&ctx->out[0], st->nlead, st->lead, st->str[SDPA_Y], &st->ld[SDPA_Y])
                     : lead_strides(y, nd, st->nlead, st->lead, st->t * st->dv, st->str[SDPA_Y]));
  if (m) {
    int64_t mt = m->ndim >= 2 ? m->dims[m->ndim - 2] : 1, ms = m->ndim >= 1 ? m->dims[m->ndim - 1] : 1;
    if (m->ndim > nd || !fits(mt, st->t) || !fits(ms, st->s))
      return toplu__kernel_error(ctx, TOPLU_ERR_SHAPE, "the mask does not broadcast to the scores [..., %lld, %lld]",
                                (long long)st->t, (long long)st->s);
    st->m_col = ms == 1 ? 0 : 1;
    st->m_row = mt == 1 ? 0 : ms;
    /* the mask's leading dims: those of rank nd, with the mask's missing dims 1 */
    toplu_tensor_t mv = *m;
    if (mv.ndim < 2) {
      mv.ndim = 2;
      mv.dims[0] = 1, mv.dims[1] = ms;
    }
    bad = bad || lead_strides(&mv, nd, st->nlead, st->lead, mt * ms, st->str[SDPA_M]);
    st->mask = m->dtype == TOPLU_DTYPE_BOOL ? 2 : 1;
  }
  if (bad) return toplu__kernel_error(ctx, TOPLU_ERR_SHAPE, "the leading dims of Q, KT, V and the mask do not broadcast to Y's");
  st->scale = toplu__node_attr_float(ctx->node, "scale", 1.f);
  st->fill = toplu__node_attr_float(ctx->node, "mask_fill", 0.f);
  st->keep = toplu__node_attr_int(ctx->node, "mask_keep", 1) != 0;
  int64_t s = st->s > 0 ? st->s : 1;
  int64_t rows = SDPA_BLOCK_BYTES / ((int64_t)sizeof(float) * s);
  if (rows < SDPA_MIN_ROWS) rows = SDPA_MIN_ROWS;
  if (rows > st->t) rows = st->t > 0 ? st->t : 1;
  st->threads = ctx->threads > 0 ? ctx->threads : 1;
  /* at batch 1, split a head's rows so every thread gets a task */
  int64_t blocks = (st->t + rows - 1) / rows;
  while (st->nheads * blocks < st->threads && rows > 1) {
    rows = (rows + 1) / 2;
    blocks = (st->t + rows - 1) / rows;
  }
  st->rows = rows;
  st->scratch = (rows * s + 15) / 16 * 16;
  info->workspace_bytes = (size_t)st->threads * (size_t)st->scratch * sizeof(float);
  info->state_bytes = sizeof *st;
  info->impl = "toplu:attention:sgemm";
  return TOPLU_OK;
}

/* Offsets of leading index h into each input. */
static void head_offsets(const sdpa_state_t *st, int64_t h, int64_t off[SDPA_N]) {
  for (int i = 0; i < SDPA_N; i++) off[i] = 0;
  for (int k = st->nlead - 1; k >= 0; k--) {
    int64_t idx = h % st->lead[k];
    h /= st->lead[k];
    for (int i = 0; i < SDPA_N; i++) off[i] += idx * st->str[i][k];
  }
}

/* One task: rows r0..r0+rb-1 of head h.  0, or a dnnl status. */
static dnnl_status_t sdpa_task(const sdpa_state_t *st, const toplu__kernel_ctx_t *ctx, int64_t h, int64_t r0, int64_t rb,
                               float *sc) {
  int64_t off[SDPA_N];
  head_offsets(st, h, off);
  const float *q = (const float *)ctx->in[0].data + off[SDPA_Q];
  const float *kt = (const float *)ctx->in[1].data + off[SDPA_K];
  const float *v = (const float *)ctx->in[2].data + off[SDPA_V];
  float *y = (float *)ctx->out[0].data + off[SDPA_Y] + r0 * st->ld[SDPA_Y];
  int64_t s = st->s, d = st->d;
  int64_t mq = st->q_rows_bcast ? 1 : rb;  /* rows of Q in the product */
  int64_t nk = st->k_cols_bcast ? 1 : s;   /* columns of KT in the product */
  if (d > 0) {
    dnnl_status_t e = dnnl_sgemm('N', st->k_trans ? 'T' : 'N', mq, nk, d, st->scale,
                                 q + (st->q_rows_bcast ? 0 : r0 * st->ld[SDPA_Q]), st->ld[SDPA_Q], kt, st->ld[SDPA_K],
                                 0.f, sc, s);
    if (e != dnnl_success) return e;
  } else {
    for (int64_t i = 0; i < mq; i++) memset(sc + i * s, 0, (size_t)nk * sizeof(float));
  }
  /* widen a broadcast KT column, then a broadcast Q row */
  if (st->k_cols_bcast)
    for (int64_t i = 0; i < mq; i++)
      for (int64_t j = 1; j < s; j++) sc[i * s + j] = sc[i * s];
  for (int64_t i = mq; i < rb; i++) memcpy(sc + i * s, sc, (size_t)s * sizeof(float));
  for (int64_t i = 0; i < rb; i++) {
    float *row = sc + i * s;
    if (st->mask == 1) {
      const float *mr = (const float *)ctx->in[3].data + off[SDPA_M] + (r0 + i) * st->m_row;
      if (st->m_col)
        for (int64_t j = 0; j < s; j++) row[j] += mr[j];
      else
        for (int64_t j = 0; j < s; j++) row[j] += mr[0];
    } else if (st->mask == 2) {
      const uint8_t *mr = (const uint8_t *)ctx->in[3].data + off[SDPA_M] + (r0 + i) * st->m_row;
      float f = st->fill;
      if (st->keep)
        for (int64_t j = 0; j < s; j++) row[j] = mr[j * st->m_col] ? row[j] : f;
      else
        for (int64_t j = 0; j < s; j++) row[j] = mr[j * st->m_col] ? f : row[j];
    }
    float mx = toplu__row_max(row, s);
    float inv = 1.f / toplu__row_expsum(row, row, s, mx);
    for (int64_t j = 0; j < s; j++) row[j] *= inv;
  }
  return dnnl_sgemm('N', 'N', rb, st->dv, s, 1.f, sc, s, v, st->ld[SDPA_V], 0.f, y, st->ld[SDPA_Y]);
}

static toplu_status_t sdpa_run(toplu__kernel_ctx_t *ctx) {
  const sdpa_state_t *st = ctx->state;
  if (st->nheads == 0 || st->t == 0 || st->dv == 0) return TOPLU_OK;
  if (st->s == 0) { /* softmax over nothing, times nothing: zeros, as MatMul gives */
    memset(ctx->out[0].data, 0, (size_t)(st->nheads * st->t * st->dv) * sizeof(float));
    return TOPLU_OK;
  }
  int64_t blocks = (st->t + st->rows - 1) / st->rows, tasks = st->nheads * blocks;
  int nt = ctx->threads < st->threads ? ctx->threads : st->threads;
  if (nt < 1) nt = 1;
  if (tasks < nt) nt = (int)tasks;
  float *ws = ctx->workspace;
  dnnl_status_t fail = dnnl_success;
#pragma omp parallel num_threads(nt) if (nt > 1)
  {
    float *sc = ws + (int64_t)omp_get_thread_num() * st->scratch;
#pragma omp for schedule(dynamic, 1)
    for (int64_t k = 0; k < tasks; k++) {
      int64_t h = k / blocks, r0 = (k % blocks) * st->rows;
      int64_t rb = st->t - r0 < st->rows ? st->t - r0 : st->rows;
      dnnl_status_t e = sdpa_task(st, ctx, h, r0, rb, sc);
      if (e != dnnl_success) {
#pragma omp critical(toplu_sdpa_fail)
        fail = e;
      }
    }
  }
  if (fail != dnnl_success) return toplu__dnnl_error(ctx, fail, "sgemm");
  return TOPLU_OK;
}

static void sdpa_release(toplu__kernel_ctx_t *ctx) {
  if (ctx->state) toplu__kernel_free(ctx, ctx->state);
  ctx->state = NULL;
}

const toplu__kernel_t toplu__kernels_attention[] = {
    {"ScaledDotProductAttention", "toplu", sdpa_prepare, sdpa_run, sdpa_release, 0, NULL, NULL, NULL},
    {NULL, NULL, NULL, NULL, NULL, 0, NULL, NULL, NULL},
};
