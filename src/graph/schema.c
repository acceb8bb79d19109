/* graph/schema.c - the schema registry and helpers for infer functions. */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "graph/schema.h"

static const toplu_schema_t *const families[] = {
    toplu_schemas_elementwise, toplu_schemas_conv,   toplu_schemas_matmul,
    toplu_schemas_pool,        toplu_schemas_norm,   toplu_schemas_reduce,
    toplu_schemas_tensor,      toplu_schemas_resize, toplu_schemas_quant,
};

const toplu_schema_t *toplu_schema_find(const char *domain, const char *op_type) {
  if (!domain || !strcmp(domain, "ai.onnx")) domain = "";
  for (size_t f = 0; f < sizeof families / sizeof families[0]; f++)
    for (const toplu_schema_t *s = families[f]; s->op_type; s++)
      if (!strcmp(s->op_type, op_type) && !strcmp(s->domain ? s->domain : "", domain)) return s;
  return NULL;
}

int toplu_schema_foreach(void (*fn)(const toplu_schema_t *s, void *user), void *user) {
  int n = 0;
  for (size_t f = 0; f < sizeof families / sizeof families[0]; f++)
    for (const toplu_schema_t *s = families[f]; s->op_type; s++, n++)
      if (fn) fn(s, user);
  return n;
}

toplu_status_t toplu_infer_error(toplu_infer_ctx_t *ctx, toplu_status_t st, const char *fmt, ...) {
  char msg[768], what[400];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  return toplu_errorf(ctx->err, st, "%s: %s: %s", ctx->graph && ctx->graph->path ? ctx->graph->path : "<model>",
                      toplu_node_describe(ctx->graph, ctx->node, what, sizeof what), msg);
}

int toplu_infer_has_input(const toplu_infer_ctx_t *ctx, int i) {
  return i < ctx->n_in && ctx->node->inputs[i] >= 0;
}

int64_t toplu_infer_new_dim(toplu_infer_ctx_t *ctx) {
  /* At plan time the graph is shared by concurrent planners and must not
   * change; an unknown dim there is reported by the inference pass. */
  if (ctx->concrete) return TOPLU_SYM(0);
  int s = ctx->graph ? toplu_graph_symbol(ctx->graph, NULL) : -1;
  return TOPLU_SYM(s < 0 ? 0 : s);
}

void toplu_infer_set(toplu_infer_ctx_t *ctx, int i, toplu_dtype_t dtype, int ndim, const int64_t *dims) {
  toplu_tensor_t *o = &ctx->out[i];
  o->dtype = dtype;
  o->ndim = ndim;
  for (int k = 0; k < ndim && k < TOPLU_MAX_DIMS; k++) o->dims[k] = dims[k];
}

void toplu_infer_same(toplu_infer_ctx_t *ctx, int i, int j) {
  toplu_infer_set(ctx, i, ctx->in[j].dtype, ctx->in[j].ndim, ctx->in[j].dims);
}

toplu_status_t toplu_infer_set_const(toplu_infer_ctx_t *ctx, int i, const void *src) {
  toplu_tensor_t *o = &ctx->out[i];
  if (i >= 8) return toplu_infer_error(ctx, TOPLU_ERR_INTERNAL, "constant output index %d out of range", i);
  for (int k = 0; k < o->ndim; k++)
    if (o->dims[k] < 0) return toplu_infer_error(ctx, TOPLU_ERR_INTERNAL, "constant output with a symbolic dim");
  size_t n = toplu_tensor_nbytes(o);
  void *d = malloc(n ? n : 1);
  if (!d) return toplu_infer_error(ctx, TOPLU_ERR_OUT_OF_MEMORY, "out of memory");
  if (n) memcpy(d, src, n);
  free(ctx->out_const[i]);
  ctx->out_const[i] = d;
  o->data = d;
  return TOPLU_OK;
}

toplu_status_t toplu_infer_broadcast(toplu_infer_ctx_t *ctx, const int *idx, int n, int *ndim, int64_t *dims) {
  int r = 0;
  for (int k = 0; k < n; k++)
    if (ctx->in[idx[k]].ndim > r) r = ctx->in[idx[k]].ndim;
  for (int d = 0; d < r; d++) dims[d] = 1;
  for (int k = 0; k < n; k++) {
    const toplu_tensor_t *t = &ctx->in[idx[k]];
    for (int d = 0; d < t->ndim; d++) {
      int od = r - t->ndim + d;
      int64_t a = dims[od], b = t->dims[d];
      if (a == b || b == 1) continue;
      if (a == 1) {
        dims[od] = b;
        continue;
      }
      if (a >= 0 && b >= 0) {
        char sa[128], sb[128];
        const toplu_tensor_t *t0 = &ctx->in[idx[0]];
        return toplu_infer_error(ctx, TOPLU_ERR_SHAPE, "inputs %d %s and %d %s do not broadcast (dim %d: %lld vs %lld)",
                                 idx[0], toplu_shape_format(t0->ndim, t0->dims, sa, sizeof sa), idx[k],
                                 toplu_shape_format(t->ndim, t->dims, sb, sizeof sb), od, (long long)a, (long long)b);
      }
      /* One side symbolic: a symbol that is not 1 must equal the known side. */
      if (a < 0 && b >= 0) dims[od] = b;
      else if (a >= 0 && b < 0) dims[od] = a;
      else dims[od] = toplu_infer_new_dim(ctx);
    }
  }
  *ndim = r;
  return TOPLU_OK;
}

toplu_status_t toplu_infer_axis(toplu_infer_ctx_t *ctx, int64_t axis, int rank, const char *what, int *out) {
  int64_t a = axis < 0 ? axis + rank : axis;
  if (a < 0 || a >= (rank ? rank : 1))
    return toplu_infer_error(ctx, TOPLU_ERR_INVALID_MODEL, "%s %lld is out of range for rank %d", what,
                             (long long)axis, rank);
  *out = (int)a;
  return TOPLU_OK;
}

int64_t toplu_tensor_get_int(const toplu_tensor_t *t, int64_t k) {
  const void *p = t->data;
  switch (t->dtype) {
    case TOPLU_DTYPE_INT64: return ((const int64_t *)p)[k];
    case TOPLU_DTYPE_INT32: return ((const int32_t *)p)[k];
    case TOPLU_DTYPE_INT16: return ((const int16_t *)p)[k];
    case TOPLU_DTYPE_INT8: return ((const int8_t *)p)[k];
    case TOPLU_DTYPE_UINT8: case TOPLU_DTYPE_BOOL: return ((const uint8_t *)p)[k];
    case TOPLU_DTYPE_UINT16: return ((const uint16_t *)p)[k];
    case TOPLU_DTYPE_UINT32: return ((const uint32_t *)p)[k];
    case TOPLU_DTYPE_UINT64: return (int64_t)((const uint64_t *)p)[k];
    case TOPLU_DTYPE_FLOAT: return (int64_t)((const float *)p)[k];
    case TOPLU_DTYPE_DOUBLE: return (int64_t)((const double *)p)[k];
    case TOPLU_DTYPE_FLOAT16: return (int64_t)toplu_half_to_float(((const uint16_t *)p)[k]);
    default: return 0;
  }
}

double toplu_tensor_get_double(const toplu_tensor_t *t, int64_t k) {
  const void *p = t->data;
  switch (t->dtype) {
    case TOPLU_DTYPE_FLOAT: return ((const float *)p)[k];
    case TOPLU_DTYPE_DOUBLE: return ((const double *)p)[k];
    case TOPLU_DTYPE_FLOAT16: return toplu_half_to_float(((const uint16_t *)p)[k]);
    case TOPLU_DTYPE_BFLOAT16: return toplu_bfloat16_to_float(((const uint16_t *)p)[k]);
    case TOPLU_DTYPE_UINT64: return (double)((const uint64_t *)p)[k];
    default: return (double)toplu_tensor_get_int(t, k);
  }
}
