/*
 * serve/metrics.c - per model-version counters and histograms (C11 atomics),
 * rendered as Prometheus text exposition format 0.0.4 and as Triton's
 * statistics extension JSON.
 *
 * Every number is an _Atomic int64_t updated with relaxed fetch-adds: each
 * one is exact under any number of threads; a render reads them one by one,
 * so numbers recorded during a render may show in one and not yet in another.
 */
#include "serve/metrics.h"

#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

typedef _Atomic int64_t counter_t;

static const int64_t kUsBounds[] = {100, 250, 500, 1000, 2500, 5000, 10000, 25000,
                                    50000, 100000, 250000, 500000, 1000000, 2500000, 5000000};
static const int64_t kBatchBounds[] = {1, 2, 4, 8, 16, 32, 64, 128, 256};
#define N_US (sizeof kUsBounds / sizeof kUsBounds[0])
#define N_BATCH (sizeof kBatchBounds / sizeof kBatchBounds[0])

/* A count and its cumulative nanoseconds (Triton's StatisticDuration). */
typedef struct duration {
  counter_t count, ns;
} duration_t;

/* Per-bucket (not cumulative) counts, [n] for above the last bound; sum in
 * the recorded unit (ns for durations, rows for batch sizes). */
typedef struct hist {
  counter_t bucket[N_US + 1];
  counter_t sum, count;
} hist_t;

typedef struct batch_stat {
  counter_t count, input_ns, infer_ns, output_ns;
} batch_stat_t;

struct srv_metrics {
  atomic_int refs;             /* srv_metrics_ref: a reload's new model shares its version's counters */
  duration_t success, fail, queue, compute_input, compute_infer, compute_output, cache_hit, cache_miss;
  counter_t fail_by_reason[SRV_FAIL_COUNT];
  counter_t request_ns;        /* successes' request times (nv_inference_request_duration_us) */
  counter_t inference_count;   /* rows run */
  counter_t exec_count;        /* batches run */
  counter_t pending;
  counter_t last_inference_ms; /* ms since the epoch */
  hist_t request_hist, queue_hist, batch_hist;
  batch_stat_t batch[SRV_MAX_BATCH_STATS + 1]; /* by batch size; [0] unused */
};

const char *srv_fail_reason_name(srv_fail_reason_t r) {
  switch (r) {
    case SRV_FAIL_REJECTED: return "REJECTED";
    case SRV_FAIL_CANCELED: return "CANCELED";
    case SRV_FAIL_BACKEND: return "BACKEND";
    case SRV_FAIL_OTHER: return "OTHER";
    case SRV_FAIL_BAD_REQUEST: return "BAD_REQUEST";
    case SRV_FAIL_COUNT: break;
  }
  return "OTHER";
}

srv_metrics_t *srv_metrics_create(void) {
  /* calloc's zero bytes are a valid zero for lock-free atomic int64_t. */
  srv_metrics_t *m = calloc(1, sizeof(srv_metrics_t));
  if (m) atomic_init(&m->refs, 1);
  return m;
}

srv_metrics_t *srv_metrics_ref(srv_metrics_t *m) {
  if (m) atomic_fetch_add(&m->refs, 1);
  return m;
}

void srv_metrics_destroy(srv_metrics_t *m) {
  if (m && atomic_fetch_sub(&m->refs, 1) == 1) free(m);
}

static void add(counter_t *c, int64_t v) { atomic_fetch_add_explicit(c, v, memory_order_relaxed); }
static int64_t get(const counter_t *c) { return atomic_load_explicit((counter_t *)c, memory_order_relaxed); }
static int64_t nonneg(int64_t v) { return v < 0 ? 0 : v; }

static void dur(duration_t *d, int64_t ns) {
  add(&d->count, 1);
  add(&d->ns, nonneg(ns));
}

/* v (in the bounds' unit times scale) into h. */
static void hist_record(hist_t *h, const int64_t *bounds, size_t n, int64_t v, int64_t scale) {
  size_t i = 0;
  while (i < n && v > bounds[i] * scale) i++;
  add(&h->bucket[i], 1);
  add(&h->sum, v);
  add(&h->count, 1);
}

static void touch(srv_metrics_t *m) {
  struct timespec ts;
  if (clock_gettime(CLOCK_REALTIME, &ts) == 0)
    atomic_store_explicit(&m->last_inference_ms, (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000,
                          memory_order_relaxed);
}

void srv_metrics_success(srv_metrics_t *m, int64_t request_ns, int64_t queue_ns, int64_t compute_input_ns,
                         int64_t compute_infer_ns, int64_t compute_output_ns) {
  if (!m) return;
  dur(&m->success, request_ns);
  add(&m->request_ns, nonneg(request_ns));
  dur(&m->queue, queue_ns);
  dur(&m->compute_input, compute_input_ns);
  dur(&m->compute_infer, compute_infer_ns);
  dur(&m->compute_output, compute_output_ns);
  hist_record(&m->request_hist, kUsBounds, N_US, nonneg(request_ns), 1000);
  hist_record(&m->queue_hist, kUsBounds, N_US, nonneg(queue_ns), 1000);
}

void srv_metrics_cache_hit(srv_metrics_t *m, int64_t request_ns, int64_t lookup_ns) {
  if (!m) return;
  dur(&m->success, request_ns);
  add(&m->request_ns, nonneg(request_ns));
  dur(&m->cache_hit, lookup_ns);
  /* Triton's queue statistics count cache hits (with no time): */
  dur(&m->queue, 0);
  hist_record(&m->request_hist, kUsBounds, N_US, nonneg(request_ns), 1000);
  touch(m);
}

void srv_metrics_cache_miss(srv_metrics_t *m, int64_t lookup_ns) {
  if (!m) return;
  dur(&m->cache_miss, lookup_ns);
}

void srv_metrics_failure(srv_metrics_t *m, srv_fail_reason_t reason, int64_t request_ns) {
  if (!m) return;
  if ((int)reason < 0 || reason >= SRV_FAIL_COUNT) reason = SRV_FAIL_OTHER;
  add(&m->fail_by_reason[reason], 1);
  dur(&m->fail, request_ns);
}

void srv_metrics_batch(srv_metrics_t *m, int64_t rows, int64_t compute_input_ns, int64_t compute_infer_ns,
                       int64_t compute_output_ns) {
  if (!m) return;
  rows = nonneg(rows);
  add(&m->inference_count, rows);
  add(&m->exec_count, 1);
  hist_record(&m->batch_hist, kBatchBounds, N_BATCH, rows, 1);
  if (rows >= 1 && rows <= SRV_MAX_BATCH_STATS) {
    batch_stat_t *b = &m->batch[rows];
    add(&b->count, 1);
    add(&b->input_ns, nonneg(compute_input_ns));
    add(&b->infer_ns, nonneg(compute_infer_ns));
    add(&b->output_ns, nonneg(compute_output_ns));
  }
  touch(m);
}

void srv_metrics_totals(const srv_metrics_t *m, int64_t *success, int64_t *failure, int64_t *rows, int64_t *batches) {
  int64_t f = 0;
  for (int r = 0; r < SRV_FAIL_COUNT; r++) f += get(&m->fail_by_reason[r]);
  if (success) *success = get(&m->success.count);
  if (failure) *failure = f;
  if (rows) *rows = get(&m->inference_count);
  if (batches) *batches = get(&m->exec_count);
}

void srv_metrics_pending(srv_metrics_t *m, int64_t delta) {
  if (m) add(&m->pending, delta);
}

/* ---- Prometheus text ---- */

/* A label value: backslash, double quote and line feed escaped (text format 0.0.4). */
static void put_label_value(pl_buf_t *b, const char *s) {
  pl_buf_putc(b, '"');
  for (const char *p = s ? s : ""; *p; p++) {
    if (*p == '\\') pl_buf_puts(b, "\\\\");
    else if (*p == '"') pl_buf_puts(b, "\\\"");
    else if (*p == '\n') pl_buf_puts(b, "\\n");
    else pl_buf_putc(b, *p);
  }
  pl_buf_putc(b, '"');
}

static void family(pl_buf_t *b, const char *name, const char *type, const char *help) {
  pl_buf_printf(b, "# HELP %s %s\n# TYPE %s %s\n", name, help, name, type);
}

/* name{model="..",version=".."<extra>} (extra: ",le=\"100\"" and such, or NULL) */
static void sample_start(pl_buf_t *b, const char *name, const char *suffix, const srv_metrics_model_t *mm,
                         const char *extra_key, const char *extra_value) {
  pl_buf_puts(b, name);
  if (suffix) pl_buf_puts(b, suffix);
  pl_buf_puts(b, "{model=");
  put_label_value(b, mm->name);
  pl_buf_puts(b, ",version=");
  put_label_value(b, mm->version);
  if (extra_key) {
    pl_buf_printf(b, ",%s=", extra_key);
    put_label_value(b, extra_value);
  }
  pl_buf_puts(b, "} ");
}

typedef enum { F_SUCCESS, F_INFER_COUNT, F_EXEC_COUNT, F_REQUEST_US, F_QUEUE_US, F_INPUT_US, F_INFER_US, F_OUTPUT_US,
               F_PENDING, F_HITS, F_MISSES, F_HIT_US, F_MISS_US, F_MEMORY } field_t;

static int64_t model_value(const srv_metrics_model_t *mm, field_t f) {
  const srv_metrics_t *m = mm->metrics;
  if (f == F_MEMORY) return mm->memory_bytes;
  if (!m) return 0;
  switch (f) {
    case F_SUCCESS: return get(&m->success.count);
    case F_INFER_COUNT: return get(&m->inference_count);
    case F_EXEC_COUNT: return get(&m->exec_count);
    case F_REQUEST_US: return get(&m->request_ns) / 1000;
    case F_QUEUE_US: return get(&m->queue.ns) / 1000;
    case F_INPUT_US: return get(&m->compute_input.ns) / 1000;
    case F_INFER_US: return get(&m->compute_infer.ns) / 1000;
    case F_OUTPUT_US: return get(&m->compute_output.ns) / 1000;
    case F_PENDING: return get(&m->pending);
    case F_HITS: return get(&m->cache_hit.count);
    case F_MISSES: return get(&m->cache_miss.count);
    case F_HIT_US: return get(&m->cache_hit.ns) / 1000;
    case F_MISS_US: return get(&m->cache_miss.ns) / 1000;
    case F_MEMORY: break;
  }
  return 0;
}

static void per_model(pl_buf_t *b, const srv_metrics_model_t *models, int n, const char *name, const char *type,
                      const char *help, field_t f) {
  family(b, name, type, help);
  for (int i = 0; i < n; i++) {
    sample_start(b, name, NULL, &models[i], NULL, NULL);
    pl_buf_int(b, model_value(&models[i], f));
    pl_buf_putc(b, '\n');
  }
}

/* A histogram family: cumulative _bucket{le}, _sum (in the bounds' unit: the
 * recorded sum divided by scale), _count. */
static void histogram(pl_buf_t *b, const srv_metrics_model_t *models, int n, const char *name, const char *help,
                      size_t which, const int64_t *bounds, size_t nb, int64_t scale) {
  family(b, name, "histogram", help);
  for (int i = 0; i < n; i++) {
    const srv_metrics_t *m = models[i].metrics;
    const hist_t *h = !m ? NULL : which == 0 ? &m->request_hist : which == 1 ? &m->queue_hist : &m->batch_hist;
    int64_t cum = 0;
    char le[32];
    for (size_t k = 0; k <= nb; k++) {
      if (h) cum += get(&h->bucket[k]);
      if (k < nb) snprintf(le, sizeof le, "%lld", (long long)bounds[k]);
      else memcpy(le, "+Inf", 5);
      sample_start(b, name, "_bucket", &models[i], "le", le);
      pl_buf_int(b, cum);
      pl_buf_putc(b, '\n');
    }
    int64_t sum = h ? get(&h->sum) : 0, count = h ? get(&h->count) : 0;
    sample_start(b, name, "_sum", &models[i], NULL, NULL);
    if (scale == 1) pl_buf_int(b, sum);
    else pl_buf_double(b, (double)sum / (double)scale);
    pl_buf_putc(b, '\n');
    sample_start(b, name, "_count", &models[i], NULL, NULL);
    pl_buf_int(b, count);
    pl_buf_putc(b, '\n');
  }
}

void srv_metrics_prometheus(const srv_metrics_model_t *models, int n, const srv_metrics_server_t *server,
                            pl_buf_t *out) {
  per_model(out, models, n, "nv_inference_request_success", "counter",
            "Number of successful inference requests, all batch sizes (cache hits included)", F_SUCCESS);
  family(out, "nv_inference_request_failure", "counter",
         "Number of failed inference requests, all batch sizes, by reason");
  for (int i = 0; i < n; i++) {
    for (int r = 0; r < SRV_FAIL_COUNT; r++) {
      sample_start(out, "nv_inference_request_failure", NULL, &models[i], "reason",
                   srv_fail_reason_name((srv_fail_reason_t)r));
      pl_buf_int(out, models[i].metrics ? get(&models[i].metrics->fail_by_reason[r]) : 0);
      pl_buf_putc(out, '\n');
    }
  }
  static const struct {
    const char *name, *type, *help;
    field_t f;
  } kFamilies[] = {
      {"nv_inference_count", "counter", "Number of inferences performed (rows; cache hits not included)", F_INFER_COUNT},
      {"nv_inference_exec_count", "counter", "Number of model executions performed (batches; cache hits not included)",
       F_EXEC_COUNT},
      {"nv_inference_request_duration_us", "counter",
       "Cumulative inference request duration in microseconds (cache hits included)", F_REQUEST_US},
      {"nv_inference_queue_duration_us", "counter",
       "Cumulative inference queuing duration in microseconds (cache hits included)", F_QUEUE_US},
      {"nv_inference_compute_input_duration_us", "counter",
       "Cumulative compute input duration in microseconds (cache hits not included)", F_INPUT_US},
      {"nv_inference_compute_infer_duration_us", "counter",
       "Cumulative compute inference duration in microseconds (cache hits not included)", F_INFER_US},
      {"nv_inference_compute_output_duration_us", "counter",
       "Cumulative inference compute output duration in microseconds (cache hits not included)", F_OUTPUT_US},
      {"nv_inference_pending_request_count", "gauge",
       "Instantaneous number of pending requests awaiting execution per-model", F_PENDING},
      {"nv_cache_num_hits_per_model", "counter", "Number of cache hits per model", F_HITS},
      {"nv_cache_num_misses_per_model", "counter", "Number of cache misses per model", F_MISSES},
      {"nv_cache_hit_duration_per_model", "counter", "Total cache hit duration per model, in microseconds", F_HIT_US},
      {"nv_cache_miss_duration_per_model", "counter", "Total cache miss (lookup) duration per model, in microseconds",
       F_MISS_US},
  };
  for (size_t k = 0; k < sizeof kFamilies / sizeof kFamilies[0]; k++)
    per_model(out, models, n, kFamilies[k].name, kFamilies[k].type, kFamilies[k].help, kFamilies[k].f);
  histogram(out, models, n, "toplu_inference_request_duration_us",
            "Successful request latency in microseconds, arrival to response ready (cache hits included)", 0,
            kUsBounds, N_US, 1000);
  histogram(out, models, n, "toplu_inference_queue_duration_us",
            "Queue time in microseconds of the requests that ran, enqueue to batch start", 1, kUsBounds, N_US, 1000);
  histogram(out, models, n, "toplu_inference_batch_size", "Rows per model execution", 2, kBatchBounds, N_BATCH, 1);
  per_model(out, models, n, "toplu_memory_bytes", "gauge",
            "Bytes in use by the model version's sessions (allocator)", F_MEMORY);
  if (!server) return;
  family(out, "toplu_http_responses_total", "counter", "HTTP responses sent, by status class");
  for (int k = 1; k <= 5; k++)
    pl_buf_printf(out, "toplu_http_responses_total{code=\"%dxx\"} %lld\n", k, (long long)server->responses_by_code[k]);
  family(out, "toplu_http_responses_status_total", "counter", "HTTP responses sent with status 400, 404 and 503");
  pl_buf_printf(out, "toplu_http_responses_status_total{code=\"400\"} %lld\n", (long long)server->http_400);
  pl_buf_printf(out, "toplu_http_responses_status_total{code=\"404\"} %lld\n", (long long)server->http_404);
  pl_buf_printf(out, "toplu_http_responses_status_total{code=\"503\"} %lld\n", (long long)server->http_503);
  family(out, "nv_cache_num_entries", "gauge", "Number of responses stored in the response cache");
  pl_buf_printf(out, "nv_cache_num_entries %lld\n", (long long)server->cache_entries);
  family(out, "nv_cache_num_evictions", "counter", "Number of response cache evictions");
  pl_buf_printf(out, "nv_cache_num_evictions %lld\n", (long long)server->cache_evictions);
  family(out, "nv_cache_util", "gauge", "Response cache utilization, bytes held over the bound [0.0 - 1.0]");
  pl_buf_puts(out, "nv_cache_util ");
  pl_buf_double(out, server->cache_max_bytes > 0 ? (double)server->cache_bytes / (double)server->cache_max_bytes : 0.0);
  pl_buf_putc(out, '\n');
  family(out, "toplu_cache_bytes", "gauge", "Bytes held by the response cache (key, body and entry overhead)");
  pl_buf_printf(out, "toplu_cache_bytes %lld\n", (long long)server->cache_bytes);
  family(out, "toplu_cache_max_bytes", "gauge", "The response cache's bound in bytes");
  pl_buf_printf(out, "toplu_cache_max_bytes %lld\n", (long long)server->cache_max_bytes);
  family(out, "toplu_http_connections", "gauge", "Open HTTP connections");
  pl_buf_printf(out, "toplu_http_connections %lld\n", (long long)server->connections);
  if (server->have_cpu) {
    family(out, "nv_cpu_utilization", "gauge", "CPU utilization rate [0.0 - 1.0]");
    pl_buf_puts(out, "nv_cpu_utilization ");
    pl_buf_double(out, server->cpu_utilization);
    pl_buf_putc(out, '\n');
  }
  if (server->have_mem) {
    family(out, "nv_cpu_memory_total_bytes", "gauge", "CPU total memory (RAM), in bytes");
    pl_buf_printf(out, "nv_cpu_memory_total_bytes %lld\n", (long long)server->cpu_memory_total);
    family(out, "nv_cpu_memory_used_bytes", "gauge", "CPU used memory (RAM), in bytes");
    pl_buf_printf(out, "nv_cpu_memory_used_bytes %lld\n", (long long)server->cpu_memory_used);
  }
}

/* ---- statistics extension JSON ---- */

static void put_duration(pl_buf_t *b, const char *name, int64_t count, int64_t ns, int comma) {
  pl_buf_printf(b, "%s\"%s\":{\"count\":%lld,\"ns\":%lld}", comma ? "," : "", name, (long long)count, (long long)ns);
}

void srv_metrics_stats_json(const srv_metrics_model_t *models, int n, pl_buf_t *out) {
  pl_buf_puts(out, "{\"model_stats\":[");
  for (int i = 0; i < n; i++) {
    const srv_metrics_t *m = models[i].metrics;
    static const srv_metrics_t zero; /* all counters 0 for an entry without metrics */
    if (!m) m = &zero;
    if (i) pl_buf_putc(out, ',');
    pl_buf_puts(out, "{\"name\":");
    pl_buf_json_string(out, models[i].name ? models[i].name : "");
    pl_buf_puts(out, ",\"version\":");
    pl_buf_json_string(out, models[i].version ? models[i].version : "");
    pl_buf_printf(out, ",\"last_inference\":%lld,\"inference_count\":%lld,\"execution_count\":%lld",
                  (long long)get(&m->last_inference_ms), (long long)get(&m->inference_count),
                  (long long)get(&m->exec_count));
    pl_buf_puts(out, ",\"inference_stats\":{");
    put_duration(out, "success", get(&m->success.count), get(&m->success.ns), 0);
    put_duration(out, "fail", get(&m->fail.count), get(&m->fail.ns), 1);
    put_duration(out, "queue", get(&m->queue.count), get(&m->queue.ns), 1);
    put_duration(out, "compute_input", get(&m->compute_input.count), get(&m->compute_input.ns), 1);
    put_duration(out, "compute_infer", get(&m->compute_infer.count), get(&m->compute_infer.ns), 1);
    put_duration(out, "compute_output", get(&m->compute_output.count), get(&m->compute_output.ns), 1);
    put_duration(out, "cache_hit", get(&m->cache_hit.count), get(&m->cache_hit.ns), 1);
    put_duration(out, "cache_miss", get(&m->cache_miss.count), get(&m->cache_miss.ns), 1);
    pl_buf_puts(out, "},\"batch_stats\":[");
    int first = 1;
    for (int s = 1; s <= SRV_MAX_BATCH_STATS; s++) {
      const batch_stat_t *bs = &m->batch[s];
      int64_t c = get(&bs->count);
      if (c == 0) continue;
      pl_buf_printf(out, "%s{\"batch_size\":%d", first ? "" : ",", s);
      put_duration(out, "compute_input", c, get(&bs->input_ns), 1);
      put_duration(out, "compute_infer", c, get(&bs->infer_ns), 1);
      put_duration(out, "compute_output", c, get(&bs->output_ns), 1);
      pl_buf_putc(out, '}');
      first = 0;
    }
    pl_buf_puts(out, "]}");
  }
  pl_buf_puts(out, "]}");
}
