/* graph/memplan.c - greedy-by-size offset assignment (see memplan.h). */
#include <stdlib.h>

#include "core/checked.h"
#include "graph/memplan.h"

#define ALIGN 64
/* x rounded up to ALIGN, or false when that does not fit in size_t. */
static bool align_up(size_t x, size_t *out) {
  if (!toplu__add_size(x, ALIGN - 1, out)) return false;
  *out &= ~(size_t)(ALIGN - 1);
  return true;
}

typedef struct { size_t lo, hi; } span_t;
static int by_lo(const void *a, const void *b) {
  const span_t *x = a, *y = b;
  return x->lo < y->lo ? -1 : x->lo > y->lo;
}

toplu_status_t toplu__memplan(toplu__membuf_t *bufs, int n, size_t *arena_bytes) {
  *arena_bytes = 0;
  if (n <= 0) return TOPLU_OK;
  int *order = malloc((size_t)n * sizeof *order);
  int *placed = malloc((size_t)n * sizeof *placed);
  span_t *spans = malloc((size_t)n * sizeof *spans);
  if (!order || !placed || !spans) {
    free(order); free(placed); free(spans);
    return TOPLU_ERR_OUT_OF_MEMORY;
  }
  for (int i = 0; i < n; i++) order[i] = i;
  /* Order by size (largest first), then by first use.  C11 qsort takes no
   * context, and a file-static one would break concurrent planners, so this
   * is an insertion sort: plans hold at most a few thousand buffers. */
  for (int i = 1; i < n; i++) {
    int k = order[i], j = i - 1;
    while (j >= 0) {
      const toplu__membuf_t *x = &bufs[order[j]], *y = &bufs[k];
      int after = x->size < y->size || (x->size == y->size && x->first > y->first);
      if (!after) break;
      order[j + 1] = order[j];
      j--;
    }
    order[j + 1] = k;
  }
  int n_placed = 0;
  size_t total = 0;
  toplu_status_t st = TOPLU_OK;
  /* Sizes and offsets are checked (core/checked.h): a buffer or an arena
   * past SIZE_MAX is refused as out of memory, never wrapped to a small
   * offset that would overlap another buffer. */
  for (int oi = 0; oi < n && !st; oi++) {
    toplu__membuf_t *b = &bufs[order[oi]];
    size_t need, end;
    if (!align_up(b->size, &need)) {
      st = TOPLU_ERR_OUT_OF_MEMORY;
      break;
    }
    int ns = 0;
    for (int p = 0; p < n_placed; p++) {
      const toplu__membuf_t *o = &bufs[placed[p]];
      if (o->last < b->first || b->last < o->first) continue; /* not alive together */
      spans[ns].lo = o->offset;
      align_up(o->size, &spans[ns].hi); /* placed already: fits */
      spans[ns].hi += o->offset;       /* <= total, which fits */
      ns++;
    }
    qsort(spans, (size_t)ns, sizeof *spans, by_lo);
    size_t off = 0;
    for (int s = 0; s < ns; s++) {
      if (need > 0 && toplu__add_size(off, need, &end) && spans[s].lo >= end) break;
      if (spans[s].hi > off) off = spans[s].hi;
    }
    if (!toplu__add_size(off, need, &end)) {
      st = TOPLU_ERR_OUT_OF_MEMORY;
      break;
    }
    b->offset = off;
    if (end > total) total = end;
    placed[n_placed++] = order[oi];
  }
  free(order);
  free(placed);
  free(spans);
  if (!st) *arena_bytes = total;
  return st;
}
