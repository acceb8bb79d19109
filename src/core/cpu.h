/* core/cpu.h - the cgroup CPU quota parser behind toplu_cpu_count (toplu/profile.h). */
#ifndef TOPLU_CORE_CPU_H
#define TOPLU_CORE_CPU_H

/* Cores allowed by a cgroup's quota text (exposed for tests): v2 cpu.max
 * ("QUOTA PERIOD" or "max PERIOD") with period_text NULL, or v1's
 * cpu.cfs_quota_us and cpu.cfs_period_us texts; 0 when there is no quota,
 * else the quota over the period rounded up (at least 1).  Thread-safe. */
int toplu__cpu_quota_cores(const char *quota_text, const char *period_text);

#endif
