/*
 * tests/test_run_options.c - deadlines and cancellation of toplu_session_run_with
 * on a real model (torchvision ResNet-50, batch 8 of the ONNX Runtime fixture).
 *
 *   test_run_options MODEL.onnx INPUT.npy EXPECTED.npy
 *
 * 1. An uninterrupted run matches ONNX Runtime's output (max abs diff <= 1e-3
 *    relative to the output's scale) and gives the time T of one run.
 * 2. A deadline of T/3 from the start: TOPLU_ERR_DEADLINE, returned no later
 *    than the deadline plus the longest step (measured with the profile), and
 *    the message names the step where it stopped.
 * 3. A deadline already past: TOPLU_ERR_DEADLINE at once.
 * 4. A cancel flag set from another thread T/3 into the run:
 *    TOPLU_ERR_CANCELLED, and the run stops early.
 * 5. After each stopped run the same session runs again with correct output
 *    (same bytes as the first run), concurrently stopped and normal runs do
 *    not see each other's errors (per-call toplu_error_t).
 * Missing files skip (exit 77).
 */
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <omp.h>

#include "model_check.h"
#include "toplu/toplu.h"


static double max_diff(const toplu_tensor_t *a, const toplu_tensor_t *b, double *scale) {
  const float *x = a->data, *y = b->data;
  double m = 0, s = 0;
  for (int64_t i = 0; i < toplu_tensor_numel(b); i++) {
    double d = fabs((double)x[i] - (double)y[i]);
    if (!(d <= m)) m = d;
    if (fabs(y[i]) > s) s = fabs(y[i]);
  }
  *scale = s;
  return m;
}

typedef struct {
  int *flag;
  useconds_t after_us;
} canceller_t;

static void *cancel_later(void *arg) {
  canceller_t *c = arg;
  usleep(c->after_us);
  toplu_run_cancel(c->flag);
  return NULL;
}

typedef struct {
  toplu_session_t *s;
  const toplu_tensor_t *in;
  const toplu_tensor_t *want;
  int ok;
  char msg[256];
} normal_run_t;

static void *normal_run(void *arg) {
  normal_run_t *r = arg;
  toplu_tensor_t out = {0};
  toplu_error_t err;
  toplu_status_t st = toplu_session_run_with(r->s, r->in, 1, &out, 1, NULL, &err);
  r->ok = st == TOPLU_OK && err.status == TOPLU_OK && err.message[0] == '\0' &&
          !memcmp(out.data, r->want->data, toplu_tensor_nbytes(r->want));
  snprintf(r->msg, sizeof r->msg, "status %d, message '%s'", st, err.message);
  toplu_tensor_free(&out);
  return NULL;
}

int main(int argc, char **argv) {
  toplu_error_t err;
  toplu_model_t *m = NULL;
  toplu_tensor_t in = {0}, want = {0};
  int rc = load_fixture_args(argc, argv, &m, &in, &want);
  if (rc) return rc;
  toplu_session_options_t so;
  toplu_session_options_init(&so);
  so.threads = 2;
  so.profile = 1;
  toplu_session_t *s = NULL;
  if (toplu_session_create(m, &so, &s, &err)) {
    fprintf(stderr, "FAIL: %s\n", err.message);
    return 1;
  }

  /* 1. reference run (twice: the first builds the plan) */
  toplu_tensor_t ref = {0};
  CHECK(toplu_session_run_with(s, &in, 1, &ref, 1, NULL, &err) == TOPLU_OK, "first run: %s", err.message);
  toplu_tensor_free(&ref);
  int64_t t0 = toplu_monotonic_ns();
  CHECK(toplu_session_run_with(s, &in, 1, &ref, 1, NULL, &err) == TOPLU_OK, "second run: %s", err.message);
  int64_t run_ns = toplu_monotonic_ns() - t0;
  double scale, d = max_diff(&ref, &want, &scale);
  CHECK(d <= 1e-3 * (scale > 1 ? scale : 1), "output differs from ONNX Runtime by %g (scale %g)", d, scale);
  toplu_node_profile_t prof[512];
  int n_steps = toplu_session_profile(s, &in, 1, prof, 512);
  double longest_us = 0;
  for (int i = 0; i < n_steps && i < 512; i++)
    if (prof[i].last_us > longest_us) longest_us = prof[i].last_us;
  printf("one run: %.1f ms, %d steps, longest step %.2f ms\n", (double)run_ns / 1e6, n_steps, longest_us / 1e3);

  /* 2. a deadline a third into the run */
  for (int rep = 0; rep < 3; rep++) {
    toplu_run_options_t ro;
    toplu_run_options_init(&ro);
    toplu_tensor_t out = {0};
    int64_t start = toplu_monotonic_ns();
    ro.deadline_ns = start + run_ns / 3;
    toplu_status_t st = toplu_session_run_with(s, &in, 1, &out, 1, &ro, &err);
    int64_t end = toplu_monotonic_ns();
    double late_ms = (double)(end - ro.deadline_ns) / 1e6;
    CHECK(st == TOPLU_ERR_DEADLINE, "deadline run: status %d (%s)", st, err.message);
    CHECK(err.status == TOPLU_ERR_DEADLINE && strstr(err.message, "deadline passed before step"),
          "deadline message: '%s'", err.message);
    /* within one step's time: the longest step plus scheduling slack */
    CHECK(late_ms <= longest_us / 1e3 * 1.5 + 5.0, "returned %.2f ms after the deadline (longest step %.2f ms)",
          late_ms, longest_us / 1e3);
    printf("deadline at %.1f ms: returned %.2f ms after it: %s\n", (double)run_ns / 3e6, late_ms, err.message);
    toplu_tensor_free(&out);
    /* the session still works, with the same bytes */
    toplu_tensor_t again = {0};
    CHECK(toplu_session_run_with(s, &in, 1, &again, 1, NULL, &err) == TOPLU_OK, "run after deadline: %s",
          err.message);
    CHECK(again.data && !memcmp(again.data, ref.data, toplu_tensor_nbytes(&ref)),
          "output after a deadline run differs");
    toplu_tensor_free(&again);
  }

  /* 3. a deadline already past */
  {
    toplu_run_options_t ro = {.deadline_ns = toplu_monotonic_ns() - 1000000};
    toplu_tensor_t out = {0};
    int64_t start = toplu_monotonic_ns();
    toplu_status_t st = toplu_session_run_with(s, &in, 1, &out, 1, &ro, &err);
    CHECK(st == TOPLU_ERR_DEADLINE && strstr(err.message, "before the run"), "past deadline: %d '%s'", st,
          err.message);
    CHECK(toplu_monotonic_ns() - start < run_ns / 4, "a past deadline still ran");
    CHECK(out.data == NULL, "a run refused before it started allocated an output");
    toplu_tensor_free(&out);
  }

  /* 4. cancel from another thread, while a normal run goes on beside it */
  for (int rep = 0; rep < 2; rep++) {
    int flag = 0;
    toplu_run_options_t ro = {.cancel = &flag};
    canceller_t c = {.flag = &flag, .after_us = (useconds_t)(run_ns / 3000)};
    normal_run_t nr = {.s = s, .in = &in, .want = &ref};
    pthread_t th, th2;
    toplu_tensor_t out = {0};
    int64_t start = toplu_monotonic_ns();
    pthread_create(&th, NULL, cancel_later, &c);
    pthread_create(&th2, NULL, normal_run, &nr);
    toplu_status_t st = toplu_session_run_with(s, &in, 1, &out, 1, &ro, &err);
    int64_t took = toplu_monotonic_ns() - start;
    pthread_join(th, NULL);
    pthread_join(th2, NULL);
    CHECK(st == TOPLU_ERR_CANCELLED, "cancelled run: status %d (%s)", st, err.message);
    CHECK(err.status == TOPLU_ERR_CANCELLED && strstr(err.message, "cancelled before step"), "cancel message: '%s'",
          err.message);
    CHECK(nr.ok, "the normal run beside the cancelled one: %s", nr.msg);
    printf("cancel after %.1f ms: stopped at %.1f ms: %s\n", (double)c.after_us / 1e3, (double)took / 1e6,
           err.message);
    toplu_tensor_free(&out);
    toplu_tensor_t again = {0};
    CHECK(toplu_session_run_with(s, &in, 1, &again, 1, NULL, &err) == TOPLU_OK, "run after cancel: %s",
          err.message);
    CHECK(again.data && !memcmp(again.data, ref.data, toplu_tensor_nbytes(&ref)), "output after a cancel differs");
    toplu_tensor_free(&again);
  }

  /* a flag set before the call: cancelled before anything runs */
  {
    int flag = 1;
    toplu_run_options_t ro = {.cancel = &flag};
    toplu_tensor_t out = {0};
    CHECK(toplu_session_run_with(s, &in, 1, &out, 1, &ro, &err) == TOPLU_ERR_CANCELLED, "pre-set flag: '%s'",
          err.message);
    toplu_tensor_free(&out);
  }
  /* errors are per call: a bad call fills its own error, the session's other callers are untouched */
  {
    toplu_tensor_t bad = in;
    bad.dims[1] = 4;
    toplu_tensor_t out = {0};
    CHECK(toplu_session_run_with(s, &bad, 1, &out, 1, NULL, &err) == TOPLU_ERR_SHAPE && strstr(err.message, "input"),
          "bad shape: '%s'", err.message);
    CHECK(toplu_session_run_with(s, &in, 1, &out, 1, NULL, &err) == TOPLU_OK && err.message[0] == '\0',
          "a good call after a bad one kept the old message: '%s'", err.message);
    toplu_tensor_free(&out);
  }

  /* the caller's OpenMP thread count is left as it was (a 1-thread session
   * sets it for its kernels only while it runs) */
  {
    omp_set_num_threads(3);
    toplu_session_options_t o1;
    toplu_session_options_init(&o1);
    o1.threads = 1;
    toplu_session_t *s1 = NULL;
    toplu_tensor_t out = {0};
    CHECK(toplu_session_create(m, &o1, &s1, &err) == TOPLU_OK, "1-thread session: %s", err.message);
    if (s1) CHECK(toplu_session_run_with(s1, &in, 1, &out, 1, NULL, &err) == TOPLU_OK, "1-thread run: %s", err.message);
    CHECK(omp_get_max_threads() == 3, "a run changed the caller's omp_get_max_threads() from 3 to %d",
          omp_get_max_threads());
    toplu_tensor_free(&out);
    toplu_session_destroy(s1);
    o1.threads = TOPLU_MAX_THREADS + 1;
    CHECK(toplu_session_create(m, &o1, &s1, &err) == TOPLU_ERR_INVALID_ARGUMENT && strstr(err.message, "threads"),
          "threads above TOPLU_MAX_THREADS: '%s'", err.message);
  }

  toplu_tensor_free(&ref);
  toplu_session_destroy(s);
  return finish_fixture("run options", m, &in, &want);
}
