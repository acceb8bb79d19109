/*
 * core/memory.h - the memory available to this process: /proc/meminfo's
 * MemAvailable, or less where a cgroup (v1 or v2) limits the process.  The
 * planner's budget (toplu_cpu_memory_available, toplu/planner.h) and the
 * runtime's arena check read it.
 */
#ifndef TOPLU_CORE_MEMORY_H
#define TOPLU_CORE_MEMORY_H

#include <stddef.h>
#include <stdint.h>

/* Bytes available now; how (may be NULL) gets a one-line explanation of
 * where the number comes from.  Reads /proc and /sys each call.  The
 * environment variable TOPLU_MEMORY_AVAILABLE (bytes) lowers it: a budget
 * for a process sharing the machine without a cgroup limit, and for tests.
 * Thread-safe. */
uint64_t toplu__memory_available(char *how, size_t how_size);

/*
 * Parse the memory a cgroup allows from the text of its files (exposed for
 * tests): limit_text is memory.max ("max" or bytes) or memory.limit_in_bytes,
 * usage_text memory.current / memory.usage_in_bytes, stat_text memory.stat
 * (its inactive_file / total_inactive_file line is reclaimable).  Returns the
 * bytes still available under the limit, or UINT64_MAX when there is no
 * limit (or the text is not a number).
 */
uint64_t toplu__cgroup_available(const char *limit_text, const char *usage_text, const char *stat_text);

/* Read up to size-1 bytes of the file path into buf (NUL-terminated): 0,
 * or -1 when it cannot be opened.  For /proc and /sys files. */
int toplu__read_text(const char *path, char *buf, size_t size);

/* Bytes of MemAvailable in /proc/meminfo text (0 when absent). */
uint64_t toplu__meminfo_available(const char *meminfo_text);

#endif
