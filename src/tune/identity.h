/*
 * tune/identity.h - which model a tune result was measured on.
 *
 * tune.json records the model file it measured: its name, size and a
 * 64-bit FNV-1a hash of its bytes (Fowler, Noll, Vo; offset basis
 * 0xcbf29ce484222325, prime 0x100000001b3, one byte at a time), with the
 * input shapes and thread count, under "model_identity".  Readers of a
 * tune.json (`plan --calibration`, `run --batch-size auto --tune`) compare
 * it with their model and refuse another model's results.  The public
 * check is toplu_tune_result_matches_model (toplu/tuner.h).
 */
#ifndef TOPLU_TUNE_IDENTITY_H
#define TOPLU_TUNE_IDENTITY_H

#include <jansson.h>
#include <stdint.h>

#include "toplu/status.h"

/* A model file's identity. */
typedef struct toplu_model_identity {
  char file[256];    /* the file's name without its directory */
  uint64_t bytes;    /* its size */
  uint64_t fnv1a64;  /* FNV-1a 64 of its bytes */
  int hashed;        /* 1: bytes and fnv1a64 are set (0: the file could not be read) */
} toplu_model_identity_t;

/*
 * Size and FNV-1a 64 hash of the file at path (file: its base name).
 * Errors: TOPLU_ERR_IO (cannot open or read it; the message has the reason),
 * with id->file still set.
 */
toplu_status_t toplu_model_identity_of(const char *path, toplu_model_identity_t *id, toplu_error_t *err);

/* The "model_identity" object: file, bytes, fnv1a64 (16 hex digits; null
 * when not hashed), inputs, threads.  New reference. */
json_t *toplu_model_identity_json(const toplu_model_identity_t *id, const char *inputs, int threads);

/*
 * Check a parsed tune.json (root; tune_path names it in messages) against
 * the model file at model_path.  With a "model_identity" record: TOPLU_OK
 * when size and hash agree (a renamed copy is the same model), *checked = 1.
 * Without one (an older toplu, or written by hand): TOPLU_OK and
 * *checked = 0, unless its "model" names a file of another name, which is a
 * mismatch.  A mismatch is TOPLU_ERR_INVALID_ARGUMENT with a message naming
 * both models.  Errors: TOPLU_ERR_IO (model_path unreadable),
 * TOPLU_ERR_PARSE (a malformed record).  checked may be NULL.
 */
toplu_status_t toplu_tune_identity_check(json_t *root, const char *tune_path, const char *model_path, int *checked,
                                         toplu_error_t *err);

#endif
