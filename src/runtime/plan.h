/*
 * runtime/plan.h - an execution plan for one set of input shapes.
 *
 * Building a plan binds the graph's symbolic dims to the given input
 * shapes, re-runs inference and folding concretely (so shape subgraphs
 * become constants), picks and prepares a kernel per remaining node, and
 * lays out every intermediate tensor and the largest kernel workspace in
 * one arena by liveness.  A plan is immutable once built; each concurrent
 * run borrows an exec context (its own arena and oneDNN stream) from the
 * plan's pool, so running never allocates once the pool is warm.
 */
#ifndef TOPLU_RUNTIME_PLAN_H
#define TOPLU_RUNTIME_PLAN_H

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "graph/graph.h"
#include "graph/infer.h"
#include "ops/backend.h"
#include "ops/kernel.h"
#include "toplu/session.h"

/* Largest tensor a plan takes, in elements: the library's one limit
 * (TOPLU_MAX_ELEMENTS, toplu/tensor.h); larger shapes are
 * TOPLU_ERR_OUT_OF_MEMORY before any size arithmetic can wrap. */
#define TOPLU_PLAN_MAX_ELEMENTS TOPLU_MAX_ELEMENTS

enum { TOPLU_STORE_NONE, TOPLU_STORE_CONST, TOPLU_STORE_INPUT, TOPLU_STORE_ARENA };

typedef struct toplu_storage {
  int kind;      /* TOPLU_STORE_* */
  int input;     /* STORE_INPUT: graph input index */
  int buffer;    /* STORE_ARENA: memplan buffer index */
  size_t offset; /* STORE_ARENA: byte offset in the arena (after layout) */
  const void *konst; /* STORE_CONST */
} toplu_storage_t;

/*
 * A tensor as the plan holds it: a graph value, or a copy the plan made in
 * another memory layout (a oneDNN blocked layout such as nChw8c between
 * convolutions, or plain again for kernels that need it).
 */
typedef struct toplu_pval {
  toplu_tensor_t t;        /* dtype and logical dims; data = the value when constant */
  int value;               /* graph value, or -1 for a plan-made copy */
  int blocked;             /* 1: md holds a oneDNN layout other than plain row-major */
  dnnl_memory_desc_t md;   /* when blocked */
  size_t bytes;            /* storage bytes (padded size when blocked) */
  int producer;            /* step index, -1 for inputs and constants */
  int last_use;            /* last step reading it (n_steps: alive to the end) */
  toplu_storage_t store;
} toplu_pval_t;

typedef struct toplu_step {
  const toplu_node_t *node;    /* for a reorder step: the plan's "Reorder" pseudo-node */
  const toplu_kernel_t *kernel;
  toplu_kernel_ctx_t ctx;      /* template: dims, state; data pointers filled per exec */
  int *in_pv, *out_pv;         /* plan values read and written (-1: absent) */
  const void **in_md;          /* layouts seen by prepare (NULL = plain) */
  int64_t flops;
  int64_t bytes_moved;
  char *label;                 /* op type, "Conv+Relu" when fused, "Reorder" */
  int inplace_input;           /* from prepare's info */
} toplu_step_t;

typedef struct toplu_exec toplu_exec_t;

typedef struct toplu_plan {
  const toplu_graph_t *graph;
  int n_inputs;
  toplu_tensor_t *input_shapes; /* the key (data NULL) */
  toplu_value_table_t *table;   /* concrete dtypes/dims and constants of every graph value */
  int n_pvals, cap_pvals;
  toplu_pval_t *pvals;
  int *pv_of_value;             /* graph value -> its plan value (in the graph's own layout), -1 if unused */
  int *output_pv;               /* per graph output: the plain plan value copied out */
  int n_steps, cap_steps;
  toplu_step_t *steps;
  toplu_node_t reorder_node;    /* pseudo-node naming reorder steps in messages and profiles */
  size_t activation_bytes;      /* arena part holding tensors */
  size_t workspace_bytes;       /* arena part holding the largest workspace */
  size_t weights_bytes, kernel_bytes, input_bytes, output_bytes;
  size_t constant_bytes;        /* part of weights_bytes read in place (not allocator-counted) */
  int64_t flops, bytes_moved;
  int n_reorders;
  int threads;
  toplu_allocator_t *alloc;
  toplu_backend_t *backend;
  pthread_mutex_t lock;          /* guards the exec pool and profile */
  toplu_exec_t *free_execs;      /* idle exec contexts */
  int profile;
  double *prof_total_us, *prof_last_us, *prof_start_us;
  int64_t prof_runs;
  uint64_t last_used;            /* for LRU in the session's cache */
} toplu_plan_t;

typedef struct toplu_plan_options {
  int threads;
  int profile;
  toplu_allocator_t *alloc;
  toplu_backend_t *backend;
} toplu_plan_options_t;

/*
 * Build a plan.  inputs: one tensor per graph input with dtype and dims (data
 * ignored).  Errors: TOPLU_ERR_SHAPE (dtype or dims do not fit the declared
 * ones; the message names the input and dim), TOPLU_ERR_UNSUPPORTED (no
 * kernel, data-dependent shape), TOPLU_ERR_OUT_OF_MEMORY (over the allocator's
 * limit), TOPLU_ERR_BACKEND.
 */
toplu_status_t toplu_plan_build(const toplu_graph_t *g, const toplu_tensor_t *inputs, int n_inputs,
                                const toplu_plan_options_t *opts, toplu_plan_t **out, toplu_error_t *err);

void toplu_plan_destroy(toplu_plan_t *p);

/* 1 when inputs have exactly this plan's dtypes and dims. */
int toplu_plan_matches(const toplu_plan_t *p, const toplu_tensor_t *inputs, int n_inputs);

/*
 * Run the plan: inputs with data; outputs get dtype/dims and their data is
 * copied into outputs[j].data (malloc'ed when NULL).  Thread-safe.
 * Errors: TOPLU_ERR_OUT_OF_MEMORY (a new exec context over the limit),
 * whatever a kernel reports.
 */
toplu_status_t toplu_plan_run(toplu_plan_t *p, const toplu_tensor_t *inputs, toplu_tensor_t *outputs, int n_outputs,
                              toplu_error_t *err);

/* Print the plan's steps, layouts and offsets (for debugging; also when the
 * environment variable TOPLU_PLAN_DUMP is set at plan time). */
void toplu_plan_dump(const toplu_plan_t *p, FILE *f);

/* Bytes one more exec context costs (the arena). */
size_t toplu_plan_arena_bytes(const toplu_plan_t *p);

/* Evaluate one node on constant inputs (the folding callback, toplu_eval_fn;
 * user is a toplu_backend_t* or NULL to make one when needed). */
toplu_status_t toplu_plan_eval_node(void *user, const toplu_graph_t *g, const toplu_node_t *n,
                                    const toplu_tensor_t *in, toplu_tensor_t *out, toplu_error_t *err);

#endif
