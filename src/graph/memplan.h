/*
 * graph/memplan.h - laying buffers out in one arena by liveness.
 *
 * Given buffers with a size and the interval of steps [first, last] in which
 * they are alive, assign offsets so that no two buffers alive at the same
 * step overlap, keeping the arena small.  Greedy by size: the largest buffer
 * first, each at the lowest 64-byte-aligned offset free of every
 * time-overlapping buffer already placed (the "greedy by size" strategy of
 * Pisarchyk and Lee, "Efficient Memory Management for Deep Neural Net
 * Inference", 2020; also what ggml-alloc and TFLite do).  O(n^2), run once
 * per plan.
 */
#ifndef TOPLU_GRAPH_MEMPLAN_H
#define TOPLU_GRAPH_MEMPLAN_H

#include <stddef.h>

#include "toplu/status.h"

typedef struct toplu__membuf {
  size_t size;   /* bytes; 0 is allowed (gets an offset, takes no room) */
  int first;     /* step that writes it first */
  int last;      /* step that reads it last (>= first) */
  size_t offset; /* result: byte offset in the arena, multiple of 64 */
} toplu__membuf_t;

/* Assign offsets; *arena_bytes gets the arena size (a multiple of 64).
 * Errors: TOPLU_ERR_OUT_OF_MEMORY (scratch allocation, or a buffer or the
 * arena past SIZE_MAX bytes).  Thread-safe. */
toplu_status_t toplu__memplan(toplu__membuf_t *bufs, int n, size_t *arena_bytes);

#endif
