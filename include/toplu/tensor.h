/*
 * toplu/tensor.h - element types and the tensor descriptor.
 *
 * A toplu_tensor_t is a plain descriptor (like DLPack's DLTensor): element
 * type, rank, dims and a pointer to dense row-major (C order) data.  It does
 * not own its data unless it was filled by toplu_tensor_alloc(), in which
 * case toplu_tensor_free() releases it.  Element types carry the numeric
 * values of ONNX's TensorProto.DataType so they convert without a table.
 *
 * String tensors (TOPLU_DTYPE_STRING; ONNX's STRING, UTF-8 by the ONNX IR
 * spec): data is an array of `char *`, one per element in row-major order,
 * each pointing at a NUL-terminated UTF-8 string (so toplu_dtype_size gives
 * sizeof(char *)).  A NULL element reads as "".  Who owns what:
 *   - inputs the caller passes (toplu_session_run's inputs) are the caller's:
 *     toplu reads the pointer array and the strings during the call, never
 *     writes or frees them, and keeps nothing after the call returns (a
 *     plan keyed on an input's values holds its own deep copy);
 *   - a string tensor toplu allocates (toplu_tensor_alloc, an output passed
 *     with data NULL, a tensor the loader decodes) is one malloc'd block:
 *     the pointer array followed by the strings' bytes, so
 *     toplu_tensor_free (free(data)) releases all of it.  Do not free or
 *     realloc the elements one by one; to change an element, point it at
 *     storage of your own (the block's bytes stay valid until the free).
 *   - a string output must be passed with data NULL: its size depends on
 *     the strings, so a caller's buffer cannot be sized ahead
 *     (TOPLU_ERR_INVALID_ARGUMENT otherwise).
 * Ops that compute on strings: Cast and CastLike to and from STRING,
 * StringNormalizer, and the ops that only move elements (Identity, Reshape,
 * Flatten, Squeeze, Unsqueeze, Concat, Gather; Shape and Size read only the
 * shape); others refuse a string tensor with TOPLU_ERR_UNSUPPORTED.
 */
#ifndef TOPLU_TENSOR_H
#define TOPLU_TENSOR_H

#include <stddef.h>
#include <stdint.h>

#include "toplu/status.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Element types; values are ONNX TensorProto.DataType (onnx.proto). */
typedef enum toplu_dtype {
  TOPLU_DTYPE_UNDEFINED = 0,
  TOPLU_DTYPE_FLOAT = 1, /* float32 */
  TOPLU_DTYPE_UINT8 = 2,
  TOPLU_DTYPE_INT8 = 3,
  TOPLU_DTYPE_UINT16 = 4,
  TOPLU_DTYPE_INT16 = 5,
  TOPLU_DTYPE_INT32 = 6,
  TOPLU_DTYPE_INT64 = 7,
  TOPLU_DTYPE_STRING = 8, /* an array of char *, see above */
  TOPLU_DTYPE_BOOL = 9,   /* one byte, 0 or 1 */
  TOPLU_DTYPE_FLOAT16 = 10,
  TOPLU_DTYPE_DOUBLE = 11,
  TOPLU_DTYPE_UINT32 = 12,
  TOPLU_DTYPE_UINT64 = 13,
  TOPLU_DTYPE_BFLOAT16 = 16
} toplu_dtype_t;

/*
 * What a toplu_tensor_t holds (toplu_tensor_t.kind) and what a model's
 * input or output is declared to be (toplu_value_info_t.kind): ONNX's
 * TypeProto value cases (onnx.proto: tensor_type, sequence_type,
 * optional_type).  Map and sparse types are not supported.
 *   TOPLU_KIND_TENSOR    a dense tensor (the zero value: every zeroed
 *                        toplu_tensor_t is a tensor)
 *   TOPLU_KIND_SEQUENCE  an ONNX sequence of tensors: ndim 1, dims[0] the
 *                        number of items, data an array of dims[0]
 *                        toplu_tensor_t items (each a TOPLU_KIND_TENSOR of
 *                        the same dtype, shapes may differ), dtype the
 *                        items' element type (checked against them;
 *                        UNDEFINED: not checked); at most 4096 items
 *                        (TOPLU_ERR_UNSUPPORTED beyond: each item becomes
 *                        a value of the plan)
 *   TOPLU_KIND_OPTIONAL  value_info only: an ONNX optional; a run takes
 *                        either its element (a tensor or a sequence, as
 *                        toplu_value_info_t.elem_kind says) or
 *   TOPLU_KIND_NONE      an optional without a value: ndim 0, data NULL
 */
typedef enum toplu_kind {
  TOPLU_KIND_TENSOR = 0,
  TOPLU_KIND_SEQUENCE = 1,
  TOPLU_KIND_OPTIONAL = 2,
  TOPLU_KIND_NONE = 3
} toplu_kind_t;

/* "tensor", "sequence", "optional", "none"; "unknown" otherwise.  Never NULL. */
const char *toplu_kind_name(toplu_kind_t kind);

/* Highest tensor rank toplu handles; a model with more is rejected at load
 * with TOPLU_ERR_UNSUPPORTED. */
#define TOPLU_MAX_DIMS 8

typedef struct toplu_tensor {
  toplu_dtype_t dtype;
  int ndim;                      /* 0 for a scalar */
  int64_t dims[TOPLU_MAX_DIMS];  /* dims[0..ndim-1], each >= 0 */
  void *data;                    /* dense, row-major; NULL when empty or unset */
  /* Where data lives: TOPLU_DEVICE_HOST (0, the default of a zeroed tensor)
   * is ordinary host memory.  Every tensor that crosses the public API is in
   * host memory today; inside a plan, a backend with memory of its own
   * (toplu_session_options_t.backends) marks its tensors with its device id
   * and the plan copies at the boundaries. */
  int device;
  /* TOPLU_KIND_TENSOR (0) for a tensor; TOPLU_KIND_SEQUENCE or
   * TOPLU_KIND_NONE for the sequence and optional values of models that
   * take or give them (see toplu_kind_t above). */
  toplu_kind_t kind;
} toplu_tensor_t;

/* toplu_tensor_t.device of host memory. */
#define TOPLU_DEVICE_HOST 0

/* Bytes per element: 4 for FLOAT, 2 for FLOAT16 and BFLOAT16, 1 for BOOL,
 * sizeof(char *) for STRING (the pointer array; the strings' bytes are not
 * counted); 0 for UNDEFINED and unknown values.  Thread-safe. */
size_t toplu_dtype_size(toplu_dtype_t dtype);

/* numpy-style name ("float32", "float16", "int64", "bool", ...); "undefined"
 * for unknown values.  Never NULL. */
const char *toplu_dtype_name(toplu_dtype_t dtype);

/* Inverse of toplu_dtype_name (also accepts ONNX names "FLOAT", "INT64" ...);
 * TOPLU_DTYPE_UNDEFINED when the name is unknown. */
toplu_dtype_t toplu_dtype_from_name(const char *name);

/* Product of dims (1 for a scalar); 0 when any dim is 0.  A product that
 * does not fit in int64 saturates at INT64_MAX (INT64_MIN when negative)
 * instead of wrapping; no shape toplu accepts is that large.  Undefined for
 * ndim outside 0..TOPLU_MAX_DIMS; 0 for a NULL tensor.  Thread-safe. */
int64_t toplu_tensor_numel(const toplu_tensor_t *t);

/* The largest tensor toplu takes, in elements: 2^40 (4 TiB of float32).
 * The loader (initializers), shape inference (constant folding), plans,
 * sessions (inputs) and the planner (input shapes) all refuse larger
 * shapes with this one limit, before any size arithmetic can wrap
 * (TOPLU_ERR_PARSE in a file, TOPLU_ERR_INVALID_MODEL for an output the
 * model's constants and declared dims fix at load, TOPLU_ERR_OUT_OF_MEMORY
 * for a plan or run, TOPLU_ERR_SHAPE for a planner shape).  TOPLU_MAX_ELEMENTS_TEXT is the
 * same number as messages write it. */
#define TOPLU_MAX_ELEMENTS (UINT64_C(1) << 40)
#define TOPLU_MAX_ELEMENTS_TEXT "2^40"

/* Elements of a shape (1 for a scalar) without overflow: the product when
 * the product of its positive dims is at most limit, else UINT64_MAX (so
 * [2, 2^63-1, 0] is UINT64_MAX, whatever the order of its dims).  Negative
 * dims (unknown or symbolic) count as 0.  Thread-safe. */
uint64_t toplu_shape_numel_limited(int ndim, const int64_t *dims, uint64_t limit);

/* numel * dtype size, in bytes (for STRING: the pointer array only);
 * SIZE_MAX when that does not fit in size_t (or a dim is negative).
 * Thread-safe. */
size_t toplu_tensor_nbytes(const toplu_tensor_t *t);

/* Set dtype and shape (kind TOPLU_KIND_TENSOR, device TOPLU_DEVICE_HOST,
 * whatever *t held) and malloc zeroed data (64-byte aligned); a STRING
 * tensor gets one block whose every element points at an empty string
 * inside it.  On failure the tensor's data is NULL.  Errors: TOPLU_ERR_INVALID_ARGUMENT (bad rank,
 * negative dim, dtype without a size), TOPLU_ERR_OUT_OF_MEMORY (also for a
 * shape whose non-zero dims multiply past TOPLU_MAX_ELEMENTS).  Thread-safe. */
toplu_status_t toplu_tensor_alloc(toplu_tensor_t *t, toplu_dtype_t dtype, int ndim,
                                  const int64_t *dims);

/* Free data toplu allocated (toplu_tensor_alloc(), an output toplu_session_run
 * allocated, string tensors included: one block) and set data to NULL; for a
 * TOPLU_KIND_SEQUENCE value a run gave back, free each item's data and the
 * item array.  NULL-safe. */
void toplu_tensor_free(toplu_tensor_t *t);

/* Write "[8, 3, 224, 224]" into buf (always NUL-terminated; a shape that
 * does not fit ends in "...]" when size >= 5); returns buf.  Thread-safe. */
char *toplu_shape_format(int ndim, const int64_t *dims, char *buf, size_t size);

/* IEEE half <-> single conversions, round to nearest even. */
float toplu_half_to_float(uint16_t h);
uint16_t toplu_float_to_half(float f);
float toplu_bfloat16_to_float(uint16_t b);
uint16_t toplu_float_to_bfloat16(float f);

#ifdef __cplusplus
}
#endif
#endif /* TOPLU_TENSOR_H */
