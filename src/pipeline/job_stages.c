/* pipeline/job_stages.c - the stages of a running job and the writer (see job.h). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "core/checked.h"
#include "core/error.h"
#include "pipeline/buf.h"
#include "pipeline/job.h"
#include "toplu/profile.h"

void pl_job_chunk_rows(const toplu_job_t *j, int64_t c, int64_t *first, int64_t *count) {
  /* c < the chunk count and batch <= TOPLU_JOB_BATCH_MAX, so this fits; checked all the same */
  if (!toplu__muladd_i64(c, j->io.batch, j->io.row_first, first) || *first > j->io.row_end) *first = j->io.row_end;
  int64_t left = j->io.row_end - *first;
  *count = left < j->io.batch ? left : j->io.batch;
}

/* 1 when a row tensor fits model input i (rank, dtype, fixed dims); else 0 with why. */
static int row_fits(const toplu_job_t *j, int i, const toplu_tensor_t *t, char *why, size_t why_size) {
  const toplu_value_info_t *v = toplu_model_input(j->io.model, i);
  if (v->dtype != TOPLU_DTYPE_UNDEFINED && t->dtype != v->dtype) {
    snprintf(why, why_size, "input '%s': dtype %s, the model takes %s", v->name, toplu_dtype_name(t->dtype),
             toplu_dtype_name(v->dtype));
    return 0;
  }
  if (v->ndim < 0) return 1;
  int ok = t->ndim == v->ndim - 1;
  for (int d = 0; ok && d < t->ndim; d++) ok = v->dims[d + 1] < 0 || v->dims[d + 1] == t->dims[d];
  if (!ok) {
    char got[128], want[128];
    snprintf(why, why_size, "wrong shape: input '%s' row is %s, the model takes %s (-1: any)", v->name,
             toplu_shape_format(t->ndim, t->dims, got, sizeof got),
             toplu_shape_format(v->ndim > 0 ? v->ndim - 1 : 0, v->dims + 1, want, sizeof want));
  }
  return ok;
}

toplu_status_t pl_job_read_chunk(toplu_job_t *j, pl_chunk_t *c, int64_t ci, double *t_read, double *t_pre,
                                 toplu_error_t *err) {
  pl_job_io_t *io = &j->io;
  int64_t first, count;
  pl_job_chunk_rows(j, ci, &first, &count);
  if (pl_chunk_init(c, ci, first, count, io->n_in, io->n_out))
    return toplu__errorf(err, TOPLU_ERR_OUT_OF_MEMORY, "out of memory for the rows of a chunk of %lld rows",
                        (long long)count);
  c->whole = io->whole;
  c->pool = io->pool_init ? &io->pool : NULL;
  c->out_seq = io->buckets.on ? io->buckets.out_seq : NULL;
  double t0 = pl_now();
  pl_value_t **vals = calloc((size_t)io->n_src + 1, sizeof *vals);
  char ***errs = calloc((size_t)io->n_src + 1, sizeof *errs);
  toplu_status_t st = vals && errs ? TOPLU_OK
                                   : toplu__errorf(err, TOPLU_ERR_OUT_OF_MEMORY, "out of memory for a chunk's source lists");
  for (int s = 0; !st && s < io->n_src; s++) {
    if (io->src[s]->whole_t) continue; /* passed whole: nothing to read per row */
    vals[s] = calloc((size_t)(count * io->src[s]->n_fields) + 1, sizeof **vals);
    errs[s] = calloc((size_t)count + 1, sizeof **errs);
    if (!vals[s] || !errs[s])
      st = toplu__errorf(err, TOPLU_ERR_OUT_OF_MEMORY, "out of memory for a chunk of %lld rows of %s", (long long)count,
                        io->src[s]->path);
    else st = io->src[s]->ops->read(io->src[s], first, count, vals[s], errs[s], err);
  }
  double t1 = pl_now();
  for (int64_t r = 0; !st && r < count; r++) {
    pl_row_t *row = &c->rows[r];
    const char *id = io->n_src > 0 ? io->src[0]->ops->id(io->src[0], first + r) : NULL; /* no inputs: row numbers */
    char num[32];
    if (!id) {
      snprintf(num, sizeof num, "%lld", (long long)(first + r));
      row->id_is_number = 1;
    }
    row->id = strdup(id ? id : num);
    if (!row->id) {
      st = toplu__errorf(err, TOPLU_ERR_OUT_OF_MEMORY, "out of memory for the id of row %lld", (long long)(first + r));
      break;
    }
    for (int s = 0; s < io->n_src && !row->fail_stage; s++) {
      if (!errs[s] || !errs[s][r]) continue;
      if (io->n_src > 1) pl_row_fail(row, "read", "%s: %s", io->src[s]->path, errs[s][r]); /* which file's line */
      else pl_row_fail(row, "read", "%s", errs[s][r]);
    }
    for (int i = 0; i < io->n_in && !row->fail_stage; i++) {
      if (io->in_whole[i]) continue; /* checked when the source was opened */
      pl_source_t *src = io->src[io->in_src[i]];
      pl_value_t *v = &vals[io->in_src[i]][r * src->n_fields + io->in_field[i]];
      char why[512];
      if (pl_pre_apply(&io->pre[i], v, &row->in[i], why, sizeof why)) {
        pl_row_fail(row, "preprocess", "%s", why);
      } else if (!row_fits(j, i, &row->in[i], why, sizeof why)) {
        pl_row_fail(row, "preprocess", "%s", why);
      } else {
        /* Kernels may turn NaN into numbers (max pooling, a fused ReLU):
         * refuse non-finite inputs here, so the output check is not the only guard. */
        int64_t bad = j->set.allow_nonfinite ? -1 : pl_first_nonfinite(&row->in[i]);
        if (bad >= 0)
          pl_row_fail(row, "preprocess", "input '%s' contains %s at element %lld",
                      toplu_model_input(io->model, i)->name,
                      isnan(pl_elem_get(row->in[i].dtype, row->in[i].data, bad)) ? "NaN" : "Inf", (long long)bad);
      }
    }
    char why[512];
    if (io->buckets.on && !row->fail_stage && pl_buckets_pad_row(&io->buckets, row, io->model, io->n_in, why, sizeof why))
      pl_row_fail(row, "preprocess", "%s", why);
  }
  for (int s = 0; s < io->n_src; s++) {
    for (int64_t k = 0; vals && vals[s] && k < count * io->src[s]->n_fields; k++) pl_value_release(c->pool, &vals[s][k]);
    for (int64_t r = 0; errs && errs[s] && r < count; r++) free(errs[s][r]);
    if (vals) free(vals[s]);
    if (errs) free(errs[s]);
  }
  free(vals);
  free(errs);
  if (!st && pl_chunk_stack(c))
    st = toplu__errorf(err, TOPLU_ERR_OUT_OF_MEMORY, "out of memory stacking rows %lld..%lld into batches (batch_size %lld)",
                      (long long)first, (long long)(first + count - 1), (long long)io->batch);
  double t2 = pl_now();
  *t_read = t1 - t0;
  *t_pre = t2 - t1;
  return st;
}

/* Batch b of one row, padded along the sequence dim (length_buckets): its inputs cut back to the row's own
 * length in place (the row's values are the first ones where the sequence dim follows the batch dim, the
 * padding after them).  1 when cut (run it again), 0 when there is nothing to cut or it cannot be cut so. */
static int unpad_row(pl_job_io_t *io, pl_chunk_t *c, int b) {
  pl_batch_t *bt = &c->batches[b];
  const pl_row_t *row = NULL;
  for (int64_t r = 0; r < c->count && !row; r++)
    if (c->rows[r].batch == b && !c->rows[r].fail_stage) row = &c->rows[r];
  if (!row || row->seq_len < 1) return 0;
  int cut = 0;
  for (int i = 0; i < io->n_in; i++) {
    int ax = io->buckets.in_axis[i];
    if (ax < 0 || (c->whole && c->whole[i].data) || bt->in[i].ndim < 2 || bt->in[i].dims[0] != 1) continue;
    if (bt->in[i].dims[ax + 1] <= row->seq_len) continue;
    if (ax != 0) return 0; /* a sequence dim after another: the row's values are not a prefix */
    cut = 1;
  }
  if (!cut) return 0;
  for (int i = 0; i < io->n_in; i++) {
    int ax = io->buckets.in_axis[i];
    if (ax == 0 && !(c->whole && c->whole[i].data) && bt->in[i].ndim >= 2) bt->in[i].dims[1] = row->seq_len;
  }
  return 1;
}

/* Run the batches of a chunk; a failing batch is rerun row by row, and
 * rows that fail alone fail.  Returns errors not tied to a row. */
static toplu_status_t infer_chunk(toplu_job_t *j, pl_chunk_t *c, toplu_error_t *err) {
  pl_job_io_t *io = &j->io;
  int64_t before = 0; /* rows of this chunk in the batches before b */
  for (int b = 0; b < c->n_batches; b++) {
    pl_batch_t *bt = &c->batches[b];
    before += b ? c->batches[b - 1].n : 0;
    if (bt->ran || bt->n == 0) continue;
    for (int k = 0; k < io->n_out; k++) bt->out[k] = (toplu_tensor_t){0};
    /* the batches left to the job (the shard's rows from this batch on), so that the session's thread choice is
     * not timed where it cannot pay back (toplu_run_options_t.runs_left) */
    int64_t rows_left = io->row_end - c->first - before, per = io->batch > 0 ? io->batch : 1;
    toplu_run_options_t ro = {.cancel = &j->run_cancel, .runs_left = rows_left > 0 ? (rows_left + per - 1) / per : 0};
    toplu_error_t rerr;
    toplu_status_t st = toplu_session_run_with(io->session, bt->in, io->n_in, bt->out, io->n_out, &ro, &rerr);
    if (st == TOPLU_ERR_CANCELLED) { /* toplu_job_cancel stopped the run between two steps */
      for (int k = 0; k < io->n_out; k++) toplu_tensor_free(&bt->out[k]);
      return toplu__errorf(err, TOPLU_ERR_CANCELLED, "%s", rerr.message);
    }
    c->n_runs++;
    if (st == TOPLU_OK) {
      for (int k = 0; k < io->n_out && !io->sink->whole; k++) {
        const toplu_tensor_t *t = &bt->out[k];
        if ((t->ndim >= 1 && t->dims[0] == bt->n) || bt->n == 1 || !pl_post_reads(&io->post, k)) continue;
        char sh[128];
        return toplu__errorf(err, TOPLU_ERR_SHAPE,
                            "output '%s' has shape %s for a batch of %lld rows: its dim 0 does not follow the batch; "
                            "run the rows as one batch (batch_size all) into a .npy directory without postprocessing, "
                            "or one row at a time (batch_size 1) to store each row's outputs whole%s",
                            toplu_model_output(io->model, k)->name, toplu_shape_format(t->ndim, t->dims, sh, sizeof sh),
                            (long long)bt->n,
                            io->post.selected ? "" : ", or keep an output that follows the batch (postprocess raw,output=NAME)");
      }
      bt->ran = 1;
      int unclaimed = 0;
      if (j->prof_shapes && atomic_compare_exchange_strong(&j->prof_claim, &unclaimed, 1)) {
        for (int k = 0; k < io->n_in; k++) { /* a copy for the reruns of write_profile (shapes alone without memory) */
          toplu_tensor_t *t = &j->prof_shapes[k];
          *t = bt->in[k];
          t->data = NULL;
          if (bt->in[k].data && toplu_tensor_alloc(t, t->dtype, t->ndim, t->dims) == TOPLU_OK)
            memcpy(t->data, bt->in[k].data, toplu_tensor_nbytes(t));
        }
        atomic_store(&j->prof_ready, 1);
      }
      continue;
    }
    char msg[TOPLU_ERROR_MESSAGE_MAX];
    snprintf(msg, sizeof msg, "%s", rerr.message);
    for (int k = 0; k < io->n_out; k++) toplu_tensor_free(&bt->out[k]);
    if (bt->n == 1 && io->buckets.on && st != TOPLU_ERR_BACKEND && st != TOPLU_ERR_INTERNAL && unpad_row(io, c, b)) {
      /* a padded row that failed alone runs again at its own length (a model with 77 positions took a
       * 70-token row padded to 128 and failed it: "index 77 is out of range"; before 2026-12-06 the row failed) */
      b--;
      continue;
    }
    if (st == TOPLU_ERR_BACKEND || st == TOPLU_ERR_INTERNAL)
      return toplu__errorf(err, st, "inference failed on rows %lld..%lld: %s", (long long)c->first,
                          (long long)(c->first + c->count - 1), msg);
    int64_t n = bt->n;
    bt->n = 0; /* its rows move to smaller batches, or fail */
    if (st == TOPLU_ERR_OUT_OF_MEMORY && n > 1 && !atomic_exchange(&j->oom.noted, 1)) {
      j->oom.batch = n;
      pl_job_log(j, TOPLU_LOG_NOTE,
                 "a batch of %lld rows (rows %lld..) ran out of memory (%s); its rows, and those of any other batch "
                 "that does, run in halves of the batch until they fit (a smaller batch_size avoids this)",
                 (long long)n, (long long)c->first, msg);
    }
    /* out of memory: halves, then quarters, ... (one row at a time lost most of the batch's speed where half the
     * batch fitted); a row's own error: each row alone, so that the one at fault is named */
    if (st == TOPLU_ERR_OUT_OF_MEMORY && n > 1 && pl_chunk_split_halves(c, b, n) == 0) continue;
    for (int64_t r = 0; r < c->count; r++) {
      pl_row_t *row = &c->rows[r];
      if (row->batch != b || row->fail_stage) continue;
      if (n == 1) {
        pl_row_fail(row, "infer", "%s", msg);
        row->batch = -1;
        if (st == TOPLU_ERR_OUT_OF_MEMORY) atomic_fetch_add(&j->oom.rows, 1);
      } else if (pl_chunk_split_row(c, b, row)) {
        pl_row_fail(row, "infer", "%s; then out of memory for the row's own batch", msg);
        row->batch = -1;
        if (st == TOPLU_ERR_OUT_OF_MEMORY) atomic_fetch_add(&j->oom.rows, 1);
      }
    }
  }
  pl_chunk_free_inputs(c);
  return TOPLU_OK;
}

/* Failed rows named one by one in warnings when the job has no errors file. */
#define BAD_ROWS_LOGGED 5

/* A failed row's line of the errors file (JSON Lines: id, row, stage, error). */
static void error_line(pl_buf_t *b, const pl_row_t *row) {
  pl_buf_puts(b, "{\"id\": ");
  if (row->id_is_number) pl_buf_puts(b, row->id);
  else pl_buf_json_string(b, row->id ? row->id : "");
  pl_buf_printf(b, ", \"row\": %lld, \"stage\": ", (long long)row->index);
  pl_buf_json_string(b, row->fail_stage);
  pl_buf_puts(b, ", \"error\": ");
  pl_buf_json_string(b, row->fail_reason ? row->fail_reason : "");
  pl_buf_puts(b, "}\n");
}

/* Postprocess a chunk and format its results and errors. */
static toplu_status_t post_chunk(toplu_job_t *j, pl_chunk_t *c, toplu_error_t *err) {
  if (pl_post_chunk(&j->io.post, c))
    return toplu__errorf(err, TOPLU_ERR_OUT_OF_MEMORY, "out of memory postprocessing rows %lld..%lld", (long long)c->first,
                        (long long)(c->first + c->count - 1));
  for (int64_t r = 0; r < c->count; r++) {
    pl_row_t *row = &c->rows[r];
    if (!row->fail_stage) {
      c->n_ok++;
      continue;
    }
    c->n_failed++;
    if (j->set.fail_fast) {
      pl_buf_t line = {0};
      error_line(&line, row);
      char *none = NULL;
      if (line.data && !line.oom && __atomic_compare_exchange_n(&j->fail_fast_line, &none, line.data, 0,
                                                                 __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE))
        line.data = NULL; /* j owns it now */
      pl_buf_free(&line);
      return toplu__errorf(err, TOPLU_ERR_INVALID_ARGUMENT, "row %lld (id %s) failed in %s: %s (fail_fast)",
                          (long long)row->index, row->id ? row->id : "?", row->fail_stage, row->fail_reason);
    }
    if (j->io.sink->whole) {
      /* the row that failed first in the pipeline is the cause: one left out before inference (a NaN) makes the
       * batch smaller than an input passed whole expects, and the rows then fail in infer (row 0's "initial_h dim 1
       * is 3, expected 1" was named, not row 1's NaN: a fresh user's finding of 2026-12-06) */
      for (int64_t k = 0; k < c->count; k++)
        if (c->rows[k].fail_stage && strcmp(c->rows[k].fail_stage, "infer")) {
          row = &c->rows[k];
          break;
        }
      return toplu__errorf(err, TOPLU_ERR_INVALID_ARGUMENT,
                          "row %lld (id %s) failed in %s: %s; the outputs are stored whole (they do not follow the "
                          "rows), so no row can be left out",
                          (long long)row->index, row->id ? row->id : "?", row->fail_stage, row->fail_reason);
    }
    /* Without an errors file a failed row would leave no trace but the count: the first few are named */
    int nth = j->set.errors_path ? BAD_ROWS_LOGGED : __atomic_fetch_add(&j->bad_rows_logged, 1, __ATOMIC_RELAXED);
    if (nth < BAD_ROWS_LOGGED) { /* id and reason escaped as in the errors file: a file name may hold any bytes */
      pl_buf_t id = {0}, why = {0};
      pl_buf_json_string(&id, row->id ? row->id : "");
      pl_buf_json_string(&why, row->fail_reason ? row->fail_reason : "");
      int ok = id.data && why.data && !id.oom && !why.oom && id.len >= 2 && why.len >= 2;
      if (ok) id.data[id.len - 1] = why.data[why.len - 1] = '\0'; /* the quotes off */
      pl_job_log(j, TOPLU_LOG_WARNING, "row %lld (id %s) failed in %s and is left out: %s%s", (long long)row->index,
                 ok ? id.data + 1 : "?", row->fail_stage, ok ? why.data + 1 : "?",
                 nth == 0 ? " (no errors file: name one to keep every failed row and its reason)" : "");
      pl_buf_free(&id);
      pl_buf_free(&why);
    }
    error_line(&c->errors, row);
  }
  if (c->errors.oom)
    return toplu__errorf(err, TOPLU_ERR_OUT_OF_MEMORY, "out of memory formatting the errors of rows %lld..%lld",
                        (long long)c->first, (long long)(c->first + c->count - 1));
  return j->io.sink->ops->format(j->io.sink, c, err);
}

/* ---- the stage loop ---- */

/* What one piece of work took. */
typedef struct pl_work {
  double busy[TOPLU_STAGE_COUNT];
  int64_t batches;
} pl_work_t;

static toplu_status_t work_read(toplu_job_t *j, pl_chunk_t *c, int64_t ci, pl_work_t *w, toplu_error_t *err) {
  return pl_job_read_chunk(j, c, ci, &w->busy[TOPLU_STAGE_READ], &w->busy[TOPLU_STAGE_PREPROCESS], err);
}

static toplu_status_t work_infer(toplu_job_t *j, pl_chunk_t *c, int64_t ci, pl_work_t *w, toplu_error_t *err) {
  (void)ci;
  double t0 = pl_now();
  toplu_status_t st = infer_chunk(j, c, err);
  w->busy[TOPLU_STAGE_INFER] = pl_now() - t0;
  w->batches = c->n_runs;
  return st;
}

static toplu_status_t work_post(toplu_job_t *j, pl_chunk_t *c, int64_t ci, pl_work_t *w, toplu_error_t *err) {
  (void)ci;
  double t0 = pl_now();
  toplu_status_t st = post_chunk(j, c, err);
  w->busy[TOPLU_STAGE_POSTPROCESS] = pl_now() - t0;
  return st;
}

/* A stage: takes chunks in order whose slot is `ready`, marks them `busy`
 * while it works outside the lock, then `done`. */
typedef struct pl_stage_def {
  int ready, busy, done;
  toplu_status_t (*work)(toplu_job_t *j, pl_chunk_t *c, int64_t ci, pl_work_t *w, toplu_error_t *err);
} pl_stage_def_t;

static const pl_stage_def_t stage_defs[PL_STAGE_N] = {
    [PL_STAGE_READ] = {PL_SLOT_EMPTY, PL_SLOT_READING, PL_SLOT_READ, work_read},
    [PL_STAGE_INFER] = {PL_SLOT_READ, PL_SLOT_INFERRING, PL_SLOT_INFERRED, work_infer},
    [PL_STAGE_POST] = {PL_SLOT_INFERRED, PL_SLOT_POSTING, PL_SLOT_POSTED, work_post},
};

static void cancel_locked(toplu_job_t *j);

/* Record the first failure and stop every stage (call with mu held). */
static void fail_locked(toplu_job_t *j, toplu_status_t st, const char *msg) {
  pl_ring_t *g = &j->ring;
  if (!g->fail) {
    g->fail = st;
    snprintf(g->fail_msg, sizeof g->fail_msg, "%s", msg);
  }
  g->stop = 1;
  pthread_cond_broadcast(&g->cv);
}

typedef struct pl_stage_arg {
  toplu_job_t *job;
  int stage;
} pl_stage_arg_t;

/* A stage thread.  Slot ci % n_slots of the next chunk becomes `ready` only
 * when the chunk before it in that slot has moved on (for the read stage:
 * when the writer emptied it), which is the window's backpressure. */
static void *stage_main(void *arg) {
  const pl_stage_arg_t *a = arg;
  toplu_job_t *j = a->job;
  pl_ring_t *g = &j->ring;
  const pl_stage_def_t *def = &stage_defs[a->stage];
  int64_t *next = &g->next[a->stage];
  pthread_mutex_lock(&g->mu);
  for (;;) {
    while (!g->stop && *next < g->c_end && g->state[*next % g->n_slots] != def->ready) pthread_cond_wait(&g->cv, &g->mu);
    if (g->stop || *next >= g->c_end) break;
    int64_t ci = (*next)++;
    int slot = (int)(ci % g->n_slots);
    g->state[slot] = def->busy;
    pthread_mutex_unlock(&g->mu);
    toplu_error_t err;
    pl_work_t w;
    memset(&w, 0, sizeof w);
    toplu_status_t st = def->work(j, &g->slots[slot], ci, &w, &err);
    pthread_mutex_lock(&g->mu);
    for (int k = 0; k < TOPLU_STAGE_COUNT; k++) j->stats.busy_s[k] += w.busy[k];
    j->stats.batches += w.batches;
    if (st == TOPLU_ERR_CANCELLED) {
      cancel_locked(j);
      break;
    }
    if (st) {
      fail_locked(j, st, err.message);
      break;
    }
    g->state[slot] = def->done;
    pthread_cond_broadcast(&g->cv);
  }
  pthread_mutex_unlock(&g->mu);
  return NULL;
}

/* ---- stats, progress, cancel ---- */

/* Snapshot the stats with the wall time so far (mu held). */
static void stats_locked(toplu_job_t *j, toplu_job_stats_t *s) {
  *s = j->stats;
  if (j->t0 > 0 && !j->stats.complete) s->wall_s = pl_now() - j->t0;
  s->rows_processed = j->ck.st.processed - j->ck.base_processed;
  s->rows_failed = j->ck.st.failed - j->ck.base_failed + j->fail_fast_written;
}

void toplu_job_get_stats(toplu_job_t *j, toplu_job_stats_t *s) {
  if (!s) return;
  if (!j) {
    memset(s, 0, sizeof *s);
    return;
  }
  pthread_mutex_lock(&j->ring.mu);
  stats_locked(j, s);
  pthread_mutex_unlock(&j->ring.mu);
}

void toplu_job_cancel(toplu_job_t *j) {
  if (!j) return;
  atomic_store(&j->cancel, 1);
  toplu_run_cancel(&j->run_cancel); /* a batch running now stops before its next step */
}

/* Report progress (the writer's thread): the callback and a progress line. */
static void report_progress(toplu_job_t *j, const toplu_job_stats_t *s) {
  if (j->set.progress) j->set.progress(j->set.progress_user, s);
  if (!j->set.log) return;
  int64_t done = s->rows_processed + s->rows_failed + s->rows_skipped;
  double rate = s->wall_s > 0 ? (double)(done - s->rows_skipped) / s->wall_s : 0;
  double pct = s->rows_total > 0 ? 100.0 * (double)done / (double)s->rows_total : 100;
  char eta[32] = "?", busy[160] = "";
  if (rate > 0) {
    double e = (double)(s->rows_total - done) / rate;
    snprintf(eta, sizeof eta, "%d:%02d", (int)(e / 60), (int)e % 60);
  }
  size_t n = 0;
  for (int k = 0; k < TOPLU_STAGE_COUNT && n < sizeof busy; k++) {
    int th = s->threads[k] > 0 ? s->threads[k] : 1;
    n += (size_t)snprintf(busy + n, sizeof busy - n, " %s %.0f%%", toplu_job_stage_name((toplu_job_stage_t)k),
                          s->wall_s > 0 ? 100.0 * s->busy_s[k] / (s->wall_s * th) : 0);
  }
  pl_job_log(j, TOPLU_LOG_PROGRESS, "%lld/%lld rows (%.0f%%), %.1f rows/s, ETA %s, busy:%s", (long long)done,
             (long long)s->rows_total, pct, rate, eta, busy);
}

/* The message of a cancelled run (mu held). */
static void cancel_locked(toplu_job_t *j) {
  char msg[256];
  snprintf(msg, sizeof msg, "cancelled at row %lld (the rows before it are kept for resume)",
           (long long)j->ck.st.next_row);
  fail_locked(j, TOPLU_ERR_CANCELLED, msg);
}

/* The writer: write chunks in order, commit every checkpoint_s, report progress. */
/* The writer's check between slots, with the ring's lock held: 1 when the
 * job was cancelled (then marked so), else a progress report when one is
 * due (given without the lock). */
static int writer_tick(toplu_job_t *j, double *last_progress) {
  pl_ring_t *g = &j->ring;
  if (atomic_load(&j->cancel)) {
    cancel_locked(j);
    return 1;
  }
  if (pl_now() - *last_progress >= j->set.progress_s) {
    toplu_job_stats_t s;
    stats_locked(j, &s);
    pthread_mutex_unlock(&g->mu);
    report_progress(j, &s);
    *last_progress = pl_now();
    pthread_mutex_lock(&g->mu);
  }
  return 0;
}

static toplu_status_t writer_loop(toplu_job_t *j, toplu_error_t *err) {
  pl_ring_t *g = &j->ring;
  double last_commit = pl_now(), last_progress = pl_now();
  int dirty = 0;
  toplu_status_t st = TOPLU_OK;
  pthread_mutex_lock(&g->mu);
  while (g->next_write < g->c_end && !g->stop) {
    int slot = (int)(g->next_write % g->n_slots);
    if (g->state[slot] != PL_SLOT_POSTED) {
      struct timespec ts;
      clock_gettime(CLOCK_REALTIME, &ts);
      ts.tv_nsec += 100 * 1000 * 1000;
      if (ts.tv_nsec >= 1000000000L) {
        ts.tv_sec++;
        ts.tv_nsec -= 1000000000L;
      }
      pthread_cond_timedwait(&g->cv, &g->mu, &ts);
      if (writer_tick(j, &last_progress)) break;
      continue;
    }
    pthread_mutex_unlock(&g->mu);
    double t0 = pl_now();
    pl_chunk_t *c = &g->slots[slot];
    st = pl_job_write_chunk(j, c, err);
    dirty = 1;
    pthread_mutex_lock(&g->mu); /* the counters toplu_job_get_stats reads */
    if (!st) {
      j->ck.st.processed += c->n_ok;
      j->ck.st.failed += c->n_failed;
      j->ck.st.next_row = c->first + c->count;
    }
    pthread_mutex_unlock(&g->mu);
    if (!st && (pl_now() - last_commit >= j->set.checkpoint_s || atomic_load(&j->cancel))) {
      st = pl_job_commit(j, err);
      last_commit = pl_now();
      dirty = 0;
    }
    pl_chunk_clear(c);
    double t = pl_now() - t0;
    pthread_mutex_lock(&g->mu);
    j->stats.busy_s[TOPLU_STAGE_WRITE] += t;
    if (st) {
      fail_locked(j, st, err->message);
      break;
    }
    g->state[slot] = PL_SLOT_EMPTY;
    g->next_write++;
    pthread_cond_broadcast(&g->cv);
    if (writer_tick(j, &last_progress)) break;
  }
  int failed_elsewhere = g->fail && !st;
  pthread_mutex_unlock(&g->mu);
  /* Another stage failed (or cancel): keep what is written for resume. */
  if (failed_elsewhere && dirty) {
    toplu_error_t e2;
    (void)pl_job_commit(j, &e2);
  }
  return st;
}

/* Set up the window, start the stage threads, write, stop them. */
static toplu_status_t run_stages(toplu_job_t *j, toplu_error_t *err) {
  pl_ring_t *g = &j->ring;
  pl_job_io_t *io = &j->io;
  int64_t rows = io->row_end - io->row_first;
  /* chunks rounded up, without (x + batch - 1), which wraps for a huge batch */
  int64_t done = j->ck.st.next_row - io->row_first;
  int64_t c_start = done / io->batch + (done % io->batch != 0);
  g->c_end = rows / io->batch + (rows % io->batch != 0);
  for (int k = 0; k < PL_STAGE_N; k++) g->next[k] = c_start;
  g->next_write = c_start;
  g->n_slots = j->set.prefetch == 0 ? 1 : j->set.prefetch + j->set.infer_workers + 2;
  g->slots = calloc((size_t)g->n_slots, sizeof *g->slots);
  g->state = calloc((size_t)g->n_slots, sizeof *g->state);
  if (!g->slots || !g->state)
    return toplu__errorf(err, TOPLU_ERR_OUT_OF_MEMORY, "out of memory for %d chunk slots", g->n_slots);
  int counts[PL_STAGE_N] = {[PL_STAGE_READ] = j->set.workers, [PL_STAGE_INFER] = j->set.infer_workers,
                            [PL_STAGE_POST] = 1};
  int n_threads = 0, started = 0;
  for (int k = 0; k < PL_STAGE_N; k++) n_threads += counts[k];
  pthread_t *th = calloc((size_t)n_threads, sizeof *th);
  pl_stage_arg_t args[PL_STAGE_N];
  if (!th) return toplu__errorf(err, TOPLU_ERR_OUT_OF_MEMORY, "out of memory for %d threads", n_threads);
  toplu_status_t st = TOPLU_OK;
  for (int k = 0; k < PL_STAGE_N && !st; k++) {
    args[k] = (pl_stage_arg_t){j, k};
    for (int t = 0; t < counts[k] && !st; t++) {
      if (pthread_create(&th[started], NULL, stage_main, &args[k]) != 0)
        st = toplu__errorf(err, TOPLU_ERR_OUT_OF_MEMORY, "cannot start a thread for the %s stage",
                          k == PL_STAGE_READ ? "read" : k == PL_STAGE_INFER ? "infer" : "postprocess");
      else started++;
    }
  }
  if (!st) st = writer_loop(j, err);
  pthread_mutex_lock(&g->mu);
  g->stop = 1;
  pthread_cond_broadcast(&g->cv);
  pthread_mutex_unlock(&g->mu);
  for (int k = 0; k < started; k++) pthread_join(th[k], NULL);
  free(th);
  for (int s = 0; s < g->n_slots; s++) pl_chunk_clear(&g->slots[s]);
  if (!st && g->fail) st = toplu__errorf(err, g->fail, "%s", g->fail_msg);
  /* fail_fast: the row that stopped the job goes to the errors file too, after what the checkpoint holds (not
   * counted in it: a resume cuts the file back and runs that row again) */
  char *ff = __atomic_exchange_n(&j->fail_fast_line, NULL, __ATOMIC_ACQ_REL);
  if (ff && j->ck.errors_fd >= 0) {
    toplu_error_t e2;
    if (!pl_fd_write(j->ck.errors_fd, ff, strlen(ff), j->set.errors_path, &e2))
      (void)pl_file_sync(j->ck.errors_fd, j->set.errors_path, &e2);
  }
  if (ff) { /* counted in the report (it said "0 failed"), and where a resume takes up (a fresh user's finding) */
    pthread_mutex_lock(&j->ring.mu);
    j->fail_fast_written = 1;
    pthread_mutex_unlock(&j->ring.mu);
    pl_job_log(j, TOPLU_LOG_NOTE,
               "fail_fast: results are kept up to the last checkpoint (row %lld); a resume runs the rows from there "
               "again, the failing one included",
               (long long)j->ck.st.next_row);
  }
  free(ff);
  return st;
}

static toplu_status_t job_run(toplu_job_t *j, toplu_error_t *err);

toplu_status_t toplu_job_run(toplu_job_t *j, toplu_error_t *err) {
  toplu_error_clear(err);
  toplu_error_t e;
  toplu_error_clear(&e);
  toplu_status_t st = job_run(j, &e);
  if (err) *err = e;
  return st;
}

/* With a profile: the trace of the first batch's shapes, and the top steps
 * by time as notes. */
static toplu_status_t write_profile(toplu_job_t *j, toplu_error_t *err) {
  pl_job_io_t *io = &j->io;
  if (!atomic_load(&j->prof_ready)) {
    pl_job_log(j, TOPLU_LOG_WARNING, "no profile written to %s: no batch ran", j->set.profile_path);
    return TOPLU_OK;
  }
  const toplu_tensor_t *in = j->prof_shapes;
  int have = 1;
  for (int k = 0; k < io->n_in; k++) have &= in[k].data != NULL || toplu_tensor_nbytes(&in[k]) == 0;
  toplu_node_profile_t first;
  int64_t runs = toplu_session_profile(io->session, in, io->n_in, &first, 1) > 0 ? first.runs : 0;
  /* a profile of one cold run counts first-touch costs: run those rows again, twice at most */
  for (; have && runs > 0 && runs < 3; runs++) {
    toplu_tensor_t *out = calloc((size_t)io->n_out + 1, sizeof *out);
    toplu_run_options_t ro = {.cancel = &j->run_cancel};
    toplu_status_t rs = out ? toplu_session_run_with(io->session, in, io->n_in, out, io->n_out, &ro, NULL) : TOPLU_ERR_OUT_OF_MEMORY;
    for (int k = 0; out && k < io->n_out; k++) toplu_tensor_free(&out[k]);
    free(out);
    if (rs) break;
  }
  int threads = toplu_session_threads(io->session);
  toplu_profile_info_t info = {.model = j->set.model_path, .batch = io->n_in && in[0].ndim > 0 ? in[0].dims[0] : 1,
                               .threads = threads, .peak_gflops = toplu_cpu_fp32_peak_gflops(threads)};
  toplu_status_t st = toplu_session_write_trace(io->session, in, io->n_in, &info, j->set.profile_path, err);
  if (st) {
    char why[TOPLU_ERROR_MESSAGE_MAX];
    snprintf(why, sizeof why, "%s", err->message);
    return toplu__errorf(err, st, "the results are complete, but the profile was not written: %s", why);
  }
  int n = toplu_session_profile(io->session, in, io->n_in, NULL, 0);
  toplu_node_profile_t *nodes = n > 0 ? calloc((size_t)n, sizeof *nodes) : NULL;
  toplu_profile_top_t top[10];
  int nt = 0;
  double total_ms = 0;
  if (nodes) {
    n = toplu_session_profile(io->session, in, io->n_in, nodes, n);
    nt = toplu_profile_top(nodes, n, info.peak_gflops, top, 10);
    for (int i = 0; i < n; i++) total_ms += nodes[i].ran ? nodes[i].last_us / 1e3 : 0;
  }
  pl_job_log(j, TOPLU_LOG_NOTE,
             "profile of batch %lld (%d threads, fp32 peak %.1f GFLOP/s, %.3f ms of steps in the last run) written to %s "
             "(a profiled session keeps the whole batch on its threads, without the thread choice of an unprofiled "
             "run; FLOPs are a direct convolution's, so a Winograd step can pass 100%% of the peak); top %d steps by "
             "time:",
             (long long)info.batch, threads, info.peak_gflops, total_ms, j->set.profile_path, nt);
  pl_job_log(j, TOPLU_LOG_NOTE, "  %-32s %-24s %-20s %9s %6s %9s %8s %6s", "step", "op", "impl", "ms", "share",
             "GFLOP/s", "GB/s", "%peak");
  for (int i = 0; i < nt; i++)
    pl_job_log(j, TOPLU_LOG_NOTE, "  %-32.32s %-24.24s %-20.20s %9.3f %5.1f%% %9.1f %8.2f %5.1f%%", top[i].name,
               top[i].op_type, top[i].impl, top[i].ms, 100 * top[i].share, top[i].gflops_per_s, top[i].gb_per_s,
               100 * top[i].peak_share);
  free(nodes);
  return TOPLU_OK;
}

/* toplu_job_run with a non-NULL err. */
static toplu_status_t job_run(toplu_job_t *j, toplu_error_t *err) {
  if (!j) return toplu__errorf(err, TOPLU_ERR_INVALID_ARGUMENT, "job is NULL");
  if (j->ran) return toplu__errorf(err, TOPLU_ERR_INVALID_ARGUMENT, "a job runs once; create another to run again");
  j->ran = 1;
  int done = 0;
  /* under the lock toplu_job_get_stats takes: the start writes the checkpoint state and the stats */
  pthread_mutex_lock(&j->ring.mu);
  toplu_status_t st = pl_job_start(j, &done, err);
  pl_job_io_t *io = &j->io;
  if (!st && !done) {
    j->stats.rows_skipped = j->ck.st.next_row - io->row_first;
    j->t0 = pl_now();
  }
  pthread_mutex_unlock(&j->ring.mu);
  if (!st && done && j->set.progress) { /* "once at its end", also when there was nothing to do */
    toplu_job_stats_t s;
    toplu_job_get_stats(j, &s);
    j->set.progress(j->set.progress_user, &s);
  }
  if (st || done) return st;
  st = run_stages(j, err);
  if (!st) st = pl_job_finish(j, err);
  toplu_job_stats_t s;
  toplu_job_get_stats(j, &s);
  if (j->set.progress) j->set.progress(j->set.progress_user, &s);
  int64_t oom = (int64_t)atomic_load(&j->oom.rows);
  char why_oom[512] = "";
  if (oom > 0)
    snprintf(why_oom, sizeof why_oom,
             "%lld row%s failed for lack of memory even when run alone%s: the memory limit is too small for this model "
             "at batch_size %lld (the chunk's rows are held while they run); run with a smaller batch_size",
             (long long)oom, oom == 1 ? "" : "s", j->oom.batch > 1 ? " after their batch ran out of memory" : "",
             (long long)io->batch);
  if (!st && j->ck.st.processed == 0 && io->row_end > io->row_first)
    st = toplu__errorf(err, TOPLU_ERR_INVALID_ARGUMENT, "every one of the %lld rows failed%s%s%s%s",
                      (long long)(io->row_end - io->row_first), oom > 0 ? ": " : "", why_oom,
                      j->set.errors_path ? "; see " : oom > 0 ? ""
                      : (io->row_end - io->row_first) > BAD_ROWS_LOGGED
                          ? " (the first few reasons are above; name an errors file to keep every one)"
                          : " (the reasons are above)",
                      j->set.errors_path ? j->set.errors_path : "");
  else if (!st && oom > 0)
    pl_job_log(j, TOPLU_LOG_WARNING, "%s", why_oom);
  if (!st && !j->set.errors_path && s.rows_failed > BAD_ROWS_LOGGED)
    pl_job_log(j, TOPLU_LOG_WARNING, "%lld rows failed in all and are left out (the first %d named above); name an "
               "errors file to keep every one and its reason", (long long)s.rows_failed, BAD_ROWS_LOGGED);
  if (!st && io->row_end == io->row_first)
    pl_job_log(j, TOPLU_LOG_NOTE, "no rows%s; %s holds an empty result",
               io->rows_total ? " in this shard" : " (the inputs are empty)", j->set.output);
  if (!st && j->set.profile_path) st = write_profile(j, err);
  return st;
}
