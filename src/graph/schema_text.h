/*
 * graph/schema_text.h - TfIdfVectorizer-9's attributes, read and checked
 * once for the schema (output shape) and the kernel (its n-gram tables);
 * StringNormalizer-10's stopword test, shared the same way.
 */
#ifndef TOPLU_GRAPH_SCHEMA_TEXT_H
#define TOPLU_GRAPH_SCHEMA_TEXT_H

#include <stddef.h>
#include <stdint.h>

#include "graph/schema.h"

typedef enum toplu__tfidf_mode { TOPLU_TFIDF_TF = 0, TOPLU_TFIDF_IDF = 1, TOPLU_TFIDF_TFIDF = 2 } toplu__tfidf_mode_t;

/* A TfIdfVectorizer node's attributes.  The arrays point into the node's
 * attributes (they live as long as the graph).  The pool holds the n-grams
 * of each length n = 1..n_counts one after another: those of length n are
 * pool[counts[n-1] .. counts[n]) (the last run ends at n_pool), n values
 * each; the k-th n-gram of the whole pool (in that order) counts into output
 * coordinate indexes[k]. */
typedef struct toplu__tfidf_attrs {
  toplu__tfidf_mode_t mode;
  int64_t min_n, max_n;   /* min_gram_length, max_gram_length: 1 <= min_n <= max_n */
  int64_t max_skip;       /* max_skip_count >= 0 */
  int64_t n_counts;       /* ngram_counts: >= 1 values, counts[0] == 0, non-decreasing */
  const int64_t *counts;
  int64_t n_pool;         /* pool_int64s */
  const int64_t *pool;
  int64_t n_indexes;      /* ngram_indexes: one per n-gram of the pool, each in [0, 2^40) */
  const int64_t *indexes;
  int64_t n_weights;      /* 0 when absent; else n_weights == n_indexes */
  const float *weights;   /* weights[k]: the k-th n-gram's, at coordinate indexes[k] (the spec; ONNX Runtime 1.30) */
  int64_t out_dim;        /* max(indexes) + 1 (0 when the pool is empty) */
} toplu__tfidf_attrs_t;

/*
 * Read and check node n's TfIdfVectorizer attributes into *a.  Returns
 * TOPLU_OK, or TOPLU_ERR_INVALID_MODEL (a required attribute missing, of the
 * wrong type or inconsistent: counts that do not split the pool into whole
 * n-grams, ngram_indexes of the wrong length or negative, an unknown mode)
 * or TOPLU_ERR_UNSUPPORTED (pool_strings: string n-grams are not supported),
 * with the reason, naming the attribute, in why (always NUL-terminated).
 * Pure function of the node; thread-safe.
 */
toplu_status_t toplu__tfidf_attrs(const toplu__node_t *n, toplu__tfidf_attrs_t *a, char *why, size_t why_size);

/*
 * 1 when w is one of StringNormalizer node n's stopwords: byte for byte
 * when is_case_sensitive is non-zero, else with both mapped to lower case
 * (toplu__utf8_equal_nocase, core/strtensor.h).  For the schema (counting
 * C') and the kernel (ops/strings.c).  Pure function; thread-safe.
 */
int toplu__string_normalizer_stop(const toplu__node_t *n, const char *w);

#endif
