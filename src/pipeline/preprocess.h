/*
 * pipeline/preprocess.h - declared preprocessing (see toplu_job_options_t.preprocess).
 *
 * Images go through, in this order: colour conversion (to RGB or gray;
 * alpha was dropped when decoding), resize (plain, letterbox or shorter
 * side; bilinear, antialiased when shrinking: a triangle filter whose width
 * grows with the shrink factor), center crop, pad to a multiple, then each
 * value becomes (x * scale - mean[c]) / std[c] in float (mean and std by
 * colour, R/G/B, whatever the output order) or, for dtype uint8, the pixel
 * rounded, written in the output layout and channel order.  Numeric rows
 * (NPY, CSV, JSONL) are only multiplied by scale, when given.
 */
#ifndef TOPLU_PIPELINE_PREPROCESS_H
#define TOPLU_PIPELINE_PREPROCESS_H

#include "pipeline/chunk.h"
#include "toplu/model.h"

typedef enum { PL_RESIZE_NONE, PL_RESIZE_EXACT, PL_RESIZE_LETTERBOX, PL_RESIZE_SHORT } pl_resize_t;
typedef enum { PL_COLOR_DEFAULT, PL_COLOR_RGB, PL_COLOR_BGR, PL_COLOR_GRAY } pl_color_t;
typedef enum { PL_LAYOUT_DEFAULT, PL_LAYOUT_NCHW, PL_LAYOUT_NHWC, PL_LAYOUT_HW } pl_layout_t;

struct pl_pool;

typedef struct pl_pre {
  /* where an image's output tensor comes from (the job's pool, pipeline/pool.h; NULL: toplu_tensor_alloc) */
  struct pl_pool *pool;
  pl_resize_t resize;
  int rw, rh, rshort;
  int crop_w, crop_h;
  int pad_multiple;
  float pad_value;
  pl_color_t color;
  pl_layout_t layout;
  toplu_dtype_t dtype;    /* UNDEFINED: the model input's */
  double scale;
  int has_scale, has_mean, has_std;
  float mean[3], std[3];
  int any_image_op;       /* an op that only images take was given */
  int decode_full;        /* decode=full: JPEGs at full size, never libjpeg's 1/2, 1/4, 1/8 (pl_pre_hint) */
  int64_t max_pixels;     /* resize=S making more pixels than this is a bad row (0: no bound); set by the job */
} pl_pre_t;

/* Parse a spec ("resize=224x224,color=rgb,..."; NULL or "" for none).
 * Errors: TOPLU_ERR_INVALID_ARGUMENT naming the bad item. */
toplu_status_t pl_pre_parse(const char *spec, pl_pre_t *p, toplu_error_t *err);

/* Fill the defaults from the model input the rows go to and check the
 * combination (e.g. dtype=uint8 with mean).  is_image: the source gives
 * images.  Errors: TOPLU_ERR_INVALID_ARGUMENT. */
toplu_status_t pl_pre_bind(pl_pre_t *p, const toplu_value_info_t *info, int is_image, toplu_error_t *err);

/* The canonical text of a bound spec (for checkpoints: same text, same pixels). */
void pl_pre_describe(const pl_pre_t *p, char *buf, size_t size);

/* Smallest decoded size the resize needs (0, 0 when it needs the full image). */
void pl_pre_hint(const pl_pre_t *p, int *w, int *h);

/* Turn a source value into the row tensor for the model (dims without the
 * batch dim); the value is consumed.  0, or -1 with the reason in why. */
int pl_pre_apply(const pl_pre_t *p, pl_value_t *v, toplu_tensor_t *out, char *why, size_t why_size);

#endif
