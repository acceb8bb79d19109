/* graph/infer.c - inference and folding passes over a graph. */
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "core/checked.h"
#include "graph/control.h"
#include "graph/infer.h"
#include "graph/schema.h"
#include "graph/sequence.h"

toplu__value_table_t *toplu__value_table_create(const toplu__graph_t *g) {
  toplu__value_table_t *t = calloc(1, sizeof *t);
  if (!t) return NULL;
  t->vals = calloc((size_t)g->n_values + 1, sizeof *t->vals);
  t->owned = calloc((size_t)g->n_values + 1, 1);
  t->folded = calloc((size_t)g->n_nodes + 1, 1);
  if (!t->vals || !t->owned || !t->folded) {
    free(t->vals); free(t->owned); free(t->folded); free(t);
    return NULL;
  }
  t->n_values = g->n_values;
  t->cap_values = g->n_values + 1;
  t->cap_nodes = g->n_nodes + 1;
  for (int i = 0; i < g->n_values; i++) {
    const toplu__value_t *v = &g->values[i];
    toplu_tensor_t *x = &t->vals[i];
    x->dtype = v->dtype;
    x->ndim = v->ndim;
    if (v->ndim > 0) memcpy(x->dims, v->dims, (size_t)v->ndim * sizeof(int64_t));
    x->data = v->konst.data;
  }
  return t;
}

void toplu__value_table_free(const toplu__graph_t *g, toplu__value_table_t *t) {
  if (!t) return;
  (void)g;
  for (int i = 0; i < t->n_values; i++)
    if (t->owned[i]) free(t->vals[i].data);
  free(t->vals);
  free(t->owned);
  free(t->folded);
  free(t->sym);
  free(t);
}

/* ---- symbolic shape vectors (load time; toplu__symvec_t in graph/infer.h) ---- */

/* Value v's content as a symvec: from its constant data (an int64 or int32
 * scalar or 1-D tensor of at most TOPLU_MAX_DIMS elements), else from what
 * the pass recorded.  0 when neither. */
static int sym_get(const toplu__value_table_t *t, int v, toplu__symvec_t *out) {
  if (v < 0) return 0;
  const toplu_tensor_t *x = &t->vals[v];
  if (x->data && (x->dtype == TOPLU_DTYPE_INT64 || x->dtype == TOPLU_DTYPE_INT32) && (x->ndim == 0 || x->ndim == 1)) {
    int64_t n = x->ndim == 0 ? 1 : x->dims[0];
    if (n < 0 || n > TOPLU_MAX_DIMS) return 0;
    memset(out, 0, sizeof *out);
    out->valid = 1;
    out->scalar = x->ndim == 0;
    out->n = (int8_t)n;
    for (int64_t i = 0; i < n; i++) {
      int64_t e = x->dtype == TOPLU_DTYPE_INT64 ? ((const int64_t *)x->data)[i] : ((const int32_t *)x->data)[i];
      if (e < -1) return 0; /* only Reshape's -1 means something below 0 */
      out->e[i] = e;
    }
    return 1;
  }
  if (v < t->cap_sym && t->sym[v].valid) {
    *out = t->sym[v];
    return 1;
  }
  return 0;
}

/* Record (or, with sv NULL, forget) value v's symvec.  Out of memory only loses the knowledge. */
static void sym_set(toplu__value_table_t *t, int v, const toplu__symvec_t *sv) {
  if (v < 0) return;
  if (v >= t->cap_sym) {
    if (!sv) return;
    int cap = t->cap_values > v + 1 ? t->cap_values : v + 1;
    toplu__symvec_t *ns = realloc(t->sym, (size_t)cap * sizeof *ns);
    if (!ns) return;
    memset(ns + t->cap_sym, 0, (size_t)(cap - t->cap_sym) * sizeof *ns);
    t->sym = ns;
    t->cap_sym = cap;
  }
  if (sv) t->sym[v] = *sv;
  else t->sym[v].valid = 0;
}

/* Node n's output 0 as a symvec from its inputs' (Shape, Gather, Unsqueeze,
 * Squeeze, Concat, Cast, Identity): 1 and *out filled, or 0. */
static int sym_eval(const toplu__value_table_t *t, const toplu__node_t *n, const toplu_tensor_t *in,
                    const toplu_tensor_t *out0, toplu__symvec_t *out) {
  if (n->domain[0] && strcmp(n->domain, "ai.onnx")) return 0;
  if (n->n_outputs < 1 || n->n_inputs < 1 || n->inputs[0] < 0) return 0;
  if (out0->dtype != TOPLU_DTYPE_INT64 && out0->dtype != TOPLU_DTYPE_INT32) return 0;
  toplu__symvec_t a;
  memset(out, 0, sizeof *out);
  out->valid = 1;
  const char *op = n->op_type;
  if (!strcmp(op, "Shape")) {
    int64_t nd = in[0].ndim, lo = toplu__node_attr_int(n, "start", 0), hi = toplu__node_attr_int(n, "end", nd);
    if (nd < 0) return 0;
    if (lo < 0) lo += nd;
    if (hi < 0) hi += nd;
    lo = lo < 0 ? 0 : lo > nd ? nd : lo;
    hi = hi < 0 ? 0 : hi > nd ? nd : hi;
    out->n = (int8_t)(hi > lo ? hi - lo : 0);
    for (int64_t i = lo; i < hi; i++)
      out->e[i - lo] = in[0].dims[i] >= 0 ? in[0].dims[i] : TOPLU__SYMVEC_SYM(in[0].dims[i]);
    return 1;
  }
  if (!sym_get(t, n->inputs[0], &a)) return 0;
  if (!strcmp(op, "Identity") || !strcmp(op, "Cast")) {
    *out = a;
    return 1;
  }
  if (!strcmp(op, "Gather")) {
    if (a.scalar || toplu__node_attr_int(n, "axis", 0) != 0 || n->n_inputs < 2 || n->inputs[1] < 0) return 0;
    const toplu_tensor_t *ix = &in[1];
    if (!ix->data || (ix->dtype != TOPLU_DTYPE_INT64 && ix->dtype != TOPLU_DTYPE_INT32) || ix->ndim > 1) return 0;
    int64_t k = ix->ndim == 0 ? 1 : ix->dims[0];
    if (k < 0 || k > TOPLU_MAX_DIMS) return 0;
    out->scalar = ix->ndim == 0;
    out->n = (int8_t)k;
    for (int64_t i = 0; i < k; i++) {
      int64_t j = ix->dtype == TOPLU_DTYPE_INT64 ? ((const int64_t *)ix->data)[i] : ((const int32_t *)ix->data)[i];
      if (j < 0) j += a.n;
      if (j < 0 || j >= a.n) return 0;
      out->e[i] = a.e[j];
    }
    return 1;
  }
  if (!strcmp(op, "Unsqueeze")) { /* a scalar to [1] */
    if (!a.scalar || out0->ndim != 1) return 0;
    *out = a;
    out->scalar = 0;
    return 1;
  }
  if (!strcmp(op, "Squeeze")) { /* [1] to a scalar */
    if (a.scalar || a.n != 1 || out0->ndim != 0) return 0;
    *out = a;
    out->scalar = 1;
    return 1;
  }
  if (!strcmp(op, "Concat")) {
    if (out0->ndim != 1) return 0;
    out->n = 0;
    for (int j = 0; j < n->n_inputs; j++) {
      toplu__symvec_t b;
      if (!sym_get(t, n->inputs[j], &b) || b.scalar || out->n + b.n > TOPLU_MAX_DIMS) return 0;
      memcpy(out->e + out->n, b.e, (size_t)b.n * sizeof(int64_t));
      out->n = (int8_t)(out->n + b.n);
    }
    return 1;
  }
  return 0;
}

/* Reshape whose target shape is a symvec: its output dims, where the schema
 * (which sees no constant shape) left fresh symbols.  y holds the schema's
 * output; entries are replaced where the symvec decides them. */
static void sym_reshape(const toplu__value_table_t *t, const toplu__node_t *n, const toplu_tensor_t *x, toplu_tensor_t *y) {
  toplu__symvec_t sv;
  if (n->n_inputs < 2 || !sym_get(t, n->inputs[1], &sv) || sv.scalar || sv.n != y->ndim || x->ndim < 0) return;
  int allowzero = toplu__node_attr_int(n, "allowzero", 0) != 0;
  int infer_at = -1;
  int64_t dims[TOPLU_MAX_DIMS];
  for (int i = 0; i < sv.n; i++) {
    int64_t e = sv.e[i];
    if (e <= TOPLU__SYMVEC_BASE / 2) dims[i] = e - TOPLU__SYMVEC_BASE; /* symbolic dim */
    else if (e == 0 && !allowzero) {
      if (i >= x->ndim) return;
      dims[i] = x->dims[i];
    } else if (e == -1) {
      if (infer_at >= 0) return;
      infer_at = i;
      dims[i] = y->dims[i];
    } else {
      dims[i] = e;
    }
  }
  if (infer_at >= 0) { /* known when the symbolic dims on both sides are the same ones */
    int64_t kin = 1, kout = 1, syms_in[TOPLU_MAX_DIMS], syms_out[TOPLU_MAX_DIMS];
    int nsi = 0, nso = 0;
    for (int i = 0; i < x->ndim; i++)
      if (x->dims[i] < 0) syms_in[nsi++] = x->dims[i];
      else kin *= x->dims[i];
    for (int i = 0; i < sv.n; i++)
      if (i == infer_at) continue;
      else if (dims[i] < 0) syms_out[nso++] = dims[i];
      else kout *= dims[i];
    int same = nsi == nso;
    for (int i = 0; same && i < nsi; i++) { /* multiset equality, O(n^2) on at most 8 */
      int found = 0;
      for (int j = 0; j < nso && !found; j++)
        if (syms_out[j] == syms_in[i]) {
          syms_out[j] = 0; /* used */
          found = 1;
        }
      same = found;
    }
    if (same && kout > 0 && kin % kout == 0) dims[infer_at] = kin / kout;
  }
  memcpy(y->dims, dims, (size_t)sv.n * sizeof(int64_t));
}

#define MAX_IO 64

/* Ops that take or make string tensors (arrays of char *, toplu/tensor.h):
 * Cast, CastLike and StringNormalizer compute on them; the others only move
 * elements (pointers) or read the shape; control flow is inlined and
 * sequence ops are lowered into nodes this checks in turn.  Any other op
 * with a string input or output is refused here, in one place, so no
 * numeric kernel ever reads pointers as numbers. */
static int takes_strings(const toplu__node_t *n) {
  static const char *const ops[] = {"Cast", "CastLike", "StringNormalizer", "Identity", "Reshape", "Flatten",
                                    "Squeeze", "Unsqueeze", "Concat", "Gather", "Slice", "Shape", "Size", "Constant",
                                    "If", "Loop", "Scan"};
  if (n->domain[0] && strcmp(n->domain, "ai.onnx")) return 0;
  if (toplu__seq_op(n->domain, n->op_type)) return 1; /* lowered into ops checked here in turn (graph/sequence.h) */
  for (size_t i = 0; i < sizeof ops / sizeof ops[0]; i++)
    if (!strcmp(n->op_type, ops[i])) return 1;
  return 0;
}

/* TOPLU_ERR_UNSUPPORTED naming the node and tensor when a string tensor
 * reaches an op that does not take strings. */
static toplu_status_t check_strings(const toplu__graph_t *g, const toplu__node_t *n, const toplu_tensor_t *in,
                                    const toplu_tensor_t *out, toplu_error_t *err) {
  if (takes_strings(n)) return TOPLU_OK;
  for (int k = 0; k < 2; k++) {
    int count = k ? n->n_outputs : n->n_inputs;
    const int *ids = k ? n->outputs : n->inputs;
    const toplu_tensor_t *ts = k ? out : in;
    for (int j = 0; j < count; j++)
      if (ids[j] >= 0 && ts[j].dtype == TOPLU_DTYPE_STRING) {
        char what[400];
        return toplu__errorf(err, TOPLU_ERR_UNSUPPORTED, "%s: %s: %s %d '%s' is a string tensor, which %s does not take in toplu",
                            g->path, toplu__node_describe(g, n, what, sizeof what), k ? "output" : "input", j,
                            g->values[ids[j]].name, n->op_type);
      }
  }
  return TOPLU_OK;
}

/* The known dims of t (a symbolic one counts as 1) multiply to at most
 * TOPLU_MAX_ELEMENTS (core/checked.h). */
static int known_numel_fits(const toplu_tensor_t *t) {
  int64_t known[TOPLU_MAX_DIMS], numel;
  int nd = t->ndim > 0 ? t->ndim : 0;
  if (nd > TOPLU_MAX_DIMS) return 0;
  for (int d = 0; d < nd; d++) known[d] = t->dims[d] < 0 ? 1 : t->dims[d];
  return toplu__shape_numel(nd, known, &numel);
}

/* Infer (and fold) node ni; in and out hold at least its inputs and outputs. */
static toplu_status_t infer_node(toplu__graph_t *g, toplu__value_table_t *table, int ni, int concrete,
                                 toplu__eval_fn eval, void *user, toplu_tensor_t *in, toplu_tensor_t *out,
                                 toplu_error_t *err) {
  toplu_tensor_t *vals = table->vals;
  {
    toplu__node_t *n = &g->nodes[ni];
    const toplu__schema_t *s = n->schema;
    char what[400];
    int unknown_rank = 0, all_const = 1;
    for (int j = 0; j < n->n_inputs; j++) {
      int v = n->inputs[j];
      if (v < 0) {
        memset(&in[j], 0, sizeof in[j]);
        in[j].ndim = -1;
        continue;
      }
      in[j] = vals[v];
      if (in[j].ndim < 0 || in[j].dtype == TOPLU_DTYPE_UNDEFINED) unknown_rank = 1;
      else if (!known_numel_fits(&in[j])) { /* a graph input declared that large: the model is bad (exit 2) */
        char shp[160];
        return toplu__errorf(err, TOPLU_ERR_INVALID_MODEL, "%s: %s: input '%s' has shape %s: more than "
                            TOPLU_MAX_ELEMENTS_TEXT " elements", g->path, toplu__node_describe(g, n, what, sizeof what),
                            g->values[v].name, toplu__graph_shape_format(g, in[j].ndim, in[j].dims, shp, sizeof shp));
      }
      if (!in[j].data) all_const = 0;
      if (concrete) {
        for (int d = 0; d < in[j].ndim; d++)
          if (in[j].dims[d] < 0)
            return toplu__errorf(err, TOPLU_ERR_INTERNAL, "%s: %s: input '%s' has an unbound dim at plan time",
                                g->path, toplu__node_describe(g, n, what, sizeof what), g->values[v].name);
      }
    }
    memset(out, 0, sizeof(toplu_tensor_t) * (size_t)(n->n_outputs ? n->n_outputs : 1));
    for (int j = 0; j < n->n_outputs; j++) out[j].ndim = -1;
    if (unknown_rank) {
      if (concrete)
        return toplu__errorf(err, TOPLU_ERR_INTERNAL, "%s: %s: an input has no known shape at plan time", g->path,
                            toplu__node_describe(g, n, what, sizeof what));
      for (int j = 0; j < n->n_outputs; j++)
        if (n->outputs[j] >= 0) {
          vals[n->outputs[j]].ndim = -1;
          vals[n->outputs[j]].data = NULL;
        }
      return TOPLU_OK;
    }
    if (concrete && s->const_inputs) {
      for (int j = 0; j < n->n_inputs && j < 32; j++)
        if ((s->const_inputs >> j & 1u) && n->inputs[j] >= 0 && !in[j].data)
          return toplu__errorf(err, TOPLU_ERR_UNSUPPORTED,
                              "%s: %s: input %d '%s' must be known before the run (toplu does not support shapes that depend on tensor values)",
                              g->path, toplu__node_describe(g, n, what, sizeof what), j, g->values[n->inputs[j]].name);
    }
    toplu__infer_ctx_t ctx = {.graph = g, .node = n, .n_in = n->n_inputs, .n_out = n->n_outputs, .in = in,
                             .out = out, .concrete = concrete, .err = err};
    /* inputs before infer (whose dtype checks would otherwise speak first), outputs after */
    toplu_status_t st = check_strings(g, n, in, out, err);
    if (!st) st = s->infer(&ctx);
    if (!st) st = check_strings(g, n, in, out, err);
    if (!st && !concrete && !n->domain[0] && !strcmp(n->op_type, "Reshape") && n->n_inputs > 1 && n->inputs[1] >= 0 &&
        !in[1].data && out[0].ndim >= 0)
      sym_reshape(table, n, &in[0], &out[0]);
    if (st) {
      for (int j = 0; j < 8; j++) free(ctx.out_const[j]);
      /* Shapes that do not fit before any input is bound are the file's fault. */
      if (st == TOPLU_ERR_SHAPE && !concrete && err) err->status = st = TOPLU_ERR_INVALID_MODEL;
      return st;
    }
    int outs_const = 1;
    for (int j = 0; j < n->n_outputs; j++) {
      if (out[j].ndim < 0 || out[j].ndim > TOPLU_MAX_DIMS) {
        if (concrete || out[j].ndim > TOPLU_MAX_DIMS) {
          for (int k = 0; k < 8; k++) free(ctx.out_const[k]);
          return toplu__errorf(err, out[j].ndim > TOPLU_MAX_DIMS ? TOPLU_ERR_UNSUPPORTED : TOPLU_ERR_INTERNAL,
                              "%s: %s: output %d has %s rank", g->path, toplu__node_describe(g, n, what, sizeof what), j,
                              out[j].ndim > TOPLU_MAX_DIMS ? "too high a" : "no known");
        }
      }
      for (int d = 0; d < out[j].ndim; d++)
        if (concrete && out[j].dims[d] < 0) {
          for (int k = 0; k < 8; k++) free(ctx.out_const[k]);
          return toplu__errorf(err, TOPLU_ERR_INTERNAL, "%s: %s: output %d dim %d left unknown at plan time", g->path,
                              toplu__node_describe(g, n, what, sizeof what), j, d);
        }
      if (!out[j].data && n->outputs[j] >= 0) outs_const = 0;
      /* No value past TOPLU_MAX_ELEMENTS, so the schemas after this node
       * and the planner never multiply dims that wrap int64. */
      if (!known_numel_fits(&out[j])) {
        char shp[160];
        for (int k = 0; k < 8; k++) free(ctx.out_const[k]);
        /* at load the model's own constants and declared dims fix it: a bad model (exit 2), as an input declared
         * that large is; at plan time the bound inputs do: out of memory, as the plan's own check says (a fresh
         * user's finding of 2026-12-07: Tile, Expand, Pad by constants past 2^40 exited 1) */
        return toplu__errorf(err, concrete ? TOPLU_ERR_OUT_OF_MEMORY : TOPLU_ERR_INVALID_MODEL,
                            "%s: %s: output %d would have shape %s: more than "
                            TOPLU_MAX_ELEMENTS_TEXT " elements", g->path, toplu__node_describe(g, n, what, sizeof what),
                            j, toplu__graph_shape_format(g, out[j].ndim, out[j].dims, shp, sizeof shp));
      }
    }
    /* Fold: all inputs constant (and there are inputs, or it's a source like Constant),
     * unless the outputs are so large that computing them per run is the better deal
     * (a ConstantOfShape or Expand of many megabytes, made outside any allocator limit). */
    /* Control flow is never folded through a kernel: graph/control.c
     * inlines it when what steers it is known. */
    /* Nor a node that draws random numbers (RandomNormal, ...): each run draws anew. */
    if (!outs_const && all_const && eval && !toplu__control_is(n) && !toplu__seq_op(n->domain, n->op_type) &&
        !(!*n->domain && !strncmp(n->op_type, "Random", 6))) {
      int known = 1;
      uint64_t fold_bytes = 0;
      for (int j = 0; j < n->n_outputs; j++) {
        uint64_t e = 1;
        for (int d = 0; d < out[j].ndim; d++) {
          if (out[j].dims[d] < 0) known = 0;
          else if (out[j].dims[d] && e > TOPLU_MAX_ELEMENTS / (uint64_t)out[j].dims[d]) e = TOPLU_MAX_ELEMENTS;
          else e *= (uint64_t)out[j].dims[d];
        }
        fold_bytes += e * toplu_dtype_size(out[j].dtype);
      }
      if (fold_bytes > TOPLU_FOLD_MAX_BYTES) known = 0;
      if (known) {
        for (int k = 0; k < 8; k++) {
          free(ctx.out_const[k]);
          ctx.out_const[k] = NULL;
        }
        for (int j = 0; j < n->n_outputs; j++) out[j].data = NULL;
        st = eval(user, g, n, in, out, err);
        if (st) {
          for (int j = 0; j < n->n_outputs; j++) free(out[j].data);
          return st;
        }
        for (int j = 0; j < n->n_outputs; j++) {
          int v = n->outputs[j];
          if (v < 0) {
            free(out[j].data);
            continue;
          }
          if (table->owned[v]) free(vals[v].data);
          vals[v] = out[j];
          table->owned[v] = out[j].data != NULL;
        }
        table->folded[ni] = 1;
        return TOPLU_OK;
      }
    }
    for (int j = 0; j < n->n_outputs; j++) {
      int v = n->outputs[j];
      if (v < 0) continue;
      if (table->owned[v]) free(vals[v].data);
      table->owned[v] = 0;
      vals[v] = out[j];
      if (j < 8 && ctx.out_const[j]) {
        table->owned[v] = 1;
        ctx.out_const[j] = NULL;
      } else {
        vals[v].data = NULL;
      }
    }
    for (int k = 0; k < 8; k++) free(ctx.out_const[k]);
    table->folded[ni] = (uint8_t)(outs_const && n->n_outputs > 0);
    if (!concrete && n->n_outputs > 0 && n->outputs[0] >= 0) {
      toplu__symvec_t sv;
      sym_set(table, n->outputs[0], !outs_const && sym_eval(table, n, in, &out[0], &sv) ? &sv : NULL);
    }
  }
  return TOPLU_OK;
}

toplu_status_t toplu__infer_range(toplu__graph_t *g, toplu__value_table_t *table, int concrete, toplu__eval_fn eval,
                                 void *user, int start, int *end, toplu_error_t *err) {
  toplu_tensor_t in_buf[MAX_IO], out_buf[MAX_IO];
  for (int ni = start; ni < *end;) {
    toplu__node_t *n = &g->nodes[ni];
    if (n->dead) {
      ni++;
      continue;
    }
    if (toplu__control_is(n)) {
      int expanded = 0, next = ni + 1, before = g->n_nodes;
      toplu_status_t st = toplu__control_expand(g, table, ni, concrete, eval, user, &expanded, &next, err);
      if (st) return st;
      if (expanded) {
        *end += g->n_nodes - before;
        ni = next;
        continue;
      }
      n = &g->nodes[ni];
    }
    if (concrete && toplu__seq_needs_lowering(g, n)) {
      int lowered = 0, next = ni + 1, before = g->n_nodes;
      toplu_status_t st = toplu__seq_lower(g, table, ni, concrete, &lowered, &next, err);
      if (st) return st;
      if (lowered) {
        *end += g->n_nodes - before;
        ni = next;
        continue;
      }
      n = &g->nodes[ni];
    }
    toplu_tensor_t *in = in_buf, *out = out_buf;
    if (n->n_inputs > MAX_IO || n->n_outputs > MAX_IO) { /* Concat of many unrolled steps, If's outer values */
      if (n->n_inputs > (1 << 20) || n->n_outputs > (1 << 20)) {
        char what[400];
        return toplu__errorf(err, TOPLU_ERR_UNSUPPORTED, "%s: %s: more than 2^20 inputs or outputs", g->path,
                            toplu__node_describe(g, n, what, sizeof what));
      }
      in = malloc(((size_t)n->n_inputs + 1) * sizeof *in);
      out = malloc(((size_t)n->n_outputs + 1) * sizeof *out);
      if (!in || !out) {
        free(in == in_buf ? NULL : in);
        free(out == out_buf ? NULL : out);
        return toplu__errorf(err, TOPLU_ERR_OUT_OF_MEMORY, "%s: out of memory", g->path);
      }
    }
    toplu_status_t st = infer_node(g, table, ni, concrete, eval, user, in, out, err);
    if (in != in_buf) free(in);
    if (out != out_buf) free(out);
    if (st) return st;
    ni++;
  }
  return TOPLU_OK;
}

toplu_status_t toplu__infer_graph(toplu__graph_t *g, toplu__value_table_t *table, int concrete, toplu__eval_fn eval,
                                 void *user, toplu_error_t *err) {
  int n0 = g->n_nodes, end = g->n_nodes;
  toplu_status_t st = toplu__infer_range(g, table, concrete, eval, user, 0, &end, err);
  if (g->n_nodes != n0) toplu__graph_recount(g); /* control flow was inlined */
  return st;
}

/* Mark nodes dead when no graph output depends on them. */
static void eliminate_dead(toplu__graph_t *g) {
  uint8_t *live = calloc((size_t)g->n_values + 1, 1);
  if (!live) return;
  for (int i = 0; i < g->n_outputs; i++) live[g->outputs[i]] = 1;
  for (int ni = g->n_nodes - 1; ni >= 0; ni--) {
    toplu__node_t *n = &g->nodes[ni];
    if (n->dead) {
      /* A DequantizeLinear folded into a float constant that is still read
       * keeps its integer input, scale and zero point: graph/fuse.c runs a
       * QDQ Conv on those (toplu__graph_free_unread_consts frees them
       * after it). */
      if (!n->domain[0] && !strcmp(n->op_type, "DequantizeLinear") && n->n_outputs == 1 && n->outputs[0] >= 0 &&
          live[n->outputs[0]] && g->values[n->outputs[0]].konst.data)
        for (int j = 0; j < n->n_inputs; j++)
          if (n->inputs[j] >= 0) live[n->inputs[j]] = 1;
      continue;
    }
    int needed = 0;
    for (int j = 0; j < n->n_outputs; j++)
      if (n->outputs[j] >= 0 && live[n->outputs[j]]) needed = 1;
    if (!needed) {
      n->dead = 1;
      continue;
    }
    for (int j = 0; j < n->n_inputs; j++)
      if (n->inputs[j] >= 0) live[n->inputs[j]] = 1;
  }
  /* Constants nobody reads any more are freed. */
  for (int v = 0; v < g->n_values; v++)
    if (!live[v] && g->values[v].konst.data && g->values[v].graph_input < 0 && !g->values[v].konst_shared) {
      free(g->values[v].konst.data);
      g->values[v].konst.data = NULL;
    }
  free(live);
  toplu__graph_recount(g);
}

/* A graph input small enough to key plans on for control flow: every dim
 * known, at most 64 elements, and one element when floating point (a
 * sample rate, a mode flag, Range's start/limit/delta): never a data tensor. */
static int small_discrete(const toplu__value_t *v) {
  if (v->ndim < 0) return 0;
  int64_t n = 1;
  for (int d = 0; d < v->ndim; d++) {
    if (v->dims[d] < 0 || v->dims[d] > 64) return 0;
    n *= v->dims[d];
  }
  int fp = v->dtype == TOPLU_DTYPE_FLOAT || v->dtype == TOPLU_DTYPE_DOUBLE || v->dtype == TOPLU_DTYPE_FLOAT16 ||
           v->dtype == TOPLU_DTYPE_BFLOAT16;
  return fp ? n == 1 : n <= 64;
}

int toplu__graph_mark_value_inputs(toplu__graph_t *g) {
  /* bit 0: the value decides a shape; bit 1: it steers control flow (If's
   * condition, Loop's trip count and condition), which keys plans only on
   * small integer inputs: a condition computed from tensor data is refused
   * at plan time instead of making a plan per input (graph/control.h). */
  uint8_t *need = calloc((size_t)g->n_values + 1, 1);
  int *decider = calloc((size_t)g->n_values + 1, sizeof *decider); /* 1 + a node that needs the value's values */
  if (!need || !decider) {
    free(need);
    free(decider);
    return 0;
  }
  for (int ni = g->n_nodes - 1; ni >= 0; ni--) {
    const toplu__node_t *n = &g->nodes[ni];
    if (n->dead) continue;
    uint8_t pass = 0; /* do this node's outputs' values depend on its inputs' values? */
    int by = 0;
    for (int j = 0; j < n->n_outputs; j++)
      if (n->outputs[j] >= 0 && need[n->outputs[j]]) pass |= need[n->outputs[j]], by = by ? by : decider[n->outputs[j]];
    if (!strcmp(n->op_type, "Shape") || !strcmp(n->op_type, "Size")) pass = 0;
    /* a sequence position steers like a condition; SplitToSequence's split decides shapes */
    uint8_t mine = toplu__control_is(n) || (toplu__seq_op(n->domain, n->op_type) &&
                                            strcmp(n->op_type, "SplitToSequence")) ? 2 : 1;
    for (int j = 0; j < n->n_inputs; j++) {
      int v = n->inputs[j];
      if (v < 0) continue;
      need[v] |= pass;
      if (pass && !decider[v]) decider[v] = by;
      if (j < 32 && (n->schema->const_inputs >> j & 1u)) {
        need[v] |= mine;
        if (!decider[v]) decider[v] = ni + 1;
      }
    }
  }
  int count = 0;
  for (int i = 0; i < g->n_inputs; i++) {
    toplu__value_t *v = &g->values[g->inputs[i]];
    uint8_t k = need[g->inputs[i]];
    v->value_input = (k & 1) || ((k & 2) && small_discrete(v));
    v->value_decider = v->value_input ? decider[g->inputs[i]] : 0;
    count += v->value_input;
  }
  free(need);
  free(decider);
  return count;
}

toplu_status_t toplu__graph_infer(toplu__graph_t *g, toplu__eval_fn eval, void *user, toplu_error_t *err) {
  /* Remember declared shapes of outputs (hints) before inference overwrites them. */
  int n_out = g->n_outputs;
  toplu_tensor_t *declared = calloc((size_t)n_out + 1, sizeof *declared);
  if (!declared) return toplu__errorf(err, TOPLU_ERR_OUT_OF_MEMORY, "%s: out of memory", g->path);
  for (int i = 0; i < n_out; i++) {
    const toplu__value_t *v = &g->values[g->outputs[i]];
    declared[i].dtype = v->dtype;
    declared[i].ndim = v->ndim;
    if (v->ndim > 0) memcpy(declared[i].dims, v->dims, (size_t)v->ndim * sizeof(int64_t));
  }
  eliminate_dead(g);
  toplu__value_table_t *t = toplu__value_table_create(g);
  if (!t) {
    free(declared);
    return toplu__errorf(err, TOPLU_ERR_OUT_OF_MEMORY, "%s: out of memory", g->path);
  }
  toplu_status_t st = toplu__infer_graph(g, t, 0, eval, user, err);
  if (st == TOPLU_OK) {
    for (int v = 0; v < g->n_values; v++) {
      toplu__value_t *val = &g->values[v];
      if (val->konst.data || val->graph_input >= 0) continue;
      const toplu_tensor_t *x = &t->vals[v];
      val->dtype = x->dtype;
      val->ndim = x->ndim;
      if (x->ndim > 0) memcpy(val->dims, x->dims, (size_t)x->ndim * sizeof(int64_t));
      if (x->data && t->owned[v]) {
        val->konst = *x;
        t->owned[v] = 0;
      }
    }
    for (int ni = 0; ni < g->n_nodes; ni++)
      if (t->folded[ni]) g->nodes[ni].dead = 1;
    /* Merge declared output shapes where inference could not tell. */
    for (int i = 0; i < n_out; i++) {
      toplu__value_t *v = &g->values[g->outputs[i]];
      const toplu_tensor_t *d = &declared[i];
      if (v->dtype == TOPLU_DTYPE_UNDEFINED) v->dtype = d->dtype;
      if (d->dtype != TOPLU_DTYPE_UNDEFINED && v->dtype != d->dtype) {
        st = toplu__errorf(err, TOPLU_ERR_INVALID_MODEL, "%s: graph output '%s' is declared %s but computes %s",
                          g->path, v->name, toplu_dtype_name(d->dtype), toplu_dtype_name(v->dtype));
        break;
      }
      if (v->ndim < 0 && d->ndim >= 0) {
        v->ndim = d->ndim;
        memcpy(v->dims, d->dims, sizeof v->dims);
      } else if (v->ndim == d->ndim) {
        for (int k = 0; k < v->ndim; k++)
          if (v->dims[k] < 0 && d->dims[k] < 0 && g->symbols[TOPLU_SYM_ID(v->dims[k])][0] == '?')
            v->dims[k] = d->dims[k]; /* keep the file's dim_param name */
      }
    }
  }
  toplu__value_table_free(g, t);
  free(declared);
  if (st == TOPLU_OK) {
    eliminate_dead(g);
    toplu__graph_mark_value_inputs(g);
  }
  return st;
}

void toplu__graph_free_unread_consts(toplu__graph_t *g) {
  uint8_t *read = calloc((size_t)g->n_values + 1, 1);
  if (!read) return;
  for (int i = 0; i < g->n_outputs; i++) read[g->outputs[i]] = 1;
  for (int ni = 0; ni < g->n_nodes; ni++) {
    const toplu__node_t *n = &g->nodes[ni];
    if (n->dead) continue;
    for (int j = 0; j < n->n_inputs; j++)
      if (n->inputs[j] >= 0) read[n->inputs[j]] = 1;
  }
  for (int v = 0; v < g->n_values; v++)
    if (!read[v] && g->values[v].konst.data && g->values[v].graph_input < 0 && !g->values[v].konst_shared) {
      free(g->values[v].konst.data);
      g->values[v].konst.data = NULL;
    }
  free(read);
}
