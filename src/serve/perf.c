/*
 * serve/perf.c - toplu perf's sweep: model metadata (libcurl), the load
 * loop (epoll over perf_http.c's connections, each request sent whole),
 * windows and stability, /metrics deltas, CSV (see toplu/perf.h for the
 * method).
 */
#include <curl/curl.h>
#include <errno.h>
#include <jansson.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <unistd.h>

#include "core/error.h"
#include "toplu/npy.h"
#include "serve/perf_priv.h"
#include "serve/protocol.h"

/* ---- small helpers ---------------------------------------------------- */

static void perf_log(const toplu_perf_options_t *o, toplu_log_level_t lv, const char *fmt, ...) TOPLU_PRINTF(3, 4);
static void perf_log(const toplu_perf_options_t *o, toplu_log_level_t lv, const char *fmt, ...) {
  if (!o->log) return;
  char msg[512];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  o->log(o->log_user, lv, msg);
}

static size_t sink_cb(char *p, size_t sz, size_t n, void *user) {
  pl_buf_t *b = user;
  if (b) pl_buf_append(b, p, sz * n);
  return sz * n;
}

static double now_s(void) { return pl_now(); }

/* The model's metadata, config and /metrics GETs: their own timeout, not
 * request_timeout_ms (that one times the inferences only). */
#define PERF_META_TIMEOUT_MS 30000
/* A closed-loop client whose request got no response (connection refused,
 * reset) waits before its next one: 10 ms, doubling to 1 s, so a server that
 * died is not hammered with tens of thousands of connects a second. */
#define PERF_BACKOFF_MIN_S 0.01
#define PERF_BACKOFF_MAX_S 1.0

/* GET base+path into body; *status the HTTP status.  TOPLU_ERR_IO with the
 * URL and curl's reason when no response came. */
static toplu_status_t http_get(const char *base, const char *path, const struct curl_slist *hdrs, long timeout_ms,
                               pl_buf_t *body, long *status, toplu_error_t *err) {
  char url[1024];
  snprintf(url, sizeof url, "%s%s", base, path);
  CURL *h = curl_easy_init();
  if (!h) return toplu__errorf(err, TOPLU_ERR_OUT_OF_MEMORY, "libcurl: cannot make a handle");
  char cerr[CURL_ERROR_SIZE] = "";
  curl_easy_setopt(h, CURLOPT_URL, url);
  curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, sink_cb);
  curl_easy_setopt(h, CURLOPT_WRITEDATA, body);
  curl_easy_setopt(h, CURLOPT_TIMEOUT_MS, timeout_ms);
  curl_easy_setopt(h, CURLOPT_ERRORBUFFER, cerr);
  curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
  if (hdrs) curl_easy_setopt(h, CURLOPT_HTTPHEADER, hdrs);
  CURLcode rc = curl_easy_perform(h);
  curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, status);
  curl_easy_cleanup(h);
  if (rc != CURLE_OK)
    return toplu__errorf(err, TOPLU_ERR_IO, "cannot reach the server at %s: %s", url,
                         cerr[0] ? cerr : curl_easy_strerror(rc));
  if (body->oom) return toplu__errorf(err, TOPLU_ERR_OUT_OF_MEMORY, "%s: out of memory for the response", url);
  pl_buf_putc(body, '\0');
  body->len--;
  return TOPLU_OK;
}

/* The "error" member of a KServe error body, else the body's start. */
static void error_text(const char *body, char *out, size_t size) {
  json_t *j = json_loads(body, 0, NULL);
  const char *e = j ? json_string_value(json_object_get(j, "error")) : NULL;
  snprintf(out, size, "%.200s", e ? e : body);
  json_decref(j);
}

/* ---- metadata --------------------------------------------------------- */

typedef struct perf_model {
  int n;
  srv_perf_input_t *inputs;
  int batching;
  int64_t max_batch_size; /* -1 unknown (no config) */
} perf_model_t;

static void model_free(perf_model_t *m) {
  for (int i = 0; m->inputs && i < m->n; i++) free(m->inputs[i].name);
  free(m->inputs);
  memset(m, 0, sizeof *m);
}

static toplu_status_t parse_metadata(const char *text, const char *what, perf_model_t *m, char *version,
                                     size_t vsize, toplu_error_t *err) {
  json_error_t je;
  json_t *root = json_loads(text, 0, &je);
  const json_t *ins = root ? json_object_get(root, "inputs") : NULL;
  if (!root || !json_is_array(ins) || !json_array_size(ins)) {
    json_decref(root);
    return toplu__errorf(err, TOPLU_ERR_PARSE, "%s: not model metadata with an \"inputs\" array", what);
  }
  const json_t *vers = json_object_get(root, "versions");
  if (json_is_array(vers) && json_is_string(json_array_get(vers, 0)))
    snprintf(version, vsize, "%s", json_string_value(json_array_get(vers, 0)));
  size_t n = json_array_size(ins);
  if (n > 1024) {
    json_decref(root);
    return toplu__errorf(err, TOPLU_ERR_PARSE, "%s: over 1024 inputs", what);
  }
  m->inputs = calloc(n, sizeof *m->inputs);
  if (!m->inputs) {
    json_decref(root);
    return toplu__errorf(err, TOPLU_ERR_OUT_OF_MEMORY, "out of memory");
  }
  m->n = (int)n;
  toplu_status_t st = TOPLU_OK;
  for (size_t i = 0; !st && i < n; i++) {
    const json_t *in = json_array_get(ins, i);
    const char *name = json_string_value(json_object_get(in, "name"));
    const char *dt = json_string_value(json_object_get(in, "datatype"));
    const json_t *shape = json_object_get(in, "shape");
    srv_perf_input_t *p = &m->inputs[i];
    if (!name || !dt || !json_is_array(shape)) {
      st = toplu__errorf(err, TOPLU_ERR_PARSE, "%s: inputs[%zu]: needs \"name\", \"datatype\" and \"shape\"", what, i);
      break;
    }
    if (!(p->name = strdup(name))) {
      st = toplu__errorf(err, TOPLU_ERR_OUT_OF_MEMORY, "out of memory");
      break;
    }
    p->dtype = srv_datatype_from_name(dt);
    snprintf(p->datatype, sizeof p->datatype, "%s", dt);
    if (p->dtype == TOPLU_DTYPE_UNDEFINED) {
      st = toplu__errorf(err, TOPLU_ERR_UNSUPPORTED, "%s: input '%s': datatype '%s' is not a KServe v2 datatype", what,
                         name, dt);
      break;
    }
    if (json_array_size(shape) > TOPLU_MAX_DIMS) {
      st = toplu__errorf(err, TOPLU_ERR_UNSUPPORTED, "%s: input '%s': rank %zu is over %d", what, name,
                         json_array_size(shape), TOPLU_MAX_DIMS);
      break;
    }
    p->ndim = (int)json_array_size(shape);
    for (int d = 0; d < p->ndim; d++) {
      const json_t *x = json_array_get(shape, (size_t)d);
      json_int_t v = json_is_integer(x) ? json_integer_value(x) : -2;
      if (v < -1 || v > INT32_MAX) {
        st = toplu__errorf(err, TOPLU_ERR_PARSE, "%s: input '%s': shape[%d] is not a dim (-1 or 0..2^31-1)", what,
                           name, d);
        break;
      }
      p->meta_dims[d] = (int64_t)v;
    }
  }
  json_decref(root);
  return st;
}

/* Resolve request shapes: batching, shapes option, batch size. */
static toplu_status_t resolve_shapes(perf_model_t *m, const toplu_perf_options_t *o, int64_t batch,
                                     toplu_error_t *err) {
  for (int s = 0; s < o->n_shapes; s++) {
    int found = 0;
    for (int i = 0; i < m->n && !found; i++) found = !strcmp(m->inputs[i].name, o->shapes[s].name ? o->shapes[s].name : "");
    if (!found)
      return toplu__errorf(err, TOPLU_ERR_NOT_FOUND, "shapes: the model has no input '%s'",
                           o->shapes[s].name ? o->shapes[s].name : "");
  }
  if (m->max_batch_size > 0)
    m->batching = 1;
  else if (m->max_batch_size == 0)
    m->batching = 0;
  else
    m->batching = m->inputs[0].ndim > 0 && m->inputs[0].meta_dims[0] == -1;
  if (batch > 1 && !m->batching)
    return toplu__errorf(err, TOPLU_ERR_SHAPE, "batch_size %lld: the model does not batch (max_batch_size 0)",
                         (long long)batch);
  if (m->max_batch_size > 0 && batch > m->max_batch_size)
    return toplu__errorf(err, TOPLU_ERR_SHAPE, "batch_size %lld is over the model's max_batch_size %lld",
                         (long long)batch, (long long)m->max_batch_size);
  for (int i = 0; i < m->n; i++) {
    srv_perf_input_t *p = &m->inputs[i];
    int off = m->batching ? 1 : 0;
    if (m->batching && p->ndim < 1)
      return toplu__errorf(err, TOPLU_ERR_SHAPE, "input '%s' is a scalar in a batching model", p->name);
    const toplu_perf_shape_t *given = NULL;
    for (int s = 0; s < o->n_shapes; s++)
      if (o->shapes[s].name && !strcmp(o->shapes[s].name, p->name)) given = &o->shapes[s];
    p->req_ndim = p->ndim;
    if (m->batching) p->req_dims[0] = batch;
    for (int d = off; d < p->ndim; d++) p->req_dims[d] = p->meta_dims[d];
    if (given) {
      if (given->ndim != p->ndim - off) {
        char buf[160];
        toplu_shape_format(p->ndim, p->meta_dims, buf, sizeof buf);
        return toplu__errorf(err, TOPLU_ERR_SHAPE, "shapes: input '%s' %s takes %d dims%s, not %d", p->name, buf,
                             p->ndim - off, off ? " (without the batch dim)" : "", given->ndim);
      }
      for (int d = 0; d < given->ndim; d++) {
        int64_t md = p->meta_dims[d + off];
        if (given->dims[d] < 0 || (md >= 0 && md != given->dims[d]))
          return toplu__errorf(err, TOPLU_ERR_SHAPE, "shapes: input '%s' dim %d is %lld in the model, not %lld",
                               p->name, d + off, (long long)md, (long long)given->dims[d]);
        p->req_dims[d + off] = given->dims[d];
      }
    }
  }
  return TOPLU_OK;
}

/* ---- /metrics --------------------------------------------------------- */

enum { M_SUCCESS, M_QUEUE, M_CIN, M_CINFER, M_COUT, M_COUNT, M_EXEC, M_HITS, M_MISSES, M_N };
static const char *const metric_names[M_N] = {
    "nv_inference_request_success",         "nv_inference_queue_duration_us",
    "nv_inference_compute_input_duration_us", "nv_inference_compute_infer_duration_us",
    "nv_inference_compute_output_duration_us", "nv_inference_count",
    "nv_inference_exec_count",              "nv_cache_num_hits_per_model",
    "nv_cache_num_misses_per_model"};

typedef struct perf_snap {
  int ok;
  double v[M_N];
} perf_snap_t;

/* 1 when label key of a label set "{a="x",b="y"}" has the value want, 0
 * when it has another, -1 when there is no such label.  The value is read
 * with the text format's escapes (\\, \", \n) undone: a model named b"c is
 * model="b\"c" there. */
static int label_is(const char *labels, const char *end, const char *key, const char *want) {
  size_t kl = strlen(key);
  for (const char *p = labels; p && p < end; p++) {
    if ((p == labels || p[-1] == '{' || p[-1] == ',') && !strncmp(p, key, kl) && p[kl] == '=' && p[kl + 1] == '"') {
      const char *v = p + kl + 2, *w = want;
      while (v < end && *v != '"') {
        char ch = *v++;
        if (ch == '\\' && v < end) ch = *v == 'n' ? '\n' : *v, v++;
        if (*w++ != ch) return 0;
      }
      return v < end && !*w;
    }
  }
  return -1; /* no such label */
}

static void parse_metrics(const char *text, const char *model, const char *version, perf_snap_t *s) {
  memset(s, 0, sizeof *s);
  for (const char *line = text; line && *line;) {
    const char *eol = strchr(line, '\n');
    const char *end = eol ? eol : line + strlen(line);
    if (*line != '#') {
      for (int k = 0; k < M_N; k++) {
        size_t nl = strlen(metric_names[k]);
        if (strncmp(line, metric_names[k], nl) || (line[nl] != '{' && line[nl] != ' ')) continue;
        const char *lb = line + nl, *le = lb;
        if (*lb == '{') {
          le = memchr(lb, '}', (size_t)(end - lb));
          if (!le) break;
        }
        if (label_is(lb, le, "model", model) != 1) break;
        if (version && *version && label_is(lb, le, "version", version) == 0) break;
        char *q;
        double v = strtod(le + (*le == '}'), &q);
        if (q != le + (*le == '}')) s->v[k] += v, s->ok = 1;
        break;
      }
    }
    line = eol ? eol + 1 : NULL;
  }
}

/* ---- the load loop ---------------------------------------------------- */

typedef struct perf_client {
  srv_http_conn_t conn;
  int busy;
  int retried;  /* this request was resent once on a fresh connection */
  int body;     /* index of the request being sent */
  double t_start, t_sched, t_first; /* t_first: the first response byte (0 before) */
  double t_end;    /* when the response was whole or the request failed */
  double t_retry;  /* closed loop: when to send again after a failed connection (0: none pending) */
  double backoff;  /* the last wait after a failed connection, seconds (0: the last request got a response) */
} perf_client_t;

typedef struct perf_window {
  int64_t started, completed, successes, timeouts;
  double late_sum, late_max;
  double recv_sum, send_sum;
  float *lat;  /* successes' latencies, usec */
  int64_t n_lat, cap_lat;
  int n_st;
  toplu_perf_status_count_t st[TOPLU_PERF_MAX_STATUSES];
} perf_window_t;

typedef struct perf_run {
  const toplu_perf_options_t *o;
  int ep;       /* epoll instance */
  srv_http_addr_t addr;
  perf_client_t **clients;
  int n_clients;
  int max_clients;
  int n_bodies, next_body;
  pl_buf_t *reqs;  /* one whole HTTP request per body */
  pl_buf_t mreq;   /* GET /metrics */
  perf_client_t *mc; /* the /metrics scrape's connection */
  int m_busy, m_boundary;
  perf_client_t **done; /* finished since the last look (status in conn.status, 0: no response) */
  int n_done;
  perf_snap_t *snaps; /* per window boundary */
  int n_snaps;
  perf_window_t *win;
  int n_win, cap_win;
  int oom;
  char note[256];
} perf_run_t;

static void window_status(perf_window_t *w, int status) {
  for (int i = 0; i < w->n_st; i++)
    if (w->st[i].status == status) {
      w->st[i].count++;
      return;
    }
  if (w->n_st < TOPLU_PERF_MAX_STATUSES) {
    w->st[w->n_st].status = status;
    w->st[w->n_st++].count = 1;
  } else {
    w->st[TOPLU_PERF_MAX_STATUSES - 1].count++;
  }
}

static perf_client_t *client_alloc(perf_run_t *r, size_t body_max) {
  perf_client_t *c = calloc(1, sizeof *c);
  if (!c) {
    r->oom = 1;
    return NULL;
  }
  c->conn.fd = -1;
  c->conn.body_max = body_max;
  return c;
}

static perf_client_t *client_new(perf_run_t *r) {
  if (r->n_clients >= r->max_clients) return NULL;
  perf_client_t *c = client_alloc(r, 200); /* error bodies, for the note */
  if (c) r->clients[r->n_clients++] = c;
  return c;
}

/* c's request is over: queue it for the loop (status 0: no response). */
static void client_done(perf_run_t *r, perf_client_t *c, int failed) {
  if (failed) {
    c->conn.status = 0;
    if (!c->conn.errno_at_fail) c->conn.errno_at_fail = errno ? errno : EPROTO;
    srv_http_close(&c->conn);
  } else if (c->conn.close_after) {
    srv_http_close(&c->conn);
  }
  c->busy = 0;
  c->t_end = now_s();
  r->done[r->n_done++] = c;
}

/* Register c's socket with epoll when it is a new one. */
static int client_watch(perf_run_t *r, perf_client_t *c) {
  if (c->conn.fd < 0 || !c->conn.fresh) return 0;
  struct epoll_event ev = {.events = EPOLLIN | EPOLLOUT | EPOLLET | EPOLLRDHUP, .data.ptr = c};
  if (epoll_ctl(r->ep, EPOLL_CTL_ADD, c->conn.fd, &ev)) return -1;
  c->conn.fresh = 0;
  return 0;
}

/* Send request bytes req on c (a fresh connection when it has none). */
static void client_send(perf_run_t *r, perf_client_t *c, const pl_buf_t *req) {
  c->busy = 1;
  c->t_first = 0;
  c->conn.errno_at_fail = 0;
  errno = 0;
  int rc = srv_http_start(&c->conn, &r->addr, req->data, req->len);
  if (rc >= 0 && client_watch(r, c)) rc = -1;
  if (rc < 0) client_done(r, c, 1);
}

static void client_start(perf_run_t *r, perf_client_t *c, double sched) {
  double t0 = now_s();
  int b = r->next_body;
  r->next_body = (r->next_body + 1) % r->n_bodies;
  c->body = b;
  c->retried = 0;
  c->t_sched = sched;
  perf_window_t *w = &r->win[r->n_win - 1];
  w->started++;
  if (sched > 0) {
    double late = (t0 - sched) * 1e6;
    if (late < 0) late = 0;
    w->late_sum += late;
    if (late > w->late_max) w->late_max = late;
  }
  c->t_start = now_s();
  client_send(r, c, &r->reqs[b]);
  w->send_sum += (now_s() - c->t_start) * 1e6;
}

/* Socket events on c: more of the request, then what arrived. */
static void client_event(perf_run_t *r, perf_client_t *c) {
  if (!c->busy) { /* an idle keep-alive connection the server closed */
    char x;
    if (c->conn.fd >= 0 && recv(c->conn.fd, &x, 1, MSG_PEEK | MSG_DONTWAIT) == 0) srv_http_close(&c->conn);
    return;
  }
  int rc = c->conn.out_off < c->conn.out_len ? srv_http_send(&c->conn) : 1;
  if (rc >= 0) {
    int had = c->conn.got_bytes;
    rc = srv_http_recv(&c->conn);
    if (!had && c->conn.got_bytes) c->t_first = now_s();
    if (rc == 1) {
      client_done(r, c, 0);
      return;
    }
  }
  if (rc >= 0) return;
  /* A kept-alive connection the server had closed before this request:
   * once, resend on a fresh connection (as browsers and libcurl do). */
  if (c->conn.reused && !c->conn.got_bytes && !c->retried && c != r->mc) {
    c->retried = 1;
    srv_http_close(&c->conn);
    client_send(r, c, &r->reqs[c->body]);
    return;
  }
  client_done(r, c, 1);
}

static int window_open(perf_run_t *r) {
  if (r->n_win == r->cap_win) {
    int cap = r->cap_win ? 2 * r->cap_win : 16;
    perf_window_t *w = realloc(r->win, (size_t)cap * sizeof *w);
    perf_snap_t *s = realloc(r->snaps, (size_t)(cap + 1) * sizeof *s);
    if (w) r->win = w;
    if (s) r->snaps = s;
    if (!w || !s) return r->oom = 1, -1;
    r->cap_win = cap;
  }
  memset(&r->win[r->n_win++], 0, sizeof r->win[0]);
  return 0;
}

static void windows_clear(perf_run_t *r) {
  for (int i = 0; i < r->n_win; i++) free(r->win[i].lat);
  r->n_win = 0;
  r->n_snaps = 0;
}

/* Start a /metrics scrape for boundary k (skipped when one is running). */
static void scrape_start(perf_run_t *r, int k) {
  r->snaps[k].ok = 0;
  if (k + 1 > r->n_snaps) r->n_snaps = k + 1;
  if (r->m_busy || !r->mc) return;
  r->m_busy = 1;
  r->m_boundary = k;
  r->mc->t_start = now_s();
  r->mc->retried = 0;
  client_send(r, r->mc, &r->mreq);
}

static double request_limit_s(const toplu_perf_options_t *o) {
  return (double)(o->request_timeout_ms > 0 ? o->request_timeout_ms : 30000) / 1e3;
}

/* A response whole only after the request's timeout (it came while the loop
 * was busy elsewhere) is a timeout, as one still waited for would be. */
static void expire_late(perf_run_t *r, perf_client_t *c) {
  if (c->conn.status == 200 && c->t_end - c->t_start > request_limit_s(r->o)) {
    c->conn.status = 0;
    c->conn.errno_at_fail = ETIMEDOUT;
  }
}

static void record(perf_run_t *r, perf_client_t *c, int counting) {
  double t_end = c->t_end > c->t_start ? c->t_end : now_s();
  int status = c->conn.status;
  if (!counting) return;
  perf_window_t *w = &r->win[r->n_win - 1];
  w->completed++;
  window_status(w, status);
  if (status == 0 && c->conn.errno_at_fail == ETIMEDOUT) w->timeouts++;
  if (status == 200) {
    w->successes++;
    if (w->n_lat == w->cap_lat) {
      int64_t cap = w->cap_lat ? 2 * w->cap_lat : 1024;
      float *l = realloc(w->lat, (size_t)cap * sizeof *l);
      if (!l) {
        r->oom = 1;
        return;
      }
      w->lat = l;
      w->cap_lat = cap;
    }
    w->lat[w->n_lat++] = (float)((t_end - c->t_start) * 1e6);
    w->recv_sum += c->t_first > 0 && t_end > c->t_first ? (t_end - c->t_first) * 1e6 : 0;
  } else if (!r->note[0]) {
    if (status == 0) {
      int e = c->conn.errno_at_fail;
      snprintf(r->note, sizeof r->note, "no response: %s",
               e == ETIMEDOUT    ? "timed out (request_timeout_ms)"
               : e == EPROTO     ? "malformed response"
               : e == ECONNRESET ? "the server closed the connection before a whole response"
                                 : strerror(e));
    } else {
      char text[220];
      pl_buf_putc(&c->conn.body, '\0');
      error_text(c->conn.body.data ? c->conn.body.data : "", text, sizeof text);
      snprintf(r->note, sizeof r->note, "HTTP %d: %s", status, text);
    }
  }
}

static int cmp_float(const void *a, const void *b) {
  float x = *(const float *)a, y = *(const float *)b;
  return x < y ? -1 : x > y;
}

/* Percentile p (0..100) of sorted v (nearest rank, as perf_analyzer). */
static double pct(const float *v, int64_t n, int p) {
  if (n <= 0) return 0;
  int64_t i = (int64_t)ceil((double)p / 100.0 * (double)n) - 1;
  if (i < 0) i = 0;
  if (i >= n) i = n - 1;
  return v[i];
}

/* The stabilizing latency of window w (sorts its latencies). */
static double window_latency(perf_window_t *w, int percentile) {
  if (!w->n_lat) return 0;
  qsort(w->lat, (size_t)w->n_lat, sizeof *w->lat, cmp_float);
  if (percentile > 0) return pct(w->lat, w->n_lat, percentile);
  double s = 0;
  for (int64_t i = 0; i < w->n_lat; i++) s += w->lat[i];
  return s / (double)w->n_lat;
}

static int within(const double *v, int n, double pctg) {
  double mean = 0;
  for (int i = 0; i < n; i++) mean += v[i];
  mean /= n;
  if (mean == 0) return 1;
  for (int i = 0; i < n; i++)
    if (fabs(v[i] - mean) > mean * pctg / 100.0) return 0;
  return 1;
}

/* Wait for socket events until the time `until` (100 ms at most), then
 * handle the finished requests: record them, restart closed-loop clients,
 * read a finished /metrics scrape, and fail requests past their timeout. */
static void drive(perf_run_t *r, double until, int closed, int stopping) {
  double t = now_s();
  double left_ms = (until - t) * 1e3;
  int timeout = left_ms >= 1 ? (int)left_ms : 0;
  if (timeout > 100) timeout = 100;
  double limit = request_limit_s(r->o);
  for (int i = 0; i < r->n_clients; i++) { /* wake for a client's retry, or when a request's time runs out */
    const perf_client_t *c = r->clients[i];
    double wake = c->busy ? c->t_start + limit : c->t_retry > 0 && !stopping ? c->t_retry : 0;
    if (wake <= 0) continue;
    int ms = wake > t ? (int)((wake - t) * 1e3) + 1 : 0;
    if (ms < timeout) timeout = ms;
  }
  if (r->n_done) timeout = 0;
  struct epoll_event ev[64];
  int n = epoll_wait(r->ep, ev, 64, timeout);
  for (int i = 0; i < n; i++) client_event(r, ev[i].data.ptr);
  t = now_s();
  for (int i = 0; i < r->n_clients; i++) {
    perf_client_t *c = r->clients[i];
    if (c->busy && t - c->t_start > limit) {
      c->conn.errno_at_fail = ETIMEDOUT;
      client_done(r, c, 1);
    }
  }
  if (r->m_busy && t - r->mc->t_start > PERF_META_TIMEOUT_MS / 1e3) {
    r->mc->conn.errno_at_fail = ETIMEDOUT;
    client_done(r, r->mc, 1);
  }
  /* A restarted client may finish (fail) at once and land in done again:
   * take the list as it is now, then loop. */
  while (r->n_done) {
    perf_client_t *c = r->done[--r->n_done];
    if (c == r->mc) {
      r->m_busy = 0;
      perf_snap_t *s = &r->snaps[r->m_boundary];
      if (c->conn.status == 200 && !c->conn.body.oom) {
        pl_buf_putc(&c->conn.body, '\0');
        parse_metrics(c->conn.body.data, r->o->model, r->o->version, s);
      }
      continue;
    }
    /* After the windows, answers are not counted, but a request that timed out
     * started inside them and failed there. */
    expire_late(r, c);
    record(r, c, !stopping || (c->conn.status == 0 && c->conn.errno_at_fail == ETIMEDOUT));
    if (c->conn.status == 0 && c->conn.errno_at_fail != ETIMEDOUT) {
      /* no response and not a timeout: the server is unreachable or dropped the connection */
      c->backoff = c->backoff > 0 ? (c->backoff * 2 < PERF_BACKOFF_MAX_S ? c->backoff * 2 : PERF_BACKOFF_MAX_S)
                                  : PERF_BACKOFF_MIN_S;
      if (closed && !stopping) c->t_retry = now_s() + c->backoff;
      continue;
    }
    c->backoff = 0;
    if (closed && !stopping) client_start(r, c, 0);
  }
  if (closed && !stopping) {
    t = now_s();
    for (int i = 0; i < r->n_clients; i++) {
      perf_client_t *c = r->clients[i];
      if (c->t_retry > 0 && t >= c->t_retry && !c->busy) {
        c->t_retry = 0;
        client_start(r, c, 0);
      }
    }
  }
}

static int busy_count(const perf_run_t *r) {
  int n = 0;
  for (int i = 0; i < r->n_clients; i++) n += r->clients[i]->busy;
  return n;
}

/* Summarize windows [a, b) into L. */
static void summarize(perf_run_t *r, int a, int b, double interval_s, int64_t batch, int percentile,
                      toplu_perf_level_t *L) {
  int64_t n_lat = 0;
  for (int i = a; i < b; i++) n_lat += r->win[i].n_lat;
  float *all = malloc((size_t)(n_lat ? n_lat : 1) * sizeof *all);
  int64_t k = 0, started = 0;
  double lat_sum = 0, recv = 0, send = 0, late = 0;
  for (int i = a; i < b; i++) {
    perf_window_t *w = &r->win[i];
    if (all && w->n_lat) memcpy(all + k, w->lat, (size_t)w->n_lat * sizeof *all);
    k += w->n_lat;
    for (int64_t j = 0; j < w->n_lat; j++) lat_sum += w->lat[j];
    L->requests += w->completed;
    L->successes += w->successes;
    L->timeouts += w->timeouts;
    started += w->started;
    recv += w->recv_sum;
    send += w->send_sum;
    late += w->late_sum;
    if (w->late_max > L->late_max_us) L->late_max_us = w->late_max;
    for (int s = 0; s < w->n_st; s++) {
      int found = 0;
      for (int t = 0; t < L->n_statuses && !found; t++)
        if (L->statuses[t].status == w->st[s].status) L->statuses[t].count += w->st[s].count, found = 1;
      if (!found && L->n_statuses < TOPLU_PERF_MAX_STATUSES) L->statuses[L->n_statuses++] = w->st[s];
    }
  }
  /* 200 first */
  for (int t = 1; t < L->n_statuses; t++)
    if (L->statuses[t].status == 200) {
      toplu_perf_status_count_t x = L->statuses[0];
      L->statuses[0] = L->statuses[t];
      L->statuses[t] = x;
    }
  L->window_s = interval_s * (b - a);
  L->requests_per_s = L->window_s > 0 ? (double)L->successes / L->window_s : 0;
  L->infer_per_s = L->requests_per_s * (double)batch;
  L->sent_per_s = L->window_s > 0 ? (double)started / L->window_s : 0;
  if (all && n_lat) {
    qsort(all, (size_t)n_lat, sizeof *all, cmp_float);
    L->p50_us = pct(all, n_lat, 50);
    L->p90_us = pct(all, n_lat, 90);
    L->p95_us = pct(all, n_lat, 95);
    L->p99_us = pct(all, n_lat, 99);
    L->avg_us = lat_sum / (double)n_lat;
    L->stab_latency_us = percentile > 0 ? pct(all, n_lat, percentile) : L->avg_us;
    L->client_recv_us = recv / (double)L->successes;
  }
  if (started) {
    L->client_send_us = send / (double)started;
    L->late_avg_us = late / (double)started;
  }
  free(all);
  if (a < r->n_snaps && b < r->n_snaps && r->snaps[a].ok && r->snaps[b].ok) {
    const perf_snap_t *s0 = &r->snaps[a], *s1 = &r->snaps[b];
    double n = s1->v[M_SUCCESS] - s0->v[M_SUCCESS];
    L->server_metrics = 1;
    L->server_successes = (int64_t)n;
    L->server_inferences = (int64_t)(s1->v[M_COUNT] - s0->v[M_COUNT]);
    L->server_executions = (int64_t)(s1->v[M_EXEC] - s0->v[M_EXEC]);
    L->server_cache_hits = (int64_t)(s1->v[M_HITS] - s0->v[M_HITS]);
    L->server_cache_misses = (int64_t)(s1->v[M_MISSES] - s0->v[M_MISSES]);
    if (n > 0) {
      L->server_queue_us = (s1->v[M_QUEUE] - s0->v[M_QUEUE]) / n;
      L->server_compute_input_us = (s1->v[M_CIN] - s0->v[M_CIN]) / n;
      L->server_compute_infer_us = (s1->v[M_CINFER] - s0->v[M_CINFER]) / n;
      L->server_compute_output_us = (s1->v[M_COUT] - s0->v[M_COUT]) / n;
    }
  }
}

/* One level: windows until stable; returns 1 when cancelled. */
static int run_level(perf_run_t *r, double value, toplu_perf_level_t *L, int64_t batch) {
  const toplu_perf_options_t *o = r->o;
  int closed = o->mode == TOPLU_PERF_CONCURRENCY;
  double interval = (double)(o->measurement_interval_ms > 0 ? o->measurement_interval_ms : 5000) / 1e3;
  double stab = o->stability_percentage > 0 ? o->stability_percentage : 10;
  int max_trials = o->max_trials > 0 ? o->max_trials : 10;
  uint64_t rng = (o->seed ? o->seed : 1) ^ (uint64_t)(value * 1000.0);
  windows_clear(r);
  memset(L, 0, sizeof *L);
  L->value = value;
  if (window_open(r)) return 0;
  int cancelled = 0;
  double t0 = now_s(), boundary = t0 + interval, next_send = t0;
  scrape_start(r, 0);
  if (closed) {
    int n = (int)value;
    for (int i = 0; i < n; i++) {
      perf_client_t *c = i < r->n_clients ? r->clients[i] : client_new(r);
      if (!c) break;
      client_start(r, c, 0);
    }
  }
  int stopping = 0, want_snap = -1;
  double stop_deadline = 0;
  for (;;) {
    double t = now_s();
    if (!closed && !stopping) {
      while (t >= next_send) {
        perf_client_t *c = NULL;
        for (int i = 0; i < r->n_clients && !c; i++)
          if (!r->clients[i]->busy) c = r->clients[i];
        if (!c) c = client_new(r);
        if (!c) break; /* every connection busy: this start waits */
        client_start(r, c, next_send);
        double gap = 1.0 / value;
        if (o->distribution == TOPLU_PERF_POISSON) {
          double u = ((double)(srv_perf_rand(&rng) >> 11) + 0.5) / 9007199254740992.0;
          gap = -log(u) / value;
        }
        next_send += gap;
      }
    }
    if (!stopping && t >= boundary) {
      int k = r->n_win; /* boundary k closes window k-1 */
      perf_window_t *w = &r->win[k - 1];
      L->trials = k;
      double ips = (double)w->successes / interval;
      perf_log(o, TOPLU_LOG_PROGRESS, "%s %g: window %d: %.1f infer/s, %lld requests, %lld errors",
               closed ? "concurrency" : "request rate", value, k, ips * (double)batch, (long long)w->completed,
               (long long)(w->completed - w->successes));
      int done = k >= max_trials;
      if (k >= 3) {
        double v[3], l[3];
        for (int i = 0; i < 3; i++) {
          v[i] = (double)r->win[k - 3 + i].successes;
          l[i] = window_latency(&r->win[k - 3 + i], o->percentile);
        }
        L->stable = within(v, 3, stab) && within(l, 3, stab);
        done = done || L->stable;
      }
      if (o->cancel && *o->cancel) done = 1, cancelled = 1;
      scrape_start(r, k);
      if (done || r->oom) {
        stopping = 1;
        want_snap = k;
        stop_deadline = now_s() + request_limit_s(o);
      } else {
        window_open(r);
        boundary += interval;
      }
    }
    if (stopping && !r->m_busy && (!busy_count(r) || now_s() > stop_deadline)) break;
    double until = stopping ? now_s() + 0.05 : boundary;
    if (!closed && !stopping && next_send < until) until = next_send;
    drive(r, until, closed, stopping);
  }
  /* abandon transfers past the drain deadline: in flight since before it
   * began (request_timeout_ms ago), they timed out */
  for (int i = 0; i < r->n_clients; i++)
    if (r->clients[i]->busy) {
      r->clients[i]->conn.status = 0;
      r->clients[i]->conn.errno_at_fail = ETIMEDOUT;
      record(r, r->clients[i], 1);
      srv_http_close(&r->clients[i]->conn);
      r->clients[i]->busy = 0;
    }
  r->n_done = 0;
  for (int i = 0; i < r->n_clients; i++) r->clients[i]->t_retry = 0; /* the next level starts them afresh */
  int k = r->n_win;
  int a = k >= 3 ? k - 3 : 0;
  (void)want_snap;
  summarize(r, a, k, interval, batch, o->percentile, L);
  return cancelled;
}

/* ---- the sweep -------------------------------------------------------- */

static toplu_status_t check_options(const toplu_perf_options_t *o, toplu_error_t *err) {
  if (!o->model || !*o->model) return toplu__errorf(err, TOPLU_ERR_INVALID_ARGUMENT, "model: no model name given");
  if (o->n_headers < 0 || o->n_headers > 64 || (o->n_headers && !o->headers))
    return toplu__errorf(err, TOPLU_ERR_INVALID_ARGUMENT, "headers: %d of them (0..64)", o->n_headers);
  for (int k = 0; k < o->n_headers; k++) {
    const char *h = o->headers[k], *colon = h ? strchr(h, ':') : NULL;
    if (!h || !colon || colon == h || strlen(h) >= 1024 || strpbrk(h, "\r\n"))
      return toplu__errorf(err, TOPLU_ERR_INVALID_ARGUMENT,
                           "headers[%d] '%.100s': expected \"Name: value\" on one line, under 1 KiB", k, h ? h : "");
  }
  if (o->batch_size < 0 || o->batch_size > INT32_MAX)
    return toplu__errorf(err, TOPLU_ERR_INVALID_ARGUMENT, "batch_size %lld: must be 1..2^31-1",
                         (long long)o->batch_size);
  if (o->mode != TOPLU_PERF_CONCURRENCY && o->mode != TOPLU_PERF_REQUEST_RATE)
    return toplu__errorf(err, TOPLU_ERR_INVALID_ARGUMENT, "mode: unknown mode %d", (int)o->mode);
  double hi = o->mode == TOPLU_PERF_CONCURRENCY ? TOPLU_PERF_MAX_CLIENTS : 1e6;
  const char *f = o->mode == TOPLU_PERF_CONCURRENCY ? "concurrency" : "request rate";
  double vals[3] = {o->range_start, o->range_end, o->range_step};
  for (int i = 0; i < 3; i++)
    if (!(vals[i] >= 0 && vals[i] <= hi) || (o->mode == TOPLU_PERF_CONCURRENCY && vals[i] != floor(vals[i])))
      return toplu__errorf(err, TOPLU_ERR_INVALID_ARGUMENT, "%s range: %g is not %s 0..%g", f, vals[i],
                           o->mode == TOPLU_PERF_CONCURRENCY ? "a whole number in" : "a number in", hi);
  double start = o->range_start > 0 ? o->range_start : 1;
  if (o->range_end > 0 && o->range_end < start)
    return toplu__errorf(err, TOPLU_ERR_INVALID_ARGUMENT, "%s range: end %g is below start %g", f, o->range_end, start);
  if (o->measurement_interval_ms < 0 || o->measurement_interval_ms > 3600000)
    return toplu__errorf(err, TOPLU_ERR_INVALID_ARGUMENT, "measurement_interval_ms %lld: must be 1..3600000",
                         (long long)o->measurement_interval_ms);
  if (!(o->stability_percentage >= 0 && o->stability_percentage <= 1000))
    return toplu__errorf(err, TOPLU_ERR_INVALID_ARGUMENT, "stability_percentage %g: must be in 0..1000",
                         o->stability_percentage);
  if (o->max_trials < 0 || o->max_trials > 100000)
    return toplu__errorf(err, TOPLU_ERR_INVALID_ARGUMENT, "max_trials %d: must be 1..100000", o->max_trials);
  if (o->request_timeout_ms < 0 || o->request_timeout_ms > 86400000) /* the loop's waits are int milliseconds */
    return toplu__errorf(err, TOPLU_ERR_INVALID_ARGUMENT, "request_timeout_ms %lld: must be 0..86400000 (a day)",
                         (long long)o->request_timeout_ms);
  if (o->max_connections < 0 || o->max_connections > TOPLU_PERF_MAX_CLIENTS)
    return toplu__errorf(err, TOPLU_ERR_INVALID_ARGUMENT, "max_connections %lld: must be 1..%d",
                         (long long)o->max_connections, TOPLU_PERF_MAX_CLIENTS);
  if (o->percentile < 0 || o->percentile > 99)
    return toplu__errorf(err, TOPLU_ERR_INVALID_ARGUMENT, "percentile %d: must be 1..99", o->percentile);
  if (o->n_shapes < 0 || (o->n_shapes && !o->shapes))
    return toplu__errorf(err, TOPLU_ERR_INVALID_ARGUMENT, "shapes: %d entries and no array", o->n_shapes);
  if (o->distribution != TOPLU_PERF_CONSTANT && o->distribution != TOPLU_PERF_POISSON)
    return toplu__errorf(err, TOPLU_ERR_INVALID_ARGUMENT, "distribution: unknown value %d", (int)o->distribution);
  return TOPLU_OK;
}

/* The server's base URL ("http://HOST:PORT") from url. */
static toplu_status_t base_url(const char *url, char *out, size_t size, toplu_error_t *err) {
  if (!url || !*url) url = "localhost:8000";
  if (!strncmp(url, "https://", 8))
    return toplu__errorf(err, TOPLU_ERR_UNSUPPORTED, "url %s: only http is supported", url);
  if (!strncmp(url, "http://", 7)) url += 7;
  size_t n = strlen(url);
  while (n && url[n - 1] == '/') n--;
  if (!n || n > 512 || memchr(url, '/', n) || memchr(url, ' ', n))
    return toplu__errorf(err, TOPLU_ERR_INVALID_ARGUMENT, "url '%s': not HOST:PORT", url);
  snprintf(out, size, "http://%.*s", (int)n, url);
  return TOPLU_OK;
}

/* Split "HOST:PORT" (HOST may be "[v6]"; no port: 80). */
static void host_port(const char *hp, char *host, size_t hsize, char *port, size_t psize) {
  const char *colon = NULL;
  if (hp[0] == '[') {
    const char *close = strchr(hp, ']');
    colon = close && close[1] == ':' ? close + 1 : NULL;
    size_t n = close ? (size_t)(close - hp - 1) : strlen(hp + 1);
    snprintf(host, hsize, "%.*s", (int)n, hp + 1);
  } else {
    colon = strrchr(hp, ':');
    size_t n = colon ? (size_t)(colon - hp) : strlen(hp);
    snprintf(host, hsize, "%.*s", (int)n, hp);
  }
  snprintf(port, psize, "%s", colon && colon[1] ? colon + 1 : "80");
}

static toplu_status_t sweep(perf_run_t *r, int64_t batch, toplu_perf_result_t *out, toplu_error_t *err) {
  const toplu_perf_options_t *o = r->o;
  double start = o->range_start > 0 ? o->range_start : 1;
  double end = o->range_end >= start ? o->range_end : start;
  double step = o->range_step > 0 ? o->range_step : 1;
  int64_t n_levels = (int64_t)floor((end - start) / step + 1e-9) + 1;
  if (n_levels > 10000) return toplu__errorf(err, TOPLU_ERR_INVALID_ARGUMENT, "range: over 10000 levels");
  out->levels = calloc((size_t)n_levels, sizeof *out->levels);
  if (!out->levels) return toplu__errorf(err, TOPLU_ERR_OUT_OF_MEMORY, "out of memory");
  for (int64_t i = 0; i < n_levels; i++) {
    double v = start + (double)i * step;
    toplu_perf_level_t *L = &out->levels[out->n_levels++];
    int cancelled = run_level(r, v, L, batch);
    if (r->oom) return toplu__errorf(err, TOPLU_ERR_OUT_OF_MEMORY, "out of memory while measuring");
    perf_log(o, TOPLU_LOG_NOTE, "%s %g: %.1f infer/s, avg %.0f usec, p99 %.0f usec, %lld errors%s",
             o->mode == TOPLU_PERF_CONCURRENCY ? "concurrency" : "request rate", v, L->infer_per_s, L->avg_us,
             L->p99_us, (long long)(L->requests - L->successes), L->stable ? "" : " (unstable)");
    if (cancelled) return toplu__errorf(err, TOPLU_ERR_CANCELLED, "cancelled");
    if (!L->successes) {
      out->failed_level = (int)i;
      break;
    }
    if (o->latency_threshold_ms > 0 && L->stab_latency_us > o->latency_threshold_ms * 1e3) {
      out->threshold_stop = 1;
      break;
    }
  }
  return TOPLU_OK;
}

toplu_status_t toplu_perf_run(const toplu_perf_options_t *o, toplu_perf_result_t *out, toplu_error_t *err) {
  toplu_error_clear(err);
  if (!out) return toplu__errorf(err, TOPLU_ERR_INVALID_ARGUMENT, "out: NULL");
  memset(out, 0, sizeof *out);
  out->failed_level = -1;
  if (!o) return toplu__errorf(err, TOPLU_ERR_INVALID_ARGUMENT, "options: NULL");
  toplu_status_t st = check_options(o, err);
  if (st) return st;
  int64_t batch = o->batch_size > 0 ? o->batch_size : 1;
  out->mode = o->mode;
  out->batch_size = batch;
  out->percentile = o->percentile;
  if (curl_global_init(CURL_GLOBAL_DEFAULT))
    return toplu__errorf(err, TOPLU_ERR_INTERNAL, "libcurl: global init failed");
  char base[600];
  if ((st = base_url(o->url, base, sizeof base, err))) return st;
  char *ename = curl_easy_escape(NULL, o->model, 0);
  char *ever = o->version && *o->version ? curl_easy_escape(NULL, o->version, 0) : NULL;
  char mpath[1024];
  snprintf(mpath, sizeof mpath, "/v2/models/%s%s%s", ename ? ename : "", ever ? "/versions/" : "", ever ? ever : "");
  curl_free(ename);
  curl_free(ever);
  long timeout = PERF_META_TIMEOUT_MS; /* not request_timeout_ms: that one times the inferences */

  perf_model_t model = {0};
  pl_buf_t body = {0};
  long status = 0;
  struct curl_slist *hdrs = NULL;
  for (int k = 0; k < o->n_headers; k++) {
    struct curl_slist *nh = curl_slist_append(hdrs, o->headers[k]);
    if (!nh) {
      curl_slist_free_all(hdrs);
      return toplu__errorf(err, TOPLU_ERR_OUT_OF_MEMORY, "out of memory for the headers");
    }
    hdrs = nh;
  }
  st = http_get(base, mpath, hdrs, timeout, &body, &status, err);
  if (!st && status != 200) {
    char text[220];
    error_text(body.data ? body.data : "", text, sizeof text);
    st = toplu__errorf(err, status == 404 ? TOPLU_ERR_NOT_FOUND : TOPLU_ERR_IO,
                       "GET %s%s: HTTP %ld: %s", base, mpath, status, text);
  }
  if (!st) st = parse_metadata(body.data, mpath, &model, out->model_version, sizeof out->model_version, err);
  pl_buf_free(&body);
  model.max_batch_size = -1;
  if (!st) {
    char cpath[1100];
    snprintf(cpath, sizeof cpath, "%s/config", mpath);
    pl_buf_t cb = {0};
    if (!http_get(base, cpath, hdrs, timeout, &cb, &status, NULL) && status == 200) {
      json_t *j = json_loads(cb.data, 0, NULL);
      const json_t *mb = json_object_get(j, "max_batch_size");
      if (json_is_integer(mb) && json_integer_value(mb) >= 0) model.max_batch_size = (int64_t)json_integer_value(mb);
      json_decref(j);
    }
    pl_buf_free(&cb);
  }
  curl_slist_free_all(hdrs); /* the inference requests and /metrics carry them in their own text */
  if (!st) st = resolve_shapes(&model, o, batch, err);
  /* A .npy file with the batch dim and no batch_size given: its first dim
   * is the batch (perf_analyzer would need -b). */
  if (!st && o->batch_size <= 0 && model.batching && model.n == 1 && o->input_data) {
    toplu_tensor_t h = {0};
    if (srv_perf_is_npy(o->input_data) &&
        toplu_npy_read_header(o->input_data, &h, NULL, NULL) == TOPLU_OK && h.ndim == model.inputs[0].ndim &&
        h.dims[0] > 1) {
      batch = h.dims[0];
      out->batch_size = batch;
      st = resolve_shapes(&model, o, batch, err);
      if (!st)
        perf_log(o, TOPLU_LOG_NOTE, "batch size %lld: the first dim of %s (no batch_size given)", (long long)batch,
                 o->input_data);
    }
    toplu_tensor_free(&h);
  }
  srv_perf_body_t *bodies = NULL;
  int n_bodies = 0;
  if (!st)
    st = srv_perf_build_bodies(model.inputs, model.n, model.batching, batch, o->input_data, o->json_input,
                               o->json_output, o->seed, &bodies, &n_bodies, err);
  if (!st)
    perf_log(o, TOPLU_LOG_NOTE, "model %s%s%s: %d input%s, %s, request body %zu bytes", o->model,
             out->model_version[0] ? " version " : "", out->model_version, model.n, model.n == 1 ? "" : "s",
             model.batching ? "batching" : "no batching", n_bodies ? bodies[0].body.len : (size_t)0);
  model_free(&model);
  if (st) return st;

  perf_run_t r = {0};
  r.o = o;
  r.ep = -1;
  r.n_bodies = n_bodies;
  r.max_clients = o->mode == TOPLU_PERF_CONCURRENCY ? TOPLU_PERF_MAX_CLIENTS /* (check_options bounds the rest) */
                  : o->max_connections > 0                 ? (int)o->max_connections
                                                           : TOPLU_PERF_OPEN_CONNECTIONS;
  char host[600], port[16];
  host_port(base + 7, host, sizeof host, port, sizeof port);
  if (!st) st = srv_http_resolve(host, port, &r.addr, err);
  r.clients = calloc(TOPLU_PERF_MAX_CLIENTS, sizeof *r.clients);
  r.done = calloc(TOPLU_PERF_MAX_CLIENTS + 1, sizeof *r.done);
  r.reqs = calloc((size_t)n_bodies, sizeof *r.reqs);
  r.ep = epoll_create1(EPOLL_CLOEXEC);
  r.mc = client_alloc(&r, (size_t)64 << 20);
  if (!st && (!r.clients || !r.done || !r.reqs || !r.mc))
    st = toplu__errorf(err, TOPLU_ERR_OUT_OF_MEMORY, "out of memory for the clients");
  if (!st && r.ep < 0) st = toplu__errorf(err, TOPLU_ERR_IO, "epoll_create1: %s", strerror(errno));
  /* Each request whole in one buffer, so that it leaves in one send. */
  for (int b = 0; !st && b < n_bodies; b++) {
    pl_buf_t *q = &r.reqs[b];
    int binary = bodies[b].json_len < bodies[b].body.len;
    pl_buf_printf(q, "POST %s/infer HTTP/1.1\r\nHost: %s\r\nContent-Type: %s\r\n", mpath, base + 7,
                  binary ? "application/octet-stream" : "application/json");
    if (binary) pl_buf_printf(q, "Inference-Header-Content-Length: %zu\r\n", bodies[b].json_len);
    for (int k = 0; k < o->n_headers; k++) pl_buf_printf(q, "%s\r\n", o->headers[k]);
    pl_buf_printf(q, "Content-Length: %zu\r\n\r\n", bodies[b].body.len);
    pl_buf_append(q, bodies[b].body.data, bodies[b].body.len);
    if (q->oom) st = toplu__errorf(err, TOPLU_ERR_OUT_OF_MEMORY, "out of memory for the requests");
  }
  srv_perf_bodies_free(bodies, n_bodies);
  if (!st) {
    pl_buf_printf(&r.mreq, "GET /metrics HTTP/1.1\r\nHost: %s\r\n", base + 7);
    for (int k = 0; k < o->n_headers; k++) pl_buf_printf(&r.mreq, "%s\r\n", o->headers[k]);
    pl_buf_puts(&r.mreq, "\r\n");
    if (r.mreq.oom) st = toplu__errorf(err, TOPLU_ERR_OUT_OF_MEMORY, "out of memory for the requests");
  }
  if (!st) st = sweep(&r, batch, out, err);
  snprintf(out->note, sizeof out->note, "%s", r.note);
  for (int i = 0; r.clients && i < r.n_clients; i++) {
    srv_http_free(&r.clients[i]->conn);
    free(r.clients[i]);
  }
  free(r.clients);
  free(r.done);
  if (r.mc) srv_http_free(&r.mc->conn);
  free(r.mc);
  for (int b = 0; r.reqs && b < n_bodies; b++) pl_buf_free(&r.reqs[b]);
  free(r.reqs);
  pl_buf_free(&r.mreq);
  if (r.ep >= 0) close(r.ep);
  windows_clear(&r);
  free(r.win);
  free(r.snaps);
  return st;
}

void toplu_perf_result_free(toplu_perf_result_t *r) {
  if (!r) return;
  free(r->levels);
  memset(r, 0, sizeof *r);
  r->failed_level = -1;
}

/* ---- CSV -------------------------------------------------------------- */

static int cmp_ips(const void *a, const void *b) {
  const toplu_perf_level_t *x = *(const toplu_perf_level_t *const *)a, *y = *(const toplu_perf_level_t *const *)b;
  return x->infer_per_s < y->infer_per_s ? -1 : x->infer_per_s > y->infer_per_s;
}

static long long us(double v) { return v > 0 ? (long long)llround(v) : 0; }

toplu_status_t toplu_perf_write_csv(const toplu_perf_result_t *r, const char *path, int verbose, toplu_error_t *err) {
  toplu_error_clear(err);
  if (!r || !path) return toplu__errorf(err, TOPLU_ERR_INVALID_ARGUMENT, "result or path: NULL");
  const toplu_perf_level_t **order = calloc((size_t)r->n_levels + 1, sizeof *order);
  if (!order) return toplu__errorf(err, TOPLU_ERR_OUT_OF_MEMORY, "out of memory");
  for (int i = 0; i < r->n_levels; i++) order[i] = &r->levels[i];
  qsort(order, (size_t)r->n_levels, sizeof *order, cmp_ips);
  pl_buf_t b = {0};
  pl_buf_puts(&b, r->mode == TOPLU_PERF_CONCURRENCY ? "Concurrency," : "Request Rate,");
  pl_buf_puts(&b, "Inferences/Second,Client Send,Network+Server Send/Recv,Server Queue,Server Compute Input,"
                  "Server Compute Infer,Server Compute Output,Client Recv,p50 latency,p90 latency,p95 latency,"
                  "p99 latency");
  if (verbose) pl_buf_puts(&b, ",Avg latency,request/response,response wait");
  /* toplu's own last column, after perf_analyzer's: the level's failed requests */
  pl_buf_puts(&b, ",Errors");
  pl_buf_putc(&b, '\n');
  for (int i = 0; i < r->n_levels; i++) {
    const toplu_perf_level_t *L = order[i];
    double server = L->server_queue_us + L->server_compute_input_us + L->server_compute_infer_us +
                    L->server_compute_output_us;
    double wait = L->avg_us - L->client_send_us - L->client_recv_us;
    pl_buf_double(&b, L->value);
    pl_buf_putc(&b, ',');
    pl_buf_printf(&b, "%.1f,%lld,%lld,%lld,%lld,%lld,%lld,%lld,%lld,%lld,%lld,%lld", L->infer_per_s,
                  us(L->client_send_us), us(wait - server), us(L->server_queue_us), us(L->server_compute_input_us),
                  us(L->server_compute_infer_us), us(L->server_compute_output_us), us(L->client_recv_us),
                  us(L->p50_us), us(L->p90_us), us(L->p95_us), us(L->p99_us));
    if (verbose)
      pl_buf_printf(&b, ",%lld,%lld,%lld", us(L->avg_us), us(L->client_send_us + L->client_recv_us), us(wait));
    pl_buf_printf(&b, ",%lld", (long long)(L->requests - L->successes));
    pl_buf_putc(&b, '\n');
  }
  free(order);
  if (b.oom) {
    pl_buf_free(&b);
    return toplu__errorf(err, TOPLU_ERR_OUT_OF_MEMORY, "out of memory for the CSV");
  }
  FILE *f = fopen(path, "wb");
  toplu_status_t st = TOPLU_OK;
  if (!f)
    st = toplu__errorf(err, TOPLU_ERR_IO, "%s: %s", path, strerror(errno));
  else {
    int bad = fwrite(b.data, 1, b.len, f) != b.len;
    if (fclose(f) || bad) st = toplu__errorf(err, TOPLU_ERR_IO, "%s: write failed: %s", path, strerror(errno));
  }
  pl_buf_free(&b);
  return st;
}
