/*
 * serve/protocol.c - the KServe v2 inference request and response bodies
 * (serve/protocol.h).  Requests are parsed with one jansson pass over the
 * JSON header; binary tensor data is validated in place and pointed at, never
 * copied.  Responses are written by hand into a pl_buf_t.
 */
#include "serve/protocol.h"

#include <errno.h>
#include <jansson.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/checked.h"

/* ------------------------------------------------------------------ datatypes */

static const struct {
  toplu_dtype_t dtype;
  const char *name;
} k_datatypes[] = {
    {TOPLU_DTYPE_BOOL, "BOOL"},     {TOPLU_DTYPE_UINT8, "UINT8"},     {TOPLU_DTYPE_UINT16, "UINT16"},
    {TOPLU_DTYPE_UINT32, "UINT32"}, {TOPLU_DTYPE_UINT64, "UINT64"},   {TOPLU_DTYPE_INT8, "INT8"},
    {TOPLU_DTYPE_INT16, "INT16"},   {TOPLU_DTYPE_INT32, "INT32"},     {TOPLU_DTYPE_INT64, "INT64"},
    {TOPLU_DTYPE_FLOAT16, "FP16"},  {TOPLU_DTYPE_FLOAT, "FP32"},      {TOPLU_DTYPE_DOUBLE, "FP64"},
    {TOPLU_DTYPE_STRING, "BYTES"},  {TOPLU_DTYPE_BFLOAT16, "BF16"},
};

const char *srv_datatype_name(toplu_dtype_t dtype) {
  for (size_t i = 0; i < sizeof k_datatypes / sizeof k_datatypes[0]; i++)
    if (k_datatypes[i].dtype == dtype) return k_datatypes[i].name;
  return NULL;
}

toplu_dtype_t srv_datatype_from_name(const char *name) {
  if (!name) return TOPLU_DTYPE_UNDEFINED;
  for (size_t i = 0; i < sizeof k_datatypes / sizeof k_datatypes[0]; i++)
    if (!strcmp(k_datatypes[i].name, name)) return k_datatypes[i].dtype;
  return TOPLU_DTYPE_UNDEFINED;
}

/* ------------------------------------------------------------------ helpers */

static int fail(char *err, size_t size, const char *fmt, ...) TOPLU_PRINTF(3, 4);
static int fail(char *err, size_t size, const char *fmt, ...) {
  if (err && size) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err, size, fmt, ap);
    va_end(ap);
  }
  return 400;
}

static const char *json_kind(const json_t *v) {
  switch (json_typeof(v)) {
    case JSON_OBJECT: return "an object";
    case JSON_ARRAY: return "an array";
    case JSON_STRING: return "a string";
    case JSON_INTEGER: return "an integer";
    case JSON_REAL: return "a number";
    case JSON_TRUE: return "true";
    case JSON_FALSE: return "false";
    default: return "null";
  }
}

/* v in its shortest round-tripping form (pl_buf_double) into buf. */
static const char *fmt_double(double v, char *buf, size_t size) {
  pl_buf_t b = {0};
  pl_buf_double(&b, v);
  pl_buf_putc(&b, 0);
  snprintf(buf, size, "%s", b.oom ? "?" : b.data);
  pl_buf_free(&b);
  return buf;
}

/* json_kind, naming an integer literal beyond int64 (quoted for jansson: see quote_big_ints) as what it is. */
static const char *big_int_digits(const json_t *v, int big_ints);
static const char *value_kind(const json_t *v, int big_ints) {
  if (big_int_digits(v, big_ints)) return "an integer beyond int64";
  if (json_is_integer(v)) { /* a negative one, in the messages that want a non-negative one: say which */
    static _Thread_local char text[32];
    snprintf(text, sizeof text, "%lld", (long long)json_integer_value(v));
    return text;
  }
  return json_kind(v);
}

/* A non-negative JSON integer into *out; 0, or -1 when v is not one. */
static int get_uint(const json_t *v, int64_t *out) {
  if (!json_is_integer(v) || json_integer_value(v) < 0) return -1;
  *out = (int64_t)json_integer_value(v);
  return 0;
}

static size_t align_up(size_t n) { return (n + 63) & ~(size_t)63; }

/* The model's input (outputs 0) or output (1) names as "'a', 'b'", for messages. */
static void list_names(const toplu_model_t *m, int outputs, char *buf, size_t size) {
  size_t used = 0;
  buf[0] = 0;
  int n = outputs ? toplu_model_output_count(m) : toplu_model_input_count(m);
  for (int i = 0; i < n && used + 1 < size; i++) {
    const toplu_value_info_t *v = outputs ? toplu_model_output(m, i) : toplu_model_input(m, i);
    int w = snprintf(buf + used, size - used, "%s'%s'", i ? ", " : "", v->name);
    if (w < 0) break;
    used += (size_t)w;
  }
}

/* The model input (outputs 0) or output (1) named name, for inputs[k] / outputs[k]: 0 and *index, or 400. */
static int find_name(const toplu_model_t *m, int outputs, int k, const char *name, int *index, char *err,
                     size_t esize) {
  *index = outputs ? toplu_model_output_index(m, name) : toplu_model_input_index(m, name);
  if (*index >= 0) return 0;
  char names[512];
  list_names(m, outputs, names, sizeof names);
  const char *what = outputs ? "output" : "input";
  return fail(err, esize, "%ss[%d]: the model has no %s '%s' (its %ss: %s)", what, k, what, name, what, names);
}

/* ------------------------------------------------- integers beyond int64 in JSON */

/*
 * jansson refuses an integer literal outside int64 ("too big integer"), and
 * reading every number as a double (JSON_DECODE_INT_AS_REAL) would lose the
 * low digits of int64 values.  So only when jansson reports a numeric
 * overflow, the header is copied with every integer literal outside int64
 * (outside strings) turned into the string BIG_MARK followed by its digits,
 * and parsed again; the data reader takes such strings as those integers
 * (exact for UINT64, as a double for FP16/FP32/FP64, out of range for the
 * other types).  A client string that happens to start with BIG_MARK, in a
 * request that also holds such a literal, reads as that number too:
 * harmless, it is one.
 */
#define BIG_MARK "toplu-big-int:"
#define BIG_MARK_LEN 14

/* 1 when s[0..n) is an integer literal ("-"? digits) outside int64. */
static int int_literal_beyond_i64(const char *s, size_t n) {
  size_t k = s[0] == '-';
  if (k == n) return 0;
  for (size_t j = k; j < n; j++)
    if (s[j] < '0' || s[j] > '9') return 0;
  if (n > 40) return 1;
  char tmp[48];
  memcpy(tmp, s, n);
  tmp[n] = 0;
  errno = 0;
  (void)strtoll(tmp, NULL, 10);
  return errno == ERANGE;
}

/* The header with big integer literals quoted (see above); NULL when out of memory, *n_big their count. */
static char *quote_big_ints(const char *s, size_t n, size_t *out_len, int *n_big) {
  pl_buf_t b = {0};
  *n_big = 0;
  size_t i = 0, from = 0;
  while (i < n) {
    char c = s[i];
    if (c == '"') { /* skip a string */
      for (i++; i < n && s[i] != '"'; i++)
        if (s[i] == '\\') i++;
      i++;
      continue;
    }
    if (c == '-' || (c >= '0' && c <= '9')) {
      size_t j = i;
      while (j < n && (s[j] == '-' || s[j] == '+' || s[j] == '.' || s[j] == 'e' || s[j] == 'E' ||
                       (s[j] >= '0' && s[j] <= '9')))
        j++;
      if (int_literal_beyond_i64(s + i, j - i)) {
        pl_buf_append(&b, s + from, i - from);
        pl_buf_puts(&b, "\"" BIG_MARK);
        pl_buf_append(&b, s + i, j - i);
        pl_buf_putc(&b, '"');
        from = j;
        (*n_big)++;
      }
      i = j;
      continue;
    }
    i++;
  }
  pl_buf_append(&b, s + from, n - from);
  if (b.oom) {
    pl_buf_free(&b);
    return NULL;
  }
  *out_len = b.len;
  return b.data;
}

/* The digits of a quoted big integer, or NULL when v is not one. */
static const char *big_int_digits(const json_t *v, int big_ints) {
  if (!big_ints || !json_is_string(v) || json_string_length(v) <= BIG_MARK_LEN) return NULL;
  const char *s = json_string_value(v);
  if (memcmp(s, BIG_MARK, BIG_MARK_LEN)) return NULL;
  return s + BIG_MARK_LEN;
}

/* ------------------------------------------------------------------ values */

/* double -> IEEE half, rounded to nearest even, without the double rounding
 * of double -> float -> half: the float is rounded to odd (truncated, its
 * last bit set when inexact), which keeps the half's rounding exact since
 * float has more than 11 + 2 bits of significand. */
static uint16_t double_to_half(double d) {
  float f = (float)d;
  if (isfinite(d) && isfinite(f) && (double)f != d) {
    if (fabs((double)f) > fabs(d)) f = nextafterf(f, 0.0f);
    uint32_t bits;
    memcpy(&bits, &f, 4);
    bits |= 1;
    memcpy(&f, &bits, 4);
  }
  return toplu_float_to_half(f);
}

/* The range of an integer dtype: [lo, hi] (hi as unsigned); 0 for other dtypes. */
static int int_range(toplu_dtype_t dt, int64_t *lo, uint64_t *hi) {
  switch (dt) {
    case TOPLU_DTYPE_INT8: *lo = INT8_MIN, *hi = INT8_MAX; return 1;
    case TOPLU_DTYPE_INT16: *lo = INT16_MIN, *hi = INT16_MAX; return 1;
    case TOPLU_DTYPE_INT32: *lo = INT32_MIN, *hi = INT32_MAX; return 1;
    case TOPLU_DTYPE_INT64: *lo = INT64_MIN, *hi = INT64_MAX; return 1;
    case TOPLU_DTYPE_UINT8: *lo = 0, *hi = UINT8_MAX; return 1;
    case TOPLU_DTYPE_UINT16: *lo = 0, *hi = UINT16_MAX; return 1;
    case TOPLU_DTYPE_UINT32: *lo = 0, *hi = UINT32_MAX; return 1;
    case TOPLU_DTYPE_UINT64: *lo = 0, *hi = UINT64_MAX; return 1;
    default: return 0;
  }
}

static void store_int(toplu_dtype_t dt, void *dst, int64_t i, uint64_t bits) {
  switch (dt) {
    case TOPLU_DTYPE_INT8: case TOPLU_DTYPE_UINT8: ((uint8_t *)dst)[i] = (uint8_t)bits; break;
    case TOPLU_DTYPE_INT16: case TOPLU_DTYPE_UINT16: ((uint16_t *)dst)[i] = (uint16_t)bits; break;
    case TOPLU_DTYPE_INT32: case TOPLU_DTYPE_UINT32: ((uint32_t *)dst)[i] = (uint32_t)bits; break;
    default: ((uint64_t *)dst)[i] = bits; break;
  }
}

/* JSON value v into element i of dst (of dtype dt); 0, or -1 with why set. */
static int put_elem(const json_t *v, toplu_dtype_t dt, void *dst, int64_t i, int big_ints, char *why, size_t n) {
  const char *dtn = srv_datatype_name(dt);
  char num[40];
  if (dt == TOPLU_DTYPE_BOOL) {
    if (!json_is_boolean(v)) {
      snprintf(why, n, "element %lld is %s, %s takes true or false", (long long)i, json_kind(v), dtn);
      return -1;
    }
    ((uint8_t *)dst)[i] = json_is_true(v);
    return 0;
  }
  int64_t lo;
  uint64_t hi;
  if (int_range(dt, &lo, &hi)) {
    if (json_is_integer(v)) {
      int64_t x = (int64_t)json_integer_value(v);
      if (x < lo || (x > 0 && (uint64_t)x > hi)) {
        snprintf(why, n, "element %lld is %lld, outside the range of %s", (long long)i, (long long)x, dtn);
        return -1;
      }
      store_int(dt, dst, i, (uint64_t)x);
      return 0;
    }
    if (json_is_real(v)) {
      double d = json_real_value(v);
      if (d != floor(d)) {
        snprintf(why, n, "element %lld is %s, not an integer (%s)", (long long)i, fmt_double(d, num, sizeof num), dtn);
        return -1;
      }
      /* 2^63 and 2^64 are exact doubles: the bounds are exclusive above */
      int ok = lo < 0 ? d >= (double)lo && (hi == UINT64_MAX >> 1 ? d < 9223372036854775808.0 : d <= (double)hi)
                      : d >= 0 && (hi == UINT64_MAX ? d < 18446744073709551616.0 : d <= (double)hi);
      if (!ok) {
        snprintf(why, n, "element %lld is %s, outside the range of %s", (long long)i, fmt_double(d, num, sizeof num), dtn);
        return -1;
      }
      store_int(dt, dst, i, d < 0 ? (uint64_t)(int64_t)d : (uint64_t)d);
      return 0;
    }
    const char *digits = big_int_digits(v, big_ints);
    if (digits) {
      if (dt == TOPLU_DTYPE_UINT64 && digits[0] != '-') {
        errno = 0;
        unsigned long long u = strtoull(digits, NULL, 10);
        if (errno != ERANGE) {
          store_int(dt, dst, i, (uint64_t)u);
          return 0;
        }
      }
      snprintf(why, n, "element %lld is %s, outside the range of %s", (long long)i, digits, dtn);
      return -1;
    }
    snprintf(why, n, "element %lld is %s, %s takes integers", (long long)i, json_kind(v), dtn);
    return -1;
  }
  /* FP16, FP32, FP64 (and BF16) */
  double d;
  int special = 0; /* "NaN", "Infinity", "-Infinity": the only way to send those in JSON */
  if (json_is_number(v)) {
    d = json_number_value(v);
  } else if (json_is_string(v)) {
    const char *s = json_string_value(v), *digits = big_int_digits(v, big_ints);
    if (digits) d = strtod(digits, NULL);
    else if ((special = !strcmp(s, "NaN"))) d = NAN;
    else if ((special = !strcmp(s, "Infinity"))) d = INFINITY;
    else if ((special = !strcmp(s, "-Infinity"))) d = -INFINITY;
    else {
      snprintf(why, n, "element %lld is a string, %s takes numbers (or \"NaN\", \"Infinity\", \"-Infinity\")",
               (long long)i, dtn);
      return -1;
    }
  } else {
    snprintf(why, n, "element %lld is %s, %s takes numbers", (long long)i, json_kind(v), dtn);
    return -1;
  }
  int finite;
  switch (dt) {
    case TOPLU_DTYPE_DOUBLE:
      ((double *)dst)[i] = d;
      finite = isfinite(d);
      break;
    case TOPLU_DTYPE_FLOAT: {
      float f = (float)d;
      ((float *)dst)[i] = f;
      finite = isfinite(f);
      break;
    }
    case TOPLU_DTYPE_FLOAT16: {
      uint16_t h = double_to_half(d);
      ((uint16_t *)dst)[i] = h;
      finite = (h & 0x7c00) != 0x7c00;
      break;
    }
    default: { /* BF16 */
      uint16_t h = toplu_float_to_bfloat16((float)d);
      ((uint16_t *)dst)[i] = h;
      finite = (h & 0x7f80) != 0x7f80;
      break;
    }
  }
  if (!finite && !special) {
    snprintf(why, n, "element %lld is %s, outside the range of %s", (long long)i, fmt_double(d, num, sizeof num), dtn);
    return -1;
  }
  return 0;
}

/* ------------------------------------------------------------------ requests */

/* One request input while parsing. */
typedef struct pin {
  int given, req_index;     /* its position in the request's inputs */
  const char *name;
  toplu_dtype_t dtype;
  int ndim;
  int64_t dims[TOPLU_MAX_DIMS];
  int64_t numel;
  size_t nbytes;
  const json_t *data;       /* JSON data, or NULL for binary */
  int nested;
  size_t bin_off;           /* offset in the binary part */
} pin_t;

/* Values in data, at any nesting: as Triton reads JSON tensor data, nested
 * arrays are flattened in order whatever their structure, and only the count
 * must match the shape ([[1, 2], [3, 4]] for shape [1, 4] is four values). */
static int64_t count_leaves(const json_t *node) {
  int64_t n = 0;
  for (size_t j = 0; j < json_array_size(node); j++) {
    const json_t *c = json_array_get(node, j);
    n += json_is_array(c) ? count_leaves(c) : 1;
  }
  return n;
}

/* Where nested data first departs from the shape (node at level must be an
 * array of dims[level]): the message for a count that does not match. */
static int check_nested(const json_t *node, int level, const pin_t *p, char *path, size_t plen, char *err,
                        size_t esize) {
  char sh[160];
  if (!json_is_array(node)) {
    toplu_shape_format(p->ndim, p->dims, sh, sizeof sh);
    return fail(err, esize, "inputs[%d] ('%s').data%s: %s where shape %s has an array of %lld (dim %d)",
                p->req_index, p->name, path, json_kind(node), sh, (long long)p->dims[level], level);
  }
  if ((int64_t)json_array_size(node) != p->dims[level]) {
    toplu_shape_format(p->ndim, p->dims, sh, sizeof sh);
    return fail(err, esize, "inputs[%d] ('%s').data%s: %zu values where shape %s has %lld (dim %d)", p->req_index,
                p->name, path, json_array_size(node), sh, (long long)p->dims[level], level);
  }
  if (level + 1 == p->ndim) return 0;
  size_t at = strlen(path);
  for (size_t k = 0; k < json_array_size(node); k++) {
    snprintf(path + at, plen - at, "[%zu]", k);
    int rc = check_nested(json_array_get(node, k), level + 1, p, path, plen, err, esize);
    if (rc) return rc;
  }
  path[at] = 0;
  return 0;
}

/* Nested data into dst in row-major order (arrays flattened in order). */
static int fill_nested(const json_t *node, const pin_t *p, void *dst, int64_t *k, int big_ints, char *why, size_t n) {
  size_t len = json_array_size(node);
  for (size_t j = 0; j < len; j++) {
    const json_t *c = json_array_get(node, j);
    if (json_is_array(c)) {
      if (fill_nested(c, p, dst, k, big_ints, why, n)) return -1;
    } else if (put_elem(c, p->dtype, dst, (*k)++, big_ints, why, n)) {
      return -1;
    }
  }
  return 0;
}

/* The shape and datatype of request input ri (object in) against model input mi. */
static int parse_input(const toplu_model_t *m, const toplu_value_info_t *served, int64_t mbs, const json_t *in, int ri,
                       int big_ints, pin_t *slots, int64_t *rows, int *first_row_input, char *err, size_t esize) {
  if (!json_is_object(in)) return fail(err, esize, "inputs[%d]: expected an object, got %s", ri, json_kind(in));
  const json_t *jname = json_object_get(in, "name");
  if (!jname) return fail(err, esize, "inputs[%d].name: missing", ri);
  if (!json_is_string(jname)) return fail(err, esize, "inputs[%d].name: expected a string, got %s", ri, json_kind(jname));
  const char *name = json_string_value(jname);
  int mi;
  if (find_name(m, 0, ri, name, &mi, err, esize)) return 400;
  pin_t *p = &slots[mi];
  if (p->given)
    return fail(err, esize, "inputs[%d]: input '%s' is given twice (inputs[%d] and inputs[%d])", ri, name,
                p->req_index, ri);
  p->given = 1;
  p->req_index = ri;
  p->name = name;
  const toplu_value_info_t *info = served ? &served[mi] : toplu_model_input(m, mi);

  const json_t *jdt = json_object_get(in, "datatype");
  if (!jdt) return fail(err, esize, "inputs[%d] ('%s').datatype: missing", ri, name);
  if (!json_is_string(jdt))
    return fail(err, esize, "inputs[%d] ('%s').datatype: expected a string, got %s", ri, name, json_kind(jdt));
  const char *dtname = json_string_value(jdt);
  p->dtype = srv_datatype_from_name(dtname);
  if (p->dtype == TOPLU_DTYPE_UNDEFINED)
    return fail(err, esize,
                "inputs[%d] ('%s').datatype: unknown datatype '%s' (BOOL, UINT8, UINT16, UINT32, UINT64, INT8, INT16, "
                "INT32, INT64, FP16, BF16, FP32, FP64, BYTES)",
                ri, name, dtname);
  const char *model_dt = srv_datatype_name(info->dtype);
  if (p->dtype != TOPLU_DTYPE_STRING && p->dtype != info->dtype)
    return fail(err, esize, "inputs[%d] ('%s'): datatype %s does not match the model's %s", ri, name, dtname,
                model_dt ? model_dt : toplu_dtype_name(info->dtype));

  const json_t *jshape = json_object_get(in, "shape");
  if (!jshape) return fail(err, esize, "inputs[%d].shape: missing (input '%s')", ri, name);
  if (!json_is_array(jshape))
    return fail(err, esize, "inputs[%d].shape: expected an array of dims, got %s (input '%s')", ri, json_kind(jshape),
                name);
  size_t rank = json_array_size(jshape);
  if (rank > TOPLU_MAX_DIMS)
    return fail(err, esize, "inputs[%d].shape: %zu dims, more than the %d toplu handles (input '%s')", ri, rank,
                TOPLU_MAX_DIMS, name);
  p->ndim = (int)rank;
  for (int d = 0; d < p->ndim; d++) {
    const json_t *jd = json_array_get(jshape, (size_t)d);
    if (!json_is_integer(jd))
      return fail(err, esize, "inputs[%d].shape[%d]: expected a non-negative integer, got %s (input '%s')", ri, d,
                  value_kind(jd, big_ints), name);
    json_int_t v = json_integer_value(jd);
    if (v < 0 || v > INT32_MAX)
      return fail(err, esize, "inputs[%d].shape[%d]: %lld is not a dim (0..2147483647) (input '%s')", ri, d,
                  (long long)v, name);
    p->dims[d] = (int64_t)v;
  }
  char sh[160], msh[160];
  toplu_shape_format(p->ndim, p->dims, sh, sizeof sh);
  if (!toplu__shape_numel(p->ndim, p->dims, &p->numel))
    return fail(err, esize, "inputs[%d].shape: %s has more than " TOPLU_MAX_ELEMENTS_TEXT " elements (input '%s')", ri,
                sh, name);

  /* against the model's declared shape */
  /* served: the shape a config's reshape serves the input as (its dims), not the model's */
  const toplu_value_info_t *mv = toplu_model_input(m, mi);
  int as_served = info != mv && (info->ndim != mv->ndim ||
                                 (info->ndim > 0 && memcmp(info->dims, mv->dims, (size_t)info->ndim * sizeof info->dims[0])));
  const char *whose = as_served ? "the" : "the model's", *how = as_served ? " as served (the config's dims)" : "";
  if (info->ndim >= 0 && p->ndim != info->ndim)
    return fail(err, esize, "inputs[%d].shape: %s has rank %d, %s input '%s'%s is %s (rank %d)", ri, sh, p->ndim, whose,
                name, how, pl_format_info_dims(info, msh, sizeof msh), info->ndim);
  int d0 = 0;
  if (mbs > 0) {
    if (p->ndim < 1)
      return fail(err, esize, "inputs[%d].shape: a scalar, but batching needs a batch dim (input '%s')", ri, name);
    if (p->dims[0] < 1 || p->dims[0] > mbs)
      return fail(err, esize, "inputs[%d].shape[0]: batch of %lld rows, outside 1..%lld (max_batch_size) (input '%s')",
                  ri, (long long)p->dims[0], (long long)mbs, name);
    if (*first_row_input >= 0 && p->dims[0] != *rows)
      return fail(err, esize, "inputs[%d].shape[0]: %lld rows where inputs[%d] has %lld (input '%s')", ri,
                  (long long)p->dims[0], *first_row_input, (long long)*rows, name);
    if (*first_row_input < 0) *first_row_input = ri, *rows = p->dims[0];
    d0 = 1;
  }
  for (int d = d0; info->ndim >= 0 && d < p->ndim; d++) {
    if (info->dims[d] >= 0 ? p->dims[d] != info->dims[d] : p->dims[d] < 1)
      return fail(err, esize, "inputs[%d].shape[%d]: %lld where %s input '%s'%s is %s%s", ri, d, (long long)p->dims[d],
                  whose, name, how, pl_format_info_dims(info, msh, sizeof msh),
                  p->dims[d] == 0 && info->dims[d] < 0 ? " (toplu serves no empty tensors: a free dim is 1 or more)"
                                                        : "");
  }

  /* data: JSON, or binary_data_size bytes of the binary part */
  const json_t *params = json_object_get(in, "parameters");
  const json_t *jbds = NULL;
  if (params) {
    if (!json_is_object(params))
      return fail(err, esize, "inputs[%d] ('%s').parameters: expected an object, got %s", ri, name, json_kind(params));
    if (json_object_get(params, "shared_memory_region"))
      return fail(err, esize,
                  "inputs[%d] ('%s').parameters.shared_memory_region: the shared-memory extension (system or CUDA) "
                  "is not supported; send the tensor in the body (data, or parameters.binary_data_size)",
                  ri, name);
    jbds = json_object_get(params, "binary_data_size");
  }
  p->data = json_object_get(in, "data");
  if (jbds) {
    int64_t bds;
    if (get_uint(jbds, &bds))
      return fail(err, esize, "inputs[%d] ('%s').parameters.binary_data_size: expected a non-negative integer, got %s",
                  ri, name, value_kind(jbds, big_ints));
    if (p->data)
      return fail(err, esize, "inputs[%d] ('%s'): both data and parameters.binary_data_size (one or the other)", ri,
                  name);
    p->nbytes = (size_t)bds;
  } else if (!p->data) {
    return fail(err, esize, "inputs[%d] ('%s').data: missing (and no parameters.binary_data_size)", ri, name);
  }
  return 0;
}

/* The size in bytes of a JSON input's converted data; counted values must equal numel. */
static int check_json_data(pin_t *p, char *err, size_t esize) {
  const json_t *data = p->data;
  char sh[160];
  if (!json_is_array(data))
    return fail(err, esize, "inputs[%d] ('%s').data: expected an array, got %s", p->req_index, p->name,
                json_kind(data));
  size_t len = json_array_size(data);
  p->nested = 0;
  for (size_t k = 0; k < len && !p->nested; k++) p->nested = json_is_array(json_array_get(data, k));
  int64_t count = p->nested ? count_leaves(data) : (int64_t)len;
  if (count != p->numel) {
    char path[TOPLU_MAX_DIMS * 24] = "";
    if (p->nested && p->ndim > 0 && check_nested(data, 0, p, path, sizeof path, err, esize)) return 400;
    toplu_shape_format(p->ndim, p->dims, sh, sizeof sh);
    return fail(err, esize, "inputs[%d] ('%s').data: %lld values%s for shape %s (%lld elements)", p->req_index, p->name,
                (long long)count, p->nested ? " (nested arrays, flattened)" : "", sh, (long long)p->numel);
  }
  if (p->dtype == TOPLU_DTYPE_STRING) return 0;
  if (!toplu__bytes(p->numel, toplu_dtype_size(p->dtype), &p->nbytes))
    return fail(err, esize, "inputs[%d] ('%s').data: too large", p->req_index, p->name);
  return 0;
}

/* BYTES elements in binary: 4-byte little-endian length, then the bytes; count == numel. */
static int check_bytes_binary(const pin_t *p, const unsigned char *b, char *err, size_t esize) {
  size_t pos = 0;
  int64_t count = 0;
  while (pos < p->nbytes) {
    if (p->nbytes - pos < 4)
      return fail(err, esize,
                  "inputs[%d] ('%s'): BYTES element %lld's 4-byte length at offset %zu runs past "
                  "binary_data_size %zu",
                  p->req_index, p->name, (long long)count, pos, p->nbytes);
    uint32_t l = (uint32_t)b[pos] | (uint32_t)b[pos + 1] << 8 | (uint32_t)b[pos + 2] << 16 | (uint32_t)b[pos + 3] << 24;
    pos += 4;
    if (l > p->nbytes - pos)
      return fail(err, esize,
                  "inputs[%d] ('%s'): BYTES element %lld of length %u at offset %zu runs past binary_data_size %zu",
                  p->req_index, p->name, (long long)count, l, pos - 4, p->nbytes);
    pos += l;
    count++;
  }
  if (count != p->numel) {
    char sh[160];
    toplu_shape_format(p->ndim, p->dims, sh, sizeof sh);
    return fail(err, esize, "inputs[%d] ('%s'): %lld BYTES elements in binary_data_size %zu for shape %s (%lld elements)",
                p->req_index, p->name, (long long)count, p->nbytes, sh, (long long)p->numel);
  }
  return 0;
}

static int check_json_strings(const json_t *node, const pin_t *p, int level, char *err, size_t esize) {
  for (size_t k = 0; k < json_array_size(node); k++) {
    const json_t *c = json_array_get(node, k);
    if (json_is_array(c)) {
      int rc = check_json_strings(c, p, level + 1, err, esize);
      if (rc) return rc;
    } else if (!json_is_string(c)) {
      return fail(err, esize, "inputs[%d] ('%s').data: %s among BYTES values (strings)", p->req_index, p->name,
                  json_kind(c));
    }
  }
  return 0;
}

static int parse_outputs(const toplu_model_t *m, const json_t *jouts, int binary_output, srv_output_sel_t *sel,
                         int *n_sel, char *err, size_t esize) {
  int n_model = toplu_model_output_count(m);
  *n_sel = 0;
  if (jouts && !json_is_array(jouts))
    return fail(err, esize, "outputs: expected an array, got %s", json_kind(jouts));
  if (!jouts || json_array_size(jouts) == 0) {
    for (int k = 0; k < n_model; k++) sel[k].index = k, sel[k].binary = binary_output;
    *n_sel = n_model;
    return 0;
  }
  for (size_t k = 0; k < json_array_size(jouts); k++) {
    const json_t *o = json_array_get(jouts, k);
    if (!json_is_object(o)) return fail(err, esize, "outputs[%zu]: expected an object, got %s", k, json_kind(o));
    const json_t *jn = json_object_get(o, "name");
    if (!json_is_string(jn))
      return fail(err, esize, "outputs[%zu].name: %s", k, jn ? "expected a string" : "missing");
    const char *name = json_string_value(jn);
    int oi;
    if (find_name(m, 1, (int)k, name, &oi, err, esize)) return 400;
    for (int j = 0; j < *n_sel; j++)
      if (sel[j].index == oi) return fail(err, esize, "outputs[%zu]: output '%s' is requested twice", k, name);
    int binary = binary_output;
    const json_t *params = json_object_get(o, "parameters");
    if (params) {
      if (!json_is_object(params))
        return fail(err, esize, "outputs[%zu] ('%s').parameters: expected an object, got %s", k, name,
                    json_kind(params));
      if (json_object_get(params, "classification"))
        return fail(err, esize, "outputs[%zu] ('%s').parameters.classification: classification is not supported", k,
                    name);
      if (json_object_get(params, "shared_memory_region"))
        return fail(err, esize,
                    "outputs[%zu] ('%s').parameters.shared_memory_region: the shared-memory extension (system or "
                    "CUDA) is not supported; the output comes in the body (JSON, or binary_data)",
                    k, name);
      const json_t *jb = json_object_get(params, "binary_data");
      if (jb) {
        if (!json_is_boolean(jb))
          return fail(err, esize, "outputs[%zu] ('%s').parameters.binary_data: expected true or false, got %s", k,
                      name, json_kind(jb));
        binary = json_is_true(jb);
      }
    }
    sel[*n_sel].index = oi;
    sel[*n_sel].binary = binary;
    (*n_sel)++;
  }
  return 0;
}

static int parse_root(const toplu_model_t *m, const toplu_value_info_t *served, int64_t mbs, const json_t *root,
                      int big_ints, const char *bin, size_t bin_len, int header_given, srv_infer_t *out, char *err,
                      size_t esize) {
  if (!json_is_object(root)) return fail(err, esize, "the request body is %s, not a JSON object", json_kind(root));
  const json_t *jid = json_object_get(root, "id");
  if (jid && (!json_is_string(jid) || big_int_digits(jid, big_ints)))
    return fail(err, esize, "id: expected a string, got %s",
                big_int_digits(jid, big_ints) ? "an integer beyond int64" : json_kind(jid));
  int binary_output = 0;
  int64_t priority = 0, timeout = 0;
  const json_t *params = json_object_get(root, "parameters");
  if (params) {
    if (!json_is_object(params)) return fail(err, esize, "parameters: expected an object, got %s", json_kind(params));
    const json_t *v = json_object_get(params, "binary_data_output");
    if (v) {
      if (!json_is_boolean(v))
        return fail(err, esize, "parameters.binary_data_output: expected true or false, got %s", json_kind(v));
      binary_output = json_is_true(v);
    }
    if ((v = json_object_get(params, "priority")) && get_uint(v, &priority))
      return fail(err, esize, "parameters.priority: expected a non-negative integer, got %s", value_kind(v, big_ints));
    if ((v = json_object_get(params, "timeout")) && get_uint(v, &timeout))
      return fail(err, esize, "parameters.timeout: expected a non-negative integer (microseconds), got %s",
                  value_kind(v, big_ints));
  }
  const json_t *jins = json_object_get(root, "inputs");
  if (!jins) return fail(err, esize, "inputs: missing");
  if (!json_is_array(jins)) return fail(err, esize, "inputs: expected an array, got %s", json_kind(jins));

  int n_in = toplu_model_input_count(m), n_mout = toplu_model_output_count(m);
  size_t scratch_n = (size_t)n_in * sizeof(pin_t) + (size_t)(n_mout + 1) * sizeof(srv_output_sel_t);
  void *scratch = calloc(1, scratch_n);
  if (!scratch) return fail(err, esize, "out of memory"), 500;
  pin_t *slots = scratch;
  srv_output_sel_t *sel = (srv_output_sel_t *)(slots + n_in);
  int rc = 0, n_sel = 0, first_row = -1;
  int64_t rows = 1;
  size_t bin_used = 0;
  char sh[160];

  for (size_t k = 0; k < json_array_size(jins) && !rc; k++) {
    if (k >= (size_t)INT32_MAX) {
      rc = fail(err, esize, "inputs: too many");
      break;
    }
    rc = parse_input(m, served, mbs, json_array_get(jins, k), (int)k, big_ints, slots, &rows, &first_row, err, esize);
  }
  /* data sizes, in request order (the binary part follows it) */
  for (size_t k = 0; k < json_array_size(jins) && !rc; k++) {
    pin_t *p = NULL;
    for (int i = 0; i < n_in; i++)
      if (slots[i].req_index == (int)k && slots[i].given) p = &slots[i];
    if (!p) continue; /* cannot happen: every request input was matched above */
    if (p->data) {
      rc = check_json_data(p, err, esize);
      if (!rc && p->dtype == TOPLU_DTYPE_STRING) rc = check_json_strings(p->data, p, 0, err, esize);
    } else {
      if (p->nbytes > bin_len - bin_used) {
        rc = fail(err, esize,
                  "inputs[%d] ('%s').parameters.binary_data_size: %zu bytes at offset %zu run past the %zu bytes of "
                  "binary data after the JSON header%s",
                  p->req_index, p->name, p->nbytes, bin_used, bin_len,
                  header_given ? "" : " (no Inference-Header-Content-Length: the whole body is JSON)");
        break;
      }
      p->bin_off = bin_used;
      bin_used += p->nbytes;
      const unsigned char *b = (const unsigned char *)bin + p->bin_off;
      if (p->dtype == TOPLU_DTYPE_STRING) {
        rc = check_bytes_binary(p, b, err, esize);
      } else {
        size_t want;
        if (!toplu__bytes(p->numel, toplu_dtype_size(p->dtype), &want) || want != p->nbytes) {
          toplu_shape_format(p->ndim, p->dims, sh, sizeof sh);
          rc = fail(err, esize,
                    "inputs[%d] ('%s').parameters.binary_data_size: %zu bytes, but shape %s of %s is %lld "
                    "elements of %zu bytes",
                    p->req_index, p->name, p->nbytes, sh, srv_datatype_name(p->dtype), (long long)p->numel,
                    toplu_dtype_size(p->dtype));
        } else if (p->dtype == TOPLU_DTYPE_BOOL) {
          for (size_t j = 0; j < p->nbytes; j++)
            if (b[j] > 1) {
              rc = fail(err, esize, "inputs[%d] ('%s'): BOOL element %zu is byte %u, not 0 or 1", p->req_index,
                        p->name, j, b[j]);
              break;
            }
        }
      }
    }
    if (!rc && p->dtype == TOPLU_DTYPE_STRING) {
      int mi = (int)(p - slots);
      const toplu_value_info_t *info = toplu_model_input(m, mi);
      if (info->dtype != TOPLU_DTYPE_STRING)
        rc = fail(err, esize, "inputs[%d] ('%s'): datatype BYTES does not match the model's %s", p->req_index, p->name,
                  srv_datatype_name(info->dtype) ? srv_datatype_name(info->dtype) : toplu_dtype_name(info->dtype));
      else
        rc = fail(err, esize, "inputs[%d] ('%s'): BYTES inputs are not supported by the server",
                  p->req_index, p->name);
    }
  }
  if (!rc && bin_used != bin_len)
    rc = fail(err, esize,
              "the body holds %zu bytes of binary data after the JSON header, but the inputs' binary_data_size "
              "add up to %zu",
              bin_len, bin_used);
  for (int i = 0; i < n_in && !rc; i++)
    if (!slots[i].given) rc = fail(err, esize, "inputs: the model's input '%s' is missing", toplu_model_input(m, i)->name);
  if (!rc) rc = parse_outputs(m, json_object_get(root, "outputs"), binary_output, sel, &n_sel, err, esize);

  /* everything is checked: one allocation bounded by the body */
  size_t total = 0, id_len = jid ? json_string_length(jid) : 0;
  if (!rc) {
    bool ok = toplu__add_size(total, align_up((size_t)n_in * sizeof(srv_input_t)), &total) &&
              toplu__add_size(total, align_up((size_t)n_sel * sizeof(srv_output_sel_t)), &total) &&
              toplu__add_size(total, align_up(id_len + 1), &total);
    for (int i = 0; i < n_in && ok; i++)
      if (slots[i].data) ok = toplu__add_size(total, align_up(slots[i].nbytes), &total);
    if (!ok) rc = fail(err, esize, "the request is too large");
  }
  char *mem = NULL;
  if (!rc && !(mem = malloc(total ? total : 1))) rc = (fail(err, esize, "out of memory"), 500);
  if (rc) {
    free(scratch);
    return rc;
  }
  size_t at = 0;
  out->inputs = (srv_input_t *)mem;
  at += align_up((size_t)n_in * sizeof(srv_input_t));
  out->outputs = (srv_output_sel_t *)(mem + at);
  at += align_up((size_t)n_sel * sizeof(srv_output_sel_t));
  if (jid) {
    out->id = mem + at;
    memcpy(out->id, json_string_value(jid), id_len + 1);
  }
  at += align_up(id_len + 1);
  for (int i = 0; i < n_in && !rc; i++) {
    pin_t *p = &slots[i];
    srv_input_t *si = &out->inputs[i];
    memset(si, 0, sizeof *si);
    si->index = i;
    si->dtype = p->dtype;
    si->ndim = p->ndim;
    memcpy(si->dims, p->dims, sizeof p->dims);
    si->nbytes = p->nbytes;
    if (!p->data) {
      si->data = bin + p->bin_off;
      continue;
    }
    void *dst = mem + at;
    at += align_up(p->nbytes);
    si->data = dst;
    char why[256];
    int bad = 0;
    if (p->nested) {
      int64_t k = 0;
      bad = fill_nested(p->data, p, dst, &k, big_ints, why, sizeof why);
    } else {
      for (size_t k = 0; k < json_array_size(p->data) && !bad; k++)
        bad = put_elem(json_array_get(p->data, k), p->dtype, dst, (int64_t)k, big_ints, why, sizeof why);
    }
    if (bad) rc = fail(err, esize, "inputs[%d] ('%s').data: %s", p->req_index, p->name, why);
  }
  memcpy(out->outputs, sel, (size_t)n_sel * sizeof *sel);
  free(scratch);
  if (rc) {
    free(mem);
    memset(out, 0, sizeof *out);
    return rc;
  }
  out->n_inputs = n_in;
  out->n_outputs = n_sel;
  out->outputs_named = json_array_size(json_object_get(root, "outputs")) > 0;
  out->binary_output = binary_output;
  out->priority = priority;
  out->timeout_us = timeout;
  out->rows = mbs > 0 ? rows : 1;
  out->mem = mem;
  return 0;
}

int srv_parse_infer(const toplu_model_t *m, int64_t max_batch_size, const char *body, size_t len,
                    int64_t header_len, srv_infer_t *out, char *err, size_t err_size) {
  return srv_parse_infer_served(m, NULL, max_batch_size, body, len, header_len, out, err, err_size);
}

int srv_parse_infer_served(const toplu_model_t *m, const toplu_value_info_t *served, int64_t max_batch_size,
                           const char *body, size_t len, int64_t header_len, srv_infer_t *out, char *err,
                           size_t err_size) {
  memset(out, 0, sizeof *out);
  if (err && err_size) err[0] = 0;
  if (!m || (!body && len)) return fail(err, err_size, "no model or body"), 500;
  size_t json_len = len;
  if (header_len < -1)
    return fail(err, err_size, "Inference-Header-Content-Length %lld is negative", (long long)header_len);
  if (header_len >= 0) {
    if ((uint64_t)header_len > len)
      return fail(err, err_size, "Inference-Header-Content-Length %lld is beyond the body's %zu bytes",
                  (long long)header_len, len);
    json_len = (size_t)header_len;
  }
  json_error_t je;
  int big_ints = 0;
  char *quoted = NULL;
  json_t *root = json_loadb(body ? body : "", json_len, JSON_REJECT_DUPLICATES, &je);
  if (!root && json_error_code(&je) == json_error_numeric_overflow) {
    size_t qlen;
    quoted = quote_big_ints(body, json_len, &qlen, &big_ints);
    if (!quoted) return fail(err, err_size, "out of memory"), 500;
    json_error_t je2;
    if (big_ints) {
      root = json_loadb(quoted, qlen, JSON_REJECT_DUPLICATES, &je2);
      if (!root) je = je2; /* what else is wrong (its column counts the quoting) */
    }
  }
  free(quoted);
  if (!root)
    return fail(err, err_size, "invalid JSON%s at line %d, column %d: %s%s",
                header_len >= 0 ? " header" : "", je.line, je.column, je.text,
                header_len < 0 && json_error_code(&je) == json_error_end_of_input_expected
                    ? " (bytes follow the JSON: a body with binary tensor data needs the "
                      "Inference-Header-Content-Length header, the JSON's length in bytes)"
                    : "");
  int rc = parse_root(m, served, max_batch_size, root, big_ints, body + json_len, len - json_len, header_len >= 0, out, err,
                      err_size);
  json_decref(root);
  return rc;
}

int64_t srv_first_nonfinite(toplu_dtype_t dtype, const void *data, int64_t n, int *is_nan) {
  const unsigned char *p = data;
  *is_nan = 0;
  /* an IEEE value is NaN or infinite when its exponent bits are all ones; NaN when a mantissa bit is set too */
  size_t es;
  uint64_t e, m;
  switch (dtype) {
    case TOPLU_DTYPE_FLOAT: es = 4, e = 0x7f800000u, m = 0x007fffffu; break;
    case TOPLU_DTYPE_DOUBLE: es = 8, e = 0x7ff0000000000000u, m = 0x000fffffffffffffu; break;
    case TOPLU_DTYPE_FLOAT16: es = 2, e = 0x7c00, m = 0x03ff; break;
    case TOPLU_DTYPE_BFLOAT16: es = 2, e = 0x7f80, m = 0x007f; break;
    default: return -1;
  }
  for (int64_t i = 0; i < n; i++) {
    uint64_t b = 0;
    memcpy(&b, p + es * (size_t)i, es); /* little-endian values: the element's bits land in the low bytes */
    if ((b & e) == e) return *is_nan = (b & m) != 0, i;
  }
  return -1;
}

void srv_infer_free(srv_infer_t *r) {
  if (!r) return;
  free(r->mem);
  memset(r, 0, sizeof *r);
}

/* ------------------------------------------------------------------ responses */

int srv_encode_infer_response(const srv_infer_t *r, const toplu_model_t *m, const char *model_name,
                              const char *model_version, const toplu_tensor_t *outputs, pl_buf_t *body,
                              size_t *json_len) {
  size_t start = body->len;
  /* every output must have a datatype the response can hold */
  for (int k = 0; k < r->n_outputs; k++) {
    const toplu_tensor_t *t = &outputs[r->outputs[k].index];
    if (!srv_datatype_name(t->dtype) || t->dtype == TOPLU_DTYPE_STRING || !toplu_dtype_size(t->dtype)) return 500;
  }
  pl_buf_putc(body, '{');
  if (r->id) {
    pl_buf_puts(body, "\"id\":");
    pl_buf_json_string(body, r->id);
    pl_buf_putc(body, ',');
  }
  pl_buf_puts(body, "\"model_name\":");
  pl_buf_json_string(body, model_name ? model_name : "");
  pl_buf_puts(body, ",\"model_version\":");
  pl_buf_json_string(body, model_version ? model_version : "");
  pl_buf_puts(body, ",\"outputs\":[");
  for (int k = 0; k < r->n_outputs; k++) {
    int oi = r->outputs[k].index;
    const toplu_tensor_t *t = &outputs[oi];
    int64_t numel = toplu_tensor_numel(t);
    if (k) pl_buf_putc(body, ',');
    pl_buf_puts(body, "{\"name\":");
    pl_buf_json_string(body, toplu_model_output(m, oi)->name);
    pl_buf_printf(body, ",\"datatype\":\"%s\",\"shape\":[", srv_datatype_name(t->dtype));
    for (int d = 0; d < t->ndim; d++) pl_buf_printf(body, d ? ",%lld" : "%lld", (long long)t->dims[d]);
    pl_buf_putc(body, ']');
    if (r->outputs[k].binary) {
      pl_buf_printf(body, ",\"parameters\":{\"binary_data_size\":%zu}", toplu_tensor_nbytes(t));
    } else {
      pl_buf_puts(body, ",\"data\":[");
      int is_float = pl_dtype_float(t->dtype);
      if (numel > 0 && pl_buf_reserve(body, (size_t)numel * 4) == 0) {
        for (int64_t i = 0; i < numel; i++) {
          if (i) pl_buf_putc(body, ',');
          if (t->dtype == TOPLU_DTYPE_BOOL) {
            pl_buf_puts(body, ((const uint8_t *)t->data)[i] ? "true" : "false");
          } else if (is_float) {
            double v = pl_elem_get(t->dtype, t->data, i);
            /* negative zero as -0.0: "-0" is an integer to many JSON readers (Python's), which drop its sign */
            if (v == 0 && signbit(v)) pl_buf_puts(body, "-0.0");
            else if (isfinite(v)) pl_buf_element(body, t->dtype, t->data, i);
            else pl_buf_puts(body, v != v ? "\"NaN\"" : v > 0 ? "\"Infinity\"" : "\"-Infinity\"");
          } else {
            pl_buf_element(body, t->dtype, t->data, i);
          }
        }
      }
      pl_buf_putc(body, ']');
    }
    pl_buf_putc(body, '}');
  }
  pl_buf_puts(body, "]}");
  *json_len = body->len - start;
  for (int k = 0; k < r->n_outputs; k++) {
    if (!r->outputs[k].binary) continue;
    const toplu_tensor_t *t = &outputs[r->outputs[k].index];
    size_t n = toplu_tensor_nbytes(t);
    if (n) pl_buf_append(body, t->data, n);
  }
  return body->oom ? 500 : 0;
}

void srv_response_with_id(const char *id, const char *body, size_t len, size_t json_len, pl_buf_t *out,
                          size_t *out_json_len) {
  size_t before = out->len;
  if (!id || len == 0 || body[0] != '{') {
    pl_buf_append(out, body, len);
    *out_json_len = json_len;
    return;
  }
  pl_buf_puts(out, "{\"id\":");
  pl_buf_json_string(out, id);
  /* the cached body is {"model_name":...: a member always follows */
  pl_buf_putc(out, ',');
  size_t added = out->len - before - 1;
  pl_buf_append(out, body + 1, len - 1);
  *out_json_len = json_len + added;
}

void srv_encode_error(pl_buf_t *body, const char *message) {
  pl_buf_puts(body, "{\"error\":");
  pl_buf_json_string(body, message ? message : "");
  pl_buf_putc(body, '}');
}

/* ------------------------------------------------------------------ cache keys */

static void key_u64(pl_buf_t *k, uint64_t v) {
  unsigned char b[8];
  for (int i = 0; i < 8; i++) b[i] = (unsigned char)(v >> (8 * i));
  pl_buf_append(k, b, 8);
}

static void key_bytes(pl_buf_t *k, const void *p, size_t n) {
  key_u64(k, n);
  if (n) pl_buf_append(k, p, n);
}

void srv_infer_cache_key(const srv_infer_t *r, const char *model_name, const char *model_version, pl_buf_t *key) {
  const char *name = model_name ? model_name : "", *ver = model_version ? model_version : "";
  pl_buf_append(key, "kserve-infer-key-1", 18);
  key_bytes(key, name, strlen(name));
  key_bytes(key, ver, strlen(ver));
  key_u64(key, (uint64_t)r->n_inputs);
  for (int i = 0; i < r->n_inputs; i++) {
    const srv_input_t *in = &r->inputs[i];
    key_u64(key, (uint64_t)in->index);
    key_u64(key, (uint64_t)in->dtype);
    key_u64(key, (uint64_t)in->ndim);
    for (int d = 0; d < in->ndim; d++) key_u64(key, (uint64_t)in->dims[d]);
    key_bytes(key, in->data, in->nbytes);
  }
  key_u64(key, (uint64_t)r->n_outputs);
  for (int k = 0; k < r->n_outputs; k++) {
    key_u64(key, (uint64_t)r->outputs[k].index);
    key_u64(key, (uint64_t)r->outputs[k].binary);
  }
}
