/*
 * ops/vision.c - image-sampling kernels (ONNX operator spec,
 * https://onnx.ai/onnx/operators/; shapes in graph/schema_vision.c, which
 * also computes NonMaxSuppression at plan time):
 *   GridSample-16: grid (x, y) in [-1, 1] mapped to pixels (align_corners:
 *     -1 and 1 are the corner pixels' centres, else their outer edges);
 *     bilinear, nearest (round half to even) or bicubic (A = -0.75, 4x4
 *     taps); padding zeros (outside pixels read 0), border (coordinates
 *     clamped) or reflection (coordinates reflected at the borders, then
 *     clamped).  Bicubic applies the padding to each tap's integer
 *     coordinate, as PyTorch's grid_sample (whose results the ONNX tests
 *     hold) does;
 *   RoiAlign-10/16: per output bin, sampling_ratio^2 (or ceil(roi size /
 *     bins)^2) bilinear samples averaged (avg) or their largest weighted
 *     corner (max, as ONNX Runtime); half_pixel shifts the roi by -0.5
 *     pixel, output_half_pixel (opset 10's behaviour) does not and makes
 *     rois at least 1x1;
 *   MaxUnpool-9/11: zeros, then X[k] written where I[k] points in the unpooled
 *     shape (kept at its coordinates in a larger output_shape).
 */
#include <math.h>
#include <string.h>

#include "ops/elem_io.h"
#include "ops/kernel.h"

static toplu_status_t prepare_float(toplu__kernel_ctx_t *ctx, toplu__kernel_info_t *info) {
  (void)info;
  if (!toplu__is_float_dtype(ctx->in[0].dtype))
    return toplu__kernel_error(ctx, TOPLU_ERR_UNSUPPORTED, "%s on %s tensors is not supported", ctx->node->op_type,
                              toplu_dtype_name(ctx->in[0].dtype));
  return TOPLU_OK;
}

/* ---- GridSample ---- */

enum { PAD_ZEROS, PAD_BORDER, PAD_REFLECT };
enum { GS_BILINEAR, GS_NEAREST, GS_BICUBIC };

/* Reflect c into [lo, hi] (lo < hi); lo == hi gives lo. */
static double reflect(double c, double lo, double hi) {
  if (hi <= lo) return lo;
  double span = hi - lo, v = fabs(c - lo), extra = fmod(v, span);
  int flips = (int)fmod(floor(v / span), 2.0);
  return flips == 0 ? lo + extra : hi - extra;
}

static double clampd(double v, double lo, double hi) { return v < lo ? lo : v > hi ? hi : v; }

/* Padding applied to a pixel coordinate along a side of n pixels. */
static double pad_coord(double c, int64_t n, int pad, int align) {
  if (pad == PAD_BORDER) return clampd(c, 0, (double)(n - 1));
  if (pad == PAD_REFLECT) {
    c = align ? reflect(c, 0, (double)(n - 1)) : reflect(c, -0.5, (double)n - 0.5);
    return clampd(c, 0, (double)(n - 1));
  }
  return c;
}

/* Pixel (y, x) of a plane, 0 outside. */
static double pixel(const toplu_tensor_t *x, int64_t base, int64_t h, int64_t w, int64_t yi, int64_t xi) {
  if (yi < 0 || yi >= h || xi < 0 || xi >= w) return 0;
  return toplu__tensor_get_double(x, base + yi * w + xi);
}

/* A pixel index from a coordinate, saturated just outside [0, n) (no
 * undefined conversions for huge or NaN grid values). */
static int64_t idx_of(double v, int64_t n) {
  if (!(v >= -2)) return -2;
  if (v > (double)n + 1) return n + 1;
  return (int64_t)v;
}

static double cubic(double t, int k) { /* weight of tap k (0..3) at fraction t */
  const double a = -0.75;
  double d = k == 0 ? t + 1 : k == 1 ? t : k == 2 ? 1 - t : 2 - t;
  return d <= 1 ? ((a + 2) * d - (a + 3)) * d * d + 1 : ((a * d - 5 * a) * d + 8 * a) * d - 4 * a;
}

static toplu_status_t run_grid_sample(toplu__kernel_ctx_t *ctx) {
  const toplu_tensor_t *x = &ctx->in[0], *g = &ctx->in[1];
  toplu_tensor_t *y = &ctx->out[0];
  const char *ms = toplu__node_attr_string(ctx->node, "mode", "bilinear");
  const char *ps = toplu__node_attr_string(ctx->node, "padding_mode", "zeros");
  const int mode = !strcmp(ms, "nearest") ? GS_NEAREST : !strcmp(ms, "bicubic") ? GS_BICUBIC : GS_BILINEAR;
  const int pad = !strcmp(ps, "border") ? PAD_BORDER : !strcmp(ps, "reflection") ? PAD_REFLECT : PAD_ZEROS;
  const int align = toplu__node_attr_int(ctx->node, "align_corners", 0) != 0;
  const int64_t nb = x->dims[0], nc = x->dims[1], h = x->dims[2], w = x->dims[3], oh = y->dims[2], ow = y->dims[3];
  for (int64_t n = 0; n < nb; n++)
    for (int64_t p = 0; p < oh * ow; p++) {
      double gx = toplu__tensor_get_double(g, (n * oh * ow + p) * 2), gy = toplu__tensor_get_double(g, (n * oh * ow + p) * 2 + 1);
      double fx = align ? (gx + 1) / 2 * (double)(w - 1) : ((gx + 1) * (double)w - 1) / 2;
      double fy = align ? (gy + 1) / 2 * (double)(h - 1) : ((gy + 1) * (double)h - 1) / 2;
      if (mode != GS_BICUBIC) fx = pad_coord(fx, w, pad, align), fy = pad_coord(fy, h, pad, align);
      for (int64_t c = 0; c < nc; c++) {
        const int64_t base = (n * nc + c) * h * w;
        double v = 0;
        if (mode == GS_NEAREST) {
          v = pixel(x, base, h, w, idx_of(nearbyint(fy), h), idx_of(nearbyint(fx), w));
        } else if (mode == GS_BILINEAR) {
          double x0 = floor(fx), y0 = floor(fy), tx = fx - x0, ty = fy - y0;
          int64_t xi = idx_of(x0, w), yi = idx_of(y0, h);
          v = (1 - ty) * ((1 - tx) * pixel(x, base, h, w, yi, xi) + tx * pixel(x, base, h, w, yi, xi + 1)) +
              ty * ((1 - tx) * pixel(x, base, h, w, yi + 1, xi) + tx * pixel(x, base, h, w, yi + 1, xi + 1));
        } else {
          double x0 = floor(fx), y0 = floor(fy), tx = fx - x0, ty = fy - y0;
          for (int j = 0; j < 4; j++) {
            double row = 0;
            for (int i = 0; i < 4; i++) {
              double cx = pad_coord(x0 - 1 + i, w, pad, align), cy = pad_coord(y0 - 1 + j, h, pad, align);
              row += cubic(tx, i) * pixel(x, base, h, w, idx_of(cy, h), idx_of(cx, w));
            }
            v += cubic(ty, j) * row;
          }
        }
        toplu__store_double(y, (n * nc + c) * oh * ow + p, v);
      }
    }
  return TOPLU_OK;
}

/* ---- RoiAlign ---- */

static toplu_status_t run_roi_align(toplu__kernel_ctx_t *ctx) {
  const toplu_tensor_t *x = &ctx->in[0], *rois = &ctx->in[1], *bi = &ctx->in[2];
  toplu_tensor_t *y = &ctx->out[0];
  const toplu__node_t *nd = ctx->node;
  const int half = nd->opset >= 16 &&
                   !strcmp(toplu__node_attr_string(nd, "coordinate_transformation_mode", "half_pixel"), "half_pixel");
  const int maxm = !strcmp(toplu__node_attr_string(nd, "mode", "avg"), "max");
  const double scale = toplu__node_attr_float(nd, "spatial_scale", 1.0f), off = half ? 0.5 : 0;
  const int64_t ratio = toplu__node_attr_int(nd, "sampling_ratio", 0);
  const int64_t nb = x->dims[0], nc = x->dims[1], h = x->dims[2], w = x->dims[3];
  const int64_t nr = y->dims[0], oh = y->dims[2], ow = y->dims[3];
  for (int64_t r = 0; r < nr; r++) {
    int64_t b = toplu__tensor_get_int(bi, r);
    if (b < 0 || b >= nb)
      return toplu__kernel_error(ctx, TOPLU_ERR_INVALID_ARGUMENT, "batch_indices[%lld] = %lld is not a batch of X",
                                (long long)r, (long long)b);
    double x1 = toplu__tensor_get_double(rois, 4 * r) * scale - off, y1 = toplu__tensor_get_double(rois, 4 * r + 1) * scale - off;
    double x2 = toplu__tensor_get_double(rois, 4 * r + 2) * scale - off, y2 = toplu__tensor_get_double(rois, 4 * r + 3) * scale - off;
    double rw = x2 - x1, rh = y2 - y1;
    if (!half) rw = fmax(rw, 1.0), rh = fmax(rh, 1.0);
    const double bh = rh / (double)oh, bw = rw / (double)ow;
    const int64_t gh = ratio > 0 ? ratio : (int64_t)ceil(rh / (double)oh), gw = ratio > 0 ? ratio : (int64_t)ceil(rw / (double)ow);
    const double count = (double)(gh * gw > 1 ? gh * gw : 1);
    for (int64_t c = 0; c < nc; c++) {
      const int64_t base = (b * nc + c) * h * w;
      for (int64_t ph = 0; ph < oh; ph++)
        for (int64_t pw = 0; pw < ow; pw++) {
          double acc = 0;
          int any = 0;
          for (int64_t iy = 0; iy < gh; iy++)
            for (int64_t ix = 0; ix < gw; ix++) {
              double yy = y1 + (double)ph * bh + ((double)iy + 0.5) * bh / (double)gh;
              double xx = x1 + (double)pw * bw + ((double)ix + 0.5) * bw / (double)gw;
              double s = 0;
              if (!(yy < -1.0 || yy > (double)h || xx < -1.0 || xx > (double)w)) {
                yy = fmax(yy, 0), xx = fmax(xx, 0);
                int64_t yl = (int64_t)yy, xl = (int64_t)xx, yh, xh;
                if (yl >= h - 1) yh = yl = h - 1, yy = (double)yl;
                else yh = yl + 1;
                if (xl >= w - 1) xh = xl = w - 1, xx = (double)xl;
                else xh = xl + 1;
                double ly = yy - (double)yl, lx = xx - (double)xl, hy = 1 - ly, hx = 1 - lx;
                double v1 = hy * hx * pixel(x, base, h, w, yl, xl), v2 = hy * lx * pixel(x, base, h, w, yl, xh);
                double v3 = ly * hx * pixel(x, base, h, w, yh, xl), v4 = ly * lx * pixel(x, base, h, w, yh, xh);
                s = maxm ? fmax(fmax(v1, v2), fmax(v3, v4)) : v1 + v2 + v3 + v4;
              }
              if (maxm) acc = any ? fmax(acc, s) : s;
              else acc += s;
              any = 1;
            }
          toplu__store_double(y, ((r * nc + c) * oh + ph) * ow + pw, maxm ? acc : acc / count);
        }
    }
  }
  return TOPLU_OK;
}

/* ---- MaxUnpool ---- */

/* The output MaxPool's indices refer to: [N, C, (d - 1) * stride + kernel -
 * pads]; with an output_shape input the output is larger and each index
 * keeps its coordinates in this shape (state: int64 dims[rank]). */
static toplu_status_t prepare_max_unpool(toplu__kernel_ctx_t *ctx, toplu__kernel_info_t *info) {
  toplu_status_t st = prepare_float(ctx, info);
  if (st) return st;
  const toplu_tensor_t *x = &ctx->in[0];
  const int r = x->ndim, sp = r - 2;
  int64_t k[TOPLU_MAX_DIMS], s[TOPLU_MAX_DIMS], p[2 * TOPLU_MAX_DIMS], found;
  int64_t *dims = toplu__kernel_alloc(ctx, (size_t)r * sizeof *dims);
  if (!dims) return toplu__kernel_error(ctx, TOPLU_ERR_OUT_OF_MEMORY, "out of memory");
  ctx->state = dims;
  info->state_bytes = (size_t)r * sizeof *dims;
  if (!toplu__node_attr_ints_n(ctx->node, "kernel_shape", sp, 0, k, &found) ||
      !toplu__node_attr_ints_n(ctx->node, "strides", sp, 1, s, &found) ||
      !toplu__node_attr_ints_n(ctx->node, "pads", 2 * sp, 0, p, &found))
    return toplu__kernel_error(ctx, TOPLU_ERR_INVALID_MODEL, "kernel_shape, strides or pads has the wrong length");
  dims[0] = x->dims[0];
  dims[1] = x->dims[1];
  for (int d = 0; d < sp; d++) {
    dims[d + 2] = (x->dims[d + 2] - 1) * s[d] + k[d] - p[d] - p[d + sp];
    if (dims[d + 2] > ctx->out[0].dims[d + 2])
      return toplu__kernel_error(ctx, TOPLU_ERR_SHAPE, "output_shape dim %d (%lld) is below the unpooled size %lld", d + 2,
                                (long long)ctx->out[0].dims[d + 2], (long long)dims[d + 2]);
  }
  return TOPLU_OK;
}

static void release_state(toplu__kernel_ctx_t *ctx) { toplu__kernel_free(ctx, ctx->state); }

static toplu_status_t run_max_unpool(toplu__kernel_ctx_t *ctx) {
  const toplu_tensor_t *x = &ctx->in[0], *ix = &ctx->in[1];
  toplu_tensor_t *y = &ctx->out[0];
  const int64_t *dims = ctx->state;
  const int r = y->ndim;
  const int64_t n = toplu_tensor_numel(x), nd = toplu__dims_prod(dims, 0, r);
  const size_t es = toplu_dtype_size(y->dtype);
  memset(y->data, 0, toplu_tensor_nbytes(y));
  for (int64_t k = 0; k < n; k++) {
    int64_t i = toplu__tensor_get_int(ix, k);
    if (i < 0 || i >= nd)
      return toplu__kernel_error(ctx, TOPLU_ERR_INVALID_ARGUMENT, "index %lld (at %lld) is outside the %lld unpooled elements",
                                (long long)i, (long long)k, (long long)nd);
    int64_t off = 0, str = 1, rem = i;
    for (int d = r - 1; d >= 0; d--) {
      off += rem % dims[d] * str;
      rem /= dims[d];
      str *= y->dims[d];
    }
    memcpy((unsigned char *)y->data + (size_t)off * es, (const unsigned char *)x->data + (size_t)k * es, es);
  }
  return TOPLU_OK;
}

const toplu__kernel_t toplu__kernels_vision[] = {
    {"GridSample", "", prepare_float, run_grid_sample, NULL, 0, NULL, NULL, NULL},
    {"RoiAlign", "", prepare_float, run_roi_align, NULL, 0, NULL, NULL, NULL},
    {"MaxUnpool", "", prepare_max_unpool, run_max_unpool, release_state, 0, NULL, NULL, NULL},
    {NULL, NULL, NULL, NULL, NULL, 0, NULL, NULL, NULL},
};
