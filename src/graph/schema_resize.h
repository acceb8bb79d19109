/*
 * graph/schema_resize.h - Resize-10/11/13/18/19 and Upsample-7/9 geometry,
 * shared by the schema (output shapes) and the kernel (interpolation tables).
 */
#ifndef TOPLU_GRAPH_SCHEMA_RESIZE_H
#define TOPLU_GRAPH_SCHEMA_RESIZE_H

#include "graph/schema.h"

/*
 * Output dims, per-axis scales and roi of a Resize or Upsample node from its
 * attributes and inputs (roi, scales, sizes must be constant).  Arrays hold
 * one entry per axis of X.  *known is 0 when the output dims cannot be known
 * yet (load time, non-constant scales or sizes).  Errors via ctx
 * (TOPLU_ERR_INVALID_MODEL, TOPLU_ERR_UNSUPPORTED) naming the node.
 */
toplu_status_t toplu__resize_params(toplu__infer_ctx_t *ctx, int64_t *out_dims, double *scales, double *roi_start,
                                   double *roi_end, int *known);

#endif
