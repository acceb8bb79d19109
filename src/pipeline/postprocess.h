/*
 * pipeline/postprocess.h - what is kept of each row's outputs.
 *
 * A spec is a comma-separated list applied in order to one output (the
 * first, or output=NAME):
 *   raw        keep the outputs as they are (the default): every output, or
 *              only output=NAME's when one is named
 *   softmax    softmax over the last axis, in place (float outputs)
 *   argmax     the index of the largest element of the row (flattened)
 *   topk=K     the K largest elements, largest first (ties: lower index first)
 * With a labels file (line k names class k), argmax and topk carry labels.
 * Rows whose written outputs hold NaN or Inf fail ("postprocess" stage);
 * outputs not written are not checked (neither for NaN nor for their
 * shapes).  argmax and topk compare values in their own dtype (int64 past
 * 2^53, float64 past float32's precision); NaN ranks above every number, as
 * numpy's argmax and torch.topk rank it (with allow_nonfinite).
 */
#ifndef TOPLU_PIPELINE_POSTPROCESS_H
#define TOPLU_PIPELINE_POSTPROCESS_H

#include "pipeline/chunk.h"
#include "toplu/model.h"

typedef enum { PL_POST_RAW, PL_POST_ARGMAX, PL_POST_TOPK } pl_post_kind_t;

typedef struct pl_post {
  pl_post_kind_t kind;
  int softmax;
  int k;              /* topk */
  char output_name[320];
  int output;         /* index of the output it applies to */
  int selected;       /* output=NAME was given: with raw, only that output is written */
  int score_f64;      /* topk of a float64 output: scores written as float64 (else float32) */
  char **labels;
  int n_labels;
  const toplu_model_t *model; /* for output names in messages */
  int allow_nonfinite;        /* 1: NaN/Inf outputs are results, not bad rows */
} pl_post_t;

/* Parse a spec.  Errors: TOPLU_ERR_INVALID_ARGUMENT naming the bad item. */
toplu_status_t pl_post_parse(const char *spec, pl_post_t *p, toplu_error_t *err);
/* Resolve the output and load the labels (path may be NULL).  note (may be
 * NULL) gets warnings, one per line, or "": a labels file whose number of
 * lines differs from the output's classes (its dims after the batch dim,
 * when the model fixes them), blank lines in it (kept).  Errors:
 * TOPLU_ERR_NOT_FOUND (output), TOPLU_ERR_IO (labels), TOPLU_ERR_INVALID_ARGUMENT. */
toplu_status_t pl_post_bind(pl_post_t *p, const toplu_model_t *model, const char *labels, char *note, size_t note_size,
                            toplu_error_t *err);
void pl_post_free(pl_post_t *p);
/* The canonical text (for checkpoints). */
void pl_post_describe(const pl_post_t *p, char *buf, size_t size);
/* 1 when output j is written as it is (raw: every output, or the selected one). */
static inline int pl_post_keeps(const pl_post_t *p, int j) {
  return p->kind == PL_POST_RAW && (!p->selected || j == p->output);
}
/* 1 when output j is read at all: kept, or the one argmax/topk/softmax work on. */
static inline int pl_post_reads(const pl_post_t *p, int j) {
  return p->kind == PL_POST_RAW ? pl_post_keeps(p, j) : j == p->output;
}
/* Label of class i, or NULL. */
const char *pl_post_label(const pl_post_t *p, int64_t i);
/* Postprocess every row of a chunk that has outputs (marking rows with
 * non-finite outputs failed); -1 when out of memory. */
int pl_post_chunk(const pl_post_t *p, pl_chunk_t *c);

#endif
