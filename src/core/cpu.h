/* core/cpu.h - the cgroup CPU quota parser behind toplu_cpu_count (toplu/profile.h). */
#ifndef TOPLU_CORE_CPU_H
#define TOPLU_CORE_CPU_H

/* Cores allowed by a cgroup's quota text (exposed for tests): v2 cpu.max
 * ("QUOTA PERIOD" or "max PERIOD") with period_text NULL, or v1's
 * cpu.cfs_quota_us and cpu.cfs_period_us texts; 0 when there is no quota,
 * else the quota over the period rounded up (at least 1).  Thread-safe. */
int toplu__cpu_quota_cores(const char *quota_text, const char *period_text);

/* The same quota texts' cores unrounded (0.5 for "50000 100000"); 0 when there is no quota.  Thread-safe. */
double toplu__cpu_quota_exact(const char *quota_text, const char *period_text);

/* The process's cgroup CPU quota in cores, unrounded (the smallest over its cgroup and their parents, as
 * toplu_cpu_count reads it); 0 when none.  Read once per process.  Thread-safe. */
double toplu__cpu_quota(void);

/* The share of its threads' full-speed rate that `threads` threads keep under a quota of `quota` cores
 * (quota / threads, at most 1; 1 when quota <= 0): a CFS quota lets the process run quota core-seconds a
 * period, so a probe's best rate, measured inside one period's burst, overstates what it sustains. */
double toplu__cpu_quota_share(double quota, int threads);

/* The first instruction-set extension the build was compiled to use (the compiler's feature macros:
 * -march=native, CMake's TOPLU_NATIVE, the default) that this CPU or its OS lacks ("AVX-512VBMI"), by
 * CPUID and XGETBV; NULL when it has them all (always NULL off x86-64).  Itself compiled for the
 * baseline x86-64, so it runs where the rest of the build would die on SIGILL.  Thread-safe.
 * (core/cpu_build.c; the CLI's main and toplu_model_load check it first.) */
const char *toplu__cpu_build_missing(void);

/* TOPLU_OK, or TOPLU_ERR_UNSUPPORTED with err (may be NULL) saying which extension is missing and how to
 * build for any x86-64.  Baseline-compiled too: call it first, before code compiled for the build's CPU. */
#include "toplu/status.h"
toplu_status_t toplu__cpu_build_check(toplu_error_t *err);

#endif
