/* quantize/calib.c - ranges, histograms and quantization parameters (see calib.h). */
#include "quantize/calib.h"

#include <float.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

int qz_range_init(qz_range_t *r, int with_hist) {
  memset(r, 0, sizeof *r);
  r->lo = INFINITY;
  r->hi = -INFINITY;
  if (with_hist && !(r->hist = calloc(QZ_BINS, sizeof *r->hist))) return -1;
  return 0;
}

void qz_range_free(qz_range_t *r) {
  free(r->hist);
  r->hist = NULL;
}

/* Double R until it holds m: bins pair up into the middle half. */
static void widen(qz_range_t *r, double m) {
  while (m >= r->r) {
    double *h = r->hist;
    double nh[QZ_BINS];
    memset(nh, 0, sizeof nh);
    for (int i = 0; i < QZ_BINS; i++) nh[QZ_BINS / 4 + i / 2] += h[i];
    memcpy(h, nh, sizeof nh);
    r->r *= 2;
  }
}

void qz_range_add(qz_range_t *r, const float *x, int64_t n) {
  double lo = r->lo, hi = r->hi, m = 0, sq = 0;
  int64_t ok = 0;
  for (int64_t i = 0; i < n; i++) {
    float v = x[i];
    if (!isfinite(v)) {
      r->nonfinite++;
      continue;
    }
    ok++;
    sq += (double)v * v;
    if (v < lo) lo = v;
    if (v > hi) hi = v;
  }
  r->lo = lo;
  r->hi = hi;
  r->n += ok;
  r->sumsq += sq;
  if (!r->hist || ok == 0) return;
  m = fmax(fabs(lo), fabs(hi));
  if (r->r == 0) {
    r->r = 1.0;
    while (r->r <= m && r->r < DBL_MAX / 4) r->r *= 2;
    while (r->r / 2 > m && r->r > 1e-30) r->r /= 2;
    if (r->r <= m) r->r *= 2;
  } else if (m >= r->r) {
    widen(r, m);
  }
  double inv = QZ_BINS / (2 * r->r);
  for (int64_t i = 0; i < n; i++) {
    float v = x[i];
    if (!isfinite(v)) continue;
    int b = (int)floor((v + r->r) * inv);
    if (b < 0) b = 0;
    if (b >= QZ_BINS) b = QZ_BINS - 1;
    r->hist[b] += 1.0;
  }
}

/* The value below which a share q (0..1) of the histogram's mass lies. */
static double quantile(const qz_range_t *r, double q) {
  double total = 0;
  for (int i = 0; i < QZ_BINS; i++) total += r->hist[i];
  double want = q * total, acc = 0, w = 2 * r->r / QZ_BINS;
  for (int i = 0; i < QZ_BINS; i++) {
    if (acc + r->hist[i] >= want && r->hist[i] > 0) {
      double f = (want - acc) / r->hist[i];
      return -r->r + (i + f) * w;
    }
    acc += r->hist[i];
  }
  return r->r;
}

/* KL(p || q) over n bins, p and q normalised here; bins where p is 0 add nothing. */
static double kl(const double *p, const double *q, int n) {
  double sp = 0, sq = 0, d = 0;
  for (int i = 0; i < n; i++) sp += p[i], sq += q[i];
  if (sp <= 0 || sq <= 0) return INFINITY;
  for (int i = 0; i < n; i++) {
    if (p[i] <= 0) continue;
    if (q[i] <= 0) return INFINITY;
    d += (p[i] / sp) * log((p[i] / sp) / (q[i] / sq));
  }
  return d;
}

/* TensorRT's entropy threshold over the histogram of |x| (QZ_BINS / 2 bins over [0, R)). */
static double entropy_threshold(const qz_range_t *r, int levels) {
  enum { NA = QZ_BINS / 2 };
  double a[NA];
  for (int i = 0; i < NA; i++) a[i] = r->hist[NA + i] + r->hist[NA - 1 - i];
  int last = NA - 1;
  while (last > 0 && a[last] == 0) last--;
  double w = r->r / NA;
  if (last + 1 <= levels) return (last + 1) * w; /* fewer bins used than levels: no clipping needed */
  double *p = malloc(sizeof(double) * NA), *q = malloc(sizeof(double) * NA);
  if (!p || !q) {
    free(p);
    free(q);
    return (last + 1) * w;
  }
  double best = INFINITY;
  int best_i = last + 1;
  for (int i = levels; i <= last + 1; i++) {
    double outliers = 0;
    for (int k = i; k < NA; k++) outliers += a[k];
    memcpy(p, a, sizeof(double) * (size_t)i);
    p[i - 1] += outliers;
    /* q: a[0..i) merged into `levels` groups, each group's mass spread over its nonzero bins */
    for (int g = 0; g < levels; g++) {
      int b0 = (int)((int64_t)g * i / levels), b1 = (int)((int64_t)(g + 1) * i / levels);
      double mass = 0;
      int nz = 0;
      for (int k = b0; k < b1; k++) {
        mass += a[k];
        nz += a[k] != 0;
      }
      for (int k = b0; k < b1; k++) q[k] = a[k] != 0 ? mass / nz : 0;
    }
    double d = kl(p, q, i);
    if (d < best) {
      best = d;
      best_i = i;
    }
  }
  free(p);
  free(q);
  return best_i * w;
}

void qz_range_pick(const qz_range_t *r, toplu_calib_method_t method, double percentile, double *lo, double *hi) {
  if (r->n == 0 || r->lo > r->hi) {
    *lo = *hi = 0;
    return;
  }
  *lo = r->lo;
  *hi = r->hi;
  if (!r->hist || r->r == 0) return;
  if (method == TOPLU_CALIB_PERCENTILE) {
    double tail = (100.0 - (percentile > 0 ? percentile : 99.999)) / 200.0;
    if (tail <= 0) return;
    double l = quantile(r, tail), h = quantile(r, 1.0 - tail);
    *lo = fmax(r->lo, l);
    *hi = fmin(r->hi, h);
    if (*lo > *hi) *lo = *hi;
  } else if (method == TOPLU_CALIB_ENTROPY) {
    double t = entropy_threshold(r, r->lo >= 0 ? 256 : 128);
    *lo = fmax(r->lo, -t);
    *hi = fmin(r->hi, t);
  }
}

void qz_params(double lo, double hi, int symmetric, double cap, float *scale, int32_t *zero_point) {
  if (lo > 0) lo = 0;
  if (hi < 0) hi = 0;
  if (cap > 0 && hi > cap) hi = cap;
  if (symmetric) {
    double a = fmax(fabs(lo), fabs(hi));
    *scale = a > 0 ? (float)(a / 127.0) : 1.0f;
    *zero_point = 0;
    return;
  }
  if (hi - lo <= 0) {
    *scale = 1.0f;
    *zero_point = 0;
    return;
  }
  float s = (float)((hi - lo) / 255.0);
  int32_t z = (int32_t)lrint(-lo / (double)s);
  if (z < 0) z = 0;
  if (z > 255) z = 255;
  if (cap > 0)
    while ((double)s * (255 - z) > cap && s > 0) s = nextafterf(s, 0.0f);
  *scale = s;
  *zero_point = z;
}
