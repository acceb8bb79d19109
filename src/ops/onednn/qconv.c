/*
 * ops/onednn/qconv.c - QLinearConv-10 on oneDNN's integer convolution, and ConvInteger-10.
 *
 * Also ConvInteger-10 (the int32 accumulators, (x - x_zp) conv (w - w_zp),
 * plain C, exact).
 *
 * ONNX QLinearConv (https://onnx.ai/onnx/operators/onnx__QLinearConv.html):
 *   y = saturate(round((conv(x - x_zp, w - w_zp) + B) * x_scale * w_scale[m] / y_scale) + y_zp)
 * x uint8 or int8 [N, C, spatial...], w [M, C/group, k...], B int32 [M],
 * y of y_zero_point's type; round is to nearest, ties to even.  graph/fuse.c
 * also writes a QLinearConv for a QDQ Conv (DequantizeLinear -> Conv ->
 * [Relu | Clip] -> QuantizeLinear), the activation in node->post, applied to
 * the real value (conv + B) * x_scale * w_scale before dividing by y_scale.
 *
 * QLinearConvFloat (domain "toplu", graph/fuse.c's integer convolution of
 * a QDQ Conv that no QuantizeLinear follows): the same without y_scale and
 * y_zero_point, writing float32 post((acc + B) * x_scale * w_scale[m]) -
 * oneDNN's u8s8 -> f32 convolution with those output scales, or plain C.
 *
 * A QLinearConv of graph/fuse.c may end in a QDQ residual Add
 * (TOPLU_POST_QSUM at input k: b, sb, zb, sa, za): the real value r of the
 * convolution (after the post-ops before it) becomes
 *   sa (saturate(round(r / sa) + za) - za) + sb (b - zb)
 * (the QDQ graph's QuantizeLinear -> DequantizeLinear -> Add), then the
 * post-ops after it (Relu) and y_scale, y_zero_point as above.  On oneDNN:
 * output scales x_scale w_scale / sa, post-ops round, clip(lo - za, hi -
 * za), linear(sa / y_scale), sum(sb / y_scale, zero point zb) over b
 * placed in dst beforehand (in place when b dies here: the planner lets
 * output 0 take b's buffer, in the dst layout), then the rest in y_scale
 * units.  The float arithmetic differs from the graph's only in rounding
 * order, so results differ from it only next to rounding ties (tested:
 * int8_residual_fuse).
 *
 * Two paths, chosen at plan time:
 *   - oneDNN (u8s8s32 / s8s8s32 with the VNNI or AVX2 integer dot products
 *     the CPU has): when the scales, zero points, W and B are constants, W
 *     is int8 with zero points 0 (symmetric, as ONNX Runtime's and
 *     TensorFlow Lite's quantizers write weights), and the post-ops are Relu
 *     or Clip.  Per-channel w_scale becomes oneDNN's per-channel output
 *     scale x_scale * w_scale[m] / y_scale; x_zp and y_zp are oneDNN's
 *     runtime zero points of src and dst (src padding then stays x_zp, as
 *     the float graph's zero padding of x - x_zp); a Relu is oneDNN's relu
 *     on the scaled value, a Clip(lo, hi) its clip(lo / y_scale, hi /
 *     y_scale).  oneDNN 2.x computes dst = post_ops(scale * (acc + B)) +
 *     dst_zp, rounded to nearest even and saturated (its "Int8 computation"
 *     guide).  Layout-aware like Conv (ops/onednn/conv.c): a chain of
 *     QLinearConvs passes blocked int8 activations from one to the next.
 *   - plain C with int32 accumulators otherwise (scales or weights given at
 *     run time, asymmetric or uint8 weights, a CPU without VNNI:
 *     toplu__cpu_int8_exact): exact, one thread, for conformance and models
 *     quantized unusually.
 */
#include <float.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "graph/schema_conv.h"
#include "ops/elem_io.h"
#include "ops/onednn/onednn.h"

typedef struct qconv_state {
  int fast;
  toplu__conv_params_t p;
  /* oneDNN path */
  toplu__dnnl_prim_t prim;
  void *packed_w;
  int32_t zp_src, zp_dst;
  float *scales;                     /* [M] or [1], toplu__kernel_alloc */
  float *min_bounds[TOPLU_MAX_POST]; /* per-channel Min post-ops: [M] bounds / y_scale */
  dnnl_memory_desc_t src_md, dst_md; /* layouts chosen (info->want_md / out_md point here) */
  dnnl_memory_desc_t min_md[TOPLU_MAX_POST];
  int min_index[TOPLU_MAX_POST];     /* their index in oneDNN's post-op chain */
  int qsum;                          /* TOPLU_POST_QSUM's first input (the residual b), or -1 */
  size_t dst_bytes;                  /* dst_md's size (the residual copied into dst) */
} qconv_state_t;

/* The first input of node n's TOPLU_POST_QSUM (the residual), or -1. */
static int qsum_input(const toplu__node_t *n) {
  for (int i = 0; i < n->n_post; i++)
    if (n->post[i].kind == TOPLU_POST_QSUM) return n->post[i].input;
  return -1;
}


static float scale_at(const toplu_tensor_t *t, int64_t i) {
  return toplu_tensor_numel(t) == 1 ? ((const float *)t->data)[0] : ((const float *)t->data)[i];
}

static int all_const(const toplu__kernel_ctx_t *ctx) {
  int qk = qsum_input(ctx->node);
  for (int i = 1; i < ctx->n_in; i++)
    if (i != qk && ctx->in[i].ndim >= 0 && !ctx->in[i].data) return 0;
  return 1;
}

/* Can the oneDNN path run this node?  Not with scales, zero points, W or B
 * given at run time, on a CPU without VNNI (oneDNN's 16-bit sums would
 * saturate), with uint8 weights or weight zero points other than 0, or with
 * a fused activation other than Relu, Clip or a per-channel Min. */
static int fast_ok(const toplu__kernel_ctx_t *ctx) {
  const toplu__node_t *n = ctx->node;
  if (!all_const(ctx) || !toplu__cpu_int8_exact() || ctx->in[3].dtype != TOPLU_DTYPE_INT8) return 0;
  const toplu_tensor_t *wz = &ctx->in[5];
  if (wz->ndim >= 0)
    for (int64_t i = 0; i < toplu_tensor_numel(wz); i++)
      if (toplu__zero_point_at(wz, i) != 0) return 0;
  for (int i = 0; i < n->n_post; i++)
    if (n->post[i].kind != TOPLU_POST_RELU && n->post[i].kind != TOPLU_POST_CLIP && n->post[i].kind != TOPLU_POST_MIN_CHANNEL &&
        n->post[i].kind != TOPLU_POST_QSUM)
      return 0;
  int qk = qsum_input(n);
  if (qk >= 0 && (ctx->out[0].dtype == TOPLU_DTYPE_FLOAT || qk + 5 > ctx->n_in || ctx->in[qk].dtype != ctx->out[0].dtype))
    return 0;
  return 1;
}

static toplu_status_t prepare_fast(toplu__kernel_ctx_t *ctx, toplu__kernel_info_t *info, qconv_state_t *cs) {
  const toplu__node_t *n = ctx->node;
  const toplu__conv_params_t *p = &cs->p;
  int64_t m = p->c_out;
  const toplu_tensor_t *ws = &ctx->in[4];
  int per_channel = toplu_tensor_numel(ws) > 1;
  int float_out = ctx->out[0].dtype == TOPLU_DTYPE_FLOAT; /* QLinearConvFloat */
  float sx = ((const float *)ctx->in[1].data)[0], sy = float_out ? 1.f : ((const float *)ctx->in[6].data)[0];
  if (!(sy > 0.f) || !(sx > 0.f)) return toplu__kernel_error(ctx, TOPLU_ERR_INVALID_MODEL, "x_scale and y_scale must be positive");
  cs->scales = toplu__kernel_alloc(ctx, (size_t)(per_channel ? m : 1) * sizeof(float));
  if (!cs->scales) return toplu__kernel_error(ctx, TOPLU_ERR_OUT_OF_MEMORY, "out of memory");
  info->state_bytes += (size_t)(per_channel ? m : 1) * sizeof(float);
  /* with a residual (QSUM) the convolution's value is first in the units of its own quantization, sa */
  int qk = cs->qsum;
  float s_mid = qk >= 0 ? ((const float *)ctx->in[qk + 3].data)[0] : sy;
  if (!(s_mid > 0.f)) return toplu__kernel_error(ctx, TOPLU_ERR_INVALID_MODEL, "the residual's scales must be positive");
  for (int64_t c = 0; c < (per_channel ? m : 1); c++) cs->scales[c] = sx * scale_at(ws, c) / s_mid;
  cs->zp_src = toplu__zero_point_at(&ctx->in[2], 0);
  cs->zp_dst = ctx->n_in > 7 && !float_out ? toplu__zero_point_at(&ctx->in[7], 0) : 0;

  dnnl_data_type_t xdt = toplu__dnnl_dtype(ctx->in[0].dtype), ydt = toplu__dnnl_dtype(ctx->out[0].dtype);
  dnnl_memory_desc_t src_md, dst_md, bias_md, wuser_md, wany_md;
  const dnnl_memory_desc_t *src_in = ctx->in_md ? ctx->in_md[0] : NULL;
  dnnl_dims_t sd, dd;
  for (int i = 0; i < ctx->in[0].ndim; i++) sd[i] = ctx->in[0].dims[i];
  for (int i = 0; i < ctx->out[0].ndim; i++) dd[i] = ctx->out[0].dims[i];
  dnnl_status_t s = dnnl_success;
  if (src_in) src_md = *src_in;
  else s = dnnl_memory_desc_init_by_tag(&src_md, ctx->in[0].ndim, sd, xdt, dnnl_format_tag_any);
  if (s == dnnl_success) s = dnnl_memory_desc_init_by_tag(&dst_md, ctx->out[0].ndim, dd, ydt, dnnl_format_tag_any);
  if (s == dnnl_success) s = toplu__dnnl_conv_weights_md(&wuser_md, p, dnnl_s8);
  if (s == dnnl_success) s = dnnl_memory_desc_init_by_tag(&wany_md, wuser_md.ndims, wuser_md.dims, dnnl_s8, dnnl_format_tag_any);
  int has_bias = ctx->n_in > 8 && ctx->in[8].ndim >= 0;
  if (s == dnnl_success && has_bias) s = toplu__dnnl_plain_md(&bias_md, &ctx->in[8]);
  if (s != dnnl_success) return toplu__dnnl_error(ctx, s, "memory descriptor");
  dnnl_dims_t strides, dil, pl, pr;
  for (int i = 0; i < p->spatial; i++) {
    strides[i] = p->stride[i];
    dil[i] = p->dilation[i] - 1;
    pl[i] = p->pad_begin[i];
    pr[i] = p->pad_end[i];
  }
  dnnl_convolution_desc_t desc;
  s = dnnl_dilated_convolution_forward_desc_init(&desc, dnnl_forward_inference, dnnl_convolution_direct, &src_md, &wany_md,
                                                 has_bias ? &bias_md : NULL, &dst_md, strides, dil, pl, pr);
  if (s != dnnl_success) return toplu__dnnl_error(ctx, s, "descriptor");
  dnnl_primitive_attr_t attr;
  if ((s = dnnl_primitive_attr_create(&attr)) != dnnl_success) return toplu__dnnl_error(ctx, s, "attributes");
  s = dnnl_primitive_attr_set_scratchpad_mode(attr, dnnl_scratchpad_mode_user);
  if (s == dnnl_success) s = dnnl_primitive_attr_set_output_scales(attr, per_channel ? m : 1, per_channel ? 1 << 1 : 0, cs->scales);
  const int32_t runtime_zp = DNNL_RUNTIME_S32_VAL;
  if (s == dnnl_success && cs->zp_src) s = dnnl_primitive_attr_set_zero_points(attr, DNNL_ARG_SRC, 1, 0, &runtime_zp);
  if (s == dnnl_success && cs->zp_dst) s = dnnl_primitive_attr_set_zero_points(attr, DNNL_ARG_DST, 1, 0, &runtime_zp);
  if (s == dnnl_success && n->n_post) {
    dnnl_post_ops_t po = NULL;
    s = dnnl_post_ops_create(&po);
    int di = 0; /* index in oneDNN's chain */
    float unit = s_mid; /* sa before a QSUM, y_scale after it */
    for (int i = 0; i < n->n_post && s == dnnl_success; i++, di++) {
      const toplu__post_op_t *q = &n->post[i];
      if (q->kind == TOPLU_POST_QSUM) {
        int32_t za = toplu__zero_point_at(&ctx->in[qk + 4], 0), zb = toplu__zero_point_at(&ctx->in[qk + 2], 0);
        float sb = ((const float *)ctx->in[qk + 1].data)[0];
        float lo = ydt == dnnl_s8 ? -128.f : 0.f, hi = ydt == dnnl_s8 ? 127.f : 255.f;
        s = dnnl_post_ops_append_eltwise(po, 1.f, dnnl_eltwise_round, 0.f, 0.f);
        if (s == dnnl_success) s = dnnl_post_ops_append_eltwise(po, 1.f, dnnl_eltwise_clip_v2, lo - (float)za, hi - (float)za);
        if (s == dnnl_success) s = dnnl_post_ops_append_eltwise(po, 1.f, dnnl_eltwise_linear, s_mid / sy, 0.f);
        if (s == dnnl_success) s = dnnl_post_ops_append_sum_v3(po, sb / sy, zb, ydt);
        di += 3;
        unit = sy;
        continue;
      }
      if (q->kind == TOPLU_POST_RELU) s = dnnl_post_ops_append_eltwise(po, 1.f, dnnl_eltwise_relu, 0.f, 0.f);
      else if (q->kind == TOPLU_POST_MIN_CHANNEL) {
        const toplu_tensor_t *bt = &ctx->in[q->input];
        if (bt->dtype != TOPLU_DTYPE_FLOAT || !bt->data || toplu_tensor_numel(bt) != m) {
          s = dnnl_invalid_arguments;
          break;
        }
        cs->min_bounds[i] = toplu__kernel_alloc(ctx, (size_t)m * sizeof(float));
        if (!cs->min_bounds[i]) {
          s = dnnl_out_of_memory;
          break;
        }
        info->state_bytes += (size_t)m * sizeof(float);
        for (int64_t c = 0; c < m; c++) cs->min_bounds[i][c] = ((const float *)bt->data)[c] / unit;
        cs->min_index[i] = di;
        dnnl_dims_t bd;
        for (int k = 0; k < ctx->out[0].ndim; k++) bd[k] = k == 1 ? m : 1;
        dnnl_memory_desc_t bmd;
        s = dnnl_memory_desc_init_by_tag(&bmd, ctx->out[0].ndim, bd, dnnl_f32,
                                         ctx->out[0].ndim == 3 ? dnnl_abc : ctx->out[0].ndim == 4 ? dnnl_abcd : dnnl_abcde);
        if (s == dnnl_success) s = dnnl_post_ops_append_binary(po, dnnl_binary_min, &bmd);
        cs->min_md[i] = bmd;
      } else
        s = dnnl_post_ops_append_eltwise(po, 1.f, dnnl_eltwise_clip_v2, isinf(q->alpha) ? -FLT_MAX : q->alpha / unit,
                                         isinf(q->beta) ? FLT_MAX : q->beta / unit);
    }
    if (s == dnnl_success) s = dnnl_primitive_attr_set_post_ops(attr, po);
    if (po) dnnl_post_ops_destroy(po);
  }
  dnnl_primitive_desc_t pd = NULL;
  if (s == dnnl_success) s = dnnl_primitive_desc_create(&pd, &desc, attr, toplu__dnnl_engine(ctx->backend), NULL);
  if (s == dnnl_success && src_in && toplu__dnnl_impl_is(pd, "ref")) {
    /* The layout the source arrives in has only oneDNN's reference integer kernel: a QuantizeLinear keeps the
     * layout of the float convolution before it (ops/onednn/blocked.c), and ResNeXt-50's grouped convolutions
     * write aBcd4b, where the 1x1 integer convolution after one ran ref_int8:any, 4.5 s a run (a fresh user's
     * finding, 2026-12-07).  oneDNN then picks the source layout too, and the source is reordered into it. */
    dnnl_memory_desc_t src_any;
    dnnl_convolution_desc_t d2;
    dnnl_primitive_desc_t pd2 = NULL;
    if (dnnl_memory_desc_init_by_tag(&src_any, ctx->in[0].ndim, sd, xdt, dnnl_format_tag_any) == dnnl_success &&
        dnnl_dilated_convolution_forward_desc_init(&d2, dnnl_forward_inference, dnnl_convolution_direct, &src_any,
                                                   &wany_md, has_bias ? &bias_md : NULL, &dst_md, strides, dil, pl,
                                                   pr) == dnnl_success &&
        dnnl_primitive_desc_create(&pd2, &d2, attr, toplu__dnnl_engine(ctx->backend), NULL) == dnnl_success) {
      if (!toplu__dnnl_impl_is(pd2, "ref")) {
        dnnl_primitive_desc_destroy(pd);
        pd = pd2;
        src_in = NULL; /* want_md below: the source reordered into pd2's layout */
      } else {
        dnnl_primitive_desc_destroy(pd2);
      }
    }
  }
  dnnl_primitive_attr_destroy(attr);
  if (s != dnnl_success) return toplu__dnnl_error(ctx, s, "primitive descriptor");
  dnnl_memory_desc_t wmd = *dnnl_primitive_desc_query_md(pd, dnnl_query_weights_md, 0);
  cs->src_md = *dnnl_primitive_desc_query_md(pd, dnnl_query_src_md, 0);
  cs->dst_md = *dnnl_primitive_desc_query_md(pd, dnnl_query_dst_md, 0);
  dnnl_memory_desc_t src_plain, dst_plain;
  toplu__dnnl_plain_md(&src_plain, &ctx->in[0]);
  toplu__dnnl_plain_md(&dst_plain, &ctx->out[0]);
  if (!src_in && !dnnl_memory_desc_equal(&cs->src_md, &src_plain)) info->want_md[0] = &cs->src_md;
  int dst_blocked = !dnnl_memory_desc_equal(&cs->dst_md, &dst_plain);
  if (dst_blocked) info->out_md[0] = &cs->dst_md;
  cs->dst_bytes = dnnl_memory_desc_get_size(&cs->dst_md);
  if (qk >= 0) { /* the residual in dst's layout, and dst may take over its buffer */
    if (qk >= TOPLU_KERNEL_MAX_LAYOUT) {
      dnnl_primitive_desc_destroy(pd);
      return toplu__kernel_error(ctx, TOPLU_ERR_INTERNAL, "residual input %d beyond the layout slots", qk);
    }
    if (dst_blocked) info->want_md[qk] = &cs->dst_md;
    else info->want_plain |= 1u << qk;
    info->inplace_input = qk;
  }
  toplu_status_t st;
  size_t wbytes;
  if ((st = toplu__dnnl_pack_const(ctx, info, &wuser_md, ctx->in[3].data, &wmd, &cs->packed_w, &wbytes))) {
    dnnl_primitive_desc_destroy(pd);
    return st;
  }
  info->consumed_consts |= 1u << 3;
  if ((st = toplu__dnnl_prim_create_later(ctx, &cs->prim, pd, 0, info))) return st;
  toplu__dnnl_prim_t *pr_ = &cs->prim;
  dnnl_memory_desc_t zp_md;
  dnnl_dims_t one = {1};
  dnnl_memory_desc_init_by_tag(&zp_md, 1, one, dnnl_s32, dnnl_a);
  toplu__dnnl_prim_arg(pr_, DNNL_ARG_SRC, TOPLU_DNNL_FROM_INPUT, 0, NULL, &cs->src_md);
  toplu__dnnl_prim_arg(pr_, DNNL_ARG_WEIGHTS, TOPLU_DNNL_FROM_STATE, 3, cs->packed_w, &wmd);
  if (has_bias) toplu__dnnl_prim_arg(pr_, DNNL_ARG_BIAS, TOPLU_DNNL_FROM_INPUT, 8, NULL, &bias_md);
  toplu__dnnl_prim_arg(pr_, DNNL_ARG_DST, TOPLU_DNNL_FROM_OUTPUT, 0, NULL, &cs->dst_md);
  if (cs->zp_src) toplu__dnnl_prim_arg(pr_, DNNL_ARG_ATTR_ZERO_POINTS | DNNL_ARG_SRC, TOPLU_DNNL_FROM_STATE, 0, &cs->zp_src, &zp_md);
  if (cs->zp_dst) toplu__dnnl_prim_arg(pr_, DNNL_ARG_ATTR_ZERO_POINTS | DNNL_ARG_DST, TOPLU_DNNL_FROM_STATE, 0, &cs->zp_dst, &zp_md);
  for (int i = 0; i < n->n_post; i++)
    if (cs->min_bounds[i])
      toplu__dnnl_prim_arg(pr_, DNNL_ARG_ATTR_MULTIPLE_POST_OP(cs->min_index[i]) | DNNL_ARG_SRC_1, TOPLU_DNNL_FROM_STATE, 0,
                          cs->min_bounds[i],
                          &cs->min_md[i]);
  return TOPLU_OK;
}

/* The state of a QLinearConv (x input 0, w input 3) or ConvInteger (w
 * input 1) node, with its geometry, in ctx->state. */
static toplu_status_t new_state(toplu__kernel_ctx_t *ctx, int wi, qconv_state_t **out) {
  toplu_tensor_t xw[2] = {ctx->in[0], ctx->in[wi]};
  toplu__infer_ctx_t ictx = {.graph = (toplu__graph_t *)ctx->graph, .node = ctx->node, .n_in = 2, .n_out = ctx->n_out,
                            .in = xw, .out = ctx->out, .concrete = 1, .err = ctx->err};
  toplu__conv_params_t p;
  toplu_status_t st = toplu__conv_params(&ictx, &p);
  if (st) return st;
  qconv_state_t *cs = toplu__kernel_alloc(ctx, sizeof *cs);
  if (!cs) return toplu__kernel_error(ctx, TOPLU_ERR_OUT_OF_MEMORY, "out of memory");
  memset(cs, 0, sizeof *cs);
  cs->p = p;
  cs->qsum = qsum_input(ctx->node);
  ctx->state = cs;
  *out = cs;
  return TOPLU_OK;
}

static toplu_status_t qconv_prepare(toplu__kernel_ctx_t *ctx, toplu__kernel_info_t *info) {
  qconv_state_t *cs;
  toplu_status_t st = new_state(ctx, 3, &cs);
  if (st) return st;
  cs->fast = fast_ok(ctx);
  if (cs->fast) return prepare_fast(ctx, info, cs);
  for (int i = 0; i < ctx->n_in && i < TOPLU_KERNEL_MAX_LAYOUT; i++) info->want_plain |= 1u << i;
  return TOPLU_OK;
}

/* One output element's int32 accumulator of a direct convolution:
 * sum over the window of (x - x_zp)(w - w_zp[oc]), padding contributing 0
 * (x equals x_zp there). */
typedef struct qacc {
  const toplu__conv_params_t *p;
  const toplu_tensor_t *x, *w, *xz, *wz; /* zero points may be absent (ndim < 0) */
  int64_t in_sz, out_sz, k_sz;
} qacc_t;

static void qacc_init(qacc_t *q, const toplu__conv_params_t *p, const toplu_tensor_t *x, const toplu_tensor_t *w,
                      const toplu_tensor_t *xz, const toplu_tensor_t *wz) {
  q->p = p;
  q->x = x;
  q->w = w;
  q->xz = xz;
  q->wz = wz;
  q->in_sz = q->out_sz = q->k_sz = 1;
  for (int i = 0; i < p->spatial; i++) {
    q->in_sz *= p->in[i];
    q->out_sz *= p->out[i];
    q->k_sz *= p->kernel[i];
  }
}

static int64_t conv_acc(const qacc_t *q, int64_t b, int64_t oc, int64_t o) {
  const toplu__conv_params_t *p = q->p;
  int sp = p->spatial;
  int64_t icg = p->c_in / p->group, ocg = p->c_out / p->group, grp = oc / ocg;
  int32_t zx = toplu__zero_point_at(q->xz, 0), zw = toplu__zero_point_at(q->wz, oc);
  int x_u8 = q->x->dtype == TOPLU_DTYPE_UINT8, w_u8 = q->w->dtype == TOPLU_DTYPE_UINT8;
  int64_t oi[TOPLU_CONV_MAX_SPATIAL], r = o;
  for (int i = sp - 1; i >= 0; i--) {
    oi[i] = r % p->out[i];
    r /= p->out[i];
  }
  int64_t acc = 0;
  for (int64_t ic = 0; ic < icg; ic++) {
    int64_t c = grp * icg + ic;
    for (int64_t k = 0; k < q->k_sz; k++) {
      int64_t ki[TOPLU_CONV_MAX_SPATIAL], rk = k, off = 0;
      for (int i = sp - 1; i >= 0; i--) {
        ki[i] = rk % p->kernel[i];
        rk /= p->kernel[i];
      }
      int inside = 1;
      for (int i = 0; i < sp && inside; i++) {
        int64_t pos = oi[i] * p->stride[i] - p->pad_begin[i] + ki[i] * p->dilation[i];
        if (pos < 0 || pos >= p->in[i]) inside = 0;
        off = off * p->in[i] + pos;
      }
      if (!inside) continue;
      int64_t xi = (b * p->c_in + c) * q->in_sz + off, wi = (oc * icg + ic) * q->k_sz + k;
      int32_t xv = x_u8 ? ((const uint8_t *)q->x->data)[xi] : ((const int8_t *)q->x->data)[xi];
      int32_t wv = w_u8 ? ((const uint8_t *)q->w->data)[wi] : ((const int8_t *)q->w->data)[wi];
      acc += (int64_t)(xv - zx) * (wv - zw);
    }
  }
  return acc;
}

/* The plain-C path of QLinearConv. */
static toplu_status_t run_ref(toplu__kernel_ctx_t *ctx, const qconv_state_t *cs) {
  const toplu__conv_params_t *p = &cs->p;
  const toplu_tensor_t *ws = &ctx->in[4];
  toplu_tensor_t *y = &ctx->out[0];
  int float_out = y->dtype == TOPLU_DTYPE_FLOAT; /* QLinearConvFloat */
  float sx = ((const float *)ctx->in[1].data)[0], sy = float_out ? 1.f : ((const float *)ctx->in[6].data)[0];
  int32_t zy = ctx->n_in > 7 && !float_out ? toplu__zero_point_at(&ctx->in[7], 0) : 0;
  int y_u8 = y->dtype == TOPLU_DTYPE_UINT8;
  const int32_t *bias = ctx->n_in > 8 && ctx->in[8].ndim >= 0 && !float_out ? ctx->in[8].data : NULL;
  const float *fbias = ctx->n_in > 8 && ctx->in[8].ndim >= 0 && float_out ? ctx->in[8].data : NULL; /* QLinearConvFloat */
  qacc_t q;
  qacc_init(&q, p, &ctx->in[0], &ctx->in[3], &ctx->in[2], &ctx->in[5]);
  const toplu__node_t *n = ctx->node;
  for (int64_t b = 0; b < p->n; b++)
    for (int64_t oc = 0; oc < p->c_out; oc++) {
      float real_scale = sx * scale_at(ws, oc);
      for (int64_t o = 0; o < q.out_sz; o++) {
        int64_t acc = conv_acc(&q, b, oc, o) + (bias ? bias[oc] : 0);
        float v;
        if (fbias) { /* float output: its bias unrounded */
          v = (float)(((double)acc + fbias[oc]) * real_scale);
          for (int i = 0; i < n->n_post; i++) {
            if (n->post[i].kind == TOPLU_POST_MIN_CHANNEL) {
              float bnd = ((const float *)ctx->in[n->post[i].input].data)[oc];
              v = v < bnd ? v : bnd;
            } else {
              toplu__post_apply(&n->post[i], &v, 1);
            }
          }
          ((float *)y->data)[(b * p->c_out + oc) * q.out_sz + o] = v;
          continue;
        }
        if (n->n_post) {
          float real = (float)acc * real_scale;
          for (int i = 0; i < n->n_post; i++) {
            if (n->post[i].kind == TOPLU_POST_QSUM) { /* the QDQ graph's Q -> DQ -> Add, in its float arithmetic */
              int k = n->post[i].input;
              float sa = ((const float *)ctx->in[k + 3].data)[0], sb = ((const float *)ctx->in[k + 1].data)[0];
              int32_t za = toplu__zero_point_at(&ctx->in[k + 4], 0), zb = toplu__zero_point_at(&ctx->in[k + 2], 0);
              float qa = rintf(real / sa) + (float)za, lo = y_u8 ? 0.f : -128.f, hi = y_u8 ? 255.f : 127.f;
              qa = qa < lo ? lo : qa > hi ? hi : qa;
              int64_t bi = (b * p->c_out + oc) * q.out_sz + o;
              int32_t bv = y_u8 ? ((const uint8_t *)ctx->in[k].data)[bi] : ((const int8_t *)ctx->in[k].data)[bi];
              real = sa * (qa - (float)za) + sb * (float)(bv - zb);
            } else if (n->post[i].kind == TOPLU_POST_MIN_CHANNEL) {
              float bnd = ((const float *)ctx->in[n->post[i].input].data)[oc];
              real = real < bnd ? real : bnd;
            } else {
              toplu__post_apply(&n->post[i], &real, 1);
            }
          }
          v = real / sy;
        } else {
          v = (float)acc * (real_scale / sy);
        }
        if (float_out) {
          ((float *)y->data)[(b * p->c_out + oc) * q.out_sz + o] = v;
          continue;
        }
        v = rintf(v) + (float)zy;
        float lo = y_u8 ? 0.f : -128.f, hi = y_u8 ? 255.f : 127.f;
        v = v < lo ? lo : v > hi ? hi : v;
        int64_t yi = (b * p->c_out + oc) * q.out_sz + o;
        if (y_u8) ((uint8_t *)y->data)[yi] = (uint8_t)v;
        else ((int8_t *)y->data)[yi] = (int8_t)v;
      }
    }
  return TOPLU_OK;
}

/* ConvInteger-10: the accumulators themselves, int32 (plain C). */
static toplu_status_t cint_prepare(toplu__kernel_ctx_t *ctx, toplu__kernel_info_t *info) {
  (void)info;
  qconv_state_t *cs;
  return new_state(ctx, 1, &cs);
}

static toplu_status_t cint_run(toplu__kernel_ctx_t *ctx) {
  const qconv_state_t *cs = ctx->state;
  static const toplu_tensor_t absent = {.ndim = -1};
  qacc_t q;
  qacc_init(&q, &cs->p, &ctx->in[0], &ctx->in[1], ctx->n_in > 2 ? &ctx->in[2] : &absent, ctx->n_in > 3 ? &ctx->in[3] : &absent);
  int32_t *y = ctx->out[0].data;
  for (int64_t b = 0; b < cs->p.n; b++)
    for (int64_t oc = 0; oc < cs->p.c_out; oc++)
      for (int64_t o = 0; o < q.out_sz; o++) {
        int64_t acc = conv_acc(&q, b, oc, o);
        y[(b * cs->p.c_out + oc) * q.out_sz + o] = acc > INT32_MAX ? INT32_MAX : acc < INT32_MIN ? INT32_MIN : (int32_t)acc;
      }
  return TOPLU_OK;
}

static toplu_status_t qconv_bind(toplu__kernel_ctx_t *ctx) {
  const qconv_state_t *cs = ctx->state;
  if (!cs->fast) return TOPLU_OK;
  return toplu__dnnl_prim_bind(ctx, &cs->prim, &ctx->exec_state);
}

static void qconv_unbind(toplu__kernel_ctx_t *ctx) {
  if (ctx->exec_state) toplu__dnnl_prim_unbind(ctx->exec_state);
  ctx->exec_state = NULL;
}

static toplu_status_t qconv_run(toplu__kernel_ctx_t *ctx) {
  const qconv_state_t *cs = ctx->state;
  if (!cs->fast) return run_ref(ctx, cs);
  if (cs->qsum >= 0 && ctx->out[0].data != ctx->in[cs->qsum].data) /* the residual, where the sum post-op reads it */
    memcpy(ctx->out[0].data, ctx->in[cs->qsum].data, cs->dst_bytes);
  return toplu__dnnl_prim_execute(ctx, &cs->prim, ctx->exec_state);
}

static void qconv_release(toplu__kernel_ctx_t *ctx) {
  qconv_state_t *cs = ctx->state;
  if (!cs) return;
  if (cs->fast) {
    toplu__dnnl_prim_destroy(&cs->prim);
    toplu__dnnl_pack_release(ctx, cs->packed_w);
  }
  toplu__kernel_free(ctx, cs->scales);
  for (int i = 0; i < TOPLU_MAX_POST; i++) toplu__kernel_free(ctx, cs->min_bounds[i]);
  toplu__kernel_free(ctx, cs);
  ctx->state = NULL;
}

const toplu__kernel_t toplu__kernels_qconv[] = {
    {.op_type = "QLinearConv", .domain = "", .prepare = qconv_prepare, .run = qconv_run, .release = qconv_release,
     .flags = TOPLU_KERNEL_LAYOUT, .bind = qconv_bind, .unbind = qconv_unbind},
    {.op_type = "QLinearConvFloat", .domain = "toplu", .prepare = qconv_prepare, .run = qconv_run, .release = qconv_release,
     .flags = TOPLU_KERNEL_LAYOUT, .bind = qconv_bind, .unbind = qconv_unbind},
    {.op_type = "ConvInteger", .domain = "", .prepare = cint_prepare, .run = cint_run, .release = qconv_release},
    {.op_type = NULL},
};
