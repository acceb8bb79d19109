/*
 * tests/conformance/compare.c - comparing an output tensor with the expected one.
 *
 * Floating-point types (float32, float16, float64) match when
 * |got - want| <= atol + rtol * |want| element by element, NaN matches only
 * NaN and an infinity only the same infinity.  Integer and bool tensors must
 * match exactly (bool compared as zero / non-zero); string tensors element by
 * element, byte for byte.
 */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "conformance.h"

/* Element i of t as a double (integers beyond 2^53 lose bits: only for display). */
static double elem_double(const toplu_tensor_t *t, int64_t i) {
  const void *p = t->data;
  switch (t->dtype) {
    case TOPLU_DTYPE_FLOAT: return ((const float *)p)[i];
    case TOPLU_DTYPE_DOUBLE: return ((const double *)p)[i];
    case TOPLU_DTYPE_FLOAT16: return toplu_half_to_float(((const uint16_t *)p)[i]);
    case TOPLU_DTYPE_BFLOAT16: return toplu_bfloat16_to_float(((const uint16_t *)p)[i]);
    case TOPLU_DTYPE_UINT8: return ((const uint8_t *)p)[i];
    case TOPLU_DTYPE_INT8: return ((const int8_t *)p)[i];
    case TOPLU_DTYPE_UINT16: return ((const uint16_t *)p)[i];
    case TOPLU_DTYPE_INT16: return ((const int16_t *)p)[i];
    case TOPLU_DTYPE_INT32: return ((const int32_t *)p)[i];
    case TOPLU_DTYPE_INT64: return (double)((const int64_t *)p)[i];
    case TOPLU_DTYPE_UINT32: return ((const uint32_t *)p)[i];
    case TOPLU_DTYPE_UINT64: return (double)((const uint64_t *)p)[i];
    case TOPLU_DTYPE_BOOL: return ((const uint8_t *)p)[i] != 0;
    default: return 0.0;
  }
}

/* Element i of an integer or bool tensor as exact 64-bit pattern (bool: 0/1). */
static uint64_t elem_bits(const toplu_tensor_t *t, int64_t i) {
  const void *p = t->data;
  switch (t->dtype) {
    case TOPLU_DTYPE_UINT8: return ((const uint8_t *)p)[i];
    case TOPLU_DTYPE_INT8: return (uint64_t)(int64_t)((const int8_t *)p)[i];
    case TOPLU_DTYPE_UINT16: return ((const uint16_t *)p)[i];
    case TOPLU_DTYPE_INT16: return (uint64_t)(int64_t)((const int16_t *)p)[i];
    case TOPLU_DTYPE_INT32: return (uint64_t)(int64_t)((const int32_t *)p)[i];
    case TOPLU_DTYPE_INT64: return (uint64_t)((const int64_t *)p)[i];
    case TOPLU_DTYPE_UINT32: return ((const uint32_t *)p)[i];
    case TOPLU_DTYPE_UINT64: return ((const uint64_t *)p)[i];
    case TOPLU_DTYPE_BOOL: return ((const uint8_t *)p)[i] != 0;
    default: return 0;
  }
}

static int is_float(toplu_dtype_t t) {
  return t == TOPLU_DTYPE_FLOAT || t == TOPLU_DTYPE_DOUBLE || t == TOPLU_DTYPE_FLOAT16 || t == TOPLU_DTYPE_BFLOAT16;
}

/* Whether got matches want under the float rule. */
static int float_close(double got, double want, double rtol, double atol) {
  if (isnan(want)) return isnan(got);
  if (isinf(want)) return got == want;
  double diff = fabs(got - want);
  return diff <= atol + rtol * fabs(want); /* false for NaN or inf got */
}

/* "(0, 1, 2)" for flat index i of a tensor of these dims. */
static void unflatten(int64_t i, int ndim, const int64_t *dims, char *buf, size_t size) {
  int64_t idx[TOPLU_MAX_DIMS];
  for (int d = ndim - 1; d >= 0; d--) {
    idx[d] = dims[d] ? i % dims[d] : 0;
    i = dims[d] ? i / dims[d] : 0;
  }
  size_t off = 0;
  off += (size_t)snprintf(buf + off, size - off, "(");
  for (int d = 0; d < ndim && off < size; d++)
    off += (size_t)snprintf(buf + off, size - off, "%s%lld", d ? ", " : "", (long long)idx[d]);
  if (off < size) snprintf(buf + off, size - off, ")");
}

static int compare_tensor(const char *name, int index, const toplu_tensor_t *got, const toplu_tensor_t *want, double rtol,
                 double atol, char *msg, size_t msg_size) {
  char a[160], b[160];
  if (got->dtype != want->dtype) {
    snprintf(msg, msg_size, "output %d '%s': dtype %s, expected %s", index, name, toplu_dtype_name(got->dtype),
             toplu_dtype_name(want->dtype));
    return 0;
  }
  int same_shape = got->ndim == want->ndim;
  for (int d = 0; same_shape && d < got->ndim; d++) same_shape = got->dims[d] == want->dims[d];
  if (!same_shape) {
    snprintf(msg, msg_size, "output %d '%s': shape %s, expected %s", index, name,
             toplu_shape_format(got->ndim, got->dims, a, sizeof a),
             toplu_shape_format(want->ndim, want->dims, b, sizeof b));
    return 0;
  }
  int64_t n = toplu_tensor_numel(want);
  if (n > 0 && (!got->data || !want->data)) {
    snprintf(msg, msg_size, "output %d '%s': no data", index, name);
    return 0;
  }
  int64_t first = -1, bad = 0;
  double max_err = 0.0;
  if (want->dtype == TOPLU_DTYPE_STRING) {
    const char *const *gs = got->data, *const *ws = want->data;
    for (int64_t i = 0; i < n; i++)
      if (strcmp(gs[i] ? gs[i] : "", ws[i] ? ws[i] : "")) {
        if (first < 0) first = i;
        bad++;
      }
    if (!bad) return 1;
    unflatten(first, want->ndim, want->dims, a, sizeof a);
    snprintf(msg, msg_size, "output %d '%s' string: index %lld %s: got \"%.200s\", expected \"%.200s\" (%lld of %lld elements differ)",
             index, name, (long long)first, a, gs[first] ? gs[first] : "", ws[first] ? ws[first] : "", (long long)bad,
             (long long)n);
    return 0;
  }
  if (is_float(want->dtype)) {
    for (int64_t i = 0; i < n; i++) {
      double g = elem_double(got, i), w = elem_double(want, i);
      if (!float_close(g, w, rtol, atol)) {
        if (first < 0) first = i;
        bad++;
        double e = fabs(g - w);
        if (e > max_err || isnan(e)) max_err = e;
      }
    }
  } else {
    for (int64_t i = 0; i < n; i++)
      if (elem_bits(got, i) != elem_bits(want, i)) {
        if (first < 0) first = i;
        bad++;
      }
  }
  if (!bad) return 1;
  unflatten(first, want->ndim, want->dims, a, sizeof a);
  if (is_float(want->dtype))
    snprintf(msg, msg_size,
             "output %d '%s' %s: index %lld %s: got %.9g, expected %.9g (%lld of %lld elements differ, max abs error "
             "%.3g)",
             index, name, toplu_dtype_name(want->dtype), (long long)first, a, elem_double(got, first),
             elem_double(want, first), (long long)bad, (long long)n, max_err);
  else if (want->dtype == TOPLU_DTYPE_UINT64)
    snprintf(msg, msg_size, "output %d '%s' %s: index %lld %s: got %llu, expected %llu (%lld of %lld elements differ)",
             index, name, toplu_dtype_name(want->dtype), (long long)first, a,
             (unsigned long long)elem_bits(got, first), (unsigned long long)elem_bits(want, first), (long long)bad,
             (long long)n);
  else
    snprintf(msg, msg_size, "output %d '%s' %s: index %lld %s: got %lld, expected %lld (%lld of %lld elements differ)",
             index, name, toplu_dtype_name(want->dtype), (long long)first, a, (long long)elem_bits(got, first),
             (long long)elem_bits(want, first), (long long)bad, (long long)n);
  return 0;
}

/* Sequences item by item, empty optionals by kind (onnx-data.proto values). */
int conf_compare(const char *name, int index, const toplu_tensor_t *got, const toplu_tensor_t *want, double rtol,
                 double atol, char *msg, size_t msg_size) {
  if (got->kind != want->kind) {
    snprintf(msg, msg_size, "output %d '%s': a %s, expected a %s", index, name, toplu_kind_name(got->kind),
             toplu_kind_name(want->kind));
    return 0;
  }
  if (want->kind == TOPLU_KIND_NONE) return 1;
  if (want->kind != TOPLU_KIND_SEQUENCE) return compare_tensor(name, index, got, want, rtol, atol, msg, msg_size);
  if (got->dims[0] != want->dims[0]) {
    snprintf(msg, msg_size, "output %d '%s': a sequence of %lld items, expected %lld", index, name,
             (long long)got->dims[0], (long long)want->dims[0]);
    return 0;
  }
  for (int64_t k = 0; k < want->dims[0]; k++) {
    char item[600];
    snprintf(item, sizeof item, "%.500s[%lld]", name, (long long)k);
    if (!compare_tensor(item, index, &((const toplu_tensor_t *)got->data)[k], &((const toplu_tensor_t *)want->data)[k],
                        rtol, atol, msg, msg_size))
      return 0;
  }
  return 1;
}
