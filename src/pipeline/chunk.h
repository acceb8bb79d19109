/*
 * pipeline/chunk.h - the unit of work of a job: a chunk of consecutive rows.
 *
 * A chunk holds rows [first, first + count) of the input.  The read stage
 * fills each row's preprocessed input tensors (pl_row_t.in, dims without the
 * batch dim); pl_chunk_stack groups the rows whose inputs have the same
 * shapes (shape buckets, in order of first appearance) and stacks each group
 * into one batch tensor per input; an input passed whole (pl_chunk_t.whole)
 * is copied into every batch as it is, without a batch dim added.  The inference stage fills the batches'
 * outputs; the postprocess stage computes per-row results and formats them
 * into the chunk's buffers; the writer appends those.  Chunk boundaries
 * depend only on the shard's first row and the batch size, so a resumed job
 * forms exactly the batches an uninterrupted one does.
 */
#ifndef TOPLU_PIPELINE_CHUNK_H
#define TOPLU_PIPELINE_CHUNK_H

#include <stdint.h>

#include "pipeline/buf.h"
#include "toplu/tensor.h"

/* What a source gives for one field of one row. */
typedef enum pl_value_kind { PL_VALUE_NONE = 0, PL_VALUE_IMAGE = 1, PL_VALUE_TENSOR = 2 } pl_value_kind_t;

typedef struct pl_value {
  pl_value_kind_t kind;
  int w, h, c;       /* image: width, height, channels (1 gray, 3 RGB) */
  uint8_t *pixels;   /* image: h*w*c bytes, row-major HWC (malloc) */
  toplu_tensor_t t;  /* tensor: one row, dims without the batch dim (toplu_tensor_alloc) */
} pl_value_t;

void pl_value_free(pl_value_t *v);
/* pl_value_free, its tensor's data given back to pool (pipeline/pool.h; NULL: freed). */
struct pl_pool;
void pl_value_release(struct pl_pool *pool, pl_value_t *v);

/* Per-row result of postprocessing (see pipeline/postprocess.h). */
typedef struct pl_result {
  int64_t argmax;
  int k;            /* top-k entries filled */
  int64_t *topk_index;
  double *topk_score; /* in the output's values (float64 kept whole: pl_post_t.score_f64) */
} pl_result_t;

typedef struct pl_row {
  int64_t index;          /* absolute row number in the input */
  char *id;               /* the row's id as text */
  int id_is_number;       /* 1: write id as a JSON number */
  const char *fail_stage; /* non-NULL: the row failed in this stage ("read", ...) */
  char *fail_reason;      /* malloc'ed message */
  toplu_tensor_t *in;     /* [n_inputs] preprocessed tensors (owned data) */
  int batch;              /* index into the chunk's batches, -1 before stacking */
  int64_t pos;            /* row within the batch */
  int64_t seq_len;        /* length_buckets: the row's own sequence length (its inputs padded beyond it), else -1 */
  pl_result_t res;
} pl_row_t;

typedef struct pl_batch {
  int64_t n;             /* rows */
  toplu_tensor_t *in;    /* [n_inputs] stacked [n, ...] (owned unless borrowed) */
  toplu_tensor_t *out;   /* [n_outputs] (data malloc'ed by the session) */
  int ran;               /* outputs are valid */
  int borrowed;          /* in[] point into another batch's inputs (a row split out of it) */
} pl_batch_t;

/* Output buffers of a chunk: the .npy directory sink uses one per model output, one for ids and one for
 * its shapes (64 outputs; 14 until 2026-12-05, too few for detectors with many heads). */
#define PL_CHUNK_BUFS 66

typedef struct pl_chunk {
  int64_t index;         /* chunk number from the shard's first row */
  int64_t first, count;  /* rows [first, first + count) */
  int n_inputs, n_outputs;
  pl_row_t *rows;        /* [count] */
  pl_batch_t *batches;
  int n_batches;
  pl_buf_t out[PL_CHUNK_BUFS]; /* formatted results, by sink file (see sink.h) */
  pl_buf_t errors;       /* formatted lines for the errors file */
  int64_t n_ok, n_failed;
  int64_t n_runs;        /* session runs made for this chunk */
  /* [n_inputs] or NULL: inputs passed whole to every batch (data NULL for
   * the per-row ones); borrowed from the job. */
  const toplu_tensor_t *whole;
  /* [n_outputs] or NULL: 1 for outputs whose dim 1 is the sequence dim of
   * length buckets (cut back to each row's seq_len); borrowed from the job. */
  const unsigned char *out_seq;
  /* Where the rows' and batches' input buffers come from and go back to (pipeline/pool.h); borrowed from the
   * job, NULL for plain allocations. */
  struct pl_pool *pool;
} pl_chunk_t;


/* Allocate rows for a chunk; 0 or -1 (out of memory). */
int pl_chunk_init(pl_chunk_t *c, int64_t index, int64_t first, int64_t count, int n_inputs, int n_outputs);
/* Free everything the chunk holds (it can be initialised again). */
void pl_chunk_clear(pl_chunk_t *c);
/* Mark row r failed in stage with a formatted reason (keeps the first). */
void pl_row_fail(pl_row_t *r, const char *stage, const char *fmt, ...) TOPLU_PRINTF(3, 4);
/* Group the rows that did not fail by input shapes and stack each group
 * into a batch (row input tensors are freed as they are copied).  0 or -1
 * (out of memory). */
int pl_chunk_stack(pl_chunk_t *c);
/* Append a batch of one row for row r of batch b whose inputs point at its
 * slice of batch b's inputs (no copy: a batch that ran out of memory is not
 * doubled; whole inputs are shared as they are); batch b's inputs stay until
 * pl_chunk_free_inputs.  0 or -1 (out of memory). */
int pl_chunk_split_row(pl_chunk_t *c, int b, pl_row_t *row);
/* Append two batches of batch b's n rows, the first n/2 and the rest, pointing at their slices of batch b's inputs
 * as pl_chunk_split_row's do, and move the rows of b to them (a batch that ran out of memory runs at half its
 * size, then a quarter, ...).  0 or -1 (out of memory: b's rows stay where they were). */
int pl_chunk_split_halves(pl_chunk_t *c, int b, int64_t n);
/* Free the batches' input tensors (after inference). */
void pl_chunk_free_inputs(pl_chunk_t *c);
/* Pointer to output j's slice for row r, with its dims (without the batch
 * dim) in *ndim/dims; NULL when the row has no output.  A row padded by
 * length buckets gets its own length in dims[0] of the outputs c->out_seq
 * marks (the prefix of its padded slice). */
const void *pl_row_output(const pl_chunk_t *c, const pl_row_t *r, int j, toplu_dtype_t *dtype, int *ndim,
                          int64_t *dims);

#endif
