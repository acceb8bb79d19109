/*
 * fuzz/mutate_main.c - toplu-mutate: write mutants of ONNX models.
 *
 *   toplu-mutate -n N -o DIR [-s SEED] [-b PERCENT] MODEL...
 *
 * Writes N mutants, taking the models in turn, to DIR/STEM-I.onnx (STEM
 * the model's file name without .onnx, I the mutant's number), and one
 * line per mutant to DIR/mutants.tsv: file, model, seed, what was changed.
 * A mutant is 1 to 3 structure mutations (fuzz/mutate.h: dims, attributes,
 * dtypes, names, op types, initializer sizes, external data, nodes) of the
 * model, or, PERCENT of the time (default 15) and whenever the model does
 * not decode, a byte mutation (a truncation, bit flips, a block of
 * 0x00/0xff, a copied block).  The same SEED (default 1) and models give
 * the same mutants.  Exit 0, or 2 with a message.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "mutate.h"

static unsigned char *read_all(const char *path, size_t *len) {
  FILE *f = fopen(path, "rb");
  if (!f) return NULL;
  if (fseek(f, 0, SEEK_END) != 0) {
    fclose(f);
    return NULL;
  }
  long n = ftell(f);
  rewind(f);
  unsigned char *b = n >= 0 ? malloc((size_t)n + 1) : NULL;
  if (b && fread(b, 1, (size_t)n, f) != (size_t)n) {
    free(b);
    b = NULL;
  }
  fclose(f);
  *len = (size_t)n;
  return b;
}

static unsigned long long mix(unsigned long long z) { /* splitmix64's finaliser */
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

static void stem_of(const char *path, char *out, size_t size) {
  const char *s = strrchr(path, '/');
  s = s ? s + 1 : path;
  snprintf(out, size, "%s", s);
  char *dot = strstr(out, ".onnx");
  if (dot) *dot = 0;
  for (char *c = out; *c; c++)
    if (!((*c >= 'a' && *c <= 'z') || (*c >= 'A' && *c <= 'Z') || (*c >= '0' && *c <= '9') || *c == '-' ||
          *c == '_' || *c == '.'))
      *c = '_';
}

_Noreturn static void usage(void) {
  fprintf(stderr, "usage: toplu-mutate -n N -o DIR [-s SEED] [-b PERCENT] MODEL...\n");
  exit(2);
}

int main(int argc, char **argv) {
  long n = -1, bytes_pct = 15;
  unsigned long long seed = 1;
  const char *dir = NULL;
  int i = 1;
  for (; i < argc && argv[i][0] == '-'; i += 2) {
    if (i + 1 >= argc) usage();
    char *end = NULL;
    if (!strcmp(argv[i], "-n")) n = strtol(argv[i + 1], &end, 10);
    else if (!strcmp(argv[i], "-s")) seed = strtoull(argv[i + 1], &end, 10);
    else if (!strcmp(argv[i], "-b")) bytes_pct = strtol(argv[i + 1], &end, 10);
    else if (!strcmp(argv[i], "-o")) {
      dir = argv[i + 1];
      continue;
    } else usage();
    if (*end) usage();
  }
  if (n < 0 || !dir || i >= argc || bytes_pct < 0 || bytes_pct > 100) usage();
  int n_models = argc - i;
  char **models = argv + i;
  if (mkdir(dir, 0777) != 0 && errno != EEXIST) {
    fprintf(stderr, "toplu-mutate: cannot make %s: %s\n", dir, strerror(errno));
    return 2;
  }
  unsigned char **orig = calloc((size_t)n_models, sizeof *orig);
  size_t *orig_len = calloc((size_t)n_models, sizeof *orig_len);
  if (!orig || !orig_len) return 2;
  for (int k = 0; k < n_models; k++)
    if (!(orig[k] = read_all(models[k], &orig_len[k]))) {
      fprintf(stderr, "toplu-mutate: cannot read %s\n", models[k]);
      return 2;
    }
  char tsv[4096];
  snprintf(tsv, sizeof tsv, "%s/mutants.tsv", dir);
  FILE *index = fopen(tsv, "a");
  if (!index) {
    fprintf(stderr, "toplu-mutate: cannot write %s\n", tsv);
    return 2;
  }
  int n_struct = 0, n_bytes = 0;
  for (long m = 0; m < n; m++) {
    int k = (int)(m % n_models);
    unsigned long long s = seed * 1000003ULL + (unsigned long long)m;
    size_t cap = orig_len[k] * 2 + (1u << 20), len = orig_len[k];
    unsigned char *buf = malloc(cap);
    if (!buf) return 2;
    memcpy(buf, orig[k], len);
    char desc[2048] = "", one[512];
    unsigned long long h = mix(s);
    int rounds = 1 + (int)(h % 3);
    int structural = (long)((h >> 8) % 100) >= bytes_pct;
    for (int r = 0; structural && r < rounds; r++) {
      size_t got = fz_mutate_model(buf, len, cap, s * 7 + (unsigned long long)r, one, sizeof one);
      if (!got) {
        if (r == 0) structural = 0;
        break;
      }
      len = got;
      size_t dl = strlen(desc);
      snprintf(desc + dl, sizeof desc - dl, "%s%s", dl ? "; " : "", one);
    }
    if (!structural) {
      len = fz_mutate_bytes(buf, len, s, desc, sizeof desc);
      n_bytes++;
    } else n_struct++;
    char stem[256], path[4096];
    stem_of(models[k], stem, sizeof stem);
    snprintf(path, sizeof path, "%s/%s-%04ld.onnx", dir, stem, m);
    FILE *f = fopen(path, "wb");
    if (!f || fwrite(buf, 1, len, f) != len || fclose(f) != 0) {
      fprintf(stderr, "toplu-mutate: cannot write %s\n", path);
      return 2;
    }
    for (char *c = desc; *c; c++)
      if (*c == '\t' || *c == '\n') *c = ' ';
    fprintf(index, "%s\t%s\t%llu\t%s\n", path, models[k], s, desc);
    free(buf);
  }
  fclose(index);
  for (int k = 0; k < n_models; k++) free(orig[k]);
  free(orig);
  free(orig_len);
  fprintf(stderr, "toplu-mutate: %ld mutants in %s (%d structural, %d byte-level), index %s\n", n, dir, n_struct,
          n_bytes, tsv);
  return 0;
}
