/* core/cpu.h - the cgroup CPU quota parser behind toplu_cpu_count (toplu/profile.h). */
#ifndef TOPLU_CORE_CPU_H
#define TOPLU_CORE_CPU_H

/* Cores allowed by a cgroup's quota text (exposed for tests): v2 cpu.max
 * ("QUOTA PERIOD" or "max PERIOD") with period_text NULL, or v1's
 * cpu.cfs_quota_us and cpu.cfs_period_us texts; 0 when there is no quota,
 * else the quota over the period rounded up (at least 1).  Thread-safe. */
int toplu__cpu_quota_cores(const char *quota_text, const char *period_text);

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
