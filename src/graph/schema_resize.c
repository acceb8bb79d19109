/*
 * graph/schema_resize.c - schemas of Resize-10/11/13/18/19 and Upsample-7/9.
 *
 * Inputs by position (an empty name is an absent input, and an input with
 * zero elements counts as absent too):
 *   Resize-10      X, scales
 *   Resize-11..19  X, roi, scales, sizes  (exactly one of scales and sizes)
 *   Upsample-7     X, attribute `scales`;  Upsample-9: X, scales
 * Output dims: floor(in * scale) when scales are given, `sizes` otherwise
 * (the spec's text multiplies by roi_end - roi_start for tf_crop_and_resize;
 * ONNX's shape inference, its reference implementation and ONNX Runtime do
 * not, and neither does toplu); from opset 18
 * `axes` names the axes scales/sizes/roi refer to and `keep_aspect_ratio_policy`
 * (not_larger / not_smaller) turns sizes into one scale for all those axes.
 * roi, scales and sizes must be constants at plan time.
 *
 * toplu__resize_params() is shared with the kernel (ops/resize.c), which builds
 * its interpolation tables from the same scales and roi.
 */
#include <math.h>
#include <string.h>

#include "graph/schema_resize.h"

static const char *const resize_modes[] = {"nearest", "linear", "cubic", NULL};
static const char *const coord_modes[] = {"half_pixel", "half_pixel_symmetric", "pytorch_half_pixel", "align_corners",
                                          "asymmetric", "tf_half_pixel_for_nn", "tf_crop_and_resize", NULL};
static const char *const nearest_modes[] = {"round_prefer_floor", "round_prefer_ceil", "floor", "ceil", NULL};
static const char *const aspect_policies[] = {"stretch", "not_larger", "not_smaller", NULL};

/* Index of s in a NULL-terminated list, or -1. */
static int find_word(const char *const *list, const char *s) {
  for (int i = 0; list[i]; i++)
    if (!strcmp(list[i], s)) return i;
  return -1;
}

/* Input i is given and not an empty (0-element) tensor. */
static int present(const toplu__infer_ctx_t *ctx, int i) {
  if (!toplu__infer_has_input(ctx, i)) return 0;
  const toplu_tensor_t *t = &ctx->in[i];
  for (int k = 0; k < t->ndim; k++)
    if (t->dims[k] == 0) return 0;
  return 1;
}

/* Check the string attributes against what the op version allows. */
static toplu_status_t check_attrs(toplu__infer_ctx_t *ctx, int upsample, int64_t opset) {
  const toplu__node_t *n = ctx->node;
  const char *mode = toplu__node_attr_string(n, "mode", "nearest");
  int m = find_word(resize_modes, mode);
  if (upsample && !strcmp(mode, "bilinear")) m = 1;
  if (m < 0 || ((upsample || opset < 11) && m == 2))
    return toplu__infer_error(ctx, TOPLU_ERR_INVALID_MODEL, "mode '%s' is not one of nearest, linear%s", mode,
                             upsample || opset < 11 ? "" : ", cubic");
  if (upsample || opset < 11) return TOPLU_OK;
  const char *cm = toplu__node_attr_string(n, "coordinate_transformation_mode", "half_pixel");
  int c = find_word(coord_modes, cm);
  if (c < 0 || (c == 1 && opset < 19))
    return toplu__infer_error(ctx, TOPLU_ERR_INVALID_MODEL, "unknown coordinate_transformation_mode '%s'", cm);
  const char *nm = toplu__node_attr_string(n, "nearest_mode", "round_prefer_floor");
  if (find_word(nearest_modes, nm) < 0)
    return toplu__infer_error(ctx, TOPLU_ERR_INVALID_MODEL, "unknown nearest_mode '%s'", nm);
  const char *kp = toplu__node_attr_string(n, "keep_aspect_ratio_policy", "stretch");
  if (find_word(aspect_policies, kp) < 0)
    return toplu__infer_error(ctx, TOPLU_ERR_INVALID_MODEL, "unknown keep_aspect_ratio_policy '%s'", kp);
  return TOPLU_OK;
}

/* Check a 1-D parameter tensor of `want` elements (want < 0: unknown). */
static toplu_status_t check_vector(toplu__infer_ctx_t *ctx, int i, const char *what, int64_t want) {
  const toplu_tensor_t *t = &ctx->in[i];
  if (t->ndim != 1)
    return toplu__infer_error(ctx, TOPLU_ERR_INVALID_MODEL, "%s must be 1-D (rank %d)", what, t->ndim);
  if (t->dims[0] >= 0 && t->dims[0] != want)
    return toplu__infer_error(ctx, TOPLU_ERR_SHAPE, "%s has %lld elements; %lld expected", what, (long long)t->dims[0],
                             (long long)want);
  return TOPLU_OK;
}

/*
 * Resize/Upsample parameters for ctx's node: out_dims (symbols or fresh dims
 * at load where values are unknown), the scale of each axis for the
 * coordinate transform (1 for axes not resized; out/in when sizes are given),
 * roi start/end per axis (0 and 1 unless roi applies), and *known = 1 when
 * the scales or sizes had values.  Errors name the node and the input.
 */
toplu_status_t toplu__resize_params(toplu__infer_ctx_t *ctx, int64_t *out_dims, double *scales, double *roi_start,
                                   double *roi_end, int *known) {
  const toplu__node_t *n = ctx->node;
  const toplu_tensor_t *x = &ctx->in[0];
  int upsample = !strcmp(n->op_type, "Upsample");
  int64_t opset = n->opset > 0 ? n->opset : 1000;
  int rank = x->ndim;
  toplu_status_t st = check_attrs(ctx, upsample, opset);
  if (st) return st;
  for (int d = 0; d < rank; d++) out_dims[d] = x->dims[d], scales[d] = 1.0, roi_start[d] = 0.0, roi_end[d] = 1.0;
  *known = 1;

  /* Which inputs (or attribute) hold scales, sizes and roi. */
  int i_roi = -1, i_scales = -1, i_sizes = -1;
  const float *attr_scales = NULL;
  if (upsample && opset < 9) {
    int64_t cnt = toplu__node_attr_floats(n, "scales", &attr_scales);
    if (cnt < 0) return toplu__infer_error(ctx, TOPLU_ERR_INVALID_MODEL, "Upsample-7 needs the scales attribute");
    if (cnt != rank)
      return toplu__infer_error(ctx, TOPLU_ERR_SHAPE, "scales has %lld values for a rank-%d input", (long long)cnt, rank);
  } else if (upsample || opset < 11) {
    if (!toplu__infer_has_input(ctx, 1) || ctx->n_in > 2)
      return toplu__infer_error(ctx, TOPLU_ERR_INVALID_MODEL, "%s-%lld takes exactly the inputs X and scales",
                               n->op_type, (long long)opset);
    i_scales = 1;
  } else {
    if (present(ctx, 1)) i_roi = 1;
    if (present(ctx, 2)) i_scales = 2;
    if (present(ctx, 3)) i_sizes = 3;
    if ((i_scales < 0) == (i_sizes < 0))
      return toplu__infer_error(ctx, TOPLU_ERR_INVALID_MODEL, "exactly one of scales and sizes must be given (%s)",
                               i_scales < 0 ? "neither is" : "both are");
  }

  /* axes (opset 18): the axes scales, sizes and roi refer to. */
  int axes[TOPLU_MAX_DIMS], n_ax = rank;
  for (int d = 0; d < rank; d++) axes[d] = d;
  const int64_t *av = NULL;
  int64_t na = !upsample && opset >= 18 ? toplu__node_attr_ints(n, "axes", &av) : -1;
  if (na >= 0) {
    if (na > rank)
      return toplu__infer_error(ctx, TOPLU_ERR_INVALID_MODEL, "axes has %lld entries for a rank-%d input", (long long)na,
                               rank);
    uint8_t seen[TOPLU_MAX_DIMS] = {0};
    for (int64_t i = 0; i < na; i++) {
      st = toplu__infer_axis(ctx, av[i], rank, "axes entry", &axes[i]);
      if (st) return st;
      if (seen[axes[i]]++)
        return toplu__infer_error(ctx, TOPLU_ERR_INVALID_MODEL, "axis %d is listed twice in axes", axes[i]);
    }
    n_ax = (int)na;
  }

  const char *cm = upsample || opset < 11 ? "asymmetric"
                                          : toplu__node_attr_string(n, "coordinate_transformation_mode", "half_pixel");
  int crop = !strcmp(cm, "tf_crop_and_resize");
  if (crop && i_roi >= 0) {
    st = check_vector(ctx, i_roi, "roi", 2 * (int64_t)n_ax);
    if (st) return st;
    const toplu_tensor_t *r = &ctx->in[i_roi];
    if (r->dtype != TOPLU_DTYPE_FLOAT && r->dtype != TOPLU_DTYPE_DOUBLE && r->dtype != TOPLU_DTYPE_FLOAT16)
      return toplu__infer_error(ctx, TOPLU_ERR_INVALID_MODEL, "roi must be a float tensor (it is %s)",
                               toplu_dtype_name(r->dtype));
    if (r->data) {
      for (int i = 0; i < n_ax; i++) {
        roi_start[axes[i]] = toplu__tensor_get_double(r, i);
        roi_end[axes[i]] = toplu__tensor_get_double(r, n_ax + i);
      }
    }
  }

  if (attr_scales || i_scales >= 0) {
    const toplu_tensor_t *s = i_scales >= 0 ? &ctx->in[i_scales] : NULL;
    if (s) {
      st = check_vector(ctx, i_scales, "scales", n_ax);
      if (st) return st;
      if (s->dtype != TOPLU_DTYPE_FLOAT && s->dtype != TOPLU_DTYPE_DOUBLE && s->dtype != TOPLU_DTYPE_FLOAT16)
        return toplu__infer_error(ctx, TOPLU_ERR_INVALID_MODEL, "scales must be a float tensor (it is %s)",
                                 toplu_dtype_name(s->dtype));
      if (!s->data) *known = 0;
    }
    for (int i = 0; i < n_ax; i++) {
      int d = axes[i];
      if (!*known) {
        out_dims[d] = toplu__infer_new_dim(ctx);
        continue;
      }
      double sc = s ? toplu__tensor_get_double(s, i) : attr_scales[i];
      if (!(sc > 0.0) || !isfinite(sc))
        return toplu__infer_error(ctx, TOPLU_ERR_INVALID_MODEL, "scales[%d] = %g must be positive", i, sc);
      scales[d] = sc;
      if (x->dims[d] < 0) {
        out_dims[d] = sc == 1.0 ? x->dims[d] : toplu__infer_new_dim(ctx);
      } else {
        /* float arithmetic, as ONNX's shape inference does */
        float o = floorf((float)x->dims[d] * (float)sc);
        if (!(o >= 0.0f) || o > 9.0e15f)
          return toplu__infer_error(ctx, TOPLU_ERR_INVALID_MODEL, "axis %d: output size %g is out of range", d, o);
        out_dims[d] = (int64_t)o;
      }
    }
    return TOPLU_OK;
  }

  /* sizes */
  const toplu_tensor_t *z = &ctx->in[i_sizes];
  st = check_vector(ctx, i_sizes, "sizes", n_ax);
  if (st) return st;
  if (z->dtype != TOPLU_DTYPE_INT64)
    return toplu__infer_error(ctx, TOPLU_ERR_INVALID_MODEL, "sizes must be int64 (it is %s)", toplu_dtype_name(z->dtype));
  const char *kp = opset >= 18 ? toplu__node_attr_string(n, "keep_aspect_ratio_policy", "stretch") : "stretch";
  int policy = find_word(aspect_policies, kp);
  int dims_known = 1;
  for (int i = 0; i < n_ax; i++)
    if (x->dims[axes[i]] < 0) dims_known = 0;
  if (!z->data || (policy > 0 && !dims_known)) {
    *known = 0;
    for (int i = 0; i < n_ax; i++) out_dims[axes[i]] = toplu__infer_new_dim(ctx);
    return TOPLU_OK;
  }
  for (int i = 0; i < n_ax; i++)
    if (toplu__tensor_get_int(z, i) < 0)
      return toplu__infer_error(ctx, TOPLU_ERR_INVALID_MODEL, "sizes[%d] = %lld is negative", i,
                               (long long)toplu__tensor_get_int(z, i));
  if (policy > 0) {
    double sc = policy == 1 ? INFINITY : 0.0;
    for (int i = 0; i < n_ax; i++) {
      int64_t in = x->dims[axes[i]];
      if (in == 0) continue;
      double r = (double)toplu__tensor_get_int(z, i) / (double)in;
      sc = policy == 1 ? (r < sc ? r : sc) : (r > sc ? r : sc);
    }
    if (!isfinite(sc) || sc <= 0.0)
      return toplu__infer_error(ctx, TOPLU_ERR_INVALID_MODEL, "keep_aspect_ratio_policy gives no usable scale");
    for (int i = 0; i < n_ax; i++) {
      int d = axes[i];
      scales[d] = sc;
      double o = floor(sc * (double)x->dims[d] + 0.5);
      if (!(o >= 0.0) || o > 9.0e15) /* converting 2^63 or more to int64 is undefined */
        return toplu__infer_error(ctx, TOPLU_ERR_INVALID_MODEL, "axis %d: output size %g is out of range", d, o);
      out_dims[d] = (int64_t)o;
    }
    return TOPLU_OK;
  }
  for (int i = 0; i < n_ax; i++) {
    int d = axes[i];
    out_dims[d] = toplu__tensor_get_int(z, i);
    if (x->dims[d] > 0) scales[d] = (double)out_dims[d] / (double)x->dims[d];
  }
  return TOPLU_OK;
}

/* Resize / Upsample: X's type, rank and the dims above. */
static toplu_status_t infer_resize(toplu__infer_ctx_t *ctx) {
  const toplu_tensor_t *x = &ctx->in[0];
  if (x->ndim < 1)
    return toplu__infer_error(ctx, TOPLU_ERR_INVALID_MODEL, "X must have rank 1 or more (rank %d)", x->ndim);
  int64_t dims[TOPLU_MAX_DIMS];
  double sc[TOPLU_MAX_DIMS], r0[TOPLU_MAX_DIMS], r1[TOPLU_MAX_DIMS];
  int known;
  toplu_status_t st = toplu__resize_params(ctx, dims, sc, r0, r1, &known);
  if (st) return st;
  if (ctx->concrete && !known)
    return toplu__infer_error(ctx, TOPLU_ERR_UNSUPPORTED, "scales, sizes or roi are not known at plan time");
  toplu__infer_set(ctx, 0, x->dtype, x->ndim, dims);
  return TOPLU_OK;
}

/* Multiply-adds per output element: 1 tap (nearest), 2 (linear) or 4 (cubic)
 * per resized axis. */
static int64_t flops_resize(const toplu__infer_ctx_t *ctx) {
  const toplu_tensor_t *x = &ctx->in[0], *y = &ctx->out[0];
  int64_t n = 1;
  int resized = 0;
  for (int d = 0; d < y->ndim; d++) {
    n *= y->dims[d];
    if (d < x->ndim && x->dims[d] != y->dims[d]) resized++;
  }
  const char *mode = toplu__node_attr_string(ctx->node, "mode", "nearest");
  if (!strcmp(mode, "nearest")) return n;
  return n * 2 * (!strcmp(mode, "cubic") ? 4 : 2) * (resized ? resized : 1);
}

const toplu__schema_t toplu__schemas_resize[] = {
    {"Resize", "", 10, 1, 4, 1, 1, 0xEu, infer_resize, flops_resize, NULL},
    {"Upsample", "", 7, 1, 2, 1, 1, 0x2u, infer_resize, flops_resize, NULL},
    {NULL, NULL, 0, 0, 0, 0, 0, 0, NULL, NULL, NULL},
};
