/*
 * serve/server.c - the HTTP side of toplu_server_t (toplu/serve.h) on
 * libmicrohttpd: routing of the KServe v2 endpoints, the request bodies,
 * suspending a connection while its request waits in a batcher and
 * resuming it with the answer, metrics and statistics, the repository
 * endpoints, and the graceful stop.
 *
 * libmicrohttpd runs with its own polling thread(s) on poll(2)
 * (MHD_USE_POLL_INTERNAL_THREAD): many connections per thread.  Not epoll:
 * with libmicrohttpd 0.9.75's epoll mode a client that closes in the middle
 * of a request body keeps its connection until the idle timeout (measured:
 * 44 of 50 such connections still open after 0.5 s; none with poll).  An
 * inference request is parsed in the polling thread when its body is
 * complete, then the connection is suspended (MHD_suspend_connection) and
 * the request handed to its model's batcher; the thread that answers it
 * resumes the connection (MHD_resume_connection), and the polling thread
 * queues the response.  Every request ends in exactly one response, and
 * the counters of /metrics count each once (success, or failure with a
 * reason; server-wide responses by status class).
 */
#include <arpa/inet.h>
#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <jansson.h>
#include <microhttpd.h>
#include <netinet/in.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>
#include <zlib.h>

#include "core/error.h"
#include "serve/server.h"
#include "toplu/planner.h"
#include "toplu/profile.h"
#include "toplu/toplu.h"

struct toplu_server {
  srv_server_t s;
  struct MHD_Daemon *daemon;
  struct MHD_Daemon *metrics_daemon; /* metrics_port's listener: GET /metrics only; NULL when none or stopped */
  const struct MHD_Daemon *metrics_id; /* the same, set once at start and never cleared (read by route) */
  int pipe_fd[2];
  int port, metrics_port;
  int ops_left;                      /* repository threads outlived the stop: free nothing */
  atomic_int shutdown_requested;
  int waited;
  toplu_status_t wait_status;
  int single;
  /* The header deadline (header_timeout_s): every open connection, and a
   * thread that closes those that have waited too long for a request. */
  pthread_mutex_t conn_mu;
  struct conn_ctx *conn_head;
  pthread_t watch;
  int watch_started, watch_stop;
  pthread_cond_t watch_cv;
};

enum { PH_RECEIVING = 0, PH_QUEUED = 1, PH_ANSWERED = 2, PH_SENT = 3 };

/* libmicrohttpd reads a request into its connection's memory pool, whose
 * size also bounds the request line and headers.  toplu checks those
 * against max_header_bytes itself (431) and gives the pool this much more.
 * libmicrohttpd's first read buffer is half the pool, so a body up to
 * about that size arrives in one read: a 110 KiB binary request took 4
 * recv(2) calls and 4 callbacks with the pool at 64 KiB, and 1 with 256
 * KiB (strace).  Not more: libmicrohttpd zeroes the whole pool between two
 * requests on a connection (MHD_pool_reset), and at 512 KiB that memset
 * was 2.4% of the serving thread's time at concurrency 1 (perf record). */
#define SRV_READ_ROOM ((size_t)192 << 10)

/* Per connection: whether it has sent an inference request, and whether
 * one is in flight on it (srv_server.idle_infer_conns). */
typedef struct conn_ctx {
  int infer_seen;
  int busy;
  int listed;                  /* on the idle list */
  int64_t idle_since;
  struct conn_ctx *prev, *next;
  /* Under toplu_server.conn_mu: */
  int fd;                      /* its socket */
  int in_request;              /* its request line and headers are in; until the request completes */
  int cut;                     /* shut down by the header deadline */
  int64_t waiting_since;       /* when it opened or its previous request completed */
  struct conn_ctx *cprev, *cnext; /* toplu_server.conn_head */
} conn_ctx_t;

/* /proc/stat's first line: all jiffies and the idle ones (idle + iowait); 0 when it cannot be read. */
static int read_cpu_jiffies(unsigned long long *total, unsigned long long *idle) {
  FILE *f = fopen("/proc/stat", "r");
  if (!f) return 0;
  unsigned long long v[8] = {0};
  int n = fscanf(f, "cpu %llu %llu %llu %llu %llu %llu %llu %llu", &v[0], &v[1], &v[2], &v[3], &v[4], &v[5], &v[6],
                 &v[7]);
  fclose(f);
  if (n < 4) return 0;
  *total = v[0] + v[1] + v[2] + v[3] + v[4] + v[5] + v[6] + v[7];
  *idle = v[3] + v[4];
  return 1;
}

/* The host's CPU utilization since the previous scrape (the first: since the server started) and its
 * memory, as Triton's nv_cpu_* metrics (Triton samples on its metrics interval; a scrape is toplu's). */
static void host_metrics(srv_server_t *s, srv_metrics_server_t *sv) {
  unsigned long long total, idle;
  if (read_cpu_jiffies(&total, &idle)) {
    pthread_mutex_lock(&s->cpu_mu);
    if (total > s->cpu_total && s->cpu_total) {
      unsigned long long dt = total - s->cpu_total, di = idle >= s->cpu_idle ? idle - s->cpu_idle : 0;
      s->cpu_util = di >= dt ? 0.0 : 1.0 - (double)di / (double)dt;
      s->cpu_total = total, s->cpu_idle = idle;
    } else if (!s->cpu_total) {
      s->cpu_total = total, s->cpu_idle = idle;
    }
    sv->cpu_utilization = s->cpu_util; /* (two scrapes within a jiffy: the previous value) */
    sv->have_cpu = 1;
    pthread_mutex_unlock(&s->cpu_mu);
  }
  FILE *f = fopen("/proc/meminfo", "r");
  if (!f) return;
  char line[256];
  long long mt = -1, ma = -1, v;
  while (fgets(line, sizeof line, f)) {
    if (sscanf(line, "MemTotal: %lld kB", &v) == 1) mt = v;
    else if (sscanf(line, "MemAvailable: %lld kB", &v) == 1) ma = v;
  }
  fclose(f);
  if (mt >= 0 && ma >= 0 && ma <= mt) {
    sv->have_mem = 1;
    sv->cpu_memory_total = mt * 1024;
    sv->cpu_memory_used = (mt - ma) * 1024;
  }
}

static void idle_remove(srv_server_t *s, conn_ctx_t *cc) {
  pthread_mutex_lock(&s->idle_mu);
  if (cc->listed) {
    if (cc->prev) cc->prev->next = cc->next;
    else s->idle_head = cc->next;
    if (cc->next) cc->next->prev = cc->prev;
    else s->idle_tail = cc->prev;
    cc->prev = cc->next = NULL;
    cc->listed = 0;
  }
  pthread_mutex_unlock(&s->idle_mu);
}

static void idle_append(srv_server_t *s, conn_ctx_t *cc) {
  pthread_mutex_lock(&s->idle_mu);
  if (!cc->listed) {
    cc->idle_since = toplu_monotonic_ns();
    cc->prev = s->idle_tail;
    cc->next = NULL;
    if (s->idle_tail) s->idle_tail->next = cc;
    else s->idle_head = cc;
    s->idle_tail = cc;
    cc->listed = 1;
  }
  pthread_mutex_unlock(&s->idle_mu);
}

int64_t srv_last_idle_ns(srv_server_t *s) {
  pthread_mutex_lock(&s->idle_mu);
  int64_t t = s->idle_tail ? s->idle_tail->idle_since : 0;
  pthread_mutex_unlock(&s->idle_mu);
  return t;
}

/* A connection's request line and headers are in (entering 1) or its
 * request completed (0): the header deadline counts from then. */
static void conn_mark(toplu_server_t *ts, struct MHD_Connection *c, int entering) {
  const union MHD_ConnectionInfo *sc = MHD_get_connection_info(c, MHD_CONNECTION_INFO_SOCKET_CONTEXT);
  conn_ctx_t *cc = sc ? sc->socket_context : NULL;
  if (!cc) return;
  pthread_mutex_lock(&ts->conn_mu);
  cc->in_request = entering;
  if (!entering) cc->waiting_since = toplu_monotonic_ns();
  pthread_mutex_unlock(&ts->conn_mu);
}

typedef struct http_req {
  srv_req_t r;                 /* first: a srv_req_t * is an http_req * */
  toplu_server_t *srv;
  int phase;
  int too_large;
  int too_late;                /* answered 408: the body came too slowly */
  int body_timeout;            /* the connection's idle timeout is request_timeout_s while the body arrives */
  int head_too_large;          /* answered 431: request line and headers over max_header_bytes */
  int must_close;              /* answered 400 for both Transfer-Encoding and Content-Length: close after it */
  int too_busy;                /* the body would take the held bytes past max_inflight_bytes: 1, 503 (other requests
                                * hold the rest); 2, 413 (it alone is more) */
  size_t busy_bytes;           /* too_busy: the body's bytes when it was dropped */
  size_t held;                 /* bytes this request holds of srv_server_t.held_bytes */
  z_stream *z;                 /* Content-Encoding gzip or deflate: the body is inflated as it arrives */
  const char *enc_name;        /* "gzip" or "deflate" */
  int z_done;                  /* the compressed stream ended */
  int enc_status;              /* 400 (corrupt or truncated data) or 415 (an encoding toplu lacks); 0: fine */
  char enc_error[200];         /* and why */
  int64_t content_length;
  const char *method;          /* method_buf's copy once the request is set up */
  char method_buf[16];
  char url[512];
  const char *allow;           /* the Allow header of a 405 */
  int async_kind;              /* 1: repository load or unload (a repo_op_t answers it) */
  conn_ctx_t *cc;              /* its connection's, when it is an inference request in flight */
} http_req_t;

/* Hold n more bytes for h against max_inflight_bytes: 0, or -1 (nothing held) when the server's held bytes
 * would pass it.  Any thread. */
static int hold_bytes(srv_server_t *s, http_req_t *h, size_t n) {
  size_t now = atomic_fetch_add(&s->held_bytes, n) + n;
  if (now > s->opts.max_inflight_bytes) {
    atomic_fetch_sub(&s->held_bytes, n);
    return -1;
  }
  h->held += n;
  return 0;
}

/* Give back n of the bytes h holds (all of them when n exceeds them). */
static void release_bytes(srv_server_t *s, http_req_t *h, size_t n) {
  if (n > h->held) n = h->held;
  atomic_fetch_sub(&s->held_bytes, n);
  h->held -= n;
}

/* Why n more bytes of h's body could not be held: 2 when h alone would pass max_inflight_bytes (413: no retry can
 * succeed), 1 when other requests hold the rest (503); notes the body's size. */
static int busy_kind(srv_server_t *s, http_req_t *h, size_t n) {
  h->busy_bytes = h->held + n;
  return h->held + n > s->opts.max_inflight_bytes ? 2 : 1;
}

/* The body is dropped (413, 408, 503, a decoding error): its memory and what it held go back. */
static void drop_body(srv_server_t *s, http_req_t *h) {
  pl_buf_free(&h->r.body);
  release_bytes(s, h, h->held);
}

/* ---------------------------------------------------------------- logging */

void srv_log(srv_server_t *s, toplu_log_level_t level, const char *fmt, ...) {
  if (!s->opts.log) return;
  char msg[TOPLU_ERROR_MESSAGE_MAX * 2];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  pthread_mutex_lock(&s->log_mu);
  s->opts.log(s->opts.log_user, level, msg);
  pthread_mutex_unlock(&s->log_mu);
}

static void mhd_logger(void *cls, const char *fmt, va_list ap) {
  srv_server_t *s = cls;
  if (!s->opts.log) return;
  char msg[1024];
  vsnprintf(msg, sizeof msg, fmt, ap);
  size_t n = strlen(msg);
  while (n && (msg[n - 1] == '\n' || msg[n - 1] == '\r')) msg[--n] = 0;
  srv_log(s, TOPLU_LOG_DEBUG, "libmicrohttpd: %s", msg);
}

/* ---------------------------------------------------------------- answers */

void srv_req_finish(srv_req_t *r) {
  if (atomic_exchange(&r->finished, 1)) return;
  if (r->done) r->done(r);
}

static void set_error(srv_req_t *r, int status, const char *msg) {
  pl_buf_free(&r->out);
  srv_encode_error(&r->out, msg);
  r->out_json_len = r->out.len;
  r->status = status;
}

void srv_req_fail(srv_req_t *r, int status, srv_fail_reason_t reason, const char *fmt, ...) {
  char msg[TOPLU_ERROR_MESSAGE_MAX * 2];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  set_error(r, status, msg);
  r->reason = reason;
  if (r->model) srv_metrics_failure(r->model->metrics, reason, toplu_monotonic_ns() - r->arrival_ns);
  srv_req_finish(r);
}

/* The answering thread's hand-over: resume the connection. */
static void on_done(srv_req_t *r) {
  http_req_t *h = (http_req_t *)r;
  h->phase = PH_ANSWERED;
  MHD_resume_connection((struct MHD_Connection *)r->conn);
}

/* The access log's line of a request: method, path, status, body bytes, microseconds since it arrived, model. */
static void access_line(http_req_t *h, int status, size_t len) {
  srv_server_t *s = &h->srv->s;
  const srv_req_t *r = &h->r;
  if (!s->opts.access_log || !h->method) return;
  /* The path as one field: bytes that would split it or the line (spaces, control characters, decoded
   * from %20, %0A...) and '%' itself are written percent-encoded again. */
  char path[600];
  size_t k = 0;
  for (const unsigned char *p = (const unsigned char *)h->url; *p && k + 4 < sizeof path; p++) {
    if (*p <= 0x20 || *p == 0x7f || *p == '%') k += (size_t)snprintf(path + k, sizeof path - k, "%%%02X", *p);
    else path[k++] = (char)*p;
  }
  path[k] = 0;
  char line[1024];
  snprintf(line, sizeof line, "%s %s %d %zu %.0f%s%s", h->method, path, status, len,
           (double)(toplu_monotonic_ns() - r->arrival_ns) / 1e3, r->model ? " model=" : "", r->model ? r->model->name : "");
  pthread_mutex_lock(&s->log_mu);
  s->opts.access_log(s->opts.access_log_user, TOPLU_LOG_NOTE, line);
  pthread_mutex_unlock(&s->log_mu);
}

static enum MHD_Result send_answer(http_req_t *h, struct MHD_Connection *c) {
  srv_server_t *s = &h->srv->s;
  srv_req_t *r = &h->r;
  int status = r->status ? r->status : 500, logged = status;
  if (status == 499) status = 400; /* the client is gone; whatever is sent goes nowhere (logged as 499) */
  size_t len = r->out.len;
  struct MHD_Response *resp;
  if (len) {
    resp = MHD_create_response_from_buffer(len, r->out.data, MHD_RESPMEM_MUST_FREE);
    if (resp) r->out.data = NULL, r->out.len = r->out.cap = 0;
  } else {
    resp = MHD_create_response_from_buffer(0, (void *)"", MHD_RESPMEM_PERSISTENT);
  }
  if (!resp) return MHD_NO;
  if (len && r->out_json_len < len) {
    char n[32];
    snprintf(n, sizeof n, "%zu", r->out_json_len);
    MHD_add_response_header(resp, "Inference-Header-Content-Length", n);
    MHD_add_response_header(resp, MHD_HTTP_HEADER_CONTENT_TYPE, "application/octet-stream");
  } else if (len) {
    MHD_add_response_header(resp, MHD_HTTP_HEADER_CONTENT_TYPE,
                            h->async_kind == 2 ? "text/plain; version=0.0.4; charset=utf-8" : "application/json");
  }
  if (atomic_load(&s->stopping) || h->too_late || h->too_large || h->head_too_large || h->must_close || h->too_busy)
    MHD_add_response_header(resp, MHD_HTTP_HEADER_CONNECTION, "close");
  if (status == 405 && h->allow) MHD_add_response_header(resp, MHD_HTTP_HEADER_ALLOW, h->allow);
  int cls = status / 100;
  if (cls >= 1 && cls <= 5) atomic_fetch_add(&s->responses_by_code[cls], 1);
  if (status == 400) atomic_fetch_add(&s->http_400, 1);
  if (status == 404) atomic_fetch_add(&s->http_404, 1);
  if (status == 503) atomic_fetch_add(&s->http_503, 1);
  access_line(h, logged, len);
  h->phase = PH_SENT;
  enum MHD_Result ret = MHD_queue_response(c, (unsigned)status, resp);
  MHD_destroy_response(resp);
  return ret;
}

static enum MHD_Result answer_error(http_req_t *h, struct MHD_Connection *c, int status, const char *fmt, ...)
    TOPLU_PRINTF(4, 5);
static enum MHD_Result answer_error(http_req_t *h, struct MHD_Connection *c, int status, const char *fmt, ...) {
  char msg[TOPLU_ERROR_MESSAGE_MAX * 2];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  set_error(&h->r, status, msg);
  return send_answer(h, c);
}

static enum MHD_Result answer_model_error(http_req_t *h, struct MHD_Connection *c, int status, srv_fail_reason_t reason,
                                          const char *msg) {
  set_error(&h->r, status, msg);
  if (h->r.model) srv_metrics_failure(h->r.model->metrics, reason, toplu_monotonic_ns() - h->r.arrival_ns);
  return send_answer(h, c);
}

static enum MHD_Result answer_body(http_req_t *h, struct MHD_Connection *c, int status) {
  h->r.status = status;
  h->r.out_json_len = h->r.out.len;
  if (h->r.out.oom) return answer_error(h, c, 500, "out of memory writing the response");
  return send_answer(h, c);
}

/* ---------------------------------------------------------------- JSON pieces */

static void shape_json(pl_buf_t *b, int ndim, const int64_t *dims, int batching) {
  pl_buf_putc(b, '[');
  for (int d = 0; d < ndim; d++) {
    if (d) pl_buf_putc(b, ',');
    pl_buf_int(b, (batching && d == 0) || dims[d] < 0 ? -1 : dims[d]);
  }
  pl_buf_putc(b, ']');
}

static void tensors_json(pl_buf_t *b, const srv_model_t *m, int outputs) {
  int n = outputs ? toplu_model_output_count(m->model) : toplu_model_input_count(m->model);
  pl_buf_putc(b, '[');
  for (int i = 0, first = 1; i < n; i++) {
    const toplu_value_info_t *v = outputs ? toplu_model_output(m->model, i) : toplu_model_input(m->model, i);
    if (outputs && !srv_config_serves_output(&m->cfg, v->name)) continue;
    const char *dt = srv_datatype_name(v->dtype);
    pl_buf_puts(b, first ? "{\"name\":" : ",{\"name\":");
    first = 0;
    pl_buf_json_string(b, v->name);
    pl_buf_puts(b, ",\"datatype\":");
    pl_buf_json_string(b, dt ? dt : toplu_dtype_name(v->dtype));
    pl_buf_puts(b, ",\"shape\":");
    /* the shape clients send or get: a config's narrower input dims, or its dims where it has a reshape */
    int64_t dims[TOPLU_MAX_DIMS];
    int nd = srv_config_served_dims(&m->cfg, v, outputs, dims);
    if (nd < 0) { /* rank unknown (the model does not say): one variable dim, as .../config gives it, not [] (a scalar) */
      nd = 1;
      dims[0] = -1;
    }
    shape_json(b, nd, dims, m->max_batch_size > 0);
    pl_buf_putc(b, '}');
  }
  pl_buf_putc(b, ']');
}

static void model_metadata(srv_server_t *s, srv_model_t *m, int one_version, pl_buf_t *b) {
  pl_buf_puts(b, "{\"name\":");
  pl_buf_json_string(b, m->name);
  pl_buf_puts(b, ",\"versions\":[");
  if (one_version) {
    pl_buf_json_string(b, m->version);
  } else {
    pthread_mutex_lock(&s->repo_mu);
    int first = 1;
    for (int i = 0; i < s->n_models; i++)
      if (!strcmp(s->models[i]->name, m->name)) {
        if (!first) pl_buf_putc(b, ',');
        first = 0;
        pl_buf_json_string(b, s->models[i]->version);
      }
    pthread_mutex_unlock(&s->repo_mu);
  }
  pl_buf_puts(b, "],\"platform\":\"" SRV_PLATFORM "\",\"inputs\":");
  tensors_json(b, m, 0);
  pl_buf_puts(b, ",\"outputs\":");
  tensors_json(b, m, 1);
  pl_buf_putc(b, '}');
}

/* Loaded versions for metrics (name NULL: all; version NULL: all of name), held. */
static int collect(srv_server_t *s, const char *name, const char *version, srv_metrics_model_t **out, srv_model_t ***held) {
  pthread_mutex_lock(&s->repo_mu);
  int n = 0;
  srv_metrics_model_t *mm = calloc((size_t)(s->n_models + 1), sizeof *mm);
  srv_model_t **hm = calloc((size_t)(s->n_models + 1), sizeof *hm);
  for (int i = 0; mm && hm && i < s->n_models; i++) {
    srv_model_t *m = s->models[i];
    if (name && strcmp(m->name, name)) continue;
    if (version && *version && strcmp(m->version, version)) continue;
    srv_model_ref(m);
    hm[n] = m;
    mm[n].name = m->name;
    mm[n].version = m->version;
    mm[n].metrics = m->metrics;
    mm[n].memory_bytes = (int64_t)toplu_allocator_current(m->alloc);
    n++;
  }
  pthread_mutex_unlock(&s->repo_mu);
  if (!mm || !hm) {
    free(mm);
    free(hm);
    mm = NULL;
    hm = NULL;
    n = 0;
  }
  *out = mm;
  *held = hm;
  return n;
}

static void release_collected(srv_metrics_model_t *mm, srv_model_t **hm, int n) {
  for (int i = 0; i < n; i++) srv_model_unref(hm[i]);
  free(mm);
  free(hm);
}

/* GET .../stats: the statistics of the loaded versions of name (NULL: every
 * model) and version (NULL: all); 404 when a named model has none. */
static enum MHD_Result answer_stats(http_req_t *h, struct MHD_Connection *c, const char *name, const char *version) {
  srv_metrics_model_t *mm;
  srv_model_t **hm;
  int n = collect(&h->srv->s, name, version, &mm, &hm);
  if (n == 0 && name) {
    release_collected(mm, hm, n);
    return answer_error(h, c, 404, "unknown model '%s'%s%s", name, version ? " version " : "", version ? version : "");
  }
  srv_metrics_stats_json(mm, n, &h->r.out);
  release_collected(mm, hm, n);
  return answer_body(h, c, 200);
}

/* ---------------------------------------------------------------- routes */

typedef struct route {
  char seg[8][SRV_NAME_MAX];
  int n;
} route_t;

/* The path's segments into rt: 0, or -1 (more than 8 segments), -2 (a
 * segment of SRV_NAME_MAX bytes or more), -3 (an empty segment inside the
 * path, "//": /v2/models/m/versions//ready is no route, not version
 * "ready").  One trailing '/' is allowed. */
static int split_path(const char *url, route_t *rt) {
  rt->n = 0;
  const char *p = url;
  if (*p == '/') p++;
  while (*p) {
    if (*p == '/') return -3;
    const char *e = strchr(p, '/');
    size_t len = e ? (size_t)(e - p) : strlen(p);
    if (rt->n == 8) return -1;
    if (len >= SRV_NAME_MAX) return -2;
    memcpy(rt->seg[rt->n], p, len);
    rt->seg[rt->n][len] = 0;
    rt->n++;
    p += len;
    if (*p == '/') p++;
  }
  return 0;
}

static int seg_is(const route_t *rt, int i, const char *s) { return i < rt->n && !strcmp(rt->seg[i], s); }

/* Inference-Header-Content-Length: -1 when absent or 0 (as Triton: the whole
 * body is JSON, with no binary part), else the JSON header's length.
 * Whitespace around the value is not part of it (RFC 9110, 5.5). */
static int64_t parse_header_len(const char *v, int *bad) {
  *bad = 0;
  if (!v) return -1;
  while (*v == ' ' || *v == '\t') v++;
  char *end;
  errno = 0;
  long long n = strtoll(v, &end, 10);
  const char *t = end;
  while (*t == ' ' || *t == '\t') t++;
  if (errno || end == v || *t || n < 0 || v[0] == '-' || v[0] == '+') {
    *bad = 1;
    return -1;
  }
  return n == 0 ? -1 : n;
}

/* r's body parsed for model version m (0, or the HTTP status with why). */
static int parse_for(const srv_model_t *m, srv_req_t *r, char *why, size_t size) {
  /* A config's reshape: requests are checked against the shapes clients send (its dims), then their shapes
   * changed into the model's (a change of shape, not a copy: row-major data is the same). */
  int reshape = srv_config_has_reshape(&m->cfg), n_in = toplu_model_input_count(m->model);
  toplu_value_info_t served[reshape && n_in > 0 ? n_in : 1];
  for (int i = 0; reshape && i < n_in; i++) {
    served[i] = *toplu_model_input(m->model, i);
    int has = 0;
    for (int k = 0; k < m->cfg.n_inputs; k++) has |= m->cfg.inputs[k].has_reshape && !strcmp(m->cfg.inputs[k].name, served[i].name);
    if (!has) continue; /* the model's shape, the config's narrower dims checked below as without a reshape */
    int64_t dims[TOPLU_MAX_DIMS];
    int nd = srv_config_served_dims(&m->cfg, &served[i], 0, dims);
    if (nd != served[i].ndim) memset(served[i].dim_names, 0, sizeof served[i].dim_names);
    served[i].ndim = nd;
    if (nd > 0) memcpy(served[i].dims, dims, (size_t)nd * sizeof dims[0]);
  }
  int rc = srv_parse_infer_served(m->model, reshape ? served : NULL, m->max_batch_size, r->body.data ? r->body.data : "",
                                  r->body.len, r->header_len, &r->infer, why, size);
  if (rc) return rc;
  /* A config that lists outputs serves only those (srv_config_serves_output). */
  if (m->cfg.n_outputs > 0) {
    int k = 0;
    for (int i = 0; i < r->infer.n_outputs; i++) {
      const char *name = toplu_model_output(m->model, r->infer.outputs[i].index)->name;
      if (srv_config_serves_output(&m->cfg, name)) {
        r->infer.outputs[k++] = r->infer.outputs[i];
      } else if (r->infer.outputs_named) {
        snprintf(why, size,
                 "outputs[%d]: unexpected inference output '%s' for model '%s' (its config's output[] does not list it)",
                 i, name, m->name);
        return 400;
      }
    }
    r->infer.n_outputs = k;
  }
  /* NaN and Inf: toplu's kernels do not all carry them through (a ReLU fused into a convolution, max pooling,
   * give 0 or a number for NaN), so such an input could get a finite answer that looks right; refused, as toplu
   * run refuses such rows, unless the config allows them. */
  for (int i = 0; i < r->infer.n_inputs && !m->cfg.allow_nonfinite; i++) {
    const srv_input_t *in = &r->infer.inputs[i];
    int is_nan;
    size_t es = toplu_dtype_size(in->dtype);
    int64_t bad = es ? srv_first_nonfinite(in->dtype, in->data, (int64_t)(in->nbytes / es), &is_nan) : -1;
    if (bad >= 0) {
      snprintf(why, size,
               "inputs ('%s').data: element %lld is %s; toplu's fused kernels do not carry NaN and Inf through (a "
               "ReLU fused into a convolution turns NaN into 0), so the answer could look finite; set the model's "
               "parameter allow_nonfinite to \"true\" to run such inputs",
               toplu_model_input(m->model, in->index)->name, (long long)bad, is_nan ? "NaN" : "infinite");
      return 400;
    }
  }
  /* The config's input[].dims, which may be narrower than the model's (Triton enforces them). */
  for (int i = 0; i < r->infer.n_inputs && m->cfg.n_inputs > 0; i++) {
    const srv_input_t *in = &r->infer.inputs[i];
    const char *name = toplu_model_input(m->model, in->index)->name;
    char field[SRV_NAME_MAX + 32];
    snprintf(field, sizeof field, "inputs ('%s').shape", name);
    if (srv_config_check_request_shape(&m->cfg, field, name, in->ndim, in->dims, why, size)) return 400;
  }
  for (int i = 0; reshape && i < r->infer.n_inputs; i++) {
    srv_input_t *in = &r->infer.inputs[i];
    const char *name = toplu_model_input(m->model, in->index)->name;
    if (srv_config_reshape_input(&m->cfg, name, m->max_batch_size > 0, &in->ndim, in->dims)) {
      snprintf(why, size, "inputs ('%s').shape: does not fit the config's input '%s' dims", name, name);
      return 400;
    }
  }
  return 0;
}

/* The 503 message of a request over max_inflight_bytes. */
static const char *busy_message(srv_server_t *s, const http_req_t *h, char *buf, size_t size) {
  if (h->too_busy == 2) {
    snprintf(buf, size,
             "the request body (%zu bytes and more, as received or decoded) is more than the server's limit of %zu "
             "bytes of bodies held at once (max_inflight_bytes)",
             h->busy_bytes, s->opts.max_inflight_bytes);
    return buf;
  }
  snprintf(buf, size,
           "the server holds %zu bytes of request bodies and JSON parses, and this request's %s would pass the limit "
           "of %zu (max_inflight_bytes); retry later",
           atomic_load(&s->held_bytes), h->too_busy ? "body" : "parse", s->opts.max_inflight_bytes);
  return buf;
}

/* Bytes that parsing the n bytes of JSON at p is estimated to take: 48 a value (jansson's json_t objects and
 * array slots; a body of "0,0,0,..." took 45 a value, 22 times its bytes), the values counted by their
 * separators outside strings. */
static size_t json_parse_bytes(const char *p, size_t n) {
  size_t values = 1;
  for (size_t i = 0; i < n; i++) {
    char ch = p[i];
    if (ch == '"') {
      for (i++; i < n && p[i] != '"'; i++)
        if (p[i] == '\\') i++;
    } else if (ch == ',' || ch == '[' || ch == '{') {
      values++;
    }
  }
  return values > SIZE_MAX / 48 ? SIZE_MAX : values * 48;
}

/* Hold the estimated memory of parsing h's first json_len body bytes (*parse, released by the caller after the
 * parse): 0; 413 (why set) when it cannot fit beside the request's own body however idle the server is; 503 when
 * other requests hold the rest of max_inflight_bytes now. */
static int hold_parse(srv_server_t *s, http_req_t *h, size_t json_len, size_t *parse, char *why, size_t size) {
  *parse = json_parse_bytes(h->r.body.data ? h->r.body.data : "", json_len);
  size_t cap = s->opts.max_inflight_bytes, own = h->held < cap ? h->held : cap;
  if (*parse > cap - own) {
    snprintf(why, size,
             "the request's JSON (%zu bytes) would take about %zu bytes to parse, beside its body's %zu, more than the "
             "server's limit of %zu (max_inflight_bytes); send tensors as binary data (the binary tensor data "
             "extension)",
             json_len, *parse, h->held, cap);
    *parse = 0;
    return 413;
  }
  if (hold_bytes(s, h, *parse)) {
    busy_message(s, h, why, size);
    *parse = 0;
    return 503;
  }
  return 0;
}

static enum MHD_Result handle_infer(http_req_t *h, struct MHD_Connection *c, const char *name, const char *version) {
  toplu_server_t *ts = h->srv;
  srv_server_t *s = &ts->s;
  srv_req_t *r = &h->r;
  srv_model_t *m = srv_repo_find(s, name, version);
  if (!m) {
    srv_model_t *any = version ? srv_repo_find(s, name, NULL) : NULL;
    if (any) {
      srv_model_unref(any);
      return answer_error(h, c, 404, "model '%s' has no version '%s' loaded", name, version);
    }
    return answer_error(h, c, 404, "unknown model '%s'", name);
  }
  r->model = m;
  if (atomic_load(&s->stopping)) return answer_model_error(h, c, 503, SRV_FAIL_REJECTED, "the server is shutting down");
  if (h->too_busy) {
    char msg[320];
    return answer_model_error(h, c, h->too_busy == 2 ? 413 : 503,
                              h->too_busy == 2 ? SRV_FAIL_BAD_REQUEST : SRV_FAIL_REJECTED, busy_message(s, h, msg, sizeof msg));
  }
  if (h->too_large) {
    char msg[256];
    snprintf(msg, sizeof msg, "the request body is over the limit of %zu bytes (max_body_bytes%s)", s->opts.max_body_bytes,
             h->z ? ", decoded" : "");
    set_error(r, 413, msg);
    srv_metrics_failure(m->metrics, SRV_FAIL_BAD_REQUEST, 0);
    return send_answer(h, c);
  }
  if (h->enc_status) return answer_model_error(h, c, h->enc_status, SRV_FAIL_BAD_REQUEST, h->enc_error);
  int bad = 0;
  r->header_len = parse_header_len(MHD_lookup_connection_value(c, MHD_HEADER_KIND, "Inference-Header-Content-Length"), &bad);
  if (bad)
    return answer_model_error(h, c, 400, SRV_FAIL_BAD_REQUEST,
                              "Inference-Header-Content-Length: not a non-negative integer");
  char why[TOPLU_ERROR_MESSAGE_MAX];
  /* The JSON's parse, held against max_inflight_bytes while it runs (22x its bytes for "0,0,...": a 32 MiB body
   * took 716 MB; a fresh user's finding of 2026-12-06) */
  size_t json_len = r->header_len >= 0 && (uint64_t)r->header_len < r->body.len ? (size_t)r->header_len : r->body.len;
  size_t parse = 0;
  int hs = hold_parse(s, h, json_len, &parse, why, sizeof why);
  if (hs) return answer_model_error(h, c, hs, hs == 413 ? SRV_FAIL_BAD_REQUEST : SRV_FAIL_REJECTED, why);
  int rc = parse_for(m, r, why, sizeof why);
  release_bytes(s, h, parse);
  if (rc) return answer_model_error(h, c, rc, SRV_FAIL_BAD_REQUEST, why);
  if (m->cfg.response_cache && s->cache) {
    int64_t t0 = toplu_monotonic_ns();
    srv_infer_cache_key(&r->infer, m->name, m->version, &r->key);
    srv_cache_entry_t *e = r->key.oom ? NULL : srv_cache_get(s->cache, m->owner, r->key.data, r->key.len);
    if (e) {
      srv_response_with_id(r->infer.id, srv_cache_entry_body(e), srv_cache_entry_len(e), srv_cache_entry_json_len(e), &r->out,
                           &r->out_json_len);
      srv_cache_release(e);
      int64_t t1 = toplu_monotonic_ns();
      if (r->out.oom) return answer_model_error(h, c, 500, SRV_FAIL_OTHER, "out of memory writing the response");
      r->status = 200;
      r->answered_from_cache = 1;
      srv_metrics_cache_hit(m->metrics, t1 - r->arrival_ns, t1 - t0);
      return send_answer(h, c);
    }
    srv_metrics_cache_miss(m->metrics, toplu_monotonic_ns() - t0);
  }
  const union MHD_ConnectionInfo *ci = MHD_get_connection_info(c, MHD_CONNECTION_INFO_CONNECTION_FD);
  r->fd = ci ? ci->connect_fd : -1;
  const union MHD_ConnectionInfo *sc = MHD_get_connection_info(c, MHD_CONNECTION_INFO_SOCKET_CONTEXT);
  conn_ctx_t *cc = sc ? sc->socket_context : NULL;
  if (cc && !cc->busy) {
    idle_remove(s, cc);
    cc->infer_seen = 1;
    cc->busy = 1;
    h->cc = cc;
  }
  /* Alone in the server: run it on this thread and answer at once. */
  if (atomic_load(&s->inflight) == 1 && !atomic_load(&s->stopping)) {
    r->done = NULL;
    if (srv_batcher_run_inline(m->batcher, r)) {
      h->phase = PH_ANSWERED;
      return send_answer(h, c);
    }
  }
  r->conn = c;
  r->done = on_done;
  h->phase = PH_QUEUED;
  MHD_suspend_connection(c);
  /* The batcher answers r itself when it refuses it; a version retired since
   * it was found (a reload's swap) sends r to the version now in the table. */
  for (int attempt = 0; srv_batcher_submit(m->batcher, r) == SRV_SUBMIT_RETIRED; attempt++) {
    srv_model_t *m2 = srv_repo_find(s, name, version);
    if (!m2 || attempt == 8) {
      if (m2) srv_model_unref(m2);
      srv_req_fail(r, m2 ? 503 : 404, SRV_FAIL_REJECTED, "model '%s'%s%s was unloaded while the request arrived", name,
                   version ? " version " : "", version ? version : "");
      break;
    }
    if (m2 == m) {
      srv_model_unref(m2);
      continue;
    }
    srv_infer_free(&r->infer);
    rc = parse_for(m2, r, why, sizeof why);
    srv_model_unref(m);
    r->model = m = m2;
    if (rc) {
      srv_req_fail(r, rc, SRV_FAIL_BAD_REQUEST, "%s", why);
      break;
    }
  }
  return MHD_YES;
}

/* The turn of repository request ticket t: waits until the requests that came before it are done. */
static void repo_turn_wait(srv_server_t *s, uint64_t t) {
  pthread_mutex_lock(&s->op_mu);
  while (s->op_serving != t) pthread_cond_wait(&s->op_cv, &s->op_mu);
  pthread_mutex_unlock(&s->op_mu);
}

static void repo_turn_done(srv_server_t *s) {
  pthread_mutex_lock(&s->op_mu);
  s->op_serving++;
  pthread_cond_broadcast(&s->op_cv);
  pthread_mutex_unlock(&s->op_mu);
}

/* A repository load or unload, its own copy of what it needs: the thread never reads the HTTP request, which a
 * stop may answer (and free) while the operation still runs. */
typedef struct repo_op {
  struct repo_op *next, *prev;
  http_req_t *h;              /* the request to answer; NULL once a stop answered it (under op_mu) */
  srv_server_t *s;
  uint64_t ticket;            /* its turn (srv_server_t.op_next) */
  int unload;
  char name[SRV_NAME_MAX];
  char *config;               /* a load's parameters.config, or NULL */
} repo_op_t;

/* Unlink op (op_mu held). */
static void repo_op_unlink(srv_server_t *s, repo_op_t *op) {
  if (op->prev) op->prev->next = op->next;
  else s->ops = op->next;
  if (op->next) op->next->prev = op->prev;
  op->next = op->prev = NULL;
}

/* The end of op: its request answered (status 200 without a message, else msg) unless a stop answered it, op
 * unlinked and freed, the stop told. */
static void repo_op_end(srv_server_t *s, repo_op_t *op, int status, const char *msg) {
  pthread_mutex_lock(&s->op_mu);
  if (op->h) { /* not answered by a stop */
    if (msg) {
      set_error(&op->h->r, status, msg);
    } else {
      op->h->r.status = status;
      op->h->r.out_json_len = 0;
    }
    srv_req_finish(&op->h->r);
  }
  repo_op_unlink(s, op);
  atomic_fetch_sub(&s->loads_pending, 1);
  pthread_cond_broadcast(&s->op_cv);
  pthread_mutex_unlock(&s->op_mu);
  free(op->config);
  free(op);
}

/* A repository load or unload, in its turn. */
static void *repo_thread(void *arg) {
  repo_op_t *op = arg;
  srv_server_t *s = op->s;
  toplu_error_t e;
  toplu_error_clear(&e);
  repo_turn_wait(s, op->ticket);
  int rc;
  if (op->unload) {
    /* Triton: "unloading a model that is not loaded has no effect and success code will be returned" */
    rc = srv_repo_unload(s, op->name, &e);
    if (rc && e.status == TOPLU_ERR_NOT_FOUND) rc = 0;
  } else if (srv_load_cancelled(s)) {
    rc = -1;
    toplu__errorf(&e, TOPLU_ERR_CANCELLED, "it waited for other repository requests");
  } else {
    rc = srv_repo_load(s, op->name, op->config, &e);
  }
  repo_turn_done(s);
  char m2[sizeof e.message + 384];
  int status = 200;
  if (rc) {
    /* cancelled: a shutdown began while it loaded (the load stops at its next warm-up run) */
    const char *what = op->unload ? "unload" : "load";
    if (e.status == TOPLU_ERR_CANCELLED)
      snprintf(m2, sizeof m2, "the server is shutting down: the %s of model '%s' stopped (%s)", what, op->name,
               e.message);
    else if (strstr(e.message, op->name))
      snprintf(m2, sizeof m2, "%s", e.message);
    else
      snprintf(m2, sizeof m2, "%s of model '%s': %s", what, op->name, e.message);
    status = e.status == TOPLU_ERR_NOT_FOUND ? 404 : e.status == TOPLU_ERR_CANCELLED ? 503 : 400;
    srv_log(s, e.status == TOPLU_ERR_CANCELLED ? TOPLU_LOG_NOTE : TOPLU_LOG_ERROR, "%s", m2);
  }
  repo_op_end(s, op, status, rc ? m2 : NULL);
  return NULL;
}

/*
 * The body of a repository request (Triton's model repository extension):
 * empty, or a JSON object whose "parameters" (an object) may hold the keys in
 * `keys` (comma-separated), and for the index a top-level "ready" bool.
 * Returns NULL, or the message of a 400.  *config gets parameters.config
 * (a string: a model configuration in JSON), malloc'ed; *ready the flag.
 */
static const char *repository_body(const http_req_t *h, int index, char **config, int *ready, char *msg, size_t size) {
  *config = NULL;
  *ready = 0;
  if (!h->r.body.len) return NULL;
  json_error_t je;
  json_t *root = json_loadb(h->r.body.data, h->r.body.len, JSON_REJECT_DUPLICATES, &je);
  if (!root || !json_is_object(root)) {
    snprintf(msg, size, "the request body is not a JSON object%s%s", root ? "" : ": ", root ? "" : je.text);
    json_decref(root);
    return msg;
  }
  const char *key;
  json_t *v;
  const char *bad = NULL;
  json_object_foreach(root, key, v) {
    if (index && !strcmp(key, "ready")) {
      if (!json_is_boolean(v)) bad = "ready: expected true or false";
      else *ready = json_is_true(v);
    } else if (!index && !strcmp(key, "parameters")) {
      if (!json_is_object(v)) {
        bad = "parameters: expected an object";
        break;
      }
      const char *pk;
      json_t *pv;
      json_object_foreach(v, pk, pv) {
        if (!strcmp(pk, "config")) {
          if (!json_is_string(pv)) {
            bad = "parameters.config: expected a string holding the model configuration in JSON";
            break;
          }
          free(*config);
          *config = strdup(json_string_value(pv));
        } else if (!strcmp(pk, "unload_dependents")) {
          if (!json_is_boolean(pv)) bad = "parameters.unload_dependents: expected true or false";
        } else {
          snprintf(msg, size, "parameters.%.200s: not supported (toplu takes parameters.config%s)", pk,
                   strncmp(pk, "file:", 5) ? "" : "; model files come from the repository folder");
          bad = msg;
          break;
        }
      }
    } else {
      snprintf(msg, size, "%.200s: not a field of this request", key);
      bad = msg;
    }
    if (bad) break;
  }
  json_decref(root);
  if (bad) {
    free(*config);
    *config = NULL;
    if (bad != msg) snprintf(msg, size, "%s", bad);
    return msg;
  }
  return NULL;
}

static enum MHD_Result handle_repository(http_req_t *h, struct MHD_Connection *c, const route_t *rt) {
  srv_server_t *s = &h->srv->s;
  char msg[512], *config = NULL;
  int ready = 0;
  /* its body's parse held against max_inflight_bytes, as an inference request's (a 20 MB body of zeros took
   * 400 MB here unaccounted; a fresh user's finding of 2026-12-06) */
  size_t parse = 0;
  int hs = h->r.body.len ? hold_parse(s, h, h->r.body.len, &parse, msg, sizeof msg) : 0;
  if (hs) return answer_error(h, c, hs, "%s", msg);
  if (rt->n == 3 && seg_is(rt, 2, "index")) {
    const char *bad = repository_body(h, 1, &config, &ready, msg, sizeof msg);
    release_bytes(s, h, parse);
    if (bad) return answer_error(h, c, 400, "%s", msg);
    srv_repo_index_json(s, ready, &h->r.out);
    return answer_body(h, c, 200);
  }
  if (rt->n == 5 && seg_is(rt, 2, "models") && (seg_is(rt, 4, "load") || seg_is(rt, 4, "unload"))) {
    if (!s->repo_dir[0])
      return answer_error(h, c, 400, "the server serves one model file, not a model repository: nothing to %s", rt->seg[4]);
    if (atomic_load(&s->stopping)) return answer_error(h, c, 503, "the server is shutting down");
    const char *bad = repository_body(h, 0, &config, &ready, msg, sizeof msg);
    release_bytes(s, h, parse);
    if (bad) return answer_error(h, c, 400, "%s", msg);
    int unload = seg_is(rt, 4, "unload");
    if (unload) {
      free(config);
      config = NULL;
    }
    if (atomic_fetch_add(&s->loads_pending, 1) >= SRV_MAX_PENDING_LOADS) {
      atomic_fetch_sub(&s->loads_pending, 1);
      free(config);
      return answer_error(h, c, 503, "%d model loads and unloads are waiting or running, the most the server takes at "
                          "once (they run one at a time, in the order they came); retry the %s of model '%s' later",
                          SRV_MAX_PENDING_LOADS, rt->seg[4], rt->seg[3]);
    }
    repo_op_t *op = calloc(1, sizeof *op);
    if (!op) {
      atomic_fetch_sub(&s->loads_pending, 1);
      free(config);
      return answer_error(h, c, 500, "out of memory for the repository request");
    }
    op->s = s;
    op->h = h;
    op->unload = unload;
    op->config = config;
    snprintf(op->name, sizeof op->name, "%s", rt->seg[3]);
    pthread_mutex_lock(&s->op_mu);
    op->ticket = s->op_next++; /* taken here, on arrival: the requests run in the order they came */
    op->next = s->ops;
    if (s->ops) s->ops->prev = op;
    s->ops = op;
    pthread_mutex_unlock(&s->op_mu);
    h->async_kind = 1;
    h->r.conn = c;
    h->r.done = on_done;
    h->phase = PH_QUEUED;
    MHD_suspend_connection(c);
    pthread_t t;
    pthread_attr_t a;
    pthread_attr_init(&a);
    pthread_attr_setdetachstate(&a, PTHREAD_CREATE_DETACHED);
    if (pthread_create(&t, &a, repo_thread, op) != 0) {
      /* its turn still comes and goes, so the requests after it run (this waits for those before it) */
      repo_turn_wait(s, op->ticket);
      repo_turn_done(s);
      repo_op_end(s, op, 500, unload ? "cannot start a thread to unload the model" : "cannot start a thread to load the model");
    }
    pthread_attr_destroy(&a);
    return MHD_YES;
  }
  release_bytes(s, h, parse);
  return answer_error(h, c, 404, "no such endpoint: %s %s", h->method, h->url);
}

static enum MHD_Result route(http_req_t *h, struct MHD_Connection *c) {
  toplu_server_t *ts = h->srv;
  srv_server_t *s = &ts->s;
  char msgbuf[320];
  if (h->too_busy && strstr(h->url, "/infer") == NULL)
    return answer_error(h, c, h->too_busy == 2 ? 413 : 503, "%s", busy_message(s, h, msgbuf, sizeof msgbuf));
  if (h->too_large && strstr(h->url, "/infer") == NULL)
    return answer_error(h, c, 413, "the request body is over the limit of %zu bytes (max_body_bytes%s)", s->opts.max_body_bytes,
                        h->z ? ", decoded" : "");
  if (h->enc_status && strstr(h->url, "/infer") == NULL) return answer_error(h, c, h->enc_status, "%s", h->enc_error);
  route_t rt;
  int get = !strcmp(h->method, "GET") || !strcmp(h->method, "HEAD"), post = !strcmp(h->method, "POST");
  int sp = split_path(h->url, &rt);
  if (sp == -2)
    return answer_error(h, c, 404, "no such endpoint: a path segment is %d bytes or longer (model names and versions are "
                        "shorter): %.200s...", SRV_NAME_MAX, h->url);
  if (sp == -3) return answer_error(h, c, 404, "no such endpoint: an empty path segment ('//') in %.200s", h->url);
  if (sp) return answer_error(h, c, 404, "no such endpoint: %.200s", h->url);
  if (ts->metrics_id && !(rt.n == 1 && seg_is(&rt, 0, "metrics"))) {
    const union MHD_ConnectionInfo *ci = MHD_get_connection_info(c, MHD_CONNECTION_INFO_DAEMON);
    if (ci && ci->daemon == ts->metrics_id)
      return answer_error(h, c, 404, "no such endpoint: %.200s (port %d serves GET /metrics only; the inference API is "
                          "on port %d)", h->url, ts->metrics_port, ts->port);
  }
  if (rt.n == 1 && seg_is(&rt, 0, "metrics")) {
    if (!get) return h->allow = "GET, HEAD", answer_error(h, c, 405, "use GET for %s", h->url);
    srv_metrics_model_t *mm;
    srv_model_t **hm;
    int n = collect(s, NULL, NULL, &mm, &hm);
    srv_metrics_server_t sv;
    memset(&sv, 0, sizeof sv);
    for (int i = 1; i <= 5; i++) sv.responses_by_code[i] = atomic_load(&s->responses_by_code[i]);
    sv.http_400 = atomic_load(&s->http_400);
    sv.http_404 = atomic_load(&s->http_404);
    sv.http_503 = atomic_load(&s->http_503);
    sv.connections = atomic_load(&s->connections);
    host_metrics(s, &sv);
    if (s->cache) {
      srv_cache_usage_t u;
      srv_cache_usage(s->cache, &u);
      sv.cache_bytes = (int64_t)u.bytes;
      sv.cache_max_bytes = (int64_t)u.max_bytes;
      sv.cache_entries = u.entries;
      sv.cache_evictions = u.evictions;
    }
    srv_metrics_prometheus(mm, n, &sv, &h->r.out);
    release_collected(mm, hm, n);
    h->async_kind = 2;
    return answer_body(h, c, 200);
  }
  if (!seg_is(&rt, 0, "v2")) return answer_error(h, c, 404, "no such endpoint: %.200s", h->url);
  if (rt.n == 1) {
    if (!get) return h->allow = "GET, HEAD", answer_error(h, c, 405, "use GET for %s", h->url);
    pl_buf_printf(&h->r.out,
                  "{\"name\":\"toplu\",\"version\":\"%s\",\"extensions\":[\"binary_tensor_data\",\"model_repository\","
                  "\"model_configuration\",\"statistics\",\"schedule_policy\",\"parameters\"]}",
                  TOPLU_VERSION_STRING);
    return answer_body(h, c, 200);
  }
  if (seg_is(&rt, 1, "health") && rt.n == 3) {
    /* An unknown endpoint is 404 whatever the method; a known one takes GET (HEAD) only. */
    if (!seg_is(&rt, 2, "live") && !seg_is(&rt, 2, "ready"))
      return answer_error(h, c, 404, "no such endpoint: %.200s", h->url);
    if (!get) return h->allow = "GET, HEAD", answer_error(h, c, 405, "use GET for %s", h->url);
    if (seg_is(&rt, 2, "live")) return answer_body(h, c, 200);
    if (seg_is(&rt, 2, "ready")) {
      if (atomic_load(&s->stopping)) return answer_error(h, c, 503, "the server is shutting down");
      if (s->opts.strict_readiness) {
        char why[512] = "";
        int nf = 0;
        pthread_mutex_lock(&s->repo_mu);
        for (int i = 0; i < s->n_failed; i++) {
          /* A failed reload leaves the old versions serving: that model is ready. */
          const char *e = s->failed[i], *tab = strchr(e, '\t');
          int len = tab ? (int)(tab - e) : (int)strlen(e), serving = 0;
          for (int k = 0; k < s->n_models && !serving; k++)
            serving = (int)strlen(s->models[k]->name) == len && !strncmp(s->models[k]->name, e, (size_t)len);
          if (serving) continue;
          if (nf++ == 0) snprintf(why, sizeof why, "model '%.*s' failed to load: %.300s", len, e, tab ? tab + 1 : "");
        }
        pthread_mutex_unlock(&s->repo_mu);
        if (nf) {
          char msg[600];
          snprintf(msg, sizeof msg, "not ready (strict readiness): %d model(s) failed to load; %s", nf, why);
          return answer_error(h, c, 503, "%s", msg);
        }
      }
      return answer_body(h, c, 200);
    }
    return answer_error(h, c, 404, "no such endpoint: %.200s", h->url);
  }
  if (seg_is(&rt, 1, "repository")) {
    /* An unknown repository endpoint is 404 whatever the method; a known one takes POST only. */
    int known = (rt.n == 3 && seg_is(&rt, 2, "index")) ||
                (rt.n == 5 && seg_is(&rt, 2, "models") && (seg_is(&rt, 4, "load") || seg_is(&rt, 4, "unload")));
    if (!known) return answer_error(h, c, 404, "no such endpoint: %.200s", h->url);
    if (!post) return h->allow = "POST", answer_error(h, c, 405, "use POST for %s", h->url);
    return handle_repository(h, c, &rt);
  }
  if (!seg_is(&rt, 1, "models") || rt.n < 3) return answer_error(h, c, 404, "no such endpoint: %.200s", h->url);
  if (rt.n == 3 && seg_is(&rt, 2, "stats")) {
    if (!get) return h->allow = "GET, HEAD", answer_error(h, c, 405, "use GET for %s", h->url);
    return answer_stats(h, c, NULL, NULL);
  }
  const char *name = rt.seg[2], *version = NULL, *action = NULL;
  int k = 3;
  if (seg_is(&rt, 3, "versions")) {
    if (rt.n < 5) return answer_error(h, c, 404, "no such endpoint: %.200s", h->url);
    version = rt.seg[4];
    k = 5;
  }
  if (rt.n > k + 1) return answer_error(h, c, 404, "no such endpoint: %.200s", h->url);
  if (rt.n == k + 1) action = rt.seg[k];
  if (action && !strcmp(action, "infer")) {
    if (!post) return h->allow = "POST", answer_error(h, c, 405, "use POST for %s", h->url);
    return handle_infer(h, c, name, version);
  }
  /* An unknown action (generate, generate_stream, ...) is 404 whatever the method. */
  if (action && strcmp(action, "ready") && strcmp(action, "config") && strcmp(action, "stats"))
    return answer_error(h, c, 404, "no such endpoint: %.200s", h->url);
  if (!get) return h->allow = "GET, HEAD", answer_error(h, c, 405, "use GET for %s", h->url);
  if (action && !strcmp(action, "stats")) return answer_stats(h, c, name, version);
  srv_model_t *m = srv_repo_find(s, name, version);
  if (!m) {
    if (action && !strcmp(action, "ready") && srv_repo_known(s, name)) /* else unknown, as the other endpoints say */
      return answer_error(h, c, 404, "model '%s'%s%s is not ready (not loaded)", name, version ? " version " : "", version ? version : "");
    return answer_error(h, c, 404, "unknown model '%s'%s%s", name, version ? " version " : "", version ? version : "");
  }
  enum MHD_Result res;
  if (!action) {
    model_metadata(s, m, version != NULL, &h->r.out);
    res = answer_body(h, c, 200);
  } else if (!strcmp(action, "ready")) {
    res = answer_body(h, c, atomic_load(&m->ready) && !atomic_load(&s->stopping) ? 200 : 503);
  } else if (!strcmp(action, "config")) {
    srv_config_t cfg = m->cfg;
    cfg.max_batch_size = m->max_batch_size;
    cfg.max_batch_size_set = 1;
    srv_config_json(&cfg, m->model, m->batch_source, &h->r.out);
    res = answer_body(h, c, 200);
  } else {
    res = answer_error(h, c, 404, "no such endpoint: %.200s", h->url);
  }
  srv_model_unref(m);
  return res;
}

/* libmicrohttpd's URL unescaping, but %00 and %2F stay as they are: a NUL
 * would cut a model name short and a decoded '/' would change the route. */
static size_t unescape_url(void *cls, struct MHD_Connection *c, char *s) {
  (void)cls;
  (void)c;
  char *w = s;
  for (const char *r = s; *r;) {
    if (r[0] == '%' && isxdigit((unsigned char)r[1]) && isxdigit((unsigned char)r[2])) {
      int v = (int)strtol((char[]){r[1], r[2], 0}, NULL, 16);
      if (v != 0 && v != '/') {
        *w++ = (char)v;
        r += 3;
        continue;
      }
    }
    *w++ = *r++;
  }
  *w = 0;
  return (size_t)(w - s);
}

/* MHD_KeyValueIterator: adds a header line's bytes ("Key: value\r\n") to *cls. */
static enum MHD_Result add_header_bytes(void *cls, enum MHD_ValueKind kind, const char *key, const char *value) {
  (void)kind;
  *(size_t *)cls += strlen(key) + (value ? strlen(value) : 0) + 4;
  return MHD_YES;
}

/* Content-Length headers of a request: how many, and the first two values that differ (RFC 9112 6.3: a
 * message whose Content-Length values differ must be refused, or a proxy in front of the server and the
 * server could read different bodies, request smuggling). */
typedef struct cl_seen {
  int n;
  const char *first, *other;
} cl_seen_t;

static enum MHD_Result note_content_length(void *cls, enum MHD_ValueKind kind, const char *key, const char *value) {
  (void)kind;
  cl_seen_t *c = cls;
  if (strcasecmp(key, MHD_HTTP_HEADER_CONTENT_LENGTH)) return MHD_YES;
  c->n++;
  if (!c->first) c->first = value ? value : "";
  else if (!c->other && strcmp(c->first, value ? value : "")) c->other = value ? value : "";
  return MHD_YES;
}

/*
 * Inflate n bytes of a gzip or deflate body into h->r.body as they arrive.
 * The limit applies to the decoded bytes: past max_body bytes the request is
 * too_large (413) and the buffer is freed, so a small body that inflates
 * without end (a "zip bomb") takes at most max_body bytes.  Corrupt data or
 * bytes after the stream's end set enc_status 400.
 */
static void inflate_body(srv_server_t *s, http_req_t *h, const char *data, size_t n, size_t max_body) {
  z_stream *z = h->z;
  z->next_in = (Bytef *)(uintptr_t)data;
  z->avail_in = (uInt)n; /* a libmicrohttpd upload chunk is far below 4 GiB */
  while (z->avail_in > 0) {
    if (h->z_done) {
      h->enc_status = 400;
      snprintf(h->enc_error, sizeof h->enc_error, "Content-Encoding %s: %u bytes follow the end of the compressed stream",
               h->enc_name, z->avail_in);
      return;
    }
    pl_buf_t *b = &h->r.body;
    if (b->cap <= b->len + 1) {
      size_t want = b->len < (64u << 10) ? (64u << 10) : b->len; /* doubles, up to one byte past the limit */
      if (want > max_body + 1 - b->len) want = max_body + 1 - b->len;
      size_t cap0 = b->cap;
      if (pl_buf_reserve(b, want)) {
        h->too_large = 1;
        drop_body(s, h);
        return;
      }
      /* the decoded bytes count, not the compressed ones (8 bodies of 63 KiB inflating to 64 MiB each, held
       * back by their last byte, took 512 MB; a fresh user's finding of 2026-12-06) */
      if (b->cap > cap0 && hold_bytes(s, h, b->cap - cap0)) {
        h->too_busy = busy_kind(s, h, b->cap - cap0);
        drop_body(s, h);
        return;
      }
    }
    size_t room = b->cap - b->len - 1;
    if (room > max_body + 1 - b->len) room = max_body + 1 - b->len;
    if (room > UINT_MAX) room = UINT_MAX;
    z->next_out = (Bytef *)(b->data + b->len);
    z->avail_out = (uInt)room;
    int rc = inflate(z, Z_NO_FLUSH);
    b->len += room - z->avail_out;
    if (b->len > max_body) {
      h->too_large = 1;
      drop_body(s, h);
      return;
    }
    if (rc == Z_STREAM_END) {
      h->z_done = 1;
    } else if (rc != Z_OK && rc != Z_BUF_ERROR) {
      h->enc_status = 400;
      snprintf(h->enc_error, sizeof h->enc_error, "Content-Encoding %s: the body is not valid %s data (zlib: %s)", h->enc_name,
               h->enc_name, z->msg ? z->msg : zError(rc));
      drop_body(s, h);
      return;
    } else if (rc == Z_BUF_ERROR && z->avail_out > 0) {
      break; /* no progress possible with this input: wait for more */
    }
  }
  if (h->r.body.data) h->r.body.data[h->r.body.len] = '\0';
}

static enum MHD_Result on_request(void *cls, struct MHD_Connection *c, const char *url, const char *method,
                                  const char *version, const char *upload_data, size_t *upload_data_size, void **con_cls) {
  (void)version;
  toplu_server_t *ts = cls;
  srv_server_t *s = &ts->s;
  http_req_t *h = *con_cls;
  if (!h) {
    h = calloc(1, sizeof *h);
    if (!h) return MHD_NO;
    h->srv = ts;
    h->r.arrival_ns = toplu_monotonic_ns();
    h->r.fd = -1;
    h->r.header_len = -1;
    snprintf(h->method_buf, sizeof h->method_buf, "%s", method); /* kept for a line at completion */
    h->method = h->method_buf;
    if (s->opts.header_timeout_s > 0) conn_mark(ts, c, 1);
    snprintf(h->url, sizeof h->url, "%s", url);
    atomic_init(&h->r.finished, 0);
    atomic_fetch_add(&s->inflight, 1);
    *con_cls = h;
    size_t head = strlen(method) + strlen(url) + 12; /* "M URL HTTP/1.1\r\n" */
    MHD_get_connection_values(c, MHD_HEADER_KIND, add_header_bytes, &head);
    if (head > s->opts.max_header_bytes) {
      h->head_too_large = 1;
      return answer_error(h, c, 431, "the request line and headers are %zu bytes, over the limit of %zu (max_header_bytes)",
                          head, s->opts.max_header_bytes);
    }
    cl_seen_t seen = {0, NULL, NULL};
    MHD_get_connection_values(c, MHD_HEADER_KIND, note_content_length, &seen);
    if (seen.other)
      return answer_error(h, c, 400,
                          "Content-Length given %d times with different values ('%.40s', '%.40s'): the body's length "
                          "is ambiguous",
                          seen.n, seen.first, seen.other);
    const char *cl = MHD_lookup_connection_value(c, MHD_HEADER_KIND, MHD_HTTP_HEADER_CONTENT_LENGTH);
    /* both (RFC 9112 section 6.1: a request-smuggling sign; the server must close the connection after it):
     * refused before the body is read, so libmicrohttpd closes the connection (it answered 200 and kept it
     * open; a fresh user's finding of 2026-12-06) */
    if (cl && MHD_lookup_connection_value(c, MHD_HEADER_KIND, MHD_HTTP_HEADER_TRANSFER_ENCODING)) {
      h->must_close = 1;
      return answer_error(h, c, 400,
                          "both Transfer-Encoding and Content-Length are given: the body's length is ambiguous (RFC "
                          "9112 section 6.1); send one of them");
    }
    if (cl) {
      char *end;
      unsigned long long n = strtoull(cl, &end, 10);
      if (*end == 0 && n > s->opts.max_body_bytes) {
        /* Answer 413 now, without reading the body (libmicrohttpd then
         * closes the connection). */
        h->too_large = 1;
        return route(h, c);
      }
    }
    const char *ce = MHD_lookup_connection_value(c, MHD_HEADER_KIND, "Content-Encoding");
    if (ce && *ce && strcasecmp(ce, "identity")) {
      int gzip = !strcasecmp(ce, "gzip") || !strcasecmp(ce, "x-gzip"), deflate = !strcasecmp(ce, "deflate");
      if (!gzip && !deflate) {
        h->enc_status = 415;
        snprintf(h->enc_error, sizeof h->enc_error, "Content-Encoding '%.60s': not supported (gzip, deflate, identity)", ce);
      }
      h->enc_name = gzip ? "gzip" : "deflate";
      if (!h->enc_status &&
          (!(h->z = calloc(1, sizeof *h->z)) || inflateInit2(h->z, gzip ? 16 + MAX_WBITS : MAX_WBITS) != Z_OK)) {
        free(h->z);
        h->z = NULL;
        return MHD_NO; /* out of memory: drop the connection */
      }
    }
    /* While the body arrives, the connection's idle timeout is the request
     * timeout: a client that goes silent mid-body is disconnected after
     * request_timeout_s (one that keeps sending gets 408 below); the
     * connection timeout again once the body is in. */
    if (s->opts.request_timeout_s > 0 && (cl || MHD_lookup_connection_value(c, MHD_HEADER_KIND, "Transfer-Encoding"))) {
      MHD_set_connection_option(c, MHD_CONNECTION_OPTION_TIMEOUT, (unsigned)s->opts.request_timeout_s);
      h->body_timeout = 1;
    }
    return MHD_YES;
  }
  if (h->body_timeout && !*upload_data_size) { /* the body is in */
    MHD_set_connection_option(c, MHD_CONNECTION_OPTION_TIMEOUT, (unsigned)s->opts.connection_timeout_s);
    h->body_timeout = 0;
  }
  if (h->phase == PH_ANSWERED) return send_answer(h, c);
  if (h->phase == PH_SENT) { /* answered early (413, 408, 431): the rest of the body is dropped */
    *upload_data_size = 0;
    return MHD_YES;
  }
  if (h->phase == PH_QUEUED) return MHD_YES; /* spurious call while suspended */
  if (*upload_data_size) {
    if (s->opts.request_timeout_s > 0 && !h->too_late &&
        toplu_monotonic_ns() - h->r.arrival_ns > (int64_t)s->opts.request_timeout_s * 1000000000) {
      h->too_late = 1;
      drop_body(s, h);
      *upload_data_size = 0;
      return answer_error(h, c, 408, "the request body took over %d s to arrive (request_timeout_s)", s->opts.request_timeout_s);
    }
    if (h->too_late) {
      *upload_data_size = 0;
      return MHD_YES;
    }
    if (h->enc_status) {
      *upload_data_size = 0;
      return MHD_YES;
    }
    if (h->z && !h->too_large && !h->too_busy) {
      inflate_body(s, h, upload_data, *upload_data_size, s->opts.max_body_bytes);
      *upload_data_size = 0;
      return MHD_YES;
    }
    if (h->too_busy) {
      *upload_data_size = 0;
      return MHD_YES;
    }
    if (!h->too_large) {
      if (h->r.body.len + *upload_data_size > s->opts.max_body_bytes) {
        h->too_large = 1;
        drop_body(s, h);
      } else if (hold_bytes(s, h, *upload_data_size)) {
        h->too_busy = busy_kind(s, h, *upload_data_size); /* the bodies held at once (1,024 x 256 MiB had no bound) */
        drop_body(s, h);
      } else {
        if (h->r.body.len == 0 && h->r.body.cap == 0) {
          const char *cl = MHD_lookup_connection_value(c, MHD_HEADER_KIND, MHD_HTTP_HEADER_CONTENT_LENGTH);
          unsigned long long n = cl ? strtoull(cl, NULL, 10) : 0;
          /* Room for the declared body, but no more than 1 MiB before the
           * bytes arrive: a Content-Length alone must not take memory. */
          if (n > 0 && n <= s->opts.max_body_bytes) pl_buf_reserve(&h->r.body, (size_t)(n < (1u << 20) ? n : (1u << 20)));
        }
        pl_buf_append(&h->r.body, upload_data, *upload_data_size);
        if (h->r.body.oom) {
          h->too_large = 1;
          drop_body(s, h);
        }
      }
    }
    *upload_data_size = 0;
    return MHD_YES;
  }
  if (h->z && !h->z_done && h->z->total_in > 0 && !h->too_large && !h->enc_status) {
    h->enc_status = 400;
    snprintf(h->enc_error, sizeof h->enc_error, "Content-Encoding %s: the compressed body (%lu bytes) ends before its stream does",
             h->enc_name, (unsigned long)h->z->total_in);
  }
  if (atomic_load(&s->stopping) && strstr(h->url, "/health") == NULL && strcmp(h->url, "/metrics") &&
      strstr(h->url, "/infer") == NULL)
    return answer_error(h, c, 503, "the server is shutting down");
  return route(h, c);
}

static void on_completed(void *cls, struct MHD_Connection *c, void **con_cls, enum MHD_RequestTerminationCode toe) {
  toplu_server_t *ts = cls;
  http_req_t *h = *con_cls;
  if (!h) return;
  *con_cls = NULL;
  if (ts->s.opts.header_timeout_s > 0) conn_mark(ts, c, 0);
  /* a request that got no response (its client closed the connection first: counted CANCELED) gets its access
   * line too, with nginx's 499, so dropped requests show in the log (they did not: a fresh user's finding) */
  if (h->phase != PH_SENT && toe != MHD_REQUEST_TERMINATED_COMPLETED_OK) access_line(h, 499, 0);
  srv_infer_free(&h->r.infer);
  release_bytes(&ts->s, h, h->held);
  if (h->z) {
    inflateEnd(h->z);
    free(h->z);
  }
  pl_buf_free(&h->r.body);
  pl_buf_free(&h->r.out);
  pl_buf_free(&h->r.key);
  if (h->r.model) srv_model_unref(h->r.model);
  if (h->cc) {
    h->cc->busy = 0;
    if (!atomic_load(&ts->s.stopping)) idle_append(&ts->s, h->cc);
  }
  free(h);
  atomic_fetch_sub(&ts->s.inflight, 1);
}

static void on_connection(void *cls, struct MHD_Connection *c, void **socket_context, enum MHD_ConnectionNotificationCode toe) {
  toplu_server_t *ts = cls;
  if (toe == MHD_CONNECTION_NOTIFY_STARTED) {
    atomic_fetch_add(&ts->s.connections, 1);
    conn_ctx_t *cc = calloc(1, sizeof(conn_ctx_t)); /* NULL: the connection is simply not counted */
    *socket_context = cc;
    const union MHD_ConnectionInfo *fi = MHD_get_connection_info(c, MHD_CONNECTION_INFO_CONNECTION_FD);
    if (cc && fi) {
      cc->fd = fi->connect_fd;
      cc->waiting_since = toplu_monotonic_ns();
      pthread_mutex_lock(&ts->conn_mu);
      cc->cnext = ts->conn_head;
      if (ts->conn_head) ts->conn_head->cprev = cc;
      ts->conn_head = cc;
      pthread_mutex_unlock(&ts->conn_mu);
    } else if (cc) {
      cc->fd = -1;
    }
  } else {
    atomic_fetch_sub(&ts->s.connections, 1);
    conn_ctx_t *cc = *socket_context;
    if (cc) idle_remove(&ts->s, cc);
    /* Off the list before libmicrohttpd closes the socket (it notifies
     * first), so the watcher never shuts down a descriptor reused since. */
    if (cc && cc->fd >= 0) {
      pthread_mutex_lock(&ts->conn_mu);
      if (cc->cprev) cc->cprev->cnext = cc->cnext;
      else if (ts->conn_head == cc) ts->conn_head = cc->cnext;
      if (cc->cnext) cc->cnext->cprev = cc->cprev;
      pthread_mutex_unlock(&ts->conn_mu);
    }
    free(cc);
    *socket_context = NULL;
  }
}

/* The header deadline: libmicrohttpd's connection timeout counts idle
 * time only, so a client sending its request line and headers a byte at a
 * time would hold its connection for ever.  This thread shuts down (2)
 * the socket of each connection that has waited header_timeout_s for a
 * complete request line and headers since it opened or its previous
 * request completed; libmicrohttpd then reads the end of the stream and
 * closes it.  An idle keep-alive connection is closed the same way. */
static void *watch_main(void *arg) {
  toplu_server_t *ts = arg;
  int64_t limit = (int64_t)ts->s.opts.header_timeout_s * 1000000000;
  int64_t step = limit / 4 < 1000000000 ? limit / 4 : 1000000000;
  if (step < 50000000) step = 50000000;
  pthread_mutex_lock(&ts->conn_mu);
  while (!ts->watch_stop) {
    srv_cond_wait_until(&ts->watch_cv, &ts->conn_mu, toplu_monotonic_ns() + step);
    int64_t now = toplu_monotonic_ns();
    int cut = 0;
    for (conn_ctx_t *cc = ts->conn_head; cc && !ts->watch_stop; cc = cc->cnext)
      if (!cc->in_request && !cc->cut && now - cc->waiting_since > limit) {
        shutdown(cc->fd, SHUT_RDWR);
        cc->cut = 1;
        cut++;
      }
    if (cut)
      srv_log(&ts->s, TOPLU_LOG_DEBUG,
              "closed %d connection(s) without a complete request line and headers for %d s (header_timeout_s)", cut,
              ts->s.opts.header_timeout_s);
  }
  pthread_mutex_unlock(&ts->conn_mu);
  return NULL;
}

static void watch_stop(toplu_server_t *ts) {
  if (!ts->watch_started) return;
  pthread_mutex_lock(&ts->conn_mu);
  ts->watch_stop = 1;
  pthread_cond_signal(&ts->watch_cv);
  pthread_mutex_unlock(&ts->conn_mu);
  pthread_join(ts->watch, NULL);
  ts->watch_started = 0;
}

/* ---------------------------------------------------------------- lifecycle */

void toplu_server_options_init(toplu_server_options_t *o) {
  if (!o) return;
  memset(o, 0, sizeof *o);
  o->http_port = 8000;
  o->http_threads = 0; /* the cores, 2 to 4 (toplu_server_start) */
  o->max_body_bytes = 0; /* 256 MiB, or a quarter of the memory available when less (toplu_server_start) */
  o->max_header_bytes = (size_t)64 << 10;
  o->max_connections = 1024;
  o->connection_timeout_s = 60;
  o->request_timeout_s = 30;
  o->header_timeout_s = 30;
  o->exit_timeout_ms = 30000;
  o->cache_bytes = (size_t)256 << 20;
  o->strict_readiness = 1;
}

int toplu_server_port(const toplu_server_t *s) { return s ? s->port : 0; }

int toplu_server_metrics_port(const toplu_server_t *s) { return s ? s->metrics_port : 0; }

void toplu_server_shutdown(toplu_server_t *ts) {
  if (!ts) return;
  int expected = 0;
  if (!atomic_compare_exchange_strong(&ts->shutdown_requested, &expected, 1)) return;
  atomic_store(&ts->s.stopping, 1);
  __atomic_store_n(&ts->s.load_cancel, 1, __ATOMIC_RELEASE);
  ssize_t k = write(ts->pipe_fd[1], "x", 1);
  (void)k;
}

static void free_server(toplu_server_t *ts) {
  srv_server_t *s = &ts->s;
  srv_repo_destroy(s);
  srv_cache_destroy(s->cache);
  if (ts->pipe_fd[0] >= 0) close(ts->pipe_fd[0]);
  if (ts->pipe_fd[1] >= 0) close(ts->pipe_fd[1]);
  pthread_mutex_destroy(&s->log_mu);
  pthread_mutex_destroy(&s->repo_mu);
  pthread_mutex_destroy(&s->op_mu);
  pthread_cond_destroy(&s->op_cv);
  pthread_mutex_destroy(&s->retire_mu);
  pthread_mutex_destroy(&s->idle_mu);
  pthread_mutex_destroy(&s->cpu_mu);
  pthread_cond_destroy(&s->retire_cv);
  pthread_mutex_destroy(&ts->conn_mu);
  pthread_cond_destroy(&ts->watch_cv);
  free(ts);
}

static const char *base_name(const char *p, char *buf, size_t size) {
  const char *b = strrchr(p, '/');
  b = b ? b + 1 : p;
  snprintf(buf, size, "%s", b);
  size_t n = strlen(buf);
  if (n > 5 && !strcmp(buf + n - 5, ".onnx")) buf[n - 5] = 0;
  return buf;
}

typedef struct start_load {
  toplu_server_t *ts;
  const toplu_server_options_t *o;
  toplu_error_t *err;
  toplu_status_t st;
} start_load_t;

/* The models of a starting server: the repository's, or the one file. */
static void *start_load(void *arg) {
  start_load_t *sl = arg;
  toplu_server_t *ts = sl->ts;
  srv_server_t *s = &ts->s;
  const toplu_server_options_t *o = sl->o;
  toplu_error_t *err = sl->err;
  if (o->model_repository) {
    if (srv_repo_load_all(s, err)) sl->st = err ? err->status : TOPLU_ERR_INVALID_MODEL;
    return NULL;
  }
  char name[SRV_NAME_MAX];
  if (o->model_name && *o->model_name) snprintf(name, sizeof name, "%s", o->model_name);
  else base_name(o->model_path, name, sizeof name);
  srv_config_t *cfg = malloc(sizeof *cfg); /* ~100 KB: not on this thread's stack */
  if (!cfg) {
    sl->st = toplu__errorf(err, TOPLU_ERR_OUT_OF_MEMORY, "out of memory for the model's configuration");
    return NULL;
  }
  srv_config_defaults(cfg);
  snprintf(cfg->name, sizeof cfg->name, "%s", name);
  s->instance_budget = cfg->instance_count > 0 ? cfg->instance_count : 1;
  srv_model_t *m = NULL;
  if (srv_model_load(s, name, "1", o->model_path, cfg, &m, err) || srv_repo_add(s, m, err))
    sl->st = err ? err->status : TOPLU_ERR_INVALID_MODEL;
  free(cfg);
  return NULL;
}

toplu_status_t toplu_server_start(const toplu_server_options_t *o, toplu_server_t **out, toplu_error_t *err) {
  toplu_error_clear(err);
  if (!o || !out) return toplu__errorf(err, TOPLU_ERR_INVALID_ARGUMENT, "toplu_server_start: NULL options or out");
  *out = NULL;
  if (!!o->model_repository == !!o->model_path)
    return toplu__errorf(err, TOPLU_ERR_INVALID_ARGUMENT, "give exactly one of model_repository and model_path");
  if (o->model_name && *o->model_name && !srv_repo_valid_name(o->model_name))
    return toplu__errorf(err, TOPLU_ERR_INVALID_ARGUMENT,
                         "model_name '%.300s' is not a model name (not \".\" or \"..\", no '/', under %d bytes)",
                         o->model_name, SRV_NAME_MAX);
  if (o->http_port < 0 || o->http_port > 65535)
    return toplu__errorf(err, TOPLU_ERR_INVALID_ARGUMENT, "http_port %d is outside 0..65535", o->http_port);
  if (o->metrics_port < -1 || o->metrics_port > 65535)
    return toplu__errorf(err, TOPLU_ERR_INVALID_ARGUMENT, "metrics_port %d is outside -1..65535", o->metrics_port);
  if (o->metrics_port > 0 && o->metrics_port == o->http_port)
    return toplu__errorf(err, TOPLU_ERR_INVALID_ARGUMENT,
                         "metrics_port %d is the http_port: give another port, or none (/metrics is served on the "
                         "http_port too)",
                         o->metrics_port);
  if (o->http_threads < 0 || o->http_threads > 1024)
    return toplu__errorf(err, TOPLU_ERR_INVALID_ARGUMENT, "http_threads %d is outside 0..1024", o->http_threads);
  if (o->threads < 0 || o->threads > TOPLU_MAX_THREADS)
    return toplu__errorf(err, TOPLU_ERR_INVALID_ARGUMENT, "threads %d is outside 0..%d", o->threads, TOPLU_MAX_THREADS);
  if (o->max_connections < 0 || o->connection_timeout_s < 0 || o->request_timeout_s < 0 || o->header_timeout_s < 0 ||
      o->exit_timeout_ms < 0)
    return toplu__errorf(err, TOPLU_ERR_INVALID_ARGUMENT,
                         "max_connections %d, connection_timeout_s %d, request_timeout_s %d, header_timeout_s %d, "
                         "exit_timeout_ms %lld: none may be negative",
                         o->max_connections, o->connection_timeout_s, o->request_timeout_s, o->header_timeout_s,
                         (long long)o->exit_timeout_ms);
  toplu_server_t *ts = calloc(1, sizeof *ts);
  if (!ts) return toplu__errorf(err, TOPLU_ERR_OUT_OF_MEMORY, "out of memory for the server");
  srv_server_t *s = &ts->s;
  s->opts = *o;
  {
    /* A quarter of the memory available (MemAvailable, or the cgroup limit less its usage) for request bodies and
     * their parses, and no single body larger: the body limit of 256 MiB held the default at 256 MiB and more in a
     * 400 MiB container, where one 16-row JSON request's parse got the server killed (a fresh user's finding of
     * 2026-12-06). A body limit given larger raises the in-flight bound to it, as before. */
    uint64_t avail = toplu_cpu_memory_available(NULL, 0);
    size_t q = avail / 4 > SIZE_MAX ? SIZE_MAX : (size_t)(avail / 4);
    if (q < ((size_t)16 << 20)) q = (size_t)16 << 20;
    if (!s->opts.max_body_bytes) s->opts.max_body_bytes = q < ((size_t)256 << 20) ? q : (size_t)256 << 20;
    if (!s->opts.max_inflight_bytes) s->opts.max_inflight_bytes = q > s->opts.max_body_bytes ? q : s->opts.max_body_bytes;
  }
  atomic_init(&s->held_bytes, 0);
  if (!s->opts.max_header_bytes) s->opts.max_header_bytes = (size_t)64 << 10;
  if (!s->opts.max_connections) s->opts.max_connections = 1024;
  if (!s->opts.http_threads) {
    /* polling threads: a request's JSON is parsed on its connection's polling thread (a 32 MiB body held the one
     * thread 2.3 s, and every other connection, health probes too, waited; a fresh user's finding of 2026-12-06);
     * Triton's HTTP endpoint has 8 threads by default */
    int cores = toplu_cpu_count(NULL, 0);
    s->opts.http_threads = cores < 2 ? 2 : cores > 4 ? 4 : cores;
  }
  ts->pipe_fd[0] = ts->pipe_fd[1] = -1;
  pthread_mutex_init(&s->log_mu, NULL);
  pthread_mutex_init(&s->repo_mu, NULL);
  pthread_mutex_init(&s->op_mu, NULL);
  srv_cond_init_monotonic(&s->op_cv);
  s->op_next = s->op_serving = 0;
  atomic_init(&s->loads_pending, 0);
  pthread_mutex_init(&s->retire_mu, NULL);
  pthread_mutex_init(&s->idle_mu, NULL);
  pthread_mutex_init(&s->cpu_mu, NULL);
  (void)read_cpu_jiffies(&s->cpu_total, &s->cpu_idle); /* the first scrape's utilization: since the start */
  pthread_cond_init(&s->retire_cv, NULL);
  pthread_mutex_init(&ts->conn_mu, NULL);
  srv_cond_init_monotonic(&ts->watch_cv);
  if (pipe(ts->pipe_fd)) {
    toplu__errorf(err, TOPLU_ERR_IO, "pipe: %s", strerror(errno));
    free_server(ts);
    return err ? err->status : TOPLU_ERR_IO;
  }
  fcntl(ts->pipe_fd[1], F_SETFL, O_NONBLOCK);
  if (o->cache_bytes > 0 && !(s->cache = srv_cache_create(o->cache_bytes))) {
    free_server(ts);
    return toplu__errorf(err, TOPLU_ERR_OUT_OF_MEMORY, "out of memory for the response cache");
  }
  if (srv_repo_start(s, err)) {
    free_server(ts);
    return err ? err->status : TOPLU_ERR_INTERNAL;
  }
  if (o->model_repository) {
    snprintf(s->repo_dir, sizeof s->repo_dir, "%s", o->model_repository);
    size_t n = strlen(s->repo_dir);
    while (n > 1 && s->repo_dir[n - 1] == '/') s->repo_dir[--n] = 0;
  } else {
    ts->single = 1;
  }
  /* Load on a thread of its own that then ends: the warm-up's and the
   * planner's OpenMP threads go with it.  Left in the caller's thread they
   * would outnumber the cores next to the instances' own, and libgomp then
   * sleeps at every barrier instead of spinning (5 ms instead of 0.6 ms per
   * request of the direction classifier on 2 cores: docs/performance.md). */
  start_load_t sl = {ts, o, err, TOPLU_OK};
  s->start_cancel = o->cancel;
  pthread_t lt;
  if (pthread_create(&lt, NULL, start_load, &sl) != 0) {
    start_load(&sl);
  } else {
    pthread_join(lt, NULL);
  }
  s->start_cancel = NULL;
  toplu_status_t st = sl.st;
  if (o->cancel && __atomic_load_n(o->cancel, __ATOMIC_ACQUIRE)) {
    free_server(ts);
    return toplu__errorf(err, TOPLU_ERR_CANCELLED, "stopped while the models loaded (before listening)");
  }
  if (st != TOPLU_OK) {
    free_server(ts);
    return st;
  }
  /* Listen. */
  struct sockaddr_in a4;
  struct sockaddr_in6 a6;
  struct sockaddr *addr = NULL;
  unsigned flags = MHD_USE_POLL_INTERNAL_THREAD | MHD_ALLOW_SUSPEND_RESUME | MHD_USE_ITC | MHD_USE_ERROR_LOG;
  const char *host = o->host && *o->host ? o->host : "0.0.0.0";
  memset(&a4, 0, sizeof a4);
  memset(&a6, 0, sizeof a6);
  if (inet_pton(AF_INET, host, &a4.sin_addr) == 1) {
    a4.sin_family = AF_INET;
    a4.sin_port = htons((uint16_t)o->http_port);
    addr = (struct sockaddr *)&a4;
  } else if (inet_pton(AF_INET6, host, &a6.sin6_addr) == 1) {
    a6.sin6_family = AF_INET6;
    a6.sin6_port = htons((uint16_t)o->http_port);
    addr = (struct sockaddr *)&a6;
    /* "::" takes IPv4 clients too (dual stack, as a plain socket on Linux does): libmicrohttpd sets IPV6_V6ONLY
     * unless told, and IPv4 clients of a server on "::" were refused (a fresh user's finding of 2026-12-06) */
    flags |= IN6_IS_ADDR_UNSPECIFIED(&a6.sin6_addr) ? MHD_USE_DUAL_STACK : MHD_USE_IPv6;
  } else {
    free_server(ts);
    return toplu__errorf(err, TOPLU_ERR_INVALID_ARGUMENT, "host '%s' is not an IPv4 or IPv6 address", host);
  }
  errno = 0;
  /* The logger first, so that libmicrohttpd's notes on the later options go to it. */
  struct MHD_OptionItem pool[] = {
      {s->opts.http_threads > 1 ? MHD_OPTION_THREAD_POOL_SIZE : MHD_OPTION_END, (intptr_t)s->opts.http_threads, NULL},
      {MHD_OPTION_END, 0, NULL}};
  ts->daemon = MHD_start_daemon(
      flags, (uint16_t)o->http_port, NULL, NULL, on_request, ts, MHD_OPTION_EXTERNAL_LOGGER, mhd_logger, s,
      MHD_OPTION_SOCK_ADDR, addr, MHD_OPTION_NOTIFY_COMPLETED, on_completed, ts, MHD_OPTION_NOTIFY_CONNECTION,
      on_connection, ts, MHD_OPTION_CONNECTION_LIMIT, (unsigned)s->opts.max_connections, MHD_OPTION_CONNECTION_TIMEOUT,
      (unsigned)s->opts.connection_timeout_s, MHD_OPTION_CONNECTION_MEMORY_LIMIT, s->opts.max_header_bytes + SRV_READ_ROOM,
      MHD_OPTION_UNESCAPE_CALLBACK, unescape_url, NULL, MHD_OPTION_ARRAY, pool, MHD_OPTION_END);
  if (!ts->daemon) {
    int e = errno;
    free_server(ts);
    return toplu__errorf(err, TOPLU_ERR_IO, "cannot listen on %s port %d: %s", host, o->http_port,
                         e ? strerror(e) : "libmicrohttpd refused to start");
  }
  if (s->opts.header_timeout_s > 0) {
    if (pthread_create(&ts->watch, NULL, watch_main, ts) != 0) {
      MHD_stop_daemon(ts->daemon);
      ts->daemon = NULL;
      free_server(ts);
      return toplu__errorf(err, TOPLU_ERR_INTERNAL, "cannot start the header-deadline thread");
    }
    ts->watch_started = 1;
  }
  const union MHD_DaemonInfo *di = MHD_get_daemon_info(ts->daemon, MHD_DAEMON_INFO_BIND_PORT);
  ts->port = di ? di->port : o->http_port;
  srv_log(s, TOPLU_LOG_NOTE, "listening on %s port %d (HTTP, KServe v2)", host, ts->port);
  if (o->metrics_port) {
    /* Triton's metrics port: one more listener on the same handler, GET /metrics only (route) */
    uint16_t mp = o->metrics_port > 0 ? (uint16_t)o->metrics_port : 0;
    if (addr == (struct sockaddr *)&a4) a4.sin_port = htons(mp);
    else a6.sin6_port = htons(mp);
    errno = 0;
    ts->metrics_daemon = MHD_start_daemon(
        flags, mp, NULL, NULL, on_request, ts, MHD_OPTION_EXTERNAL_LOGGER, mhd_logger, s, MHD_OPTION_SOCK_ADDR, addr,
        MHD_OPTION_NOTIFY_COMPLETED, on_completed, ts, MHD_OPTION_NOTIFY_CONNECTION, on_connection, ts,
        MHD_OPTION_CONNECTION_LIMIT, (unsigned)64, MHD_OPTION_CONNECTION_TIMEOUT, (unsigned)s->opts.connection_timeout_s,
        MHD_OPTION_CONNECTION_MEMORY_LIMIT, s->opts.max_header_bytes + SRV_READ_ROOM, MHD_OPTION_UNESCAPE_CALLBACK,
        unescape_url, NULL, MHD_OPTION_END);
    if (!ts->metrics_daemon) {
      int e = errno;
      toplu_server_shutdown(ts);
      (void)toplu_server_wait(ts);
      toplu_server_destroy(ts);
      return toplu__errorf(err, TOPLU_ERR_IO, "cannot listen on %s port %d for metrics: %s", host, o->metrics_port,
                           e ? strerror(e) : "libmicrohttpd refused to start");
    }
    ts->metrics_id = ts->metrics_daemon;
    const union MHD_DaemonInfo *mi = MHD_get_daemon_info(ts->metrics_daemon, MHD_DAEMON_INFO_BIND_PORT);
    ts->metrics_port = mi ? mi->port : o->metrics_port;
    srv_log(s, TOPLU_LOG_NOTE, "listening on %s port %d (GET /metrics)", host, ts->metrics_port);
  }
  *out = ts;
  return TOPLU_OK;
}

toplu_status_t toplu_server_wait(toplu_server_t *ts) {
  if (!ts) return TOPLU_ERR_INVALID_ARGUMENT;
  if (ts->waited) return ts->wait_status;
  srv_server_t *s = &ts->s;
  char c;
  while (read(ts->pipe_fd[0], &c, 1) < 0 && errno == EINTR) {
  }
  int64_t t0 = toplu_monotonic_ns();
  int64_t deadline = t0 + s->opts.exit_timeout_ms * 1000000;
  srv_log(s, TOPLU_LOG_NOTE, "shutting down: not ready, no new connections, finishing %ld request(s) in flight",
          (long)atomic_load(&s->inflight));
  MHD_socket lfd = MHD_quiesce_daemon(ts->daemon);
  if (lfd != MHD_INVALID_SOCKET) close(lfd);
  if (ts->metrics_daemon) { /* scrapes end with the server */
    MHD_stop_daemon(ts->metrics_daemon);
    ts->metrics_daemon = NULL;
  }
  toplu_status_t st = TOPLU_OK;
  if (srv_repo_drain_all(s, s->opts.exit_timeout_ms > 0 ? deadline : t0 + 1)) {
    st = TOPLU_ERR_DEADLINE;
    srv_log(s, TOPLU_LOG_WARNING, "exit timeout of %lld ms reached: the requests left were answered 503",
            (long long)s->opts.exit_timeout_ms);
  }
  /* Repository requests still waiting or running: answered 503 at the deadline (their threads go on alone and
   * answer nothing), so that no connection is left suspended when the daemon stops: libmicrohttpd aborts the
   * process then (a load stuck reading a FIFO; a fresh user's finding of 2026-12-06). */
  pthread_mutex_lock(&s->op_mu);
  int64_t op_deadline = s->opts.exit_timeout_ms > 0 ? deadline : t0 + 1;
  while (s->ops && toplu_monotonic_ns() < op_deadline) srv_cond_wait_until(&s->op_cv, &s->op_mu, op_deadline);
  for (repo_op_t *op = s->ops; op; op = op->next)
    if (op->h) {
      char m[SRV_NAME_MAX + 160];
      snprintf(m, sizeof m, "the server is shutting down: the %s of model '%s' had not finished", op->unload ? "unload" : "load",
               op->name);
      set_error(&op->h->r, 503, m);
      srv_req_finish(&op->h->r);
      op->h = NULL;
      st = TOPLU_ERR_DEADLINE;
    }
  /* their threads still use the server: up to 30 s more for them to end, else its memory is never freed */
  int64_t op_grace = toplu_monotonic_ns() + 30000000000LL;
  while (s->ops && toplu_monotonic_ns() < op_grace) srv_cond_wait_until(&s->op_cv, &s->op_mu, op_grace);
  ts->ops_left = s->ops != NULL;
  pthread_mutex_unlock(&s->op_mu);
  if (ts->ops_left)
    srv_log(s, TOPLU_LOG_WARNING, "repository requests still run 30 s after the stop; the server's memory is kept for them");
  /* Let the answers go out: every request handled is completed by libmicrohttpd. */
  int64_t send_deadline = toplu_monotonic_ns() + 5000000000LL;
  while (atomic_load(&s->inflight) > 0 && toplu_monotonic_ns() < send_deadline) {
    struct timespec ts2 = {0, 2000000};
    nanosleep(&ts2, NULL);
  }
  watch_stop(ts);
  MHD_stop_daemon(ts->daemon);
  ts->daemon = NULL;
  pthread_mutex_lock(&s->repo_mu);
  for (int i = 0; i < s->n_models; i++) {
    int64_t ok, fail, rows, batches;
    srv_metrics_totals(s->models[i]->metrics, &ok, &fail, &rows, &batches);
    srv_log(s, TOPLU_LOG_NOTE, "model '%s' version %s: %lld success, %lld failure, %lld rows in %lld batches", s->models[i]->name,
            s->models[i]->version, (long long)ok, (long long)fail, (long long)rows, (long long)batches);
  }
  pthread_mutex_unlock(&s->repo_mu);
  srv_log(s, TOPLU_LOG_NOTE, "stopped after %.1f ms; responses 2xx %ld, 4xx %ld, 5xx %ld", (double)(toplu_monotonic_ns() - t0) / 1e6,
          (long)atomic_load(&s->responses_by_code[2]), (long)atomic_load(&s->responses_by_code[4]),
          (long)atomic_load(&s->responses_by_code[5]));
  ts->waited = 1;
  ts->wait_status = st;
  return st;
}

void toplu_server_destroy(toplu_server_t *ts) {
  if (!ts) return;
  if (!ts->waited) {
    toplu_server_shutdown(ts);
    toplu_server_wait(ts);
  }
  if (ts->ops_left) return; /* a repository thread still reads it (toplu_server_wait said so) */
  free_server(ts);
}
