/*
 * toplu/alloc.h - the byte-accounting allocator.
 *
 * Every buffer a session holds (plan arenas, packed weights, folded constants,
 * kernel state) is taken from a toplu_allocator_t, which counts the bytes in
 * use and their peak, and refuses (TOPLU_ERR_OUT_OF_MEMORY) any allocation
 * that would pass its limit.  `toplu tune --memory-limit` and the planner's
 * "predicted bytes" both read these counters, so what is reported is what
 * was allocated.  All functions are thread-safe.
 */
#ifndef TOPLU_ALLOC_H
#define TOPLU_ALLOC_H

#include <stddef.h>

#include "toplu/status.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct toplu_allocator toplu_allocator_t;

/* Create an allocator.  limit_bytes == 0 means no limit.
 * Errors: TOPLU_ERR_OUT_OF_MEMORY. */
toplu_status_t toplu_allocator_create(size_t limit_bytes, toplu_allocator_t **out);

/*
 * Count bytes allocated elsewhere (a backend's device memory, which this
 * allocator cannot allocate itself) against the same counters and limit:
 * reserve before allocating them, release after freeing them, the same
 * number of bytes (a release of more than is counted clamps the count at 0).
 * Errors: TOPLU_ERR_OUT_OF_MEMORY when bytes would pass the limit or exceed
 * SIZE_MAX / 2 (nothing is counted then).  a may be NULL (nothing is
 * counted).  Thread-safe.
 */
toplu_status_t toplu_allocator_reserve(toplu_allocator_t *a, size_t bytes);
void toplu_allocator_release(toplu_allocator_t *a, size_t bytes);

/* Destroy an allocator; buffers still allocated from it must be freed first
 * (they are not tracked individually).  NULL-safe. */
void toplu_allocator_destroy(toplu_allocator_t *a);

/* Allocate size bytes aligned to 64 bytes (uninitialised).  Returns NULL when
 * malloc fails or when the bytes in use would pass the limit.  size 0 gives
 * a valid unique pointer.  a may be NULL: then plain aligned malloc, uncounted.
 * Blocks of 256 KiB or more (arenas, packed weights) are pages mapped for
 * them alone (mmap), returned to the system by toplu_allocator_free, so a
 * process's resident memory follows the bytes in use (except under
 * AddressSanitizer, where all come from malloc). */
void *toplu_allocator_alloc(toplu_allocator_t *a, size_t size);

/* Free a buffer from toplu_allocator_alloc() of the same allocator.  NULL-safe. */
void toplu_allocator_free(toplu_allocator_t *a, void *ptr);

/* Bytes in use now / the most in use since creation or the last reset. */
size_t toplu_allocator_current(const toplu_allocator_t *a);
size_t toplu_allocator_peak(const toplu_allocator_t *a);

/* Set the peak to the bytes in use now. */
void toplu_allocator_reset_peak(toplu_allocator_t *a);

/* Change the limit (0 = none).  Existing buffers stay. */
void toplu_allocator_set_limit(toplu_allocator_t *a, size_t limit_bytes);
size_t toplu_allocator_limit(const toplu_allocator_t *a);

#ifdef __cplusplus
}
#endif
#endif /* TOPLU_ALLOC_H */
