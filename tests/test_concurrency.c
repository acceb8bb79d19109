/*
 * tests/test_concurrency.c - sessions are re-entrant: several threads run one
 * loaded model at once (one shared session, and one session each), at mixed
 * batch sizes, and every result equals the one computed alone.
 *
 * Real models: MNIST (fixed batch 1 in the file, run batched) and the
 * PaddleOCR direction classifier (blocked layouts, fused post-ops).  Model
 * paths come from the command line (MODEL H W, repeated); a model that is
 * missing or does not load is a failure naming it, never a skip.
 */
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <stdint.h>
#include <string.h>

#include "toplu/toplu.h"

#define THREADS 4
#define ROUNDS 12
static const int64_t batches[] = {1, 3, 8};
#define NB (int)(sizeof batches / sizeof batches[0])

typedef struct {
  toplu_model_t *model;
  toplu_session_t *shared; /* NULL: each thread makes its own session */
  toplu_tensor_t in[NB];
  toplu_tensor_t want[NB];
  int index;
  int failures;
  char msg[512];
} job_t;

static void fill_input(toplu_tensor_t *t, const toplu_value_info_t *vi, int64_t batch, int64_t h, int64_t w,
                       unsigned seed) {
  int64_t dims[TOPLU_MAX_DIMS];
  for (int i = 0; i < vi->ndim; i++) dims[i] = vi->dims[i];
  dims[0] = batch;
  if (dims[2] < 0) dims[2] = h;
  if (dims[3] < 0) dims[3] = w;
  if (toplu_tensor_alloc(t, vi->dtype, vi->ndim, dims)) abort(); /* test harness only */
  float *p = t->data;
  for (int64_t i = 0; i < toplu_tensor_numel(t); i++) {
    seed = seed * 1103515245u + 12345u;
    p[i] = (float)((seed >> 8) & 0xffff) / 65536.0f * 255.0f;
  }
}

static int compare(const toplu_tensor_t *a, const toplu_tensor_t *b, char *msg, size_t size) {
  if (a->ndim != b->ndim || toplu_tensor_numel(a) != toplu_tensor_numel(b)) {
    snprintf(msg, size, "shape differs");
    return 1;
  }
  const float *x = a->data, *y = b->data;
  for (int64_t i = 0; i < toplu_tensor_numel(a); i++)
    if (!(fabsf(x[i] - y[i]) <= 1e-5f * (1.f + fabsf(y[i])))) {
      snprintf(msg, size, "element %lld: %g vs %g alone", (long long)i, x[i], y[i]);
      return 1;
    }
  return 0;
}

static void *worker(void *arg) {
  job_t *j = arg;
  toplu_session_t *s = j->shared;
  toplu_error_t err;
  if (!s) {
    toplu_session_options_t o;
    toplu_session_options_init(&o);
    o.threads = 1;
    o.batch_override = 1;
    if (toplu_session_create(j->model, &o, &s, &err)) {
      snprintf(j->msg, sizeof j->msg, "session: %s", err.message);
      j->failures++;
      return NULL;
    }
  }
  for (int r = 0; r < ROUNDS; r++) {
    int k = (r + j->index) % NB;
    toplu_tensor_t out = {0};
    if (toplu_session_run(s, &j->in[k], 1, &out, 1)) {
      snprintf(j->msg, sizeof j->msg, "run: %s", toplu_session_last_error(s));
      j->failures++;
      break;
    }
    if (compare(&out, &j->want[k], j->msg, sizeof j->msg)) j->failures++;
    toplu_tensor_free(&out);
  }
  if (!j->shared) toplu_session_destroy(s);
  return NULL;
}

/* Plans for other batch sizes share the packed weights: a session that
 * already holds batch 1's plan grows, for batch 3's, by what a lone batch-3
 * plan takes less its packed weights.  Returns 1 on failure. */
static size_t plan_bytes(toplu_model_t *m, const toplu_tensor_t *first, const toplu_tensor_t *then,
                         toplu_memory_report_t *r) {
  toplu_allocator_t *al;
  toplu_error_t err;
  if (toplu_allocator_create(0, &al)) return 0;
  toplu_session_options_t o;
  toplu_session_options_init(&o);
  o.threads = 1;
  o.batch_override = 1;
  o.allocator = al;
  toplu_session_t *s;
  size_t growth = 0;
  if (!toplu_session_create(m, &o, &s, &err)) {
    if (!first || toplu_session_memory(s, first, 1, r) == TOPLU_OK) {
      size_t before = toplu_allocator_current(al);
      if (toplu_session_memory(s, then, 1, r) == TOPLU_OK) growth = toplu_allocator_current(al) - before;
    }
    toplu_session_destroy(s);
  }
  toplu_allocator_destroy(al);
  return growth;
}

static int check_shared_weights(toplu_model_t *m, const toplu_tensor_t *in1, const toplu_tensor_t *in3,
                                const char *path) {
  toplu_memory_report_t r;
  size_t alone = plan_bytes(m, NULL, in3, &r);
  size_t packed = r.weights_bytes - r.constant_bytes;
  size_t growth = plan_bytes(m, in1, in3, &r);
  if (!alone || !growth) return 1;
  if (packed < (64u << 10)) return 0; /* too few weights to tell */
  int bad = growth + packed > alone + (4u << 10);
  printf("%s: a lone batch-3 plan takes %zu bytes, %zu of them packed weights; after batch 1 it adds %zu: %s\n",
         path, alone, packed, growth, bad ? "FAIL (weights packed twice)" : "ok (weights shared)");
  return bad;
}

static int run_model(const char *path, int64_t h, int64_t w) {
  toplu_model_t *m;
  toplu_error_t err;
  if (toplu_model_load(path, NULL, &m, &err)) {
    fprintf(stderr, "FAIL %s: does not load: %s\n", path, err.message);
    return 1;
  }
  const toplu_value_info_t *vi = toplu_model_input(m, 0);
  toplu_session_options_t o;
  toplu_session_options_init(&o);
  o.threads = 1;
  o.batch_override = 1;
  toplu_session_t *alone, *shared;
  if (toplu_session_create(m, &o, &alone, &err) || toplu_session_create(m, &o, &shared, &err)) {
    fprintf(stderr, "FAIL %s: %s\n", path, err.message);
    return 1;
  }
  job_t jobs[2 * THREADS];
  memset(jobs, 0, sizeof jobs);
  toplu_tensor_t in[NB], want[NB];
  for (int k = 0; k < NB; k++) {
    fill_input(&in[k], vi, batches[k], h, w, 7u + (unsigned)k);
    memset(&want[k], 0, sizeof want[k]);
    if (toplu_session_run(alone, &in[k], 1, &want[k], 1)) {
      fprintf(stderr, "FAIL %s: %s\n", path, toplu_session_last_error(alone));
      return 1;
    }
  }
  if (check_shared_weights(m, &in[0], &in[1], path)) {
    fprintf(stderr, "FAIL %s: plans for batch 1 and 3 do not share their packed weights\n", path);
    return 1;
  }
  pthread_t th[2 * THREADS];
  for (int t = 0; t < 2 * THREADS; t++) {
    jobs[t].model = m;
    jobs[t].shared = t < THREADS ? shared : NULL;
    jobs[t].index = t;
    memcpy(jobs[t].in, in, sizeof in);
    memcpy(jobs[t].want, want, sizeof want);
    pthread_create(&th[t], NULL, worker, &jobs[t]);
  }
  int bad = 0;
  for (int t = 0; t < 2 * THREADS; t++) {
    pthread_join(th[t], NULL);
    if (jobs[t].failures) {
      fprintf(stderr, "FAIL %s thread %d (%s session): %d wrong runs; %s\n", path, t,
              t < THREADS ? "shared" : "own", jobs[t].failures, jobs[t].msg);
      bad = 1;
    }
  }
  printf("%s: %d threads x %d runs on one shared session and %d on their own: %s\n", path, THREADS, ROUNDS, THREADS,
         bad ? "MISMATCH" : "all equal to the single-threaded results");
  for (int k = 0; k < NB; k++) {
    toplu_tensor_free(&in[k]);
    toplu_tensor_free(&want[k]);
  }
  toplu_session_destroy(alone);
  toplu_session_destroy(shared);
  toplu_model_destroy(m);
  return bad;
}

/* ---- toplu_session_last_error across threads (a fresh user's findings of 2026-12-06) ---- */

typedef struct {
  toplu_session_t *s;
  const toplu_model_t *m;
  int64_t h, w, bump;
  pthread_mutex_t mu;
  pthread_cond_t cv;
  int step;        /* the handshake of last_error_ids */
  char got[1024];
} le_t;

/* One run of s with dim 2 wrong by a->bump: it fails. */
static void fail_run(le_t *a) {
  toplu_tensor_t in, out;
  memset(&out, 0, sizeof out);
  toplu_value_info_t vi = *toplu_model_input(a->m, 0);
  vi.dims[2] = (vi.dims[2] > 0 ? vi.dims[2] : a->h) + a->bump; /* dim 2 the model does not take */
  fill_input(&in, &vi, 1, a->h, a->w, 3u);
  if (toplu_session_run(a->s, &in, 1, &out, 1) == TOPLU_OK) toplu_tensor_free(&out);
  toplu_tensor_free(&in);
}

static void *fail_thread(void *arg) {
  fail_run(arg);
  return NULL;
}

static void wait_step(le_t *a, int step) {
  pthread_mutex_lock(&a->mu);
  while (a->step < step) pthread_cond_wait(&a->cv, &a->mu);
  pthread_mutex_unlock(&a->mu);
}

static void set_step(le_t *a, int step) {
  pthread_mutex_lock(&a->mu);
  a->step = step;
  pthread_cond_broadcast(&a->cv);
  pthread_mutex_unlock(&a->mu);
}

/* A thread fails on session 1, which is then destroyed; session 2 is made (often at the same address): the
 * thread's last_error of session 2 must be "" (it gave session 1's message). */
static void *ids_thread(void *arg) {
  le_t *a = arg;
  fail_run(a);
  set_step(a, 1);
  wait_step(a, 2);
  snprintf(a->got, sizeof a->got, "%s", toplu_session_last_error(a->s));
  return NULL;
}

static int check_last_error(const char *path, int64_t h, int64_t w) {
  toplu_model_t *m = NULL;
  toplu_error_t e;
  if (toplu_model_load(path, NULL, &m, &e) != TOPLU_OK) return 0; /* run_model reports it */
  int bad = 0;
  le_t a;
  memset(&a, 0, sizeof a);
  a.m = m, a.h = h, a.w = w;
  pthread_mutex_init(&a.mu, NULL);
  pthread_cond_init(&a.cv, NULL);
  toplu_session_options_t so;
  toplu_session_options_init(&so);
  so.threads = 1;
  if (toplu_session_create(m, &so, &a.s, &e) != TOPLU_OK) abort(); /* test harness only */
  /* the copy another thread's failure hands out stays as it was while a later failure is written */
  pthread_t t;
  a.bump = 1;
  pthread_create(&t, NULL, fail_thread, &a);
  pthread_join(t, NULL);
  const char *p = toplu_session_last_error(a.s);
  char first[1024];
  snprintf(first, sizeof first, "%s", p);
  a.bump = 2;
  pthread_create(&t, NULL, fail_thread, &a);
  pthread_join(t, NULL);
  if (!first[0] || strcmp(p, first)) {
    fprintf(stderr, "FAIL %s: the last error another thread's failure gave ('%s') changed to '%s' under the caller\n",
            path, first, p);
    bad = 1;
  }
  /* a destroyed session's failure is not a new session's */
  a.bump = 3;
  pthread_create(&t, NULL, ids_thread, &a);
  wait_step(&a, 1);
  toplu_session_t *old = a.s;
  toplu_session_destroy(a.s);
  if (toplu_session_create(m, &so, &a.s, &e) != TOPLU_OK) abort();
  int same = a.s == old;
  set_step(&a, 2);
  pthread_join(t, NULL);
  if (a.got[0]) {
    fprintf(stderr, "FAIL %s: a new session%s gave the destroyed one's failure: '%s'\n", path,
            same ? " at the destroyed one's address" : "", a.got);
    bad = 1;
  }
  printf("%s: last_error: another thread's failure is a copy; a new session%s has none of the old one's\n", path,
         same ? " at the destroyed one's address" : "");
  toplu_session_destroy(a.s);
  toplu_model_destroy(m);
  pthread_mutex_destroy(&a.mu);
  pthread_cond_destroy(&a.cv);
  /* numel's sign does not depend on which dim overflows it; a NULL name has the stem "" */
  toplu_tensor_t x;
  memset(&x, 0, sizeof x);
  x.ndim = 3;
  int64_t d1[3] = {INT64_MAX, 2, -3}, d2[3] = {-3, INT64_MAX, 2};
  memcpy(x.dims, d1, sizeof d1);
  int64_t n1 = toplu_tensor_numel(&x);
  memcpy(x.dims, d2, sizeof d2);
  int64_t n2 = toplu_tensor_numel(&x);
  if (n1 != INT64_MIN || n2 != INT64_MIN) {
    fprintf(stderr, "FAIL numel of [max, 2, -3] %lld and of [-3, max, 2] %lld, not INT64_MIN\n", (long long)n1,
            (long long)n2);
    bad = 1;
  }
  char stem[8] = "x";
  toplu_npy_file_stem(NULL, stem, sizeof stem);
  if (stem[0]) {
    fprintf(stderr, "FAIL toplu_npy_file_stem(NULL) gave '%s'\n", stem);
    bad = 1;
  }
  return bad;
}

int main(int argc, char **argv) {
  if (argc < 4 || (argc - 1) % 3 != 0) {
    fprintf(stderr, "usage: test_concurrency MODEL H W [MODEL H W ...]\n");
    return 2;
  }
  int rc = 0;
  for (int i = 1; i + 2 < argc; i += 3) rc |= run_model(argv[i], atoll(argv[i + 1]), atoll(argv[i + 2]));
  rc |= check_last_error(argv[1], atoll(argv[2]), atoll(argv[3]));
  return rc;
}
