/*
 * graph/schema_training.c - schemas of the ops that matter in training and
 * run in inference graphs too (ONNX operator spec,
 * https://onnx.ai/onnx/operators/):
 *   NegativeLogLikelihoodLoss-12/13: input [N, C, d1..dk], target
 *     [N, d1..dk] (int32/int64), optional weight [C]; reduction "none"
 *     gives target's shape, "mean" (default) and "sum" a scalar;
 *   SoftmaxCrossEntropyLoss-12/13: scores [N, C, d1..dk], labels
 *     [N, d1..dk], optional weights [C]; output as above and the optional
 *     log_prob output of scores' shape;
 *   Dropout-1/6/7/10/12/13: output of data's shape and the optional mask
 *     (bool from opset 10, data's type before); ratio and training_mode
 *     inputs (opset 12) decide what the kernel does, so a plan needs their
 *     values (const_inputs).  In training mode the mask covers the whole
 *     tensor, so rows are not independent.
 */
#include <string.h>

#include "graph/infer.h"
#include "graph/schema.h"

/* Float dtypes the losses compute on. */
static int loss_float(toplu_dtype_t dt) {
  return dt == TOPLU_DTYPE_FLOAT || dt == TOPLU_DTYPE_DOUBLE || dt == TOPLU_DTYPE_FLOAT16;
}

/* The reduction attribute: "none", "mean" or "sum". */
static toplu_status_t loss_reduction(toplu__infer_ctx_t *ctx, int *reduce) {
  const char *r = toplu__node_attr_string(ctx->node, "reduction", "mean");
  if (!strcmp(r, "none")) *reduce = 0;
  else if (!strcmp(r, "mean") || !strcmp(r, "sum")) *reduce = 1;
  else return toplu__infer_error(ctx, TOPLU_ERR_INVALID_MODEL, "reduction '%s' is not none, mean or sum", r);
  return TOPLU_OK;
}

/* NegativeLogLikelihoodLoss and SoftmaxCrossEntropyLoss: input 0 [N, C, d..],
 * input 1 [N, d..] of indices, input 2 [C]. */
static toplu_status_t infer_loss(toplu__infer_ctx_t *ctx) {
  const toplu_tensor_t *x = &ctx->in[0], *t = &ctx->in[1];
  int reduce = 0;
  toplu_status_t st = loss_reduction(ctx, &reduce);
  if (st) return st;
  if (!loss_float(x->dtype))
    return toplu__infer_error(ctx, TOPLU_ERR_UNSUPPORTED, "input 0 is %s; expected a float type",
                             toplu_dtype_name(x->dtype));
  if (t->dtype != TOPLU_DTYPE_INT32 && t->dtype != TOPLU_DTYPE_INT64)
    return toplu__infer_error(ctx, TOPLU_ERR_INVALID_MODEL, "input 1 (target) is %s; expected int32 or int64",
                             toplu_dtype_name(t->dtype));
  if (x->ndim < 2) return toplu__infer_error(ctx, TOPLU_ERR_SHAPE, "input 0 has rank %d; expected [N, C, ...]", x->ndim);
  if (t->ndim != x->ndim - 1)
    return toplu__infer_error(ctx, TOPLU_ERR_SHAPE, "target has rank %d; expected %d (input's rank less the class dim)",
                             t->ndim, x->ndim - 1);
  for (int d = 0; d < t->ndim; d++) {
    int64_t a = x->dims[d == 0 ? 0 : d + 1], b = t->dims[d];
    if (a >= 0 && b >= 0 && a != b)
      return toplu__infer_error(ctx, TOPLU_ERR_SHAPE, "target dim %d is %lld; input has %lld there", d, (long long)b,
                               (long long)a);
  }
  if (toplu__infer_has_input(ctx, 2)) {
    const toplu_tensor_t *w = &ctx->in[2];
    if (w->dtype != x->dtype)
      return toplu__infer_error(ctx, TOPLU_ERR_INVALID_MODEL, "weight is %s; input is %s", toplu_dtype_name(w->dtype),
                               toplu_dtype_name(x->dtype));
    if (w->ndim != 1 || (w->dims[0] >= 0 && x->dims[1] >= 0 && w->dims[0] != x->dims[1]))
      return toplu__infer_error(ctx, TOPLU_ERR_SHAPE, "weight must be 1-D with one value per class");
  }
  if (reduce) toplu__infer_set(ctx, 0, x->dtype, 0, NULL);
  else toplu__infer_set(ctx, 0, x->dtype, t->ndim, t->dims);
  if (ctx->n_out > 1) toplu__infer_same(ctx, 1, 0);
  return TOPLU_OK;
}

/* A reduced loss adds over rows. */
static int rows_loss(const toplu__node_t *n, const void *t) {
  (void)t;
  return strcmp(toplu__node_attr_string(n, "reduction", "mean"), "none") != 0;
}

/* Dropout: output like data; mask bool (opset 10+) or data's type. */
static toplu_status_t infer_dropout(toplu__infer_ctx_t *ctx) {
  const toplu_tensor_t *x = &ctx->in[0];
  if (!loss_float(x->dtype))
    return toplu__infer_error(ctx, TOPLU_ERR_UNSUPPORTED, "input data is %s; expected a float type",
                             toplu_dtype_name(x->dtype));
  for (int i = 1; i < 3; i++) {
    if (!toplu__infer_has_input(ctx, i)) continue;
    const toplu_tensor_t *v = &ctx->in[i];
    if (v->ndim > 1 || (v->ndim == 1 && v->dims[0] >= 0 && v->dims[0] != 1))
      return toplu__infer_error(ctx, TOPLU_ERR_SHAPE, "input %s must be a scalar", i == 1 ? "ratio" : "training_mode");
    if (i == 2 && v->dtype != TOPLU_DTYPE_BOOL)
      return toplu__infer_error(ctx, TOPLU_ERR_INVALID_MODEL, "training_mode is %s; expected bool",
                               toplu_dtype_name(v->dtype));
  }
  toplu__infer_same(ctx, 0, 0);
  if (ctx->n_out > 1)
    toplu__infer_set(ctx, 1, ctx->node->opset >= 10 ? TOPLU_DTYPE_BOOL : x->dtype, x->ndim, x->dims);
  return TOPLU_OK;
}

/* Training-mode Dropout (or one that may be): its mask is drawn over the
 * whole tensor.  Not with a constant ratio of 0, which drops nothing and
 * scales by 1 in either mode (torchvision's Swin Transformer exports its last
 * stage's attention Dropouts so, training_mode true: the model counted as
 * mixing its rows and batch jobs ran it row by row, a fresh user's finding
 * of 2026-12-06). */
static int rows_dropout(const toplu__node_t *n, const void *tv) {
  const toplu__value_table_t *t = tv;
  if (n->opset < 7) return toplu__node_attr_int(n, "is_test", 0) == 0;
  if (n->opset < 12 || n->n_inputs < 3 || n->inputs[2] < 0) return 0;
  const toplu_tensor_t *v = &t->vals[n->inputs[2]];
  if (n->n_inputs > 1 && n->inputs[1] >= 0) {
    const toplu_tensor_t *r = &t->vals[n->inputs[1]];
    if (r->data && toplu_tensor_numel(r) == 1 && toplu__tensor_get_double(r, 0) == 0.0) return 0;
  }
  return !v->data || toplu__tensor_get_int(v, 0) != 0;
}

/* RandomNormal-1, RandomUniform-1 (shape attribute) and RandomNormalLike-1,
 * RandomUniformLike-1 (input 0's shape): dtype attribute, default float
 * (the *Like: the input's); float and double only.  ONNX operator
 * specification.  Never folded at plan time (graph/infer.c). */
static toplu_status_t infer_random(toplu__infer_ctx_t *ctx) {
  const toplu__node_t *n = ctx->node;
  int like = ctx->n_in > 0;
  const toplu__attr_t *da = toplu__node_attr(n, "dtype");
  toplu_dtype_t dt = da ? (toplu_dtype_t)da->i : like ? ctx->in[0].dtype : TOPLU_DTYPE_FLOAT;
  if (dt != TOPLU_DTYPE_FLOAT && dt != TOPLU_DTYPE_DOUBLE)
    return toplu__infer_error(ctx, TOPLU_ERR_UNSUPPORTED, "dtype %s: toplu draws float and double only",
                             toplu_dtype_name(dt));
  if (like) {
    toplu__infer_set(ctx, 0, dt, ctx->in[0].ndim, ctx->in[0].dims);
    return TOPLU_OK;
  }
  const int64_t *shape;
  int64_t r = toplu__node_attr_ints(n, "shape", &shape);
  if (!toplu__node_attr(n, "shape") || r < 0)
    return toplu__infer_error(ctx, TOPLU_ERR_INVALID_MODEL, "the shape attribute is required");
  if (r > TOPLU_MAX_DIMS)
    return toplu__infer_error(ctx, TOPLU_ERR_UNSUPPORTED, "output rank %lld is above %d", (long long)r, TOPLU_MAX_DIMS);
  for (int64_t i = 0; i < r; i++)
    if (shape[i] < 0)
      return toplu__infer_error(ctx, TOPLU_ERR_INVALID_MODEL, "shape[%lld] = %lld is negative", (long long)i,
                               (long long)shape[i]);
  toplu__infer_set(ctx, 0, dt, (int)r, shape);
  return TOPLU_OK;
}

/* With a seed a *Like node draws the same numbers for the same batch
 * (ops/training.c): row i's draw depends on i, so the batch cannot be cut
 * into slices that run apart (choose_threads). */
static int rows_seeded(const toplu__node_t *n, const void *t) {
  (void)t;
  return toplu__node_attr(n, "seed") != NULL;
}

/* About a dozen operations per score (log-softmax and the gather). */
static int64_t flops_sce(const toplu__infer_ctx_t *ctx) { return 12 * toplu_tensor_numel(&ctx->in[0]); }
static int64_t flops_nll(const toplu__infer_ctx_t *ctx) { return 2 * toplu_tensor_numel(&ctx->in[1]); }
static int64_t flops_zero(const toplu__infer_ctx_t *ctx) { (void)ctx; return 0; }

const toplu__schema_t toplu__schemas_training[] = {
    {"NegativeLogLikelihoodLoss", "", 12, 2, 3, 1, 1, 0, infer_loss, flops_nll, rows_loss},
    {"SoftmaxCrossEntropyLoss", "", 12, 2, 3, 1, 2, 0, infer_loss, flops_sce, rows_loss},
    {"Dropout", "", 1, 1, 3, 1, 2, (1u << 1) | (1u << 2), infer_dropout, flops_zero, rows_dropout},
    {"RandomNormal", "", 1, 0, 0, 1, 1, 0, infer_random, NULL, NULL},
    {"RandomUniform", "", 1, 0, 0, 1, 1, 0, infer_random, NULL, NULL},
    {"RandomNormalLike", "", 1, 1, 1, 1, 1, 0, infer_random, NULL, rows_seeded},
    {"RandomUniformLike", "", 1, 1, 1, 1, 1, 0, infer_random, NULL, rows_seeded},
    {NULL, NULL, 0, 0, 0, 0, 0, 0, NULL, NULL, NULL},
};
