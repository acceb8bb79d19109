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

int main(int argc, char **argv) {
  if (argc < 4 || (argc - 1) % 3 != 0) {
    fprintf(stderr, "usage: test_concurrency MODEL H W [MODEL H W ...]\n");
    return 2;
  }
  int rc = 0;
  for (int i = 1; i + 2 < argc; i += 3) rc |= run_model(argv[i], atoll(argv[i + 1]), atoll(argv[i + 2]));
  return rc;
}
