/*
 * tests/test_choose_threads.c - toplu_session_options_t.choose_threads on a
 * real model (PaddleOCR's direction classifier and its ONNX Runtime fixture,
 * 8 strips of a scanned page).
 *
 *   test_choose_threads MODEL.onnx INPUT.npy EXPECTED.npy
 *
 * 1. A 2-thread session with choose_threads at batch 1 and 8: outputs match
 *    ONNX Runtime (max abs diff <= 1e-4) and a fixed 2-thread session's
 *    (<= 1e-5), on the timed run and on the runs after it.
 * 2. Each new shape is decided once: one note per shape, naming both times,
 *    and the choice follows them (one thread only when at least 5% faster);
 *    toplu_session_plan_threads says the same thread count as the note.
 * 3. Not timed, keeping 2 threads, no note: a run with a deadline, a plan
 *    whose warm-up run is over choose_threads_max_ms (1 ms at batch 8), a
 *    1-thread session.
 * 4. Two threads running a new shape at once on one session: both outputs
 *    right (the plan is never swapped under a running caller).
 * Missing files skip (exit 77).
 */
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "model_check.h"
#include "toplu/toplu.h"

typedef struct {
  int n;
  char text[8][512];
} notes_t;

static void on_log(void *user, toplu_log_level_t level, const char *msg) {
  notes_t *n = user;
  if (level == TOPLU_LOG_NOTE && strstr(msg, "(choose_threads)") && n->n < 8) snprintf(n->text[n->n++], 512, "%s", msg);
}

/* rows [0, rows) of the 8-row fixture input */
static toplu_tensor_t rows_of(const toplu_tensor_t *in, int64_t rows) {
  toplu_tensor_t t = *in;
  t.dims[0] = rows;
  return t;
}

static double max_diff(const toplu_tensor_t *a, const float *b, int64_t n) {
  const float *x = a->data;
  double m = 0;
  for (int64_t i = 0; i < n; i++) {
    double d = fabs((double)x[i] - (double)b[i]);
    if (!(d <= m)) m = d;
  }
  return m;
}

static int run(toplu_session_t *s, const toplu_tensor_t *in, toplu_tensor_t *out, const toplu_run_options_t *ro) {
  memset(out, 0, sizeof *out);
  toplu_error_t err;
  toplu_status_t st = toplu_session_run_with(s, in, 1, out, 1, ro, &err);
  if (st) fprintf(stderr, "run failed: %s\n", err.message);
  return st;
}

/* The note's chosen and other thread counts and times; 0 when it does not parse. */
static int parse_note(const char *msg, int *chosen, double *t_chosen, int *other, double *t_other) {
  const char *p = strstr(msg, "chose ");
  return p && sscanf(p + 6, "%d thread%*[s ](%lf ms a run) over %d (%lf ms)", chosen, t_chosen, other, t_other) == 4;
}

typedef struct {
  toplu_session_t *s;
  toplu_tensor_t in;
  toplu_tensor_t out;
  int st;
} job_t;

static void *run_job(void *arg) {
  job_t *j = arg;
  j->st = run(j->s, &j->in, &j->out, NULL);
  return NULL;
}

int main(int argc, char **argv) {
  if (argc != 4) {
    fprintf(stderr, "usage: test_choose_threads MODEL.onnx INPUT.npy EXPECTED.npy\n");
    return 2;
  }
  toplu_model_t *m = NULL;
  toplu_tensor_t in = {0}, want = {0};
  int rc = load_fixture(argv[1], argv[2], argv[3], &m, &in, &want);
  if (rc) return rc;
  const float *ref = want.data;
  int64_t per_row = toplu_tensor_numel(&want) / want.dims[0];
  toplu_error_t err;

  toplu_session_options_t fo;
  toplu_session_options_init(&fo);
  fo.threads = 2;
  toplu_session_t *fixed = NULL;
  notes_t notes = {0};
  toplu_session_options_t co = fo;
  co.choose_threads = 1;
  co.choose_threads_max_ms = 2000; /* timed whatever the machine's load or a sanitizer's cost */
  co.log = on_log;
  co.log_user = &notes;
  toplu_session_t *chooser = NULL;
  if (toplu_session_create(m, &fo, &fixed, &err) || toplu_session_create(m, &co, &chooser, &err)) {
    fprintf(stderr, "FAIL: %s\n", err.message);
    return 1;
  }

  /* 1, 2: batch 1 and 8 */
  int64_t sizes[2] = {1, 8};
  for (int k = 0; k < 2; k++) {
    toplu_tensor_t x = rows_of(&in, sizes[k]), a, b, c;
    int before = notes.n;
    CHECK(!run(fixed, &x, &a, NULL) && !run(chooser, &x, &b, NULL) && !run(chooser, &x, &c, NULL),
          "batch %lld: runs", (long long)sizes[k]);
    int64_t n = per_row * sizes[k];
    double d_ref = max_diff(&b, ref, n), d_fixed = max_diff(&b, a.data, n), d_again = max_diff(&c, a.data, n);
    CHECK(d_ref <= 1e-4, "batch %lld: chosen plan vs ONNX Runtime max abs diff %g", (long long)sizes[k], d_ref);
    CHECK(d_fixed <= 1e-5 && d_again <= 1e-5, "batch %lld: chosen plan vs fixed 2 threads %g, next run %g",
          (long long)sizes[k], d_fixed, d_again);
    CHECK(notes.n == before + 1, "batch %lld: one note for the new shape (%d)", (long long)sizes[k], notes.n - before);
    int chosen = 0, other = 0;
    double tc = 0, to = 0;
    if (notes.n == before + 1) {
      const char *msg = notes.text[before];
      printf("batch %lld: %s\n", (long long)sizes[k], msg);
      CHECK(parse_note(msg, &chosen, &tc, &other, &to), "note parses: %s", msg);
      CHECK((chosen == 1 && other == 2) || (chosen == 2 && other == 1), "note names 1 and 2 threads: %s", msg);
      if (chosen == 1) CHECK(tc < 0.95 * to, "one thread chosen only when 5%% faster: %s", msg);
      if (chosen == 2) CHECK(!(to < 0.95 * tc), "two threads kept only when one is not 5%% faster: %s", msg);
    }
    int pt = toplu_session_plan_threads(chooser, &x, 1);
    CHECK(pt == chosen, "batch %lld: toplu_session_plan_threads %d, the note says %d", (long long)sizes[k], pt, chosen);
    CHECK(toplu_session_plan_threads(fixed, &x, 1) == 2, "fixed session: 2 threads");
    toplu_tensor_free(&a);
    toplu_tensor_free(&b);
    toplu_tensor_free(&c);
  }

  /* 3: not timed */
  {
    toplu_tensor_t x = rows_of(&in, 2), y;
    toplu_run_options_t ro;
    toplu_run_options_init(&ro);
    ro.deadline_ns = toplu_monotonic_ns() + (int64_t)600 * 1000000000;
    int before = notes.n;
    CHECK(!run(chooser, &x, &y, &ro), "batch 2 with a deadline runs");
    CHECK(max_diff(&y, ref, per_row * 2) <= 1e-4, "batch 2 with a deadline: output right");
    CHECK(notes.n == before && toplu_session_plan_threads(chooser, &x, 1) == 2,
          "a run with a deadline is not timed: 2 threads, no note (%d notes)", notes.n - before);
    toplu_tensor_free(&y);

    notes_t n2 = {0};
    toplu_session_options_t lo = co;
    lo.choose_threads_max_ms = 1;
    lo.log_user = &n2;
    toplu_session_t *s2 = NULL;
    toplu_tensor_t x8 = rows_of(&in, 8);
    CHECK(!toplu_session_create(m, &lo, &s2, &err) && !run(s2, &x8, &y, NULL), "max 1 ms session runs");
    CHECK(n2.n == 0 && toplu_session_plan_threads(s2, &x8, 1) == 2,
          "batch 8 over choose_threads_max_ms 1: not timed, 2 threads (%d notes)", n2.n);
    toplu_tensor_free(&y);
    toplu_session_destroy(s2);

    toplu_session_options_t oo = co;
    oo.threads = 1;
    oo.log_user = &n2;
    CHECK(!toplu_session_create(m, &oo, &s2, &err) && !run(s2, &x, &y, NULL), "1-thread session runs");
    CHECK(n2.n == 0 && toplu_session_plan_threads(s2, &x, 1) == 1, "a 1-thread session: nothing to choose");
    toplu_tensor_free(&y);
    toplu_session_destroy(s2);
  }

  /* 4: two callers on a new shape at once */
  {
    job_t j[2];
    pthread_t t[2];
    for (int i = 0; i < 2; i++) {
      j[i].s = chooser;
      j[i].in = rows_of(&in, 4);
      pthread_create(&t[i], NULL, run_job, &j[i]);
    }
    for (int i = 0; i < 2; i++) pthread_join(t[i], NULL);
    for (int i = 0; i < 2; i++) {
      CHECK(j[i].st == 0 && max_diff(&j[i].out, ref, per_row * 4) <= 1e-4, "concurrent batch 4, caller %d: output right",
            i);
      toplu_tensor_free(&j[i].out);
    }
    int pt = toplu_session_plan_threads(chooser, &j[0].in, 1);
    CHECK(pt == 1 || pt == 2, "concurrent batch 4: %d threads", pt);
  }

  toplu_session_destroy(fixed);
  toplu_session_destroy(chooser);
  toplu_tensor_free(&in);
  toplu_tensor_free(&want);
  toplu_model_destroy(m);
  printf("%s: %d failure(s)\n", failures ? "FAIL" : "ok", failures);
  return failures ? 1 : 0;
}
