/*
 * pipeline/progress.h - progress while a job runs, and its final report.
 *
 * On a terminal: one line redrawn every half second,
 *   [#######.....] 4,096/10,000 rows  41%  812 rows/s  ETA 0:07  infer 96% read 12% ...
 * otherwise a plain line every few seconds.  Busy percentages are each
 * stage's busy time over the wall time and its threads, so the stage near
 * 100% is the bottleneck.
 */
#ifndef TOPLU_PIPELINE_PROGRESS_H
#define TOPLU_PIPELINE_PROGRESS_H

#include <stdint.h>
#include <stdio.h>

#include "toplu/pipeline.h"

typedef struct pl_progress {
  FILE *f;
  toplu_progress_mode_t mode;
  double every, last, t0;
  int64_t total, base; /* rows of the shard; rows done before this run */
  int bar_drawn;
} pl_progress_t;

void pl_progress_init(pl_progress_t *p, FILE *f, toplu_progress_mode_t mode, double every, int64_t total, int64_t base);
/* Print if it is time (or force); done counts rows of the shard finished. */
void pl_progress_tick(pl_progress_t *p, const toplu_job_stats_t *s, int64_t done, int force);
/* End the bar's line. */
void pl_progress_end(pl_progress_t *p);
/* The final report: rows, throughput, per-stage busy time and the bottleneck. */
void pl_progress_report(FILE *f, const toplu_job_stats_t *s, const char *output);

#endif
