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

#include "core/memory.h"
#include "toplu/planner.h"

/* Peak FLOP/s the latency model uses for precision p on device d: the
 * device's figure, or its fp32 figure when it lacks p (*hypothetical = 1). */
double toplu__device_peak(const toplu_device_info_t *d, toplu_precision_t p, int *hypothetical);

/* Bytes-per-element multipliers for a precision relative to fp32 models:
 * weights and activations (see toplu/planner.h). */
void toplu__precision_scales(toplu_precision_t p, double *weights, double *activations);

/* toplu__cgroup_available and toplu__meminfo_available: core/memory.h. */

#endif
