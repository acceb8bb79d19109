/* pipeline/files.c - file names and durable writes for jobs. */
#include "pipeline/files.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/error.h"
#include "core/file.h"
#include "pipeline/identity.h"

/* Split path into its directory (without the slash) and base, ignoring trailing slashes. */
static void split_path(const char *path, char *dir, size_t dsize, char *base, size_t bsize) {
  size_t n = strlen(path);
  while (n > 1 && path[n - 1] == '/') n--;
  size_t s = n;
  while (s > 0 && path[s - 1] != '/') s--;
  size_t bl = n - s < bsize - 1 ? n - s : bsize - 1;
  memcpy(base, path + s, bl);
  base[bl] = '\0';
  if (s == 0) snprintf(dir, dsize, ".");
  else if (s == 1) snprintf(dir, dsize, "/");
  else snprintf(dir, dsize, "%.*s", (int)(s - 1), path);
}

int pl_path_hidden(const char *path, const char *suffix, char *out, size_t size) {
  char dir[PL_PATH_MAX], base[PL_PATH_MAX];
  split_path(path, dir, sizeof dir, base, sizeof base);
  int n = snprintf(out, size, "%s%s.%s%s", dir, strcmp(dir, "/") ? "/" : "", base, suffix);
  return n < 0 || (size_t)n >= size ? -1 : 0;
}

toplu_status_t pl_output_name_check(const char *path, int dir_output, toplu_error_t *err) {
  return pl_hidden_name_check(path, dir_output ? ".toplu-lock" : ".toplu-state.tmp", err);
}

toplu_status_t pl_hidden_name_check(const char *path, const char *sfx, toplu_error_t *err) {
  char dir[PL_PATH_MAX], base[PL_PATH_MAX];
  split_path(path, dir, sizeof dir, base, sizeof base);
  long name_max = pathconf(pl_is_dir(dir) ? dir : ".", _PC_NAME_MAX);
  if (name_max <= 0) name_max = 255;
  size_t need = 1 + strlen(base) + strlen(sfx);
  if (need <= (size_t)name_max) return TOPLU_OK;
  /* the figures first: the names themselves may fill the message */
  return toplu__errorf(err, TOPLU_ERR_INVALID_ARGUMENT,
                       "output name of %zu bytes: toplu's file beside it would be %zu, past the file system's limit of "
                       "%ld bytes on a name (use one of at most %zu bytes): %s (beside it: .%s%s)",
                       strlen(base), need, name_max, (size_t)name_max - 1 - strlen(sfx), path, base, sfx);
}

int pl_path_join(const char *dir, const char *name, char *out, size_t size) {
  size_t dl = strlen(dir);
  int n = snprintf(out, size, "%s%s%s", dir, dl && dir[dl - 1] == '/' ? "" : "/", name);
  return n < 0 || (size_t)n >= size ? -1 : 0;
}

void pl_path_dir(const char *path, char *out, size_t size) {
  char base[PL_PATH_MAX];
  split_path(path, out, size, base, sizeof base);
}

int pl_is_dir(const char *path) {
  struct stat sb;
  return stat(path, &sb) == 0 && S_ISDIR(sb.st_mode);
}

int pl_exists(const char *path) {
  struct stat sb;
  return stat(path, &sb) == 0;
}

int64_t pl_file_size(const char *path) {
  struct stat sb;
  return stat(path, &sb) == 0 ? (int64_t)sb.st_size : -1;
}

toplu_status_t pl_open_regular(const char *path, int *fd, int64_t *size, toplu_error_t *err) {
  *fd = -1;
  /* O_NONBLOCK: opening a FIFO without a writer would wait forever. */
  int f = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
  if (f < 0) return toplu__errorf(err, TOPLU_ERR_IO, "%s: cannot open: %s", path, strerror(errno));
  struct stat sb;
  if (fstat(f, &sb) != 0) {
    int e = errno;
    close(f);
    return toplu__errorf(err, TOPLU_ERR_IO, "%s: cannot stat: %s", path, strerror(e));
  }
  if (!S_ISREG(sb.st_mode)) {
    close(f);
    return toplu__errorf(err, TOPLU_ERR_INVALID_ARGUMENT, "%s is %s; toplu reads only regular files", path,
                        toplu__file_kind((unsigned)sb.st_mode));
  }
  int fl = fcntl(f, F_GETFL);
  if (fl >= 0) (void)fcntl(f, F_SETFL, fl & ~O_NONBLOCK);
  *fd = f;
  if (size) *size = (int64_t)sb.st_size;
  return TOPLU_OK;
}

toplu_status_t pl_file_read_limit(const char *path, int64_t max_bytes, const char *limit_name, char **data,
                                  size_t *len, toplu_error_t *err) {
  *data = NULL;
  *len = 0;
  int fd;
  int64_t size;
  toplu_status_t st = pl_open_regular(path, &fd, &size, err);
  if (st) return st;
  if (size > max_bytes) {
    close(fd);
    return toplu__errorf(err, TOPLU_ERR_INVALID_ARGUMENT, "%s: %lld bytes, above the limit of %lld bytes%s%s%s", path,
                        (long long)size, (long long)max_bytes, limit_name ? " (" : "", limit_name ? limit_name : "",
                        limit_name ? ")" : "");
  }
  FILE *f = fdopen(fd, "rb");
  if (!f) {
    close(fd);
    return toplu__errorf(err, TOPLU_ERR_OUT_OF_MEMORY, "%s: out of memory opening it", path);
  }
  size_t cap = 4096, n = 0;
  char *p = malloc(cap);
  int over = 0;
  while (p) {
    if (n + 1 >= cap) {
      char *q = realloc(p, cap * 2);
      if (!q) {
        free(p);
        p = NULL;
        break;
      }
      p = q;
      cap *= 2;
    }
    size_t got = fread(p + n, 1, cap - n - 1, f);
    n += got;
    if (got == 0) break;
    if ((uint64_t)n > (uint64_t)max_bytes) { /* it grew since fstat */
      over = 1;
      break;
    }
  }
  int bad = ferror(f);
  fclose(f);
  if (!p) return toplu__errorf(err, TOPLU_ERR_OUT_OF_MEMORY, "%s: out of memory reading it", path);
  if (bad || over) {
    free(p);
    if (over)
      return toplu__errorf(err, TOPLU_ERR_INVALID_ARGUMENT, "%s: grew above the limit of %lld bytes while read", path,
                          (long long)max_bytes);
    return toplu__errorf(err, TOPLU_ERR_IO, "%s: read error", path);
  }
  p[n] = '\0';
  *data = p;
  *len = n;
  return TOPLU_OK;
}

toplu_status_t pl_file_read(const char *path, char **data, size_t *len, toplu_error_t *err) {
  return pl_file_read_limit(path, INT64_MAX, NULL, data, len, err);
}

toplu_status_t pl_fd_write(int fd, const void *data, size_t len, const char *path, toplu_error_t *err) {
  const char *p = data;
  while (len > 0) {
    ssize_t w = write(fd, p, len);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) return toplu__errorf(err, TOPLU_ERR_IO, "%s: write failed: %s", path, w < 0 ? strerror(errno) : "no space");
    p += w;
    len -= (size_t)w;
  }
  return TOPLU_OK;
}

toplu_status_t pl_file_sync(int fd, const char *path, toplu_error_t *err) {
  if (fdatasync(fd) != 0 && errno != EINVAL && errno != EROFS)
    return toplu__errorf(err, TOPLU_ERR_IO, "%s: fdatasync failed: %s", path, strerror(errno));
  return TOPLU_OK;
}

void pl_dir_sync(const char *path) {
  char dir[PL_PATH_MAX];
  pl_path_dir(path, dir, sizeof dir);
  int fd = open(dir, O_RDONLY | O_DIRECTORY);
  if (fd < 0) return;
  (void)fsync(fd); /* best effort: some file systems refuse fsync on directories */
  close(fd);
}

toplu_status_t pl_file_replace(const char *path, const void *data, size_t len, toplu_error_t *err) {
  char tmp[PL_PATH_MAX];
  if (snprintf(tmp, sizeof tmp, "%s.tmp", path) >= (int)sizeof tmp)
    return toplu__errorf(err, TOPLU_ERR_INVALID_ARGUMENT, "%s: path too long", path);
  int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC, 0666);
  if (fd < 0) return toplu__errorf(err, TOPLU_ERR_IO, "%s: cannot create: %s", tmp, strerror(errno));
  toplu_status_t st = pl_fd_write(fd, data, len, tmp, err);
  if (!st && fsync(fd) != 0) st = toplu__errorf(err, TOPLU_ERR_IO, "%s: fsync failed: %s", tmp, strerror(errno));
  if (close(fd) != 0 && !st) st = toplu__errorf(err, TOPLU_ERR_IO, "%s: close failed: %s", tmp, strerror(errno));
  if (!st && rename(tmp, path) != 0)
    st = toplu__errorf(err, TOPLU_ERR_IO, "cannot rename %s to %s: %s", tmp, path, strerror(errno));
  if (st) {
    unlink(tmp);
    return st;
  }
  pl_dir_sync(path);
  return TOPLU_OK;
}

toplu_status_t pl_file_publish(const char *from, const char *to, toplu_error_t *err) {
  if (rename(from, to) != 0)
    return toplu__errorf(err, TOPLU_ERR_IO, "cannot rename %s to %s: %s", from, to, strerror(errno));
  pl_dir_sync(to);
  return TOPLU_OK;
}

int pl_file_remove(const char *path) {
  if (unlink(path) == 0 || errno == ENOENT) return 0;
  return -1;
}

toplu_status_t pl_mkdir_p(const char *dir, toplu_error_t *err) {
  char path[PL_PATH_MAX];
  size_t len = strlen(dir);
  if (len == 0 || len >= sizeof path) return toplu__errorf(err, TOPLU_ERR_INVALID_ARGUMENT, "bad directory name '%s'", dir);
  memcpy(path, dir, len + 1);
  for (char *p = path + 1; *p; p++) {
    if (*p != '/') continue;
    *p = '\0';
    if (mkdir(path, 0777) != 0 && errno != EEXIST)
      return toplu__errorf(err, TOPLU_ERR_IO, "cannot create directory %s: %s", path, strerror(errno));
    *p = '/';
  }
  if (mkdir(path, 0777) != 0 && errno != EEXIST)
    return toplu__errorf(err, TOPLU_ERR_IO, "cannot create directory %s: %s", path, strerror(errno));
  if (!pl_is_dir(path)) return toplu__errorf(err, TOPLU_ERR_IO, "%s exists and is not a directory", path);
  return TOPLU_OK;
}

int pl_lock_held(const char *path) {
  char canon[PL_PATH_MAX], lock_path[PL_PATH_MAX];
  const char *p = path;
  if (pl_path_canon(path, canon, sizeof canon) == 0 && strcmp(canon, "/") != 0) p = canon;
  if (pl_path_hidden(p, ".toplu-lock", lock_path, sizeof lock_path)) return 0;
  int f = open(lock_path, O_RDONLY | O_CLOEXEC);
  if (f < 0) return 0;
  int held = flock(f, LOCK_SH | LOCK_NB) != 0 && errno == EWOULDBLOCK;
  close(f);
  return held;
}

toplu_status_t pl_lock_take(const char *path, const char *what, char *lock_path, size_t size, int *fd,
                            int *no_lock_errno, toplu_error_t *err) {
  char canon[PL_PATH_MAX], dir[PL_PATH_MAX];
  const char *p = path;
  *fd = -1;
  *no_lock_errno = 0;
  if (pl_path_canon(path, canon, sizeof canon) == 0 && strcmp(canon, "/") != 0) p = canon;
  if (pl_path_hidden(p, ".toplu-lock", lock_path, size))
    return toplu__errorf(err, TOPLU_ERR_INVALID_ARGUMENT, "%s %s: path longer than %d bytes", what, path, PL_PATH_MAX - 1);
  pl_path_dir(lock_path, dir, sizeof dir);
  if (!pl_is_dir(dir)) {
    toplu_status_t st = pl_mkdir_p(dir, err);
    if (st) return st;
  }
  int f = open(lock_path, O_RDWR | O_CREAT | O_CLOEXEC, 0666);
  if (f < 0) return toplu__errorf(err, TOPLU_ERR_IO, "cannot create the lock file %s: %s", lock_path, strerror(errno));
  if (flock(f, LOCK_EX | LOCK_NB) != 0) {
    int e = errno;
    if (e == EWOULDBLOCK) {
      close(f);
      return toplu__errorf(err, TOPLU_ERR_INVALID_ARGUMENT,
                          "another job is writing %s %s (it holds the lock %s); wait for it to finish, or write elsewhere",
                          what, path, lock_path);
    }
    *no_lock_errno = e; /* a file system without locks: the caller goes on, unprotected, and says so */
  }
  *fd = f;
  return TOPLU_OK;
}
