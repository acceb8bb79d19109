/*
 * ops/conv.c - Conv-1/11 and ConvTranspose-1/11 on oneDNN.
 *
 * One oneDNN (de)convolution primitive per node and plan covers the whole
 * batch.  Weights are reordered once, at plan time, into the layout the
 * primitive prefers (dnnl_format_tag_any) and then read from the kernel's
 * state, so the model's plain copy is not touched at run time.  Bias and the
 * node's fused post-ops (activations, the residual `sum`) go into the same
 * primitive.  The kernel is layout-aware (TOPLU_KERNEL_LAYOUT): it takes its
 * source in whatever blocked layout the previous conv wrote, asks the
 * planner to reorder a plain source into the layout oneDNN prefers, and
 * writes its destination in the layout oneDNN picks (nChw8c and the like),
 * so activations stay blocked from one conv to the next.  Two exceptions,
 * both measured on oneDNN 2.6.3 with AVX-512 (docs/performance.md): a
 * source whose arriving layout gets only oneDNN's reference kernel
 * (ref:any) is reordered into one oneDNN picks, and one output channel is
 * written plain rather than padded to a 16-channel block.
 * Geometry: graph/schema_conv.h.
 */
#include <stdlib.h>
#include <string.h>

#include "graph/schema_conv.h"
#include "ops/onednn/onednn.h"

typedef struct conv_state {
  toplu__dnnl_prim_t prim;
  void *packed_w;   /* weights in the primitive's layout (constant W), from toplu__kernel_alloc */
  int sum_input;    /* input holding the residual addend, or -1 */
  dnnl_memory_desc_t src_md, dst_md; /* the layouts chosen (info->want_md / out_md point here) */
  size_t dst_bytes;                  /* bytes of dst in its layout (padded when blocked) */
} conv_state_t;

/* Plain descriptor with explicit strides (for ONNX weight layouts). */
static dnnl_status_t md_strided(dnnl_memory_desc_t *md, int nd, const int64_t *dims, const int64_t *strides,
                                dnnl_data_type_t dt) {
  dnnl_dims_t d, s;
  for (int i = 0; i < nd; i++) {
    d[i] = dims[i];
    s[i] = strides[i];
  }
  return dnnl_memory_desc_init_by_strides(md, nd, d, dt, s);
}

dnnl_status_t toplu__dnnl_conv_weights_md(dnnl_memory_desc_t *md, const toplu__conv_params_t *p, dnnl_data_type_t dt) {
  int64_t ksz = 1;
  for (int i = 0; i < p->spatial; i++) ksz *= p->kernel[i];
  int64_t g = p->group, oc = p->c_out / g, ic = p->c_in / g;
  int64_t dims[8], strides[8];
  int nd = 0;
  if (g > 1) {
    dims[nd] = g;
    strides[nd++] = oc * ic * ksz;
  }
  dims[nd] = oc;
  strides[nd++] = p->transpose ? ksz : ic * ksz;
  dims[nd] = ic;
  strides[nd++] = p->transpose ? oc * ksz : ksz;
  int64_t st = ksz;
  for (int i = 0; i < p->spatial; i++) {
    st /= p->kernel[i];
    dims[nd] = p->kernel[i];
    strides[nd++] = st;
  }
  return md_strided(md, nd, dims, strides, dt);
}

typedef union {
  dnnl_convolution_desc_t conv;
  dnnl_deconvolution_desc_t deconv;
} conv_desc_t;

static dnnl_status_t init_desc(conv_desc_t *desc, const toplu__conv_params_t *p, const dnnl_memory_desc_t *src,
                               const dnnl_memory_desc_t *w, const dnnl_memory_desc_t *bias, const dnnl_memory_desc_t *dst,
                               const dnnl_dim_t *strides, const dnnl_dim_t *dil, const dnnl_dim_t *pl,
                               const dnnl_dim_t *pr) {
  if (p->transpose)
    return dnnl_dilated_deconvolution_forward_desc_init(&desc->deconv, dnnl_forward_inference, dnnl_deconvolution_direct,
                                                        src, w, bias, dst, strides, dil, pl, pr);
  return dnnl_dilated_convolution_forward_desc_init(&desc->conv, dnnl_forward_inference, dnnl_convolution_direct, src, w,
                                                    bias, dst, strides, dil, pl, pr);
}

/* 1 when oneDNN gave its reference implementation ("ref:any"): plain C loops, 10-100x slower than its jit kernels. */
static int is_ref_impl(const_dnnl_primitive_desc_t pd) {
  const char *impl = NULL;
  return dnnl_primitive_desc_query(pd, dnnl_query_impl_info_str, 0, &impl) == dnnl_success && impl &&
         !strncmp(impl, "ref", 3);
}

static toplu_status_t conv_prepare(toplu__kernel_ctx_t *ctx, toplu__kernel_info_t *info) {
  const toplu__node_t *n = ctx->node;
  for (int i = 0; i < 3 && i < ctx->n_in; i++)
    if (ctx->in[i].ndim >= 0 && ctx->in[i].dtype != TOPLU_DTYPE_FLOAT)
      return toplu__kernel_error(ctx, TOPLU_ERR_UNSUPPORTED, "toplu runs %s on float32 only (input %d is %s)", n->op_type,
                                i, toplu_dtype_name(ctx->in[i].dtype));
  toplu__infer_ctx_t ictx = {.graph = (toplu__graph_t *)ctx->graph, .node = n, .n_in = ctx->n_in, .n_out = ctx->n_out,
                            .in = ctx->in, .out = ctx->out, .concrete = 1, .err = ctx->err};
  toplu__conv_params_t p;
  toplu_status_t st = toplu__conv_params(&ictx, &p);
  if (st) return st;
  conv_state_t *cs = toplu__kernel_alloc(ctx, sizeof *cs);
  if (!cs) return toplu__kernel_error(ctx, TOPLU_ERR_OUT_OF_MEMORY, "out of memory");
  memset(cs, 0, sizeof *cs);
  cs->sum_input = -1;
  for (int i = 0; i < n->n_post; i++)
    if (n->post[i].kind == TOPLU_POST_SUM) cs->sum_input = n->post[i].input;
  ctx->state = cs;

  dnnl_memory_desc_t src_md, dst_md, bias_md, wuser_md, wany_md, src_plain, dst_plain;
  const dnnl_memory_desc_t *src_in = ctx->in_md ? ctx->in_md[0] : NULL; /* blocked source, if so */
  dnnl_status_t s = toplu__dnnl_plain_md(&src_plain, &ctx->in[0]);
  if (s == dnnl_success) s = toplu__dnnl_plain_md(&dst_plain, &ctx->out[0]);
  if (s == dnnl_success) {
    if (src_in) src_md = *src_in;
    else s = dnnl_memory_desc_init_by_tag(&src_md, src_plain.ndims, src_plain.dims, dnnl_f32, dnnl_format_tag_any);
  }
  if (s == dnnl_success)
    s = dnnl_memory_desc_init_by_tag(&dst_md, dst_plain.ndims, dst_plain.dims, dnnl_f32, dnnl_format_tag_any);
  /* A single output channel stays plain: a 16-channel blocked layout would pad it to 16, and the steps after
   * (PaddleOCR det's Sigmoid and Add on its 640x640 map) would read and write 16x the data. */
  if (s == dnnl_success && dst_plain.ndims >= 3 && dst_plain.dims[1] == 1) dst_md = dst_plain;
  if (s == dnnl_success) s = toplu__dnnl_conv_weights_md(&wuser_md, &p, dnnl_f32);
  int has_bias = ctx->n_in > 2 && ctx->in[2].ndim >= 0;
  if (s == dnnl_success && has_bias) s = toplu__dnnl_plain_md(&bias_md, &ctx->in[2]);
  int w_const = ctx->in[1].data != NULL;
  if (s == dnnl_success) {
    wany_md = wuser_md;
    if (w_const)
      s = dnnl_memory_desc_init_by_tag(&wany_md, wuser_md.ndims, wuser_md.dims, dnnl_f32, dnnl_format_tag_any);
  }
  if (s != dnnl_success) return toplu__dnnl_error(ctx, s, "memory descriptor");
  dnnl_dims_t strides, dil, pl, pr;
  for (int i = 0; i < p.spatial; i++) {
    strides[i] = p.stride[i];
    dil[i] = p.dilation[i] - 1;
    pl[i] = p.pad_begin[i];
    pr[i] = p.pad_end[i] - (p.transpose ? p.output_padding[i] : 0);
  }
  conv_desc_t desc;
  s = init_desc(&desc, &p, &src_md, &wany_md, has_bias ? &bias_md : NULL, &dst_md, strides, dil, pl, pr);
  if (s != dnnl_success) return toplu__dnnl_error(ctx, s, "descriptor");
  dnnl_primitive_attr_t attr;
  if ((s = dnnl_primitive_attr_create(&attr)) != dnnl_success) return toplu__dnnl_error(ctx, s, "attributes");
  s = dnnl_primitive_attr_set_scratchpad_mode(attr, dnnl_scratchpad_mode_user);
  if (s == dnnl_success) s = toplu__dnnl_append_post_ops(n, attr);
  dnnl_primitive_desc_t pd = NULL;
  if (s == dnnl_success) s = dnnl_primitive_desc_create(&pd, &desc, attr, toplu__dnnl_engine(ctx->backend), NULL);
  if (s == dnnl_success && src_in && is_ref_impl(pd)) {
    /* The layout the source arrives in has only oneDNN's reference kernel (on AVX-512, channels-last
     * input to a ConvTranspose or a grouped convolution of PaddleOCR det: ref:any, 170 ms where the
     * jit kernel takes 2 ms): let oneDNN pick the source layout too, and reorder into it first. */
    dnnl_memory_desc_t src_any;
    dnnl_primitive_desc_t pd2 = NULL;
    if (dnnl_memory_desc_init_by_tag(&src_any, src_plain.ndims, src_plain.dims, dnnl_f32, dnnl_format_tag_any) ==
            dnnl_success &&
        init_desc(&desc, &p, &src_any, &wany_md, has_bias ? &bias_md : NULL, &dst_md, strides, dil, pl, pr) ==
            dnnl_success &&
        dnnl_primitive_desc_create(&pd2, &desc, attr, toplu__dnnl_engine(ctx->backend), NULL) == dnnl_success) {
      if (!is_ref_impl(pd2)) {
        dnnl_primitive_desc_destroy(pd);
        pd = pd2;
        src_in = NULL; /* the source is reordered into the layout pd2 chose (want_md below) */
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
  src_md = cs->src_md;
  dst_md = cs->dst_md;
  int dst_blocked = !dnnl_memory_desc_equal(&dst_md, &dst_plain);
  cs->dst_bytes = dnnl_memory_desc_get_size(&dst_md);
  if (!src_in && !dnnl_memory_desc_equal(&src_md, &src_plain)) info->want_md[0] = &cs->src_md;
  else if (!src_in && ctx->in_md && ctx->in_md[0]) info->want_plain |= 1u; /* arrives blocked, read plain */
  if (dst_blocked) info->out_md[0] = &cs->dst_md;
  if (cs->sum_input >= 0 && cs->sum_input < TOPLU_KERNEL_MAX_LAYOUT) {
    if (dst_blocked) info->want_md[cs->sum_input] = &cs->dst_md;
    else info->want_plain |= 1u << cs->sum_input;
  }
  if (w_const) {
    size_t wbytes;
    if ((st = toplu__dnnl_pack_const(ctx, info, &wuser_md, ctx->in[1].data, &wmd, &cs->packed_w, &wbytes))) {
      dnnl_primitive_desc_destroy(pd);
      return st;
    }
    info->consumed_consts |= 1u << 1;
  }
  if ((st = toplu__dnnl_prim_create(ctx, &cs->prim, pd, 0, info))) return st;
  toplu__dnnl_prim_t *pr_ = &cs->prim;
  toplu__dnnl_prim_arg(pr_, DNNL_ARG_SRC, TOPLU_DNNL_FROM_INPUT, 0, NULL, &src_md);
  if (w_const) toplu__dnnl_prim_arg(pr_, DNNL_ARG_WEIGHTS, TOPLU_DNNL_FROM_STATE, 1, cs->packed_w, &wmd);
  else toplu__dnnl_prim_arg(pr_, DNNL_ARG_WEIGHTS, TOPLU_DNNL_FROM_INPUT, 1, NULL, &wuser_md);
  if (has_bias) toplu__dnnl_prim_arg(pr_, DNNL_ARG_BIAS, TOPLU_DNNL_FROM_INPUT, 2, NULL, &bias_md);
  toplu__dnnl_prim_arg(pr_, DNNL_ARG_DST, TOPLU_DNNL_FROM_OUTPUT, 0, NULL, &dst_md);
  info->inplace_input = cs->sum_input; /* dst may take over the residual's buffer */
  return TOPLU_OK;
}

static toplu_status_t conv_bind(toplu__kernel_ctx_t *ctx) {
  const conv_state_t *cs = ctx->state;
  return toplu__dnnl_prim_bind(ctx, &cs->prim, &ctx->exec_state);
}

static void conv_unbind(toplu__kernel_ctx_t *ctx) {
  toplu__dnnl_prim_unbind(ctx->exec_state);
  ctx->exec_state = NULL;
}

static toplu_status_t conv_run(toplu__kernel_ctx_t *ctx) {
  const conv_state_t *cs = ctx->state;
  if (cs->sum_input >= 0 && ctx->out[0].data != ctx->in[cs->sum_input].data)
    memcpy(ctx->out[0].data, ctx->in[cs->sum_input].data, cs->dst_bytes);
  return toplu__dnnl_prim_execute(ctx, &cs->prim, ctx->exec_state);
}

static void conv_release(toplu__kernel_ctx_t *ctx) {
  conv_state_t *cs = ctx->state;
  if (!cs) return;
  toplu__dnnl_prim_destroy(&cs->prim);
  toplu__dnnl_pack_release(ctx, cs->packed_w);
  toplu__kernel_free(ctx, cs);
  ctx->state = NULL;
}

const toplu__kernel_t toplu__kernels_conv[] = {
    {.op_type = "Conv", .domain = "", .prepare = conv_prepare, .run = conv_run, .release = conv_release,
     .flags = TOPLU_KERNEL_LAYOUT, .bind = conv_bind, .unbind = conv_unbind},
    {.op_type = "ConvTranspose", .domain = "", .prepare = conv_prepare, .run = conv_run, .release = conv_release,
     .flags = TOPLU_KERNEL_LAYOUT, .bind = conv_bind, .unbind = conv_unbind},
    {.op_type = NULL},
};
