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
    /* in place: the lower half folds into [QZ/4, QZ/2) from the top down, the upper half into
     * [QZ/2, 3 QZ/4) from the bottom up, each reading only bins not yet written */
    for (int i = QZ_BINS / 2 - 1; i >= 0; i -= 2) {
      double v = h[i] + h[i - 1];
      h[QZ_BINS / 4 + i / 2] = v;
    }
    for (int i = QZ_BINS / 2; i < QZ_BINS; i += 2) {
      double v = h[i] + h[i + 1];
      h[QZ_BINS / 4 + i / 2] = v;
    }
    for (int i = 0; i < QZ_BINS / 4; i++) h[i] = h[QZ_BINS - 1 - i] = 0;
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

/* TensorRT's entropy threshold over the histogram of |x|, on QZ_BINS / 2 bins over [0, max |x|] as
 * TensorRT bins it.  The collected histogram's bins span [0, R), R a power of two up to twice max |x|
 * (so that histograms merge as the range grows); its mass is spread anew over bins spanning [0, max |x|]
 * (uniform within each old bin).  Searched on the old bins, the thresholds fell on multiples of R / 8 or
 * R / 16 whatever the data, so data scaled by 5% moved the threshold by a third (a fresh user's finding
 * of 2026-12-06: post-ReLU tensors clipped at 1.8 standard deviations). */
static double entropy_threshold(const qz_range_t *r, int levels) {
  enum { H = QZ_BINS / 2, NA = QZ_ENTROPY_BINS };
  double *a0 = malloc(sizeof(double) * H), *a = calloc(NA, sizeof(double));
  double m = fmax(fabs(r->lo), fabs(r->hi));
  if (!(m > 0) || m > r->r) m = r->r;
  if (!a0 || !a) {
    free(a0);
    free(a);
    return m;
  }
  for (int i = 0; i < H; i++) a0[i] = r->hist[H + i] + r->hist[H - 1 - i];
  double w0 = r->r / H, w = m / NA;
  for (int i = 0; i < H; i++) {
    if (a0[i] == 0) continue;
    /* old bin i covers [i w0, (i + 1) w0): its mass goes to the new bins it overlaps, by overlap */
    double x0 = i * w0, x1 = (i + 1) * w0;
    if (x0 >= m) {
      a[NA - 1] += a0[i]; /* only the bin holding max |x| itself reaches past it */
      continue;
    }
    if (x1 > m) x1 = m;
    int j0 = (int)(x0 / w), j1 = (int)ceil(x1 / w);
    if (j1 > NA) j1 = NA;
    for (int j = j0; j < j1; j++) {
      double o = fmin(x1, (j + 1) * w) - fmax(x0, j * w);
      if (o > 0) a[j] += a0[i] * o / (x1 - x0);
    }
  }
  free(a0);
  /* The bin at zero holds every value a ReLU cut (often half the mass): q spreads its group's mass over
   * the group, so the wider the groups the worse that spike fits, and the search preferred narrow groups,
   * clipping post-ReLU tensors hard.  It counts as its neighbour, as NVIDIA's pytorch-quantization does
   * for this method. */
  if (a[1] < a[0]) a[0] = a[1];
  int last = NA - 1;
  while (last > 0 && a[last] == 0) last--;
  if (last + 1 <= levels) { /* fewer bins used than levels: no clipping needed */
    free(a);
    return (last + 1) * w;
  }
  double *p = malloc(sizeof(double) * NA), *q = malloc(sizeof(double) * NA);
  if (!p || !q) {
    free(p);
    free(q);
    free(a);
    return (last + 1) * w;
  }
  double best = INFINITY, total = 0;
  for (int k = 0; k < NA; k++) total += a[k];
  int best_i = last + 1;
  for (int i = levels; i <= last + 1; i++) {
    double outliers = 0;
    for (int k = i; k < NA; k++) outliers += a[k];
    /* A threshold that clips half the values or more is no candidate: where |x| has no mass near zero (a
     * tensor of one sign away from zero), the first bin holding mass gave p and q one bin each and a KL of
     * 0, and every value was clipped to one (PaddleOCR cls: a squeeze-and-excitation gate's input held at
     * its smallest magnitude). */
    if (outliers + a[i - 1] >= 0.5 * total) continue;
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
  free(a);
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
    *scale = a / 127.0 >= FLT_MIN ? (float)(a / 127.0) : 1.0f;
    *zero_point = 0;
    return;
  }
  /* a zero range, or one whose scale a float32 cannot hold as a normal number (calibration values of 1e-44 gave
   * scale 0, and every run of the model answered wrongly without a word, a fresh user's finding of 2026-12-07):
   * scale 1, as for a zero range */
  if (!((hi - lo) / 255.0 >= FLT_MIN)) {
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
