/* pipeline/source_image.c - a directory (recursive) or glob of JPEG/PNG images, sorted by path. */
#include <dirent.h>
#include <errno.h>
#include <fnmatch.h>
#include <glob.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "core/error.h"
#include "core/file.h"
#include "core/hash.h"
#include "pipeline/buf.h"
#include "pipeline/files.h"
#include "pipeline/identity.h"
#include "pipeline/image.h"
#include "pipeline/source.h"

/* One listed image: its path relative to the base, size and modification time. */
typedef struct img_entry {
  char *id;
  char *bad; /* why the entry is a bad row (a dangling symlink, a name that is not UTF-8), NULL when it is read */
  int64_t bytes, mtime_ns;
} img_entry_t;

typedef struct img_src {
  char *base;         /* directory the ids are relative to ("" for none) */
  img_entry_t *files; /* sorted by id */
  int64_t n, cap;
  /* the directories walked, by device and inode: each is walked once, however many links lead to it (a link
   * to its own parent listed its images again at every level, and two such links walked without end; a fresh
   * user's finding of 2026-12-06) */
  struct dir_id {
    dev_t dev;
    ino_t ino;
    int used;
  } *dirs;                     /* an open-addressing set of cap_dirs (a power of 2) slots, at most half used */
  int64_t n_dirs, cap_dirs;
  const char *match;  /* a glob with a segment of two stars: the pattern after it, matched against each file's
                       * last path segments */
} img_src_t;

/* The slot of (dev, ino) in the set t of cap slots: where it is, or the free slot where it goes. */
static int64_t dir_slot(const struct dir_id *t, int64_t cap, dev_t dev, ino_t ino) {
  uint64_t h = (uint64_t)ino * 0x9E3779B97F4A7C15ull ^ (uint64_t)dev;
  int64_t i = (int64_t)((h ^ (h >> 29)) & (uint64_t)(cap - 1));
  while (t[i].used && !(t[i].dev == dev && t[i].ino == ino)) i = (i + 1) & (cap - 1);
  return i;
}

/* 1 when the directory sb was walked already, else 0 after noting it; -1: out of memory.  A hash set: the walk
 * asks once per directory, and a tree of 100,000 folders would have taken 5 x 10^9 steps of a list. */
static int dir_seen(img_src_t *m, const struct stat *sb) {
  if (2 * (m->n_dirs + 1) > m->cap_dirs) {
    int64_t cap = m->cap_dirs ? 2 * m->cap_dirs : 64;
    struct dir_id *t = calloc((size_t)cap, sizeof *t);
    if (!t) return -1;
    for (int64_t i = 0; i < m->cap_dirs; i++)
      if (m->dirs[i].used) t[dir_slot(t, cap, m->dirs[i].dev, m->dirs[i].ino)] = m->dirs[i];
    free(m->dirs);
    m->dirs = t;
    m->cap_dirs = cap;
  }
  int64_t i = dir_slot(m->dirs, m->cap_dirs, sb->st_dev, sb->st_ino);
  if (m->dirs[i].used) return 1;
  m->dirs[i].dev = sb->st_dev;
  m->dirs[i].ino = sb->st_ino;
  m->dirs[i].used = 1;
  m->n_dirs++;
  return 0;
}

/* Note the folders above base (up to the root) as walked: a link inside base to one of them would list the images
 * of trees beside the source (a link "up -> .." pulled in the parent's whole tree; a fresh user's finding of
 * 2026-12-06).  0, or -1 when out of memory. */
static int seed_ancestors(img_src_t *m, const char *base) {
  char *real = realpath(*base ? base : ".", NULL);
  if (!real) return 0; /* the walk reports what is wrong with it */
  int rc = 0;
  for (char *slash = strrchr(real, '/'); slash && !rc; slash = strrchr(real, '/')) {
    if (slash == real) slash[1] = 0; /* the root */
    else *slash = 0;
    struct stat sb;
    if (stat(real, &sb) == 0 && dir_seen(m, &sb) < 0) rc = -1;
    if (slash == real) break;
  }
  free(real);
  return rc;
}

/* 1 when rel (a path under a '**' glob's directory) matches the rest of the pattern after "**" + "/": its last
 * segments, as "**" takes any number of directories (Python's glob with recursive=True). */
static int match_tail(const char *pat, const char *rel) {
  for (const char *p = rel;; p++) {
    if ((p == rel || p[-1] == '/') && fnmatch(pat, p, FNM_PATHNAME | FNM_PERIOD) == 0) return 1;
    if (!*p) return 0;
  }
}

/* Append a relative path (with its stat; NULL for an entry that cannot be
 * read, then bad says why) to the list.  A path that is not valid UTF-8 is
 * listed as a bad row: its id could not be written faithfully as JSON. */
static int push(img_src_t *m, const char *rel, const struct stat *sb, const char *bad) {
  if (m->n == m->cap) {
    int64_t cap = m->cap ? m->cap * 2 : 64;
    img_entry_t *p = realloc(m->files, (size_t)cap * sizeof *p);
    if (!p) return -1;
    m->files = p;
    m->cap = cap;
  }
  img_entry_t *e = &m->files[m->n];
  memset(e, 0, sizeof *e);
  char why[160];
  int64_t at = pl_utf8_invalid(rel);
  if (at >= 0) {
    snprintf(why, sizeof why, "the file name is not valid UTF-8 (byte 0x%02x at offset %lld); rename it",
             (unsigned char)rel[at], (long long)at);
    bad = why;
  }
  if (!(e->id = strdup(rel)) || (bad && !(e->bad = strdup(bad)))) {
    free(e->id);
    return -1;
  }
  if (sb) {
    e->bytes = (int64_t)sb->st_size;
    e->mtime_ns = (int64_t)sb->st_mtim.tv_sec * 1000000000 + sb->st_mtim.tv_nsec;
  }
  m->n++;
  return 0;
}

/* An image name that stat cannot follow: a dangling or looping symbolic
 * link (or one the user may not search) is a bad row, listed with why. */
static int push_unreadable(img_src_t *m, const char *rel, const char *full, int stat_errno) {
  struct stat lb;
  if (lstat(full, &lb) != 0 || !S_ISLNK(lb.st_mode)) return 0; /* vanished since listed */
  char why[160];
  if (stat_errno == ENOENT) snprintf(why, sizeof why, "a dangling symbolic link (its target does not exist)");
  else if (stat_errno == ELOOP) snprintf(why, sizeof why, "a symbolic link loop");
  else snprintf(why, sizeof why, "a symbolic link that cannot be followed: %s", strerror(stat_errno));
  return push(m, rel, NULL, why);
}

/* An image name that is no regular file (a FIFO, a device, a socket): a bad row, listed with why (it was skipped
 * without a word). */
static int push_special(img_src_t *m, const char *rel, const struct stat *sb) {
  char why[160];
  snprintf(why, sizeof why, "not a regular file (%s); image sources are regular files",
           toplu__file_kind((unsigned)sb->st_mode));
  return push(m, rel, NULL, why);
}

static int cmp_name(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

/* Add the images under base/rel (rel "" for base itself), skipping hidden entries, in name order (so that of two
 * links to one directory, the first by path is the one listed). */
static toplu_status_t walk(img_src_t *m, const char *base, const char *rel, int depth, toplu_error_t *err) {
  char dir[PL_PATH_MAX];
  if (snprintf(dir, sizeof dir, "%s%s%s", base, *rel ? "/" : "", rel) >= (int)sizeof dir)
    return toplu__errorf(err, TOPLU_ERR_INVALID_ARGUMENT, "%s/%s: path too long", base, rel);
  if (depth > 64) return toplu__errorf(err, TOPLU_ERR_INVALID_ARGUMENT, "%s: directories nested too deep", dir);
  struct stat ds;
  if (stat(dir, &ds) == 0) {
    int seen = dir_seen(m, &ds);
    if (seen < 0) return toplu__errorf(err, TOPLU_ERR_OUT_OF_MEMORY, "out of memory listing %s", dir);
    if (seen) return TOPLU_OK;
  }
  DIR *d = opendir(dir);
  if (!d) return toplu__errorf(err, TOPLU_ERR_IO, "%s: cannot open the directory: %s", dir, strerror(errno));
  char **names = NULL;
  size_t nn = 0, cn = 0;
  toplu_status_t st = TOPLU_OK;
  struct dirent *e;
  while (!st && (e = readdir(d)) != NULL) {
    if (e->d_name[0] == '.') continue;
    if (nn == cn) {
      size_t c2 = cn ? 2 * cn : 64;
      char **p = realloc(names, c2 * sizeof *p);
      if (!p) {
        st = toplu__errorf(err, TOPLU_ERR_OUT_OF_MEMORY, "out of memory listing %s", dir);
        break;
      }
      names = p;
      cn = c2;
    }
    if (!(names[nn] = strdup(e->d_name))) st = toplu__errorf(err, TOPLU_ERR_OUT_OF_MEMORY, "out of memory listing %s", dir);
    else nn++;
  }
  closedir(d);
  if (nn > 1) qsort(names, nn, sizeof *names, cmp_name);
  for (size_t i = 0; i < nn && !st; i++) {
    char sub[PL_PATH_MAX], full[PL_PATH_MAX];
    if (snprintf(sub, sizeof sub, "%s%s%s", rel, *rel ? "/" : "", names[i]) >= (int)sizeof sub ||
        snprintf(full, sizeof full, "%s/%s", base, sub) >= (int)sizeof full) {
      st = toplu__errorf(err, TOPLU_ERR_INVALID_ARGUMENT, "%s/%s: path too long", dir, names[i]);
      break;
    }
    /* a '**' glob lists the files its pattern matches; a folder, the image names */
    int wanted = m->match ? match_tail(m->match, sub) : pl_is_image_name(names[i]);
    struct stat sb;
    if (stat(full, &sb) != 0) {
      if (wanted && push_unreadable(m, sub, full, errno))
        st = toplu__errorf(err, TOPLU_ERR_OUT_OF_MEMORY, "out of memory listing %s", dir);
      continue;
    }
    if (S_ISDIR(sb.st_mode)) st = walk(m, base, sub, depth + 1, err);
    else if (wanted && (S_ISREG(sb.st_mode) ? push(m, sub, &sb, NULL) : push_special(m, sub, &sb)))
      st = toplu__errorf(err, TOPLU_ERR_OUT_OF_MEMORY, "out of memory listing %s", dir);
  }
  for (size_t i = 0; i < nn; i++) free(names[i]);
  free(names);
  return st;
}

/* Order entries by relative path. */
static int cmp_entry(const void *a, const void *b) {
  return strcmp(((const img_entry_t *)a)->id, ((const img_entry_t *)b)->id);
}

/* Load and decode the images of rows [first, first + count). */
static toplu_status_t img_read(pl_source_t *s, int64_t first, int64_t count, pl_value_t *vals, char **row_err,
                               toplu_error_t *err) {
  (void)err;
  img_src_t *m = s->impl;
  for (int64_t r = 0; r < count; r++) {
    char full[PL_PATH_MAX], why[512];
    const char *id = m->files[first + r].id;
    if (m->files[first + r].bad) {
      row_err[r] = strdup(m->files[first + r].bad);
      continue;
    }
    if (*m->base) snprintf(full, sizeof full, "%s/%s", m->base, id);
    else snprintf(full, sizeof full, "%s", id);
    if (pl_image_load(full, s->hint_w, s->hint_h, s->max_pixels, &vals[r], why, sizeof why)) row_err[r] = strdup(why);
  }
  return TOPLU_OK;
}

/* The row's relative path. */
static const char *img_id(const pl_source_t *s, int64_t row) {
  const img_src_t *m = s->impl;
  return m->files[row].id;
}

/* Free the list. */
static void img_destroy(pl_source_t *s) {
  img_src_t *m = s->impl;
  if (!m) return;
  for (int64_t i = 0; i < m->n; i++) {
    free(m->files[i].id);
    free(m->files[i].bad);
  }
  free(m->files);
  free(m->base);
  free(m->dirs);
  free(m);
  s->impl = NULL;
}

static const pl_source_ops_t img_ops = {"images", img_read, img_id, img_destroy};

toplu_status_t pl_source_images_open(pl_source_t *s, int is_glob, toplu_error_t *err) {
  img_src_t *m = calloc(1, sizeof *m);
  if (!m) return toplu__errorf(err, TOPLU_ERR_OUT_OF_MEMORY, "out of memory for the source %s", s->path);
  s->impl = m;
  s->ops = &img_ops;
  s->is_image = 1;
  const char *path = s->path;
  toplu_status_t st = TOPLU_OK;
  s->is_dir = pl_is_dir(path);
  s->is_glob = !s->is_dir && is_glob;
  if (s->is_dir) {
    size_t n = strlen(path);
    while (n > 1 && path[n - 1] == '/') n--;
    m->base = strndup(path, n);
    if (!m->base) return toplu__errorf(err, TOPLU_ERR_OUT_OF_MEMORY, "out of memory for the source %s", s->path);
    st = seed_ancestors(m, m->base) ? toplu__errorf(err, TOPLU_ERR_OUT_OF_MEMORY, "out of memory listing %s", path)
                                     : walk(m, m->base, "", 0, err);
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
    if (!m->base) return toplu__errorf(err, TOPLU_ERR_OUT_OF_MEMORY, "out of memory for the source %s", s->path);
    size_t skip = slash ? (size_t)(slash - path) + 1 : 0;
    const char *star2 = is_glob ? strstr(path, "**") : NULL;
    if (star2) {
      /* DIR, a segment of two stars, REST: the files under DIR at any depth whose last segments match REST, as
       * Python's glob with recursive=True (glob(3) read the two stars as one: one level, the rest dropped without
       * a word; a fresh user's finding of 2026-12-06); DIR itself without wildcards, the two stars once, a whole
       * segment */
      const char *rest = star2 + 2;
      int whole = (star2 == path || star2[-1] == '/') && *rest == '/';
      if (!whole || strstr(rest, "**") || (size_t)(star2 - path) != skip || !rest[1])
        return toplu__errorf(err, TOPLU_ERR_INVALID_ARGUMENT,
                            "source %s: '**' is taken once, as a whole path segment after a folder without wildcards "
                            "and before a file pattern (photos/**/*.jpg)",
                            path);
      m->match = rest + 1;
      st = seed_ancestors(m, *m->base ? m->base : ".")
               ? toplu__errorf(err, TOPLU_ERR_OUT_OF_MEMORY, "out of memory listing %s", path)
               : walk(m, *m->base ? m->base : ".", "", 0, err);
      m->match = NULL;
    } else if (is_glob) {
      glob_t g;
      int r = glob(path, 0, NULL, &g);
      if (r != 0 && r != GLOB_NOMATCH) {
        globfree(&g);
        return toplu__errorf(err, TOPLU_ERR_IO, "source %s: glob failed", path);
      }
      for (size_t i = 0; r == 0 && i < g.gl_pathc && !st; i++) {
        struct stat sb;
        if (stat(g.gl_pathv[i], &sb) != 0) {
          if (pl_is_image_name(g.gl_pathv[i]) && push_unreadable(m, g.gl_pathv[i] + skip, g.gl_pathv[i], errno))
            st = toplu__errorf(err, TOPLU_ERR_OUT_OF_MEMORY, "out of memory listing %s", path);
          continue;
        }
        if (S_ISDIR(sb.st_mode)) continue;
        if (!S_ISREG(sb.st_mode) ? push_special(m, g.gl_pathv[i] + skip, &sb) : push(m, g.gl_pathv[i] + skip, &sb, NULL))
          st = toplu__errorf(err, TOPLU_ERR_OUT_OF_MEMORY, "out of memory listing %s", path);
      }
      globfree(&g);
    } else {
      struct stat sb;
      if (stat(path, &sb) != 0) st = toplu__errorf(err, TOPLU_ERR_IO, "source %s: %s", path, strerror(errno));
      else if (!S_ISREG(sb.st_mode))
        st = toplu__errorf(err, TOPLU_ERR_INVALID_ARGUMENT, "source %s is %s; sources are regular files", path,
                          toplu__file_kind((unsigned)sb.st_mode));
      else if (push(m, path + skip, &sb, NULL)) st = toplu__errorf(err, TOPLU_ERR_OUT_OF_MEMORY, "out of memory listing %s", path);
    }
  }
  if (st) return st;
  if (m->n == 0)
    return toplu__errorf(err, TOPLU_ERR_INVALID_ARGUMENT, "source %s: no .jpg, .jpeg or .png images found", path);
  qsort(m->files, (size_t)m->n, sizeof *m->files, cmp_entry);
  s->rows = m->n;
  return TOPLU_OK;
}

json_t *pl_source_images_identity(const pl_source_t *s) {
  const img_src_t *m = s->impl;
  uint64_t h = TOPLU__FNV1A64_INIT;
  int64_t bytes = 0, latest = 0;
  for (int64_t i = 0; i < m->n; i++) {
    const img_entry_t *e = &m->files[i];
    h = toplu__fnv1a64(h, e->id, strlen(e->id) + 1);
    h = toplu__fnv1a64(h, &e->bytes, sizeof e->bytes);
    bytes += e->bytes;
    if (e->mtime_ns > latest) latest = e->mtime_ns;
  }
  char canon[PL_PATH_MAX], hex[32];
  if (s->is_glob) {
    char base[PL_PATH_MAX], cb[PL_PATH_MAX];
    pl_glob_base(s->path, base, sizeof base);
    const char *rest = s->path + (strcmp(base, ".") ? strlen(base) : 0);
    while (*rest == '/') rest++;
    if (pl_path_canon(base, cb, sizeof cb) || pl_path_join(cb, rest, canon, sizeof canon))
      snprintf(canon, sizeof canon, "%s", s->path);
  } else if (pl_path_canon(s->path, canon, sizeof canon)) {
    snprintf(canon, sizeof canon, "%s", s->path);
  }
  snprintf(hex, sizeof hex, "%016llx", (unsigned long long)h);
  json_t *o = json_object();
  if (!o) return NULL;
  json_object_set_new(o, "path", json_string(canon));
  json_object_set_new(o, "files", json_integer(m->n));
  json_object_set_new(o, "bytes", json_integer(bytes));
  json_object_set_new(o, "mtime_ns", json_integer(latest));
  json_object_set_new(o, "hash", json_string(hex));
  return o;
}
