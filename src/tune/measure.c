/*
 * tune/measure.c - measuring one batch size (see tune/measure.h and the
 * method in toplu/tuner.h).
 */
#include "tune/measure.h"

#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#ifdef __GLIBC__
#include <malloc.h>
#endif

#include "core/error.h"
#include "core/log.h"
#include "plan/memory.h"
#include "plan/plan_report.h"
#include "toplu/planner.h"

#define WINDOW_SECONDS 0.3   /* shortest measuring window */
#define WARMUP_SECONDS 0.3   /* warm-up after the first run, at most WARMUP_RUNS runs */
#define WARMUP_RUNS 3
#define STABLE_TOL 0.10      /* three consecutive windows within 10% */

double toplu__tune_now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

double toplu__percentile(const double *x, int n, double p) {
  if (n <= 0) return 0;
  double r = p / 100.0 * (double)(n - 1);
  int i = (int)r;
  if (i >= n - 1) return x[n - 1];
  return x[i] + (x[i + 1] - x[i]) * (r - (double)i);
}

int toplu__windows_stable(const double *thr, const double *p99, int n, double tol) {
  if (n < 3) return 0;
  const double *series[2] = {thr + n - 3, p99 + n - 3};
  for (int s = 0; s < 2; s++) {
    double lo = series[s][0], hi = series[s][0];
    for (int k = 1; k < 3; k++) {
      if (series[s][k] < lo) lo = series[s][k];
      if (series[s][k] > hi) hi = series[s][k];
    }
    if (!(lo > 0) || hi / lo - 1 > tol) return 0;
  }
  return 1;
}

/* qsort order for doubles, ascending. */
static int cmp_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return x < y ? -1 : x > y;
}

/* VmRSS and VmHWM of this process, bytes (0 when unreadable). */
static void read_rss(uint64_t *rss, uint64_t *hwm) {
  *rss = *hwm = 0;
  FILE *f = fopen("/proc/self/status", "r");
  if (!f) return;
  char line[256];
  while (fgets(line, sizeof line, f)) {
    unsigned long long kb;
    if (sscanf(line, "VmRSS: %llu kB", &kb) == 1) *rss = kb * 1024;
    else if (sscanf(line, "VmHWM: %llu kB", &kb) == 1) *hwm = kb * 1024;
  }
  fclose(f);
}

/* Reset the peak RSS (VmHWM) to the current RSS; Linux >= 4.0, else a no-op. */
static void reset_hwm(void) {
  FILE *f = fopen("/proc/self/clear_refs", "w");
  if (!f) return;
  fputs("5", f);
  fclose(f);
}

/* Give freed heap back to the system so RSS returns to its baseline. */
static void trim_heap(void) {
#ifdef __GLIBC__
  malloc_trim(0);
#endif
}

/* Fill a batched or whole input buffer: rows of the data file repeated, or random values. */
static void fill_input(const toplu_tensor_t *src, toplu_tensor_t *t, int batched, uint64_t *seed) {
  size_t bytes = toplu_tensor_nbytes(t);
  if (src && src->data) {
    size_t have = toplu_tensor_nbytes(src);
    if (!batched || src->ndim < 1 || src->dims[0] < 1) {
      memcpy(t->data, src->data, have < bytes ? have : bytes);
      return;
    }
    size_t row = have / (size_t)src->dims[0];
    for (size_t off = 0; row && off < bytes; off += row) {
      size_t r = (off / row) % (size_t)src->dims[0];
      memcpy((char *)t->data + off, (const char *)src->data + r * row, off + row <= bytes ? row : bytes - off);
    }
    return;
  }
  int64_t n = toplu_tensor_numel(t);
  uint64_t x = *seed;
  switch (t->dtype) {
    case TOPLU_DTYPE_FLOAT:
      for (int64_t i = 0; i < n; i++) {
        x ^= x << 13, x ^= x >> 7, x ^= x << 17;
        ((float *)t->data)[i] = (float)(x >> 40) / 16777216.0f;
      }
      break;
    case TOPLU_DTYPE_DOUBLE:
      for (int64_t i = 0; i < n; i++) {
        x ^= x << 13, x ^= x >> 7, x ^= x << 17;
        ((double *)t->data)[i] = (double)(x >> 11) / 9007199254740992.0;
      }
      break;
    case TOPLU_DTYPE_FLOAT16:
    case TOPLU_DTYPE_BFLOAT16:
      for (int64_t i = 0; i < n; i++) {
        x ^= x << 13, x ^= x >> 7, x ^= x << 17;
        float v = (float)(x >> 40) / 16777216.0f;
        ((uint16_t *)t->data)[i] =
            t->dtype == TOPLU_DTYPE_FLOAT16 ? toplu_float_to_half(v) : toplu_float_to_bfloat16(v);
      }
      break;
    default: memset(t->data, 0, bytes); break; /* integers (indices, ids) and bools: zeros are always valid */
  }
  *seed = x;
}

/* Buffers of one batch size, from the allocator. */
typedef struct io_bufs {
  toplu_tensor_t *in, *out;
  int n_in, n_out;
} io_bufs_t;

/* Give the buffers back to the allocator. */
static void io_free(tune_ctx_t *c, io_bufs_t *io) {
  for (int i = 0; io->in && i < io->n_in; i++) toplu_allocator_free(c->alloc, io->in[i].data);
  for (int j = 0; io->out && j < io->n_out; j++) toplu_allocator_free(c->alloc, io->out[j].data);
  free(io->in);
  free(io->out);
  memset(io, 0, sizeof *io);
}

/* t's data from the tuner's allocator; TOPLU_ERR_OUT_OF_MEMORY (why says
 * which buffer) when over the limit. */
static toplu_status_t buffer_alloc(tune_ctx_t *c, toplu_tensor_t *t, const char *what, char *why, size_t why_size) {
  size_t bytes = toplu_tensor_nbytes(t);
  if ((t->data = toplu_allocator_alloc(c->alloc, bytes))) return TOPLU_OK;
  snprintf(why, why_size, "%s buffer of %zu bytes over the memory limit (%zu in use)", what, bytes,
           toplu_allocator_current(c->alloc));
  return TOPLU_ERR_OUT_OF_MEMORY;
}

/* Allocate and fill the buffers at batch b; TOPLU_ERR_OUT_OF_MEMORY when over the limit. */
static toplu_status_t io_alloc(tune_ctx_t *c, int64_t b, io_bufs_t *io, char *why, size_t why_size) {
  io->n_in = c->n_in;
  io->n_out = c->n_out;
  io->in = calloc((size_t)c->n_in + 1, sizeof *io->in);
  io->out = calloc((size_t)c->n_out + 1, sizeof *io->out);
  if (!io->in || !io->out) return TOPLU_ERR_OUT_OF_MEMORY;
  toplu__batch_shapes_at(&c->shapes, b, io->in);
  if (toplu_session_output_shapes(c->session, io->in, c->n_in, io->out, c->n_out)) {
    snprintf(why, why_size, "%s", toplu_session_last_error(c->session));
    return TOPLU_ERR_INTERNAL;
  }
  uint64_t seed = 0x9E3779B97F4A7C15ull;
  toplu_status_t st;
  for (int i = 0; i < c->n_in; i++) {
    if ((st = buffer_alloc(c, &io->in[i], "input", why, why_size))) return st;
    fill_input(c->data ? &c->data[i] : NULL, &io->in[i], c->shapes.batched[i], &seed);
  }
  for (int j = 0; j < c->n_out; j++)
    if ((st = buffer_alloc(c, &io->out[j], "output", why, why_size))) return st;
  return TOPLU_OK;
}

/* The row's predicted bytes and latency from the plan at b; frees pt. */
static void predict_row(tune_ctx_t *c, toplu__plan_point_t *pt, int64_t b, toplu_tune_row_t *row) {
  toplu__mem_terms_t t;
  toplu__plan_point_terms(pt, 1, &t);
  row->predicted_bytes = (uint64_t)toplu__mem_terms_total(&t);
  c->predicted_weights = t.weights > 0 ? (uint64_t)t.weights : 0;
  toplu__latency_parts_t parts;
  toplu__latency_parts(&c->lm, pt, NULL, b, &parts);
  row->predicted_latency_ms = toplu__latency_seconds(&c->lm, &parts) * 1e3;
  toplu__plan_point_free(pt);
}

/* The plan's predictions at b with the allocator's limit lifted for a
 * moment: planning itself ran out of memory under the limit, and the row
 * (and the "below what batch 1 needs" message) should still say what the
 * plan predicts.  Leaves no plan cached. */
static void predict_without_limit(tune_ctx_t *c, int64_t b, toplu_tune_row_t *row) {
  size_t lim = toplu_allocator_limit(c->alloc);
  toplu_session_clear_plans(c->session);
  toplu_allocator_set_limit(c->alloc, 0);
  toplu__plan_point_t pt;
  if (toplu__plan_point_build(c->session, &c->shapes, b, 0, &pt, NULL) == TOPLU_OK) predict_row(c, &pt, b, row);
  toplu_session_clear_plans(c->session);
  toplu_allocator_set_limit(c->alloc, lim);
}

/* One timed run; seconds in *dt. */
static toplu_status_t run_once(tune_ctx_t *c, io_bufs_t *io, double *dt) {
  double t0 = toplu__tune_now();
  toplu_status_t st = toplu_session_run(c->session, io->in, io->n_in, io->out, io->n_out);
  *dt = toplu__tune_now() - t0;
  return st;
}

/* Progress while measuring (a live status line for the caller's log). */
static void progress(tune_ctx_t *c, int64_t b, int window, double thr, double p99, double since) {
  toplu__logf(c->o->log, c->o->log_user, TOPLU_LOG_PROGRESS,
              "batch %lld: window %d, %.1f inferences/s, p99 %.1f ms, %.0f s elapsed", (long long)b, window, thr, p99,
              since);
}

toplu_status_t toplu__tune_measure(tune_ctx_t *c, int64_t b, int full, toplu_tune_row_t *row, toplu_error_t *err) {
  memset(row, 0, sizeof *row);
  row->batch_size = b;
  double t_begin = toplu__tune_now();
  toplu_session_clear_plans(c->session);
  trim_heap();
  size_t base = toplu_allocator_current(c->alloc);
  toplu_allocator_reset_peak(c->alloc);
  uint64_t rss0, hwm0;
  reset_hwm();
  read_rss(&rss0, &hwm0);
  io_bufs_t io;
  memset(&io, 0, sizeof io);
  double *lat = NULL, *wthr = NULL, *wp99 = NULL;
  toplu_status_t st = TOPLU_OK;
  char why[256] = "";
  int plan_oom = 0;

  /* The plan: predictions come from it. */
  toplu__plan_point_t pt;
  st = toplu__plan_point_build(c->session, &c->shapes, b, 0, &pt, NULL);
  if (st == TOPLU_ERR_OUT_OF_MEMORY) {
    snprintf(why, sizeof why, "planning: %s", toplu_session_last_error(c->session));
    plan_oom = 1;
    goto oom;
  }
  if (st) {
    toplu__errorf(err, st, "batch %lld: %s", (long long)b, toplu_session_last_error(c->session));
    goto done;
  }
  predict_row(c, &pt, b, row);
  /* A size whose plan needs more than the machine has is not run: its inputs would be allocated and filled
   * first (MNIST at batch 3,000,000: 9.4 GB and 27 s before the 184 GiB arena failed).  Only past the
   * memory available: under a smaller memory_limit_bytes the allocator's limit decides, measured. */
  {
    char how[128];
    uint64_t avail = toplu_cpu_memory_available(how, sizeof how);
    /* the plan is built: its weights (packed, or read in place from the model) are in memory already and count in
     * what is used, not in what is available (they were counted twice: ResNet-50 in a 400 MiB cgroup had every
     * size refused, a batch of 8 that toplu run then ran among them) */
    uint64_t to_come = row->predicted_bytes > c->predicted_weights ? row->predicted_bytes - c->predicted_weights : 0;
    if (avail > 0 && to_come > avail) {
      char a[32], m[32];
      snprintf(why, sizeof why, "not run: its plan needs about %s besides its weights, more than the %s of memory available",
               toplu__fmt_bytes((double)to_come, a, sizeof a), toplu__fmt_bytes((double)avail, m, sizeof m));
      goto oom;
    }
  }
  st = io_alloc(c, b, &io, why, sizeof why);
  if (st == TOPLU_ERR_OUT_OF_MEMORY) goto oom;
  if (st) {
    toplu__errorf(err, st, "batch %lld: %s", (long long)b, why);
    goto done;
  }
  double dt;
  st = run_once(c, &io, &dt); /* the first run allocates the arena */
  if (st == TOPLU_ERR_OUT_OF_MEMORY) {
    snprintf(why, sizeof why, "%s", toplu_session_last_error(c->session));
    goto oom;
  }
  if (st) {
    toplu__errorf(err, st, "batch %lld: %s", (long long)b, toplu_session_last_error(c->session));
    goto done;
  }
  row->status = TOPLU_TUNE_OK;
  row->min_ms = 0;
  if (full) {
    double cap = c->o->max_seconds_per_batch, t_w = toplu__tune_now();
    double best = 0;
    for (int k = 0; k < WARMUP_RUNS && toplu__tune_now() - t_w < WARMUP_SECONDS; k++) {
      /* past the sweep's time limit the first run is the warm-up: one window is measured, no more */
      if (c->o->max_seconds > 0 && toplu__tune_now() - c->t_start >= c->o->max_seconds) break;
      if ((st = run_once(c, &io, &dt))) {
        toplu__errorf(err, st, "batch %lld: %s", (long long)b, toplu_session_last_error(c->session));
        goto done;
      }
      if (best == 0 || dt < best) best = dt;
    }
    int cap_lat = 256, n_lat = 0, cap_w = 16, n_w = 0;
    int *wstart = NULL;
    lat = malloc((size_t)cap_lat * sizeof *lat);
    wthr = malloc((size_t)cap_w * sizeof *wthr);
    wp99 = malloc((size_t)cap_w * sizeof *wp99);
    wstart = malloc((size_t)cap_w * sizeof *wstart);
    double *wsec = malloc((size_t)cap_w * sizeof *wsec);
    if (!lat || !wthr || !wp99 || !wstart || !wsec) {
      free(wstart);
      free(wsec);
      st = toplu__errorf(err, TOPLU_ERR_OUT_OF_MEMORY, "out of memory");
      goto done;
    }
    double t_meas = toplu__tune_now();
    for (;;) {
      if (n_w == cap_w) {
        cap_w *= 2;
        double *a = realloc(wthr, (size_t)cap_w * sizeof *a);
        if (a) wthr = a;
        double *p = realloc(wp99, (size_t)cap_w * sizeof *p);
        if (p) wp99 = p;
        int *s = realloc(wstart, (size_t)cap_w * sizeof *s);
        if (s) wstart = s;
        double *q = realloc(wsec, (size_t)cap_w * sizeof *q);
        if (q) wsec = q;
        if (!a || !p || !s || !q) {
          free(wstart);
          free(wsec);
          st = toplu__errorf(err, TOPLU_ERR_OUT_OF_MEMORY, "out of memory");
          goto done;
        }
      }
      /* Only the last three windows make the statistics: older runs are dropped, so the array of run times
       * stays a few windows long (it grew to 53 MiB over 3.1 million runs of a tiny model, counted in the
       * row's RSS growth) */
      if (n_w >= 3) {
        int keep = wstart[n_w - 2];
        memmove(lat, lat + keep, (size_t)(n_lat - keep) * sizeof *lat);
        n_lat -= keep;
        for (int w = 0; w < n_w; w++) wstart[w] -= keep;
      }
      wstart[n_w] = n_lat;
      double w0 = toplu__tune_now();
      int runs = 0;
      do {
        if ((st = run_once(c, &io, &dt))) {
          free(wstart);
          free(wsec);
          toplu__errorf(err, st, "batch %lld: %s", (long long)b, toplu_session_last_error(c->session));
          goto done;
        }
        if (n_lat == cap_lat) {
          cap_lat *= 2;
          double *l = realloc(lat, (size_t)cap_lat * sizeof *l);
          if (!l) {
            free(wstart);
            free(wsec);
            st = toplu__errorf(err, TOPLU_ERR_OUT_OF_MEMORY, "out of memory");
            goto done;
          }
          lat = l;
        }
        lat[n_lat++] = dt * 1e3;
        if (best == 0 || dt < best) best = dt;
        runs++;
      } while (toplu__tune_now() - w0 < WINDOW_SECONDS);
      double wsecs = toplu__tune_now() - w0;
      /* the window's p99 over all its runs (sorted in place: only the set of a window's runs is read later;
       * a copy of the first 4096 had left two thirds of MNIST's 12,800-run windows out) */
      qsort(lat + wstart[n_w], (size_t)runs, sizeof *lat, cmp_double);
      wthr[n_w] = (double)b * runs / wsecs;
      wp99[n_w] = toplu__percentile(lat + wstart[n_w], runs, 99);
      wsec[n_w] = wsecs;
      n_w++;
      progress(c, b, n_w, wthr[n_w - 1], wp99[n_w - 1], toplu__tune_now() - t_meas);
      if (toplu__windows_stable(wthr, wp99, n_w, STABLE_TOL)) {
        row->stable = 1;
        break;
      }
      double now = toplu__tune_now();
      if ((now - t_meas >= cap && n_w >= 2) || now - t_meas >= 3 * cap ||
          (c->o->max_seconds > 0 && now - c->t_start >= c->o->max_seconds && n_w >= 1))
        break;
    }
    /* Statistics over the last (up to) three windows. */
    int first_w = n_w > 3 ? n_w - 3 : 0;
    int from = wstart[first_w], cnt = n_lat - from;
    double secs = 0;
    for (int w = first_w; w < n_w; w++) secs += wsec[w];
    qsort(lat + from, (size_t)cnt, sizeof *lat, cmp_double);
    row->p50_ms = toplu__percentile(lat + from, cnt, 50);
    row->p90_ms = toplu__percentile(lat + from, cnt, 90);
    row->p99_ms = toplu__percentile(lat + from, cnt, 99);
    row->throughput = secs > 0 ? (double)b * cnt / secs : 0;
    row->runs = cnt;
    row->windows = n_w;
    row->min_ms = best * 1e3;
    free(wstart);
    free(wsec);
    if (c->o->latency_budget_ms > 0 && row->p99_ms > c->o->latency_budget_ms) row->status = TOPLU_TUNE_OVER_BUDGET;
  }
  {
    size_t pk = toplu_allocator_peak(c->alloc);
    row->peak_bytes = (uint64_t)(pk > base ? pk - base : 0) + c->in_place;
  }
  goto done;
oom:
  row->status = TOPLU_TUNE_OOM;
  snprintf(row->message, sizeof row->message, "%s", why);
  {
    size_t pk = toplu_allocator_peak(c->alloc);
    row->peak_bytes = (uint64_t)(pk > base ? pk - base : 0) + c->in_place;
  }
  if (plan_oom) predict_without_limit(c, b, row);
  st = TOPLU_OK;
done:
  {
    uint64_t rss1, hwm1;
    read_rss(&rss1, &hwm1);
    row->rss_growth_bytes = hwm1 > rss0 ? hwm1 - rss0 : 0;
  }
  io_free(c, &io);
  toplu_session_clear_plans(c->session);
  trim_heap();
  {
    size_t now = toplu_allocator_current(c->alloc);
    row->after_bytes = now > base ? now - base : 0;
  }
  free(lat);
  free(wthr);
  free(wp99);
  row->seconds = toplu__tune_now() - t_begin;
  return st;
}
