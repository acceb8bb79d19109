/*
 * tune/tune.c - toplu_tune_model: the batch-size sweep (public API and
 * method in toplu/tuner.h).
 */
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/error.h"
#include "core/file.h"
#include "runtime/model_internal.h"
#include "core/identity.h"
#include "core/log.h"
#include "plan/device.h"
#include "toplu/profile.h"
#include "plan/memory.h"
#include "plan/plan_report.h"
#include "plan/shapes.h"
#include "toplu/npy.h"
#include "toplu/tuner.h"
#include "tune/measure.h"

#define RECOMMEND_WITHIN 0.97

void toplu_tune_options_init(toplu_tune_options_t *o) {
  if (!o) return;
  memset(o, 0, sizeof *o);
  o->max_seconds_per_batch = 10;
  o->max_seconds = 600;
  o->max_batch = 4096;
  o->plateau = 0.05;
}

const char *toplu_tune_status_name(toplu_tune_status_t s) {
  switch (s) {
    case TOPLU_TUNE_OK: return "ok";
    case TOPLU_TUNE_OOM: return "oom";
    case TOPLU_TUNE_OVER_BUDGET: return "over_budget";
    default: return "unknown";
  }
}

static void tnote(toplu_tune_result_t *r, const char *fmt, ...) TOPLU_PRINTF(2, 3);
static void tnote(toplu_tune_result_t *r, const char *fmt, ...) {
  if (r->n_notes >= TOPLU_PLAN_MAX_NOTES) { /* full: say so in the last one rather than drop notes silently */
    snprintf(r->notes[TOPLU_PLAN_MAX_NOTES - 1], sizeof r->notes[0],
             "more notes than the %d kept (TOPLU_PLAN_MAX_NOTES): the later ones are not shown", TOPLU_PLAN_MAX_NOTES);
    return;
  }
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(r->notes[r->n_notes++], sizeof r->notes[0], fmt, ap);
  va_end(ap);
}

void toplu_tune_result_free(toplu_tune_result_t *r) {
  if (!r) return;
  free(r->rows);
  free(r->probe_batch);
  free(r->probe_fits);
  free(r->ops);
  free(r->events);
  free(r->trace_json);
  free(r);
}

/* Make room for one more of n entries of size each at *a (capacity *cap); 0 or -1. */
static int grow(void **a, int *cap, int n, size_t size) {
  if (n < *cap) return 0;
  int nc = *cap ? *cap * 2 : 16;
  void *p = realloc(*a, (size_t)nc * size);
  if (!p) return -1;
  *a = p;
  *cap = nc;
  return 0;
}

/* Append a measured row (kept sorted by batch size). */
static toplu_status_t add_row(tune_ctx_t *c, toplu_tune_result_t *r, const toplu_tune_row_t *row, toplu_error_t *err) {
  void *rows = r->rows;
  if (grow(&rows, &c->rows_cap, r->n_rows, sizeof *r->rows))
    return toplu__errorf(err, TOPLU_ERR_OUT_OF_MEMORY, "out of memory recording batch %lld", (long long)row->batch_size);
  r->rows = rows;
  int i = r->n_rows;
  while (i > 0 && r->rows[i - 1].batch_size > row->batch_size) {
    r->rows[i] = r->rows[i - 1];
    i--;
  }
  r->rows[i] = *row;
  r->n_rows++;
  return TOPLU_OK;
}

/* One line per finished size for the caller's log. */
static void report_row(tune_ctx_t *c, const toplu_tune_row_t *row, int probe) {
  toplu_log_fn f = c->o->log;
  void *u = c->o->log_user;
  if (probe)
    toplu__logf(f, u, TOPLU_LOG_NOTE, "batch %lld: %s (fit test)", (long long)row->batch_size,
                row->status == TOPLU_TUNE_OOM ? "does not fit" : "fits");
  else if (row->status == TOPLU_TUNE_OOM)
    toplu__logf(f, u, TOPLU_LOG_NOTE, "batch %lld: out of memory (%s)", (long long)row->batch_size, row->message);
  else
    toplu__logf(f, u, TOPLU_LOG_NOTE, "batch %lld: %s, %.1f inferences/s, p50 %.2f ms, p99 %.2f ms (%lld run%s, %.1f s%s)",
                (long long)row->batch_size, toplu_tune_status_name(row->status), row->throughput, row->p50_ms,
                row->p99_ms, (long long)row->runs, row->runs == 1 ? "" : "s", row->seconds,
                row->stable ? "" : ", not stable at the time cap");
}

/* Record a fit test. */
static toplu_status_t add_probe(tune_ctx_t *c, toplu_tune_result_t *r, int64_t b, int fits, toplu_error_t *err) {
  void *pb = r->probe_batch, *pf = r->probe_fits;
  int cap_b = c->probes_cap, cap_f = c->probes_cap;
  if (grow(&pb, &cap_b, r->n_probes, sizeof *r->probe_batch)) return toplu__errorf(err, TOPLU_ERR_OUT_OF_MEMORY, "out of memory");
  r->probe_batch = pb;
  if (grow(&pf, &cap_f, r->n_probes, sizeof *r->probe_fits)) return toplu__errorf(err, TOPLU_ERR_OUT_OF_MEMORY, "out of memory");
  r->probe_fits = pf;
  c->probes_cap = cap_f;
  r->probe_batch[r->n_probes] = b;
  r->probe_fits[r->n_probes] = fits;
  r->n_probes++;
  return TOPLU_OK;
}

/* Read the input files (options' inputs) and derive shapes for their inputs. */
static toplu_status_t load_inputs(tune_ctx_t *c, const toplu_tune_options_t *o, toplu_input_shape_t *shapes,
                                  int *n_shapes, toplu_error_t *err) {
  const toplu_model_t *m = c->model;
  for (int k = 0; k < o->n_inputs; k++) {
    if (!o->inputs[k].name || !o->inputs[k].path)
      return toplu__errorf(err, TOPLU_ERR_INVALID_ARGUMENT, "inputs[%d]: name and path must not be NULL", k);
    int i = toplu_model_input_index(m, o->inputs[k].name);
    if (i < 0)
      return toplu__errorf(err, TOPLU_ERR_NOT_FOUND, "inputs: %s=%s: the model has no input '%s'", o->inputs[k].name,
                          o->inputs[k].path, o->inputs[k].name);
    if (c->data[i].data)
      return toplu__errorf(err, TOPLU_ERR_INVALID_ARGUMENT, "inputs: %s given twice", o->inputs[k].name);
    { /* a FIFO, device or socket would block the open or never end (opened without blocking to look) */
      int fd = open(o->inputs[k].path, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
      struct stat sb;
      if (fd >= 0 && fstat(fd, &sb) == 0 && !S_ISREG(sb.st_mode) && !S_ISDIR(sb.st_mode)) {
        close(fd);
        return toplu__errorf(err, TOPLU_ERR_INVALID_ARGUMENT,
                            "inputs: %s=%s: %s is %s; toplu reads only regular files (write the array to a .npy file)",
                            o->inputs[k].name, o->inputs[k].path, o->inputs[k].path, toplu__file_kind((unsigned)sb.st_mode));
      }
      if (fd >= 0) close(fd);
    }
    toplu_status_t st = toplu_npy_read(o->inputs[k].path, &c->data[i], err);
    if (st) return st;
    const toplu_value_info_t *v = toplu_model_input(m, i);
    if (v->dtype != TOPLU_DTYPE_UNDEFINED && c->data[i].dtype != v->dtype)
      return toplu__errorf(err, TOPLU_ERR_SHAPE, "inputs: %s=%s: dtype %s, the model expects %s", v->name,
                          o->inputs[k].path, toplu_dtype_name(c->data[i].dtype), toplu_dtype_name(v->dtype));
    if (v->ndim >= 0 && c->data[i].ndim != v->ndim) /* said here: the shapes derived from the file would blame shapes */
      return toplu__errorf(err, TOPLU_ERR_SHAPE, "inputs: %s=%s: the file has %d dims, the model's input has rank %d",
                          v->name, o->inputs[k].path, c->data[i].ndim, v->ndim);
    /* A dim the model fixes (dim 0 aside where it is the batch), likewise named after the file */
    for (int d = 0; v->ndim >= 0 && d < v->ndim; d++) {
      int batch_dim = d == 0 && (toplu_model_fixed_batch(m) || v->dims[0] < 0);
      if (!batch_dim && v->dims[d] >= 0 && c->data[i].dims[d] != v->dims[d]) {
        char a[128];
        return toplu__errorf(err, TOPLU_ERR_SHAPE,
                            "inputs: %s=%s: the file's array is %s: dim %d is %lld, the model fixes it to %lld", v->name,
                            o->inputs[k].path, toplu_shape_format(c->data[i].ndim, c->data[i].dims, a, sizeof a), d,
                            (long long)c->data[i].dims[d], (long long)v->dims[d]);
      }
    }
    int given = 0;
    for (int s = 0; s < *n_shapes; s++) given |= !strcmp(shapes[s].name, v->name);
    if (!given) { /* room: the caller's shapes array has n_shapes + n_inputs entries */
      shapes[*n_shapes].name = v->name;
      shapes[*n_shapes].ndim = c->data[i].ndim;
      memcpy(shapes[*n_shapes].dims, c->data[i].dims, sizeof shapes[0].dims);
      (*n_shapes)++;
    }
  }
  return TOPLU_OK;
}

/* Check that input files fit the resolved shapes (non-batch dims). */
static toplu_status_t check_data(tune_ctx_t *c, toplu_error_t *err) {
  for (int i = 0; i < c->n_in; i++) {
    const toplu_tensor_t *d = &c->data[i], *s = &c->shapes.base[i];
    if (!d->data) continue;
    int ok = d->ndim == s->ndim;
    for (int k = 0; ok && k < s->ndim; k++)
      if (!(k == 0 && c->shapes.batched[i]) && d->dims[k] != s->dims[k]) ok = 0;
    if (ok && c->shapes.batched[i] && d->dims[0] < 1)
      return toplu__errorf(err, TOPLU_ERR_SHAPE, "input '%s': the file has no rows (shape %s): give it at least one",
                          toplu_model_input(c->model, i)->name, toplu_shape_format(d->ndim, d->dims, (char[128]){0}, 128));
    if (!ok) {
      char a[128], b[128];
      return toplu__errorf(err, TOPLU_ERR_SHAPE, "input '%s': the file's shape %s does not fit %s",
                          toplu_model_input(c->model, i)->name, toplu_shape_format(d->ndim, d->dims, a, sizeof a),
                          toplu_shape_format(s->ndim, s->dims, b, sizeof b));
    }
  }
  return TOPLU_OK;
}

/* Profile the chosen batch size in a session of its own. */
static toplu_status_t profile_batch(tune_ctx_t *c, toplu_tune_result_t *r, int64_t b, toplu_error_t *err) {
  toplu_session_options_t so;
  toplu_session_options_init(&so);
  so.threads = c->o->threads;
  so.batch_override = c->shapes.fixed_batch;
  so.profile = 1;
  so.choose_kernels = -1; /* the plan the sweep measured */
  toplu_session_t *s = NULL;
  toplu_status_t st = toplu_session_create(c->model, &so, &s, err);
  if (st) return st;
  toplu_tensor_t *in = calloc((size_t)c->n_in + 1, sizeof *in), *out = calloc((size_t)c->n_out + 1, sizeof *out);
  toplu_node_profile_t *nodes = NULL;
  if (!in || !out) {
    st = toplu__errorf(err, TOPLU_ERR_OUT_OF_MEMORY, "out of memory");
    goto done;
  }
  toplu__batch_shapes_at(&c->shapes, b, in);
  uint64_t seed = 7;
  for (int i = 0; i < c->n_in; i++) {
    toplu_tensor_t t = in[i];
    if (toplu_tensor_alloc(&in[i], t.dtype, t.ndim, t.dims)) {
      st = toplu__errorf(err, TOPLU_ERR_OUT_OF_MEMORY, "out of memory for the profile's inputs");
      goto done;
    }
    (void)seed;
    if (c->data[i].data) {
      size_t have = toplu_tensor_nbytes(&c->data[i]), bytes = toplu_tensor_nbytes(&in[i]);
      size_t row = c->shapes.batched[i] && c->data[i].dims[0] > 0 ? have / (size_t)c->data[i].dims[0] : have;
      for (size_t off = 0; row && off < bytes; off += row)
        memcpy((char *)in[i].data + off, (const char *)c->data[i].data + ((off / row) * row) % have,
               off + row <= bytes ? row : bytes - off);
    }
  }
  double t0 = toplu__tune_now();
  int runs = 0;
  while (runs < 3 || (toplu__tune_now() - t0 < 1.0 && runs < 50)) {
    for (int j = 0; j < c->n_out; j++) toplu_tensor_free(&out[j]);
    if ((st = toplu_session_run(s, in, c->n_in, out, c->n_out))) {
      st = toplu__errorf(err, st, "profiling batch %lld: %s", (long long)b, toplu_session_last_error(s));
      goto done;
    }
    runs++;
  }
  int n = toplu_session_profile(s, in, c->n_in, NULL, 0);
  nodes = calloc((size_t)n + 1, sizeof *nodes);
  r->events = calloc((size_t)n + 1, sizeof *r->events);
  r->ops = calloc((size_t)n + 1, sizeof *r->ops);
  if (!nodes || !r->events || !r->ops) {
    st = toplu__errorf(err, TOPLU_ERR_OUT_OF_MEMORY, "out of memory");
    goto done;
  }
  n = toplu_session_profile(s, in, c->n_in, nodes, n);
  int threads = toplu_session_threads(s);
  toplu_profile_info_t pi = {.model = r->model, .batch = b, .threads = threads,
                             .peak_gflops = toplu_cpu_fp32_peak_gflops(threads)};
  free(r->trace_json);
  if (!(r->trace_json = toplu_profile_trace_json(nodes, n, &pi))) {
    st = toplu__errorf(err, TOPLU_ERR_OUT_OF_MEMORY, "out of memory for the profile's trace");
    goto done;
  }
  double total = 0;
  for (int k = 0; k < n; k++) {
    toplu_tune_event_t *e = &r->events[r->n_events++];
    snprintf(e->name, sizeof e->name, "%s", nodes[k].name ? nodes[k].name : "");
    snprintf(e->op_type, sizeof e->op_type, "%s", nodes[k].op_type ? nodes[k].op_type : "");
    e->start_us = nodes[k].start_us;
    e->dur_us = nodes[k].last_us;
    e->flops = nodes[k].flops;
    total += nodes[k].total_us;
    int o = 0;
    while (o < r->n_ops && strcmp(r->ops[o].op_type, e->op_type)) o++;
    if (o == r->n_ops) snprintf(r->ops[r->n_ops++].op_type, sizeof r->ops[0].op_type, "%s", e->op_type);
    r->ops[o].total_ms += nodes[k].total_us / 1e3;
    r->ops[o].nodes++;
  }
  for (int o = 0; o < r->n_ops; o++) r->ops[o].share = total > 0 ? r->ops[o].total_ms * 1e3 / total : 0;
  for (int a = 1; a < r->n_ops; a++) /* by time, descending */
    for (int k = a; k > 0 && r->ops[k].total_ms > r->ops[k - 1].total_ms; k--) {
      toplu_tune_op_t x = r->ops[k];
      r->ops[k] = r->ops[k - 1];
      r->ops[k - 1] = x;
    }
  r->profile_batch_size = b;
done:
  free(nodes);
  for (int i = 0; in && i < c->n_in; i++) toplu_tensor_free(&in[i]);
  for (int j = 0; out && j < c->n_out; j++) toplu_tensor_free(&out[j]);
  free(in);
  free(out);
  toplu_session_destroy(s);
  return st;
}

/* Measure b fully, record and report it. */
static toplu_status_t measure_row(tune_ctx_t *c, toplu_tune_result_t *r, int64_t b, toplu_tune_row_t *row,
                                  toplu_error_t *err) {
  toplu__logf(c->o->log, c->o->log_user, TOPLU_LOG_PROGRESS, "batch %lld: measuring ...", (long long)b);
  toplu_status_t st = toplu__tune_measure(c, b, 1, row, err);
  if (st) return st;
  if ((st = add_row(c, r, row, err))) return st;
  report_row(c, row, 0);
  if (row->status == TOPLU_TUNE_OOM) {
    if (!r->smallest_oom_batch_size || b < r->smallest_oom_batch_size) r->smallest_oom_batch_size = b;
  } else if (b > r->max_fitting_batch_size) {
    r->max_fitting_batch_size = b;
  }
  return TOPLU_OK;
}

/* Binary search for the largest size that fits between good (fits) and bad (does not). */
static toplu_status_t bisect(tune_ctx_t *c, toplu_tune_result_t *r, int64_t good, int64_t bad, int64_t *best,
                             toplu_error_t *err) {
  while (bad - good > 1) {
    if (c->o->max_seconds > 0 && toplu__tune_now() - c->t_start > c->o->max_seconds) break;
    int64_t mid = good + (bad - good) / 2;
    toplu_tune_row_t row;
    toplu_status_t st = toplu__tune_measure(c, mid, 0, &row, err);
    if (st) return st;
    if ((st = add_probe(c, r, mid, row.status != TOPLU_TUNE_OOM, err))) return st;
    report_row(c, &row, 1);
    if (row.status == TOPLU_TUNE_OOM) bad = mid;
    else good = mid;
  }
  *best = good;
  if (!r->smallest_oom_batch_size || bad < r->smallest_oom_batch_size) r->smallest_oom_batch_size = bad;
  return TOPLU_OK;
}

/* The automatic sweep. */
static toplu_status_t sweep_auto(tune_ctx_t *c, toplu_tune_result_t *r, toplu_error_t *err) {
  const toplu_tune_options_t *o = c->o;
  const toplu_tune_row_t *last_ok = NULL;
  toplu_tune_row_t row;
  int64_t b = 1;
  for (;;) {
    /* Doubling past max_batch: max_batch itself is the last size (1, 2, then 3 for max_batch 3) */
    if (b > o->max_batch && last_ok && last_ok->batch_size < o->max_batch) b = o->max_batch;
    if (b > o->max_batch || (last_ok && last_ok->batch_size == o->max_batch)) {
      snprintf(r->stop_reason, sizeof r->stop_reason, "reached max_batch %lld", (long long)o->max_batch);
      break;
    }
    if (!c->shapes.batchable && b > 1) {
      snprintf(r->stop_reason, sizeof r->stop_reason, "the model cannot batch: batch 1 is its one useful answer");
      break;
    }
    /* the first size is measured whatever the time: a limit shorter than the setup would leave no result */
    if (o->max_seconds > 0 && r->n_rows > 0 && toplu__tune_now() - c->t_start > o->max_seconds) {
      snprintf(r->stop_reason, sizeof r->stop_reason, "time limit of %.3g s reached", o->max_seconds);
      break;
    }
    toplu_status_t st = measure_row(c, r, b, &row, err);
    if (st) return st;
    if (row.status == TOPLU_TUNE_OOM) {
      if (!last_ok) {
        snprintf(r->stop_reason, sizeof r->stop_reason, "batch 1 does not fit the memory limit");
        break;
      }
      int64_t good = last_ok->batch_size, best = good;
      double last_thr = last_ok->throughput;
      if ((st = bisect(c, r, good, b, &best, err))) return st;
      if (best > good) {
        if ((st = measure_row(c, r, best, &row, err))) return st;
        (void)last_thr;
      }
      snprintf(r->stop_reason, sizeof r->stop_reason,
               "memory limit: batch %lld does not fit; %lld is the largest that does (binary search)",
               (long long)r->smallest_oom_batch_size, (long long)r->max_fitting_batch_size);
      break;
    }
    if (row.status == TOPLU_TUNE_OVER_BUDGET) {
      snprintf(r->stop_reason, sizeof r->stop_reason, "latency budget: p99 %.2f ms at batch %lld is over %.3g ms",
               row.p99_ms, (long long)b, o->latency_budget_ms);
      break;
    }
    if (last_ok && o->plateau > 0 && row.throughput < (1 + o->plateau) * last_ok->throughput) {
      snprintf(r->stop_reason, sizeof r->stop_reason,
               "plateau: batch %lld gives %.1f inferences/s, less than %.0f%% over batch %lld's %.1f", (long long)b,
               row.throughput, 100 * o->plateau, (long long)last_ok->batch_size, last_ok->throughput);
      break;
    }
    /* rows move as they are sorted in: find ours again */
    for (int i = 0; i < r->n_rows; i++)
      if (r->rows[i].batch_size == b) last_ok = &r->rows[i];
    b *= 2;
  }
  return TOPLU_OK;
}

/* An explicit list: every size, oom or not. */
static toplu_status_t sweep_list(tune_ctx_t *c, toplu_tune_result_t *r, toplu_error_t *err) {
  const toplu_tune_options_t *o = c->o;
  int skipped = 0, one = 0;
  for (int i = 0; i < o->n_batch_sizes; i++) {
    int64_t b = o->batch_sizes[i];
    /* a model without a batch dim runs its own shape whatever the size asked: measuring "batch 8" timed that
     * one run and called it 8 rows (a fresh user's finding, 2026-12-05) */
    if (!c->shapes.batchable && b > 1) {
      skipped++;
      continue;
    }
    one |= b == 1;
    int dup = 0;
    for (int k = 0; k < r->n_rows; k++) dup |= r->rows[k].batch_size == b;
    if (dup) continue;
    if (o->max_seconds > 0 && r->n_rows > 0 && toplu__tune_now() - c->t_start > o->max_seconds) {
      snprintf(r->stop_reason, sizeof r->stop_reason, "time limit of %.3g s reached before batch %lld",
               o->max_seconds, (long long)b);
      return TOPLU_OK;
    }
    toplu_tune_row_t row;
    toplu_status_t st = measure_row(c, r, b, &row, err);
    if (st) return st;
  }
  if (skipped) {
    tnote(r, "%d listed size%s above 1 not measured: the model has no batch dim (%s), so a run takes its own shape "
             "whatever the batch; batch 1 is that run",
          skipped, skipped == 1 ? "" : "s", c->shapes.desc);
    if (!one) {
      toplu_tune_row_t row;
      toplu_status_t st = measure_row(c, r, 1, &row, err);
      if (st) return st;
    }
  }
  snprintf(r->stop_reason, sizeof r->stop_reason, skipped ? "measured the model's one size" : "measured every listed size");
  return TOPLU_OK;
}

void toplu__tune_recommend(toplu_tune_result_t *r) {
  double best = 0;
  for (int i = 0; i < r->n_rows; i++)
    if (r->rows[i].status == TOPLU_TUNE_OK && r->rows[i].throughput > best) best = r->rows[i].throughput;
  r->recommended_batch_size = 0;
  for (int i = 0; i < r->n_rows && best > 0; i++)
    if (r->rows[i].status == TOPLU_TUNE_OK && r->rows[i].throughput >= RECOMMEND_WITHIN * best) {
      r->recommended_batch_size = r->rows[i].batch_size;
      break;
    }
  /* Nothing within the budget: the size with the lowest p99 is the one useful answer. */
  if (!r->recommended_batch_size) {
    const toplu_tune_row_t *low = NULL;
    for (int i = 0; i < r->n_rows; i++)
      if (r->rows[i].status == TOPLU_TUNE_OVER_BUDGET && (!low || r->rows[i].p99_ms < low->p99_ms)) low = &r->rows[i];
    if (low) {
      r->recommended_batch_size = low->batch_size;
      tnote(r, "no size met the latency budget at p99; batch %lld has the lowest p99 (%.3g ms)",
            (long long)low->batch_size, low->p99_ms);
    }
  }
}

toplu_status_t toplu_tune_model(const toplu_model_t *m, const toplu_tune_options_t *opts, toplu_tune_result_t **out,
                                toplu_error_t *err) {
  toplu_error_clear(err);
  toplu_tune_options_t defaults;
  if (!opts) {
    toplu_tune_options_init(&defaults);
    opts = &defaults;
  }
  if (!m || !out) return toplu__errorf(err, TOPLU_ERR_INVALID_ARGUMENT, "toplu_tune_model: NULL argument");
  *out = NULL;
  if (opts->threads < 0)
    return toplu__errorf(err, TOPLU_ERR_INVALID_ARGUMENT, "threads must be >= 0 (0: all), got %d", opts->threads);
  if (!(opts->max_seconds_per_batch > 0))
    return toplu__errorf(err, TOPLU_ERR_INVALID_ARGUMENT, "max_seconds_per_batch must be > 0 s, got %g",
                        opts->max_seconds_per_batch);
  if (opts->max_seconds < 0)
    return toplu__errorf(err, TOPLU_ERR_INVALID_ARGUMENT, "max_seconds must be >= 0 s (0: no limit), got %g",
                        opts->max_seconds);
  if (opts->max_batch < 1)
    return toplu__errorf(err, TOPLU_ERR_INVALID_ARGUMENT, "max_batch must be >= 1, got %lld", (long long)opts->max_batch);
  if (!(opts->latency_budget_ms >= 0))
    return toplu__errorf(err, TOPLU_ERR_INVALID_ARGUMENT, "latency_budget_ms must be >= 0 (0: none), got %g",
                        opts->latency_budget_ms);
  if (!(opts->plateau >= 0))
    return toplu__errorf(err, TOPLU_ERR_INVALID_ARGUMENT, "plateau must be >= 0 (0: never stop at one), got %g",
                        opts->plateau);
  if (opts->n_batch_sizes < 0 || opts->n_inputs < 0 || opts->n_shapes < 0 ||
      (opts->n_batch_sizes && !opts->batch_sizes) || (opts->n_inputs && !opts->inputs) ||
      (opts->n_shapes && !opts->shapes))
    return toplu__errorf(err, TOPLU_ERR_INVALID_ARGUMENT,
                        "n_batch_sizes, n_inputs and n_shapes must be >= 0, with their arrays when > 0");
  for (int i = 0; i < opts->n_batch_sizes; i++)
    if (opts->batch_sizes[i] < 1)
      return toplu__errorf(err, TOPLU_ERR_INVALID_ARGUMENT, "batch_sizes: %lld is not a batch size",
                          (long long)opts->batch_sizes[i]);
  {
    char why[600];
    if (toplu__model_nonnumeric_io(m, why, sizeof why)) /* measured on random numbers */
      return toplu__errorf(err, TOPLU_ERR_UNSUPPORTED, "%s: %s; tune measures models of numeric tensors only",
                          toplu_model_path(m), why);
  }
  tune_ctx_t c;
  memset(&c, 0, sizeof c);
  c.model = m;
  c.o = opts;
  c.t_start = toplu__tune_now();
  c.n_in = toplu_model_input_count(m);
  c.n_out = toplu_model_output_count(m);
  toplu_status_t st = TOPLU_OK;
  toplu_tune_result_t *r = calloc(1, sizeof *r);
  c.data = calloc((size_t)c.n_in + 1, sizeof *c.data);
  /* The given shapes, then one per input file (load_inputs). */
  toplu_input_shape_t *shapes = calloc((size_t)(opts->n_shapes > 0 ? opts->n_shapes : 0) +
                                           (size_t)(opts->n_inputs > 0 ? opts->n_inputs : 0) + 1,
                                       sizeof *shapes);
  int n_shapes = 0;
  if (!r || !c.data || !shapes) {
    free(r);
    free(c.data);
    free(shapes);
    return toplu__errorf(err, TOPLU_ERR_OUT_OF_MEMORY, "out of memory");
  }
  snprintf(r->model, sizeof r->model, "%s", toplu_model_path(m));
  {
    toplu__file_identity_t id;
    toplu_error_t ierr;
    if (toplu__file_identity(r->model, TOPLU__IDENTITY_WHOLE, &id, &ierr) == TOPLU_OK) {
      r->model_bytes = id.bytes;
      r->model_fnv1a64 = id.hash;
      r->model_hashed = 1;
    } else {
      tnote(r, "the model file could not be read to record its identity (%s): readers of tune.json cannot check it",
            ierr.message);
    }
    snprintf(r->model_file, sizeof r->model_file, "%s", id.file);
  }
  r->automatic = opts->n_batch_sizes == 0;
  r->latency_budget_ms = opts->latency_budget_ms;
  r->memory_limit_bytes = opts->memory_limit_bytes;
  for (int k = 0; k < opts->n_shapes; k++) shapes[n_shapes++] = opts->shapes[k];
  if ((st = load_inputs(&c, opts, shapes, &n_shapes, err))) goto fail;
  if ((st = toplu__batch_shapes_init(m, shapes, n_shapes, &c.shapes, err))) goto fail;
  if ((st = check_data(&c, err))) goto fail;
  snprintf(r->inputs, sizeof r->inputs, "%s", c.shapes.desc);
  r->batchable = c.shapes.batchable;
  if (c.shapes.note[0]) tnote(r, "%s", c.shapes.note);
  if ((st = toplu_device_lookup("cpu", opts->threads, &r->device, err))) goto fail;
  r->threads = r->device.threads;
  if ((st = toplu_allocator_create(0, &c.alloc))) {
    toplu__errorf(err, st, "out of memory");
    goto fail;
  }
  {
    toplu_session_options_t so;
    toplu_session_options_init(&so);
    so.allocator = c.alloc;
    so.threads = r->threads;
    so.batch_override = c.shapes.fixed_batch;
    so.max_plans = 2;
    so.choose_threads = -1; /* measured at r->threads on the whole batch, as the planner predicts */
    so.choose_kernels = -1; /* the kernels the planner's plans have */
    if ((st = toplu_session_create(m, &so, &c.session, err))) goto fail;
  }
  /* Constants the plan reads in place: what batch 1's plan reports as
   * weights and kernel state beyond what it took from the allocator. */
  {
    toplu__plan_point_t p1;
    if ((st = toplu__plan_point_build(c.session, &c.shapes, 1, 0, &p1, err))) goto fail;
    double held = (double)toplu_allocator_current(c.alloc);
    double ip = (double)p1.r.weights_bytes + (double)p1.r.kernel_bytes - held;
    c.in_place = ip > 0 ? (uint64_t)ip : 0;
    if (c.in_place > p1.r.weights_bytes) c.in_place = p1.r.weights_bytes;
    if (p1.r.per_sample) tnote(r, "the model runs one row at a time: batching only adds I/O buffers");
    toplu__plan_point_free(&p1);
    toplu_session_clear_plans(c.session);
    r->in_place_bytes = c.in_place;
  }
  if (c.shapes.batchable && c.shapes.fixed_batch) {
    toplu__plan_point_t p2;
    if ((st = toplu__plan_point_build(c.session, &c.shapes, 2, 0, &p2, err))) goto fail;
    if (p2.r.per_sample) tnote(r, "the model's file fixes batch 1 and it runs one row at a time: batching only adds I/O");
    toplu__plan_point_free(&p2);
    toplu_session_clear_plans(c.session);
  }
  if (opts->memory_limit_bytes) {
    uint64_t lim = opts->memory_limit_bytes > c.in_place ? opts->memory_limit_bytes - c.in_place : 1;
    toplu_allocator_set_limit(c.alloc, (size_t)lim);
    toplu_planner_options_t po;
    toplu_planner_options_init(&po);
    po.memory_bytes = opts->memory_limit_bytes;
    po.mem_fraction = 1.0;
    po.threads = r->threads;
    po.shapes = c.shapes.n_inputs ? shapes : NULL;
    po.n_shapes = n_shapes;
    toplu_batch_plan_t *bp = NULL;
    toplu_error_t perr;
    if (toplu_plan_model(m, &po, &bp, &perr) == TOPLU_OK) r->planned_max_batch_size = bp->max_batch_size;
    toplu_batch_plan_free(bp);
  }
  c.lm.peak_flops = r->device.peak_flops[TOPLU_PRECISION_FP32];
  c.lm.int8_peak_flops = r->device.peak_flops[TOPLU_PRECISION_INT8]; /* an int8 model's integer steps, as plan */
  c.lm.bandwidth = r->device.bandwidth;
  c.lm.bytes_scale = 1;
  c.lm.node_overhead_s = r->device.node_overhead_us * 1e-6;
  c.lm.efficiency = 1;
  c.lm.intercept_s = -1;

  st = r->automatic ? sweep_auto(&c, r, err) : sweep_list(&c, r, err);
  if (st) goto fail;
  toplu__tune_recommend(r);
  if (opts->profile && r->recommended_batch_size > 0) {
    toplu_error_t perr;
    if (profile_batch(&c, r, r->recommended_batch_size, &perr))
      tnote(r, "profile not taken: %s", perr.message);
  }
  {
    int creep = 0;
    for (int i = 0; i < r->n_rows; i++) creep |= r->rows[i].after_bytes != 0;
    if (creep) tnote(r, "memory did not return to its baseline after every size (see after_bytes)");
  }
  /* Impossible settings. Without memory_limit_bytes the limit is the machine's (or its cgroup's): "memory limit 0
   * bytes" said nothing true (a fresh user's finding of 2026-12-06). */
  char lim_words[96];
  if (opts->memory_limit_bytes) {
    char a[32];
    snprintf(lim_words, sizeof lim_words, "memory limit %llu bytes (%s)", (unsigned long long)opts->memory_limit_bytes,
             toplu__fmt_bytes((double)opts->memory_limit_bytes, a, sizeof a));
  } else {
    snprintf(lim_words, sizeof lim_words, "the memory available (no memory_limit_bytes given)");
  }
  const toplu_tune_row_t *first = r->n_rows ? &r->rows[0] : NULL;
  if (first && first->batch_size == 1 && first->status == TOPLU_TUNE_OOM) {
    char b[32];
    if (first->predicted_bytes)
      st = toplu__errorf(err, TOPLU_ERR_INVALID_ARGUMENT,
                        "%s is below what batch 1 needs: %llu bytes (%s) predicted for "
                        "weights, activations, workspace, I/O and kernel state (it ran out at: %s)",
                        lim_words, (unsigned long long)first->predicted_bytes,
                        toplu__fmt_bytes((double)first->predicted_bytes, b, sizeof b), first->message);
    else
      st = toplu__errorf(err, TOPLU_ERR_INVALID_ARGUMENT, "%s is below what batch 1 needs (it ran out at: %s)",
                        lim_words, first->message);
    *out = r;
    goto cleanup;
  }
  /* Over the budget at p99 is a result (over_budget); a budget below even the fastest batch-1 run is impossible. */
  if (first && first->batch_size == 1 && first->status == TOPLU_TUNE_OVER_BUDGET &&
      first->min_ms > opts->latency_budget_ms) {
    st = toplu__errorf(err, TOPLU_ERR_INVALID_ARGUMENT,
                      "latency budget %.3g ms is below batch 1's fastest measured run, %.3g ms (p50 %.3g ms, p99 "
                      "%.3g ms): no batch size meets it",
                      opts->latency_budget_ms, first->min_ms, first->p50_ms, first->p99_ms);
    *out = r;
    goto cleanup;
  }
  /* A list of sizes without 1 where every size ran out of memory: as impossible as batch 1 running out (the
   * result would recommend no size, and exit as a success; fresh-user finding of 2026-12-05) */
  if (first && r->recommended_batch_size <= 0) {
    const toplu_tune_row_t *least = NULL;
    int all_oom = 1;
    for (int i = 0; i < r->n_rows; i++) {
      all_oom &= r->rows[i].status == TOPLU_TUNE_OOM;
      if (!least || r->rows[i].batch_size < least->batch_size) least = &r->rows[i];
    }
    if (all_oom) {
      st = toplu__errorf(err, TOPLU_ERR_INVALID_ARGUMENT,
                        "%s is below what every listed batch size needs: the smallest, %lld, ran out at: %s", lim_words,
                        (long long)least->batch_size, least->message);
      *out = r;
      goto cleanup;
    }
  }
  *out = r;
  goto cleanup;
fail:
  toplu_tune_result_free(r);
cleanup:
  for (int i = 0; c.data && i < c.n_in; i++) toplu_tensor_free(&c.data[i]);
  free(c.data);
  toplu_session_destroy(c.session);
  toplu_allocator_destroy(c.alloc);
  toplu__batch_shapes_free(&c.shapes);
  free(shapes);
  return st;
}
