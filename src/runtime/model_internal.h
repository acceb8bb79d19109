/* runtime/model_internal.h - the model handle's layout, shared by the runtime's modules. */
#ifndef TOPLU_RUNTIME_MODEL_INTERNAL_H
#define TOPLU_RUNTIME_MODEL_INTERNAL_H

#include "graph/graph.h"
#include "toplu/model.h"

struct toplu_model {
  toplu__graph_t *graph;   /* optimised graph */
  toplu__graph_t *batched; /* fixed-batch models: dim 0 freed (see model.c), or NULL */
  int fixed_batch;
  toplu_value_info_t *inputs, *outputs;
  char *path, *producer;
  int64_t ir_version, param_count, param_bytes;
  int n_nodes_file;
  int n_hist;
  toplu_op_count_t *hist;
};

#endif
