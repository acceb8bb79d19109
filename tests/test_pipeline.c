/*
 * tests/test_pipeline.c - unit tests of the batch-job modules (src/pipeline).
 *
 *   test_pipeline [WORKDIR]
 *
 * Text and numbers the sinks write, shard ranges and the environment they
 * come from, preprocessing specs and image operations, postprocessing,
 * shape buckets, checkpoints (round trip, atomic save, comparing settings)
 * and file names.  WORKDIR (created) holds the files written.
 */
#include <math.h>
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

#include "core/bigalloc.h"

#include "pipeline/buf.h"
#include "pipeline/checkpoint.h"
#include "pipeline/chunk.h"
#include "pipeline/files.h"
#include "pipeline/identity.h"
#include "pipeline/image.h"
#include "pipeline/pool.h"
#include "pipeline/postprocess.h"
#include "pipeline/preprocess.h"
#include "pipeline/shard.h"
#include "pipeline/source.h"

static const char *work_dir = "/tmp/toplu-test-pipeline";

/* Float formatting: shortest text that reads back to the same float. */
static void test_buf_numbers(void **state) {
  (void)state;
  const float vals[] = {0.0f, 1.0f, 0.1f, -2.5f, 1e-7f, 3.4028235e38f, 1.17549435e-38f, 123456.789f, 0.3333333f};
  for (size_t i = 0; i < sizeof vals / sizeof vals[0]; i++) {
    pl_buf_t b = {0};
    pl_buf_float(&b, vals[i]);
    assert_non_null(b.data);
    assert_true(strtof(b.data, NULL) == vals[i]);
    pl_buf_free(&b);
  }
  pl_buf_t b = {0};
  pl_buf_float(&b, 0.1f);
  pl_buf_putc(&b, ' ');
  pl_buf_float(&b, 1.0f);
  pl_buf_putc(&b, ' ');
  pl_buf_double(&b, 0.1);
  pl_buf_putc(&b, ' ');
  pl_buf_int(&b, -42);
  assert_string_equal(b.data, "0.1 1 0.1 -42");
  pl_buf_free(&b);
}

/* pl_buf_float's integer fast path against its definition, "%.*g" at the least precision 6..9 that strtof reads
 * back: random bit patterns, random values of typical size, and the floats around every power of ten and of two
 * (the path's edges: a decimal exponent one off, a rounding up to 10^p, the closer float below a power of two). */
static void float_text_ref(float v, char *tmp, size_t size) {
  for (int prec = 6; prec <= 9; prec++) {
    snprintf(tmp, size, "%.*g", prec, (double)v);
    if (prec == 9 || strtof(tmp, NULL) == v) break;
  }
}

static int float_text_same(float v) {
  if (isnan(v) || isinf(v) || v == 0) return 1;
  char ref[32];
  float_text_ref(v, ref, sizeof ref);
  pl_buf_t b = {0};
  pl_buf_float(&b, v);
  pl_buf_putc(&b, 0);
  int same = b.data && !strcmp(b.data, ref);
  if (!same) fprintf(stderr, "%.9g: '%s', expected '%s'\n", (double)v, b.data ? b.data : "(null)", ref);
  pl_buf_free(&b);
  return same;
}

static void test_buf_float_text(void **state) {
  (void)state;
  int bad = 0;
  uint64_t x = 88172645463325252u;
  for (int i = 0; i < 300000; i++) {
    x ^= x << 13, x ^= x >> 7, x ^= x << 17;
    uint32_t bits = (uint32_t)x;
    float v;
    if (i % 2) v = (float)((double)(int32_t)bits / 2147483648.0 * (i % 3 ? 100.0 : 1e-3));
    else memcpy(&v, &bits, sizeof v);
    bad += !float_text_same(v);
  }
  for (int k = -16; k <= 16; k++) {
    float c = (float)pow(10, k);
    uint32_t bits;
    memcpy(&bits, &c, sizeof bits);
    for (int d = -300; d <= 300; d++) {
      uint32_t b2 = bits + (uint32_t)d;
      float v;
      memcpy(&v, &b2, sizeof v);
      bad += !float_text_same(v) + !float_text_same(-v);
    }
  }
  for (uint32_t ex = 1; ex < 255; ex++)
    for (int d = -20; d <= 20; d++) {
      uint32_t b2 = (ex << 23) + (uint32_t)d;
      float v;
      memcpy(&v, &b2, sizeof v);
      bad += !float_text_same(v);
    }
  assert_int_equal(bad, 0);
}

/* JSON strings, CSV fields and nested tensors. */
static void test_buf_text(void **state) {
  (void)state;
  pl_buf_t b = {0};
  pl_buf_json_string(&b, "a\"b\\c\nd\x01");
  assert_string_equal(b.data, "\"a\\\"b\\\\c\\nd\\u0001\"");
  pl_buf_free(&b);
  pl_buf_csv_field(&b, "plain");
  pl_buf_putc(&b, ',');
  pl_buf_csv_field(&b, "with, comma \"q\"");
  assert_string_equal(b.data, "plain,\"with, comma \"\"q\"\"\"");
  pl_buf_free(&b);
  float d[6] = {1, 2, 3, 4, 5, 6.5f};
  int64_t dims[2] = {2, 3};
  pl_buf_json_tensor(&b, TOPLU_DTYPE_FLOAT, 2, dims, d);
  assert_string_equal(b.data, "[[1, 2, 3], [4, 5, 6.5]]");
  pl_buf_free(&b);
  pl_buf_json_tensor(&b, TOPLU_DTYPE_FLOAT, 0, dims, d);
  assert_string_equal(b.data, "1");
  pl_buf_free(&b);
  /* Conversions saturate and round. */
  uint8_t u8;
  pl_elem_set(TOPLU_DTYPE_UINT8, &u8, 0, 300.0);
  assert_int_equal(u8, 255);
  pl_elem_set(TOPLU_DTYPE_UINT8, &u8, 0, 2.5);
  assert_int_equal(u8, 2); /* to nearest even */
  pl_elem_set(TOPLU_DTYPE_UINT8, &u8, 0, -3);
  assert_int_equal(u8, 0);
}

/* Shards cover every row exactly once, contiguous, sizes within one. */
static void test_shard_ranges(void **state) {
  (void)state;
  const int64_t totals[] = {0, 1, 7, 37, 10000, 1000000007};
  for (size_t t = 0; t < sizeof totals / sizeof totals[0]; t++)
    for (int64_t n = 1; n <= 9; n++) {
      int64_t next = 0, lo = INT64_MAX, hi = 0;
      for (int64_t k = 0; k < n; k++) {
        pl_shard_t s = {k, n, "test"};
        int64_t a, b;
        pl_shard_range(&s, totals[t], &a, &b);
        assert_int_equal(a, next);
        assert_true(b >= a);
        lo = b - a < lo ? b - a : lo;
        hi = b - a > hi ? b - a : hi;
        next = b;
      }
      assert_int_equal(next, totals[t]);
      assert_true(hi - lo <= 1);
    }
  int64_t k, n;
  assert_int_equal(pl_shard_parse("2/4", &k, &n), 0);
  assert_int_equal(k, 2);
  assert_int_equal(n, 4);
  assert_int_equal(pl_shard_parse("4/4", &k, &n), -1);
  assert_int_equal(pl_shard_parse("x/4", &k, &n), -1);
  assert_int_equal(pl_shard_parse("1", &k, &n), -1);
}

/* The shard from Kubernetes and Slurm variables. */
static void test_shard_env(void **state) {
  (void)state;
  pl_shard_t s;
  toplu_error_t err;
  unsetenv("SLURM_ARRAY_TASK_ID");
  setenv("JOB_COMPLETION_INDEX", "3", 1);
  setenv("JOB_COMPLETIONS", "8", 1);
  assert_int_equal(pl_shard_resolve(0, 0, &s, &err), TOPLU_OK);
  assert_int_equal(s.index, 3);
  assert_int_equal(s.count, 8);
  assert_int_equal(pl_shard_resolve(1, 2, &s, &err), TOPLU_OK); /* explicit wins */
  assert_int_equal(s.index, 1);
  unsetenv("JOB_COMPLETIONS");
  assert_int_equal(pl_shard_resolve(0, 0, &s, &err), TOPLU_ERR_INVALID_ARGUMENT);
  assert_non_null(strstr(err.message, "JOB_COMPLETIONS"));
  unsetenv("JOB_COMPLETION_INDEX");
  setenv("SLURM_ARRAY_TASK_ID", "7", 1);
  setenv("SLURM_ARRAY_TASK_COUNT", "4", 1);
  setenv("SLURM_ARRAY_TASK_MIN", "1", 1);
  setenv("SLURM_ARRAY_TASK_STEP", "2", 1);
  assert_int_equal(pl_shard_resolve(0, 0, &s, &err), TOPLU_OK);
  assert_int_equal(s.index, 3);
  assert_int_equal(s.count, 4);
  unsetenv("SLURM_ARRAY_TASK_ID");
  unsetenv("SLURM_ARRAY_TASK_COUNT");
  unsetenv("SLURM_ARRAY_TASK_MIN");
  unsetenv("SLURM_ARRAY_TASK_STEP");
  assert_int_equal(pl_shard_resolve(0, 0, &s, &err), TOPLU_OK);
  assert_int_equal(s.count, 1);
}

/* A model input [N, 3, H, W] float32 (free H, W). */
static toplu_value_info_t image_input(void) {
  toplu_value_info_t v;
  memset(&v, 0, sizeof v);
  v.name = "x";
  v.dtype = TOPLU_DTYPE_FLOAT;
  v.ndim = 4;
  v.dims[0] = -1;
  v.dims[1] = 3;
  v.dims[2] = -1;
  v.dims[3] = -1;
  return v;
}

/* A w x h RGB image value filled by f(x, y, c). */
static void make_image(pl_value_t *v, int w, int h, int (*f)(int, int, int)) {
  memset(v, 0, sizeof *v);
  v->kind = PL_VALUE_IMAGE;
  v->w = w;
  v->h = h;
  v->c = 3;
  v->pixels = malloc((size_t)w * (size_t)h * 3);
  for (int y = 0; y < h; y++)
    for (int x = 0; x < w; x++)
      for (int c = 0; c < 3; c++) v->pixels[((size_t)y * (size_t)w + (size_t)x) * 3 + (size_t)c] = (uint8_t)f(x, y, c);
}

static int const_pixel(int x, int y, int c) {
  (void)x;
  (void)y;
  return 50 + 60 * c;
}

static int ramp_pixel(int x, int y, int c) { return (x * 3 + y * 5 + c * 40) % 256; }

/* Specs parse (or fail with a message), resizing keeps a constant image constant. */
static void test_preprocess(void **state) {
  (void)state;
  pl_pre_t p;
  toplu_error_t err;
  assert_int_equal(pl_pre_parse("resize=224x224,scale=1/255,mean=0.5,std=0.25/0.5/1", &p, &err), TOPLU_OK);
  assert_int_equal(p.resize, PL_RESIZE_EXACT);
  assert_true(fabs(p.scale - 1.0 / 255) < 1e-12);
  assert_true(p.mean[2] == 0.5f && p.std[1] == 0.5f);
  assert_int_equal(pl_pre_parse("resize=64x32:letterbox", &p, &err), TOPLU_OK);
  assert_int_equal(p.resize, PL_RESIZE_LETTERBOX);
  assert_int_equal(pl_pre_parse("resize=256", &p, &err), TOPLU_OK);
  assert_int_equal(p.resize, PL_RESIZE_SHORT);
  const char *bad[] = {"resize=0x5", "resize=12x", "resize=0x1p3", "crop=ax3", "scale=1/0", "mean=1/2",
                       "color=cmyk", "frob=1", "std=0", "pad-multiple=0", "resize"};
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
    assert_int_equal(pl_pre_parse(bad[i], &p, &err), TOPLU_ERR_INVALID_ARGUMENT);
  /* Resizing a constant image up and down keeps it constant. */
  toplu_value_info_t info = image_input();
  int sizes[][2] = {{7, 5}, {64, 48}, {3, 200}};
  for (int k = 0; k < 3; k++) {
    char spec[64];
    snprintf(spec, sizeof spec, "resize=%dx%d", sizes[k][0], sizes[k][1]);
    assert_int_equal(pl_pre_parse(spec, &p, &err), TOPLU_OK);
    assert_int_equal(pl_pre_bind(&p, &info, 1, &err), TOPLU_OK);
    pl_value_t v;
    make_image(&v, 33, 21, const_pixel);
    toplu_tensor_t t;
    char why[256];
    assert_int_equal(pl_pre_apply(&p, &v, &t, why, sizeof why), 0);
    assert_int_equal(t.ndim, 3);
    assert_int_equal(t.dims[0], 3);
    assert_int_equal(t.dims[1], sizes[k][1]);
    assert_int_equal(t.dims[2], sizes[k][0]);
    const float *d = t.data;
    int64_t plane = t.dims[1] * t.dims[2];
    for (int c = 0; c < 3; c++)
      for (int64_t i = 0; i < plane; i++) assert_true(fabsf(d[c * plane + i] - (float)(50 + 60 * c)) < 1e-3f);
    toplu_tensor_free(&t);
  }
  /* Letterbox: 40x20 into 20x20 is 20x10 centered, padded above and below. */
  assert_int_equal(pl_pre_parse("resize=20x20:letterbox,pad-value=9", &p, &err), TOPLU_OK);
  assert_int_equal(pl_pre_bind(&p, &info, 1, &err), TOPLU_OK);
  pl_value_t v;
  make_image(&v, 40, 20, const_pixel);
  toplu_tensor_t t;
  char why[256];
  assert_int_equal(pl_pre_apply(&p, &v, &t, why, sizeof why), 0);
  const float *d = t.data;
  for (int y = 0; y < 20; y++) {
    float want = y < 5 || y >= 15 ? 9.0f : 50.0f;
    assert_true(fabsf(d[y * 20 + 3] - want) < 1e-3f);
  }
  toplu_tensor_free(&t);
  /* BGR NHWC uint8 without resize is the pixels, channels swapped. */
  toplu_value_info_t u8 = image_input();
  u8.dtype = TOPLU_DTYPE_UINT8;
  u8.dims[1] = -1;
  u8.dims[3] = 3;
  assert_int_equal(pl_pre_parse("color=bgr", &p, &err), TOPLU_OK);
  assert_int_equal(pl_pre_bind(&p, &u8, 1, &err), TOPLU_OK);
  assert_int_equal(p.layout, PL_LAYOUT_NHWC);
  make_image(&v, 6, 4, ramp_pixel);
  assert_int_equal(pl_pre_apply(&p, &v, &t, why, sizeof why), 0);
  const uint8_t *q = t.data;
  for (int y = 0; y < 4; y++)
    for (int x = 0; x < 6; x++)
      for (int c = 0; c < 3; c++) assert_int_equal(q[(y * 6 + x) * 3 + c], ramp_pixel(x, y, 2 - c));
  toplu_tensor_free(&t);
  /* uint8 with mean is refused; image ops on numeric rows are refused. */
  assert_int_equal(pl_pre_parse("mean=1", &p, &err), TOPLU_OK);
  assert_int_equal(pl_pre_bind(&p, &u8, 1, &err), TOPLU_ERR_INVALID_ARGUMENT);
  assert_int_equal(pl_pre_parse("crop=3x3", &p, &err), TOPLU_OK);
  assert_int_equal(pl_pre_bind(&p, &info, 0, &err), TOPLU_ERR_INVALID_ARGUMENT);
}

/* Decoding refuses what is not a JPEG or PNG, and truncated files. */
static void test_image_errors(void **state) {
  (void)state;
  pl_value_t v;
  char why[256];
  memset(&v, 0, sizeof v);
  assert_int_equal(pl_image_decode((const uint8_t *)"hello", 5, 0, 0, 0, &v, why, sizeof why), -1);
  assert_non_null(strstr(why, "not a JPEG or PNG"));
  const uint8_t png_head[] = {0x89, 'P', 'N', 'G', '\r', '\n', 0x1a, '\n', 0, 0, 0, 13, 'I', 'H', 'D', 'R'};
  assert_int_equal(pl_image_decode(png_head, sizeof png_head, 0, 0, 0, &v, why, sizeof why), -1);
  assert_non_null(strstr(why, "PNG"));
  const uint8_t jpg_head[] = {0xff, 0xd8, 0xff, 0xe0, 0, 16, 'J', 'F', 'I', 'F', 0};
  assert_int_equal(pl_image_decode(jpg_head, sizeof jpg_head, 0, 0, 0, &v, why, sizeof why), -1);
  assert_non_null(strstr(why, "JPEG"));
  assert_null(v.pixels);
}

/* Shape buckets: rows of two shapes make two batches, in order of first appearance. */
static void test_chunk_buckets(void **state) {
  (void)state;
  pl_chunk_t c;
  assert_int_equal(pl_chunk_init(&c, 0, 100, 5, 1, 1), 0);
  int64_t a[1] = {2}, b[1] = {3};
  for (int i = 0; i < 5; i++) {
    toplu_tensor_alloc(&c.rows[i].in[0], TOPLU_DTYPE_FLOAT, 1, i == 1 || i == 3 ? b : a);
    float *d = c.rows[i].in[0].data;
    for (int k = 0; k < (i == 1 || i == 3 ? 3 : 2); k++) d[k] = (float)(i * 10 + k);
  }
  pl_row_fail(&c.rows[2], "read", "bad %d", 2);
  assert_int_equal(pl_chunk_stack(&c), 0);
  assert_int_equal(c.n_batches, 2);
  assert_int_equal(c.batches[0].n, 2); /* rows 0 and 4 */
  assert_int_equal(c.batches[1].n, 2); /* rows 1 and 3 */
  assert_int_equal(c.rows[4].batch, 0);
  assert_int_equal(c.rows[4].pos, 1);
  assert_int_equal(c.rows[3].pos, 1);
  const float *d0 = c.batches[0].in[0].data, *d1 = c.batches[1].in[0].data;
  assert_true(d0[2] == 40 && d0[3] == 41 && d1[3] == 30 && d1[5] == 32);
  assert_string_equal(c.rows[2].fail_reason, "bad 2");
  assert_int_equal(c.rows[2].batch, -1);
  pl_chunk_clear(&c);
}

/* 1 when /proc/self/smaps gives the mapping that holds p "THPeligible: 1" (-1: no such line, an older kernel). */
static int thp_eligible(const void *p) {
  FILE *f = fopen("/proc/self/smaps", "r");
  if (!f) return -1;
  char line[512];
  int in = 0, r = -1;
  while (fgets(line, sizeof line, f)) {
    unsigned long lo, hi;
    if (sscanf(line, "%lx-%lx ", &lo, &hi) == 2) /* a mapping's first line: its range (field lines give 1 at most) */
      in = (uintptr_t)p >= lo && (uintptr_t)p < hi;
    else if (in && !strncmp(line, "THPeligible:", 12)) {
      r = atoi(line + 12);
      break;
    }
  }
  fclose(f);
  return r;
}

/* Large blocks (core/bigalloc.h): 64-byte aligned, from TOPLU__HUGE_MIN aligned to 2 MiB and advised as huge pages
 * (where the kernel's transparent huge pages are in "madvise" or "always" mode), every byte usable, freed by
 * free(); the pool's and toplu_tensor_alloc's blocks are such blocks. */
static void test_alloc_large(void **state) {
  (void)state;
  char mode[128] = "";
  FILE *f = fopen("/sys/kernel/mm/transparent_hugepage/enabled", "r");
  if (f) {
    if (!fgets(mode, sizeof mode, f)) mode[0] = 0;
    fclose(f);
  }
  int thp = strstr(mode, "[madvise]") || strstr(mode, "[always]");
#if defined(__SANITIZE_ADDRESS__)
  thp = 0; /* AddressSanitizer's allocator maps its own memory: the advice is not asserted there */
#endif
  size_t sizes[] = {100, (size_t)300 << 10, TOPLU__HUGE_MIN - 64, TOPLU__HUGE_MIN, (size_t)5 << 20};
  for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++) {
    unsigned char *p = toplu__alloc_large(sizes[i]);
    assert_non_null(p);
    assert_int_equal((uintptr_t)p % 64, 0);
    if (sizes[i] >= TOPLU__HUGE_MIN) assert_int_equal((uintptr_t)p % ((size_t)2 << 20), 0);
    memset(p, 0xa5, sizes[i]);
    assert_int_equal(p[sizes[i] - 1], 0xa5);
    if (sizes[i] >= TOPLU__HUGE_MIN && thp) {
      int e = thp_eligible(p);
      if (e >= 0) assert_int_equal(e, 1);
    }
    free(p);
  }
  pl_pool_t pool;
  assert_int_equal(pl_pool_init(&pool, 0), 0);
  void *b = pl_pool_get(&pool, (size_t)5 << 20);
  assert_non_null(b);
  assert_int_equal((uintptr_t)b % ((size_t)2 << 20), 0);
  pl_pool_put(&pool, b, (size_t)5 << 20);
  pl_pool_destroy(&pool);
  toplu_tensor_t t;
  int64_t dims[2] = {1024, 1024}; /* 4 MiB of floats: zeroed */
  assert_int_equal(toplu_tensor_alloc(&t, TOPLU_DTYPE_FLOAT, 2, dims), TOPLU_OK);
  assert_int_equal((uintptr_t)t.data % ((size_t)2 << 20), 0);
  assert_true(((float *)t.data)[0] == 0.0f && ((float *)t.data)[1024 * 1024 - 1] == 0.0f);
  toplu_tensor_free(&t);
}

/* The pool keeps large blocks and hands them out again (the smallest that holds a request and is not twice as
 * large), frees small ones and those beyond its byte cap; a chunk's rows and batch go back to it. */
static void test_pool(void **state) {
  (void)state;
  pl_pool_t p;
  assert_int_equal(pl_pool_init(&p, (size_t)300 << 10), 0);
  size_t k100 = (size_t)100 << 10, k150 = (size_t)150 << 10;
  char *a = pl_pool_get(&p, k100), *b = pl_pool_get(&p, k150);
  assert_non_null(a);
  assert_non_null(b);
  assert_int_equal((uintptr_t)a % 64, 0);
  memset(a, 1, k100);
  memset(b, 2, k150);
  pl_pool_put(&p, a, k100);
  pl_pool_put(&p, b, k150);
  assert_int_equal(p.n, 2);
  assert_int_equal(p.kept, k100 + k150);
  assert_ptr_equal(pl_pool_get(&p, k100 - 100), a); /* the smaller block that holds it */
  assert_ptr_equal(pl_pool_get(&p, k100 + 1), b);   /* 150 KiB holds it, a is back out */
  assert_int_equal(p.n, 0);
  char *c = pl_pool_get(&p, (size_t)40 << 10);      /* nothing kept: a new block */
  assert_true(c != a && c != b);
  pl_pool_put(&p, c, (size_t)40 << 10);             /* under PL_POOL_MIN_BYTES: freed */
  assert_int_equal(p.n, 0);
  pl_pool_put(&p, pl_pool_get(&p, (size_t)200 << 10), (size_t)200 << 10);
  assert_int_equal(p.n, 1);
  char *small = pl_pool_get(&p, (size_t)50 << 10); /* under PL_POOL_MIN_BYTES: never from the pool */
  assert_int_equal(p.n, 1);
  free(small);
  pl_pool_destroy(&p);
  assert_int_equal(pl_pool_init(&p, (size_t)300 << 10), 0);
  assert_int_equal(p.n, 0);
  pl_pool_put(&p, a, k100);
  pl_pool_put(&p, b, k150);
  char *d = pl_pool_get(&p, (size_t)80 << 10); /* a and b both hold it: the smaller */
  assert_ptr_equal(d, a);
  char *e = pl_pool_get(&p, (size_t)70 << 10); /* only b is left, more than twice 70 KiB: a new block */
  assert_true(e != b);
  pl_pool_put(&p, d, (size_t)80 << 10); /* kept as 80 KiB (what the caller vouches for) */
  pl_pool_put(&p, e, (size_t)70 << 10);
  assert_int_equal(p.n, 3);
  assert_int_equal(p.kept, ((size_t)300 << 10)); /* 150 + 80 + 70 */
  pl_pool_put(&p, pl_pool_get(NULL, k100), k100); /* beyond the 300 KiB cap: freed */
  assert_int_equal(p.n, 3);
  pl_pool_destroy(&p);

  /* a chunk's rows, stacked through the pool: values as without it, every block given back */
  assert_int_equal(pl_pool_init(&p, 0), 0);
  pl_chunk_t ch;
  void *blocks[4] = {0}; /* round 0's three rows and its batch */
  for (int round = 0; round < 2; round++) {
    assert_int_equal(pl_chunk_init(&ch, round, 0, 3, 1, 1), 0);
    ch.pool = &p;
    int64_t dims[1] = {20000}; /* 80,000 bytes a row */
    for (int i = 0; i < 3; i++) {
      assert_int_equal(pl_pool_tensor(&p, &ch.rows[i].in[0], TOPLU_DTYPE_FLOAT, 1, dims), TOPLU_OK);
      float *v = ch.rows[i].in[0].data;
      if (round == 0) blocks[i] = v;
      else assert_true(v == blocks[0] || v == blocks[1] || v == blocks[2]); /* round 0's rows, not its batch */
      for (int k = 0; k < 20000; k++) v[k] = (float)(round * 100000 + i * 20000 + k);
    }
    assert_int_equal(pl_chunk_stack(&ch), 0);
    assert_int_equal(ch.n_batches, 1);
    assert_int_equal(ch.batches[0].in[0].dims[0], 3);
    const float *bv = ch.batches[0].in[0].data;
    if (round == 0) blocks[3] = ch.batches[0].in[0].data;
    else assert_ptr_equal(bv, blocks[3]);
    for (int k = 0; k < 60000; k += 7) assert_true(bv[k] == (float)(round * 100000 + k));
    assert_int_equal(p.n, 3); /* the rows went back as they were copied */
    pl_chunk_clear(&ch);
    assert_int_equal(p.n, 4); /* and the batch */
  }
  pl_pool_destroy(&p);
}

/* A chunk of 3 rows whose batch output is [3, 4] vals, post-processed by spec (the chunk is the caller's to clear). */
static void post_run(const char *spec, const float *vals, pl_chunk_t *c) {
  pl_post_t p;
  toplu_error_t err;
  assert_int_equal(pl_post_parse(spec, &p, &err), TOPLU_OK);
  assert_int_equal(pl_chunk_init(c, 0, 0, 3, 1, 1), 0);
  int64_t dims[1] = {4};
  for (int i = 0; i < 3; i++) toplu_tensor_alloc(&c->rows[i].in[0], TOPLU_DTYPE_FLOAT, 1, dims);
  assert_int_equal(pl_chunk_stack(c), 0);
  pl_batch_t *bt = &c->batches[0];
  int64_t od[2] = {3, 4};
  toplu_tensor_alloc(&bt->out[0], TOPLU_DTYPE_FLOAT, 2, od);
  memcpy(bt->out[0].data, vals, sizeof(float) * 12);
  bt->ran = 1;
  assert_int_equal(pl_post_chunk(&p, c), 0);
  pl_post_free(&p);
}

/* argmax, top-k (ties by index), softmax in place, NaN rows fail. */
static void test_postprocess(void **state) {
  (void)state;
  pl_post_t p;
  toplu_error_t err;
  assert_int_equal(pl_post_parse("softmax,topk=3", &p, &err), TOPLU_OK);
  assert_int_equal(p.kind, PL_POST_TOPK);
  assert_int_equal(p.k, 3);
  assert_int_equal(p.softmax, 1);
  assert_int_equal(pl_post_parse("argmax,topk=2", &p, &err), TOPLU_ERR_INVALID_ARGUMENT);
  assert_int_equal(pl_post_parse("topk=0", &p, &err), TOPLU_ERR_INVALID_ARGUMENT);
  assert_int_equal(pl_post_parse("frob", &p, &err), TOPLU_ERR_INVALID_ARGUMENT);
  const float vals[12] = {1, 5, 5, 2, 0, 0, 0, 0, 3, NAN, 1, 2};
  pl_chunk_t c;
  /* top-k of the raw values: ties go to the lower index */
  post_run("topk=3", vals, &c);
  assert_int_equal(c.rows[0].res.k, 3);
  assert_int_equal(c.rows[0].res.topk_index[0], 1);
  assert_int_equal(c.rows[0].res.topk_index[1], 2);
  assert_int_equal(c.rows[0].res.topk_index[2], 3);
  assert_true(c.rows[0].res.topk_score[0] == 5 && c.rows[0].res.topk_score[2] == 2);
  assert_int_equal(c.rows[1].res.topk_index[0], 0);
  assert_int_equal(c.rows[1].res.topk_index[2], 2);
  assert_string_equal(c.rows[2].fail_stage, "postprocess");
  assert_non_null(strstr(c.rows[2].fail_reason, "NaN"));
  pl_chunk_clear(&c);
  /* argmax: the first largest element */
  post_run("argmax", vals, &c);
  assert_int_equal(c.rows[0].res.argmax, 1);
  assert_int_equal(c.rows[1].res.argmax, 0);
  assert_null(c.rows[0].fail_stage);
  assert_string_equal(c.rows[2].fail_stage, "postprocess");
  pl_chunk_clear(&c);
  const float v3[12] = {0, 1, 7, 2, 0, 0, 0, 0, -1, 9, 9, 3};
  post_run("argmax", v3, &c);
  assert_int_equal(c.rows[0].res.argmax, 2);
  assert_int_equal(c.rows[2].res.argmax, 1);
  pl_chunk_clear(&c);
  /* softmax, then top-k: the scores are probabilities (numpy: exp(v - max) / sum), the output softmaxed in place */
  post_run("softmax,topk=3", vals, &c);
  double e4 = exp(-4.0), e3 = exp(-3.0), sum = 2 + e4 + e3;
  assert_int_equal(c.rows[0].res.topk_index[0], 1);
  assert_int_equal(c.rows[0].res.topk_index[2], 3);
  assert_true(fabs(c.rows[0].res.topk_score[0] - 1 / sum) < 1e-6);
  assert_true(fabs(c.rows[0].res.topk_score[1] - 1 / sum) < 1e-6);
  assert_true(fabs(c.rows[0].res.topk_score[2] - e3 / sum) < 1e-6);
  assert_true(fabs(c.rows[1].res.topk_score[0] - 0.25) < 1e-7);
  const float *o = c.batches[0].out[0].data;
  assert_true(fabs(o[0] - e4 / sum) < 1e-6 && fabs(o[4] - 0.25) < 1e-7);
  double total = 0;
  for (int k = 0; k < 4; k++) total += o[k];
  assert_true(fabs(total - 1) < 1e-6);
  assert_string_equal(c.rows[2].fail_stage, "postprocess");
  pl_chunk_clear(&c);
}

/* Checkpoints: JSON round trip, atomic save and load, settings compared by key. */
static void test_checkpoint(void **state) {
  (void)state;
  pl_state_t st;
  memset(&st, 0, sizeof st);
  st.phase = PL_PHASE_RUNNING;
  st.next_row = 4096;
  st.processed = 4000;
  st.failed = 96;
  st.errors_bytes = 12345;
  st.n_files = 2;
  st.file_bytes[0] = 777;
  st.file_bytes[1] = 1ll << 40;
  st.job = json_pack("{s:s, s:i}", "model", "m.onnx", "batch_size", 16);
  char path[1024];
  snprintf(path, sizeof path, "%s/state.json", work_dir);
  toplu_error_t err;
  assert_int_equal(pl_state_save(path, &st, &err), TOPLU_OK);
  char tmp[1100];
  snprintf(tmp, sizeof tmp, "%s.tmp", path);
  assert_false(pl_exists(tmp));
  pl_state_t back;
  int found = 0;
  assert_int_equal(pl_state_load(path, &back, &found, &err), TOPLU_OK);
  assert_int_equal(found, 1);
  assert_int_equal(back.next_row, 4096);
  assert_int_equal(back.failed, 96);
  assert_int_equal(back.n_files, 2);
  assert_true(back.file_bytes[1] == (1ll << 40));
  assert_true(json_equal(back.job, st.job));
  json_t *now = json_pack("{s:s, s:i}", "model", "m.onnx", "batch_size", 32);
  assert_int_equal(pl_state_check_job(back.job, now, "x", NULL, &err), TOPLU_ERR_INVALID_ARGUMENT);
  assert_non_null(strstr(err.message, "batch_size was 16, now 32"));
  const char *ignore[] = {"batch_size", NULL};
  assert_int_equal(pl_state_check_job(back.job, now, "x", ignore, &err), TOPLU_OK);
  json_decref(now);
  pl_state_free(&back);
  pl_state_free(&st);
  assert_int_equal(pl_state_parse("{\"format\": \"other\"}", "t", &back, &err), TOPLU_ERR_PARSE);
  assert_int_equal(pl_state_parse("not json", "t", &back, &err), TOPLU_ERR_PARSE);
  snprintf(path, sizeof path, "%s/absent.json", work_dir);
  assert_int_equal(pl_state_load(path, &back, &found, &err), TOPLU_OK);
  assert_int_equal(found, 0);
}

/* Hidden companion names of outputs. */
static void test_paths(void **state) {
  (void)state;
  char out[256];
  assert_int_equal(pl_path_hidden("dir/out.jsonl", ".part", out, sizeof out), 0);
  assert_string_equal(out, "dir/.out.jsonl.part");
  assert_int_equal(pl_path_hidden("out.csv", ".toplu-state", out, sizeof out), 0);
  assert_string_equal(out, "./.out.csv.toplu-state");
  assert_int_equal(pl_path_hidden("/a/b/", ".part", out, sizeof out), 0);
  assert_string_equal(out, "/a/.b.part");
  assert_int_equal(pl_path_hidden("x", ".part", out, 4), -1);
}

/* Canonical paths: ".." and "." removed, a missing tail kept, symbolic links of the existing part resolved. */
static void test_canon(void **state) {
  (void)state;
  char a[4096], b[4096], dir[2048], link[2100];
  assert_non_null(realpath(work_dir, dir));
  snprintf(a, sizeof a, "%s/sub/../new/./f.txt", dir);
  assert_int_equal(pl_path_canon(a, b, sizeof b), 0);
  snprintf(a, sizeof a, "%s/new/f.txt", dir);
  assert_string_equal(b, a);
  snprintf(link, sizeof link, "%s/canon_link", dir);
  unlink(link);
  assert_int_equal(symlink(dir, link), 0);
  snprintf(a, sizeof a, "%s/canon_link/x.npy", dir);
  assert_int_equal(pl_path_canon(a, b, sizeof b), 0);
  snprintf(a, sizeof a, "%s/x.npy", dir);
  assert_string_equal(b, a);
  assert_true(pl_path_inside(a, dir));
  assert_false(pl_path_inside(dir, a));
  snprintf(b, sizeof b, "%sx", dir); /* a sibling with a longer name is not inside */
  assert_false(pl_path_inside(b, dir));
}

/* Line index: blank lines skipped with physical line numbers kept; a BOM skipped. */
static void test_index_lines(void **state) {
  (void)state;
  char path[1024];
  snprintf(path, sizeof path, "%s/lines.txt", work_dir);
  FILE *f = fopen(path, "wb");
  assert_non_null(f);
  fputs("\xEF\xBB\xBF" "a,b\n\n  \n1,2\r\n\n3,4", f);
  fclose(f);
  int64_t *offs, *lens, *lines, n;
  toplu_error_t err;
  assert_int_equal(pl_index_lines(path, &offs, &lens, &lines, &n, &err), TOPLU_OK);
  assert_int_equal(n, 3);
  assert_int_equal(offs[0], 3);
  assert_int_equal(lens[0], 3);
  assert_int_equal(lines[0], 1);
  assert_int_equal(lines[1], 4);
  assert_int_equal(lines[2], 6);
  free(offs);
  free(lens);
  free(lines);
}

/* Job settings: the same files by identity, other bytes named. */
static void test_job_diff(void **state) {
  (void)state;
  char p[1024], why[1024];
  snprintf(p, sizeof p, "%s/ident.bin", work_dir);
  FILE *f = fopen(p, "wb");
  fputs("0123456789", f);
  fclose(f);
  json_t *a = pl_identity_file(p, why, sizeof why);
  assert_non_null(a);
  f = fopen(p, "r+b");
  fputs("x", f);
  fclose(f);
  json_t *b = pl_identity_file(p, why, sizeof why);
  assert_string_equal(pl_identity_diff(a, b, 0), "content");
  json_t *ja = json_pack("{s:O, s:[], s:i, s:s, s:s}", "model", a, "inputs", "rows", 5, "postprocess", "argmax",
                         "shard", "0/2");
  json_t *jb = json_pack("{s:O, s:[], s:i, s:s, s:s}", "model", a, "inputs", "rows", 5, "postprocess", "argmax",
                         "shard", "1/2");
  assert_int_equal(pl_job_diff(ja, jb, 1, why, sizeof why), 0); /* shards of one job */
  assert_int_equal(pl_job_diff(ja, jb, 0, why, sizeof why), 1); /* but not the same checkpoint */
  assert_non_null(strstr(why, "shard"));
  json_object_set(jb, "model", b);
  assert_int_equal(pl_job_diff(ja, jb, 1, why, sizeof why), 1);
  assert_non_null(strstr(why, "the model differs (content)"));
  json_t *old = json_pack("{s:s}", "model", "m.onnx");
  assert_int_equal(pl_job_diff(old, jb, 0, why, sizeof why), 2);
  json_decref(old);
  json_decref(ja);
  json_decref(jb);
  json_decref(a);
  json_decref(b);
}

int main(int argc, char **argv) {
  if (argc > 1) work_dir = argv[1];
  mkdir(work_dir, 0777);
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_buf_numbers),
    cmocka_unit_test(test_buf_float_text), cmocka_unit_test(test_buf_text),      cmocka_unit_test(test_shard_ranges),
      cmocka_unit_test(test_shard_env),   cmocka_unit_test(test_preprocess),    cmocka_unit_test(test_image_errors),
      cmocka_unit_test(test_chunk_buckets), cmocka_unit_test(test_postprocess), cmocka_unit_test(test_checkpoint),
      cmocka_unit_test(test_paths),       cmocka_unit_test(test_canon),         cmocka_unit_test(test_index_lines),
      cmocka_unit_test(test_job_diff), cmocka_unit_test(test_pool), cmocka_unit_test(test_alloc_large),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
