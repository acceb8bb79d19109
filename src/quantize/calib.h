/*
 * quantize/calib.h - the range of a tensor over calibration data, and the
 * quantization parameters that follow from it (toplu/quantize.h).
 *
 * A qz_range_t takes every value of a float tensor as batches arrive
 * (qz_range_add) and keeps the smallest and largest value and a histogram
 * of QZ_BINS bins over [-R, R): bin i holds [-R + i w, -R + (i + 1) w),
 * w = 2R / QZ_BINS.  R starts as the power of two above the first batch's
 * largest |x| and doubles (bins merged pairwise into the middle half: an
 * exact step) whenever a value falls outside, so the histogram of a stream
 * needs one pass and no second copy of the data.
 */
#ifndef TOPLU_QUANTIZE_CALIB_H
#define TOPLU_QUANTIZE_CALIB_H

#include <stdint.h>

#include "toplu/quantize.h"

#define QZ_BINS 16384
/* The entropy method's search runs on this many bins over [0, max |x|] (TensorRT's 2048), spread anew
 * from the QZ_BINS / 2 bins of |x| over [0, R). */
#define QZ_ENTROPY_BINS 2048

typedef struct qz_range {
  double lo, hi;   /* smallest and largest value seen (lo > hi: none yet) */
  double r;        /* histogram half-width R (0: no histogram yet) */
  int64_t n;       /* finite values seen */
  double sumsq;    /* their sum of squares */
  int64_t nonfinite; /* NaN and Inf values seen (left out) */
  double *hist;    /* QZ_BINS counts, or NULL (minmax only) */
} qz_range_t;

/* Start a range; with_hist 1 keeps a histogram (percentile, entropy).
 * 0 or -1 (out of memory). */
int qz_range_init(qz_range_t *r, int with_hist);
void qz_range_free(qz_range_t *r);

/* Take n float values. */
void qz_range_add(qz_range_t *r, const float *x, int64_t n);

/* The range to quantize over by method: [*lo, *hi] (for minmax the values
 * seen; percentile p in percent of the values kept; entropy the KL
 * threshold).  Always lo <= hi; both 0 when nothing was seen. */
void qz_range_pick(const qz_range_t *r, toplu_calib_method_t method, double percentile, double *lo, double *hi);

/*
 * Scale and zero point of an activation over [lo, hi] (widened to hold 0):
 * uint8 (symmetric 0): scale (hi - lo) / 255, zero point round(-lo / scale)
 * in 0..255; int8 (symmetric 1): scale max(|lo|, |hi|) / 127, zero point 0.
 * A range of width 0 gets scale 1.  cap > 0: the tensor is the output of a
 * Clip (or Relu6) whose top is cap; the scale is lowered to the largest
 * float whose top level stays <= cap, so an engine sees the Clip as
 * redundant (graph/fuse.c, fuse_qlinear_conv).
 */
void qz_params(double lo, double hi, int symmetric, double cap, float *scale, int32_t *zero_point);

#endif
