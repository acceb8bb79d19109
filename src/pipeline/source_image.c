/* pipeline/source_image.c - a directory (recursive) or glob of JPEG/PNG images, sorted by path. */
#include <dirent.h>
#include <errno.h>
#include <glob.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "core/error.h"
#include "pipeline/files.h"
#include "pipeline/image.h"
#include "pipeline/source.h"

typedef struct img_src {
  char *base;    /* directory the ids are relative to ("" for none) */
  char **ids;    /* relative paths, sorted */
  int64_t n, cap;
} img_src_t;

/* Append a relative path to the list. */
static int push(img_src_t *m, const char *rel) {
  if (m->n == m->cap) {
    int64_t cap = m->cap ? m->cap * 2 : 64;
    char **p = realloc(m->ids, (size_t)cap * sizeof *p);
    if (!p) return -1;
    m->ids = p;
    m->cap = cap;
  }
  if (!(m->ids[m->n] = strdup(rel))) return -1;
  m->n++;
  return 0;
}

/* Add the images under base/rel (rel "" for base itself), skipping hidden entries. */
static toplu_status_t walk(img_src_t *m, const char *base, const char *rel, int depth, toplu_error_t *err) {
  char dir[PL_PATH_MAX];
  if (snprintf(dir, sizeof dir, "%s%s%s", base, *rel ? "/" : "", rel) >= (int)sizeof dir)
    return toplu_errorf(err, TOPLU_ERR_INVALID_ARGUMENT, "%s/%s: path too long", base, rel);
  if (depth > 64) return toplu_errorf(err, TOPLU_ERR_INVALID_ARGUMENT, "%s: directories nested too deep", dir);
  DIR *d = opendir(dir);
  if (!d) return toplu_errorf(err, TOPLU_ERR_IO, "%s: cannot open the directory: %s", dir, strerror(errno));
  struct dirent *e;
  toplu_status_t st = TOPLU_OK;
  while (!st && (e = readdir(d)) != NULL) {
    if (e->d_name[0] == '.') continue;
    char sub[PL_PATH_MAX], full[PL_PATH_MAX];
    if (snprintf(sub, sizeof sub, "%s%s%s", rel, *rel ? "/" : "", e->d_name) >= (int)sizeof sub ||
        snprintf(full, sizeof full, "%s/%s", base, sub) >= (int)sizeof full) {
      st = toplu_errorf(err, TOPLU_ERR_INVALID_ARGUMENT, "%s/%s: path too long", dir, e->d_name);
      break;
    }
    struct stat sb;
    if (stat(full, &sb) != 0) continue;
    if (S_ISDIR(sb.st_mode)) st = walk(m, base, sub, depth + 1, err);
    else if (S_ISREG(sb.st_mode) && pl_is_image_name(e->d_name) && push(m, sub))
      st = toplu_errorf(err, TOPLU_ERR_OUT_OF_MEMORY, "out of memory listing %s", dir);
  }
  closedir(d);
  return st;
}

static int cmp_str(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

/* Load and decode the images of rows [first, first + count). */
static toplu_status_t img_read(pl_source_t *s, int64_t first, int64_t count, pl_value_t *vals, char **row_err,
                               toplu_error_t *err) {
  (void)err;
  img_src_t *m = s->impl;
  for (int64_t r = 0; r < count; r++) {
    char full[PL_PATH_MAX], why[512];
    const char *id = m->ids[first + r];
    if (*m->base) snprintf(full, sizeof full, "%s/%s", m->base, id);
    else snprintf(full, sizeof full, "%s", id);
    if (pl_image_load(full, s->hint_w, s->hint_h, &vals[r], why, sizeof why)) row_err[r] = strdup(why);
  }
  return TOPLU_OK;
}

/* The row's relative path. */
static const char *img_id(const pl_source_t *s, int64_t row) {
  const img_src_t *m = s->impl;
  return m->ids[row];
}

/* Free the list. */
static void img_destroy(pl_source_t *s) {
  img_src_t *m = s->impl;
  if (!m) return;
  for (int64_t i = 0; i < m->n; i++) free(m->ids[i]);
  free(m->ids);
  free(m->base);
  free(m);
  s->impl = NULL;
}

static const pl_source_ops_t img_ops = {"images", img_read, img_id, img_destroy};

toplu_status_t pl_source_images_open(pl_source_t *s, int is_glob, toplu_error_t *err) {
  img_src_t *m = calloc(1, sizeof *m);
  if (!m) return toplu_errorf(err, TOPLU_ERR_OUT_OF_MEMORY, "out of memory");
  s->impl = m;
  s->ops = &img_ops;
  s->is_image = 1;
  const char *path = s->path;
  toplu_status_t st = TOPLU_OK;
  if (pl_is_dir(path)) {
    size_t n = strlen(path);
    while (n > 1 && path[n - 1] == '/') n--;
    m->base = strndup(path, n);
    if (!m->base) return toplu_errorf(err, TOPLU_ERR_OUT_OF_MEMORY, "out of memory");
    st = walk(m, m->base, "", 0, err);
  } else {
    /* The ids are relative to the pattern's leading directories without wildcards. */
    const char *w = strpbrk(path, "*?[");
    const char *slash = NULL;
    for (const char *p = path; *p && (!w || p < w); p++)
      if (*p == '/') slash = p;
    if (!is_glob) { /* one image file */
      slash = strrchr(path, '/');
    }
    m->base = slash ? strndup(path, (size_t)(slash - path) + (slash == path)) : strdup("");
    if (!m->base) return toplu_errorf(err, TOPLU_ERR_OUT_OF_MEMORY, "out of memory");
    size_t skip = slash ? (size_t)(slash - path) + 1 : 0;
    if (is_glob) {
      glob_t g;
      int r = glob(path, 0, NULL, &g);
      if (r != 0 && r != GLOB_NOMATCH) {
        globfree(&g);
        return toplu_errorf(err, TOPLU_ERR_IO, "source %s: glob failed", path);
      }
      for (size_t i = 0; r == 0 && i < g.gl_pathc && !st; i++) {
        struct stat sb;
        if (stat(g.gl_pathv[i], &sb) != 0 || !S_ISREG(sb.st_mode)) continue;
        if (push(m, g.gl_pathv[i] + skip)) st = toplu_errorf(err, TOPLU_ERR_OUT_OF_MEMORY, "out of memory");
      }
      globfree(&g);
    } else if (push(m, path + skip)) {
      st = toplu_errorf(err, TOPLU_ERR_OUT_OF_MEMORY, "out of memory");
    }
  }
  if (st) return st;
  if (m->n == 0)
    return toplu_errorf(err, TOPLU_ERR_INVALID_ARGUMENT, "source %s: no .jpg, .jpeg or .png images found", path);
  qsort(m->ids, (size_t)m->n, sizeof *m->ids, cmp_str);
  s->rows = m->n;
  return TOPLU_OK;
}
