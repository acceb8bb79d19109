/*
 * core/hash.h - the library's own hash: 64-bit FNV-1a (Fowler, Noll, Vo:
 * offset basis 0xcbf29ce484222325, prime 0x100000001b3, one byte at a
 * time, xor then multiply).  Used for the graph's name table, tune.json's
 * model identity (core/identity.h "fnv1a64"; checkpoints of an older toplu
 * too), the pipeline's image-set identities and the server's cache keys.
 * Whole files a job reads are hashed with XXH3-64 instead (libxxhash,
 * core/identity.h): FNV-1a's 0.6 GB/s made every job start slow.  Not
 * cryptographic: it tells files apart, it does not resist someone crafting
 * a collision.
 *
 * Incremental: hashing a then b from h equals hashing a followed by b.
 * Pure functions; thread-safe.
 */
#ifndef TOPLU_CORE_HASH_H
#define TOPLU_CORE_HASH_H

#include <stddef.h>
#include <stdint.h>

#define TOPLU__FNV1A64_INIT UINT64_C(0xcbf29ce484222325)
#define TOPLU__FNV1A64_PRIME UINT64_C(0x100000001b3)

/* FNV-1a 64 of n bytes at data, continuing from h (start with TOPLU__FNV1A64_INIT). */
uint64_t toplu__fnv1a64(uint64_t h, const void *data, size_t n);

/* FNV-1a 64 of the NUL-terminated string s (without its NUL), continuing from h. */
uint64_t toplu__fnv1a64_str(uint64_t h, const char *s);

#endif
