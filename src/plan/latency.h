/*
 * plan/latency.h - the per-node roofline latency model and its calibration.
 *
 *   latency(B) = efficiency * sum_i max(flops_i(B) / peak_flops,
 *                                       bytes_i(B) * bytes_scale / bandwidth)
 *                + intercept
 * (peak_flops is int8_peak_flops for a step of integer arithmetic when that is
 * set) where intercept = launched nodes * node overhead (uncalibrated), and
 * flops_i(B), bytes_i(B) are affine per step, fitted from toplu's plans at
 * two batch sizes (the plan's steps are the same at every B).  Roofline:
 * Williams, Waterman and Patterson, "Roofline: an insightful visual
 * performance model for multicore architectures", CACM 52(4), 2009.
 */
#ifndef TOPLU_PLAN_LATENCY_H
#define TOPLU_PLAN_LATENCY_H

#include <stdint.h>

#include "plan/memory.h"

typedef struct toplu__latency_model {
  double peak_flops;   /* FLOP/s */
  double int8_peak_flops; /* OP/s of the steps of integer arithmetic (toplu__plan_point_t.step_int8); 0: peak_flops */
  double bandwidth;    /* bytes/s */
  double bytes_scale;  /* precision's bytes relative to the fp32 plan */
  double node_overhead_s;
  double efficiency;   /* 1 uncalibrated */
  double intercept_s;  /* < 0: launched nodes * node_overhead_s */
} toplu__latency_model_t;

/* Per-step costs at batch b from two points at batches p1->batch < p2->batch
 * with the same steps (else p1's costs scaled by b / p1->batch). */
typedef struct toplu__latency_parts {
  double roofline_s;   /* sum of max(compute, memory) per step, before efficiency */
  double compute_s;    /* of roofline_s: steps bound by compute */
  double memory_s;     /* of roofline_s: steps bound by memory */
  double launches;     /* steps launched (views excluded; x rows when run row by row) */
  double flops, bytes; /* totals at b */
} toplu__latency_parts_t;

void toplu__latency_parts(const toplu__latency_model_t *lm, const toplu__plan_point_t *p1, const toplu__plan_point_t *p2,
                         int64_t b, toplu__latency_parts_t *out);

/* Each step's flops and bytes (x bytes_scale) at batch b, interpolated as
 * toplu__latency_parts does, into flops[p1->n_steps] and bytes[...]; a view
 * gets 0 and 0. */
void toplu__latency_node_costs(const toplu__latency_model_t *lm, const toplu__plan_point_t *p1,
                               const toplu__plan_point_t *p2, int64_t b, double *flops, double *bytes);

/* Seconds: efficiency * roofline + intercept (or launches * node overhead). */
double toplu__latency_seconds(const toplu__latency_model_t *lm, const toplu__latency_parts_t *parts);

/*
 * Least squares of measured_s[k] = efficiency * roofline_s[k] + intercept
 * (intercept >= 0) over n points; with one point the intercept is
 * default_intercept_s (when below the measurement).  Returns 0 and sets
 * *efficiency, *intercept_s, or -1 when no positive efficiency fits.
 */
int toplu__latency_fit(const double *roofline_s, const double *measured_s, int n, double default_intercept_s,
                      double *efficiency, double *intercept_s);

#endif
