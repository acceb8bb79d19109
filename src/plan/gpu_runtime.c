/*
 * plan/gpu_runtime.c - the GPU runtime profiles (see plan/gpu_runtime.h):
 * the fitted time figures from plan/gpu_profiles.inc and each runtime's own
 * memory.
 *
 * Memory per runtime, on top of toplu's exact plan bytes (weights,
 * activations, toplu's per-op workspace, I/O):
 * - context: a CUDA context with the runtime's kernels loaded, 512 MiB for
 *   every runtime (an estimate: 0.3 to 1 GiB with the driver, lazy loading
 *   and the libraries), the catalog's figure;
 * - tensorrt and triton-tensorrt: a builder workspace of up to 1 GiB (the
 *   Triton tables' engines were
 *   built with --max-workspace-size 1073741824,
 *   PyTorch/Classification/ConvNets/triton/resnet50/README.md in
 *   NVIDIA/DeepLearningExamples); no allocator slack: an execution context
 *   takes one block of device memory sized by the engine;
 * - onnxruntime-cuda: no workspace beyond toplu's per-op one; the CUDA
 *   provider's BFC arena grows by doubling (arena_extend_strategy
 *   kNextPowerOfTwo, the default), so what it reserves can reach twice the
 *   peak: a slack of up to 1 x (activations + workspace)
 *   (kSameAsRequested removes it);
 * - pytorch: cuBLAS's default workspace, 8 x 4 MiB (CUBLAS_WORKSPACE_CONFIG
 *   :4096:8, as PyTorch's reproducibility notes give it); the caching
 *   allocator rounds requests over 1 MiB up to a multiple of 2 MiB: at most
 *   2 MiB of slack per tensor, bounded by 2 MiB per node of the plan;
 * - ideal: the catalog's context only (toplu's roofline as before).
 */
#include "plan/gpu_runtime.h"

#include <math.h>
#include <stdint.h>
#include <string.h>
#include <strings.h>

#include "plan/gpu_profiles.inc"

#define MiB (1024.0 * 1024.0)

static const toplu__gpu_profile_t profiles[] = {
    {"tensorrt", TOPLU__FIT_TENSORRT, 512 * MiB, 1024 * MiB, 0, 0, TOPLU__FIT_TENSORRT_SOURCE,
     "CUDA context 512 MiB (estimate), TensorRT workspace up to 1 GiB (the tables' engines' max workspace size), no "
     "allocator slack", INT32_MAX,
     "TensorRT's tensors hold at most 2^31 - 1 elements (NVIDIA/TensorRT issue 3815; its fix in 10.0.1 was reported "
     "incomplete)"},
    {"triton-tensorrt", TOPLU__FIT_TRITON_TENSORRT, 512 * MiB, 1024 * MiB, 0, 0, TOPLU__FIT_TRITON_TENSORRT_SOURCE,
     "CUDA context 512 MiB (estimate), TensorRT workspace up to 1 GiB (the tables' engines' max workspace size), no "
     "allocator slack", INT32_MAX,
     "TensorRT's tensors hold at most 2^31 - 1 elements (NVIDIA/TensorRT issue 3815; its fix in 10.0.1 was reported "
     "incomplete)"},
    {"onnxruntime-cuda", TOPLU__FIT_ONNXRUNTIME_CUDA, 512 * MiB, 0, 1.0, 0, TOPLU__FIT_ONNXRUNTIME_CUDA_SOURCE,
     "CUDA context 512 MiB (estimate); BFC arena growing by powers of two (kNextPowerOfTwo): up to 1 x "
     "(activations + workspace) reserved beyond the peak", INT32_MAX,
     "the CUDA execution provider indexes elements with 32-bit CUDA_LONG (microsoft/onnxruntime issues 28107, 28385, "
     "32299: wrong results or illegal address past 2^31 - 1 elements)"},
    {"pytorch", TOPLU__FIT_PYTORCH, 512 * MiB, 32 * MiB, 0, 2 * MiB, TOPLU__FIT_PYTORCH_SOURCE,
     "CUDA context 512 MiB (estimate), cuBLAS workspace 8 x 4 MiB, caching-allocator rounding up to 2 MiB per "
     "node", 0, NULL},
    {"ideal", TOPLU__FIT_IDEAL, 0, 0, 0, 0,
     "the roofline at the spec sheet's peaks: per node max(FLOPs / peak, bytes / bandwidth) + the catalog's "
     "launch overhead (an upper bound on speed at toplu's unfused byte count, not a measurement: a runtime that fuses "
     "kernels moves fewer bytes and can beat it)",
     "the catalog's runtime context only", 0, NULL},
};

#define N_PROFILES ((int)(sizeof profiles / sizeof profiles[0]))

const toplu__gpu_profile_t *toplu__gpu_profile_find(const char *name) {
  if (!name) return NULL;
  for (int i = 0; i < N_PROFILES; i++)
    if (!strcasecmp(name, profiles[i].name)) return &profiles[i];
  if (!strcasecmp(name, "trt")) return &profiles[0];
  if (!strcasecmp(name, "triton")) return &profiles[1];
  if (!strcasecmp(name, "onnxruntime") || !strcasecmp(name, "ort-cuda") || !strcasecmp(name, "ort"))
    return &profiles[2];
  if (!strcasecmp(name, "torch")) return &profiles[3];
  return NULL;
}

const char *toplu__gpu_profile_names(void) { return "tensorrt, triton-tensorrt, onnxruntime-cuda, pytorch, ideal"; }

const char *toplu__gpu_profile_default(void) { return "tensorrt"; }

const toplu__gpu_device_factor_t *toplu__gpu_device_factor(const char *device_name, int *fitted) {
  if (fitted) *fitted = 0;
  if (!device_name) return &default_device_factor;
  for (int i = 0; i < (int)(sizeof device_factors / sizeof device_factors[0]); i++) {
    size_t n = strlen(device_factors[i].prefix);
    if (!strncasecmp(device_name, device_factors[i].prefix, n) &&
        (device_name[n] == '-' || device_name[n] == '\0')) {
      if (fitted) *fitted = 1;
      return &device_factors[i];
    }
  }
  return &default_device_factor;
}

double toplu__gpu_profile_latency(const toplu__gpu_profile_t *pr, const toplu__gpu_device_factor_t *df,
                                  double peak_flops, double bandwidth, int tensor, int autocast, const double *flops,
                                  const double *bytes, int n, double heavy, double light, double io_bytes,
                                  toplu__gpu_parts_t *parts) {
  const toplu__gpu_fit_t *f = &pr->fit;
  double ec = f->ec[tensor ? 1 : 0] * (df ? df->compute : 1), em = f->em * (df ? df->memory : 1);
  double compute = 0, memory = 0;
  for (int i = 0; i < n; i++) {
    if (flops[i] <= 0 && bytes[i] <= 0) continue; /* a view: nothing runs */
    double tc = peak_flops > 0 && ec > 0 ? (flops[i] + f->ihalf * bytes[i]) / (peak_flops * ec) : 0;
    double tm = bandwidth > 0 && em > 0 ? bytes[i] / (bandwidth * em) : 0;
    if (tc >= tm) compute += tc;
    else memory += tm;
  }
  double launches = heavy + light;
  double gpu = compute + memory + launches * f->kernel_us * 1e-6;
  double host = (heavy * f->host_us + light * f->light_us) * 1e-6 * (df ? df->host : 1) *
                (autocast && f->autocast > 0 ? f->autocast : 1);
  double k = f->overlap_k > 0 ? f->overlap_k : 1;
  double both = gpu <= 0 ? host : host <= 0 ? gpu : pow(pow(gpu, k) + pow(host, k), 1.0 / k);
  double io = f->io_gbs > 0 ? io_bytes / (f->io_gbs * 1e9) : 0;
  if (parts) {
    parts->gpu = gpu;
    parts->host = host;
    parts->compute = compute;
    parts->memory = memory;
    parts->io = io;
  }
  return both + f->batch_us * 1e-6 + io;
}
