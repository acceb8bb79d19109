/* runtime/model_internal.h - the model handle's layout, shared by the runtime's modules. */
#ifndef TOPLU_RUNTIME_MODEL_INTERNAL_H
#define TOPLU_RUNTIME_MODEL_INTERNAL_H

#include "graph/graph.h"
#include "toplu/model.h"
#include "toplu/session.h"

struct toplu_model {
  toplu__graph_t *graph;   /* optimised graph */
  toplu__graph_t *batched; /* fixed-batch models: dim 0 freed (see model.c), or NULL */
  int fixed_batch;         /* the file fixes dim 0 of every input to 1 */
  int64_t fixed_rows;      /* the size b >= 1 it fixes dim 0 of every input to (toplu_model_fixed_batch_size), or 0 */
  toplu_value_info_t *inputs, *outputs;
  char *path, *producer;
  int64_t ir_version, param_count, param_bytes;
  int n_nodes_file;
  int n_hist;
  toplu_op_count_t *hist;
};

/*
 * For the commands that feed models numbers from files or requests (batch
 * jobs, tune, the server): 1 when an input or output of m is not a numeric
 * tensor (a string tensor, a sequence or an optional), with why set to
 * "input 'x' is a string tensor" (or "... is a sequence" / "an optional");
 * 0 otherwise.  Thread-safe.
 */
int toplu__model_nonnumeric_io(const toplu_model_t *m, char *why, size_t size);
/* The same for the inputs only (readers: toplu_reader_create).  Thread-safe. */
int toplu__model_nonnumeric_inputs(const toplu_model_t *m, char *why, size_t size);

/* toplu_session_rows_apart (toplu/session.h), with the check that every
 * output holds the rows in dim 0 left out when outputs_too is 0: a batch
 * job that runs one row at a time stores each row's outputs whole, so only
 * whether the rows mix matters (an LSTM's Y_h [layers, batch, hidden] keeps
 * them apart along dim 1).  Only the outputs in `outputs` are looked at
 * (bit j: output j; bit 63 stands for 63 and above): a batch job checks
 * those it writes or reads (postprocess output=NAME).  *apart is -1 (not
 * 0) when the node that combines the rows is an LSTM, GRU or RNN of layout 0
 * reading dim 0 as its sequence: then a row run alone is no sample either (a
 * seq-first RNN fed one row sees a sequence of length 1).  Same errors and
 * thread-safety. */
toplu_status_t toplu__session_rows_apart(toplu_session_t *s, const toplu_tensor_t *inputs, int n_inputs,
                                         int outputs_too, uint64_t outputs, int *apart, char *why, size_t why_size);
/* Whether output j is in such a mask. */
static inline int toplu__output_in(uint64_t outputs, int j) {
  return (int)((j < 63 ? outputs >> j : outputs >> 63) & 1u);
}

#endif
