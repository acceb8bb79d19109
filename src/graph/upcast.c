/* graph/upcast.c - float16 and bfloat16 through the float32 kernels (see upcast.h). */
#include "graph/upcast.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "graph/schema.h"

/* Ops left in their half type: casts (their type is the point), shape queries (no arithmetic), control
 * flow and sequences (their subgraphs and items keep the types the file gives). */
static const char *const kKeep[] = {"Cast", "CastLike", "Shape", "Size", "If", "Loop", "Scan", "Identity",
                                    "SequenceConstruct", "SequenceInsert", "SequenceAt", "SequenceErase",
                                    "SequenceLength", "SequenceEmpty", "SplitToSequence", "ConcatFromSequence",
                                    "Optional", "OptionalGetElement", "OptionalHasElement", NULL};

static int half(toplu_dtype_t t) { return t == TOPLU_DTYPE_FLOAT16 || t == TOPLU_DTYPE_BFLOAT16; }

static int upcastable(const toplu__node_t *n) {
  if (n->dead || n->domain[0]) return 0;
  for (int k = 0; kKeep[k]; k++)
    if (!strcmp(n->op_type, kKeep[k])) return 0;
  return 1;
}

/* The node needs the rewrite: a float-only op with a half input or output. */
static int needs(const toplu__graph_t *g, const toplu__node_t *n) {
  if (!upcastable(n)) return 0;
  for (int j = 0; j < n->n_inputs; j++)
    if (n->inputs[j] >= 0 && g->values[n->inputs[j]].kind == TOPLU_KIND_TENSOR && half(g->values[n->inputs[j]].dtype))
      return 1;
  return 0;
}

static char *fmt_name(const char *a, const char *b, int j) {
  size_t len = strlen(a) + strlen(b) + 24;
  char *s = malloc(len);
  if (s) snprintf(s, len, "%s%s%d", a, b, j);
  return s;
}

/* A new float32 value copying v's shape ("<v>::f32"); -1 when out of memory. */
static int new_f32_value(toplu__graph_t *g, int v) {
  size_t len = strlen(g->values[v].name) + 8;
  char *name = malloc(len);
  if (!name) return -1;
  snprintf(name, len, "%s::f32", g->values[v].name);
  int nv = toplu__graph_find_value(g, name) < 0 ? toplu__graph_add_value(g, name) : toplu__graph_add_value(g, NULL);
  free(name);
  if (nv < 0) return -1;
  toplu__value_t *src = &g->values[v], *dst = &g->values[nv]; /* after the add: values may have moved */
  dst->dtype = TOPLU_DTYPE_FLOAT;
  dst->ndim = src->ndim;
  memcpy(dst->dims, src->dims, sizeof dst->dims);
  return nv;
}

/* A Cast node from -> to (dtype `to_type`), named "<base>::cast_<io><j>", into *slot. */
static toplu_status_t make_cast(toplu__graph_t *g, const toplu__node_t *at, const char *io, int j, int from, int to,
                                toplu_dtype_t to_type, toplu__node_t *slot, toplu_error_t *err) {
  memset(slot, 0, sizeof *slot);
  slot->name = fmt_name(at->name, io, j);
  slot->op_type = malloc(5);
  slot->domain = calloc(1, 1);
  slot->inputs = malloc(sizeof(int));
  slot->outputs = malloc(sizeof(int));
  slot->attrs = calloc(1, sizeof *slot->attrs);
  if (slot->attrs) slot->attrs[0].name = malloc(3);
  if (!slot->name || !slot->op_type || !slot->domain || !slot->inputs || !slot->outputs || !slot->attrs ||
      !slot->attrs[0].name) {
    free(slot->name), free(slot->op_type), free(slot->domain), free(slot->inputs), free(slot->outputs);
    if (slot->attrs) free(slot->attrs[0].name);
    free(slot->attrs);
    memset(slot, 0, sizeof *slot);
    return toplu__errorf(err, TOPLU_ERR_OUT_OF_MEMORY, "out of memory");
  }
  memcpy(slot->op_type, "Cast", 5);
  memcpy(slot->attrs[0].name, "to", 3);
  slot->attrs[0].type = TOPLU_ATTR_INT;
  slot->attrs[0].i = (int64_t)to_type; /* toplu's dtype numbers are ONNX's TensorProto.DataType */
  slot->n_attrs = 1;
  slot->n_inputs = slot->n_outputs = 1;
  slot->inputs[0] = from;
  slot->outputs[0] = to;
  slot->opset = g->opset >= 13 ? g->opset : 13;
  slot->schema = toplu__schema_find("", "Cast");
  slot->file_index = at->file_index;
  return TOPLU_OK;
}

/* Constant half tensor t as a new float32 constant value; -1 when out of memory. */
static int const_f32(toplu__graph_t *g, int v) {
  int nv = new_f32_value(g, v);
  if (nv < 0) return -1;
  const toplu_tensor_t *src = &g->values[v].konst;
  toplu_tensor_t t = {0};
  if (toplu_tensor_alloc(&t, TOPLU_DTYPE_FLOAT, src->ndim, src->dims) != TOPLU_OK) return -1;
  int64_t n = toplu_tensor_numel(src);
  const uint16_t *h = src->data;
  float *f = t.data;
  for (int64_t i = 0; i < n; i++)
    f[i] = src->dtype == TOPLU_DTYPE_FLOAT16 ? toplu_half_to_float(h[i]) : toplu_bfloat16_to_float(h[i]);
  g->values[nv].konst = t;
  g->values[nv].konst_shared = 0;
  return nv;
}

toplu_status_t toplu__graph_upcast_half(toplu__graph_t *g, toplu_error_t *err) {
  int extra = 0; /* new nodes at most: one Cast per half input and output of each such node */
  for (int i = 0; i < g->n_nodes; i++)
    if (needs(g, &g->nodes[i])) extra += g->nodes[i].n_inputs + g->nodes[i].n_outputs;
  if (!extra) return TOPLU_OK;
  int n_old = g->n_nodes, cap = n_old + extra + 1;
  toplu__node_t *nodes = calloc((size_t)cap, sizeof *nodes);
  /* per value: its float32 twin (a Cast of it, or the float32 output it was cast back from), or -1 */
  int vcap = g->n_values + 2 * extra + 1;
  int *twin = malloc((size_t)vcap * sizeof *twin);
  if (!nodes || !twin) {
    free(nodes);
    free(twin);
    return toplu__errorf(err, TOPLU_ERR_OUT_OF_MEMORY, "out of memory");
  }
  for (int v = 0; v < vcap; v++) twin[v] = -1;
  int nn = 0;
  toplu_status_t st = TOPLU_OK;
  for (int i = 0; i < n_old && !st; i++) {
    toplu__node_t n = g->nodes[i];
    if (!needs(g, &n)) {
      nodes[nn++] = n;
      continue;
    }
    for (int j = 0; j < n.n_inputs && !st; j++) {
      int v = n.inputs[j];
      if (v < 0 || g->values[v].kind != TOPLU_KIND_TENSOR || !half(g->values[v].dtype)) continue;
      if (twin[v] < 0) {
        if (g->values[v].konst.data) {
          twin[v] = const_f32(g, v);
        } else {
          int nv = new_f32_value(g, v);
          if (nv >= 0 && !(st = make_cast(g, &n, "::cast_in", j, v, nv, TOPLU_DTYPE_FLOAT, &nodes[nn], err))) nn++;
          twin[v] = nv;
        }
        if (twin[v] < 0 && !st) st = toplu__errorf(err, TOPLU_ERR_OUT_OF_MEMORY, "out of memory");
      }
      if (!st) n.inputs[j] = twin[v];
    }
    if (st) break;
    toplu__node_t *self = &nodes[nn++];
    *self = n;
    for (int j = 0; j < n.n_outputs && !st; j++) {
      int v = n.outputs[j];
      if (v < 0 || !half(g->values[v].dtype)) continue;
      int nv = new_f32_value(g, v);
      if (nv < 0) {
        st = toplu__errorf(err, TOPLU_ERR_OUT_OF_MEMORY, "out of memory");
        break;
      }
      self->outputs[j] = nv;
      if ((st = make_cast(g, &n, "::cast_out", j, nv, v, g->values[v].dtype, &nodes[nn], err))) break;
      nn++;
      twin[v] = nv; /* a later float-only reader of v reads nv itself */
    }
  }
  if (st) {
    /* the node structs moved into `nodes` still own their strings through g->nodes; free only the Casts */
    for (int k = 0; k < nn; k++) {
      int own = 1;
      for (int i = 0; i < n_old && own; i++) own = nodes[k].name != g->nodes[i].name;
      if (!own) continue;
      free(nodes[k].name), free(nodes[k].op_type), free(nodes[k].domain), free(nodes[k].inputs), free(nodes[k].outputs);
      if (nodes[k].attrs) free(nodes[k].attrs[0].name);
      free(nodes[k].attrs);
    }
    free(nodes);
    free(twin);
    return st;
  }
  free(g->nodes);
  g->nodes = nodes;
  g->n_nodes = nn;
  g->cap_nodes = cap;
  free(twin);
  toplu__graph_recount(g);
  /* a Cast back to half that no node reads (its reader takes the float32 value) and no graph output lists */
  int dropped = 0;
  for (int i = 0; i < g->n_nodes; i++) {
    toplu__node_t *n = &g->nodes[i];
    if (n->dead || strcmp(n->op_type, "Cast") || !strstr(n->name, "::cast_out")) continue;
    if (n->outputs[0] >= 0 && g->values[n->outputs[0]].n_uses == 0) n->dead = 1, dropped = 1;
  }
  if (dropped) toplu__graph_recount(g);
  return TOPLU_OK;
}
