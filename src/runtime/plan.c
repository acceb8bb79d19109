/* runtime/plan.c - building and running per-shape execution plans. */
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "core/error.h"
#include "graph/memplan.h"
#include "graph/schema.h"
#include "ops/backend.h"
#include "runtime/plan.h"

struct toplu_exec {
  toplu_exec_t *next;
  void *arena;
  dnnl_stream_t stream;
  toplu_kernel_ctx_t *ctxs;  /* per step, data pointers resolved for this arena */
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

toplu_status_t toplu_plan_eval_node(void *user, const toplu_graph_t *g, const toplu_node_t *n,
                                    const toplu_tensor_t *in, toplu_tensor_t *out, toplu_error_t *err) {
  char what[400];
  const toplu_kernel_t *k = toplu_kernel_find(n->domain, n->op_type);
  if (!k)
    return toplu_errorf(err, TOPLU_ERR_UNSUPPORTED, "%s: %s: no kernel for op '%s'", g->path,
                        toplu_node_describe(g, n, what, sizeof what), n->op_type);
  toplu_backend_t *backend = user, *own = NULL;
  if (!backend) {
    toplu_status_t st = toplu_backend_create(&own, err);
    if (st) return st;
    backend = own;
  }
  toplu_tensor_t ins[64];
  int n_in = n->n_inputs < 64 ? n->n_inputs : 64;
  for (int i = 0; i < n_in; i++) ins[i] = in[i];
  toplu_kernel_ctx_t ctx = {.graph = g, .node = n, .n_in = n_in, .n_out = n->n_outputs, .in = ins, .out = out,
                            .threads = 1, .alloc = NULL, .backend = backend, .err = err};
  toplu_status_t st = TOPLU_OK;
  dnnl_stream_t stream = NULL;
  void *ws = NULL;
  for (int j = 0; j < n->n_outputs; j++) {
    out[j].data = NULL;
    if (n->outputs[j] < 0) continue;
    size_t bytes = toplu_tensor_nbytes(&out[j]);
    out[j].data = malloc(bytes ? bytes : 1);
    if (!out[j].data) {
      st = toplu_errorf(err, TOPLU_ERR_OUT_OF_MEMORY, "%s: %s: out of memory folding a constant", g->path,
                        toplu_node_describe(g, n, what, sizeof what));
      goto done;
    }
  }
  if (k->flags & TOPLU_KERNEL_VIEW) {
    if (out[0].data) memcpy(out[0].data, in[0].data, toplu_tensor_nbytes(&out[0]));
    goto done;
  }
  toplu_kernel_info_t info = {0};
  if (k->prepare && (st = k->prepare(&ctx, &info))) goto done;
  if (info.workspace_bytes && !(ws = aligned_alloc(64, ALIGN64(info.workspace_bytes)))) {
    st = toplu_errorf(err, TOPLU_ERR_OUT_OF_MEMORY, "%s: %s: out of memory folding a constant", g->path,
                      toplu_node_describe(g, n, what, sizeof what));
  } else if ((st = toplu_backend_stream_create(backend, &stream, err)) == TOPLU_OK) {
    ctx.workspace = ws;
    ctx.workspace_bytes = info.workspace_bytes;
    ctx.stream = stream;
    if (!k->bind || (st = k->bind(&ctx)) == TOPLU_OK) {
      st = k->run(&ctx);
      if (k->unbind && ctx.exec_state) k->unbind(&ctx);
    }
    dnnl_stream_destroy(stream);
  }
  if (k->release) k->release(&ctx);
done:
  free(ws);
  if (st)
    for (int j = 0; j < n->n_outputs; j++) {
      free(out[j].data);
      out[j].data = NULL;
    }
  if (own) toplu_backend_destroy(own);
  return st;
}

/* ---- binding ---- */

static toplu_status_t bind_inputs(const toplu_graph_t *g, toplu_value_table_t *t, const toplu_tensor_t *inputs,
                                  int n_inputs, toplu_error_t *err) {
  if (n_inputs != g->n_inputs)
    return toplu_errorf(err, TOPLU_ERR_INVALID_ARGUMENT, "%s: %d inputs given, the model takes %d", g->path, n_inputs,
                        g->n_inputs);
  int64_t *symval = malloc(((size_t)g->n_symbols + 1) * sizeof *symval);
  int *symsrc = malloc(((size_t)g->n_symbols + 1) * sizeof *symsrc);
  if (!symval || !symsrc) {
    free(symval); free(symsrc);
    return toplu_errorf(err, TOPLU_ERR_OUT_OF_MEMORY, "out of memory");
  }
  for (int i = 0; i < g->n_symbols; i++) symval[i] = -1;
  toplu_status_t st = TOPLU_OK;
  char a[160], b[160];
  for (int i = 0; i < n_inputs && !st; i++) {
    const toplu_value_t *v = &g->values[g->inputs[i]];
    const toplu_tensor_t *x = &inputs[i];
    if (x->dtype != v->dtype) {
      st = toplu_errorf(err, TOPLU_ERR_SHAPE, "%s: input '%s' is %s, the model expects %s", g->path, v->name,
                        toplu_dtype_name(x->dtype), toplu_dtype_name(v->dtype));
      break;
    }
    if (x->ndim < 0 || x->ndim > TOPLU_MAX_DIMS || (v->ndim >= 0 && x->ndim != v->ndim)) {
      st = toplu_errorf(err, TOPLU_ERR_SHAPE, "%s: input '%s' has rank %d %s, the model expects rank %d", g->path,
                        v->name, x->ndim, toplu_shape_format(x->ndim > 0 ? x->ndim : 0, x->dims, a, sizeof a), v->ndim);
      break;
    }
    for (int d = 0; d < x->ndim && !st; d++) {
      if (x->dims[d] < 0) {
        st = toplu_errorf(err, TOPLU_ERR_SHAPE, "%s: input '%s' dim %d is negative", g->path, v->name, d);
      } else if (v->ndim >= 0 && v->dims[d] >= 0 && v->dims[d] != x->dims[d]) {
        st = toplu_errorf(err, TOPLU_ERR_SHAPE, "%s: input '%s' has shape %s, the model expects %lld at dim %d",
                          g->path, v->name, toplu_shape_format(x->ndim, x->dims, a, sizeof a),
                          (long long)v->dims[d], d);
      } else if (v->ndim >= 0 && v->dims[d] < 0) {
        int s = TOPLU_SYM_ID(v->dims[d]);
        if (symval[s] < 0) {
          symval[s] = x->dims[d];
          symsrc[s] = i;
        } else if (symval[s] != x->dims[d] && g->symbols[s][0] != '?') {
          st = toplu_errorf(err, TOPLU_ERR_SHAPE, "%s: input '%s' dim %d ('%s') is %lld, but input '%s' sets '%s' to %lld",
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
  }
  free(symval);
  free(symsrc);
  return st;
}

/* ---- building ---- */

static void exec_free(toplu_plan_t *p, toplu_exec_t *e);

void toplu_plan_destroy(toplu_plan_t *p) {
  if (!p) return;
  while (p->free_execs) {
    toplu_exec_t *e = p->free_execs;
    p->free_execs = e->next;
    exec_free(p, e);
  }
  for (int i = 0; i < p->n_steps; i++) {
    toplu_step_t *s = &p->steps[i];
    if (s->kernel && s->kernel->release && s->ctx.state) s->kernel->release(&s->ctx);
    free(s->ctx.in);
    free(s->ctx.out);
    free(s->label);
  }
  free(p->steps);
  if (p->table) toplu_value_table_free(p->graph, p->table);
  free(p->store);
  free(p->input_shapes);
  free(p->prof_total_us);
  free(p->prof_last_us);
  free(p->prof_start_us);
  pthread_mutex_destroy(&p->lock);
  free(p);
}

static int64_t step_flops(const toplu_graph_t *g, const toplu_step_t *s) {
  const toplu_schema_t *sc = s->node->schema;
  if (sc->flops) {
    toplu_infer_ctx_t ictx = {.graph = (toplu_graph_t *)g, .node = s->node, .n_in = s->ctx.n_in,
                              .n_out = s->ctx.n_out, .in = s->ctx.in, .out = s->ctx.out, .concrete = 1};
    return sc->flops(&ictx);
  }
  if (s->kernel->flags & TOPLU_KERNEL_VIEW) return 0;
  return s->ctx.n_out > 0 && s->ctx.out[0].ndim >= 0 ? toplu_tensor_numel(&s->ctx.out[0]) : 0;
}

toplu_status_t toplu_plan_build(const toplu_graph_t *g, const toplu_tensor_t *inputs, int n_inputs,
                                const toplu_plan_options_t *opts, toplu_plan_t **out, toplu_error_t *err) {
  *out = NULL;
  char what[400];
  toplu_status_t st = TOPLU_OK;
  toplu_plan_t *p = calloc(1, sizeof *p);
  if (!p) return toplu_errorf(err, TOPLU_ERR_OUT_OF_MEMORY, "out of memory building a plan");
  pthread_mutex_init(&p->lock, NULL);
  p->graph = g;
  p->threads = opts->threads > 0 ? opts->threads : 1;
  p->alloc = opts->alloc;
  p->backend = opts->backend;
  p->profile = opts->profile;
  p->n_inputs = n_inputs;
  p->input_shapes = calloc((size_t)n_inputs + 1, sizeof *p->input_shapes);
  p->table = toplu_value_table_create(g);
  p->store = calloc((size_t)g->n_values + 1, sizeof *p->store);
  int *last_use = calloc((size_t)g->n_values + 1, sizeof(int));
  int *buf_of = malloc(((size_t)g->n_values + 1) * sizeof(int));
  toplu_membuf_t *bufs = calloc((size_t)g->n_values + 1, sizeof *bufs);
  uint8_t *const_used = calloc((size_t)g->n_values + 1, 1), *const_kept = calloc((size_t)g->n_values + 1, 1);
  if (!p->input_shapes || !p->table || !p->store || !last_use || !buf_of || !bufs || !const_used || !const_kept) {
    st = toplu_errorf(err, TOPLU_ERR_OUT_OF_MEMORY, "out of memory building a plan");
    goto done;
  }
  for (int i = 0; i < n_inputs; i++) {
    p->input_shapes[i] = inputs[i];
    p->input_shapes[i].data = NULL;
  }
  if ((st = bind_inputs(g, p->table, inputs, n_inputs, err))) goto done;
  if ((st = toplu_infer_graph((toplu_graph_t *)g, p->table, 1, toplu_plan_eval_node, p->backend, err))) goto done;

  /* Steps: live nodes whose outputs are not all constants. */
  p->steps = calloc((size_t)g->n_nodes + 1, sizeof *p->steps);
  if (!p->steps) {
    st = toplu_errorf(err, TOPLU_ERR_OUT_OF_MEMORY, "out of memory building a plan");
    goto done;
  }
  for (int ni = 0; ni < g->n_nodes; ni++) {
    const toplu_node_t *n = &g->nodes[ni];
    if (n->dead || p->table->folded[ni]) continue;
    toplu_step_t *s = &p->steps[p->n_steps];
    s->node = n;
    s->kernel = toplu_kernel_find(n->domain, n->op_type);
    if (!s->kernel) {
      st = toplu_errorf(err, TOPLU_ERR_UNSUPPORTED, "%s: %s: no kernel for op '%s'", g->path,
                        toplu_node_describe(g, n, what, sizeof what), n->op_type);
      goto done;
    }
    p->n_steps++;
    toplu_kernel_ctx_t *c = &s->ctx;
    c->graph = g;
    c->node = n;
    c->n_in = n->n_inputs;
    c->n_out = n->n_outputs;
    c->in = calloc((size_t)n->n_inputs + 1, sizeof *c->in);
    c->out = calloc((size_t)n->n_outputs + 1, sizeof *c->out);
    if (!c->in || !c->out) {
      st = toplu_errorf(err, TOPLU_ERR_OUT_OF_MEMORY, "out of memory building a plan");
      goto done;
    }
    for (int j = 0; j < n->n_inputs; j++) {
      int v = n->inputs[j];
      if (v < 0) {
        c->in[j].ndim = -1;
        continue;
      }
      c->in[j] = p->table->vals[v];
      last_use[v] = p->n_steps - 1;
    }
    for (int j = 0; j < n->n_outputs; j++) {
      int v = n->outputs[j];
      if (v < 0) {
        c->out[j].ndim = -1;
        continue;
      }
      c->out[j] = p->table->vals[v];
      c->out[j].data = NULL;
    }
    c->threads = p->threads;
    c->alloc = p->alloc;
    c->backend = p->backend;
    c->err = err;
    size_t before = toplu_allocator_current(p->alloc);
    toplu_kernel_info_t info = {0};
    info.inplace_input = (s->kernel->flags & TOPLU_KERNEL_INPLACE) ? 0 : -1;
    if (s->kernel->prepare && (st = s->kernel->prepare(c, &info))) goto done;
    s->inplace_input = info.inplace_input;
    size_t held = toplu_allocator_current(p->alloc) - before;
    if (info.workspace_bytes > p->workspace_bytes) p->workspace_bytes = info.workspace_bytes;
    p->weights_bytes += info.weight_bytes;
    p->kernel_bytes += held > info.weight_bytes ? held - info.weight_bytes : info.state_bytes;
    for (int j = 0; j < n->n_inputs; j++) {
      int v = n->inputs[j];
      if (v < 0 || !p->table->vals[v].data) continue;
      const_used[v] = 1;
      if (!(j < 32 && (info.consumed_consts >> j & 1u))) const_kept[v] = 1;
    }
    const char *label = n->fused_name ? n->fused_name : n->op_type;
    size_t ll = strlen(label) + 1;
    if ((s->label = malloc(ll))) memcpy(s->label, label, ll);
    c->err = NULL;
  }
  for (int i = 0; i < g->n_outputs; i++) last_use[g->outputs[i]] = p->n_steps; /* alive to the end */

  /* Storage: constants, inputs, arena buffers (views and in-place share). */
  for (int v = 0; v < g->n_values; v++) {
    buf_of[v] = -1;
    toplu_storage_t *sv = &p->store[v];
    const toplu_tensor_t *x = &p->table->vals[v];
    if (x->data) {
      sv->kind = TOPLU_STORE_CONST;
      sv->konst = x->data;
      sv->bytes = toplu_tensor_nbytes(x);
      if (const_kept[v]) p->weights_bytes += sv->bytes;
    } else if (g->values[v].graph_input >= 0) {
      sv->kind = TOPLU_STORE_INPUT;
      sv->input = g->values[v].graph_input;
      sv->bytes = toplu_tensor_nbytes(x);
    }
  }
  int n_bufs = 0;
  for (int si = 0; si < p->n_steps; si++) {
    toplu_step_t *s = &p->steps[si];
    const toplu_node_t *n = s->node;
    for (int j = 0; j < n->n_outputs; j++) {
      int v = n->outputs[j];
      if (v < 0) continue;
      toplu_storage_t *sv = &p->store[v];
      sv->bytes = toplu_tensor_nbytes(&p->table->vals[v]);
      int in0 = n->n_inputs > 0 ? n->inputs[0] : -1;
      int ip = s->inplace_input >= 0 && s->inplace_input < n->n_inputs ? n->inputs[s->inplace_input] : -1;
      if (j == 0 && in0 >= 0 && (s->kernel->flags & TOPLU_KERNEL_VIEW)) {
        const toplu_storage_t *si0 = &p->store[in0];
        *sv = *si0;
        sv->bytes = toplu_tensor_nbytes(&p->table->vals[v]);
        if (si0->kind == TOPLU_STORE_ARENA) {
          buf_of[v] = buf_of[in0];
          if (last_use[v] > bufs[buf_of[v]].last) bufs[buf_of[v]].last = last_use[v];
        }
        continue;
      }
      if (j == 0 && ip >= 0 && p->store[ip].kind == TOPLU_STORE_ARENA && bufs[buf_of[ip]].last == si &&
          !g->values[ip].graph_output && p->table->vals[ip].dtype == p->table->vals[v].dtype &&
          p->store[ip].bytes == sv->bytes) {
        /* Other inputs of this node reading the same buffer are read before
         * or at the same element as it is written (kernels flagged so). */
        int b = buf_of[ip];
        sv->kind = TOPLU_STORE_ARENA;
        sv->buffer = b;
        buf_of[v] = b;
        if (last_use[v] > bufs[b].last) bufs[b].last = last_use[v];
        continue;
      }
      sv->kind = TOPLU_STORE_ARENA;
      sv->buffer = n_bufs;
      buf_of[v] = n_bufs;
      bufs[n_bufs].size = sv->bytes;
      bufs[n_bufs].first = si;
      bufs[n_bufs].last = last_use[v] > si ? last_use[v] : si;
      n_bufs++;
    }
  }
  if ((st = toplu_memplan(bufs, n_bufs, &p->activation_bytes)) != TOPLU_OK) {
    st = toplu_errorf(err, st, "out of memory planning the arena");
    goto done;
  }
  for (int v = 0; v < g->n_values; v++)
    if (p->store[v].kind == TOPLU_STORE_ARENA) p->store[v].offset = bufs[p->store[v].buffer].offset;
  p->workspace_bytes = ALIGN64(p->workspace_bytes);
  for (int i = 0; i < g->n_inputs; i++) p->input_bytes += toplu_tensor_nbytes(&p->table->vals[g->inputs[i]]);
  for (int i = 0; i < g->n_outputs; i++) p->output_bytes += toplu_tensor_nbytes(&p->table->vals[g->outputs[i]]);
  for (int si = 0; si < p->n_steps; si++) {
    toplu_step_t *s = &p->steps[si];
    s->flops = step_flops(g, s);
    p->flops += s->flops;
    if (s->kernel->flags & TOPLU_KERNEL_VIEW) continue;
    for (int j = 0; j < s->ctx.n_in; j++)
      if (s->ctx.in[j].ndim >= 0) s->bytes_moved += (int64_t)toplu_tensor_nbytes(&s->ctx.in[j]);
    for (int j = 0; j < s->ctx.n_out; j++)
      if (s->ctx.out[j].ndim >= 0) s->bytes_moved += (int64_t)toplu_tensor_nbytes(&s->ctx.out[j]);
    p->bytes_moved += s->bytes_moved;
  }
  if (p->profile) {
    p->prof_total_us = calloc((size_t)p->n_steps + 1, sizeof(double));
    p->prof_last_us = calloc((size_t)p->n_steps + 1, sizeof(double));
    p->prof_start_us = calloc((size_t)p->n_steps + 1, sizeof(double));
    if (!p->prof_total_us || !p->prof_last_us || !p->prof_start_us) {
      st = toplu_errorf(err, TOPLU_ERR_OUT_OF_MEMORY, "out of memory building a plan");
      goto done;
    }
  }
done:
  free(last_use);
  free(buf_of);
  free(bufs);
  free(const_used);
  free(const_kept);
  if (st) {
    toplu_plan_destroy(p);
    return st;
  }
  *out = p;
  return TOPLU_OK;
}

int toplu_plan_matches(const toplu_plan_t *p, const toplu_tensor_t *inputs, int n_inputs) {
  if (n_inputs != p->n_inputs) return 0;
  for (int i = 0; i < n_inputs; i++) {
    const toplu_tensor_t *a = &p->input_shapes[i], *b = &inputs[i];
    if (a->dtype != b->dtype || a->ndim != b->ndim) return 0;
    for (int d = 0; d < a->ndim; d++)
      if (a->dims[d] != b->dims[d]) return 0;
  }
  return 1;
}

size_t toplu_plan_arena_bytes(const toplu_plan_t *p) { return p->activation_bytes + p->workspace_bytes; }

/* ---- exec contexts ---- */

static void exec_free(toplu_plan_t *p, toplu_exec_t *e) {
  if (!e) return;
  if (e->ctxs)
    for (int i = 0; i < p->n_steps; i++)
      if (e->ctxs[i].exec_state && p->steps[i].kernel->unbind) p->steps[i].kernel->unbind(&e->ctxs[i]);
  if (e->stream) dnnl_stream_destroy(e->stream);
  toplu_allocator_free(p->alloc, e->arena);
  free(e->ctxs);
  free(e->tensors);
  free(e->prof_us);
  free(e->prof_start);
  free(e);
}

static void *resolve(const toplu_plan_t *p, const toplu_exec_t *e, int v) {
  const toplu_storage_t *s = &p->store[v];
  switch (s->kind) {
    case TOPLU_STORE_CONST: return (void *)s->konst;
    case TOPLU_STORE_ARENA: return (char *)e->arena + s->offset;
    default: return NULL;
  }
}

static toplu_status_t exec_create(toplu_plan_t *p, toplu_exec_t **out, toplu_error_t *err) {
  toplu_exec_t *e = calloc(1, sizeof *e);
  if (!e) return toplu_errorf(err, TOPLU_ERR_OUT_OF_MEMORY, "out of memory");
  size_t n_t = 0;
  for (int i = 0; i < p->n_steps; i++) n_t += (size_t)(p->steps[i].ctx.n_in + p->steps[i].ctx.n_out);
  e->ctxs = calloc((size_t)p->n_steps + 1, sizeof *e->ctxs);
  e->tensors = calloc(n_t + 1, sizeof *e->tensors);
  if (p->profile) {
    e->prof_us = calloc((size_t)p->n_steps + 1, sizeof(double));
    e->prof_start = calloc((size_t)p->n_steps + 1, sizeof(double));
  }
  size_t arena_bytes = toplu_plan_arena_bytes(p);
  e->arena = toplu_allocator_alloc(p->alloc, arena_bytes);
  if (!e->ctxs || !e->tensors || !e->arena || (p->profile && (!e->prof_us || !e->prof_start))) {
    exec_free(p, e);
    size_t limit = toplu_allocator_limit(p->alloc);
    if (limit)
      return toplu_errorf(err, TOPLU_ERR_OUT_OF_MEMORY,
                          "%s: the arena of %zu bytes does not fit: %zu bytes in use, limit %zu", p->graph->path,
                          arena_bytes, toplu_allocator_current(p->alloc), limit);
    return toplu_errorf(err, TOPLU_ERR_OUT_OF_MEMORY, "%s: cannot allocate an arena of %zu bytes", p->graph->path,
                        arena_bytes);
  }
  toplu_status_t st = toplu_backend_stream_create(p->backend, &e->stream, err);
  if (st) {
    exec_free(p, e);
    return st;
  }
  size_t t = 0;
  for (int i = 0; i < p->n_steps; i++) {
    const toplu_step_t *s = &p->steps[i];
    toplu_kernel_ctx_t *c = &e->ctxs[i];
    *c = s->ctx;
    c->in = &e->tensors[t];
    t += (size_t)s->ctx.n_in;
    c->out = &e->tensors[t];
    t += (size_t)s->ctx.n_out;
    for (int j = 0; j < c->n_in; j++) {
      c->in[j] = s->ctx.in[j];
      c->in[j].data = s->node->inputs[j] >= 0 ? resolve(p, e, s->node->inputs[j]) : NULL;
    }
    for (int j = 0; j < c->n_out; j++) {
      c->out[j] = s->ctx.out[j];
      c->out[j].data = s->node->outputs[j] >= 0 ? resolve(p, e, s->node->outputs[j]) : NULL;
    }
    c->workspace = p->workspace_bytes ? (char *)e->arena + p->activation_bytes : NULL;
    c->workspace_bytes = p->workspace_bytes;
    c->stream = e->stream;
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

toplu_status_t toplu_plan_run(toplu_plan_t *p, const toplu_tensor_t *inputs, toplu_tensor_t *outputs, int n_outputs,
                              toplu_error_t *err) {
  const toplu_graph_t *g = p->graph;
  if (n_outputs != g->n_outputs)
    return toplu_errorf(err, TOPLU_ERR_INVALID_ARGUMENT, "%s: %d outputs requested, the model has %d", g->path,
                        n_outputs, g->n_outputs);
  pthread_mutex_lock(&p->lock);
  toplu_exec_t *e = p->free_execs;
  if (e) p->free_execs = e->next;
  pthread_mutex_unlock(&p->lock);
  toplu_status_t st;
  if (!e && (st = exec_create(p, &e, err))) return st;
  /* Graph inputs (and views of them) point at the caller's buffers. */
  for (int i = 0; i < p->n_steps; i++) {
    toplu_kernel_ctx_t *c = &e->ctxs[i];
    const toplu_node_t *n = p->steps[i].node;
    for (int j = 0; j < c->n_in; j++) {
      int v = n->inputs[j];
      if (v >= 0 && p->store[v].kind == TOPLU_STORE_INPUT) c->in[j].data = inputs[p->store[v].input].data;
    }
    for (int j = 0; j < c->n_out; j++) {
      int v = n->outputs[j];
      if (v >= 0 && p->store[v].kind == TOPLU_STORE_INPUT) c->out[j].data = inputs[p->store[v].input].data;
    }
  }
  omp_set_num_threads(p->threads);
  toplu_error_clear(&e->err);
  st = TOPLU_OK;
  double t0 = p->profile ? now_us() : 0;
  for (int i = 0; i < p->n_steps && !st; i++) {
    const toplu_step_t *s = &p->steps[i];
    if (s->kernel->flags & TOPLU_KERNEL_VIEW) continue;
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
  if (st) {
    if (err) *err = e->err;
    if (err && err->status == TOPLU_OK) toplu_errorf(err, st, "%s: a kernel failed", g->path);
  } else {
    for (int j = 0; j < n_outputs && !st; j++) {
      int v = g->outputs[j];
      const toplu_tensor_t *x = &p->table->vals[v];
      const void *src = p->store[v].kind == TOPLU_STORE_INPUT ? inputs[p->store[v].input].data : resolve(p, e, v);
      size_t bytes = toplu_tensor_nbytes(x);
      toplu_tensor_t *o = &outputs[j];
      o->dtype = x->dtype;
      o->ndim = x->ndim;
      memcpy(o->dims, x->dims, sizeof o->dims);
      if (!o->data) {
        if (toplu_tensor_alloc(o, x->dtype, x->ndim, x->dims) != TOPLU_OK) {
          st = toplu_errorf(err, TOPLU_ERR_OUT_OF_MEMORY, "%s: cannot allocate output '%s'", g->path,
                            g->values[v].name);
          break;
        }
      }
      if (bytes && src) memcpy(o->data, src, bytes);
    }
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
