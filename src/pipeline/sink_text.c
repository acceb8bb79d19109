/*
 * pipeline/sink_text.c - JSONL and CSV sinks.
 *
 * JSONL: one object per row, "id" first, then "outputs" (raw/softmax: every
 * output as nested arrays), "argmax" (and "label"), or "topk" (a list of
 * {"index", "label", "score"}); spacing as Python's json.dumps.
 * CSV: a header line, then one line per row: id,argmax[,label];
 * id,index_1[,label_1],score_1,...; or id and every output flattened (C
 * order, columns NAME_0, NAME_1, ...; every row must have the same output
 * shapes).  The header comes from the first row written.
 * Files: the output, its part ".NAME.part" and checkpoint
 * ".NAME.toplu-state" in the same directory.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/error.h"
#include "pipeline/files.h"
#include "pipeline/sink.h"

typedef struct text_sink {
  int csv;
  char part[PL_PATH_MAX], state[PL_PATH_MAX];
  int fd;
  int64_t len;
  char *header; /* CSV: the header line written (with its newline) */
} text_sink_t;

/* The checkpoint beside the output (none when a complete output was removed since). */
static toplu_status_t text_load_state(pl_sink_t *s, pl_state_t *st, int *found, toplu_error_t *err) {
  text_sink_t *t = s->impl;
  toplu_status_t r = pl_state_load(t->state, st, found, err);
  if (r || !*found) return r;
  if (st->phase == PL_PHASE_COMPLETE && !pl_exists(s->path)) { /* the output was removed since */
    pl_state_free(st);
    *found = 0;
    s->output_gone = 1;
  } else if (st->phase == PL_PHASE_COMPLETE) {
    char why[2 * PL_PATH_MAX];
    if (pl_sink_verify(s->ops->kind, s->path, st, why, sizeof why)) {
      pl_state_free(st);
      *found = 0;
      return toplu__errorf(err, TOPLU_ERR_INVALID_ARGUMENT,
                          "resume: the output %s is not what its job wrote: %s; start over without resume", s->path, why);
    }
  }
  return TOPLU_OK;
}

/* Read the part's first line as the CSV header. */
static toplu_status_t read_header(text_sink_t *t, toplu_error_t *err) {
  FILE *f = fopen(t->part, "rb");
  if (!f) return toplu__errorf(err, TOPLU_ERR_IO, "%s: cannot open: %s", t->part, strerror(errno));
  pl_buf_t b = {0};
  int ch;
  while ((ch = fgetc(f)) != EOF) {
    pl_buf_putc(&b, (char)ch);
    if (ch == '\n') break;
  }
  fclose(f);
  if (b.oom) {
    pl_buf_free(&b);
    return toplu__errorf(err, TOPLU_ERR_OUT_OF_MEMORY, "out of memory reading the CSV header of %s", t->part);
  }
  t->header = b.data;
  return TOPLU_OK;
}

/* Create the part file (fresh) or cut it to the checkpoint (resume). */
static toplu_status_t text_begin(pl_sink_t *s, const pl_state_t *st, toplu_error_t *err) {
  text_sink_t *t = s->impl;
  if (!st) {
    char dir[PL_PATH_MAX];
    pl_path_dir(s->path, dir, sizeof dir);
    if (!pl_is_dir(dir)) {
      toplu_status_t r = pl_mkdir_p(dir, err);
      if (r) return r;
    }
    if (pl_file_remove(t->state) || pl_file_remove(t->part) || pl_file_remove(s->path))
      return toplu__errorf(err, TOPLU_ERR_IO, "cannot remove the earlier output %s or its part files: %s", s->path,
                          strerror(errno));
    t->fd = open(t->part, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0666);
    if (t->fd < 0) return toplu__errorf(err, TOPLU_ERR_IO, "cannot create %s: %s", t->part, strerror(errno));
    t->len = 0;
    return TOPLU_OK;
  }
  int64_t want = st->n_files ? st->file_bytes[0] : 0, have = pl_file_size(t->part);
  if (have < want)
    return toplu__errorf(err, TOPLU_ERR_IO,
                        "resume: %s holds %lld bytes, the checkpoint %s says %lld were written; start over without "
                        "resume",
                        t->part, (long long)(have < 0 ? 0 : have), t->state, (long long)want);
  t->fd = open(t->part, O_WRONLY | O_CREAT | O_CLOEXEC, 0666);
  if (t->fd < 0) return toplu__errorf(err, TOPLU_ERR_IO, "cannot open %s: %s", t->part, strerror(errno));
  if (ftruncate(t->fd, (off_t)want) != 0 || lseek(t->fd, (off_t)want, SEEK_SET) < 0)
    return toplu__errorf(err, TOPLU_ERR_IO, "cannot cut %s to %lld bytes: %s", t->part, (long long)want, strerror(errno));
  t->len = want;
  if (t->csv && want > 0) return read_header(t, err);
  return TOPLU_OK;
}

/* The id as the first CSV field or the JSON "id" value. */
static void put_id(pl_buf_t *b, const pl_row_t *r, int csv) {
  if (r->id_is_number) pl_buf_puts(b, r->id);
  else if (csv) pl_buf_csv_field(b, r->id);
  else pl_buf_json_string(b, r->id);
}

/* CSV header and value columns of one row; returns the number of value columns. */
static int64_t csv_row(const pl_sink_t *s, const pl_chunk_t *c, const pl_row_t *r, pl_buf_t *line, pl_buf_t *hdr) {
  const pl_post_t *p = s->post;
  int64_t cols = 0;
  if (hdr) pl_buf_puts(hdr, "id");
  put_id(line, r, 1);
  if (p->kind == PL_POST_ARGMAX) {
    const char *label = pl_post_label(p, r->res.argmax);
    pl_buf_putc(line, ',');
    pl_buf_int(line, r->res.argmax);
    if (hdr) pl_buf_puts(hdr, ",argmax");
    if (p->n_labels) {
      pl_buf_putc(line, ',');
      pl_buf_csv_field(line, label ? label : "");
      if (hdr) pl_buf_puts(hdr, ",label");
    }
    return 1;
  }
  if (p->kind == PL_POST_TOPK) {
    for (int i = 0; i < p->k; i++) {
      int have = i < r->res.k;
      pl_buf_putc(line, ',');
      if (have) pl_buf_int(line, r->res.topk_index[i]);
      if (hdr) pl_buf_printf(hdr, ",index_%d", i + 1);
      if (p->n_labels) {
        const char *label = have ? pl_post_label(p, r->res.topk_index[i]) : NULL;
        pl_buf_putc(line, ',');
        pl_buf_csv_field(line, label ? label : "");
        if (hdr) pl_buf_printf(hdr, ",label_%d", i + 1);
      }
      pl_buf_putc(line, ',');
      if (have && p->score_f64) pl_buf_double(line, r->res.topk_score[i]);
      else if (have) pl_buf_float(line, (float)r->res.topk_score[i]);
      if (hdr) pl_buf_printf(hdr, ",score_%d", i + 1);
    }
    return p->k;
  }
  for (int j = 0; j < c->n_outputs; j++) {
    if (!pl_post_keeps(p, j)) continue;
    toplu_dtype_t dt;
    int nd;
    int64_t dims[TOPLU_MAX_DIMS], n = 1;
    const void *d = pl_row_output(c, r, j, &dt, &nd, dims);
    if (!d) continue;
    for (int k = 0; k < nd; k++) n *= dims[k];
    char name[512];
    pl_sink_output_name(s->model, j, 0, name, sizeof name);
    for (int64_t i = 0; i < n; i++) {
      pl_buf_putc(line, ',');
      pl_buf_element(line, dt, d, i);
      if (hdr) {
        char col[600];
        snprintf(col, sizeof col, "%s_%lld", name, (long long)i);
        pl_buf_putc(hdr, ',');
        pl_buf_csv_field(hdr, col);
      }
    }
    cols += n;
  }
  return cols;
}

/* One JSONL object or CSV line per row; the CSV header in out[1]. */
static toplu_status_t text_format(pl_sink_t *s, pl_chunk_t *c, toplu_error_t *err) {
  text_sink_t *t = s->impl;
  const pl_post_t *p = s->post;
  pl_buf_t *b = &c->out[0];
  int64_t cols0 = -1;
  for (int64_t i = 0; i < c->count; i++) {
    const pl_row_t *r = &c->rows[i];
    if (r->fail_stage) continue;
    if (t->csv) {
      int64_t cols = csv_row(s, c, r, b, cols0 < 0 ? &c->out[1] : NULL);
      if (cols0 >= 0 && cols != cols0)
        return toplu__errorf(err, TOPLU_ERR_SHAPE,
                            "CSV output: row %s has %lld values, earlier rows %lld; a CSV needs the same output shapes "
                            "in every row (write .jsonl or .sqlite instead)",
                            r->id, (long long)cols, (long long)cols0);
      cols0 = cols;
      pl_buf_putc(b, '\n');
      continue;
    }
    pl_buf_puts(b, "{\"id\": ");
    put_id(b, r, 0);
    if (p->kind == PL_POST_ARGMAX) {
      pl_buf_puts(b, ", \"argmax\": ");
      pl_buf_int(b, r->res.argmax);
      const char *label = pl_post_label(p, r->res.argmax);
      if (label) {
        pl_buf_puts(b, ", \"label\": ");
        pl_buf_json_string(b, label);
      }
    } else if (p->kind == PL_POST_TOPK) {
      pl_buf_puts(b, ", \"topk\": ");
      pl_sink_json_topk(s, r, b);
    } else {
      pl_buf_puts(b, ", \"outputs\": ");
      pl_sink_json_outputs(s, c, r, b);
    }
    pl_buf_puts(b, "}\n");
  }
  if (c->out[1].len) pl_buf_putc(&c->out[1], '\n');
  if (b->oom || c->out[1].oom) return toplu__errorf(err, TOPLU_ERR_OUT_OF_MEMORY, "out of memory formatting results");
  return TOPLU_OK;
}

/* Append a chunk (the CSV header first, once). */
static toplu_status_t text_write(pl_sink_t *s, pl_chunk_t *c, toplu_error_t *err) {
  text_sink_t *t = s->impl;
  if (t->csv && c->out[1].len) {
    if (!t->header) {
      toplu_status_t r = pl_fd_write(t->fd, c->out[1].data, c->out[1].len, t->part, err);
      if (r) return r;
      t->len += (int64_t)c->out[1].len;
      if (!(t->header = strdup(c->out[1].data))) return toplu__errorf(err, TOPLU_ERR_OUT_OF_MEMORY, "out of memory keeping the CSV header of %s", t->part);
    } else if (strcmp(t->header, c->out[1].data)) {
      return toplu__errorf(err, TOPLU_ERR_SHAPE,
                          "CSV output: rows %lld.. have other columns than the first rows (output shapes differ); "
                          "write .jsonl or .sqlite instead",
                          (long long)c->first);
    }
  }
  toplu_status_t r = pl_fd_write(t->fd, c->out[0].data, c->out[0].len, t->part, err);
  if (!r) t->len += (int64_t)c->out[0].len;
  return r;
}

/* fdatasync the part, then save the checkpoint. */
static toplu_status_t text_commit(pl_sink_t *s, pl_state_t *st, toplu_error_t *err) {
  text_sink_t *t = s->impl;
  toplu_status_t r = pl_file_sync(t->fd, t->part, err);
  if (r) return r;
  st->n_files = 1;
  st->file_bytes[0] = t->len;
  return pl_state_save(t->state, st, err);
}

/* The CSV header of a job without rows, from the model when its columns do not depend on a row: argmax and
 * top-k, or raw outputs whose dims after the batch dim the model fixes (csv_row's columns).  0 when they do. */
static int empty_csv_header(const pl_sink_t *s, pl_buf_t *h) {
  const pl_post_t *p = s->post;
  pl_buf_puts(h, "id");
  if (p->kind == PL_POST_ARGMAX) {
    pl_buf_puts(h, p->n_labels ? ",argmax,label" : ",argmax");
  } else if (p->kind == PL_POST_TOPK) {
    for (int i = 1; i <= p->k; i++) {
      pl_buf_printf(h, ",index_%d", i);
      if (p->n_labels) pl_buf_printf(h, ",label_%d", i);
      pl_buf_printf(h, ",score_%d", i);
    }
  } else {
    for (int j = 0; j < toplu_model_output_count(s->model); j++) {
      const toplu_value_info_t *v = toplu_model_output(s->model, j);
      int64_t n = 1;
      if (v->ndim < 1) return 0;
      for (int d = 1; d < v->ndim; d++) {
        if (v->dims[d] < 0) return 0;
        n *= v->dims[d];
      }
      char name[512], col[600];
      pl_sink_output_name(s->model, j, 0, name, sizeof name);
      for (int64_t i = 0; i < n; i++) {
        snprintf(col, sizeof col, "%s_%lld", name, (long long)i);
        pl_buf_putc(h, ',');
        pl_buf_csv_field(h, col);
      }
    }
  }
  pl_buf_putc(h, '\n');
  return !h->oom;
}

/* Finishing, rename into place, complete. */
static toplu_status_t text_finish(pl_sink_t *s, pl_state_t *st, toplu_error_t *err) {
  text_sink_t *t = s->impl;
  toplu_status_t r;
  if (t->fd >= 0 && t->csv && t->len == 0) {
    /* no row: the header alone where the model tells the columns, so that CSV readers (pandas) read an empty table
     * with its columns (a 0-byte file has none: a fresh user's finding of 2026-12-06, an empty shard) */
    pl_buf_t h = {0};
    if (empty_csv_header(s, &h)) {
      r = pl_fd_write(t->fd, h.data, h.len, t->part, err);
      if (!r) t->len += (int64_t)h.len;
    } else {
      r = TOPLU_OK;
    }
    pl_buf_free(&h);
    if (r) return r;
  }
  if (t->fd >= 0) {
    if ((r = pl_file_sync(t->fd, t->part, err))) return r;
    close(t->fd);
    t->fd = -1;
    st->n_files = 1;
    st->file_bytes[0] = t->len;
  }
  st->phase = PL_PHASE_FINISHING;
  if ((r = pl_state_save(t->state, st, err))) return r;
  if (pl_exists(t->part)) {
    if ((r = pl_file_publish(t->part, s->path, err))) return r;
  } else if (!pl_exists(s->path)) {
    return toplu__errorf(err, TOPLU_ERR_IO, "resume: neither %s nor %s exists; start over without resume",
                        t->part, s->path);
  }
  st->phase = PL_PHASE_COMPLETE;
  return pl_state_save(t->state, st, err);
}

/* Close the part file. */
static void text_destroy(pl_sink_t *s) {
  text_sink_t *t = s->impl;
  if (!t) return;
  if (t->fd >= 0) close(t->fd);
  free(t->header);
  free(t);
  s->impl = NULL;
}

/* An existing output without a checkpoint beside it was not written by a job. */
static int text_foreign(pl_sink_t *s, char *why, size_t why_size) {
  text_sink_t *t = s->impl;
  if (!pl_exists(s->path) || pl_exists(t->state)) return 0;
  snprintf(why, why_size, "output %s exists and no toplu job wrote it (there is no %s beside it)", s->path, t->state);
  return 1;
}

static const pl_sink_ops_t jsonl_ops = {"jsonl", text_load_state, text_begin, text_format, text_write,
                                        text_commit, text_finish, text_destroy, text_foreign};
static const pl_sink_ops_t csv_ops = {"csv", text_load_state, text_begin, text_format, text_write,
                                      text_commit, text_finish, text_destroy, text_foreign};

toplu_status_t pl_sink_text_open(pl_sink_t *s, int csv, toplu_error_t *err) {
  text_sink_t *t = calloc(1, sizeof *t);
  if (!t) return toplu__errorf(err, TOPLU_ERR_OUT_OF_MEMORY, "out of memory for the sink %s", s->path);
  s->impl = t;
  s->ops = csv ? &csv_ops : &jsonl_ops;
  t->csv = csv;
  t->fd = -1;
  if (pl_is_dir(s->path)) return toplu__errorf(err, TOPLU_ERR_INVALID_ARGUMENT, "output %s is a directory", s->path);
  if (pl_path_hidden(s->path, ".part", t->part, sizeof t->part) ||
      pl_path_hidden(s->path, ".toplu-state", t->state, sizeof t->state))
    return toplu__errorf(err, TOPLU_ERR_INVALID_ARGUMENT, "output %s: path longer than %d bytes", s->path, PL_PATH_MAX - 1);
  return TOPLU_OK;
}
