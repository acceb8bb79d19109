/* pipeline/buf.c - growable byte buffers, JSON/CSV text and numbers. */
#include "pipeline/buf.h"

#include <math.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

void pl_buf_free(pl_buf_t *b) {
  free(b->data);
  b->data = NULL;
  b->len = b->cap = 0;
  b->oom = 0;
}

int pl_buf_reserve(pl_buf_t *b, size_t n) {
  if (b->oom) return -1;
  if (b->len + n + 1 <= b->cap) return 0;
  size_t cap = b->cap ? b->cap : 256;
  while (cap < b->len + n + 1) cap *= 2;
  char *p = realloc(b->data, cap);
  if (!p) {
    b->oom = 1;
    return -1;
  }
  b->data = p;
  b->cap = cap;
  return 0;
}

void pl_buf_append(pl_buf_t *b, const void *p, size_t n) {
  if (pl_buf_reserve(b, n)) return;
  if (n) memcpy(b->data + b->len, p, n);
  b->len += n;
  b->data[b->len] = '\0';
}

void pl_buf_puts(pl_buf_t *b, const char *s) { pl_buf_append(b, s, strlen(s)); }

void pl_buf_putc(pl_buf_t *b, char c) { pl_buf_append(b, &c, 1); }

void pl_buf_printf(pl_buf_t *b, const char *fmt, ...) {
  va_list ap;
  char tmp[256];
  va_start(ap, fmt);
  int n = vsnprintf(tmp, sizeof tmp, fmt, ap);
  va_end(ap);
  if (n < 0) return;
  if ((size_t)n < sizeof tmp) {
    pl_buf_append(b, tmp, (size_t)n);
    return;
  }
  if (pl_buf_reserve(b, (size_t)n)) return;
  va_start(ap, fmt);
  vsnprintf(b->data + b->len, (size_t)n + 1, fmt, ap);
  va_end(ap);
  b->len += (size_t)n;
}

size_t pl_utf8_len(const unsigned char *p) {
  unsigned c = p[0];
  if (c < 0x80) return 1;
  size_t n = c >= 0xC2 && c <= 0xDF ? 2 : c >= 0xE0 && c <= 0xEF ? 3 : c >= 0xF0 && c <= 0xF4 ? 4 : 0;
  if (!n) return 0; /* a continuation byte, an overlong lead (C0, C1) or above U+10FFFF (F5..FF) */
  for (size_t k = 1; k < n; k++)
    if ((p[k] & 0xC0) != 0x80) return 0; /* also stops at the NUL */
  if (c == 0xE0 && p[1] < 0xA0) return 0; /* overlong */
  if (c == 0xED && p[1] >= 0xA0) return 0; /* a surrogate, U+D800..U+DFFF */
  if (c == 0xF0 && p[1] < 0x90) return 0; /* overlong */
  if (c == 0xF4 && p[1] >= 0x90) return 0; /* above U+10FFFF */
  return n;
}

int64_t pl_utf8_invalid(const char *s) {
  const unsigned char *p = (const unsigned char *)s;
  for (const unsigned char *q = p; *q;) {
    size_t n = pl_utf8_len(q);
    if (!n) return (int64_t)(q - p);
    q += n;
  }
  return -1;
}

void pl_buf_json_string(pl_buf_t *b, const char *s) {
  pl_buf_putc(b, '"');
  for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
    switch (*p) {
      case '"': pl_buf_puts(b, "\\\""); break;
      case '\\': pl_buf_puts(b, "\\\\"); break;
      case '\n': pl_buf_puts(b, "\\n"); break;
      case '\r': pl_buf_puts(b, "\\r"); break;
      case '\t': pl_buf_puts(b, "\\t"); break;
      default:
        if (*p < 0x20) {
          pl_buf_printf(b, "\\u%04x", *p);
        } else if (*p >= 0x80) {
          size_t n = pl_utf8_len(p);
          if (!n) {
            pl_buf_puts(b, "\\ufffd"); /* a byte that is not UTF-8: the replacement character */
          } else {
            pl_buf_append(b, p, n);
            p += n - 1;
          }
        } else {
          pl_buf_putc(b, (char)*p);
        }
    }
  }
  pl_buf_putc(b, '"');
}

void pl_buf_id_line(pl_buf_t *b, const char *id) {
  for (const unsigned char *p = (const unsigned char *)id; *p; p++) {
    if (*p == '\\') pl_buf_puts(b, "\\\\");
    else if (*p == '\n') pl_buf_puts(b, "\\n");
    else if (*p == '\r') pl_buf_puts(b, "\\r");
    else if (*p < 0x20 || *p == 0x7F) pl_buf_printf(b, "\\x%02x", *p);
    else pl_buf_putc(b, (char)*p);
  }
  pl_buf_putc(b, '\n');
}

void pl_buf_csv_field(pl_buf_t *b, const char *s) {
  if (!strpbrk(s, ",\"\r\n")) {
    pl_buf_puts(b, s);
    return;
  }
  pl_buf_putc(b, '"');
  for (const char *p = s; *p; p++) {
    if (*p == '"') pl_buf_putc(b, '"');
    pl_buf_putc(b, *p);
  }
  pl_buf_putc(b, '"');
}

/* Non-finite values as JavaScript spells them; 1 when v was one. */
static int put_nonfinite(pl_buf_t *b, double v) {
  if (isnan(v)) pl_buf_puts(b, "NaN");
  else if (isinf(v)) pl_buf_puts(b, v > 0 ? "Infinity" : "-Infinity");
  else return 0;
  return 1;
}

/*
 * A float as text: "%.*g" at the least precision p of 6..9 whose text reads
 * back (strtof) as the same float.  float_text_fast computes exactly that
 * with integers for 1e-14 <= |v| < 1e15 (every output of a network, nearly):
 * v = m 2^e; for a p and the decimal exponent X of the result, the digits
 * are q = v 10^s rounded half to even (s = p - 1 - X), from num / den =
 * v 10^s with num = m 2^max(e,0) 10^max(s,0) and den = 2^max(-e,0)
 * 10^max(-s,0), both under 2^104 in that range; q 10^-s reads back as v
 * when it lies within half an ulp of v (a quarter below a power of two),
 * the bound itself when m is even (strtof rounds ties to even).  Other
 * values take snprintf and strtof, as every value did until 2026-12-07
 * (about 0.45 us a float, 92% of a JSON Lines job writing UltraFace's raw
 * outputs; the server's JSON responses format every output float too).
 * tests/test_pipeline.c compares the two on random floats.
 */
__extension__ typedef unsigned __int128 pl_u128;

static pl_u128 pow10_u128(int n) { /* 0 <= n <= 38 */
  static const uint64_t t[20] = {1u, 10u, 100u, 1000u, 10000u, 100000u, 1000000u, 10000000u, 100000000u,
                                 1000000000u, 10000000000u, 100000000000u, 1000000000000u, 10000000000000u,
                                 100000000000000u, 1000000000000000u, 10000000000000000u, 100000000000000000u,
                                 1000000000000000000u, 10000000000000000000u};
  return n <= 19 ? (pl_u128)t[n] : (pl_u128)t[19] * t[n - 19];
}

/* 0 when v is outside the fast path's range (the caller then uses snprintf). */
static int float_text_fast(float v, char *out) {
  uint32_t bits;
  memcpy(&bits, &v, sizeof bits);
  uint32_t ex = bits >> 23 & 0xff, fr = bits & 0x7fffff;
  double av = fabs((double)v);
  if (ex == 0 || ex == 255 || av < 1e-14 || av >= 1e15) return 0;
  const uint64_t m = fr | 0x800000u;
  const int e = (int)ex - 150; /* av = m 2^e */
  const int even = (m & 1) == 0, boundary = fr == 0 && ex > 1; /* the float below is half an ulp closer */
  const int x0 = (int)floor(log10(av));
  for (int p = 6; p <= 9; p++) {
    const pl_u128 lo = pow10_u128(p - 1), hi = lo * 10;
    int x = x0, tries = 0;
    pl_u128 q, num, den;
    int s;
    for (;;) { /* x0 may be one off at a power of ten */
      s = p - 1 - x;
      num = (pl_u128)m << (e > 0 ? e : 0);
      den = (pl_u128)1 << (e < 0 ? -e : 0);
      if (s >= 0) num *= pow10_u128(s);
      else den *= pow10_u128(-s);
      q = num / den;
      if (++tries > 3) return 0; /* (never: a guard) */
      if (q >= hi) x++;
      else if (q < lo) x--;
      else break;
    }
    pl_u128 r = num - q * den;
    if (2 * r > den || (2 * r == den && (q & 1))) q++;
    /* reads back? 2 |q den - num| against 2^max(e,0) 10^max(s,0) (above v), half that (below v at a power of 2) */
    pl_u128 qd = q * den, diff = qd >= num ? qd - num : num - qd;
    pl_u128 bound = ((pl_u128)1 << (e > 0 ? e : 0)) * (s > 0 ? pow10_u128(s) : 1);
    pl_u128 lhs = 2 * diff;
    if (qd < num && boundary) lhs *= 2;
    if (!(lhs < bound || (lhs == bound && even)) && p < 9) continue;
    if (q == hi) q = lo, x++; /* rounded up to 10^p */
    char dg[12];
    for (int i = p - 1; i >= 0; i--, q /= 10) dg[i] = (char)('0' + (int)(q % 10));
    int nd = p;
    char *o = out;
    if (v < 0) *o++ = '-';
    if (x < -4 || x >= p) { /* d.ddde+XX */
      while (nd > 1 && dg[nd - 1] == '0') nd--;
      *o++ = dg[0];
      if (nd > 1) {
        *o++ = '.';
        for (int i = 1; i < nd; i++) *o++ = dg[i];
      }
      int ax = x < 0 ? -x : x;
      *o++ = 'e';
      *o++ = x < 0 ? '-' : '+';
      if (ax >= 100) *o++ = (char)('0' + ax / 100);
      *o++ = (char)('0' + ax / 10 % 10);
      *o++ = (char)('0' + ax % 10);
    } else if (x >= 0) { /* ddd.ddd */
      while (nd > x + 1 && dg[nd - 1] == '0') nd--;
      for (int i = 0; i <= x; i++) *o++ = dg[i];
      if (nd > x + 1) {
        *o++ = '.';
        for (int i = x + 1; i < nd; i++) *o++ = dg[i];
      }
    } else { /* 0.000ddd */
      while (nd > 1 && dg[nd - 1] == '0') nd--;
      *o++ = '0';
      *o++ = '.';
      for (int i = -1; i > x; i--) *o++ = '0';
      for (int i = 0; i < nd; i++) *o++ = dg[i];
    }
    *o = '\0';
    return 1;
  }
  return 0;
}

void pl_buf_float(pl_buf_t *b, float v) {
  if (put_nonfinite(b, v)) return;
  if (v == 0 && signbit(v)) { /* "-0" reads back as the integer 0 (JSON, CSV readers): the sign kept */
    pl_buf_puts(b, "-0.0");
    return;
  }
  char tmp[32];
  if (float_text_fast(v, tmp)) {
    pl_buf_puts(b, tmp);
    return;
  }
  for (int prec = 6; prec <= 9; prec++) {
    snprintf(tmp, sizeof tmp, "%.*g", prec, (double)v);
    if (prec == 9 || strtof(tmp, NULL) == v) break;
  }
  pl_buf_puts(b, tmp);
}

void pl_buf_double(pl_buf_t *b, double v) {
  if (put_nonfinite(b, v)) return;
  if (v == 0 && signbit(v)) {
    pl_buf_puts(b, "-0.0");
    return;
  }
  char tmp[40];
  for (int prec = 15; prec <= 17; prec++) {
    snprintf(tmp, sizeof tmp, "%.*g", prec, v);
    if (prec == 17 || strtod(tmp, NULL) == v) break;
  }
  pl_buf_puts(b, tmp);
}

void pl_buf_int(pl_buf_t *b, int64_t v) { pl_buf_printf(b, "%lld", (long long)v); }

int pl_dtype_numeric(toplu_dtype_t dtype) {
  return dtype != TOPLU_DTYPE_UNDEFINED && dtype != TOPLU_DTYPE_STRING && toplu_dtype_size(dtype) > 0;
}

int pl_dtype_float(toplu_dtype_t dtype) {
  return dtype == TOPLU_DTYPE_FLOAT || dtype == TOPLU_DTYPE_FLOAT16 || dtype == TOPLU_DTYPE_BFLOAT16 ||
         dtype == TOPLU_DTYPE_DOUBLE;
}

double pl_elem_get(toplu_dtype_t dtype, const void *data, int64_t i) {
  switch (dtype) {
    case TOPLU_DTYPE_FLOAT: return ((const float *)data)[i];
    case TOPLU_DTYPE_DOUBLE: return ((const double *)data)[i];
    case TOPLU_DTYPE_FLOAT16: return toplu_half_to_float(((const uint16_t *)data)[i]);
    case TOPLU_DTYPE_BFLOAT16: return toplu_bfloat16_to_float(((const uint16_t *)data)[i]);
    case TOPLU_DTYPE_UINT8: case TOPLU_DTYPE_BOOL: return ((const uint8_t *)data)[i];
    case TOPLU_DTYPE_INT8: return ((const int8_t *)data)[i];
    case TOPLU_DTYPE_UINT16: return ((const uint16_t *)data)[i];
    case TOPLU_DTYPE_INT16: return ((const int16_t *)data)[i];
    case TOPLU_DTYPE_INT32: return ((const int32_t *)data)[i];
    case TOPLU_DTYPE_UINT32: return ((const uint32_t *)data)[i];
    case TOPLU_DTYPE_INT64: return (double)((const int64_t *)data)[i];
    case TOPLU_DTYPE_UINT64: return (double)((const uint64_t *)data)[i];
    default: return 0;
  }
}

/* v rounded to nearest and clamped to [lo, hi]; *code says when it did not fit. */
static double clampr(double v, double lo, double hi, int *code) {
  if (v != v) {
    *code = PL_ELEM_NAN;
    return 0;
  }
  if (isinf(v)) *code = PL_ELEM_INF;
  v = nearbyint(v);
  if (v < lo || v > hi) {
    if (!*code) *code = PL_ELEM_RANGE;
    return v < lo ? lo : hi;
  }
  return v;
}

int pl_elem_set(toplu_dtype_t dtype, void *data, int64_t i, double v) {
  int code = PL_ELEM_OK;
  switch (dtype) {
    case TOPLU_DTYPE_FLOAT: ((float *)data)[i] = (float)v; break;
    case TOPLU_DTYPE_DOUBLE: ((double *)data)[i] = v; break;
    case TOPLU_DTYPE_FLOAT16: ((uint16_t *)data)[i] = toplu_float_to_half((float)v); break;
    case TOPLU_DTYPE_BFLOAT16: ((uint16_t *)data)[i] = toplu_float_to_bfloat16((float)v); break;
    case TOPLU_DTYPE_UINT8: ((uint8_t *)data)[i] = (uint8_t)clampr(v, 0, 255, &code); break;
    case TOPLU_DTYPE_BOOL: ((uint8_t *)data)[i] = v != 0; break;
    case TOPLU_DTYPE_INT8: ((int8_t *)data)[i] = (int8_t)clampr(v, -128, 127, &code); break;
    case TOPLU_DTYPE_UINT16: ((uint16_t *)data)[i] = (uint16_t)clampr(v, 0, 65535, &code); break;
    case TOPLU_DTYPE_INT16: ((int16_t *)data)[i] = (int16_t)clampr(v, -32768, 32767, &code); break;
    case TOPLU_DTYPE_INT32: ((int32_t *)data)[i] = (int32_t)clampr(v, -2147483648.0, 2147483647.0, &code); break;
    case TOPLU_DTYPE_UINT32: ((uint32_t *)data)[i] = (uint32_t)clampr(v, 0, 4294967295.0, &code); break;
    /* the bounds are the largest doubles inside the range (2^63 and 2^64 are not) */
    case TOPLU_DTYPE_INT64: ((int64_t *)data)[i] = (int64_t)clampr(v, -9.2233720368547758e18, 9.2233720368547748e18, &code); break;
    case TOPLU_DTYPE_UINT64: ((uint64_t *)data)[i] = (uint64_t)clampr(v, 0, 1.8446744073709550e19, &code); break;
    default: break;
  }
  /* a finite value past a float type's range became Inf: out of range, not "contains Inf" of a file that holds
   * 1e39 (a fresh user's finding of 2026-12-06) */
  if (!code && isfinite(v) && (dtype == TOPLU_DTYPE_FLOAT || dtype == TOPLU_DTYPE_FLOAT16 || dtype == TOPLU_DTYPE_BFLOAT16) &&
      !isfinite(pl_elem_get(dtype, data, i)))
    code = PL_ELEM_RANGE;
  return code;
}

int pl_elem_set_num(toplu_dtype_t dtype, void *data, int64_t i, const pl_num_t *n) {
  int64_t lo, hi;
  switch (dtype) {
    case TOPLU_DTYPE_INT8: lo = INT8_MIN, hi = INT8_MAX; break;
    case TOPLU_DTYPE_INT16: lo = INT16_MIN, hi = INT16_MAX; break;
    case TOPLU_DTYPE_INT32: lo = INT32_MIN, hi = INT32_MAX; break;
    case TOPLU_DTYPE_INT64: lo = INT64_MIN, hi = INT64_MAX; break;
    case TOPLU_DTYPE_UINT8: lo = 0, hi = UINT8_MAX; break;
    case TOPLU_DTYPE_UINT16: lo = 0, hi = UINT16_MAX; break;
    case TOPLU_DTYPE_UINT32: lo = 0, hi = UINT32_MAX; break;
    case TOPLU_DTYPE_UINT64: lo = 0, hi = INT64_MAX; break;
    default: return pl_elem_set(dtype, data, i, n->d);
  }
  if (n->exact == 0) return pl_elem_set(dtype, data, i, n->d);
  if (n->exact == 3) {
    if (dtype != TOPLU_DTYPE_UINT64) return PL_ELEM_RANGE;
    ((uint64_t *)data)[i] = (uint64_t)n->i;
    return PL_ELEM_OK;
  }
  if (n->exact != 1 || n->i < lo || n->i > hi) return PL_ELEM_RANGE;
  switch (dtype) {
    case TOPLU_DTYPE_INT8: ((int8_t *)data)[i] = (int8_t)n->i; break;
    case TOPLU_DTYPE_INT16: ((int16_t *)data)[i] = (int16_t)n->i; break;
    case TOPLU_DTYPE_INT32: ((int32_t *)data)[i] = (int32_t)n->i; break;
    case TOPLU_DTYPE_INT64: ((int64_t *)data)[i] = n->i; break;
    case TOPLU_DTYPE_UINT8: ((uint8_t *)data)[i] = (uint8_t)n->i; break;
    case TOPLU_DTYPE_UINT16: ((uint16_t *)data)[i] = (uint16_t)n->i; break;
    case TOPLU_DTYPE_UINT32: ((uint32_t *)data)[i] = (uint32_t)n->i; break;
    default: ((uint64_t *)data)[i] = (uint64_t)n->i; break;
  }
  return PL_ELEM_OK;
}

void pl_elem_why(int code, int64_t element, double v, const char *what, toplu_dtype_t dtype, char *why, size_t size) {
  if (!code) return;
  char head[160] = "";
  if (what) snprintf(head, sizeof head, "input '%s': ", what);
  if (code == PL_ELEM_RANGE) {
    char num[40]; /* the shortest form that reads back (1e+39, not 9.9999999999999994e+38) */
    for (int prec = 15; prec <= 17; prec++) {
      snprintf(num, sizeof num, "%.*g", prec, v);
      if (strtod(num, NULL) == v) break;
    }
    snprintf(why, size, "%selement %lld is %s, outside the range of %s", head, (long long)element, num,
             toplu_dtype_name(dtype));
  }
  else
    snprintf(why, size, "%selement %lld is %s, which %s cannot hold", head, (long long)element,
             code == PL_ELEM_NAN ? "NaN" : v > 0 ? "Inf" : "-Inf", toplu_dtype_name(dtype));
}

void pl_buf_element(pl_buf_t *b, toplu_dtype_t dtype, const void *data, int64_t i) {
  switch (dtype) {
    case TOPLU_DTYPE_FLOAT: pl_buf_float(b, ((const float *)data)[i]); break;
    case TOPLU_DTYPE_FLOAT16: case TOPLU_DTYPE_BFLOAT16: pl_buf_float(b, (float)pl_elem_get(dtype, data, i)); break;
    case TOPLU_DTYPE_DOUBLE: pl_buf_double(b, ((const double *)data)[i]); break;
    case TOPLU_DTYPE_INT64: pl_buf_int(b, ((const int64_t *)data)[i]); break;
    case TOPLU_DTYPE_UINT64: pl_buf_printf(b, "%llu", (unsigned long long)((const uint64_t *)data)[i]); break;
    default: pl_buf_int(b, (int64_t)pl_elem_get(dtype, data, i)); break;
  }
}

/* One element as JSON: a bool as true/false (it was 0/1: a fresh user's finding of 2026-12-06), else as
 * pl_buf_element. */
static void json_element(pl_buf_t *b, toplu_dtype_t dtype, const void *data, int64_t i) {
  if (dtype == TOPLU_DTYPE_BOOL) pl_buf_puts(b, ((const uint8_t *)data)[i] ? "true" : "false");
  else pl_buf_element(b, dtype, data, i);
}

/* Nested arrays for dims[d..]; *i is the running element index. */
static void json_nested(pl_buf_t *b, toplu_dtype_t dtype, int ndim, const int64_t *dims, const void *data, int d,
                        int64_t *i) {
  pl_buf_putc(b, '[');
  for (int64_t k = 0; k < dims[d]; k++) {
    if (k) pl_buf_puts(b, ", ");
    if (d + 1 == ndim) json_element(b, dtype, data, (*i)++);
    else json_nested(b, dtype, ndim, dims, data, d + 1, i);
  }
  pl_buf_putc(b, ']');
}

void pl_buf_json_tensor(pl_buf_t *b, toplu_dtype_t dtype, int ndim, const int64_t *dims, const void *data) {
  int64_t i = 0;
  if (ndim == 0) json_element(b, dtype, data, 0);
  else json_nested(b, dtype, ndim, dims, data, 0, &i);
}

double pl_now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

int64_t pl_first_nonfinite(const toplu_tensor_t *t) {
  int64_t n = toplu_tensor_numel(t);
  if (t->dtype == TOPLU_DTYPE_FLOAT) {
    const float *x = t->data;
    for (int64_t i = 0; i < n; i++)
      if (!isfinite(x[i])) return i;
    return -1;
  }
  if (!pl_dtype_float(t->dtype)) return -1;
  for (int64_t i = 0; i < n; i++)
    if (!isfinite(pl_elem_get(t->dtype, t->data, i))) return i;
  return -1;
}

const char *pl_format_info_dims(const toplu_value_info_t *v, char *buf, size_t size) {
  if (!size) return buf;
  if (v->ndim < 0) {
    snprintf(buf, size, "[unknown rank]");
    return buf;
  }
  size_t pos = (size_t)snprintf(buf, size, "[");
  for (int d = 0; d < v->ndim && pos < size; d++) {
    const char *sep = d ? ", " : "";
    if (v->dims[d] >= 0) pos += (size_t)snprintf(buf + pos, size - pos, "%s%lld", sep, (long long)v->dims[d]);
    else pos += (size_t)snprintf(buf + pos, size - pos, "%s%s", sep, v->dim_names[d] ? v->dim_names[d] : "?");
  }
  if (pos < size) snprintf(buf + pos, size - pos, "]");
  return buf;
}
