/* graph/schema_elementwise.c - schemas of element-wise ops (unary, binary with
 * multidirectional broadcasting). */
#include "graph/schema.h"

static toplu_status_t infer_unary(toplu_infer_ctx_t *ctx) {
  toplu_infer_same(ctx, 0, 0);
  return TOPLU_OK;
}

/* Add-14 and the other broadcasting binary ops: both inputs of one dtype. */
static toplu_status_t infer_binary(toplu_infer_ctx_t *ctx) {
  if (ctx->in[0].dtype != ctx->in[1].dtype)
    return toplu_infer_error(ctx, TOPLU_ERR_SHAPE, "inputs have different types (%s and %s)",
                             toplu_dtype_name(ctx->in[0].dtype), toplu_dtype_name(ctx->in[1].dtype));
  int idx[2] = {0, 1}, nd;
  int64_t dims[TOPLU_MAX_DIMS];
  toplu_status_t st = toplu_infer_broadcast(ctx, idx, 2, &nd, dims);
  if (st) return st;
  toplu_infer_set(ctx, 0, ctx->in[0].dtype, nd, dims);
  return TOPLU_OK;
}

const toplu_schema_t toplu_schemas_elementwise[] = {
    {"Relu", "", 6, 1, 1, 1, 1, 0, infer_unary, NULL},
    {"Add", "", 7, 2, 2, 1, 1, 0, infer_binary, NULL},
    {NULL, NULL, 0, 0, 0, 0, 0, 0, NULL, NULL},
};
