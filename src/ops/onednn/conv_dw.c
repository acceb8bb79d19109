/*
 * ops/onednn/conv_dw.c - toplu.PointwiseDepthwiseConv (graph/fuse.c,
 * graph/schema_conv.c): a 1x1 convolution and the 3x3 depthwise
 * convolution that alone reads it, as in MobileNetV2's inverted residual
 * blocks:
 *   X [N, C, H, W] -> 1x1 (W [M, C, 1, 1], B, post[0 .. post_split-1])
 *     -> E [N, M, H, W] -> depthwise 3x3, stride s, pads 1 (W_dw [M, 1, 3, 3],
 *     B_dw, post[post_split ..]) -> Y [N, M, (H-1)/s+1, (W-1)/s+1].
 * Three ways, chosen per plan (each input shape has its own):
 *  - own: toplu's channels-last kernel (ops/onednn/pwdw_own.h): rows of E
 *    computed into a ring of about 256 KiB and consumed by the depthwise
 *    part while there, E never in memory.  The default where X arrives
 *    channels last (oneDNN's brgconv writes it so on AVX-512), E is 1 MiB
 *    or more per image, or 512 KiB with M a multiple of 16, or 256 KiB
 *    with M a multiple of 16 and 196 output pixels or more
 *    (toplu__pwdw_own_expand_ok, graph/fuse.h), and the activations are
 *    none, Clip or Relu: MobileNetV2's blocks 2-13 (2-4 until the morning of
 *    2026-12-07, 2-7 until its afternoon).  There it
 *    ran 1.2-1.8x the separate way at batch 8 and 0.94-1.03x at batch 1 (one
 *    thread, Zen 5); on smaller E, which stays in cache anyway, oneDNN's two
 *    primitives were 4-8% faster (docs/performance.md, "The own pointwise +
 *    depthwise kernel").  The choice does not depend on the batch size.
 *  - fused: one oneDNN 1x1 convolution with a depthwise post-op
 *    (dnnl_post_ops_append_dw_k3s1p1 / _k3s2p1, oneDNN 2.x): each block of
 *    rows of E is consumed by the depthwise part while it is in cache and E
 *    is never written to memory;
 *  - separate: the two convolutions as two primitives, exactly as two Conv
 *    nodes run (ops/onednn/conv.c), E in this kernel's workspace.
 * Where the own way does not apply, the separate way is the default;
 * TOPLU_CONV_DW=own|fused|separate (read at prepare) forces one (own then
 * reorders X to channels last wherever it arrives from).  Fusing every pair the fused kernel took ran
 * MobileNetV2 at 1.06-1.14x the two Conv steps at batch 1 and 1.04-1.10x at
 * batch 8 (Zen 5, bench/dw_ab.py); but oneDNN offers it at some batch sizes
 * and not others, so it is used only where it exists for one row too (see
 * fused_pd), and with that rule 3 of MobileNetV2's 16 pairs fuse and the
 * blocked layouts they bring made batch 1 0.92x the unfused graph on 2
 * threads (docs/performance.md, "Pointwise + depthwise").  Where oneDNN
 * refuses the fused form (it has it only in blocked layouts, and only for
 * some ISAs) the separate way runs.
 * All give Conv's results to float rounding (the sums are the same; the
 * order of the depthwise taps may differ).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "graph/fuse.h"
#include "ops/onednn/gemm_avx2.h"
#include "ops/onednn/onednn.h"
#include "ops/onednn/pwdw_own.h"

typedef struct dw_state {
  int fused;
  int own;                   /* toplu's own channels-last kernel (ops/onednn/pwdw_own.h) */
  int dw_first;              /* toplu.DepthwisePointwiseConv (inputs X, W_dw, B_dw, W_pw, B_pw, R) */
  toplu__pwdw_t pw;          /* own: its geometry and packed weights */
  void *own_w1, *own_wdw, *own_wpj; /* own: packed by toplu__dnnl_pack_custom (own_wpj: the projection's) */
  float *own_zero;           /* own: W * M zeros */
  size_t own_stride;         /* own: floats of workspace per thread */
  int own_threads;           /* own: the threads the workspace has room for */
  toplu__dnnl_prim_t p1, p2; /* fused: p1 only */
  void *w1, *wdw;            /* packed weights (toplu__dnnl_pack_const) */
  float *zero_bias;          /* fused without B or B_dw: M zeros in their place */
  dnnl_memory_desc_t src_md, dst_md;
  char impl[160];
} dw_state_t;

typedef struct dw_exec {
  void *e1, *e2;
} dw_exec_t;

/* Mode from TOPLU_CONV_DW: 2 own, 1 fused, 0 separate, -1 unset or empty
 * (own where it applies, else separate), -2 any other value (*bad: it;
 * dw_prepare refuses it, as TOPLU_BACKENDS refuses an unknown backend,
 * rather than ignore a typo). */
static int forced_mode(const char **bad) {
  const char *v = getenv("TOPLU_CONV_DW");
  if (!v || !*v) return -1;
  if (!strcmp(v, "own")) return 2;
  if (!strcmp(v, "fused")) return 1;
  if (!strcmp(v, "separate")) return 0;
  *bad = v;
  return -2;
}

static toplu_status_t md4(toplu__kernel_ctx_t *ctx, dnnl_memory_desc_t *md, int64_t a, int64_t b, int64_t c, int64_t d,
                          dnnl_format_tag_t tag) {
  dnnl_dims_t dims = {a, b, c, d};
  dnnl_status_t s = dnnl_memory_desc_init_by_tag(md, 4, dims, dnnl_f32, tag);
  return s == dnnl_success ? TOPLU_OK : toplu__dnnl_error(ctx, s, "memory descriptor");
}

/* A user-scratchpad attribute with the node's post-ops [from, split) and, when
 * dw_stride is 1 or 2, oneDNN's depthwise post-op then post-ops [split, n)
 * (the fused way); dw_stride 0: post-ops [from, split) only (the separate
 * way's 1x1 with from 0, its depthwise convolution with from = post_split
 * and split = n). */
static dnnl_status_t make_attr(const toplu__node_t *n, int from, int split, int dw_stride, dnnl_primitive_attr_t *out) {
  dnnl_primitive_attr_t attr;
  dnnl_post_ops_t po;
  dnnl_status_t s = dnnl_primitive_attr_create(&attr);
  if (s != dnnl_success) return s;
  if ((s = dnnl_post_ops_create(&po)) != dnnl_success) {
    dnnl_primitive_attr_destroy(attr);
    return s;
  }
  s = dnnl_primitive_attr_set_scratchpad_mode(attr, dnnl_scratchpad_mode_user);
  if (s == dnnl_success) s = toplu__dnnl_post_ops_add(po, n, from, split);
  if (s == dnnl_success && dw_stride)
    s = dw_stride == 1 ? dnnl_post_ops_append_dw_k3s1p1(po, dnnl_f32, dnnl_f32, dnnl_f32, 0, 0, NULL)
                       : dnnl_post_ops_append_dw_k3s2p1(po, dnnl_f32, dnnl_f32, dnnl_f32, 0, 0, NULL);
  if (s == dnnl_success && dw_stride) s = toplu__dnnl_post_ops_add(po, n, split, n->n_post);
  if (s == dnnl_success) s = dnnl_primitive_attr_set_post_ops(attr, po);
  dnnl_post_ops_destroy(po);
  if (s != dnnl_success) {
    dnnl_primitive_attr_destroy(attr);
    return s;
  }
  *out = attr;
  return dnnl_success;
}

static int dims_equal(const dnnl_memory_desc_t *md, const toplu_tensor_t *t) {
  if (md->ndims != t->ndim) return 0;
  for (int i = 0; i < t->ndim; i++)
    if (md->dims[i] != t->dims[i]) return 0;
  return 1;
}

/* One try at the fused primitive descriptor with E (and X, where its layout
 * is still open) in layout tag; NULL where oneDNN has no such primitive or
 * only its reference one (ref_fused_convolution, which runs the two
 * convolutions one after the other through a scratchpad). */
static dnnl_primitive_desc_t fused_try(toplu__kernel_ctx_t *ctx, const dnnl_memory_desc_t *src_in, const dnnl_memory_desc_t *w,
                                       const dnnl_memory_desc_t *bias, int split, int s, dnnl_format_tag_t tag, int64_t n) {
  const toplu_tensor_t *x = &ctx->in[0];
  dnnl_dims_t xd = {n, x->dims[1], x->dims[2], x->dims[3]}, md = {n, ctx->in[1].dims[0], x->dims[2], x->dims[3]};
  toplu_tensor_t want = ctx->out[0];
  want.dims[0] = n;
  dnnl_memory_desc_t src, mid;
  if (src_in) src = *src_in;
  else if (dnnl_memory_desc_init_by_tag(&src, 4, xd, dnnl_f32, tag) != dnnl_success) return NULL;
  if (dnnl_memory_desc_init_by_tag(&mid, 4, md, dnnl_f32, tag) != dnnl_success) return NULL;
  dnnl_convolution_desc_t cd;
  dnnl_dims_t one = {1, 1}, zero = {0, 0};
  if (dnnl_convolution_forward_desc_init(&cd, dnnl_forward_inference, dnnl_convolution_direct, &src, w, bias, &mid, one,
                                         zero, zero) != dnnl_success)
    return NULL;
  dnnl_primitive_attr_t attr;
  if (make_attr(ctx->node, 0, split, s, &attr) != dnnl_success) return NULL;
  dnnl_primitive_desc_t pd = NULL;
  if (dnnl_primitive_desc_create(&pd, &cd, attr, toplu__dnnl_engine(ctx->backend), NULL) != dnnl_success) pd = NULL;
  dnnl_primitive_attr_destroy(attr);
  if (!pd) return NULL;
  const char *impl = NULL;
  const dnnl_memory_desc_t *dst = dnnl_primitive_desc_query_md(pd, dnnl_query_exec_arg_md, DNNL_ARG_DST);
  const dnnl_memory_desc_t *wdw =
      dnnl_primitive_desc_query_md(pd, dnnl_query_exec_arg_md, DNNL_ARG_ATTR_POST_OP_DW | DNNL_ARG_WEIGHTS);
  if (dnnl_primitive_desc_query(pd, dnnl_query_impl_info_str, 0, &impl) != dnnl_success || !impl ||
      !strncmp(impl, "ref", 3) || !dst || !wdw || wdw->ndims == 0 || !dims_equal(dst, &want)) {
    dnnl_primitive_desc_destroy(pd);
    return NULL;
  }
  return pd;
}

/* The fused primitive descriptor: E in 16- or 8-channel blocks, X as it
 * arrives or reordered into E's layout; NULL where oneDNN has none.  oneDNN
 * offers the fused kernel at some batch sizes and not at others (PaddleOCR
 * det's first block: at 8 rows, not at 1 or 2), which would give each batch
 * size's plan other layouts, reorders and arena bytes and break the
 * planner's law that activation bytes are affine in the batch (tests/
 * test_plan.py, det); so a node is fused only when oneDNN also has the
 * fused kernel for one row, and the choice holds at (nearly) every batch. */
static dnnl_primitive_desc_t fused_pd(toplu__kernel_ctx_t *ctx, const dnnl_memory_desc_t *src_in, const dnnl_memory_desc_t *w,
                                      const dnnl_memory_desc_t *bias, int split, int s) {
  static const dnnl_format_tag_t tags[] = {dnnl_nChw16c, dnnl_nChw8c};
  int64_t n = ctx->in[0].dims[0];
  for (size_t i = 0; i < sizeof tags / sizeof tags[0]; i++) {
    if (n != 1) { /* the one-row probe */
      dnnl_primitive_desc_t one = fused_try(ctx, NULL, w, bias, split, s, tags[i], 1);
      if (!one) continue;
      dnnl_primitive_desc_destroy(one);
    }
    dnnl_primitive_desc_t pd = fused_try(ctx, src_in, w, bias, split, s, tags[i], n);
    if (!pd && src_in) pd = fused_try(ctx, NULL, w, bias, split, s, tags[i], n); /* X reordered first */
    if (pd) return pd;
  }
  return NULL;
}

static int is_ref(const_dnnl_primitive_desc_t pd) {
  const char *impl = NULL;
  return dnnl_primitive_desc_query(pd, dnnl_query_impl_info_str, 0, &impl) != dnnl_success || !impl ||
         !strncmp(impl, "ref", 3);
}

/* The two primitive descriptors of the separate way with E laid out as mid
 * (a tag or any); with last 0, refuses a pair where either is oneDNN's
 * reference implementation.  *pd1, *pd2 NULL unless dnnl_success. */
static dnnl_status_t separate_pds(toplu__kernel_ctx_t *ctx, const dnnl_memory_desc_t *src, const dnnl_memory_desc_t *w1,
                                  const dnnl_memory_desc_t *b1, const dnnl_memory_desc_t *bdw, const dnnl_memory_desc_t *wdw,
                                  const dnnl_memory_desc_t *mid, const dnnl_memory_desc_t *dst, int split, int s, int last,
                                  dnnl_primitive_desc_t *pd1, dnnl_primitive_desc_t *pd2) {
  dnnl_convolution_desc_t c1, c2;
  dnnl_dims_t one = {1, 1}, zero = {0, 0}, stride = {s, s}, pad = {1, 1};
  dnnl_primitive_attr_t a1 = NULL, a2 = NULL;
  *pd1 = *pd2 = NULL;
  dnnl_engine_t eng = toplu__dnnl_engine(ctx->backend);
  dnnl_status_t ds =
      dnnl_convolution_forward_desc_init(&c1, dnnl_forward_inference, dnnl_convolution_direct, src, w1, b1, mid, one, zero, zero);
  if (ds == dnnl_success) ds = make_attr(ctx->node, 0, split, 0, &a1);
  if (ds == dnnl_success) ds = dnnl_primitive_desc_create(pd1, &c1, a1, eng, NULL);
  if (a1) dnnl_primitive_attr_destroy(a1);
  if (ds != dnnl_success) return *pd1 = NULL, ds;
  dnnl_memory_desc_t mid_md = *dnnl_primitive_desc_query_md(*pd1, dnnl_query_dst_md, 0);
  ds = dnnl_convolution_forward_desc_init(&c2, dnnl_forward_inference, dnnl_convolution_direct, &mid_md, wdw, bdw, dst, stride,
                                          pad, pad);
  if (ds == dnnl_success) ds = make_attr(ctx->node, split, ctx->node->n_post, 0, &a2);
  if (ds == dnnl_success) ds = dnnl_primitive_desc_create(pd2, &c2, a2, eng, NULL);
  if (a2) dnnl_primitive_attr_destroy(a2);
  if (ds == dnnl_success && !last && (is_ref(*pd1) || is_ref(*pd2))) ds = dnnl_unimplemented;
  if (ds != dnnl_success) {
    dnnl_primitive_desc_destroy(*pd1);
    if (*pd2) dnnl_primitive_desc_destroy(*pd2);
    *pd1 = *pd2 = NULL;
  }
  return ds;
}

typedef struct own_fill {
  const float *w;
  int64_t c, m;
} own_fill_t;

static void own_fill_w1(void *dst, const void *arg) {
  const own_fill_t *f = arg;
  toplu__pwdw_pack_w1(f->w, f->c, f->m, dst);
}

static void own_fill_wdw(void *dst, const void *arg) {
  const own_fill_t *f = arg;
  toplu__pwdw_pack_wdw(f->w, f->m, dst);
}

/* TOPLU_ERR_UNSUPPORTED unless every present input is float32. */
static toplu_status_t float_inputs(toplu__kernel_ctx_t *ctx) {
  for (int i = 0; i < ctx->n_in; i++)
    if (ctx->in[i].ndim >= 0 && ctx->in[i].dtype != TOPLU_DTYPE_FLOAT)
      return toplu__kernel_error(ctx, TOPLU_ERR_UNSUPPORTED, "float32 only (input %d is %s)", i,
                                toplu_dtype_name(ctx->in[i].dtype));
  return TOPLU_OK;
}

/* The own way's common end: W zero pixels of the depthwise part's channels (its padding row), the
 * per-thread scratch, the residual addend (input addend, if present) channels last like the output, and
 * what the plan reads (impl named kind, the output's layout). */
static toplu_status_t own_finish(toplu__kernel_ctx_t *ctx, toplu__kernel_info_t *info, dw_state_t *st, int addend,
                                 const char *kind) {
  size_t zb = (size_t)(st->pw.w * st->pw.m) * sizeof(float);
  if (!(st->own_zero = toplu__kernel_alloc(ctx, zb)))
    return toplu__kernel_error(ctx, TOPLU_ERR_OUT_OF_MEMORY, "out of memory");
  memset(st->own_zero, 0, zb);
  info->state_bytes += zb;
  st->pw.zero_row = st->own_zero;
  st->own = 1;
  st->own_stride = (toplu__pwdw_buf_floats(&st->pw) + 15) & ~(size_t)15; /* 64-byte multiples */
  st->own_threads = ctx->threads > 0 ? ctx->threads : 1;
  size_t ws = st->own_stride * sizeof(float) * (size_t)st->own_threads;
  if (ws > info->workspace_bytes) info->workspace_bytes = ws;
  if (ctx->n_in > addend && ctx->in[addend].ndim >= 0) {
    const dnnl_memory_desc_t *r = ctx->in_md ? ctx->in_md[addend] : NULL;
    if (!r || !dnnl_memory_desc_equal(r, &st->dst_md)) info->want_md[addend] = &st->dst_md;
  }
  snprintf(st->impl, sizeof st->impl, "toplu:%s:%s", kind, toplu__gemm_avx512_ok() ? "avx512" : "avx2");
  info->impl = st->impl;
  info->out_md[0] = &st->dst_md;
  return TOPLU_OK;
}

/* The own way (ops/onednn/pwdw_own.h): X channels last as it arrives, Y
 * (or Z, with the projection: co > 0) channels last, the packed weights
 * shared by the session's plans. */
static toplu_status_t own_prepare(toplu__kernel_ctx_t *ctx, toplu__kernel_info_t *info, dw_state_t *st,
                                  const dnnl_memory_desc_t *src_nhwc, int64_t C, int64_t H, int64_t W, int64_t M, int s,
                                  int split, int64_t co, int pj_split) {
  const toplu_tensor_t *y = &ctx->out[0];
  toplu_status_t ts = md4(ctx, &st->dst_md, y->dims[0], co > 0 ? co : M, y->dims[2], y->dims[3], dnnl_nhwc);
  if (ts) return ts;
  toplu__pwdw_init(&st->pw, ctx->node, split, C, M, H, W, s, co, pj_split);
  if (st->pw.ho != y->dims[2] || st->pw.wo != y->dims[3])
    return toplu__kernel_error(ctx, TOPLU_ERR_INTERNAL, "output [%lld, %lld] is not the depthwise convolution's",
                              (long long)y->dims[2], (long long)y->dims[3]);
  own_fill_t f1 = {.w = ctx->in[1].data, .c = C, .m = M}, f2 = {.w = ctx->in[3].data, .c = C, .m = M};
  if ((ts = toplu__dnnl_pack_custom(ctx, info, ctx->in[1].data, "pwdw_w1_b16",
                                    toplu__pwdw_w1_floats(C, M) * sizeof(float), own_fill_w1, &f1, &st->own_w1)) ||
      (ts = toplu__dnnl_pack_custom(ctx, info, ctx->in[3].data, "pwdw_wdw_9m", (size_t)(9 * M) * sizeof(float),
                                    own_fill_wdw, &f2, &st->own_wdw)))
    return ts;
  if (co > 0) { /* W_pj [Co][M] packed as W1 is: the GEMM's B [M][Co] */
    own_fill_t f3 = {.w = ctx->in[5].data, .c = M, .m = co};
    if ((ts = toplu__dnnl_pack_custom(ctx, info, ctx->in[5].data, "pwdw_wpj_b16",
                                      toplu__pwdw_w1_floats(M, co) * sizeof(float), own_fill_w1, &f3, &st->own_wpj)))
      return ts;
    st->pw.wpjp = st->own_wpj;
    info->consumed_consts |= 1u << 5;
  }
  st->pw.w1p = st->own_w1, st->pw.wdw = st->own_wdw;
  st->src_md = *src_nhwc;
  info->consumed_consts |= (1u << 1) | (1u << 3);
  return own_finish(ctx, info, st, 7, "pwdw_nhwc"); /* input 7: the projection's residual addend */
}

static toplu_status_t dw_prepare(toplu__kernel_ctx_t *ctx, toplu__kernel_info_t *info) {
  const toplu__node_t *n = ctx->node;
  const toplu_tensor_t *x = &ctx->in[0], *y = &ctx->out[0];
  const char *bad = NULL;
  const int mode = forced_mode(&bad);
  if (mode == -2)
    return toplu__kernel_error(ctx, TOPLU_ERR_INVALID_ARGUMENT,
                              "environment variable TOPLU_CONV_DW is '%.64s': expected 'own', 'fused' or 'separate' "
                              "(or unset: own where it applies, else separate)",
                              bad);
  toplu_status_t ts = float_inputs(ctx);
  if (ts) return ts;
  if (!ctx->in[1].data || !ctx->in[3].data)
    return toplu__kernel_error(ctx, TOPLU_ERR_UNSUPPORTED, "weights W and W_dw must be constant");
  int64_t N = x->dims[0], C = x->dims[1], H = x->dims[2], W = x->dims[3], M = ctx->in[1].dims[0];
  int s = (int)toplu__node_attr_int(n, "dw_stride", 1), split = (int)toplu__node_attr_int(n, "post_split", 0);
  int has_b = ctx->n_in > 2 && ctx->in[2].ndim >= 0, has_bdw = ctx->n_in > 4 && ctx->in[4].ndim >= 0;
  /* the block's projection (graph/fuse.c fuse_dw_projection): only the own kernel runs it */
  const int64_t co = ctx->n_in > 5 && ctx->in[5].ndim >= 0 ? ctx->in[5].dims[0] : 0;
  const int pj_split = co > 0 ? (int)toplu__node_attr_int(n, "pj_split", n->n_post) : n->n_post;
  if (co > 0 && !ctx->in[5].data) return toplu__kernel_error(ctx, TOPLU_ERR_UNSUPPORTED, "weights W_pj must be constant");
  if (co > 0 && (mode == 0 || mode == 1 || !toplu__gemm_avx2_ok() || !toplu__pwdw_supported(n, pj_split)))
    return toplu__kernel_error(ctx, TOPLU_ERR_UNSUPPORTED,
                              "the projection runs on toplu's own kernel only, which %s",
                              mode == 0 || mode == 1 ? "TOPLU_CONV_DW turned off" :
                              !toplu__gemm_avx2_ok() ? "needs AVX2 and FMA" : "cannot apply these post-ops");

  dw_state_t *st = toplu__kernel_alloc(ctx, sizeof *st);
  if (!st) return toplu__kernel_error(ctx, TOPLU_ERR_OUT_OF_MEMORY, "out of memory");
  memset(st, 0, sizeof *st);
  ctx->state = st;

  dnnl_memory_desc_t src_md, src_plain, w1_user, w1_any, b_md, wdw_user, wdw_any, dst_plain;
  const dnnl_memory_desc_t *src_in = ctx->in_md ? ctx->in_md[0] : NULL;
  if ((ts = md4(ctx, &src_plain, N, C, H, W, dnnl_nchw)) || (ts = md4(ctx, &w1_user, M, C, 1, 1, dnnl_oihw)) ||
      (ts = md4(ctx, &w1_any, M, C, 1, 1, dnnl_format_tag_any)) ||
      (ts = md4(ctx, &dst_plain, N, M, y->dims[2], y->dims[3], dnnl_nchw)))
    return ts;
  if (src_in) src_md = *src_in;
  else if ((ts = md4(ctx, &src_md, N, C, H, W, dnnl_format_tag_any))) return ts;
  dnnl_dims_t bd = {M}, wd5 = {M, 1, 1, 3, 3};
  dnnl_status_t ds = dnnl_memory_desc_init_by_tag(&b_md, 1, bd, dnnl_f32, dnnl_x);
  if (ds == dnnl_success) ds = dnnl_memory_desc_init_by_tag(&wdw_user, 5, wd5, dnnl_f32, dnnl_goihw);
  if (ds == dnnl_success) ds = dnnl_memory_desc_init_by_tag(&wdw_any, 5, wd5, dnnl_f32, dnnl_format_tag_any);
  if (ds != dnnl_success) return toplu__dnnl_error(ctx, ds, "memory descriptor");

  /* toplu's own kernel where X arrives channels last (oneDNN's brgconv writes it so on AVX-512) and E is
   * as large as toplu__pwdw_own_expand_ok asks, with activations the kernel applies in registers (none, Clip,
   * Relu: PaddleOCR det's HardSwish chains ran 3-28% slower in the own kernel's separate passes): there the separate way's round trip of E through memory is
   * what costs; with E in cache oneDNN's two primitives were 0-20% faster (MobileNetV2's blocks from 28x28
   * on, Zen 5, one thread: docs/performance.md, "The own pointwise + depthwise kernel") */
  if ((mode == 2 || (mode == -1 && toplu__pwdw_own_expand_ok(H, W, M, s) &&
                     toplu__pwdw_clamps(n, split, pj_split))) &&
      toplu__gemm_avx2_ok() && src_in && toplu__pwdw_supported(n, pj_split)) {
    dnnl_memory_desc_t nhwc;
    if ((ts = md4(ctx, &nhwc, N, C, H, W, dnnl_nhwc))) return ts;
    if (dnnl_memory_desc_equal(src_in, &nhwc)) return own_prepare(ctx, info, st, &nhwc, C, H, W, M, s, split, co, pj_split);
  }
  /* forced (TOPLU_CONV_DW=own), or with the projection: X reordered to channels last first, wherever it
   * arrives from */
  if ((mode == 2 || co > 0) && toplu__gemm_avx2_ok() && toplu__pwdw_supported(n, pj_split)) {
    dnnl_memory_desc_t nhwc;
    if ((ts = md4(ctx, &nhwc, N, C, H, W, dnnl_nhwc))) return ts;
    if ((ts = own_prepare(ctx, info, st, &nhwc, C, H, W, M, s, split, co, pj_split))) return ts;
    if (!src_in || !dnnl_memory_desc_equal(src_in, &nhwc)) info->want_md[0] = &st->src_md;
    return TOPLU_OK;
  }

  int want_fused = mode == 1; /* otherwise the separate way: see the header */
  /* the fused primitive always gets both biases (zeros for one the node lacks): oneDNN 2.6's fused kernel
   * crashed without them */
  dnnl_primitive_desc_t pd = want_fused ? fused_pd(ctx, src_in, &w1_any, &b_md, split, s) : NULL;
  const char *impl1 = NULL, *impl2 = NULL;

  if (pd) {
    st->fused = 1;
    st->src_md = *dnnl_primitive_desc_query_md(pd, dnnl_query_src_md, 0);
    st->dst_md = *dnnl_primitive_desc_query_md(pd, dnnl_query_exec_arg_md, DNNL_ARG_DST);
    dnnl_memory_desc_t w1_md = *dnnl_primitive_desc_query_md(pd, dnnl_query_weights_md, 0);
    dnnl_memory_desc_t wdw_md =
        *dnnl_primitive_desc_query_md(pd, dnnl_query_exec_arg_md, DNNL_ARG_ATTR_POST_OP_DW | DNNL_ARG_WEIGHTS);
    dnnl_memory_desc_t bdw_md = b_md;
    const dnnl_memory_desc_t *q =
        dnnl_primitive_desc_query_md(pd, dnnl_query_exec_arg_md, DNNL_ARG_ATTR_POST_OP_DW | DNNL_ARG_BIAS);
    if (q && q->ndims > 0) bdw_md = *q;
    size_t bytes;
    if ((ts = toplu__dnnl_pack_const(ctx, info, &w1_user, ctx->in[1].data, &w1_md, &st->w1, &bytes)) ||
        (ts = toplu__dnnl_pack_const(ctx, info, &wdw_user, ctx->in[3].data, &wdw_md, &st->wdw, &bytes))) {
      dnnl_primitive_desc_destroy(pd);
      return ts;
    }
    if (!has_b || !has_bdw) {
      size_t zb = (size_t)M * sizeof(float);
      if (dnnl_memory_desc_get_size(&bdw_md) > zb) zb = dnnl_memory_desc_get_size(&bdw_md);
      if (!(st->zero_bias = toplu__kernel_alloc(ctx, zb))) {
        dnnl_primitive_desc_destroy(pd);
        return toplu__kernel_error(ctx, TOPLU_ERR_OUT_OF_MEMORY, "out of memory");
      }
      memset(st->zero_bias, 0, zb);
      info->state_bytes += zb;
    }
    info->impl = NULL;
    if ((ts = toplu__dnnl_prim_create_later(ctx, &st->p1, pd, 0, info))) return ts;
    impl1 = info->impl;
    toplu__dnnl_prim_t *p = &st->p1;
    toplu__dnnl_prim_arg(p, DNNL_ARG_SRC, TOPLU_DNNL_FROM_INPUT, 0, NULL, &st->src_md);
    toplu__dnnl_prim_arg(p, DNNL_ARG_WEIGHTS, TOPLU_DNNL_FROM_STATE, 1, st->w1, &w1_md);
    if (has_b) toplu__dnnl_prim_arg(p, DNNL_ARG_BIAS, TOPLU_DNNL_FROM_INPUT, 2, NULL, &b_md);
    else toplu__dnnl_prim_arg(p, DNNL_ARG_BIAS, TOPLU_DNNL_FROM_STATE, 2, st->zero_bias, &b_md);
    toplu__dnnl_prim_arg(p, DNNL_ARG_DST, TOPLU_DNNL_FROM_OUTPUT, 0, NULL, &st->dst_md);
    toplu__dnnl_prim_arg(p, DNNL_ARG_ATTR_POST_OP_DW | DNNL_ARG_WEIGHTS, TOPLU_DNNL_FROM_STATE, 3, st->wdw, &wdw_md);
    if (has_bdw) toplu__dnnl_prim_arg(p, DNNL_ARG_ATTR_POST_OP_DW | DNNL_ARG_BIAS, TOPLU_DNNL_FROM_INPUT, 4, NULL, &bdw_md);
    else toplu__dnnl_prim_arg(p, DNNL_ARG_ATTR_POST_OP_DW | DNNL_ARG_BIAS, TOPLU_DNNL_FROM_STATE, 4, st->zero_bias, &bdw_md);
    snprintf(st->impl, sizeof st->impl, "%s + dw post-op", impl1 ? impl1 : "?");
  } else {
    /* the 1x1 convolution into the workspace, then the depthwise one from it */
    dnnl_primitive_desc_t pd1 = NULL, pd2 = NULL;
    /* E as oneDNN picks it, else channels last, else 16-channel blocks: the first pair where neither is oneDNN's
     * reference implementation (a 960-channel depthwise convolution on blocked E got ref:any, 10x slower) */
    static const dnnl_format_tag_t mid_tags[] = {dnnl_format_tag_any, dnnl_nhwc, dnnl_nChw16c, dnnl_nChw8c,
                                                 dnnl_format_tag_any};
    const size_t n_tags = sizeof mid_tags / sizeof mid_tags[0];
    ds = dnnl_unimplemented;
    for (size_t k = 0; k < n_tags && !pd2; k++) {
      dnnl_memory_desc_t mid_try, dst_try; /* Y in E's layout (any: as oneDNN picks) */
      if ((ts = md4(ctx, &mid_try, N, M, H, W, mid_tags[k])) ||
          (ts = md4(ctx, &dst_try, N, M, y->dims[2], y->dims[3], mid_tags[k])))
        return ts;
      ds = separate_pds(ctx, &src_md, &w1_any, has_b ? &b_md : NULL, has_bdw ? &b_md : NULL, &wdw_any, &mid_try,
                        &dst_try, split, s, k + 1 == n_tags, &pd1, &pd2);
    }
    if (ds != dnnl_success) return toplu__dnnl_error(ctx, ds, "1x1 and depthwise convolutions");
    dnnl_memory_desc_t mid_md = *dnnl_primitive_desc_query_md(pd1, dnnl_query_dst_md, 0);
    st->src_md = *dnnl_primitive_desc_query_md(pd1, dnnl_query_src_md, 0);
    st->dst_md = *dnnl_primitive_desc_query_md(pd2, dnnl_query_dst_md, 0);
    dnnl_memory_desc_t w1_md = *dnnl_primitive_desc_query_md(pd1, dnnl_query_weights_md, 0);
    dnnl_memory_desc_t wdw_md = *dnnl_primitive_desc_query_md(pd2, dnnl_query_weights_md, 0);
    size_t bytes;
    if ((ts = toplu__dnnl_pack_const(ctx, info, &w1_user, ctx->in[1].data, &w1_md, &st->w1, &bytes)) ||
        (ts = toplu__dnnl_pack_const(ctx, info, &wdw_user, ctx->in[3].data, &wdw_md, &st->wdw, &bytes))) {
      dnnl_primitive_desc_destroy(pd1);
      dnnl_primitive_desc_destroy(pd2);
      return ts;
    }
    /* both scratchpads at offset 0 (the primitives run one after the other), E after the larger */
    info->impl = NULL;
    if ((ts = toplu__dnnl_prim_create_later(ctx, &st->p1, pd1, 0, info))) {
      dnnl_primitive_desc_destroy(pd2);
      return ts;
    }
    impl1 = info->impl;
    info->impl = NULL;
    if ((ts = toplu__dnnl_prim_create_later(ctx, &st->p2, pd2, 0, info))) return ts;
    impl2 = info->impl;
    size_t e_off = toplu__align64(st->p1.scratchpad_bytes > st->p2.scratchpad_bytes ? st->p1.scratchpad_bytes
                                                                               : st->p2.scratchpad_bytes);
    size_t e_bytes = dnnl_memory_desc_get_size(&mid_md);
    if (e_off + e_bytes > info->workspace_bytes) info->workspace_bytes = e_off + e_bytes;
    toplu__dnnl_prim_t *p = &st->p1;
    toplu__dnnl_prim_arg(p, DNNL_ARG_SRC, TOPLU_DNNL_FROM_INPUT, 0, NULL, &st->src_md);
    toplu__dnnl_prim_arg(p, DNNL_ARG_WEIGHTS, TOPLU_DNNL_FROM_STATE, 1, st->w1, &w1_md);
    if (has_b) toplu__dnnl_prim_arg(p, DNNL_ARG_BIAS, TOPLU_DNNL_FROM_INPUT, 2, NULL, &b_md);
    toplu__dnnl_prim_arg_ws(p, DNNL_ARG_DST, e_off, &mid_md);
    p = &st->p2;
    toplu__dnnl_prim_arg_ws(p, DNNL_ARG_SRC, e_off, &mid_md);
    toplu__dnnl_prim_arg(p, DNNL_ARG_WEIGHTS, TOPLU_DNNL_FROM_STATE, 3, st->wdw, &wdw_md);
    if (has_bdw) toplu__dnnl_prim_arg(p, DNNL_ARG_BIAS, TOPLU_DNNL_FROM_INPUT, 4, NULL, &b_md);
    toplu__dnnl_prim_arg(p, DNNL_ARG_DST, TOPLU_DNNL_FROM_OUTPUT, 0, NULL, &st->dst_md);
    snprintf(st->impl, sizeof st->impl, "%s + %s", impl1 ? impl1 : "?", impl2 ? impl2 : "?");
  }
  info->impl = st->impl;
  info->consumed_consts |= (1u << 1) | (1u << 3);
  if (!dnnl_memory_desc_equal(&st->src_md, src_in ? src_in : &src_plain)) info->want_md[0] = &st->src_md;
  if (!dnnl_memory_desc_equal(&st->dst_md, &dst_plain)) info->out_md[0] = &st->dst_md;
  return TOPLU_OK;
}

/* toplu.DepthwisePointwiseConv (graph/fuse.c fuse_depthwise_pointwise): only the own kernel
 * (ops/onednn/pwdw_own.h, toplu__pwdw_init_dw_first), X and Z channels last (X reordered first where it
 * arrives otherwise), the residual addend too. */
static toplu_status_t dwpw_prepare(toplu__kernel_ctx_t *ctx, toplu__kernel_info_t *info) {
  const toplu__node_t *n = ctx->node;
  const toplu_tensor_t *x = &ctx->in[0], *y = &ctx->out[0];
  toplu_status_t ts = float_inputs(ctx);
  if (ts) return ts;
  if (!ctx->in[1].data || !ctx->in[3].data)
    return toplu__kernel_error(ctx, TOPLU_ERR_UNSUPPORTED, "weights W_dw and W_pw must be constant");
  const int split = (int)toplu__node_attr_int(n, "post_split", 0), s = (int)toplu__node_attr_int(n, "dw_stride", 1);
  if (!toplu__gemm_avx2_ok() || !toplu__pwdw_supported(n, split))
    return toplu__kernel_error(ctx, TOPLU_ERR_UNSUPPORTED, "toplu's own depthwise + pointwise kernel %s",
                              !toplu__gemm_avx2_ok() ? "needs AVX2 and FMA" : "cannot apply these post-ops");
  const int64_t N = x->dims[0], C = x->dims[1], H = x->dims[2], W = x->dims[3], co = ctx->in[3].dims[0];
  dw_state_t *st = toplu__kernel_alloc(ctx, sizeof *st);
  if (!st) return toplu__kernel_error(ctx, TOPLU_ERR_OUT_OF_MEMORY, "out of memory");
  memset(st, 0, sizeof *st);
  ctx->state = st;
  st->dw_first = 1;
  ts = md4(ctx, &st->dst_md, N, co, y->dims[2], y->dims[3], dnnl_nhwc);
  if (!ts) ts = md4(ctx, &st->src_md, N, C, H, W, dnnl_nhwc);
  if (ts) return ts;
  toplu__pwdw_init_dw_first(&st->pw, n, split, C, H, W, s, co);
  if (st->pw.ho != y->dims[2] || st->pw.wo != y->dims[3])
    return toplu__kernel_error(ctx, TOPLU_ERR_INTERNAL, "output [%lld, %lld] is not the depthwise convolution's",
                              (long long)y->dims[2], (long long)y->dims[3]);
  own_fill_t fd = {.w = ctx->in[1].data, .c = C, .m = C}, fp = {.w = ctx->in[3].data, .c = C, .m = co};
  if ((ts = toplu__dnnl_pack_custom(ctx, info, ctx->in[1].data, "pwdw_wdw_9m", (size_t)(9 * C) * sizeof(float),
                                    own_fill_wdw, &fd, &st->own_wdw)) ||
      (ts = toplu__dnnl_pack_custom(ctx, info, ctx->in[3].data, "pwdw_wpj_b16",
                                    toplu__pwdw_w1_floats(C, co) * sizeof(float), own_fill_w1, &fp, &st->own_wpj)))
    return ts;
  st->pw.wdw = st->own_wdw, st->pw.wpjp = st->own_wpj;
  const dnnl_memory_desc_t *src_in = ctx->in_md ? ctx->in_md[0] : NULL;
  if (!src_in || !dnnl_memory_desc_equal(src_in, &st->src_md)) info->want_md[0] = &st->src_md;
  info->consumed_consts |= (1u << 1) | (1u << 3);
  return own_finish(ctx, info, st, 5, "dwpw_nhwc"); /* input 5: the residual addend */
}

static toplu_status_t dw_bind(toplu__kernel_ctx_t *ctx) {
  const dw_state_t *st = ctx->state;
  if (st->own) return TOPLU_OK;
  dw_exec_t *e = calloc(1, sizeof *e);
  if (!e) return toplu__kernel_error(ctx, TOPLU_ERR_OUT_OF_MEMORY, "out of memory");
  toplu_status_t ts = toplu__dnnl_prim_bind(ctx, &st->p1, &e->e1);
  if (!ts && !st->fused) ts = toplu__dnnl_prim_bind(ctx, &st->p2, &e->e2);
  if (ts) {
    toplu__dnnl_prim_unbind(e->e1);
    free(e);
    return ts;
  }
  ctx->exec_state = e;
  return TOPLU_OK;
}

static void dw_unbind(toplu__kernel_ctx_t *ctx) {
  dw_exec_t *e = ctx->exec_state;
  if (e) {
    toplu__dnnl_prim_unbind(e->e1);
    toplu__dnnl_prim_unbind(e->e2);
    free(e);
  }
  ctx->exec_state = NULL;
}

static toplu_status_t dw_run(toplu__kernel_ctx_t *ctx) {
  const dw_state_t *st = ctx->state;
  if (st->own) {
    const int has_b = ctx->n_in > 2 && ctx->in[2].ndim >= 0, has_bdw = ctx->n_in > 4 && ctx->in[4].ndim >= 0;
    toplu__pwdw_t pw = st->pw;
    pw.node = ctx->node;
    int threads = ctx->threads < st->own_threads ? ctx->threads : st->own_threads;
    toplu__pwdw_args_t a = {.b1 = has_b ? ctx->in[2].data : NULL, .bdw = has_bdw ? ctx->in[4].data : NULL};
    if (st->dw_first) { /* X, W_dw, B_dw, W_pw, B_pw, R */
      a.b1 = NULL;
      a.bdw = has_b ? ctx->in[2].data : NULL;
      a.bpj = has_bdw ? ctx->in[4].data : NULL;
      a.res = ctx->n_in > 5 && ctx->in[5].ndim >= 0 ? ctx->in[5].data : NULL;
    } else if (pw.co > 0) {
      a.bpj = ctx->n_in > 6 && ctx->in[6].ndim >= 0 ? ctx->in[6].data : NULL;
      a.res = ctx->n_in > 7 && ctx->in[7].ndim >= 0 ? ctx->in[7].data : NULL;
    }
    toplu__pwdw_run(&pw, ctx->in[0].data, &a, ctx->out[0].data, ctx->out[0].dims[0], ctx->workspace, st->own_stride,
                    threads);
    return TOPLU_OK;
  }
  const dw_exec_t *e = ctx->exec_state;
  toplu_status_t ts = toplu__dnnl_prim_execute(ctx, &st->p1, e->e1);
  if (!ts && !st->fused) ts = toplu__dnnl_prim_execute(ctx, &st->p2, e->e2);
  return ts;
}

static void dw_release(toplu__kernel_ctx_t *ctx) {
  dw_state_t *st = ctx->state;
  if (!st) return;
  toplu__dnnl_prim_destroy(&st->p1);
  toplu__dnnl_prim_destroy(&st->p2);
  toplu__dnnl_pack_release(ctx, st->w1);
  toplu__dnnl_pack_release(ctx, st->wdw);
  toplu__dnnl_pack_release(ctx, st->own_w1);
  toplu__dnnl_pack_release(ctx, st->own_wdw);
  toplu__dnnl_pack_release(ctx, st->own_wpj);
  if (st->own_zero) toplu__kernel_free(ctx, st->own_zero);
  if (st->zero_bias) toplu__kernel_free(ctx, st->zero_bias);
  toplu__kernel_free(ctx, st);
  ctx->state = NULL;
}

const toplu__kernel_t toplu__kernels_conv_dw[] = {
    {.op_type = "PointwiseDepthwiseConv", .domain = "toplu", .prepare = dw_prepare, .run = dw_run, .release = dw_release,
     .flags = TOPLU_KERNEL_LAYOUT, .bind = dw_bind, .unbind = dw_unbind},
    {.op_type = "DepthwisePointwiseConv", .domain = "toplu", .prepare = dwpw_prepare, .run = dw_run,
     .release = dw_release, .flags = TOPLU_KERNEL_LAYOUT, .bind = dw_bind, .unbind = dw_unbind},
    {.op_type = NULL},
};
