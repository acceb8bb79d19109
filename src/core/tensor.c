/* core/tensor.c - element types, tensor descriptors, half-precision conversion. */
#include <stdlib.h>
#include <string.h>
#include <stdio.h>
#include <strings.h>

#include "toplu/tensor.h"

#include "checked.h"
#include "bigalloc.h"

size_t toplu_dtype_size(toplu_dtype_t dtype) {
  switch (dtype) {
    case TOPLU_DTYPE_FLOAT: case TOPLU_DTYPE_INT32: case TOPLU_DTYPE_UINT32: return 4;
    case TOPLU_DTYPE_UINT8: case TOPLU_DTYPE_INT8: case TOPLU_DTYPE_BOOL: return 1;
    case TOPLU_DTYPE_UINT16: case TOPLU_DTYPE_INT16: case TOPLU_DTYPE_FLOAT16:
    case TOPLU_DTYPE_BFLOAT16: return 2;
    case TOPLU_DTYPE_INT64: case TOPLU_DTYPE_DOUBLE: case TOPLU_DTYPE_UINT64: return 8;
    case TOPLU_DTYPE_STRING: return sizeof(char *);
    default: return 0;
  }
}

static const struct { toplu_dtype_t t; const char *name; const char *onnx; } dtype_names[] = {
    {TOPLU_DTYPE_FLOAT, "float32", "FLOAT"},     {TOPLU_DTYPE_UINT8, "uint8", "UINT8"},
    {TOPLU_DTYPE_INT8, "int8", "INT8"},          {TOPLU_DTYPE_UINT16, "uint16", "UINT16"},
    {TOPLU_DTYPE_INT16, "int16", "INT16"},       {TOPLU_DTYPE_INT32, "int32", "INT32"},
    {TOPLU_DTYPE_INT64, "int64", "INT64"},       {TOPLU_DTYPE_STRING, "string", "STRING"},
    {TOPLU_DTYPE_BOOL, "bool", "BOOL"},          {TOPLU_DTYPE_FLOAT16, "float16", "FLOAT16"},
    {TOPLU_DTYPE_DOUBLE, "float64", "DOUBLE"},   {TOPLU_DTYPE_UINT32, "uint32", "UINT32"},
    {TOPLU_DTYPE_UINT64, "uint64", "UINT64"},    {TOPLU_DTYPE_BFLOAT16, "bfloat16", "BFLOAT16"},
};

const char *toplu_kind_name(toplu_kind_t kind) {
  switch (kind) {
    case TOPLU_KIND_TENSOR: return "tensor";
    case TOPLU_KIND_SEQUENCE: return "sequence";
    case TOPLU_KIND_OPTIONAL: return "optional";
    case TOPLU_KIND_NONE: return "none";
  }
  return "unknown";
}

const char *toplu_dtype_name(toplu_dtype_t dtype) {
  for (size_t i = 0; i < sizeof dtype_names / sizeof dtype_names[0]; i++)
    if (dtype_names[i].t == dtype) return dtype_names[i].name;
  return "undefined";
}

toplu_dtype_t toplu_dtype_from_name(const char *name) {
  if (!name) return TOPLU_DTYPE_UNDEFINED;
  for (size_t i = 0; i < sizeof dtype_names / sizeof dtype_names[0]; i++)
    if (!strcmp(name, dtype_names[i].name) || !strcasecmp(name, dtype_names[i].onnx))
      return dtype_names[i].t;
  if (!strcmp(name, "float") || !strcmp(name, "fp32")) return TOPLU_DTYPE_FLOAT;
  if (!strcmp(name, "double")) return TOPLU_DTYPE_DOUBLE;
  if (!strcmp(name, "half") || !strcmp(name, "fp16")) return TOPLU_DTYPE_FLOAT16;
  if (!strcmp(name, "bf16")) return TOPLU_DTYPE_BFLOAT16;
  return TOPLU_DTYPE_UNDEFINED;
}

int64_t toplu_tensor_numel(const toplu_tensor_t *t) {
  if (!t) return 0;
  /* Overflow-checked (core/checked.h): a zero dim anywhere gives 0, a
   * product past int64 saturates instead of wrapping. */
  int negative = 0; /* the sign of the whole product, whichever dim overflows it */
  for (int i = 0; i < t->ndim; i++) {
    if (t->dims[i] == 0) return 0;
    negative ^= t->dims[i] < 0;
  }
  int64_t n = 1;
  for (int i = 0; i < t->ndim; i++)
    if (!toplu__mul_i64(n, t->dims[i], &n)) return negative ? INT64_MIN : INT64_MAX;
  return n;
}

uint64_t toplu_shape_numel_limited(int ndim, const int64_t *dims, uint64_t limit) {
  if (!dims && ndim > 0) return UINT64_MAX; /* no shape: not a count */
  uint64_t e = 1;
  int zero = 0;
  for (int i = 0; i < ndim; i++) {
    if (dims[i] <= 0) { /* negative dims count as 0; the others must still fit */
      zero = 1;
      continue;
    }
    int64_t k; /* e <= limit and fits int64 here (a product past 2^63 is over any useful limit) */
    if (!toplu__mul_i64((int64_t)e, dims[i], &k) || (uint64_t)k > limit) return UINT64_MAX;
    e = (uint64_t)k;
  }
  return zero ? 0 : e;
}

size_t toplu_tensor_nbytes(const toplu_tensor_t *t) {
  if (!t) return 0;
  size_t bytes;
  if (!toplu__bytes(toplu_tensor_numel(t), toplu_dtype_size(t->dtype), &bytes)) return SIZE_MAX;
  return bytes;
}

toplu_status_t toplu_tensor_alloc(toplu_tensor_t *t, toplu_dtype_t dtype, int ndim, const int64_t *dims) {
  if (!t) return TOPLU_ERR_INVALID_ARGUMENT;
  t->data = NULL;
  if (ndim < 0 || ndim > TOPLU_MAX_DIMS || toplu_dtype_size(dtype) == 0 || (ndim > 0 && !dims))
    return TOPLU_ERR_INVALID_ARGUMENT;
  for (int i = 0; i < ndim; i++)
    if (dims[i] < 0) return TOPLU_ERR_INVALID_ARGUMENT;
  t->dtype = dtype;
  t->ndim = ndim;
  if (ndim) memcpy(t->dims, dims, (size_t)ndim * sizeof dims[0]);
  t->device = TOPLU_DEVICE_HOST; /* a dense tensor in host memory, whatever the struct held */
  t->kind = TOPLU_KIND_TENSOR;
  int64_t n;
  size_t bytes, rounded;
  int str = dtype == TOPLU_DTYPE_STRING; /* one more byte: the "" every element points at */
  if (!toplu__shape_numel(ndim, dims, &n) || !toplu__bytes(n, toplu_dtype_size(dtype), &bytes) ||
      !toplu__add_size(bytes, 63 + (size_t)str, &rounded))
    return TOPLU_ERR_OUT_OF_MEMORY;
  rounded &= ~(size_t)63;
  void *p = toplu__alloc_large(rounded ? rounded : 64); /* huge pages from 2 MiB (core/bigalloc.h) */
  if (!p) return TOPLU_ERR_OUT_OF_MEMORY;
  memset(p, 0, rounded ? rounded : 64);
  if (str)
    for (int64_t i = 0; i < n; i++) ((char **)p)[i] = (char *)p + bytes;
  t->data = p;
  return TOPLU_OK;
}

void toplu_tensor_free(toplu_tensor_t *t) {
  if (!t) return;
  if (t->kind == TOPLU_KIND_SEQUENCE && t->data)
    for (int64_t i = 0; t->ndim == 1 && i < t->dims[0]; i++) toplu_tensor_free(&((toplu_tensor_t *)t->data)[i]);
  free(t->data);
  t->data = NULL;
}

char *toplu_shape_format(int ndim, const int64_t *dims, char *buf, size_t size) {
  size_t pos = 0;
  if (!buf || !size) return buf;
  buf[0] = '\0';
  if (!dims && ndim > 0) {
    snprintf(buf, size, "[?]");
    return buf;
  }
  pos += (size_t)snprintf(buf + pos, size - pos, "[");
  for (int i = 0; i < ndim && pos < size; i++)
    pos += (size_t)snprintf(buf + pos, size - pos, i ? ", %lld" : "%lld", (long long)dims[i]);
  if (pos < size) pos += (size_t)snprintf(buf + pos, size - pos, "]");
  if (pos >= size && size >= 5) memcpy(buf + size - 5, "...]", 5); /* cut short: says so */
  return buf;
}

/* IEEE 754 binary16 <-> binary32 by bit manipulation (round to nearest even). */
float toplu_half_to_float(uint16_t h) {
  uint32_t sign = (uint32_t)(h & 0x8000) << 16;
  uint32_t exp = (h >> 10) & 0x1f, mant = h & 0x3ff, bits;
  if (exp == 0) {
    if (mant == 0) {
      bits = sign;
    } else { /* subnormal: normalise */
      exp = 127 - 15 + 1;
      while (!(mant & 0x400)) { mant <<= 1; exp--; }
      mant &= 0x3ff;
      bits = sign | (exp << 23) | (mant << 13);
    }
  } else if (exp == 31) {
    bits = sign | 0x7f800000u | (mant << 13);
  } else {
    bits = sign | ((exp + 127 - 15) << 23) | (mant << 13);
  }
  float f;
  memcpy(&f, &bits, 4);
  return f;
}

uint16_t toplu_float_to_half(float f) {
  uint32_t x;
  memcpy(&x, &f, 4);
  uint32_t sign = (x >> 16) & 0x8000;
  uint32_t absx = x & 0x7fffffffu;
  if (absx >= 0x7f800000u) /* inf or NaN */
    return (uint16_t)(sign | 0x7c00 | (absx > 0x7f800000u ? 0x200 | ((absx >> 13) & 0x3ff) : 0));
  if (absx >= 0x477ff000u) return (uint16_t)(sign | 0x7c00); /* rounds to inf */
  if (absx < 0x38800000u) { /* subnormal half or zero */
    if (absx < 0x33000000u) return (uint16_t)sign; /* below half of smallest subnormal */
    uint32_t e = absx >> 23, m = (absx & 0x7fffff) | 0x800000;
    int shift = 126 - (int)e; /* value = m * 2^(e-150) = half_m * 2^-24 */
    uint32_t half_m = m >> shift;
    uint32_t rem = m & ((1u << shift) - 1), halfway = 1u << (shift - 1);
    if (rem > halfway || (rem == halfway && (half_m & 1))) half_m++;
    return (uint16_t)(sign | half_m);
  }
  uint32_t e = (absx >> 23) - 127 + 15, m = absx & 0x7fffff;
  uint32_t h = (e << 10) | (m >> 13);
  uint32_t rem = m & 0x1fff;
  if (rem > 0x1000 || (rem == 0x1000 && (h & 1))) h++;
  return (uint16_t)(sign | h);
}

float toplu_bfloat16_to_float(uint16_t b) {
  uint32_t bits = (uint32_t)b << 16;
  float f;
  memcpy(&f, &bits, 4);
  return f;
}

uint16_t toplu_float_to_bfloat16(float f) {
  uint32_t x;
  memcpy(&x, &f, 4);
  if ((x & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((x >> 16) | 0x40);
  uint32_t lsb = (x >> 16) & 1;
  x += 0x7fff + lsb;
  return (uint16_t)(x >> 16);
}
