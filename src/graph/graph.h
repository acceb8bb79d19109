/*
 * graph/graph.h - toplu's graph IR.
 *
 * A graph is a list of values (tensors) and nodes in topological order.
 * Nodes refer to values by index; an absent optional input is -1.  Values
 * carry a dtype and dims where a dim >= 0 is known and a dim < 0 is a
 * symbol (TOPLU_SYM(id)), so the batch dim stays symbolic until a plan binds
 * it.  Constant values (initializers, Constant nodes, folded subgraphs) hold
 * their data.  The graph layer owns building this IR from a decoded ONNX
 * file, checking it, sorting it, inferring shapes (graph/infer.h), folding
 * constants (graph/fold.h), fusing (graph/fuse.h) and planning memory
 * (graph/memplan.h).  Op semantics live in graph/schema.h.
 */
#ifndef TOPLU_GRAPH_GRAPH_H
#define TOPLU_GRAPH_GRAPH_H

#include <stddef.h>
#include <stdint.h>

#include "onnx/onnx_model.h"
#include "toplu/status.h"
#include "toplu/tensor.h"

/* Symbolic dims: dims < 0 encode a symbol id. */
#define TOPLU_SYM(id) (-1 - (int64_t)(id))
#define TOPLU_SYM_ID(d) ((int)(-1 - (d)))
#define TOPLU_DIM_KNOWN(d) ((d) >= 0)

struct toplu__schema;

/* Newest ONNX opset (default domain) whose meaning toplu knows: the changes
 * from 20 to 23 add types and new ops, not new meanings for the ops toplu
 * runs.  Newer models are refused with TOPLU_ERR_UNSUPPORTED. */
#define TOPLU_MAX_OPSET 23

typedef struct toplu__value {
  char *name;
  toplu_dtype_t dtype;          /* UNDEFINED until inferred */
  int ndim;                     /* -1: rank unknown */
  int64_t dims[TOPLU_MAX_DIMS]; /* >= 0 known, < 0 symbol */
  int producer;                 /* node index, -1 for graph inputs and constants */
  int graph_input;              /* index in graph->inputs, or -1 */
  int graph_output;             /* 1 when listed among graph->outputs */
  int value_input;              /* graph input whose values decide shapes (see toplu__graph_mark_value_inputs) */
  int value_decider;            /* with value_input: 1 + the index of a node that needs its values (NonZero,
                                   Reshape's shape, If's condition, ...), 0 when unknown */
  int n_uses;                   /* node inputs reading it (+1 per graph output listing) */
  toplu_tensor_t konst;         /* constant value when konst.data != NULL (owned unless konst_shared) */
  int konst_shared;             /* konst.data belongs to another graph (a plan's copy, toplu__graph_clone) */
  /* Sequence and optional values (graph/sequence.h).  kind: what the file
   * declares (graph inputs and outputs) or what a sequence op makes:
   * TOPLU_KIND_TENSOR, _SEQUENCE or _OPTIONAL; elem_kind: a present
   * optional's element kind; elem_dtype: the element tensors' type.  Such
   * a value's dtype is UNDEFINED and ndim -1 until a plan lowers it. */
  toplu_kind_t kind, elem_kind;
  toplu_dtype_t elem_dtype;
  /* At plan time, in a plan's own graph: seq_n >= 0 makes the value a list
   * of seq_n other values (seq_items, malloc'ed): a sequence's items, or an
   * optional's element (0 items: none; seq_kind says which).  -1: an
   * ordinary tensor value. */
  int seq_n;
  int *seq_items;
  toplu_kind_t seq_kind;
} toplu__value_t;

/* An activation or residual add fused into the node before it (Conv, Gemm,
 * MatMul).  Applied in order to the node's output. */
typedef enum toplu__post_kind {
  TOPLU_POST_RELU,        /* max(x, 0) */
  TOPLU_POST_LEAKY_RELU,  /* x >= 0 ? x : alpha x */
  TOPLU_POST_CLIP,        /* min(max(x, alpha), beta) */
  TOPLU_POST_SIGMOID,
  TOPLU_POST_TANH,
  TOPLU_POST_HARD_SIGMOID,/* max(0, min(1, alpha x + beta)) */
  TOPLU_POST_HARD_SWISH,  /* x * max(0, min(1, x/6 + 1/2)) */
  TOPLU_POST_SWISH,       /* x * sigmoid(x) (SiLU: Mul(x, Sigmoid(x)), as PyTorch exports it) */
  TOPLU_POST_SUM,         /* x + value[input] (same shape) */
  TOPLU_POST_LINEAR,      /* alpha x + beta (a scalar Mul/Add after an activation, or first after a MatMul) */
  TOPLU_POST_BIAS,        /* x + value[input][j], j the index along the last axis (MatMul only, first post-op) */
  TOPLU_POST_GELU_ERF,    /* x/2 (1 + erf(x / sqrt 2)) (GELU-20 with approximate "none") */
  TOPLU_POST_MIN_CHANNEL, /* min(x, value[input][c]), c the index along dim 1 (QLinearConv only: a per-channel
                             Min of a QDQ graph, graph/fuse.c) */
  TOPLU_POST_QSUM         /* QLinearConv only (a QDQ residual Add, graph/fuse.c): with b = value[input] (an
                             integer tensor of the output's shape and type), sb, zb = value[input + 1, + 2]
                             and sa, za = value[input + 3, + 4] (constant scalars):
                             sa (saturate(round(x / sa) + za) - za) + sb (b - zb) */
} toplu__post_kind_t;

#define TOPLU_MAX_POST 4
typedef struct toplu__post_op {
  toplu__post_kind_t kind;
  float alpha, beta;
  int input; /* TOPLU_POST_SUM, TOPLU_POST_BIAS, TOPLU_POST_MIN_CHANNEL, TOPLU_POST_QSUM: index into the node's inputs
                of the operand (the first of QSUM's five) */
} toplu__post_op_t;

typedef struct toplu__node {
  char *name;                   /* never NULL; "" in the file becomes "<op_type>_<index>" */
  char *op_type;
  char *domain;                 /* "" for ai.onnx */
  int64_t opset;                /* opset version of the node's domain */
  int n_inputs, n_outputs, n_attrs;
  int *inputs;                  /* value indices; -1 = absent optional input */
  int *outputs;                 /* value indices; -1 = output not requested */
  toplu__attr_t *attrs;
  const struct toplu__schema *schema;
  int n_post;                   /* fused post-ops (graph/fuse.h) */
  toplu__post_op_t post[TOPLU_MAX_POST];
  char *fused_name;             /* "Conv+Relu" after fusion, else NULL */
  char *fused_nodes;            /* names of the nodes fused into this one, comma-separated, else NULL */
  int dead;                     /* removed by an optimisation pass */
  int file_index;               /* position in the file's node list (messages use it) */
  /* If, Loop, Scan: the last n_implicit inputs are the outer-scope values
   * their subgraphs read, in the order toplu__control_free_names lists the
   * names (graph/control.h), so liveness and topological order see them. */
  int n_implicit;
  int attrs_shared;             /* attrs belong to another graph (toplu__graph_clone): not freed */
} toplu__node_t;

typedef struct toplu__graph {
  char *path; /* the model file, for messages */
  int n_values, cap_values;
  toplu__value_t *values;
  int n_nodes, cap_nodes;
  toplu__node_t *nodes; /* topological order after toplu__graph_build */
  int n_inputs, n_outputs;
  int *inputs;  /* values fed by the caller (initializers excluded) */
  int *outputs;
  int n_symbols;
  char **symbols; /* dim_param names; generated ones start with "?" */
  int64_t opset;  /* of the default domain */
  /* names -> value index */
  int *name_table;
  size_t name_table_cap;
} toplu__graph_t;

/*
 * Build a graph from a decoded file: resolve names (an input no node,
 * initializer or graph input produces is an error naming node and input),
 * reject duplicate producers, sort topologically (a cycle is an error naming
 * a node on it), look up each node's schema for its domain and opset
 * (unknown op, unknown domain or an opset outside the supported range is
 * TOPLU_ERR_UNSUPPORTED naming the node), and take over the initializers'
 * data (the onnx model keeps no data afterwards).  Initializers listed as
 * graph inputs (IR < 4) are constants, not inputs.  Shapes are not inferred
 * here (see toplu__graph_infer).
 */
toplu_status_t toplu__graph_build(toplu__onnx_model_t *om, toplu__graph_t **out, toplu_error_t *err);

void toplu__graph_free(toplu__graph_t *g);

/*
 * A copy of g whose structure (values, nodes) can grow without touching g:
 * what a plan inlines control flow into (graph/control.h).  Constants and
 * attributes are shared with g, not copied (konst_shared, attrs_shared), so
 * g must outlive the copy and nobody may change them through it.  NULL when
 * out of memory.  Thread-safe for concurrent readers of g.
 */
toplu__graph_t *toplu__graph_clone(const toplu__graph_t *g);

/* 1 when a live node of g is If, Loop or Scan, or g has sequence or
 * optional values (inputs, outputs or ops: graph/sequence.h), all left for
 * plan time, which then inlines or lowers them into a toplu__graph_clone.
 * No errors; thread-safe for concurrent readers of g. */
int toplu__graph_has_control(const toplu__graph_t *g);

/* 1 when an input or output of g is a sequence or optional (graph/sequence.h).
 * Thread-safe for readers of g. */
int toplu__graph_has_lists(const toplu__graph_t *g);

/* Value index by name, -1 if none. */
int toplu__graph_find_value(const toplu__graph_t *g, const char *name);

/* Add a value (name copied; NULL makes a unique one).  Returns index or -1 (OOM). */
int toplu__graph_add_value(toplu__graph_t *g, const char *name);

/* Symbol id for a dim_param name, creating it; NULL name makes a fresh
 * anonymous symbol.  -1 on OOM. */
int toplu__graph_symbol(toplu__graph_t *g, const char *name);

/* Name of symbol id (for display). */
const char *toplu__graph_symbol_name(const toplu__graph_t *g, int id);

/*
 * Mark graph inputs whose *values* (not only shapes) decide tensor shapes:
 * those that reach an input a schema lists in const_inputs (Reshape's shape,
 * Unsqueeze's axes, Slice's starts, Resize's scales...) through ops other
 * than Shape and Size.  Plans bind such inputs' values like constants and
 * key on them, so a model that takes its Reshape target as an input runs.
 * Inputs that steer control flow (If's condition, Loop's trip count and
 * condition: graph/control.h) are marked too when they are small (every
 * dim known, at most 64 elements, one when floating point: Silero VAD's
 * sample rate, Range's bounds), so the chosen branch is planned like the
 * rest; a data tensor is never marked for them.  Returns the number marked.
 */
int toplu__graph_mark_value_inputs(toplu__graph_t *g);

/* Recount n_uses and producers after passes changed the graph. */
void toplu__graph_recount(toplu__graph_t *g);

/* Attribute accessors on a node (defaults when absent). */
const toplu__attr_t *toplu__node_attr(const toplu__node_t *n, const char *name);
int64_t toplu__node_attr_int(const toplu__node_t *n, const char *name, int64_t dflt);
float toplu__node_attr_float(const toplu__node_t *n, const char *name, float dflt);
const char *toplu__node_attr_string(const toplu__node_t *n, const char *name, const char *dflt);
/* INTS attribute: returns count (or -1 when absent) and sets *vals. */
int64_t toplu__node_attr_ints(const toplu__node_t *n, const char *name, const int64_t **vals);
int64_t toplu__node_attr_floats(const toplu__node_t *n, const char *name, const float **vals);
/* INTS attribute that must hold exactly count values (strides, pads ...):
 * absent: out[] = dflt and 1 is returned; present with count values: copied,
 * 1; present with another count: 0, *found = that count (out untouched). */
int toplu__node_attr_ints_n(const toplu__node_t *n, const char *name, int count, int64_t dflt, int64_t *out,
                           int64_t *found);

/* "[N, 3, ?, 224]" for messages: dims of g's values, symbols by name ("?"
 * for unnamed unknown dims); always NUL-terminated; returns buf. */
char *toplu__graph_shape_format(const toplu__graph_t *g, int ndim, const int64_t *dims, char *buf, size_t size);

/* "node 12 'conv1' (Conv)" for messages: 12 is the node's position in the
 * file's node list (0-based), as a model viewer shows it. */
const char *toplu__node_describe(const toplu__graph_t *g, const toplu__node_t *n, char *buf, size_t size);

#endif
