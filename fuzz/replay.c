/*
 * fuzz/replay.c - run a fuzz target's function on files, without libFuzzer.
 *
 *   toplu-fuzz-replay TARGET PATH...   each PATH a file, or a folder whose
 *                                      files (not recursive, sorted) are run
 *   toplu-fuzz-replay --list           the targets
 *
 * Built in every build (the fuzz targets' code is ordinary C), so the
 * regression inputs under tests/fuzz-regress/<target>/ run under ctest in
 * the normal and the ASan+UBSan builds (tests/fuzz.cmake).  Each file is
 * named on stderr before it runs, so a crash names its input.  Exit 0 when
 * every file ran (a finding crashes, traps or is a sanitizer report), 2 on
 * a usage error or an unreadable file.
 */
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "fuzz.h"

/* oneDNN keeps process-wide caches (primitive cache, JIT code) by design. */
const char *__lsan_default_suppressions(void);
const char *__lsan_default_suppressions(void) { return "leak:libdnnl\nleak:libgomp\n"; }

static int run_file(const fz_target_t *t, const char *path) {
  FILE *f = fopen(path, "rb");
  if (!f) {
    fprintf(stderr, "toplu-fuzz-replay: cannot open %s\n", path);
    return 2;
  }
  size_t cap = 1 << 16, n = 0;
  unsigned char *buf = malloc(cap);
  size_t got;
  while (buf && (got = fread(buf + n, 1, cap - n, f)) > 0) {
    n += got;
    if (n == cap) {
      unsigned char *b = realloc(buf, cap * 2);
      if (!b) {
        free(buf);
        buf = NULL;
        break;
      }
      buf = b;
      cap *= 2;
    }
  }
  int bad = ferror(f);
  fclose(f);
  if (!buf || bad) {
    free(buf);
    fprintf(stderr, "toplu-fuzz-replay: cannot read %s\n", path);
    return 2;
  }
  fprintf(stderr, "toplu-fuzz-replay: %s %s (%zu bytes)\n", t->name, path, n);
  t->fn(buf, n);
  free(buf);
  return 0;
}

static int cmp(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

static int run_path(const fz_target_t *t, const char *path, int *files) {
  struct stat sb;
  if (stat(path, &sb) != 0) {
    fprintf(stderr, "toplu-fuzz-replay: %s: no such file or folder\n", path);
    return 2;
  }
  if (!S_ISDIR(sb.st_mode)) {
    ++*files;
    return run_file(t, path);
  }
  DIR *d = opendir(path);
  if (!d) return 2;
  char **names = NULL;
  size_t n = 0, cap = 0;
  struct dirent *e;
  while ((e = readdir(d)) != NULL) {
    if (e->d_name[0] == '.') continue;
    if (n == cap) {
      char **nn = realloc(names, (cap = cap ? cap * 2 : 64) * sizeof *nn);
      if (!nn) break;
      names = nn;
    }
    names[n] = malloc(strlen(path) + strlen(e->d_name) + 2);
    if (!names[n]) break;
    sprintf(names[n], "%s/%s", path, e->d_name);
    n++;
  }
  closedir(d);
  qsort(names, n, sizeof *names, cmp);
  int rc = 0;
  for (size_t i = 0; i < n; i++) {
    struct stat fs;
    if (stat(names[i], &fs) == 0 && S_ISREG(fs.st_mode)) {
      ++*files;
      int r = run_file(t, names[i]);
      if (r) rc = r;
    }
    free(names[i]);
  }
  free(names);
  return rc;
}

int main(int argc, char **argv) {
  if (argc == 2 && !strcmp(argv[1], "--list")) {
    for (const fz_target_t *t = fz_targets; t->name; t++) printf("%-8s %s\n", t->name, t->what);
    return 0;
  }
  const fz_target_t *t = argc >= 3 ? fz_find(argv[1]) : NULL;
  if (!t) {
    fprintf(stderr, "usage: toplu-fuzz-replay TARGET PATH...  (toplu-fuzz-replay --list names the targets)\n");
    return 2;
  }
  int rc = 0, files = 0;
  for (int i = 2; i < argc; i++) {
    int r = run_path(t, argv[i], &files);
    if (r) rc = r;
  }
  fprintf(stderr, "toplu-fuzz-replay: %s: %d files ran\n", t->name, files);
  return rc;
}
