/*
 * serve/server.h - the server's inner parts: requests in flight, loaded
 * model versions, the dynamic batcher, the model repository.
 *
 *   srv_req_t    one HTTP request: its body, the parsed inference request,
 *                its timestamps and, once answered, the response to send.
 *                Made by the HTTP layer (serve/server.c), handed to a model's
 *                batcher, finished by srv_req_finish from whichever thread
 *                answers it (instance, scheduler, polling thread).
 *   srv_model_t  one loaded model version: model, session, config, metrics,
 *                batcher; reference-counted; retired (drained, then freed)
 *                on unload or reload.
 *   srv_batcher  per model version: queues by priority level, a scheduler
 *                thread forming batches, instance threads running them.
 *   srv_repo_t   the table of loaded versions by name.
 *
 * Thread-safety is given per function.
 */
#ifndef TOPLU_SERVE_SERVER_H
#define TOPLU_SERVE_SERVER_H

#include <pthread.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include "pipeline/buf.h"
#include "serve/cache.h"
#include "serve/config.h"
#include "serve/metrics.h"
#include "serve/protocol.h"
#include "toplu/serve.h"
#include "toplu/session.h"

/* Repository requests that may wait or run at once (see srv_server_t.op_mu). */
#define SRV_MAX_PENDING_LOADS 16

typedef struct srv_model srv_model_t;
typedef struct srv_batcher srv_batcher_t;
typedef struct srv_req srv_req_t;
typedef struct srv_server srv_server_t;

/* How a request's answer is delivered: the HTTP layer's resume callback. */
typedef void (*srv_done_fn)(srv_req_t *r);

struct srv_req {
  /* Set by the HTTP layer. */
  void *conn;                  /* the libmicrohttpd connection (suspended while queued) */
  int fd;                      /* its socket, to notice a client that went away; -1: none */
  int64_t arrival_ns;          /* first byte of the request handled (toplu_monotonic_ns) */
  pl_buf_t body;               /* the request body as received */
  int64_t header_len;          /* Inference-Header-Content-Length; -1 absent */
  srv_done_fn done;            /* called once the answer is set */
  srv_model_t *model;          /* held reference */
  srv_infer_t infer;           /* the parsed request */
  pl_buf_t key;                /* response cache key (when the model caches) */

  /* Set by the batcher. */
  int level;                   /* priority level 1..n (0: one level) */
  uint64_t shape_key;          /* requests batch together only with equal keys */
  int64_t queued_ns;           /* handed to the batcher (body read and parsed): the queue time
                                  metric (nv_inference_queue_duration_us) runs from here, as
                                  Triton's covers the scheduler's queue only */
  int64_t queue_deadline_ns;   /* queue timeout as an absolute time; 0 none */
  int delayed;                 /* its DELAY timeout passed: it waits behind every request of its level that has not */
  int64_t start_ns;            /* batch start (end of queueing) */
  int64_t compute_input_ns, compute_infer_ns, compute_output_ns;
  srv_req_t *next, *prev;      /* queue links */

  /* The answer. */
  int status;                  /* HTTP status; 0 until answered */
  pl_buf_t out;                /* response body */
  size_t out_json_len;         /* JSON part of out (binary outputs follow when < out.len) */
  int answered_from_cache;
  srv_fail_reason_t reason;    /* for failures */
  atomic_int finished;
};

/* Answer r with status and a JSON error message (formatted); counts the
 * failure under reason in r's model's metrics when it has one; calls r->done.
 * Thread-safe; once per request. */
void srv_req_fail(srv_req_t *r, int status, srv_fail_reason_t reason, const char *fmt, ...) TOPLU_PRINTF(4, 5);
/* Call r->done (the response is set). */
void srv_req_finish(srv_req_t *r);

/* A loaded model version. */
struct srv_model {
  char name[SRV_NAME_MAX];
  char version[32];
  int64_t version_num;
  uint64_t owner;              /* unique id: cache owner */
  srv_config_t cfg;
  int64_t max_batch_size;      /* the one in force (cfg's, or the planner's) */
  char batch_source[1024];      /* where it came from, for logs and .../config */
  /* The batch sizes plans are built for, ascending, the last max_batch_size:
   * powers of two, the preferred sizes and the max.  A batch of other size
   * runs padded with zero rows to the next one, so a session holds a few
   * plans (arenas) instead of one per size 1..max_batch_size. */
  int64_t plan_sizes[48];
  int n_plan_sizes;
  toplu_model_t *model;
  toplu_session_t *session;
  toplu_allocator_t *alloc;
  srv_metrics_t *metrics;
  srv_batcher_t *batcher;
  srv_server_t *server;
  atomic_int refs;
  atomic_int ready;
  int64_t loaded_ms;           /* wall clock at load, ms since the epoch */
};

/* Server internals shared by the parts. */
struct srv_server {
  toplu_server_options_t opts;
  char repo_dir[4096];
  srv_cache_t *cache;
  atomic_int stopping;
  int load_cancel;             /* set (atomic store) by a shutdown: loads stop at their next warm-up run */
  const int *start_cancel;     /* toplu_server_options_t.cancel while toplu_server_start loads, else NULL */
  atomic_long inflight;        /* requests received and not yet completed by libmicrohttpd */
  atomic_long responses_by_code[6];
  atomic_long http_400, http_404, http_503, connections;
  /* Bytes of request bodies and JSON parses held now (max_inflight_bytes). */
  atomic_size_t held_bytes;
  /* nv_cpu_utilization: /proc/stat's jiffies at the last /metrics scrape (or the start), under cpu_mu */
  pthread_mutex_t cpu_mu;
  unsigned long long cpu_total, cpu_idle;
  double cpu_util;
  /* Open connections that have sent an inference request and wait for
   * nothing now, in the order they went idle (idle_mu): the clients that
   * could send the next request.  When none went idle recently, no request
   * is likely to join a forming batch (every client that sends is waiting
   * for an answer; a connection idle for long is a pooled one), and the
   * batcher sends it without waiting out max_queue_delay_microseconds
   * (serve/batcher.c, srv_last_idle_ns). */
  pthread_mutex_t idle_mu;
  struct conn_ctx *idle_head, *idle_tail;
  atomic_ullong next_owner;
  /* Model instances the cores are divided among when threads is 0: every
   * instance of every model of the repository at start (one engine call per
   * instance at a time, each with its own OpenMP team; more OpenMP threads
   * than cores and libgomp sleeps at every barrier). */
  int instance_budget;
  pthread_mutex_t log_mu;      /* one log call at a time */
  pthread_mutex_t repo_mu;     /* the model table */
  /* Repository requests (POST .../load and .../unload) run one at a time,
   * in the order they arrived: each takes a ticket (op_next) when it
   * arrives and runs when op_serving reaches it (loads and unloads of one
   * model ran at once and the last to finish won: an unload answered 200
   * was undone by a load still running).  At most SRV_MAX_PENDING_LOADS wait
   * or run; more are answered 503 (each load held its own memory and
   * threads: twelve at once took 737 MB for a 130 MB model).  Both fresh
   * users' findings of 2026-12-06. */
  pthread_mutex_t op_mu;
  pthread_cond_t op_cv;          /* a turn ended or a request finished (CLOCK_MONOTONIC) */
  uint64_t op_next, op_serving;  /* under op_mu */
  struct repo_op *ops;           /* the requests waiting or running, under op_mu: a stop answers those still
                                  * there at its deadline (libmicrohttpd aborts the process when it is stopped
                                  * with a suspended connection) */
  atomic_int loads_pending;
  char loading[SRV_NAME_MAX];    /* the model a load is loading now ("": none), under repo_mu: LOADING in the index */
  srv_model_t **models;        /* loaded versions, under repo_mu */
  int n_models, cap_models;
  char **failed;               /* names that failed to load and why: "name\tmessage" */
  int n_failed;
  pthread_mutex_t retire_mu;
  pthread_cond_t retire_cv;
  srv_model_t **retired;       /* unloaded versions waiting to drain */
  int n_retired, cap_retired;
  pthread_t reaper;
  int reaper_started;
};

/* When the most recently idle inference connection went idle
 * (toplu_monotonic_ns), 0 when there is none.  Thread-safe. */
int64_t srv_last_idle_ns(srv_server_t *s);

/* Condition variables timed on CLOCK_MONOTONIC (toplu_monotonic_ns), so
 * that a wall-clock step moves no deadline: srv_cond_init_monotonic
 * initialises cv; srv_cond_wait_until waits on cv (mu held) until it is
 * signalled or toplu_monotonic_ns() reaches wake_ns (<= 0: no time limit).
 * Thread-safety as pthread_cond_*. */
void srv_cond_init_monotonic(pthread_cond_t *cv);
void srv_cond_wait_until(pthread_cond_t *cv, pthread_mutex_t *mu, int64_t wake_ns);

void srv_log(srv_server_t *s, toplu_log_level_t level, const char *fmt, ...) TOPLU_PRINTF(3, 4);

/* The flag a loading model's warm-up runs watch: the caller's cancel while
 * toplu_server_start loads, else the shutdown's. */
static inline const int *srv_load_cancel_flag(const srv_server_t *s) {
  return s->start_cancel ? s->start_cancel : &s->load_cancel;
}

/* 1 when loads must stop: the server is stopping, or the start was cancelled. */
static inline int srv_load_cancelled(const srv_server_t *s) {
  return __atomic_load_n(&s->load_cancel, __ATOMIC_ACQUIRE) ||
         (s->start_cancel && __atomic_load_n(s->start_cancel, __ATOMIC_ACQUIRE));
}

/*
 * Load one model version: the file, a session, the batch size (config,
 * tune.json beside the model, or the planner), the batch-dim check, the
 * batcher, warm-up.  cfg: parsed config (defaults for a single file).  A
 * batch size toplu chooses (no max_batch_size in cfg) turns the dynamic
 * batcher on, as Triton's auto-complete does.
 * Returns 0, or -1 with err set.  Thread-safe.
 */
int srv_model_load(srv_server_t *s, const char *name, const char *version, const char *model_file,
                   const srv_config_t *cfg, srv_model_t **out, toplu_error_t *err);
/* The batch size a batch of rows runs at: the smallest plan size >= rows
 * (rows itself when larger than all, or without batching). */
int64_t srv_model_plan_rows(const srv_model_t *m, int64_t rows);
void srv_model_ref(srv_model_t *m);
void srv_model_unref(srv_model_t *m);
/* Free a version whose batcher is drained and refs are 0. */
void srv_model_free(srv_model_t *m);

/* The batcher of m: start its threads. */
int srv_batcher_create(srv_model_t *m, toplu_error_t *err);
/*
 * Queue r (parsed, r->model set).  Returns 0, or an HTTP status with r
 * answered (503 when the queue is full or the server is shutting down; 400
 * for a priority outside the levels), or SRV_SUBMIT_RETIRED with r untouched
 * when this version was unloaded or replaced since the caller found it (the
 * caller looks the model up again: a reload never fails a request).
 * Requests the batcher takes are answered later from its threads.
 * Thread-safe.
 */
#define SRV_SUBMIT_RETIRED (-2)
int srv_batcher_submit(srv_batcher_t *b, srv_req_t *r);
/*
 * Run r on the calling thread, now, when the batcher would run it alone at
 * once anyway: nothing is queued, an instance is idle, r is a batch that
 * is ready by itself (the rules of serve/batcher.c), and the plan for its
 * shape is cached and runs on one thread (toplu_session_plan_threads).
 * Saves the two thread hand-offs of a queued request (to the instance,
 * and back to the HTTP thread); the caller's other connections wait while
 * it runs, so the HTTP side calls it only when no other request is in
 * flight.  Returns 1 with r answered (r->done called when set; status and
 * body in r), 0 with r untouched but for its level, shape key and
 * deadlines (submit it).  Thread-safe.
 */
int srv_batcher_run_inline(srv_batcher_t *b, srv_req_t *r);
/* Requests queued or running. */
int64_t srv_batcher_pending(srv_batcher_t *b);
/* Stop taking requests; run what is queued.  With cancel, fail the queue
 * with 503 and cancel running batches.  Thread-safe. */
void srv_batcher_drain(srv_batcher_t *b, int cancel);
/* Wait (up to deadline_ns, 0: forever) until nothing is queued or running;
 * 0 when drained, -1 at the deadline. */
int srv_batcher_wait_idle(srv_batcher_t *b, int64_t deadline_ns);
/* Join the threads and free (after drain and wait_idle). */
void srv_batcher_destroy(srv_batcher_t *b);

/* The model table.  srv_repo_find returns a held reference (unref it) to
 * version (NULL or "": the highest loaded), or NULL.  Thread-safe. */
srv_model_t *srv_repo_find(srv_server_t *s, const char *name, const char *version);
/* 1 when name is a model the repository knows but has no loaded version
 * of (a folder of the repository, or a load that failed), else 0.
 * Thread-safe. */
int srv_repo_known(srv_server_t *s, const char *name);
/* Load (or reload) name from the repository: new versions replace old ones
 * only once loaded and warm; the old ones drain.  config_json: a
 * configuration to use instead of DIR/<name>/config.pbtxt or config.json (the load
 * request's parameters.config), NULL: the file.  Returns 0, or -1 with err
 * (TOPLU_ERR_INVALID_ARGUMENT for a bad config_json, TOPLU_ERR_NOT_FOUND
 * for an unknown name: a name whose folder is gone also loses its earlier
 * failed load, so strict readiness no longer waits for it). */
int srv_repo_load(srv_server_t *s, const char *name, const char *config_json, toplu_error_t *err);
/* 1 when n can name a model: not empty, not "." or "..", no '/', shorter
 * than SRV_NAME_MAX (the repository API's rule, also for --model-name).
 * Pure function. */
int srv_repo_valid_name(const char *n);
/* Put one loaded version m into the table (the single model file's), in
 * place of any of its name.  0, or -1 (m freed) when out of memory. */
int srv_repo_add(srv_server_t *s, srv_model_t *m, toplu_error_t *err);
/* Unload every version of name (they drain) and clear its failed load, if
 * any (strict readiness no longer waits for it).  0, or -1 (NOT_FOUND, naming
 * the model) when name has neither a loaded version nor a failed load.
 * Thread-safe (repo_mu). */
int srv_repo_unload(srv_server_t *s, const char *name, toplu_error_t *err);
/* The repository index (POST /v2/repository/index) as JSON into out:
 * [{"name", "version", "state": READY | LOADING | UNAVAILABLE, "reason"}]
 * sorted by name and version, one entry per name and version; a failed
 * reload whose old versions still serve gives its reason on their entries
 * (no UNAVAILABLE entry); ready_only: the READY ones alone.  Thread-safe. */
void srv_repo_index_json(srv_server_t *s, int ready_only, pl_buf_t *out);
/* Load every model of the repository (start-up). */
int srv_repo_load_all(srv_server_t *s, toplu_error_t *err);
/* Start the reaper thread (frees retired versions once drained). */
int srv_repo_start(srv_server_t *s, toplu_error_t *err);
/* Drain every version (shutdown): 0 when all finished by deadline_ns. */
int srv_repo_drain_all(srv_server_t *s, int64_t deadline_ns);
/* Stop the reaper and free every version. */
void srv_repo_destroy(srv_server_t *s);

/* Wall clock in ms since the epoch. */
int64_t srv_wall_ms(void);

#endif
