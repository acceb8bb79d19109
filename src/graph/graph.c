/* graph/graph.c - building the IR from a decoded ONNX file; name table; accessors. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "core/hash.h"
#include "graph/control.h"
#include "graph/graph.h"
#include "graph/schema.h"
#include "graph/sequence.h"

static char *dupstr(const char *s) {
  size_t n = strlen(s);
  char *d = malloc(n + 1);
  if (d) memcpy(d, s, n + 1);
  return d;
}

static uint64_t hash_str(const char *s) { return toplu__fnv1a64_str(TOPLU__FNV1A64_INIT, s); }

static int table_insert(toplu__graph_t *g, int idx);

static int table_grow(toplu__graph_t *g) {
  size_t cap = g->name_table_cap ? g->name_table_cap * 2 : 256;
  int *t = malloc(cap * sizeof *t);
  if (!t) return -1;
  for (size_t i = 0; i < cap; i++) t[i] = -1;
  free(g->name_table);
  g->name_table = t;
  g->name_table_cap = cap;
  for (int i = 0; i < g->n_values; i++)
    if (table_insert(g, i)) return -1;
  return 0;
}

static int table_insert(toplu__graph_t *g, int idx) {
  size_t mask = g->name_table_cap - 1;
  size_t h = (size_t)hash_str(g->values[idx].name) & mask;
  while (g->name_table[h] >= 0) h = (h + 1) & mask;
  g->name_table[h] = idx;
  return 0;
}

int toplu__graph_find_value(const toplu__graph_t *g, const char *name) {
  if (!g->name_table_cap) return -1;
  size_t mask = g->name_table_cap - 1;
  size_t h = (size_t)hash_str(name) & mask;
  while (g->name_table[h] >= 0) {
    if (!strcmp(g->values[g->name_table[h]].name, name)) return g->name_table[h];
    h = (h + 1) & mask;
  }
  return -1;
}

int toplu__graph_add_value(toplu__graph_t *g, const char *name) {
  char gen[64];
  if (!name) {
    for (int k = g->n_values;; k++) {
      snprintf(gen, sizeof gen, "toplu::%d", k);
      if (toplu__graph_find_value(g, gen) < 0) break;
    }
    name = gen;
  }
  if (g->n_values == g->cap_values) {
    int cap = g->cap_values ? g->cap_values * 2 : 64;
    toplu__value_t *v = realloc(g->values, (size_t)cap * sizeof *v);
    if (!v) return -1;
    g->values = v;
    g->cap_values = cap;
  }
  if ((size_t)(g->n_values + 1) * 2 > g->name_table_cap && table_grow(g)) return -1;
  toplu__value_t *v = &g->values[g->n_values];
  memset(v, 0, sizeof *v);
  v->name = dupstr(name);
  if (!v->name) return -1;
  v->ndim = -1;
  v->producer = -1;
  v->graph_input = -1;
  v->seq_n = -1;
  int idx = g->n_values++;
  table_insert(g, idx);
  return idx;
}

int toplu__graph_symbol(toplu__graph_t *g, const char *name) {
  if (name)
    for (int i = 0; i < g->n_symbols; i++)
      if (!strcmp(g->symbols[i], name)) return i;
  char **s = realloc(g->symbols, (size_t)(g->n_symbols + 1) * sizeof *s);
  if (!s) return -1;
  g->symbols = s;
  char gen[32];
  if (!name) {
    snprintf(gen, sizeof gen, "?%d", g->n_symbols);
    name = gen;
  }
  if (!(g->symbols[g->n_symbols] = dupstr(name))) return -1;
  return g->n_symbols++;
}

const char *toplu__graph_symbol_name(const toplu__graph_t *g, int id) {
  if (id < 0 || id >= g->n_symbols) return "?";
  return g->symbols[id][0] == '?' ? "?" : g->symbols[id];
}

void toplu__graph_free(toplu__graph_t *g) {
  if (!g) return;
  for (int i = 0; i < g->n_values; i++) {
    free(g->values[i].name);
    free(g->values[i].seq_items);
    if (!g->values[i].konst_shared) free(g->values[i].konst.data);
  }
  free(g->values);
  for (int i = 0; i < g->n_nodes; i++) {
    toplu__node_t *n = &g->nodes[i];
    free(n->name);
    free(n->op_type);
    free(n->domain);
    free(n->inputs);
    free(n->outputs);
    free(n->fused_name);
    free(n->fused_nodes);
    if (!n->attrs_shared) {
      for (int j = 0; j < n->n_attrs; j++) toplu__attr_clear(&n->attrs[j]);
      free(n->attrs);
    }
  }
  free(g->nodes);
  free(g->inputs);
  free(g->outputs);
  for (int i = 0; i < g->n_symbols; i++) free(g->symbols[i]);
  free(g->symbols);
  free(g->name_table);
  free(g->path);
  free(g);
}

static char *dupstr_or_null(const char *s) { return s ? dupstr(s) : NULL; }

toplu__graph_t *toplu__graph_clone(const toplu__graph_t *g) {
  toplu__graph_t *c = calloc(1, sizeof *c);
  if (!c) return NULL;
  c->opset = g->opset;
  c->path = dupstr(g->path);
  c->inputs = malloc(((size_t)g->n_inputs + 1) * sizeof(int));
  c->outputs = malloc(((size_t)g->n_outputs + 1) * sizeof(int));
  c->symbols = calloc((size_t)g->n_symbols + 1, sizeof(char *));
  c->nodes = calloc((size_t)g->n_nodes + 1, sizeof *c->nodes);
  if (!c->path || !c->inputs || !c->outputs || !c->symbols || !c->nodes) goto fail;
  c->cap_nodes = g->n_nodes + 1;
  memcpy(c->inputs, g->inputs, (size_t)g->n_inputs * sizeof(int));
  memcpy(c->outputs, g->outputs, (size_t)g->n_outputs * sizeof(int));
  c->n_inputs = g->n_inputs;
  c->n_outputs = g->n_outputs;
  for (int i = 0; i < g->n_symbols; i++, c->n_symbols++)
    if (!(c->symbols[i] = dupstr(g->symbols[i]))) goto fail;
  for (int i = 0; i < g->n_values; i++) {
    int v = toplu__graph_add_value(c, g->values[i].name);
    if (v != i) goto fail;
    char *name = c->values[v].name;
    c->values[v] = g->values[i];
    c->values[v].name = name;
    c->values[v].konst_shared = c->values[v].konst.data != NULL;
    c->values[v].seq_n = -1; /* lists are made at plan time, in the copy */
    c->values[v].seq_items = NULL;
  }
  for (int i = 0; i < g->n_nodes; i++) {
    const toplu__node_t *n = &g->nodes[i];
    toplu__node_t *d = &c->nodes[i];
    *d = *n;
    d->name = dupstr(n->name);
    d->op_type = dupstr(n->op_type);
    d->domain = dupstr(n->domain);
    d->fused_name = dupstr_or_null(n->fused_name);
    d->fused_nodes = dupstr_or_null(n->fused_nodes);
    d->inputs = malloc(((size_t)n->n_inputs + 1) * sizeof(int));
    d->outputs = malloc(((size_t)n->n_outputs + 1) * sizeof(int));
    d->attrs_shared = 1;
    c->n_nodes++;
    if (!d->name || !d->op_type || !d->domain || !d->inputs || !d->outputs || (n->fused_name && !d->fused_name) ||
        (n->fused_nodes && !d->fused_nodes))
      goto fail;
    memcpy(d->inputs, n->inputs, (size_t)n->n_inputs * sizeof(int));
    memcpy(d->outputs, n->outputs, (size_t)n->n_outputs * sizeof(int));
  }
  return c;
fail:
  toplu__graph_free(c);
  return NULL;
}

int toplu__graph_has_control(const toplu__graph_t *g) {
  for (int i = 0; i < g->n_nodes; i++) {
    const toplu__node_t *n = &g->nodes[i];
    if (!n->dead && (toplu__control_is(n) || toplu__seq_op(n->domain, n->op_type))) return 1;
  }
  return toplu__graph_has_lists(g);
}

int toplu__graph_has_lists(const toplu__graph_t *g) {
  for (int i = 0; i < g->n_inputs; i++)
    if (g->values[g->inputs[i]].kind != TOPLU_KIND_TENSOR) return 1;
  for (int i = 0; i < g->n_outputs; i++)
    if (g->values[g->outputs[i]].kind != TOPLU_KIND_TENSOR) return 1;
  return 0;
}

void toplu__graph_recount(toplu__graph_t *g) {
  for (int i = 0; i < g->n_values; i++) {
    g->values[i].n_uses = 0;
    if (!g->values[i].konst.data && g->values[i].graph_input < 0) g->values[i].producer = -1;
  }
  for (int i = 0; i < g->n_nodes; i++) {
    const toplu__node_t *n = &g->nodes[i];
    if (n->dead) continue;
    for (int j = 0; j < n->n_inputs; j++)
      if (n->inputs[j] >= 0) g->values[n->inputs[j]].n_uses++;
    for (int j = 0; j < n->n_outputs; j++)
      if (n->outputs[j] >= 0) g->values[n->outputs[j]].producer = i;
  }
  for (int i = 0; i < g->n_outputs; i++) g->values[g->outputs[i]].n_uses++;
}

char *toplu__graph_shape_format(const toplu__graph_t *g, int ndim, const int64_t *dims, char *buf, size_t size) {
  size_t pos = 0;
  if (!size) return buf;
  buf[0] = '\0';
  pos += (size_t)snprintf(buf, size, "[");
  for (int i = 0; i < ndim && pos < size; i++) {
    const char *sep = i ? ", " : "";
    if (dims[i] >= 0)
      pos += (size_t)snprintf(buf + pos, size - pos, "%s%lld", sep, (long long)dims[i]);
    else
      pos += (size_t)snprintf(buf + pos, size - pos, "%s%s", sep,
                              g ? toplu__graph_symbol_name(g, TOPLU_SYM_ID(dims[i])) : "?");
  }
  if (pos < size) snprintf(buf + pos, size - pos, "]");
  return buf;
}

const char *toplu__node_describe(const toplu__graph_t *g, const toplu__node_t *n, char *buf, size_t size) {
  /* nodes outside the graph's array (the planner's reorder pseudo-node) have no index */
  int in_graph = g && g->nodes && n >= g->nodes && n < g->nodes + g->n_nodes;
  if (in_graph)
    snprintf(buf, size, "node %d '%s' (%s%s%s)", n->file_index, n->name, n->domain[0] ? n->domain : "",
             n->domain[0] ? "." : "", n->op_type);
  else
    snprintf(buf, size, "'%s' (%s%s%s)", n->name, n->domain[0] ? n->domain : "", n->domain[0] ? "." : "", n->op_type);
  return buf;
}

const toplu__attr_t *toplu__node_attr(const toplu__node_t *n, const char *name) {
  return toplu__attr_find(n->attrs, n->n_attrs, name);
}

int64_t toplu__node_attr_int(const toplu__node_t *n, const char *name, int64_t dflt) {
  const toplu__attr_t *a = toplu__node_attr(n, name);
  return a && a->type == TOPLU_ATTR_INT ? a->i : dflt;
}

float toplu__node_attr_float(const toplu__node_t *n, const char *name, float dflt) {
  const toplu__attr_t *a = toplu__node_attr(n, name);
  if (a && a->type == TOPLU_ATTR_FLOAT) return a->f;
  if (a && a->type == TOPLU_ATTR_INT) return (float)a->i;
  return dflt;
}

const char *toplu__node_attr_string(const toplu__node_t *n, const char *name, const char *dflt) {
  const toplu__attr_t *a = toplu__node_attr(n, name);
  return a && a->type == TOPLU_ATTR_STRING ? a->s : dflt;
}

int64_t toplu__node_attr_ints(const toplu__node_t *n, const char *name, const int64_t **vals) {
  const toplu__attr_t *a = toplu__node_attr(n, name);
  if (!a || a->type != TOPLU_ATTR_INTS) {
    if (vals) *vals = NULL;
    return -1;
  }
  if (vals) *vals = a->ints;
  return a->n;
}

int toplu__node_attr_ints_n(const toplu__node_t *n, const char *name, int count, int64_t dflt, int64_t *out,
                           int64_t *found) {
  const int64_t *v;
  int64_t cnt = toplu__node_attr_ints(n, name, &v);
  if (found) *found = cnt;
  if (cnt < 0) {
    for (int i = 0; i < count; i++) out[i] = dflt;
    return 1;
  }
  if (cnt != count) return 0;
  for (int i = 0; i < count; i++) out[i] = v[i];
  return 1;
}

int64_t toplu__node_attr_floats(const toplu__node_t *n, const char *name, const float **vals) {
  const toplu__attr_t *a = toplu__node_attr(n, name);
  if (!a || a->type != TOPLU_ATTR_FLOATS) {
    if (vals) *vals = NULL;
    return -1;
  }
  if (vals) *vals = a->floats;
  return a->n;
}

/* ---- building ---- */

static int64_t opset_of(const toplu__onnx_model_t *om, const char *domain) {
  int dflt = !*domain || !strcmp(domain, "ai.onnx");
  for (int i = 0; i < om->n_opsets; i++) {
    const char *d = om->opsets[i].domain;
    if (dflt ? (!*d || !strcmp(d, "ai.onnx")) : !strcmp(d, domain)) return om->opsets[i].version;
  }
  return -1;
}

static void set_declared(toplu__graph_t *g, toplu__value_t *v, const toplu__onnx_value_info_t *vi) {
  if (vi->kind != TOPLU_KIND_TENSOR) return; /* set_kind */
  if (vi->dtype != TOPLU_DTYPE_UNDEFINED) v->dtype = vi->dtype;
  if (vi->ndim >= 0) {
    v->ndim = vi->ndim;
    for (int i = 0; i < vi->ndim; i++) {
      if (vi->dims[i].value >= 0) v->dims[i] = vi->dims[i].value;
      else {
        int s = toplu__graph_symbol(g, vi->dims[i].param);
        v->dims[i] = TOPLU_SYM(s < 0 ? 0 : s);
      }
    }
  }
}

/* A graph input's or output's kind (sequence, optional) as declared; such a
 * value has no tensor type of its own until a plan lowers it. */
static void set_kind(toplu__value_t *v, const toplu__onnx_value_info_t *vi) {
  v->kind = (toplu_kind_t)vi->kind;
  v->elem_kind = (toplu_kind_t)vi->elem_kind;
  v->elem_dtype = vi->dtype;
  if (vi->kind == TOPLU_KIND_TENSOR) return;
  v->dtype = TOPLU_DTYPE_UNDEFINED;
  v->ndim = -1;
}

toplu_status_t toplu__graph_build(toplu__onnx_model_t *om, toplu__graph_t **out, toplu_error_t *err) {
  *out = NULL;
  const char *path = om->path ? om->path : "<model>";
  toplu_status_t st = TOPLU_OK;
  char what[600];
  toplu__graph_t *g = calloc(1, sizeof *g);
  if (!g) return toplu__errorf(err, TOPLU_ERR_OUT_OF_MEMORY, "%s: out of memory", path);
#define OOM_FAIL()                                                                   \
  do {                                                                               \
    st = toplu__errorf(err, TOPLU_ERR_OUT_OF_MEMORY, "%s: out of memory", path);      \
    goto fail;                                                                       \
  } while (0)
  if (!(g->path = dupstr(path))) OOM_FAIL();
  g->opset = opset_of(om, "");
  if (g->opset < 0) {
    /* Very old files (IR 1-2) may lack opset_import; ONNX treats that as opset 1. */
    g->opset = om->n_opsets ? -1 : 1;
  }
  if (g->opset > TOPLU_MAX_OPSET) {
    st = toplu__errorf(err, TOPLU_ERR_UNSUPPORTED,
                      "%s: opset %lld of the ONNX domain is newer than toplu knows (up to %d): its ops may mean "
                      "something toplu does not implement",
                      path, (long long)g->opset, TOPLU_MAX_OPSET);
    goto fail;
  }

  /* Initializers become constants; their data moves into the graph. */
  for (int i = 0; i < om->n_initializers; i++) {
    toplu__onnx_initializer_t *in = &om->initializers[i];
    if (toplu__graph_find_value(g, in->name) >= 0) {
      st = toplu__errorf(err, TOPLU_ERR_INVALID_MODEL, "%s: initializer '%s' appears twice", path, in->name);
      goto fail;
    }
    int v = toplu__graph_add_value(g, in->name);
    if (v < 0) OOM_FAIL();
    g->values[v].konst = in->t;
    g->values[v].dtype = in->t.dtype;
    g->values[v].ndim = in->t.ndim;
    memcpy(g->values[v].dims, in->t.dims, sizeof in->t.dims);
    in->t.data = NULL;
  }
  /* Graph inputs (those that are initializers too stay constants). */
  g->inputs = calloc((size_t)om->n_inputs + 1, sizeof(int));
  g->outputs = calloc((size_t)om->n_outputs + 1, sizeof(int));
  if (!g->inputs || !g->outputs) OOM_FAIL();
  for (int i = 0; i < om->n_inputs; i++) {
    const toplu__onnx_value_info_t *vi = &om->inputs[i];
    int v = toplu__graph_find_value(g, vi->name);
    if (v >= 0) {
      if (g->values[v].konst.data) continue; /* IR < 4: initializer listed as input */
      st = toplu__errorf(err, TOPLU_ERR_INVALID_MODEL, "%s: graph input '%s' is listed twice", path, vi->name);
      goto fail;
    }
    if (vi->kind < 0) {
      st = toplu__errorf(err, TOPLU_ERR_UNSUPPORTED,
                        "%s: graph input '%s' is neither a tensor nor a sequence or optional of tensors (a map, a "
                        "sparse tensor or a nested sequence)", path, vi->name);
      goto fail;
    }
    if (vi->dtype == TOPLU_DTYPE_UNDEFINED) { /* STRING inputs are arrays of char * (toplu/tensor.h) */
      st = toplu__errorf(err, TOPLU_ERR_INVALID_MODEL, "%s: graph input '%s' has no element type", path, vi->name);
      goto fail;
    }
    if (!*vi->name) {
      st = toplu__errorf(err, TOPLU_ERR_INVALID_MODEL, "%s: graph input %d has no name", path, i);
      goto fail;
    }
    if ((v = toplu__graph_add_value(g, vi->name)) < 0) OOM_FAIL();
    set_declared(g, &g->values[v], vi);
    set_kind(&g->values[v], vi);
    g->values[v].graph_input = g->n_inputs;
    g->inputs[g->n_inputs++] = v;
  }

  /* Nodes: outputs first become values (one producer each). */
  g->nodes = calloc((size_t)om->n_nodes + 1, sizeof *g->nodes);
  if (!g->nodes) OOM_FAIL();
  g->cap_nodes = om->n_nodes + 1;
  int *order = NULL, *indeg = NULL, *queue = NULL;
  toplu__node_t *tmp = calloc((size_t)om->n_nodes + 1, sizeof *tmp);
  if (!tmp) OOM_FAIL();
  for (int i = 0; i < om->n_nodes; i++) {
    toplu__onnx_node_t *on = &om->nodes[i];
    toplu__node_t *n = &tmp[i];
    if (on->name[0]) n->name = dupstr(on->name);
    else {
      char gen[300];
      snprintf(gen, sizeof gen, "%s_%d", on->op_type, i);
      n->name = dupstr(gen);
    }
    n->op_type = dupstr(on->op_type);
    n->domain = dupstr(!strcmp(on->domain, "ai.onnx") ? "" : on->domain);
    n->inputs = malloc(((size_t)on->n_inputs + 1) * sizeof(int));
    n->outputs = malloc(((size_t)on->n_outputs + 1) * sizeof(int));
    if (!n->name || !n->op_type || !n->domain || !n->inputs || !n->outputs) {
      g->n_nodes = 0;
      for (int k = 0; k <= i; k++) {
        free(tmp[k].name); free(tmp[k].op_type); free(tmp[k].domain); free(tmp[k].inputs); free(tmp[k].outputs);
      }
      free(tmp);
      OOM_FAIL();
    }
    n->file_index = i;
    n->n_inputs = on->n_inputs;
    n->n_outputs = on->n_outputs;
    n->attrs = on->attrs; /* take over */
    n->n_attrs = on->n_attrs;
    on->attrs = NULL;
    on->n_attrs = 0;
  }
  /* From here, tmp's nodes are freed with the graph if we fail: move them in now. */
  memcpy(g->nodes, tmp, (size_t)om->n_nodes * sizeof *tmp);
  g->n_nodes = om->n_nodes;
  free(tmp);
  for (int i = 0; i < g->n_nodes; i++) {
    toplu__onnx_node_t *on = &om->nodes[i];
    toplu__node_t *n = &g->nodes[i];
    for (int j = 0; j < on->n_outputs; j++) {
      const char *name = on->outputs[j];
      if (!*name) {
        n->outputs[j] = -1;
        continue;
      }
      int v = toplu__graph_find_value(g, name);
      if (v >= 0) {
        st = toplu__errorf(err, TOPLU_ERR_INVALID_MODEL, "%s: %s: output '%s' is already %s", path,
                          toplu__node_describe(NULL, n, what, sizeof what), name,
                          g->values[v].konst.data ? "an initializer"
                          : g->values[v].graph_input >= 0 ? "a graph input" : "produced by another node");
        goto fail;
      }
      if ((v = toplu__graph_add_value(g, name)) < 0) OOM_FAIL();
      g->values[v].producer = i;
      n->outputs[j] = v;
    }
  }
  for (int i = 0; i < g->n_nodes; i++) {
    toplu__onnx_node_t *on = &om->nodes[i];
    toplu__node_t *n = &g->nodes[i];
    for (int j = 0; j < on->n_inputs; j++) {
      const char *name = on->inputs[j];
      if (!*name) {
        n->inputs[j] = -1;
        continue;
      }
      int v = toplu__graph_find_value(g, name);
      if (v < 0) {
        snprintf(what, sizeof what, "%s", n->name);
        st = toplu__errorf(err, TOPLU_ERR_INVALID_MODEL,
                          "%s: node %d '%s' (%s): input %d '%s' is not produced by any node, initializer or graph input",
                          path, i, n->name, n->op_type, j, name);
        goto fail;
      }
      n->inputs[j] = v;
    }
  }
  /* Outer-scope values read by subgraphs (If, Loop, Scan) become implicit inputs (graph/control.h). */
  for (int i = 0; i < g->n_nodes; i++) {
    toplu__node_t *n = &g->nodes[i];
    const char **fnames = NULL;
    int nf = 0;
    if (!toplu__control_op(n->domain, n->op_type)) continue;
    if (toplu__control_free_names(n->attrs, n->n_attrs, &fnames, &nf)) OOM_FAIL();
    if (!nf) {
      free(fnames);
      continue;
    }
    int *ins = realloc(n->inputs, ((size_t)n->n_inputs + (size_t)nf + 1) * sizeof(int));
    if (!ins) {
      free(fnames);
      OOM_FAIL();
    }
    n->inputs = ins;
    for (int k = 0; k < nf; k++) {
      int v = toplu__graph_find_value(g, fnames[k]);
      if (v < 0) {
        st = toplu__errorf(err, TOPLU_ERR_INVALID_MODEL,
                          "%s: node %d '%s' (%s): its subgraph reads '%s', which no node, initializer or graph input produces",
                          path, i, n->name, n->op_type, fnames[k]);
        free(fnames);
        goto fail;
      }
      ins[n->n_inputs + k] = v;
    }
    n->n_inputs += nf;
    n->n_implicit = nf;
    free(fnames);
  }
  for (int i = 0; i < om->n_outputs; i++) {
    const toplu__onnx_value_info_t *vi = &om->outputs[i];
    int v = toplu__graph_find_value(g, vi->name);
    if (v < 0) {
      st = toplu__errorf(err, TOPLU_ERR_INVALID_MODEL, "%s: graph output '%s' is not produced by any node", path,
                        vi->name);
      goto fail;
    }
    if (vi->kind < 0) {
      st = toplu__errorf(err, TOPLU_ERR_UNSUPPORTED,
                        "%s: graph output '%s' is neither a tensor nor a sequence or optional of tensors", path,
                        vi->name);
      goto fail;
    }
    set_kind(&g->values[v], vi);
    g->values[v].graph_output = 1;
    g->outputs[g->n_outputs++] = v;
  }
  if (g->n_outputs == 0) {
    st = toplu__errorf(err, TOPLU_ERR_INVALID_MODEL, "%s: the graph has no outputs", path);
    goto fail;
  }
  /* Declared types of outputs and intermediate values are hints merged by inference. */

  /* Topological sort (Kahn). */
  {
    int nn = g->n_nodes;
    order = malloc(((size_t)nn + 1) * sizeof(int));
    indeg = calloc((size_t)nn + 1, sizeof(int));
    queue = malloc(((size_t)nn + 1) * sizeof(int));
    if (!order || !indeg || !queue) {
      free(order); free(indeg); free(queue);
      OOM_FAIL();
    }
    for (int i = 0; i < nn; i++)
      for (int j = 0; j < g->nodes[i].n_inputs; j++) {
        int v = g->nodes[i].inputs[j];
        if (v >= 0 && g->values[v].producer >= 0) indeg[i]++;
      }
    /* consumers lists via counting */
    int *cstart = calloc((size_t)g->n_values + 1, sizeof(int));
    int total = 0;
    for (int i = 0; i < nn; i++) total += g->nodes[i].n_inputs;
    int *clist = malloc(((size_t)total + 1) * sizeof(int));
    if (!cstart || !clist) {
      free(cstart); free(clist); free(order); free(indeg); free(queue);
      OOM_FAIL();
    }
    for (int i = 0; i < nn; i++)
      for (int j = 0; j < g->nodes[i].n_inputs; j++)
        if (g->nodes[i].inputs[j] >= 0) cstart[g->nodes[i].inputs[j] + 1]++;
    for (int v = 0; v < g->n_values; v++) cstart[v + 1] += cstart[v];
    int *fill = calloc((size_t)g->n_values + 1, sizeof(int));
    if (!fill) {
      free(cstart); free(clist); free(order); free(indeg); free(queue);
      OOM_FAIL();
    }
    for (int i = 0; i < nn; i++)
      for (int j = 0; j < g->nodes[i].n_inputs; j++) {
        int v = g->nodes[i].inputs[j];
        if (v >= 0) clist[cstart[v] + fill[v]++] = i;
      }
    int head = 0, tail = 0, count = 0;
    for (int i = 0; i < nn; i++)
      if (!indeg[i]) queue[tail++] = i;
    while (head < tail) {
      int i = queue[head++];
      order[count++] = i;
      for (int j = 0; j < g->nodes[i].n_outputs; j++) {
        int v = g->nodes[i].outputs[j];
        if (v < 0) continue;
        for (int k = cstart[v]; k < cstart[v + 1]; k++)
          if (--indeg[clist[k]] == 0) queue[tail++] = clist[k];
      }
    }
    free(cstart);
    free(clist);
    free(fill);
    if (count != nn) {
      int bad = -1;
      for (int i = 0; i < nn; i++)
        if (indeg[i]) { bad = i; break; }
      st = toplu__errorf(err, TOPLU_ERR_INVALID_MODEL, "%s: the graph has a cycle through node %d '%s' (%s)", path, bad,
                        g->nodes[bad].name, g->nodes[bad].op_type);
      free(order); free(indeg); free(queue);
      goto fail;
    }
    toplu__node_t *sorted = malloc(((size_t)nn + 1) * sizeof *sorted);
    if (!sorted) {
      free(order); free(indeg); free(queue);
      OOM_FAIL();
    }
    for (int i = 0; i < nn; i++) sorted[i] = g->nodes[order[i]];
    free(g->nodes);
    g->nodes = sorted;
    g->cap_nodes = nn + 1;
    free(order); free(indeg); free(queue);
  }

  /* Schemas and opsets. */
  for (int i = 0; i < g->n_nodes; i++) {
    toplu__node_t *n = &g->nodes[i];
    n->opset = opset_of(om, n->domain);
    if (n->opset < 0 && !n->domain[0]) n->opset = g->opset;
    if (n->opset < 0) {
      st = toplu__errorf(err, TOPLU_ERR_INVALID_MODEL, "%s: %s: domain '%s' is not in the model's opset_import", path,
                        toplu__node_describe(g, n, what, sizeof what), n->domain);
      goto fail;
    }
    n->schema = toplu__schema_find(n->domain, n->op_type);
    if (!n->schema) {
      st = toplu__errorf(err, TOPLU_ERR_UNSUPPORTED, "%s: %s: op '%s%s%s' is not supported by toplu", path,
                        toplu__node_describe(g, n, what, sizeof what), n->domain, n->domain[0] ? "." : "", n->op_type);
      goto fail;
    }
    if (n->opset < n->schema->since_version && n->opset != 0) {
      st = toplu__errorf(err, TOPLU_ERR_UNSUPPORTED, "%s: %s: opset %lld is older than the oldest toplu supports for %s (%d)",
                        path, toplu__node_describe(g, n, what, sizeof what), (long long)n->opset, n->op_type,
                        n->schema->since_version);
      goto fail;
    }
    if ((st = toplu__schema_check_attrs(g, n, err))) goto fail;
    if (toplu__control_is(n) && (st = toplu__control_check_ops(g, n, err))) goto fail;
    const toplu__schema_t *s = n->schema;
    int n_in = n->n_inputs - n->n_implicit;
    while (n_in > 0 && n->inputs[n_in - 1] < 0) n_in--;
    if (n_in < s->min_inputs || n->n_inputs - n->n_implicit > s->max_inputs || n->n_outputs < s->min_outputs ||
        n->n_outputs > s->max_outputs) {
      st = toplu__errorf(err, TOPLU_ERR_INVALID_MODEL, "%s: %s: has %d inputs and %d outputs; %s takes %d to %d inputs and %d to %d outputs",
                        path, toplu__node_describe(g, n, what, sizeof what), n->n_inputs - n->n_implicit, n->n_outputs, n->op_type,
                        s->min_inputs, s->max_inputs, s->min_outputs, s->max_outputs);
      goto fail;
    }
    for (int j = 0; j < s->min_inputs && j < n->n_inputs; j++)
      if (n->inputs[j] < 0) {
        st = toplu__errorf(err, TOPLU_ERR_INVALID_MODEL, "%s: %s: required input %d is empty", path,
                          toplu__node_describe(g, n, what, sizeof what), j);
        goto fail;
      }
    /* ONNX lists required outputs before optional ones, and a schema's
     * min_outputs counts the required: only those after it may be omitted
     * (an empty name); a kernel never gets a required output without a
     * buffer. */
    for (int j = 0; j < s->min_outputs && j < n->n_outputs; j++)
      if (n->outputs[j] < 0) {
        st = toplu__errorf(err, TOPLU_ERR_INVALID_MODEL, "%s: %s: required output %d is omitted (an empty name)", path,
                          toplu__node_describe(g, n, what, sizeof what), j);
        goto fail;
      }
  }
  /* Declared value_info and output types as hints. */
  for (int i = 0; i < om->n_outputs; i++) {
    int v = toplu__graph_find_value(g, om->outputs[i].name);
    if (v >= 0 && !g->values[v].konst.data) set_declared(g, &g->values[v], &om->outputs[i]);
  }
  toplu__graph_recount(g);
  *out = g;
  return TOPLU_OK;
fail:
  toplu__graph_free(g);
  return st;
#undef OOM_FAIL
}
