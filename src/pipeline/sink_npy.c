/*
 * pipeline/sink_npy.c - a directory with one .npy per output and ids.txt.
 *
 * Arrays: every model output (raw, softmax; output=NAME's alone when named) as DIR/<name>.npy ([N, ...]
 * with the row's dims; characters outside A-Za-z0-9._- become '_'), or
 * argmax.npy (int64 [N]), or topk_index.npy (int64 [N, K], -1 past the
 * row's elements) and topk_score.npy (float32 [N, K], float64 for a float64
 * output, NaN past them); and
 * ids.txt, one id per line (escaped: pl_buf_id_line).  Every row must have
 * the same output shapes.
 * Each file grows as DIR/.<file>.part, its .npy header written with the
 * first row (dim 0 left 0) and rewritten with the row count at the end (the
 * header's length does not depend on dim 0); the checkpoint is
 * DIR/.toplu-state.  Little-endian hosts only.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/error.h"
#include "pipeline/files.h"
#include "pipeline/sink.h"
#include "toplu/npy.h"

#define NPY_MAX_ARRAYS (PL_CHUNK_BUFS - 2)
/* the arrays and ids.txt in a checkpoint's file_bytes (a 16 there overflowed once the sink took 64) */
_Static_assert(NPY_MAX_ARRAYS + 1 <= PL_STATE_FILES, "checkpoint file_bytes too small for the .npy sink");

typedef struct npy_array {
  char name[512];            /* file name, e.g. "argmax.npy" */
  char path[PL_PATH_MAX], part[PL_PATH_MAX];
  int fd;
  int64_t len;
  int have_shape;            /* dtype/dims known (header written) */
  toplu_dtype_t dtype;
  int ndim;                  /* of a row (of the whole array when whole) */
  int whole;                 /* dims are the array's own: no dim 0 of rows */
  int64_t dims[TOPLU_MAX_DIMS];
  int64_t header_len;
} npy_array_t;

typedef struct npy_sink {
  int n;                     /* arrays; ids.txt is arrays[n] */
  npy_array_t a[NPY_MAX_ARRAYS + 1];
  char state[PL_PATH_MAX];
  int64_t rows;
} npy_sink_t;

/* 1 when a directory entry is a result file (NAME.npy, ids.txt or a hidden
 * .NAME.part) not among keep[] or their part files; *part 1 for a part file. */
static int stale_entry(const char *name, const char *const *keep, int n_keep, int *part) {
  size_t l = strlen(name);
  *part = name[0] == '.' && l > 5 && !strcmp(name + l - 5, ".part");
  int result = (l > 4 && !strcmp(name + l - 4, ".npy") && name[0] != '.') || !strcmp(name, "ids.txt") || *part;
  if (!result) return 0;
  for (int a = 0; a < n_keep; a++) {
    size_t k = strlen(keep[a]);
    if (!strcmp(name, keep[a]) || (*part && l == k + 6 && !strncmp(name + 1, keep[a], k))) return 0;
  }
  return 1;
}

/* 1 when names (a JSON array of strings, may be NULL) holds name. */
static int listed(const json_t *names, const char *name) {
  size_t i;
  const json_t *v;
  json_array_foreach(names, i, v) if (json_is_string(v) && !strcmp(json_string_value(v), name)) return 1;
  return 0;
}

toplu_status_t pl_sink_npy_stale(const char *dir, const char *const *keep, int n_keep, int remove, toplu_error_t *err) {
  char state_path[PL_PATH_MAX], path[PL_PATH_MAX];
  if (pl_path_join(dir, ".toplu-state", state_path, sizeof state_path))
    return toplu__errorf(err, TOPLU_ERR_INVALID_ARGUMENT, "output %s: path longer than %d bytes", dir, PL_PATH_MAX - 1);
  DIR *d = opendir(dir);
  if (!d) return TOPLU_OK;
  pl_state_t st;
  int from_job = 0;
  toplu_error_t ignored;
  if (pl_state_load(state_path, &st, &from_job, &ignored)) from_job = 0, memset(&st, 0, sizeof st);
  const json_t *names = from_job ? json_object_get(st.extra, "names") : NULL;
  const json_t *from = from_job ? json_object_get(st.job, "merged_from") : NULL;
  toplu_status_t r = TOPLU_OK;
  /* two passes: refuse before removing anything */
  for (int pass = 0; pass < 2 && !r; pass++) {
    rewinddir(d);
    struct dirent *e;
    while (!r && (e = readdir(d)) != NULL) {
      int part;
      if (!stale_entry(e->d_name, keep, n_keep, &part)) continue;
      int ours = from_job && (part || listed(names, e->d_name));
      if (pass == 0 && !ours)
        r = toplu__errorf(err, TOPLU_ERR_INVALID_ARGUMENT,
                          "output %s holds %s, which would be left beside the new results, and no toplu job or "
                          "merge wrote it there (%s); remove it or choose another directory",
                          dir, e->d_name, !from_job ? "there is no .toplu-state"
                                                 : names  ? "the .toplu-state there does not list it"
                                                 : from   ? "the merge's .toplu-state there lists no files"
                                                          : "its .toplu-state, of an older toplu, lists no files");
      if (pass == 1 && remove &&
          (pl_path_join(dir, e->d_name, path, sizeof path) || pl_file_remove(path)))
        r = toplu__errorf(err, TOPLU_ERR_IO, "cannot remove %s/%s, left by an earlier job: %s", dir, e->d_name,
                          strerror(errno));
    }
  }
  closedir(d);
  if (from_job) pl_state_free(&st);
  return r;
}

/* Result files in the directory that this job would not write (see
 * pl_sink_npy_stale). */
static toplu_status_t stale_files(pl_sink_t *s, int remove, toplu_error_t *err) {
  npy_sink_t *n = s->impl;
  const char *keep[NPY_MAX_ARRAYS + 1];
  for (int a = 0; a <= n->n; a++) keep[a] = n->a[a].name;
  return pl_sink_npy_stale(s->path, keep, n->n + 1, remove, err);
}

/* Describe a row's dtype and dims: "float32 1x10" ("float32 =21" for an array stored whole). */
static void describe(pl_buf_t *b, toplu_dtype_t dt, int nd, const int64_t *dims, int whole) {
  pl_buf_puts(b, toplu_dtype_name(dt));
  pl_buf_putc(b, ' ');
  if (whole) pl_buf_putc(b, '=');
  for (int d = 0; d < nd; d++) pl_buf_printf(b, d ? "x%lld" : "%lld", (long long)dims[d]);
  pl_buf_putc(b, ';');
}

/* The model output array a holds (raw): every output in order, or output=NAME's alone. */
static int out_of(const pl_sink_t *s, int a) {
  return s->post->selected ? s->post->output : a;
}

/* Row d of array a for row r: data pointer, dtype, dims.  topk uses scratch. */
static const void *row_array(const pl_sink_t *s, const pl_chunk_t *c, const pl_row_t *r, int a, toplu_dtype_t *dt,
                             int *nd, int64_t *dims, void *scratch) {
  const pl_post_t *p = s->post;
  if (p->kind == PL_POST_ARGMAX) {
    *dt = TOPLU_DTYPE_INT64;
    *nd = 0;
    return &r->res.argmax;
  }
  if (p->kind == PL_POST_TOPK) {
    *nd = 1;
    dims[0] = p->k;
    if (a == 0) {
      int64_t *idx = scratch;
      *dt = TOPLU_DTYPE_INT64;
      for (int i = 0; i < p->k; i++) idx[i] = i < r->res.k ? r->res.topk_index[i] : -1;
    } else {
      if (p->score_f64) {
        double *sc = scratch;
        *dt = TOPLU_DTYPE_DOUBLE;
        for (int i = 0; i < p->k; i++) sc[i] = i < r->res.k ? r->res.topk_score[i] : NAN;
      } else {
        float *sc = scratch;
        *dt = TOPLU_DTYPE_FLOAT;
        for (int i = 0; i < p->k; i++) sc[i] = i < r->res.k ? (float)r->res.topk_score[i] : NAN;
      }
    }
    return scratch;
  }
  return pl_row_output(c, r, out_of(s, a), dt, nd, dims);
}

/* A description "float32 1x10;int64 ;" as messages show it: "float32 1x10, int64 (scalar)". */
static const char *desc_text(const char *desc, char *out, size_t size) {
  size_t n = 0;
  out[0] = '\0';
  for (const char *p = desc ? desc : ""; *p && n + 1 < size;) {
    const char *e = strchr(p, ';');
    size_t l = e ? (size_t)(e - p) : strlen(p);
    while (l > 0 && p[l - 1] == ' ') l--;
    int scalar = !memchr(p, ' ', l);
    int w = snprintf(out + n, size - n, "%s%.*s%s", n ? ", " : "", (int)l, p, scalar ? " (scalar)" : "");
    if (w < 0) break;
    n += (size_t)w < size - n ? (size_t)w : size - n - 1;
    p += l;
    while (*p == ' ') p++;
    if (*p == ';') p++;
  }
  return out;
}

/* Each row's bytes per array, its id, and a description of the shapes for the writer to check. */
static toplu_status_t npy_format(pl_sink_t *s, pl_chunk_t *c, toplu_error_t *err) {
  npy_sink_t *n = s->impl;
  pl_buf_t *desc = &c->out[PL_CHUNK_BUFS - 1];
  void *scratch = malloc(sizeof(int64_t) * (size_t)(s->post->k + 1));
  if (!scratch) return toplu__errorf(err, TOPLU_ERR_OUT_OF_MEMORY, "out of memory for a top-%d scratch row", s->post->k);
  int first = 1;
  toplu_status_t st = TOPLU_OK;
  if (s->whole) { /* one batch, its outputs as they are; the ids as usual */
    const pl_batch_t *bt = c->n_batches == 1 && c->batches[0].ran ? &c->batches[0] : NULL;
    for (int a = 0; a < n->n && bt; a++) {
      const toplu_tensor_t *t = &bt->out[out_of(s, a)]; /* (output 0's data went to output=NAME's file) */
      describe(desc, t->dtype, t->ndim, t->dims, 1);
      pl_buf_append(&c->out[a], t->data, toplu_tensor_nbytes(t));
    }
    for (int64_t i = 0; i < c->count && bt; i++) pl_buf_id_line(&c->out[n->n], c->rows[i].id);
    first = 0;
    if (!bt) st = toplu__errorf(err, TOPLU_ERR_INTERNAL, "%s: outputs stored whole need one batch that ran", s->path);
  }
  for (int64_t i = 0; i < c->count && !st && !s->whole; i++) {
    const pl_row_t *r = &c->rows[i];
    if (r->fail_stage) continue;
    pl_buf_t d = {0};
    for (int a = 0; a < n->n; a++) {
      toplu_dtype_t dt;
      int nd;
      int64_t dims[TOPLU_MAX_DIMS];
      const void *data = row_array(s, c, r, a, &dt, &nd, dims, scratch);
      describe(&d, dt, nd, dims, 0);
      size_t bytes = toplu_dtype_size(dt);
      for (int k = 0; k < nd; k++) bytes *= (size_t)dims[k];
      pl_buf_append(&c->out[a], data, bytes);
    }
    pl_buf_id_line(&c->out[n->n], r->id);
    if (first) {
      pl_buf_append(desc, d.data, d.len);
      first = 0;
    } else if (d.len != desc->len || memcmp(d.data, desc->data, d.len)) {
      char t1[512], t2[512];
      st = toplu__errorf(err, TOPLU_ERR_SHAPE,
                        "%s: row %s has outputs %s, earlier rows %s; .npy files need the same shapes in every row "
                        "(write .jsonl or .sqlite instead)",
                        s->path, r->id, desc_text((const char *)d.data, t1, sizeof t1),
                        desc_text((const char *)desc->data, t2, sizeof t2));
    }
    pl_buf_free(&d);
  }
  free(scratch);
  for (int a = 0; a < PL_CHUNK_BUFS && !st; a++)
    if (c->out[a].oom) st = toplu__errorf(err, TOPLU_ERR_OUT_OF_MEMORY, "out of memory formatting results");
  return st;
}

/* The .npy header bytes for array a with dim 0 = rows. */
static toplu_status_t header_bytes(npy_array_t *a, int64_t rows, char **buf, size_t *len, toplu_error_t *err) {
  int64_t dims[TOPLU_MAX_DIMS];
  int nd = a->whole ? a->ndim : a->ndim + 1;
  if (nd > TOPLU_MAX_DIMS)
    return toplu__errorf(err, TOPLU_ERR_UNSUPPORTED, "%s: rank %d with the rows' dim, above %d", a->path, nd,
                        TOPLU_MAX_DIMS);
  if (a->whole) {
    memcpy(dims, a->dims, sizeof(int64_t) * (size_t)a->ndim);
  } else {
    dims[0] = rows;
    memcpy(dims + 1, a->dims, sizeof(int64_t) * (size_t)a->ndim);
  }
  FILE *f = open_memstream(buf, len);
  if (!f) return toplu__errorf(err, TOPLU_ERR_OUT_OF_MEMORY, "out of memory for the .npy header of %s", a->path);
  toplu_status_t st = toplu_npy_write_header(f, a->dtype, nd, dims, err);
  fclose(f);
  if (st) {
    free(*buf);
    *buf = NULL;
  }
  return st;
}

/* Parse a description "float32 1x10;int64 ;" into the arrays' shapes. */
static int parse_desc(npy_sink_t *n, const char *d) {
  for (int a = 0; a < n->n; a++) {
    const char *sp = strchr(d, ' '), *semi = sp ? strchr(sp, ';') : NULL;
    if (!sp || !semi) return -1;
    char dt[32];
    snprintf(dt, sizeof dt, "%.*s", (int)(sp - d), d);
    n->a[a].dtype = toplu_dtype_from_name(dt);
    n->a[a].ndim = 0;
    n->a[a].whole = sp[1] == '=';
    for (const char *p = sp + 1 + n->a[a].whole; p < semi;) {
      if (n->a[a].ndim == TOPLU_MAX_DIMS - !n->a[a].whole) return -1;
      char *e;
      n->a[a].dims[n->a[a].ndim++] = strtoll(p, &e, 10);
      if (e == p) return -1;
      p = *e == 'x' ? e + 1 : e;
    }
    n->a[a].have_shape = 1;
    d = semi + 1;
  }
  return 0;
}

/* Append a chunk (the headers first, once); the shapes must match the first rows'. */
static toplu_status_t npy_write(pl_sink_t *s, pl_chunk_t *c, toplu_error_t *err) {
  npy_sink_t *n = s->impl;
  pl_buf_t *desc = &c->out[PL_CHUNK_BUFS - 1];
  toplu_status_t st;
  if (!desc->len) return TOPLU_OK; /* no rows */
  if (!n->a[0].have_shape) {
    if (parse_desc(n, desc->data)) return toplu__errorf(err, TOPLU_ERR_INTERNAL, "bad row description %s", desc->data);
    for (int a = 0; a < n->n; a++) {
      char *h;
      size_t hl;
      if ((st = header_bytes(&n->a[a], 0, &h, &hl, err))) return st;
      st = pl_fd_write(n->a[a].fd, h, hl, n->a[a].part, err);
      free(h);
      if (st) return st;
      n->a[a].len += (int64_t)hl;
      n->a[a].header_len = (int64_t)hl;
    }
  } else {
    pl_buf_t mine = {0};
    for (int a = 0; a < n->n; a++) describe(&mine, n->a[a].dtype, n->a[a].ndim, n->a[a].dims, n->a[a].whole);
    int same = mine.len == desc->len && !memcmp(mine.data, desc->data, mine.len);
    char t1[512], t2[512];
    if (!same)
      toplu__errorf(err, TOPLU_ERR_SHAPE,
                   "%s: rows from %lld have outputs %s, earlier rows %s; .npy files need the same shapes in every row "
                   "(write .jsonl or .sqlite instead)",
                   s->path, (long long)c->first, desc_text((const char *)desc->data, t1, sizeof t1),
                   desc_text((const char *)mine.data, t2, sizeof t2));
    pl_buf_free(&mine);
    if (!same) return TOPLU_ERR_SHAPE;
  }
  for (int a = 0; a <= n->n; a++) {
    if ((st = pl_fd_write(n->a[a].fd, c->out[a].data, c->out[a].len, n->a[a].part, err))) return st;
    n->a[a].len += (int64_t)c->out[a].len;
  }
  n->rows += c->n_ok;
  return TOPLU_OK;
}

/* The checkpoint in the directory (none when a complete output was removed since). */
static toplu_status_t npy_load_state(pl_sink_t *s, pl_state_t *st, int *found, toplu_error_t *err) {
  npy_sink_t *n = s->impl;
  toplu_status_t r = pl_state_load(n->state, st, found, err);
  if (r || !*found) return r;
  if (st->phase == PL_PHASE_COMPLETE) {
    for (int a = 0; a <= n->n; a++)
      if (!pl_exists(n->a[a].path)) { /* removed since: start again */
        pl_state_free(st);
        *found = 0;
        s->output_gone = 1;
        return TOPLU_OK;
      }
    char why[2 * PL_PATH_MAX];
    if (pl_sink_verify("npy", s->path, st, why, sizeof why)) {
      pl_state_free(st);
      *found = 0;
      return toplu__errorf(err, TOPLU_ERR_INVALID_ARGUMENT,
                          "resume: the output %s is not what its job wrote: %s; start over without resume", s->path, why);
    }
  }
  return TOPLU_OK;
}

/* Restore the arrays' shapes and row count from the checkpoint. */
static toplu_status_t restore_extra(pl_sink_t *s, const pl_state_t *st, toplu_error_t *err) {
  npy_sink_t *n = s->impl;
  json_t *ex = st->extra;
  n->rows = json_integer_value(json_object_get(ex, "rows"));
  json_t *a0 = json_object_get(ex, "header_len");
  const char *desc = json_string_value(json_object_get(ex, "shapes"));
  if (desc && *desc) {
    if (parse_desc(n, desc)) return toplu__errorf(err, TOPLU_ERR_PARSE, "%s: bad shapes in the checkpoint", n->state);
    for (int a = 0; a < n->n; a++) n->a[a].header_len = json_integer_value(json_array_get(a0, (size_t)a));
  }
  return TOPLU_OK;
}

/* Create the part files (fresh) or cut them to the checkpoint (resume). */
static toplu_status_t npy_begin(pl_sink_t *s, const pl_state_t *st, toplu_error_t *err) {
  npy_sink_t *n = s->impl;
  toplu_status_t r = pl_mkdir_p(s->path, err);
  if (r) return r;
  if (!st) {
    if ((r = stale_files(s, 1, err))) return r;
    if (pl_file_remove(n->state)) return toplu__errorf(err, TOPLU_ERR_IO, "cannot remove %s: %s", n->state, strerror(errno));
    for (int a = 0; a <= n->n; a++) {
      npy_array_t *x = &n->a[a];
      if (pl_file_remove(x->part) || pl_file_remove(x->path))
        return toplu__errorf(err, TOPLU_ERR_IO, "cannot remove the earlier %s: %s", x->path, strerror(errno));
      x->fd = open(x->part, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0666);
      if (x->fd < 0) return toplu__errorf(err, TOPLU_ERR_IO, "cannot create %s: %s", x->part, strerror(errno));
      x->len = 0;
    }
    return TOPLU_OK;
  }
  if (st->n_files != n->n + 1)
    return toplu__errorf(err, TOPLU_ERR_INVALID_ARGUMENT, "resume: the checkpoint %s lists %d files, the job writes %d",
                        n->state, st->n_files, n->n + 1);
  if ((r = restore_extra(s, st, err))) return r;
  for (int a = 0; a <= n->n; a++) {
    npy_array_t *x = &n->a[a];
    int64_t want = st->file_bytes[a], have = pl_file_size(x->part);
    if (have < want)
      return toplu__errorf(err, TOPLU_ERR_IO,
                          "resume: %s holds %lld bytes, the checkpoint says %lld; start over without resume",
                          x->part, (long long)(have < 0 ? 0 : have), (long long)want);
    x->fd = open(x->part, O_WRONLY | O_CREAT | O_CLOEXEC, 0666);
    if (x->fd < 0) return toplu__errorf(err, TOPLU_ERR_IO, "cannot open %s: %s", x->part, strerror(errno));
    if (ftruncate(x->fd, (off_t)want) != 0 || lseek(x->fd, (off_t)want, SEEK_SET) < 0)
      return toplu__errorf(err, TOPLU_ERR_IO, "cannot cut %s: %s", x->part, strerror(errno));
    x->len = want;
  }
  return TOPLU_OK;
}

/* Record the arrays' shapes and the row count in st->extra. */
static toplu_status_t fill_extra(pl_sink_t *s, pl_state_t *st, toplu_error_t *err) {
  npy_sink_t *n = s->impl;
  pl_buf_t d = {0};
  json_t *hl = json_array(), *ex = json_object();
  for (int a = 0; a < n->n && n->a[0].have_shape; a++) {
    describe(&d, n->a[a].dtype, n->a[a].ndim, n->a[a].dims, n->a[a].whole);
    json_array_append_new(hl, json_integer(n->a[a].header_len));
  }
  json_object_set_new(ex, "shapes", json_string(d.data ? d.data : ""));
  json_object_set_new(ex, "header_len", hl);
  json_object_set_new(ex, "rows", json_integer(n->rows));
  json_t *names = json_array(); /* the files, in the order of file_bytes (pl_sink_verify) */
  for (int a = 0; a <= n->n; a++) json_array_append_new(names, json_string(n->a[a].name));
  json_object_set_new(ex, "names", names);
  pl_buf_free(&d);
  json_decref(st->extra);
  st->extra = ex;
  if (!ex) return toplu__errorf(err, TOPLU_ERR_OUT_OF_MEMORY, "out of memory for the checkpoint of %s", s->path);
  st->n_files = n->n + 1;
  for (int a = 0; a <= n->n; a++) st->file_bytes[a] = n->a[a].len;
  return TOPLU_OK;
}

/* fdatasync every part, then save the checkpoint. */
static toplu_status_t npy_commit(pl_sink_t *s, pl_state_t *st, toplu_error_t *err) {
  npy_sink_t *n = s->impl;
  toplu_status_t r;
  for (int a = 0; a <= n->n; a++)
    if ((r = pl_file_sync(n->a[a].fd, n->a[a].part, err))) return r;
  if ((r = fill_extra(s, st, err))) return r;
  return pl_state_save(n->state, st, err);
}

/* Declared shapes of the arrays, for a job that wrote no rows. */
static void declared_shapes(pl_sink_t *s) {
  npy_sink_t *n = s->impl;
  for (int a = 0; a < n->n; a++) {
    npy_array_t *x = &n->a[a];
    if (s->post->kind == PL_POST_ARGMAX) {
      x->dtype = TOPLU_DTYPE_INT64;
      x->ndim = 0;
    } else if (s->post->kind == PL_POST_TOPK) {
      x->dtype = a == 0 ? TOPLU_DTYPE_INT64 : s->post->score_f64 ? TOPLU_DTYPE_DOUBLE : TOPLU_DTYPE_FLOAT;
      x->ndim = 1;
      x->dims[0] = s->post->k;
    } else {
      int j = out_of(s, a);
      const toplu_value_info_t *v = toplu_model_output(s->model, j);
      const toplu_tensor_t *t = s->empty_out && j < s->n_empty ? &s->empty_out[j] : NULL;
      x->dtype = v->dtype == TOPLU_DTYPE_UNDEFINED ? TOPLU_DTYPE_FLOAT : v->dtype;
      if (t && t->kind == TOPLU_KIND_TENSOR && t->ndim >= 1) { /* shape inference for 0 rows: the spatial dims of a Conv output and the like */
        if (t->dtype != TOPLU_DTYPE_UNDEFINED) x->dtype = t->dtype;
        x->ndim = t->ndim - 1;
        for (int d = 0; d < x->ndim; d++) x->dims[d] = t->dims[d + 1] > 0 ? t->dims[d + 1] : 0;
      } else {
        x->ndim = v->ndim > 0 ? v->ndim - 1 : 0;
        for (int d = 0; d < x->ndim; d++) x->dims[d] = v->dims[d + 1] > 0 ? v->dims[d + 1] : 0;
      }
    }
    x->have_shape = 1;
  }
}

/* Final headers, fdatasync, finishing, renames, complete. */
static toplu_status_t npy_finish(pl_sink_t *s, pl_state_t *st, toplu_error_t *err) {
  npy_sink_t *n = s->impl;
  toplu_status_t r;
  if (st->phase != PL_PHASE_FINISHING) {
    int empty = !n->a[0].have_shape;
    if (empty) declared_shapes(s);
    for (int a = 0; a < n->n; a++) {
      npy_array_t *x = &n->a[a];
      char *h;
      size_t hl;
      if ((r = header_bytes(x, n->rows, &h, &hl, err))) return r;
      if (empty) {
        r = pl_fd_write(x->fd, h, hl, x->part, err);
        x->len = (int64_t)hl;
      } else if ((int64_t)hl != x->header_len) {
        r = toplu__errorf(err, TOPLU_ERR_INTERNAL, "%s: the .npy header changed length", x->part);
      } else if (pwrite(x->fd, h, hl, 0) != (ssize_t)hl) {
        r = toplu__errorf(err, TOPLU_ERR_IO, "%s: cannot rewrite the header: %s", x->part, strerror(errno));
      }
      free(h);
      if (r) return r;
    }
    for (int a = 0; a <= n->n; a++) {
      if ((r = pl_file_sync(n->a[a].fd, n->a[a].part, err))) return r;
      close(n->a[a].fd);
      n->a[a].fd = -1;
    }
    if ((r = fill_extra(s, st, err))) return r;
    st->phase = PL_PHASE_FINISHING;
    if ((r = pl_state_save(n->state, st, err))) return r;
  }
  for (int a = 0; a <= n->n; a++) {
    npy_array_t *x = &n->a[a];
    if (pl_exists(x->part)) {
      if ((r = pl_file_publish(x->part, x->path, err))) return r;
    } else if (!pl_exists(x->path)) {
      return toplu__errorf(err, TOPLU_ERR_IO, "resume: neither %s nor %s exists; start over without resume",
                          x->part, x->path);
    }
  }
  st->phase = PL_PHASE_COMPLETE;
  return pl_state_save(n->state, st, err);
}

/* Close the part files. */
static void npy_destroy(pl_sink_t *s) {
  npy_sink_t *n = s->impl;
  if (!n) return;
  for (int a = 0; a <= n->n; a++)
    if (n->a[a].fd >= 0) close(n->a[a].fd);
  free(n);
  s->impl = NULL;
}

/* A file this job writes (NAME.npy, ids.txt) already in a directory no job wrote (no .toplu-state). */
static int npy_foreign(pl_sink_t *s, char *why, size_t why_size) {
  npy_sink_t *n = s->impl;
  if (pl_exists(n->state)) return 0;
  for (int a = 0; a <= n->n; a++)
    if (pl_exists(n->a[a].path)) {
      snprintf(why, why_size, "output %s holds %s, which this job would replace, and no toplu job wrote it (no "
               ".toplu-state)", s->path, n->a[a].name);
      return 1;
    }
  return 0;
}

static const pl_sink_ops_t npy_ops = {"npy", npy_load_state, npy_begin, npy_format, npy_write,
                                      npy_commit, npy_finish, npy_destroy, npy_foreign};

toplu_status_t pl_sink_npy_open(pl_sink_t *s, toplu_error_t *err) {
  npy_sink_t *n = calloc(1, sizeof *n);
  if (!n) return toplu__errorf(err, TOPLU_ERR_OUT_OF_MEMORY, "out of memory for the sink %s", s->path);
  /* no file open yet: npy_destroy after an early refusal closed fd 0 (calloc's) for every array it counted */
  for (int a = 0; a <= NPY_MAX_ARRAYS; a++) n->a[a].fd = -1;
  s->impl = n;
  s->ops = &npy_ops;
  const uint16_t one = 1;
  unsigned char c0;
  memcpy(&c0, &one, 1);
  if (c0 != 1) return toplu__errorf(err, TOPLU_ERR_UNSUPPORTED, "the .npy directory sink needs a little-endian host");
  if (pl_exists(s->path) && !pl_is_dir(s->path))
    return toplu__errorf(err, TOPLU_ERR_INVALID_ARGUMENT,
                        "output %s is a file of unknown kind (a directory, or a name ending in .jsonl, .csv, .sqlite "
                        "or .db)",
                        s->path);
  const pl_post_t *p = s->post;
  if (p->kind == PL_POST_ARGMAX) {
    n->n = 1;
    snprintf(n->a[0].name, sizeof n->a[0].name, "argmax.npy");
  } else if (p->kind == PL_POST_TOPK) {
    n->n = 2;
    snprintf(n->a[0].name, sizeof n->a[0].name, "topk_index.npy");
    snprintf(n->a[1].name, sizeof n->a[1].name, "topk_score.npy");
  } else {
    int outs = toplu_model_output_count(s->model);
    if (outs > NPY_MAX_ARRAYS) /* (n->n stays 0: npy_destroy walks a[0..n->n]) */
      return toplu__errorf(err, TOPLU_ERR_UNSUPPORTED, "the .npy directory sink writes up to %d outputs; the model has %d",
                          NPY_MAX_ARRAYS, outs);
    n->n = p->selected ? 1 : outs;
    for (int j = 0; j < n->n; j++) {
      char nm[500];
      pl_sink_output_name(s->model, out_of(s, j), 1, nm, sizeof nm);
      snprintf(n->a[j].name, sizeof n->a[j].name, "%s.npy", nm);
      for (int k = 0; k < j; k++)
        if (!strcmp(n->a[k].name, n->a[j].name))
          return toplu__errorf(err, TOPLU_ERR_INVALID_ARGUMENT, "two outputs would both be written to %s/%s", s->path,
                              n->a[j].name);
    }
  }
  snprintf(n->a[n->n].name, sizeof n->a[n->n].name, "ids.txt");
  for (int a = 0; a <= n->n; a++) {
    n->a[a].fd = -1;
    char tmp[PL_PATH_MAX];
    if (pl_path_join(s->path, n->a[a].name, n->a[a].path, sizeof n->a[a].path) ||
        pl_path_hidden(n->a[a].path, ".part", tmp, sizeof tmp))
      return toplu__errorf(err, TOPLU_ERR_INVALID_ARGUMENT, "output %s: path longer than %d bytes", s->path, PL_PATH_MAX - 1);
    memcpy(n->a[a].part, tmp, sizeof tmp);
  }
  if (pl_path_join(s->path, ".toplu-state", n->state, sizeof n->state))
    return toplu__errorf(err, TOPLU_ERR_INVALID_ARGUMENT, "output %s: path longer than %d bytes", s->path, PL_PATH_MAX - 1);
  return stale_files(s, 0, err);
}
