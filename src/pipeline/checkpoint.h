/*
 * pipeline/checkpoint.h - a job's checkpoint: how far it got, durably.
 *
 * The state says which rows are done (every row of the shard before
 * next_row is either in the output or in the errors file), how many bytes
 * of each part file and of the errors file hold them (everything after is
 * cut off on resume), the counters, and the settings that decide the
 * output's bytes (`job`, compared on resume so a checkpoint is never
 * continued with other settings).  It is stored as JSON: in a file beside
 * the output (replaced atomically: temporary file, fsync, rename) or, for
 * SQLite, in the table toplu_job of the database, in the same transaction
 * as the rows.
 *
 * Phases: running (rows being added), finishing (every row is in the part
 * files, which are being renamed into place: resuming finishes the renames),
 * complete (the output is in place; resuming does nothing).
 */
#ifndef TOPLU_PIPELINE_CHECKPOINT_H
#define TOPLU_PIPELINE_CHECKPOINT_H

#include <jansson.h>
#include <stdint.h>

#include "toplu/status.h"

#define PL_STATE_FILES 66 /* result files a sink keeps: the .npy directory's 64 arrays and ids.txt (pipeline/chunk.h) */

typedef enum { PL_PHASE_RUNNING = 0, PL_PHASE_FINISHING = 1, PL_PHASE_COMPLETE = 2 } pl_phase_t;

typedef struct pl_state {
  pl_phase_t phase;
  json_t *job;                 /* the settings (owned) */
  int64_t next_row;            /* absolute row */
  int64_t processed, failed;   /* rows with results / in the errors file */
  int64_t errors_bytes;        /* length of the errors file */
  int n_files;
  int64_t file_bytes[PL_STATE_FILES];
  json_t *extra;               /* sink-specific (owned; may be NULL) */
} pl_state_t;

void pl_state_free(pl_state_t *st);
/* Copy src into dst (json references taken). */
void pl_state_copy(pl_state_t *dst, const pl_state_t *src);
/* The state as JSON text (malloc'ed); NULL when out of memory. */
char *pl_state_dump(const pl_state_t *st);
/* Parse JSON text; errors: TOPLU_ERR_PARSE naming what (name: for messages). */
toplu_status_t pl_state_parse(const char *text, const char *name, pl_state_t *st, toplu_error_t *err);
/* Save to / load from a file (atomic replace).  load: *found 0 when the file does not exist. */
toplu_status_t pl_state_save(const char *path, const pl_state_t *st, toplu_error_t *err);
toplu_status_t pl_state_load(const char *path, pl_state_t *st, int *found, toplu_error_t *err);
/* Compare the job settings of a checkpoint with the current ones; on a
 * difference, TOPLU_ERR_INVALID_ARGUMENT naming the setting and both values.
 * Keys listed in ignore (NULL-terminated) are skipped. */
toplu_status_t pl_state_check_job(const json_t *saved, const json_t *now, const char *where, const char *const *ignore,
                                  toplu_error_t *err);

#endif
