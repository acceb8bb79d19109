/*
 * serve/perf_priv.h - pieces of toplu perf (include/toplu/perf.h) shared
 * between src/serve/perf.c (the sweep), src/serve/perf_data.c (the request
 * bodies) and src/serve/perf_plot.c (the PNG plot).
 *
 * Internal: not installed, names with the srv_perf_ prefix.  Nothing here
 * keeps global state; every function is thread-safe on distinct arguments.
 */
#ifndef TOPLU_SERVE_PERF_PRIV_H
#define TOPLU_SERVE_PERF_PRIV_H

#include <stddef.h>
#include <stdint.h>

#include "pipeline/buf.h"
#include "toplu/perf.h"

/* One model input as the server's metadata describes it, and the shape the
 * requests give it. */
typedef struct srv_perf_input {
  char *name;
  toplu_dtype_t dtype;           /* TOPLU_DTYPE_STRING for BYTES */
  char datatype[16];             /* the protocol's name ("FP32") */
  int ndim;                      /* metadata rank */
  int64_t meta_dims[TOPLU_MAX_DIMS]; /* metadata dims, -1 for variable */
  int req_ndim;                  /* request rank (batch dim included when batching) */
  int64_t req_dims[TOPLU_MAX_DIMS];
  int64_t unit_numel;            /* elements of one batch row (of the whole tensor without batching) */
} srv_perf_input_t;

/* One prebuilt request body with its headers. */
typedef struct srv_perf_body {
  pl_buf_t body;
  size_t json_len;               /* Inference-Header-Content-Length when binary (< body.len), else body.len */
} srv_perf_body_t;

/*
 * Build the request bodies for inputs (n of them, request shapes set):
 * data "random"/NULL, "zero", a .npy path or a perf_analyzer JSON path;
 * batching: the model batches (unit data repeated batch times along dim 0).
 * *bodies gets *n_bodies bodies (free with srv_perf_bodies_free).  Returns
 * a status with err naming the input or file.
 */
toplu_status_t srv_perf_build_bodies(const srv_perf_input_t *inputs, int n, int batching, int64_t batch,
                                     const char *data, int json_input, int json_output, uint64_t seed,
                                     srv_perf_body_t **bodies, int *n_bodies, toplu_error_t *err);

/* Free n bodies and the array.  NULL-safe. */
void srv_perf_bodies_free(srv_perf_body_t *bodies, int n);

/* xorshift64* step: the next 64 random bits of state *s (never 0). */
uint64_t srv_perf_rand(uint64_t *s);

#endif
