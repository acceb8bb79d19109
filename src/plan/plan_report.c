/*
 * plan/plan_report.c - a batch plan as JSON (jansson) and as text, every
 * figure with what it is made of.
 */
#include "plan/plan_report.h"

#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

const char *toplu__fmt_bytes(double bytes, char *buf, size_t size) {
  static const char *units[] = {"B", "KiB", "MiB", "GiB", "TiB", "PiB"};
  int u = 0;
  double v = fabs(bytes);
  while (v >= 1024.0 && u < 5) {
    v /= 1024.0;
    u++;
  }
  if (bytes < 0) v = -v;
  if (u == 0) snprintf(buf, size, "%.0f B", v);
  else snprintf(buf, size, fabs(v) < 10 ? "%.2f %s" : fabs(v) < 100 ? "%.1f %s" : "%.0f %s", v, units[u]);
  return buf;
}

const char *toplu__fmt_rate(double v, const char *unit, char *buf, size_t size) {
  static const char *pre[] = {"", "k", "M", "G", "T", "P", "E"};
  int u = 0;
  while (fabs(v) >= 1000.0 && u < 6) {
    v /= 1000.0;
    u++;
  }
  snprintf(buf, size, fabs(v) < 10 ? "%.2f %s%s" : fabs(v) < 100 ? "%.1f %s%s" : "%.0f %s%s", v, pre[u], unit);
  return buf;
}

json_t *toplu__device_json(const toplu_device_info_t *d) {
  json_t *o = json_object(), *pk = json_object();
  json_object_set_new(o, "name", json_string(d->name));
  json_object_set_new(o, "description", json_string(d->description));
  json_object_set_new(o, "kind", json_string(d->kind == TOPLU_DEVICE_CPU ? "cpu" : "gpu"));
  json_object_set_new(o, "memory_bytes", json_integer((json_int_t)d->memory_bytes));
  json_object_set_new(o, "bandwidth_bytes_per_s", json_real(d->bandwidth));
  for (int p = 0; p < TOPLU_PRECISION_COUNT; p++)
    json_object_set_new(pk, toplu_precision_name((toplu_precision_t)p), json_real(d->peak_flops[p]));
  json_object_set_new(o, "peak_flops", pk);
  json_object_set_new(o, "runtime_overhead_bytes", json_integer((json_int_t)d->runtime_overhead_bytes));
  json_object_set_new(o, "node_overhead_us", json_real(d->node_overhead_us));
  json_object_set_new(o, "source", json_string(d->source));
  if (d->kind == TOPLU_DEVICE_CPU) {
    json_object_set_new(o, "cores", json_integer(d->cores));
    json_object_set_new(o, "threads", json_integer(d->threads));
    json_object_set_new(o, "isa", json_string(d->isa));
    json_object_set_new(o, "memory_source", json_string(d->memory_source));
    json_object_set_new(o, "int8_source", json_string(d->int8_note));
    if (d->probe_cpu_share > 0) json_object_set_new(o, "probe_cpu_share", json_real(d->probe_cpu_share));
  }
  return o;
}

/* {"fixed": a, "per_sample": b} */
static json_t *affine(double fixed, double per_sample) {
  json_t *o = json_object();
  json_object_set_new(o, "fixed", json_real(fixed));
  json_object_set_new(o, "per_sample", json_real(per_sample));
  return o;
}

json_t *toplu__batch_plan_json_object(const toplu_batch_plan_t *p) {
  json_t *o = json_object();
  if (!o) return NULL;
  json_object_set_new(o, "model", json_string(p->model));
  json_object_set_new(o, "inputs", json_string(p->inputs));
  json_object_set_new(o, "device", toplu__device_json(&p->device));
  json_object_set_new(o, "precision", json_string(toplu_precision_name(p->precision)));
  json_object_set_new(o, "precision_hypothetical", json_boolean(p->precision_hypothetical));
  json_object_set_new(o, "capacity_bytes", json_integer((json_int_t)p->capacity_bytes));
  json_object_set_new(o, "capacity_source", json_string(p->capacity_source));
  json_object_set_new(o, "mem_fraction", json_real(p->mem_fraction));
  json_object_set_new(o, "budget_bytes", json_integer((json_int_t)p->budget_bytes));
  json_object_set_new(o, "devices", json_integer(p->devices));
  json_object_set_new(o, "shards", json_integer(p->shards));
  json_object_set_new(o, "devices_needed", json_integer(p->devices_needed));
  json_object_set_new(o, "double_buffer", json_boolean(p->double_buffer));
  json_object_set_new(o, "batchable", json_boolean(p->batchable));
  if (p->batch_note[0]) json_object_set_new(o, "batch_note", json_string(p->batch_note));
  json_object_set_new(o, "max_batch_size", json_integer(p->max_batch_size));
  json_object_set_new(o, "max_batch_capped", json_boolean(p->max_capped));
  if (p->element_max_batch >= 0) {
    json_object_set_new(o, "element_max_batch", json_integer(p->element_max_batch));
    json_object_set_new(o, "max_batch_by_elements", json_boolean(p->max_by_elements));
    json_object_set_new(o, "elements_per_sample", json_integer(p->elements_per_sample));
  }
  json_object_set_new(o, "recommended_batch_size", json_integer(p->recommended_batch_size));
  json_object_set_new(o, "knee_batch_size", json_integer(p->knee_batch_size));
  {
    json_t *kr = json_array();
    json_array_append_new(kr, json_integer(p->knee_lo));
    json_array_append_new(kr, json_integer(p->knee_hi));
    json_object_set_new(o, "knee_range", kr);
  }
  json_object_set_new(o, "global_batch_size", json_integer(p->global_batch_size));
  json_object_set_new(o, "latency_budget_ms", p->latency_budget_ms > 0 ? json_real(p->latency_budget_ms) : json_null());

  json_t *law = json_object();
  json_object_set_new(law, "weights_bytes", json_integer((json_int_t)p->weights_bytes));
  json_object_set_new(law, "weights_per_sample_bytes", json_real(p->weights_per_sample));
  json_object_set_new(law, "plan_weights_packed_bytes", json_integer((json_int_t)p->weights_packed_bytes));
  json_object_set_new(law, "plan_weights_in_place_bytes", json_integer((json_int_t)p->weights_in_place_bytes));
  json_object_set_new(law, "overhead_bytes", json_integer((json_int_t)p->overhead_bytes));
  /* the overhead's part that grows with B (onnxruntime-cuda's allocator slack): the law's totals missed it */
  json_object_set_new(law, "overhead_per_sample_bytes", json_real(p->overhead_per_sample));
  json_object_set_new(law, "activation_bytes", affine(p->activation_fixed, p->activation_per_sample));
  json_object_set_new(law, "workspace_bytes", affine(p->workspace_fixed, p->workspace_per_sample));
  json_object_set_new(law, "io_bytes", affine(p->io_fixed, p->io_per_sample));
  json_object_set_new(law, "affine_check_batch", json_integer(p->affine_check_batch));
  json_object_set_new(law, "affine_error", json_real(p->affine_error));
  json_object_set_new(law, "affine_error_before_refit", json_real(p->affine_error_first));
  json_object_set_new(law, "affine_check_batch_before_refit", json_integer(p->affine_check_batch_first));
  json_object_set_new(law, "precision_weight_scale", json_real(p->precision_weight_scale));
  json_object_set_new(law, "precision_activation_scale", json_real(p->precision_activation_scale));
  json_object_set_new(o, "memory_law", law);

  json_t *lat = json_object();
  json_object_set_new(lat, "formula",
                      json_string("latency = efficiency * sum over nodes of max(flops / peak_flops, bytes / "
                                  "bandwidth) + nodes * node_overhead (or the calibrated intercept)"));
  json_object_set_new(lat, "peak_flops", json_real(p->peak_flops));
  json_object_set_new(lat, "int8_peak_flops", p->int8_peak_flops > 0 ? json_real(p->int8_peak_flops) : json_null());
  json_object_set_new(lat, "int8_nodes", json_integer(p->int8_nodes));
  json_object_set_new(lat, "bandwidth_bytes_per_s", json_real(p->bandwidth));
  json_object_set_new(lat, "node_overhead_us", json_real(p->node_overhead_us));
  json_object_set_new(lat, "efficiency", json_real(p->efficiency));
  json_object_set_new(lat, "calibrated", json_boolean(p->calibrated));
  json_object_set_new(lat, "nodes", json_integer(p->n_nodes));
  json_object_set_new(lat, "flops_per_sample", json_integer(p->flops_per_sample));
  json_object_set_new(lat, "bytes_moved", affine((double)p->bytes_fixed, (double)p->bytes_per_sample));
  if (p->node_costs) {
    json_t *nc = json_array();
    for (int i = 0; i < p->n_nodes; i++) {
      json_t *x = json_array();
      for (int j = 0; j < 4; j++) json_array_append_new(x, json_real(p->node_costs[4 * i + j]));
      json_array_append_new(nc, x);
    }
    json_object_set_new(lat, "node_costs", nc);
  }
  json_object_set_new(o, "latency_model", lat);
  if (p->runtime[0]) {
    json_t *rt = json_object(), *par = json_object();
    json_object_set_new(rt, "name", json_string(p->runtime));
    json_object_set_new(rt, "default", json_boolean(p->runtime_default));
    json_object_set_new(rt, "fitted_tables", json_integer(p->runtime_tables));
    json_object_set_new(rt, "source", json_string(p->runtime_source));
    json_object_set_new(rt, "memory_source", json_string(p->runtime_memory_source));
    if (p->has_band) {
      json_object_set_new(rt, "formula",
                          json_string("latency = (gpu^k + host^k)^(1/k) + batch + io_bytes / io_rate; gpu = sum over "
                                      "nodes of max((flops + ihalf * bytes) / (peak * ec * d), bytes / (bandwidth * em "
                                      "* dm)) + nodes * kernel; host = (heavy nodes * host + light nodes * light) * dh "
                                      "(* autocast under fp16/bf16)"));
      json_object_set_new(par, "ec_fp32", json_real(p->runtime_ec[0]));
      json_object_set_new(par, "ec_tensor", json_real(p->runtime_ec[1]));
      json_object_set_new(par, "em", json_real(p->runtime_em));
      json_object_set_new(par, "ihalf", json_real(p->runtime_ihalf));
      json_object_set_new(par, "kernel_us", json_real(p->runtime_kernel_us));
      json_object_set_new(par, "host_us", json_real(p->runtime_host_us));
      json_object_set_new(par, "light_us", json_real(p->runtime_light_us));
      json_object_set_new(par, "overlap_k", json_real(p->runtime_overlap_k));
      json_object_set_new(par, "batch_us", json_real(p->runtime_batch_us));
      json_object_set_new(par, "io_gbs", json_real(p->runtime_io_gbs));
      json_object_set_new(par, "autocast", json_real(p->runtime_autocast));
      json_object_set_new(par, "device_factor", json_real(p->device_factor));
      json_object_set_new(par, "device_memory_factor", json_real(p->device_memory_factor));
      json_object_set_new(par, "device_host_factor", json_real(p->device_host_factor));
      json_object_set_new(rt, "parameters", par);
    } else {
      json_decref(par);
    }
    json_object_set_new(rt, "device_factor_fitted", json_boolean(p->device_factor_fitted));
    json_t *lb = json_array(), *tb = json_array();
    json_array_append_new(lb, json_real(p->latency_band[0]));
    json_array_append_new(lb, json_real(p->latency_band[1]));
    json_array_append_new(tb, json_real(p->throughput_band[0]));
    json_array_append_new(tb, json_real(p->throughput_band[1]));
    json_object_set_new(rt, "latency_band", lb);
    json_object_set_new(rt, "throughput_band", tb);
    json_t *kf = json_array();
    json_array_append_new(kf, json_real(p->knee_factor[0]));
    json_array_append_new(kf, json_real(p->knee_factor[1]));
    json_object_set_new(rt, "knee_factor", kf);
    json_t *ks = json_array();
    json_array_append_new(ks, json_real(p->knee_share[0]));
    json_array_append_new(ks, json_real(p->knee_share[1]));
    json_object_set_new(rt, "knee_share", ks);
    json_object_set_new(o, "runtime", rt);
  } else {
    json_object_set_new(o, "runtime", json_null());
  }

  json_t *rows = json_array();
  for (int i = 0; i < p->n_rows; i++) {
    const toplu_plan_row_t *r = &p->rows[i];
    json_t *x = json_object();
    json_object_set_new(x, "batch_size", json_integer(r->batch_size));
    json_object_set_new(x, "weights_bytes", json_integer((json_int_t)r->weights_bytes));
    json_object_set_new(x, "activation_bytes", json_integer((json_int_t)r->activation_bytes));
    json_object_set_new(x, "workspace_bytes", json_integer((json_int_t)r->workspace_bytes));
    json_object_set_new(x, "io_bytes", json_integer((json_int_t)r->io_bytes));
    json_object_set_new(x, "overhead_bytes", json_integer((json_int_t)r->overhead_bytes));
    json_object_set_new(x, "total_bytes", json_integer((json_int_t)r->total_bytes));
    json_object_set_new(x, "latency_ms", json_real(r->latency_ms));
    json_object_set_new(x, "throughput", json_real(r->throughput));
    if (p->has_band) {
      json_t *lb = json_array(), *tb = json_array();
      json_array_append_new(lb, json_real(r->latency_lo_ms));
      json_array_append_new(lb, json_real(r->latency_hi_ms));
      json_array_append_new(tb, json_real(r->throughput_lo));
      json_array_append_new(tb, json_real(r->throughput_hi));
      json_object_set_new(x, "latency_band_ms", lb);
      json_object_set_new(x, "throughput_band", tb);
    } else {
      json_object_set_new(x, "latency_band_ms", json_null());
      json_object_set_new(x, "throughput_band", json_null());
    }
    json_object_set_new(x, "compute_ms", json_real(r->compute_ms));
    json_object_set_new(x, "memory_ms", json_real(r->memory_ms));
    json_object_set_new(x, "overhead_ms", json_real(r->overhead_ms));
    json_object_set_new(x, "fits", json_boolean(r->fits));
    json_object_set_new(x, "within_latency_budget", json_boolean(r->within_latency));
    json_object_set_new(x, "source", json_string(r->exact ? "plan" : "affine law"));
    json_array_append_new(rows, x);
  }
  json_object_set_new(o, "batch_sizes", rows);
  json_t *notes = json_array();
  for (int i = 0; i < p->n_notes; i++) json_array_append_new(notes, json_string(p->notes[i]));
  json_object_set_new(o, "notes", notes);
  return o;
}

char *toplu_batch_plan_json(const toplu_batch_plan_t *p) {
  if (!p) return NULL;
  json_t *o = toplu__batch_plan_json_object(p);
  if (!o) return NULL;
  char *s = json_dumps(o, TOPLU__PLAN_JSON_FLAGS);
  json_decref(o);
  return s;
}

/* "a + b x B" with human bytes. */
static const char *affine_text(double fixed, double per, char *buf, size_t size) {
  char a[32], b[32];
  if (fabs(per) < 0.5) snprintf(buf, size, "%s", toplu__fmt_bytes(fixed, a, sizeof a));
  else if (fabs(fixed) < 0.5) snprintf(buf, size, "%s x B", toplu__fmt_bytes(per, b, sizeof b));
  else
    snprintf(buf, size, "%s %s %s x B", toplu__fmt_bytes(fixed, a, sizeof a), per >= 0 ? "+" : "-",
             toplu__fmt_bytes(fabs(per), b, sizeof b));
  return buf;
}

void toplu_batch_plan_print(const toplu_batch_plan_t *p, FILE *f) {
  if (!p || !f) return;
  char a[64], b[64], c[64], d[64], e[64];
  const toplu_device_info_t *dv = &p->device;
  fprintf(f, "model:     %s\n", p->model);
  fprintf(f, "inputs:    %s\n", p->inputs);
  if (dv->kind == TOPLU_DEVICE_CPU)
    fprintf(f, "device:    cpu: %s, %d of %d core%s, %s; probed %s fp32, %s int8, %s copy bandwidth\n",
            dv->description, dv->threads, dv->cores, dv->cores == 1 ? "" : "s",
            dv->isa[0] ? dv->isa : "no vector extensions found",
            toplu__fmt_rate(dv->peak_flops[0], "FLOP/s", a, sizeof a),
            dv->peak_flops[TOPLU_PRECISION_INT8] > 0
                ? toplu__fmt_rate(dv->peak_flops[TOPLU_PRECISION_INT8], "OP/s", c, sizeof c)
                : "no",
            toplu__fmt_rate(dv->bandwidth, "B/s", b, sizeof b));
  else
    fprintf(f, "device:    %s (%s): %s, %s; source: %s\n", dv->name, dv->description,
            toplu__fmt_bytes((double)dv->memory_bytes, a, sizeof a), toplu__fmt_rate(dv->bandwidth, "B/s", b, sizeof b),
            dv->source);
  if (p->precision_weight_scale == 1 && p->precision_activation_scale == 1)
    fprintf(f, "precision: %s%s: toplu's plan as it runs the model (its own dtypes), unscaled\n",
            toplu_precision_name(p->precision), p->precision_hypothetical ? " (hypothetical)" : "");
  else
    fprintf(f, "precision: %s%s (weights x %.2f, activations and workspace x %.2f of toplu's plan in the model's "
               "dtypes)\n",
            toplu_precision_name(p->precision), p->precision_hypothetical ? " (hypothetical)" : "",
            p->precision_weight_scale, p->precision_activation_scale);
  if (p->runtime[0])
    fprintf(f, "runtime:   %s%s: %s\n", p->runtime,
            p->runtime_default ? " (default; the others: triton-tensorrt, onnxruntime-cuda, pytorch, ideal)" : "",
            p->runtime_source);
  fprintf(f, "capacity:  %s (%s) x mem_fraction %.2f = budget %s per device\n",
          toplu__fmt_bytes((double)p->capacity_bytes, a, sizeof a), p->capacity_source, p->mem_fraction,
          toplu__fmt_bytes((double)p->budget_bytes, b, sizeof b));
  if (!p->batchable) fprintf(f, "batching:  %s\n", p->batch_note);
  fprintf(f, "\nmemory at batch B (bytes per device; from toplu's plans at B = 1 and 2):\n");
  if (p->weights_per_sample > 0)
    fprintf(f, "  weights      %-24s with constants the plan folds for its batch size (an RNN's initial state)",
            affine_text((double)p->weights_bytes, p->weights_per_sample, a, sizeof a));
  else
    fprintf(f, "  weights      %-24s once, not per sample", toplu__fmt_bytes((double)p->weights_bytes, a, sizeof a));
  if (p->shards > 1) fprintf(f, "; split over %d devices", p->shards);
  fprintf(f, " (toplu's plan: %s repacked for the kernels + %s read in place)\n",
          toplu__fmt_bytes((double)p->weights_packed_bytes, b, sizeof b),
          toplu__fmt_bytes((double)p->weights_in_place_bytes, c, sizeof c));
  fprintf(f, "  activations  %-24s the arena holding every intermediate tensor, laid out by liveness\n",
          affine_text(p->activation_fixed, p->activation_per_sample, a, sizeof a));
  fprintf(f, "  workspace    %-24s the largest per-op scratch area\n",
          affine_text(p->workspace_fixed, p->workspace_per_sample, a, sizeof a));
  fprintf(f, "  io           %-24s model inputs + outputs%s\n", affine_text(p->io_fixed, p->io_per_sample, a, sizeof a),
          p->double_buffer ? ", twice (double-buffered)" : "");
  fprintf(f, "  overhead     %-24s %s\n",
          p->overhead_per_sample > 0.5 ? affine_text((double)p->overhead_bytes, p->overhead_per_sample, a, sizeof a)
                                       : toplu__fmt_bytes((double)p->overhead_bytes, a, sizeof a),
          dv->kind == TOPLU_DEVICE_CPU ? "per-plan kernel state (oneDNN primitives)"
          : p->runtime[0] ? p->runtime_memory_source
                          : "runtime context (CUDA context, estimate from the catalog)");
  if (p->affine_check_batch) {
    if (p->affine_error_first > 1e-4)
      fprintf(f, "  affine check: the law from B = 1, 2 against toplu's real plan at B = %lld: off by %.4f%%; "
                 "refitted, against the real plan at B = %lld: off by %.4f%%\n",
              (long long)p->affine_check_batch_first, 100 * p->affine_error_first, (long long)p->affine_check_batch,
              100 * p->affine_error);
    else
      fprintf(f, "  affine check: the law against toplu's real plan at B = %lld: off by %.4f%%\n",
              (long long)p->affine_check_batch, 100 * p->affine_error);
  }
  if (p->has_band) {
    double host_amp = (p->precision == TOPLU_PRECISION_FP16 || p->precision == TOPLU_PRECISION_BF16) &&
                              !p->precision_hypothetical && p->runtime_autocast > 0
                          ? p->runtime_autocast
                          : 1;
    fprintf(f, "\nlatency model (%s profile): per node max((FLOPs + %.3g x bytes) / (%s x %.3g), bytes / (%s x %.3g))\n"
               "  + %.2f us on the GPU, overlapped with %.3g us of host time per heavy node, %.3g per light one (k = "
               "%.2g),\n  + %.1f us per batch%s%s%s; device factors %.3g compute, %.3g memory, %.3g host%s%s\n",
            p->runtime, p->runtime_ihalf, toplu__fmt_rate(p->peak_flops, "FLOP/s", a, sizeof a),
            p->runtime_ec[p->precision != TOPLU_PRECISION_FP32 && !p->precision_hypothetical] * p->device_factor,
            toplu__fmt_rate(p->bandwidth, "B/s", b, sizeof b), p->runtime_em * p->device_memory_factor,
            p->runtime_kernel_us, p->runtime_host_us * p->device_host_factor * host_amp,
            p->runtime_light_us * p->device_host_factor * host_amp, p->runtime_overlap_k, p->runtime_batch_us, p->runtime_io_gbs > 0 ? " + inputs and outputs at " : "",
            p->runtime_io_gbs > 0 ? toplu__fmt_rate(p->runtime_io_gbs * 1e9, "B/s", c, sizeof c) : "",
            "", p->device_factor, p->device_memory_factor, p->device_host_factor,
            p->device_factor_fitted ? "" : " (no published table for this device)",
            p->calibrated ? "; calibrated" : "");
    /* what the band is, and where fresh tables fell outside it (a fresh user read "held-out" as the fresh tables'
     * error, which R4 missed by far: 2026-12-06) */
    fprintf(f, "  band: latency x %.2f..%.2f, throughput x %.2f..%.2f of the prediction (%s)%s\n",
            p->latency_band[0], p->latency_band[1], p->throughput_band[0], p->throughput_band[1],
            !strcmp(p->runtime, "onnxruntime-cuda") ? "the union of the pytorch and tensorrt fits' bands: no table of "
                                                      "this runtime"
                                                    : "10th-90th percentile of the fit's error on each of its tables "
                                                      "left out of it",
            !strcmp(p->runtime, "tensorrt")
                ? ";\n  fresh tables fell outside it: ResNet-50 under Paddle-TRT on A10, A30 and A100 (R4, "
                  "docs/plan-tune.md): the predictions were 10-44% above their throughput and 61-70% below their "
                  "batch-1 latency"
                : "");
  } else {
    char i8[128] = "";
    if (p->int8_peak_flops > 0 && p->int8_nodes > 0)
      snprintf(i8, sizeof i8, " (its %d integer step%s: %s)", p->int8_nodes, p->int8_nodes == 1 ? "" : "s",
               toplu__fmt_rate(p->int8_peak_flops, "OP/s", c, sizeof c));
    /* the nodes that run (a view such as Flatten or Reshape costs nothing and launches nothing: the latency counts
     * launches, and until 2026-12-06 this line counted the views too, one more than the budget message) */
    int runs = 0;
    for (int i = 0; i < p->n_nodes; i++)
      runs += !p->node_costs || p->node_costs[4 * i] || p->node_costs[4 * i + 1] || p->node_costs[4 * i + 2] ||
              p->node_costs[4 * i + 3];
    fprintf(f, "\nlatency model: per node max(FLOPs / %s%s, bytes / %s)%s + %d node%s x %.1f us%s\n",
            toplu__fmt_rate(p->peak_flops, "FLOP/s", a, sizeof a), i8, toplu__fmt_rate(p->bandwidth, "B/s", b, sizeof b),
            p->calibrated ? ", calibrated" : "", runs, runs == 1 ? "" : "s", p->node_overhead_us,
            p->calibrated ? " (replaced by the calibrated intercept)" : "");
  }
  fprintf(f, "  per sample: %s, %s moved\n", toplu__fmt_rate((double)p->flops_per_sample, "FLOP", a, sizeof a),
          toplu__fmt_bytes((double)p->bytes_per_sample, b, sizeof b));
  if (p->has_band)
    fprintf(f, "\n%8s %11s %11s %10s %10s %10s %11s %21s %23s  %s\n", "batch", "weights", "activations", "workspace",
            "io", "overhead", "total", "latency ms (band)", "inferences/s (band)", "");
  else
    fprintf(f, "\n%8s %11s %11s %10s %10s %10s %11s %11s %13s  %s\n", "batch", "weights", "activations", "workspace",
            "io", "overhead", "total", "latency ms", "inferences/s", "");
  for (int i = 0; i < p->n_rows; i++) {
    const toplu_plan_row_t *r = &p->rows[i];
    char w[32], ac[32], ws[32], io[32], ov[32], tot[32];
    const char *tag = !r->fits ? "over memory" : !r->within_latency ? "over latency budget" : "";
    const char *bound = r->compute_ms >= r->memory_ms ? "compute" : "memory";
    char lat[64], thr[64];
    if (p->has_band) {
      snprintf(lat, sizeof lat, "%.3g (%.3g-%.3g)", r->latency_ms, r->latency_lo_ms, r->latency_hi_ms);
      snprintf(thr, sizeof thr, "%.0f (%.0f-%.0f)", r->throughput, r->throughput_lo, r->throughput_hi);
    } else {
      snprintf(lat, sizeof lat, "%11.3f", r->latency_ms);
      snprintf(thr, sizeof thr, "%13.1f", r->throughput);
    }
    fprintf(f, "%8lld %11s %11s %10s %10s %10s %11s %*s %*s  %s-bound%s%s%s\n", (long long)r->batch_size,
            toplu__fmt_bytes((double)r->weights_bytes, w, sizeof w),
            toplu__fmt_bytes((double)r->activation_bytes, ac, sizeof ac),
            toplu__fmt_bytes((double)r->workspace_bytes, ws, sizeof ws), toplu__fmt_bytes((double)r->io_bytes, io, sizeof io),
            toplu__fmt_bytes((double)r->overhead_bytes, ov, sizeof ov), toplu__fmt_bytes((double)r->total_bytes, tot, sizeof tot),
            p->has_band ? 21 : 11, lat, p->has_band ? 23 : 13, thr, bound, r->exact ? "" : " (law)", tag[0] ? ", " : "",
            tag);
  }
  fprintf(f, "\n");
  if (p->max_batch_size >= 1) {
    toplu_plan_row_t const *last = NULL;
    for (int i = 0; i < p->n_rows; i++)
      if (p->rows[i].batch_size == p->max_batch_size) last = &p->rows[i];
    if (p->max_by_elements)
      fprintf(f, "max batch:         %lld: the largest B at which every tensor holds at most 2^31 - 1 elements (the "
                 "runtime's 32-bit indexing; memory allows more, see the note)", (long long)p->max_batch_size);
    else
      fprintf(f, "max batch:         %lld%s: the largest B whose total stays within %s", (long long)p->max_batch_size,
              p->max_capped ? " (search cap)" : "", toplu__fmt_bytes((double)p->budget_bytes, a, sizeof a));
    if (last) fprintf(f, " (it takes %s)", toplu__fmt_bytes((double)last->total_bytes, b, sizeof b));
    fprintf(f, "\n");
  } else {
    fprintf(f, "max batch:         none %s\n", p->max_by_elements ? "runs: a tensor passes the runtime's 2^31 - 1 "
                                                                  "elements at every batch size (see the note)"
                                                                : "fits");
  }
  if (p->devices > 1 || p->shards > 1)
    fprintf(f, "global batch:      %lld over %d devices (%d group%s of %d)\n", (long long)p->global_batch_size,
            p->devices, p->devices / p->shards, p->devices / p->shards == 1 ? "" : "s", p->shards);
  fprintf(f, "recommended batch: %lld: the smallest within 1%% of the most predicted throughput within memory%s\n",
          (long long)p->recommended_batch_size, p->latency_budget_ms > 0 ? " and the latency budget" : "");
  if (p->latency_budget_ms > 0) fprintf(f, "latency budget:    %.3g ms\n", p->latency_budget_ms);
  fprintf(f, "knee:              %lld: the smallest B within 5%% of the best predicted throughput",
          (long long)p->knee_batch_size);
  if (p->knee_lo != p->knee_hi)
    fprintf(f, "; range %lld-%lld (the knee x %.2g-%.2g, or a predicted throughput %.3g-%.3g of the best: the fit's "
               "held-out knee error)", (long long)p->knee_lo, (long long)p->knee_hi, p->knee_factor[0],
            p->knee_factor[1], p->knee_share[0], p->knee_share[1]);
  fprintf(f, "\n");
  for (int i = 0; i < p->n_notes; i++) fprintf(f, "note: %s\n", p->notes[i]);
  (void)d;
  (void)e;
}
