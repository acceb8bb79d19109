/*
 * toplu/quantize.h - static int8 quantization of a float ONNX model from
 * real calibration data, written as a standard QDQ model.
 *
 * toplu_quantize reads a float model, runs it through toplu's own engine on
 * calibration rows (the same sources and preprocessing as a batch job:
 * toplu_reader_t of toplu/pipeline.h), collects the range of every tensor it
 * will quantize in one pass (min/max and a histogram), and writes the model
 * with QuantizeLinear -> DequantizeLinear pairs (the "QDQ" format of ONNX
 * Runtime's quantize_static and TensorRT):
 *
 *   activations  the float inputs of every quantized node and its output
 *                (after a Relu or Clip that alone reads it): uint8 with a
 *                zero point (int8, zero point 0, with symmetric_activations),
 *                per tensor; scale = (hi - lo) / 255 over the calibrated
 *                range [lo, hi] widened to hold 0;
 *   weights      int8, symmetric (zero point 0), scale max|w| / 127, per
 *                output channel (axis 0 of Conv and Gemm with transB, axis 1
 *                of ConvTranspose, MatMul and Gemm without) or per tensor;
 *   biases       of Conv and Gemm: int32 with scale s_x * s_w[c], zero point 0.
 *
 * Before quantizing, a BatchNormalization that alone reads a Conv's output
 * is folded into its weights, and an Add of a constant per-channel bias into
 * its bias, as ONNX Runtime's quant_pre_process does.  Per-axis scales need
 * opset 13: a model of an older opset is rewritten to opset 13 (Squeeze,
 * Unsqueeze, ReduceSum, Split, Clip, Pad, Slice, TopK, Dropout and Resize-10
 * take their opset-13 forms; a Softmax, LogSoftmax or Hardmax over an axis
 * other than -1, or an op toplu cannot rewrite, keeps the old opset and then
 * per-tensor weights, with a note; below opset 10 that is an error).  The
 * result loads in ONNX Runtime and in toplu, which runs a QDQ Conv on
 * integer kernels on a CPU with VNNI (toplu/model.h, qdq_int8_all).
 *
 * Ranges (options.method):
 *   minmax      the smallest and largest value seen;
 *   percentile  the values at the (100 - p) / 2 and 100 - (100 - p) / 2
 *               percentiles, p = options.percentile (default 99.999), read
 *               off a 4096-bin histogram;
 *   entropy     TensorRT's KL-divergence threshold (Migacz, "8-bit Inference
 *               with TensorRT", GTC 2017) over a 2048-bin histogram of |x|:
 *               the clipping that loses least information when the tensor
 *               is mapped to 128 levels (256 for a tensor never negative).
 * The histograms cover [-R, R) with R doubled (neighbouring bins merged, an
 * exact step) whenever a value falls outside, so one pass suffices.
 *
 * Dynamic quantization (options.dynamic, as ONNX Runtime's quantize_dynamic
 * writes it; no calibration data): every chosen MatMul whose B is a
 * constant 2-D float32 initializer [K, N], and Gemm with transA 0, alpha 1
 * and a constant B (transB: B^T) and C absent or constant [N] / [1, N],
 * reading a float32 activation x, becomes
 *   DynamicQuantizeLinear(x) -> (x_q uint8, x_scale, x_zero_point)
 *   MatMulInteger(x_q, W_q, x_zero_point, W_zero_point) -> Cast(float32)
 *   -> Mul(., Mul(x_scale, W_scale)) [-> Add(beta * C)]  (Gemm's C only)
 * with W_q int8 [K, N], W_scale = max_k |W[k, n]| / 127 per output column n
 * ([N]; one value with per_channel 0; 1 for an all-zero column), W_q =
 * clip(round_half_even(W / W_scale), -127, 127), W_zero_point int8 zeros.
 * Nodes reading the same x share one DynamicQuantizeLinear.  x is
 * quantized per tensor at run time (its range over the whole batch, widened
 * to hold 0).  The model keeps its opset when it is 11 or newer (older ones
 * are rewritten to 13 as above).  toplu runs each chain as one oneDNN
 * u8s8 matmul (toplu.DynamicQuantizeMatMul, on a CPU with VNNI); ONNX
 * Runtime 1.30 loads the file.
 */
#ifndef TOPLU_QUANTIZE_H
#define TOPLU_QUANTIZE_H
#include <stdint.h>

#include "toplu/log.h"
#include "toplu/model.h"
#include "toplu/pipeline.h"
#include "toplu/planner.h"
#include "toplu/status.h"
#ifdef __cplusplus
extern "C" {
#endif

/* The default of options.max_node_error. */
#define TOPLU_QUANTIZE_MAX_NODE_ERROR 0.03

typedef enum toplu_calib_method {
  TOPLU_CALIB_MINMAX = 0,
  TOPLU_CALIB_PERCENTILE = 1,
  TOPLU_CALIB_ENTROPY = 2
} toplu_calib_method_t;

/* Counters of a quantization, reported through options.progress and
 * returned by toplu_quantize. */
typedef struct toplu_quantize_stats {
  int64_t rows_total;      /* calibration rows to read */
  int64_t rows_done;       /* rows run so far */
  int64_t rows_bad;        /* rows left out (toplu_reader_bad_rows) */
  int nodes_quantized;     /* nodes with quantized inputs */
  int nodes_left_float;    /* nodes left float because their estimated error was above max_node_error
                            * (named in a TOPLU_LOG_NOTE, and in the report's nodes with their reason) */
  int tensors_quantized;   /* activation tensors given a QuantizeLinear/DequantizeLinear pair */
  int weights_quantized;   /* weight initializers stored as int8 */
  int nodes_folded;        /* BatchNormalization and bias Add nodes folded into convolutions */
  int64_t opset;           /* the written model's default-domain opset */
  int per_channel;         /* 1 when the weights got per-channel scales */
  double seconds;          /* wall time so far */
  int pass;                /* 1: calibration, 2: the report's error pass */
  int write_failed;        /* 1 when the call failed writing the output or the report (TOPLU_ERR_IO: a full disk,
                            * a file size limit) after the model was built: a failure while running, not a bad
                            * input or path (those are refused before calibration) */
  int nothing_to_quantize; /* 1: the call failed (TOPLU_ERR_UNSUPPORTED) because no node of the op types could be
                            * quantized: the model stays float */
  int subgraph_nodes;      /* with nothing_to_quantize: nodes of those op types inside subgraphs (If, Loop, Scan
                            * bodies), which are not quantized */
} toplu_quantize_stats_t;

typedef void (*toplu_quantize_progress_fn)(void *user, const toplu_quantize_stats_t *stats);

typedef struct toplu_quantize_options {
  /* The float ONNX model's path.  Required. */
  const char *model;
  /* Where the QDQ model is written: to a new temporary file beside it
   * (OUTPUT.XXXXXX.part, a name no file has: nothing else is touched),
   * renamed over OUTPUT when complete.  Required; refused when it is the
   * model itself, or when it exists and is not a regular file (a symbolic
   * link, device, FIFO, socket or folder is never replaced). */
  const char *output;
  /* 1: dynamic quantization (see above): no calibration; calibration,
   * preprocess, calibration_rows, batch_size, method, percentile,
   * symmetric_activations, max_node_error, threads, csv_* and progress are
   * not read, and report must be NULL (TOPLU_ERR_INVALID_ARGUMENT).
   * op_types defaults to "MatMul,Gemm" and may name only those two. */
  int dynamic;
  /* Calibration sources, "[NAME=]SOURCE" as toplu_job_options_t.inputs
   * (.npy, a folder or glob of images, .csv, .jsonl).  At least one
   * (none with dynamic). */
  const char *const *calibration;
  int n_calibration;
  /* Preprocessing of the calibration rows, as toplu_job_options_t.preprocess. */
  const char *preprocess;
  /* Read only the first calibration_rows rows (0: all). */
  int64_t calibration_rows;
  /* Rows per calibration batch (0: 8, or B for a model exported at a static batch B > 1,
   * toplu_model_fixed_batch_size).  Only memory and speed depend on it. */
  int64_t batch_size;
  toplu_calib_method_t method;
  /* PERCENTILE: the share of values kept, in percent, (0, 100] (0: 99.999). */
  double percentile;
  /* 1 (toplu_quantize_options_init's default): per-channel weight scales; 0: per tensor. */
  int per_channel;
  /* 1: activations int8 with zero point 0 (symmetric); 0: uint8 with a zero point. */
  int symmetric_activations;
  /* Comma-separated op types to quantize; NULL or "": Conv, ConvTranspose,
   * Gemm, MatMul and Add (Add and Mul only between two computed tensors,
   * never with a constant).  Known: those and Mul. */
  const char *op_types;
  /* Comma-separated node names left float (NULL: none); a name that is no
   * node's is TOPLU_ERR_NOT_FOUND.  A node without a name in the file is
   * called OPTYPE_INDEX, its op type and its index among the file's nodes
   * from 0 ("Conv_3"), as toplu names it elsewhere; the written model and
   * the report use that name too. */
  const char *exclude;
  /* A JSON report (NULL: none; written as output is, through a temporary
   * file, and refused as output is): per tensor the calibrated range, scale
   * and zero point; per node of op_types whether it was quantized and, if
   * not, why (docs/quantize.md), its estimated error and, for the nodes
   * quantized or left float for their error, the error of its output
   * against the float model on the calibration rows (a second pass:
   * relative RMS error, max abs error, SQNR in dB); and the settings. */
  const char *report;
  /* The largest relative RMS error quantizing may add to one Conv, Gemm or
   * MatMul output, as estimated from the calibration statistics (see
   * above); a node above it is left float (its weights and its input and
   * output as they were for it).  0: TOPLU_QUANTIZE_MAX_NODE_ERROR;
   * negative: no node is left float for its error. */
  double max_node_error;
  /* Threads of the calibration runs (0: all cores). */
  int threads;
  /* CSV sources: as toplu_job_options_t. */
  toplu_csv_header_t csv_header;
  char csv_delimiter;
  /* toplu_quantize_model with no calibration source: synthetic_rows rows
   * (0: 8) calibrate instead, standard-normal float32 (seeded, the same
   * every call; other dtypes 0).  A symbolic dim 0 is the batch; any other
   * symbolic dim takes its size from shapes (as toplu_planner_options_t's:
   * the input's name and all its dims), else the call fails naming the
   * input and dim.  Such ranges are not the data's: the model is good for
   * planning (which nodes become int8, so the plan's bytes), not for
   * inference.  toplu_quantize ignores these fields. */
  int64_t synthetic_rows;
  const toplu_input_shape_t *shapes;
  int n_shapes;
  toplu_log_fn log;
  void *log_user;
  toplu_quantize_progress_fn progress;
  void *progress_user;
  double progress_seconds; /* between progress calls (0: 1 second) */
  /* A flag another thread or a signal handler may set to non-zero at any
   * time (toplu_run_cancel, toplu/session.h; NULL: not cancellable):
   * checked before each calibration batch, between the steps of a running
   * batch, between the chunks of the files written and before they are
   * renamed.  The call then fails with TOPLU_ERR_CANCELLED, removes its
   * temporary files and leaves the output and report as they were. */
  const int *cancel;
} toplu_quantize_options_t;

/* Defaults: per_channel 1, method PERCENTILE (99.999), everything else 0 / NULL.  NULL-safe. */
void toplu_quantize_options_init(toplu_quantize_options_t *opts);

/*
 * Quantize opts->model on opts->calibration (or dynamically: opts->dynamic)
 * and write opts->output.  stats (may be NULL) gets the counters (dynamic:
 * nodes_quantized MatMul/Gemm nodes, weights_quantized weights,
 * tensors_quantized DynamicQuantizeLinear nodes; no rows), also on failure.
 * Calibrated tensors whose range is zero (every value 0 on the calibration
 * rows, quantized with scale 1) are named in a TOPLU_LOG_WARNING.
 * Errors: TOPLU_ERR_INVALID_ARGUMENT (a missing or bad option, no
 * calibration rows, every row bad, every float model input constant over
 * the calibration rows (all-zero data, say), an output or report that is
 * the model, a calibration source or each other, that exists and is not a
 * regular file, or whose folder takes no new files (all checked before
 * calibrating), a report or an op type other than MatMul/Gemm with
 * dynamic), TOPLU_ERR_NOT_FOUND
 * (an excluded node or op type that does not exist), TOPLU_ERR_UNSUPPORTED
 * (external data, opset below 10 (dynamic: 11) with an op that cannot be
 * rewritten, nothing to quantize), the errors of
 * toplu_model_load, toplu_reader_create and toplu_session_run (naming the
 * file, input, row or node), TOPLU_ERR_IO (writing the output or report:
 * stats->write_failed set), TOPLU_ERR_CANCELLED (opts->cancel),
 * TOPLU_ERR_OUT_OF_MEMORY.  Nothing is written on error, and no temporary
 * file stays (one the process is killed while writing stays, named
 * OUTPUT.XXXXXX.part).  Thread-safe (one call per options).
 */
toplu_status_t toplu_quantize(const toplu_quantize_options_t *opts, toplu_quantize_stats_t *stats, toplu_error_t *err);

/*
 * Quantize opts->model as toplu_quantize does, in memory, and load the QDQ
 * model with mopts (NULL: defaults) into *out (free with
 * toplu_model_destroy).  Nothing is written: opts->output and opts->report
 * are ignored.  The model's path (toplu_model_path) is opts->model with
 * " (int8)" appended.  With no calibration source, synthetic rows
 * calibrate (opts->synthetic_rows, with a note through opts->log).  For
 * `toplu plan --precision int8` on a float model: planning the result
 * (toplu_plan_model, precision int8) gives the plan toplu builds for the
 * int8 model, its real weight, activation and workspace bytes, instead of
 * the float plan's bytes scaled.  stats (may be NULL) as toplu_quantize's.
 * Errors: those of toplu_quantize (but none for a missing output or
 * calibration source), TOPLU_ERR_INVALID_ARGUMENT for a symbolic dim that
 * synthetic rows cannot size, and those of toplu_model_load_buffer.
 * Thread-safe (one call per options).
 */
toplu_status_t toplu_quantize_model(const toplu_quantize_options_t *opts, const toplu_model_options_t *mopts,
                                    toplu_model_t **out, toplu_quantize_stats_t *stats, toplu_error_t *err);

/* "minmax", "percentile", "entropy"; "?" otherwise. */
const char *toplu_calib_method_name(toplu_calib_method_t m);

#ifdef __cplusplus
}
#endif
#endif /* TOPLU_QUANTIZE_H */
