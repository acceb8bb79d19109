/*
 * ops/onednn/gemm_avx2.h - toplu's own float32 GEMM for AVX2 + FMA CPUs:
 * C[M][N] = A[M][K] . B[K][N] with B packed once (constant weights), and
 * the 6x16 register-blocked micro-kernel it is built on (also used by the
 * Winograd convolution's 36 products, ops/onednn/winograd.c).
 *
 * Blocking after Goto and van de Geijn, "Anatomy of High-Performance Matrix
 * Multiplication", ACM TOMS 34(3), 2008, and BLIS's Haswell kernel shape:
 * 6 rows x 16 columns = 12 AVX2 accumulators, a kc = 256 slice of B's
 * 16-column panel (16 KiB) kept in L1 while the micro-kernel walks down A.
 * A is read in place (row-major, any row stride), not packed.
 *
 * Why our own: oneDNN 2.6's matmul primitive reached 44% of the fp32 FMA
 * peak (82 GFLOP/s) on BERT's [128 x 768] x [768 x 3072] feed-forward
 * product on an AVX2 Zen 3 core pair, its sgemm 60-77%; this GEMM 70-78%
 * there (145-159 GFLOP/s, best of 200) and as much as sgemm or more on
 * BERT's other shapes at 128 rows (docs/performance.md, "Engine speed").
 * Only for CPUs with AVX2 and FMA (toplu__gemm_avx2_ok); callers check.
 */
#ifndef TOPLU_OPS_ONEDNN_GEMM_AVX2_H
#define TOPLU_OPS_ONEDNN_GEMM_AVX2_H

#include <stddef.h>
#include <stdint.h>

#include "graph/graph.h"

#define TOPLU_GEMM_MR 6
#define TOPLU_GEMM_NR 16
#define TOPLU_GEMM_KC 256

/* 1 when this CPU has AVX2 and FMA (run-time check, cached by the CPU). */
int toplu__gemm_avx2_ok(void);

/* 1 when this CPU also has AVX-512F and the environment variable
 * TOPLU_MAX_CPU_ISA is not "avx2" (read once per process; for A/B timing):
 * toplu__gemm_packed then runs four 16-column panels at a time in zmm
 * registers (6 x 64 tiles, 24 accumulators), on the same packed B and with
 * the same bits as the 6x16 kernel.  Thread-safe. */
int toplu__gemm_avx512_ok(void);

/*
 * C[6][16] (rows c + r * ldc) = (accumulate ? C : 0) + A[6][kc] . B[kc][16]:
 * A's rows at a + r * lda, B packed [kc][16] contiguous.  All float32,
 * unaligned.  AVX2 + FMA only.  Thread-safe (no state).
 */
void toplu__gemm_kernel_6x16(const float *a, int64_t lda, const float *b, int64_t kc, float *c, int64_t ldc,
                             int accumulate);

/*
 * C[6][16 * np] (rows c + r * ldc) = A[6][kc] . np (1..4) packed panels
 * [kc][16], panel q at b + q * ps: four or two panels at a time in zmm
 * registers, one on the 6x16 kernel, with the same bits as
 * toplu__gemm_kernel_6x16 panel by panel.  AVX-512F only
 * (toplu__gemm_avx512_ok).  Thread-safe (no state).
 */
void toplu__gemm_kernel_6xp(const float *a, int64_t lda, const float *b, int64_t ps, int64_t kc, float *c, int64_t ldc,
                            int np);

/* Floats of B packed for toplu__gemm_packed: ceil(N / 16) * K * 16. */
size_t toplu__gemm_packed_size(int64_t k, int64_t n);

/*
 * Pack row-major B [K][N] (row stride ldb) into dst (toplu__gemm_packed_size
 * floats): 16-column panels [N/16][K][16], the last panel padded with zeros.
 */
void toplu__gemm_pack_b(const float *b, int64_t ldb, int64_t k, int64_t n, float *dst);

/*
 * Post-processing of C, per output element, in this order: + bias[j] (bias
 * NULL: none), then the node's post-ops (SUM reads addend[i * N + j],
 * BIAS is the bias above; the others as graph/graph.h defines them).
 */
typedef struct toplu__gemm_post {
  const float *bias;               /* [N] or NULL */
  const toplu__node_t *node;       /* its post[] (n_post may be 0); NULL: none */
  const float *addend;             /* SUM's addend [M][N] (row stride N), or NULL */
} toplu__gemm_post_t;

/*
 * C[M][N] (row stride N) = A[M][K] (row stride lda) . B (packed by
 * toplu__gemm_pack_b), then post (may be NULL), on up to threads OpenMP
 * threads (the work is split by 16-column panels and row blocks).  C may be
 * the SUM addend itself (the products are then added onto it: each element
 * is read before it is written, by the same thread), which needs the SUM to
 * come before every post-op but BIAS (the own MatMul kernel checks).  AVX2 + FMA only.  Thread-safe for distinct C.
 */
void toplu__gemm_packed(const float *a, int64_t lda, const float *bp, float *c, int64_t m, int64_t n, int64_t k,
                        const toplu__gemm_post_t *post, int threads);

/*
 * Bias and post-ops on C[M][N] (row stride N) that another GEMM wrote, as
 * toplu__gemm_packed applies them (bias, then the node's post-ops in
 * order); skip_sum: the SUM's addend was C itself and the products were
 * accumulated onto it (so the SUM is done).  Row blocks on up to threads
 * OpenMP threads.  Needs no AVX2.  Thread-safe for distinct C.
 */
void toplu__gemm_post_rows(const toplu__gemm_post_t *post, float *c, int64_t m, int64_t n, int skip_sum, int threads);

#endif
