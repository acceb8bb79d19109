/*
 * pipeline/files.h - file names and durable writes for jobs.
 *
 * The commit protocol of a job (see toplu/pipeline.h) rests on three
 * primitives here: appending to a part file and making it durable
 * (pl_file_sync), replacing a small file atomically (pl_file_replace:
 * temporary file, fsync, rename, fsync of the directory), and putting a
 * finished file under its name (pl_file_publish: rename, fsync of the
 * directory).
 */
#ifndef TOPLU_PIPELINE_FILES_H
#define TOPLU_PIPELINE_FILES_H

#include <stddef.h>
#include <stdint.h>

#include "toplu/status.h"

#define PL_PATH_MAX 4096

/* "DIR/.BASE" + suffix for path "DIR/BASE" (a trailing '/' on path is
 * ignored); the hidden companion files of an output.  0 or -1 when too long. */
int pl_path_hidden(const char *path, const char *suffix, char *out, size_t size);
/* An output whose hidden companion files toplu cannot create because their names pass the file system's
 * limit on one name (NAME_MAX, from pathconf of the output's directory; 255 when unknown): the longest is
 * ".BASE.toplu-state.tmp" beside a file output, ".BASE.toplu-lock" beside a directory.  TOPLU_OK, or
 * TOPLU_ERR_INVALID_ARGUMENT naming the output, the limit and the longest name it may have (before
 * 2026-12-06 a name of 239-243 bytes failed at the first checkpoint, after rows were done). */
toplu_status_t pl_output_name_check(const char *path, int dir_output, toplu_error_t *err);
/* The same for the hidden companion "DIR/.BASE" + sfx of path (a directory output's ".NAME.npy.part"). */
toplu_status_t pl_hidden_name_check(const char *path, const char *sfx, toplu_error_t *err);
/* "DIR/" + name; 0 or -1 when too long. */
int pl_path_join(const char *dir, const char *name, char *out, size_t size);
/* The directory part of path ("." when none). */
void pl_path_dir(const char *path, char *out, size_t size);

int pl_is_dir(const char *path);
int pl_exists(const char *path);
/* Size in bytes, or -1 when it does not exist. */
int64_t pl_file_size(const char *path);

/* Open a regular file for reading (a FIFO, device, socket or directory is
 * TOPLU_ERR_INVALID_ARGUMENT "PATH is a FIFO; toplu reads only regular files",
 * found without blocking); *size its size in bytes (size may be NULL). */
toplu_status_t pl_open_regular(const char *path, int *fd, int64_t *size, toplu_error_t *err);
/* Read a whole regular file (NUL-terminated; *len excludes the NUL). */
toplu_status_t pl_file_read(const char *path, char **data, size_t *len, toplu_error_t *err);
/* The same, refusing a file above max_bytes before reading it
 * (TOPLU_ERR_INVALID_ARGUMENT "PATH: N bytes, above the limit of M bytes
 * (limit_name)"; limit_name may be NULL). */
toplu_status_t pl_file_read_limit(const char *path, int64_t max_bytes, const char *limit_name, char **data,
                                  size_t *len, toplu_error_t *err);
/* Write all of data at the current offset of fd. */
toplu_status_t pl_fd_write(int fd, const void *data, size_t len, const char *path, toplu_error_t *err);
/* fdatasync(fd) with a message naming path. */
toplu_status_t pl_file_sync(int fd, const char *path, toplu_error_t *err);
/* fsync the directory holding path (so a rename in it is durable). */
void pl_dir_sync(const char *path);
/* Write data to path atomically: path.tmp, fsync, rename, fsync dir. */
toplu_status_t pl_file_replace(const char *path, const void *data, size_t len, toplu_error_t *err);
/* rename(from, to) and fsync the directory. */
toplu_status_t pl_file_publish(const char *from, const char *to, toplu_error_t *err);
/* Remove a file if it exists; 0 or -1 (errno) for other failures. */
int pl_file_remove(const char *path);
/* Create dir and its parents. */
toplu_status_t pl_mkdir_p(const char *dir, toplu_error_t *err);

/* Take the exclusive lock of a file a job or merge writes: flock on
 * .NAME.toplu-lock beside the file's canonical path (pl_path_canon: one
 * file named two ways has one lock), created with its folder when missing.
 * what names the file in messages ("output", "errors file").  On success
 * *fd holds the lock (close it to release) and lock_path its path; on a
 * file system without locks *fd is the open file, unlocked, and
 * *no_lock_errno says why (0 when locked), for the caller to warn.
 * Errors: TOPLU_ERR_INVALID_ARGUMENT "another job is writing PATH (it holds
 * the lock L)"; TOPLU_ERR_IO when the lock file cannot be created;
 * TOPLU_ERR_INVALID_ARGUMENT for a path over PL_PATH_MAX. */
toplu_status_t pl_lock_take(const char *path, const char *what, char *lock_path, size_t size, int *fd,
                            int *no_lock_errno, toplu_error_t *err);
/* 1 when a job holds the lock of path (its .NAME.toplu-lock exists and is
 * flock'ed by another process), 0 otherwise (no lock file, a free one, or a
 * file system without locks).  Creates nothing. */
int pl_lock_held(const char *path);

#endif
