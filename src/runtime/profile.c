/*
 * runtime/profile.c - a session's per-step profile as a Chrome trace and
 * as the steps that took the most time (toplu/profile.h).  The one trace
 * writer: toplu run's profile file, toplu tune's trace.json and
 * toplu_bench use it.
 */
#include <errno.h>
#include <math.h>
#include <jansson.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "toplu/profile.h"

/* A rate in units of 1e9 per second of `count` per `us` microseconds (0 when us is 0). */
static double giga_rate(int64_t count, double us) { return us > 0 ? (double)count / us / 1e3 : 0; }

static json_t *tensors_json(const toplu_profile_tensor_t *t, int n) {
  json_t *a = json_array();
  for (int i = 0; t && i < n; i++) {
    if (t[i].ndim < 0) { /* an absent optional input keeps its place */
      json_array_append_new(a, json_null());
      continue;
    }
    json_t *o = json_object(), *shape = json_array();
    for (int d = 0; d < t[i].ndim; d++) json_array_append_new(shape, json_integer(t[i].dims[d]));
    json_object_set_new(o, "shape", shape);
    json_object_set_new(o, "dtype", json_string(toplu_dtype_name(t[i].dtype)));
    json_object_set_new(o, "layout", json_string(t[i].layout ? t[i].layout : ""));
    json_array_append_new(a, o);
  }
  return a;
}

static json_t *trace_object(const toplu_node_profile_t *nodes, int n, const toplu_profile_info_t *info) {
  json_t *o = json_object(), *ev = json_array(), *other = json_object();
  double peak = info && info->peak_gflops > 0 && isfinite(info->peak_gflops) ? info->peak_gflops : 0; /* else null */
  int64_t runs = 0;
  for (int i = 0; i < n; i++) {
    const toplu_node_profile_t *p = &nodes[i];
    if (!p->ran) continue;
    if (p->runs > runs) runs = p->runs;
    const char *op = p->op_type ? p->op_type : "";
    json_t *e = json_object(), *args = json_object();
    json_object_set_new(e, "name", json_string(p->name && *p->name ? p->name : op));
    json_object_set_new(e, "cat", json_string(op));
    json_object_set_new(e, "ph", json_string("X"));
    json_object_set_new(e, "ts", json_real(p->start_us > 0 ? p->start_us : 0));
    json_object_set_new(e, "dur", json_real(p->last_us > 0 ? p->last_us : 0));
    json_object_set_new(e, "pid", json_integer(1));
    json_object_set_new(e, "tid", json_integer(1));
    json_object_set_new(args, "op_type", json_string(op));
    json_object_set_new(args, "fused", json_string(p->fused ? p->fused : ""));
    json_object_set_new(args, "backend", json_string(p->backend ? p->backend : ""));
    json_object_set_new(args, "inputs", tensors_json(p->inputs, p->n_inputs));
    json_object_set_new(args, "outputs", tensors_json(p->outputs, p->n_outputs));
    json_object_set_new(args, "impl", json_string(p->impl ? p->impl : ""));
    json_object_set_new(args, "flops", json_integer(p->flops));
    json_object_set_new(args, "bytes", json_integer(p->bytes_moved));
    double gf = giga_rate(p->flops, p->last_us);
    json_object_set_new(args, "gflops_per_s", json_real(gf));
    json_object_set_new(args, "gb_per_s", json_real(giga_rate(p->bytes_moved, p->last_us)));
    json_object_set_new(args, "peak_share", peak > 0 ? json_real(gf / peak) : json_null());
    json_object_set_new(e, "args", args);
    json_array_append_new(ev, e);
  }
  json_object_set_new(o, "traceEvents", ev);
  json_object_set_new(o, "displayTimeUnit", json_string("ms"));
  json_object_set_new(other, "model", json_string(info && info->model ? info->model : ""));
  json_object_set_new(other, "batch", json_integer(info ? info->batch : 0));
  json_object_set_new(other, "threads", json_integer(info ? info->threads : 0));
  json_object_set_new(other, "peak_gflops", peak > 0 ? json_real(peak) : json_null());
  json_object_set_new(other, "runs", json_integer(runs));
  json_object_set_new(o, "otherData", other);
  return o;
}

char *toplu_profile_trace_json(const toplu_node_profile_t *nodes, int n, const toplu_profile_info_t *info) {
  if (!nodes) n = 0;
  json_t *o = trace_object(nodes, n, info);
  char *s = o ? json_dumps(o, JSON_COMPACT) : NULL;
  json_decref(o);
  return s;
}

toplu_status_t toplu_profile_write_trace(const char *path, const toplu_node_profile_t *nodes, int n,
                                         const toplu_profile_info_t *info, toplu_error_t *err) {
  toplu_error_clear(err);
  if (!path || (!nodes && n > 0))
    return toplu__errorf(err, TOPLU_ERR_INVALID_ARGUMENT, "toplu_profile_write_trace: NULL %s", path ? "nodes" : "path");
  if (n < 0) return toplu__errorf(err, TOPLU_ERR_INVALID_ARGUMENT, "toplu_profile_write_trace: %d steps", n);
  char *s = toplu_profile_trace_json(nodes, n, info);
  if (!s) return toplu__errorf(err, TOPLU_ERR_OUT_OF_MEMORY, "out of memory for the trace of %d steps", n);
  FILE *f = fopen(path, "w");
  if (!f) {
    free(s);
    return toplu__errorf(err, TOPLU_ERR_IO, "cannot write the trace %s: %s", path, strerror(errno));
  }
  int bad = fputs(s, f) < 0 || fputc('\n', f) == EOF;
  bad |= fclose(f) != 0;
  free(s);
  if (bad) return toplu__errorf(err, TOPLU_ERR_IO, "cannot write the trace %s: %s", path, strerror(errno));
  return TOPLU_OK;
}

toplu_status_t toplu_session_write_trace(toplu_session_t *s, const toplu_tensor_t *inputs, int n_inputs,
                                         const toplu_profile_info_t *info, const char *path, toplu_error_t *err) {
  toplu_error_clear(err);
  if (!s || !path || (!inputs && n_inputs))
    return toplu__errorf(err, TOPLU_ERR_INVALID_ARGUMENT, "toplu_session_write_trace: NULL argument");
  int n = toplu_session_profile(s, inputs, n_inputs, NULL, 0);
  toplu_node_profile_t *nodes = n > 0 ? calloc((size_t)n, sizeof *nodes) : NULL;
  if (n > 0 && !nodes) return toplu__errorf(err, TOPLU_ERR_OUT_OF_MEMORY, "out of memory for a profile of %d steps", n);
  if (n > 0) n = toplu_session_profile(s, inputs, n_inputs, nodes, n);
  if (n <= 0 || nodes[0].runs == 0) {
    free(nodes);
    return toplu__errorf(err, TOPLU_ERR_INVALID_ARGUMENT,
                         "no profile to write: the session needs options.profile and a run at these input shapes");
  }
  toplu_profile_info_t fi = info ? *info : (toplu_profile_info_t){0};
  if (!fi.batch && n_inputs > 0 && inputs[0].ndim > 0) fi.batch = inputs[0].dims[0];
  if (!fi.threads) fi.threads = toplu_session_threads(s);
  if (!(fi.peak_gflops > 0)) fi.peak_gflops = toplu_cpu_fp32_peak_gflops(fi.threads);
  toplu_status_t st = toplu_profile_write_trace(path, nodes, n, &fi, err);
  free(nodes);
  return st;
}

int toplu_profile_top(const toplu_node_profile_t *nodes, int n, double peak_gflops, toplu_profile_top_t *top, int cap) {
  if (!nodes || !top || cap <= 0 || n <= 0) return 0;
  double total = 0;
  for (int i = 0; i < n; i++) total += nodes[i].ran ? nodes[i].last_us : 0;
  int k = 0;
  for (int i = 0; i < n; i++) {
    const toplu_node_profile_t *p = &nodes[i];
    if (!p->ran) continue;
    double us = p->last_us;
    int at = k < cap ? k : cap; /* insertion into the kept slowest, slowest first; ties keep run order */
    while (at > 0 && top[at - 1].ms * 1e3 < us) at--;
    if (at >= cap) continue;
    int last = k < cap ? k : cap - 1;
    memmove(&top[at + 1], &top[at], (size_t)(last - at) * sizeof *top);
    toplu_profile_top_t *t = &top[at];
    t->step = i;
    t->name = p->name;
    t->op_type = p->op_type;
    t->impl = p->impl;
    t->ms = us / 1e3;
    t->share = total > 0 ? us / total : 0;
    t->gflops_per_s = giga_rate(p->flops, us);
    t->gb_per_s = giga_rate(p->bytes_moved, us);
    t->peak_share = peak_gflops > 0 && isfinite(peak_gflops) ? t->gflops_per_s / peak_gflops : 0;
    if (k < cap) k++;
  }
  return k;
}
