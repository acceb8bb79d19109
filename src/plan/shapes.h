/*
 * plan/shapes.h - input shapes at a batch size, for the planner and the tuner.
 *
 * Which inputs carry the batch dim: those whose dim 0 the model leaves
 * symbolic, or every input of rank >= 1 in a model whose file fixes batch 1
 * (run with the session's batch_override).  Other symbolic dims are bound,
 * in order, by the user's shapes (--shape NAME=DIMS; dim 0 of a batched
 * input is ignored there), by a symbol of the same name already bound, or by
 * a default: for rank-4 (image) inputs 3 channels and 224 x 224 pixels, for
 * other inputs 128 (a sequence length); the note says which were assumed.
 */
#ifndef TOPLU_PLAN_SHAPES_H
#define TOPLU_PLAN_SHAPES_H

#include "core/error.h"
#include "toplu/planner.h"
#include "toplu/tensor.h"

typedef struct toplu__batch_shapes {
  int n_inputs;
  toplu_tensor_t *base; /* dtype and dims; dim 0 of batched inputs set per batch */
  int *batched;         /* per input: 1 when dim 0 is the batch */
  int batchable;        /* at least one input takes the batch dim */
  int fixed_batch;      /* the file fixes batch 1 (toplu_model_fixed_batch) */
  char note[512];       /* the defaults assumed, or "" */
  char desc[512];       /* "x: [B, 3, 224, 224] float32" */
} toplu__batch_shapes_t;

/* Resolve the shapes.  Errors: TOPLU_ERR_NOT_FOUND (a given name is not an
 * input; the message lists them), TOPLU_ERR_SHAPE (rank or fixed dims do not
 * match; a given dim < 1 where the model does not declare it 0, over 2^31 - 1,
 * or more than 2^40 elements per sample; unknown rank without a given
 * shape), TOPLU_ERR_OUT_OF_MEMORY. */
toplu_status_t toplu__batch_shapes_init(const toplu_model_t *m, const toplu_input_shape_t *given, int n_given,
                                       toplu__batch_shapes_t *s, toplu_error_t *err);

/* out[i] (n_inputs entries) = the shapes at batch b, data NULL. */
void toplu__batch_shapes_at(const toplu__batch_shapes_t *s, int64_t b, toplu_tensor_t *out);

/* Bytes of all inputs at batch b. */
size_t toplu__batch_shapes_input_bytes(const toplu__batch_shapes_t *s, int64_t b);

void toplu__batch_shapes_free(toplu__batch_shapes_t *s);

/* Append printf-style text to buf (NUL-terminated, cut to size); used by
 * the planner's messages (shapes.c, profiles.c). */
void toplu__plan_append(char *buf, size_t size, const char *fmt, ...) TOPLU_PRINTF(3, 4);

#endif
