/*
 * graph/schema_conv.h - Conv and ConvTranspose geometry, shared by the
 * schemas (output shapes) and the kernels (padding for oneDNN).
 *
 * Conv-1/11 (ONNX): for spatial axis i with input size in, kernel k,
 * stride s, dilation d, pads b (begin) and e (end):
 *   out = floor((in + b + e - ((k - 1) * d + 1)) / s) + 1
 * auto_pad SAME_UPPER/SAME_LOWER: out = ceil(in / s), total padding
 *   max(0, (out - 1) * s + (k - 1) * d + 1 - in), the odd unit at the end
 *   (SAME_UPPER) or the beginning (SAME_LOWER); VALID: no padding.
 * ConvTranspose-1/11:
 *   out = s * (in - 1) + output_padding + (k - 1) * d + 1 - b - e
 * and with output_shape given (or auto_pad SAME_*: out = in * s), the total
 * padding s * (in - 1) + output_padding + (k - 1) * d + 1 - out split as the
 * spec says (SAME_UPPER: begin = total / 2; otherwise end = total / 2).
 */
#ifndef TOPLU_GRAPH_SCHEMA_CONV_H
#define TOPLU_GRAPH_SCHEMA_CONV_H

#include "graph/schema.h"

#define TOPLU_CONV_MAX_SPATIAL 3

typedef struct toplu__conv_params {
  int transpose;      /* ConvTranspose */
  int spatial;        /* number of spatial axes (1..3) */
  int64_t group;
  int64_t n, c_in, c_out;
  int64_t in[TOPLU_CONV_MAX_SPATIAL], out[TOPLU_CONV_MAX_SPATIAL];
  int64_t kernel[TOPLU_CONV_MAX_SPATIAL], stride[TOPLU_CONV_MAX_SPATIAL], dilation[TOPLU_CONV_MAX_SPATIAL];
  int64_t pad_begin[TOPLU_CONV_MAX_SPATIAL], pad_end[TOPLU_CONV_MAX_SPATIAL];
  int64_t output_padding[TOPLU_CONV_MAX_SPATIAL];
} toplu__conv_params_t;

/*
 * Geometry of a Conv or ConvTranspose node from its attributes and the shapes
 * of X (in[0]) and W (in[1]).  Spatial input dims may be symbolic at load:
 * the matching output dims are then fresh symbols.  Errors (via ctx):
 * TOPLU_ERR_INVALID_MODEL for inconsistent attributes, TOPLU_ERR_SHAPE for
 * channel counts that do not match W and group, TOPLU_ERR_UNSUPPORTED for
 * more than 3 spatial axes.
 */
toplu_status_t toplu__conv_params(toplu__infer_ctx_t *ctx, toplu__conv_params_t *p);

#endif
