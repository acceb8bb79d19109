/* core/cpu.c - how many cores the process may use: affinity and cgroup CPU quota (see toplu/profile.h). */
#define _GNU_SOURCE
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/cpu.h"
#include "toplu/profile.h"

double toplu__cpu_quota_exact(const char *quota_text, const char *period_text) {
  if (!quota_text) return 0;
  char *end;
  while (*quota_text == ' ' || *quota_text == '\t') quota_text++;
  if (!strncmp(quota_text, "max", 3)) return 0;
  double quota = strtod(quota_text, &end);
  if (end == quota_text || quota <= 0) return 0; /* -1 (v1): no quota */
  double period = 0;
  if (period_text) {
    period = strtod(period_text, &end);
    if (end == period_text) period = 0;
  } else { /* v2 cpu.max: "QUOTA PERIOD" */
    period = strtod(end, &end);
  }
  if (period <= 0) return 0;
  return quota / period;
}

/* Cores of an unrounded quota rounded up (0: none). */
static int round_cores(double cores) {
  if (cores <= 0) return 0;
  int n = (int)cores;
  if (cores > n + 1e-9) n++; /* 1.5 cores: 2 threads, as Go and the JVM round */
  return n < 1 ? 1 : n;
}

int toplu__cpu_quota_cores(const char *quota_text, const char *period_text) {
  return round_cores(toplu__cpu_quota_exact(quota_text, period_text));
}

/* The text of a small file into buf; -1 when it cannot be read. */
static int read_small(const char *path, char *buf, size_t size) {
  FILE *f = fopen(path, "r");
  if (!f) return -1;
  size_t n = fread(buf, 1, size - 1, f);
  fclose(f);
  buf[n] = '\0';
  return 0;
}

/* The cgroup path of the cpu controller (v1, controller "cpu") or of the
 * unified hierarchy (v2, "0::"); -1 when /proc/self/cgroup has none. */
static int cgroup_rel(int v2, char *out, size_t size) {
  char text[4096];
  if (read_small("/proc/self/cgroup", text, sizeof text)) return -1;
  for (char *line = strtok(text, "\n"); line; line = strtok(NULL, "\n")) {
    char *c1 = strchr(line, ':'), *c2 = c1 ? strchr(c1 + 1, ':') : NULL;
    if (!c2) continue;
    *c2 = '\0';
    const char *ctl = c1 + 1;
    int match = 0;
    if (v2) match = !strcmp(line, "0") && !*ctl;
    else
      for (char *t = (char *)ctl, *save = NULL, *tok; !match && (tok = strtok_r(t, ",", &save)); t = NULL)
        match = !strcmp(tok, "cpu");
    if (match) {
      snprintf(out, size, "%s", c2 + 1);
      return 0;
    }
  }
  return -1;
}

/* The smallest quota (in cores, 0: none) over dir and its parents up to root, rounded up (Go's and the JVM's
 * count); *exact (may be NULL) gets it unrounded. */
static int walk(const char *root, const char *rel, int v2, char *where, size_t where_size, double *exact) {
  char r[1024], path[1400], q[256], p[256];
  snprintf(r, sizeof r, "%s", rel);
  int best = 0;
  for (;;) {
    double ex = 0;
    if (v2) {
      snprintf(path, sizeof path, "%s%s/cpu.max", root, r);
      if (!read_small(path, q, sizeof q)) ex = toplu__cpu_quota_exact(q, NULL);
    } else {
      snprintf(path, sizeof path, "%s%s/cpu.cfs_quota_us", root, r);
      if (!read_small(path, q, sizeof q)) {
        snprintf(path, sizeof path, "%s%s/cpu.cfs_period_us", root, r);
        if (!read_small(path, p, sizeof p)) ex = toplu__cpu_quota_exact(q, p);
      }
    }
    int cores = round_cores(ex);
    if (cores > 0 && exact && (*exact <= 0 || ex < *exact)) *exact = ex;
    if (cores > 0 && (best == 0 || cores < best)) {
      best = cores;
      snprintf(where, where_size, "%s%s", root, r);
    }
    char *slash = strrchr(r, '/');
    if (!slash || !r[0] || !strcmp(r, "/")) break;
    if (slash == r) r[1] = '\0', r[0] = '/';
    else *slash = '\0';
    if (!strcmp(r, "/")) r[0] = '\0';
  }
  return best;
}

static int cpu_count;
static double cpu_quota; /* the cgroup quota in cores, unrounded (0: none) */
static char cpu_how[512];
static pthread_once_t cpu_once = PTHREAD_ONCE_INIT;

static void count_once(void) {
  int n = 0;
  cpu_set_t set;
  if (sched_getaffinity(0, sizeof set, &set) == 0) n = CPU_COUNT(&set);
  if (n < 1) n = (int)sysconf(_SC_NPROCESSORS_ONLN);
  if (n < 1) n = 1;
  char rel[1024], where[1400] = "";
  int quota = 0, q;
  if (!cgroup_rel(1, rel, sizeof rel)) {
    if ((q = walk("/sys/fs/cgroup", rel, 1, where, sizeof where, &cpu_quota)) > 0) quota = q;
    /* inside a container's cgroup namespace the path may be outside the mount: its root is the container's */
    if (!quota && (q = walk("/sys/fs/cgroup", "", 1, where, sizeof where, &cpu_quota)) > 0) quota = q;
  }
  if (!quota && !cgroup_rel(0, rel, sizeof rel)) {
    static const char *const roots[] = {"/sys/fs/cgroup/cpu", "/sys/fs/cgroup/cpu,cpuacct", "/sys/fs/cgroup/cpuacct,cpu"};
    for (int k = 0; k < 3 && !quota; k++) {
      if ((q = walk(roots[k], rel, 0, where, sizeof where, &cpu_quota)) > 0) quota = q;
      else if ((q = walk(roots[k], "", 0, where, sizeof where, &cpu_quota)) > 0) quota = q;
    }
  }
  if (quota > 0 && quota < n) {
    snprintf(cpu_how, sizeof cpu_how, "%d: the CPU quota of cgroup %s (%d cores in the affinity mask)", quota, where, n);
    n = quota;
  } else {
    snprintf(cpu_how, sizeof cpu_how, "%d: the cores in the affinity mask%s", n, quota > 0 ? " (under the cgroup's quota)" : "");
  }
  cpu_count = n;
}

double toplu__cpu_quota_share(double quota, int threads) {
  if (quota <= 0 || threads < 1 || quota >= threads) return 1;
  return quota / threads;
}

double toplu__cpu_quota(void) {
  pthread_once(&cpu_once, count_once);
  return cpu_quota;
}

int toplu_cpu_count(char *how, size_t how_size) {
  pthread_once(&cpu_once, count_once);
  if (how && how_size) snprintf(how, how_size, "%s", cpu_how);
  return cpu_count;
}
