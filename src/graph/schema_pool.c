/*
 * graph/schema_pool.c - schemas of the pooling ops:
 *   MaxPool-1/8/10/11/12 (kernel_shape, strides, pads, auto_pad, dilations,
 *     ceil_mode, storage_order, optional Indices output),
 *   AveragePool-1/7/10/11 (count_include_pad, ceil_mode; dilations as in -19),
 *   LpPool-1/2/11, GlobalAveragePool-1, GlobalMaxPool-1, GlobalLpPool-1/2.
 *
 * Output spatial size (ONNX pooling spec, NOTSET/VALID pads):
 *   floor or ceil((in + pad_begin + pad_end - ((k - 1) * d + 1)) / s) + 1,
 * and with ceil_mode a last window that would start past the input and the
 * begin pad is dropped (as PyTorch and ONNX Runtime do), so every window
 * covers at least one input element.  SAME_UPPER/SAME_LOWER: ceil(in / s).
 * ops/pool.c repeats this arithmetic for the pads (the kernel layer may not
 * include this file's layer-private helpers).
 */
#include <string.h>

#include "core/checked.h"
#include "graph/schema.h"

#define POOL_MAX_SPATIAL (TOPLU_MAX_DIMS - 2)


/* Pooling dtypes: MaxPool also takes int8/uint8 (opset 12). */
static int pool_dtype_ok(toplu_dtype_t dt, int allow_int) {
  if (dt == TOPLU_DTYPE_FLOAT || dt == TOPLU_DTYPE_DOUBLE || dt == TOPLU_DTYPE_FLOAT16) return 1;
  return allow_int && (dt == TOPLU_DTYPE_INT8 || dt == TOPLU_DTYPE_UINT8);
}

/* Read an INTS attribute of length n (or default dflt when absent), each >= min. */
static toplu_status_t pool_ints(toplu__infer_ctx_t *ctx, const char *name, int n, int64_t dflt, int64_t *out,
                                int64_t min) {
  int64_t cnt;
  if (!toplu__node_attr_ints_n(ctx->node, name, n, dflt, out, &cnt))
    return toplu__infer_error(ctx, TOPLU_ERR_INVALID_MODEL, "attribute %s has %lld values, expected %d", name,
                             (long long)cnt, n);
  for (int i = 0; i < n; i++)
    if (out[i] < min)
      return toplu__infer_error(ctx, TOPLU_ERR_INVALID_MODEL, "attribute %s[%d] = %lld must be >= %lld", name, i,
                               (long long)out[i], (long long)min);
  return TOPLU_OK;
}

/* MaxPool, AveragePool and LpPool: output shape from the window attributes. */
static toplu_status_t infer_pool(toplu__infer_ctx_t *ctx) {
  const toplu_tensor_t *x = &ctx->in[0];
  const char *op = ctx->node->op_type;
  int is_max = !strcmp(op, "MaxPool");
  toplu_status_t st;
  if (!pool_dtype_ok(x->dtype, is_max))
    return toplu__infer_error(ctx, TOPLU_ERR_UNSUPPORTED, "input X is %s; %s takes float, double or float16%s",
                             toplu_dtype_name(x->dtype), op, is_max ? ", int8 or uint8" : "");
  if (x->ndim < 3)
    return toplu__infer_error(ctx, TOPLU_ERR_SHAPE, "input X has rank %d; pooling needs [N, C, spatial...]", x->ndim);
  int ns = x->ndim - 2;
  int64_t k[POOL_MAX_SPATIAL], s[POOL_MAX_SPATIAL], d[POOL_MAX_SPATIAL], pads[2 * POOL_MAX_SPATIAL];
  const int64_t *kv;
  int64_t kn = toplu__node_attr_ints(ctx->node, "kernel_shape", &kv);
  if (kn < 0) return toplu__infer_error(ctx, TOPLU_ERR_INVALID_MODEL, "attribute kernel_shape is required");
  if ((st = pool_ints(ctx, "kernel_shape", ns, 1, k, 1)) || (st = pool_ints(ctx, "strides", ns, 1, s, 1)) ||
      (st = pool_ints(ctx, "dilations", ns, 1, d, 1)) || (st = pool_ints(ctx, "pads", 2 * ns, 0, pads, 0)))
    return st;
  const char *ap = toplu__node_attr_string(ctx->node, "auto_pad", "NOTSET");
  int same = !strcmp(ap, "SAME_UPPER") || !strcmp(ap, "SAME_LOWER"), valid = !strcmp(ap, "VALID");
  if (!same && !valid && strcmp(ap, "NOTSET") && ap[0])
    return toplu__infer_error(ctx, TOPLU_ERR_INVALID_MODEL, "auto_pad '%s' is not NOTSET, SAME_UPPER, SAME_LOWER or VALID",
                             ap);
  int ceil_mode = (int)toplu__node_attr_int(ctx->node, "ceil_mode", 0);
  int64_t so = toplu__node_attr_int(ctx->node, "storage_order", 0);
  if (so != 0 && so != 1)
    return toplu__infer_error(ctx, TOPLU_ERR_INVALID_MODEL, "storage_order %lld is not 0 or 1", (long long)so);
  int64_t dims[TOPLU_MAX_DIMS];
  dims[0] = x->dims[0];
  dims[1] = x->dims[1];
  for (int i = 0; i < ns; i++) {
    int64_t in = x->dims[2 + i];
    if (in < 0) {
      dims[2 + i] = toplu__infer_new_dim(ctx);
      continue;
    }
    int64_t ek, out, padded;
    int64_t pb = valid || same ? 0 : pads[i], pe = valid || same ? 0 : pads[ns + i];
    if (!toplu__muladd_i64(k[i] - 1, d[i], 1, &ek) || !toplu__add_i64(in, pb, &padded) ||
        !toplu__add_i64(padded, pe, &padded))
      return toplu__infer_error(ctx, TOPLU_ERR_SHAPE,
                               "spatial dim %d: input %lld, kernel %lld, dilation %lld and pads %lld+%lld give sizes "
                               "too large for 64 bits", i, (long long)in, (long long)k[i], (long long)d[i],
                               (long long)pb, (long long)pe);
    if (same) {
      out = in / s[i] + (in % s[i] != 0);
    } else {
      int64_t span = padded - ek;
      if (span < 0)
        return toplu__infer_error(ctx, TOPLU_ERR_SHAPE,
                                 "spatial dim %d: window %lld (kernel %lld, dilation %lld) is larger than the padded input %lld",
                                 i, (long long)ek, (long long)k[i], (long long)d[i], (long long)(in + pb + pe));
      if (ceil_mode) {
        out = span / s[i] + (span % s[i] != 0) + 1;
        /* (out - 1) * s >= in + pb: the last window starts in the end padding */
        if ((out - 1) >= (in + pb) / s[i] + ((in + pb) % s[i] != 0)) out--;
      } else {
        out = span / s[i] + 1;
      }
    }
    dims[2 + i] = out;
  }
  toplu__infer_set(ctx, 0, x->dtype, x->ndim, dims);
  if (ctx->n_out > 1) {
    if (!is_max) return toplu__infer_error(ctx, TOPLU_ERR_INVALID_MODEL, "%s has one output", op);
    toplu__infer_set(ctx, 1, TOPLU_DTYPE_INT64, x->ndim, dims);
  }
  return TOPLU_OK;
}

/* GlobalAveragePool, GlobalMaxPool, GlobalLpPool: [N, C, 1, ...]. */
static toplu_status_t infer_global_pool(toplu__infer_ctx_t *ctx) {
  const toplu_tensor_t *x = &ctx->in[0];
  if (!pool_dtype_ok(x->dtype, 0))
    return toplu__infer_error(ctx, TOPLU_ERR_UNSUPPORTED, "input X is %s; %s takes float, double or float16",
                             toplu_dtype_name(x->dtype), ctx->node->op_type);
  if (x->ndim < 3)
    return toplu__infer_error(ctx, TOPLU_ERR_SHAPE, "input X has rank %d; pooling needs [N, C, spatial...]", x->ndim);
  int64_t dims[TOPLU_MAX_DIMS];
  dims[0] = x->dims[0];
  dims[1] = x->dims[1];
  for (int i = 2; i < x->ndim; i++) dims[i] = 1;
  toplu__infer_set(ctx, 0, x->dtype, x->ndim, dims);
  return TOPLU_OK;
}

/* One compare or add per input element of each window: the output count
 * times the window size, saturating at INT64_MAX (core/checked.h: three
 * kernel dims of 2^31 over a padded input multiply past 2^63). */
static int64_t flops_pool(const toplu__infer_ctx_t *ctx) {
  const toplu_tensor_t *y = &ctx->out[0];
  bool ok = true;
  int64_t n = toplu_tensor_numel(y);
  const int64_t *kv;
  int64_t kn = toplu__node_attr_ints(ctx->node, "kernel_shape", &kv);
  for (int64_t i = 0; i < kn; i++) n = toplu__mul_i64_ok(n, kv[i], &ok);
  return ok ? n : INT64_MAX;
}

/* The input element count. */
static int64_t flops_global_pool(const toplu__infer_ctx_t *ctx) { return toplu_tensor_numel(&ctx->in[0]); }

const toplu__schema_t toplu__schemas_pool[] = {
    {"MaxPool", "", 1, 1, 1, 1, 2, 0, infer_pool, flops_pool, NULL},
    {"AveragePool", "", 1, 1, 1, 1, 1, 0, infer_pool, flops_pool, NULL},
    {"LpPool", "", 1, 1, 1, 1, 1, 0, infer_pool, flops_pool, NULL},
    {"GlobalAveragePool", "", 1, 1, 1, 1, 1, 0, infer_global_pool, flops_global_pool, NULL},
    {"GlobalMaxPool", "", 1, 1, 1, 1, 1, 0, infer_global_pool, flops_global_pool, NULL},
    {"GlobalLpPool", "", 1, 1, 1, 1, 1, 0, infer_global_pool, flops_global_pool, NULL},
    {NULL, NULL, 0, 0, 0, 0, 0, 0, NULL, NULL, NULL},
};
