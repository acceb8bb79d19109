/*
 * pipeline/autobatch.h - `--batch-size auto`.
 *
 * The batch size comes from a tune result (recommended_batch_size in a
 * tune.json, found at the top level or in any nested object) or, without
 * one, from a short sweep: the job's first row stacked into batches of 1, 2,
 * 4, ... up to 64 rows (and at most 256 MiB of inputs), each run for about
 * a fifth of a second after a warm-up; the batch with the most rows per
 * second wins, and the sweep stops early when throughput falls twice in a
 * row or the time budget is spent.
 */
#ifndef TOPLU_PIPELINE_AUTOBATCH_H
#define TOPLU_PIPELINE_AUTOBATCH_H

#include <stddef.h>
#include <stdint.h>

#include "toplu/session.h"

/* recommended_batch_size from a tune.json.  Errors: TOPLU_ERR_IO,
 * TOPLU_ERR_PARSE, TOPLU_ERR_NOT_FOUND (no such key). */
toplu_status_t pl_tune_file_batch(const char *path, int64_t *batch, toplu_error_t *err);

/* Sweep batch sizes with row (one row per input, dims without the batch
 * dim); *best gets the winner and how a one-line summary
 * ("sweep: 1:120/s 2:210/s ... -> 16"). */
toplu_status_t pl_sweep_batch(toplu_session_t *s, const toplu_tensor_t *row, int n_in, int n_out, int64_t max_batch,
                              double budget_s, int64_t *best, char *how, size_t how_size, toplu_error_t *err);

#endif
