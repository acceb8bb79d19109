/* core/hash.c - FNV-1a 64 (see hash.h). */
#include "core/hash.h"

uint64_t toplu__fnv1a64(uint64_t h, const void *data, size_t n) {
  const unsigned char *p = data;
  for (size_t i = 0; i < n; i++) {
    h ^= p[i];
    h *= TOPLU__FNV1A64_PRIME;
  }
  return h;
}

uint64_t toplu__fnv1a64_str(uint64_t h, const char *s) {
  for (; *s; s++) {
    h ^= (unsigned char)*s;
    h *= TOPLU__FNV1A64_PRIME;
  }
  return h;
}
