/* pipeline/job_resume.c - where a run starts, commits, the errors file and finishing (see job.h). */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/error.h"
#include "pipeline/buf.h"
#include "pipeline/job.h"

toplu_status_t pl_job_commit(toplu_job_t *j, toplu_error_t *err) {
  if (j->ck.errors_fd >= 0) {
    toplu_status_t st = pl_file_sync(j->ck.errors_fd, j->set.errors_path, err);
    if (st) return st;
  }
  j->ck.st.errors_bytes = j->ck.errors_len;
  return j->io.sink->ops->commit(j->io.sink, &j->ck.st, err);
}

toplu_status_t pl_job_write_chunk(toplu_job_t *j, pl_chunk_t *c, toplu_error_t *err) {
  if (j->ck.errors_fd >= 0 && c->errors.len) {
    toplu_status_t st = pl_fd_write(j->ck.errors_fd, c->errors.data, c->errors.len, j->set.errors_path, err);
    if (st) return st;
    j->ck.errors_len += (int64_t)c->errors.len;
  }
  return j->io.sink->ops->write(j->io.sink, c, err);
}

/* Open the errors file: created empty, or cut to the checkpoint's length. */
static toplu_status_t open_errors(toplu_job_t *j, const pl_state_t *from, toplu_error_t *err) {
  const char *path = j->set.errors_path;
  if (!path) return TOPLU_OK;
  char dir[PL_PATH_MAX];
  pl_path_dir(path, dir, sizeof dir);
  if (!pl_is_dir(dir)) {
    toplu_status_t st = pl_mkdir_p(dir, err);
    if (st) return st;
  }
  if (!from) {
    j->ck.errors_fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0666);
    j->ck.errors_len = 0;
  } else {
    int64_t have = pl_file_size(path);
    if (have < 0 && from->errors_bytes > 0)
      return toplu__errorf(err, TOPLU_ERR_IO,
                          "resume: the errors file %s is gone, the checkpoint says it held %lld bytes; start over "
                          "without resume",
                          path, (long long)from->errors_bytes);
    if (have < from->errors_bytes)
      return toplu__errorf(err, TOPLU_ERR_IO,
                          "resume: the errors file %s holds %lld bytes, the checkpoint says %lld; start over without "
                          "resume",
                          path, (long long)(have < 0 ? 0 : have), (long long)from->errors_bytes);
    j->ck.errors_fd = open(path, O_WRONLY | O_CREAT | O_CLOEXEC, 0666);
    if (j->ck.errors_fd >= 0 &&
        (ftruncate(j->ck.errors_fd, (off_t)from->errors_bytes) != 0 || lseek(j->ck.errors_fd, 0, SEEK_END) < 0))
      return toplu__errorf(err, TOPLU_ERR_IO, "%s: cannot cut to the checkpoint: %s", path, strerror(errno));
    j->ck.errors_len = from->errors_bytes;
  }
  if (j->ck.errors_fd < 0) return toplu__errorf(err, TOPLU_ERR_IO, "errors file %s: cannot open: %s", path, strerror(errno));
  return TOPLU_OK;
}

toplu_status_t pl_job_start(toplu_job_t *j, int *done, toplu_error_t *err) {
  pl_job_io_t *io = &j->io;
  pl_job_ckpt_t *ck = &j->ck;
  *done = 0;
  /* The checkpoint was loaded and compared with these settings in toplu_job_create. */
  int found = j->set.resume && ck->loaded_found;
  pl_state_t loaded = {0};
  if (found) {
    loaded = ck->loaded;
    memset(&ck->loaded, 0, sizeof ck->loaded);
  }
  toplu_status_t st = TOPLU_OK;
  if (found && (loaded.phase == PL_PHASE_COMPLETE || loaded.phase == PL_PHASE_FINISHING)) {
    /* the errors file is part of the results: a complete job's must be what it wrote (it was not checked, so a
     * removed or replaced one passed as "complete already"; a fresh user's finding of 2026-12-06) */
    const char *ep = j->set.errors_path;
    int64_t have = ep ? pl_file_size(ep) : 0;
    if (ep && have != loaded.errors_bytes && !(have < 0 && loaded.errors_bytes == 0)) {
      const long long want = (long long)loaded.errors_bytes;
      pl_state_free(&loaded);
      return toplu__errorf(err, TOPLU_ERR_INVALID_ARGUMENT,
                          "resume: the errors file %s %s, the complete job wrote %lld bytes there; start over "
                          "without resume",
                          ep, have < 0 ? "is missing" : "has another length", want);
    }
    ck->st = loaded;
    ck->base_processed = ck->st.processed;
    ck->base_failed = ck->st.failed;
    j->stats.rows_skipped = io->row_end - io->row_first;
    *done = 1;
    if (loaded.phase == PL_PHASE_FINISHING) {
      st = io->sink->ops->finish(io->sink, &ck->st, err);
    } else {
      j->stats.nothing_to_do = 1;
      pl_job_log(j, TOPLU_LOG_NOTE, "%s is complete already (%lld rows: %lld with results, %lld failed); nothing to do",
                 j->set.output, (long long)(io->row_end - io->row_first), (long long)ck->st.processed,
                 (long long)ck->st.failed);
    }
    if (!st) j->stats.complete = 1;
    return st;
  }
  if (found) {
    int64_t off = loaded.next_row - io->row_first;
    if (loaded.next_row < io->row_first || loaded.next_row > io->row_end ||
        (off % io->batch && loaded.next_row != io->row_end)) {
      const long long at = (long long)loaded.next_row; /* (pl_state_free clears it) */
      pl_state_free(&loaded);
      return toplu__errorf(err, TOPLU_ERR_PARSE,
                          "resume: the checkpoint of %s stops at row %lld, not a chunk boundary (rows %lld..%lld "
                          "in chunks of %lld)",
                          j->set.output, at, (long long)io->row_first, (long long)io->row_end, (long long)io->batch);
    }
    if ((st = io->sink->ops->begin(io->sink, &loaded, err)) || (st = open_errors(j, &loaded, err))) {
      pl_state_free(&loaded);
      return st;
    }
    ck->st = loaded;
  } else {
    if ((st = io->sink->ops->begin(io->sink, NULL, err)) || (st = open_errors(j, NULL, err))) return st;
    memset(&ck->st, 0, sizeof ck->st);
    ck->st.phase = PL_PHASE_RUNNING;
    ck->st.next_row = io->row_first;
  }
  json_decref(ck->st.job);
  ck->st.job = json_incref(ck->desc);
  ck->base_processed = ck->st.processed;
  ck->base_failed = ck->st.failed;
  return TOPLU_OK;
}

toplu_status_t pl_job_finish(toplu_job_t *j, toplu_error_t *err) {
  double t = pl_now();
  toplu_status_t st = pl_job_commit(j, err);
  if (!st) st = j->io.sink->ops->finish(j->io.sink, &j->ck.st, err);
  if (!st && j->ck.errors_fd >= 0) {
    close(j->ck.errors_fd);
    j->ck.errors_fd = -1;
  }
  pthread_mutex_lock(&j->ring.mu);
  j->stats.busy_s[TOPLU_STAGE_WRITE] += pl_now() - t;
  if (!st) {
    j->stats.wall_s = j->t0 > 0 ? pl_now() - j->t0 : 0;
    j->stats.complete = 1;
  }
  pthread_mutex_unlock(&j->ring.mu);
  return st;
}
