/*
 * plan/memory.h - what toplu's real plan at a batch size takes, and the
 * affine law memory(B) = fixed + per_sample * B fitted from two plans.
 */
#ifndef TOPLU_PLAN_MEMORY_H
#define TOPLU_PLAN_MEMORY_H

#include <stdint.h>

#include "plan/shapes.h"
#include "toplu/session.h"

/* One real plan: its memory report and its steps' costs. */
#define TOPLU__STEP_LABEL 96

typedef struct toplu__plan_point {
  int64_t batch;
  toplu_memory_report_t r;
  int n_steps;          /* steps costed below: all of the plan's, or with model_nodes its model nodes' */
  int n_plan_steps;     /* the plan's steps, inserted ones included */
  int64_t *step_flops;  /* per step, at this batch */
  int64_t *step_bytes;  /* bytes read and written per step (see model_nodes) */
  unsigned char *step_int8; /* per step: 1 when it does integer arithmetic (toplu__step_is_int8 of its node's op
                             * type or of its label) */
  int64_t *step_elems;  /* per step, its largest tensor's elements at this batch (toplu_step_info_t) */
  char *step_labels;    /* per step, TOPLU__STEP_LABEL bytes: "'name' (op type)", for notes */
  int model_nodes;      /* 1: the costs are the model's own nodes' (see toplu__plan_point_build) */
} toplu__plan_point_t;

/*
 * Build (or reuse the session's cached) plan for the shapes at batch b and
 * fill p.  model_nodes 0: each step's costs as toplu's CPU plan has them
 * (Reorder and Copy steps included, bytes at the stored sizes, blocked
 * layouts' padding included); 1: the costs of the model's own nodes only,
 * what a GPU runtime runs: the steps the plan inserted (Reorder, Copy: they
 * follow the host CPU's ISA and kernel choices) are left out (n_steps
 * counts the rest, n_plan_steps all), and every step's bytes are its
 * tensors' logical sizes (toplu_step_info_t.plain_bytes), so the costs and
 * their number are the same on every host
 * (issue 11; docs/plan-tune.md, "A dependence found on 2026-12-04").  The
 * memory report is the plan's either way.  The plan stays cached in the
 * session; call toplu_session_clear_plans() to give its memory back.
 * Errors: those of toplu_session_memory and toplu_session_steps (the
 * message is in err), TOPLU_ERR_OUT_OF_MEMORY.  Thread-safe as the
 * session's calls are; p is the caller's.
 */
toplu_status_t toplu__plan_point_build(toplu_session_t *s, const toplu__batch_shapes_t *sh, int64_t b, int model_nodes,
                                      toplu__plan_point_t *p, toplu_error_t *err);
void toplu__plan_point_free(toplu__plan_point_t *p);

/* 1 when a step of this op type (toplu_step_info_t.op_type, fused names such
 * as "QLinearConv+QLinearAdd" included) multiplies in integers: QLinearConv,
 * QLinearMatMul, ConvInteger, MatMulInteger, QGemm, DynamicQuantizeMatMul. */
int toplu__step_is_int8(const char *op_type);

/* Memory terms in bytes (toplu's CPU engine, the model's own precision). */
typedef struct toplu__mem_terms {
  double weights, activation, workspace, io, overhead;
} toplu__mem_terms_t;

/* Terms of a real plan: weights_bytes, activation_bytes, workspace_bytes,
 * (input + output bytes) x io_copies, kernel_bytes as overhead. */
void toplu__plan_point_terms(const toplu__plan_point_t *p, int io_copies, toplu__mem_terms_t *t);

/* The affine law of each term: value(B) = fixed + per_sample * B. */
typedef struct toplu__mem_law {
  toplu__mem_terms_t fixed, per_sample;
} toplu__mem_law_t;

/* Fit the law through two points' terms at batches b1 < b2. */
void toplu__mem_law_fit(const toplu__mem_terms_t *t1, int64_t b1, const toplu__mem_terms_t *t2, int64_t b2,
                       toplu__mem_law_t *law);

/* The law's terms at batch b. */
void toplu__mem_law_at(const toplu__mem_law_t *law, int64_t b, toplu__mem_terms_t *t);

/* Sum of the terms. */
double toplu__mem_terms_total(const toplu__mem_terms_t *t);

#endif
