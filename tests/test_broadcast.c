/*
 * tests/test_broadcast.c - broadcasting (src/ops/broadcast.c) and the
 * element-wise loops (src/ops/elementwise_*.c) against naive references.
 *
 * Every broadcast fast path (same shape, scalar on either side, per-channel
 * on either side, row on either side, general odometer) runs on real values
 * with a non-commutative op (Sub), at sizes that split rows across OpenMP
 * chunks, with 1 and 4 threads, out of place and in place, and is compared
 * element by element with a reference that converts every flat index.
 */
#include <float.h>
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "ops/broadcast.h"
#include "ops/elementwise_loops.h"

/* A shape for the tests (rank 0..6). */
typedef struct shape {
  int ndim;
  int64_t dims[6];
} shape_t;

/* A tensor descriptor over data with the given shape. */
static toplu_tensor_t tensor_of(toplu_dtype_t dt, const shape_t *s, void *data) {
  toplu_tensor_t t;
  memset(&t, 0, sizeof t);
  t.dtype = dt;
  t.ndim = s->ndim;
  for (int d = 0; d < s->ndim; d++) t.dims[d] = s->dims[d];
  t.data = data;
  return t;
}

/* numpy broadcast of two shapes (the test cases are valid). */
static shape_t broadcast_shape(const shape_t *a, const shape_t *b) {
  shape_t o;
  o.ndim = a->ndim > b->ndim ? a->ndim : b->ndim;
  for (int d = 0; d < o.ndim; d++) {
    int da = d - (o.ndim - a->ndim), db = d - (o.ndim - b->ndim);
    int64_t x = da >= 0 ? a->dims[da] : 1, y = db >= 0 ? b->dims[db] : 1;
    o.dims[d] = x == 1 ? y : x;
  }
  return o;
}

static int64_t numel(const shape_t *s) {
  int64_t n = 1;
  for (int d = 0; d < s->ndim; d++) n *= s->dims[d];
  return n;
}

/* Offset in an input of shape in for flat output index i of shape out: the
 * reference, one index conversion per element. */
static int64_t ref_offset(const shape_t *out, const shape_t *in, int64_t i) {
  int64_t idx[6];
  for (int d = out->ndim - 1; d >= 0; d--) {
    idx[d] = i % out->dims[d];
    i /= out->dims[d];
  }
  int64_t off = 0;
  for (int d = 0; d < in->ndim; d++) {
    int od = d + out->ndim - in->ndim;
    off = off * in->dims[d] + (in->dims[d] == 1 ? 0 : idx[od]);
  }
  return off;
}

/* Deterministic values with varied signs. */
static float value(int64_t i, int salt) { return (float)((i * 7919 + salt * 104729) % 2001 - 1000) / 37.0f; }

typedef struct bcase {
  shape_t a, b;
  toplu__bcast_kind_t kind;
} bcase_t;

/* One of each fast path, on both sides, with sizes past the parallel
 * threshold and odd row lengths so chunks split rows. */
static const bcase_t cases[] = {
    {{4, {2, 3, 97, 71}}, {4, {2, 3, 97, 71}}, TOPLU_BCAST_SAME},
    {{3, {5, 7, 3}}, {3, {5, 7, 3}}, TOPLU_BCAST_SAME},
    {{4, {2, 3, 97, 71}}, {0, {0}}, TOPLU_BCAST_B_SCALAR},
    {{4, {2, 3, 97, 71}}, {2, {1, 1}}, TOPLU_BCAST_B_SCALAR},
    {{1, {1}}, {3, {9, 77, 61}}, TOPLU_BCAST_A_SCALAR},
    {{4, {3, 16, 29, 31}}, {4, {1, 16, 1, 1}}, TOPLU_BCAST_B_CHANNEL},
    {{4, {3, 16, 29, 31}}, {3, {16, 1, 1}}, TOPLU_BCAST_B_CHANNEL},
    {{4, {3, 16, 29, 31}}, {4, {3, 16, 1, 1}}, TOPLU_BCAST_B_CHANNEL}, /* SE block: [N,C,1,1] */
    {{3, {16, 1, 1}}, {4, {3, 16, 29, 31}}, TOPLU_BCAST_A_CHANNEL},
    {{4, {3, 5, 2, 1}}, {4, {3, 5, 2, 4}}, TOPLU_BCAST_A_CHANNEL},
    {{3, {41, 37, 29}}, {1, {29}}, TOPLU_BCAST_B_ROW},
    {{2, {37, 29}}, {3, {41, 37, 29}}, TOPLU_BCAST_A_ROW},
    {{3, {61, 1, 33}}, {3, {1, 47, 1}}, TOPLU_BCAST_GENERAL},
    {{4, {2, 1, 53, 37}}, {4, {1, 9, 53, 1}}, TOPLU_BCAST_GENERAL},
    {{3, {7, 9, 513}}, {3, {7, 1, 513}}, TOPLU_BCAST_GENERAL},
    {{2, {301, 1}}, {2, {1, 299}}, TOPLU_BCAST_GENERAL},
    {{5, {2, 1, 3, 1, 5}}, {4, {4, 1, 6, 1}}, TOPLU_BCAST_GENERAL},
    {{3, {1, 1, 1}}, {2, {1, 1}}, TOPLU_BCAST_SAME},
};
#define N_CASES (sizeof cases / sizeof cases[0])

/* Classification of every case. */
static void test_kinds(void **state) {
  (void)state;
  for (size_t c = 0; c < N_CASES; c++) {
    shape_t o = broadcast_shape(&cases[c].a, &cases[c].b);
    toplu_tensor_t ta = tensor_of(TOPLU_DTYPE_FLOAT, &cases[c].a, NULL);
    toplu_tensor_t tb = tensor_of(TOPLU_DTYPE_FLOAT, &cases[c].b, NULL);
    toplu_tensor_t ty = tensor_of(TOPLU_DTYPE_FLOAT, &o, NULL);
    const toplu_tensor_t *ins[2] = {&ta, &tb};
    toplu__bcast_t bc;
    assert_int_equal(toplu__bcast_init(&bc, 2, ins, &ty), 0);
    if (bc.kind != cases[c].kind) fprintf(stderr, "case %zu: kind %d, expected %d\n", c, bc.kind, cases[c].kind);
    assert_int_equal(bc.kind, cases[c].kind);
    assert_int_equal(bc.numel, numel(&o));
  }
}

/* Coalescing: [N,C,H,W] with [1,C,1,1] is [N, C, H*W] with strides (0,1,0). */
static void test_coalesce(void **state) {
  (void)state;
  shape_t a = {4, {2, 3, 4, 5}}, b = {4, {1, 3, 1, 1}};
  toplu_tensor_t ta = tensor_of(TOPLU_DTYPE_FLOAT, &a, NULL), tb = tensor_of(TOPLU_DTYPE_FLOAT, &b, NULL);
  const toplu_tensor_t *ins[2] = {&ta, &tb};
  toplu__bcast_t bc;
  assert_int_equal(toplu__bcast_init(&bc, 2, ins, &ta), 0);
  assert_int_equal(bc.ndim, 3);
  assert_int_equal(bc.dims[0], 2);
  assert_int_equal(bc.dims[1], 3);
  assert_int_equal(bc.dims[2], 20);
  assert_int_equal(bc.strides[0][0], 60);
  assert_int_equal(bc.strides[0][1], 20);
  assert_int_equal(bc.strides[0][2], 1);
  assert_int_equal(bc.strides[1][0], 0);
  assert_int_equal(bc.strides[1][1], 1);
  assert_int_equal(bc.strides[1][2], 0);
  assert_int_equal(bc.outer, 2);
  assert_int_equal(bc.channels, 3);
  assert_int_equal(bc.inner, 20);
}

/* Shapes that do not broadcast are refused, not asserted on. */
static void test_refuse(void **state) {
  (void)state;
  shape_t a = {2, {3, 4}}, b = {1, {5}}, o = {2, {3, 4}}, big = {3, {1, 3, 4}};
  toplu_tensor_t ta = tensor_of(TOPLU_DTYPE_FLOAT, &a, NULL), tb = tensor_of(TOPLU_DTYPE_FLOAT, &b, NULL);
  toplu_tensor_t to = tensor_of(TOPLU_DTYPE_FLOAT, &o, NULL), tbig = tensor_of(TOPLU_DTYPE_FLOAT, &big, NULL);
  const toplu_tensor_t *ins[2] = {&ta, &tb};
  toplu__bcast_t bc;
  assert_int_equal(toplu__bcast_init(&bc, 2, ins, &to), -1);
  const toplu_tensor_t *ins2[2] = {&tbig, &ta}; /* rank above the output's */
  assert_int_equal(toplu__bcast_init(&bc, 2, ins2, &to), -1);
  assert_int_equal(toplu__bcast_init(&bc, 0, ins, &to), -1);
  assert_int_equal(toplu__bcast_init(&bc, TOPLU_BCAST_MAX_IN + 1, ins, &to), -1);
}

/* Run Sub on one case (float, int32, and Less with a bool output) with the
 * given threads, optionally in place on the full-size input, and compare. */
static void check_case(const bcase_t *c, int threads, int inplace) {
  shape_t o = broadcast_shape(&c->a, &c->b);
  int64_t na = numel(&c->a), nb = numel(&c->b), ny = numel(&o);
  float *a = malloc((size_t)ny * sizeof *a), *b = malloc((size_t)ny * sizeof *b), *y = malloc((size_t)ny * sizeof *y);
  int32_t *ia = malloc((size_t)ny * sizeof *ia), *ib = malloc((size_t)ny * sizeof *ib), *iy = malloc((size_t)ny * sizeof *iy);
  uint8_t *by = malloc((size_t)ny);
  assert_non_null(a);
  assert_non_null(b);
  assert_non_null(y);
  assert_non_null(ia);
  assert_non_null(ib);
  assert_non_null(iy);
  assert_non_null(by);
  for (int64_t i = 0; i < na; i++) a[i] = value(i, 1), ia[i] = (int32_t)(i * 31 % 1000) - 500;
  for (int64_t i = 0; i < nb; i++) b[i] = value(i, 2), ib[i] = (int32_t)(i * 17 % 900) - 450;
  toplu_tensor_t ta = tensor_of(TOPLU_DTYPE_FLOAT, &c->a, a), tb = tensor_of(TOPLU_DTYPE_FLOAT, &c->b, b);
  toplu_tensor_t ty = tensor_of(TOPLU_DTYPE_FLOAT, &o, y);
  const toplu_tensor_t *ins[2] = {&ta, &tb};
  toplu__bcast_t bc;
  assert_int_equal(toplu__bcast_init(&bc, 2, ins, &ty), 0);

  /* In place: the output is the buffer of the input with the output's size. */
  int on_a = inplace && na == ny, on_b = inplace && !on_a && nb == ny;
  float *ya = on_a ? a : on_b ? b : y;
  int32_t *iya = on_a ? ia : on_b ? ib : iy;
  float *a0 = malloc((size_t)na * sizeof *a0), *b0 = malloc((size_t)nb * sizeof *b0);
  int32_t *ia0 = malloc((size_t)na * sizeof *ia0), *ib0 = malloc((size_t)nb * sizeof *ib0);
  assert_non_null(a0);
  assert_non_null(b0);
  assert_non_null(ia0);
  assert_non_null(ib0);
  memcpy(a0, a, (size_t)na * sizeof *a);
  memcpy(b0, b, (size_t)nb * sizeof *b);
  memcpy(ia0, ia, (size_t)na * sizeof *ia);
  memcpy(ib0, ib, (size_t)nb * sizeof *ib);

  const toplu__binary_loops_t *lt = toplu__ew_binary_lookup(TOPLU_EW_LESS, TOPLU_DTYPE_FLOAT);
  assert_non_null(lt);
  toplu__bcast_binary(&bc, lt, a, b, by, threads); /* before the in-place runs change a or b */
  const toplu__binary_loops_t *sub = toplu__ew_binary_lookup(TOPLU_EW_SUB, TOPLU_DTYPE_FLOAT);
  const toplu__binary_loops_t *isub = toplu__ew_binary_lookup(TOPLU_EW_SUB, TOPLU_DTYPE_INT32);
  assert_non_null(sub);
  assert_non_null(isub);
  toplu__bcast_binary(&bc, sub, a, b, ya, threads);
  toplu__bcast_binary(&bc, isub, ia, ib, iya, threads);

  int64_t bad = 0;
  for (int64_t i = 0; i < ny; i++) {
    int64_t oa = ref_offset(&o, &c->a, i), ob = ref_offset(&o, &c->b, i);
    float want = a0[oa] - b0[ob];
    int32_t iwant = ia0[oa] - ib0[ob];
    uint8_t bwant = a0[oa] < b0[ob];
    if (ya[i] != want || iya[i] != iwant || by[i] != bwant) {
      if (bad++ < 5)
        fprintf(stderr, "kind %d threads %d inplace %d: y[%lld] = %g / %d / %d, expected %g / %d / %d\n", bc.kind,
                threads, inplace, (long long)i, ya[i], iya[i], by[i], want, iwant, bwant);
    }
  }
  assert_int_equal(bad, 0);
  free(a), free(b), free(y), free(ia), free(ib), free(iy), free(by);
  free(a0), free(b0), free(ia0), free(ib0);
}

static void test_binary_single_thread(void **state) {
  (void)state;
  for (size_t c = 0; c < N_CASES; c++) check_case(&cases[c], 1, 0);
}

static void test_binary_threads(void **state) {
  (void)state;
  for (size_t c = 0; c < N_CASES; c++) check_case(&cases[c], 4, 0);
}

static void test_binary_inplace(void **state) {
  (void)state;
  for (size_t c = 0; c < N_CASES; c++) {
    check_case(&cases[c], 1, 1);
    check_case(&cases[c], 3, 1);
  }
}

/* Three inputs through the row iterator (Where's pattern). */
static void test_iterator(void **state) {
  (void)state;
  shape_t sc = {3, {1, 23, 1}}, sx = {2, {1, 19}}, sz = {3, {11, 1, 19}}, so = {3, {11, 23, 19}};
  int64_t nc = numel(&sc), nx = numel(&sx), nz = numel(&sz), ny = numel(&so);
  uint8_t *c = malloc((size_t)nc);
  float *x = malloc((size_t)nx * sizeof *x), *z = malloc((size_t)nz * sizeof *z), *y = malloc((size_t)ny * sizeof *y);
  assert_non_null(c);
  assert_non_null(x);
  assert_non_null(z);
  assert_non_null(y);
  for (int64_t i = 0; i < nc; i++) c[i] = (uint8_t)(i % 3 == 0);
  for (int64_t i = 0; i < nx; i++) x[i] = value(i, 3);
  for (int64_t i = 0; i < nz; i++) z[i] = value(i, 4);
  toplu_tensor_t tc = tensor_of(TOPLU_DTYPE_BOOL, &sc, c), tx = tensor_of(TOPLU_DTYPE_FLOAT, &sx, x);
  toplu_tensor_t tz = tensor_of(TOPLU_DTYPE_FLOAT, &sz, z), ty = tensor_of(TOPLU_DTYPE_FLOAT, &so, y);
  const toplu_tensor_t *ins[3] = {&tc, &tx, &tz};
  toplu__bcast_t bc;
  assert_int_equal(toplu__bcast_init(&bc, 3, ins, &ty), 0);
  int64_t L = bc.dims[bc.ndim - 1];
  int64_t s0 = toplu__bcast_row_step(&bc, 0), s1 = toplu__bcast_row_step(&bc, 1), s2 = toplu__bcast_row_step(&bc, 2);
  toplu__bcast_iter_t it;
  toplu__bcast_iter_seek(&bc, &it, 0);
  for (int64_t r = 0; r < bc.numel / L; r++) {
    for (int64_t i = 0; i < L; i++)
      y[r * L + i] = c[it.off[0] + i * s0] ? x[it.off[1] + i * s1] : z[it.off[2] + i * s2];
    toplu__bcast_iter_next(&bc, &it);
  }
  for (int64_t i = 0; i < ny; i++) {
    float want = c[ref_offset(&so, &sc, i)] ? x[ref_offset(&so, &sx, i)] : z[ref_offset(&so, &sz, i)];
    assert_true(y[i] == want);
  }
  /* seek to an arbitrary row agrees with stepping */
  toplu__bcast_iter_t a, b;
  toplu__bcast_iter_seek(&bc, &a, 0);
  for (int r = 0; r < 37; r++) toplu__bcast_iter_next(&bc, &a);
  toplu__bcast_iter_seek(&bc, &b, 37);
  for (int k = 0; k < 3; k++) assert_int_equal(a.off[k], b.off[k]);
  free(c), free(x), free(z), free(y);
}

/* Flat ranges cover [0, n) exactly once with any thread count. */
static void mark_range(int64_t s, int64_t e, void *user) {
  uint8_t *hits = user;
  for (int64_t i = s; i < e; i++) hits[i]++;
}

static void test_parallel_ranges(void **state) {
  (void)state;
  const int64_t sizes[] = {1, 63, 64, 65, 1000, 40000, 100003};
  for (size_t k = 0; k < sizeof sizes / sizeof sizes[0]; k++)
    for (int t = 1; t <= 5; t++) {
      uint8_t *hits = calloc((size_t)sizes[k], 1);
      assert_non_null(hits);
      toplu__parallel_ranges(sizes[k], t, 0, mark_range, hits);
      for (int64_t i = 0; i < sizes[k]; i++) assert_int_equal(hits[i], 1);
      free(hits);
    }
}

/* The vectorisable exp, sigmoid and tanh stay within a few ulp of libm. */
static void test_fast_math(void **state) {
  (void)state;
  enum { N = 20001 };
  static float x[N], y[N];
  for (int i = 0; i < N; i++) x[i] = -100.0f + 200.0f * (float)i / (N - 1);
  toplu__ew_params_t p;
  memset(&p, 0, sizeof p);
  const toplu__ew_unary_op_t ops[] = {TOPLU_EW_EXP, TOPLU_EW_SIGMOID, TOPLU_EW_TANH};
  for (size_t k = 0; k < 3; k++) {
    toplu__ew_unary_fn f = toplu__ew_unary_lookup(ops[k], TOPLU_DTYPE_FLOAT);
    assert_non_null(f);
    f(N, x, y, &p);
    for (int i = 0; i < N; i++) {
      double v = x[i];
      double want = ops[k] == TOPLU_EW_EXP ? exp(v) : ops[k] == TOPLU_EW_SIGMOID ? 1.0 / (1.0 + exp(-v)) : tanh(v);
      if (want > FLT_MAX) {
        assert_true(isinf(y[i]));
        continue;
      }
      double err = fabs(y[i] - want);
      if (!(err <= 1e-6 * fabs(want) || err <= 1e-37)) fprintf(stderr, "op %zu x=%g: %.9g vs %.9g\n", k, v, y[i], want);
      assert_true(err <= 1e-6 * fabs(want) || err <= 1e-37);
    }
  }
  /* tiny tanh arguments keep their relative accuracy */
  float t[3] = {1e-7f, -3e-4f, 0.1f}, ty[3];
  toplu__ew_unary_lookup(TOPLU_EW_TANH, TOPLU_DTYPE_FLOAT)(3, t, ty, &p);
  for (int i = 0; i < 3; i++) assert_true(fabs(ty[i] - tanh(t[i])) <= 1e-6 * fabs(tanh(t[i])));
  /* NaN stays NaN */
  float nan_in = NAN, out;
  for (size_t k = 0; k < 3; k++) {
    toplu__ew_unary_lookup(ops[k], TOPLU_DTYPE_FLOAT)(1, &nan_in, &out, &p);
    assert_true(out != out);
  }
}

/* Cast edge cases: truncation toward zero, NaN and bool, float16 rounding. */
static void test_cast(void **state) {
  (void)state;
  float f[6] = {-2.7f, 2.7f, NAN, 300.0f, -0.0f, 1e30f};
  int8_t i8[6];
  toplu__ew_cast_lookup(TOPLU_DTYPE_FLOAT, TOPLU_DTYPE_INT8)(6, f, i8);
  assert_int_equal(i8[0], -2);
  assert_int_equal(i8[1], 2);
  assert_int_equal(i8[2], 0);
  assert_int_equal(i8[3], (int8_t)300); /* wraps like numpy */
  int64_t i64[6];
  toplu__ew_cast_lookup(TOPLU_DTYPE_FLOAT, TOPLU_DTYPE_INT64)(6, f, i64);
  assert_int_equal(i64[0], -2);
  assert_true(i64[5] == INT64_MAX);
  uint8_t bo[6];
  toplu__ew_cast_lookup(TOPLU_DTYPE_FLOAT, TOPLU_DTYPE_BOOL)(6, f, bo);
  assert_int_equal(bo[0], 1);
  assert_int_equal(bo[2], 1); /* NaN is true */
  assert_int_equal(bo[4], 0);
  uint16_t h[6];
  toplu__ew_cast_lookup(TOPLU_DTYPE_FLOAT, TOPLU_DTYPE_FLOAT16)(6, f, h);
  assert_int_equal(h[1], 0x4166); /* 2.7 -> 2.69921875 */
  double d[6];
  toplu__ew_cast_lookup(TOPLU_DTYPE_FLOAT16, TOPLU_DTYPE_DOUBLE)(6, h, d);
  assert_true(d[1] == 2.69921875);
  uint64_t u = UINT64_MAX;
  double du;
  toplu__ew_cast_lookup(TOPLU_DTYPE_UINT64, TOPLU_DTYPE_DOUBLE)(1, &u, &du);
  assert_true(du == 18446744073709551616.0);
  assert_null(toplu__ew_cast_lookup(TOPLU_DTYPE_STRING, TOPLU_DTYPE_FLOAT));
}

/* Integer edge cases: Div and Mod by zero and INT_MIN / -1 do not trap. */
static void test_int_div(void **state) {
  (void)state;
  int32_t a[4] = {7, -7, INT32_MIN, 5}, b[4] = {0, 2, -1, -3}, y[4];
  toplu__ew_binary_lookup(TOPLU_EW_DIV, TOPLU_DTYPE_INT32)->vv(4, a, b, y);
  assert_int_equal(y[0], 0);
  assert_int_equal(y[1], -3); /* truncates like C */
  assert_int_equal(y[2], INT32_MIN);
  assert_int_equal(y[3], -1);
  toplu__ew_binary_lookup(TOPLU_EW_MOD, TOPLU_DTYPE_INT32)->vv(4, a, b, y);
  assert_int_equal(y[1], 1);  /* sign of the divisor */
  assert_int_equal(y[3], -1);
  toplu__ew_binary_lookup(TOPLU_EW_FMOD, TOPLU_DTYPE_INT32)->vv(4, a, b, y);
  assert_int_equal(y[1], -1); /* sign of the dividend */
  assert_int_equal(y[3], 2);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_kinds),          cmocka_unit_test(test_coalesce),
      cmocka_unit_test(test_refuse),         cmocka_unit_test(test_binary_single_thread),
      cmocka_unit_test(test_binary_threads), cmocka_unit_test(test_binary_inplace),
      cmocka_unit_test(test_iterator),       cmocka_unit_test(test_parallel_ranges),
      cmocka_unit_test(test_fast_math),      cmocka_unit_test(test_cast),
      cmocka_unit_test(test_int_div),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
