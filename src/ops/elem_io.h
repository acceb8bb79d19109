/*
 * ops/elem_io.h - element loads and stores by dtype for the kernels that
 * work on any numeric type one element at a time (ops/training.c,
 * ops/index.c, ops/signal.c, ops/linalg.c, ops/vision.c): the value as a
 * double or an int64, and stores back with C conversion (float16 through
 * float, round to nearest even).  Loads read through toplu__tensor_get_double
 * and toplu__tensor_get_int (graph/schema.h).
 */
#ifndef TOPLU_OPS_ELEM_IO_H
#define TOPLU_OPS_ELEM_IO_H

#include <stdint.h>

#include "graph/schema.h"
#include "ops/kernel.h"

/* 1 for float, double and float16. */
static inline int toplu__is_float_dtype(toplu_dtype_t dt) {
  return dt == TOPLU_DTYPE_FLOAT || dt == TOPLU_DTYPE_DOUBLE || dt == TOPLU_DTYPE_FLOAT16;
}

/* 1 for the integer dtypes and bool. */
static inline int toplu__is_int_dtype(toplu_dtype_t dt) {
  switch (dt) {
    case TOPLU_DTYPE_INT8: case TOPLU_DTYPE_INT16: case TOPLU_DTYPE_INT32: case TOPLU_DTYPE_INT64:
    case TOPLU_DTYPE_UINT8: case TOPLU_DTYPE_UINT16: case TOPLU_DTYPE_UINT32: case TOPLU_DTYPE_UINT64:
    case TOPLU_DTYPE_BOOL: return 1;
    default: return 0;
  }
}

/* 1 for every dtype these helpers load and store. */
static inline int toplu__is_numeric_dtype(toplu_dtype_t dt) {
  return toplu__is_float_dtype(dt) || toplu__is_int_dtype(dt);
}

/* Store v at element k of t (a float type, or an integer type: truncated). */
static inline void toplu__store_double(toplu_tensor_t *t, int64_t k, double v) {
  void *p = t->data;
  switch (t->dtype) {
    case TOPLU_DTYPE_FLOAT: ((float *)p)[k] = (float)v; break;
    case TOPLU_DTYPE_DOUBLE: ((double *)p)[k] = v; break;
    case TOPLU_DTYPE_FLOAT16: ((uint16_t *)p)[k] = toplu_float_to_half((float)v); break;
    case TOPLU_DTYPE_INT8: ((int8_t *)p)[k] = (int8_t)v; break;
    case TOPLU_DTYPE_INT16: ((int16_t *)p)[k] = (int16_t)v; break;
    case TOPLU_DTYPE_INT32: ((int32_t *)p)[k] = (int32_t)v; break;
    case TOPLU_DTYPE_INT64: ((int64_t *)p)[k] = (int64_t)v; break;
    case TOPLU_DTYPE_UINT8: ((uint8_t *)p)[k] = (uint8_t)v; break;
    case TOPLU_DTYPE_UINT16: ((uint16_t *)p)[k] = (uint16_t)v; break;
    case TOPLU_DTYPE_UINT32: ((uint32_t *)p)[k] = (uint32_t)v; break;
    case TOPLU_DTYPE_UINT64: ((uint64_t *)p)[k] = (uint64_t)v; break;
    case TOPLU_DTYPE_BOOL: ((uint8_t *)p)[k] = v != 0; break;
    default: break;
  }
}

/* Store an integer at element k of an integer (or bool) tensor. */
static inline void toplu__store_int(toplu_tensor_t *t, int64_t k, int64_t v) {
  void *p = t->data;
  switch (t->dtype) {
    case TOPLU_DTYPE_INT8: ((int8_t *)p)[k] = (int8_t)v; break;
    case TOPLU_DTYPE_INT16: ((int16_t *)p)[k] = (int16_t)v; break;
    case TOPLU_DTYPE_INT32: ((int32_t *)p)[k] = (int32_t)v; break;
    case TOPLU_DTYPE_INT64: ((int64_t *)p)[k] = v; break;
    case TOPLU_DTYPE_UINT8: ((uint8_t *)p)[k] = (uint8_t)v; break;
    case TOPLU_DTYPE_UINT16: ((uint16_t *)p)[k] = (uint16_t)v; break;
    case TOPLU_DTYPE_UINT32: ((uint32_t *)p)[k] = (uint32_t)v; break;
    case TOPLU_DTYPE_UINT64: ((uint64_t *)p)[k] = (uint64_t)v; break;
    case TOPLU_DTYPE_BOOL: ((uint8_t *)p)[k] = v != 0; break;
    default: toplu__store_double(t, k, (double)v); break;
  }
}

/* Product of dims[a..b-1]. */
static inline int64_t toplu__dims_prod(const int64_t *dims, int a, int b) {
  int64_t p = 1;
  for (int i = a; i < b; i++) p *= dims[i];
  return p;
}

/* Element i of a quantization zero point (ONNX QuantizeLinear and the
 * QLinear ops): a scalar applies to every i, an absent input (ndim < 0 or
 * no data) is 0. */
static inline int32_t toplu__zero_point_at(const toplu_tensor_t *t, int64_t i) {
  if (!t || t->ndim < 0 || !t->data) return 0;
  return (int32_t)toplu__tensor_get_int(t, toplu_tensor_numel(t) == 1 ? 0 : i);
}

#endif
