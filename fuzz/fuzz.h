/*
 * fuzz/fuzz.h - toplu's fuzz targets, shared by the libFuzzer binaries
 * (fuzz/libfuzzer_main.c, built with -DTOPLU_FUZZ=ON and clang) and the
 * replay driver (fuzz/replay.c, built in every build: it runs the same
 * target functions on files, so the regression inputs under
 * tests/fuzz-regress/<target>/ are re-checked by ctest in the normal and
 * the ASan+UBSan builds without clang's fuzzer runtime).  See
 * docs/reliability.md.
 *
 * A target takes one input's bytes and returns 0.  Findings are crashes,
 * sanitizer reports, leaks, timeouts, and the target's own checks, which
 * trap (__builtin_trap): a failed call without a message, a failed load
 * that still returns a model.  Not thread-safe (one input at a time: the
 * targets reuse one temporary folder per process).
 */
#ifndef TOPLU_FUZZ_H
#define TOPLU_FUZZ_H

#include <stddef.h>
#include <stdint.h>

typedef int (*fz_target_fn)(const uint8_t *data, size_t size);

typedef struct fz_target {
  const char *name;  /* "model", "npy", "csv", "jsonl", "image", "jobfile", "serveconfig" */
  fz_target_fn fn;
  const char *what;  /* one line for --help */
} fz_target_t;

/* Every target, NULL-terminated; fz_find(name) or NULL. */
extern const fz_target_t fz_targets[];
const fz_target_t *fz_find(const char *name);

int fz_model(const uint8_t *data, size_t size);
int fz_npy(const uint8_t *data, size_t size);
int fz_csv(const uint8_t *data, size_t size);
int fz_jsonl(const uint8_t *data, size_t size);
int fz_image(const uint8_t *data, size_t size);
int fz_jobfile(const uint8_t *data, size_t size);
int fz_serveconfig(const uint8_t *data, size_t size);

/* Write data to NAME inside this process's temporary folder (made on first
 * use under $TMPDIR or /tmp, removed at exit) and return its path (static
 * storage, valid until the next call with the same name), or NULL. */
const char *fz_temp_file(const char *name, const uint8_t *data, size_t size);
/* The temporary folder itself (made on first use), or NULL. */
const char *fz_temp_dir(void);

/* Trap unless msg is a non-empty message: a failure must say why. */
void fz_require_message(const char *msg);

/* A small model of the fuzz data folder (fuzz/data/NAME), loaded once and
 * kept for the process; NULL when it cannot be loaded (a setup error:
 * the caller traps). */
struct toplu_model;
const struct toplu_model *fz_data_model(const char *name);

#endif
