/* pipeline/source.c - opening sources by kind, and helpers they share. */
#include "pipeline/source.h"

#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/error.h"
#include "core/file.h"
#include "pipeline/files.h"
#include "pipeline/identity.h"

/* 1 when path ends with ext (case-insensitive). */
static int has_ext(const char *path, const char *ext) {
  size_t n = strlen(path), e = strlen(ext);
  if (n < e) return 0;
  for (size_t i = 0; i < e; i++)
    if (tolower((unsigned char)path[n - e + i]) != tolower((unsigned char)ext[i])) return 0;
  return 1;
}

int pl_is_image_name(const char *path) {
  return has_ext(path, ".jpg") || has_ext(path, ".jpeg") || has_ext(path, ".png");
}

int pl_info_row_dims(const toplu_value_info_t *info, int fixed_batch, int64_t *dims) {
  (void)fixed_batch;
  if (info->ndim < 1) return -1;
  for (int d = 1; d < info->ndim; d++) {
    if (info->dims[d] < 0) return -1;
    dims[d - 1] = info->dims[d];
  }
  return info->ndim - 1;
}

toplu_status_t pl_source_open(const char *path, const toplu_model_t *model, int input, const pl_source_cfg_t *cfg,
                              pl_source_t **out, toplu_error_t *err) {
  *out = NULL;
  struct stat sb;
  if (stat(path, &sb) == 0 && !S_ISDIR(sb.st_mode) && !S_ISREG(sb.st_mode))
    return toplu__errorf(err, TOPLU_ERR_INVALID_ARGUMENT,
                        "source %s is %s; sources are regular files, directories or globs of them", path,
                        toplu__file_kind((unsigned)sb.st_mode));
  pl_source_t *s = calloc(1, sizeof *s);
  if (!s || !(s->path = strdup(path))) {
    free(s);
    return toplu__errorf(err, TOPLU_ERR_OUT_OF_MEMORY, "out of memory for the source %s", path);
  }
  s->csv_header = cfg->csv_header;
  s->csv_delim = cfg->csv_delim;
  s->max_line = cfg->max_line > 0 ? cfg->max_line : INT64_MAX;
  int is_jsonl = has_ext(path, ".jsonl") || has_ext(path, ".ndjson");
  if (!is_jsonl) {
    if (input < 0) {
      if (toplu_model_input_count(model) != 1) {
        pl_source_destroy(s);
        return toplu__errorf(err, TOPLU_ERR_INVALID_ARGUMENT,
                            "source %s does not say which input it is for (the model has %d inputs): give "
                            "NAME=%s",
                            path, toplu_model_input_count(model), path);
      }
      input = 0;
    }
    s->n_fields = 1;
    s->field_input[0] = input;
    s->field_info[0] = toplu_model_input(model, input);
  }
  toplu_status_t st;
  int glob_chars = strpbrk(path, "*?[") != NULL;
  if (is_jsonl) st = pl_source_jsonl_open(s, model, input, err);
  else if (pl_is_dir(path)) st = pl_source_images_open(s, 0, err);
  else if (has_ext(path, ".npy")) st = pl_source_npy_open(s, model, err);
  else if (has_ext(path, ".csv")) st = pl_source_csv_open(s, err);
  else if (glob_chars && !pl_exists(path)) st = pl_source_images_open(s, 1, err);
  else if (pl_is_image_name(path)) st = pl_source_images_open(s, 0, err);
  else if (!pl_exists(path)) st = toplu__errorf(err, TOPLU_ERR_IO, "source %s: no such file or directory", path);
  else
    st = toplu__errorf(err, TOPLU_ERR_INVALID_ARGUMENT,
                      "source %s: unknown kind (expected a .npy, .csv or .jsonl file, a directory or a glob of "
                      ".jpg/.jpeg/.png images)",
                      path);
  if (st) {
    pl_source_destroy(s);
    return st;
  }
  *out = s;
  return TOPLU_OK;
}

void pl_source_destroy(pl_source_t *s) {
  if (!s) return;
  if (s->ops && s->ops->destroy) s->ops->destroy(s);
  for (int f = 0; f < PL_MAX_FIELDS; f++) free(s->field_key[f]);
  free(s->path);
  free(s);
}

json_t *pl_source_identity(const pl_source_t *s, char *why, size_t why_size) {
  if (s->is_image) {
    json_t *o = pl_source_images_identity(s);
    if (!o) snprintf(why, why_size, "out of memory identifying %s", s->path);
    return o;
  }
  return pl_identity_file(s->path, why, why_size);
}

void pl_glob_base(const char *pattern, char *out, size_t size) {
  const char *w = strpbrk(pattern, "*?[");
  const char *slash = NULL;
  for (const char *p = pattern; *p && (!w || p < w); p++)
    if (*p == '/') slash = p;
  if (!slash) snprintf(out, size, ".");
  else if (slash == pattern) snprintf(out, size, "/");
  else snprintf(out, size, "%.*s", (int)(slash - pattern), pattern);
}

/* Grow the three index arrays to hold cap entries; 0 or -1. */
static int grow_index(int64_t **o, int64_t **l, int64_t **ln, int64_t cap) {
  int64_t *no = realloc(*o, (size_t)cap * sizeof **o);
  if (no) *o = no;
  int64_t *nl = no ? realloc(*l, (size_t)cap * sizeof **l) : NULL;
  if (nl) *l = nl;
  int64_t *nn = nl ? realloc(*ln, (size_t)cap * sizeof **ln) : NULL;
  if (nn) *ln = nn;
  return nn ? 0 : -1;
}

toplu_status_t pl_index_lines(const char *path, int64_t **offs, int64_t **lens, int64_t **lines, int64_t *n,
                              toplu_error_t *err) {
  *offs = *lens = *lines = NULL;
  *n = 0;
  int fd;
  toplu_status_t ost = pl_open_regular(path, &fd, NULL, err);
  if (ost) return ost;
  FILE *f = fdopen(fd, "rb");
  if (!f) {
    close(fd);
    return toplu__errorf(err, TOPLU_ERR_OUT_OF_MEMORY, "%s: out of memory opening it", path);
  }
  int64_t cap = 1024, cnt = 0, pos = 0, start = 0, len = 0, line = 1;
  int blank = 1, prev_cr = 0;
  int64_t *o = NULL, *l = NULL, *ln = NULL;
  int oom = grow_index(&o, &l, &ln, cap);
  char buf[1 << 16];
  size_t got;
  int first_block = 1;
  while (!oom && (got = fread(buf, 1, sizeof buf, f)) > 0) {
    size_t i0 = 0;
    if (first_block && got >= 3 && (unsigned char)buf[0] == 0xEF && (unsigned char)buf[1] == 0xBB &&
        (unsigned char)buf[2] == 0xBF) { /* a UTF-8 byte order mark */
      i0 = 3;
      pos = start = 3;
    }
    first_block = 0;
    for (size_t i = i0; i < got; i++, pos++) {
      char ch = buf[i];
      if (ch == '\n' && prev_cr) { /* the LF of CR LF: the line ended at the CR */
        prev_cr = 0;
        start = pos + 1;
        continue;
      }
      prev_cr = ch == '\r';
      if (ch == '\n' || ch == '\r') {
        if (!blank) {
          if (cnt == cap && grow_index(&o, &l, &ln, cap *= 2)) {
            oom = 1;
            break;
          }
          o[cnt] = start;
          l[cnt] = len;
          ln[cnt] = line;
          cnt++;
        }
        start = pos + 1;
        len = 0;
        blank = 1;
        line++;
        continue;
      }
      len++;
      if (ch != ' ' && ch != '\t') blank = 0;
    }
  }
  int bad = ferror(f);
  fclose(f);
  if (!oom && !blank) {
    if (cnt == cap && grow_index(&o, &l, &ln, cap + 1)) oom = 1;
    if (!oom) {
      o[cnt] = start;
      l[cnt] = len;
      ln[cnt] = line;
      cnt++;
    }
  }
  if (oom || bad) {
    free(o);
    free(l);
    free(ln);
    return oom ? toplu__errorf(err, TOPLU_ERR_OUT_OF_MEMORY, "%s: out of memory indexing its lines (%lld so far)", path,
                              (long long)cnt)
               : toplu__errorf(err, TOPLU_ERR_IO, "%s: read error", path);
  }
  *offs = o;
  *lens = l;
  *lines = ln;
  *n = cnt;
  return TOPLU_OK;
}

int pl_model_has_batch(const toplu_model_t *m) {
  if (toplu_model_fixed_batch_size(m)) return 1; /* batch 1 or a static batch fixed in the file */
  for (int i = 0; i < toplu_model_input_count(m); i++) {
    const toplu_value_info_t *v = toplu_model_input(m, i);
    if (v->ndim < 0 || (v->ndim >= 1 && v->dims[0] < 0)) return 1;
  }
  return 0;
}

int pl_input_passed_whole(const toplu_model_t *m, const toplu_value_info_t *info) {
  return info->ndim == 0 ||
         (pl_model_has_batch(m) && toplu_model_fixed_batch_size(m) <= 0 && info->ndim >= 1 && info->dims[0] >= 0);
}
