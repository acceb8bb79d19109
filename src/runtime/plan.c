/* runtime/plan.c - building and running per-shape execution plans. */
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "core/strtensor.h"
#include "core/error.h"
#include "core/bigalloc.h"
#include "core/memory.h"
#include "core/log.h"
#include "graph/control.h"
#include "graph/memplan.h"
#include "graph/schema.h"
#include "graph/sequence.h"
#include "ops/backend.h"
#include "runtime/plan.h"

struct toplu__exec {
  toplu__exec_t *next;
  void *arena[TOPLU_PLAN_MAX_MEMS]; /* per memory of the plan */
  void **streams;            /* per backend of the plan */
  toplu__kernel_ctx_t *ctxs;  /* per step, data pointers resolved for this arena */
  toplu_tensor_t *tensors;   /* backing store of ctxs' in/out arrays */
  toplu_error_t err;
  double *prof_us;           /* per step, last run (when profiling) */
  double *prof_start;
};

#define ALIGN64(x) (((x) + 63) & ~(size_t)63)

static double now_us(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec * 1e6 + (double)ts.tv_nsec / 1e3;
}

/* ---- folding callback ---- */

/* Run a prepared kernel once on ctx's buffers, with workspace and a stream
 * of its own (bind/unbind around the run when the kernel has them). */
static toplu_status_t fold_run(const toplu__kernel_t *k, toplu__kernel_ctx_t *ctx, const toplu__kernel_info_t *info,
                               const char *what) {
  toplu__backend_t *backend = ctx->backend;
  void *ws = NULL, *stream = NULL;
  if (info->workspace_bytes && !(ws = aligned_alloc(64, ALIGN64(info->workspace_bytes))))
    return toplu__errorf(ctx->err, TOPLU_ERR_OUT_OF_MEMORY, "%s: %s: out of memory folding a constant",
                        ctx->graph->path, what);
  toplu_status_t st = backend->iface->stream_create(backend, &stream, ctx->err);
  if (st == TOPLU_OK) {
    ctx->workspace = ws;
    ctx->workspace_bytes = info->workspace_bytes;
    ctx->stream = stream;
    if (!k->bind || (st = k->bind(ctx)) == TOPLU_OK) {
      st = k->run(ctx);
      /* a folded string tensor owns its bytes (core/strtensor.h): copied
       * out of the kernel's pool and other constants before unbind */
      for (int j = 0; j < ctx->n_out && st == TOPLU_OK; j++) {
        toplu_tensor_t *o = &ctx->out[j];
        if (o->dtype != TOPLU_DTYPE_STRING || !o->data) continue;
        void *block = toplu__strings_clone(o->data, toplu_tensor_numel(o));
        if (!block) {
          st = toplu__errorf(ctx->err, TOPLU_ERR_OUT_OF_MEMORY, "%s: %s: out of memory folding a constant",
                             ctx->graph->path, what);
          break;
        }
        free(o->data);
        o->data = block;
      }
      if (k->unbind && ctx->exec_state) k->unbind(ctx);
      ctx->exec_state = NULL;
    }
    backend->iface->stream_destroy(backend, stream);
    ctx->stream = NULL;
    ctx->workspace = NULL;
  }
  free(ws);
  return st;
}

/* Reorder t (its bytes at src, laid out as from; NULL: plain) into dst,
 * laid out as to (NULL: plain), with the backend's reorder kernel. */
static toplu_status_t fold_reorder(toplu__backend_t *backend, const toplu__graph_t *g, const toplu__node_t *n,
                                   const toplu_tensor_t *t, const void *src, const void *from, void *dst,
                                   const void *to, const char *what, toplu_error_t *err) {
  const toplu__kernel_t *k = backend->iface->reorder;
  if (!k)
    return toplu__errorf(err, TOPLU_ERR_INTERNAL, "%s: %s: a layout was asked for, but the backend cannot reorder",
                        g->path, what);
  toplu_tensor_t in = *t, out = *t;
  in.data = (void *)src;
  out.data = dst;
  const void *mds[2] = {from, to};
  toplu__kernel_ctx_t ctx = {.graph = g, .node = n, .n_in = 1, .n_out = 1, .in = &in, .out = &out, .threads = 1,
                            .backend = backend, .in_md = mds, .err = err};
  toplu__kernel_info_t info = {.inplace_input = -1};
  toplu_status_t st = k->prepare ? k->prepare(&ctx, &info) : TOPLU_OK;
  if (st == TOPLU_OK) st = fold_run(k, &ctx, &info, what);
  if (k->release) k->release(&ctx);
  return st;
}

/* Constant folding runs the CPU backend's general kernel of the node once,
 * on plain buffers the fold owns.  A layout-aware kernel (a oneDNN Conv)
 * may still choose a blocked layout for its source, residual addend or
 * destination (info.want_md / out_md, padded to the channel block): those
 * inputs are reordered into the layout it asked for and such outputs are
 * written to a buffer of the layout's size and reordered to plain
 * afterwards, so the kernel never reads or writes a plain buffer as if it
 * were blocked, and the folded values are plain, as every value of the
 * graph is. */
toplu_status_t toplu__plan_eval_node(void *user, const toplu__graph_t *g, const toplu__node_t *n,
                                    const toplu_tensor_t *in, toplu_tensor_t *out, toplu_error_t *err) {
  char what[400];
  toplu__node_describe(g, n, what, sizeof what);
  const toplu__kernel_t *k = toplu__kernel_find(n->domain, n->op_type);
  if (!k) return toplu__errorf(err, TOPLU_ERR_UNSUPPORTED, "%s: %s: no kernel for op '%s'", g->path, what, n->op_type);
  /* inputs and outputs on the stack up to 64, else on the heap (an SSD's Concat of one tensor per class, 90 of
   * them, folded where its values follow an input's: refused until 2026-12-06) */
  toplu_tensor_t ins_s[64], outs_s[64], *ins = ins_s, *outs = outs_s;
  const void *in_md_s[64] = {0}, **in_md = in_md_s;
  if (n->n_inputs > 64 || n->n_outputs > 64) {
    size_t ni = (size_t)(n->n_inputs > 0 ? n->n_inputs : 1), no = (size_t)(n->n_outputs > 0 ? n->n_outputs : 1);
    ins = malloc(ni * sizeof *ins), outs = malloc(no * sizeof *outs), in_md = calloc(ni, sizeof *in_md);
    if (!ins || !outs || !in_md) {
      free(ins), free(outs), free((void *)in_md);
      return toplu__errorf(err, TOPLU_ERR_OUT_OF_MEMORY, "%s: %s: out of memory folding a constant", g->path, what);
    }
  }
  toplu__backend_t *backend = user, *own = NULL;
  if (!backend) {
    toplu_status_t st = toplu__backend_create_iface(&toplu__backend_cpu, NULL, &own, err);
    if (st) {
      if (ins != ins_s) free(ins), free(outs), free((void *)in_md);
      return st;
    }
    backend = own;
  }
  void *in_tmp[TOPLU_KERNEL_MAX_LAYOUT] = {0}, *out_tmp[TOPLU_KERNEL_MAX_LAYOUT] = {0};
  int n_in = n->n_inputs;
  for (int i = 0; i < n_in; i++) ins[i] = in[i];
  toplu__kernel_ctx_t ctx = {.graph = g, .node = n, .n_in = n_in, .n_out = n->n_outputs, .in = ins, .out = out,
                            .threads = 1, .alloc = NULL, .backend = backend, .err = err};
  toplu_status_t st = TOPLU_OK;
  int prepared = 0;
  for (int j = 0; j < n->n_outputs; j++) {
    out[j].data = NULL;
    if (n->outputs[j] < 0) continue;
    size_t bytes = toplu_tensor_nbytes(&out[j]);
    out[j].data = toplu__alloc_large(bytes ? bytes : 1); /* huge pages from 2 MiB (core/bigalloc.h) */
    if (!out[j].data) {
      st = toplu__errorf(err, TOPLU_ERR_OUT_OF_MEMORY, "%s: %s: out of memory folding a constant", g->path, what);
      goto done;
    }
  }
  if (k->flags & TOPLU_KERNEL_VIEW) {
    if (out[0].data && out[0].dtype == TOPLU_DTYPE_STRING) { /* owns its bytes, as fold_run's outputs */
      void *block = toplu__strings_clone(in[0].data, toplu_tensor_numel(&out[0]));
      if (!block) {
        st = toplu__errorf(err, TOPLU_ERR_OUT_OF_MEMORY, "%s: %s: out of memory folding a constant", g->path, what);
        goto done;
      }
      free(out[0].data);
      out[0].data = block;
    } else if (out[0].data) {
      memcpy(out[0].data, in[0].data, toplu_tensor_nbytes(&out[0]));
    }
    goto done;
  }
  toplu__kernel_info_t info = {.inplace_input = -1};
  prepared = 1;
  if (k->prepare && (st = k->prepare(&ctx, &info))) goto done;
  if (k->flags & TOPLU_KERNEL_LAYOUT) {
    int any_layout = 0;
    for (int i = 0; i < TOPLU_KERNEL_MAX_LAYOUT; i++) any_layout |= info.want_md[i] || info.out_md[i];
    if (any_layout && !backend->iface->layout_bytes) {
      st = toplu__errorf(err, TOPLU_ERR_INTERNAL, "%s: %s: the kernel asked for a layout its backend does not describe",
                         g->path, what);
      goto done;
    }
    /* inputs the kernel reads in a layout of its choosing */
    for (int i = 0; i < n_in && i < TOPLU_KERNEL_MAX_LAYOUT; i++) {
      if (!info.want_md[i] || !in[i].data) continue;
      size_t lb = backend->iface->layout_bytes(info.want_md[i]);
      if (!(in_tmp[i] = aligned_alloc(64, ALIGN64(lb ? lb : 1)))) {
        st = toplu__errorf(err, TOPLU_ERR_OUT_OF_MEMORY, "%s: %s: out of memory folding a constant", g->path, what);
        goto done;
      }
      if ((st = fold_reorder(backend, g, n, &in[i], in[i].data, NULL, in_tmp[i], info.want_md[i], what, err)))
        goto done;
      ins[i].data = in_tmp[i];
      in_md[i] = info.want_md[i];
    }
    ctx.in_md = in_md;
    /* outputs it writes in a layout of its choosing */
    for (int j = 0; j < n->n_outputs; j++) outs[j] = out[j];
    for (int j = 0; j < n->n_outputs && j < TOPLU_KERNEL_MAX_LAYOUT; j++) {
      if (!info.out_md[j]) continue;
      size_t lb = backend->iface->layout_bytes(info.out_md[j]);
      if (!(out_tmp[j] = aligned_alloc(64, ALIGN64(lb ? lb : 1)))) {
        st = toplu__errorf(err, TOPLU_ERR_OUT_OF_MEMORY, "%s: %s: out of memory folding a constant", g->path, what);
        goto done;
      }
      memset(out_tmp[j], 0, ALIGN64(lb ? lb : 1));
      outs[j].data = out_tmp[j];
    }
    ctx.out = outs;
  }
  if ((st = fold_run(k, &ctx, &info, what))) goto done;
  for (int j = 0; j < n->n_outputs && j < TOPLU_KERNEL_MAX_LAYOUT; j++)
    if (out_tmp[j] && out[j].data &&
        (st = fold_reorder(backend, g, n, &out[j], out_tmp[j], info.out_md[j], out[j].data, NULL, what, err)))
      goto done;
done:
  if (prepared && k->release && ctx.state) {
    ctx.out = out;
    k->release(&ctx);
  }
  for (int i = 0; i < TOPLU_KERNEL_MAX_LAYOUT; i++) {
    free(in_tmp[i]);
    free(out_tmp[i]);
  }
  if (st)
    for (int j = 0; j < n->n_outputs; j++) {
      free(out[j].data);
      out[j].data = NULL;
    }
  if (own) toplu__backend_free(own);
  if (ins != ins_s) free(ins), free(outs), free((void *)in_md);
  return st;
}

/* ---- binding ---- */

/* Refuse tensors of more than TOPLU_PLAN_MAX_ELEMENTS elements (2^40: 4 TiB
 * of float32), once shapes are inferred, before any kernel library sees
 * them.  TOPLU_ERR_OUT_OF_MEMORY names the tensor. */
static toplu_status_t check_sizes(const toplu__graph_t *g, const toplu__value_table_t *t, toplu_error_t *err) {
  char a[160];
  for (int v = 0; v < g->n_values; v++) {
    const toplu_tensor_t *x = &t->vals[v];
    if (toplu_shape_numel_limited(x->ndim, x->dims, TOPLU_PLAN_MAX_ELEMENTS) == UINT64_MAX)
      return toplu__errorf(err, TOPLU_ERR_OUT_OF_MEMORY, "%s: tensor '%s' would have shape %s: more than 2^40 elements",
                          g->path, g->values[v].name, toplu_shape_format(x->ndim, x->dims, a, sizeof a));
  }
  return TOPLU_OK;
}

static toplu_status_t bind_inputs(const toplu__graph_t *g, toplu__value_table_t *t, const toplu_tensor_t *inputs,
                                  int n_inputs, toplu_error_t *err) {
  if (n_inputs != g->n_inputs)
    return toplu__errorf(err, TOPLU_ERR_INVALID_ARGUMENT, "%s: %d inputs given, the model takes %d", g->path, n_inputs,
                        g->n_inputs);
  int64_t *symval = malloc(((size_t)g->n_symbols + 1) * sizeof *symval);
  int *symsrc = malloc(((size_t)g->n_symbols + 1) * sizeof *symsrc);
  if (!symval || !symsrc) {
    free(symval); free(symsrc);
    return toplu__errorf(err, TOPLU_ERR_OUT_OF_MEMORY, "out of memory");
  }
  for (int i = 0; i < g->n_symbols; i++) symval[i] = -1;
  toplu_status_t st = TOPLU_OK;
  char a[160], b[160];
  for (int i = 0; i < n_inputs && !st; i++) {
    const toplu__value_t *v = &g->values[g->inputs[i]];
    const toplu_tensor_t *x = &inputs[i];
    if (x->dtype != v->dtype) {
      st = toplu__errorf(err, TOPLU_ERR_SHAPE, "%s: input '%s' is %s, the model expects %s", g->path, v->name,
                        toplu_dtype_name(x->dtype), toplu_dtype_name(v->dtype));
      break;
    }
    if (x->ndim < 0 || x->ndim > TOPLU_MAX_DIMS || (v->ndim >= 0 && x->ndim != v->ndim)) {
      st = toplu__errorf(err, TOPLU_ERR_SHAPE, "%s: input '%s' has rank %d %s, the model expects rank %d", g->path,
                        v->name, x->ndim, toplu_shape_format(x->ndim > 0 ? x->ndim : 0, x->dims, a, sizeof a), v->ndim);
      break;
    }
    for (int d = 0; d < x->ndim && !st; d++) {
      if (x->dims[d] < 0) {
        st = toplu__errorf(err, TOPLU_ERR_SHAPE, "%s: input '%s' dim %d is negative", g->path, v->name, d);
      } else if (v->ndim >= 0 && v->dims[d] >= 0 && v->dims[d] != x->dims[d]) {
        st = toplu__errorf(err, TOPLU_ERR_SHAPE, "%s: input '%s' has shape %s, the model expects %lld at dim %d",
                          g->path, v->name, toplu_shape_format(x->ndim, x->dims, a, sizeof a),
                          (long long)v->dims[d], d);
      } else if (v->ndim >= 0 && v->dims[d] < 0) {
        int s = TOPLU_SYM_ID(v->dims[d]);
        if (symval[s] < 0) {
          symval[s] = x->dims[d];
          symsrc[s] = i;
        } else if (symval[s] != x->dims[d] && g->symbols[s][0] != '?') {
          st = toplu__errorf(err, TOPLU_ERR_SHAPE, "%s: input '%s' dim %d ('%s') is %lld, but input '%s' sets '%s' to %lld",
                            g->path, v->name, d, g->symbols[s], (long long)x->dims[d],
                            g->values[g->inputs[symsrc[s]]].name, g->symbols[s], (long long)symval[s]);
        }
      }
    }
    (void)b;
    if (st) break;
    toplu_tensor_t *tv = &t->vals[g->inputs[i]];
    tv->dtype = x->dtype;
    tv->ndim = x->ndim;
    memcpy(tv->dims, x->dims, sizeof tv->dims);
    tv->data = NULL;
    if (v->value_input) {
      /* Its values decide shapes: the plan holds a copy and is keyed on it
       * (a deep copy of a string tensor: one block, core/strtensor.h). */
      int str = x->dtype == TOPLU_DTYPE_STRING;
      size_t bytes = str && x->data ? toplu__strings_block_bytes(x->data, toplu_tensor_numel(x)) : toplu_tensor_nbytes(x);
      /* the node that reads its values, for the messages: "; node 'NAME' (OP) reads them" */
      char by[192] = "";
      if (v->value_decider > 0 && v->value_decider <= g->n_nodes) {
        const toplu__node_t *dn = &g->nodes[v->value_decider - 1];
        if (dn->name && *dn->name) snprintf(by, sizeof by, "; node '%s' (%s) reads them", dn->name, dn->op_type);
        else snprintf(by, sizeof by, "; node %d (%s) reads them", v->value_decider - 1, dn->op_type);
      }
      if (!x->data && bytes) {
        st = toplu__errorf(err, TOPLU_ERR_INVALID_ARGUMENT,
                          "%s: input '%s' decides tensor shapes or which branch runs, so planning needs its values, "
                          "not only its shape%s", g->path, v->name, by);
        break;
      }
      if (bytes > (1u << 20)) {
        st = toplu__errorf(err, TOPLU_ERR_UNSUPPORTED,
                          "%s: input '%s' decides tensor shapes (plans are keyed on its values%s) but holds %zu "
                          "bytes; toplu keys plans on at most 1 MiB of an input's values", g->path, v->name, by, bytes);
        break;
      }
      if (!(tv->data = malloc(bytes ? bytes : 1))) {
        st = toplu__errorf(err, TOPLU_ERR_OUT_OF_MEMORY, "out of memory");
        break;
      }
      if (str && bytes) toplu__strings_pack(tv->data, x->data, toplu_tensor_numel(x));
      else if (bytes) memcpy(tv->data, x->data, bytes);
      t->owned[g->inputs[i]] = 1;
    }
  }
  free(symval);
  free(symsrc);
  return st;
}

/* ---- sequence and optional inputs and outputs (graph/sequence.h) ---- */

/* How many flat inputs a value gives: -1 a tensor (one), -2 none (zero), n a sequence of n. */
static int value_count(const toplu_tensor_t *x) {
  if (x->kind == TOPLU_KIND_NONE) return -2;
  if (x->kind == TOPLU_KIND_SEQUENCE) return x->ndim == 1 && x->dims[0] >= 0 && x->dims[0] <= INT32_MAX ? (int)x->dims[0] : -3;
  return -1;
}

/* Check the values given for the model's inputs against what it declares
 * (g: the model's graph): kinds, a sequence's length and its items' dtype
 * (the session checked the items themselves first: runtime/session.c,
 * check_items).
 * *n_flat gets the number of flat inputs. */
static toplu_status_t check_kinds(const toplu__graph_t *g, const toplu_tensor_t *inputs, int n_inputs, int *n_flat,
                                  toplu_error_t *err) {
  *n_flat = 0;
  for (int i = 0; i < n_inputs; i++) {
    const toplu__value_t *v = &g->values[g->inputs[i]];
    const toplu_tensor_t *x = &inputs[i];
    toplu_kind_t want = v->kind == TOPLU_KIND_OPTIONAL ? v->elem_kind : v->kind;
    int c = value_count(x);
    if (c == -3 || (x->kind != TOPLU_KIND_TENSOR && x->kind != TOPLU_KIND_SEQUENCE && x->kind != TOPLU_KIND_NONE))
      return toplu__errorf(err, TOPLU_ERR_INVALID_ARGUMENT, "%s: input '%s': kind %d with rank %d is not a valid "
                          "value (a sequence has rank 1, dims[0] items)", g->path, v->name, (int)x->kind, x->ndim);
    if (x->kind == TOPLU_KIND_NONE ? v->kind != TOPLU_KIND_OPTIONAL : x->kind != want)
      return toplu__errorf(err, TOPLU_ERR_SHAPE, "%s: input '%s' is %s %s, but a %s was given", g->path, v->name,
                          v->kind == TOPLU_KIND_OPTIONAL ? "an optional" : "a",
                          toplu_kind_name(want), toplu_kind_name(x->kind));
    if (c == -1) (*n_flat)++;
    if (c < 0) continue;
    if (c > TOPLU_CONTROL_MAX_ITERS) /* each item becomes a value of the plan's graph */
      return toplu__errorf(err, TOPLU_ERR_UNSUPPORTED, "%s: input '%s' is a sequence of %d items; toplu plans "
                          "sequences of at most %d", g->path, v->name, c, TOPLU_CONTROL_MAX_ITERS);
    for (int k = 0; k < c; k++) { /* the item array and each item's kind and shape: the session's check_items */
      const toplu_tensor_t *it = &((const toplu_tensor_t *)x->data)[k];
      if (v->elem_dtype != TOPLU_DTYPE_UNDEFINED && it->dtype != v->elem_dtype)
        return toplu__errorf(err, TOPLU_ERR_SHAPE, "%s: input '%s' item %d is %s, the model expects %s", g->path,
                            v->name, k, toplu_dtype_name(it->dtype), toplu_dtype_name(v->elem_dtype));
    }
    *n_flat += c;
  }
  return TOPLU_OK;
}

/* Make the plan's own graph g take the flat inputs: a sequence input's
 * items become inputs "name[k]" and the input a list of them, an empty
 * optional an empty list, a present optional tensor an ordinary input.
 * *flat (malloc'ed) gets the flat tensors, in order; p gets the maps. */
static toplu_status_t flatten_inputs(toplu__plan_t *p, toplu__graph_t *g, const toplu_tensor_t *inputs, int n_inputs,
                                     toplu_tensor_t **flat, toplu_error_t *err) {
  int n_flat = 0;
  *flat = NULL;
  toplu_status_t st = check_kinds(g, inputs, n_inputs, &n_flat, err);
  if (st) return st;
  p->n_flat = n_flat;
  p->in_count = malloc(((size_t)n_inputs + 1) * sizeof(int));
  p->flat_input = malloc(((size_t)n_flat + 1) * sizeof(int));
  p->flat_item = malloc(((size_t)n_flat + 1) * sizeof(int));
  int *ins = malloc(((size_t)n_flat + 1) * sizeof(int));
  int *items = NULL;
  *flat = calloc((size_t)n_flat + 1, sizeof **flat);
  if (!p->in_count || !p->flat_input || !p->flat_item || !ins || !*flat) goto oom;
  int f = 0;
  for (int i = 0; i < n_inputs; i++) {
    int v = g->inputs[i], c = value_count(&inputs[i]);
    p->in_count[i] = c;
    g->values[v].graph_input = -1;
    if (c == -2) {
      if (toplu__seq_set(g, v, TOPLU_KIND_OPTIONAL, NULL, 0)) goto oom;
      continue;
    }
    if (c == -1) {
      if (g->values[v].kind != TOPLU_KIND_TENSOR) { /* a present optional tensor: an ordinary input */
        g->values[v].dtype = g->values[v].elem_dtype;
        g->values[v].kind = TOPLU_KIND_TENSOR;
      }
      g->values[v].graph_input = f;
      (*flat)[f] = inputs[i];
      p->flat_input[f] = i;
      p->flat_item[f] = -1;
      ins[f++] = v;
      continue;
    }
    if (c < 0) continue; /* not reached: check_kinds refused other values */
    free(items);
    if (!(items = malloc(((size_t)c + 1) * sizeof(int)))) goto oom;
    for (int k = 0; k < c; k++) {
      char name[600];
      snprintf(name, sizeof name, "%.500s[%d]", g->values[v].name, k);
      int iv = toplu__graph_add_value(g, toplu__graph_find_value(g, name) < 0 ? name : NULL);
      if (iv < 0) goto oom;
      const toplu_tensor_t *it = &((const toplu_tensor_t *)inputs[i].data)[k];
      g->values[iv].dtype = it->dtype;
      g->values[iv].graph_input = f;
      items[k] = iv;
      (*flat)[f] = *it;
      p->flat_input[f] = i;
      p->flat_item[f] = k;
      ins[f++] = iv;
    }
    if (toplu__seq_set(g, v, TOPLU_KIND_SEQUENCE, items, c)) goto oom;
  }
  free(items);
  free(g->inputs);
  g->inputs = ins;
  g->n_inputs = n_flat;
  return TOPLU_OK;
oom:
  free(items);
  free(ins);
  free(*flat);
  *flat = NULL;
  return toplu__errorf(err, TOPLU_ERR_OUT_OF_MEMORY, "out of memory building a plan");
}

/* The flat outputs of graph output value v: a tensor itself, a sequence's
 * items, nothing for an empty optional, a present optional's element.
 * *count as value_count; values appended to out[*n]. */
static toplu_status_t output_values(const toplu__plan_t *p, int v, int *count, int *out, int *n, toplu_error_t *err) {
  const toplu__graph_t *g = p->graph;
  const toplu__value_t *val = &g->values[v];
  if (val->seq_n < 0) {
    *count = -1;
    out[(*n)++] = v;
    return TOPLU_OK;
  }
  if (val->seq_kind == TOPLU_KIND_OPTIONAL) {
    if (!val->seq_n) {
      *count = -2;
      return TOPLU_OK;
    }
    if (g->values[val->seq_items[0]].seq_n < 0 || g->values[val->seq_items[0]].seq_kind == TOPLU_KIND_SEQUENCE)
      return output_values(p, val->seq_items[0], count, out, n, err);
  }
  for (int k = 0; k < val->seq_n; k++)
    if (g->values[val->seq_items[k]].seq_n >= 0)
      return toplu__errorf(err, TOPLU_ERR_UNSUPPORTED, "%s: output '%s' holds a sequence or optional inside a "
                          "sequence; toplu gives sequences of tensors", g->path, val->name);
  *count = val->seq_n;
  for (int k = 0; k < val->seq_n; k++) out[(*n)++] = val->seq_items[k];
  return TOPLU_OK;
}

/* Fill p's flat outputs from the (inferred) graph. */
static toplu_status_t flatten_outputs(toplu__plan_t *p, toplu_error_t *err) {
  const toplu__graph_t *g = p->graph;
  int lists = 0;
  size_t total = 0;
  for (int j = 0; j < g->n_outputs; j++) {
    const toplu__value_t *v = &g->values[g->outputs[j]];
    if (v->seq_n >= 0) {
      lists = 1;
      total += (size_t)v->seq_n;
      if (v->seq_n == 1 && g->values[v->seq_items[0]].seq_n > 0) total += (size_t)g->values[v->seq_items[0]].seq_n;
    } else {
      total++;
    }
  }
  p->flat_out_value = malloc((total + 1) * sizeof(int));
  p->output_pv = calloc(total + 1, sizeof(int));
  if (!p->flat_out_value || !p->output_pv) return toplu__errorf(err, TOPLU_ERR_OUT_OF_MEMORY, "out of memory building a plan");
  if (!lists) {
    memcpy(p->flat_out_value, g->outputs, (size_t)g->n_outputs * sizeof(int));
    p->n_flat_out = g->n_outputs;
    return TOPLU_OK;
  }
  p->out_count = malloc(((size_t)g->n_outputs + 1) * sizeof(int));
  p->out_first = malloc(((size_t)g->n_outputs + 1) * sizeof(int));
  if (!p->out_count || !p->out_first) return toplu__errorf(err, TOPLU_ERR_OUT_OF_MEMORY, "out of memory building a plan");
  int n = 0;
  for (int j = 0; j < g->n_outputs; j++) {
    p->out_first[j] = n;
    toplu_status_t st = output_values(p, g->outputs[j], &p->out_count[j], p->flat_out_value, &n, err);
    if (st) return st;
  }
  p->n_flat_out = n;
  return TOPLU_OK;
}

/* Data of flat input f in the caller's inputs. */
static void *input_data(const toplu__plan_t *p, const toplu_tensor_t *inputs, int f) {
  if (!p->flat_input) return inputs[f].data;
  int i = p->flat_input[f], k = p->flat_item[f];
  return k < 0 ? inputs[i].data : ((const toplu_tensor_t *)inputs[i].data)[k].data;
}

/* ---- building ---- */

static void exec_free(toplu__plan_t *p, toplu__exec_t *e);

void toplu__plan_destroy(toplu__plan_t *p) {
  if (!p) return;
  while (p->free_execs) {
    toplu__exec_t *e = p->free_execs;
    p->free_execs = e->next;
    exec_free(p, e);
  }
  for (int i = 0; i < p->n_steps; i++) {
    toplu__step_t *s = &p->steps[i];
    if (s->kernel && s->kernel->release && s->ctx.state) s->kernel->release(&s->ctx);
    if (s->owns_state) free(s->ctx.state);
    free(s->ctx.in);
    free(s->ctx.out);
    free(s->in_pv);
    free(s->out_pv);
    free(s->in_md);
    free(s->label);
  }
  free(p->steps);
  for (int i = 0; i < p->n_uploads; i++) {
    toplu__backend_t *b = p->backends[p->upload_backend[i]];
    b->iface->buffer_free(b, p->alloc, p->uploads[i]);
  }
  free(p->uploads);
  free(p->upload_backend);
  if (p->table) toplu__value_table_free(p->graph, p->table);
  toplu__graph_free(p->own_graph); /* after the table, which is sized by it */
  free(p->pvals);
  free(p->pv_of_value);
  free(p->output_pv);
  free(p->flat_out_value);
  free(p->out_count);
  free(p->out_first);
  free(p->in_count);
  free(p->flat_input);
  free(p->flat_item);
  free(p->input_shapes);
  free(p->prof_total_us);
  free(p->prof_last_us);
  free(p->prof_start_us);
  free(p->prof_io);
  free(p->prof_text);
  pthread_mutex_destroy(&p->lock);
  free(p);
}

static int64_t step_flops(const toplu__graph_t *g, const toplu__step_t *s) {
  if (s->aux) return 0;
  const toplu__schema_t *sc = s->node->schema;
  if (sc->flops) {
    toplu__infer_ctx_t ictx = {.graph = (toplu__graph_t *)g, .node = s->node, .n_in = s->ctx.n_in,
                              .n_out = s->ctx.n_out, .in = s->ctx.in, .out = s->ctx.out, .concrete = 1};
    return sc->flops(&ictx);
  }
  if (s->kernel->flags & TOPLU_KERNEL_VIEW) return 0;
  return s->ctx.n_out > 0 && s->ctx.out[0].ndim >= 0 ? toplu_tensor_numel(&s->ctx.out[0]) : 0;
}

/* 1 when plan value v is in layout md (NULL: plain) of backend b. */
static int md_same(const toplu__pval_t *v, const void *md, const toplu__backend_t *b) {
  if (!md) return !v->layout;
  return v->layout && v->lb == b && b->iface->layout_equal && b->iface->layout_equal(v->layout, md);
}

/* Add a plan value in layout md of backend b (NULL md: plain), living in
 * b's memory (b NULL: host memory); returns its index or -1. */
static int pval_add(toplu__plan_t *p, const toplu_tensor_t *t, int value, const void *md, const toplu__backend_t *b) {
  if (p->n_pvals == p->cap_pvals) {
    int cap = p->cap_pvals ? p->cap_pvals * 2 : 64;
    toplu__pval_t *nv = realloc(p->pvals, (size_t)cap * sizeof *nv);
    if (!nv) return -1;
    p->pvals = nv;
    p->cap_pvals = cap;
  }
  toplu__pval_t *v = &p->pvals[p->n_pvals];
  memset(v, 0, sizeof *v);
  v->t = *t;
  v->t.device = b ? b->iface->device : TOPLU_DEVICE_HOST;
  v->value = value;
  v->producer = -1;
  v->last_use = -1;
  v->bytes = toplu_tensor_nbytes(t);
  v->lb = b;
  if (md) {
    v->layout = md;
    v->bytes = b->iface->layout_bytes(md);
  }
  return p->n_pvals++;
}

static toplu__step_t *step_add(toplu__plan_t *p) {
  if (p->n_steps == p->cap_steps) {
    int cap = p->cap_steps ? p->cap_steps * 2 : 64;
    toplu__step_t *ns = realloc(p->steps, (size_t)cap * sizeof *ns);
    if (!ns) return NULL;
    p->steps = ns;
    p->cap_steps = cap;
  }
  toplu__step_t *s = &p->steps[p->n_steps];
  memset(s, 0, sizeof *s);
  return s;
}

static void step_label(toplu__step_t *s, const char *label) {
  size_t ll = strlen(label) + 1;
  if ((s->label = malloc(ll))) memcpy(s->label, label, ll);
}

static void account_prepare(toplu__plan_t *p, size_t before, const toplu__kernel_info_t *info) {
  size_t now = toplu_allocator_current(p->alloc);
  size_t held = now > before ? now - before : 0;
  if (info->workspace_bytes > p->workspace_bytes) p->workspace_bytes = info->workspace_bytes;
  p->weights_bytes += info->weight_bytes;
  /* everything prepare took from the allocator beyond the packed weights is kernel state */
  size_t fresh = info->weight_bytes - info->shared_weight_bytes; /* packed now, not reused from another plan */
  p->kernel_bytes += held > fresh ? held - fresh : 0;
}

static int backend_index(const toplu__plan_t *p, const toplu__backend_t *b) {
  for (int i = 0; i < p->n_backends; i++)
    if (p->backends[i] == b) return i;
  return p->cpu;
}

/* A step of one input and one output made by the plan (reorder or copy),
 * prepared with kernel k of backend bi.  Returns the new plan value or -1. */
static int aux_step(toplu__plan_t *p, int pv, const toplu__kernel_t *k, int bi, toplu__node_t *node, const void *out_md,
                    const toplu__backend_t *out_b, const char *label, toplu_error_t *err) {
  toplu_tensor_t t = p->pvals[pv].t;
  t.data = NULL;
  int nv = pval_add(p, &t, -1, out_md, out_b);
  toplu__step_t *s = nv >= 0 ? step_add(p) : NULL;
  if (!s) {
    toplu__errorf(err, TOPLU_ERR_OUT_OF_MEMORY, "out of memory building a plan");
    return -1;
  }
  s->node = node;
  s->kernel = k;
  s->backend = bi;
  s->aux = 1;
  s->in_pv = malloc(sizeof(int));
  s->out_pv = malloc(sizeof(int));
  s->in_md = calloc(2, sizeof(void *));
  s->ctx.in = calloc(1, sizeof(toplu_tensor_t));
  s->ctx.out = calloc(1, sizeof(toplu_tensor_t));
  if (!s->in_pv || !s->out_pv || !s->in_md || !s->ctx.in || !s->ctx.out) {
    free(s->in_pv); free(s->out_pv); free(s->in_md); free(s->ctx.in); free(s->ctx.out);
    toplu__errorf(err, TOPLU_ERR_OUT_OF_MEMORY, "out of memory building a plan");
    return -1;
  }
  s->in_pv[0] = pv;
  s->out_pv[0] = nv;
  s->in_md[0] = p->pvals[pv].layout;
  s->in_md[1] = p->pvals[nv].layout;
  toplu__kernel_ctx_t *c = &s->ctx;
  c->graph = p->graph;
  c->node = s->node;
  c->n_in = c->n_out = 1;
  c->in[0] = p->pvals[pv].t;
  c->in[0].data = NULL;
  c->out[0] = p->pvals[nv].t;
  c->in_md = s->in_md;
  c->threads = p->threads;
  c->alloc = p->alloc;
  c->backend = p->backends[bi];
  c->err = err;
  toplu__kernel_info_t info = {0};
  info.inplace_input = -1;
  size_t before = toplu_allocator_current(p->alloc);
  if (k->prepare && k->prepare(c, &info)) {
    if (c->state && k->release) k->release(c);
    free(s->in_pv); free(s->out_pv); free(s->in_md); free(s->ctx.in); free(s->ctx.out);
    return -1;
  }
  account_prepare(p, before, &info);
  c->err = NULL;
  s->inplace_input = -1;
  s->ws_bytes = info.workspace_bytes;
  s->impl = info.impl;
  step_label(s, label);
  p->pvals[nv].producer = p->n_steps;
  p->n_steps++;
  return nv;
}

/* The plan value holding pv's data in layout md of backend b (NULL: plain):
 * pv itself, a copy made earlier, or a new copy made by a reorder step of
 * the backend that knows the layout, appended now.  Returns -1 with err set
 * on failure. */
static int in_layout(toplu__plan_t *p, int pv, const void *md, const toplu__backend_t *b, toplu_error_t *err) {
  if (md_same(&p->pvals[pv], md, b)) return pv;
  const toplu__backend_t *rb = md ? b : p->pvals[pv].lb; /* to plain: the backend that knows the source layout */
  for (int i = 0; i < p->n_pvals; i++) {
    const toplu__pval_t *c = &p->pvals[i];
    /* an earlier reorder of the same source into the same layout */
    if (c->value == -1 && c->producer >= 0 && p->steps[c->producer].node == &p->reorder_node &&
        p->steps[c->producer].in_pv[0] == pv && md_same(c, md, b))
      return i;
  }
  if (!rb || !rb->iface->reorder) {
    toplu__errorf(err, TOPLU_ERR_INTERNAL, "%s: no reorder kernel for a layout of backend '%s'", p->graph->path,
                 rb ? rb->iface->name : "?");
    return -1;
  }
  int nv = aux_step(p, pv, rb->iface->reorder, backend_index(p, rb), &p->reorder_node, md, rb, "Reorder", err);
  if (nv >= 0) p->n_reorders++;
  return nv;
}

/* ---- copies between memories ---- */

/* Copy step: input 0 in one backend's memory, output 0 (same dtype and
 * dims, plain) in another's; one of the two is host memory.  State: the
 * two backends. */
typedef struct copy_state {
  toplu__backend_t *src, *dst;
} copy_state_t;

/* ctx->stream is the stream of the non-host side (the step's backend): a
 * copy to host memory first waits for the work queued there, so the host
 * reads finished results; a copy to the device is queued on its stream,
 * ahead of the kernels that read it. */
static toplu_status_t copy_run(toplu__kernel_ctx_t *ctx) {
  const copy_state_t *cs = ctx->state;
  size_t bytes = toplu_tensor_nbytes(&ctx->out[0]);
  toplu_status_t st;
  if (cs->dst->iface->device == TOPLU_DEVICE_HOST) {
    if ((st = cs->src->iface->synchronize(cs->src, ctx->stream)) == TOPLU_OK)
      st = cs->src->iface->copy_to_host(cs->src, ctx->out[0].data, ctx->in[0].data, bytes, ctx->stream);
  } else {
    st = cs->dst->iface->copy_from_host(cs->dst, ctx->out[0].data, ctx->in[0].data, bytes, ctx->stream);
  }
  if (st)
    toplu__errorf(ctx->err, st, "%s: copying %zu bytes between backends '%s' and '%s' failed",
                  ctx->graph && ctx->graph->path ? ctx->graph->path : "<model>", bytes, cs->src->iface->name,
                  cs->dst->iface->name);
  return st;
}

static const toplu__kernel_t copy_kernel = {.op_type = "Copy", .domain = "toplu", .run = copy_run};

/* Upload a constant plan value into backend b's memory once, at plan time. */
static int upload_const(toplu__plan_t *p, int pv, int bi, toplu_error_t *err) {
  toplu__backend_t *b = p->backends[bi];
  for (int i = 0; i < p->n_pvals; i++) /* uploaded before */
    if (p->pvals[i].value == -1 && p->pvals[i].producer == -2 - pv && p->pvals[i].t.device == b->iface->device)
      return i;
  size_t bytes = p->pvals[pv].bytes;
  void **nu = realloc(p->uploads, ((size_t)p->n_uploads + 1) * sizeof *nu);
  if (nu) p->uploads = nu;
  int *nb = realloc(p->upload_backend, ((size_t)p->n_uploads + 1) * sizeof *nb);
  if (nb) p->upload_backend = nb;
  void *buf = nu && nb ? b->iface->buffer_alloc(b, p->alloc, bytes ? bytes : 1) : NULL;
  if (!buf) {
    toplu__errorf(err, TOPLU_ERR_OUT_OF_MEMORY, "%s: cannot allocate %zu bytes of backend '%s' memory for a constant",
                 p->graph->path, bytes, b->iface->name);
    return -1;
  }
  p->uploads[p->n_uploads] = buf;
  p->upload_backend[p->n_uploads] = bi;
  p->n_uploads++;
  toplu_status_t st = b->iface->copy_from_host(b, buf, p->pvals[pv].t.data, bytes, NULL);
  if (st) {
    toplu__errorf(err, st, "%s: copying a constant to backend '%s' failed", p->graph->path, b->iface->name);
    return -1;
  }
  toplu_tensor_t t = p->pvals[pv].t;
  t.data = buf;
  int nv = pval_add(p, &t, -1, NULL, b);
  if (nv < 0) {
    toplu__errorf(err, TOPLU_ERR_OUT_OF_MEMORY, "out of memory building a plan");
    return -1;
  }
  p->pvals[nv].producer = -2 - pv; /* marks an upload of pv (< -1: no step produces it) */
  p->weights_bytes += bytes;
  p->upload_bytes += bytes;
  return nv;
}

/* The plan value holding (plain) pv's data in the memory of backend bi:
 * pv itself, an earlier copy, an uploaded constant, or a new Copy step. */
static int on_device(toplu__plan_t *p, int pv, int bi, toplu_error_t *err) {
  toplu__backend_t *b = p->backends[bi];
  int dev = b->iface->device;
  if (p->pvals[pv].t.device == dev) return pv;
  if (p->pvals[pv].t.data && p->pvals[pv].producer < 0 && dev != TOPLU_DEVICE_HOST) return upload_const(p, pv, bi, err);
  if (p->pvals[pv].t.device != TOPLU_DEVICE_HOST && dev != TOPLU_DEVICE_HOST) {
    /* between two non-host memories: through host memory */
    int h = on_device(p, pv, p->cpu, err);
    return h < 0 ? -1 : on_device(p, h, bi, err);
  }
  for (int i = 0; i < p->n_pvals; i++) {
    const toplu__pval_t *c = &p->pvals[i];
    if (c->value == -1 && c->producer >= 0 && p->steps[c->producer].node == &p->copy_node &&
        p->steps[c->producer].in_pv[0] == pv && c->t.device == dev)
      return i;
  }
  /* the backend on the non-host side does the copy */
  int src_bi = dev == TOPLU_DEVICE_HOST ? backend_index(p, p->pvals[pv].lb) : bi;
  toplu__backend_t *src_b = dev == TOPLU_DEVICE_HOST ? p->backends[src_bi] : p->backends[p->cpu];
  copy_state_t *cs = malloc(sizeof *cs);
  if (!cs) {
    toplu__errorf(err, TOPLU_ERR_OUT_OF_MEMORY, "out of memory building a plan");
    return -1;
  }
  cs->src = src_b;
  cs->dst = b;
  int nv = aux_step(p, pv, &copy_kernel, src_bi, &p->copy_node, NULL, dev == TOPLU_DEVICE_HOST ? NULL : b, "Copy",
                    err);
  if (nv < 0) {
    free(cs);
    return -1;
  }
  p->steps[p->pvals[nv].producer].ctx.state = cs;
  p->steps[p->pvals[nv].producer].owns_state = 1;
  p->n_copies++;
  return nv;
}

/* Try one kernel k of backend bi for node n: set up the step's ctx with the
 * given input plan values, call supports() and prepare.  TOPLU_ERR_UNSUPPORTED
 * lets the caller try the next candidate. */
static toplu_status_t prepare_node(toplu__plan_t *p, toplu__step_t *s, const toplu__node_t *n, const toplu__kernel_t *k,
                                   int bi, const int *in_pv, toplu__kernel_info_t *info, toplu_error_t *err) {
  toplu__kernel_ctx_t *c = &s->ctx;
  memset(c, 0, sizeof *c);
  c->graph = p->graph;
  c->node = n;
  c->n_in = n->n_inputs;
  c->n_out = n->n_outputs;
  c->in = calloc((size_t)n->n_inputs + 1, sizeof *c->in);
  c->out = calloc((size_t)n->n_outputs + 1, sizeof *c->out);
  s->in_md = calloc((size_t)n->n_inputs + 1, sizeof(void *));
  if (!c->in || !c->out || !s->in_md) {
    free(c->in); free(c->out); free(s->in_md);
    c->in = c->out = NULL;
    s->in_md = NULL;
    return toplu__errorf(err, TOPLU_ERR_OUT_OF_MEMORY, "out of memory building a plan");
  }
  for (int j = 0; j < n->n_inputs; j++) {
    if (in_pv[j] < 0) {
      c->in[j].ndim = -1;
      continue;
    }
    const toplu__pval_t *v = &p->pvals[in_pv[j]];
    c->in[j] = v->t;
    s->in_md[j] = v->layout;
  }
  for (int j = 0; j < n->n_outputs; j++) {
    int v = n->outputs[j];
    if (v < 0) {
      c->out[j].ndim = -1;
      continue;
    }
    c->out[j] = p->table->vals[v];
    c->out[j].data = NULL;
    c->out[j].device = p->backends[bi]->iface->device;
  }
  c->in_md = s->in_md;
  c->threads = p->threads;
  c->alloc = p->alloc;
  c->backend = p->backends[bi];
  c->choices = p->choices;
  c->err = err;
  memset(info, 0, sizeof *info);
  info->inplace_input = (k->flags & TOPLU_KERNEL_INPLACE) ? 0 : -1;
  toplu_status_t st = TOPLU_OK;
  if (k->supports && !k->supports(c))
    st = toplu__errorf(err, TOPLU_ERR_UNSUPPORTED, "%s: backend '%s' has no kernel for this %s", p->graph->path,
                      p->backends[bi]->iface->name, n->op_type);
  else if (k->prepare)
    st = k->prepare(c, info);
  c->err = NULL;
  if (st && c->state && k->release) k->release(c); /* a failed prepare may leave partial state */
  if (st) {
    free(c->in);
    free(c->out);
    free(s->in_md);
    c->in = c->out = NULL;
    s->in_md = NULL;
  }
  return st;
}

/* Undo the reorder and copy steps and plan values added since a candidate
 * kernel was tried (it refused the node). */
typedef struct plan_mark {
  int n_steps, n_pvals, n_uploads;
  size_t weights_bytes, kernel_bytes;
} plan_mark_t;

static plan_mark_t plan_mark(const toplu__plan_t *p) {
  plan_mark_t m = {p->n_steps, p->n_pvals, p->n_uploads, p->weights_bytes, p->kernel_bytes};
  return m;
}

static void rollback(toplu__plan_t *p, plan_mark_t m) {
  int n_steps = m.n_steps, n_pvals = m.n_pvals, n_uploads = m.n_uploads;
  while (p->n_steps > n_steps) {
    toplu__step_t *s = &p->steps[--p->n_steps];
    if (s->kernel->release && s->ctx.state) s->kernel->release(&s->ctx);
    if (s->owns_state) free(s->ctx.state);
    if (s->node == &p->reorder_node) p->n_reorders--;
    if (s->node == &p->copy_node) p->n_copies--;
    free(s->ctx.in); free(s->ctx.out); free(s->in_pv); free(s->out_pv); free(s->in_md); free(s->label);
  }
  while (p->n_uploads > n_uploads) {
    p->n_uploads--;
    toplu__backend_t *b = p->backends[p->upload_backend[p->n_uploads]];
    b->iface->buffer_free(b, p->alloc, p->uploads[p->n_uploads]);
  }
  p->n_pvals = n_pvals;
  p->weights_bytes = m.weights_bytes;
  p->kernel_bytes = m.kernel_bytes;
}

/* 1 when input j of n is read at plan time only (the schema's const_inputs:
 * Reshape's shape, Resize's sizes...): it stays in host memory. */
static int plan_time_input(const toplu__node_t *n, int j) {
  return n->schema && j < 32 && (n->schema->const_inputs >> j & 1u);
}

/* Put input j where kernel k of backend bi reads it: as it is (layout-aware
 * kernels of the backend that made the layout), else plain in bi's memory. */
static int place_input(toplu__plan_t *p, const toplu__node_t *n, int j, int pv, const toplu__kernel_t *k, int bi,
                       toplu_error_t *err) {
  const toplu__backend_t *b = p->backends[bi];
  const toplu__pval_t *v = &p->pvals[pv];
  if (plan_time_input(n, j) && v->t.data) return pv;
  if (v->layout && !((k->flags & TOPLU_KERNEL_LAYOUT) && v->lb == b) && (pv = in_layout(p, pv, NULL, NULL, err)) < 0)
    return -1;
  return on_device(p, pv, bi, err);
}

static toplu_status_t add_node_step(toplu__plan_t *p, const toplu__node_t *n, uint8_t *const_kept, toplu_error_t *err) {
  const toplu__graph_t *g = p->graph;
  char what[400];
  int *in_pv = malloc(((size_t)n->n_inputs + 1) * sizeof *in_pv);
  int *orig = malloc(((size_t)n->n_inputs + 1) * sizeof *orig);
  if (!in_pv || !orig) {
    free(in_pv);
    free(orig);
    return toplu__errorf(err, TOPLU_ERR_OUT_OF_MEMORY, "out of memory building a plan");
  }
  toplu_status_t st = TOPLU_OK;
  int any_blocked = 0;
  for (int j = 0; j < n->n_inputs; j++) {
    int v = n->inputs[j];
    orig[j] = v >= 0 ? p->pv_of_value[v] : -1;
    if (v >= 0 && orig[j] < 0) {
      /* constants and inputs get their plan value on first use */
      toplu_tensor_t t = p->table->vals[v];
      if ((orig[j] = pval_add(p, &t, v, NULL, NULL)) < 0) {
        st = toplu__errorf(err, TOPLU_ERR_OUT_OF_MEMORY, "out of memory building a plan");
        goto out;
      }
      p->pv_of_value[v] = orig[j];
    }
    if (orig[j] >= 0 && p->pvals[orig[j]].layout) any_blocked = 1;
  }
  toplu__step_t tmp;
  toplu__kernel_info_t info;
  const toplu__kernel_t *use = NULL;
  int use_bi = -1, tried = 0;
  size_t before = 0;
  toplu_error_t why;
  toplu_error_clear(&why);
  for (int bi = 0; bi < p->n_backends && !use && !st; bi++) {
    const toplu__backend_t *b = p->backends[bi];
    if (!toplu__backend_takes(b, n->op_type)) continue;
    const toplu__kernel_t *cand[16];
    int nc = toplu__backend_candidates(b, n->domain, n->op_type, cand, 16);
    if (nc > 16) {
      st = toplu__errorf(err, TOPLU_ERR_INTERNAL, "%s: backend '%s' lists %d kernels for op '%s', more than 16",
                         g->path, b->iface->name, nc, n->op_type);
      break;
    }
    for (int ci = 0; ci < nc && !use && !st; ci++) {
      const toplu__kernel_t *k = cand[ci];
      if (k->flags & TOPLU_KERNEL_BLOCKED_ALT) {
        /* layout-aware alternatives: only when an input arrives in this backend's layout */
        int mine = 0;
        for (int j = 0; j < n->n_inputs; j++)
          if (orig[j] >= 0 && p->pvals[orig[j]].layout && p->pvals[orig[j]].lb == b) mine = 1;
        if (!any_blocked || !mine || (p->no_blocked && strstr(p->no_blocked, n->op_type))) continue;
      }
      tried++;
      plan_mark_t mark = plan_mark(p);
      for (int j = 0; j < n->n_inputs && !st; j++) {
        in_pv[j] = orig[j];
        if (orig[j] >= 0 && (in_pv[j] = place_input(p, n, j, orig[j], k, bi, err)) < 0)
          st = err && err->status ? err->status : TOPLU_ERR_INTERNAL;
      }
      if (st) break;
      memset(&tmp, 0, sizeof tmp);
      before = toplu_allocator_current(p->alloc);
      toplu_error_t e2;
      toplu_error_clear(&e2);
      toplu_status_t ks = prepare_node(p, &tmp, n, k, bi, in_pv, &info, &e2);
      if (!ks) {
        use = k;
        use_bi = bi;
      } else if (ks == TOPLU_ERR_UNSUPPORTED) {
        if (p->dump)
          toplu__logf(p->log, p->log_user, TOPLU_LOG_DEBUG, "  (%s kernel %s of backend '%s' not used: %s)",
                      k->flags & TOPLU_KERNEL_BLOCKED_ALT ? "blocked" : "plain", n->op_type, b->iface->name,
                      e2.message);
        if (!why.status || !(k->flags & TOPLU_KERNEL_BLOCKED_ALT)) why = e2;
        rollback(p, mark);
      } else {
        if (err) *err = e2;
        st = ks;
      }
    }
  }
  if (st) goto out;
  if (!use) {
    if (!tried)
      st = toplu__errorf(err, TOPLU_ERR_UNSUPPORTED, "%s: %s: no kernel for op '%s'", g->path,
                        toplu__node_describe(g, n, what, sizeof what), n->op_type);
    else {
      if (err) *err = why;
      st = why.status ? why.status : TOPLU_ERR_UNSUPPORTED;
    }
    goto out;
  }
  const toplu__backend_t *ub = p->backends[use_bi];
  /* Inputs the kernel wants in another layout. */
  for (int j = 0; j < n->n_inputs && j < TOPLU_KERNEL_MAX_LAYOUT; j++) {
    if (in_pv[j] < 0) continue;
    const void *want = NULL;
    int reorder = 0;
    if (info.want_md[j]) {
      want = info.want_md[j];
      reorder = !md_same(&p->pvals[in_pv[j]], want, ub);
    } else if (info.want_plain >> j & 1u) {
      reorder = p->pvals[in_pv[j]].layout != NULL;
    }
    if (reorder) {
      int nv = in_layout(p, in_pv[j], want, ub, err);
      if (nv < 0) {
        if (use->release) use->release(&tmp.ctx);
        free(tmp.ctx.in); free(tmp.ctx.out); free(tmp.in_md);
        st = err && err->status ? err->status : TOPLU_ERR_INTERNAL;
        goto out;
      }
      in_pv[j] = nv;
      tmp.ctx.in[j] = p->pvals[nv].t;
    }
  }
  for (int j = 0; j < n->n_inputs; j++)
    if (in_pv[j] >= 0) tmp.in_md[j] = p->pvals[in_pv[j]].layout;
  account_prepare(p, before, &info);
  /* Weights packed now from a constant this plan folded (its table owns it)
   * are the plan's own: no other plan has that constant. */
  for (int j = 0; j < n->n_inputs; j++) {
    int v = n->inputs[j];
    if (v >= 0 && p->table->owned && p->table->owned[v] && p->table->vals[v].data) {
      p->own_weight_bytes += info.weight_bytes - info.shared_weight_bytes;
      break;
    }
  }
  toplu__step_t *s = step_add(p);
  if (!s) {
    st = toplu__errorf(err, TOPLU_ERR_OUT_OF_MEMORY, "out of memory building a plan");
    goto out;
  }
  *s = tmp;
  s->node = n;
  s->kernel = use;
  s->backend = use_bi;
  s->ws_bytes = info.workspace_bytes;
  s->inplace_input = info.inplace_input;
  s->impl = info.impl;
  s->in_pv = malloc(((size_t)n->n_inputs + 1) * sizeof(int));
  s->out_pv = malloc(((size_t)n->n_outputs + 1) * sizeof(int));
  if (!s->in_pv || !s->out_pv) {
    st = toplu__errorf(err, TOPLU_ERR_OUT_OF_MEMORY, "out of memory building a plan");
    goto out;
  }
  int si = p->n_steps++;
  for (int j = 0; j < n->n_inputs; j++) {
    s->in_pv[j] = in_pv[j];
    if (in_pv[j] >= 0) {
      int v = n->inputs[j];
      if (p->pvals[in_pv[j]].t.data && p->pvals[in_pv[j]].value == v && !(j < 32 && (info.consumed_consts >> j & 1u)))
        const_kept[v] = 1;
    }
  }
  for (int j = 0; j < n->n_outputs; j++) {
    int v = n->outputs[j];
    const void *md = j < TOPLU_KERNEL_MAX_LAYOUT ? info.out_md[j] : NULL;
    toplu_tensor_t t = v >= 0 ? p->table->vals[v] : s->ctx.out[j];
    t.data = NULL;
    int nv = pval_add(p, &t, v, md, ub);
    if (nv < 0) {
      st = toplu__errorf(err, TOPLU_ERR_OUT_OF_MEMORY, "out of memory building a plan");
      goto out;
    }
    p->pvals[nv].producer = si;
    s->out_pv[j] = v >= 0 ? nv : -1;
    if (v >= 0) p->pv_of_value[v] = nv;
  }
  step_label(s, n->fused_name ? n->fused_name : n->op_type);
out:
  free(in_pv);
  free(orig);
  return st;
}

static const char *layout_name(const toplu__pval_t *v, char *buf, size_t size);

#define PROF_NAME 48 /* bytes of one layout or impl name in prof_text */

/* With profile: each step's inputs and outputs (dtype, dims, layout) and a
 * default impl name, for toplu_session_profile.  -1: out of memory. */
static int profile_io(toplu__plan_t *p) {
  size_t n_io = 0;
  for (int si = 0; si < p->n_steps; si++) n_io += (size_t)(p->steps[si].ctx.n_in + p->steps[si].ctx.n_out);
  p->prof_io = calloc(n_io + 1, sizeof *p->prof_io);
  p->prof_text = calloc(n_io + (size_t)p->n_steps + 1, PROF_NAME);
  if (!p->prof_io || !p->prof_text) return -1;
  toplu_profile_tensor_t *t = p->prof_io;
  char *txt = p->prof_text;
  for (int si = 0; si < p->n_steps; si++) {
    toplu__step_t *s = &p->steps[si];
    if (!s->impl) {
      if (s->kernel->flags & TOPLU_KERNEL_VIEW) s->impl = "toplu:view";
      else if (s->node == &p->copy_node) s->impl = "toplu:copy";
      else {
        snprintf(txt, PROF_NAME, "toplu:%s", p->backends[s->backend]->iface->name);
        s->impl = txt;
        txt += PROF_NAME;
      }
    }
    for (int io = 0; io < 2; io++) {
      int n = io ? s->ctx.n_out : s->ctx.n_in;
      const int *pv = io ? s->out_pv : s->in_pv;
      if (io) s->prof_out = t;
      else s->prof_in = t;
      for (int j = 0; j < n; j++, t++) {
        t->layout = "";
        t->ndim = -1;
        if (pv[j] < 0) continue;
        const toplu__pval_t *v = &p->pvals[pv[j]];
        t->dtype = v->t.dtype;
        t->ndim = v->t.ndim;
        memcpy(t->dims, v->t.dims, sizeof t->dims);
        t->layout = layout_name(v, txt, PROF_NAME);
        txt += PROF_NAME;
      }
    }
  }
  return 0;
}

toplu_status_t toplu__plan_build(const toplu__graph_t *g, const toplu_tensor_t *inputs, int n_inputs,
                                const toplu__plan_options_t *opts, toplu__plan_t **out, toplu_error_t *err) {
  *out = NULL;
  toplu_status_t st = TOPLU_OK;
  toplu__plan_t *p = calloc(1, sizeof *p);
  if (!p) return toplu__errorf(err, TOPLU_ERR_OUT_OF_MEMORY, "out of memory building a plan");
  pthread_mutex_init(&p->lock, NULL);
  if (toplu__graph_has_control(g)) {
    /* If/Loop/Scan are inlined into a copy this plan owns (graph/control.h). */
    if (!(p->own_graph = toplu__graph_clone(g))) {
      pthread_mutex_destroy(&p->lock);
      free(p);
      return toplu__errorf(err, TOPLU_ERR_OUT_OF_MEMORY, "out of memory building a plan");
    }
    g = p->own_graph;
  }
  p->graph = g;
  p->threads = opts->threads > 0 ? opts->threads : 1;
  p->alloc = opts->alloc;
  p->backends = opts->backends;
  p->n_backends = opts->n_backends;
  p->cpu = -1;
  for (int i = 0; i < p->n_backends; i++)
    if (p->backends[i]->iface == &toplu__backend_cpu && !p->backends[i]->ops) p->cpu = i;
  if (p->cpu < 0) {
    toplu__graph_free(p->own_graph);
    free(p);
    return toplu__errorf(err, TOPLU_ERR_INVALID_ARGUMENT, "plan: the backends lack the CPU backend for every op");
  }
  p->profile = opts->profile;
  p->no_blocked = opts->no_blocked;
  p->choices = opts->choices;
  p->dump = opts->dump;
  p->log = opts->log;
  p->log_user = opts->log_user;
  p->n_inputs = n_inputs;
  p->reorder_node.name = (char *)"reorder";
  p->reorder_node.op_type = (char *)"Reorder";
  p->reorder_node.domain = (char *)"";
  p->copy_node.name = (char *)"copy";
  p->copy_node.op_type = (char *)"Copy";
  p->copy_node.domain = (char *)"toplu";
  uint8_t *const_kept = NULL;
  int omp_prev = 0;
  int *buf_of = NULL;
  toplu__membuf_t *bufs = NULL;
  toplu_tensor_t *flat = NULL;
  if (n_inputs != g->n_inputs) {
    st = toplu__errorf(err, TOPLU_ERR_INVALID_ARGUMENT, "%s: %d inputs given, the model takes %d", g->path, n_inputs,
                       g->n_inputs);
    goto done;
  }
  {
    int lists = 0, n_flat = 0;
    for (int i = 0; i < n_inputs; i++) lists |= inputs[i].kind != TOPLU_KIND_TENSOR;
    for (int i = 0; i < g->n_inputs; i++) lists |= g->values[g->inputs[i]].kind != TOPLU_KIND_TENSOR;
    if (lists && !p->own_graph) /* a sequence given to a model of tensors */
      st = check_kinds(g, inputs, n_inputs, &n_flat, err);
    else if (lists)
      st = flatten_inputs(p, p->own_graph, inputs, n_inputs, &flat, err);
    if (st) goto done;
  }
  const toplu_tensor_t *fin = flat ? flat : inputs; /* the plan's graph's inputs */
  int n_fin = flat ? p->n_flat : n_inputs;
  p->input_shapes = calloc((size_t)n_fin + 1, sizeof *p->input_shapes);
  p->table = toplu__value_table_create(g);
  if (!p->input_shapes || !p->table) {
    st = toplu__errorf(err, TOPLU_ERR_OUT_OF_MEMORY, "out of memory building a plan");
    goto done;
  }
  for (int i = 0; i < n_fin; i++) {
    p->input_shapes[i] = fin[i];
    p->input_shapes[i].data = NULL;
  }
  if ((st = bind_inputs(g, p->table, fin, n_fin, err))) goto done;
  for (int i = 0; i < n_fin; i++) /* the key holds the values of value inputs */
    p->input_shapes[i].data = p->table->vals[g->inputs[i]].data;
  if ((st = toplu__infer_graph((toplu__graph_t *)g, p->table, 1, toplu__plan_eval_node, p->backends[p->cpu], err))) goto done;
  if ((st = flatten_outputs(p, err))) goto done;
  /* sized after inference: inlined control flow adds values */
  p->pv_of_value = malloc(((size_t)g->n_values + 1) * sizeof(int));
  const_kept = calloc((size_t)g->n_values + 1, 1);
  if (!p->pv_of_value || !const_kept) {
    st = toplu__errorf(err, TOPLU_ERR_OUT_OF_MEMORY, "out of memory building a plan");
    goto done;
  }
  for (int v = 0; v < g->n_values; v++) p->pv_of_value[v] = -1;
  if ((st = check_sizes(g, p->table, err))) goto done;
  /* oneDNN sizes its work by the calling thread's OpenMP setting: set it for
   * the kernels' prepare and give the caller's back at the end */
  omp_prev = omp_get_max_threads();
  omp_set_num_threads(p->threads);

  /* Graph inputs first, so their plan values are the caller's buffers. */
  for (int i = 0; i < g->n_inputs; i++) {
    int v = g->inputs[i];
    int pv = pval_add(p, &p->table->vals[v], v, NULL, NULL);
    if (pv < 0) {
      st = toplu__errorf(err, TOPLU_ERR_OUT_OF_MEMORY, "out of memory building a plan");
      goto done;
    }
    p->pvals[pv].t.data = p->table->vals[v].data; /* set for value inputs only */
    p->pv_of_value[v] = pv;
  }
  /* Steps: live nodes whose outputs are not all constants, plus reorders.
   * The backends may leave their kernels' costliest preparation (oneDNN's
   * JIT code) to the bracket's end, which does it on the plan's threads
   * (ops/backend.h prepare_begin). */
  for (int bi = 0; bi < p->n_backends; bi++)
    if (p->backends[bi]->iface->prepare_begin) p->backends[bi]->iface->prepare_begin(p->backends[bi]);
  for (int ni = 0; ni < g->n_nodes && !st; ni++) {
    const toplu__node_t *n = &g->nodes[ni];
    if (n->dead || p->table->folded[ni]) continue;
    st = add_node_step(p, n, const_kept, err);
  }
  for (int bi = p->n_backends - 1; bi >= 0; bi--)
    if (p->backends[bi]->iface->prepare_end) {
      toplu_status_t e = p->backends[bi]->iface->prepare_end(p->backends[bi], p->threads, !st, st ? NULL : err);
      if (!st) st = e;
    }
  if (st) goto done;
  /* Graph outputs leave in plain layout. */
  for (int i = 0; i < p->n_flat_out; i++) {
    int v = p->flat_out_value[i];
    int pv = p->pv_of_value[v];
    if (pv < 0) { /* a constant or an input given straight back */
      if ((pv = pval_add(p, &p->table->vals[v], v, NULL, NULL)) < 0) {
        st = toplu__errorf(err, TOPLU_ERR_OUT_OF_MEMORY, "out of memory building a plan");
        goto done;
      }
      p->pv_of_value[v] = pv;
    }
    /* plain, in host memory */
    if ((p->pvals[pv].layout && (pv = in_layout(p, pv, NULL, NULL, err)) < 0) ||
        (pv = on_device(p, pv, p->cpu, err)) < 0) {
      st = err && err->status ? err->status : TOPLU_ERR_INTERNAL;
      goto done;
    }
    p->output_pv[i] = pv;
  }

  /* pvals grew while steps were added: point every step's layouts at their final place. */
  for (int si = 0; si < p->n_steps; si++) {
    toplu__step_t *s = &p->steps[si];
    for (int j = 0; j < s->ctx.n_in; j++) s->in_md[j] = s->in_pv[j] >= 0 ? p->pvals[s->in_pv[j]].layout : NULL;
    if (s->aux) s->in_md[1] = p->pvals[s->out_pv[0]].layout;
    s->ctx.in_md = s->in_md;
  }

  /* Liveness. */
  for (int si = 0; si < p->n_steps; si++) {
    const toplu__step_t *s = &p->steps[si];
    for (int j = 0; j < s->ctx.n_in; j++)
      if (s->in_pv[j] >= 0) p->pvals[s->in_pv[j]].last_use = si;
  }
  for (int i = 0; i < p->n_flat_out; i++) p->pvals[p->output_pv[i]].last_use = p->n_steps;

  /* Storage: constants, inputs, arena buffers (views and in-place share). */
  buf_of = malloc(((size_t)p->n_pvals + 1) * sizeof(int));
  bufs = calloc((size_t)p->n_pvals + 1, sizeof *bufs);
  if (!buf_of || !bufs) {
    st = toplu__errorf(err, TOPLU_ERR_OUT_OF_MEMORY, "out of memory building a plan");
    goto done;
  }
  for (int i = 0; i < p->n_pvals; i++) {
    toplu__pval_t *v = &p->pvals[i];
    buf_of[i] = -1;
    if (v->value >= 0 && p->table->vals[v->value].data && v->producer < 0) {
      v->store.kind = TOPLU_STORE_CONST;
      v->store.konst = p->table->vals[v->value].data;
      v->t.data = (void *)v->store.konst;
      if (const_kept[v->value]) {
        p->weights_bytes += v->bytes;
        p->constant_bytes += v->bytes;
      }
    } else if (v->value >= 0 && g->values[v->value].graph_input >= 0 && v->producer < 0) {
      v->store.kind = TOPLU_STORE_INPUT;
      v->store.input = g->values[v->value].graph_input;
    } else if (v->value < 0 && v->producer < -1 && v->t.data) { /* a constant uploaded to a backend */
      v->store.kind = TOPLU_STORE_CONST;
      v->store.konst = v->t.data;
    }
  }
  /* One arena per memory the steps write: host memory first. */
  p->n_mems = 1;
  p->mem_device[0] = TOPLU_DEVICE_HOST;
  p->mem_backend[0] = p->cpu;
  for (int si = 0; si < p->n_steps; si++) {
    const toplu__backend_t *b = p->backends[p->steps[si].backend];
    int m = 0;
    while (m < p->n_mems && p->mem_device[m] != b->iface->device) m++;
    if (m == p->n_mems) {
      if (m == TOPLU_PLAN_MAX_MEMS) {
        st = toplu__errorf(err, TOPLU_ERR_UNSUPPORTED, "%s: a plan over more than %d memories", g->path,
                          TOPLU_PLAN_MAX_MEMS);
        goto done;
      }
      p->mem_device[m] = b->iface->device;
      p->mem_backend[m] = p->steps[si].backend;
      p->n_mems++;
    }
    if (p->steps[si].ws_bytes > p->mem_workspace[m]) p->mem_workspace[m] = p->steps[si].ws_bytes;
  }
  int n_bufs = 0;
  for (int si = 0; si < p->n_steps; si++) {
    toplu__step_t *s = &p->steps[si];
    for (int j = 0; j < s->ctx.n_out; j++) {
      int pv = s->out_pv[j];
      if (pv < 0) continue;
      toplu__pval_t *v = &p->pvals[pv];
      int in0 = s->ctx.n_in > 0 ? s->in_pv[0] : -1;
      int ip = s->inplace_input >= 0 && s->inplace_input < s->ctx.n_in ? s->in_pv[s->inplace_input] : -1;
      if (j == 0 && in0 >= 0 && (s->kernel->flags & TOPLU_KERNEL_VIEW)) {
        v->store = p->pvals[in0].store;
        if (v->store.kind == TOPLU_STORE_CONST) v->t.data = (void *)v->store.konst;
        if (v->store.kind == TOPLU_STORE_ARENA) {
          buf_of[pv] = buf_of[in0];
          if (v->last_use > bufs[buf_of[pv]].last) bufs[buf_of[pv]].last = v->last_use;
        }
        continue;
      }
      if (ip >= 0 && !(s->kernel->flags & TOPLU_KERNEL_INPLACE) && p->pvals[ip].store.kind == TOPLU_STORE_ARENA) {
        /* Only element-wise kernels may write a buffer another of their inputs reads. */
        for (int k = 0; k < s->ctx.n_in; k++)
          if (k != s->inplace_input && s->in_pv[k] >= 0 && buf_of[s->in_pv[k]] >= 0 &&
              buf_of[s->in_pv[k]] == buf_of[ip])
            ip = -1;
      }
      if (j == 0 && ip >= 0 && p->pvals[ip].store.kind == TOPLU_STORE_ARENA && bufs[buf_of[ip]].last == si &&
          (p->pvals[ip].value < 0 || !g->values[p->pvals[ip].value].graph_output) &&
          p->pvals[ip].t.dtype == v->t.dtype && p->pvals[ip].bytes == v->bytes &&
          !p->pvals[ip].layout == !v->layout && p->pvals[ip].t.device == v->t.device) {
        /* Other inputs of this node reading the same buffer are read before
         * or at the same element as it is written (kernels flagged so). */
        int b = buf_of[ip];
        v->store.kind = TOPLU_STORE_ARENA;
        v->store.buffer = b;
        buf_of[pv] = b;
        if (v->last_use > bufs[b].last) bufs[b].last = v->last_use;
        continue;
      }
      v->store.kind = TOPLU_STORE_ARENA;
      v->store.buffer = n_bufs;
      buf_of[pv] = n_bufs;
      bufs[n_bufs].size = v->bytes;
      bufs[n_bufs].first = si;
      bufs[n_bufs].last = v->last_use > si ? v->last_use : si;
      n_bufs++;
    }
  }
  /* Lay out each memory's buffers by liveness. */
  {
    int *mem_of_buf = malloc(((size_t)n_bufs + 1) * sizeof *mem_of_buf);
    toplu__membuf_t *sub = malloc(((size_t)n_bufs + 1) * sizeof *sub);
    int *idx = malloc(((size_t)n_bufs + 1) * sizeof *idx);
    if (!mem_of_buf || !sub || !idx) {
      free(mem_of_buf); free(sub); free(idx);
      st = toplu__errorf(err, TOPLU_ERR_OUT_OF_MEMORY, "out of memory building a plan");
      goto done;
    }
    for (int i = 0; i < p->n_pvals; i++) {
      toplu__pval_t *v = &p->pvals[i];
      if (v->store.kind != TOPLU_STORE_ARENA) continue;
      int m = 0;
      while (m < p->n_mems && p->mem_device[m] != v->t.device) m++;
      v->store.mem = m < p->n_mems ? m : 0;
      mem_of_buf[v->store.buffer] = v->store.mem;
    }
    p->activation_bytes = 0;
    p->workspace_bytes = 0;
    for (int m = 0; m < p->n_mems && !st; m++) {
      int k = 0;
      for (int b = 0; b < n_bufs; b++)
        if (mem_of_buf[b] == m) {
          idx[k] = b;
          sub[k++] = bufs[b];
        }
      if ((st = toplu__memplan(sub, k, &p->mem_activation[m])) != TOPLU_OK) {
        st = toplu__errorf(err, st, "out of memory planning the arena");
        break;
      }
      for (int i = 0; i < k; i++) bufs[idx[i]].offset = sub[i].offset;
      p->mem_workspace[m] = ALIGN64(p->mem_workspace[m]);
      p->activation_bytes += p->mem_activation[m];
      p->workspace_bytes += p->mem_workspace[m];
    }
    free(mem_of_buf);
    free(sub);
    free(idx);
    if (st) goto done;
  }
  for (int i = 0; i < p->n_pvals; i++)
    if (p->pvals[i].store.kind == TOPLU_STORE_ARENA) p->pvals[i].store.offset = bufs[p->pvals[i].store.buffer].offset;
  for (int v = 0; v < p->table->n_values; v++)
    if (p->table->owned && p->table->owned[v] && p->table->vals[v].data)
      p->folded_bytes += toplu_tensor_nbytes(&p->table->vals[v]);
  for (int i = 0; i < g->n_inputs; i++) p->input_bytes += toplu_tensor_nbytes(&p->table->vals[g->inputs[i]]);
  for (int i = 0; i < p->n_flat_out; i++) p->output_bytes += toplu_tensor_nbytes(&p->table->vals[p->flat_out_value[i]]);
  for (int si = 0; si < p->n_steps; si++) {
    toplu__step_t *s = &p->steps[si];
    s->flops = step_flops(g, s);
    p->flops += s->flops;
    if (s->kernel->flags & TOPLU_KERNEL_VIEW) continue;
    for (int j = 0; j < s->ctx.n_in; j++)
      if (s->in_pv[j] >= 0) {
        s->bytes_moved += (int64_t)p->pvals[s->in_pv[j]].bytes;
        if (!s->aux) s->plain_bytes += (int64_t)toplu_tensor_nbytes(&p->pvals[s->in_pv[j]].t);
      }
    for (int j = 0; j < s->ctx.n_out; j++)
      if (s->out_pv[j] >= 0) {
        s->bytes_moved += (int64_t)p->pvals[s->out_pv[j]].bytes;
        if (!s->aux) s->plain_bytes += (int64_t)toplu_tensor_nbytes(&p->pvals[s->out_pv[j]].t);
      }
    p->bytes_moved += s->bytes_moved;
  }
  if (p->profile) {
    p->prof_total_us = calloc((size_t)p->n_steps + 1, sizeof(double));
    p->prof_last_us = calloc((size_t)p->n_steps + 1, sizeof(double));
    p->prof_start_us = calloc((size_t)p->n_steps + 1, sizeof(double));
    if (!p->prof_total_us || !p->prof_last_us || !p->prof_start_us || profile_io(p)) {
      st = toplu__errorf(err, TOPLU_ERR_OUT_OF_MEMORY, "out of memory building a plan");
      goto done;
    }
  }
  if (p->dump) toplu__plan_dump(p, p->log, p->log_user);
done:
  if (omp_prev > 0) omp_set_num_threads(omp_prev);
  free(flat);
  free(const_kept);
  free(buf_of);
  free(bufs);
  if (st) {
    toplu__plan_destroy(p);
    return st;
  }
  *out = p;
  return TOPLU_OK;
}

static const char *layout_name(const toplu__pval_t *v, char *buf, size_t size) {
  const char *where = v->t.device == TOPLU_DEVICE_HOST ? "" : v->lb ? v->lb->iface->name : "device";
  if (!v->layout) {
    snprintf(buf, size, "%s%splain", where, *where ? ":" : "");
    return buf;
  }
  char l[96];
  snprintf(buf, size, "%s%s%s", where, *where ? ":" : "",
           v->lb->iface->layout_describe ? v->lb->iface->layout_describe(v->layout, l, sizeof l) : "layout");
  return buf;
}

void toplu__plan_dump(const toplu__plan_t *p, toplu_log_fn log, void *user) {
  if (!log) return;
  char a[64], shape[160], line[1024];
  toplu__logf(log, user, TOPLU_LOG_DEBUG,
              "plan for %s: %d steps (%d reorders), arena %zu + workspace %zu bytes, weights %zu bytes", p->graph->path,
              p->n_steps, p->n_reorders, p->activation_bytes, p->workspace_bytes, p->weights_bytes);
  for (int si = 0; si < p->n_steps; si++) {
    const toplu__step_t *s = &p->steps[si];
    size_t n = 0;
#define DUMP_ADD(...)                                                              \
  do {                                                                             \
    if (n < sizeof line) {                                                         \
      int k_ = snprintf(line + n, sizeof line - n, __VA_ARGS__);                   \
      n = k_ < 0 ? sizeof line : n + (size_t)k_;                                   \
    }                                                                              \
  } while (0)
    DUMP_ADD("  %3d %-24s %-28s", si, s->label ? s->label : "?", s->node->name);
    for (int j = 0; j < s->ctx.n_out; j++) {
      int pv = s->out_pv[j];
      if (pv < 0) continue;
      const toplu__pval_t *v = &p->pvals[pv];
      DUMP_ADD(" -> pv%d %s %s @%zu%s", pv, toplu_shape_format(v->t.ndim, v->t.dims, shape, sizeof shape),
               layout_name(v, a, sizeof a), v->store.offset, j == 0 && s->inplace_input >= 0 ? " (may reuse input)" : "");
    }
    DUMP_ADD("  <-");
    for (int j = 0; j < s->ctx.n_in; j++) DUMP_ADD(" pv%d", s->in_pv[j]);
#undef DUMP_ADD
    log(user, TOPLU_LOG_DEBUG, line);
  }
}

/* b has a's dtype and dims (and a's data where the plan is keyed on values). */
static int key_matches(const toplu_tensor_t *a, const toplu_tensor_t *b) {
  if (a->dtype != b->dtype || a->ndim != b->ndim || b->kind != TOPLU_KIND_TENSOR) return 0;
  for (int d = 0; d < a->ndim; d++)
    if (a->dims[d] != b->dims[d]) return 0;
  if (a->data && !toplu__tensor_data_equal(a, b)) return 0; /* strings by content */
  return 1;
}

int toplu__plan_matches(const toplu__plan_t *p, const toplu_tensor_t *inputs, int n_inputs) {
  if (n_inputs != p->n_inputs) return 0;
  if (!p->in_count) {
    for (int i = 0; i < n_inputs; i++)
      if (!key_matches(&p->input_shapes[i], &inputs[i])) return 0;
    return 1;
  }
  int f = 0;
  for (int i = 0; i < n_inputs; i++) {
    int c = value_count(&inputs[i]);
    if (c != p->in_count[i]) return 0;
    if (c == -1 && !key_matches(&p->input_shapes[f++], &inputs[i])) return 0;
    for (int k = 0; k < c; k++)
      if (!key_matches(&p->input_shapes[f++], &((const toplu_tensor_t *)inputs[i].data)[k])) return 0;
  }
  return 1;
}

size_t toplu__plan_arena_bytes(const toplu__plan_t *p) { return p->activation_bytes + p->workspace_bytes; }

/* The plan's own bytes with its arenas counted as it holds them (at least one when min_one). */
static size_t plan_bytes(toplu__plan_t *p, int min_one) {
  pthread_mutex_lock(&p->lock);
  size_t execs = (size_t)p->n_execs;
  pthread_mutex_unlock(&p->lock);
  if (min_one && execs < 1) execs = 1;
  return toplu__plan_arena_bytes(p) * execs + p->kernel_bytes + p->own_weight_bytes + p->upload_bytes +
         p->folded_bytes;
}

size_t toplu__plan_own_bytes(toplu__plan_t *p) { return plan_bytes(p, 1); }

size_t toplu__plan_held_bytes(toplu__plan_t *p) { return plan_bytes(p, 0); }

int toplu__plan_trim_execs(toplu__plan_t *p, int keep) {
  toplu__exec_t *drop = NULL;
  int n = 0;
  pthread_mutex_lock(&p->lock);
  while (p->n_execs > keep && p->free_execs) {
    toplu__exec_t *e = p->free_execs;
    p->free_execs = e->next;
    e->next = drop;
    drop = e;
    p->n_execs--;
    n++;
  }
  pthread_mutex_unlock(&p->lock);
  while (drop) {
    toplu__exec_t *e = drop;
    drop = e->next;
    exec_free(p, e);
  }
  return n;
}

static size_t mem_arena_bytes(const toplu__plan_t *p, int m) { return p->mem_activation[m] + p->mem_workspace[m]; }

/* ---- exec contexts ---- */

static void exec_free(toplu__plan_t *p, toplu__exec_t *e) {
  if (!e) return;
  if (e->ctxs)
    for (int i = 0; i < p->n_steps; i++)
      if (e->ctxs[i].exec_state && p->steps[i].kernel->unbind) p->steps[i].kernel->unbind(&e->ctxs[i]);
  if (e->streams)
    for (int i = 0; i < p->n_backends; i++)
      if (e->streams[i]) p->backends[i]->iface->stream_destroy(p->backends[i], e->streams[i]);
  free(e->streams);
  for (int m = 0; m < p->n_mems; m++)
    if (e->arena[m]) {
      toplu__backend_t *b = p->backends[p->mem_backend[m]];
      b->iface->buffer_free(b, p->alloc, e->arena[m]);
    }
  free(e->ctxs);
  free(e->tensors);
  free(e->prof_us);
  free(e->prof_start);
  free(e);
}

static void *resolve(const toplu__plan_t *p, const toplu__exec_t *e, int pv) {
  if (pv < 0) return NULL;
  const toplu__storage_t *s = &p->pvals[pv].store;
  switch (s->kind) {
    case TOPLU_STORE_CONST: return (void *)s->konst;
    case TOPLU_STORE_ARENA: return (char *)e->arena[s->mem] + s->offset;
    default: return NULL;
  }
}

/* Arenas from this size up are checked against the memory available before they are taken. */
#define ARENA_CHECK_BYTES ((size_t)32 << 20)

static toplu_status_t exec_create(toplu__plan_t *p, toplu__exec_t **out, toplu_error_t *err) {
  /* An arena near or past the memory available: malloc takes it (overcommit) and the kernel's OOM killer ends the
   * process when the run touches it, every other model of a server with it (a 17 GB plan; a fresh user's finding of
   * 2026-12-06) */
  size_t host_bytes = mem_arena_bytes(p, 0);
  if (host_bytes >= ARENA_CHECK_BYTES) {
    char how[512];
    uint64_t avail = toplu__memory_available(how, sizeof how);
    if (avail > 0 && host_bytes > avail / 10 * 9)
      return toplu__errorf(err, TOPLU_ERR_OUT_OF_MEMORY,
                          "%s: the arena of %zu bytes is more than 90%% of the %llu bytes of memory available (%s); "
                          "a smaller batch or input shape needs less",
                          p->graph->path, host_bytes, (unsigned long long)avail, how);
  }
  toplu__exec_t *e = calloc(1, sizeof *e);
  if (!e) return toplu__errorf(err, TOPLU_ERR_OUT_OF_MEMORY, "out of memory");
  size_t n_t = 0;
  for (int i = 0; i < p->n_steps; i++) n_t += (size_t)(p->steps[i].ctx.n_in + p->steps[i].ctx.n_out);
  e->ctxs = calloc((size_t)p->n_steps + 1, sizeof *e->ctxs);
  e->tensors = calloc(n_t + 1, sizeof *e->tensors);
  if (p->profile) {
    e->prof_us = calloc((size_t)p->n_steps + 1, sizeof(double));
    e->prof_start = calloc((size_t)p->n_steps + 1, sizeof(double));
  }
  size_t arena_bytes = toplu__plan_arena_bytes(p);
  int arenas_ok = 1;
  for (int m = 0; m < p->n_mems; m++) {
    toplu__backend_t *b = p->backends[p->mem_backend[m]];
    size_t bytes = mem_arena_bytes(p, m);
    if (m == 0 || bytes) e->arena[m] = b->iface->buffer_alloc(b, p->alloc, bytes);
    if ((m == 0 || bytes) && !e->arena[m]) arenas_ok = 0;
  }
  e->streams = calloc((size_t)p->n_backends + 1, sizeof *e->streams);
  if (!e->ctxs || !e->tensors || !arenas_ok || !e->streams || (p->profile && (!e->prof_us || !e->prof_start))) {
    exec_free(p, e);
    size_t limit = toplu_allocator_limit(p->alloc);
    char where[160] = "";
    if (p->n_mems > 1) {
      size_t n = 0;
      for (int m = 0; m < p->n_mems && n < sizeof where; m++) {
        int w = snprintf(where + n, sizeof where - n, "%s%zu in %s memory", m ? ", " : " (",
                         mem_arena_bytes(p, m), m ? p->backends[p->mem_backend[m]]->iface->name : "host");
        if (w < 0) break;
        n += (size_t)w;
      }
      if (n < sizeof where) snprintf(where + n, sizeof where - n, ")");
    }
    if (limit)
      return toplu__errorf(err, TOPLU_ERR_OUT_OF_MEMORY,
                          "%s: the arena of %zu bytes%s does not fit: %zu bytes in use, limit %zu", p->graph->path,
                          arena_bytes, where, toplu_allocator_current(p->alloc), limit);
    return toplu__errorf(err, TOPLU_ERR_OUT_OF_MEMORY, "%s: cannot allocate an arena of %zu bytes", p->graph->path,
                        arena_bytes);
  }
  toplu_status_t st = TOPLU_OK;
  for (int i = 0; i < p->n_backends && !st; i++) {
    int used = i == p->cpu;
    for (int k = 0; k < p->n_steps && !used; k++) used = p->steps[k].backend == i;
    if (used) st = p->backends[i]->iface->stream_create(p->backends[i], &e->streams[i], err);
  }
  if (st) {
    exec_free(p, e);
    return st;
  }
  size_t t = 0;
  for (int i = 0; i < p->n_steps; i++) {
    const toplu__step_t *s = &p->steps[i];
    toplu__kernel_ctx_t *c = &e->ctxs[i];
    *c = s->ctx;
    c->in = &e->tensors[t];
    t += (size_t)s->ctx.n_in;
    c->out = &e->tensors[t];
    t += (size_t)s->ctx.n_out;
    for (int j = 0; j < c->n_in; j++) {
      c->in[j] = s->ctx.in[j];
      c->in[j].data = resolve(p, e, s->in_pv[j]);
    }
    for (int j = 0; j < c->n_out; j++) {
      c->out[j] = s->ctx.out[j];
      c->out[j].data = resolve(p, e, s->out_pv[j]);
    }
    int m = 0;
    while (m < p->n_mems && p->mem_device[m] != p->backends[s->backend]->iface->device) m++;
    if (m == p->n_mems) m = 0;
    c->workspace = p->mem_workspace[m] ? (char *)e->arena[m] + p->mem_activation[m] : NULL;
    c->workspace_bytes = p->mem_workspace[m];
    c->stream = e->streams[s->backend];
    c->err = &e->err;
    c->exec_state = NULL;
    if (s->kernel->bind && !(s->kernel->flags & TOPLU_KERNEL_VIEW) && (st = s->kernel->bind(c)) != TOPLU_OK) {
      if (err) *err = e->err;
      exec_free(p, e);
      return st;
    }
  }
  *out = e;
  return TOPLU_OK;
}

toplu_status_t toplu__run_check_stop(const toplu_run_options_t *ro, const char *where, toplu_error_t *err) {
  if (!ro) return TOPLU_OK;
  if (ro->cancel && __atomic_load_n(ro->cancel, __ATOMIC_ACQUIRE))
    return toplu__errorf(err, TOPLU_ERR_CANCELLED, "run cancelled %s", where);
  if (ro->deadline_ns > 0) {
    int64_t now = toplu_monotonic_ns();
    if (now >= ro->deadline_ns)
      return toplu__errorf(err, TOPLU_ERR_DEADLINE, "deadline passed %s (%.3f ms late)", where,
                          (double)(now - ro->deadline_ns) / 1e6);
  }
  return TOPLU_OK;
}

/* A string output: one malloc'd block (pointers, then the bytes) holding a
 * copy of the strings src points at, so nothing of the run's pools,
 * inputs or constants is shared with the caller.  The caller's data must
 * be NULL: a buffer cannot be sized before the strings are known. */
static toplu_status_t copy_out_strings(const toplu__graph_t *g, int v, const toplu_tensor_t *x, const void *src,
                                       toplu_tensor_t *o, toplu_error_t *err) {
  if (o->data)
    return toplu__errorf(err, TOPLU_ERR_INVALID_ARGUMENT,
                         "%s: output '%s' is a string tensor: pass it with data NULL, toplu allocates it", g->path,
                         g->values[v].name);
  int64_t n = toplu_tensor_numel(x);
  void *block = n && src ? toplu__strings_clone(src, n) : NULL;
  if (!block && n && src)
    return toplu__errorf(err, TOPLU_ERR_OUT_OF_MEMORY, "%s: cannot allocate output '%s'", g->path, g->values[v].name);
  if (!block) { /* empty: an allocation toplu_tensor_free takes like any other */
    toplu_status_t st = toplu_tensor_alloc(o, x->dtype, x->ndim, x->dims);
    if (st) return toplu__errorf(err, st, "%s: cannot allocate output '%s'", g->path, g->values[v].name);
    return TOPLU_OK;
  }
  o->dtype = x->dtype;
  o->ndim = x->ndim;
  memcpy(o->dims, x->dims, sizeof o->dims);
  o->data = block;
  return TOPLU_OK;
}

/* Copy flat output k of a finished run into o (allocated when o->data is NULL). */
static toplu_status_t copy_out(const toplu__plan_t *p, const toplu__exec_t *e, const toplu_tensor_t *inputs, int k,
                               toplu_tensor_t *o, toplu_error_t *err) {
  int v = p->flat_out_value[k], pv = p->output_pv[k];
  const toplu_tensor_t *x = &p->table->vals[v];
  const toplu__storage_t *so = &p->pvals[pv].store;
  const void *src = so->kind == TOPLU_STORE_INPUT ? input_data(p, inputs, so->input) : resolve(p, e, pv);
  size_t bytes = toplu_tensor_nbytes(x);
  if (x->dtype == TOPLU_DTYPE_STRING) { /* a deep copy the caller frees (toplu/tensor.h) */
    o->kind = TOPLU_KIND_TENSOR;
    return copy_out_strings(p->graph, v, x, src, o, err);
  }
  o->kind = TOPLU_KIND_TENSOR;
  o->dtype = x->dtype;
  o->ndim = x->ndim;
  memcpy(o->dims, x->dims, sizeof o->dims);
  if (!o->data && toplu_tensor_alloc(o, x->dtype, x->ndim, x->dims) != TOPLU_OK)
    return toplu__errorf(err, TOPLU_ERR_OUT_OF_MEMORY, "%s: cannot allocate output '%s'", p->graph->path,
                         p->graph->values[v].name);
  if (bytes && src) memcpy(o->data, src, bytes);
  return TOPLU_OK;
}

toplu_status_t toplu__plan_run(toplu__plan_t *p, const toplu_tensor_t *inputs, toplu_tensor_t *outputs, int n_outputs,
                              const toplu_run_options_t *ro, toplu_error_t *err) {
  const toplu__graph_t *g = p->graph;
  if (n_outputs != g->n_outputs)
    return toplu__errorf(err, TOPLU_ERR_INVALID_ARGUMENT, "%s: %d outputs requested, the model has %d", g->path,
                        n_outputs, g->n_outputs);
  for (int j = 0; p->out_count && j < n_outputs; j++)
    if (p->out_count[j] != -1 && outputs[j].data)
      return toplu__errorf(err, TOPLU_ERR_INVALID_ARGUMENT,
                          "%s: output '%s' is a sequence or optional, which toplu allocates: pass data NULL", g->path,
                          g->values[g->outputs[j]].name);
  pthread_mutex_lock(&p->lock);
  toplu__exec_t *e = p->free_execs;
  if (e) p->free_execs = e->next;
  pthread_mutex_unlock(&p->lock);
  toplu_status_t st;
  if (!e) {
    if ((st = exec_create(p, &e, err))) return st;
    pthread_mutex_lock(&p->lock);
    p->n_execs++;
    pthread_mutex_unlock(&p->lock);
  }
  /* Graph inputs (and views of them) point at the caller's buffers. */
  for (int i = 0; i < p->n_steps; i++) {
    toplu__kernel_ctx_t *c = &e->ctxs[i];
    const toplu__step_t *s = &p->steps[i];
    for (int j = 0; j < c->n_in; j++) {
      int pv = s->in_pv[j];
      if (pv >= 0 && p->pvals[pv].store.kind == TOPLU_STORE_INPUT) c->in[j].data = input_data(p, inputs, p->pvals[pv].store.input);
    }
    for (int j = 0; j < c->n_out; j++) {
      int pv = s->out_pv[j];
      if (pv >= 0 && p->pvals[pv].store.kind == TOPLU_STORE_INPUT) c->out[j].data = input_data(p, inputs, p->pvals[pv].store.input);
    }
  }
  int omp_prev = omp_get_max_threads(); /* the caller's, given back below */
  omp_set_num_threads(p->threads);
  toplu_error_clear(&e->err);
  st = TOPLU_OK;
  double t0 = p->profile ? now_us() : 0;
  int watch = ro && (ro->cancel || ro->deadline_ns > 0);
  for (int i = 0; i < p->n_steps && !st; i++) {
    const toplu__step_t *s = &p->steps[i];
    if (s->kernel->flags & TOPLU_KERNEL_VIEW) continue;
    if (watch && toplu__run_must_stop(ro)) { /* the message is formatted only when the run stops */
      char where[400];
      snprintf(where, sizeof where, "before step %d of %d (%s '%s') of %s", i + 1, p->n_steps,
               s->label ? s->label : s->node->op_type, s->node->name ? s->node->name : "", g->path);
      if ((st = toplu__run_check_stop(ro, where, &e->err))) break;
    }
    if (p->profile) {
      double a = now_us();
      st = s->kernel->run(&e->ctxs[i]);
      double b = now_us();
      e->prof_us[i] = b - a;
      e->prof_start[i] = a - t0;
    } else {
      st = s->kernel->run(&e->ctxs[i]);
    }
  }
  omp_set_num_threads(omp_prev);
  /* work still queued on other backends' streams finishes before the run
   * returns (outputs are host copies made by Copy steps, which waited too) */
  for (int b = 0; b < p->n_backends; b++) {
    if (b == p->cpu || !e->streams[b]) continue;
    toplu_status_t ss = p->backends[b]->iface->synchronize(p->backends[b], e->streams[b]);
    if (ss && !st) st = toplu__errorf(&e->err, ss, "%s: backend '%s' failed to finish the run", g->path,
                                      p->backends[b]->iface->name);
  }
  if (st) {
    if (err) *err = e->err;
    if (err && err->status == TOPLU_OK) toplu__errorf(err, st, "%s: a kernel failed", g->path);
  } else if (!p->out_count) {
    for (int j = 0; j < n_outputs && !st; j++) st = copy_out(p, e, inputs, j, &outputs[j], err);
  } else {
    for (int j = 0; j < n_outputs && !st; j++) {
      int c = p->out_count[j];
      toplu_tensor_t *o = &outputs[j];
      if (c == -1) {
        st = copy_out(p, e, inputs, p->out_first[j], o, err);
        continue;
      }
      memset(o, 0, sizeof *o);
      o->kind = TOPLU_KIND_NONE;
      if (c == -2) continue;
      toplu_tensor_t *items = calloc((size_t)c + 1, sizeof *items);
      if (!items) {
        st = toplu__errorf(err, TOPLU_ERR_OUT_OF_MEMORY, "%s: cannot allocate output '%s'", g->path,
                           g->values[g->outputs[j]].name);
        break;
      }
      o->kind = TOPLU_KIND_SEQUENCE;
      o->ndim = 1;
      o->dims[0] = c;
      o->data = items;
      o->dtype = g->values[g->outputs[j]].elem_dtype;
      for (int k = 0; k < c && !st; k++) st = copy_out(p, e, inputs, p->out_first[j] + k, &items[k], err);
      if (c && !st) o->dtype = items[0].dtype;
    }
    if (st)
      for (int j = 0; j < n_outputs; j++)
        if (p->out_count[j] >= 0) toplu_tensor_free(&outputs[j]);
  }
  pthread_mutex_lock(&p->lock);
  if (p->profile && !st) {
    for (int i = 0; i < p->n_steps; i++) {
      p->prof_total_us[i] += e->prof_us[i];
      p->prof_last_us[i] = e->prof_us[i];
      p->prof_start_us[i] = e->prof_start[i];
    }
    p->prof_runs++;
  }
  e->next = p->free_execs;
  p->free_execs = e;
  pthread_mutex_unlock(&p->lock);
  return st;
}
