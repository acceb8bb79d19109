/* graph/sequence.c - sequence and optional ops lowered when a plan is built (graph/sequence.h). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "graph/control.h"
#include "graph/schema.h"
#include "graph/sequence.h"

static const char *const seq_ops[] = {"SequenceEmpty",      "SequenceConstruct", "SequenceInsert",
                                      "SequenceErase",      "SequenceAt",        "SequenceLength",
                                      "SplitToSequence",    "ConcatFromSequence", "Optional",
                                      "OptionalHasElement", "OptionalGetElement", NULL};

int toplu__seq_op(const char *domain, const char *op_type) {
  if (domain[0] && strcmp(domain, "ai.onnx")) return 0;
  for (int i = 0; seq_ops[i]; i++)
    if (!strcmp(op_type, seq_ops[i])) return 1;
  return 0;
}

static int is_list(const toplu__graph_t *g, int v) { return v >= 0 && g->values[v].seq_n >= 0; }

int toplu__seq_needs_lowering(const toplu__graph_t *g, const toplu__node_t *n) {
  if (toplu__seq_op(n->domain, n->op_type)) return 1;
  for (int j = 0; j < n->n_inputs; j++)
    if (is_list(g, n->inputs[j])) return 1;
  return 0;
}

int toplu__seq_set(toplu__graph_t *g, int v, toplu_kind_t kind, const int *items, int n) {
  int *c = malloc(((size_t)n + 1) * sizeof *c);
  if (!c) return -1;
  if (n) memcpy(c, items, (size_t)n * sizeof *c);
  toplu__value_t *val = &g->values[v];
  free(val->seq_items);
  val->seq_items = c;
  val->seq_n = n;
  val->seq_kind = kind;
  return 0;
}

/* ---- helpers ---- */

static const char *kind_word(const toplu__graph_t *g, int v) {
  return g->values[v].seq_kind == TOPLU_KIND_OPTIONAL ? "an optional" : "a sequence";
}

/* Set out (if requested) to the list items[0..n) (copied first: items may
 * point into a value that adding values moves). */
static toplu_status_t set_list(toplu__exp_t *x, int out, toplu_kind_t kind, const int *items, int n) {
  if (out < 0) return TOPLU_OK;
  return toplu__seq_set(x->g, out, kind, items, n) ? toplu__exp_oom(x) : TOPLU_OK;
}

/* out = in: a list is shared (its items are values), a tensor gets an Identity. */
static toplu_status_t alias(toplu__exp_t *x, int out, int in, const char *tag) {
  if (out < 0) return TOPLU_OK;
  if (is_list(x->g, in)) {
    toplu__value_t *v = &x->g->values[in];
    return set_list(x, out, v->seq_kind, v->seq_items, v->seq_n);
  }
  return toplu__exp_helper(x, "Identity", tag, &in, 1, out, NULL, 0, 0);
}

/* A constant scalar (int64 or bool) given to out through an Identity, which inference folds. */
static toplu_status_t const_out(toplu__exp_t *x, int out, toplu_dtype_t dt, int64_t val) {
  if (out < 0) return TOPLU_OK;
  uint8_t b = (uint8_t)(val != 0);
  int c = toplu__exp_const(x, dt == TOPLU_DTYPE_BOOL ? "toplu_bool" : "toplu_length", dt,
                           dt == TOPLU_DTYPE_BOOL ? (const void *)&b : (const void *)&val, 1, 1);
  if (c < 0) return toplu__exp_oom(x);
  return toplu__exp_helper(x, "Identity", "value", &c, 1, out, NULL, 0, 0);
}

/* Input j must be a sequence (a list of kind SEQUENCE). */
static toplu_status_t need_sequence(toplu__exp_t *x, int j) {
  const toplu__node_t *n = &x->g->nodes[x->owner];
  int v = j < n->n_inputs ? n->inputs[j] : -1;
  if (v >= 0 && is_list(x->g, v) && x->g->values[v].seq_kind == TOPLU_KIND_SEQUENCE) return TOPLU_OK;
  return toplu__errorf(x->err, TOPLU_ERR_INVALID_MODEL, "%s: %s: input %d '%s' is %s, not a sequence", x->g->path,
                      x->owner_what, j, v >= 0 ? x->g->values[v].name : "",
                      v < 0 ? "absent" : is_list(x->g, v) ? "an optional" : "a tensor");
}

/* Input j must be a tensor (not a list). */
static toplu_status_t need_tensor(toplu__exp_t *x, int j) {
  const toplu__node_t *n = &x->g->nodes[x->owner];
  int v = n->inputs[j];
  if (v < 0 || !is_list(x->g, v)) return TOPLU_OK;
  return toplu__errorf(x->err, TOPLU_ERR_UNSUPPORTED, "%s: %s: input %d '%s' is %s; toplu takes only tensors there "
                      "(no sequences of sequences)", x->g->path, x->owner_what, j, x->g->values[v].name,
                      kind_word(x->g, v));
}

/* A position input (j) as a number in [lo, hi] after adding n to a negative
 * one; absent: dflt. */
static toplu_status_t position(toplu__exp_t *x, int j, int n, int64_t dflt, int64_t lo, int64_t hi, int64_t *out) {
  const toplu__node_t *n_ = &x->g->nodes[x->owner];
  int v = j < n_->n_inputs ? n_->inputs[j] : -1;
  *out = dflt;
  if (v < 0) return TOPLU_OK;
  if (!x->t->vals[v].data)
    return toplu__errorf(x->err, TOPLU_ERR_UNSUPPORTED,
                        "%s: %s: its position '%s' is computed from tensor values at run time; toplu lowers sequences "
                        "when the plan is built, so positions must be constants, shapes or loop counters",
                        x->g->path, x->owner_what, x->g->values[v].name);
  int64_t p;
  toplu_status_t st = toplu__exp_scalar(x, v, "position", &p);
  if (st) return st;
  if (p < 0) p += n;
  if (p < lo || p > hi)
    return toplu__errorf(x->err, TOPLU_ERR_SHAPE, "%s: %s: position %lld is outside [%lld, %lld] for a "
                        "sequence of %d", x->g->path, x->owner_what, (long long)(p < lo ? p - n : p),
                        (long long)(lo - n), (long long)(hi), n);
  *out = p;
  return TOPLU_OK;
}

/* A 1-D int64 constant of one element. */
static int const1(toplu__exp_t *x, const char *name, int64_t v) {
  return toplu__exp_const(x, name, TOPLU_DTYPE_INT64, &v, 1, 0);
}

/* ---- the ops ---- */

static toplu_status_t insert_erase(toplu__exp_t *x, int insert) {
  toplu_status_t st = need_sequence(x, 0);
  if (st || (insert && (st = need_tensor(x, 1)))) return st;
  const toplu__node_t *n = &x->g->nodes[x->owner];
  const toplu__value_t *s = &x->g->values[n->inputs[0]];
  int len = s->seq_n;
  int64_t p;
  if (insert) st = position(x, 2, len, len, 0, len, &p);
  else if (!len)
    return toplu__errorf(x->err, TOPLU_ERR_SHAPE, "%s: %s: erasing from an empty sequence", x->g->path,
                        x->owner_what);
  else st = position(x, 1, len, len - 1, 0, len - 1, &p);
  if (st) return st;
  int *items = malloc(((size_t)len + 2) * sizeof *items);
  if (!items) return toplu__exp_oom(x);
  int k = 0;
  for (int i = 0; i < len; i++) {
    if (insert && i == p) items[k++] = n->inputs[1];
    if (!insert && i == p) continue;
    items[k++] = s->seq_items[i];
  }
  if (insert && p == len) items[k++] = n->inputs[1];
  st = set_list(x, n->outputs[0], TOPLU_KIND_SEQUENCE, items, k);
  free(items);
  return st;
}

static toplu_status_t split_to_sequence(toplu__exp_t *x) {
  toplu__graph_t *g = x->g;
  toplu_status_t st = need_tensor(x, 0);
  if (st) return st;
  const toplu__node_t *n = &g->nodes[x->owner];
  int in = n->inputs[0], sv = n->n_inputs > 1 ? n->inputs[1] : -1, out = n->outputs[0];
  const toplu_tensor_t xt = x->t->vals[in];
  int64_t axis = toplu__node_attr_int(n, "axis", 0), keepdims = toplu__node_attr_int(n, "keepdims", 1);
  if (xt.ndim < 1)
    return toplu__errorf(x->err, TOPLU_ERR_INVALID_MODEL, "%s: %s: input '%s' is a scalar; there is no axis to split",
                        g->path, x->owner_what, g->values[in].name);
  if (axis < -xt.ndim || axis >= xt.ndim)
    return toplu__errorf(x->err, TOPLU_ERR_INVALID_MODEL, "%s: %s: axis %lld is out of range for rank %d", g->path,
                        x->owner_what, (long long)axis, xt.ndim);
  if (axis < 0) axis += xt.ndim;
  int64_t len = xt.dims[axis];
  /* piece lengths */
  int64_t np = 0, chunk = 1;
  const toplu_tensor_t *sp = sv >= 0 ? &x->t->vals[sv] : NULL;
  if (sp && !sp->data)
    return toplu__errorf(x->err, TOPLU_ERR_UNSUPPORTED, "%s: %s: its split '%s' is computed from tensor values at run "
                        "time; toplu needs it when the plan is built", g->path, x->owner_what, g->values[sv].name);
  if (sp && sp->ndim == 0) {
    chunk = toplu__tensor_get_int(sp, 0);
    if (chunk < 1)
      return toplu__errorf(x->err, TOPLU_ERR_INVALID_MODEL, "%s: %s: split %lld is not positive", g->path,
                          x->owner_what, (long long)chunk);
    np = (len + chunk - 1) / chunk;
  } else if (sp) {
    if (sp->ndim != 1)
      return toplu__errorf(x->err, TOPLU_ERR_INVALID_MODEL, "%s: %s: split has rank %d; a scalar or 1-D is expected",
                          g->path, x->owner_what, sp->ndim);
    np = sp->dims[0];
    int64_t sum = 0;
    for (int64_t i = 0; i < np; i++) {
      int64_t s = toplu__tensor_get_int(sp, i);
      if (s < 0 || s > len - sum)
        return toplu__errorf(x->err, TOPLU_ERR_INVALID_MODEL, "%s: %s: split lengths do not add up to dim %lld (%lld)",
                            g->path, x->owner_what, (long long)axis, (long long)len);
      sum += s;
    }
    if (sum != len)
      return toplu__errorf(x->err, TOPLU_ERR_INVALID_MODEL, "%s: %s: split lengths add up to %lld, dim %lld is %lld",
                          g->path, x->owner_what, (long long)sum, (long long)axis, (long long)len);
  } else {
    np = len;
  }
  if (np > TOPLU_CONTROL_MAX_ITERS)
    return toplu__errorf(x->err, TOPLU_ERR_UNSUPPORTED, "%s: %s: more than %d pieces", g->path, x->owner_what,
                        TOPLU_CONTROL_MAX_ITERS);
  int *items = malloc(((size_t)np + 1) * sizeof *items);
  if (!items) return toplu__exp_oom(x);
  int squeeze = !sp && !keepdims;
  int64_t start = 0;
  for (int64_t i = 0; i < np && !st; i++) {
    int64_t size = !sp ? 1 : sp->ndim == 0 ? (len - start < chunk ? len - start : chunk) : toplu__tensor_get_int(sp, i);
    char tag[64];
    snprintf(tag, sizeof tag, "slice%lld", (long long)i);
    int ins[4] = {in, const1(x, "toplu_starts", start), const1(x, "toplu_ends", start + size),
                  const1(x, "toplu_axes", axis)};
    int piece = toplu__exp_value(g, g->values[out].name);
    if (piece < 0 || ins[1] < 0 || ins[2] < 0 || ins[3] < 0) {
      st = toplu__exp_oom(x);
      break;
    }
    st = toplu__exp_helper(x, "Slice", tag, ins, 4, piece, NULL, 0, 0);
    if (!st && squeeze) {
      int sq = toplu__exp_value(g, g->values[out].name);
      if (sq < 0) {
        st = toplu__exp_oom(x);
        break;
      }
      snprintf(tag, sizeof tag, "squeeze%lld", (long long)i);
      if (g->opset >= 13) {
        int ax = const1(x, "toplu_axes", axis);
        int sin[2] = {piece, ax};
        st = ax < 0 ? toplu__exp_oom(x) : toplu__exp_helper(x, "Squeeze", tag, sin, 2, sq, NULL, 0, 0);
      } else {
        st = toplu__exp_helper(x, "Squeeze", tag, &piece, 1, sq, "axes", axis, 1);
      }
      piece = sq;
    }
    items[i] = piece;
    start += size;
  }
  if (!st) st = set_list(x, out, TOPLU_KIND_SEQUENCE, items, (int)np);
  if (!st) g->values[out].elem_dtype = xt.dtype;
  free(items);
  return st;
}

static toplu_status_t concat_from_sequence(toplu__exp_t *x) {
  toplu__graph_t *g = x->g;
  toplu_status_t st = need_sequence(x, 0);
  if (st) return st;
  const toplu__node_t *n = &g->nodes[x->owner];
  const toplu__attr_t *a = toplu__node_attr(n, "axis");
  if (!a || a->type != TOPLU_ATTR_INT)
    return toplu__errorf(x->err, TOPLU_ERR_INVALID_MODEL, "%s: %s: the INT attribute 'axis' is required", g->path,
                        x->owner_what);
  int64_t axis = a->i, new_axis = toplu__node_attr_int(n, "new_axis", 0);
  int s = n->inputs[0], out = n->outputs[0];
  int len = g->values[s].seq_n;
  if (!len)
    return toplu__errorf(x->err, TOPLU_ERR_SHAPE, "%s: %s: sequence '%s' is empty; there is nothing to "
                        "concatenate", g->path, x->owner_what, g->values[s].name);
  int *parts = malloc(((size_t)len + 1) * sizeof *parts);
  if (!parts) return toplu__exp_oom(x);
  memcpy(parts, g->values[s].seq_items, (size_t)len * sizeof *parts);
  for (int i = 0; i < len && !st && new_axis; i++) {
    char tag[64];
    snprintf(tag, sizeof tag, "unsqueeze%d", i);
    st = toplu__exp_unsqueeze(x, parts[i], axis, tag, &parts[i]);
  }
  if (!st && out >= 0) st = toplu__exp_helper(x, "Concat", "concat", parts, len, out, "axis", axis, 0);
  free(parts);
  return st;
}

static toplu_status_t lower(toplu__exp_t *x) {
  toplu__graph_t *g = x->g;
  const toplu__node_t *n = &g->nodes[x->owner];
  const char *op = n->op_type;
  int in0 = n->n_inputs > 0 ? n->inputs[0] : -1, out = n->n_outputs > 0 ? n->outputs[0] : -1;
  toplu_status_t st = TOPLU_OK;
  if (!toplu__seq_op(n->domain, op)) {
    if (!strcmp(op, "Identity") && !n->domain[0]) return alias(x, out, in0, "identity");
    for (int j = 0; j < n->n_inputs; j++)
      if (is_list(g, n->inputs[j]))
        return toplu__errorf(x->err, TOPLU_ERR_UNSUPPORTED, "%s: %s: input %d '%s' is %s; %s takes tensors", g->path,
                            x->owner_what, j, g->values[n->inputs[j]].name, kind_word(g, n->inputs[j]), op);
    return TOPLU_OK;
  }
  if (!strcmp(op, "SequenceEmpty")) {
    if ((st = set_list(x, out, TOPLU_KIND_SEQUENCE, NULL, 0))) return st;
    if (out >= 0) g->values[out].elem_dtype = (toplu_dtype_t)toplu__node_attr_int(n, "dtype", TOPLU_DTYPE_FLOAT);
    return TOPLU_OK;
  }
  if (!strcmp(op, "SequenceConstruct")) {
    for (int j = 0; j < n->n_inputs; j++) {
      if ((st = need_tensor(x, j))) return st;
      if (x->t->vals[n->inputs[j]].dtype != x->t->vals[in0].dtype)
        return toplu__errorf(x->err, TOPLU_ERR_INVALID_MODEL, "%s: %s: input %d '%s' is %s, input 0 is %s", g->path,
                            x->owner_what, j, g->values[n->inputs[j]].name,
                            toplu_dtype_name(x->t->vals[n->inputs[j]].dtype), toplu_dtype_name(x->t->vals[in0].dtype));
    }
    return set_list(x, out, TOPLU_KIND_SEQUENCE, n->inputs, n->n_inputs);
  }
  if (!strcmp(op, "SequenceInsert")) return insert_erase(x, 1);
  if (!strcmp(op, "SequenceErase")) return insert_erase(x, 0);
  if (!strcmp(op, "SequenceAt")) {
    if ((st = need_sequence(x, 0))) return st;
    int len = g->values[in0].seq_n;
    int64_t p;
    if (!len)
      return toplu__errorf(x->err, TOPLU_ERR_SHAPE, "%s: %s: reading from an empty sequence", g->path,
                          x->owner_what);
    if ((st = position(x, 1, len, 0, 0, len - 1, &p))) return st;
    return alias(x, out, g->values[in0].seq_items[p], "item");
  }
  if (!strcmp(op, "SequenceLength")) {
    if ((st = need_sequence(x, 0))) return st;
    return const_out(x, out, TOPLU_DTYPE_INT64, g->values[in0].seq_n);
  }
  if (!strcmp(op, "SplitToSequence")) return split_to_sequence(x);
  if (!strcmp(op, "ConcatFromSequence")) return concat_from_sequence(x);
  if (!strcmp(op, "Optional")) return set_list(x, out, TOPLU_KIND_OPTIONAL, in0 >= 0 ? &in0 : NULL, in0 >= 0);
  int none = in0 < 0 || (is_list(g, in0) && g->values[in0].seq_kind == TOPLU_KIND_OPTIONAL && !g->values[in0].seq_n);
  if (!strcmp(op, "OptionalHasElement")) return const_out(x, out, TOPLU_DTYPE_BOOL, !none);
  /* OptionalGetElement: an optional's element; a tensor or sequence is its own */
  if (none)
    return toplu__errorf(x->err, TOPLU_ERR_SHAPE, "%s: %s: optional '%s' holds no value", g->path,
                        x->owner_what, g->values[in0].name);
  if (is_list(g, in0) && g->values[in0].seq_kind == TOPLU_KIND_OPTIONAL)
    return alias(x, out, g->values[in0].seq_items[0], "element");
  return alias(x, out, in0, "element");
}

toplu_status_t toplu__seq_lower(toplu__graph_t *g, toplu__value_table_t *t, int ni, int concrete, int *lowered,
                               int *next, toplu_error_t *err) {
  *lowered = 0;
  *next = ni + 1;
  if (!concrete) return TOPLU_OK;
  toplu__exp_t x = {.g = g, .t = t, .owner = ni, .err = err};
  toplu__node_describe(g, &g->nodes[ni], x.owner_what, sizeof x.owner_what);
  int old_values = g->n_values;
  toplu_status_t st = lower(&x);
  if (!st) {
    int at = ni + 1;
    st = toplu__exp_finish(&x, &at, old_values);
  }
  toplu__exp_free(&x);
  if (!st) *lowered = 1;
  return st;
}

toplu_status_t toplu__seq_map(toplu__exp_t *x, int concrete, toplu__eval_fn eval, void *user, int *next) {
  (void)concrete; (void)eval; (void)user; /* the walk infers the inlined bodies after the node */
  toplu__graph_t *g = x->g;
  const toplu__node_t *n = &g->nodes[x->owner];
  toplu_status_t st = TOPLU_OK;
  int n_expl = n->n_inputs - n->n_implicit, n_out = n->n_outputs;
  const toplu__onnx_model_t *body = toplu__exp_graph_attr(x, "body", &st);
  if (!body) return st;
  if (body->n_inputs != n_expl || body->n_outputs != n_out)
    return toplu__errorf(x->err, TOPLU_ERR_INVALID_MODEL, "%s: %s: body takes %d inputs and gives %d outputs; the node "
                        "has %d and %d", g->path, x->owner_what, body->n_inputs, body->n_outputs, n_expl, n_out);
  if ((st = need_sequence(x, 0))) return st;
  int len = g->values[n->inputs[0]].seq_n;
  for (int k = 1; k < n_expl; k++) {
    int v = n->inputs[k];
    if (is_list(g, v) && g->values[v].seq_kind != TOPLU_KIND_SEQUENCE) return need_sequence(x, k);
    if (is_list(g, v) && g->values[v].seq_n != len)
      return toplu__errorf(x->err, TOPLU_ERR_SHAPE, "%s: %s: input %d '%s' has %d items, input 0 has %d",
                          g->path, x->owner_what, k, g->values[v].name, g->values[v].seq_n, len);
  }
  if (len > TOPLU_CONTROL_MAX_ITERS)
    return toplu__errorf(x->err, TOPLU_ERR_UNSUPPORTED, "%s: %s: more than %d items to map", g->path, x->owner_what,
                        TOPLU_CONTROL_MAX_ITERS);
  int old_values = g->n_values;
  int *formal = malloc(((size_t)n_expl + 1) * sizeof(int));
  int *outs = malloc(((size_t)n_out + 1) * sizeof(int));
  int *acc = malloc(((size_t)len * (size_t)n_out + 1) * sizeof(int));
  int *items = malloc(((size_t)len + 1) * sizeof(int));
  if (!formal || !outs || !acc || !items) {
    st = toplu__exp_oom(x);
    goto out;
  }
  for (int i = 0; i < len && !st; i++) {
    n = &g->nodes[x->owner];
    for (int k = 0; k < n_expl; k++) {
      int v = n->inputs[k];
      formal[k] = is_list(g, v) ? g->values[v].seq_items[i] : v;
    }
    if (!(st = toplu__exp_inline(x, body, formal, n_expl, outs)))
      memcpy(&acc[(size_t)i * (size_t)n_out], outs, (size_t)n_out * sizeof(int));
  }
  n = &g->nodes[x->owner];
  for (int j = 0; j < n_out && !st; j++) {
    for (int i = 0; i < len; i++) items[i] = acc[(size_t)i * (size_t)n_out + (size_t)j];
    st = set_list(x, n->outputs[j], TOPLU_KIND_SEQUENCE, items, len);
    if (!st && n->outputs[j] >= 0) g->values[n->outputs[j]].elem_dtype = body->outputs[j].dtype;
  }
  if (st) goto out;
  int at = x->owner + 1;
  *next = at;
  st = toplu__exp_finish(x, &at, old_values);
out:
  free(formal);
  free(outs);
  free(acc);
  free(items);
  return st;
}
