/*
 * onnx/loader.c - decode an ONNX ModelProto (protobuf-c) into owned structures.
 *
 * Tensor data rules follow onnx.proto (TensorProto): raw_data holds
 * little-endian bytes; otherwise the typed field for the data_type is used
 * (float_data; int32_data for INT32/INT16/INT8/UINT16/UINT8/BOOL/FLOAT16/
 * BFLOAT16; int64_data; double_data; uint64_data for UINT32/UINT64); and
 * data_location EXTERNAL reads `length` bytes at `offset` from `location`,
 * a path relative to the model's directory.  STRING tensors take their
 * elements from string_data (UTF-8 bytes each; raw_data and external data
 * cannot hold strings) and decode into one block, the pointer array followed
 * by the NUL-terminated strings (toplu/tensor.h); an element holding a NUL
 * byte cannot be a C string and is refused.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/bigalloc.h"
#include "core/checked.h"
#include "core/error.h"
#include "core/file.h"
#include "onnx.pb-c.h"
#include "onnx/onnx_model.h"

static char *dupstr(const char *s) {
  if (!s) s = "";
  size_t n = strlen(s);
  char *d = malloc(n + 1);
  if (d) memcpy(d, s, n + 1);
  return d;
}

static char *dupbytes(const ProtobufCBinaryData *b, size_t *len) {
  char *d = malloc(b->len + 1);
  if (!d) return NULL;
  if (b->len) memcpy(d, b->data, b->len);
  d[b->len] = '\0';
  if (len) *len = b->len;
  return d;
}

#define OOM(err) toplu__errorf(err, TOPLU_ERR_OUT_OF_MEMORY, "out of memory while decoding the model")
/* raw_data blocks this large are 64-byte aligned (pb_alloc) and kept as a tensor's data (decode_tensor) */
#define PB_OWN_MIN ((size_t)4096)

static int dtype_known(int32_t dt) {
  return dt >= 1 && dt <= 16 && dt != 14 && dt != 15 && toplu_dtype_size((toplu_dtype_t)dt) > 0;
}

/* An external-data offset or length: a decimal integer in 0..INT64_MAX,
 * nothing after it. */
static toplu_status_t ext_int(const char *what, const char *key, const char *v, int64_t *out, toplu_error_t *err) {
  char *end = NULL;
  errno = 0;
  long long x = strtoll(v, &end, 10);
  if (end == v || *end || errno == ERANGE || x < 0)
    return toplu__errorf(err, TOPLU_ERR_PARSE, "%s: external data %s '%s' is not an integer in 0..2^63-1", what, key, v);
  *out = (int64_t)x;
  return TOPLU_OK;
}

/* A location names a file under the model's folder: relative, no ".."
 * component (a name such as "w..bin" is fine). */
static int location_leaves(const char *loc) {
  if (loc[0] == '/') return 1;
  for (const char *p = loc;;) {
    const char *q = strchr(p, '/');
    size_t n = q ? (size_t)(q - p) : strlen(p);
    if (n == 2 && p[0] == '.' && p[1] == '.') return 1;
    if (!q) return 0;
    p = q + 1;
  }
}

/* Read length bytes at offset of base_dir/location into dst (dst NULL: only
 * check that they are there).  The location is resolved (realpath) and must
 * stay inside the model's folder, also through symlinks; it must be a
 * regular file (opened without blocking, so a FIFO is refused, not waited
 * on), and offset + nbytes is checked against its size before reading. */
static toplu_status_t read_external(const Onnx__TensorProto *tp, const char *base_dir, const char *what,
                                    void *dst, size_t nbytes, toplu_error_t *err) {
  const char *location = NULL;
  int64_t offset = 0, length = -1;
  toplu_status_t st = TOPLU_OK;
  for (size_t i = 0; i < tp->n_external_data; i++) {
    const Onnx__StringStringEntryProto *e = tp->external_data[i];
    if (!e->key || !e->value) continue;
    if (!strcmp(e->key, "location")) location = e->value;
    else if (!strcmp(e->key, "offset")) st = ext_int(what, "offset", e->value, &offset, err);
    else if (!strcmp(e->key, "length")) st = ext_int(what, "length", e->value, &length, err);
    if (st) return st;
  }
  if (!location || !*location)
    return toplu__errorf(err, TOPLU_ERR_PARSE, "%s: external data without a location", what);
  if (!base_dir)
    return toplu__errorf(err, TOPLU_ERR_IO, "%s: external data '%s' cannot be read from a model held in memory",
                        what, location);
  if (location_leaves(location))
    return toplu__errorf(err, TOPLU_ERR_PARSE, "%s: external data location '%s' leaves the model's directory", what,
                        location);
  if (length >= 0 && (uint64_t)length != nbytes)
    return toplu__errorf(err, TOPLU_ERR_PARSE, "%s: external data length %lld, but the dims and type need %zu bytes",
                        what, (long long)length, nbytes);
  int64_t end;
  if (nbytes > INT64_MAX || !toplu__add_i64(offset, (int64_t)nbytes, &end))
    return toplu__errorf(err, TOPLU_ERR_PARSE, "%s: external data offset %lld + %zu bytes is past any file's end", what,
                        (long long)offset, nbytes);
  char path[4096];
  if ((size_t)snprintf(path, sizeof path, "%s/%s", base_dir, location) >= sizeof path)
    return toplu__errorf(err, TOPLU_ERR_IO, "%s: external data path too long", what);
  char *rdir = realpath(base_dir, NULL);
  if (!rdir) return toplu__errorf(err, TOPLU_ERR_IO, "%s: cannot resolve the model's folder '%s': %s", what, base_dir,
                                 strerror(errno));
  char *rpath = realpath(path, NULL);
  if (!rpath) {
    int e = errno;
    free(rdir);
    return toplu__errorf(err, TOPLU_ERR_IO, "%s: cannot open external data '%s': %s", what, path, strerror(e));
  }
  size_t dl = strlen(rdir);
  int inside = !strncmp(rpath, rdir, dl) && (dl == 1 ? rpath[1] != '\0' : rpath[dl] == '/');
  int itself = !strcmp(rpath, rdir);
  free(rdir);
  if (itself) { /* "." or "sub/..": the folder, not a file in it */
    free(rpath);
    return toplu__errorf(err, TOPLU_ERR_IO, "%s: external data '%s' is not a regular file (it is the model's folder)",
                         what, location);
  }
  if (!inside) {
    st = toplu__errorf(err, TOPLU_ERR_PARSE, "%s: external data location '%s' leaves the model's directory (it is %s)",
                       what, location, rpath);
    free(rpath);
    return st;
  }
  /* O_NOFOLLOW: rpath has no symlinks left, so one planted since is refused */
  int fd = open(rpath, O_RDONLY | O_NONBLOCK | O_NOFOLLOW | O_CLOEXEC);
  free(rpath);
  struct stat sb;
  if (fd < 0 || fstat(fd, &sb) != 0) {
    int e = errno;
    if (fd >= 0) close(fd);
    return toplu__errorf(err, TOPLU_ERR_IO, "%s: cannot open external data '%s': %s", what, path, strerror(e));
  }
  if (!S_ISREG(sb.st_mode)) {
    close(fd);
    return toplu__errorf(err, TOPLU_ERR_IO, "%s: external data '%s' is not a regular file", what, path);
  }
  if (sb.st_size < end) {
    close(fd);
    return toplu__errorf(err, TOPLU_ERR_IO, "%s: external data '%s' (%lld bytes) is shorter than offset %lld + %zu bytes",
                        what, path, (long long)sb.st_size, (long long)offset, nbytes);
  }
  ssize_t done = dst ? toplu__pread_full(fd, dst, nbytes, (off_t)offset) : (ssize_t)nbytes;
  if (done < 0 || (size_t)done < nbytes)
    st = toplu__errorf(err, TOPLU_ERR_IO, "%s: external data '%s': %s at byte %lld", what, path,
                       done < 0 ? strerror(errno) : "the file ended early",
                       (long long)offset + (long long)(done < 0 ? 0 : done));
  close(fd);
  return st;
}

/* A STRING tensor's string_data into one block (toplu/tensor.h); t's dtype
 * and dims are set, numel checked against TOPLU_MAX_ELEMENTS. */
static toplu_status_t decode_strings(const Onnx__TensorProto *tp, const char *what, uint64_t numel, toplu_tensor_t *t,
                                     toplu_error_t *err) {
  if (tp->has_raw_data || (tp->has_data_location && tp->data_location == ONNX__TENSOR_PROTO__DATA_LOCATION__EXTERNAL))
    return toplu__errorf(err, TOPLU_ERR_PARSE, "%s: a string tensor's elements must be in string_data, not %s", what,
                        tp->has_raw_data ? "raw_data" : "external data");
  if (tp->n_string_data != numel)
    return toplu__errorf(err, TOPLU_ERR_PARSE, "%s: holds %zu strings, but dims multiply out to %llu", what,
                        tp->n_string_data, (unsigned long long)numel);
  size_t bytes = numel * sizeof(char *); /* numel <= 2^40 and each string is in the file: no overflow */
  for (size_t k = 0; k < numel; k++) {
    const ProtobufCBinaryData *b = &tp->string_data[k];
    if (b->len && memchr(b->data, 0, b->len))
      return toplu__errorf(err, TOPLU_ERR_UNSUPPORTED, "%s: string %zu holds a NUL byte, which toplu's strings cannot",
                          what, k);
    bytes += b->len + 1;
  }
  char *d = malloc(bytes ? bytes : 1);
  if (!d) return OOM(err);
  char **ptr = (char **)d, *at = d + numel * sizeof(char *);
  for (size_t k = 0; k < numel; k++) {
    const ProtobufCBinaryData *b = &tp->string_data[k];
    if (b->len) memcpy(at, b->data, b->len);
    at[b->len] = '\0';
    ptr[k] = at;
    at += b->len + 1;
  }
  t->data = d;
  return TOPLU_OK;
}

/* Decode a TensorProto into t (dense, little-endian, data malloc'ed).  own (NULL, or tp itself when the caller
 * owns the message and it was unpacked with pb_allocator): its raw_data of PB_OWN_MIN bytes or more (64-byte
 * aligned there) becomes t's data instead of a copy (a model's weights were in memory three times during its load:
 * the file's bytes, protobuf-c's copy and the tensor's). */
static toplu_status_t decode_tensor(const Onnx__TensorProto *tp, Onnx__TensorProto *own, const char *base_dir,
                                    const char *what, toplu_tensor_t *t, toplu_error_t *err) {
  memset(t, 0, sizeof *t);
  if (!tp->has_data_type || !dtype_known(tp->data_type))
    return toplu__errorf(err, TOPLU_ERR_PARSE, "%s: unknown or missing data_type %d", what, (int)tp->data_type);
  if (tp->segment) return toplu__errorf(err, TOPLU_ERR_UNSUPPORTED, "%s: segmented tensors are not supported", what);
  if (tp->n_dims > TOPLU_MAX_DIMS)
    return toplu__errorf(err, TOPLU_ERR_UNSUPPORTED, "%s: rank %zu is above toplu's limit of %d", what, tp->n_dims,
                        TOPLU_MAX_DIMS);
  toplu_dtype_t dt = (toplu_dtype_t)tp->data_type;
  size_t es = toplu_dtype_size(dt);
  for (size_t i = 0; i < tp->n_dims; i++)
    if (tp->dims[i] < 0) return toplu__errorf(err, TOPLU_ERR_PARSE, "%s: negative dim %lld", what, (long long)tp->dims[i]);
  t->dtype = dt;
  t->ndim = (int)tp->n_dims;
  for (size_t i = 0; i < tp->n_dims; i++) t->dims[i] = tp->dims[i];
  int64_t n64;
  size_t nbytes;
  if (!toplu__shape_numel(t->ndim, t->dims, &n64) || !toplu__bytes(n64, es, &nbytes))
    return toplu__errorf(err, TOPLU_ERR_PARSE, "%s: dims multiply out to more than " TOPLU_MAX_ELEMENTS_TEXT " elements",
                        what);
  uint64_t numel = (uint64_t)n64;
  if (dt == TOPLU_DTYPE_STRING) {
    toplu_status_t sst = decode_strings(tp, what, numel, t, err);
    if (sst) t->data = NULL;
    return sst;
  }
  int external = tp->has_data_location && tp->data_location == ONNX__TENSOR_PROTO__DATA_LOCATION__EXTERNAL;
  /* The data present must match the dims before anything is allocated for
   * them, so a tiny file claiming a huge tensor is a format error, not an
   * attempt to allocate it. */
  if (!external) {
    size_t present = 0;
    if (tp->has_raw_data) present = tp->raw_data.len;
    else if (dt == TOPLU_DTYPE_FLOAT) present = tp->n_float_data * es;
    else if (dt == TOPLU_DTYPE_DOUBLE) present = tp->n_double_data * es;
    else if (dt == TOPLU_DTYPE_INT64) present = tp->n_int64_data * es;
    else if (dt == TOPLU_DTYPE_UINT32 || dt == TOPLU_DTYPE_UINT64) present = tp->n_uint64_data * es;
    else present = tp->n_int32_data * es;
    if (present != nbytes)
      return toplu__errorf(err, TOPLU_ERR_PARSE, "%s: holds %zu bytes of data, but dims %llu x %zu-byte %s need %zu", what,
                          present, (unsigned long long)numel, es, toplu_dtype_name(dt), nbytes);
  }
  if (external) {
    toplu_status_t est = read_external(tp, base_dir, what, NULL, nbytes, err);
    if (est) return est;
  }
  if (own && !external && tp->has_raw_data && tp->raw_data.len == nbytes && nbytes >= PB_OWN_MIN &&
      (uintptr_t)tp->raw_data.data % 64 == 0) {
    t->data = own->raw_data.data; /* protobuf-c's block (pb_alloc): free() releases it */
    own->raw_data.data = NULL;   /* free_unpacked skips it */
    own->raw_data.len = 0;
    return TOPLU_OK;
  }
  unsigned char *d = toplu__alloc_large(nbytes ? nbytes : 1); /* huge pages from 2 MiB (core/bigalloc.h) */
  if (!d) return OOM(err);
  toplu_status_t st = TOPLU_OK;
  size_t have = 0; /* elements present in the typed field */
  if (external) {
    st = read_external(tp, base_dir, what, d, nbytes, err);
  } else if (tp->has_raw_data) {
    if (tp->raw_data.len != nbytes)
      st = toplu__errorf(err, TOPLU_ERR_PARSE, "%s: raw_data holds %zu bytes, but dims %llu x %zu-byte %s need %zu",
                        what, tp->raw_data.len, (unsigned long long)numel, es, toplu_dtype_name(dt), nbytes);
    else if (nbytes)
      memcpy(d, tp->raw_data.data, nbytes);
  } else {
    switch (dt) {
      case TOPLU_DTYPE_FLOAT:
        have = tp->n_float_data;
        if (have == numel && nbytes) memcpy(d, tp->float_data, nbytes);
        break;
      case TOPLU_DTYPE_DOUBLE:
        have = tp->n_double_data;
        if (have == numel && nbytes) memcpy(d, tp->double_data, nbytes);
        break;
      case TOPLU_DTYPE_INT64:
        have = tp->n_int64_data;
        if (have == numel && nbytes) memcpy(d, tp->int64_data, nbytes);
        break;
      case TOPLU_DTYPE_UINT32:
      case TOPLU_DTYPE_UINT64:
        have = tp->n_uint64_data;
        if (have == numel)
          for (size_t i = 0; i < numel; i++) {
            if (dt == TOPLU_DTYPE_UINT32) ((uint32_t *)d)[i] = (uint32_t)tp->uint64_data[i];
            else ((uint64_t *)d)[i] = tp->uint64_data[i];
          }
        break;
      case TOPLU_DTYPE_INT32: case TOPLU_DTYPE_INT16: case TOPLU_DTYPE_INT8: case TOPLU_DTYPE_UINT16:
      case TOPLU_DTYPE_UINT8: case TOPLU_DTYPE_BOOL: case TOPLU_DTYPE_FLOAT16: case TOPLU_DTYPE_BFLOAT16:
        have = tp->n_int32_data;
        if (have == numel)
          for (size_t i = 0; i < numel; i++) {
            int32_t v = tp->int32_data[i];
            switch (es) {
              case 4: ((int32_t *)d)[i] = v; break;
              case 2: ((uint16_t *)d)[i] = (uint16_t)v; break;
              default: d[i] = (unsigned char)v; break;
            }
          }
        break;
      default:
        break;
    }
    if (have != numel)
      st = toplu__errorf(err, TOPLU_ERR_PARSE, "%s: holds %zu values, but dims multiply out to %llu", what, have,
                        (unsigned long long)numel);
  }
  if (st != TOPLU_OK) {
    free(d);
    return st;
  }
  t->data = d;
  return TOPLU_OK;
}

void toplu__attr_clear(toplu__attr_t *a) {
  free(a->name);
  free(a->s);
  free(a->floats);
  free(a->ints);
  if (a->strings)
    for (int64_t i = 0; i < a->n; i++) free(a->strings[i]);
  free(a->strings);
  free(a->t.data);
  toplu__onnx_model_free(a->g);
  memset(a, 0, sizeof *a);
}

const toplu__attr_t *toplu__attr_find(const toplu__attr_t *attrs, int n, const char *name) {
  for (int i = 0; i < n; i++)
    if (!strcmp(attrs[i].name, name)) return &attrs[i];
  return NULL;
}

static toplu_status_t decode_graph(const Onnx__GraphProto *g, const char *name, const char *base_dir, int depth,
                                   toplu__onnx_model_t *m, toplu_error_t *err);

static toplu_status_t decode_attr(const Onnx__AttributeProto *ap, const char *node_what, const char *base_dir,
                                  int depth, toplu__attr_t *a, toplu_error_t *err) {
  memset(a, 0, sizeof *a);
  a->name = dupstr(ap->name);
  if (!a->name) return OOM(err);
  if (!*a->name) return toplu__errorf(err, TOPLU_ERR_PARSE, "%s: attribute without a name", node_what);
  if (ap->ref_attr_name && *ap->ref_attr_name)
    return toplu__errorf(err, TOPLU_ERR_UNSUPPORTED, "%s: attribute '%s' refers to a function attribute", node_what,
                        a->name);
  int type = ap->has_type ? (int)ap->type : 0;
  if (!type) { /* IR < 3 files may omit the type: infer it from the field set */
    if (ap->has_f) type = TOPLU_ATTR_FLOAT;
    else if (ap->has_i) type = TOPLU_ATTR_INT;
    else if (ap->has_s) type = TOPLU_ATTR_STRING;
    else if (ap->t) type = TOPLU_ATTR_TENSOR;
    else if (ap->g) type = TOPLU_ATTR_GRAPH;
    else if (ap->n_floats) type = TOPLU_ATTR_FLOATS;
    else if (ap->n_ints) type = TOPLU_ATTR_INTS;
    else if (ap->n_strings) type = TOPLU_ATTR_STRINGS;
    else if (ap->n_tensors) type = TOPLU_ATTR_TENSORS;
  }
  a->type = (toplu__attr_type_t)type;
  char what[1200];
  snprintf(what, sizeof what, "%.600s, attribute '%.500s'", node_what, a->name);
  switch (type) {
    case TOPLU_ATTR_FLOAT: a->f = ap->f; break;
    case TOPLU_ATTR_INT: a->i = ap->i; break;
    case TOPLU_ATTR_STRING:
      a->s = dupbytes(&ap->s, &a->s_len);
      if (!a->s) return OOM(err);
      break;
    case TOPLU_ATTR_TENSOR:
      if (!ap->t) return toplu__errorf(err, TOPLU_ERR_PARSE, "%s: TENSOR attribute without a tensor", what);
      return decode_tensor(ap->t, NULL, base_dir, what, &a->t, err);
    case TOPLU_ATTR_FLOATS:
      a->n = (int64_t)ap->n_floats;
      a->floats = malloc((ap->n_floats ? ap->n_floats : 1) * sizeof(float));
      if (!a->floats) return OOM(err);
      if (ap->n_floats) memcpy(a->floats, ap->floats, ap->n_floats * sizeof(float));
      break;
    case TOPLU_ATTR_INTS:
      a->n = (int64_t)ap->n_ints;
      a->ints = malloc((ap->n_ints ? ap->n_ints : 1) * sizeof(int64_t));
      if (!a->ints) return OOM(err);
      if (ap->n_ints) memcpy(a->ints, ap->ints, ap->n_ints * sizeof(int64_t));
      break;
    case TOPLU_ATTR_STRINGS:
      a->strings = calloc(ap->n_strings ? ap->n_strings : 1, sizeof(char *));
      if (!a->strings) return OOM(err);
      for (size_t i = 0; i < ap->n_strings; i++) {
        a->strings[i] = dupbytes(&ap->strings[i], NULL);
        if (!a->strings[i]) return OOM(err);
        a->n = (int64_t)i + 1;
      }
      break;
    case TOPLU_ATTR_GRAPH: {
      /* If's branches, Loop's and Scan's bodies: decoded like the main graph
       * (graph/control.c resolves their outer-scope names and inlines them). */
      if (!ap->g) return toplu__errorf(err, TOPLU_ERR_PARSE, "%s: GRAPH attribute without a graph", what);
      if (depth >= TOPLU_ONNX_MAX_SUBGRAPH_DEPTH)
        return toplu__errorf(err, TOPLU_ERR_UNSUPPORTED, "%s: subgraphs nested more than %d deep", what,
                            TOPLU_ONNX_MAX_SUBGRAPH_DEPTH);
      if (!(a->g = calloc(1, sizeof *a->g))) return OOM(err);
      return decode_graph(ap->g, what, base_dir, depth + 1, a->g, err);
    }
    default:
      /* Other attribute kinds (GRAPHS, sparse tensors, type protos) are kept
       * by name and type only; no op toplu runs reads them. */
      break;
  }
  return TOPLU_OK;
}

static const Onnx__TypeProto onnx_untyped = ONNX__TYPE_PROTO__INIT;

static toplu_status_t decode_value_info(const Onnx__ValueInfoProto *vp, const char *what, toplu__onnx_value_info_t *v,
                                        toplu_error_t *err) {
  memset(v, 0, sizeof *v);
  v->name = dupstr(vp->name);
  if (!v->name) return OOM(err);
  v->ndim = -1;
  const Onnx__TypeProto *tp = vp->type;
  if (!tp || tp->value_case == ONNX__TYPE_PROTO__VALUE__NOT_SET) return TOPLU_OK; /* untyped (allowed for value_info) */
  /* optional(tensor), optional(sequence(tensor)), sequence(tensor): the
   * kind, then the innermost tensor type as for a tensor */
  v->kind = v->elem_kind = TOPLU_KIND_TENSOR;
  if (tp->value_case == ONNX__TYPE_PROTO__VALUE_OPTIONAL_TYPE && tp->optional_type) {
    v->kind = TOPLU_KIND_OPTIONAL;
    tp = tp->optional_type->elem_type;
    if (!tp) tp = &onnx_untyped;
    if (tp->value_case == ONNX__TYPE_PROTO__VALUE_SEQUENCE_TYPE) v->elem_kind = TOPLU_KIND_SEQUENCE;
  }
  if (tp->value_case == ONNX__TYPE_PROTO__VALUE_SEQUENCE_TYPE && tp->sequence_type) {
    if (v->kind == TOPLU_KIND_TENSOR) v->kind = v->elem_kind = TOPLU_KIND_SEQUENCE;
    tp = tp->sequence_type->elem_type;
    if (!tp) tp = &onnx_untyped;
  }
  if (tp->value_case == ONNX__TYPE_PROTO__VALUE__NOT_SET && v->kind != TOPLU_KIND_TENSOR) return TOPLU_OK;
  if (tp->value_case != ONNX__TYPE_PROTO__VALUE_TENSOR_TYPE || !tp->tensor_type) {
    v->kind = v->elem_kind = -1; /* a map, a sparse tensor, a sequence of sequences */
    return TOPLU_OK;
  }
  v->is_tensor = v->kind == TOPLU_KIND_TENSOR;
  const Onnx__TypeProto__Tensor *tt = tp->tensor_type;
  if (tt->has_elem_type) {
    if (tt->elem_type != 0 && !dtype_known(tt->elem_type) && tt->elem_type != TOPLU_DTYPE_STRING)
      return toplu__errorf(err, TOPLU_ERR_UNSUPPORTED, "%s '%s': element type %d is not supported", what, v->name,
                          (int)tt->elem_type);
    v->dtype = (toplu_dtype_t)tt->elem_type;
  }
  if (!tt->shape) return TOPLU_OK;
  if (tt->shape->n_dim > TOPLU_MAX_DIMS)
    return toplu__errorf(err, TOPLU_ERR_UNSUPPORTED, "%s '%s': rank %zu is above toplu's limit of %d", what, v->name,
                        tt->shape->n_dim, TOPLU_MAX_DIMS);
  v->ndim = (int)tt->shape->n_dim;
  for (int i = 0; i < v->ndim; i++) {
    const Onnx__TensorShapeProto__Dimension *d = tt->shape->dim[i];
    v->dims[i].value = -1;
    if (d->value_case == ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_VALUE) {
      if (d->dim_value < 0)
        return toplu__errorf(err, TOPLU_ERR_PARSE, "%s '%s': dim %d is negative (%lld)", what, v->name, i,
                            (long long)d->dim_value);
      v->dims[i].value = d->dim_value;
    } else if (d->value_case == ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_PARAM && d->dim_param &&
               *d->dim_param) {
      v->dims[i].param = dupstr(d->dim_param);
      if (!v->dims[i].param) return OOM(err);
    }
  }
  return TOPLU_OK;
}

static void value_info_clear(toplu__onnx_value_info_t *v) {
  free(v->name);
  for (int i = 0; i < v->ndim; i++) free(v->dims[i].param);
}

void toplu__onnx_model_free(toplu__onnx_model_t *m) {
  if (!m) return;
  free(m->path);
  free(m->producer_name);
  free(m->producer_version);
  free(m->graph_name);
  for (int i = 0; i < m->n_opsets; i++) free(m->opsets[i].domain);
  free(m->opsets);
  for (int i = 0; i < m->n_nodes; i++) {
    toplu__onnx_node_t *n = &m->nodes[i];
    free(n->name);
    free(n->op_type);
    free(n->domain);
    for (int j = 0; j < n->n_inputs; j++) free(n->inputs[j]);
    for (int j = 0; j < n->n_outputs; j++) free(n->outputs[j]);
    free(n->inputs);
    free(n->outputs);
    for (int j = 0; j < n->n_attrs; j++) toplu__attr_clear(&n->attrs[j]);
    free(n->attrs);
  }
  free(m->nodes);
  for (int i = 0; i < m->n_initializers; i++) {
    free(m->initializers[i].name);
    free(m->initializers[i].t.data);
  }
  free(m->initializers);
  for (int i = 0; i < m->n_inputs; i++) value_info_clear(&m->inputs[i]);
  for (int i = 0; i < m->n_outputs; i++) value_info_clear(&m->outputs[i]);
  for (int i = 0; i < m->n_value_infos; i++) value_info_clear(&m->value_infos[i]);
  free(m->inputs);
  free(m->outputs);
  free(m->value_infos);
  free(m);
}

static char *dupstr_or_null(const char *s) { return s ? dupstr(s) : NULL; }

static int value_info_copy(toplu__onnx_value_info_t *d, const toplu__onnx_value_info_t *s) {
  *d = *s;
  d->name = dupstr(s->name);
  for (int i = 0; i < s->ndim; i++) d->dims[i].param = NULL;
  if (!d->name) return -1;
  for (int i = 0; i < s->ndim; i++)
    if (s->dims[i].param && !(d->dims[i].param = dupstr(s->dims[i].param))) return -1;
  return 0;
}

static toplu__onnx_model_t *model_clone(const toplu__onnx_model_t *s) {
  toplu__onnx_model_t *m = calloc(1, sizeof *m);
  if (!m) return NULL;
  m->ir_version = s->ir_version;
  m->path = dupstr_or_null(s->path);
  m->producer_name = dupstr_or_null(s->producer_name);
  m->producer_version = dupstr_or_null(s->producer_version);
  m->graph_name = dupstr_or_null(s->graph_name);
  m->opsets = calloc((size_t)s->n_opsets + 1, sizeof *m->opsets);
  m->nodes = calloc((size_t)s->n_nodes + 1, sizeof *m->nodes);
  m->initializers = calloc((size_t)s->n_initializers + 1, sizeof *m->initializers);
  m->inputs = calloc((size_t)s->n_inputs + 1, sizeof *m->inputs);
  m->outputs = calloc((size_t)s->n_outputs + 1, sizeof *m->outputs);
  m->value_infos = calloc((size_t)s->n_value_infos + 1, sizeof *m->value_infos);
  if (!m->opsets || !m->nodes || !m->initializers || !m->inputs || !m->outputs || !m->value_infos) goto fail;
  for (int i = 0; i < s->n_opsets; i++) {
    m->opsets[i].version = s->opsets[i].version;
    m->n_opsets++;
    if (!(m->opsets[i].domain = dupstr(s->opsets[i].domain))) goto fail;
  }
  for (int i = 0; i < s->n_initializers; i++) {
    toplu__onnx_initializer_t *d = &m->initializers[i];
    const toplu__onnx_initializer_t *x = &s->initializers[i];
    m->n_initializers++;
    d->t = x->t;
    d->t.data = NULL;
    if (!(d->name = dupstr(x->name))) goto fail;
    size_t bytes = toplu_tensor_nbytes(&x->t);
    if (!(d->t.data = malloc(bytes ? bytes : 1))) goto fail;
    if (bytes) memcpy(d->t.data, x->t.data, bytes);
  }
  for (int i = 0; i < s->n_inputs; i++, m->n_inputs++)
    if (value_info_copy(&m->inputs[i], &s->inputs[i])) { m->n_inputs++; goto fail; }
  for (int i = 0; i < s->n_outputs; i++, m->n_outputs++)
    if (value_info_copy(&m->outputs[i], &s->outputs[i])) { m->n_outputs++; goto fail; }
  for (int i = 0; i < s->n_value_infos; i++, m->n_value_infos++)
    if (value_info_copy(&m->value_infos[i], &s->value_infos[i])) { m->n_value_infos++; goto fail; }
  for (int i = 0; i < s->n_nodes; i++) {
    toplu__onnx_node_t *d = &m->nodes[i];
    const toplu__onnx_node_t *x = &s->nodes[i];
    m->n_nodes++;
    d->name = dupstr(x->name);
    d->op_type = dupstr(x->op_type);
    d->domain = dupstr(x->domain);
    d->inputs = calloc((size_t)x->n_inputs + 1, sizeof(char *));
    d->outputs = calloc((size_t)x->n_outputs + 1, sizeof(char *));
    if (!d->name || !d->op_type || !d->domain || !d->inputs || !d->outputs) goto fail;
    for (int j = 0; j < x->n_inputs; j++, d->n_inputs++)
      if (!(d->inputs[j] = dupstr(x->inputs[j]))) goto fail;
    for (int j = 0; j < x->n_outputs; j++, d->n_outputs++)
      if (!(d->outputs[j] = dupstr(x->outputs[j]))) goto fail;
    if (toplu__attrs_copy(x->attrs, x->n_attrs, &d->attrs)) goto fail;
    d->n_attrs = x->n_attrs;
  }
  return m;
fail:
  toplu__onnx_model_free(m);
  return NULL;
}

static int attr_copy(toplu__attr_t *d, const toplu__attr_t *s) {
  *d = *s;
  d->name = NULL, d->s = NULL, d->floats = NULL, d->ints = NULL, d->strings = NULL, d->t.data = NULL, d->g = NULL;
  d->n = 0;
  if (!(d->name = dupstr(s->name))) return -1;
  if (s->s) {
    if (!(d->s = malloc(s->s_len + 1))) return -1;
    memcpy(d->s, s->s, s->s_len + 1);
  }
  if (s->floats) {
    if (!(d->floats = malloc((size_t)(s->n ? s->n : 1) * sizeof(float)))) return -1;
    memcpy(d->floats, s->floats, (size_t)s->n * sizeof(float));
  }
  if (s->ints) {
    if (!(d->ints = malloc((size_t)(s->n ? s->n : 1) * sizeof(int64_t)))) return -1;
    memcpy(d->ints, s->ints, (size_t)s->n * sizeof(int64_t));
  }
  if (s->strings) {
    if (!(d->strings = calloc((size_t)(s->n ? s->n : 1), sizeof(char *)))) return -1;
    for (int64_t i = 0; i < s->n; i++) {
      if (!(d->strings[i] = dupstr(s->strings[i]))) return -1;
      d->n = i + 1;
    }
  }
  d->n = s->n;
  if (s->t.data) {
    size_t bytes = toplu_tensor_nbytes(&s->t);
    if (!(d->t.data = malloc(bytes ? bytes : 1))) return -1;
    if (bytes) memcpy(d->t.data, s->t.data, bytes);
  }
  if (s->g && !(d->g = model_clone(s->g))) return -1;
  return 0;
}

int toplu__attrs_copy(const toplu__attr_t *src, int n, toplu__attr_t **out) {
  toplu__attr_t *a = calloc((size_t)n + 1, sizeof *a);
  if (!a) return -1;
  for (int i = 0; i < n; i++)
    if (attr_copy(&a[i], &src[i])) {
      for (int j = 0; j <= i; j++) toplu__attr_clear(&a[j]);
      free(a);
      return -1;
    }
  *out = a;
  return 0;
}

static toplu_status_t decode_node(const Onnx__NodeProto *np, int index, const char *base_dir, int depth,
                                  toplu__onnx_node_t *n, toplu_error_t *err) {
  n->name = dupstr(np->name);
  n->op_type = dupstr(np->op_type);
  n->domain = dupstr(np->domain);
  if (!n->name || !n->op_type || !n->domain) return OOM(err);
  char what[512];
  snprintf(what, sizeof what, "node %d '%s' (%s)", index, n->name, n->op_type);
  if (!*n->op_type) return toplu__errorf(err, TOPLU_ERR_PARSE, "node %d '%s': no op_type", index, n->name);
  if (np->n_input > 1u << 20 || np->n_output > 1u << 20 || np->n_attribute > 1u << 20)
    return toplu__errorf(err, TOPLU_ERR_PARSE, "%s: implausible input/output/attribute count", what);
  n->inputs = calloc(np->n_input ? np->n_input : 1, sizeof(char *));
  n->outputs = calloc(np->n_output ? np->n_output : 1, sizeof(char *));
  n->attrs = calloc(np->n_attribute ? np->n_attribute : 1, sizeof(toplu__attr_t));
  if (!n->inputs || !n->outputs || !n->attrs) return OOM(err);
  for (size_t i = 0; i < np->n_input; i++) {
    if (!(n->inputs[i] = dupstr(np->input[i]))) return OOM(err);
    n->n_inputs++;
  }
  for (size_t i = 0; i < np->n_output; i++) {
    if (!(n->outputs[i] = dupstr(np->output[i]))) return OOM(err);
    n->n_outputs++;
  }
  for (size_t i = 0; i < np->n_attribute; i++) {
    n->n_attrs++;
    toplu_status_t st = decode_attr(np->attribute[i], what, base_dir, depth, &n->attrs[i], err);
    if (st) return st;
    for (size_t j = 0; j < i; j++)
      if (!strcmp(n->attrs[j].name, n->attrs[i].name))
        return toplu__errorf(err, TOPLU_ERR_PARSE, "%s: attribute '%s' given twice", what, n->attrs[i].name);
  }
  return TOPLU_OK;
}

/* Decode one GraphProto (the model's, depth 0, or a subgraph attribute's)
 * into m's graph fields; name is for messages.  On error m holds what was
 * decoded so far (the caller frees it). */
static toplu_status_t decode_graph(const Onnx__GraphProto *g, const char *name, const char *base_dir, int depth,
                                   toplu__onnx_model_t *m, toplu_error_t *err) {
  toplu_status_t st = TOPLU_OK;
  m->path = dupstr(name);
  m->graph_name = dupstr(g->name);
  if (!m->path || !m->graph_name) return OOM(err);
  m->nodes = calloc(g->n_node + 1, sizeof *m->nodes);
  m->initializers = calloc(g->n_initializer + 1, sizeof *m->initializers);
  m->inputs = calloc(g->n_input + 1, sizeof *m->inputs);
  m->outputs = calloc(g->n_output + 1, sizeof *m->outputs);
  m->value_infos = calloc(g->n_value_info + 1, sizeof *m->value_infos);
  if (!m->nodes || !m->initializers || !m->inputs || !m->outputs || !m->value_infos) {
    st = OOM(err);
    return st;
  }
  if (g->n_sparse_initializer) {
    st = toplu__errorf(err, TOPLU_ERR_UNSUPPORTED, "%s: sparse initializers are not supported", name);
    return st;
  }
  for (size_t i = 0; i < g->n_initializer; i++) {
    Onnx__TensorProto *tp = g->initializer[i]; /* the message is toplu__onnx_decode's own (decode_tensor) */
    toplu__onnx_initializer_t *in = &m->initializers[i];
    m->n_initializers++;
    in->name = dupstr(tp->name);
    if (!in->name) {
      st = OOM(err);
      return st;
    }
    char what[600];
    snprintf(what, sizeof what, "%s: initializer '%s'", name, in->name);
    if (!*in->name) {
      st = toplu__errorf(err, TOPLU_ERR_PARSE, "%s: initializer %zu has no name", name, i);
      return st;
    }
    if ((st = decode_tensor(tp, tp, base_dir, what, &in->t, err))) return st;
  }
  for (size_t i = 0; i < g->n_input; i++) {
    m->n_inputs++;
    if ((st = decode_value_info(g->input[i], "graph input", &m->inputs[i], err))) return st;
  }
  for (size_t i = 0; i < g->n_output; i++) {
    m->n_outputs++;
    if ((st = decode_value_info(g->output[i], "graph output", &m->outputs[i], err))) return st;
  }
  for (size_t i = 0; i < g->n_value_info; i++) {
    m->n_value_infos++;
    if ((st = decode_value_info(g->value_info[i], "value_info", &m->value_infos[i], err))) return st;
  }
  for (size_t i = 0; i < g->n_node; i++) {
    m->n_nodes++;
    if ((st = decode_node(g->node[i], (int)i, base_dir, depth, &m->nodes[i], err))) {
      if (!depth) toplu__error_prefix(err, "%s", name);
      return st;
    }
  }
  return TOPLU_OK;
}

/* protobuf-c's allocator for a model's decoding: blocks of PB_OWN_MIN bytes or more (raw_data: a model's weights,
 * which decode_tensor then keeps as the tensors' data) 64-byte aligned, in huge pages from TOPLU__HUGE_MIN
 * (core/bigalloc.h) */
static void *pb_alloc(void *data, size_t size) {
  (void)data;
  return size >= PB_OWN_MIN ? toplu__alloc_large(size) : malloc(size);
}

static void pb_free(void *data, void *p) {
  (void)data;
  free(p);
}

static ProtobufCAllocator pb_allocator = {pb_alloc, pb_free, NULL};

toplu_status_t toplu__onnx_decode(const void *data, size_t size, const char *name, const char *base_dir,
                                 toplu__onnx_model_t **out, toplu_error_t *err) {
  *out = NULL;
  if (!name) name = "<memory>";
  Onnx__ModelProto *mp = onnx__model_proto__unpack(&pb_allocator, size, data);
  if (!mp) return toplu__errorf(err, TOPLU_ERR_PARSE, "%s: not an ONNX model (protobuf decoding failed: truncated or not a ModelProto)", name);
  toplu_status_t st = TOPLU_OK;
  toplu__onnx_model_t *m = calloc(1, sizeof *m);
  if (!m) {
    onnx__model_proto__free_unpacked(mp, &pb_allocator);
    return OOM(err);
  }
  const Onnx__GraphProto *g = mp->graph;
  if (!g) {
    st = size == 0 ? toplu__errorf(err, TOPLU_ERR_PARSE, "%s: the file is empty (0 bytes), not an ONNX model", name)
                   : toplu__errorf(err, TOPLU_ERR_PARSE, "%s: the model has no graph", name);
    goto done;
  }
  m->ir_version = mp->has_ir_version ? mp->ir_version : 0;
  m->producer_name = dupstr(mp->producer_name);
  m->producer_version = dupstr(mp->producer_version);
  m->opsets = calloc(mp->n_opset_import + 1, sizeof *m->opsets);
  if (!m->producer_name || !m->producer_version || !m->opsets) {
    st = OOM(err);
    goto done;
  }
  for (size_t i = 0; i < mp->n_opset_import; i++) {
    m->opsets[i].domain = dupstr(mp->opset_import[i]->domain);
    m->opsets[i].version = mp->opset_import[i]->has_version ? mp->opset_import[i]->version : 0;
    m->n_opsets++;
    if (!m->opsets[i].domain) {
      st = OOM(err);
      goto done;
    }
  }
  if ((st = decode_graph(g, name, base_dir, 0, m, err))) goto done;
done:
  onnx__model_proto__free_unpacked(mp, &pb_allocator);
  if (st) {
    if (st != TOPLU_OK && err && err->message[0] && !strstr(err->message, name)) toplu__error_prefix(err, "%s", name);
    toplu__onnx_model_free(m);
    return st;
  }
  *out = m;
  return TOPLU_OK;
}

toplu_status_t toplu__onnx_read_bytes(const char *path, unsigned char **buf, size_t *len, char *dir, size_t dir_cap,
                                     toplu_error_t *err) {
  *buf = NULL;
  *len = 0;
  /* O_NONBLOCK: opening a FIFO must not wait for a writer; it is refused below */
  int fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
  struct stat sb;
  if (fd < 0 || fstat(fd, &sb) != 0) {
    int e = errno;
    if (fd >= 0) close(fd);
    return toplu__errorf(err, TOPLU_ERR_IO, "%s: cannot open the model file: %s", path, strerror(e));
  }
  if (!S_ISREG(sb.st_mode)) {
    close(fd);
    if (S_ISDIR(sb.st_mode)) return toplu__errorf(err, TOPLU_ERR_IO, "%s: is a directory, not a model file", path);
    return toplu__errorf(err, TOPLU_ERR_IO, "%s: not a regular file (%s); a model must be one", path,
                        toplu__file_kind((unsigned)sb.st_mode));
  }
  if (sb.st_size < 0 || (uint64_t)sb.st_size > TOPLU_ONNX_MAX_FILE_BYTES) {
    close(fd);
    return toplu__errorf(err, TOPLU_ERR_IO, "%s: %lld bytes, over the model-file limit of %s (weights that large belong "
                        "in external data)", path, (long long)sb.st_size, TOPLU_ONNX_MAX_FILE_TEXT);
  }
  size_t size = (size_t)sb.st_size;
  unsigned char *b = toplu__alloc_large(size + 1); /* huge pages from 2 MiB (core/bigalloc.h) */
  if (!b) {
    close(fd);
    return toplu__errorf(err, TOPLU_ERR_OUT_OF_MEMORY, "%s: cannot hold %zu bytes", path, size);
  }
  ssize_t got = toplu__pread_full(fd, b, size, 0);
  if (got < 0 || (size_t)got < size) {
    int e = errno;
    close(fd);
    free(b);
    return toplu__errorf(err, TOPLU_ERR_IO, "%s: %s after %zd of %zu bytes", path,
                        got < 0 ? strerror(e) : "the file ended early (it changed while read)", got < 0 ? 0 : got, size);
  }
  close(fd);
  if (dir && dir_cap) {
    snprintf(dir, dir_cap, "%s", path);
    char *slash = strrchr(dir, '/');
    if (slash == dir) dir[1] = '\0';
    else if (slash) *slash = '\0';
    else snprintf(dir, dir_cap, ".");
  }
  *buf = b;
  *len = size;
  return TOPLU_OK;
}

toplu_status_t toplu__onnx_read_file(const char *path, toplu__onnx_model_t **out, toplu_error_t *err) {
  *out = NULL;
  unsigned char *buf;
  size_t len;
  char dir[4096];
  toplu_status_t st = toplu__onnx_read_bytes(path, &buf, &len, dir, sizeof dir, err);
  if (st) return st;
  st = toplu__onnx_decode(buf, len, path, dir, out, err);
  free(buf);
  return st;
}

/* ---- the external data files a model names ---- */

typedef struct ext_list {
  char **names;
  int n, cap, oom;
  const char *dir;
} ext_list_t;

static void ext_add(ext_list_t *l, const Onnx__TensorProto *tp) {
  if (!tp || !tp->has_data_location || tp->data_location != ONNX__TENSOR_PROTO__DATA_LOCATION__EXTERNAL) return;
  const char *loc = NULL;
  for (size_t i = 0; i < tp->n_external_data; i++)
    if (tp->external_data[i]->key && !strcmp(tp->external_data[i]->key, "location")) loc = tp->external_data[i]->value;
  if (!loc || !*loc) return;
  size_t need = strlen(l->dir) + strlen(loc) + 2;
  char *name = malloc(need);
  if (!name) {
    l->oom = 1;
    return;
  }
  snprintf(name, need, "%s/%s", l->dir, loc);
  for (int i = 0; i < l->n; i++)
    if (!strcmp(l->names[i], name)) {
      free(name);
      return;
    }
  if (l->n == l->cap) {
    int cap = l->cap ? 2 * l->cap : 4;
    char **g = realloc(l->names, (size_t)cap * sizeof *g);
    if (!g) {
      free(name);
      l->oom = 1;
      return;
    }
    l->names = g;
    l->cap = cap;
  }
  l->names[l->n++] = name;
}

static void ext_graph(ext_list_t *l, const Onnx__GraphProto *g, int depth);

static void ext_attr(ext_list_t *l, const Onnx__AttributeProto *a, int depth) {
  ext_add(l, a->t);
  for (size_t i = 0; i < a->n_tensors; i++) ext_add(l, a->tensors[i]);
  if (a->g) ext_graph(l, a->g, depth + 1);
  for (size_t i = 0; i < a->n_graphs; i++) ext_graph(l, a->graphs[i], depth + 1);
}

static void ext_graph(ext_list_t *l, const Onnx__GraphProto *g, int depth) {
  if (!g || depth > TOPLU_ONNX_MAX_SUBGRAPH_DEPTH) return;
  for (size_t i = 0; i < g->n_initializer; i++) ext_add(l, g->initializer[i]);
  for (size_t i = 0; i < g->n_node; i++)
    for (size_t k = 0; k < g->node[i]->n_attribute; k++) ext_attr(l, g->node[i]->attribute[k], depth);
}

/* 1 when the n bytes at p hold key (memmem is a GNU extension). */
static int bytes_hold(const unsigned char *p, size_t n, const char *key) {
  size_t k = strlen(key);
  const unsigned char *end = p + n;
  while ((size_t)(end - p) >= k) {
    const unsigned char *q = memchr(p, key[0], (size_t)(end - p) - k + 1);
    if (!q) return 0;
    if (!memcmp(q, key, k)) return 1;
    p = q + 1;
  }
  return 0;
}

void toplu__onnx_free_names(char **names, int n) {
  for (int i = 0; i < n; i++) free(names[i]);
  free(names);
}

toplu_status_t toplu__onnx_external_files(const char *path, char ***out, int *n, toplu_error_t *err) {
  *out = NULL;
  *n = 0;
  char dir[4096];
  snprintf(dir, sizeof dir, "%s", path);
  char *slash = strrchr(dir, '/');
  if (slash == dir) dir[1] = '\0';
  else if (slash) *slash = '\0';
  else snprintf(dir, sizeof dir, ".");
  /* Mapped, not read: the model file may be large, and most name no external data (their bytes never hold
   * the key "location", so they are not parsed at all). */
  int fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
  struct stat sb;
  if (fd < 0 || fstat(fd, &sb) != 0 || !S_ISREG(sb.st_mode)) {
    int e = fd < 0 || errno ? errno : EINVAL;
    if (fd >= 0) close(fd);
    return toplu__errorf(err, TOPLU_ERR_IO, "%s: cannot open the model file: %s", path,
                         e == EINVAL ? "not a regular file" : strerror(e));
  }
  size_t len = (size_t)sb.st_size;
  void *buf = len ? mmap(NULL, len, PROT_READ, MAP_PRIVATE, fd, 0) : NULL;
  close(fd);
  if (len && buf == MAP_FAILED) return toplu__errorf(err, TOPLU_ERR_IO, "%s: cannot map: %s", path, strerror(errno));
  if (!len || !bytes_hold(buf, len, "location")) {
    if (len) munmap(buf, len);
    return TOPLU_OK;
  }
  Onnx__ModelProto *mp = onnx__model_proto__unpack(NULL, len, buf);
  munmap(buf, len);
  if (!mp) return toplu__errorf(err, TOPLU_ERR_PARSE, "%s: not an ONNX model (protobuf decoding failed)", path);
  ext_list_t l = {.dir = dir};
  ext_graph(&l, mp->graph, 0);
  onnx__model_proto__free_unpacked(mp, NULL);
  if (l.oom) {
    toplu__onnx_free_names(l.names, l.n);
    return OOM(err);
  }
  *out = l.names;
  *n = l.n;
  return TOPLU_OK;
}

toplu_status_t toplu__onnx_tensor_from_proto(const struct Onnx__TensorProto *tp, const char *base_dir, const char *what,
                                            toplu_tensor_t *t, toplu_error_t *err) {
  return decode_tensor(tp, NULL, base_dir, what ? what : "<tensor>", t, err);
}

toplu_status_t toplu__onnx_tensor_decode(const void *data, size_t size, const char *what, toplu_tensor_t *t,
                                        char **name, toplu_error_t *err) {
  memset(t, 0, sizeof *t);
  if (name) *name = NULL;
  if (!what) what = "<tensor>";
  Onnx__TensorProto *tp = onnx__tensor_proto__unpack(NULL, size, data);
  if (!tp) return toplu__errorf(err, TOPLU_ERR_PARSE, "%s: not a TensorProto (protobuf decoding failed)", what);
  toplu_status_t st = decode_tensor(tp, NULL, NULL, what, t, err);
  if (st == TOPLU_OK && name && !(*name = dupstr(tp->name))) {
    free(t->data);
    t->data = NULL;
    st = OOM(err);
  }
  onnx__tensor_proto__free_unpacked(tp, NULL);
  return st;
}
