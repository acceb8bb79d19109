/*
 * toplu/serve.h - online inference: a KServe v2 (Open Inference Protocol)
 * HTTP server with a dynamic batcher per model.
 *
 * A server loads models from a repository folder laid out as Triton's
 *   DIR/<name>/config.json            Triton's model configuration in JSON,
 *   or DIR/<name>/config.pbtxt        or in protobuf text format (not both)
 *   DIR/<name>/<version>/model.onnx   one folder per version (1, 2, ...)
 * or serves one model file, and answers on HTTP/1.1 (libmicrohttpd):
 *   GET  /v2/health/live, /v2/health/ready, /v2
 *   GET  /v2/models/{name}[/versions/{v}][/ready|/config|/stats]
 *   POST /v2/models/{name}[/versions/{v}]/infer    JSON or binary tensors
 *   POST /v2/repository/index, /v2/repository/models/{name}/load|unload
 *   GET  /metrics                                  Prometheus text format
 * Specs: the KServe "Open Inference Protocol" REST API, Triton's binary
 * tensor data, model repository, model configuration and statistics
 * extensions, Triton's metric names.  docs/serve.md is the user's guide.
 *
 * Requests to a model wait in its queue (one per priority level) until a
 * batch forms: max_batch_size rows, a preferred batch size, or the oldest
 * request's max_queue_delay_microseconds; an idle instance then runs the
 * whole batch as one engine call and each request gets its own rows back.
 *
 * Threads: http_threads polling threads (2 to 4 by default) serve every
 * connection, never a thread per connection; each model has a scheduler
 * thread and one thread per instance.  The library never prints: it reports
 * through log (and access_log) from any of these threads, one call at a time.
 */
#ifndef TOPLU_SERVE_H
#define TOPLU_SERVE_H

#include <stddef.h>
#include <stdint.h>

#include "toplu/log.h"
#include "toplu/status.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct toplu_server toplu_server_t;

typedef struct toplu_server_options {
  /* Exactly one of the two: a repository folder (see above), or one model
   * file served with the default configuration as model_name. */
  const char *model_repository;
  const char *model_path;
  const char *model_name;     /* model_path's name; NULL: the file name without ".onnx" */
  const char *host;           /* address to listen on; NULL: all (0.0.0.0) */
  int http_port;              /* 0: any free port (toplu_server_port says which); default 8000 */
  int metrics_port;           /* also serve GET /metrics (only) on this port, as Triton's
                                 --metrics-port (8002 there); -1: any free port
                                 (toplu_server_metrics_port says which); 0 (default): none,
                                 /metrics on http_port alone (it is there either way) */
  int http_threads;           /* polling threads, each serving many connections (a request's
                                 JSON is parsed on its connection's thread); 0 (default): the
                                 cores the process may use, 2 to 4 */
  int threads;                /* engine threads per model instance; 0: the cores divided
                                 among every instance of every model of the repository
                                 at start (at least 1): more OpenMP threads than cores
                                 and GNU OpenMP sleeps at every barrier (each instance
                                 thread has its own team) */
  int fixed_threads;          /* 1: every batch size runs on `threads` over the whole batch;
                                 0 (default): each batch size's warm-up (plans up to 40 ms a
                                 run) times that against one thread or the batch split into
                                 slices of one thread each and keeps the faster, timed again
                                 when its runs slow down (toplu_session_options_t.choose_threads;
                                 the log names the choice per batch size) */
  size_t max_body_bytes;      /* largest request body; more is 413; 0 (default): 256 MiB, or a
                                 quarter of the memory available at start when that is less (at
                                 least 16 MiB) */
  size_t max_inflight_bytes;  /* request bodies held at once (as received, or decoded from
                                 gzip), plus the memory a JSON body's parse is estimated to
                                 take while it parses (48 bytes a JSON value: jansson's
                                 objects; "0,0,..." takes 22x its bytes): a body or parse
                                 past it is answered 503 (413 for a parse larger than the
                                 whole budget); 0 (default): a quarter of the memory
                                 available at start (toplu_cpu_memory_available), at
                                 least max_body_bytes */
  size_t max_header_bytes;    /* request line and headers at most; more is 431; default 64 KiB
                                 (libmicrohttpd's connection memory is this plus 192 KiB of
                                 read buffer, so that a body arrives in few reads) */
  int max_connections;        /* open connections at once; default 1024 */
  int connection_timeout_s;   /* a connection idle this long is closed; default 60 */
  int request_timeout_s;      /* a request body still arriving this long after the request
                                 began is answered 408 (a client trickling bytes); default 30 */
  int header_timeout_s;       /* a connection that has not delivered a complete request line
                                 and headers this long after it opened, or after its previous
                                 request completed, is closed (a client trickling its headers;
                                 also an idle keep-alive connection); 0: no deadline; default 30 */
  int64_t exit_timeout_ms;    /* after toplu_server_shutdown: time to finish queued and running
                                 requests before the rest get 503; default 30000 */
  size_t cache_bytes;         /* response cache bound (models enable it with response_cache);
                                 default 256 MiB */
  size_t plan_cache_bytes;    /* bytes each model instance's cached plans may hold
                                 (toplu_session_options_t.max_plan_bytes: least recently used
                                 plans are dropped; a plan larger than this runs uncached);
                                 0 (default): half of what the planner's default memory budget
                                 (80% of the memory available to the process at load,
                                 toplu_cpu_memory_available: cgroup-limit aware) leaves after
                                 the model's weights, at least an eighth of the budget.  Each
                                 new shape of an input with free dims leaves a plan with its
                                 own arena. */
  int strict_config;          /* 1: a model whose config.json fails to load fails the start;
                                 0 (default): it is logged, left unloaded, the others serve */
  int strict_readiness;       /* 1 (default, Triton's --strict-readiness=true): GET
                                 /v2/health/ready is 503 while some model of the repository
                                 failed to load (it stays so until a load of that model
                                 succeeds or it is unloaded); 0: ready once the models that
                                 did load are warm */
  /* A flag the caller may set to non-zero (toplu_run_cancel, or an atomic
   * store from a SIGTERM handler) while toplu_server_start loads: loading
   * stops before the next model and the next warm-up run, the warm-up run
   * in progress is cancelled, and toplu_server_start returns
   * TOPLU_ERR_CANCELLED without listening.  NULL: not cancellable (a stop
   * then waits for every model to load).  Read only during the start. */
  const int *cancel;
  toplu_log_fn log;           /* notes, warnings, errors; NULL: nowhere */
  void *log_user;
  /* One line per answered request when set: "METHOD PATH STATUS BYTES
   * MICROSECONDS" with the model when there is one.  Called from the polling
   * thread as the response is queued. */
  toplu_log_fn access_log;
  void *access_log_user;
} toplu_server_options_t;

/* The defaults above (port 8000, http_threads 0: 2 to 4 polling threads, ...).  NULL-safe. */
void toplu_server_options_init(toplu_server_options_t *o);

/*
 * Load the models, warm them up and start listening.  Returns once every
 * model that loads is warm (GET /v2/health/ready is then 200, or 503 when
 * some model failed to load and strict_readiness is set).  A model whose
 * max_batch_size would not fit in 80% of the memory available (inputs with all
 * non-batch dims known: the bytes a row adds, from its plans at 1 and 2
 * rows) fails to load, its error saying how many rows fit.  Errors:
 * TOPLU_ERR_INVALID_ARGUMENT (neither or both of model_repository and
 * model_path, a model_name that cannot name a model: empty is the default,
 * ".", ".." and names holding '/' are refused, bad options), TOPLU_ERR_IO (the repository cannot be read, the
 * port cannot be bound: the message names it), TOPLU_ERR_INVALID_MODEL (with
 * strict_config, a repository model that fails to load; without it the
 * server starts even when none loads, serving none, as tritonserver with
 * --exit-on-error=false), and the
 * errors of toplu_model_load / toplu_session_create for a single model,
 * TOPLU_ERR_CANCELLED (options.cancel was set while the models loaded).
 * Thread-safe (creates its own threads).
 */
toplu_status_t toplu_server_start(const toplu_server_options_t *o, toplu_server_t **out, toplu_error_t *err);

/* The port the server listens on. */
int toplu_server_port(const toplu_server_t *s);

/* The port of metrics_port's listener (0 when there is none). */
int toplu_server_metrics_port(const toplu_server_t *s);

/*
 * Begin a graceful stop: readiness false at once, stop accepting
 * connections, answer requests that arrive on open connections with 503,
 * finish every queued and running request (up to exit_timeout_ms, then 503
 * to what is left).  A model loading through the repository API stops at
 * its next warm-up run and its load is answered 503.  Returns at once;
 * toplu_server_wait waits for the end.
 * Async-signal-safe (an atomic store and a write to a pipe): call it from a
 * SIGTERM handler.  Idempotent.
 */
void toplu_server_shutdown(toplu_server_t *s);

/* Block until a shutdown has finished: every accepted request answered,
 * the listener and connections closed.  Returns TOPLU_OK, or
 * TOPLU_ERR_DEADLINE when requests were still running at exit_timeout_ms
 * (they were answered 503).  Call from one thread. */
toplu_status_t toplu_server_wait(toplu_server_t *s);

/* Free a server (after toplu_server_wait; shuts down and waits itself when
 * that was not done).  NULL-safe. */
void toplu_server_destroy(toplu_server_t *s);

#ifdef __cplusplus
}
#endif
#endif /* TOPLU_SERVE_H */
