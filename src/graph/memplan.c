/* graph/memplan.c - greedy-by-size offset assignment (see memplan.h). */
#include <stdlib.h>

#include "graph/memplan.h"

#define ALIGN 64
static size_t align_up(size_t x) { return (x + ALIGN - 1) & ~(size_t)(ALIGN - 1); }

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
  for (int oi = 0; oi < n; oi++) {
    toplu__membuf_t *b = &bufs[order[oi]];
    size_t need = align_up(b->size);
    int ns = 0;
    for (int p = 0; p < n_placed; p++) {
      const toplu__membuf_t *o = &bufs[placed[p]];
      if (o->last < b->first || b->last < o->first) continue; /* not alive together */
      spans[ns].lo = o->offset;
      spans[ns].hi = o->offset + align_up(o->size);
      ns++;
    }
    qsort(spans, (size_t)ns, sizeof *spans, by_lo);
    size_t off = 0;
    for (int s = 0; s < ns; s++) {
      if (spans[s].lo >= off + need && need > 0) break;
      if (spans[s].hi > off) off = spans[s].hi;
    }
    b->offset = off;
    if (off + need > total) total = off + need;
    placed[n_placed++] = order[oi];
  }
  free(order);
  free(placed);
  free(spans);
  *arena_bytes = total;
  return TOPLU_OK;
}
