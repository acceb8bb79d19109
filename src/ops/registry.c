/* ops/registry.c - kernel lookup and kernel-side helpers. */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "ops/kernel.h"

static const toplu_kernel_t *const families[] = {
    toplu_kernels_elementwise, toplu_kernels_conv,   toplu_kernels_matmul,
    toplu_kernels_pool,        toplu_kernels_norm,   toplu_kernels_reduce,
    toplu_kernels_tensor,      toplu_kernels_resize, toplu_kernels_quant,
};

const toplu_kernel_t *toplu_kernel_find(const char *domain, const char *op_type) {
  if (!domain || !strcmp(domain, "ai.onnx")) domain = "";
  for (size_t f = 0; f < sizeof families / sizeof families[0]; f++)
    for (const toplu_kernel_t *k = families[f]; k->op_type; k++)
      if (!strcmp(k->op_type, op_type) && !strcmp(k->domain ? k->domain : "", domain)) return k;
  return NULL;
}

const toplu_kernel_t *toplu_kernel_find_blocked(const char *domain, const char *op_type) {
  if (!domain || !strcmp(domain, "ai.onnx")) domain = "";
  for (const toplu_kernel_t *k = toplu_kernels_blocked; k->op_type; k++)
    if (!strcmp(k->op_type, op_type) && !strcmp(k->domain ? k->domain : "", domain)) return k;
  return NULL;
}

void *toplu_kernel_alloc(toplu_kernel_ctx_t *ctx, size_t bytes) { return toplu_allocator_alloc(ctx->alloc, bytes); }

void toplu_kernel_free(toplu_kernel_ctx_t *ctx, void *p) { toplu_allocator_free(ctx->alloc, p); }

toplu_status_t toplu_kernel_error(toplu_kernel_ctx_t *ctx, toplu_status_t st, const char *fmt, ...) {
  char msg[768], what[400];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  return toplu_errorf(ctx->err, st, "%s: %s: %s", ctx->graph && ctx->graph->path ? ctx->graph->path : "<model>",
                      toplu_node_describe(ctx->graph, ctx->node, what, sizeof what), msg);
}
