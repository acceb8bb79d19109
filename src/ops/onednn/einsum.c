/*
 * ops/onednn/einsum.c - Einsum-12 of two float32 inputs as batched GEMMs
 * (dnnl_sgemm), before the general loop of ops/linalg.c.
 *
 * Every label of the equation (graph/einsum.h) falls in one group:
 *   batch  in both inputs and the output          (b, h of "bhtd,bhsd->bhts")
 *   M      in the first input and the output only  (t)
 *   N      in the second input and the output only (s)
 *   K      not in the output: summed               (d)
 * so Y[batch][M][N] = sum over K of A[batch][M][K] . B[batch][K][N], each group
 * flattened to one index.  A label missing from one input (summed within the
 * other alone, or a "..." dim that input lacks) and a broadcast dim of 1
 * read with stride 0; a label repeated within a term reads its diagonal (the
 * strides add: graph/einsum.h).  The operands are gathered into packed
 * [batch][M][K] and [batch][K][N] blocks in the workspace (a plain copy where
 * the innermost group is already contiguous), multiplied by dnnl_sgemm per
 * batch and block of M rows (one task per thread, each sgemm on its own
 * thread inside the parallel region, as ops/onednn/attention.c), and
 * scattered into Y's layout.  The loop of ops/linalg.c summed every output
 * element alone in double on one thread: 'bhtd,bhsd->bhts' on [8, 4, 128, 16]
 * took 120-136 ms against ONNX Runtime's 1.4 ms (a fresh user's finding,
 * 2026-12-06).  Float32 sums in sgemm's order, as MatMul: not the loop's
 * double sums.  Other dtypes, one input or more than two: the general loop.
 */
#include <omp.h>
#include <stdlib.h>
#include <string.h>

#include "graph/einsum.h"
#include "ops/onednn/onednn.h"
#include "ops/tensor_copy.h"

enum { EG_B, EG_M, EG_N, EG_K, EG_GROUPS };

typedef struct einsum_gemm_state {
  int64_t nb, m, n, k;  /* the groups' sizes */
  /* offsets (elements) of every flattened group index in A, B and Y: a_b[nb], a_m[m], a_k[k]; b_b[nb], b_k[k],
   * b_n[n]; y_b[nb], y_m[m], y_n[n] */
  int64_t *a_b, *a_m, *a_k, *b_b, *b_k, *b_n, *y_b, *y_m, *y_n;
  int a_k_dense, b_n_dense, y_n_dense; /* the innermost table is 0, 1, 2, ...: rows copied whole */
  int64_t rows;         /* M rows per task */
  int threads;
} einsum_gemm_state_t;

/* The offsets of every index of a group (labels lab[0..nl), the last fastest) in a tensor with per-label
 * strides str. */
static void group_offsets(int nl, const int *lab, const int64_t *size, const int64_t *str, int64_t *off) {
  int64_t n = 1;
  for (int i = 0; i < nl; i++) n *= size[lab[i]];
  for (int64_t t = 0; t < n; t++) {
    int64_t rem = t, o = 0;
    for (int i = nl - 1; i >= 0; i--) {
      int64_t c = rem % size[lab[i]];
      rem /= size[lab[i]];
      o += c * str[lab[i]];
    }
    off[t] = o;
  }
}

static int dense(const int64_t *off, int64_t n) {
  for (int64_t i = 0; i < n; i++)
    if (off[i] != i) return 0;
  return 1;
}

static toplu_status_t eg_prepare(toplu__kernel_ctx_t *ctx, toplu__kernel_info_t *info) {
  if (ctx->n_in != 2 || ctx->in[0].dtype != TOPLU_DTYPE_FLOAT || ctx->in[1].dtype != TOPLU_DTYPE_FLOAT ||
      ctx->out[0].dtype != TOPLU_DTYPE_FLOAT)
    return toplu__kernel_error(ctx, TOPLU_ERR_UNSUPPORTED, "Einsum as GEMMs takes two float32 inputs");
  int ranks[2] = {ctx->in[0].ndim, ctx->in[1].ndim};
  toplu__einsum_t e;
  char why[200];
  if (toplu__einsum_parse(toplu__node_attr_string(ctx->node, "equation", ""), 2, ranks, &e, why, sizeof why))
    return toplu__kernel_error(ctx, TOPLU_ERR_UNSUPPORTED, "equation: %s", why); /* the general kernel says it */
  int64_t size[TOPLU_EINSUM_MAX_LABELS], str[3][TOPLU_EINSUM_MAX_LABELS];
  uint8_t in[3][TOPLU_EINSUM_MAX_LABELS];
  memset(str, 0, sizeof str);
  memset(in, 0, sizeof in);
  for (int l = 0; l < TOPLU_EINSUM_MAX_LABELS; l++) size[l] = 1;
  for (int i = 0; i < 2; i++) {
    int64_t ds[TOPLU_MAX_DIMS];
    toplu__dense_strides(&ctx->in[i], ds);
    for (int d = 0; d < ranks[i]; d++) {
      int l = e.in_label[i][d];
      int64_t v = ctx->in[i].dims[d];
      in[i][l] = 1;
      if (v != 1) size[l] = v;
      if (v != 1) str[i][l] += ds[d]; /* a dim of 1 (broadcast or not) adds nothing */
    }
  }
  const toplu_tensor_t *y = &ctx->out[0];
  if (y->ndim != e.out_rank) return toplu__kernel_error(ctx, TOPLU_ERR_UNSUPPORTED, "output rank");
  int64_t ys[TOPLU_MAX_DIMS];
  toplu__dense_strides(y, ys);
  for (int d = 0; d < e.out_rank; d++) {
    int l = e.out_label[d];
    if (in[2][l]) return toplu__kernel_error(ctx, TOPLU_ERR_UNSUPPORTED, "a label repeated in the output");
    in[2][l] = 1;
    if (y->dims[d] != 1) str[2][l] = ys[d];
  }
  int lab[EG_GROUPS][TOPLU_EINSUM_MAX_LABELS], nl[EG_GROUPS] = {0};
  int64_t gs[EG_GROUPS] = {1, 1, 1, 1};
  for (int l = 0; l < TOPLU_EINSUM_MAX_LABELS; l++) {
    if (!in[0][l] && !in[1][l]) continue;
    int g = !in[2][l] ? EG_K : in[0][l] && in[1][l] ? EG_B : in[0][l] ? EG_M : EG_N;
    lab[g][nl[g]++] = l;
    gs[g] *= size[l];
  }
  int64_t ab = gs[EG_B] * gs[EG_M] * gs[EG_K], bb = gs[EG_B] * gs[EG_K] * gs[EG_N], cb = gs[EG_B] * gs[EG_M] * gs[EG_N];
  if (gs[EG_M] > INT32_MAX || gs[EG_N] > INT32_MAX || gs[EG_K] > INT32_MAX)
    return toplu__kernel_error(ctx, TOPLU_ERR_UNSUPPORTED, "a group past 2^31 - 1 for sgemm");
  int64_t ntab = 3 * gs[EG_B] + 2 * (gs[EG_M] + gs[EG_N] + gs[EG_K]);
  size_t bytes = sizeof(einsum_gemm_state_t) + (size_t)ntab * sizeof(int64_t);
  einsum_gemm_state_t *s = toplu__kernel_alloc(ctx, bytes);
  if (!s) return toplu__kernel_error(ctx, TOPLU_ERR_OUT_OF_MEMORY, "out of memory");
  memset(s, 0, sizeof *s);
  ctx->state = s;
  info->state_bytes = bytes;
  s->nb = gs[EG_B], s->m = gs[EG_M], s->n = gs[EG_N], s->k = gs[EG_K];
  int64_t *t = (int64_t *)(s + 1);
  s->a_b = t, t += s->nb;
  s->a_m = t, t += s->m;
  s->a_k = t, t += s->k;
  s->b_b = t, t += s->nb;
  s->b_k = t, t += s->k;
  s->b_n = t, t += s->n;
  s->y_b = t, t += s->nb;
  s->y_m = t, t += s->m;
  s->y_n = t;
  group_offsets(nl[EG_B], lab[EG_B], size, str[0], s->a_b);
  group_offsets(nl[EG_M], lab[EG_M], size, str[0], s->a_m);
  group_offsets(nl[EG_K], lab[EG_K], size, str[0], s->a_k);
  group_offsets(nl[EG_B], lab[EG_B], size, str[1], s->b_b);
  group_offsets(nl[EG_K], lab[EG_K], size, str[1], s->b_k);
  group_offsets(nl[EG_N], lab[EG_N], size, str[1], s->b_n);
  group_offsets(nl[EG_B], lab[EG_B], size, str[2], s->y_b);
  group_offsets(nl[EG_M], lab[EG_M], size, str[2], s->y_m);
  group_offsets(nl[EG_N], lab[EG_N], size, str[2], s->y_n);
  s->a_k_dense = dense(s->a_k, s->k);
  s->b_n_dense = dense(s->b_n, s->n);
  s->y_n_dense = dense(s->y_n, s->n);
  s->threads = ctx->threads < 1 ? 1 : ctx->threads;
  /* tasks: a batch each, its M rows split so that there are at least as many tasks as threads */
  int64_t per = s->nb >= s->threads ? 1 : (s->threads + s->nb - 1) / s->nb;
  s->rows = s->m > 0 ? (s->m + per - 1) / per : 1;
  info->workspace_bytes = toplu__align64((size_t)ab * sizeof(float)) + toplu__align64((size_t)bb * sizeof(float)) +
                          toplu__align64((size_t)cb * sizeof(float));
  info->impl = "toplu:einsum:sgemm";
  return TOPLU_OK;
}

static toplu_status_t eg_run(toplu__kernel_ctx_t *ctx) {
  const einsum_gemm_state_t *s = ctx->state;
  const float *a = ctx->in[0].data, *b = ctx->in[1].data;
  float *y = ctx->out[0].data;
  const int64_t nb = s->nb, m = s->m, n = s->n, k = s->k;
  if (nb * m * n == 0) return TOPLU_OK;
  if (k == 0) { /* a sum over nothing */
    for (int64_t ib = 0; ib < nb; ib++)
      for (int64_t i = 0; i < m; i++)
        for (int64_t j = 0; j < n; j++) y[s->y_b[ib] + s->y_m[i] + s->y_n[j]] = 0.f;
    return TOPLU_OK;
  }
  float *ap = ctx->workspace;
  float *bp = (float *)((char *)ap + toplu__align64((size_t)(nb * m * k) * sizeof(float)));
  float *cp = (float *)((char *)bp + toplu__align64((size_t)(nb * k * n) * sizeof(float)));
  const int64_t blocks = (m + s->rows - 1) / s->rows, tasks = nb * blocks;
  int nt = s->threads < ctx->threads ? s->threads : ctx->threads;
  if (nt < 1) nt = 1;
  if (tasks < nt) nt = (int)tasks;
  dnnl_status_t fail = dnnl_success;
#pragma omp parallel num_threads(nt) if (nt > 1)
  {
    /* B of every batch first: the tasks of one batch share it */
#pragma omp for schedule(static)
    for (int64_t q = 0; q < nb * k; q++) {
      int64_t ib = q / k, p = q % k;
      const float *src = b + s->b_b[ib] + s->b_k[p];
      float *dst = bp + q * n;
      if (s->b_n_dense) memcpy(dst, src, (size_t)n * sizeof(float));
      else
        for (int64_t j = 0; j < n; j++) dst[j] = src[s->b_n[j]];
    }
#pragma omp for schedule(dynamic, 1)
    for (int64_t task = 0; task < tasks; task++) {
      int64_t ib = task / blocks, r0 = (task % blocks) * s->rows, rb = m - r0 < s->rows ? m - r0 : s->rows;
      float *ab = ap + (ib * m + r0) * k, *cb = cp + (ib * m + r0) * n;
      for (int64_t i = 0; i < rb; i++) {
        const float *src = a + s->a_b[ib] + s->a_m[r0 + i];
        if (s->a_k_dense) memcpy(ab + i * k, src, (size_t)k * sizeof(float));
        else
          for (int64_t p = 0; p < k; p++) ab[i * k + p] = src[s->a_k[p]];
      }
      dnnl_status_t st = dnnl_sgemm('N', 'N', rb, n, k, 1.f, ab, k, bp + ib * k * n, n, 0.f, cb, n);
      if (st != dnnl_success) {
#pragma omp critical(toplu_einsum_fail)
        fail = st;
        continue;
      }
      for (int64_t i = 0; i < rb; i++) {
        float *dst = y + s->y_b[ib] + s->y_m[r0 + i];
        if (s->y_n_dense) memcpy(dst, cb + i * n, (size_t)n * sizeof(float));
        else
          for (int64_t j = 0; j < n; j++) dst[s->y_n[j]] = cb[i * n + j];
      }
    }
  }
  if (fail != dnnl_success) return toplu__dnnl_error(ctx, fail, "sgemm");
  return TOPLU_OK;
}

static void eg_release(toplu__kernel_ctx_t *ctx) {
  if (ctx->state) toplu__kernel_free(ctx, ctx->state);
  ctx->state = NULL;
}

const toplu__kernel_t toplu__kernels_einsum_gemm[] = {
    {"Einsum", "", eg_prepare, eg_run, eg_release, 0, NULL, NULL, NULL},
    {NULL, NULL, NULL, NULL, NULL, 0, NULL, NULL, NULL},
};
