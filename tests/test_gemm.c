/*
 * tests/test_gemm.c - toplu's own GEMM (src/ops/onednn/gemm_avx2.c) and the
 * vector GELU (src/ops/fastmath.c) against references.
 *
 * GEMM: C = A . B (+ bias, + a residual addend, GELU) for shapes that take
 * every path (6 x 64 tiles, 6 x 32 and 12 x 16 for N not a multiple of 64,
 * the last rows of a block, one row, K deeper than one 768-deep slice, M
 * above one row block), with 1 and 2 threads, against a double-precision
 * product (|C - ref| <= 1e-5 * (1 + sum |a||b|)), and with the same bits
 * from 1 and 2 threads (each element is one FMA chain).
 * GELU: the AVX-512 loop against the scalar toplu__gelu_erff over [-10, 10]
 * (within 3e-7 absolute, relative 1e-6 away from zero) and on NaN, +-inf,
 * +-0 and lengths that are not multiples of 16.
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

#include "graph/graph.h"
#include "ops/fastmath.h"
#include "ops/onednn/gemm_avx2.h"

static uint32_t rng = 12345u;
static float frand(void) { /* [-1, 1) */
  rng = rng * 1664525u + 1013904223u;
  return (float)((rng >> 8) * (1.0 / 16777216.0) * 2.0 - 1.0);
}

static void gemm_case(int64_t m, int64_t n, int64_t k, int threads, int post) {
  float *a = malloc((size_t)(m * k) * sizeof *a), *b = malloc((size_t)(k * n) * sizeof *b);
  float *bias = malloc((size_t)n * sizeof *bias), *add = malloc((size_t)(m * n) * sizeof *add);
  float *bp = malloc(toplu__gemm_packed_size(k, n) * sizeof *bp);
  float *c0 = malloc((size_t)(m * n) * sizeof *c0), *c1 = malloc((size_t)(m * n) * sizeof *c1);
  assert_non_null(a), assert_non_null(b), assert_non_null(bias), assert_non_null(add), assert_non_null(bp);
  assert_non_null(c0), assert_non_null(c1);
  for (int64_t i = 0; i < m * k; i++) a[i] = frand();
  for (int64_t i = 0; i < k * n; i++) b[i] = frand();
  for (int64_t i = 0; i < n; i++) bias[i] = frand();
  for (int64_t i = 0; i < m * n; i++) add[i] = frand();
  toplu__gemm_pack_b(b, n, k, n, bp);
  toplu__node_t node;
  memset(&node, 0, sizeof node);
  toplu__gemm_post_t po = {.bias = bias, .node = &node, .addend = add};
  if (post) { /* bias, the residual sum, then GELU */
    node.n_post = 3;
    node.post[0].kind = TOPLU_POST_BIAS;
    node.post[1].kind = TOPLU_POST_SUM;
    node.post[2].kind = TOPLU_POST_GELU_ERF;
  }
  toplu__gemm_packed(a, k, bp, c0, m, n, k, post ? &po : NULL, threads);
  toplu__gemm_packed(a, k, bp, c1, m, n, k, post ? &po : NULL, 3 - threads); /* the other thread count */
  char what[128];
  snprintf(what, sizeof what, "%lld x %lld x %lld, %d threads, post %d", (long long)m, (long long)k, (long long)n,
           threads, post);
  assert_memory_equal(c0, c1, (size_t)(m * n) * sizeof *c0); /* 1 or 2 threads: the same bits */
  for (int64_t i = 0; i < m; i++)
    for (int64_t j = 0; j < n; j++) {
      double s = 0, mag = 0;
      for (int64_t p = 0; p < k; p++) s += (double)a[i * k + p] * b[p * n + j], mag += fabs(a[i * k + p] * b[p * n + j]);
      if (post) {
        s += bias[j] + add[i * n + j];
        s = 0.5 * s * (1.0 + erf(s / sqrt(2.0)));
      }
      double d = fabs(c0[i * n + j] - s);
      if (!(d <= 1e-5 * (1.0 + mag))) fail_msg("%s: C[%lld][%lld] = %.8g, reference %.8g", what, (long long)i, (long long)j, c0[i * n + j], s);
    }
  free(a), free(b), free(bias), free(add), free(bp), free(c0), free(c1);
}

static void test_gemm_shapes(void **state) {
  (void)state;
  if (!toplu__gemm_avx2_ok()) skip();
  static const int64_t shapes[][3] = {
      {128, 768, 96},  /* BERT's rows: 21 tiles of 6 and 2 left, 12 groups of four panels */
      {130, 256, 900}, /* two slices of K, the second partial */
      {300, 200, 64},  /* more than one row block; N = 3 x 64 + 8 (6x32 / 12x16 / the edge) */
      {48, 64, 800},   /* 8 tiles, two slices */
      {47, 80, 33},    /* 7 tiles and 5 rows left; one 64-wide and one 16-wide panel */
      {1, 512, 784},   /* one row (the MLP's batch 1) */
      {7, 16, 5},      /* one panel, shallow */
  };
  for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++)
    for (int threads = 1; threads <= 2; threads++)
      for (int post = 0; post <= 1; post++) gemm_case(shapes[s][0], shapes[s][1], shapes[s][2], threads, post);
}

static void test_gelu_vector(void **state) {
  (void)state;
  enum { N = 4001 };
  static float x[N], y[N];
  for (int i = 0; i < N; i++) x[i] = -10.f + 20.f * (float)i / (N - 1);
  for (int len = 0; len <= 40; len++) { /* lengths around the 16-lane masks */
    memcpy(y, x + 1000, sizeof(float) * (size_t)len);
    y[len] = 1234.f;
    toplu__gelu_erf_f32(y, len);
    assert_true(y[len] == 1234.f); /* nothing written past n */
    for (int i = 0; i < len; i++) assert_true(fabsf(y[i] - toplu__gelu_erff(x[1000 + i])) <= 3e-7f);
  }
  memcpy(y, x, sizeof y);
  toplu__gelu_erf_f32(y, N);
  for (int i = 0; i < N; i++) {
    float want = toplu__gelu_erff(x[i]);
    float d = fabsf(y[i] - want);
    if (!(d <= 3e-7f || d <= 1e-6f * fabsf(want)))
      fail_msg("gelu(%.7g) = %.9g, scalar %.9g", x[i], y[i], want);
    double exact = 0.5 * x[i] * (1.0 + erf(x[i] / sqrt(2.0)));
    assert_true(fabs(y[i] - exact) <= 4e-7 * (1.0 + fabs(exact)));
  }
  float sp[] = {NAN, INFINITY, 0.f, -0.f, -30.f, 30.f, 1e30f, -1e30f, 1e-30f, 0.5f, -0.5f, 3.f, -3.f, 88.f, -88.f, 9.f};
  float v[16];
  memcpy(v, sp, sizeof v);
  toplu__gelu_erf_f32(v, 16);
  assert_true(isnan(v[0]));
  assert_true(isinf(v[1]) && v[1] > 0);
  assert_true(v[2] == 0.f && !signbit(v[2]));
  assert_true(v[3] == 0.f && signbit(v[3]));
  for (int i = 4; i < 16; i++) assert_true(v[i] == toplu__gelu_erff(sp[i]) || fabsf(v[i] - toplu__gelu_erff(sp[i])) <= 3e-7f);
  assert_true(v[4] == 0.f && v[5] == 30.f && v[6] == 1e30f && v[7] == 0.f);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_gemm_shapes),
      cmocka_unit_test(test_gelu_vector),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
