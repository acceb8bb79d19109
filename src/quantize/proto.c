/* quantize/proto.c - editing an unpacked ModelProto in place (see proto.h). */
#include "quantize/proto.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static char *dup(const char *s) {
  size_t n = strlen(s ? s : "");
  char *d = malloc(n + 1);
  if (d) memcpy(d, s ? s : "", n + 1);
  return d;
}

static int eq(const char *a, const char *b) { return a && b && !strcmp(a, b); }

int qp_init_find(const Onnx__GraphProto *g, const char *name) {
  for (size_t i = 0; i < g->n_initializer; i++)
    if (g->initializer[i] && eq(g->initializer[i]->name, name)) return (int)i;
  return -1;
}

int qp_producer(const Onnx__GraphProto *g, const char *name) {
  for (size_t i = 0; i < g->n_node; i++) {
    const Onnx__NodeProto *n = g->node[i];
    for (size_t k = 0; n && k < n->n_output; k++)
      if (eq(n->output[k], name)) return (int)i;
  }
  return -1;
}

int qp_readers(const Onnx__GraphProto *g, const char *name, int *only) {
  int count = 0, who = -1;
  for (size_t i = 0; i < g->n_node; i++) {
    const Onnx__NodeProto *n = g->node[i];
    for (size_t k = 0; n && k < n->n_input; k++)
      if (eq(n->input[k], name)) {
        count++;
        who = (int)i;
      }
  }
  int nodes = count;
  count += qp_is_graph_output(g, name);
  if (only) *only = nodes == 1 && count == 1 ? who : -1;
  return count;
}

int qp_is_graph_output(const Onnx__GraphProto *g, const char *name) {
  int c = 0;
  for (size_t i = 0; i < g->n_output; i++) c += eq(g->output[i]->name, name);
  return c;
}

int qp_is_graph_input(const Onnx__GraphProto *g, const char *name) {
  for (size_t i = 0; i < g->n_input; i++)
    if (eq(g->input[i]->name, name)) return 1;
  return 0;
}

int qp_name_used(const Onnx__GraphProto *g, const char *name) {
  return qp_init_find(g, name) >= 0 || qp_producer(g, name) >= 0 || qp_is_graph_input(g, name);
}

int qp_node_name_used(const Onnx__GraphProto *g, const char *name) {
  for (size_t i = 0; i < g->n_node; i++)
    if (g->node[i] && g->node[i]->name && eq(g->node[i]->name, name)) return 1; /* a slot may be empty mid-rewrite */
  return 0;
}

char *qp_unique(const Onnx__GraphProto *g, const char *base, const char *suffix) {
  size_t n = strlen(base) + strlen(suffix) + 24;
  char *s = malloc(n);
  if (!s) return NULL;
  snprintf(s, n, "%s%s", base, suffix);
  /* unused as a tensor name and as a node name (names made for new nodes: a node of the file already named
   * x_QuantizeLinear gave two nodes of one name, a model ONNX Runtime refuses; 2026-12-06) */
  for (int k = 1; qp_name_used(g, s) || qp_node_name_used(g, s); k++) snprintf(s, n, "%s%s_%d", base, suffix, k);
  return s;
}

Onnx__AttributeProto *qp_attr(const Onnx__NodeProto *n, const char *name) {
  for (size_t i = 0; i < n->n_attribute; i++)
    if (eq(n->attribute[i]->name, name)) return n->attribute[i];
  return NULL;
}

int64_t qp_attr_int(const Onnx__NodeProto *n, const char *name, int64_t dflt) {
  const Onnx__AttributeProto *a = qp_attr(n, name);
  return a && a->has_i ? a->i : dflt;
}

int qp_attr_remove(Onnx__NodeProto *n, const char *name) {
  for (size_t i = 0; i < n->n_attribute; i++)
    if (eq(n->attribute[i]->name, name)) {
      onnx__attribute_proto__free_unpacked(n->attribute[i], NULL);
      memmove(&n->attribute[i], &n->attribute[i + 1], (n->n_attribute - i - 1) * sizeof *n->attribute);
      n->n_attribute--;
      return 1;
    }
  return 0;
}

static Onnx__AttributeProto *attr_new(Onnx__NodeProto *n, const char *name) {
  qp_attr_remove(n, name);
  Onnx__AttributeProto *a = malloc(sizeof *a);
  Onnx__AttributeProto **na = realloc(n->attribute, (n->n_attribute + 1) * sizeof *na);
  if (na) n->attribute = na;
  if (!a || !na) {
    free(a);
    return NULL;
  }
  onnx__attribute_proto__init(a);
  if (!(a->name = dup(name))) {
    free(a);
    return NULL;
  }
  n->attribute[n->n_attribute++] = a;
  return a;
}

int qp_attr_set_int(Onnx__NodeProto *n, const char *name, int64_t v) {
  Onnx__AttributeProto *a = attr_new(n, name);
  if (!a) return -1;
  a->has_type = 1;
  a->type = ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__INT;
  a->has_i = 1;
  a->i = v;
  return 0;
}

int qp_attr_set_string(Onnx__NodeProto *n, const char *name, const char *s) {
  Onnx__AttributeProto *a = attr_new(n, name);
  if (!a) return -1;
  a->has_type = 1;
  a->type = ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__STRING;
  a->has_s = 1;
  a->s.len = strlen(s);
  if (!(a->s.data = malloc(a->s.len + 1))) return -1;
  memcpy(a->s.data, s, a->s.len + 1);
  return 0;
}

int qp_set_input(Onnx__NodeProto *n, int k, const char *name) {
  if ((size_t)k >= n->n_input) {
    char **ni = realloc(n->input, ((size_t)k + 1) * sizeof *ni);
    if (!ni) return -1;
    n->input = ni;
    while (n->n_input <= (size_t)k) {
      if (!(n->input[n->n_input] = dup(""))) return -1;
      n->n_input++;
    }
  }
  char *s = dup(name);
  if (!s) return -1;
  free(n->input[k]);
  n->input[k] = s;
  return 0;
}

Onnx__NodeProto *qp_node_new(const char *op_type, const char *name, int n_in, const char *const *in, const char *out) {
  Onnx__NodeProto *n = malloc(sizeof *n);
  if (!n) return NULL;
  onnx__node_proto__init(n);
  n->op_type = dup(op_type);
  n->name = dup(name);
  n->input = calloc((size_t)n_in + 1, sizeof *n->input);
  n->output = calloc(1, sizeof *n->output);
  int ok = n->op_type && n->name && n->input && n->output;
  for (int k = 0; ok && k < n_in; k++) {
    if (!(n->input[k] = dup(in[k]))) ok = 0;
    else n->n_input++;
  }
  if (ok && (n->output[0] = dup(out))) n->n_output = 1;
  else ok = 0;
  if (!ok) {
    onnx__node_proto__free_unpacked(n, NULL);
    return NULL;
  }
  return n;
}

int qp_node_append(Onnx__GraphProto *g, Onnx__NodeProto *node) {
  Onnx__NodeProto **nn = realloc(g->node, (g->n_node + 1) * sizeof *nn);
  if (!nn) return -1;
  g->node = nn;
  g->node[g->n_node++] = node;
  return 0;
}

void qp_node_remove(Onnx__GraphProto *g, int i) {
  if (!g->node[i]) return;
  onnx__node_proto__free_unpacked(g->node[i], NULL);
  g->node[i] = NULL;
}

static int set_dims(Onnx__TensorProto *t, int ndim, const int64_t *dims) {
  free(t->dims);
  t->dims = NULL;
  t->n_dims = 0;
  if (ndim > 0) {
    if (!(t->dims = malloc((size_t)ndim * sizeof *t->dims))) return -1;
    memcpy(t->dims, dims, (size_t)ndim * sizeof *t->dims);
  }
  t->n_dims = (size_t)ndim;
  return 0;
}

/* Clear every data field of t (protobuf-c frees what is not the default). */
static void clear_data(Onnx__TensorProto *t) {
  free(t->float_data);
  t->float_data = NULL;
  t->n_float_data = 0;
  free(t->int32_data);
  t->int32_data = NULL;
  t->n_int32_data = 0;
  free(t->int64_data);
  t->int64_data = NULL;
  t->n_int64_data = 0;
  free(t->double_data);
  t->double_data = NULL;
  t->n_double_data = 0;
  free(t->uint64_data);
  t->uint64_data = NULL;
  t->n_uint64_data = 0;
  if (t->has_raw_data) free(t->raw_data.data);
  t->raw_data.data = NULL;
  t->raw_data.len = 0;
  t->has_raw_data = 0;
}

static int set_raw(Onnx__TensorProto *t, toplu_dtype_t dtype, const void *data, size_t bytes) {
  clear_data(t);
  t->has_data_type = 1;
  t->data_type = (int32_t)dtype;
  t->has_raw_data = 1;
  t->raw_data.len = bytes;
  t->raw_data.data = malloc(bytes ? bytes : 1);
  if (!t->raw_data.data) return -1;
  if (bytes) memcpy(t->raw_data.data, data, bytes);
  return 0;
}

int qp_init_add(Onnx__GraphProto *g, const char *name, toplu_dtype_t dtype, int ndim, const int64_t *dims,
                const void *data, size_t bytes) {
  Onnx__TensorProto *t = malloc(sizeof *t);
  Onnx__TensorProto **ni = realloc(g->initializer, (g->n_initializer + 1) * sizeof *ni);
  if (ni) g->initializer = ni;
  if (!t || !ni) {
    free(t);
    return -1;
  }
  onnx__tensor_proto__init(t);
  if (!(t->name = dup(name)) || set_dims(t, ndim, dims) || set_raw(t, dtype, data, bytes)) {
    onnx__tensor_proto__free_unpacked(t, NULL);
    return -1;
  }
  g->initializer[g->n_initializer++] = t;
  return (int)g->n_initializer - 1;
}

int qp_init_set_float(Onnx__TensorProto *t, int ndim, const int64_t *dims, const float *data) {
  int64_t n = 1;
  for (int d = 0; d < ndim; d++) n *= dims[d];
  if (set_dims(t, ndim, dims)) return -1;
  return set_raw(t, TOPLU_DTYPE_FLOAT, data, (size_t)n * sizeof(float));
}

void qp_input_remove(Onnx__GraphProto *g, const char *name) {
  for (size_t k = 0; k < g->n_input; k++)
    if (eq(g->input[k]->name, name)) {
      onnx__value_info_proto__free_unpacked(g->input[k], NULL);
      memmove(&g->input[k], &g->input[k + 1], (g->n_input - k - 1) * sizeof *g->input);
      g->n_input--;
      return;
    }
}

void qp_init_remove(Onnx__GraphProto *g, int i) {
  if (i < 0 || !g->initializer[i]) return;
  /* files of IR version < 4 list initializers among the graph inputs too: that entry goes with it */
  qp_input_remove(g, g->initializer[i]->name);
  onnx__tensor_proto__free_unpacked(g->initializer[i], NULL);
  g->initializer[i] = NULL;
}

void qp_compact(Onnx__GraphProto *g) {
  size_t k = 0;
  for (size_t i = 0; i < g->n_node; i++)
    if (g->node[i]) g->node[k++] = g->node[i];
  g->n_node = k;
  k = 0;
  for (size_t i = 0; i < g->n_initializer; i++)
    if (g->initializer[i]) g->initializer[k++] = g->initializer[i];
  g->n_initializer = k;
}

int qp_output_add(Onnx__GraphProto *g, const char *name) {
  Onnx__ValueInfoProto *v = malloc(sizeof *v);
  Onnx__ValueInfoProto **no = realloc(g->output, (g->n_output + 1) * sizeof *no);
  if (no) g->output = no;
  if (!v || !no) {
    free(v);
    return -1;
  }
  onnx__value_info_proto__init(v);
  Onnx__TypeProto *tp = malloc(sizeof *tp);
  Onnx__TypeProto__Tensor *tt = malloc(sizeof *tt);
  if (!(v->name = dup(name)) || !tp || !tt) {
    free(v->name);
    free(v);
    free(tp);
    free(tt);
    return -1;
  }
  onnx__type_proto__init(tp);
  onnx__type_proto__tensor__init(tt);
  tt->has_elem_type = 1;
  tt->elem_type = ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT;
  tp->value_case = ONNX__TYPE_PROTO__VALUE_TENSOR_TYPE;
  tp->tensor_type = tt;
  v->type = tp;
  g->output[g->n_output++] = v;
  return 0;
}

void qp_outputs_truncate(Onnx__GraphProto *g, size_t keep) {
  for (size_t i = keep; i < g->n_output; i++) onnx__value_info_proto__free_unpacked(g->output[i], NULL);
  if (g->n_output > keep) g->n_output = keep;
}
