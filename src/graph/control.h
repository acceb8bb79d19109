/*
 * graph/control.h - ONNX control flow (If, Loop, Scan) by inlining.
 *
 * toplu runs no control-flow kernel.  Subgraphs (GRAPH attributes, decoded
 * by onnx/loader.c) are inlined into the graph that holds the node as soon
 * as what steers them is known, and are then inferred, folded and planned
 * like any other nodes (one arena, one liveness plan, no allocation on the
 * run path):
 *   If    when its condition is a constant: at load (a folded condition) or
 *         when a plan is built (a condition that depends on shapes, or on a
 *         small graph input the plan is keyed on: graph/graph.h
 *         toplu__graph_mark_value_inputs, If's condition is a const input);
 *         the chosen branch replaces the node.
 *   Loop  at plan time when its trip count M and condition are constants:
 *         the body is unrolled iteration by iteration, each iteration
 *         inferred and folded before the next, so the body's condition
 *         output must fold to a constant too; scan outputs are Unsqueeze +
 *         Concat of the iterations' values.
 *   Scan  at plan time, where the scan axis length is known (Scan-8: per
 *         batch row, sequence_lens absent or full):
 *         Gather slices each scan input, the body is unrolled, scan outputs
 *         are Unsqueeze + Concat along their axes (directions honoured).
 * A condition or trip count only known from computed tensor values is
 * refused at plan time (TOPLU_ERR_UNSUPPORTED naming the node and tensor).
 *
 * Outer-scope names a subgraph reads become the node's implicit inputs
 * (toplu__node_t.n_implicit), resolved when the graph is built, so the
 * node is sorted after their producers and keeps them alive.
 */
#ifndef TOPLU_GRAPH_CONTROL_H
#define TOPLU_GRAPH_CONTROL_H

#include "graph/graph.h"
#include "graph/infer.h"

/* Most iterations toplu unrolls one Loop or Scan node into; more is
 * refused (TOPLU_ERR_UNSUPPORTED). */
#define TOPLU_CONTROL_MAX_ITERS 4096
/* Most nodes a graph may hold after expanding control flow (nested loops
 * multiply): more is refused (TOPLU_ERR_UNSUPPORTED), so a hostile file
 * cannot make a plan take unbounded memory. */
#define TOPLU_CONTROL_MAX_NODES 262144

/*
 * The outer-scope names the GRAPH attributes among attrs (a control
 * node's) read, nested control nodes' subgraphs included, each once, in a
 * fixed order: *names (malloc'ed;
 * the strings belong to attrs) and *n.  0, or -1 when out of memory.
 * Thread-safe.
 */
int toplu__control_free_names(const toplu__attr_t *attrs, int n_attrs, const char ***names, int *n);

/* Every op in control node n's subgraphs (nested ones too) has a schema:
 * else TOPLU_ERR_UNSUPPORTED naming n, the subgraph, the op and its node,
 * so a model is refused at load, not when a plan first takes that branch.
 * Thread-safe. */
toplu_status_t toplu__control_check_ops(const toplu__graph_t *g, const toplu__node_t *n, toplu_error_t *err);

/* 1 when node n is an ai.onnx If, Loop, Scan or SequenceMap: the ops whose
 * GRAPH attributes toplu reads (other ops' are ignored); SequenceMap is
 * expanded by graph/sequence.c through toplu__control_expand.  Thread-safe. */
int toplu__control_is(const toplu__node_t *n);
/* The same by domain ("" or "ai.onnx") and op type. */
int toplu__control_op(const char *domain, const char *op_type);

/*
 * Expand control-flow node ni of g if what steers it is known in table t
 * (see above; Loop and Scan only when concrete).  On expansion the node is
 * marked dead, new values and nodes are added after it (t grows with g),
 * and *next is the index the caller's walk continues at (the first node not
 * yet inferred); *expanded is 1.  Otherwise *expanded is 0 and nothing
 * changed.  Unrolled iterations are inferred here through
 * toplu__infer_range.  Errors: TOPLU_ERR_UNSUPPORTED (a condition or trip
 * count computed at run time when concrete, an op a body uses that toplu
 * lacks, too many iterations), TOPLU_ERR_INVALID_MODEL (a body whose inputs
 * or outputs do not match the node, a name nothing produces),
 * TOPLU_ERR_OUT_OF_MEMORY; each names the node.  Not thread-safe on g.
 */
toplu_status_t toplu__control_expand(toplu__graph_t *g, toplu__value_table_t *t, int ni, int concrete,
                                    toplu__eval_fn eval, void *user, int *expanded, int *next, toplu_error_t *err);

#endif
