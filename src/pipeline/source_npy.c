/* pipeline/source_npy.c - rows of a .npy file along dim 0. */
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "pipeline/source.h"
#include "toplu/npy.h"

typedef struct npy_src {
  toplu_tensor_t file; /* dtype and dims of the file (data NULL) */
  int64_t row_elems;
} npy_src_t;

/* Convert n elements from one dtype to another. */
static void convert(toplu_dtype_t from, const void *src, toplu_dtype_t to, void *dst, int64_t n) {
  if (from == to) {
    memcpy(dst, src, (size_t)n * toplu_dtype_size(to));
    return;
  }
  for (int64_t i = 0; i < n; i++) pl_elem_set(to, dst, i, pl_elem_get(from, src, i));
}

/* Read rows [first, first + count) and split them into row tensors. */
static toplu_status_t npy_read(pl_source_t *s, int64_t first, int64_t count, pl_value_t *vals, char **row_err,
                               toplu_error_t *err) {
  (void)row_err;
  npy_src_t *n = s->impl;
  size_t es = toplu_dtype_size(n->file.dtype), row_bytes = (size_t)n->row_elems * es;
  void *buf = malloc(row_bytes * (size_t)count + 1);
  if (!buf) return toplu_errorf(err, TOPLU_ERR_OUT_OF_MEMORY, "%s: out of memory for %lld rows", s->path, (long long)count);
  toplu_status_t st = toplu_npy_read_rows(s->path, first, count, buf, row_bytes * (size_t)count + 1, err);
  if (st) {
    free(buf);
    return st;
  }
  toplu_dtype_t to = s->field_info[0]->dtype == TOPLU_DTYPE_UNDEFINED ? n->file.dtype : s->field_info[0]->dtype;
  for (int64_t r = 0; r < count; r++) {
    pl_value_t *v = &vals[r];
    v->kind = PL_VALUE_TENSOR;
    if (toplu_tensor_alloc(&v->t, to, n->file.ndim - 1, n->file.dims + 1)) {
      free(buf);
      return toplu_errorf(err, TOPLU_ERR_OUT_OF_MEMORY, "%s: out of memory", s->path);
    }
    convert(n->file.dtype, (char *)buf + (size_t)r * row_bytes, to, v->t.data, n->row_elems);
  }
  free(buf);
  return TOPLU_OK;
}

/* Ids are row numbers. */
static const char *npy_id(const pl_source_t *s, int64_t row) {
  (void)s;
  (void)row;
  return NULL;
}

/* Free the header copy. */
static void npy_destroy(pl_source_t *s) {
  free(s->impl);
  s->impl = NULL;
}

static const pl_source_ops_t npy_ops = {"npy", npy_read, npy_id, npy_destroy};

toplu_status_t pl_source_npy_open(pl_source_t *s, toplu_error_t *err) {
  npy_src_t *n = calloc(1, sizeof *n);
  if (!n) return toplu_errorf(err, TOPLU_ERR_OUT_OF_MEMORY, "out of memory for the source %s", s->path);
  s->impl = n;
  s->ops = &npy_ops;
  toplu_status_t st = toplu_npy_read_header(s->path, &n->file, NULL, err);
  /* A file toplu cannot read as an array (rank above the limit, an unknown
   * format version, a structured dtype) is bad input, as on the direct path. */
  if (st == TOPLU_ERR_UNSUPPORTED) {
    st = TOPLU_ERR_PARSE;
    if (err) err->status = st;
  }
  if (st) return st;
  const toplu_value_info_t *info = s->field_info[0];
  char got[256], want[256];
  toplu_shape_format(n->file.ndim, n->file.dims, got, sizeof got);
  if (n->file.ndim < 1)
    return toplu_errorf(err, TOPLU_ERR_SHAPE, "%s: a scalar; a job reads rows along dim 0", s->path);
  if (!pl_dtype_numeric(n->file.dtype))
    return toplu_errorf(err, TOPLU_ERR_INVALID_ARGUMENT, "%s: dtype %s is not numeric", s->path,
                        toplu_dtype_name(n->file.dtype));
  if (info->ndim >= 0) {
    toplu_shape_format(info->ndim, info->dims, want, sizeof want);
    if (n->file.ndim != info->ndim)
      return toplu_errorf(err, TOPLU_ERR_SHAPE, "%s: shape %s has rank %d, input '%s' has rank %d %s", s->path, got,
                          n->file.ndim, info->name, info->ndim, want);
    for (int d = 1; d < info->ndim; d++)
      if (info->dims[d] >= 0 && info->dims[d] != n->file.dims[d])
        return toplu_errorf(err, TOPLU_ERR_SHAPE, "%s: shape %s, input '%s' needs dim %d = %lld (%s; -1 is free)",
                            s->path, got, info->name, d, (long long)info->dims[d], want);
  }
  n->row_elems = 1;
  for (int d = 1; d < n->file.ndim; d++) n->row_elems *= n->file.dims[d];
  s->rows = n->file.dims[0];
  return TOPLU_OK;
}
