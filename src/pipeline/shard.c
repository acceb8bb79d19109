/* pipeline/shard.c - shards: parsing, the environment of Kubernetes and Slurm, row ranges. */
#include "pipeline/shard.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"

/* A whole number from text; 0 or -1. */
static int parse_i64(const char *s, int64_t *out) {
  if (!s || !*s) return -1;
  char *e;
  errno = 0;
  long long v = strtoll(s, &e, 10);
  if (errno || *e) return -1;
  *out = v;
  return 0;
}

int pl_shard_parse(const char *text, int64_t *index, int64_t *count) {
  const char *slash = text ? strchr(text, '/') : NULL;
  if (!slash) return -1;
  char a[32];
  if ((size_t)(slash - text) >= sizeof a) return -1;
  memcpy(a, text, (size_t)(slash - text));
  a[slash - text] = '\0';
  if (parse_i64(a, index) || parse_i64(slash + 1, count)) return -1;
  return *count >= 1 && *index >= 0 && *index < *count ? 0 : -1;
}

toplu_status_t pl_shard_resolve(int64_t index, int64_t count, pl_shard_t *out, toplu_error_t *err) {
  memset(out, 0, sizeof *out);
  if (count > 0) {
    if (index < 0 || index >= count)
      return toplu__errorf(err, TOPLU_ERR_INVALID_ARGUMENT, "shard %lld/%lld: the index must be in 0..count-1", (long long)index,
                          (long long)count);
    out->index = index;
    out->count = count;
    snprintf(out->from, sizeof out->from, "options");
    return TOPLU_OK;
  }
  const char *k8s = getenv("JOB_COMPLETION_INDEX"), *slurm = getenv("SLURM_ARRAY_TASK_ID");
  if (k8s && *k8s) {
    int64_t k, n;
    const char *ns = getenv("JOB_COMPLETIONS");
    if (parse_i64(k8s, &k)) return toplu__errorf(err, TOPLU_ERR_INVALID_ARGUMENT, "JOB_COMPLETION_INDEX='%s' is not a number", k8s);
    if (!ns || parse_i64(ns, &n) || n < 1)
      return toplu__errorf(err, TOPLU_ERR_INVALID_ARGUMENT,
                          "JOB_COMPLETION_INDEX is set (a Kubernetes Indexed Job) but JOB_COMPLETIONS is %s: set it in "
                          "the pod spec to the Job's completions, or set shard_index and shard_count",
                          ns ? "not a count" : "not set");
    if (k < 0 || k >= n)
      return toplu__errorf(err, TOPLU_ERR_INVALID_ARGUMENT, "JOB_COMPLETION_INDEX=%lld is not below JOB_COMPLETIONS=%lld",
                          (long long)k, (long long)n);
    out->index = k;
    out->count = n;
    snprintf(out->from, sizeof out->from, "JOB_COMPLETION_INDEX");
    return TOPLU_OK;
  }
  if (slurm && *slurm) {
    int64_t id, n, min = 0, step = 1;
    const char *ns = getenv("SLURM_ARRAY_TASK_COUNT"), *mins = getenv("SLURM_ARRAY_TASK_MIN"),
               *steps = getenv("SLURM_ARRAY_TASK_STEP");
    if (parse_i64(slurm, &id) || !ns || parse_i64(ns, &n) || n < 1 || (mins && parse_i64(mins, &min)) ||
        (steps && (parse_i64(steps, &step) || step < 1)))
      return toplu__errorf(err, TOPLU_ERR_INVALID_ARGUMENT,
                          "SLURM_ARRAY_TASK_ID=%s: need SLURM_ARRAY_TASK_COUNT (and numeric SLURM_ARRAY_TASK_MIN/STEP)",
                          slurm);
    int64_t k = (id - min) / step;
    if (k < 0 || k >= n || (id - min) % step)
      return toplu__errorf(err, TOPLU_ERR_INVALID_ARGUMENT,
                          "SLURM_ARRAY_TASK_ID=%lld does not fit an array of %lld tasks from %lld step %lld",
                          (long long)id, (long long)n, (long long)min, (long long)step);
    out->index = k;
    out->count = n;
    snprintf(out->from, sizeof out->from, "SLURM_ARRAY_TASK_ID");
    return TOPLU_OK;
  }
  out->index = 0;
  out->count = 1;
  snprintf(out->from, sizeof out->from, "none");
  return TOPLU_OK;
}

/* floor(a * b / c) for a >= 0 and 0 <= b <= c < 2^31, without overflow. */
static int64_t mul_div(int64_t a, int64_t b, int64_t c) {
  return a / c * b + a % c * b / c;
}

void pl_shard_range(const pl_shard_t *s, int64_t total, int64_t *first, int64_t *end) {
  *first = mul_div(total, s->index, s->count);
  *end = mul_div(total, s->index + 1, s->count);
}
