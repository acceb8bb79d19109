/*
 * serve/metrics.h - per model-version counters and histograms, in
 * Prometheus text format (GET /metrics) and Triton's statistics extension
 * (GET /v2/models/{name}/stats).
 *
 * Names follow Triton's metrics ("Metrics" in the Triton docs):
 *   nv_inference_request_success, nv_inference_request_failure{reason},
 *   nv_inference_count (rows), nv_inference_exec_count (batches),
 *   nv_inference_pending_request_count (gauge), nv_inference_request_duration_us,
 *   nv_inference_queue_duration_us, nv_inference_compute_input_duration_us,
 *   nv_inference_compute_infer_duration_us, nv_inference_compute_output_duration_us
 *   (cumulative microseconds), nv_cache_num_hits_per_model,
 *   nv_cache_num_misses_per_model, nv_cache_hit_duration_per_model,
 *   nv_cache_miss_duration_per_model;
 * labels model="NAME",version="V".  Beyond Triton's defaults, histograms
 * (cumulative le buckets, _sum, _count) so percentiles aggregate across
 * replicas: toplu_inference_request_duration_us, toplu_inference_queue_duration_us,
 * toplu_inference_batch_size.  Failure reasons: REJECTED (queue full,
 * queue timeout, shutting down), CANCELED (client gone), BACKEND (the engine
 * failed), OTHER, BAD_REQUEST (the request failed to parse or validate): so
 * success + failure of a model = the responses its infer endpoint sent.
 *
 * Recording is lock-free (atomics): thread-safe from any thread.
 */
#ifndef TOPLU_SERVE_METRICS_H
#define TOPLU_SERVE_METRICS_H

#include <stddef.h>
#include <stdint.h>

#include "pipeline/buf.h"

typedef enum srv_fail_reason {
  SRV_FAIL_REJECTED = 0,
  SRV_FAIL_CANCELED = 1,
  SRV_FAIL_BACKEND = 2,
  SRV_FAIL_OTHER = 3,
  SRV_FAIL_BAD_REQUEST = 4,
  SRV_FAIL_COUNT = 5
} srv_fail_reason_t;

/* "REJECTED", ... */
const char *srv_fail_reason_name(srv_fail_reason_t r);

typedef struct srv_metrics srv_metrics_t;

/* Histogram buckets (upper bounds, "le"; +Inf after the last):
 * durations in microseconds 100, 250, 500, 1000, 2500, 5000, 10000, 25000,
 * 50000, 100000, 250000, 500000, 1000000, 2500000, 5000000; batch sizes
 * 1, 2, 4, 8, 16, 32, 64, 128, 256.  The request histogram holds the
 * successes (runs and cache hits), the queue histogram the requests that ran.
 * batch_stats in the statistics JSON lists every batch size 1..
 * SRV_MAX_BATCH_STATS that ran (a fixed table per model); larger batches are
 * counted in execution_count and the batch-size histogram only. */
#define SRV_MAX_BATCH_STATS 1024

/* Zeroed metrics, one reference; NULL when out of memory.  ref adds a
 * reference (returns m) and destroy drops one, freeing them with the last:
 * a reloaded version's new model shares the counters of the one it
 * replaces, so they stay monotonic across reloads, as Prometheus counters
 * must (a reload zeroed them; a fresh user's finding of 2026-12-06).  Both
 * NULL-safe and thread-safe. */
srv_metrics_t *srv_metrics_create(void);
srv_metrics_t *srv_metrics_ref(srv_metrics_t *m);
void srv_metrics_destroy(srv_metrics_t *m);

/* A request answered 200 after running: its times in nanoseconds (request:
 * arrival to response ready; queue: enqueue to batch start; compute_*: its
 * batch's times, Triton counts them per request). */
void srv_metrics_success(srv_metrics_t *m, int64_t request_ns, int64_t queue_ns, int64_t compute_input_ns,
                         int64_t compute_infer_ns, int64_t compute_output_ns);
/* A request answered 200 from the response cache (counted as success, not
 * as an inference): its request time and the lookup time. */
void srv_metrics_cache_hit(srv_metrics_t *m, int64_t request_ns, int64_t lookup_ns);
/* A cache lookup that missed (the request then runs). */
void srv_metrics_cache_miss(srv_metrics_t *m, int64_t lookup_ns);
/* A request answered with an error status. */
void srv_metrics_failure(srv_metrics_t *m, srv_fail_reason_t reason, int64_t request_ns);
/* One batch run: rows (inference count), its times in nanoseconds. */
void srv_metrics_batch(srv_metrics_t *m, int64_t rows, int64_t compute_input_ns, int64_t compute_infer_ns,
                       int64_t compute_output_ns);
/* Pending requests (queued or running): += delta. */
void srv_metrics_pending(srv_metrics_t *m, int64_t delta);

/* Totals so far: requests answered 200, requests answered with an error,
 * rows run, batches run.  Any pointer may be NULL.  Thread-safe. */
void srv_metrics_totals(const srv_metrics_t *m, int64_t *success, int64_t *failure, int64_t *rows, int64_t *batches);

/* What the renderers are given: one entry per loaded model version. */
typedef struct srv_metrics_model {
  const char *name;
  const char *version;
  const srv_metrics_t *metrics;
  int64_t memory_bytes;       /* the version's sessions' allocator bytes in use */
} srv_metrics_model_t;

/* Server-wide numbers. */
typedef struct srv_metrics_server {
  int64_t responses_by_code[6];   /* 1xx..5xx by first digit ([2] = 2xx) */
  int64_t http_404, http_400, http_503; /* a few codes on their own */
  int64_t cache_bytes, cache_max_bytes, cache_entries, cache_evictions;
  int64_t connections;            /* open now */
  /* The host, as Triton's CPU metrics: utilization of all cores since the previous scrape [0, 1], and
   * memory (MemTotal and MemTotal - MemAvailable of /proc/meminfo); have_cpu 0: not known (no /proc) */
  int have_cpu, have_mem;
  double cpu_utilization;
  int64_t cpu_memory_total, cpu_memory_used;
} srv_metrics_server_t;

/* Prometheus text exposition format 0.0.4: # HELP, # TYPE, samples. */
void srv_metrics_prometheus(const srv_metrics_model_t *models, int n, const srv_metrics_server_t *server, pl_buf_t *out);

/* Triton statistics extension: {"model_stats": [{"name", "version",
 * "last_inference" (ms since the epoch), "inference_count", "execution_count",
 * "inference_stats": {"success", "fail", "queue", "compute_input",
 * "compute_infer", "compute_output", "cache_hit", "cache_miss"} each
 * {"count", "ns"}, "batch_stats": [{"batch_size", "compute_input",
 * "compute_infer", "compute_output"}]}]} for the given entries. */
void srv_metrics_stats_json(const srv_metrics_model_t *models, int n, pl_buf_t *out);

#endif
