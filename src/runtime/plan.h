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
#include "toplu/log.h"
#include "toplu/session.h"

/* Largest tensor a plan takes, in elements: the library's one limit
 * (TOPLU_MAX_ELEMENTS, toplu/tensor.h); larger shapes are
 * TOPLU_ERR_OUT_OF_MEMORY before any size arithmetic can wrap. */
#define TOPLU_PLAN_MAX_ELEMENTS TOPLU_MAX_ELEMENTS

enum { TOPLU_STORE_NONE, TOPLU_STORE_CONST, TOPLU_STORE_INPUT, TOPLU_STORE_ARENA };

typedef struct toplu__storage {
  int kind;      /* TOPLU_STORE_* */
  int input;     /* STORE_INPUT: graph input index */
  int buffer;    /* STORE_ARENA: memplan buffer index */
  int mem;       /* STORE_ARENA: which arena (one per memory the plan uses; 0 is host memory) */
  size_t offset; /* STORE_ARENA: byte offset in that arena (after layout) */
  const void *konst; /* STORE_CONST */
} toplu__storage_t;

/*
 * A tensor as the plan holds it: a graph value, or a copy the plan made in
 * another memory layout (a backend's blocked layout such as oneDNN's nChw8c
 * between convolutions, or plain again for kernels that need it) or in
 * another backend's memory.
 */
typedef struct toplu__pval {
  toplu_tensor_t t;        /* dtype and logical dims; data = the value when constant; t.device: where it lives */
  int value;               /* graph value, or -1 for a plan-made copy */
  const void *layout;      /* the backend's layout (owned by kernel state), NULL: plain row-major */
  const toplu__backend_t *lb; /* the backend that knows layout (and produced the value) */
  size_t bytes;            /* storage bytes (padded size when blocked) */
  int producer;            /* step index, -1 for inputs and constants */
  int last_use;            /* last step reading it (n_steps: alive to the end) */
  toplu__storage_t store;
} toplu__pval_t;

typedef struct toplu__step {
  const toplu__node_t *node;    /* for a reorder or copy step: the plan's "Reorder"/"Copy" pseudo-node */
  const toplu__kernel_t *kernel;
  int backend;                 /* index into the plan's backends */
  int aux;                     /* 1: a Reorder or Copy step the plan inserted */
  int owns_state;              /* 1: ctx.state is the plan's (a Copy step), freed with the plan */
  size_t ws_bytes;             /* workspace its kernel asked for */
  toplu__kernel_ctx_t ctx;      /* template: dims, state; data pointers filled per exec */
  int *in_pv, *out_pv;         /* plan values read and written (-1: absent) */
  const void **in_md;          /* layouts seen by prepare (NULL = plain) */
  int64_t flops;
  int64_t bytes_moved;
  int64_t plain_bytes;         /* bytes_moved at the tensors' logical sizes (no layout padding); 0 for aux steps */
  char *label;                 /* op type, "Conv+Relu" when fused, "Reorder" */
  int inplace_input;           /* from prepare's info */
  const char *impl;            /* prepare's info.impl; with profile, a default when it gave none */
  toplu_profile_tensor_t *prof_in, *prof_out; /* with profile: what it reads and writes (in p->prof_io) */
} toplu__step_t;

typedef struct toplu__exec toplu__exec_t;

typedef struct toplu__plan {
  const toplu__graph_t *graph;  /* the model's graph, or own_graph */
  toplu__graph_t *own_graph;    /* with If/Loop/Scan: the plan's copy they are inlined into (graph/control.h), else NULL */
  int n_inputs;
  toplu_tensor_t *input_shapes; /* the key (data NULL) */
  toplu__value_table_t *table;   /* concrete dtypes/dims and constants of every graph value */
  int n_pvals, cap_pvals;
  toplu__pval_t *pvals;
  int *pv_of_value;             /* graph value -> its plan value (in the graph's own layout), -1 if unused */
  /* Outputs, flattened: a sequence output gives one flat output per item,
   * an empty optional none (graph/sequence.h).  Without sequence or
   * optional outputs the flat outputs are the graph's outputs. */
  int n_flat_out;
  int *flat_out_value;          /* per flat output: the graph value copied out */
  int *output_pv;               /* per flat output: the plain plan value copied out */
  int *out_count;               /* per graph output: -1 a tensor, -2 none, n >= 0 a sequence of n; NULL: all tensors */
  int *out_first;               /* per graph output: its first flat output (with out_count) */
  /* Inputs, flattened the same way (the plan's own graph takes the flat
   * ones as its inputs, so a STORE_INPUT index is a flat input).  NULL
   * when every input is a tensor. */
  int *in_count;                /* per model input: -1 a tensor, -2 none, n >= 0 a sequence of n */
  int *flat_input, *flat_item;  /* per flat input: the model input and the item (-1: the input itself) */
  int n_flat;
  int n_steps, cap_steps;
  toplu__step_t *steps;
  toplu__node_t reorder_node;    /* pseudo-node naming reorder steps in messages and profiles */
  toplu__node_t copy_node;       /* pseudo-node naming copies between backends' memories */
  size_t activation_bytes;      /* arena parts holding tensors, all memories */
  size_t workspace_bytes;       /* arena parts holding the largest workspace, all memories */
#define TOPLU_PLAN_MAX_MEMS 4
  int n_mems;                   /* memories with an arena: mem 0 is host memory */
  int mem_device[TOPLU_PLAN_MAX_MEMS];
  int mem_backend[TOPLU_PLAN_MAX_MEMS];          /* backend whose buffer_alloc makes that arena */
  size_t mem_activation[TOPLU_PLAN_MAX_MEMS];    /* per memory: tensors */
  size_t mem_workspace[TOPLU_PLAN_MAX_MEMS];     /* per memory: the largest workspace of its kernels */
  int n_uploads;                /* constants copied into another backend's memory at plan time */
  void **uploads;
  int *upload_backend;
  int n_copies;                 /* Copy steps */
  size_t weights_bytes, kernel_bytes, input_bytes, output_bytes;
  size_t constant_bytes;        /* part of weights_bytes read in place (not allocator-counted) */
  /* What the plan holds that no other plan shares (toplu__plan_own_bytes): */
  size_t own_weight_bytes;      /* weights packed from the plan's own folded constants */
  size_t upload_bytes;          /* constants uploaded to other backends' memory */
  size_t folded_bytes;          /* constants folded at plan time (its table owns them) */
  int n_execs;                  /* exec contexts made (idle in free_execs or lent to a run); under lock */
  int64_t flops, bytes_moved;
  int n_reorders;
  int threads;
  toplu_allocator_t *alloc;
  toplu__backend_t **backends;    /* the session's, in order of preference */
  int n_backends;
  int cpu;                       /* index of the CPU backend (constant folding) */
  pthread_mutex_t lock;          /* guards the exec pool and profile */
  toplu__exec_t *free_execs;      /* idle exec contexts */
  int profile;
  double *prof_total_us, *prof_last_us, *prof_start_us;
  toplu_profile_tensor_t *prof_io; /* every step's prof_in and prof_out */
  char *prof_text;                 /* their layout names and default impl names */
  int64_t prof_runs;
  uint64_t last_used;            /* for LRU in the session's cache */
  const char *no_blocked;        /* plan options, kept for building */
  toplu__choices_t *choices;     /* the session's kernel choices (ops/choice.h), or NULL */
  int dump;
  toplu_log_fn log;
  void *log_user;
} toplu__plan_t;

typedef struct toplu__plan_options {
  int threads;
  int profile;
  toplu_allocator_t *alloc;
  toplu__backend_t **backends;  /* in order of preference; one of them the CPU backend with every op */
  int n_backends;
  const char *no_blocked;  /* op types whose blocked variants are skipped (debugging) */
  int dump;                /* describe the plan through log at TOPLU_LOG_DEBUG */
  toplu__choices_t *choices; /* kernel choices by timing (ops/choice.h), shared by the session's plans; NULL: none */
  toplu_log_fn log;
  void *log_user;
} toplu__plan_options_t;

/*
 * Build a plan.  inputs: one value per graph input with dtype and dims (data
 * ignored, except for inputs that decide shapes); a sequence input
 * (TOPLU_KIND_SEQUENCE) gives its items' dtypes and dims, which key the
 * plan with its length, and an empty optional is TOPLU_KIND_NONE.  Errors: TOPLU_ERR_SHAPE (dtype or dims do not fit the declared
 * ones; the message names the input and dim), TOPLU_ERR_UNSUPPORTED (no
 * kernel, data-dependent shape), TOPLU_ERR_OUT_OF_MEMORY (over the allocator's
 * limit), TOPLU_ERR_BACKEND.
 */
toplu_status_t toplu__plan_build(const toplu__graph_t *g, const toplu_tensor_t *inputs, int n_inputs,
                                const toplu__plan_options_t *opts, toplu__plan_t **out, toplu_error_t *err);

void toplu__plan_destroy(toplu__plan_t *p);

/* 1 when inputs have exactly this plan's dtypes and dims. */
int toplu__plan_matches(const toplu__plan_t *p, const toplu_tensor_t *inputs, int n_inputs);

/*
 * Run the plan: inputs with data; outputs get dtype/dims and their data is
 * copied into outputs[j].data (malloc'ed when NULL).  ro (may be NULL): the
 * deadline and cancel flag, checked before every step.  Thread-safe.
 * Errors: TOPLU_ERR_OUT_OF_MEMORY (a new exec context over the limit),
 * TOPLU_ERR_DEADLINE, TOPLU_ERR_CANCELLED, whatever a kernel reports.  A
 * stopped run returns its exec context to the pool unchanged.
 */
toplu_status_t toplu__plan_run(toplu__plan_t *p, const toplu_tensor_t *inputs, toplu_tensor_t *outputs, int n_outputs,
                              const toplu_run_options_t *ro, toplu_error_t *err);

/* 1 when ro says the run must stop now (its cancel flag is set or its
 * deadline has passed); cheap, for the run path.  ro may be NULL. */
static inline int toplu__run_must_stop(const toplu_run_options_t *ro) {
  return ro && ((ro->cancel && __atomic_load_n(ro->cancel, __ATOMIC_ACQUIRE)) ||
                (ro->deadline_ns > 0 && toplu_monotonic_ns() >= ro->deadline_ns));
}

/* TOPLU_ERR_DEADLINE or TOPLU_ERR_CANCELLED (with a message naming where the
 * run stopped: `where`) when ro says the run must stop now, else TOPLU_OK.
 * ro may be NULL.  Formats the message: call it once toplu__run_must_stop
 * said so. */
toplu_status_t toplu__run_check_stop(const toplu_run_options_t *ro, const char *where, toplu_error_t *err);

/* Describe the plan's steps, layouts and offsets, one line per call of
 * log (for debugging; also at plan time when the options' dump is set). */
void toplu__plan_dump(const toplu__plan_t *p, toplu_log_fn log, void *user);

/* Bytes one more exec context costs (the arena). */
size_t toplu__plan_arena_bytes(const toplu__plan_t *p);

/*
 * Bytes the plan holds that freeing it gives back, as the session's plan
 * cache counts them (toplu_session_options_t.max_plan_bytes): the arena
 * times the exec contexts it has made (at least one: a plan not run yet
 * makes one on its first run), kernel state, weights packed from its own
 * folded constants, constants uploaded to other backends' memory and the
 * constants folded at plan time.  Not counted: packed copies of the model's
 * constants (shared by the session's plans), the plan's own bookkeeping.
 * Thread-safe (takes the plan's lock).
 */
size_t toplu__plan_own_bytes(toplu__plan_t *p);
/* The same, counting the arenas the plan holds now (none after
 * toplu__plan_trim_execs(p, 0)): a plan that no longer runs.  Thread-safe. */
size_t toplu__plan_held_bytes(toplu__plan_t *p);

/* Free idle exec contexts until the plan has at most `keep` (contexts lent
 * to runs stay).  Returns how many were freed.  Thread-safe. */
int toplu__plan_trim_execs(toplu__plan_t *p, int keep);

/* Evaluate one node on constant inputs (the folding callback, toplu__eval_fn;
 * user is a toplu__backend_t* or NULL to make one when needed). */
toplu_status_t toplu__plan_eval_node(void *user, const toplu__graph_t *g, const toplu__node_t *n,
                                    const toplu_tensor_t *in, toplu_tensor_t *out, toplu_error_t *err);

#endif
