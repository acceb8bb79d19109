/*
 * ops/training.c - kernels of the training ops that inference graphs carry
 * (ONNX operator spec, https://onnx.ai/onnx/operators/):
 *   NegativeLogLikelihoodLoss-12/13: loss[n, d] = -input[n, t, d] * w[t]
 *     with t = target[n, d] (w[t] = 1 without weight); targets equal to
 *     ignore_index give 0 and weigh 0; reduction "none" keeps loss, "sum"
 *     adds it up, "mean" divides the sum by the sum of the weights taken;
 *   SoftmaxCrossEntropyLoss-12/13: the same on log_softmax(scores, axis 1),
 *     which is also the optional second output (log_prob);
 *   Dropout-1/6/7/10/12/13 in inference: output = data and mask all true
 *     (training_mode false, is_test for opset < 7, or ratio 0 in training
 *     mode, where dropout keeps everything); random training-mode dropout
 *     is refused (no generator matches another runtime's draws).
 * Float, double and float16 tensors; sums in double.
 */
#include <math.h>
#include <string.h>

#include "ops/elem_io.h"
#include "ops/kernel.h"
#include "ops/tensor_copy.h"

/* ---- NegativeLogLikelihoodLoss, SoftmaxCrossEntropyLoss ---- */

typedef struct loss_state {
  int reduction; /* 0 none, 1 mean, 2 sum */
  int has_ii;
  int64_t ii;    /* ignore_index */
  int softmax;   /* SoftmaxCrossEntropyLoss */
} loss_state_t;

static toplu_status_t prepare_loss(toplu__kernel_ctx_t *ctx, toplu__kernel_info_t *info) {
  if (!toplu__is_float_dtype(ctx->in[0].dtype))
    return toplu__kernel_error(ctx, TOPLU_ERR_UNSUPPORTED, "%s on %s tensors is not supported", ctx->node->op_type,
                              toplu_dtype_name(ctx->in[0].dtype));
  loss_state_t *s = toplu__kernel_alloc(ctx, sizeof *s);
  if (!s) return toplu__kernel_error(ctx, TOPLU_ERR_OUT_OF_MEMORY, "out of memory");
  ctx->state = s;
  info->state_bytes = sizeof *s;
  const char *r = toplu__node_attr_string(ctx->node, "reduction", "mean");
  s->reduction = !strcmp(r, "none") ? 0 : !strcmp(r, "sum") ? 2 : 1;
  s->has_ii = toplu__node_attr(ctx->node, "ignore_index") != NULL;
  s->ii = toplu__node_attr_int(ctx->node, "ignore_index", 0);
  s->softmax = !strcmp(ctx->node->op_type, "SoftmaxCrossEntropyLoss");
  return TOPLU_OK;
}

static void release_state(toplu__kernel_ctx_t *ctx) { toplu__kernel_free(ctx, ctx->state); }

/* One pass over the [N, D] positions; for SoftmaxCrossEntropyLoss each
 * position's log-softmax over the C classes is computed on the way (and
 * written to log_prob when that output is used). */
static toplu_status_t run_loss(toplu__kernel_ctx_t *ctx) {
  const loss_state_t *s = ctx->state;
  const toplu_tensor_t *x = &ctx->in[0], *t = &ctx->in[1];
  const toplu_tensor_t *w = ctx->n_in > 2 && ctx->in[2].ndim >= 0 ? &ctx->in[2] : NULL;
  toplu_tensor_t *y = &ctx->out[0];
  toplu_tensor_t *lp = s->softmax && ctx->n_out > 1 && ctx->out[1].data ? &ctx->out[1] : NULL;
  const int64_t n = x->dims[0], c = x->dims[1], dd = toplu__dims_prod(x->dims, 2, x->ndim);
  double sum = 0, wsum = 0;
  for (int64_t i = 0; i < n; i++)
    for (int64_t d = 0; d < dd; d++) {
      const int64_t pos = i * dd + d, base = i * c * dd + d;
      double lse = 0;
      if (s->softmax) {
        double m = -INFINITY;
        for (int64_t k = 0; k < c; k++) {
          double v = toplu__tensor_get_double(x, base + k * dd);
          if (v > m) m = v;
        }
        double e = 0;
        for (int64_t k = 0; k < c; k++) e += exp(toplu__tensor_get_double(x, base + k * dd) - m);
        lse = m + log(e);
        if (lp)
          for (int64_t k = 0; k < c; k++)
            toplu__store_double(lp, base + k * dd, toplu__tensor_get_double(x, base + k * dd) - lse);
      }
      int64_t k = toplu__tensor_get_int(t, pos);
      double loss = 0, wt = 0;
      if (!(s->has_ii && k == s->ii)) {
        if (k < 0 || k >= c)
          return toplu__kernel_error(ctx, TOPLU_ERR_INVALID_ARGUMENT,
                                    "target %lld (at %lld) is not a class in [0, %lld) nor ignore_index", (long long)k,
                                    (long long)pos, (long long)c);
        wt = w ? toplu__tensor_get_double(w, k) : 1.0;
        loss = -(toplu__tensor_get_double(x, base + k * dd) - lse) * wt;
      }
      if (s->reduction == 0) toplu__store_double(y, pos, loss);
      sum += loss;
      wsum += wt;
    }
  if (s->reduction == 2) toplu__store_double(y, 0, sum);
  else if (s->reduction == 1) toplu__store_double(y, 0, sum / wsum);
  return TOPLU_OK;
}

/* ---- Dropout ---- */

/* Whether this node drops anything: training mode with a ratio above 0. */
static toplu_status_t prepare_dropout(toplu__kernel_ctx_t *ctx, toplu__kernel_info_t *info) {
  (void)info;
  const toplu__node_t *n = ctx->node;
  if (!toplu__is_float_dtype(ctx->in[0].dtype))
    return toplu__kernel_error(ctx, TOPLU_ERR_UNSUPPORTED, "Dropout on %s tensors is not supported",
                              toplu_dtype_name(ctx->in[0].dtype));
  int training;
  double ratio;
  if (n->opset < 12) {
    training = n->opset < 7 && toplu__node_attr_int(n, "is_test", 0) == 0;
    ratio = toplu__node_attr_float(n, "ratio", 0.5f);
  } else {
    const toplu_tensor_t *r = ctx->n_in > 1 && ctx->in[1].ndim >= 0 ? &ctx->in[1] : NULL;
    const toplu_tensor_t *tm = ctx->n_in > 2 && ctx->in[2].ndim >= 0 ? &ctx->in[2] : NULL;
    if ((r && !r->data) || (tm && !tm->data))
      return toplu__kernel_error(ctx, TOPLU_ERR_UNSUPPORTED, "ratio and training_mode must be known before the run");
    training = tm && toplu__tensor_get_int(tm, 0) != 0;
    ratio = r ? toplu__tensor_get_double(r, 0) : 0.5;
  }
  if (training && !(ratio >= 0 && ratio < 1))
    return toplu__kernel_error(ctx, TOPLU_ERR_INVALID_MODEL, "ratio %g is not in [0, 1)", ratio);
  if (training && ratio > 0)
    return toplu__kernel_error(ctx, TOPLU_ERR_UNSUPPORTED,
                              "training-mode Dropout with ratio %g draws random numbers, which toplu does not", ratio);
  return TOPLU_OK;
}

/* Nothing is dropped: copy data, mask all true. */
static toplu_status_t run_dropout(toplu__kernel_ctx_t *ctx) {
  if (ctx->out[0].data && ctx->out[0].data != ctx->in[0].data)
    toplu__copy_bytes(ctx->out[0].data, ctx->in[0].data, toplu_tensor_nbytes(&ctx->out[0]), ctx->threads);
  if (ctx->n_out > 1 && ctx->out[1].data) {
    toplu_tensor_t *m = &ctx->out[1];
    int64_t k = toplu_tensor_numel(m);
    if (m->dtype == TOPLU_DTYPE_BOOL) memset(m->data, 1, (size_t)k);
    else
      for (int64_t i = 0; i < k; i++) toplu__store_double(m, i, 1.0);
  }
  return TOPLU_OK;
}

const toplu__kernel_t toplu__kernels_training[] = {
    {"NegativeLogLikelihoodLoss", "", prepare_loss, run_loss, release_state, 0, NULL, NULL, NULL},
    {"SoftmaxCrossEntropyLoss", "", prepare_loss, run_loss, release_state, 0, NULL, NULL, NULL},
    {"Dropout", "", prepare_dropout, run_dropout, NULL, TOPLU_KERNEL_INPLACE, NULL, NULL, NULL},
    {NULL, NULL, NULL, NULL, NULL, 0, NULL, NULL, NULL},
};
