/* pipeline/job.c - batch inference jobs: setup, stage threads, commits and resume (see job.h). */
#include "pipeline/job.h"

#include <errno.h>
#include <fcntl.h>
#include <fnmatch.h>
#include <jansson.h>
#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/error.h"
#include "pipeline/autobatch.h"
#include "pipeline/checkpoint.h"
#include "pipeline/chunk.h"
#include "pipeline/files.h"
#include "pipeline/identity.h"
#include "pipeline/postprocess.h"
#include "pipeline/preprocess.h"
#include "pipeline/progress.h"
#include "pipeline/shard.h"
#include "pipeline/sink.h"
#include "pipeline/source.h"
#include "toplu/session.h"
#include "toplu/tuner.h"

enum { SLOT_EMPTY, SLOT_READING, SLOT_READ, SLOT_INFERRING, SLOT_INFERRED, SLOT_POSTING, SLOT_POSTED };

struct toplu_job {
  /* Settings (owned copies). */
  char *model_path, *output, *errors_path, *labels_path, *tune_path;
  int workers, prefetch, infer_workers, threads, resume, fail_fast;
  pl_csv_header_t csv_header;
  double checkpoint_s;
  FILE *pf; /* progress and the report */
  FILE *mf; /* notes and warnings */
  int lock_fd;              /* the output's lock (flock), held until destroy */
  char lock_path[PL_PATH_MAX];
  toplu_progress_mode_t pmode;
  double progress_s;
  /* Model, sources, specs, sink. */
  toplu_model_t *model;
  toplu_session_t *session;
  int n_in, n_out;
  pl_source_t **src;
  int n_src;
  int *in_src, *in_field; /* per model input: its source and field */
  pl_pre_t *pre;          /* per model input */
  pl_post_t post;
  pl_sink_t *sink;
  pl_shard_t shard;
  int64_t rows_total, row_first, row_end, batch;
  json_t *desc; /* the settings that decide the output's bytes */
  pl_state_t loaded;
  int have_loaded, loaded_found;
  /* A run. */
  pthread_mutex_t mu;
  pthread_cond_t cv;
  int sync_init;
  pl_chunk_t *slots;
  int *slot_state;
  int n_slots;
  int64_t c_end, next_read, next_infer, next_post, next_write;
  int stop;
  toplu_status_t fail;
  char fail_msg[TOPLU_ERROR_MESSAGE_MAX];
  atomic_int cancel;
  toplu_job_stats_t stats;
  double t0;
  int errors_fd;
  int64_t errors_len;
  pl_state_t st;
  int64_t base_processed, base_failed; /* counters of earlier runs (resume) */
  atomic_int oom_noted;                /* the note on a batch out of memory was printed */
  atomic_llong oom_rows;               /* rows that failed alone for lack of memory */
  int64_t oom_batch;                   /* rows of the first batch that ran out of memory */
  int ran;
};

void toplu_job_options_init(toplu_job_options_t *o) {
  memset(o, 0, sizeof *o);
  o->prefetch = 2;
  o->infer_workers = 1;
  o->checkpoint_seconds = 1.0;
  o->progress_seconds = 10.0;
}

const char *toplu_job_stage_name(toplu_job_stage_t s) {
  static const char *names[] = {"read", "preprocess", "infer", "postprocess", "write"};
  return s >= 0 && s < TOPLU_STAGE_COUNT ? names[s] : "?";
}

/* strdup that keeps NULL. */
static char *dup_or_null(const char *s) { return s ? strdup(s) : NULL; }

void toplu_job_destroy(toplu_job_t *j) {
  if (!j) return;
  if (j->errors_fd >= 0) close(j->errors_fd);
  if (j->lock_fd >= 0) close(j->lock_fd); /* releases the flock */
  for (int i = 0; j->src && i < j->n_src; i++) pl_source_destroy(j->src[i]);
  free(j->src);
  free(j->in_src);
  free(j->in_field);
  free(j->pre);
  pl_post_free(&j->post);
  pl_sink_destroy(j->sink);
  toplu_session_destroy(j->session);
  toplu_model_destroy(j->model);
  json_decref(j->desc);
  for (int k = 0; j->slots && k < j->n_slots; k++) pl_chunk_clear(&j->slots[k]);
  free(j->slots);
  free(j->slot_state);
  pl_state_free(&j->loaded);
  pl_state_free(&j->st);
  if (j->sync_init) {
    pthread_mutex_destroy(&j->mu);
    pthread_cond_destroy(&j->cv);
  }
  free(j->model_path);
  free(j->output);
  free(j->errors_path);
  free(j->labels_path);
  free(j->tune_path);
  free(j);
}

/* ---- setup ---- */


/* Open the sources of the input specs and map every model input to one. */
static toplu_status_t open_sources(toplu_job_t *j, const toplu_job_options_t *o, toplu_error_t *err) {
  j->src = calloc((size_t)o->n_inputs + 1, sizeof *j->src);
  j->in_src = malloc(sizeof(int) * (size_t)(j->n_in + 1));
  j->in_field = malloc(sizeof(int) * (size_t)(j->n_in + 1));
  if (!j->src || !j->in_src || !j->in_field)
    return toplu_errorf(err, TOPLU_ERR_OUT_OF_MEMORY, "out of memory for the list of %d sources", o->n_inputs);
  for (int i = 0; i < j->n_in; i++) j->in_src[i] = -1;
  for (int k = 0; k < o->n_inputs; k++) {
    const char *spec = o->inputs[k];
    if (!spec || !*spec) return toplu_errorf(err, TOPLU_ERR_INVALID_ARGUMENT, "--input: empty");
    int in = toplu_model_input_for_spec(j->model, spec);
    const char *path = in >= 0 ? spec + strlen(toplu_model_input(j->model, in)->name) + 1 : spec;
    if (!*path) return toplu_errorf(err, TOPLU_ERR_INVALID_ARGUMENT, "--input %s: no source after '='", spec);
    if (in < 0) {
      const char *eq = strchr(spec, '=');
      const char *slash = strchr(spec, '/');
      if (eq && (!slash || slash > eq) && !pl_exists(spec))
        return toplu_errorf(err, TOPLU_ERR_NOT_FOUND, "--input %s: the model has no input '%.*s'", spec,
                            (int)(eq - spec), spec);
    }
    toplu_status_t st = pl_source_open(path, j->model, in, j->csv_header, &j->src[j->n_src], err);
    if (st) return st;
    pl_source_t *s = j->src[j->n_src++];
    if (s->note[0] && j->mf) fprintf(j->mf, "toplu run: note: %s\n", s->note);
    for (int f = 0; f < s->n_fields; f++) {
      int mi = s->field_input[f];
      if (j->in_src[mi] >= 0)
        return toplu_errorf(err, TOPLU_ERR_INVALID_ARGUMENT, "input '%s' is given twice (%s and %s)",
                            toplu_model_input(j->model, mi)->name, j->src[j->in_src[mi]]->path, s->path);
      j->in_src[mi] = j->n_src - 1;
      j->in_field[mi] = f;
    }
    if (s->rows != j->src[0]->rows)
      return toplu_errorf(err, TOPLU_ERR_SHAPE, "sources %s (%lld rows) and %s (%lld rows) differ in length",
                          j->src[0]->path, (long long)j->src[0]->rows, s->path, (long long)s->rows);
  }
  for (int i = 0; i < j->n_in; i++)
    if (j->in_src[i] < 0) {
      const toplu_value_info_t *v = toplu_model_input(j->model, i);
      char dims[256];
      return toplu_errorf(err, TOPLU_ERR_INVALID_ARGUMENT, "no source for model input '%s' (%s %s): give --input %s=SOURCE",
                          v->name, toplu_dtype_name(v->dtype), toplu_shape_format(v->ndim < 0 ? 0 : v->ndim, v->dims, dims, sizeof dims),
                          v->name);
    }
  j->rows_total = j->src[0]->rows;
  return TOPLU_OK;
}

/* Parse the preprocessing once and bind a copy to every input. */
static toplu_status_t setup_pre(toplu_job_t *j, const char *spec, toplu_error_t *err) {
  pl_pre_t base;
  toplu_status_t st = pl_pre_parse(spec, &base, err);
  if (st) return st;
  j->pre = calloc((size_t)j->n_in + 1, sizeof *j->pre);
  if (!j->pre) return toplu_errorf(err, TOPLU_ERR_OUT_OF_MEMORY, "out of memory for the preprocessing of %d inputs", j->n_in);
  int any_image = 0;
  for (int i = 0; i < j->n_in; i++) any_image |= j->src[j->in_src[i]]->is_image;
  for (int i = 0; i < j->n_in; i++) {
    pl_source_t *s = j->src[j->in_src[i]];
    j->pre[i] = base;
    if (!s->is_image && any_image) j->pre[i].any_image_op = 0; /* image ops are for the image inputs */
    if ((st = pl_pre_bind(&j->pre[i], toplu_model_input(j->model, i), s->is_image, err))) return st;
    if (s->is_image) pl_pre_hint(&j->pre[i], &s->hint_w, &s->hint_h);
  }
  return TOPLU_OK;
}

/* A path the job writes or reads, for check_clobber. */
typedef struct io_path {
  char path[PL_PATH_MAX];  /* as given */
  char canon[PL_PATH_MAX]; /* pl_path_canon */
  const char *what;        /* "--output", "--errors", "the input", ... */
  int kind;                /* IO_FILE, IO_DIR (a directory source or output), IO_GLOB */
} io_path_t;

enum { IO_FILE, IO_DIR, IO_GLOB };

/* Fill an io_path; 0 or -1 (too long). */
static int io_set(io_path_t *p, const char *path, const char *what, int kind) {
  memset(p, 0, sizeof *p);
  if (strlen(path) >= sizeof p->path) return -1;
  snprintf(p->path, sizeof p->path, "%s", path);
  p->what = what;
  p->kind = kind;
  if (kind == IO_GLOB) { /* canonical leading directories, then the pattern's rest */
    char base[PL_PATH_MAX], cb[PL_PATH_MAX];
    pl_glob_base(path, base, sizeof base);
    const char *rest = path + (strcmp(base, ".") ? strlen(base) : 0);
    while (*rest == '/') rest++;
    if (pl_path_canon(base, cb, sizeof cb) || pl_path_join(cb, rest, p->canon, sizeof p->canon)) return -1;
    return 0;
  }
  return pl_path_canon(path, p->canon, sizeof p->canon);
}

/* 1 when paths a and b name the same file: the same device and inode when
 * both exist, or the same canonical path. */
static int same_file(const io_path_t *a, const io_path_t *b) {
  struct stat x, y;
  if (stat(a->path, &x) == 0 && stat(b->path, &y) == 0) return x.st_dev == y.st_dev && x.st_ino == y.st_ino;
  return !strcmp(a->canon, b->canon);
}

/* Why written path w would clobber read path r (NULL: it would not). */
static const char *clobbers(const io_path_t *w, const io_path_t *r) {
  if (w->kind == IO_FILE && r->kind == IO_FILE) return same_file(w, r) ? "is the same file as" : NULL;
  if (w->kind == IO_FILE && r->kind == IO_DIR) return pl_path_inside(w->canon, r->canon) ? "lies inside" : NULL;
  if (w->kind == IO_FILE && r->kind == IO_GLOB)
    return !fnmatch(r->canon, w->canon, FNM_PATHNAME | FNM_PERIOD) || !fnmatch(r->path, w->path, FNM_PATHNAME | FNM_PERIOD)
               ? "matches"
               : NULL;
  if (w->kind == IO_DIR && r->kind == IO_FILE)
    return pl_path_inside(r->canon, w->canon) || same_file(w, r) ? "would hold" : NULL;
  if (w->kind == IO_DIR && r->kind == IO_DIR)
    return pl_path_inside(w->canon, r->canon) || pl_path_inside(r->canon, w->canon) ? "overlaps" : NULL;
  if (w->kind == IO_DIR && r->kind == IO_GLOB) {
    char base[PL_PATH_MAX], cb[PL_PATH_MAX];
    pl_glob_base(r->path, base, sizeof base);
    if (pl_path_canon(base, cb, sizeof cb)) return NULL;
    return pl_path_inside(w->canon, cb) || pl_path_inside(cb, w->canon) ? "overlaps the files of" : NULL;
  }
  return NULL;
}

/* Refuse a job that would write (its output, part files, checkpoint, lock
 * or errors file) over anything it reads: the model, a source file, a file
 * inside a directory source or matching a glob source, the labels or the
 * tune file; or whose outputs would be one file. */
static toplu_status_t check_clobber(const toplu_job_t *j, toplu_error_t *err) {
  io_path_t *w = calloc(8, sizeof *w), *r = calloc((size_t)j->n_src + 4, sizeof *r);
  int nw = 0, nr = 0;
  toplu_status_t st = w && r ? TOPLU_OK : toplu_errorf(err, TOPLU_ERR_OUT_OF_MEMORY, "out of memory checking paths");
  int dir_out = !strcmp(pl_sink_kind(j->output), "npy");
  char tmp[PL_PATH_MAX];
  int bad = 0;
  if (!st) {
    bad |= io_set(&w[nw++], j->output, "--output", dir_out ? IO_DIR : IO_FILE);
    if (!dir_out) {
      bad |= pl_path_hidden(j->output, ".part", tmp, sizeof tmp) || io_set(&w[nw++], tmp, "--output's part file", IO_FILE);
      bad |= pl_path_hidden(j->output, ".toplu-state", tmp, sizeof tmp) ||
             io_set(&w[nw++], tmp, "--output's checkpoint", IO_FILE);
    }
    bad |= pl_path_hidden(j->output, ".toplu-lock", tmp, sizeof tmp) || io_set(&w[nw++], tmp, "--output's lock file", IO_FILE);
    if (j->errors_path) bad |= io_set(&w[nw++], j->errors_path, "--errors", IO_FILE);
    bad |= io_set(&r[nr++], j->model_path, "the model", IO_FILE);
    if (j->labels_path) bad |= io_set(&r[nr++], j->labels_path, "the --labels file", IO_FILE);
    if (j->tune_path) bad |= io_set(&r[nr++], j->tune_path, "the --tune file", IO_FILE);
    for (int i = 0; i < j->n_src; i++) {
      const pl_source_t *s = j->src[i];
      bad |= io_set(&r[nr++], s->path, s->is_dir ? "the input directory" : s->is_glob ? "the input glob" : "the input",
                    s->is_dir ? IO_DIR : s->is_glob ? IO_GLOB : IO_FILE);
    }
    if (bad) st = toplu_errorf(err, TOPLU_ERR_INVALID_ARGUMENT, "--output or an input: path too long");
  }
  for (int a = 0; !st && a < nw; a++) {
    for (int b = 0; !st && b < nr; b++) {
      const char *how = clobbers(&w[a], &r[b]);
      if (how)
        st = toplu_errorf(err, TOPLU_ERR_INVALID_ARGUMENT, "%s %s %s %s %s: it would be overwritten; write elsewhere",
                          w[a].what, w[a].path, how, r[b].what, r[b].path);
    }
    for (int b = a + 1; !st && b < nw; b++)
      if (!strcmp(w[a].canon, w[b].canon) || (w[a].kind == IO_FILE && w[b].kind == IO_FILE && same_file(&w[a], &w[b])))
        st = toplu_errorf(err, TOPLU_ERR_INVALID_ARGUMENT, "%s %s and %s %s are the same file", w[a].what, w[a].path,
                          w[b].what, w[b].path);
  }
  free(w);
  free(r);
  return st;
}

/* Take the output's lock (.NAME.toplu-lock beside it, flock), so that two
 * jobs never write one output at once; held until toplu_job_destroy. */
static toplu_status_t take_lock(toplu_job_t *j, toplu_error_t *err) {
  if (pl_path_hidden(j->output, ".toplu-lock", j->lock_path, sizeof j->lock_path))
    return toplu_errorf(err, TOPLU_ERR_INVALID_ARGUMENT, "--output %s: path too long", j->output);
  char dir[PL_PATH_MAX];
  pl_path_dir(j->lock_path, dir, sizeof dir);
  if (!pl_is_dir(dir)) {
    toplu_status_t st = pl_mkdir_p(dir, err);
    if (st) return st;
  }
  j->lock_fd = open(j->lock_path, O_RDWR | O_CREAT | O_CLOEXEC, 0666);
  if (j->lock_fd < 0)
    return toplu_errorf(err, TOPLU_ERR_IO, "cannot create the lock file %s: %s", j->lock_path, strerror(errno));
  if (flock(j->lock_fd, LOCK_EX | LOCK_NB) != 0) {
    int e = errno;
    close(j->lock_fd);
    j->lock_fd = -1;
    if (e == EWOULDBLOCK)
      return toplu_errorf(err, TOPLU_ERR_INVALID_ARGUMENT,
                          "another job is writing %s (it holds the lock %s); wait for it to finish, or write elsewhere",
                          j->output, j->lock_path);
    /* A file system without locks: go on, unprotected, and say so. */
    if (j->mf)
      fprintf(j->mf, "toplu run: warning: cannot lock %s (%s): nothing stops a second job from writing %s at once\n",
              j->lock_path, strerror(e), j->output);
  }
  return TOPLU_OK;
}

/* Rows [row_first, row_end) are this shard's. */
static void chunk_rows(const toplu_job_t *j, int64_t c, int64_t *first, int64_t *count) {
  *first = j->row_first + c * j->batch;
  int64_t left = j->row_end - *first;
  *count = left < j->batch ? left : j->batch;
}

/* 1 when a row tensor fits model input i (rank, dtype, fixed dims); else 0 with why. */
static int row_fits(const toplu_job_t *j, int i, const toplu_tensor_t *t, char *why, size_t why_size) {
  const toplu_value_info_t *v = toplu_model_input(j->model, i);
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

/* Index of the first NaN or Inf of a float tensor (-1: none; integers have none). */
static int64_t first_nonfinite(const toplu_tensor_t *t) {
  int64_t n = toplu_tensor_numel(t);
  if (t->dtype == TOPLU_DTYPE_FLOAT) {
    const float *x = t->data;
    for (int64_t i = 0; i < n; i++)
      if (!isfinite(x[i])) return i;
    return -1;
  }
  if (!pl_dtype_float(t->dtype)) return -1;
  for (int64_t i = 0; i < n; i++)
    if (!isfinite(pl_elem_get(t->dtype, t->data, i))) return i;
  return -1;
}

/* Read and preprocess the rows of chunk c and stack them into batches.
 * Times go to t_read and t_pre.  Row problems fail the row; other errors return. */
static toplu_status_t read_chunk(toplu_job_t *j, pl_chunk_t *c, int64_t ci, double *t_read, double *t_pre,
                                 toplu_error_t *err) {
  int64_t first, count;
  chunk_rows(j, ci, &first, &count);
  if (pl_chunk_init(c, ci, first, count, j->n_in, j->n_out))
    return toplu_errorf(err, TOPLU_ERR_OUT_OF_MEMORY, "out of memory for the rows of a chunk of %lld rows",
                        (long long)count);
  double t0 = pl_now();
  pl_value_t **vals = calloc((size_t)j->n_src, sizeof *vals);
  char ***errs = calloc((size_t)j->n_src, sizeof *errs);
  toplu_status_t st = vals && errs ? TOPLU_OK
                                   : toplu_errorf(err, TOPLU_ERR_OUT_OF_MEMORY, "out of memory for a chunk's source lists");
  for (int s = 0; !st && s < j->n_src; s++) {
    vals[s] = calloc((size_t)(count * j->src[s]->n_fields) + 1, sizeof **vals);
    errs[s] = calloc((size_t)count + 1, sizeof **errs);
    if (!vals[s] || !errs[s])
      st = toplu_errorf(err, TOPLU_ERR_OUT_OF_MEMORY, "out of memory for a chunk of %lld rows of %s", (long long)count,
                        j->src[s]->path);
    else st = j->src[s]->ops->read(j->src[s], first, count, vals[s], errs[s], err);
  }
  double t1 = pl_now();
  for (int64_t r = 0; !st && r < count; r++) {
    pl_row_t *row = &c->rows[r];
    const char *id = j->src[0]->ops->id(j->src[0], first + r);
    char num[32];
    if (!id) {
      snprintf(num, sizeof num, "%lld", (long long)(first + r));
      row->id_is_number = 1;
    }
    row->id = strdup(id ? id : num);
    if (!row->id) {
      st = toplu_errorf(err, TOPLU_ERR_OUT_OF_MEMORY, "out of memory for the id of row %lld", (long long)(first + r));
      break;
    }
    for (int s = 0; s < j->n_src && !row->fail_stage; s++)
      if (errs[s][r]) pl_row_fail(row, "read", "%s", errs[s][r]);
    for (int i = 0; i < j->n_in && !row->fail_stage; i++) {
      pl_source_t *src = j->src[j->in_src[i]];
      pl_value_t *v = &vals[j->in_src[i]][r * src->n_fields + j->in_field[i]];
      char why[512];
      if (pl_pre_apply(&j->pre[i], v, &row->in[i], why, sizeof why)) {
        pl_row_fail(row, "preprocess", "%s", why);
      } else if (!row_fits(j, i, &row->in[i], why, sizeof why)) {
        pl_row_fail(row, "preprocess", "%s", why);
      } else {
        /* Kernels may turn NaN into numbers (max pooling, a fused ReLU):
         * refuse non-finite inputs here, so the output check is not the only guard. */
        int64_t bad = first_nonfinite(&row->in[i]);
        if (bad >= 0)
          pl_row_fail(row, "preprocess", "input '%s' contains %s at element %lld", toplu_model_input(j->model, i)->name,
                      isnan(pl_elem_get(row->in[i].dtype, row->in[i].data, bad)) ? "NaN" : "Inf", (long long)bad);
      }
    }
  }
  for (int s = 0; s < j->n_src; s++) {
    for (int64_t k = 0; vals && vals[s] && k < count * j->src[s]->n_fields; k++) pl_value_free(&vals[s][k]);
    for (int64_t r = 0; errs && errs[s] && r < count; r++) free(errs[s][r]);
    if (vals) free(vals[s]);
    if (errs) free(errs[s]);
  }
  free(vals);
  free(errs);
  if (!st && pl_chunk_stack(c))
    st = toplu_errorf(err, TOPLU_ERR_OUT_OF_MEMORY, "out of memory stacking rows %lld..%lld into batches (--batch-size %lld)",
                      (long long)first, (long long)(first + count - 1), (long long)j->batch);
  double t2 = pl_now();
  *t_read = t1 - t0;
  *t_pre = t2 - t1;
  return st;
}

/* Append a batch of one row for row r whose inputs point at its slice of
 * batch b's inputs (no copy: a batch that ran out of memory is not doubled);
 * batch b's inputs stay until pl_chunk_free_inputs.  0 or -1. */
static int split_row(pl_chunk_t *c, int b, pl_row_t *row) {
  pl_batch_t *nb = realloc(c->batches, sizeof *nb * (size_t)(c->n_batches + 1));
  if (!nb) return -1;
  c->batches = nb;
  pl_batch_t *src = &c->batches[b], *dst = &c->batches[c->n_batches];
  memset(dst, 0, sizeof *dst);
  dst->n = 1;
  dst->borrowed = 1;
  dst->in = calloc((size_t)c->n_inputs + 1, sizeof *dst->in);
  dst->out = calloc((size_t)c->n_outputs + 1, sizeof *dst->out);
  if (!dst->in || !dst->out) {
    free(dst->in);
    free(dst->out);
    return -1;
  }
  for (int i = 0; i < c->n_inputs; i++) {
    const toplu_tensor_t *t = &src->in[i];
    dst->in[i] = *t;
    dst->in[i].dims[0] = 1;
    size_t rb = toplu_tensor_nbytes(&dst->in[i]);
    dst->in[i].data = (char *)t->data + (size_t)row->pos * rb;
  }
  row->batch = c->n_batches++;
  row->pos = 0;
  return 0;
}

/* Run the batches of a chunk; a failing batch is rerun row by row, and
 * rows that fail alone fail.  Returns errors not tied to a row. */
static toplu_status_t infer_chunk(toplu_job_t *j, pl_chunk_t *c, toplu_error_t *err) {
  for (int b = 0; b < c->n_batches; b++) {
    pl_batch_t *bt = &c->batches[b];
    if (bt->ran || bt->n == 0) continue;
    for (int k = 0; k < j->n_out; k++) bt->out[k] = (toplu_tensor_t){0};
    toplu_status_t st = toplu_session_run(j->session, bt->in, j->n_in, bt->out, j->n_out);
    c->n_runs++;
    if (st == TOPLU_OK) {
      for (int k = 0; k < j->n_out; k++) {
        const toplu_tensor_t *t = &bt->out[k];
        if ((t->ndim >= 1 && t->dims[0] == bt->n) || bt->n == 1) continue;
        char sh[128];
        return toplu_errorf(err, TOPLU_ERR_SHAPE,
                            "output '%s' has shape %s for a batch of %lld rows: its dim 0 does not follow the batch; "
                            "run with --batch-size 1",
                            toplu_model_output(j->model, k)->name, toplu_shape_format(t->ndim, t->dims, sh, sizeof sh),
                            (long long)bt->n);
      }
      bt->ran = 1;
      continue;
    }
    char msg[TOPLU_ERROR_MESSAGE_MAX];
    snprintf(msg, sizeof msg, "%s", toplu_session_last_error(j->session));
    for (int k = 0; k < j->n_out; k++) toplu_tensor_free(&bt->out[k]);
    if (st == TOPLU_ERR_BACKEND || st == TOPLU_ERR_INTERNAL)
      return toplu_errorf(err, st, "inference failed on rows %lld..%lld: %s", (long long)c->first,
                          (long long)(c->first + c->count - 1), msg);
    int64_t n = bt->n;
    bt->n = 0; /* its rows move to batches of one, or fail */
    if (st == TOPLU_ERR_OUT_OF_MEMORY && n > 1 && !atomic_exchange(&j->oom_noted, 1)) {
      j->oom_batch = n;
      if (j->mf)
        fprintf(j->mf,
                "toplu run: note: a batch of %lld rows (rows %lld..) ran out of memory (%s); its rows, and those of "
                "any other batch that does, are run one at a time (a smaller --batch-size avoids this)\n",
                (long long)n, (long long)c->first, msg);
    }
    for (int64_t r = 0; r < c->count; r++) {
      pl_row_t *row = &c->rows[r];
      if (row->batch != b || row->fail_stage) continue;
      if (n == 1) {
        pl_row_fail(row, "infer", "%s", msg);
        row->batch = -1;
        if (st == TOPLU_ERR_OUT_OF_MEMORY) atomic_fetch_add(&j->oom_rows, 1);
      } else if (split_row(c, b, row)) {
        pl_row_fail(row, "infer", "%s; then out of memory for the row's own batch", msg);
        row->batch = -1;
        if (st == TOPLU_ERR_OUT_OF_MEMORY) atomic_fetch_add(&j->oom_rows, 1);
      }
    }
  }
  pl_chunk_free_inputs(c);
  return TOPLU_OK;
}

/* Postprocess a chunk and format its results and errors. */
static toplu_status_t post_chunk(toplu_job_t *j, pl_chunk_t *c, toplu_error_t *err) {
  if (pl_post_chunk(&j->post, c))
    return toplu_errorf(err, TOPLU_ERR_OUT_OF_MEMORY, "out of memory postprocessing rows %lld..%lld", (long long)c->first,
                        (long long)(c->first + c->count - 1));
  for (int64_t r = 0; r < c->count; r++) {
    pl_row_t *row = &c->rows[r];
    if (!row->fail_stage) {
      c->n_ok++;
      continue;
    }
    c->n_failed++;
    if (j->fail_fast)
      return toplu_errorf(err, TOPLU_ERR_INVALID_ARGUMENT, "row %lld (id %s) failed in %s: %s (--fail-fast)",
                          (long long)row->index, row->id ? row->id : "?", row->fail_stage, row->fail_reason);
    pl_buf_t *b = &c->errors;
    pl_buf_puts(b, "{\"id\": ");
    if (row->id_is_number) pl_buf_puts(b, row->id);
    else pl_buf_json_string(b, row->id ? row->id : "");
    pl_buf_printf(b, ", \"row\": %lld, \"stage\": ", (long long)row->index);
    pl_buf_json_string(b, row->fail_stage);
    pl_buf_puts(b, ", \"error\": ");
    pl_buf_json_string(b, row->fail_reason ? row->fail_reason : "");
    pl_buf_puts(b, "}\n");
  }
  if (c->errors.oom)
    return toplu_errorf(err, TOPLU_ERR_OUT_OF_MEMORY, "out of memory formatting the errors of rows %lld..%lld",
                        (long long)c->first, (long long)(c->first + c->count - 1));
  return j->sink->ops->format(j->sink, c, err);
}

/* The settings that decide the output's bytes, for the checkpoint: the
 * identities of the model, sources and labels (see pipeline/identity.h),
 * the row counts, batch size, pre- and postprocessing, errors file and
 * shard.  Compared on --resume (pl_job_diff) and by toplu merge. */
static toplu_status_t describe_job(toplu_job_t *j, const toplu_job_options_t *o, toplu_error_t *err) {
  (void)o;
  char why[PL_PATH_MAX + 256];
  json_t *d = json_object(), *ins = json_array();
  json_t *model = pl_identity_model(j->model_path, why, sizeof why);
  if (!d || !ins || !model) {
    json_decref(d);
    json_decref(ins);
    json_decref(model);
    return model ? toplu_errorf(err, TOPLU_ERR_OUT_OF_MEMORY, "out of memory describing the job")
                 : toplu_errorf(err, TOPLU_ERR_IO, "the model: %s", why);
  }
  json_object_set_new(d, "model", model);
  for (int k = 0; k < j->n_src; k++) {
    const pl_source_t *src = j->src[k];
    char feeds[1024] = "";
    for (int f = 0; f < src->n_fields; f++) {
      size_t n = strlen(feeds);
      snprintf(feeds + n, sizeof feeds - n, "%s%s", f ? "," : "", toplu_model_input(j->model, src->field_input[f])->name);
    }
    json_t *id = pl_source_identity(src, why, sizeof why), *e = json_object();
    if (!id || !e) {
      json_decref(id);
      json_decref(e);
      json_decref(d);
      json_decref(ins);
      return toplu_errorf(err, TOPLU_ERR_IO, "input %s: %s", src->path, why);
    }
    json_object_set_new(e, "feeds", json_string(feeds));
    json_object_set_new(e, "kind", json_string(src->ops->kind));
    json_object_set_new(e, "source", id);
    json_array_append_new(ins, e);
  }
  char pre[4096] = "", one[1024], buf[PL_PATH_MAX];
  for (int i = 0; i < j->n_in; i++) {
    pl_pre_describe(&j->pre[i], one, sizeof one);
    size_t n = strlen(pre);
    snprintf(pre + n, sizeof pre - n, "%s%s", i ? ";" : "", one);
  }
  json_object_set_new(d, "inputs", ins);
  json_object_set_new(d, "rows", json_integer(j->rows_total));
  if (pl_path_canon(j->output, buf, sizeof buf)) snprintf(buf, sizeof buf, "%s", j->output);
  json_object_set_new(d, "output", json_string(buf));
  json_object_set_new(d, "batch_size", json_integer(j->batch));
  json_object_set_new(d, "preprocess", json_string(pre));
  pl_post_describe(&j->post, buf, sizeof buf);
  json_object_set_new(d, "postprocess", json_string(buf));
  if (j->labels_path) {
    json_t *lab = pl_identity_file(j->labels_path, why, sizeof why);
    if (!lab) {
      json_decref(d);
      return toplu_errorf(err, TOPLU_ERR_IO, "--labels: %s", why);
    }
    json_object_set_new(d, "labels", lab);
  } else {
    json_object_set_new(d, "labels", json_null());
  }
  int any_csv = 0;
  for (int k = 0; k < j->n_src; k++) any_csv |= !strcmp(j->src[k]->ops->kind, "csv");
  static const char *const modes[] = {"auto", "yes", "no"};
  json_object_set_new(d, "csv_header", json_string(any_csv ? modes[j->csv_header] : ""));
  if (!j->errors_path) buf[0] = '\0';
  else if (pl_path_canon(j->errors_path, buf, sizeof buf)) snprintf(buf, sizeof buf, "%s", j->errors_path);
  json_object_set_new(d, "errors", json_string(buf));
  snprintf(buf, sizeof buf, "%lld/%lld", (long long)j->shard.index, (long long)j->shard.count);
  json_object_set_new(d, "shard", json_string(buf));
  json_object_set_new(d, "row_first", json_integer(j->row_first));
  json_object_set_new(d, "row_end", json_integer(j->row_end));
  j->desc = d;
  return TOPLU_OK;
}

/* --resume: refuse a checkpoint of other settings (exit 2 on the command
 * line, before anything is written). */
static toplu_status_t check_resume(toplu_job_t *j, toplu_error_t *err) {
  if (!j->resume || !j->loaded_found) return TOPLU_OK;
  char why[2048], where[PL_PATH_MAX];
  if (pl_path_hidden(j->output, ".toplu-state", where, sizeof where)) snprintf(where, sizeof where, "%s", j->output);
  if (!strcmp(j->sink->ops->kind, "npy")) pl_path_join(j->output, ".toplu-state", where, sizeof where);
  else if (!strcmp(j->sink->ops->kind, "sqlite")) snprintf(where, sizeof where, "in %s", j->output);
  int r = pl_job_diff(j->loaded.job, j->desc, 0, why, sizeof why);
  if (r == 2)
    return toplu_errorf(err, TOPLU_ERR_INVALID_ARGUMENT,
                        "--resume: the checkpoint %s does not record the job's inputs the way this toplu does (an "
                        "older version wrote it); run without --resume to start over",
                        where);
  if (r)
    return toplu_errorf(err, TOPLU_ERR_INVALID_ARGUMENT,
                        "--resume: the checkpoint %s is for another job: %s; run without --resume to start over", where,
                        why);
  return TOPLU_OK;
}

/* A preprocessed first row of the shard (for the batch-size sweep). */
static toplu_status_t sample_row(toplu_job_t *j, toplu_tensor_t *row, toplu_error_t *err) {
  int64_t limit = j->row_end - j->row_first < 16 ? j->row_end - j->row_first : 16;
  for (int64_t r = 0; r < limit; r++) {
    pl_chunk_t c;
    double a, b;
    int64_t saved = j->batch;
    j->batch = 1;
    toplu_status_t st = read_chunk(j, &c, r, &a, &b, err);
    j->batch = saved;
    if (!st && c.n_batches == 1) {
      for (int i = 0; i < j->n_in; i++) {
        row[i] = c.batches[0].in[i];
        row[i].ndim--;
        memmove(row[i].dims, row[i].dims + 1, sizeof(int64_t) * (size_t)row[i].ndim);
        c.batches[0].in[i].data = NULL;
      }
      pl_chunk_clear(&c);
      return TOPLU_OK;
    }
    pl_chunk_clear(&c);
    if (st) return st;
  }
  return toplu_errorf(err, TOPLU_ERR_INVALID_ARGUMENT,
                      "--batch-size auto: none of the first %lld rows could be read to time the model", (long long)limit);
}

/* A `toplu tune` result for this model in the default place (toplu-tune/tune.json in the
 * working directory, as `toplu tune` writes it); 1 with its path when there is one. */
static int find_tune_result(const toplu_job_t *j, char *path, size_t size) {
  snprintf(path, size, "toplu-tune/tune.json");
  json_t *o = json_load_file(path, 0, NULL);
  const char *m = json_string_value(json_object_get(o, "model"));
  char a[PL_PATH_MAX], b[PL_PATH_MAX];
  int same = m && realpath(m, a) && realpath(j->model_path, b) && !strcmp(a, b);
  json_decref(o);
  return same;
}

/* Batch size from `toplu tune`'s sweep (toplu_tune_model) on the job's first row's shapes; 0 on failure. */
static int64_t tune_now(toplu_job_t *j, const toplu_tensor_t *row, char *how, size_t how_size) {
  toplu_input_shape_t *shapes = calloc((size_t)j->n_in + 1, sizeof *shapes);
  if (!shapes) return 0;
  for (int i = 0; i < j->n_in; i++) {
    shapes[i].name = toplu_model_input(j->model, i)->name;
    shapes[i].ndim = row[i].ndim + 1;
    shapes[i].dims[0] = 1;
    memcpy(shapes[i].dims + 1, row[i].dims, sizeof(int64_t) * (size_t)row[i].ndim);
  }
  toplu_tune_options_t to;
  toplu_tune_options_init(&to);
  to.shapes = shapes;
  to.n_shapes = j->n_in;
  to.threads = j->threads;
  to.max_batch = 64;
  to.max_seconds_per_batch = 1.0;
  to.max_seconds = 15.0;
  toplu_tune_result_t *r = NULL;
  toplu_error_t err;
  int64_t best = 0;
  if (toplu_tune_model(j->model, &to, &r, &err) == TOPLU_OK && r && r->recommended_batch_size > 0) {
    best = r->recommended_batch_size;
    size_t n = (size_t)snprintf(how, how_size, "toplu tune's sweep:");
    for (int k = 0; k < r->n_rows && n < how_size; k++)
      n += (size_t)snprintf(how + n, how_size - n, " %lld:%.0f/s", (long long)r->rows[k].batch_size,
                            r->rows[k].throughput);
  } else {
    snprintf(how, how_size, "toplu tune failed (%.900s)", r ? r->stop_reason : err.message);
  }
  toplu_tune_result_free(r);
  free(shapes);
  return best;
}

/* Resolve --batch-size auto: the checkpoint being resumed, a tune result
 * (--tune FILE, or toplu-tune/tune.json for this model), else a short tune
 * of the first row's shapes (toplu tune's sweep; this module's own sweep if
 * that fails). */
static toplu_status_t auto_batch(toplu_job_t *j, const toplu_job_options_t *o, toplu_error_t *err) {
  if (j->loaded_found && json_is_integer(json_object_get(j->loaded.job, "batch_size"))) {
    j->batch = (int64_t)json_integer_value(json_object_get(j->loaded.job, "batch_size"));
    if (j->pf) fprintf(j->pf, "toplu run: --batch-size auto: %lld, from the checkpoint being resumed\n", (long long)j->batch);
    if (j->batch >= 1) return TOPLU_OK;
  }
  char found[PL_PATH_MAX];
  const char *tune_file = o->tune_file ? o->tune_file : find_tune_result(j, found, sizeof found) ? found : NULL;
  if (tune_file) {
    /* a tune result is only worth anything for the model it measured */
    int checked = 0;
    toplu_status_t st = toplu_tune_result_matches_model(tune_file, j->model_path, &checked, err);
    if (st) return toplu_error_prefix(err, "--tune %s", tune_file), st;
    if (!checked && j->pf)
      fprintf(j->pf, "toplu run: note: %s does not record which model it measured; using it as given\n", tune_file);
    st = pl_tune_file_batch(tune_file, &j->batch, err);
    if (!st && j->pf) fprintf(j->pf, "toplu run: --batch-size auto: %lld, from %s\n", (long long)j->batch, tune_file);
    return st;
  }
  if (j->row_end <= j->row_first) {
    j->batch = 1;
    return TOPLU_OK;
  }
  toplu_tensor_t *row = calloc((size_t)j->n_in + 1, sizeof *row);
  if (!row) return toplu_errorf(err, TOPLU_ERR_OUT_OF_MEMORY, "out of memory for a sample row of %d inputs", j->n_in);
  toplu_status_t st = sample_row(j, row, err);
  char how[1024] = "";
  if (!st && (j->batch = tune_now(j, row, how, sizeof how)) > 0) {
    if (j->pf) fprintf(j->pf, "toplu run: --batch-size auto: %lld (no tune result: ran %s)\n", (long long)j->batch, how);
  } else if (!st) {
    char how2[512] = "";
    st = pl_sweep_batch(j->session, row, j->n_in, j->n_out, 64, 10.0, &j->batch, how2, sizeof how2, err);
    if (!st && j->pf)
      fprintf(j->pf, "toplu run: --batch-size auto: %lld (%s; timed the model: %s rows/s)\n", (long long)j->batch, how,
              how2);
  }
  for (int i = 0; i < j->n_in; i++) toplu_tensor_free(&row[i]);
  free(row);
  return st;
}

toplu_status_t toplu_job_create(const toplu_job_options_t *o, toplu_job_t **out, toplu_error_t *err) {
  toplu_error_clear(err);
  *out = NULL;
  if (!o || !o->model || !o->output || !*o->output || o->n_inputs < 1 || !o->inputs)
    return toplu_errorf(err, TOPLU_ERR_INVALID_ARGUMENT, "a job needs a model, at least one input and an output");
  if (o->batch_size < 0 || o->workers < 0 || o->prefetch < 0 || o->infer_workers < 0 || o->threads < 0)
    return toplu_errorf(err, TOPLU_ERR_INVALID_ARGUMENT, "negative batch size, workers, prefetch or threads");
  if (o->csv_header < TOPLU_CSV_HEADER_AUTO || o->csv_header > TOPLU_CSV_HEADER_NO)
    return toplu_errorf(err, TOPLU_ERR_INVALID_ARGUMENT, "csv_header %d: expected auto (0), yes (1) or no (2)",
                        (int)o->csv_header);
  toplu_job_t *j = calloc(1, sizeof *j);
  if (!j) return toplu_errorf(err, TOPLU_ERR_OUT_OF_MEMORY, "out of memory for a job (%zu bytes)", sizeof *j);
  j->errors_fd = -1;
  j->lock_fd = -1;
  j->model_path = strdup(o->model);
  j->output = strdup(o->output);
  j->errors_path = dup_or_null(o->errors);
  j->labels_path = dup_or_null(o->labels);
  j->tune_path = dup_or_null(o->tune_file);
  long cores = sysconf(_SC_NPROCESSORS_ONLN);
  if (cores < 1) cores = 1;
  j->workers = o->workers ? o->workers : cores <= 4 ? 1 : (int)(cores / 4 > 8 ? 8 : cores / 4);
  j->prefetch = o->prefetch;
  j->infer_workers = o->infer_workers ? o->infer_workers : 1;
  j->threads = o->threads ? o->threads : j->infer_workers > 1 ? (int)(cores / j->infer_workers > 0 ? cores / j->infer_workers : 1) : 0;
  j->resume = o->resume;
  j->fail_fast = o->fail_fast;
  j->csv_header = (pl_csv_header_t)o->csv_header;
  j->checkpoint_s = o->checkpoint_seconds;
  j->pf = o->progress_stream;
  j->mf = o->message_stream ? o->message_stream : o->progress_stream;
  j->pmode = o->progress;
  j->progress_s = o->progress_seconds;
  atomic_init(&j->cancel, 0);
  atomic_init(&j->oom_noted, 0);
  atomic_init(&j->oom_rows, 0);
  json_object_seed(0);
  toplu_status_t st = TOPLU_OK;
  if (!j->model_path || !j->output || (o->errors && !j->errors_path) || (o->labels && !j->labels_path) ||
      (o->tune_file && !j->tune_path))
    st = toplu_errorf(err, TOPLU_ERR_OUT_OF_MEMORY, "out of memory copying the job's paths");
  if (!st) st = toplu_model_load(o->model, NULL, &j->model, err);
  if (!st) {
    j->n_in = toplu_model_input_count(j->model);
    j->n_out = toplu_model_output_count(j->model);
    if (j->n_in < 1) st = toplu_errorf(err, TOPLU_ERR_INVALID_ARGUMENT, "%s has no inputs", o->model);
  }
  if (!st) st = open_sources(j, o, err);
  if (!st) st = setup_pre(j, o->preprocess, err);
  if (!st) st = pl_post_parse(o->postprocess, &j->post, err);
  if (!st) {
    char note[1024];
    st = pl_post_bind(&j->post, j->model, o->labels, note, sizeof note, err);
    if (!st && note[0] && j->mf) fprintf(j->mf, "toplu run: %s\n", note);
  }
  if (!st) st = pl_sink_open(o->output, j->model, &j->post, &j->sink, err);
  if (!st) st = check_clobber(j, err);
  if (!st) st = pl_shard_resolve(o->shard_index, o->shard_count, &j->shard, err);
  if (!st) st = take_lock(j, err);
  if (!st) {
    pl_shard_range(&j->shard, j->rows_total, &j->row_first, &j->row_end);
    toplu_session_options_t so;
    toplu_session_options_init(&so);
    so.threads = j->threads;
    so.batch_override = toplu_model_fixed_batch(j->model);
    so.max_plans = 16;
    st = toplu_session_create(j->model, &so, &j->session, err);
  }
  if (!st && j->resume) {
    st = j->sink->ops->load_state(j->sink, &j->loaded, &j->loaded_found, err);
    j->have_loaded = 1;
  }
  if (!st) {
    j->batch = o->batch_size;
    if (j->batch == 0) st = auto_batch(j, o, err);
  }
  if (!st) st = describe_job(j, o, err);
  if (!st) st = check_resume(j, err);
  if (st) {
    toplu_job_destroy(j);
    return st;
  }
  j->stats.rows_total = j->row_end - j->row_first;
  j->stats.batch_size = j->batch;
  j->stats.shard_index = j->shard.index;
  j->stats.shard_count = j->shard.count;
  j->stats.row_first = j->row_first;
  j->stats.row_end = j->row_end;
  j->stats.threads[TOPLU_STAGE_READ] = j->stats.threads[TOPLU_STAGE_PREPROCESS] = j->workers;
  j->stats.threads[TOPLU_STAGE_INFER] = j->infer_workers;
  j->stats.threads[TOPLU_STAGE_POSTPROCESS] = j->stats.threads[TOPLU_STAGE_WRITE] = 1;
  *out = j;
  return TOPLU_OK;
}

/* ---- running ---- */

/* Record the first failure and stop every stage (call with mu held). */
static void fail_locked(toplu_job_t *j, toplu_status_t st, const char *msg) {
  if (!j->fail) {
    j->fail = st;
    snprintf(j->fail_msg, sizeof j->fail_msg, "%s", msg);
  }
  j->stop = 1;
  pthread_cond_broadcast(&j->cv);
}

/* Reader thread: claim chunks inside the window, read, preprocess and stack them. */
static void *reader_main(void *arg) {
  toplu_job_t *j = arg;
  pthread_mutex_lock(&j->mu);
  for (;;) {
    while (!j->stop && j->next_read < j->c_end && j->next_read - j->next_write >= j->n_slots)
      pthread_cond_wait(&j->cv, &j->mu);
    if (j->stop || j->next_read >= j->c_end) break;
    int64_t ci = j->next_read++;
    int slot = (int)(ci % j->n_slots);
    j->slot_state[slot] = SLOT_READING;
    pthread_mutex_unlock(&j->mu);
    toplu_error_t err;
    double tr = 0, tp = 0;
    toplu_status_t st = read_chunk(j, &j->slots[slot], ci, &tr, &tp, &err);
    pthread_mutex_lock(&j->mu);
    j->stats.busy_s[TOPLU_STAGE_READ] += tr;
    j->stats.busy_s[TOPLU_STAGE_PREPROCESS] += tp;
    if (st) {
      fail_locked(j, st, err.message);
      break;
    }
    j->slot_state[slot] = SLOT_READ;
    pthread_cond_broadcast(&j->cv);
  }
  pthread_mutex_unlock(&j->mu);
  return NULL;
}

/* Inference thread: run chunks in order. */
static void *infer_main(void *arg) {
  toplu_job_t *j = arg;
  pthread_mutex_lock(&j->mu);
  for (;;) {
    while (!j->stop && j->next_infer < j->c_end && j->slot_state[j->next_infer % j->n_slots] != SLOT_READ)
      pthread_cond_wait(&j->cv, &j->mu);
    if (j->stop || j->next_infer >= j->c_end) break;
    int slot = (int)(j->next_infer++ % j->n_slots);
    j->slot_state[slot] = SLOT_INFERRING;
    pthread_mutex_unlock(&j->mu);
    toplu_error_t err;
    double t0 = pl_now();
    toplu_status_t st = infer_chunk(j, &j->slots[slot], &err);
    double t = pl_now() - t0;
    pthread_mutex_lock(&j->mu);
    j->stats.busy_s[TOPLU_STAGE_INFER] += t;
    j->stats.batches += j->slots[slot].n_runs;
    if (st) {
      fail_locked(j, st, err.message);
      break;
    }
    j->slot_state[slot] = SLOT_INFERRED;
    pthread_cond_broadcast(&j->cv);
  }
  pthread_mutex_unlock(&j->mu);
  return NULL;
}

/* Postprocess thread: postprocess and format chunks in order. */
static void *post_main(void *arg) {
  toplu_job_t *j = arg;
  pthread_mutex_lock(&j->mu);
  for (;;) {
    while (!j->stop && j->next_post < j->c_end && j->slot_state[j->next_post % j->n_slots] != SLOT_INFERRED)
      pthread_cond_wait(&j->cv, &j->mu);
    if (j->stop || j->next_post >= j->c_end) break;
    int slot = (int)(j->next_post++ % j->n_slots);
    j->slot_state[slot] = SLOT_POSTING;
    pthread_mutex_unlock(&j->mu);
    toplu_error_t err;
    double t0 = pl_now();
    toplu_status_t st = post_chunk(j, &j->slots[slot], &err);
    double t = pl_now() - t0;
    pthread_mutex_lock(&j->mu);
    j->stats.busy_s[TOPLU_STAGE_POSTPROCESS] += t;
    if (st) {
      fail_locked(j, st, err.message);
      break;
    }
    j->slot_state[slot] = SLOT_POSTED;
    pthread_cond_broadcast(&j->cv);
  }
  pthread_mutex_unlock(&j->mu);
  return NULL;
}

/* Make everything written durable and record the checkpoint. */
static toplu_status_t commit(toplu_job_t *j, toplu_error_t *err) {
  if (j->errors_fd >= 0) {
    toplu_status_t st = pl_file_sync(j->errors_fd, j->errors_path, err);
    if (st) return st;
  }
  j->st.errors_bytes = j->errors_len;
  return j->sink->ops->commit(j->sink, &j->st, err);
}

/* Append a chunk's errors and results (the writer thread; counters are advanced by the caller). */
static toplu_status_t write_chunk(toplu_job_t *j, pl_chunk_t *c, toplu_error_t *err) {
  if (j->errors_fd >= 0 && c->errors.len) {
    toplu_status_t st = pl_fd_write(j->errors_fd, c->errors.data, c->errors.len, j->errors_path, err);
    if (st) return st;
    j->errors_len += (int64_t)c->errors.len;
  }
  return j->sink->ops->write(j->sink, c, err);
}

/* Open the errors file: created empty, or cut to the checkpoint's length. */
static toplu_status_t open_errors(toplu_job_t *j, const pl_state_t *from, toplu_error_t *err) {
  if (!j->errors_path) return TOPLU_OK;
  char dir[PL_PATH_MAX];
  pl_path_dir(j->errors_path, dir, sizeof dir);
  if (!pl_is_dir(dir)) {
    toplu_status_t st = pl_mkdir_p(dir, err);
    if (st) return st;
  }
  if (!from) {
    j->errors_fd = open(j->errors_path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0666);
    j->errors_len = 0;
  } else {
    int64_t have = pl_file_size(j->errors_path);
    if (have < from->errors_bytes)
      return toplu_errorf(err, TOPLU_ERR_IO,
                          "--resume: the errors file %s holds %lld bytes, the checkpoint says %lld; run without "
                          "--resume to start over",
                          j->errors_path, (long long)(have < 0 ? 0 : have), (long long)from->errors_bytes);
    j->errors_fd = open(j->errors_path, O_WRONLY | O_CREAT | O_CLOEXEC, 0666);
    if (j->errors_fd >= 0 &&
        (ftruncate(j->errors_fd, (off_t)from->errors_bytes) != 0 || lseek(j->errors_fd, 0, SEEK_END) < 0))
      return toplu_errorf(err, TOPLU_ERR_IO, "%s: cannot cut to the checkpoint: %s", j->errors_path, strerror(errno));
    j->errors_len = from->errors_bytes;
  }
  if (j->errors_fd < 0) return toplu_errorf(err, TOPLU_ERR_IO, "--errors %s: cannot open: %s", j->errors_path, strerror(errno));
  return TOPLU_OK;
}

/* Snapshot the stats with the wall time so far (mu held). */
static void stats_locked(toplu_job_t *j, toplu_job_stats_t *s) {
  *s = j->stats;
  if (j->t0 > 0 && !j->stats.complete) s->wall_s = pl_now() - j->t0;
  s->rows_processed = j->st.processed - j->base_processed;
  s->rows_failed = j->st.failed - j->base_failed;
}

void toplu_job_get_stats(toplu_job_t *j, toplu_job_stats_t *s) {
  if (!j->sync_init) {
    *s = j->stats;
    return;
  }
  pthread_mutex_lock(&j->mu);
  stats_locked(j, s);
  pthread_mutex_unlock(&j->mu);
}

void toplu_job_cancel(toplu_job_t *j) {
  if (j) atomic_store(&j->cancel, 1);
}

/* Finish the output (rename into place) and report. */
static toplu_status_t finish(toplu_job_t *j, toplu_error_t *err) {
  double t = pl_now();
  toplu_status_t st = commit(j, err);
  if (!st) st = j->sink->ops->finish(j->sink, &j->st, err);
  if (!st && j->errors_fd >= 0) {
    close(j->errors_fd);
    j->errors_fd = -1;
  }
  pthread_mutex_lock(&j->mu);
  j->stats.busy_s[TOPLU_STAGE_WRITE] += pl_now() - t;
  if (!st) {
    j->stats.wall_s = j->t0 > 0 ? pl_now() - j->t0 : 0;
    j->stats.complete = 1;
  }
  pthread_mutex_unlock(&j->mu);
  return st;
}

/* The writer: write chunks in order, commit every checkpoint_s, show progress. */
static toplu_status_t writer_loop(toplu_job_t *j, pl_progress_t *pg, toplu_error_t *err) {
  double last_commit = pl_now();
  int dirty = 0;
  toplu_status_t st = TOPLU_OK;
  pthread_mutex_lock(&j->mu);
  while (j->next_write < j->c_end && !j->stop) {
    int slot = (int)(j->next_write % j->n_slots);
    if (j->slot_state[slot] != SLOT_POSTED) {
      struct timespec ts;
      clock_gettime(CLOCK_REALTIME, &ts);
      ts.tv_nsec += 100 * 1000 * 1000;
      if (ts.tv_nsec >= 1000000000L) {
        ts.tv_sec++;
        ts.tv_nsec -= 1000000000L;
      }
      pthread_cond_timedwait(&j->cv, &j->mu, &ts);
      toplu_job_stats_t s;
      stats_locked(j, &s);
      int64_t done = j->st.next_row - j->row_first;
      pthread_mutex_unlock(&j->mu);
      pl_progress_tick(pg, &s, done, 0);
      if (atomic_load(&j->cancel)) {
        pthread_mutex_lock(&j->mu);
        fail_locked(j, TOPLU_ERR_IO, "cancelled");
        break;
      }
      pthread_mutex_lock(&j->mu);
      continue;
    }
    pthread_mutex_unlock(&j->mu);
    double t0 = pl_now();
    pl_chunk_t *c = &j->slots[slot];
    st = write_chunk(j, c, err);
    dirty = 1;
    pthread_mutex_lock(&j->mu); /* the counters toplu_job_get_stats reads */
    if (!st) {
      j->st.processed += c->n_ok;
      j->st.failed += c->n_failed;
      j->st.next_row = c->first + c->count;
    }
    pthread_mutex_unlock(&j->mu);
    if (!st && (pl_now() - last_commit >= j->checkpoint_s || atomic_load(&j->cancel))) {
      st = commit(j, err);
      last_commit = pl_now();
      dirty = 0;
    }
    pl_chunk_clear(c);
    double t = pl_now() - t0;
    pthread_mutex_lock(&j->mu);
    j->stats.busy_s[TOPLU_STAGE_WRITE] += t;
    if (st) {
      fail_locked(j, st, err->message);
      break;
    }
    j->slot_state[slot] = SLOT_EMPTY;
    j->next_write++;
    pthread_cond_broadcast(&j->cv);
    if (atomic_load(&j->cancel)) {
      fail_locked(j, TOPLU_ERR_IO, "cancelled");
      break;
    }
  }
  int failed_elsewhere = j->fail && !st;
  pthread_mutex_unlock(&j->mu);
  /* Another stage failed (or cancel): keep what is written for --resume. */
  if (failed_elsewhere && dirty) {
    toplu_error_t e2;
    (void)commit(j, &e2);
  }
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

/* toplu_job_run with a non-NULL err. */
static toplu_status_t job_run(toplu_job_t *j, toplu_error_t *err) {
  if (!j) return toplu_errorf(err, TOPLU_ERR_INVALID_ARGUMENT, "NULL job");
  if (j->ran) return toplu_errorf(err, TOPLU_ERR_INVALID_ARGUMENT, "toplu_job_run: a job runs once");
  j->ran = 1;
  if (pthread_mutex_init(&j->mu, NULL) || pthread_cond_init(&j->cv, NULL))
    return toplu_errorf(err, TOPLU_ERR_OUT_OF_MEMORY, "cannot create a mutex");
  j->sync_init = 1;
  toplu_status_t st = TOPLU_OK;
  int found = 0;
  pl_state_t loaded = {0};
  if (j->resume) {
    if (j->have_loaded) {
      loaded = j->loaded;
      memset(&j->loaded, 0, sizeof j->loaded);
      found = j->loaded_found;
    } else if ((st = j->sink->ops->load_state(j->sink, &loaded, &found, err))) {
      return st;
    }
  }
  /* (The settings were compared with the checkpoint's in toplu_job_create.) */
  if (found && loaded.phase == PL_PHASE_COMPLETE) {
    j->st = loaded;
    j->base_processed = j->st.processed;
    j->base_failed = j->st.failed;
    j->stats.complete = 1;
    j->stats.rows_skipped = j->row_end - j->row_first;
    if (j->pf)
      fprintf(j->pf, "toplu run: %s is complete already (%lld rows: %lld with results, %lld failed); nothing to do\n",
              j->output, (long long)(j->row_end - j->row_first), (long long)j->st.processed, (long long)j->st.failed);
    return TOPLU_OK;
  }
  if (found && loaded.phase == PL_PHASE_FINISHING) {
    j->st = loaded;
    j->base_processed = j->st.processed;
    j->base_failed = j->st.failed;
    j->stats.rows_skipped = j->row_end - j->row_first;
    st = j->sink->ops->finish(j->sink, &j->st, err);
    if (!st) j->stats.complete = 1;
    return st;
  }
  if (found) {
    int64_t off = loaded.next_row - j->row_first;
    if (loaded.next_row < j->row_first || loaded.next_row > j->row_end || (off % j->batch && loaded.next_row != j->row_end)) {
      pl_state_free(&loaded);
      return toplu_errorf(err, TOPLU_ERR_PARSE, "--resume: the checkpoint of %s stops at row %lld, not a chunk boundary",
                          j->output, (long long)loaded.next_row);
    }
    if ((st = j->sink->ops->begin(j->sink, &loaded, err)) || (st = open_errors(j, &loaded, err))) {
      pl_state_free(&loaded);
      return st;
    }
    j->st = loaded;
  } else {
    if ((st = j->sink->ops->begin(j->sink, NULL, err)) || (st = open_errors(j, NULL, err))) return st;
    memset(&j->st, 0, sizeof j->st);
    j->st.phase = PL_PHASE_RUNNING;
    j->st.next_row = j->row_first;
  }
  json_decref(j->st.job);
  j->st.job = json_incref(j->desc);
  j->base_processed = j->st.processed;
  j->base_failed = j->st.failed;
  int64_t rows = j->row_end - j->row_first;
  int64_t c_start = (j->st.next_row - j->row_first + j->batch - 1) / j->batch;
  j->c_end = (rows + j->batch - 1) / j->batch;
  j->next_read = j->next_infer = j->next_post = j->next_write = c_start;
  j->stats.rows_skipped = j->st.next_row - j->row_first;
  j->n_slots = j->prefetch == 0 ? 1 : j->prefetch + j->infer_workers + 2;
  j->slots = calloc((size_t)j->n_slots, sizeof *j->slots);
  j->slot_state = calloc((size_t)j->n_slots, sizeof *j->slot_state);
  if (!j->slots || !j->slot_state) return toplu_errorf(err, TOPLU_ERR_OUT_OF_MEMORY, "out of memory for %d chunk slots", j->n_slots);

  pl_progress_t pg;
  pl_progress_init(&pg, j->pf, j->pmode, j->progress_s, rows, j->stats.rows_skipped);
  j->t0 = pl_now();
  int n_threads = j->workers + j->infer_workers + 1, started = 0;
  pthread_t *th = calloc((size_t)n_threads, sizeof *th);
  if (!th) return toplu_errorf(err, TOPLU_ERR_OUT_OF_MEMORY, "out of memory for %d threads", n_threads);
  for (int k = 0; k < n_threads && !st; k++) {
    void *(*fn)(void *) = k < j->workers ? reader_main : k < j->workers + j->infer_workers ? infer_main : post_main;
    if (pthread_create(&th[k], NULL, fn, j) != 0) st = toplu_errorf(err, TOPLU_ERR_OUT_OF_MEMORY, "cannot start a thread");
    else started++;
  }
  if (!st) st = writer_loop(j, &pg, err);
  pthread_mutex_lock(&j->mu);
  j->stop = 1;
  pthread_cond_broadcast(&j->cv);
  pthread_mutex_unlock(&j->mu);
  for (int k = 0; k < started; k++) pthread_join(th[k], NULL);
  free(th);
  for (int s = 0; s < j->n_slots; s++) pl_chunk_clear(&j->slots[s]);
  if (!st && j->fail) st = toplu_errorf(err, j->fail, "%s", j->fail_msg);
  if (!st) st = finish(j, err);
  toplu_job_stats_t s;
  toplu_job_get_stats(j, &s);
  pl_progress_tick(&pg, &s, j->st.next_row - j->row_first, 1);
  pl_progress_end(&pg);
  if (!st && j->pf) pl_progress_report(j->pf, &s, j->output);
  int64_t oom = (int64_t)atomic_load(&j->oom_rows);
  char why_oom[512] = "";
  if (oom > 0)
    snprintf(why_oom, sizeof why_oom,
             "%lld row%s failed for lack of memory even when run alone%s: the memory limit is too small for this model "
             "at --batch-size %lld (the chunk's rows are held while they run); run with a smaller --batch-size",
             (long long)oom, oom == 1 ? "" : "s",
             j->oom_batch > 1 ? " after their batch ran out of memory" : "", (long long)j->batch);
  if (!st && j->st.processed == 0 && j->row_end > j->row_first)
    st = toplu_errorf(err, TOPLU_ERR_INVALID_ARGUMENT, "every one of the %lld rows failed%s%s%s%s",
                      (long long)(j->row_end - j->row_first), oom > 0 ? ": " : "", why_oom,
                      j->errors_path ? "; see " : oom > 0 ? "" : " (give --errors FILE to see why)",
                      j->errors_path ? j->errors_path : "");
  else if (!st && oom > 0 && j->mf)
    fprintf(j->mf, "toplu run: warning: %s\n", why_oom);
  if (!st && j->row_end == j->row_first && j->mf)
    fprintf(j->mf, "toplu run: note: no rows%s; %s holds an empty result\n",
            j->rows_total ? " in this shard" : " (the inputs are empty)", j->output);
  return st;
}
