/* tests/test_pool.c - toplu's own worker threads for split runs (src/runtime/pool.h).
 *
 * Every task of every job runs exactly once, across thousands of jobs back
 * to back (workers that wake late must take nothing from the next job);
 * tasks run on the workers too; a worker's kernels see one OpenMP thread; a
 * second caller gets TOPLU__POOL_BUSY while a job runs, and callers racing
 * for the pool never lose or repeat a task.
 */
#include <omp.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <time.h>

#include <cmocka.h>

#include "runtime/pool.h"

#define MAX_TASKS 1024

typedef struct {
  int count[MAX_TASKS];
  pthread_t who[MAX_TASKS];
  int omp_threads[MAX_TASKS];
  int sleep_us;
} job_t;

static void task(void *arg, int i) {
  job_t *j = arg;
  __atomic_add_fetch(&j->count[i], 1, __ATOMIC_RELAXED);
  j->who[i] = pthread_self();
  j->omp_threads[i] = omp_get_max_threads();
  if (j->sleep_us) {
    struct timespec d = {0, (long)j->sleep_us * 1000};
    nanosleep(&d, NULL);
  }
}

/* Each task exactly once, for job sizes 1..MAX_TASKS, 3,000 jobs back to
 * back, with and without spinning (spin 0: workers sleep between jobs and
 * wake late). */
static void test_each_task_once(void **state) {
  (void)state;
  static const int sizes[] = {1, 2, 3, 7, 64, 1000};
  for (int spin = 0; spin <= 1; spin++) {
    toplu__pool_t *p = toplu__pool_create(3, spin ? 100 : 0);
    assert_non_null(p);
    assert_int_equal(toplu__pool_workers(p), 3);
    static job_t j;
    for (int it = 0; it < 3000; it++) {
      int n = sizes[it % 6];
      memset(&j, 0, sizeof j);
      assert_int_equal(toplu__pool_run(p, n, task, &j), 0);
      for (int i = 0; i < n; i++)
        if (j.count[i] != 1) fail_msg("job %d (%d tasks, spin %d): task %d ran %d times", it, n, spin, i, j.count[i]);
      for (int i = n; i < MAX_TASKS; i++) assert_int_equal(j.count[i], 0);
    }
    assert_int_equal(toplu__pool_run(p, 0, task, &j), 0);
    toplu__pool_destroy(p);
  }
  toplu__pool_destroy(NULL);
}

/* Tasks that take a while are shared with the worker, and a task on a
 * worker sees omp_get_max_threads() == 1. */
static void test_workers_take_tasks(void **state) {
  (void)state;
  omp_set_num_threads(2);
  toplu__pool_t *p = toplu__pool_create(1, 0);
  assert_non_null(p);
  static job_t j;
  memset(&j, 0, sizeof j);
  j.sleep_us = 5000;
  assert_int_equal(toplu__pool_run(p, 8, task, &j), 0);
  int on_worker = 0;
  for (int i = 0; i < 8; i++) {
    assert_int_equal(j.count[i], 1);
    if (!pthread_equal(j.who[i], pthread_self())) {
      on_worker++;
      assert_int_equal(j.omp_threads[i], 1);
    }
  }
  assert_true(on_worker >= 1 && on_worker <= 7);
  toplu__pool_destroy(p);
}

typedef struct {
  int started;
  int timeouts;
} meet_t;

/* Both tasks of a job wait for each other (up to 2 s): the job ends without
 * a timeout only when a worker took the second task. */
static void meet_task(void *arg, int i) {
  meet_t *m = arg;
  (void)i;
  __atomic_add_fetch(&m->started, 1, __ATOMIC_SEQ_CST);
  struct timespec t0, t;
  clock_gettime(CLOCK_MONOTONIC, &t0);
  while (__atomic_load_n(&m->started, __ATOMIC_SEQ_CST) < 2) {
    clock_gettime(CLOCK_MONOTONIC, &t);
    if ((t.tv_sec - t0.tv_sec) * 1000000000L + (t.tv_nsec - t0.tv_nsec) > 2000000000L) {
      __atomic_add_fetch(&m->timeouts, 1, __ATOMIC_SEQ_CST);
      return;
    }
  }
}

/* Every job reaches the worker, whether it spins or sleeps when the job is
 * published (a worker that looked at the ticket while the caller was still
 * writing the job once took it for finished, and the caller ran a quarter
 * of the slices alone). */
static void test_every_job_reaches_workers(void **state) {
  (void)state;
  for (int spin = 0; spin <= 1; spin++) {
    toplu__pool_t *p = toplu__pool_create(1, spin ? 2000 : 0);
    assert_non_null(p);
    for (int it = 0; it < 2000; it++) {
      meet_t m = {0, 0};
      assert_int_equal(toplu__pool_run(p, 2, meet_task, &m), 0);
      if (m.timeouts) fail_msg("job %d (spin %d): the worker did not take the second task within 2 s", it, spin);
    }
    toplu__pool_destroy(p);
  }
}

typedef struct {
  toplu__pool_t *p;
  int started, release;
} hold_t;

static void hold_task(void *arg, int i) {
  hold_t *h = arg;
  (void)i;
  __atomic_store_n(&h->started, 1, __ATOMIC_SEQ_CST);
  while (!__atomic_load_n(&h->release, __ATOMIC_SEQ_CST)) {
    struct timespec d = {0, 100000};
    nanosleep(&d, NULL);
  }
}

static void *hold_caller(void *arg) {
  hold_t *h = arg;
  toplu__pool_run(h->p, 1, hold_task, h);
  return NULL;
}

/* While one caller's job runs, another caller gets TOPLU__POOL_BUSY at once
 * and nothing of its job runs; afterwards the pool takes jobs again. */
static void test_busy(void **state) {
  (void)state;
  hold_t h = {.p = toplu__pool_create(1, 0)};
  assert_non_null(h.p);
  pthread_t t;
  assert_int_equal(pthread_create(&t, NULL, hold_caller, &h), 0);
  while (!__atomic_load_n(&h.started, __ATOMIC_SEQ_CST)) {
    struct timespec d = {0, 100000};
    nanosleep(&d, NULL);
  }
  static job_t j;
  memset(&j, 0, sizeof j);
  assert_int_equal(toplu__pool_run(h.p, 4, task, &j), TOPLU__POOL_BUSY);
  for (int i = 0; i < 4; i++) assert_int_equal(j.count[i], 0);
  __atomic_store_n(&h.release, 1, __ATOMIC_SEQ_CST);
  pthread_join(t, NULL);
  assert_int_equal(toplu__pool_run(h.p, 4, task, &j), 0);
  for (int i = 0; i < 4; i++) assert_int_equal(j.count[i], 1);
  toplu__pool_destroy(h.p);
}

typedef struct {
  toplu__pool_t *p;
  int ran, busy;
} racer_t;

static void *racer(void *arg) {
  racer_t *r = arg;
  static _Thread_local job_t j;
  for (int it = 0; it < 2000; it++) {
    int n = 1 + it % 9;
    memset(&j, 0, sizeof j);
    int rc = toplu__pool_run(r->p, n, task, &j);
    if (rc == TOPLU__POOL_BUSY) {
      r->busy++;
      for (int i = 0; i < n; i++)
        if (j.count[i]) return "a busy job ran a task";
      continue;
    }
    if (rc) return "unexpected status";
    r->ran++;
    for (int i = 0; i < n; i++)
      if (j.count[i] != 1) return "a task did not run exactly once";
  }
  return NULL;
}

/* Three callers race for one pool: each job either runs whole (every task
 * once) or is refused whole. */
static void test_racing_callers(void **state) {
  (void)state;
  toplu__pool_t *p = toplu__pool_create(2, 50);
  assert_non_null(p);
  racer_t r[3];
  pthread_t t[3];
  for (int i = 0; i < 3; i++) {
    r[i] = (racer_t){.p = p};
    assert_int_equal(pthread_create(&t[i], NULL, racer, &r[i]), 0);
  }
  int ran = 0;
  for (int i = 0; i < 3; i++) {
    void *msg;
    pthread_join(t[i], &msg);
    if (msg) fail_msg("racer %d: %s", i, (const char *)msg);
    assert_int_equal(r[i].ran + r[i].busy, 2000);
    ran += r[i].ran;
  }
  assert_true(ran > 0);
  toplu__pool_destroy(p);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_each_task_once),
      cmocka_unit_test(test_workers_take_tasks),
      cmocka_unit_test(test_every_job_reaches_workers),
      cmocka_unit_test(test_busy),
      cmocka_unit_test(test_racing_callers),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
