/* pipeline/source_npy.c - rows of a .npy file along dim 0. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/checked.h"
#include "core/error.h"
#include "pipeline/files.h"
#include "pipeline/buf.h"
#include "pipeline/pool.h"
#include "pipeline/source.h"
#include "toplu/npy.h"

typedef struct npy_src {
  toplu_tensor_t file;  /* dtype and dims of the file (data NULL) */
  int64_t row_elems;
  toplu_tensor_t whole; /* the whole file, for an input without a batch dim */
} npy_src_t;

/* Convert n elements from one dtype to another: 0, or -1 with why for a
 * value the target type cannot hold (NaN, Inf or out of range into an
 * integer type; `what` names the input). */
static int convert(toplu_dtype_t from, const void *src, toplu_dtype_t to, void *dst, int64_t n, const char *what,
                   char *why, size_t why_size) {
  if (from == to) {
    memcpy(dst, src, (size_t)n * toplu_dtype_size(to));
    return 0;
  }
  for (int64_t i = 0; i < n; i++) {
    double v = pl_elem_get(from, src, i);
    int code = pl_elem_set(to, dst, i, v);
    if (code) {
      pl_elem_why(code, i, v, what, to, why, why_size);
      return -1;
    }
  }
  return 0;
}

/* Read rows [first, first + count) and split them into row tensors. */
static toplu_status_t npy_read(pl_source_t *s, int64_t first, int64_t count, pl_value_t *vals, char **row_err,
                               toplu_error_t *err) {
  npy_src_t *n = s->impl;
  size_t es = toplu_dtype_size(n->file.dtype), row_bytes, all_bytes, alloc;
  if (!toplu__bytes(n->row_elems, es, &row_bytes) || !toplu__bytes(count, row_bytes, &all_bytes) ||
      !toplu__add_size(all_bytes, 1, &alloc))
    return toplu__errorf(err, TOPLU_ERR_OUT_OF_MEMORY, "%s: %lld rows of %lld elements do not fit in memory", s->path,
                        (long long)count, (long long)n->row_elems);
  void *buf = pl_pool_get(s->pool, alloc); /* kept between chunks: no fresh pages to fault in each time */
  if (!buf) return toplu__errorf(err, TOPLU_ERR_OUT_OF_MEMORY, "%s: out of memory for %lld rows", s->path, (long long)count);
  toplu_status_t st = toplu_npy_read_rows(s->path, first, count, buf, alloc, err);
  if (st == TOPLU_ERR_PARSE && err) { /* its header and size were checked when it was opened: it changed since */
    toplu__error_prefix(err, "%s changed while it was read (cut short after it was opened)", s->path);
    err->status = st = TOPLU_ERR_IO;
  }
  if (st) {
    pl_pool_put(s->pool, buf, alloc);
    return st;
  }
  toplu_dtype_t to = s->field_info[0]->dtype == TOPLU_DTYPE_UNDEFINED ? n->file.dtype : s->field_info[0]->dtype;
  for (int64_t r = 0; r < count; r++) {
    pl_value_t *v = &vals[r];
    v->kind = PL_VALUE_TENSOR;
    if (pl_pool_tensor(s->pool, &v->t, to, n->file.ndim - 1, n->file.dims + 1)) { /* convert fills it */
      pl_pool_put(s->pool, buf, alloc);
      return toplu__errorf(err, TOPLU_ERR_OUT_OF_MEMORY, "%s: out of memory", s->path);
    }
    char why[256];
    if (convert(n->file.dtype, (char *)buf + (size_t)r * row_bytes, to, v->t.data, n->row_elems,
                s->field_info[0]->name, why, sizeof why)) {
      pl_value_release(s->pool, v);
      if (!(row_err[r] = strdup(why))) {
        pl_pool_put(s->pool, buf, alloc);
        return toplu__errorf(err, TOPLU_ERR_OUT_OF_MEMORY, "%s: out of memory", s->path);
      }
    }
  }
  pl_pool_put(s->pool, buf, alloc);
  return TOPLU_OK;
}

/* Ids are row numbers. */
static const char *npy_id(const pl_source_t *s, int64_t row) {
  (void)s;
  (void)row;
  return NULL;
}

/* Free the header copy and the whole tensor. */
static void npy_destroy(pl_source_t *s) {
  npy_src_t *n = s->impl;
  if (n) toplu_tensor_free(&n->whole);
  free(s->impl);
  s->impl = NULL;
}

static const pl_source_ops_t npy_ops = {"npy", npy_read, npy_id, npy_destroy};


/* Read the whole file for an input without a batch dim, converted and checked. */
static toplu_status_t read_whole(pl_source_t *s, npy_src_t *n, toplu_error_t *err) {
  const toplu_value_info_t *info = s->field_info[0];
  toplu_tensor_t raw;
  toplu_status_t st = toplu_npy_read(s->path, &raw, err);
  if (st) return toplu__error_prefix(err, "input '%s'", info->name), st;
  toplu_dtype_t to = info->dtype == TOPLU_DTYPE_UNDEFINED ? raw.dtype : info->dtype;
  if (toplu_tensor_alloc(&n->whole, to, raw.ndim, raw.dims)) {
    toplu_tensor_free(&raw);
    return toplu__errorf(err, TOPLU_ERR_OUT_OF_MEMORY, "input '%s' (%s): out of memory", info->name, s->path);
  }
  char why[256];
  int bad = convert(raw.dtype, raw.data, to, n->whole.data, toplu_tensor_numel(&raw), info->name, why, sizeof why);
  toplu_tensor_free(&raw);
  if (bad)
    return toplu__errorf(err, TOPLU_ERR_INVALID_ARGUMENT, "%s (%s); it is passed whole to every batch, so every row "
                        "would fail", why, s->path);
  /* non-finite values are the job's to judge (allow_nonfinite) */
  s->whole_t = &n->whole;
  s->rows = -1;
  return TOPLU_OK;
}

toplu_status_t pl_source_npy_open(pl_source_t *s, const toplu_model_t *model, toplu_error_t *err) {
  npy_src_t *n = calloc(1, sizeof *n);
  if (!n) return toplu__errorf(err, TOPLU_ERR_OUT_OF_MEMORY, "out of memory for the source %s", s->path);
  s->impl = n;
  s->ops = &npy_ops;
  const toplu_value_info_t *info = s->field_info[0];
  long data_off = 0;
  toplu_status_t st = toplu_npy_read_header(s->path, &n->file, &data_off, err);
  /* A file toplu cannot read as an array (rank above the limit, an unknown
   * format version, a structured dtype) is bad input. */
  if (st == TOPLU_ERR_UNSUPPORTED) {
    st = TOPLU_ERR_PARSE;
    if (err) err->status = st;
  }
  if (st) return toplu__error_prefix(err, "input '%s'", info->name), st;
  { /* the whole array is there now (a file cut short later is an I/O error of the read: npy_read) */
    uint64_t numel = toplu_shape_numel_limited(n->file.ndim, n->file.dims, UINT64_MAX / 16);
    int64_t size = pl_file_size(s->path);
    if (numel != UINT64_MAX && size >= 0 &&
        (uint64_t)size < (uint64_t)data_off + numel * toplu_dtype_size(n->file.dtype))
      return toplu__errorf(err, TOPLU_ERR_PARSE,
                          "input '%s': %s: truncated .npy file: its header describes %llu elements of %s (%llu bytes "
                          "after a %ld-byte header) but the file has %lld bytes",
                          info->name, s->path, (unsigned long long)numel, toplu_dtype_name(n->file.dtype),
                          (unsigned long long)(numel * toplu_dtype_size(n->file.dtype)), data_off, (long long)size);
  }
  char got[256], want[256];
  toplu_shape_format(n->file.ndim, n->file.dims, got, sizeof got);
  pl_format_info_dims(info, want, sizeof want);
  if (!pl_dtype_numeric(n->file.dtype))
    return toplu__errorf(err, TOPLU_ERR_INVALID_ARGUMENT, "input '%s' (%s): dtype %s is not numeric", info->name,
                        s->path, toplu_dtype_name(n->file.dtype));
  int64_t fb = toplu_model_fixed_batch_size(model);
  int fixed = fb > 0;
  int whole = n->file.ndim == 0 || pl_input_passed_whole(model, info) ||
              /* no batch dim anywhere: every input is one tensor (data [2, 3, 4]
               * beside shape [4] are no rows of one batch, and an input that
               * decides shapes needs its values to plan) */
              !pl_model_has_batch(model) ||
              /* a model that fixes batch 1 (or a static batch b), given exactly one row (b rows): the
               * tensor as the model declares it (its values may decide shapes: Squeeze's axes) */
              (fixed && info->ndim >= 1 && n->file.ndim == info->ndim && n->file.dims[0] == fb);
  if (info->ndim >= 0) {
    if (n->file.ndim != info->ndim)
      return toplu__errorf(err, TOPLU_ERR_SHAPE, "input '%s' (%s): shape %s has rank %d, the model expects rank %d: %s",
                          info->name, s->path, got, n->file.ndim, info->ndim, want);
    for (int d = whole ? 0 : 1; d < info->ndim; d++)
      if (info->dims[d] >= 0 && info->dims[d] != n->file.dims[d] && !(d == 0 && fixed))
        return toplu__errorf(err, TOPLU_ERR_SHAPE, "input '%s' (%s): shape %s, the model expects %s (dim %d must be %lld)",
                            info->name, s->path, got, want, d, (long long)info->dims[d]);
  }
  s->row_dtype = info->dtype == TOPLU_DTYPE_UNDEFINED ? n->file.dtype : info->dtype;
  if (whole) {
    s->row_ndim = n->file.ndim;
    memcpy(s->row_dims, n->file.dims, sizeof(int64_t) * (size_t)n->file.ndim);
    return read_whole(s, n, err);
  }
  if (!toplu__shape_numel(n->file.ndim - 1, n->file.dims + 1, &n->row_elems))
    return toplu__errorf(err, TOPLU_ERR_SHAPE, "input '%s' (%s): shape %s: a row has more than %s elements", info->name,
                        s->path, got, TOPLU_MAX_ELEMENTS_TEXT);
  s->row_ndim = n->file.ndim - 1;
  memcpy(s->row_dims, n->file.dims + 1, sizeof(int64_t) * (size_t)s->row_ndim);
  s->rows = n->file.dims[0];
  return TOPLU_OK;
}
