/* graph/schema_sequence.c - sequence and optional ops: what load-time
 * inference can say before graph/sequence.c lowers them when a plan is
 * built (nothing: a sequence has no tensor shape; toplu__seq_lower never
 * calls these at plan time). */
#include "graph/schema.h"

/* Outputs stay unknown (dtype UNDEFINED, rank -1) until the plan lowers the node. */
static toplu_status_t infer_unknown(toplu__infer_ctx_t *ctx) {
  for (int j = 0; j < ctx->n_out; j++) {
    ctx->out[j].dtype = TOPLU_DTYPE_UNDEFINED;
    ctx->out[j].ndim = -1;
  }
  return TOPLU_OK;
}

#define MANY (1 << 20)
/* const_inputs: the positions and SplitToSequence's split, which
 * graph/sequence.c needs when the plan is built (graph inputs there key the
 * plan: toplu__graph_mark_value_inputs).  ONNX operator specification: the sequence ops since opset 11, SequenceMap
 * since 17, the optional ops since 15 (OptionalHasElement's input optional
 * since 18). */
const toplu__schema_t toplu__schemas_sequence[] = {
    {"SequenceEmpty", "", 11, 0, 0, 1, 1, 0, infer_unknown, NULL, NULL},
    {"SequenceConstruct", "", 11, 1, MANY, 1, 1, 0, infer_unknown, NULL, NULL},
    {"SequenceInsert", "", 11, 2, 3, 1, 1, 1u << 2, infer_unknown, NULL, NULL},
    {"SequenceErase", "", 11, 1, 2, 1, 1, 1u << 1, infer_unknown, NULL, NULL},
    {"SequenceAt", "", 11, 2, 2, 1, 1, 1u << 1, infer_unknown, NULL, NULL},
    {"SequenceLength", "", 11, 1, 1, 1, 1, 0, infer_unknown, NULL, NULL},
    {"SplitToSequence", "", 11, 1, 2, 1, 1, 1u << 1, infer_unknown, NULL, NULL},
    {"ConcatFromSequence", "", 11, 1, 1, 1, 1, 0, infer_unknown, NULL, NULL},
    {"SequenceMap", "", 17, 1, MANY, 1, MANY, 0, infer_unknown, NULL, NULL},
    {"Optional", "", 15, 0, 1, 1, 1, 0, infer_unknown, NULL, NULL},
    {"OptionalHasElement", "", 15, 0, 1, 1, 1, 0, infer_unknown, NULL, NULL},
    {"OptionalGetElement", "", 15, 1, 1, 1, 1, 0, infer_unknown, NULL, NULL},
    {NULL, NULL, 0, 0, 0, 0, 0, 0, NULL, NULL, NULL}};
