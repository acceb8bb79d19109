/* tests/install/consumer.c - a program that embeds an installed libtoplu
 * (tests/install.cmake, tests/test_install.py): MNIST (a model that fixes
 * its batch to 1) on the eight real digits of ../shared/fixtures/mnist, one
 * row per run, against ONNX Runtime's logits (max |diff| within the
 * fixture's tolerance, the same argmax).  It also defines functions named
 * as libtoplu's internals were (pl_buf_free, srv_http_close, onnx__model_proto__unpack):
 * they must not clash with the library's.
 *   consumer MODEL INPUT.npy OUTPUT.npy TOLERANCE
 * Prints "ok N rows, max |diff| D" and exits 0, or says what differs and exits 1. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <toplu/toplu.h>

/* A program's own names that libtoplu's internals used to export. */
void pl_buf_free(void *p);
void pl_buf_free(void *p) { free(p); }
int srv_http_close(int fd);
int srv_http_close(int fd) { return fd; }
int onnx__model_proto__unpack(void);
int onnx__model_proto__unpack(void) { return 7; }

static int fail(const char *what, const toplu_error_t *err) {
  printf("FAIL %s: %s\n", what, err ? err->message : "");
  return 1;
}

int main(int argc, char **argv) {
  if (argc != 5) {
    printf("usage: consumer MODEL INPUT.npy OUTPUT.npy TOLERANCE\n");
    return 2;
  }
  toplu_error_t err = {0};
  toplu_model_t *m = NULL;
  toplu_session_t *s = NULL;
  toplu_tensor_t in = {0}, want = {0};
  if (strcmp(toplu_version(), TOPLU_VERSION_STRING)) return fail("toplu_version() is not the headers' version", NULL);
  if (toplu_model_load(argv[1], NULL, &m, &err)) return fail("toplu_model_load", &err);
  if (toplu_session_create(m, NULL, &s, &err)) return fail("toplu_session_create", &err);
  if (toplu_npy_read(argv[2], &in, &err) || toplu_npy_read(argv[3], &want, &err)) return fail("toplu_npy_read", &err);
  if (in.dtype != TOPLU_DTYPE_FLOAT || want.dtype != TOPLU_DTYPE_FLOAT || in.ndim != 4 || want.ndim != 2 || in.dims[0] != want.dims[0])
    return fail("the fixture's shapes", NULL);
  int64_t rows = in.dims[0], per_row = in.dims[1] * in.dims[2] * in.dims[3], classes = want.dims[1];
  double tol = atof(argv[4]), worst = 0;
  for (int64_t r = 0; r < rows; r++) {
    toplu_tensor_t x = in, y = {0};
    x.dims[0] = 1;
    x.data = (float *)in.data + r * per_row;
    if (toplu_session_run(s, &x, 1, &y, 1)) return fail("toplu_session_run", NULL);
    if (y.ndim != 2 || y.dims[0] != 1 || y.dims[1] != classes) return fail("the output's shape", NULL);
    const float *got = y.data, *ref = (const float *)want.data + r * classes;
    int a = 0, b = 0;
    for (int64_t c = 0; c < classes; c++) {
      double d = fabs((double)got[c] - ref[c]);
      if (d > worst) worst = d;
      if (got[c] > got[a]) a = (int)c;
      if (ref[c] > ref[b]) b = (int)c;
    }
    toplu_tensor_free(&y);
    if (a != b) {
      printf("FAIL row %lld: class %d, ONNX Runtime %d\n", (long long)r, a, b);
      return 1;
    }
  }
  if (worst > tol) {
    printf("FAIL max |diff| %g over the tolerance %g\n", worst, tol);
    return 1;
  }
  printf("ok %lld rows, max |diff| %g (%d)\n", (long long)rows, worst, onnx__model_proto__unpack() + srv_http_close(0));
  toplu_tensor_free(&in);
  toplu_tensor_free(&want);
  toplu_session_destroy(s);
  toplu_model_destroy(m);
  return 0;
}
