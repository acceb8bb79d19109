/* fuzz/common.c - what the fuzz targets share (fuzz/fuzz.h). */
#include <dirent.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "fuzz.h"
#include "toplu/toplu.h"

#ifndef TOPLU_FUZZ_DATA_DIR
#error "TOPLU_FUZZ_DATA_DIR (the fuzz/data folder) must be defined by the build"
#endif

const fz_target_t fz_targets[] = {
    {"model", fz_model, "an ONNX file: load (buffer or file), plan at batch 1 and 3, run small ones at batch 1"},
    {"npy", fz_npy, "a .npy file: header, whole read, row reads, the job's .npy source"},
    {"csv", fz_csv, "a .csv file: the job's CSV source (header auto/yes/no), every row read"},
    {"jsonl", fz_jsonl, "a .jsonl file: the job's JSONL source over a two-input model, every row read"},
    {"image", fz_image, "a JPEG or PNG file: decoded and preprocessed (resize, crop, colour, layout)"},
    {"jobfile", fz_jobfile, "a job file (JSON): toplu_job_options_from_json"},
    {"serveconfig", fz_serveconfig, "a serve model configuration: as config.json and as config.pbtxt"},
    {NULL, NULL, NULL}};

const fz_target_t *fz_find(const char *name) {
  for (const fz_target_t *t = fz_targets; t->name; t++)
    if (!strcmp(t->name, name)) return t;
  return NULL;
}

void fz_require_message(const char *msg) {
  if (!msg || !msg[0]) __builtin_trap();
}

static char temp_dir[PATH_MAX];

static void remove_temp_dir(void) {
  if (!temp_dir[0]) return;
  DIR *d = opendir(temp_dir);
  if (d) {
    struct dirent *e;
    char p[PATH_MAX + 256];
    while ((e = readdir(d)) != NULL) {
      if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, "..")) continue;
      snprintf(p, sizeof p, "%s/%s", temp_dir, e->d_name);
      unlink(p);
    }
    closedir(d);
  }
  rmdir(temp_dir);
  temp_dir[0] = 0;
}

const char *fz_temp_dir(void) {
  if (temp_dir[0]) return temp_dir;
  const char *base = getenv("TMPDIR");
  if (!base || !base[0]) base = "/tmp";
  snprintf(temp_dir, sizeof temp_dir, "%s/toplu-fuzz.XXXXXX", base);
  if (!mkdtemp(temp_dir)) {
    temp_dir[0] = 0;
    return NULL;
  }
  atexit(remove_temp_dir);
  return temp_dir;
}

const char *fz_temp_file(const char *name, const uint8_t *data, size_t size) {
  static char path[PATH_MAX + 256];
  const char *dir = fz_temp_dir();
  if (!dir) return NULL;
  snprintf(path, sizeof path, "%s/%s", dir, name);
  int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
  if (fd < 0) return NULL;
  size_t done = 0;
  while (done < size) {
    ssize_t w = write(fd, data + done, size - done);
    if (w <= 0) {
      close(fd);
      return NULL;
    }
    done += (size_t)w;
  }
  close(fd);
  return path;
}

#define MAX_DATA_MODELS 8
static struct {
  char name[64];
  toplu_model_t *m;
} data_models[MAX_DATA_MODELS];

static void free_data_models(void) {
  for (int i = 0; i < MAX_DATA_MODELS; i++) {
    toplu_model_destroy(data_models[i].m);
    data_models[i].m = NULL;
  }
}

const struct toplu_model *fz_data_model(const char *name) {
  int i;
  for (i = 0; i < MAX_DATA_MODELS && data_models[i].m; i++)
    if (!strcmp(data_models[i].name, name)) return data_models[i].m;
  if (i == MAX_DATA_MODELS) return NULL;
  char path[PATH_MAX];
  snprintf(path, sizeof path, "%s/%s", TOPLU_FUZZ_DATA_DIR, name);
  toplu_error_t err;
  if (toplu_model_load(path, NULL, &data_models[i].m, &err) != TOPLU_OK) return NULL;
  snprintf(data_models[i].name, sizeof data_models[i].name, "%s", name);
  if (i == 0) atexit(free_data_models);
  return data_models[i].m;
}
