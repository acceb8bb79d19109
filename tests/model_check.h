/*
 * tests/model_check.h - what the C tests on real models share: a CHECK that
 * counts failures and goes on, and loading a model with one input and its
 * ONNX Runtime fixture (MODEL.onnx INPUT.npy EXPECTED.npy on the command
 * line).  Header-only, for test programs.
 */
#ifndef TOPLU_TESTS_MODEL_CHECK_H
#define TOPLU_TESTS_MODEL_CHECK_H

#include <stdio.h>
#include <unistd.h>

#include "toplu/toplu.h"

static int failures;
#define CHECK(cond, ...)                                   \
  do {                                                     \
    if (!(cond)) {                                         \
      fprintf(stderr, "FAIL %s:%d: ", __FILE__, __LINE__); \
      fprintf(stderr, __VA_ARGS__);                        \
      fprintf(stderr, "\n");                               \
      failures++;                                          \
    }                                                      \
  } while (0)

/* Load model, input and expected output: 0 done, 77 (skip) when a file is
 * missing, 1 when one cannot be read (said on stderr). */
static int load_fixture(const char *model, const char *input, const char *expected, toplu_model_t **m,
                        toplu_tensor_t *in, toplu_tensor_t *want) {
  if (access(model, R_OK) || access(input, R_OK) || access(expected, R_OK)) {
    fprintf(stderr, "skip: model or fixture missing\n");
    return 77;
  }
  toplu_error_t err;
  if (toplu_model_load(model, NULL, m, &err) || toplu_npy_read(input, in, &err) ||
      toplu_npy_read(expected, want, &err)) {
    fprintf(stderr, "FAIL: %s\n", err.message);
    return 1;
  }
  return 0;
}

/* load_fixture from a test's command line, MODEL.onnx INPUT.npy EXPECTED.npy: 2 with a usage line when it
 * has other arguments, else as load_fixture. */
static inline int load_fixture_args(int argc, char **argv, toplu_model_t **m, toplu_tensor_t *in, toplu_tensor_t *want) {
  if (argc != 4) {
    fprintf(stderr, "usage: %s MODEL.onnx INPUT.npy EXPECTED.npy\n", argc > 0 ? argv[0] : "test");
    return 2;
  }
  return load_fixture(argv[1], argv[2], argv[3], m, in, want);
}

/* Free what load_fixture loaded and give the test's exit status. */
static int finish_fixture(const char *test, toplu_model_t *m, toplu_tensor_t *in, toplu_tensor_t *want) {
  toplu_model_destroy(m);
  toplu_tensor_free(in);
  toplu_tensor_free(want);
  if (failures) {
    fprintf(stderr, "%d checks failed\n", failures);
    return 1;
  }
  printf("%s: all checks passed\n", test);
  return 0;
}

#endif
