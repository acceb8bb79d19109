/* graph/schema_control.c - If, Loop and Scan: what load-time inference can say before graph/control.c
 * inlines them (at plan time at the latest). */
#include <string.h>

#include "graph/schema.h"

static const toplu__onnx_model_t *body_of(toplu__infer_ctx_t *ctx, const char *name, toplu_status_t *st) {
  const toplu__attr_t *a = toplu__node_attr(ctx->node, name);
  if (!a || a->type != TOPLU_ATTR_GRAPH || !a->g) {
    *st = toplu__infer_error(ctx, TOPLU_ERR_INVALID_MODEL, "no GRAPH attribute '%s'", name);
    return NULL;
  }
  return a->g;
}

/* Output j as body output vi declares it: dtype (fallback dflt), rank and dims when declared (unknown dims new). */
static void set_declared(toplu__infer_ctx_t *ctx, int j, const toplu__onnx_value_info_t *a,
                         const toplu__onnx_value_info_t *b, toplu_dtype_t dflt) {
  toplu_tensor_t *o = &ctx->out[j];
  o->dtype = a && a->dtype ? a->dtype : b && b->dtype ? b->dtype : dflt;
  o->ndim = -1;
  if (!a || a->ndim < 0 || (b && b->ndim != a->ndim)) return;
  o->ndim = a->ndim;
  for (int d = 0; d < a->ndim; d++)
    o->dims[d] = a->dims[d].value >= 0 && (!b || b->dims[d].value == a->dims[d].value) ? a->dims[d].value
                                                                                      : toplu__infer_new_dim(ctx);
}

/* If with a condition not known yet: outputs as both branches declare them. */
static toplu_status_t infer_if(toplu__infer_ctx_t *ctx) {
  toplu_status_t st = TOPLU_OK;
  const toplu__onnx_model_t *th = body_of(ctx, "then_branch", &st), *el = th ? body_of(ctx, "else_branch", &st) : NULL;
  if (!el) return st;
  if (th->n_outputs != ctx->n_out || el->n_outputs != ctx->n_out)
    return toplu__infer_error(ctx, TOPLU_ERR_INVALID_MODEL, "branches with %d and %d outputs for a node with %d",
                             th->n_outputs, el->n_outputs, ctx->n_out);
  if (ctx->in[0].dtype != TOPLU_DTYPE_BOOL)
    return toplu__infer_error(ctx, TOPLU_ERR_INVALID_MODEL, "condition is %s, not bool",
                             toplu_dtype_name(ctx->in[0].dtype));
  for (int j = 0; j < ctx->n_out; j++) set_declared(ctx, j, &th->outputs[j], &el->outputs[j], TOPLU_DTYPE_UNDEFINED);
  return TOPLU_OK;
}

/* Loop before it is unrolled: carried values keep their dtype, shapes are known after unrolling. */
static toplu_status_t infer_loop(toplu__infer_ctx_t *ctx) {
  toplu_status_t st = TOPLU_OK;
  const toplu__onnx_model_t *b = body_of(ctx, "body", &st);
  if (!b) return st;
  int N = ctx->n_in - ctx->node->n_implicit - 2;
  if (N < 0 || b->n_outputs != 1 + ctx->n_out || ctx->n_out < N)
    return toplu__infer_error(ctx, TOPLU_ERR_INVALID_MODEL, "body gives %d outputs for %d loop-carried values and %d "
                             "node outputs", b->n_outputs, N, ctx->n_out);
  for (int j = 0; j < ctx->n_out; j++) {
    set_declared(ctx, j, NULL, NULL, j < N ? ctx->in[2 + j].dtype : b->outputs[1 + j].dtype);
  }
  return TOPLU_OK;
}

static toplu_status_t infer_scan(toplu__infer_ctx_t *ctx) {
  toplu_status_t st = TOPLU_OK;
  const toplu__onnx_model_t *b = body_of(ctx, "body", &st);
  if (!b) return st;
  int64_t M = toplu__node_attr_int(ctx->node, "num_scan_inputs", -1);
  int n_expl = ctx->n_in - ctx->node->n_implicit;
  if (ctx->node->opset < 9) n_expl--; /* Scan-8: sequence_lens first */
  if (M < 1 || M > n_expl || b->n_outputs != ctx->n_out)
    return toplu__infer_error(ctx, TOPLU_ERR_INVALID_MODEL, "num_scan_inputs %lld for %d inputs, body with %d "
                             "outputs for %d", (long long)M, n_expl, b->n_outputs, ctx->n_out);
  int N = n_expl - (int)M;
  int first = ctx->node->opset < 9 ? 1 : 0;
  for (int j = 0; j < ctx->n_out; j++)
    set_declared(ctx, j, NULL, NULL, j < N ? ctx->in[first + j].dtype : b->outputs[j].dtype);
  return TOPLU_OK;
}

/* Loop's M and cond and Scan-8's sequence_lens may be empty names (min_inputs 0); inputs past the explicit ones are the subgraphs' outer-scope values (toplu__node_t.n_implicit). */
const toplu__schema_t toplu__schemas_control[] = {
    {"If", "", 1, 1, 1, 1, 1 << 20, 1u << 0, infer_if, NULL, NULL},
    {"Loop", "", 1, 0, 1 << 20, 1, 1 << 20, 3u, infer_loop, NULL, NULL},
    {"Scan", "", 8, 0, 1 << 20, 1, 1 << 20, 0, infer_scan, NULL, NULL},
    {NULL, NULL, 0, 0, 0, 0, 0, 0, NULL, NULL, NULL},
};
