/*
 * ops/text.c - kernels of the text ops (ONNX operator spec,
 * https://onnx.ai/onnx/operators/; shapes and attribute checks in
 * graph/schema_text.c):
 *   TfIdfVectorizer-9 on int32 or int64 X.  Each row of X (all of a 1-D X)
 *     is one document.  For every length n in [min_gram_length,
 *     max_gram_length] that the pool has, every skip distance d in
 *     [1, max_skip_count + 1] (1 only, for n = 1: unigrams are counted once)
 *     and every start i with i + (n-1) d inside the row, the n-gram
 *     (x[i], x[i+d], ..., x[i+(n-1)d]) found in the pool as its k-th
 *     n-gram is a hit at coordinate c = ngram_indexes[k], with weight
 *     w = weights[k] (1 without weights): TF: y[c] += 1; TFIDF: y[c] += w;
 *     IDF: y[c] = w.  Coordinates no n-gram hit are 0.  That is ONNX
 *     Runtime 1.30's arithmetic, checked against it also where several
 *     n-grams share a coordinate, which the spec leaves open: TFIDF adds
 *     each n-gram's count times its own weight, and IDF keeps the weight of
 *     the last hit in ONNX Runtime's scan order (skip distance, then start,
 *     then length), which this kernel follows.  Hits are counted in the
 *     float32 output: exact up to 2^24 per coordinate.  A pool that lists
 *     one n-gram of a counted length twice is refused when the plan is
 *     built, as ONNX Runtime refuses it.
 * Plan time sorts each length's pool n-grams (state); a lookup is a binary
 * search.  The run allocates nothing and needs no workspace.
 */
#include <stdlib.h>
#include <string.h>

#include "graph/schema_text.h"
#include "ops/kernel.h"

/* One pool n-gram: where it starts in the pool, and k: it is the k-th of the pool. */
typedef struct tfidf_gram {
  int64_t off, k;
} tfidf_gram_t;

typedef struct tfidf_state {
  toplu__tfidf_attrs_t a;
  int64_t n_lengths;    /* lengths 1..n_lengths have tables: min(len(ngram_counts), max_gram_length) */
  int64_t *begin;       /* [n_lengths + 1]: grams of length n are grams[begin[n-1] .. begin[n]) */
  tfidf_gram_t *grams;  /* per length sorted by value (no two equal from min_gram_length on) */
} tfidf_state_t;

/* Lexicographic order of two n-grams of the pool. */
static int gram_cmp(const int64_t *pool, int64_t n, const tfidf_gram_t *p, const tfidf_gram_t *q) {
  for (int64_t k = 0; k < n; k++) {
    int64_t u = pool[p->off + k], v = pool[q->off + k];
    if (u != v) return u < v ? -1 : 1;
  }
  return 0;
}

/* Stable merge sort of g[0..m) by value, with tmp of m entries. */
static void gram_sort(const int64_t *pool, int64_t n, tfidf_gram_t *g, tfidf_gram_t *tmp, int64_t m) {
  for (int64_t w = 1; w < m; w *= 2) {
    for (int64_t lo = 0; lo < m; lo += 2 * w) {
      int64_t mid = lo + w < m ? lo + w : m, hi = lo + 2 * w < m ? lo + 2 * w : m, i = lo, j = mid, k = lo;
      while (i < mid && j < hi) tmp[k++] = gram_cmp(pool, n, &g[j], &g[i]) < 0 ? g[j++] : g[i++];
      while (i < mid) tmp[k++] = g[i++];
      while (j < hi) tmp[k++] = g[j++];
    }
    memcpy(g, tmp, (size_t)m * sizeof *g);
  }
}

static void release_tfidf(toplu__kernel_ctx_t *ctx) {
  tfidf_state_t *s = ctx->state;
  if (!s) return;
  toplu__kernel_free(ctx, s->begin);
  toplu__kernel_free(ctx, s->grams);
  toplu__kernel_free(ctx, s);
  ctx->state = NULL;
}

static toplu_status_t prepare_tfidf(toplu__kernel_ctx_t *ctx, toplu__kernel_info_t *info) {
  const toplu_tensor_t *x = &ctx->in[0];
  if (x->dtype != TOPLU_DTYPE_INT32 && x->dtype != TOPLU_DTYPE_INT64)
    return toplu__kernel_error(ctx, TOPLU_ERR_UNSUPPORTED, "TfIdfVectorizer on %s X is not supported",
                              toplu_dtype_name(x->dtype));
  if ((x->ndim != 1 && x->ndim != 2) || ctx->out[0].dtype != TOPLU_DTYPE_FLOAT)
    return toplu__kernel_error(ctx, TOPLU_ERR_SHAPE, "TfIdfVectorizer needs X [C] or [N, C] and a float32 Y");
  char why[256];
  toplu__tfidf_attrs_t a;
  toplu_status_t st = toplu__tfidf_attrs(ctx->node, &a, why, sizeof why);
  if (st) return toplu__kernel_error(ctx, st, "%s", why);
  if (ctx->out[0].dims[ctx->out[0].ndim - 1] != a.out_dim)
    return toplu__kernel_error(ctx, TOPLU_ERR_SHAPE, "Y's last dim is %lld; the attributes give %lld",
                              (long long)ctx->out[0].dims[ctx->out[0].ndim - 1], (long long)a.out_dim);

  tfidf_state_t *s = toplu__kernel_alloc(ctx, sizeof *s);
  if (!s) return toplu__kernel_error(ctx, TOPLU_ERR_OUT_OF_MEMORY, "out of memory for TfIdfVectorizer's state");
  memset(s, 0, sizeof *s);
  ctx->state = s;
  s->a = a;
  s->n_lengths = a.n_counts < a.max_n ? a.n_counts : a.max_n;
  size_t n_grams = 0; /* of lengths 1..n_lengths */
  for (int64_t n = 1; n <= s->n_lengths; n++) {
    int64_t end = n < a.n_counts ? a.counts[n] : a.n_pool;
    n_grams += (size_t)((end - a.counts[n - 1]) / n);
  }
  s->begin = toplu__kernel_alloc(ctx, (size_t)(s->n_lengths + 1) * sizeof *s->begin);
  s->grams = toplu__kernel_alloc(ctx, (n_grams ? n_grams : 1) * sizeof *s->grams);
  tfidf_gram_t *tmp = malloc((n_grams ? n_grams : 1) * sizeof *tmp); /* plan time only */
  if (!s->begin || !s->grams || !tmp) {
    free(tmp);
    return toplu__kernel_error(ctx, TOPLU_ERR_OUT_OF_MEMORY, "out of memory for TfIdfVectorizer's %zu n-grams",
                              n_grams);
  }
  int64_t k = 0, g = 0; /* k: n-grams of the pool so far; g: table entries */
  s->begin[0] = 0;
  for (int64_t n = 1; n <= s->n_lengths; n++) {
    int64_t start = a.counts[n - 1], end = n < a.n_counts ? a.counts[n] : a.n_pool, m = (end - start) / n;
    tfidf_gram_t *run = s->grams + g;
    for (int64_t j = 0; j < m; j++, k++, g++) {
      s->grams[g].off = start + j * n;
      s->grams[g].k = k;
    }
    gram_sort(a.pool, n, run, tmp, m);
    s->begin[n] = g;
    for (int64_t j = 1; n >= a.min_n && j < m; j++) /* lengths counted (ONNX Runtime checks those) */
      if (!gram_cmp(a.pool, n, &run[j - 1], &run[j])) {
        free(tmp);
        return toplu__kernel_error(ctx, TOPLU_ERR_INVALID_MODEL,
                                  "pool_int64s lists a %lld-gram twice (the pool's n-grams %lld and %lld, at "
                                  "pool_int64s[%lld] and pool_int64s[%lld])",
                                  (long long)n, (long long)run[j - 1].k, (long long)run[j].k,
                                  (long long)run[j - 1].off, (long long)run[j].off);
      }
  }
  free(tmp);
  info->state_bytes = sizeof *s + (size_t)(s->n_lengths + 1) * sizeof *s->begin + n_grams * sizeof *s->grams;
  return TOPLU_OK;
}

static inline int64_t x_at(const void *x, int is64, int64_t i) {
  return is64 ? ((const int64_t *)x)[i] : (int64_t)((const int32_t *)x)[i];
}

/* The pool index k of the n-gram x[i], x[i+d], ... among grams[0..m)
 * (sorted), or -1. */
static int64_t lookup(const int64_t *pool, int64_t n, const tfidf_gram_t *grams, int64_t m, const void *x, int is64,
                      int64_t i, int64_t d) {
  int64_t lo = 0, hi = m; /* the first entry >= the key lies in [lo, hi] */
  while (lo < hi) {
    int64_t mid = lo + (hi - lo) / 2, c = 0;
    for (int64_t t = 0; t < n && !c; t++) {
      int64_t u = pool[grams[mid].off + t], v = x_at(x, is64, i + t * d);
      c = u < v ? -1 : u > v;
    }
    if (c < 0) lo = mid + 1;
    else hi = mid;
  }
  if (lo == m) return -1;
  for (int64_t t = 0; t < n; t++)
    if (pool[grams[lo].off + t] != x_at(x, is64, i + t * d)) return -1;
  return grams[lo].k;
}

/* One document: its output row y.  The scan order is ONNX Runtime's (skip
 * distance, then start, then length), which decides IDF where n-grams share a
 * coordinate. */
static void tfidf_row(const tfidf_state_t *s, const void *xr, int is64, int64_t cols, float *y) {
  const toplu__tfidf_attrs_t *a = &s->a;
  memset(y, 0, (size_t)a->out_dim * sizeof *y);
  /* Skip distances past the row make no n-gram of length >= 2. */
  const int64_t max_d = a->max_skip < cols - 1 ? a->max_skip + 1 : (cols > 1 ? cols - 1 : 1);
  const float *w = a->weights;
  for (int64_t d = 1; d <= max_d; d++) {
    const int64_t lo = d == 1 || a->min_n > 1 ? a->min_n : 2; /* unigrams once, at d = 1 */
    if (lo > s->n_lengths) break;
    for (int64_t i = 0; i < cols; i++)
      for (int64_t n = lo; n <= s->n_lengths && i + (n - 1) * d < cols; n++) {
        const int64_t m = s->begin[n] - s->begin[n - 1];
        const int64_t k = m ? lookup(a->pool, n, s->grams + s->begin[n - 1], m, xr, is64, i, d) : -1;
        if (k < 0) continue;
        const int64_t c = a->indexes[k];
        if (a->mode == TOPLU_TFIDF_TF) y[c] += 1.0f;
        else if (a->mode == TOPLU_TFIDF_TFIDF) y[c] += w ? w[k] : 1.0f;
        else y[c] = w ? w[k] : 1.0f;
      }
  }
}

static toplu_status_t run_tfidf(toplu__kernel_ctx_t *ctx) {
  const tfidf_state_t *s = ctx->state;
  const toplu_tensor_t *x = &ctx->in[0];
  const int is64 = x->dtype == TOPLU_DTYPE_INT64;
  const int64_t rows = x->ndim == 2 ? x->dims[0] : 1, cols = x->dims[x->ndim - 1], out_dim = s->a.out_dim;
  const size_t es = is64 ? 8 : 4;
  float *y = ctx->out[0].data;
  if (!out_dim) return TOPLU_OK;
#pragma omp parallel for num_threads(ctx->threads) schedule(static) if (rows > 1 && rows * cols > 32768)
  for (int64_t r = 0; r < rows; r++)
    tfidf_row(s, (const unsigned char *)x->data + (size_t)(r * cols) * es, is64, cols, y + r * out_dim);
  return TOPLU_OK;
}

const toplu__kernel_t toplu__kernels_text[] = {
    {"TfIdfVectorizer", "", prepare_tfidf, run_tfidf, release_tfidf, 0, NULL, NULL, NULL},
    {NULL, NULL, NULL, NULL, NULL, 0, NULL, NULL, NULL},
};
