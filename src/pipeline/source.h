/*
 * pipeline/source.h - where a job's rows come from.
 *
 * A source is a table of rows with stable ids.  It feeds one or more model
 * inputs (its fields: a JSONL source names several inputs by key; the
 * others feed one).  Kinds: .npy (rows along dim 0), images (a directory,
 * searched recursively, or a glob; JPEG and PNG, sorted by path), .csv and
 * .jsonl.  A new kind implements pl_source_ops_t and adds a case to
 * pl_source_open.
 *
 * Row ids: an image's path relative to the directory; otherwise the row
 * number (id() returns NULL).  The number of rows is known when the source
 * is opened (files listed, lines indexed), so shards and progress can be
 * computed before reading.
 */
#ifndef TOPLU_PIPELINE_SOURCE_H
#define TOPLU_PIPELINE_SOURCE_H

#include <jansson.h>
#include <stdint.h>

#include "pipeline/chunk.h"
#include "toplu/model.h"

#define PL_MAX_FIELDS 64

typedef struct pl_source pl_source_t;

typedef struct pl_source_ops {
  const char *kind; /* "npy", "images", "csv", "jsonl" */
  /*
   * Read rows [first, first + count) into vals[r * n_fields + f].  A problem
   * with one row (a corrupt image, a line that does not parse, a wrong
   * shape) is put in row_err[r] (a malloc'ed message) and the other rows
   * are read; only failures of the whole source (the file vanished) return
   * an error.  Thread-safe: several threads read different ranges at once.
   */
  toplu_status_t (*read)(pl_source_t *s, int64_t first, int64_t count, pl_value_t *vals, char **row_err,
                         toplu_error_t *err);
  /* The id of a row (a path), or NULL when the id is the row number. */
  const char *(*id)(const pl_source_t *s, int64_t row);
  void (*destroy)(pl_source_t *s);
} pl_source_ops_t;

/* How a CSV source's first line is taken (toplu_job_options_t.csv_header). */
typedef enum pl_csv_header { PL_CSV_HEADER_AUTO = 0, PL_CSV_HEADER_YES = 1, PL_CSV_HEADER_NO = 2 } pl_csv_header_t;

/* How text sources are read (from toplu_job_options_t). */
typedef struct pl_source_cfg {
  pl_csv_header_t csv_header;
  char csv_delim;   /* CSV field delimiter; 0: detected from the first line (',', ';' or tab) */
  int64_t max_line; /* CSV/JSONL: the longest line in bytes (> 0) */
} pl_source_cfg_t;

struct pl_source {
  const pl_source_ops_t *ops;
  char *path;            /* as given */
  int64_t rows;
  int n_fields;
  int field_input[PL_MAX_FIELDS];                   /* model input index of each field */
  const toplu_value_info_t *field_info[PL_MAX_FIELDS];
  char *field_key[PL_MAX_FIELDS]; /* JSONL: the key read for each field (malloc) */
  int is_image;          /* gives PL_VALUE_IMAGE values */
  int is_dir, is_glob;   /* images: a directory, a glob (else one file) */
  pl_csv_header_t csv_header;
  char csv_delim;        /* as configured (0: detect); the CSV source keeps the one it uses */
  int64_t max_line;      /* CSV/JSONL: a longer line is a bad row (the first line: an error) */
  char note[1024];       /* a note for the user made while opening ("" for none) */
  int note_warning;      /* 1: the note is a warning (a line of the file may be taken other than the user meant) */
  /* Images: the smallest size preprocessing needs, so JPEG decoding may
   * scale down by 1/2, 1/4 or 1/8 while staying at least this large
   * (0: decode at full size).  Set by the job before reading. */
  int hint_w, hint_h;
  /* Images: the most pixels a file's header may declare (0: the default,
   * PL_IMAGE_MAX_PIXELS_DEFAULT); set by the job before reading. */
  int64_t max_pixels;
  /* Where large row buffers come from and go back to (the job's; NULL: plain allocations). */
  struct pl_pool *pool;
  /* .npy: the dtype (the model input's, or the file's when the model leaves
   * it open) and dims of one row; set when opened. */
  toplu_dtype_t row_dtype;
  int row_ndim;
  int64_t row_dims[TOPLU_MAX_DIMS];
  /* .npy feeding an input the model gives no batch dim (a scalar, or a
   * fixed dim 0 while another input's dim 0 is free): the whole file,
   * converted and checked (finite), passed to every batch; rows is then -1.
   * NULL for sources of rows. */
  toplu_tensor_t *whole_t;
  void *impl;
};

/*
 * Open a source.  input >= 0: it feeds that model input.  input < 0: a
 * JSONL source feeds every model input its first object names; any other
 * kind feeds the model's only input.  cfg: how text sources are read.
 * Errors: TOPLU_ERR_IO, TOPLU_ERR_PARSE, TOPLU_ERR_INVALID_ARGUMENT
 * (unknown kind, empty directory, a model input that cannot take this
 * source, a path that is a FIFO, device or socket: sources are regular
 * files or directories), TOPLU_ERR_SHAPE (NPY rows or CSV columns that do
 * not fit the input).
 */
toplu_status_t pl_source_open(const char *path, const toplu_model_t *model, int input, const pl_source_cfg_t *cfg,
                              pl_source_t **out, toplu_error_t *err);
void pl_source_destroy(pl_source_t *s);

/* Kind-specific openers (s is allocated with path and fields set). */
toplu_status_t pl_source_npy_open(pl_source_t *s, const toplu_model_t *model, toplu_error_t *err);
toplu_status_t pl_source_images_open(pl_source_t *s, int is_glob, toplu_error_t *err);
toplu_status_t pl_source_csv_open(pl_source_t *s, toplu_error_t *err);
toplu_status_t pl_source_jsonl_open(pl_source_t *s, const toplu_model_t *model, int input, toplu_error_t *err);

/* The identity of what the source reads (see pipeline/identity.h); NULL with why on failure. */
json_t *pl_source_identity(const pl_source_t *s, char *why, size_t why_size);
json_t *pl_source_images_identity(const pl_source_t *s);
/* The fixed leading directory of a glob pattern ("." when none) into out. */
void pl_glob_base(const char *pattern, char *out, size_t size);

/* Shared helpers. */
/* Offsets of the non-blank lines of a regular text file: *offs[i] start,
 * *lens[i] length without the line end, *lines[i] its 1-based line number in
 * the file (blank lines are skipped, so row i is not line i + 1 after one).
 * A line ends at LF, CR LF or a lone CR (old Mac files).  A UTF-8 byte order
 * mark at the start is skipped.  A FIFO, device or socket is
 * TOPLU_ERR_INVALID_ARGUMENT (found without blocking). */
toplu_status_t pl_index_lines(const char *path, int64_t **offs, int64_t **lens, int64_t **lines, int64_t *n,
                              toplu_error_t *err);
/* The row shape of input info (dims without batch) when all are known; -1 when some are not. */
int pl_info_row_dims(const toplu_value_info_t *info, int fixed_batch, int64_t *dims);
/* 1 when path names an image by extension (.jpg .jpeg .png, any case). */
int pl_is_image_name(const char *path);

/* 1 when some model input leaves dim 0 to the caller (a batch dim), or the
 * model fixes batch 1 (so rows are batched); 0 when every input's shape is
 * fixed and each is one tensor, passed whole. */
int pl_model_has_batch(const toplu_model_t *m);

/* 1 when input info of model m has no row dim in a model that batches: a
 * scalar, or dim 0 fixed while the model batches elsewhere and fixes no
 * batch (Silero VAD's sr [] and state [2, N, 128]); such an input is one
 * tensor for every batch, passed whole (a .npy source reads it so; a text
 * source refuses it). */
int pl_input_passed_whole(const toplu_model_t *m, const toplu_value_info_t *info);

#endif
