/* pipeline/job_setup.c - creating a job: everything checked before anything is written (see job.h). */
#include <errno.h>
#include <fcntl.h>
#include <fnmatch.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/error.h"
#include "runtime/model_internal.h"
#include "core/log.h"
#include "pipeline/autobatch.h"
#include "pipeline/buf.h"
#include "pipeline/identity.h"
#include "pipeline/job.h"
#include "toplu/tuner.h"
#include "toplu/profile.h"

/* Rows per chunk when the options leave it to the library and the job is not .npy into .npy. */
#define PL_DEFAULT_BATCH 16

void toplu_job_options_init(toplu_job_options_t *o) {
  if (!o) return;
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

void pl_job_log(toplu_job_t *j, toplu_log_level_t level, const char *fmt, ...) {
  if (!j->set.log) return;
  char msg[TOPLU_ERROR_MESSAGE_MAX];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  pthread_mutex_lock(&j->log_mu);
  toplu__logf(j->set.log, j->set.log_user, level, "%s", msg);
  pthread_mutex_unlock(&j->log_mu);
}

/* The job's session's toplu_log_fn where the caller gave the session no log of its own. */
static void job_session_log(void *user, toplu_log_level_t level, const char *message) {
  pl_job_log(user, level, "%s", message);
}

/* strdup that keeps NULL. */
static char *dup_or_null(const char *s) { return s ? strdup(s) : NULL; }

void toplu_job_destroy(toplu_job_t *j) {
  if (!j) return;
  pl_job_io_t *io = &j->io;
  if (j->ck.errors_fd >= 0) close(j->ck.errors_fd);
  if (io->lock_fd >= 0) close(io->lock_fd); /* releases the flock */
  if (io->errors_lock_fd >= 0) close(io->errors_lock_fd);
  for (int i = 0; io->src && i < io->n_src; i++) pl_source_destroy(io->src[i]);
  free(io->src);
  free(io->in_src);
  free(io->in_field);
  free(io->in_whole);
  free(io->whole); /* the tensors belong to their sources */
  free(io->pre);
  pl_buckets_free(&io->buckets);
  free(j->set.length_buckets);
  pl_post_free(&io->post);
  pl_sink_destroy(io->sink);
  toplu_session_destroy(io->session);
  toplu_model_destroy(io->model);
  json_decref(j->ck.desc);
  for (int k = 0; j->ring.slots && k < j->ring.n_slots; k++) pl_chunk_clear(&j->ring.slots[k]);
  free(j->ring.slots);
  if (io->pool_init) pl_pool_destroy(&io->pool);
  free(j->ring.state);
  pl_state_free(&j->ck.loaded);
  pl_state_free(&j->ck.st);
  if (j->ring.init) {
    pthread_mutex_destroy(&j->ring.mu);
    pthread_cond_destroy(&j->ring.cv);
  }
  pthread_mutex_destroy(&j->log_mu);
  free(j->set.model_path);
  free(j->set.output);
  free(j->set.errors_path);
  free(j->set.labels_path);
  free(j->set.tune_path);
  free(j->set.profile_path);
  for (int k = 0; j->prof_shapes && k < io->n_in; k++) toplu_tensor_free(&j->prof_shapes[k]);
  free(j->prof_shapes);
  free(j->fail_fast_line);
  free(j);
}

/* ---- sources ---- */

/* The model's inputs, for a message: "x float32 [N, 3], y int64 [N]". */
static void list_inputs(const toplu_model_t *m, char *buf, size_t size) {
  size_t n = 0;
  buf[0] = '\0';
  for (int i = 0; i < toplu_model_input_count(m) && n < size; i++) {
    const toplu_value_info_t *v = toplu_model_input(m, i);
    char dims[256];
    n += (size_t)snprintf(buf + n, size - n, "%s%s %s %s", i ? ", " : "", v->name, toplu_dtype_name(v->dtype),
                          pl_format_info_dims(v, dims, sizeof dims));
  }
}

/* "input 'a' (a.npy)" for the source feeding model input i. */
static void name_input(const toplu_job_t *j, int src, char *buf, size_t size) {
  const pl_source_t *s = j->io.src[src];
  snprintf(buf, size, "input '%s' (%s)", toplu_model_input(j->io.model, s->field_input[0])->name, s->path);
}

/* Open the sources of the input specs and map every model input to one. */
toplu_status_t pl_job_open_sources(toplu_job_t *j, const toplu_job_options_t *o, toplu_error_t *err) {
  pl_job_io_t *io = &j->io;
  io->src = calloc((size_t)o->n_inputs + 1, sizeof *io->src);
  io->in_src = malloc(sizeof(int) * (size_t)(io->n_in + 1));
  io->in_field = malloc(sizeof(int) * (size_t)(io->n_in + 1));
  io->in_whole = calloc((size_t)io->n_in + 1, sizeof(int));
  io->whole = calloc((size_t)io->n_in + 1, sizeof *io->whole);
  if (!io->src || !io->in_src || !io->in_field || !io->in_whole || !io->whole)
    return toplu__errorf(err, TOPLU_ERR_OUT_OF_MEMORY, "out of memory for the list of %d sources", o->n_inputs);
  for (int i = 0; i < io->n_in; i++) io->in_src[i] = -1;
  char inputs[1024];
  for (int k = 0; k < o->n_inputs; k++) {
    const char *spec = o->inputs[k];
    if (!spec || !*spec) return toplu__errorf(err, TOPLU_ERR_INVALID_ARGUMENT, "inputs[%d] is empty", k);
    int in = toplu_model_input_for_spec(io->model, spec);
    const char *path = in >= 0 ? spec + strlen(toplu_model_input(io->model, in)->name) + 1 : spec;
    if (!*path) return toplu__errorf(err, TOPLU_ERR_INVALID_ARGUMENT, "input '%s': no source after '=' in '%s'",
                                    toplu_model_input(io->model, in)->name, spec);
    if (in < 0) {
      const char *eq = strchr(spec, '=');
      const char *slash = strchr(spec, '/');
      if (eq && (!slash || slash > eq) && !pl_exists(spec)) {
        list_inputs(io->model, inputs, sizeof inputs);
        return toplu__errorf(err, TOPLU_ERR_NOT_FOUND, "'%s': the model has no input '%.*s' (its inputs: %s)", spec,
                            (int)(eq - spec), spec, inputs);
      }
    }
    toplu_status_t st = pl_source_open(path, io->model, in, &j->set.text, &io->src[io->n_src], err);
    if (st) return st;
    pl_source_t *s = io->src[io->n_src++];
    s->pool = io->pool_init ? &io->pool : NULL;
    if (s->note[0]) pl_job_log(j, s->note_warning ? TOPLU_LOG_WARNING : TOPLU_LOG_NOTE, "%s", s->note);
    for (int f = 0; f < s->n_fields; f++) {
      int mi = s->field_input[f];
      if (io->in_src[mi] >= 0)
        return toplu__errorf(err, TOPLU_ERR_INVALID_ARGUMENT,
                            "input '%s' is given twice (%s and %s); if a shell expanded a glob into these paths, "
                            "quote it ('dir/*.jpg')",
                            toplu_model_input(io->model, mi)->name, io->src[io->in_src[mi]]->path, s->path);
      io->in_src[mi] = io->n_src - 1;
      io->in_field[mi] = f;
      if (s->whole_t) {
        io->in_whole[mi] = 1;
        io->whole[mi] = *s->whole_t;
        int64_t bad = j->set.allow_nonfinite ? -1 : pl_first_nonfinite(s->whole_t);
        if (bad >= 0)
          return toplu__errorf(err, TOPLU_ERR_INVALID_ARGUMENT,
                              "input '%s' (%s) contains %s at element %lld; it is passed whole to every batch, so "
                              "every row would fail (allow_nonfinite passes NaN and Inf through)",
                              toplu_model_input(io->model, mi)->name, s->path,
                              isnan(pl_elem_get(s->whole_t->dtype, s->whole_t->data, bad)) ? "NaN" : "Inf",
                              (long long)bad);
      }
    }
  }
  for (int i = 0; i < io->n_in; i++)
    if (io->in_src[i] < 0) {
      const toplu_value_info_t *v = toplu_model_input(io->model, i);
      char dims[256];
      return toplu__errorf(err, TOPLU_ERR_INVALID_ARGUMENT, "missing input '%s' (%s %s): no source in inputs names it",
                          v->name, toplu_dtype_name(v->dtype), pl_format_info_dims(v, dims, sizeof dims));
    }
  /* The rows: every source but the whole ones has the same number. */
  int first = -1;
  for (int k = 0; k < io->n_src; k++) {
    if (io->src[k]->whole_t) continue;
    if (first < 0) {
      first = k;
      continue;
    }
    if (io->src[k]->rows != io->src[first]->rows) {
      char a[PL_PATH_MAX + 64], b[PL_PATH_MAX + 64];
      name_input(j, k, a, sizeof a);
      name_input(j, first, b, sizeof b);
      return toplu__errorf(err, TOPLU_ERR_SHAPE,
                          "%s has %lld rows, %s has %lld: every input needs the same number of rows (dim 0, the "
                          "batch); the sources differ in length",
                          a, (long long)io->src[k]->rows, b, (long long)io->src[first]->rows);
    }
  }
  io->no_rows = first < 0;
  io->rows_total = first < 0 ? 1 : io->src[first]->rows;
  return TOPLU_OK;
}

/* Parse the preprocessing once and bind a copy to every input. */
toplu_status_t pl_job_setup_pre(toplu_job_t *j, const char *spec, toplu_error_t *err) {
  pl_job_io_t *io = &j->io;
  pl_pre_t base;
  toplu_status_t st = pl_pre_parse(spec, &base, err);
  if (st) return st;
  io->pre = calloc((size_t)io->n_in + 1, sizeof *io->pre);
  if (!io->pre)
    return toplu__errorf(err, TOPLU_ERR_OUT_OF_MEMORY, "out of memory for the preprocessing of %d inputs", io->n_in);
  int any_image = 0;
  for (int i = 0; i < io->n_in; i++) any_image |= io->src[io->in_src[i]]->is_image;
  for (int i = 0; i < io->n_in; i++) {
    pl_source_t *s = io->src[io->in_src[i]];
    io->pre[i] = base;
    if (!s->is_image && any_image) {
      /* beside image inputs, the preprocessing is the images': scale=1/255 divided a CSV input's values too (exit 0,
       * without a word; a fresh user's finding of 2026-12-06), as dtype would have applied */
      io->pre[i].any_image_op = 0;
      io->pre[i].has_scale = 0;
      io->pre[i].scale = 1.0;
      io->pre[i].dtype = TOPLU_DTYPE_UNDEFINED;
    }
    if ((st = pl_pre_bind(&io->pre[i], toplu_model_input(io->model, i), s->is_image, err))) return st;
    if (s->is_image) pl_pre_hint(&io->pre[i], &s->hint_w, &s->hint_h);
    io->pre[i].pool = io->pool_init ? &io->pool : NULL;
    if (s->is_image) s->max_pixels = io->pre[i].max_pixels = j->set.max_image_pixels;
  }
  return TOPLU_OK;
}

/* ---- nothing written over what is read ---- */

/* A path the job writes or reads, for check_clobber. */
typedef struct io_path {
  char path[PL_PATH_MAX];  /* as given */
  char canon[PL_PATH_MAX]; /* pl_path_canon */
  const char *what;        /* "output", "errors file", "the input", ... */
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
  const pl_job_io_t *io = &j->io;
  const pl_job_settings_t *set = &j->set;
  io_path_t *w = calloc(16, sizeof *w), *r = calloc((size_t)io->n_src + 4, sizeof *r);
  int nw = 0, nr = 0, first_given = 0;
  toplu_status_t st = w && r ? TOPLU_OK : toplu__errorf(err, TOPLU_ERR_OUT_OF_MEMORY, "out of memory checking paths");
  int dir_out = !strcmp(pl_sink_kind(set->output), "npy");
  char tmp[PL_PATH_MAX];
  int bad = 0;
  if (!st) st = pl_output_name_check(set->output, dir_out, err);
  /* a directory's files are named after the model's outputs: NAME.npy, written as .NAME.npy.part */
  for (int k = 0; !st && dir_out && k < toplu_model_output_count(io->model); k++) {
    char stem[PL_PATH_MAX], file[PL_PATH_MAX + 16];
    pl_sink_output_name(io->model, k, 1, stem, sizeof stem);
    snprintf(file, sizeof file, "%s/%s.npy", set->output, stem);
    st = pl_hidden_name_check(file, ".part", err);
    if (st)
      toplu__error_prefix(err, "model output %d, written as its name + .npy in the output directory: ", k);
  }
  if (!st) {
    bad |= io_set(&w[nw++], set->output, "output", dir_out ? IO_DIR : IO_FILE);
    if (!dir_out) {
      bad |= pl_path_hidden(set->output, ".part", tmp, sizeof tmp) || io_set(&w[nw++], tmp, "the output's part file", IO_FILE);
      bad |= pl_path_hidden(set->output, ".toplu-state", tmp, sizeof tmp) ||
             io_set(&w[nw++], tmp, "the output's checkpoint", IO_FILE);
    }
    bad |= pl_path_hidden(set->output, ".toplu-lock", tmp, sizeof tmp) ||
           io_set(&w[nw++], tmp, "the output's lock file", IO_FILE);
    if (!strcmp(pl_sink_kind(set->output), "sqlite")) { /* SQLite's journals beside the database and its part file */
      static const char *const sfx[] = {"-wal", "-shm", "-journal"};
      char part[PL_PATH_MAX];
      bad |= pl_path_hidden(set->output, ".part", part, sizeof part);
      for (int k = 0; k < 3 && !bad; k++) {
        bad |= snprintf(tmp, sizeof tmp, "%s%s", set->output, sfx[k]) >= (int)sizeof tmp ||
               io_set(&w[nw++], tmp, "the output's journal", IO_FILE);
        bad |= snprintf(tmp, sizeof tmp, "%s%s", part, sfx[k]) >= (int)sizeof tmp ||
               io_set(&w[nw++], tmp, "the output's part file's journal", IO_FILE);
      }
    }
    first_given = nw; /* the files the job's options name (the others are derived from the output's path) */
    if (set->errors_path) bad |= io_set(&w[nw++], set->errors_path, "errors file", IO_FILE);
    if (set->profile_path) bad |= io_set(&w[nw++], set->profile_path, "the profile trace", IO_FILE);
    bad |= io_set(&r[nr++], set->model_path, "the model", IO_FILE);
    if (set->labels_path) bad |= io_set(&r[nr++], set->labels_path, "the labels file", IO_FILE);
    if (set->tune_path) bad |= io_set(&r[nr++], set->tune_path, "the tune file", IO_FILE);
    for (int i = 0; i < io->n_src; i++) {
      const pl_source_t *s = io->src[i];
      bad |= io_set(&r[nr++], s->path, s->is_dir ? "the input directory" : s->is_glob ? "the input glob" : "the input",
                    s->is_dir ? IO_DIR : s->is_glob ? IO_GLOB : IO_FILE);
    }
    if (bad)
      st = toplu__errorf(err, TOPLU_ERR_INVALID_ARGUMENT, "output %s or an input: path longer than %d bytes", set->output,
                        PL_PATH_MAX - 1);
  }
  /* A directory output (.npy) is the job's own: ids.txt, its part file, the checkpoint and one file per
   * output tensor live there, so a file the job also writes cannot lie inside it (the errors file at
   * DIR/ids.txt had its lines overwritten by the ids, exit 0). */
  for (int a = first_given; !st && dir_out && a < nw; a++)
    if (w[a].kind == IO_FILE && (pl_path_inside(w[a].canon, w[0].canon) || same_file(&w[a], &w[0])))
      st = toplu__errorf(err, TOPLU_ERR_INVALID_ARGUMENT,
                        "%s %s lies inside the output directory %s, which holds the job's own files (ids.txt, one "
                        ".npy per output, part files, the checkpoint); write it elsewhere",
                        w[a].what, w[a].path, set->output);
  for (int a = 0; !st && a < nw; a++) {
    for (int b = 0; !st && b < nr; b++) {
      const char *how = clobbers(&w[a], &r[b]);
      if (how)
        st = toplu__errorf(err, TOPLU_ERR_INVALID_ARGUMENT, "%s %s %s %s %s: it would be overwritten; write elsewhere",
                          w[a].what, w[a].path, how, r[b].what, r[b].path);
    }
    for (int b = a + 1; !st && b < nw; b++)
      if (!strcmp(w[a].canon, w[b].canon) || (w[a].kind == IO_FILE && w[b].kind == IO_FILE && same_file(&w[a], &w[b])))
        st = toplu__errorf(err, TOPLU_ERR_INVALID_ARGUMENT, "%s %s and %s %s are the same file", w[a].what, w[a].path,
                          w[b].what, w[b].path);
  }
  free(w);
  free(r);
  return st;
}

/* A FIFO, device or socket as the output or the errors file would block
 * (opening it waits for the other end) or never be a file: refused before
 * anything opens either (the clobber and overwrite checks read them).  The
 * errors file's folder and writability are checked later, once the
 * clobber check has ruled out that it is one of the job's inputs
 * (check_errors_location). */
static toplu_status_t check_output_kind(const char *out, const char *errors, toplu_error_t *err) {
  struct stat sb;
  if (stat(out, &sb) == 0 && !S_ISREG(sb.st_mode) && !S_ISDIR(sb.st_mode))
    return toplu__errorf(err, TOPLU_ERR_INVALID_ARGUMENT,
                        "output %s is not a regular file or a folder (a FIFO, device or socket); name a file or folder",
                        out);
  if (errors && stat(errors, &sb) == 0 && !S_ISREG(sb.st_mode) && !S_ISDIR(sb.st_mode))
    return toplu__errorf(err, TOPLU_ERR_INVALID_ARGUMENT,
                        "errors file %s is not a regular file (a FIFO, device or socket); name a file", errors);
  return TOPLU_OK;
}

/* Take the output's lock (.NAME.toplu-lock beside it, flock: pl_lock_take),
 * so that two jobs (or a job and a merge) never write one output at once;
 * held until toplu_job_destroy. */
static toplu_status_t take_lock(toplu_job_t *j, toplu_error_t *err) {
  pl_job_io_t *io = &j->io;
  int e = 0;
  toplu_status_t st = pl_lock_take(j->set.output, "output", io->lock_path, sizeof io->lock_path, &io->lock_fd, &e, err);
  if (!st && e)
    pl_job_log(j, TOPLU_LOG_WARNING, "cannot lock %s (%s): nothing stops a second job from writing %s at once",
               io->lock_path, strerror(e), j->set.output);
  return st;
}

/* A .npy output directory that exists must be one the process can write
 * in, found when the job is made: its lock lies beside it, so taking the
 * lock proves nothing about the folder itself (a read-only mount failed only
 * when the run began, "cannot remove DIR/.toplu-state"). */
static toplu_status_t check_output_dir_writable(const toplu_job_t *j, toplu_error_t *err) {
  const char *out = j->set.output;
  if (strcmp(pl_sink_kind(out), "npy") || !pl_is_dir(out)) return TOPLU_OK;
  char probe[PL_PATH_MAX];
  if (snprintf(probe, sizeof probe, "%s/.toplu-probe-%ld", out, (long)getpid()) >= (int)sizeof probe) return TOPLU_OK;
  int fd = open(probe, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0666);
  if (fd < 0)
    return toplu__errorf(err, TOPLU_ERR_IO, "output directory %s: cannot write in it: %s", out, strerror(errno));
  close(fd);
  unlink(probe);
  return TOPLU_OK;
}

/* 1 when the output at path (a file or a .npy folder) or its part file or
 * checkpoint is there: a job's output that still means something. */
static int output_present(const char *path) {
  char h[PL_PATH_MAX];
  if (pl_exists(path)) return 1;
  return (!pl_path_hidden(path, ".toplu-state", h, sizeof h) && pl_exists(h)) ||
         (!pl_path_hidden(path, ".part", h, sizeof h) && pl_exists(h));
}

/* Take the errors file's lock (.NAME.toplu-lock beside it), so that two
 * jobs (shards given one errors file) never write it at once, and check its
 * owner: the lock file holds the canonical path of the output of the job
 * that last wrote the errors file.  An errors file that holds records
 * (not empty) of another job whose output is still there is refused, fresh
 * start or resume (starting would empty it; resuming would cut it to this
 * job's length), unless overwrite on a fresh start.  The owner is recorded
 * by errors_lock_own once every check has passed. */
static toplu_status_t take_errors_lock(toplu_job_t *j, int overwrite, toplu_error_t *err) {
  pl_job_io_t *io = &j->io;
  const char *path = j->set.errors_path;
  if (!path) return TOPLU_OK;
  int e = 0;
  toplu_status_t st =
      pl_lock_take(path, "errors file", io->errors_lock_path, sizeof io->errors_lock_path, &io->errors_lock_fd, &e, err);
  if (st) return st;
  if (e)
    pl_job_log(j, TOPLU_LOG_WARNING, "cannot lock %s (%s): nothing stops a second job from writing %s at once",
               io->errors_lock_path, strerror(e), path);
  char owner[PL_PATH_MAX], mine[PL_PATH_MAX];
  ssize_t n = pread(io->errors_lock_fd, owner, sizeof owner - 1, 0);
  owner[n > 0 ? n : 0] = '\0';
  if (pl_path_canon(j->set.output, mine, sizeof mine)) snprintf(mine, sizeof mine, "%s", j->set.output);
  if (!owner[0] || !strcmp(owner, mine) || (overwrite && !j->set.resume) || pl_file_size(path) <= 0 ||
      !output_present(owner))
    return TOPLU_OK;
  return toplu__errorf(err, TOPLU_ERR_INVALID_ARGUMENT,
                      "errors file %s holds the records of another job, the one writing %s; give each job (each "
                      "shard) its own errors file, or remove it%s",
                      path, owner, j->set.resume ? "" : " or set overwrite to replace it");
}

/* Record this job's output as the errors file's owner (in its lock file). */
static void errors_lock_own(toplu_job_t *j) {
  pl_job_io_t *io = &j->io;
  char mine[PL_PATH_MAX];
  if (io->errors_lock_fd < 0) return;
  if (pl_path_canon(j->set.output, mine, sizeof mine)) snprintf(mine, sizeof mine, "%s", j->set.output);
  size_t len = strlen(mine);
  if (ftruncate(io->errors_lock_fd, 0) != 0 || pwrite(io->errors_lock_fd, mine, len, 0) != (ssize_t)len)
    pl_job_log(j, TOPLU_LOG_WARNING, "cannot record the errors file's owner in %s: %s", io->errors_lock_path,
               strerror(errno));
}

/* ---- what decides the output's bytes ---- */

/* The settings that decide the output's bytes, for the checkpoint: the
 * identities of the model, sources and labels (see pipeline/identity.h),
 * the row counts, batch size, pre- and postprocessing, errors file and
 * shard.  Compared on resume (pl_job_diff) and by toplu_job_merge.  Keys are
 * kept in insertion order (JSON_PRESERVE_ORDER when dumped), so the
 * checkpoint's text does not depend on jansson's hash seed. */
static toplu_status_t describe_job(toplu_job_t *j, toplu_error_t *err) {
  pl_job_io_t *io = &j->io;
  char why[PL_PATH_MAX + 256];
  json_t *d = json_object(), *ins = json_array();
  json_t *model = pl_identity_model(j->set.model_path, why, sizeof why);
  if (!d || !ins || !model) {
    json_decref(d);
    json_decref(ins);
    json_decref(model);
    return model ? toplu__errorf(err, TOPLU_ERR_OUT_OF_MEMORY, "out of memory describing the job")
                 : toplu__errorf(err, TOPLU_ERR_IO, "the model: %s", why);
  }
  json_object_set_new(d, "model", model);
  pl_buf_t feeds = {0}, pre = {0};
  for (int k = 0; k < io->n_src; k++) {
    const pl_source_t *src = io->src[k];
    feeds.len = 0;
    for (int f = 0; f < src->n_fields; f++)
      pl_buf_printf(&feeds, "%s%s", f ? "," : "", toplu_model_input(io->model, src->field_input[f])->name);
    json_t *id = pl_source_identity(src, why, sizeof why), *e = json_object();
    if (!id || !e || feeds.oom) {
      json_decref(id);
      json_decref(e);
      json_decref(d);
      json_decref(ins);
      pl_buf_free(&feeds);
      return toplu__errorf(err, TOPLU_ERR_IO, "input %s: %s", src->path, feeds.oom ? "out of memory" : why);
    }
    json_object_set_new(e, "feeds", json_string(feeds.data ? feeds.data : ""));
    json_object_set_new(e, "kind", json_string(src->ops->kind));
    json_object_set_new(e, "source", id);
    json_array_append_new(ins, e);
  }
  pl_buf_free(&feeds);
  char one[1024], buf[PL_PATH_MAX];
  for (int i = 0; i < io->n_in; i++) {
    pl_pre_describe(&io->pre[i], one, sizeof one);
    pl_buf_printf(&pre, "%s%s", i ? ";" : "", one);
  }
  json_object_set_new(d, "inputs", ins);
  json_object_set_new(d, "rows", json_integer(io->rows_total));
  if (pl_path_canon(j->set.output, buf, sizeof buf)) snprintf(buf, sizeof buf, "%s", j->set.output);
  json_object_set_new(d, "output", json_string(buf));
  json_object_set_new(d, "batch_size", json_integer(io->batch));
  json_object_set_new(d, "preprocess", json_string(pre.data ? pre.data : ""));
  int pre_oom = pre.oom;
  pl_buf_free(&pre);
  pl_post_describe(&io->post, buf, sizeof buf);
  json_object_set_new(d, "postprocess", json_string(buf));
  /* text sinks (JSONL, CSV, SQLite's JSON): bools as true/false and -0.0 since 2026-12-06 (0/1 and -0 before): a
   * job begun by an older toplu is not resumed or merged into one file of both (a fresh user's finding) */
  if (io->sink && strcmp(io->sink->ops->kind, "npy"))
    json_object_set_new(d, "text_format", json_string("bools true/false, -0.0"));
  /* only when set: descriptions of jobs without it stay as they were */
  if (j->set.allow_nonfinite) json_object_set_new(d, "allow_nonfinite", json_true());
  if (j->set.qdq_int8_all) json_object_set_new(d, "qdq_int8_all", json_true());
  if (j->set.length_buckets) json_object_set_new(d, "length_buckets", json_string(j->set.length_buckets));
  if (j->set.labels_path) {
    json_t *lab = pl_identity_file(j->set.labels_path, why, sizeof why);
    if (!lab) {
      json_decref(d);
      return toplu__errorf(err, TOPLU_ERR_IO, "labels: %s", why);
    }
    json_object_set_new(d, "labels", lab);
  } else {
    json_object_set_new(d, "labels", json_null());
  }
  int any_csv = 0;
  for (int k = 0; k < io->n_src; k++) any_csv |= !strcmp(io->src[k]->ops->kind, "csv");
  static const char *const modes[] = {"auto", "yes", "no"};
  json_object_set_new(d, "csv_header", json_string(any_csv ? modes[j->set.text.csv_header] : ""));
  if (!j->set.errors_path) buf[0] = '\0';
  else if (pl_path_canon(j->set.errors_path, buf, sizeof buf)) snprintf(buf, sizeof buf, "%s", j->set.errors_path);
  json_object_set_new(d, "errors", json_string(buf));
  snprintf(buf, sizeof buf, "%lld/%lld", (long long)io->shard.index, (long long)io->shard.count);
  json_object_set_new(d, "shard", json_string(buf));
  json_object_set_new(d, "row_first", json_integer(io->row_first));
  json_object_set_new(d, "row_end", json_integer(io->row_end));
  if (pre_oom) {
    json_decref(d);
    return toplu__errorf(err, TOPLU_ERR_OUT_OF_MEMORY, "out of memory describing the job's preprocessing");
  }
  j->ck.desc = d;
  return TOPLU_OK;
}

/* resume: refuse a checkpoint of other settings (before anything is written). */
static toplu_status_t check_resume(toplu_job_t *j, toplu_error_t *err) {
  if (!j->set.resume || !j->ck.loaded_found) return TOPLU_OK;
  const char *out = j->set.output;
  char why[2048], where[PL_PATH_MAX];
  if (pl_path_hidden(out, ".toplu-state", where, sizeof where)) snprintf(where, sizeof where, "%s", out);
  if (!strcmp(j->io.sink->ops->kind, "npy")) pl_path_join(out, ".toplu-state", where, sizeof where);
  else if (!strcmp(j->io.sink->ops->kind, "sqlite")) snprintf(where, sizeof where, "in %s", out);
  int r = pl_job_diff(j->ck.loaded.job, j->ck.desc, 0, why, sizeof why);
  if (r == 2)
    return toplu__errorf(err, TOPLU_ERR_INVALID_ARGUMENT,
                        "resume: the checkpoint %s does not record the job's inputs the way this toplu does (an "
                        "older version wrote it); start over without resume",
                        where);
  if (r)
    return toplu__errorf(err, TOPLU_ERR_INVALID_ARGUMENT,
                        "resume: the checkpoint %s is for another job: %s; start over without resume", where, why);
  return TOPLU_OK;
}

/* ---- the batch size ---- */

/* A preprocessed first row of the shard (for the batch-size sweep). */
static toplu_status_t sample_row(toplu_job_t *j, toplu_tensor_t *row, toplu_error_t *err) {
  pl_job_io_t *io = &j->io;
  int64_t limit = io->row_end - io->row_first < 16 ? io->row_end - io->row_first : 16;
  for (int64_t r = 0; r < limit; r++) {
    pl_chunk_t c;
    double a, b;
    int64_t saved = io->batch;
    io->batch = 1;
    toplu_status_t st = pl_job_read_chunk(j, &c, r, &a, &b, err);
    io->batch = saved;
    if (!st && c.n_batches == 1) {
      for (int i = 0; i < io->n_in; i++) {
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
  return toplu__errorf(err, TOPLU_ERR_INVALID_ARGUMENT,
                      "batch_size auto: none of the first %lld rows could be read to time the model", (long long)limit);
}

/* Batch size from the tuner's sweep (toplu_tune_model) on the job's first row's shapes; 0 on failure. */
static int64_t tune_now(toplu_job_t *j, const toplu_tensor_t *row, char *how, size_t how_size) {
  pl_job_io_t *io = &j->io;
  toplu_input_shape_t *shapes = calloc((size_t)io->n_in + 1, sizeof *shapes);
  if (!shapes) return 0;
  for (int i = 0; i < io->n_in; i++) {
    shapes[i].name = toplu_model_input(io->model, i)->name;
    shapes[i].ndim = row[i].ndim + 1;
    shapes[i].dims[0] = 1;
    memcpy(shapes[i].dims + 1, row[i].dims, sizeof(int64_t) * (size_t)row[i].ndim);
  }
  toplu_tune_options_t to;
  toplu_tune_options_init(&to);
  to.shapes = shapes;
  to.n_shapes = io->n_in;
  to.threads = j->set.threads;
  to.max_batch = 64;
  to.max_seconds_per_batch = 1.0;
  to.max_seconds = 15.0;
  toplu_tune_result_t *r = NULL;
  toplu_error_t err;
  int64_t best = 0;
  if (toplu_tune_model(io->model, &to, &r, &err) == TOPLU_OK && r && r->recommended_batch_size > 0) {
    best = r->recommended_batch_size;
    size_t n = (size_t)snprintf(how, how_size, "the tuner's sweep:");
    for (int k = 0; k < r->n_rows && n < how_size; k++)
      n += (size_t)snprintf(how + n, how_size - n, " %lld:%.0f/s", (long long)r->rows[k].batch_size,
                            r->rows[k].throughput);
  } else {
    snprintf(how, how_size, "the tuner failed (%.900s)", r ? r->stop_reason : err.message);
  }
  toplu_tune_result_free(r);
  free(shapes);
  return best;
}

/* Resolve TOPLU_JOB_BATCH_AUTO: the checkpoint being resumed, the tune file,
 * else a short tune of the first row's shapes (the tuner's sweep; this
 * module's own sweep if that fails). */
static toplu_status_t auto_batch(toplu_job_t *j, toplu_error_t *err) {
  pl_job_io_t *io = &j->io;
  json_t *saved = json_object_get(j->ck.loaded.job, "batch_size");
  if (j->ck.loaded_found && json_is_integer(saved) && json_integer_value(saved) >= 1) {
    io->batch = (int64_t)json_integer_value(saved);
    pl_job_log(j, TOPLU_LOG_NOTE, "batch_size auto: %lld, from the checkpoint being resumed", (long long)io->batch);
    return TOPLU_OK;
  }
  for (int i = 0; i < io->n_in; i++)
    if (io->in_whole[i])
      return toplu__errorf(err, TOPLU_ERR_INVALID_ARGUMENT,
                          "batch_size auto: input '%s' is passed whole to every batch, so the sweep cannot time it; "
                          "give a batch size",
                          toplu_model_input(io->model, i)->name);
  const char *tune_file = j->set.tune_path;
  if (tune_file) {
    /* a tune result is only worth anything for the model it measured */
    int checked = 0;
    toplu_status_t st = toplu_tune_result_matches_model(tune_file, j->set.model_path, &checked, err);
    if (st) return toplu__error_prefix(err, "tune_file %s", tune_file), st;
    if (!checked)
      pl_job_log(j, TOPLU_LOG_NOTE, "%s does not record which model it measured; using it as given", tune_file);
    st = pl_tune_file_batch(tune_file, &io->batch, err);
    if (!st) pl_job_log(j, TOPLU_LOG_NOTE, "batch_size auto: %lld, from %s", (long long)io->batch, tune_file);
    return st;
  }
  if (io->row_end <= io->row_first) {
    io->batch = 1;
    return TOPLU_OK;
  }
  toplu_tensor_t *row = calloc((size_t)io->n_in + 1, sizeof *row);
  if (!row) return toplu__errorf(err, TOPLU_ERR_OUT_OF_MEMORY, "out of memory for a sample row of %d inputs", io->n_in);
  toplu_status_t st = sample_row(j, row, err);
  char how[1024] = "";
  if (!st && (io->batch = tune_now(j, row, how, sizeof how)) > 0) {
    pl_job_log(j, TOPLU_LOG_NOTE, "batch_size auto: %lld (no tune result: ran %s)", (long long)io->batch, how);
  } else if (!st) {
    char how2[512] = "";
    st = pl_sweep_batch(io->session, row, io->n_in, io->n_out, 64, 10.0, &io->batch, how2, sizeof how2, err);
    if (!st)
      pl_job_log(j, TOPLU_LOG_NOTE, "batch_size auto: %lld (%s; timed the model: %s rows/s)", (long long)io->batch,
                 how, how2);
  }
  for (int i = 0; i < io->n_in; i++) toplu_tensor_free(&row[i]);
  free(row);
  return st;
}

/* 1 when every source is a .npy file (the shapes of every batch are known before reading). */
static int all_npy(const toplu_job_t *j) {
  for (int k = 0; k < j->io.n_src; k++)
    if (strcmp(j->io.src[k]->ops->kind, "npy")) return 0;
  return 1;
}


/* The batch size from the options (options.batch_size); auto is resolved later. */
static toplu_status_t resolve_batch(toplu_job_t *j, int64_t asked, toplu_error_t *err) {
  pl_job_io_t *io = &j->io;
  int64_t rows = io->row_end - io->row_first, asked0 = asked;
  if (asked == TOPLU_JOB_BATCH_DEFAULT && toplu_model_fixed_batch_size(io->model) > 1)
    asked = toplu_model_fixed_batch_size(io->model); /* a static batch in the file: its size, as exported */
  else if (asked == TOPLU_JOB_BATCH_DEFAULT)
    asked = all_npy(j) && !strcmp(io->sink->ops->kind, "npy") ? TOPLU_JOB_BATCH_ALL : PL_DEFAULT_BATCH;
  if (io->no_rows) {
    /* every input is one tensor, run once */
    const toplu_value_info_t *v = NULL;
    for (int i = 0; i < io->n_in && !v; i++)
      if (toplu_model_input(io->model, i)->ndim >= 1) v = toplu_model_input(io->model, i);
    if (io->n_in == 0 || v) {
      /* a model without inputs, or tensors as the model fixes them (without a
       * batch dim, whose rows are one batch; or batch 1 given as declared) */
      if (v && !pl_model_has_batch(io->model) && asked >= 1 && asked < v->dims[0]) {
        char dims[256];
        return toplu__errorf(err, TOPLU_ERR_INVALID_ARGUMENT,
                            "batch_size %lld: the model fixes dim 0 of its inputs ('%s' is %s), so each input is "
                            "taken whole, as one row of one batch (its %lld entries along dim 0 cannot be split); use "
                            "the default batch_size, or one of at least %lld",
                            (long long)asked, v->name, pl_format_info_dims(v, dims, sizeof dims),
                            (long long)v->dims[0], (long long)v->dims[0]);
      }
      io->batch = 1;
      return TOPLU_OK;
    }
    if (asked != TOPLU_JOB_BATCH_ALL) {
      return toplu__errorf(err, TOPLU_ERR_INVALID_ARGUMENT,
                          "input '%s' (%s) is a scalar and no input has rows: there is nothing for batch_size to "
                          "split along dim 0; leave batch_size at its default (one run on the inputs as given)",
                          toplu_model_input(io->model, 0)->name, io->src[io->in_src[0]]->path);
    }
  }
  if (toplu_model_fixed_batch(io->model)) {
    /* batch 1 fixed in the file, some inputs rows and some one tensor (an
     * axes or shape input given as declared): the session batches only when
     * every input's dim 0 is the batch, so the rows run one at a time */
    int whole = -1;
    for (int i = 0; i < io->n_in && whole < 0; i++)
      if (io->in_whole[i] && toplu_model_input(io->model, i)->ndim >= 1) whole = i;
    if (whole >= 0) {
      if (asked0 > 1)
        return toplu__errorf(err, TOPLU_ERR_INVALID_ARGUMENT,
                            "batch_size %lld: the model fixes batch 1 and input '%s' is one tensor given to every run, "
                            "so rows run one at a time; use batch_size 1 or the default",
                            (long long)asked, toplu_model_input(io->model, whole)->name);
      io->batch = 1;
      return TOPLU_OK;
    }
  }
  if (asked == TOPLU_JOB_BATCH_ALL) io->batch = rows > 1 ? rows : 1;
  else if (asked >= 1) io->batch = asked;
  return TOPLU_OK;
}

/* Inputs of `rows` rows (.npy sources: each source's row shape; inputs
 * stored whole as they are, values included, since planning may need them:
 * a Reshape target), calloc'd (n_in + 1 entries; free() it, not the
 * tensors); NULL when out of memory. */
static toplu_tensor_t *batch_inputs(pl_job_io_t *io, int64_t rows) {
  toplu_tensor_t *in = calloc((size_t)io->n_in + 1, sizeof *in);
  if (!in) return NULL;
  for (int i = 0; i < io->n_in; i++) {
    if (io->in_whole[i]) {
      in[i] = io->whole[i];
      continue;
    }
    const toplu_value_info_t *v = toplu_model_input(io->model, i);
    pl_source_t *s = io->src[io->in_src[i]];
    in[i].dtype = v->dtype == TOPLU_DTYPE_UNDEFINED ? s->row_dtype : v->dtype;
    in[i].ndim = s->row_ndim + 1;
    in[i].dims[0] = rows;
    memcpy(in[i].dims + 1, s->row_dims, sizeof(int64_t) * (size_t)s->row_ndim);
  }
  return in;
}

/* No rows (.npy inputs only): the outputs' shapes for a batch of 0 rows, by
 * shape inference from the inputs' row shapes, for the sink's empty result
 * (pl_sink_t.empty_out): a Conv output keeps its spatial dims rather than the
 * declared shape's unknown dims as 0.  A model whose shapes cannot be
 * inferred at 0 rows keeps the declared shapes (not an error: there is
 * nothing to run). */
static toplu_status_t empty_shapes(toplu_job_t *j, toplu_error_t *err) {
  pl_job_io_t *io = &j->io;
  toplu_tensor_t *in = batch_inputs(io, 0), *out = calloc((size_t)io->n_out + 1, sizeof *out);
  if (!in || !out) {
    free(in);
    free(out);
    return toplu__errorf(err, TOPLU_ERR_OUT_OF_MEMORY, "out of memory inferring the output shapes for no rows");
  }
  if (toplu_session_output_shapes(io->session, in, io->n_in, out, io->n_out) == TOPLU_OK) {
    free(io->sink->empty_out);
    io->sink->empty_out = out;
    io->sink->n_empty = io->n_out;
    out = NULL;
  }
  free(in);
  free(out);
  return TOPLU_OK;
}

/* Rows read from text or image sources (JSON Lines, CSV, an image folder):
 * their shapes are known once read, so the first rows that stack into one
 * batch are read and preprocessed here and the session checks that the
 * model keeps them apart (toplu_session_rows_apart: no node combines rows
 * along dim 0, every output's dim 0 holds the rows, two rows together answer
 * as each alone).  Where it does not, batches of several rows would answer
 * otherwise than each row alone, and the row sinks would cut an output such
 * as an LSTM's Y_h [layers, batch, hidden] along the wrong dim (a fresh
 * user's finding of 2026-12-06: exit 0, the values of other rows): with the
 * default or auto batch size the rows run one at a time, saying why; a batch
 * size asked for is refused.  Rows that stack with no other (every shape
 * different) are not checked: each runs alone anyway. */
/* The shard's first `count` rows read and preprocessed as chunk 0 would be with batch_size count (the rows checks
 * of check_batches); 0 when they do not read (the job reads them again and reports what fails). */
static int read_first_rows(toplu_job_t *j, int64_t count, pl_chunk_t *c) {
  double ta, tb;
  toplu_error_t e;
  int64_t saved = j->io.batch;
  j->io.batch = count;
  int ok = pl_job_read_chunk(j, c, 0, &ta, &tb, &e) == TOPLU_OK;
  j->io.batch = saved;
  return ok;
}

/* The one batch of exactly two rows that read_first_rows(j, 2, c) read, else NULL (c cleared). */
static const pl_batch_t *first_two_rows(toplu_job_t *j, pl_chunk_t *c) {
  if (!read_first_rows(j, 2, c)) return NULL;
  if (c->n_batches == 1 && c->batches[0].n == 2) return &c->batches[0];
  pl_chunk_clear(c);
  return NULL;
}

static uint64_t read_mask(const pl_job_io_t *io);

/* Largest |a - b| of two tensors of one dtype over a's first `len` positions along dim 1 (len < 0: all; b holds
 * exactly those), and the largest |b|. */
static void diff_cut(const toplu_tensor_t *a, const toplu_tensor_t *b, int64_t len, double *diff, double *scale) {
  int64_t outer = a->ndim >= 1 ? a->dims[0] : 1, la = a->ndim >= 2 ? a->dims[1] : 1, inner = 1;
  for (int d = 2; d < a->ndim; d++) inner *= a->dims[d];
  int64_t lb = len < 0 ? la : len;
  *diff = 0, *scale = 0;
  for (int64_t o = 0; o < outer; o++)
    for (int64_t t = 0; t < lb; t++)
      for (int64_t k = 0; k < inner; k++) {
        double x = pl_elem_get(a->dtype, a->data, (o * la + t) * inner + k);
        double y = pl_elem_get(b->dtype, b->data, (o * lb + t) * inner + k);
        double dd = x == y ? 0 : fabs(x - y);
        if (dd != dd) dd = INFINITY;
        if (dd > *diff) *diff = dd;
        if (fabs(y) > *scale) *scale = fabs(y);
      }
}

/* length_buckets: a row that its bucket pads, run padded and alone, must give the same outputs (those the job
 * writes or reads; the sequence ones cut back).  A model that does not mask the padding (no mask input: a GPT's
 * next token read at its last position, exit 0 and wrong on 11 of 12 rows) or whose outputs follow the sequence
 * length otherwise than one for one (an output [B, T/2, 16] written at its bucket's length) is refused: a fresh
 * user's findings of 2026-12-06.  The first such row of the shard's first 16. */
static toplu_status_t check_buckets_rows(toplu_job_t *j, int64_t checked[2], toplu_error_t *err) {
  pl_job_io_t *io = &j->io;
  int64_t rows = io->row_end - io->row_first;
  checked[0] = checked[1] = -1;
  if (!io->buckets.on || io->no_rows || rows < 1 || io->n_in > 64 || io->n_out > 64) return TOPLU_OK;
  pl_chunk_t c;
  if (!read_first_rows(j, rows < 16 ? rows : 16, &c)) return TOPLU_OK;
  const pl_row_t *r = NULL;
  const pl_batch_t *bt = NULL;
  for (int64_t k = 0; k < c.count && !r; k++) {
    const pl_row_t *x = &c.rows[k];
    if (x->fail_stage || x->batch < 0 || x->seq_len < 0) continue;
    const pl_batch_t *b = &c.batches[x->batch];
    for (int i = 0; i < io->n_in; i++) {
      int ax = io->buckets.in_axis[i] + 1;
      if (io->buckets.in_axis[i] >= 0 && ax < b->in[i].ndim && b->in[i].dims[ax] > x->seq_len) r = x, bt = b;
    }
  }
  toplu_status_t st = TOPLU_OK;
  if (!r) {
    pl_chunk_clear(&c);
    return TOPLU_OK;
  }
  toplu_tensor_t pad[64], alone[64], po[64], ao[64];
  memset(alone, 0, sizeof alone), memset(po, 0, sizeof po), memset(ao, 0, sizeof ao);
  int ok = 1;
  for (int i = 0; i < io->n_in && ok; i++) {
    pad[i] = bt->in[i];
    int whole = io->whole && io->whole[i].data;
    if (whole) {
      alone[i] = bt->in[i];
      continue;
    }
    size_t row = bt->in[i].dims[0] > 0 ? toplu_tensor_nbytes(&bt->in[i]) / (size_t)bt->in[i].dims[0] : 0;
    pad[i].dims[0] = 1;
    pad[i].data = (char *)bt->in[i].data + (size_t)r->pos * row;
    int ax = io->buckets.in_axis[i] + 1, padded = io->buckets.in_axis[i] >= 0 && ax < pad[i].ndim;
    int64_t dims[TOPLU_MAX_DIMS];
    memcpy(dims, pad[i].dims, sizeof dims);
    if (padded) dims[ax] = r->seq_len;
    if (toplu_tensor_alloc(&alone[i], pad[i].dtype, pad[i].ndim, dims)) {
      ok = 0;
      break;
    }
    if (!padded) {
      memcpy(alone[i].data, pad[i].data, toplu_tensor_nbytes(&alone[i]));
      continue;
    }
    /* the first seq_len positions along ax of every outer index */
    int64_t outer = 1, inner = 1, lp = pad[i].dims[ax], la = dims[ax];
    size_t es = toplu_dtype_size(pad[i].dtype);
    for (int d = 0; d < ax; d++) outer *= pad[i].dims[d];
    for (int d = ax + 1; d < pad[i].ndim; d++) inner *= pad[i].dims[d];
    for (int64_t o = 0; o < outer; o++)
      memcpy((char *)alone[i].data + (size_t)(o * la * inner) * es, (const char *)pad[i].data + (size_t)(o * lp * inner) * es,
             (size_t)(la * inner) * es);
  }
  if (ok && (toplu_session_run(io->session, pad, io->n_in, po, io->n_out) ||
             toplu_session_run(io->session, alone, io->n_in, ao, io->n_out)))
    ok = 0; /* a row that fails shows when the job runs it */
  uint64_t mask = read_mask(io);
  for (int k = 0; ok && !st && k < io->n_out; k++) {
    if (!toplu__output_in(mask, k) || po[k].kind != TOPLU_KIND_TENSOR || ao[k].kind != TOPLU_KIND_TENSOR) continue;
    const char *name = toplu_model_output(io->model, k)->name;
    int cut = io->buckets.out_seq[k] && po[k].ndim >= 2 && ao[k].ndim == po[k].ndim && ao[k].dims[1] == r->seq_len;
    int same = po[k].ndim == ao[k].ndim && po[k].dtype == ao[k].dtype;
    for (int d = 0; same && d < po[k].ndim; d++) same = d == 1 && cut ? 1 : po[k].dims[d] == ao[k].dims[d];
    char sp[128], sa[128];
    toplu_shape_format(po[k].ndim, po[k].dims, sp, sizeof sp);
    toplu_shape_format(ao[k].ndim, ao[k].dims, sa, sizeof sa);
    if (!same) {
      st = toplu__errorf(err, TOPLU_ERR_SHAPE,
                        "length_buckets: output '%s' has shape %s for row %lld padded from %lld to %lld along '%s' "
                        "and %s for the row alone: its dims follow the sequence length otherwise than one for one "
                        "(only an output whose dim 1 is the sequence is cut back); run without length buckets",
                        name, sp, (long long)r->index, (long long)r->seq_len,
                        (long long)pl_buckets_pick(&io->buckets, r->seq_len), io->buckets.symbol, sa);
      break;
    }
    if (po[k].dtype == TOPLU_DTYPE_STRING) continue;
    int fl = po[k].dtype == TOPLU_DTYPE_FLOAT || po[k].dtype == TOPLU_DTYPE_DOUBLE ||
             po[k].dtype == TOPLU_DTYPE_FLOAT16 || po[k].dtype == TOPLU_DTYPE_BFLOAT16;
    double diff, scale;
    diff_cut(&po[k], &ao[k], cut ? r->seq_len : -1, &diff, &scale);
    double tol = fl ? 1e-3 * (scale > 1 ? scale : 1) : 0;
    if (diff > tol)
      st = toplu__errorf(err, TOPLU_ERR_SHAPE,
                        "length_buckets: row %lld padded from %lld to %lld along '%s' gives output '%s' other values "
                        "than the row alone (max difference %.3g at a scale of %.3g): the model %s; run without "
                        "length buckets",
                        (long long)r->index, (long long)r->seq_len, (long long)pl_buckets_pick(&io->buckets, r->seq_len),
                        io->buckets.symbol, name, diff, scale,
                        io->buckets.has_mask ? "does not mask the padding as its mask input says"
                                             : "has no input named like an attention mask and reads the padding "
                                               "(zeros) as tokens");
  }
  for (int i = 0; i < io->n_in; i++)
    if (!(io->whole && io->whole[i].data)) toplu_tensor_free(&alone[i]);
  for (int k = 0; k < io->n_out; k++) toplu_tensor_free(&po[k]), toplu_tensor_free(&ao[k]);
  if (!st && ok) checked[0] = r->index, checked[1] = r->seq_len;
  pl_chunk_clear(&c);
  return st;
}

static toplu_status_t check_read_rows(toplu_job_t *j, int64_t asked, toplu_error_t *err) {
  pl_job_io_t *io = &j->io;
  int64_t rows = io->row_end - io->row_first;
  if (io->no_rows || rows < 1) return TOPLU_OK;
  pl_chunk_t c;
  int several = io->batch >= 2 && rows >= 2;
  if (!read_first_rows(j, !several ? 1 : rows < 16 ? rows : 16, &c)) return TOPLU_OK;
  const pl_batch_t *two = NULL;
  for (int b = 0; b < c.n_batches && !two; b++)
    if (c.batches[b].n >= 2) two = &c.batches[b];
  /* one row (or none that stack): still checked for a seq-first RNN below */
  const pl_batch_t *first = two ? two : c.n_batches ? &c.batches[0] : NULL;
  int apart = 1;
  char why[512];
  if (first && toplu__session_rows_apart(io->session, first->in, io->n_in, 1, read_mask(io), &apart, why, sizeof why)) {
    if (several) /* (one row a batch: only the seq-first check was asked, no need to say it was not made) */
      pl_job_log(j, TOPLU_LOG_NOTE, "whether the model keeps rows apart was not checked: %s",
                 toplu_session_last_error(io->session));
    apart = 1;
  }
  pl_chunk_clear(&c);
  /* an RNN of layout 0 reads dim 0 of the stacked rows as its sequence: each row alone would run as a sequence of
   * length 1, and a batch as one sequence of its rows (JSONL rows of a seq-first PyTorch LSTM, [seq, 20] each:
   * exit 0 and every time step answered as a sequence of its own, a fresh user's finding of 2026-12-06) */
  if (apart < 0)
    return toplu__errorf(err, TOPLU_ERR_SHAPE,
                        "the model reads dim 0 of its input as a sequence (%s), and a job stacks its rows on dim 0: "
                        "a row alone would run as a sequence of length 1; export the model with its batch first "
                        "(PyTorch batch_first=True, ONNX layout 1), or give it whole tensors (a .npy of the whole "
                        "input as one batch, or a server)",
                        why);
  if (apart || !two || !several) return TOPLU_OK; /* one row a batch: whether rows mix does not matter */
  if (asked == TOPLU_JOB_BATCH_DEFAULT || asked == TOPLU_JOB_BATCH_AUTO) {
    int out_why = !strncmp(why, "output '", 8); /* an output whose dim 0 is not the rows (an LSTM's Y_h) */
    pl_job_log(j, TOPLU_LOG_NOTE, "batch_size 1, each row alone: the model does not keep rows apart (%s)%s", why,
               out_why && !io->post.selected ? "; writing only outputs whose dim 0 holds the rows (postprocess "
                                               "raw,output=NAME) lets the rows batch"
                                             : "");
    io->batch = 1;
    return TOPLU_OK;
  }
  return toplu__errorf(err, TOPLU_ERR_SHAPE,
                      "batch_size %lld: the model does not keep rows apart (%s), so rows batched together would give "
                      "other results than each row alone; use batch_size 1",
                      (long long)io->batch, why);
}

static toplu_status_t check_npy_batches(toplu_job_t *j, toplu_error_t *err);

/* A .npy directory holds one shape per output for all rows.  Images of different sizes (no resize) or JSON Lines of
 * different lengths batch apart, and a model whose outputs follow their shapes (a segmenter's [N, C, H, W]) gives
 * rows of other shapes: refused when the first chunk had run and been written (a fresh user's segmentation job,
 * 2026-12-06).  The first rows' batches decide by shape inference before anything runs; rows further on are still
 * checked as they are written. */
static toplu_status_t check_npy_row_shapes(toplu_job_t *j, toplu_error_t *err) {
  pl_job_io_t *io = &j->io;
  int64_t rows = io->row_end - io->row_first;
  if (strcmp(io->sink->ops->kind, "npy") || io->post.kind != PL_POST_RAW || io->no_rows || rows < 2 || io->n_out > 64)
    return TOPLU_OK;
  pl_chunk_t c;
  if (!read_first_rows(j, rows < 16 ? rows : 16, &c)) return TOPLU_OK;
  toplu_status_t st = TOPLU_OK;
  toplu_tensor_t ref[64], out[64];
  int ref_b = -1;
  for (int b = 0; b < c.n_batches && !st; b++) {
    if (c.batches[b].n < 1) continue;
    memset(out, 0, sizeof out);
    if (toplu_session_output_shapes(io->session, c.batches[b].in, io->n_in, out, io->n_out)) continue;
    if (ref_b < 0) {
      memcpy(ref, out, sizeof ref);
      ref_b = b;
      continue;
    }
    for (int k = 0; k < io->n_out && !st; k++) {
      if (!pl_post_reads(&io->post, k) || out[k].kind != TOPLU_KIND_TENSOR || ref[k].kind != TOPLU_KIND_TENSOR) continue;
      int same = out[k].ndim == ref[k].ndim && out[k].dtype == ref[k].dtype;
      for (int d = 1; same && d < out[k].ndim; d++) same = out[k].dims[d] == ref[k].dims[d];
      if (same) continue;
      const char *ra = NULL, *rb = NULL; /* the first row of each batch */
      for (int64_t i = 0; i < c.count; i++) {
        if (c.rows[i].batch == ref_b && !ra) ra = c.rows[i].id;
        if (c.rows[i].batch == b && !rb) rb = c.rows[i].id;
      }
      char sa[160], sb[160];
      toplu_shape_format(ref[k].ndim - 1, ref[k].dims + 1, sa, sizeof sa);
      toplu_shape_format(out[k].ndim - 1, out[k].dims + 1, sb, sizeof sb);
      st = toplu__errorf(err, TOPLU_ERR_SHAPE,
                        "%s: rows %s and %s give output '%s' the shapes %s and %s (their inputs differ in shape); "
                        ".npy files need the same shapes in every row (write .jsonl or .sqlite instead, or resize "
                        "the inputs to one size in the preprocess)",
                        j->set.output, ra ? ra : "?", rb ? rb : "?", toplu_model_output(io->model, k)->name, sa, sb);
    }
  }
  pl_chunk_clear(&c);
  return st;
}

/* The outputs the job writes or reads, as toplu__session_rows_apart's mask (postprocess output=NAME: that one). */
static uint64_t read_mask(const pl_job_io_t *io) {
  uint64_t m = 0;
  for (int k = 0; k < io->n_out; k++)
    if (pl_post_reads(&io->post, k)) m |= (uint64_t)1 << (k < 63 ? k : 63); /* toplu__output_in's bits */
  return m;
}

/* .npy rows of a model whose shapes follow the values of an input (NonMaxSuppression, NonZero): no plan without the
 * data, so the first two rows are read and the session runs them together and each alone
 * (toplu__session_rows_apart).  Rows that stay apart split as usual (each batch's outputs checked as it runs).
 * Outputs that do not hold the rows (torchvision nms's indices: split into chunks, each chunk's boxes were
 * suppressed alone and numbered from 0, exit 0; as one batch the job failed, a fresh user's finding of
 * 2026-12-06) are written whole when the job is one chunk into a .npy directory without postprocessing; otherwise
 * refused, saying how to run them. */
static toplu_status_t check_values_decide(toplu_job_t *j, toplu_error_t *err) {
  pl_job_io_t *io = &j->io;
  int64_t rows = io->row_end - io->row_first;
  int one_chunk = rows <= io->batch, npy_sink = !strcmp(io->sink->ops->kind, "npy");
  if (io->no_rows || rows < 2) return TOPLU_OK;
  pl_chunk_t c2;
  const pl_batch_t *two = first_two_rows(j, &c2);
  if (!two) return TOPLU_OK;
  int apart = 1;
  char why[512];
  int outputs_too = !(io->batch == 1 && !npy_sink);
  if (toplu__session_rows_apart(io->session, two->in, io->n_in, outputs_too, read_mask(io), &apart, why, sizeof why))
    apart = 1; /* not checked: the rows' own failures show when they run */
  pl_chunk_clear(&c2);
  if (apart > 0) return TOPLU_OK;
  if (one_chunk && npy_sink && io->post.kind == PL_POST_RAW) {
    io->sink->whole = 1;
    pl_job_log(j, TOPLU_LOG_NOTE, "the outputs are written whole (%lld rows, one batch): the model does not keep "
               "rows apart (%s)", (long long)rows, why);
    return TOPLU_OK;
  }
  return toplu__errorf(err, TOPLU_ERR_SHAPE,
                      "batch_size %lld: the model does not keep the %lld rows of dim 0 apart (%s), so batches of part "
                      "of them would give other results than the whole, and its outputs cannot be stored row by row; "
                      "run them as one batch (batch_size all) into a .npy directory without postprocessing%s",
                      (long long)io->batch, (long long)rows, why,
                      npy_sink ? "" : ", or one row at a time (batch_size 1) to store each row's outputs whole");
}

/* Rows per chunk that the default batch size of a .npy job into a .npy
 * directory tries on a large file: about 8 MiB of input rows, at least 16
 * and at most 1024 (MNIST's 3 KiB rows: 1024; a 224x224 image's 588 KiB:
 * 16, the other sinks' default). */
static int64_t npy_chunk_rows(const pl_job_io_t *io) {
  int64_t row_bytes = 0;
  for (int i = 0; i < io->n_in; i++) {
    if (io->in_whole[i]) continue;
    const pl_source_t *s = io->src[io->in_src[i]];
    const toplu_value_info_t *v = toplu_model_input(io->model, i);
    int64_t n = (int64_t)toplu_dtype_size(v->dtype == TOPLU_DTYPE_UNDEFINED ? s->row_dtype : v->dtype);
    for (int d = 0; d < s->row_ndim; d++) n *= s->row_dims[d] > 0 ? s->row_dims[d] : 1;
    row_bytes += n;
  }
  int64_t c = row_bytes > 0 ? ((int64_t)8 << 20) / row_bytes : 1024;
  return c < PL_DEFAULT_BATCH ? PL_DEFAULT_BATCH : c > 1024 ? 1024 : c;
}

/* Before anything runs: a model that fixes dim 0 of every input takes all
 * its rows at once; with .npy sources, plan the first batch so that shape
 * errors show now, decide whether the outputs follow the rows (else they are
 * stored whole, which needs one chunk into a .npy directory), and say how a
 * fixed-batch model runs a bigger batch. */
static toplu_status_t check_batches(toplu_job_t *j, int64_t asked, toplu_error_t *err) {
  pl_job_io_t *io = &j->io;
  int64_t rows = io->row_end - io->row_first;
  int one_chunk = rows <= io->batch;
  if (!pl_model_has_batch(io->model) && !io->no_rows && !one_chunk) {
    const toplu_value_info_t *v = toplu_model_input(io->model, 0);
    char dims[256];
    return toplu__errorf(err, TOPLU_ERR_INVALID_ARGUMENT,
                        "batch_size %lld: the model fixes dim 0 of its inputs ('%s' is %s), so its %lld rows cannot "
                        "be split into batches; use a batch_size of at least %lld, or the default",
                        (long long)io->batch, v->name, pl_format_info_dims(v, dims, sizeof dims), (long long)rows,
                        (long long)rows);
  }
  if (!all_npy(j)) {
    toplu_status_t st = check_read_rows(j, asked, err);
    return st ? st : check_npy_row_shapes(j, err);
  }
  if (rows < 1) return empty_shapes(j, err);
  /* rows of an input whose values decide shapes (NonZero on them): the shapes are known batch by batch only, as
   * for JSONL rows (each batch's outputs are checked when it runs); an input read whole has its values here */
  for (int i = 0; i < io->n_in; i++)
    if (!io->in_whole[i] && toplu_model_input_values_decide(io->model, i)) return check_values_decide(j, err);
  /* The default for .npy into a .npy directory is every row in one batch, and memory grew with the file (100,000
   * MNIST rows: "out of memory" under a 600 MB limit that batches of 64 ran in with 28 MB; a fresh user's finding
   * of 2026-12-06).  Above a chunk's worth of rows the job tries chunks (npy_chunk_rows), kept when the model
   * keeps the rows apart and its outputs follow them (the checks below give the whole batch's results then);
   * otherwise all rows stay one batch, saying why. */
  int64_t chunk = npy_chunk_rows(io);
  if (asked == TOPLU_JOB_BATCH_DEFAULT && one_chunk && rows > chunk && toplu_model_fixed_batch_size(io->model) <= 1) {
    int64_t whole = io->batch;
    int saved_whole = io->sink->whole;
    toplu_error_t e2;
    io->batch = chunk;
    if (check_npy_batches(j, &e2) == TOPLU_OK) return TOPLU_OK;
    io->batch = whole;
    io->sink->whole = saved_whole;
    const char *why = e2.message, *colon = strstr(why, ": "); /* less the "batch_size N: " the user did not give */
    if (!strncmp(why, "batch_size ", 11) && colon) why = colon + 2;
    pl_job_log(j, TOPLU_LOG_NOTE, "the %lld rows run as one batch, chunks of %lld refused (%s)", (long long)rows,
               (long long)chunk, why);
  }
  return check_npy_batches(j, err);
}

/* check_batches for .npy sources: plan the first batch, decide whether the outputs follow the rows, check that the
 * model keeps them apart when they are split (see check_batches). */
static toplu_status_t check_npy_batches(toplu_job_t *j, toplu_error_t *err) {
  pl_job_io_t *io = &j->io;
  int64_t rows = io->row_end - io->row_first, n0 = rows < io->batch ? rows : io->batch;
  int one_chunk = rows <= io->batch;
  toplu_tensor_t *in = batch_inputs(io, n0), *out = calloc((size_t)io->n_out + 1, sizeof *out);
  if (!in || !out) {
    free(in);
    free(out);
    return toplu__errorf(err, TOPLU_ERR_OUT_OF_MEMORY, "out of memory planning the first batch");
  }
  toplu_status_t st = toplu_session_output_shapes(io->session, in, io->n_in, out, io->n_out);
  if (st) {
    st = toplu__errorf(err, st, "%s", toplu_session_last_error(io->session));
  } else {
    int npy_sink = !strcmp(io->sink->ops->kind, "npy");
    int follows = !io->no_rows;
    int k_bad = -1;
    for (int k = 0; k < io->n_out && follows; k++) /* the outputs the job writes or reads (postprocess output=) */
      if (pl_post_reads(&io->post, k) && !(out[k].ndim >= 1 && out[k].dims[0] == n0)) {
        follows = 0;
        k_bad = k;
      }
    /* a dim 0 that equals the rows by chance (an LSTM's Y_h [layers, batch, hidden] for as many rows as layers)
     * shows at another row count: the shapes for 1 row (2 when the batch is 1), where the model plans them.  For
     * the row sinks: a .npy directory of one chunk stores the outputs as they come (the whole batch's), and more
     * chunks get toplu_session_rows_apart's shape check below */
    int64_t alt = n0 == 1 ? 2 : 1;
    toplu_tensor_t *in1 = follows && !npy_sink ? batch_inputs(io, alt) : NULL,
                   *out1 = in1 ? calloc((size_t)io->n_out + 1, sizeof *out1) : NULL;
    if (out1 && toplu_session_output_shapes(io->session, in1, io->n_in, out1, io->n_out) == TOPLU_OK)
      for (int k = 0; k < io->n_out && follows; k++)
        if (pl_post_reads(&io->post, k) && !(out1[k].ndim >= 1 && out1[k].dims[0] == alt)) {
          follows = 0;
          k_bad = k;
        }
    free(in1);
    free(out1);
    if (!follows && (npy_sink || n0 != 1)) {
      if (one_chunk && npy_sink && io->post.kind == PL_POST_RAW) {
        io->sink->whole = 1;
      } else if (k_bad >= 0) {
        char sh[256];
        st = toplu__errorf(err, TOPLU_ERR_SHAPE,
                          "output '%s' has shape %s for a batch of %lld rows: its dim 0 does not follow the batch, so "
                          "the rows cannot be split into batches or stored row by row; run them as one batch "
                          "(batch_size all) into a .npy directory without postprocessing%s%s",
                          toplu_model_output(io->model, k_bad)->name,
                          toplu_shape_format(out[k_bad].ndim, out[k_bad].dims, sh, sizeof sh), (long long)n0,
                          npy_sink ? "" : ", or one row at a time (batch_size 1) to store each row's outputs whole",
                          io->post.selected ? "" : ", or keep an output that follows the batch (postprocess raw,output=NAME)");
      }
    }
    /* rows that a node combines (a seq-first LSTM reads dim 0 as its sequence): batches of part of them answer
     * wrongly, and did so without a word (a fresh user's finding of 2026-12-05), so more than one chunk is refused */
    int apart = 1;
    char why[512];
    /* the first two rows themselves, read and preprocessed as a batch of 2: the check also runs them (the plans
     * alone miss rows that a Transpose moves off dim 0 before a Conv combines them); shapes alone when they do
     * not read */
    pl_chunk_t c2;
    const pl_batch_t *two = !st && !one_chunk && !io->no_rows && rows >= 2 ? first_two_rows(j, &c2) : NULL;
    /* one row a batch into a row sink stores each row's outputs whole: their dim 0 need not hold the rows */
    int outputs_too = !(io->batch == 1 && !npy_sink);
    if (!st && !one_chunk && !io->no_rows &&
        toplu__session_rows_apart(io->session, two ? two->in : in, io->n_in, outputs_too, read_mask(io), &apart, why,
                                  sizeof why)) {
      /* plans of 1 and 2 rows the model refuses (a Reshape to a constant batch): not checked, the job as before */
      pl_job_log(j, TOPLU_LOG_NOTE, "whether the model keeps rows apart was not checked: %s",
                 toplu_session_last_error(io->session));
      apart = 1;
    }
    if (two) pl_chunk_clear(&c2);
    if (!st && apart <= 0)
      st = toplu__errorf(err, TOPLU_ERR_SHAPE,
                        "batch_size %lld: the model does not keep the %lld rows of dim 0 apart (%s), so batches of "
                        "part of them would give other results than the whole; run them as one batch (batch_size "
                        "all)",
                        (long long)io->batch, (long long)rows, why);
    toplu_memory_report_t r;
    int64_t fb = toplu_model_fixed_batch_size(io->model), last = rows % io->batch;
    if (!st && fb && n0 != fb && !io->no_rows && toplu_session_memory(io->session, in, io->n_in, &r) == TOPLU_OK)
      pl_job_log(j, TOPLU_LOG_NOTE, "%s fixes the batch dim to %lld; batches of %lld rows run anyway: %s",
                 j->set.model_path, (long long)fb, (long long)n0,
                 r.per_sample ? "each batch one row at a time" : "each batch in one go, with the batch dim freed");
    /* a static batch b > 1 and a last batch of fewer rows: it runs only where the rows stay apart, so say so
     * before the job rather than at its end */
    if (!st && fb > 1 && rows > io->batch && last && last != fb) {
      toplu_tensor_t *in2 = batch_inputs(io, last), *out2 = calloc((size_t)io->n_out + 1, sizeof *out2);
      if (!in2 || !out2) st = toplu__errorf(err, TOPLU_ERR_OUT_OF_MEMORY, "out of memory planning the last batch");
      else if (toplu_session_output_shapes(io->session, in2, io->n_in, out2, io->n_out))
        st = toplu__errorf(err, TOPLU_ERR_SHAPE, "the last batch of %lld rows (%lld rows in batches of %lld): %s",
                          (long long)last, (long long)rows, (long long)io->batch, toplu_session_last_error(io->session));
      free(in2);
      free(out2);
    }
  }
  free(in);
  free(out);
  return st;
}

/* 1 when an existing errors file is one a job wrote: empty, or its first
 * line a JSON object with "stage" and "error" (how every line is written). */
static int errors_file_ours(const char *path) {
  FILE *f = fopen(path, "rb");
  if (!f) return 1; /* none (or unreadable: opening it for writing will say) */
  char line[4096];
  int ours = 1;
  if (fgets(line, sizeof line, f)) {
    json_t *o = json_loads(line, JSON_DISABLE_EOF_CHECK, NULL);
    ours = json_is_object(o) && json_is_string(json_object_get(o, "stage")) &&
           json_is_string(json_object_get(o, "error"));
    json_decref(o);
  }
  fclose(f);
  return ours;
}

/* A fresh start replaces the output and empties the errors file: refuse
 * when they hold what no toplu job wrote, unless options.overwrite. */
static toplu_status_t check_overwrite(toplu_job_t *j, const toplu_job_options_t *o, toplu_error_t *err) {
  if (j->set.resume && j->ck.loaded_found) return TOPLU_OK;
  char why[PL_PATH_MAX + 256];
  /* 2: something overwrite does not replace either (an SQLite index or view named as the table) */
  int foreign = j->io.sink->ops->foreign ? j->io.sink->ops->foreign(j->io.sink, why, sizeof why) : 0;
  if (foreign == 2) return toplu__errorf(err, TOPLU_ERR_INVALID_ARGUMENT, "%s", why);
  if (o->overwrite) return TOPLU_OK;
  if (foreign)
    return toplu__errorf(err, TOPLU_ERR_INVALID_ARGUMENT, "%s; remove it, write elsewhere, or set overwrite to replace it",
                        why);
  if (j->set.errors_path && !pl_is_dir(j->set.errors_path) && !errors_file_ours(j->set.errors_path))
    return toplu__errorf(err, TOPLU_ERR_INVALID_ARGUMENT,
                        "errors file %s exists and no toplu job wrote it (its first line is not a JSON object with "
                        "\"stage\" and \"error\"); the job would empty it: remove it, write elsewhere, or set "
                        "overwrite to replace it",
                        j->set.errors_path);
  return TOPLU_OK;
}

/* The errors file must be writable where it is named, found when the job
 * is made (a bad location is the caller's to fix, as a bad output is), not
 * when the run starts: its folder is made as the output's is, and a
 * directory, a path through a file, or a place the process may not write
 * is refused.  Nothing is left created or emptied here. */
static toplu_status_t check_errors_location(toplu_job_t *j, toplu_error_t *err) {
  const char *path = j->set.errors_path;
  if (!path) return TOPLU_OK;
  if (pl_is_dir(path))
    return toplu__errorf(err, TOPLU_ERR_INVALID_ARGUMENT, "errors file %s is a directory; name a file", path);
  char dir[PL_PATH_MAX];
  pl_path_dir(path, dir, sizeof dir);
  if (!pl_is_dir(dir)) {
    toplu_status_t st = pl_mkdir_p(dir, err);
    if (st) return st;
  }
  /* Try it: open what is there without emptying it, or create the file and
   * remove it again (access() says yes to root where open() says no). */
  int exists = pl_exists(path);
  int fd = open(path, exists ? O_WRONLY | O_CLOEXEC | O_NONBLOCK : O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
  if (fd < 0)
    return toplu__errorf(err, TOPLU_ERR_IO, "errors file %s: cannot write %s: %s", path,
                        exists ? "it" : "in its folder", strerror(errno));
  close(fd);
  if (!exists) unlink(path);
  return TOPLU_OK;
}

/* Copy the options into the job. */
static toplu_status_t take_settings(toplu_job_t *j, const toplu_job_options_t *o, toplu_error_t *err) {
  pl_job_settings_t *s = &j->set;
  s->model_path = strdup(o->model);
  s->output = strdup(o->output);
  s->errors_path = dup_or_null(o->errors);
  s->labels_path = dup_or_null(o->labels);
  s->tune_path = dup_or_null(o->tune_file);
  s->profile_path = dup_or_null(o->profile);
  s->length_buckets = o->length_buckets && *o->length_buckets ? strdup(o->length_buckets) : NULL;
  if (!s->model_path || !s->output || (o->errors && !s->errors_path) || (o->labels && !s->labels_path) ||
      (o->tune_file && !s->tune_path) || (o->profile && !s->profile_path) ||
      (o->length_buckets && *o->length_buckets && !s->length_buckets))
    return toplu__errorf(err, TOPLU_ERR_OUT_OF_MEMORY, "out of memory copying the job's paths");
  long cores = toplu_cpu_count(NULL, 0);
  if (cores < 1) cores = 1;
  s->workers = o->workers ? o->workers : cores <= 4 ? 1 : (int)(cores / 4 > 8 ? 8 : cores / 4);
  s->prefetch = o->prefetch;
  s->infer_workers = o->infer_workers ? o->infer_workers : 1;
  s->threads = o->threads ? o->threads
                          : s->infer_workers > 1 ? (int)(cores / s->infer_workers > 0 ? cores / s->infer_workers : 1) : 0;
  s->resume = o->resume;
  s->fail_fast = o->fail_fast;
  s->allow_nonfinite = o->allow_nonfinite;
  s->qdq_int8_all = o->qdq_int8_all;
  s->max_image_pixels = o->max_image_pixels;
  s->text.csv_header = (pl_csv_header_t)o->csv_header;
  s->text.csv_delim = o->csv_delimiter;
  s->text.max_line = o->max_line_bytes > 0 ? o->max_line_bytes : TOPLU_JOB_MAX_LINE_DEFAULT;
  s->checkpoint_s = o->checkpoint_seconds;
  s->progress_s = o->progress_seconds > 0 ? o->progress_seconds : 10.0;
  s->log = o->log;
  s->log_user = o->log_user;
  s->progress = o->progress;
  s->progress_user = o->progress_user;
  return TOPLU_OK;
}

/* Check the options a caller may get wrong before anything is opened. */
static toplu_status_t check_options(const toplu_job_options_t *o, toplu_error_t *err) {
  if (!o) return toplu__errorf(err, TOPLU_ERR_INVALID_ARGUMENT, "options is NULL");
  if (!o->model || !*o->model) return toplu__errorf(err, TOPLU_ERR_INVALID_ARGUMENT, "model: no model given");
  if (o->n_inputs < 0 || (o->n_inputs > 0 && !o->inputs))
    return toplu__errorf(err, TOPLU_ERR_INVALID_ARGUMENT, "inputs: %d inputs and %s list", o->n_inputs,
                        o->inputs ? "a" : "no");
  if (!o->output || !*o->output) return toplu__errorf(err, TOPLU_ERR_INVALID_ARGUMENT, "output: no output given");
  if (o->errors && !*o->errors)
    return toplu__errorf(err, TOPLU_ERR_INVALID_ARGUMENT, "errors: an empty path (NULL: no errors file)");
  if (o->batch_size < TOPLU_JOB_BATCH_ALL)
    return toplu__errorf(err, TOPLU_ERR_INVALID_ARGUMENT,
                        "batch_size %lld: expected rows >= 1, TOPLU_JOB_BATCH_DEFAULT, _AUTO or _ALL",
                        (long long)o->batch_size);
  if ((uint64_t)o->batch_size > TOPLU_JOB_BATCH_MAX && o->batch_size > 0)
    return toplu__errorf(err, TOPLU_ERR_INVALID_ARGUMENT,
                        "batch_size %lld: at most %s rows (a batch is one tensor, and no tensor holds more "
                        "elements); for every row at once use all",
                        (long long)o->batch_size, TOPLU_MAX_ELEMENTS_TEXT);
  if (o->workers < 0 || o->prefetch < 0 || o->infer_workers < 0 || o->threads < 0)
    return toplu__errorf(err, TOPLU_ERR_INVALID_ARGUMENT, "workers %d, prefetch %d, infer_workers %d, threads %d: "
                        "none may be negative", o->workers, o->prefetch, o->infer_workers, o->threads);
  if (o->shard_count < 0 || (o->shard_count > 0 && (o->shard_index < 0 || o->shard_index >= o->shard_count)) ||
      (o->shard_count == 0 && o->shard_index != 0))
    return toplu__errorf(err, TOPLU_ERR_INVALID_ARGUMENT,
                        "shard_index %d of shard_count %d: expected 0 <= index < count (count 0, the shard from the "
                        "environment, takes index 0)",
                        o->shard_index, o->shard_count);
  if (o->max_image_pixels < 0)
    return toplu__errorf(err, TOPLU_ERR_INVALID_ARGUMENT, "max_image_pixels %lld: expected pixels >= 1 (0: the default)",
                        (long long)o->max_image_pixels);
  if (o->threads > TOPLU_MAX_THREADS)
    return toplu__errorf(err, TOPLU_ERR_INVALID_ARGUMENT, "threads %d: at most %d", o->threads, TOPLU_MAX_THREADS);
  if (isnan(o->checkpoint_seconds) || isnan(o->progress_seconds) || o->progress_seconds < 0)
    return toplu__errorf(err, TOPLU_ERR_INVALID_ARGUMENT,
                        "checkpoint_seconds %g, progress_seconds %g: expected numbers (progress_seconds >= 0, 0: the "
                        "default)", o->checkpoint_seconds, o->progress_seconds);
  if (o->csv_delimiter && !strchr(",;\t| ", o->csv_delimiter))
    return toplu__errorf(err, TOPLU_ERR_INVALID_ARGUMENT,
                        "csv_delimiter 0x%02x: expected ',', ';', tab, '|' or space (0: detected from the first line)",
                        (unsigned char)o->csv_delimiter);
  if (o->max_line_bytes < 0)
    return toplu__errorf(err, TOPLU_ERR_INVALID_ARGUMENT, "max_line_bytes %lld: expected bytes >= 1 (0: the default)",
                        (long long)o->max_line_bytes);
  if (o->sqlite_table) {
    char why[256];
    if (pl_sink_sqlite_table_bad(o->sqlite_table, why, sizeof why))
      return toplu__errorf(err, TOPLU_ERR_INVALID_ARGUMENT, "sqlite_table '%.200s': %s", o->sqlite_table, why);
    if (strcmp(pl_sink_kind(o->output), "sqlite"))
      return toplu__errorf(err, TOPLU_ERR_INVALID_ARGUMENT,
                          "sqlite_table '%s': the output %s is not an SQLite database (NAME.sqlite, .sqlite3 or .db)",
                          o->sqlite_table, o->output);
  }
  if (o->csv_header < TOPLU_CSV_HEADER_AUTO || o->csv_header > TOPLU_CSV_HEADER_NO)
    return toplu__errorf(err, TOPLU_ERR_INVALID_ARGUMENT, "csv_header %d: expected auto (0), yes (1) or no (2)",
                        (int)o->csv_header);
  return TOPLU_OK;
}

toplu_status_t toplu_job_create(const toplu_job_options_t *o, toplu_job_t **out, toplu_error_t *err) {
  toplu_error_clear(err);
  if (!out) return toplu__errorf(err, TOPLU_ERR_INVALID_ARGUMENT, "out is NULL");
  *out = NULL;
  toplu_status_t st = check_options(o, err);
  if (st) return st;
  char bucket_note[512] = ""; /* pl_buckets_setup's warning, logged after the row check below */
  toplu_job_t *j = calloc(1, sizeof *j);
  if (!j) return toplu__errorf(err, TOPLU_ERR_OUT_OF_MEMORY, "out of memory for a job (%zu bytes)", sizeof *j);
  pthread_mutex_init(&j->log_mu, NULL);
  /* the window's lock also guards the stats: made here, so toplu_job_get_stats may lock it at any time */
  if (pthread_mutex_init(&j->ring.mu, NULL) || pthread_cond_init(&j->ring.cv, NULL)) {
    pthread_mutex_destroy(&j->log_mu);
    free(j);
    return toplu__errorf(err, TOPLU_ERR_OUT_OF_MEMORY, "cannot create a mutex");
  }
  j->ring.init = 1;
  if (pl_pool_init(&j->io.pool, 0) == 0) j->io.pool_init = 1; /* without it, buffers are plain allocations */
  j->ck.errors_fd = -1;
  j->io.lock_fd = -1;
  j->io.errors_lock_fd = -1;
  atomic_init(&j->cancel, 0);
  atomic_init(&j->oom.noted, 0);
  atomic_init(&j->oom.rows, 0);
  pl_job_io_t *io = &j->io;
  st = take_settings(j, o, err);
  toplu_model_options_t mo;
  memset(&mo, 0, sizeof mo);
  mo.qdq_int8_all = o->qdq_int8_all;
  mo.no_fuse_attention = o->no_fuse_attention;
  mo.no_fuse_qdq_residual = o->no_fuse_qdq_residual;
  mo.no_fuse_depthwise = o->no_fuse_depthwise;
  mo.no_fuse_qdq_lookup = o->no_fuse_qdq_lookup;
  mo.no_fuse_projection = o->no_fuse_projection;
  if (!st) st = toplu_model_load(o->model, &mo, &io->model, err);
  if (!st) {
    io->n_in = toplu_model_input_count(io->model);
    io->n_out = toplu_model_output_count(io->model);
    /* a model without inputs (a Constant) runs once, as one "whole" run */
    /* sources and sinks hold numbers: string tensors, sequences and optionals (toplu/tensor.h) run through the library only */
    char why[600];
    if (toplu__model_nonnumeric_io(io->model, why, sizeof why))
      st = toplu__errorf(err, TOPLU_ERR_UNSUPPORTED, "%s: %s; batch jobs read and write numeric tensors only",
                        o->model, why);
  }
  if (!st) st = pl_job_open_sources(j, o, err);
  if (!st) st = pl_job_setup_pre(j, o->preprocess, err);
  if (!st) st = pl_post_parse(o->postprocess, &io->post, err);
  if (!st) io->post.allow_nonfinite = o->allow_nonfinite;
  if (!st) {
    char note[1024];
    st = pl_post_bind(&io->post, io->model, o->labels, note, sizeof note, err);
    for (char *line = note, *nl; !st && line && *line; line = nl ? nl + 1 : NULL) {
      if ((nl = strchr(line, '\n'))) *nl = '\0';
      pl_job_log(j, TOPLU_LOG_WARNING, "%s", line);
    }
  }
  if (!st && j->set.length_buckets) { /* after the postprocess: only the outputs the job reads are cut back */
    st = pl_buckets_setup(&io->buckets, j->set.length_buckets, io->model, io->in_whole, read_mask(io),
                          bucket_note, sizeof bucket_note, err);
  }
  if (!st) st = check_output_kind(o->output, o->errors, err);
  if (!st) st = pl_sink_open(o->output, o->sqlite_table, io->model, &io->post, &io->sink, err);
  if (!st) st = check_clobber(j, err);
  if (!st) st = pl_shard_resolve(o->shard_index, o->shard_count, &io->shard, err);
  if (!st) st = take_lock(j, err);
  if (!st) st = check_output_dir_writable(j, err);
  if (!st) {
    pl_shard_range(&io->shard, io->rows_total, &io->row_first, &io->row_end);
    toplu_session_options_t so;
    toplu_session_options_init(&so);
    if (o->session) {
      so.backends = o->session->backends;
      so.plan_dump = o->session->plan_dump;
      so.no_blocked = o->session->no_blocked;
      so.allocator = o->session->allocator;
      so.log = o->session->log;
      so.log_user = o->session->log_user;
      so.max_plan_bytes = o->session->max_plan_bytes;
      so.choose_threads = o->session->choose_threads;
      so.choose_threads_max_ms = o->session->choose_threads_max_ms;
      so.choose_kernels = o->session->choose_kernels;
    }
    if (!so.log) { /* the session's notes are the job's: a note on its threads or plans is about this job */
      so.log = job_session_log;
      so.log_user = j;
    }
    so.threads = j->set.threads;
    so.batch_override = toplu_model_fixed_batch_size(io->model) > 0; /* batch 1 or a static batch in the file */
    so.max_plans = 16;
    so.profile = j->set.profile_path != NULL;
    st = toplu_session_create(io->model, &so, &io->session, err);
    if (!st && so.profile && !(j->prof_shapes = calloc((size_t)io->n_in + 1, sizeof *j->prof_shapes)))
      st = toplu__errorf(err, TOPLU_ERR_OUT_OF_MEMORY, "out of memory for the profile");
  }
  if (!st && io->buckets.on) {
    char names[512];
    if (pl_buckets_probe_outputs(&io->buckets, io->session, io->model, io->whole, names, sizeof names) > 0)
      pl_job_log(j, TOPLU_LOG_NOTE, "length_buckets: output%s %s follow%s the sequence length (shape inference at two "
                 "lengths) though the model names the dim otherwise: cut back to each row's length too",
                 strchr(names, ',') ? "s" : "", names, strchr(names, ',') ? "" : "s");
  }
  if (!st && io->buckets.on) {
    /* the setup's warning (no mask input, a float mask) stands unless a padded row was run both ways and agreed */
    int64_t checked[2];
    st = check_buckets_rows(j, checked, err);
    if (!st && bucket_note[0] && checked[0] >= 0)
      pl_job_log(j, TOPLU_LOG_NOTE,
                 "length_buckets: %s, but row %lld padded from %lld to %lld along '%s' gave the outputs of the row "
                 "alone (checked on that row)",
                 io->buckets.has_mask ? "the mask input is a float tensor" : "no input is named like an attention mask",
                 (long long)checked[0], (long long)checked[1],
                 (long long)pl_buckets_pick(&io->buckets, checked[1]), io->buckets.symbol);
    else if (!st && bucket_note[0])
      pl_job_log(j, TOPLU_LOG_WARNING, "%s", bucket_note);
  }
  if (!st && j->set.resume) st = io->sink->ops->load_state(io->sink, &j->ck.loaded, &j->ck.loaded_found, err);
  if (!st && io->sink->output_gone)
    pl_job_log(j, TOPLU_LOG_WARNING, "resume: the checkpoint says the job is complete, but its output %s is gone; "
               "running the whole job again", j->set.output);
  if (!st) st = resolve_batch(j, o->batch_size, err);
  if (!st && o->batch_size == TOPLU_JOB_BATCH_AUTO) st = auto_batch(j, err);
  if (!st) st = check_batches(j, o->batch_size, err);
  if (!st) st = describe_job(j, err);
  if (!st) st = check_resume(j, err);
  if (!st) st = check_overwrite(j, o, err);
  if (!st) st = check_errors_location(j, err);
  if (!st) st = take_errors_lock(j, o->overwrite, err);
  if (st) {
    toplu_job_destroy(j);
    return st;
  }
  errors_lock_own(j);
  toplu_job_stats_t *s = &j->stats;
  s->rows_total = io->row_end - io->row_first;
  s->batch_size = io->batch;
  s->shard_index = io->shard.index;
  s->shard_count = io->shard.count;
  s->row_first = io->row_first;
  s->row_end = io->row_end;
  s->threads[TOPLU_STAGE_READ] = s->threads[TOPLU_STAGE_PREPROCESS] = j->set.workers;
  s->threads[TOPLU_STAGE_INFER] = j->set.infer_workers;
  s->threads[TOPLU_STAGE_POSTPROCESS] = s->threads[TOPLU_STAGE_WRITE] = 1;
  *out = j;
  return TOPLU_OK;
}
