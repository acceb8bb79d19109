/* core/alloc.c - 64-byte aligned allocation with byte accounting and a limit. */
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "toplu/alloc.h"
#include "core/bigalloc.h"

struct toplu_allocator {
  _Atomic size_t current;
  _Atomic size_t peak;
  _Atomic size_t limit; /* 0: none */
};

/* Each block starts with a 64-byte header holding its size (and how it was
 * allocated), so free() can account without a table; the caller's pointer
 * stays 64-byte aligned. */
#define HEADER 64

/*
 * Blocks of at least MAP_MIN bytes (arenas, packed weights: what plans hold
 * for their lifetime) are mapped pages of their own, given back to the
 * system when freed.  From malloc they would come from the heap once glibc
 * raises its mmap threshold (it does after the first large free), where
 * arenas of varying sizes between small long-lived blocks fragment it: a
 * stream of shapes whose plans the session's cache keeps within
 * max_plan_bytes grew the process by 170 MiB under a 16 MiB bound
 * (tests/test_plan_cache.c).  Under AddressSanitizer every block comes from
 * malloc, so its redzones still catch overruns.
 */
#if defined(__SANITIZE_ADDRESS__)
#define TOPLU_ALLOC_MAP 0
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define TOPLU_ALLOC_MAP 0
#endif
#endif
#ifndef TOPLU_ALLOC_MAP
#define TOPLU_ALLOC_MAP 1
#endif
#define MAP_MIN ((size_t)256 * 1024)
#define HUGE_MIN TOPLU__HUGE_MIN
#define MAPPED_MAGIC ((uint64_t)0x746f706c756d6170ull) /* "toplumap" */

static size_t mapped_len(size_t rounded) {
  size_t page = (size_t)sysconf(_SC_PAGESIZE);
  return (HEADER + rounded + page - 1) / page * page;
}

toplu_status_t toplu_allocator_create(size_t limit_bytes, toplu_allocator_t **out) {
  if (!out) return TOPLU_ERR_INVALID_ARGUMENT;
  toplu_allocator_t *a = calloc(1, sizeof *a);
  if (!a) return TOPLU_ERR_OUT_OF_MEMORY;
  atomic_init(&a->current, 0);
  atomic_init(&a->peak, 0);
  atomic_init(&a->limit, limit_bytes);
  *out = a;
  return TOPLU_OK;
}

void toplu_allocator_destroy(toplu_allocator_t *a) { free(a); }

/* Counts size as in use unless that passes the limit; *cur the count with it.  The peak is raised by the
 * caller once the memory exists (a request the system refuses must not become the peak: tune reported a
 * refused 184 GiB arena as its peak). */
static toplu_status_t count_in(toplu_allocator_t *a, size_t size, size_t *cur) {
  if (size > SIZE_MAX / 2) return TOPLU_ERR_OUT_OF_MEMORY; /* no memory is that big; keeps the sum from wrapping */
  if (!a) return TOPLU_OK;
  size_t limit = atomic_load(&a->limit);
  size_t c = atomic_fetch_add(&a->current, size) + size;
  if ((limit && c > limit) || c < size) { /* over the limit, or the count wrapped */
    atomic_fetch_sub(&a->current, size);
    return TOPLU_ERR_OUT_OF_MEMORY;
  }
  *cur = c;
  return TOPLU_OK;
}

static void raise_peak(toplu_allocator_t *a, size_t cur) {
  if (!a) return;
  size_t pk = atomic_load(&a->peak);
  while (cur > pk && !atomic_compare_exchange_weak(&a->peak, &pk, cur)) {
  }
}

toplu_status_t toplu_allocator_reserve(toplu_allocator_t *a, size_t size) {
  size_t cur = 0;
  toplu_status_t st = count_in(a, size, &cur);
  if (!st) raise_peak(a, cur);
  return st;
}

void toplu_allocator_release(toplu_allocator_t *a, size_t size) {
  if (!a) return;
  /* more than is counted (a release without its reserve) clamps at 0
   * instead of wrapping, which would refuse every later allocation */
  size_t cur = atomic_load(&a->current);
  while (!atomic_compare_exchange_weak(&a->current, &cur, cur > size ? cur - size : 0)) {
  }
}

void *toplu_allocator_alloc(toplu_allocator_t *a, size_t size) {
  if (size > SIZE_MAX - 2 * HEADER) return NULL;
  size_t rounded = (size + HEADER - 1) & ~(size_t)(HEADER - 1);
  size_t cur = 0;
  if (count_in(a, size, &cur)) return NULL;
  uint64_t how = 0;
  unsigned char *p = NULL;
  if (TOPLU_ALLOC_MAP && size >= MAP_MIN) {
    void *m = mmap(NULL, mapped_len(rounded), PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (m != MAP_FAILED) {
#ifdef MADV_HUGEPAGE
      if (size >= HUGE_MIN) madvise(m, mapped_len(rounded), MADV_HUGEPAGE);
#endif
      p = m;
      how = MAPPED_MAGIC;
    }
  }
  if (!p) p = aligned_alloc(HEADER, HEADER + (rounded ? rounded : HEADER));
  if (!p) {
    if (a) atomic_fetch_sub(&a->current, size);
    return NULL;
  }
  raise_peak(a, cur);
  memcpy(p, &size, sizeof size);
  memcpy(p + sizeof size, &how, sizeof how);
  return p + HEADER;
}

void toplu_allocator_free(toplu_allocator_t *a, void *ptr) {
  if (!ptr) return;
  unsigned char *p = (unsigned char *)ptr - HEADER;
  size_t size;
  uint64_t how;
  memcpy(&size, p, sizeof size);
  memcpy(&how, p + sizeof size, sizeof how);
  toplu_allocator_release(a, size);
  if (how == MAPPED_MAGIC)
    munmap(p, mapped_len((size + HEADER - 1) & ~(size_t)(HEADER - 1)));
  else
    free(p);
}

size_t toplu_allocator_current(const toplu_allocator_t *a) {
  return a ? atomic_load(&((toplu_allocator_t *)a)->current) : 0;
}

size_t toplu_allocator_peak(const toplu_allocator_t *a) {
  return a ? atomic_load(&((toplu_allocator_t *)a)->peak) : 0;
}

void toplu_allocator_reset_peak(toplu_allocator_t *a) {
  if (a) atomic_store(&a->peak, atomic_load(&a->current));
}

void toplu_allocator_set_limit(toplu_allocator_t *a, size_t limit_bytes) {
  if (a) atomic_store(&a->limit, limit_bytes);
}

size_t toplu_allocator_limit(const toplu_allocator_t *a) {
  return a ? atomic_load(&((toplu_allocator_t *)a)->limit) : 0;
}

void *toplu__alloc_large(size_t bytes) {
  if (bytes > SIZE_MAX - 64) return NULL;
  size_t rounded = (bytes + 63) & ~(size_t)63;
  void *p = NULL;
#ifdef MADV_HUGEPAGE
  if (rounded >= HUGE_MIN) {
    size_t huge = (size_t)2 << 20;
    if (posix_memalign(&p, huge, rounded)) return NULL;
    /* whole 2 MiB pages of the block only: the advice splits the mapping (or the heap's) there */
    madvise(p, rounded & ~(huge - 1), MADV_HUGEPAGE);
    return p;
  }
#endif
  return posix_memalign(&p, 64, rounded ? rounded : 64) ? NULL : p;
}
