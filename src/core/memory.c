/* core/memory.c - the memory available to this process: /proc/meminfo's MemAvailable, or less under a cgroup
 * limit (see core/memory.h). */
#include "core/memory.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define GiB (1024.0 * 1024.0 * 1024.0)

/* ---- reading small files ---- */

/* Read up to size-1 bytes of a file into buf (NUL-terminated); 0 or -1. */
int toplu__read_text(const char *path, char *buf, size_t size) {
  FILE *f = fopen(path, "r");
  if (!f) return -1;
  size_t n = fread(buf, 1, size - 1, f);
  buf[n] = 0;
  fclose(f);
  return 0;
}

/* Value of "key <number>" on a line of text (first match at a line start), or -1. */
static int64_t keyed_number(const char *text, const char *key) {
  size_t kl = strlen(key);
  for (const char *p = text; p && *p; p = strchr(p, '\n'), p = p ? p + 1 : NULL) {
    if (!strncmp(p, key, kl) && (p[kl] == ' ' || p[kl] == ':' || p[kl] == '\t')) {
      const char *q = p + kl;
      while (*q == ' ' || *q == ':' || *q == '\t') q++;
      char *end;
      long long v = strtoll(q, &end, 10);
      if (end != q) return v;
    }
  }
  return -1;
}

uint64_t toplu__meminfo_available(const char *text) {
  int64_t kb = keyed_number(text, "MemAvailable");
  return kb > 0 ? (uint64_t)kb * 1024 : 0;
}

uint64_t toplu__cgroup_available(const char *limit_text, const char *usage_text, const char *stat_text) {
  if (!limit_text) return UINT64_MAX;
  while (*limit_text == ' ') limit_text++;
  if (!strncmp(limit_text, "max", 3)) return UINT64_MAX;
  char *end;
  unsigned long long limit = strtoull(limit_text, &end, 10);
  if (end == limit_text || limit >= (1ull << 62)) return UINT64_MAX; /* v1 "no limit" is near 2^63 */
  unsigned long long usage = usage_text ? strtoull(usage_text, NULL, 10) : 0;
  /* The page cache of files that is clean, active or not, is not counted as used: the kernel reclaims it before
   * it kills for the limit (as MemAvailable counts it available). Until 2026-12-06 only inactive_file was left
   * out, so the model file a process had just read (active) was counted beside its weights in memory: ResNet-50 in
   * a 400 MiB cgroup had 155 MiB "available" and toplu tune refused a batch of 8 that toplu run then ran. */
  int64_t cache = 0;
  if (stat_text) {
    static const char *const keys[2][4] = {{"total_inactive_file", "total_active_file", "total_dirty", "total_writeback"},
                                           {"inactive_file", "active_file", "file_dirty", "file_writeback"}};
    for (int v = 0; v < 2 && cache <= 0; v++) { /* v1's hierarchical counters, else v2's (or v1's own) */
      int64_t in = keyed_number(stat_text, keys[v][0]), ac = keyed_number(stat_text, keys[v][1]);
      int64_t di = keyed_number(stat_text, keys[v][2]), wb = keyed_number(stat_text, keys[v][3]);
      if (v == 1 && di < 0) di = keyed_number(stat_text, "dirty"); /* v1's own counter */
      if (v == 1 && wb < 0) wb = keyed_number(stat_text, "writeback");
      cache = (in > 0 ? in : 0) + (ac > 0 ? ac : 0) - (di > 0 ? di : 0) - (wb > 0 ? wb : 0);
    }
  }
  if (cache > 0 && (unsigned long long)cache < usage) usage -= (unsigned long long)cache;
  return usage >= limit ? 0 : (uint64_t)(limit - usage);
}

/* The cgroup path of a controller from /proc/self/cgroup ("" for v2's "0::"). */
static int cgroup_path(const char *controller, char *out, size_t size) {
  char text[4096];
  if (toplu__read_text("/proc/self/cgroup", text, sizeof text)) return -1;
  for (char *line = strtok(text, "\n"); line; line = strtok(NULL, "\n")) {
    char *c1 = strchr(line, ':');
    char *c2 = c1 ? strchr(c1 + 1, ':') : NULL;
    if (!c2) continue;
    size_t cl = (size_t)(c2 - c1 - 1);
    int match = controller ? (cl == strlen(controller) && !strncmp(c1 + 1, controller, cl)) : cl == 0;
    if (!match) {
      /* v1 lines may list several controllers: "4:cpu,memory:/x" */
      if (!controller) continue;
      char list[256];
      snprintf(list, sizeof list, ",%.*s,", (int)cl, c1 + 1);
      char want[64];
      snprintf(want, sizeof want, ",%s,", controller);
      if (!strstr(list, want)) continue;
    }
    snprintf(out, size, "%s", c2 + 1);
    return 0;
  }
  return -1;
}

/* Smallest available bytes over the cgroup directory dir and its parents up to root. */
static uint64_t cgroup_walk(const char *root, const char *rel, const char *limit_file, const char *usage_file,
                            char *where, size_t where_size) {
  uint64_t best = UINT64_MAX;
  char dir[2048], path[2300], lim[128], use[128], stat[16384];
  snprintf(dir, sizeof dir, "%s%s", root, rel);
  for (;;) {
    snprintf(path, sizeof path, "%s/%s", dir, limit_file);
    if (!toplu__read_text(path, lim, sizeof lim)) {
      snprintf(path, sizeof path, "%s/%s", dir, usage_file);
      int have_use = !toplu__read_text(path, use, sizeof use);
      snprintf(path, sizeof path, "%s/memory.stat", dir);
      int have_stat = !toplu__read_text(path, stat, sizeof stat);
      uint64_t av = toplu__cgroup_available(lim, have_use ? use : NULL, have_stat ? stat : NULL);
      if (av < best) {
        best = av;
        if (where) snprintf(where, where_size, "%s/%s", dir, limit_file);
      }
    }
    if (strlen(dir) <= strlen(root)) break;
    char *slash = strrchr(dir, '/');
    if (!slash || slash < dir + strlen(root)) break;
    *slash = 0;
  }
  return best;
}

uint64_t toplu__memory_available(char *how, size_t how_size) {
  char text[8192];
  uint64_t meminfo = 0;
  if (!toplu__read_text("/proc/meminfo", text, sizeof text)) meminfo = toplu__meminfo_available(text);
  char rel[1024] = "", where[2400] = "";
  uint64_t cg = UINT64_MAX, a;
  char w[2400];
  /* cgroup v2: unified hierarchy at /sys/fs/cgroup (or /sys/fs/cgroup/unified). */
  if (!cgroup_path(NULL, rel, sizeof rel)) {
    if ((a = cgroup_walk("/sys/fs/cgroup", rel, "memory.max", "memory.current", w, sizeof w)) < cg) {
      cg = a;
      snprintf(where, sizeof where, "%s", w);
    }
    if ((a = cgroup_walk("/sys/fs/cgroup/unified", rel, "memory.max", "memory.current", w, sizeof w)) < cg) {
      cg = a;
      snprintf(where, sizeof where, "%s", w);
    }
  }
  /* cgroup v1 memory controller; inside a container the namespace root is the
   * mount point itself, so try the path and the root. */
  if (!cgroup_path("memory", rel, sizeof rel)) {
    if ((a = cgroup_walk("/sys/fs/cgroup/memory", rel, "memory.limit_in_bytes", "memory.usage_in_bytes", w,
                         sizeof w)) < cg) {
      cg = a;
      snprintf(where, sizeof where, "%s", w);
    }
    if ((a = cgroup_walk("/sys/fs/cgroup/memory", "", "memory.limit_in_bytes", "memory.usage_in_bytes", w,
                         sizeof w)) < cg) {
      cg = a;
      snprintf(where, sizeof where, "%s", w);
    }
  }
  uint64_t avail = meminfo;
  if (cg != UINT64_MAX && (cg < avail || avail == 0)) avail = cg;
  /* TOPLU_MEMORY_AVAILABLE=BYTES: at most that much (a budget beside other work on the machine; tests) */
  const char *env = getenv("TOPLU_MEMORY_AVAILABLE");
  char *end = NULL;
  unsigned long long cap = env && *env ? strtoull(env, &end, 10) : 0;
  if (cap > 0 && end && !*end && (avail == 0 || cap < avail)) {
    if (how) snprintf(how, how_size, "TOPLU_MEMORY_AVAILABLE=%llu (the machine has %.2f GiB)", cap, (double)avail / GiB);
    return cap;
  }
  if (how) {
    if (cg != UINT64_MAX && avail == cg)
      snprintf(how, how_size, "cgroup limit %s less its usage without clean file cache: %.2f GiB; MemAvailable %.2f GiB",
               where, (double)cg / GiB, (double)meminfo / GiB);
    else if (cg != UINT64_MAX)
      snprintf(how, how_size, "MemAvailable in /proc/meminfo (%.2f GiB; cgroup %s allows %.2f GiB more)",
               (double)meminfo / GiB, where, (double)cg / GiB);
    else
      snprintf(how, how_size, "MemAvailable in /proc/meminfo (no cgroup memory limit)");
  }
  return avail;
}

