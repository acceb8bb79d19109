/*
 * serve/perf_data.c - toplu perf's request bodies: random, zero, .npy,
 * perf_analyzer's JSON input data or its input-data directory, as KServe v2 JSON or with the binary
 * tensor data extension (see toplu/perf.h and serve/perf_priv.h).
 */
#include <errno.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "core/checked.h"
#include "core/error.h"
#include "serve/perf_priv.h"
#include "toplu/npy.h"

/* Largest request body toplu perf builds: 1 GiB. */
#define PERF_MAX_BODY ((size_t)1 << 30)

uint64_t srv_perf_rand(uint64_t *s) {
  uint64_t x = *s ? *s : 0x9E3779B97F4A7C15u;
  x ^= x >> 12;
  x ^= x << 25;
  x ^= x >> 27;
  *s = x;
  return x * 0x2545F4914F6CDD1Du;
}

/* One input's data for one body: numeric bytes, or strings for BYTES. */
typedef struct perf_tensor {
  int ndim;
  int64_t dims[TOPLU_MAX_DIMS]; /* the request shape */
  int64_t numel;
  void *data;    /* numeric: numel elements */
  char **strs;   /* BYTES: numel strings */
} perf_tensor_t;

static void tensor_free(perf_tensor_t *t) {
  if (t->strs)
    for (int64_t i = 0; i < t->numel; i++) free(t->strs[i]);
  free(t->strs);
  free(t->data);
  memset(t, 0, sizeof *t);
}

/* Allocate t for shape (ndim, dims) of in's dtype; zeroed, strings "". */
static toplu_status_t tensor_alloc(perf_tensor_t *t, const srv_perf_input_t *in, int ndim, const int64_t *dims,
                                   toplu_error_t *err) {
  memset(t, 0, sizeof *t);
  t->ndim = ndim;
  memcpy(t->dims, dims, sizeof(int64_t) * (size_t)ndim);
  int64_t numel;
  size_t bytes;
  size_t esz = in->dtype == TOPLU_DTYPE_STRING ? sizeof(char *) : toplu_dtype_size(in->dtype);
  if (!toplu__shape_numel(ndim, dims, &numel) || !toplu__bytes(numel, esz, &bytes) || bytes > PERF_MAX_BODY)
    return toplu__errorf(err, TOPLU_ERR_SHAPE, "input '%s': a request of this shape is over 1 GiB", in->name);
  t->numel = numel;
  if (in->dtype == TOPLU_DTYPE_STRING) {
    t->strs = calloc(numel ? (size_t)numel : 1, sizeof(char *));
    for (int64_t i = 0; t->strs && i < numel; i++)
      if (!(t->strs[i] = calloc(1, 1))) {
        tensor_free(t);
        break;
      }
    if (!t->strs) return toplu__errorf(err, TOPLU_ERR_OUT_OF_MEMORY, "input '%s': out of memory", in->name);
  } else if (!(t->data = calloc(bytes ? bytes : 1, 1))) {
    return toplu__errorf(err, TOPLU_ERR_OUT_OF_MEMORY, "input '%s': out of memory for %zu bytes", in->name, bytes);
  }
  return TOPLU_OK;
}

/* Fill t with random values of its dtype. */
static void tensor_random(perf_tensor_t *t, toplu_dtype_t dtype, uint64_t *rng) {
  for (int64_t i = 0; i < t->numel; i++) {
    uint64_t r = srv_perf_rand(rng);
    if (dtype == TOPLU_DTYPE_STRING) {
      char *s = malloc(9);
      if (!s) continue;
      for (int k = 0; k < 8; k++) s[k] = (char)('a' + (r >> (8 * k)) % 26);
      s[8] = '\0';
      free(t->strs[i]);
      t->strs[i] = s;
    } else if (dtype == TOPLU_DTYPE_BOOL) {
      pl_elem_set(dtype, t->data, i, (double)(r >> 63));
    } else if (pl_dtype_float(dtype)) {
      pl_elem_set(dtype, t->data, i, (double)(r >> 11) / 9007199254740992.0);
    } else {
      pl_elem_set(dtype, t->data, i, (double)(r % 100));
    }
  }
}

/* Repeat unit (one batch row) `batch` times into t. */
static toplu_status_t tensor_repeat(perf_tensor_t *t, const perf_tensor_t *unit, const srv_perf_input_t *in,
                                    int64_t batch, toplu_error_t *err) {
  int64_t dims[TOPLU_MAX_DIMS];
  if (unit->ndim + 1 > TOPLU_MAX_DIMS)
    return toplu__errorf(err, TOPLU_ERR_SHAPE, "input '%s': rank %d with the batch dim is over %d", in->name,
                         unit->ndim + 1, TOPLU_MAX_DIMS);
  dims[0] = batch;
  memcpy(dims + 1, unit->dims, sizeof(int64_t) * (size_t)unit->ndim);
  toplu_status_t st = tensor_alloc(t, in, unit->ndim + 1, dims, err);
  if (st) return st;
  for (int64_t b = 0; b < batch; b++) {
    if (in->dtype == TOPLU_DTYPE_STRING) {
      for (int64_t i = 0; i < unit->numel; i++) {
        char *s = strdup(unit->strs[i]);
        if (!s) {
          tensor_free(t);
          return toplu__errorf(err, TOPLU_ERR_OUT_OF_MEMORY, "input '%s': out of memory", in->name);
        }
        free(t->strs[b * unit->numel + i]);
        t->strs[b * unit->numel + i] = s;
      }
    } else {
      size_t esz = toplu_dtype_size(in->dtype);
      memcpy((char *)t->data + (size_t)(b * unit->numel) * esz, unit->data, (size_t)unit->numel * esz);
    }
  }
  return TOPLU_OK;
}

/* The shape of one unit (a batch row, or the whole tensor) of input in:
 * its request dims without the batch dim; -1 left where unresolved. */
static int unit_shape(const srv_perf_input_t *in, int batching, int64_t *dims) {
  int off = batching ? 1 : 0;
  for (int d = off; d < in->req_ndim; d++) dims[d - off] = in->req_dims[d];
  return in->req_ndim - off;
}

static int shape_resolved(int ndim, const int64_t *dims) {
  for (int d = 0; d < ndim; d++)
    if (dims[d] < 0) return 0;
  return 1;
}

static toplu_status_t unresolved(const srv_perf_input_t *in, toplu_error_t *err) {
  char buf[160];
  toplu_shape_format(in->ndim, in->meta_dims, buf, sizeof buf);
  return toplu__errorf(err, TOPLU_ERR_SHAPE,
                       "input '%s' has variable dims %s: give its shape in shapes (NAME:D1,D2,...)", in->name, buf);
}

/* Set element i of t from a JSON value; 0 or -1 with why. */
static int set_json_elem(perf_tensor_t *t, toplu_dtype_t dtype, int64_t i, const json_t *v, char *why, size_t size) {
  if (dtype == TOPLU_DTYPE_STRING) {
    if (!json_is_string(v)) return snprintf(why, size, "element %lld is not a string", (long long)i), -1;
    char *s = strdup(json_string_value(v));
    if (!s) return snprintf(why, size, "out of memory"), -1;
    free(t->strs[i]);
    t->strs[i] = s;
    return 0;
  }
  double d;
  if (json_is_boolean(v))
    d = json_is_true(v) ? 1 : 0;
  else if (json_is_number(v))
    d = json_number_value(v);
  else
    return snprintf(why, size, "element %lld is not a number", (long long)i), -1;
  int rc = json_is_integer(v) ? pl_elem_set_num(dtype, t->data, i,
                                                &(pl_num_t){.d = d, .i = (int64_t)json_integer_value(v), .exact = 1})
                              : pl_elem_set(dtype, t->data, i, d);
  if (rc != PL_ELEM_OK) {
    pl_elem_why(rc, i, d, "value", dtype, why, size);
    return -1;
  }
  return 0;
}

/* Count the leaves of a (possibly nested) JSON array. */
static int64_t json_leaves(const json_t *a) {
  if (!json_is_array(a)) return 1;
  int64_t n = 0;
  for (size_t i = 0; i < json_array_size(a); i++) n += json_leaves(json_array_get(a, i));
  return n;
}

static int fill_json(perf_tensor_t *t, toplu_dtype_t dtype, const json_t *a, int64_t *k, char *why, size_t size) {
  if (!json_is_array(a)) return set_json_elem(t, dtype, (*k)++, a, why, size);
  for (size_t i = 0; i < json_array_size(a); i++)
    if (fill_json(t, dtype, json_array_get(a, i), k, why, size)) return -1;
  return 0;
}

/* Decode base64 (RFC 4648, standard alphabet; '=' padding optional) into a
 * malloc'ed *out of *n bytes.  Returns 0, or -1 (not base64, or out of
 * memory: *out NULL) with why set. */
static int b64_decode(const char *s, unsigned char **out, size_t *n, const char **why) {
  size_t len = strlen(s);
  while (len && s[len - 1] == '=') len--;
  *out = malloc(len / 4 * 3 + 3);
  *n = 0;
  if (!*out) return *why = "out of memory", -1;
  uint32_t acc = 0;
  int bits = 0;
  for (size_t i = 0; i < len; i++) {
    int c = (unsigned char)s[i], v;
    if (c >= 'A' && c <= 'Z') v = c - 'A';
    else if (c >= 'a' && c <= 'z') v = c - 'a' + 26;
    else if (c >= '0' && c <= '9') v = c - '0' + 52;
    else if (c == '+') v = 62;
    else if (c == '/') v = 63;
    else {
      free(*out);
      *out = NULL;
      return *why = "not base64 (a character outside A-Z a-z 0-9 + / =)", -1;
    }
    acc = (acc << 6) | (uint32_t)v;
    bits += 6;
    if (bits >= 8) {
      bits -= 8;
      (*out)[(*n)++] = (unsigned char)(acc >> bits);
    }
  }
  if (len % 4 == 1) {
    free(*out);
    *out = NULL;
    return *why = "not base64 (its length leaves a lone character)", -1;
  }
  return 0;
}

/* The one dim of dims left open (< 0) set so the shape holds count elements; -1 when more or none are open,
 * count does not divide, or (zero 0) count is 0. */
static int open_dim(int ndim, int64_t *dims, int64_t count, int zero) {
  int unknown = -1, n_unknown = 0;
  int64_t known = 1;
  for (int d = 0; d < ndim; d++)
    if (dims[d] < 0) unknown = d, n_unknown++;
    else known *= dims[d] ? dims[d] : 1;
  if (n_unknown != 1 || count % known || (!zero && count == 0)) return -1;
  dims[unknown] = count / known;
  return 0;
}

/* One input's unit from the raw little-endian bytes of one request's values (taken: freed here); `what` names
 * them in errors ("FILE: data[3].x.b64", "DIR/x").  One dim the model leaves open is read off the byte count. */
static toplu_status_t unit_from_raw(perf_tensor_t *u, const srv_perf_input_t *in, int ndim, int64_t *dims,
                                    unsigned char *raw, size_t nraw, const char *what, toplu_error_t *err) {
  size_t es = toplu_dtype_size(in->dtype);
  if (!shape_resolved(ndim, dims) && (nraw % es || open_dim(ndim, dims, (int64_t)(nraw / es), 0))) {
    free(raw);
    return unresolved(in, err);
  }
  toplu_status_t st = tensor_alloc(u, in, ndim, dims, err);
  if (st) {
    free(raw);
    return st;
  }
  size_t want = (size_t)u->numel * es;
  if (nraw != want) {
    int64_t numel = u->numel;
    tensor_free(u);
    free(raw);
    return toplu__errorf(err, TOPLU_ERR_SHAPE, "%s: %zu bytes for a shape of %lld elements of %zu bytes (%zu bytes)",
                         what, nraw, (long long)numel, es, want);
  }
  if (want) memcpy(u->data, raw, want); /* little-endian hosts: the bytes as they are */
  free(raw);
  return TOPLU_OK;
}

/* One input's unit from perf_analyzer's {"b64": "..."}: the raw
 * little-endian bytes of the input's elements, as many as the shape holds. */
static toplu_status_t unit_from_b64(perf_tensor_t *u, const srv_perf_input_t *in, int ndim, int64_t *dims, const json_t *b64,
                                    const char *path, size_t entry, toplu_error_t *err) {
  if (!json_is_string(b64))
    return toplu__errorf(err, TOPLU_ERR_PARSE, "%s: data[%zu].%s.b64: not a string", path, entry, in->name);
  if (in->dtype == TOPLU_DTYPE_STRING)
    return toplu__errorf(err, TOPLU_ERR_UNSUPPORTED, "%s: data[%zu].%s.b64: not supported for a BYTES input (give the strings)",
                         path, entry, in->name);
  unsigned char *raw;
  size_t nraw;
  const char *why;
  if (b64_decode(json_string_value(b64), &raw, &nraw, &why))
    return toplu__errorf(err, TOPLU_ERR_PARSE, "%s: data[%zu].%s.b64: %s", path, entry, in->name, why);
  char what[512];
  snprintf(what, sizeof what, "%s: data[%zu].%s.b64", path, entry, in->name);
  return unit_from_raw(u, in, ndim, dims, raw, nraw, what, err);
}

/* Reads the whole of path (at most PERF_MAX_BODY bytes) into *data (malloc'ed, NUL-terminated), *n bytes. */
static toplu_status_t read_whole(const char *path, const char *input, unsigned char **data, size_t *n,
                                 toplu_error_t *err) {
  *data = NULL;
  *n = 0;
  FILE *f = fopen(path, "rb");
  if (!f)
    return toplu__errorf(err, errno == ENOENT ? TOPLU_ERR_NOT_FOUND : TOPLU_ERR_IO,
                         "%s: %s (an input-data directory holds one file per input, named as the input: '%s')", path,
                         strerror(errno), input);
  size_t cap = 1 << 16, len = 0;
  unsigned char *b = malloc(cap + 1);
  toplu_status_t st = b ? TOPLU_OK : toplu__errorf(err, TOPLU_ERR_OUT_OF_MEMORY, "%s: out of memory", path);
  while (!st) {
    if (len == cap) {
      if (cap >= PERF_MAX_BODY) {
        st = toplu__errorf(err, TOPLU_ERR_SHAPE, "%s: over 1 GiB for one request of input '%s'", path, input);
        break;
      }
      unsigned char *nb = realloc(b, cap * 2 + 1);
      if (!nb) {
        st = toplu__errorf(err, TOPLU_ERR_OUT_OF_MEMORY, "%s: out of memory", path);
        break;
      }
      b = nb, cap *= 2;
    }
    size_t got = fread(b + len, 1, cap - len, f);
    len += got;
    if (got == 0) {
      if (ferror(f)) st = toplu__errorf(err, TOPLU_ERR_IO, "%s: read error", path);
      break;
    }
  }
  fclose(f);
  if (st) {
    free(b);
    return st;
  }
  b[len] = '\0';
  *data = b;
  *n = len;
  return TOPLU_OK;
}

/* One input's unit from perf_analyzer's input-data directory: DIR/NAME holds one request's values (batch 1 when
 * the model batches), raw little-endian bytes in row-major order, or for a BYTES input its strings one per line. */
static toplu_status_t unit_from_dir(perf_tensor_t *u, const srv_perf_input_t *in, int batching, const char *dir,
                                    toplu_error_t *err) {
  char path[4096];
  if (strchr(in->name, '/') || !strcmp(in->name, ".") || !strcmp(in->name, "..") ||
      (size_t)snprintf(path, sizeof path, "%s/%s", dir, in->name) >= sizeof path)
    return toplu__errorf(err, TOPLU_ERR_UNSUPPORTED,
                         "%s: input '%s' cannot be a file name in an input-data directory (use a JSON file)", dir,
                         in->name);
  int64_t dims[TOPLU_MAX_DIMS];
  int ndim = unit_shape(in, batching, dims);
  unsigned char *raw;
  size_t nraw;
  toplu_status_t st = read_whole(path, in->name, &raw, &nraw, err);
  if (st) return st;
  if (in->dtype != TOPLU_DTYPE_STRING) return unit_from_raw(u, in, ndim, dims, raw, nraw, path, err);
  /* strings: one per line ("\n" or "\r\n"); a last line without a newline counts */
  int64_t lines = 0;
  for (size_t i = 0; i < nraw; i++) lines += raw[i] == '\n';
  if (nraw && raw[nraw - 1] != '\n') lines++;
  if (!shape_resolved(ndim, dims) && open_dim(ndim, dims, lines, 1)) {
    free(raw);
    return unresolved(in, err);
  }
  if ((st = tensor_alloc(u, in, ndim, dims, err))) {
    free(raw);
    return st;
  }
  if (lines != u->numel) {
    int64_t numel = u->numel;
    tensor_free(u);
    free(raw);
    return toplu__errorf(err, TOPLU_ERR_SHAPE, "%s: %lld lines (strings) for a shape of %lld elements", path,
                         (long long)lines, (long long)numel);
  }
  size_t at = 0;
  for (int64_t k = 0; k < u->numel; k++) {
    size_t e = at;
    while (e < nraw && raw[e] != '\n') e++;
    size_t len = e - at;
    if (len && raw[at + len - 1] == '\r') len--;
    char *s = malloc(len + 1);
    if (!s) {
      tensor_free(u);
      free(raw);
      return toplu__errorf(err, TOPLU_ERR_OUT_OF_MEMORY, "%s: out of memory", path);
    }
    memcpy(s, raw + at, len);
    s[len] = '\0';
    free(u->strs[k]);
    u->strs[k] = s;
    at = e + 1;
  }
  free(raw);
  return TOPLU_OK;
}

/* One input's unit from a perf_analyzer data entry's value: an array of
 * values, {"content": [...], "shape": [...]}, or {"b64": "..."} (with an
 * optional "shape" beside it, or as the content). */
static toplu_status_t unit_from_json(perf_tensor_t *u, const srv_perf_input_t *in, int batching, const json_t *v,
                                     const char *path, size_t entry, toplu_error_t *err) {
  int64_t dims[TOPLU_MAX_DIMS];
  int ndim = unit_shape(in, batching, dims);
  const json_t *content = v;
  if (json_is_object(v)) {
    content = json_object_get(v, "content");
    const json_t *shape = json_object_get(v, "shape");
    if (!content) content = json_object_get(v, "b64") ? v : NULL;
    if (!content)
      return toplu__errorf(err, TOPLU_ERR_PARSE, "%s: data[%zu].%s: no \"content\" or \"b64\"", path, entry, in->name);
    if (shape) {
      if (!json_is_array(shape) || json_array_size(shape) != (size_t)ndim)
        return toplu__errorf(err, TOPLU_ERR_SHAPE, "%s: data[%zu].%s.shape: must be an array of %d dims", path, entry,
                             in->name, ndim);
      for (int d = 0; d < ndim; d++) {
        const json_t *x = json_array_get(shape, (size_t)d);
        json_int_t n = json_is_integer(x) ? json_integer_value(x) : -1;
        if (n < 0 || n > INT32_MAX || (in->meta_dims[d + (batching ? 1 : 0)] >= 0 &&
                                       n != in->meta_dims[d + (batching ? 1 : 0)]))
          return toplu__errorf(err, TOPLU_ERR_SHAPE, "%s: data[%zu].%s.shape[%d]: %lld does not fit the input", path,
                               entry, in->name, d, (long long)n);
        dims[d] = (int64_t)n;
      }
    }
  }
  if (json_is_object(content) && json_object_get(content, "b64"))
    return unit_from_b64(u, in, ndim, dims, json_object_get(content, "b64"), path, entry, err);
  if (!json_is_array(content))
    return toplu__errorf(err, TOPLU_ERR_PARSE, "%s: data[%zu].%s: not an array of values", path, entry, in->name);
  int64_t leaves = json_leaves(content);
  if (!shape_resolved(ndim, dims) && open_dim(ndim, dims, leaves, 1)) return unresolved(in, err);
  toplu_status_t st = tensor_alloc(u, in, ndim, dims, err);
  if (st) return st;
  if (leaves != u->numel) {
    int64_t numel = u->numel; /* tensor_free clears u */
    tensor_free(u);
    return toplu__errorf(err, TOPLU_ERR_SHAPE, "%s: data[%zu].%s: %lld values for a shape of %lld elements", path,
                         entry, in->name, (long long)leaves, (long long)numel);
  }
  char why[200];
  int64_t k = 0;
  if (fill_json(u, in->dtype, content, &k, why, sizeof why)) {
    tensor_free(u);
    return toplu__errorf(err, TOPLU_ERR_PARSE, "%s: data[%zu].%s: %s", path, entry, in->name, why);
  }
  return TOPLU_OK;
}

/* The .npy file as one input's unit (or whole request tensor: *whole set). */
static toplu_status_t unit_from_npy(perf_tensor_t *u, const srv_perf_input_t *in, int batching, int64_t batch,
                                    const char *path, int *whole, toplu_error_t *err) {
  toplu_tensor_t t = {0};
  toplu_status_t st = toplu_npy_read(path, &t, err);
  if (st) return st;
  if (in->dtype == TOPLU_DTYPE_STRING || t.dtype == TOPLU_DTYPE_STRING) {
    toplu_tensor_free(&t);
    return toplu__errorf(err, TOPLU_ERR_UNSUPPORTED, "%s: BYTES input '%s' cannot come from a .npy file", path,
                         in->name);
  }
  int64_t dims[TOPLU_MAX_DIMS];
  int ndim = unit_shape(in, batching, dims);
  *whole = batching && t.ndim == in->req_ndim && t.dims[0] == batch;
  int off = *whole ? 1 : 0;
  int ok = t.ndim == ndim + off;
  for (int d = 0; ok && d < ndim; d++) ok = dims[d] < 0 || dims[d] == t.dims[d + off];
  if (!ok) {
    char a[160], b[160];
    toplu_shape_format(t.ndim, t.dims, a, sizeof a);
    toplu_shape_format(in->ndim, in->meta_dims, b, sizeof b);
    int64_t rows = t.ndim > 0 ? t.dims[0] : 0;
    int rank = t.ndim;
    toplu_tensor_free(&t);
    if (batching && rank == in->req_ndim && rows != batch)
      return toplu__errorf(err, TOPLU_ERR_SHAPE,
                           "%s: shape %s holds %lld rows of input '%s' %s, but batch_size is %lld (give -b %lld, or "
                           "no batch size to take the file's)",
                           path, a, (long long)rows, in->name, b, (long long)batch, (long long)rows);
    return toplu__errorf(err, TOPLU_ERR_SHAPE, "%s: shape %s does not fit input '%s' %s%s", path, a, in->name, b,
                         batching ? " (with or without the batch dim)" : "");
  }
  st = tensor_alloc(u, in, t.ndim, t.dims, err);
  for (int64_t i = 0; !st && i < u->numel; i++) pl_elem_set(in->dtype, u->data, i, pl_elem_get(t.dtype, t.data, i));
  toplu_tensor_free(&t);
  return st;
}

/* Append one body for tensors ts[0..n) to b. */
static void encode_body(srv_perf_body_t *b, const srv_perf_input_t *inputs, const perf_tensor_t *ts, int n,
                        int json_input, int json_output) {
  pl_buf_t *o = &b->body;
  pl_buf_puts(o, "{\"inputs\":[");
  for (int k = 0; k < n; k++) {
    const perf_tensor_t *t = &ts[k];
    if (k) pl_buf_putc(o, ',');
    pl_buf_puts(o, "{\"name\":");
    pl_buf_json_string(o, inputs[k].name);
    pl_buf_puts(o, ",\"shape\":[");
    for (int d = 0; d < t->ndim; d++) pl_buf_printf(o, "%s%lld", d ? "," : "", (long long)t->dims[d]);
    pl_buf_printf(o, "],\"datatype\":\"%s\",", inputs[k].datatype);
    if (json_input) {
      pl_buf_puts(o, "\"data\":[");
      for (int64_t i = 0; i < t->numel; i++) {
        if (i) pl_buf_putc(o, ',');
        if (inputs[k].dtype == TOPLU_DTYPE_STRING)
          pl_buf_json_string(o, t->strs[i]);
        else if (inputs[k].dtype == TOPLU_DTYPE_BOOL)
          pl_buf_puts(o, ((const unsigned char *)t->data)[i] ? "true" : "false");
        else
          pl_buf_element(o, inputs[k].dtype, t->data, i);
      }
      pl_buf_puts(o, "]}");
    } else {
      size_t bytes = 0;
      if (inputs[k].dtype == TOPLU_DTYPE_STRING)
        for (int64_t i = 0; i < t->numel; i++) bytes += 4 + strlen(t->strs[i]);
      else
        bytes = (size_t)t->numel * toplu_dtype_size(inputs[k].dtype);
      pl_buf_printf(o, "\"parameters\":{\"binary_data_size\":%zu}}", bytes);
    }
  }
  pl_buf_puts(o, "]");
  if (!json_output) pl_buf_puts(o, ",\"parameters\":{\"binary_data_output\":true}");
  pl_buf_puts(o, "}");
  b->json_len = o->len;
  if (json_input) return;
  for (int k = 0; k < n; k++) {
    const perf_tensor_t *t = &ts[k];
    if (inputs[k].dtype == TOPLU_DTYPE_STRING) {
      for (int64_t i = 0; i < t->numel; i++) {
        uint32_t len = (uint32_t)strlen(t->strs[i]);
        unsigned char le[4] = {(unsigned char)len, (unsigned char)(len >> 8), (unsigned char)(len >> 16),
                               (unsigned char)(len >> 24)};
        pl_buf_append(o, le, 4);
        pl_buf_append(o, t->strs[i], len);
      }
    } else {
      pl_buf_append(o, t->data, (size_t)t->numel * toplu_dtype_size(inputs[k].dtype));
    }
  }
}

/* Turn units into request tensors (repeat when batching and not whole) and
 * encode one body. */
static toplu_status_t finish_body(srv_perf_body_t *b, const srv_perf_input_t *inputs, perf_tensor_t *units,
                                  const int *whole, int n, int batching, int64_t batch, int json_input, int json_output,
                                  toplu_error_t *err) {
  perf_tensor_t *ts = calloc((size_t)n, sizeof *ts);
  toplu_status_t st = ts ? TOPLU_OK : toplu__errorf(err, TOPLU_ERR_OUT_OF_MEMORY, "out of memory");
  for (int k = 0; !st && k < n; k++) {
    if (batching && !whole[k])
      st = tensor_repeat(&ts[k], &units[k], &inputs[k], batch, err);
    else
      ts[k] = units[k], memset(&units[k], 0, sizeof units[k]);
  }
  if (!st) {
    encode_body(b, inputs, ts, n, json_input, json_output);
    if (b->body.oom || b->body.len > PERF_MAX_BODY)
      st = toplu__errorf(err, TOPLU_ERR_OUT_OF_MEMORY, "a request body is over 1 GiB or memory ran out");
  }
  for (int k = 0; ts && k < n; k++) tensor_free(&ts[k]);
  free(ts);
  return st;
}

int srv_perf_is_dir(const char *path) {
  struct stat sb;
  return path && stat(path, &sb) == 0 && S_ISDIR(sb.st_mode);
}

int srv_perf_is_npy(const char *path) {
  size_t a = path ? strlen(path) : 0;
  return a >= 4 && !strcmp(path + a - 4, ".npy");
}

toplu_status_t srv_perf_build_bodies(const srv_perf_input_t *inputs, int n, int batching, int64_t batch,
                                     const char *data, int json_input, int json_output, uint64_t seed,
                                     srv_perf_body_t **bodies, int *n_bodies, toplu_error_t *err) {
  *bodies = NULL;
  *n_bodies = 0;
  perf_tensor_t *units = calloc((size_t)n + 1, sizeof *units);
  int *whole = calloc((size_t)n + 1, sizeof *whole);
  srv_perf_body_t *out = NULL;
  int n_out = 0;
  json_t *root = NULL;
  toplu_status_t st = units && whole ? TOPLU_OK : toplu__errorf(err, TOPLU_ERR_OUT_OF_MEMORY, "out of memory");
  uint64_t rng = seed ? seed : 1;
  int is_file = data && strcmp(data, "random") && strcmp(data, "zero");
  if (!st && !is_file) {
    for (int k = 0; !st && k < n; k++) {
      int64_t dims[TOPLU_MAX_DIMS];
      int ndim = unit_shape(&inputs[k], batching, dims);
      if (!shape_resolved(ndim, dims))
        st = unresolved(&inputs[k], err);
      else if (!(st = tensor_alloc(&units[k], &inputs[k], ndim, dims, err)) && !(data && !strcmp(data, "zero")))
        tensor_random(&units[k], inputs[k].dtype, &rng);
    }
    if (!st && !(out = calloc(1, sizeof *out))) st = toplu__errorf(err, TOPLU_ERR_OUT_OF_MEMORY, "out of memory");
    if (!st) st = finish_body(&out[n_out++], inputs, units, whole, n, batching, batch, json_input, json_output, err);
  } else if (!st && srv_perf_is_dir(data)) {
    for (int k = 0; !st && k < n; k++) st = unit_from_dir(&units[k], &inputs[k], batching, data, err);
    if (!st && !(out = calloc(1, sizeof *out))) st = toplu__errorf(err, TOPLU_ERR_OUT_OF_MEMORY, "out of memory");
    if (!st) st = finish_body(&out[n_out++], inputs, units, whole, n, batching, batch, json_input, json_output, err);
  } else if (!st && srv_perf_is_npy(data)) {
    if (n != 1)
      st = toplu__errorf(err, TOPLU_ERR_INVALID_ARGUMENT,
                         "input_data %s: a .npy file feeds a model of one input; this one has %d (use a JSON file)",
                         data, n);
    if (!st) st = unit_from_npy(&units[0], &inputs[0], batching, batch, data, &whole[0], err);
    if (!st && !(out = calloc(1, sizeof *out))) st = toplu__errorf(err, TOPLU_ERR_OUT_OF_MEMORY, "out of memory");
    if (!st) st = finish_body(&out[n_out++], inputs, units, whole, n, batching, batch, json_input, json_output, err);
  } else if (!st) {
    json_error_t je;
    root = json_load_file(data, 0, &je);
    const json_t *arr = root ? json_object_get(root, "data") : NULL;
    if (!root)
      st = toplu__errorf(err, je.line < 1 && je.position < 1 ? TOPLU_ERR_IO : TOPLU_ERR_PARSE, "%s: %s", data,
                         je.text);
    else if (!json_is_array(arr) || !json_array_size(arr))
      st = toplu__errorf(err, TOPLU_ERR_PARSE, "%s: no \"data\" array of entries (perf_analyzer's input-data format)",
                         data);
    size_t ne = st ? 0 : json_array_size(arr);
    if (!st && ne > 100000) st = toplu__errorf(err, TOPLU_ERR_PARSE, "%s: over 100000 data entries", data);
    if (!st && !(out = calloc(ne, sizeof *out))) st = toplu__errorf(err, TOPLU_ERR_OUT_OF_MEMORY, "out of memory");
    for (size_t e = 0; !st && e < ne; e++) {
      const json_t *entry = json_array_get(arr, e);
      for (int k = 0; !st && k < n; k++) {
        const json_t *v = json_is_object(entry) ? json_object_get(entry, inputs[k].name) : NULL;
        if (!v)
          st = toplu__errorf(err, TOPLU_ERR_NOT_FOUND, "%s: data[%zu]: no value for input '%s'", data, e,
                             inputs[k].name);
        else
          st = unit_from_json(&units[k], &inputs[k], batching, v, data, e, err);
      }
      if (!st) st = finish_body(&out[n_out++], inputs, units, whole, n, batching, batch, json_input, json_output, err);
      for (int k = 0; k < n; k++) tensor_free(&units[k]);
    }
  }
  for (int k = 0; units && k < n; k++) tensor_free(&units[k]);
  free(units);
  free(whole);
  json_decref(root);
  if (st) {
    srv_perf_bodies_free(out, n_out);
    return st;
  }
  *bodies = out;
  *n_bodies = n_out;
  return TOPLU_OK;
}

void srv_perf_bodies_free(srv_perf_body_t *bodies, int n) {
  for (int i = 0; bodies && i < n; i++) pl_buf_free(&bodies[i].body);
  free(bodies);
}
