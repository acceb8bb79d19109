/* pipeline/merge.c - joining shard outputs in input order (see merge.h). */
#include "pipeline/merge.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <fnmatch.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/error.h"
#include "pipeline/checkpoint.h"
#include "pipeline/files.h"
#include "pipeline/identity.h"
#include "pipeline/shard.h"
#include "pipeline/sink.h"
#include "toplu/npy.h"

/* The job checkpoint of a shard output; *found 0 when it has none. */
static toplu_status_t shard_state(const char *kind, const char *path, pl_state_t *st, int *found, toplu_error_t *err) {
  char sp[PL_PATH_MAX];
  *found = 0;
  memset(st, 0, sizeof *st);
  if (!strcmp(kind, "sqlite")) {
    sqlite3 *db = NULL;
    if (sqlite3_open_v2(path, &db, SQLITE_OPEN_READONLY, NULL) != SQLITE_OK) {
      toplu__errorf(err, TOPLU_ERR_IO, "%s: cannot open: %s", path, db ? sqlite3_errmsg(db) : "out of memory");
      sqlite3_close(db);
      return TOPLU_ERR_IO;
    }
    sqlite3_stmt *q = NULL;
    toplu_status_t r = TOPLU_OK;
    if (sqlite3_prepare_v2(db, "SELECT value FROM toplu_job WHERE key = 'state'", -1, &q, NULL) == SQLITE_OK &&
        sqlite3_step(q) == SQLITE_ROW) {
      const char *text = (const char *)sqlite3_column_text(q, 0);
      r = pl_state_parse(text ? text : "", path, st, err);
      if (!r) *found = 1;
    }
    sqlite3_finalize(q);
    sqlite3_close(db);
    return r;
  }
  if (!strcmp(kind, "npy")) {
    if (pl_path_join(path, ".toplu-state", sp, sizeof sp)) return toplu__errorf(err, TOPLU_ERR_INVALID_ARGUMENT, "path too long");
  } else if (pl_path_hidden(path, ".toplu-state", sp, sizeof sp)) {
    return toplu__errorf(err, TOPLU_ERR_INVALID_ARGUMENT, "path too long");
  } else if (!pl_exists(sp)) { /* a link to a shard's file: its checkpoint lies beside the file linked to */
    char real[PL_PATH_MAX];
    if (!pl_path_canon(path, real, sizeof real) && strcmp(real, path)) pl_path_hidden(real, ".toplu-state", sp, sizeof sp);
  }
  return pl_state_load(sp, st, found, err);
}

/* Check that the shards are the complete shards 0..N-1 of one job (their
 * checkpoints say so) and order them by shard index; order[] gets indices
 * into shards.  Shards without a checkpoint are refused unless force, which
 * keeps the order given for all.  note explains. */
static toplu_status_t order_shards(const char *kind, const char *const *shards, int n, int force, int *order,
                                   char *note, size_t note_size, int64_t *processed, int64_t *failed,
                                   toplu_error_t *err) {
  int64_t *idx = malloc(sizeof(int64_t) * (size_t)n + 1), count = -1;
  pl_state_t *sts = calloc((size_t)n + 1, sizeof *sts);
  if (!idx || !sts) {
    free(idx);
    free(sts);
    return toplu__errorf(err, TOPLU_ERR_OUT_OF_MEMORY, "out of memory for %d shards", n);
  }
  int first = -1, unchecked = -1, merged = 0;
  *processed = *failed = 0;
  toplu_status_t r = TOPLU_OK;
  for (int i = 0; i < n && !r; i++) {
    order[i] = i;
    int found;
    if ((r = shard_state(kind, shards[i], &sts[i], &found, err))) break;
    const char *sh = found ? json_string_value(json_object_get(sts[i].job, "shard")) : NULL;
    int64_t k, c;
    char why[2048];
    if (!found || !sh || pl_shard_parse(sh, &k, &c) || json_object_get(sts[i].job, "merged_from") ||
        pl_job_diff(sts[i].job, sts[i].job, 1, why, sizeof why) == 2) {
      if (unchecked < 0) {
        unchecked = i;
        merged = found && json_object_get(sts[i].job, "merged_from") != NULL;
      }
      continue;
    }
    if (sts[i].phase != PL_PHASE_COMPLETE) {
      r = toplu__errorf(err, TOPLU_ERR_INVALID_ARGUMENT, "shard %s (%s) is not complete: finish it (resume its job) first",
                       shards[i], sh);
    } else if (pl_sink_verify(kind, shards[i], &sts[i], why, sizeof why)) {
      r = toplu__errorf(err, TOPLU_ERR_INVALID_ARGUMENT,
                       "shard %s (%s) is not what its job wrote: %s; rerun that shard's job", shards[i], sh, why);
    } else if (first >= 0 && pl_job_diff(sts[first].job, sts[i].job, 1, why, sizeof why)) {
      r = toplu__errorf(err, TOPLU_ERR_INVALID_ARGUMENT,
                       "shard %s (%s) is from another job than %s: %s; merge only the shards of one job", shards[i], sh,
                       shards[first], why);
    } else {
      if (first < 0) first = i;
      count = c;
      idx[i] = k;
      *processed += sts[i].processed;
      *failed += sts[i].failed;
    }
  }
  if (!r && unchecked >= 0 && !force && merged)
    r = toplu__errorf(err, TOPLU_ERR_INVALID_ARGUMENT,
                     "%s is the output of a merge, not of a shard's job; merge the shards it was joined from (its "
                     "checkpoint lists them), or with the force flag (TOPLU_MERGE_FORCE) join the outputs in the order "
                     "given, unchecked",
                     shards[unchecked]);
  else if (!r && unchecked >= 0 && !force)
    r = toplu__errorf(err, TOPLU_ERR_INVALID_ARGUMENT,
                     "shard output %s has no job checkpoint (%s), so it cannot be checked to be a shard of the same job "
                     "as the others; with the force flag (TOPLU_MERGE_FORCE) the outputs are joined in the order given, unchecked",
                     shards[unchecked],
                     !strcmp(kind, "sqlite") ? "no toplu_job table in it"
                     : !strcmp(kind, "npy")  ? "no .toplu-state in it"
                                             : "no .NAME.toplu-state beside it, or one of an older toplu");
  if (!r && unchecked >= 0) {
    if (note)
      snprintf(note, note_size, "force: %s has no job checkpoint; joined in the order given, unchecked",
               shards[unchecked]);
  } else if (!r) {
    for (int i = 0; i < n && !r; i++)
      for (int k = 0; k < i; k++)
        if (idx[k] == idx[i])
          r = toplu__errorf(err, TOPLU_ERR_INVALID_ARGUMENT, "%s and %s are both shard %lld/%lld", shards[k], shards[i],
                           (long long)idx[i], (long long)count);
    if (!r && n != count) {
      char missing[512] = "";
      size_t m = 0;
      int listed = 0;
      for (int64_t k = 0; k < count && m < sizeof missing - 32; k++) {
        int seen = 0;
        for (int i = 0; i < n; i++) seen |= idx[i] == k;
        if (seen) continue;
        if (listed++ < 16) m += (size_t)snprintf(missing + m, sizeof missing - m, "%s%lld", listed > 1 ? ", " : "", (long long)k);
        else if (listed == 17) m += (size_t)snprintf(missing + m, sizeof missing - m, ", ...");
      }
      r = toplu__errorf(err, TOPLU_ERR_INVALID_ARGUMENT, "%d shard%s given, the job has %lld: shard%s %s of %lld %s missing",
                       n, n == 1 ? "" : "s", (long long)count, listed == 1 ? "" : "s", missing, (long long)count,
                       listed == 1 ? "is" : "are");
    }
    for (int i = 1; !r && i < n; i++) /* insertion sort by shard index */
      for (int k = i; k > 0 && idx[order[k - 1]] > idx[order[k]]; k--) {
        int t = order[k];
        order[k] = order[k - 1];
        order[k - 1] = t;
      }
    if (!r && note) snprintf(note, note_size, "ordered by shard index (0..%lld of %lld)", (long long)count - 1, (long long)count);
  }
  for (int i = 0; i < n; i++) pl_state_free(&sts[i]);
  free(sts);
  free(idx);
  return r;
}

/* Append file path's bytes from offset (skipping a first line equal to
 * header when skip_header) to fd. */
static toplu_status_t append_file(int fd, const char *out, const char *path, int64_t offset, toplu_error_t *err) {
  int in = open(path, O_RDONLY);
  if (in < 0) return toplu__errorf(err, TOPLU_ERR_IO, "%s: cannot open: %s", path, strerror(errno));
  if (lseek(in, (off_t)offset, SEEK_SET) < 0) {
    close(in);
    return toplu__errorf(err, TOPLU_ERR_IO, "%s: cannot seek: %s", path, strerror(errno));
  }
  char buf[1 << 16];
  toplu_status_t r = TOPLU_OK;
  for (;;) {
    ssize_t n = read(in, buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) r = toplu__errorf(err, TOPLU_ERR_IO, "%s: read error: %s", path, strerror(errno));
    if (n <= 0) break;
    if ((r = pl_fd_write(fd, buf, (size_t)n, out, err))) break;
  }
  close(in);
  return r;
}

/* Length of the first line of a file (with its newline); 0 for an empty file. */
static toplu_status_t first_line(const char *path, char **line, toplu_error_t *err) {
  FILE *f = fopen(path, "rb");
  if (!f) return toplu__errorf(err, TOPLU_ERR_IO, "%s: cannot open: %s", path, strerror(errno));
  size_t cap = 256, n = 0;
  char *b = malloc(cap);
  int ch;
  while (b && (ch = fgetc(f)) != EOF) {
    if (n + 2 > cap) {
      char *nb = realloc(b, cap *= 2);
      if (!nb) {
        free(b);
        b = NULL;
        break;
      }
      b = nb;
    }
    b[n++] = (char)ch;
    if (ch == '\n') break;
  }
  fclose(f);
  if (!b) return toplu__errorf(err, TOPLU_ERR_OUT_OF_MEMORY, "out of memory reading the first line of %s", path);
  b[n] = '\0';
  *line = b;
  return TOPLU_OK;
}

/* The checkpoint of a merged output (phase complete, the shards it joined):
 * into *st; names (may be NULL; a reference is taken): the files a merged
 * directory holds, so that a later job or merge removes only those. */
static void merged_state(pl_state_t *st, const char *const *shards, const int *order, int n, int64_t processed,
                         int64_t failed, json_t *names) {
  memset(st, 0, sizeof *st);
  st->phase = PL_PHASE_COMPLETE;
  st->processed = processed;
  st->failed = failed;
  st->job = json_object();
  json_t *from = json_array();
  for (int i = 0; i < n; i++) json_array_append_new(from, json_string(shards[order[i]]));
  json_object_set_new(st->job, "merged_from", from);
  json_object_set_new(st->job, "shard", json_string("0/1"));
  if (names) {
    st->extra = json_object();
    json_object_set(st->extra, "names", names);
  }
}

/* Record beside a merged file or in a merged directory that toplu wrote it
 * (so a later merge or job replaces it without overwrite). */
static toplu_status_t mark_merged(const char *state_path, const char *const *shards, const int *order, int n,
                                  int64_t processed, int64_t failed, json_t *names, pl_phase_t phase,
                                  toplu_error_t *err) {
  pl_state_t st;
  merged_state(&st, shards, order, n, processed, failed, names);
  st.phase = phase;
  toplu_status_t r = st.job ? pl_state_save(state_path, &st, err)
                            : toplu__errorf(err, TOPLU_ERR_OUT_OF_MEMORY, "out of memory for %s", state_path);
  pl_state_free(&st);
  return r;
}

/* 1 (with why) when the output exists and no toplu job or merge wrote it. */
static int merge_foreign(const char *kind, const char *output, const char *first_shard, char *why, size_t why_size) {
  char state[PL_PATH_MAX];
  if (!strcmp(kind, "sqlite")) return pl_sink_sqlite_foreign(output, why, why_size);
  if (!pl_exists(output)) return 0;
  if (strcmp(kind, "npy")) {
    if (pl_path_hidden(output, ".toplu-state", state, sizeof state) || pl_exists(state)) return 0;
    snprintf(why, why_size, "output %s exists and no toplu job wrote it (there is no %s beside it)", output, state);
    return 1;
  }
  if (pl_path_join(output, ".toplu-state", state, sizeof state) || pl_exists(state)) return 0;
  DIR *d = opendir(first_shard);
  if (!d) return 0;
  struct dirent *e;
  int found = 0;
  while (!found && (e = readdir(d)) != NULL) {
    size_t l = strlen(e->d_name);
    if (e->d_name[0] == '.' || !((l > 4 && !strcmp(e->d_name + l - 4, ".npy")) || !strcmp(e->d_name, "ids.txt")))
      continue;
    char p[PL_PATH_MAX];
    if (!pl_path_join(output, e->d_name, p, sizeof p) && pl_exists(p)) {
      snprintf(why, why_size, "output %s holds %s, which the merge would replace, and no toplu job wrote it (no "
               ".toplu-state)", output, e->d_name);
      found = 1;
    }
  }
  closedir(d);
  return found;
}

/* Concatenate JSONL or CSV shards (one CSV header). */
static toplu_status_t merge_text(const char *output, const char *const *shards, const int *order, int n, int csv,
                                 toplu_error_t *err) {
  char part[PL_PATH_MAX];
  if (pl_path_hidden(output, ".part", part, sizeof part)) return toplu__errorf(err, TOPLU_ERR_INVALID_ARGUMENT, "path too long");
  int fd = open(part, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0666);
  if (fd < 0) return toplu__errorf(err, TOPLU_ERR_IO, "cannot create %s: %s", part, strerror(errno));
  toplu_status_t r = TOPLU_OK;
  char *header = NULL;
  for (int i = 0; i < n && !r; i++) {
    const char *path = shards[order[i]];
    int64_t skip = 0;
    if (csv) {
      char *line = NULL;
      if ((r = first_line(path, &line, err))) break;
      if (!*line) {
        free(line);
        continue;
      }
      if (!header) {
        header = line;
        if ((r = pl_fd_write(fd, header, strlen(header), part, err))) break;
      } else {
        int same = !strcmp(header, line);
        free(line);
        if (!same) {
          r = toplu__errorf(err, TOPLU_ERR_INVALID_ARGUMENT, "%s has another CSV header than %s", path, shards[order[0]]);
          break;
        }
      }
      skip = (int64_t)strlen(header);
    }
    r = append_file(fd, part, path, skip, err);
  }
  free(header);
  if (!r) r = pl_file_sync(fd, part, err);
  close(fd);
  if (!r) r = pl_file_publish(part, output, err);
  if (r) unlink(part);
  return r;
}

/* Run SQL on db; TOPLU_ERR_IO with the message. */
static toplu_status_t sql(sqlite3 *db, const char *q, const char *path, toplu_error_t *err) {
  char *msg = NULL;
  if (sqlite3_exec(db, q, NULL, NULL, &msg) == SQLITE_OK) return TOPLU_OK;
  toplu__errorf(err, TOPLU_ERR_IO, "%s: %s", path, msg ? msg : sqlite3_errmsg(db));
  sqlite3_free(msg);
  return TOPLU_ERR_IO;
}

/* Insert every shard's rows in order into a new database. */
static toplu_status_t merge_sqlite(const char *output, const char *const *shards, const int *order, int n,
                                   int64_t processed, int64_t failed, toplu_error_t *err) {
  char part[PL_PATH_MAX];
  if (pl_path_hidden(output, ".part", part, sizeof part)) return toplu__errorf(err, TOPLU_ERR_INVALID_ARGUMENT, "path too long");
  unlink(part);
  sqlite3 *db = NULL;
  if (sqlite3_open_v2(part, &db, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE, NULL) != SQLITE_OK) {
    toplu__errorf(err, TOPLU_ERR_IO, "cannot create %s", part);
    sqlite3_close(db);
    return TOPLU_ERR_IO;
  }
  toplu_status_t r = TOPLU_OK;
  /* The results table as the first shard defines it. */
  sqlite3 *first = NULL;
  sqlite3_stmt *q = NULL;
  char *create = NULL;
  if (sqlite3_open_v2(shards[order[0]], &first, SQLITE_OPEN_READONLY, NULL) == SQLITE_OK &&
      sqlite3_prepare_v2(first, "SELECT sql FROM sqlite_master WHERE type = 'table' AND name = 'results'", -1, &q,
                         NULL) == SQLITE_OK &&
      sqlite3_step(q) == SQLITE_ROW && sqlite3_column_text(q, 0))
    create = strdup((const char *)sqlite3_column_text(q, 0));
  sqlite3_finalize(q);
  sqlite3_close(first);
  if (!create) r = toplu__errorf(err, TOPLU_ERR_INVALID_ARGUMENT, "%s has no results table", shards[order[0]]);
  if (!r) r = sql(db, create, part, err);
  free(create);
  if (!r) r = sql(db, "CREATE TABLE toplu_job(key TEXT PRIMARY KEY, value TEXT)", part, err);
  for (int i = 0; i < n && !r; i++) {
    char *att = sqlite3_mprintf("ATTACH DATABASE %Q AS shard", shards[order[i]]);
    r = att ? sql(db, att, part, err) : toplu__errorf(err, TOPLU_ERR_OUT_OF_MEMORY, "out of memory attaching %s", shards[order[i]]);
    sqlite3_free(att);
    if (r) break;
    r = sql(db, "BEGIN; INSERT INTO main.results SELECT * FROM shard.results ORDER BY rowid; COMMIT", part, err);
    if (r) {
      toplu__error_prefix(err, "merging %s", shards[order[i]]);
      sqlite3_exec(db, "ROLLBACK", NULL, NULL, NULL);
    }
    toplu_status_t r2 = sql(db, "DETACH DATABASE shard", part, r ? NULL : err);
    if (!r) r = r2;
  }
  if (!r) {
    pl_state_t st;
    merged_state(&st, shards, order, n, processed, failed, NULL);
    char *text = pl_state_dump(&st);
    pl_state_free(&st);
    char *ins = text ? sqlite3_mprintf("INSERT INTO toplu_job VALUES ('state', %Q)", text) : NULL;
    r = ins ? sql(db, ins, part, err) : toplu__errorf(err, TOPLU_ERR_OUT_OF_MEMORY, "out of memory writing the checkpoint of %s", part);
    sqlite3_free(ins);
    free(text);
  }
  if (sqlite3_close(db) != SQLITE_OK && !r) r = toplu__errorf(err, TOPLU_ERR_IO, "%s: cannot close", part);
  if (!r) r = pl_file_publish(part, output, err);
  if (r) unlink(part);
  return r;
}

/* Concatenate one .npy file of every shard along dim 0. */
static toplu_status_t merge_one_npy(const char *output, const char *name, const char *const *shards, const int *order,
                                    int n, toplu_error_t *err) {
  char path[PL_PATH_MAX], dst[PL_PATH_MAX], part[PL_PATH_MAX];
  toplu_tensor_t total = {0}, *h = calloc((size_t)n, sizeof *h);
  long *off = calloc((size_t)n, sizeof *off);
  toplu_status_t r = h && off ? TOPLU_OK : toplu__errorf(err, TOPLU_ERR_OUT_OF_MEMORY, "out of memory for the headers of %d shards", n);
  int have = 0;
  for (int i = 0; i < n && !r; i++) {
    if (pl_path_join(shards[order[i]], name, path, sizeof path)) {
      r = toplu__errorf(err, TOPLU_ERR_INVALID_ARGUMENT, "path too long");
      break;
    }
    if ((r = toplu_npy_read_header(path, &h[i], &off[i], err))) break;
    if (h[i].ndim < 1) {
      r = toplu__errorf(err, TOPLU_ERR_SHAPE, "%s is a scalar", path);
      break;
    }
    if (h[i].dims[0] == 0) continue; /* an empty shard: its row shape may be unknown */
    if (!have) {
      total = h[i];
      have = 1;
      continue;
    }
    int same = h[i].dtype == total.dtype && h[i].ndim == total.ndim;
    for (int d = 1; same && d < total.ndim; d++) same = h[i].dims[d] == total.dims[d];
    if (!same) {
      char a[128], b[128];
      r = toplu__errorf(err, TOPLU_ERR_SHAPE, "%s is %s %s, earlier shards %s %s", path, toplu_dtype_name(h[i].dtype),
                       toplu_shape_format(h[i].ndim, h[i].dims, a, sizeof a), toplu_dtype_name(total.dtype),
                       toplu_shape_format(total.ndim, total.dims, b, sizeof b));
      break;
    }
    total.dims[0] += h[i].dims[0];
  }
  if (!r && !have) total = h[0];
  if (!r && (pl_path_join(output, name, dst, sizeof dst) || pl_path_hidden(dst, ".part", part, sizeof part)))
    r = toplu__errorf(err, TOPLU_ERR_INVALID_ARGUMENT, "path too long");
  FILE *f = r ? NULL : fopen(part, "wb");
  if (!r && !f) r = toplu__errorf(err, TOPLU_ERR_IO, "cannot create %s: %s", part, strerror(errno));
  if (!r) r = toplu_npy_write_header(f, total.dtype, total.ndim, total.dims, err);
  if (f && fclose(f) != 0 && !r) r = toplu__errorf(err, TOPLU_ERR_IO, "%s: write error", part);
  int fd = r ? -1 : open(part, O_WRONLY | O_APPEND | O_CLOEXEC);
  if (!r && fd < 0) r = toplu__errorf(err, TOPLU_ERR_IO, "%s: cannot open: %s", part, strerror(errno));
  for (int i = 0; i < n && !r; i++) {
    if (h[i].dims[0] == 0) continue;
    pl_path_join(shards[order[i]], name, path, sizeof path);
    r = append_file(fd, part, path, off[i], err);
  }
  if (!r) r = pl_file_sync(fd, part, err);
  if (fd >= 0) close(fd);
  if (!r) r = pl_file_publish(part, dst, err);
  else if (part[0]) unlink(part);
  free(h);
  free(off);
  return r;
}

/* Concatenate every .npy of the shard directories, and ids.txt; names gets
 * the files written (the first shard's .npy files, then ids.txt).  Result
 * files an earlier job or merge left in the output that this merge does not
 * write are removed first; others are refused (pl_sink_npy_stale). */
static toplu_status_t merge_npy(const char *output, const char *const *shards, const int *order, int n, json_t *names,
                                toplu_error_t *err) {
  toplu_status_t r = pl_mkdir_p(output, err);
  if (r) return r;
  DIR *d = opendir(shards[order[0]]);
  if (!d) return toplu__errorf(err, TOPLU_ERR_IO, "%s: cannot open the directory: %s", shards[order[0]], strerror(errno));
  struct dirent *e;
  while ((e = readdir(d)) != NULL) {
    size_t l = strlen(e->d_name);
    if (e->d_name[0] != '.' && l > 4 && !strcmp(e->d_name + l - 4, ".npy"))
      json_array_append_new(names, json_string(e->d_name));
  }
  closedir(d);
  size_t files = json_array_size(names);
  if (!files) return toplu__errorf(err, TOPLU_ERR_INVALID_ARGUMENT, "%s holds no .npy files", shards[order[0]]);
  json_array_append_new(names, json_string("ids.txt"));
  const char **keep = calloc(files + 1, sizeof *keep);
  if (!keep) return toplu__errorf(err, TOPLU_ERR_OUT_OF_MEMORY, "out of memory for %zu names", files + 1);
  for (size_t i = 0; i <= files; i++) keep[i] = json_string_value(json_array_get(names, i));
  r = pl_sink_npy_stale(output, keep, (int)files + 1, 1, err);
  for (size_t i = 0; !r && i < files; i++) r = merge_one_npy(output, keep[i], shards, order, n, err);
  free(keep);
  if (r) return r;
  /* ids.txt */
  char dst[PL_PATH_MAX], part[PL_PATH_MAX], path[PL_PATH_MAX];
  if (pl_path_join(output, "ids.txt", dst, sizeof dst) || pl_path_hidden(dst, ".part", part, sizeof part))
    return toplu__errorf(err, TOPLU_ERR_INVALID_ARGUMENT, "path too long");
  int fd = open(part, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0666);
  if (fd < 0) return toplu__errorf(err, TOPLU_ERR_IO, "cannot create %s: %s", part, strerror(errno));
  for (int i = 0; i < n && !r; i++) {
    pl_path_join(shards[order[i]], "ids.txt", path, sizeof path);
    if (pl_exists(path)) r = append_file(fd, part, path, 0, err);
  }
  if (!r) r = pl_file_sync(fd, part, err);
  close(fd);
  if (!r) r = pl_file_publish(part, dst, err);
  else unlink(part);
  return r;
}

/* Refuse a merge output over what the shards' job read (job: the first
 * shard's checkpoint settings): its model, a source file, a file inside a
 * folder source or matching a glob source, its labels file; a directory
 * output also may not hold any of them.  Overwrite or not: the merge would
 * replace the job's own input. */
static toplu_status_t merge_clobber(const char *output, int npy, const json_t *job, toplu_error_t *err) {
  char out[PL_PATH_MAX];
  toplu_status_t st = pl_output_name_check(output, npy, err);
  if (st) return st;
  if (!job || pl_path_canon(output, out, sizeof out)) return TOPLU_OK;
  struct {
    const char *what;
    const json_t *id;
  } read[64];
  int nr = 0;
  read[nr].what = "model";
  read[nr++].id = json_object_get(job, "model");
  read[nr].what = "labels file";
  read[nr++].id = json_object_get(job, "labels");
  size_t i;
  const json_t *in;
  json_array_foreach(json_object_get(job, "inputs"), i, in) if (nr < 64) {
    read[nr].what = "input";
    read[nr++].id = json_object_get(in, "source");
  }
  for (int k = 0; k < nr; k++) {
    const char *p = json_string_value(json_object_get(read[k].id, "path"));
    if (!p) continue;
    int set = json_object_get(read[k].id, "files") != NULL; /* an image folder or glob */
    int glob = set && strpbrk(p, "*?[") != NULL;
    const char *how = NULL;
    if (glob) how = !fnmatch(p, out, FNM_PATHNAME | FNM_PERIOD) ? "matches" : NULL;
    else if (set) how = pl_path_inside(out, p) ? "lies inside" : npy && pl_path_inside(p, out) ? "would hold" : NULL;
    else how = !strcmp(out, p) ? "is" : npy && pl_path_inside(p, out) ? "would hold" : NULL;
    if (how)
      return toplu__errorf(err, TOPLU_ERR_INVALID_ARGUMENT,
                          "output %s %s the %s %s that the shards' job read: it would be overwritten; write elsewhere",
                          output, how, read[k].what, p);
  }
  return TOPLU_OK;
}

toplu_status_t toplu_job_merge(const char *output, const char *const *shards, int n, unsigned flags, char *note,
                               size_t note_size, toplu_error_t *err) {
  toplu_error_clear(err);
  if (note && note_size) note[0] = '\0';
  if (!output || !*output || n < 1 || !shards)
    return toplu__errorf(err, TOPLU_ERR_INVALID_ARGUMENT, "merge needs an output and at least one shard");
  for (int i = 0; i < n; i++)
    if (!shards[i] || !*shards[i])
      return toplu__errorf(err, TOPLU_ERR_INVALID_ARGUMENT, "shards[%d] is %s", i, shards[i] ? "empty" : "NULL");
  const char *kind = pl_sink_kind(output);
  if (!strcmp(kind, "unknown"))
    return toplu__errorf(err, TOPLU_ERR_INVALID_ARGUMENT, "output %s: no sink writes '%s' files; the output is %s",
                        output, strrchr(output, '.'), pl_sink_kinds_text);
  int npy = !strcmp(kind, "npy");
  if (npy && pl_exists(output) && !pl_is_dir(output))
    return toplu__errorf(err, TOPLU_ERR_INVALID_ARGUMENT,
                        "output %s exists and is not a directory: a name without an extension is a .npy directory "
                        "output; name a directory, or a .jsonl, .csv or .sqlite file",
                        output);
  if (!npy && pl_is_dir(output))
    return toplu__errorf(err, TOPLU_ERR_INVALID_ARGUMENT, "output %s is a directory; name a %s file", output, kind);
  for (int i = 0; i < n; i++) {
    if (!pl_exists(shards[i])) {
      char cp[PL_PATH_MAX], pp[PL_PATH_MAX];
      int have_cp = !pl_path_hidden(shards[i], ".toplu-state", cp, sizeof cp) && pl_exists(cp);
      if ((have_cp || (!pl_path_hidden(shards[i], ".part", pp, sizeof pp) && pl_exists(pp))) &&
          pl_lock_held(shards[i]))
        return toplu__errorf(err, TOPLU_ERR_INVALID_ARGUMENT,
                            "shard output %s is not complete: a job is writing it now (it holds its lock); wait for "
                            "it to finish, then merge",
                            shards[i]);
      if (have_cp || (!pl_path_hidden(shards[i], ".part", pp, sizeof pp) && pl_exists(pp)))
        return toplu__errorf(err, TOPLU_ERR_INVALID_ARGUMENT,
                            "shard output %s is not complete: its job stopped before the end (%s %s is there); "
                            "resume that job (set resume), then merge",
                            shards[i], have_cp ? "its checkpoint" : "its part file", have_cp ? cp : pp);
      return toplu__errorf(err, TOPLU_ERR_NOT_FOUND, "shard output %s: no such file or directory", shards[i]);
    }
    /* the kind of what is there: a directory is a .npy output whatever its name */
    const char *sk = pl_is_dir(shards[i]) ? "npy" : pl_sink_kind(shards[i]);
    if (strcmp(sk, kind))
      return toplu__errorf(err, TOPLU_ERR_INVALID_ARGUMENT,
                          "shard %s is a %s output, the output %s is %s: the kinds differ", shards[i],
                          !strcmp(sk, "npy") ? ".npy directory" : sk, output,
                          !strcmp(kind, "npy") ? "a .npy directory" : kind);
    char a[PL_PATH_MAX], b[PL_PATH_MAX], why[2 * PL_PATH_MAX];
    if (!strcmp(kind, "sqlite") && pl_sink_sqlite_table_only(shards[i], why, sizeof why))
      return toplu__errorf(err, TOPLU_ERR_INVALID_ARGUMENT,
                          "shard %s; merge joins only whole databases (table results): run the shards' jobs "
                          "without sqlite_table, or join their tables with SQL (INSERT INTO ... SELECT ... ORDER BY "
                          "rowid, in shard order)",
                          why);
    if (!strcmp(shards[i], output) || (!pl_path_canon(shards[i], a, sizeof a) && !pl_path_canon(output, b, sizeof b) &&
                                       !strcmp(a, b)))
      return toplu__errorf(err, TOPLU_ERR_INVALID_ARGUMENT, "output %s is also given as a shard", output);
  }
  int *order = malloc(sizeof(int) * (size_t)n);
  if (!order) return toplu__errorf(err, TOPLU_ERR_OUT_OF_MEMORY, "out of memory for %d shards", n);
  /* the output's lock, as a job takes it: a merge never writes an output a job (or another merge) is writing */
  char lock_path[PL_PATH_MAX];
  int lock_fd = -1, no_lock = 0;
  toplu_status_t r = pl_lock_take(output, "output", lock_path, sizeof lock_path, &lock_fd, &no_lock, err);
  if (!r && no_lock && note && note_size)
    snprintf(note, note_size, "cannot lock %s (%s): nothing stops a job from writing %s at once", lock_path,
             strerror(no_lock), output);
  int64_t processed = 0, failed = 0;
  size_t nl = note ? strlen(note) : 0;
  if (!r)
    r = order_shards(kind, shards, n, (flags & TOPLU_MERGE_FORCE) != 0, order, note ? note + nl : NULL,
                     note ? note_size - nl : 0, &processed, &failed, err);
  if (!r) { /* the output may not be what the shards' job read */
    pl_state_t first;
    int found = 0;
    toplu_error_t ignored;
    if (!shard_state(kind, shards[order[0]], &first, &found, &ignored) && found) {
      r = merge_clobber(output, npy, first.job, err);
      pl_state_free(&first);
    }
  }
  char why[2 * PL_PATH_MAX + 256], state[PL_PATH_MAX];
  if (!r && !(flags & TOPLU_MERGE_OVERWRITE) && merge_foreign(kind, output, shards[order[0]], why, sizeof why))
    r = toplu__errorf(err, TOPLU_ERR_INVALID_ARGUMENT,
                      "%s; remove it, write elsewhere, or set the overwrite flag (TOPLU_MERGE_OVERWRITE) to replace it",
                      why);
  if (!r && (npy ? pl_path_join(output, ".toplu-state", state, sizeof state)
                 : pl_path_hidden(output, ".toplu-state", state, sizeof state)))
    r = toplu__errorf(err, TOPLU_ERR_INVALID_ARGUMENT, "output %s: path too long", output);
  json_t *names = npy && !r ? json_array() : NULL;
  if (npy && !r && !names) r = toplu__errorf(err, TOPLU_ERR_OUT_OF_MEMORY, "out of memory for the file names");
  /* The checkpoint first, saying a merge is under way (phase running), then the output, then the checkpoint
   * complete: a merge killed between its output's rename and its checkpoint left an output no later merge
   * would replace without overwrite (a fresh user's finding of 2026-12-06, killing it at every syscall). */
  if (!r && strcmp(kind, "sqlite")) {
    if (npy) r = pl_mkdir_p(output, err);
    /* (one already there, an earlier job's or merge's, marks it as toplu's and lists a directory's files) */
    if (!r && !pl_exists(state)) r = mark_merged(state, shards, order, n, 0, 0, NULL, PL_PHASE_RUNNING, err);
  }
  if (!r) {
    if (!strcmp(kind, "jsonl")) r = merge_text(output, shards, order, n, 0, err);
    else if (!strcmp(kind, "csv")) r = merge_text(output, shards, order, n, 1, err);
    else if (!strcmp(kind, "sqlite")) r = merge_sqlite(output, shards, order, n, processed, failed, err);
    else r = merge_npy(output, shards, order, n, names, err);
    if (!r && strcmp(kind, "sqlite"))
      r = mark_merged(state, shards, order, n, processed, failed, names, PL_PHASE_COMPLETE, err);
  }
  if (!r && note && note_size) { /* the rows, as a job's summary counts them (the note said only the order) */
    size_t l = strlen(note);
    snprintf(note + l, note_size - l, "%s%lld rows: %lld with results, %lld failed", l ? "; " : "",
             (long long)(processed + failed), (long long)processed, (long long)failed);
  }
  json_decref(names);
  if (lock_fd >= 0) close(lock_fd);
  free(order);
  return r;
}
