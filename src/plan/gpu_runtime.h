/*
 * plan/gpu_runtime.h - runtime profiles for GPU latency: what a GPU runtime
 * (TensorRT, ONNX Runtime's CUDA provider, PyTorch) achieves on toplu's
 * per-node plan, fitted to published measurements, and the memory the
 * runtime itself takes (context, workspace, allocator rounding).
 *
 * Latency of one batch of B on a device with peak P (FLOP/s, for the
 * precision) and bandwidth W (bytes/s), over the launched nodes i of the
 * model as toplu's plan has them after fusion, without the Reorder and Copy
 * steps toplu's CPU kernels need and with bytes at the tensors' logical
 * sizes (plan/memory.h, model_nodes: the same on every host), with flops
 * f_i(B) and bytes m_i(B) (scaled for the precision):
 *
 *   gpu(B)  = sum_i [ max((f_i + ihalf * m_i) / (P * ec * d), m_i / (W * em * dm)) + kernel ]
 *   host(B) = (heavy nodes * host + light nodes * light) * dh * (autocast under fp16/bf16)
 *   latency(B) = (gpu^k + host^k)^(1/k) + batch + io_bytes(B) / io_rate
 *
 * ec: the achieved share of peak on a node of high arithmetic intensity
 * I = f / m (ec[0] for fp32 on CUDA cores, ec[1] for the tensor-core
 * precisions tf32/fp16/bf16/int8); a node of intensity I achieves
 * ec * I / (I + ihalf) of peak (the first term); em: the achieved share of
 * bandwidth; d, dm, dh: the device family's fitted factors on compute, on
 * memory-bound nodes and on host time (the host machines the tables were
 * measured on differ with the GPU); for a device without a published table
 * 1, 1 and the host factor of the tables' newest host (DGX A100's);
 * autocast: the runtime's host-time factor under mixed precision (PyTorch's
 * autocast dispatches and casts around every op; 1 for the other runtimes);
 * kernel: per-node GPU time that does not shrink with the node's size (the
 * last partial wave, launch latency), so a node's achieved FLOP/s,
 * f / (f / (P ec d) + kernel), saturates with its size and hence with B;
 * host and light: the framework's CPU time per node, overlapped with the
 * GPU's work (asynchronous launches: the smooth maximum with exponent k),
 * for heavy nodes (at least TOPLU__GPU_HEAVY FLOPs per byte at batch 1 in
 * toplu's plan: convolutions and GEMMs, each standing for the several
 * framework ops toplu fused into it) and light ones (element-wise, pooling,
 * reductions); batch: a
 * fixed cost per batch (synchronisation, request handling); io_rate: the
 * rate at which the model's inputs and outputs reach the device (0: not
 * counted).  ec[0] and ec[1] are each runtime's own (ec[0] shared by all runtimes
 * until issue 11's third round).  triton-tensorrt runs TensorRT's kernels: its ec[0], ec[1], em, ihalf
 * and kernel are the tensorrt profile's (fitted to both runtimes' tables
 * together), its host, batch and I/O costs its own.  The roofline inside is Williams, Waterman and Patterson, CACM
 * 52(4), 2009; the numbers are fitted by bench/gpu/fit_profiles.py to the
 * tables in src/plan/gpu_measurements.csv (sources there and in
 * docs/plan-tune.md) and written to plan/gpu_profiles.inc.
 */
#ifndef TOPLU_PLAN_GPU_RUNTIME_H
#define TOPLU_PLAN_GPU_RUNTIME_H

#include <stdint.h>

#include "toplu/planner.h"

/* The fitted numbers of one runtime (plan/gpu_profiles.inc, written by
 * bench/gpu/fit_profiles.py). */
typedef struct toplu__gpu_fit {
  double ec[2];              /* share of peak FLOP/s: [0] fp32, [1] tensor-core precisions */
  double em;                 /* share of bandwidth */
  double ihalf;              /* FLOPs per byte at which a node achieves half of ec */
  double kernel_us;          /* per launched node, microseconds */
  double host_us;            /* per heavy node host time, microseconds (overlapped) */
  double light_us;           /* per light node host time, microseconds (overlapped) */
  double overlap_k;          /* exponent of the smooth maximum of GPU and host time */
  double batch_us;           /* per batch, microseconds */
  double io_gbs;             /* GB/s for inputs + outputs; 0: not counted */
  double autocast;           /* factor on host time under fp16/bf16 (mixed precision); 1: none */
  double lat_band[2];        /* latency band: [lo, hi] as factors of the prediction */
  double thr_band[2];        /* throughput band: [lo, hi] as factors of the prediction */
  double knee_factor[2];     /* knee range: [knee x knee_factor[0], knee x knee_factor[1]] (5th and 95th
                              * percentile of measured / predicted knee, left-out tables) ... */
  double knee_share[2];      /* ... joined with the B whose predicted throughput is within [knee_share[0],
                              * knee_share[1]] x the best (5th and 95th percentile of the predicted share at
                              * the measured knee, left-out tables) */
  int tables;                /* published tables the fit used (0: not fitted, see the profile's source) */
} toplu__gpu_fit_t;

typedef struct toplu__gpu_profile {
  const char *name;          /* "tensorrt", "triton-tensorrt", "onnxruntime-cuda", "pytorch", "ideal" */
  toplu__gpu_fit_t fit;
  double context_bytes;      /* CUDA context with the runtime's libraries loaded (0: the catalog's) */
  double workspace_bytes;    /* the runtime's own scratch beyond toplu's per-op workspace */
  double rounding_fraction;  /* allocator slack, at most, as a share of activations + workspace */
  double rounding_per_node;  /* allocator slack, at most, bytes per node of the plan */
  const char *source;        /* where the time figures come from */
  const char *memory_source; /* where the memory figures come from */
  int64_t max_tensor_elements; /* elements one tensor may hold (32-bit indexing: 2^31 - 1); 0: no limit (PyTorch
                                * indexes in 64 bits where a tensor needs it, and splits cuDNN calls) */
  const char *element_source;  /* where that limit comes from (NULL with no limit) */
} toplu__gpu_profile_t;

/* FLOPs per byte (toplu's plan at batch 1, model dtypes) from which a node is heavy. */
#define TOPLU__GPU_HEAVY 1.0

/* A device family's fitted factors (see above; V100 = 1). */
typedef struct toplu__gpu_device_factor {
  const char *prefix; /* catalog name prefix: "v100", "a100", "t4", "a40" */
  double compute;     /* d: on the achieved share of peak */
  double memory;      /* dm: on the achieved share of bandwidth */
  double host;        /* dh: on the host time per node */
} toplu__gpu_device_factor_t;

/* The profile of a runtime name (case-insensitive), or NULL. */
const toplu__gpu_profile_t *toplu__gpu_profile_find(const char *name);

/* "tensorrt, onnxruntime-cuda, pytorch, ideal": the names, for messages. */
const char *toplu__gpu_profile_names(void);

/* The default runtime for GPU devices ("tensorrt"). */
const char *toplu__gpu_profile_default(void);

/* The factors of a catalog device name's family; for a device no published
 * table covers, *fitted = 0 and the default factors: compute and memory 1,
 * host the newest host machine's in the tables (plan/gpu_profiles.inc).  Never
 * NULL; fitted may be NULL. */
const toplu__gpu_device_factor_t *toplu__gpu_device_factor(const char *device_name, int *fitted);

/* The parts of one prediction (seconds). */
typedef struct toplu__gpu_parts {
  double gpu;     /* summed node times on the GPU, kernel floors included */
  double host;    /* the framework's host time (overlapped with gpu) */
  double compute; /* of gpu: nodes bound by compute (without the kernel floors) */
  double memory;  /* of gpu: nodes bound by memory (without the kernel floors) */
  double io;      /* inputs and outputs reaching the device */
} toplu__gpu_parts_t;

/*
 * Latency in seconds at one batch from the plan's nodes: flops[i] and
 * bytes[i] at this batch (bytes already scaled for the precision; nodes with
 * neither are views and do not run), heavy and light launches (launched
 * nodes of each kind, times the rows when a model runs row by row),
 * io_bytes of the batch's inputs and outputs; tensor = 1 for
 * tf32/fp16/bf16/int8, autocast = 1 for fp16/bf16 (mixed precision); df the
 * device's factors (NULL: all 1).  parts may be NULL.  Pure.
 */
double toplu__gpu_profile_latency(const toplu__gpu_profile_t *pr, const toplu__gpu_device_factor_t *df,
                                  double peak_flops, double bandwidth, int tensor, int autocast, const double *flops,
                                  const double *bytes, int n, double heavy, double light, double io_bytes,
                                  toplu__gpu_parts_t *parts);

#endif
