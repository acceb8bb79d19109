/* ops/onednn/gemm_avx2.c - toplu's own AVX2 float32 GEMM (see gemm_avx2.h). */
#include "ops/onednn/gemm_avx2.h"

#include <omp.h>
#include <stdlib.h>
#include <string.h>

#include "ops/fastmath.h"
#include "ops/onednn/onednn.h"

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#define GEMM_X86 1
#define GEMM_TARGET __attribute__((target("avx2,fma")))
#else
#define GEMM_X86 0
#define GEMM_TARGET
#endif

/* Rows of A per work item (a multiple of TOPLU_GEMM_MR), and at most this
 * many 16-column panels per item. */
#define GEMM_MB 96
#define GEMM_MB_ONE 258
#define GEMM_GROUP 8
/* Depth of A and B slices on the AVX-512 path: 768, not TOPLU_GEMM_KC.  The
 * four-panel slice of B (kc x 64 floats) is L2-resident either way (64 KiB
 * at 256 already exceeds a 48 KiB L1), so a deeper slice only saves the C
 * round trips between slices: on a Zen 5 pair, 2 threads, BERT-base's six
 * shapes at 128 and 512 rows and the MLP's 64 x 784 x 512 went from 362 to
 * 384 GFLOP/s on average (mean of 50 calls each; 1024 gave 383, 128 gave
 * less than 256).  The sum is the same FMA chain either way: same bits. */
#define GEMM_KC_WIDE 768
/* The zmm kernels prefetch B this many k-steps ahead (into L1).  In a model
 * the weights come from memory on every run (BERT-base's are 340 MB): a
 * 12-layer chain of BERT's six products, distinct weights per layer, ran
 * 2.5-10% faster with it on an Intel Xeon (AVX-512) pair at 64, 128 and 512
 * rows, 1 and 2 threads (in-process alternation; 8 gave 2-3%, 12-24 4-7%,
 * 32 3-5%, 64 1-2%).  On hot, cache-resident B it changes nothing. */
#define GEMM_PF 16
#define GEMM_PREFETCH(p) _mm_prefetch((const char *)(p), _MM_HINT_T0)

int toplu__gemm_avx2_ok(void) {
#if GEMM_X86 && (defined(__GNUC__) || defined(__clang__))
  return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
#else
  return 0;
#endif
}

int toplu__gemm_avx512_ok(void) { return toplu__cpu_avx512_ok(); /* ops/fastmath.c: one check for all loops */ }

#if GEMM_X86
#define GEMM_T512 __attribute__((target("avx512f,avx2,fma")))

/* C[6][64] = (accumulate ? C : 0) + A[6][kc] . four consecutive packed
 * panels (panel q at b + q * ps, [kc][16] each): one zmm per panel and row,
 * 24 accumulators.  Each element is one FMA chain over p, in the order of
 * toplu__gemm_kernel_6x16, so the two give the same bits. */
GEMM_T512 static void kernel_6x64(const float *a, int64_t lda, const float *b, int64_t ps, int64_t kc, float *c,
                                  int64_t ldc, int accumulate) {
  __m512 acc[6][4];
  for (int r = 0; r < 6; r++)
    for (int q = 0; q < 4; q++) acc[r][q] = accumulate ? _mm512_loadu_ps(c + r * ldc + q * 16) : _mm512_setzero_ps();
  const float *b0 = b, *b1 = b + ps, *b2 = b + 2 * ps, *b3 = b + 3 * ps;
  for (int64_t p = 0; p < kc; p++) {
    __m512 y0 = _mm512_loadu_ps(b0 + p * 16), y1 = _mm512_loadu_ps(b1 + p * 16), y2 = _mm512_loadu_ps(b2 + p * 16),
           y3 = _mm512_loadu_ps(b3 + p * 16);
    GEMM_PREFETCH(b0 + (p + GEMM_PF) * 16), GEMM_PREFETCH(b1 + (p + GEMM_PF) * 16);
    GEMM_PREFETCH(b2 + (p + GEMM_PF) * 16), GEMM_PREFETCH(b3 + (p + GEMM_PF) * 16);
    for (int r = 0; r < 6; r++) {
      __m512 x = _mm512_set1_ps(a[r * lda + p]);
      acc[r][0] = _mm512_fmadd_ps(x, y0, acc[r][0]);
      acc[r][1] = _mm512_fmadd_ps(x, y1, acc[r][1]);
      acc[r][2] = _mm512_fmadd_ps(x, y2, acc[r][2]);
      acc[r][3] = _mm512_fmadd_ps(x, y3, acc[r][3]);
    }
  }
  for (int r = 0; r < 6; r++)
    for (int q = 0; q < 4; q++) _mm512_storeu_ps(c + r * ldc + q * 16, acc[r][q]);
}

/* C[6][32] from two consecutive packed panels (12 accumulators), and
 * C[12][16] from one (12 rows: twelve accumulators, where one panel of 6
 * rows in zmm would leave the FMA units waiting on six dependent chains):
 * for an N that is not a multiple of 64.  Same FMA chains, same bits, as
 * kernel_6x64 and toplu__gemm_kernel_6x16. */
GEMM_T512 static void kernel_6x32(const float *a, int64_t lda, const float *b, int64_t ps, int64_t kc, float *c,
                                  int64_t ldc, int accumulate) {
  __m512 acc[6][2];
  for (int r = 0; r < 6; r++)
    for (int q = 0; q < 2; q++) acc[r][q] = accumulate ? _mm512_loadu_ps(c + r * ldc + q * 16) : _mm512_setzero_ps();
  const float *b0 = b, *b1 = b + ps;
  for (int64_t p = 0; p < kc; p++) {
    __m512 y0 = _mm512_loadu_ps(b0 + p * 16), y1 = _mm512_loadu_ps(b1 + p * 16);
    GEMM_PREFETCH(b0 + (p + GEMM_PF) * 16), GEMM_PREFETCH(b1 + (p + GEMM_PF) * 16);
    for (int r = 0; r < 6; r++) {
      __m512 x = _mm512_set1_ps(a[r * lda + p]);
      acc[r][0] = _mm512_fmadd_ps(x, y0, acc[r][0]);
      acc[r][1] = _mm512_fmadd_ps(x, y1, acc[r][1]);
    }
  }
  for (int r = 0; r < 6; r++)
    for (int q = 0; q < 2; q++) _mm512_storeu_ps(c + r * ldc + q * 16, acc[r][q]);
}

GEMM_T512 static void kernel_12x16(const float *a, int64_t lda, const float *b, int64_t kc, float *c, int64_t ldc,
                                   int accumulate) {
  __m512 acc[12];
  for (int r = 0; r < 12; r++) acc[r] = accumulate ? _mm512_loadu_ps(c + r * ldc) : _mm512_setzero_ps();
  for (int64_t p = 0; p < kc; p++) {
    __m512 y = _mm512_loadu_ps(b + p * 16);
    GEMM_PREFETCH(b + (p + GEMM_PF) * 16);
    for (int r = 0; r < 12; r++) acc[r] = _mm512_fmadd_ps(_mm512_set1_ps(a[r * lda + p]), y, acc[r]);
  }
  for (int r = 0; r < 12; r++) _mm512_storeu_ps(c + r * ldc, acc[r]);
}

/* C[R][16 * NP] for the R < 6 last rows of a block, over NP = 4, 2 or 1
 * consecutive packed panels, reading A's rows in place (the 6x16 edge path
 * copies them into a zero-padded 6-row buffer for every panel and computes
 * 6 rows for R: BERT's 128 rows are 21 tiles of 6 and 2 left over).  Same
 * FMA chains, same bits, as the kernels above. */
GEMM_T512 static inline __attribute__((always_inline)) void kernel_tail(const int R, const int NP, const float *a,
                                                                        int64_t lda, const float *b, int64_t ps,
                                                                        int64_t kc, float *c, int64_t ldc,
                                                                        int accumulate) {
  __m512 acc[5][4], y[4];
  for (int r = 0; r < R; r++)
    for (int q = 0; q < NP; q++) acc[r][q] = accumulate ? _mm512_loadu_ps(c + r * ldc + q * 16) : _mm512_setzero_ps();
  for (int64_t p = 0; p < kc; p++) {
    for (int q = 0; q < NP; q++) y[q] = _mm512_loadu_ps(b + q * ps + p * 16);
    for (int q = 0; R > 1 && q < NP; q++) GEMM_PREFETCH(b + q * ps + (p + GEMM_PF) * 16);
    for (int r = 0; r < R; r++) {
      __m512 x = _mm512_set1_ps(a[r * lda + p]);
      for (int q = 0; q < NP; q++) acc[r][q] = _mm512_fmadd_ps(x, y[q], acc[r][q]);
    }
  }
  for (int r = 0; r < R; r++)
    for (int q = 0; q < NP; q++) _mm512_storeu_ps(c + r * ldc + q * 16, acc[r][q]);
}

/* One row (a batch of one): its own function, without the prefetch.  There
 * the loads outnumber the FMAs already, and with the row in the same switch
 * as the others (which prefetch) one row on a cache-resident B (the MLP's
 * 784 x 512 at batch 1) ran 8-10% slower, even where this case itself issued
 * no prefetch. */
GEMM_T512 __attribute__((noinline)) static void kernel_tail_row(int np, const float *a, const float *b, int64_t ps,
                                                                int64_t kc, float *c, int accumulate) {
  switch (np) {
    case 4: kernel_tail(1, 4, a, 0, b, ps, kc, c, 0, accumulate); break;
    case 2: kernel_tail(1, 2, a, 0, b, ps, kc, c, 0, accumulate); break;
    case 1: kernel_tail(1, 1, a, 0, b, ps, kc, c, 0, accumulate); break;
    default: break;
  }
}

GEMM_T512 static void kernel_tail_rows(int mr, int np, const float *a, int64_t lda, const float *b, int64_t ps,
                                       int64_t kc, float *c, int64_t ldc, int accumulate) {
#define TAIL_CASE(R, NP) \
  case R * 8 + NP: kernel_tail(R, NP, a, lda, b, ps, kc, c, ldc, accumulate); break;
#define TAIL_ROWS(R) TAIL_CASE(R, 4) TAIL_CASE(R, 2) TAIL_CASE(R, 1)
  if (mr == 1) {
    kernel_tail_row(np, a, b, ps, kc, c, accumulate);
    return;
  }
  switch (mr * 8 + np) {
    TAIL_ROWS(2)
    TAIL_ROWS(3)
    TAIL_ROWS(4)
    TAIL_ROWS(5)
    default: break;
  }
#undef TAIL_ROWS
#undef TAIL_CASE
}

GEMM_TARGET void toplu__gemm_kernel_6x16(const float *a, int64_t lda, const float *b, int64_t kc, float *c, int64_t ldc,
                                         int accumulate) {
  __m256 c00, c01, c10, c11, c20, c21, c30, c31, c40, c41, c50, c51;
  if (accumulate) {
    c00 = _mm256_loadu_ps(c), c01 = _mm256_loadu_ps(c + 8);
    c10 = _mm256_loadu_ps(c + ldc), c11 = _mm256_loadu_ps(c + ldc + 8);
    c20 = _mm256_loadu_ps(c + 2 * ldc), c21 = _mm256_loadu_ps(c + 2 * ldc + 8);
    c30 = _mm256_loadu_ps(c + 3 * ldc), c31 = _mm256_loadu_ps(c + 3 * ldc + 8);
    c40 = _mm256_loadu_ps(c + 4 * ldc), c41 = _mm256_loadu_ps(c + 4 * ldc + 8);
    c50 = _mm256_loadu_ps(c + 5 * ldc), c51 = _mm256_loadu_ps(c + 5 * ldc + 8);
  } else {
    c00 = _mm256_setzero_ps(), c01 = c00, c10 = c00, c11 = c00, c20 = c00, c21 = c00, c30 = c00, c31 = c00;
    c40 = c00, c41 = c00, c50 = c00, c51 = c00;
  }
  const float *a0 = a, *a1 = a + lda, *a2 = a + 2 * lda, *a3 = a + 3 * lda, *a4 = a + 4 * lda, *a5 = a + 5 * lda;
  for (int64_t p = 0; p < kc; p++) {
    __m256 b0 = _mm256_loadu_ps(b + p * 16), b1 = _mm256_loadu_ps(b + p * 16 + 8), x;
    x = _mm256_broadcast_ss(a0 + p), c00 = _mm256_fmadd_ps(x, b0, c00), c01 = _mm256_fmadd_ps(x, b1, c01);
    x = _mm256_broadcast_ss(a1 + p), c10 = _mm256_fmadd_ps(x, b0, c10), c11 = _mm256_fmadd_ps(x, b1, c11);
    x = _mm256_broadcast_ss(a2 + p), c20 = _mm256_fmadd_ps(x, b0, c20), c21 = _mm256_fmadd_ps(x, b1, c21);
    x = _mm256_broadcast_ss(a3 + p), c30 = _mm256_fmadd_ps(x, b0, c30), c31 = _mm256_fmadd_ps(x, b1, c31);
    x = _mm256_broadcast_ss(a4 + p), c40 = _mm256_fmadd_ps(x, b0, c40), c41 = _mm256_fmadd_ps(x, b1, c41);
    x = _mm256_broadcast_ss(a5 + p), c50 = _mm256_fmadd_ps(x, b0, c50), c51 = _mm256_fmadd_ps(x, b1, c51);
  }
  _mm256_storeu_ps(c, c00), _mm256_storeu_ps(c + 8, c01), c += ldc;
  _mm256_storeu_ps(c, c10), _mm256_storeu_ps(c + 8, c11), c += ldc;
  _mm256_storeu_ps(c, c20), _mm256_storeu_ps(c + 8, c21), c += ldc;
  _mm256_storeu_ps(c, c30), _mm256_storeu_ps(c + 8, c31), c += ldc;
  _mm256_storeu_ps(c, c40), _mm256_storeu_ps(c + 8, c41), c += ldc;
  _mm256_storeu_ps(c, c50), _mm256_storeu_ps(c + 8, c51);
}
/* C[6][16 * np] from np (1..4) consecutive packed panels ps apart: the
 * zmm kernels above, np = 1 on the 6x16 AVX2 kernel. */
void toplu__gemm_kernel_6xp(const float *a, int64_t lda, const float *b, int64_t ps, int64_t kc, float *c, int64_t ldc,
                            int np) {
  while (np > 0) {
    if (np >= 4) {
      kernel_6x64(a, lda, b, ps, kc, c, ldc, 0);
      np -= 4, b += 4 * ps, c += 64;
    } else if (np >= 2) {
      kernel_6x32(a, lda, b, ps, kc, c, ldc, 0);
      np -= 2, b += 2 * ps, c += 32;
    } else {
      toplu__gemm_kernel_6x16(a, lda, b, kc, c, ldc, 0);
      np -= 1;
    }
  }
}
#else
void toplu__gemm_kernel_6xp(const float *a, int64_t lda, const float *b, int64_t ps, int64_t kc, float *c, int64_t ldc,
                            int np) {
  for (int q = 0; q < np; q++) toplu__gemm_kernel_6x16(a, lda, b + q * ps, kc, c + q * 16, ldc, 0);
}
static void kernel_tail_rows(int mr, int np, const float *a, int64_t lda, const float *b, int64_t ps, int64_t kc,
                             float *c, int64_t ldc, int accumulate) {
  (void)mr, (void)np, (void)a, (void)lda, (void)b, (void)ps, (void)kc, (void)c, (void)ldc, (void)accumulate; /* not reached */
}
static void kernel_6x64(const float *a, int64_t lda, const float *b, int64_t ps, int64_t kc, float *c, int64_t ldc,
                        int accumulate) {
  (void)a, (void)lda, (void)b, (void)ps, (void)kc, (void)c, (void)ldc, (void)accumulate; /* not reached */
}
static void kernel_6x32(const float *a, int64_t lda, const float *b, int64_t ps, int64_t kc, float *c, int64_t ldc,
                        int accumulate) {
  (void)a, (void)lda, (void)b, (void)ps, (void)kc, (void)c, (void)ldc, (void)accumulate; /* not reached */
}
static void kernel_12x16(const float *a, int64_t lda, const float *b, int64_t kc, float *c, int64_t ldc,
                         int accumulate) {
  (void)a, (void)lda, (void)b, (void)kc, (void)c, (void)ldc, (void)accumulate; /* not reached */
}

void toplu__gemm_kernel_6x16(const float *a, int64_t lda, const float *b, int64_t kc, float *c, int64_t ldc,
                             int accumulate) {
  for (int r = 0; r < 6; r++)
    for (int j = 0; j < 16; j++) {
      float s = accumulate ? c[r * ldc + j] : 0.f;
      for (int64_t p = 0; p < kc; p++) s += a[r * lda + p] * b[p * 16 + j];
      c[r * ldc + j] = s;
    }
}
#endif

size_t toplu__gemm_packed_size(int64_t k, int64_t n) {
  return (size_t)((n + TOPLU_GEMM_NR - 1) / TOPLU_GEMM_NR) * (size_t)k * TOPLU_GEMM_NR;
}

void toplu__gemm_pack_b(const float *b, int64_t ldb, int64_t k, int64_t n, float *dst) {
  int64_t np = (n + TOPLU_GEMM_NR - 1) / TOPLU_GEMM_NR;
  for (int64_t jp = 0; jp < np; jp++)
    for (int64_t p = 0; p < k; p++) {
      float *d = dst + (jp * k + p) * TOPLU_GEMM_NR;
      for (int j = 0; j < TOPLU_GEMM_NR; j++) {
        int64_t col = jp * TOPLU_GEMM_NR + j;
        d[j] = col < n ? b[p * ldb + col] : 0.f;
      }
    }
}

/* Bias and post-ops on row segment c[0..nr) of row i, columns from j0 (see toplu__gemm_post_t);
 * skip_sum: the SUM's addend was C itself and the products were added onto it. */
static void post_row(const toplu__gemm_post_t *po, float *c, int64_t i, int64_t j0, int64_t nr, int64_t n, int skip_sum) {
  if (po->bias)
    for (int64_t j = 0; j < nr; j++) c[j] += po->bias[j0 + j];
  const toplu__node_t *node = po->node;
  for (int q = 0; node && q < node->n_post; q++) {
    const toplu__post_op_t *p = &node->post[q];
    if (p->kind == TOPLU_POST_BIAS) continue; /* po->bias */
    if (p->kind == TOPLU_POST_SUM) {
      if (skip_sum) continue;
      const float *ad = po->addend + i * n + j0;
      for (int64_t j = 0; j < nr; j++) c[j] += ad[j];
    } else {
      toplu__post_apply(p, c, nr);
    }
  }
}

void toplu__gemm_post_rows(const toplu__gemm_post_t *post, float *c, int64_t m, int64_t n, int skip_sum, int threads) {
  if (!post || m <= 0 || n <= 0 || !(post->bias || (post->node && post->node->n_post))) return;
  if (threads < 1) threads = 1;
  const int64_t rows = 8, blocks = (m + rows - 1) / rows;
#pragma omp parallel for num_threads(threads) if (threads > 1 && blocks > 1) schedule(static)
  for (int64_t bl = 0; bl < blocks; bl++)
    for (int64_t i = bl * rows; i < m && i < (bl + 1) * rows; i++) post_row(post, c + i * n, i, 0, n, n, skip_sum);
}

void toplu__gemm_packed(const float *a, int64_t lda, const float *bp, float *c, int64_t m, int64_t n, int64_t k,
                        const toplu__gemm_post_t *post, int threads) {
  if (m <= 0 || n <= 0) return;
  if (threads < 1) threads = 1;
  /* work items: a block of GEMM_MB rows times a group of panels; within an
   * item, each 256-deep slice of A's rows (96 KiB) stays in L2 while the
   * group's panels pass over it, and each panel's slice (16 KiB) in L1 while
   * the micro-kernel walks down the rows (AVX2; on AVX-512 the slices are
   * GEMM_KC_WIDE deep and live in L2) */
  /* up to GEMM_MB_ONE rows in one block: B (in a model, fresh from memory
   * every run) is then read once, not once per block */
  const int64_t mb = m <= GEMM_MB_ONE ? (m + TOPLU_GEMM_MR - 1) / TOPLU_GEMM_MR * TOPLU_GEMM_MR : GEMM_MB;
  const int64_t np = (n + TOPLU_GEMM_NR - 1) / TOPLU_GEMM_NR, nmb = (m + mb - 1) / mb;
  int64_t g = np * nmb / (2 * threads);
  g = g < 1 ? 1 : g > GEMM_GROUP ? GEMM_GROUP : g;
  const int64_t ngroups = (np + g - 1) / g, items = nmb * ngroups;
  /* the SUM's addend in C itself: the products go onto it (a SUM comes before any post-op but BIAS) */
  const int acc0 = post && post->addend == c;
  const int has_post = post && (post->bias || (post->node && post->node->n_post));
  const int wide = toplu__gemm_avx512_ok(); /* four panels at a time in zmm registers */
#pragma omp parallel for num_threads(threads) if (threads > 1 && items > 1) schedule(dynamic, 1)
  for (int64_t it = 0; it < items; it++) {
    const int64_t ib = it / ngroups, jg = it % ngroups;
    const int64_t r0 = ib * mb, r1 = r0 + mb < m ? r0 + mb : m;
    const int64_t jp0 = jg * g, jp1 = jp0 + g < np ? jp0 + g : np;
    const int64_t full_rows = r0 + (r1 - r0) / TOPLU_GEMM_MR * TOPLU_GEMM_MR;
    const int64_t full_panels = n / TOPLU_GEMM_NR < jp1 ? n / TOPLU_GEMM_NR : jp1; /* panels of 16 columns */
    /* whole 6x16 tiles */
    const int64_t kcmax = wide ? GEMM_KC_WIDE : TOPLU_GEMM_KC;
    for (int64_t pc = 0; pc < k; pc += kcmax) {
      int64_t kc = k - pc < kcmax ? k - pc : kcmax;
      int64_t jp = jp0;
      for (; wide && jp + 4 <= full_panels; jp += 4) {
        const float *slice = bp + (jp * k + pc) * TOPLU_GEMM_NR;
        for (int64_t ir = r0; ir < full_rows; ir += TOPLU_GEMM_MR)
          kernel_6x64(a + ir * lda + pc, lda, slice, k * TOPLU_GEMM_NR, kc, c + ir * n + jp * TOPLU_GEMM_NR, n,
                      pc > 0 || acc0);
      }
      for (; wide && jp + 2 <= full_panels; jp += 2) {
        const float *slice = bp + (jp * k + pc) * TOPLU_GEMM_NR;
        for (int64_t ir = r0; ir < full_rows; ir += TOPLU_GEMM_MR)
          kernel_6x32(a + ir * lda + pc, lda, slice, k * TOPLU_GEMM_NR, kc, c + ir * n + jp * TOPLU_GEMM_NR, n,
                      pc > 0 || acc0);
      }
      for (; jp < full_panels; jp++) {
        const float *slice = bp + (jp * k + pc) * TOPLU_GEMM_NR;
        int64_t ir = r0;
        for (; wide && ir + 2 * TOPLU_GEMM_MR <= full_rows; ir += 2 * TOPLU_GEMM_MR)
          kernel_12x16(a + ir * lda + pc, lda, slice, kc, c + ir * n + jp * TOPLU_GEMM_NR, n, pc > 0 || acc0);
        for (; ir < full_rows; ir += TOPLU_GEMM_MR)
          toplu__gemm_kernel_6x16(a + ir * lda + pc, lda, slice, kc, c + ir * n + jp * TOPLU_GEMM_NR, n,
                                  pc > 0 || acc0);
      }
      /* the block's last rows (fewer than 6) of the whole panels, in zmm registers */
      if (wide && full_rows < r1) {
        const int mr = (int)(r1 - full_rows);
        for (jp = jp0; jp < full_panels;) {
          const int w = jp + 4 <= full_panels ? 4 : jp + 2 <= full_panels ? 2 : 1;
          kernel_tail_rows(mr, w, a + full_rows * lda + pc, lda, bp + (jp * k + pc) * TOPLU_GEMM_NR, k * TOPLU_GEMM_NR,
                           kc, c + full_rows * n + jp * TOPLU_GEMM_NR, n, pc > 0 || acc0);
          jp += w;
        }
      }
    }
    if (k == 0 && !acc0)
      for (int64_t i = r0; i < full_rows; i++)
        for (int64_t jp = jp0; jp < full_panels; jp++) memset(c + i * n + jp * TOPLU_GEMM_NR, 0, TOPLU_GEMM_NR * sizeof(float));
    /* edge tiles (the block's last rows on AVX2, a narrow last panel) through a 6x16 buffer */
    for (int64_t jp = jp0; jp < jp1; jp++) {
      const int64_t j0 = jp * TOPLU_GEMM_NR, nr = n - j0 < TOPLU_GEMM_NR ? n - j0 : TOPLU_GEMM_NR;
      const float *panel = bp + jp * k * TOPLU_GEMM_NR;
      /* (the last rows of whole panels took the zmm path above when k > 0) */
      for (int64_t ir = jp < full_panels ? (wide && k > 0 ? r1 : full_rows) : r0; ir < r1; ir += TOPLU_GEMM_MR) {
        int64_t mr = r1 - ir < TOPLU_GEMM_MR ? r1 - ir : TOPLU_GEMM_MR;
        float tmp[TOPLU_GEMM_MR * TOPLU_GEMM_NR], abuf[TOPLU_GEMM_MR * TOPLU_GEMM_KC];
        for (int r = 0; r < TOPLU_GEMM_MR; r++)
          for (int j = 0; j < TOPLU_GEMM_NR; j++)
            tmp[r * TOPLU_GEMM_NR + j] = acc0 && r < mr && j < nr ? c[(ir + r) * n + j0 + j] : 0.f;
        for (int64_t pc = 0; pc < k; pc += TOPLU_GEMM_KC) {
          int64_t kc = k - pc < TOPLU_GEMM_KC ? k - pc : TOPLU_GEMM_KC;
          for (int r = 0; r < TOPLU_GEMM_MR; r++)
            for (int64_t p = 0; p < kc; p++) abuf[r * TOPLU_GEMM_KC + p] = r < mr ? a[(ir + r) * lda + pc + p] : 0.f;
          toplu__gemm_kernel_6x16(abuf, TOPLU_GEMM_KC, panel + pc * TOPLU_GEMM_NR, kc, tmp, TOPLU_GEMM_NR, 1);
        }
        for (int r = 0; r < mr; r++)
          memcpy(c + (ir + r) * n + j0, tmp + r * TOPLU_GEMM_NR, (size_t)nr * sizeof(float));
      }
    }
    /* bias and post-ops on the item's rows, each row's columns of the group in one call (one call per
     * 16 columns cost BERT's MatMul+Add+Gelu a tenth of its time) */
    if (has_post) {
      const int64_t j0 = jp0 * TOPLU_GEMM_NR, j1 = jp1 * TOPLU_GEMM_NR < n ? jp1 * TOPLU_GEMM_NR : n;
      for (int64_t i = r0; i < r1; i++) post_row(post, c + i * n + j0, i, j0, j1 - j0, n, acc0);
    }
  }
}
