/*
 * pipeline/shard.h - which part of the input one machine takes.
 *
 * Shard K of N takes rows [floor(K*T/N), floor((K+1)*T/N)) of the T rows:
 * contiguous, deterministic, sizes differing by at most one, so the shards'
 * outputs joined in shard order are the input order.  Without an explicit
 * shard, Kubernetes Indexed Jobs (JOB_COMPLETION_INDEX, with JOB_COMPLETIONS
 * set in the pod spec) and Slurm job arrays (SLURM_ARRAY_TASK_ID,
 * SLURM_ARRAY_TASK_COUNT, SLURM_ARRAY_TASK_MIN, SLURM_ARRAY_TASK_STEP) pick it.
 */
#ifndef TOPLU_PIPELINE_SHARD_H
#define TOPLU_PIPELINE_SHARD_H

#include <stddef.h>
#include <stdint.h>

#include "toplu/status.h"

typedef struct pl_shard {
  int64_t index, count;
  char from[64]; /* "--shard", "JOB_COMPLETION_INDEX", "SLURM_ARRAY_TASK_ID" or "none" */
} pl_shard_t;

/* Parse "K/N" (0 <= K < N); 0 or -1. */
int pl_shard_parse(const char *text, int64_t *index, int64_t *count);
/* count > 0: that shard; count 0: from the environment, else 0 of 1.
 * Errors: TOPLU_ERR_INVALID_ARGUMENT (bad values, JOB_COMPLETION_INDEX
 * without JOB_COMPLETIONS). */
toplu_status_t pl_shard_resolve(int64_t index, int64_t count, pl_shard_t *out, toplu_error_t *err);
/* Rows [*first, *end) of total for the shard. */
void pl_shard_range(const pl_shard_t *s, int64_t total, int64_t *first, int64_t *end);

#endif
