/* core/checked.h - the one overflow-checked size arithmetic.
 *
 * Every shape, stride, offset and byte count that comes from a file, a
 * flag or a request goes through these before it is used: a product or sum
 * that would wrap (signed overflow is undefined behaviour in C11, 6.5p5)
 * or pass a limit is reported, never computed.  Each returns true and
 * stores the result when it fits, false (and leaves *out alone) when it
 * does not.  Pure functions: thread-safe.
 *
 * Built on GCC/Clang's __builtin_{add,mul}_overflow (both compilers the
 * project supports have them since GCC 5 / Clang 3.8).
 */
#ifndef TOPLU_CORE_CHECKED_H
#define TOPLU_CORE_CHECKED_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "toplu/tensor.h"

/* a + b and a * b in int64_t. */
static inline bool toplu__add_i64(int64_t a, int64_t b, int64_t *out) {
  int64_t r;
  if (__builtin_add_overflow(a, b, &r)) return false;
  *out = r;
  return true;
}
static inline bool toplu__mul_i64(int64_t a, int64_t b, int64_t *out) {
  int64_t r;
  if (__builtin_mul_overflow(a, b, &r)) return false;
  *out = r;
  return true;
}

/* a + b and a * b in size_t. */
static inline bool toplu__add_size(size_t a, size_t b, size_t *out) {
  size_t r;
  if (__builtin_add_overflow(a, b, &r)) return false;
  *out = r;
  return true;
}
static inline bool toplu__mul_size(size_t a, size_t b, size_t *out) {
  size_t r;
  if (__builtin_mul_overflow(a, b, &r)) return false;
  *out = r;
  return true;
}

/* a * b + c in int64_t (an index or an offset). */
static inline bool toplu__muladd_i64(int64_t a, int64_t b, int64_t c, int64_t *out) {
  int64_t r;
  return toplu__mul_i64(a, b, &r) && toplu__add_i64(r, c, out);
}

/* Sticky forms for a formula of several steps: a + b and a * b in int64_t,
 * or 0 with *ok set to false when it would wrap (*ok is never set to
 * true), so a chain is checked once at its end:
 *   bool ok = true; int64_t p = toplu__mul_i64_ok(toplu__mul_i64_ok(a, b, &ok), c, &ok);
 *   if (!ok) ...error... */
static inline int64_t toplu__add_i64_ok(int64_t a, int64_t b, bool *ok) {
  int64_t r;
  if (!toplu__add_i64(a, b, &r)) return *ok = false, 0;
  return r;
}
static inline int64_t toplu__mul_i64_ok(int64_t a, int64_t b, bool *ok) {
  int64_t r;
  if (!toplu__mul_i64(a, b, &r)) return *ok = false, 0;
  return r;
}

/* Elements of a shape, dims all >= 0: the product when the product of its
 * non-zero dims is at most TOPLU_MAX_ELEMENTS, else false (also for a
 * negative dim or a rank outside 0..TOPLU_MAX_DIMS).  A zero dim gives 0,
 * but the other dims must still fit: [2, 2^63-1, 0] is refused, so that
 * every partial product of an accepted shape, in any order, stays within
 * TOPLU_MAX_ELEMENTS (code that multiplies dims one by one, such as
 * toplu_tensor_numel or a kernel's strides, cannot wrap on it). */
static inline bool toplu__shape_numel(int ndim, const int64_t *dims, int64_t *out) {
  if (ndim < 0 || ndim > TOPLU_MAX_DIMS) return false;
  int64_t n = 1;
  bool zero = false;
  for (int i = 0; i < ndim; i++) {
    if (dims[i] < 0) return false;
    if (dims[i] == 0) zero = true;
    else if (!toplu__mul_i64(n, dims[i], &n) || (uint64_t)n > TOPLU_MAX_ELEMENTS) return false;
  }
  *out = zero ? 0 : n;
  return true;
}

/* Bytes of numel elements of elem_size bytes each, as size_t. */
static inline bool toplu__bytes(int64_t numel, size_t elem_size, size_t *out) {
  if (numel < 0 || (uint64_t)numel > SIZE_MAX) return false;
  return toplu__mul_size((size_t)numel, elem_size, out);
}

#endif
