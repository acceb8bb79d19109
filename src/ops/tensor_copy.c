/*
 * ops/tensor_copy.c - strided copies, fills and tiled transposes by element
 * size (see ops/tensor_copy.h).  Used by the ONNX data-movement kernels
 * (Transpose-13, Slice-13, Expand-13, Tile-13, Pad-19, DepthToSpace-13,
 * SpaceToDepth-13, Concat-13, Split-18).
 */
#include <omp.h>
#include <string.h>

#include "ops/tensor_copy.h"


/* 2-D transposes go in tiles of TILE_R(es) rows (contiguous in the input:
 * 128 bytes read per column) by TILE_C columns (contiguous in the output),
 * so a tile's input lines stay in L1 while its output rows are written. */
#define TILE_R(es) (128 / (es))
#define TILE_C 128

/* Per element size: fill with one value, gather with a stride, and a tiled
 * transpose d[r * dstr + c] = s[r + c * sstr]; rows2d copies nr short rows
 * (d dense, s rows rstr apart, elements istr apart). */
#define DEFINE_MOVES(T, S)                                                                                      \
  static void fill_##S(void *dst, const void *v, int64_t n) {                                                 \
    T *d = dst;                                                                                                \
    const T x = *(const T *)v;                                                                                 \
    for (int64_t i = 0; i < n; i++) d[i] = x;                                                                  \
  }                                                                                                            \
  static void gather_##S(void *dst, const void *src, int64_t n, int64_t st) {                                 \
    T *d = dst;                                                                                                \
    const T *s = src;                                                                                          \
    for (int64_t i = 0; i < n; i++) d[i] = s[i * st];                                                          \
  }                                                                                                            \
  static void rows2d_##S(void *dst, const void *src, int64_t nr, int64_t inner, int64_t rstr, int64_t istr) {   \
    T *d = dst;                                                                                                \
    const T *s = src;                                                                                          \
    for (int64_t r = 0; r < nr; r++, d += inner, s += rstr)                                                    \
      for (int64_t i = 0; i < inner; i++) d[i] = s[i * istr];                                                  \
  }                                                                                                            \
  static void tile_##S(void *dst, const void *src, int64_t rows, int64_t cols, int64_t dstr, int64_t sstr) {  \
    T *d = dst;                                                                                                \
    const T *s = src;                                                                                          \
    for (int64_t r0 = 0; r0 < rows; r0 += TILE_R(S)) {                                                         \
      int64_t r1 = r0 + TILE_R(S) < rows ? r0 + TILE_R(S) : rows;                                              \
      for (int64_t c0 = 0; c0 < cols; c0 += TILE_C) {                                                          \
        int64_t c1 = c0 + TILE_C < cols ? c0 + TILE_C : cols;                                                  \
        for (int64_t r = r0; r < r1; r++) {                                                                    \
          T *dr = d + r * dstr;                                                                                \
          const T *sr = s + r;                                                                                 \
          for (int64_t c = c0; c < c1; c++) dr[c] = sr[c * sstr];                                              \
        }                                                                                                      \
      }                                                                                                        \
    }                                                                                                          \
  }

DEFINE_MOVES(e1_t, 1)
DEFINE_MOVES(e2_t, 2)
DEFINE_MOVES(e4_t, 4)
DEFINE_MOVES(e8_t, 8)

/* Fill n elements of size es (single thread). */
static void fill_any(void *dst, const void *v, int64_t n, int es) {
  const unsigned char *b = v;
  int zero = 1;
  for (int i = 0; i < es; i++) zero &= b[i] == 0;
  if (zero) {
    memset(dst, 0, (size_t)n * (size_t)es);
    return;
  }
  switch (es) {
    case 1: fill_1(dst, v, n); break;
    case 2: fill_2(dst, v, n); break;
    case 4: fill_4(dst, v, n); break;
    default: fill_8(dst, v, n); break;
  }
}

/* n elements from src with stride st (elements) into dense dst. */
static void copy_run(void *dst, const void *src, int64_t n, int64_t st, int es) {
  if (st == 1) {
    memcpy(dst, src, (size_t)n * (size_t)es);
  } else if (st == 0) {
    fill_any(dst, src, n, es);
  } else {
    switch (es) {
      case 1: gather_1(dst, src, n, st); break;
      case 2: gather_2(dst, src, n, st); break;
      case 4: gather_4(dst, src, n, st); break;
      default: gather_8(dst, src, n, st); break;
    }
  }
}

/* See ops/tensor_copy.h. */
int toplu__copy_esize(toplu_dtype_t dt) {
  size_t es = toplu_dtype_size(dt);
  return es == 1 || es == 2 || es == 4 || es == 8 ? (int)es : 0;
}

/* See ops/tensor_copy.h. */
void toplu__dense_strides(const toplu_tensor_t *t, int64_t *str) {
  int64_t s = 1;
  for (int d = t->ndim - 1; d >= 0; d--) {
    str[d] = s;
    s *= t->dims[d];
  }
}

/* Dims of 1 go; dim i merges into its outer neighbour when the neighbour's
 * stride is dims[i] * str[i] (contiguous in the input as in the output). */
void toplu__strided_simplify(toplu__strided_t *s) {
  int64_t d[TOPLU_STRIDED_MAX], st[TOPLU_STRIDED_MAX];
  int n = 0;
  for (int i = 0; i < s->ndim; i++) {
    if (s->dims[i] == 0) { /* empty output */
      s->ndim = 1;
      s->dims[0] = 0;
      s->str[0] = 1;
      return;
    }
    if (s->dims[i] == 1) continue;
    if (n > 0 && st[n - 1] == s->str[i] * s->dims[i]) {
      d[n - 1] *= s->dims[i];
      st[n - 1] = s->str[i];
      continue;
    }
    d[n] = s->dims[i];
    st[n] = s->str[i];
    n++;
  }
  s->ndim = n;
  for (int i = 0; i < n; i++) s->dims[i] = d[i], s->str[i] = st[i];
}

/* Row mode, work items w0..w1: item w is chunk (w % nch) of output row
 * (w / nch); a row is the innermost dim. */
static void rows_range(const toplu__strided_t *s, char *dst, const char *src, int64_t w0, int64_t w1, int64_t nch,
                       int64_t chunk) {
  const int L = s->ndim - 1, es = s->esize;
  const int64_t inner = s->dims[L], istr = s->str[L];
  int64_t m = w0 / nch, c = w0 % nch, rem = m, off = 0;
  int64_t idx[TOPLU_STRIDED_MAX];
  for (int d = L - 1; d >= 0; d--) {
    idx[d] = rem % s->dims[d];
    rem /= s->dims[d];
    off += idx[d] * s->str[d];
  }
  const int small = L > 0 && nch == 1 && inner * es < 64; /* short rows: a loop, not a memcpy per row */
  for (int64_t w = w0; w < w1;) {
    if (small) {
      int64_t nr = s->dims[L - 1] - idx[L - 1];
      if (nr > w1 - w) nr = w1 - w;
      char *dp = dst + m * inner * es;
      const char *sp = src + off * es;
      switch (es) {
        case 1: rows2d_1(dp, sp, nr, inner, s->str[L - 1], istr); break;
        case 2: rows2d_2(dp, sp, nr, inner, s->str[L - 1], istr); break;
        case 4: rows2d_4(dp, sp, nr, inner, s->str[L - 1], istr); break;
        default: rows2d_8(dp, sp, nr, inner, s->str[L - 1], istr); break;
      }
      w += nr;
      m += nr;
      off += nr * s->str[L - 1];
      idx[L - 1] += nr;
      if (idx[L - 1] < s->dims[L - 1]) continue;
      off -= s->str[L - 1] * s->dims[L - 1];
      idx[L - 1] = 0;
      for (int d = L - 2; d >= 0; d--) {
        off += s->str[d];
        if (++idx[d] < s->dims[d]) break;
        off -= s->str[d] * s->dims[d];
        idx[d] = 0;
      }
      continue;
    }
    int64_t e0 = c * chunk, e1 = e0 + chunk < inner ? e0 + chunk : inner;
    copy_run(dst + (m * inner + e0) * es, src + (off + e0 * istr) * es, e1 - e0, istr, es);
    w++;
    if (++c == nch) {
      c = 0;
      m++;
      for (int d = L - 1; d >= 0; d--) {
        off += s->str[d];
        if (++idx[d] < s->dims[d]) break;
        off -= s->str[d] * s->dims[d];
        idx[d] = 0;
      }
    }
  }
}

/* Tile mode, work items w0..w1: dim j has input stride 1 and the last dim
 * does not, so (j, last) is a 2-D transpose; item w is a block of
 * `per` rows of dim j in outer position (w / rblocks). */
static void tiles_range(const toplu__strided_t *s, int j, char *dst, const char *src, int64_t w0, int64_t w1,
                        int64_t rblocks, int64_t per) {
  const int L = s->ndim - 1, es = s->esize;
  int64_t dstr[TOPLU_STRIDED_MAX], acc = 1;
  for (int d = L; d >= 0; d--) {
    dstr[d] = acc;
    acc *= s->dims[d];
  }
  const int64_t rows = s->dims[j], cols = s->dims[L];
  for (int64_t w = w0; w < w1; w++) {
    int64_t rem = w / rblocks, rb = w % rblocks, soff = 0, doff = 0;
    for (int d = L - 1; d >= 0; d--) {
      if (d == j) continue;
      int64_t i = rem % s->dims[d];
      rem /= s->dims[d];
      soff += i * s->str[d];
      doff += i * dstr[d];
    }
    int64_t r0 = rb * per, r1 = r0 + per < rows ? r0 + per : rows;
    char *dp = dst + (doff + r0 * dstr[j]) * es;
    const char *sp = src + (soff + r0) * es;
    switch (es) {
      case 1: tile_1(dp, sp, r1 - r0, cols, dstr[j], s->str[L]); break;
      case 2: tile_2(dp, sp, r1 - r0, cols, dstr[j], s->str[L]); break;
      case 4: tile_4(dp, sp, r1 - r0, cols, dstr[j], s->str[L]); break;
      default: tile_8(dp, sp, r1 - r0, cols, dstr[j], s->str[L]); break;
    }
  }
}

/* Tile mode when some dim other than the last is the input's contiguous one
 * and the last is not; otherwise row mode (memcpy, fill or gather per row,
 * rows split into chunks when there are fewer rows than threads). */
void toplu__strided_copy(const toplu__strided_t *s, void *dst, const void *src, int threads) {
  const int es = s->esize;
  int64_t total = 1;
  for (int d = 0; d < s->ndim; d++) total *= s->dims[d];
  if (total == 0) return;
  const char *base = (const char *)src + s->off * es;
  if (s->ndim == 0) {
    memcpy(dst, base, (size_t)es);
    return;
  }
  const int L = s->ndim - 1;
  int nt = threads > 1 && (size_t)total * (size_t)es >= TOPLU_COPY_PAR_BYTES ? threads : 1;
  int j = -1;
  if (s->str[L] != 1 && s->str[L] != 0)
    for (int d = L - 1; d >= 0 && j < 0; d--)
      if (s->str[d] == 1) j = d;
  if (j >= 0) {
    const int64_t rows = s->dims[j], cols = s->dims[L];
    const int64_t tr = TILE_R(es);
    int64_t per = tr;
    if (cols * tr < 4096) per = (4096 / cols + tr - 1) / tr * tr; /* narrow tiles: more rows per item */
    int64_t rblocks = (rows + per - 1) / per, items = total / (rows * cols) * rblocks;
    if (items < nt) nt = (int)(items > 0 ? items : 1);
#pragma omp parallel num_threads(nt) if (nt > 1)
    {
      int t = omp_get_thread_num(), n = omp_get_num_threads();
      tiles_range(s, j, dst, base, items * t / n, items * (t + 1) / n, rblocks, per);
    }
    return;
  }
  const int64_t inner = s->dims[L], m = total / inner;
  int64_t nch = 1;
  if (nt > 1 && m < 4 * (int64_t)nt) {
    nch = (4 * (int64_t)nt + m - 1) / m;
    int64_t most = (inner + 1023) / 1024;
    if (nch > most) nch = most;
    if (nch < 1) nch = 1;
  }
  int64_t chunk = (inner + nch - 1) / nch, items = m * nch;
  if (items < nt) nt = (int)items;
#pragma omp parallel num_threads(nt) if (nt > 1)
  {
    int t = omp_get_thread_num(), n = omp_get_num_threads();
    rows_range(s, dst, base, items * t / n, items * (t + 1) / n, nch, chunk);
  }
}

/* See ops/tensor_copy.h: 64-byte aligned pieces, one per thread. */
void toplu__copy_bytes(void *dst, const void *src, size_t n, int threads) {
  if (n == 0 || dst == src) return;
  if (threads <= 1 || n < TOPLU_COPY_PAR_BYTES) {
    memcpy(dst, src, n);
    return;
  }
  int nt = threads;
  size_t per = (n / (size_t)nt + 63) & ~(size_t)63;
#pragma omp parallel for num_threads(nt) schedule(static)
  for (int t = 0; t < nt; t++) {
    size_t a = per * (size_t)t, b = a + per < n ? a + per : n;
    if (a < b) memcpy((char *)dst + a, (const char *)src + a, b - a);
  }
}

/* See ops/tensor_copy.h. */
void toplu__fill_elems(void *dst, const void *value, int64_t n, int es, int threads) {
  if (n <= 0) return;
  if (threads <= 1 || (size_t)n * (size_t)es < TOPLU_COPY_PAR_BYTES) {
    fill_any(dst, value, n, es);
    return;
  }
  int nt = threads;
  int64_t per = (n + nt - 1) / nt;
#pragma omp parallel for num_threads(nt) schedule(static)
  for (int t = 0; t < nt; t++) {
    int64_t a = per * t, b = a + per < n ? a + per : n;
    if (a < b) fill_any((char *)dst + a * es, value, b - a, es);
  }
}
