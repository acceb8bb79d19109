/*
 * graph/schema_text.c - schemas of the text ops (ONNX operator spec,
 * https://onnx.ai/onnx/operators/):
 *   TfIdfVectorizer-9: X int32 or int64, [C] or [N, C] -> Y float32,
 *     [max(ngram_indexes) + 1] or [N, max(ngram_indexes) + 1].
 *   StringNormalizer-10: X string [C] or [1, C] -> Y string [C'] or [1, C'],
 *     C' the elements that are not stopwords ([1] or [1, 1] holding "" when
 *     none is left).  C' depends on X's strings, so X is a plan-time input
 *     (const_inputs, as NonZero's data: graph/schema_index.c): the node
 *     folds when a plan is built, and a graph input X keys the plan on its
 *     strings; at load C' is a fresh symbol.
 * TfIdfVectorizer's string inputs (pool_strings) are refused.
 * Kernels: ops/text.c, ops/strings.c (StringNormalizer).
 */
#include <stdio.h>
#include <string.h>

#include "core/strtensor.h"
#include "graph/infer.h"
#include "graph/schema.h"
#include "graph/schema_text.h"

/* A required attribute of the given type; NULL with a message otherwise. */
static const toplu__attr_t *need_attr(const toplu__node_t *n, const char *name, toplu__attr_type_t type,
                                      const char *type_name, char *why, size_t why_size) {
  const toplu__attr_t *a = toplu__node_attr(n, name);
  if (!a) snprintf(why, why_size, "the required attribute '%s' is missing", name);
  else if (a->type != type) snprintf(why, why_size, "attribute '%s' must be %s", name, type_name), a = NULL;
  return a;
}

toplu_status_t toplu__tfidf_attrs(const toplu__node_t *n, toplu__tfidf_attrs_t *a, char *why, size_t why_size) {
  memset(a, 0, sizeof *a);
  if (why_size) why[0] = '\0';
  const toplu__attr_t *mode, *minl, *maxl, *skip, *counts, *idx, *pool, *w;
  if (!(mode = need_attr(n, "mode", TOPLU_ATTR_STRING, "a string", why, why_size)) ||
      !(minl = need_attr(n, "min_gram_length", TOPLU_ATTR_INT, "an int", why, why_size)) ||
      !(maxl = need_attr(n, "max_gram_length", TOPLU_ATTR_INT, "an int", why, why_size)) ||
      !(skip = need_attr(n, "max_skip_count", TOPLU_ATTR_INT, "an int", why, why_size)) ||
      !(counts = need_attr(n, "ngram_counts", TOPLU_ATTR_INTS, "a list of ints", why, why_size)) ||
      !(idx = need_attr(n, "ngram_indexes", TOPLU_ATTR_INTS, "a list of ints", why, why_size)))
    return TOPLU_ERR_INVALID_MODEL;

  if (!strcmp(mode->s, "TF")) a->mode = TOPLU_TFIDF_TF;
  else if (!strcmp(mode->s, "IDF")) a->mode = TOPLU_TFIDF_IDF;
  else if (!strcmp(mode->s, "TFIDF")) a->mode = TOPLU_TFIDF_TFIDF;
  else {
    snprintf(why, why_size, "mode '%.40s' is not TF, IDF or TFIDF", mode->s);
    return TOPLU_ERR_INVALID_MODEL;
  }
  a->min_n = minl->i;
  a->max_n = maxl->i;
  a->max_skip = skip->i;
  if (a->min_n < 1 || a->max_n < a->min_n) {
    snprintf(why, why_size, "min_gram_length %lld and max_gram_length %lld: need 1 <= min <= max", (long long)a->min_n,
             (long long)a->max_n);
    return TOPLU_ERR_INVALID_MODEL;
  }
  if (a->max_skip < 0) {
    snprintf(why, why_size, "max_skip_count %lld is negative", (long long)a->max_skip);
    return TOPLU_ERR_INVALID_MODEL;
  }

  if (toplu__node_attr(n, "pool_strings")) {
    snprintf(why, why_size, "pool_strings (string n-grams) is not supported");
    return TOPLU_ERR_UNSUPPORTED;
  }
  if (!(pool = need_attr(n, "pool_int64s", TOPLU_ATTR_INTS, "a list of ints", why, why_size)))
    return TOPLU_ERR_INVALID_MODEL;
  a->n_pool = pool->n;
  a->pool = pool->ints;
  a->n_counts = counts->n;
  a->counts = counts->ints;
  if (a->n_counts < 1 || a->counts[0] != 0) {
    snprintf(why, why_size, "ngram_counts must start with 0 (where the 1-grams begin in the pool)");
    return TOPLU_ERR_INVALID_MODEL;
  }
  /* Each run of n-grams of length len must hold whole n-grams. */
  int64_t total = 0;
  for (int64_t k = 0; k < a->n_counts; k++) {
    int64_t begin = a->counts[k], end = k + 1 < a->n_counts ? a->counts[k + 1] : a->n_pool, len = k + 1;
    if (begin < 0 || end < begin || end > a->n_pool) {
      snprintf(why, why_size, "ngram_counts[%lld] = %lld is out of order or past the pool's %lld values",
               (long long)(k + 1 < a->n_counts ? k + 1 : k), (long long)(k + 1 < a->n_counts ? end : begin),
               (long long)a->n_pool);
      return TOPLU_ERR_INVALID_MODEL;
    }
    if ((end - begin) % len) {
      snprintf(why, why_size, "the %lld-grams take %lld pool values, not a multiple of %lld", (long long)len,
               (long long)(end - begin), (long long)len);
      return TOPLU_ERR_INVALID_MODEL;
    }
    total += (end - begin) / len;
  }
  a->n_indexes = idx->n;
  a->indexes = idx->ints;
  if (a->n_indexes != total) {
    snprintf(why, why_size, "ngram_indexes has %lld values for %lld n-grams in the pool", (long long)a->n_indexes,
             (long long)total);
    return TOPLU_ERR_INVALID_MODEL;
  }
  a->out_dim = 0;
  for (int64_t k = 0; k < a->n_indexes; k++) {
    if (a->indexes[k] < 0 || (uint64_t)a->indexes[k] >= TOPLU_MAX_ELEMENTS) {
      snprintf(why, why_size, "ngram_indexes[%lld] = %lld is outside [0, " TOPLU_MAX_ELEMENTS_TEXT ")", (long long)k,
               (long long)a->indexes[k]);
      return TOPLU_ERR_INVALID_MODEL;
    }
    if (a->indexes[k] + 1 > a->out_dim) a->out_dim = a->indexes[k] + 1;
  }
  if ((w = toplu__node_attr(n, "weights"))) {
    if (w->type != TOPLU_ATTR_FLOATS) {
      snprintf(why, why_size, "attribute 'weights' must be a list of floats");
      return TOPLU_ERR_INVALID_MODEL;
    }
    a->n_weights = w->n;
    a->weights = w->floats;
    if (a->n_weights != a->n_indexes) {
      snprintf(why, why_size, "weights has %lld values; expected one per n-gram of the pool (%lld)",
               (long long)a->n_weights, (long long)a->n_indexes);
      return TOPLU_ERR_INVALID_MODEL;
    }
  }
  return TOPLU_OK;
}

static toplu_status_t infer_tfidf(toplu__infer_ctx_t *ctx) {
  const toplu_tensor_t *x = &ctx->in[0];
  char why[256];
  toplu__tfidf_attrs_t a;
  toplu_status_t st = toplu__tfidf_attrs(ctx->node, &a, why, sizeof why);
  if (st) return toplu__infer_error(ctx, st, "%s", why);
  if (x->dtype != TOPLU_DTYPE_INT32 && x->dtype != TOPLU_DTYPE_INT64)
    return toplu__infer_error(ctx, x->dtype == TOPLU_DTYPE_STRING ? TOPLU_ERR_UNSUPPORTED : TOPLU_ERR_INVALID_MODEL,
                             "X is %s; TfIdfVectorizer takes int32 or int64 (strings are not supported)",
                             toplu_dtype_name(x->dtype));
  if (x->ndim != 1 && x->ndim != 2)
    return toplu__infer_error(ctx, TOPLU_ERR_SHAPE, "X has rank %d; TfIdfVectorizer takes [C] or [N, C]", x->ndim);
  int64_t dims[2];
  if (x->ndim == 1) dims[0] = a.out_dim;
  else dims[0] = x->dims[0], dims[1] = a.out_dim;
  toplu__infer_set(ctx, 0, TOPLU_DTYPE_FLOAT, x->ndim, dims);
  return TOPLU_OK;
}

/* A 1-D X is one document: dim 0 is not a batch. */
static int rows_tfidf(const toplu__node_t *n, const void *tv) {
  const toplu__value_table_t *t = tv;
  return n->n_inputs < 1 || n->inputs[0] < 0 || t->vals[n->inputs[0]].ndim != 2;
}

/* One lookup (about log2 of the pool's n-grams compares) per n-gram start,
 * length and skip. */
static int64_t flops_tfidf(const toplu__infer_ctx_t *ctx) {
  toplu__tfidf_attrs_t a;
  char why[8];
  if (toplu__tfidf_attrs(ctx->node, &a, why, sizeof why)) return 0;
  int64_t x = toplu_tensor_numel(&ctx->in[0]), lengths = a.max_n - a.min_n + 1, l = 1;
  while ((int64_t)1 << l < a.n_indexes && l < 62) l++;
  int64_t skips = a.max_skip < 64 ? a.max_skip + 1 : 64;
  if (lengths > 64) lengths = 64;
  if (x > INT64_MAX / (lengths * skips * l)) return INT64_MAX;
  return x * lengths * skips * l;
}

/* ---- StringNormalizer ---- */

int toplu__string_normalizer_stop(const toplu__node_t *n, const char *w) {
  const toplu__attr_t *a = toplu__node_attr(n, "stopwords");
  if (!a || a->type != TOPLU_ATTR_STRINGS) return 0;
  int sensitive = toplu__node_attr_int(n, "is_case_sensitive", 0) != 0;
  for (int64_t i = 0; i < a->n; i++)
    if (sensitive ? !strcmp(a->strings[i], w) : toplu__utf8_equal_nocase(a->strings[i], w)) return 1;
  return 0;
}

static toplu_status_t infer_string_normalizer(toplu__infer_ctx_t *ctx) {
  const toplu__node_t *n = ctx->node;
  const toplu_tensor_t *x = &ctx->in[0];
  const toplu__attr_t *a;
  if ((a = toplu__node_attr(n, "case_change_action"))) {
    if (a->type != TOPLU_ATTR_STRING || (strcmp(a->s, "LOWER") && strcmp(a->s, "UPPER") && strcmp(a->s, "NONE")))
      return toplu__infer_error(ctx, TOPLU_ERR_INVALID_MODEL, "case_change_action must be LOWER, UPPER or NONE");
  }
  if ((a = toplu__node_attr(n, "is_case_sensitive")) && a->type != TOPLU_ATTR_INT)
    return toplu__infer_error(ctx, TOPLU_ERR_INVALID_MODEL, "is_case_sensitive must be an int");
  if ((a = toplu__node_attr(n, "stopwords")) && a->type != TOPLU_ATTR_STRINGS)
    return toplu__infer_error(ctx, TOPLU_ERR_INVALID_MODEL, "stopwords must be a list of strings");
  if ((a = toplu__node_attr(n, "locale")) && a->type != TOPLU_ATTR_STRING)
    return toplu__infer_error(ctx, TOPLU_ERR_INVALID_MODEL, "locale must be a string");
  if (x->dtype != TOPLU_DTYPE_STRING)
    return toplu__infer_error(ctx, TOPLU_ERR_INVALID_MODEL, "X '%s' is %s; StringNormalizer takes strings",
                             ctx->graph->values[n->inputs[0]].name, toplu_dtype_name(x->dtype));
  if (x->ndim != 1 && !(x->ndim == 2 && (x->dims[0] == 1 || x->dims[0] < 0)))
    return toplu__infer_error(ctx, TOPLU_ERR_SHAPE, "X '%s' must be [C] or [1, C]", ctx->graph->values[n->inputs[0]].name);
  if (x->ndim == 2 && ctx->concrete && x->dims[0] != 1)
    return toplu__infer_error(ctx, TOPLU_ERR_SHAPE, "X '%s' must be [C] or [1, C], not [%lld, C]",
                             ctx->graph->values[n->inputs[0]].name, (long long)x->dims[0]);
  int64_t kept;
  if (x->data) {
    int64_t count = toplu_tensor_numel(x);
    kept = 0;
    for (int64_t k = 0; k < count; k++) kept += !toplu__string_normalizer_stop(n, toplu__str_at(x->data, k));
    if (!kept) kept = 1; /* the spec: an empty result is one "" */
  } else {
    kept = toplu__infer_new_dim(ctx);
  }
  int64_t dims[2] = {1, kept};
  toplu__infer_set(ctx, 0, TOPLU_DTYPE_STRING, x->ndim, x->ndim == 1 ? &kept : dims);
  return TOPLU_OK;
}

static int rows_string_normalizer(const toplu__node_t *n, const void *t) {
  (void)n, (void)t;
  return 1;
}

const toplu__schema_t toplu__schemas_text[] = {
    {"TfIdfVectorizer", "", 9, 1, 1, 1, 1, 0, infer_tfidf, flops_tfidf, rows_tfidf},
    {"StringNormalizer", "", 10, 1, 1, 1, 1, 1u << 0, infer_string_normalizer, NULL, rows_string_normalizer},
    {NULL, NULL, 0, 0, 0, 0, 0, 0, NULL, NULL, NULL},
};
