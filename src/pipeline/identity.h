/*
 * pipeline/identity.h - what a job reads, identified, and which paths it may not write.
 *
 * A checkpoint records the identity of the model, every source and the
 * labels file, so that --resume continues only the same job (whatever path
 * spelling names the files) and toplu merge joins only shards of one job:
 *
 *   a file       {"path": realpath, "bytes": size, "mtime_ns": modification
 *                time, "hash": FNV-1a 64 of its first and last MiB (hex)}
 *   the model    the same, "hash" of the whole file, and "hash_of": "whole
 *                file" (core/identity.h: the one model identity, as tune.json's)
 *   an image set {"path": realpath of the directory (or the glob), "files":
 *                count, "bytes": total size, "mtime_ns": the latest, "hash":
 *                FNV-1a 64 of every relative path and size, in order}
 *
 *   external     in the model's: an array of the identities of its external
 *                data files, each hashed whole (onnx/onnx_model.h's
 *                toplu__onnx_external_files), when it has any
 *
 * Resuming compares bytes, hash, files and mtime_ns (a moved input with the
 * same size, time and content is the same input; mtime_ns not for files
 * hashed whole, whose bytes say it all); merging compares bytes, hash and
 * files only (shards may read copies on different machines).
 *
 * Paths are compared canonically (pl_path_canon: absolute, symbolic links
 * of the existing part resolved, "." and ".." removed), files also by
 * device and inode.
 */
#ifndef TOPLU_PIPELINE_IDENTITY_H
#define TOPLU_PIPELINE_IDENTITY_H

#include <jansson.h>
#include <stddef.h>
#include <stdint.h>

/* Identity of a file (see above; core/identity.h hashes it); NULL with why when it cannot be read. */
json_t *pl_identity_file(const char *path, char *why, size_t why_size);

/* Identity of the model file: its whole content hashed (see above). */
json_t *pl_identity_model(const char *path, char *why, size_t why_size);

/* The first difference between two identities: "size", "content" (hash),
 * "number of files" or "modification time" (only when !merge); NULL when
 * they are the same or either is not an identity object. */
const char *pl_identity_diff(const json_t *a, const json_t *b, int merge);

/* Canonical absolute form of path (which need not exist: the longest
 * existing prefix is resolved with realpath, the rest is normalised
 * lexically).  0, or -1 when too long. */
int pl_path_canon(const char *path, char *out, size_t size);

/* 1 when canonical path child lies inside (or is) canonical directory dir. */
int pl_path_inside(const char *child, const char *dir);

/*
 * Compare the job settings of two checkpoints (see job.c's describe_job).
 * merge 0 (resume): every setting but the output's path must be the same,
 * files compared by identity.  merge 1: the settings that decide a shard's
 * rows must be the same (model, inputs, rows, pre- and postprocessing,
 * labels, CSV header mode and the shard count), not the batch size, the
 * paths or the times.  Returns 0, or 1 with a sentence naming the setting
 * and both values in why; 2 when `saved` does not record identities (a
 * checkpoint of an older toplu).
 */
int pl_job_diff(const json_t *saved, const json_t *now, int merge, char *why, size_t why_size);

#endif
