/*
 * tune/measure.h - measure one batch size: plan, buffers, warm-up, windows
 * of timed runs until stable, statistics, memory, and back to baseline.
 */
#ifndef TOPLU_TUNE_MEASURE_H
#define TOPLU_TUNE_MEASURE_H

#include <stdint.h>
#include <stdio.h>

#include "plan/latency.h"
#include "plan/shapes.h"
#include "toplu/alloc.h"
#include "toplu/session.h"
#include "toplu/tuner.h"

/* What the tuner holds across batch sizes. */
typedef struct tune_ctx {
  const toplu_model_t *model;
  const toplu_tune_options_t *o;
  toplu__batch_shapes_t shapes;
  toplu_allocator_t *alloc;
  toplu_session_t *session;
  uint64_t in_place;         /* constants read in place (added to every peak) */
  uint64_t predicted_weights; /* the weights term of the last row predicted (in memory once its plan is built) */
  toplu__latency_model_t lm;  /* the planner's model for predictions */
  toplu_tensor_t *data;      /* per input: rows from --input (data NULL: random) */
  int n_in, n_out;
  double t_start;            /* monotonic seconds when the sweep began */
  int rows_cap, probes_cap;  /* allocated entries of the result's rows and probes */
} tune_ctx_t;

/*
 * Measure batch size b into row.  full = 0: only test that it fits (plan,
 * buffers, one run).  Out of memory is not an error: row->status is
 * TOPLU_TUNE_OOM and row->message says why.  Everything is freed before
 * returning (row->after_bytes: the allocator's bytes still in use).
 * Errors: failures other than memory (the message names the batch size).
 */
toplu_status_t toplu__tune_measure(tune_ctx_t *c, int64_t b, int full, toplu_tune_row_t *row, toplu_error_t *err);

/*
 * Set r->recommended_batch_size from r->rows[0 .. n_rows-1] (ascending batch
 * sizes): the smallest row with status ok whose throughput is at least 0.97
 * times the best ok throughput; when no row is ok, the over_budget row with
 * the lowest p99 (and a note in r->notes saying so); 0 when neither exists.
 * Reads only status, throughput and p99_ms.  tune/tune.c; tested with
 * hand-made rows in tests/test_tune_recommend.c.
 */
void toplu__tune_recommend(toplu_tune_result_t *r);

/* Seconds on a monotonic clock. */
double toplu__tune_now(void);

/* p-th percentile (0..100) of n sorted values, linear between ranks. */
double toplu__percentile(const double *sorted, int n, double p);

/* 1 when the last three windows agree within tol (max / min - 1 <= tol)
 * on both series. */
int toplu__windows_stable(const double *thr, const double *p99, int n, double tol);

#endif
