/* pipeline/pool.c - large row and batch buffers kept for reuse (see pool.h). */
#include "pipeline/pool.h"

#include <stdlib.h>
#include <string.h>

#include "core/bigalloc.h"
#include "core/checked.h"

/* bytes rounded up to 64 (at least 64); 0 when that overflows. */
static size_t round64(size_t bytes) {
  size_t r;
  if (!toplu__add_size(bytes, 63, &r)) return 0;
  r &= ~(size_t)63;
  return r ? r : 64;
}

int pl_pool_init(pl_pool_t *p, size_t max_kept) {
  memset(p, 0, sizeof *p);
  p->max_kept = max_kept ? max_kept : (size_t)128 << 20;
  return pthread_mutex_init(&p->mu, NULL) ? -1 : 0;
}

void pl_pool_destroy(pl_pool_t *p) {
  for (int i = 0; i < p->n; i++) free(p->blk[i].p);
  p->n = 0;
  p->kept = 0;
  pthread_mutex_destroy(&p->mu);
}

void *pl_pool_get(pl_pool_t *p, size_t bytes) {
  size_t want = round64(bytes);
  if (!want) return NULL;
  if (p && want >= PL_POOL_MIN_BYTES) {
    pthread_mutex_lock(&p->mu);
    int best = -1;
    for (int i = 0; i < p->n; i++) /* the smallest kept block that holds it and is not twice as large */
      if (p->blk[i].cap >= want && p->blk[i].cap / 2 <= want && (best < 0 || p->blk[i].cap < p->blk[best].cap))
        best = i;
    void *b = NULL;
    if (best >= 0) {
      b = p->blk[best].p;
      p->kept -= p->blk[best].cap;
      p->blk[best] = p->blk[--p->n];
    }
    pthread_mutex_unlock(&p->mu);
    if (b) return b;
  }
  return toplu__alloc_large(want); /* huge pages from 2 MiB: a batch of images faults in 2 MiB at a time */
}

void pl_pool_put(pl_pool_t *p, void *block, size_t bytes) {
  if (!block) return;
  size_t cap = round64(bytes); /* pl_pool_get and toplu_tensor_alloc round sizes up to 64 */
  if (p && cap >= PL_POOL_MIN_BYTES) {
    pthread_mutex_lock(&p->mu);
    int kept = 0;
    if (p->n < PL_POOL_MAX_BLOCKS && cap <= p->max_kept - p->kept) {
      p->blk[p->n++] = (pl_pool_block_t){block, cap};
      p->kept += cap;
      kept = 1;
    }
    pthread_mutex_unlock(&p->mu);
    if (kept) return;
  }
  free(block);
}

toplu_status_t pl_pool_tensor(pl_pool_t *p, toplu_tensor_t *t, toplu_dtype_t dtype, int ndim, const int64_t *dims) {
  if (!t) return TOPLU_ERR_INVALID_ARGUMENT;
  if (dtype == TOPLU_DTYPE_STRING) return toplu_tensor_alloc(t, dtype, ndim, dims);
  t->data = NULL;
  if (ndim < 0 || ndim > TOPLU_MAX_DIMS || toplu_dtype_size(dtype) == 0 || (ndim > 0 && !dims))
    return TOPLU_ERR_INVALID_ARGUMENT;
  for (int i = 0; i < ndim; i++)
    if (dims[i] < 0) return TOPLU_ERR_INVALID_ARGUMENT;
  int64_t n;
  size_t bytes;
  if (!toplu__shape_numel(ndim, dims, &n) || !toplu__bytes(n, toplu_dtype_size(dtype), &bytes))
    return TOPLU_ERR_OUT_OF_MEMORY;
  t->dtype = dtype;
  t->ndim = ndim;
  if (ndim) memcpy(t->dims, dims, (size_t)ndim * sizeof dims[0]);
  t->device = TOPLU_DEVICE_HOST;
  t->kind = TOPLU_KIND_TENSOR;
  t->data = pl_pool_get(p, bytes);
  return t->data ? TOPLU_OK : TOPLU_ERR_OUT_OF_MEMORY;
}

void pl_pool_tensor_put(pl_pool_t *p, toplu_tensor_t *t) {
  if (!t || !t->data) return;
  if (t->kind != TOPLU_KIND_TENSOR || t->dtype == TOPLU_DTYPE_STRING || t->device != TOPLU_DEVICE_HOST) {
    toplu_tensor_free(t);
    return;
  }
  pl_pool_put(p, t->data, toplu_tensor_nbytes(t));
  t->data = NULL;
}
