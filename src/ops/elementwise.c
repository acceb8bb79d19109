/* ops/elementwise.c - element-wise kernels. */
#include <string.h>

#include "ops/kernel.h"

static toplu_status_t run_relu(toplu_kernel_ctx_t *ctx) {
  if (ctx->in[0].dtype != TOPLU_DTYPE_FLOAT) return toplu_kernel_error(ctx, TOPLU_ERR_UNSUPPORTED, "dtype");
  const float *x = ctx->in[0].data;
  float *y = ctx->out[0].data;
  int64_t n = toplu_tensor_numel(&ctx->out[0]);
  for (int64_t i = 0; i < n; i++) y[i] = x[i] > 0 ? x[i] : 0;
  return TOPLU_OK;
}

static toplu_status_t run_add(toplu_kernel_ctx_t *ctx) {
  const toplu_tensor_t *a = &ctx->in[0], *b = &ctx->in[1], *y = &ctx->out[0];
  if (a->dtype != TOPLU_DTYPE_FLOAT) return toplu_kernel_error(ctx, TOPLU_ERR_UNSUPPORTED, "dtype");
  int64_t n = toplu_tensor_numel(y);
  int64_t na = toplu_tensor_numel(a), nb = toplu_tensor_numel(b);
  const float *pa = a->data, *pb = b->data;
  float *py = y->data;
  for (int64_t i = 0; i < n; i++) py[i] = pa[na == n ? i : i % na] + pb[nb == n ? i : i % nb];
  return TOPLU_OK;
}

const toplu_kernel_t toplu_kernels_elementwise[] = {
    {"Relu", "", NULL, run_relu, NULL, TOPLU_KERNEL_INPLACE},
    {"Add", "", NULL, run_add, NULL, TOPLU_KERNEL_INPLACE},
    {NULL, NULL, NULL, NULL, NULL, 0},
};
