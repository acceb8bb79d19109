/* ops/onednn/onednn.c - the CPU backend: oneDNN engine, packed weights, descriptor helpers, its iface. */
#include <float.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ops/fastmath.h"
#include "ops/onednn/onednn.h"

/* One packed constant shared by plans: the key (src address and layouts)
 * and the reference count. */
struct toplu__packed_const {
  const void *src;
  const char *kind;            /* toplu__dnnl_pack_custom's transform, NULL for a oneDNN reorder */
  dnnl_memory_desc_t src_md, dst_md;
  toplu_allocator_t *alloc;
  void *data;
  size_t bytes;
  int refs;
  toplu__packed_const_t *next;
};

static toplu_status_t cpu_init(toplu__backend_t *bk, toplu_error_t *err) {
  toplu__dnnl_t *b = calloc(1, sizeof *b);
  if (!b) return toplu__errorf(err, TOPLU_ERR_OUT_OF_MEMORY, "out of memory creating the oneDNN engine");
  dnnl_status_t s = dnnl_engine_create(&b->engine, dnnl_cpu, 0);
  if (s != dnnl_success) {
    free(b);
    return toplu__errorf(err, TOPLU_ERR_BACKEND, "oneDNN: cannot create a CPU engine (%s)", toplu__dnnl_status_name(s));
  }
  pthread_mutex_init(&b->lock, NULL);
  bk->impl = b;
  return TOPLU_OK;
}

static void cpu_fini(toplu__backend_t *bk) {
  toplu__dnnl_t *b = bk->impl;
  if (!b) return;
  /* Plans release their packed constants first; anything left is a leak
   * guard, freed from the allocator it came from. */
  while (b->packed) {
    toplu__packed_const_t *e = b->packed;
    b->packed = e->next;
    toplu_allocator_free(e->alloc, e->data);
    free(e);
  }
  pthread_mutex_destroy(&b->lock);
  if (b->engine) dnnl_engine_destroy(b->engine);
  free(b);
  bk->impl = NULL;
}

toplu_status_t toplu__backend_create(toplu__backend_t **out, toplu_error_t *err) {
  return toplu__backend_create_iface(&toplu__backend_cpu, NULL, out, err);
}

void toplu__backend_destroy(toplu__backend_t *b) { toplu__backend_free(b); }

/* Makes a new entry's bytes: a oneDNN reorder or a kernel's own transform. */
typedef toplu_status_t (*pack_make_fn)(toplu__kernel_ctx_t *ctx, void *dst, const void *arg);

/*
 * The one copy of constant src packed as key says (kind NULL: the oneDNN
 * reorder from src_md to dst_md; else a kernel's transform of that name),
 * bytes long, shared by the session's plans; make() writes it when it is new.
 */
static toplu_status_t pack_shared(toplu__kernel_ctx_t *ctx, toplu__kernel_info_t *info, const void *src,
                                  const char *kind, const dnnl_memory_desc_t *src_md, const dnnl_memory_desc_t *dst_md,
                                  size_t bytes, pack_make_fn make, const void *arg, void **out) {
  toplu__dnnl_t *b = ctx->backend->impl;
  *out = NULL;
  pthread_mutex_lock(&b->lock);
  for (toplu__packed_const_t *e = b->packed; e; e = e->next) {
    if (e->src != src || e->alloc != ctx->alloc || e->bytes != bytes || !e->kind != !kind) continue;
    if (kind ? strcmp(e->kind, kind) != 0
             : !dnnl_memory_desc_equal(&e->src_md, src_md) || !dnnl_memory_desc_equal(&e->dst_md, dst_md))
      continue;
    e->refs++;
    *out = e->data;
    info->weight_bytes += bytes;
    info->shared_weight_bytes += bytes;
    pthread_mutex_unlock(&b->lock);
    return TOPLU_OK;
  }
  toplu__packed_const_t *e = calloc(1, sizeof *e);
  void *data = e ? toplu__kernel_alloc(ctx, bytes) : NULL;
  if (!data) {
    free(e);
    pthread_mutex_unlock(&b->lock);
    return toplu__kernel_error(ctx, TOPLU_ERR_OUT_OF_MEMORY, "out of memory for %zu bytes of packed weights", bytes);
  }
  toplu_status_t st = make(ctx, data, arg);
  if (st) {
    toplu__kernel_free(ctx, data);
    free(e);
    pthread_mutex_unlock(&b->lock);
    return st;
  }
  e->src = src;
  e->kind = kind;
  if (!kind) e->src_md = *src_md, e->dst_md = *dst_md;
  e->alloc = ctx->alloc;
  e->data = data;
  e->bytes = bytes;
  e->refs = 1;
  e->next = b->packed;
  b->packed = e;
  pthread_mutex_unlock(&b->lock);
  *out = data;
  info->weight_bytes += bytes;
  return TOPLU_OK;
}

typedef struct reorder_arg {
  const dnnl_memory_desc_t *src_md, *dst_md;
  const void *src;
} reorder_arg_t;

static toplu_status_t make_reorder(toplu__kernel_ctx_t *ctx, void *dst, const void *arg) {
  const reorder_arg_t *r = arg;
  return toplu__dnnl_reorder_now(ctx, r->src_md, r->src, r->dst_md, dst);
}

toplu_status_t toplu__dnnl_pack_const(toplu__kernel_ctx_t *ctx, toplu__kernel_info_t *info,
                                     const dnnl_memory_desc_t *src_md, const void *src,
                                     const dnnl_memory_desc_t *dst_md, void **out, size_t *bytes) {
  reorder_arg_t r = {src_md, dst_md, src};
  size_t n = dnnl_memory_desc_get_size(dst_md);
  toplu_status_t st = pack_shared(ctx, info, src, NULL, src_md, dst_md, n, make_reorder, &r, out);
  *bytes = st ? 0 : n;
  return st;
}

typedef struct fill_arg {
  toplu__pack_fill_fn fill;
  const void *arg;
} fill_arg_t;

static toplu_status_t make_fill(toplu__kernel_ctx_t *ctx, void *dst, const void *arg) {
  (void)ctx;
  const fill_arg_t *f = arg;
  f->fill(dst, f->arg);
  return TOPLU_OK;
}

toplu_status_t toplu__dnnl_pack_custom(toplu__kernel_ctx_t *ctx, toplu__kernel_info_t *info, const void *src,
                                      const char *kind, size_t bytes, toplu__pack_fill_fn fill, const void *arg,
                                      void **out) {
  fill_arg_t f = {fill, arg};
  return pack_shared(ctx, info, src, kind, NULL, NULL, bytes, make_fill, &f, out);
}

void toplu__dnnl_pack_release(toplu__kernel_ctx_t *ctx, void *packed) {
  if (!packed) return;
  toplu__dnnl_t *b = ctx->backend->impl;
  pthread_mutex_lock(&b->lock);
  for (toplu__packed_const_t **pp = &b->packed; *pp; pp = &(*pp)->next)
    if ((*pp)->data == packed) {
      toplu__packed_const_t *e = *pp;
      if (--e->refs == 0) {
        *pp = e->next;
        toplu_allocator_free(e->alloc, e->data);
        free(e);
      }
      pthread_mutex_unlock(&b->lock);
      return;
    }
  pthread_mutex_unlock(&b->lock);
  toplu__kernel_free(ctx, packed); /* not shared: a plain kernel allocation */
}

toplu_status_t toplu__backend_stream_create(toplu__backend_t *b, dnnl_stream_t *out, toplu_error_t *err) {
  dnnl_status_t s = dnnl_stream_create(out, toplu__dnnl_engine(b), dnnl_stream_default_flags);
  if (s != dnnl_success)
    return toplu__errorf(err, TOPLU_ERR_BACKEND, "oneDNN: cannot create a stream (%s)", toplu__dnnl_status_name(s));
  return TOPLU_OK;
}

dnnl_data_type_t toplu__dnnl_dtype(toplu_dtype_t dt) {
  switch (dt) {
    case TOPLU_DTYPE_FLOAT: return dnnl_f32;
    case TOPLU_DTYPE_FLOAT16: return dnnl_f16;
    case TOPLU_DTYPE_BFLOAT16: return dnnl_bf16;
    case TOPLU_DTYPE_INT32: return dnnl_s32;
    case TOPLU_DTYPE_INT8: return dnnl_s8;
    case TOPLU_DTYPE_UINT8: return dnnl_u8;
    default: return dnnl_data_type_undef;
  }
}

dnnl_status_t toplu__dnnl_plain_md(dnnl_memory_desc_t *md, const toplu_tensor_t *t) {
  dnnl_dims_t dims;
  int nd = t->ndim;
  if (nd == 0) {
    dims[0] = 1;
    nd = 1;
  } else {
    for (int i = 0; i < nd; i++) dims[i] = t->dims[i];
  }
  dnnl_dims_t strides;
  int64_t s = 1;
  for (int i = nd - 1; i >= 0; i--) {
    strides[i] = s;
    s *= dims[i] ? dims[i] : 1;
  }
  return dnnl_memory_desc_init_by_strides(md, nd, dims, toplu__dnnl_dtype(t->dtype), strides);
}

const char *toplu__dnnl_status_name(dnnl_status_t s) {
  switch (s) {
    case dnnl_success: return "success";
    case dnnl_out_of_memory: return "out of memory";
    case dnnl_invalid_arguments: return "invalid arguments";
    case dnnl_unimplemented: return "unimplemented";
    case dnnl_iterator_ends: return "iterator ends";
    case dnnl_runtime_error: return "runtime error";
    case dnnl_not_required: return "not required";
    default: return "unknown oneDNN status";
  }
}

dnnl_status_t toplu__dnnl_append_post_ops(const toplu__node_t *n, dnnl_primitive_attr_t attr) {
  return toplu__dnnl_append_post_ops_n(n, n->n_post, attr);
}

dnnl_status_t toplu__dnnl_append_post_ops_n(const toplu__node_t *n, int count, dnnl_primitive_attr_t attr) {
  if (count <= 0) return dnnl_success;
  dnnl_post_ops_t po;
  dnnl_status_t s = dnnl_post_ops_create(&po);
  if (s != dnnl_success) return s;
  s = toplu__dnnl_post_ops_add(po, n, 0, count);
  if (s == dnnl_success) s = dnnl_primitive_attr_set_post_ops(attr, po);
  dnnl_post_ops_destroy(po);
  return s;
}

dnnl_status_t toplu__dnnl_post_ops_add(dnnl_post_ops_t po, const toplu__node_t *n, int from, int to) {
  dnnl_status_t s = dnnl_success;
  for (int i = from < 0 ? 0 : from; i < to && i < n->n_post && s == dnnl_success; i++) {
    const toplu__post_op_t *p = &n->post[i];
    switch (p->kind) {
      case TOPLU_POST_RELU: s = dnnl_post_ops_append_eltwise(po, 1.f, dnnl_eltwise_relu, 0.f, 0.f); break;
      case TOPLU_POST_LEAKY_RELU: s = dnnl_post_ops_append_eltwise(po, 1.f, dnnl_eltwise_relu, p->alpha, 0.f); break;
      case TOPLU_POST_CLIP:
        s = dnnl_post_ops_append_eltwise(po, 1.f, dnnl_eltwise_clip_v2, isinf(p->alpha) ? -FLT_MAX : p->alpha,
                                         isinf(p->beta) ? FLT_MAX : p->beta);
        break;
      case TOPLU_POST_SIGMOID: s = dnnl_post_ops_append_eltwise(po, 1.f, dnnl_eltwise_logistic, 0.f, 0.f); break;
      case TOPLU_POST_TANH: s = dnnl_post_ops_append_eltwise(po, 1.f, dnnl_eltwise_tanh, 0.f, 0.f); break;
      case TOPLU_POST_HARD_SIGMOID: {
        /* linear(alpha, beta) then clip_v2(0, 1).  A LINEAR (a2, b2) right after folds in, as
         * a2 clip(z, 0, 1) + b2 = clip(a2 z + b2, min(b2, a2 + b2), max(b2, a2 + b2)): oneDNN 2.6.3
         * gives a second eltwise_linear of one chain the first one's alpha and beta (Conv +
         * HardSigmoid(0.3, 0.2) + Mul(0.5) came out in [0.2, 0.5] instead of [0, 0.5]). */
        float a = p->alpha, b = p->beta, lo = 0.f, hi = 1.f;
        if (i + 1 < to && i + 1 < n->n_post && n->post[i + 1].kind == TOPLU_POST_LINEAR) {
          float a2 = n->post[i + 1].alpha, b2 = n->post[i + 1].beta;
          a *= a2;
          b = a2 * b + b2;
          lo = a2 >= 0.f ? b2 : a2 + b2;
          hi = a2 >= 0.f ? a2 + b2 : b2;
          i++;
        }
        s = dnnl_post_ops_append_eltwise(po, 1.f, dnnl_eltwise_linear, a, b);
        if (s == dnnl_success) s = dnnl_post_ops_append_eltwise(po, 1.f, dnnl_eltwise_clip_v2, lo, hi);
        break;
      }
      case TOPLU_POST_HARD_SWISH: s = dnnl_post_ops_append_eltwise(po, 1.f, dnnl_eltwise_hardswish, 0.f, 0.f); break;
      case TOPLU_POST_SWISH: s = dnnl_post_ops_append_eltwise(po, 1.f, dnnl_eltwise_swish, 1.f, 0.f); break;
      case TOPLU_POST_SUM: s = dnnl_post_ops_append_sum(po, 1.f); break;
      case TOPLU_POST_LINEAR: s = dnnl_post_ops_append_eltwise(po, 1.f, dnnl_eltwise_linear, p->alpha, p->beta); break;
      case TOPLU_POST_GELU_ERF: s = dnnl_post_ops_append_eltwise(po, 1.f, dnnl_eltwise_gelu_erf, 0.f, 0.f); break;
      case TOPLU_POST_MIN_CHANNEL:
      case TOPLU_POST_QSUM: s = dnnl_unimplemented; break; /* ops/onednn/qconv.c appends its own */
      case TOPLU_POST_BIAS: /* the primitive's bias argument (ops/onednn/matmul.c), not a post-op */
        if (i) s = dnnl_unimplemented;
        break;
    }
  }
  return s;
}

void toplu__post_apply(const toplu__post_op_t *p, float *y, int64_t count) {
  float a = p->alpha, b = p->beta;
  switch (p->kind) {
    case TOPLU_POST_RELU:
      for (int64_t i = 0; i < count; i++) y[i] = y[i] < 0.f ? 0.f : y[i]; /* NaN stays NaN (ONNX max(0, x)) */
      break;
    case TOPLU_POST_LEAKY_RELU:
      for (int64_t i = 0; i < count; i++) y[i] = y[i] >= 0.f ? y[i] : a * y[i];
      break;
    case TOPLU_POST_CLIP:
      for (int64_t i = 0; i < count; i++) y[i] = y[i] < a ? a : y[i] > b ? b : y[i];
      break;
    case TOPLU_POST_SIGMOID:
      for (int64_t i = 0; i < count; i++) y[i] = 1.f / (1.f + expf(-y[i]));
      break;
    case TOPLU_POST_TANH:
      for (int64_t i = 0; i < count; i++) y[i] = tanhf(y[i]);
      break;
    case TOPLU_POST_HARD_SIGMOID:
      for (int64_t i = 0; i < count; i++) {
        float v = a * y[i] + b;
        y[i] = v < 0.f ? 0.f : v > 1.f ? 1.f : v;
      }
      break;
    case TOPLU_POST_HARD_SWISH:
      for (int64_t i = 0; i < count; i++) {
        float v = y[i] / 6.f + 0.5f;
        y[i] *= v < 0.f ? 0.f : v > 1.f ? 1.f : v;
      }
      break;
    case TOPLU_POST_SWISH:
      for (int64_t i = 0; i < count; i++) y[i] = y[i] / (1.f + expf(-y[i]));
      break;
    case TOPLU_POST_LINEAR:
      for (int64_t i = 0; i < count; i++) y[i] = a * y[i] + b;
      break;
    case TOPLU_POST_GELU_ERF:
      toplu__gelu_erf_f32(y, count);
      break;
    case TOPLU_POST_SUM:
    case TOPLU_POST_BIAS:
    case TOPLU_POST_MIN_CHANNEL:
    case TOPLU_POST_QSUM:
      break;
  }
}

int toplu__dnnl_impl_is(const_dnnl_primitive_desc_t pd, const char *prefix) {
  const char *impl = NULL;
  return dnnl_primitive_desc_query(pd, dnnl_query_impl_info_str, 0, &impl) == dnnl_success && impl &&
         !strncmp(impl, prefix, strlen(prefix));
}

toplu_status_t toplu__dnnl_error(toplu__kernel_ctx_t *ctx, dnnl_status_t s, const char *what) {
  return toplu__kernel_error(ctx, s == dnnl_unimplemented ? TOPLU_ERR_UNSUPPORTED : TOPLU_ERR_BACKEND,
                            "oneDNN %s: %s", what, toplu__dnnl_status_name(s));
}

/* p emptied, then pd's user-mode scratchpad added as its argument at workspace offset ws_offset
 * (info->workspace_bytes raised to cover it). */
static void prim_start(toplu__dnnl_prim_t *p, dnnl_primitive_desc_t pd, size_t ws_offset, toplu__kernel_info_t *info) {
  memset(p, 0, sizeof *p);
  const dnnl_memory_desc_t *smd = dnnl_primitive_desc_query_md(pd, dnnl_query_scratchpad_md, 0);
  if (smd && smd->ndims > 0) {
    p->scratchpad_bytes = dnnl_memory_desc_get_size(smd);
    if (p->scratchpad_bytes) {
      toplu__dnnl_prim_arg(p, DNNL_ARG_SCRATCHPAD, TOPLU_DNNL_FROM_WORKSPACE, 0, NULL, smd);
      p->args[p->nargs - 1].offset = ws_offset;
      if (info && ws_offset + p->scratchpad_bytes > info->workspace_bytes)
        info->workspace_bytes = ws_offset + p->scratchpad_bytes;
    }
  }
}

toplu_status_t toplu__dnnl_prim_create(toplu__kernel_ctx_t *ctx, toplu__dnnl_prim_t *p, dnnl_primitive_desc_t pd,
                                      size_t ws_offset, toplu__kernel_info_t *info) {
  prim_start(p, pd, ws_offset, info);
  dnnl_status_t s = dnnl_primitive_create(&p->prim, pd);
  dnnl_primitive_desc_destroy(pd);
  if (s != dnnl_success) {
    p->prim = NULL;
    return toplu__dnnl_error(ctx, s, "primitive creation");
  }
  const_dnnl_primitive_desc_t own; /* the primitive's own desc: its impl string lives as long as it */
  const char *impl = NULL;
  if (info && !info->impl && dnnl_primitive_get_primitive_desc(p->prim, &own) == dnnl_success &&
      dnnl_primitive_desc_query(own, dnnl_query_impl_info_str, 0, &impl) == dnnl_success)
    info->impl = impl;
  return TOPLU_OK;
}

void toplu__dnnl_prim_arg(toplu__dnnl_prim_t *p, int arg, int from, int index, void *ptr, const dnnl_memory_desc_t *md) {
  if (p->nargs >= TOPLU_DNNL_MAX_ARGS) return;
  toplu__dnnl_arg_t *a = &p->args[p->nargs++];
  a->arg = arg;
  a->from = from;
  a->index = index;
  a->ptr = ptr;
  a->offset = 0;
  a->md = *md;
}

/* ---- primitives made later, together (toplu__dnnl_prim_create_later) ---- */

typedef struct deferred_prim {
  toplu__dnnl_prim_t *p; /* NULL: dropped (its kernel released it, or bind made it) */
  char what[256];        /* the node (toplu__node_describe), for an error */
} deferred_prim_t;

typedef struct defer_list {
  deferred_prim_t *v;
  int n, cap;
  int off; /* TOPLU_PARALLEL_PREPARE=off: made at once, as before 2026-12-06 (A/B measurement) */
} defer_list_t;

#define DEFER_DEPTH 4
/* The calling thread's open brackets (prepare_begin), innermost last; deeper ones defer nothing. */
static _Thread_local defer_list_t defer_stack[DEFER_DEPTH];
static _Thread_local int defer_depth;

static defer_list_t *defer_open(void) {
  return defer_depth >= 1 && defer_depth <= DEFER_DEPTH && !defer_stack[defer_depth - 1].off
             ? &defer_stack[defer_depth - 1]
             : NULL;
}

/* Forget p in the open lists (it is made or destroyed now). */
static void defer_forget(const toplu__dnnl_prim_t *p) {
  for (int d = 0; d < defer_depth && d < DEFER_DEPTH; d++)
    for (int i = 0; i < defer_stack[d].n; i++)
      if (defer_stack[d].v[i].p == p) defer_stack[d].v[i].p = NULL;
}

/* impl strings outlive the primitive descriptors they came from (a step's
 * info->impl, the profile's names): one copy per distinct string, kept for
 * the process's life (oneDNN has a few dozen implementations). */
static const char *intern_impl(const char *s) {
  static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
  static char *names[256];
  static int n;
  if (!s) return NULL;
  const char *r = "oneDNN";
  pthread_mutex_lock(&lock);
  int i = 0;
  while (i < n && strcmp(names[i], s)) i++;
  if (i < n) r = names[i];
  else if (n < (int)(sizeof names / sizeof names[0]) && (names[n] = strdup(s))) r = names[n++];
  pthread_mutex_unlock(&lock);
  return r;
}

toplu_status_t toplu__dnnl_prim_create_later(toplu__kernel_ctx_t *ctx, toplu__dnnl_prim_t *p, dnnl_primitive_desc_t pd,
                                            size_t ws_offset, toplu__kernel_info_t *info) {
  defer_list_t *l = defer_open();
  if (l && l->n == l->cap) {
    int cap = l->cap ? 2 * l->cap : 64;
    deferred_prim_t *v = realloc(l->v, (size_t)cap * sizeof *v);
    if (v) l->v = v, l->cap = cap;
  }
  if (!l || l->n == l->cap) return toplu__dnnl_prim_create(ctx, p, pd, ws_offset, info);
  prim_start(p, pd, ws_offset, info);
  const char *impl = NULL;
  if (info && !info->impl && dnnl_primitive_desc_query(pd, dnnl_query_impl_info_str, 0, &impl) == dnnl_success)
    info->impl = intern_impl(impl);
  p->pending = pd;
  deferred_prim_t *d = &l->v[l->n++];
  d->p = p;
  if (ctx->graph && ctx->node) toplu__node_describe(ctx->graph, ctx->node, d->what, sizeof d->what);
  else snprintf(d->what, sizeof d->what, "a node");
  return TOPLU_OK;
}

/* Make a primitive left pending (bind of a plan still being built, or a failed prepare_end's leftovers). */
static dnnl_status_t make_pending(toplu__dnnl_prim_t *p) {
  if (!p->pending) return dnnl_success;
  defer_forget(p);
  dnnl_status_t s = dnnl_primitive_create(&p->prim, p->pending);
  dnnl_primitive_desc_destroy(p->pending);
  p->pending = NULL;
  if (s != dnnl_success) p->prim = NULL;
  return s;
}

void toplu__dnnl_prepare_begin(toplu__backend_t *b) {
  (void)b;
  if (defer_depth < DEFER_DEPTH) {
    const char *e = getenv("TOPLU_PARALLEL_PREPARE");
    defer_stack[defer_depth].n = 0;
    defer_stack[defer_depth].off = e && !strcmp(e, "off");
  }
  defer_depth++;
}

toplu_status_t toplu__dnnl_prepare_end(toplu__backend_t *b, int threads, int ok, toplu_error_t *err) {
  (void)b;
  defer_list_t *l = defer_open();
  toplu_status_t st = TOPLU_OK;
  if (l && ok && l->n > 0) {
    int n = l->n;
    dnnl_status_t *res = malloc((size_t)n * sizeof *res);
    if (!res) {
      st = toplu__errorf(err, TOPLU_ERR_OUT_OF_MEMORY, "out of memory building a plan");
    } else {
      deferred_prim_t *v = l->v;
      /* Each primitive on one thread of the plan's team, the slow ones spread by dynamic scheduling.
       * Identical ones (a network's repeated blocks) meet in oneDNN's primitive cache, which makes
       * each once. */
#pragma omp parallel for schedule(dynamic, 1) num_threads(threads > 0 ? threads : 1)
      for (int i = 0; i < n; i++) {
        toplu__dnnl_prim_t *p = v[i].p;
        res[i] = p && p->pending ? dnnl_primitive_create(&p->prim, p->pending) : dnnl_success;
      }
      for (int i = 0; i < n; i++) {
        toplu__dnnl_prim_t *p = v[i].p;
        if (!p || !p->pending) continue;
        dnnl_primitive_desc_destroy(p->pending);
        p->pending = NULL;
        if (res[i] != dnnl_success) {
          p->prim = NULL;
          if (!st)
            st = toplu__errorf(err, res[i] == dnnl_unimplemented ? TOPLU_ERR_UNSUPPORTED : TOPLU_ERR_BACKEND,
                               "%s: oneDNN primitive creation: %s", v[i].what, toplu__dnnl_status_name(res[i]));
        }
      }
      free(res);
    }
  }
  /* what is left (a failed build): the kernels' release destroys it (toplu__dnnl_prim_destroy) */
  if (l) {
    for (int i = 0; i < l->n; i++) l->v[i].p = NULL;
    l->n = 0;
    if (defer_depth == 1) { /* the outermost bracket: the thread keeps no memory */
      free(l->v);
      l->v = NULL;
      l->cap = 0;
    }
  }
  if (defer_depth > 0) defer_depth--;
  return st;
}

void toplu__dnnl_prim_destroy(toplu__dnnl_prim_t *p) {
  if (p && p->pending) {
    defer_forget(p);
    dnnl_primitive_desc_destroy(p->pending);
    p->pending = NULL;
  }
  if (p && p->prim) dnnl_primitive_destroy(p->prim);
  if (p) p->prim = NULL;
}

typedef struct {
  int n;
  dnnl_memory_t mem[TOPLU_DNNL_MAX_ARGS];
  dnnl_exec_arg_t ea[TOPLU_DNNL_MAX_ARGS];
} prim_exec_t;

void toplu__dnnl_prim_unbind(void *state) {
  prim_exec_t *e = state;
  if (!e) return;
  for (int i = 0; i < e->n; i++)
    if (e->mem[i]) dnnl_memory_destroy(e->mem[i]);
  free(e);
}

static void *arg_ptr(const toplu__kernel_ctx_t *ctx, const toplu__dnnl_arg_t *a) {
  switch (a->from) {
    case TOPLU_DNNL_FROM_INPUT: return ctx->in[a->index].data;
    case TOPLU_DNNL_FROM_OUTPUT: return ctx->out[a->index].data;
    case TOPLU_DNNL_FROM_STATE: return a->ptr;
    default: return ctx->workspace ? (char *)ctx->workspace + a->offset : NULL;
  }
}

void toplu__dnnl_prim_arg_ws(toplu__dnnl_prim_t *p, int arg, size_t offset, const dnnl_memory_desc_t *md) {
  toplu__dnnl_prim_arg(p, arg, TOPLU_DNNL_FROM_WORKSPACE, 0, NULL, md);
  if (p->nargs > 0 && p->args[p->nargs - 1].arg == arg) p->args[p->nargs - 1].offset = offset;
}

toplu_status_t toplu__dnnl_reorder_prim(toplu__kernel_ctx_t *ctx, toplu__dnnl_prim_t *p, const dnnl_memory_desc_t *from,
                                       const dnnl_memory_desc_t *to, toplu__kernel_info_t *info) {
  dnnl_engine_t eng = toplu__dnnl_engine(ctx->backend);
  dnnl_primitive_attr_t attr = NULL;
  dnnl_primitive_desc_t pd = NULL;
  dnnl_status_t s = dnnl_primitive_attr_create(&attr);
  if (s == dnnl_success) s = dnnl_primitive_attr_set_scratchpad_mode(attr, dnnl_scratchpad_mode_user);
  if (s == dnnl_success) s = dnnl_reorder_primitive_desc_create(&pd, from, eng, to, eng, attr);
  if (attr) dnnl_primitive_attr_destroy(attr);
  if (s != dnnl_success) return toplu__dnnl_error(ctx, s, "reorder");
  return toplu__dnnl_prim_create(ctx, p, pd, 0, info);
}

toplu_status_t toplu__dnnl_prim_bind(toplu__kernel_ctx_t *ctx, const toplu__dnnl_prim_t *p, void **state) {
  if (p->pending) { /* a step of a plan still being built run at once (folding): made now, on this thread */
    dnnl_status_t s = make_pending((toplu__dnnl_prim_t *)p);
    if (s != dnnl_success) return toplu__dnnl_error(ctx, s, "primitive creation");
  }
  prim_exec_t *e = calloc(1, sizeof *e);
  if (!e) return toplu__kernel_error(ctx, TOPLU_ERR_OUT_OF_MEMORY, "out of memory");
  for (int i = 0; i < p->nargs; i++) {
    void *ptr = arg_ptr(ctx, &p->args[i]);
    dnnl_status_t s = dnnl_memory_create(&e->mem[i], &p->args[i].md, toplu__dnnl_engine(ctx->backend), ptr ? ptr : DNNL_MEMORY_NONE);
    if (s != dnnl_success) {
      e->n = i;
      toplu__dnnl_prim_unbind(e);
      return toplu__dnnl_error(ctx, s, "memory creation");
    }
    e->ea[i].arg = p->args[i].arg;
    e->ea[i].memory = e->mem[i];
  }
  e->n = p->nargs;
  *state = e;
  return TOPLU_OK;
}

toplu_status_t toplu__dnnl_prim_execute(toplu__kernel_ctx_t *ctx, const toplu__dnnl_prim_t *p, void *state) {
  prim_exec_t *e = state;
  for (int i = 0; i < e->n; i++) {
    void *ptr = arg_ptr(ctx, &p->args[i]);
    void *cur = NULL;
    dnnl_memory_get_data_handle(e->mem[i], &cur);
    if (cur != ptr) dnnl_memory_set_data_handle_v2(e->mem[i], ptr, (dnnl_stream_t)ctx->stream);
  }
  dnnl_status_t s = dnnl_primitive_execute(p->prim, (dnnl_stream_t)ctx->stream, e->n, e->ea);
  if (s == dnnl_success) s = dnnl_stream_wait((dnnl_stream_t)ctx->stream);
  if (s != dnnl_success) return toplu__dnnl_error(ctx, s, "execution");
  return TOPLU_OK;
}

toplu_status_t toplu__dnnl_reorder_now(toplu__kernel_ctx_t *ctx, const dnnl_memory_desc_t *src_md, const void *src,
                                      const dnnl_memory_desc_t *dst_md, void *dst) {
  dnnl_engine_t eng = toplu__dnnl_engine(ctx->backend);
  dnnl_primitive_desc_t rpd = NULL;
  dnnl_primitive_t r = NULL;
  dnnl_memory_t ms = NULL, md = NULL;
  dnnl_stream_t stream = NULL;
  dnnl_status_t s = dnnl_reorder_primitive_desc_create(&rpd, src_md, eng, dst_md, eng, NULL);
  if (s == dnnl_success) s = dnnl_primitive_create(&r, rpd);
  if (s == dnnl_success) s = dnnl_memory_create(&ms, src_md, eng, (void *)src);
  if (s == dnnl_success) s = dnnl_memory_create(&md, dst_md, eng, dst);
  if (s == dnnl_success) s = dnnl_stream_create(&stream, eng, dnnl_stream_default_flags);
  if (s == dnnl_success) {
    dnnl_exec_arg_t ea[2] = {{DNNL_ARG_FROM, ms}, {DNNL_ARG_TO, md}};
    s = dnnl_primitive_execute(r, stream, 2, ea);
    if (s == dnnl_success) s = dnnl_stream_wait(stream);
  }
  if (stream) dnnl_stream_destroy(stream);
  if (ms) dnnl_memory_destroy(ms);
  if (md) dnnl_memory_destroy(md);
  if (r) dnnl_primitive_destroy(r);
  if (rpd) dnnl_primitive_desc_destroy(rpd);
  return s == dnnl_success ? TOPLU_OK : toplu__dnnl_error(ctx, s, "weight reorder");
}

/* ---- the CPU backend's iface (ops/backend.h) ---- */

static void *cpu_buffer_alloc(toplu__backend_t *b, toplu_allocator_t *a, size_t bytes) {
  (void)b;
  return toplu_allocator_alloc(a, bytes);
}

static void cpu_buffer_free(toplu__backend_t *b, toplu_allocator_t *a, void *p) {
  (void)b;
  toplu_allocator_free(a, p);
}

static toplu_status_t cpu_stream_create(toplu__backend_t *b, void **stream, toplu_error_t *err) {
  dnnl_stream_t s = NULL;
  toplu_status_t st = toplu__backend_stream_create(b, &s, err);
  *stream = s;
  return st;
}

static void cpu_stream_destroy(toplu__backend_t *b, void *stream) {
  (void)b;
  if (stream) dnnl_stream_destroy((dnnl_stream_t)stream);
}

static toplu_status_t cpu_synchronize(toplu__backend_t *b, void *stream) {
  (void)b;
  return !stream || dnnl_stream_wait((dnnl_stream_t)stream) == dnnl_success ? TOPLU_OK : TOPLU_ERR_BACKEND;
}

static size_t cpu_layout_bytes(const void *layout) { return dnnl_memory_desc_get_size(layout); }

static int cpu_layout_equal(const void *a, const void *b) { return dnnl_memory_desc_equal(a, b) != 0; }

/* oneDNN's format tag of a blocked layout, as its verbose mode writes it:
 * dims as letters from the outermost stride in, a blocked dim in upper
 * case, then the inner blocks ("aBcd8b" is nChw8c, "ABcd8b8a" OIhw8i8o). */
static const char *cpu_layout_describe(const void *layout, char *buf, size_t size) {
  const dnnl_memory_desc_t *md = layout;
  const dnnl_blocking_desc_t *bd = &md->format_desc.blocking;
  if (md->format_kind != dnnl_blocked || md->ndims <= 0 || md->ndims > DNNL_MAX_NDIMS) {
    snprintf(buf, size, "blocked");
    return buf;
  }
  int order[DNNL_MAX_NDIMS], nd = md->ndims;
  for (int i = 0; i < nd; i++) order[i] = i;
  for (int i = 1; i < nd; i++) /* outermost (largest stride) first; ties keep dim order */
    for (int k = i; k > 0 && bd->strides[order[k]] > bd->strides[order[k - 1]]; k--) {
      int t = order[k];
      order[k] = order[k - 1];
      order[k - 1] = t;
    }
  size_t n = 0;
  for (int i = 0; i < nd && n + 1 < size; i++) {
    int d = order[i], blocked = 0;
    for (int b = 0; b < bd->inner_nblks; b++) blocked |= bd->inner_idxs[b] == d;
    buf[n++] = (char)((blocked ? 'A' : 'a') + d);
  }
  buf[n < size ? n : size - 1] = 0;
  for (int b = 0; b < bd->inner_nblks && n < size; b++) {
    int w = snprintf(buf + n, size - n, "%lld%c", (long long)bd->inner_blks[b], (char)('a' + bd->inner_idxs[b]));
    if (w < 0) break;
    n += (size_t)w;
  }
  return buf;
}

/* Blocked-layout alternatives first (tried only when an input arrives
 * blocked: TOPLU_KERNEL_BLOCKED_ALT; Winograd before oneDNN's direct
 * convolution), then the general kernels. */
int toplu__cpu_int8_exact(void) {
  dnnl_cpu_isa_t isa = dnnl_get_effective_cpu_isa();
  return ((unsigned)isa & 0x40u) != 0 /* avx512_core_vnni and above */ || ((unsigned)isa & 0x400u) != 0 /* avx2_vnni */;
}

static const toplu__kernel_t *const cpu_families[] = {
    toplu__kernels_winograd, toplu__kernels_blocked, toplu__kernels_elementwise, toplu__kernels_conv,   toplu__kernels_conv_dw, toplu__kernels_matmul,
    toplu__kernels_pool,    toplu__kernels_norm,        toplu__kernels_reduce, toplu__kernels_tensor,
    toplu__kernels_resize,  toplu__kernels_quant,       toplu__kernels_qconv,  toplu__kernels_qmatmul, toplu__kernels_quant_matmul,
    toplu__kernels_quant_binary, toplu__kernels_training, toplu__kernels_index, toplu__kernels_signal,
    toplu__kernels_vision,  toplu__kernels_einsum_gemm, toplu__kernels_linalg, toplu__kernels_rnn, toplu__kernels_text, toplu__kernels_strings, toplu__kernels_attention,
    NULL,
};

const toplu__backend_iface_t toplu__backend_cpu = {
    .name = "cpu",
    .device = TOPLU_DEVICE_HOST,
    .init = cpu_init,
    .fini = cpu_fini,
    .buffer_alloc = cpu_buffer_alloc,
    .buffer_free = cpu_buffer_free,
    .copy_from_host = toplu__backend_host_copy,
    .copy_to_host = toplu__backend_host_copy,
    .stream_create = cpu_stream_create,
    .stream_destroy = cpu_stream_destroy,
    .synchronize = cpu_synchronize,
    .layout_bytes = cpu_layout_bytes,
    .layout_equal = cpu_layout_equal,
    .layout_describe = cpu_layout_describe,
    .reorder = &toplu__kernel_reorder,
    .families = cpu_families,
    .prepare_begin = toplu__dnnl_prepare_begin,
    .prepare_end = toplu__dnnl_prepare_end,
};
