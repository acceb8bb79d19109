/*
 * graph/expand.h - building blocks for rewriting one node into others while
 * inference walks a plan's graph: what graph/control.c inlines If, Loop and
 * Scan with and graph/sequence.c lowers sequence and optional ops with.
 *
 * A toplu__exp_t is made per node being rewritten (the owner).  New nodes
 * are made pending (toplu__exp_pend, toplu__exp_helper), checked against
 * their schema (toplu__exp_check), then moved into the graph after the
 * owner (toplu__exp_insert, toplu__exp_finish), where the caller's walk
 * infers them.  New values (toplu__exp_value, toplu__exp_const) join the
 * value table when the pending nodes are inserted.  Every function reports
 * errors through x->err naming the owner (x->owner_what).  None is
 * thread-safe on x->g or x->t.
 */
#ifndef TOPLU_GRAPH_EXPAND_H
#define TOPLU_GRAPH_EXPAND_H

#include "graph/graph.h"
#include "graph/infer.h"
#include "onnx/onnx_model.h"

typedef struct toplu__exp {
  toplu__graph_t *g;
  toplu__value_table_t *t;
  int owner;           /* the node being rewritten */
  char owner_what[400];
  toplu_error_t *err;
  toplu__node_t *pend; /* nodes made, not yet inserted */
  int n_pend, cap_pend;
} toplu__exp_t;

/* TOPLU_ERR_OUT_OF_MEMORY naming the owner. */
toplu_status_t toplu__exp_oom(toplu__exp_t *x);

/* A new value named like name (name#k when taken).  -1 on OOM. */
int toplu__exp_value(toplu__graph_t *g, const char *name);

/* A new constant value: a scalar (scalar 1) or 1-D tensor of n elements of
 * dt copied from data.  -1 on OOM. */
int toplu__exp_const(toplu__exp_t *x, const char *name, toplu_dtype_t dt, const void *data, int64_t n, int scalar);

/* A new zeroed pending node (file_index of the owner); NULL with x->err set
 * (out of memory, or the graph would pass TOPLU_CONTROL_MAX_NODES).  The
 * pointer is valid until the next toplu__exp_pend. */
toplu__node_t *toplu__exp_pend(toplu__exp_t *x);

/* Check a pending node: schema, opset, attributes and arity. */
toplu_status_t toplu__exp_check(toplu__exp_t *x, toplu__node_t *n);

/* A pending node op (default domain) named "<owner>/<tag>" reading in[0..n_in)
 * and writing out, with at most one INT (or, attr_ints, one-element INTS)
 * attribute attr = attr_val (attr NULL: none); checked. */
toplu_status_t toplu__exp_helper(toplu__exp_t *x, const char *op, const char *tag, const int *in, int n_in, int out,
                                const char *attr, int64_t attr_val, int attr_ints);

/* Unsqueeze in at axis into a new value *out (attribute or input form by opset). */
toplu_status_t toplu__exp_unsqueeze(toplu__exp_t *x, int in, int64_t axis, const char *tag, int *out);

/* Inline subgraph body with its inputs bound to formal[0..n_formal): its
 * nodes become pending, outs[i] the value of body output i.  Outer names
 * resolve through the owner's implicit inputs. */
toplu_status_t toplu__exp_inline(toplu__exp_t *x, const toplu__onnx_model_t *body, const int *formal, int n_formal,
                                int *outs);

/* Move the pending nodes into the graph at *at (the value table follows the
 * values made since old_values); *at moves past them. */
toplu_status_t toplu__exp_insert(toplu__exp_t *x, int *at, int old_values);

/* Insert the pending nodes at *at and mark the owner dead. */
toplu_status_t toplu__exp_finish(toplu__exp_t *x, int *at, int old_values);

/* Infer the nodes just inserted, [start, *at) (*at moves by what nested
 * expansions add). */
toplu_status_t toplu__exp_infer_new(toplu__exp_t *x, int start, int *at, int concrete, toplu__eval_fn eval, void *user);

/* The owner's GRAPH attribute name, or NULL with *st set. */
const toplu__onnx_model_t *toplu__exp_graph_attr(toplu__exp_t *x, const char *name, toplu_status_t *st);

/* Constant one-element value v (of the table) as int64 in *out; role names
 * it in the error (not one element). */
toplu_status_t toplu__exp_scalar(toplu__exp_t *x, int v, const char *role, int64_t *out);

/* TOPLU_ERR_UNSUPPORTED: the owner's role input v is computed at run time. */
toplu_status_t toplu__exp_not_known(toplu__exp_t *x, int v, const char *role);

/* Free the pending nodes (after an error, or once inserted). */
void toplu__exp_free(toplu__exp_t *x);

#endif
