/* graph/control.c - If, Loop and Scan by inlining their subgraphs (graph/control.h). */
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "graph/control.h"
#include "graph/expand.h"
#include "graph/sequence.h"
#include "graph/schema.h"

int toplu__control_op(const char *domain, const char *op_type) {
  return (!domain[0] || !strcmp(domain, "ai.onnx")) &&
         (!strcmp(op_type, "If") || !strcmp(op_type, "Loop") || !strcmp(op_type, "Scan") ||
          !strcmp(op_type, "SequenceMap"));
}

/* ---- name lists (small; linear search) ---- */

typedef struct names {
  const char **v;
  int *val; /* scopes: the value each name resolves to */
  int n, cap;
} names_t;

static int names_find(const names_t *l, const char *s) {
  for (int i = l->n - 1; i >= 0; i--) /* latest first: a local name wins over an outer one */
    if (!strcmp(l->v[i], s)) return i;
  return -1;
}

static int names_push(names_t *l, const char *s, int val) {
  if (l->n == l->cap) {
    int cap = l->cap ? l->cap * 2 : 32;
    const char **v = realloc(l->v, (size_t)cap * sizeof *v);
    if (!v) return -1;
    l->v = v;
    int *x = realloc(l->val, (size_t)cap * sizeof *x);
    if (!x) return -1;
    l->val = x;
    l->cap = cap;
  }
  l->v[l->n] = s;
  l->val[l->n++] = val;
  return 0;
}

static int names_add(names_t *l, const char *s) { return names_find(l, s) >= 0 ? 0 : names_push(l, s, -1); }

static void names_free(names_t *l) {
  free(l->v);
  free(l->val);
  memset(l, 0, sizeof *l);
}

static int subgraph_free_names(const toplu__onnx_model_t *sg, names_t *out) {
  names_t def = {0};
  int rc = 0;
  for (int i = 0; i < sg->n_inputs && !rc; i++) rc = names_add(&def, sg->inputs[i].name);
  for (int i = 0; i < sg->n_initializers && !rc; i++) rc = names_add(&def, sg->initializers[i].name);
  for (int i = 0; i < sg->n_nodes && !rc; i++)
    for (int j = 0; j < sg->nodes[i].n_outputs && !rc; j++)
      if (sg->nodes[i].outputs[j][0]) rc = names_add(&def, sg->nodes[i].outputs[j]);
  for (int i = 0; i < sg->n_nodes && !rc; i++) {
    const toplu__onnx_node_t *n = &sg->nodes[i];
    for (int j = 0; j < n->n_inputs && !rc; j++)
      if (n->inputs[j][0] && names_find(&def, n->inputs[j]) < 0) rc = names_add(out, n->inputs[j]);
    for (int a = 0; a < n->n_attrs && !rc; a++) {
      if (!n->attrs[a].g || !toplu__control_op(n->domain, n->op_type)) continue;
      names_t inner = {0};
      rc = subgraph_free_names(n->attrs[a].g, &inner);
      for (int k = 0; k < inner.n && !rc; k++)
        if (names_find(&def, inner.v[k]) < 0) rc = names_add(out, inner.v[k]);
      names_free(&inner);
    }
  }
  for (int i = 0; i < sg->n_outputs && !rc; i++)
    if (names_find(&def, sg->outputs[i].name) < 0) rc = names_add(out, sg->outputs[i].name);
  names_free(&def);
  return rc;
}

int toplu__control_free_names(const toplu__attr_t *attrs, int n_attrs, const char ***names, int *n) {
  names_t l = {0};
  *names = NULL;
  *n = 0;
  for (int a = 0; a < n_attrs; a++)
    if (attrs[a].g && subgraph_free_names(attrs[a].g, &l)) {
      names_free(&l);
      return -1;
    }
  free(l.val);
  *names = l.v;
  *n = l.n;
  return 0;
}

int toplu__control_is(const toplu__node_t *n) { return toplu__control_op(n->domain, n->op_type); }

static toplu_status_t check_ops(const toplu__graph_t *g, const toplu__node_t *owner, const toplu__onnx_model_t *sg,
                                toplu_error_t *err) {
  char what[400];
  for (int i = 0; i < sg->n_nodes; i++) {
    const toplu__onnx_node_t *n = &sg->nodes[i];
    const char *dom = !strcmp(n->domain, "ai.onnx") ? "" : n->domain;
    if (!toplu__schema_find(dom, n->op_type))
      return toplu__errorf(err, TOPLU_ERR_UNSUPPORTED,
                          "%s: %s: its subgraph '%s' uses op '%s%s%s' (node '%s'), which toplu does not support",
                          g->path, toplu__node_describe(g, owner, what, sizeof what), sg->graph_name ? sg->graph_name : "",
                          dom, dom[0] ? "." : "", n->op_type, n->name);
    if (!toplu__control_op(n->domain, n->op_type)) continue;
    for (int a = 0; a < n->n_attrs; a++)
      if (n->attrs[a].g) {
        toplu_status_t st = check_ops(g, owner, n->attrs[a].g, err);
        if (st) return st;
      }
  }
  return TOPLU_OK;
}

toplu_status_t toplu__control_check_ops(const toplu__graph_t *g, const toplu__node_t *n, toplu_error_t *err) {
  for (int a = 0; a < n->n_attrs; a++)
    if (n->attrs[a].g) {
      toplu_status_t st = check_ops(g, n, n->attrs[a].g, err);
      if (st) return st;
    }
  return TOPLU_OK;
}

/* ---- building blocks ---- */



#define OOM(x) toplu__exp_oom(x)

toplu_status_t toplu__exp_oom(toplu__exp_t *x) {
  return toplu__errorf(x->err, TOPLU_ERR_OUT_OF_MEMORY, "%s: %s: out of memory expanding it", x->g->path, x->owner_what);
}

static char *dupstr(const char *s) {
  size_t n = strlen(s);
  char *d = malloc(n + 1);
  if (d) memcpy(d, s, n + 1);
  return d;
}

/* A new value named like name (name#k when taken). -1 on OOM. */
int toplu__exp_value(toplu__graph_t *g, const char *name) {
  if (toplu__graph_find_value(g, name) < 0) return toplu__graph_add_value(g, name);
  char buf[600];
  for (int k = g->n_values;; k++) { /* n_values grows: almost always free at once (unrolled loops repeat names) */
    snprintf(buf, sizeof buf, "%.500s#%d", name, k);
    if (toplu__graph_find_value(g, buf) < 0) return toplu__graph_add_value(g, buf);
  }
}

/* A scalar (ndim 0) or 1-D constant. */
int toplu__exp_const(toplu__exp_t *x, const char *name, toplu_dtype_t dt, const void *data, int64_t n, int scalar) {
  int v = toplu__exp_value(x->g, name);
  if (v < 0) return -1;
  size_t bytes = (size_t)n * toplu_dtype_size(dt);
  void *d = malloc(bytes ? bytes : 1);
  if (!d) return -1;
  if (bytes) memcpy(d, data, bytes);
  toplu__value_t *val = &x->g->values[v];
  val->konst.dtype = dt;
  val->konst.ndim = scalar ? 0 : 1;
  val->konst.dims[0] = n;
  val->konst.data = d;
  val->dtype = dt;
  val->ndim = val->konst.ndim;
  val->dims[0] = n;
  return v;
}

toplu__node_t *toplu__exp_pend(toplu__exp_t *x) {
  if (x->g->n_nodes + x->n_pend >= TOPLU_CONTROL_MAX_NODES) { /* nested unrolling multiplies */
    toplu__errorf(x->err, TOPLU_ERR_UNSUPPORTED, "%s: %s: expanding it would make the graph more than %d nodes",
                 x->g->path, x->owner_what, TOPLU_CONTROL_MAX_NODES);
    return NULL;
  }
  if (x->n_pend == x->cap_pend) {
    int cap = x->cap_pend ? x->cap_pend * 2 : 64;
    toplu__node_t *p = realloc(x->pend, (size_t)cap * sizeof *p);
    if (!p) {
      OOM(x);
      return NULL;
    }
    x->pend = p;
    x->cap_pend = cap;
  }
  toplu__node_t *n = &x->pend[x->n_pend++];
  memset(n, 0, sizeof *n);
  n->file_index = x->g->nodes[x->owner].file_index;
  return n;
}

static void node_clear(toplu__node_t *n) {
  free(n->name);
  free(n->op_type);
  free(n->domain);
  free(n->inputs);
  free(n->outputs);
  if (!n->attrs_shared) {
    for (int j = 0; j < n->n_attrs; j++) toplu__attr_clear(&n->attrs[j]);
    free(n->attrs);
  }
}

void toplu__exp_free(toplu__exp_t *x) {
  for (int i = 0; i < x->n_pend; i++) node_clear(&x->pend[i]);
  free(x->pend);
  x->pend = NULL;
  x->n_pend = x->cap_pend = 0;
}

/* The table follows g's new values and nodes (entries from the values). */
static int table_sync(toplu__exp_t *x, int old_values) {
  toplu__graph_t *g = x->g;
  toplu__value_table_t *t = x->t;
  if (g->n_values + 1 > t->cap_values) { /* doubling: unrolled loops add values step by step */
    int cap = (g->n_values + 1) * 2;
    toplu_tensor_t *vals = realloc(t->vals, (size_t)cap * sizeof *vals);
    if (!vals) return -1;
    t->vals = vals;
    uint8_t *owned = realloc(t->owned, (size_t)cap);
    if (!owned) return -1;
    t->owned = owned;
    t->cap_values = cap;
  }
  toplu_tensor_t *vals = t->vals;
  uint8_t *owned = t->owned;
  for (int i = old_values; i < g->n_values; i++) {
    const toplu__value_t *v = &g->values[i];
    memset(&vals[i], 0, sizeof vals[i]);
    vals[i].dtype = v->dtype;
    vals[i].ndim = v->ndim;
    if (v->ndim > 0) memcpy(vals[i].dims, v->dims, (size_t)v->ndim * sizeof(int64_t));
    vals[i].data = v->konst.data;
    owned[i] = 0;
  }
  t->n_values = g->n_values;
  return 0;
}

/* Move the pending nodes into g at *at (t->folded shifts along). */
toplu_status_t toplu__exp_insert(toplu__exp_t *x, int *at, int old_values) {
  toplu__graph_t *g = x->g;
  int k = x->n_pend;
  if (table_sync(x, old_values)) return OOM(x);
  if (!k) return TOPLU_OK;
  if (g->n_nodes + k + 1 > g->cap_nodes) {
    int cap = (g->n_nodes + k + 1) * 2;
    toplu__node_t *nn = realloc(g->nodes, (size_t)cap * sizeof *nn);
    if (!nn) return OOM(x);
    g->nodes = nn;
    g->cap_nodes = cap;
  }
  if (g->n_nodes + k + 1 > x->t->cap_nodes) {
    int cap = (g->n_nodes + k + 1) * 2;
    uint8_t *nf = realloc(x->t->folded, (size_t)cap);
    if (!nf) return OOM(x);
    x->t->folded = nf;
    x->t->cap_nodes = cap;
  }
  uint8_t *f = x->t->folded;
  memmove(&g->nodes[*at + k], &g->nodes[*at], (size_t)(g->n_nodes - *at) * sizeof *g->nodes);
  memcpy(&g->nodes[*at], x->pend, (size_t)k * sizeof *g->nodes);
  memmove(&f[*at + k], &f[*at], (size_t)(g->n_nodes - *at));
  memset(&f[*at], 0, (size_t)k);
  g->n_nodes += k;
  if (x->owner >= *at) x->owner += k;
  *at += k;
  x->n_pend = 0;
  return TOPLU_OK; /* producers and uses: recounted once after the pass (toplu__infer_graph) */
}

static int64_t opset_for(const toplu__graph_t *g, const toplu__node_t *owner, const char *domain) {
  if (!domain[0]) return g->opset;
  if (!strcmp(owner->domain, domain)) return owner->opset;
  for (int i = 0; i < g->n_nodes; i++)
    if (!strcmp(g->nodes[i].domain, domain)) return g->nodes[i].opset;
  return -1;
}

/* Find schema, check opset, attributes and arity of a new node n. */
toplu_status_t toplu__exp_check(toplu__exp_t *x, toplu__node_t *n) {
  char what[400];
  const toplu__graph_t *g = x->g;
  n->opset = opset_for(g, &g->nodes[x->owner], n->domain);
  if (n->opset < 0)
    return toplu__errorf(x->err, TOPLU_ERR_INVALID_MODEL, "%s: %s, in a subgraph of %s: domain '%s' is not in the model's opset_import",
                        g->path, toplu__node_describe(NULL, n, what, sizeof what), x->owner_what, n->domain);
  n->schema = toplu__schema_find(n->domain, n->op_type);
  if (!n->schema)
    return toplu__errorf(x->err, TOPLU_ERR_UNSUPPORTED, "%s: %s, in a subgraph of %s: op '%s%s%s' is not supported by toplu",
                        g->path, toplu__node_describe(NULL, n, what, sizeof what), x->owner_what, n->domain,
                        n->domain[0] ? "." : "", n->op_type);
  if (n->opset < n->schema->since_version && n->opset != 0)
    return toplu__errorf(x->err, TOPLU_ERR_UNSUPPORTED,
                        "%s: %s, in a subgraph of %s: opset %lld is older than the oldest toplu supports for %s (%d)",
                        g->path, toplu__node_describe(NULL, n, what, sizeof what), x->owner_what, (long long)n->opset,
                        n->op_type, n->schema->since_version);
  toplu_status_t st = toplu__schema_check_attrs(g, n, x->err);
  if (st) return st;
  const toplu__schema_t *s = n->schema;
  int n_in = n->n_inputs - n->n_implicit;
  while (n_in > 0 && n->inputs[n_in - 1] < 0) n_in--;
  if (n_in < s->min_inputs || n->n_inputs - n->n_implicit > s->max_inputs || n->n_outputs < s->min_outputs ||
      n->n_outputs > s->max_outputs)
    return toplu__errorf(x->err, TOPLU_ERR_INVALID_MODEL,
                        "%s: %s, in a subgraph of %s: has %d inputs and %d outputs; %s takes %d to %d inputs and %d to %d outputs",
                        g->path, toplu__node_describe(NULL, n, what, sizeof what), x->owner_what,
                        n->n_inputs - n->n_implicit, n->n_outputs, n->op_type, s->min_inputs, s->max_inputs,
                        s->min_outputs, s->max_outputs);
  for (int j = 0; j < s->min_inputs && j < n->n_inputs; j++)
    if (n->inputs[j] < 0)
      return toplu__errorf(x->err, TOPLU_ERR_INVALID_MODEL, "%s: %s, in a subgraph of %s: required input %d is empty",
                          g->path, toplu__node_describe(NULL, n, what, sizeof what), x->owner_what, j);
  return TOPLU_OK;
}

/* A helper node (Identity, Gather, Unsqueeze, Concat) with up to one INT
 * attribute. */
toplu_status_t toplu__exp_helper(toplu__exp_t *x, const char *op, const char *tag, const int *in, int n_in, int out,
                                  const char *attr, int64_t attr_val, int attr_ints) {
  toplu__node_t *n = toplu__exp_pend(x);
  if (!n) return x->err && x->err->status ? x->err->status : TOPLU_ERR_OUT_OF_MEMORY;
  char name[600];
  snprintf(name, sizeof name, "%.400s/%.150s", x->g->nodes[x->owner].name, tag);
  n->name = dupstr(name);
  n->op_type = dupstr(op);
  n->domain = dupstr("");
  n->inputs = malloc(((size_t)n_in + 1) * sizeof(int));
  n->outputs = malloc(sizeof(int));
  n->attrs = calloc(1, sizeof *n->attrs);
  if (!n->name || !n->op_type || !n->domain || !n->inputs || !n->outputs || !n->attrs) return OOM(x);
  memcpy(n->inputs, in, (size_t)n_in * sizeof(int));
  n->n_inputs = n_in;
  n->outputs[0] = out;
  n->n_outputs = 1;
  if (attr) {
    toplu__attr_t *a = &n->attrs[0];
    n->n_attrs = 1;
    if (!(a->name = dupstr(attr))) return OOM(x);
    if (attr_ints) {
      a->type = TOPLU_ATTR_INTS;
      if (!(a->ints = malloc(sizeof(int64_t)))) return OOM(x);
      a->ints[0] = attr_val;
      a->n = 1;
    } else {
      a->type = TOPLU_ATTR_INT;
      a->i = attr_val;
    }
  }
  return toplu__exp_check(x, n);
}

/* Unsqueeze `in` at axis into a new value (the attribute or the input form by opset). */
toplu_status_t toplu__exp_unsqueeze(toplu__exp_t *x, int in, int64_t axis, const char *tag, int *out) {
  if ((*out = toplu__exp_value(x->g, x->g->values[in].name)) < 0) return OOM(x);
  if (x->g->opset >= 13) {
    int ax = toplu__exp_const(x, "toplu_axes", TOPLU_DTYPE_INT64, &axis, 1, 0);
    if (ax < 0) return OOM(x);
    int ins[2] = {in, ax};
    return toplu__exp_helper(x, "Unsqueeze", tag, ins, 2, *out, NULL, 0, 0);
  }
  return toplu__exp_helper(x, "Unsqueeze", tag, &in, 1, *out, "axes", axis, 1);
}

/*
 * Inline body with its inputs bound to formal[] (n_formal of them): new
 * values for its initializers and node outputs, its nodes (ordered by
 * their inputs) made pending; outs[i] gets the value of body output i.
 * Outer names resolve through the owner's implicit inputs.
 */
toplu_status_t toplu__exp_inline(toplu__exp_t *x, const toplu__onnx_model_t *body, const int *formal, int n_formal,
                                  int *outs) {
  toplu__graph_t *g = x->g;
  toplu_status_t st = TOPLU_OK;
  names_t scope = {0};
  uint8_t *done = NULL;
  const char **outer = NULL;
  int n_outer = 0;
  const toplu__node_t *owner = &g->nodes[x->owner];
  if (toplu__control_free_names(owner->attrs, owner->n_attrs, &outer, &n_outer)) return OOM(x);
  if (n_outer != owner->n_implicit) {
    free(outer);
    return toplu__errorf(x->err, TOPLU_ERR_INTERNAL, "%s: %s: %d outer names, %d implicit inputs", g->path,
                        x->owner_what, n_outer, owner->n_implicit);
  }
  for (int i = 0; i < n_outer; i++)
    if (names_push(&scope, outer[i], owner->inputs[owner->n_inputs - owner->n_implicit + i])) goto oom;
  if (body->n_inputs != n_formal) {
    st = toplu__errorf(x->err, TOPLU_ERR_INVALID_MODEL, "%s: %s: its subgraph '%s' takes %d inputs, the node binds %d",
                      g->path, x->owner_what, body->graph_name ? body->graph_name : "", body->n_inputs, n_formal);
    goto out;
  }
  for (int i = 0; i < n_formal; i++)
    if (names_push(&scope, body->inputs[i].name, formal[i])) goto oom;
  for (int i = 0; i < body->n_initializers; i++) {
    const toplu__onnx_initializer_t *in = &body->initializers[i];
    int v = toplu__exp_value(g, in->name);
    if (v < 0) goto oom;
    size_t bytes = toplu_tensor_nbytes(&in->t);
    void *d = malloc(bytes ? bytes : 1);
    if (!d) goto oom;
    if (bytes) memcpy(d, in->t.data, bytes);
    toplu__value_t *val = &g->values[v];
    val->konst = in->t;
    val->konst.data = d;
    val->dtype = in->t.dtype;
    val->ndim = in->t.ndim;
    memcpy(val->dims, in->t.dims, sizeof val->dims);
    if (names_push(&scope, in->name, v)) goto oom;
  }
  if (!(done = calloc((size_t)body->n_nodes + 1, 1))) goto oom;
  for (int left = body->n_nodes; left > 0;) {
    int progress = 0;
    for (int i = 0; i < body->n_nodes; i++) {
      if (done[i]) continue;
      const toplu__onnx_node_t *on = &body->nodes[i];
      int ready = 1;
      for (int j = 0; j < on->n_inputs && ready; j++)
        if (on->inputs[j][0] && names_find(&scope, on->inputs[j]) < 0) ready = 0;
      const char **fnames = NULL;
      int n_fn = 0;
      if (ready && toplu__control_op(on->domain, on->op_type) &&
          toplu__control_free_names(on->attrs, on->n_attrs, &fnames, &n_fn))
        goto oom;
      for (int k = 0; k < n_fn && ready; k++)
        if (names_find(&scope, fnames[k]) < 0) ready = 0;
      if (!ready) {
        free(fnames);
        continue;
      }
      toplu__node_t *n = toplu__exp_pend(x);
      if (!n) {
        free(fnames);
        st = x->err && x->err->status ? x->err->status : TOPLU_ERR_OUT_OF_MEMORY;
        goto out;
      }
      char gen[600];
      if (on->name[0]) snprintf(gen, sizeof gen, "%.590s", on->name);
      else snprintf(gen, sizeof gen, "%.400s/%.100s_%d", owner->name, on->op_type, i);
      n->name = dupstr(gen);
      n->op_type = dupstr(on->op_type);
      n->domain = dupstr(!strcmp(on->domain, "ai.onnx") ? "" : on->domain);
      n->inputs = malloc(((size_t)on->n_inputs + (size_t)n_fn + 1) * sizeof(int));
      n->outputs = malloc(((size_t)on->n_outputs + 1) * sizeof(int));
      if (!n->name || !n->op_type || !n->domain || !n->inputs || !n->outputs ||
          toplu__attrs_copy(on->attrs, on->n_attrs, &n->attrs)) {
        free(fnames);
        goto oom;
      }
      n->n_attrs = on->n_attrs;
      for (int j = 0; j < on->n_inputs; j++)
        n->inputs[j] = on->inputs[j][0] ? scope.val[names_find(&scope, on->inputs[j])] : -1;
      for (int k = 0; k < n_fn; k++) n->inputs[on->n_inputs + k] = scope.val[names_find(&scope, fnames[k])];
      n->n_inputs = on->n_inputs + n_fn;
      n->n_implicit = n_fn;
      free(fnames);
      for (int j = 0; j < on->n_outputs; j++) {
        n->outputs[j] = -1;
        if (!on->outputs[j][0]) continue;
        int v = toplu__exp_value(g, on->outputs[j]);
        if (v < 0 || names_push(&scope, on->outputs[j], v)) goto oom;
        n->outputs[j] = v;
      }
      n->n_outputs = on->n_outputs;
      if ((st = toplu__exp_check(x, n))) goto out;
      done[i] = 1;
      left--;
      progress = 1;
    }
    if (!progress) {
      for (int i = 0; i < body->n_nodes; i++)
        if (!done[i]) {
          const toplu__onnx_node_t *on = &body->nodes[i];
          const char *miss = "?";
          for (int j = 0; j < on->n_inputs; j++)
            if (on->inputs[j][0] && names_find(&scope, on->inputs[j]) < 0) {
              miss = on->inputs[j];
              break;
            }
          st = toplu__errorf(x->err, TOPLU_ERR_INVALID_MODEL,
                            "%s: %s: in its subgraph '%s', node '%s' (%s) reads '%s', which nothing before it produces (or the subgraph has a cycle)",
                            g->path, x->owner_what, body->graph_name ? body->graph_name : "", on->name, on->op_type,
                            miss);
          break;
        }
      goto out;
    }
  }
  for (int i = 0; i < body->n_outputs; i++) {
    int k = names_find(&scope, body->outputs[i].name);
    if (k < 0) {
      st = toplu__errorf(x->err, TOPLU_ERR_INVALID_MODEL, "%s: %s: subgraph output '%s' is produced by nothing",
                        g->path, x->owner_what, body->outputs[i].name);
      goto out;
    }
    outs[i] = scope.val[k];
  }
  goto out;
oom:
  st = OOM(x);
out:
  names_free(&scope);
  free(outer);
  free(done);
  return st;
}

const toplu__onnx_model_t *toplu__exp_graph_attr(toplu__exp_t *x, const char *name, toplu_status_t *st) {
  const toplu__attr_t *a = toplu__node_attr(&x->g->nodes[x->owner], name);
  if (!a || a->type != TOPLU_ATTR_GRAPH || !a->g) {
    *st = toplu__errorf(x->err, TOPLU_ERR_INVALID_MODEL, "%s: %s: no GRAPH attribute '%s'", x->g->path, x->owner_what,
                       name);
    return NULL;
  }
  return a->g;
}

/* A constant scalar as int64 / bool (from table value v), or an error naming it. */
toplu_status_t toplu__exp_scalar(toplu__exp_t *x, int v, const char *role, int64_t *out) {
  const toplu_tensor_t *c = &x->t->vals[v];
  if (toplu_tensor_numel(c) != 1)
    return toplu__errorf(x->err, TOPLU_ERR_INVALID_MODEL, "%s: %s: %s '%s' has %lld elements, not one", x->g->path,
                        x->owner_what, role, x->g->values[v].name, (long long)toplu_tensor_numel(c));
  *out = toplu__tensor_get_int(c, 0);
  return TOPLU_OK;
}

toplu_status_t toplu__exp_not_known(toplu__exp_t *x, int v, const char *role) {
  return toplu__errorf(x->err, TOPLU_ERR_UNSUPPORTED,
                      "%s: %s: its %s '%s' is computed from tensor values at run time; toplu runs control flow only "
                      "when what steers it is known when the plan is built (constants, shapes, or small graph inputs "
                      "the plan is keyed on)",
                      x->g->path, x->owner_what, role, x->g->values[v].name);
}

/* Finish: mark the owner dead, insert pending nodes at *at. */
toplu_status_t toplu__exp_finish(toplu__exp_t *x, int *at, int old_values) {
  toplu_status_t st = toplu__exp_insert(x, at, old_values);
  if (st) return st;
  x->g->nodes[x->owner].dead = 1;
  x->t->folded[x->owner] = 0;
  return TOPLU_OK;
}

static toplu_status_t expand_if(toplu__exp_t *x, int *next) {
  toplu__graph_t *g = x->g;
  const toplu__node_t *n = &g->nodes[x->owner];
  int64_t c = 0;
  toplu_status_t st = toplu__exp_scalar(x, n->inputs[0], "condition", &c);
  if (st) return st;
  const toplu__onnx_model_t *br = toplu__exp_graph_attr(x, c ? "then_branch" : "else_branch", &st);
  if (!br) return st;
  if (br->n_outputs != n->n_outputs)
    return toplu__errorf(x->err, TOPLU_ERR_INVALID_MODEL, "%s: %s: its %s has %d outputs, the node %d", g->path,
                        x->owner_what, c ? "then_branch" : "else_branch", br->n_outputs, n->n_outputs);
  int old_values = g->n_values;
  int *outs = calloc((size_t)br->n_outputs + 1, sizeof(int));
  if (!outs) return OOM(x);
  if ((st = toplu__exp_inline(x, br, NULL, 0, outs))) goto out;
  n = &g->nodes[x->owner];
  for (int j = 0; j < n->n_outputs && !st; j++) {
    if (n->outputs[j] < 0) continue;
    char tag[32];
    snprintf(tag, sizeof tag, "output%d", j);
    st = toplu__exp_helper(x, "Identity", tag, &outs[j], 1, g->nodes[x->owner].outputs[j], NULL, 0, 0);
  }
  if (st) goto out;
  int at = x->owner + 1;
  st = toplu__exp_finish(x, &at, old_values);
  *next = x->owner + 1;
out:
  free(outs);
  return st;
}

/* Per-iteration values of the scan outputs: vals[it * k + j]. */
typedef struct scan_acc {
  int *v;
  int n, cap;
} scan_acc_t;

static int acc_push(scan_acc_t *a, int v) {
  if (a->n == a->cap) {
    int cap = a->cap ? a->cap * 2 : 64;
    int *p = realloc(a->v, (size_t)cap * sizeof *p);
    if (!p) return -1;
    a->v = p;
    a->cap = cap;
  }
  a->v[a->n++] = v;
  return 0;
}

/* Scan output j from its per-iteration values (iters of them, stride k):
 * Unsqueeze at axis (negative: from the end of the output's rank) and
 * Concat, in reverse when reverse. */
static toplu_status_t stack_outputs(toplu__exp_t *x, const scan_acc_t *a, int iters, int k, int j, int out, int64_t axis,
                                    int reverse) {
  if (iters == 0)
    return toplu__errorf(x->err, TOPLU_ERR_UNSUPPORTED, "%s: %s: zero iterations with scan outputs (their shape is "
                        "not known without one)", x->g->path, x->owner_what);
  int rank = x->t->vals[a->v[j]].ndim + 1;
  if (axis < 0) axis += rank;
  if (axis < 0 || axis >= rank)
    return toplu__errorf(x->err, TOPLU_ERR_INVALID_MODEL, "%s: %s: scan output axis out of range for rank %d",
                        x->g->path, x->owner_what, rank);
  int *parts = malloc(((size_t)iters + 1) * sizeof(int));
  if (!parts) return OOM(x);
  toplu_status_t st = TOPLU_OK;
  for (int it = 0; it < iters && !st; it++) {
    char tag[64];
    snprintf(tag, sizeof tag, "scan%d_unsqueeze%d", j, it);
    st = toplu__exp_unsqueeze(x, a->v[(reverse ? iters - 1 - it : it) * k + j], axis, tag, &parts[it]);
  }
  if (!st) {
    char tag[32];
    snprintf(tag, sizeof tag, "scan%d_concat", j);
    st = toplu__exp_helper(x, "Concat", tag, parts, iters, out, "axis", axis, 0);
  }
  free(parts);
  return st;
}

/* Infer the pending nodes just inserted: [start, *at). */
toplu_status_t toplu__exp_infer_new(toplu__exp_t *x, int start, int *at, int concrete, toplu__eval_fn eval, void *user) {
  int end = *at; /* nested expansions insert inside [start, end), never before the owner */
  toplu_status_t st = toplu__infer_range(x->g, x->t, concrete, eval, user, start, &end, x->err);
  *at = end;
  return st;
}

static toplu_status_t expand_loop(toplu__exp_t *x, int concrete, toplu__eval_fn eval, void *user, int *next) {
  toplu__graph_t *g = x->g;
  const toplu__node_t *n = &g->nodes[x->owner];
  toplu_status_t st = TOPLU_OK;
  int n_expl = n->n_inputs - n->n_implicit;
  int N = n_expl - 2, K = n->n_outputs - N;
  const toplu__onnx_model_t *body = toplu__exp_graph_attr(x, "body", &st);
  if (!body) return st;
  if (N < 0 || K < 0 || body->n_inputs != 2 + N || body->n_outputs != 1 + N + K)
    return toplu__errorf(x->err, TOPLU_ERR_INVALID_MODEL,
                        "%s: %s: body takes %d inputs and gives %d outputs; the node has %d loop-carried values and %d "
                        "scan outputs", g->path, x->owner_what, body->n_inputs, body->n_outputs, N, K);
  int64_t trip = INT64_MAX, cond = 1;
  int m_v = n->inputs[0], c_v = n_expl > 1 ? n->inputs[1] : -1;
  if (m_v >= 0 && (st = toplu__exp_scalar(x, m_v, "trip count", &trip))) return st;
  if (c_v >= 0 && (st = toplu__exp_scalar(x, c_v, "condition", &cond))) return st;
  int old_values = g->n_values;
  int *formal = malloc(((size_t)N + 2) * sizeof(int));
  int *outs = malloc(((size_t)N + (size_t)K + 2) * sizeof(int));
  scan_acc_t acc = {0};
  if (!formal || !outs) {
    st = OOM(x);
    goto out;
  }
  for (int j = 0; j < N; j++) formal[2 + j] = n->inputs[2 + j];
  if (c_v < 0) {
    uint8_t one = 1;
    if ((c_v = toplu__exp_const(x, "toplu_true", TOPLU_DTYPE_BOOL, &one, 1, 0)) < 0) {
      st = OOM(x);
      goto out;
    }
    g->values[c_v].konst.ndim = 0;
    g->values[c_v].ndim = 0;
  }
  formal[1] = c_v;
  int at = x->owner + 1, iters = 0;
  for (int64_t i = 0; i < trip && cond; i++) {
    if (i >= TOPLU_CONTROL_MAX_ITERS) {
      st = toplu__errorf(x->err, TOPLU_ERR_UNSUPPORTED, "%s: %s: more than %d iterations to unroll", g->path,
                        x->owner_what, TOPLU_CONTROL_MAX_ITERS);
      goto out;
    }
    if ((formal[0] = toplu__exp_const(x, "toplu_iter", TOPLU_DTYPE_INT64, &i, 1, 1)) < 0) {
      st = OOM(x);
      goto out;
    }
    if ((st = toplu__exp_inline(x, body, formal, 2 + N, outs))) goto out;
    int start = at;
    if ((st = toplu__exp_insert(x, &at, old_values))) goto out;
    old_values = g->n_values;
    if ((st = toplu__exp_infer_new(x, start, &at, concrete, eval, user))) goto out;
    if (x->t->vals[outs[0]].data == NULL) {
      st = toplu__exp_not_known(x, outs[0], "body's condition output");
      goto out;
    }
    if ((st = toplu__exp_scalar(x, outs[0], "body's condition output", &cond))) goto out;
    formal[1] = outs[0];
    for (int j = 0; j < N; j++) formal[2 + j] = outs[1 + j];
    for (int j = 0; j < K; j++)
      if (acc_push(&acc, outs[1 + N + j])) {
        st = OOM(x);
        goto out;
      }
    iters++;
  }
  n = &g->nodes[x->owner];
  for (int j = 0; j < N && !st; j++) {
    if (g->nodes[x->owner].outputs[j] < 0) continue;
    char tag[32];
    snprintf(tag, sizeof tag, "final%d", j);
    st = toplu__exp_helper(x, "Identity", tag, &formal[2 + j], 1, g->nodes[x->owner].outputs[j], NULL, 0, 0);
  }
  for (int j = 0; j < K && !st; j++)
    if (g->nodes[x->owner].outputs[N + j] >= 0)
      st = stack_outputs(x, &acc, iters, K, j, g->nodes[x->owner].outputs[N + j], 0, 0);
  if (st) goto out;
  *next = at;
  st = toplu__exp_finish(x, &at, old_values);
out:
  free(formal);
  free(outs);
  free(acc.v);
  return st;
}

static toplu_status_t expand_scan(toplu__exp_t *x, int concrete, toplu__eval_fn eval, void *user, int *next) {
  toplu__graph_t *g = x->g;
  const toplu__node_t *n = &g->nodes[x->owner];
  toplu_status_t st = TOPLU_OK;
  int n_expl = n->n_inputs - n->n_implicit;
  int64_t M = toplu__node_attr_int(n, "num_scan_inputs", -1);
  const toplu__onnx_model_t *body = toplu__exp_graph_attr(x, "body", &st);
  if (!body) return st;
  if (M < 1 || M > n_expl)
    return toplu__errorf(x->err, TOPLU_ERR_INVALID_MODEL, "%s: %s: num_scan_inputs %lld for %d inputs", g->path,
                        x->owner_what, (long long)M, n_expl);
  int N = n_expl - (int)M, K = n->n_outputs - N;
  if (K < 0 || body->n_inputs != N + M || body->n_outputs != N + K)
    return toplu__errorf(x->err, TOPLU_ERR_INVALID_MODEL,
                        "%s: %s: body takes %d inputs and gives %d outputs; the node has %d states, %lld scan inputs "
                        "and %d scan outputs", g->path, x->owner_what, body->n_inputs, body->n_outputs, N, (long long)M,
                        K);
  const int64_t *in_axes = NULL, *in_dirs = NULL, *out_axes = NULL, *out_dirs = NULL;
  int64_t na = toplu__node_attr_ints(n, "scan_input_axes", &in_axes);
  int64_t nd = toplu__node_attr_ints(n, "scan_input_directions", &in_dirs);
  int64_t noa = toplu__node_attr_ints(n, "scan_output_axes", &out_axes);
  int64_t nod = toplu__node_attr_ints(n, "scan_output_directions", &out_dirs);
  if ((na >= 0 && na != M) || (nd >= 0 && nd != M) || (noa >= 0 && noa != K) || (nod >= 0 && nod != K))
    return toplu__errorf(x->err, TOPLU_ERR_INVALID_MODEL, "%s: %s: scan axes or directions do not match the inputs and "
                        "outputs", g->path, x->owner_what);
  int64_t L = -1;
  int64_t axis_of[64];
  if (M > 64)
    return toplu__errorf(x->err, TOPLU_ERR_UNSUPPORTED, "%s: %s: more than 64 scan inputs", g->path, x->owner_what);
  for (int m = 0; m < M; m++) {
    const toplu_tensor_t *s = &x->t->vals[n->inputs[N + m]];
    int64_t ax = na >= 0 ? in_axes[m] : 0;
    if (ax < 0) ax += s->ndim;
    if (ax < 0 || ax >= s->ndim)
      return toplu__errorf(x->err, TOPLU_ERR_INVALID_MODEL, "%s: %s: scan input '%s' has rank %d, no axis %lld",
                          g->path, x->owner_what, g->values[n->inputs[N + m]].name, s->ndim, (long long)ax);
    axis_of[m] = ax;
    if (L >= 0 && s->dims[ax] != L)
      return toplu__errorf(x->err, TOPLU_ERR_SHAPE, "%s: %s: scan inputs of %lld and %lld steps", g->path,
                          x->owner_what, (long long)L, (long long)s->dims[ax]);
    L = s->dims[ax];
  }
  if (L > TOPLU_CONTROL_MAX_ITERS)
    return toplu__errorf(x->err, TOPLU_ERR_UNSUPPORTED, "%s: %s: more than %d iterations to unroll", g->path,
                        x->owner_what, TOPLU_CONTROL_MAX_ITERS);
  int old_values = g->n_values;
  int *formal = malloc(((size_t)N + (size_t)M + 1) * sizeof(int));
  int *outs = malloc(((size_t)N + (size_t)K + 1) * sizeof(int));
  scan_acc_t acc = {0};
  if (!formal || !outs) {
    st = OOM(x);
    goto out;
  }
  for (int j = 0; j < N; j++) formal[j] = n->inputs[j];
  int at = x->owner + 1;
  for (int64_t s = 0; s < L; s++) {
    for (int m = 0; m < M; m++) {
      int64_t idx = (nd >= 0 && in_dirs[m]) ? L - 1 - s : s;
      int in = g->nodes[x->owner].inputs[N + m];
      int iv = toplu__exp_const(x, "toplu_step", TOPLU_DTYPE_INT64, &idx, 1, 1);
      int sv = iv < 0 ? -1 : toplu__exp_value(g, g->values[in].name);
      if (sv < 0) {
        st = OOM(x);
        goto out;
      }
      int ins[2] = {in, iv};
      char tag[64];
      snprintf(tag, sizeof tag, "slice%d_%lld", m, (long long)s);
      if ((st = toplu__exp_helper(x, "Gather", tag, ins, 2, sv, "axis", axis_of[m], 0))) goto out;
      formal[N + m] = sv;
    }
    if ((st = toplu__exp_inline(x, body, formal, N + (int)M, outs))) goto out;
    int start = at;
    if ((st = toplu__exp_insert(x, &at, old_values))) goto out;
    old_values = g->n_values;
    if ((st = toplu__exp_infer_new(x, start, &at, concrete, eval, user))) goto out;
    for (int j = 0; j < N; j++) formal[j] = outs[j];
    for (int j = 0; j < K; j++)
      if (acc_push(&acc, outs[N + j])) {
        st = OOM(x);
        goto out;
      }
  }
  for (int j = 0; j < N && !st; j++) {
    if (g->nodes[x->owner].outputs[j] < 0) continue;
    char tag[32];
    snprintf(tag, sizeof tag, "final%d", j);
    st = toplu__exp_helper(x, "Identity", tag, &formal[j], 1, g->nodes[x->owner].outputs[j], NULL, 0, 0);
  }
  for (int j = 0; j < K && !st; j++)
    if (g->nodes[x->owner].outputs[N + j] >= 0)
      st = stack_outputs(x, &acc, (int)L, K, j, g->nodes[x->owner].outputs[N + j], noa >= 0 ? out_axes[j] : 0,
                         nod >= 0 && out_dirs[j]);
  if (st) goto out;
  *next = at;
  st = toplu__exp_finish(x, &at, old_values);
out:
  free(formal);
  free(outs);
  free(acc.v);
  return st;
}

/* Scan-8: a batch dim 0 on every input and output, the sequence along
 * dim 1 of the scan inputs and outputs, an optional sequence_lens first
 * (only absent, or constant and equal to the full length, is taken).  Each
 * batch row is unrolled on its own (Gather of the row, the steps as in
 * Scan-9), and the rows are stacked back along dim 0. */
static toplu_status_t expand_scan8(toplu__exp_t *x, int concrete, toplu__eval_fn eval, void *user, int *next) {
  toplu__graph_t *g = x->g;
  const toplu__node_t *n = &g->nodes[x->owner];
  toplu_status_t st = TOPLU_OK;
  int n_expl = n->n_inputs - n->n_implicit;
  int64_t M = toplu__node_attr_int(n, "num_scan_inputs", -1);
  const toplu__onnx_model_t *body = toplu__exp_graph_attr(x, "body", &st);
  if (!body) return st;
  if (M < 1 || M > n_expl - 1)
    return toplu__errorf(x->err, TOPLU_ERR_INVALID_MODEL, "%s: %s: num_scan_inputs %lld for %d inputs", g->path,
                        x->owner_what, (long long)M, n_expl);
  int N = n_expl - 1 - (int)M, K = n->n_outputs - N;
  if (K < 0 || body->n_inputs != N + M || body->n_outputs != N + K)
    return toplu__errorf(x->err, TOPLU_ERR_INVALID_MODEL, "%s: %s: body takes %d inputs and gives %d outputs; the node "
                        "has %d states, %lld scan inputs and %d scan outputs", g->path, x->owner_what, body->n_inputs,
                        body->n_outputs, N, (long long)M, K);
  const int64_t *dirs = NULL;
  int64_t nd = toplu__node_attr_ints(n, "directions", &dirs);
  if (nd >= 0 && nd != M)
    return toplu__errorf(x->err, TOPLU_ERR_INVALID_MODEL, "%s: %s: %lld directions for %lld scan inputs", g->path,
                        x->owner_what, (long long)nd, (long long)M);
  const toplu_tensor_t *s0 = &x->t->vals[n->inputs[1 + N]];
  if (s0->ndim < 2)
    return toplu__errorf(x->err, TOPLU_ERR_INVALID_MODEL, "%s: %s: scan input of rank %d (Scan-8 wants a batch and a "
                        "sequence dim)", g->path, x->owner_what, s0->ndim);
  int64_t B = s0->dims[0], L = s0->dims[1];
  for (int m = 0; m < M; m++) {
    const toplu_tensor_t *s = &x->t->vals[n->inputs[1 + N + m]];
    if (s->ndim < 2 || s->dims[0] != B || s->dims[1] != L)
      return toplu__errorf(x->err, TOPLU_ERR_SHAPE, "%s: %s: scan inputs of different batch or sequence lengths",
                          g->path, x->owner_what);
  }
  if (n->inputs[0] >= 0) {
    const toplu_tensor_t *sl = &x->t->vals[n->inputs[0]];
    if (!sl->data) return toplu__exp_not_known(x, n->inputs[0], "sequence_lens");
    for (int64_t b = 0; b < toplu_tensor_numel(sl); b++)
      if (toplu__tensor_get_int(sl, b) != L)
        return toplu__errorf(x->err, TOPLU_ERR_UNSUPPORTED, "%s: %s: sequence_lens shorter than the sequence (%lld) "
                            "are not supported", g->path, x->owner_what, (long long)L);
  }
  if (B * L > TOPLU_CONTROL_MAX_ITERS)
    return toplu__errorf(x->err, TOPLU_ERR_UNSUPPORTED, "%s: %s: more than %d iterations to unroll", g->path,
                        x->owner_what, TOPLU_CONTROL_MAX_ITERS);
  int old_values = g->n_values;
  int *formal = malloc(((size_t)N + (size_t)M + 1) * sizeof(int));
  int *outs = malloc(((size_t)N + (size_t)K + 1) * sizeof(int));
  int *rows = malloc(((size_t)M + 1) * sizeof(int));
  scan_acc_t acc = {0}, fin = {0}, rowv = {0};
  if (!formal || !outs || !rows) {
    st = OOM(x);
    goto out;
  }
  int at = x->owner + 1;
  for (int64_t b = 0; b < B; b++) {
    int bv = toplu__exp_const(x, "toplu_row", TOPLU_DTYPE_INT64, &b, 1, 1);
    if (bv < 0) {
      st = OOM(x);
      goto out;
    }
    for (int j = 0; j < N + M; j++) { /* row b of every state and scan input */
      int in = g->nodes[x->owner].inputs[1 + j], rv = toplu__exp_value(g, g->values[in].name);
      if (rv < 0) {
        st = OOM(x);
        goto out;
      }
      int ins[2] = {in, bv};
      char tag[64];
      snprintf(tag, sizeof tag, "row%lld_%d", (long long)b, j);
      if ((st = toplu__exp_helper(x, "Gather", tag, ins, 2, rv, "axis", 0, 0))) goto out;
      if (j < N) formal[j] = rv;
      else rows[j - N] = rv;
    }
    acc.n = 0;
    for (int64_t s = 0; s < L; s++) {
      for (int m = 0; m < M; m++) {
        int64_t idx = (nd >= 0 && dirs[m]) ? L - 1 - s : s;
        int iv = toplu__exp_const(x, "toplu_step", TOPLU_DTYPE_INT64, &idx, 1, 1);
        int sv = iv < 0 ? -1 : toplu__exp_value(g, g->values[rows[m]].name);
        if (sv < 0) {
          st = OOM(x);
          goto out;
        }
        int ins[2] = {rows[m], iv};
        char tag[64];
        snprintf(tag, sizeof tag, "row%lld_slice%d_%lld", (long long)b, m, (long long)s);
        if ((st = toplu__exp_helper(x, "Gather", tag, ins, 2, sv, "axis", 0, 0))) goto out;
        formal[N + m] = sv;
      }
      if ((st = toplu__exp_inline(x, body, formal, N + (int)M, outs))) goto out;
      int start = at;
      if ((st = toplu__exp_insert(x, &at, old_values))) goto out;
      old_values = g->n_values;
      if ((st = toplu__exp_infer_new(x, start, &at, concrete, eval, user))) goto out;
      for (int j = 0; j < N; j++) formal[j] = outs[j];
      for (int j = 0; j < K; j++)
        if (acc_push(&acc, outs[N + j])) {
          st = OOM(x);
          goto out;
        }
    }
    for (int j = 0; j < N; j++) /* this row's final states */
      if (acc_push(&fin, formal[j])) {
        st = OOM(x);
        goto out;
      }
    for (int j = 0; j < K; j++) { /* this row's scan outputs, [L, ...] */
      int v = toplu__exp_value(g, g->values[g->nodes[x->owner].outputs[N + j] >= 0 ? g->nodes[x->owner].outputs[N + j]
                                                                             : acc.v[j]].name);
      if (v < 0 || acc_push(&rowv, v)) {
        st = OOM(x);
        goto out;
      }
      if ((st = stack_outputs(x, &acc, (int)L, K, j, v, 0, 0))) goto out;
    }
    int start = at;
    if ((st = toplu__exp_insert(x, &at, old_values))) goto out;
    old_values = g->n_values;
    if ((st = toplu__exp_infer_new(x, start, &at, concrete, eval, user))) goto out;
  }
  for (int j = 0; j < N && !st; j++)
    if (g->nodes[x->owner].outputs[j] >= 0)
      st = stack_outputs(x, &fin, (int)B, N, j, g->nodes[x->owner].outputs[j], 0, 0);
  for (int j = 0; j < K && !st; j++)
    if (g->nodes[x->owner].outputs[N + j] >= 0)
      st = stack_outputs(x, &rowv, (int)B, K, j, g->nodes[x->owner].outputs[N + j], 0, 0);
  if (st) goto out;
  *next = at;
  st = toplu__exp_finish(x, &at, old_values);
out:
  free(formal);
  free(outs);
  free(rows);
  free(acc.v);
  free(fin.v);
  free(rowv.v);
  return st;
}

toplu_status_t toplu__control_expand(toplu__graph_t *g, toplu__value_table_t *t, int ni, int concrete,
                                    toplu__eval_fn eval, void *user, int *expanded, int *next, toplu_error_t *err) {
  *expanded = 0;
  *next = ni + 1;
  toplu__node_t *n = &g->nodes[ni];
  toplu__exp_t x = {.g = g, .t = t, .owner = ni, .err = err};
  toplu__node_describe(g, n, x.owner_what, sizeof x.owner_what);
  toplu_status_t st = TOPLU_OK;
  if (!strcmp(n->op_type, "If")) {
    if (!t->vals[n->inputs[0]].data) return concrete ? toplu__exp_not_known(&x, n->inputs[0], "condition") : TOPLU_OK;
    st = expand_if(&x, next);
  } else if (!strcmp(n->op_type, "Loop")) {
    int n_expl = n->n_inputs - n->n_implicit;
    if (n->inputs[0] >= 0 && !t->vals[n->inputs[0]].data)
      return concrete ? toplu__exp_not_known(&x, n->inputs[0], "trip count") : TOPLU_OK;
    if (n_expl > 1 && n->inputs[1] >= 0 && !t->vals[n->inputs[1]].data)
      return concrete ? toplu__exp_not_known(&x, n->inputs[1], "condition") : TOPLU_OK;
    if (!concrete) return TOPLU_OK;
    st = expand_loop(&x, concrete, eval, user, next);
  } else if (!strcmp(n->op_type, "Scan")) {
    if (!concrete) return TOPLU_OK;
    st = n->opset < 9 ? expand_scan8(&x, concrete, eval, user, next) : expand_scan(&x, concrete, eval, user, next);
  } else if (!strcmp(n->op_type, "SequenceMap")) {
    if (!concrete) return TOPLU_OK;
    st = toplu__seq_map(&x, concrete, eval, user, next);
  } else {
    return TOPLU_OK;
  }
  toplu__exp_free(&x);
  if (!st) *expanded = 1;
  return st;
}
