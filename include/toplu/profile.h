/*
 * toplu/profile.h - where a run's time goes: a session's per-step profile
 * (toplu_session_options_t.profile, toplu_session_profile) as a Chrome
 * trace, the steps that take the most time, and the machine's measured fp32
 * peak to hold them against.
 *
 * The trace is the Trace Event Format's JSON object form (Google, "Trace
 * Event Format", docs.google.com/document/d/1CvAClvFfyA5R-PhYUmn5OOQtYMH4h6I0nSsKchNAySU):
 *   {"traceEvents": [{"name", "cat", "ph": "X", "ts", "dur", "pid", "tid",
 *                     "args": {op_type, fused, backend, inputs: [{shape,
 *                     dtype, layout}], outputs, impl, flops, bytes,
 *                     gflops_per_s, gb_per_s, peak_share}}, ...],
 *    "displayTimeUnit": "ms",
 *    "otherData": {model, batch, threads, peak_gflops, runs}}
 * one complete ("X") event per step that ran, in run order, ts and dur in
 * microseconds of the last profiled run (from its start); Perfetto
 * (ui.perfetto.dev) and chrome://tracing open it.  flops and bytes are one
 * run's, for the whole batch; gflops_per_s = flops / dur, gb_per_s = bytes /
 * dur, peak_share = gflops_per_s / peak_gflops (null when the peak is not
 * known).
 */
#ifndef TOPLU_PROFILE_H
#define TOPLU_PROFILE_H

#include <stdint.h>

#include "toplu/session.h"
#include "toplu/status.h"

#ifdef __cplusplus
extern "C" {
#endif

/* What the trace says about the run besides its steps (otherData). */
typedef struct toplu_profile_info {
  const char *model;  /* the model's name or path; NULL: "" */
  int64_t batch;      /* rows of the profiled run (dim 0 of its first input) */
  int threads;        /* threads of one run */
  double peak_gflops; /* the machine's fp32 peak at those threads in GFLOP/s
                         (toplu_cpu_fp32_peak_gflops); 0: not known */
} toplu_profile_info_t;

/*
 * The trace (see above) of n profile entries (toplu_session_profile's, in
 * run order; entries with ran == 0 are left out) as JSON text, malloc'ed
 * (free with free()); NULL when out of memory.  info may be NULL.
 * Thread-safe.
 */
char *toplu_profile_trace_json(const toplu_node_profile_t *nodes, int n, const toplu_profile_info_t *info);

/* The same written to path (created or replaced).  Errors:
 * TOPLU_ERR_INVALID_ARGUMENT (NULL path, nodes NULL with n > 0, n < 0),
 * TOPLU_ERR_IO (naming the file and the reason), TOPLU_ERR_OUT_OF_MEMORY.
 * Thread-safe. */
toplu_status_t toplu_profile_write_trace(const char *path, const toplu_node_profile_t *nodes, int n,
                                         const toplu_profile_info_t *info, toplu_error_t *err);

/*
 * Profile the plan of these input shapes (toplu_session_profile; the
 * session needs opts.profile and at least one run at these shapes) and
 * write its trace to path.  info may be NULL; fields left 0 or NULL are
 * filled: batch from inputs[0].dims[0], threads from the session,
 * peak_gflops from toplu_cpu_fp32_peak_gflops(threads).  Errors:
 * TOPLU_ERR_INVALID_ARGUMENT (no profile: opts.profile unset, or no run at
 * these shapes yet), those of building the plan and of
 * toplu_profile_write_trace.  Thread-safe.
 */
toplu_status_t toplu_session_write_trace(toplu_session_t *s, const toplu_tensor_t *inputs, int n_inputs,
                                         const toplu_profile_info_t *info, const char *path, toplu_error_t *err);

/* One of the steps that took the most time (toplu_profile_top). */
typedef struct toplu_profile_top {
  int step;            /* index into the profile entries */
  const char *name;    /* the entry's strings (valid as long as they are) */
  const char *op_type;
  const char *impl;
  double ms;           /* milliseconds in the last profiled run (last_us, as the trace) */
  double share;        /* of the summed time of every step in that run, 0..1 */
  double gflops_per_s; /* flops / that time, GFLOP/s (1e9) */
  double gb_per_s;     /* bytes_moved / that time, GB/s (1e9) */
  double peak_share;   /* gflops_per_s / peak_gflops: 0..1 against the machine's measured peak, above 1
                          only when the peak given is below what ran (0 when peak_gflops is <= 0 or not finite) */
} toplu_profile_top_t;

/*
 * The cap steps that took the most time in the last profiled run, slowest first (ties in run
 * order), from n profile entries; peak_gflops as in toplu_profile_info_t.
 * Returns how many were filled (at most cap and n).  Thread-safe.
 */
int toplu_profile_top(const toplu_node_profile_t *nodes, int n, double peak_gflops, toplu_profile_top_t *top, int cap);

/*
 * How many cores the process may use, for default thread counts: the CPUs
 * in its affinity mask (sched_getaffinity; taskset, cpuset, Kubernetes'
 * static CPU manager), lowered to the CPU quota of its cgroup (v2 cpu.max,
 * v1 cpu.cfs_quota_us / cpu.cfs_period_us, the smallest over the cgroup and
 * its parents; a Kubernetes CPU limit, docker --cpus) rounded up: 1.5 cores
 * count as 2.  Without this a pod limited to 4 CPUs on a 64-core node ran 64
 * threads that the quota throttled.  how (may be NULL) gets a line saying
 * which applied.  At least 1; read once per process, cached.  Thread-safe.
 */
int toplu_cpu_count(char *how, size_t how_size);

/*
 * The fp32 FMA peak of `threads` cores in GFLOP/s (1e9 FLOP/s, a
 * multiply-add counted as 2): one core's rate measured by a register-only
 * FMA probe (AVX-512F or AVX2+FMA, chosen at run time; ~30 ms, once per
 * process, cached) times threads (<= 0: every core the process may use,
 * toplu_cpu_count).  Thread-safe.
 */
double toplu_cpu_fp32_peak_gflops(int threads);

/*
 * Run the FMA probe now on `threads` threads at once (<= 0: every core) for
 * about `seconds` (<= 0: 0.03; at most 10) and return their summed best
 * rates in GFLOP/s.  *isa (may be NULL) gets the code used: "avx512f",
 * "avx2+fma" or "scalar" (no FMA vectors: a plain float loop, a lower
 * bound).  Blocks the calling thread (and its OpenMP team) meanwhile.
 * Thread-safe.
 */
double toplu_cpu_fp32_peak_measure(int threads, double seconds, const char **isa);

/*
 * The int8 peak of `threads` cores in GOP/s (1e9 operations a second, a
 * u8 x s8 multiply-add into an s32 sum counted as 2, as an fp32 FMA is):
 * one core's rate from a register-only probe of the instructions int8
 * kernels use, chosen at run time (vpdpbusd on AVX512-VNNI, 512 bits, or
 * AVX-VNNI, 256 bits; vpmaddubsw + vpmaddwd + vpaddd on AVX2; a plain
 * integer loop otherwise), ~30 ms, once per process, cached; times threads
 * (<= 0: every core, toplu_cpu_count).  *isa (may be NULL) gets the code
 * used: "avx512_vnni", "avx_vnni", "avx2" or "scalar".  AMX tiles are not
 * probed: on a CPU with AMX-INT8 this is the VNNI rate.  Thread-safe.
 */
double toplu_cpu_int8_peak_gops(int threads, const char **isa);

/* Run the int8 probe now, as toplu_cpu_fp32_peak_measure runs the FMA one
 * (same threads, seconds and blocking); returns GOP/s, *isa as above. */
double toplu_cpu_int8_peak_measure(int threads, double seconds, const char **isa);

#ifdef __cplusplus
}
#endif
#endif /* TOPLU_PROFILE_H */
