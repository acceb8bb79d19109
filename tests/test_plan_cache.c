/*
 * tests/test_plan_cache.c - the session's plan cache under a stream of
 * varied shapes: a bound on bytes (max_plan_bytes) and on count (max_plans).
 *
 *   test_plan_cache [stream|unbounded|threads]
 *
 * The model is written here (a small protobuf encoder, as test_loader.c's):
 * one attention block with a dynamic sequence dim S and batch dim N,
 *   x [N, S, 64] -> q, k, v = x Wq, x Wk, x Wv; p = Softmax(q k^T / 8);
 *   y = p v + x                                               y [N, S, 64]
 * whose arena grows with S^2 (the scores: N x S x S floats, 2 MiB at N 2,
 * S 512).
 *
 * stream: 1,000 runs at N 2 with random S in 1..512 on a session with
 *    max_plans 64 and max_plan_bytes 8 MiB.  After every run the cache holds
 *    at most 64 plans and 8 MiB (toplu_session_plan_cache, its peak too),
 *    and the process's resident set (/proc/self/statm) stays under
 *        baseline + max_plan_bytes + largest plan + slack
 *    where baseline is the RSS after a warm-up run at S 512 and
 *    toplu_session_clear_plans (the model, the oneDNN and OpenMP runtimes,
 *    the packed weights), the largest plan is toplu_memory_report_t.plan_bytes
 *    at S 512 (the plan a call builds before the cache drops an older one
 *    for it: one plan beyond the bound at most), and slack (SLACK_MIB)
 *    covers what plan_bytes leaves out: bookkeeping and oneDNN primitives of
 *    the cached plans, oneDNN's own primitive cache (set to 64 entries here),
 *    malloc's fragmentation.  Outputs at S 1, 2, 17, 128, 333 and 512, met
 *    in the stream, equal a double-precision reference within 1e-4.  Then a
 *    plan larger than max_plan_bytes (S 512 under a 1 MiB bound) runs,
 *    correct, uncached (stats.uncached, n_plans 0; toplu_session_steps
 *    refuses it), and a small one after it is cached.
 * unbounded: the same stream with max_plan_bytes 0 (64 plans of about
 *    1.3 MiB on average), held to the same bounds, must go over them: the
 *    control that shows the checks can fail (CTest plan_cache_unbounded
 *    checks that it says so).  Under AddressSanitizer RSS is not checked
 *    (its quarantine keeps freed memory).
 * threads: four threads on one session with max_plan_bytes 256 KiB run
 *    random S in 1..96, 150 runs each, every output checked against the
 *    reference: plans other threads are using are never freed under them
 *    (ASan would see it), and at rest the cache holds at most the bound.
 */
#include <math.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "toplu/toplu.h"

#if defined(__SANITIZE_ADDRESS__)
#define UNDER_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define UNDER_ASAN 1
#endif
#endif
#ifndef UNDER_ASAN
#define UNDER_ASAN 0
#endif

#define D 64
#define NB 2
#define SMAX 512
#define RUNS 1000
#define MIB ((size_t)1 << 20)
#define MAX_PLANS 64
#define MAX_PLAN_BYTES (8 * MIB)
#define SLACK_MIB 16
#define ONEDNN_CACHE "64"

static atomic_int failures; /* read by the threads' loops while others add to it */
static pthread_mutex_t fail_lock = PTHREAD_MUTEX_INITIALIZER;

static void failf(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void failf(const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  pthread_mutex_lock(&fail_lock);
  printf("FAIL ");
  vprintf(fmt, ap);
  printf("\n");
  fflush(stdout);
  failures++;
  pthread_mutex_unlock(&fail_lock);
  va_end(ap);
}

/* ---- a minimal protobuf writer (field numbers from onnx.proto) ---- */

typedef struct pb {
  unsigned char *d;
  size_t n, cap;
} pb_t;

static void pb_raw(pb_t *b, const void *p, size_t n) {
  if (b->n + n > b->cap) {
    size_t cap = b->cap ? b->cap : 256;
    while (cap < b->n + n) cap *= 2;
    unsigned char *d = realloc(b->d, cap);
    if (!d) {
      printf("FAIL out of memory writing the model\n");
      exit(1);
    }
    b->d = d;
    b->cap = cap;
  }
  if (n) memcpy(b->d + b->n, p, n);
  b->n += n;
}

static void pb_varint(pb_t *b, uint64_t v) {
  unsigned char tmp[10];
  size_t k = 0;
  do {
    tmp[k] = (unsigned char)(v & 0x7f);
    v >>= 7;
    if (v) tmp[k] |= 0x80;
    k++;
  } while (v);
  pb_raw(b, tmp, k);
}

static void pb_key(pb_t *b, int field, int wire) { pb_varint(b, ((uint64_t)field << 3) | (uint64_t)wire); }

static void pb_int(pb_t *b, int field, int64_t v) {
  pb_key(b, field, 0);
  pb_varint(b, (uint64_t)v);
}

static void pb_bytes(pb_t *b, int field, const void *p, size_t n) {
  pb_key(b, field, 2);
  pb_varint(b, n);
  pb_raw(b, p, n);
}

static void pb_str(pb_t *b, int field, const char *s) { pb_bytes(b, field, s, strlen(s)); }

static void pb_msg(pb_t *b, int field, pb_t *sub) {
  pb_bytes(b, field, sub->d, sub->n);
  free(sub->d);
  memset(sub, 0, sizeof *sub);
}

/* ValueInfoProto: float tensor [N, S, D] with dim_params "N" and "S". */
static pb_t value_nsd(const char *name) {
  pb_t shape = {0}, tensor = {0}, type = {0}, vi = {0}, dim;
  memset(&dim, 0, sizeof dim);
  pb_str(&dim, 2, "N");
  pb_msg(&shape, 1, &dim);
  pb_str(&dim, 2, "S");
  pb_msg(&shape, 1, &dim);
  pb_int(&dim, 1, D);
  pb_msg(&shape, 1, &dim);
  pb_int(&tensor, 1, 1); /* FLOAT */
  pb_msg(&tensor, 2, &shape);
  pb_msg(&type, 1, &tensor);
  pb_str(&vi, 1, name);
  pb_msg(&vi, 2, &type);
  return vi;
}

/* TensorProto (float, raw_data). */
static pb_t init_float(const char *name, int ndim, const int64_t *dims, const float *data, size_t n) {
  pb_t t = {0};
  for (int i = 0; i < ndim; i++) pb_int(&t, 1, dims[i]);
  pb_int(&t, 2, 1);
  pb_str(&t, 8, name);
  pb_bytes(&t, 9, data, n * sizeof(float)); /* little-endian host */
  return t;
}

/* NodeProto with two inputs (in1 may be NULL) and an optional attribute. */
static pb_t node(const char *op, const char *in0, const char *in1, const char *out, pb_t *attr) {
  pb_t nd = {0};
  pb_str(&nd, 1, in0);
  if (in1) pb_str(&nd, 1, in1);
  pb_str(&nd, 2, out);
  pb_str(&nd, 3, out);
  pb_str(&nd, 4, op);
  if (attr) pb_msg(&nd, 5, attr);
  return nd;
}

static float wq[D * D], wk[D * D], wv[D * D];
static const float scale = 0.125f;

/* The attention block's ModelProto (opset 13). */
static pb_t attention_model(void) {
  uint64_t r = 12345;
  float *w[3] = {wq, wk, wv};
  for (int m = 0; m < 3; m++)
    for (int i = 0; i < D * D; i++) {
      r = r * 6364136223846793005ull + 1442695040888963407ull;
      w[m][i] = ((float)(r >> 40) / (float)(1 << 24) - 0.5f) * 0.4f;
    }
  pb_t perm = {0}, axis = {0};
  pb_str(&perm, 1, "perm");
  pb_int(&perm, 8, 0);
  pb_int(&perm, 8, 2);
  pb_int(&perm, 8, 1);
  pb_int(&perm, 20, 7); /* INTS */
  pb_str(&axis, 1, "axis");
  pb_int(&axis, 3, -1);
  pb_int(&axis, 20, 2); /* INT */
  pb_t nodes[9] = {
      node("MatMul", "x", "Wq", "q", NULL),      node("MatMul", "x", "Wk", "k", NULL),
      node("MatMul", "x", "Wv", "v", NULL),      node("Transpose", "k", NULL, "kt", &perm),
      node("MatMul", "q", "kt", "s", NULL),      node("Mul", "s", "scale", "s2", NULL),
      node("Softmax", "s2", NULL, "p", &axis),   node("MatMul", "p", "v", "o", NULL),
      node("Add", "o", "x", "y", NULL),
  };
  int64_t dd[2] = {D, D};
  pb_t inits[4] = {init_float("Wq", 2, dd, wq, D * D), init_float("Wk", 2, dd, wk, D * D),
                   init_float("Wv", 2, dd, wv, D * D), init_float("scale", 0, NULL, &scale, 1)};
  pb_t g = {0}, in = value_nsd("x"), out = value_nsd("y");
  for (int i = 0; i < 9; i++) pb_msg(&g, 1, &nodes[i]);
  pb_str(&g, 2, "attention");
  for (int i = 0; i < 4; i++) pb_msg(&g, 5, &inits[i]);
  pb_msg(&g, 11, &in);
  pb_msg(&g, 12, &out);
  pb_t m = {0}, opset = {0};
  pb_int(&m, 1, 8);
  pb_str(&m, 2, "toplu-test-plan-cache");
  pb_str(&opset, 1, "");
  pb_int(&opset, 2, 13);
  pb_msg(&m, 8, &opset);
  pb_msg(&m, 7, &g);
  return m;
}

/* ---- the reference, in double ---- */

/* x [n, s, D] -> y, as the model computes it. */
static void reference(const float *x, int n, int s, float *y) {
  double *q = malloc((size_t)s * D * sizeof *q), *k = malloc((size_t)s * D * sizeof *k);
  double *v = malloc((size_t)s * D * sizeof *v), *p = malloc((size_t)s * sizeof *p);
  if (!q || !k || !v || !p) {
    printf("FAIL out of memory in the reference\n");
    exit(1);
  }
  for (int b = 0; b < n; b++) {
    const float *xb = x + (size_t)b * s * D;
    for (int i = 0; i < s; i++)
      for (int j = 0; j < D; j++) {
        double aq = 0, ak = 0, av = 0;
        for (int c = 0; c < D; c++) {
          double xv = xb[(size_t)i * D + c];
          aq += xv * wq[c * D + j];
          ak += xv * wk[c * D + j];
          av += xv * wv[c * D + j];
        }
        q[(size_t)i * D + j] = aq, k[(size_t)i * D + j] = ak, v[(size_t)i * D + j] = av;
      }
    for (int i = 0; i < s; i++) {
      double mx = -INFINITY, sum = 0;
      for (int t = 0; t < s; t++) {
        double a = 0;
        for (int c = 0; c < D; c++) a += q[(size_t)i * D + c] * k[(size_t)t * D + c];
        p[t] = a * scale;
        if (p[t] > mx) mx = p[t];
      }
      for (int t = 0; t < s; t++) sum += (p[t] = exp(p[t] - mx));
      for (int j = 0; j < D; j++) {
        double a = 0;
        for (int t = 0; t < s; t++) a += p[t] / sum * v[(size_t)t * D + j];
        y[((size_t)b * s + i) * D + j] = (float)(a + xb[(size_t)i * D + j]);
      }
    }
  }
  free(q), free(k), free(v), free(p);
}

/* Max abs difference beyond 1e-4 + 1e-4 |ref|, or 0. */
static double check_output(const float *x, int n, int s, const float *y) {
  float *want = malloc((size_t)n * s * D * sizeof *want);
  if (!want) return INFINITY;
  reference(x, n, s, want);
  double worst = 0;
  for (size_t i = 0; i < (size_t)n * s * D; i++) {
    double d = fabs((double)y[i] - (double)want[i]);
    if (!(d <= 1e-4 + 1e-4 * fabs((double)want[i])) && !(d <= worst)) worst = isnan(d) ? INFINITY : d;
  }
  free(want);
  return worst;
}

/* ---- helpers ---- */

static size_t rss_bytes(void) {
  FILE *f = fopen("/proc/self/statm", "r");
  long size = 0, resident = 0;
  if (!f) return 0;
  if (fscanf(f, "%ld %ld", &size, &resident) != 2) resident = 0;
  fclose(f);
  return (size_t)resident * (size_t)sysconf(_SC_PAGESIZE);
}

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static void fill(float *x, size_t n, uint64_t seed) {
  for (size_t i = 0; i < n; i++) {
    seed = seed * 6364136223846793005ull + 1442695040888963407ull;
    x[i] = (float)(seed >> 40) / (float)(1 << 23) - 1.0f;
  }
}

static toplu_status_t run_at(toplu_session_t *s, float *x, int n, int len, float *y) {
  toplu_tensor_t in = {.dtype = TOPLU_DTYPE_FLOAT, .ndim = 3, .dims = {n, len, D}, .data = x};
  toplu_tensor_t out = {.data = y};
  return toplu_session_run(s, &in, 1, &out, 1);
}

static toplu_session_t *session(const toplu_model_t *m, int max_plans, size_t max_plan_bytes, int threads) {
  toplu_session_options_t so;
  toplu_session_options_init(&so);
  so.threads = threads;
  so.max_plans = max_plans;
  so.max_plan_bytes = max_plan_bytes;
  toplu_session_t *s = NULL;
  toplu_error_t err;
  if (toplu_session_create(m, &so, &s, &err)) {
    printf("FAIL toplu_session_create: %s\n", err.message);
    exit(1);
  }
  return s;
}

/* ---- 1. the stream ---- */

static void stream(const toplu_model_t *m, int unbounded) {
  size_t max_bytes = unbounded ? 0 : MAX_PLAN_BYTES;
  toplu_session_t *s = session(m, MAX_PLANS, max_bytes, 2);
  float *x = malloc((size_t)NB * SMAX * D * sizeof *x), *y = malloc((size_t)NB * SMAX * D * sizeof *y);
  if (!x || !y) {
    printf("FAIL out of memory\n");
    exit(1);
  }
  /* Warm-up: the largest shape once, its plan's bytes, then an empty cache. */
  fill(x, (size_t)NB * SMAX * D, 1);
  if (run_at(s, x, NB, SMAX, y)) failf("warm-up run at S %d: %s", SMAX, toplu_session_last_error(s));
  toplu_tensor_t in = {.dtype = TOPLU_DTYPE_FLOAT, .ndim = 3, .dims = {NB, SMAX, D}};
  toplu_memory_report_t mr;
  if (toplu_session_memory(s, &in, 1, &mr)) failf("toplu_session_memory: %s", toplu_session_last_error(s));
  size_t largest = mr.plan_bytes;
  toplu_session_clear_plans(s);
  size_t baseline = rss_bytes();
  size_t bound = baseline + MAX_PLAN_BYTES + largest + (size_t)SLACK_MIB * MIB;
  printf("stream: %d runs, N %d, S 1..%d, max_plans %d, max_plan_bytes %zu%s\n", RUNS, NB, SMAX, MAX_PLANS,
         max_bytes, unbounded ? " (unbounded: the control)" : "");
  printf("  largest plan (S %d): %zu bytes (arena %zu + workspace %zu, kernel state %zu)\n", SMAX, largest,
         mr.activation_bytes, mr.workspace_bytes, mr.kernel_bytes);
  printf("  RSS bound: baseline %.1f MiB + max_plan_bytes %.1f MiB + largest plan %.1f MiB + slack %d MiB = %.1f MiB\n",
         (double)baseline / MIB, (double)MAX_PLAN_BYTES / MIB, (double)largest / MIB, SLACK_MIB,
         (double)bound / MIB);

  static const int checked[] = {1, 2, 17, 128, 333, 512};
  int n_checked = 0;
  size_t rss_max = 0, cache_max = 0;
  int plans_max = 0, first_over = -1, over_n = 0, over_bytes = 0;
  uint64_t seed = 42;
  double t0 = now_s();
  for (int i = 0; i < RUNS; i++) {
    seed = seed * 6364136223846793005ull + 1442695040888963407ull;
    int len = 1 + (int)((seed >> 33) % SMAX);
    int check = i % 160 == 80 && n_checked < 6;
    if (check) len = checked[n_checked++];
    if (check) fill(x, (size_t)NB * len * D, (uint64_t)len);
    if (run_at(s, x, NB, len, y)) {
      failf("run %d at S %d: %s", i, len, toplu_session_last_error(s));
      break;
    }
    if (check) {
      double bad = check_output(x, NB, len, y);
      if (bad) failf("run %d at S %d: output differs from the reference by %g", i, len, bad);
    }
    toplu_plan_cache_stats_t cs;
    toplu_session_plan_cache(s, &cs);
    if (cs.n_plans > plans_max) plans_max = cs.n_plans;
    if (cs.bytes > cache_max) cache_max = cs.bytes;
    if (cs.n_plans > MAX_PLANS && !over_n++) failf("run %d: %d plans cached, max_plans %d", i, cs.n_plans, MAX_PLANS);
    /* the control is held to the bounded run's bound too, so it shows this check can fail */
    if ((cs.bytes > MAX_PLAN_BYTES || cs.peak_bytes > MAX_PLAN_BYTES) && !over_bytes++)
      failf("run %d: the cache holds %zu bytes (peak %zu), over %zu", i, cs.bytes, cs.peak_bytes,
            (size_t)MAX_PLAN_BYTES);
    size_t rss = rss_bytes();
    if (rss > rss_max) rss_max = rss;
    if (rss > bound && first_over < 0) first_over = i;
  }
  double dt = now_s() - t0;
  if (n_checked != 6) failf("only %d of 6 lengths checked against the reference", n_checked);
  toplu_plan_cache_stats_t cs;
  toplu_session_plan_cache(s, &cs);
  printf("  %.2f s; plans cached at most %d, cache bytes at most %.1f MiB (peak %.1f MiB); hits %lld, misses %lld, "
         "evictions %lld, uncached %lld\n",
         dt, plans_max, (double)cache_max / MIB, (double)cs.peak_bytes / MIB, (long long)cs.hits,
         (long long)cs.misses, (long long)cs.evictions, (long long)cs.uncached);
  printf("  RSS at most %.1f MiB (%.1f MiB over the baseline), bound %.1f MiB\n", (double)rss_max / MIB,
         (double)(rss_max - baseline) / MIB, (double)bound / MIB);
  if (UNDER_ASAN) /* its quarantine holds freed memory back: RSS says nothing about the cache */
    printf("  RSS not checked under AddressSanitizer\n");
  else if (rss_max > bound)
    failf("RSS %.1f MiB is over the bound %.1f MiB (first at run %d)", (double)rss_max / MIB, (double)bound / MIB,
          first_over);
  if (cs.hits + cs.misses < RUNS) failf("%lld lookups for %d runs", (long long)(cs.hits + cs.misses), RUNS);
  if (!unbounded && cs.evictions == 0) failf("no plan was evicted: the stream did not test the bound");
  toplu_session_destroy(s);
  free(x);
  free(y);
}

/* ---- 2. a plan larger than the bound ---- */

static void too_large(const toplu_model_t *m) {
  toplu_session_t *s = session(m, 8, MIB, 1);
  int len = SMAX, n = NB;
  float *x = malloc((size_t)n * len * D * sizeof *x), *y = malloc((size_t)n * len * D * sizeof *y);
  if (!x || !y) exit(1);
  fill(x, (size_t)n * len * D, 7);
  for (int rep = 0; rep < 2; rep++) {
    if (run_at(s, x, n, len, y)) failf("too large: run at S %d: %s", len, toplu_session_last_error(s));
    double bad = check_output(x, n, len, y);
    if (bad) failf("too large: S %d differs from the reference by %g", len, bad);
  }
  toplu_plan_cache_stats_t cs;
  toplu_session_plan_cache(s, &cs);
  if (cs.n_plans != 0 || cs.uncached != 2 || cs.bytes != 0)
    failf("too large: after two runs over the bound: %d plans, %zu bytes, %lld uncached (want 0, 0, 2)", cs.n_plans,
          cs.bytes, (long long)cs.uncached);
  toplu_tensor_t in = {.dtype = TOPLU_DTYPE_FLOAT, .ndim = 3, .dims = {n, len, D}};
  toplu_memory_report_t mr;
  if (toplu_session_memory(s, &in, 1, &mr) || mr.cached || mr.plan_bytes <= MIB)
    failf("too large: toplu_session_memory: cached %d, plan_bytes %zu", mr.cached, mr.plan_bytes);
  toplu_step_info_t steps[64];
  if (toplu_session_steps(s, &in, 1, steps, 64) != -(int)TOPLU_ERR_OUT_OF_MEMORY)
    failf("too large: toplu_session_steps on a plan that is not cached is not TOPLU_ERR_OUT_OF_MEMORY");
  if (run_at(s, x, n, 8, y)) failf("too large: run at S 8: %s", toplu_session_last_error(s));
  double bad = check_output(x, n, 8, y);
  if (bad) failf("too large: S 8 after it differs from the reference by %g", bad);
  toplu_session_plan_cache(s, &cs);
  if (cs.n_plans != 1 || cs.bytes == 0 || cs.bytes > MIB)
    failf("too large: a small plan after it: %d plans, %zu bytes (want 1, <= 1 MiB)", cs.n_plans, cs.bytes);
  printf("too large: S %d (%zu bytes) ran uncached under a 1 MiB bound; S 8 cached (%zu bytes)\n", len,
         mr.plan_bytes, cs.bytes);
  toplu_session_destroy(s);
  free(x);
  free(y);
}

/* ---- 3. threads ---- */

#define THREADS 4
#define THREAD_RUNS 150
#define THREAD_SMAX 96
#define THREAD_BOUND (256 * (size_t)1024)

static toplu_session_t *shared;

static void *worker(void *arg) {
  uint64_t seed = (uint64_t)(uintptr_t)arg * 7919 + 1;
  int n = 2;
  float *x = malloc((size_t)n * THREAD_SMAX * D * sizeof *x), *y = malloc((size_t)n * THREAD_SMAX * D * sizeof *y);
  if (!x || !y) exit(1);
  for (int i = 0; i < THREAD_RUNS && !failures; i++) {
    seed = seed * 6364136223846793005ull + 1442695040888963407ull;
    int len = 1 + (int)((seed >> 33) % THREAD_SMAX);
    fill(x, (size_t)n * len * D, seed);
    if (run_at(shared, x, n, len, y)) {
      failf("thread run at S %d: %s", len, toplu_session_last_error(shared));
      break;
    }
    double bad = check_output(x, n, len, y);
    if (bad) failf("thread run at S %d differs from the reference by %g", len, bad);
  }
  free(x);
  free(y);
  return NULL;
}

static void threads(const toplu_model_t *m) {
  shared = session(m, 16, THREAD_BOUND, 1);
  pthread_t t[THREADS];
  for (int i = 0; i < THREADS; i++) pthread_create(&t[i], NULL, worker, (void *)(uintptr_t)i);
  for (int i = 0; i < THREADS; i++) pthread_join(t[i], NULL);
  toplu_plan_cache_stats_t cs;
  toplu_session_plan_cache(shared, &cs);
  if (cs.bytes > THREAD_BOUND || cs.n_plans > 16 || cs.n_in_use)
    failf("threads: at rest the cache holds %d plans, %zu bytes, %d in use (bounds 16, %zu)", cs.n_plans, cs.bytes,
          cs.n_in_use, THREAD_BOUND);
  printf("threads: %d x %d runs, S 1..%d, max_plan_bytes %zu: %lld hits, %lld misses, %lld evictions, %lld "
         "uncached; at rest %d plans, %zu bytes\n",
         THREADS, THREAD_RUNS, THREAD_SMAX, THREAD_BOUND, (long long)cs.hits, (long long)cs.misses,
         (long long)cs.evictions, (long long)cs.uncached, cs.n_plans, cs.bytes);
  if (!cs.evictions) failf("threads: no eviction: the bound was not exercised");
  toplu_session_destroy(shared);
}

int main(int argc, char **argv) {
  const char *mode = argc > 1 ? argv[1] : "stream";
  int unbounded = !strcmp(mode, "unbounded");
  if (strcmp(mode, "stream") && strcmp(mode, "unbounded") && strcmp(mode, "threads")) {
    printf("usage: test_plan_cache [stream|unbounded|threads]\n");
    return 2;
  }
  /* oneDNN keeps the primitives of plans toplu has dropped in a cache of
   * its own, process-wide, of ONEDNN_PRIMITIVE_CACHE_CAPACITY primitives
   * (default 1024; read at its first use): about 50 MiB more for this
   * stream at the default (docs/design.md, "Plan cache").  The stream
   * bounds it to 64, which SLACK_MIB covers.  The threads mode keeps the
   * default (see the report of tests/plan_cache.cmake). */
  if (strcmp(mode, "threads")) setenv("ONEDNN_PRIMITIVE_CACHE_CAPACITY", ONEDNN_CACHE, 1);
  pb_t mp = attention_model();
  toplu_model_t *m = NULL;
  toplu_error_t err;
  if (toplu_model_load_buffer(mp.d, mp.n, "attention.onnx", NULL, &m, &err)) {
    printf("FAIL the attention model does not load: %s\n", err.message);
    return 1;
  }
  free(mp.d);
  if (!strcmp(mode, "threads")) {
    threads(m);
  } else {
    stream(m, unbounded);
    if (!unbounded) too_large(m);
  }
  toplu_model_destroy(m);
  if (failures) {
    printf("%d failure%s\n", failures, failures == 1 ? "" : "s");
    return 1;
  }
  printf("OK\n");
  return 0;
}
