/*
 * ops/backend.h - the oneDNN engine a session's kernels share, and small
 * helpers for building oneDNN memory descriptors from toplu tensors.
 *
 * One CPU engine per session (toplu_backend_create); one stream per
 * concurrent run (toplu_backend_stream_create), so runs on different threads
 * never share a stream.  oneDNN primitives are immutable after creation and
 * may run concurrently on different streams and buffers.
 */
#ifndef TOPLU_OPS_BACKEND_H
#define TOPLU_OPS_BACKEND_H

#include <oneapi/dnnl/dnnl.h>

#include "ops/kernel.h"

struct toplu_backend {
  dnnl_engine_t engine;
};

/* Errors: TOPLU_ERR_BACKEND (oneDNN could not make a CPU engine), TOPLU_ERR_OUT_OF_MEMORY. */
toplu_status_t toplu_backend_create(toplu_backend_t **out, toplu_error_t *err);
void toplu_backend_destroy(toplu_backend_t *b);
toplu_status_t toplu_backend_stream_create(toplu_backend_t *b, dnnl_stream_t *out, toplu_error_t *err);

/* oneDNN data type for a toplu dtype (dnnl_data_type_undef when none). */
dnnl_data_type_t toplu_dnnl_dtype(toplu_dtype_t dt);

/* Plain (row-major) memory descriptor of t's shape and dtype; a scalar is [1]. */
dnnl_status_t toplu_dnnl_plain_md(dnnl_memory_desc_t *md, const toplu_tensor_t *t);

/* oneDNN status name for messages. */
const char *toplu_dnnl_status_name(dnnl_status_t s);

#endif
