/*
 * tests/test_sequence.c - sequence and optional values through the public API.
 *
 *   test_sequence NODE_TEST_ROOT
 *
 * On three ONNX 1.12 node-test models of Debian's libonnx-testdata
 * (test_sequence_map_add_2_sequences: y0[i] = x0[i] + x1[i] by SequenceMap;
 * test_optional_has_element_empty; test_identity_opt) and one of tensors
 * (test_abs):
 *   - the model says its inputs and outputs are sequences and optionals
 *     (toplu_value_info_t.kind, elem_kind, dtype);
 *   - sums item by item, items of different lengths, as a sequence output
 *     the caller frees with toplu_tensor_free (ASan checks the frees);
 *   - plans are keyed on the sequence length and the items' shapes: 2
 *     items, 3 items, then 2 again is two plans and a cache hit, and each
 *     run's values are right, also from 4 threads at once;
 *   - an empty optional (TOPLU_KIND_NONE) in and out;
 *   - errors name the input: a tensor where a sequence is declared, a
 *     sequence given to a model of tensors, items of the wrong dtype,
 *     sequences of different lengths mapped together, an output buffer
 *     given for a sequence output, a sequence over the item limit, a
 *     sequence without an item array (also while a plan of its length is
 *     cached), an item with no data;
 *   - toplu_session_output_shapes gives a sequence output's kind and length.
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "toplu/toplu.h"

static int failures;
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;

#define CHECK(cond, ...)                 \
  do {                                   \
    if (!(cond)) {                       \
      pthread_mutex_lock(&lock);         \
      printf("FAIL %s:%d: ", __FILE__, __LINE__); \
      printf(__VA_ARGS__);               \
      printf("\n");                      \
      failures++;                        \
      pthread_mutex_unlock(&lock);       \
    }                                    \
  } while (0)

static toplu_model_t *load(const char *root, const char *test) {
  char path[4096];
  snprintf(path, sizeof path, "%s/%s/model.onnx", root, test);
  toplu_model_t *m = NULL;
  toplu_error_t err;
  toplu_error_clear(&err);
  if (toplu_model_load(path, NULL, &m, &err)) {
    printf("FAIL cannot load %s: %s\n", path, err.message);
    failures++;
    return NULL;
  }
  return m;
}

static toplu_tensor_t vec(float *data, int64_t n) {
  toplu_tensor_t t = {.dtype = TOPLU_DTYPE_FLOAT, .ndim = 1, .dims = {n}, .data = data};
  return t;
}

static toplu_tensor_t seq(toplu_tensor_t *items, int64_t n) {
  toplu_tensor_t t = {.kind = TOPLU_KIND_SEQUENCE, .dtype = TOPLU_DTYPE_FLOAT, .ndim = 1, .dims = {n}, .data = items};
  return t;
}

/* Run y0 = x0 + x1 on n items of lengths lens[] (x0 = k + 10 i, x1 = 100 k) and check every value. */
static void run_sums(toplu_session_t *s, int n, const int64_t *lens) {
  float a[4][8], b[4][8];
  toplu_tensor_t xa[4], xb[4];
  for (int k = 0; k < n; k++) {
    for (int64_t i = 0; i < lens[k]; i++) {
      a[k][i] = (float)(k + 10 * i);
      b[k][i] = (float)(100 * k);
    }
    xa[k] = vec(a[k], lens[k]);
    xb[k] = vec(b[k], lens[k]);
  }
  toplu_tensor_t in[2] = {seq(xa, n), seq(xb, n)}, out[1];
  memset(out, 0, sizeof out);
  toplu_error_t err;
  toplu_error_clear(&err);
  toplu_status_t st = toplu_session_run_with(s, in, 2, out, 1, NULL, &err);
  CHECK(st == TOPLU_OK, "run of %d items: %s", n, err.message);
  if (st) return;
  CHECK(out[0].kind == TOPLU_KIND_SEQUENCE && out[0].ndim == 1 && out[0].dims[0] == n,
        "output is a %s of %lld, want a sequence of %d", toplu_kind_name(out[0].kind), (long long)out[0].dims[0], n);
  for (int k = 0; k < n && out[0].kind == TOPLU_KIND_SEQUENCE && out[0].dims[0] == n; k++) {
    const toplu_tensor_t *y = &((const toplu_tensor_t *)out[0].data)[k];
    CHECK(y->dtype == TOPLU_DTYPE_FLOAT && y->ndim == 1 && y->dims[0] == lens[k], "item %d shape", k);
    for (int64_t i = 0; i < lens[k] && y->ndim == 1 && y->dims[0] == lens[k]; i++)
      CHECK(((const float *)y->data)[i] == (float)(k + 10 * i + 100 * k), "item %d [%lld] = %g, want %g", k,
            (long long)i, ((const float *)y->data)[i], (double)(k + 10 * i + 100 * k));
  }
  toplu_tensor_free(&out[0]);
}

typedef struct job {
  toplu_session_t *s;
  int which;
} job_t;

static void *worker(void *arg) {
  const job_t *j = arg;
  static const int64_t two[2] = {3, 2}, three[3] = {1, 4, 2};
  for (int r = 0; r < 20; r++) {
    if ((r + j->which) % 2) run_sums(j->s, 2, two);
    else run_sums(j->s, 3, three);
  }
  return NULL;
}

static void expect_error(toplu_session_t *s, toplu_tensor_t *in, int n_in, toplu_tensor_t *out, int n_out,
                         toplu_status_t want, const char *word, const char *what) {
  toplu_error_t err;
  toplu_error_clear(&err);
  toplu_status_t st = toplu_session_run_with(s, in, n_in, out, n_out, NULL, &err);
  CHECK(st == want && strstr(err.message, word), "%s: got %s '%s', want %s naming '%s'", what, toplu_strerror(st),
        err.message, toplu_strerror(want), word);
}

int main(int argc, char **argv) {
  if (argc != 2) {
    fprintf(stderr, "usage: test_sequence NODE_TEST_ROOT\n");
    return 2;
  }
  const char *root = argv[1];
  toplu_model_t *m = load(root, "test_sequence_map_add_2_sequences");
  toplu_model_t *opt = load(root, "test_optional_has_element_empty");
  toplu_model_t *idopt = load(root, "test_identity_opt");
  toplu_model_t *abs_m = load(root, "test_abs");
  if (!m || !opt || !idopt || !abs_m) return 1;

  const toplu_value_info_t *x0 = toplu_model_input(m, 0), *y0 = toplu_model_output(m, 0);
  CHECK(x0->kind == TOPLU_KIND_SEQUENCE && x0->elem_kind == TOPLU_KIND_SEQUENCE && x0->dtype == TOPLU_DTYPE_FLOAT,
        "x0 is kind %s of %s", toplu_kind_name(x0->kind), toplu_dtype_name(x0->dtype));
  CHECK(y0->kind == TOPLU_KIND_SEQUENCE, "y0 is kind %s", toplu_kind_name(y0->kind));
  const toplu_value_info_t *oi = toplu_model_input(idopt, 0);
  CHECK(oi->kind == TOPLU_KIND_OPTIONAL && oi->elem_kind == TOPLU_KIND_SEQUENCE, "opt_in is %s of %s",
        toplu_kind_name(oi->kind), toplu_kind_name(oi->elem_kind));

  toplu_session_options_t so;
  toplu_session_options_init(&so);
  so.threads = 1;
  toplu_session_t *s = NULL;
  toplu_error_t err;
  toplu_error_clear(&err);
  if (toplu_session_create(m, &so, &s, &err)) {
    printf("FAIL session: %s\n", err.message);
    return 1;
  }
  static const int64_t two[2] = {3, 2}, three[3] = {1, 4, 2};
  run_sums(s, 2, two);
  run_sums(s, 3, three);
  run_sums(s, 2, two);
  toplu_plan_cache_stats_t cs;
  toplu_session_plan_cache(s, &cs);
  CHECK(cs.n_plans == 2 && cs.misses == 2 && cs.hits == 1, "plans %d, misses %lld, hits %lld; want 2, 2, 1",
        cs.n_plans, (long long)cs.misses, (long long)cs.hits);

  pthread_t th[4];
  job_t jobs[4];
  for (int i = 0; i < 4; i++) {
    jobs[i] = (job_t){s, i};
    pthread_create(&th[i], NULL, worker, &jobs[i]);
  }
  for (int i = 0; i < 4; i++) pthread_join(th[i], NULL);
  toplu_session_plan_cache(s, &cs);
  CHECK(cs.n_plans == 2, "after the threads: %d plans, want 2", cs.n_plans);

  /* errors */
  float a[3] = {1, 2, 3};
  int64_t ia[3] = {1, 2, 3};
  toplu_tensor_t it[2] = {vec(a, 3), vec(a, 3)}, bad_items[2] = {vec(a, 3), vec(a, 3)}, out[1];
  bad_items[1].dtype = TOPLU_DTYPE_INT64;
  bad_items[1].data = ia;
  memset(out, 0, sizeof out);
  toplu_tensor_t in[2] = {vec(a, 3), seq(it, 2)};
  expect_error(s, in, 2, out, 1, TOPLU_ERR_SHAPE, "'x0'", "a tensor for a sequence");
  in[0] = seq(it, 2);
  in[1] = seq(bad_items, 2);
  expect_error(s, in, 2, out, 1, TOPLU_ERR_SHAPE, "'x1' is a sequence of float32, but item 1 is int64", "an int64 item");
  in[1] = seq(it, 1);
  expect_error(s, in, 2, out, 1, TOPLU_ERR_SHAPE, "'x1' has 1 items", "sequences of different lengths");
  in[1] = seq(it, 2);
  float buf[16];
  out[0].data = buf;
  expect_error(s, in, 2, out, 1, TOPLU_ERR_INVALID_ARGUMENT, "'y0'", "an output buffer for a sequence");
  out[0].data = NULL;
  /* a sequence of 2 items with no item array while a 2-item plan is cached
   * (the plan-cache lookup read the items before any check) */
  in[1] = seq(NULL, 2);
  expect_error(s, in, 2, out, 1, TOPLU_ERR_INVALID_ARGUMENT, "'x1'", "a sequence without an item array");
  /* an item whose data is NULL (copied from NULL by the plan) */
  toplu_tensor_t no_data[2] = {vec(a, 3), vec(NULL, 3)};
  in[1] = seq(no_data, 2);
  expect_error(s, in, 2, out, 1, TOPLU_ERR_INVALID_ARGUMENT, "'x1'", "an item with no data");
  toplu_tensor_t bad_rank[2] = {vec(a, 3), vec(a, 3)};
  bad_rank[1].ndim = 9;
  in[1] = seq(bad_rank, 2);
  expect_error(s, in, 2, out, 1, TOPLU_ERR_SHAPE, "'x1' item 1 has rank 9", "an item of rank 9");
  in[1] = seq(it, 2);
  in[1].dtype = TOPLU_DTYPE_INT64;
  expect_error(s, in, 2, out, 1, TOPLU_ERR_SHAPE, "'x1' is a sequence of int64, but item 0 is float32",
               "a sequence whose dtype is not its items'");
  in[1] = seq(it, 2);
  static toplu_tensor_t many[5000];
  for (int k = 0; k < 5000; k++) many[k] = vec(a, 3);
  in[0] = seq(many, 5000);
  in[1] = seq(many, 5000);
  out[0].data = NULL;
  expect_error(s, in, 2, out, 1, TOPLU_ERR_UNSUPPORTED, "sequence of 5000 items", "a sequence over the limit");
  run_sums(s, 2, two); /* and the session still runs */
  toplu_tensor_t shp[1];
  memset(shp, 0, sizeof shp);
  in[0] = seq(it, 2);
  in[1] = seq(it, 2);
  toplu_status_t sst = toplu_session_output_shapes(s, in, 2, shp, 1);
  CHECK(sst == TOPLU_OK && shp[0].kind == TOPLU_KIND_SEQUENCE && shp[0].dims[0] == 2 && shp[0].data == NULL &&
            shp[0].dtype == TOPLU_DTYPE_FLOAT,
        "output_shapes of a sequence output: %s, kind %s, %lld items", toplu_strerror(sst), toplu_kind_name(shp[0].kind),
        (long long)shp[0].dims[0]);

  toplu_session_t *sa = NULL;
  if (!toplu_session_create(abs_m, &so, &sa, &err)) {
    toplu_tensor_t one = seq(it, 2);
    toplu_tensor_t o[1];
    memset(o, 0, sizeof o);
    expect_error(sa, &one, 1, o, 1, TOPLU_ERR_SHAPE, "'x'", "a sequence for a tensor");
    toplu_session_destroy(sa);
  }

  /* optionals: none and present */
  toplu_session_t *so2 = NULL;
  if (!toplu_session_create(opt, &so, &so2, &err)) {
    toplu_tensor_t none = {.kind = TOPLU_KIND_NONE}, o[1];
    int32_t v = 5;
    toplu_tensor_t present = {.dtype = TOPLU_DTYPE_INT32, .ndim = 0, .data = &v};
    for (int k = 0; k < 2; k++) {
      memset(o, 0, sizeof o);
      toplu_status_t st = toplu_session_run(so2, k ? &present : &none, 1, o, 1);
      CHECK(st == TOPLU_OK && o[0].kind == TOPLU_KIND_TENSOR && o[0].dtype == TOPLU_DTYPE_BOOL &&
                *(const uint8_t *)o[0].data == (uint8_t)k,
            "OptionalHasElement of %s: %s", k ? "a tensor" : "none", toplu_session_last_error(so2));
      toplu_tensor_free(&o[0]);
    }
    toplu_session_destroy(so2);
  }
  toplu_session_t *si = NULL;
  if (!toplu_session_create(idopt, &so, &si, &err)) {
    toplu_tensor_t none = {.kind = TOPLU_KIND_NONE}, o[1];
    memset(o, 0, sizeof o);
    toplu_status_t st = toplu_session_run(si, &none, 1, o, 1);
    CHECK(st == TOPLU_OK && o[0].kind == TOPLU_KIND_NONE, "Identity of none: %s, kind %s",
          toplu_session_last_error(si), toplu_kind_name(o[0].kind));
    float five[5] = {1, 2, 3, 4, 5};
    toplu_tensor_t item = {.dtype = TOPLU_DTYPE_FLOAT, .ndim = 1, .dims = {5}, .data = five};
    toplu_tensor_t sq = seq(&item, 1);
    st = toplu_session_run(si, &sq, 1, o, 1);
    CHECK(st == TOPLU_OK && o[0].kind == TOPLU_KIND_SEQUENCE && o[0].dims[0] == 1 &&
              !memcmp(((toplu_tensor_t *)o[0].data)[0].data, five, sizeof five),
          "Identity of an optional sequence: %s", toplu_session_last_error(si));
    toplu_tensor_free(&o[0]);
    toplu_session_destroy(si);
  }

  toplu_session_destroy(s);
  toplu_model_destroy(m);
  toplu_model_destroy(opt);
  toplu_model_destroy(idopt);
  toplu_model_destroy(abs_m);
  if (failures) {
    printf("%d failures\n", failures);
    return 1;
  }
  printf("sequence API: all checks passed\n");
  return 0;
}
