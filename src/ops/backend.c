/* ops/backend.c - oneDNN engine and descriptor helpers. */
#include <stdlib.h>

#include "ops/backend.h"

toplu_status_t toplu_backend_create(toplu_backend_t **out, toplu_error_t *err) {
  toplu_backend_t *b = calloc(1, sizeof *b);
  if (!b) return toplu_errorf(err, TOPLU_ERR_OUT_OF_MEMORY, "out of memory creating the oneDNN engine");
  dnnl_status_t s = dnnl_engine_create(&b->engine, dnnl_cpu, 0);
  if (s != dnnl_success) {
    free(b);
    return toplu_errorf(err, TOPLU_ERR_BACKEND, "oneDNN: cannot create a CPU engine (%s)", toplu_dnnl_status_name(s));
  }
  *out = b;
  return TOPLU_OK;
}

void toplu_backend_destroy(toplu_backend_t *b) {
  if (!b) return;
  if (b->engine) dnnl_engine_destroy(b->engine);
  free(b);
}

toplu_status_t toplu_backend_stream_create(toplu_backend_t *b, dnnl_stream_t *out, toplu_error_t *err) {
  dnnl_status_t s = dnnl_stream_create(out, b->engine, dnnl_stream_default_flags);
  if (s != dnnl_success)
    return toplu_errorf(err, TOPLU_ERR_BACKEND, "oneDNN: cannot create a stream (%s)", toplu_dnnl_status_name(s));
  return TOPLU_OK;
}

dnnl_data_type_t toplu_dnnl_dtype(toplu_dtype_t dt) {
  switch (dt) {
    case TOPLU_DTYPE_FLOAT: return dnnl_f32;
    case TOPLU_DTYPE_FLOAT16: return dnnl_f16;
    case TOPLU_DTYPE_BFLOAT16: return dnnl_bf16;
    case TOPLU_DTYPE_INT32: return dnnl_s32;
    case TOPLU_DTYPE_INT8: return dnnl_s8;
    case TOPLU_DTYPE_UINT8: return dnnl_u8;
    default: return dnnl_data_type_undef;
  }
}

dnnl_status_t toplu_dnnl_plain_md(dnnl_memory_desc_t *md, const toplu_tensor_t *t) {
  dnnl_dims_t dims;
  int nd = t->ndim;
  if (nd == 0) {
    dims[0] = 1;
    nd = 1;
  } else {
    for (int i = 0; i < nd; i++) dims[i] = t->dims[i];
  }
  dnnl_dims_t strides;
  int64_t s = 1;
  for (int i = nd - 1; i >= 0; i--) {
    strides[i] = s;
    s *= dims[i] ? dims[i] : 1;
  }
  return dnnl_memory_desc_init_by_strides(md, nd, dims, toplu_dnnl_dtype(t->dtype), strides);
}

const char *toplu_dnnl_status_name(dnnl_status_t s) {
  switch (s) {
    case dnnl_success: return "success";
    case dnnl_out_of_memory: return "out of memory";
    case dnnl_invalid_arguments: return "invalid arguments";
    case dnnl_unimplemented: return "unimplemented";
    case dnnl_iterator_ends: return "iterator ends";
    case dnnl_runtime_error: return "runtime error";
    case dnnl_not_required: return "not required";
    default: return "unknown oneDNN status";
  }
}
