/* quantize/opset.h - moving a graph of opset 7..12 to opset 13 (see opset.c). */
#ifndef TOPLU_QUANTIZE_OPSET_H
#define TOPLU_QUANTIZE_OPSET_H

#include <stddef.h>
#include <stdint.h>

#include "quantize/proto.h"
#include "toplu/status.h"

/* TOPLU_OK when every node of g (default-domain opset `from`) can be
 * rewritten to opset 13; else TOPLU_ERR_UNSUPPORTED with why naming the
 * first node that cannot and the reason.  Changes nothing. */
toplu_status_t qz_opset_check(const Onnx__GraphProto *g, int64_t from, char *why, size_t why_size);

/* Rewrite g's nodes to their opset-13 forms (after qz_opset_check passed);
 * the caller sets the model's opset_import.  Errors: TOPLU_ERR_OUT_OF_MEMORY. */
toplu_status_t qz_opset_rewrite(Onnx__GraphProto *g, int64_t from, toplu_error_t *err);

#endif
