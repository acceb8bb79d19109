/*
 * The KServe v2 protocol codec (src/serve/protocol.c) on real models: the
 * PaddleOCR direction classifier (x [N, 3, 48, 192] float -> softmax [N, 2],
 * served with max_batch_size 32), MNIST (Input3 [1, 1, 28, 28], served with
 * max_batch_size 0), and tiny Identity models per datatype that
 * tests/serve_protocol_models.py makes at setup (x [N, 3] -> y).
 *
 * usage: test_serve_protocol CLS.onnx MNIST.onnx DIR_OF_IDENTITY_MODELS
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>
#include <jansson.h>
#include <math.h>

#include "serve/protocol.h"
#include "toplu/model.h"

static const char *g_cls_path, *g_mnist_path, *g_dir;
static toplu_model_t *g_cls, *g_mnist, *g_two;

static toplu_model_t *load(const char *path) {
  toplu_model_t *m = NULL;
  toplu_error_t err;
  memset(&err, 0, sizeof err);
  if (toplu_model_load(path, NULL, &m, &err) != TOPLU_OK) {
    fprintf(stderr, "cannot load %s: %s\n", path, err.message);
    return NULL;
  }
  return m;
}

static toplu_model_t *load_identity(const char *dtype) {
  char path[1024];
  snprintf(path, sizeof path, "%s/identity_%s.onnx", g_dir, dtype);
  toplu_model_t *m = load(path);
  assert_non_null(m);
  return m;
}

/* ---------------------------------------------------------------- helpers */

static int parse_str(const toplu_model_t *m, int64_t mbs, const char *json, srv_infer_t *r, char *err, size_t n) {
  return srv_parse_infer(m, mbs, json, strlen(json), -1, r, err, n);
}

/* A 400 whose message holds want. */
static void expect_400_body(const toplu_model_t *m, int64_t mbs, const char *body, size_t len, int64_t hl,
                            const char *want) {
  srv_infer_t r;
  char err[1024];
  int rc = srv_parse_infer(m, mbs, body, len, hl, &r, err, sizeof err);
  if (rc != 400 || !strstr(err, want))
    fail_msg("wanted 400 with \"%s\", got %d \"%s\" for %.300s", want, rc, err, body);
  assert_null(r.mem);
  assert_null(r.inputs);
  srv_infer_free(&r);
}

static void expect_400(const toplu_model_t *m, int64_t mbs, const char *json, const char *want) {
  expect_400_body(m, mbs, json, strlen(json), -1, want);
}

/* header JSON + binary tail in one body; *hl the header length. */
static char *binary_body(const char *header, const void *tail, size_t tail_len, size_t *len, int64_t *hl) {
  size_t h = strlen(header);
  char *b = malloc(h + tail_len + 1);
  assert_non_null(b);
  memcpy(b, header, h);
  if (tail_len) memcpy(b + h, tail, tail_len);
  b[h + tail_len] = 0;
  *len = h + tail_len;
  *hl = (int64_t)h;
  return b;
}

/* The flat JSON array of n floats v[i] = f(i) */
static char *float_array(size_t n, float scale, int nested_cls) {
  pl_buf_t b = {0};
  (void)nested_cls;
  pl_buf_putc(&b, '[');
  for (size_t i = 0; i < n; i++) {
    if (i) pl_buf_putc(&b, ',');
    pl_buf_float(&b, (float)i * scale - 1.0f);
  }
  pl_buf_putc(&b, ']');
  pl_buf_putc(&b, 0);
  return b.data;
}

/* ---------------------------------------------------------------- datatypes */

static void test_datatype_names(void **state) {
  (void)state;
  const toplu_dtype_t all[] = {TOPLU_DTYPE_BOOL,  TOPLU_DTYPE_UINT8,   TOPLU_DTYPE_UINT16, TOPLU_DTYPE_UINT32,
                               TOPLU_DTYPE_UINT64, TOPLU_DTYPE_INT8,   TOPLU_DTYPE_INT16,  TOPLU_DTYPE_INT32,
                               TOPLU_DTYPE_INT64, TOPLU_DTYPE_FLOAT16, TOPLU_DTYPE_FLOAT,  TOPLU_DTYPE_DOUBLE,
                               TOPLU_DTYPE_STRING, TOPLU_DTYPE_BFLOAT16};
  for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) {
    const char *n = srv_datatype_name(all[i]);
    assert_non_null(n);
    assert_int_equal(srv_datatype_from_name(n), all[i]);
  }
  assert_string_equal(srv_datatype_name(TOPLU_DTYPE_FLOAT), "FP32");
  assert_string_equal(srv_datatype_name(TOPLU_DTYPE_STRING), "BYTES");
  assert_string_equal(srv_datatype_name(TOPLU_DTYPE_FLOAT16), "FP16");
  assert_null(srv_datatype_name(TOPLU_DTYPE_UNDEFINED));
  assert_int_equal(srv_datatype_from_name("fp32"), TOPLU_DTYPE_UNDEFINED);
  assert_int_equal(srv_datatype_from_name("FP33"), TOPLU_DTYPE_UNDEFINED);
  assert_int_equal(srv_datatype_from_name(NULL), TOPLU_DTYPE_UNDEFINED);
}

/* ---------------------------------------------------------------- FP32 on the real models */

static void test_cls_flat_json(void **state) {
  (void)state;
  size_t n = 2 * 3 * 48 * 192;
  char *arr = float_array(n, 0.001f, 0);
  pl_buf_t b = {0};
  pl_buf_printf(&b, "{\"id\":\"q\\u00e91\",\"parameters\":{\"priority\":2,\"timeout\":5000},\"inputs\":[{\"name\":\"x\","
                    "\"shape\":[2,3,48,192],\"datatype\":\"FP32\",\"data\":%s}]}", arr);
  srv_infer_t r;
  char err[512];
  assert_int_equal(srv_parse_infer(g_cls, 32, b.data, b.len, -1, &r, err, sizeof err), 0);
  assert_string_equal(r.id, "q\xc3\xa9" "1");
  assert_int_equal(r.n_inputs, 1);
  assert_int_equal(r.rows, 2);
  assert_int_equal(r.priority, 2);
  assert_int_equal(r.timeout_us, 5000);
  assert_int_equal(r.binary_output, 0);
  assert_int_equal(r.inputs[0].index, 0);
  assert_int_equal(r.inputs[0].dtype, TOPLU_DTYPE_FLOAT);
  assert_int_equal(r.inputs[0].ndim, 4);
  assert_int_equal(r.inputs[0].dims[3], 192);
  assert_int_equal(r.inputs[0].nbytes, n * 4);
  const float *f = r.inputs[0].data;
  for (size_t i = 0; i < n; i++)
    if (f[i] != (float)i * 0.001f - 1.0f) fail_msg("element %zu is %g", i, (double)f[i]);
  assert_int_equal(r.n_outputs, 1);
  assert_int_equal(r.outputs[0].index, 0);
  assert_int_equal(r.outputs[0].binary, 0);
  srv_infer_free(&r);
  assert_null(r.mem);
  srv_infer_free(&r); /* twice is safe */
  srv_infer_free(NULL);
  pl_buf_free(&b);
  free(arr);
}

static void test_cls_nested_json(void **state) {
  (void)state;
  /* numpy's tolist() of a [1, 3, 48, 192] array: nested exactly */
  pl_buf_t b = {0};
  pl_buf_puts(&b, "{\"inputs\":[{\"name\":\"x\",\"shape\":[1,3,48,192],\"datatype\":\"FP32\",\"data\":[[");
  int64_t k = 0;
  for (int c = 0; c < 3; c++) {
    pl_buf_puts(&b, c ? ",[" : "[");
    for (int h = 0; h < 48; h++) {
      pl_buf_puts(&b, h ? ",[" : "[");
      for (int w = 0; w < 192; w++, k++) pl_buf_printf(&b, w ? ",%lld" : "%lld", (long long)(k % 1000) - 500);
      pl_buf_putc(&b, ']');
    }
    pl_buf_putc(&b, ']');
  }
  pl_buf_puts(&b, "]]}]}");
  srv_infer_t r;
  char err[512];
  assert_int_equal(srv_parse_infer(g_cls, 32, b.data, b.len, -1, &r, err, sizeof err), 0);
  assert_int_equal(r.rows, 1);
  const float *f = r.inputs[0].data;
  for (int64_t i = 0; i < 3 * 48 * 192; i++) assert_true(f[i] == (float)((i % 1000) - 500));
  srv_infer_free(&r);
  pl_buf_free(&b);
}

static void test_cls_binary(void **state) {
  (void)state;
  size_t n = 3 * 3 * 48 * 192;
  float *x = malloc(n * 4);
  for (size_t i = 0; i < n; i++) x[i] = (float)i / 7.0f;
  char hdr[512];
  snprintf(hdr, sizeof hdr,
           "{\"inputs\":[{\"name\":\"x\",\"shape\":[3,3,48,192],\"datatype\":\"FP32\",\"parameters\":{"
           "\"binary_data_size\":%zu}}],\"parameters\":{\"binary_data_output\":true}}",
           n * 4);
  size_t len;
  int64_t hl;
  char *body = binary_body(hdr, x, n * 4, &len, &hl);
  srv_infer_t r;
  char err[512];
  assert_int_equal(srv_parse_infer(g_cls, 32, body, len, hl, &r, err, sizeof err), 0);
  assert_int_equal(r.rows, 3);
  assert_null(r.id);
  /* no copy: the input points into the body */
  assert_ptr_equal(r.inputs[0].data, body + hl);
  assert_int_equal(r.inputs[0].nbytes, n * 4);
  assert_memory_equal(r.inputs[0].data, x, n * 4);
  assert_int_equal(r.binary_output, 1);
  assert_int_equal(r.n_outputs, 1);
  assert_int_equal(r.outputs[0].binary, 1);
  srv_infer_free(&r);
  free(body);
  free(x);
}

static void test_mnist_no_batching(void **state) {
  (void)state;
  char *arr = float_array(784, 1.0f / 784, 0);
  pl_buf_t b = {0};
  pl_buf_printf(&b, "{\"inputs\":[{\"name\":\"Input3\",\"shape\":[1,1,28,28],\"datatype\":\"FP32\",\"data\":%s}]}",
                arr);
  srv_infer_t r;
  char err[512];
  assert_int_equal(srv_parse_infer(g_mnist, 0, b.data, b.len, -1, &r, err, sizeof err), 0);
  assert_int_equal(r.rows, 1);
  assert_int_equal(r.inputs[0].nbytes, 784 * 4);
  assert_true(((const float *)r.inputs[0].data)[783] == 783.0f / 784 - 1.0f);
  srv_infer_free(&r);
  pl_buf_free(&b);
  /* the full shape, not a batch of it */
  expect_400(g_mnist, 0,
             "{\"inputs\":[{\"name\":\"Input3\",\"shape\":[2,1,28,28],\"datatype\":\"FP32\",\"parameters\":{"
             "\"binary_data_size\":6272}}]}",
             "inputs[0].shape[0]: 2 where the model's input 'Input3' is [1, 1, 28, 28]");
  expect_400(g_mnist, 0, "{\"inputs\":[{\"name\":\"Input3\",\"shape\":[1,784],\"datatype\":\"FP32\",\"data\":[]}]}",
             "inputs[0].shape: [1, 784] has rank 2");
  free(arr);
}

/* ---------------------------------------------------------------- every datatype */

typedef struct dt_case {
  const char *model, *datatype;
  toplu_dtype_t dtype;
  const char *json_values; /* 6 values, flat, comma-separated */
  const void *expect;      /* the 6 values as the dtype's bytes */
} dt_case_t;

static void check_dtype(const dt_case_t *c) {
  toplu_model_t *m = load_identity(c->model);
  size_t es = toplu_dtype_size(c->dtype), nb = 6 * es;
  char err[1024];
  srv_infer_t r;
  pl_buf_t b = {0};
  /* flat */
  pl_buf_printf(&b, "{\"inputs\":[{\"name\":\"x\",\"shape\":[2,3],\"datatype\":\"%s\",\"data\":[%s]}]}", c->datatype,
                c->json_values);
  int rc = srv_parse_infer(m, 8, b.data, b.len, -1, &r, err, sizeof err);
  if (rc) fail_msg("%s flat: %d %s", c->datatype, rc, err);
  assert_int_equal(r.inputs[0].dtype, c->dtype);
  assert_int_equal(r.inputs[0].nbytes, nb);
  assert_memory_equal(r.inputs[0].data, c->expect, nb);
  srv_infer_free(&r);
  /* nested [[a,b,c],[d,e,f]]: split the 6 values at the third comma */
  const char *v = c->json_values;
  const char *cut = v;
  for (int commas = 0; *cut && commas < 3; cut++)
    if (*cut == ',' && ++commas == 3) break;
  b.len = 0;
  pl_buf_printf(&b, "{\"inputs\":[{\"name\":\"x\",\"shape\":[2,3],\"datatype\":\"%s\",\"data\":[[%.*s],[%s]]}]}",
                c->datatype, (int)(cut - v), v, cut + 1);
  rc = srv_parse_infer(m, 8, b.data, b.len, -1, &r, err, sizeof err);
  if (rc) fail_msg("%s nested: %d %s (%s)", c->datatype, rc, err, b.data);
  assert_memory_equal(r.inputs[0].data, c->expect, nb);
  srv_infer_free(&r);
  /* binary */
  char hdr[256];
  snprintf(hdr, sizeof hdr,
           "{\"inputs\":[{\"name\":\"x\",\"shape\":[2,3],\"datatype\":\"%s\",\"parameters\":{\"binary_data_size\":%zu}}]}",
           c->datatype, nb);
  size_t len;
  int64_t hl;
  char *body = binary_body(hdr, c->expect, nb, &len, &hl);
  rc = srv_parse_infer(m, 8, body, len, hl, &r, err, sizeof err);
  if (rc) fail_msg("%s binary: %d %s", c->datatype, rc, err);
  assert_ptr_equal(r.inputs[0].data, body + hl);
  assert_memory_equal(r.inputs[0].data, c->expect, nb);
  srv_infer_free(&r);
  /* one byte short and one byte over */
  expect_400_body(m, 8, body, len - 1, hl, "inputs[0] ('x').parameters.binary_data_size");
  free(body);
  unsigned char *more = calloc(1, nb + 1);
  memcpy(more, c->expect, nb);
  body = binary_body(hdr, more, nb + 1, &len, &hl);
  expect_400_body(m, 8, body, len, hl, "add up to");
  free(body);
  free(more);
  /* the wrong datatype */
  b.len = 0;
  const char *other = c->dtype == TOPLU_DTYPE_DOUBLE ? "FP32" : "FP64";
  pl_buf_printf(&b, "{\"inputs\":[{\"name\":\"x\",\"shape\":[2,3],\"datatype\":\"%s\",\"data\":[%s]}]}", other,
                c->json_values);
  char want[128];
  snprintf(want, sizeof want, "inputs[0] ('x'): datatype %s does not match the model's %s", other, c->datatype);
  expect_400(m, 8, b.data, want);
  pl_buf_free(&b);
  toplu_model_destroy(m);
}

static void test_dtype_bool(void **state) {
  (void)state;
  const uint8_t e[] = {1, 0, 0, 1, 1, 0};
  dt_case_t c = {"bool", "BOOL", TOPLU_DTYPE_BOOL, "true,false,false,true,true,false", e};
  check_dtype(&c);
  toplu_model_t *m = load_identity("bool");
  /* strict: numbers are not booleans (Triton takes only true/false) */
  expect_400(m, 8, "{\"inputs\":[{\"name\":\"x\",\"shape\":[1,3],\"datatype\":\"BOOL\",\"data\":[true,1,false]}]}",
             "inputs[0] ('x').data: element 1 is an integer, BOOL takes true or false");
  /* binary bytes other than 0 and 1 */
  const uint8_t bad[] = {0, 1, 2};
  size_t len;
  int64_t hl;
  char *body = binary_body(
      "{\"inputs\":[{\"name\":\"x\",\"shape\":[1,3],\"datatype\":\"BOOL\",\"parameters\":{\"binary_data_size\":3}}]}",
      bad, 3, &len, &hl);
  expect_400_body(m, 8, body, len, hl, "inputs[0] ('x'): BOOL element 2 is byte 2");
  free(body);
  toplu_model_destroy(m);
}

static void test_dtype_uint8(void **state) {
  (void)state;
  const uint8_t e[] = {0, 1, 127, 128, 254, 255};
  dt_case_t c = {"uint8", "UINT8", TOPLU_DTYPE_UINT8, "0,1,127,128,254,255", e};
  check_dtype(&c);
  toplu_model_t *m = load_identity("uint8");
  expect_400(m, 8, "{\"inputs\":[{\"name\":\"x\",\"shape\":[1,3],\"datatype\":\"UINT8\",\"data\":[1,256,3]}]}",
             "inputs[0] ('x').data: element 1 is 256, outside the range of UINT8");
  expect_400(m, 8, "{\"inputs\":[{\"name\":\"x\",\"shape\":[1,3],\"datatype\":\"UINT8\",\"data\":[1,-1,3]}]}",
             "inputs[0] ('x').data: element 1 is -1, outside the range of UINT8");
  toplu_model_destroy(m);
}

static void test_dtype_uint16(void **state) {
  (void)state;
  const uint16_t e[] = {0, 1, 256, 32768, 65534, 65535};
  dt_case_t c = {"uint16", "UINT16", TOPLU_DTYPE_UINT16, "0,1,256,32768,65534,65535", e};
  check_dtype(&c);
}

static void test_dtype_uint32(void **state) {
  (void)state;
  const uint32_t e[] = {0, 1, 65536, 2147483648u, 4294967294u, 4294967295u};
  dt_case_t c = {"uint32", "UINT32", TOPLU_DTYPE_UINT32, "0,1,65536,2147483648,4294967294,4294967295", e};
  check_dtype(&c);
}

static void test_dtype_uint64(void **state) {
  (void)state;
  /* above 2^63-1 too: jansson refuses those literals, the codec reads them exactly */
  const uint64_t e[] = {0, 9007199254740993ull, 9223372036854775807ull, 9223372036854775808ull,
                        18446744073709551614ull, 18446744073709551615ull};
  dt_case_t c = {"uint64", "UINT64", TOPLU_DTYPE_UINT64,
                 "0,9007199254740993,9223372036854775807,9223372036854775808,18446744073709551614,"
                 "18446744073709551615",
                 e};
  check_dtype(&c);
  toplu_model_t *m = load_identity("uint64");
  expect_400(m, 8,
             "{\"inputs\":[{\"name\":\"x\",\"shape\":[1,3],\"datatype\":\"UINT64\",\"data\":[1,18446744073709551616,3]}]}",
             "inputs[0] ('x').data: element 1 is 18446744073709551616, outside the range of UINT64");
  expect_400(m, 8, "{\"inputs\":[{\"name\":\"x\",\"shape\":[1,3],\"datatype\":\"UINT64\",\"data\":[1,-2,3]}]}",
             "element 1 is -2, outside the range of UINT64");
  /* an integer literal beyond int64 inside a string is left alone */
  srv_infer_t r;
  char err[512];
  assert_int_equal(parse_str(m, 8,
                             "{\"id\":\"99999999999999999999\",\"inputs\":[{\"name\":\"x\",\"shape\":[1,3],\"datatype\":"
                             "\"UINT64\",\"data\":[1,2,18446744073709551615]}]}",
                             &r, err, sizeof err),
                   0);
  assert_string_equal(r.id, "99999999999999999999");
  assert_true(((const uint64_t *)r.inputs[0].data)[2] == UINT64_MAX);
  srv_infer_free(&r);
  /* the strings themselves are not numbers */
  expect_400(m, 8,
             "{\"inputs\":[{\"name\":\"x\",\"shape\":[1,3],\"datatype\":\"UINT64\",\"data\":[1,2,\"toplu-big-int:5\"]}]}",
             "element 2 is a string, UINT64 takes integers");
  toplu_model_destroy(m);
}

static void test_dtype_int8(void **state) {
  (void)state;
  const int8_t e[] = {-128, -1, 0, 1, 126, 127};
  dt_case_t c = {"int8", "INT8", TOPLU_DTYPE_INT8, "-128,-1,0,1,126,127", e};
  check_dtype(&c);
}

static void test_dtype_int16(void **state) {
  (void)state;
  const int16_t e[] = {-32768, -1, 0, 1, 32766, 32767};
  dt_case_t c = {"int16", "INT16", TOPLU_DTYPE_INT16, "-32768,-1,0,1,32766,32767", e};
  check_dtype(&c);
}

static void test_dtype_int32(void **state) {
  (void)state;
  const int32_t e[] = {INT32_MIN, -1, 0, 1000, 7, INT32_MAX};
  /* an integral real (7.0, 1e3) is an integer */
  dt_case_t c = {"int32", "INT32", TOPLU_DTYPE_INT32, "-2147483648,-1,0,1e3,7.0,2147483647", e};
  check_dtype(&c);
  toplu_model_t *m = load_identity("int32");
  expect_400(m, 8, "{\"inputs\":[{\"name\":\"x\",\"shape\":[1,3],\"datatype\":\"INT32\",\"data\":[1,2.5,3]}]}",
             "inputs[0] ('x').data: element 1 is 2.5, not an integer");
  expect_400(m, 8, "{\"inputs\":[{\"name\":\"x\",\"shape\":[1,3],\"datatype\":\"INT32\",\"data\":[1,2,2147483648]}]}",
             "inputs[0] ('x').data: element 2 is 2147483648, outside the range of INT32");
  expect_400(m, 8, "{\"inputs\":[{\"name\":\"x\",\"shape\":[1,3],\"datatype\":\"INT32\",\"data\":[1,true,3]}]}",
             "element 1 is true, INT32 takes integers");
  toplu_model_destroy(m);
}

static void test_dtype_int64(void **state) {
  (void)state;
  const int64_t e[] = {INT64_MIN, -9007199254740993ll, -1, 0, 9007199254740993ll, INT64_MAX};
  dt_case_t c = {"int64", "INT64", TOPLU_DTYPE_INT64,
                 "-9223372036854775808,-9007199254740993,-1,0,9007199254740993,9223372036854775807", e};
  check_dtype(&c);
  toplu_model_t *m = load_identity("int64");
  expect_400(m, 8,
             "{\"inputs\":[{\"name\":\"x\",\"shape\":[1,3],\"datatype\":\"INT64\",\"data\":[1,9223372036854775808,3]}]}",
             "element 1 is 9223372036854775808, outside the range of INT64");
  expect_400(m, 8,
             "{\"inputs\":[{\"name\":\"x\",\"shape\":[1,3],\"datatype\":\"INT64\",\"data\":[1,-9223372036854775809,3]}]}",
             "element 1 is -9223372036854775809, outside the range of INT64");
  expect_400(m, 8, "{\"inputs\":[{\"name\":\"x\",\"shape\":[1,3],\"datatype\":\"INT64\",\"data\":[1,9.3e18,3]}]}",
             "element 1 is 9.3e+18, outside the range of INT64");
  toplu_model_destroy(m);
}

static void test_dtype_fp16(void **state) {
  (void)state;
  /* 1, -2, 65504 (largest), 2^-24 (smallest subnormal), 0.1 -> 0x2e66, and
   * 1 + 2^-11 + 2^-40: just above the tie between 1 and 1+2^-10, so up to
   * 0x3c01 (through a float it would tie to even, 0x3c00) */
  const uint16_t e[] = {0x3c00, 0xc000, 0x7bff, 0x0001, 0x2e66, 0x3c01};
  dt_case_t c = {"float16", "FP16", TOPLU_DTYPE_FLOAT16,
                 "1,-2.0,65504,5.9604644775390625e-08,0.1,1.00048828125090949", e};
  check_dtype(&c);
  toplu_model_t *m = load_identity("float16");
  expect_400(m, 8, "{\"inputs\":[{\"name\":\"x\",\"shape\":[1,3],\"datatype\":\"FP16\",\"data\":[1,65520,3]}]}",
             "inputs[0] ('x').data: element 1 is 65520, outside the range of FP16");
  toplu_model_destroy(m);
}

static void test_dtype_fp32(void **state) {
  (void)state;
  const float e[] = {1.0f, -0.5f, 3.4028234663852886e38f, 1e-45f, 0.1f, 16777216.0f};
  dt_case_t c = {"float32", "FP32", TOPLU_DTYPE_FLOAT, "1,-0.5,3.4028234663852886e38,1e-45,0.1,16777216", e};
  check_dtype(&c);
  toplu_model_t *m = load_identity("float32");
  /* NaN and infinities as the strings the responses use */
  srv_infer_t r;
  char err[512];
  assert_int_equal(parse_str(m, 8,
                             "{\"inputs\":[{\"name\":\"x\",\"shape\":[1,3],\"datatype\":\"FP32\",\"data\":[\"NaN\","
                             "\"Infinity\",\"-Infinity\"]}]}",
                             &r, err, sizeof err),
                   0);
  const float *f = r.inputs[0].data;
  assert_true(isnan(f[0]) && isinf(f[1]) && f[1] > 0 && isinf(f[2]) && f[2] < 0);
  srv_infer_free(&r);
  expect_400(m, 8, "{\"inputs\":[{\"name\":\"x\",\"shape\":[1,3],\"datatype\":\"FP32\",\"data\":[1,1e39,3]}]}",
             "inputs[0] ('x').data: element 1 is 1e+39, outside the range of FP32");
  expect_400(m, 8, "{\"inputs\":[{\"name\":\"x\",\"shape\":[1,3],\"datatype\":\"FP32\",\"data\":[1,\"nan\",3]}]}",
             "inputs[0] ('x').data: element 1 is a string, FP32 takes numbers");
  expect_400(m, 8, "{\"inputs\":[{\"name\":\"x\",\"shape\":[1,3],\"datatype\":\"FP32\",\"data\":[1,null,3]}]}",
             "element 1 is null, FP32 takes numbers");
  /* nesting that does not follow the shape is flattened in order, as Triton reads it: three values */
  const char *ragged = "{\"inputs\":[{\"name\":\"x\",\"shape\":[1,3],\"datatype\":\"FP32\",\"data\":[1,[2],3]}]}";
  assert_int_equal(srv_parse_infer(m, 8, ragged, strlen(ragged), -1, &r, err, sizeof err), 0);
  f = r.inputs[0].data;
  assert_true(f[0] == 1.f && f[1] == 2.f && f[2] == 3.f);
  srv_infer_free(&r);
  expect_400(m, 8, "{\"inputs\":[{\"name\":\"x\",\"shape\":[1,3],\"datatype\":\"FP32\",\"data\":[1,[2,5],3]}]}",
             "inputs[0] ('x').data: 3 values where shape [1, 3] has 1 (dim 0)"); /* 4 values: where it departs */
  toplu_model_destroy(m);
}

static void test_dtype_fp64(void **state) {
  (void)state;
  const double e[] = {1.0, -0.5, 1.7976931348623157e308, 5e-324, 0.1, 18446744073709551616.0};
  /* an integer literal beyond uint64 is a fine FP64 */
  dt_case_t c = {"float64", "FP64", TOPLU_DTYPE_DOUBLE, "1,-0.5,1.7976931348623157e308,5e-324,0.1,18446744073709551616",
                 e};
  check_dtype(&c);
}

/* BYTES: the length prefixes are checked, then the datatype is refused for a numeric input. */
static void test_bytes(void **state) {
  (void)state;
  toplu_model_t *m = load_identity("float32");
  unsigned char tail[64];
  size_t n = 0;
  const char *words[] = {"ab", "", "cde"};
  for (int i = 0; i < 3; i++) {
    uint32_t l = (uint32_t)strlen(words[i]);
    tail[n++] = (unsigned char)l, tail[n++] = 0, tail[n++] = 0, tail[n++] = 0;
    memcpy(tail + n, words[i], l);
    n += l;
  }
  char hdr[256];
  size_t len;
  int64_t hl;
  snprintf(hdr, sizeof hdr,
           "{\"inputs\":[{\"name\":\"x\",\"shape\":[1,3],\"datatype\":\"BYTES\",\"parameters\":{\"binary_data_size\":%zu}}]}",
           n);
  char *body = binary_body(hdr, tail, n, &len, &hl);
  expect_400_body(m, 8, body, len, hl, "inputs[0] ('x'): datatype BYTES does not match the model's FP32");
  free(body);
  /* the last length says 4 where 3 bytes are left */
  tail[2 * 4 + 2] = 4;
  body = binary_body(hdr, tail, n, &len, &hl);
  expect_400_body(m, 8, body, len, hl, "inputs[0] ('x'): BYTES element 2 of length 4 at offset 10 runs past");
  free(body);
  /* a prefix cut short */
  snprintf(hdr, sizeof hdr,
           "{\"inputs\":[{\"name\":\"x\",\"shape\":[1,3],\"datatype\":\"BYTES\",\"parameters\":{\"binary_data_size\":2}}]}");
  body = binary_body(hdr, tail, 2, &len, &hl);
  expect_400_body(m, 8, body, len, hl, "BYTES element 0's 4-byte length at offset 0 runs past binary_data_size 2");
  free(body);
  /* too few elements */
  snprintf(hdr, sizeof hdr,
           "{\"inputs\":[{\"name\":\"x\",\"shape\":[1,3],\"datatype\":\"BYTES\",\"parameters\":{\"binary_data_size\":6}}]}");
  body = binary_body(hdr, tail, 6, &len, &hl);
  expect_400_body(m, 8, body, len, hl, "inputs[0] ('x'): 1 BYTES elements in binary_data_size 6 for shape [1, 3]");
  free(body);
  /* JSON strings */
  expect_400(m, 8, "{\"inputs\":[{\"name\":\"x\",\"shape\":[1,3],\"datatype\":\"BYTES\",\"data\":[\"a\",\"b\",\"c\"]}]}",
             "inputs[0] ('x'): datatype BYTES does not match the model's FP32");
  expect_400(m, 8, "{\"inputs\":[{\"name\":\"x\",\"shape\":[1,3],\"datatype\":\"BYTES\",\"data\":[\"a\",2,\"c\"]}]}",
             "inputs[0] ('x').data: an integer among BYTES values");
  toplu_model_destroy(m);
}

/* ---------------------------------------------------------------- malformed requests */

static void test_malformed_json(void **state) {
  (void)state;
  expect_400(g_cls, 32, "{\"inputs\": [", "invalid JSON at line 1");
  expect_400(g_cls, 32, "[1,2]", "the request body is an array, not a JSON object");
  expect_400(g_cls, 32, "{\"inputs\":[],\"inputs\":[]}", "duplicate object key");
  expect_400(g_cls, 32, "{}", "inputs: missing");
  expect_400(g_cls, 32, "{\"inputs\":{}}", "inputs: expected an array, got an object");
  expect_400(g_cls, 32, "{\"inputs\":[]}", "inputs: the model's input 'x' is missing");
  expect_400(g_cls, 32, "{\"id\":5,\"inputs\":[]}", "id: expected a string, got an integer");
  expect_400(g_cls, 32, "{\"parameters\":{\"priority\":-1},\"inputs\":[]}", "parameters.priority");
  expect_400(g_cls, 32, "{\"parameters\":{\"timeout\":1.5},\"inputs\":[]}", "parameters.timeout");
  expect_400(g_cls, 32, "{\"parameters\":{\"binary_data_output\":1},\"inputs\":[]}", "parameters.binary_data_output");
  expect_400(g_cls, 32, "{\"inputs\":[5]}", "inputs[0]: expected an object, got an integer");
  expect_400(g_cls, 32, "{\"inputs\":[{\"shape\":[1,3,48,192],\"datatype\":\"FP32\",\"data\":[]}]}",
             "inputs[0].name: missing");
  /* the body's bytes after the JSON are not JSON: binary data sent without Inference-Header-Content-Length */
  expect_400(g_cls, 32, "{\"inputs\":[]} x",
             "end of file expected near 'x' (bytes follow the JSON: a body with binary tensor data needs the "
             "Inference-Header-Content-Length header");
}

static void test_malformed_inputs(void **state) {
  (void)state;
  const char *x = "{\"inputs\":[{\"name\":\"x\",\"shape\":%s,\"datatype\":\"%s\",\"data\":%s}]}";
  char b[1024];
#define BAD(shape, dt, data, want)                 \
  do {                                             \
    snprintf(b, sizeof b, x, shape, dt, data);     \
    expect_400(g_cls, 32, b, want);                \
  } while (0)
  expect_400(g_cls, 32, "{\"inputs\":[{\"name\":\"x\",\"datatype\":\"FP32\",\"data\":[]}]}",
             "inputs[0].shape: missing (input 'x')");
  expect_400(g_cls, 32, "{\"inputs\":[{\"name\":\"x\",\"shape\":[1,3,48,192],\"data\":[]}]}",
             "inputs[0] ('x').datatype: missing");
  BAD("[1,3,4,4]", "FP33", "[]", "inputs[0] ('x').datatype: unknown datatype 'FP33'");
  BAD("[1,3,4,4]", "FP8", "[]", "INT64, FP16, BF16, FP32, FP64, BYTES)"); /* BF16 is one */
  BAD("[1,3,48,192]", "FP64", "[]", "inputs[0] ('x'): datatype FP64 does not match the model's FP32");
  BAD("[-1,3,48,192]", "FP32", "[]", "inputs[0].shape[0]: -1 is not a dim");
  BAD("[2147483648,3,48,192]", "FP32", "[0]", "inputs[0].shape[0]: 2147483648 is not a dim");
  BAD("[1,3,48,1.5]", "FP32", "[0]", "inputs[0].shape[3]: expected a non-negative integer, got a number");
  BAD("\"1,3,48,192\"", "FP32", "[0]", "inputs[0].shape: expected an array of dims, got a string");
  BAD("[1,3,48]", "FP32", "[0]", "inputs[0].shape: [1, 3, 48] has rank 3, the model's input 'x' is");
  BAD("[1,3,48,192,1,1,1,1,1]", "FP32", "[0]", "inputs[0].shape: 9 dims");
  BAD("[1,4,48,192]", "FP32", "[]", "inputs[0].shape[1]: 4 where the model's input 'x' is [");
  BAD("[1,3,0,192]", "FP32", "[]", "inputs[0].shape[2]: 0 where the model's input 'x' is [");
  BAD("[33,3,48,192]", "FP32", "[]", "inputs[0].shape[0]: batch of 33 rows, outside 1..32");
  BAD("[0,3,48,192]", "FP32", "[]", "inputs[0].shape[0]: batch of 0 rows");
  /* products past 2^40 and past 2^63 */
  BAD("[2147483647,2147483647,2147483647,2147483647,2147483647,2147483647,2147483647,2147483647]", "FP32", "[0]",
      "inputs[0].shape: [2147483647, 2147483647, 2147483647, 2147483647, 2147483647, 2147483647, 2147483647, "
      "2147483647] has more than 2^40 elements");
  BAD("[2147483647,2147483647,1,1]", "FP32", "[0]",
      "inputs[0].shape: [2147483647, 2147483647, 1, 1] has more than 2^40 elements");
  BAD("[32,3,48,192]", "FP32", "[0.0]", "inputs[0] ('x').data: 1 values for shape [32, 3, 48, 192] (884736 elements)");
  BAD("[1,3,48,192]", "FP32", "{\"a\":1}", "inputs[0] ('x').data: expected an array, got an object");
  BAD("[1,3,48,192]", "FP32", "3", "inputs[0] ('x').data: expected an array, got an integer");
  BAD("[1,3,48,192]", "FP32", "[[[[0]]]]", "inputs[0] ('x').data[0]: 1 values where shape [1, 3, 48, 192] has 3 (dim 1)");
  BAD("[1,3,48,192]", "FP32", "[[0],[1],[2]]", "inputs[0] ('x').data: 3 values where shape [1, 3, 48, 192] has 1 (dim 0)");
  snprintf(b, sizeof b, "{\"inputs\":[{\"name\":\"x\",\"shape\":[1,3,48,192],\"datatype\":\"FP32\"}]}");
  expect_400(g_cls, 32, b, "inputs[0] ('x').data: missing");
  snprintf(b, sizeof b,
           "{\"inputs\":[{\"name\":\"x\",\"shape\":[1,3,48,192],\"datatype\":\"FP32\",\"data\":[],\"parameters\":{"
           "\"binary_data_size\":0}}]}");
  expect_400(g_cls, 32, b, "inputs[0] ('x'): both data and parameters.binary_data_size");
  snprintf(b, sizeof b, "{\"inputs\":[{\"name\":\"nope\",\"shape\":[1,3,4,4],\"datatype\":\"FP32\",\"data\":[]}]}");
  expect_400(g_cls, 32, b, "inputs[0]: the model has no input 'nope' (its inputs: 'x')");
  snprintf(b, sizeof b,
           "{\"inputs\":[{\"name\":\"x\",\"shape\":[1,3,48,192],\"datatype\":\"FP32\",\"parameters\":{\"binary_data_"
           "size\":110592}},{\"name\":\"x\",\"shape\":[1,3,48,192],\"datatype\":\"FP32\",\"data\":[]}]}");
  expect_400(g_cls, 32, b, "inputs[1]: input 'x' is given twice (inputs[0] and inputs[1])");
#undef BAD
}

/* 100 values for 27648, nested data of the wrong inner length, on the real model */
static void test_counts_real_model(void **state) {
  (void)state;
  pl_buf_t b = {0};
  pl_buf_puts(&b, "{\"inputs\":[{\"name\":\"x\",\"shape\":[1,3,48,192],\"datatype\":\"FP32\",\"data\":[");
  for (int i = 0; i < 100; i++) pl_buf_puts(&b, i ? ",0.5" : "0.5");
  pl_buf_puts(&b, "]}]}");
  pl_buf_putc(&b, 0);
  expect_400(g_cls, 32, b.data, "inputs[0] ('x').data: 100 values for shape [1, 3, 48, 192] (27648 elements)");
  pl_buf_free(&b);
  /* 27649 values */
  char *arr = float_array(27649, 0.001f, 0);
  pl_buf_printf(&b, "{\"inputs\":[{\"name\":\"x\",\"shape\":[1,3,48,192],\"datatype\":\"FP32\",\"data\":%s}]}", arr);
  expect_400(g_cls, 32, b.data, "inputs[0] ('x').data: 27649 values for shape [1, 3, 48, 192] (27648 elements)");
  pl_buf_free(&b);
  free(arr);
  /* nested with one row of 191 */
  pl_buf_puts(&b, "{\"inputs\":[{\"name\":\"x\",\"shape\":[1,3,48,192],\"datatype\":\"FP32\",\"data\":[[");
  for (int c = 0; c < 3; c++) {
    pl_buf_puts(&b, c ? ",[" : "[");
    for (int h = 0; h < 48; h++) {
      pl_buf_puts(&b, h ? ",[" : "[");
      int wn = c == 2 && h == 7 ? 191 : 192;
      for (int w = 0; w < wn; w++) pl_buf_puts(&b, w ? ",1" : "1");
      pl_buf_putc(&b, ']');
    }
    pl_buf_putc(&b, ']');
  }
  pl_buf_puts(&b, "]]}]}");
  pl_buf_putc(&b, 0);
  expect_400(g_cls, 32, b.data, "inputs[0] ('x').data[0][2][7]: 191 values where shape [1, 3, 48, 192] has 192 (dim 3)");
  pl_buf_free(&b);
}

static void test_binary_lengths(void **state) {
  (void)state;
  const char *hdr =
      "{\"inputs\":[{\"name\":\"x\",\"shape\":[1,3,48,192],\"datatype\":\"FP32\",\"parameters\":{\"binary_data_size\":"
      "110592}}]}";
  char *zeros = calloc(1, 110592 + 64);
  size_t len;
  int64_t hl;
  /* header length beyond the body */
  char *body = binary_body(hdr, zeros, 64, &len, &hl);
  char want[256];
  snprintf(want, sizeof want, "Inference-Header-Content-Length %lld is beyond the body's %zu bytes",
           (long long)hl + 1000000, len);
  expect_400_body(g_cls, 32, body, len, hl + 1000000, want);
  expect_400_body(g_cls, 32, body, len, -5, "Inference-Header-Content-Length -5 is negative");
  /* tail shorter */
  snprintf(want, sizeof want,
           "inputs[0] ('x').parameters.binary_data_size: 110592 bytes at offset 0 run past the 64 bytes of binary data");
  expect_400_body(g_cls, 32, body, len, hl, want);
  free(body);
  /* without the header the whole body is JSON: binary inputs have no data */
  expect_400(g_cls, 32, hdr, "(no Inference-Header-Content-Length: the whole body is JSON)");
  /* binary_data_size that does not match the shape */
  body = binary_body(
      "{\"inputs\":[{\"name\":\"x\",\"shape\":[1,3,48,192],\"datatype\":\"FP32\",\"parameters\":{\"binary_data_size\":"
      "110588}}]}",
      zeros, 110588, &len, &hl);
  expect_400_body(g_cls, 32, body, len, hl,
                  "inputs[0] ('x').parameters.binary_data_size: 110588 bytes, but shape [1, 3, 48, 192] of FP32 is "
                  "27648 elements of 4 bytes");
  free(body);
  /* tail longer */
  body = binary_body(hdr, zeros, 110592 + 10, &len, &hl);
  expect_400_body(g_cls, 32, body, len, hl,
                  "the body holds 110602 bytes of binary data after the JSON header, but the inputs' binary_data_size "
                  "add up to 110592");
  free(body);
  /* a negative binary_data_size */
  body = binary_body("{\"inputs\":[{\"name\":\"x\",\"shape\":[1,3,48,192],\"datatype\":\"FP32\",\"parameters\":{"
                     "\"binary_data_size\":-4}}]}",
                     zeros, 0, &len, &hl);
  expect_400_body(g_cls, 32, body, len, hl, "inputs[0] ('x').parameters.binary_data_size: expected a non-negative");
  free(body);
  free(zeros);
}

/* A huge declared shape with a tiny body: refused before any allocation by
 * the declared size (ASan would report the allocation otherwise). */
static void test_huge_shapes(void **state) {
  (void)state;
  toplu_model_t *m = load_identity("float64");
  /* 2^31-1 x 3 doubles = 48 GiB declared, 3 values present */
  expect_400(m, 0, "{\"inputs\":[{\"name\":\"x\",\"shape\":[2147483647,3],\"datatype\":\"FP64\",\"data\":[1,2,3]}]}",
             "inputs[0] ('x').data: 3 values for shape [2147483647, 3] (6442450941 elements)");
  const double tail[3] = {1, 2, 3};
  size_t len;
  int64_t hl;
  char *body = binary_body("{\"inputs\":[{\"name\":\"x\",\"shape\":[2147483647,3],\"datatype\":\"FP64\",\"parameters\":{"
                           "\"binary_data_size\":24}}]}",
                           tail, 24, &len, &hl);
  expect_400_body(m, 0, body, len, hl, "inputs[0] ('x').parameters.binary_data_size: 24 bytes, but shape");
  free(body);
  /* a declared binary_data_size of 2^62 */
  body = binary_body("{\"inputs\":[{\"name\":\"x\",\"shape\":[2147483647,3],\"datatype\":\"FP64\",\"parameters\":{"
                     "\"binary_data_size\":4611686018427387904}}]}",
                     tail, 24, &len, &hl);
  expect_400_body(m, 0, body, len, hl, "4611686018427387904 bytes at offset 0 run past the 24 bytes");
  free(body);
  toplu_model_destroy(m);
  /* products past 2^40 and 2^63 on the two-input model's symbolic dims */
  expect_400(g_two, 0,
             "{\"inputs\":[{\"name\":\"a\",\"shape\":[2147483647,2147483647],\"datatype\":\"FP32\",\"data\":[1]}]}",
             "inputs[0].shape: [2147483647, 2147483647] has more than 2^40 elements");
  expect_400(g_two, 0, "{\"inputs\":[{\"name\":\"a\",\"shape\":[2147483647,4],\"datatype\":\"FP32\",\"data\":[1]}]}",
             "inputs[0].shape[1]: 4 where the model's input 'a' is [N, 3]");
  /* 2^62 and 2^63 as dims are not dims at all */
  expect_400(g_two, 0, "{\"inputs\":[{\"name\":\"a\",\"shape\":[4611686018427387904,3],\"datatype\":\"FP32\",\"data\":[1]}]}",
             "inputs[0].shape[0]: 4611686018427387904 is not a dim");
  expect_400(g_two, 0, "{\"inputs\":[{\"name\":\"a\",\"shape\":[9223372036854775808,3],\"datatype\":\"FP32\",\"data\":[1]}]}",
             "inputs[0].shape[0]: expected a non-negative integer, got an integer beyond int64 (input 'a')");
  /* just under 2^40 elements: 4 TiB of FP32 declared (past ASan's largest allocation, and past
   * this machine's memory: an allocation by the declared size would fail the test either way) */
  expect_400(g_cls, 32,
             "{\"inputs\":[{\"name\":\"x\",\"shape\":[32,3,65536,174762],\"datatype\":\"FP32\",\"data\":[1,2,3]}]}",
             "inputs[0] ('x').data: 3 values for shape [32, 3, 65536, 174762] (1099507433472 elements)");
  const float three[3] = {1, 2, 3};
  body = binary_body("{\"inputs\":[{\"name\":\"x\",\"shape\":[32,3,65536,174762],\"datatype\":\"FP32\","
                     "\"parameters\":{\"binary_data_size\":12}}]}",
                     three, 12, &len, &hl);
  expect_400_body(g_cls, 32, body, len, hl, "inputs[0] ('x').parameters.binary_data_size: 12 bytes, but shape");
  free(body);
  /* one element more is past 2^40 */
  expect_400(g_cls, 32,
             "{\"inputs\":[{\"name\":\"x\",\"shape\":[32,3,65536,174763],\"datatype\":\"FP32\",\"data\":[1,2,3]}]}",
             "inputs[0].shape: [32, 3, 65536, 174763] has more than 2^40 elements");
}

static void test_two_inputs(void **state) {
  (void)state;
  srv_infer_t r;
  char err[512];
  /* given in the other order: inputs come back in model order; binary data in request order */
  const float a[6] = {1, 2, 3, 4, 5, 6};
  const int64_t bv[4] = {-1, 2, INT64_MAX, INT64_MIN};
  unsigned char tail[16 + 24];
  memcpy(tail, bv, 32);
  char *body;
  size_t len;
  int64_t hl;
  unsigned char t2[32 + 24];
  memcpy(t2, bv, 32);
  memcpy(t2 + 32, a, 24);
  (void)tail;
  body = binary_body("{\"inputs\":[{\"name\":\"b\",\"shape\":[2,2],\"datatype\":\"INT64\",\"parameters\":{\"binary_data_"
                     "size\":32}},{\"name\":\"a\",\"shape\":[2,3],\"datatype\":\"FP32\",\"parameters\":{\"binary_data_"
                     "size\":24}}],\"outputs\":[{\"name\":\"yb\",\"parameters\":{\"binary_data\":true}},{\"name\":\"ya\"}]}",
                     t2, sizeof t2, &len, &hl);
  assert_int_equal(srv_parse_infer(g_two, 4, body, len, hl, &r, err, sizeof err), 0);
  assert_int_equal(r.n_inputs, 2);
  assert_int_equal(r.inputs[0].index, 0);
  assert_ptr_equal(r.inputs[0].data, body + hl + 32);
  assert_ptr_equal(r.inputs[1].data, body + hl);
  assert_memory_equal(r.inputs[0].data, a, 24);
  assert_memory_equal(r.inputs[1].data, bv, 32);
  assert_int_equal(r.rows, 2);
  assert_int_equal(r.n_outputs, 2);
  assert_int_equal(r.outputs[0].index, 1);
  assert_int_equal(r.outputs[0].binary, 1);
  assert_int_equal(r.outputs[1].index, 0);
  assert_int_equal(r.outputs[1].binary, 0);
  srv_infer_free(&r);
  free(body);
  /* JSON and binary mixed */
  body = binary_body("{\"inputs\":[{\"name\":\"a\",\"shape\":[1,3],\"datatype\":\"FP32\",\"data\":[1,2,3]},{\"name\":"
                     "\"b\",\"shape\":[1,2],\"datatype\":\"INT64\",\"parameters\":{\"binary_data_size\":16}}]}",
                     bv, 16, &len, &hl);
  assert_int_equal(srv_parse_infer(g_two, 4, body, len, hl, &r, err, sizeof err), 0);
  assert_memory_equal(r.inputs[0].data, a, 12);
  assert_memory_equal(r.inputs[1].data, bv, 16);
  assert_int_equal(r.n_outputs, 2);
  srv_infer_free(&r);
  free(body);
  expect_400(g_two, 4, "{\"inputs\":[{\"name\":\"a\",\"shape\":[1,3],\"datatype\":\"FP32\",\"data\":[1,2,3]}]}",
             "inputs: the model's input 'b' is missing");
  expect_400(g_two, 4,
             "{\"inputs\":[{\"name\":\"a\",\"shape\":[1,3],\"datatype\":\"FP32\",\"data\":[1,2,3]},{\"name\":\"b\","
             "\"shape\":[2,2],\"datatype\":\"INT64\",\"data\":[1,2,3,4]}]}",
             "inputs[1].shape[0]: 2 rows where inputs[0] has 1 (input 'b')");
  expect_400(g_two, 4,
             "{\"inputs\":[{\"name\":\"a\",\"shape\":[1,3],\"datatype\":\"FP32\",\"data\":[1,2,3]},{\"name\":\"b\","
             "\"shape\":[1,2],\"datatype\":\"INT64\",\"data\":[1,2]}],\"outputs\":[{\"name\":\"zz\"}]}",
             "outputs[0]: the model has no output 'zz' (its outputs: 'ya', 'yb')");
  expect_400(g_two, 4,
             "{\"inputs\":[{\"name\":\"a\",\"shape\":[1,3],\"datatype\":\"FP32\",\"data\":[1,2,3]},{\"name\":\"b\","
             "\"shape\":[1,2],\"datatype\":\"INT64\",\"data\":[1,2]}],\"outputs\":[{\"name\":\"ya\",\"parameters\":{"
             "\"classification\":2}}]}",
             "outputs[0] ('ya').parameters.classification: classification is not supported");
  expect_400(g_two, 4,
             "{\"inputs\":[{\"name\":\"a\",\"shape\":[1,3],\"datatype\":\"FP32\",\"data\":[1,2,3]},{\"name\":\"b\","
             "\"shape\":[1,2],\"datatype\":\"INT64\",\"data\":[1,2]}],\"outputs\":[{\"name\":\"ya\"},{\"name\":\"ya\"}]}",
             "outputs[1]: output 'ya' is requested twice");
}

/* ---------------------------------------------------------------- responses */

static void test_encode_response(void **state) {
  (void)state;
  srv_infer_t r;
  char err[512];
  const float a[3] = {1, 2, 3};
  const int64_t bv[2] = {5, 6};
  char *body;
  size_t len;
  int64_t hl;
  body = binary_body("{\"id\":\"r\\\"1\",\"inputs\":[{\"name\":\"a\",\"shape\":[1,3],\"datatype\":\"FP32\",\"data\":[1,"
                     "2,3]},{\"name\":\"b\",\"shape\":[1,2],\"datatype\":\"INT64\",\"parameters\":{\"binary_data_size\":"
                     "16}}],\"outputs\":[{\"name\":\"yb\",\"parameters\":{\"binary_data\":true}},{\"name\":\"ya\"}]}",
                     bv, 16, &len, &hl);
  assert_int_equal(srv_parse_infer(g_two, 4, body, len, hl, &r, err, sizeof err), 0);
  const float ya[3] = {0.5f, -1e-7f, 3.4028235e38f};
  const int64_t yb[2] = {INT64_MIN, 7};
  toplu_tensor_t outs[2];
  memset(outs, 0, sizeof outs);
  outs[0].dtype = TOPLU_DTYPE_FLOAT, outs[0].ndim = 2, outs[0].dims[0] = 1, outs[0].dims[1] = 3, outs[0].data = (void *)ya;
  outs[1].dtype = TOPLU_DTYPE_INT64, outs[1].ndim = 2, outs[1].dims[0] = 1, outs[1].dims[1] = 2, outs[1].data = (void *)yb;
  pl_buf_t out = {0};
  size_t jl = 0;
  assert_int_equal(srv_encode_infer_response(&r, g_two, "two", "1", outs, &out, &jl), 0);
  const char *want =
      "{\"id\":\"r\\\"1\",\"model_name\":\"two\",\"model_version\":\"1\",\"outputs\":[{\"name\":\"yb\",\"datatype\":"
      "\"INT64\",\"shape\":[1,2],\"parameters\":{\"binary_data_size\":16}},{\"name\":\"ya\",\"datatype\":\"FP32\","
      "\"shape\":[1,3],\"data\":[0.5,-1e-07,3.4028235e+38]}]}";
  assert_int_equal(jl, strlen(want));
  assert_memory_equal(out.data, want, jl);
  assert_int_equal(out.len, jl + 16);
  assert_memory_equal(out.data + jl, yb, 16);
  /* the JSON part reads back with the same values */
  json_error_t je;
  json_t *root = json_loadb(out.data, jl, 0, &je);
  assert_non_null(root);
  json_t *d = json_object_get(json_array_get(json_object_get(root, "outputs"), 1), "data");
  for (int i = 0; i < 3; i++) assert_true((float)json_number_value(json_array_get(d, (size_t)i)) == ya[i]);
  json_decref(root);

  /* the cached form (no id) with an id put in equals the encoding with it */
  char *id = r.id;
  r.id = NULL;
  pl_buf_t noid = {0};
  size_t jl2 = 0;
  assert_int_equal(srv_encode_infer_response(&r, g_two, "two", "1", outs, &noid, &jl2), 0);
  assert_int_equal(jl2, jl - strlen("\"id\":\"r\\\"1\","));
  pl_buf_t with = {0};
  size_t jl3 = 0;
  srv_response_with_id(id, noid.data, noid.len, jl2, &with, &jl3);
  assert_int_equal(jl3, jl);
  assert_int_equal(with.len, out.len);
  assert_memory_equal(with.data, out.data, out.len);
  pl_buf_t same = {0};
  srv_response_with_id(NULL, noid.data, noid.len, jl2, &same, &jl3);
  assert_int_equal(jl3, jl2);
  assert_memory_equal(same.data, noid.data, noid.len);
  r.id = id;

  /* every output as JSON: binary_data_output false and no outputs named; BOOL and FP16 outputs */
  pl_buf_free(&out);
  pl_buf_free(&noid);
  pl_buf_free(&with);
  pl_buf_free(&same);
  srv_infer_free(&r);
  free(body);
  (void)a;
}

static void test_encode_bool_fp16_nonfinite(void **state) {
  (void)state;
  srv_infer_t r;
  char err[512];
  toplu_model_t *mb = load_identity("bool");
  assert_int_equal(parse_str(mb, 4, "{\"inputs\":[{\"name\":\"x\",\"shape\":[1,3],\"datatype\":\"BOOL\",\"data\":[true,false,true]}]}",
                             &r, err, sizeof err),
                   0);
  toplu_tensor_t t;
  memset(&t, 0, sizeof t);
  t.dtype = TOPLU_DTYPE_BOOL, t.ndim = 2, t.dims[0] = 1, t.dims[1] = 3, t.data = (void *)r.inputs[0].data;
  pl_buf_t out = {0};
  size_t jl;
  assert_int_equal(srv_encode_infer_response(&r, mb, "b", "", &t, &out, &jl), 0);
  pl_buf_putc(&out, 0);
  assert_non_null(strstr(out.data, "\"datatype\":\"BOOL\",\"shape\":[1,3],\"data\":[true,false,true]"));
  srv_infer_free(&r);
  pl_buf_free(&out);
  toplu_model_destroy(mb);

  toplu_model_t *mh = load_identity("float16");
  assert_int_equal(parse_str(mh, 4,
                             "{\"inputs\":[{\"name\":\"x\",\"shape\":[1,3],\"datatype\":\"FP16\",\"data\":[0.1,\"NaN\","
                             "\"-Infinity\"]}]}",
                             &r, err, sizeof err),
                   0);
  t.dtype = TOPLU_DTYPE_FLOAT16, t.data = (void *)r.inputs[0].data;
  out.len = 0;
  assert_int_equal(srv_encode_infer_response(&r, mh, "h", "2", &t, &out, &jl), 0);
  pl_buf_putc(&out, 0);
  if (!strstr(out.data, "\"datatype\":\"FP16\",\"shape\":[1,3],\"data\":[0.099975586,\"NaN\",\"-Infinity\"]"))
    fail_msg("%s", out.data);
  srv_infer_free(&r);
  /* a datatype the response cannot hold: 500 */
  assert_int_equal(parse_str(mh, 4, "{\"inputs\":[{\"name\":\"x\",\"shape\":[1,3],\"datatype\":\"FP16\",\"data\":[0,0,0]}]}",
                             &r, err, sizeof err),
                   0);
  t.dtype = TOPLU_DTYPE_STRING;
  out.len = 0;
  assert_int_equal(srv_encode_infer_response(&r, mh, "h", "2", &t, &out, &jl), 500);
  srv_infer_free(&r);
  pl_buf_free(&out);
  toplu_model_destroy(mh);
}

static void test_encode_error(void **state) {
  (void)state;
  pl_buf_t b = {0};
  srv_encode_error(&b, "inputs[0] ('x\"\n\xff\xfe'): bad");
  json_error_t je;
  json_t *root = json_loadb(b.data, b.len, 0, &je);
  assert_non_null(root);
  assert_string_equal(json_string_value(json_object_get(root, "error")), "inputs[0] ('x\"\n\xef\xbf\xbd\xef\xbf\xbd'): bad");
  json_decref(root);
  b.len = 0;
  srv_encode_error(&b, NULL);
  assert_int_equal(b.len, strlen("{\"error\":\"\"}"));
  assert_memory_equal(b.data, "{\"error\":\"\"}", b.len);
  pl_buf_free(&b);
}

/* ---------------------------------------------------------------- cache keys */

static void key_of(const toplu_model_t *m, const char *json, const char *version, pl_buf_t *key) {
  srv_infer_t r;
  char err[512];
  int rc = parse_str(m, 4, json, &r, err, sizeof err);
  if (rc) fail_msg("%d %s", rc, err);
  key->len = 0;
  srv_infer_cache_key(&r, "two", version, key);
  srv_infer_free(&r);
}

static void test_cache_key(void **state) {
  (void)state;
  const char *base = "{\"id\":\"%s\",\"inputs\":[{\"name\":\"a\",\"shape\":[1,3],\"datatype\":\"FP32\",\"data\":%s},{"
                     "\"name\":\"b\",\"shape\":%s,\"datatype\":\"INT64\",\"data\":%s}]%s}";
  char j[1024];
  pl_buf_t k0 = {0}, k1 = {0};
  snprintf(j, sizeof j, base, "one", "[1,2,3]", "[1,2]", "[4,5]", "");
  key_of(g_two, j, "1", &k0);
  /* equal requests (id, nesting and binary-vs-JSON input aside) give equal keys */
  snprintf(j, sizeof j, base, "two", "[[1,2,3]]", "[1,2]", "[[4,5]]", "");
  key_of(g_two, j, "1", &k1);
  assert_int_equal(k0.len, k1.len);
  assert_memory_equal(k0.data, k1.data, k0.len);
  srv_infer_t r;
  char err[256];
  const int64_t bv[2] = {4, 5};
  size_t len;
  int64_t hl;
  char *body = binary_body("{\"inputs\":[{\"name\":\"a\",\"shape\":[1,3],\"datatype\":\"FP32\",\"data\":[1,2,3]},{"
                           "\"name\":\"b\",\"shape\":[1,2],\"datatype\":\"INT64\",\"parameters\":{\"binary_data_size\":16}}]}",
                           bv, 16, &len, &hl);
  assert_int_equal(srv_parse_infer(g_two, 4, body, len, hl, &r, err, sizeof err), 0);
  k1.len = 0;
  srv_infer_cache_key(&r, "two", "1", &k1);
  srv_infer_free(&r);
  free(body);
  assert_int_equal(k0.len, k1.len);
  assert_memory_equal(k0.data, k1.data, k0.len);
  /* each difference changes the key */
  const char *diffs[][5] = {
      {"[1,2,4]", "[1,2]", "[4,5]", "", "1"},
      {"[1,2,3]", "[1,2]", "[4,6]", "", "1"},
      {"[1,2,3]", "[1,2]", "[4,5]", ",\"outputs\":[{\"name\":\"ya\"}]", "1"},
      {"[1,2,3]", "[1,2]", "[4,5]", ",\"outputs\":[{\"name\":\"yb\"},{\"name\":\"ya\"}]", "1"},
      {"[1,2,3]", "[1,2]", "[4,5]", ",\"parameters\":{\"binary_data_output\":true}", "1"},
      {"[1,2,3]", "[1,2]", "[4,5]", ",\"outputs\":[{\"name\":\"ya\",\"parameters\":{\"binary_data\":true}},{\"name\":\"yb\"}]", "1"},
      {"[1,2,3]", "[1,2]", "[4,5]", "", "2"},
  };
  for (size_t i = 0; i < sizeof diffs / sizeof diffs[0]; i++) {
    snprintf(j, sizeof j, base, "one", diffs[i][0], diffs[i][1], diffs[i][2], diffs[i][3]);
    key_of(g_two, j, diffs[i][4], &k1);
    if (k0.len == k1.len && !memcmp(k0.data, k1.data, k0.len)) fail_msg("difference %zu gives the same key", i);
  }
  /* the model name and version are framed by their lengths: ("ab", "c") != ("a", "bc") */
  srv_infer_t e;
  memset(&e, 0, sizeof e);
  k0.len = k1.len = 0;
  srv_infer_cache_key(&e, "ab", "c", &k0);
  srv_infer_cache_key(&e, "a", "bc", &k1);
  assert_true(k0.len != k1.len || memcmp(k0.data, k1.data, k0.len));
  /* a datatype difference with the same bytes: UINT8 [1,4] vs INT8 [1,4] */
  toplu_model_t *mu = load_identity("uint8"), *mi = load_identity("int8");
  assert_int_equal(parse_str(mu, 4, "{\"inputs\":[{\"name\":\"x\",\"shape\":[1,3],\"datatype\":\"UINT8\",\"data\":[1,2,3]}]}", &r, err, sizeof err), 0);
  k0.len = 0;
  srv_infer_cache_key(&r, "m", "1", &k0);
  srv_infer_free(&r);
  assert_int_equal(parse_str(mi, 4, "{\"inputs\":[{\"name\":\"x\",\"shape\":[1,3],\"datatype\":\"INT8\",\"data\":[1,2,3]}]}", &r, err, sizeof err), 0);
  k1.len = 0;
  srv_infer_cache_key(&r, "m", "1", &k1);
  srv_infer_free(&r);
  assert_true(k0.len != k1.len || memcmp(k0.data, k1.data, k0.len));
  toplu_model_destroy(mu);
  toplu_model_destroy(mi);
  pl_buf_free(&k0);
  pl_buf_free(&k1);
}

int main(int argc, char **argv) {
  if (argc != 4) {
    fprintf(stderr, "usage: %s CLS.onnx MNIST.onnx IDENTITY_MODEL_DIR\n", argv[0]);
    return 2;
  }
  g_cls_path = argv[1], g_mnist_path = argv[2], g_dir = argv[3];
  g_cls = load(g_cls_path);
  g_mnist = load(g_mnist_path);
  char two[1024];
  snprintf(two, sizeof two, "%s/two.onnx", g_dir);
  g_two = load(two);
  if (!g_cls || !g_mnist || !g_two) {
    fprintf(stderr, "test_serve_protocol: a model is missing (see above): the PaddleOCR cls model, MNIST, or the "
                    "Identity models that serve_protocol_models.py makes\n");
    return 1;
  }
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_datatype_names),   cmocka_unit_test(test_cls_flat_json),
      cmocka_unit_test(test_cls_nested_json),  cmocka_unit_test(test_cls_binary),
      cmocka_unit_test(test_mnist_no_batching), cmocka_unit_test(test_dtype_bool),
      cmocka_unit_test(test_dtype_uint8),      cmocka_unit_test(test_dtype_uint16),
      cmocka_unit_test(test_dtype_uint32),     cmocka_unit_test(test_dtype_uint64),
      cmocka_unit_test(test_dtype_int8),       cmocka_unit_test(test_dtype_int16),
      cmocka_unit_test(test_dtype_int32),      cmocka_unit_test(test_dtype_int64),
      cmocka_unit_test(test_dtype_fp16),       cmocka_unit_test(test_dtype_fp32),
      cmocka_unit_test(test_dtype_fp64),       cmocka_unit_test(test_bytes),
      cmocka_unit_test(test_malformed_json),   cmocka_unit_test(test_malformed_inputs),
      cmocka_unit_test(test_counts_real_model), cmocka_unit_test(test_binary_lengths),
      cmocka_unit_test(test_huge_shapes),      cmocka_unit_test(test_two_inputs),
      cmocka_unit_test(test_encode_response),  cmocka_unit_test(test_encode_bool_fp16_nonfinite),
      cmocka_unit_test(test_encode_error),     cmocka_unit_test(test_cache_key),
  };
  int rc = cmocka_run_group_tests(tests, NULL, NULL);
  toplu_model_destroy(g_cls);
  toplu_model_destroy(g_mnist);
  toplu_model_destroy(g_two);
  return rc;
}
