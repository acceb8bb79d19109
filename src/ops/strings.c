/*
 * ops/strings.c - kernels on string tensors (arrays of char *, toplu/tensor.h;
 * ONNX operator spec, https://onnx.ai/onnx/operators/):
 *   Cast-13 / CastLike-15 to and from STRING (called by ops/elementwise.c's
 *     Cast kernel when either side is STRING):
 *     - number to string: float32, float64, float16 and bfloat16 as the
 *       shortest decimal that reads back to the same value, positional for
 *       1e-4 <= |x| < 1e16 and scientific otherwise, as numpy's str() of the
 *       element (0.9767611, 0.039187793, 1e-05, 3.4028235e+38), except that
 *       an integral value has no ".0" (100, as ONNX Runtime writes it, where
 *       numpy writes 100.0); NaN as "NaN", infinities as "INF" and "-INF" (ONNX's test
 *       data and ONNX Runtime write these; ONNX Runtime prints floats with
 *       %.8g, which gives the same text for every value whose shortest
 *       form has at most 8 digits, and loses the round trip for the others);
 *       integers in decimal;
 *     - string to number: C's strtof / strtod / strtoll / strtoull over the
 *       whole string (white space allowed before and after the number,
 *       nothing else; an integer outside the target type's range is
 *       refused, not wrapped), so "INF", "+INF", "-INF", "inf", "NaN", "1e-5" and "1E8"
 *       parse; float16 and bfloat16 through float32 (bfloat16 truncated as
 *       elementwise_cast.c does); anything else is TOPLU_ERR_INVALID_ARGUMENT
 *       naming the node, tensor, element and text.  The C library's number
 *       formats follow LC_NUMERIC, which toplu never sets: an application
 *       that sets a locale with a decimal comma gets commas;
 *     - string to string copies the pointers.
 *     bool <-> string is refused by the schema (graph/schema_elementwise.c).
 *   StringNormalizer-10: X [C] or [1, C] -> Y [C'] or [1, C']: the elements
 *     that are not stopwords (compared byte for byte, or, with
 *     is_case_sensitive 0 (the default), after mapping both to lower case),
 *     in order, then changed to upper or lower case by case_change_action
 *     (NONE, the default, leaves them); when every element is a stopword,
 *     Y is [1] (or [1, 1]) holding "" as the spec says.  Case mapping is
 *     the simple one-to-one mapping of ASCII, Latin-1, Latin Extended-A,
 *     Greek and Cyrillic letters (so Ä <-> ä, Σ <-> σ, Д <-> д), whatever
 *     locale says; other characters and bytes that are not UTF-8 pass
 *     unchanged.  C' depends on X's values, so X is a plan-time input
 *     (graph/schema_text.c): the node folds when a plan is built, and a
 *     graph input X keys the plan on its values.
 *
 * Storage.  Output pointer arrays live in the arena like any tensor.  The
 * bytes a kernel writes live in its per-exec-context pool (strpool_t, made
 * by bind(), freed by unbind()), valid until the next run on that context;
 * the plan deep-copies string outputs before it gives the context back.
 * Pools come from the plan's allocator, so its limit applies to them; the
 * planner's predicted bytes do not include them.
 *   - Cast to STRING: at most STR_SLOT bytes an element (the longest
 *     number text and its NUL fit), so bind() allocates numel * STR_SLOT
 *     once and the run allocates nothing.
 *   - StringNormalizer: the bytes depend on the strings, which are known
 *     only at run time (and only when the node did not fold): the run
 *     grows its context's pool (a new block) when the strings need more than it
 *     holds.  This is the one place a run may allocate; the pool keeps its
 *     size, so a context's later runs of no longer strings do not.
 * Cast from STRING and StringNormalizer with case_change_action NONE write
 * no bytes: their outputs point at the input's strings.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/checked.h"
#include "core/strtensor.h"
#include "ops/kernel.h"
#include "graph/schema.h"
#include "graph/schema_text.h"
#include "ops/strings.h"

/* Bytes a number's text takes at most with its NUL: "-1.2345678901234567e-308" is 24. */
#define STR_SLOT 32

typedef struct strpool {
  char *buf;
  size_t cap;
  toplu_allocator_t *alloc; /* the plan's: the pool counts against its limit */
} strpool_t;

static void pool_free(toplu__kernel_ctx_t *ctx) {
  strpool_t *p = ctx->exec_state;
  if (p) toplu_allocator_free(p->alloc, p->buf);
  free(p);
  ctx->exec_state = NULL;
}

/* A pool of cap bytes as ctx's exec state. */
static toplu_status_t pool_new(toplu__kernel_ctx_t *ctx, size_t cap) {
  strpool_t *p = calloc(1, sizeof *p);
  if (p) p->alloc = ctx->alloc;
  if (!p || (cap && !(p->buf = toplu_allocator_alloc(p->alloc, cap)))) {
    free(p);
    return toplu__kernel_error(ctx, TOPLU_ERR_OUT_OF_MEMORY, "out of memory for %zu bytes of strings", cap);
  }
  p->cap = cap;
  ctx->exec_state = p;
  return TOPLU_OK;
}

/* Room for need bytes (the old contents are not kept: a run rewrites them). */
static toplu_status_t pool_reserve(toplu__kernel_ctx_t *ctx, strpool_t *p, size_t need) {
  if (need <= p->cap) return TOPLU_OK;
  char *b = toplu_allocator_alloc(p->alloc, need);
  if (!b) return toplu__kernel_error(ctx, TOPLU_ERR_OUT_OF_MEMORY, "out of memory for %zu bytes of strings", need);
  toplu_allocator_free(p->alloc, p->buf);
  p->buf = b;
  p->cap = need;
  return TOPLU_OK;
}

/* ---- Cast ---- */

static int is_float_type(toplu_dtype_t t) {
  return t == TOPLU_DTYPE_FLOAT || t == TOPLU_DTYPE_DOUBLE || t == TOPLU_DTYPE_FLOAT16 || t == TOPLU_DTYPE_BFLOAT16;
}

static int is_int_type(toplu_dtype_t t) {
  switch (t) {
    case TOPLU_DTYPE_INT8: case TOPLU_DTYPE_INT16: case TOPLU_DTYPE_INT32: case TOPLU_DTYPE_INT64:
    case TOPLU_DTYPE_UINT8: case TOPLU_DTYPE_UINT16: case TOPLU_DTYPE_UINT32: case TOPLU_DTYPE_UINT64:
      return 1;
    default:
      return 0;
  }
}

static int is_unsigned_type(toplu_dtype_t t) {
  return t == TOPLU_DTYPE_UINT8 || t == TOPLU_DTYPE_UINT16 || t == TOPLU_DTYPE_UINT32 || t == TOPLU_DTYPE_UINT64;
}

toplu_status_t toplu__strcast_prepare(toplu__kernel_ctx_t *ctx) {
  toplu_dtype_t from = ctx->in[0].dtype, to = ctx->out[0].dtype;
  if (from == TOPLU_DTYPE_STRING && to == TOPLU_DTYPE_STRING) return TOPLU_OK;
  toplu_dtype_t other = from == TOPLU_DTYPE_STRING ? to : from;
  if (!is_float_type(other) && !is_int_type(other))
    return toplu__kernel_error(ctx, TOPLU_ERR_UNSUPPORTED, "cast from %s to %s is not supported", toplu_dtype_name(from),
                              toplu_dtype_name(to));
  return TOPLU_OK;
}

toplu_status_t toplu__strcast_bind(toplu__kernel_ctx_t *ctx) {
  if (ctx->out[0].dtype != TOPLU_DTYPE_STRING || ctx->in[0].dtype == TOPLU_DTYPE_STRING) return TOPLU_OK;
  size_t cap;
  if (!toplu__mul_size((size_t)toplu_tensor_numel(&ctx->out[0]), STR_SLOT, &cap))
    return toplu__kernel_error(ctx, TOPLU_ERR_OUT_OF_MEMORY, "too many strings");
  return pool_new(ctx, cap);
}

void toplu__strcast_unbind(toplu__kernel_ctx_t *ctx) { pool_free(ctx); }

/* Whether v read back into the tensor's type t gives the element's bits again. */
static int reads_back(toplu_dtype_t t, const char *text, double v) {
  switch (t) {
    case TOPLU_DTYPE_FLOAT: return strtof(text, NULL) == (float)v;
    case TOPLU_DTYPE_DOUBLE: return strtod(text, NULL) == v;
    case TOPLU_DTYPE_FLOAT16: return toplu_float_to_half(strtof(text, NULL)) == toplu_float_to_half((float)v);
    default: return toplu_float_to_bfloat16(strtof(text, NULL)) == toplu_float_to_bfloat16((float)v);
  }
}

/* The shortest text of v that reads back to v in type t, numpy's way: the
 * fewest significant digits (at most 17, which any double needs) whose
 * decimal rounds back, written positionally when 1e-4 <= |v| < 1e16
 * ("0.039187793", "123456.7", "100", "-0") and in C's %e form otherwise
 * ("1e-05", "3.4028235e+38"), without a trailing ".0".  At most 25 bytes
 * with the NUL.  Checked against numpy's str() (float32) and Python's
 * repr() (float64) on 6,000 random values: the same text but for the ".0". */
static void format_float(toplu_dtype_t t, double v, char *out) {
  if (v != v) {
    strcpy(out, "NaN");
    return;
  }
  if (v > 1.7976931348623157e308 || v < -1.7976931348623157e308) {
    strcpy(out, v > 0 ? "INF" : "-INF");
    return;
  }
  char e[STR_SLOT];
  int max_p = t == TOPLU_DTYPE_DOUBLE ? 17 : 9;
  for (int p = 1; p <= max_p; p++) {
    snprintf(e, sizeof e, "%.*e", p - 1, v);
    if (reads_back(t, e, v)) break;
  }
  /* e is [-]D[.DDD]e(+|-)XX: split into sign, digits and exponent */
  const char *q = e;
  int neg = *q == '-';
  if (neg) q++;
  char digits[24];
  int nd = 0;
  for (; *q && *q != 'e'; q++)
    if (*q >= '0' && *q <= '9' && nd < (int)sizeof digits - 1) digits[nd++] = *q;
  int exp10 = *q == 'e' ? atoi(q + 1) : 0;
  while (nd > 1 && digits[nd - 1] == '0') nd--;
  digits[nd] = '\0';
  char *o = out;
  if (neg) *o++ = '-';
  double av = v < 0 ? -v : v; /* numpy decides by the value: float32 1e-4 is below 1e-4, so "1e-04" */
  if (av != 0 && (av < 1e-4 || av >= 1e16)) {
    *o++ = digits[0];
    if (nd > 1) {
      *o++ = '.';
      memcpy(o, digits + 1, (size_t)nd - 1);
      o += nd - 1;
    }
    int ax = exp10 < 0 ? -exp10 : exp10; /* at most 324: two or three digits, as %e writes them */
    *o++ = 'e';
    *o++ = exp10 < 0 ? '-' : '+';
    if (ax >= 100) *o++ = (char)('0' + ax / 100);
    *o++ = (char)('0' + ax / 10 % 10);
    *o++ = (char)('0' + ax % 10);
    *o = '\0';
    return;
  }
  if (exp10 < 0) {
    *o++ = '0';
    *o++ = '.';
    for (int z = 0; z < -exp10 - 1; z++) *o++ = '0';
    memcpy(o, digits, (size_t)nd);
    o += nd;
  } else {
    for (int k = 0; k < nd || k <= exp10; k++) {
      if (k == exp10 + 1) *o++ = '.';
      *o++ = k < nd ? digits[k] : '0';
    }
  }
  *o = '\0';
}

static toplu_status_t bad_text(toplu__kernel_ctx_t *ctx, int64_t k, const char *s) {
  const toplu__node_t *n = ctx->node;
  const char *name = n && n->n_inputs > 0 && n->inputs[0] >= 0 ? ctx->graph->values[n->inputs[0]].name : "?";
  return toplu__kernel_error(ctx, TOPLU_ERR_INVALID_ARGUMENT, "input '%s' element %lld \"%.60s%s\" is not a number of type %s",
                            name, (long long)k, s, strlen(s) > 60 ? "..." : "", toplu_dtype_name(ctx->out[0].dtype));
}

static int is_space(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v'; }

/* The number ended at end: only white space may follow it. */
static int tail_ok(const char *s, const char *end) {
  if (end == s) return 0;
  while (is_space(*end)) end++;
  return !*end;
}

/* Parse element k (text s) into element k of y (type t). */
static toplu_status_t parse_one(toplu__kernel_ctx_t *ctx, toplu_dtype_t t, const char *s, void *y, int64_t k) {
  char *end = NULL;
  errno = 0;
  if (is_float_type(t)) {
    if (t == TOPLU_DTYPE_DOUBLE) {
      double v = strtod(s, &end);
      if (!tail_ok(s, end)) return bad_text(ctx, k, s);
      ((double *)y)[k] = v;
    } else {
      float v = strtof(s, &end);
      if (!tail_ok(s, end)) return bad_text(ctx, k, s);
      if (t == TOPLU_DTYPE_FLOAT) ((float *)y)[k] = v;
      else if (t == TOPLU_DTYPE_FLOAT16) ((uint16_t *)y)[k] = toplu_float_to_half(v);
      else { /* bfloat16 truncated, as ops/elementwise_cast.c */
        uint32_t b;
        memcpy(&b, &v, 4);
        ((uint16_t *)y)[k] = (b & 0x7fffffffu) > 0x7f800000u ? (uint16_t)((b >> 16) | 0x40) : (uint16_t)(b >> 16);
      }
    }
    return TOPLU_OK;
  }
  if (is_unsigned_type(t)) {
    const char *q = s;
    while (is_space(*q)) q++;
    unsigned long long v = strtoull(s, &end, 10);
    unsigned long long max = t == TOPLU_DTYPE_UINT8 ? UINT8_MAX : t == TOPLU_DTYPE_UINT16 ? UINT16_MAX
                             : t == TOPLU_DTYPE_UINT32 ? UINT32_MAX : UINT64_MAX;
    if (*q == '-' || !tail_ok(s, end) || errno == ERANGE || v > max) return bad_text(ctx, k, s);
    switch (t) {
      case TOPLU_DTYPE_UINT8: ((uint8_t *)y)[k] = (uint8_t)v; break;
      case TOPLU_DTYPE_UINT16: ((uint16_t *)y)[k] = (uint16_t)v; break;
      case TOPLU_DTYPE_UINT32: ((uint32_t *)y)[k] = (uint32_t)v; break;
      default: ((uint64_t *)y)[k] = (uint64_t)v; break;
    }
    return TOPLU_OK;
  }
  long long v = strtoll(s, &end, 10);
  long long lo = t == TOPLU_DTYPE_INT8 ? INT8_MIN : t == TOPLU_DTYPE_INT16 ? INT16_MIN : t == TOPLU_DTYPE_INT32 ? INT32_MIN
                                                                                                   : INT64_MIN;
  long long hi = t == TOPLU_DTYPE_INT8 ? INT8_MAX : t == TOPLU_DTYPE_INT16 ? INT16_MAX : t == TOPLU_DTYPE_INT32 ? INT32_MAX
                                                                                                   : INT64_MAX;
  if (!tail_ok(s, end) || errno == ERANGE || v < lo || v > hi) return bad_text(ctx, k, s);
  switch (t) { /* in range: exact */
    case TOPLU_DTYPE_INT8: ((int8_t *)y)[k] = (int8_t)v; break;
    case TOPLU_DTYPE_INT16: ((int16_t *)y)[k] = (int16_t)v; break;
    case TOPLU_DTYPE_INT32: ((int32_t *)y)[k] = (int32_t)v; break;
    default: ((int64_t *)y)[k] = (int64_t)v; break;
  }
  return TOPLU_OK;
}

toplu_status_t toplu__strcast_run(toplu__kernel_ctx_t *ctx) {
  const toplu_tensor_t *x = &ctx->in[0];
  toplu_tensor_t *y = &ctx->out[0];
  int64_t n = toplu_tensor_numel(y);
  if (x->dtype == TOPLU_DTYPE_STRING && y->dtype == TOPLU_DTYPE_STRING) {
    if (n && x->data != y->data) memmove(y->data, x->data, (size_t)n * sizeof(char *));
    return TOPLU_OK;
  }
  if (x->dtype == TOPLU_DTYPE_STRING) { /* element k is read before element k is written: in place is safe */
    for (int64_t k = 0; k < n; k++) {
      toplu_status_t st = parse_one(ctx, y->dtype, toplu__str_at(x->data, k), y->data, k);
      if (st) return st;
    }
    return TOPLU_OK;
  }
  strpool_t *p = ctx->exec_state;
  if (!p || p->cap < (size_t)n * STR_SLOT)
    return toplu__kernel_error(ctx, TOPLU_ERR_INTERNAL, "the string pool was not bound");
  char **out = y->data;
  for (int64_t k = 0; k < n; k++) {
    char *s = p->buf + (size_t)k * STR_SLOT;
    if (is_float_type(x->dtype)) {
      format_float(x->dtype, toplu__tensor_get_double(x, k), s);
    } else if (is_unsigned_type(x->dtype)) { /* uint64 comes back with its bits through int64 */
      snprintf(s, STR_SLOT, "%llu", (unsigned long long)(uint64_t)toplu__tensor_get_int(x, k));
    } else {
      snprintf(s, STR_SLOT, "%lld", (long long)toplu__tensor_get_int(x, k));
    }
    out[k] = s; /* after the element was read: in place (int64 or double -> string) is safe */
  }
  return TOPLU_OK;
}

/* ---- StringNormalizer ---- */

typedef struct sn_state {
  int action; /* 0 none, 1 lower, 2 upper */
} sn_state_t;

static toplu_status_t sn_prepare(toplu__kernel_ctx_t *ctx, toplu__kernel_info_t *info) {
  if (ctx->in[0].dtype != TOPLU_DTYPE_STRING || ctx->out[0].dtype != TOPLU_DTYPE_STRING)
    return toplu__kernel_error(ctx, TOPLU_ERR_UNSUPPORTED, "X and Y must be string tensors");
  sn_state_t *s = toplu__kernel_alloc(ctx, sizeof *s);
  if (!s) return toplu__kernel_error(ctx, TOPLU_ERR_OUT_OF_MEMORY, "out of memory");
  memset(s, 0, sizeof *s);
  const char *action = toplu__node_attr_string(ctx->node, "case_change_action", "NONE");
  s->action = !strcmp(action, "LOWER") ? 1 : !strcmp(action, "UPPER") ? 2 : 0;
  ctx->state = s;
  info->state_bytes = sizeof *s;
  return TOPLU_OK;
}

static void sn_release(toplu__kernel_ctx_t *ctx) {
  toplu__kernel_free(ctx, ctx->state);
  ctx->state = NULL;
}

static toplu_status_t sn_bind(toplu__kernel_ctx_t *ctx) { return pool_new(ctx, 0); }

static int is_stopword(const toplu__kernel_ctx_t *ctx, const char *w) {
  return toplu__string_normalizer_stop(ctx->node, w);
}

static toplu_status_t sn_run(toplu__kernel_ctx_t *ctx) {
  const sn_state_t *s = ctx->state;
  strpool_t *p = ctx->exec_state;
  const toplu_tensor_t *x = &ctx->in[0];
  int64_t n = toplu_tensor_numel(x), m = toplu_tensor_numel(&ctx->out[0]), kept = 0;
  size_t need = 0;
  for (int64_t k = 0; k < n; k++) {
    const char *w = toplu__str_at(x->data, k);
    if (is_stopword(ctx, w)) continue;
    kept++;
    need += strlen(w) + 1;
  }
  if (kept != (m == 1 && kept == 0 ? 0 : m))
    return toplu__kernel_error(ctx, TOPLU_ERR_INTERNAL, "%lld strings kept, the plan made room for %lld",
                              (long long)kept, (long long)m);
  char **out = ctx->out[0].data;
  if (!kept) {
    out[0] = (char *)"";
    return TOPLU_OK;
  }
  if (s->action) { /* data-dependent: grow this context's pool (see the top) */
    toplu_status_t st = pool_reserve(ctx, p, need);
    if (st) return st;
  }
  size_t at = 0;
  int64_t j = 0;
  for (int64_t k = 0; k < n; k++) {
    const char *w = toplu__str_at(x->data, k);
    if (is_stopword(ctx, w)) continue;
    if (!s->action) {
      out[j++] = (char *)w;
      continue;
    }
    out[j++] = p->buf + at;
    at += toplu__utf8_map_case(w, s->action == 1 ? toplu__unicode_lower : toplu__unicode_upper, p->buf + at);
  }
  return TOPLU_OK;
}

const toplu__kernel_t toplu__kernels_strings[] = {
    {.op_type = "StringNormalizer", .domain = "", .prepare = sn_prepare, .run = sn_run, .release = sn_release,
     .bind = sn_bind, .unbind = pool_free},
    {.op_type = NULL},
};
