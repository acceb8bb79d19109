/*
 * bench/toplu_bench.c - time toplu_session_run on one model at one batch size.
 *
 *   toplu_bench MODEL [--batch B] [--threads T] [--warmup W] [--runs R]
 *               [--seconds S] [--shape NAME=D0xD1x...] [--seed N] [--profile FILE.json]
 *               [--gap-us U] [--fixed-threads] [--qdq-int8-all] [--batch-dim K]
 *               [--no-fuse-attention] [--no-fuse-qdq-residual] [--no-fuse-depthwise] [--no-fuse-qdq-lookup]
 *               [--no-fuse-projection]
 *               [--int-max N]
 *
 * Loads the model, makes a session with T threads (0: all cores), fills every
 * input with random data (float in [0,1), integers in 0..N-1, --int-max N,
 * default 256: token ids below a vocabulary of N) at batch B
 * (dim 0, or dim K with --batch-dim K for sequence-first models such as an
 * LSTM's [S, N, I]; other symbolic dims from --shape, whose batch dim is
 * ignored), runs W
 * warm-up inferences, then times runs until R runs and S seconds have both
 * passed (--gap-us: sleeping U microseconds before each timed run, so the
 * engine sees the idle gaps a server at concurrency 1 sees between
 * requests; the sleep is not timed).  Models whose file fixes the batch dim to 1 (MNIST) run with
 * batch_override, i.e. through toplu's batch path.  Prints one JSON line:
 *   {"side":"toplu","model":...,"batch":B,"threads":T,"runs":R,
 *    "median_ms":...,"best_ms":...,"ips_median":...,"ips_best":...,"p10_ms":...,"p90_ms":...,
 *    "wall_s":...,"ips_wall":...}
 * where ips = inferences (rows) per second: ips_median from the median run's time, ips_wall the timed
 * runs' rows over the timed loop's wall clock (on shared cores a run shorter than a scheduler slice can
 * keep its median time while the process gets half the slices: there only ips_wall is throughput).  The session chooses each plan's
 * threads by measurement on the third warm-up run, at once whatever a run
 * takes (toplu_session_options_t.choose_threads' default, with
 * choose_threads_long_ms -1: one thread, or the batch split into slices run
 * at once; "plan_threads" and "plan_split" say which); --fixed-threads runs
 * every plan on T threads over the whole batch (choose_threads -1), as
 * before 2026-12-03.  --profile: the session times
 * every step (two clock reads a step, in the timed runs too) and the Chrome
 * trace of the last run is written to FILE.json (toplu_session_write_trace,
 * toplu/profile.h); the JSON line then adds "profile" and "peak_gflops".
 * --qdq-int8-all: load with toplu_model_options_t.qdq_int8_all (every QDQ
 * Conv in int8).  --no-fuse-attention: load with
 * toplu_model_options_t.no_fuse_attention (attention as separate steps, for
 * timing the fused kernel against them).  --no-fuse-qdq-residual: load
 * with toplu_model_options_t.no_fuse_qdq_residual (a QDQ model's residual
 * Adds as separate steps).  --no-fuse-depthwise: load with
 * toplu_model_options_t.no_fuse_depthwise (a 1x1 and the depthwise
 * convolution after it as two steps).  --no-fuse-qdq-lookup: load with
 * toplu_model_options_t.no_fuse_qdq_lookup (a QDQ model's functions between
 * quantizations as float steps).  --no-fuse-projection: load with
 * toplu_model_options_t.no_fuse_projection (an inverted residual block's
 * projection as its own step).  Exit 0, 1 on failure, 2 on usage.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "toplu/toplu.h"

#define MAX_IO 16
#define MAX_SHAPES 8

typedef struct bench_shape {
  const char *name;
  int ndim;
  int64_t dims[TOPLU_MAX_DIMS];
} bench_shape_t;

/* Seconds on a monotonic clock. */
static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* xorshift64* step: a reproducible pseudo-random stream. */
static uint64_t rng_next(uint64_t *s) {
  *s ^= *s >> 12;
  *s ^= *s << 25;
  *s ^= *s >> 27;
  return *s * 2685821657736338717ULL;
}

/* Fill a tensor with random data of its dtype. */
static void fill_random(toplu_tensor_t *t, uint64_t *seed, int64_t int_max) {
  int64_t n = toplu_tensor_numel(t);
  switch (t->dtype) {
  case TOPLU_DTYPE_FLOAT: {
    float *p = t->data;
    for (int64_t i = 0; i < n; i++) p[i] = (float)(rng_next(seed) >> 40) / (float)(1 << 24);
    break;
  }
  case TOPLU_DTYPE_UINT8:
  case TOPLU_DTYPE_INT8: {
    uint8_t *p = t->data;
    for (int64_t i = 0; i < n; i++) p[i] = (uint8_t)(rng_next(seed) >> 56);
    break;
  }
  case TOPLU_DTYPE_INT64: {
    int64_t *p = t->data;
    for (int64_t i = 0; i < n; i++) p[i] = (int64_t)((rng_next(seed) >> 16) % (uint64_t)int_max);
    break;
  }
  case TOPLU_DTYPE_INT32: {
    int32_t *p = t->data;
    for (int64_t i = 0; i < n; i++) p[i] = (int32_t)((rng_next(seed) >> 16) % (uint64_t)int_max);
    break;
  }
  default:
    break; /* zeros from toplu_tensor_alloc */
  }
}

/* Parse "NAME=D0xD1x..." (',' also separates dims). 0 on success. */
static int parse_shape(char *arg, bench_shape_t *s) {
  char *eq = strrchr(arg, '=');
  if (!eq) return -1;
  *eq = '\0';
  s->name = arg;
  s->ndim = 0;
  char *p = eq + 1;
  while (*p) {
    if (s->ndim >= TOPLU_MAX_DIMS) return -1;
    char *end = NULL;
    long long v = strtoll(p, &end, 10);
    if (end == p || v < 0) return -1;
    s->dims[s->ndim++] = v;
    p = end;
    if (*p == 'x' || *p == ',') p++;
    else if (*p) return -1;
  }
  return 0;
}

/* qsort comparator for doubles. */
static int cmp_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

/* Print usage on stderr and return 2. */
static int usage(void) {
  fprintf(stderr, "usage: toplu_bench MODEL [--batch B] [--threads T] [--warmup W] [--runs R]\n"
                  "                   [--seconds S] [--shape NAME=D0xD1x...] [--seed N] [--profile FILE.json]\n"
                  "                   [--gap-us U] [--fixed-threads] [--qdq-int8-all] [--batch-dim K]\n"
                  "                   [--no-fuse-attention] [--no-fuse-qdq-residual] [--no-fuse-depthwise]\n"
                  "                   [--no-fuse-qdq-lookup] [--no-fuse-projection]\n"
                  "                   [--int-max N]\n");
  return 2;
}

/* JSON string body: the model path with quotes and backslashes escaped. */
static void print_json_string(const char *s) {
  putchar('"');
  for (; *s; s++) {
    if (*s == '"' || *s == '\\') putchar('\\');
    putchar(*s);
  }
  putchar('"');
}

/* Notes from the library (choose_threads' choice, fallbacks) to stderr. */
static void on_note(void *user, toplu_log_level_t level, const char *msg) {
  (void)user;
  if (level <= TOPLU_LOG_NOTE) fprintf(stderr, "toplu_bench: %s\n", msg);
}

int main(int argc, char **argv) {
  const char *path = NULL, *profile = NULL;
  long batch = 1, threads = 0, warmup = 3, runs = 10, seed_arg = 1;
  double seconds = 2.0;
  long gap_us = 0; /* idle time between timed runs, as a server at concurrency 1 sees */
  long batch_dim = 0; /* the inputs' dim that --batch sets */
  long long int_max = 256; /* integer inputs drawn from 0..int_max-1 */
  int choose = 0;  /* toplu_session_options_t.choose_threads: --fixed-threads -1, --choose-threads 1 */
  toplu_model_options_t mopts;
  memset(&mopts, 0, sizeof mopts);
  bench_shape_t shapes[MAX_SHAPES];
  int n_shapes = 0;
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i];
    const char *v = i + 1 < argc ? argv[i + 1] : NULL;
    if (!strcmp(a, "--choose-threads")) {
      choose = 1;
      continue;
    }
    if (!strcmp(a, "--fixed-threads")) {
      choose = -1;
      continue;
    }
    if (!strcmp(a, "--qdq-int8-all")) {
      mopts.qdq_int8_all = 1;
      continue;
    }
    if (!strcmp(a, "--no-fuse-attention")) {
      mopts.no_fuse_attention = 1;
      continue;
    }
    if (!strcmp(a, "--no-fuse-qdq-residual")) {
      mopts.no_fuse_qdq_residual = 1;
      continue;
    }
    if (!strcmp(a, "--no-fuse-depthwise")) {
      mopts.no_fuse_depthwise = 1;
      continue;
    }
    if (!strcmp(a, "--no-fuse-qdq-lookup")) {
      mopts.no_fuse_qdq_lookup = 1;
      continue;
    }
    if (!strcmp(a, "--no-fuse-projection")) {
      mopts.no_fuse_projection = 1;
      continue;
    }
    if (a[0] != '-') {
      if (path) return usage();
      path = a;
      continue;
    }
    if (!v) return usage();
    if (!strcmp(a, "--batch")) batch = strtol(v, NULL, 10);
    else if (!strcmp(a, "--threads")) threads = strtol(v, NULL, 10);
    else if (!strcmp(a, "--warmup")) warmup = strtol(v, NULL, 10);
    else if (!strcmp(a, "--runs")) runs = strtol(v, NULL, 10);
    else if (!strcmp(a, "--seconds")) seconds = strtod(v, NULL);
    else if (!strcmp(a, "--gap-us")) gap_us = strtol(v, NULL, 10);
    else if (!strcmp(a, "--seed")) seed_arg = strtol(v, NULL, 10);
    else if (!strcmp(a, "--batch-dim")) batch_dim = strtol(v, NULL, 10);
    else if (!strcmp(a, "--int-max")) int_max = strtoll(v, NULL, 10);
    else if (!strcmp(a, "--profile")) profile = v;
    else if (!strcmp(a, "--shape")) {
      if (n_shapes >= MAX_SHAPES || parse_shape(argv[i + 1], &shapes[n_shapes])) return usage();
      n_shapes++;
    } else return usage();
    i++;
  }
  if (!path || batch < 1 || threads < 0 || warmup < 0 || runs < 1 || gap_us < 0 || gap_us > 10000000 ||
      batch_dim < 0 || batch_dim >= TOPLU_MAX_DIMS || int_max < 1)
    return usage();

  toplu_error_t err;
  toplu_model_t *model = NULL;
  if (toplu_model_load(path, &mopts, &model, &err)) {
    fprintf(stderr, "toplu_bench: %s\n", err.message);
    return 1;
  }
  int n_in = toplu_model_input_count(model), n_out = toplu_model_output_count(model);
  if (n_in > MAX_IO || n_out > MAX_IO) {
    fprintf(stderr, "toplu_bench: %s: too many inputs or outputs\n", path);
    toplu_model_destroy(model);
    return 1;
  }
  toplu_session_options_t opts;
  toplu_session_options_init(&opts);
  opts.threads = (int)threads;
  opts.batch_override = toplu_model_fixed_batch(model);
  /* as the toplu command: TOPLU_NO_BLOCKED=Conv skips blocked alternatives (Winograd) for A/B runs */
  const char *nb = getenv("TOPLU_NO_BLOCKED");
  if (nb && *nb) opts.no_blocked = nb;
  opts.profile = profile != NULL;
  opts.choose_threads = choose;
  opts.choose_threads_long_ms = -1; /* timed at once in the warm-up runs: the timed runs all run the chosen plan */
  opts.log = on_note; /* choose_threads' choice and the library's other notes, on stderr */
  toplu_session_t *sess = NULL;
  if (toplu_session_create(model, &opts, &sess, &err)) {
    fprintf(stderr, "toplu_bench: %s\n", err.message);
    toplu_model_destroy(model);
    return 1;
  }

  toplu_tensor_t in[MAX_IO], out[MAX_IO];
  memset(in, 0, sizeof in);
  memset(out, 0, sizeof out);
  uint64_t seed = 0x9E3779B97F4A7C15ULL ^ (uint64_t)seed_arg;
  int rc = 1;
  for (int i = 0; i < n_in; i++) {
    const toplu_value_info_t *vi = toplu_model_input(model, i);
    int64_t dims[TOPLU_MAX_DIMS];
    int ndim = vi->ndim;
    for (int d = 0; d < ndim; d++) dims[d] = vi->dims[d];
    for (int s = 0; s < n_shapes; s++) {
      if (strcmp(shapes[s].name, vi->name)) continue;
      ndim = shapes[s].ndim;
      for (int d = 0; d < ndim; d++) dims[d] = shapes[s].dims[d];
    }
    if (ndim > batch_dim) dims[batch_dim] = batch;
    else if (ndim > 0) dims[0] = batch;
    for (int d = 0; d < ndim; d++) {
      if (dims[d] < 0) {
        fprintf(stderr, "toplu_bench: input %s has a symbolic dim %d: give --shape %s=...\n", vi->name, d,
                vi->name);
        goto done;
      }
    }
    if (ndim < 0 || toplu_tensor_alloc(&in[i], vi->dtype, ndim, dims)) {
      fprintf(stderr, "toplu_bench: cannot make input %s\n", vi->name);
      goto done;
    }
    fill_random(&in[i], &seed, int_max);
  }
  if (toplu_session_output_shapes(sess, in, n_in, out, n_out)) {
    fprintf(stderr, "toplu_bench: %s\n", toplu_session_last_error(sess));
    goto done;
  }
  for (int j = 0; j < n_out; j++) {
    toplu_tensor_t shape = out[j];
    if (toplu_tensor_alloc(&out[j], shape.dtype, shape.ndim, shape.dims)) {
      fprintf(stderr, "toplu_bench: cannot allocate output %d\n", j);
      goto done;
    }
  }

  for (long w = 0; w < warmup; w++) {
    if (toplu_session_run(sess, in, n_in, out, n_out)) {
      fprintf(stderr, "toplu_bench: %s\n", toplu_session_last_error(sess));
      goto done;
    }
  }
  size_t cap = (size_t)runs + 64, n = 0;
  double *times = malloc(cap * sizeof *times);
  if (!times) goto done;
  double start = now_s();
  while (n < (size_t)runs || now_s() - start < seconds) {
    if (gap_us) {
      struct timespec gap = {gap_us / 1000000, (gap_us % 1000000) * 1000};
      nanosleep(&gap, NULL);
    }
    double t0 = now_s();
    if (toplu_session_run(sess, in, n_in, out, n_out)) {
      fprintf(stderr, "toplu_bench: %s\n", toplu_session_last_error(sess));
      free(times);
      goto done;
    }
    double t = now_s() - t0;
    if (n == cap) {
      double *grown = realloc(times, 2 * cap * sizeof *times);
      if (!grown) break;
      times = grown;
      cap *= 2;
    }
    times[n++] = t;
  }
  double wall = now_s() - start; /* the timed loop's wall clock: what a shared core's waits cost shows here */
  qsort(times, n, sizeof *times, cmp_double);
  double median = n % 2 ? times[n / 2] : 0.5 * (times[n / 2 - 1] + times[n / 2]);
  double best = times[0];
  printf("{\"side\":\"toplu\",\"model\":");
  print_json_string(path);
  printf(",\"batch\":%ld,\"threads\":%d,\"plan_threads\":%d,\"plan_split\":%d,\"runs\":%zu,\"median_ms\":%.4f,\"best_ms\":%.4f,"
         "\"ips_median\":%.3f,\"ips_best\":%.3f",
         batch, toplu_session_threads(sess), toplu_session_plan_threads(sess, in, n_in),
         toplu_session_plan_split(sess, in, n_in), n, median * 1e3, best * 1e3, (double)batch / median,
         (double)batch / best);
  printf(",\"p10_ms\":%.4f,\"p90_ms\":%.4f,\"wall_s\":%.4f,\"ips_wall\":%.3f", times[n / 10] * 1e3,
         times[n - 1 - n / 10] * 1e3, wall, wall > 0 ? (double)batch * (double)n / wall : 0.0);
  if (profile) {
    toplu_profile_info_t pi = {.model = path, .batch = batch, .threads = toplu_session_threads(sess)};
    pi.peak_gflops = toplu_cpu_fp32_peak_gflops(pi.threads);
    if (toplu_session_write_trace(sess, in, n_in, &pi, profile, &err)) {
      printf("}\n");
      fprintf(stderr, "toplu_bench: %s\n", err.message);
      free(times);
      goto done;
    }
    fprintf(stderr, "toplu_bench: note: profiled, so the session kept the whole batch on its threads (no thread "
            "choice: a run without --profile may keep another plan, plan_split in its JSON line); FLOPs in the trace "
            "are a direct convolution's, so a Winograd step's peak_share can pass 1\n");
    printf(",\"profile\":");
    print_json_string(profile);
    printf(",\"peak_gflops\":%.1f", pi.peak_gflops);
  }
  printf("}\n");
  free(times);
  rc = 0;
done:
  for (int i = 0; i < n_in; i++) toplu_tensor_free(&in[i]);
  for (int j = 0; j < n_out; j++) toplu_tensor_free(&out[j]);
  toplu_session_destroy(sess);
  toplu_model_destroy(model);
  return rc;
}
