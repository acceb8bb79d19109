/*
 * tests/test_strings.c - string tensors end to end (toplu/tensor.h): the
 * models tests/make_string_models.py writes, run through the public API.
 *
 * Expected values: StringNormalizer's (UTF-8 case changes, case-insensitive
 * stopwords, the all-stopwords output) and the integer and moved strings are
 * what ONNX Runtime 1.30 (onnxruntime-node) gave on the same models and
 * inputs when this was written (with locale C.UTF-8: its en_US needs a
 * locale this machine lacks).  Float -> string is the shortest text that
 * reads back (numpy's str()); ONNX Runtime's %.8g agrees except where that
 * needs 9 digits or ends differently (1e-05 here, ORT "9.9999997e-06").
 * Every caller string is malloc'd and freed right after the run, and every
 * output freed with toplu_tensor_free, so ASan (the asan build runs the
 * quick tests) sees any pointer toplu keeps into the caller's memory, or an
 * output block that is not one allocation.
 *
 * Usage: test_strings MODEL_DIR
 */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "toplu/toplu.h"

static const char *g_dir;

/* n caller strings, each its own malloc, in a malloc'd pointer array */
static char **dup_strings(const char *const *s, int n) {
  char **p = malloc(sizeof(char *) * (size_t)(n ? n : 1));
  assert_non_null(p);
  for (int i = 0; i < n; i++) {
    p[i] = malloc(strlen(s[i]) + 1);
    assert_non_null(p[i]);
    strcpy(p[i], s[i]);
  }
  return p;
}

static void free_strings(char **p, int n) {
  for (int i = 0; i < n; i++) free(p[i]);
  free(p);
}

typedef struct loaded {
  toplu_model_t *model;
  toplu_session_t *sess;
} loaded_t;

static loaded_t load(const char *name) {
  char path[1024];
  snprintf(path, sizeof path, "%s/%s.onnx", g_dir, name);
  loaded_t l = {0};
  toplu_error_t err;
  toplu_error_clear(&err);
  if (toplu_model_load(path, NULL, &l.model, &err)) fail_msg("%s: %s", path, err.message);
  if (toplu_session_create(l.model, NULL, &l.sess, &err)) fail_msg("%s: %s", path, err.message);
  return l;
}

static void unload(loaded_t *l) {
  toplu_session_destroy(l->sess);
  toplu_model_destroy(l->model);
}

static toplu_tensor_t strings_in(char **p, int ndim, const int64_t *dims) {
  toplu_tensor_t t = {.dtype = TOPLU_DTYPE_STRING, .ndim = ndim, .data = p};
  memcpy(t.dims, dims, sizeof(int64_t) * (size_t)ndim);
  return t;
}

static void expect_strings(const toplu_tensor_t *t, int ndim, const int64_t *dims, const char *const *want, int n) {
  assert_int_equal(t->dtype, TOPLU_DTYPE_STRING);
  assert_int_equal(t->ndim, ndim);
  for (int d = 0; d < ndim; d++) assert_int_equal(t->dims[d], dims[d]);
  assert_int_equal(toplu_tensor_numel(t), n);
  const char *const *got = t->data;
  assert_non_null(got);
  for (int i = 0; i < n; i++)
    if (strcmp(got[i], want[i])) fail_msg("element %d: got \"%s\", expected \"%s\"", i, got[i], want[i]);
}

/* UPPER, case-insensitive stopwords; the plan is keyed on the strings (not
 * on the caller's pointers, which are freed between runs). */
static void test_normalizer_upper(void **state) {
  (void)state;
  loaded_t l = load("norm_upper");
  static const char *in1[] = {"The", "äpfel", "straße", "çalışma", "Δέλτα", "the", "ÿ", "µ"};
  static const char *want1[] = {"STRAßE", "ÇALIŞMA", "ΔΈΛΤΑ", "Ÿ", "Μ"};
  static const char *in2[] = {"THE", "Äpfel"};
  static const char *want2[] = {""};
  for (int round = 0; round < 2; round++) {
    char **x = dup_strings(in1, 8);
    int64_t d8 = 8, d5 = 5, d2 = 2, d1 = 1;
    toplu_tensor_t in = strings_in(x, 1, &d8), out = {0};
    if (toplu_session_run(l.sess, &in, 1, &out, 1)) fail_msg("%s", toplu_session_last_error(l.sess));
    free_strings(x, 8);
    expect_strings(&out, 1, &d5, want1, 5);
    toplu_tensor_free(&out);
    assert_null(out.data);

    x = dup_strings(in2, 2);
    in = strings_in(x, 1, &d2);
    if (toplu_session_run(l.sess, &in, 1, &out, 1)) fail_msg("%s", toplu_session_last_error(l.sess));
    free_strings(x, 2);
    expect_strings(&out, 1, &d1, want2, 1); /* every element a stopword: [1] holding "" */
    toplu_tensor_free(&out);
  }
  unload(&l);
}

/* LOWER, case-sensitive stopwords, [1, C] */
static void test_normalizer_lower(void **state) {
  (void)state;
  loaded_t l = load("norm_lower");
  static const char *in1[] = {"Monday", "monday", "ÉCOLE", "ПРИВЕТ", "İSTANBUL"};
  static const char *want1[] = {"monday", "école", "привет", "istanbul"};
  char **x = dup_strings(in1, 5);
  int64_t dx[2] = {1, 5}, dy[2] = {1, 4};
  toplu_tensor_t in = strings_in(x, 2, dx), out = {0};
  if (toplu_session_run(l.sess, &in, 1, &out, 1)) fail_msg("%s", toplu_session_last_error(l.sess));
  free_strings(x, 5);
  expect_strings(&out, 2, dy, want1, 4);
  toplu_tensor_free(&out);
  unload(&l);
}

/* float -> string (shortest round trip) -> float gives the bits back */
static void test_cast_round_trip(void **state) {
  (void)state;
  loaded_t l = load("cast_round");
  float xs[16] = {1.0f, 0.1f, 1e-5f, 3.4028235e38f, NAN, INFINITY, -INFINITY, -0.0f, 16777216.0f, 123456.7f,
                  0.039187793f, 1.17549435e-38f, 1e-45f, 100.0f, 1e16f, 12345678.0f};
  static const char *want[16] = {"1", "0.1", "1e-05", "3.4028235e+38", "NaN", "INF", "-INF", "-0", "16777216",
                                 "123456.7", "0.039187793", "1.1754944e-38", "1e-45", "100", "1e+16", "12345678"};
  int64_t n = 16;
  toplu_tensor_t in = {.dtype = TOPLU_DTYPE_FLOAT, .ndim = 1, .dims = {16}, .data = xs}, out[2];
  for (int round = 0; round < 2; round++) { /* the second run reuses the exec context and its pool */
    memset(out, 0, sizeof out);
    if (toplu_session_run(l.sess, &in, 1, out, 2)) fail_msg("%s", toplu_session_last_error(l.sess));
    expect_strings(&out[0], 1, &n, want, 16);
    assert_int_equal(out[1].dtype, TOPLU_DTYPE_FLOAT);
    const float *z = out[1].data;
    for (int i = 0; i < 16; i++) {
      if (isnan(xs[i])) assert_true(isnan(z[i]));
      else if (memcmp(&z[i], &xs[i], 4)) fail_msg("element %d: %.9g came back as %.9g", i, xs[i], z[i]);
    }
    toplu_tensor_free(&out[0]);
    toplu_tensor_free(&out[1]);
  }
  /* a string output with a buffer of the caller's is refused */
  char *mine[16] = {0};
  float zbuf[16];
  memset(out, 0, sizeof out);
  out[0].data = mine;
  out[1].data = zbuf;
  assert_int_equal(toplu_session_run(l.sess, &in, 1, out, 2), TOPLU_ERR_INVALID_ARGUMENT);
  assert_non_null(strstr(toplu_session_last_error(l.sess), "'s'"));
  unload(&l);
}

/* string -> double and int64 (white space around the number allowed), int32 -> string; text that is
 * not a number, and an integer past int64's range (refused, not wrapped) */
static void test_cast_parse(void **state) {
  (void)state;
  loaded_t l = load("cast_parse");
  static const char *in1[] = {" 42", "-7 ", "1000"};
  int32_t ns[3] = {0, INT32_MIN, INT32_MAX};
  static const char *want_ns[] = {"0", "-2147483648", "2147483647"};
  char **x = dup_strings(in1, 3);
  int64_t d3 = 3;
  toplu_tensor_t in[2] = {strings_in(x, 1, &d3), {.dtype = TOPLU_DTYPE_INT32, .ndim = 1, .dims = {3}, .data = ns}};
  toplu_tensor_t out[3];
  memset(out, 0, sizeof out);
  if (toplu_session_run(l.sess, in, 2, out, 3)) fail_msg("%s", toplu_session_last_error(l.sess));
  free_strings(x, 3);
  const double *d = out[0].data;
  const int64_t *i = out[1].data;
  assert_true(d[0] == 42.0 && d[1] == -7.0 && d[2] == 1000.0);
  assert_true(i[0] == 42 && i[1] == -7 && i[2] == 1000);
  expect_strings(&out[2], 1, &d3, want_ns, 3);
  for (int k = 0; k < 3; k++) toplu_tensor_free(&out[k]);

  static const char *bad[] = {"42", "abc", "1"};
  x = dup_strings(bad, 3);
  in[0] = strings_in(x, 1, &d3);
  memset(out, 0, sizeof out);
  assert_int_equal(toplu_session_run(l.sess, in, 2, out, 3), TOPLU_ERR_INVALID_ARGUMENT);
  const char *msg = toplu_session_last_error(l.sess);
  if (!strstr(msg, "'x'") || !strstr(msg, "element 1") || !strstr(msg, "abc") || !strstr(msg, "cast_parse.onnx"))
    fail_msg("the message should name the file, tensor, element and text: %s", msg);
  free_strings(x, 3);
  for (int k = 0; k < 3; k++) toplu_tensor_free(&out[k]);

  static const char *big[] = {"1", "2", "99999999999999999999"};
  x = dup_strings(big, 3);
  in[0] = strings_in(x, 1, &d3);
  memset(out, 0, sizeof out);
  assert_int_equal(toplu_session_run(l.sess, in, 2, out, 3), TOPLU_ERR_INVALID_ARGUMENT);
  msg = toplu_session_last_error(l.sess);
  if (!strstr(msg, "element 2") || !strstr(msg, "int64"))
    fail_msg("an int64 past its range should be refused naming the element and type: %s", msg);
  free_strings(x, 3);
  for (int k = 0; k < 3; k++) toplu_tensor_free(&out[k]);
  unload(&l);
}

/* Concat with a string initializer, Gather, Reshape, Identity of an input */
static void test_moves(void **state) {
  (void)state;
  loaded_t l = load("moves");
  static const char *in1[] = {"a", "b"};
  static const char *want_y[] = {"ünï ☃", "a", "ünï ☃"}, *want_same[] = {"a", "b"};
  char **x = dup_strings(in1, 2);
  int64_t d2 = 2, dy[2] = {1, 3};
  toplu_tensor_t in = strings_in(x, 1, &d2), out[2];
  memset(out, 0, sizeof out);
  if (toplu_session_run(l.sess, &in, 1, out, 2)) fail_msg("%s", toplu_session_last_error(l.sess));
  free_strings(x, 2);
  expect_strings(&out[0], 2, dy, want_y, 3);
  expect_strings(&out[1], 1, &d2, want_same, 2);
  toplu_tensor_free(&out[0]);
  toplu_tensor_free(&out[1]);
  unload(&l);
}

/* A sequence of string tensors as an output (each item its own block) and
 * ConcatFromSequence of it. */
static void test_sequence(void **state) {
  (void)state;
  loaded_t l = load("seq");
  static const char *in1[] = {"α", "β"};
  static const char *want_y[] = {"α", "β", "z"}, *want_z[] = {"z"};
  char **x = dup_strings(in1, 2);
  int64_t d2 = 2, d3 = 3, d1 = 1;
  toplu_tensor_t in = strings_in(x, 1, &d2), out[2];
  memset(out, 0, sizeof out);
  if (toplu_session_run(l.sess, &in, 1, out, 2)) fail_msg("%s", toplu_session_last_error(l.sess));
  free_strings(x, 2);
  assert_int_equal(out[0].kind, TOPLU_KIND_SEQUENCE);
  assert_int_equal(out[0].dims[0], 2);
  const toplu_tensor_t *items = out[0].data;
  expect_strings(&items[0], 1, &d2, in1, 2);
  expect_strings(&items[1], 1, &d1, want_z, 1);
  expect_strings(&out[1], 1, &d3, want_y, 3);
  toplu_tensor_free(&out[0]);
  toplu_tensor_free(&out[1]);
  unload(&l);
}

/* Constant value_strings folded through Cast at load */
static void test_const_fold(void **state) {
  (void)state;
  loaded_t l = load("const_fold");
  toplu_tensor_t out = {0};
  if (toplu_session_run(l.sess, NULL, 0, &out, 1)) fail_msg("%s", toplu_session_last_error(l.sess));
  const float *y = out.data;
  assert_true(y[0] == 2.5f && isinf(y[1]) && y[1] < 0);
  toplu_tensor_free(&out);
  unload(&l);
}

/* An op that does not take strings is refused at load, naming node and tensor. */
static void test_refused(void **state) {
  (void)state;
  char path[1024];
  snprintf(path, sizeof path, "%s/transpose.onnx", g_dir);
  toplu_model_t *m = NULL;
  toplu_error_t err;
  toplu_error_clear(&err);
  assert_int_equal(toplu_model_load(path, NULL, &m, &err), TOPLU_ERR_UNSUPPORTED);
  if (!strstr(err.message, "flip") || !strstr(err.message, "'x'") || !strstr(err.message, "transpose.onnx"))
    fail_msg("the message should name the file, node and tensor: %s", err.message);
  assert_null(m);
}

/* Malformed string initializers: refused at load naming the file and tensor. */
static void test_malformed(void **state) {
  (void)state;
  static const struct {
    const char *name;
    toplu_status_t st;
    const char *says;
  } cases[] = {
      {"bad_raw", TOPLU_ERR_PARSE, "string_data, not raw_data"},
      {"bad_count", TOPLU_ERR_PARSE, "holds 1 strings"},
      {"bad_nul", TOPLU_ERR_UNSUPPORTED, "string 0 holds a NUL byte"},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    char path[1024];
    snprintf(path, sizeof path, "%s/%s.onnx", g_dir, cases[i].name);
    toplu_model_t *m = NULL;
    toplu_error_t err;
    toplu_error_clear(&err);
    toplu_status_t st = toplu_model_load(path, NULL, &m, &err);
    if (st != cases[i].st || !strstr(err.message, cases[i].says) || !strstr(err.message, "'c'") ||
        !strstr(err.message, cases[i].name))
      fail_msg("%s: status %d (want %d): %s", cases[i].name, (int)st, (int)cases[i].st, err.message);
    assert_null(m);
  }
}

/* toplu_tensor_alloc of a string tensor: every element "", one block */
static void test_alloc(void **state) {
  (void)state;
  toplu_tensor_t t = {0};
  int64_t dims[2] = {3, 5};
  assert_int_equal(toplu_tensor_alloc(&t, TOPLU_DTYPE_STRING, 2, dims), TOPLU_OK);
  assert_int_equal(toplu_dtype_size(TOPLU_DTYPE_STRING), sizeof(char *));
  for (int i = 0; i < 15; i++) assert_string_equal(((char **)t.data)[i], "");
  toplu_tensor_free(&t);
  int64_t zero = 0;
  assert_int_equal(toplu_tensor_alloc(&t, TOPLU_DTYPE_STRING, 1, &zero), TOPLU_OK);
  toplu_tensor_free(&t);
}

int main(int argc, char **argv) {
  if (argc != 2) {
    fprintf(stderr, "usage: test_strings MODEL_DIR\n");
    return 2;
  }
  g_dir = argv[1];
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_normalizer_upper), cmocka_unit_test(test_normalizer_lower),
      cmocka_unit_test(test_cast_round_trip),  cmocka_unit_test(test_cast_parse),
      cmocka_unit_test(test_moves),            cmocka_unit_test(test_sequence),
      cmocka_unit_test(test_const_fold),
      cmocka_unit_test(test_refused),          cmocka_unit_test(test_malformed),
      cmocka_unit_test(test_alloc),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
