/*
 * tests/test_choose_threads.c - toplu_session_options_t.choose_threads on a
 * real model (PaddleOCR's direction classifier and its ONNX Runtime fixture,
 * 8 strips of a scanned page).
 *
 *   test_choose_threads MODEL.onnx INPUT.npy EXPECTED.npy
 *
 * 1. A 2-thread session with choose_threads' default (0) at batch 1 and 8:
 *    outputs match ONNX Runtime (max abs diff <= 1e-4) and a fixed 2-thread
 *    session's (choose_threads -1; <= 1e-5), on the timing run and after.
 * 2. Each new shape is decided once, on its third run: no note after two
 *    runs, one after the third, naming both sides and their times; the
 *    choice follows the rule (one thread only when at least 5% faster than
 *    the whole batch on 2 threads; at batch 8 the split into 2 slices of 4
 *    rows, kept unless 3% slower); toplu_session_plan_threads and
 *    toplu_session_plan_split say the same as the note.
 * 3. Not timed, whole batch on 2 threads, no note: a run with a deadline,
 *    runs that expect fewer than TOPLU_CHOOSE_MIN_RUNS runs left (runs_left;
 *    three runs that do not say then time it, the third with a note), a
 *    plan whose run is over choose_threads_max_ms (1 ms at batch 8), a
 *    1-thread session, a session with choose_threads -1.
 * 4. Two threads running a new shape at once on one session: both outputs
 *    right (the plan is never swapped under a running caller).
 * 5. The split forced (TOPLU_CHOOSE_THREADS=alt) at batches 8, 6, 5 and 3
 *    (2, 2, 5 and 3 slices; more slices than threads, odd rows): outputs
 *    match the fixed session's, into toplu's buffers and into the caller's.
 * 6. A timing cancelled halfway is tried again on a later run.
 * 7. Chosen again when the runs slow down: the whole batch kept (forced),
 *    every run then counted as slow (TOPLU_RECHOOSE_FACTOR=0: the check
 *    does not depend on the machine's load): no re-timing within the first
 *    second, then one (a second note, saying so), and, the split now forced,
 *    runs go to 2 slices with the same outputs.  With TOPLU_RECHOOSE_FACTOR=off
 *    nothing is timed again.
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
  if (level == TOPLU_LOG_NOTE && strstr(msg, "(choose_threads") && n->n < 8) snprintf(n->text[n->n++], 512, "%s", msg);
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

typedef struct {
  int *flag;
  int after_ms;
} cancel_arg_t;

static void *cancel_later(void *arg) {
  cancel_arg_t *c = arg;
  struct timespec d = {0, (long)c->after_ms * 1000000L};
  nanosleep(&d, NULL);
  toplu_run_cancel(c->flag);
  return NULL;
}

/* A side of a note: "1 thread" (1), "2 threads on the whole batch" (2),
 * "K slices of R rows at once, one thread each" (-K). */
static int side_of(const char *p) {
  int k = 0, r = 0;
  if (!strncmp(p, "1 thread (", 10)) return 1;
  if (!strncmp(p, "2 threads on the whole batch", 28)) return 2;
  if (sscanf(p, "%d slices of %d rows at once, one thread each", &k, &r) == 2 && k > 1) return -k;
  return 0;
}

/* The note's chosen and other sides (side_of) and their times; 0 when it does not parse. */
static int parse_note(const char *msg, int *chosen, double *t_chosen, int *other, double *t_other) {
  const char *p = strstr(msg, "chose ");
  if (!p) return 0;
  p += 6;
  *chosen = side_of(p);
  const char *q = strstr(p, " ms a run) over ");
  const char *lp = strstr(p, " (");
  if (!q || !lp || sscanf(lp + 2, "%lf", t_chosen) != 1) return 0;
  q += 16;
  *other = side_of(q);
  const char *lq = strstr(q, " (");
  return lq && sscanf(lq + 2, "%lf", t_other) == 1 && *chosen && *other;
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

/* Two callers run `in` on s at once; j[i] holds each one's status and output. */
static void two_callers(toplu_session_t *s, toplu_tensor_t in, job_t j[2]) {
  pthread_t t[2];
  for (int i = 0; i < 2; i++) {
    j[i].s = s;
    j[i].in = in;
    pthread_create(&t[i], NULL, run_job, &j[i]);
  }
  for (int i = 0; i < 2; i++) pthread_join(t[i], NULL);
}

int main(int argc, char **argv) {
  toplu_model_t *m = NULL;
  toplu_tensor_t in = {0}, want = {0};
  int rc = load_fixture_args(argc, argv, &m, &in, &want);
  if (rc) return rc;
  const float *ref = want.data;
  int64_t per_row = toplu_tensor_numel(&want) / want.dims[0];
  toplu_error_t err;

  /* sections 1-7 time at once on the caller's inputs, whatever a run costs (a sanitizer's build, a loaded
   * machine); section 8 times over the plan's own runs.  Read at session creation. */
  setenv("TOPLU_CHOOSE_LONG_MS", "1000000", 1);
  toplu_session_options_t fo;
  toplu_session_options_init(&fo);
  fo.threads = 2;
  fo.choose_threads = -1;
  toplu_session_t *fixed = NULL;
  notes_t notes = {0};
  toplu_session_options_t co = fo;
  co.choose_threads = 0; /* the default: choose */
  co.choose_threads_max_ms = 2000; /* timed whatever the machine's load or a sanitizer's cost */
  co.log = on_log;
  co.log_user = &notes;
  toplu_session_t *chooser = NULL;
  if (toplu_session_create(m, &fo, &fixed, &err) || toplu_session_create(m, &co, &chooser, &err)) {
    fprintf(stderr, "FAIL: %s\n", err.message);
    return 1;
  }
  const char *forced = getenv("TOPLU_CHOOSE_THREADS");

  /* 1, 2: batch 1 and 8 */
  int64_t sizes[2] = {1, 8};
  for (int k = 0; k < 2; k++) {
    toplu_tensor_t x = rows_of(&in, sizes[k]), a, b, c, d;
    int before = notes.n;
    CHECK(!run(fixed, &x, &a, NULL) && !run(chooser, &x, &b, NULL) && !run(chooser, &x, &c, NULL),
          "batch %lld: runs", (long long)sizes[k]);
    CHECK(notes.n == before, "batch %lld: no note after two runs (%d)", (long long)sizes[k], notes.n - before);
    CHECK(!run(chooser, &x, &d, NULL), "batch %lld: third run", (long long)sizes[k]);
    toplu_tensor_free(&c);
    CHECK(!run(chooser, &x, &c, NULL), "batch %lld: fourth run", (long long)sizes[k]);
    int64_t n = per_row * sizes[k];
    double d_ref = max_diff(&d, ref, n), d_fixed = max_diff(&d, a.data, n), d_again = max_diff(&c, a.data, n);
    CHECK(max_diff(&b, ref, n) <= 1e-4, "batch %lld: first run vs ONNX Runtime", (long long)sizes[k]);
    CHECK(d_ref <= 1e-4, "batch %lld: timing run vs ONNX Runtime max abs diff %g", (long long)sizes[k], d_ref);
    CHECK(d_fixed <= 1e-5 && d_again <= 1e-5, "batch %lld: timing run vs fixed 2 threads %g, next run %g",
          (long long)sizes[k], d_fixed, d_again);
    CHECK(notes.n == before + 1, "batch %lld: one note for the new shape (%d)", (long long)sizes[k], notes.n - before);
    int chosen = 0, other = 0;
    double tc = 0, to = 0;
    if (notes.n == before + 1) {
      const char *msg = notes.text[before];
      printf("batch %lld: %s\n", (long long)sizes[k], msg);
      CHECK(parse_note(msg, &chosen, &tc, &other, &to), "note parses: %s", msg);
      if (sizes[k] == 1)
        CHECK((chosen == 1 && other == 2) || (chosen == 2 && other == 1), "batch 1: 1 thread against 2: %s", msg);
      else
        CHECK((chosen == -2 && other == 2) || (chosen == 2 && other == -2), "batch 8: 2 slices against 2 threads: %s",
              msg);
      if (!forced) {
        if (chosen == 1) CHECK(tc < 0.95 * to, "one thread chosen only when 5%% faster: %s", msg);
        if (chosen == 2 && other == 1) CHECK(!(to < 0.95 * tc), "two threads kept when one is not 5%% faster: %s", msg);
        if (chosen == -2) CHECK(tc <= 1.03 * to, "the split kept only when not 3%% slower: %s", msg);
        if (chosen == 2 && other == -2) CHECK(to > 1.03 * tc, "the whole batch only when the split is 3%% slower: %s", msg);
      }
    }
    int pt = toplu_session_plan_threads(chooser, &x, 1), ps = toplu_session_plan_split(chooser, &x, 1);
    CHECK(pt == (chosen < 0 ? 2 : chosen) && ps == (chosen < 0 ? -chosen : 0),
          "batch %lld: toplu_session_plan_threads %d, plan_split %d, the note says %d", (long long)sizes[k], pt, ps,
          chosen);
    CHECK(toplu_session_plan_threads(fixed, &x, 1) == 2 && toplu_session_plan_split(fixed, &x, 1) == 0,
          "fixed session: 2 threads, whole batch");
    toplu_tensor_free(&a);
    toplu_tensor_free(&b);
    toplu_tensor_free(&c);
    toplu_tensor_free(&d);
  }

  /* 3: not timed (three runs each, so the third would time) */
  {
    toplu_tensor_t x = rows_of(&in, 2), y;
    toplu_run_options_t ro;
    toplu_run_options_init(&ro);
    ro.deadline_ns = toplu_monotonic_ns() + (int64_t)600 * 1000000000;
    int before = notes.n;
    for (int r = 0; r < 3; r++) {
      CHECK(!run(chooser, &x, &y, &ro), "batch 2 with a deadline runs");
      CHECK(max_diff(&y, ref, per_row * 2) <= 1e-4, "batch 2 with a deadline: output right");
      toplu_tensor_free(&y);
    }
    CHECK(notes.n == before && toplu_session_plan_threads(chooser, &x, 1) == 2 &&
              toplu_session_plan_split(chooser, &x, 1) == 0,
          "a run with a deadline is not timed: 2 threads, whole batch, no note (%d notes)", notes.n - before);

    /* runs_left under TOPLU_CHOOSE_MIN_RUNS (a job's last batches): not timed, nor counted towards the third
     * run; three runs that do not say how many are left then time it */
    {
      notes_t n3 = {0};
      toplu_session_options_t lo = co;
      lo.log_user = &n3;
      toplu_session_t *s3 = NULL;
      toplu_tensor_t x8 = rows_of(&in, 8);
      CHECK(!toplu_session_create(m, &lo, &s3, &err), "runs_left: session");
      toplu_run_options_t few;
      toplu_run_options_init(&few);
      for (int r = 0; s3 && r < 5; r++) {
        few.runs_left = TOPLU_CHOOSE_MIN_RUNS - 1 - r;
        CHECK(!run(s3, &x8, &y, &few) && max_diff(&y, ref, per_row * 8) <= 1e-4, "runs_left %lld: run right",
              (long long)few.runs_left);
        toplu_tensor_free(&y);
      }
      CHECK(s3 && n3.n == 0 && toplu_session_plan_threads(s3, &x8, 1) == 2 && toplu_session_plan_split(s3, &x8, 1) == 0,
            "five runs with runs_left %d..%d are not timed: 2 threads, whole batch, no note (%d notes)",
            TOPLU_CHOOSE_MIN_RUNS - 5, TOPLU_CHOOSE_MIN_RUNS - 1, n3.n);
      for (int r = 0; s3 && r < 3; r++) {
        CHECK(!run(s3, &x8, &y, NULL) && max_diff(&y, ref, per_row * 8) <= 1e-4, "runs_left unknown: run right");
        toplu_tensor_free(&y);
        CHECK(n3.n == (r == 2), "runs_left unknown: %s after run %d (%d notes)", r == 2 ? "a note" : "no note", r + 1,
              n3.n);
      }
      toplu_session_destroy(s3);
    }

    struct {
      const char *what;
      int threads, choose, max_ms, want_threads;
    } cases[3] = {{"batch 8 over choose_threads_max_ms 1", 2, 0, 1, 2},
                  {"a 1-thread session", 1, 0, 2000, 1},
                  {"choose_threads -1", 2, -1, 2000, 2}};
    toplu_tensor_t x8 = rows_of(&in, 8);
    for (int c = 0; c < 3; c++) {
      notes_t n2 = {0};
      toplu_session_options_t lo = co;
      lo.threads = cases[c].threads;
      lo.choose_threads = cases[c].choose;
      lo.choose_threads_max_ms = cases[c].max_ms;
      lo.log_user = &n2;
      toplu_session_t *s2 = NULL;
      CHECK(!toplu_session_create(m, &lo, &s2, &err), "%s: session", cases[c].what);
      for (int r = 0; s2 && r < 3; r++) {
        CHECK(!run(s2, &x8, &y, NULL) && max_diff(&y, ref, per_row * 8) <= 1e-4, "%s: run %d right", cases[c].what,
              r + 1);
        toplu_tensor_free(&y);
      }
      CHECK(n2.n == 0 && toplu_session_plan_threads(s2, &x8, 1) == cases[c].want_threads &&
                toplu_session_plan_split(s2, &x8, 1) == 0,
            "%s: not timed, %d thread(s) on the whole batch (%d notes)", cases[c].what, cases[c].want_threads, n2.n);
      toplu_session_destroy(s2);
    }
  }

  /* 4: two callers on a new shape at once, twice (the third and fourth runs race) */
  for (int round = 0; round < 2; round++) {
    job_t j[2];
    two_callers(chooser, rows_of(&in, 4), j);
    for (int i = 0; i < 2; i++) {
      CHECK(j[i].st == 0 && max_diff(&j[i].out, ref, per_row * 4) <= 1e-4, "concurrent batch 4, caller %d: output right",
            i);
      toplu_tensor_free(&j[i].out);
    }
    int pt = toplu_session_plan_threads(chooser, &j[0].in, 1);
    CHECK(pt == 1 || pt == 2, "concurrent batch 4: %d threads", pt);
  }

  /* 5: the split forced, slices more than threads and odd rows */
  {
    setenv("TOPLU_CHOOSE_THREADS", "alt", 1);
    notes_t n5 = {0};
    toplu_session_options_t so = co;
    so.log_user = &n5;
    toplu_session_t *s5 = NULL, *one = NULL;
    CHECK(!toplu_session_create(m, &so, &s5, &err), "forced split: session");
    toplu_session_options_t o1 = co;
    o1.threads = 1;
    o1.choose_threads = -1;
    o1.log = NULL;
    CHECK(!toplu_session_create(m, &o1, &one, &err), "forced split: one-thread session");
    int64_t rows[4] = {8, 6, 5, 3};
    int want_k[4] = {2, 2, 5, 3};
    for (int c = 0; s5 && c < 4; c++) {
      toplu_tensor_t x = rows_of(&in, rows[c]), a, y;
      CHECK(!run(fixed, &x, &a, NULL), "batch %lld: fixed run", (long long)rows[c]);
      for (int r = 0; r < 4; r++) {
        CHECK(!run(s5, &x, &y, NULL), "batch %lld: run %d", (long long)rows[c], r + 1);
        double dd = max_diff(&y, a.data, per_row * rows[c]);
        CHECK(dd <= 1e-5, "batch %lld run %d: split vs fixed max abs diff %g", (long long)rows[c], r + 1, dd);
        toplu_tensor_free(&y);
      }
      int k = toplu_session_plan_split(s5, &x, 1);
      CHECK(k == want_k[c], "batch %lld: %d slices (want %d)", (long long)rows[c], k, want_k[c]);
      /* the memory report describes the slices' plan: an arena per slice running at once */
      if (one && k > 0) {
        toplu_tensor_t xs = rows_of(&in, rows[c] / k), ys;
        toplu_memory_report_t ms, mo;
        CHECK(!run(one, &xs, &ys, NULL), "batch %lld: one-thread run of a slice", (long long)rows[c]);
        toplu_tensor_free(&ys);
        CHECK(!toplu_session_memory(s5, &x, 1, &ms) && !toplu_session_memory(one, &xs, 1, &mo),
              "batch %lld: memory reports", (long long)rows[c]);
        size_t conc = k < 2 ? (size_t)k : 2;
        CHECK(mo.activation_bytes > 0 && ms.activation_bytes == mo.activation_bytes * conc &&
                  ms.workspace_bytes == mo.workspace_bytes * conc && ms.flops == mo.flops * k &&
                  ms.n_nodes == mo.n_nodes,
              "batch %lld: split memory report: activation %zu (slice plan %zu x %zu), flops %lld (%lld x %d), "
              "nodes %d (%d)",
              (long long)rows[c], ms.activation_bytes, mo.activation_bytes, conc, (long long)ms.flops,
              (long long)mo.flops, k, ms.n_nodes, mo.n_nodes);
      }
      /* into the caller's buffer */
      float *buf = malloc((size_t)(per_row * rows[c]) * sizeof *buf);
      toplu_tensor_t o;
      memset(&o, 0, sizeof o);
      o.data = buf;
      toplu_error_t e5;
      CHECK(buf && toplu_session_run_with(s5, &x, 1, &o, 1, NULL, &e5) == TOPLU_OK && o.data == buf &&
                o.dims[0] == rows[c] && max_diff(&o, a.data, per_row * rows[c]) <= 1e-5,
            "batch %lld: split into the caller's buffer", (long long)rows[c]);
      free(buf);
      toplu_tensor_free(&a);
    }
    toplu_session_destroy(s5);
    toplu_session_destroy(one);
    unsetenv("TOPLU_CHOOSE_THREADS");
  }

  /* 6: a timing cancelled halfway is tried again on a later run (it used to
   * turn the choice off for the session's life) */
  {
    setenv("TOPLU_CHOOSE_THREADS", "alt", 1);
    toplu_session_options_t so = co;
    so.choose_threads = 1; /* time on the first run */
    so.log = NULL;
    toplu_session_t *s6 = NULL;
    CHECK(!toplu_session_create(m, &so, &s6, &err), "cancelled timing: session");
    toplu_tensor_t x = rows_of(&in, 8), y;
    int flag = 0;
    cancel_arg_t ca = {&flag, 5};
    pthread_t t;
    toplu_run_options_t ro;
    toplu_run_options_init(&ro);
    ro.cancel = &flag;
    if (s6 && !pthread_create(&t, NULL, cancel_later, &ca)) {
      memset(&y, 0, sizeof y);
      toplu_error_t e6;
      toplu_status_t st = toplu_session_run_with(s6, &x, 1, &y, 1, &ro, &e6);
      pthread_join(t, NULL);
      toplu_tensor_free(&y);
      CHECK(st == TOPLU_ERR_CANCELLED, "cancelled timing: status %d (want TOPLU_ERR_CANCELLED)", (int)st);
      CHECK(!y.data, "cancelled timing: no output left allocated (a timing's first run allocated it, and callers "
                     "that free outputs on success only leaked it)");
      CHECK(toplu_session_plan_split(s6, &x, 1) == 0, "cancelled timing: a split chosen by a cancelled timing");
      for (int r = 0; r < 2; r++) {
        CHECK(!run(s6, &x, &y, NULL), "after the cancel: run %d", r + 1);
        toplu_tensor_free(&y);
      }
      CHECK(toplu_session_plan_split(s6, &x, 1) == 2, "after the cancel: %d slices (want 2: timed again, split forced)",
            toplu_session_plan_split(s6, &x, 1));
    }
    toplu_session_destroy(s6);
    unsetenv("TOPLU_CHOOSE_THREADS");
  }

  /* 7: a kept whole-batch plan is timed again when its runs slow down */
  for (int off = 0; off < 2; off++) {
    setenv("TOPLU_CHOOSE_THREADS", "whole", 1);
    setenv("TOPLU_RECHOOSE_FACTOR", off ? "off" : "0", 1);
    notes_t n7 = {0};
    toplu_session_options_t so = co;
    so.choose_threads = 1;
    so.log_user = &n7;
    toplu_session_t *s7 = NULL;
    CHECK(!toplu_session_create(m, &so, &s7, &err), "re-choice: session");
    toplu_tensor_t x = rows_of(&in, 8), y;
    int64_t t0 = toplu_monotonic_ns(); /* before the run whose timing makes the choice (its clock starts inside it) */
    if (s7 && !run(s7, &x, &y, NULL)) {
      toplu_tensor_free(&y);
      CHECK(n7.n == 1 && strstr(n7.text[0], "chose 2 threads on the whole batch") &&
                toplu_session_plan_split(s7, &x, 1) == 0,
            "re-choice: first choice (want the whole batch kept, forced): %d note(s): %s", n7.n, n7.n ? n7.text[0] : "");
      setenv("TOPLU_CHOOSE_THREADS", "alt", 1); /* what a timing keeps when it is made again */
      int k = 0, runs = 0, bad = 0;
      int64_t t_k = 0;
      while (!k && toplu_monotonic_ns() - t0 < (off ? 1500000000LL : 10000000000LL)) {
        if (run(s7, &x, &y, NULL)) {
          bad = 1;
          break;
        }
        runs++;
        if ((k = toplu_session_plan_split(s7, &x, 1))) t_k = toplu_monotonic_ns() - t0;
        if (!k || off) toplu_tensor_free(&y);
      }
      if (off) {
        CHECK(!bad && k == 0 && n7.n == 1, "re-choice off: %d slices, %d note(s) after %d runs (want none)", k, n7.n,
              runs);
      } else {
        CHECK(!bad && k == 2 && runs >= 8 && t_k >= 1000000000LL,
              "re-choice: %d slices after %d runs, %.2f s (want 2, after at least 8 runs and 1 s)", k, runs, t_k / 1e9);
        CHECK(n7.n == 2 && strstr(n7.text[1], "chose 2 slices of 4 rows") &&
                  strstr(n7.text[1], "timed again: its runs had slowed down"),
              "re-choice: second note: %s", n7.n > 1 ? n7.text[1] : "(none)");
        if (k) {
          CHECK(max_diff(&y, ref, per_row * 8) <= 1e-4, "re-choice: outputs against ONNX Runtime");
          toplu_tensor_free(&y);
        }
      }
    }
    toplu_session_destroy(s7);
    unsetenv("TOPLU_CHOOSE_THREADS");
    unsetenv("TOPLU_RECHOOSE_FACTOR");
  }

  /* 8: a long run is timed over the plan's next runs, one side a run, on the callers' own inputs: no run
   * beyond the caller's (ResNet-50 at batch 8: five more runs of 310 ms in a 64-row job until 2026-12-06) */
  unsetenv("TOPLU_CHOOSE_LONG_MS");
  for (int f = 0; f < 3; f++) {
    const char *force = f == 0 ? NULL : f == 1 ? "alt" : "whole";
    if (force) setenv("TOPLU_CHOOSE_THREADS", force, 1);
    setenv("TOPLU_CHOOSE_LONG_MS", "0", 1); /* every run counts as long */
    notes_t n8 = {0};
    toplu_session_options_t so = co;
    so.log_user = &n8;
    toplu_session_t *s8 = NULL;
    CHECK(!toplu_session_create(m, &so, &s8, &err), "spread timing: session");
    unsetenv("TOPLU_CHOOSE_LONG_MS");
    toplu_tensor_t x = rows_of(&in, 8), a, y;
    CHECK(!run(fixed, &x, &a, NULL), "spread timing: fixed run");
    int note_at = 0;
    /* runs 1-2 plain, 3 the first timed run (the alternative built), 4 the alternative's warm run, 5-8 two
     * rounds of one timed run a side; a run with a deadline between them is not a step */
    for (int r = 1; s8 && r <= 10; r++) {
      toplu_run_options_t ro;
      toplu_run_options_init(&ro);
      ro.deadline_ns = toplu_monotonic_ns() + (int64_t)600 * 1000000000;
      if (r == 6) {
        CHECK(!run(s8, &x, &y, &ro), "spread timing: a run with a deadline");
        CHECK(max_diff(&y, a.data, per_row * 8) <= 1e-5, "spread timing: the deadline run's outputs");
        toplu_tensor_free(&y);
      }
      CHECK(!run(s8, &x, &y, NULL), "spread timing: run %d", r);
      double dd = max_diff(&y, a.data, per_row * 8), dr = max_diff(&y, ref, per_row * 8);
      CHECK(dd <= 1e-5 && dr <= 1e-4, "spread timing%s%s: run %d against fixed 2 threads %g, ONNX Runtime %g",
            force ? ", forced " : "", force ? force : "", r, dd, dr);
      toplu_tensor_free(&y);
      if (n8.n && !note_at) note_at = r;
    }
    CHECK(note_at == 8 && n8.n == 1, "spread timing: the note after run %d (want 8), %d note(s)", note_at, n8.n);
    if (n8.n == 1) {
      const char *msg = n8.text[0];
      printf("spread timing%s%s: %s\n", force ? ", forced " : "", force ? force : "", msg);
      int chosen = 0, other = 0;
      double tc = 0, to = 0;
      CHECK(parse_note(msg, &chosen, &tc, &other, &to) && strstr(msg, "timed on the plan's own runs, one side a run"),
            "spread timing: note: %s", msg);
      CHECK((chosen == -2 && other == 2) || (chosen == 2 && other == -2), "spread timing: 2 slices against 2 threads: %s",
            msg);
      if (force) CHECK(chosen == (f == 1 ? -2 : 2), "spread timing: forced %s: %s", force, msg);
      if (!force && chosen == -2) CHECK(tc <= 1.03 * to, "spread timing: the split kept only when not 3%% slower: %s", msg);
      if (!force && chosen == 2) CHECK(to > 1.03 * tc, "spread timing: the whole batch only when the split is 3%% slower: %s", msg);
      int ps = toplu_session_plan_split(s8, &x, 1);
      CHECK(ps == (chosen < 0 ? -chosen : 0), "spread timing: plan_split %d, the note says %d", ps, chosen);
    }
    toplu_tensor_free(&a);
    toplu_session_destroy(s8);
    unsetenv("TOPLU_CHOOSE_THREADS");
  }

  /* 9: two callers at once while a long run's timing is under way: every output right, a step they overlap
   * counts for nothing, and the timing ends (a session destroyed mid-timing frees the alternative: ASan) */
  {
    setenv("TOPLU_CHOOSE_LONG_MS", "0", 1);
    toplu_session_options_t so = co;
    so.log = NULL;
    toplu_session_t *s9 = NULL, *s9b = NULL;
    CHECK(!toplu_session_create(m, &so, &s9, &err) && !toplu_session_create(m, &so, &s9b, &err),
          "spread timing, concurrent: sessions");
    unsetenv("TOPLU_CHOOSE_LONG_MS");
    for (int round = 0; s9 && round < 8; round++) {
      job_t j[2];
      two_callers(s9, rows_of(&in, 4), j);
      for (int i = 0; i < 2; i++) {
        CHECK(j[i].st == 0 && max_diff(&j[i].out, ref, per_row * 4) <= 1e-4,
              "spread timing, concurrent batch 4, round %d, caller %d: output right", round, i);
        toplu_tensor_free(&j[i].out);
      }
    }
    toplu_tensor_t x4 = rows_of(&in, 4), y;
    for (int r = 0; s9 && r < 12; r++) {
      CHECK(!run(s9, &x4, &y, NULL) && max_diff(&y, ref, per_row * 4) <= 1e-4, "spread timing, alone: run %d", r);
      toplu_tensor_free(&y);
    }
    int pt = toplu_session_plan_threads(s9, &x4, 1);
    CHECK(pt == 1 || pt == 2, "spread timing, concurrent: %d threads", pt);
    for (int r = 0; s9b && r < 4; r++) { /* the timing under way: the alternative built, a step run */
      CHECK(!run(s9b, &x4, &y, NULL), "spread timing, destroyed mid-way: run %d", r);
      toplu_tensor_free(&y);
    }
    toplu_session_destroy(s9);
    toplu_session_destroy(s9b);
  }

  /* 10: choose_threads_long_ms -1 times at once on the third run whatever a run takes (a server's warm-up, a
   * benchmark's); a byte bound that holds the plan but not the alternative as well times at once too, and the
   * plan never evicts itself (it did every third run: a fresh user's finding of 2026-12-06) */
  for (int c = 0; c < 2; c++) {
    setenv("TOPLU_CHOOSE_LONG_MS", "0", 1); /* every run counts as long */
    notes_t n10 = {0};
    toplu_session_options_t so = co;
    so.log_user = &n10;
    toplu_tensor_t x = rows_of(&in, 8), y;
    if (c == 0) {
      so.choose_threads_long_ms = -1;
    } else { /* the bound: the plan's own bytes and a little (measured on a session without a bound) */
      toplu_session_options_t mo = fo;
      toplu_session_t *probe = NULL;
      toplu_plan_cache_stats_t ps;
      CHECK(!toplu_session_create(m, &mo, &probe, &err) && !run(probe, &x, &y, NULL), "bound: probe run");
      toplu_tensor_free(&y);
      toplu_session_plan_cache(probe, &ps);
      so.max_plan_bytes = ps.bytes + ps.bytes / 4;
      toplu_session_destroy(probe);
    }
    toplu_session_t *s10 = NULL;
    CHECK(!toplu_session_create(m, &so, &s10, &err), "at once: session");
    unsetenv("TOPLU_CHOOSE_LONG_MS");
    int note_at = 0;
    for (int r = 1; s10 && r <= 6; r++) {
      CHECK(!run(s10, &x, &y, NULL) && max_diff(&y, ref, per_row * 8) <= 1e-4, "%s: run %d right",
            c ? "bound" : "long_ms -1", r);
      toplu_tensor_free(&y);
      if (n10.n && !note_at) note_at = r;
    }
    toplu_plan_cache_stats_t st;
    if (s10) toplu_session_plan_cache(s10, &st);
    CHECK(note_at == 3 && n10.n == 1 && !strstr(n10.text[0], "own runs"),
          "%s: timed at once on run 3 (note after run %d, %d notes: %s)", c ? "a bound the alternative does not fit"
          : "choose_threads_long_ms -1", note_at, n10.n, n10.n ? n10.text[0] : "");
    if (s10)
      CHECK(st.evictions == 0 && st.n_plans == 1 && (!so.max_plan_bytes || st.bytes <= so.max_plan_bytes),
            "%s: the plan stays cached (%lld evictions, %d plans, %zu bytes, bound %zu)", c ? "bound" : "long_ms -1",
            (long long)st.evictions, st.n_plans, st.bytes, so.max_plan_bytes);
    toplu_session_destroy(s10);
  }

  /* 11: toplu_session_steps' strings stay valid while the plan is cached, also after a choice of one thread
   * replaced the entry's plan (it was destroyed: use after free under ASan) */
  {
    setenv("TOPLU_CHOOSE_THREADS", "alt", 1); /* batch 1: one thread kept */
    toplu_session_options_t so = co;
    so.log = NULL;
    toplu_session_t *s11 = NULL;
    CHECK(!toplu_session_create(m, &so, &s11, &err), "steps: session");
    toplu_tensor_t x = rows_of(&in, 1), y;
    toplu_step_info_t steps[256];
    int n = s11 ? toplu_session_steps(s11, &x, 1, steps, 256) : 0;
    char first[256] = "", last[256] = "";
    if (n > 0) {
      snprintf(first, sizeof first, "%s/%s", steps[0].name, steps[0].op_type);
      snprintf(last, sizeof last, "%s/%s", steps[(n < 256 ? n : 256) - 1].name, steps[(n < 256 ? n : 256) - 1].op_type);
    }
    for (int r = 0; s11 && r < 4; r++) {
      CHECK(!run(s11, &x, &y, NULL), "steps: run %d", r + 1);
      toplu_tensor_free(&y);
    }
    toplu_plan_cache_stats_t cs;
    if (s11) toplu_session_plan_cache(s11, &cs);
    CHECK(s11 && n > 0 && toplu_session_plan_threads(s11, &x, 1) == 1 && cs.evictions == 0,
          "steps: one thread chosen, the plan still cached (%d steps)", n);
    if (n > 0) {
      char again[256], again_last[256];
      snprintf(again, sizeof again, "%s/%s", steps[0].name, steps[0].op_type);
      snprintf(again_last, sizeof again_last, "%s/%s", steps[(n < 256 ? n : 256) - 1].name,
               steps[(n < 256 ? n : 256) - 1].op_type);
      CHECK(!strcmp(first, again) && !strcmp(last, again_last), "steps: the strings after the choice (%s, %s)", again,
            again_last);
    }
    toplu_session_destroy(s11);
    unsetenv("TOPLU_CHOOSE_THREADS");
  }

  /* 12: in little memory (TOPLU_MEMORY_AVAILABLE below twice the plan's bytes, as a small container's cgroup
   * limit), no second plan is built to time the threads: a note says so, the whole batch stays on every thread,
   * and the answers are the model's */
  {
    toplu_tensor_t x8 = rows_of(&in, 8), a, r;
    toplu_memory_report_t mr;
    notes_t ln = {0};
    toplu_session_options_t lo = co;
    lo.log_user = &ln;
    toplu_session_t *little = NULL;
    CHECK(!toplu_session_create(m, &lo, &little, &err) && !toplu_session_memory(little, &x8, 1, &mr),
          "little memory: session and plan");
    char avail[32];
    snprintf(avail, sizeof avail, "%zu", mr.plan_bytes + mr.plan_bytes / 2); /* more than one plan, less than two */
    setenv("TOPLU_MEMORY_AVAILABLE", avail, 1);
    CHECK(!run(little, &x8, &a, NULL), "little memory: first run");
    for (int i = 1; i < 5; i++) { /* the default choose_threads times on the third run */
      CHECK(!run(little, &x8, &r, NULL), "little memory: run %d", i);
      if (i < 4) toplu_tensor_free(&r);
    }
    unsetenv("TOPLU_MEMORY_AVAILABLE");
    CHECK(ln.n == 1 && strstr(ln.text[0], "threads not timed") && strstr(ln.text[0], "half of the"),
          "little memory: one note that the threads were not timed (%d: %s)", ln.n, ln.n ? ln.text[0] : "");
    CHECK(toplu_session_plan_split(little, &x8, 1) == 0 && toplu_session_plan_threads(little, &x8, 1) == 2,
          "little memory: the whole batch on 2 threads");
    CHECK(max_diff(&a, ref, per_row * 8) <= 1e-4 && max_diff(&r, ref, per_row * 8) <= 1e-4,
          "little memory: the answers against ONNX Runtime");
    toplu_tensor_free(&a);
    toplu_tensor_free(&r);
    toplu_session_destroy(little);
  }

  toplu_session_destroy(fixed);
  toplu_session_destroy(chooser);
  return finish_fixture("choose_threads", m, &in, &want);
}
