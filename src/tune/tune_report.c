/*
 * tune/tune_report.c - a tune result as tune.json, tune.csv, a terminal
 * table, a gnuplot plot (tune.dat + tune.gp -> tune.png) and the Chrome
 * trace of the profile (trace.json, made by toplu_profile_trace_json).
 */
#include "tune/tune_report.h"

#include <errno.h>
#include <jansson.h>
#include <fcntl.h>
#include <spawn.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "core/error.h"
#include "core/identity.h"
#include "plan/plan_report.h"

extern char **environ;

/* Number or null (for rows without a measurement). */
static json_t *num_or_null(double v, int have) { return have ? json_real(v) : json_null(); }

/* toplu_tune_json's object (new reference; NULL when out of memory). */
static json_t *tune_json_object(const toplu_tune_result_t *r) {
  json_t *o = json_object();
  if (!o) return NULL;
  json_object_set_new(o, "model", json_string(r->model));
  {
    toplu__file_identity_t id;
    memset(&id, 0, sizeof id);
    snprintf(id.file, sizeof id.file, "%s", r->model_file);
    id.bytes = r->model_bytes;
    id.hash = r->model_fnv1a64;
    id.hashed = r->model_hashed;
    json_object_set_new(o, "model_identity", toplu__model_identity_json(&id, r->inputs, r->threads));
  }
  json_object_set_new(o, "inputs", json_string(r->inputs));
  json_object_set_new(o, "device", json_string("cpu"));
  json_object_set_new(o, "threads", json_integer(r->threads));
  json_object_set_new(o, "cpu", toplu__device_json(&r->device));
  json_object_set_new(o, "sweep", json_string(r->automatic ? "auto" : "list"));
  json_object_set_new(o, "recommended_batch_size", json_integer(r->recommended_batch_size));
  json_object_set_new(o, "latency_budget_ms", r->latency_budget_ms > 0 ? json_real(r->latency_budget_ms) : json_null());
  json_object_set_new(o, "memory_limit_bytes",
                      r->memory_limit_bytes ? json_integer((json_int_t)r->memory_limit_bytes) : json_null());
  json_object_set_new(o, "planned_max_batch_size",
                      r->memory_limit_bytes ? json_integer(r->planned_max_batch_size) : json_null());
  json_object_set_new(o, "max_fitting_batch_size", json_integer(r->max_fitting_batch_size));
  json_object_set_new(o, "smallest_oom_batch_size",
                      r->smallest_oom_batch_size ? json_integer(r->smallest_oom_batch_size) : json_null());
  json_object_set_new(o, "stop_reason", json_string(r->stop_reason));
  json_object_set_new(o, "constants_in_place_bytes", json_integer((json_int_t)r->in_place_bytes));
  json_object_set_new(o, "peak_bytes_counts",
                      json_string("allocator peak (repacked weights, kernel state, arena, input and output buffers) "
                                  "+ constants read in place; predicted_bytes counts the same terms from the plan"));
  json_t *rows = json_array();
  for (int i = 0; i < r->n_rows; i++) {
    const toplu_tune_row_t *x = &r->rows[i];
    int have = x->status != TOPLU_TUNE_OOM;
    json_t *j = json_object();
    json_object_set_new(j, "batch_size", json_integer(x->batch_size));
    json_object_set_new(j, "status", json_string(toplu_tune_status_name(x->status)));
    json_object_set_new(j, "p50_ms", num_or_null(x->p50_ms, have));
    json_object_set_new(j, "p90_ms", num_or_null(x->p90_ms, have));
    json_object_set_new(j, "p99_ms", num_or_null(x->p99_ms, have));
    json_object_set_new(j, "min_ms", num_or_null(x->min_ms, have));
    json_object_set_new(j, "throughput", have ? json_real(x->throughput) : json_real(0));
    json_object_set_new(j, "peak_bytes", json_integer((json_int_t)x->peak_bytes));
    json_object_set_new(j, "predicted_bytes", json_integer((json_int_t)x->predicted_bytes));
    json_object_set_new(j, "predicted_latency_ms", json_real(x->predicted_latency_ms));
    json_object_set_new(j, "rss_growth_bytes", json_integer((json_int_t)x->rss_growth_bytes));
    json_object_set_new(j, "after_bytes", json_integer((json_int_t)x->after_bytes));
    json_object_set_new(j, "runs", json_integer(x->runs));
    json_object_set_new(j, "windows", json_integer(x->windows));
    json_object_set_new(j, "stable", json_boolean(x->stable));
    json_object_set_new(j, "seconds", json_real(x->seconds));
    if (x->message[0]) json_object_set_new(j, "message", json_string(x->message));
    json_array_append_new(rows, j);
  }
  json_object_set_new(o, "results", rows);
  json_t *search = json_array();
  for (int i = 0; i < r->n_probes; i++) {
    json_t *j = json_object();
    json_object_set_new(j, "batch_size", json_integer(r->probe_batch[i]));
    json_object_set_new(j, "fits", json_boolean(r->probe_fits[i]));
    json_array_append_new(search, j);
  }
  json_object_set_new(o, "search", search);
  if (r->n_ops) {
    json_t *p = json_object(), *ops = json_array();
    json_object_set_new(p, "batch_size", json_integer(r->profile_batch_size));
    for (int i = 0; i < r->n_ops; i++) {
      json_t *j = json_object();
      json_object_set_new(j, "op_type", json_string(r->ops[i].op_type));
      json_object_set_new(j, "total_ms", json_real(r->ops[i].total_ms));
      json_object_set_new(j, "share", json_real(r->ops[i].share));
      json_object_set_new(j, "nodes", json_integer(r->ops[i].nodes));
      json_array_append_new(ops, j);
    }
    json_object_set_new(p, "ops", ops);
    json_object_set_new(p, "trace", json_string("trace.json"));
    json_object_set_new(o, "profile", p);
  }
  json_t *notes = json_array();
  for (int i = 0; i < r->n_notes; i++) json_array_append_new(notes, json_string(r->notes[i]));
  json_object_set_new(o, "notes", notes);
  return o;
}

char *toplu_tune_json(const toplu_tune_result_t *r) {
  if (!r) return NULL;
  json_t *o = tune_json_object(r);
  if (!o) return NULL;
  char *s = json_dumps(o, JSON_INDENT(2) | JSON_PRESERVE_ORDER | JSON_REAL_PRECISION(10));
  json_decref(o);
  return s;
}

/* Create dir and its parents; 0 or -1. */
static int mkdir_p(const char *dir) {
  char buf[4096];
  snprintf(buf, sizeof buf, "%s", dir);
  for (char *p = buf + 1; *p; p++)
    if (*p == '/') {
      *p = 0;
      if (mkdir(buf, 0777) && errno != EEXIST) return -1;
      *p = '/';
    }
  if (mkdir(buf, 0777) && errno != EEXIST) return -1;
  return 0;
}

/* Write text to dir/name; TOPLU_OK or TOPLU_ERR_IO. */
static toplu_status_t write_file(const char *dir, const char *name, const char *text, toplu_error_t *err) {
  char path[4200];
  snprintf(path, sizeof path, "%s/%s", dir, name);
  FILE *f = fopen(path, "w");
  if (!f) return toplu__errorf(err, TOPLU_ERR_IO, "cannot write %s: %s", path, strerror(errno));
  int bad = fputs(text, f) < 0;
  bad |= fclose(f) != 0;
  if (bad) return toplu__errorf(err, TOPLU_ERR_IO, "cannot write %s: %s", path, strerror(errno));
  return TOPLU_OK;
}

/* Append printf text to a growing buffer; -1 when out of memory. */
static int buf_printf(char **buf, size_t *len, size_t *cap, const char *fmt, ...) TOPLU_PRINTF(4, 5);
static int buf_printf(char **buf, size_t *len, size_t *cap, const char *fmt, ...) {
  for (;;) {
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(*buf ? *buf + *len : NULL, *buf ? *cap - *len : 0, fmt, ap);
    va_end(ap);
    if (n < 0) return -1;
    if (*buf && *len + (size_t)n < *cap) {
      *len += (size_t)n;
      return 0;
    }
    size_t nc = (*cap ? *cap * 2 : 4096) + (size_t)n;
    char *nb = realloc(*buf, nc);
    if (!nb) return -1;
    *buf = nb;
    *cap = nc;
  }
}

/* Escape a string for a gnuplot double-quoted string. */
static void gp_escape(const char *s, char *out, size_t size) {
  size_t k = 0;
  for (; *s && k + 2 < size; s++) {
    if (*s == '"' || *s == '\\') out[k++] = '\\';
    out[k++] = *s;
  }
  out[k] = 0;
}

/* Run gnuplot on script; 0 ok, 127 not found, other: failed. */
static int run_gnuplot(const char *script, const char *log) {
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_addopen(&fa, 1, "/dev/null", O_WRONLY, 0);
  posix_spawn_file_actions_addopen(&fa, 2, log, O_WRONLY | O_CREAT | O_TRUNC, 0644);
  char *argv[] = {(char *)"gnuplot", (char *)script, NULL};
  pid_t pid;
  int rc = posix_spawnp(&pid, "gnuplot", &fa, NULL, argv, environ);
  posix_spawn_file_actions_destroy(&fa);
  if (rc != 0) return 127;
  int status = 0;
  while (waitpid(pid, &status, 0) < 0)
    if (errno != EINTR) return -1;
  if (WIFEXITED(status)) return WEXITSTATUS(status);
  return -1;
}

/* tune.dat, tune.gp and tune.png. */
static toplu_status_t write_plot(const toplu_tune_result_t *r, const char *dir, char *note, size_t note_size,
                                 toplu_error_t *err) {
  char *buf = NULL;
  size_t len = 0, cap = 0;
  int bad = buf_printf(&buf, &len, &cap, "# batch_size throughput_per_s p99_ms status\n");
  double max_p99 = 0;
  for (int i = 0; i < r->n_rows; i++) {
    const toplu_tune_row_t *x = &r->rows[i];
    if (x->status == TOPLU_TUNE_OOM) continue;
    bad |= buf_printf(&buf, &len, &cap, "%lld %.6g %.6g %s\n", (long long)x->batch_size, x->throughput, x->p99_ms,
                      toplu_tune_status_name(x->status));
    if (x->p99_ms > max_p99) max_p99 = x->p99_ms;
  }
  if (bad) {
    free(buf);
    return toplu__errorf(err, TOPLU_ERR_OUT_OF_MEMORY, "out of memory");
  }
  toplu_status_t st = write_file(dir, "tune.dat", buf, err);
  free(buf);
  if (st) return st;
  char adir[4096], model[1200], ddir[8300];
  if (!realpath(dir, adir)) snprintf(adir, sizeof adir, "%s", dir);
  const char *base = strrchr(r->model, '/');
  gp_escape(base ? base + 1 : r->model, model, sizeof model);
  gp_escape(adir, ddir, sizeof ddir);
  buf = NULL;
  len = cap = 0;
  double top = max_p99 > r->latency_budget_ms ? max_p99 : r->latency_budget_ms;
  bad |= buf_printf(&buf, &len, &cap,
                    "# toplu tune plot: render with `gnuplot %s/tune.gp`\n"
                    "if (strstrt(GPVAL_TERMINALS, \"pngcairo\") > 0) {\n"
                    "  set terminal pngcairo size 960,600 noenhanced font \",10\"\n"
                    "} else {\n"
                    "  set terminal png size 960,600 noenhanced\n"
                    "}\n"
                    "set output \"%s/tune.png\"\n"
                    "set title \"batch-size sweep of %s (cpu, %d thread%s)\"\n"
                    "set xlabel \"batch size\"\n"
                    "set logscale x 2\n"
                    "set ylabel \"throughput (inferences/s)\"\n"
                    "set y2label \"p99 latency (ms)\"\n"
                    "set ytics nomirror\n"
                    "set y2tics\n"
                    "set grid\n"
                    "set key top left\n"
                    "set yrange [0:*]\n"
                    "set offsets 0, 0, graph 0.08, 0\n"
                    "set y2range [0:%.6g]\n",
                    ddir, ddir, model, r->threads, r->threads == 1 ? "" : "s", top > 0 ? top * 1.15 : 1);
  if (r->latency_budget_ms > 0)
    bad |= buf_printf(&buf, &len, &cap,
                      "set arrow from graph 0, second %.6g to graph 1, second %.6g nohead dashtype 2 lw 2 lc rgb "
                      "\"red\"\n"
                      "set label \"latency budget %.6g ms\" at graph 0.02, second %.6g offset 0,0.8 textcolor rgb "
                      "\"red\"\n",
                      r->latency_budget_ms, r->latency_budget_ms, r->latency_budget_ms, r->latency_budget_ms);
  if (r->recommended_batch_size > 0) {
    int64_t largest = 0;
    for (int i = 0; i < r->n_rows; i++)
      if (r->rows[i].batch_size > largest) largest = r->rows[i].batch_size;
    int left = r->recommended_batch_size > 1 && r->recommended_batch_size * 2 > largest; /* keep it inside */
    bad |= buf_printf(&buf, &len, &cap,
                      "set arrow from %lld, graph 0 to %lld, graph 1 nohead dashtype 3 lw 2 lc rgb \"dark-green\"\n"
                      "set label \"chosen B = %lld\" at %lld, graph 0.92 %s textcolor rgb \"dark-green\"\n",
                      (long long)r->recommended_batch_size, (long long)r->recommended_batch_size,
                      (long long)r->recommended_batch_size, (long long)r->recommended_batch_size,
                      left ? "right offset -0.8,0" : "left offset 0.8,0");
  }
  for (int i = 0; i < r->n_rows; i++)
    if (r->rows[i].status == TOPLU_TUNE_OOM)
      bad |= buf_printf(&buf, &len, &cap, "set label \"oom\" at %lld, graph 0.05 center textcolor rgb \"gray40\"\n",
                        (long long)r->rows[i].batch_size);
  bad |= buf_printf(&buf, &len, &cap,
                    "plot \"%s/tune.dat\" using 1:2 with linespoints lw 2 pt 7 lc rgb \"#1f77b4\" title "
                    "\"throughput\", \\\n"
                    "     \"\" using 1:3 axes x1y2 with linespoints lw 2 pt 5 lc rgb \"#ff7f0e\" title \"p99 latency\"\n",
                    ddir);
  if (bad) {
    free(buf);
    return toplu__errorf(err, TOPLU_ERR_OUT_OF_MEMORY, "out of memory");
  }
  st = write_file(dir, "tune.gp", buf, err);
  free(buf);
  if (st) return st;
  char script[4200], log[4200], png[4200];
  snprintf(script, sizeof script, "%s/tune.gp", adir);
  snprintf(log, sizeof log, "%s/gnuplot.log", adir);
  snprintf(png, sizeof png, "%s/tune.png", adir);
  int n_points = 0;
  for (int i = 0; i < r->n_rows; i++) n_points += r->rows[i].status != TOPLU_TUNE_OOM;
  if (!n_points) {
    snprintf(note, note_size, "no measured size to plot");
    return TOPLU_OK;
  }
  int rc = run_gnuplot(script, log);
  if (rc == 0) {
    remove(log);
    snprintf(note, note_size, "plot: %s", png);
  } else if (rc == 127) {
    remove(log);
    snprintf(note, note_size,
             "gnuplot not found: the plot's data and script are in %s (tune.dat, tune.gp); render it with "
             "`gnuplot %s` (Debian: apt-get install gnuplot-nox)",
             adir, script);
  } else {
    snprintf(note, note_size, "gnuplot failed (exit %d, see %s); render it later with `gnuplot %s`", rc, log, script);
  }
  return TOPLU_OK;
}

toplu_status_t toplu_tune_write(const toplu_tune_result_t *r, const char *dir, char *note, size_t note_size,
                                toplu_error_t *err) {
  toplu_error_clear(err);
  if (note && note_size) note[0] = 0;
  if (!r || !dir) return toplu__errorf(err, TOPLU_ERR_INVALID_ARGUMENT, "toplu_tune_write: %s is NULL", r ? "dir" : "r");
  if (mkdir_p(dir)) return toplu__errorf(err, TOPLU_ERR_IO, "cannot create %s: %s", dir, strerror(errno));
  char *js = toplu_tune_json(r);
  if (!js) return toplu__errorf(err, TOPLU_ERR_OUT_OF_MEMORY, "out of memory");
  toplu_status_t st = write_file(dir, "tune.json", js, err);
  free(js);
  if (st) return st;
  char *buf = NULL;
  size_t len = 0, cap = 0;
  int bad = buf_printf(&buf, &len, &cap,
                       "batch_size,status,p50_ms,p90_ms,p99_ms,throughput,peak_bytes,predicted_bytes,"
                       "predicted_latency_ms,rss_growth_bytes,runs\n");
  for (int i = 0; i < r->n_rows; i++) {
    const toplu_tune_row_t *x = &r->rows[i];
    if (x->status == TOPLU_TUNE_OOM)
      bad |= buf_printf(&buf, &len, &cap, "%lld,oom,,,,0,%llu,%llu,%.6g,%llu,0\n", (long long)x->batch_size,
                        (unsigned long long)x->peak_bytes, (unsigned long long)x->predicted_bytes,
                        x->predicted_latency_ms, (unsigned long long)x->rss_growth_bytes);
    else
      bad |= buf_printf(&buf, &len, &cap, "%lld,%s,%.6g,%.6g,%.6g,%.6g,%llu,%llu,%.6g,%llu,%lld\n",
                        (long long)x->batch_size, toplu_tune_status_name(x->status), x->p50_ms, x->p90_ms, x->p99_ms,
                        x->throughput, (unsigned long long)x->peak_bytes, (unsigned long long)x->predicted_bytes,
                        x->predicted_latency_ms, (unsigned long long)x->rss_growth_bytes, (long long)x->runs);
  }
  if (bad) {
    free(buf);
    return toplu__errorf(err, TOPLU_ERR_OUT_OF_MEMORY, "out of memory");
  }
  st = write_file(dir, "tune.csv", buf, err);
  free(buf);
  if (st) return st;
  char tmp[1];
  if ((st = write_plot(r, dir, note ? note : tmp, note ? note_size : sizeof tmp, err))) return st;
  if (r->trace_json && (st = write_file(dir, "trace.json", r->trace_json, err))) return st; /* toplu_profile_trace_json's */
  return TOPLU_OK;
}

void toplu_tune_print(const toplu_tune_result_t *r, FILE *f) {
  if (!r || !f) return;
  char a[32], b[32], c[32], d[32];
  fprintf(f, "model:   %s\n", r->model);
  fprintf(f, "inputs:  %s\n", r->inputs);
  /* the int8 rate too, as toplu plan prints it: an int8 model's predicted column uses it */
  fprintf(f, "device:  cpu: %s, %d thread%s (probed %s fp32, %s int8, %s copy bandwidth)\n", r->device.description,
          r->threads, r->threads == 1 ? "" : "s", toplu__fmt_rate(r->device.peak_flops[0], "FLOP/s", a, sizeof a),
          r->device.peak_flops[TOPLU_PRECISION_INT8] > 0
              ? toplu__fmt_rate(r->device.peak_flops[TOPLU_PRECISION_INT8], "OP/s", c, sizeof c)
              : "no",
          toplu__fmt_rate(r->device.bandwidth, "B/s", b, sizeof b));
  if (r->memory_limit_bytes)
    fprintf(f, "memory limit: %s (%llu bytes) on peak bytes = allocator peak + %s of constants read in place\n",
            toplu__fmt_bytes((double)r->memory_limit_bytes, a, sizeof a), (unsigned long long)r->memory_limit_bytes,
            toplu__fmt_bytes((double)r->in_place_bytes, b, sizeof b));
  if (r->latency_budget_ms > 0) fprintf(f, "latency budget: %.3g ms (p99)\n", r->latency_budget_ms);
  fprintf(f, "\n%8s %-11s %9s %9s %9s %13s %11s %11s %7s %11s %11s\n", "batch", "status", "p50 ms", "p90 ms",
          "p99 ms", "inferences/s", "peak", "predicted", "diff", "pred. ms", "rss growth");
  for (int i = 0; i < r->n_rows; i++) {
    const toplu_tune_row_t *x = &r->rows[i];
    double diff = x->peak_bytes ? 100.0 * ((double)x->predicted_bytes - (double)x->peak_bytes) / (double)x->peak_bytes : 0;
    if (x->status == TOPLU_TUNE_OOM)
      fprintf(f, "%8lld %-11s %9s %9s %9s %13s %11s %11s %7s %11.2f %11s\n", (long long)x->batch_size, "oom", "-", "-",
              "-", "-", "-", x->predicted_bytes ? toplu__fmt_bytes((double)x->predicted_bytes, b, sizeof b) : "-", "",
              x->predicted_latency_ms, "-");
    else
      fprintf(f, "%8lld %-11s %9.2f %9.2f %9.2f %13.1f %11s %11s %+6.2f%% %11.2f %11s%s\n", (long long)x->batch_size,
              toplu_tune_status_name(x->status), x->p50_ms, x->p90_ms, x->p99_ms, x->throughput,
              toplu__fmt_bytes((double)x->peak_bytes, a, sizeof a), toplu__fmt_bytes((double)x->predicted_bytes, b, sizeof b),
              diff, x->predicted_latency_ms, toplu__fmt_bytes((double)x->rss_growth_bytes, c, sizeof c),
              x->batch_size == r->recommended_batch_size ? "  <- recommended" : "");
  }
  for (int i = 0; i < r->n_probes; i++)
    fprintf(f, "  search: batch %lld %s\n", (long long)r->probe_batch[i], r->probe_fits[i] ? "fits" : "does not fit");
  fprintf(f, "\n");
  const toplu_tune_row_t *rec = NULL;
  double best = 0;
  int64_t best_b = 0;
  for (int i = 0; i < r->n_rows; i++) {
    if (r->rows[i].batch_size == r->recommended_batch_size) rec = &r->rows[i];
    if (r->rows[i].status == TOPLU_TUNE_OK && r->rows[i].throughput > best) {
      best = r->rows[i].throughput;
      best_b = r->rows[i].batch_size;
    }
  }
  if (rec && rec->status == TOPLU_TUNE_OK)
    fprintf(f, "recommended batch: %lld: %.1f inferences/s, p99 %.2f ms; the best measured is %.1f at batch %lld "
               "(the smallest size within 3%% of the best%s)\n",
            (long long)rec->batch_size, rec->throughput, rec->p99_ms, best, (long long)best_b,
            r->latency_budget_ms > 0 ? " within the latency budget" : "");
  else if (rec)
    fprintf(f, "recommended batch: %lld: no size met the latency budget; it has the lowest p99 (%.2f ms)\n",
            (long long)rec->batch_size, rec->p99_ms);
  else
    fprintf(f, "recommended batch: none (no size fit%s)\n", r->latency_budget_ms > 0 ? " within the budget" : "");
  fprintf(f, "stopped: %s\n", r->stop_reason);
  if (r->memory_limit_bytes)
    fprintf(f, "memory limit: the planner's max batch is %lld; the largest that fit here is %lld%s\n",
            (long long)r->planned_max_batch_size, (long long)r->max_fitting_batch_size,
            r->smallest_oom_batch_size ? "" : " (none failed)");
  if (r->n_ops) {
    fprintf(f, "\nprofile at batch %lld (top op types by time):\n", (long long)r->profile_batch_size);
    for (int i = 0; i < r->n_ops && i < 10; i++)
      fprintf(f, "  %-28s %9.2f ms %5.1f%%  (%d node%s)\n", r->ops[i].op_type, r->ops[i].total_ms,
              100 * r->ops[i].share, r->ops[i].nodes, r->ops[i].nodes == 1 ? "" : "s");
  }
  for (int i = 0; i < r->n_notes; i++) fprintf(f, "note: %s\n", r->notes[i]);
  (void)d;
}

toplu_status_t toplu_tune_result_matches_model(const char *tune_path, const char *model_path, int *checked,
                                               toplu_error_t *err) {
  toplu_error_clear(err);
  if (checked) *checked = 0;
  if (!tune_path || !model_path)
    return toplu__errorf(err, TOPLU_ERR_INVALID_ARGUMENT, "toplu_tune_result_matches_model: NULL argument");
  struct stat sb;
  if (stat(tune_path, &sb) != 0) return toplu__errorf(err, TOPLU_ERR_IO, "%s: %s", tune_path, strerror(errno));
  if (S_ISDIR(sb.st_mode))
    return toplu__errorf(err, TOPLU_ERR_IO, "%s: is a directory (give the tune.json in it)", tune_path);
  json_error_t je;
  json_t *root = json_load_file(tune_path, 0, &je);
  if (!root) {
    FILE *f = fopen(tune_path, "rb");
    if (!f) return toplu__errorf(err, TOPLU_ERR_IO, "%s: %s", tune_path, strerror(errno));
    fclose(f);
    if (je.line > 0)
      return toplu__errorf(err, TOPLU_ERR_PARSE, "%s: not JSON (line %d: %s)", tune_path, je.line, je.text);
    return toplu__errorf(err, TOPLU_ERR_PARSE, "%s: not JSON (%s)", tune_path, je.text);
  }
  toplu_status_t st = toplu__model_identity_check(root, tune_path, model_path, checked, err);
  json_decref(root);
  return st;
}

/* ---- several shape profiles (toplu_tune_profiles) ---- */

#define PAIRING_TEXT                                                                                                    \
  "profile k takes the k-th size of every set (sets pair up, as the shapes of one TensorRT optimization profile)"

char *toplu_tune_profiles_json(const toplu_tune_profiles_result_t *r) {
  if (!r || r->n < 1) return NULL;
  if (r->n_profiles == 1) return toplu_tune_json(r->results[0]);
  json_t *root = json_object(), *arr = json_array();
  if (!root || !arr) {
    json_decref(root);
    json_decref(arr);
    return NULL;
  }
  for (int k = 0; k < r->n; k++) {
    json_t *x = json_object(), *t = tune_json_object(r->results[k]);
    if (!x || !t) {
      json_decref(x);
      json_decref(t);
      json_decref(arr);
      json_decref(root);
      return NULL;
    }
    char dir[32];
    snprintf(dir, sizeof dir, "profile-%d", k + 1);
    json_object_set_new(x, "profile", json_integer(k + 1));
    json_object_set_new(x, "shapes", json_string(r->labels[k]));
    json_object_set_new(x, "dir", json_string(dir));
    json_object_update(x, t);
    json_decref(t);
    json_array_append_new(arr, x);
  }
  json_object_set_new(root, "profiles", arr);
  json_object_set_new(root, "profiles_asked", json_integer(r->n_profiles));
  json_object_set_new(root, "memory_limit_bytes", json_integer((json_int_t)r->results[0]->memory_limit_bytes));
  json_object_set_new(root, "max_fitting_batch_size_all_profiles", json_integer(r->max_fitting_batch_size));
  json_object_set_new(root, "planned_max_batch_size_all_profiles", json_integer(r->planned_max_batch_size));
  if (r->results[0]->memory_limit_bytes) {
    json_object_set_new(root, "bounding_profile", json_integer(r->bounding_profile + 1));
    json_object_set_new(root, "bounding_shapes", json_string(r->labels[r->bounding_profile]));
  } else {
    json_object_set_new(root, "bounding_profile", json_null());
    json_object_set_new(root, "bounding_shapes", json_null());
  }
  json_object_set_new(root, "pairing", json_string(PAIRING_TEXT));
  char *s = json_dumps(root, JSON_INDENT(2) | JSON_PRESERVE_ORDER | JSON_REAL_PRECISION(10));
  json_decref(root);
  return s;
}

toplu_status_t toplu_tune_profiles_write(const toplu_tune_profiles_result_t *r, const char *dir, char *note,
                                         size_t note_size, toplu_error_t *err) {
  toplu_error_clear(err);
  if (note && note_size) note[0] = 0;
  if (!r || r->n < 1) return toplu__errorf(err, TOPLU_ERR_INVALID_ARGUMENT, "toplu_tune_profiles_write: no results");
  if (r->n_profiles == 1) return toplu_tune_write(r->results[0], dir, note, note_size, err);
  if (mkdir_p(dir)) return toplu__errorf(err, TOPLU_ERR_IO, "cannot create %s: %s", dir, strerror(errno));
  toplu_status_t st;
  for (int k = 0; k < r->n; k++) {
    char sub[4200];
    snprintf(sub, sizeof sub, "%s/profile-%d", dir, k + 1);
    if ((st = toplu_tune_write(r->results[k], sub, note, note_size, err))) return st;
  }
  char *js = toplu_tune_profiles_json(r);
  if (!js) return toplu__errorf(err, TOPLU_ERR_OUT_OF_MEMORY, "out of memory");
  st = write_file(dir, "profiles.json", js, err);
  free(js);
  return st;
}

void toplu_tune_profiles_print(const toplu_tune_profiles_result_t *r, FILE *f) {
  if (!r || r->n < 1) return;
  if (r->n_profiles == 1) {
    toplu_tune_print(r->results[0], f);
    return;
  }
  for (int k = 0; k < r->n; k++) {
    fprintf(f, "%s=== profile %d of %d: %s ===\n", k ? "\n" : "", k + 1, r->n_profiles, r->labels[k]);
    toplu_tune_print(r->results[k], f);
  }
  fprintf(f, "\n=== all %d profiles%s ===\n", r->n_profiles, r->n < r->n_profiles ? " (not all swept)" : "");
  fprintf(f, "%8s %12s %12s %13s %11s  %s\n", "profile", "recommended", "largest fit", "planned max", "peak at rec.",
          "shapes");
  for (int k = 0; k < r->n; k++) {
    const toplu_tune_result_t *x = r->results[k];
    char a[32] = "-";
    for (int i = 0; i < x->n_rows; i++)
      if (x->rows[i].batch_size == x->recommended_batch_size && x->rows[i].status != TOPLU_TUNE_OOM)
        toplu__fmt_bytes((double)x->rows[i].peak_bytes, a, sizeof a);
    char fit[32] = "-", planned[32] = "-";
    if (x->memory_limit_bytes) {
      snprintf(fit, sizeof fit, "%lld", (long long)x->max_fitting_batch_size);
      snprintf(planned, sizeof planned, "%lld", (long long)x->planned_max_batch_size);
    }
    fprintf(f, "%8d %12lld %12s %13s %11s  %s\n", k + 1, (long long)x->recommended_batch_size, fit, planned, a,
            r->labels[k]);
  }
  if (r->results[0]->memory_limit_bytes) {
    char a[32];
    int none_failed = 1;
    for (int k = 0; k < r->n; k++) none_failed &= r->results[k]->smallest_oom_batch_size == 0;
    fprintf(f,
            "max batch for every profile: %lld fits every profile under the memory limit of %s (profile %d, %s, "
            "bounds it)%s; the planner's is %lld: one max_batch_size for a server\n",
            (long long)r->max_fitting_batch_size, toplu__fmt_bytes((double)r->results[0]->memory_limit_bytes, a, sizeof a),
            r->bounding_profile + 1, r->labels[r->bounding_profile],
            none_failed ? " (no size measured ran out of memory: the largest measured)" : "",
            (long long)r->planned_max_batch_size);
  } else {
    fprintf(f, "max batch for every profile: no memory limit given, so none was searched (give a memory limit, or "
               "plan it: the largest profile bounds it)\n");
  }
}
