/*
 * graph/einsum.h - the Einsum equation (ONNX Einsum-12), parsed once for
 * shape inference (graph/schema_linalg.c) and for the kernel (ops/linalg.c).
 *
 * Every input dim gets a label id: the dims an ellipsis stands for get ids
 * 0..TOPLU_EINSUM_ELLIPSIS_LABELS-1, aligned to the right as broadcasting
 * aligns them (the last "..." dim of every input has one id); letters get
 * TOPLU_EINSUM_ELLIPSIS_LABELS + their position in "A..Za..z".  Without
 * "->" the output is the "..." dims, then the letters used exactly once in
 * alphabetical (ASCII) order.
 */
#ifndef TOPLU_GRAPH_EINSUM_H
#define TOPLU_GRAPH_EINSUM_H

#include <stddef.h>

#include "toplu/tensor.h"

#define TOPLU_EINSUM_MAX_IN 8
#define TOPLU_EINSUM_ELLIPSIS_LABELS TOPLU_MAX_DIMS
#define TOPLU_EINSUM_MAX_LABELS (TOPLU_EINSUM_ELLIPSIS_LABELS + 52)

typedef struct toplu__einsum {
  int n_labels;                                       /* ids are below this */
  int in_label[TOPLU_EINSUM_MAX_IN][TOPLU_MAX_DIMS];  /* per input dim */
  int out_rank;
  int out_label[TOPLU_EINSUM_MAX_LABELS];             /* per output dim */
} toplu__einsum_t;

/* Parse eq for n inputs of the given ranks; 0, or -1 with the reason in why. */
int toplu__einsum_parse(const char *eq, int n, const int *ranks, toplu__einsum_t *e, char *why, size_t why_size);

#endif
