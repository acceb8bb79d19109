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
 * written plain rather than padded to a 16-channel block.  A third, also
 * AVX-512 only: where a blocked source gets oneDNN's direct `jit:` kernel
 * (ResNet's stride-2 3x3 convolutions and its 3x3 layers on 7x7 maps, whose
 * sources come blocked from Winograd or jit_1x1) and oneDNN has its BRGEMM
 * convolution for channels last, the step reorders the source to channels
 * last, runs brgconv there and reorders the result back into the blocked
 * layout the direct kernel would have written, all inside its workspace,
 * so the layouts around it do not change (a fused residual addend is
 * reordered into brgconv's destination first, ResNet-18's 7x7 blocks).
 * brgconv takes 0.1-0.2 ms less a layer at batch 1 than the direct kernel;
 * the reorders of these layers' small maps cost far less
 * (docs/performance.md, "Channels-last detour").  TOPLU_CONV_NHWC=0 turns
 * it off.
 * Geometry: graph/schema_conv.h.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "graph/schema_conv.h"
#include "ops/fastmath.h"
#include "ops/onednn/onednn.h"

typedef struct conv_state {
  toplu__dnnl_prim_t prim;
  void *packed_w;   /* weights in the primitive's layout (constant W), from toplu__kernel_alloc */
  int sum_input;    /* input holding the residual addend, or -1 */
  dnnl_memory_desc_t src_md, dst_md; /* the layouts chosen (info->want_md / out_md point here) */
  size_t dst_bytes;                  /* bytes of dst in its layout (padded when blocked) */
  int detour;                        /* channels-last detour: reorder in, brgconv, reorder out */
  toplu__dnnl_prim_t to_nhwc, from_nhwc;
  toplu__dnnl_prim_t sum_to_nhwc;    /* detour with the residual sum: the addend reordered into brgconv's dst */
  char impl[96];
} conv_state_t;

typedef struct conv_exec {
  void *prim, *to_nhwc, *from_nhwc, *sum_to_nhwc;
} conv_exec_t;

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

/* 1 when pd's implementation name starts with prefix ("ref": oneDNN's reference kernel, plain C loops 10-100x
 * slower than its jit kernels; "jit:": its direct convolution; "brgconv": its BRGEMM one). */
static int impl_is(const_dnnl_primitive_desc_t pd, const char *prefix) { return toplu__dnnl_impl_is(pd, prefix); }

/* 1 when pd's implementation names an AVX-512 ISA ("brgconv_1x1:avx512_core", "jit:avx512_core"). */
static int impl_avx512(const_dnnl_primitive_desc_t pd) {
  const char *impl = NULL;
  return dnnl_primitive_desc_query(pd, dnnl_query_impl_info_str, 0, &impl) == dnnl_success && impl &&
         strstr(impl, "avx512") != NULL;
}

/* ResNet-50, Zen 5, 2 threads (docs/performance.md, "Channels-last detour"): layer2.0's stride-2 3x3 (231 FLOPs a
 * float moved) ran 1.12x faster with the detour at batch 1 and 0.90x at batch 8; layer3.0's (462) 1.16x and 1.13x;
 * the 512-channel layers (925-4600) 1.03-1.38x. */
#define DETOUR_MIN_FLOPS_PER_FLOAT 384

/* The channels-last twin of a direct convolution (see the head of this file):
 * a primitive descriptor on nhwc source and destination when oneDNN gives it
 * brgconv there, else NULL.  Only for 2-D forward convolutions; with the
 * residual sum (sum != 0) the addend is reordered too, a third reorder the
 * FLOPs-per-float rule counts.  TOPLU_CONV_NHWC=0 turns it off. */
static dnnl_primitive_desc_t nhwc_twin(toplu__kernel_ctx_t *ctx, const toplu__conv_params_t *p, const_dnnl_primitive_desc_t pd,
                                       const dnnl_memory_desc_t *src_plain, const dnnl_memory_desc_t *dst_plain,
                                       const dnnl_memory_desc_t *w, const dnnl_memory_desc_t *bias, int sum,
                                       dnnl_primitive_attr_t attr, const dnnl_dim_t *strides, const dnnl_dim_t *dil,
                                       const dnnl_dim_t *pl, const dnnl_dim_t *pr) {
  const char *off = getenv("TOPLU_CONV_NHWC");
  if ((off && !strcmp(off, "0")) || p->transpose || p->spatial != 2 || !impl_is(pd, "jit:")) return NULL;
  /* the reorders must be small against the convolution: at least DETOUR_MIN_FLOPS_PER_FLOAT multiply-adds x 2 per
   * float of source, destination (and addend) they move (per image, so the choice holds at every batch size) */
  int64_t moved = src_plain->dims[1] * src_plain->dims[2] * src_plain->dims[3] +
                  (sum ? 2 : 1) * dst_plain->dims[1] * dst_plain->dims[2] * dst_plain->dims[3];
  int64_t flops = 2 * dst_plain->dims[1] * dst_plain->dims[2] * dst_plain->dims[3] * (p->c_in / p->group) *
                  p->kernel[0] * p->kernel[1];
  if (flops < DETOUR_MIN_FLOPS_PER_FLOAT * moved) return NULL;
  dnnl_memory_desc_t s_md, d_md;
  conv_desc_t desc;
  dnnl_primitive_desc_t twin = NULL;
  if (dnnl_memory_desc_init_by_tag(&s_md, 4, src_plain->dims, dnnl_f32, dnnl_nhwc) != dnnl_success ||
      dnnl_memory_desc_init_by_tag(&d_md, 4, dst_plain->dims, dnnl_f32, dnnl_nhwc) != dnnl_success ||
      init_desc(&desc, p, &s_md, w, bias, &d_md, strides, dil, pl, pr) != dnnl_success ||
      dnnl_primitive_desc_create(&twin, &desc, attr, toplu__dnnl_engine(ctx->backend), NULL) != dnnl_success)
    return NULL;
  if (!impl_is(twin, "brgconv")) {
    dnnl_primitive_desc_destroy(twin);
    return NULL;
  }
  return twin;
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
  /* On an AVX-512 CPU a source in an 8-channel block (from a grouped convolution that only oneDNN's AVX2 kernel
   * runs, ResNeXt's 32 groups of 4 channels) gets an AVX2 kernel for the 1x1 convolution after it too: jit_1x1:avx2
   * at 155-161 GFLOP/s on this Xeon where brgconv_1x1:avx512_core reaches 325-333 (a fresh user's ResNeXt-50
   * ran 0.74x ONNX Runtime).  The layout oneDNN picks for itself is then taken, the source reordered into it. */
  /* (Not for jit_1x1:avx512_core on a 16-channel block, 153 GFLOP/s at batch 1 against brgconv_1x1's 255-333: on
   * ResNet-50 channels last made its bottlenecks' 1x1 steps 16.6 ms from 21.7 at batch 1 but 110 from 98.5 at
   * batch 8, tried and not kept.)  TOPLU_CONV_RELAYOUT=0 turns it off. */
  const char *relayout = getenv("TOPLU_CONV_RELAYOUT");
  int weak_isa = s == dnnl_success && src_in && toplu__cpu_avx512_ok() && !(relayout && !strcmp(relayout, "0")) &&
                 !impl_avx512(pd);
  if (s == dnnl_success && src_in && (impl_is(pd, "ref") || weak_isa)) {
    /* The layout the source arrives in has only oneDNN's reference kernel (on AVX-512, channels-last
     * input to a ConvTranspose or a grouped convolution of PaddleOCR det: ref:any, 170 ms where the
     * jit kernel takes 2 ms), or only a kernel of a smaller ISA: let oneDNN pick the source layout too, and
     * reorder into it first. */
    dnnl_memory_desc_t src_any;
    dnnl_primitive_desc_t pd2 = NULL;
    if (dnnl_memory_desc_init_by_tag(&src_any, src_plain.ndims, src_plain.dims, dnnl_f32, dnnl_format_tag_any) ==
            dnnl_success &&
        init_desc(&desc, &p, &src_any, &wany_md, has_bias ? &bias_md : NULL, &dst_md, strides, dil, pl, pr) ==
            dnnl_success &&
        dnnl_primitive_desc_create(&pd2, &desc, attr, toplu__dnnl_engine(ctx->backend), NULL) == dnnl_success) {
      if (!impl_is(pd2, "ref") && (impl_is(pd, "ref") || impl_avx512(pd2))) {
        dnnl_primitive_desc_destroy(pd);
        pd = pd2;
        src_in = NULL; /* the source is reordered into the layout pd2 chose (want_md below) */
      } else {
        dnnl_primitive_desc_destroy(pd2);
      }
    }
  }
  dnnl_primitive_desc_t twin = NULL;
  if (s == dnnl_success && src_in)
    twin = nhwc_twin(ctx, &p, pd, &src_plain, &dst_plain, &wany_md, has_bias ? &bias_md : NULL, cs->sum_input >= 0, attr,
                     strides, dil, pl, pr);
  dnnl_primitive_attr_destroy(attr);
  if (s != dnnl_success) return toplu__dnnl_error(ctx, s, "primitive descriptor");
  cs->src_md = *dnnl_primitive_desc_query_md(pd, dnnl_query_src_md, 0);
  cs->dst_md = *dnnl_primitive_desc_query_md(pd, dnnl_query_dst_md, 0);
  if (twin) { /* the step keeps the direct kernel's layouts (cs->src_md, cs->dst_md) and runs the twin inside */
    dnnl_primitive_desc_destroy(pd);
    pd = twin;
    cs->detour = 1;
  }
  dnnl_memory_desc_t wmd = *dnnl_primitive_desc_query_md(pd, dnnl_query_weights_md, 0);
  src_md = *dnnl_primitive_desc_query_md(pd, dnnl_query_src_md, 0);
  dst_md = *dnnl_primitive_desc_query_md(pd, dnnl_query_dst_md, 0);
  int dst_blocked = !dnnl_memory_desc_equal(&cs->dst_md, &dst_plain);
  cs->dst_bytes = dnnl_memory_desc_get_size(&cs->dst_md);
  if (!src_in && !dnnl_memory_desc_equal(&cs->src_md, &src_plain)) info->want_md[0] = &cs->src_md;
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
  if ((st = toplu__dnnl_prim_create_later(ctx, &cs->prim, pd, 0, info))) return st;
  toplu__dnnl_prim_t *pr_ = &cs->prim;
  /* detour: workspace = [the largest scratchpad of the three primitives, run one after the other]
   * [source, nhwc][destination, nhwc] */
  size_t src_off = 0, dst_off = 0;
  if (cs->detour) {
    snprintf(cs->impl, sizeof cs->impl, "%s (nhwc detour)", info->impl ? info->impl : "brgconv");
    info->impl = cs->impl;
    if ((st = toplu__dnnl_reorder_prim(ctx, &cs->to_nhwc, &cs->src_md, &src_md, NULL)) ||
        (st = toplu__dnnl_reorder_prim(ctx, &cs->from_nhwc, &dst_md, &cs->dst_md, NULL)) ||
        (cs->sum_input >= 0 && (st = toplu__dnnl_reorder_prim(ctx, &cs->sum_to_nhwc, &cs->dst_md, &dst_md, NULL))))
      return st;
    size_t scratch = cs->prim.scratchpad_bytes;
    if (cs->to_nhwc.scratchpad_bytes > scratch) scratch = cs->to_nhwc.scratchpad_bytes;
    if (cs->from_nhwc.scratchpad_bytes > scratch) scratch = cs->from_nhwc.scratchpad_bytes;
    if (cs->sum_to_nhwc.scratchpad_bytes > scratch) scratch = cs->sum_to_nhwc.scratchpad_bytes;
    src_off = toplu__align64(scratch);
    dst_off = src_off + toplu__align64(dnnl_memory_desc_get_size(&src_md));
    size_t need = dst_off + dnnl_memory_desc_get_size(&dst_md);
    if (need > info->workspace_bytes) info->workspace_bytes = need;
    toplu__dnnl_prim_arg(&cs->to_nhwc, DNNL_ARG_FROM, TOPLU_DNNL_FROM_INPUT, 0, NULL, &cs->src_md);
    toplu__dnnl_prim_arg_ws(&cs->to_nhwc, DNNL_ARG_TO, src_off, &src_md);
    toplu__dnnl_prim_arg_ws(&cs->from_nhwc, DNNL_ARG_FROM, dst_off, &dst_md);
    toplu__dnnl_prim_arg(&cs->from_nhwc, DNNL_ARG_TO, TOPLU_DNNL_FROM_OUTPUT, 0, NULL, &cs->dst_md);
    if (cs->sum_input >= 0) { /* the addend, in the layout the direct kernel's sum reads (want_md above) */
      toplu__dnnl_prim_arg(&cs->sum_to_nhwc, DNNL_ARG_FROM, TOPLU_DNNL_FROM_INPUT, cs->sum_input, NULL, &cs->dst_md);
      toplu__dnnl_prim_arg_ws(&cs->sum_to_nhwc, DNNL_ARG_TO, dst_off, &dst_md);
    }
  }
  if (cs->detour) toplu__dnnl_prim_arg_ws(pr_, DNNL_ARG_SRC, src_off, &src_md);
  else toplu__dnnl_prim_arg(pr_, DNNL_ARG_SRC, TOPLU_DNNL_FROM_INPUT, 0, NULL, &src_md);
  if (w_const) toplu__dnnl_prim_arg(pr_, DNNL_ARG_WEIGHTS, TOPLU_DNNL_FROM_STATE, 1, cs->packed_w, &wmd);
  else toplu__dnnl_prim_arg(pr_, DNNL_ARG_WEIGHTS, TOPLU_DNNL_FROM_INPUT, 1, NULL, &wuser_md);
  if (has_bias) toplu__dnnl_prim_arg(pr_, DNNL_ARG_BIAS, TOPLU_DNNL_FROM_INPUT, 2, NULL, &bias_md);
  if (cs->detour) toplu__dnnl_prim_arg_ws(pr_, DNNL_ARG_DST, dst_off, &dst_md);
  else toplu__dnnl_prim_arg(pr_, DNNL_ARG_DST, TOPLU_DNNL_FROM_OUTPUT, 0, NULL, &dst_md);
  info->inplace_input = cs->sum_input; /* dst may take over the residual's buffer */
  return TOPLU_OK;
}

static void conv_unbind(toplu__kernel_ctx_t *ctx) {
  conv_exec_t *e = ctx->exec_state;
  if (e) {
    toplu__dnnl_prim_unbind(e->prim);
    toplu__dnnl_prim_unbind(e->to_nhwc);
    toplu__dnnl_prim_unbind(e->from_nhwc);
    toplu__dnnl_prim_unbind(e->sum_to_nhwc);
    free(e);
  }
  ctx->exec_state = NULL;
}

static toplu_status_t conv_bind(toplu__kernel_ctx_t *ctx) {
  const conv_state_t *cs = ctx->state;
  conv_exec_t *e = calloc(1, sizeof *e);
  if (!e) return toplu__kernel_error(ctx, TOPLU_ERR_OUT_OF_MEMORY, "out of memory");
  ctx->exec_state = e;
  toplu_status_t st = toplu__dnnl_prim_bind(ctx, &cs->prim, &e->prim);
  if (!st && cs->detour) st = toplu__dnnl_prim_bind(ctx, &cs->to_nhwc, &e->to_nhwc);
  if (!st && cs->detour) st = toplu__dnnl_prim_bind(ctx, &cs->from_nhwc, &e->from_nhwc);
  if (!st && cs->detour && cs->sum_input >= 0) st = toplu__dnnl_prim_bind(ctx, &cs->sum_to_nhwc, &e->sum_to_nhwc);
  if (st) conv_unbind(ctx);
  return st;
}

static toplu_status_t conv_run(toplu__kernel_ctx_t *ctx) {
  const conv_state_t *cs = ctx->state;
  const conv_exec_t *e = ctx->exec_state;
  if (!cs->detour) {
    if (cs->sum_input >= 0 && ctx->out[0].data != ctx->in[cs->sum_input].data)
      memcpy(ctx->out[0].data, ctx->in[cs->sum_input].data, cs->dst_bytes);
    return toplu__dnnl_prim_execute(ctx, &cs->prim, e->prim);
  }
  /* detour: the addend goes straight into brgconv's channels-last destination (no copy into out first) */
  toplu_status_t st = toplu__dnnl_prim_execute(ctx, &cs->to_nhwc, e->to_nhwc);
  if (!st && cs->sum_input >= 0) st = toplu__dnnl_prim_execute(ctx, &cs->sum_to_nhwc, e->sum_to_nhwc);
  if (!st) st = toplu__dnnl_prim_execute(ctx, &cs->prim, e->prim);
  if (!st) st = toplu__dnnl_prim_execute(ctx, &cs->from_nhwc, e->from_nhwc);
  return st;
}

static void conv_release(toplu__kernel_ctx_t *ctx) {
  conv_state_t *cs = ctx->state;
  if (!cs) return;
  toplu__dnnl_prim_destroy(&cs->prim);
  toplu__dnnl_prim_destroy(&cs->to_nhwc);
  toplu__dnnl_prim_destroy(&cs->from_nhwc);
  toplu__dnnl_prim_destroy(&cs->sum_to_nhwc);
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
