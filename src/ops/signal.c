/*
 * ops/signal.c - signal-processing kernels (ONNX operator spec,
 * https://onnx.ai/onnx/operators/, opset 17; shapes in
 * graph/schema_signal.c):
 *   HannWindow, HammingWindow, BlackmanWindow: w[n] = a0 - a1 cos(2 pi n / N)
 *     + a2 cos(4 pi n / N), N = size (periodic, the default) or size - 1;
 *     Hann a0 = a1 = 0.5, Hamming a0 = 25/46, a1 = 21/46, Blackman a0 = 0.42,
 *     a1 = 0.5, a2 = 0.08;
 *   DFT: X[k] = sum_n x[n] e^(-2 pi i k n / N) along axis, N = dft_length
 *     (the signal zero-padded or cut to it), inverse: e^(+...) / N,
 *     onesided: bins 0..N/2;
 *   STFT: the DFT of each frame x[f * frame_step + n] * window[n],
 *     n < frame_length (onesided by default);
 *   MelWeightMatrix: triangular filters between mel(f) = 2595 log10(1 + f/700)
 *     points spaced evenly from lower_edge_hertz to upper_edge_hertz over
 *     num_mel_bins + 2 steps, each point mapped to spectrogram bin
 *     floor((dft_length + 1) f / sample_rate), peaks 1 (as the ONNX reference
 *     computes it).
 * Sums in double over a table of e^(-2 pi i j / N), j < N, made in prepare;
 * the transform is the direct O(N^2) one per line (no FFT).
 */
#include <math.h>
#include <string.h>

#include "ops/elem_io.h"
#include "ops/kernel.h"

#ifndef M_PI
#define M_PI 3.14159265358979323846
#endif

/* ---- windows ---- */

static toplu_status_t run_window(toplu__kernel_ctx_t *ctx) {
  toplu_tensor_t *y = &ctx->out[0];
  const char *op = ctx->node->op_type;
  double a0 = 0.5, a1 = 0.5, a2 = 0;
  if (!strcmp(op, "HammingWindow")) a0 = 25.0 / 46.0, a1 = 21.0 / 46.0;
  else if (!strcmp(op, "BlackmanWindow")) a0 = 0.42, a1 = 0.5, a2 = 0.08;
  const int64_t size = y->dims[0];
  const int periodic = toplu__node_attr_int(ctx->node, "periodic", 1) != 0;
  const double n_ = (double)(periodic ? size : size - 1);
  for (int64_t n = 0; n < size; n++) {
    double v = n_ > 0 ? a0 - a1 * cos(2 * M_PI * (double)n / n_) + a2 * cos(4 * M_PI * (double)n / n_) : 1.0;
    toplu__store_double(y, n, v);
  }
  return TOPLU_OK;
}

/* ---- DFT, STFT ---- */

typedef struct dft_state {
  int64_t n;    /* transform length */
  double *tw;   /* tw[2j], tw[2j + 1]: cos and -sin of 2 pi j / n */
} dft_state_t;

static toplu_status_t make_twiddles(toplu__kernel_ctx_t *ctx, toplu__kernel_info_t *info, int64_t n) {
  if (!toplu__is_float_dtype(ctx->in[0].dtype))
    return toplu__kernel_error(ctx, TOPLU_ERR_UNSUPPORTED, "%s on %s tensors is not supported", ctx->node->op_type,
                              toplu_dtype_name(ctx->in[0].dtype));
  if (n < 1) return toplu__kernel_error(ctx, TOPLU_ERR_INVALID_MODEL, "transform length %lld", (long long)n);
  size_t bytes = sizeof(dft_state_t) + 2 * (size_t)n * sizeof(double);
  dft_state_t *s = toplu__kernel_alloc(ctx, bytes);
  if (!s) return toplu__kernel_error(ctx, TOPLU_ERR_OUT_OF_MEMORY, "out of memory");
  ctx->state = s;
  info->state_bytes = bytes;
  s->n = n;
  s->tw = (double *)(s + 1);
  for (int64_t j = 0; j < n; j++) {
    double a = 2 * M_PI * (double)j / (double)n;
    s->tw[2 * j] = cos(a);
    s->tw[2 * j + 1] = -sin(a);
  }
  return TOPLU_OK;
}

static void release_state(toplu__kernel_ctx_t *ctx) { toplu__kernel_free(ctx, ctx->state); }

static int dft_axis(const toplu__kernel_ctx_t *ctx) {
  int64_t a = toplu__node_attr_int(ctx->node, "axis", 1);
  return (int)(a < 0 ? a + ctx->in[0].ndim : a);
}

static toplu_status_t prepare_dft(toplu__kernel_ctx_t *ctx, toplu__kernel_info_t *info) {
  const toplu_tensor_t *x = &ctx->in[0];
  int64_t n = x->dims[dft_axis(ctx)];
  if (ctx->n_in > 1 && ctx->in[1].ndim >= 0) {
    if (!ctx->in[1].data) return toplu__kernel_error(ctx, TOPLU_ERR_UNSUPPORTED, "dft_length must be known before the run");
    n = toplu__tensor_get_int(&ctx->in[1], 0);
  }
  return make_twiddles(ctx, info, n);
}

/* One line: out[k] for k < nout from in[n] (n < nin, stride istr in
 * elements of c values each) over a transform of s->n; sign -1 inverse. */
static void dft_line(const dft_state_t *s, const toplu_tensor_t *x, int64_t ibase, int64_t istr, int64_t nin, int c,
                     const toplu_tensor_t *w, toplu_tensor_t *y, int64_t obase, int64_t ostr, int64_t nout, int inverse) {
  const int64_t n = s->n, m = nin < n ? nin : n;
  for (int64_t k = 0; k < nout; k++) {
    double re = 0, im = 0;
    int64_t j = 0; /* k * t mod n */
    for (int64_t t = 0; t < m; t++) {
      double xr = toplu__tensor_get_double(x, (ibase + t * istr) * c), xi = c == 2 ? toplu__tensor_get_double(x, (ibase + t * istr) * c + 1) : 0;
      if (w) {
        double wv = toplu__tensor_get_double(w, t);
        xr *= wv, xi *= wv;
      }
      double cr = s->tw[2 * j], ci = inverse ? -s->tw[2 * j + 1] : s->tw[2 * j + 1];
      re += xr * cr - xi * ci;
      im += xr * ci + xi * cr;
      j += k % n;
      if (j >= n) j -= n;
    }
    if (inverse) re /= (double)n, im /= (double)n;
    toplu__store_double(y, (obase + k * ostr) * 2, re);
    toplu__store_double(y, (obase + k * ostr) * 2 + 1, im);
  }
}

static toplu_status_t run_dft(toplu__kernel_ctx_t *ctx) {
  const dft_state_t *s = ctx->state;
  const toplu_tensor_t *x = &ctx->in[0];
  toplu_tensor_t *y = &ctx->out[0];
  const int r = x->ndim, a = dft_axis(ctx), c = (int)x->dims[r - 1];
  const int64_t outer = toplu__dims_prod(x->dims, 0, a), inner = toplu__dims_prod(x->dims, a + 1, r - 1);
  const int64_t nin = x->dims[a], nout = y->dims[a];
  const int inverse = toplu__node_attr_int(ctx->node, "inverse", 0) != 0;
  for (int64_t o = 0; o < outer; o++)
    for (int64_t i = 0; i < inner; i++)
      dft_line(s, x, o * nin * inner + i, inner, nin, c, NULL, y, o * nout * inner + i, inner, nout, inverse);
  return TOPLU_OK;
}

static toplu_status_t prepare_stft(toplu__kernel_ctx_t *ctx, toplu__kernel_info_t *info) {
  int64_t n;
  if (ctx->n_in > 3 && ctx->in[3].ndim >= 0) {
    if (!ctx->in[3].data) return toplu__kernel_error(ctx, TOPLU_ERR_UNSUPPORTED, "frame_length must be known before the run");
    n = toplu__tensor_get_int(&ctx->in[3], 0);
  } else {
    n = ctx->in[2].dims[0];
  }
  if (!ctx->in[1].data) return toplu__kernel_error(ctx, TOPLU_ERR_UNSUPPORTED, "frame_step must be known before the run");
  if (ctx->n_in > 2 && ctx->in[2].ndim >= 0 && !toplu__is_float_dtype(ctx->in[2].dtype))
    return toplu__kernel_error(ctx, TOPLU_ERR_UNSUPPORTED, "window is %s", toplu_dtype_name(ctx->in[2].dtype));
  return make_twiddles(ctx, info, n);
}

static toplu_status_t run_stft(toplu__kernel_ctx_t *ctx) {
  const dft_state_t *s = ctx->state;
  const toplu_tensor_t *x = &ctx->in[0];
  const toplu_tensor_t *w = ctx->n_in > 2 && ctx->in[2].ndim >= 0 ? &ctx->in[2] : NULL;
  toplu_tensor_t *y = &ctx->out[0];
  const int64_t step = toplu__tensor_get_int(&ctx->in[1], 0), len = x->dims[1], frames = y->dims[1], bins = y->dims[2];
  const int c = (int)x->dims[2];
  for (int64_t b = 0; b < x->dims[0]; b++)
    for (int64_t f = 0; f < frames; f++)
      dft_line(s, x, b * len + f * step, 1, s->n, c, w, y, (b * frames + f) * bins, 1, bins, 0);
  return TOPLU_OK;
}

/* ---- MelWeightMatrix ---- */

static toplu_status_t run_mel(toplu__kernel_ctx_t *ctx) {
  toplu_tensor_t *y = &ctx->out[0];
  const int64_t spec = y->dims[0], bins = y->dims[1];
  const int64_t dft = toplu__tensor_get_int(&ctx->in[1], 0), rate = toplu__tensor_get_int(&ctx->in[2], 0);
  const double lo = toplu__tensor_get_double(&ctx->in[3], 0), hi = toplu__tensor_get_double(&ctx->in[4], 0);
  const double mlo = 2595 * log10(1 + lo / 700), mhi = 2595 * log10(1 + hi / 700);
  const double step = (mhi - mlo) / (double)(bins + 2);
  int64_t pt[3];
  for (int64_t k = 0; k < spec * bins; k++) toplu__store_double(y, k, 0);
  for (int64_t i = 0; i < bins; i++) {
    for (int q = 0; q < 3; q++) {
      double hz = 700 * (pow(10, ((double)(i + q) * step + mlo) / 2595) - 1);
      pt[q] = (int64_t)floor((double)(dft + 1) * hz / (double)rate);
      if (pt[q] < 0 || pt[q] >= spec)
        return toplu__kernel_error(ctx, TOPLU_ERR_INVALID_ARGUMENT,
                                  "a mel band edge falls on bin %lld, outside the %lld spectrogram bins",
                                  (long long)pt[q], (long long)spec);
    }
    const int64_t up = pt[1] - pt[0], down = pt[2] - pt[1];
    if (up == 0) toplu__store_double(y, pt[1] * bins + i, 1);
    else
      for (int64_t j = pt[0]; j <= pt[1]; j++) toplu__store_double(y, j * bins + i, (double)(j - pt[0]) / (double)up);
    for (int64_t j = pt[1]; down > 0 && j < pt[2]; j++)
      toplu__store_double(y, j * bins + i, (double)(pt[2] - j) / (double)down);
  }
  return TOPLU_OK;
}

const toplu__kernel_t toplu__kernels_signal[] = {
    {"HannWindow", "", NULL, run_window, NULL, 0, NULL, NULL, NULL},
    {"HammingWindow", "", NULL, run_window, NULL, 0, NULL, NULL, NULL},
    {"BlackmanWindow", "", NULL, run_window, NULL, 0, NULL, NULL, NULL},
    {"DFT", "", prepare_dft, run_dft, release_state, 0, NULL, NULL, NULL},
    {"STFT", "", prepare_stft, run_stft, release_state, 0, NULL, NULL, NULL},
    {"MelWeightMatrix", "", NULL, run_mel, NULL, 0, NULL, NULL, NULL},
    {NULL, NULL, NULL, NULL, NULL, 0, NULL, NULL, NULL},
};
