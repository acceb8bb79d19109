/*
 * graph/schema_vision.c - schemas of the detection and image-sampling ops
 * (ONNX operator spec, https://onnx.ai/onnx/operators/):
 *   GridSample-16: X [N, C, H, W], grid [N, Ho, Wo, 2] -> [N, C, Ho, Wo];
 *   RoiAlign-10/16: X [N, C, H, W], rois [R, 4], batch_indices [R] ->
 *     [R, C, output_height, output_width];
 *   MaxUnpool-9/11: X and I [N, C, d..] -> [N, C, (d - 1) * stride + kernel
 *     - pads], or the output_shape input (a const input);
 *   NonMaxSuppression-10/11: selected_indices [num_selected, 3] int64.  Its
 *     length depends on every input's values, so all are const_inputs and
 *     infer computes the result itself (toplu__infer_set_const, as Shape
 *     does); the node never reaches a kernel.  Greedy selection per batch
 *     and class: boxes with score > score_threshold, highest score first
 *     (equal scores in box order), dropping those whose IoU with a kept box
 *     is > iou_threshold, at most max_output_boxes_per_class (0: none);
 *     center_point_box 0 reads [y1, x1, y2, x2] corners in either order, 1
 *     reads [x_center, y_center, width, height].
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "graph/schema.h"

static int is_float(toplu_dtype_t dt) {
  return dt == TOPLU_DTYPE_FLOAT || dt == TOPLU_DTYPE_DOUBLE || dt == TOPLU_DTYPE_FLOAT16;
}

static int rows_always(const toplu__node_t *n, const void *t) {
  (void)n, (void)t;
  return 1;
}

/* ---- GridSample ---- */

static toplu_status_t infer_grid_sample(toplu__infer_ctx_t *ctx) {
  const toplu_tensor_t *x = &ctx->in[0], *g = &ctx->in[1];
  if (!is_float(x->dtype) || !is_float(g->dtype))
    return toplu__infer_error(ctx, TOPLU_ERR_UNSUPPORTED, "X and grid must be float tensors");
  if (x->ndim != 4 || g->ndim != 4 || (g->dims[3] >= 0 && g->dims[3] != 2))
    return toplu__infer_error(ctx, TOPLU_ERR_SHAPE, "X must be [N, C, H, W] and grid [N, H_out, W_out, 2]");
  const char *mode = toplu__node_attr_string(ctx->node, "mode", "bilinear");
  const char *pad = toplu__node_attr_string(ctx->node, "padding_mode", "zeros");
  if (strcmp(mode, "bilinear") && strcmp(mode, "nearest") && strcmp(mode, "bicubic"))
    return toplu__infer_error(ctx, TOPLU_ERR_UNSUPPORTED, "mode '%s' is not supported", mode);
  if (strcmp(pad, "zeros") && strcmp(pad, "border") && strcmp(pad, "reflection"))
    return toplu__infer_error(ctx, TOPLU_ERR_UNSUPPORTED, "padding_mode '%s' is not supported", pad);
  if (x->dims[0] >= 0 && g->dims[0] >= 0 && x->dims[0] != g->dims[0])
    return toplu__infer_error(ctx, TOPLU_ERR_SHAPE, "X and grid have different batch sizes");
  int64_t dims[4] = {x->dims[0], x->dims[1], g->dims[1], g->dims[2]};
  toplu__infer_set(ctx, 0, x->dtype, 4, dims);
  return TOPLU_OK;
}

/* ---- RoiAlign ---- */

static toplu_status_t infer_roi_align(toplu__infer_ctx_t *ctx) {
  const toplu_tensor_t *x = &ctx->in[0], *r = &ctx->in[1], *b = &ctx->in[2];
  if (!is_float(x->dtype) || r->dtype != x->dtype)
    return toplu__infer_error(ctx, TOPLU_ERR_UNSUPPORTED, "X and rois must be float tensors of one type");
  if (b->dtype != TOPLU_DTYPE_INT64) return toplu__infer_error(ctx, TOPLU_ERR_INVALID_MODEL, "batch_indices must be int64");
  if (x->ndim != 4 || r->ndim != 2 || b->ndim != 1 || (r->dims[1] >= 0 && r->dims[1] != 4))
    return toplu__infer_error(ctx, TOPLU_ERR_SHAPE, "X must be [N, C, H, W], rois [R, 4], batch_indices [R]");
  const char *mode = toplu__node_attr_string(ctx->node, "mode", "avg");
  if (strcmp(mode, "avg") && strcmp(mode, "max")) return toplu__infer_error(ctx, TOPLU_ERR_INVALID_MODEL, "mode '%s'", mode);
  const char *ct = toplu__node_attr_string(ctx->node, "coordinate_transformation_mode", "half_pixel");
  if (strcmp(ct, "half_pixel") && strcmp(ct, "output_half_pixel"))
    return toplu__infer_error(ctx, TOPLU_ERR_INVALID_MODEL, "coordinate_transformation_mode '%s'", ct);
  int64_t oh = toplu__node_attr_int(ctx->node, "output_height", 1), ow = toplu__node_attr_int(ctx->node, "output_width", 1);
  if (oh < 1 || ow < 1 || toplu__node_attr_int(ctx->node, "sampling_ratio", 0) < 0)
    return toplu__infer_error(ctx, TOPLU_ERR_INVALID_MODEL, "output sizes must be positive, sampling_ratio >= 0");
  int64_t dims[4] = {r->dims[0], x->dims[1], oh, ow};
  toplu__infer_set(ctx, 0, x->dtype, 4, dims);
  return TOPLU_OK;
}

/* ---- MaxUnpool ---- */

static toplu_status_t infer_max_unpool(toplu__infer_ctx_t *ctx) {
  const toplu_tensor_t *x = &ctx->in[0], *ix = &ctx->in[1];
  if (!is_float(x->dtype)) return toplu__infer_error(ctx, TOPLU_ERR_UNSUPPORTED, "X must be a float tensor");
  if (ix->dtype != TOPLU_DTYPE_INT64) return toplu__infer_error(ctx, TOPLU_ERR_INVALID_MODEL, "I must be int64");
  int r = x->ndim, sp = r - 2;
  if (r < 3 || ix->ndim != r) return toplu__infer_error(ctx, TOPLU_ERR_SHAPE, "X and I must be [N, C, d..] alike");
  int64_t dims[TOPLU_MAX_DIMS];
  if (toplu__infer_has_input(ctx, 2)) {
    const toplu_tensor_t *s = &ctx->in[2];
    if (s->dtype != TOPLU_DTYPE_INT64 || s->ndim != 1 || (s->dims[0] >= 0 && s->dims[0] != r))
      return toplu__infer_error(ctx, TOPLU_ERR_INVALID_MODEL, "output_shape must be %d int64 values", r);
    for (int d = 0; d < r; d++) dims[d] = s->data ? toplu__tensor_get_int(s, d) : toplu__infer_new_dim(ctx);
    toplu__infer_set(ctx, 0, x->dtype, r, dims);
    return TOPLU_OK;
  }
  int64_t k[TOPLU_MAX_DIMS], st[TOPLU_MAX_DIMS], p[2 * TOPLU_MAX_DIMS];
  int64_t found;
  if (!toplu__node_attr(ctx->node, "kernel_shape") || !toplu__node_attr_ints_n(ctx->node, "kernel_shape", sp, 0, k, &found) ||
      !toplu__node_attr_ints_n(ctx->node, "strides", sp, 1, st, &found) ||
      !toplu__node_attr_ints_n(ctx->node, "pads", 2 * sp, 0, p, &found))
    return toplu__infer_error(ctx, TOPLU_ERR_INVALID_MODEL, "kernel_shape and strides need %d values, pads %d", sp, 2 * sp);
  dims[0] = x->dims[0];
  dims[1] = x->dims[1];
  for (int d = 0; d < sp; d++)
    dims[d + 2] = x->dims[d + 2] < 0 ? toplu__infer_new_dim(ctx)
                                     : (x->dims[d + 2] - 1) * st[d] + k[d] - p[d] - p[d + sp];
  toplu__infer_set(ctx, 0, x->dtype, r, dims);
  return TOPLU_OK;
}

/* ---- NonMaxSuppression ---- */

typedef struct nms_box {
  double y1, x1, y2, x2, area;
} nms_box_t;

static nms_box_t nms_box(const toplu_tensor_t *b, int64_t k, int center) {
  double v[4];
  for (int i = 0; i < 4; i++) v[i] = toplu__tensor_get_double(b, 4 * k + i);
  nms_box_t r;
  if (center) {
    r.x1 = v[0] - v[2] / 2, r.x2 = v[0] + v[2] / 2, r.y1 = v[1] - v[3] / 2, r.y2 = v[1] + v[3] / 2;
  } else {
    r.y1 = fmin(v[0], v[2]), r.y2 = fmax(v[0], v[2]), r.x1 = fmin(v[1], v[3]), r.x2 = fmax(v[1], v[3]);
  }
  r.area = (r.y2 - r.y1) * (r.x2 - r.x1);
  return r;
}

static int nms_overlaps(const nms_box_t *a, const nms_box_t *b, double thr) {
  double ih = fmin(a->y2, b->y2) - fmax(a->y1, b->y1), iw = fmin(a->x2, b->x2) - fmax(a->x1, b->x1);
  if (ih <= 0 || iw <= 0 || a->area <= 0 || b->area <= 0) return 0;
  double inter = ih * iw, uni = a->area + b->area - inter;
  return uni > 0 && inter / uni > thr;
}

typedef struct nms_cand {
  double score;
  int64_t box;
} nms_cand_t;

static int nms_cmp(const void *pa, const void *pb) {
  const nms_cand_t *a = pa, *b = pb;
  if (a->score != b->score) return a->score > b->score ? -1 : 1;
  return a->box < b->box ? -1 : a->box > b->box;
}

static toplu_status_t infer_nms(toplu__infer_ctx_t *ctx) {
  const toplu_tensor_t *bx = &ctx->in[0], *sc = &ctx->in[1];
  if (!is_float(bx->dtype) || !is_float(sc->dtype))
    return toplu__infer_error(ctx, TOPLU_ERR_UNSUPPORTED, "boxes and scores must be float tensors");
  if (bx->ndim != 3 || sc->ndim != 3 || (bx->dims[2] >= 0 && bx->dims[2] != 4))
    return toplu__infer_error(ctx, TOPLU_ERR_SHAPE, "boxes must be [batch, boxes, 4] and scores [batch, classes, boxes]");
  for (int i = 2; i < 5; i++)
    if (toplu__infer_has_input(ctx, i) && toplu_tensor_numel(&ctx->in[i]) > 1 && ctx->in[i].ndim >= 0 &&
        ctx->in[i].dims[0] >= 0)
      return toplu__infer_error(ctx, TOPLU_ERR_SHAPE, "input %d must be a scalar", i);
  int have = bx->data && sc->data;
  for (int i = 2; i < 5; i++)
    if (toplu__infer_has_input(ctx, i) && !ctx->in[i].data) have = 0;
  int64_t dims[2] = {0, 3};
  if (!have) {
    dims[0] = toplu__infer_new_dim(ctx);
    toplu__infer_set(ctx, 0, TOPLU_DTYPE_INT64, 2, dims);
    return TOPLU_OK;
  }
  const int64_t nb = bx->dims[0], n = bx->dims[1], nc = sc->dims[1];
  if (sc->dims[0] != nb || sc->dims[2] != n)
    return toplu__infer_error(ctx, TOPLU_ERR_SHAPE, "scores must be [%lld, classes, %lld]", (long long)nb, (long long)n);
  int64_t maxk = toplu__infer_has_input(ctx, 2) && toplu_tensor_numel(&ctx->in[2]) ? toplu__tensor_get_int(&ctx->in[2], 0) : 0;
  double iou = toplu__infer_has_input(ctx, 3) && toplu_tensor_numel(&ctx->in[3]) ? toplu__tensor_get_double(&ctx->in[3], 0) : 0;
  int has_st = toplu__infer_has_input(ctx, 4) && toplu_tensor_numel(&ctx->in[4]);
  double sthr = has_st ? toplu__tensor_get_double(&ctx->in[4], 0) : 0;
  int center = toplu__node_attr_int(ctx->node, "center_point_box", 0) != 0;
  if (maxk < 0) maxk = 0;
  if (maxk > n) maxk = n;
  size_t cap = (size_t)(nb * nc * maxk);
  int64_t *sel = malloc((cap ? cap : 1) * 3 * sizeof *sel);
  nms_cand_t *cand = malloc((size_t)(n ? n : 1) * sizeof *cand);
  nms_box_t *kept = malloc((size_t)(maxk ? maxk : 1) * sizeof *kept);
  if (!sel || !cand || !kept) {
    free(sel), free(cand), free(kept);
    return toplu__infer_error(ctx, TOPLU_ERR_OUT_OF_MEMORY, "out of memory");
  }
  int64_t ns = 0;
  for (int64_t b = 0; b < nb; b++)
    for (int64_t c = 0; c < nc && maxk; c++) {
      int64_t m = 0, nk = 0;
      for (int64_t k = 0; k < n; k++) {
        double s = toplu__tensor_get_double(sc, (b * nc + c) * n + k);
        if (!has_st || s > sthr) cand[m++] = (nms_cand_t){s, k};
      }
      qsort(cand, (size_t)m, sizeof *cand, nms_cmp);
      for (int64_t i = 0; i < m && nk < maxk; i++) {
        nms_box_t bb = nms_box(bx, b * n + cand[i].box, center);
        int drop = 0;
        for (int64_t j = 0; j < nk && !drop; j++) drop = nms_overlaps(&kept[j], &bb, iou);
        if (drop) continue;
        kept[nk++] = bb;
        sel[3 * ns] = b, sel[3 * ns + 1] = c, sel[3 * ns + 2] = cand[i].box;
        ns++;
      }
    }
  dims[0] = ns;
  toplu__infer_set(ctx, 0, TOPLU_DTYPE_INT64, 2, dims);
  toplu_status_t st = toplu__infer_set_const(ctx, 0, sel);
  free(sel), free(cand), free(kept);
  return st;
}

/* Bilinear samples: about 8 operations per output element and tap. */
static int64_t flops_sample(const toplu__infer_ctx_t *ctx) { return 8 * toplu_tensor_numel(&ctx->out[0]); }
static int64_t flops_zero(const toplu__infer_ctx_t *ctx) {
  (void)ctx;
  return 0;
}

const toplu__schema_t toplu__schemas_vision[] = {
    {"GridSample", "", 16, 2, 2, 1, 1, 0, infer_grid_sample, flops_sample, NULL},
    {"RoiAlign", "", 10, 3, 3, 1, 1, 0, infer_roi_align, flops_sample, rows_always},
    {"MaxUnpool", "", 9, 2, 3, 1, 1, 1u << 2, infer_max_unpool, flops_zero, NULL},
    {"NonMaxSuppression", "", 10, 2, 5, 1, 1, 0x1Fu, infer_nms, flops_zero, rows_always},
    {NULL, NULL, 0, 0, 0, 0, 0, 0, NULL, NULL, NULL},
};
