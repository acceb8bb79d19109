/*
 * graph/schema_norm.c - schemas of the normalization ops:
 *   BatchNormalization-6/7/9/14/15 (inference; training_mode=1 from opset 14
 *     with the running_mean / running_var outputs),
 *   InstanceNormalization-1/6, LayerNormalization-17 (optional Mean and
 *   InvStdDev outputs), LRN-1/13, MeanVarianceNormalization-9/13,
 *   GroupNormalization-18/21 (num_groups required, dividing C; scale and
 *   bias one per group at opset 18, one per channel from 21).
 */
#include <string.h>

#include "core/checked.h"
#include "graph/schema.h"


/* Float types these ops compute on. */
static int norm_float_type(toplu_dtype_t dt) {
  return dt == TOPLU_DTYPE_FLOAT || dt == TOPLU_DTYPE_DOUBLE || dt == TOPLU_DTYPE_FLOAT16;
}

/* X a float tensor: the check every norm op starts with (attribute types are
 * checked at load, toplu__schema_check_attrs). */
static toplu_status_t norm_check_x(toplu__infer_ctx_t *ctx) {
  if (!norm_float_type(ctx->in[0].dtype))
    return toplu__infer_error(ctx, TOPLU_ERR_UNSUPPORTED, "input X is %s; expected a float type",
                             toplu_dtype_name(ctx->in[0].dtype));
  return TOPLU_OK;
}

/* Check that input i is a float tensor with numel n (when n and the dims
 * are known): a per-channel parameter. */
static toplu_status_t norm_check_param(toplu__infer_ctx_t *ctx, int i, const char *name, int64_t c) {
  const toplu_tensor_t *t = &ctx->in[i];
  if (!norm_float_type(t->dtype))
    return toplu__infer_error(ctx, TOPLU_ERR_UNSUPPORTED, "input %s is %s; expected a float type", name,
                             toplu_dtype_name(t->dtype));
  if (c < 0) return TOPLU_OK;
  int64_t n = 1;
  for (int d = 0; d < t->ndim; d++) {
    if (t->dims[d] < 0) return TOPLU_OK;
    n *= t->dims[d];
  }
  if (n != c)
    return toplu__infer_error(ctx, TOPLU_ERR_SHAPE, "input %s has %lld elements, expected %lld (one per channel)", name,
                             (long long)n, (long long)c);
  return TOPLU_OK;
}

/* BatchNormalization: Y like X; running_mean/var (and the legacy saved
 * mean/var outputs of opsets < 14) like the mean input. */
static toplu_status_t infer_batchnorm(toplu__infer_ctx_t *ctx) {
  const toplu_tensor_t *x = &ctx->in[0];
  toplu_status_t xst = norm_check_x(ctx);
  if (xst) return xst;
  if (x->ndim < 2) return toplu__infer_error(ctx, TOPLU_ERR_SHAPE, "input X has rank %d; expected [N, C, ...]", x->ndim);
  int64_t c = x->dims[1];
  int spatial = (int)toplu__node_attr_int(ctx->node, "spatial", 1);
  static const char *names[5] = {"X", "scale", "B", "mean", "var"};
  for (int i = 1; i < 5; i++) {
    toplu_status_t st = norm_check_param(ctx, i, names[i], spatial || ctx->node->opset >= 9 ? c : -1);
    if (st) return st;
  }
  if (ctx->node->opset >= 14 && toplu__node_attr_int(ctx->node, "training_mode", 0) == 0 && ctx->n_out > 1) {
    for (int j = 1; j < ctx->n_out; j++)
      if (ctx->node->outputs[j] >= 0)
        return toplu__infer_error(ctx, TOPLU_ERR_INVALID_MODEL,
                                 "outputs running_mean and running_var need training_mode = 1");
  }
  toplu__infer_same(ctx, 0, 0);
  for (int j = 1; j < ctx->n_out; j++) toplu__infer_same(ctx, j, 3);
  return TOPLU_OK;
}

/* InstanceNormalization: Y like X; scale and B have C elements. */
static toplu_status_t infer_instancenorm(toplu__infer_ctx_t *ctx) {
  const toplu_tensor_t *x = &ctx->in[0];
  toplu_status_t xst = norm_check_x(ctx);
  if (xst) return xst;
  if (x->ndim < 3)
    return toplu__infer_error(ctx, TOPLU_ERR_SHAPE, "input X has rank %d; expected [N, C, D1, ...]", x->ndim);
  toplu_status_t st;
  if ((st = norm_check_param(ctx, 1, "scale", x->dims[1])) || (st = norm_check_param(ctx, 2, "B", x->dims[1])))
    return st;
  toplu__infer_same(ctx, 0, 0);
  return TOPLU_OK;
}

/* GroupNormalization-18/21: Y like X [N, C, D1, ...]; num_groups divides C; scale and bias have num_groups
 * elements (opset 18) or C (21). */
static toplu_status_t infer_groupnorm(toplu__infer_ctx_t *ctx) {
  const toplu_tensor_t *x = &ctx->in[0];
  toplu_status_t st = norm_check_x(ctx);
  if (st) return st;
  if (x->ndim < 2)
    return toplu__infer_error(ctx, TOPLU_ERR_SHAPE, "input X has rank %d; expected [N, C, D1, ...]", x->ndim);
  if (!toplu__node_attr(ctx->node, "num_groups"))
    return toplu__infer_error(ctx, TOPLU_ERR_INVALID_MODEL, "the num_groups attribute is required");
  int64_t g = toplu__node_attr_int(ctx->node, "num_groups", 0), c = x->dims[1];
  if (g < 1) return toplu__infer_error(ctx, TOPLU_ERR_INVALID_MODEL, "num_groups is %lld; expected >= 1", (long long)g);
  if (c >= 0 && c % g)
    return toplu__infer_error(ctx, TOPLU_ERR_SHAPE, "num_groups %lld does not divide the %lld channels", (long long)g,
                             (long long)c);
  int64_t per = ctx->node->opset >= 21 ? c : g;
  if ((st = norm_check_param(ctx, 1, "scale", per)) || (st = norm_check_param(ctx, 2, "bias", per))) return st;
  toplu__infer_same(ctx, 0, 0);
  return TOPLU_OK;
}

/* LayerNormalization-17: Y like X; Mean and InvStdDev are X's dims before
 * axis followed by ones, of stash_type (float unless it says double). */
static toplu_status_t infer_layernorm(toplu__infer_ctx_t *ctx) {
  const toplu_tensor_t *x = &ctx->in[0];
  toplu_status_t xst = norm_check_x(ctx);
  if (xst) return xst;
  int axis;
  toplu_status_t st = toplu__infer_axis(ctx, toplu__node_attr_int(ctx->node, "axis", -1), x->ndim, "axis", &axis);
  if (st) return st;
  for (int i = 1; i < 3 && i < ctx->n_in; i++) {
    const toplu_tensor_t *p = &ctx->in[i];
    if (p->ndim < 0) continue;
    if (!norm_float_type(p->dtype))
      return toplu__infer_error(ctx, TOPLU_ERR_UNSUPPORTED, "input %s is %s; expected a float type",
                               i == 1 ? "Scale" : "B", toplu_dtype_name(p->dtype));
    int extra = p->ndim - (x->ndim - axis); /* leading dims beyond X[axis:] must be 1 */
    for (int d = 0; d < extra; d++)
      if (p->dims[d] != 1)
        return toplu__infer_error(ctx, TOPLU_ERR_SHAPE, "input %s has rank %d; it must broadcast to X's last %d dims",
                                 i == 1 ? "Scale" : "B", p->ndim, x->ndim - axis);
    for (int d = extra > 0 ? extra : 0; d < p->ndim; d++) {
      int64_t pd = p->dims[d], xd = x->dims[x->ndim - p->ndim + d];
      if (pd >= 0 && xd >= 0 && pd != 1 && pd != xd)
        return toplu__infer_error(ctx, TOPLU_ERR_SHAPE, "input %s dim %d is %lld; X has %lld there",
                                 i == 1 ? "Scale" : "B", d, (long long)pd, (long long)xd);
    }
  }
  toplu__infer_same(ctx, 0, 0);
  int64_t stash = toplu__node_attr_int(ctx->node, "stash_type", 1);
  toplu_dtype_t sdt = stash == TOPLU_DTYPE_DOUBLE ? TOPLU_DTYPE_DOUBLE : TOPLU_DTYPE_FLOAT;
  int64_t dims[TOPLU_MAX_DIMS];
  for (int d = 0; d < x->ndim; d++) dims[d] = d < axis ? x->dims[d] : 1;
  for (int j = 1; j < ctx->n_out && j < 3; j++) toplu__infer_set(ctx, j, sdt, x->ndim, dims);
  return TOPLU_OK;
}

/* LRN: Y like X ([N, C, ...]); size is required and positive. */
static toplu_status_t infer_lrn(toplu__infer_ctx_t *ctx) {
  const toplu_tensor_t *x = &ctx->in[0];
  toplu_status_t xst = norm_check_x(ctx);
  if (xst) return xst;
  if (x->ndim < 2) return toplu__infer_error(ctx, TOPLU_ERR_SHAPE, "input X has rank %d; expected [N, C, ...]", x->ndim);
  if (toplu__node_attr_int(ctx->node, "size", 0) < 1)
    return toplu__infer_error(ctx, TOPLU_ERR_INVALID_MODEL, "attribute size is required and must be positive");
  toplu__infer_same(ctx, 0, 0);
  return TOPLU_OK;
}

/* MeanVarianceNormalization: Y like X; axes (default [0, 2, 3]) in range. */
static toplu_status_t infer_mvn(toplu__infer_ctx_t *ctx) {
  const toplu_tensor_t *x = &ctx->in[0];
  toplu_status_t xst = norm_check_x(ctx);
  if (xst) return xst;
  const int64_t *av;
  int64_t na = toplu__node_attr_ints(ctx->node, "axes", &av);
  static const int64_t dflt[3] = {0, 2, 3};
  if (na < 0) {
    na = 3;
    av = dflt;
  }
  for (int64_t i = 0; i < na; i++) {
    int ax;
    toplu_status_t st = toplu__infer_axis(ctx, av[i], x->ndim, "axes value", &ax);
    if (st) return st;
  }
  toplu__infer_same(ctx, 0, 0);
  return TOPLU_OK;
}

/* LpNormalization-1: p 1 or 2 along one axis (default -1); Y has X's shape. */
static toplu_status_t infer_lpnorm(toplu__infer_ctx_t *ctx) {
  toplu_status_t xst = norm_check_x(ctx);
  if (xst) return xst;
  int64_t p = toplu__node_attr_int(ctx->node, "p", 2);
  if (p != 1 && p != 2)
    return toplu__infer_error(ctx, TOPLU_ERR_INVALID_MODEL, "attribute p is %lld; LpNormalization takes 1 or 2",
                             (long long)p);
  if (ctx->in[0].ndim >= 1) {
    int ax;
    toplu_status_t st =
        toplu__infer_axis(ctx, toplu__node_attr_int(ctx->node, "axis", -1), ctx->in[0].ndim, "attribute axis", &ax);
    if (st) return st;
  }
  toplu__infer_same(ctx, 0, 0);
  return TOPLU_OK;
}

/* A few operations per element. */
static int64_t flops_norm(const toplu__infer_ctx_t *ctx) { return 2 * toplu_tensor_numel(&ctx->in[0]); }
/* Statistics (two passes) plus the scaling. */
static int64_t flops_stats(const toplu__infer_ctx_t *ctx) { return 5 * toplu_tensor_numel(&ctx->in[0]); }
/* size multiply-adds per element plus the power. */
static int64_t flops_lrn(const toplu__infer_ctx_t *ctx) {
  bool ok = true;
  int64_t per = toplu__add_i64_ok(toplu__mul_i64_ok(2, toplu__node_attr_int(ctx->node, "size", 1), &ok), 4, &ok);
  int64_t f = toplu__mul_i64_ok(per, toplu_tensor_numel(&ctx->in[0]), &ok);
  return ok ? f : INT64_MAX;
}

const toplu__schema_t toplu__schemas_norm[] = {
    {"BatchNormalization", "", 6, 5, 5, 1, 5, 0, infer_batchnorm, flops_norm, toplu__rows_training},
    {"InstanceNormalization", "", 1, 3, 3, 1, 1, 0, infer_instancenorm, flops_stats, NULL},
    {"LayerNormalization", "", 17, 2, 3, 1, 3, 0, infer_layernorm, flops_stats, toplu__rows_last_axis},
    {"LRN", "", 1, 1, 1, 1, 1, 0, infer_lrn, flops_lrn, NULL},
    {"MeanVarianceNormalization", "", 9, 1, 1, 1, 1, 0, infer_mvn, flops_stats, toplu__rows_mvn},
    {"LpNormalization", "", 1, 1, 1, 1, 1, 0, infer_lpnorm, flops_norm, toplu__rows_last_axis},
    {"GroupNormalization", "", 18, 3, 3, 1, 1, 0, infer_groupnorm, flops_stats, NULL},
    {NULL, NULL, 0, 0, 0, 0, 0, 0, NULL, NULL, NULL},
};
