/*
 * ops/onednn/qmatmul.c - integer MatMul on oneDNN's u8s8s32 / s8s8s32 matmul:
 * MatMulInteger-10, QLinearMatMul-10 and toplu.DynamicQuantizeMatMul.
 *
 * Candidates tried before the exact plain-C kernels of ops/quant_matmul.c
 * (TOPLU_KERNEL_SPECIALISED: prepare refuses what they do not take, and
 * constant folding always runs the plain-C ones).  Taken only on a CPU
 * whose oneDNN ISA has VNNI (toplu__cpu_int8_exact: without it oneDNN's
 * u8 x s8 products go through saturating 16-bit sums), with int8 B whose
 * zero points are constant zeros (symmetric weights, as quantizers write
 * them), A uint8 or int8 with one zero point (a scalar; a constant or read
 * at run time), and for QLinearMatMul constant scales (a_scale one value,
 * b_scale one or one per column) and a constant scalar y_zero_point.  The
 * rest (per-row A parameters, uint8 or asymmetric B, parameters given at
 * run time, shapes oneDNN refuses) stays on the plain-C kernels.
 *
 * Shapes: numpy matmul.  A 2-D (or 1-D) B takes every batch dim of A into
 * M, so one oneDNN call covers the whole batch ([.., M, K] x [K, N] as
 * [rows, K] x [K, N]), B constant packed once at plan time (shared by the
 * session's plans: toplu__dnnl_pack_const).  A B with batch dims is one
 * batched oneDNN matmul with the batch dims broadcast (a dim of 1 in A or
 * B).
 *
 * Arithmetic (oneDNN 2.x "Int8 computation"): acc = sum (a - a_zp) b in
 * int32 (exact with VNNI), then
 *   MatMulInteger          y = acc (int32);
 *   QLinearMatMul          y = saturate(round_half_even(acc * s[n]) + y_zp),
 *                          s[n] = a_scale * b_scale[n] / y_scale in float32
 *                          as the plain-C kernel computes it;
 *   DynamicQuantizeMatMul  x is quantized to uint8 into the workspace as
 *                          DynamicQuantizeLinear does (ops/dynquant.h:
 *                          the same bits); oneDNN writes float32(acc)
 *                          (no output scales: that keeps oneDNN 2.6 on
 *                          its brgemm VNNI kernel, where runtime scales
 *                          sent it to gemm:jit, 10% slower on BERT-base's
 *                          [512 x 768] x [768 x 3072]), then one pass
 *                          over the rows makes y = acc * (x_scale *
 *                          w_scale[n]) + bias[n] in the unfused graph's
 *                          float32 order (Cast -> Mul -> Add: the same
 *                          bits) and applies the node's fused post-ops
 *                          (GELU, the residual SUM, activations:
 *                          toplu__dqmm_post_range; the output never takes
 *                          over the addend's buffer).
 *   toplu.QLinearMatMul    (graph/fuse.c's QDQ MatMul/Gemm) QLinearMatMul
 *                          with B int32 [N] as oneDNN's bias, added to acc
 *                          before the output scales; with a float32
 *                          output (no y_scale): float32(acc), then the
 *                          pass after makes acc * (a_scale b_scale[n]) +
 *                          B[n] (float) and the fused post-ops, as for
 *                          DynamicQuantizeMatMul.
 * Run path: no allocation; the quantized x, the per-column scales, the
 * runtime zero point and oneDNN's scratchpad live in the plan's workspace.
 */
#include <string.h>

#include "ops/dynquant.h"
#include "ops/elem_io.h"
#include "ops/onednn/onednn.h"

enum { QM_INTEGER, QM_QLINEAR, QM_DYNAMIC };

typedef struct qmm_state {
  int mode;
  toplu__dnnl_prim_t prim;
  void *packed_b;         /* constant B in oneDNN's layout, or NULL (B read at run time) */
  float *scales;          /* QLINEAR: the output scales [ns]; DYNAMIC: w_scale [ns] */
  int64_t ns;             /* 1 or n */
  int64_t n, k, xnumel;   /* columns, shared dim, elements of A (DYNAMIC: of x) */
  int azp_input;          /* input holding A's zero point (absent: -1); DYNAMIC: -1 */
  int src_zp;             /* oneDNN has a runtime src zero point */
  int32_t zp_dst;         /* QLINEAR: y_zero_point (a oneDNN runtime zero point from the state) */
  size_t off_xq, off_scales, off_zp; /* workspace offsets */
  int scale_after;        /* DYNAMIC: oneDNN writes float(acc); scales, bias and post-ops in one pass after */
  int bias_input;         /* DYNAMIC: the bias input, or -1 */
} qmm_state_t;


static int all_zero_const(const toplu_tensor_t *t) {
  if (!t || t->ndim < 0) return 1; /* absent */
  if (!t->data) return 0;
  for (int64_t i = 0; i < toplu_tensor_numel(t); i++)
    if (toplu__zero_point_at(t, i) != 0) return 0;
  return 1;
}

static const toplu_tensor_t *opt_in(const toplu__kernel_ctx_t *ctx, int i) {
  return i < ctx->n_in && ctx->in[i].ndim >= 0 ? &ctx->in[i] : NULL;
}

static dnnl_status_t strided_md(dnnl_memory_desc_t *md, int nd, const int64_t *dims, dnnl_data_type_t dt) {
  dnnl_dims_t d, s;
  int64_t st = 1;
  for (int i = nd - 1; i >= 0; i--) {
    d[i] = dims[i];
    s[i] = st;
    st *= dims[i] ? dims[i] : 1;
  }
  return dnnl_memory_desc_init_by_strides(md, nd, d, dt, s);
}

static toplu_status_t refuse(toplu__kernel_ctx_t *ctx, const char *why) {
  return toplu__kernel_error(ctx, TOPLU_ERR_UNSUPPORTED, "oneDNN integer matmul: %s", why);
}

static toplu_status_t qmm_prepare(toplu__kernel_ctx_t *ctx, toplu__kernel_info_t *info) {
  const toplu__node_t *nd = ctx->node;
  int mode = !strcmp(nd->op_type, "QLinearMatMul") ? QM_QLINEAR : !strcmp(nd->op_type, "MatMulInteger") ? QM_INTEGER : QM_DYNAMIC;
  int ext = mode == QM_QLINEAR && nd->domain[0];           /* toplu.QLinearMatMul: with B, maybe float out */
  int float_out = ext && ctx->out[0].dtype == TOPLU_DTYPE_FLOAT;
  if (!toplu__cpu_int8_exact()) return refuse(ctx, "no VNNI on this CPU (16-bit sums would saturate)");
  int bi = mode == QM_QLINEAR ? 3 : 1;
  const toplu_tensor_t *a = &ctx->in[0], *b = &ctx->in[bi];
  const toplu_tensor_t *azp = mode == QM_DYNAMIC ? NULL : opt_in(ctx, 2);
  const toplu_tensor_t *bzp = opt_in(ctx, mode == QM_QLINEAR ? 5 : 3);
  if (b->dtype != TOPLU_DTYPE_INT8) return refuse(ctx, "B is not int8");
  if (!all_zero_const(bzp)) return refuse(ctx, "B's zero point is not a constant 0");
  if (azp && toplu_tensor_numel(azp) != 1) return refuse(ctx, "A's zero point is per row");
  if (mode == QM_DYNAMIC && (a->dtype != TOPLU_DTYPE_FLOAT || !b->data || b->ndim != 2))
    return refuse(ctx, "x float32 and a constant 2-D w expected");
  if (mode != QM_DYNAMIC && a->dtype != TOPLU_DTYPE_UINT8 && a->dtype != TOPLU_DTYPE_INT8) return refuse(ctx, "A is not 8-bit");
  if (a->ndim < 1 || b->ndim < 1) return refuse(ctx, "rank 0");
  int64_t m = a->ndim >= 2 ? a->dims[a->ndim - 2] : 1, k = a->dims[a->ndim - 1];
  int64_t n = b->ndim >= 2 ? b->dims[b->ndim - 1] : 1;
  int64_t anumel = toplu_tensor_numel(a);
  if (!m || !k || !n || !anumel) return refuse(ctx, "empty operands");
  if (k > 33000) return refuse(ctx, "K above 33000: int32 sums could overflow where the plain-C kernel saturates");
  float a_scale = 1.f, y_scale = 1.f;
  const toplu_tensor_t *bs = NULL;
  if (mode == QM_QLINEAR) {
    bs = &ctx->in[4];
    for (int i = 1; i < (float_out ? 6 : 8); i++)
      if (i != 3 && i != 2 && !ctx->in[i].data) return refuse(ctx, "scales or y_zero_point given at run time");
    if (toplu_tensor_numel(&ctx->in[1]) != 1 ||
        (!float_out && (toplu_tensor_numel(&ctx->in[6]) != 1 || toplu_tensor_numel(&ctx->in[7]) != 1)))
      return refuse(ctx, "a_scale or y parameters per row");
    a_scale = ((const float *)ctx->in[1].data)[0];
    y_scale = float_out ? 1.f : ((const float *)ctx->in[6].data)[0];
  } else if (mode == QM_DYNAMIC) {
    bs = &ctx->in[2];
    if (!bs->data) return refuse(ctx, "w_scale given at run time");
  }
  if (bs && toplu_tensor_numel(bs) != 1 && toplu_tensor_numel(bs) != n) return refuse(ctx, "b_scale is neither one value nor one per column");
  if (nd->n_post && ((mode != QM_DYNAMIC && !float_out) || !toplu__dqmm_post_ok(nd))) return refuse(ctx, "fused post-ops");
  const toplu_tensor_t *bias = mode == QM_DYNAMIC ? opt_in(ctx, 4) : ext ? opt_in(ctx, 8) : NULL;
  toplu_dtype_t bias_dt = mode == QM_DYNAMIC || float_out ? TOPLU_DTYPE_FLOAT : TOPLU_DTYPE_INT32;
  if (bias && (bias->dtype != bias_dt || toplu_tensor_numel(bias) != n)) return refuse(ctx, "bias is not a row [N] of its type");
  if (bias && !float_out && mode != QM_DYNAMIC && b->ndim > 2) return refuse(ctx, "bias with batched B");

  qmm_state_t *qs = toplu__kernel_alloc(ctx, sizeof *qs);
  if (!qs) return toplu__kernel_error(ctx, TOPLU_ERR_OUT_OF_MEMORY, "out of memory");
  memset(qs, 0, sizeof *qs);
  ctx->state = qs;
  qs->mode = mode;
  qs->n = n;
  qs->k = k;
  qs->xnumel = anumel;
  qs->azp_input = azp ? 2 : -1;
  qs->scale_after = mode == QM_DYNAMIC || float_out;
  qs->bias_input = bias ? (mode == QM_DYNAMIC ? 4 : 8) : -1;

  /* geometry: [rows, K] x [K, N] when B has no batch dims, else batched with broadcast */
  int64_t ad[TOPLU_MAX_DIMS + 2], bd[TOPLU_MAX_DIMS + 2], od[TOPLU_MAX_DIMS + 2];
  int ndims;
  if (b->ndim <= 2) {
    ndims = 2;
    ad[0] = anumel / k, ad[1] = k;
    bd[0] = k, bd[1] = n;
    od[0] = anumel / k, od[1] = n;
  } else {
    int ba = a->ndim > 2 ? a->ndim - 2 : 0, bb = b->ndim - 2, r = ba > bb ? ba : bb;
    if (r + 2 > DNNL_MAX_NDIMS) return refuse(ctx, "rank too high");
    for (int i = 0; i < r; i++) {
      int ia = i - (r - ba), ib = i - (r - bb);
      ad[i] = ia >= 0 ? a->dims[ia] : 1;
      bd[i] = b->dims[ib];
      od[i] = ad[i] > bd[i] ? ad[i] : bd[i];
    }
    ad[r] = m, ad[r + 1] = k;
    bd[r] = k, bd[r + 1] = n;
    od[r] = m, od[r + 1] = n;
    ndims = r + 2;
  }
  dnnl_data_type_t adt = mode == QM_DYNAMIC ? dnnl_u8 : toplu__dnnl_dtype(a->dtype);
  dnnl_data_type_t ydt = mode == QM_DYNAMIC ? dnnl_f32 : toplu__dnnl_dtype(ctx->out[0].dtype);
  dnnl_memory_desc_t amd, bmd, bany, omd, zmd, biasmd;
  memset(&bmd, 0, sizeof bmd); /* bany copies it before s is checked */
  int int_bias = bias && !qs->scale_after; /* int32 B in the accumulator's units: oneDNN's bias, added before the scales */
  dnnl_status_t s = strided_md(&amd, ndims, ad, adt);
  if (s == dnnl_success) s = strided_md(&bmd, ndims, bd, dnnl_s8);
  if (s == dnnl_success) s = strided_md(&omd, ndims, od, ydt);
  bany = bmd;
  if (s == dnnl_success && b->data) {
    dnnl_dims_t dd;
    for (int i = 0; i < ndims; i++) dd[i] = bd[i];
    s = dnnl_memory_desc_init_by_tag(&bany, ndims, dd, dnnl_s8, dnnl_format_tag_any);
  }
  dnnl_dims_t one = {1}, brow = {1, n};
  if (s == dnnl_success) s = dnnl_memory_desc_init_by_tag(&zmd, 1, one, dnnl_s32, dnnl_a);
  if (s == dnnl_success && int_bias) s = dnnl_memory_desc_init_by_tag(&biasmd, 2, brow, dnnl_s32, dnnl_ab);
  if (s != dnnl_success) return toplu__dnnl_error(ctx, s, "memory descriptor");

  dnnl_matmul_desc_t desc;
  dnnl_primitive_attr_t attr = NULL;
  dnnl_primitive_desc_t pd = NULL;
  s = dnnl_matmul_desc_init(&desc, &amd, &bany, int_bias ? &biasmd : NULL, &omd);
  if (s == dnnl_success) s = dnnl_primitive_attr_create(&attr);
  if (s == dnnl_success) s = dnnl_primitive_attr_set_scratchpad_mode(attr, dnnl_scratchpad_mode_user);
  const int32_t rt_zp = DNNL_RUNTIME_S32_VAL;
  qs->src_zp = mode == QM_DYNAMIC || (azp && !(azp->data && toplu__zero_point_at(azp, 0) == 0));
  if (s == dnnl_success && qs->src_zp) s = dnnl_primitive_attr_set_zero_points(attr, DNNL_ARG_SRC, 1, 0, &rt_zp);
  if (mode == QM_QLINEAR && !float_out) {
    qs->zp_dst = toplu__zero_point_at(&ctx->in[7], 0);
    if (s == dnnl_success && qs->zp_dst) s = dnnl_primitive_attr_set_zero_points(attr, DNNL_ARG_DST, 1, 0, &rt_zp);
  }
  if (bs) {
    qs->ns = float_out ? n : toplu_tensor_numel(bs); /* float out: the pass after reads one per column */
    if (!(qs->scales = toplu__kernel_alloc(ctx, (size_t)qs->ns * sizeof(float)))) {
      if (attr) dnnl_primitive_attr_destroy(attr);
      return toplu__kernel_error(ctx, TOPLU_ERR_OUT_OF_MEMORY, "out of memory");
    }
    info->state_bytes += (size_t)qs->ns * sizeof(float);
    for (int64_t c = 0; c < qs->ns; c++) {
      float bsc = ((const float *)bs->data)[toplu_tensor_numel(bs) == 1 ? 0 : c];
      qs->scales[c] = mode == QM_QLINEAR ? a_scale * bsc / y_scale : bsc;
    }
    int per_col = qs->ns > 1;
    if (s == dnnl_success && mode == QM_QLINEAR && !float_out)
      s = dnnl_primitive_attr_set_output_scales(attr, per_col ? n : 1, per_col ? 1 << (ndims - 1) : 0, qs->scales);
  }
  if (s == dnnl_success) s = dnnl_primitive_desc_create(&pd, &desc, attr, toplu__dnnl_engine(ctx->backend), NULL);
  if (attr) dnnl_primitive_attr_destroy(attr);
  if (s != dnnl_success) return refuse(ctx, toplu__dnnl_status_name(s)); /* the plain-C kernel then */
  dnnl_memory_desc_t wmd = *dnnl_primitive_desc_query_md(pd, dnnl_query_weights_md, 0);
  toplu_status_t st;
  if (b->data) {
    size_t bytes;
    if ((st = toplu__dnnl_pack_const(ctx, info, &bmd, b->data, &wmd, &qs->packed_b, &bytes))) {
      dnnl_primitive_desc_destroy(pd);
      return st;
    }
    info->consumed_consts |= 1u << bi;
  }
  /* workspace: [x quantized][scales][zero point][oneDNN scratchpad] */
  size_t off = 0;
  if (mode == QM_DYNAMIC) {
    qs->off_xq = off;
    off = toplu__align64(off + (size_t)anumel);
    qs->off_scales = off;
    off = toplu__align64(off + (size_t)n * sizeof(float));
  }
  qs->off_zp = off;
  off = toplu__align64(off + sizeof(int32_t));
  if (off > info->workspace_bytes) info->workspace_bytes = off;
  if ((st = toplu__dnnl_prim_create_later(ctx, &qs->prim, pd, off, info))) return st;
  toplu__dnnl_prim_t *p = &qs->prim;
  if (mode == QM_DYNAMIC) {
    toplu__dnnl_prim_arg_ws(p, DNNL_ARG_SRC, qs->off_xq, &amd);
  } else {
    toplu__dnnl_prim_arg(p, DNNL_ARG_SRC, TOPLU_DNNL_FROM_INPUT, 0, NULL, &amd);
  }
  if (b->data) toplu__dnnl_prim_arg(p, DNNL_ARG_WEIGHTS, TOPLU_DNNL_FROM_STATE, bi, qs->packed_b, &wmd);
  else toplu__dnnl_prim_arg(p, DNNL_ARG_WEIGHTS, TOPLU_DNNL_FROM_INPUT, bi, NULL, &bmd);
  toplu__dnnl_prim_arg(p, DNNL_ARG_DST, TOPLU_DNNL_FROM_OUTPUT, 0, NULL, &omd);
  if (int_bias) toplu__dnnl_prim_arg(p, DNNL_ARG_BIAS, TOPLU_DNNL_FROM_INPUT, 8, NULL, &biasmd);
  if (qs->src_zp) {
    toplu__dnnl_prim_arg_ws(p, DNNL_ARG_ATTR_ZERO_POINTS | DNNL_ARG_SRC, qs->off_zp, &zmd);
  }
  if (mode == QM_QLINEAR && qs->zp_dst)
    toplu__dnnl_prim_arg(p, DNNL_ARG_ATTR_ZERO_POINTS | DNNL_ARG_DST, TOPLU_DNNL_FROM_STATE, 0, &qs->zp_dst, &zmd);
  if (mode == QM_DYNAMIC) {
  }
  return TOPLU_OK;
}

static toplu_status_t qmm_bind(toplu__kernel_ctx_t *ctx) {
  const qmm_state_t *qs = ctx->state;
  return toplu__dnnl_prim_bind(ctx, &qs->prim, &ctx->exec_state);
}

static void qmm_unbind(toplu__kernel_ctx_t *ctx) {
  if (ctx->exec_state) toplu__dnnl_prim_unbind(ctx->exec_state);
  ctx->exec_state = NULL;
}

static toplu_status_t qmm_run(toplu__kernel_ctx_t *ctx) {
  const qmm_state_t *qs = ctx->state;
  char *ws = ctx->workspace;
  int32_t *zp = (int32_t *)(ws + qs->off_zp);
  if (qs->mode == QM_DYNAMIC) {
    float xs, z, q;
    toplu__dynamic_qparams(ctx->in[0].data, qs->xnumel, ctx->threads, &xs, &z, &q);
    toplu__quantize_u8(ctx->in[0].data, (uint8_t *)(ws + qs->off_xq), qs->xnumel, q, z, ctx->threads);
    float *sc = (float *)(ws + qs->off_scales);
    for (int64_t c = 0; c < qs->n; c++) sc[c] = xs * qs->scales[qs->ns == 1 ? 0 : c]; /* the unfused Mul(x_scale, w_scale) */
    *zp = (int32_t)z;
  } else if (qs->src_zp) {
    *zp = toplu__zero_point_at(&ctx->in[qs->azp_input], 0);
  }
  toplu_status_t st = toplu__dnnl_prim_execute(ctx, &qs->prim, ctx->exec_state);
  if (st) return st;
  if (qs->scale_after) { /* y = float(acc) * (x_scale * w_scale[n]) [+ bias[n]], then the post-ops, row by row */
    float *y = ctx->out[0].data;
    const float *sc = qs->mode == QM_DYNAMIC ? (const float *)(ws + qs->off_scales) : qs->scales;
    const float *bias = qs->bias_input >= 0 ? ctx->in[qs->bias_input].data : NULL;
    int64_t n = qs->n, rows = toplu_tensor_numel(&ctx->out[0]) / n;
    int nt = ctx->threads;
    int post = ctx->node->n_post > 0;
#pragma omp parallel for num_threads(nt) if (nt > 1 && rows * n > 16384) schedule(static)
    for (int64_t r = 0; r < rows; r++) {
      float *yr = y + r * n;
      if (bias)
        for (int64_t j = 0; j < n; j++) yr[j] = yr[j] * sc[j] + bias[j];
      else
        for (int64_t j = 0; j < n; j++) yr[j] *= sc[j];
      if (post) toplu__dqmm_post_range(ctx, y, r * n, r * n + n);
    }
    return TOPLU_OK;
  }
  if (ctx->node->n_post) toplu__dqmm_post(ctx, ctx->out[0].data, toplu_tensor_numel(&ctx->out[0]), ctx->threads);
  return st;
}

static void qmm_release(toplu__kernel_ctx_t *ctx) {
  qmm_state_t *qs = ctx->state;
  if (!qs) return;
  toplu__dnnl_prim_destroy(&qs->prim);
  toplu__dnnl_pack_release(ctx, qs->packed_b);
  toplu__kernel_free(ctx, qs->scales);
  toplu__kernel_free(ctx, qs);
  ctx->state = NULL;
}

const toplu__kernel_t toplu__kernels_qmatmul[] = {
    {.op_type = "MatMulInteger", .domain = "", .prepare = qmm_prepare, .run = qmm_run, .release = qmm_release,
     .bind = qmm_bind, .unbind = qmm_unbind, .flags = TOPLU_KERNEL_SPECIALISED},
    {.op_type = "QLinearMatMul", .domain = "", .prepare = qmm_prepare, .run = qmm_run, .release = qmm_release,
     .bind = qmm_bind, .unbind = qmm_unbind, .flags = TOPLU_KERNEL_SPECIALISED},
    {.op_type = "QLinearMatMul", .domain = "toplu", .prepare = qmm_prepare, .run = qmm_run, .release = qmm_release,
     .bind = qmm_bind, .unbind = qmm_unbind, .flags = TOPLU_KERNEL_SPECIALISED},
    {.op_type = "DynamicQuantizeMatMul", .domain = "toplu", .prepare = qmm_prepare, .run = qmm_run, .release = qmm_release,
     .bind = qmm_bind, .unbind = qmm_unbind, .flags = TOPLU_KERNEL_SPECIALISED},
    {.op_type = NULL},
};
