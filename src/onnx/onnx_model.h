/*
 * onnx/onnx_model.h - an ONNX file decoded into owned C structures.
 *
 * The onnx layer owns reading the protobuf (protobuf-c, generated from
 * Debian's onnx.proto) and turning it into plain structures the graph layer
 * builds its IR from: every string is copied and NUL-terminated, every
 * initializer and tensor attribute is decoded into a dense little-endian
 * buffer (typed fields, raw_data and external data alike), and value infos
 * carry dims with their dim_param names.  Nothing here knows about ops
 * beyond what the file says; resolving names and checking the graph is the
 * graph layer's job.
 */
#ifndef TOPLU_ONNX_MODEL_H
#define TOPLU_ONNX_MODEL_H

#include <stddef.h>
#include <stdint.h>

#include "toplu/status.h"
#include "toplu/tensor.h"

/* AttributeProto.AttributeType values. */
typedef enum toplu__attr_type {
  TOPLU_ATTR_UNDEFINED = 0,
  TOPLU_ATTR_FLOAT = 1,
  TOPLU_ATTR_INT = 2,
  TOPLU_ATTR_STRING = 3,
  TOPLU_ATTR_TENSOR = 4,
  TOPLU_ATTR_GRAPH = 5,
  TOPLU_ATTR_FLOATS = 6,
  TOPLU_ATTR_INTS = 7,
  TOPLU_ATTR_STRINGS = 8,
  TOPLU_ATTR_TENSORS = 9,
  TOPLU_ATTR_GRAPHS = 10,
  TOPLU_ATTR_SPARSE_TENSOR = 11,
  TOPLU_ATTR_SPARSE_TENSORS = 12,
  TOPLU_ATTR_TYPE_PROTO = 13,
  TOPLU_ATTR_TYPE_PROTOS = 14
} toplu__attr_type_t;

typedef struct toplu__attr {
  char *name;
  toplu__attr_type_t type;
  float f;
  int64_t i;
  char *s;          /* NUL-terminated copy; s_len excludes the NUL */
  size_t s_len;
  int64_t n;        /* element count of floats / ints / strings */
  float *floats;
  int64_t *ints;
  char **strings;
  toplu_tensor_t t; /* TENSOR: data owned (malloc) */
  struct toplu__onnx_model *g; /* GRAPH: the subgraph (If's branches, Loop's and Scan's bodies), owned: its
                                  nodes, initializers, inputs and outputs; no opsets (the model's apply) */
} toplu__attr_t;

/* Subgraphs (GRAPH attributes) nest at most this deep; deeper is refused
 * (TOPLU_ERR_UNSUPPORTED), so hostile files cannot exhaust the stack. */
#define TOPLU_ONNX_MAX_SUBGRAPH_DEPTH 32

/* A dim of a declared value: value >= 0, or param (a dim_param name, or NULL
 * for a dim with neither field set: unknown). */
typedef struct toplu__onnx_dim {
  int64_t value; /* -1 when symbolic or unknown */
  char *param;
} toplu__onnx_dim_t;

typedef struct toplu__onnx_value_info {
  char *name;
  toplu_dtype_t dtype; /* UNDEFINED when the type is absent */
  int ndim;            /* -1 when the shape is absent */
  toplu__onnx_dim_t dims[TOPLU_MAX_DIMS];
  int is_tensor;       /* 0 for sequence, map, optional and other types */
  /* TOPLU_KIND_TENSOR, _SEQUENCE (of tensors) or _OPTIONAL (of a tensor or
   * of a sequence of tensors: elem_kind); -1 for any other type (maps,
   * sparse tensors, deeper nesting).  dtype, ndim and dims describe the
   * innermost tensor type. */
  int kind, elem_kind;
} toplu__onnx_value_info_t;

typedef struct toplu__onnx_node {
  char *name;    /* "" when the file has none */
  char *op_type;
  char *domain;  /* "" for the default domain */
  int n_inputs, n_outputs, n_attrs;
  char **inputs; /* "" marks an absent optional input */
  char **outputs;
  toplu__attr_t *attrs;
} toplu__onnx_node_t;

typedef struct toplu__onnx_initializer {
  char *name;
  toplu_tensor_t t; /* data owned (malloc) */
} toplu__onnx_initializer_t;

typedef struct toplu__onnx_opset {
  char *domain;
  int64_t version;
} toplu__onnx_opset_t;

typedef struct toplu__onnx_model {
  char *path;        /* for messages */
  int64_t ir_version;
  char *producer_name, *producer_version, *graph_name;
  int n_opsets;
  toplu__onnx_opset_t *opsets;
  int n_nodes;
  toplu__onnx_node_t *nodes;
  int n_initializers;
  toplu__onnx_initializer_t *initializers;
  int n_inputs, n_outputs, n_value_infos;
  toplu__onnx_value_info_t *inputs, *outputs, *value_infos;
} toplu__onnx_model_t;

/*
 * Decode an ONNX ModelProto.  base_dir is where external-data paths are
 * resolved (NULL: external data is refused); name is used in messages.
 * Errors: TOPLU_ERR_PARSE (not a protobuf ModelProto, no graph, tensor data
 * of the wrong length), TOPLU_ERR_UNSUPPORTED (dtype without a size such as
 * STRING in an initializer, rank above TOPLU_MAX_DIMS, sparse initializers),
 * TOPLU_ERR_IO (external data), TOPLU_ERR_OUT_OF_MEMORY.  Thread-safe.
 */
toplu_status_t toplu__onnx_decode(const void *data, size_t size, const char *name, const char *base_dir,
                                 toplu__onnx_model_t **out, toplu_error_t *err);

/*
 * Read a whole model file into *buf (malloc'ed, one spare byte; *len bytes).
 * It must be a regular file (a directory, FIFO, device or socket is refused
 * at once: the open does not block) of at most TOPLU_ONNX_MAX_FILE_BYTES,
 * sized by fstat before anything is allocated.  dir (dir_cap bytes, may be
 * NULL) receives the file's folder ("." for a bare name), where its
 * external data is looked for.  Errors: TOPLU_ERR_IO (naming the path and
 * why), TOPLU_ERR_OUT_OF_MEMORY.  Thread-safe.
 */
#define TOPLU_ONNX_MAX_FILE_BYTES (UINT64_C(1) << 34)
#define TOPLU_ONNX_MAX_FILE_TEXT "16 GiB"
toplu_status_t toplu__onnx_read_bytes(const char *path, unsigned char **buf, size_t *len, char *dir, size_t dir_cap,
                                     toplu_error_t *err);

/* Read a file (toplu__onnx_read_bytes) and decode it; base_dir is the file's directory. */
toplu_status_t toplu__onnx_read_file(const char *path, toplu__onnx_model_t **out, toplu_error_t *err);

/* The external data files the model file at path names (data_location EXTERNAL in its initializers and in
 * tensors of node attributes, subgraphs included), each once, in first-use order, as "DIR/LOCATION" (DIR the
 * model file's directory; the locations as written, not checked here: loading checks them).  *out is an
 * array of *n malloc'd strings (NULL and 0 when there are none); free them with toplu__onnx_free_names.
 * Errors: TOPLU_ERR_IO, TOPLU_ERR_PARSE (not a model), TOPLU_ERR_OUT_OF_MEMORY.  Thread-safe.
 * (A batch job's model identity includes these files: pipeline/identity.c.) */
toplu_status_t toplu__onnx_external_files(const char *path, char ***out, int *n, toplu_error_t *err);
void toplu__onnx_free_names(char **names, int n);

void toplu__onnx_model_free(toplu__onnx_model_t *m);

/*
 * Decode an unpacked TensorProto (protobuf-c, onnx.pb-c.h) into t: dense,
 * little-endian, data malloc'ed (free with toplu_tensor_free), whichever
 * field holds the data (typed fields, raw_data, external data resolved
 * against base_dir; NULL refuses external data).  what names the tensor in
 * messages.  For code that edits a ModelProto (quantize/).  Errors: as
 * toplu__onnx_decode.  Thread-safe.
 */
struct Onnx__TensorProto;
toplu_status_t toplu__onnx_tensor_from_proto(const struct Onnx__TensorProto *tp, const char *base_dir, const char *what,
                                            toplu_tensor_t *t, toplu_error_t *err);

/*
 * Decode one serialized TensorProto (the input_N.pb / output_N.pb files of
 * the ONNX node tests) into t (data malloc'ed, free with toplu_tensor_free).
 * name (may be NULL) gets a malloc'ed copy of the tensor's name.  what
 * names the source in messages.  External data is refused.
 * Errors: as toplu__onnx_decode.
 */
toplu_status_t toplu__onnx_tensor_decode(const void *data, size_t size, const char *what, toplu_tensor_t *t,
                                        char **name, toplu_error_t *err);

/* Attribute lookup helpers over an attribute array (NULL/default when absent). */
const toplu__attr_t *toplu__attr_find(const toplu__attr_t *attrs, int n, const char *name);
/* Free what a holds (a GRAPH attribute's subgraph too) and zero it. */
void toplu__attr_clear(toplu__attr_t *a);
/* Deep copy of n attributes (subgraphs included) into *out (malloc'ed
 * array, free each with toplu__attr_clear, then the array).  0, or -1 when
 * out of memory (nothing allocated is left).  Thread-safe. */
int toplu__attrs_copy(const toplu__attr_t *src, int n, toplu__attr_t **out);

#endif
