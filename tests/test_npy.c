/*
 * tests/test_npy.c - NPY reading and writing (src/core/npy.c).
 *
 *   test_npy [NUMPY_DIR OUT_DIR]
 *
 * Without arguments: round trips for every dtype and malformed files made
 * here.  With NUMPY_DIR (files numpy wrote, tests/npy_numpy.py gen) the
 * numpy files are read and checked; files are written to OUT_DIR for
 * tests/npy_numpy.py check (numpy.load, and byte-for-byte vs numpy.save).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include "toplu/toplu.h"

static const char *numpy_dir; /* from argv; NULL skips the numpy tests */
static const char *out_dir;
static char tmp_dir[256];

static const toplu_dtype_t all_dtypes[] = {
    TOPLU_DTYPE_FLOAT,  TOPLU_DTYPE_FLOAT16, TOPLU_DTYPE_DOUBLE, TOPLU_DTYPE_UINT8,
    TOPLU_DTYPE_INT8,   TOPLU_DTYPE_UINT16,  TOPLU_DTYPE_INT16,  TOPLU_DTYPE_UINT32,
    TOPLU_DTYPE_INT32,  TOPLU_DTYPE_UINT64,  TOPLU_DTYPE_INT64,  TOPLU_DTYPE_BOOL,
};
#define N_DTYPES (sizeof all_dtypes / sizeof all_dtypes[0])

/* Element i as tests/npy_numpy.py values() makes it. */
static void set_value(toplu_tensor_t *t, int64_t i) {
  int64_t k = (7 * i) % 11;
  double f = (double)(k - 3) * 0.5;
  void *p = (char *)t->data + (size_t)i * toplu_dtype_size(t->dtype);
  switch (t->dtype) {
    case TOPLU_DTYPE_FLOAT: { float v = (float)f; memcpy(p, &v, 4); break; }
    case TOPLU_DTYPE_FLOAT16: { uint16_t v = toplu_float_to_half((float)f); memcpy(p, &v, 2); break; }
    case TOPLU_DTYPE_DOUBLE: memcpy(p, &f, 8); break;
    case TOPLU_DTYPE_UINT8: *(uint8_t *)p = (uint8_t)k; break;
    case TOPLU_DTYPE_INT8: *(int8_t *)p = (int8_t)(k - 3); break;
    case TOPLU_DTYPE_UINT16: { uint16_t v = (uint16_t)k; memcpy(p, &v, 2); break; }
    case TOPLU_DTYPE_INT16: { int16_t v = (int16_t)(k - 3); memcpy(p, &v, 2); break; }
    case TOPLU_DTYPE_UINT32: { uint32_t v = (uint32_t)k; memcpy(p, &v, 4); break; }
    case TOPLU_DTYPE_INT32: { int32_t v = (int32_t)(k - 3); memcpy(p, &v, 4); break; }
    case TOPLU_DTYPE_UINT64: { uint64_t v = (uint64_t)k; memcpy(p, &v, 8); break; }
    case TOPLU_DTYPE_INT64: { int64_t v = k - 3; memcpy(p, &v, 8); break; }
    case TOPLU_DTYPE_BOOL: *(uint8_t *)p = i % 3 == 0; break;
    default: fail_msg("bad dtype");
  }
}

/* Allocate t with the test values. */
static void make(toplu_tensor_t *t, toplu_dtype_t dtype, int ndim, const int64_t *dims) {
  assert_int_equal(toplu_tensor_alloc(t, dtype, ndim, dims), TOPLU_OK);
  int64_t n = toplu_tensor_numel(t);
  for (int64_t i = 0; i < n; i++) set_value(t, i);
}

/* t equals the test values for dtype and shape. */
static void assert_values(const toplu_tensor_t *t, toplu_dtype_t dtype, int ndim, const int64_t *dims) {
  toplu_tensor_t want;
  make(&want, dtype, ndim, dims);
  assert_int_equal(t->dtype, dtype);
  assert_int_equal(t->ndim, ndim);
  for (int d = 0; d < ndim; d++) assert_int_equal(t->dims[d], dims[d]);
  assert_memory_equal(t->data, want.data, toplu_tensor_nbytes(&want) ? toplu_tensor_nbytes(&want) : 1);
  toplu_tensor_free(&want);
}

/* A path in the scratch directory. */
static const char *tmp_path(const char *name, char *buf, size_t size) {
  snprintf(buf, size, "%s/%s", tmp_dir, name);
  return buf;
}

/* Write raw bytes to a scratch file. */
static const char *write_raw(const char *name, const void *data, size_t len, char *buf, size_t size) {
  tmp_path(name, buf, size);
  FILE *f = fopen(buf, "wb");
  assert_non_null(f);
  assert_int_equal(fwrite(data, 1, len, f), len);
  fclose(f);
  return buf;
}

/* Build a version-1.0 file from a header dict (padded like numpy) and data bytes. */
static const char *write_npy_text(const char *name, const char *dict, const void *data, size_t len, char *buf,
                                  size_t size) {
  unsigned char file[4096];
  size_t dl = strlen(dict), hl = dl + 1, pad = 64 - (10 + hl) % 64;
  memcpy(file, "\x93NUMPY\x01\x00", 8);
  file[8] = (unsigned char)((hl + pad) & 0xff);
  file[9] = (unsigned char)((hl + pad) >> 8);
  memcpy(file + 10, dict, dl);
  memset(file + 10 + dl, ' ', pad);
  file[10 + dl + pad] = '\n';
  size_t off = 10 + hl + pad;
  assert_true(off + len <= sizeof file);
  if (len) memcpy(file + off, data, len);
  return write_raw(name, file, off + len, buf, size);
}

/* Expect toplu_npy_read to fail with status st and a message containing each of the NULL-ended strings. */
static void expect_read_error(const char *path, toplu_status_t st, ...) {
  toplu_tensor_t t;
  toplu_error_t err;
  toplu_status_t got = toplu_npy_read(path, &t, &err);
  if (got != st) fail_msg("%s: status %d (%s), expected %d", path, got, err.message, st);
  assert_null(t.data);
  assert_non_null(strstr(err.message, path));
  va_list ap;
  va_start(ap, st);
  for (const char *s; (s = va_arg(ap, const char *));)
    if (!strstr(err.message, s)) fail_msg("message '%s' lacks '%s'", err.message, s);
  va_end(ap);
  /* The header reader agrees. */
  toplu_tensor_t h;
  assert_int_equal(toplu_npy_read_header(path, &h, NULL, &err), st);
}

/* Every dtype round-trips through a file at rank 0, 1, 2, 3 and with a zero dim. */
static void test_round_trip(void **state) {
  (void)state;
  static const int64_t shapes[][4] = {{0}, {5}, {2, 3}, {2, 3, 4}, {3, 0}};
  static const int ranks[] = {0, 1, 2, 3, 2};
  char path[512];
  for (size_t k = 0; k < N_DTYPES; k++)
    for (size_t s = 0; s < sizeof ranks / sizeof ranks[0]; s++) {
      toplu_tensor_t a, b;
      toplu_error_t err;
      memset(&b, 0x5a, sizeof b); /* whatever the caller's struct held: the read sets every field */
      make(&a, all_dtypes[k], ranks[s], shapes[s]);
      snprintf(path, sizeof path, "%s/rt_%s_%zu.npy", tmp_dir, toplu_dtype_name(all_dtypes[k]), s);
      assert_int_equal(toplu_npy_write(path, &a, &err), TOPLU_OK);
      if (toplu_npy_read(path, &b, &err)) fail_msg("%s", err.message);
      assert_values(&b, all_dtypes[k], ranks[s], shapes[s]);
      assert_int_equal(b.kind, TOPLU_KIND_TENSOR);
      assert_int_equal(b.device, TOPLU_DEVICE_HOST);
      /* The data starts at a multiple of 64. */
      toplu_tensor_t h;
      long off = 0;
      assert_int_equal(toplu_npy_read_header(path, &h, &off, &err), TOPLU_OK);
      assert_int_equal(off % 64, 0);
      assert_null(h.data);
      assert_int_equal(h.ndim, ranks[s]);
      toplu_tensor_free(&a);
      toplu_tensor_free(&b);
    }
}

/* The header is byte for byte what numpy 1.24 writes. */
static void test_header_bytes(void **state) {
  (void)state;
  char path[512];
  static const char want_f32[] =
      "\x93NUMPY\x01\x00v\x00{'descr': '<f4', 'fortran_order': False, 'shape': (3, 4), }"
      "                                                          \n";
  static const char want_scalar[] =
      "\x93NUMPY\x01\x00v\x00{'descr': '<f4', 'fortran_order': False, 'shape': (), }"
      "                                                              \n";
  static const char want_u1[] = "\x93NUMPY\x01\x00v\x00{'descr': '|u1', 'fortran_order': False, 'shape': (7,), }";
  const int64_t d34[] = {3, 4}, d7[] = {7};
  toplu_tensor_t t;
  toplu_error_t err;
  unsigned char buf[256];

  make(&t, TOPLU_DTYPE_FLOAT, 2, d34);
  assert_int_equal(toplu_npy_write(tmp_path("h1.npy", path, sizeof path), &t, &err), TOPLU_OK);
  FILE *f = fopen(path, "rb");
  assert_int_equal(fread(buf, 1, sizeof buf, f), 128 + 48);
  fclose(f);
  assert_memory_equal(buf, want_f32, 128);
  toplu_tensor_free(&t);

  make(&t, TOPLU_DTYPE_FLOAT, 0, NULL);
  assert_int_equal(toplu_npy_write(tmp_path("h2.npy", path, sizeof path), &t, &err), TOPLU_OK);
  f = fopen(path, "rb");
  assert_int_equal(fread(buf, 1, sizeof buf, f), 128 + 4);
  fclose(f);
  assert_memory_equal(buf, want_scalar, 128);
  toplu_tensor_free(&t);

  make(&t, TOPLU_DTYPE_UINT8, 1, d7);
  assert_int_equal(toplu_npy_write(tmp_path("h3.npy", path, sizeof path), &t, &err), TOPLU_OK);
  f = fopen(path, "rb");
  assert_int_equal(fread(buf, 1, sizeof buf, f), 128 + 7);
  fclose(f);
  assert_memory_equal(buf, want_u1, sizeof want_u1 - 1);
  assert_int_equal(buf[127], '\n');
  toplu_tensor_free(&t);
}

/* A streaming writer: header first, then rows; the header's length does not depend on dim 0. */
static void test_stream_write(void **state) {
  (void)state;
  char path[512];
  toplu_error_t err;
  const int64_t small[] = {1, 3}, big[] = {123456789012LL, 3};
  long n1 = 0, n2 = 0;
  FILE *f = tmpfile();
  assert_int_equal(toplu_npy_write_header(f, TOPLU_DTYPE_INT16, 2, small, &err), TOPLU_OK);
  n1 = ftell(f);
  fclose(f);
  f = tmpfile();
  assert_int_equal(toplu_npy_write_header(f, TOPLU_DTYPE_INT16, 2, big, &err), TOPLU_OK);
  n2 = ftell(f);
  fclose(f);
  assert_int_equal(n1, n2);

  const int64_t dims[] = {4, 3};
  toplu_tensor_t t, r;
  make(&t, TOPLU_DTYPE_INT16, 2, dims);
  f = fopen(tmp_path("stream.npy", path, sizeof path), "wb");
  assert_int_equal(toplu_npy_write_header(f, TOPLU_DTYPE_INT16, 2, dims, &err), TOPLU_OK);
  for (int row = 0; row < 4; row++) assert_int_equal(fwrite((char *)t.data + row * 6, 1, 6, f), 6);
  fclose(f);
  assert_int_equal(toplu_npy_read(path, &r, &err), TOPLU_OK);
  assert_values(&r, TOPLU_DTYPE_INT16, 2, dims);
  toplu_tensor_free(&r);

  /* Rows 1..2 only. */
  int16_t rows[6];
  assert_int_equal(toplu_npy_read_rows(path, 1, 2, rows, sizeof rows, &err), TOPLU_OK);
  assert_memory_equal(rows, (char *)t.data + 6, 12);
  assert_int_equal(toplu_npy_read_rows(path, 3, 2, rows, sizeof rows, &err), TOPLU_ERR_INVALID_ARGUMENT);
  assert_int_equal(toplu_npy_read_rows(path, 0, 4, rows, sizeof rows, &err), TOPLU_ERR_INVALID_ARGUMENT);
  assert_int_equal(toplu_npy_read_rows(path, 4, 0, rows, sizeof rows, &err), TOPLU_OK);
  /* a first row near INT64_MAX: refused, and the message does not wrap first + count (UB) into a negative row */
  assert_int_equal(toplu_npy_read_rows(path, INT64_MAX, 2, rows, sizeof rows, &err), TOPLU_ERR_INVALID_ARGUMENT);
  assert_non_null(strstr(err.message, "2 rows from row 9223372036854775807 asked for, the array has 4"));
  toplu_tensor_free(&t);

  /* Bad arguments. */
  assert_int_equal(toplu_npy_write_header(NULL, TOPLU_DTYPE_FLOAT, 1, dims, &err), TOPLU_ERR_INVALID_ARGUMENT);
  f = tmpfile();
  assert_int_equal(toplu_npy_write_header(f, TOPLU_DTYPE_BFLOAT16, 1, dims, &err), TOPLU_ERR_UNSUPPORTED);
  assert_int_equal(toplu_npy_write_header(f, TOPLU_DTYPE_STRING, 1, dims, &err), TOPLU_ERR_UNSUPPORTED);
  assert_int_equal(toplu_npy_write_header(f, TOPLU_DTYPE_FLOAT, 9, dims, &err), TOPLU_ERR_INVALID_ARGUMENT);
  const int64_t neg[] = {-1};
  assert_int_equal(toplu_npy_write_header(f, TOPLU_DTYPE_FLOAT, 1, neg, &err), TOPLU_ERR_INVALID_ARGUMENT);
  fclose(f);
  toplu_tensor_t bf = {.dtype = TOPLU_DTYPE_BFLOAT16, .ndim = 1, .dims = {2}, .data = rows};
  assert_int_equal(toplu_npy_write(tmp_path("bf.npy", path, sizeof path), &bf, &err), TOPLU_ERR_UNSUPPORTED);
  assert_int_not_equal(access(path, F_OK), 0);
  toplu_tensor_t ok = {.dtype = TOPLU_DTYPE_FLOAT, .ndim = 1, .dims = {2}, .data = rows};
  assert_int_equal(toplu_npy_write("/nonexistent-dir/x.npy", &ok, &err), TOPLU_ERR_IO);
  assert_non_null(strstr(err.message, "/nonexistent-dir/x.npy"));
}

/* Headers numpy would accept in other spellings. */
static void test_lenient_headers(void **state) {
  (void)state;
  char path[512];
  const int32_t data[6] = {1, 2, 3, 4, 5, 6};
  static const char *dicts[] = {
      "{'descr': '<i4', 'fortran_order': False, 'shape': (2, 3), }",
      "{'shape': (2, 3), 'fortran_order': False, 'descr': '<i4'}",
      "{\"descr\": \"<i4\", \"fortran_order\": False, \"shape\": (2,3)}",
      "  {  'fortran_order' :False ,'shape':( 2 , 3 , ) ,'descr':'<i4' , }  ",
      "{'descr': '<i4', 'fortran_order': False, 'shape': (2L, 3L)}",
  };
  for (size_t i = 0; i < sizeof dicts / sizeof dicts[0]; i++) {
    toplu_tensor_t t;
    toplu_error_t err;
    write_npy_text("lenient.npy", dicts[i], data, sizeof data, path, sizeof path);
    if (toplu_npy_read(path, &t, &err)) fail_msg("dict %zu: %s", i, err.message);
    assert_int_equal(t.dtype, TOPLU_DTYPE_INT32);
    assert_int_equal(t.ndim, 2);
    assert_int_equal(t.dims[0], 2);
    assert_int_equal(t.dims[1], 3);
    assert_memory_equal(t.data, data, sizeof data);
    toplu_tensor_free(&t);
  }
  /* A header without padding or the final newline. */
  unsigned char raw[128];
  const char *d = "{'descr':'|b1','fortran_order':False,'shape':(3,)}";
  size_t dl = strlen(d);
  memcpy(raw, "\x93NUMPY\x01\x00", 8);
  raw[8] = (unsigned char)dl;
  raw[9] = 0;
  memcpy(raw + 10, d, dl);
  raw[10 + dl] = 0;
  raw[11 + dl] = 7; /* nonzero bools read as 1 */
  raw[12 + dl] = 1;
  write_raw("nopad.npy", raw, 13 + dl, path, sizeof path);
  toplu_tensor_t t;
  toplu_error_t err;
  if (toplu_npy_read(path, &t, &err)) fail_msg("%s", err.message);
  assert_int_equal(t.dtype, TOPLU_DTYPE_BOOL);
  assert_memory_equal(t.data, "\0\1\1", 3);
  toplu_tensor_free(&t);
  /* Big-endian written by hand. */
  const unsigned char be[4] = {0x3f, 0x80, 0, 0};
  write_npy_text("be.npy", "{'descr': '>f4', 'fortran_order': False, 'shape': (), }", be, 4, path, sizeof path);
  assert_int_equal(toplu_npy_read(path, &t, &err), TOPLU_OK);
  assert_int_equal(t.ndim, 0);
  assert_true(*(float *)t.data == 1.0f);
  toplu_tensor_free(&t);
}

/* Malformed files fail with clear messages. */
static void test_bad_files(void **state) {
  (void)state;
  char path[512];
  const float data[6] = {0};
  toplu_tensor_t t;
  toplu_error_t err;

  expect_read_error("/nonexistent/x.npy", TOPLU_ERR_IO, "cannot open", NULL);
  expect_read_error(tmp_dir, TOPLU_ERR_IO, "directory", NULL);
  write_raw("magic.npy", "PK\3\4 not npy at all", 20, path, sizeof path);
  expect_read_error(path, TOPLU_ERR_PARSE, "not a .npy file", NULL);
  write_raw("empty.npy", "", 0, path, sizeof path);
  expect_read_error(path, TOPLU_ERR_PARSE, "not a .npy file", NULL);
  write_raw("short.npy", "\x93NUMPY\x01\x00\x76", 9, path, sizeof path);
  expect_read_error(path, TOPLU_ERR_PARSE, "truncated", NULL);
  write_raw("hdr.npy", "\x93NUMPY\x01\x00\x76\x00{'descr'", 18, path, sizeof path);
  expect_read_error(path, TOPLU_ERR_PARSE, "truncated", "118", NULL);
  write_raw("ver.npy", "\x93NUMPY\x04\x00\x76\x00", 10, path, sizeof path);
  expect_read_error(path, TOPLU_ERR_UNSUPPORTED, "version 4.0", NULL);

  /* Data shorter and longer than the shape needs. */
  write_npy_text("trunc.npy", "{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }", data, 20, path,
                 sizeof path);
  expect_read_error(path, TOPLU_ERR_PARSE, "truncated", "4 bytes missing", "float32 [2, 3]", NULL);
  toplu_tensor_t h;
  assert_int_equal(toplu_npy_read_header(path, &h, NULL, &err), TOPLU_ERR_PARSE);
  float rows[3];
  assert_int_equal(toplu_npy_read_rows(path, 0, 1, rows, sizeof rows, &err), TOPLU_ERR_PARSE);
  write_npy_text("long.npy", "{'descr': '<f4', 'fortran_order': False, 'shape': (5,), }", data, 24, path,
                 sizeof path);
  expect_read_error(path, TOPLU_ERR_PARSE, "4 bytes too many", NULL);

  static const struct { const char *dict; toplu_status_t st; const char *says; } bad[] = {
      {"{'descr': '<f4', 'fortran_order': False}", TOPLU_ERR_PARSE, "no 'shape'"},
      {"{'fortran_order': False, 'shape': (2,)}", TOPLU_ERR_PARSE, "no 'descr'"},
      {"{'descr': '<f4', 'shape': (2,)}", TOPLU_ERR_PARSE, "no 'fortran_order'"},
      {"{'descr': '<f4', 'fortran_order': False, 'shape': (2,), 'x': 1}", TOPLU_ERR_PARSE, "unknown key 'x'"},
      {"{'descr': '<f4' 'fortran_order': False, 'shape': (2,)}", TOPLU_ERR_PARSE, "expected ',' or '}'"},
      {"{'descr': '<f4', 'fortran_order': Nope, 'shape': (2,)}", TOPLU_ERR_PARSE, "True or False"},
      {"{'descr': '<f4', 'fortran_order': False, 'shape': [2]}", TOPLU_ERR_PARSE, "'('"},
      {"{'descr': '<f4', 'fortran_order': False, 'shape': (2, -1)}", TOPLU_ERR_PARSE, "negative"},
      {"{'descr': '<f4', 'fortran_order': False, 'shape': (2 3)}", TOPLU_ERR_PARSE, "in the shape tuple"},
      {"{'descr': <f4, 'fortran_order': False, 'shape': (2,)}", TOPLU_ERR_PARSE, "quoted dtype"},
      {"{'descr': '<f4', 'fortran_order': False, 'shape': (2,)} junk", TOPLU_ERR_PARSE, "after the header dict"},
      {"{'descr': '<f4', 'fortran_order': False, 'shape': (2,)", TOPLU_ERR_PARSE, "expected"},
      {"{'descr': '<f4', 'descr': '<f4', 'fortran_order': False, 'shape': (2,)}", TOPLU_ERR_PARSE, "twice"},
      {"{'descr': '<f4', 'fortran_order': False, 'shape': (99999999999999999999,)}", TOPLU_ERR_PARSE, "too large"},
      {"{'descr': '<f4', 'fortran_order': False, 'shape': (4294967296, 4294967296)}", TOPLU_ERR_PARSE, "overflow"},
      {"{'descr': '<f4', 'fortran_order': True, 'shape': (2, 3)}", TOPLU_ERR_UNSUPPORTED, "Fortran order"},
      {"{'descr': '<c8', 'fortran_order': False, 'shape': (2,)}", TOPLU_ERR_UNSUPPORTED, "'<c8' is not supported"},
      {"{'descr': '<U3', 'fortran_order': False, 'shape': (2,)}", TOPLU_ERR_UNSUPPORTED, "'<U3'"},
      {"{'descr': [('a', '<f4')], 'fortran_order': False, 'shape': (2,)}", TOPLU_ERR_UNSUPPORTED, "structured"},
      {"{'descr': '<f4', 'fortran_order': False, 'shape': (1, 1, 1, 1, 1, 1, 1, 1, 1)}", TOPLU_ERR_UNSUPPORTED,
       "more than 8 dims"},
  };
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    write_npy_text("bad.npy", bad[i].dict, data, 8, path, sizeof path);
    toplu_status_t st = toplu_npy_read(path, &t, &err);
    if (st != bad[i].st || !strstr(err.message, bad[i].says) || !strstr(err.message, path))
      fail_msg("header %s: status %d, message '%s'; expected %d and '%s'", bad[i].dict, st, err.message, bad[i].st,
               bad[i].says);
    assert_null(t.data);
  }
  /* A huge header length is refused before allocating it. */
  write_raw("huge.npy", "\x93NUMPY\x02\x00\xff\xff\xff\x7f{", 13, path, sizeof path);
  expect_read_error(path, TOPLU_ERR_PARSE, "implausible", NULL);
  /* NULL arguments. */
  assert_int_equal(toplu_npy_read(NULL, &t, &err), TOPLU_ERR_INVALID_ARGUMENT);
  assert_int_equal(toplu_npy_read(path, NULL, NULL), TOPLU_ERR_INVALID_ARGUMENT);
}

/* Files numpy wrote: every dtype, both byte orders, versions 1, 2 and 3, odd shapes. */
static void test_numpy_files(void **state) {
  (void)state;
  if (!numpy_dir) skip();
  char path[1024];
  toplu_tensor_t t;
  toplu_error_t err;
  const int64_t d23[] = {2, 3}, d42[] = {4, 2}, d5[] = {5}, d04[] = {0, 4}, d8[] = {1, 2, 1, 2, 1, 2, 1, 3};
  for (size_t k = 0; k < N_DTYPES; k++)
    for (int be = 0; be < 2; be++) {
      snprintf(path, sizeof path, "%s/%s%s.npy", numpy_dir, be ? "be_" : "", toplu_dtype_name(all_dtypes[k]));
      if (toplu_npy_read(path, &t, &err)) fail_msg("%s", err.message);
      assert_values(&t, all_dtypes[k], 2, d23);
      toplu_tensor_free(&t);
      float rows[3];
      if (all_dtypes[k] == TOPLU_DTYPE_FLOAT) { /* rows from a big-endian file are converted too */
        assert_int_equal(toplu_npy_read_rows(path, 1, 1, rows, sizeof rows, &err), TOPLU_OK);
        assert_true(rows[0] == 3.5f && rows[1] == 1.5f && rows[2] == -0.5f);
      }
    }
  for (int v = 1; v <= 3; v++) {
    snprintf(path, sizeof path, "%s/v%d_int32.npy", numpy_dir, v);
    if (toplu_npy_read(path, &t, &err)) fail_msg("%s", err.message);
    assert_values(&t, TOPLU_DTYPE_INT32, 2, d42);
    toplu_tensor_free(&t);
  }
  snprintf(path, sizeof path, "%s/scalar_float32.npy", numpy_dir);
  assert_int_equal(toplu_npy_read(path, &t, &err), TOPLU_OK);
  assert_int_equal(t.ndim, 0);
  assert_true(*(float *)t.data == 2.5f);
  toplu_tensor_free(&t);
  snprintf(path, sizeof path, "%s/vec_int64.npy", numpy_dir);
  assert_int_equal(toplu_npy_read(path, &t, &err), TOPLU_OK);
  assert_values(&t, TOPLU_DTYPE_INT64, 1, d5);
  toplu_tensor_free(&t);
  snprintf(path, sizeof path, "%s/empty_float32.npy", numpy_dir);
  assert_int_equal(toplu_npy_read(path, &t, &err), TOPLU_OK);
  assert_values(&t, TOPLU_DTYPE_FLOAT, 2, d04);
  toplu_tensor_free(&t);
  snprintf(path, sizeof path, "%s/rank8_uint8.npy", numpy_dir);
  assert_int_equal(toplu_npy_read(path, &t, &err), TOPLU_OK);
  assert_values(&t, TOPLU_DTYPE_UINT8, 8, d8);
  toplu_tensor_free(&t);
  snprintf(path, sizeof path, "%s/rank9_uint8.npy", numpy_dir);
  expect_read_error(path, TOPLU_ERR_UNSUPPORTED, "more than 8 dims", NULL);
  snprintf(path, sizeof path, "%s/fortran_float32.npy", numpy_dir);
  expect_read_error(path, TOPLU_ERR_UNSUPPORTED, "Fortran order", NULL);
  snprintf(path, sizeof path, "%s/complex64.npy", numpy_dir);
  expect_read_error(path, TOPLU_ERR_UNSUPPORTED, "'<c8'", NULL);
}

/* Write files for npy_numpy.py check: out_<dtype>_<dims>.npy. */
static void test_write_for_numpy(void **state) {
  (void)state;
  if (!out_dir) skip();
  mkdir(out_dir, 0777);
  static const int64_t shapes[][3] = {{2, 3}, {0}, {7}, {2, 0, 5}, {3, 1, 4}};
  static const int ranks[] = {2, 0, 1, 3, 3};
  static const char *names[] = {"2x3", "scalar", "7", "2x0x5", "3x1x4"};
  char path[1024];
  for (size_t k = 0; k < N_DTYPES; k++)
    for (size_t s = 0; s < sizeof ranks / sizeof ranks[0]; s++) {
      toplu_tensor_t t;
      toplu_error_t err;
      make(&t, all_dtypes[k], ranks[s], shapes[s]);
      snprintf(path, sizeof path, "%s/out_%s_%s.npy", out_dir, toplu_dtype_name(all_dtypes[k]), names[s]);
      if (toplu_npy_write(path, &t, &err)) fail_msg("%s", err.message);
      toplu_tensor_free(&t);
    }
}

int main(int argc, char **argv) {
  if (argc == 3) {
    numpy_dir = argv[1];
    out_dir = argv[2];
  } else if (argc != 1) {
    fprintf(stderr, "usage: test_npy [NUMPY_DIR OUT_DIR]\n");
    return 2;
  }
  snprintf(tmp_dir, sizeof tmp_dir, "/tmp/toplu-test-npy-XXXXXX");
  if (!mkdtemp(tmp_dir)) {
    perror("mkdtemp");
    return 1;
  }
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_round_trip),     cmocka_unit_test(test_header_bytes),
      cmocka_unit_test(test_stream_write),   cmocka_unit_test(test_lenient_headers),
      cmocka_unit_test(test_bad_files),      cmocka_unit_test(test_numpy_files),
      cmocka_unit_test(test_write_for_numpy),
  };
  int failed = cmocka_run_group_tests(tests, NULL, NULL);
  char cmd[300];
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", tmp_dir);
  if (system(cmd) != 0) fprintf(stderr, "could not remove %s\n", tmp_dir);
  return failed;
}
