/* pipeline/sink.c - choosing a sink by name, and the JSON text its kinds share. */
#include "pipeline/sink.h"
#include "toplu/npy.h"

#include <ctype.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "pipeline/files.h"

/* 1 when path ends with ext (case-insensitive). */
static int ends_with(const char *path, const char *ext) {
  size_t n = strlen(path), e = strlen(ext);
  if (n < e) return 0;
  for (size_t i = 0; i < e; i++)
    if (tolower((unsigned char)path[n - e + i]) != tolower((unsigned char)ext[i])) return 0;
  return 1;
}

const char *pl_sink_kind(const char *path) {
  if (ends_with(path, ".jsonl") || ends_with(path, ".ndjson")) return "jsonl";
  if (ends_with(path, ".csv")) return "csv";
  if (ends_with(path, ".sqlite") || ends_with(path, ".sqlite3") || ends_with(path, ".db")) return "sqlite";
  /* A directory: one that exists, a name ending in '/', or a name whose
   * extension is not a word (none, or "v2", "1.0-8"); "results.json" or
   * "out.txt" name a file of a kind there is no sink for. */
  size_t n = strlen(path);
  if (n == 0 || path[n - 1] == '/' || pl_is_dir(path)) return "npy";
  const char *base = strrchr(path, '/');
  base = base ? base + 1 : path;
  const char *dot = strrchr(base, '.');
  if (!dot || dot == base || !dot[1]) return "npy";
  for (const char *q = dot + 1; *q; q++)
    if (!isalpha((unsigned char)*q)) return "npy";
  return "unknown";
}

int pl_sink_verify(const char *kind, const char *path, const pl_state_t *st, char *why, size_t why_size) {
  if (!strcmp(kind, "sqlite")) {
    sqlite3 *db = NULL;
    sqlite3_stmt *q = NULL;
    int64_t rows = -1;
    /* the table the rows went to: results, or the sqlite_table the checkpoint names (an identifier, checked) */
    const char *table = json_string_value(json_object_get(st->extra, "table"));
    char why_t[128];
    if (!table || pl_sink_sqlite_table_bad(table, why_t, sizeof why_t)) table = "results";
    char sql[128];
    snprintf(sql, sizeof sql, "SELECT count(*) FROM \"%s\"", table);
    if (sqlite3_open_v2(path, &db, SQLITE_OPEN_READONLY, NULL) == SQLITE_OK &&
        sqlite3_prepare_v2(db, sql, -1, &q, NULL) == SQLITE_OK && sqlite3_step(q) == SQLITE_ROW)
      rows = sqlite3_column_int64(q, 0);
    sqlite3_finalize(q);
    sqlite3_close(db);
    if (rows == st->processed) return 0;
    if (rows < 0) snprintf(why, why_size, "%s has no readable table %s; its checkpoint says %lld rows", path, table,
                           (long long)st->processed);
    else snprintf(why, why_size, "%s holds %lld rows in %s, its checkpoint says %lld", path, (long long)rows, table,
                  (long long)st->processed);
    return -1;
  }
  if (!strcmp(kind, "npy")) {
    json_t *names = json_object_get(st->extra, "names");
    if (!json_is_array(names)) return 0; /* a checkpoint of a toplu that did not record them */
    for (size_t i = 0; i < json_array_size(names) && (int)i < st->n_files; i++) {
      const char *name = json_string_value(json_array_get(names, i));
      char p[PL_PATH_MAX];
      if (!name || pl_path_join(path, name, p, sizeof p)) continue;
      int64_t have = pl_file_size(p);
      if (have == st->file_bytes[i]) continue;
      snprintf(why, why_size, "%s %s, its checkpoint says %lld bytes", p, have < 0 ? "is missing" : "holds other bytes",
               (long long)st->file_bytes[i]);
      if (have >= 0) snprintf(why + strlen(why), why_size - strlen(why), " (it has %lld)", (long long)have);
      return -1;
    }
    return 0;
  }
  if (st->n_files < 1) return 0;
  int64_t have = pl_file_size(path);
  if (have == st->file_bytes[0]) return 0;
  snprintf(why, why_size, "%s holds %lld bytes, its checkpoint says %lld", path, (long long)have,
           (long long)st->file_bytes[0]);
  return -1;
}

const char pl_sink_kinds_text[] =
    "NAME.jsonl (or .ndjson), NAME.csv, NAME.sqlite (or .sqlite3, .db), or a directory of .npy files (an existing "
    "one, a name without an extension, or a name ending in '/')";

toplu_status_t pl_sink_open(const char *path, const char *table, const toplu_model_t *model, const pl_post_t *post,
                            pl_sink_t **out, toplu_error_t *err) {
  *out = NULL;
  pl_sink_t *s = calloc(1, sizeof *s);
  if (!s || !(s->path = strdup(path)) || (table && !(s->table = strdup(table)))) {
    if (s) free(s->path);
    free(s);
    return toplu__errorf(err, TOPLU_ERR_OUT_OF_MEMORY, "out of memory for the sink %s", path);
  }
  s->model = model;
  s->post = post;
  const char *kind = pl_sink_kind(path);
  toplu_status_t st;
  if (table && strcmp(kind, "sqlite"))
    st = toplu__errorf(err, TOPLU_ERR_INVALID_ARGUMENT, "sqlite_table '%s': the output %s is not an SQLite database", table,
                      path);
  else if (!strcmp(kind, "jsonl")) st = pl_sink_text_open(s, 0, err);
  else if (!strcmp(kind, "csv")) st = pl_sink_text_open(s, 1, err);
  else if (!strcmp(kind, "sqlite")) st = pl_sink_sqlite_open(s, err);
  else if (!strcmp(kind, "npy")) st = pl_sink_npy_open(s, err);
  else
    st = toplu__errorf(err, TOPLU_ERR_INVALID_ARGUMENT, "output %s: no sink writes '%s' files; the output is %s", path,
                      strrchr(path, '.'), pl_sink_kinds_text);
  if (st) {
    pl_sink_destroy(s);
    return st;
  }
  *out = s;
  return TOPLU_OK;
}

void pl_sink_destroy(pl_sink_t *s) {
  if (!s) return;
  if (s->ops && s->ops->destroy) s->ops->destroy(s);
  free(s->path);
  free(s->table);
  free(s->empty_out);
  free(s);
}

void pl_sink_output_name(const toplu_model_t *m, int j, int file, char *buf, size_t size) {
  const char *name = toplu_model_output(m, j)->name;
  if (!file) {
    snprintf(buf, size, "%s", name);
    return;
  }
  toplu_npy_file_stem(name, buf, size);
  size_t n = strlen(buf);
  if (!n) snprintf(buf, size, "output_%d", j);
}

void pl_sink_json_outputs(const pl_sink_t *s, const pl_chunk_t *c, const pl_row_t *r, pl_buf_t *b) {
  pl_buf_putc(b, '{');
  for (int j = 0, first = 1; j < c->n_outputs; j++) {
    if (!pl_post_keeps(s->post, j)) continue;
    toplu_dtype_t dt;
    int nd;
    int64_t dims[TOPLU_MAX_DIMS];
    const void *d = pl_row_output(c, r, j, &dt, &nd, dims);
    if (!first) pl_buf_puts(b, ", ");
    first = 0;
    pl_buf_json_string(b, toplu_model_output(s->model, j)->name);
    pl_buf_puts(b, ": ");
    if (d) pl_buf_json_tensor(b, dt, nd, dims, d);
    else pl_buf_puts(b, "null");
  }
  pl_buf_putc(b, '}');
}

void pl_sink_json_topk(const pl_sink_t *s, const pl_row_t *r, pl_buf_t *b) {
  pl_buf_putc(b, '[');
  for (int i = 0; i < r->res.k; i++) {
    if (i) pl_buf_puts(b, ", ");
    pl_buf_puts(b, "{\"index\": ");
    pl_buf_int(b, r->res.topk_index[i]);
    const char *label = pl_post_label(s->post, r->res.topk_index[i]);
    if (label) {
      pl_buf_puts(b, ", \"label\": ");
      pl_buf_json_string(b, label);
    }
    pl_buf_puts(b, ", \"score\": ");
    if (s->post->score_f64) pl_buf_double(b, r->res.topk_score[i]);
    else pl_buf_float(b, (float)r->res.topk_score[i]);
    pl_buf_putc(b, '}');
  }
  pl_buf_putc(b, ']');
}
