/*
 * core/strtensor.h - string tensors' storage (the layout is in toplu/tensor.h:
 * an array of char *, one NUL-terminated UTF-8 string per element).
 *
 * Where string bytes live inside toplu:
 *   - constants (initializers, Constant values, folded nodes): one malloc'd
 *     block per tensor, the pointer array followed by the bytes
 *     (toplu__strings_clone), owned like any constant's data;
 *   - during a run: the arena holds pointer arrays only (8 bytes an
 *     element, planned by liveness like any tensor).  Their elements point
 *     at the caller's input strings, at constants, or at bytes a kernel made
 *     in its per-exec-context pool (toplu__strpool_t, ops/text_string.c):
 *     all of them outlive the run, so ops that move elements (views,
 *     Concat, Gather) copy pointers, never bytes;
 *   - outputs: toplu__plan_run deep-copies each string output into one
 *     block the caller frees with toplu_tensor_free.
 * Pure functions over memory the caller owns: thread-safe.  The case
 * mapping is StringNormalizer's (ops/strings.c).
 */
#ifndef TOPLU_CORE_STRTENSOR_H
#define TOPLU_CORE_STRTENSOR_H

#include <stddef.h>
#include <stdint.h>

#include "toplu/tensor.h"

/* Element k of a string tensor's pointer array, "" for NULL. */
static inline const char *toplu__str_at(const void *data, int64_t k) {
  const char *s = ((const char *const *)data)[k];
  return s ? s : "";
}

/* Bytes of one block holding n pointers and the n strings with their NULs;
 * SIZE_MAX when that does not fit in size_t. */
size_t toplu__strings_block_bytes(const void *data, int64_t n);

/* Write the block for n strings at dst (toplu__strings_block_bytes(data, n)
 * bytes, pointer-aligned): pointers first, then the bytes they point at. */
void toplu__strings_pack(void *dst, const void *data, int64_t n);

/* A malloc'd block (toplu__strings_pack) copying n strings; NULL when out of
 * memory or the size does not fit. */
void *toplu__strings_clone(const void *data, int64_t n);

/* 1 when the n strings of a and b are equal byte for byte. */
int toplu__strings_equal(const void *a, const void *b, int64_t n);

/* 1 when the data of a and b (same dtype and shape) are equal: bytes, or
 * strings compared by content for STRING. */
int toplu__tensor_data_equal(const toplu_tensor_t *a, const toplu_tensor_t *b);

/* Simple one-to-one case mapping of a Unicode code point: ASCII, Latin-1,
 * Latin Extended-A, Greek and Cyrillic letters (Ä <-> ä, İ -> i, ı -> I,
 * ſ -> S, Σ <-> σ/ς, Д <-> д); every other code point maps to itself.
 * No mapping makes a character's UTF-8 longer. */
uint32_t toplu__unicode_lower(uint32_t c);
uint32_t toplu__unicode_upper(uint32_t c);

/* Write s with every UTF-8 character of 1 to 3 bytes mapped by fn to out
 * (room for strlen(s) + 1 bytes is enough); bytes that do not start a valid
 * sequence, and 4-byte characters, are copied as they are.  Returns the
 * bytes written, the NUL included. */
size_t toplu__utf8_map_case(const char *s, uint32_t (*fn)(uint32_t), char *out);

/* 1 when a and b are equal once both are mapped to lower case
 * (toplu__unicode_lower); bytes that are not UTF-8 compare as themselves. */
int toplu__utf8_equal_nocase(const char *a, const char *b);

#endif
