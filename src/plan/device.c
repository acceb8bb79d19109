/*
 * plan/device.c - the device catalog (GPUs, from vendor spec sheets) and
 * the local CPU (cores, ISA, memory available to this process, peak FLOP/s
 * and bandwidth from a short probe).
 *
 * Catalog figures are dense peaks (no 2:4 structured sparsity), taken from
 * the vendor's datasheet named in each entry's `source`.  Memory is the
 * marketed size read as GiB (what nvidia-smi's memory.total shows, within a
 * few percent).  runtime_overhead_bytes is an estimate of what a CUDA
 * context with cuBLAS/cuDNN loaded takes before any model (0.5 GiB; it
 * varies from about 0.3 to 1 GiB with driver and libraries), and
 * node_overhead_us the cost of launching one kernel (about 5 us).
 */
#include "plan/device.h"

#include <ctype.h>
#include <omp.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>
#include <unistd.h>

#include <oneapi/dnnl/dnnl.h>

#include "core/cpu.h"
#include "core/error.h"
#include "ops/kernel.h"
#include "toplu/profile.h"

#define GiB (1024.0 * 1024.0 * 1024.0)
#define TERA 1e12
#define GBS 1e9

/* One catalog row: peaks in TFLOPS (int8: TOPS), bandwidth in GB/s. */
typedef struct catalog_row {
  const char *name, *description;
  double memory_gib, bandwidth_gbs;
  double fp32, tf32, fp16, bf16, int8;
  const char *source;
} catalog_row_t;

static const catalog_row_t catalog[] = {
    {"v100-16gb", "NVIDIA Tesla V100 SXM2 16GB", 16, 900, 15.7, 0, 125, 0, 0,
     "NVIDIA Tesla V100 datasheet (SXM2: 15.7 TFLOPS fp32, 125 TFLOPS tensor fp16, 900 GB/s HBM2)"},
    {"v100-32gb", "NVIDIA Tesla V100 SXM2 32GB", 32, 900, 15.7, 0, 125, 0, 0,
     "NVIDIA Tesla V100 datasheet (SXM2: 15.7 TFLOPS fp32, 125 TFLOPS tensor fp16, 900 GB/s HBM2)"},
    {"t4", "NVIDIA T4 16GB", 16, 320, 8.1, 0, 65, 0, 130,
     "NVIDIA T4 datasheet (8.1 TFLOPS fp32, 65 TFLOPS fp16 tensor, 130 TOPS int8, 320 GB/s GDDR6)"},
    {"a10", "NVIDIA A10 24GB", 24, 600, 31.2, 62.5, 125, 125, 250,
     "NVIDIA A10 datasheet (31.2 TFLOPS fp32, 62.5 tf32, 125 fp16/bf16 tensor, 250 TOPS int8 dense, 600 GB/s "
     "GDDR6)"},
    {"a10g", "NVIDIA A10G 24GB (AWS EC2 G5)", 24, 600, 35, 35, 70, 70, 140,
     "AWS EC2 G5 / NVIDIA A10G specifications (35 TFLOPS fp32, 70 TFLOPS fp16/bf16 tensor, 140 TOPS int8, "
     "600 GB/s GDDR6)"},
    {"a30", "NVIDIA A30 24GB", 24, 933, 10.3, 82, 165, 165, 330,
     "NVIDIA A30 datasheet (10.3 TFLOPS fp32, 82 tf32, 165 fp16/bf16 tensor, 330 TOPS int8 dense, 933 GB/s HBM2)"},
    {"a40", "NVIDIA A40 48GB", 48, 696, 37.4, 74.8, 149.7, 149.7, 299.3,
     "NVIDIA A40 datasheet (37.4 TFLOPS fp32, 74.8 tf32, 149.7 fp16/bf16 tensor, 299.3 TOPS int8 dense, 696 GB/s "
     "GDDR6)"},
    {"l4", "NVIDIA L4 24GB", 24, 300, 30.3, 60, 121, 121, 242.5,
     "NVIDIA L4 datasheet (30.3 TFLOPS fp32, 60 tf32, 121 fp16/bf16, 242.5 TOPS int8 dense, 300 GB/s)"},
    {"l40s", "NVIDIA L40S 48GB", 48, 864, 91.6, 183, 362, 362, 733,
     "NVIDIA L40S datasheet (91.6 TFLOPS fp32, 183 tf32, 362 fp16/bf16, 733 TOPS int8 dense, 864 GB/s)"},
    {"a100-40gb", "NVIDIA A100 40GB PCIe", 40, 1555, 19.5, 156, 312, 312, 624,
     "NVIDIA A100 datasheet (19.5 TFLOPS fp32, 156 tf32, 312 fp16/bf16, 624 TOPS int8 dense; 40GB PCIe 1,555 GB/s)"},
    {"a100-40gb-sxm", "NVIDIA A100 40GB SXM4", 40, 1555, 19.5, 156, 312, 312, 624,
     "NVIDIA A100 datasheet (19.5 TFLOPS fp32, 156 tf32, 312 fp16/bf16, 624 TOPS int8 dense; 40GB SXM 1,555 GB/s)"},
    {"a100-80gb", "NVIDIA A100 80GB PCIe", 80, 1935, 19.5, 156, 312, 312, 624,
     "NVIDIA A100 datasheet (19.5 TFLOPS fp32, 156 tf32, 312 fp16/bf16, 624 TOPS int8 dense; 80GB PCIe 1,935 GB/s)"},
    {"a100-80gb-sxm", "NVIDIA A100 80GB SXM4", 80, 2039, 19.5, 156, 312, 312, 624,
     "NVIDIA A100 datasheet (19.5 TFLOPS fp32, 156 tf32, 312 fp16/bf16, 624 TOPS int8 dense; 80GB SXM 2,039 GB/s)"},
    {"h100-pcie", "NVIDIA H100 80GB PCIe", 80, 2000, 51, 378, 756, 756, 1513,
     "NVIDIA H100 datasheet (PCIe: 51 TFLOPS fp32, 378 tf32, 756 fp16/bf16, 1,513 TOPS int8 dense, 2 TB/s HBM2e)"},
    {"h100-sxm", "NVIDIA H100 80GB SXM5", 80, 3350, 67, 494.5, 989.5, 989.5, 1979,
     "NVIDIA H100 datasheet (SXM: 67 TFLOPS fp32, 494.5 tf32, 989.5 fp16/bf16, 1,979 TOPS int8 dense, 3.35 TB/s "
     "HBM3)"},
    {"h200", "NVIDIA H200 141GB SXM", 141, 4800, 67, 494.5, 989.5, 989.5, 1979,
     "NVIDIA H200 datasheet (SXM: 141 GB HBM3e, 4.8 TB/s; 67 TFLOPS fp32, 494.5 tf32, 989.5 fp16/bf16, "
     "1,979 TOPS int8 dense)"},
    {"rtx-3090", "NVIDIA GeForce RTX 3090 24GB", 24, 936, 35.6, 35.6, 71, 71, 284,
     "NVIDIA Ampere GA102 whitepaper, RTX 3090 (35.6 TFLOPS fp32, 35.6 tf32, 71 fp16/bf16 tensor with fp32 "
     "accumulate, 284 TOPS int8 dense, 936 GB/s)"},
    {"rtx-4090", "NVIDIA GeForce RTX 4090 24GB", 24, 1008, 82.6, 82.6, 165.2, 165.2, 660.6,
     "NVIDIA Ada Lovelace whitepaper, RTX 4090 (82.6 TFLOPS fp32, 82.6 tf32, 165.2 fp16/bf16 tensor with fp32 "
     "accumulate, 660.6 TOPS int8 dense, 1,008 GB/s)"},
};

#define N_CATALOG ((int)(sizeof catalog / sizeof catalog[0]))
#define GPU_CONTEXT_BYTES (512ull * 1024 * 1024)
#define GPU_NODE_OVERHEAD_US 5.0
#define CPU_NODE_OVERHEAD_US 5.0

const char *toplu_precision_name(toplu_precision_t p) {
  switch (p) {
    case TOPLU_PRECISION_FP32: return "fp32";
    case TOPLU_PRECISION_TF32: return "tf32";
    case TOPLU_PRECISION_FP16: return "fp16";
    case TOPLU_PRECISION_BF16: return "bf16";
    case TOPLU_PRECISION_INT8: return "int8";
    default: return "unknown";
  }
}

toplu_status_t toplu_precision_from_name(const char *name, toplu_precision_t *out) {
  static const struct {
    const char *name;
    toplu_precision_t p;
  } names[] = {{"fp32", TOPLU_PRECISION_FP32},  {"float32", TOPLU_PRECISION_FP32}, {"float", TOPLU_PRECISION_FP32},
               {"tf32", TOPLU_PRECISION_TF32},  {"fp16", TOPLU_PRECISION_FP16},    {"float16", TOPLU_PRECISION_FP16},
               {"half", TOPLU_PRECISION_FP16},  {"bf16", TOPLU_PRECISION_BF16},    {"bfloat16", TOPLU_PRECISION_BF16},
               {"int8", TOPLU_PRECISION_INT8}};
  if (!name || !out) return TOPLU_ERR_INVALID_ARGUMENT;
  for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
    if (!strcasecmp(name, names[i].name)) {
      *out = names[i].p;
      return TOPLU_OK;
    }
  return TOPLU_ERR_INVALID_ARGUMENT;
}

void toplu__precision_scales(toplu_precision_t p, double *weights, double *activations) {
  double w = 1, a = 1;
  switch (p) {
    case TOPLU_PRECISION_FP16:
    case TOPLU_PRECISION_BF16: w = a = 0.5; break;
    case TOPLU_PRECISION_INT8: w = 0.25; a = 0.5; break;
    default: break;
  }
  if (weights) *weights = w;
  if (activations) *activations = a;
}

double toplu__device_peak(const toplu_device_info_t *d, toplu_precision_t p, int *hypothetical) {
  double v = p >= 0 && p < TOPLU_PRECISION_COUNT ? d->peak_flops[p] : 0;
  if (hypothetical) *hypothetical = v <= 0;
  return v > 0 ? v : d->peak_flops[TOPLU_PRECISION_FP32];
}

int toplu_device_catalog_size(void) { return N_CATALOG; }

/* Fill a device from catalog row r. */
static void from_row(const catalog_row_t *r, toplu_device_info_t *d) {
  memset(d, 0, sizeof *d);
  snprintf(d->name, sizeof d->name, "%s", r->name);
  snprintf(d->description, sizeof d->description, "%s", r->description);
  d->kind = TOPLU_DEVICE_GPU;
  d->memory_bytes = (uint64_t)(r->memory_gib * GiB);
  d->bandwidth = r->bandwidth_gbs * GBS;
  d->peak_flops[TOPLU_PRECISION_FP32] = r->fp32 * TERA;
  d->peak_flops[TOPLU_PRECISION_TF32] = r->tf32 * TERA;
  d->peak_flops[TOPLU_PRECISION_FP16] = r->fp16 * TERA;
  d->peak_flops[TOPLU_PRECISION_BF16] = r->bf16 * TERA;
  d->peak_flops[TOPLU_PRECISION_INT8] = r->int8 * TERA;
  d->runtime_overhead_bytes = GPU_CONTEXT_BYTES;
  d->node_overhead_us = GPU_NODE_OVERHEAD_US;
  snprintf(d->source, sizeof d->source,
           "%s; CUDA context 0.5 GiB and (the ideal runtime's) 5 us per kernel launch are estimates", r->source);
}

toplu_status_t toplu_device_catalog_entry(int i, toplu_device_info_t *out) {
  if (i < 0 || i >= N_CATALOG || !out) return TOPLU_ERR_INVALID_ARGUMENT;
  from_row(&catalog[i], out);
  return TOPLU_OK;
}

/* Name comparison ignoring case and treating '-' and '_' alike. */
static int name_eq(const char *a, const char *b) {
  for (; *a && *b; a++, b++) {
    char x = (char)tolower((unsigned char)*a), y = (char)tolower((unsigned char)*b);
    if (x == '_') x = '-';
    if (y == '_') y = '-';
    if (x != y) return 0;
  }
  return *a == *b;
}

/* ---- memory available: core/memory.c ---- */

uint64_t toplu_cpu_memory_available(char *how, size_t how_size) { return toplu__memory_available(how, how_size); }

/* ---- the CPU probe ---- */

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* Best sgemm rate (FLOP/s) over about `seconds` of 1024^3 products. */
static double probe_sgemm(int threads, double seconds) {
  const dnnl_dim_t n = 1024;
  float *a = aligned_alloc(64, (size_t)(n * n) * sizeof(float));
  float *b = aligned_alloc(64, (size_t)(n * n) * sizeof(float));
  float *c = aligned_alloc(64, (size_t)(n * n) * sizeof(float));
  double best = 0;
  if (a && b && c) {
    for (dnnl_dim_t i = 0; i < n * n; i++) {
      a[i] = (float)(i % 7) * 0.125f;
      b[i] = (float)(i % 5) * 0.25f;
      c[i] = 0;
    }
    int omp_prev = omp_get_max_threads(); /* the caller's, given back below */
    omp_set_num_threads(threads);
    double t_end = now_s() + seconds;
    for (int it = 0; it < 50; it++) {
      double t0 = now_s();
      if (dnnl_sgemm('N', 'N', n, n, n, 1.0f, a, n, b, n, 0.0f, c, n) != dnnl_success) break;
      double dt = now_s() - t0;
      if (it > 0 && dt > 0) { /* the first call warms up oneDNN's JIT */
        double r = 2.0 * (double)n * (double)n * (double)n / dt;
        if (r > best) best = r;
      }
      if (it >= 3 && now_s() > t_end) break;
    }
    omp_set_num_threads(omp_prev);
  }
  free(a);
  free(b);
  free(c);
  return best;
}

/* Best parallel copy rate (bytes read + written per second) of `bytes`, over about `seconds`. */
static double probe_copy(int threads, size_t bytes, double seconds) {
  char *src = aligned_alloc(64, bytes), *dst = aligned_alloc(64, bytes);
  double best = 0;
  if (src && dst) {
    memset(src, 1, bytes);
    memset(dst, 0, bytes);
    double t_end = now_s() + seconds;
    for (int it = 0; it < 40; it++) {
      double t0 = now_s();
      size_t chunk = (bytes / (size_t)threads + 63) & ~(size_t)63;
#pragma omp parallel for num_threads(threads) schedule(static)
      for (int k = 0; k < threads; k++) {
        size_t off = (size_t)k * chunk;
        if (off < bytes) memcpy(dst + off, src + off, off + chunk <= bytes ? chunk : bytes - off);
      }
      double dt = now_s() - t0;
      if (it > 0 && dt > 0 && 2.0 * (double)bytes / dt > best) best = 2.0 * (double)bytes / dt;
      if (it >= 3 && now_s() > t_end) break;
    }
  }
  free(src);
  free(dst);
  return best;
}

/* 1 when word appears in the space-separated list. */
static int has_word(const char *list, const char *word) {
  size_t wl = strlen(word);
  for (const char *hit = list; (hit = strstr(hit, word)); hit += wl)
    if ((hit == list || hit[-1] == ' ') && (hit[wl] == ' ' || hit[wl] == 0)) return 1;
  return 0;
}

/* CPU model name and vector extensions from /proc/cpuinfo. */
static void cpu_identity(char *model, size_t model_size, char *isa, size_t isa_size) {
  static const char *want[] = {"sse4_2",      "avx",         "avx2",     "fma",      "f16c",
                               "avx512f",     "avx512bw",    "avx512_vnni", "avx512_bf16", "avx512_fp16",
                               "avx_vnni",    "amx_bf16",    "amx_int8", "asimd",    "sve"};
  snprintf(model, model_size, "CPU");
  isa[0] = 0;
  size_t size = 262144;
  char *buf = malloc(size);
  if (!buf) return;
  if (!toplu__read_text("/proc/cpuinfo", buf, size)) {
    char *p = strstr(buf, "model name");
    if (p && (p = strchr(p, ':'))) {
      p++;
      while (*p == ' ') p++;
      snprintf(model, model_size, "%.*s", (int)strcspn(p, "\n"), p);
    }
    char *fl = strstr(buf, "\nflags");
    if (!fl) fl = strstr(buf, "\nFeatures"); /* arm64 */
    if (fl && (fl = strchr(fl, ':'))) {
      fl++;
      fl[strcspn(fl, "\n")] = 0;
      for (size_t k = 0; k < sizeof want / sizeof want[0]; k++)
        if (has_word(fl, want[k])) {
          size_t l = strlen(isa);
          snprintf(isa + l, isa_size - l, "%s%s", l ? " " : "", want[k]);
        }
    }
  }
  free(buf);
}

typedef struct cpu_cache_entry {
  int threads;
  toplu_device_info_t info;
} cpu_cache_entry_t;

/* The probe's results per thread count, for the process's life. */
static pthread_mutex_t cpu_cache_lock = PTHREAD_MUTEX_INITIALIZER;
static cpu_cache_entry_t cpu_cache[8];
static int cpu_cache_n;

/* Probe (or fetch the cached probe of) the local CPU at `threads` threads. */
static toplu_status_t probe_cpu(int threads, toplu_device_info_t *d, toplu_error_t *err) {
  int cores = toplu_cpu_count(NULL, 0);
  if (cores < 1) cores = 1;
  if (threads <= 0) threads = cores;
  pthread_mutex_lock(&cpu_cache_lock);
  for (int i = 0; i < cpu_cache_n; i++)
    if (cpu_cache[i].threads == threads) {
      *d = cpu_cache[i].info;
      pthread_mutex_unlock(&cpu_cache_lock);
      /* memory changes over time: read it fresh */
      d->memory_bytes = toplu_cpu_memory_available(d->memory_source, sizeof d->memory_source);
      return TOPLU_OK;
    }
  memset(d, 0, sizeof *d);
  snprintf(d->name, sizeof d->name, "cpu");
  d->kind = TOPLU_DEVICE_CPU;
  d->cores = cores;
  d->threads = threads;
  cpu_identity(d->description, sizeof d->description, d->isa, sizeof d->isa);
  /* the CPU time the probes got against their threads x wall time: other work on the cores shows (a fresh user's
   * plan probed 71 GFLOP/s under another process, 381 idle, and said nothing) */
  struct timespec w0, c0, w1, c1;
  clock_gettime(CLOCK_MONOTONIC, &w0);
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &c0);
  double flops = probe_sgemm(threads, 0.15);
  double bw = probe_copy(threads, (size_t)64 << 20, 0.1);
  clock_gettime(CLOCK_MONOTONIC, &w1);
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &c1);
  double wall = (double)(w1.tv_sec - w0.tv_sec) + 1e-9 * (double)(w1.tv_nsec - w0.tv_nsec);
  double cpu = (double)(c1.tv_sec - c0.tv_sec) + 1e-9 * (double)(c1.tv_nsec - c0.tv_nsec);
  int usable = threads < cores ? threads : cores;
  double q0 = toplu__cpu_quota();
  if (q0 > 0 && q0 < usable) usable = (int)(q0 + 0.999); /* a quota's cores, rounded up */
  d->probe_cpu_share = wall > 0 && usable > 0 ? cpu / (wall * (double)usable) : 0;
  if (d->probe_cpu_share > 1) d->probe_cpu_share = 1;
  if (flops <= 0 || bw <= 0) {
    pthread_mutex_unlock(&cpu_cache_lock);
    return toplu__errorf(err, TOPLU_ERR_OUT_OF_MEMORY, "cpu probe: cannot allocate its buffers or run sgemm");
  }
  /* A CPU quota below the threads (a pod's 500m): the probes' best rates run inside one period's burst, the
   * process keeps quota / threads of them (a plan under 0.5 core predicted a whole core's speed) */
  double quota = toplu__cpu_quota(), share = toplu__cpu_quota_share(quota, threads);
  flops *= share;
  bw *= share;
  d->peak_flops[TOPLU_PRECISION_FP32] = flops;
  /* int8: the sgemm rate times one core's int8 / fp32 register peak (the same kernels' share of each peak),
   * where toplu's int8 kernels run on oneDNN with VNNI; without VNNI its QDQ convolutions stay float and
   * QLinearConv runs in plain C (ops/kernel.h toplu__cpu_int8_exact), which no rate describes */
  {
    const char *i8 = "scalar";
    double r8 = toplu_cpu_int8_peak_gops(1, &i8), r32 = toplu_cpu_fp32_peak_gflops(1);
    int vnni = !strcmp(i8, "avx512_vnni") || !strcmp(i8, "avx_vnni");
    if (toplu__cpu_int8_exact() && vnni && r8 > 0 && r32 > 0) {
      d->peak_flops[TOPLU_PRECISION_INT8] = flops * r8 / r32;
      snprintf(d->int8_note, sizeof d->int8_note,
               "int8: the sgemm rate x %.2f, one core's int8 / fp32 register peak (%s vpdpbusd %.0f GOP/s, FMA "
               "%.0f GFLOP/s; AMX tiles not probed)",
               r8 / r32, i8, r8, r32);
    } else {
      snprintf(d->int8_note, sizeof d->int8_note,
               "oneDNN runs no VNNI here (%s), so toplu's int8 convolutions run in float or plain C",
               vnni ? "capped below it, DNNL_MAX_CPU_ISA" : "the CPU has none");
    }
  }
  d->bandwidth = bw;
  d->node_overhead_us = CPU_NODE_OVERHEAD_US;
  d->runtime_overhead_bytes = 0;
  char quota_text[160] = "";
  if (share < 1)
    snprintf(quota_text, sizeof quota_text, ", both x %.2f for the cgroup's CPU quota of %.2f cores over %d thread%s",
             share, quota, threads, threads == 1 ? "" : "s");
  snprintf(d->source, sizeof d->source,
           "probed: best dnnl_sgemm 1024^3 rate and best %d-thread 64 MiB memcpy rate (read + write) over ~0.25 s%s; "
           "%.0f us per node is an estimate",
           threads, quota_text, CPU_NODE_OVERHEAD_US);
  if (cpu_cache_n < (int)(sizeof cpu_cache / sizeof cpu_cache[0])) {
    cpu_cache[cpu_cache_n].threads = threads;
    cpu_cache[cpu_cache_n].info = *d;
    cpu_cache_n++;
  }
  pthread_mutex_unlock(&cpu_cache_lock);
  d->memory_bytes = toplu_cpu_memory_available(d->memory_source, sizeof d->memory_source);
  return TOPLU_OK;
}

/* name in lower case without '-', '_', ' ' and '.' into out (cut to size). */
static void squash(const char *name, char *out, size_t size) {
  size_t k = 0;
  for (; *name && k + 1 < size; name++)
    if (!strchr("-_ .", *name)) out[k++] = (char)tolower((unsigned char)*name);
  out[k] = '\0';
}

/* Levenshtein distance of a and b, both under 64 bytes (longer: 99). */
static int edits(const char *a, const char *b) {
  size_t la = strlen(a), lb = strlen(b);
  if (la >= 64 || lb >= 64) return 99;
  int row[64];
  for (size_t j = 0; j <= lb; j++) row[j] = (int)j;
  for (size_t i = 1; i <= la; i++) {
    int diag = row[0];
    row[0] = (int)i;
    for (size_t j = 1; j <= lb; j++) {
      int up = row[j], best = diag + (a[i - 1] != b[j - 1]);
      if (up + 1 < best) best = up + 1;
      if (row[j - 1] + 1 < best) best = row[j - 1] + 1;
      diag = up;
      row[j] = best;
    }
  }
  return row[lb];
}

toplu_status_t toplu_device_lookup(const char *name, int threads, toplu_device_info_t *out, toplu_error_t *err) {
  toplu_error_clear(err);
  if (!out) return toplu__errorf(err, TOPLU_ERR_INVALID_ARGUMENT, "toplu_device_lookup: NULL argument");
  if (!name || name_eq(name, "cpu") || name_eq(name, "local")) return probe_cpu(threads, out, err);
  for (int i = 0; i < N_CATALOG; i++)
    if (name_eq(name, catalog[i].name)) {
      from_row(&catalog[i], out);
      return TOPLU_OK;
    }
  char list[768] = "", like[256] = "", mine[64], theirs[64];
  squash(name, mine, sizeof mine);
  /* Suggestions: catalog names that begin with the name given, case aside ("H100": h100-sxm, h100-pcie); else,
   * with case and separators set aside, the nearest within two edits ("h100sxm", "h100-sxm5", "rtx4090") or a
   * name the given one begins with ("a100-80gb-pcie": a100-80gb); only prefixes were offered before */
  int best = 3;       /* the fewest edits to a catalog name (3: none within two) */
  size_t longest = 0; /* the longest catalog name (squashed) the given one begins with */
  size_t lm = strlen(mine), n = strlen(name);
  int dist[N_CATALOG];
  size_t begins[N_CATALOG]; /* the squashed catalog name's length when the given one begins with it, else 0 */
  for (int i = 0; i < N_CATALOG; i++) {
    size_t l = strlen(list), k = strlen(like);
    snprintf(list + l, sizeof list - l, "%s%s", i ? ", " : "", catalog[i].name);
    if (n >= 2 && !strncasecmp(catalog[i].name, name, n))
      snprintf(like + k, sizeof like - k, "%s%s", k ? " or " : "", catalog[i].name);
    squash(catalog[i].name, theirs, sizeof theirs);
    size_t lt = strlen(theirs);
    dist[i] = lm >= 3 ? edits(mine, theirs) : 99;
    begins[i] = lt >= 3 && lm > lt && !strncmp(mine, theirs, lt) ? lt : 0;
    if (dist[i] < best) best = dist[i];
    if (begins[i] > longest) longest = begins[i];
  }
  for (int i = 0, prefixed = like[0] != 0; !prefixed && (best <= 2 || longest) && i < N_CATALOG; i++) {
    size_t k = strlen(like);
    if (best <= 2 ? dist[i] == best : begins[i] == longest)
      snprintf(like + k, sizeof like - k, "%s%s", k ? " or " : "", catalog[i].name);
  }
  if (like[0])
    return toplu__errorf(err, TOPLU_ERR_NOT_FOUND, "unknown device '%s': did you mean %s?", name, like);
  return toplu__errorf(err, TOPLU_ERR_NOT_FOUND, "unknown device '%s'; the catalog has: %s, and cpu (this machine)",
                      name, list);
}
