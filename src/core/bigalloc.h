/*
 * core/bigalloc.h - large host blocks that free() releases, backed by
 * transparent huge pages where the kernel offers them.
 *
 * A block's first touch costs a page fault per 4 KiB page.  Measured on the
 * project's VM (2026-12-07, AMD EPYC Zen 5, a paravirtualised guest): 100
 * MiB first written took 262 ms in 4 KiB pages and 9-28 ms in 2 MiB pages,
 * and toplu loading ResNet-50 int8 spent a third of its time in faults
 * (the dequantized weights, the model file, the .npy rows of a job).
 * Blocks of at least TOPLU__HUGE_MIN bytes are therefore aligned to 2 MiB
 * and advised MADV_HUGEPAGE (THP "madvise" mode, Debian's default); the
 * kernel falls back to 4 KiB pages when it has no huge page at hand, and
 * the RSS is what is touched, as before (the block is not rounded up to 2
 * MiB: its last partial 2 MiB stays in small pages).
 */
#ifndef TOPLU_CORE_BIGALLOC_H
#define TOPLU_CORE_BIGALLOC_H

#include <stddef.h>

#define TOPLU__HUGE_MIN ((size_t)2 << 20)

/* bytes (> 0) of uninitialised memory, 64-byte aligned, released with
 * free(); NULL when out of memory.  Thread-safe. */
void *toplu__alloc_large(size_t bytes);

#endif
