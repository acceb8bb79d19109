/*
 * graph/infer.h - shape and type inference with constant folding, over a
 * whole graph.
 *
 * One pass walks the nodes in order.  For each live node it gathers its
 * inputs' dtypes, dims and (for constants) values, calls the op's schema
 * infer(), and, when every present input is a constant, evaluates the node
 * through the caller's eval callback so its outputs become constants too.
 * The same pass serves load time (symbolic dims, on the graph's own values)
 * and plan time (concrete dims, on a plan's private value table), which is
 * how Shape -> Gather -> Concat -> Reshape chains resolve for any batch size.
 */
#ifndef TOPLU_GRAPH_INFER_H
#define TOPLU_GRAPH_INFER_H

#include <stdint.h>

#include "graph/graph.h"

/* Compute node n's outputs from constant inputs: out[i] has dtype and dims
 * set; eval sets out[i].data to a malloc'ed buffer it fills.  NULL: no
 * folding beyond what schemas do themselves. */
typedef toplu_status_t (*toplu__eval_fn)(void *user, const toplu__graph_t *g, const toplu__node_t *n,
                                        const toplu_tensor_t *in, toplu_tensor_t *out, toplu_error_t *err);

/* Nodes whose constant outputs would take more bytes than this are left to
 * run with the plan instead of being folded. */
#define TOPLU_FOLD_MAX_BYTES ((uint64_t)64 << 20)

/* The content of a small integer shape vector known at load time although
 * some of its entries are symbolic dims (Shape of a tensor with a symbolic
 * batch, and what Gather, Unsqueeze, Squeeze, Concat, Cast and Identity make
 * of it): entries >= 0 are known, -1 is a literal -1 (Reshape's "infer this
 * dim"), and TOPLU__SYMVEC_SYM(d) stands for symbolic dim d (< 0). */
#define TOPLU__SYMVEC_BASE (-((int64_t)1 << 40))
#define TOPLU__SYMVEC_SYM(d) (TOPLU__SYMVEC_BASE + (d))
typedef struct toplu__symvec {
  int8_t valid;  /* 0: nothing known of this value's content */
  int8_t scalar; /* a rank-0 value (n == 1) */
  int8_t n;      /* entries */
  int64_t e[TOPLU_MAX_DIMS];
} toplu__symvec_t;

typedef struct toplu__value_table {
  toplu_tensor_t *vals; /* one per graph value: dtype, ndim (-1 unknown), dims, data (constant value or NULL) */
  uint8_t *owned;       /* 1: vals[i].data was malloc'ed by the pass (caller frees) */
  uint8_t *folded;      /* per node: 1 when its outputs are all constants (no run needed) */
  int n_values;         /* entries in vals and owned (grows with inlined control flow) */
  int cap_values, cap_nodes; /* allocated entries of vals/owned and of folded */
  toplu__symvec_t *sym; /* load time only (not concrete): per value, grown on use; NULL until needed */
  int cap_sym;          /* entries of sym */
} toplu__value_table_t;

/*
 * Run inference and folding over every node (toplu__infer_range over the
 * whole graph, so control flow is expanded as below).  table->vals must hold the graph inputs' and
 * constants' entries; intermediate entries are overwritten.  concrete: all
 * input dims are known, so every schema must produce known dims, and inputs
 * a schema marks const_inputs must be constants (else TOPLU_ERR_UNSUPPORTED:
 * a data-dependent shape).  Errors: whatever a schema or eval reports, with
 * the node named.
 */
toplu_status_t toplu__infer_graph(toplu__graph_t *g, toplu__value_table_t *table, int concrete, toplu__eval_fn eval,
                                 void *user, toplu_error_t *err);

/*
 * The same over nodes [start, *end) only.  Control-flow nodes (If, Loop,
 * Scan) are expanded when what steers them is known (graph/control.h): the
 * nodes they add lie inside the range, and *end moves by the number added.
 * The table grows with the graph (vals and owned per value, folded per
 * node); values' producer and n_uses are stale until toplu__graph_recount
 * (toplu__infer_graph calls it when nodes were added).  Errors: as toplu__infer_graph.  Not thread-safe on g or table.
 */
toplu_status_t toplu__infer_range(toplu__graph_t *g, toplu__value_table_t *table, int concrete, toplu__eval_fn eval,
                                 void *user, int start, int *end, toplu_error_t *err);

/* Allocate a table for g, filled from the graph's values (constants point at
 * the graph's data, not owned).  Returns NULL on OOM. */
toplu__value_table_t *toplu__value_table_create(const toplu__graph_t *g);
void toplu__value_table_free(const toplu__graph_t *g, toplu__value_table_t *t);

/*
 * Load-time pass on the graph itself: infer symbolic shapes, fold constant
 * subgraphs into constants (their nodes marked dead), merge declared
 * value_info/output shapes, and drop nodes no output depends on.
 */
toplu_status_t toplu__graph_infer(toplu__graph_t *g, toplu__eval_fn eval, void *user, toplu_error_t *err);

/* Free the constants no live node reads (and no graph output lists): what
 * toplu__graph_infer kept for graph/fuse.c (a folded DequantizeLinear's
 * integer input, scale and zero point) and what fusion left unread.  Call
 * once after the graph passes. */
void toplu__graph_free_unread_consts(toplu__graph_t *g);

#endif
