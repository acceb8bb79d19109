/*
 * toplu/model.h - loading an ONNX model.
 *
 * toplu_model_load() parses an ONNX file (protobuf-c, from onnx.proto),
 * checks it (every input produced, no cycles, known ops and opsets,
 * consistent types), sorts it topologically, folds constant subgraphs,
 * folds BatchNormalization into the Conv before it, and infers shapes with
 * symbolic dims kept symbolic.  A loaded model is immutable: any number of
 * sessions in any number of threads may use one model at once.
 */
#ifndef TOPLU_MODEL_H
#define TOPLU_MODEL_H

#include <stddef.h>
#include <stdint.h>

#include "toplu/status.h"
#include "toplu/tensor.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct toplu_model toplu_model_t;

/* A graph input or output as declared (or inferred) at load time. */
typedef struct toplu_value_info {
  const char *name;
  toplu_dtype_t dtype;
  int ndim;                             /* -1 when the rank is unknown */
  int64_t dims[TOPLU_MAX_DIMS];         /* >= 0 known; -1 symbolic or unknown */
  const char *dim_names[TOPLU_MAX_DIMS];/* symbol ("batch_size", "N", "?") for dims[i] == -1, else NULL */
  /* TOPLU_KIND_TENSOR, or TOPLU_KIND_SEQUENCE / TOPLU_KIND_OPTIONAL for an
   * ONNX sequence or optional (toplu/tensor.h); dtype is then the element
   * tensors' type and ndim is -1 (items' shapes are bound per run). */
  toplu_kind_t kind;
  /* With kind OPTIONAL: what a present value is, TOPLU_KIND_TENSOR or
   * TOPLU_KIND_SEQUENCE; else equal to kind. */
  toplu_kind_t elem_kind;
} toplu_value_info_t;

typedef struct toplu_model_options {
  /* Skip optimisation passes (constant folding, BatchNormalization folding,
   * activation fusion); for debugging and node-level comparisons. */
  int no_optimize;
  /* QDQ graphs (DequantizeLinear -> Conv -> QuantizeLinear): 1 runs every
   * such Conv as an integer convolution, also one whose Relu or Clip the
   * quantization does not make redundant (a Clip(0, 6) before a
   * quantization whose top is 6.0000001).  By default those stay float
   * Convs, as ONNX Runtime runs them, so that outputs agree with ONNX
   * Runtime's within a step or two of the output quantization; in int8
   * they are exact integer arithmetic but round differently (MobileNetV2
   * int8: 9 output steps from ONNX Runtime instead of 2) and run about 3x
   * faster (docs/performance.md, "Int8").  Only on a CPU with VNNI: without
   * it no QDQ Conv runs in int8 (oneDNN's integer convolution is inexact
   * there). */
  int qdq_int8_all;
  /* 1 leaves scaled dot-product attention written out (MatMul, scale,
   * mask, Softmax, MatMul as separate steps) instead of fusing it into one
   * toplu.ScaledDotProductAttention step (docs/design.md, "Attention"); for
   * debugging and for timing the fused kernel against the unfused graph.
   * The other fusions stay on (no_optimize turns them all off). */
  int no_fuse_attention;
  /* 1 leaves the residual Adds of a QDQ model (DequantizeLinear of an
   * integer convolution's output + DequantizeLinear of the residual ->
   * Add [-> Relu] -> QuantizeLinear) as separate steps instead of ending
   * the integer convolution before them with them (docs/design.md, "Int8");
   * for debugging and timing.  Results agree to one quantization step
   * where the float arithmetic rounds a tie differently. */
  int no_fuse_qdq_residual;
  /* 1 leaves a 1x1 convolution and the 3x3 depthwise convolution that alone
   * reads it (MobileNetV2's expansion and depthwise layers) as two steps
   * instead of one toplu.PointwiseDepthwiseConv step (docs/design.md,
   * "Pointwise + depthwise"); for debugging and timing.  The GPU planner
   * sets it: its runtime profiles were fitted on the unfused graph. */
  int no_fuse_depthwise;
  /* 1 leaves a function of one float between a QDQ model's quantizations
   * (DequantizeLinear -> Sigmoid, HardSwish, GELU, SiLU, ... ->
   * QuantizeLinear) as separate float steps instead of one
   * toplu.QLinearLookup step, a 256-entry table of the function's quantized
   * results (docs/design.md, "Int8"); for debugging and timing.  Results
   * agree except where the table's float function and the unfused steps'
   * (oneDNN's, fused into a convolution) round a tie differently. */
  int no_fuse_qdq_lookup;
  /* 1 leaves the 1x1 convolution after a depthwise one (an inverted
   * residual block's projection, with its residual Add, or the pointwise
   * half of a separable pair) as its own step; by default, on a CPU with
   * AVX-512 and where toplu's own kernel runs the block, it joins the
   * depthwise step, which then never writes the depthwise output
   * (docs/design.md, "Pointwise + depthwise"); for debugging and timing. */
  int no_fuse_projection;
} toplu_model_options_t;

/*
 * Load an ONNX model from a file.  External-data tensors are read from paths
 * relative to the model's directory.  opts may be NULL (defaults).
 * Errors: TOPLU_ERR_IO, TOPLU_ERR_PARSE (not a model, truncated),
 * TOPLU_ERR_INVALID_MODEL (missing inputs, cycles, bad attributes, dims that
 * do not multiply out), TOPLU_ERR_UNSUPPORTED (unknown op or opset),
 * TOPLU_ERR_OUT_OF_MEMORY.  err (may be NULL) gets the file, node and reason.
 * Thread-safe.
 */
toplu_status_t toplu_model_load(const char *path, const toplu_model_options_t *opts,
                                toplu_model_t **out, toplu_error_t *err);

/* The same from a buffer holding the file's bytes; name is used in messages
 * and as the base for external data (NULL: external data refused). */
toplu_status_t toplu_model_load_buffer(const void *data, size_t size, const char *name,
                                       const toplu_model_options_t *opts, toplu_model_t **out,
                                       toplu_error_t *err);

/* Free a model.  Sessions made from it must be destroyed first.  NULL-safe. */
void toplu_model_destroy(toplu_model_t *m);

/* Inputs and outputs of the graph (0 for a NULL model).  Thread-safe. */
int toplu_model_input_count(const toplu_model_t *m);
int toplu_model_output_count(const toplu_model_t *m);
/* i in 0..count-1; the returned pointer lives as long as the model.  NULL
 * for another i or a NULL model.  Thread-safe. */
const toplu_value_info_t *toplu_model_input(const toplu_model_t *m, int i);
const toplu_value_info_t *toplu_model_output(const toplu_model_t *m, int i);
/* Index of the input/output with that name, or -1 (also for a NULL model
 * or name).  Thread-safe. */
int toplu_model_input_index(const toplu_model_t *m, const char *name);
int toplu_model_output_index(const toplu_model_t *m, const char *name);

/* Index of the input named by a "NAME=..." command-line spec: the input whose
 * name followed by '=' starts spec, the longest such name (names may contain
 * '='), or -1 (also for a NULL model or spec).  Thread-safe. */
int toplu_model_input_for_spec(const toplu_model_t *m, const char *spec);

/* Opset of the default ONNX domain ("" / "ai.onnx"); the file's IR version.
 * 0 for a NULL model.  Thread-safe. */
int64_t toplu_model_opset(const toplu_model_t *m);
int64_t toplu_model_ir_version(const toplu_model_t *m);
/* producer_name and producer_version from the file ("" when absent or for a
 * NULL model); the path it was loaded from (NULL for a NULL model).
 * Thread-safe. */
const char *toplu_model_producer(const toplu_model_t *m);
const char *toplu_model_path(const toplu_model_t *m);

/* Nodes in the file before optimisation, by op type.  Fills up to cap
 * entries (none when counts is NULL) and returns how many distinct op types
 * there are (0 for a NULL model).  Thread-safe. */
typedef struct toplu_op_count {
  const char *op_type;
  int count;
} toplu_op_count_t;
int toplu_model_op_histogram(const toplu_model_t *m, toplu_op_count_t *counts, int cap);

/*
 * The nodes of the file that hold quantized (integer) arithmetic:
 * QuantizeLinear, DequantizeLinear, DynamicQuantizeLinear, QLinearConv,
 * QLinearMatMul, ConvInteger, MatMulInteger and com.microsoft's QLinearAdd,
 * QLinearMul, QLinearSoftmax and the like (any op named QLinear*).  0 for a
 * float model.  An int8 model's plan holds its int8 weights and
 * activations as they are (toplu/planner.h, precision int8).  0 for a NULL
 * model.  Thread-safe.
 */
int toplu_model_quantized_nodes(const toplu_model_t *m);

/* Number of nodes in the file and after optimisation (0 for a NULL model).
 * Thread-safe. */
int toplu_model_node_count(const toplu_model_t *m, int optimized);

/* Parameters: the elements and bytes of all initializers (and Constant node
 * values) as stored in the file, those inside subgraphs (If's branches,
 * Loop's and Scan's bodies) included, each counted once; 0 for a NULL model.
 * Thread-safe. */
int64_t toplu_model_param_count(const toplu_model_t *m);
int64_t toplu_model_param_bytes(const toplu_model_t *m);

/*
 * True (1) when the first input's dim 0 is fixed to 1 in the file, so the
 * model does not declare a batch dim.  Sessions can still run such models at
 * batch N (see toplu_session_options_t.batch_override).  0 for a NULL
 * model.  Thread-safe.
 */
int toplu_model_fixed_batch(const toplu_model_t *m);

/*
 * The size b >= 1 the file fixes dim 0 of every input to, the same for all
 * (for b > 1 each input of rank 2 or more): 1 for the models above, b for a
 * model exported at a static batch of b ([8, 3, 224, 224]), 0 when an input
 * has a free dim 0, a scalar, or inputs disagree.  Whether dim 0 holds rows
 * is not decided here: with toplu_session_options_t.batch_override a
 * session runs such a model at another dim 0 only where its plans show that
 * no op mixes the rows (else, for b > 1, TOPLU_ERR_SHAPE).  0 for a NULL
 * model.  Thread-safe.
 */
int64_t toplu_model_fixed_batch_size(const toplu_model_t *m);

/*
 * 1 when the values of input i (0-based), not only its shape, decide tensor
 * shapes or which branch runs (NonZero on it, a Reshape's shape computed
 * from it, an If's condition): sessions then build a plan per distinct
 * value, and toplu_session_output_shapes / toplu_session_memory refuse
 * shapes without data for it.  0 otherwise, or when i is out of range.
 * Thread-safe (reads the loaded model).
 */
int toplu_model_input_values_decide(const toplu_model_t *m, int i);

#ifdef __cplusplus
}
#endif
#endif /* TOPLU_MODEL_H */
