/* runtime/pool.c - toplu's own worker threads for runs split into slices (see pool.h).
 *
 * A job is published in one 64-bit word, `ticket`: the job's generation in
 * the high 32 bits, the next task to take in the low 32.  A thread takes a
 * task by compare-and-swap of (generation, i) to (generation, i + 1), so a
 * thread that read an older job's fields can never take a task of a newer
 * one: the caller first moves the ticket to (new generation, CLOSED), then
 * writes the job's fields, then opens it at (new generation, 0).  All
 * accesses to the shared words are sequentially consistent (a few per run).
 */
#include "runtime/pool.h"

#include <omp.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

#define CLOSED 0xffffffffu
#define DEFAULT_SPIN_US 100

struct toplu__pool {
  pid_t pid; /* the process that started the workers (a forked child has none of them) */
  int n_workers;
  int64_t spin_ns;
  pthread_t *tids;
  pthread_mutex_t busy; /* held by the caller of the running job */
  pthread_mutex_t mu;   /* for the sleeps below */
  pthread_cond_t work_cv, done_cv;
  /* shared words, __atomic_* (seq_cst) only */
  uint64_t ticket;
  toplu__pool_fn fn;
  void *arg;
  int n_tasks;
  int done;
  int sleepers;       /* workers asleep on work_cv, or about to be */
  int caller_waiting; /* the caller asleep on done_cv, or about to be */
  int quit;
};

#define LOAD(x) __atomic_load_n(&(x), __ATOMIC_SEQ_CST)
#define STORE(x, v) __atomic_store_n(&(x), (v), __ATOMIC_SEQ_CST)

static int64_t now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static inline void cpu_relax(void) {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#endif
}

/* Takes and runs tasks of generation g until none is left (or a newer job
 * replaced it). */
static void take_tasks(toplu__pool_t *p, uint32_t g) {
  uint64_t t = LOAD(p->ticket);
  while ((uint32_t)(t >> 32) == g && (uint32_t)t == CLOSED) { /* the caller is writing the job: a few stores */
    cpu_relax();
    t = LOAD(p->ticket);
  }
  toplu__pool_fn fn = LOAD(p->fn);
  void *arg = LOAD(p->arg);
  uint32_t n = (uint32_t)LOAD(p->n_tasks);
  for (;;) {
    if ((uint32_t)(t >> 32) != g || (uint32_t)t >= n) return;
    /* on failure t holds the ticket's current value */
    if (!__atomic_compare_exchange_n(&p->ticket, &t, t + 1, 0, __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST)) continue;
    fn(arg, (int)(uint32_t)t);
    if (__atomic_add_fetch(&p->done, 1, __ATOMIC_SEQ_CST) == (int)n && LOAD(p->caller_waiting)) {
      pthread_mutex_lock(&p->mu);
      pthread_cond_broadcast(&p->done_cv);
      pthread_mutex_unlock(&p->mu);
    }
    t = LOAD(p->ticket);
  }
}

/* Spins while cond holds, for at most p->spin_ns (the clock read every 64
 * turns). */
#define SPIN_WHILE(p, cond)                                                   \
  do {                                                                        \
    int64_t t0_ = 0;                                                          \
    for (unsigned i_ = 0; (cond); i_++) {                                     \
      if ((i_ & 63) == 0) {                                                   \
        int64_t t_ = now_ns();                                                \
        if (!t0_) t0_ = t_;                                                   \
        else if (t_ - t0_ > (p)->spin_ns) break;                              \
      }                                                                       \
      cpu_relax();                                                            \
    }                                                                         \
  } while (0)

static void *worker_main(void *vp) {
  toplu__pool_t *p = vp;
  omp_set_num_threads(1); /* kernels called from a task run on this thread alone */
  uint32_t seen = 0; /* the generation before the first job (not the ticket now: a job may be out already) */
  for (;;) {
    SPIN_WHILE(p, (uint32_t)(LOAD(p->ticket) >> 32) == seen && !LOAD(p->quit));
    if ((uint32_t)(LOAD(p->ticket) >> 32) == seen && !LOAD(p->quit)) {
      pthread_mutex_lock(&p->mu);
      __atomic_add_fetch(&p->sleepers, 1, __ATOMIC_SEQ_CST);
      while ((uint32_t)(LOAD(p->ticket) >> 32) == seen && !LOAD(p->quit)) pthread_cond_wait(&p->work_cv, &p->mu);
      __atomic_sub_fetch(&p->sleepers, 1, __ATOMIC_SEQ_CST);
      pthread_mutex_unlock(&p->mu);
    }
    if (LOAD(p->quit)) return NULL;
    seen = (uint32_t)(LOAD(p->ticket) >> 32);
    take_tasks(p, seen);
  }
}

toplu__pool_t *toplu__pool_create(int workers, int spin_us) {
  if (workers < 1) return NULL;
  toplu__pool_t *p = calloc(1, sizeof *p);
  if (!p) return NULL;
  if (spin_us < 0) {
    const char *e = getenv("TOPLU_POOL_SPIN_US");
    char *end;
    long v = e ? strtol(e, &end, 10) : -1;
    spin_us = e && *e && !*end && v >= 0 && v <= 1000000 ? (int)v : DEFAULT_SPIN_US;
  }
  p->spin_ns = (int64_t)spin_us * 1000;
  p->pid = getpid();
  p->tids = calloc((size_t)workers, sizeof *p->tids);
  if (!p->tids) {
    free(p);
    return NULL;
  }
  pthread_mutex_init(&p->busy, NULL);
  pthread_mutex_init(&p->mu, NULL);
  pthread_cond_init(&p->work_cv, NULL);
  pthread_cond_init(&p->done_cv, NULL);
  for (; p->n_workers < workers; p->n_workers++)
    if (pthread_create(&p->tids[p->n_workers], NULL, worker_main, p)) {
      toplu__pool_destroy(p);
      return NULL;
    }
  return p;
}

void toplu__pool_destroy(toplu__pool_t *p) {
  if (!p) return;
  if (p->pid != getpid()) { /* in a forked child: the workers are the parent's; nothing to join */
    free(p->tids);
    free(p);
    return;
  }
  pthread_mutex_lock(&p->mu);
  STORE(p->quit, 1);
  pthread_cond_broadcast(&p->work_cv);
  pthread_mutex_unlock(&p->mu);
  for (int i = 0; i < p->n_workers; i++) pthread_join(p->tids[i], NULL);
  pthread_cond_destroy(&p->work_cv);
  pthread_cond_destroy(&p->done_cv);
  pthread_mutex_destroy(&p->mu);
  pthread_mutex_destroy(&p->busy);
  free(p->tids);
  free(p);
}

int toplu__pool_workers(const toplu__pool_t *p) { return p ? p->n_workers : 0; }

int toplu__pool_run(toplu__pool_t *p, int n_tasks, toplu__pool_fn fn, void *arg) {
  if (n_tasks <= 0) return 0;
  if (pthread_mutex_trylock(&p->busy)) return TOPLU__POOL_BUSY;
  uint32_t g = (uint32_t)(LOAD(p->ticket) >> 32) + 1;
  STORE(p->ticket, (uint64_t)g << 32 | CLOSED); /* threads of older jobs can take nothing from here on */
  STORE(p->fn, fn);
  STORE(p->arg, arg);
  STORE(p->n_tasks, n_tasks);
  STORE(p->done, 0);
  STORE(p->ticket, (uint64_t)g << 32);
  if (LOAD(p->sleepers)) {
    pthread_mutex_lock(&p->mu);
    pthread_cond_broadcast(&p->work_cv);
    pthread_mutex_unlock(&p->mu);
  }
  take_tasks(p, g);
  SPIN_WHILE(p, LOAD(p->done) < n_tasks);
  if (LOAD(p->done) < n_tasks) {
    pthread_mutex_lock(&p->mu);
    STORE(p->caller_waiting, 1);
    while (LOAD(p->done) < n_tasks) pthread_cond_wait(&p->done_cv, &p->mu);
    STORE(p->caller_waiting, 0);
    pthread_mutex_unlock(&p->mu);
  }
  pthread_mutex_unlock(&p->busy);
  return 0;
}
