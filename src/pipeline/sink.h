/*
 * pipeline/sink.h - where a job's results go.
 *
 * The kind follows the output's name: .jsonl, .csv, .sqlite/.db, anything
 * else a directory of .npy files.  Every kind writes rows in input order and
 * follows the commit protocol of toplu/pipeline.h: results go to hidden
 * part files that only pl_sink_ops_t.finish puts in place, and commit makes
 * what was written durable and records the checkpoint with it.
 *
 * Calls: load_state, then begin (fresh or from the checkpoint), then for
 * each chunk in order format (postprocess thread; reads only the chunk and
 * immutable sink settings) and write (writer thread), commit from time to
 * time, and finish once.  A new kind implements pl_sink_ops_t and adds a
 * case to pl_sink_open.
 */
#ifndef TOPLU_PIPELINE_SINK_H
#define TOPLU_PIPELINE_SINK_H

#include "pipeline/checkpoint.h"
#include "pipeline/chunk.h"
#include "pipeline/postprocess.h"
#include "toplu/model.h"

typedef struct pl_sink pl_sink_t;

typedef struct pl_sink_ops {
  const char *kind; /* "jsonl", "csv", "sqlite", "npy" */
  /* Look for this output's checkpoint: *found 0 (none, or a finished output
   * whose file was removed since) or 1 with st filled. */
  toplu_status_t (*load_state)(pl_sink_t *s, pl_state_t *st, int *found, toplu_error_t *err);
  /* Start: st NULL removes any earlier output, part files and checkpoint
   * and creates empty parts; otherwise reopens the parts cut to the
   * checkpoint's lengths (phase running). */
  toplu_status_t (*begin)(pl_sink_t *s, const pl_state_t *st, toplu_error_t *err);
  /* Format the chunk's rows that did not fail into c->out[]. */
  toplu_status_t (*format)(pl_sink_t *s, pl_chunk_t *c, toplu_error_t *err);
  /* Append a formatted chunk. */
  toplu_status_t (*write)(pl_sink_t *s, pl_chunk_t *c, toplu_error_t *err);
  /* Make everything written durable and store st with it (the sink fills
   * st->n_files, st->file_bytes and st->extra). */
  toplu_status_t (*commit)(pl_sink_t *s, pl_state_t *st, toplu_error_t *err);
  /* Every row is written: put the output in place and mark st complete.
   * Also completes an interrupted finish (st->phase finishing) after begin
   * was skipped. */
  toplu_status_t (*finish)(pl_sink_t *s, pl_state_t *st, toplu_error_t *err);
  void (*destroy)(pl_sink_t *s);
  /* 1 when a fresh begin would destroy something no toplu job wrote (a
   * file under the output's name without this output's checkpoint, a
   * database without toplu's tables), with why naming it; 2 when even
   * overwrite would not replace it (an SQLite index or view under
   * sqlite_table's name); else 0.  Called by toplu_job_create before
   * anything is written (with overwrite too: only 2 then stops the job). */
  int (*foreign)(pl_sink_t *s, char *why, size_t why_size);
} pl_sink_ops_t;

struct pl_sink {
  const pl_sink_ops_t *ops;
  char *path;
  const pl_post_t *post;
  const toplu_model_t *model;
  /* Outputs are stored whole, as the model gives them (one chunk whose
   * outputs do not follow its rows; .npy directories only): set by the job
   * before begin. */
  int whole;
  /* No rows: per model output, its shape for a batch of 0 rows from shape
   * inference (dims[1..] are a row's shape), set by the job before finish
   * when it could infer them (owned, n_empty entries); NULL: the model's
   * declared output shapes, unknown dims 0. */
  toplu_tensor_t *empty_out;
  int n_empty;
  char *table; /* SQLite: the sqlite_table the rows go to (owned), NULL: the whole database */
  /* Set by load_state: the checkpoint said complete but the output is gone, so the job starts again (the
   * job notes it: before 2026-12-06 a resume reran the whole job without a word). */
  int output_gone;
  void *impl;
};

/* Open a sink for path (nothing is touched on disk); table: the SQLite
 * sink's sqlite_table (toplu/pipeline.h), NULL for the whole database
 * (any other kind with a table: TOPLU_ERR_INVALID_ARGUMENT). */
toplu_status_t pl_sink_open(const char *path, const char *table, const toplu_model_t *model, const pl_post_t *post,
                            pl_sink_t **out, toplu_error_t *err);
void pl_sink_destroy(pl_sink_t *s);

/* Kind from the name: "jsonl", "csv", "sqlite", "npy" (a directory: one
 * that exists, a name ending in '/', or one without a word extension) or
 * "unknown" (an extension of letters that names no sink, e.g. ".json"). */
const char *pl_sink_kind(const char *path);
/* Check a complete output (kind as pl_sink_kind) against its checkpoint st
 * before it is called complete (resume) or merged: a JSONL/CSV file of
 * st->file_bytes[0] bytes, a database with st->processed rows in results
 * (or in the table st->extra "table" names: a job with sqlite_table),
 * a directory whose files (extra "names") have the sizes of
 * st->file_bytes.  0, or -1 with why naming the file, what it holds and what
 * the checkpoint says (the output was cut or changed after the job). */
int pl_sink_verify(const char *kind, const char *path, const pl_state_t *st, char *why, size_t why_size);
/* The sink kinds, for messages. */
extern const char pl_sink_kinds_text[];
/* 1 (with why) when the existing file path is not a database a toplu job
 * wrote: tables besides results and toplu_job, no checkpoint row, or not
 * SQLite at all; 0 when it is toplu's or does not exist. */
int pl_sink_sqlite_foreign(const char *path, char *why, size_t why_size);
/* 1 (with why: what is wrong) when name is not a table name sqlite_table
 * may give: a letter or '_', then letters, digits, '_'; 1 to 64 bytes; not
 * toplu_job, not sqlite_... (any case).  0 when it is. */
int pl_sink_sqlite_table_bad(const char *name, char *why, size_t why_size);
/* 1 (with why) when the database path holds checkpoints of sqlite_table
 * jobs ('state:NAME' rows in toplu_job) and no whole-database checkpoint
 * ('state'): results toplu_job_merge does not join.  0 otherwise. */
int pl_sink_sqlite_table_only(const char *path, char *why, size_t why_size);

/* Result files in the .npy output directory dir that the job (or merge)
 * about to write it does not write: NAME.npy, ids.txt and hidden .NAME.part
 * files, other than the n_keep names of keep[] and their part files.  Those
 * an earlier job or merge wrote (listed in extra "names" of dir/.toplu-state;
 * part files when the checkpoint is there) are removed when remove is set;
 * any other (the user's own, or left by a toplu before the list was kept) is
 * refused: TOPLU_ERR_INVALID_ARGUMENT naming the file, nothing removed.
 * TOPLU_ERR_IO when a removal fails.  Not thread-safe for one dir. */
toplu_status_t pl_sink_npy_stale(const char *dir, const char *const *keep, int n_keep, int remove, toplu_error_t *err);

/* Kind-specific openers (s allocated with path, model and post set). */
toplu_status_t pl_sink_text_open(pl_sink_t *s, int csv, toplu_error_t *err);
toplu_status_t pl_sink_sqlite_open(pl_sink_t *s, toplu_error_t *err);
toplu_status_t pl_sink_npy_open(pl_sink_t *s, toplu_error_t *err);

/* Shared by the kinds: the name of output j as written (sanitised for files when file != 0). */
void pl_sink_output_name(const toplu_model_t *m, int j, int file, char *buf, size_t size);
/* The JSON text of a row's result for JSONL and SQLite: the members after "id"
 * (e.g. "\"argmax\": 3, \"label\": \"cat\"") when members, else just the value
 * of the one field (for SQLite columns). */
void pl_sink_json_outputs(const pl_sink_t *s, const pl_chunk_t *c, const pl_row_t *r, pl_buf_t *b);
void pl_sink_json_topk(const pl_sink_t *s, const pl_row_t *r, pl_buf_t *b);

#endif
