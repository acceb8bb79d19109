/*
 * serve/protocol.h - the KServe v2 (Open Inference Protocol) inference
 * request and response bodies, JSON and the binary tensor data extension.
 *
 * Specs: KServe "Open Inference Protocol (V2)" REST section (request and
 * response JSON objects, tensor data as flat or nested arrays, datatypes
 * BOOL, UINT8..UINT64, INT8..INT64, FP16, FP32, FP64, BYTES) and Triton's
 * "Binary Tensor Data Extension" (binary_data_size, binary_data,
 * binary_data_output, the Inference-Header-Content-Length header, BYTES
 * elements as a 4-byte little-endian length followed by the bytes).
 *
 * Parsing never allocates by a size the body does not hold: every shape is
 * checked against the model's declared input (rank, fixed dims, dim 0 within
 * max_batch_size), the element count against the values or bytes present,
 * and only then is memory taken, bounded by the body's own length.
 *
 * Functions here are pure (no shared state): thread-safe.
 */
#ifndef TOPLU_SERVE_PROTOCOL_H
#define TOPLU_SERVE_PROTOCOL_H

#include <stddef.h>
#include <stdint.h>

#include "pipeline/buf.h"
#include "toplu/model.h"
#include "toplu/tensor.h"

/* The KServe v2 datatype name of a toplu dtype ("FP32", "INT64", "BOOL",
 * "BYTES" for TOPLU_DTYPE_STRING); NULL for dtypes the protocol lacks
 * (BFLOAT16 is "BF16", Triton's name). */
const char *srv_datatype_name(toplu_dtype_t dtype);
/* The inverse (exact, upper case); TOPLU_DTYPE_UNDEFINED for unknown names. */
toplu_dtype_t srv_datatype_from_name(const char *name);

/* One input tensor of a parsed request. */
typedef struct srv_input {
  int index;                     /* the model input it is (toplu_model_input order) */
  toplu_dtype_t dtype;           /* equal to the model input's dtype */
  int ndim;                      /* equal to the model input's rank */
  int64_t dims[TOPLU_MAX_DIMS];
  const void *data;              /* dense, row-major, native little-endian values; points into the
                                    body (binary data: not copied, and not aligned to the dtype, so
                                    read it with memcpy) or into srv_infer_t.mem (JSON data, 64-byte
                                    aligned within the block) */
  size_t nbytes;                 /* numel * dtype size */
} srv_input_t;

/* One requested output. */
typedef struct srv_output_sel {
  int index;                     /* model output index */
  int binary;                    /* 1: return it as binary data (parameters.binary_data, or the
                                    request's binary_data_output) */
} srv_output_sel_t;

/* A parsed, validated inference request. */
typedef struct srv_infer {
  char *id;                      /* the request's "id" (NULL when absent); echoed in the response */
  int n_inputs;                  /* == toplu_model_input_count: every input, once */
  srv_input_t *inputs;           /* in model input order */
  int n_outputs;                 /* requested outputs, in request order; every model output
                                    (binary per binary_data_output) when the request names none */
  srv_output_sel_t *outputs;
  int outputs_named;             /* 1 when the request listed "outputs" (0: every model output by default) */
  int binary_output;             /* parameters.binary_data_output */
  int64_t priority;              /* parameters.priority; 0 when absent (the model's default level) */
  int64_t timeout_us;            /* parameters.timeout (microseconds, Triton's name); 0 when absent */
  int64_t rows;                  /* dim 0 of the inputs when batching (max_batch_size > 0), else 1 */
  void *mem;                     /* everything above that the request owns */
} srv_infer_t;

/*
 * Parse and validate an infer request body for model m.
 *   max_batch_size  > 0: every input's dim 0 is the batch dim, 1..max_batch_size,
 *                   equal across inputs; the other dims follow the model's
 *                   declared dims (symbolic ones take any value >= 1).
 *                   0: shapes are the model's full shapes (no batching).
 *   header_len      the Inference-Header-Content-Length header's value: the JSON is
 *                   body[0..header_len) and binary tensor data follows in input
 *                   order; -1 when the header is absent (the whole body is JSON).
 * The body must outlive out (binary inputs point into it).
 * Returns 0, or an HTTP status (400; 500 when memory ran out) with err holding
 * a message that names the field ("inputs[0].shape: ...", "inputs[1]
 * ('mask').data: ...", jansson's line, column and text for invalid JSON).  On
 * failure out holds nothing to free (srv_infer_free is still safe).
 *
 * What is accepted (Triton's choices where the spec leaves it open):
 *   - JSON data flat (numel values) or nested exactly as the shape, level by
 *     level; the value count must equal the shape's element count.
 *   - BOOL: true/false only (0/1 refused); binary BOOL bytes must be 0 or 1.
 *   - Integer types: JSON integers within the type's range, or integral
 *     reals (7.0, 1e3) within it; 2.5 and out-of-range values are refused.
 *     Integer literals beyond int64 (which jansson refuses) are read exactly
 *     for UINT64 (up to 2^64-1) and as doubles for FP16/FP32/FP64.
 *   - FP16/FP32/FP64: numbers (FP16 rounded to nearest even from the double),
 *     and the strings "NaN", "Infinity", "-Infinity" that the responses use;
 *     finite values beyond the type's range (1e39 for FP32, 65520 for FP16)
 *     are refused.
 *   - BYTES: strings in JSON; in binary, 4-byte little-endian lengths, each
 *     element within binary_data_size and numel of them.  Checked, then
 *     refused: a numeric model input's datatype does not match, and toplu
 *     computes on numbers only (a STRING model input is refused too).
 *   - outputs: absent or [] is every output; an unknown, repeated or
 *     classification output is refused.
 *   - binary data: in request order after the header; the binary_data_size of
 *     the binary inputs must add up to exactly the bytes after the header.
 *   - duplicate object keys are refused (invalid JSON).
 */
int srv_parse_infer(const toplu_model_t *m, int64_t max_batch_size, const char *body, size_t len,
                    int64_t header_len, srv_infer_t *out, char *err, size_t err_size);

/*
 * srv_parse_infer with the shapes clients send instead of the model's:
 * served[i] (when not NULL) replaces toplu_model_input(m, i) for the checks
 * of rank, dims and dtype (its name and dtype must be the model's).  A
 * config's reshape serves an input with another shape than the model's
 * (serve/config.h); the caller changes the parsed shapes into the model's.
 */
int srv_parse_infer_served(const toplu_model_t *m, const toplu_value_info_t *served, int64_t max_batch_size,
                           const char *body, size_t len, int64_t header_len, srv_infer_t *out, char *err,
                           size_t err_size);

/* Free what srv_parse_infer allocated; zeroes *r.  NULL-safe. */
void srv_infer_free(srv_infer_t *r);

/*
 * The index of the first NaN or infinity among the n elements of a float32,
 * float64, float16 or bfloat16 tensor at data (any alignment: a binary
 * input points into the body), or -1 (none, or another dtype); *is_nan says
 * which it is.  Thread-safe.
 */
int64_t srv_first_nonfinite(toplu_dtype_t dtype, const void *data, int64_t n, int *is_nan);

/*
 * The response body for one request.
 *   outputs   every model output (n = toplu_model_output_count), as this
 *             request's part of the batch: dims[0] = the request's rows when
 *             batching; data points at its first row.
 *   body      appended to: the JSON object {"id" (first, when the request had
 *             one), "model_name", "model_version", "outputs": [{"name",
 *             "datatype", "shape", "data" | "parameters": {"binary_data_size"}}]}
 *             with outputs in r->outputs order, then the binary data of the
 *             binary outputs in that order.
 *   json_len  the JSON part's length: the Inference-Header-Content-Length to
 *             send when it is less than body->len (binary outputs follow).
 * Floats are written in their shortest round-tripping form (FP16 and BF16
 * as the float they hold), negative zero as -0.0 (a reader that takes "-0"
 * for the integer 0 would lose its sign); NaN and Inf, which JSON lacks, as the strings
 * "NaN", "Infinity", "-Infinity" (a note in docs/serve.md); BOOL as
 * true/false.  JSON data is flat (KServe allows it; Triton does the same).
 * Returns 0, or 500 when memory ran out (body->oom) or an output's dtype has
 * no protocol datatype or is BYTES (toplu models never produce strings);
 * on 500 the body may hold part of a response.
 */
int srv_encode_infer_response(const srv_infer_t *r, const toplu_model_t *m, const char *model_name,
                              const char *model_version, const toplu_tensor_t *outputs, pl_buf_t *body,
                              size_t *json_len);

/* A response encoded without an id (r->id NULL: what the cache keeps), with
 * id (may be NULL) put in as the first member: into out, *out_json_len the
 * new JSON length.  json_len is the cached body's JSON length. */
void srv_response_with_id(const char *id, const char *body, size_t len, size_t json_len, pl_buf_t *out,
                          size_t *out_json_len);

/* {"error": "MESSAGE"} into body (valid JSON whatever bytes the message holds). */
void srv_encode_error(pl_buf_t *body, const char *message);

/*
 * The bytes that identify a request for the response cache: model name and
 * version, then every input's index, dtype, dims and data, then the requested
 * outputs with their binary flags.  Two requests with equal keys get equal
 * responses (apart from "id", which the cache patches: see serve/cache.h).
 */
void srv_infer_cache_key(const srv_infer_t *r, const char *model_name, const char *model_version, pl_buf_t *key);

#endif
