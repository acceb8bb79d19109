/*
 * pipeline/job.h - the job itself (toplu_job_t of toplu/pipeline.h), shared
 * by the files that make it up:
 *
 *   job_setup.c   toplu_job_create/destroy: settings, model, sources, whole
 *                 inputs, pre/postprocessing, sink, the checks before
 *                 anything is written, the lock, the batch size
 *   job_stages.c  the stage threads (one loop driven by a table of stages),
 *                 the writer's loop and toplu_job_run
 *   job_resume.c  checkpoints: where a run starts (fresh, from a checkpoint,
 *                 finishing, complete), commits, the errors file, finishing
 *   job_options.c toplu_job_options_from_json (job files)
 *
 * Threads and the window of chunks.  Chunk c (rows [first + c*B, ...)) lives
 * in slot c % n_slots while it moves through the states
 *   EMPTY -> READING -> READ -> INFERRING -> INFERRED -> POSTING -> POSTED -> EMPTY
 * The read stage claims chunk next[READ] only while next[READ] - next_write
 * < n_slots (the backpressure: at most n_slots chunks exist at once).  The
 * other stages take chunks in order; the writer (the thread in
 * toplu_job_run) writes them in order, so the output is in input order
 * whatever order the readers finish in.  One mutex and one condition
 * variable guard the slot states and counters; the work happens outside it.
 */
#ifndef TOPLU_PIPELINE_JOB_H
#define TOPLU_PIPELINE_JOB_H

#include <jansson.h>
#include <pthread.h>
#include <stdatomic.h>

#include "pipeline/buckets.h"
#include "pipeline/checkpoint.h"
#include "pipeline/chunk.h"
#include "pipeline/pool.h"
#include "pipeline/files.h"
#include "pipeline/postprocess.h"
#include "pipeline/preprocess.h"
#include "pipeline/shard.h"
#include "pipeline/sink.h"
#include "pipeline/source.h"
#include "toplu/log.h"
#include "toplu/pipeline.h"
#include "toplu/session.h"

/* Slot states of the window. */
enum { PL_SLOT_EMPTY, PL_SLOT_READING, PL_SLOT_READ, PL_SLOT_INFERRING, PL_SLOT_INFERRED, PL_SLOT_POSTING,
       PL_SLOT_POSTED };

/* The stages run by stage threads (the writer is the caller's thread). */
enum { PL_STAGE_READ, PL_STAGE_INFER, PL_STAGE_POST, PL_STAGE_N };

/* The options, resolved and copied. */
typedef struct pl_job_settings {
  char *model_path, *output, *errors_path, *labels_path, *tune_path;
  char *profile_path;   /* options.profile: the trace file, NULL: no profile */
  char *length_buckets; /* options.length_buckets, NULL: none */
  int workers, prefetch, infer_workers, threads, resume, fail_fast, allow_nonfinite, qdq_int8_all;
  pl_source_cfg_t text; /* how CSV/JSONL sources are read */
  int64_t max_image_pixels;
  double checkpoint_s, progress_s;
  toplu_log_fn log;
  void *log_user;
  toplu_job_progress_fn progress;
  void *progress_user;
} pl_job_settings_t;

/* What the job reads with and writes to. */
typedef struct pl_job_io {
  toplu_model_t *model;
  toplu_session_t *session;
  int n_in, n_out;
  pl_source_t **src;
  int n_src;
  int *in_src, *in_field; /* per model input: its source and field */
  int *in_whole;          /* per model input: 1 when its .npy is passed whole to every batch */
  toplu_tensor_t *whole;  /* per model input: that tensor (data NULL for the others) */
  pl_pre_t *pre;          /* per model input */
  pl_buckets_t buckets;   /* options.length_buckets */
  pl_post_t post;
  pl_sink_t *sink;
  pl_shard_t shard;
  /* rows' and batches' large buffers kept between chunks (pipeline/pool.h); sources and chunks borrow it */
  pl_pool_t pool;
  int pool_init;
  int64_t rows_total, row_first, row_end, batch;
  int no_rows;            /* no input has rows: one run on the inputs as given */
  int lock_fd;            /* the output's lock (flock), held until destroy */
  char lock_path[PL_PATH_MAX];
  int errors_lock_fd;     /* the errors file's lock (flock; holds the owning output's path), -1 when none */
  char errors_lock_path[PL_PATH_MAX];
} pl_job_io_t;

/* The window of chunks between the stages. */
typedef struct pl_ring {
  pthread_mutex_t mu;
  pthread_cond_t cv;
  int init;
  pl_chunk_t *slots;
  int *state;
  int n_slots;
  int64_t c_end;              /* chunks of the shard */
  int64_t next[PL_STAGE_N];   /* the next chunk each stage takes */
  int64_t next_write;         /* the next chunk the writer takes */
  int stop;
  toplu_status_t fail;
  char fail_msg[TOPLU_ERROR_MESSAGE_MAX];
} pl_ring_t;

/* Checkpoint and resume state. */
typedef struct pl_job_ckpt {
  json_t *desc;               /* the settings that decide the output's bytes */
  pl_state_t loaded;          /* the checkpoint found (resume) */
  int loaded_found;
  pl_state_t st;              /* the state being written */
  int errors_fd;
  int64_t errors_len;
  int64_t base_processed, base_failed; /* counters of earlier runs */
} pl_job_ckpt_t;

/* Out-of-memory bookkeeping of the inference stage. */
typedef struct pl_job_oom {
  atomic_int noted;           /* the note on a batch out of memory was given */
  atomic_llong rows;          /* rows that failed alone for lack of memory */
  int64_t batch;              /* rows of the first batch that ran out of memory */
} pl_job_oom_t;

struct toplu_job {
  pl_job_settings_t set;
  int bad_rows_logged; /* failed rows named in a warning (no errors file: the first BAD_ROWS_LOGGED), atomic */
  /* fail_fast: the errors-file line of the row that stopped the job (malloc'ed, the first one set wins,
   * atomic), written after the last checkpoint's lines when the stages have stopped; a resume cuts it off
   * with the rest past the checkpoint */
  char *fail_fast_line;
  int fail_fast_written; /* the row that stopped a fail_fast job is in the errors file (counted as failed) */
  pl_job_io_t io;
  pl_ring_t ring;
  pl_job_ckpt_t ck;
  pl_job_oom_t oom;
  atomic_int cancel;
  int run_cancel;             /* the same, as the cancel flag of each toplu_session_run_with */
  toplu_job_stats_t stats;    /* guarded by ring.mu while running */
  double t0;
  int ran;
  pthread_mutex_t log_mu;     /* one message at a time */
  /* With a profile: the input shapes (data NULL) of the first batch run,
   * claimed by one inference thread (prof_claim 0 -> 1) and ready once
   * prof_ready is 1. */
  toplu_tensor_t *prof_shapes;
  atomic_int prof_claim, prof_ready;
};

/* Say something through the job's log callback (serialised). */
void pl_job_log(toplu_job_t *j, toplu_log_level_t level, const char *fmt, ...) TOPLU_PRINTF(3, 4);

/* Open the sources of o->inputs against j->io.model and map every model
 * input to one (io.src, in_src, in_field, in_whole, whole, rows_total,
 * no_rows); needs j->set.text, allow_nonfinite and log.  Errors name the
 * input and file (TOPLU_ERR_NOT_FOUND, _INVALID_ARGUMENT, _SHAPE, _IO,
 * _PARSE, _OUT_OF_MEMORY).  Used by toplu_job_create and toplu_reader_create. */
toplu_status_t pl_job_open_sources(toplu_job_t *j, const toplu_job_options_t *o, toplu_error_t *err);
/* Parse the preprocessing spec once and bind a copy to every model input
 * (io.pre); needs the sources open.  Errors: as pl_pre_parse / pl_pre_bind. */
toplu_status_t pl_job_setup_pre(toplu_job_t *j, const char *spec, toplu_error_t *err);

/* Rows [*first, *first + *count) of chunk c. */
void pl_job_chunk_rows(const toplu_job_t *j, int64_t c, int64_t *first, int64_t *count);
/* Read, preprocess and stack chunk ci into c (job_stages.c; also used for the batch-size sweep). */
toplu_status_t pl_job_read_chunk(toplu_job_t *j, pl_chunk_t *c, int64_t ci, double *t_read, double *t_pre,
                                 toplu_error_t *err);

/* job_resume.c */
/* Where this run starts: *done 1 when there is nothing to run (complete
 * already, or a finish completed); else the sink and errors file are open
 * and ck.st holds the state to continue from. */
toplu_status_t pl_job_start(toplu_job_t *j, int *done, toplu_error_t *err);
/* Append a chunk's errors and results (writer thread). */
toplu_status_t pl_job_write_chunk(toplu_job_t *j, pl_chunk_t *c, toplu_error_t *err);
/* Make everything written durable and record the checkpoint. */
toplu_status_t pl_job_commit(toplu_job_t *j, toplu_error_t *err);
/* Commit, put the output in place, close the errors file. */
toplu_status_t pl_job_finish(toplu_job_t *j, toplu_error_t *err);

#endif
