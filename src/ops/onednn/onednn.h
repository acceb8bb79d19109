/*
 * ops/onednn/onednn.h - the CPU backend (toplu__backend_cpu, ops/backend.h):
 * the oneDNN engine a session's kernels share, and small helpers for
 * building oneDNN memory descriptors from toplu tensors.
 *
 * One CPU engine per backend instance (b->impl is a toplu__dnnl_t); one
 * stream per concurrent run (the iface's stream_create), so runs on
 * different threads never share a stream.  oneDNN primitives are immutable
 * after creation and may run concurrently on different streams and buffers.
 * Layouts of this backend are dnnl_memory_desc_t (plain or blocked).
 */
#ifndef TOPLU_OPS_ONEDNN_H
#define TOPLU_OPS_ONEDNN_H

#include <oneapi/dnnl/dnnl.h>
#include <pthread.h>

#include "ops/backend.h"
#include "ops/kernel.h"

typedef struct toplu__packed_const toplu__packed_const_t;

/* The CPU backend's instance state (toplu__backend_t.impl). */
typedef struct toplu__dnnl {
  dnnl_engine_t engine;
  pthread_mutex_t lock;         /* guards packed */
  toplu__packed_const_t *packed; /* constants packed for kernels, shared by the session's plans */
} toplu__dnnl_t;

/* The oneDNN engine of a CPU backend instance. */
static inline dnnl_engine_t toplu__dnnl_engine(const toplu__backend_t *b) { return ((const toplu__dnnl_t *)b->impl)->engine; }

/* A CPU backend instance on its own (constant folding outside a session).
 * Errors: TOPLU_ERR_BACKEND (oneDNN could not make a CPU engine), TOPLU_ERR_OUT_OF_MEMORY. */
toplu_status_t toplu__backend_create(toplu__backend_t **out, toplu_error_t *err);
void toplu__backend_destroy(toplu__backend_t *b);
toplu_status_t toplu__backend_stream_create(toplu__backend_t *b, dnnl_stream_t *out, toplu_error_t *err);

/* oneDNN data type for a toplu dtype (dnnl_data_type_undef when none). */
dnnl_data_type_t toplu__dnnl_dtype(toplu_dtype_t dt);

/* Convolution weights as oneDNN sees them, dims (g, o, i, k...) (no g when
 * group is 1) over the strides of the ONNX layout: Conv W [M, C/g, k...] =
 * [g][M/g][C/g][k...]; ConvTranspose W [C, M/g, k...] = [g][C/g][M/g][k...];
 * elements of dt (f32 for Conv, s8 for QLinearConv).  ops/onednn/conv.c. */
struct toplu__conv_params;
dnnl_status_t toplu__dnnl_conv_weights_md(dnnl_memory_desc_t *md, const struct toplu__conv_params *p, dnnl_data_type_t dt);

/* Plain (row-major) memory descriptor of t's shape and dtype; a scalar is [1]. */
dnnl_status_t toplu__dnnl_plain_md(dnnl_memory_desc_t *md, const toplu_tensor_t *t);

/*
 * Append the node's fused post-ops (graph/graph.h: node->post) to a oneDNN
 * post-ops chain in attr, in order.  TOPLU_POST_SUM becomes a `sum` post-op
 * (the addend must already be in dst when the primitive runs).
 * HardSigmoid is linear(alpha, beta) followed by clip_v2(0, 1).  A BIAS
 * (first only; else dnnl_unimplemented) is the primitive's bias argument
 * and adds nothing here.
 * Returns a oneDNN status.
 */
dnnl_status_t toplu__dnnl_append_post_ops(const toplu__node_t *n, dnnl_primitive_attr_t attr);
/* The same for the node's first count post-ops only. */
dnnl_status_t toplu__dnnl_append_post_ops_n(const toplu__node_t *n, int count, dnnl_primitive_attr_t attr);
/* Append the node's post-ops from..to-1 (the same mapping) to the chain po,
 * which the caller owns (toplu.PointwiseDepthwiseConv puts oneDNN's
 * depthwise post-op between two ranges).  Returns a oneDNN status. */
dnnl_status_t toplu__dnnl_post_ops_add(dnnl_post_ops_t po, const toplu__node_t *n, int from, int to);

/* Apply one activation post-op to y[0..count-1] in place (plain C, used
 * where oneDNN is not).  SUM and BIAS read another input: the caller adds
 * those (nothing is done here). */
void toplu__post_apply(const toplu__post_op_t *po, float *y, int64_t count);

/*
 * A oneDNN primitive and where each of its arguments lives, so one generic
 * bind/run serves every kernel built on oneDNN:
 *   prepare: toplu__dnnl_prim_create() from a primitive descriptor (adds the
 *            user-mode scratchpad, reported as workspace), then
 *            toplu__dnnl_prim_arg() per argument;
 *   bind:    toplu__dnnl_prim_bind() makes the memory objects for one exec
 *            context (ctx->exec_state);
 *   run:     toplu__dnnl_prim_execute() points them at this run's buffers,
 *            executes and waits.
 */
enum { TOPLU_DNNL_FROM_INPUT, TOPLU_DNNL_FROM_OUTPUT, TOPLU_DNNL_FROM_STATE, TOPLU_DNNL_FROM_WORKSPACE };
#define TOPLU_DNNL_MAX_ARGS 12

typedef struct toplu__dnnl_arg {
  int arg;                 /* DNNL_ARG_SRC, ... */
  int from;                /* TOPLU_DNNL_FROM_* */
  int index;               /* input or output index */
  size_t offset;           /* bytes into that buffer (FROM_WORKSPACE) */
  void *ptr;               /* FROM_STATE: a buffer of the kernel's state (packed weights) */
  dnnl_memory_desc_t md;
} toplu__dnnl_arg_t;

typedef struct toplu__dnnl_prim {
  dnnl_primitive_t prim;
  dnnl_primitive_desc_t pending; /* toplu__dnnl_prim_create_later: prim not made yet (made by the plan's
                                  * toplu__dnnl_prepare_end, or by bind) */
  int nargs;
  toplu__dnnl_arg_t args[TOPLU_DNNL_MAX_ARGS];
  size_t scratchpad_bytes;
} toplu__dnnl_prim_t;

/* Create the primitive from pd (which it takes over and destroys) and add the
 * scratchpad argument at workspace offset ws_offset.  info->workspace_bytes is
 * raised to cover it.  Errors: TOPLU_ERR_BACKEND. */
toplu_status_t toplu__dnnl_prim_create(toplu__kernel_ctx_t *ctx, toplu__dnnl_prim_t *p, dnnl_primitive_desc_t pd,
                                      size_t ws_offset, toplu__kernel_info_t *info);
/*
 * toplu__dnnl_prim_create, but when the calling thread is building a plan
 * (between the CPU backend's prepare_begin and prepare_end) the primitive
 * itself, oneDNN's JIT code generation and most of a plan build's time
 * (ResNet-50 int8 with AMX: about 190 ms of a batch size's plan), is made
 * later by prepare_end, together with the plan's other such primitives on
 * the plan's threads.  p's scratchpad, arguments and info (impl included)
 * are set at once; p->prim stays NULL until then, so the caller's prepare
 * must not use it (bind makes it if it is still missing).  A failure to
 * create it then fails the plan build (TOPLU_ERR_BACKEND naming the node).
 * Errors: as toplu__dnnl_prim_create.
 */
toplu_status_t toplu__dnnl_prim_create_later(toplu__kernel_ctx_t *ctx, toplu__dnnl_prim_t *p, dnnl_primitive_desc_t pd,
                                            size_t ws_offset, toplu__kernel_info_t *info);
/* The CPU backend's prepare_begin / prepare_end (ops/backend.h). */
void toplu__dnnl_prepare_begin(toplu__backend_t *b);
toplu_status_t toplu__dnnl_prepare_end(toplu__backend_t *b, int threads, int ok, toplu_error_t *err);
void toplu__dnnl_prim_arg(toplu__dnnl_prim_t *p, int arg, int from, int index, void *ptr, const dnnl_memory_desc_t *md);
/* An argument that lives in the step's workspace, offset bytes in (TOPLU_DNNL_FROM_WORKSPACE). */
void toplu__dnnl_prim_arg_ws(toplu__dnnl_prim_t *p, int arg, size_t offset, const dnnl_memory_desc_t *md);
/* A reorder primitive from -> to (user-mode scratchpad at workspace offset 0;
 * info, when not NULL, as for toplu__dnnl_prim_create).  Its FROM and TO
 * arguments are the caller's to add.  Errors: TOPLU_ERR_UNSUPPORTED (no such
 * reorder), TOPLU_ERR_BACKEND. */
toplu_status_t toplu__dnnl_reorder_prim(toplu__kernel_ctx_t *ctx, toplu__dnnl_prim_t *p, const dnnl_memory_desc_t *from,
                                       const dnnl_memory_desc_t *to, toplu__kernel_info_t *info);
void toplu__dnnl_prim_destroy(toplu__dnnl_prim_t *p);
/* Per exec context: memory objects for each argument.  *state is freed by
 * toplu__dnnl_prim_unbind. */
toplu_status_t toplu__dnnl_prim_bind(toplu__kernel_ctx_t *ctx, const toplu__dnnl_prim_t *p, void **state);
void toplu__dnnl_prim_unbind(void *state);
/* Execute on this run's buffers and wait. */
toplu_status_t toplu__dnnl_prim_execute(toplu__kernel_ctx_t *ctx, const toplu__dnnl_prim_t *p, void *state);

/*
 * A constant input (src, laid out as src_md) packed into dst_md for a
 * primitive, shared by every plan of the session that packs the same
 * constant into the same layout: plans for other batch sizes reuse the
 * copy instead of holding their own.  *out receives the packed bytes (owned
 * by the backend; give them back with toplu__dnnl_pack_release), *bytes their
 * size; info->weight_bytes grows by it and info->shared_weight_bytes too
 * when the copy already existed.  Keyed by src's address, so only for data
 * that lives at least as long as the plan (the model's constants or the
 * plan's own folded ones).  Errors: TOPLU_ERR_OUT_OF_MEMORY,
 * TOPLU_ERR_BACKEND.  Thread-safe.
 */
toplu_status_t toplu__dnnl_pack_const(toplu__kernel_ctx_t *ctx, toplu__kernel_info_t *info,
                                     const dnnl_memory_desc_t *src_md, const void *src,
                                     const dnnl_memory_desc_t *dst_md, void **out, size_t *bytes);
/*
 * The same sharing for a constant the kernel transforms with its own code
 * (Winograd's transformed weights, the own GEMM's packed B): kind names the
 * transform (a string literal; with src and bytes it is the key), fill(dst,
 * arg) writes the bytes once.  Give back with toplu__dnnl_pack_release.
 * Errors: TOPLU_ERR_OUT_OF_MEMORY.  Thread-safe.
 */
typedef void (*toplu__pack_fill_fn)(void *dst, const void *arg);
toplu_status_t toplu__dnnl_pack_custom(toplu__kernel_ctx_t *ctx, toplu__kernel_info_t *info, const void *src,
                                      const char *kind, size_t bytes, toplu__pack_fill_fn fill, const void *arg,
                                      void **out);

/* Give back what toplu__dnnl_pack_const returned (NULL allowed): freed when
 * no plan uses it any more.  Thread-safe. */
void toplu__dnnl_pack_release(toplu__kernel_ctx_t *ctx, void *packed);

/* One-off reorder at prepare time (weights into the layout a primitive chose). */
toplu_status_t toplu__dnnl_reorder_now(toplu__kernel_ctx_t *ctx, const dnnl_memory_desc_t *src_md, const void *src,
                                      const dnnl_memory_desc_t *dst_md, void *dst);

/* Error from a oneDNN status, naming the node. */
toplu_status_t toplu__dnnl_error(toplu__kernel_ctx_t *ctx, dnnl_status_t s, const char *what);

/* 1 when pd's implementation name (impl_info_str: "ref:any", "brgconv_1x1:avx512_core") begins with prefix. */
int toplu__dnnl_impl_is(const_dnnl_primitive_desc_t pd, const char *prefix);

/* oneDNN status name for messages. */
const char *toplu__dnnl_status_name(dnnl_status_t s);

#endif
