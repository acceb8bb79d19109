/*
 * toplu/planner.h - the analytic batch-size planner (`toplu plan`).
 *
 * "What batch size should I use?"  The planner answers it before anything
 * runs: the memory a batch size B takes, the largest B that fits a device,
 * and a latency/throughput model that picks a recommended B.
 *
 * Memory at batch B (bytes) =
 *     weights                       (once, not per sample)
 *   + activations(B)                (the plan's liveness-planned arena)
 *   + workspace(B)                  (the largest per-op scratch area)
 *   + io(B)                         (model inputs + outputs; twice when the
 *                                    caller double-buffers)
 *   + overhead                      (toplu's CPU engine: per-plan kernel
 *                                    state; a GPU: its runtime context,
 *                                    from the device catalog)
 * On toplu's own CPU engine every term comes from toplu's real plan
 * (toplu_session_memory): plans at B = 1 and B = 2 give an affine law
 * a + b*B, which is then checked against the real plan at the largest B
 * (and every row's plan is real with `exact`).  For a GPU of the catalog the
 * same terms are used as the estimate of what the model needs there, scaled
 * for the precision: fp16/bf16 halve weights, activations and workspace;
 * int8 quarters weights and halves activations and workspace (int8 weights,
 * activations kept at 16 bits between layers: the conservative case); inputs
 * and outputs keep the model's dtypes.
 *
 * Latency at batch B: a per-node roofline, summed over the plan's steps,
 *     latency(B) = efficiency * sum_i max(flops_i(B) / peak_flops,
 *                                          bytes_i(B) / bandwidth)
 *                  + n_nodes * node_overhead
 * with the device's peak FLOP/s for the precision and its memory bandwidth
 * (for the local CPU: a short dnnl_sgemm and memcpy probe; steps of integer
 * arithmetic (QLinearConv, QLinearMatMul, ConvInteger, MatMulInteger,
 * DynamicQuantizeMatMul) take the CPU's int8 rate, peak_flops[int8], when
 * toplu's int8 kernels run there: see toplu_device_lookup); efficiency = 1
 * and the catalog's per-node overhead unless calibrated from a `toplu tune`
 * result (least squares of the measured p50 latencies against the model's
 * terms).  Throughput(B) = B / latency(B) (inferences per second).
 *
 * For a GPU the default is a runtime profile instead (options.runtime:
 * "tensorrt", "triton-tensorrt", "onnxruntime-cuda", "pytorch"; "ideal"
 * keeps the roofline above): toplu's per-node FLOPs and bytes through achieved shares of peak
 * and bandwidth by arithmetic intensity, a per-node kernel floor, per-node
 * host time overlapped with the GPU, per-batch and I/O costs, fitted to
 * published measurements (plan/gpu_runtime.h, docs/plan-tune.md), with the
 * band its held-out error implies on every row and the knee as a range (the
 * predicted knee x the 5th-95th percentile of the left-out knee error, joined
 * with the B whose predicted throughput lies within the 5th-95th percentile
 * of the share of the best that the left-out tables' measured knees had); the
 * runtime's own context, workspace and allocator slack are the overhead term.
 * A GPU's time (profile or roofline) is costed on the model's own nodes at
 * their tensors' logical sizes: the Reorder and Copy steps toplu's CPU
 * kernels need, and their blocked layouts' padding, are left out, so a GPU
 * prediction does not depend on the host CPU planning it.
 * Calibration accepts a tune.json or a CSV of batch,latency_ms lines.
 *
 * Device numbers come from vendor spec sheets (the catalog says which, per
 * entry): dense (no structured sparsity) tensor-core peaks, memory as
 * marketed in GiB, bandwidth in bytes/s.
 *
 * Transformer language models: toplu_plan_arch() reads a Hugging Face
 * config.json and gives weights, KV-cache bytes per token
 * (2 * layers * kv_heads * head_dim * bytes per element) and the largest
 * number of concurrent sequences of a context length on the device.  An
 * encoder-only model (BERT style: model_type bert, roberta, ... without a
 * causal LM head) has no KV cache and no decode: weights, activation memory
 * per token and per sequence, and the sequences per batch that fit.
 *
 * Thread-safety: every function may be called from any thread; results are
 * independent objects.  The local CPU probe runs once per thread count per
 * process and is cached (guarded by a mutex).
 */
#ifndef TOPLU_PLANNER_H
#define TOPLU_PLANNER_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "toplu/model.h"
#include "toplu/status.h"
#include "toplu/tensor.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Numeric precision a model is planned in. */
typedef enum toplu_precision {
  TOPLU_PRECISION_FP32 = 0,
  TOPLU_PRECISION_TF32 = 1, /* fp32 storage, tensor-core math (NVIDIA Ampere and later) */
  TOPLU_PRECISION_FP16 = 2,
  TOPLU_PRECISION_BF16 = 3,
  TOPLU_PRECISION_INT8 = 4,
  TOPLU_PRECISION_COUNT = 5
} toplu_precision_t;

/* "fp32", "tf32", "fp16", "bf16", "int8"; "unknown" otherwise.  Never NULL. */
const char *toplu_precision_name(toplu_precision_t p);

/* Parse a precision name (also "float32", "float16", "bfloat16", "half").
 * Errors: TOPLU_ERR_INVALID_ARGUMENT for unknown names. */
toplu_status_t toplu_precision_from_name(const char *name, toplu_precision_t *out);

typedef enum toplu_device_kind { TOPLU_DEVICE_CPU = 0, TOPLU_DEVICE_GPU = 1 } toplu_device_kind_t;

/* A device: from the catalog, or the local CPU as probed. */
typedef struct toplu_device_info {
  char name[32];                 /* catalog key: "a100-40gb", "h100-sxm", "cpu" */
  char description[128];         /* "NVIDIA A100 40GB PCIe", or the CPU's model name */
  toplu_device_kind_t kind;
  uint64_t memory_bytes;         /* device memory; the CPU: memory available to this process */
  double bandwidth;              /* memory bandwidth, bytes/s (the CPU: measured copy rate) */
  double peak_flops[TOPLU_PRECISION_COUNT]; /* dense peak FLOP/s (int8: OP/s); 0 = not supported */
  uint64_t runtime_overhead_bytes; /* memory the runtime takes before any model (CUDA context) */
  double node_overhead_us;       /* fixed cost per node launch, microseconds */
  char source[256];              /* where the numbers come from */
  /* CPU only (zero/empty for GPUs). */
  int cores;                     /* cores available to this process */
  int threads;                   /* threads the probe used */
  char isa[128];                 /* vector extensions: "avx2 fma", "avx512f avx512_vnni" ... */
  char memory_source[256];       /* how memory_bytes was found (cgroup, MemAvailable) */
  char int8_note[256];           /* how peak_flops[int8] was found, or why it is 0 (no VNNI: toplu's int8 kernels
                                  * need it) */
  double probe_cpu_share;        /* of the probe's threads x wall time, the CPU time it got (0..1; 0: not probed):
                                  * 0.75-0.87 on idle cores here, 0.49 beside one busy process: below 0.65 a note
                                  * says other work shared the cores and the rates are low */
} toplu_device_info_t;

/* Number of catalog entries (GPUs; the local CPU is "cpu", not in the table). */
int toplu_device_catalog_size(void);

/* Copy catalog entry i (0..size-1): name, description, memory_bytes,
 * bandwidth, peak_flops per precision, source; with size, the way to list
 * the catalog (`toplu plan --list-devices` prints these).  Thread-safe.
 * Errors: TOPLU_ERR_INVALID_ARGUMENT (i out of range, out NULL). */
toplu_status_t toplu_device_catalog_entry(int i, toplu_device_info_t *out);

/*
 * Find a device by name (case-insensitive; "-" and "_" alike).  "cpu" (or
 * NULL) probes the local CPU with `threads` threads (0: all available):
 * memory available to this process (the smaller of /proc/meminfo's
 * MemAvailable and the cgroup v2 memory.max / v1 memory.limit_in_bytes minus
 * the cgroup's usage net of reclaimable page cache), peak fp32 FLOP/s from
 * about 150 ms of dnnl_sgemm on 1024x1024 matrices, the int8 rate
 * (peak_flops[int8], OP/s) as that sgemm rate times the ratio of one core's
 * int8 and fp32 register peaks (toplu_cpu_int8_peak_gops and
 * toplu_cpu_fp32_peak_gflops, toplu/profile.h) where oneDNN runs toplu's int8
 * kernels with VNNI (0 without: toplu then runs int8 convolutions in float
 * or plain C; int8_note says which), and copy bandwidth from
 * a 64 MiB parallel memcpy (read + write bytes per second); cached per
 * thread count for the process's life.  Errors: TOPLU_ERR_NOT_FOUND (the
 * message lists the catalog), TOPLU_ERR_OUT_OF_MEMORY.
 */
toplu_status_t toplu_device_lookup(const char *name, int threads, toplu_device_info_t *out, toplu_error_t *err);

/* Bytes of memory available to this process now (cgroup-limit aware, see
 * toplu_device_lookup); how (may be NULL) gets a one-line explanation. */
uint64_t toplu_cpu_memory_available(char *how, size_t how_size);

/* An input shape given by the caller (the CLI's --shape NAME=DIMS).  Dim 0 of a batched
 * input is replaced by the batch size; the other dims bind symbolic ones. */
typedef struct toplu_input_shape {
  const char *name;
  int ndim;
  int64_t dims[TOPLU_MAX_DIMS];
} toplu_input_shape_t;

/*
 * Shape profiles: the inputs' shapes a model is planned or tuned at, one
 * analysis per profile (`--shape x=1x3x48x{320,640,1280}`).
 *
 * toplu_shape_profiles_add() parses one NAME=DIMS text: dims separated by
 * ',' or 'x' ("1,3,48,320", "1x3x48x320", "[1, 3, 48, 320]"; a letter as
 * dim 0, "Bx3x48x320", stands for the batch), where any dim may be a set
 * of sizes in braces, "{320,640,1280}".  Sets pair up, as the shapes of one
 * TensorRT optimization profile (or one ONNX Runtime run) go together:
 * profile k takes the k-th value of every set, in every NAME=DIMS added
 * ("input_ids=1x{16,128,384}" with "attention_mask=1x{16,128,384}" gives
 * three profiles, 16/16, 128/128, 384/384; never 16/128).  So every set
 * must have the same number of values; a set of one value is that value.
 * Without sets there is one profile.  Sets of different lengths are
 * refused (a cross product would be ambiguous with pairing, and would
 * join sizes that belong to different profiles): give one NAME=DIMS per
 * combination in separate runs instead.
 *
 * Messages start "shapes: " and name the text ("shapes: x=1x{}: dim 1: an
 * empty set {}: give sizes, e.g. {320,640}").
 */
#define TOPLU_MAX_SHAPE_PROFILES 64 /* values in one set, hence profiles */
#define TOPLU_MAX_SHAPE_SPECS 64    /* NAME=DIMS texts in one toplu_shape_profiles_t */

typedef struct toplu_shape_spec toplu_shape_spec_t; /* one parsed NAME=DIMS (internal) */

typedef struct toplu_shape_profiles {
  int n_profiles;               /* 0 before the first add; then >= 1 */
  int n_shapes;                 /* shapes per profile: one per NAME=DIMS added */
  toplu_input_shape_t *shapes;  /* n_profiles x n_shapes: profile k's are shapes + k * n_shapes;
                                 * names point into this struct (valid until free) */
  char (*labels)[256];          /* per profile: its NAME=DIMS texts with each set resolved,
                                 * "x=1x3x48x320" (several joined with " ") */
  int n_sets;                   /* dims given as sets of two or more values */
  /* internal */
  toplu_shape_spec_t *specs_;
  int n_specs_;
} toplu_shape_profiles_t;

/* An empty list (no profile: callers plan their default shapes).  Never fails. */
void toplu_shape_profiles_init(toplu_shape_profiles_t *sp);

/*
 * Parse spec ("NAME=DIMS" with optional sets, as above) and add it; the
 * profiles (n_profiles, shapes, labels) are expanded again.  Dims are
 * whole numbers 0 .. 2^31 - 1 (whether 0 or a size fits the model is
 * checked when a profile is planned).  Errors, *sp unchanged:
 * TOPLU_ERR_INVALID_ARGUMENT for bad text, naming the spec and the dim:
 * no '=', no name, a non-number ("'a' is not a number"), a negative or too
 * large dim, an empty set "{}", an empty value in a set "{320,}", an
 * unclosed or nested brace, more than TOPLU_MAX_DIMS dims, more than
 * TOPLU_MAX_SHAPE_PROFILES values in a set; a NAME given twice; sets of a
 * different length than the sets already added (naming both);
 * TOPLU_ERR_OUT_OF_MEMORY.  Not thread-safe on one sp (it writes it);
 * distinct objects are independent.
 */
toplu_status_t toplu_shape_profiles_add(toplu_shape_profiles_t *sp, const char *spec, toplu_error_t *err);

/* Free what sp holds and make it empty again (as init).  sp may be NULL. */
void toplu_shape_profiles_free(toplu_shape_profiles_t *sp);

typedef struct toplu_planner_options {
  const char *device;        /* catalog name or "cpu"; NULL: "cpu" */
  uint64_t memory_bytes;     /* capacity in bytes; 0: the device's memory */
  double mem_fraction;       /* share of the capacity the plan may use, (0, 1]; default 0.8 */
  toplu_precision_t precision; /* default fp32 (toplu_plan_arch: the config's torch_dtype) */
  int precision_set;         /* 1 when precision was given explicitly */
  double latency_budget_ms;  /* per-batch latency limit, ms; 0: none */
  int devices;               /* devices (data parallel, or sharded when needed); default 1 */
  int threads;               /* CPU threads for the local CPU device; 0: all */
  int double_buffer;         /* count input/output buffers twice (a pipeline overlapping I/O) */
  const int64_t *batch_sizes;/* rows to report; NULL: powers of two up to the max batch, and the max */
  int n_batch_sizes;
  const toplu_input_shape_t *shapes; /* dims for symbolic non-batch dims; others get defaults */
  int n_shapes;
  const char *calibration;   /* path of a tune result (tune.json, toplu_tune_write) to calibrate latency;
                              * NULL: none.  Messages about it start "calibration file PATH: " */
  int exact;                 /* build toplu's real plan for every row, not only B = 1, 2 and max */
  int64_t context_length;    /* toplu_plan_arch: tokens per sequence; 0: the model's maximum */
  const char *runtime;       /* GPU devices: the runtime whose measured profile predicts latency and adds its
                              * memory: "tensorrt", "triton-tensorrt", "onnxruntime-cuda", "pytorch" or
                              * "ideal" (the bare roofline); NULL: "tensorrt".  Must be NULL (or "ideal") for
                              * the CPU. */
  const toplu_shape_profiles_t *profiles; /* toplu_plan_profiles: one plan per profile; NULL or none added:
                              * one plan at `shapes`.  Give profiles or shapes, not both.  Ignored by
                              * toplu_plan_model. */
  const char *source_model;  /* the file m was made from when m has no file of its own (toplu_quantize_model's
                              * in-memory int8 model, whose toplu_model_path is "FILE (int8)"); NULL: none.  A
                              * tune.json calibration is then refused (TOPLU_ERR_INVALID_ARGUMENT, saying whether
                              * it measured source_model as it is): a tune result measures the file it names, and
                              * no file holds the model planned; a CSV of measurements is taken as for any model */
  const char *const *notes;  /* sentences the caller adds to every plan's notes (toplu plan: how its int8 model was
                              * made, or why the model stayed float); NULL: none */
  int n_notes;
} toplu_planner_options_t;

/* Defaults: cpu, memory 0, mem_fraction 0.8, fp32, no budget, 1 device,
 * all threads, single-buffered, default rows, no calibration.  NULL-safe. */
void toplu_planner_options_init(toplu_planner_options_t *o);

/* One batch size of a plan.  Bytes are per device. */
typedef struct toplu_plan_row {
  int64_t batch_size;
  uint64_t weights_bytes;    /* weights count once: the same in every row, unless the plan's constants grow
                                with the batch (weights_per_sample in toplu_batch_plan_t) */
  uint64_t activation_bytes;
  uint64_t workspace_bytes;
  uint64_t io_bytes;
  uint64_t overhead_bytes;
  uint64_t total_bytes;      /* the sum of the five terms above */
  double latency_ms;         /* predicted latency of one batch */
  double throughput;         /* predicted inferences per second (per device) */
  double compute_ms;         /* roofline: time of the compute-bound nodes */
  double memory_ms;          /* roofline: time of the memory-bound nodes */
  double overhead_ms;        /* n_nodes * node overhead (after calibration) */
  int fits;                  /* total_bytes <= budget */
  int within_latency;        /* latency_ms <= budget (1 when there is none) */
  int exact;                 /* 1: terms from toplu's real plan at this B; 0: the affine law */
  /* The band the runtime profile's held-out error implies (GPU runtimes with a
   * fitted profile; equal to the prediction otherwise). */
  double latency_lo_ms, latency_hi_ms;
  double throughput_lo, throughput_hi;
} toplu_plan_row_t;

/* Notes kept per result; when there are more, the last note says so. */
#define TOPLU_PLAN_MAX_NOTES 16

/* The result of toplu_plan_model. */
typedef struct toplu_batch_plan {
  char model[1024];                /* model path */
  char inputs[512];                /* "x: [B, 3, 224, 224]" */
  toplu_device_info_t device;
  toplu_precision_t precision;
  int precision_hypothetical;      /* 1: the device (or toplu's CPU engine) does not run this precision */
  double precision_weight_scale, precision_activation_scale;
  uint64_t capacity_bytes;         /* device memory or the memory_bytes option */
  char capacity_source[256];
  double mem_fraction;
  uint64_t budget_bytes;           /* mem_fraction * capacity */
  int devices;                     /* devices the global batch spreads over */
  int shards;                      /* devices the weights are split over (1: not sharded) */
  int devices_needed;              /* smallest device count holding the weights sharded */
  int double_buffer;
  /* The memory law (bytes, per device), from toplu's plans at B = 1 and 2. */
  uint64_t weights_bytes;          /* after precision scaling and sharding (at B = 0 when weights_per_sample > 0) */
  double weights_per_sample;       /* bytes of the plan's constants per sample: 0, except where the plan holds
                                    * constants shaped by the batch (an RNN's zero initial state, folded at plan
                                    * time for each batch size), found when a plan at a large B had more */
  uint64_t weights_packed_bytes;   /* of toplu's plan's weights (unscaled): repacked, allocator-counted */
  uint64_t weights_in_place_bytes; /* of toplu's plan's weights (unscaled): read in place from the model */
  uint64_t overhead_bytes;         /* the overhead's fixed part (B = 0) */
  double overhead_per_sample;      /* bytes per sample of it: a GPU runtime's allocator slack on the activations
                                    * (onnxruntime-cuda); 0 elsewhere */
  double activation_fixed, activation_per_sample;
  double workspace_fixed, workspace_per_sample;
  double io_fixed, io_per_sample;
  int64_t affine_check_batch;      /* B at which the law was checked against a real plan (0: none) */
  double affine_error;             /* |law - plan| / plan of the total there (after a refit: of the refitted law) */
  double affine_error_first;       /* the same for the law from B = 1 and 2, before any refit */
  int64_t affine_check_batch_first; /* the batch size of that first check (the refit's own check may be at
                                      another: until 2026-12-06 the report put both errors at the last) */
  int batchable;                   /* 0: the model cannot batch (fixed batch, or row by row) */
  char batch_note[512];
  /* Answers. */
  int64_t max_batch_size;          /* per device; 0 when even B = 1 does not fit */
  int max_capped;                  /* 1: the search stopped at its cap (1 << 20) */
  int64_t element_max_batch;       /* a GPU runtime that indexes a tensor's elements in 32 bits (tensorrt,
                                    * triton-tensorrt, onnxruntime-cuda): the largest B at which every tensor of
                                    * the plan holds at most 2^31 - 1 elements, from each step's largest tensor at
                                    * B = 1 and 2 (0: a tensor passes it at every B; -1: the runtime has no such
                                    * limit, or the device is the CPU) */
  int max_by_elements;             /* 1: max_batch_size is element_max_batch, below what memory allows */
  int64_t elements_per_sample;     /* with element_max_batch >= 0: the bounding tensor's elements per sample */
  int64_t recommended_batch_size;  /* most predicted throughput within the budgets */
  int64_t knee_batch_size;         /* smallest B within 5% of the best predicted throughput */
  int64_t global_batch_size;       /* max_batch_size * devices / shards (data parallel) */
  double latency_budget_ms;
  /* Latency model. */
  double peak_flops;               /* FLOP/s used for the precision (the CPU: for the float steps) */
  double int8_peak_flops;          /* the CPU: OP/s of the steps of integer arithmetic (its int8 rate,
                                    * toplu_device_info_t.peak_flops[int8]); 0: none, every step at peak_flops */
  int int8_nodes;                  /* steps of integer arithmetic (QLinearConv, ...; costed at int8_peak_flops) */
  double bandwidth;                /* bytes/s */
  double node_overhead_us;
  double efficiency;               /* multiplier on the roofline time (1 uncalibrated) */
  int calibrated;
  int n_nodes;                     /* steps the latency model costs (a GPU: the model's nodes, views included) */
  int64_t flops_per_sample;
  int64_t bytes_fixed, bytes_per_sample; /* bytes moved per batch: a + b*B */
  /* GPU runtime profile (plan/gpu_runtime.h); runtime[0] == 0 for the CPU. */
  char runtime[32];                /* "tensorrt", "triton-tensorrt", "onnxruntime-cuda", "pytorch", "ideal" */
  int runtime_default;             /* 1: not chosen by the caller */
  int runtime_tables;              /* published tables its fit used (0: not fitted) */
  char runtime_source[512];        /* where its time figures come from */
  char runtime_memory_source[256]; /* where its memory figures come from */
  double runtime_ec[2];            /* achieved share of peak: fp32, tensor-core precisions */
  double runtime_em;               /* achieved share of bandwidth */
  double runtime_ihalf;             /* FLOPs per byte at which a node achieves half of the share of peak */
  double runtime_kernel_us, runtime_host_us, runtime_light_us, runtime_overlap_k, runtime_batch_us, runtime_io_gbs;
  double runtime_autocast;         /* factor on the host time under fp16/bf16 (mixed precision); 1: none */
  double device_factor;            /* the device family's fitted factor on compute (V100 = 1) */
  double device_memory_factor;     /* ... on the achieved bandwidth (V100 = 1) */
  double device_host_factor;       /* ... on the host time per node (V100 = 1; the tables' host machines) */
  int device_factor_fitted;        /* 0: no published table covers this device (default factors: compute and
                                    * memory 1, host the newest host machine's in the tables) */
  int has_band;                    /* 1: rows carry a band from the fit's held-out error */
  double latency_band[2], throughput_band[2]; /* [lo, hi] factors of the prediction */
  double knee_factor[2];           /* the knee range: the candidates B within [knee x knee_factor[0],
                                    * knee x knee_factor[1]], the factors the 5th and 95th percentile of
                                    * measured / predicted knee over the fit's left-out tables (1, 1: none), ... */
  double knee_share[2];            /* ... and those whose predicted throughput is within [knee_share[0],
                                    * knee_share[1]] x the best (the 5th and 95th percentile of the predicted
                                    * share at the left-out tables' measured knees; 1, 1: none) */
  int64_t knee_lo, knee_hi;        /* the knee as a range of batch sizes (both = knee without a band) */
  double *node_costs;              /* n_nodes x 4: each step's flops and bytes moved as a + b*B in toplu's
                                    * plan (model dtypes): flops fixed, per sample, bytes fixed, per sample;
                                    * for a GPU the model's nodes only, bytes at logical sizes (no Reorder or
                                    * Copy steps, no layout padding: the same on every host) */
  /* Rows. */
  int n_rows;
  toplu_plan_row_t *rows;
  int n_notes;
  char notes[TOPLU_PLAN_MAX_NOTES][256]; /* assumptions and caveats, one sentence each */
} toplu_batch_plan_t;

/*
 * Plan a model: memory terms per batch size, max batch, latency model,
 * recommended batch and knee, rows.  m may be used by other threads at the
 * same time (the planner makes its own session).
 * Errors: TOPLU_ERR_NOT_FOUND (unknown device; the message lists the
 * catalog), TOPLU_ERR_INVALID_ARGUMENT (bad options, or impossible settings:
 * capacity below the weights, latency budget below batch 1's latency; the
 * message says which and why, naming option fields: "mem_fraction must be
 * in (0, 1], got 1.5", "... they fit on 2 devices (devices = 2)"),
 * TOPLU_ERR_NOT_FOUND / TOPLU_ERR_SHAPE (shapes do not fit the model:
 * "shapes: x: the model has no input 'x'; its inputs: ..."), TOPLU_ERR_IO / TOPLU_ERR_PARSE (calibration file: a
 * tune.json, or a CSV whose bad line is named: "calibration file P: line 3: expected BATCH,LATENCY_MS ...";
 * an empty file: "calibration file P is empty"; read once, whole, from a regular file of at most 64 MiB: a FIFO,
 * pipe, device or socket is TOPLU_ERR_INVALID_ARGUMENT "calibration file P is a FIFO; toplu reads only regular
 * files ..."; a tune.json with source_model set is TOPLU_ERR_INVALID_ARGUMENT, see source_model),
 * TOPLU_ERR_INVALID_ARGUMENT for an unknown runtime or a runtime other than "ideal" on the CPU, errors of
 * building toplu's plan (TOPLU_ERR_UNSUPPORTED, ...).
 */
toplu_status_t toplu_plan_model(const toplu_model_t *m, const toplu_planner_options_t *o, toplu_batch_plan_t **out,
                                toplu_error_t *err);

/* The plan as one JSON object (malloc'ed, free with free(); NULL when out of
 * memory).  Keys: max_batch_size, recommended_batch_size, knee_batch_size,
 * capacity_bytes, mem_fraction, budget_bytes, device{...}, precision,
 * memory_law{...}, latency_model{...}, batch_sizes[{batch_size,
 * weights_bytes, activation_bytes, workspace_bytes, io_bytes,
 * overhead_bytes, total_bytes, latency_ms, throughput, ...}], notes[].
 * NULL for a NULL plan. */
char *toplu_batch_plan_json(const toplu_batch_plan_t *p);

/* The plan as text: every figure with what it is made of (nothing for a
 * NULL plan or file). */
void toplu_batch_plan_print(const toplu_batch_plan_t *p, FILE *f);

void toplu_batch_plan_free(toplu_batch_plan_t *p);

/* The plans of every shape profile (toplu_plan_profiles). */
typedef struct toplu_profile_plans {
  int n;                           /* profiles (>= 1) */
  toplu_batch_plan_t **plans;      /* n plans, profile k's at plans[k] */
  char (*labels)[256];             /* n labels: "x=1x3x48x320"; "" for a plan at the default shapes */
  int64_t max_batch_size;          /* the largest B that fits every profile (min of their max_batch_size;
                                    * 0 when one profile fits none) */
  int bounding_profile;            /* the profile whose max is that bound (the largest), 0-based */
} toplu_profile_plans_t;

/*
 * Plan m once per profile of o->profiles (toplu_plan_model with that
 * profile's shapes; every other option applies to all), or once at
 * o->shapes when there are no profiles.  Each profile's plan is the plan a
 * toplu_plan_model call with its shapes gives: the same bytes, and the same
 * latency figures where the device does not depend on a probe (a catalog
 * GPU; the CPU's probe is cached per process).  Bytes, batch sizes as in
 * toplu_batch_plan_t.
 * Errors: those of toplu_plan_model for the first profile that fails, the
 * message prefixed "profile K of N (LABEL): " when there are several;
 * TOPLU_ERR_INVALID_ARGUMENT when both profiles and shapes are given.
 * Thread-safety: as toplu_plan_model.
 */
toplu_status_t toplu_plan_profiles(const toplu_model_t *m, const toplu_planner_options_t *o,
                                   toplu_profile_plans_t **out, toplu_error_t *err);

/*
 * The first check toplu_plan_model makes, alone and before anything is
 * built: that batch 1's inputs at o's shapes (each profile's, o->profiles)
 * fit mem_fraction x the capacity (memory_bytes, else the device's), at the
 * model's own dtypes.  For a caller that must build something costly first:
 * `toplu plan --precision int8` quantizes the model in memory (running it on
 * calibration rows) before planning, and shapes no memory holds would only
 * run out of memory there.  Errors: those of toplu_plan_model's options and
 * device (TOPLU_ERR_INVALID_ARGUMENT, TOPLU_ERR_NOT_FOUND), the shapes'
 * (TOPLU_ERR_NOT_FOUND, TOPLU_ERR_SHAPE: "shapes: ..."), and
 * TOPLU_ERR_INVALID_ARGUMENT "memory too small: ... does not hold even batch
 * 1's inputs ...", prefixed "profile K of N (LABEL): " with several
 * profiles.  Thread-safety: as toplu_plan_model.
 */
toplu_status_t toplu_plan_check_inputs(const toplu_model_t *m, const toplu_planner_options_t *o, toplu_error_t *err);

/*
 * The model options to load the model a plan for o predicts from
 * (mo is cleared first).  For a GPU of the catalog (o->device set and not
 * "cpu"), scaled dot-product attention stays written out
 * (no_fuse_attention): the GPU runtime profiles were fitted on that graph
 * (bench/gpu/fit_profiles.py, docs/plan-tune.md), and a GPU runtime's own
 * attention kernels are part of the efficiency fitted to its published
 * numbers.  Memory figures stay toplu's plan of that graph.  o may be NULL
 * (the defaults).  Thread-safe.
 */
void toplu_plan_model_options(const toplu_planner_options_t *o, toplu_model_options_t *mo);

/* As JSON (malloc'ed, free with free(); NULL when out of memory).  One
 * profile: exactly toplu_batch_plan_json's object (what `toplu plan --json`
 * printed before profiles existed).  Several: {"profiles": [each plan's
 * object with "profile" (1-based) and "shapes" (its label) first],
 * "max_batch_size_all_profiles", "bounding_profile" (1-based),
 * "bounding_shapes", "pairing": "..."}. */
char *toplu_profile_plans_json(const toplu_profile_plans_t *pp);

/* As text: one profile as toplu_batch_plan_print; several: a section per
 * profile ("profile 2 of 3: x=1x3x48x640" and its plan), then a summary
 * of every profile's max and recommended batch and the batch that fits all. */
void toplu_profile_plans_print(const toplu_profile_plans_t *pp, FILE *f);

void toplu_profile_plans_free(toplu_profile_plans_t *pp);

/* A transformer language model described by a Hugging Face config.json. */
typedef struct toplu_arch_plan {
  char config[1024];
  char model_type[64];
  int64_t layers, hidden, heads, kv_heads, head_dim, intermediate, vocab, max_context, experts, experts_per_token;
  int tied_embeddings, gated_mlp;
  int encoder_only;                /* 1: BERT-style encoder (no causal LM head): no KV cache, no decode */
  toplu_precision_t precision;     /* weights' precision */
  int bytes_per_param_x4;          /* 4 * bytes per parameter (int8: 4, fp16: 8, fp32: 16) */
  int kv_bytes_per_element;        /* KV cache element size: 2 (fp16/bf16/int8 models) or 4 */
  int64_t params;                  /* parameters */
  int64_t weights_bytes;           /* params * bytes per parameter */
  int64_t kv_cache_bytes_per_token;/* 2 * layers * kv_heads * head_dim * kv bytes */
  int64_t context_length;
  int64_t kv_cache_bytes_per_sequence;
  int64_t activation_bytes;        /* working set of one prefill (encoder: forward) of context_length tokens */
  int64_t activation_bytes_per_token; /* activation_bytes / context_length */
  toplu_device_info_t device;
  uint64_t capacity_bytes;
  double mem_fraction;
  uint64_t budget_bytes;           /* over all devices */
  uint64_t overhead_bytes;         /* over all devices */
  int devices;
  int devices_needed;              /* smallest device count holding weights + one sequence */
  int64_t max_concurrent_sequences;/* of context_length tokens; 0 when none fits (encoder: sequences per batch) */
  double decode_ms_per_token;      /* one decode step at max concurrency (roofline); 0 for an encoder */
  double decode_tokens_per_s;      /* over all sequences at max concurrency; 0 for an encoder */
  int n_notes;
  char notes[TOPLU_PLAN_MAX_NOTES][256];
} toplu_arch_plan_t;

/*
 * Plan a transformer from a Hugging Face config.json (keys: num_hidden_layers,
 * hidden_size, num_attention_heads, num_key_value_heads, head_dim,
 * intermediate_size, vocab_size, max_position_embeddings, torch_dtype,
 * tie_word_embeddings, model_type, architectures, is_decoder, type_vocab_size;
 * GPT-2 style n_layer/n_embd/n_head/n_positions/n_inner; MoE
 * num_local_experts/num_experts_per_tok).
 * Errors: TOPLU_ERR_IO, TOPLU_ERR_PARSE (not JSON, missing or bad keys: the
 * message names the key; a hidden size not divisible by the heads without
 * an explicit head_dim), TOPLU_ERR_NOT_FOUND (device),
 * TOPLU_ERR_INVALID_ARGUMENT (impossible settings, as toplu_plan_model).
 */
toplu_status_t toplu_plan_arch(const char *config_path, const toplu_planner_options_t *o, toplu_arch_plan_t **out,
                               toplu_error_t *err);

/* JSON object: weights_bytes, kv_cache_bytes_per_token,
 * max_concurrent_sequences, params, context_length, capacity_bytes,
 * mem_fraction, ... (malloc'ed; free with free(); NULL when out of memory
 * or for a NULL plan).  The text form: nothing for a NULL plan or file. */
char *toplu_arch_plan_json(const toplu_arch_plan_t *p);
void toplu_arch_plan_print(const toplu_arch_plan_t *p, FILE *f);
void toplu_arch_plan_free(toplu_arch_plan_t *p);

#ifdef __cplusplus
}
#endif
#endif /* TOPLU_PLANNER_H */
