/* ops/onednn/pwdw_own.c - toplu's own channels-last pointwise + depthwise
 * kernel (see pwdw_own.h). */
#include "ops/onednn/pwdw_own.h"

#include <math.h>
#include <omp.h>
#include <string.h>

#include "ops/onednn/gemm_avx2.h"
#include "ops/onednn/onednn.h"

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#define PWDW_X86 1
#define T256 __attribute__((target("avx2,fma")))
#define T512 __attribute__((target("avx512f,avx2,fma")))
#else
#define PWDW_X86 0
#endif

/* The E buffer's target size: whole rows of E, about this many bytes (in
 * L2 on every x86 core this runs on: 512 KiB on Zen 3, 1 MiB on Zen 5). */
#define PWDW_BUF_BYTES (256 * 1024)

static int post_ok(toplu__post_kind_t k) {
  return k != TOPLU_POST_SUM && k != TOPLU_POST_BIAS && k != TOPLU_POST_MIN_CHANNEL && k != TOPLU_POST_QSUM;
}

int toplu__pwdw_supported(const toplu__node_t *node, int pj_split) {
  int sums = 0;
  for (int q = 0; q < node->n_post; q++) {
    const toplu__post_kind_t k = node->post[q].kind;
    if (q >= pj_split && k == TOPLU_POST_SUM && !sums++) continue; /* the projection's residual addend */
    if (!post_ok(k)) return 0;
  }
  return 1;
}

/* 1 when post-ops [from, to) are none, one Clip or one Relu: *lo, *hi the bounds they clamp to. */
static int as_clamp(const toplu__node_t *node, int from, int to, float *lo, float *hi) {
  *lo = -INFINITY, *hi = INFINITY;
  if (to == from) return 1;
  if (to - from > 1) return 0;
  const toplu__post_op_t *q = &node->post[from];
  if (q->kind == TOPLU_POST_CLIP) return *lo = q->alpha, *hi = q->beta, 1;
  if (q->kind == TOPLU_POST_RELU) return *lo = 0.f, 1;
  return 0;
}

int toplu__pwdw_clamps(const toplu__node_t *node, int split, int end) {
  float lo, hi;
  return split >= 0 && split <= end && end <= node->n_post && as_clamp(node, 0, split, &lo, &hi) &&
         as_clamp(node, split, end, &lo, &hi);
}

/* 1 when the projection's post-ops are what the tiles apply: nothing, a SUM, and then at most one Clip or
 * Relu (*sum: the SUM is there; *lo, *hi: the clamp). */
static int proj_simple(const toplu__pwdw_t *p, int *sum, float *lo, float *hi) {
  const toplu__node_t *n = &p->post3;
  int q = 0;
  *sum = n->n_post > 0 && n->post[0].kind == TOPLU_POST_SUM;
  q += *sum;
  return as_clamp(n, q, n->n_post, lo, hi);
}

void toplu__pwdw_init(toplu__pwdw_t *p, const toplu__node_t *node, int split, int64_t c, int64_t m, int64_t h,
                      int64_t w, int s, int64_t co, int pj_split) {
  memset(p, 0, sizeof *p);
  p->c = c, p->m = m, p->h = h, p->w = w, p->s = s;
  p->ho = (h - 1) / s + 1, p->wo = (w - 1) / s + 1;
  const int64_t row_bytes = w * m * (int64_t)sizeof(float);
  int64_t fit = PWDW_BUF_BYTES / (row_bytes > 0 ? row_bytes : 1); /* E rows in the target */
  p->rows = fit > 3 ? (fit - 3) / s + 1 : 1;                       /* (rows - 1) * s + 3 E rows per step */
  if (p->rows > p->ho) p->rows = p->ho;
  p->post1 = *node;
  p->post1.n_post = split;
  p->node = node;
  p->post_split = split;
  p->post2_end = co > 0 ? pj_split : node->n_post;
  p->co = co;
  if (co > 0) { /* post3: the projection's post-ops, first */
    p->post3 = *node;
    p->post3.n_post = node->n_post - pj_split;
    for (int q = 0; q < p->post3.n_post; q++) p->post3.post[q] = node->post[pj_split + q];
    p->pj_simple = proj_simple(p, &p->pj_sum, &p->pj_lo, &p->pj_hi);
  }
  p->clamp = as_clamp(node, split, p->post2_end, &p->lo, &p->hi);
  p->clamp1 = as_clamp(node, 0, split, &p->lo1, &p->hi1);
}

void toplu__pwdw_init_dw_first(toplu__pwdw_t *p, const toplu__node_t *node, int split, int64_t c, int64_t h, int64_t w,
                               int s, int64_t co) {
  toplu__pwdw_init(p, node, 0, c, c, h, w, s, co, split);
  p->dw_first = 1;
  /* output rows per step: their depthwise rows (Wo x C floats each) about PWDW_BUF_BYTES / 4 */
  const int64_t row_bytes = p->wo * c * (int64_t)sizeof(float);
  p->rows = (PWDW_BUF_BYTES / 4) / (row_bytes > 0 ? row_bytes : 1);
  if (p->rows < 1) p->rows = 1;
  if (p->rows > p->ho) p->rows = p->ho;
}

/* Floats of the E ring: the rows one step needs, (rows - 1) s + 3, whole (none where X is read in place). */
static size_t ring_floats(const toplu__pwdw_t *p) {
  if (p->dw_first) return 0;
  int64_t e_rows = (p->rows - 1) * p->s + 3;
  if (e_rows > p->h) e_rows = p->h;
  return (size_t)(e_rows * p->w * p->m);
}

/* Where a thread's Y rows start in its scratch (with the projection): after the ring, 64-byte aligned. */
static size_t ybuf_offset(const toplu__pwdw_t *p) { return (ring_floats(p) + 15) & ~(size_t)15; }

size_t toplu__pwdw_buf_floats(const toplu__pwdw_t *p) {
  return p->co > 0 ? ybuf_offset(p) + (size_t)(p->rows * p->wo * p->m) : ring_floats(p);
}

size_t toplu__pwdw_w1_floats(int64_t c, int64_t m) { return toplu__gemm_packed_size(c, m); }

void toplu__pwdw_pack_w1(const float *w1, int64_t c, int64_t m, float *dst) {
  /* B[k][j] = W1[j][k]: panels of 16 columns (output channels), [panel][C][16] */
  const int64_t np = (m + TOPLU_GEMM_NR - 1) / TOPLU_GEMM_NR;
  for (int64_t jp = 0; jp < np; jp++)
    for (int64_t k = 0; k < c; k++) {
      float *d = dst + (jp * c + k) * TOPLU_GEMM_NR;
      for (int j = 0; j < TOPLU_GEMM_NR; j++) {
        int64_t col = jp * TOPLU_GEMM_NR + j;
        d[j] = col < m ? w1[col * c + k] : 0.f;
      }
    }
}

void toplu__pwdw_pack_wdw(const float *wdw, int64_t m, float *dst) {
  for (int t = 0; t < 9; t++)
    for (int64_t j = 0; j < m; j++) dst[t * m + j] = wdw[j * 9 + t];
}

/* One output channel, all taps in the kernel's order (bias, then kh, kw). */
static inline float dw_one(const toplu__pwdw_t *p, const float *const r[3], int64_t iw, int64_t j, float b) {
  float acc = b;
  for (int kh = 0; kh < 3; kh++)
    for (int kw = 0; kw < 3; kw++) {
      int64_t x = iw + kw;
      if (x >= 0 && x < p->w) acc += r[kh][x * p->m + j] * p->wdw[(kh * 3 + kw) * p->m + j];
    }
  return acc;
}

static inline float clampf(float v, float lo, float hi) { return v < lo ? lo : v > hi ? hi : v; }

/* Channels [j0, m) of one output row, one at a time (the tail, and CPUs
 * without AVX2). */
static void dw_row_scalar(const toplu__pwdw_t *p, const float *const r[3], const float *bdw, float *y, int64_t j0) {
  for (int64_t ow = 0; ow < p->wo; ow++) {
    const int64_t iw = ow * p->s - 1;
    for (int64_t j = j0; j < p->m; j++) {
      float v = dw_one(p, r, iw, j, bdw ? bdw[j] : 0.f);
      y[ow * p->m + j] = p->clamp ? clampf(v, p->lo, p->hi) : v;
    }
  }
}

#if PWDW_X86
/* fma in the order of dw_one: acc + e * w, left to right within a row; rr[kh] points at the row's first
 * pixel's channel j, pixels PS floats apart */
#define DW_TAPS(LOAD, FMA, PS, rr, iw, wv, acc)                                          \
  do {                                                                                   \
    for (int kh = 0; kh < 3; kh++) {                                                     \
      const float *row_ = (rr)[kh];                                                      \
      if ((iw) >= 0) acc = FMA(LOAD(row_ + (iw) * (PS)), wv[kh * 3], acc);               \
      acc = FMA(LOAD(row_ + ((iw) + 1) * (PS)), wv[kh * 3 + 1], acc);                    \
      if ((iw) + 2 < w) acc = FMA(LOAD(row_ + ((iw) + 2) * (PS)), wv[kh * 3 + 2], acc);  \
    }                                                                                    \
  } while (0)

/* Four outputs ow .. ow + 3 whose taps all lie inside the row, stride S: each of the 3 * S + 3 columns they
 * read is loaded once and fed to every output that reads it (6 loads a row for 4 x 3 taps at stride 1,
 * against 12); each output's taps still in dw_one's order (row by row, left to right), so the sums are
 * DW_TAPS's */
#define DW_QUAD(VT, LOAD, FMA, PS, S, rr, ow, wv, b, a)                                \
  do {                                                                                 \
    const int64_t iw_ = (ow) * (S) - 1;                                                \
    a[0] = a[1] = a[2] = a[3] = b;                                                     \
    for (int kh = 0; kh < 3; kh++) {                                                   \
      const float *row_ = (rr)[kh] + iw_ * (PS);                                       \
      _Pragma("GCC unroll 9") for (int c = 0; c < 3 * (S) + 3; c++) {                  \
        const VT v_ = LOAD(row_ + c * (PS));                                           \
        _Pragma("GCC unroll 4") for (int q = 0; q < 4; q++) {                          \
          const int t_ = c - q * (S);                                                  \
          if (t_ >= 0 && t_ < 3) a[q] = FMA(v_, wv[kh * 3 + t_], a[q]);                \
        }                                                                              \
      }                                                                                \
    }                                                                                  \
  } while (0)

/* The depthwise part of output rows [r0, r1) (each from its three E rows in the ring) into y (row r at
 * y + (r - r0) * wo * m), L channels at a time: the channel block is the outer loop, so the block's lines
 * of the E rows these outputs share are read from L2 once here, not once per output row.  The ring's
 * layout: E row e's pixel x, channel j at ROW(e % slots) + x * PS; ZROW: the same for a padding row.
 * Returns the channels done (a multiple of L). */
#define DW_ROWS(NAME, TGT, VT, L, LOAD, STORE, FMA, SET1, ZERO, MIN, MAX, PS, ROW, ZROW)                    \
  TGT static int64_t NAME(const toplu__pwdw_t *p, const float *buf, int64_t slots, int64_t r0, int64_t r1,  \
                          const float *bdw, float *y) {                                                     \
    const int64_t m = p->m, w = p->w, wo = p->wo, s = p->s;                                                 \
    const VT lo = SET1(p->lo), hi = SET1(p->hi);                                                            \
    const int clamp = p->clamp;                                                                             \
    /* outputs 1 .. last_in read no padding column */                                                       \
    const int64_t last_in = w >= 2 ? (w - 2) / s : 0;                                                       \
    (void)slots;                                                                                            \
    int64_t j = 0;                                                                                          \
    for (; j + L <= m; j += L) {                                                                            \
      VT wv[9];                                                                                             \
      for (int t = 0; t < 9; t++) wv[t] = LOAD(p->wdw + t * m + j);                                         \
      const VT b = bdw ? LOAD(bdw + j) : ZERO();                                                            \
      for (int64_t r = r0; r < r1; r++) {                                                                   \
        const float *rr[3];                                                                                 \
        for (int k = 0; k < 3; k++) {                                                                       \
          const int64_t ih = r * s - 1 + k;                                                                 \
          rr[k] = ih >= 0 && ih < p->h ? ROW(ih % slots) : ZROW;                                            \
        }                                                                                                   \
        float *yr = y + (r - r0) * wo * m + j;                                                              \
        int64_t ow = 0;                                                                                     \
        while (ow < wo) {                                                                                   \
          if (ow >= 1 && ow + 3 <= last_in) {                                                               \
            VT a[4];                                                                                        \
            if (s == 1) DW_QUAD(VT, LOAD, FMA, PS, 1, rr, ow, wv, b, a);                                    \
            else DW_QUAD(VT, LOAD, FMA, PS, 2, rr, ow, wv, b, a);                                           \
            for (int q = 0; q < 4; q++) {                                                                   \
              /* max(lo, v) then min(hi, .): the second operand is returned when one is NaN, so NaN stays */ \
              if (clamp) a[q] = MIN(hi, MAX(lo, a[q]));                                                     \
              STORE(yr + (ow + q) * m, a[q]);                                                               \
            }                                                                                               \
            ow += 4;                                                                                        \
            continue;                                                                                       \
          }                                                                                                 \
          const int64_t iw = ow * s - 1;                                                                    \
          VT acc = b;                                                                                       \
          DW_TAPS(LOAD, FMA, PS, rr, iw, wv, acc);                                                          \
          if (clamp) acc = MIN(hi, MAX(lo, acc));                                                           \
          STORE(yr + ow * m, acc);                                                                          \
          ow++;                                                                                             \
        }                                                                                                   \
      }                                                                                                     \
    }                                                                                                       \
    return j;                                                                                               \
  }
/* the ring as whole rows of channels-last pixels (ring_blocked 0) */
#define PLAIN_ROW(slot) (buf + (slot) * w * m + j)
#define PLAIN_ZROW (p->zero_row + j)
/* the ring in 16-channel blocks (ring_blocked 1): block j / 16 of all slots' pixels, then the next */
#define BLK_ROW(slot) (buf + j * slots * w + (slot) * w * 16)
#define BLK_ZROW (p->zero_row)
DW_ROWS(dw_rows_512, T512, __m512, 16, _mm512_loadu_ps, _mm512_storeu_ps, _mm512_fmadd_ps, _mm512_set1_ps,
        _mm512_setzero_ps, _mm512_min_ps, _mm512_max_ps, m, PLAIN_ROW, PLAIN_ZROW)
DW_ROWS(dw_rows_512b, T512, __m512, 16, _mm512_loadu_ps, _mm512_storeu_ps, _mm512_fmadd_ps, _mm512_set1_ps,
        _mm512_setzero_ps, _mm512_min_ps, _mm512_max_ps, 16, BLK_ROW, BLK_ZROW)
DW_ROWS(dw_rows_256, T256, __m256, 8, _mm256_loadu_ps, _mm256_storeu_ps, _mm256_fmadd_ps, _mm256_set1_ps,
        _mm256_setzero_ps, _mm256_min_ps, _mm256_max_ps, m, PLAIN_ROW, PLAIN_ZROW)
#endif

#if PWDW_X86
T512 static int64_t post1_512(const toplu__pwdw_t *p, float *e, int64_t pixels, const float *b1) {
  const int64_t m = p->m;
  const __m512 lo = _mm512_set1_ps(p->lo1), hi = _mm512_set1_ps(p->hi1);
  int64_t j = 0;
  for (; j + 16 <= m; j += 16) {
    const __m512 b = b1 ? _mm512_loadu_ps(b1 + j) : _mm512_setzero_ps();
    for (int64_t px = 0; px < pixels; px++) {
      __m512 v = _mm512_add_ps(_mm512_loadu_ps(e + px * m + j), b);
      if (p->clamp1) v = _mm512_min_ps(hi, _mm512_max_ps(lo, v));
      _mm512_storeu_ps(e + px * m + j, v);
    }
  }
  return j;
}

T256 static int64_t post1_256(const toplu__pwdw_t *p, float *e, int64_t pixels, const float *b1) {
  const int64_t m = p->m;
  const __m256 lo = _mm256_set1_ps(p->lo1), hi = _mm256_set1_ps(p->hi1);
  int64_t j = 0;
  for (; j + 8 <= m; j += 8) {
    const __m256 b = b1 ? _mm256_loadu_ps(b1 + j) : _mm256_setzero_ps();
    for (int64_t px = 0; px < pixels; px++) {
      __m256 v = _mm256_add_ps(_mm256_loadu_ps(e + px * m + j), b);
      if (p->clamp1) v = _mm256_min_ps(hi, _mm256_max_ps(lo, v));
      _mm256_storeu_ps(e + px * m + j, v);
    }
  }
  return j;
}
#endif

/* E = post1(E + b1) on pixels rows of M channels (the GEMM's products). */
static void post1(const toplu__pwdw_t *p, float *e, int64_t pixels, const float *b1, int wide, int avx2) {
  int64_t j0 = 0;
#if PWDW_X86
  if (wide) j0 = post1_512(p, e, pixels, b1);
  else if (avx2) j0 = post1_256(p, e, pixels, b1);
#else
  (void)wide, (void)avx2;
#endif
  for (int64_t px = 0; px < pixels && j0 < p->m; px++)
    for (int64_t j = j0; j < p->m; j++) {
      float v = e[px * p->m + j] + (b1 ? b1[j] : 0.f);
      e[px * p->m + j] = p->clamp1 ? clampf(v, p->lo1, p->hi1) : v;
    }
  if (!p->clamp1)
    for (int q = 0; q < p->post_split; q++) toplu__post_apply(&p->post1.post[q], e, pixels * p->m);
}

#if PWDW_X86
/* Projection tile: C[R][16 Q] = A[R][k] . Q packed panels (panel q at b + q * ps) + bias [+ res] [clamped],
 * row r's channels at c + r * ldc (res the same way); the last panel's lanes past Co masked (last), its
 * padding weights zeros.  The sums in k order, then the bias, the addend and the clamp, as
 * toplu__gemm_packed with its post applies them. */
#define P_TILE(NAME, R, Q)                                                                                     \
  T512 static void NAME(const float *a, int64_t lda, const float *b, int64_t ps, int64_t k, float *c,         \
                        int64_t ldc, const float *bias, const float *res, __mmask16 last, int clamp, float lo_f,\
                        float hi_f) {                                                                          \
    __m512 acc[R][Q];                                                                                          \
    for (int r = 0; r < R; r++)                                                                                \
      for (int q = 0; q < Q; q++) acc[r][q] = _mm512_setzero_ps();                                             \
    for (int64_t p = 0; p < k; p++) {                                                                          \
      __m512 y[Q];                                                                                             \
      for (int q = 0; q < Q; q++) y[q] = _mm512_loadu_ps(b + q * ps + p * 16);                                 \
      for (int r = 0; r < R; r++) {                                                                            \
        const __m512 x = _mm512_set1_ps(a[r * lda + p]);                                                       \
        for (int q = 0; q < Q; q++) acc[r][q] = _mm512_fmadd_ps(x, y[q], acc[r][q]);                           \
      }                                                                                                        \
    }                                                                                                          \
    const __m512 lo = _mm512_set1_ps(lo_f), hi = _mm512_set1_ps(hi_f); /* not held through the k loop */     \
    for (int q = 0; q < Q; q++) {                                                                              \
      const __mmask16 mk = q == Q - 1 ? last : (__mmask16)0xFFFF;                                              \
      const __m512 bq = bias ? _mm512_maskz_loadu_ps(mk, bias + q * 16) : _mm512_setzero_ps();                 \
      for (int r = 0; r < R; r++) {                                                                            \
        __m512 v = _mm512_add_ps(acc[r][q], bq);                                                               \
        if (res) v = _mm512_add_ps(v, _mm512_maskz_loadu_ps(mk, res + r * ldc + q * 16));                      \
        if (clamp) v = _mm512_min_ps(hi, _mm512_max_ps(lo, v));                                                \
        _mm512_mask_storeu_ps(c + r * ldc + q * 16, mk, v);                                                    \
      }                                                                                                        \
    }                                                                                                          \
  }
P_TILE(p_tile12x1, 12, 1)
P_TILE(p_tile12x2, 12, 2)
P_TILE(p_tile6x3, 6, 3)
P_TILE(p_tile6x4, 6, 4)
P_TILE(p_tile6x2, 6, 2)
P_TILE(p_tile6x1, 6, 1)

/* Z's rows for px pixels of Y (M channels each, at yb) into z (Co channels each; res the same way, or
 * NULL): register tiles of 12 pixels (Co up to 32) or 6 (up to 64; over 64, each 6 pixels' channels in
 * groups of 64, the last group's tile 16-48 wide: MobileNetV2's 96-, 160- and 320-channel projections);
 * the last tile ends at the last pixel and recomputes rows the one before it wrote (the same values).
 * 0 when it cannot (fewer pixels than a tile, other post-ops): the caller then runs toplu__gemm_packed. */
T512 static int proj_rows_512(const toplu__pwdw_t *p, const float *yb, int64_t px, float *z, const float *bias,
                              const float *res) {
  const int64_t co = p->co, m = p->m, np = (co + 15) / 16, ps = m * 16;
  if (!p->pj_simple) return 0;
  const int rt = np <= 2 ? 12 : 6, clamp = p->pj_lo > -INFINITY || p->pj_hi < INFINITY;
  if (px < rt) return 0;
  const float lo = p->pj_lo, hi = p->pj_hi;
  const __mmask16 last = co % 16 ? (__mmask16)((1u << (co % 16)) - 1) : (__mmask16)0xFFFF;
  if (!p->pj_sum) res = NULL;
  for (int64_t i = 0;; i += rt) {
    if (i + rt > px) i = px - rt;
    const float *ai = yb + i * m, *ri = res ? res + i * co : NULL;
    float *zi = z + i * co;
    if (np == 1) p_tile12x1(ai, m, p->wpjp, ps, m, zi, co, bias, ri, last, clamp, lo, hi);
    else if (np == 2) p_tile12x2(ai, m, p->wpjp, ps, m, zi, co, bias, ri, last, clamp, lo, hi);
    else /* 6 pixels, panels 4 at a time: A's 6 rows stay in L1 across the groups */
      for (int64_t g = 0; g < np; g += 4) {
        const int64_t q = np - g < 4 ? np - g : 4;
        const __mmask16 mk = g + q == np ? last : (__mmask16)0xFFFF;
        const float *wg = p->wpjp + g * ps, *bg = bias ? bias + g * 16 : NULL, *rg = ri ? ri + g * 16 : NULL;
        float *zg = zi + g * 16;
        switch (q) {
          case 1: p_tile6x1(ai, m, wg, ps, m, zg, co, bg, rg, mk, clamp, lo, hi); break;
          case 2: p_tile6x2(ai, m, wg, ps, m, zg, co, bg, rg, mk, clamp, lo, hi); break;
          case 3: p_tile6x3(ai, m, wg, ps, m, zg, co, bg, rg, mk, clamp, lo, hi); break;
          default: p_tile6x4(ai, m, wg, ps, m, zg, co, bg, rg, mk, clamp, lo, hi); break;
        }
      }
    if (i + rt >= px) break;
  }
  return 1;
}
#endif

/* 1 when the ring holds E in 16-channel blocks (block q of every slot's pixels, then block q + 1), which
 * the AVX-512 tiles write and the depthwise part reads 64 contiguous bytes a pixel; else whole rows of
 * channels-last pixels. */
static int ring_blocked(const toplu__pwdw_t *p, int wide) {
  return PWDW_X86 && !p->dw_first && wide && p->clamp1 && p->m % 16 == 0 && p->c <= 256;
}

/* Output rows [r0, r1) of Y (row r at y + (r - r0) * Wo * M) from the E rows in the ring buf (E row e in
 * slot e % slots; padding rows: zeros). */
static void dw_rows(const toplu__pwdw_t *p, const float *buf, int64_t slots, int64_t r0, int64_t r1, const float *bdw,
                    float *y, int wide, int avx2) {
  int64_t j0 = 0;
#if PWDW_X86
  if (ring_blocked(p, wide)) j0 = dw_rows_512b(p, buf, slots, r0, r1, bdw, y);
  else if (wide) j0 = dw_rows_512(p, buf, slots, r0, r1, bdw, y);
  else if (avx2) j0 = dw_rows_256(p, buf, slots, r0, r1, bdw, y);
#else
  (void)wide, (void)avx2;
#endif
  const int64_t wm = p->w * p->m, row = p->wo * p->m;
  for (int64_t r = r0; r < r1; r++) {
    float *yr = y + (r - r0) * row;
    if (j0 < p->m) {
      const float *rr[3];
      for (int k = 0; k < 3; k++) {
        const int64_t ih = r * p->s - 1 + k;
        rr[k] = ih >= 0 && ih < p->h ? buf + (ih % slots) * wm : p->zero_row;
      }
      dw_row_scalar(p, rr, bdw, yr, j0);
    }
    if (!p->clamp)
      for (int q = p->post_split; q < p->post2_end; q++) toplu__post_apply(&p->node->post[q], yr, row);
  }
}

#if PWDW_X86
/* E tile: C[6][16 Q] = clamp1(A[6][k] . Q packed panels (panel q at b + q * ps) + bias), k <= 256, row r's
 * 16 channels of panel q stored at c + r * ldc + q * cps: the GEMM with the 1x1 convolution's bias and
 * Clip or Relu applied in registers before the store (the sums are kernel_6x64's FMA chains in
 * ops/onednn/gemm_avx2.c) */
#define E_TILE(NAME, Q)                                                                                   \
  T512 static void NAME(const float *a, int64_t lda, const float *b, int64_t ps, int64_t k, float *c,    \
                        int64_t ldc, int64_t cps, const float *bias, float lo_f, float hi_f) {           \
    __m512 acc[6][Q];                                                                                     \
    for (int r = 0; r < 6; r++)                                                                           \
      for (int q = 0; q < Q; q++) acc[r][q] = _mm512_setzero_ps();                                        \
    for (int64_t p = 0; p < k; p++) {                                                                     \
      __m512 y[Q];                                                                                        \
      for (int q = 0; q < Q; q++) y[q] = _mm512_loadu_ps(b + q * ps + p * 16);                            \
      for (int r = 0; r < 6; r++) {                                                                       \
        const __m512 x = _mm512_set1_ps(a[r * lda + p]);                                                  \
        for (int q = 0; q < Q; q++) acc[r][q] = _mm512_fmadd_ps(x, y[q], acc[r][q]);                      \
      }                                                                                                   \
    }                                                                                                     \
    const __m512 lo = _mm512_set1_ps(lo_f), hi = _mm512_set1_ps(hi_f);                                   \
    for (int q = 0; q < Q; q++) {                                                                         \
      const __m512 bq = bias ? _mm512_loadu_ps(bias + q * 16) : _mm512_setzero_ps();                      \
      for (int r = 0; r < 6; r++)                                                                         \
        _mm512_storeu_ps(c + r * ldc + q * cps, _mm512_min_ps(hi, _mm512_max_ps(lo, _mm512_add_ps(acc[r][q], bq)))); \
    }                                                                                                     \
  }
E_TILE(e_tile4, 4)
E_TILE(e_tile2, 2)
E_TILE(e_tile1, 1)

/* E rows for px pixels (A's rows at a, C channels each) into the ring in 16-channel blocks: pixel i's
 * channels 16 q .. 16 q + 15 at e + q * bs + i * 16.  Whole 6-pixel tiles here, the last px % 6 through
 * a zero-padded 6-row tile.  Needs clamp1, M % 16 == 0, C <= 256 (ring_blocked). */
T512 static void e_rows_512(const toplu__pwdw_t *p, const float *a, int64_t px, float *e, int64_t bs, const float *b1) {
  const int64_t m = p->m, c = p->c, np = m / 16, ps = c * 16;
  const float lo = p->lo1, hi = p->hi1; /* broadcast in the tiles' stores: held in zmm registers through the
                                         * k loop they made gcc spill a weight vector (perf: 11% of the
                                         * function on one reload) */
  int64_t i = 0;
  for (; i + 6 <= px; i += 6) {
    const float *ai = a + i * c;
    float *ei = e + i * 16;
    int64_t jp = 0;
    for (; jp + 4 <= np; jp += 4) e_tile4(ai, c, p->w1p + jp * ps, ps, c, ei + jp * bs, 16, bs, b1 ? b1 + jp * 16 : NULL, lo, hi);
    for (; jp + 2 <= np; jp += 2) e_tile2(ai, c, p->w1p + jp * ps, ps, c, ei + jp * bs, 16, bs, b1 ? b1 + jp * 16 : NULL, lo, hi);
    for (; jp < np; jp++) e_tile1(ai, c, p->w1p + jp * ps, ps, c, ei + jp * bs, 16, bs, b1 ? b1 + jp * 16 : NULL, lo, hi);
  }
  if (i < px) { /* the last 1-5 pixels: A's rows zero-padded to 6, C through a 6-row buffer */
    float abuf[6 * 256], cbuf[6 * 16 * 4];
    const int64_t rest = px - i;
    memset(abuf, 0, sizeof abuf);
    memcpy(abuf, a + i * c, (size_t)(rest * c) * sizeof(float));
    for (int64_t jp = 0; jp < np; jp++) {
      e_tile1(abuf, c, p->w1p + jp * ps, ps, c, cbuf, 16, 0, b1 ? b1 + jp * 16 : NULL, lo, hi);
      memcpy(e + jp * bs + i * 16, cbuf, (size_t)(rest * 16) * sizeof(float));
    }
  }
}
#endif


/* E = post1(X . W1 + b1) for the pixels of E rows [e0, e0 + n) of one image (X's rows at a) into ring
 * slots [e0 % slots, ...), which the run does not wrap around. */
static void e_rows(const toplu__pwdw_t *p, const float *a, int64_t e0, int64_t n, float *buf, int64_t slots,
                   const float *b1, int wide, int avx2) {
  const int64_t slot = e0 % slots, px = n * p->w;
#if PWDW_X86
  if (ring_blocked(p, wide)) {
    e_rows_512(p, a, px, buf + slot * p->w * 16, slots * p->w * 16, b1);
    return;
  }
#endif
  float *e = buf + slot * p->w * p->m;
  toplu__gemm_packed(a, p->c, p->w1p, e, px, p->m, p->c, NULL, 1);
  post1(p, e, px, b1, wide, avx2);
}

/* Z's rows for px pixels of Y (yb) into z: the projection's tiles, else the own GEMM with its post-ops. */
static void project(const toplu__pwdw_t *p, const float *yb, int64_t px, float *z, const float *bias, const float *res,
                    int wide) {
  int done = 0;
#if PWDW_X86
  if (wide) done = proj_rows_512(p, yb, px, z, bias, res);
#else
  (void)wide;
#endif
  if (!done) {
    toplu__gemm_post_t post = {.bias = bias, .node = &p->post3, .addend = res};
    toplu__gemm_packed(yb, p->m, p->wpjp, z, px, p->co, p->m, &post, 1);
  }
}

/* Output rows [oh0, oh1) of image img, with buf as this thread's E buffer:
 * a ring of toplu__pwdw_buf_floats / (W M) rows, E row e in slot e % slots. */
static void band(const toplu__pwdw_t *p, const float *x, const toplu__pwdw_args_t *a, float *y, int64_t img,
                 int64_t oh0, int64_t oh1, float *buf, int wide, int avx2) {
  const int64_t wm = p->w * p->m, s = p->s, slots = (int64_t)(ring_floats(p) / (size_t)wm);
  const float *b1 = a->b1;
  const float *xi = x + img * p->h * p->w * p->c;
  if (p->dw_first) { /* X's rows are the depthwise part's input: H slots, row e at xi + e W C */
    float *yb = buf;
    for (int64_t oh = oh0; oh < oh1; oh += p->rows) {
      const int64_t oe = oh + p->rows < oh1 ? oh + p->rows : oh1, at = (img * p->ho + oh) * p->wo;
      dw_rows(p, xi, p->h, oh, oe, a->bdw, yb, wide, avx2);
      project(p, yb, (oe - oh) * p->wo, y + at * p->co, a->bpj, a->res ? a->res + at * p->co : NULL, wide);
    }
    return;
  }
  int64_t e_hi = -1; /* E rows up to e_hi (exclusive) that the ring still holds, from e_hi - slots on */
  for (int64_t oh = oh0; oh < oh1; oh += p->rows) {
    const int64_t oe = oh + p->rows < oh1 ? oh + p->rows : oh1;
    const int64_t lo = oh * s - 1 > 0 ? oh * s - 1 : 0, hi = (oe - 1) * s + 2 < p->h ? (oe - 1) * s + 2 : p->h;
    int64_t e = lo > e_hi ? lo : e_hi; /* the rows these outputs share with the last ones are in the ring */
    while (e < hi) { /* the new rows, in runs that do not wrap around the ring */
      int64_t slot = e % slots, run = hi - e < slots - slot ? hi - e : slots - slot;
      e_rows(p, xi + e * p->w * p->c, e, run, buf, slots, b1, wide, avx2);
      e += run;
    }
    e_hi = hi;
    if (p->co > 0) { /* Y's rows into this thread's buffer, then Z's from them */
      float *yb = buf + ybuf_offset(p);
      const int64_t at = (img * p->ho + oh) * p->wo;
      dw_rows(p, buf, slots, oh, oe, a->bdw, yb, wide, avx2);
      project(p, yb, (oe - oh) * p->wo, y + at * p->co, a->bpj, a->res ? a->res + at * p->co : NULL, wide);
    } else {
      dw_rows(p, buf, slots, oh, oe, a->bdw, y + (img * p->ho + oh) * p->wo * p->m, wide, avx2);
    }
  }
}

void toplu__pwdw_run(const toplu__pwdw_t *p, const float *x, const toplu__pwdw_args_t *a, float *y, int64_t n,
                     float *ws, size_t ws_stride, int threads) {
  if (threads < 1) threads = 1;
  const int wide = toplu__gemm_avx512_ok(), avx2 = toplu__gemm_avx2_ok();
  /* bands of rows per image: enough that every thread has work */
  int64_t nb = n >= threads ? 1 : (threads + n - 1) / n;
  if (nb > p->ho) nb = p->ho;
  const int64_t tasks = n * nb;
  if (threads == 1 || tasks == 1) { /* no OpenMP region at all: one thread needs none */
    for (int64_t t = 0; t < tasks; t++)
      band(p, x, a, y, t / nb, (t % nb) * p->ho / nb, (t % nb + 1) * p->ho / nb, ws, wide, avx2);
    return;
  }
#pragma omp parallel for num_threads(threads) schedule(static) if (threads > 1 && tasks > 1)
  for (int64_t t = 0; t < tasks; t++) {
    const int64_t img = t / nb, b = t % nb;
    float *buf = ws + (size_t)omp_get_thread_num() * ws_stride;
    band(p, x, a, y, img, b * p->ho / nb, (b + 1) * p->ho / nb, buf, wide, avx2);
  }
}
