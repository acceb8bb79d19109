/*
 * ops/strings.h - Cast and CastLike to and from STRING (ops/strings.c), for
 * the element-wise Cast kernel (ops/elementwise.c), which calls these when
 * its input or output is a string tensor.  Semantics and where the string
 * bytes live: the top of ops/strings.c.
 */
#ifndef TOPLU_OPS_STRINGS_H
#define TOPLU_OPS_STRINGS_H

#include "ops/kernel.h"

/* Plan time: TOPLU_ERR_UNSUPPORTED for a pair it lacks (bool). */
toplu_status_t toplu__strcast_prepare(toplu__kernel_ctx_t *ctx);
/* Per exec context: the pool a cast to STRING writes its text in
 * (numel x 32 bytes), freed by unbind.  Nothing for other casts. */
toplu_status_t toplu__strcast_bind(toplu__kernel_ctx_t *ctx);
void toplu__strcast_unbind(toplu__kernel_ctx_t *ctx);
/* The cast; allocates nothing.  TOPLU_ERR_INVALID_ARGUMENT for text that is
 * not a number of the output's type (naming node, tensor, element). */
toplu_status_t toplu__strcast_run(toplu__kernel_ctx_t *ctx);

#endif
