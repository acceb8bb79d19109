/* graph/schema.c - the schema registry and helpers for infer functions. */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/strtensor.h"
#include "graph/infer.h"
#include "graph/schema.h"

static const toplu__schema_t *const families[] = {
    toplu__schemas_elementwise, toplu__schemas_conv,   toplu__schemas_matmul,
    toplu__schemas_pool,        toplu__schemas_norm,   toplu__schemas_reduce,
    toplu__schemas_tensor,      toplu__schemas_resize, toplu__schemas_quant,
    toplu__schemas_training,    toplu__schemas_index,  toplu__schemas_signal,
    toplu__schemas_vision,      toplu__schemas_linalg,
    toplu__schemas_rnn,         toplu__schemas_control, toplu__schemas_text,
    toplu__schemas_sequence,
};

const toplu__schema_t *toplu__schema_find(const char *domain, const char *op_type) {
  if (!domain || !strcmp(domain, "ai.onnx")) domain = "";
  for (size_t f = 0; f < sizeof families / sizeof families[0]; f++)
    for (const toplu__schema_t *s = families[f]; s->op_type; s++)
      if (!strcmp(s->op_type, op_type) && !strcmp(s->domain ? s->domain : "", domain)) return s;
  return NULL;
}

int toplu__schema_foreach(void (*fn)(const toplu__schema_t *s, void *user), void *user) {
  int n = 0;
  for (size_t f = 0; f < sizeof families / sizeof families[0]; f++)
    for (const toplu__schema_t *s = families[f]; s->op_type; s++, n++)
      if (fn) fn(s, user);
  return n;
}

/* Attribute types from the ONNX operator specs; op NULL: any op.  The first
 * matching row wins, so op-specific rows come before generic ones. */
static const struct {
  const char *op, *name;
  toplu__attr_type_t type;
} attr_types[] = {
    {"Pad", "value", TOPLU_ATTR_FLOAT},        {"Constant", "value", TOPLU_ATTR_TENSOR},
    {"ConstantOfShape", "value", TOPLU_ATTR_TENSOR},
    {"Split", "split", TOPLU_ATTR_INTS},       {"Clip", "min", TOPLU_ATTR_FLOAT},
    {"Clip", "max", TOPLU_ATTR_FLOAT},         {"Resize", "mode", TOPLU_ATTR_STRING},
    {NULL, "strides", TOPLU_ATTR_INTS},        {NULL, "pads", TOPLU_ATTR_INTS},
    {NULL, "dilations", TOPLU_ATTR_INTS},      {NULL, "kernel_shape", TOPLU_ATTR_INTS},
    {NULL, "output_padding", TOPLU_ATTR_INTS}, {NULL, "output_shape", TOPLU_ATTR_INTS},
    {NULL, "perm", TOPLU_ATTR_INTS},           {NULL, "axes", TOPLU_ATTR_INTS},
    {NULL, "starts", TOPLU_ATTR_INTS},         {NULL, "ends", TOPLU_ATTR_INTS},
    {NULL, "group", TOPLU_ATTR_INT},           {NULL, "axis", TOPLU_ATTR_INT},
    {NULL, "keepdims", TOPLU_ATTR_INT},        {NULL, "transA", TOPLU_ATTR_INT},
    {NULL, "transB", TOPLU_ATTR_INT},          {NULL, "ceil_mode", TOPLU_ATTR_INT},
    {NULL, "count_include_pad", TOPLU_ATTR_INT}, {NULL, "storage_order", TOPLU_ATTR_INT},
    {NULL, "allowzero", TOPLU_ATTR_INT},       {NULL, "to", TOPLU_ATTR_INT},
    {NULL, "training_mode", TOPLU_ATTR_INT},   {NULL, "epsilon", TOPLU_ATTR_FLOAT},
    {NULL, "momentum", TOPLU_ATTR_FLOAT},      {NULL, "alpha", TOPLU_ATTR_FLOAT},
    {NULL, "beta", TOPLU_ATTR_FLOAT},          {NULL, "auto_pad", TOPLU_ATTR_STRING},
    {NULL, "mode", TOPLU_ATTR_STRING},         {NULL, "coordinate_transformation_mode", TOPLU_ATTR_STRING},
    {NULL, "nearest_mode", TOPLU_ATTR_STRING}, {NULL, "spatial", TOPLU_ATTR_INT},
    {NULL, "stash_type", TOPLU_ATTR_INT},      {"LRN", "size", TOPLU_ATTR_INT},
    {"LRN", "bias", TOPLU_ATTR_FLOAT},         {NULL, "noop_with_empty_axes", TOPLU_ATTR_INT},
    {NULL, "select_last_index", TOPLU_ATTR_INT}, {"LpPool", "p", TOPLU_ATTR_INT},
    {"GlobalLpPool", "p", TOPLU_ATTR_INT},
};

static const char *attr_type_name(toplu__attr_type_t t) {
  static const char *const names[] = {"UNDEFINED", "FLOAT", "INT", "STRING", "TENSOR", "GRAPH", "FLOATS",
                                      "INTS", "STRINGS", "TENSORS", "GRAPHS", "SPARSE_TENSOR",
                                      "SPARSE_TENSORS", "TYPE_PROTO", "TYPE_PROTOS"};
  return (unsigned)t < sizeof names / sizeof names[0] ? names[t] : "unknown";
}

toplu_status_t toplu__schema_check_attrs(const toplu__graph_t *g, const toplu__node_t *n, toplu_error_t *err) {
  if (n->domain[0]) return TOPLU_OK;
  for (int i = 0; i < n->n_attrs; i++) {
    const toplu__attr_t *a = &n->attrs[i];
    for (size_t k = 0; k < sizeof attr_types / sizeof attr_types[0]; k++) {
      if (strcmp(attr_types[k].name, a->name) || (attr_types[k].op && strcmp(attr_types[k].op, n->op_type))) continue;
      /* a FLOAT attribute written as INT is read as its value */
      if (a->type != attr_types[k].type && !(attr_types[k].type == TOPLU_ATTR_FLOAT && a->type == TOPLU_ATTR_INT)) {
        char what[400];
        return toplu__errorf(err, TOPLU_ERR_INVALID_MODEL, "%s: %s: attribute '%s' is %s, %s takes %s",
                            g && g->path ? g->path : "<model>", toplu__node_describe(g, n, what, sizeof what), a->name,
                            attr_type_name(a->type), n->op_type, attr_type_name(attr_types[k].type));
      }
      break;
    }
  }
  return TOPLU_OK;
}

toplu_status_t toplu__infer_error(toplu__infer_ctx_t *ctx, toplu_status_t st, const char *fmt, ...) {
  char msg[768], what[400];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  return toplu__errorf(ctx->err, st, "%s: %s: %s", ctx->graph && ctx->graph->path ? ctx->graph->path : "<model>",
                      toplu__node_describe(ctx->graph, ctx->node, what, sizeof what), msg);
}

int toplu__infer_has_input(const toplu__infer_ctx_t *ctx, int i) {
  return i < ctx->n_in && ctx->node->inputs[i] >= 0;
}

int64_t toplu__infer_new_dim(toplu__infer_ctx_t *ctx) {
  /* At plan time the graph is shared by concurrent planners and must not
   * change; an unknown dim there is reported by the inference pass. */
  if (ctx->concrete) return TOPLU_SYM(0);
  int s = ctx->graph ? toplu__graph_symbol(ctx->graph, NULL) : -1;
  return TOPLU_SYM(s < 0 ? 0 : s);
}

void toplu__infer_set(toplu__infer_ctx_t *ctx, int i, toplu_dtype_t dtype, int ndim, const int64_t *dims) {
  toplu_tensor_t *o = &ctx->out[i];
  o->dtype = dtype;
  o->ndim = ndim;
  for (int k = 0; k < ndim && k < TOPLU_MAX_DIMS; k++) o->dims[k] = dims[k];
}

void toplu__infer_same(toplu__infer_ctx_t *ctx, int i, int j) {
  toplu__infer_set(ctx, i, ctx->in[j].dtype, ctx->in[j].ndim, ctx->in[j].dims);
}

toplu_status_t toplu__infer_set_const(toplu__infer_ctx_t *ctx, int i, const void *src) {
  toplu_tensor_t *o = &ctx->out[i];
  if (i >= 8) return toplu__infer_error(ctx, TOPLU_ERR_INTERNAL, "constant output index %d out of range", i);
  for (int k = 0; k < o->ndim; k++)
    if (o->dims[k] < 0) return toplu__infer_error(ctx, TOPLU_ERR_INTERNAL, "constant output with a symbolic dim");
  size_t n = toplu_tensor_nbytes(o);
  /* a string constant owns its bytes: one block (core/strtensor.h) */
  void *d = o->dtype == TOPLU_DTYPE_STRING ? toplu__strings_clone(src, toplu_tensor_numel(o)) : malloc(n ? n : 1);
  if (!d) return toplu__infer_error(ctx, TOPLU_ERR_OUT_OF_MEMORY, "out of memory");
  if (n && o->dtype != TOPLU_DTYPE_STRING) memcpy(d, src, n);
  free(ctx->out_const[i]);
  ctx->out_const[i] = d;
  o->data = d;
  return TOPLU_OK;
}

toplu_status_t toplu__infer_broadcast(toplu__infer_ctx_t *ctx, const int *idx, int n, int *ndim, int64_t *dims) {
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
        return toplu__infer_error(ctx, TOPLU_ERR_SHAPE, "inputs %d %s and %d %s do not broadcast (dim %d: %lld vs %lld)",
                                 idx[0], toplu__graph_shape_format(ctx->graph, t0->ndim, t0->dims, sa, sizeof sa), idx[k],
                                 toplu__graph_shape_format(ctx->graph, t->ndim, t->dims, sb, sizeof sb), od, (long long)a,
                                 (long long)b);
      }
      /* One side symbolic: a symbol that is not 1 must equal the known side. */
      if (a < 0 && b >= 0) dims[od] = b;
      else if (a >= 0 && b < 0) dims[od] = a;
      else dims[od] = toplu__infer_new_dim(ctx);
    }
  }
  *ndim = r;
  return TOPLU_OK;
}

toplu_status_t toplu__infer_axis(toplu__infer_ctx_t *ctx, int64_t axis, int rank, const char *what, int *out) {
  int64_t a = axis < 0 ? axis + rank : axis;
  if (a < 0 || a >= (rank ? rank : 1))
    return toplu__infer_error(ctx, TOPLU_ERR_INVALID_MODEL, "%s %lld is out of range for rank %d", what,
                             (long long)axis, rank);
  *out = (int)a;
  return TOPLU_OK;
}

int64_t toplu__tensor_get_int(const toplu_tensor_t *t, int64_t k) {
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

double toplu__tensor_get_double(const toplu_tensor_t *t, int64_t k) {
  const void *p = t->data;
  switch (t->dtype) {
    case TOPLU_DTYPE_FLOAT: return ((const float *)p)[k];
    case TOPLU_DTYPE_DOUBLE: return ((const double *)p)[k];
    case TOPLU_DTYPE_FLOAT16: return toplu_half_to_float(((const uint16_t *)p)[k]);
    case TOPLU_DTYPE_BFLOAT16: return toplu_bfloat16_to_float(((const uint16_t *)p)[k]);
    case TOPLU_DTYPE_UINT64: return (double)((const uint64_t *)p)[k];
    default: return (double)toplu__tensor_get_int(t, k);
  }
}

/* ---- which ops combine rows of dim 0 (toplu__schema_t.mixes_rows) ---- */

static int rank0(const toplu__node_t *n, const toplu__value_table_t *t) {
  return n->n_inputs > 0 && n->inputs[0] >= 0 ? t->vals[n->inputs[0]].ndim : 0;
}

static int input_const(const toplu__node_t *n, const toplu__value_table_t *t, int i) {
  return n->n_inputs > i && n->inputs[i] >= 0 && t->vals[n->inputs[i]].data;
}

int toplu__rows_axis0(const toplu__node_t *n, const void *tv) {
  int64_t axis = toplu__node_attr_int(n, "axis", 0);
  if (axis < 0) axis += rank0(n, tv);
  return axis == 0;
}

int toplu__rows_softmax(const toplu__node_t *n, const void *tv) {
  int64_t axis = toplu__node_attr_int(n, "axis", n->opset >= 13 ? -1 : 1);
  if (axis < 0) axis += rank0(n, tv);
  return axis <= 0;
}

int toplu__rows_transpose(const toplu__node_t *n, const void *tv) {
  const int64_t *perm;
  int64_t np = toplu__node_attr_ints(n, "perm", &perm);
  return np > 0 ? perm[0] != 0 : rank0(n, tv) > 1;
}

int toplu__rows_gather(const toplu__node_t *n, const void *tv) {
  return toplu__rows_axis0(n, tv) && !input_const(n, tv, 0);
}

int toplu__rows_gemm(const toplu__node_t *n, const void *tv) {
  return toplu__node_attr_int(n, "transA", 0) != 0 && !input_const(n, tv, 0);
}

static int axes_hit_0(const toplu__node_t *n, const void *tv, int none) {
  const int64_t *axes;
  int64_t na = toplu__node_attr_ints(n, "axes", &axes);
  int r = rank0(n, tv);
  if (na <= 0 && input_const(n, tv, 1)) { /* axes as input 1 (Reduce* from opset 18, ReduceSum from 13): its values */
    const toplu_tensor_t *a = &((const toplu__value_table_t *)tv)->vals[n->inputs[1]];
    int64_t k = toplu_tensor_numel(a);
    if (a->dtype != TOPLU_DTYPE_INT64 || k < 1) return none; /* empty: all axes (or none with noop_with_empty_axes) */
    for (int64_t i = 0; i < k; i++) {
      int64_t ax = ((const int64_t *)a->data)[i];
      if (ax == 0 || ax == -r) return 1;
    }
    return 0;
  }
  if (na <= 0) return none;
  for (int64_t i = 0; i < na; i++)
    if (axes[i] == 0 || axes[i] == -r) return 1;
  return 0;
}

int toplu__rows_reduce(const toplu__node_t *n, const void *tv) { return axes_hit_0(n, tv, 1); }

int toplu__rows_training(const toplu__node_t *n, const void *tv) {
  (void)tv;
  return toplu__node_attr_int(n, "training_mode", 0) != 0;
}

int toplu__rows_last_axis(const toplu__node_t *n, const void *tv) {
  int64_t axis = toplu__node_attr_int(n, "axis", -1);
  if (axis < 0) axis += rank0(n, tv);
  return axis <= 0;
}

int toplu__rows_mvn(const toplu__node_t *n, const void *tv) { return axes_hit_0(n, tv, 1); }
