/*
 * core/identity.h - which file, which model: the one file identity of the
 * library.
 *
 * A file is identified by its base name, its size in bytes, its
 * modification time (ns since the epoch) and a 64-bit hash of its bytes:
 * FNV-1a 64 (core/hash.h) for the "model_identity" record of tune.json,
 * XXH3-64 (Debian's libxxhash, xxHash 0.8) for the identities a batch
 * job's checkpoint records (pipeline/identity.h), where every job start
 * hashes the model and its data again: a 250 MB file from the page cache
 * in 0.055 s against FNV-1a's 0.40 s (4.5 against 0.62 GB/s, the read
 * included; Xeon with AVX-512, 2026-12-06).  A model file is always hashed whole (span
 * TOPLU__IDENTITY_WHOLE): two models of one architecture have the same size
 * and may differ only in weights in the middle of the file.  Data files a
 * job reads may be hashed by their first and last `span` bytes (the
 * pipeline uses 1 MiB) so that identifying a large input does not read it
 * all; a file of at most 2 x span bytes hashes the same either way.
 *
 * The "model_identity" record (tune.json; the planner's calibration and
 * toplu_tune_result_matches_model check it):
 *   {"file": base name, "bytes": size, "fnv1a64": 16 hex digits of the
 *    whole-file hash (null when not hashed), "inputs": "x: [B, 3, 224, 224]
 *    float32", "threads": N}
 *
 * All functions are thread-safe (no shared state).
 */
#ifndef TOPLU_CORE_IDENTITY_H
#define TOPLU_CORE_IDENTITY_H

#include <jansson.h>
#include <stdint.h>

#include "toplu/status.h"

/* Hash every byte of the file. */
#define TOPLU__IDENTITY_WHOLE 0
/* A data file a job reads: every byte up to TOPLU__IDENTITY_DATA_WHOLE_MAX
 * bytes; a larger one by its first and last MiB and TOPLU__IDENTITY_BLOCKS
 * blocks of 64 KiB evenly spaced between them (a file regenerated with
 * other rows in its middle, at the same size, is then told apart without
 * reading it all; until 2026-12-06 only the first and last MiB counted). */
#define TOPLU__IDENTITY_DATA UINT64_MAX
#define TOPLU__IDENTITY_DATA_WHOLE_MAX ((uint64_t)256 << 20)
#define TOPLU__IDENTITY_BLOCKS 62

/* Which hash: FNV-1a 64 (tune.json's "fnv1a64"; checkpoints of an older toplu) or XXH3-64 (XXH3_64bits,
 * seed 0; checkpoints' "hash_alg": "xxh3_64"). */
typedef enum { TOPLU__HASH_FNV1A64 = 0, TOPLU__HASH_XXH3_64 = 1 } toplu__hash_alg_t;

typedef struct toplu__file_identity {
  char file[256];    /* the file's name without its directory (cut at 255 bytes) */
  uint64_t bytes;    /* its size */
  int64_t mtime_ns;  /* modification time, ns since the epoch */
  uint64_t hash;     /* the hash (alg) of its bytes (all, or the parts span says) */
  toplu__hash_alg_t alg;
  int hashed;        /* 1: bytes, mtime_ns and hash are set (0: the file could not be read) */
  int whole;         /* 1: hash covers every byte */
} toplu__file_identity_t;

/*
 * Identify the file at path: span TOPLU__IDENTITY_WHOLE hashes all its
 * bytes, TOPLU__IDENTITY_DATA as said above, another span > 0 its first
 * span bytes and its last span bytes (each byte once; a file of at most
 * 2 x span bytes is hashed whole).  Other kinds of
 * file than regular ones (a FIFO, a device) are not read: hash of no bytes.
 * Errors: TOPLU_ERR_IO ("PATH: No such file or directory", "PATH: is a
 * directory, not a file", "PATH: read error: ..."), TOPLU_ERR_OUT_OF_MEMORY
 * (a 1 MiB read buffer); id->file is set even then.
 */
toplu_status_t toplu__file_identity(const char *path, uint64_t span, toplu__file_identity_t *id, toplu_error_t *err);

/* toplu__file_identity with hash alg (toplu__file_identity is alg TOPLU__HASH_FNV1A64); the same errors, and
 * TOPLU_ERR_OUT_OF_MEMORY for XXH3's state. */
toplu_status_t toplu__file_identity_alg(const char *path, uint64_t span, toplu__hash_alg_t alg,
                                        toplu__file_identity_t *id, toplu_error_t *err);

/* The "model_identity" record of a whole-file identity (see above); inputs
 * may be NULL ("").  New reference; NULL when out of memory. */
json_t *toplu__model_identity_json(const toplu__file_identity_t *id, const char *inputs, int threads);

/*
 * Check a parsed tune result (root, a JSON object; tune_path names it in
 * messages) against the model file at model_path.  With a
 * "model_identity" record: TOPLU_OK when size and whole-file hash agree (a
 * renamed or moved copy is the same model), *checked = 1.  Without one (an
 * older toplu, or written by hand): TOPLU_OK and *checked = 0, unless its
 * "model" (or the record's "file") names a file of another name, ignoring
 * directories and ".onnx".  checked may be NULL.
 * Errors: TOPLU_ERR_INVALID_ARGUMENT: another model ("T is a tune result of
 * another model: it was measured on 'a' (N bytes, FNV-1a 64 H), this model
 * is 'b' (M bytes, FNV-1a 64 H')"), TOPLU_ERR_IO (model_path unreadable),
 * TOPLU_ERR_PARSE (root not an object, a malformed record).  Reads the
 * model file whole.
 */
toplu_status_t toplu__model_identity_check(json_t *root, const char *tune_path, const char *model_path, int *checked,
                                           toplu_error_t *err);

#endif
