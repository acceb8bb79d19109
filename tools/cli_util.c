/* tools/cli_util.c - option parsing, messages, names and files for the toplu CLI. */
#include <errno.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "cli.h"

void cli_error(const char *cmd, const char *fmt, ...) {
  va_list ap;
  if (cmd) fprintf(stderr, "toplu %s: ", cmd);
  else fputs("toplu: ", stderr);
  va_start(ap, fmt);
  vfprintf(stderr, fmt, ap);
  va_end(ap);
  fputc('\n', stderr);
}

int cli_usage_error(const char *cmd, const char *fmt, ...) {
  va_list ap;
  if (cmd) fprintf(stderr, "toplu %s: ", cmd);
  else fputs("toplu: ", stderr);
  va_start(ap, fmt);
  vfprintf(stderr, fmt, ap);
  va_end(ap);
  fputc('\n', stderr);
  /* the synopsis only (up to the first blank line), not the whole help: after a bad value the error line
   * stayed buried above some 60 lines of options (fresh-user finding of 2026-12-05) */
  const cli_command_t *c = cmd ? cli_find_command(cmd) : NULL;
  if (c && c->usage) {
    const char *end = strstr(c->usage, "\n\n");
    int n = end ? (int)(end - c->usage) : (int)strlen(c->usage);
    fprintf(stderr, "\n%.*s\n(toplu %s --help: all options)\n", n, c->usage, cmd);
  }
  return CLI_USAGE;
}

int cli_option(const char *cmd, int argc, char **argv, int *i, const char *name, const char **value) {
  const char *a = argv[*i];
  size_t n = strlen(name);
  if (strncmp(a, name, n) != 0) return 0;
  if (a[n] == '=') {
    *value = a + n + 1;
    (*i)++;
    return 1;
  }
  if (a[n] != '\0') return 0;
  if (*i + 1 >= argc) {
    cli_usage_error(cmd, "%s needs a value", name);
    return -1;
  }
  *value = argv[*i + 1];
  *i += 2;
  return 1;
}

int cli_flag(char **argv, int *i, const char *name) {
  if (strcmp(argv[*i], name) != 0) return 0;
  (*i)++;
  return 1;
}

int cli_parse_int(const char *s, int64_t min, int64_t max, int64_t *out) {
  if (!s || !*s) return -1;
  char *end;
  errno = 0;
  long long v = strtoll(s, &end, 10);
  if (errno || *end || v < min || v > max) return -1;
  *out = v;
  return 0;
}

int cli_parse_dims(const char *s, int64_t *dims) {
  while (*s == ' ' || *s == '[' || *s == '(') s++;
  int n = 0;
  for (;;) {
    while (*s == ' ') s++;
    if (!*s || *s == ']' || *s == ')') break;
    if (*s < '0' || *s > '9') return -1;
    if (n == TOPLU_MAX_DIMS) return -1;
    char *end;
    errno = 0;
    long long v = strtoll(s, &end, 10);
    if (errno || v < 0) return -1;
    dims[n++] = v;
    s = end;
    while (*s == ' ') s++;
    if (*s == ',' || *s == 'x' || *s == 'X') s++;
    else if (*s && *s != ']' && *s != ')') return -1;
  }
  while (*s == ']' || *s == ')' || *s == ' ') s++;
  return *s ? -1 : n;
}

int cli_parse_shape_dims(const char *s, int64_t *dims, char *why, size_t why_size) {
  char tmp[8];
  if (!why) {
    why = tmp;
    why_size = sizeof tmp;
  }
  if (why_size) why[0] = '\0';
  while (*s == ' ' || *s == '[' || *s == '(') s++;
  int n = 0;
  for (;;) {
    while (*s == ' ') s++;
    if (!*s || *s == ']' || *s == ')') break;
    if (*s < '0' || *s > '9') {
      size_t len = strcspn(s, ",])");
      if (*s == '-')
        snprintf(why, why_size, "dim %d = %.*s is negative: sizes are whole numbers >= 1", n, (int)len, s);
      else
        snprintf(why, why_size, "dim %d = '%.*s' is not a number: give every dim as a size, e.g. 1,3,224,224", n,
                 (int)len, s);
      return -1;
    }
    if (n == TOPLU_MAX_DIMS) {
      snprintf(why, why_size, "more than %d dims", TOPLU_MAX_DIMS);
      return -1;
    }
    char *end;
    errno = 0;
    long long v = strtoll(s, &end, 10);
    if (errno == ERANGE || v > CLI_MAX_DIM) {
      snprintf(why, why_size, "dim %d = %.*s is too large (at most %lld per dim)", n, (int)(end - s), s,
               (long long)CLI_MAX_DIM);
      return -1;
    }
    dims[n++] = v;
    s = end;
    while (*s == ' ') s++;
    if (*s == ',' || *s == 'x' || *s == 'X') s++;
    else if (*s && *s != ']' && *s != ')') {
      snprintf(why, why_size, "unexpected '%c' after dim %d (separate dims with commas, e.g. 1,3,224,224)", *s,
               n - 1);
      return -1;
    }
  }
  while (*s == ']' || *s == ')' || *s == ' ') s++;
  if (*s) {
    snprintf(why, why_size, "unexpected text '%s' after the dims", s);
    return -1;
  }
  return n;
}

int cli_check_input_file(const char *cmd, const char *what, const char *path) {
  struct stat sb;
  if (stat(path, &sb) != 0) {
    cli_error(cmd, "%s: %s", path, strerror(errno));
    return CLI_USAGE;
  }
  if (S_ISDIR(sb.st_mode)) {
    cli_error(cmd, "%s: is a directory, not a %s file", path, what);
    return CLI_USAGE;
  }
  if (access(path, R_OK) != 0) {
    cli_error(cmd, "%s: %s", path, strerror(errno));
    return CLI_USAGE;
  }
  return CLI_OK;
}

int cli_check_out_dir(const char *cmd, const char *opt, const char *dir) {
  char path[4096];
  size_t len = strlen(dir);
  if (len == 0 || len >= sizeof path) {
    cli_error(cmd, "%s '%s': %s", opt, dir, len ? strerror(ENAMETOOLONG) : "empty path");
    return CLI_USAGE;
  }
  memcpy(path, dir, len + 1);
  int exists = 1;
  for (;;) {
    struct stat sb;
    if (stat(path, &sb) == 0) {
      if (!S_ISDIR(sb.st_mode)) {
        if (exists) cli_error(cmd, "%s %s: exists and is not a directory", opt, dir);
        else cli_error(cmd, "%s %s: cannot create it: %s is not a directory", opt, dir, path);
        return CLI_USAGE;
      }
      /* access() passes for root everywhere but on read-only mounts; /sys and /proc refuse only when
       * something is created there: so a directory is made (and removed) there too */
      char probe[4200];
      snprintf(probe, sizeof probe, "%s/.toplu-probe-XXXXXX", path);
      int ok = access(path, W_OK | X_OK) == 0 && mkdtemp(probe) != NULL;
      if (!ok) {
        if (exists) cli_error(cmd, "%s %s: cannot write there: %s", opt, dir, strerror(errno));
        else cli_error(cmd, "%s %s: cannot create it in %s: %s", opt, dir, path, strerror(errno));
        return CLI_USAGE;
      }
      rmdir(probe);
      return CLI_OK;
    }
    if ((errno != ENOENT && errno != ENOTDIR) || !strcmp(path, ".") || !strcmp(path, "/")) {
      cli_error(cmd, "%s %s: %s", opt, dir, strerror(errno));
      return CLI_USAGE;
    }
    exists = 0;
    /* up one level: strip trailing slashes, then the last component */
    char *slash;
    while (len > 1 && path[len - 1] == '/') path[--len] = '\0';
    slash = strrchr(path, '/');
    if (!slash) {
      snprintf(path, sizeof path, ".");
    } else if (slash == path) {
      path[1] = '\0';
    } else {
      *slash = '\0';
    }
    len = strlen(path);
  }
}

const char *cli_plural(long long n) { return n == 1 ? "" : "s"; }

const char *cli_format_info_dims(const toplu_value_info_t *v, char *buf, size_t size) {
  if (!size) return buf;
  if (v->ndim < 0) {
    snprintf(buf, size, "[unknown rank]");
    return buf;
  }
  size_t pos = 0;
  buf[0] = '\0';
  pos += (size_t)snprintf(buf, size, "[");
  for (int d = 0; d < v->ndim && pos < size; d++) {
    const char *sep = d ? ", " : "";
    if (v->dims[d] >= 0) pos += (size_t)snprintf(buf + pos, size - pos, "%s%lld", sep, (long long)v->dims[d]);
    else pos += (size_t)snprintf(buf + pos, size - pos, "%s%s", sep, v->dim_names[d] ? v->dim_names[d] : "?");
  }
  if (pos < size) snprintf(buf + pos, size - pos, "]");
  return buf;
}


int cli_mkdir_p(const char *dir) {
  char path[4096];
  size_t len = strlen(dir);
  if (len == 0 || len >= sizeof path) {
    errno = ENAMETOOLONG;
    return -1;
  }
  memcpy(path, dir, len + 1);
  for (char *p = path + 1; *p; p++) {
    if (*p != '/') continue;
    *p = '\0';
    if (mkdir(path, 0777) != 0 && errno != EEXIST) return -1;
    *p = '/';
  }
  if (mkdir(path, 0777) != 0 && errno != EEXIST) return -1;
  struct stat sb;
  if (stat(path, &sb) != 0) return -1;
  if (!S_ISDIR(sb.st_mode)) {
    errno = ENOTDIR;
    return -1;
  }
  return 0;
}

double cli_now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

int cli_status_exit(toplu_status_t st) {
  switch (st) {
    case TOPLU_OK: return CLI_OK;
    case TOPLU_ERR_INVALID_ARGUMENT: case TOPLU_ERR_IO: case TOPLU_ERR_PARSE: case TOPLU_ERR_INVALID_MODEL:
    case TOPLU_ERR_UNSUPPORTED: case TOPLU_ERR_SHAPE: case TOPLU_ERR_NOT_FOUND: return CLI_USAGE;
    default: return CLI_FAIL;
  }
}

const char *cli_human(double v, char *buf, size_t size) {
  static const char *units[] = {"", " k", " M", " G", " T", " P"};
  int u = 0;
  while (v >= 1000.0 && u < 5) {
    v /= 1000.0;
    u++;
  }
  if (u == 0) snprintf(buf, size, "%.0f", v);
  else snprintf(buf, size, v < 10 ? "%.2f%s" : v < 100 ? "%.1f%s" : "%.0f%s", v, units[u]);
  return buf;
}

const char *cli_human_bytes(double bytes, char *buf, size_t size) {
  static const char *units[] = {"bytes", "KiB", "MiB", "GiB", "TiB"};
  int u = 0;
  while (bytes >= 1024.0 && u < 4) {
    bytes /= 1024.0;
    u++;
  }
  if (u == 0) snprintf(buf, size, "%.0f bytes", bytes);
  else snprintf(buf, size, "%.1f %s", bytes, units[u]);
  return buf;
}

void cli_log_stderr(void *user, toplu_log_level_t level, const char *message) {
  const int *quiet = user;
  if (quiet && *quiet && level > TOPLU_LOG_WARNING) return;
  if (level == TOPLU_LOG_DEBUG || level == TOPLU_LOG_PROGRESS)
    fprintf(stderr, "%s\n", message);
  else
    fprintf(stderr, "%s: %s\n", toplu_log_level_name(level), message);
}

void cli_session_env(toplu_session_options_t *so) {
  const char *v;
  if ((v = getenv("TOPLU_PLAN_DUMP")) && *v && strcmp(v, "0")) {
    so->plan_dump = 1;
    if (!so->log) so->log = cli_log_stderr;
  }
  if ((v = getenv("TOPLU_NO_BLOCKED")) && *v) so->no_blocked = v;
  if ((v = getenv("TOPLU_BACKENDS")) && *v) so->backends = v;
}

int cli_no_fuse(const char *name) {
  const char *v = getenv("TOPLU_NO_FUSE");
  size_t len = strlen(name);
  if (!v || !len) return 0;
  /* a comma-separated list of fusions to leave out: "attention", "qdq_residual", "depthwise", "qdq_lookup",
   * "projection" */
  for (const char *p = v; (p = strstr(p, name)) != NULL; p += len)
    if ((p == v || p[-1] == ',') && (p[len] == '\0' || p[len] == ',')) return 1;
  return 0;
}

/* The names TOPLU_NO_FUSE takes, as cli_model_env reads them. */
static const char *const no_fuse_names[] = {"attention", "qdq_residual", "depthwise", "qdq_lookup", "projection"};

int cli_no_fuse_check(const char *cmd) {
  const char *v = getenv("TOPLU_NO_FUSE");
  if (!v) return CLI_OK;
  const size_t n_names = sizeof no_fuse_names / sizeof no_fuse_names[0];
  for (const char *p = v; *p;) {
    size_t len = strcspn(p, ",");
    int known = len == 0; /* an empty entry ("a,,b", a trailing comma) names nothing */
    for (size_t k = 0; k < n_names && !known; k++)
      known = strlen(no_fuse_names[k]) == len && !strncmp(p, no_fuse_names[k], len);
    if (!known) {
      cli_error(cmd,
                "environment variable TOPLU_NO_FUSE names '%.*s', which is not a fusion: expected a comma-separated "
                "list of attention, qdq_residual, depthwise, qdq_lookup, projection",
                (int)(len > 64 ? 64 : len), p);
      return CLI_USAGE;
    }
    p += len;
    if (*p == ',') p++;
  }
  return CLI_OK;
}

void cli_model_env(toplu_model_options_t *mo) {
  if (cli_no_fuse("attention")) mo->no_fuse_attention = 1;
  if (cli_no_fuse("qdq_residual")) mo->no_fuse_qdq_residual = 1;
  if (cli_no_fuse("depthwise")) mo->no_fuse_depthwise = 1;
  if (cli_no_fuse("qdq_lookup")) mo->no_fuse_qdq_lookup = 1;
  if (cli_no_fuse("projection")) mo->no_fuse_projection = 1;
}

/* See cli.h.  GNU OpenMP reads its settings once, as the program loads, so they are set by starting again. */
void cli_openmp_respawn(int argc, char **argv) {
  if (getenv("GOMP_SPINCOUNT") || getenv("OMP_WAIT_POLICY") || getenv("KMP_BLOCKTIME")) return;
  setenv("GOMP_SPINCOUNT", "3000", 1);
  setenv("KMP_BLOCKTIME", "1", 1);
  char **nargv = calloc((size_t)argc + 2, sizeof *nargv);
  if (!nargv) return;
  nargv[0] = (char *)"toplu";
  for (int i = 0; i < argc; i++) nargv[i + 1] = argv[i];
  fflush(NULL);
  execv("/proc/self/exe", nargv);
  free(nargv); /* exec failed: go on with the defaults (the variables set stay set, and unread) */
}
