/* runtime/session.c - sessions: plan cache, runs, fixed-batch models, memory reports. */
#include <math.h>
#include <omp.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "core/strtensor.h"
#include "core/error.h"
#include "core/memory.h"
#include "core/log.h"
#include "graph/schema.h"
#include "ops/backend.h"
#include "runtime/model_internal.h"
#include "graph/control.h"
#include "ops/choice.h"
#include "ops/elem_io.h"
#include "runtime/plan.h"
#include "runtime/pool.h"
#include "toplu/session.h"
#include "toplu/profile.h"

/* Inputs and outputs a split run (choose_threads) handles; models with more
 * run whole. */
#define TOPLU_SPLIT_MAX_IO 32

typedef struct plan_entry {
  struct plan_entry *next;
  const toplu__graph_t *graph;
  toplu__plan_t *plan;
  uint64_t last_used;
  int refs;         /* callers holding it (get_plan/put_plan); never evicted while > 0 */
  int rows_checked; /* batched graph: 0 unknown, 1 rows independent, -1 not */
  int threads_chosen; /* choose_threads: 1 once decided (or not to be decided) */
  int choosing;       /* a run is timing the candidates now */
  int runs;           /* runs that reached choose_threads (it times on the third) */
  int choose_tries;   /* timings that came to nothing (a run failed or was cancelled, other callers held the plan) */
  toplu__plan_t *split; /* choose_threads: a one-thread plan of rows/n_split rows; runs go to it, n_split slices
                         * of the batch at once on the session's threads (NULL: runs use plan) */
  int n_split;
  /* Re-choice when the machine changes (see RECHOOSE_* below): */
  int64_t kept_ns;   /* the many-thread whole-batch plan's run when it was kept (0: not kept, or not known) */
  int64_t base_ns;   /* the smallest kept_ns so far: the plan's time with the cores to itself, as far as seen */
  int64_t chosen_at; /* toplu_monotonic_ns of the last choice */
  int slow_runs;     /* leaky count of runs over RECHOOSE_FACTOR x kept_ns (+1 such a run, -1 another) */
  int fast_runs;     /* the same for runs under kept_ns / RECHOOSE_FACTOR */
  int rechosen;      /* why the choice was last reopened: 0 it was not, 1 slow runs, 2 fast runs (the note says) */
  int uncached;       /* not in the cache (over max_plan_bytes or max_plans): freed when the last holder puts it */
  /* choose_threads' timing of a long run, spread over the plan's next runs
   * (explore_run): the alternative being timed, and the samples so far */
  toplu__plan_t *cand; /* NULL: no such timing under way */
  toplu__plan_t *retired; /* the plan a one-thread choice replaced, arenas given back: toplu_session_steps'
                           * strings point into it and stay valid while the entry is cached */
  int cand_k;          /* slices of cand (0: one thread on the whole batch) */
  int ex_step;         /* the next step of EXPLORE_STEPS (1 = the alternative's warm run) */
  int ex_busy;         /* a caller is running a step now */
  int ex_skipped;      /* steps that came to nothing (another caller overlapped, the input failed) */
  double ex_first;     /* the first run's time, seconds */
  double ex_t[2][4];   /* timed runs: [0] the plan's, [1] the alternative's */
  int ex_n[2];
} plan_entry_t;

struct toplu_session {
  const toplu_model_t *model;
  toplu_session_options_t opts;
  int threads;
  toplu_allocator_t *alloc;
  int own_alloc;
  toplu__backend_t **backends; /* in order of preference (opts.backends), the CPU backend among them */
  int n_backends;
  pthread_mutex_t lock;
  plan_entry_t *plans;
  int n_plans;
  uint64_t clock;
  char last_error[TOPLU_ERROR_MESSAGE_MAX];
  uint64_t id;                 /* unique in the process (next_session_id), never 0 */
  int warned_batch;
  int warned_uncached;
  /* toplu_session_plan_cache's counters (under lock) */
  size_t peak_bytes;
  int64_t hits, misses, evictions, uncached;
  toplu__pool_t *pool; /* split runs' worker threads (threads - 1), made by the first split run (under lock) */
  int pool_failed;     /* it could not be made: split runs use OpenMP */
  double rechoose;     /* RECHOOSE_FACTOR, or TOPLU_RECHOOSE_FACTOR's (< 0: off) */
  double choose_long;  /* seconds: opts.choose_threads_long_ms, CHOOSE_LONG_S or TOPLU_CHOOSE_LONG_MS's; < 0 never */
  toplu__choices_t *choices; /* choose_kernels' cache (ops/choice.h); NULL when off */
};

/* choose_threads: runs over this many seconds are timed over the plan's next runs (explore_run) */
#define CHOOSE_LONG_S 0.02
/* The re-choice of a kept whole-batch plan (choose_threads, below). */
#define RECHOOSE_FACTOR 2.0
#define RECHOOSE_RUNS 8
#define RECHOOSE_MIN_NS 1000000000LL

/* Like errno: the message of this thread's last failed call, and on which
 * session, so concurrent runs each read their own failure. */
static _Thread_local char thread_error[TOPLU_ERROR_MESSAGE_MAX];
/* The session of the thread's last failure, by its id (a destroyed session's address may be a new session's: the
 * new one showed the old one's failure; a fresh user's finding of 2026-12-06); 0: none. */
static _Thread_local uint64_t thread_error_session;
/* toplu_session_last_error's copy of another thread's failure, made under the session's lock (the session's own
 * buffer was handed out and rewritten by the next failing run in any thread: a data race, TSan) */
static _Thread_local char thread_copy[TOPLU_ERROR_MESSAGE_MAX];
static atomic_uint_fast64_t next_session_id = 1;

void toplu_session_options_init(toplu_session_options_t *opts) {
  if (opts) memset(opts, 0, sizeof *opts);
}

static int default_threads(void) {
  int n = toplu_cpu_count(NULL, 0);
  return n > 0 ? n : 1;
}

toplu_status_t toplu_session_create(const toplu_model_t *model, const toplu_session_options_t *opts,
                                    toplu_session_t **out, toplu_error_t *err) {
  toplu_error_clear(err);
  if (!model || !out) return toplu__errorf(err, TOPLU_ERR_INVALID_ARGUMENT, "toplu_session_create: NULL argument");
  *out = NULL;
  if (opts && (opts->threads < 0 || opts->threads > TOPLU_MAX_THREADS))
    return toplu__errorf(err, TOPLU_ERR_INVALID_ARGUMENT, "threads must be in 0..%d (got %d)", TOPLU_MAX_THREADS,
                         opts->threads);
  if (opts && opts->max_plans < 0)
    return toplu__errorf(err, TOPLU_ERR_INVALID_ARGUMENT, "max_plans must be >= 0 (got %d)", opts->max_plans);
  if (opts && opts->max_plans > TOPLU_MAX_PLANS)
    return toplu__errorf(err, TOPLU_ERR_INVALID_ARGUMENT, "max_plans must be at most %d (got %d)", TOPLU_MAX_PLANS,
                         opts->max_plans);
  toplu_session_t *s = calloc(1, sizeof *s);
  if (!s) return toplu__errorf(err, TOPLU_ERR_OUT_OF_MEMORY, "out of memory");
  s->id = atomic_fetch_add(&next_session_id, 1);
  s->model = model;
  if (opts) s->opts = *opts;
  s->threads = s->opts.threads > 0 ? s->opts.threads : default_threads();
  if (s->opts.max_plans <= 0) s->opts.max_plans = 8;
  /* TOPLU_RECHOOSE_FACTOR: the slow-run factor of the re-choice (RECHOOSE_*
   * in choose_threads' part below): "off" never, 0 every run counts as slow
   * (tests); for A/B measurement, as TOPLU_CHOOSE_THREADS (bench/README.md) */
  const char *rf = getenv("TOPLU_RECHOOSE_FACTOR");
  char *end = NULL;
  double f = rf ? strtod(rf, &end) : 0;
  s->rechoose = !rf ? RECHOOSE_FACTOR : !strcmp(rf, "off") ? -1 : end != rf && !*end && f >= 0 ? f : RECHOOSE_FACTOR;
  /* TOPLU_CHOOSE_LONG_MS: the run time above which choose_threads times a plan over its next runs (explore_run)
   * rather than on the caller's inputs at once; for tests and A/B measurement, as TOPLU_RECHOOSE_FACTOR */
  const char *lm = getenv("TOPLU_CHOOSE_LONG_MS");
  end = NULL;
  f = lm ? strtod(lm, &end) : 0;
  s->choose_long = s->opts.choose_threads_long_ms < 0    ? -1
                   : s->opts.choose_threads_long_ms > 0  ? s->opts.choose_threads_long_ms / 1e3
                   : lm && end != lm && !*end && f >= 0 ? f / 1e3
                                                         : CHOOSE_LONG_S;
  pthread_mutex_init(&s->lock, NULL);
  toplu_status_t st;
  if (s->opts.allocator) {
    s->alloc = s->opts.allocator;
  } else if ((st = toplu_allocator_create(0, &s->alloc)) != TOPLU_OK) {
    free(s);
    return toplu__errorf(err, st, "out of memory");
  } else {
    s->own_alloc = 1;
  }
  if ((st = toplu__backends_create(s->opts.backends, &s->backends, &s->n_backends, err))) {
    if (s->own_alloc) toplu_allocator_destroy(s->alloc);
    free(s);
    return st;
  }
  if (s->opts.choose_kernels >= 0 && !(s->choices = toplu__choices_create(s->opts.log, s->opts.log_user))) {
    toplu__backends_destroy(s->backends, s->n_backends);
    if (s->own_alloc) toplu_allocator_destroy(s->alloc);
    free(s);
    return toplu__errorf(err, TOPLU_ERR_OUT_OF_MEMORY, "out of memory");
  }
  *out = s;
  return TOPLU_OK;
}

static void entry_free(plan_entry_t *e) {
  toplu__plan_destroy(e->plan);
  toplu__plan_destroy(e->split);
  toplu__plan_destroy(e->cand);
  toplu__plan_destroy(e->retired);
  free(e);
}

/* Bytes an entry's plans hold (the split plan's exec contexts included). */
static size_t entry_bytes(plan_entry_t *e) {
  /* with the split kept, the whole-batch plan runs no more and its arenas were given back: counted as it holds
   * them (it counted one arena it did not hold, and a plan within max_plan_bytes evicted itself every third run:
   * a fresh user's finding of 2026-12-06) */
  return (e->split ? toplu__plan_held_bytes(e->plan) + toplu__plan_own_bytes(e->split) : toplu__plan_own_bytes(e->plan)) +
         (e->cand ? toplu__plan_own_bytes(e->cand) : 0) + (e->retired ? toplu__plan_held_bytes(e->retired) : 0);
}

static void drop_all(toplu_session_t *s) {
  while (s->plans) {
    plan_entry_t *e = s->plans;
    s->plans = e->next;
    entry_free(e);
  }
  s->n_plans = 0;
}

void toplu_session_destroy(toplu_session_t *s) {
  if (!s) return;
  if (thread_error_session == s->id) thread_error_session = 0;
  drop_all(s);
  toplu__pool_destroy(s->pool);
  toplu__backends_destroy(s->backends, s->n_backends);
  toplu__choices_destroy(s->choices);
  if (s->own_alloc) toplu_allocator_destroy(s->alloc);
  pthread_mutex_destroy(&s->lock);
  free(s);
}

void toplu_session_clear_plans(toplu_session_t *s) {
  if (!s) return;
  pthread_mutex_lock(&s->lock);
  drop_all(s);
  pthread_mutex_unlock(&s->lock);
}

const toplu_model_t *toplu_session_model(const toplu_session_t *s) { return s ? s->model : NULL; }
int toplu_session_threads(const toplu_session_t *s) { return s ? s->threads : 0; }


const char *toplu_session_last_error(const toplu_session_t *s) {
  if (!s) return "no session (NULL)";
  if (thread_error_session == s->id) return thread_error;
  toplu_session_t *w = (toplu_session_t *)s; /* its lock only: the message is copied, not changed */
  pthread_mutex_lock(&w->lock);
  snprintf(thread_copy, sizeof thread_copy, "%s", s->last_error);
  pthread_mutex_unlock(&w->lock);
  return thread_copy;
}

static toplu_status_t fail(toplu_session_t *s, toplu_error_t *e) {
  const char *msg = e->message[0] ? e->message : toplu_strerror(e->status);
  snprintf(thread_error, sizeof thread_error, "%s", msg);
  thread_error_session = s->id;
  pthread_mutex_lock(&s->lock);
  snprintf(s->last_error, sizeof s->last_error, "%s", msg);
  pthread_mutex_unlock(&s->lock);
  return e->status;
}

/* The options of the session's plans, on `threads` threads. */
static toplu__plan_options_t plan_options(const toplu_session_t *s, int threads) {
  toplu__plan_options_t po = {.threads = threads, .profile = s->opts.profile, .alloc = s->alloc,
                             .backends = s->backends, .n_backends = s->n_backends, .no_blocked = s->opts.no_blocked,
                             .dump = s->opts.plan_dump, .choices = s->choices, .log = s->opts.log,
                             .log_user = s->opts.log_user};
  return po;
}

/* ---- the plan cache: least recently used plans dropped past max_plans or max_plan_bytes ---- */

/* Bytes the cached plans hold (toplu__plan_own_bytes summed).  Under s->lock. */
static size_t cache_bytes(const toplu_session_t *s) {
  size_t b = 0;
  for (plan_entry_t *e = s->plans; e; e = e->next) b += entry_bytes(e);
  return b;
}

static void note_peak(toplu_session_t *s) {
  size_t b = cache_bytes(s);
  if (b > s->peak_bytes) s->peak_bytes = b;
}

/*
 * Make the cache fit its bounds with `extra_bytes` and `extra_n` more (a plan
 * about to be added; 0 and 0 to bring it back under them after runs made
 * more exec contexts): first idle plans give back exec contexts beyond one,
 * then the least recently used plans nobody holds are dropped.  Plans held
 * by a call (refs > 0) are never touched.  Returns 1 when it fits, 0 when
 * it cannot (then nothing was dropped when even dropping every idle plan
 * would not have been enough).  Under s->lock.
 */
static int make_room(toplu_session_t *s, size_t extra_bytes, int extra_n) {
  size_t max_bytes = s->opts.max_plan_bytes;
  size_t held = 0, bytes = 0;
  int held_n = 0;
  for (plan_entry_t *e = s->plans; e; e = e->next) {
    size_t b = entry_bytes(e);
    bytes += b;
    if (e->refs) held += b, held_n++;
  }
  if (s->n_plans + extra_n <= s->opts.max_plans && (!max_bytes || bytes + extra_bytes <= max_bytes)) return 1;
  if (held_n + extra_n > s->opts.max_plans || (max_bytes && held + extra_bytes > max_bytes)) return 0;
  if (max_bytes && bytes + extra_bytes > max_bytes) {
    for (plan_entry_t *e = s->plans; e; e = e->next)
      if (!e->refs) {
        toplu__plan_trim_execs(e->plan, e->split ? 0 : 1);
        if (e->split) toplu__plan_trim_execs(e->split, 1);
        if (e->cand) toplu__plan_trim_execs(e->cand, 1);
      }
    bytes = cache_bytes(s);
  }
  while (s->n_plans + extra_n > s->opts.max_plans || (max_bytes && bytes + extra_bytes > max_bytes)) {
    plan_entry_t **victim = NULL;
    for (plan_entry_t **pp = &s->plans; *pp; pp = &(*pp)->next)
      if (!(*pp)->refs && (!victim || (*pp)->last_used < (*victim)->last_used)) victim = pp;
    if (!victim) return 0;
    plan_entry_t *v = *victim;
    *victim = v->next;
    bytes -= entry_bytes(v);
    entry_free(v);
    s->n_plans--;
    s->evictions++;
  }
  return 1;
}

/* Find or build the plan for these shapes on graph g.  Plans are built
 * outside the lock; two threads may race to build the same one, and the
 * loser's is dropped.  A plan that does not fit the cache's bounds (see
 * make_room) runs uncached: it is freed when the last caller puts it. */
static toplu_status_t get_plan(toplu_session_t *s, const toplu__graph_t *g, const toplu_tensor_t *inputs, int n,
                               plan_entry_t **out, toplu_error_t *err) {
  pthread_mutex_lock(&s->lock);
  for (plan_entry_t *e = s->plans; e; e = e->next)
    if (e->graph == g && toplu__plan_matches(e->plan, inputs, n)) {
      e->last_used = ++s->clock;
      e->refs++;
      s->hits++;
      *out = e;
      pthread_mutex_unlock(&s->lock);
      return TOPLU_OK;
    }
  pthread_mutex_unlock(&s->lock);
  toplu__plan_options_t po = plan_options(s, s->threads);
  toplu__plan_t *p = NULL;
  toplu_status_t st = toplu__plan_build(g, inputs, n, &po, &p, err);
  if (st) return st;
  plan_entry_t *ne = calloc(1, sizeof *ne);
  if (!ne) {
    toplu__plan_destroy(p);
    return toplu__errorf(err, TOPLU_ERR_OUT_OF_MEMORY, "out of memory");
  }
  ne->graph = g;
  ne->plan = p;
  pthread_mutex_lock(&s->lock);
  s->misses++; /* a lookup that built a plan (inputs the plan refuses count as neither) */
  for (plan_entry_t *e = s->plans; e; e = e->next)
    if (e->graph == g && toplu__plan_matches(e->plan, inputs, n)) {
      e->last_used = ++s->clock;
      e->refs++;
      *out = e;
      pthread_mutex_unlock(&s->lock);
      toplu__plan_destroy(p);
      free(ne);
      return TOPLU_OK;
    }
  size_t pbytes = toplu__plan_own_bytes(p);
  ne->last_used = ++s->clock;
  ne->refs = 1;
  int note = 0;
  if (make_room(s, pbytes, 1)) {
    ne->next = s->plans;
    s->plans = ne;
    s->n_plans++;
    note_peak(s);
  } else {
    ne->uncached = 1;
    __atomic_store_n(&ne->threads_chosen, 1, __ATOMIC_RELAXED); /* not timed: it is gone after this call */
    s->uncached++;
    note = !s->warned_uncached;
    s->warned_uncached = 1;
  }
  size_t max_bytes = s->opts.max_plan_bytes;
  int max_plans = s->opts.max_plans;
  pthread_mutex_unlock(&s->lock);
  if (note) {
    char shape[160];
    toplu_shape_format(n > 0 ? inputs[0].ndim : 0, n > 0 ? inputs[0].dims : NULL, shape, sizeof shape);
    toplu__logf(s->opts.log, s->opts.log_user, TOPLU_LOG_NOTE,
                "%s: the plan for input %s (%zu bytes) does not fit the plan cache beside the plans running "
                "calls hold (max_plan_bytes %zu, max_plans %d): it runs uncached, built again next time "
                "(noted once per session)",
                s->model->path, shape, pbytes, max_bytes, max_plans);
  }
  *out = ne;
  return TOPLU_OK;
}

static void put_plan(toplu_session_t *s, plan_entry_t *e) {
  if (!e) return;
  pthread_mutex_lock(&s->lock);
  /* read under the lock: once refs is 0 a cached entry may be evicted and
   * freed (by make_room below, or by another thread as soon as the lock is
   * released), so e is not touched after the unlock unless it is ours to free */
  int free_it = --e->refs == 0 && e->uncached;
  if (!e->uncached) {
    /* runs at once on one plan each made an exec context (an arena) */
    note_peak(s);
    if (s->opts.max_plan_bytes) make_room(s, 0, 0);
  }
  pthread_mutex_unlock(&s->lock);
  if (free_it) entry_free(e);
}

/* put_plan for a plan built only to be compared (the row check's batch-1
 * plan): when no call holds it and it never ran, it leaves the cache, so a
 * fixed-batch model run at batch B holds the batch-B plan alone, as
 * toplu_session_memory and the planner count it (tune measured 20-33% more
 * than predicted on MNIST at batch 2-8 while it stayed). */
static void put_plan_unused(toplu_session_t *s, plan_entry_t *e) {
  if (!e) return;
  pthread_mutex_lock(&s->lock);
  int idle = --e->refs == 0, drop = 0;
  if (idle && !e->uncached && !e->split) {
    pthread_mutex_lock(&e->plan->lock);
    int never_ran = e->plan->n_execs == 0;
    pthread_mutex_unlock(&e->plan->lock);
    for (plan_entry_t **pp = &s->plans; never_ran && *pp; pp = &(*pp)->next)
      if (*pp == e) {
        *pp = e->next;
        s->n_plans--;
        drop = 1;
        break;
      }
  }
  int free_it = drop || (idle && e->uncached);
  pthread_mutex_unlock(&s->lock);
  if (free_it) entry_free(e);
}

void toplu_session_plan_cache(toplu_session_t *s, toplu_plan_cache_stats_t *out) {
  if (!out) return;
  memset(out, 0, sizeof *out);
  if (!s) return;
  pthread_mutex_lock(&s->lock);
  out->n_plans = s->n_plans;
  out->bytes = cache_bytes(s);
  out->peak_bytes = s->peak_bytes > out->bytes ? s->peak_bytes : out->bytes;
  out->max_plans = s->opts.max_plans;
  out->max_plan_bytes = s->opts.max_plan_bytes;
  out->hits = s->hits;
  out->misses = s->misses;
  out->evictions = s->evictions;
  out->uncached = s->uncached;
  for (plan_entry_t *e = s->plans; e; e = e->next)
    if (e->refs) out->n_in_use++;
  pthread_mutex_unlock(&s->lock);
}

/* A sequence input's items: an item array when it has items, each a tensor
 * of the sequence's dtype (UNDEFINED: not said) with a valid shape and its
 * data (need_data). */
static toplu_status_t check_items(const toplu__graph_t *g, const char *name, const toplu_tensor_t *x, int need_data,
                                  toplu_error_t *err) {
  if (x->ndim != 1 || x->dims[0] < 0)
    return toplu__errorf(err, TOPLU_ERR_INVALID_ARGUMENT, "%s: input '%s' is a sequence with rank %d; a sequence has "
                        "rank 1 and its item count in dims[0]", g->path, name, x->ndim);
  if (x->dims[0] > 0 && !x->data)
    return toplu__errorf(err, TOPLU_ERR_INVALID_ARGUMENT, "%s: input '%s' is a sequence of %lld items with no item "
                        "array (data NULL)", g->path, name, (long long)x->dims[0]);
  if (x->dims[0] > TOPLU_CONTROL_MAX_ITERS) return TOPLU_OK; /* refused by the plan, naming the limit */
  char a[160];
  for (int64_t k = 0; k < x->dims[0]; k++) {
    const toplu_tensor_t *it = &((const toplu_tensor_t *)x->data)[k];
    if (it->kind != TOPLU_KIND_TENSOR)
      return toplu__errorf(err, TOPLU_ERR_UNSUPPORTED, "%s: input '%s' item %lld is a %s; toplu takes sequences of "
                          "tensors", g->path, name, (long long)k, toplu_kind_name(it->kind));
    if (x->dtype != TOPLU_DTYPE_UNDEFINED && it->dtype != x->dtype)
      return toplu__errorf(err, TOPLU_ERR_SHAPE, "%s: input '%s' is a sequence of %s, but item %lld is %s", g->path,
                          name, toplu_dtype_name(x->dtype), (long long)k, toplu_dtype_name(it->dtype));
    if (it->ndim < 0 || it->ndim > TOPLU_MAX_DIMS)
      return toplu__errorf(err, TOPLU_ERR_SHAPE, "%s: input '%s' item %lld has rank %d", g->path, name, (long long)k,
                          it->ndim);
    for (int d = 0; d < it->ndim; d++)
      if (it->dims[d] < 0)
        return toplu__errorf(err, TOPLU_ERR_SHAPE, "%s: input '%s' item %lld has shape %s", g->path, name,
                            (long long)k, toplu_shape_format(it->ndim, it->dims, a, sizeof a));
    if (toplu_shape_numel_limited(it->ndim, it->dims, TOPLU_PLAN_MAX_ELEMENTS) == UINT64_MAX)
      return toplu__errorf(err, TOPLU_ERR_OUT_OF_MEMORY, "%s: input '%s' item %lld would have shape %s: more than "
                          "2^40 elements", g->path, name, (long long)k, toplu_shape_format(it->ndim, it->dims, a, sizeof a));
    if (need_data && !it->data && toplu_tensor_nbytes(it))
      return toplu__errorf(err, TOPLU_ERR_INVALID_ARGUMENT, "%s: input '%s' item %lld has no data", g->path, name,
                          (long long)k);
  }
  return TOPLU_OK;
}

static toplu_status_t check_inputs(const toplu_session_t *s, const toplu_tensor_t *inputs, int n, int need_data,
                                   toplu_error_t *err) {
  const toplu__graph_t *g = s->model->graph;
  if (!inputs && n) return toplu__errorf(err, TOPLU_ERR_INVALID_ARGUMENT, "inputs is NULL");
  if (n != g->n_inputs)
    return toplu__errorf(err, TOPLU_ERR_INVALID_ARGUMENT, "%s: %d inputs given, the model takes %d", g->path, n,
                        g->n_inputs);
  for (int i = 0; i < n; i++) {
    if (inputs[i].kind == TOPLU_KIND_SEQUENCE) { /* kinds against the model: the plan; the items here */
      const toplu__value_t *v = &g->values[g->inputs[i]];
      toplu_kind_t want = v->kind == TOPLU_KIND_OPTIONAL ? v->elem_kind : v->kind;
      if (want != TOPLU_KIND_SEQUENCE) /* before reading data as an item array: it holds the caller's tensor data */
        return toplu__errorf(err, TOPLU_ERR_SHAPE, "%s: input '%s' is a %s, but a sequence was given", g->path, v->name,
                            toplu_kind_name(want));
      toplu_status_t st = check_items(g, g->values[g->inputs[i]].name, &inputs[i], need_data, err);
      if (st) return st;
      continue;
    }
    if (inputs[i].kind != TOPLU_KIND_TENSOR) continue;
    if (inputs[i].device != TOPLU_DEVICE_HOST) /* toplu/tensor.h: every tensor crossing the API is in host memory */
      return toplu__errorf(err, TOPLU_ERR_INVALID_ARGUMENT, "%s: input '%s' has device %d: inputs must be in host memory "
                          "(TOPLU_DEVICE_HOST, 0)", g->path, g->values[g->inputs[i]].name, inputs[i].device);
    if (inputs[i].ndim < 0 || inputs[i].ndim > TOPLU_MAX_DIMS)
      return toplu__errorf(err, TOPLU_ERR_SHAPE, "%s: input '%s' has rank %d", g->path,
                          g->values[g->inputs[i]].name, inputs[i].ndim);
    /* bounded before any size arithmetic (the per-sample path scales batch-1 sizes by dim 0) */
    if (toplu_shape_numel_limited(inputs[i].ndim, inputs[i].dims, TOPLU_PLAN_MAX_ELEMENTS) == UINT64_MAX) {
      char a[160];
      return toplu__errorf(err, TOPLU_ERR_OUT_OF_MEMORY, "%s: input '%s' would have shape %s: more than 2^40 elements",
                          g->path, g->values[g->inputs[i]].name,
                          toplu_shape_format(inputs[i].ndim, inputs[i].dims, a, sizeof a));
    }
    if (need_data && !inputs[i].data && toplu_tensor_nbytes(&inputs[i]))
      return toplu__errorf(err, TOPLU_ERR_INVALID_ARGUMENT, "%s: input '%s' has no data", g->path,
                          g->values[g->inputs[i]].name);
  }
  return TOPLU_OK;
}

/* ---- fixed-batch models ---- */

/* Ops that combine rows when they work along axis 0: the schema says
 * (toplu__schema_t.mixes_rows). */
static int mixes_rows(const toplu__node_t *n, const toplu__value_table_t *t) {
  return n->schema && n->schema->mixes_rows && n->schema->mixes_rows(n, t);
}

/* 1 when every step that reads plan value pv reads it where its op's schema
 * wants a plan-time constant (Reshape's shape, Slice's starts, Resize's
 * sizes...): such a value only decides shapes, which the caller checks. */
static int read_as_shape(const toplu__plan_t *p, int pv) {
  for (int i = 0; i < p->n_steps; i++) {
    const toplu__step_t *st = &p->steps[i];
    const toplu__node_t *n = st->node;
    int n_in = st->aux ? 1 : n->n_inputs;
    for (int j = 0; j < n_in; j++)
      if (st->in_pv[j] == pv && (st->aux || !n->schema || j >= 32 || !(n->schema->const_inputs >> j & 1u)))
        return 0;
  }
  return 1;
}

/* 1 when a (a plan of n rows) and b (of k rows) hold the rows in dim 0: n and k there, the other dims equal. */
static int rows_at0(const toplu_tensor_t *a, const toplu_tensor_t *b, int64_t n, int64_t k) {
  if (a->ndim != b->ndim || a->ndim < 1 || a->dims[0] != n || b->dims[0] != k) return 0;
  for (int d = 1; d < a->ndim; d++)
    if (a->dims[d] != b->dims[d]) return 0;
  return 1;
}

/* Plan pn (n rows) keeps rows apart when every non-constant tensor has the
 * shape it has in plan p1 (k rows: batch 1 for a fixed-batch model's batched
 * plan, a slice for choose_threads) with dim 0 scaled, every constant the run reads
 * is the same at both sizes (a Size or Shape folded into a value the model
 * computes with depends on the batch), and no op works along dim 0. */
static int rows_independent(const toplu__plan_t *pn, const toplu__plan_t *p1, int64_t n, int64_t k) {
  const toplu__graph_t *g = pn->graph;
  for (int v = 0; v < g->n_values; v++) {
    const toplu_tensor_t *a = &pn->table->vals[v], *b = &p1->table->vals[v];
    int pv = pn->pv_of_value[v];
    if (pv < 0 || pn->pvals[pv].store.kind == TOPLU_STORE_NONE) continue;
    if (pn->pvals[pv].store.kind == TOPLU_STORE_CONST) {
      if (!a->data || !b->data || a->dtype != b->dtype || a->ndim != b->ndim) return 0;
      for (int d = 0; d < a->ndim; d++)
        if (a->dims[d] != b->dims[d]) return 0;
      if (!toplu__tensor_data_equal(a, b) && !read_as_shape(pn, pv)) /* strings by content */
        return 0;
      continue;
    }
    if (!rows_at0(a, b, n, k)) return 0;
  }
  for (int i = 0; i < pn->n_steps; i++)
    if (!pn->steps[i].aux && mixes_rows(pn->steps[i].node, pn->table)) return 0;
  return 1;
}

typedef enum { MODE_DIRECT, MODE_BATCHED, MODE_PER_SAMPLE } run_mode_t;

static toplu_status_t choose_mode(toplu_session_t *s, const toplu_tensor_t *inputs, int n, run_mode_t *mode,
                                  plan_entry_t **entry, toplu_error_t *err) {
  const toplu_model_t *m = s->model;
  *mode = MODE_DIRECT;
  int64_t fb = m->fixed_rows; /* the dim 0 the file fixes (1: batch 1) */
  if (!fb || !s->opts.batch_override || n < 1 || inputs[0].ndim < 1 || inputs[0].dims[0] == fb ||
      toplu__graph_has_lists(m->graph))
    return get_plan(s, m->graph, inputs, n, entry, err);
  int64_t b = inputs[0].dims[0];
  for (int i = 0; i < n; i++)
    if (inputs[i].ndim < 1 || inputs[i].dims[0] != b)
      return toplu__errorf(err, TOPLU_ERR_SHAPE,
                          "%s: the model fixes batch %lld; running it at batch %lld needs dim 0 of every input to be %lld, but '%s' has %lld",
                          m->path, (long long)fb, (long long)b, (long long)b, m->inputs[i].name,
                          (long long)(inputs[i].ndim ? inputs[i].dims[0] : 0));
  toplu_error_t plan_err; /* why the freed graph could not be planned at b (for b > 1's refusal) */
  toplu_error_clear(&plan_err);
  if (m->batched) {
    plan_entry_t *e = NULL;
    toplu_error_t e2;
    toplu_error_clear(&e2);
    if (get_plan(s, m->batched, inputs, n, &e, &e2) == TOPLU_OK) {
      if (!__atomic_load_n(&e->rows_checked, __ATOMIC_ACQUIRE)) {
        /* against a plan of k rows: 1, or 2 when b is 1 (a model fixed at b > 1 given one row; two plans of
         * one row would show nothing) */
        int64_t k = b == 1 ? 2 : 1;
        toplu_tensor_t one[64];
        for (int i = 0; i < n && i < 64; i++) {
          one[i] = inputs[i];
          one[i].dims[0] = k;
          if (k > b) one[i].data = NULL; /* shapes only: the caller's data holds b rows */
        }
        plan_entry_t *e1 = NULL;
        int ok = 0;
        if (n <= 64 && get_plan(s, m->batched, one, n, &e1, &e2) == TOPLU_OK) {
          ok = rows_independent(e->plan, e1->plan, b, k);
          put_plan_unused(s, e1);
        } else if (n <= 64 && e2.status == TOPLU_ERR_OUT_OF_MEMORY) {
          /* the check's own plan did not fit: nothing is known of the rows, and the run fails as a plan
           * over the limit does (before 2026-12-06 the check counted as failed for good, and the note said
           * the ops could not be shown to keep rows apart) */
          put_plan(s, e);
          return toplu__errorf(err, TOPLU_ERR_OUT_OF_MEMORY, "%s", e2.message);
        }
        __atomic_store_n(&e->rows_checked, ok ? 1 : -1, __ATOMIC_RELEASE); /* two first runs may both check */
      }
      if (__atomic_load_n(&e->rows_checked, __ATOMIC_ACQUIRE) > 0) {
        *mode = MODE_BATCHED;
        *entry = e;
        return TOPLU_OK;
      }
      put_plan(s, e);
    } else {
      plan_err = e2;
    }
  }
  if (fb > 1) /* no row-by-row fallback: the model runs only at its own dim 0 */
    return toplu__errorf(err, TOPLU_ERR_SHAPE,
                        "%s: the model fixes dim 0 of its inputs to %lld (a static batch); toplu runs it at %lld rows only "
                        "where its plans show that no op mixes the rows of dim 0, which %s%s; give it %lld rows at a "
                        "time",
                        m->path, (long long)fb, (long long)b,
                        plan_err.message[0] ? "a plan with dim 0 freed could not show: " : "they do not show",
                        plan_err.message, (long long)fb);
  *mode = MODE_PER_SAMPLE;
  toplu_tensor_t one[64];
  if (n > 64)
    return toplu__errorf(err, TOPLU_ERR_UNSUPPORTED,
                         "%s: the model fixes batch 1 and has %d inputs; running it row by row at batch %lld takes "
                         "at most 64", m->path, n, (long long)b);
  pthread_mutex_lock(&s->lock);
  int first_note = !s->warned_batch;
  s->warned_batch = 1;
  pthread_mutex_unlock(&s->lock);
  if (first_note && plan_err.message[0])
    /* the plan at b failed (over the allocator's limit, say): say so, not that the ops mix rows */
    toplu__logf(s->opts.log, s->opts.log_user, TOPLU_LOG_NOTE,
                "%s: the model fixes batch 1 and its plan at batch %lld with dim 0 freed failed (%s: %s), so it runs "
                "one row at a time (a plan of batch 1, once per row)",
                m->path, (long long)b, toplu_status_name(plan_err.status), plan_err.message);
  else if (first_note)
    toplu__logf(s->opts.log, s->opts.log_user, TOPLU_LOG_NOTE,
                "%s: the model fixes batch 1 and toplu cannot show that its ops keep rows apart at batch %lld, so it "
                "runs one row at a time (a plan of batch 1, once per row)",
                m->path, (long long)b);
  for (int i = 0; i < n; i++) {
    one[i] = inputs[i];
    one[i].dims[0] = 1;
  }
  return get_plan(s, m->graph, one, n, entry, err);
}

/* Rows of inputs[i] from row r0, `rows` of them (dim 0 is the batch). */
static toplu_tensor_t slice_rows(const toplu_tensor_t *x, int64_t r0, int64_t rows) {
  toplu_tensor_t t = *x;
  size_t row_bytes = x->dims[0] > 0 ? toplu_tensor_nbytes(x) / (size_t)x->dims[0] : 0;
  t.dims[0] = rows;
  if (x->data) t.data = (char *)x->data + (size_t)r0 * row_bytes;
  return t;
}

/* The caller's outputs for a run of `rows` rows made of runs of plan p on
 * slices of them: p's output shapes with dim 0 = rows, allocated when data is
 * NULL (bit j of *allocated set; outputs 0..31 tracked), else given those
 * shapes.  On failure nothing stays allocated. */
static toplu_status_t row_outputs(const toplu__plan_t *p, int64_t rows, toplu_tensor_t *outputs, int n_out,
                                  uint32_t *allocated, toplu_error_t *err) {
  const toplu__graph_t *g = p->graph;
  *allocated = 0;
  for (int j = 0; j < n_out; j++) {
    const toplu_tensor_t *x = &p->table->vals[g->outputs[j]];
    toplu_tensor_t *o = &outputs[j];
    int64_t dims[TOPLU_MAX_DIMS];
    memcpy(dims, x->dims, sizeof dims);
    dims[0] = rows;
    if (!o->data) {
      if (toplu_tensor_alloc(o, x->dtype, x->ndim, dims)) {
        for (int i = 0; i < j && i < 32; i++)
          if (*allocated >> i & 1u) toplu_tensor_free(&outputs[i]);
        *allocated = 0;
        return toplu__errorf(err, TOPLU_ERR_OUT_OF_MEMORY, "%s: cannot allocate output '%s'", g->path,
                            g->values[g->outputs[j]].name);
      }
      if (j < 32) *allocated |= 1u << j;
    } else {
      o->dtype = x->dtype;
      o->ndim = x->ndim;
      memcpy(o->dims, dims, sizeof dims);
    }
  }
  return TOPLU_OK;
}

static toplu_status_t run_per_sample(toplu__plan_t *p, const toplu_tensor_t *inputs, int n,
                                     toplu_tensor_t *outputs, int n_out, const toplu_run_options_t *ro,
                                     toplu_error_t *err) {
  int64_t b = inputs[0].dims[0];
  const toplu__graph_t *g = p->graph;
  toplu_tensor_t one_in[64], one_out[64];
  if (n_out > 64)
    return toplu__errorf(err, TOPLU_ERR_UNSUPPORTED,
                         "%s: the model fixes batch 1 and has %d outputs; running it row by row takes at most 64",
                         g->path, n_out);
  /* Outputs: batch-1 shapes with dim 0 = b. */
  for (int j = 0; j < n_out; j++) {
    const toplu_tensor_t *x = &p->table->vals[g->outputs[j]];
    if (x->dtype == TOPLU_DTYPE_STRING) /* string outputs are allocated whole by toplu__plan_run */
      return toplu__errorf(err, TOPLU_ERR_UNSUPPORTED, "%s: output '%s' is a string tensor, so batch %lld cannot be run row by row",
                          g->path, g->values[g->outputs[j]].name, (long long)b);
    if (x->ndim < 1 || x->dims[0] != 1)
      return toplu__errorf(err, TOPLU_ERR_UNSUPPORTED,
                          "%s: output '%s' has shape without a leading batch dim of 1, so batch %lld cannot be run row by row",
                          g->path, g->values[g->outputs[j]].name, (long long)b);
  }
  uint32_t allocated;
  toplu_status_t st0 = row_outputs(p, b, outputs, n_out, &allocated, err);
  if (st0) return st0;
  for (int64_t r = 0; r < b; r++) {
    for (int i = 0; i < n; i++) one_in[i] = slice_rows(&inputs[i], r, 1);
    for (int j = 0; j < n_out; j++) one_out[j] = slice_rows(&outputs[j], r, 1);
    toplu_status_t st = toplu__plan_run(p, one_in, one_out, n_out, ro, err);
    if (st) return st;
  }
  return TOPLU_OK;
}

/* The plan (and how it runs) for these input shapes, for the calls that
 * describe a plan without running it; on failure the session's error is set.
 * Release with put_plan. */
static toplu_status_t describe_plan(toplu_session_t *s, const toplu_tensor_t *inputs, int n, run_mode_t *mode,
                                    plan_entry_t **e) {
  toplu_error_t err;
  toplu_error_clear(&err);
  if (check_inputs(s, inputs, n, 0, &err) || choose_mode(s, inputs, n, mode, e, &err)) return fail(s, &err);
  return TOPLU_OK;
}

void toplu_run_options_init(toplu_run_options_t *ro) {
  if (ro) memset(ro, 0, sizeof *ro);
}

void toplu_run_cancel(int *flag) {
  if (flag) __atomic_store_n(flag, 1, __ATOMIC_RELEASE);
}

/* ---- threads chosen by measurement (toplu_session_options_t.choose_threads) ---- */

/* The session's pool for split runs, made on first use (NULL: none could be
 * made, or TOPLU_SPLIT_THREADS=openmp asks for the OpenMP team instead, for
 * A/B measurement). */
static toplu__pool_t *session_pool(toplu_session_t *s) {
  toplu__pool_t *p = __atomic_load_n(&s->pool, __ATOMIC_ACQUIRE);
  if (p || __atomic_load_n(&s->pool_failed, __ATOMIC_RELAXED)) return p;
  pthread_mutex_lock(&s->lock);
  if (!s->pool && !s->pool_failed) {
    const char *e = getenv("TOPLU_SPLIT_THREADS");
    p = e && !strcmp(e, "openmp") ? NULL : toplu__pool_create(s->threads - 1, -1);
    if (p) __atomic_store_n(&s->pool, p, __ATOMIC_RELEASE);
    else __atomic_store_n(&s->pool_failed, 1, __ATOMIC_RELAXED);
  }
  p = s->pool;
  pthread_mutex_unlock(&s->lock);
  return p;
}

/* One run of a split plan: what each slice (task) needs. */
typedef struct {
  toplu__plan_t *ps;
  const toplu_tensor_t *inputs;
  toplu_tensor_t *outputs;
  int n, n_out;
  int64_t per;
  const toplu_run_options_t *ro;
  int stop;
  toplu_status_t first;
  toplu_error_t *err;
  pthread_mutex_t fail; /* first, *err */
} split_job_t;

static void split_task(void *arg, int i) {
  split_job_t *j = arg;
  if (__atomic_load_n(&j->stop, __ATOMIC_RELAXED)) return;
  toplu_tensor_t in_s[TOPLU_SPLIT_MAX_IO], out_s[TOPLU_SPLIT_MAX_IO];
  toplu_error_t e2;
  for (int x = 0; x < j->n; x++) in_s[x] = slice_rows(&j->inputs[x], (int64_t)i * j->per, j->per);
  for (int x = 0; x < j->n_out; x++) out_s[x] = slice_rows(&j->outputs[x], (int64_t)i * j->per, j->per);
  toplu_error_clear(&e2);
  toplu_status_t st = toplu__plan_run(j->ps, in_s, out_s, j->n_out, j->ro, &e2);
  if (st) {
    pthread_mutex_lock(&j->fail);
    if (!j->first) {
      j->first = st;
      *j->err = e2;
    }
    pthread_mutex_unlock(&j->fail);
    __atomic_store_n(&j->stop, 1, __ATOMIC_RELAXED);
  }
}

/*
 * One run as k slices of the batch on plan ps (built for rows/k rows on one
 * thread): the caller's thread and the session's pool (runtime/pool.h) each
 * take the next slice until none is left, so a thread the OS preempts holds
 * the others up only for the slice it has, and a thread that has not been
 * scheduled yet holds up nothing.  When the pool is busy with another
 * caller's run (or there is none), an OpenMP team of up to `threads` takes
 * the slices instead.  Outputs are allocated whole (data NULL) or written in
 * place, each slice into its rows.  A failed slice stops the rest; its error
 * is returned.  Thread-safe as toplu__plan_run (each concurrent run of ps
 * has its own exec context).
 */
static toplu_status_t run_split(toplu__pool_t *pool, toplu__plan_t *ps, int k, int threads,
                                const toplu_tensor_t *inputs, int n, toplu_tensor_t *outputs, int n_out,
                                const toplu_run_options_t *ro, toplu_error_t *err) {
  int64_t rows = inputs[0].dims[0];
  uint32_t allocated; /* outputs allocated here, freed on failure */
  toplu_status_t st0 = row_outputs(ps, rows, outputs, n_out, &allocated, err);
  if (st0) return st0;
  for (int j = 0; j < n_out; j++) outputs[j].kind = TOPLU_KIND_TENSOR;
  split_job_t job = {.ps = ps, .inputs = inputs, .outputs = outputs, .n = n, .n_out = n_out, .per = rows / k,
                     .ro = ro, .err = err};
  pthread_mutex_init(&job.fail, NULL);
  if (!pool || toplu__pool_run(pool, k, split_task, &job)) {
    int next = 0, nt = threads < k ? threads : k;
#pragma omp parallel num_threads(nt)
    for (int i; (i = __atomic_fetch_add(&next, 1, __ATOMIC_RELAXED)) < k;) split_task(&job, i);
  }
  pthread_mutex_destroy(&job.fail);
  if (job.first)
    for (int j = 0; j < n_out; j++)
      if (allocated >> j & 1u) toplu_tensor_free(&outputs[j]);
  return job.first;
}

/* The slices choose_threads may split a run of these inputs into: the
 * smallest divisor of the batch that is at least `threads` and at most 4 x
 * threads (0: none: batch 1, too few rows, a prime batch past 4 x threads,
 * inputs or outputs that are not plain tensors with the batch in dim 0). */
static int split_count(const toplu__plan_t *p, const toplu_tensor_t *inputs, int n, int threads) {
  const toplu__graph_t *g = p->graph;
  if (threads < 2 || n < 1 || n > TOPLU_SPLIT_MAX_IO || g->n_outputs > TOPLU_SPLIT_MAX_IO ||
      toplu__graph_has_lists(g))
    return 0;
  int64_t rows = inputs[0].ndim >= 1 ? inputs[0].dims[0] : 0;
  for (int i = 0; i < n; i++)
    if (inputs[i].kind != TOPLU_KIND_TENSOR || inputs[i].ndim < 1 || inputs[i].dims[0] != rows) return 0;
  for (int j = 0; j < g->n_outputs; j++) {
    const toplu_tensor_t *x = &p->table->vals[g->outputs[j]];
    if (x->dtype == TOPLU_DTYPE_STRING || x->ndim < 1 || x->dims[0] != rows) return 0;
  }
  for (int64_t k = threads; k <= 4 * (int64_t)threads && k <= rows; k++)
    if (rows % k == 0) return (int)k;
  return 0;
}

/* Lower quartile of v[0..n) (reorders v): the (n-1)/4-th smallest. */
static double lower_quartile(double *v, int n) {
  for (int i = 1; i < n; i++)
    for (int j = i; j > 0 && v[j] < v[j - 1]; j--) {
      double t = v[j];
      v[j] = v[j - 1];
      v[j - 1] = t;
    }
  return v[(n - 1) / 4];
}

/* Seconds one run takes on these inputs (p on the whole batch, or k slices
 * of split plan p); < 0 when it failed or was cancelled. */
static double time_run(toplu_session_t *s, toplu__plan_t *p, int k, int threads, const toplu_tensor_t *inputs, int n_inputs,
                       toplu_tensor_t *outputs, int n_outputs, const toplu_run_options_t *ro) {
  toplu_error_t err;
  int64_t t0 = toplu_monotonic_ns();
  toplu_status_t st = k ? run_split(session_pool(s), p, k, threads, inputs, n_inputs, outputs, n_outputs, ro, &err)
                        : toplu__plan_run(p, inputs, outputs, n_outputs, ro, &err);
  return st ? -1 : (double)(toplu_monotonic_ns() - t0) / 1e9;
}

/* Waits (up to 50 ms) until this process's other threads have stopped
 * using CPU: after a run of the whole batch, GNU OpenMP's team spins for
 * GOMP_SPINCOUNT turns (300,000 by default: about 6 ms of a core on Zen 5)
 * before it sleeps, and a split run timed during that spin shares a core with
 * it, which it never does once chosen.  Settled when a 1 ms sleep costs the
 * process under 0.1 ms of CPU. */
static void settle_threads(void) {
  for (int i = 0; i < 50; i++) {
    struct timespec c0, c1, d = {0, 1000000};
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &c0);
    nanosleep(&d, NULL);
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &c1);
    if ((c1.tv_sec - c0.tv_sec) * 1000000000L + (c1.tv_nsec - c0.tv_nsec) < 100000) return;
  }
}

/* A many-thread plan kept on the whole batch is timed again when its run
 * time changes: when RECHOOSE_RUNS more of its runs have taken over
 * RECHOOSE_FACTOR x the time it took when it was kept than have not, or
 * under 1 / RECHOOSE_FACTOR of it (leaky counts), at least RECHOOSE_MIN_NS
 * after the last choice.  Faster: it was kept while other work slowed the
 * timing, and the alternative may win now.  Slower: other
 * processes that start sharing the cores after the choice (a load generator,
 * another server, a batch job) preempt one thread of the team at each of
 * the plan's barriers: PaddleOCR cls at batch 8 on 2 cores ran 2.8 ms a run
 * on the whole batch idle, 16-375 ms beside one busy process, where the
 * split ran 3.0 ms (docs/performance.md, "Threads chosen again when the
 * cores get shared"). */

#define CHOOSE_ROUNDS 3
#define CHOOSE_TRIES 3
#define CHOOSE_PER_ROUND 3
#define CHOOSE_WARM_S 0.03
#define CHOOSE_SWITCH_S 0.01
/* A long run's timing spread over the plan's next runs (explore_run): step 1
 * the alternative's warm run, then CHOOSE_ROUNDS - 1 rounds of one timed run
 * a side, alternating which side goes first. */
#define EXPLORE_LAST (1 + 2 * (CHOOSE_ROUNDS - 1))
/* Steps that may come to nothing (another caller overlapped, a run failed on
 * its input) before the timing is given up as the in-call one is. */
#define EXPLORE_MAX_SKIPPED (2 * EXPLORE_LAST)

/* The side a step of a long run's timing runs: 1 the alternative. */
static int explore_alt(int step) {
  if (step <= 1) return 1;
  int i = step - 2;
  return (i % 2 + i / 2) % 2;
}

/* The end of a timing (choose_threads, explore_run): keeps the faster side
 * (tt: the plan's timed runs, ta: the alternative's; ok 0: the timing came to
 * nothing), or opens the timing again later.  Takes alt (freed unless kept).
 * spread: the timing took that many of the plan's runs after the first
 * (explore_run; 0: timed at once).  The caller is e's only holder when ok. */
static void commit_choice(toplu_session_t *s, plan_entry_t *e, toplu__plan_t *alt, int k, int ok, double *tt, int nt,
                          double *ta, int na, double first, int ran, int spread, const toplu_tensor_t *inputs) {
  toplu__plan_t *pt = e->plan;
  int T = s->threads;
  double limit = (s->opts.choose_threads_max_ms > 0 ? s->opts.choose_threads_max_ms : 1000) / 1e3;
  if (ok && (nt < 1 || na < 1)) ok = 0;
  /* Compared by lower quartiles: a run that finds the other threads asleep
   * (their cores slowed while they waited; 2.5x on MobileNetV2 at batch 1
   * right after the one-thread side ran) is what a caller running shapes
   * back to back does not see once settled, and it hits the many-thread
   * side only. */
  double mt = ok ? lower_quartile(tt, nt) : 0, ma = ok ? lower_quartile(ta, na) : 0;
  /* The split against the whole batch is compared by means instead: on
   * shared cores the whole batch's runs have a long tail (a thread preempted
   * at one of its barriers stalls the other), which its lower quartile does
   * not see and its throughput does.  With two busy loops beside PaddleOCR
   * cls at batch 8, the whole batch's lower quartile was 2.3-3.4 ms against
   * the split's 3.4-6.9, while its throughput was 350-1,080 inferences/s
   * against the split's 1,600-2,300 (docs/performance.md, "toplu's own
   * threads for the split"). */
  if (ok && k) {
    mt = ma = 0;
    for (int i = 0; i < nt; i++) mt += tt[i] / nt;
    for (int i = 0; i < na; i++) ma += ta[i] / na;
  }
  /* The split has no barrier between the threads inside a run, so it keeps
   * more of its speed when other work shares the cores: kept unless 3%
   * slower.  One thread on the whole batch must be 5% faster. */
  int take = ok && (k ? ma <= 1.03 * mt : ma < 0.95 * mt);
  const char *force = getenv("TOPLU_CHOOSE_THREADS"); /* "whole" or "alt": A/B measurement (bench/README.md) */
  if (ok && force && !strcmp(force, "whole")) take = 0;
  if (ok && force && !strcmp(force, "alt")) take = 1;
  /* A timing that came to nothing is tried again after as many runs
   * (CHOOSE_TRIES in all): a run failed or was cancelled (a client's
   * timeout), or other callers took the plan while it was timed, which
   * also disturbs the times, and a plan in use is not swapped. */
  int again = !ran && (first < 0 || (first <= limit && !ok));
  pthread_mutex_lock(&s->lock);
  if (ok && e->refs != 1) again = 1;
  if (again && ++e->choose_tries < CHOOSE_TRIES) {
    e->runs = 0;
    e->choosing = 0;
    pthread_mutex_unlock(&s->lock);
    toplu__plan_destroy(alt);
    return;
  }
  toplu__plan_t *retire = NULL;
  if (take && e->refs == 1) {
    if (k) {
      e->split = alt;
      e->n_split = k;
      alt = NULL;
    } else { /* the whole-batch plan is kept, its arenas given back: toplu_session_steps' strings point into it
              * (it was destroyed, and they dangled while the entry stayed cached: a fresh user's finding of
              * 2026-12-06, ASan) */
      e->plan = alt;
      alt = e->retired; /* (a second swap: the first retired plan's strings are as old as any caller's) */
      e->retired = retire = pt;
    }
  } else {
    take = 0;
  }
  __atomic_store_n(&e->threads_chosen, 1, __ATOMIC_RELAXED);
  e->choosing = 0;
  e->slow_runs = 0;
  e->fast_runs = 0;
  e->chosen_at = toplu_monotonic_ns();
  /* the whole batch on many threads kept: its time, for the re-choice */
  __atomic_store_n(&e->kept_ns,
                   !take && !e->split && e->plan->threads > 1 && first >= 0 ? (int64_t)((ok ? mt : first) * 1e9) : 0,
                   __ATOMIC_RELAXED);
  if (e->kept_ns > 0 && (e->base_ns == 0 || e->kept_ns < e->base_ns)) e->base_ns = e->kept_ns;
  int rechosen = e->rechosen;
  pthread_mutex_unlock(&s->lock);
  toplu__plan_destroy(alt);
  if (take && k) toplu__plan_trim_execs(pt, 0); /* its arena is not used any more */
  if (retire) toplu__plan_trim_execs(retire, 0);
  if (ok && !again) {
    char shape[160], a[96], w[96];
    toplu_shape_format(inputs[0].ndim, inputs[0].dims, shape, sizeof shape);
    if (k)
      snprintf(a, sizeof a, "%d slices of %lld rows at once, one thread each", k,
               (long long)(inputs[0].dims[0] / k));
    else
      snprintf(a, sizeof a, "1 thread");
    snprintf(w, sizeof w, "%d threads on the whole batch", T);
    toplu__logf(s->opts.log, s->opts.log_user, TOPLU_LOG_NOTE,
                "%s: input %s: chose %s (%.3f ms a run) over %s (%.3f ms) (choose_threads%s%s)", s->model->path, shape,
                take ? a : w, (take ? ma : mt) * 1e3, take ? w : a, (take ? mt : ma) * 1e3,
                rechosen == 1   ? "; timed again: its runs had slowed down"
                : rechosen == 2 ? "; timed again: its runs had sped up"
                                : "",
                spread ? "; timed on the plan's own runs, one side a run" : "");
  }
}

/* On a plan's third run: time e's plan against the alternative (see
 * choose_threads in toplu/session.h) and keep the faster.  Failures leave
 * e's plan as it is; the caller's run reports its own errors.  Returns 1
 * when the caller's outputs already hold a run of e's plan (a plan too slow
 * to time costs no second run; a long run's timing goes on over the next
 * runs, explore_run), else 0: the caller runs as chosen. */
static int choose_threads(toplu_session_t *s, plan_entry_t *e, const toplu_tensor_t *inputs, int n_inputs,
                          toplu_tensor_t *outputs, int n_outputs, const toplu_run_options_t *ro) {
  pthread_mutex_lock(&s->lock);
  /* a caller with few runs left (runs_left) does not start a timing, nor count towards the third run */
  int few = ro && ro->runs_left > 0 && ro->runs_left < TOPLU_CHOOSE_MIN_RUNS;
  int go = !__atomic_load_n(&e->threads_chosen, __ATOMIC_RELAXED) && !e->choosing && e->refs == 1 && !few &&
           ++e->runs >= (s->opts.choose_threads == 1 ? 1 : 3);
  if (go) e->choosing = 1;
  pthread_mutex_unlock(&s->lock);
  if (!go) return 0;
  toplu__plan_t *pt = e->plan, *alt = NULL;
  int T = s->threads;
  double limit = (s->opts.choose_threads_max_ms > 0 ? s->opts.choose_threads_max_ms : 1000) / 1e3;
  double first = time_run(s, pt, 0, T, inputs, n_inputs, outputs, n_outputs, ro);
  /* Timed when the first run is within the limit, or when this plan was kept
   * before at a time within it (a choice reopened by slow runs: the runs are
   * slow because other work shares the cores, the case the alternatives are
   * for). */
  double base = (double)e->base_ns / 1e9;
  int ok = first >= 0 && (first <= limit || (base > 0 && base <= limit));
  int ran = first >= 0 && !ok; /* the last run was e's plan's, and it stays */
  int k = ok ? split_count(pt, inputs, n_inputs, T) : 0;
  if (ok) {
    /* A second plan of these shapes (the alternative) would take about this plan's bytes again beside it: not
     * timed when that is more than half of the memory available now (MemAvailable, or the cgroup limit less its
     * usage). In a 400 MiB container, ResNet-18's batch job at 16 rows was killed by the kernel while timing it (a
     * fresh user's finding of 2026-12-06). */
    char how[256];
    uint64_t avail = toplu__memory_available(how, sizeof how);
    size_t need = toplu__plan_own_bytes(pt);
    if (avail > 0 && need > avail / 2) {
      char shape[160];
      toplu_shape_format(n_inputs > 0 ? inputs[0].ndim : 0, n_inputs > 0 ? inputs[0].dims : NULL, shape, sizeof shape);
      toplu__logf(s->opts.log, s->opts.log_user, TOPLU_LOG_NOTE,
                  "%s: input %s: threads not timed (choose_threads): a second plan of about %zu bytes would take more "
                  "than half of the %llu bytes of memory available (%s); %d threads on the whole batch",
                  s->model->path, shape, need, (unsigned long long)avail, how, T);
      ok = 0;
      k = 0;
      ran = first >= 0; /* the last run was e's plan's, and it stays */
    }
  }
  toplu__plan_options_t po = plan_options(s, 1);
  toplu_error_t err;
  if (k) { /* one thread on a slice of rows/k rows, the slices at once */
    toplu_tensor_t sl[TOPLU_SPLIT_MAX_IO];
    for (int i = 0; i < n_inputs; i++) sl[i] = slice_rows(&inputs[i], 0, inputs[0].dims[0] / k);
    if (toplu__plan_build(e->graph, sl, n_inputs, &po, &alt, &err) != TOPLU_OK ||
        !rows_independent(pt, alt, inputs[0].dims[0], inputs[0].dims[0] / k)) {
      toplu__plan_destroy(alt);
      alt = NULL;
      k = 0;
    }
  }
  if (ok && !alt && toplu__plan_build(e->graph, inputs, n_inputs, &po, &alt, &err) != TOPLU_OK) ok = 0;
  /* A long run (over CHOOSE_LONG_S, s->choose_long) is not run again on these inputs: each
   * of the plan's next runs is one step of the timing, on its caller's own
   * inputs (explore_run), so the timing costs no runs beyond the job's own
   * (ResNet-50 at batch 8 on 2 cores, 310 ms a run: five extra runs, 1.6 s
   * of a 64-row job's 4.3 s, until 2026-12-06). */
  int spread = ok && s->choose_long >= 0 && first > s->choose_long;
  if (spread && s->opts.max_plan_bytes) { /* held between runs, the alternative counts: within the bound, or at once */
    pthread_mutex_lock(&s->lock);
    spread = cache_bytes(s) + toplu__plan_own_bytes(alt) <= s->opts.max_plan_bytes;
    pthread_mutex_unlock(&s->lock);
  }
  if (spread) {
    pthread_mutex_lock(&s->lock);
    e->cand = alt;
    e->cand_k = k;
    e->ex_step = 1;
    e->ex_busy = 0;
    e->ex_skipped = 0;
    e->ex_first = first;
    e->ex_n[0] = e->ex_n[1] = 0;
    pthread_mutex_unlock(&s->lock);
    return 1;
  }
  /* Warm both sides for about CHOOSE_WARM_S each first: the first runs after
   * a plan build find the other threads asleep and their cores slow (on a
   * VM, the vCPUs descheduled): 2.5x the settled time measured on
   * MobileNetV2 at batch 1. */
  int is_long = first > CHOOSE_LONG_S; /* long runs: one warm run of the new side, two rounds of one run a side */
  for (int side = is_long; ok && side < 2; side++) {
    if (side && k) settle_threads();
    int64_t t0 = toplu_monotonic_ns();
    for (int i = 0; ok && (i < 2 - is_long || (double)(toplu_monotonic_ns() - t0) / 1e9 < CHOOSE_WARM_S); i++)
      ok = time_run(s, side ? alt : pt, side ? k : 0, T, inputs, n_inputs, outputs, n_outputs, ro) >= 0;
  }
  /* Rounds alternate which side goes first, so a slow phase of the machine
   * hits both.  Below CHOOSE_LONG_S a run, each side's first runs in a round are not timed, one run
   * and at least CHOOSE_SWITCH_S (the other side's run moved the caches and
   * left the threads asleep or spinning: PaddleOCR cls at batch 8, Zen 5
   * VM, the split's first 1-3 runs after the whole batch took 2.5 ms
   * against its settled 1.25, one thread doing both slices while the pool's
   * worker was still coming back, and the mean below then kept the whole
   * batch at 2.0 ms in about half the processes; after 10 ms untimed none of
   * 3 processes had a split run over 1.43 ms); a side times up to
   * CHOOSE_PER_ROUND runs or about 20 ms a round, at least one. */
  double tt[CHOOSE_ROUNDS * CHOOSE_PER_ROUND], ta[CHOOSE_ROUNDS * CHOOSE_PER_ROUND];
  int nt = 0, na = 0, per = first > 0 && first * CHOOSE_PER_ROUND > 0.02 ? (int)(0.02 / first) : CHOOSE_PER_ROUND;
  if (per < 1) per = 1;
  for (int r = 0; ok && r < CHOOSE_ROUNDS - is_long; r++)
    for (int side = 0; ok && side < 2; side++) {
      int is_alt = (side + r) % 2;
      if (is_alt && k) settle_threads(); /* after the whole batch (in round 2 after the split: one 1 ms check) */
      toplu__plan_t *p = is_alt ? alt : pt;
      int kk = is_alt ? k : 0;
      for (int64_t w0 = toplu_monotonic_ns(), i = 0;
           ok && !is_long && (i < 1 || (double)(toplu_monotonic_ns() - w0) / 1e9 < CHOOSE_SWITCH_S); i++)
        ok = time_run(s, p, kk, T, inputs, n_inputs, outputs, n_outputs, ro) >= 0;
      for (int i = 0; ok && i < per; i++) {
        double t = time_run(s, p, kk, T, inputs, n_inputs, outputs, n_outputs, ro);
        ok = t >= 0;
        if (is_alt) ta[na++] = t;
        else tt[nt++] = t;
      }
    }
  commit_choice(s, e, alt, k, ok, tt, nt, ta, na, first, ran, 0, inputs);
  return ran;
}

/* One step of a long run's timing (choose_threads) on the caller's own
 * inputs: the side EXPLORE_LAST's schedule names runs this call, timed
 * (step 1 untimed), and the last step keeps the faster.  A step that
 * another caller overlaps, or whose run fails, counts for nothing; the
 * alternative failing ends the timing (e's plan stays) and the caller's
 * run is e's plan's.  Returns 1 when this call ran (*st its status, err its
 * error), 0 when no step was due (the caller runs as usual). */
static int explore_run(toplu_session_t *s, plan_entry_t *e, const toplu_tensor_t *inputs, int n_inputs,
                       toplu_tensor_t *outputs, int n_outputs, const toplu_run_options_t *ro, toplu_status_t *st,
                       toplu_error_t *err) {
  pthread_mutex_lock(&s->lock);
  int go = e->cand && !e->ex_busy && e->refs == 1 && !(ro && ro->deadline_ns > 0);
  int step = e->ex_step;
  if (go) e->ex_busy = 1;
  pthread_mutex_unlock(&s->lock);
  if (!go) return 0;
  int is_alt = explore_alt(step), k = e->cand_k, alt_failed = 0;
  if (is_alt && k) settle_threads(); /* the whole batch's team still spinning (settle_threads) */
  int64_t t0 = toplu_monotonic_ns();
  if (is_alt) {
    *st = k ? run_split(session_pool(s), e->cand, k, s->threads, inputs, n_inputs, outputs, n_outputs, ro, err)
            : toplu__plan_run(e->cand, inputs, outputs, n_outputs, ro, err);
    if (*st) {
      alt_failed = 1;
      toplu_error_clear(err);
      *st = toplu__plan_run(e->plan, inputs, outputs, n_outputs, ro, err);
    }
  } else {
    *st = toplu__plan_run(e->plan, inputs, outputs, n_outputs, ro, err);
  }
  double t = (double)(toplu_monotonic_ns() - t0) / 1e9;
  pthread_mutex_lock(&s->lock);
  int counts = !*st && !alt_failed && e->refs == 1;
  if (counts) {
    if (step > 1 && e->ex_n[is_alt] < (int)(sizeof e->ex_t[0] / sizeof e->ex_t[0][0]))
      e->ex_t[is_alt][e->ex_n[is_alt]++] = t;
    e->ex_step++;
  } else {
    e->ex_skipped++;
  }
  int done = alt_failed || e->ex_step > EXPLORE_LAST || e->ex_skipped > EXPLORE_MAX_SKIPPED;
  toplu__plan_t *alt = NULL;
  double tt[4], ta[4], first = e->ex_first;
  int nt = e->ex_n[0], na = e->ex_n[1], ok = !alt_failed && e->ex_step > EXPLORE_LAST && e->refs == 1;
  if (done) {
    alt = e->cand;
    e->cand = NULL;
    memcpy(tt, e->ex_t[0], sizeof tt);
    memcpy(ta, e->ex_t[1], sizeof ta);
  }
  e->ex_busy = 0;
  pthread_mutex_unlock(&s->lock);
  if (done) commit_choice(s, e, alt, k, ok, tt, nt, ta, na, first, 0, 1, inputs);
  return 1;
}

/* After a run [t0, t1) of a kept many-thread whole-batch plan: counts runs
 * far from its kept time, slower or faster (RECHOOSE_*), and reopens the
 * choice; the next run without a deadline that holds the plan alone times
 * it again. */
static void watch_kept(toplu_session_t *s, plan_entry_t *e, int64_t t0, int64_t t1) {
  pthread_mutex_lock(&s->lock);
  if (e->kept_ns > 0 && __atomic_load_n(&e->threads_chosen, __ATOMIC_RELAXED) && s->rechoose >= 0) {
    double t = (double)(t1 - t0), kept = (double)e->kept_ns;
    int slow = t > s->rechoose * kept, fast = !slow && t * s->rechoose < kept;
    e->slow_runs = slow ? e->slow_runs + 1 : e->slow_runs > 0 ? e->slow_runs - 1 : 0;
    e->fast_runs = fast ? e->fast_runs + 1 : e->fast_runs > 0 ? e->fast_runs - 1 : 0;
    if ((e->slow_runs >= RECHOOSE_RUNS || e->fast_runs >= RECHOOSE_RUNS) && t1 - e->chosen_at >= RECHOOSE_MIN_NS) {
      e->rechosen = e->slow_runs >= RECHOOSE_RUNS ? 1 : 2;
      __atomic_store_n(&e->threads_chosen, 0, __ATOMIC_RELAXED);
      e->runs = 2; /* the next run times it */
      e->choose_tries = 0;
      __atomic_store_n(&e->kept_ns, 0, __ATOMIC_RELAXED);
    }
  }
  pthread_mutex_unlock(&s->lock);
}

int toplu_session_plan_threads(toplu_session_t *s, const toplu_tensor_t *inputs, int n_inputs) {
  if (!s || (!inputs && n_inputs)) return 0;
  int threads = 0;
  pthread_mutex_lock(&s->lock);
  for (plan_entry_t *e = s->plans; e && !threads; e = e->next)
    if (toplu__plan_matches(e->plan, inputs, n_inputs)) threads = e->split ? s->threads : e->plan->threads;
  pthread_mutex_unlock(&s->lock);
  return threads;
}

int toplu_session_plan_split(toplu_session_t *s, const toplu_tensor_t *inputs, int n_inputs) {
  if (!s || (!inputs && n_inputs)) return 0;
  int k = 0, found = 0;
  pthread_mutex_lock(&s->lock);
  for (plan_entry_t *e = s->plans; e && !found; e = e->next)
    if (toplu__plan_matches(e->plan, inputs, n_inputs)) found = 1, k = e->split ? e->n_split : 0;
  pthread_mutex_unlock(&s->lock);
  return k;
}

/* One run: everything reported into err (never NULL here). */
static toplu_status_t session_run_once(toplu_session_t *s, const toplu_tensor_t *inputs, int n_inputs,
                                       toplu_tensor_t *outputs, int n_outputs, const toplu_run_options_t *ro,
                                       toplu_error_t *err);

/* One run; a failed run leaves no output it allocated (a timing's first run allocated the caller's outputs, a
 * later cancel returned TOPLU_ERR_CANCELLED with them still set, and callers that free outputs on success only
 * leaked them: a fresh user's finding of 2026-12-06, ASan). */
static toplu_status_t session_run(toplu_session_t *s, const toplu_tensor_t *inputs, int n_inputs,
                                  toplu_tensor_t *outputs, int n_outputs, const toplu_run_options_t *ro,
                                  toplu_error_t *err) {
  uint64_t empty = 0; /* outputs 0..63 the caller gave without data: toplu's to allocate, and to free on failure */
  for (int i = 0; outputs && i < n_outputs && i < 64; i++)
    if (!outputs[i].data) empty |= (uint64_t)1 << i;
  toplu_status_t st = session_run_once(s, inputs, n_inputs, outputs, n_outputs, ro, err);
  if (st && outputs)
    for (int i = 0; i < n_outputs && i < 64; i++)
      if ((empty >> i & 1u) && outputs[i].data) toplu_tensor_free(&outputs[i]);
  return st;
}

static toplu_status_t session_run_once(toplu_session_t *s, const toplu_tensor_t *inputs, int n_inputs,
                                       toplu_tensor_t *outputs, int n_outputs, const toplu_run_options_t *ro,
                                       toplu_error_t *err) {
  toplu_status_t st;
  if ((st = check_inputs(s, inputs, n_inputs, 1, err))) return st;
  if (!outputs && n_outputs) return toplu__errorf(err, TOPLU_ERR_INVALID_ARGUMENT, "outputs is NULL");
  if (n_outputs != s->model->graph->n_outputs)
    return toplu__errorf(err, TOPLU_ERR_INVALID_ARGUMENT, "%s: %d outputs requested, the model has %d",
                        s->model->path, n_outputs, s->model->graph->n_outputs);
  if (toplu__run_must_stop(ro)) {
    char where[600]; /* formatted only when the run stops */
    snprintf(where, sizeof where, "before the run of %s started", s->model->path);
    if ((st = toplu__run_check_stop(ro, where, err))) return st;
  }
  run_mode_t mode;
  plan_entry_t *e = NULL;
  if ((st = choose_mode(s, inputs, n_inputs, &mode, &e, err))) return st;
  /* MODE_BATCHED too: a model that fixes batch 1 runs a batch on its graph with dim 0 freed, a plan like any other
   * (until 2026-12-07 its threads were never chosen: MNIST at batch 2-8 ran 4-10x slower on two threads than on
   * one, a fresh user's finding) */
  if (s->opts.choose_threads >= 0 && s->threads > 1 && mode != MODE_PER_SAMPLE &&
      !__atomic_load_n(&e->threads_chosen, __ATOMIC_RELAXED) &&
      !s->opts.profile && !(ro && ro->deadline_ns > 0)) {
    if (explore_run(s, e, inputs, n_inputs, outputs, n_outputs, ro, &st, err)) {
      put_plan(s, e);
      return st;
    }
    if (choose_threads(s, e, inputs, n_inputs, outputs, n_outputs, ro)) {
      put_plan(s, e);
      return TOPLU_OK;
    }
  }
  if (mode == MODE_PER_SAMPLE) {
    st = run_per_sample(e->plan, inputs, n_inputs, outputs, n_outputs, ro, err);
  } else if (e->split) {
    st = run_split(session_pool(s), e->split, e->n_split, s->threads, inputs, n_inputs, outputs, n_outputs, ro, err);
  } else if (__atomic_load_n(&e->kept_ns, __ATOMIC_RELAXED) > 0 && !s->opts.profile) {
    int64_t t0 = toplu_monotonic_ns();
    st = toplu__plan_run(e->plan, inputs, outputs, n_outputs, ro, err);
    if (!st) watch_kept(s, e, t0, toplu_monotonic_ns());
  } else {
    st = toplu__plan_run(e->plan, inputs, outputs, n_outputs, ro, err);
  }
  put_plan(s, e);
  return st;
}

toplu_status_t toplu_session_run(toplu_session_t *s, const toplu_tensor_t *inputs, int n_inputs,
                                 toplu_tensor_t *outputs, int n_outputs) {
  if (!s) return TOPLU_ERR_INVALID_ARGUMENT;
  toplu_error_t err;
  toplu_error_clear(&err);
  if (session_run(s, inputs, n_inputs, outputs, n_outputs, NULL, &err)) return fail(s, &err);
  return TOPLU_OK;
}

toplu_status_t toplu_session_run_with(toplu_session_t *s, const toplu_tensor_t *inputs, int n_inputs,
                                      toplu_tensor_t *outputs, int n_outputs, const toplu_run_options_t *ro,
                                      toplu_error_t *err) {
  toplu_error_t local;
  toplu_error_t *e = err ? err : &local;
  toplu_error_clear(e);
  if (!s) return toplu__errorf(e, TOPLU_ERR_INVALID_ARGUMENT, "toplu_session_run_with: session is NULL");
  toplu_status_t st = session_run(s, inputs, n_inputs, outputs, n_outputs, ro, e);
  if (st && e->status == TOPLU_OK) toplu__errorf(e, st, "%s", toplu_strerror(st));
  return st;
}

toplu_status_t toplu_session_memory(toplu_session_t *s, const toplu_tensor_t *inputs, int n_inputs,
                                    toplu_memory_report_t *r) {
  if (!s || !r) return TOPLU_ERR_INVALID_ARGUMENT;
  memset(r, 0, sizeof *r);
  run_mode_t mode;
  plan_entry_t *e = NULL;
  toplu_status_t st = describe_plan(s, inputs, n_inputs, &mode, &e);
  if (st) return st;
  const toplu__plan_t *p = e->plan;
  r->weights_bytes = p->weights_bytes;
  r->activation_bytes = p->activation_bytes;
  r->workspace_bytes = p->workspace_bytes;
  r->kernel_bytes = p->kernel_bytes;
  r->constant_bytes = p->constant_bytes;
  pthread_mutex_lock(&s->lock); /* e->cand is set and cleared under it by other callers' runs */
  r->plan_bytes = entry_bytes(e);
  pthread_mutex_unlock(&s->lock);
  r->cached = !e->uncached;
  r->n_nodes = p->n_steps;
  for (int m = 1; m < p->n_mems; m++) r->device_arena_bytes += p->mem_activation[m] + p->mem_workspace[m];
  for (int i = 0; i < p->n_pvals; i++)
    if (p->pvals[i].value < 0 && p->pvals[i].producer < -1 && p->pvals[i].t.data)
      r->device_weights_bytes += p->pvals[i].bytes; /* constants uploaded to a backend */
  r->n_copies = p->n_copies;
  r->flops = p->flops;
  r->bytes_moved = p->bytes_moved;
  r->input_bytes = p->input_bytes;
  r->output_bytes = p->output_bytes;
  if (e->split) { /* the slices' plan runs, min(threads, slices) of them at once, each with its own arena */
    const toplu__plan_t *q = e->split;
    int k = e->n_split, conc = s->threads < k ? s->threads : k;
    r->weights_bytes = q->weights_bytes;
    r->constant_bytes = q->constant_bytes;
    r->activation_bytes = q->activation_bytes * (size_t)conc;
    r->workspace_bytes = q->workspace_bytes * (size_t)conc;
    r->kernel_bytes = q->kernel_bytes;
    r->n_nodes = q->n_steps;
    r->device_arena_bytes = 0;
    for (int m = 1; m < q->n_mems; m++) r->device_arena_bytes += (q->mem_activation[m] + q->mem_workspace[m]) * (size_t)conc;
    r->n_copies = q->n_copies;
    r->flops = q->flops * k;
    r->bytes_moved = q->bytes_moved * k;
  }
  if (mode == MODE_PER_SAMPLE) {
    int64_t b = inputs[0].dims[0];
    r->per_sample = 1;
    r->flops *= b;
    r->bytes_moved *= b;
    r->input_bytes *= (size_t)b;
    r->output_bytes *= (size_t)b;
  }
  put_plan(s, e);
  return TOPLU_OK;
}

/* The plans can miss rows that meet after a layout op moved them off dim 0
 * (a Transpose then a Conv over time, a Slice of step -1 along dim 0, x @
 * x.T: a fresh user's findings of 2026-12-06).  So the first two rows also
 * run, together and each alone: every output row must come out the same to
 * float rounding (|a - b| <= 1e-3 of the output's largest magnitude;
 * integers exactly).  Inconclusive (apart kept) when a run fails, an input
 * holds strings, or the two rows are equal. */
static void rows_apart_numeric(toplu_session_t *s, const toplu_tensor_t *one, const toplu_tensor_t *two, int n,
                               int outputs_too, uint64_t outputs, int *apart, char *why, size_t why_size) {
  const toplu_model_t *m = s->model;
  int n_out = m->graph->n_outputs, differ = 0;
  toplu_tensor_t second[64];
  for (int i = 0; i < n; i++) {
    second[i] = one[i];
    if (one[i].dtype == TOPLU_DTYPE_STRING || !one[i].data || !two[i].data) return;
    if (one[i].dims[0] == 1 && two[i].dims[0] == 2 && one[i].data == two[i].data) {
      size_t row = toplu_tensor_nbytes(&one[i]);
      second[i].data = (char *)one[i].data + row;
      differ |= memcmp(one[i].data, second[i].data, row) != 0;
    }
  }
  if (!differ) return;
  toplu_tensor_t *out = calloc((size_t)3 * (size_t)(n_out > 0 ? n_out : 1), sizeof *out);
  if (!out) return;
  toplu_tensor_t *o2 = out, *oa = out + n_out, *ob = out + 2 * n_out;
  toplu_error_t err;
  toplu_error_clear(&err);
  if (!session_run(s, two, n, o2, n_out, NULL, &err) && !session_run(s, one, n, oa, n_out, NULL, &err) &&
      !session_run(s, second, n, ob, n_out, NULL, &err)) {
    for (int k = 0; k < n_out && *apart; k++) {
      const toplu_tensor_t *t2 = &o2[k], *t[2] = {&oa[k], &ob[k]};
      if (t2->kind != TOPLU_KIND_TENSOR || t2->dtype == TOPLU_DTYPE_STRING || !toplu__output_in(outputs, k)) continue;
      /* the shapes the runs gave: dim 0 holds 2 rows run together and 1 alone, the other dims alike.  Not so for
       * an output whose dim 0 is 2 by chance (an LSTM's Y_h [layers, batch, hidden] of 2 layers), nor for one
       * whose length follows the values (NonMaxSuppression's selected indices, NonZero's: the plans give their
       * largest shape, which can hold the rows; a fresh user's finding of 2026-12-06, torchvision nms split into
       * chunks with exit 0): refused when the outputs must hold the rows, else not compared */
      int rows_at0 = t2->ndim >= 1 && t2->dims[0] == 2;
      for (int r = 0; r < 2; r++) {
        rows_at0 &= t[r]->kind == TOPLU_KIND_TENSOR && t[r]->ndim == t2->ndim && t[r]->dims[0] == 1;
        for (int d = 1; rows_at0 && d < t2->ndim; d++) rows_at0 &= t[r]->dims[d] == t2->dims[d];
      }
      if (!rows_at0 && outputs_too) {
        char a[128], b[128];
        *apart = 0;
        if (why)
          snprintf(why, why_size,
                   "output '%s' has shape %s for the first two rows run together and %s for the first alone: its dim "
                   "0 does not hold the rows (its length follows the values, as NonMaxSuppression's)",
                   m->graph->values[m->graph->outputs[k]].name, toplu_shape_format(t2->ndim, t2->dims, a, sizeof a),
                   toplu_shape_format(t[0]->ndim, t[0]->dims, b, sizeof b));
      }
      if (!rows_at0) continue;
      int64_t per = toplu_tensor_numel(t2) / 2;
      int fl = t2->dtype == TOPLU_DTYPE_FLOAT || t2->dtype == TOPLU_DTYPE_DOUBLE || t2->dtype == TOPLU_DTYPE_FLOAT16 ||
               t2->dtype == TOPLU_DTYPE_BFLOAT16;
      double big = 0, worst = 0;
      int64_t at = -1;
      for (int r = 0; r < 2; r++) {
        if (t[r]->dtype != t2->dtype || toplu_tensor_numel(t[r]) != per) { worst = INFINITY, at = r * per; break; }
        for (int64_t e = 0; e < per; e++) {
          double a = toplu__tensor_get_double(t2, r * per + e), b = toplu__tensor_get_double(t[r], e);
          double d = a != a && b != b ? 0.0 : fabs(a - b); /* NaN in both: the same */
          if (fabs(b) > big) big = fabs(b);
          if (d > worst || (d != d && worst == worst)) worst = d, at = r * per + e;
        }
      }
      if (!(worst <= (fl ? 1e-3 * (big > 1e-30 ? big : 1e-30) : 0.0))) {
        *apart = 0;
        if (why)
          snprintf(why, why_size,
                   "output '%s' of the first two rows run together differs from each row run alone (element %lld "
                   "by %.3g, of values up to %.3g): an op combines the rows after moving them off dim 0 (a Transpose "
                   "then a Conv or MatMul, a Slice of step -1)",
                   m->graph->values[m->graph->outputs[k]].name, (long long)at, worst, big);
      }
    }
  }
  for (int k = 0; k < 3 * n_out; k++) toplu_tensor_free(&out[k]);
  free(out);
}

toplu_status_t toplu_session_rows_apart(toplu_session_t *s, const toplu_tensor_t *inputs, int n_inputs, int *apart,
                                        char *why, size_t why_size) {
  toplu_status_t st = toplu__session_rows_apart(s, inputs, n_inputs, 1, ~(uint64_t)0, apart, why, why_size);
  if (!st && *apart < 0) *apart = 0;
  return st;
}

toplu_status_t toplu_session_rows_apart_probe(toplu_session_t *s, const toplu_tensor_t *shapes, int n_inputs,
                                              int *apart, char *why, size_t why_size) {
  if (why && why_size) why[0] = 0;
  if (!s || !apart || (!shapes && n_inputs) || n_inputs < 0 || n_inputs > 64) return TOPLU_ERR_INVALID_ARGUMENT;
  toplu_tensor_t in[64] = {{0}};
  toplu_status_t st = TOPLU_OK;
  uint32_t seed = 12345;
  int made = 0;
  for (; made < n_inputs && !st; made++) {
    in[made] = shapes[made];
    in[made].data = NULL;
    if ((st = toplu_tensor_alloc(&in[made], shapes[made].dtype, shapes[made].ndim, shapes[made].dims))) break;
    toplu_tensor_t *t = &in[made];
    int64_t n = toplu_tensor_numel(t), per = t->ndim >= 1 && t->dims[0] > 0 ? n / t->dims[0] : n;
    for (int64_t k = 0; k < n; k++) {
      seed = seed * 1664525u + 1013904223u;
      if (toplu__is_float_dtype(t->dtype)) toplu__store_double(t, k, (double)(seed >> 8) / 8388608.0 - 1.0);
      else if (toplu__is_int_dtype(t->dtype)) toplu__store_int(t, k, per > 0 && k >= per);
    }
  }
  if (st) {
    for (int i = 0; i < made; i++) toplu_tensor_free(&in[i]);
    toplu_error_t err;
    toplu__errorf(&err, st, "made-up rows for input %d: %s", made,
                  st == TOPLU_ERR_OUT_OF_MEMORY ? "out of memory" : "a shape toplu_tensor_alloc refuses");
    return fail(s, &err);
  }
  st = toplu__session_rows_apart(s, in, n_inputs, 1, ~(uint64_t)0, apart, why, why_size);
  if (!st && *apart < 0) *apart = 0;
  for (int i = 0; i < n_inputs; i++) toplu_tensor_free(&in[i]);
  return st;
}

toplu_status_t toplu__session_rows_apart(toplu_session_t *s, const toplu_tensor_t *inputs, int n_inputs,
                                         int outputs_too, uint64_t outputs, int *apart, char *why, size_t why_size) {
  if (why && why_size) why[0] = 0;
  if (!s || !apart || (!inputs && n_inputs) || n_inputs > 64) return TOPLU_ERR_INVALID_ARGUMENT;
  *apart = 1;
  const toplu_model_t *m = s->model;
  if (m->fixed_rows || n_inputs < 1 || toplu__graph_has_lists(m->graph)) return TOPLU_OK; /* (see the header) */
  toplu_tensor_t one[64], two[64];
  int64_t rows = inputs[0].ndim >= 1 ? inputs[0].dims[0] : 0;
  for (int i = 0; i < n_inputs; i++) {
    one[i] = two[i] = inputs[i];
    if (i < m->graph->n_inputs && m->inputs[i].ndim >= 1 && m->inputs[i].dims[0] >= 0)
      continue; /* an input the model gives no free dim 0 (a bias passed whole to every batch): as it is */
    if (inputs[i].kind != TOPLU_KIND_TENSOR || inputs[i].ndim < 1 || inputs[i].dims[0] != rows) return TOPLU_OK;
    one[i].dims[0] = 1, two[i].dims[0] = 2; /* the first one and two rows, the data in place (NULL when fewer) */
    if (rows < 2) two[i].data = NULL;
    if (rows < 1) one[i].data = NULL;
  }
  toplu_error_t err;
  toplu_error_clear(&err);
  plan_entry_t *e1 = NULL, *e2 = NULL;
  if (check_inputs(s, one, n_inputs, 0, &err) || get_plan(s, m->graph, one, n_inputs, &e1, &err) ||
      get_plan(s, m->graph, two, n_inputs, &e2, &err)) {
    put_plan_unused(s, e1);
    return fail(s, &err);
  }
  const toplu__plan_t *p2 = e2->plan, *p1 = e1->plan;
  const toplu__graph_t *g = p2->graph;
  /* values whose dim 0 holds the rows: 2 and 1 there, the other dims the same */
#define ROWS_AT0(v) rows_at0(&p2->table->vals[v], &p1->table->vals[v], 2, 1)
  for (int i = 0; i < p2->n_steps && *apart > 0; i++) {
    const toplu__node_t *n = p2->steps[i].node;
    if (p2->steps[i].aux || n->n_inputs < 1 || n->inputs[0] < 0 || !mixes_rows(n, p2->table)) continue;
    /* Of the ops that work along dim 0, these keep each row's numbers its own: a Transpose moves the rows
     * (PaddleOCR rec's), a seeded Random*Like draws other numbers for a row in another batch, a dynamic int8
     * MatMul's per-tensor scale follows its batch as in ONNX Runtime: none answers wrongly in batches */
    /* A Concat along dim 0 stacks the rows after others (test-time augmentation's cat([x, x.flip(3)]), a shared
     * encoder over two inputs): its output's dim 0 no longer holds them one for one, so what follows it is left to
     * the shapes of the outputs and the runs of two rows below (it counted as mixing, and such models ran row by
     * row with identical results: a fresh user's finding of 2026-12-06) */
    if (!strcmp(n->op_type, "Transpose") || !strncmp(n->op_type, "Random", 6) ||
        !strncmp(n->op_type, "DynamicQuantize", 15) || !strcmp(n->op_type, "Concat"))
      continue;
    if (!ROWS_AT0(n->inputs[0])) continue; /* it works along a dim 0 that is not the rows */
    int rnn = !strcmp(n->op_type, "LSTM") || !strcmp(n->op_type, "GRU") || !strcmp(n->op_type, "RNN");
    *apart = rnn ? -1 : 0; /* an RNN of layout 0: dim 0 is its sequence, so one row alone is no sample either */
    if (why)
      snprintf(why, why_size, "node '%s' (%s) works along dim 0 of '%s', which holds the rows%s", n->name, n->op_type,
               g->values[n->inputs[0]].name, rnn ? " (its layout 0 reads dim 0 as the sequence)" : "");
  }
  for (int j = 0; j < g->n_outputs && *apart > 0 && outputs_too; j++)
    if (toplu__output_in(outputs, j) && !ROWS_AT0(g->outputs[j])) {
      const toplu_tensor_t *o = &p2->table->vals[g->outputs[j]];
      char sh[128];
      *apart = 0;
      if (why)
        snprintf(why, why_size, "output '%s' has shape %s for 2 rows: its dim 0 does not hold the rows",
                 g->values[g->outputs[j]].name, toplu_shape_format(o->ndim, o->dims, sh, sizeof sh));
    }
#undef ROWS_AT0
  int random = 0; /* ops whose numbers for a row depend on its batch by design: no numeric check */
  for (int i = 0; i < g->n_nodes && !random; i++)
    random = strstr(g->nodes[i].op_type, "Random") || strstr(g->nodes[i].op_type, "DynamicQuantize") ||
             strstr(g->nodes[i].op_type, "Bernoulli") || strstr(g->nodes[i].op_type, "Multinomial");
  /* the runs while the plans are held: put back unused first, they left the cache and each run built its plan
   * again (ResNet-50 int8: 75 ms of a 64-row job's setup) */
  if (*apart > 0 && rows >= 2 && !random)
    rows_apart_numeric(s, one, two, n_inputs, outputs_too, outputs, apart, why, why_size);
  put_plan_unused(s, e2);
  put_plan_unused(s, e1);
  return TOPLU_OK;
}

toplu_status_t toplu_session_output_shapes(toplu_session_t *s, const toplu_tensor_t *inputs, int n_inputs,
                                           toplu_tensor_t *outputs, int n_outputs) {
  if (!s || (!outputs && n_outputs)) return TOPLU_ERR_INVALID_ARGUMENT;
  if (n_outputs != s->model->graph->n_outputs) {
    toplu_error_t err;
    toplu__errorf(&err, TOPLU_ERR_INVALID_ARGUMENT, "%d outputs requested, the model has %d", n_outputs,
                 s->model->graph->n_outputs);
    return fail(s, &err);
  }
  run_mode_t mode;
  plan_entry_t *e = NULL;
  toplu_status_t st = describe_plan(s, inputs, n_inputs, &mode, &e);
  if (st) return st;
  const toplu__plan_t *p = e->plan;
  for (int j = 0; j < n_outputs; j++) {
    int c = p->out_count ? p->out_count[j] : -1;
    if (c != -1) { /* a sequence: its length (items' shapes differ); none: kind only */
      outputs[j].kind = c == -2 ? TOPLU_KIND_NONE : TOPLU_KIND_SEQUENCE;
      outputs[j].dtype = c > 0 ? p->table->vals[p->flat_out_value[p->out_first[j]]].dtype
                               : p->graph->values[p->graph->outputs[j]].elem_dtype;
      outputs[j].ndim = c == -2 ? 0 : 1;
      outputs[j].dims[0] = c == -2 ? 0 : c;
      continue;
    }
    const toplu_tensor_t *x = &p->table->vals[p->flat_out_value[p->out_first ? p->out_first[j] : j]];
    outputs[j].kind = TOPLU_KIND_TENSOR;
    outputs[j].dtype = x->dtype;
    outputs[j].ndim = x->ndim;
    memcpy(outputs[j].dims, x->dims, sizeof x->dims);
    if (mode == MODE_PER_SAMPLE && x->ndim > 0) outputs[j].dims[0] = inputs[0].dims[0];
  }
  put_plan(s, e);
  return TOPLU_OK;
}

int toplu_session_profile(toplu_session_t *s, const toplu_tensor_t *inputs, int n_inputs, toplu_node_profile_t *nodes,
                          int cap) {
  if (!s || !s->opts.profile) return 0;
  run_mode_t mode;
  plan_entry_t *e = NULL;
  if (describe_plan(s, inputs, n_inputs, &mode, &e)) return 0;
  if (e->uncached) { /* gone when put: its strings would dangle */
    put_plan(s, e);
    return 0;
  }
  toplu__plan_t *p = e->plan;
  int64_t rows = mode == MODE_PER_SAMPLE ? inputs[0].dims[0] : 1;
  pthread_mutex_lock(&p->lock);
  for (int i = 0; i < p->n_steps && i < cap; i++) {
    const toplu__step_t *st = &p->steps[i];
    toplu_node_profile_t *np = &nodes[i];
    memset(np, 0, sizeof *np);
    np->name = st->node->name;
    np->op_type = st->label ? st->label : st->node->op_type;
    np->total_us = p->prof_total_us ? p->prof_total_us[i] : 0;
    np->last_us = p->prof_last_us ? p->prof_last_us[i] : 0;
    np->start_us = p->prof_start_us ? p->prof_start_us[i] : 0;
    np->runs = p->prof_runs;
    np->flops = st->flops * rows;
    np->bytes_moved = st->bytes_moved * rows;
    np->impl = st->impl ? st->impl : "";
    np->fused = !st->aux && st->node->fused_nodes ? st->node->fused_nodes : "";
    np->backend = p->backends[st->backend]->iface->name;
    np->ran = !(st->kernel->flags & TOPLU_KERNEL_VIEW);
    np->n_inputs = st->prof_in ? st->ctx.n_in : 0;
    np->n_outputs = st->prof_out ? st->ctx.n_out : 0;
    np->inputs = st->prof_in;
    np->outputs = st->prof_out;
  }
  int n = p->n_steps;
  pthread_mutex_unlock(&p->lock);
  put_plan(s, e);
  return n;
}

int toplu_session_steps(toplu_session_t *s, const toplu_tensor_t *inputs, int n_inputs, toplu_step_info_t *steps,
                        int cap) {
  if (!s || cap < 0 || (cap > 0 && !steps)) return -TOPLU_ERR_INVALID_ARGUMENT;
  run_mode_t mode;
  plan_entry_t *e = NULL;
  toplu_status_t status = describe_plan(s, inputs, n_inputs, &mode, &e);
  if (status) return -(int)status;
  if (e->uncached) { /* gone when put: its strings would dangle */
    toplu_error_t err;
    toplu__errorf(&err, TOPLU_ERR_OUT_OF_MEMORY,
                  "%s: the plan for these shapes (%zu bytes) does not fit the plan cache (max_plan_bytes %zu, "
                  "max_plans %d), so its steps cannot be described",
                  s->model->path, toplu__plan_own_bytes(e->plan), s->opts.max_plan_bytes, s->opts.max_plans);
    put_plan(s, e);
    return -(int)fail(s, &err);
  }
  const toplu__plan_t *p = e->plan;
  int64_t rows = mode == MODE_PER_SAMPLE ? inputs[0].dims[0] : 1;
  for (int i = 0; i < p->n_steps && i < cap; i++) {
    const toplu__step_t *st = &p->steps[i];
    steps[i].name = st->node->name;
    steps[i].op_type = st->label ? st->label : st->node->op_type;
    steps[i].node_op_type = st->node->op_type;
    steps[i].flops = st->flops * rows;
    steps[i].bytes_moved = st->bytes_moved * rows;
    int64_t ob = 0;
    for (int j = 0; j < st->ctx.n_out; j++)
      if (st->out_pv[j] >= 0) ob += (int64_t)p->pvals[st->out_pv[j]].bytes;
    steps[i].output_bytes = ob * rows;
    steps[i].backend = p->backends[st->backend]->iface->name;
    steps[i].inserted = st->aux;
    steps[i].plain_bytes = st->plain_bytes * rows;
    int64_t me = 0;
    for (int io = 0; io < 2; io++) {
      const int n = io ? st->ctx.n_out : st->ctx.n_in, *pv = io ? st->out_pv : st->in_pv;
      for (int j = 0; j < n; j++) {
        int64_t ne = pv[j] >= 0 ? toplu_tensor_numel(&p->pvals[pv[j]].t) : 0;
        if (ne > me) me = ne;
      }
    }
    steps[i].max_tensor_elements = me;
  }
  int n = p->n_steps;
  put_plan(s, e);
  return n;
}
