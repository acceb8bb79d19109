/*
 * plan/latency.c - per-node roofline latency and its least-squares
 * calibration (see plan/latency.h).
 */
#include "plan/latency.h"

#include <math.h>

/* Step i's flops *f and bytes *m (unscaled) at batch b. */
static void step_cost(const toplu__plan_point_t *p1, const toplu__plan_point_t *p2, int same, int i, int64_t b,
                      double *f, double *m) {
  double x = (double)b;
  if (same) {
    double df = (double)(p2->step_flops[i] - p1->step_flops[i]) / (double)(p2->batch - p1->batch);
    double dm = (double)(p2->step_bytes[i] - p1->step_bytes[i]) / (double)(p2->batch - p1->batch);
    *f = (double)p1->step_flops[i] + df * (x - (double)p1->batch);
    *m = (double)p1->step_bytes[i] + dm * (x - (double)p1->batch);
  } else {
    *f = (double)p1->step_flops[i] * x / (double)p1->batch;
    *m = (double)p1->step_bytes[i] * x / (double)p1->batch;
  }
  if (*f < 0) *f = 0;
  if (*m < 0) *m = 0;
}

void toplu__latency_parts(const toplu__latency_model_t *lm, const toplu__plan_point_t *p1, const toplu__plan_point_t *p2,
                         int64_t b, toplu__latency_parts_t *out) {
  out->roofline_s = out->compute_s = out->memory_s = out->launches = out->flops = out->bytes = 0;
  int same = p2 && p2->n_steps == p1->n_steps && p2->batch != p1->batch;
  double x = (double)b;
  for (int i = 0; i < p1->n_steps; i++) {
    double f, m;
    step_cost(p1, p2, same, i, b, &f, &m);
    if (f == 0 && m == 0) continue; /* a view: nothing runs */
    double peak = lm->int8_peak_flops > 0 && p1->step_int8 && p1->step_int8[i] ? lm->int8_peak_flops : lm->peak_flops;
    double tc = peak > 0 ? f / peak : 0;
    double tm = lm->bandwidth > 0 ? m * lm->bytes_scale / lm->bandwidth : 0;
    if (tc >= tm) out->compute_s += tc;
    else out->memory_s += tm;
    out->launches += 1;
    out->flops += f;
    out->bytes += m * lm->bytes_scale;
  }
  /* Without a second plan the batch runs row by row: every step launches once per row. */
  if (!p2 || p1->r.per_sample) out->launches *= x / (double)p1->batch;
  out->roofline_s = out->compute_s + out->memory_s;
}

void toplu__latency_node_costs(const toplu__latency_model_t *lm, const toplu__plan_point_t *p1,
                               const toplu__plan_point_t *p2, int64_t b, double *flops, double *bytes) {
  int same = p2 && p2->n_steps == p1->n_steps && p2->batch != p1->batch;
  for (int i = 0; i < p1->n_steps; i++) {
    double f, m;
    step_cost(p1, p2, same, i, b, &f, &m);
    flops[i] = f;
    bytes[i] = m * lm->bytes_scale;
  }
}

double toplu__latency_seconds(const toplu__latency_model_t *lm, const toplu__latency_parts_t *parts) {
  double fixed = lm->intercept_s >= 0 ? lm->intercept_s : parts->launches * lm->node_overhead_s;
  return lm->efficiency * parts->roofline_s + fixed;
}

int toplu__latency_fit(const double *r, const double *m, int n, double default_intercept_s, double *efficiency,
                      double *intercept_s) {
  if (n <= 0) return -1;
  double a = 0, c = 0;
  if (n >= 2) {
    double sr = 0, sm = 0, srr = 0, srm = 0;
    for (int k = 0; k < n; k++) {
      sr += r[k];
      sm += m[k];
      srr += r[k] * r[k];
      srm += r[k] * m[k];
    }
    double den = (double)n * srr - sr * sr;
    if (fabs(den) > 1e-30 * (srr + 1e-300)) {
      a = ((double)n * srm - sr * sm) / den;
      c = (sm - a * sr) / (double)n;
    }
    if (!(a > 0) || c < 0) { /* through the origin */
      c = 0;
      a = srr > 0 ? srm / srr : 0;
    }
  } else {
    c = default_intercept_s < m[0] ? default_intercept_s : 0;
    a = r[0] > 0 ? (m[0] - c) / r[0] : 0;
  }
  if (!(a > 0) || !isfinite(a) || !isfinite(c)) return -1;
  *efficiency = a;
  *intercept_s = c;
  return 0;
}
