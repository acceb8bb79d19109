/*
 * graph/schema.h - what each ONNX op means to the graph: arity, attribute
 * checks and shape/type inference.
 *
 * One schema per (domain, op_type).  infer() sees its inputs' dtypes and
 * dims, and the values of constant inputs (data != NULL), and sets every
 * output's dtype and dims.  It runs twice in a model's life:
 *   - at load (ctx->concrete == 0): dims may be symbols (< 0, see graph.h)
 *     and non-constant inputs have no data; infer must then still give the
 *     rank and as many dims as it can, using toplu__infer_new_dim() for dims it
 *     cannot know, and reject only what is wrong for every binding;
 *   - at plan time (ctx->concrete == 1): every dim is known, and every input
 *     named in const_inputs holds its value (the planner checks this first).
 * infer may give outputs a value (toplu__infer_set_const), which makes them
 * constants: Shape and Constant do, so shape arithmetic folds for any batch.
 * Errors name the node and the tensor: use toplu__infer_error().
 *
 * Schemas are grouped in families (graph/schema_<family>.c), each exporting
 * a table ending with an entry whose op_type is NULL; graph/schema.c lists
 * the families.
 */
#ifndef TOPLU_GRAPH_SCHEMA_H
#define TOPLU_GRAPH_SCHEMA_H

#include <stdint.h>

#include "core/error.h"
#include "graph/graph.h"

typedef struct toplu__infer_ctx {
  toplu__graph_t *graph;        /* for symbols and messages */
  const toplu__node_t *node;
  int n_in, n_out;
  const toplu_tensor_t *in;    /* absent optional input: dtype UNDEFINED, ndim -1, data NULL */
  toplu_tensor_t *out;         /* infer sets dtype, ndim, dims (and data via set_const) */
  int concrete;                /* 1: all dims known (plan time) */
  toplu_error_t *err;
  /* Owned copies made by toplu__infer_set_const; the caller takes them. */
  void *out_const[8];
} toplu__infer_ctx_t;

/* toplu.ScaledDotProductAttention with q_bshd/k_bshd/v_bshd (graph/fuse.c): the
 * [B, H, T, d] view of a rank-4 [B, T, H, d] tensor (perm 0,2,1,3), or with
 * key 1 the [B, H, d, S] view of K [B, S, H, d] (perm 0,2,3,1); other ranks
 * unchanged.  Only dims are permuted (data and strides are not touched). */
void toplu__sdpa_view(const toplu_tensor_t *x, int key, toplu_tensor_t *view);

typedef toplu_status_t (*toplu__infer_fn)(toplu__infer_ctx_t *ctx);
/* Floating-point (or integer) operations of one run of the node at the
 * ctx's concrete shapes; a multiply-add counts 2. */
typedef int64_t (*toplu__flops_fn)(const toplu__infer_ctx_t *ctx);

typedef struct toplu__schema {
  const char *op_type;          /* NULL ends a family table */
  const char *domain;           /* "" for ai.onnx */
  int since_version;            /* lowest opset whose semantics infer/kernels follow */
  int min_inputs, max_inputs;
  int min_outputs, max_outputs;
  uint32_t const_inputs;        /* bit i: input i must be constant at plan time */
  toplu__infer_fn infer;
  toplu__flops_fn flops;         /* NULL: one op per output element */
  /* 1 when the node, at the concrete shapes and constants of t, combines
   * rows of dim 0 (works along axis 0): a fixed-batch model with such a
   * node cannot run a batch in one plan and runs row by row.  NULL: the op
   * keeps rows apart.  t is a const toplu__value_table_t * (graph/infer.h). */
  int (*mixes_rows)(const toplu__node_t *n, const void *t);
} toplu__schema_t;

/* mixes_rows functions for the common cases (graph/schema.c):
 *   toplu__rows_axis0     an "axis" attribute (default 0) that is 0
 *   toplu__rows_softmax   Softmax/LogSoftmax/Hardmax: axis <= 0 (opset < 13 default 1, else -1)
 *   toplu__rows_transpose perm[0] != 0 (no perm: reversed, so rank > 1)
 *   toplu__rows_gather    axis 0 on a non-constant input
 *   toplu__rows_gemm      transA on a non-constant A
 *   toplu__rows_reduce    axes (the attribute, or a constant input 1) holding 0; none given (all axes)
 *   toplu__rows_training  BatchNormalization in training_mode
 *   toplu__rows_last_axis LayerNormalization: axis <= 0
 *   toplu__rows_mvn       MeanVarianceNormalization: default axes [0, 2, 3] or 0 among them */
int toplu__rows_axis0(const toplu__node_t *n, const void *t);
int toplu__rows_softmax(const toplu__node_t *n, const void *t);
int toplu__rows_transpose(const toplu__node_t *n, const void *t);
int toplu__rows_gather(const toplu__node_t *n, const void *t);
int toplu__rows_gemm(const toplu__node_t *n, const void *t);
int toplu__rows_reduce(const toplu__node_t *n, const void *t);
int toplu__rows_training(const toplu__node_t *n, const void *t);
int toplu__rows_last_axis(const toplu__node_t *n, const void *t);
int toplu__rows_mvn(const toplu__node_t *n, const void *t);

/* The schema for an op, or NULL.  domain "" and "ai.onnx" are the same. */
const toplu__schema_t *toplu__schema_find(const char *domain, const char *op_type);

/* Every schema, for listing: calls fn for each; returns the count. */
int toplu__schema_foreach(void (*fn)(const toplu__schema_t *s, void *user), void *user);

/*
 * Check the types of the node's attributes that ONNX defines with one type
 * across ops (strides: INTS, axis: INT, epsilon: FLOAT, auto_pad: STRING, ...),
 * so a FLOAT "strides" is an error instead of a silent default.
 * Errors: TOPLU_ERR_INVALID_MODEL naming the node and attribute.
 */
toplu_status_t toplu__schema_check_attrs(const toplu__graph_t *g, const toplu__node_t *n, toplu_error_t *err);

/* ---- helpers for infer functions ---- */

/* Error "<model>: node 12 'name' (Op): <message>" with the given status. */
toplu_status_t toplu__infer_error(toplu__infer_ctx_t *ctx, toplu_status_t st, const char *fmt, ...) TOPLU_PRINTF(3, 4);

/* 1 when optional input i is present. */
int toplu__infer_has_input(const toplu__infer_ctx_t *ctx, int i);

/* A dim nobody can know at load (fresh anonymous symbol); 0 never happens in
 * concrete mode (where callers always know dims). */
int64_t toplu__infer_new_dim(toplu__infer_ctx_t *ctx);

/* Set out[i] to dtype + shape. */
void toplu__infer_set(toplu__infer_ctx_t *ctx, int i, toplu_dtype_t dtype, int ndim, const int64_t *dims);

/* out[i] = in[j]'s dtype and shape. */
void toplu__infer_same(toplu__infer_ctx_t *ctx, int i, int j);

/* Give out[i] (dtype and dims already set) the value at src (copied). */
toplu_status_t toplu__infer_set_const(toplu__infer_ctx_t *ctx, int i, const void *src);

/* Multidirectional (numpy) broadcast of the shapes of inputs a..: n inputs
 * listed in idx; sets *ndim and dims.  Symbolic dims broadcast against 1 and
 * equal symbols; two different symbols give a fresh one at load.  Errors:
 * TOPLU_ERR_SHAPE naming both inputs. */
toplu_status_t toplu__infer_broadcast(toplu__infer_ctx_t *ctx, const int *idx, int n, int *ndim, int64_t *dims);

/* Normalise a possibly negative axis against rank; error when out of range. */
toplu_status_t toplu__infer_axis(toplu__infer_ctx_t *ctx, int64_t axis, int rank, const char *what, int *out);

/* Read element k of a constant integer tensor (int32/int64/uint8...) as int64. */
int64_t toplu__tensor_get_int(const toplu_tensor_t *t, int64_t k);
/* Read element k of a constant numeric tensor as double. */
double toplu__tensor_get_double(const toplu_tensor_t *t, int64_t k);

/* Family tables (graph/schema_<family>.c). */
extern const toplu__schema_t toplu__schemas_elementwise[];
extern const toplu__schema_t toplu__schemas_conv[];
extern const toplu__schema_t toplu__schemas_matmul[];
extern const toplu__schema_t toplu__schemas_pool[];
extern const toplu__schema_t toplu__schemas_norm[];
extern const toplu__schema_t toplu__schemas_reduce[];
extern const toplu__schema_t toplu__schemas_tensor[];
extern const toplu__schema_t toplu__schemas_resize[];
extern const toplu__schema_t toplu__schemas_quant[];
extern const toplu__schema_t toplu__schemas_training[];
extern const toplu__schema_t toplu__schemas_index[];
extern const toplu__schema_t toplu__schemas_signal[];
extern const toplu__schema_t toplu__schemas_vision[];
extern const toplu__schema_t toplu__schemas_linalg[];
extern const toplu__schema_t toplu__schemas_rnn[];
extern const toplu__schema_t toplu__schemas_text[];    /* TfIdfVectorizer (graph/schema_text.c) */
extern const toplu__schema_t toplu__schemas_control[]; /* If, Loop, Scan (graph/schema_control.c, graph/control.h) */
extern const toplu__schema_t toplu__schemas_sequence[]; /* sequence and optional ops (graph/schema_sequence.c, graph/sequence.h) */

#endif
