/*
 * pipeline/pool.h - large row and batch buffers kept for reuse across the
 * chunks of a job.
 *
 * A job allocates the same buffers again and again: each chunk's rows of
 * .npy data, its row tensors and its stacked batch tensors, all of the
 * same sizes. Above glibc's mmap threshold each such malloc can be a fresh
 * mapping whose pages fault on first touch, and toplu_tensor_alloc zeroed
 * what the copies then overwrote. Measured 2026-12-07 (AMD EPYC Zen 5, 2
 * cores, a VM where a page fault costs tens of microseconds): ResNet-50 int8
 * over 512 rows of .npy at batch 8, the read and preprocess stages busy
 * 0.41 s before, 0.21-0.25 s with the pool (inference 3.4-3.6 s either
 * way); over 64 rows the preprocess stage went from 0.10 s to 0.01 s and
 * the page faults from 77,600 to 72,200.
 *
 * Blocks are ordinary aligned_alloc(64, ...) memory: a block given to
 * toplu_tensor_free (or free) instead of pl_pool_put is freed as any other,
 * so a path that does not know the pool loses the reuse, never memory.
 * Small buffers (under PL_POOL_MIN_BYTES) are not kept: malloc reuses them.
 *
 * Thread-safe: the read, inference and postprocessing stages of a job get
 * and put blocks at once (a mutex; a few calls a row).
 */
#ifndef TOPLU_PIPELINE_POOL_H
#define TOPLU_PIPELINE_POOL_H

#include <pthread.h>
#include <stddef.h>

#include "toplu/tensor.h"

/* Blocks smaller than this are freed at once (malloc's own bins reuse them). */
#define PL_POOL_MIN_BYTES ((size_t)64 << 10)
/* At most this many blocks are kept. */
#define PL_POOL_MAX_BLOCKS 256

typedef struct pl_pool_block {
  void *p;
  size_t cap; /* bytes usable at p */
} pl_pool_block_t;

typedef struct pl_pool {
  pthread_mutex_t mu;
  pl_pool_block_t blk[PL_POOL_MAX_BLOCKS];
  int n;
  size_t kept, max_kept; /* bytes held now, and the most held (put beyond it frees) */
} pl_pool_t;

/* Set up an empty pool that keeps at most max_kept bytes (0: 128 MiB). 0, or -1 when the mutex cannot be made. */
int pl_pool_init(pl_pool_t *p, size_t max_kept);
/* Free every kept block and the mutex. */
void pl_pool_destroy(pl_pool_t *p);
/* A 64-byte aligned block of at least bytes (a kept block of bytes..2*bytes when there is one, the
 * smallest; else a new one), uninitialised; NULL when out of memory. p may be NULL (plain allocation). */
void *pl_pool_get(pl_pool_t *p, size_t bytes);
/* Give back a block from pl_pool_get(bytes) or toplu_tensor_alloc (both round the size up to a multiple of 64;
 * NULL is ignored): kept when it is large and there is room, else freed. p may be NULL (freed). */
void pl_pool_put(pl_pool_t *p, void *block, size_t bytes);
/* toplu_tensor_alloc with its data from the pool and not zeroed (the caller fills every element); a string tensor
 * is allocated by toplu_tensor_alloc itself. TOPLU_OK or toplu_tensor_alloc's errors. */
toplu_status_t pl_pool_tensor(pl_pool_t *p, toplu_tensor_t *t, toplu_dtype_t dtype, int ndim, const int64_t *dims);
/* Give t's data back to the pool (toplu_tensor_free for sequences and strings) and clear t->data. */
void pl_pool_tensor_put(pl_pool_t *p, toplu_tensor_t *t);

#endif
