/*
 * tests/conformance/main.c - toplu-conformance: run ONNX node tests through toplu.
 *
 *   toplu-conformance --test DIR [--test DIR ...]
 *   toplu-conformance --all ROOT [--jobs N] [--filter SUBSTR[,SUBSTR...]]
 *                     [--markdown FILE] [--expected FILE] [--update-expected FILE]
 *
 * Every test runs in a forked child with a timeout, so a crash or a hang is
 * a verdict (CRASH, TIMEOUT) rather than the end of the run.  The child
 * reports its result through a pipe (see conformance.h); its stdout and
 * stderr go to a second pipe whose tail becomes the reason of a CRASH.
 */
#include <errno.h>
#include <fcntl.h>
#include <dirent.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "conformance.h"

#if defined(__SANITIZE_ADDRESS__)
#define CONF_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define CONF_ASAN 1
#endif
#endif
#ifndef CONF_ASAN
#define CONF_ASAN 0
#endif

/* The runner may be built without -fsanitize but linked with a sanitized
 * libtoplu (the fuzz build): then the ASan runtime is present at run time.
 * ASan reserves terabytes of shadow memory, so no address-space limit. */
#if defined(__GNUC__) || defined(__clang__)
extern void __asan_init(void) __attribute__((weak));
#define CONF_ASAN_LINKED (__asan_init != NULL)
#else
#define CONF_ASAN_LINKED 0
#endif

static const char *const verdict_names[CONF_N_VERDICTS] = {"PASS",       "FAIL",  "UNSUPPORTED",
                                                           "LOAD-ERROR", "CRASH", "TIMEOUT"};

const char *conf_verdict_name(conf_verdict_t v) {
  return (unsigned)v < CONF_N_VERDICTS ? verdict_names[v] : "?";
}

typedef struct run_config {
  conf_options_t opts;
  double timeout;   /* seconds per test */
  int jobs;
  long memory_mb;   /* RLIMIT_AS of a child; 0: none */
  int verbose;      /* print PASS lines too */
  int quiet;        /* print only the summary */
  int fork;         /* 0: run in this process (debugging) */
} run_config_t;

/* A growable byte buffer (child output). */
typedef struct buf {
  char *data;
  size_t len, cap;
} buf_t;

static void buf_append(buf_t *b, const char *p, size_t n) {
  if (b->len + n + 1 > b->cap) {
    size_t cap = b->cap ? b->cap : 1024;
    while (b->len + n + 1 > cap) cap *= 2;
    char *nd = realloc(b->data, cap);
    if (!nd) return; /* drop output rather than fail the run */
    b->data = nd;
    b->cap = cap;
  }
  memcpy(b->data + b->len, p, n);
  b->len += n;
  b->data[b->len] = '\0';
}

/* A running child. */
typedef struct slot {
  int active;
  int index;        /* into results */
  pid_t pid;
  int fd_result, fd_log; /* -1 once closed */
  buf_t result, log;
  double start;
} slot_t;

static double now_seconds(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static char *xstrdup(const char *s) {
  char *d = strdup(s ? s : "");
  if (!d) {
    fprintf(stderr, "toplu-conformance: out of memory\n");
    exit(2);
  }
  return d;
}

/* Parse the child's result lines into r (ops, verdict, message).  Returns
 * 1 when a verdict line was present. */
static int parse_result(const char *text, conf_result_t *r) {
  int have_verdict = 0;
  const char *p = text ? text : "";
  while (*p) {
    const char *e = strchr(p, '\n');
    size_t len = e ? (size_t)(e - p) : strlen(p);
    if (len >= 2 && p[1] == ' ') {
      char *val = malloc(len - 1);
      if (val) {
        memcpy(val, p + 2, len - 2);
        val[len - 2] = '\0';
        if (p[0] == 'O') {
          char **ops = realloc(r->ops, (size_t)(r->n_ops + 1) * sizeof *ops);
          if (ops) {
            r->ops = ops;
            r->ops[r->n_ops++] = val;
            val = NULL;
          }
        } else if (p[0] == 'V') {
          int v = atoi(val);
          if (v >= 0 && v < CONF_N_VERDICTS) {
            r->verdict = (conf_verdict_t)v;
            have_verdict = 1;
          }
        } else if (p[0] == 'M') {
          free(r->message);
          r->message = val;
          val = NULL;
        }
        free(val);
      }
    }
    p += len;
    if (*p == '\n') p++;
  }
  return have_verdict;
}

/* The last max bytes of a log, on one line. */
static void log_tail(const buf_t *log, char *out, size_t size, size_t max) {
  out[0] = '\0';
  if (!log->len) return;
  size_t start = log->len > max ? log->len - max : 0;
  size_t k = 0;
  for (size_t i = start; i < log->len && k + 1 < size; i++) {
    char c = log->data[i];
    out[k++] = (c == '\n' || c == '\r' || c == '\t') ? ' ' : c;
  }
  while (k > 0 && out[k - 1] == ' ') k--;
  out[k] = '\0';
}

/* Fill r from a finished child's output and wait status. */
static void finish_child(slot_t *s, conf_result_t *r, int status, int timed_out, double timeout) {
  r->seconds = now_seconds() - s->start;
  int have = parse_result(s->result.data, r);
  char tail[700], msg[2048];
  log_tail(&s->log, tail, sizeof tail, 600);
  if (timed_out) {
    r->verdict = CONF_TIMEOUT;
    snprintf(msg, sizeof msg, "ran past the %g s timeout%s%s", timeout, tail[0] ? "; log: " : "", tail);
  } else if (WIFSIGNALED(status) || (WIFEXITED(status) && WEXITSTATUS(status) != 0) || !have) {
    char how[160];
    if (WIFSIGNALED(status))
      snprintf(how, sizeof how, "killed by signal %d (%s)", WTERMSIG(status), strsignal(WTERMSIG(status)));
    else if (WIFEXITED(status) && WEXITSTATUS(status) != 0)
      snprintf(how, sizeof how, "exited with status %d", WEXITSTATUS(status));
    else
      snprintf(how, sizeof how, "exited without a verdict");
    snprintf(msg, sizeof msg, "%s%s%s%s%s", how, have ? " after verdict " : "",
             have ? conf_verdict_name(r->verdict) : "", tail[0] ? "; log: " : "", tail);
    r->verdict = CONF_CRASH;
  } else {
    return; /* the child's own verdict and message stand */
  }
  free(r->message);
  r->message = xstrdup(msg);
}

/* Read what is available on *fd into b; close it at EOF. */
static void drain(int *fd, buf_t *b) {
  char tmp[8192];
  while (*fd >= 0) {
    ssize_t n = read(*fd, tmp, sizeof tmp);
    if (n > 0) {
      buf_append(b, tmp, (size_t)n);
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return;
    close(*fd);
    *fd = -1;
  }
}

/* The child: redirect output, limit memory, run the test, exit. */
static void child_main(const run_config_t *cfg, const char *dir, int fd_result, int fd_log) {
  dup2(fd_log, STDOUT_FILENO);
  dup2(fd_log, STDERR_FILENO);
  close(fd_log);
  if (cfg->memory_mb > 0 && !CONF_ASAN && !CONF_ASAN_LINKED) {
    struct rlimit rl;
    rl.rlim_cur = rl.rlim_max = (rlim_t)cfg->memory_mb << 20;
    setrlimit(RLIMIT_AS, &rl);
  }
  conf_run_test(dir, &cfg->opts, fd_result);
  close(fd_result);
  fflush(NULL);
  exit(0);
}

/* Start a child for results[index] in slot s.  Returns 0, or -1 on a
 * system error (then the result is a CRASH with the reason). */
static int start_child(const run_config_t *cfg, slot_t *s, conf_result_t *results, int index, slot_t *slots,
                       int n_slots) {
  int pr[2], pl[2];
  memset(s, 0, sizeof *s);
  if (pipe(pr) != 0) goto fail;
  if (pipe(pl) != 0) {
    close(pr[0]);
    close(pr[1]);
    goto fail;
  }
  fflush(NULL);
  s->start = now_seconds();
  pid_t pid = fork();
  if (pid < 0) {
    close(pr[0]); close(pr[1]); close(pl[0]); close(pl[1]);
    goto fail;
  }
  if (pid == 0) {
    close(pr[0]);
    close(pl[0]);
    for (int k = 0; k < n_slots; k++)
      if (slots[k].active) {
        if (slots[k].fd_result >= 0) close(slots[k].fd_result);
        if (slots[k].fd_log >= 0) close(slots[k].fd_log);
      }
    child_main(cfg, results[index].dir, pr[1], pl[1]);
  }
  close(pr[1]);
  close(pl[1]);
  fcntl(pr[0], F_SETFL, fcntl(pr[0], F_GETFL) | O_NONBLOCK);
  fcntl(pl[0], F_SETFL, fcntl(pl[0], F_GETFL) | O_NONBLOCK);
  s->active = 1;
  s->index = index;
  s->pid = pid;
  s->fd_result = pr[0];
  s->fd_log = pl[0];
  return 0;
fail:
  results[index].verdict = CONF_CRASH;
  free(results[index].message);
  results[index].message = xstrdup(strerror(errno));
  return -1;
}

/* Print one finished test (--test mode prints them in order at the end). */
static void print_result(const run_config_t *cfg, const conf_result_t *r, int single) {
  if (cfg->quiet) return;
  if (single) {
    printf("%s: %s\n", r->name, conf_verdict_name(r->verdict));
    if (r->verdict != CONF_PASS && r->message && r->message[0]) printf("  %s\n", r->message);
  } else if (r->verdict != CONF_PASS || cfg->verbose) {
    printf("%-11s %s%s%s\n", conf_verdict_name(r->verdict), r->name, r->message && r->message[0] ? ": " : "",
           r->message ? r->message : "");
  }
  fflush(stdout);
}

/* Run results[0..n-1] with up to cfg->jobs children at once. */
static void run_all(const run_config_t *cfg, conf_result_t *results, int n, int single) {
  if (!cfg->fork) {
    for (int i = 0; i < n; i++) {
      FILE *tf = tmpfile();
      if (!tf) {
        perror("tmpfile");
        exit(2);
      }
      double t0 = now_seconds();
      conf_run_test(results[i].dir, &cfg->opts, fileno(tf));
      results[i].seconds = now_seconds() - t0;
      buf_t b = {0};
      rewind(tf);
      char tmp[4096];
      size_t got;
      while ((got = fread(tmp, 1, sizeof tmp, tf)) > 0) buf_append(&b, tmp, got);
      fclose(tf);
      parse_result(b.data, &results[i]);
      free(b.data);
      if (!single) print_result(cfg, &results[i], single);
    }
    return;
  }
  int jobs = cfg->jobs > 0 ? cfg->jobs : 1;
  slot_t *slots = calloc((size_t)jobs, sizeof *slots);
  struct pollfd *pfd = calloc((size_t)jobs * 2, sizeof *pfd);
  if (!slots || !pfd) {
    fprintf(stderr, "toplu-conformance: out of memory\n");
    exit(2);
  }
  int next = 0, running = 0;
  while (next < n || running > 0) {
    for (int k = 0; k < jobs && next < n; k++) {
      if (slots[k].active) continue;
      int idx = next++;
      if (start_child(cfg, &slots[k], results, idx, slots, jobs) == 0) running++;
      else if (!single) print_result(cfg, &results[idx], single);
    }
    int np = 0;
    for (int k = 0; k < jobs; k++) {
      if (!slots[k].active) continue;
      if (slots[k].fd_result >= 0) pfd[np++] = (struct pollfd){.fd = slots[k].fd_result, .events = POLLIN};
      if (slots[k].fd_log >= 0) pfd[np++] = (struct pollfd){.fd = slots[k].fd_log, .events = POLLIN};
    }
    if (np) poll(pfd, (nfds_t)np, 50);
    else if (running) usleep(20000);
    for (int k = 0; k < jobs; k++) {
      slot_t *s = &slots[k];
      if (!s->active) continue;
      drain(&s->fd_result, &s->result);
      drain(&s->fd_log, &s->log);
      int status = 0, timed_out = 0;
      pid_t w = waitpid(s->pid, &status, WNOHANG);
      if (w == 0) {
        if (now_seconds() - s->start <= cfg->timeout) continue;
        kill(s->pid, SIGKILL);
        while (waitpid(s->pid, &status, 0) < 0 && errno == EINTR) {
        }
        timed_out = 1;
      }
      /* The child is gone: take what is left in the pipes. */
      drain(&s->fd_result, &s->result);
      drain(&s->fd_log, &s->log);
      if (s->fd_result >= 0) close(s->fd_result);
      if (s->fd_log >= 0) close(s->fd_log);
      finish_child(s, &results[s->index], status, timed_out, cfg->timeout);
      if (!single) print_result(cfg, &results[s->index], single);
      free(s->result.data);
      free(s->log.data);
      s->active = 0;
      running--;
    }
  }
  free(slots);
  free(pfd);
}

static int cmp_name(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

/* Whether name contains one of the comma-separated substrings in filter. */
static int matches_filter(const char *name, const char *filter) {
  if (!filter || !*filter) return 1;
  const char *p = filter;
  while (*p) {
    const char *e = strchr(p, ',');
    size_t len = e ? (size_t)(e - p) : strlen(p);
    if (len) {
      for (const char *q = name; *q; q++)
        if (!strncmp(q, p, len)) return 1;
    }
    p += len;
    if (*p == ',') p++;
  }
  return 0;
}

/* The test_* directories of root holding a model.onnx, sorted. */
static int discover(const char *root, const char *filter, char ***out) {
  DIR *d = opendir(root);
  if (!d) return -1;
  int n = 0, cap = 0;
  char **names = NULL;
  struct dirent *e;
  while ((e = readdir(d))) {
    if (strncmp(e->d_name, "test_", 5) || !matches_filter(e->d_name, filter)) continue;
    char path[4096];
    struct stat st;
    snprintf(path, sizeof path, "%s/%s/model.onnx", root, e->d_name);
    if (stat(path, &st) != 0) continue;
    if (n == cap) {
      cap = cap ? cap * 2 : 256;
      char **nn = realloc(names, (size_t)cap * sizeof *nn);
      if (!nn) {
        fprintf(stderr, "toplu-conformance: out of memory\n");
        exit(2);
      }
      names = nn;
    }
    names[n++] = xstrdup(e->d_name);
  }
  closedir(d);
  if (n) qsort(names, (size_t)n, sizeof *names, cmp_name);
  *out = names;
  return n;
}

/* Whether test name is one a run with filter covers. */
static int in_run(const char *name, const char *filter) { return matches_filter(name, filter); }

static const conf_result_t *find_result(const conf_result_t *results, int n, const char *name) {
  for (int i = 0; i < n; i++)
    if (!strcmp(results[i].name, name)) return &results[i];
  return NULL;
}

static int is_crash(conf_verdict_t v) { return v == CONF_CRASH || v == CONF_TIMEOUT; }

/* Compare the run with the expected verdicts (tests/conformance-expected.txt).
 * Fails (returns 1) when a test expected PASS did not pass (or did not run
 * although the filter covers it), and on any CRASH or TIMEOUT; reports tests
 * newly passing, other changes and tests not in the list.  0 otherwise. */
static int check_expected(const char *path, const conf_result_t *results, int n, const conf_expected_t *e, int ne,
                          const char *filter) {
  int regress = 0, crashes = 0, missing = 0, newly = 0, changed = 0, unlisted = 0, same = 0;
  for (int i = 0; i < n; i++) {
    const conf_result_t *r = &results[i];
    const conf_expected_t *x = conf_find_expected(e, ne, r->name);
    const char *msg = r->message && r->message[0] ? r->message : "";
    if (is_crash(r->verdict)) {
      crashes++;
      fprintf(stderr, "toplu-conformance: %s %s (expected %s): %s\n", conf_verdict_name(r->verdict), r->name,
              x ? conf_verdict_name(x->verdict) : "nothing: not in the list", msg);
    } else if (x && x->verdict == CONF_PASS && r->verdict != CONF_PASS) {
      regress++;
      fprintf(stderr, "toplu-conformance: REGRESSION %s: expected PASS, got %s: %s\n", r->name,
              conf_verdict_name(r->verdict), msg);
    }
    if (!x) {
      unlisted++;
      printf("new test, not in %s: %s %s\n", path, r->name, conf_verdict_name(r->verdict));
    } else if (x->verdict == r->verdict) {
      same++;
    } else if (r->verdict == CONF_PASS) {
      newly++;
      printf("newly passing: %s (expected %s)\n", r->name, conf_verdict_name(x->verdict));
    } else if (x->verdict != CONF_PASS && !is_crash(r->verdict)) {
      changed++;
      printf("changed: %s: %s -> %s: %s\n", r->name, conf_verdict_name(x->verdict), conf_verdict_name(r->verdict),
             msg);
    }
  }
  for (int k = 0; k < ne; k++) {
    if (!in_run(e[k].name, filter) || find_result(results, n, e[k].name)) continue;
    if (e[k].verdict == CONF_PASS) {
      missing++;
      fprintf(stderr, "toplu-conformance: MISSING %s: expected PASS, not found in this run\n", e[k].name);
    } else {
      printf("not found in this run: %s (expected %s)\n", e[k].name, conf_verdict_name(e[k].verdict));
    }
  }
  int bad = regress + crashes + missing;
  printf("expected verdicts (%s): %d as expected, %d newly passing, %d changed, %d not listed; "
         "%d regressions, %d crashes or timeouts, %d expected PASS missing: %s\n",
         path, same, newly, changed, unlisted, regress, crashes, missing, bad ? "FAILED" : "ok");
  if (!bad && (newly || unlisted))
    printf("record the new verdicts with: scripts/conformance.sh --update\n");
  return bad ? 1 : 0;
}

/* Write this run's verdicts into the list at path (entries of tests this run
 * did not cover are kept; a missing file is started).  Refuses (returns 1,
 * writes nothing) when that would turn a PASS into anything else, or when a
 * test crashed or timed out; 2 on a system error. */
static int update_expected(const char *path, const conf_result_t *results, int n, const char *filter) {
  conf_expected_t *e = NULL;
  int ne = 0;
  struct stat st;
  if (stat(path, &st) == 0 && conf_read_expected(path, &e, &ne)) return 2;
  int refuse = 0;
  for (int i = 0; i < n; i++) {
    const conf_expected_t *x = conf_find_expected(e, ne, results[i].name);
    if (is_crash(results[i].verdict)) {
      fprintf(stderr, "toplu-conformance: %s %s: a crash or timeout is never recorded as expected\n",
              conf_verdict_name(results[i].verdict), results[i].name);
      refuse = 1;
    } else if (x && x->verdict == CONF_PASS && results[i].verdict != CONF_PASS) {
      fprintf(stderr, "toplu-conformance: %s was PASS and is now %s: the list is never lowered\n", results[i].name,
              conf_verdict_name(results[i].verdict));
      refuse = 1;
    }
  }
  for (int k = 0; k < ne; k++)
    if (e[k].verdict == CONF_PASS && in_run(e[k].name, filter) && !find_result(results, n, e[k].name)) {
      fprintf(stderr, "toplu-conformance: %s was PASS and is not in this run: the list is never lowered\n",
              e[k].name);
      refuse = 1;
    }
  if (refuse) {
    fprintf(stderr, "toplu-conformance: %s left as it is\n", path);
    conf_free_expected(e, ne);
    return 1;
  }
  conf_expected_t *m = realloc(e, ((size_t)ne + (size_t)n + 1) * sizeof *m);
  if (!m) {
    conf_free_expected(e, ne);
    return 2;
  }
  e = m;
  int ne0 = ne, newly = 0, added = 0, changed = 0;
  for (int i = 0; i < n; i++) {
    conf_expected_t *x = (conf_expected_t *)conf_find_expected(e, ne0, results[i].name);
    if (x) {
      if (x->verdict != results[i].verdict) {
        if (results[i].verdict == CONF_PASS) newly++;
        else changed++;
      }
      x->verdict = results[i].verdict;
    } else {
      e[ne].name = xstrdup(results[i].name);
      e[ne].verdict = results[i].verdict;
      ne++;
      added++;
    }
  }
  int rc = conf_write_expected(path, e, ne) ? 2 : 0;
  if (!rc)
    printf("wrote %s: %d tests, %d newly passing, %d other changes, %d added\n", path, ne, newly, changed, added);
  conf_free_expected(e, ne);
  return rc;
}

static void usage(FILE *f) {
  fprintf(f,
          "usage: toplu-conformance --test DIR [--test DIR ...] [options]\n"
          "       toplu-conformance --all ROOT [options]\n"
          "\n"
          "Runs ONNX backend node tests (DIR holds model.onnx and test_data_set_*/input_N.pb, output_N.pb)\n"
          "through toplu, each in its own process, and prints a verdict per test:\n"
          "PASS, FAIL, UNSUPPORTED, LOAD-ERROR, CRASH or TIMEOUT.\n"
          "\n"
          "  --test DIR             run one test (may be repeated); prints the verdict and the first mismatch\n"
          "  --all ROOT             run every test_* directory under ROOT\n"
          "                         (e.g. /usr/share/libonnx-testdata/data/node)\n"
          "  --filter S[,S...]      with --all: only tests whose name contains one of the substrings\n"
          "  --jobs N               tests run at once (default: online CPUs)\n"
          "  --timeout SECONDS      per test (default 20)\n"
          "  --threads N            session threads in each test (default 1)\n"
          "  --memory-limit MB      address-space limit of each test process (default 4096; 0: none;\n"
          "                         ignored in AddressSanitizer builds)\n"
          "  --rtol X, --atol X     float tolerance (default 1e-3, 1e-5)\n"
          "  --no-optimize          load with toplu_model_options_t.no_optimize\n"
          "  --no-fork              run tests in this process (for a debugger; a crash ends the run)\n"
          "  --markdown FILE        write the report (keeps FILE's <!-- notes --> section)\n"
          "  --expected FILE        with --all: compare with the expected verdicts in FILE (\"test VERDICT\"\n"
          "                         lines): exit 1 when a test expected PASS does not pass or is missing,\n"
          "                         or any test CRASHes or TIMEs OUT; newly passing tests are reported\n"
          "  --update-expected FILE with --all: write this run's verdicts into FILE (others kept); refuses,\n"
          "                         exit 1 and FILE untouched, to turn a PASS into anything else or to\n"
          "                         record a CRASH or TIMEOUT\n"
          "  -v, --verbose          print PASS lines too;  -q, --quiet  print only the summary\n"
          "\n"
          "Exit status: with --test, 0 when every test passes, else 1; with --all, 0 unless\n"
          "--expected or --update-expected fails (1); 2 on usage or system errors (ROOT missing included).\n");
}

/* Value of option argv[*i] (advancing *i), or exit with usage. */
static const char *arg_value(int argc, char **argv, int *i) {
  if (*i + 1 >= argc) {
    fprintf(stderr, "toplu-conformance: %s needs a value\n", argv[*i]);
    exit(2);
  }
  return argv[++*i];
}

int main(int argc, char **argv) {
  run_config_t cfg = {.opts = {.threads = 1, .no_optimize = 0, .rtol = 1e-3, .atol = 1e-5},
                      .timeout = 20.0,
                      .jobs = 0,
                      .memory_mb = 4096,
                      .fork = 1};
  const char *root = NULL, *filter = NULL, *markdown = NULL, *expected = NULL, *update = NULL;
  char **tests = calloc((size_t)argc + 1, sizeof *tests);
  int n_tests = 0;
  if (!tests) return 2;
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i];
    if (!strcmp(a, "--test")) tests[n_tests++] = (char *)arg_value(argc, argv, &i);
    else if (!strcmp(a, "--all")) root = arg_value(argc, argv, &i);
    else if (!strcmp(a, "--filter")) filter = arg_value(argc, argv, &i);
    else if (!strcmp(a, "--jobs") || !strcmp(a, "-j")) cfg.jobs = atoi(arg_value(argc, argv, &i));
    else if (!strcmp(a, "--timeout")) cfg.timeout = atof(arg_value(argc, argv, &i));
    else if (!strcmp(a, "--threads")) cfg.opts.threads = atoi(arg_value(argc, argv, &i));
    else if (!strcmp(a, "--memory-limit")) cfg.memory_mb = atol(arg_value(argc, argv, &i));
    else if (!strcmp(a, "--rtol")) cfg.opts.rtol = atof(arg_value(argc, argv, &i));
    else if (!strcmp(a, "--atol")) cfg.opts.atol = atof(arg_value(argc, argv, &i));
    else if (!strcmp(a, "--no-optimize")) cfg.opts.no_optimize = 1;
    else if (!strcmp(a, "--no-fork")) cfg.fork = 0;
    else if (!strcmp(a, "--markdown")) markdown = arg_value(argc, argv, &i);
    else if (!strcmp(a, "--expected")) expected = arg_value(argc, argv, &i);
    else if (!strcmp(a, "--update-expected")) update = arg_value(argc, argv, &i);
    else if (!strcmp(a, "-v") || !strcmp(a, "--verbose")) cfg.verbose = 1;
    else if (!strcmp(a, "-q") || !strcmp(a, "--quiet")) cfg.quiet = 1;
    else if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
      usage(stdout);
      free(tests);
      return 0;
    } else if (a[0] != '-' && !root) {
      tests[n_tests++] = (char *)a; /* a bare directory is a --test */
    } else {
      fprintf(stderr, "toplu-conformance: unknown option '%s'\n\n", a);
      usage(stderr);
      free(tests);
      return 2;
    }
  }
  if ((!root) == (!n_tests)) {
    usage(stderr);
    free(tests);
    return 2;
  }
  if (cfg.jobs <= 0) {
    long nc = sysconf(_SC_NPROCESSORS_ONLN);
    cfg.jobs = nc > 0 ? (int)nc : 1;
  }
  if (cfg.timeout <= 0) cfg.timeout = 20.0;
  if (cfg.opts.threads < 0) cfg.opts.threads = 1;
  signal(SIGPIPE, SIG_IGN);

  conf_result_t *results;
  int n;
  int single = root == NULL;
  if (single) {
    n = n_tests;
    results = calloc((size_t)n, sizeof *results);
    if (!results) return 2;
    for (int i = 0; i < n; i++) {
      char *dir = xstrdup(tests[i]);
      size_t len = strlen(dir);
      while (len > 1 && dir[len - 1] == '/') dir[--len] = '\0';
      const char *base = strrchr(dir, '/');
      results[i].dir = dir;
      results[i].name = xstrdup(base ? base + 1 : dir);
    }
  } else {
    char **names = NULL;
    n = discover(root, filter, &names);
    if (n < 0) {
      fprintf(stderr, "toplu-conformance: cannot read %s: %s (the node tests: Debian's libonnx-testdata)\n", root,
              strerror(errno));
      free(tests);
      return 2;
    }
    results = calloc((size_t)n + 1, sizeof *results);
    if (!results) return 2;
    for (int i = 0; i < n; i++) {
      char path[4096];
      snprintf(path, sizeof path, "%s/%s", root, names[i]);
      results[i].name = names[i];
      results[i].dir = xstrdup(path);
    }
    free(names);
    if (!cfg.quiet)
      printf("toplu-conformance: %d tests under %s, %d jobs, %g s timeout\n", n, root, cfg.jobs, cfg.timeout);
  }
  free(tests);

  double t0 = now_seconds();
  run_all(&cfg, results, n, single);
  double elapsed = now_seconds() - t0;
  for (int i = 0; single && i < n; i++) print_result(&cfg, &results[i], 1);

  int counts[CONF_N_VERDICTS] = {0};
  for (int i = 0; i < n; i++) counts[results[i].verdict]++;
  int rc = 0;
  if (single) {
    rc = counts[CONF_PASS] == n ? 0 : 1;
    if (n > 1 && !cfg.quiet) printf("%d of %d passed\n", counts[CONF_PASS], n);
  } else {
    printf("\n%d tests in %.1f s:", n, elapsed);
    for (int v = 0; v < CONF_N_VERDICTS; v++) printf(" %s %d%s", conf_verdict_name((conf_verdict_t)v), counts[v],
                                                     v + 1 < CONF_N_VERDICTS ? "," : "\n");
    if (markdown && conf_write_markdown(markdown, results, n, root)) rc = 2;
    if (markdown && !rc) printf("wrote %s\n", markdown);
    conf_expected_t *e = NULL;
    int ne = 0;
    if (expected && !rc) {
      if (conf_read_expected(expected, &e, &ne)) rc = 2;
      else rc = check_expected(expected, results, n, e, ne, filter);
      conf_free_expected(e, ne);
    }
    if (update && rc != 2) {
      int u = update_expected(update, results, n, filter);
      if (u > rc) rc = u;
    }
  }
  for (int i = 0; i < n; i++) {
    free(results[i].name);
    free(results[i].dir);
    free(results[i].message);
    for (int k = 0; k < results[i].n_ops; k++) free(results[i].ops[k]);
    free(results[i].ops);
  }
  free(results);
  return rc;
}
