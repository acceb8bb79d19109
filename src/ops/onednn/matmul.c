/*
 * ops/matmul.c - MatMul-1/9/13 and Gemm-7..13 kernels on oneDNN (float32).
 *
 * MatMul: one oneDNN matmul primitive over the whole (broadcast) batch, with
 * a constant B reordered once at plan time into the layout oneDNN prefers
 * and the node's fused post-ops inside the primitive.  Shapes oneDNN does
 * not take fall back to dnnl_sgemm per batch matrix.
 * Gemm: with a constant B, alpha 1 and a row (or no) C, one oneDNN matmul
 * with B packed once and beta * C as bias; otherwise dst is filled with
 * beta * C broadcast to [M, N], then dnnl_sgemm(transA, transB, alpha,
 * beta = 1) accumulates alpha * A' * B' into it (row-major BLAS semantics),
 * then post-ops.
 */
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ops/choice.h"
#include "ops/fastmath.h"
#include "ops/onednn/gemm_avx2.h"
#include "ops/onednn/onednn.h"
#include "toplu/session.h"

#define MM_MAX 10

typedef struct mm_state {
  int use_prim;
  int bias_input;              /* fused TOPLU_POST_BIAS: the input holding the [N] row, or -1 */
  int sum_input;               /* fused TOPLU_POST_SUM: the input holding the addend, or -1 */
  int gelu_after;              /* the last post-op is GELU, applied after the primitive (oneDNN 2.6's
                                  gelu_erf post-op in gemm:jit ran at 8 ns per element) */
  toplu__dnnl_prim_t prim;
  void *packed_b;
  /* fallback: batch loop geometry (row-major, broadcast by index arithmetic) */
  int r;                       /* rank of the batch part */
  int64_t batch[MM_MAX], abatch[MM_MAX], bbatch[MM_MAX];
  int64_t m, n, k, nbatch;
} mm_state_t;

static toplu_status_t check_float(toplu__kernel_ctx_t *ctx, int n) {
  for (int i = 0; i < n && i < ctx->n_in; i++)
    if (ctx->in[i].ndim >= 0 && ctx->in[i].dtype != TOPLU_DTYPE_FLOAT)
      return toplu__kernel_error(ctx, TOPLU_ERR_UNSUPPORTED, "toplu runs %s on float32 only (input %d is %s)",
                                ctx->node->op_type, i, toplu_dtype_name(ctx->in[i].dtype));
  return TOPLU_OK;
}

static dnnl_status_t plain_md(dnnl_memory_desc_t *md, int nd, const int64_t *dims) {
  dnnl_dims_t d;
  for (int i = 0; i < nd; i++) d[i] = dims[i];
  dnnl_dims_t s;
  int64_t st = 1;
  for (int i = nd - 1; i >= 0; i--) {
    s[i] = st;
    st *= d[i] ? d[i] : 1;
  }
  return dnnl_memory_desc_init_by_strides(md, nd, d, dnnl_f32, s);
}

/* The inputs of a MatMul's fused BIAS (a float32 row of the output's last
 * dim, first post-op only) and SUM (a float32 addend of the output's size),
 * -1 when absent, and the SUM's position in the post-ops; the reason in
 * *why when the fusion is not well formed. */
static int mm_fused_inputs(const toplu__kernel_ctx_t *ctx, int *bias, int *sum, int *sum_pos, const char **why) {
  const toplu_tensor_t *y = &ctx->out[0];
  *bias = *sum = *sum_pos = -1;
  for (int i = 0; i < ctx->node->n_post; i++) {
    const toplu__post_op_t *po = &ctx->node->post[i];
    int k = po->input;
    int ok = k >= 0 && k < ctx->n_in && ctx->in[k].dtype == TOPLU_DTYPE_FLOAT;
    if (po->kind == TOPLU_POST_BIAS) {
      if (i || !ok || y->ndim < 1 || toplu_tensor_numel(&ctx->in[k]) != y->dims[y->ndim - 1])
        return *why = "fused bias: not a float32 row of the output's last dim", 0;
      *bias = k;
    } else if (po->kind == TOPLU_POST_SUM) {
      if (*sum >= 0 || !ok || toplu_tensor_nbytes(&ctx->in[k]) != toplu_tensor_nbytes(y))
        return *why = "fused sum: the addend is not the output's shape", 0;
      *sum = k;
      *sum_pos = i;
    }
  }
  return 1;
}

static toplu_status_t matmul_prepare(toplu__kernel_ctx_t *ctx, toplu__kernel_info_t *info) {
  toplu_status_t st = check_float(ctx, 2);
  if (st) return st;
  const toplu_tensor_t *a = &ctx->in[0], *b = &ctx->in[1];
  mm_state_t *ms = toplu__kernel_alloc(ctx, sizeof *ms);
  if (!ms) return toplu__kernel_error(ctx, TOPLU_ERR_OUT_OF_MEMORY, "out of memory");
  memset(ms, 0, sizeof *ms);
  ctx->state = ms;
  int sum_pos;
  const char *why;
  if (!mm_fused_inputs(ctx, &ms->bias_input, &ms->sum_input, &sum_pos, &why))
    return toplu__kernel_error(ctx, TOPLU_ERR_INTERNAL, "%s", why);
  info->inplace_input = ms->sum_input; /* dst may take over the addend's buffer */
  /* Promote to [batch..., M, K] x [batch..., K, N] with a common batch rank. */
  int64_t m = a->ndim >= 2 ? a->dims[a->ndim - 2] : 1, k = a->dims[a->ndim - 1];
  int64_t n = b->ndim >= 2 ? b->dims[b->ndim - 1] : 1;
  int ba = a->ndim > 2 ? a->ndim - 2 : 0, bb = b->ndim > 2 ? b->ndim - 2 : 0;
  int r = ba > bb ? ba : bb;
  if (r + 2 > MM_MAX) return toplu__kernel_error(ctx, TOPLU_ERR_UNSUPPORTED, "rank too high");
  ms->r = r;
  ms->m = m;
  ms->n = n;
  ms->k = k;
  ms->nbatch = 1;
  for (int i = 0; i < r; i++) {
    int ia = i - (r - ba), ib = i - (r - bb);
    ms->abatch[i] = ia >= 0 ? a->dims[ia] : 1;
    ms->bbatch[i] = ib >= 0 ? b->dims[ib] : 1;
    ms->batch[i] = ms->abatch[i] > ms->bbatch[i] ? ms->abatch[i] : ms->bbatch[i];
    ms->nbatch *= ms->batch[i];
  }
  int64_t ad[MM_MAX], bd[MM_MAX], od[MM_MAX];
  int nd = r + 2;
  for (int i = 0; i < r; i++) {
    ad[i] = ms->abatch[i];
    bd[i] = ms->bbatch[i];
    od[i] = ms->batch[i];
  }
  ad[r] = m, ad[r + 1] = k;
  bd[r] = k, bd[r + 1] = n;
  od[r] = m, od[r + 1] = n;
  if (m == 0 || n == 0 || k == 0 || ms->nbatch == 0) return TOPLU_OK; /* fallback handles empties */
  dnnl_memory_desc_t amd, bmd, bany, omd;
  memset(&bmd, 0, sizeof bmd);
  dnnl_status_t s = plain_md(&amd, nd, ad);
  if (s == dnnl_success) s = plain_md(&bmd, nd, bd);
  if (s == dnnl_success) s = plain_md(&omd, nd, od);
  int b_const = b->data != NULL;
  bany = bmd;
  if (s == dnnl_success && b_const) {
    dnnl_dims_t dd;
    for (int i = 0; i < nd; i++) dd[i] = bd[i];
    s = dnnl_memory_desc_init_by_tag(&bany, nd, dd, dnnl_f32, dnnl_format_tag_any);
  }
  if (s != dnnl_success) return toplu__dnnl_error(ctx, s, "memory descriptor");
  dnnl_memory_desc_t biasmd;
  if (s == dnnl_success && ms->bias_input >= 0) {
    int64_t bdims[MM_MAX];
    for (int i = 0; i < nd; i++) bdims[i] = 1;
    bdims[nd - 1] = n;
    s = plain_md(&biasmd, nd, bdims);
  }
  if (s != dnnl_success) return toplu__dnnl_error(ctx, s, "memory descriptor");
  dnnl_matmul_desc_t desc;
  dnnl_primitive_desc_t pd = NULL;
  dnnl_primitive_attr_t attr = NULL;
  s = dnnl_matmul_desc_init(&desc, &amd, &bany, ms->bias_input >= 0 ? &biasmd : NULL, &omd);
  if (s == dnnl_success) s = dnnl_primitive_attr_create(&attr);
  if (s == dnnl_success) s = dnnl_primitive_attr_set_scratchpad_mode(attr, dnnl_scratchpad_mode_user);
  int np = ctx->node->n_post;
  ms->gelu_after = np > 0 && ctx->node->post[np - 1].kind == TOPLU_POST_GELU_ERF;
  if (s == dnnl_success) s = toplu__dnnl_append_post_ops_n(ctx->node, np - ms->gelu_after, attr);
  if (s == dnnl_success) s = dnnl_primitive_desc_create(&pd, &desc, attr, toplu__dnnl_engine(ctx->backend), NULL);
  if (attr) dnnl_primitive_attr_destroy(attr);
  if (s != dnnl_success) {
    ms->gelu_after = 0;
    if (ctx->node->n_post) return toplu__dnnl_error(ctx, s, "matmul with post-ops");
    return TOPLU_OK; /* shapes oneDNN does not take: sgemm fallback */
  }
  dnnl_memory_desc_t wmd = *dnnl_primitive_desc_query_md(pd, dnnl_query_weights_md, 0);
  if (b_const) {
    size_t bytes;
    if ((st = toplu__dnnl_pack_const(ctx, info, &bmd, b->data, &wmd, &ms->packed_b, &bytes))) {
      dnnl_primitive_desc_destroy(pd);
      return st;
    }
    info->consumed_consts |= 1u << 1;
  }
  if ((st = toplu__dnnl_prim_create_later(ctx, &ms->prim, pd, 0, info))) return st;
  toplu__dnnl_prim_arg(&ms->prim, DNNL_ARG_SRC, TOPLU_DNNL_FROM_INPUT, 0, NULL, &amd);
  if (b_const) toplu__dnnl_prim_arg(&ms->prim, DNNL_ARG_WEIGHTS, TOPLU_DNNL_FROM_STATE, 1, ms->packed_b, &wmd);
  else toplu__dnnl_prim_arg(&ms->prim, DNNL_ARG_WEIGHTS, TOPLU_DNNL_FROM_INPUT, 1, NULL, &bmd);
  if (ms->bias_input >= 0)
    toplu__dnnl_prim_arg(&ms->prim, DNNL_ARG_BIAS, TOPLU_DNNL_FROM_INPUT, ms->bias_input, NULL, &biasmd);
  toplu__dnnl_prim_arg(&ms->prim, DNNL_ARG_DST, TOPLU_DNNL_FROM_OUTPUT, 0, NULL, &omd);
  ms->use_prim = 1;
  return TOPLU_OK;
}

static toplu_status_t matmul_bind(toplu__kernel_ctx_t *ctx) {
  const mm_state_t *ms = ctx->state;
  if (!ms->use_prim) return TOPLU_OK;
  return toplu__dnnl_prim_bind(ctx, &ms->prim, &ctx->exec_state);
}

static void matmul_unbind(toplu__kernel_ctx_t *ctx) {
  toplu__dnnl_prim_unbind(ctx->exec_state);
  ctx->exec_state = NULL;
}

static toplu_status_t matmul_run(toplu__kernel_ctx_t *ctx) {
  const mm_state_t *ms = ctx->state;
  if (ms->use_prim) {
    if (ms->sum_input >= 0 && ctx->out[0].data != ctx->in[ms->sum_input].data)
      memcpy(ctx->out[0].data, ctx->in[ms->sum_input].data, toplu_tensor_nbytes(&ctx->out[0]));
    toplu_status_t st = toplu__dnnl_prim_execute(ctx, &ms->prim, ctx->exec_state);
    if (st || !ms->gelu_after) return st;
    float *y = ctx->out[0].data;
    int64_t total = toplu_tensor_numel(&ctx->out[0]), chunk = 4096, nch = (total + chunk - 1) / chunk;
    int nt = ctx->threads;
#pragma omp parallel for num_threads(nt) if (nt > 1 && nch > 1) schedule(static)
    for (int64_t c = 0; c < nch; c++) {
      int64_t e = c * chunk + chunk < total ? c * chunk + chunk : total;
      toplu__gelu_erf_f32(y + c * chunk, e - c * chunk);
    }
    return TOPLU_OK;
  }
  const float *a = ctx->in[0].data, *b = ctx->in[1].data;
  float *y = ctx->out[0].data;
  int64_t m = ms->m, n = ms->n, k = ms->k;
  if (!toplu_tensor_numel(&ctx->out[0])) return TOPLU_OK;
  /* a fused sum whose addend already sits in y (the planner let y take its
   * buffer) is accumulated by the gemm itself (beta 1); BIAS, the only
   * post-op before a SUM, commutes with it */
  int acc_sum = ms->sum_input >= 0 && ctx->in[ms->sum_input].data == (const void *)y;
  for (int64_t bi = 0; bi < ms->nbatch; bi++) {
    /* batch index -> offsets into A and B with broadcasting */
    int64_t rem = bi, aoff = 0, boff = 0, astr = 1, bstr = 1;
    for (int i = ms->r - 1; i >= 0; i--) {
      int64_t idx = rem % ms->batch[i];
      rem /= ms->batch[i];
      aoff += (ms->abatch[i] == 1 ? 0 : idx) * astr;
      boff += (ms->bbatch[i] == 1 ? 0 : idx) * bstr;
      astr *= ms->abatch[i];
      bstr *= ms->bbatch[i];
    }
    float *yb = y + bi * m * n;
    if (k == 0) {
      if (!acc_sum) memset(yb, 0, (size_t)(m * n) * sizeof(float));
      continue;
    }
    dnnl_status_t s = dnnl_sgemm('N', 'N', m, n, k, 1.f, a + aoff * m * k, k, b + boff * k * n, n, acc_sum ? 1.f : 0.f,
                                 yb, n);
    if (s != dnnl_success) return toplu__dnnl_error(ctx, s, "sgemm");
  }
  int64_t total = toplu_tensor_numel(&ctx->out[0]);
  for (int i = 0; i < ctx->node->n_post; i++) {
    const toplu__post_op_t *po = &ctx->node->post[i];
    if (po->kind == TOPLU_POST_BIAS) {
      const float *bias = ctx->in[po->input].data;
      for (int64_t e = 0; e < total; e++) y[e] += bias[e % n];
    } else if (po->kind == TOPLU_POST_SUM) {
      const float *addend = ctx->in[po->input].data;
      if (!acc_sum)
        for (int64_t e = 0; e < total; e++) y[e] += addend[e];
    } else {
      toplu__post_apply(po, y, total);
    }
  }
  return TOPLU_OK;
}

static void matmul_release(toplu__kernel_ctx_t *ctx) {
  mm_state_t *ms = ctx->state;
  if (!ms) return;
  toplu__dnnl_prim_destroy(&ms->prim);
  toplu__dnnl_pack_release(ctx, ms->packed_b);
  toplu__kernel_free(ctx, ms);
  ctx->state = NULL;
}

/* ---- Gemm ---- */

/* Gemm with a constant B, alpha 1 and C absent or a [N] / [1, N] row (the
 * classifier head of every CNN): one oneDNN matmul with B packed once and
 * beta * C as its bias.  Other forms use dnnl_sgemm at run time. */
typedef struct gemm_state {
  toplu__dnnl_prim_t prim;
  void *packed_b, *bias;
  int use_prim;
} gemm_state_t;

static toplu_status_t gemm_prepare(toplu__kernel_ctx_t *ctx, toplu__kernel_info_t *info) {
  toplu_status_t st = check_float(ctx, 3);
  if (st) return st;
  const toplu__node_t *nd = ctx->node;
  for (int i = 0; i < nd->n_post; i++)
    if (nd->post[i].kind == TOPLU_POST_SUM)
      return toplu__kernel_error(ctx, TOPLU_ERR_INTERNAL, "Gemm does not take a fused sum");
  gemm_state_t *gs = toplu__kernel_alloc(ctx, sizeof *gs);
  if (!gs) return toplu__kernel_error(ctx, TOPLU_ERR_OUT_OF_MEMORY, "out of memory");
  memset(gs, 0, sizeof *gs);
  ctx->state = gs;
  int ta = toplu__node_attr_int(nd, "transA", 0) != 0, tb = toplu__node_attr_int(nd, "transB", 0) != 0;
  float alpha = toplu__node_attr_float(nd, "alpha", 1.f), beta = toplu__node_attr_float(nd, "beta", 1.f);
  const toplu_tensor_t *a = &ctx->in[0], *b = &ctx->in[1];
  int64_t m = ctx->out[0].dims[0], n = ctx->out[0].dims[1], k = a->dims[ta ? 0 : 1];
  int has_c = ctx->n_in > 2 && ctx->in[2].ndim >= 0 && beta != 0.f;
  const toplu_tensor_t *c = has_c ? &ctx->in[2] : NULL;
  int row_c = !c || (toplu_tensor_numel(c) == n && (c->ndim == 1 || (c->ndim == 2 && c->dims[0] == 1)) &&
                     (c->data || beta == 1.f));
  if (!b->data || alpha != 1.f || !row_c || !m || !n || !k) return TOPLU_OK; /* dnnl_sgemm at run time */
  dnnl_memory_desc_t amd, bmd, bany, omd, cmd;
  dnnl_dims_t ad = {m, k}, as = {ta ? 1 : k, ta ? m : 1}, bd = {k, n}, bs = {tb ? 1 : n, tb ? k : 1}, od = {m, n},
              cd = {1, n};
  dnnl_status_t s = dnnl_memory_desc_init_by_strides(&amd, 2, ad, dnnl_f32, as);
  if (s == dnnl_success) s = dnnl_memory_desc_init_by_strides(&bmd, 2, bd, dnnl_f32, bs);
  if (s == dnnl_success) s = dnnl_memory_desc_init_by_tag(&bany, 2, bd, dnnl_f32, dnnl_format_tag_any);
  if (s == dnnl_success) s = dnnl_memory_desc_init_by_tag(&omd, 2, od, dnnl_f32, dnnl_ab);
  if (s == dnnl_success) s = dnnl_memory_desc_init_by_tag(&cmd, 2, cd, dnnl_f32, dnnl_ab);
  dnnl_matmul_desc_t desc;
  dnnl_primitive_attr_t attr = NULL;
  dnnl_primitive_desc_t pd = NULL;
  if (s == dnnl_success) s = dnnl_matmul_desc_init(&desc, &amd, &bany, c ? &cmd : NULL, &omd);
  if (s == dnnl_success) s = dnnl_primitive_attr_create(&attr);
  if (s == dnnl_success) s = dnnl_primitive_attr_set_scratchpad_mode(attr, dnnl_scratchpad_mode_user);
  if (s == dnnl_success) s = toplu__dnnl_append_post_ops(nd, attr);
  if (s == dnnl_success) s = dnnl_primitive_desc_create(&pd, &desc, attr, toplu__dnnl_engine(ctx->backend), NULL);
  if (attr) dnnl_primitive_attr_destroy(attr);
  if (s != dnnl_success) return TOPLU_OK; /* oneDNN declines: sgemm */
  dnnl_memory_desc_t wmd = *dnnl_primitive_desc_query_md(pd, dnnl_query_weights_md, 0);
  size_t bytes;
  if ((st = toplu__dnnl_pack_const(ctx, info, &bmd, b->data, &wmd, &gs->packed_b, &bytes))) {
    dnnl_primitive_desc_destroy(pd);
    return st;
  }
  info->consumed_consts |= 1u << 1;
  if (c && c->data && beta != 1.f) {
    /* beta * C, once */
    if (!(gs->bias = toplu__kernel_alloc(ctx, (size_t)n * sizeof(float)))) {
      dnnl_primitive_desc_destroy(pd);
      return toplu__kernel_error(ctx, TOPLU_ERR_OUT_OF_MEMORY, "out of memory");
    }
    const float *cv = c->data;
    float *bv = gs->bias;
    for (int64_t j = 0; j < n; j++) bv[j] = beta * cv[j];
    info->weight_bytes += (size_t)n * sizeof(float);
    info->consumed_consts |= 1u << 2;
  }
  if ((st = toplu__dnnl_prim_create_later(ctx, &gs->prim, pd, 0, info))) return st;
  toplu__dnnl_prim_arg(&gs->prim, DNNL_ARG_SRC, TOPLU_DNNL_FROM_INPUT, 0, NULL, &amd);
  toplu__dnnl_prim_arg(&gs->prim, DNNL_ARG_WEIGHTS, TOPLU_DNNL_FROM_STATE, 1, gs->packed_b, &wmd);
  if (c) {
    if (gs->bias) toplu__dnnl_prim_arg(&gs->prim, DNNL_ARG_BIAS, TOPLU_DNNL_FROM_STATE, 2, gs->bias, &cmd);
    else toplu__dnnl_prim_arg(&gs->prim, DNNL_ARG_BIAS, TOPLU_DNNL_FROM_INPUT, 2, NULL, &cmd);
  }
  toplu__dnnl_prim_arg(&gs->prim, DNNL_ARG_DST, TOPLU_DNNL_FROM_OUTPUT, 0, NULL, &omd);
  gs->use_prim = 1;
  return TOPLU_OK;
}

static toplu_status_t gemm_bind(toplu__kernel_ctx_t *ctx) {
  const gemm_state_t *gs = ctx->state;
  return gs->use_prim ? toplu__dnnl_prim_bind(ctx, &gs->prim, &ctx->exec_state) : TOPLU_OK;
}

static void gemm_release(toplu__kernel_ctx_t *ctx) {
  gemm_state_t *gs = ctx->state;
  if (!gs) return;
  toplu__dnnl_prim_destroy(&gs->prim);
  toplu__dnnl_pack_release(ctx, gs->packed_b);
  toplu__kernel_free(ctx, gs->bias);
  toplu__kernel_free(ctx, gs);
  ctx->state = NULL;
}

static toplu_status_t gemm_run(toplu__kernel_ctx_t *ctx) {
  const gemm_state_t *gs = ctx->state;
  if (gs && gs->use_prim) return toplu__dnnl_prim_execute(ctx, &gs->prim, ctx->exec_state);
  const toplu__node_t *nd = ctx->node;
  int ta = toplu__node_attr_int(nd, "transA", 0) != 0, tb = toplu__node_attr_int(nd, "transB", 0) != 0;
  float alpha = toplu__node_attr_float(nd, "alpha", 1.f), beta = toplu__node_attr_float(nd, "beta", 1.f);
  const toplu_tensor_t *a = &ctx->in[0], *b = &ctx->in[1];
  int64_t m = ctx->out[0].dims[0], n = ctx->out[0].dims[1], k = a->dims[ta ? 0 : 1];
  float *y = ctx->out[0].data;
  int has_c = ctx->n_in > 2 && ctx->in[2].ndim >= 0 && beta != 0.f;
  if (has_c) {
    const toplu_tensor_t *c = &ctx->in[2];
    const float *cv = c->data;
    int64_t cm = c->ndim == 2 ? c->dims[0] : 1, cn = c->ndim >= 1 ? c->dims[c->ndim - 1] : 1;
    for (int64_t i = 0; i < m; i++) {
      const float *row = cv + (cm == 1 ? 0 : i) * cn;
      float *yr = y + i * n;
      if (cn == 1)
        for (int64_t j = 0; j < n; j++) yr[j] = beta * row[0];
      else
        for (int64_t j = 0; j < n; j++) yr[j] = beta * row[j];
    }
  } else {
    memset(y, 0, (size_t)(m * n) * sizeof(float));
  }
  if (m && n && k) {
    dnnl_status_t s = dnnl_sgemm(ta ? 'T' : 'N', tb ? 'T' : 'N', m, n, k, alpha, a->data, ta ? m : k, b->data,
                                 tb ? k : n, 1.f, y, n);
    if (s != dnnl_success) return toplu__dnnl_error(ctx, s, "sgemm");
  }
  for (int i = 0; i < nd->n_post; i++) toplu__post_apply(&nd->post[i], y, m * n);
  return TOPLU_OK;
}

/* ---- MatMul with a constant 2-D B on toplu's own AVX2 GEMM (ops/onednn/gemm_avx2.h) ---- */

typedef struct own_mm_state {
  float *bp;                   /* B packed in 16-column panels; NULL when sgemm runs it */
  int sgemm;                   /* 1: dnnl_sgemm on B in place, then toplu__gemm_post_rows (choose_kernels) */
  int64_t m, n, k;             /* A's rows (all batch dims folded in), B's columns, the shared dim */
  int bias_input, sum_input;   /* fused BIAS / SUM inputs, or -1 */
} own_mm_state_t;

/* ---- the own GEMM against dnnl_sgemm, timed (toplu_session_options_t.choose_kernels, ops/choice.h) ---- */

#define OWN_MM_ROUNDS 3
#define OWN_MM_MAX_S 0.02   /* a first call slower than this: not timed, the own GEMM kept */
#define OWN_MM_MIN_S 50e-6  /* or faster than this: too small to tell apart, the own GEMM kept */
#define OWN_MM_SWITCH 0.97  /* sgemm kept only when at least 3% faster */

/* One call of either candidate on scratch data, as the run does it; seconds. */
static double own_mm_call(int sgemm, const float *a, const float *b, const float *bp, float *c, int64_t m, int64_t n,
                          int64_t k, const toplu__gemm_post_t *po, int threads) {
  int64_t t0 = toplu_monotonic_ns();
  if (sgemm) {
    int acc = po->addend == c;
    dnnl_sgemm('N', 'N', m, n, k, 1.f, a, k, b, n, acc ? 1.f : 0.f, c, n);
    toplu__gemm_post_rows(po, c, m, n, acc, threads);
  } else {
    toplu__gemm_packed(a, k, bp, c, m, n, k, po, threads);
  }
  return (double)(toplu_monotonic_ns() - t0) / 1e9;
}

/* 1 when dnnl_sgemm is to run this product, 0 for the own GEMM: the
 * session's choice for this product, else timed (B packed into a scratch
 * copy for the own side), noted and remembered. */
static int own_mm_choose(toplu__kernel_ctx_t *ctx, const float *b, int64_t m, int64_t n, int64_t k, int bias,
                         int sum) {
  if (!ctx->choices) return 0;
  const toplu__node_t *node = ctx->node;
  char key[256], posts[64] = "";
  size_t pl = 0;
  for (int i = 0; i < node->n_post && pl + 4 < sizeof posts; i++)
    pl += (size_t)snprintf(posts + pl, sizeof posts - pl, "%d,", (int)node->post[i].kind);
  snprintf(key, sizeof key, "MatMul own|sgemm m=%lld n=%lld k=%lld threads=%d bias=%d sum=%d post=%s", (long long)m,
           (long long)n, (long long)k, ctx->threads, bias >= 0, sum >= 0, posts);
  int forced = toplu__choice_forced();
  int w = toplu__choice_get(ctx->choices, key);
  if (w >= 0) return forced >= 0 ? forced : w;
  size_t abytes = toplu__align64((size_t)(m * k) * sizeof(float)), cbytes = toplu__align64((size_t)(m * n) * sizeof(float));
  size_t bbytes = toplu__align64((size_t)n * sizeof(float));
  size_t pbytes = toplu__align64(toplu__gemm_packed_size(k, n) * sizeof(float));
  float *a = aligned_alloc(64, abytes), *c = aligned_alloc(64, cbytes), *bb = aligned_alloc(64, bbytes);
  float *bp = aligned_alloc(64, pbytes);
  if (!a || !c || !bb || !bp) {
    free(a), free(c), free(bb), free(bp);
    return forced > 0;
  }
  toplu__gemm_pack_b(b, n, k, n, bp);
  for (int64_t i = 0; i < m * k; i++) a[i] = (float)((i * 7) % 13) * 0.01f - 0.06f;
  memset(c, 0, cbytes);
  for (int64_t j = 0; j < n; j++) bb[j] = 0.01f;
  /* the addend in C itself: the in-place form the plan gives a residual sum */
  toplu__gemm_post_t po = {.bias = bias >= 0 ? bb : NULL, .node = node, .addend = sum >= 0 ? c : NULL};
  int prev = omp_get_max_threads();
  omp_set_num_threads(ctx->threads); /* dnnl_sgemm's threads, as the plan's run sets them */
  double best[2] = {1e30, 1e30};
  double first = own_mm_call(0, a, b, bp, c, m, n, k, &po, ctx->threads);
  int timed = first <= OWN_MM_MAX_S && first >= OWN_MM_MIN_S;
  if (timed) {
    own_mm_call(1, a, b, bp, c, m, n, k, &po, ctx->threads);
    for (int r = 0; r < OWN_MM_ROUNDS; r++)
      for (int q = 0; q < 2; q++) {
        int side = (r + q) & 1;
        double t = own_mm_call(side, a, b, bp, c, m, n, k, &po, ctx->threads);
        if (t < best[side]) best[side] = t;
      }
  }
  omp_set_num_threads(prev);
  free(a), free(c), free(bb), free(bp);
  if (!timed) { /* too small or too large to time: the own GEMM, remembered without a note */
    toplu__choice_put(ctx->choices, key, 0, NULL, NULL, 0, NULL, 0);
    return forced > 0;
  }
  w = best[1] <= OWN_MM_SWITCH * best[0];
  char what[512];
  snprintf(what, sizeof what, "%s: MatMul '%s' ([%lld x %lld] x [%lld x %lld], %d thread%s)", ctx->graph->path,
           node->name ? node->name : "", (long long)m, (long long)k, (long long)k, (long long)n, ctx->threads,
           ctx->threads == 1 ? "" : "s");
  toplu__choice_put(ctx->choices, key, w, what, w ? "oneDNN's sgemm" : "toplu's GEMM", best[w],
                    w ? "toplu's GEMM" : "oneDNN's sgemm", best[!w]);
  return forced >= 0 ? forced : w;
}

typedef struct own_mm_fill {
  const float *b;
  int64_t k, n;
} own_mm_fill_t;

static void own_mm_fill(void *dst, const void *arg) {
  const own_mm_fill_t *f = arg;
  toplu__gemm_pack_b(f->b, f->n, f->k, f->n, dst);
}

static toplu_status_t own_mm_prepare(toplu__kernel_ctx_t *ctx, toplu__kernel_info_t *info) {
  const toplu_tensor_t *a = &ctx->in[0], *b = &ctx->in[1];
  if (!toplu__gemm_avx2_ok() || ctx->n_in < 2 || a->dtype != TOPLU_DTYPE_FLOAT || b->dtype != TOPLU_DTYPE_FLOAT ||
      !b->data || b->ndim != 2 || a->ndim < 1 || ctx->out[0].dtype != TOPLU_DTYPE_FLOAT)
    return toplu__kernel_error(ctx, TOPLU_ERR_UNSUPPORTED, "own GEMM: float32 A times a constant 2-D B only");
  int64_t k = a->dims[a->ndim - 1], n = b->dims[1];
  if (b->dims[0] != k || k <= 0 || n <= 0)
    return toplu__kernel_error(ctx, TOPLU_ERR_UNSUPPORTED, "own GEMM: empty or mismatched operands");
  /* Against oneDNN 2.6 (best of 200 on an AVX2 Zen 3 pair, 2 threads,
   * docs/performance.md), at 128 rows on every BERT-base shape: 768 x 768
   * 181 against 176 GFLOP/s for dnnl_sgemm, 768 -> 3072 159 against 147,
   * 3072 -> 768 146 against 142 (the matmul primitive was slower than
   * sgemm there); at 512 rows oneDNN was up to 10% faster on 768 -> 3072.
   * On an Intel Xeon with AVX-512 sgemm was the faster at N = 768.  So with
   * ctx->choices (choose_kernels) both are timed per product and the slower
   * dropped; sgemm reads B in place, so plans of one session that chose
   * differently hold one packed copy at most, as before. */
  int64_t m = toplu_tensor_numel(a) / k;
  if (m * n != toplu_tensor_numel(&ctx->out[0]))
    return toplu__kernel_error(ctx, TOPLU_ERR_UNSUPPORTED, "own GEMM: output size");
  int bias, sum, sum_pos;
  const char *why;
  if (!mm_fused_inputs(ctx, &bias, &sum, &sum_pos, &why))
    return toplu__kernel_error(ctx, TOPLU_ERR_UNSUPPORTED, "own GEMM: %s", why);
  /* the products may go onto the addend only when nothing but the bias comes before it */
  if (sum >= 0 && sum_pos > (bias >= 0))
    return toplu__kernel_error(ctx, TOPLU_ERR_UNSUPPORTED, "own GEMM: a fused sum after another post-op");
  own_mm_state_t *os = toplu__kernel_alloc(ctx, sizeof *os);
  if (!os) return toplu__kernel_error(ctx, TOPLU_ERR_OUT_OF_MEMORY, "out of memory");
  memset(os, 0, sizeof *os);
  ctx->state = os;
  os->m = m, os->n = n, os->k = k, os->bias_input = bias, os->sum_input = sum;
  info->inplace_input = sum; /* the products may go onto the addend's buffer */
  if ((os->sgemm = own_mm_choose(ctx, b->data, m, n, k, bias, sum))) {
    info->impl = "onednn:sgemm";
    return TOPLU_OK;
  }
  size_t bytes = toplu__gemm_packed_size(k, n) * sizeof(float);
  own_mm_fill_t fa = {.b = b->data, .k = k, .n = n};
  void *packed = NULL;
  toplu_status_t st = toplu__dnnl_pack_custom(ctx, info, b->data, "gemm_avx2_b16", bytes, own_mm_fill, &fa, &packed);
  if (st) return st;
  os->bp = packed;
  info->consumed_consts |= 1u << 1;
  info->impl = toplu__gemm_avx512_ok() && n >= 4 * TOPLU_GEMM_NR ? "toplu:gemm_6x64:avx512" : "toplu:gemm_6x16:avx2";
  return TOPLU_OK;
}

static toplu_status_t own_mm_run(toplu__kernel_ctx_t *ctx) {
  const own_mm_state_t *os = ctx->state;
  float *y = ctx->out[0].data;
  toplu__gemm_post_t po = {.bias = os->bias_input >= 0 ? ctx->in[os->bias_input].data : NULL, .node = ctx->node,
                           .addend = os->sum_input >= 0 ? ctx->in[os->sum_input].data : NULL};
  if (os->sgemm) {
    int acc = po.addend == y; /* the products go onto the addend in place */
    dnnl_status_t s = dnnl_sgemm('N', 'N', os->m, os->n, os->k, 1.f, ctx->in[0].data, os->k, ctx->in[1].data, os->n,
                                 acc ? 1.f : 0.f, y, os->n);
    if (s != dnnl_success) return toplu__dnnl_error(ctx, s, "sgemm");
    toplu__gemm_post_rows(&po, y, os->m, os->n, acc, ctx->threads);
    return TOPLU_OK;
  }
  toplu__gemm_packed(ctx->in[0].data, os->k, os->bp, y, os->m, os->n, os->k, &po, ctx->threads);
  return TOPLU_OK;
}

static void own_mm_release(toplu__kernel_ctx_t *ctx) {
  own_mm_state_t *os = ctx->state;
  if (!os) return;
  if (os->bp) toplu__dnnl_pack_release(ctx, os->bp);
  toplu__kernel_free(ctx, os);
  ctx->state = NULL;
}

const toplu__kernel_t toplu__kernels_matmul[] = {
    {.op_type = "MatMul", .domain = "", .prepare = own_mm_prepare, .run = own_mm_run, .release = own_mm_release,
     .flags = TOPLU_KERNEL_SPECIALISED},
    {.op_type = "MatMul", .domain = "", .prepare = matmul_prepare, .run = matmul_run, .release = matmul_release,
     .bind = matmul_bind, .unbind = matmul_unbind},
    {.op_type = "Gemm", .domain = "", .prepare = gemm_prepare, .run = gemm_run, .release = gemm_release,
     .bind = gemm_bind, .unbind = matmul_unbind},
    {.op_type = NULL},
};
