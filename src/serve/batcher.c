/*
 * serve/batcher.c - the dynamic batcher of one model version.
 *
 * Requests wait in one FIFO per priority level.  A scheduler thread forms
 * batches whenever an instance is idle: it walks the queues in priority
 * order, oldest first, grouping requests by shape key (equal non-batch
 * dims and dtypes of every input; several groups may wait at once), and
 * sends the first group that is ready:
 *   - its rows reach max_batch_size, or a preferred_batch_size (then it
 *     takes the largest preferred size it has);
 *   - its oldest request has waited max_queue_delay_microseconds, timed
 *     from that request's arrival;
 *   - the model is draining (shutdown, unload): no more waiting.
 *   - no client is likely to send another request: no connection that
 *     sends inference requests went idle (got its answer) within the last
 *     max_queue_delay_microseconds, so every client that sends is waiting
 *     for an answer and waiting longer only adds latency (a connection idle
 *     for longer is a pooled one); one client alone gets the engine's
 *     latency, not the delay's (srv_last_idle_ns).
 * Without dynamic_batching (or with max_batch_size 0) each request runs
 * alone.  Requests that arrive while every instance is busy wait and go in
 * the next batch.  The scheduler also enforces queue timeouts while the
 * instances run (a REJECT timeout answers 503 when it passes, not after the
 * running batch; a DELAY timeout moves the request behind every request of
 * its level whose timeout has not passed, as Triton's PolicyQueue keeps a
 * delayed queue after its queue), and drops requests whose client went away
 * before their batch formed.
 *
 * Each instance is a thread running one batch at a time: the requests'
 * rows are stacked into one input per model input (no copy for a batch of
 * one request), padded with zero rows up to the next plan size
 * (srv_model_plan_rows: powers of two, the preferred sizes, the max, so a
 * session holds a few plans rather than one per batch size), run with one
 * engine call, and each request's rows of the
 * outputs are encoded into its own response.  A batch that fails is rerun
 * request by request, so one request the engine refuses does not fail its
 * batch-mates.
 * A request that arrives when nothing else is in flight, with an instance
 * idle, a one-thread plan for its shape and a model whose last request
 * alone ran within SRV_INLINE_MAX_NS, runs on the HTTP thread that
 * parsed it (srv_batcher_run_inline): the batcher would have sent it alone
 * at once anyway, and at concurrency 1 the two thread hand-offs cost more
 * than the engine's latency target allows.
 * Triton's dynamic batcher ("Batchers" in the Triton docs) is the model.
 */
#include <errno.h>
#include <poll.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>

#include "core/checked.h"
#include "core/hash.h"
#include "serve/server.h"

/* srv_instance.busy: a batch is assigned to the instance's thread, or the
 * instance is lent to a thread running one request itself
 * (srv_batcher_run_inline). */
enum { INST_ASSIGNED = 1, INST_INLINE = 2 };

typedef struct srv_instance {
  srv_batcher_t *b;
  pthread_t thread;
  int started;
  pthread_cond_t cv;
  srv_req_t **batch;           /* the requests of the batch it runs */
  int n;
  int busy;                    /* 0, INST_ASSIGNED (its thread runs the batch) or INST_INLINE */
  int cancel;                  /* run cancel flag (toplu_run_cancel) */
  void **stage;                /* per model input: stacked rows */
  size_t *stage_cap;
} srv_instance_t;

struct srv_batcher {
  srv_model_t *m;
  pthread_mutex_t mu;
  pthread_cond_t cv;           /* the scheduler: arrival, an instance idle, drain */
  pthread_cond_t idle_cv;      /* wait_idle */
  int n_levels;
  srv_req_t *head[SRV_MAX_PRIORITY_LEVELS + 1], *tail[SRV_MAX_PRIORITY_LEVELS + 1];
  srv_req_t *delayed[SRV_MAX_PRIORITY_LEVELS + 1]; /* the first delayed request of each level (all are at its tail) */
  int64_t queued_level[SRV_MAX_PRIORITY_LEVELS + 1];
  int64_t queued, running;
  int draining, cancel, stop;
  int n_inst;
  srv_instance_t *inst;
  pthread_t sched;
  int sched_started;
  int max_reqs;                /* most requests one batch holds */
  _Atomic int64_t single_ns;   /* engine time of the last batch of one request (0: none yet) */
};

/* The longest engine run a request alone may take on the HTTP thread that
 * parsed it (srv_batcher_run_inline): the server's other connections on
 * that thread, health probes included, wait while it runs.  Above it the
 * two thread hand-offs (40-130 us) are under 3% of the run. */
#define SRV_INLINE_MAX_NS 5000000

static int64_t now_ns(void) { return toplu_monotonic_ns(); }

static void abs_timespec(int64_t mono_ns, struct timespec *ts) {
  ts->tv_sec = (time_t)(mono_ns / 1000000000);
  ts->tv_nsec = (long)(mono_ns % 1000000000);
}

void srv_cond_wait_until(pthread_cond_t *cv, pthread_mutex_t *mu, int64_t wake_ns) {
  if (wake_ns <= 0) {
    pthread_cond_wait(cv, mu);
    return;
  }
  struct timespec ts;
  abs_timespec(wake_ns, &ts);
  pthread_cond_timedwait(cv, mu, &ts);
}

void srv_cond_init_monotonic(pthread_cond_t *cv) {
  pthread_condattr_t a;
  pthread_condattr_init(&a);
  pthread_condattr_setclock(&a, CLOCK_MONOTONIC);
  pthread_cond_init(cv, &a);
  pthread_condattr_destroy(&a);
}

/* 1 when the client of r closed its side (reads end-of-file). */
static int client_gone(const srv_req_t *r) {
  if (r->fd < 0) return 0;
  struct pollfd p = {.fd = r->fd, .events = POLLIN};
  if (poll(&p, 1, 0) <= 0) return 0;
  if (p.revents & (POLLERR | POLLNVAL)) return 1;
  char c;
  ssize_t k = recv(r->fd, &c, 1, MSG_PEEK | MSG_DONTWAIT);
  return k == 0 || (k < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR);
}

static const srv_queue_policy_t *level_policy(const srv_model_t *m, int level) {
  if (level >= 1 && level <= SRV_MAX_PRIORITY_LEVELS && m->cfg.priority_policy_set[level])
    return &m->cfg.priority_queue_policy[level];
  return &m->cfg.default_queue_policy;
}

/* r at the tail of its level's queue (not queued before). */
static void append_req(srv_batcher_t *b, int q, srv_req_t *r) {
  r->next = NULL;
  r->prev = b->tail[q];
  if (b->tail[q]) b->tail[q]->next = r;
  else b->head[q] = r;
  b->tail[q] = r;
  b->queued++;
  b->queued_level[q]++;
}

static void unlink_req(srv_batcher_t *b, srv_req_t *r) {
  int q = r->level > 0 ? r->level - 1 : 0;
  if (b->delayed[q] == r) b->delayed[q] = r->next; /* the delayed ones are the tail: the next is delayed too */
  if (r->prev) r->prev->next = r->next;
  else b->head[q] = r->next;
  if (r->next) r->next->prev = r->prev;
  else b->tail[q] = r->prev;
  r->next = r->prev = NULL;
  b->queued--;
  b->queued_level[q]--;
}

/* The shape key: every input's dtype and dims past the batch dim. */
static uint64_t shape_key(const srv_req_t *r, int batching) {
  uint64_t h = TOPLU__FNV1A64_INIT;
  for (int i = 0; i < r->infer.n_inputs; i++) {
    const srv_input_t *in = &r->infer.inputs[i];
    int32_t dt = (int32_t)in->dtype, nd = in->ndim;
    h = toplu__fnv1a64(h, &dt, sizeof dt);
    h = toplu__fnv1a64(h, &nd, sizeof nd);
    for (int d = batching ? 1 : 0; d < in->ndim; d++) h = toplu__fnv1a64(h, &in->dims[d], sizeof in->dims[d]);
  }
  return h;
}

/* Two requests may share a batch (the hash matched; compare the dims). */
static int same_shape(const srv_req_t *a, const srv_req_t *b, int batching) {
  if (a->shape_key != b->shape_key || a->infer.n_inputs != b->infer.n_inputs) return 0;
  for (int i = 0; i < a->infer.n_inputs; i++) {
    const srv_input_t *x = &a->infer.inputs[i], *y = &b->infer.inputs[i];
    if (x->dtype != y->dtype || x->ndim != y->ndim) return 0;
    for (int d = batching ? 1 : 0; d < x->ndim; d++)
      if (x->dims[d] != y->dims[d]) return 0;
  }
  return 1;
}

/* A list of requests to answer once the lock is released. */
typedef struct req_list {
  srv_req_t *first;
} req_list_t;
static int dispatch(srv_batcher_t *b, int64_t now, int64_t *wake, req_list_t *gone);
static void answer_lists(req_list_t *timed_out, req_list_t *cancelled, req_list_t *gone);

/* r's priority level, shape key and deadlines; -1 when its priority is
 * outside the model's levels. */
static int admit(srv_model_t *m, srv_req_t *r) {
  int batching = m->max_batch_size > 0;
  int levels = m->cfg.priority_levels;
  int level = 0;
  if (levels > 0) {
    /* Triton's InferenceRequest::SetPriority: 0, or one above the levels, is the default level (it was 400; a
     * fresh user's finding of 2026-12-06) */
    level = r->infer.priority > 0 && r->infer.priority <= levels ? (int)r->infer.priority : m->cfg.default_priority_level;
    if (level <= 0) return -1;
  }
  r->level = level;
  r->queued_ns = now_ns();
  r->shape_key = shape_key(r, batching);
  const srv_queue_policy_t *pol = level_policy(m, level);
  int64_t timeout_us = pol->default_timeout_us;
  /* Triton (ModelQueuePolicy.allow_timeout_override, PolicyQueue::Enqueue): a
   * request may set a timeout below the default, not above it; with no
   * default timeout (0) there is nothing to go below, and the request's is
   * not used (it was: a fresh user's finding of 2026-12-06). */
  if (pol->allow_timeout_override && r->infer.timeout_us > 0 && r->infer.timeout_us < timeout_us)
    timeout_us = r->infer.timeout_us;
  /* A queue timeout, as in Triton: it ends the wait (REJECT; with DELAY the
   * request stays queued), never a run that has started. */
  r->queue_deadline_ns = timeout_us > 0 ? r->arrival_ns + timeout_us * 1000 : 0;
  return 0;
}

int srv_batcher_submit(srv_batcher_t *b, srv_req_t *r) {
  srv_model_t *m = b->m;
  if (admit(m, r)) {
    srv_req_fail(r, 400, SRV_FAIL_BAD_REQUEST, "parameters.priority: %lld is outside the model's levels 1..%d",
                 (long long)r->infer.priority, m->cfg.priority_levels);
    return 400;
  }
  int level = r->level;
  const srv_queue_policy_t *pol = level_policy(m, level);
  int q = level > 0 ? level - 1 : 0;
  pthread_mutex_lock(&b->mu);
  if (b->draining || b->stop) {
    pthread_mutex_unlock(&b->mu);
    if (!atomic_load(&m->server->stopping)) return SRV_SUBMIT_RETIRED; /* the caller looks the model up again */
    srv_req_fail(r, 503, SRV_FAIL_REJECTED, "model '%s' version %s: the server is shutting down", m->name, m->version);
    return 503;
  }
  if (pol->max_queue_size > 0 && b->queued_level[q] >= pol->max_queue_size) {
    int64_t n = b->queued_level[q];
    pthread_mutex_unlock(&b->mu);
    srv_req_fail(r, 503, SRV_FAIL_REJECTED, "model '%s': the queue is full (%lld requests waiting, max_queue_size %lld)",
                 m->name, (long long)n, (long long)pol->max_queue_size);
    return 503;
  }
  r->delayed = 0;
  if (b->delayed[q]) { /* before the delayed requests of its level */
    srv_req_t *d = b->delayed[q];
    r->next = d;
    r->prev = d->prev;
    if (d->prev) d->prev->next = r;
    else b->head[q] = r;
    d->prev = r;
    b->queued++;
    b->queued_level[q]++;
  } else {
    append_req(b, q, r);
  }
  srv_metrics_pending(m->metrics, 1);
  /* An idle instance takes a batch that is ready now straight from here: one
   * thread hand-off (to the instance) instead of two (scheduler, instance). */
  req_list_t none = {0}, gone = {0};
  int64_t wake = 0;
  int formed = dispatch(b, now_ns(), &wake, &gone);
  if (!formed || b->queued > 0) pthread_cond_signal(&b->cv);
  pthread_mutex_unlock(&b->mu);
  if (gone.first) answer_lists(&none, &none, &gone);
  return 0;
}

int64_t srv_batcher_pending(srv_batcher_t *b) {
  pthread_mutex_lock(&b->mu);
  int64_t n = b->queued + b->running;
  pthread_mutex_unlock(&b->mu);
  return n;
}



static void list_push(req_list_t *l, srv_req_t *r) {
  r->next = l->first;
  l->first = r;
}

/* Queue timeouts (REJECT), clients gone (while queued: they are checked at
 * batch formation too), cancel.  Under the lock; *wake lowered to the next
 * timeout. */
static void expire(srv_batcher_t *b, int64_t now, int64_t *wake, req_list_t *timed_out, req_list_t *cancelled) {
  for (int q = 0; q < b->n_levels; q++) {
    for (srv_req_t *r = b->head[q], *nx; r; r = nx) {
      nx = r->next;
      if (b->cancel) {
        unlink_req(b, r);
        list_push(cancelled, r);
        continue;
      }
      if (r->queue_deadline_ns > 0 && !r->delayed) {
        const srv_queue_policy_t *pol = level_policy(b->m, r->level);
        if (now >= r->queue_deadline_ns && pol->timeout_action == SRV_TIMEOUT_REJECT) {
          unlink_req(b, r);
          list_push(timed_out, r);
          continue;
        }
        if (now >= r->queue_deadline_ns) { /* DELAY: to the tail, behind every request still in time */
          if (b->tail[q] != r) {
            unlink_req(b, r);
            append_req(b, q, r);
          }
          r->delayed = 1;
          if (!b->delayed[q]) b->delayed[q] = r;
          continue; /* (met again at the tail, delayed: passed over) */
        }
        if (*wake == 0 || r->queue_deadline_ns < *wake) *wake = r->queue_deadline_ns;
      }
    }
  }
}

#define SRV_MAX_GROUPS 16

typedef struct group {
  srv_req_t *first;
  int64_t rows;     /* rows of the requests that fit in one batch */
  int64_t oldest;
} group_t;

/* Whether a group of requests of one shape, `rows` rows in all, the oldest
 * arrived at `oldest`, is a batch to run now (the rules at the top of this
 * file); *target: the most rows to take (max_batch_size, or the preferred
 * size that made it ready).  When not ready, *wake is lowered to when it
 * may become ready.  Under the lock. */
static int group_ready(srv_batcher_t *b, int64_t rows, int64_t oldest, int64_t now, int64_t *wake, int64_t *target) {
  srv_model_t *m = b->m;
  int batching = m->max_batch_size > 0;
  int dynamic = batching && m->cfg.dynamic_batching;
  int64_t max_rows = batching ? m->max_batch_size : 1;
  int64_t delay_ns = m->cfg.max_queue_delay_us * 1000;
  *target = max_rows;
  if (!dynamic || b->draining || rows >= max_rows || now >= oldest + delay_ns) return 1;
  int64_t idle = srv_last_idle_ns(m->server);
  if (idle == 0 || now >= idle + delay_ns) return 1;
  if (*wake == 0 || idle + delay_ns < *wake) *wake = idle + delay_ns;
  if (m->cfg.n_preferred > 0) {
    int64_t best = 0;
    for (int p = 0; p < m->cfg.n_preferred; p++)
      if (m->cfg.preferred_batch_size[p] <= rows && m->cfg.preferred_batch_size[p] > best)
        best = m->cfg.preferred_batch_size[p];
    if (best > 0) {
      *target = best;
      return 1;
    }
  }
  if (*wake == 0 || oldest + delay_ns < *wake) *wake = oldest + delay_ns;
  return 0;
}

/* Form a batch for inst; 1 when one was formed.  Under the lock. */
static int form_batch(srv_batcher_t *b, srv_instance_t *inst, int64_t now, int64_t *wake, req_list_t *gone) {
  srv_model_t *m = b->m;
  int batching = m->max_batch_size > 0;
  int dynamic = batching && m->cfg.dynamic_batching;
  int64_t max_rows = batching ? m->max_batch_size : 1;
  group_t g[SRV_MAX_GROUPS];
  int ng = 0;
  for (int q = 0; q < b->n_levels; q++) {
    for (srv_req_t *r = b->head[q]; r; r = r->next) {
      int k = 0;
      while (k < ng && !same_shape(g[k].first, r, batching)) k++;
      if (k == ng) {
        if (ng == SRV_MAX_GROUPS) continue;
        g[ng].first = r;
        g[ng].rows = 0;
        g[ng].oldest = r->arrival_ns;
        ng++;
      }
      if (g[k].rows + r->infer.rows <= max_rows) g[k].rows += r->infer.rows;
      if (r->arrival_ns < g[k].oldest) g[k].oldest = r->arrival_ns;
    }
  }
  for (int k = 0; k < ng; k++) {
    int64_t target = max_rows;
    if (!group_ready(b, g[k].rows, g[k].oldest, now, wake, &target)) continue;
    /* Take the group's requests in queue order while they fit. */
    int64_t rows = 0;
    inst->n = 0;
    for (int q = 0; q < b->n_levels && rows < target; q++) {
      for (srv_req_t *r = b->head[q], *nx; r && rows < target; r = nx) {
        nx = r->next;
        if (!same_shape(g[k].first, r, batching)) continue;
        if (client_gone(r)) {
          unlink_req(b, r);
          list_push(gone, r);
          continue;
        }
        if (rows + r->infer.rows > target) {
          if (rows == 0 && r->infer.rows <= max_rows) {
            /* preferred size smaller than this one request: it goes alone */
          } else {
            continue;
          }
        }
        unlink_req(b, r);
        inst->batch[inst->n++] = r;
        rows += r->infer.rows;
        if (!dynamic || inst->n == b->max_reqs) break;
      }
      if (!dynamic && inst->n) break;
      if (inst->n == b->max_reqs) break;
    }
    if (inst->n == 0) continue; /* every request of the group was gone */
    inst->busy = INST_ASSIGNED;
    b->running += inst->n;
    return 1;
  }
  return 0;
}

/* Form a batch for the first idle instance and wake it; 1 when one was
 * formed.  Under the lock (the scheduler's loop, and srv_batcher_submit). */
static int dispatch(srv_batcher_t *b, int64_t now, int64_t *wake, req_list_t *gone) {
  for (int i = 0; i < b->n_inst; i++) {
    if (b->inst[i].busy) continue;
    if (!form_batch(b, &b->inst[i], now, wake, gone)) return 0;
    pthread_cond_signal(&b->inst[i].cv);
    return 1;
  }
  return 0;
}

static void answer_lists(req_list_t *timed_out, req_list_t *cancelled, req_list_t *gone) {
  for (srv_req_t *r = timed_out->first, *nx; r; r = nx) {
    nx = r->next;
    r->next = NULL;
    srv_metrics_pending(r->model->metrics, -1);
    srv_req_fail(r, 503, SRV_FAIL_REJECTED, "model '%s': request timed out in the queue after %.3f ms", r->model->name,
                 (double)(now_ns() - r->arrival_ns) / 1e6);
  }
  for (srv_req_t *r = cancelled->first, *nx; r; r = nx) {
    nx = r->next;
    r->next = NULL;
    srv_metrics_pending(r->model->metrics, -1);
    srv_req_fail(r, 503, SRV_FAIL_REJECTED, "model '%s': the server is shutting down (exit timeout reached)",
                 r->model->name);
  }
  for (srv_req_t *r = gone->first, *nx; r; r = nx) {
    nx = r->next;
    r->next = NULL;
    srv_metrics_pending(r->model->metrics, -1);
    srv_req_fail(r, 499, SRV_FAIL_CANCELED, "the client closed the connection before its batch formed");
  }
}

static void *sched_main(void *arg) {
  srv_batcher_t *b = arg;
  pthread_mutex_lock(&b->mu);
  for (;;) {
    if (b->stop && b->queued == 0) break;
    int64_t now = now_ns(), wake = 0;
    req_list_t timed_out = {0}, cancelled = {0}, gone = {0};
    expire(b, now, &wake, &timed_out, &cancelled);
    int formed = b->queued > 0 && dispatch(b, now, &wake, &gone);
    if (timed_out.first || cancelled.first || gone.first) {
      pthread_mutex_unlock(&b->mu);
      answer_lists(&timed_out, &cancelled, &gone);
      pthread_mutex_lock(&b->mu);
      pthread_cond_broadcast(&b->idle_cv);
      continue;
    }
    if (formed) continue;
    if (b->queued == 0 && b->running == 0) pthread_cond_broadcast(&b->idle_cv);
    srv_cond_wait_until(&b->cv, &b->mu, wake);
  }
  pthread_mutex_unlock(&b->mu);
  return NULL;
}

/* Bytes per row (dim 0) of a tensor of dims. */
static size_t row_bytes(toplu_dtype_t dt, int ndim, const int64_t *dims) {
  size_t n = toplu_dtype_size(dt);
  for (int d = 1; d < ndim; d++) n *= (size_t)dims[d];
  return n;
}

static void fail_batch(srv_req_t **reqs, int n, int status, srv_fail_reason_t reason, const char *what) {
  for (int i = 0; i < n; i++) {
    srv_metrics_pending(reqs[i]->model->metrics, -1);
    srv_req_fail(reqs[i], status, reason, "%s", what);
  }
}

/* Map an engine status to the HTTP answer. */
static void status_answer(toplu_status_t st, int *status, srv_fail_reason_t *reason) {
  switch (st) {
  case TOPLU_ERR_SHAPE:
  case TOPLU_ERR_INVALID_ARGUMENT:
    *status = 400;
    *reason = SRV_FAIL_BAD_REQUEST;
    break;
  case TOPLU_ERR_DEADLINE:
    *status = 503;
    *reason = SRV_FAIL_REJECTED;
    break;
  case TOPLU_ERR_CANCELLED:
    *status = 503;
    *reason = SRV_FAIL_CANCELED;
    break;
  default:
    *status = 500;
    *reason = SRV_FAIL_BACKEND;
  }
}

static void run_batch(srv_instance_t *inst, srv_req_t **reqs, int n) {
  srv_batcher_t *b = inst->b;
  srv_model_t *m = b->m;
  int batching = m->max_batch_size > 0;
  int n_in = toplu_model_input_count(m->model), n_out = toplu_model_output_count(m->model);
  int64_t t0 = now_ns();
  int64_t rows = 0;
  for (int i = 0; i < n; i++) {
    reqs[i]->start_ns = t0;
    rows += reqs[i]->infer.rows;
  }
  /* The rows the engine runs: padded with zero rows up to a plan size. */
  int64_t run_rows = batching ? srv_model_plan_rows(m, rows) : rows;
  toplu_tensor_t in[n_in > 0 ? n_in : 1], out[n_out > 0 ? n_out : 1];
  memset(out, 0, sizeof out);
  for (int i = 0; i < n_in; i++) {
    const srv_input_t *x = &reqs[0]->infer.inputs[i];
    memset(&in[i], 0, sizeof in[i]);
    in[i].dtype = x->dtype;
    in[i].ndim = x->ndim;
    memcpy(in[i].dims, x->dims, sizeof x->dims);
    if (n == 1 && run_rows == rows && (uintptr_t)x->data % 64 == 0) {
      in[i].data = (void *)x->data;
      continue;
    }
    size_t total = 0, padded;
    for (int k = 0; k < n; k++) total += reqs[k]->infer.inputs[i].nbytes;
    padded = rows > 0 ? total / (size_t)rows * (size_t)run_rows : total;
    if (batching) in[i].dims[0] = run_rows;
    if (inst->stage_cap[i] < padded) {
      void *p = realloc(inst->stage[i], padded ? padded : 1);
      if (!p) {
        fail_batch(reqs, n, 500, SRV_FAIL_OTHER, "out of memory stacking the batch's inputs");
        return;
      }
      inst->stage[i] = p;
      inst->stage_cap[i] = padded;
    }
    size_t off = 0;
    for (int k = 0; k < n; k++) {
      const srv_input_t *y = &reqs[k]->infer.inputs[i];
      memcpy((char *)inst->stage[i] + off, y->data, y->nbytes);
      off += y->nbytes;
    }
    if (padded > off) memset((char *)inst->stage[i] + off, 0, padded - off);
    in[i].data = inst->stage[i];
  }
  int64_t t1 = now_ns();
  toplu_run_options_t ro;
  toplu_run_options_init(&ro);
  ro.cancel = &inst->cancel; /* the exit timeout; queue timeouts do not stop a run */
  toplu_error_t err;
  toplu_status_t st = toplu_session_run_with(m->session, in, n_in, out, n_out, &ro, &err);
  int64_t t2 = now_ns();
  if (st == TOPLU_OK && n == 1) atomic_store_explicit(&b->single_ns, t2 - t1, memory_order_relaxed);
  if (st != TOPLU_OK) {
    for (int j = 0; j < n_out; j++) toplu_tensor_free(&out[j]);
    if (n > 1 && st != TOPLU_ERR_DEADLINE && st != TOPLU_ERR_CANCELLED) {
      srv_log(m->server, TOPLU_LOG_WARNING, "model '%s' version %s: a batch of %d requests failed (%s); running them one by one",
              m->name, m->version, n, err.message);
      for (int i = 0; i < n; i++) run_batch(inst, &reqs[i], 1);
      return;
    }
    int status;
    srv_fail_reason_t reason;
    status_answer(st, &status, &reason);
    char msg[TOPLU_ERROR_MESSAGE_MAX + 64];
    if (st == TOPLU_ERR_CANCELLED)
      snprintf(msg, sizeof msg, "model '%.200s': the server is shutting down (exit timeout reached)", m->name);
    else
      snprintf(msg, sizeof msg, "model '%.200s': %.800s", m->name, err.message);
    if (status == 500) srv_log(m->server, TOPLU_LOG_ERROR, "%s", msg);
    fail_batch(reqs, n, status, reason, msg);
    return;
  }
  if (batching) {
    for (int j = 0; j < n_out; j++) {
      if (out[j].ndim < 1 || out[j].dims[0] != run_rows) {
        const toplu_value_info_t *o = toplu_model_output(m->model, j);
        char msg[512];
        snprintf(msg, sizeof msg,
                 "model '%s': output '%s' has %lld rows for a batch of %lld: its dim 0 is not the batch dim; serve the model "
                 "with max_batch_size 0",
                 m->name, o->name, out[j].ndim ? (long long)out[j].dims[0] : 0LL, (long long)run_rows);
        srv_log(m->server, TOPLU_LOG_ERROR, "%s", msg);
        for (int k = 0; k < n_out; k++) toplu_tensor_free(&out[k]);
        fail_batch(reqs, n, 500, SRV_FAIL_BACKEND, msg);
        return;
      }
    }
  }
  /* A config's output reshape: the model gives reshape.shape, clients get dims (the same row-major data). */
  int out_ndim[n_out > 0 ? n_out : 1];
  int64_t out_dims[n_out > 0 ? n_out : 1][TOPLU_MAX_DIMS];
  int reshape = m->cfg.n_outputs > 0; /* the config's output[] entries: a reshape, or dims to hold the shape to */
  for (int j = 0; j < n_out; j++) {
    out_ndim[j] = out[j].ndim;
    memcpy(out_dims[j], out[j].dims, sizeof out_dims[j]);
    char msg[512];
    if (reshape && srv_config_reshape_output(&m->cfg, toplu_model_output(m->model, j)->name, batching, &out_ndim[j],
                                             out_dims[j], msg, sizeof msg)) {
      char full[sizeof msg + SRV_NAME_MAX + 16];
      snprintf(full, sizeof full, "model '%s': %s", m->name, msg);
      srv_log(m->server, TOPLU_LOG_ERROR, "%s", full);
      for (int k = 0; k < n_out; k++) toplu_tensor_free(&out[k]);
      fail_batch(reqs, n, 500, SRV_FAIL_BACKEND, full);
      return;
    }
  }
  int64_t r0 = 0;
  toplu_tensor_t view[n_out > 0 ? n_out : 1];
  for (int i = 0; i < n; i++) {
    srv_req_t *r = reqs[i];
    for (int j = 0; j < n_out; j++) {
      view[j] = out[j];
      view[j].ndim = out_ndim[j];
      memcpy(view[j].dims, out_dims[j], sizeof view[j].dims);
      if (batching) {
        view[j].dims[0] = r->infer.rows;
        view[j].data = (char *)out[j].data + (size_t)r0 * row_bytes(out[j].dtype, out[j].ndim, out[j].dims);
      }
    }
    r0 += r->infer.rows;
    int rc;
    if (m->cfg.response_cache && m->server->cache) {
      pl_buf_t plain = {0};
      char *id = r->infer.id;
      r->infer.id = NULL;
      size_t jl = 0;
      rc = srv_encode_infer_response(&r->infer, m->model, m->name, m->version, view, &plain, &jl);
      r->infer.id = id;
      if (rc == 0 && !plain.oom) {
        srv_cache_put(m->server->cache, m->owner, r->key.data, r->key.len, plain.data, plain.len, jl);
        srv_response_with_id(id, plain.data, plain.len, jl, &r->out, &r->out_json_len);
        if (r->out.oom) rc = 500;
      }
      pl_buf_free(&plain);
    } else {
      rc = srv_encode_infer_response(&r->infer, m->model, m->name, m->version, view, &r->out, &r->out_json_len);
    }
    if (rc != 0 || r->out.oom) {
      pl_buf_free(&r->out);
      srv_metrics_pending(m->metrics, -1);
      srv_req_fail(r, 500, SRV_FAIL_OTHER, "model '%s': out of memory encoding the response", m->name);
      reqs[i] = NULL;
    }
  }
  for (int j = 0; j < n_out; j++) toplu_tensor_free(&out[j]);
  int64_t t3 = now_ns();
  srv_metrics_batch(m->metrics, rows, t1 - t0, t2 - t1, t3 - t2);
  for (int i = 0; i < n; i++) {
    srv_req_t *r = reqs[i];
    if (!r) continue;
    r->compute_input_ns = t1 - t0;
    r->compute_infer_ns = t2 - t1;
    r->compute_output_ns = t3 - t2;
    r->status = 200;
    srv_metrics_pending(m->metrics, -1);
    srv_metrics_success(m->metrics, t3 - r->arrival_ns, r->start_ns - r->queued_ns, t1 - t0, t2 - t1, t3 - t2);
    srv_req_finish(r);
  }
}

int srv_batcher_run_inline(srv_batcher_t *b, srv_req_t *r) {
  srv_model_t *m = b->m;
  if (admit(m, r)) return 0; /* srv_batcher_submit answers it */
  /* Only a plan already built and measured fastest on one thread: the
   * calling thread has no OpenMP team of its own to spare, and a first run
   * (plan build, choose_threads' timing) belongs on the instance's thread. */
  int n_in = toplu_model_input_count(m->model);
  if (n_in < 1 || n_in > 64 || r->infer.n_inputs != n_in) return 0;
  toplu_tensor_t in[64];
  int64_t run_rows = m->max_batch_size > 0 ? srv_model_plan_rows(m, r->infer.rows) : r->infer.rows;
  for (int i = 0; i < n_in; i++) {
    const srv_input_t *x = &r->infer.inputs[i];
    memset(&in[i], 0, sizeof in[i]);
    in[i].dtype = x->dtype;
    in[i].ndim = x->ndim;
    memcpy(in[i].dims, x->dims, sizeof x->dims);
    if (m->max_batch_size > 0 && x->ndim > 0) in[i].dims[0] = run_rows;
  }
  if (toplu_session_plan_threads(m->session, in, n_in) != 1) return 0;
  /* Only a model whose last request alone ran briefly: a longer one would
   * hold the thread's other connections (a liveness probe waited 61 ms
   * behind a 110 ms PaddleOCR cls run). */
  int64_t single = atomic_load_explicit(&b->single_ns, memory_order_relaxed);
  if (single <= 0 || single > SRV_INLINE_MAX_NS) return 0;
  pthread_mutex_lock(&b->mu);
  srv_instance_t *inst = NULL;
  int64_t now = now_ns(), wake = 0, target;
  if (!b->draining && !b->stop && b->queued == 0 && group_ready(b, r->infer.rows, r->arrival_ns, now, &wake, &target) &&
      r->infer.rows <= target) {
    for (int i = 0; i < b->n_inst && !inst; i++)
      if (!b->inst[i].busy) inst = &b->inst[i];
  }
  if (!inst) {
    pthread_mutex_unlock(&b->mu);
    return 0;
  }
  inst->busy = INST_INLINE;
  inst->batch[0] = r;
  inst->n = 1;
  b->running++;
  srv_metrics_pending(m->metrics, 1);
  pthread_mutex_unlock(&b->mu);
  run_batch(inst, inst->batch, 1);
  pthread_mutex_lock(&b->mu);
  inst->busy = 0;
  inst->n = 0;
  b->running--;
  if (b->queued > 0) pthread_cond_signal(&b->cv); /* requests that came while it ran */
  if (b->queued == 0 && b->running == 0) pthread_cond_broadcast(&b->idle_cv);
  pthread_mutex_unlock(&b->mu);
  return 1;
}

static void *inst_main(void *arg) {
  srv_instance_t *inst = arg;
  srv_batcher_t *b = inst->b;
  pthread_mutex_lock(&b->mu);
  for (;;) {
    while (inst->busy != INST_ASSIGNED && !b->stop) pthread_cond_wait(&inst->cv, &b->mu);
    if (inst->busy != INST_ASSIGNED) break;
    int n = inst->n;
    pthread_mutex_unlock(&b->mu);
    run_batch(inst, inst->batch, n);
    pthread_mutex_lock(&b->mu);
    inst->busy = 0;
    inst->n = 0;
    b->running -= n;
    pthread_cond_signal(&b->cv);
    if (b->queued == 0 && b->running == 0) pthread_cond_broadcast(&b->idle_cv);
  }
  pthread_mutex_unlock(&b->mu);
  return NULL;
}

int srv_batcher_create(srv_model_t *m, toplu_error_t *err) {
  srv_batcher_t *b = calloc(1, sizeof *b);
  if (!b) return toplu__errorf(err, TOPLU_ERR_OUT_OF_MEMORY, "out of memory for the batcher"), -1;
  b->m = m;
  b->n_levels = m->cfg.priority_levels > 0 ? m->cfg.priority_levels : 1;
  b->n_inst = m->cfg.instance_count > 0 ? m->cfg.instance_count : 1;
  b->max_reqs = m->max_batch_size > 0 ? (int)m->max_batch_size : 1;
  pthread_mutex_init(&b->mu, NULL);
  srv_cond_init_monotonic(&b->cv);
  srv_cond_init_monotonic(&b->idle_cv);
  b->inst = calloc((size_t)b->n_inst, sizeof *b->inst);
  int n_in = toplu_model_input_count(m->model);
  if (!b->inst) goto oom;
  for (int i = 0; i < b->n_inst; i++) {
    srv_instance_t *in = &b->inst[i];
    in->b = b;
    pthread_cond_init(&in->cv, NULL);
    in->batch = calloc((size_t)b->max_reqs, sizeof *in->batch);
    in->stage = calloc((size_t)(n_in > 0 ? n_in : 1), sizeof *in->stage);
    in->stage_cap = calloc((size_t)(n_in > 0 ? n_in : 1), sizeof *in->stage_cap);
    if (!in->batch || !in->stage || !in->stage_cap) goto oom;
  }
  m->batcher = b;
  for (int i = 0; i < b->n_inst; i++) {
    if (pthread_create(&b->inst[i].thread, NULL, inst_main, &b->inst[i]) != 0) goto thread_fail;
    b->inst[i].started = 1;
  }
  if (pthread_create(&b->sched, NULL, sched_main, b) != 0) goto thread_fail;
  b->sched_started = 1;
  return 0;
thread_fail:
  srv_batcher_destroy(b);
  m->batcher = NULL;
  return toplu__errorf(err, TOPLU_ERR_INTERNAL, "model '%s': cannot start the batcher's threads", m->name), -1;
oom:
  m->batcher = b;
  srv_batcher_destroy(b);
  m->batcher = NULL;
  return toplu__errorf(err, TOPLU_ERR_OUT_OF_MEMORY, "out of memory for the batcher of model '%s'", m->name), -1;
}

void srv_batcher_drain(srv_batcher_t *b, int cancel) {
  if (!b) return;
  pthread_mutex_lock(&b->mu);
  b->draining = 1;
  if (cancel) {
    b->cancel = 1;
    for (int i = 0; i < b->n_inst; i++)
      if (b->inst[i].busy) toplu_run_cancel(&b->inst[i].cancel);
  }
  pthread_cond_broadcast(&b->cv);
  pthread_mutex_unlock(&b->mu);
}

int srv_batcher_wait_idle(srv_batcher_t *b, int64_t deadline_ns) {
  if (!b) return 0;
  int rc = 0;
  pthread_mutex_lock(&b->mu);
  while (b->queued > 0 || b->running > 0) {
    if (deadline_ns > 0 && now_ns() >= deadline_ns) {
      rc = -1;
      break;
    }
    int64_t wake = now_ns() + 50 * 1000000LL;
    if (deadline_ns > 0 && deadline_ns < wake) wake = deadline_ns;
    srv_cond_wait_until(&b->idle_cv, &b->mu, wake);
  }
  pthread_mutex_unlock(&b->mu);
  return rc;
}

void srv_batcher_destroy(srv_batcher_t *b) {
  if (!b) return;
  pthread_mutex_lock(&b->mu);
  b->stop = 1;
  b->draining = 1;
  pthread_cond_broadcast(&b->cv);
  for (int i = 0; i < b->n_inst; i++) pthread_cond_broadcast(&b->inst[i].cv);
  pthread_mutex_unlock(&b->mu);
  if (b->sched_started) pthread_join(b->sched, NULL);
  pthread_mutex_lock(&b->mu);
  for (int i = 0; i < b->n_inst; i++) pthread_cond_broadcast(&b->inst[i].cv);
  pthread_mutex_unlock(&b->mu);
  int n_in = b->m && b->m->model ? toplu_model_input_count(b->m->model) : 0;
  for (int i = 0; b->inst && i < b->n_inst; i++) {
    srv_instance_t *in = &b->inst[i];
    if (in->started) pthread_join(in->thread, NULL);
    pthread_cond_destroy(&in->cv);
    for (int k = 0; in->stage && k < n_in; k++) free(in->stage[k]);
    free(in->stage);
    free(in->stage_cap);
    free(in->batch);
  }
  free(b->inst);
  pthread_cond_destroy(&b->cv);
  pthread_cond_destroy(&b->idle_cv);
  pthread_mutex_destroy(&b->mu);
  free(b);
}
