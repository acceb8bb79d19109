/*
 * toplu/perf.h - a load generator for KServe v2 (Open Inference Protocol)
 * HTTP servers, measuring as Triton's perf_analyzer does.
 *
 * toplu_perf_run() asks the server for the model's metadata
 * (GET /v2/models/NAME[/versions/V]) and config (.../config, for
 * max_batch_size), builds the request bodies once (random, zero or given
 * data; JSON or the binary tensor data extension), then sweeps load levels:
 *
 *   closed loop  (TOPLU_PERF_CONCURRENCY) N virtual clients, each sending
 *                its next request when the previous one is answered;
 *   open loop    (TOPLU_PERF_REQUEST_RATE) requests start at scheduled
 *                times, evenly spaced (constant) or with exponential gaps
 *                from a seeded PRNG (poisson), on as many connections as
 *                needed; how late each start was is reported.
 *
 * One thread drives every connection with epoll: one non-blocking HTTP/1.1
 * keep-alive connection per virtual client, each request prebuilt whole
 * (request line, headers and body in one buffer, so it leaves in one
 * send(2) as wrk's do), responses read with Content-Length or chunked
 * framing; a connection the server closed while idle is reopened and the
 * request sent again once.  The model's metadata and config are read with
 * libcurl before the run.
 *
 * Measurement (perf_analyzer's time windows): at each level, windows of
 * measurement_interval_ms are measured back to back until the last three
 * windows' throughput and latency (the average, or the percentile option's
 * percentile) are each within stability_percentage of their mean, or
 * max_trials windows have run (the level is then marked unstable and still
 * reported).  A level reports the three last windows together: mean
 * throughput, and latency percentiles over their requests merged.  A
 * request belongs to the window in which its response arrived; latency is
 * from the request's send to its last response byte.
 *
 * Server-side times: GET /metrics (Prometheus text) is read at every window
 * boundary; the deltas over the reported windows of Triton's counters for
 * the model (nv_inference_queue_duration_us,
 * nv_inference_compute_{input,infer,output}_duration_us, divided by the
 * delta of nv_inference_request_success; label model="NAME", and
 * version="V" when a version is given) give the per-request server queue
 * and compute times.  A server without /metrics leaves them unknown.
 *
 * Errors: responses other than 200 and transport failures (status 0:
 * refused, reset, a malformed response, timed out) are counted by status and do not stop the
 * run; a level where no request succeeded ends the sweep after it is
 * reported (toplu_perf_result_t.failed_level).
 *
 * The library prints nothing: progress goes to options.log; the table is
 * the caller's to print from the result.
 *
 * Thread-safety: toplu_perf_run uses only its own state (libcurl's global
 * init must have been done, which toplu_perf_run does once, thread-safely
 * on libcurl >= 7.84); calls on different results are independent.
 */
#ifndef TOPLU_PERF_H
#define TOPLU_PERF_H

#include <stdint.h>

#include "toplu/log.h"
#include "toplu/status.h"
#include "toplu/tensor.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum toplu_perf_mode {
  TOPLU_PERF_CONCURRENCY = 0, /* closed loop: range values are client counts */
  TOPLU_PERF_REQUEST_RATE = 1 /* open loop: range values are requests per second */
} toplu_perf_mode_t;

typedef enum toplu_perf_distribution {
  TOPLU_PERF_CONSTANT = 0, /* evenly spaced starts, 1/rate apart */
  TOPLU_PERF_POISSON = 1   /* exponential gaps of mean 1/rate (seeded) */
} toplu_perf_distribution_t;

/* The shape to use for an input with variable dims: its dims without the
 * batch dim when the model batches (max_batch_size > 0), else its full
 * shape (perf_analyzer's --shape). */
typedef struct toplu_perf_shape {
  const char *name;
  int ndim;
  int64_t dims[TOPLU_MAX_DIMS];
} toplu_perf_shape_t;

typedef struct toplu_perf_options {
  const char *model;   /* required */
  const char *version; /* NULL or "": the server's choice */
  const char *url;     /* "HOST:PORT" or "http://HOST:PORT"; NULL: "localhost:8000" */
  int64_t batch_size;  /* rows per request (dim 0 of every input); 0 means 1, or the first dim of
                          an input_data .npy file that has the batch dim.  Above 1 needs a batching
                          model (config max_batch_size > 0, or metadata dim 0 of -1) */
  const toplu_perf_shape_t *shapes; /* n_shapes entries; a name the model lacks is TOPLU_ERR_NOT_FOUND */
  int n_shapes;
  toplu_perf_mode_t mode;
  /* The sweep: start, start+step, ... up to end (inclusive).  end 0 means
   * end = start, and 0 < end < start is TOPLU_ERR_INVALID_ARGUMENT (until
   * 2026-12-04 it ran start alone); step <= 0 means 1.  Concurrency values are whole
   * numbers >= 1 (at most TOPLU_PERF_MAX_CLIENTS); rates are > 0 and at most
   * 1e6 per second.  start 0 means 1 in both modes. */
  double range_start, range_end, range_step;
  toplu_perf_distribution_t distribution;
  int64_t measurement_interval_ms; /* window length; 0 means 5000 */
  double stability_percentage;     /* 0 means 10 */
  int max_trials;                  /* windows per level at most; 0 means 10; under 3 (no three windows to
                                      agree) the level runs that many and is reported unstable */
  int percentile;                  /* 0: stabilize on average latency; 1..99: on that percentile */
  double latency_threshold_ms;     /* > 0: stop the sweep after a level whose stabilizing latency passes it */
  /* Input data: NULL or "random" (uniform values of the input's dtype:
   * floats in [0,1), integers in [0,100), BOOL 0/1, BYTES 8 letters), "zero",
   * or a path: a .npy file (the model must have one input; its shape is
   * that input's request shape, or the shape without batch dim, repeated
   * batch_size times), a JSON file in perf_analyzer's input-data format
   * {"data": [{"NAME": [flat values] | {"content": [...], "shape": [...]}},
   * ...]} (one entry per request body, used in turn; values without the
   * batch dim when the model batches, repeated batch_size times), or a
   * directory as perf_analyzer's --input-data takes it: one file per input,
   * named as the input, holding one request's values (without the batch dim
   * when the model batches; repeated batch_size times) as raw little-endian
   * bytes in row-major order, or a BYTES input's strings one per line.  One
   * dim the model leaves open is read off the file's size; more need shapes.
   * Errors name the file (TOPLU_ERR_NOT_FOUND for a missing one,
   * TOPLU_ERR_SHAPE for a size that does not fit). */
  const char *input_data;
  int json_input;           /* 0: binary tensor data extension (perf_analyzer's default); 1: JSON "data" */
  int json_output;          /* 0: ask for binary outputs (binary_data_output); 1: JSON outputs */
  uint64_t seed;            /* PRNG seed for random data and poisson gaps; 0 means 1 */
  int64_t request_timeout_ms; /* per inference request, 0..86400000; 0 means 30000 (a timeout counts as status 0);
                                 the metadata, config and /metrics GETs have a fixed 30000 of their own */
  int64_t max_connections;  /* open loop: connections at most, 1..TOPLU_PERF_MAX_CLIENTS; 0 means
                               TOPLU_PERF_OPEN_CONNECTIONS.  A request due while every connection is
                               busy waits for one (counted in late_avg_us and late_max_us).  Above
                               the server's own connection limit, the extra connections wait unaccepted
                               while idle keep-alive ones hold the server's slots (toplu serve: until
                               its header_timeout_s), and their requests time out. */
  /* Extra HTTP header fields sent with every request (metadata, config, inferences, /metrics), each
   * "Name: value" as perf_analyzer's -H takes them (an Authorization header behind a proxy); n_headers
   * entries, at most 64, each under 1 KiB, without CR or LF (else TOPLU_ERR_INVALID_ARGUMENT). */
  const char *const *headers;
  int n_headers;
  toplu_log_fn log;         /* a line per window (TOPLU_LOG_PROGRESS) and per level (NOTE); NULL: none */
  void *log_user;
  const volatile int *cancel; /* non-NULL and set: stop after the current window (TOPLU_ERR_CANCELLED,
                                 the levels measured so far kept) */
} toplu_perf_options_t;

/* Most concurrent clients or connections. */
#define TOPLU_PERF_MAX_CLIENTS 4096
/* The open loop's default connection cap: under toplu serve's default max_connections (1024), so that
 * every connection is accepted and the server's probes and /metrics still get one. */
#define TOPLU_PERF_OPEN_CONNECTIONS 1000
/* Distinct HTTP statuses a level counts (further ones are added to the last). */
#define TOPLU_PERF_MAX_STATUSES 8

/* Responses of one status. */
typedef struct toplu_perf_status_count {
  int status;    /* HTTP status; 0: no response (refused, reset, timed out) */
  int64_t count;
} toplu_perf_status_count_t;

/* One load level, over its reported (last three) windows.  Times in
 * microseconds, rates per second. */
typedef struct toplu_perf_level {
  double value;             /* concurrency or requested rate */
  int stable;               /* 1: the three windows agreed; 0: max_trials reached */
  int trials;               /* windows measured */
  double window_s;          /* seconds covered by the reported windows */
  int64_t requests;         /* responses in them, all statuses */
  int64_t successes;        /* 200 responses */
  double requests_per_s;    /* successes / window_s */
  double infer_per_s;       /* requests_per_s * batch_size (rows per second) */
  double sent_per_s;        /* requests started per second (open loop: compare with value) */
  double p50_us, p90_us, p95_us, p99_us, avg_us; /* latency of the successes */
  double stab_latency_us;   /* the latency stability was judged on (avg or the percentile) */
  double client_send_us;    /* per request: preparing the request on the client (bodies are prebuilt) */
  double client_recv_us;    /* per request: first response byte to last */
  double late_avg_us, late_max_us; /* open loop: start time after the scheduled time */
  int n_statuses;
  toplu_perf_status_count_t statuses[TOPLU_PERF_MAX_STATUSES]; /* every status seen, 200 first when seen */
  int64_t timeouts;         /* of the status-0 count: requests that passed request_timeout_ms, also
                               those in flight when the level's windows ended (they count in its
                               last window: a server that answers nothing is all errors, not idle) */
  int server_metrics;       /* 1: the fields below come from /metrics deltas */
  int64_t server_successes; /* nv_inference_request_success delta */
  int64_t server_inferences, server_executions; /* nv_inference_count, nv_inference_exec_count deltas */
  double server_queue_us, server_compute_input_us, server_compute_infer_us, server_compute_output_us;
  /* nv_cache_num_hits_per_model, nv_cache_num_misses_per_model deltas: requests the response cache answered
   * (no inference ran: the times above are averaged over them too) and lookups it missed; 0 and 0 for a model
   * without response_cache */
  int64_t server_cache_hits, server_cache_misses;
} toplu_perf_level_t;

typedef struct toplu_perf_result {
  toplu_perf_mode_t mode;
  int64_t batch_size;
  int percentile;           /* as in the options (0: average) */
  char model_version[64];   /* the version the metadata named first ("" when none) */
  int n_levels;
  toplu_perf_level_t *levels; /* in sweep order */
  int failed_level;         /* index of a level where nothing succeeded (the sweep stopped there); -1 none */
  int threshold_stop;       /* 1: the sweep stopped at latency_threshold_ms */
  char note[256];           /* the first error response body seen, shortened ("" none) */
} toplu_perf_result_t;

/*
 * Run the sweep.  out is filled (free with toplu_perf_result_free) even on
 * TOPLU_ERR_CANCELLED.  Errors before any load: TOPLU_ERR_INVALID_ARGUMENT
 * (an option out of range, naming its field), TOPLU_ERR_IO (server
 * unreachable: the message names the URL and libcurl's reason; an input
 * data file unreadable), TOPLU_ERR_NOT_FOUND (the server answered 404 for
 * the model or version; a shapes name the model lacks), TOPLU_ERR_SHAPE (an
 * input with a variable dim and no shapes entry, naming the input; a shape
 * or data that does not fit the input; batch_size above 1 or above
 * max_batch_size of the model), TOPLU_ERR_PARSE (metadata or input data
 * that is not what the protocol says), TOPLU_ERR_UNSUPPORTED (a datatype
 * toplu lacks), TOPLU_ERR_OUT_OF_MEMORY.
 */
toplu_status_t toplu_perf_run(const toplu_perf_options_t *opt, toplu_perf_result_t *out, toplu_error_t *err);

/* Free what toplu_perf_run put in r; zeroes it.  NULL-safe. */
void toplu_perf_result_free(toplu_perf_result_t *r);

/*
 * Write perf_analyzer's CSV (-f): header "Concurrency" (or "Request Rate"),
 * "Inferences/Second,Client Send,Network+Server Send/Recv,Server Queue,
 * Server Compute Input,Server Compute Infer,Server Compute Output,Client
 * Recv,p50 latency,p90 latency,p95 latency,p99 latency", and with verbose
 * ",Avg latency,request/response,response wait" (perf_analyzer's
 * --verbose-csv), then toplu's own last column "Errors" (the level's failed
 * requests: requests - successes; perf_analyzer's columns stay first and in
 * their order); one row per level, sorted by increasing Inferences/Second
 * as perf_analyzer sorts them; times in whole microseconds.  Network+Server
 * Send/Recv is the average latency less client send and receive and the
 * server's queue and compute times (0 when it would be negative); server
 * columns are 0 when the server gave no metrics.  request/response is
 * client send + receive; response wait is average latency less that.
 * Errors: TOPLU_ERR_IO naming the path.
 */
toplu_status_t toplu_perf_write_csv(const toplu_perf_result_t *r, const char *path, int verbose, toplu_error_t *err);

/*
 * Write a PNG plot of p50 and p99 latency (usec, y) against throughput
 * (inferences/s, x), one point per level: axes with ticks and numbers, a
 * legend.  Needs at least one level.  Errors: TOPLU_ERR_INVALID_ARGUMENT (no
 * levels), TOPLU_ERR_IO naming the path, TOPLU_ERR_OUT_OF_MEMORY.
 */
toplu_status_t toplu_perf_write_plot(const toplu_perf_result_t *r, const char *path, toplu_error_t *err);

#ifdef __cplusplus
}
#endif
#endif /* TOPLU_PERF_H */
