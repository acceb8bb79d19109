/* ops/tensor.c - kernels of ops that move data: Identity, Reshape (views). */
#include <string.h>

#include "ops/kernel.h"

/* Views never run (the planner aliases the buffers); this copy serves callers
 * that run a kernel directly. */
static toplu_status_t run_copy(toplu_kernel_ctx_t *ctx) {
  if (ctx->out[0].data != ctx->in[0].data) memcpy(ctx->out[0].data, ctx->in[0].data, toplu_tensor_nbytes(&ctx->out[0]));
  return TOPLU_OK;
}

const toplu_kernel_t toplu_kernels_tensor[] = {
    {"Identity", "", NULL, run_copy, NULL, TOPLU_KERNEL_VIEW},
    {"Reshape", "", NULL, run_copy, NULL, TOPLU_KERNEL_VIEW},
    {NULL, NULL, NULL, NULL, NULL, 0},
};
