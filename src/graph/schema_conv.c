/* graph/schema_conv.c - Conv-1/11, ConvTranspose-1/11 and QLinearConv-10 schemas (see schema_conv.h). */
#include <string.h>

#include "core/checked.h"
#include "graph/schema_conv.h"

/* ceil(a / b) for a >= 0, b >= 1, without forming a + b - 1. */
static int64_t ceil_div(int64_t a, int64_t b) { return a / b + (a % b != 0); }

/* A spatial axis whose sizes do not fit in int64 (core/checked.h said so). */
static toplu_status_t too_large(toplu__infer_ctx_t *ctx, const toplu__conv_params_t *p, int i, int64_t in) {
  return toplu__infer_error(ctx, TOPLU_ERR_SHAPE,
                           "spatial axis %d: input %lld, kernel %lld, dilation %lld, stride %lld and padding %lld+%lld "
                           "give sizes too large for 64 bits",
                           i, (long long)in, (long long)p->kernel[i], (long long)p->dilation[i],
                           (long long)p->stride[i], (long long)p->pad_begin[i], (long long)p->pad_end[i]);
}

/* Read an INTS attribute of exactly n values into dst; absent: fill with dflt. */
static toplu_status_t ints_attr(toplu__infer_ctx_t *ctx, const char *name, int n, int64_t dflt, int64_t *dst) {
  int64_t cnt;
  if (toplu__node_attr_ints_n(ctx->node, name, n, dflt, dst, &cnt)) return TOPLU_OK;
  return toplu__infer_error(ctx, TOPLU_ERR_INVALID_MODEL, "attribute %s has %lld values, expected %d", name,
                           (long long)cnt, n);
}

toplu_status_t toplu__conv_params(toplu__infer_ctx_t *ctx, toplu__conv_params_t *p) {
  const toplu_tensor_t *x = &ctx->in[0], *w = &ctx->in[1];
  const toplu__node_t *n = ctx->node;
  memset(p, 0, sizeof *p);
  p->transpose = !strcmp(n->op_type, "ConvTranspose");
  if (x->ndim < 3)
    return toplu__infer_error(ctx, TOPLU_ERR_SHAPE, "input X must have rank >= 3 ([N, C, spatial...]), got %d", x->ndim);
  if (w->ndim != x->ndim)
    return toplu__infer_error(ctx, TOPLU_ERR_SHAPE, "weights W have rank %d, X has rank %d", w->ndim, x->ndim);
  int sp = x->ndim - 2;
  if (sp > TOPLU_CONV_MAX_SPATIAL)
    return toplu__infer_error(ctx, TOPLU_ERR_UNSUPPORTED, "%d spatial axes (toplu supports 1 to 3)", sp);
  p->spatial = sp;
  p->group = toplu__node_attr_int(n, "group", 1);
  if (p->group < 1) return toplu__infer_error(ctx, TOPLU_ERR_INVALID_MODEL, "group %lld < 1", (long long)p->group);
  p->n = x->dims[0];
  p->c_in = x->dims[1];
  int64_t wk[TOPLU_CONV_MAX_SPATIAL];
  for (int i = 0; i < sp; i++) wk[i] = w->dims[2 + i];
  toplu_status_t st;
  const int64_t *ks;
  int64_t nks = toplu__node_attr_ints(n, "kernel_shape", &ks);
  if (nks >= 0) {
    if (nks != sp)
      return toplu__infer_error(ctx, TOPLU_ERR_INVALID_MODEL, "kernel_shape has %lld values for %d spatial axes",
                               (long long)nks, sp);
    for (int i = 0; i < sp; i++) {
      if (wk[i] >= 0 && ks[i] != wk[i])
        return toplu__infer_error(ctx, TOPLU_ERR_SHAPE, "kernel_shape[%d] = %lld but W has %lld", i, (long long)ks[i],
                                 (long long)wk[i]);
      p->kernel[i] = ks[i];
    }
  } else {
    for (int i = 0; i < sp; i++) p->kernel[i] = wk[i];
  }
  for (int i = 0; i < sp; i++)
    if (p->kernel[i] == 0 || (nks >= 0 && ks[i] < 1))
      return toplu__infer_error(ctx, TOPLU_ERR_INVALID_MODEL, "kernel size %lld on spatial axis %d (must be >= 1)",
                               (long long)p->kernel[i], i);
  for (int i = 0; i < 2; i++)
    if (w->dims[i] == 0)
      return toplu__infer_error(ctx, TOPLU_ERR_UNSUPPORTED, "weights W with a zero dim (%d)", i);
  if ((st = ints_attr(ctx, "strides", sp, 1, p->stride)) || (st = ints_attr(ctx, "dilations", sp, 1, p->dilation)))
    return st;
  int64_t pads[2 * TOPLU_CONV_MAX_SPATIAL];
  if ((st = ints_attr(ctx, "pads", 2 * sp, 0, pads))) return st;
  for (int i = 0; i < sp; i++) {
    if (p->stride[i] < 1 || p->dilation[i] < 1 || pads[i] < 0 || pads[sp + i] < 0)
      return toplu__infer_error(ctx, TOPLU_ERR_INVALID_MODEL, "strides and dilations must be >= 1 and pads >= 0");
    p->pad_begin[i] = pads[i];
    p->pad_end[i] = pads[sp + i];
  }
  const char *auto_pad = toplu__node_attr_string(n, "auto_pad", "NOTSET");
  int same_upper = !strcmp(auto_pad, "SAME_UPPER"), same_lower = !strcmp(auto_pad, "SAME_LOWER");
  int valid = !strcmp(auto_pad, "VALID");
  if (!same_upper && !same_lower && !valid && strcmp(auto_pad, "NOTSET"))
    return toplu__infer_error(ctx, TOPLU_ERR_INVALID_MODEL, "unknown auto_pad '%s'", auto_pad);

  if (!p->transpose) {
    /* W: [M, C/group, k...] */
    p->c_out = w->dims[0];
    int64_t c_w;
    if (p->c_in >= 0 && w->dims[1] >= 0 && (!toplu__mul_i64(w->dims[1], p->group, &c_w) || p->c_in != c_w))
      return toplu__infer_error(ctx, TOPLU_ERR_SHAPE, "X has %lld channels but W expects %lld x group %lld",
                               (long long)p->c_in, (long long)w->dims[1], (long long)p->group);
    if (p->c_out >= 0 && p->c_out % p->group)
      return toplu__infer_error(ctx, TOPLU_ERR_SHAPE, "%lld output channels do not divide into %lld groups",
                               (long long)p->c_out, (long long)p->group);
    for (int i = 0; i < sp; i++) {
      int64_t in = x->dims[2 + i], ext;
      p->in[i] = in;
      if (in < 0 || p->kernel[i] < 0) {
        p->out[i] = toplu__infer_new_dim(ctx);
        continue;
      }
      if (!toplu__muladd_i64(p->kernel[i] - 1, p->dilation[i], 1, &ext)) return too_large(ctx, p, i, in);
      if (same_upper || same_lower) {
        int64_t out = ceil_div(in, p->stride[i]), total;
        if (!toplu__muladd_i64(out - 1, p->stride[i], ext, &total)) return too_large(ctx, p, i, in);
        total -= in;
        if (total < 0) total = 0;
        p->pad_begin[i] = same_upper ? total / 2 : total - total / 2;
        p->pad_end[i] = total - p->pad_begin[i];
      } else if (valid) {
        p->pad_begin[i] = p->pad_end[i] = 0;
      }
      int64_t span;
      if (!toplu__add_i64(in, p->pad_begin[i], &span) || !toplu__add_i64(span, p->pad_end[i], &span))
        return too_large(ctx, p, i, in);
      span -= ext; /* both >= 0: cannot wrap */
      if (span < 0)
        return toplu__infer_error(ctx, TOPLU_ERR_SHAPE,
                                 "spatial axis %d: input %lld plus padding is smaller than the kernel extent %lld", i,
                                 (long long)in, (long long)ext);
      p->out[i] = span / p->stride[i] + 1;
    }
  } else {
    /* W: [C, M/group, k...] */
    if (p->c_in >= 0 && w->dims[0] >= 0 && p->c_in != w->dims[0])
      return toplu__infer_error(ctx, TOPLU_ERR_SHAPE, "X has %lld channels but W has %lld", (long long)p->c_in,
                               (long long)w->dims[0]);
    p->c_out = w->dims[1];
    if (w->dims[1] >= 0 && !toplu__mul_i64(w->dims[1], p->group, &p->c_out))
      return toplu__infer_error(ctx, TOPLU_ERR_SHAPE, "W's %lld output channels per group x group %lld do not fit in 64 bits",
                               (long long)w->dims[1], (long long)p->group);
    if (p->c_in >= 0 && p->c_in % p->group)
      return toplu__infer_error(ctx, TOPLU_ERR_SHAPE, "%lld input channels do not divide into %lld groups",
                               (long long)p->c_in, (long long)p->group);
    if ((st = ints_attr(ctx, "output_padding", sp, 0, p->output_padding))) return st;
    const int64_t *os;
    int64_t nos = toplu__node_attr_ints(n, "output_shape", &os);
    if (nos >= 0 && nos != sp && nos != sp + 2)
      return toplu__infer_error(ctx, TOPLU_ERR_INVALID_MODEL, "output_shape has %lld values for %d spatial axes",
                               (long long)nos, sp);
    for (int i = 0; i < sp; i++) {
      int64_t in = x->dims[2 + i], ext, full;
      p->in[i] = in;
      if (p->output_padding[i] < 0)
        return toplu__infer_error(ctx, TOPLU_ERR_INVALID_MODEL, "output_padding must be >= 0");
      if (in < 0 || p->kernel[i] < 0) {
        p->out[i] = toplu__infer_new_dim(ctx);
        continue;
      }
      if (!toplu__muladd_i64(p->kernel[i] - 1, p->dilation[i], 1, &ext) ||
          !toplu__muladd_i64(p->stride[i], in - 1, ext, &full) ||
          !toplu__add_i64(full, p->output_padding[i], &full))
        return too_large(ctx, p, i, in);
      int64_t target = -1;
      if (nos >= 0) target = os[nos == sp ? i : 2 + i];
      else if ((same_upper || same_lower) && !toplu__mul_i64(in, p->stride[i], &target)) return too_large(ctx, p, i, in);
      if (target >= 0) {
        int64_t total = full - target;
        if (total < 0) {
          /* A larger output than the input gives: the extra rows come after
           * the data (as output_padding would), as ONNX Runtime does. */
          p->pad_begin[i] = 0;
          p->pad_end[i] = 0;
          if (!toplu__add_i64(p->output_padding[i], -total, &p->output_padding[i])) return too_large(ctx, p, i, in);
        } else if (same_upper) {
          p->pad_begin[i] = total / 2;
          p->pad_end[i] = total - total / 2;
        } else {
          p->pad_end[i] = total / 2;
          p->pad_begin[i] = total - total / 2;
        }
        p->out[i] = target;
      } else {
        if (valid) p->pad_begin[i] = p->pad_end[i] = 0;
        p->out[i] = full - p->pad_begin[i] - p->pad_end[i];
        if (p->out[i] < 0)
          return toplu__infer_error(ctx, TOPLU_ERR_SHAPE, "padding larger than the output on axis %d", i);
      }
    }
  }
  return TOPLU_OK;
}

/* A bias (input bi, if present) of p.c_out values. */
static toplu_status_t check_bias(toplu__infer_ctx_t *ctx, int bi, const toplu__conv_params_t *p) {
  if (!toplu__infer_has_input(ctx, bi)) return TOPLU_OK;
  const toplu_tensor_t *b = &ctx->in[bi];
  if (b->ndim != 1 || (b->dims[0] >= 0 && p->c_out >= 0 && b->dims[0] != p->c_out))
    return toplu__infer_error(ctx, TOPLU_ERR_SHAPE, "bias B must be 1-D with %lld values", (long long)p->c_out);
  return TOPLU_OK;
}

/* Output 0: [N, M, out...] of dtype. */
static toplu_status_t set_conv_output(toplu__infer_ctx_t *ctx, const toplu__conv_params_t *p, toplu_dtype_t dtype) {
  int64_t dims[TOPLU_MAX_DIMS];
  dims[0] = ctx->in[0].dims[0];
  dims[1] = p->c_out;
  for (int i = 0; i < p->spatial; i++) dims[2 + i] = p->out[i];
  toplu__infer_set(ctx, 0, dtype, ctx->in[0].ndim, dims);
  return TOPLU_OK;
}

static toplu_status_t infer_conv(toplu__infer_ctx_t *ctx) {
  const toplu_tensor_t *x = &ctx->in[0];
  if (x->dtype != ctx->in[1].dtype)
    return toplu__infer_error(ctx, TOPLU_ERR_SHAPE, "X is %s but W is %s", toplu_dtype_name(x->dtype),
                             toplu_dtype_name(ctx->in[1].dtype));
  int fused_sum = 0;
  for (int i = 0; i < ctx->node->n_post; i++) fused_sum |= ctx->node->post[i].kind == TOPLU_POST_SUM;
  if (ctx->n_in > 3 && !fused_sum) return toplu__infer_error(ctx, TOPLU_ERR_INVALID_MODEL, "takes at most 3 inputs");
  toplu__conv_params_t p;
  toplu_status_t st = toplu__conv_params(ctx, &p);
  if (!st) st = check_bias(ctx, 2, &p);
  return st ? st : set_conv_output(ctx, &p, x->dtype);
}

static int64_t flops_conv(const toplu__infer_ctx_t *ctx) {
  const toplu_tensor_t *w = &ctx->in[strcmp(ctx->node->op_type, "QLinearConv") ? 1 : 3], *y = &ctx->out[0];
  /* Conv (QLinearConv, ConvInteger): every output element is a dot product over C/group x k (one weight slice);
   * ConvTranspose: every input element scatters over M/group x k. */
  int64_t per = 2, f;
  for (int i = 1; i < w->ndim; i++)
    if (!toplu__mul_i64(per, w->dims[i], &per)) return INT64_MAX;
  const toplu_tensor_t *t = !strcmp(ctx->node->op_type, "ConvTranspose") ? &ctx->in[0] : y;
  if (!toplu__shape_numel(t->ndim, t->dims, &f) || !toplu__mul_i64(f, per, &f)) return INT64_MAX;
  return f;
}

/*
 * QLinearConv-10 (ONNX): x (uint8/int8), x_scale, x_zero_point, w (uint8/int8),
 * w_scale (scalar or [M]), w_zero_point, y_scale, y_zero_point, B (int32
 * [M], scale x_scale * w_scale, zero point 0) -> y of y_zero_point's type:
 *   y = saturate(round((conv(x - x_zp, w - w_zp) + B) * x_scale * w_scale / y_scale) + y_zp)
 * with Conv's geometry.  graph/fuse.c also writes it for a QDQ Conv
 * (DequantizeLinear -> Conv -> QuantizeLinear) with a fused Relu or Clip
 * in post[] (applied in the float domain, before y_scale).
 *
 * QLinearConvFloat (domain "toplu", written only by graph/fuse.c for a QDQ
 * Conv that no QuantizeLinear follows): QLinearConv's inputs without
 * y_scale and y_zero_point (inputs 6 and 7 absent), B float32 in the
 * accumulator's units (the float bias / (x_scale * w_scale[m]), unrounded)
 * -> float32
 *   y = post((conv(x - x_zp, w - w_zp) + B) * x_scale * w_scale[m])
 * the float Conv of the dequantized x and w, its sums exact in int32.
 */
static toplu_status_t infer_qlinear_conv(toplu__infer_ctx_t *ctx) {
  const toplu_tensor_t *x = &ctx->in[0], *w = &ctx->in[3];
  int float_out = ctx->node->domain[0] != '\0'; /* toplu's QLinearConvFloat */
  if (x->dtype != TOPLU_DTYPE_UINT8 && x->dtype != TOPLU_DTYPE_INT8)
    return toplu__infer_error(ctx, TOPLU_ERR_UNSUPPORTED, "x is %s; QLinearConv takes uint8 or int8", toplu_dtype_name(x->dtype));
  if (w->dtype != TOPLU_DTYPE_UINT8 && w->dtype != TOPLU_DTYPE_INT8)
    return toplu__infer_error(ctx, TOPLU_ERR_UNSUPPORTED, "w is %s; QLinearConv takes uint8 or int8", toplu_dtype_name(w->dtype));
  static const char *const names[8] = {"x", "x_scale", "x_zero_point", "w", "w_scale", "w_zero_point", "y_scale", "y_zero_point"};
  for (int i = 1; i < 8; i++) {
    if (i == 3) continue;
    const toplu_tensor_t *t = &ctx->in[i];
    if (float_out && (i == 6 || i == 7)) {
      if (toplu__infer_has_input(ctx, i))
        return toplu__infer_error(ctx, TOPLU_ERR_INVALID_MODEL, "QLinearConvFloat takes no %s", names[i]);
      continue;
    }
    if (!toplu__infer_has_input(ctx, i)) {
      if (i == 2 || i == 5 || i == 7) continue; /* zero points default to 0 */
      return toplu__infer_error(ctx, TOPLU_ERR_INVALID_MODEL, "input %s is missing", names[i]);
    }
    int is_scale = i == 1 || i == 4 || i == 6;
    if (is_scale && t->dtype != TOPLU_DTYPE_FLOAT)
      return toplu__infer_error(ctx, TOPLU_ERR_INVALID_MODEL, "%s is %s, not float32", names[i], toplu_dtype_name(t->dtype));
    if (!is_scale && t->dtype != (i == 2 ? x->dtype : i == 5 ? w->dtype : t->dtype))
      return toplu__infer_error(ctx, TOPLU_ERR_INVALID_MODEL, "%s is %s but %s is %s", names[i], toplu_dtype_name(t->dtype),
                               names[i == 2 ? 0 : 3], toplu_dtype_name(i == 2 ? x->dtype : w->dtype));
    if (i == 7 && t->dtype != TOPLU_DTYPE_UINT8 && t->dtype != TOPLU_DTYPE_INT8)
      return toplu__infer_error(ctx, TOPLU_ERR_UNSUPPORTED, "y_zero_point is %s; QLinearConv writes uint8 or int8",
                               toplu_dtype_name(t->dtype));
    int64_t n = 1;
    for (int k = 0; k < t->ndim; k++) n *= t->dims[k];
    if (t->ndim > 1 || (i != 4 && i != 5 && n != 1))
      return toplu__infer_error(ctx, TOPLU_ERR_SHAPE, "%s must be a scalar%s", names[i], i == 4 || i == 5 ? " or 1-D [M]" : "");
  }
  toplu_tensor_t xw[2] = {*x, *w};
  toplu__infer_ctx_t sub = *ctx;
  sub.in = xw;
  sub.n_in = 2;
  toplu__conv_params_t p;
  toplu_status_t st = toplu__conv_params(&sub, &p);
  if (st) return st;
  for (int i = 4; i <= 5; i++)
    if (toplu__infer_has_input(ctx, i) && ctx->in[i].ndim == 1 && ctx->in[i].dims[0] != 1 && p.c_out >= 0 &&
        ctx->in[i].dims[0] >= 0 && ctx->in[i].dims[0] != p.c_out)
      return toplu__infer_error(ctx, TOPLU_ERR_SHAPE, "%s has %lld values for %lld output channels", names[i],
                               (long long)ctx->in[i].dims[0], (long long)p.c_out);
  int fused_min = 0, qsum = -1;
  for (int i = 0; i < ctx->node->n_post; i++) {
    fused_min |= ctx->node->post[i].kind == TOPLU_POST_MIN_CHANNEL;
    if (ctx->node->post[i].kind == TOPLU_POST_QSUM) qsum = ctx->node->post[i].input;
  }
  if (ctx->n_in > 9 && !fused_min && qsum < 0) return toplu__infer_error(ctx, TOPLU_ERR_INVALID_MODEL, "takes at most 9 inputs");
  if (qsum >= 0) { /* graph/fuse.c's residual: b (x's type), sb, zb, sa, za */
    if (float_out || qsum + 5 != ctx->n_in || ctx->in[qsum].dtype != ctx->in[7].dtype ||
        ctx->in[qsum + 1].dtype != TOPLU_DTYPE_FLOAT || ctx->in[qsum + 3].dtype != TOPLU_DTYPE_FLOAT)
      return toplu__infer_error(ctx, TOPLU_ERR_INVALID_MODEL, "bad residual inputs of a fused QDQ Add");
  }
  toplu_dtype_t bt = float_out ? TOPLU_DTYPE_FLOAT : TOPLU_DTYPE_INT32;
  if (toplu__infer_has_input(ctx, 8) && ctx->in[8].dtype != bt)
    return toplu__infer_error(ctx, TOPLU_ERR_INVALID_MODEL, "B is %s, not %s", toplu_dtype_name(ctx->in[8].dtype),
                             toplu_dtype_name(bt));
  if ((st = check_bias(ctx, 8, &p))) return st;
  return set_conv_output(ctx, &p, float_out ? TOPLU_DTYPE_FLOAT
                                           : toplu__infer_has_input(ctx, 7) ? ctx->in[7].dtype : TOPLU_DTYPE_UINT8);
}

/* ConvInteger-10: (x - x_zero_point) conv (w - w_zero_point) in int32;
 * x, w uint8 or int8; Conv's geometry. */
static toplu_status_t infer_conv_integer(toplu__infer_ctx_t *ctx) {
  for (int i = 0; i < 4 && i < ctx->n_in; i++) {
    if (!toplu__infer_has_input(ctx, i)) continue;
    toplu_dtype_t t = ctx->in[i].dtype;
    if (t != TOPLU_DTYPE_UINT8 && t != TOPLU_DTYPE_INT8)
      return toplu__infer_error(ctx, TOPLU_ERR_UNSUPPORTED, "input %d is %s; ConvInteger takes uint8 or int8", i, toplu_dtype_name(t));
  }
  toplu__conv_params_t p;
  toplu_status_t st = toplu__conv_params(ctx, &p);
  return st ? st : set_conv_output(ctx, &p, TOPLU_DTYPE_INT32);
}

/*
 * toplu.PointwiseDepthwiseConv (written only by graph/fuse.c): a 1x1
 * convolution followed by a 3x3 depthwise convolution, as the expansion
 * and depthwise layers of MobileNetV2's inverted residual blocks:
 *   X [N, C, H, W], W [M, C, 1, 1], B [M] (optional), W_dw [M, 1, 3, 3],
 *   B_dw [M] (optional) -> Y [N, M, (H - 1) / s + 1, (W - 1) / s + 1] float32
 * with s = attribute dw_stride (1 or 2) and the depthwise pads 1 on every
 * side (Conv-11's geometry: floor((H + 2 - 3) / s) + 1).  Post-ops
 * post[0 .. post_split-1] apply after the 1x1 convolution, the rest after
 * the depthwise one (attribute post_split).
 * With the block's projection too (inputs 5-7, graph/fuse.c's
 * fuse_dw_projection): W_pj [Co, M, 1, 1], B_pj [Co] (optional) and the
 * residual addend R [N, Co, Ho, Wo] (optional, read by a SUM post-op)
 *   -> Z = post3(Y . W_pj + B_pj) [N, Co, Ho, Wo]
 * with the depthwise post-ops post[post_split .. pj_split-1] and the
 * projection's post[pj_split ..] (attribute pj_split).
 */
/* Input i, when present, is the residual addend of an output dims [N, Co, Ho, Wo] (dims not yet known
 * on either side pass). */
/* TOPLU_ERR_UNSUPPORTED naming the first of the node's first n inputs (those present) that is not float32. */
static toplu_status_t float_inputs(toplu__infer_ctx_t *ctx, int n) {
  for (int i = 0; i < ctx->n_in && i < n; i++)
    if (toplu__infer_has_input(ctx, i) && ctx->in[i].dtype != TOPLU_DTYPE_FLOAT)
      return toplu__infer_error(ctx, TOPLU_ERR_UNSUPPORTED, "input %d is %s; float32 expected", i,
                               toplu_dtype_name(ctx->in[i].dtype));
  return TOPLU_OK;
}

static toplu_status_t check_addend(toplu__infer_ctx_t *ctx, int i, const int64_t dims[4]) {
  if (ctx->n_in <= i || !toplu__infer_has_input(ctx, i)) return TOPLU_OK;
  const toplu_tensor_t *r = &ctx->in[i];
  int same = r->ndim == 4;
  for (int k = 0; same && k < 4; k++)
    if (r->dims[k] >= 0 && dims[k] >= 0 && r->dims[k] != dims[k]) same = 0;
  return same ? TOPLU_OK
              : toplu__infer_error(ctx, TOPLU_ERR_SHAPE, "input %d (the residual addend) must be [N, Co, Ho, Wo]", i);
}

static toplu_status_t infer_pointwise_depthwise(toplu__infer_ctx_t *ctx) {
  const toplu_tensor_t *x = &ctx->in[0], *w = &ctx->in[1], *wd = &ctx->in[3];
  toplu_status_t ts = float_inputs(ctx, 8);
  if (ts) return ts;
  if (x->ndim != 4 || w->ndim != 4 || wd->ndim != 4)
    return toplu__infer_error(ctx, TOPLU_ERR_SHAPE, "X, W and W_dw must have rank 4 (got %d, %d, %d)", x->ndim, w->ndim,
                             wd->ndim);
  int64_t m = w->dims[0], s = toplu__node_attr_int(ctx->node, "dw_stride", 1);
  if (w->dims[2] != 1 || w->dims[3] != 1 || (x->dims[1] >= 0 && w->dims[1] != x->dims[1]))
    return toplu__infer_error(ctx, TOPLU_ERR_SHAPE, "W must be [M, %lld, 1, 1]", (long long)x->dims[1]);
  if (wd->dims[0] != m || wd->dims[1] != 1 || wd->dims[2] != 3 || wd->dims[3] != 3)
    return toplu__infer_error(ctx, TOPLU_ERR_SHAPE, "W_dw must be [%lld, 1, 3, 3]", (long long)m);
  if (s != 1 && s != 2) return toplu__infer_error(ctx, TOPLU_ERR_INVALID_MODEL, "dw_stride %lld (1 or 2)", (long long)s);
  int64_t split = toplu__node_attr_int(ctx->node, "post_split", 0);
  if (split < 0 || split > ctx->node->n_post)
    return toplu__infer_error(ctx, TOPLU_ERR_INVALID_MODEL, "post_split %lld of %d post-ops", (long long)split,
                             ctx->node->n_post);
  for (int i = 2; i < 5; i += 2)
    if (toplu__infer_has_input(ctx, i) && (ctx->in[i].ndim != 1 || ctx->in[i].dims[0] != m))
      return toplu__infer_error(ctx, TOPLU_ERR_SHAPE, "input %d (a bias) must be [%lld]", i, (long long)m);
  int64_t dims[4] = {x->dims[0], m, 0, 0};
  for (int i = 2; i < 4; i++) {
    if (x->dims[i] >= 0) dims[i] = (x->dims[i] - 1) / s + 1;
    else dims[i] = s == 1 ? x->dims[i] : toplu__infer_new_dim(ctx);
  }
  if ((x->dims[2] == 0 || x->dims[3] == 0))
    return toplu__infer_error(ctx, TOPLU_ERR_SHAPE, "X has an empty spatial axis");
  if (toplu__infer_has_input(ctx, 5)) { /* the projection */
    const toplu_tensor_t *wp = &ctx->in[5];
    if (wp->ndim != 4 || wp->dims[1] != m || wp->dims[2] != 1 || wp->dims[3] != 1)
      return toplu__infer_error(ctx, TOPLU_ERR_SHAPE, "W_pj must be [Co, %lld, 1, 1]", (long long)m);
    int64_t pj = toplu__node_attr_int(ctx->node, "pj_split", ctx->node->n_post);
    if (pj < split || pj > ctx->node->n_post)
      return toplu__infer_error(ctx, TOPLU_ERR_INVALID_MODEL, "pj_split %lld outside [%lld, %d]", (long long)pj,
                               (long long)split, ctx->node->n_post);
    dims[1] = wp->dims[0];
    if (toplu__infer_has_input(ctx, 6) && (ctx->in[6].ndim != 1 || ctx->in[6].dims[0] != dims[1]))
      return toplu__infer_error(ctx, TOPLU_ERR_SHAPE, "input 6 (B_pj) must be [%lld]", (long long)dims[1]);
    toplu_status_t st = check_addend(ctx, 7, dims);
    if (st) return st;
  } else if (ctx->n_in > 6 && (toplu__infer_has_input(ctx, 6) || (ctx->n_in > 7 && toplu__infer_has_input(ctx, 7)))) {
    return toplu__infer_error(ctx, TOPLU_ERR_INVALID_MODEL, "B_pj or a residual addend without W_pj");
  }
  toplu__infer_set(ctx, 0, TOPLU_DTYPE_FLOAT, 4, dims);
  return TOPLU_OK;
}

/* 2 N M (C H W + 9 Ho Wo): the 1x1 products over the input's positions and
 * the 3x3 depthwise products over the output's; with the projection
 * + 2 N Co M Ho Wo. */
static int64_t flops_pointwise_depthwise(const toplu__infer_ctx_t *ctx) {
  const toplu_tensor_t *x = &ctx->in[0], *y = &ctx->out[0];
  const int proj = ctx->n_in > 5 && toplu__infer_has_input(ctx, 5);
  const int64_t m = ctx->in[1].dims[0];
  int64_t a, b, c = 0;
  if (!toplu__shape_numel(x->ndim, x->dims, &a) || !toplu__mul_i64(a, 2 * m, &a)) return INT64_MAX;
  /* the depthwise outputs: Y's elements, M channels (Z has Co) */
  if (!toplu__shape_numel(y->ndim, y->dims, &b)) return INT64_MAX;
  if (proj) {
    const int64_t co = y->dims[1] > 0 ? y->dims[1] : 1;
    if (!toplu__mul_i64(b, 2 * m, &c)) return INT64_MAX; /* 2 Co M Ho Wo N */
    b = b / co * m;
  }
  if (!toplu__mul_i64(b, 18, &b)) return INT64_MAX;
  if (a > INT64_MAX - b || a + b > INT64_MAX - c) return INT64_MAX;
  return a + b + c;
}

/*
 * toplu.DepthwisePointwiseConv (written only by graph/fuse.c's
 * fuse_depthwise_pointwise): a 3x3 depthwise convolution and the 1x1
 * convolution that alone reads it (MobileNetV2's first block, MobileNetV1's
 * separable layers):
 *   X [N, C, H, W], W_dw [C, 1, 3, 3], B_dw [C] (optional), W_pw [Co, C, 1, 1],
 *   B_pw [Co] (optional), R [N, Co, Ho, Wo] (optional, a SUM post-op's addend)
 *   -> Z [N, Co, (H - 1) / s + 1, (W - 1) / s + 1] float32
 * with s = attribute dw_stride (1 or 2), pads 1; post-ops [0, post_split)
 * follow the depthwise convolution, the rest the 1x1.
 */
static toplu_status_t infer_depthwise_pointwise(toplu__infer_ctx_t *ctx) {
  const toplu_tensor_t *x = &ctx->in[0], *wd = &ctx->in[1], *wp = &ctx->in[3];
  toplu_status_t ts = float_inputs(ctx, 6);
  if (ts) return ts;
  if (x->ndim != 4 || wd->ndim != 4 || wp->ndim != 4)
    return toplu__infer_error(ctx, TOPLU_ERR_SHAPE, "X, W_dw and W_pw must have rank 4 (got %d, %d, %d)", x->ndim,
                             wd->ndim, wp->ndim);
  const int64_t c = wd->dims[0], s = toplu__node_attr_int(ctx->node, "dw_stride", 1);
  if ((x->dims[1] >= 0 && x->dims[1] != c) || wd->dims[1] != 1 || wd->dims[2] != 3 || wd->dims[3] != 3)
    return toplu__infer_error(ctx, TOPLU_ERR_SHAPE, "W_dw must be [%lld, 1, 3, 3]", (long long)x->dims[1]);
  if (wp->dims[1] != c || wp->dims[2] != 1 || wp->dims[3] != 1)
    return toplu__infer_error(ctx, TOPLU_ERR_SHAPE, "W_pw must be [Co, %lld, 1, 1]", (long long)c);
  if (s != 1 && s != 2) return toplu__infer_error(ctx, TOPLU_ERR_INVALID_MODEL, "dw_stride %lld (1 or 2)", (long long)s);
  const int64_t split = toplu__node_attr_int(ctx->node, "post_split", 0);
  if (split < 0 || split > ctx->node->n_post)
    return toplu__infer_error(ctx, TOPLU_ERR_INVALID_MODEL, "post_split %lld of %d post-ops", (long long)split,
                             ctx->node->n_post);
  if (toplu__infer_has_input(ctx, 2) && (ctx->in[2].ndim != 1 || ctx->in[2].dims[0] != c))
    return toplu__infer_error(ctx, TOPLU_ERR_SHAPE, "input 2 (B_dw) must be [%lld]", (long long)c);
  if (toplu__infer_has_input(ctx, 4) && (ctx->in[4].ndim != 1 || ctx->in[4].dims[0] != wp->dims[0]))
    return toplu__infer_error(ctx, TOPLU_ERR_SHAPE, "input 4 (B_pw) must be [%lld]", (long long)wp->dims[0]);
  if (x->dims[2] == 0 || x->dims[3] == 0) return toplu__infer_error(ctx, TOPLU_ERR_SHAPE, "X has an empty spatial axis");
  int64_t dims[4] = {x->dims[0], wp->dims[0], 0, 0};
  for (int i = 2; i < 4; i++) {
    if (x->dims[i] >= 0) dims[i] = (x->dims[i] - 1) / s + 1;
    else dims[i] = s == 1 ? x->dims[i] : toplu__infer_new_dim(ctx);
  }
  toplu_status_t st = check_addend(ctx, 5, dims);
  if (st) return st;
  toplu__infer_set(ctx, 0, TOPLU_DTYPE_FLOAT, 4, dims);
  return TOPLU_OK;
}

/* 2 N Ho Wo C (9 + Co): the depthwise products and the 1x1 ones, over the output's positions. */
static int64_t flops_depthwise_pointwise(const toplu__infer_ctx_t *ctx) {
  const toplu_tensor_t *y = &ctx->out[0];
  const int64_t c = ctx->in[1].dims[0], co = y->dims[1] > 0 ? y->dims[1] : 1;
  int64_t a;
  if (!toplu__shape_numel(y->ndim, y->dims, &a)) return INT64_MAX;
  a /= co; /* N Ho Wo */
  return toplu__mul_i64(a, 2 * c * (9 + co), &a) ? a : INT64_MAX;
}

const toplu__schema_t toplu__schemas_conv[] = {
    /* Conv has a 4th input only after graph/fuse.c adds a residual addend */
    {"Conv", "", 1, 2, 4, 1, 1, 0, infer_conv, flops_conv, NULL},
    {"ConvTranspose", "", 1, 2, 3, 1, 1, 0, infer_conv, flops_conv, NULL},
    /* QLinearConv has more than 9 inputs only after graph/fuse.c adds a per-channel Min's bounds (10th) or a
     * residual Add (5 more: TOPLU_POST_QSUM) */
    {"QLinearConv", "", 10, 8, 15, 1, 1, 0, infer_qlinear_conv, flops_conv, NULL},
    {"QLinearConvFloat", "toplu", 1, 6, 10, 1, 1, 0, infer_qlinear_conv, flops_conv, NULL},
    {"ConvInteger", "", 10, 2, 4, 1, 1, 0, infer_conv_integer, flops_conv, NULL},
    {"PointwiseDepthwiseConv", "toplu", 1, 4, 8, 1, 1, (1u << 1) | (1u << 3) | (1u << 5), infer_pointwise_depthwise,
     flops_pointwise_depthwise, NULL},
    {"DepthwisePointwiseConv", "toplu", 1, 4, 6, 1, 1, (1u << 1) | (1u << 3), infer_depthwise_pointwise,
     flops_depthwise_pointwise, NULL},
    {NULL, NULL, 0, 0, 0, 0, 0, 0, NULL, NULL, NULL},
};
