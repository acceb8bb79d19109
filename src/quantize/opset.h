/* quantize/opset.h - moving a graph of opset 7..12 to opset 13 (see opset.c). */
#ifndef TOPLU_QUANTIZE_OPSET_H
#define TOPLU_QUANTIZE_OPSET_H

#include <stddef.h>
#include <stdint.h>

#include "quantize/proto.h"
#include "toplu/status.h"

/* The rank of tensor name, or -1 when unknown. */
typedef int (*qz_rank_fn)(void *user, const char *name);

/* TOPLU_OK when every node of g (default-domain opset `from`) can be
 * rewritten to opset 13; else TOPLU_ERR_UNSUPPORTED with why naming the
 * first node that cannot and the reason.  rank_of (may be NULL) tells a
 * Softmax over the last axis from one over another.  Changes nothing. */
toplu_status_t qz_opset_check(const Onnx__GraphProto *g, int64_t from, qz_rank_fn rank_of, void *user, char *why,
                              size_t why_size);

/* Rewrite g's nodes to their opset-13 forms (after qz_opset_check passed);
 * the caller sets the model's opset_import.  Errors: TOPLU_ERR_OUT_OF_MEMORY. */
toplu_status_t qz_opset_rewrite(Onnx__GraphProto *g, int64_t from, toplu_error_t *err);

#endif
