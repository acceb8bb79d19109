/*
 * plan/device.h - the device catalog and the local CPU probe.
 *
 * Public entry points (toplu_device_lookup, toplu_device_catalog_*,
 * toplu_cpu_memory_available) are declared in toplu/planner.h; this header
 * adds the pieces the planner and the tuner share.
 */
#ifndef TOPLU_PLAN_DEVICE_H
#define TOPLU_PLAN_DEVICE_H

#include <stddef.h>
#include <stdint.h>

#include "toplu/planner.h"

/* Peak FLOP/s the latency model uses for precision p on device d: the
 * device's figure, or its fp32 figure when it lacks p (*hypothetical = 1). */
double toplu__device_peak(const toplu_device_info_t *d, toplu_precision_t p, int *hypothetical);

/* Bytes-per-element multipliers for a precision relative to fp32 models:
 * weights and activations (see toplu/planner.h). */
void toplu__precision_scales(toplu_precision_t p, double *weights, double *activations);

/*
 * Parse the memory a cgroup allows from the text of its files (exposed for
 * tests): limit_text is memory.max ("max" or bytes) or memory.limit_in_bytes,
 * usage_text memory.current / memory.usage_in_bytes, stat_text memory.stat
 * (its inactive_file / total_inactive_file line is reclaimable).  Returns the
 * bytes still available under the limit, or UINT64_MAX when there is no
 * limit (or the text is not a number).
 */
uint64_t toplu__cgroup_available(const char *limit_text, const char *usage_text, const char *stat_text);

/* Bytes of MemAvailable in /proc/meminfo text (0 when absent). */
uint64_t toplu__meminfo_available(const char *meminfo_text);

#endif
