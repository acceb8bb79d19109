/*
 * ops/kernel.h - the kernel interface: how an op computes.
 *
 * A kernel is chosen once per node when a plan is built (by domain, op type,
 * and what prepare() accepts: dtypes, attributes), never on the run path.
 *   prepare(ctx, info)  plan time.  Shapes are concrete; constant inputs
 *                       (weights) have data, others have data == NULL.  It
 *                       validates what it needs (TOPLU_ERR_UNSUPPORTED with
 *                       the reason for dtypes or attributes it lacks), may
 *                       create state (oneDNN primitives, reordered weights)
 *                       with toplu__kernel_alloc(), and reports the scratch
 *                       bytes it needs per run in info->workspace_bytes.
 *   run(ctx)            every inference.  All data pointers are set; no
 *                       malloc, no syscalls; ctx->workspace holds the bytes
 *                       asked for.  Must be safe to call from several threads
 *                       at once with different in/out/workspace buffers
 *                       (state is read-only after prepare).
 *   release(ctx)        frees what prepare made (also after a failed prepare
 *                       that set ctx->state, so prepare need not clean up).
 *   bind/unbind(ctx)    optional per exec context state (see the struct).
 * Kernels live in families (ops/<family>.c), each exporting a table ending
 * with an entry whose op_type is NULL; ops/registry.c lists the families.
 *
 * Threads: kernels use OpenMP (the runtime oneDNN is built with here), with
 * at most ctx->threads threads: `#pragma omp parallel for num_threads(ctx->threads)`.
 */
#ifndef TOPLU_OPS_KERNEL_H
#define TOPLU_OPS_KERNEL_H

#include <stddef.h>
#include <stdint.h>

#include "core/error.h"
#include "graph/graph.h"
#include "toplu/alloc.h"

typedef struct toplu__backend toplu__backend_t; /* the backend running the kernel (ops/backend.h) */
typedef struct toplu__choices toplu__choices_t; /* kernel choices made by timing (ops/choice.h) */

typedef struct toplu__kernel_ctx {
  const toplu__graph_t *graph;
  const toplu__node_t *node;
  int n_in, n_out;
  toplu_tensor_t *in;   /* absent optional input: dtype UNDEFINED, ndim -1, data NULL */
  toplu_tensor_t *out;  /* an output the graph does not use still has a buffer */
  void *state;          /* set by prepare, read-only in run */
  void *workspace;      /* run: info->workspace_bytes of scratch, 64-byte aligned */
  size_t workspace_bytes;
  int threads;          /* >= 1 */
  toplu_allocator_t *alloc; /* prepare: for state and packed weights (counted) */
  toplu__backend_t *backend; /* the backend this kernel belongs to (ops/backend.h) */
  void *stream;         /* run: that backend's stream of the calling thread's run (a dnnl_stream_t on the CPU) */
  void *exec_state;     /* set by bind() for this exec context (one arena), read in run */
  /* prepare: where a kernel that times its candidates (ops/choice.h) looks
   * up and records its choice; NULL: no timing, the kernel's first
   * candidate (toplu_session_options_t.choose_kernels -1, constant
   * folding, kernel tests). */
  toplu__choices_t *choices;
  /* Layout-aware kernels (TOPLU_KERNEL_LAYOUT) only: per input, the
   * backend's layout it arrives in (on the CPU a const dnnl_memory_desc_t *
   * of a blocked layout), NULL when plain.  Other kernels always get plain
   * inputs in their backend's memory. */
  const void *const *in_md;
  toplu_error_t *err;
} toplu__kernel_ctx_t;

typedef struct toplu__kernel_info {
  size_t workspace_bytes; /* scratch per run */
  size_t weight_bytes;    /* packed/reordered copies of constant inputs held in state */
  size_t shared_weight_bytes; /* the part of weight_bytes another plan of the session already
                                 packed (toplu__dnnl_pack_const): needed, not newly allocated */
  size_t state_bytes;     /* other state */
  /* Constant inputs the kernel no longer reads after prepare (packed into
   * state): bit i set.  Lets the plan count weights once. */
  uint32_t consumed_consts;
  /* Input whose buffer output 0 may take over when that input dies at this
   * node (same dtype and byte size): -1 none (the default, set before
   * prepare).  TOPLU_KERNEL_INPLACE means input 0. */
  int inplace_input;
  /* Layout-aware kernels only (pointers into the kernel's state, which
   * outlives the plan's use of them):
   *   out_md[j]   layout the kernel writes output j in (NULL: plain);
   *   want_md[i]  layout input i must be reordered into first (NULL: as it
   *               arrives); want_plain bit i: reorder input i to plain. */
#define TOPLU_KERNEL_MAX_LAYOUT 16
  const void *out_md[TOPLU_KERNEL_MAX_LAYOUT];
  const void *want_md[TOPLU_KERNEL_MAX_LAYOUT];
  uint32_t want_plain;
  /* The implementation's name for profiles (toplu_node_profile_t.impl):
   * oneDNN's impl_info_str of the kernel's primitive ("brg:avx2"), set by
   * toplu__dnnl_prim_create; a static string or one in the kernel's state.
   * NULL: the plan names it "toplu:<backend>". */
  const char *impl;
} toplu__kernel_info_t;

enum {
  /* Output 0 is input 0's bytes under another shape (Reshape, Flatten,
   * Squeeze, Unsqueeze, Identity): the planner aliases the buffers and run
   * is not called.  */
  TOPLU_KERNEL_VIEW = 1u << 0,
  /* run() is correct when output 0 and input 0 share one buffer (element-wise
   * ops); the planner does so when input 0 dies at this node and the sizes match. */
  TOPLU_KERNEL_INPLACE = 1u << 1,
  /* Accepts and produces its backend's layouts (see in_md, out_md, want_md). */
  TOPLU_KERNEL_LAYOUT = 1u << 2,
  /* A layout-aware alternative of a plain kernel, tried only when an input
   * arrives in a non-plain layout (ops/onednn/blocked.c); never used for
   * constant folding. */
  TOPLU_KERNEL_BLOCKED_ALT = 1u << 3,
  /* A faster kernel for some cases of an op (it refuses the others in
   * prepare), tried before the general one; never the kernel
   * toplu__kernel_find returns (constant folding, kernel tests). */
  TOPLU_KERNEL_SPECIALISED = 1u << 4
};

typedef struct toplu__kernel {
  const char *op_type; /* NULL ends a family table */
  const char *domain;  /* "" for ai.onnx */
  toplu_status_t (*prepare)(toplu__kernel_ctx_t *ctx, toplu__kernel_info_t *info); /* NULL: nothing to prepare */
  toplu_status_t (*run)(toplu__kernel_ctx_t *ctx);
  void (*release)(toplu__kernel_ctx_t *ctx); /* NULL: state is NULL or freed with toplu__kernel_free */
  unsigned flags;
  /* Optional, per exec context (each concurrent run has its own arena):
   * bind() is called once when the context is made, with ctx's data
   * pointers set for that arena (graph inputs: NULL, they change per run),
   * and may set ctx->exec_state (e.g. oneDNN memory objects); unbind()
   * frees it.  run() must still check pointers that can change per run. */
  toplu_status_t (*bind)(toplu__kernel_ctx_t *ctx);
  void (*unbind)(toplu__kernel_ctx_t *ctx);
  /* Optional quick check before prepare, on the same ctx (node, input and
   * output dtypes and shapes, in_md): 0 when the kernel cannot take this
   * node, so the plan tries the next candidate without calling prepare.
   * NULL: prepare decides (returning TOPLU_ERR_UNSUPPORTED). */
  int (*supports)(const toplu__kernel_ctx_t *ctx);
} toplu__kernel_t;

/* n rounded up to a multiple of 64 (workspace and state offsets, 64-byte aligned). */
static inline size_t toplu__align64(size_t n) { return (n + 63) & ~(size_t)63; }

/* The CPU backend's general kernel for an op (no blocked alternatives):
 * what constant folding runs.  NULL when there is none. */
const toplu__kernel_t *toplu__kernel_find(const char *domain, const char *op_type);

/* The CPU backend's reorder kernel (ops/onednn/blocked.c): copies input 0, laid out as
 * ctx->in_md[0] says, to output 0 laid out as ctx->in_md[1] says (NULL:
 * plain row-major). */
extern const toplu__kernel_t toplu__kernel_reorder;

/* prepare-time allocation counted by the plan's allocator (64-byte aligned). */
void *toplu__kernel_alloc(toplu__kernel_ctx_t *ctx, size_t bytes);
void toplu__kernel_free(toplu__kernel_ctx_t *ctx, void *p);

/* Error naming the model, node and reason. */
toplu_status_t toplu__kernel_error(toplu__kernel_ctx_t *ctx, toplu_status_t st, const char *fmt, ...) TOPLU_PRINTF(3, 4);

/* Family tables (ops/<family>.c). */
extern const toplu__kernel_t toplu__kernels_elementwise[];
extern const toplu__kernel_t toplu__kernels_conv[];
extern const toplu__kernel_t toplu__kernels_conv_dw[]; /* ops/onednn/conv_dw.c: toplu.PointwiseDepthwiseConv */
extern const toplu__kernel_t toplu__kernels_matmul[];
extern const toplu__kernel_t toplu__kernels_pool[];
extern const toplu__kernel_t toplu__kernels_norm[];
extern const toplu__kernel_t toplu__kernels_reduce[];
extern const toplu__kernel_t toplu__kernels_tensor[];
extern const toplu__kernel_t toplu__kernels_resize[];
extern const toplu__kernel_t toplu__kernels_quant[];
extern const toplu__kernel_t toplu__kernels_qconv[]; /* ops/onednn/qconv.c: QLinearConv, ConvInteger */
/* 1 when oneDNN's integer convolution is exact on this CPU: its effective
 * ISA has VNNI (AVX512-VNNI or AVX-VNNI).  Without VNNI oneDNN forms u8 x s8
 * products in 16-bit sums (vpmaddubsw), which saturate: measured with
 * DNNL_MAX_CPU_ISA=AVX2 on Zen 5, QLinearConv outputs up to 151 steps off
 * and MobileNetV2 int8 0.72 from ONNX Runtime.  Thread-safe. */
int toplu__cpu_int8_exact(void);
extern const toplu__kernel_t toplu__kernels_quant_matmul[]; /* ops/quant_matmul.c: MatMulInteger, QLinearMatMul,
                                                             toplu.DynamicQuantizeMatMul (plain C, exact) */
extern const toplu__kernel_t toplu__kernels_qmatmul[]; /* ops/onednn/qmatmul.c: the same on oneDNN's integer matmul */
extern const toplu__kernel_t toplu__kernels_quant_binary[]; /* ops/quant_binary.c: com.microsoft QLinearAdd, QLinearMul */
extern const toplu__kernel_t toplu__kernels_training[];
extern const toplu__kernel_t toplu__kernels_index[];
extern const toplu__kernel_t toplu__kernels_signal[];
extern const toplu__kernel_t toplu__kernels_vision[];
extern const toplu__kernel_t toplu__kernels_linalg[];
extern const toplu__kernel_t toplu__kernels_einsum_gemm[]; /* ops/onednn/einsum.c: two-input float32 Einsum as GEMMs */
extern const toplu__kernel_t toplu__kernels_blocked[];
extern const toplu__kernel_t toplu__kernels_winograd[]; /* ops/onednn/winograd.c */
extern const toplu__kernel_t toplu__kernels_text[];     /* ops/text.c: TfIdfVectorizer */
extern const toplu__kernel_t toplu__kernels_strings[];  /* ops/strings.c: StringNormalizer (Cast to and from STRING: ops/strings.h) */
extern const toplu__kernel_t toplu__kernels_rnn[];      /* ops/onednn/rnn.c */
extern const toplu__kernel_t toplu__kernels_attention[]; /* ops/onednn/attention.c: toplu.ScaledDotProductAttention */
/* The reference backend's plain-C kernels (ops/ref/ref.c). */
extern const toplu__kernel_t toplu__kernels_ref[];

#endif
