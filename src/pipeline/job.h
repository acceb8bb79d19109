/*
 * pipeline/job.h - the job itself (toplu_job_t of toplu/pipeline.h): setup,
 * the stage threads and the writer's commit loop.
 *
 * Threads and the window of chunks.  Chunk c (rows [first + c*B, ...)) lives
 * in slot c % n_slots while it moves through the states
 *   EMPTY -> READING -> READ -> INFERRING -> INFERRED -> POSTING -> POSTED -> EMPTY
 * A reader claims chunk next_read only while next_read - next_write <
 * n_slots (the backpressure: at most n_slots chunks exist at once).
 * Inference and postprocessing take chunks in order; the writer (the thread
 * in toplu_job_run) writes them in order, so the output is in input order
 * whatever order the readers finish in.  One mutex and one condition
 * variable guard the slot states and counters; the work happens outside it.
 */
#ifndef TOPLU_PIPELINE_JOB_H
#define TOPLU_PIPELINE_JOB_H

#include "toplu/pipeline.h"

#endif
