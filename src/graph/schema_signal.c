/*
 * graph/schema_signal.c - schemas of the signal-processing ops (ONNX
 * operator spec, https://onnx.ai/onnx/operators/, opset 17):
 *   HannWindow, HammingWindow, BlackmanWindow-17: a 1-D window of `size`
 *     values (output_datatype, default float);
 *   DFT-17: [batch, n1.., 1 or 2] -> [batch, n1.., 2] with the axis' length
 *     dft_length (input 1) or the input's, floor(len/2) + 1 when onesided;
 *   STFT-17: signal [batch, length, 1 or 2], frame_step, window, frame_length
 *     -> [batch, frames, bins, 2];
 *   MelWeightMatrix-17: [floor(dft_length/2) + 1, num_mel_bins].
 * Inputs that decide output lengths (size, dft_length, frame_step,
 * frame_length, every MelWeightMatrix input) are const_inputs.
 */
#include <string.h>

#include "graph/schema.h"

static int is_float(toplu_dtype_t dt) {
  return dt == TOPLU_DTYPE_FLOAT || dt == TOPLU_DTYPE_DOUBLE || dt == TOPLU_DTYPE_FLOAT16;
}

/* A one-element integer input's value, or -1 (unknown or absent). */
static toplu_status_t int_scalar(toplu__infer_ctx_t *ctx, int i, const char *what, int64_t *v) {
  *v = -1;
  if (!toplu__infer_has_input(ctx, i)) return TOPLU_OK;
  const toplu_tensor_t *t = &ctx->in[i];
  if ((t->dtype != TOPLU_DTYPE_INT32 && t->dtype != TOPLU_DTYPE_INT64) || t->ndim > 1 ||
      (t->ndim == 1 && t->dims[0] >= 0 && t->dims[0] != 1))
    return toplu__infer_error(ctx, TOPLU_ERR_INVALID_MODEL, "%s must be an int32 or int64 scalar", what);
  if (t->data) {
    *v = toplu__tensor_get_int(t, 0);
    if (*v < 0) return toplu__infer_error(ctx, TOPLU_ERR_INVALID_MODEL, "%s is %lld", what, (long long)*v);
  }
  return TOPLU_OK;
}

static toplu_status_t out_datatype(toplu__infer_ctx_t *ctx, toplu_dtype_t *dt) {
  int64_t v = toplu__node_attr_int(ctx->node, "output_datatype", TOPLU_DTYPE_FLOAT);
  switch (v) {
    case TOPLU_DTYPE_FLOAT: case TOPLU_DTYPE_DOUBLE: case TOPLU_DTYPE_FLOAT16: case TOPLU_DTYPE_INT8:
    case TOPLU_DTYPE_INT16: case TOPLU_DTYPE_INT32: case TOPLU_DTYPE_INT64: case TOPLU_DTYPE_UINT8:
    case TOPLU_DTYPE_UINT16: case TOPLU_DTYPE_UINT32: case TOPLU_DTYPE_UINT64:
      *dt = (toplu_dtype_t)v;
      return TOPLU_OK;
    default:
      return toplu__infer_error(ctx, TOPLU_ERR_UNSUPPORTED, "output_datatype %lld is not supported", (long long)v);
  }
}

static toplu_status_t infer_window(toplu__infer_ctx_t *ctx) {
  toplu_dtype_t dt = TOPLU_DTYPE_FLOAT;
  int64_t n;
  toplu_status_t st;
  if ((st = out_datatype(ctx, &dt)) || (st = int_scalar(ctx, 0, "size", &n))) return st;
  if (n < 0) n = toplu__infer_new_dim(ctx);
  toplu__infer_set(ctx, 0, dt, 1, &n);
  return TOPLU_OK;
}

static toplu_status_t infer_dft(toplu__infer_ctx_t *ctx) {
  const toplu_tensor_t *x = &ctx->in[0];
  int r = x->ndim;
  if (!is_float(x->dtype))
    return toplu__infer_error(ctx, TOPLU_ERR_UNSUPPORTED, "input is %s; expected a float type", toplu_dtype_name(x->dtype));
  if (r < 3) return toplu__infer_error(ctx, TOPLU_ERR_SHAPE, "input has rank %d; expected [batch, n.., 1 or 2]", r);
  if (x->dims[r - 1] >= 0 && x->dims[r - 1] != 1 && x->dims[r - 1] != 2)
    return toplu__infer_error(ctx, TOPLU_ERR_SHAPE, "last dim is %lld; expected 1 (real) or 2 (complex)",
                             (long long)x->dims[r - 1]);
  int64_t a = toplu__node_attr_int(ctx->node, "axis", 1);
  if (a < 0) a += r;
  if (a < 1 || a > r - 2) return toplu__infer_error(ctx, TOPLU_ERR_INVALID_MODEL, "axis %lld is not a signal dim", (long long)a);
  int64_t len;
  toplu_status_t st = int_scalar(ctx, 1, "dft_length", &len);
  if (st) return st;
  if (!toplu__infer_has_input(ctx, 1)) len = x->dims[a];
  int onesided = toplu__node_attr_int(ctx->node, "onesided", 0) != 0;
  if (onesided && toplu__node_attr_int(ctx->node, "inverse", 0))
    return toplu__infer_error(ctx, TOPLU_ERR_INVALID_MODEL, "onesided and inverse cannot both be set");
  if (toplu__infer_has_input(ctx, 1) && len < 0) len = toplu__infer_new_dim(ctx);
  else if (len >= 0 && onesided) len = len / 2 + 1;
  else if (len < 0 && onesided) len = toplu__infer_new_dim(ctx);
  int64_t dims[TOPLU_MAX_DIMS];
  memcpy(dims, x->dims, sizeof dims);
  dims[a] = len;
  dims[r - 1] = 2;
  toplu__infer_set(ctx, 0, x->dtype, r, dims);
  return TOPLU_OK;
}

static toplu_status_t infer_stft(toplu__infer_ctx_t *ctx) {
  const toplu_tensor_t *x = &ctx->in[0];
  if (!is_float(x->dtype))
    return toplu__infer_error(ctx, TOPLU_ERR_UNSUPPORTED, "signal is %s; expected a float type", toplu_dtype_name(x->dtype));
  if (x->ndim != 3 || (x->dims[2] >= 0 && x->dims[2] != 1 && x->dims[2] != 2))
    return toplu__infer_error(ctx, TOPLU_ERR_SHAPE, "signal must be [batch, length, 1 or 2]");
  int64_t step, flen;
  toplu_status_t st;
  if ((st = int_scalar(ctx, 1, "frame_step", &step)) || (st = int_scalar(ctx, 3, "frame_length", &flen))) return st;
  if (toplu__infer_has_input(ctx, 2)) {
    const toplu_tensor_t *w = &ctx->in[2];
    if (w->ndim != 1) return toplu__infer_error(ctx, TOPLU_ERR_SHAPE, "window must be 1-D");
    if (flen >= 0 && w->dims[0] >= 0 && flen != w->dims[0])
      return toplu__infer_error(ctx, TOPLU_ERR_SHAPE, "frame_length %lld and a window of %lld", (long long)flen,
                               (long long)w->dims[0]);
    if (!toplu__infer_has_input(ctx, 3)) flen = w->dims[0];
  } else if (!toplu__infer_has_input(ctx, 3)) {
    return toplu__infer_error(ctx, TOPLU_ERR_INVALID_MODEL, "STFT needs a window or a frame_length");
  }
  int onesided = toplu__node_attr_int(ctx->node, "onesided", 1) != 0;
  int64_t dims[4] = {x->dims[0], -1, -1, 2};
  if (step == 0) return toplu__infer_error(ctx, TOPLU_ERR_INVALID_MODEL, "frame_step is 0");
  if (step > 0 && flen > 0 && x->dims[1] >= 0) {
    if (flen > x->dims[1])
      return toplu__infer_error(ctx, TOPLU_ERR_SHAPE, "frame_length %lld is longer than the signal (%lld)",
                               (long long)flen, (long long)x->dims[1]);
    dims[1] = 1 + (x->dims[1] - flen) / step;
  } else {
    dims[1] = toplu__infer_new_dim(ctx);
  }
  dims[2] = flen >= 0 ? (onesided ? flen / 2 + 1 : flen) : toplu__infer_new_dim(ctx);
  toplu__infer_set(ctx, 0, x->dtype, 4, dims);
  return TOPLU_OK;
}

static toplu_status_t infer_mel(toplu__infer_ctx_t *ctx) {
  toplu_dtype_t dt = TOPLU_DTYPE_FLOAT;
  int64_t bins, dft, rate;
  toplu_status_t st;
  if ((st = out_datatype(ctx, &dt)) || (st = int_scalar(ctx, 0, "num_mel_bins", &bins)) ||
      (st = int_scalar(ctx, 1, "dft_length", &dft)) || (st = int_scalar(ctx, 2, "sample_rate", &rate)))
    return st;
  for (int i = 3; i < 5; i++)
    if (!is_float(ctx->in[i].dtype) || ctx->in[i].ndim > 1)
      return toplu__infer_error(ctx, TOPLU_ERR_INVALID_MODEL, "input %d must be a float scalar", i);
  if (rate == 0) return toplu__infer_error(ctx, TOPLU_ERR_INVALID_MODEL, "sample_rate is 0");
  int64_t dims[2] = {dft >= 0 ? dft / 2 + 1 : toplu__infer_new_dim(ctx), bins >= 0 ? bins : toplu__infer_new_dim(ctx)};
  toplu__infer_set(ctx, 0, dt, 2, dims);
  return TOPLU_OK;
}

static int rows_always(const toplu__node_t *n, const void *t) {
  (void)n, (void)t;
  return 1;
}

/* Multiply-adds of the plain DFT: 8 per input sample per output bin. */
static int64_t flops_dft(const toplu__infer_ctx_t *ctx) {
  const toplu_tensor_t *y = &ctx->out[0];
  int64_t a = toplu__node_attr_int(ctx->node, "axis", 1);
  if (a < 0) a += y->ndim;
  int64_t n = a >= 0 && a < y->ndim ? y->dims[a] : 1;
  return 8 * toplu_tensor_numel(y) / 2 * n;
}

static int64_t flops_stft(const toplu__infer_ctx_t *ctx) {
  const toplu_tensor_t *y = &ctx->out[0];
  return 8 * toplu_tensor_numel(y) / 2 * (y->ndim == 4 ? 2 * (y->dims[2] - 1) : 1);
}

const toplu__schema_t toplu__schemas_signal[] = {
    {"HannWindow", "", 17, 1, 1, 1, 1, 1u << 0, infer_window, NULL, NULL},
    {"HammingWindow", "", 17, 1, 1, 1, 1, 1u << 0, infer_window, NULL, NULL},
    {"BlackmanWindow", "", 17, 1, 1, 1, 1, 1u << 0, infer_window, NULL, NULL},
    {"DFT", "", 17, 1, 2, 1, 1, 1u << 1, infer_dft, flops_dft, NULL},
    {"STFT", "", 17, 2, 4, 1, 1, (1u << 1) | (1u << 3), infer_stft, flops_stft, NULL},
    {"MelWeightMatrix", "", 17, 5, 5, 1, 1, 0x1Fu, infer_mel, NULL, rows_always},
    {NULL, NULL, 0, 0, 0, 0, 0, 0, NULL, NULL, NULL},
};
