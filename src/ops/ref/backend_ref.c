/*
 * ops/ref/backend_ref.c - the reference backend (ops/backend.h): plain-C
 * kernels (ops/ref/ref.c) on buffers of its own.
 *
 * Its memory is host memory, but it is a memory of its own as far as plans
 * are concerned (device 1): the plan copies every tensor that crosses
 * between it and the CPU backend and uploads the constants its kernels
 * read, exactly as it will for a GPU.  That keeps the seam's copy path
 * tested on every machine.  No streams (work is done on return), no
 * layouts other than plain row-major.  Thread-safe: no state.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "ops/backend.h"
#include "ops/kernel.h"

/* Device id of the reference backend's memory. */
#define REF_DEVICE 1

/* Its own memory, counted against the session's allocator as a device's
 * would be (toplu_allocator_reserve): a 64-byte header holds the size. */
#define REF_HEADER 64

static void *ref_buffer_alloc(toplu__backend_t *b, toplu_allocator_t *a, size_t bytes) {
  (void)b;
  if (bytes > SIZE_MAX - 2 * REF_HEADER || toplu_allocator_reserve(a, bytes)) return NULL;
  size_t rounded = (bytes + REF_HEADER - 1) & ~(size_t)(REF_HEADER - 1);
  unsigned char *p = aligned_alloc(REF_HEADER, REF_HEADER + (rounded ? rounded : REF_HEADER));
  if (!p) {
    toplu_allocator_release(a, bytes);
    return NULL;
  }
  memcpy(p, &bytes, sizeof bytes);
  return p + REF_HEADER;
}

static void ref_buffer_free(toplu__backend_t *b, toplu_allocator_t *a, void *ptr) {
  (void)b;
  if (!ptr) return;
  unsigned char *p = (unsigned char *)ptr - REF_HEADER;
  size_t bytes;
  memcpy(&bytes, p, sizeof bytes);
  toplu_allocator_release(a, bytes);
  free(p);
}

static toplu_status_t ref_stream_create(toplu__backend_t *b, void **stream, toplu_error_t *err) {
  (void)b;
  (void)err;
  *stream = NULL;
  return TOPLU_OK;
}

static void ref_stream_destroy(toplu__backend_t *b, void *stream) {
  (void)b;
  (void)stream;
}

static toplu_status_t ref_synchronize(toplu__backend_t *b, void *stream) {
  (void)b;
  (void)stream;
  return TOPLU_OK;
}

static const toplu__kernel_t *const ref_families[] = {toplu__kernels_ref, NULL};

const toplu__backend_iface_t toplu__backend_reference = {
    .name = "reference",
    .device = REF_DEVICE,
    .buffer_alloc = ref_buffer_alloc,
    .buffer_free = ref_buffer_free,
    .copy_from_host = toplu__backend_host_copy,
    .copy_to_host = toplu__backend_host_copy,
    .stream_create = ref_stream_create,
    .stream_destroy = ref_stream_destroy,
    .synchronize = ref_synchronize,
    .families = ref_families,
};
