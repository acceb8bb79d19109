/*
 * graph/sequence.h - ONNX sequence and optional values, lowered to tensors
 * when a plan is built.
 *
 * toplu runs no sequence kernel.  A plan binds every input's shape, and a
 * sequence input's length and items' shapes with it (the plan is keyed on
 * them, runtime/plan.c), so every sequence in the graph has a length known
 * at plan time.  A sequence (or optional) value then becomes a list of
 * other values of the plan's graph (toplu__value_t.seq_n, seq_items), and
 * the ops on sequences are rewritten while inference walks the plan's graph
 * (graph/infer.c), each into list bookkeeping or ordinary tensor nodes:
 *   SequenceEmpty, SequenceConstruct, SequenceInsert, SequenceErase,
 *   Optional, Identity of a list, OptionalGetElement of a list
 *                      lists made from lists (no step runs)
 *   SequenceAt         an Identity of the item
 *   SequenceLength, OptionalHasElement
 *                      constants
 *   SplitToSequence    one Slice per item (and a Squeeze per item when
 *                      keepdims is 0 and split is absent)
 *   ConcatFromSequence Concat of the items (Unsqueeze first with new_axis)
 *   SequenceMap        its body inlined once per item (toplu__seq_map, by
 *                      way of graph/control.c, since it has a subgraph)
 * Positions (SequenceInsert, SequenceErase, SequenceAt) must be known when
 * the plan is built (constants, or computed from shapes and loop counters);
 * one computed from tensor data is refused (TOPLU_ERR_UNSUPPORTED naming the
 * node and tensor), as is any other op given a sequence.  Loop-carried and
 * If-returned sequences work because Loop and If are inlined first
 * (graph/control.h).  Sequences hold tensors only (no sequence of
 * sequences).  The ops follow the ONNX operator specification
 * (onnx/docs/Operators.md, opsets 11-18).
 */
#ifndef TOPLU_GRAPH_SEQUENCE_H
#define TOPLU_GRAPH_SEQUENCE_H

#include "graph/expand.h"
#include "graph/graph.h"
#include "graph/infer.h"

/* 1 for the ops this file lowers (not SequenceMap, which graph/control.c
 * handles as it has a subgraph).  Thread-safe. */
int toplu__seq_op(const char *domain, const char *op_type);

/* 1 when node ni must go through toplu__seq_lower: a sequence or optional
 * op, or (at plan time) any node reading a list value.  Thread-safe for
 * readers of g. */
int toplu__seq_needs_lowering(const toplu__graph_t *g, const toplu__node_t *n);

/*
 * Lower node ni of g (see above) when concrete (plan time); at load time
 * (concrete 0) *lowered is 0 and nothing changes (the schema says what it
 * can: unknown outputs).  On lowering the node is marked dead, list values
 * are set on its outputs, helper nodes are inserted after it, *next is the
 * index the walk continues at and *lowered is 1.  Errors:
 * TOPLU_ERR_UNSUPPORTED (a position known only at run time, a sequence
 * given to an op that takes tensors, a nested sequence), TOPLU_ERR_SHAPE
 * (what the run's sequences make wrong: a position out of range, reading
 * or concatenating an empty sequence, the element of an empty optional),
 * TOPLU_ERR_INVALID_MODEL (items of different types, a sequence op given a
 * tensor), TOPLU_ERR_OUT_OF_MEMORY; each names the node.  Not thread-safe
 * on g or t.
 */
toplu_status_t toplu__seq_lower(toplu__graph_t *g, toplu__value_table_t *t, int ni, int concrete, int *lowered,
                               int *next, toplu_error_t *err);

/* SequenceMap node x->owner at plan time: its body inlined per item
 * (inputs that are sequences give their item, tensors are passed whole);
 * each output becomes the list of its per-item values.  Errors as
 * toplu__seq_lower, plus sequences of different lengths
 * (TOPLU_ERR_INVALID_MODEL). */
toplu_status_t toplu__seq_map(toplu__exp_t *x, int concrete, toplu__eval_fn eval, void *user, int *next);

/* Make value v of g a list (kind TOPLU_KIND_SEQUENCE or TOPLU_KIND_OPTIONAL)
 * of items[0..n).  0, or -1 when out of memory. */
int toplu__seq_set(toplu__graph_t *g, int v, toplu_kind_t kind, const int *items, int n);

#endif
