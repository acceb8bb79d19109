/*
 * ops/backend.h - the backend seam: what a plan needs from whatever runs its
 * kernels (oneDNN on the CPU today, plain-C reference kernels, later CUDA).
 *
 * The same idea as ggml-backend (ggml-backend-impl.h: buffer types, backend
 * and device interfaces, supports_op), smaller.  A backend is a table of
 * functions (toplu__backend_iface_t) and an instance of it per session
 * (toplu__backend_t):
 *
 *   memory     buffer_alloc/buffer_free, counted by size through the
 *              session's allocator (toplu_allocator_alloc for host memory;
 *              toplu_allocator_reserve/release around memory the backend
 *              allocates itself, as a GPU's), so device memory is counted
 *              and limited like host memory.  `device` says where the memory is
 *              (TOPLU_DEVICE_HOST or the backend's own id); tensors carry
 *              it (toplu_tensor_t.device).
 *   copies     copy_from_host / copy_to_host move bytes between host memory
 *              and the backend's; the plan inserts a Copy step wherever a
 *              tensor produced on one device is read on another (as it
 *              inserts Reorder steps between layouts), and uploads
 *              constants once at plan time.
 *   streams    one per concurrent run (stream_create/stream_destroy);
 *              synchronize waits for the work queued on one.  Kernels get
 *              their backend's stream in ctx->stream; a Copy step gets the
 *              stream of its non-host side, and the plan calls synchronize
 *              on it before copying to host memory, and on every backend
 *              but the CPU's at the end of each run.
 *   layouts    opaque descriptions owned by kernel state (a oneDNN memory
 *              descriptor for the CPU backend); layout_bytes gives the
 *              storage size, layout_equal compares, layout_describe names
 *              one for plan dumps.  NULL layout = plain row-major.
 *   kernels    families of toplu__kernel_t (ops/kernel.h), searched in order:
 *              toplu__backend_candidates() lists every kernel for an op, most
 *              specialised first, and the plan takes the first whose
 *              supports() and prepare() accept the node.
 *
 * A session holds its backends in order of preference
 * (toplu_session_options_t.backends); each node runs on the first backend
 * with a kernel that accepts it.  Thread-safety: an iface is immutable;
 * a backend instance is shared by the session's plans and runs, so its
 * functions must be thread-safe (streams are per run).
 */
#ifndef TOPLU_OPS_BACKEND_H
#define TOPLU_OPS_BACKEND_H

#include <stddef.h>

#include "ops/kernel.h"
#include "toplu/alloc.h"
#include "toplu/status.h"
#include "toplu/tensor.h"

typedef struct toplu__backend_iface {
  const char *name;   /* "cpu", "reference" */
  int device;         /* where its buffers live: TOPLU_DEVICE_HOST or its own id (>0) */
  /* Instance state (b->impl).  Errors: TOPLU_ERR_BACKEND, TOPLU_ERR_OUT_OF_MEMORY. */
  toplu_status_t (*init)(toplu__backend_t *b, toplu_error_t *err);
  void (*fini)(toplu__backend_t *b);
  /* Memory of this backend, 64-byte aligned, counted by a (may be NULL). */
  void *(*buffer_alloc)(toplu__backend_t *b, toplu_allocator_t *a, size_t bytes);
  void (*buffer_free)(toplu__backend_t *b, toplu_allocator_t *a, void *p);
  /* bytes between host memory and this backend's; stream may be NULL
   * (then the copy is complete on return). */
  toplu_status_t (*copy_from_host)(toplu__backend_t *b, void *dst, const void *src, size_t bytes, void *stream);
  toplu_status_t (*copy_to_host)(toplu__backend_t *b, void *dst, const void *src, size_t bytes, void *stream);
  toplu_status_t (*stream_create)(toplu__backend_t *b, void **stream, toplu_error_t *err);
  void (*stream_destroy)(toplu__backend_t *b, void *stream);
  toplu_status_t (*synchronize)(toplu__backend_t *b, void *stream);
  /* Layouts (NULL functions: the backend only knows plain row-major). */
  size_t (*layout_bytes)(const void *layout);
  int (*layout_equal)(const void *a, const void *b);
  const char *(*layout_describe)(const void *layout, char *buf, size_t size);
  /* Layout change within the backend (ops/kernel.h toplu__kernel_reorder's
   * contract); NULL when it has no layouts of its own. */
  const toplu__kernel_t *reorder;
  /* Kernel families, NULL-terminated, most preferred first. */
  const toplu__kernel_t *const *families;
  /* A plan build's bracket around its steps' prepare calls (NULL: none):
   * between prepare_begin and prepare_end the calling thread's kernels of
   * this backend may leave costly work of their prepare to prepare_end
   * (the CPU backend: oneDNN primitive creation), which does it on
   * `threads` threads.  prepare_end is called once per prepare_begin, on
   * the same thread, with ok 0 when the build failed (then it only drops
   * what was left); brackets nest.  Errors: TOPLU_ERR_BACKEND,
   * TOPLU_ERR_OUT_OF_MEMORY. */
  void (*prepare_begin)(toplu__backend_t *b);
  toplu_status_t (*prepare_end)(toplu__backend_t *b, int threads, int ok, toplu_error_t *err);
} toplu__backend_iface_t;

struct toplu__backend {
  const toplu__backend_iface_t *iface;
  void *impl;          /* the backend's own state (oneDNN engine, packed weights) */
  /* Op types this instance is used for ("Conv+Relu"), NULL: every op.  A
   * fused node matches by its op type (Conv for Conv+Relu). */
  char *ops;
};

/* The interfaces toplu is built with, by name ("cpu", "reference"); NULL
 * when there is none of that name.  "onednn" is another name of "cpu". */
const toplu__backend_iface_t *toplu__backend_iface_find(const char *name);

/* Names of the built-in backends (ifaces[] of ops/registry.c),
 * comma-separated, for messages.  Thread-safe. */
const char *toplu__backend_names(void);

/*
 * Backends from a list "reference:Conv+Relu,cpu" (see
 * toplu_session_options_t.backends): *out gets *n instances in order (free
 * with toplu__backends_destroy).  The CPU backend is added last when the
 * list lacks it, so constant folding and every op it has stay available.
 * Errors: TOPLU_ERR_INVALID_ARGUMENT (unknown name, naming the choices),
 * TOPLU_ERR_BACKEND, TOPLU_ERR_OUT_OF_MEMORY.
 */
toplu_status_t toplu__backends_create(const char *list, toplu__backend_t ***out, int *n, toplu_error_t *err);
void toplu__backends_destroy(toplu__backend_t **b, int n);

/* One backend instance of iface (ops: NULL for every op). */
toplu_status_t toplu__backend_create_iface(const toplu__backend_iface_t *iface, const char *ops, toplu__backend_t **out,
                                          toplu_error_t *err);
void toplu__backend_free(toplu__backend_t *b);

/* copy_from_host/copy_to_host of a backend whose memory the host reads and
 * writes directly (memcpy; stream unused). */
toplu_status_t toplu__backend_host_copy(toplu__backend_t *b, void *dst, const void *src, size_t bytes, void *stream);

/* 1 when b is meant to run op_type (its ops filter). */
int toplu__backend_takes(const toplu__backend_t *b, const char *op_type);

/*
 * The kernels b has for (domain, op_type), in order of preference, into
 * out[0..cap-1]; returns how many there are (may exceed cap).
 */
int toplu__backend_candidates(const toplu__backend_t *b, const char *domain, const char *op_type,
                             const toplu__kernel_t **out, int cap);

/* The CPU backend (oneDNN and toplu's own kernels; ops/onednn/onednn.c). */
extern const toplu__backend_iface_t toplu__backend_cpu;
/* Plain-C reference kernels with buffers of their own (ops/ref/). */
extern const toplu__backend_iface_t toplu__backend_reference;

#endif
