/*
 * ops/onednn/rnn.c - the recurrent ops LSTM-7/14, GRU-7/14 and RNN-7/14 on
 * float32, every attribute of the ONNX operator spec
 * (https://onnx.ai/onnx/operators/onnx__LSTM.html, onnx__GRU.html,
 * onnx__RNN.html): direction forward/reverse/bidirectional, activations
 * with activation_alpha/beta, clip, input_forget (LSTM),
 * linear_before_reset (GRU), layout 0 and 1 (opset 14); the optional inputs
 * B, sequence_lens, initial_h, initial_c and P, and the outputs Y, Y_h, Y_c.
 * Shapes: graph/schema_rnn.c.
 *
 * Gate equations (t the step, (.) the element-wise product; W*, R* the gate
 * rows of W and R, Wb*, Rb* of B; defaults f = Sigmoid, g = h = Tanh):
 *   LSTM (gates i, o, f, c):
 *     it = f(Xt Wi^T + Ht-1 Ri^T + Pi (.) Ct-1 + Wbi + Rbi)
 *     ft = f(Xt Wf^T + Ht-1 Rf^T + Pf (.) Ct-1 + Wbf + Rbf)   (input_forget: ft = 1 - it)
 *     ct = g(Xt Wc^T + Ht-1 Rc^T + Wbc + Rbc)
 *     Ct = ft (.) Ct-1 + it (.) ct
 *     ot = f(Xt Wo^T + Ht-1 Ro^T + Po (.) Ct + Wbo + Rbo)
 *     Ht = ot (.) h(Ct)
 *   GRU (gates z, r, h; f = Sigmoid, g = Tanh):
 *     zt = f(Xt Wz^T + Ht-1 Rz^T + Wbz + Rbz)
 *     rt = f(Xt Wr^T + Ht-1 Rr^T + Wbr + Rbr)
 *     ht = g(Xt Wh^T + (rt (.) Ht-1) Rh^T + Rbh + Wbh)        linear_before_reset = 0
 *     ht = g(Xt Wh^T + rt (.) (Ht-1 Rh^T + Rbh) + Wbh)        linear_before_reset != 0
 *     Ht = (1 - zt) (.) ht + zt (.) Ht-1
 *   RNN (f = Tanh):  Ht = f(Xt Wi^T + Ht-1 Ri^T + Wbi + Rbi)
 * clip bounds every gate's input to its activation to [-clip, clip] (not
 * Ct before h).  With sequence_lens, row b runs steps 0..len-1 (the reverse
 * direction from len-1 down to 0); Y is 0 at the steps after len and Y_h,
 * Y_c hold the last step's state.
 *
 * How it runs:
 *   1. one GEMM for the input part of every gate, every step, every row and
 *      both directions: XW [S*N, D*G*H] = X [S*N, I] . [W_fwd; W_bwd]^T,
 *      with Wb + Rb (Wb only for a GRU's h gate when linear_before_reset)
 *      added as the GEMM's bias row;
 *   2. per step, per direction: Ht-1 [rows, H] . R^T (a GRU without
 *      linear_before_reset in two products: z and r first, then
 *      (rt (.) Ht-1) Rh^T), then the gate math of each row in one pass over
 *      its G*H values, fused (activations as vectorisable loops).
 * The products run on W^T and R^T packed in the 16-column panels of
 * toplu's own GEMM (ops/onednn/gemm_avx2.h), once at plan time when they
 * are constants (shared by the session's plans), else into the workspace
 * per run: with AVX-512, kernels of up to 6 rows x 4 panels (one zmm per
 * panel) here; with AVX2, toplu__gemm_packed for the input product and its
 * 6x16 kernel plus 1-5 row kernels here for the recurrent one.  Every
 * element is one FMA chain over k from 0 whichever kernel computes it, so a
 * row's result does not depend on the rows beside it: batch rows equal
 * single-row runs bit for bit.  Work is split over threads by direction and
 * by blocks of rows, each thread stepping through time on its own (no
 * barrier per step, no parallel region per step).  CPUs without AVX2 and FMA
 * use dnnl_sgemm on one thread (rows then equal only to rounding).
 * All scratch (XW, states, the recurrent products) is the workspace.
 */
#include <math.h>
#include <string.h>
#include <strings.h>

#include "ops/fastmath.h"
#include "ops/onednn/gemm_avx2.h"
#include "ops/onednn/onednn.h"

/* The widest kernels used: 2 AVX-512, 1 AVX2, 0 dnnl_sgemm.  Build with
 * -DTOPLU_RNN_ISA_MAX=1 or 0 to test the narrower paths on a newer CPU
 * (tests/test_rnn_cases.py against such a build). */
#ifndef TOPLU_RNN_ISA_MAX
#define TOPLU_RNN_ISA_MAX 2
#endif

enum { RNN_OP_RNN, RNN_OP_GRU, RNN_OP_LSTM };

typedef enum {
  ACT_RELU,
  ACT_TANH,
  ACT_SIGMOID,
  ACT_AFFINE,
  ACT_LEAKY_RELU,
  ACT_THRESHOLDED_RELU,
  ACT_SCALED_TANH,
  ACT_HARD_SIGMOID,
  ACT_ELU,
  ACT_SOFTSIGN,
  ACT_SOFTPLUS
} act_kind_t;

/* The spec's activation functions; how many of activation_alpha and
 * activation_beta each consumes, and its defaults (those of the ONNX op of
 * the same name; Affine 1, 0 and ScaledTanh 1, 1). */
static const struct {
  const char *name;
  act_kind_t kind;
  int uses_alpha, uses_beta;
  float alpha, beta;
} act_table[] = {
    {"Relu", ACT_RELU, 0, 0, 0.f, 0.f},
    {"Tanh", ACT_TANH, 0, 0, 0.f, 0.f},
    {"Sigmoid", ACT_SIGMOID, 0, 0, 0.f, 0.f},
    {"Affine", ACT_AFFINE, 1, 1, 1.f, 0.f},
    {"LeakyRelu", ACT_LEAKY_RELU, 1, 0, 0.01f, 0.f},
    {"ThresholdedRelu", ACT_THRESHOLDED_RELU, 1, 0, 1.f, 0.f},
    {"ScaledTanh", ACT_SCALED_TANH, 1, 1, 1.f, 1.f},
    {"HardSigmoid", ACT_HARD_SIGMOID, 1, 1, 0.2f, 0.5f},
    {"Elu", ACT_ELU, 1, 0, 1.f, 0.f},
    {"Softsign", ACT_SOFTSIGN, 0, 0, 0.f, 0.f},
    {"Softplus", ACT_SOFTPLUS, 0, 0, 0.f, 0.f},
};

typedef struct rnn_act {
  act_kind_t kind;
  float alpha, beta;
} rnn_act_t;

#define RNN_MAX_PARTS 2

typedef struct rnn_state {
  int op;                      /* RNN_OP_* */
  int D, reverse;              /* directions; D == 1 and direction "reverse" */
  int layout, lbr, input_forget, has_clip;
  float clip;
  int64_t S, N, I, H, G, GH;
  rnn_act_t act[2][3];         /* per direction: f, g, h (as many as the op has) */
  int own;                     /* packed weights on toplu's AVX2 (1) or AVX-512 (2) kernels; 0: dnnl_sgemm on W and R */
  float *wp, *rp;              /* W^T, R^T packed at prepare (constants), or NULL: packed per run */
  /* R's gate rows in products of their own: part p is rows [part_row[p], +part_n[p]) of
   * each direction's R, packed at rp_off[p] within the direction's rp_dir floats */
  int nparts;
  int64_t part_row[RNN_MAX_PARTS], part_n[RNN_MAX_PARTS];
  size_t rp_off[RNN_MAX_PARTS], rp_dir, wp_size;
  /* workspace, in floats from its start */
  size_t ws_wp, ws_rp, ws_bias, ws_rbh, ws_xw, ws_h, ws_c, ws_rec, ws_rh;
} rnn_state_t;

/* ---- activations: each a loop the compiler vectorises ---- */


static void act_apply(const rnn_act_t *a, float *restrict x, int64_t n) {
  const float al = a->alpha, be = a->beta;
  switch (a->kind) {
  case ACT_RELU:
    for (int64_t j = 0; j < n; j++) x[j] = x[j] > 0.f ? x[j] : 0.f;
    break;
  case ACT_TANH:
    for (int64_t j = 0; j < n; j++) x[j] = toplu__tanhf(x[j]);
    break;
  case ACT_SIGMOID:
    for (int64_t j = 0; j < n; j++) x[j] = toplu__sigmoidf(x[j]);
    break;
  case ACT_AFFINE:
    for (int64_t j = 0; j < n; j++) x[j] = al * x[j] + be;
    break;
  case ACT_LEAKY_RELU:
    for (int64_t j = 0; j < n; j++) x[j] = x[j] >= 0.f ? x[j] : al * x[j];
    break;
  case ACT_THRESHOLDED_RELU:
    for (int64_t j = 0; j < n; j++) x[j] = x[j] >= al ? x[j] : 0.f;
    break;
  case ACT_SCALED_TANH:
    for (int64_t j = 0; j < n; j++) x[j] = al * toplu__tanhf(be * x[j]);
    break;
  case ACT_HARD_SIGMOID:
    for (int64_t j = 0; j < n; j++) {
      float v = al * x[j] + be;
      v = v < 0.f ? 0.f : v;
      x[j] = v > 1.f ? 1.f : v;
    }
    break;
  case ACT_ELU:
    for (int64_t j = 0; j < n; j++) x[j] = x[j] >= 0.f ? x[j] : al * (toplu__expf(x[j]) - 1.f);
    break;
  case ACT_SOFTSIGN:
    for (int64_t j = 0; j < n; j++) x[j] = x[j] / (1.f + fabsf(x[j]));
    break;
  case ACT_SOFTPLUS:
    for (int64_t j = 0; j < n; j++) x[j] = x[j] > 20.f ? x[j] : log1pf(expf(x[j]));
    break;
  }
}

static void clip_apply(const rnn_state_t *rs, float *restrict x, int64_t n) {
  if (!rs->has_clip) return;
  const float c = rs->clip;
  for (int64_t j = 0; j < n; j++) {
    float v = x[j] < -c ? -c : x[j];
    x[j] = v > c ? c : v;
  }
}

/* ---- packing and products ---- */

/* w [n][k] row-major (gate rows) as the GEMM's B = w^T [k][n], packed in
 * 16-column panels (the layout of toplu__gemm_pack_b). */
static void pack_t(const float *w, int64_t n, int64_t k, float *dst) {
  int64_t np = (n + TOPLU_GEMM_NR - 1) / TOPLU_GEMM_NR;
  for (int64_t jp = 0; jp < np; jp++)
    for (int j = 0; j < TOPLU_GEMM_NR; j++) {
      int64_t col = jp * TOPLU_GEMM_NR + j;
      float *d = dst + jp * k * TOPLU_GEMM_NR + j;
      if (col < n)
        for (int64_t p = 0; p < k; p++) d[p * TOPLU_GEMM_NR] = w[col * k + p];
      else
        for (int64_t p = 0; p < k; p++) d[p * TOPLU_GEMM_NR] = 0.f;
    }
}

typedef struct pack_arg {
  const rnn_state_t *rs;
  const float *src;
} pack_arg_t;

/* W [D*G*H][I] -> one packed B of D*G*H columns. */
static void fill_w(void *dst, const void *arg) {
  const pack_arg_t *a = arg;
  pack_t(a->src, a->rs->D * a->rs->GH, a->rs->I, dst);
}

/* R [D][G*H][H] -> per direction, per part. */
static void fill_r(void *dst, const void *arg) {
  const pack_arg_t *a = arg;
  const rnn_state_t *rs = a->rs;
  for (int d = 0; d < rs->D; d++)
    for (int p = 0; p < rs->nparts; p++)
      pack_t(a->src + (d * rs->GH + rs->part_row[p]) * rs->H, rs->part_n[p], rs->H,
             (float *)dst + d * rs->rp_dir + rs->rp_off[p]);
}

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#define RNN_TARGET __attribute__((target("avx2,fma")))
#define RNN_INLINE static inline __attribute__((always_inline))

/*
 * C [m][16 * np] (row stride ldc) = A [m][k] (row stride lda) . np
 * consecutive packed panels at b (k * 16 floats each), for the m = 1..5
 * rows left over by the 6x16 kernel: np panels at once so that 8-12
 * accumulators hide the FMA latency.  Each element is one FMA chain over k
 * from 0, as in toplu__gemm_kernel_6x16, so a row's result is the same
 * whichever kernel computed it.  Called with constant m and np (unrolled).
 */
RNN_TARGET RNN_INLINE void kern_small(const int m, const int np, const float *a, int64_t lda, const float *b,
                                      int64_t k, float *c, int64_t ldc) {
  __m256 acc[5][4][2];
  for (int r = 0; r < m; r++)
    for (int q = 0; q < np; q++) acc[r][q][0] = acc[r][q][1] = _mm256_setzero_ps();
  const int64_t ps = k * TOPLU_GEMM_NR;
  for (int64_t p = 0; p < k; p++) {
    __m256 x[5];
    for (int r = 0; r < m; r++) x[r] = _mm256_broadcast_ss(a + r * lda + p);
    for (int q = 0; q < np; q++) {
      const float *bq = b + q * ps + p * TOPLU_GEMM_NR;
      __m256 b0 = _mm256_loadu_ps(bq), b1 = _mm256_loadu_ps(bq + 8);
      for (int r = 0; r < m; r++) {
        acc[r][q][0] = _mm256_fmadd_ps(x[r], b0, acc[r][q][0]);
        acc[r][q][1] = _mm256_fmadd_ps(x[r], b1, acc[r][q][1]);
      }
    }
  }
  for (int r = 0; r < m; r++)
    for (int q = 0; q < np; q++) {
      _mm256_storeu_ps(c + r * ldc + q * TOPLU_GEMM_NR, acc[r][q][0]);
      _mm256_storeu_ps(c + r * ldc + q * TOPLU_GEMM_NR + 8, acc[r][q][1]);
    }
}

/* m (1..5) rows times panels [jp0, jp1) into c's columns from jp0 * 16 (all full panels). */
RNN_TARGET static void rows_small(int m, const float *a, int64_t lda, const float *bp, int64_t k, float *c,
                                  int64_t ldc, int64_t jp0, int64_t jp1) {
  const int64_t ps = k * TOPLU_GEMM_NR;
  int64_t jp = jp0;
  switch (m) {
  case 1:
    for (; jp + 4 <= jp1; jp += 4) kern_small(1, 4, a, lda, bp + jp * ps, k, c + jp * TOPLU_GEMM_NR, ldc);
    for (; jp < jp1; jp++) kern_small(1, 1, a, lda, bp + jp * ps, k, c + jp * TOPLU_GEMM_NR, ldc);
    break;
  case 2:
    for (; jp + 2 <= jp1; jp += 2) kern_small(2, 2, a, lda, bp + jp * ps, k, c + jp * TOPLU_GEMM_NR, ldc);
    for (; jp < jp1; jp++) kern_small(2, 1, a, lda, bp + jp * ps, k, c + jp * TOPLU_GEMM_NR, ldc);
    break;
  case 3:
    for (; jp + 2 <= jp1; jp += 2) kern_small(3, 2, a, lda, bp + jp * ps, k, c + jp * TOPLU_GEMM_NR, ldc);
    for (; jp < jp1; jp++) kern_small(3, 1, a, lda, bp + jp * ps, k, c + jp * TOPLU_GEMM_NR, ldc);
    break;
  case 4:
    for (; jp < jp1; jp++) kern_small(4, 1, a, lda, bp + jp * ps, k, c + jp * TOPLU_GEMM_NR, ldc);
    break;
  default:
    for (; jp < jp1; jp++) kern_small(5, 1, a, lda, bp + jp * ps, k, c + jp * TOPLU_GEMM_NR, ldc);
    break;
  }
}

/*
 * The recurrent product on one thread: C [m][n] (row stride n) = A [m][k]
 * (row stride lda) . B packed (k x n in 16-column panels): groups of 6 rows
 * on toplu__gemm_kernel_6x16, the rest on kern_small; a narrow last panel
 * through a 6x16 buffer.  Every element one FMA chain over k from 0.
 */
RNN_TARGET static void rec_product(const float *a, int64_t lda, int64_t m, const float *bp, int64_t n, int64_t k,
                                   float *c) {
  const int64_t full = n / TOPLU_GEMM_NR, nr = n - full * TOPLU_GEMM_NR, ps = k * TOPLU_GEMM_NR;
  if (k <= 0) {
    memset(c, 0, (size_t)(m * n) * sizeof(float));
    return;
  }
  for (int64_t r = 0; r < m; r += TOPLU_GEMM_MR) {
    const int64_t mr = m - r < TOPLU_GEMM_MR ? m - r : TOPLU_GEMM_MR;
    const float *ar = a + r * lda;
    float *cr = c + r * n;
    if (mr == TOPLU_GEMM_MR)
      for (int64_t jp = 0; jp < full; jp++)
        for (int64_t pc = 0; pc < k; pc += TOPLU_GEMM_KC)
          toplu__gemm_kernel_6x16(ar + pc, lda, bp + jp * ps + pc * TOPLU_GEMM_NR,
                                  k - pc < TOPLU_GEMM_KC ? k - pc : TOPLU_GEMM_KC, cr + jp * TOPLU_GEMM_NR, n, pc > 0);
    else
      rows_small((int)mr, ar, lda, bp, k, cr, n, 0, full);
    if (nr) {
      float tmp[TOPLU_GEMM_MR * TOPLU_GEMM_NR];
      if (mr == TOPLU_GEMM_MR)
        for (int64_t pc = 0; pc < k; pc += TOPLU_GEMM_KC)
          toplu__gemm_kernel_6x16(ar + pc, lda, bp + full * ps + pc * TOPLU_GEMM_NR,
                                  k - pc < TOPLU_GEMM_KC ? k - pc : TOPLU_GEMM_KC, tmp, TOPLU_GEMM_NR, pc > 0);
      else
        rows_small((int)mr, ar, lda, bp + full * ps, k, tmp, TOPLU_GEMM_NR, 0, 1);
      for (int64_t i = 0; i < mr; i++) memcpy(cr + i * n + full * TOPLU_GEMM_NR, tmp + i * TOPLU_GEMM_NR, (size_t)nr * sizeof(float));
    }
  }
}

/* ---- AVX-512: the same panels, one zmm per 16-column panel ---- */
#define RNN_T512 __attribute__((target("avx512f,avx2,fma")))

/* 1 when this CPU has AVX-512F (and AVX2 + FMA) and TOPLU_MAX_CPU_ISA does not cap it at avx2
 * (toplu__cpu_avx512_ok; until 2026-12-06 the RNN kernels read the CPU alone, so the cap never ran their
 * AVX2 path on an AVX-512 machine). */
static int rnn_avx512_ok(void) { return toplu__cpu_avx512_ok() && toplu__gemm_avx2_ok(); }

/*
 * C [m][16 * np] (row stride ldc) = A [m][k] . np consecutive panels, m <=
 * 6 rows and up to 24 accumulators; each element one FMA chain over k from
 * 0 (so the same bits as the AVX2 kernels).  Constant m and np (unrolled).
 */
RNN_T512 RNN_INLINE void k512(const int m, const int np, const float *a, int64_t lda, const float *b, int64_t k,
                              float *c, int64_t ldc) {
  __m512 acc[6][8];
  for (int r = 0; r < m; r++)
    for (int q = 0; q < np; q++) acc[r][q] = _mm512_setzero_ps();
  const int64_t ps = k * TOPLU_GEMM_NR;
  for (int64_t p = 0; p < k; p++) {
    __m512 x[6];
    for (int r = 0; r < m; r++) x[r] = _mm512_set1_ps(a[r * lda + p]);
    for (int q = 0; q < np; q++) {
      __m512 bq = _mm512_loadu_ps(b + q * ps + p * TOPLU_GEMM_NR);
      for (int r = 0; r < m; r++) acc[r][q] = _mm512_fmadd_ps(x[r], bq, acc[r][q]);
    }
  }
  for (int r = 0; r < m; r++)
    for (int q = 0; q < np; q++) _mm512_storeu_ps(c + r * ldc + q * TOPLU_GEMM_NR, acc[r][q]);
}

/* m (1..6) rows times the full panels [jp0, jp1) into c's columns from jp0 * 16. */
RNN_T512 static void rows512(int m, const float *a, int64_t lda, const float *bp, int64_t k, float *c, int64_t ldc,
                             int64_t jp0, int64_t jp1) {
  const int64_t ps = k * TOPLU_GEMM_NR;
  int64_t jp = jp0;
#define RNN_ROWS512(M, NP)                                                                                        \
  for (; jp + (NP) <= jp1; jp += (NP)) k512(M, NP, a, lda, bp + jp * ps, k, c + jp * TOPLU_GEMM_NR, ldc);        \
  for (; jp < jp1; jp++) k512(M, 1, a, lda, bp + jp * ps, k, c + jp * TOPLU_GEMM_NR, ldc);                         \
  break;
  switch (m) {
  case 1: RNN_ROWS512(1, 8)
  case 2: RNN_ROWS512(2, 6)
  case 3: RNN_ROWS512(3, 4)
  case 4: RNN_ROWS512(4, 4)
  case 5: RNN_ROWS512(5, 4)
  default: RNN_ROWS512(6, 4)
  }
#undef RNN_ROWS512
}

/*
 * C [m][n] (row stride n) = A [m][k] (row stride lda) . B packed in
 * 16-column panels, + bias[j] after (bias NULL: none), on up to threads
 * OpenMP threads (items of 48 rows times 8 panels).
 */
/* Rows [r0, r1) times panels [jp0, jp1) of prod512, then the bias. */
RNN_T512 static void prod512_block(const float *a, int64_t lda, const float *bp, int64_t n, int64_t k, float *c,
                                   const float *bias, int64_t r0, int64_t r1, int64_t jp0, int64_t jp1) {
  const int64_t full = n / TOPLU_GEMM_NR, nr = n - full * TOPLU_GEMM_NR, jf1 = jp1 < full ? jp1 : full;
  for (int64_t r = r0; r < r1; r += TOPLU_GEMM_MR) {
    const int mr = (int)(r1 - r < TOPLU_GEMM_MR ? r1 - r : TOPLU_GEMM_MR);
    rows512(mr, a + r * lda, lda, bp, k, c + r * n, n, jp0, jf1);
    if (jp1 > full) { /* the narrow last panel */
      float tmp[TOPLU_GEMM_MR * TOPLU_GEMM_NR];
      rows512(mr, a + r * lda, lda, bp + full * k * TOPLU_GEMM_NR, k, tmp, TOPLU_GEMM_NR, 0, 1);
      for (int i = 0; i < mr; i++)
        memcpy(c + (r + i) * n + full * TOPLU_GEMM_NR, tmp + i * TOPLU_GEMM_NR, (size_t)nr * sizeof(float));
    }
  }
  if (bias) {
    const int64_t j0 = jp0 * TOPLU_GEMM_NR, j1 = jp1 * TOPLU_GEMM_NR < n ? jp1 * TOPLU_GEMM_NR : n;
    for (int64_t i = r0; i < r1; i++)
      for (int64_t j = j0; j < j1; j++) c[i * n + j] += bias[j];
  }
}

RNN_T512 static void prod512(const float *a, int64_t lda, int64_t m, const float *bp, int64_t n, int64_t k, float *c,
                             const float *bias, int threads) {
  if (m <= 0 || n <= 0) return;
  const int64_t np = (n + TOPLU_GEMM_NR - 1) / TOPLU_GEMM_NR;
  if (threads <= 1) { /* no parallel region: the recurrent products come here every step */
    prod512_block(a, lda, bp, n, k, c, bias, 0, m, 0, np);
    return;
  }
  const int64_t mb = 8 * TOPLU_GEMM_MR, nmb = (m + mb - 1) / mb, gp = 8, ngr = (np + gp - 1) / gp;
  const int64_t items = nmb * ngr;
#pragma omp parallel for num_threads(threads) if (items > 1) schedule(dynamic, 1)
  for (int64_t it = 0; it < items; it++) {
    const int64_t r0 = it / ngr * mb, jp0 = it % ngr * gp;
    prod512_block(a, lda, bp, n, k, c, bias, r0, r0 + mb < m ? r0 + mb : m, jp0, jp0 + gp < np ? jp0 + gp : np);
  }
}
#else
/* Not reached: without AVX2 (toplu__gemm_avx2_ok() is 0) the products are dnnl_sgemm's. */
static void rec_product(const float *a, int64_t lda, int64_t m, const float *bp, int64_t n, int64_t k, float *c) {
  (void)a, (void)lda, (void)m, (void)bp, (void)n, (void)k, (void)c;
}
static int rnn_avx512_ok(void) { return 0; }
static void prod512(const float *a, int64_t lda, int64_t m, const float *bp, int64_t n, int64_t k, float *c,
                    const float *bias, int threads) {
  (void)a, (void)lda, (void)m, (void)bp, (void)n, (void)k, (void)c, (void)bias, (void)threads;
}
#endif

/*
 * C [m][n] (row stride n) = A [m][k] (row stride lda) . w^T (+ bias row):
 * bp is w^T packed (own GEMM), w the gate rows [n][k] themselves (dnnl_sgemm).
 */
static int rnn_gemm(const rnn_state_t *rs, const float *a, int64_t lda, const float *bp, const float *w, float *c,
                    int64_t m, int64_t n, int64_t k, const float *bias, int threads) {
  if (m <= 0 || n <= 0) return 0;
  if (rs->own == 2) {
    prod512(a, lda, m, bp, n, k, c, bias, threads);
    return 0;
  }
  if (rs->own) {
    toplu__gemm_post_t po = {.bias = bias, .node = NULL, .addend = NULL};
    toplu__gemm_packed(a, lda, bp, c, m, n, k, bias ? &po : NULL, threads);
    return 0;
  }
  for (int64_t i = 0; i < m; i++) {
    if (bias) memcpy(c + i * n, bias, (size_t)n * sizeof(float));
    else memset(c + i * n, 0, (size_t)n * sizeof(float));
  }
  if (k <= 0) return 0;
  return dnnl_sgemm('N', 'T', m, n, k, 1.f, a, lda, w, k, 1.f, c, n) != dnnl_success;
}

/* ---- prepare ---- */

static toplu_status_t parse_acts(toplu__kernel_ctx_t *ctx, rnn_state_t *rs) {
  static const char *const defaults[3][3] = {{"Tanh"}, {"Sigmoid", "Tanh"}, {"Sigmoid", "Tanh", "Tanh"}};
  const int per = rs->op == RNN_OP_LSTM ? 3 : rs->op == RNN_OP_GRU ? 2 : 1;
  const toplu__attr_t *a = toplu__node_attr(ctx->node, "activations");
  int64_t na = a ? a->n : 0;
  if (a && a->type != TOPLU_ATTR_STRINGS)
    return toplu__kernel_error(ctx, TOPLU_ERR_INVALID_MODEL, "activations must be strings");
  if (a && na != per && na != per * rs->D)
    return toplu__kernel_error(ctx, TOPLU_ERR_INVALID_MODEL, "activations has %lld names, %s takes %d per direction",
                               (long long)na, ctx->node->op_type, per);
  const float *alphas = NULL, *betas = NULL;
  int64_t nal = toplu__node_attr_floats(ctx->node, "activation_alpha", &alphas);
  int64_t nbe = toplu__node_attr_floats(ctx->node, "activation_beta", &betas);
  int64_t ia = 0, ib = 0;
  for (int d = 0; d < rs->D; d++)
    for (int q = 0; q < per; q++) {
      const char *name = a ? a->strings[na == per ? q : d * per + q] : defaults[per - 1][q];
      size_t k = 0, nt = sizeof act_table / sizeof act_table[0];
      while (k < nt && strcasecmp(act_table[k].name, name)) k++;
      if (k == nt)
        return toplu__kernel_error(ctx, TOPLU_ERR_UNSUPPORTED, "activation '%s' is not one the ONNX spec lists", name);
      rnn_act_t *ac = &rs->act[d][q];
      ac->kind = act_table[k].kind;
      ac->alpha = act_table[k].alpha;
      ac->beta = act_table[k].beta;
      /* consumed in the order of the activations, by those that take them;
       * the same names for both directions consume their own values */
      if (act_table[k].uses_alpha && ia < nal) ac->alpha = alphas[ia++];
      if (act_table[k].uses_beta && ib < nbe) ac->beta = betas[ib++];
    }
  return TOPLU_OK;
}

/* a * b into *out, 0 on overflow past 2^40 floats (4 TiB: refused anyway). */
static int mul_ok(size_t a, size_t b, size_t *out) {
  const size_t lim = (size_t)1 << 40;
  if (a && b > lim / a) return 0;
  *out = a * b;
  return *out <= lim;
}

static size_t round16(size_t n) { return (n + 15) / 16 * 16; }

static toplu_status_t rnn_prepare(toplu__kernel_ctx_t *ctx, toplu__kernel_info_t *info) {
  const toplu__node_t *nd = ctx->node;
  const int op = !strcmp(nd->op_type, "LSTM") ? RNN_OP_LSTM : !strcmp(nd->op_type, "GRU") ? RNN_OP_GRU : RNN_OP_RNN;
  const int max_in = op == RNN_OP_LSTM ? 8 : 6;
  for (int i = 0; i < ctx->n_in && i < max_in; i++) {
    if (i == 4 || ctx->in[i].ndim < 0) continue;
    if (ctx->in[i].dtype != TOPLU_DTYPE_FLOAT)
      return toplu__kernel_error(ctx, TOPLU_ERR_UNSUPPORTED, "toplu runs %s on float32 only (input %d is %s)",
                                 nd->op_type, i, toplu_dtype_name(ctx->in[i].dtype));
  }
  if (ctx->n_in > 4 && ctx->in[4].ndim >= 0 && ctx->in[4].dtype != TOPLU_DTYPE_INT32)
    return toplu__kernel_error(ctx, TOPLU_ERR_UNSUPPORTED, "sequence_lens must be int32, got %s",
                               toplu_dtype_name(ctx->in[4].dtype));
  const toplu_tensor_t *x = &ctx->in[0], *w = &ctx->in[1], *r = &ctx->in[2];
  if (x->ndim != 3 || w->ndim != 3 || r->ndim != 3)
    return toplu__kernel_error(ctx, TOPLU_ERR_SHAPE, "X, W and R must have rank 3");
  rnn_state_t *rs = toplu__kernel_alloc(ctx, sizeof *rs);
  if (!rs) return toplu__kernel_error(ctx, TOPLU_ERR_OUT_OF_MEMORY, "out of memory");
  memset(rs, 0, sizeof *rs);
  ctx->state = rs;
  rs->op = op;
  rs->G = op == RNN_OP_LSTM ? 4 : op == RNN_OP_GRU ? 3 : 1;
  const char *dir = toplu__node_attr_string(nd, "direction", "forward");
  rs->D = !strcmp(dir, "bidirectional") ? 2 : 1;
  rs->reverse = !strcmp(dir, "reverse");
  if (rs->D == 1 && !rs->reverse && strcmp(dir, "forward"))
    return toplu__kernel_error(ctx, TOPLU_ERR_INVALID_MODEL, "direction '%s' is not forward, reverse or bidirectional", dir);
  rs->layout = (int)toplu__node_attr_int(nd, "layout", 0);
  if (rs->layout != 0 && rs->layout != 1)
    return toplu__kernel_error(ctx, TOPLU_ERR_INVALID_MODEL, "layout %d is not 0 or 1", rs->layout);
  rs->lbr = op == RNN_OP_GRU && toplu__node_attr_int(nd, "linear_before_reset", 0) != 0;
  rs->input_forget = op == RNN_OP_LSTM && toplu__node_attr_int(nd, "input_forget", 0) != 0;
  rs->has_clip = toplu__node_attr(nd, "clip") != NULL;
  rs->clip = toplu__node_attr_float(nd, "clip", 0.f);
  if (rs->has_clip && !(rs->clip >= 0.f))
    return toplu__kernel_error(ctx, TOPLU_ERR_INVALID_MODEL, "clip %g must not be negative", (double)rs->clip);
  rs->S = x->dims[rs->layout ? 1 : 0];
  rs->N = x->dims[rs->layout ? 0 : 1];
  rs->I = x->dims[2];
  rs->H = r->dims[2];
  rs->GH = rs->G * rs->H;
  int64_t hs = toplu__node_attr_int(nd, "hidden_size", rs->H);
  if (hs != rs->H || w->dims[0] != rs->D || r->dims[0] != rs->D || w->dims[1] != rs->GH || r->dims[1] != rs->GH ||
      w->dims[2] != rs->I)
    return toplu__kernel_error(ctx, TOPLU_ERR_SHAPE,
                               "W [%lld, %lld, %lld] and R [%lld, %lld, %lld] do not fit %d direction(s), hidden_size "
                               "%lld, input size %lld",
                               (long long)w->dims[0], (long long)w->dims[1], (long long)w->dims[2],
                               (long long)r->dims[0], (long long)r->dims[1], (long long)r->dims[2], rs->D,
                               (long long)hs, (long long)rs->I);
  toplu_status_t st = parse_acts(ctx, rs);
  if (st) return st;
  /* R's products: a GRU without linear_before_reset needs rt before (rt (.) Ht-1) Rh^T */
  if (op == RNN_OP_GRU) {
    rs->nparts = 2;
    rs->part_row[0] = 0, rs->part_n[0] = 2 * rs->H;
    rs->part_row[1] = 2 * rs->H, rs->part_n[1] = rs->H;
  } else {
    rs->nparts = 1;
    rs->part_row[0] = 0, rs->part_n[0] = rs->GH;
  }
  rs->own = rnn_avx512_ok() ? 2 : toplu__gemm_avx2_ok();
  if (rs->own > TOPLU_RNN_ISA_MAX) rs->own = TOPLU_RNN_ISA_MAX;
  if (rs->own) {
    rs->wp_size = toplu__gemm_packed_size(rs->I, rs->D * rs->GH);
    for (int p = 0; p < rs->nparts; p++) {
      rs->rp_off[p] = rs->rp_dir;
      rs->rp_dir += toplu__gemm_packed_size(rs->H, rs->part_n[p]);
    }
    if (w->data) {
      pack_arg_t pa = {.rs = rs, .src = w->data};
      void *out = NULL;
      if ((st = toplu__dnnl_pack_custom(ctx, info, w->data, "rnn_wt_b16", rs->wp_size * sizeof(float), fill_w, &pa, &out)))
        return st;
      rs->wp = out;
      info->consumed_consts |= 1u << 1;
    }
    if (r->data) {
      pack_arg_t pa = {.rs = rs, .src = r->data};
      void *out = NULL;
      const char *kind = op == RNN_OP_GRU ? "rnn_rt_gru_b16" : "rnn_rt_b16";
      if ((st = toplu__dnnl_pack_custom(ctx, info, r->data, kind, rs->D * rs->rp_dir * sizeof(float), fill_r, &pa, &out)))
        return st;
      rs->rp = out;
      info->consumed_consts |= 1u << 2;
    }
  }
  /* workspace */
  size_t D = (size_t)rs->D, N = (size_t)rs->N, H = (size_t)rs->H, GH = (size_t)rs->GH, sn, sizes[9], total = 0;
  int ok = mul_ok((size_t)rs->S, N, &sn) && mul_ok(sn, D * GH, &sizes[4]) && mul_ok(D * N, GH, &sizes[7]);
  sizes[0] = rs->own && !rs->wp ? rs->wp_size : 0;
  sizes[1] = rs->own && !rs->rp ? D * rs->rp_dir : 0;
  sizes[2] = D * GH;
  sizes[3] = rs->lbr ? D * H : 0;
  sizes[5] = D * N * H;
  sizes[6] = op == RNN_OP_LSTM ? D * N * H : 0;
  sizes[8] = op == RNN_OP_GRU && !rs->lbr ? D * N * H : 0;
  size_t *offs[9] = {&rs->ws_wp, &rs->ws_rp, &rs->ws_bias, &rs->ws_rbh, &rs->ws_xw,
                     &rs->ws_h,  &rs->ws_c,  &rs->ws_rec,  &rs->ws_rh};
  for (int i = 0; ok && i < 9; i++) {
    *offs[i] = total;
    total += round16(sizes[i]);
    ok = total <= (size_t)1 << 40;
  }
  if (!ok) return toplu__kernel_error(ctx, TOPLU_ERR_UNSUPPORTED, "scratch for these shapes is too large");
  info->workspace_bytes = total * sizeof(float);
  info->impl = rs->own == 2 ? "toplu:rnn:avx512" : rs->own ? "toplu:rnn:gemm_6x16:avx2" : "toplu:rnn:sgemm";
  return TOPLU_OK;
}

/* ---- run ---- */

typedef struct rnn_run {
  const float *xw, *w, *r, *wp, *rp, *p, *rbh;
  const int32_t *lens;
  float *h, *c, *rec, *rh, *y;
} rnn_run_t;

/* Offset of Y's [t, d, b] row (layout 0: [S, D, N, H]; 1: [N, S, D, H]). */
static inline int64_t y_off(const rnn_state_t *rs, int64_t t, int d, int64_t b) {
  return (rs->layout ? (b * rs->S + t) * rs->D + d : (t * rs->D + d) * rs->N + b) * rs->H;
}

/* Row of XW holding step t of batch row b. */
static inline int64_t xw_row(const rnn_state_t *rs, int64_t t, int64_t b) {
  return rs->layout ? b * rs->S + t : t * rs->N + b;
}

/* The recurrent product of part p for rows [b0, b0 + m) of direction d, A's rows from a. */
static int rec_gemm(const rnn_state_t *rs, const rnn_run_t *rr, int d, int p, const float *a, int64_t b0, int64_t m,
                    int threads) {
  int64_t np = rs->part_n[p];
  float *c = rr->rec + (size_t)d * rs->N * rs->GH + rs->N * rs->part_row[p] + b0 * np;
  const float *bp = rs->own ? rr->rp + d * rs->rp_dir + rs->rp_off[p] : NULL;
  const float *w = rr->r + (d * rs->GH + rs->part_row[p]) * rs->H;
  if (rs->own && m * np * rs->H < ((int64_t)1 << 22)) { /* one thread: a parallel region costs more than it saves */
    if (rs->own == 2) prod512(a, rs->H, m, bp, np, rs->H, c, NULL, 1);
    else rec_product(a, rs->H, m, bp, np, rs->H, c);
    return 0;
  }
  return rnn_gemm(rs, a, rs->H, bp, w, c, m, np, rs->H, NULL, threads);
}

/* One direction d for batch rows [b0, b1), every step. */
static int rnn_item(const rnn_state_t *rs, const rnn_run_t *rr, int d, int64_t b0, int64_t b1, int threads) {
  const int64_t N = rs->N, H = rs->H, GH = rs->GH, S = rs->S, DGH = rs->D * GH, m = b1 - b0;
  const int rev = rs->D == 2 ? d == 1 : rs->reverse;
  const rnn_act_t *af = &rs->act[d][0], *ag = &rs->act[d][1], *ah = &rs->act[d][2];
  float *hs = rr->h + (d * N + b0) * H;
  float *rec = rr->rec + (size_t)d * N * GH;
  int64_t steps = S;
  if (rr->lens) {
    steps = 0;
    for (int64_t b = b0; b < b1; b++) steps = rr->lens[b] > steps ? rr->lens[b] : steps;
  }
  for (int64_t s = 0; s < steps; s++) {
    if (rec_gemm(rs, rr, d, 0, hs, b0, m, threads)) return 1;
    if (rs->op == RNN_OP_GRU && rs->lbr && rec_gemm(rs, rr, d, 1, hs, b0, m, threads)) return 1;
    for (int64_t b = b0; b < b1; b++) {
      const int64_t len = rr->lens ? rr->lens[b] : S;
      float *hb = rr->h + (d * N + b) * H;
      if (s >= len) {
        if (rr->rh) memset(rr->rh + (d * N + b) * H, 0, (size_t)H * sizeof(float));
        continue;
      }
      const int64_t t = rev ? len - 1 - s : s;
      const float *restrict xr = rr->xw + xw_row(rs, t, b) * DGH + d * GH;
      if (rs->op == RNN_OP_LSTM) {
        float *restrict g = rec + b * GH, *restrict cb = rr->c + (d * N + b) * H;
        for (int64_t j = 0; j < GH; j++) g[j] += xr[j];
        const float *pp = rr->p ? rr->p + d * 3 * H : NULL; /* P: i, o, f */
        if (pp)
          for (int64_t j = 0; j < H; j++) {
            g[j] += pp[j] * cb[j];
            g[2 * H + j] += pp[2 * H + j] * cb[j];
          }
        clip_apply(rs, g, H);
        clip_apply(rs, g + 2 * H, 2 * H);
        act_apply(af, g, H);
        if (rs->input_forget)
          for (int64_t j = 0; j < H; j++) g[2 * H + j] = 1.f - g[j];
        else
          act_apply(af, g + 2 * H, H);
        act_apply(ag, g + 3 * H, H);
        for (int64_t j = 0; j < H; j++) cb[j] = g[2 * H + j] * cb[j] + g[j] * g[3 * H + j];
        if (pp)
          for (int64_t j = 0; j < H; j++) g[H + j] += pp[H + j] * cb[j];
        clip_apply(rs, g + H, H);
        act_apply(af, g + H, H);
        memcpy(g, cb, (size_t)H * sizeof(float));
        act_apply(ah, g, H);
        for (int64_t j = 0; j < H; j++) hb[j] = g[H + j] * g[j];
      } else if (rs->op == RNN_OP_GRU) {
        float *restrict zr = rec + b * 2 * H, *restrict hh = rec + N * 2 * H + b * H;
        for (int64_t j = 0; j < 2 * H; j++) zr[j] += xr[j];
        clip_apply(rs, zr, 2 * H);
        act_apply(af, zr, 2 * H);
        if (rs->lbr) {
          const float *rbh = rr->rbh + d * H;
          for (int64_t j = 0; j < H; j++) hh[j] = xr[2 * H + j] + zr[H + j] * (hh[j] + rbh[j]);
          clip_apply(rs, hh, H);
          act_apply(ag, hh, H);
          for (int64_t j = 0; j < H; j++) hb[j] = (1.f - zr[j]) * hh[j] + zr[j] * hb[j];
        } else {
          float *restrict rh = rr->rh + (d * N + b) * H;
          for (int64_t j = 0; j < H; j++) rh[j] = zr[H + j] * hb[j];
        }
      } else {
        float *restrict g = rec + b * H;
        for (int64_t j = 0; j < H; j++) g[j] += xr[j];
        clip_apply(rs, g, H);
        act_apply(af, g, H);
        memcpy(hb, g, (size_t)H * sizeof(float));
      }
      if (rr->y && (rs->op != RNN_OP_GRU || rs->lbr)) memcpy(rr->y + y_off(rs, t, d, b), hb, (size_t)H * sizeof(float));
    }
    if (rs->op != RNN_OP_GRU || rs->lbr) continue;
    /* GRU, linear_before_reset = 0: ht from (rt (.) Ht-1) Rh^T */
    if (rec_gemm(rs, rr, d, 1, rr->rh + (d * N + b0) * H, b0, m, threads)) return 1;
    for (int64_t b = b0; b < b1; b++) {
      const int64_t len = rr->lens ? rr->lens[b] : S;
      if (s >= len) continue;
      const int64_t t = rev ? len - 1 - s : s;
      const float *restrict xr = rr->xw + xw_row(rs, t, b) * DGH + d * GH;
      float *restrict zr = rec + b * 2 * H, *restrict hh = rec + N * 2 * H + b * H;
      float *restrict hb = rr->h + (d * N + b) * H;
      for (int64_t j = 0; j < H; j++) hh[j] += xr[2 * H + j];
      clip_apply(rs, hh, H);
      act_apply(ag, hh, H);
      for (int64_t j = 0; j < H; j++) hb[j] = (1.f - zr[j]) * hh[j] + zr[j] * hb[j];
      if (rr->y) memcpy(rr->y + y_off(rs, t, d, b), hb, (size_t)H * sizeof(float));
    }
  }
  return 0;
}

/* Copy between the state's [D][N][H] and a tensor in the node's layout
 * ([D, N, H] for layout 0, [N, D, H] for 1); to_state picks the direction. */
static void state_copy(const rnn_state_t *rs, float *st, float *t, int to_state) {
  const int64_t N = rs->N, H = rs->H;
  for (int d = 0; d < rs->D; d++)
    for (int64_t b = 0; b < N; b++) {
      float *s = st + (d * N + b) * H, *o = t + (rs->layout ? b * rs->D + d : d * N + b) * H;
      if (to_state) memcpy(s, o, (size_t)H * sizeof(float));
      else memcpy(o, s, (size_t)H * sizeof(float));
    }
}

static toplu_status_t rnn_run(toplu__kernel_ctx_t *ctx) {
  const rnn_state_t *rs = ctx->state;
  float *ws = ctx->workspace;
  const int lstm = rs->op == RNN_OP_LSTM;
  const int64_t S = rs->S, N = rs->N, H = rs->H, GH = rs->GH, D = rs->D;
  const toplu_tensor_t *in = ctx->in;
#define RNN_IN(i) (ctx->n_in > (i) && in[i].ndim >= 0 ? in[i].data : NULL)
  const float *x = in[0].data, *bias_in = RNN_IN(3), *h0 = RNN_IN(5);
  const float *c0 = lstm ? RNN_IN(6) : NULL;
  rnn_run_t rr = {.w = in[1].data, .r = in[2].data, .lens = RNN_IN(4), .p = lstm ? RNN_IN(7) : NULL};
#undef RNN_IN
  rr.y = ctx->n_out > 0 ? ctx->out[0].data : NULL;
  float *yh = ctx->n_out > 1 ? ctx->out[1].data : NULL, *yc = lstm && ctx->n_out > 2 ? ctx->out[2].data : NULL;
  if (rr.lens)
    for (int64_t b = 0; b < N; b++)
      if (rr.lens[b] < 0 || rr.lens[b] > S)
        return toplu__kernel_error(ctx, TOPLU_ERR_INVALID_ARGUMENT, "sequence_lens[%lld] is %d, outside 0..%lld",
                                   (long long)b, (int)rr.lens[b], (long long)S);
  if (rs->own) {
    if (rs->wp) rr.wp = rs->wp;
    else {
      pack_t(rr.w, D * GH, rs->I, ws + rs->ws_wp);
      rr.wp = ws + rs->ws_wp;
    }
    if (rs->rp) rr.rp = rs->rp;
    else {
      pack_arg_t pa = {.rs = rs, .src = rr.r};
      fill_r(ws + rs->ws_rp, &pa);
      rr.rp = ws + rs->ws_rp;
    }
  }
  /* Wb + Rb as one bias row of the input product; a GRU with linear_before_reset keeps Rbh apart */
  float *bias = ws + rs->ws_bias, *rbh = rs->lbr ? ws + rs->ws_rbh : NULL;
  for (int64_t d = 0; d < D; d++) {
    const float *wb = bias_in ? bias_in + d * 2 * GH : NULL, *rb = wb ? wb + GH : NULL;
    for (int64_t j = 0; j < GH; j++) {
      int apart = rbh && j >= 2 * H;
      bias[d * GH + j] = wb ? wb[j] + (apart ? 0.f : rb[j]) : 0.f;
      if (apart) rbh[d * H + j - 2 * H] = rb ? rb[j] : 0.f;
    }
  }
  rr.rbh = rbh;
  float *xw = ws + rs->ws_xw;
  if (rnn_gemm(rs, x, rs->I, rr.wp, rr.w, xw, S * N, D * GH, rs->I, bias, ctx->threads))
    return toplu__kernel_error(ctx, TOPLU_ERR_BACKEND, "sgemm failed");
  rr.xw = xw;
  rr.h = ws + rs->ws_h;
  rr.c = lstm ? ws + rs->ws_c : NULL;
  rr.rec = ws + rs->ws_rec;
  rr.rh = rs->op == RNN_OP_GRU && !rs->lbr ? ws + rs->ws_rh : NULL;
  if (h0) state_copy(rs, rr.h, (float *)h0, 1);
  else memset(rr.h, 0, (size_t)(D * N * H) * sizeof(float));
  if (lstm) {
    if (c0) state_copy(rs, rr.c, (float *)c0, 1);
    else memset(rr.c, 0, (size_t)(D * N * H) * sizeof(float));
  }
  /* Y is 0 after each row's length */
  if (rr.y && rr.lens)
    for (int64_t b = 0; b < N; b++)
      for (int64_t t = rr.lens[b]; t < S; t++)
        for (int d = 0; d < D; d++) memset(rr.y + y_off(rs, t, d, b), 0, (size_t)H * sizeof(float));
  /* work items: a direction and a block of rows, each stepping on its own */
  const int threads = ctx->threads;
  int64_t nch = 1;
  if (rs->own && threads > 1) {
    nch = (threads + D - 1) / D;
    nch = nch > N ? N : nch < 1 ? 1 : nch;
  }
  const int64_t items = D * nch;
  int failed = 0;
  if (rs->own && threads > 1 && items > 1) {
#pragma omp parallel for num_threads(threads) schedule(static)
    for (int64_t it = 0; it < items; it++) {
      int d = (int)(it / nch);
      int64_t k = it % nch;
      rnn_item(rs, &rr, d, N * k / nch, N * (k + 1) / nch, 1);
    }
  } else {
    for (int64_t it = 0; it < items && !failed; it++) {
      int d = (int)(it / nch);
      int64_t k = it % nch;
      failed = rnn_item(rs, &rr, d, N * k / nch, N * (k + 1) / nch, threads);
    }
  }
  if (failed) return toplu__kernel_error(ctx, TOPLU_ERR_BACKEND, "sgemm failed");
  if (yh) state_copy(rs, rr.h, yh, 0);
  if (yc) state_copy(rs, rr.c, yc, 0);
  return TOPLU_OK;
}

static void rnn_release(toplu__kernel_ctx_t *ctx) {
  rnn_state_t *rs = ctx->state;
  if (!rs) return;
  toplu__dnnl_pack_release(ctx, rs->wp);
  toplu__dnnl_pack_release(ctx, rs->rp);
  toplu__kernel_free(ctx, rs);
  ctx->state = NULL;
}

const toplu__kernel_t toplu__kernels_rnn[] = {
    {.op_type = "LSTM", .domain = "", .prepare = rnn_prepare, .run = rnn_run, .release = rnn_release},
    {.op_type = "GRU", .domain = "", .prepare = rnn_prepare, .run = rnn_run, .release = rnn_release},
    {.op_type = "RNN", .domain = "", .prepare = rnn_prepare, .run = rnn_run, .release = rnn_release},
    {.op_type = NULL},
};
