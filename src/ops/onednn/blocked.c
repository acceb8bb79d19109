/*
 * ops/blocked.c - kernels that work on oneDNN blocked layouts.
 *
 * Convolutions keep their activations in the layout oneDNN picks (nChw8c on
 * AVX2, nChw16c on AVX-512) from one conv to the next; the planner
 * (runtime/plan.c) reorders only at graph edges and before kernels that
 * need plain row-major data.  This file holds the reorder kernel the
 * planner inserts, and layout-aware versions of ops that sit between convs
 * (toplu__kernels_blocked), each built on a oneDNN primitive that accepts any
 * layout and keeps the padded channels zero.  Their prepare returns
 * TOPLU_ERR_UNSUPPORTED for cases they do not cover; the planner then
 * reorders to plain and uses the plain kernel.
 */
#include <stdlib.h>
#include <string.h>

#include "ops/dynquant.h"
#include "ops/onednn/onednn.h"

/* ---- Reorder ---- */

typedef struct prim_state {
  toplu__dnnl_prim_t prim;
  dnnl_memory_desc_t out_md; /* the layout of output 0 (kernels that set info->out_md point here) */
} prim_state_t;

static toplu_status_t prim_state_new(toplu__kernel_ctx_t *ctx, prim_state_t **out) {
  prim_state_t *ps = toplu__kernel_alloc(ctx, sizeof *ps);
  if (!ps) return toplu__kernel_error(ctx, TOPLU_ERR_OUT_OF_MEMORY, "out of memory");
  memset(ps, 0, sizeof *ps);
  ctx->state = ps;
  *out = ps;
  return TOPLU_OK;
}

static void prim_release(toplu__kernel_ctx_t *ctx) {
  prim_state_t *ps = ctx->state;
  if (!ps) return;
  toplu__dnnl_prim_destroy(&ps->prim);
  toplu__kernel_free(ctx, ps);
  ctx->state = NULL;
}

static toplu_status_t prim_bind(toplu__kernel_ctx_t *ctx) {
  const prim_state_t *ps = ctx->state;
  return toplu__dnnl_prim_bind(ctx, &ps->prim, &ctx->exec_state);
}

static void prim_unbind(toplu__kernel_ctx_t *ctx) {
  toplu__dnnl_prim_unbind(ctx->exec_state);
  ctx->exec_state = NULL;
}

static toplu_status_t prim_run(toplu__kernel_ctx_t *ctx) {
  const prim_state_t *ps = ctx->state;
  return toplu__dnnl_prim_execute(ctx, &ps->prim, ctx->exec_state);
}

/* The layout of input i: the blocked descriptor it arrives in, or plain. */
static dnnl_status_t input_md(const toplu__kernel_ctx_t *ctx, int i, dnnl_memory_desc_t *md) {
  if (ctx->in_md && ctx->in_md[i]) {
    *md = *(const dnnl_memory_desc_t *)ctx->in_md[i];
    return dnnl_success;
  }
  return toplu__dnnl_plain_md(md, &ctx->in[i]);
}

static toplu_status_t reorder_prepare(toplu__kernel_ctx_t *ctx, toplu__kernel_info_t *info) {
  prim_state_t *ps = NULL;
  toplu_status_t st = prim_state_new(ctx, &ps);
  if (st) return st;
  if (toplu__dnnl_dtype(ctx->in[0].dtype) == dnnl_data_type_undef)
    return toplu__kernel_error(ctx, TOPLU_ERR_INTERNAL, "cannot reorder %s tensors", toplu_dtype_name(ctx->in[0].dtype));
  dnnl_memory_desc_t src, dst;
  dnnl_status_t s = input_md(ctx, 0, &src);
  if (s == dnnl_success) {
    if (ctx->in_md[1]) dst = *(const dnnl_memory_desc_t *)ctx->in_md[1];
    else s = toplu__dnnl_plain_md(&dst, &ctx->in[0]);
  }
  if (s != dnnl_success) return toplu__dnnl_error(ctx, s, "reorder");
  if ((st = toplu__dnnl_reorder_prim(ctx, &ps->prim, &src, &dst, info))) return st;
  toplu__dnnl_prim_arg(&ps->prim, DNNL_ARG_FROM, TOPLU_DNNL_FROM_INPUT, 0, NULL, &src);
  toplu__dnnl_prim_arg(&ps->prim, DNNL_ARG_TO, TOPLU_DNNL_FROM_OUTPUT, 0, NULL, &dst);
  return TOPLU_OK;
}

const toplu__kernel_t toplu__kernel_reorder = {
    .op_type = "Reorder", .domain = "toplu", .prepare = reorder_prepare, .run = prim_run, .release = prim_release,
    .bind = prim_bind, .unbind = prim_unbind, .flags = TOPLU_KERNEL_LAYOUT};

/* ---- element-wise activations (oneDNN eltwise) ---- */

typedef struct eltwise_state {
  int kind;                   /* 0: eltwise (binary_state_t has 1) */
  int n;                      /* primitives run in order, in place after the first */
  int input;                  /* the input they read */
  toplu__dnnl_prim_t prim[2];
  dnnl_memory_desc_t md;      /* the layout in and out */
} eltwise_state_t;

static toplu_status_t float_blocked_input(toplu__kernel_ctx_t *ctx, int i) {
  if (ctx->in[i].dtype != TOPLU_DTYPE_FLOAT)
    return toplu__kernel_error(ctx, TOPLU_ERR_UNSUPPORTED, "blocked kernels take float32 only");
  return TOPLU_OK;
}

/* Constant scalar input i as float (Clip min/max). */
static int const_scalar(const toplu__kernel_ctx_t *ctx, int i, float *v) {
  if (i >= ctx->n_in || ctx->in[i].ndim < 0) return 0;
  const toplu_tensor_t *t = &ctx->in[i];
  if (!t->data || t->dtype != TOPLU_DTYPE_FLOAT || toplu_tensor_numel(t) != 1) return -1;
  *v = *(const float *)t->data;
  return 1;
}

static toplu_status_t eltwise_setup(toplu__kernel_ctx_t *ctx, toplu__kernel_info_t *info, int in, int cnt,
                                    const dnnl_alg_kind_t *alg, const float *alpha, const float *beta);

static toplu_status_t eltwise_prepare(toplu__kernel_ctx_t *ctx, toplu__kernel_info_t *info) {
  toplu_status_t st = float_blocked_input(ctx, 0);
  if (st || !ctx->in_md || !ctx->in_md[0]) return st ? st : toplu__kernel_error(ctx, TOPLU_ERR_UNSUPPORTED, "plain input");
  const toplu__node_t *n = ctx->node;
  const char *op = n->op_type;
  dnnl_alg_kind_t alg[2];
  float alpha[2] = {0, 0}, beta[2] = {0, 0};
  int cnt = 1;
  if (!strcmp(op, "LeakyRelu")) alg[0] = dnnl_eltwise_relu, alpha[0] = toplu__node_attr_float(n, "alpha", 0.01f);
  else if (!strcmp(op, "Sigmoid")) alg[0] = dnnl_eltwise_logistic;
  else if (!strcmp(op, "Tanh")) alg[0] = dnnl_eltwise_tanh;
  else if (!strcmp(op, "Sqrt")) alg[0] = dnnl_eltwise_sqrt;
  else if (!strcmp(op, "Exp")) alg[0] = dnnl_eltwise_exp;
  else if (!strcmp(op, "HardSwish")) alg[0] = dnnl_eltwise_hardswish;
  else if (!strcmp(op, "HardSigmoid")) {
    alg[0] = dnnl_eltwise_linear;
    alpha[0] = toplu__node_attr_float(n, "alpha", 0.2f);
    beta[0] = toplu__node_attr_float(n, "beta", 0.5f);
    alg[1] = dnnl_eltwise_clip_v2;
    alpha[1] = 0.f;
    beta[1] = 1.f;
    cnt = 2;
  } else if (!strcmp(op, "Clip")) {
    float lo = -3.402823466e38f, hi = 3.402823466e38f;
    if (n->opset < 11) {
      lo = toplu__node_attr_float(n, "min", lo);
      hi = toplu__node_attr_float(n, "max", hi);
    } else if (const_scalar(ctx, 1, &lo) < 0 || const_scalar(ctx, 2, &hi) < 0) {
      return toplu__kernel_error(ctx, TOPLU_ERR_UNSUPPORTED, "Clip bounds that are not constant scalars");
    }
    alg[0] = dnnl_eltwise_clip_v2;
    alpha[0] = lo;
    beta[0] = hi;
  } else {
    return toplu__kernel_error(ctx, TOPLU_ERR_UNSUPPORTED, "no blocked kernel for %s", op);
  }
  return eltwise_setup(ctx, info, 0, cnt, alg, alpha, beta);
}

/* One or two oneDNN eltwise primitives on input `in` (blocked), in place after the first. */
static toplu_status_t eltwise_setup(toplu__kernel_ctx_t *ctx, toplu__kernel_info_t *info, int in, int cnt,
                                    const dnnl_alg_kind_t *alg, const float *alpha, const float *beta) {
  toplu_status_t st;
  eltwise_state_t *es = toplu__kernel_alloc(ctx, sizeof *es);
  if (!es) return toplu__kernel_error(ctx, TOPLU_ERR_OUT_OF_MEMORY, "out of memory");
  memset(es, 0, sizeof *es);
  ctx->state = es;
  es->md = *(const dnnl_memory_desc_t *)ctx->in_md[in];
  es->input = in;
  for (int i = 0; i < cnt; i++) {
    dnnl_eltwise_desc_t d;
    dnnl_primitive_attr_t attr = NULL;
    dnnl_primitive_desc_t pd = NULL;
    dnnl_status_t s = dnnl_eltwise_forward_desc_init(&d, dnnl_forward_inference, alg[i], &es->md, alpha[i], beta[i]);
    if (s == dnnl_success) s = dnnl_primitive_attr_create(&attr);
    if (s == dnnl_success) s = dnnl_primitive_attr_set_scratchpad_mode(attr, dnnl_scratchpad_mode_user);
    if (s == dnnl_success) s = dnnl_primitive_desc_create(&pd, &d, attr, toplu__dnnl_engine(ctx->backend), NULL);
    if (attr) dnnl_primitive_attr_destroy(attr);
    if (s != dnnl_success) return toplu__dnnl_error(ctx, s, "eltwise");
    if ((st = toplu__dnnl_prim_create(ctx, &es->prim[i], pd, 0, info))) return st;
    es->n = i + 1;
    toplu__dnnl_prim_arg(&es->prim[i], DNNL_ARG_SRC, i ? TOPLU_DNNL_FROM_OUTPUT : TOPLU_DNNL_FROM_INPUT, i ? 0 : in, NULL,
                        &es->md);
    toplu__dnnl_prim_arg(&es->prim[i], DNNL_ARG_DST, TOPLU_DNNL_FROM_OUTPUT, 0, NULL, &es->md);
  }
  info->out_md[0] = &es->md;
  info->inplace_input = in;
  return TOPLU_OK;
}

typedef struct {
  void *s[2];
} multi_exec_t;

static toplu_status_t eltwise_bind(toplu__kernel_ctx_t *ctx) {
  const eltwise_state_t *es = ctx->state;
  multi_exec_t *m = calloc(1, sizeof *m);
  if (!m) return toplu__kernel_error(ctx, TOPLU_ERR_OUT_OF_MEMORY, "out of memory");
  ctx->exec_state = m;
  for (int i = 0; i < es->n; i++) {
    toplu_status_t st = toplu__dnnl_prim_bind(ctx, &es->prim[i], &m->s[i]);
    if (st) return st;
  }
  return TOPLU_OK;
}

static void eltwise_unbind(toplu__kernel_ctx_t *ctx) {
  multi_exec_t *m = ctx->exec_state;
  if (!m) return;
  for (int i = 0; i < 2; i++) toplu__dnnl_prim_unbind(m->s[i]);
  free(m);
  ctx->exec_state = NULL;
}

static toplu_status_t eltwise_run(toplu__kernel_ctx_t *ctx) {
  const eltwise_state_t *es = ctx->state;
  multi_exec_t *m = ctx->exec_state;
  for (int i = 0; i < es->n; i++) {
    toplu_status_t st = toplu__dnnl_prim_execute(ctx, &es->prim[i], m->s[i]);
    if (st) return st;
  }
  return TOPLU_OK;
}

static void eltwise_release(toplu__kernel_ctx_t *ctx) {
  eltwise_state_t *es = ctx->state;
  if (!es) return;
  for (int i = 0; i < es->n; i++) toplu__dnnl_prim_destroy(&es->prim[i]);
  toplu__kernel_free(ctx, es);
  ctx->state = NULL;
}

/* ---- binary ops with broadcasting (oneDNN binary) ---- */

/* The channel-blocked format tag (aBcd8b and kin) of md, for another tensor
 * of rank nd, or dnnl_format_tag_undef when md is not blocked that way. */
static dnnl_format_tag_t channel_blocked_tag(const dnnl_memory_desc_t *md, int nd) {
  const dnnl_blocking_desc_t *bd = &md->format_desc.blocking;
  if (md->format_kind != dnnl_blocked || bd->inner_nblks != 1 || bd->inner_idxs[0] != 1) return dnnl_format_tag_undef;
  int64_t b = bd->inner_blks[0];
  switch (nd) {
    case 3: return b == 8 ? dnnl_aBc8b : b == 16 ? dnnl_aBc16b : b == 4 ? dnnl_aBc4b : dnnl_format_tag_undef;
    case 4: return b == 8 ? dnnl_aBcd8b : b == 16 ? dnnl_aBcd16b : b == 4 ? dnnl_aBcd4b : dnnl_format_tag_undef;
    case 5: return b == 8 ? dnnl_aBcde8b : b == 16 ? dnnl_aBcde16b : b == 4 ? dnnl_aBcde4b : dnnl_format_tag_undef;
    default: return dnnl_format_tag_undef;
  }
}

typedef struct binary_state {
  int kind;                   /* 1; binary kernels that became eltwise hold an eltwise_state_t (0) */
  toplu__dnnl_prim_t prim;
  dnnl_memory_desc_t out_md, src1_md;
  void *packed1; /* a constant second operand in src1_md's layout */
} binary_state_t;

/* ---- binary ops on layouts oneDNN's blocked binary does not take ----
 * oneDNN 2.6 chooses channels-last (acdb, "nhwc") for convolutions with few
 * channels on AVX-512, and its binary primitive there had only reference
 * kernels for a per-image channel broadcast, so the planner reordered both
 * sides to plain and back around every squeeze-and-excitation Mul and every
 * residual Add (27% of PaddleOCR cls at batch 8).  Two loops of toplu's own
 * cover them:
 *   same shape: both operands in one layout (the second is reordered or
 *     packed into the first's), one flat pass over the padded buffer; the
 *     padding holds zeros and 0 op 0 = 0 for Add, Sub, Mul, Max and Min
 *     (Div only without padding);
 *   channel broadcast: x dense channels-last [N, spatial..., C] and the other
 *     operand [1 or N, C, 1, ...] (plain), y[n, s, c] = x[n, s, c] op b[n, c]. */

enum { CL_ADD, CL_SUB, CL_MUL, CL_DIV, CL_MAX, CL_MIN };

typedef struct cl_binary_state {
  int kind;                  /* 2 */
  int op;                    /* CL_* */
  int a, b;                  /* the full-size input and the other one */
  int bcast;                 /* 0: same shape, 1: channel broadcast */
  int64_t n_img, spatial, c; /* channel broadcast: x as [n_img][spatial][c] */
  int64_t b_img_stride;      /* floats from one image's channel vector to the next (0: shared) */
  int64_t n;                 /* same shape: floats in the padded buffer */
  dnnl_memory_desc_t out_md;
  void *packed1;             /* a constant same-shape operand in out_md's layout */
} cl_binary_state_t;

/* 1 when md is dense channels-last for dims (N, C, spatial...): C innermost,
 * then the spatial dims in order, then N; no padding, no blocks. */
static int channels_last_dense(const dnnl_memory_desc_t *md) {
  const dnnl_blocking_desc_t *bd = &md->format_desc.blocking;
  int nd = md->ndims;
  if (md->format_kind != dnnl_blocked || bd->inner_nblks != 0 || nd < 3 || md->offset0 != 0) return 0;
  for (int d = 0; d < nd; d++)
    if (md->padded_dims[d] != md->dims[d]) return 0;
  int64_t expect = md->dims[1];
  if (md->dims[1] > 1 && bd->strides[1] != 1) return 0;
  for (int d = nd - 1; d >= 2; d--) {
    if (md->dims[d] > 1 && bd->strides[d] != expect) return 0;
    expect *= md->dims[d];
  }
  return md->dims[0] == 1 || bd->strides[0] == expect;
}

#define CL_LOOP(OPEXPR)                                           \
  for (int64_t i = 0; i < len; i++) {                             \
    float u = x[i], v = w[i];                                     \
    y[i] = (OPEXPR);                                              \
  }

/* y[i] = x[i] op w[i] for i < len. */
static void cl_apply(int op, const float *x, const float *w, float *y, int64_t len) {
  switch (op) {
    case CL_ADD: CL_LOOP(u + v) break;
    case CL_SUB: CL_LOOP(u - v) break;
    case CL_MUL: CL_LOOP(u * v) break;
    case CL_DIV: CL_LOOP(u / v) break;
    case CL_MAX: CL_LOOP(u > v || u != u ? u : v) break; /* ops/elementwise_binary.c's FMAX: NaN as numpy */
    default: CL_LOOP(u < v || u != u ? u : v) break;
  }
}
#undef CL_LOOP

/* Tries toplu's own loops for `alg` with full-size input a (blocked in md0);
 * 1 when it took the node (*st set), 0 when it does not apply. */
static int cl_binary_try(toplu__kernel_ctx_t *ctx, toplu__kernel_info_t *info, dnnl_alg_kind_t alg, int a,
                         const dnnl_memory_desc_t *md0, toplu_status_t *st) {
  const toplu_tensor_t *y = &ctx->out[0], *t1 = &ctx->in[1 - a];
  int b = 1 - a, op;
  switch (alg) {
    case dnnl_binary_add: op = CL_ADD; break;
    case dnnl_binary_sub: op = CL_SUB; break;
    case dnnl_binary_mul: op = CL_MUL; break;
    case dnnl_binary_div: op = CL_DIV; break;
    case dnnl_binary_max: op = CL_MAX; break;
    default: op = CL_MIN; break;
  }
  int64_t numel = toplu_tensor_numel(y);
  size_t bytes = dnnl_memory_desc_get_size(md0);
  int same = t1->ndim == y->ndim;
  for (int d = 0; same && d < y->ndim; d++) same = t1->dims[d] == y->dims[d];
  int bcast = 0;
  int64_t b_img = 0;
  if (!same) {
    /* [1 or N, C, 1, ...] after raising the rank with leading 1s */
    if (!channels_last_dense(md0) || t1->ndim > y->ndim || t1->ndim < y->ndim - 1 || y->dims[1] < 1) return 0;
    int pad = y->ndim - t1->ndim;
    for (int d = 0; d < y->ndim; d++) {
      int64_t v = d < pad ? 1 : t1->dims[d - pad];
      if (d == 1 ? v != y->dims[1] : d == 0 ? (v != 1 && v != y->dims[0]) : v != 1) return 0;
      if (d == 0) b_img = v == 1 ? 0 : y->dims[1];
    }
    bcast = 1;
  } else if (op == CL_DIV && bytes != (size_t)numel * sizeof(float)) {
    return 0; /* 0 / 0 in the padding */
  }
  cl_binary_state_t *cs = toplu__kernel_alloc(ctx, sizeof *cs);
  if (!cs) {
    *st = toplu__kernel_error(ctx, TOPLU_ERR_OUT_OF_MEMORY, "out of memory");
    return 1;
  }
  memset(cs, 0, sizeof *cs);
  cs->kind = 2;
  ctx->state = cs;
  cs->op = op, cs->a = a, cs->b = b, cs->bcast = bcast;
  cs->out_md = *md0;
  cs->n = (int64_t)(bytes / sizeof(float));
  *st = TOPLU_OK;
  if (bcast) {
    cs->n_img = y->dims[0];
    cs->c = y->dims[1];
    cs->spatial = cs->n_img * cs->c != 0 ? numel / (cs->n_img * cs->c) : 0;
    cs->b_img_stride = b_img;
    if (!t1->data && ctx->in_md[b]) info->want_plain |= 1u << b;
  } else if (t1->data) {
    dnnl_memory_desc_t plain1;
    size_t pb;
    if (toplu__dnnl_plain_md(&plain1, t1) != dnnl_success) {
      *st = toplu__kernel_error(ctx, TOPLU_ERR_UNSUPPORTED, "binary operand");
      return 1;
    }
    *st = toplu__dnnl_pack_const(ctx, info, &plain1, t1->data, &cs->out_md, &cs->packed1, &pb);
    if (*st) return 1;
    info->consumed_consts |= 1u << b;
  } else if (!ctx->in_md[b] || !dnnl_memory_desc_equal(ctx->in_md[b], &cs->out_md)) {
    info->want_md[b] = &cs->out_md;
  }
  info->out_md[0] = &cs->out_md;
  info->inplace_input = a;
  info->impl = bcast ? "toplu:channels_last_broadcast" : "toplu:flat";
  return 1;
}

static toplu_status_t cl_binary_run(toplu__kernel_ctx_t *ctx) {
  const cl_binary_state_t *cs = ctx->state;
  const float *x = ctx->in[cs->a].data;
  const float *w = cs->packed1 ? cs->packed1 : ctx->in[cs->b].data;
  float *y = ctx->out[0].data;
  /* Sub and Div do not commute: a is input 0 for them (binary_prepare) */
  if (!cs->bcast) {
    int64_t n = cs->n, chunk = 16384, nb = (n + chunk - 1) / chunk;
#pragma omp parallel for num_threads(ctx->threads) schedule(static) if (ctx->threads > 1 && n >= 131072)
    for (int64_t i = 0; i < nb; i++) {
      int64_t e = (i + 1) * chunk < n ? (i + 1) * chunk : n;
      cl_apply(cs->op, x + i * chunk, w + i * chunk, y + i * chunk, e - i * chunk);
    }
    return TOPLU_OK;
  }
  int64_t rows = cs->n_img * cs->spatial, c = cs->c, sp = cs->spatial;
#pragma omp parallel for num_threads(ctx->threads) schedule(static) if (ctx->threads > 1 && rows * c >= 131072)
  for (int64_t r = 0; r < rows; r++)
    cl_apply(cs->op, x + r * c, w + (r / sp) * cs->b_img_stride, y + r * c, c);
  return TOPLU_OK;
}

static void binary_release(toplu__kernel_ctx_t *ctx) {
  binary_state_t *bs = ctx->state;
  if (!bs) return;
  if (!bs->kind) {
    eltwise_release(ctx);
    return;
  }
  if (bs->kind == 2) {
    cl_binary_state_t *cs = ctx->state;
    toplu__dnnl_pack_release(ctx, cs->packed1);
    toplu__kernel_free(ctx, cs);
    ctx->state = NULL;
    return;
  }
  toplu__dnnl_prim_destroy(&bs->prim);
  toplu__dnnl_pack_release(ctx, bs->packed1);
  toplu__kernel_free(ctx, bs);
  ctx->state = NULL;
}

static toplu_status_t binary_bind(toplu__kernel_ctx_t *ctx) {
  const binary_state_t *bs = ctx->state;
  if (!bs->kind) return eltwise_bind(ctx);
  if (bs->kind == 2) return TOPLU_OK;
  return toplu__dnnl_prim_bind(ctx, &bs->prim, &ctx->exec_state);
}

static void binary_unbind(toplu__kernel_ctx_t *ctx) {
  const binary_state_t *bs = ctx->state;
  if (!bs->kind) eltwise_unbind(ctx);
  else if (bs->kind == 1) prim_unbind(ctx);
}

static toplu_status_t binary_run(toplu__kernel_ctx_t *ctx) {
  const binary_state_t *bs = ctx->state;
  if (!bs->kind) return eltwise_run(ctx);
  if (bs->kind == 2) return cl_binary_run(ctx);
  return toplu__dnnl_prim_execute(ctx, &bs->prim, ctx->exec_state);
}

static toplu_status_t binary_prepare(toplu__kernel_ctx_t *ctx, toplu__kernel_info_t *info) {
  if (ctx->in[0].dtype != TOPLU_DTYPE_FLOAT || ctx->in[1].dtype != TOPLU_DTYPE_FLOAT)
    return toplu__kernel_error(ctx, TOPLU_ERR_UNSUPPORTED, "blocked kernels take float32 only");
  const char *op = ctx->node->op_type;
  dnnl_alg_kind_t alg;
  int commutes = 1;
  if (!strcmp(op, "Add")) alg = dnnl_binary_add;
  else if (!strcmp(op, "Mul")) alg = dnnl_binary_mul;
  else if (!strcmp(op, "Max")) alg = dnnl_binary_max;
  else if (!strcmp(op, "Min")) alg = dnnl_binary_min;
  else if (!strcmp(op, "Sub")) alg = dnnl_binary_sub, commutes = 0;
  else if (!strcmp(op, "Div")) alg = dnnl_binary_div, commutes = 0;
  else return toplu__kernel_error(ctx, TOPLU_ERR_UNSUPPORTED, "no blocked kernel for %s", op);
  if (ctx->n_in != 2) return toplu__kernel_error(ctx, TOPLU_ERR_UNSUPPORTED, "blocked %s takes 2 inputs", op);
  const toplu_tensor_t *y = &ctx->out[0];
  /* src0 must have the output's dims (oneDNN broadcasts src1 only) and be blocked. */
  int a = -1;
  for (int i = 0; i < 2 && a < 0; i++) {
    if (!(i == 0 || commutes)) continue;
    const toplu_tensor_t *t = &ctx->in[i];
    if (t->ndim != y->ndim || !ctx->in_md[i]) continue;
    int same = 1;
    for (int d = 0; d < y->ndim; d++) same &= t->dims[d] == y->dims[d];
    if (same) a = i;
  }
  if (a < 0) return toplu__kernel_error(ctx, TOPLU_ERR_UNSUPPORTED, "no blocked full-size operand");
  int b = 1 - a;
  const dnnl_memory_desc_t *md0p = ctx->in_md[a];
  float sc;
  if (const_scalar(ctx, b, &sc) > 0 && alg != dnnl_binary_div) {
    /* x op scalar as one eltwise primitive: oneDNN 2.6's blocked binary gets
     * scalar broadcasts wrong when channels are padded (C % block != 0). */
    dnnl_alg_kind_t ea = alg == dnnl_binary_max || alg == dnnl_binary_min ? dnnl_eltwise_clip_v2 : dnnl_eltwise_linear;
    float alpha = 1.f, beta = 0.f;
    if (alg == dnnl_binary_add) beta = sc;
    else if (alg == dnnl_binary_sub) beta = -sc; /* src0 is input 0 (Sub does not commute) */
    else if (alg == dnnl_binary_mul) alpha = sc;
    else if (alg == dnnl_binary_max) alpha = sc, beta = 3.402823466e38f;
    else alpha = -3.402823466e38f, beta = sc;
    return eltwise_setup(ctx, info, a, 1, &ea, &alpha, &beta);
  }
  if (ctx->in[b].ndim > y->ndim) return toplu__kernel_error(ctx, TOPLU_ERR_UNSUPPORTED, "rank");
  dnnl_format_tag_t tag = channel_blocked_tag(md0p, y->ndim);
  if (tag == dnnl_format_tag_undef) {
    toplu_status_t cst;
    if (cl_binary_try(ctx, info, alg, a, md0p, &cst)) return cst;
    return toplu__kernel_error(ctx, TOPLU_ERR_UNSUPPORTED, "blocked binary: channel-blocked or channels-last layouts only");
  }
  if (!ctx->in[b].data && ctx->in[b].ndim != y->ndim)
    return toplu__kernel_error(ctx, TOPLU_ERR_UNSUPPORTED, "blocked binary: a runtime operand of lower rank");
  /* oneDNN 2.6's blocked binary also gets a broadcast over channels wrong
   * when the last channel block is padded (C % block != 0): the planner
   * then runs this node on plain layouts instead. */
  int cdim1 = 1 - (y->ndim - ctx->in[b].ndim); /* the channel dim of input b, or < 0 */
  int64_t c1 = cdim1 >= 0 ? ctx->in[b].dims[cdim1] : 1, cblk = md0p->format_desc.blocking.inner_blks[0];
  if (c1 == 1 && y->dims[1] > 1 && cblk > 0 && y->dims[1] % cblk)
    return toplu__kernel_error(ctx, TOPLU_ERR_UNSUPPORTED,
                              "blocked binary: broadcast over %lld channels padded to blocks of %lld",
                              (long long)y->dims[1], (long long)cblk);
  binary_state_t *bs = toplu__kernel_alloc(ctx, sizeof *bs);
  if (!bs) return toplu__kernel_error(ctx, TOPLU_ERR_OUT_OF_MEMORY, "out of memory");
  memset(bs, 0, sizeof *bs);
  bs->kind = 1;
  ctx->state = bs;
  bs->out_md = *md0p;
  /* The second operand, rank raised by leading 1s, in the same blocked format. */
  toplu_tensor_t t1 = ctx->in[b];
  int pad = y->ndim - t1.ndim;
  for (int d = t1.ndim - 1; d >= 0; d--) t1.dims[d + pad] = t1.dims[d];
  for (int d = 0; d < pad; d++) t1.dims[d] = 1;
  t1.ndim = y->ndim;
  dnnl_dims_t d1;
  for (int d = 0; d < t1.ndim; d++) d1[d] = t1.dims[d];
  dnnl_memory_desc_t plain1;
  dnnl_status_t s = dnnl_memory_desc_init_by_tag(&bs->src1_md, t1.ndim, d1, dnnl_f32, tag);
  if (s == dnnl_success) s = toplu__dnnl_plain_md(&plain1, &t1);
  if (s != dnnl_success) return toplu__dnnl_error(ctx, s, "binary operand");
  int src1_state = 0;
  if (ctx->in[b].data) {
    /* a constant: packed once into the blocked layout */
    size_t bytes;
    toplu_status_t st = toplu__dnnl_pack_const(ctx, info, &plain1, ctx->in[b].data, &bs->src1_md, &bs->packed1, &bytes);
    if (st) return st;
    info->consumed_consts |= 1u << b;
    src1_state = 1;
  } else if (!ctx->in_md[b] || !dnnl_memory_desc_equal(ctx->in_md[b], &bs->src1_md)) {
    info->want_md[b] = &bs->src1_md; /* the planner reorders it first */
  }
  dnnl_binary_desc_t d;
  dnnl_primitive_attr_t attr = NULL;
  dnnl_primitive_desc_t pd = NULL;
  s = dnnl_binary_desc_init(&d, alg, md0p, &bs->src1_md, md0p);
  if (s == dnnl_success) s = dnnl_primitive_attr_create(&attr);
  if (s == dnnl_success) s = dnnl_primitive_attr_set_scratchpad_mode(attr, dnnl_scratchpad_mode_user);
  if (s == dnnl_success) s = dnnl_primitive_desc_create(&pd, &d, attr, toplu__dnnl_engine(ctx->backend), NULL);
  if (attr) dnnl_primitive_attr_destroy(attr);
  if (s != dnnl_success) return toplu__kernel_error(ctx, TOPLU_ERR_UNSUPPORTED, "oneDNN binary does not take these layouts");
  /* A reference implementation would be slower than reordering to plain. */
  const char *impl = NULL;
  dnnl_primitive_desc_query(pd, dnnl_query_impl_info_str, 0, &impl);
  if (impl && strstr(impl, "ref")) {
    dnnl_primitive_desc_destroy(pd);
    return toplu__kernel_error(ctx, TOPLU_ERR_UNSUPPORTED, "only a reference oneDNN binary for these layouts");
  }
  toplu_status_t st = toplu__dnnl_prim_create(ctx, &bs->prim, pd, 0, info);
  if (st) return st;
  toplu__dnnl_prim_arg(&bs->prim, DNNL_ARG_SRC_0, TOPLU_DNNL_FROM_INPUT, a, NULL, md0p);
  toplu__dnnl_prim_arg(&bs->prim, DNNL_ARG_SRC_1, src1_state ? TOPLU_DNNL_FROM_STATE : TOPLU_DNNL_FROM_INPUT, b,
                      bs->packed1, &bs->src1_md);
  toplu__dnnl_prim_arg(&bs->prim, DNNL_ARG_DST, TOPLU_DNNL_FROM_OUTPUT, 0, NULL, md0p);
  info->out_md[0] = &bs->out_md;
  info->inplace_input = a;
  return TOPLU_OK;
}

/* ---- pooling (oneDNN pooling_v2) ---- */

static int64_t pool_ext(int64_t k, int64_t d) { return (k - 1) * d + 1; }

static toplu_status_t pool_prepare(toplu__kernel_ctx_t *ctx, toplu__kernel_info_t *info) {
  const toplu__node_t *n = ctx->node;
  const toplu_tensor_t *x = &ctx->in[0], *y = &ctx->out[0];
  /* MaxPool also on int8 and uint8 (exact: the max is one of the values), as a QDQ graph's integer MaxPool
   * (graph/fuse.c int8_elementwise) between two integer convolutions */
  int int_max = strstr(n->op_type, "MaxPool") && (x->dtype == TOPLU_DTYPE_UINT8 || x->dtype == TOPLU_DTYPE_INT8);
  toplu_status_t st = int_max ? TOPLU_OK : float_blocked_input(ctx, 0);
  if (st) return st;
  if (!ctx->in_md || !ctx->in_md[0] || x->ndim < 3 || x->ndim > 5)
    return toplu__kernel_error(ctx, TOPLU_ERR_UNSUPPORTED, "blocked pooling takes 1-D to 3-D blocked input");
  if (ctx->n_out > 1 && ctx->out[1].ndim >= 0 && n->outputs[1] >= 0)
    return toplu__kernel_error(ctx, TOPLU_ERR_UNSUPPORTED, "MaxPool Indices need the plain kernel");
  int sp = x->ndim - 2;
  int global = !strncmp(n->op_type, "Global", 6);
  int is_max = strstr(n->op_type, "Max") != NULL;
  dnnl_dims_t k, s, dil, pl, pr;
  const int64_t *v;
  int include_pad = (int)toplu__node_attr_int(n, "count_include_pad", 0);
  for (int i = 0; i < sp; i++) {
    int64_t in = x->dims[2 + i], out = y->dims[2 + i];
    if (global) {
      k[i] = in, s[i] = 1, dil[i] = 0, pl[i] = 0, pr[i] = 0;
      continue;
    }
    int64_t nk = toplu__node_attr_ints(n, "kernel_shape", &v);
    if (nk != sp) return toplu__kernel_error(ctx, TOPLU_ERR_UNSUPPORTED, "kernel_shape");
    k[i] = v[i];
    s[i] = toplu__node_attr_ints(n, "strides", &v) == sp ? v[i] : 1;
    int64_t d = toplu__node_attr_ints(n, "dilations", &v) == sp ? v[i] : 1;
    dil[i] = d - 1;
    const char *ap = toplu__node_attr_string(n, "auto_pad", "NOTSET");
    int64_t b = 0, e = 0;
    if (!strcmp(ap, "NOTSET")) {
      if (toplu__node_attr_ints(n, "pads", &v) == 2 * sp) b = v[i], e = v[sp + i];
    } else if (!strcmp(ap, "SAME_UPPER") || !strcmp(ap, "SAME_LOWER")) {
      int64_t total = (out - 1) * s[i] + pool_ext(k[i], d) - in;
      if (total < 0) total = 0;
      b = !strcmp(ap, "SAME_UPPER") ? total / 2 : total - total / 2;
      e = total - b;
    }
    /* oneDNN: out = (in + pl + pr - ext) / s + 1; ceil_mode shows up as extra right padding */
    int64_t need = (out - 1) * s[i] + pool_ext(k[i], d) - in - b;
    if (need < e) need = e;
    if (need != e && (is_max ? 0 : include_pad))
      return toplu__kernel_error(ctx, TOPLU_ERR_UNSUPPORTED, "ceil_mode with count_include_pad");
    if (b >= pool_ext(k[i], d) || need >= pool_ext(k[i], d))
      return toplu__kernel_error(ctx, TOPLU_ERR_UNSUPPORTED, "padding as large as the kernel");
    pl[i] = b;
    pr[i] = need;
  }
  prim_state_t *ps = NULL;
  if ((st = prim_state_new(ctx, &ps))) return st;
  dnnl_memory_desc_t src = *(const dnnl_memory_desc_t *)ctx->in_md[0], dst;
  dnnl_dims_t od;
  for (int i = 0; i < y->ndim; i++) od[i] = y->dims[i];
  dnnl_status_t se = dnnl_memory_desc_init_by_tag(&dst, y->ndim, od, toplu__dnnl_dtype(y->dtype), dnnl_format_tag_any);
  dnnl_alg_kind_t alg = is_max ? dnnl_pooling_max
                               : include_pad ? dnnl_pooling_avg_include_padding : dnnl_pooling_avg_exclude_padding;
  dnnl_pooling_v2_desc_t d;
  dnnl_primitive_attr_t attr = NULL;
  dnnl_primitive_desc_t pd = NULL;
  if (se == dnnl_success) se = dnnl_pooling_v2_forward_desc_init(&d, dnnl_forward_inference, alg, &src, &dst, s, k, dil, pl, pr);
  if (se == dnnl_success) se = dnnl_primitive_attr_create(&attr);
  if (se == dnnl_success) se = dnnl_primitive_attr_set_scratchpad_mode(attr, dnnl_scratchpad_mode_user);
  if (se == dnnl_success) se = dnnl_primitive_desc_create(&pd, &d, attr, toplu__dnnl_engine(ctx->backend), NULL);
  if (attr) dnnl_primitive_attr_destroy(attr);
  if (se == dnnl_success && toplu__dnnl_impl_is(pd, "ref")) {
    /* a layout only oneDNN's reference pooling reads (a QuantizeLinear's uint8 in a grouped convolution's aBcd4b):
     * the plain kernel after a reorder is faster */
    dnnl_primitive_desc_destroy(pd);
    prim_release(ctx);
    return toplu__kernel_error(ctx, TOPLU_ERR_UNSUPPORTED, "oneDNN has only its reference pooling for this layout");
  }
  if (se != dnnl_success) {
    prim_release(ctx);
    return toplu__kernel_error(ctx, TOPLU_ERR_UNSUPPORTED, "oneDNN pooling refused these parameters");
  }
  ps->out_md = *dnnl_primitive_desc_query_md(pd, dnnl_query_dst_md, 0);
  if ((st = toplu__dnnl_prim_create(ctx, &ps->prim, pd, 0, info))) return st;
  toplu__dnnl_prim_arg(&ps->prim, DNNL_ARG_SRC, TOPLU_DNNL_FROM_INPUT, 0, NULL, &src);
  toplu__dnnl_prim_arg(&ps->prim, DNNL_ARG_DST, TOPLU_DNNL_FROM_OUTPUT, 0, NULL, &ps->out_md);
  dnnl_memory_desc_t plain;
  if (toplu__dnnl_plain_md(&plain, y) != dnnl_success || !dnnl_memory_desc_equal(&plain, &ps->out_md))
    info->out_md[0] = &ps->out_md;
  return TOPLU_OK;
}

/* ---- concat (oneDNN concat) ---- */

static toplu_status_t concat_prepare(toplu__kernel_ctx_t *ctx, toplu__kernel_info_t *info) {
  const toplu_tensor_t *y = &ctx->out[0];
  int64_t axis = toplu__node_attr_int(ctx->node, "axis", 0);
  if (axis < 0) axis += y->ndim;
  if (ctx->n_in > TOPLU_DNNL_MAX_ARGS - 2 || y->dtype != TOPLU_DTYPE_FLOAT)
    return toplu__kernel_error(ctx, TOPLU_ERR_UNSUPPORTED, "blocked Concat: float32, at most %d inputs",
                              TOPLU_DNNL_MAX_ARGS - 2);
  dnnl_memory_desc_t mds[TOPLU_DNNL_MAX_ARGS];
  for (int i = 0; i < ctx->n_in; i++) {
    if (ctx->in[i].ndim < 0 || toplu_tensor_numel(&ctx->in[i]) == 0)
      return toplu__kernel_error(ctx, TOPLU_ERR_UNSUPPORTED, "empty inputs");
    dnnl_status_t s = input_md(ctx, i, &mds[i]);
    if (s != dnnl_success) return toplu__dnnl_error(ctx, s, "concat input");
  }
  prim_state_t *ps = NULL;
  toplu_status_t st = prim_state_new(ctx, &ps);
  if (st) return st;
  dnnl_primitive_attr_t attr = NULL;
  dnnl_primitive_desc_t pd = NULL;
  dnnl_status_t s = dnnl_primitive_attr_create(&attr);
  if (s == dnnl_success) s = dnnl_primitive_attr_set_scratchpad_mode(attr, dnnl_scratchpad_mode_user);
  /* dst in the first input's layout family: let oneDNN pick (NULL dst md) */
  if (s == dnnl_success) s = dnnl_concat_primitive_desc_create(&pd, NULL, ctx->n_in, (int)axis, mds, attr, toplu__dnnl_engine(ctx->backend));
  if (attr) dnnl_primitive_attr_destroy(attr);
  if (s != dnnl_success) {
    prim_release(ctx);
    return toplu__kernel_error(ctx, TOPLU_ERR_UNSUPPORTED, "oneDNN concat refused these layouts");
  }
  ps->out_md = *dnnl_primitive_desc_query_md(pd, dnnl_query_dst_md, 0);
  if ((st = toplu__dnnl_prim_create(ctx, &ps->prim, pd, 0, info))) return st;
  for (int i = 0; i < ctx->n_in; i++)
    toplu__dnnl_prim_arg(&ps->prim, DNNL_ARG_MULTIPLE_SRC + i, TOPLU_DNNL_FROM_INPUT, i, NULL, &mds[i]);
  toplu__dnnl_prim_arg(&ps->prim, DNNL_ARG_DST, TOPLU_DNNL_FROM_OUTPUT, 0, NULL, &ps->out_md);
  dnnl_memory_desc_t plain;
  if (toplu__dnnl_plain_md(&plain, y) != dnnl_success || !dnnl_memory_desc_equal(&plain, &ps->out_md))
    info->out_md[0] = &ps->out_md;
  return TOPLU_OK;
}

/* ---- Resize: nearest, integer up-sampling factors, on channel-blocked and channels-last layouts ---- */

typedef struct upsample_state {
  dnnl_memory_desc_t out_md;
  int64_t n, cb, ih, iw, fh, fw, blk; /* [N][C/blk][H][W][blk] */
} upsample_state_t;

static toplu_status_t upsample_prepare(toplu__kernel_ctx_t *ctx, toplu__kernel_info_t *info) {
  const toplu__node_t *n = ctx->node;
  const toplu_tensor_t *x = &ctx->in[0], *y = &ctx->out[0];
  if (!ctx->in_md || !ctx->in_md[0] || x->ndim != 4 || x->dtype != TOPLU_DTYPE_FLOAT)
    return toplu__kernel_error(ctx, TOPLU_ERR_UNSUPPORTED, "blocked Resize takes 4-D float blocked input");
  if (strcmp(toplu__node_attr_string(n, "mode", "nearest"), "nearest"))
    return toplu__kernel_error(ctx, TOPLU_ERR_UNSUPPORTED, "blocked Resize: nearest only");
  const char *ct = toplu__node_attr_string(n, "coordinate_transformation_mode", "half_pixel");
  const char *nm = toplu__node_attr_string(n, "nearest_mode", "round_prefer_floor");
  /* integer factors on H, W; N, C unchanged */
  if (y->dims[0] != x->dims[0] || y->dims[1] != x->dims[1] || !x->dims[2] || !x->dims[3] || y->dims[2] % x->dims[2] ||
      y->dims[3] % x->dims[3])
    return toplu__kernel_error(ctx, TOPLU_ERR_UNSUPPORTED, "blocked Resize: integer spatial factors only");
  /* src = floor(dst / f) holds for asymmetric+floor; and for half_pixel /
   * tf_half_pixel_for_nn with round_prefer_ceil/floor when... keep it exact: */
  if (strcmp(ct, "asymmetric") || strcmp(nm, "floor"))
    return toplu__kernel_error(ctx, TOPLU_ERR_UNSUPPORTED, "blocked Resize: asymmetric + floor only");
  const dnnl_memory_desc_t *md = ctx->in_md[0];
  const dnnl_blocking_desc_t *bd = &md->format_desc.blocking;
  /* Dense channels last (acdb) is one block of all C channels: N, H, W, C. */
  int cl = channels_last_dense(md);
  if (!cl && (md->format_kind != dnnl_blocked || bd->inner_nblks != 1 || bd->inner_idxs[0] != 1 ||
              md->padded_dims[0] != md->dims[0]))
    return toplu__kernel_error(ctx, TOPLU_ERR_UNSUPPORTED, "blocked Resize: channel-blocked or channels-last layouts only");
  int64_t blk = cl ? x->dims[1] : bd->inner_blks[0];
  /* the outer order must be N, C/blk, H, W (aBcd8b and kin) */
  if (!cl && !(bd->strides[3] == blk && bd->strides[2] == blk * md->padded_dims[3] &&
               bd->strides[1] == blk * md->padded_dims[2] * md->padded_dims[3]))
    return toplu__kernel_error(ctx, TOPLU_ERR_UNSUPPORTED, "blocked Resize: unexpected layout");
  upsample_state_t *us = toplu__kernel_alloc(ctx, sizeof *us);
  if (!us) return toplu__kernel_error(ctx, TOPLU_ERR_OUT_OF_MEMORY, "out of memory");
  memset(us, 0, sizeof *us);
  ctx->state = us;
  dnnl_dims_t od = {y->dims[0], y->dims[1], y->dims[2], y->dims[3]};
  dnnl_format_tag_t tag = cl ? dnnl_acdb
                         : blk == 8 ? dnnl_aBcd8b : blk == 16 ? dnnl_aBcd16b : blk == 4 ? dnnl_aBcd4b : dnnl_format_tag_undef;
  if (tag == dnnl_format_tag_undef || dnnl_memory_desc_init_by_tag(&us->out_md, 4, od, dnnl_f32, tag) != dnnl_success)
    return toplu__kernel_error(ctx, TOPLU_ERR_UNSUPPORTED, "blocked Resize: block %lld", (long long)blk);
  us->n = x->dims[0];
  us->cb = cl ? 1 : md->padded_dims[1] / blk;
  us->ih = x->dims[2];
  us->iw = x->dims[3];
  us->fh = y->dims[2] / x->dims[2];
  us->fw = y->dims[3] / x->dims[3];
  us->blk = blk;
  info->out_md[0] = &us->out_md;
  info->impl = cl ? "toplu:upsample_nearest:acdb" : "toplu:upsample_nearest:blocked";
  return TOPLU_OK;
}

static toplu_status_t upsample_run(toplu__kernel_ctx_t *ctx) {
  const upsample_state_t *us = ctx->state;
  const float *x = ctx->in[0].data;
  float *y = ctx->out[0].data;
  int64_t blk = us->blk, oh = us->ih * us->fh, ow = us->iw * us->fw, planes = us->n * us->cb;
#pragma omp parallel for num_threads(ctx->threads) collapse(2) if (planes * oh * ow * blk > 32768)
  for (int64_t p = 0; p < planes; p++)
    for (int64_t h = 0; h < oh; h++) {
      const float *src = x + (p * us->ih + h / us->fh) * us->iw * blk;
      float *dst = y + (p * oh + h) * ow * blk;
      for (int64_t w = 0; w < us->iw; w++)
        for (int64_t r = 0; r < us->fw; r++) memcpy(dst + (w * us->fw + r) * blk, src + w * blk, (size_t)blk * sizeof(float));
    }
  return TOPLU_OK;
}

static void upsample_release(toplu__kernel_ctx_t *ctx) {
  toplu__kernel_free(ctx, ctx->state);
  ctx->state = NULL;
}

/* ---- toplu.QuantizeDequantizeLinear, per tensor, on any layout ---- */

/* ---- kernels that run over a padded blocked buffer as one flat array ---- */

/* The first member of such a kernel's state: its layout and length. */
typedef struct flat_state {
  dnnl_memory_desc_t md;
  int64_t n; /* floats in the buffer, padding included */
} flat_state_t;

/* Allocates a state of `bytes` (a flat_state_t first) for an output in
 * input 0's layout, not in place; NULL when out of memory. */
static void *flat_prepare(toplu__kernel_ctx_t *ctx, toplu__kernel_info_t *info, size_t bytes) {
  flat_state_t *fs = toplu__kernel_alloc(ctx, bytes);
  if (!fs) return NULL;
  ctx->state = fs;
  fs->md = *(const dnnl_memory_desc_t *)ctx->in_md[0];
  fs->n = (int64_t)(dnnl_memory_desc_get_size(&fs->md) / sizeof(float));
  info->out_md[0] = &fs->md;
  info->inplace_input = 0;
  return fs;
}

/* body(state, x, y, b, e) over [0, n) in chunks of 16384 floats, on the
 * kernel's threads from 131072 floats up. */
static void flat_for(const toplu__kernel_ctx_t *ctx, void (*body)(const void *, const float *, float *, int64_t, int64_t)) {
  const flat_state_t *fs = ctx->state;
  const float *x = ctx->in[0].data;
  float *y = ctx->out[0].data;
  int64_t n = fs->n, chunk = 16384, nb = (n + chunk - 1) / chunk;
#pragma omp parallel for num_threads(ctx->threads) schedule(static) if (n >= 131072)
  for (int64_t b = 0; b < nb; b++) body(fs, x, y, b * chunk, (b + 1) * chunk < n ? (b + 1) * chunk : n);
}

typedef struct fake_quant_state {
  flat_state_t flat;
  float scale, lo, hi;  /* clamp bounds after removing the zero point */
} fake_quant_state_t;

/* A per-tensor QDQ round trip maps 0 to 0 (the zero point is in range), so it
 * can run over a padded blocked buffer as one flat array.  The arithmetic is
 * ops/quant.c's: clamp(x / s, lo - zp, hi - zp), round half to even, times s. */
static toplu_status_t fake_quant_prepare(toplu__kernel_ctx_t *ctx, toplu__kernel_info_t *info) {
  if (!ctx->in_md || !ctx->in_md[0] || ctx->in[0].dtype != TOPLU_DTYPE_FLOAT)
    return toplu__kernel_error(ctx, TOPLU_ERR_UNSUPPORTED, "blocked QDQ takes blocked float32");
  const toplu_tensor_t *s = &ctx->in[1], *z = ctx->n_in > 2 && ctx->in[2].ndim >= 0 ? &ctx->in[2] : NULL;
  if (!s->data || s->dtype != TOPLU_DTYPE_FLOAT || toplu_tensor_numel(s) != 1 || (z && (!z->data || toplu_tensor_numel(z) != 1)))
    return toplu__kernel_error(ctx, TOPLU_ERR_UNSUPPORTED, "blocked QDQ: constant per-tensor scale and zero point only");
  float lo = 0.f, hi = 255.f, zp = 0.f;
  if (z) {
    switch (z->dtype) {
      case TOPLU_DTYPE_INT8: lo = -128.f, hi = 127.f, zp = (float)*(const int8_t *)z->data; break;
      case TOPLU_DTYPE_UINT8: zp = (float)*(const uint8_t *)z->data; break;
      default: return toplu__kernel_error(ctx, TOPLU_ERR_UNSUPPORTED, "blocked QDQ: 8-bit zero points only");
    }
  }
  float sc = *(const float *)s->data;
  if (!(sc > 0.f)) return toplu__kernel_error(ctx, TOPLU_ERR_UNSUPPORTED, "blocked QDQ: scale must be > 0");
  fake_quant_state_t *fs = flat_prepare(ctx, info, sizeof *fs);
  if (!fs) return toplu__kernel_error(ctx, TOPLU_ERR_OUT_OF_MEMORY, "out of memory");
  fs->scale = sc;
  fs->lo = lo - zp;
  fs->hi = hi - zp;
  return TOPLU_OK;
}

static void fake_quant_body(const void *st, const float *x, float *y, int64_t b, int64_t e) {
  const fake_quant_state_t *fs = st;
  const float s = fs->scale, l = fs->lo, h = fs->hi, magic = 12582912.0f; /* 1.5 * 2^23 */
  for (int64_t i = b; i < e; i++) {
    float v = x[i] / s;
    v = v >= l ? v : l;
    v = v <= h ? v : h;
    y[i] = ((v + magic) - magic) * s;
  }
}

static toplu_status_t fake_quant_run(toplu__kernel_ctx_t *ctx) {
  flat_for(ctx, fake_quant_body);
  return TOPLU_OK;
}

/* ---- Relu on any layout: max(0, x) over the padded buffer as one flat array ----
 * Not oneDNN's eltwise relu, which gives 0 for NaN (oneDNN 2.6): ONNX's
 * max(0, x) keeps NaN, as ONNX Runtime does.  The padding holds zeros and
 * Relu keeps them.  x < 0 ? 0 : x compiles to maxps(0, x), which gives x
 * for NaN, at the speed of oneDNN's (a memory-bound pass). */

static toplu_status_t relu_prepare(toplu__kernel_ctx_t *ctx, toplu__kernel_info_t *info) {
  toplu_status_t st = float_blocked_input(ctx, 0);
  if (st || !ctx->in_md || !ctx->in_md[0]) return st ? st : toplu__kernel_error(ctx, TOPLU_ERR_UNSUPPORTED, "plain input");
  return flat_prepare(ctx, info, sizeof(flat_state_t)) ? TOPLU_OK
                                                       : toplu__kernel_error(ctx, TOPLU_ERR_OUT_OF_MEMORY, "out of memory");
}

static void relu_body(const void *st, const float *x, float *y, int64_t b, int64_t e) {
  (void)st;
  for (int64_t i = b; i < e; i++) y[i] = x[i] < 0.f ? 0.f : x[i];
}

static toplu_status_t relu_run(toplu__kernel_ctx_t *ctx) {
  flat_for(ctx, relu_body);
  return TOPLU_OK;
}

/* ---- QuantizeLinear and DequantizeLinear, per tensor, on a layout without padding ----
 * Element-wise with one scale and zero point, so the layout does not
 * matter as long as every element of the buffer is one of the tensor's:
 * channels last (acdb) always, a channel-blocked layout when the channels
 * fill its blocks.  A padded block would quantize its zeros to the zero
 * point.  The output keeps the input's layout in the other data type, so an
 * integer convolution after a float one (or a float op after an integer
 * one) needs no reorder to plain and back.  The arithmetic is ops/quant.c's. */

typedef struct qdq_layout_state {
  dnnl_memory_desc_t md; /* output 0's layout */
  int64_t n;             /* elements */
  toplu_dtype_t t;       /* the integer type: output of QuantizeLinear, input of DequantizeLinear */
  int quant;
  float scale;
  int32_t zp;
} qdq_layout_state_t;

static int qdq_int8(toplu_dtype_t t) { return t == TOPLU_DTYPE_UINT8 || t == TOPLU_DTYPE_INT8; }

/* Input i's layout in output 0's type, into *md, when every byte of both buffers is an element of the tensor (no
 * padded block); 0 otherwise.  Element-wise kernels with one parameter for all elements run over such a buffer as
 * one flat array. */
static int dense_layout_as_output(const toplu__kernel_ctx_t *ctx, int i, dnnl_memory_desc_t *md) {
  *md = *(const dnnl_memory_desc_t *)ctx->in_md[i];
  size_t n = (size_t)toplu_tensor_numel(&ctx->in[i]);
  if (md->extra.flags != 0 || dnnl_memory_desc_get_size(md) != n * toplu_dtype_size(ctx->in[i].dtype)) return 0;
  md->data_type = toplu__dnnl_dtype(ctx->out[0].dtype);
  return dnnl_memory_desc_get_size(md) == n * toplu_dtype_size(ctx->out[0].dtype);
}

static toplu_status_t qdq_layout_prepare(toplu__kernel_ctx_t *ctx, toplu__kernel_info_t *info) {
  int quant = !strcmp(ctx->node->op_type, "QuantizeLinear");
  const toplu_tensor_t *x = &ctx->in[0], *y = &ctx->out[0], *s = &ctx->in[1];
  const toplu_tensor_t *z = ctx->n_in > 2 && ctx->in[2].ndim >= 0 ? &ctx->in[2] : NULL;
  if (!ctx->in_md || !ctx->in_md[0]) return toplu__kernel_error(ctx, TOPLU_ERR_UNSUPPORTED, "plain input");
  toplu_dtype_t t = quant ? y->dtype : x->dtype;
  if ((quant ? x->dtype : y->dtype) != TOPLU_DTYPE_FLOAT || !qdq_int8(t))
    return toplu__kernel_error(ctx, TOPLU_ERR_UNSUPPORTED, "blocked (de)quantization: float32 and 8-bit only");
  if (!s->data || s->dtype != TOPLU_DTYPE_FLOAT || toplu_tensor_numel(s) != 1 || s->ndim > 1 ||
      (z && (!z->data || toplu_tensor_numel(z) != 1 || z->dtype != t)))
    return toplu__kernel_error(ctx, TOPLU_ERR_UNSUPPORTED,
                               "blocked (de)quantization: constant per-tensor scale and zero point only");
  dnnl_memory_desc_t md;
  int64_t n = toplu_tensor_numel(x);
  if (!dense_layout_as_output(ctx, 0, &md))
    return toplu__kernel_error(ctx, TOPLU_ERR_UNSUPPORTED, "blocked (de)quantization: a padded layout");
  qdq_layout_state_t *q = toplu__kernel_alloc(ctx, sizeof *q);
  if (!q) return toplu__kernel_error(ctx, TOPLU_ERR_OUT_OF_MEMORY, "out of memory");
  ctx->state = q;
  q->md = md;
  q->n = n;
  q->t = t;
  q->quant = quant;
  q->scale = *(const float *)s->data;
  q->zp = !z ? 0 : t == TOPLU_DTYPE_INT8 ? (int32_t) * (const int8_t *)z->data : (int32_t) * (const uint8_t *)z->data;
  info->out_md[0] = &q->md;
  return TOPLU_OK;
}

static toplu_status_t qdq_layout_run(toplu__kernel_ctx_t *ctx) {
  const qdq_layout_state_t *q = ctx->state;
  const char *x = ctx->in[0].data;
  char *y = ctx->out[0].data;
  int64_t n = q->n, chunk = 16384, nb = (n + chunk - 1) / chunk;
#pragma omp parallel for num_threads(ctx->threads) schedule(static) if (n >= 131072)
  for (int64_t b = 0; b < nb; b++) {
    int64_t off = b * chunk, len = n - off < chunk ? n - off : chunk;
    if (q->quant)
      toplu__quantize_span(q->t, (const float *)x + off, y + off, len, q->scale, (float)q->zp);
    else
      toplu__dequantize_span(q->t, x + off, (float *)y + off, len, q->scale, q->zp);
  }
  return TOPLU_OK;
}

/* ---- toplu.QLinearLookup on a layout without padding: the table of ops/elementwise.c, byte by byte ---- */

typedef struct lookup_layout_state {
  dnnl_memory_desc_t md; /* output 0's layout: the input's in the output's type */
  int64_t n;
  uint8_t table[256];
} lookup_layout_state_t;

static toplu_status_t lookup_layout_prepare(toplu__kernel_ctx_t *ctx, toplu__kernel_info_t *info) {
  if (!ctx->in_md || !ctx->in_md[0]) return toplu__kernel_error(ctx, TOPLU_ERR_UNSUPPORTED, "plain input");
  if (!qdq_int8(ctx->in[0].dtype) || !qdq_int8(ctx->out[0].dtype))
    return toplu__kernel_error(ctx, TOPLU_ERR_UNSUPPORTED, "blocked QLinearLookup: 8-bit only");
  dnnl_memory_desc_t md;
  int64_t n = toplu_tensor_numel(&ctx->in[0]);
  if (!dense_layout_as_output(ctx, 0, &md))
    return toplu__kernel_error(ctx, TOPLU_ERR_UNSUPPORTED, "blocked QLinearLookup: a padded layout");
  lookup_layout_state_t *l = toplu__kernel_alloc(ctx, sizeof *l);
  if (!l) return toplu__kernel_error(ctx, TOPLU_ERR_OUT_OF_MEMORY, "out of memory");
  ctx->state = l;
  l->md = md;
  l->n = n;
  toplu_status_t st = toplu__qlookup_table(ctx, l->table);
  if (st) return st;
  info->out_md[0] = &l->md;
  info->inplace_input = 0;
  return TOPLU_OK;
}

static toplu_status_t lookup_layout_run(toplu__kernel_ctx_t *ctx) {
  const lookup_layout_state_t *l = ctx->state;
  toplu__qlookup_run(l->table, ctx->in[0].data, ctx->out[0].data, l->n, ctx->threads);
  return TOPLU_OK;
}

/* ---- com.microsoft QLinearAdd / QLinearMul on a layout without padding: A and B of one shape (no broadcast), B
 * reordered into A's layout where it is not in it, the plain kernel's arithmetic element by element ---- */

typedef struct qbin_layout_state {
  dnnl_memory_desc_t md; /* A's layout, for B and the output */
  int64_t n;
  toplu__qbin_t q;
} qbin_layout_state_t;

static toplu_status_t qbin_layout_prepare(toplu__kernel_ctx_t *ctx, toplu__kernel_info_t *info) {
  if (ctx->n_in < 7) return toplu__kernel_error(ctx, TOPLU_ERR_UNSUPPORTED, "blocked %s: inputs", ctx->node->op_type);
  const toplu_tensor_t *x0 = &ctx->in[0], *x3 = &ctx->in[3], *y = &ctx->out[0];
  if (!qdq_int8(x0->dtype) || x3->dtype != x0->dtype || y->dtype != x0->dtype)
    return toplu__kernel_error(ctx, TOPLU_ERR_UNSUPPORTED, "blocked %s: one 8-bit type", ctx->node->op_type);
  int same = x0->ndim == y->ndim && x3->ndim == y->ndim && !x0->data && !x3->data;
  for (int d = 0; same && d < y->ndim; d++) same = x0->dims[d] == y->dims[d] && x3->dims[d] == y->dims[d];
  if (!same) return toplu__kernel_error(ctx, TOPLU_ERR_UNSUPPORTED, "blocked %s: a broadcast", ctx->node->op_type);
  int a = ctx->in_md && ctx->in_md[0] ? 0 : ctx->in_md && ctx->in_md[3] ? 3 : -1;
  if (a < 0) return toplu__kernel_error(ctx, TOPLU_ERR_UNSUPPORTED, "plain inputs");
  dnnl_memory_desc_t md;
  if (!dense_layout_as_output(ctx, a, &md))
    return toplu__kernel_error(ctx, TOPLU_ERR_UNSUPPORTED, "blocked %s: a padded layout", ctx->node->op_type);
  qbin_layout_state_t *l = toplu__kernel_alloc(ctx, sizeof *l);
  if (!l) return toplu__kernel_error(ctx, TOPLU_ERR_OUT_OF_MEMORY, "out of memory");
  ctx->state = l;
  l->md = md;
  l->n = toplu_tensor_numel(y);
  toplu_status_t st = toplu__qbin_params(ctx, &l->q);
  if (st) return st;
  int b = 3 - a;
  if (!ctx->in_md[b] || !dnnl_memory_desc_equal(ctx->in_md[b], &l->md)) info->want_md[b] = &l->md;
  info->out_md[0] = &l->md;
  return TOPLU_OK;
}

static toplu_status_t qbin_layout_run(toplu__kernel_ctx_t *ctx) {
  const qbin_layout_state_t *l = ctx->state;
  toplu__qbin_flat(&l->q, ctx->in[0].data, ctx->in[3].data, ctx->out[0].data, l->n, ctx->threads);
  return TOPLU_OK;
}

#define PRIM_KERNEL(op, prep)                                                                                 \
  {.op_type = op, .domain = "", .prepare = prep, .run = prim_run, .release = prim_release, .bind = prim_bind, \
   .unbind = prim_unbind, .flags = TOPLU_KERNEL_LAYOUT | TOPLU_KERNEL_BLOCKED_ALT}
#define BINARY_KERNEL(op)                                                                                      \
  {.op_type = op, .domain = "", .prepare = binary_prepare, .run = binary_run, .release = binary_release,      \
   .bind = binary_bind, .unbind = binary_unbind, .flags = TOPLU_KERNEL_LAYOUT | TOPLU_KERNEL_BLOCKED_ALT}
#define ELTWISE_KERNEL(op)                                                                                             \
  {.op_type = op, .domain = "", .prepare = eltwise_prepare, .run = eltwise_run, .release = eltwise_release,          \
   .bind = eltwise_bind, .unbind = eltwise_unbind, .flags = TOPLU_KERNEL_LAYOUT | TOPLU_KERNEL_BLOCKED_ALT}

const toplu__kernel_t toplu__kernels_blocked[] = {
    {.op_type = "Relu", .domain = "", .prepare = relu_prepare, .run = relu_run, .release = upsample_release,
     .flags = TOPLU_KERNEL_LAYOUT | TOPLU_KERNEL_BLOCKED_ALT},
    ELTWISE_KERNEL("LeakyRelu"),
    ELTWISE_KERNEL("Sigmoid"),
    ELTWISE_KERNEL("Tanh"),
    ELTWISE_KERNEL("Sqrt"),
    ELTWISE_KERNEL("Exp"),
    ELTWISE_KERNEL("HardSwish"),
    ELTWISE_KERNEL("HardSigmoid"),
    ELTWISE_KERNEL("Clip"),
    BINARY_KERNEL("Add"),
    BINARY_KERNEL("Sub"),
    BINARY_KERNEL("Mul"),
    BINARY_KERNEL("Div"),
    BINARY_KERNEL("Max"),
    BINARY_KERNEL("Min"),
    PRIM_KERNEL("MaxPool", pool_prepare),
    PRIM_KERNEL("AveragePool", pool_prepare),
    PRIM_KERNEL("GlobalAveragePool", pool_prepare),
    PRIM_KERNEL("GlobalMaxPool", pool_prepare),
    PRIM_KERNEL("Concat", concat_prepare),
    {.op_type = "QuantizeDequantizeLinear", .domain = "toplu", .prepare = fake_quant_prepare, .run = fake_quant_run,
     .release = upsample_release, .flags = TOPLU_KERNEL_LAYOUT | TOPLU_KERNEL_BLOCKED_ALT},
    {.op_type = "QuantizeLinear", .domain = "", .prepare = qdq_layout_prepare, .run = qdq_layout_run,
     .release = upsample_release, .flags = TOPLU_KERNEL_LAYOUT | TOPLU_KERNEL_BLOCKED_ALT},
    {.op_type = "DequantizeLinear", .domain = "", .prepare = qdq_layout_prepare, .run = qdq_layout_run,
     .release = upsample_release, .flags = TOPLU_KERNEL_LAYOUT | TOPLU_KERNEL_BLOCKED_ALT},
    {.op_type = "QLinearLookup", .domain = "toplu", .prepare = lookup_layout_prepare, .run = lookup_layout_run,
     .release = upsample_release, .flags = TOPLU_KERNEL_LAYOUT | TOPLU_KERNEL_BLOCKED_ALT},
    {.op_type = "QLinearAdd", .domain = "com.microsoft", .prepare = qbin_layout_prepare, .run = qbin_layout_run,
     .release = upsample_release, .flags = TOPLU_KERNEL_LAYOUT | TOPLU_KERNEL_BLOCKED_ALT},
    {.op_type = "QLinearMul", .domain = "com.microsoft", .prepare = qbin_layout_prepare, .run = qbin_layout_run,
     .release = upsample_release, .flags = TOPLU_KERNEL_LAYOUT | TOPLU_KERNEL_BLOCKED_ALT},
    {.op_type = "Resize", .domain = "", .prepare = upsample_prepare, .run = upsample_run, .release = upsample_release,
     .flags = TOPLU_KERNEL_LAYOUT | TOPLU_KERNEL_BLOCKED_ALT},
    {.op_type = NULL},
};
