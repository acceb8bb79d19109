/*
 * pipeline/reader.c - a job's inputs without the job (toplu_reader_t of
 * toplu/pipeline.h).
 *
 * The reader is a toplu_job_t holding only what reading needs: the settings
 * of the text sources, the sources and the preprocessing, opened by the same
 * functions as a job's (pl_job_open_sources, pl_job_setup_pre), and chunks
 * read by pl_job_read_chunk.  So a model's calibration rows are exactly the
 * rows `toplu run` would feed it.  The model is borrowed (io.model is
 * cleared before the job is destroyed).
 */
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "pipeline/job.h"
#include "runtime/model_internal.h"

struct toplu_reader {
  toplu_job_t *j;
  pl_chunk_t chunk; /* the chunk being given out */
  int have_chunk;
  int next_batch;   /* the next batch of chunk to give */
  int64_t next_chunk, n_chunks;
  int64_t bad;
  int whole_given; /* no input has rows: the inputs, passed whole, were given once */
  int given;       /* the chunk's batch given last, or -1 */
};

const char *toplu_reader_row_id(const toplu_reader_t *r, int64_t k) {
  if (!r || !r->have_chunk || r->given < 0 || k < 0) return NULL;
  for (int64_t i = 0; i < r->chunk.count; i++) {
    const pl_row_t *row = &r->chunk.rows[i];
    if (row->batch != r->given || row->fail_stage) continue;
    if (k-- == 0) return row->id;
  }
  return NULL;
}

int64_t toplu_reader_rows(const toplu_reader_t *r) {
  if (!r) return 0;
  if (r->j->io.no_rows) return r->j->io.n_in > 0 ? 1 : 0;
  return r->j->io.row_end - r->j->io.row_first;
}

int64_t toplu_reader_bad_rows(const toplu_reader_t *r) { return r ? r->bad : 0; }

void toplu_reader_destroy(toplu_reader_t *r) {
  if (!r) return;
  if (r->have_chunk) pl_chunk_clear(&r->chunk);
  if (r->j) r->j->io.model = NULL; /* borrowed */
  toplu_job_destroy(r->j);
  free(r);
}

toplu_status_t toplu_reader_create(const toplu_model_t *model, const toplu_job_options_t *o, int64_t max_rows,
                                   toplu_reader_t **out, toplu_error_t *err) {
  toplu_error_clear(err);
  if (!out) return toplu__errorf(err, TOPLU_ERR_INVALID_ARGUMENT, "out is NULL");
  *out = NULL;
  if (!model || !o) return toplu__errorf(err, TOPLU_ERR_INVALID_ARGUMENT, "model or options is NULL");
  if (o->n_inputs < 0 || (o->n_inputs > 0 && !o->inputs))
    return toplu__errorf(err, TOPLU_ERR_INVALID_ARGUMENT, "inputs: %d inputs and %s list", o->n_inputs,
                        o->inputs ? "a" : "no");
  if (o->batch_size < 0 || (uint64_t)o->batch_size > TOPLU_JOB_BATCH_MAX)
    return toplu__errorf(err, TOPLU_ERR_INVALID_ARGUMENT,
                        "batch_size %lld: a reader takes rows per batch, 1..2^40 (0: 16); not auto or all",
                        (long long)o->batch_size);
  if (max_rows < 0)
    return toplu__errorf(err, TOPLU_ERR_INVALID_ARGUMENT, "max_rows %lld: expected rows >= 1 (0: all)",
                        (long long)max_rows);
  if (o->csv_header < TOPLU_CSV_HEADER_AUTO || o->csv_header > TOPLU_CSV_HEADER_NO)
    return toplu__errorf(err, TOPLU_ERR_INVALID_ARGUMENT, "csv_header %d: expected auto (0), yes (1) or no (2)",
                        (int)o->csv_header);
  /* sources hold numbers (as toplu_job_create says for the same inputs): a string, sequence or optional input
   * would have every row refused as it is read */
  char why[600];
  if (toplu__model_nonnumeric_inputs(model, why, sizeof why))
    return toplu__errorf(err, TOPLU_ERR_UNSUPPORTED, "%s; readers and batch jobs read numeric tensors only", why);
  if (o->max_image_pixels < 0 || o->max_line_bytes < 0)
    return toplu__errorf(err, TOPLU_ERR_INVALID_ARGUMENT, "max_image_pixels %lld, max_line_bytes %lld: none may be negative",
                        (long long)o->max_image_pixels, (long long)o->max_line_bytes);
  if (o->csv_delimiter && !strchr(",;\t| ", o->csv_delimiter))
    return toplu__errorf(err, TOPLU_ERR_INVALID_ARGUMENT,
                        "csv_delimiter 0x%02x: expected ',', ';', tab, '|' or space (0: detected from the first line)",
                        (unsigned char)o->csv_delimiter);
  toplu_reader_t *r = calloc(1, sizeof *r);
  toplu_job_t *j = r ? calloc(1, sizeof *j) : NULL;
  if (!j) {
    free(r);
    return toplu__errorf(err, TOPLU_ERR_OUT_OF_MEMORY, "out of memory for a reader");
  }
  r->given = -1;
  r->j = j;
  pthread_mutex_init(&j->log_mu, NULL);
  j->ck.errors_fd = -1;
  j->io.lock_fd = -1;
  j->io.errors_lock_fd = -1;
  j->set.text.csv_header = (pl_csv_header_t)o->csv_header;
  j->set.text.csv_delim = o->csv_delimiter;
  j->set.text.max_line = o->max_line_bytes > 0 ? o->max_line_bytes : TOPLU_JOB_MAX_LINE_DEFAULT;
  j->set.max_image_pixels = o->max_image_pixels;
  j->set.allow_nonfinite = o->allow_nonfinite;
  j->set.log = o->log;
  j->set.log_user = o->log_user;
  pl_job_io_t *io = &j->io;
  io->model = (toplu_model_t *)model; /* borrowed; cleared before destroy */
  io->n_in = toplu_model_input_count(model);
  io->n_out = 0;
  toplu_status_t st = pl_job_open_sources(j, o, err);
  if (!st) st = pl_job_setup_pre(j, o->preprocess, err);
  if (st) {
    toplu_reader_destroy(r);
    return st;
  }
  io->batch = o->batch_size > 0 ? o->batch_size : 16;
  io->row_first = 0;
  io->row_end = io->no_rows || io->n_in == 0 ? 0 : io->rows_total;
  if (max_rows > 0 && io->row_end > max_rows) io->row_end = max_rows;
  r->n_chunks = (io->row_end + io->batch - 1) / io->batch;
  *out = r;
  return TOPLU_OK;
}

toplu_status_t toplu_reader_next(toplu_reader_t *r, toplu_tensor_t *inputs, int64_t *rows, toplu_error_t *err) {
  toplu_error_clear(err);
  if (!r || !rows || (!inputs && r->j->io.n_in > 0))
    return toplu__errorf(err, TOPLU_ERR_INVALID_ARGUMENT, "reader, inputs or rows is NULL");
  *rows = 0;
  toplu_job_t *j = r->j;
  if (j->io.no_rows) { /* every input passed whole (no batch dim): one batch of them, as a job runs them once */
    if (r->whole_given || j->io.n_in == 0) return TOPLU_OK;
    for (int i = 0; i < j->io.n_in; i++) inputs[i] = j->io.whole[i];
    r->whole_given = 1;
    *rows = 1;
    return TOPLU_OK;
  }
  for (;;) {
    if (r->have_chunk && r->next_batch < r->chunk.n_batches) {
      pl_batch_t *b = &r->chunk.batches[r->next_batch++];
      if (b->n == 0) continue;
      r->given = r->next_batch - 1;
      for (int i = 0; i < j->io.n_in; i++) inputs[i] = b->in[i];
      *rows = b->n;
      return TOPLU_OK;
    }
    if (r->have_chunk) {
      pl_chunk_clear(&r->chunk);
      r->have_chunk = 0;
      r->given = -1;
    }
    if (r->next_chunk >= r->n_chunks) return TOPLU_OK; /* the end */
    double t_read, t_pre;
    memset(&r->chunk, 0, sizeof r->chunk);
    r->chunk.whole = j->io.whole;
    toplu_status_t st = pl_job_read_chunk(j, &r->chunk, r->next_chunk++, &t_read, &t_pre, err);
    r->have_chunk = 1;
    r->next_batch = 0;
    if (st) return st;
    for (int64_t k = 0; k < r->chunk.count; k++) {
      pl_row_t *row = &r->chunk.rows[k];
      if (!row->fail_stage) continue;
      r->bad++;
      pl_job_log(j, TOPLU_LOG_WARNING, "row %lld (%s) left out: %s: %s", (long long)row->index,
                 row->id ? row->id : "?", row->fail_stage, row->fail_reason ? row->fail_reason : "");
    }
  }
}
