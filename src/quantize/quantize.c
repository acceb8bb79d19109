/*
 * quantize/quantize.c - toplu_quantize (toplu/quantize.h): read the model's
 * ModelProto, fold BatchNormalization and bias Adds into convolutions, move
 * it to opset 13, choose the nodes and tensors to quantize, calibrate their
 * ranges with toplu's engine on the calibration rows (the tensors are made
 * graph outputs of an in-memory copy of the file, so one run per batch gives
 * them all), insert QuantizeLinear/DequantizeLinear, write the file, and
 * optionally measure every quantized node's error against float (report).
 */
#include <errno.h>
#include <fcntl.h>
#include <fnmatch.h>
#include <jansson.h>
#include <limits.h>
#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/error.h"
#include "core/log.h"
#include "graph/graph.h"
#include "onnx/onnx_model.h"
#include "pipeline/files.h"
#include "pipeline/identity.h"
#include "pipeline/source.h"
#include "quantize/calib.h"
#include "quantize/opset.h"
#include "quantize/proto.h"
#include "runtime/model_internal.h"
#include "toplu/model.h"
#include "toplu/quantize.h"
#include "toplu/session.h"

/* An activation tensor to quantize. */
typedef struct qz_act {
  char *name;
  int node;        /* the quantized node whose output it is (after its Relu/Clip), or -1 */
  double cap;      /* the top of the Clip (or 6 of a Relu6) it comes from, else 0 */
  qz_range_t range;
  double lo, hi;   /* the range picked */
  float scale;
  int32_t zp;
  double est;       /* the estimate of the node whose output it is (-1: none) */
  int watch;        /* observed only, for the error estimate (a weighted node's raw output): never quantized */
  int skip;         /* left float: read only by nodes left float for their error estimate */
  int ch_axis;      /* >= 0 (or -2: the last axis): keep the mean square per channel along it */
  double *ch_sq;    /* [n_ch] sums of squares per channel */
  int64_t n_ch;
  double ch_count;  /* values per channel so far */
  char *s_name, *z_name, *dq_name; /* its scale, zero point and DequantizeLinear output (s_name NULL: left float) */
  /* report: the quantized model's value of it (the tensor cmp of the quantized model; NULL: not compared) against
   * the float one */
  char *cmp;
  double err2, ref2, maxabs;
  int64_t cmp_nonfinite; /* values where the float model gave NaN or Inf (not compared) */
} qz_act_t;

/* A node of the chosen op types, for the report and the notes: quantized, or why not. */
typedef struct qz_cand {
  int node;           /* its index in the graph from choose to insert_qdq */
  char *name, *op;    /* its name (OPTYPE_INDEX for an unnamed node: name_nodes) and op type */
  char *out;          /* its output, after a Relu or Clip that alone reads it */
  const char *reason; /* NULL: quantized; else a QZ_WHY_* code */
  int act;            /* the act whose float and quantized values the report compares, or -1 */
} qz_cand_t;

/* Why a node of the chosen op types stays float (the report's "reason"; docs/quantize.md). */
#define QZ_WHY_EXCLUDED "excluded"
#define QZ_WHY_INPUTS "inputs"
#define QZ_WHY_OUTPUT "output_not_float"
#define QZ_WHY_ERROR "estimated_error"

typedef struct qz {
  const toplu_quantize_options_t *o;
  toplu_quantize_stats_t st;
  Onnx__ModelProto *mp;
  Onnx__GraphProto *g;
  int64_t opset;
  int per_channel;
  toplu_model_t *ref; /* the file as loaded without optimisation: dtypes */
  char *ops;          /* the op types, ",Conv,Gemm," */
  qz_act_t *act;
  int n_act, cap_act;
  int *node_out;      /* per node (after folding): index into act of its quantized output, or -1 */
  unsigned char *sel; /* per node: quantized */
  int *in_act, *raw_act; /* per node: act index of its input and raw output (weighted nodes), else -1 */
  double *est;        /* per node: the estimated relative RMS error quantization adds to its output, or -1 */
  double *est_in;     /* per weighted node: the same without its output's step (-1: none); see leave_noisy_float */
  int64_t run_bad;    /* calibration rows the model refused at their shape (left out), this pass */
  qz_cand_t *cand;    /* the nodes of the chosen op types, in graph order */
  int n_cand;
  int *cand_of;       /* per node (after folding): index into cand, or -1 */
  Onnx__NodeProto **front; /* weight DequantizeLinear nodes, emitted first */
  int n_front;
  int64_t t0;
  double last_progress;
  int64_t last_rows; /* rows_done at the last progress call (-1: none yet) */
  int in_memory;      /* toplu_quantize_model: no file; with no calibration source, synthetic rows */
  int writing;        /* the model is built: writing the files (for the message of a cancel) */
} qz_t;

static void note(qz_t *q, toplu_log_level_t lvl, const char *fmt, ...) TOPLU_PRINTF(3, 4);
static void note(qz_t *q, toplu_log_level_t lvl, const char *fmt, ...) {
  if (!q->o->log) return;
  char msg[TOPLU_ERROR_MESSAGE_MAX];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  toplu__logf(q->o->log, q->o->log_user, lvl, "%s", msg);
}

static toplu_status_t oom(toplu_error_t *err) { return toplu__errorf(err, TOPLU_ERR_OUT_OF_MEMORY, "out of memory quantizing"); }

/* 1 when name is a node name or an output of the graph's nodes or of the weight DequantizeLinear nodes
 * waiting in q->front. */
static int front_or_node_name(const qz_t *q, const char *name) {
  for (int i = 0; i < q->n_front; i++)
    if ((q->front[i]->name && !strcmp(q->front[i]->name, name)) ||
        (q->front[i]->n_output && !strcmp(q->front[i]->output[0], name)))
      return 1;
  for (size_t i = 0; i < q->g->n_node; i++)
    if (q->g->node[i]->name && !strcmp(q->g->node[i]->name, name)) return 1;
  return 0;
}

/* qp_unique, also unused by the nodes waiting in q->front and by node names: a weight or bias that two
 * nodes share is quantized once per reader, each copy under names of its own (before 2026-12-06 the
 * second copy took the first's DequantizeLinear names: two nodes writing one output, a file that
 * onnx.checker, ONNX Runtime and toplu refused). */
static char *qz_unique(const qz_t *q, const char *base, const char *suffix) {
  char *s = qp_unique(q->g, base, suffix);
  if (!s || !front_or_node_name(q, s)) return s;
  size_t n = strlen(base) + strlen(suffix) + 24;
  char *t = realloc(s, n);
  if (!t) {
    free(s);
    return NULL;
  }
  for (int k = 1;; k++) {
    snprintf(t, n, "%s%s_%d", base, suffix, k);
    if (!qp_name_used(q->g, t) && !front_or_node_name(q, t)) return t;
  }
}

static int is_op(const Onnx__NodeProto *n, const char *op) {
  return n && !strcmp(n->op_type, op) && (!n->domain || !*n->domain || !strcmp(n->domain, "ai.onnx"));
}

/* The dtype of tensor name in the unoptimised graph (UNDEFINED when unknown). */
static toplu_dtype_t dtype_of(const qz_t *q, const char *name) {
  const toplu__graph_t *gr = q->ref->graph;
  int v = toplu__graph_find_value(gr, name);
  return v >= 0 ? gr->values[v].dtype : TOPLU_DTYPE_UNDEFINED;
}

/* The rank of tensor name in the unoptimised graph, or -1 (qz_rank_fn). */
static int rank_of(void *user, const char *name) {
  const qz_t *q = user;
  const toplu__graph_t *gr = q->ref->graph;
  int v = toplu__graph_find_value(gr, name);
  return v >= 0 ? gr->values[v].ndim : -1;
}

/* A float tensor computed at run time (not an initializer nor a Constant's output, nor folded). */
static int is_activation(const qz_t *q, const char *name) {
  if (!name || !*name || qp_init_find(q->g, name) >= 0) return 0;
  int p = qp_producer(q->g, name);
  if (p >= 0 && is_op(q->g->node[p], "Constant")) return 0;
  const toplu__graph_t *gr = q->ref->graph;
  int v = toplu__graph_find_value(gr, name);
  return v >= 0 && gr->values[v].dtype == TOPLU_DTYPE_FLOAT && !gr->values[v].konst.data;
}

/* Decode initializer i as float (else an error naming it). */
static toplu_status_t init_float(const qz_t *q, int i, toplu_tensor_t *t, toplu_error_t *err) {
  const Onnx__TensorProto *tp = q->g->initializer[i];
  toplu_status_t st = toplu__onnx_tensor_from_proto(tp, NULL, tp->name, t, err);
  if (st) return st;
  if (t->dtype != TOPLU_DTYPE_FLOAT) {
    toplu_tensor_free(t);
    return toplu__errorf(err, TOPLU_ERR_UNSUPPORTED, "initializer '%s' is %s, not float", tp->name,
                        toplu_dtype_name(t->dtype));
  }
  return TOPLU_OK;
}

/* A float initializer or Constant scalar value of name in *v; 1 found. */
static int const_scalar(const qz_t *q, const char *name, double *v) {
  int i = name && *name ? qp_init_find(q->g, name) : -1;
  if (i < 0) {
    const toplu__graph_t *gr = q->ref->graph;
    int k = name && *name ? toplu__graph_find_value(gr, name) : -1;
    if (k < 0 || !gr->values[k].konst.data || gr->values[k].konst.dtype != TOPLU_DTYPE_FLOAT ||
        toplu_tensor_numel(&gr->values[k].konst) != 1)
      return 0;
    *v = *(const float *)gr->values[k].konst.data;
    return 1;
  }
  toplu_tensor_t t;
  toplu_error_t e;
  if (init_float(q, i, &t, &e)) return 0;
  int ok = toplu_tensor_numel(&t) == 1;
  if (ok) *v = *(const float *)t.data;
  toplu_tensor_free(&t);
  return ok;
}

/* A node without a name in the file gets OPTYPE_INDEX, its op type and its index among the file's nodes (as the
 * graph loader names it, graph/graph.c), so options.exclude, the notes and the report can name it; the written
 * model keeps the name.  Called on the file's graph before anything is folded.  0, or -1 out of memory. */
static int name_nodes(Onnx__GraphProto *g) {
  for (size_t i = 0; i < g->n_node; i++) {
    Onnx__NodeProto *n = g->node[i];
    if (n->name && *n->name) continue;
    size_t len = strlen(n->op_type ? n->op_type : "") + 48;
    char *nm = malloc(len);
    if (!nm) return -1;
    snprintf(nm, len, "%s_%zu", n->op_type ? n->op_type : "", i);
    /* a name another node has already (a Conv named Conv_1 before an unnamed Conv at index 1) gets a suffix:
     * two nodes of one name are a model ONNX Runtime refuses (a fresh user's finding of 2026-12-06) */
    for (int k = 1; qp_node_name_used(g, nm); k++) snprintf(nm, len, "%s_%zu_%d", n->op_type ? n->op_type : "", i, k);
    free(n->name); /* NULL, or an empty string the unpacking allocated (onnx.proto is proto2: no default) */
    n->name = nm;
  }
  return 0;
}

/* ---- constants as initializers ---- */

/* Constant(value=T) nodes become initializers (as paddle2onnx writes weights), and Reshape(initializer, constant
 * shape) of an initializer read by nothing else becomes the reshaped initializer (MNIST's MatMul weights), so the
 * weights are found where the quantizer looks for them. */
static toplu_status_t constants_to_initializers(qz_t *q, toplu_error_t *err) {
  Onnx__GraphProto *g = q->g;
  int moved = 0;
  for (size_t i = 0; i < g->n_node; i++) {
    Onnx__NodeProto *n = g->node[i];
    Onnx__AttributeProto *a = is_op(n, "Constant") && n->n_output == 1 && n->n_attribute == 1 ? qp_attr(n, "value") : NULL;
    if (!a || !a->t || qp_is_graph_output(g, n->output[0])) continue;
    Onnx__TensorProto **ni = realloc(g->initializer, (g->n_initializer + 1) * sizeof *ni);
    if (!ni) return oom(err);
    g->initializer = ni;
    Onnx__TensorProto *t = a->t;
    a->t = NULL;
    free(t->name);
    t->name = n->output[0];
    n->output[0] = NULL;
    n->n_output = 0;
    g->initializer[g->n_initializer++] = t;
    qp_node_remove(g, (int)i);
    moved++;
  }
  qp_compact(g);
  /* Identity(initializer): its readers read the initializer itself (torch writes one per copy of a weight it stored
   * once, as the layers of an untrained TransformerEncoder, which are copies of one layer: their MatMuls stayed
   * float without a word, a fresh user's finding of 2026-12-06).  Not where a subgraph may read the name. */
  int subgraphs = 0;
  for (size_t i = 0; i < g->n_node && !subgraphs; i++)
    for (size_t k = 0; k < g->node[i]->n_attribute && !subgraphs; k++)
      subgraphs = g->node[i]->attribute[k]->g != NULL || g->node[i]->attribute[k]->n_graphs > 0;
  for (size_t i = 0; i < g->n_node && !subgraphs; i++) {
    Onnx__NodeProto *n = g->node[i];
    if (!is_op(n, "Identity") || n->n_input != 1 || n->n_output != 1 || qp_init_find(g, n->input[0]) < 0 ||
        qp_is_graph_output(g, n->output[0]))
      continue;
    for (size_t r = 0; r < g->n_node; r++)
      for (size_t k = 0; r != i && k < g->node[r]->n_input; k++)
        if (!strcmp(g->node[r]->input[k], n->output[0]) && qp_set_input(g->node[r], (int)k, n->input[0])) return oom(err);
    qp_node_remove(g, (int)i);
    qp_compact(g);
    i--;
    moved++;
  }
  for (size_t i = 0; i < g->n_node; i++) {
    Onnx__NodeProto *n = g->node[i];
    if (!is_op(n, "Reshape") || n->n_input != 2 || n->n_output != 1 || qp_is_graph_output(g, n->output[0])) continue;
    int di = qp_init_find(g, n->input[0]), si = qp_init_find(g, n->input[1]);
    if (di < 0 || si < 0 || qp_readers(g, n->input[0], NULL) != 1 || qp_attr_int(n, "allowzero", 0)) continue;
    toplu_tensor_t sh;
    if (toplu__onnx_tensor_from_proto(g->initializer[si], NULL, n->input[1], &sh, err)) {
      toplu_error_clear(err);
      continue;
    }
    Onnx__TensorProto *d = g->initializer[di];
    int64_t numel = 1, known = 1, dims[TOPLU_MAX_DIMS];
    for (size_t k = 0; k < d->n_dims; k++) numel *= d->dims[k];
    int64_t nd = toplu_tensor_numel(&sh), minus = -1;
    int ok = sh.dtype == TOPLU_DTYPE_INT64 && nd <= TOPLU_MAX_DIMS;
    for (int64_t k = 0; ok && k < nd; k++) {
      int64_t v = ((const int64_t *)sh.data)[k];
      if (v == 0) v = (size_t)k < d->n_dims ? d->dims[k] : -2;
      if (v == -1 && minus < 0) minus = k;
      else if (v < 0) ok = 0;
      else known *= v;
      dims[k] = v;
    }
    toplu_tensor_free(&sh);
    if (!ok || known == 0) continue;
    if (minus >= 0) dims[minus] = numel / known;
    int64_t check = 1;
    for (int64_t k = 0; k < nd; k++) check *= dims[k];
    if (check != numel) continue;
    int64_t *nds = malloc((size_t)(nd ? nd : 1) * sizeof *nds);
    if (!nds) return oom(err);
    memcpy(nds, dims, (size_t)nd * sizeof *nds);
    free(d->dims);
    d->dims = nds;
    d->n_dims = (size_t)nd;
    qp_input_remove(g, d->name); /* an IR < 4 file lists it among the inputs: the old name goes */
    free(d->name);
    d->name = n->output[0];
    n->output[0] = NULL;
    n->n_output = 0;
    char *shape_name = strdup(n->input[1]);
    qp_node_remove(g, (int)i);
    if (shape_name && qp_readers(g, shape_name, NULL) == 0) qp_init_remove(g, qp_init_find(g, shape_name));
    free(shape_name);
    qp_compact(g);
    i--;
    moved++;
  }
  (void)moved;
  return TOPLU_OK;
}

/* ---- the written graph's initializers ---- */

static int cmp_str(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

/* Appends every name a node of g reads, subgraphs' nodes included (they may read the outer graph's
 * initializers), to (*v)[*n..]; -1 when out of memory. */
static int collect_reads(const Onnx__GraphProto *g, char ***v, size_t *n, size_t *cap) {
  for (size_t i = 0; i < g->n_node; i++) {
    const Onnx__NodeProto *nd = g->node[i];
    if (!nd) continue;
    for (size_t k = 0; k < nd->n_input; k++) {
      if (*n == *cap) {
        size_t c = *cap ? *cap * 2 : 256;
        char **nv = realloc(*v, c * sizeof *nv);
        if (!nv) return -1;
        *v = nv, *cap = c;
      }
      (*v)[(*n)++] = nd->input[k];
    }
    for (size_t a = 0; a < nd->n_attribute; a++) {
      const Onnx__AttributeProto *at = nd->attribute[a];
      if (at->g && collect_reads(at->g, v, n, cap)) return -1;
      for (size_t k = 0; k < at->n_graphs; k++)
        if (collect_reads(at->graphs[k], v, n, cap)) return -1;
    }
  }
  return 0;
}

/* Initializers nothing reads (a folded BatchNormalization's parameters, a float weight that an int8 copy replaced,
 * the source file's own dead weights) are left out of the written file; the others stay initializers only, also
 * where the source listed them among the graph inputs too (files of IR version < 4 list every weight there), so a
 * runtime takes them as constants: ONNX Runtime neither folds nor fuses a weight that is also an input (it says
 * so), and an int8 model's weights are not meant to be replaced.  The graph inputs are then the model's real
 * inputs.  -1 when out of memory (the graph unchanged). */
static int tidy_initializers(Onnx__GraphProto *g) {
  char **reads = NULL;
  size_t n = 0, cap = 0;
  if (collect_reads(g, &reads, &n, &cap)) {
    free(reads);
    return -1;
  }
  if (n) qsort(reads, n, sizeof *reads, cmp_str);
  for (size_t i = 0; i < g->n_initializer; i++) {
    char *name = g->initializer[i]->name;
    if (!name) continue;
    int read = n && bsearch(&name, reads, n, sizeof *reads, cmp_str) != NULL;
    if (!read && !qp_is_graph_output(g, name)) qp_init_remove(g, (int)i);
    else qp_input_remove(g, name);
  }
  free(reads);
  qp_compact(g);
  return 0;
}

/* ---- folding into convolutions ---- */

/* Conv -> BatchNormalization (the Conv's only reader, constant parameters):
 * W' = W g / sqrt(var + eps) per output channel, B' = (B - mean) g / sqrt(var + eps) + beta. */
static toplu_status_t fold_bn(qz_t *q, toplu_error_t *err) {
  Onnx__GraphProto *g = q->g;
  for (size_t ci = 0; ci < g->n_node; ci++) {
    Onnx__NodeProto *c = g->node[ci];
    if (!is_op(c, "Conv") || c->n_input < 2 || c->n_output != 1) continue;
    int bi;
    qp_readers(g, c->output[0], &bi);
    if (bi < 0 || !is_op(g->node[bi], "BatchNormalization") || g->node[bi]->n_output != 1) continue;
    Onnx__NodeProto *bn = g->node[bi];
    if (bn->n_input != 5 || strcmp(bn->input[0], c->output[0])) continue;
    int wi = qp_init_find(g, c->input[1]), b0 = c->n_input > 2 && *c->input[2] ? qp_init_find(g, c->input[2]) : -1;
    if (wi < 0 || (c->n_input > 2 && *c->input[2] && b0 < 0)) continue;
    int pi[4];
    int ok = 1;
    for (int k = 0; k < 4; k++) ok &= (pi[k] = qp_init_find(g, bn->input[1 + k])) >= 0;
    if (!ok || qp_readers(g, c->input[1], NULL) != 1) continue;
    toplu_tensor_t w, p[4], b = {0};
    if (init_float(q, wi, &w, err)) continue;
    int loaded = 0;
    for (int k = 0; k < 4; k++, loaded++)
      if (init_float(q, pi[k], &p[k], err)) break;
    int64_t m = w.ndim >= 1 ? w.dims[0] : 0;
    ok = loaded == 4 && m > 0;
    for (int k = 0; ok && k < 4; k++) ok = toplu_tensor_numel(&p[k]) == m;
    if (ok && b0 >= 0) ok = !init_float(q, b0, &b, err) && toplu_tensor_numel(&b) == m;
    float *nb = ok ? malloc((size_t)m * sizeof *nb) : NULL;
    if (ok && nb) {
      double eps = 1e-5;
      Onnx__AttributeProto *a = qp_attr(bn, "epsilon");
      if (a && a->has_f) eps = a->f;
      int64_t per = toplu_tensor_numel(&w) / m;
      float *wd = w.data;
      const float *gm = p[0].data, *bt = p[1].data, *mu = p[2].data, *var = p[3].data;
      for (int64_t k = 0; k < m; k++) {
        double f = gm[k] / sqrt((double)var[k] + eps);
        for (int64_t j = 0; j < per; j++) wd[k * per + j] = (float)(wd[k * per + j] * f);
        nb[k] = (float)(((b.data ? ((const float *)b.data)[k] : 0.0) - mu[k]) * f + bt[k]);
      }
      char *bn_name = NULL;
      int okw = !qp_init_set_float(g->initializer[wi], w.ndim, w.dims, wd);
      if (okw && b0 >= 0 && qp_readers(g, c->input[2], NULL) == 1) {
        okw = !qp_init_set_float(g->initializer[b0], 1, &m, nb);
      } else if (okw) {
        bn_name = qp_unique(g, c->input[1], "_bias");
        okw = bn_name && qp_init_add(g, bn_name, TOPLU_DTYPE_FLOAT, 1, &m, nb, (size_t)m * sizeof *nb) >= 0 &&
              !qp_set_input(c, 2, bn_name);
      }
      free(bn_name);
      if (okw) {
        char *out = bn->output[0];
        bn->output[0] = NULL;
        free(c->output[0]);
        c->output[0] = out;
        bn->n_output = 0;
        qp_node_remove(g, bi);
        q->st.nodes_folded++;
      } else {
        free(nb);
        nb = NULL;
      }
    }
    int failed_oom = ok && !nb;
    free(nb);
    toplu_tensor_free(&w);
    toplu_tensor_free(&b);
    for (int k = 0; k < loaded; k++) toplu_tensor_free(&p[k]);
    if (failed_oom) return oom(err);
    qp_compact(g);
    toplu_error_clear(err);
  }
  return TOPLU_OK;
}

/* Conv -> Add(constant of C values along dim 1: [C,1,1] or [1,C,1,1]), the Conv's only reader: into its bias. */
static toplu_status_t fold_bias_add(qz_t *q, toplu_error_t *err) {
  Onnx__GraphProto *g = q->g;
  for (size_t ci = 0; ci < g->n_node; ci++) {
    Onnx__NodeProto *c = g->node[ci];
    if (!c || !is_op(c, "Conv") || c->n_input < 2 || c->n_output != 1) continue;
    int ai;
    qp_readers(g, c->output[0], &ai);
    if (ai < 0 || !is_op(g->node[ai], "Add") || g->node[ai]->n_input != 2) continue;
    Onnx__NodeProto *ad = g->node[ai];
    const char *other = !strcmp(ad->input[0], c->output[0]) ? ad->input[1] : ad->input[0];
    int oi = qp_init_find(g, other), wi = qp_init_find(g, c->input[1]);
    if (oi < 0 || wi < 0 || qp_readers(g, other, NULL) != 1) continue;
    const Onnx__TensorProto *ot = g->initializer[oi], *wt = g->initializer[wi];
    if (wt->n_dims < 3) continue;
    int64_t m = wt->dims[0], rank = (int64_t)wt->n_dims;
    /* the shape must put the C values on dim 1 of the rank-`rank` output */
    int64_t numel = 1;
    for (size_t d = 0; d < ot->n_dims; d++) numel *= ot->dims[d];
    int64_t axis_from_end = -1;
    for (size_t d = 0; d < ot->n_dims; d++)
      if (ot->dims[d] == m) axis_from_end = (int64_t)ot->n_dims - 1 - (int64_t)d;
    if (numel != m || axis_from_end != rank - 2) continue;
    toplu_tensor_t add, b = {0};
    if (init_float(q, oi, &add, err)) {
      toplu_error_clear(err);
      continue;
    }
    int b0 = c->n_input > 2 && *c->input[2] ? qp_init_find(g, c->input[2]) : -1;
    if (c->n_input > 2 && *c->input[2] && (b0 < 0 || qp_readers(g, c->input[2], NULL) != 1 || init_float(q, b0, &b, err))) {
      toplu_tensor_free(&add);
      toplu_error_clear(err);
      continue;
    }
    float *nb = malloc((size_t)m * sizeof *nb);
    if (!nb) {
      toplu_tensor_free(&add);
      toplu_tensor_free(&b);
      return oom(err);
    }
    for (int64_t k = 0; k < m; k++) nb[k] = (b.data ? ((const float *)b.data)[k] : 0.0f) + ((const float *)add.data)[k];
    int ok;
    if (b0 >= 0) {
      ok = !qp_init_set_float(g->initializer[b0], 1, &m, nb);
    } else {
      char *bn = qp_unique(g, c->input[1], "_bias");
      ok = bn && qp_init_add(g, bn, TOPLU_DTYPE_FLOAT, 1, &m, nb, (size_t)m * sizeof *nb) >= 0 && !qp_set_input(c, 2, bn);
      free(bn);
    }
    free(nb);
    toplu_tensor_free(&add);
    toplu_tensor_free(&b);
    if (!ok) return oom(err);
    char *out = ad->output[0];
    ad->output[0] = NULL;
    ad->n_output = 0;
    free(c->output[0]);
    c->output[0] = out;
    char *other_name = strdup(other); /* `other` lives in the Add, freed next */
    qp_node_remove(g, ai);
    int drop = other_name ? qp_init_find(g, other_name) : -1;
    if (drop >= 0 && qp_readers(g, other_name, NULL) == 0) qp_init_remove(g, drop);
    free(other_name);
    qp_compact(g);
    q->st.nodes_folded++;
  }
  return TOPLU_OK;
}

/* ---- choosing what to quantize ---- */

static int op_wanted(const qz_t *q, const char *op) {
  char key[128];
  snprintf(key, sizeof key, ",%s,", op);
  return strstr(q->ops, key) != NULL;
}

/* Index of the activation record of name (added when missing); -1 out of memory. */
static int act_add(qz_t *q, const char *name) {
  for (int i = 0; i < q->n_act; i++)
    if (!strcmp(q->act[i].name, name)) return i;
  if (q->n_act == q->cap_act) {
    int nc = q->cap_act ? 2 * q->cap_act : 64;
    qz_act_t *na = realloc(q->act, (size_t)nc * sizeof *na);
    if (!na) return -1;
    q->act = na;
    q->cap_act = nc;
  }
  qz_act_t *a = &q->act[q->n_act];
  memset(a, 0, sizeof *a);
  a->node = -1;
  a->est = -1;
  a->ch_axis = -1;
  int hist = q->o->method != TOPLU_CALIB_MINMAX;
  if (!(a->name = strdup(name)) || qz_range_init(&a->range, hist)) {
    free(a->name);
    return -1;
  }
  return q->n_act++;
}

/* The weight input of node n (its index), or -1 when n takes none. */
static int weight_input(const qz_t *q, const Onnx__NodeProto *n) {
  if ((is_op(n, "Conv") || is_op(n, "ConvTranspose")) && n->n_input >= 2) {
    int i = qp_init_find(q->g, n->input[1]);
    return i >= 0 && q->g->initializer[i]->n_dims >= 3 && q->g->initializer[i]->data_type == TOPLU_DTYPE_FLOAT ? 1 : -1;
  }
  if ((is_op(n, "Gemm") || is_op(n, "MatMul")) && n->n_input >= 2) {
    int i = qp_init_find(q->g, n->input[1]);
    if (is_op(n, "Gemm") && qp_attr_int(n, "transA", 0)) return -1;
    return i >= 0 && q->g->initializer[i]->n_dims == 2 && q->g->initializer[i]->data_type == TOPLU_DTYPE_FLOAT ? 1 : -1;
  }
  return -1;
}

/* Every name in options.exclude must be a node's. */
static toplu_status_t check_exclude(qz_t *q, toplu_error_t *err) {
  const Onnx__GraphProto *g = q->g;
  const char *ex = q->o->exclude ? q->o->exclude : "";
  while (*ex) {
    const char *e = strchr(ex, ',');
    size_t len = e ? (size_t)(e - ex) : strlen(ex);
    int found = len == 0;
    for (size_t i = 0; !found && i < g->n_node; i++)
      found = g->node[i]->name && strlen(g->node[i]->name) == len && !strncmp(g->node[i]->name, ex, len);
    if (!found)
      return toplu__errorf(err, TOPLU_ERR_NOT_FOUND, "exclude: the model %s has no node named '%.*s'", q->o->model,
                          (int)len, ex);
    ex += len + (e ? 1 : 0);
  }
  return TOPLU_OK;
}

/* *hit: does options.exclude name node n?  -1 out of memory. */
static int is_excluded(const qz_t *q, const Onnx__NodeProto *n, int *hit) {
  *hit = 0;
  if (!q->o->exclude || !n->name || !*n->name) return 0;
  char key[1024];
  snprintf(key, sizeof key, ",%s,", n->name);
  size_t el = strlen(q->o->exclude) + 3;
  char *list = malloc(el);
  if (!list) return -1;
  snprintf(list, el, ",%s,", q->o->exclude);
  *hit = strstr(list, key) != NULL;
  free(list);
  return 0;
}

/* Record node i as a candidate (out: its output after a Relu/Clip; reason NULL: chosen); -1 out of memory. */
static int cand_add(qz_t *q, size_t i, const char *out, const char *reason) {
  const Onnx__NodeProto *n = q->g->node[i];
  qz_cand_t *nc = realloc(q->cand, ((size_t)q->n_cand + 1) * sizeof *nc);
  if (!nc) return -1;
  q->cand = nc;
  qz_cand_t *c = &q->cand[q->n_cand];
  memset(c, 0, sizeof *c);
  c->node = (int)i;
  c->reason = reason;
  c->act = -1;
  c->name = strdup(n->name ? n->name : "");
  c->op = strdup(n->op_type);
  c->out = strdup(out);
  if (!c->name || !c->op || !c->out) {
    free(c->name);
    free(c->op);
    free(c->out);
    return -1;
  }
  q->cand_of[i] = q->n_cand++;
  return 0;
}

/* Nodes of the wanted op types inside node n's subgraphs (If branches, Loop and Scan bodies), at any depth. */
static int subgraph_wanted(const qz_t *q, const Onnx__NodeProto *n) {
  int count = 0;
  for (size_t a = 0; a < n->n_attribute; a++) {
    const Onnx__AttributeProto *at = n->attribute[a];
    size_t ng = at->n_graphs + (at->g ? 1 : 0);
    for (size_t k = 0; k < ng; k++) {
      const Onnx__GraphProto *sg = k < at->n_graphs ? at->graphs[k] : at->g;
      for (size_t j = 0; sg && j < sg->n_node; j++)
        count += op_wanted(q, sg->node[j]->op_type) + subgraph_wanted(q, sg->node[j]);
    }
  }
  return count;
}

static toplu_status_t choose(qz_t *q, toplu_error_t *err) {
  Onnx__GraphProto *g = q->g;
  q->cand_of = malloc((g->n_node + 1) * sizeof *q->cand_of);
  if (!q->cand_of) return oom(err);
  for (size_t i = 0; i < g->n_node; i++) q->cand_of[i] = -1;
  q->sel = calloc(g->n_node + 1, 1);
  q->node_out = malloc((g->n_node + 1) * sizeof *q->node_out);
  q->in_act = malloc((g->n_node + 1) * sizeof *q->in_act);
  q->raw_act = malloc((g->n_node + 1) * sizeof *q->raw_act);
  q->est = malloc((g->n_node + 1) * sizeof *q->est);
  q->est_in = malloc((g->n_node + 1) * sizeof *q->est_in);
  if (!q->sel || !q->node_out || !q->in_act || !q->raw_act || !q->est || !q->est_in) return oom(err);
  for (size_t i = 0; i < g->n_node; i++) {
    q->in_act[i] = q->raw_act[i] = -1;
    q->est[i] = q->est_in[i] = -1;
  }
  toplu_status_t xs = check_exclude(q, err);
  if (xs) return xs;
  for (size_t i = 0; i < g->n_node; i++) {
    Onnx__NodeProto *n = g->node[i];
    q->node_out[i] = -1;
    if (!op_wanted(q, n->op_type) || (n->domain && *n->domain && strcmp(n->domain, "ai.onnx")) || n->n_output < 1)
      continue;
    int hit;
    if (is_excluded(q, n, &hit)) return oom(err);
    if (hit) {
      if (cand_add(q, i, n->output[0], QZ_WHY_EXCLUDED)) return oom(err);
      continue;
    }
    int w = weight_input(q, n);
    int binary = is_op(n, "Add") || is_op(n, "Mul");
    int inputs_ok;
    if (binary || (is_op(n, "MatMul") && w < 0))
      inputs_ok = n->n_input == 2 && is_activation(q, n->input[0]) && is_activation(q, n->input[1]);
    else
      inputs_ok = w >= 0 && is_activation(q, n->input[0]);
    if (!inputs_ok) {
      if (cand_add(q, i, n->output[0], QZ_WHY_INPUTS)) return oom(err);
      continue;
    }
    if (dtype_of(q, n->output[0]) != TOPLU_DTYPE_FLOAT) {
      if (cand_add(q, i, n->output[0], QZ_WHY_OUTPUT)) return oom(err);
      continue;
    }
    q->sel[i] = 1;
    for (size_t k = 0; k < n->n_input && k < 2; k++)
      if ((int)k != w && is_activation(q, n->input[k]) && act_add(q, n->input[k]) < 0) return oom(err);
    /* the output, after a Relu or Clip that alone reads it */
    const char *out = n->output[0];
    double cap = 0;
    int r;
    qp_readers(g, out, &r);
    /* A Clip whose min is below 0 (or not a constant) is not taken in: the node's own output is quantized and the
     * Clip runs between two QuantizeLinear/DequantizeLinear pairs. Quantized after such a Clip, the file loaded in
     * toplu but ONNX Runtime's graph optimizer made two nodes of one name from Conv -> Clip(-1, 1) ->
     * QuantizeLinear and refused it (a fresh user's finding of 2026-12-06); Clip(0, 6) and Clip(0.5, 6) loaded. */
    double clip_lo = 0;
    int clip_ok = r >= 0 && is_op(g->node[r], "Clip") && g->node[r]->n_input > 1 && *g->node[r]->input[1] &&
                  const_scalar(q, g->node[r]->input[1], &clip_lo) && clip_lo >= 0;
    if (r >= 0 && (is_op(g->node[r], "Relu") || clip_ok) && g->node[r]->n_output == 1) {
      const Onnx__NodeProto *a = g->node[r];
      double lo = 0, hi = 0;
      if (is_op(a, "Clip")) {
        if (a->n_input < 3 || !const_scalar(q, a->input[2], &hi) || (a->n_input > 1 && *a->input[1] &&
                                                                      (!const_scalar(q, a->input[1], &lo) || lo != 0)))
          hi = 0;
        cap = hi > 0 ? hi : 0;
      }
      out = a->output[0];
    }
    if (w >= 0) { /* its input and raw output, for the error estimate */
      int xa = is_activation(q, n->input[0]) ? act_add(q, n->input[0]) : -1;
      int before = q->n_act, ra = act_add(q, n->output[0]);
      if (ra < 0) return oom(err);
      if (ra >= before) q->act[ra].watch = 1;
      q->act[ra].ch_axis = is_op(n, "Conv") || is_op(n, "ConvTranspose") ? 1 : -2;
      q->in_act[i] = xa;
      q->raw_act[i] = ra;
    }
    if (binary) { /* its raw output, for the error estimate */
      int before = q->n_act, ra = act_add(q, n->output[0]);
      if (ra < 0) return oom(err);
      if (ra >= before) q->act[ra].watch = 1;
      q->raw_act[i] = ra;
    }
    if (cand_add(q, i, out, NULL)) return oom(err);
    if (qp_is_graph_output(g, out)) continue; /* the model's results stay float */
    int k = act_add(q, out);
    if (k < 0) return oom(err);
    q->act[k].watch = 0;
    q->act[k].node = (int)i;
    q->act[k].cap = cap;
    q->node_out[i] = k;
  }
  /* the model's float inputs, observed only: constant calibration data is refused (check_inputs) */
  for (size_t i = 0; i < g->n_input; i++) {
    if (!is_activation(q, g->input[i]->name)) continue;
    int before = q->n_act, k = act_add(q, g->input[i]->name);
    if (k < 0) return oom(err);
    if (k >= before) q->act[k].watch = 1;
  }
  for (size_t i = 0; i < g->n_node; i++) q->st.nodes_quantized += q->sel[i];  /* less those left float later */
  if (!q->st.nodes_quantized) {
    q->st.nothing_to_quantize = 1;
    for (size_t i = 0; i < g->n_node; i++) q->st.subgraph_nodes += subgraph_wanted(q, g->node[i]);
    char sub[200] = "";
    if (q->st.subgraph_nodes)
      snprintf(sub, sizeof sub, " (%d of them are inside subgraphs, bodies of If, Loop or Scan, which are not "
                                "quantized)", q->st.subgraph_nodes);
    int excluded = 0;
    for (int c = 0; c < q->n_cand; c++) excluded += q->cand[c].reason && !strcmp(q->cand[c].reason, QZ_WHY_EXCLUDED);
    if (excluded) /* the exclusions took every node there was (the message said there were none) */
      return toplu__errorf(err, TOPLU_ERR_INVALID_ARGUMENT,
                          "%s: nothing to quantize: exclude names %d node%s of the op types %s, and no other such "
                          "node takes float activations and constant weights%s", q->o->model, excluded,
                          excluded == 1 ? "" : "s",
                          q->o->op_types && *q->o->op_types ? q->o->op_types : "Conv,ConvTranspose,Gemm,MatMul,Add", sub);
    int half = 0; /* float16 or bfloat16 weights: the model is not float32 */
    for (size_t i = 0; i < g->n_initializer && !half; i++)
      half = g->initializer[i]->data_type == TOPLU_DTYPE_FLOAT16 || g->initializer[i]->data_type == TOPLU_DTYPE_BFLOAT16;
    return toplu__errorf(err, TOPLU_ERR_UNSUPPORTED,
                        "%s: nothing to quantize: no node of the op types %s takes float activations and constant "
                        "weights where they are quantized (a MatMul's or Gemm's second input, 2-D; a Conv's weight)%s%s",
                        q->o->model,
                        q->o->op_types && *q->o->op_types ? q->o->op_types : "Conv,ConvTranspose,Gemm,MatMul,Add", sub,
                        half ? "; its weights are float16 or bfloat16, and toplu quantize takes float32 models "
                               "(convert it to float32 first)" : "");
  }
  return TOPLU_OK;
}

/* ---- calibration ---- */

static void progress(qz_t *q, int force) {
  double now = (double)toplu_monotonic_ns() * 1e-9;
  q->st.seconds = now - (double)q->t0 * 1e-9;
  double every = q->o->progress_seconds > 0 ? q->o->progress_seconds : 1.0;
  if (!q->o->progress || (!force && now - q->last_progress < every)) return;
  if (force && q->last_rows == q->st.rows_done) return; /* said already */
  q->last_progress = now;
  q->last_rows = q->st.rows_done;
  q->o->progress(q->o->progress_user, &q->st);
}

/* Pack the model (with the outputs added so far) and load it; *m is optimised as usual. */
static toplu_status_t load_packed(qz_t *q, toplu_model_t **m, toplu_error_t *err) {
  size_t len = onnx__model_proto__get_packed_size(q->mp);
  unsigned char *buf = malloc(len ? len : 1);
  if (!buf) return oom(err);
  onnx__model_proto__pack(q->mp, buf);
  toplu_status_t st = toplu_model_load_buffer(buf, len, q->o->model, NULL, m, err);
  free(buf);
  return st;
}

/* Where each tensor of names comes from in a run: >= 0 output index, <= -2 input -(k + 2). */
static toplu_status_t add_outputs(qz_t *q, int n, const char *const *names, int *where, toplu_error_t *err) {
  Onnx__GraphProto *g = q->g;
  for (int k = 0; k < n; k++) {
    where[k] = -1;
    for (size_t i = 0; i < g->n_input; i++)
      if (!strcmp(g->input[i]->name, names[k])) where[k] = -2 - (int)i;
    for (size_t i = 0; where[k] == -1 && i < g->n_output; i++)
      if (!strcmp(g->output[i]->name, names[k])) where[k] = (int)i;
    if (where[k] != -1) continue;
    if (qp_output_add(g, names[k])) return oom(err);
    where[k] = (int)g->n_output - 1;
  }
  return TOPLU_OK;
}

/* The graph input index of model input i of a loaded model (by name). */
static int input_slot(const Onnx__GraphProto *g, const toplu_model_t *m, int mi) {
  const char *nm = toplu_model_input(m, mi)->name;
  for (size_t i = 0; i < g->n_input; i++)
    if (!strcmp(g->input[i]->name, nm)) return (int)i;
  return -1;
}

/* Synthetic calibration rows (toplu_quantize_model without a source): in[i] gets batch rows of input i of m,
 * standard-normal float32 from *rng (other dtypes 0); buffers are allocated on the first call and refilled. */
static toplu_status_t synthetic_batch(const qz_t *q, const toplu_model_t *m, toplu_tensor_t *in, int n_in, int64_t batch,
                                      uint64_t *rng, toplu_error_t *err) {
  for (int i = 0; i < n_in; i++) {
    const toplu_value_info_t *v = toplu_model_input(m, i);
    toplu_tensor_t *t = &in[i];
    if (!t->data) {
      if (v->kind != TOPLU_KIND_TENSOR || v->ndim < 0 || v->dtype == TOPLU_DTYPE_STRING)
        return toplu__errorf(err, TOPLU_ERR_INVALID_ARGUMENT,
                            "synthetic calibration rows: input '%s' is no tensor of known rank: give calibration rows",
                            v->name);
      const toplu_input_shape_t *given = NULL;
      for (int k = 0; k < q->o->n_shapes; k++)
        if (q->o->shapes[k].name && !strcmp(q->o->shapes[k].name, v->name)) given = &q->o->shapes[k];
      t->dtype = v->dtype;
      t->ndim = v->ndim;
      for (int d = 0; d < v->ndim; d++) {
        int64_t n = v->dims[d];
        if (d == 0 && (n < 0 || toplu_model_fixed_batch(m))) n = batch;
        else if (n < 0 && given && given->ndim == v->ndim) n = given->dims[d];
        if (n < 0)
          return toplu__errorf(err, TOPLU_ERR_INVALID_ARGUMENT,
                              "synthetic calibration rows: input '%s' dim %d is symbolic ('%s'): give its size "
                              "(shapes) or calibration rows",
                              v->name, d, v->dim_names[d] ? v->dim_names[d] : "?");
        t->dims[d] = n;
      }
      int64_t numel = toplu_tensor_numel(t);
      size_t es = toplu_dtype_size(t->dtype);
      if (numel < 0 || es == 0 || (uint64_t)numel > TOPLU_MAX_ELEMENTS)
        return toplu__errorf(err, TOPLU_ERR_INVALID_ARGUMENT, "calibration: input '%s': %lld elements of %s",
                            v->name, (long long)numel, toplu_dtype_name(t->dtype));
      if (!(t->data = calloc((size_t)numel + 1, es))) return oom(err);
    }
    if (t->dtype != TOPLU_DTYPE_FLOAT) continue;
    float *x = t->data;
    int64_t numel = toplu_tensor_numel(t);
    for (int64_t e = 0; e < numel; e += 2) { /* Box-Muller over xorshift64* */
      double u[2];
      for (int k = 0; k < 2; k++) {
        *rng ^= *rng >> 12;
        *rng ^= *rng << 25;
        *rng ^= *rng >> 27;
        u[k] = ((double)((*rng * UINT64_C(2685821657736338717)) >> 11) + 0.5) * 0x1p-53;
      }
      double r = sqrt(-2.0 * log(u[0])), a = 6.283185307179586 * u[1];
      x[e] = (float)(r * cos(a));
      if (e + 1 < numel) x[e + 1] = (float)(r * sin(a));
    }
  }
  return TOPLU_OK;
}

/* TOPLU_ERR_CANCELLED when options.cancel is set. */
static toplu_status_t check_cancel(const qz_t *q, toplu_error_t *err) {
  if (!q->o->cancel || !__atomic_load_n(q->o->cancel, __ATOMIC_ACQUIRE)) return TOPLU_OK;
  if (q->writing)
    return toplu__errorf(err, TOPLU_ERR_CANCELLED, "cancelled while writing %s: nothing written (the temporary file "
                        "is removed)", q->o->output ? q->o->output : "the model");
  const char *when = q->st.pass == 2 ? "in the report pass" : q->st.pass == 1 ? "while calibrating" : "";
  return toplu__errorf(err, TOPLU_ERR_CANCELLED, "cancelled%s%s after %lld rows: nothing written", *when ? " " : "", when,
                      (long long)q->st.rows_done);
}

/* Run pass 1 (calibrate) or 2 (report: the float model beside the quantized one). */
static toplu_status_t run_pass(qz_t *q, int pass, const unsigned char *qbuf, size_t qlen, toplu_error_t *err) {
  Onnx__GraphProto *g = q->g;
  size_t keep = g->n_output;
  const char **names = malloc(((size_t)q->n_act + 1) * sizeof *names);
  int *where = malloc(((size_t)q->n_act + 1) * sizeof *where);
  int *qwhere = NULL;
  toplu_model_t *m = NULL, *qm = NULL;
  toplu_session_t *s = NULL, *qs = NULL;
  toplu_reader_t *rd = NULL;
  toplu_tensor_t *in = NULL, *out = NULL, *qout = NULL;
  int n_in = 0, n_out = 0, qn_out = 0;
  int *slot = NULL;
  toplu_status_t st = names && where ? TOPLU_OK : oom(err);
  for (int k = 0; k < q->n_act; k++) names[k] = q->act[k].name;
  if (!st) st = add_outputs(q, q->n_act, names, where, err);
  if (!st) st = load_packed(q, &m, err);
  qp_outputs_truncate(g, keep);
  if (!st && pass == 2) { /* the quantized model, its DequantizeLinear outputs made graph outputs */
    Onnx__ModelProto *qmp = onnx__model_proto__unpack(NULL, qlen, qbuf);
    qwhere = malloc(((size_t)q->n_act + 1) * sizeof *qwhere);
    if (!qmp || !qwhere) st = oom(err);
    for (int k = 0; !st && k < q->n_act; k++) {
      qwhere[k] = -1;
      const char *c = q->act[k].cmp;
      if (!c) continue;
      for (size_t o = 0; o < qmp->graph->n_output; o++)
        if (!strcmp(qmp->graph->output[o]->name, c)) qwhere[k] = (int)o;
      if (qwhere[k] >= 0) continue;
      if (qp_output_add(qmp->graph, c)) st = oom(err);
      else qwhere[k] = (int)qmp->graph->n_output - 1;
    }
    if (!st) {
      size_t len = onnx__model_proto__get_packed_size(qmp);
      unsigned char *buf = malloc(len ? len : 1);
      if (!buf) st = oom(err);
      else {
        onnx__model_proto__pack(qmp, buf);
        st = toplu_model_load_buffer(buf, len, q->o->output, NULL, &qm, err);
        free(buf);
      }
    }
    if (qmp) onnx__model_proto__free_unpacked(qmp, NULL);
  }
  toplu_session_options_t so;
  toplu_session_options_init(&so);
  so.threads = q->o->threads;
  so.max_plans = 8;
  if (!st) {
    so.batch_override = toplu_model_fixed_batch_size(m) > 0; /* a fixed batch runs other batches too, as a job does */
    st = toplu_session_create(m, &so, &s, err);
  }
  if (!st && qm) {
    so.batch_override = toplu_model_fixed_batch_size(qm) > 0;
    st = toplu_session_create(qm, &so, &qs, err);
  }
  const int synth = q->in_memory && q->o->n_calibration == 0;
  /* default batch: 8 rows, or the static batch a model's file fixes (toplu_model_fixed_batch_size > 1) */
  const int64_t fixed_b = toplu_model_fixed_batch_size(m), def_batch = fixed_b > 1 ? fixed_b : 8;
  const int64_t synth_rows = q->o->synthetic_rows > 0 ? q->o->synthetic_rows : 8,
                synth_batch = q->o->batch_size > 0 ? q->o->batch_size : def_batch;
  uint64_t rng = UINT64_C(0x9E3779B97F4A7C15);
  if (!st && !synth && pass == 1 && !(q->o->preprocess && *q->o->preprocess)) {
    /* images without a preprocess: only resized, their 0..255 values are the ranges (a fresh user's model,
     * trained on normalized input, was calibrated for 0..255 without a word, 2026-12-07) */
    for (int k = 0; k < q->o->n_calibration; k++) {
      const char *src = q->o->calibration[k], *eq = strchr(src, '=');
      if (eq && !memchr(src, '/', (size_t)(eq - src))) src = eq + 1; /* NAME=SOURCE */
      struct stat sb;
      if ((stat(src, &sb) == 0 && S_ISDIR(sb.st_mode)) || pl_is_image_name(src) || strpbrk(src, "*?[")) {
        note(q, TOPLU_LOG_WARNING,
             "%s: calibration images without a preprocess: they are only resized, so the input is calibrated for "
             "pixel values 0..255; give the preprocess the model runs with (its scale, mean and std)", src);
        break;
      }
    }
  }
  if (!st && !synth) {
    toplu_job_options_t jo;
    toplu_job_options_init(&jo);
    jo.inputs = q->o->calibration;
    jo.n_inputs = q->o->n_calibration;
    jo.preprocess = q->o->preprocess;
    jo.batch_size = q->o->batch_size > 0 ? q->o->batch_size : def_batch;
    jo.csv_header = q->o->csv_header;
    jo.csv_delimiter = q->o->csv_delimiter;
    jo.log = pass == 1 ? q->o->log : NULL; /* bad rows are said once */
    jo.log_user = q->o->log_user;
    st = toplu_reader_create(m, &jo, q->o->calibration_rows, &rd, err);
  }
  if (!st) {
    n_in = toplu_model_input_count(m);
    n_out = toplu_model_output_count(m);
    qn_out = qm ? toplu_model_output_count(qm) : 0;
    in = calloc((size_t)n_in + 1, sizeof *in);
    out = calloc((size_t)n_out + 1, sizeof *out);
    qout = calloc((size_t)qn_out + 1, sizeof *qout);
    slot = malloc(((size_t)n_in + 1) * sizeof *slot);
    if (!in || !out || !qout || !slot) st = oom(err);
    for (int i = 0; !st && i < n_in; i++) slot[i] = input_slot(g, m, i);
    q->st.rows_total = synth ? synth_rows : toplu_reader_rows(rd);
    q->st.rows_done = 0;
    q->run_bad = 0;
    q->st.pass = pass;
    q->last_rows = -1;
    if (!st && q->st.rows_total == 0)
      st = toplu__errorf(err, TOPLU_ERR_INVALID_ARGUMENT, "calibration: the sources hold no rows");
  }
  toplu_run_options_t ro;
  toplu_run_options_init(&ro);
  ro.cancel = q->o->cancel;
  while (!st) {
    int64_t rows;
    if ((st = check_cancel(q, err))) break;
    if (synth) {
      rows = synth_rows - q->st.rows_done < synth_batch ? synth_rows - q->st.rows_done : synth_batch;
      if (rows <= 0) break;
      for (int i = 0; rows != synth_batch && i < n_in; i++) { /* a shorter last batch: new buffers */
        free(in[i].data);
        in[i] = (toplu_tensor_t){0};
      }
      st = synthetic_batch(q, m, in, n_in, rows, &rng, err);
    } else {
      st = toplu_reader_next(rd, in, &rows, err);
    }
    if (st || rows == 0) break;
    for (int k = 0; k < n_out; k++) out[k] = (toplu_tensor_t){0};
    st = toplu_session_run_with(s, in, n_in, out, n_out, &ro, err);
    for (int k = 0; !st && qs && k < qn_out; k++) qout[k] = (toplu_tensor_t){0};
    if (!st && qs) st = toplu_session_run_with(qs, in, n_in, qout, qn_out, &ro, err);
    if (st && rd && st != TOPLU_ERR_CANCELLED) {
      /* name the rows (the message named a node only); rows the model cannot take at their shape (an
       * image size its layers do not fit) are left out as bad rows are, the rest is a failure */
      char ids[400];
      size_t len = 0;
      ids[0] = '\0';
      for (int64_t r = 0; r < rows && r < 3 && len < sizeof ids; r++) {
        const char *id = toplu_reader_row_id(rd, r);
        int w = snprintf(ids + len, sizeof ids - len, "%s%s", r ? ", " : "", id ? id : "?");
        len += w > 0 ? (size_t)w : 0;
      }
      if (rows > 3 && len < sizeof ids) snprintf(ids + len, sizeof ids - len, " and %lld more", (long long)(rows - 3));
      for (int k = 0; k < n_out; k++) toplu_tensor_free(&out[k]);
      for (int k = 0; qs && k < qn_out; k++) toplu_tensor_free(&qout[k]);
      if (st == TOPLU_ERR_SHAPE) {
        if (pass == 1)
          toplu__logf(q->o->log, q->o->log_user, TOPLU_LOG_WARNING, "calibration row%s %s left out: %s",
                      rows == 1 ? "" : "s", ids, err ? err->message : "the model refused their shape");
        q->run_bad += rows;
        toplu_error_clear(err);
        st = TOPLU_OK;
        continue;
      }
      toplu__error_prefix(err, "calibration row%s %s: ", rows == 1 ? "" : "s", ids);
      break;
    }
    for (int k = 0; !st && k < q->n_act; k++) {
      const toplu_tensor_t *t = NULL;
      if (where[k] >= 0) t = &out[where[k]];
      else if (where[k] <= -2)
        for (int i = 0; i < n_in; i++)
          if (slot[i] == -2 - where[k]) t = &in[i];
      if (!t || t->dtype != TOPLU_DTYPE_FLOAT || !t->data) continue;
      int64_t n = toplu_tensor_numel(t);
      qz_act_t *a = &q->act[k];
      if (pass == 1) {
        qz_range_add(&a->range, t->data, n);
        if (a->ch_axis != -1 && t->ndim >= 1) {
          int ax = a->ch_axis >= 0 ? a->ch_axis : t->ndim - 1;
          if (ax >= t->ndim) continue;
          int64_t c = t->dims[ax], inner = 1;
          for (int d = ax + 1; d < t->ndim; d++) inner *= t->dims[d];
          if (!a->ch_sq && c > 0) {
            if (!(a->ch_sq = calloc((size_t)c, sizeof *a->ch_sq))) {
              st = oom(err);
              break;
            }
            a->n_ch = c;
          }
          if (c != a->n_ch || c == 0) continue;
          const float *x = t->data;
          for (int64_t e = 0; e < n; e++) {
            double v = x[e];
            if (isfinite(v)) a->ch_sq[(e / inner) % c] += v * v;
          }
          a->ch_count += (double)n / (double)c;
        }
      } else if (qwhere && qwhere[k] >= 0) {
        const toplu_tensor_t *u = &qout[qwhere[k]];
        if (u->dtype != TOPLU_DTYPE_FLOAT || toplu_tensor_numel(u) != n) continue;
        const float *x = t->data, *y = u->data;
        for (int64_t i = 0; i < n; i++) {
          double d = (double)y[i] - x[i];
          if (!isfinite(x[i])) a->cmp_nonfinite++; /* the float value itself: no error to measure */
          if (!isfinite(d)) continue;
          a->err2 += d * d;
          a->ref2 += (double)x[i] * x[i];
          if (fabs(d) > a->maxabs) a->maxabs = fabs(d);
        }
      }
    }
    for (int k = 0; k < n_out; k++) toplu_tensor_free(&out[k]);
    for (int k = 0; qs && k < qn_out; k++) toplu_tensor_free(&qout[k]);
    q->st.rows_done += rows;
    q->st.rows_bad = (rd ? toplu_reader_bad_rows(rd) : 0) + q->run_bad;
    progress(q, 0);
  }
  if (synth && in)
    for (int i = 0; i < n_in; i++) free(in[i].data);
  if (st == TOPLU_ERR_CANCELLED && check_cancel(q, err) == TOPLU_OK) /* the flag was cleared meanwhile */
    st = toplu__errorf(err, TOPLU_ERR_CANCELLED, "cancelled after %lld rows: nothing written", (long long)q->st.rows_done);
  if (!st && rd) {
    q->st.rows_bad = toplu_reader_bad_rows(rd) + q->run_bad;
    if (q->st.rows_done == 0)
      st = toplu__errorf(err, TOPLU_ERR_INVALID_ARGUMENT, "calibration: all %lld rows were bad (see the warnings)",
                        (long long)q->st.rows_total);
  }
  if (!st) progress(q, 1);
  toplu_reader_destroy(rd);
  toplu_session_destroy(s);
  toplu_session_destroy(qs);
  toplu_model_destroy(m);
  toplu_model_destroy(qm);
  free(in);
  free(out);
  free(qout);
  free(slot);
  free(names);
  free(where);
  free(qwhere);
  return st;
}

/* ---- writing the QDQ graph ---- */

/* Per-axis or per-tensor int8 weights of initializer wi, axis `axis` (-1: per tensor): the int8 initializer,
 * its scale and zero point, a DequantizeLinear in front, and node input k renamed.  *sw gets the scales
 * (malloc, *ns of them) for the bias. */
static toplu_status_t quantize_weight(qz_t *q, Onnx__NodeProto *n, int k, int axis, float **sw, int64_t *ns,
                                      toplu_error_t *err) {
  Onnx__GraphProto *g = q->g;
  int wi = qp_init_find(g, n->input[k]);
  toplu_tensor_t w;
  toplu_status_t st = init_float(q, wi, &w, err);
  if (st) return st;
  int64_t c = axis >= 0 ? w.dims[axis] : 1, numel = toplu_tensor_numel(&w);
  int64_t inner = 1;
  for (int d = axis + 1; axis >= 0 && d < w.ndim; d++) inner *= w.dims[d];
  float *s = malloc((size_t)c * sizeof *s);
  int8_t *wq = malloc((size_t)numel + 1), *zp = calloc((size_t)c, 1);
  if (!s || !wq || !zp) {
    free(s);
    free(wq);
    free(zp);
    toplu_tensor_free(&w);
    return oom(err);
  }
  const float *wd = w.data;
  double *amax = calloc((size_t)c, sizeof *amax);
  for (int64_t i = 0; amax && i < numel; i++) {
    int64_t ch = axis >= 0 ? (i / inner) % c : 0;
    double v = fabs((double)wd[i]);
    if (v > amax[ch]) amax[ch] = v;
  }
  for (int64_t ch = 0; amax && ch < c; ch++) s[ch] = amax[ch] / 127.0 >= FLT_MIN ? (float)(amax[ch] / 127.0) : 1.0f;
  for (int64_t i = 0; amax && i < numel; i++) {
    int64_t ch = axis >= 0 ? (i / inner) % c : 0;
    double v = rint((double)wd[i] / s[ch]);
    wq[i] = (int8_t)(v > 127 ? 127 : v < -127 ? -127 : v);
  }
  char *qn = qz_unique(q, n->input[k], "_quantized"), *sn = qz_unique(q, n->input[k], "_scale");
  char *zn = qz_unique(q, n->input[k], "_zero_point"), *dn = qz_unique(q, n->input[k], "_DequantizeLinear_Output");
  char *dnn = qz_unique(q, n->input[k], "_DequantizeLinear");
  int ok = amax && qn && sn && zn && dn && dnn;
  int64_t cdim[1] = {c};
  int sdim = axis >= 0 ? 1 : 0;
  ok = ok && qp_init_add(g, qn, TOPLU_DTYPE_INT8, w.ndim, w.dims, wq, (size_t)numel) >= 0;
  ok = ok && qp_init_add(g, sn, TOPLU_DTYPE_FLOAT, sdim, cdim, s, (size_t)c * sizeof *s) >= 0;
  ok = ok && qp_init_add(g, zn, TOPLU_DTYPE_INT8, sdim, cdim, zp, (size_t)c) >= 0;
  Onnx__NodeProto *dq = NULL;
  if (ok) {
    const char *ins[3] = {qn, sn, zn};
    dq = qp_node_new("DequantizeLinear", dnn, 3, ins, dn);
    ok = dq && (axis < 0 || !qp_attr_set_int(dq, "axis", axis));
  }
  if (ok) {
    Onnx__NodeProto **nf = realloc(q->front, ((size_t)q->n_front + 1) * sizeof *nf);
    ok = nf != NULL;
    if (nf) {
      q->front = nf;
      q->front[q->n_front++] = dq;
      dq = NULL;
    }
  }
  char *old = ok ? strdup(n->input[k]) : NULL;
  ok = ok && old && !qp_set_input(n, k, dn);
  if (ok && qp_readers(g, old, NULL) == 0 && !qp_is_graph_output(g, old)) qp_init_remove(g, qp_init_find(g, old));
  free(old);
  if (dq) onnx__node_proto__free_unpacked(dq, NULL);
  free(qn);
  free(sn);
  free(zn);
  free(dn);
  free(dnn);
  free(wq);
  free(zp);
  free(amax);
  toplu_tensor_free(&w);
  if (!ok) {
    free(s);
    return oom(err);
  }
  q->st.weights_quantized++;
  *sw = s;
  *ns = c;
  return TOPLU_OK;
}

/* The bias input k of n as int32 with scale sx * sw[c] (zero point 0), behind a DequantizeLinear. */
static toplu_status_t quantize_bias(qz_t *q, Onnx__NodeProto *n, int k, float sx, const float *sw, int64_t ns,
                                    toplu_error_t *err) {
  Onnx__GraphProto *g = q->g;
  int bi = n->n_input > (size_t)k && *n->input[k] ? qp_init_find(g, n->input[k]) : -1;
  if (bi < 0) return TOPLU_OK;
  toplu_tensor_t b;
  if (init_float(q, bi, &b, err)) {
    toplu_error_clear(err);
    return TOPLU_OK;
  }
  int64_t m = toplu_tensor_numel(&b);
  if (b.ndim != 1 || (ns != 1 && ns != m)) {
    toplu_tensor_free(&b);
    return TOPLU_OK;
  }
  int32_t *bq = malloc((size_t)m * sizeof *bq);
  float *s = malloc((size_t)m * sizeof *s);
  int ok = bq && s;
  for (int64_t c = 0; ok && c < m; c++) {
    s[c] = sx * sw[ns == 1 ? 0 : c];
    double v = rint((double)((const float *)b.data)[c] / s[c]);
    bq[c] = v > 2147483647.0 ? INT32_MAX : v < -2147483648.0 ? INT32_MIN : (int32_t)v;
  }
  char *qn = ok ? qz_unique(q, n->input[k], "_quantized") : NULL, *sn = ok ? qz_unique(q, n->input[k], "_scale") : NULL;
  char *dn = ok ? qz_unique(q, n->input[k], "_DequantizeLinear_Output") : NULL;
  char *dnn = ok ? qz_unique(q, n->input[k], "_DequantizeLinear") : NULL;
  ok = ok && qn && sn && dn && dnn;
  int per = ns != 1;
  int64_t d1[1] = {m};
  ok = ok && qp_init_add(g, qn, TOPLU_DTYPE_INT32, 1, d1, bq, (size_t)m * sizeof *bq) >= 0;
  ok = ok && qp_init_add(g, sn, TOPLU_DTYPE_FLOAT, per ? 1 : 0, d1, s, (per ? (size_t)m : 1) * sizeof *s) >= 0;
  Onnx__NodeProto *dq = NULL;
  if (ok) {
    const char *ins[2] = {qn, sn};
    dq = qp_node_new("DequantizeLinear", dnn, 2, ins, dn);
    ok = dq && (!per || !qp_attr_set_int(dq, "axis", 0));
  }
  if (ok) {
    Onnx__NodeProto **nf = realloc(q->front, ((size_t)q->n_front + 1) * sizeof *nf);
    ok = nf != NULL;
    if (nf) {
      q->front = nf;
      q->front[q->n_front++] = dq;
      dq = NULL;
    }
  }
  char *old = ok ? strdup(n->input[k]) : NULL;
  ok = ok && old && !qp_set_input(n, k, dn);
  if (ok && qp_readers(g, old, NULL) == 0 && !qp_is_graph_output(g, old)) qp_init_remove(g, qp_init_find(g, old));
  free(old);
  if (dq) onnx__node_proto__free_unpacked(dq, NULL);
  free(qn);
  free(sn);
  free(dn);
  free(dnn);
  free(bq);
  free(s);
  toplu_tensor_free(&b);
  return ok ? TOPLU_OK : oom(err);
}

/* The per-channel axis of node n's weights, or -1 (per tensor). */
static int weight_axis(const qz_t *q, const Onnx__NodeProto *n) {
  if (!q->per_channel) return -1;
  if (is_op(n, "Conv")) return 0;
  if (is_op(n, "ConvTranspose")) return 1;
  if (is_op(n, "Gemm")) return qp_attr_int(n, "transB", 0) ? 0 : 1;
  if (is_op(n, "MatMul")) return 1;
  return -1;
}

/*
 * The error quantization adds to each weighted node's output, estimated from
 * the calibration statistics (no second run): quantizing the input with step
 * s_x adds noise of variance s_x^2 / 12 per value (uniform rounding error),
 * which reaches output channel c as s_x^2 / 12 * sum_k w_ck^2; rounding the
 * weights with step s_w[c] adds s_w[c]^2 / 12 * K * E[x^2] (K taps); the
 * output's step s_y adds s_y^2 / 12 (counted here even when the next
 * quantized node counts it again as its input's: attributing it to the
 * reader alone measured worse on PaddleOCR det, IoU 0.83 against 0.96; the one exception, a node whose output
 * a quantized Add or Mul reads: leave_noisy_float).  Against the mean square of the
 * channel's float output, E[y_c^2] (measured), the relative RMS error is
 * est = sqrt(mean over channels of noise_c / E[y_c^2]), dead channels left
 * out: no output (E[y_c^2] = 0, or below QZ_DEAD_ENERGY of the channels'
 * mean) or all-zero weights (the output is the bias alone).  The mean over channels, not the ratio of
 * sums: a channel that a later layer scales up keeps its error (the
 * high-gain depthwise convolutions of PP-LCNetV3 lose 7% in one layer while
 * their largest channels lose little).  Add and Mul: estimate_binary.  A
 * node whose estimate is above options.max_node_error is left float.
 */
/* A weighted node's output channel whose mean square is below this share of the channels' mean is dead: left out
 * of its estimate (an RMS below 1% of the typical channel's: under 0.01% of the output's energy).  Such channels
 * are common in trained models (decayed weights of 1e-5..1e-10); against their tiny mean square the output's step
 * alone gave ratios of 1e+3..1e+56 and left the node float for nothing: PaddleOCR det's p2o.Conv.22 (a 1x1
 * convolution after a GlobalAveragePool, two channels of all-zero weights with biases of 1e-28, and one of weights
 * ~1e-3 at 0.4% RMS) was estimated at 2e+28 and is at 0.016 without them; p2o.Conv.29 and .31 (channels at
 * 1e-9 of the mean) went from 59 and 38 to 0.13 and 0.05.  Channels 100x weaker in energy than the mean, as the
 * high-gain depthwise convolutions have, still count. */
#define QZ_DEAD_ENERGY 1e-4

/* The act record of name, or NULL. */
static const qz_act_t *act_find(const qz_t *q, const char *name) {
  for (int k = 0; k < q->n_act; k++)
    if (!strcmp(q->act[k].name, name)) return &q->act[k];
  return NULL;
}

/* The mean square of a calibrated tensor (0 when unseen). */
static double mean_sq(const qz_act_t *a) { return a && a->range.n > 0 ? a->range.sumsq / (double)a->range.n : 0; }

/* Add and Mul between two quantized tensors: the rounding noise of a (s_a^2 / 12) and b reaches an Add's output
 * whole and a Mul's scaled by the other factor's mean square, plus the output's own step; against E[y^2]. */
static void estimate_binary(qz_t *q, size_t i) {
  const Onnx__NodeProto *n = q->g->node[i];
  const qz_act_t *a = act_find(q, n->input[0]), *b = act_find(q, n->input[1]);
  const qz_act_t *y = q->raw_act[i] >= 0 ? &q->act[q->raw_act[i]] : NULL;
  double ey2 = mean_sq(y);
  if (!a || !b || !(ey2 > 0)) return;
  double na = (double)a->scale * a->scale / 12.0, nb = (double)b->scale * b->scale / 12.0;
  double sy = q->node_out[i] >= 0 ? q->act[q->node_out[i]].scale : 0;
  double noise = is_op(n, "Mul") ? na * mean_sq(b) + nb * mean_sq(a) : na + nb;
  noise += sy * sy / 12.0;
  q->est[i] = sqrt(noise / ey2);
  if (q->node_out[i] >= 0) q->act[q->node_out[i]].est = q->est[i];
}

static toplu_status_t estimate(qz_t *q, toplu_error_t *err) {
  Onnx__GraphProto *g = q->g;
  for (size_t i = 0; i < g->n_node; i++) {
    Onnx__NodeProto *n = g->node[i];
    if (q->sel[i] && (is_op(n, "Add") || is_op(n, "Mul"))) {
      estimate_binary(q, i);
      continue;
    }
    int w = q->sel[i] ? weight_input(q, n) : -1;
    if (w < 0 || q->raw_act[i] < 0) continue;
    const qz_act_t *y = &q->act[q->raw_act[i]];
    const qz_act_t *x = q->in_act[i] >= 0 ? &q->act[q->in_act[i]] : NULL;
    if (!y->ch_sq || y->ch_count <= 0) continue;
    toplu_tensor_t wt;
    toplu_status_t st = init_float(q, qp_init_find(g, n->input[w]), &wt, err);
    if (st) return st;
    /* the output-channel axis of the weights */
    int ax = is_op(n, "ConvTranspose") ? 1 : is_op(n, "Gemm") ? (qp_attr_int(n, "transB", 0) ? 0 : 1) : is_op(n, "MatMul") ? 1 : 0;
    int64_t c_out = wt.dims[ax], inner = 1;
    for (int d = ax + 1; d < wt.ndim; d++) inner *= wt.dims[d];
    int64_t numel = toplu_tensor_numel(&wt), taps = numel / (c_out ? c_out : 1);
    double *sw2 = calloc((size_t)c_out + 1, sizeof *sw2), *amax = calloc((size_t)c_out + 1, sizeof *amax);
    if (!sw2 || !amax) {
      free(sw2);
      free(amax);
      toplu_tensor_free(&wt);
      return oom(err);
    }
    const float *wd = wt.data;
    double tmax = 0;
    for (int64_t e = 0; e < numel; e++) {
      int64_t c = (e / inner) % c_out;
      double v = wd[e];
      sw2[c] += v * v;
      if (fabs(v) > amax[c]) amax[c] = fabs(v);
      if (fabs(v) > tmax) tmax = fabs(v);
    }
    double sx = x && x->range.n > 0 ? x->scale : 0, ex2 = x && x->range.n > 0 ? x->range.sumsq / (double)x->range.n : 0;
    double sy = q->node_out[i] >= 0 ? q->act[q->node_out[i]].scale : 0;
    int64_t groups = y->n_ch == c_out ? c_out : 0; /* output channels measured match the weights' */
    /* dead channels are left out: all-zero weights (the output is the bias alone, no signal of the input), or an
     * output whose mean square is below QZ_DEAD_ENERGY of the channels' mean (against its tiny square any step is
     * huge) */
    double mean_ey2 = 0;
    for (int64_t c = 0; groups && c < c_out; c++) mean_ey2 += y->ch_sq[c] / y->ch_count / (double)c_out;
    double sum = 0, sum_in = 0;
    int64_t used = 0;
    for (int64_t c = 0; groups && c < c_out; c++) {
      double ey2 = y->ch_sq[c] / y->ch_count;
      if (!(ey2 > 0) || !(ey2 > QZ_DEAD_ENERGY * mean_ey2) || sw2[c] == 0) continue;
      double s_w = (q->per_channel ? amax[c] : tmax) / 127.0;
      double noise_in = sx * sx / 12.0 * sw2[c] + s_w * s_w / 12.0 * (double)taps * ex2;
      sum += (noise_in + sy * sy / 12.0) / ey2;
      sum_in += noise_in / ey2;
      used++;
    }
    free(sw2);
    free(amax);
    toplu_tensor_free(&wt);
    if (used) q->est[i] = sqrt(sum / (double)used);
    if (used) q->est_in[i] = sqrt(sum_in / (double)used);
    if (used && q->node_out[i] >= 0) q->act[q->node_out[i]].est = q->est[i];
  }
  return TOPLU_OK;
}

/* 1 when the quantized output of weighted node i is also read by a chosen Add or Mul within the limit (a
 * residual Add): that reader keeps the tensor quantized whether node i is quantized or not, so leaving node i
 * float would not remove its output's step, only its input's and its weights' rounding. */
static int output_stays_quantized(const qz_t *q, size_t i, double lim) {
  const Onnx__GraphProto *g = q->g;
  if (q->node_out[i] < 0) return 0;
  const char *name = q->act[q->node_out[i]].name;
  for (size_t r = 0; r < g->n_node; r++) {
    const Onnx__NodeProto *n = g->node[r];
    if (!q->sel[r] || !(is_op(n, "Add") || is_op(n, "Mul")) || !(q->est[r] >= 0 && q->est[r] <= lim)) continue;
    for (size_t j = 0; j < n->n_input; j++)
      if (!strcmp(n->input[j], name)) return 1;
  }
  return 0;
}

/* Leave float the nodes whose estimate is above options.max_node_error, and
 * the tensors no quantized node then reads or writes.  A weighted node whose
 * output a quantized Add or Mul reads anyway (output_stays_quantized) is
 * judged without its output's step (est_in): float, it would still lose it. */
static void leave_noisy_float(qz_t *q) {
  Onnx__GraphProto *g = q->g;
  double lim = q->o->max_node_error > 0 ? q->o->max_node_error : TOPLU_QUANTIZE_MAX_NODE_ERROR;
  if (q->o->max_node_error < 0) return;
  int dropped = 0;
  char names[768] = "";
  size_t nl = 0;
  for (size_t i = 0; i < g->n_node; i++)
    if (q->sel[i] && q->est[i] > lim && !(q->est_in[i] >= 0 && q->est_in[i] <= lim && output_stays_quantized(q, i, lim))) {
      q->sel[i] = 0;
      q->st.nodes_left_float++;
      q->st.nodes_quantized--;
      dropped = 1;
      if (q->cand_of[i] >= 0) q->cand[q->cand_of[i]].reason = QZ_WHY_ERROR;
      if (q->st.nodes_left_float <= 8 && nl < sizeof names) {
        int w = snprintf(names + nl, sizeof names - nl, "%s%s (%.3g)", nl ? ", " : "", g->node[i]->name, q->est[i]);
        nl += w > 0 ? (size_t)w : 0;
      }
    }
  if (!dropped) return;
  int more = q->st.nodes_left_float - 8;
  note(q, TOPLU_LOG_NOTE, "%d node%s left float, estimated error above max_node_error %g: %s%s%.0d%s", q->st.nodes_left_float,
       q->st.nodes_left_float == 1 ? "" : "s", lim, names, more > 0 ? " and " : "", more > 0 ? more : 0,
       more > 0 ? (q->o->report ? " more (the report lists every node)" : " more (a report lists every node)") : "");
  /* A tensor stays quantized when a chosen node reads it, or when it is the output of a chosen node and no node
   * left float reads it (a Conv's output quantized for its own integer kernel, read by float ops such as a
   * written-out HardSwish); one that a node left float reads and no chosen node does goes float. */
  for (int k = 0; k < q->n_act; k++) {
    qz_act_t *a = &q->act[k];
    if (a->watch) continue;
    int read_by_chosen = 0, read_by_dropped = 0;
    for (size_t i = 0; i < g->n_node; i++) {
      const Onnx__NodeProto *n = g->node[i];
      for (size_t j = 0; j < n->n_input; j++)
        if (!strcmp(n->input[j], a->name)) {
          read_by_chosen |= q->sel[i];
          read_by_dropped |= !q->sel[i] && q->est[i] > lim;
        }
    }
    int own = a->node >= 0 && q->sel[a->node];
    if (!read_by_chosen && (!own || read_by_dropped)) a->skip = 1;
  }
}

/* After calibration: refuse rows on which every float input of the model is constant (all-zero data, say: every
 * range would be the model's answer to that one input, and the int8 model useless on real data). */
static toplu_status_t check_inputs(qz_t *q, toplu_error_t *err) {
  const Onnx__GraphProto *g = q->g;
  int inputs = 0, constant = 0;
  char list[512] = "";
  size_t nl = 0;
  for (size_t i = 0; i < g->n_input; i++) {
    const qz_act_t *a = act_find(q, g->input[i]->name);
    if (!a || a->range.n == 0) continue;
    inputs++;
    if (a->range.lo != a->range.hi) continue;
    constant++;
    if (nl < sizeof list) {
      int w = snprintf(list + nl, sizeof list - nl, "%s'%s' always %g", nl ? ", " : "", a->name, a->range.lo);
      nl += w > 0 ? (size_t)w : 0;
    }
  }
  if (inputs > 0 && constant == inputs)
    return toplu__errorf(err, TOPLU_ERR_INVALID_ARGUMENT,
                        "calibration: every value of the %lld calibration rows is the same (%s): ranges calibrated "
                        "on constant data say nothing of real inputs; give real rows",
                        (long long)q->st.rows_done, list);
  return TOPLU_OK;
}

/* A warning naming the tensors to quantize that held NaN or Inf on the calibration rows: their ranges are of the
 * finite values alone, and the float model's answer there is not a number (before 2026-12-06 they were left out
 * without a word, and the report gave such nodes an error of 0.0). */
static int has_nonfinite(const qz_act_t *a) { return a->range.nonfinite > 0; }

static int has_zero_range(const qz_act_t *a) {
  return a->range.n > 0 && !((fmax(a->hi, 0) - fmin(a->lo, 0)) / 255.0 >= FLT_MIN); /* as qz_params takes it */
}

/* The tensors to quantize for which pick holds, the first 8 named in list ('name', with their non-finite count
 * when counts); returns how many there are. */
static int act_list(const qz_t *q, int (*pick)(const qz_act_t *), int counts, char *list, size_t size) {
  size_t nl = 0;
  int n = 0;
  list[0] = '\0';
  for (int k = 0; k < q->n_act; k++) {
    const qz_act_t *a = &q->act[k];
    if (a->watch || a->skip || !pick(a)) continue;
    if (++n <= 8 && nl < size) {
      int w = counts ? snprintf(list + nl, size - nl, "%s'%s' (%lld of %lld values)", nl ? ", " : "", a->name,
                                (long long)a->range.nonfinite, (long long)(a->range.nonfinite + a->range.n))
                     : snprintf(list + nl, size - nl, "%s'%s'", nl ? ", " : "", a->name);
      nl += w > 0 ? (size_t)w : 0;
    }
  }
  return n;
}

static void warn_nonfinite(qz_t *q) {
  char list[640];
  int n = act_list(q, has_nonfinite, 1, list, sizeof list);
  if (n)
    note(q, TOPLU_LOG_WARNING,
         "calibration: %d tensor%s to quantize held NaN or Inf on the calibration rows (the float model gives no "
         "number there; the ranges are of the finite values alone): %s%s; check the model and the calibration data",
         n, n == 1 ? "" : "s", list, n > 8 ? " and more" : "");
}

/* A warning naming the tensors to quantize whose calibrated range is zero (every value 0 on the calibration rows:
 * scale 1, so their int8 values say nothing of the data). */
static void warn_zero_ranges(qz_t *q) {
  char list[640];
  int n = act_list(q, has_zero_range, 0, list, sizeof list);
  if (n)
    note(q, TOPLU_LOG_WARNING,
         "calibration: %d tensor%s to quantize had every value 0 on the %lld calibration rows, or a range under "
         "3e-36 that no float32 scale holds (a zero range, quantized with scale 1: their int8 values say nothing "
         "of the data): %s%s; check the calibration data, "
         "or exclude the nodes that read %s",
         n, n == 1 ? "" : "s", (long long)q->st.rows_done, list, n > 8 ? " and more" : "", n == 1 ? "it" : "them");
}

/* The act named name, or -1. */
static int act_index(const qz_t *q, const char *name) {
  for (int k = 0; k < q->n_act; k++)
    if (!strcmp(q->act[k].name, name)) return k;
  return -1;
}

/* Ranges -> scales and zero points.  A MaxPool's output (without its Indices) takes the scale and zero point of
 * its input where that is quantized too, as ONNX Runtime's quantizer does for its "direct 8-bit" ops
 * (quantize_output_same_as_input): the max of a window is one of its values, so it needs no range of its own,
 * and the engine then pools the integers themselves (graph/fuse.c int8_elementwise) with no
 * DequantizeLinear, float MaxPool and QuantizeLinear.  Graph order, so a chain of them shares one pair. */
static void compute_params(qz_t *q) {
  for (int k = 0; k < q->n_act; k++) {
    qz_act_t *a = &q->act[k];
    qz_range_pick(&a->range, q->o->method, q->o->percentile, &a->lo, &a->hi);
    qz_params(a->lo, a->hi, q->o->symmetric_activations, a->cap, &a->scale, &a->zp);
  }
  for (size_t i = 0; i < q->g->n_node; i++) {
    const Onnx__NodeProto *n = q->g->node[i];
    if (!is_op(n, "MaxPool") || n->n_input < 1 || n->n_output < 1 || (n->n_output > 1 && n->output[1][0])) continue;
    int ka = act_index(q, n->output[0]), kx = act_index(q, n->input[0]);
    if (ka < 0 || kx < 0 || q->act[kx].watch || q->act[kx].skip || q->act[ka].watch) continue;
    qz_act_t *a = &q->act[ka];
    const qz_act_t *x = &q->act[kx];
    a->lo = x->lo, a->hi = x->hi, a->scale = x->scale, a->zp = x->zp;
  }
}

static toplu_status_t insert_qdq(qz_t *q, toplu_error_t *err) {
  Onnx__GraphProto *g = q->g;
  int symmetric = q->o->symmetric_activations;
  toplu_dtype_t zdt = symmetric ? TOPLU_DTYPE_INT8 : TOPLU_DTYPE_UINT8;
  for (int k = 0; k < q->n_act; k++)
    if (!(q->act[k].dq_name = qp_unique(g, q->act[k].name, "_DequantizeLinear_Output"))) return oom(err);
  /* weights and biases of the chosen nodes */
  for (size_t i = 0; i < g->n_node; i++) {
    Onnx__NodeProto *n = g->node[i];
    if (!q->sel[i]) continue;
    int w = weight_input(q, n);
    if (w < 0) continue;
    int xa = -1;
    for (int k = 0; k < q->n_act; k++)
      if (!strcmp(q->act[k].name, n->input[0])) xa = k;
    float *sw = NULL;
    int64_t ns = 0;
    toplu_status_t st = quantize_weight(q, n, w, weight_axis(q, n), &sw, &ns, err);
    if (!st && xa >= 0 && q->act[xa].range.n > 0 && (is_op(n, "Conv") || is_op(n, "Gemm")))
      st = quantize_bias(q, n, 2, q->act[xa].scale, sw, ns, err);
    free(sw);
    if (st) return st;
  }
  /* activations: rename their readers to the DequantizeLinear output */
  for (int k = 0; k < q->n_act; k++) {
    qz_act_t *a = &q->act[k];
    if (a->range.n == 0 || a->watch || a->skip) continue; /* never seen as float (an integer tensor after all), only
                                                            observed, or read only by nodes left float: left alone */
    for (size_t i = 0; i < g->n_node; i++) {
      Onnx__NodeProto *n = g->node[i];
      if (q->est[i] > 0 && !q->sel[i]) continue; /* left float for its error: it reads the float tensor */
      for (size_t j = 0; j < n->n_input; j++)
        if (!strcmp(n->input[j], a->name) && qp_set_input(n, (int)j, a->dq_name)) return oom(err);
    }
    a->s_name = qp_unique(g, a->name, "_scale");
    a->z_name = qp_unique(g, a->name, "_zero_point");
    int ok = a->s_name && a->z_name && qp_init_add(g, a->s_name, TOPLU_DTYPE_FLOAT, 0, NULL, &a->scale, sizeof a->scale) >= 0;
    int8_t z8 = (int8_t)a->zp;
    uint8_t zu = (uint8_t)a->zp;
    ok = ok && qp_init_add(g, a->z_name, zdt, 0, NULL, symmetric ? (const void *)&z8 : (const void *)&zu, 1) >= 0;
    if (!ok) {
      free(a->s_name);
      a->s_name = NULL;
      return oom(err);
    }
    q->st.tensors_quantized++;
  }
  return TOPLU_OK;
}

/* The QuantizeLinear and DequantizeLinear of activation a, appended to list. */
static int emit_pair(qz_t *q, const qz_act_t *a, Onnx__NodeProto **list, size_t *n) {
  char *qo = qp_unique(q->g, a->name, "_QuantizeLinear_Output"), *qnn = qp_unique(q->g, a->name, "_QuantizeLinear");
  char *dnn = qp_unique(q->g, a->name, "_DequantizeLinear");
  const char *qin[3] = {a->name, a->s_name, a->z_name};
  const char *din[3] = {qo, a->s_name, a->z_name};
  Onnx__NodeProto *qn = qo && qnn ? qp_node_new("QuantizeLinear", qnn, 3, qin, qo) : NULL;
  Onnx__NodeProto *dn = qo && dnn ? qp_node_new("DequantizeLinear", dnn, 3, din, a->dq_name) : NULL;
  free(qo);
  free(qnn);
  free(dnn);
  if (!qn || !dn) {
    if (qn) onnx__node_proto__free_unpacked(qn, NULL);
    if (dn) onnx__node_proto__free_unpacked(dn, NULL);
    return -1;
  }
  list[(*n)++] = qn;
  list[(*n)++] = dn;
  return 0;
}

/* The new node order: weight DequantizeLinears, pairs of graph inputs, then every node followed by the pairs of
 * what it produces (topological order kept). */
static toplu_status_t reorder(qz_t *q, toplu_error_t *err) {
  Onnx__GraphProto *g = q->g;
  size_t cap = g->n_node + (size_t)q->n_front + 2 * (size_t)q->n_act + 1, n = 0;
  Onnx__NodeProto **list = malloc(cap * sizeof *list);
  if (!list) return oom(err);
  for (int k = 0; k < q->n_front; k++) list[n++] = q->front[k];
  q->n_front = 0;
  int bad = 0;
  for (int k = 0; k < q->n_act; k++)
    if (q->act[k].s_name && qp_producer(g, q->act[k].name) < 0) bad |= emit_pair(q, &q->act[k], list, &n);
  for (size_t i = 0; i < g->n_node; i++) {
    Onnx__NodeProto *nd = g->node[i];
    list[n++] = nd;
    for (size_t o = 0; o < nd->n_output; o++)
      for (int k = 0; k < q->n_act; k++)
        if (q->act[k].s_name && !strcmp(nd->output[o], q->act[k].name)) bad |= emit_pair(q, &q->act[k], list, &n);
  }
  free(g->node);
  g->node = list;
  g->n_node = n;
  return bad ? oom(err) : TOPLU_OK;
}

/* ---- dynamic quantization (options.dynamic; toplu/quantize.h) ---- */

static float attr_float(const Onnx__NodeProto *n, const char *name, float dflt) {
  const Onnx__AttributeProto *a = qp_attr(n, name);
  return a && a->has_f ? a->f : dflt;
}

/* A float initializer's data as [K, N] (transposed from [N, K] when trans), malloc'ed; NULL when it is not a 2-D
 * float initializer (or out of memory: *oom set). */
static float *dyn_weights(const qz_t *q, const char *name, int trans, int64_t *k, int64_t *n, int *oomp) {
  int wi = qp_init_find(q->g, name);
  if (wi < 0 || q->g->initializer[wi]->n_dims != 2 || q->g->initializer[wi]->data_type != TOPLU_DTYPE_FLOAT) return NULL;
  toplu_tensor_t t;
  toplu_error_t e;
  if (init_float(q, wi, &t, &e)) return NULL;
  int64_t r = t.dims[0], c = t.dims[1];
  float *w = malloc((size_t)(r * c + 1) * sizeof *w);
  if (!w) {
    *oomp = 1;
    toplu_tensor_free(&t);
    return NULL;
  }
  const float *src = t.data;
  for (int64_t i = 0; i < r; i++)
    for (int64_t j = 0; j < c; j++) {
      if (trans) w[j * r + i] = src[i * c + j];
      else w[i * c + j] = src[i * c + j];
    }
  *k = trans ? c : r;
  *n = trans ? r : c;
  toplu_tensor_free(&t);
  return w;
}

/* Can node n be quantized dynamically?  Its [K, N] float weights (malloc'ed) and Gemm's C (an initializer's
 * name, or NULL) and beta. */
static float *dyn_candidate(const qz_t *q, const Onnx__NodeProto *n, int64_t *k, int64_t *nn, const char **c, float *beta,
                            int *oomp) {
  *c = NULL;
  *beta = 1.f;
  if (n->n_output != 1 || n->n_input < 2 || !is_activation(q, n->input[0]) || dtype_of(q, n->output[0]) != TOPLU_DTYPE_FLOAT)
    return NULL;
  if (is_op(n, "MatMul")) {
    if (n->n_input != 2) return NULL;
    return dyn_weights(q, n->input[1], 0, k, nn, oomp);
  }
  if (!is_op(n, "Gemm") || qp_attr_int(n, "transA", 0) || attr_float(n, "alpha", 1.f) != 1.f) return NULL;
  if (rank_of((void *)q, n->input[0]) != 2) return NULL;
  *beta = attr_float(n, "beta", 1.f);
  if (n->n_input > 2 && *n->input[2] && *beta != 0.f) {
    int ci = qp_init_find(q->g, n->input[2]);
    if (ci < 0 || q->g->initializer[ci]->data_type != TOPLU_DTYPE_FLOAT) return NULL;
    *c = n->input[2];
  }
  float *w = dyn_weights(q, n->input[1], qp_attr_int(n, "transB", 0) != 0, k, nn, oomp);
  if (w && *c) { /* C must be a row of N: [N] or [1, N] */
    const Onnx__TensorProto *ct = q->g->initializer[qp_init_find(q->g, *c)];
    int64_t numel = 1;
    for (size_t d = 0; d < ct->n_dims; d++) numel *= ct->dims[d];
    if (numel != *nn || ct->n_dims < 1 || ct->n_dims > 2 || (ct->n_dims == 2 && ct->dims[0] != 1)) {
      free(w);
      return NULL;
    }
  }
  return w;
}

/* The DynamicQuantizeLinear of one activation, shared by its readers. */
typedef struct dyn_x {
  char *x, *xq, *xs, *xz;
} dyn_x_t;

/* Append node to list (growing it); -1 out of memory. */
static int list_push(Onnx__NodeProto ***list, size_t *n, size_t *cap, Onnx__NodeProto *node) {
  if (!node) return -1;
  if (*n == *cap) {
    size_t nc = *cap ? 2 * *cap : 64;
    Onnx__NodeProto **nl = realloc(*list, nc * sizeof *nl);
    if (!nl) {
      onnx__node_proto__free_unpacked(node, NULL);
      return -1;
    }
    *list = nl;
    *cap = nc;
  }
  (*list)[(*n)++] = node;
  return 0;
}

/* One chosen node's replacement, appended to list: [DynamicQuantizeLinear(x)], Mul(x_scale, W_scale),
 * MatMulInteger, Cast, Mul [, Add(beta * C)].  0, or -1 out of memory. */
static int dyn_rewrite_node(qz_t *q, const Onnx__NodeProto *n, const float *w, int64_t k, int64_t nc, const char *c,
                            float beta, dyn_x_t **xs, int *n_xs, Onnx__NodeProto ***list, size_t *ln, size_t *lcap) {
  Onnx__GraphProto *g = q->g;
  int per = q->per_channel;
  int64_t ns = per ? nc : 1;
  float *sc = malloc((size_t)ns * sizeof *sc);
  int8_t *wq = malloc((size_t)(k * nc + 1)), *wz = calloc((size_t)ns, 1);
  float *cb = NULL;
  int ok = sc && wq && wz;
  for (int64_t j = 0; ok && j < ns; j++) {
    double amax = 0;
    for (int64_t i = 0; i < k; i++)
      for (int64_t jj = per ? j : 0; jj < (per ? j + 1 : nc); jj++) {
        double v = fabs((double)w[i * nc + jj]);
        amax = v > amax ? v : amax;
      }
    sc[j] = amax / 127.0 >= FLT_MIN ? (float)(amax / 127.0) : 1.0f;
  }
  for (int64_t i = 0; ok && i < k; i++)
    for (int64_t j = 0; j < nc; j++) {
      double v = rint((double)w[i * nc + j] / sc[per ? j : 0]);
      wq[i * nc + j] = (int8_t)(v > 127 ? 127 : v < -127 ? -127 : v);
    }
  if (ok && c) { /* beta * C as a row [N] */
    toplu_tensor_t ct;
    toplu_error_t e;
    ok = (cb = malloc((size_t)nc * sizeof *cb)) != NULL && !init_float(q, qp_init_find(g, c), &ct, &e);
    if (ok) {
      for (int64_t j = 0; j < nc; j++) cb[j] = beta * ((const float *)ct.data)[j];
      toplu_tensor_free(&ct);
    }
  }
  const char *base = n->input[1];
  const char *nm = n->name && *n->name ? n->name : n->output[0];
  char *wqn = ok ? qp_unique(g, base, "_quantized") : NULL, *wsn = ok ? qp_unique(g, base, "_scale") : NULL;
  char *wzn = ok ? qp_unique(g, base, "_zero_point") : NULL;
  ok = ok && wqn && wsn && wzn;
  int64_t wd[2] = {k, nc}, sd[1] = {nc};
  ok = ok && qp_init_add(g, wqn, TOPLU_DTYPE_INT8, 2, wd, wq, (size_t)(k * nc)) >= 0;
  ok = ok && qp_init_add(g, wsn, TOPLU_DTYPE_FLOAT, per ? 1 : 0, sd, sc, (size_t)ns * sizeof *sc) >= 0;
  ok = ok && qp_init_add(g, wzn, TOPLU_DTYPE_INT8, per ? 1 : 0, sd, wz, (size_t)ns) >= 0;
  char *cn = ok && cb ? qp_unique(g, c, "_row") : NULL;
  ok = ok && (!cb || (cn && qp_init_add(g, cn, TOPLU_DTYPE_FLOAT, 1, sd, cb, (size_t)nc * sizeof *cb) >= 0));
  /* the shared DynamicQuantizeLinear of x */
  dyn_x_t *dx = NULL;
  for (int i = 0; ok && i < *n_xs; i++)
    if (!strcmp((*xs)[i].x, n->input[0])) dx = &(*xs)[i];
  if (ok && !dx) {
    dyn_x_t *nx = realloc(*xs, (size_t)(*n_xs + 1) * sizeof *nx);
    ok = nx != NULL;
    if (ok) {
      *xs = nx;
      dx = &nx[(*n_xs)++];
      memset(dx, 0, sizeof *dx);
      dx->x = strdup(n->input[0]);
      dx->xq = qp_unique(g, n->input[0], "_quantized");
      dx->xs = qp_unique(g, n->input[0], "_scale");
      dx->xz = qp_unique(g, n->input[0], "_zero_point");
      char *dn = qp_unique(g, n->input[0], "_DynamicQuantizeLinear");
      ok = dx->x && dx->xq && dx->xs && dx->xz && dn;
      Onnx__NodeProto *d = ok ? qp_node_new("DynamicQuantizeLinear", dn, 1, (const char *const *)&dx->x, dx->xq) : NULL;
      free(dn);
      /* two more outputs: scale and zero point */
      char **outs = d ? realloc(d->output, 3 * sizeof *outs) : NULL;
      if (outs) {
        d->output = outs;
        outs[1] = strdup(dx->xs);
        outs[2] = strdup(dx->xz);
        d->n_output = 3;
        ok = outs[1] && outs[2];
      } else {
        ok = 0;
      }
      if (!ok && d) onnx__node_proto__free_unpacked(d, NULL);
      else if (ok) ok = !list_push(list, ln, lcap, d);
      if (ok) q->st.tensors_quantized++;
    }
  }
  char *sn = ok ? qp_unique(g, nm, "_scales_mul") : NULL, *an = ok ? qp_unique(g, nm, "_MatMulInteger_output") : NULL;
  char *fn = ok ? qp_unique(g, nm, "_cast_output") : NULL, *pn = ok && cb ? qp_unique(g, nm, "_output_no_bias") : NULL;
  ok = ok && sn && an && fn && (!cb || pn);
  char nname[1024];
  if (ok) {
    const char *in_s[2] = {dx->xs, wsn};
    snprintf(nname, sizeof nname, "%s_scales_mul", nm);
    ok = !list_push(list, ln, lcap, qp_node_new("Mul", nname, 2, in_s, sn));
  }
  if (ok) {
    const char *in_m[4] = {dx->xq, wqn, dx->xz, wzn};
    snprintf(nname, sizeof nname, "%s_MatMulInteger", nm);
    ok = !list_push(list, ln, lcap, qp_node_new("MatMulInteger", nname, 4, in_m, an));
  }
  if (ok) {
    const char *in_c[1] = {an};
    snprintf(nname, sizeof nname, "%s_cast", nm);
    Onnx__NodeProto *cast = qp_node_new("Cast", nname, 1, in_c, fn);
    ok = cast && !qp_attr_set_int(cast, "to", TOPLU_DTYPE_FLOAT) && !list_push(list, ln, lcap, cast);
  }
  if (ok) {
    const char *in_o[2] = {fn, sn};
    snprintf(nname, sizeof nname, "%s_output_scale_mul", nm);
    ok = !list_push(list, ln, lcap, qp_node_new("Mul", nname, 2, in_o, cb ? pn : n->output[0]));
  }
  if (ok && cb) {
    const char *in_a[2] = {pn, cn};
    snprintf(nname, sizeof nname, "%s_bias_add", nm);
    ok = !list_push(list, ln, lcap, qp_node_new("Add", nname, 2, in_a, n->output[0]));
  }
  free(sn);
  free(an);
  free(fn);
  free(pn);
  free(cn);
  free(wqn);
  free(wsn);
  free(wzn);
  free(sc);
  free(wq);
  free(wz);
  free(cb);
  return ok ? 0 : -1;
}

/* options.dynamic: rewrite every chosen MatMul/Gemm, keeping the node order (the new nodes take the old one's
 * place), and drop the float weights nothing reads any more. */
static toplu_status_t dynamic_quantize(qz_t *q, toplu_error_t *err) {
  Onnx__GraphProto *g = q->g;
  toplu_status_t st = check_exclude(q, err);
  if (st) return st;
  Onnx__NodeProto **list = NULL;
  size_t ln = 0, lcap = 0;
  dyn_x_t *xs = NULL;
  int n_xs = 0, bad = 0;
  char **old_w = calloc(2 * g->n_node + 1, sizeof *old_w);
  size_t n_old = 0;
  if (!old_w) return oom(err);
  size_t n_node = g->n_node;
  for (size_t i = 0; i < n_node && !bad; i++) {
    Onnx__NodeProto *n = g->node[i];
    int hit = 0, oomp = 0;
    int64_t k = 0, nc = 0;
    const char *c = NULL;
    float beta = 1.f;
    float *w = NULL;
    if (op_wanted(q, n->op_type) && (!n->domain || !*n->domain || !strcmp(n->domain, "ai.onnx"))) {
      if (is_excluded(q, n, &hit)) bad = 1;
      else if (!hit) w = dyn_candidate(q, n, &k, &nc, &c, &beta, &oomp);
    }
    if (oomp) bad = 1;
    if (!w) {
      if (!bad && list_push(&list, &ln, &lcap, n)) bad = 1;
      if (!bad) g->node[i] = NULL;
      continue;
    }
    if (dyn_rewrite_node(q, n, w, k, nc, c, beta, &xs, &n_xs, &list, &ln, &lcap)) bad = 1;
    free(w);
    if (bad) break;
    if (!(old_w[n_old++] = strdup(n->input[1])) || (c && !(old_w[n_old++] = strdup(c)))) bad = 1;
    q->st.nodes_quantized++;
    q->st.weights_quantized++;
    onnx__node_proto__free_unpacked(n, NULL);
    g->node[i] = NULL;
  }
  /* the nodes not yet moved (after an error) go behind, so the graph frees them all */
  for (size_t i = 0; i < n_node; i++)
    if (g->node[i] && list_push(&list, &ln, &lcap, g->node[i])) {
      onnx__node_proto__free_unpacked(g->node[i], NULL);
      bad = 1;
    }
  free(g->node);
  g->node = list;
  g->n_node = ln;
  for (size_t i = 0; i < n_old; i++) {
    if (!bad && qp_readers(g, old_w[i], NULL) == 0 && !qp_is_graph_output(g, old_w[i])) {
      int wi = qp_init_find(g, old_w[i]);
      if (wi >= 0) qp_init_remove(g, wi);
    }
    free(old_w[i]);
  }
  free(old_w);
  for (int i = 0; i < n_xs; i++) {
    free(xs[i].x);
    free(xs[i].xq);
    free(xs[i].xs);
    free(xs[i].xz);
  }
  free(xs);
  if (bad) return oom(err);
  qp_compact(g);
  if (!q->st.nodes_quantized)
    return toplu__errorf(err, TOPLU_ERR_UNSUPPORTED,
                        "%s: nothing to quantize dynamically: no node of the op types %s reads a float activation "
                        "with a constant 2-D float weight (Gemm: transA 0, alpha 1, C absent or a constant row)",
                        q->o->model, q->o->op_types && *q->o->op_types ? q->o->op_types : "MatMul,Gemm");
  return TOPLU_OK;
}

/* ---- files ---- */

/* What an existing non-regular file at path is ("a symbolic link", "a character device", ...), or NULL when
 * nothing is there or it is a regular file.  lstat: a link is never followed. */
static const char *not_regular(const char *path) {
  struct stat sb;
  if (lstat(path, &sb) != 0 || S_ISREG(sb.st_mode)) return NULL;
  if (S_ISLNK(sb.st_mode)) return "a symbolic link";
  if (S_ISDIR(sb.st_mode)) return "a folder";
  if (S_ISCHR(sb.st_mode)) return "a character device";
  if (S_ISBLK(sb.st_mode)) return "a block device";
  if (S_ISFIFO(sb.st_mode)) return "a FIFO (named pipe)";
  if (S_ISSOCK(sb.st_mode)) return "a socket";
  return "not a regular file";
}

static toplu_status_t refuse_not_regular(const char *what, const char *path, const char *kind, toplu_error_t *err) {
  return toplu__errorf(err, TOPLU_ERR_INVALID_ARGUMENT,
                      "%s %s exists and is %s, not a regular file: toplu quantize replaces only regular files "
                      "(remove it or write elsewhere)", what, path, kind);
}

/* Create a new file PATH.XXXXXX.part (X from [A-Za-z0-9], O_EXCL: never an existing file) for writing; its fd,
 * *tmp (malloc'ed) its name; -1 with errno set (ENOMEM, or open's) and *tmp NULL. */
static int tmp_create(const char *path, char **tmp) {
  static const char abc[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789";
  static unsigned counter;
  size_t pl = strlen(path) + 16;
  *tmp = malloc(pl);
  if (!*tmp) {
    errno = ENOMEM;
    return -1;
  }
  uint64_t x = (uint64_t)toplu_monotonic_ns() ^ ((uint64_t)getpid() << 32) ^ (uint64_t)(uintptr_t)tmp;
  for (int attempt = 0; attempt < 100; attempt++) {
    x += UINT64_C(0x9E3779B97F4A7C15) * (__atomic_add_fetch(&counter, 1, __ATOMIC_RELAXED) + (unsigned)attempt);
    uint64_t z = x;
    z = (z ^ (z >> 30)) * UINT64_C(0xBF58476D1CE4E5B9);
    z = (z ^ (z >> 27)) * UINT64_C(0x94D049BB133111EB);
    z ^= z >> 31;
    char sfx[7];
    for (int k = 0; k < 6; k++, z /= 62) sfx[k] = abc[z % 62];
    sfx[6] = '\0';
    snprintf(*tmp, pl, "%s.%s.part", path, sfx);
    int fd = open(*tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0644);
    if (fd >= 0 || errno != EEXIST) {
      if (fd < 0) {
        int e = errno;
        free(*tmp);
        *tmp = NULL;
        errno = e;
      }
      return fd;
    }
  }
  free(*tmp);
  *tmp = NULL;
  errno = EEXIST;
  return -1;
}

/* Write data to a new temporary file beside path (tmp_create), in chunks with options.cancel checked between
 * them, and fsync it: *tmp gets its name (malloc'ed; the caller renames it with tmp_commit or removes it).  On
 * failure or cancel the temporary file is removed and *tmp is NULL. */
static toplu_status_t tmp_write(qz_t *q, const char *what, const char *path, const void *data, size_t len, char **tmp,
                                toplu_error_t *err) {
  int fd = tmp_create(path, tmp);
  if (fd < 0) {
    q->st.write_failed = 1;
    return errno == ENOMEM ? oom(err)
                           : toplu__errorf(err, TOPLU_ERR_IO, "%s %s: cannot create a temporary file beside it: %s",
                                           what, path, strerror(errno));
  }
  const char *p = data;
  size_t left = len;
  toplu_status_t st = TOPLU_OK;
  int e = 0;
  while (left > 0 && !(st = check_cancel(q, err))) {
    size_t chunk = left < ((size_t)1 << 20) ? left : (size_t)1 << 20;
    ssize_t w = write(fd, p, chunk);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) {
      e = w < 0 ? errno : ENOSPC;
      break;
    }
    p += w;
    left -= (size_t)w;
  }
  if (!st && !e && fsync(fd) != 0) e = errno;
  if (close(fd) != 0 && !st && !e) e = errno;
  if (!st && !e) st = check_cancel(q, err);
  if (!st && e) {
    q->st.write_failed = 1;
    st = toplu__errorf(err, TOPLU_ERR_IO, "%s %s: cannot write: %s (%zu of %zu bytes written; nothing kept)", what,
                       path, strerror(e), len - left, len);
  }
  if (st) {
    unlink(*tmp);
    free(*tmp);
    *tmp = NULL;
  }
  return st;
}

/* Rename temporary file tmp over path; refused (tmp removed) when path has become something other than a
 * regular file since the check before calibration. */
static toplu_status_t tmp_commit(qz_t *q, const char *what, const char *path, char **tmp, toplu_error_t *err) {
  const char *kind = not_regular(path);
  toplu_status_t st = TOPLU_OK;
  if (kind) st = refuse_not_regular(what, path, kind, err);
  else if (rename(*tmp, path) != 0) {
    q->st.write_failed = 1;
    st = toplu__errorf(err, TOPLU_ERR_IO, "%s %s: cannot rename %s to it: %s", what, path, *tmp, strerror(errno));
  }
  if (st) unlink(*tmp);
  free(*tmp);
  *tmp = NULL;
  return st;
}

/* The report (options.report) as JSON text, malloc'ed; NULL out of memory. */
static char *report_text(qz_t *q) {
  json_t *r = json_object(), *tensors = json_array(), *nodes = json_array();
  if (!r || !tensors || !nodes) {
    json_decref(r);
    json_decref(tensors);
    json_decref(nodes);
    return NULL;
  }
  json_object_set_new(r, "model", json_string(q->o->model));
  json_object_set_new(r, "output", json_string(q->o->output));
  json_object_set_new(r, "method", json_string(toplu_calib_method_name(q->o->method)));
  if (q->o->method == TOPLU_CALIB_PERCENTILE)
    json_object_set_new(r, "percentile", json_real(q->o->percentile > 0 ? q->o->percentile : 99.999));
  json_object_set_new(r, "per_channel", json_boolean(q->per_channel));
  json_object_set_new(r, "symmetric_activations", json_boolean(q->o->symmetric_activations));
  if (q->o->max_node_error >= 0)
    json_object_set_new(r, "max_node_error",
                        json_real(q->o->max_node_error > 0 ? q->o->max_node_error : TOPLU_QUANTIZE_MAX_NODE_ERROR));
  else
    json_object_set_new(r, "max_node_error", json_null());
  json_object_set_new(r, "opset", json_integer(q->st.opset));
  json_object_set_new(r, "calibration_rows", json_integer(q->st.rows_done));
  json_object_set_new(r, "bad_rows", json_integer(q->st.rows_bad));
  json_object_set_new(r, "folded_nodes", json_integer(q->st.nodes_folded));
  json_object_set_new(r, "nodes_quantized", json_integer(q->st.nodes_quantized));
  json_object_set_new(r, "nodes_left_float", json_integer(q->st.nodes_left_float));
  for (int k = 0; k < q->n_act; k++) {
    qz_act_t *a = &q->act[k];
    if (!a->s_name) continue;
    json_t *t = json_pack("{s:s, s:f, s:f, s:f, s:f, s:f, s:i, s:I}", "name", a->name, "min", a->range.lo, "max",
                          a->range.hi, "lo", a->lo, "hi", a->hi, "scale", (double)a->scale, "zero_point", (int)a->zp,
                          "values", (json_int_t)a->range.n);
    if (t && a->range.nonfinite) json_object_set_new(t, "nonfinite_values", json_integer((json_int_t)a->range.nonfinite));
    if (t) json_array_append_new(tensors, t);
  }
  for (int i = 0; i < q->n_cand; i++) {
    const qz_cand_t *c = &q->cand[i];
    json_t *nd = json_pack("{s:s, s:s, s:s, s:b}", "node", c->name, "op_type", c->op, "output", c->out, "quantized",
                           c->reason == NULL);
    if (!nd) continue;
    if (c->reason) json_object_set_new(nd, "reason", json_string(c->reason));
    double est = q->est[c->node];
    if (est >= 0) json_object_set_new(nd, "estimated_error", json_real(est));
    const qz_act_t *a = c->act >= 0 ? &q->act[c->act] : NULL;
    if (a && q->st.rows_done > 0 && a->cmp_nonfinite > 0) {
      /* the float output is not a number there: no error to give (it was 0.0) */
      json_object_set_new(nd, "relative_rms_error", json_null());
      json_object_set_new(nd, "max_abs_error", json_null());
      char why[160];
      snprintf(why, sizeof why, "the float model's output is NaN or Inf on %lld values of the calibration rows",
               (long long)a->cmp_nonfinite);
      json_object_set_new(nd, "error_not_measured", json_string(why));
    } else if (a && q->st.rows_done > 0) {
      double rel = a->ref2 > 0 ? sqrt(a->err2 / a->ref2) : 0;
      double sqnr = a->err2 > 0 ? 10 * log10(a->ref2 / a->err2) : INFINITY;
      json_object_set_new(nd, "relative_rms_error", json_real(rel));
      json_object_set_new(nd, "max_abs_error", json_real(a->maxabs));
      if (isfinite(sqnr)) json_object_set_new(nd, "sqnr_db", json_real(sqnr));
    }
    json_array_append_new(nodes, nd);
  }
  json_object_set_new(r, "tensors", tensors);
  json_object_set_new(r, "nodes", nodes);
  char *text = json_dumps(r, JSON_INDENT(2));
  json_decref(r);
  return text;
}

/* Before the report pass: which tensor of the quantized model each chosen node's output is compared at (its
 * DequantizeLinear output when it is quantized, else the tensor itself: a model output, or the output of a node
 * left float).  0, or -1 out of memory. */
static int report_targets(qz_t *q) {
  for (int i = 0; i < q->n_cand; i++) {
    qz_cand_t *c = &q->cand[i];
    if (c->reason && strcmp(c->reason, QZ_WHY_ERROR)) continue; /* never chosen: not measured */
    int k = q->node_out[c->node];
    if (k >= 0 && q->act[k].s_name) {
      if (!q->act[k].cmp && !(q->act[k].cmp = strdup(q->act[k].dq_name))) return -1;
    } else {
      int before = q->n_act;
      k = act_add(q, c->out);
      if (k < 0) return -1;
      if (k >= before) q->act[k].watch = 1;
      if (!q->act[k].cmp && !(q->act[k].cmp = strdup(q->act[k].s_name ? q->act[k].dq_name : c->out))) return -1;
    }
    c->act = k;
  }
  return 0;
}

/* ---- the call ---- */

void toplu_quantize_options_init(toplu_quantize_options_t *o) {
  if (!o) return;
  memset(o, 0, sizeof *o);
  o->per_channel = 1;
  o->method = TOPLU_CALIB_PERCENTILE;
}

const char *toplu_calib_method_name(toplu_calib_method_t m) {
  switch (m) {
    case TOPLU_CALIB_MINMAX: return "minmax";
    case TOPLU_CALIB_PERCENTILE: return "percentile";
    case TOPLU_CALIB_ENTROPY: return "entropy";
  }
  return "?";
}

/* 1 when paths a and b name one file: the same device and inode when both exist, else the same canonical path. */
static int same_file(const char *a, const char *b) {
  struct stat x, y;
  if (stat(a, &x) == 0 && stat(b, &y) == 0) return x.st_dev == y.st_dev && x.st_ino == y.st_ino;
  char ca[PATH_MAX], cb[PATH_MAX];
  return !pl_path_canon(a, ca, sizeof ca) && !pl_path_canon(b, cb, sizeof cb) && !strcmp(ca, cb);
}

/* 1 when writing file w would overwrite what calibration source src ("[NAME=]SOURCE": a file, a folder or a
 * glob) reads. */
static int clobbers_source(const char *w, const char *src) {
  const char *eq = strchr(src, '=');
  const char *forms[2] = {src, eq ? eq + 1 : NULL};
  for (int f = 0; f < 2 && forms[f]; f++) {
    const char *p = forms[f];
    struct stat sb;
    if (stat(p, &sb) == 0 && S_ISDIR(sb.st_mode)) {
      char cw[PATH_MAX], cd[PATH_MAX];
      if (!pl_path_canon(w, cw, sizeof cw) && !pl_path_canon(p, cd, sizeof cd) && pl_path_inside(cw, cd)) return 1;
    } else if (strpbrk(p, "*?[")) {
      if (!fnmatch(p, w, FNM_PATHNAME | FNM_PERIOD)) return 1;
    } else if (same_file(w, p)) {
      return 1;
    }
  }
  return 0;
}

/* The output's and the report's folders exist and take new files, and what is at the path now, if anything, is a
 * regular file (checked before calibration runs): a probe of the temporary file tmp_write makes, created and
 * removed (access() says yes to root on a read-only mount, where open() says no). */
static toplu_status_t check_writable(const char *what, const char *path, toplu_error_t *err) {
  char dir[PATH_MAX];
  pl_path_dir(path, dir, sizeof dir);
  if (!pl_is_dir(dir))
    return toplu__errorf(err, TOPLU_ERR_INVALID_ARGUMENT, "%s %s: folder %s does not exist", what, path, dir);
  const char *kind = not_regular(path);
  if (kind && !strcmp(kind, "a folder")) return toplu__errorf(err, TOPLU_ERR_INVALID_ARGUMENT, "%s %s is a folder", what, path);
  if (kind) return refuse_not_regular(what, path, kind, err);
  char *part = NULL;
  int fd = tmp_create(path, &part);
  if (fd < 0)
    return errno == ENOMEM ? toplu__errorf(err, TOPLU_ERR_OUT_OF_MEMORY, "out of memory")
                           : toplu__errorf(err, TOPLU_ERR_INVALID_ARGUMENT, "%s %s: cannot create files in folder %s: %s",
                                           what, path, dir, strerror(errno));
  close(fd);
  unlink(part);
  free(part);
  return TOPLU_OK;
}

/* Refuses an output or report that would overwrite the model, a calibration source or each other. */
static toplu_status_t check_paths(const toplu_quantize_options_t *o, int in_memory, toplu_error_t *err) {
  const char *w[2] = {in_memory ? NULL : o->output, o->report}, *what[2] = {"output", "report"};
  toplu_status_t st;
  for (int i = 0; i < 2; i++) {
    if (!w[i]) continue;
    if ((st = check_writable(what[i], w[i], err))) return st;
    if (same_file(w[i], o->model))
      return toplu__errorf(err, TOPLU_ERR_INVALID_ARGUMENT, "%s %s is the model itself", what[i], w[i]);
    for (int k = 0; !o->dynamic && k < o->n_calibration; k++)
      if (o->calibration[k] && clobbers_source(w[i], o->calibration[k]))
        return toplu__errorf(err, TOPLU_ERR_INVALID_ARGUMENT,
                            "%s %s would overwrite calibration source %s: write elsewhere", what[i], w[i],
                            o->calibration[k]);
  }
  if (w[0] && w[1] && same_file(w[0], w[1]))
    return toplu__errorf(err, TOPLU_ERR_INVALID_ARGUMENT, "output %s and report %s are the same file", w[0], w[1]);
  return TOPLU_OK;
}

static toplu_status_t check(const toplu_quantize_options_t *o, int in_memory, toplu_error_t *err) {
  if (!o) return toplu__errorf(err, TOPLU_ERR_INVALID_ARGUMENT, "options is NULL");
  if (!o->model || !*o->model) return toplu__errorf(err, TOPLU_ERR_INVALID_ARGUMENT, "model: no model given");
  if (!in_memory && (!o->output || !*o->output))
    return toplu__errorf(err, TOPLU_ERR_INVALID_ARGUMENT, "output: no output given");
  if (!in_memory && !strcmp(o->model, o->output))
    return toplu__errorf(err, TOPLU_ERR_INVALID_ARGUMENT, "output %s is the model itself", o->output);
  if (o->dynamic && o->report)
    return toplu__errorf(err, TOPLU_ERR_INVALID_ARGUMENT,
                        "report: a dynamic quantization has no calibration rows to report on (leave report NULL)");
  if (o->dynamic) return check_paths(o, in_memory, err); /* the calibration options are not read */
  if (!in_memory && (o->n_calibration < 1 || !o->calibration))
    return toplu__errorf(err, TOPLU_ERR_INVALID_ARGUMENT, "calibration: no calibration source given");
  if (o->n_calibration < 0 || (o->n_calibration > 0 && !o->calibration))
    return toplu__errorf(err, TOPLU_ERR_INVALID_ARGUMENT, "calibration: %d sources and no list", o->n_calibration);
  if (o->synthetic_rows < 0 || o->n_shapes < 0 || (o->n_shapes > 0 && !o->shapes))
    return toplu__errorf(err, TOPLU_ERR_INVALID_ARGUMENT, "synthetic_rows %lld, n_shapes %d: neither may be negative",
                        (long long)o->synthetic_rows, o->n_shapes);
  if (o->method < TOPLU_CALIB_MINMAX || o->method > TOPLU_CALIB_ENTROPY)
    return toplu__errorf(err, TOPLU_ERR_INVALID_ARGUMENT, "method %d: expected minmax, percentile or entropy",
                        (int)o->method);
  if (isnan(o->percentile) || o->percentile < 0 || o->percentile > 100 ||
      (o->percentile > 0 && o->percentile < 50))
    return toplu__errorf(err, TOPLU_ERR_INVALID_ARGUMENT,
                        "percentile %g: expected the percent of values kept, 50..100 (0: 99.999)", o->percentile);
  if (isnan(o->max_node_error))
    return toplu__errorf(err, TOPLU_ERR_INVALID_ARGUMENT, "max_node_error NaN: a relative error, 0 the default, negative none");
  if (o->calibration_rows < 0 || o->batch_size < 0 || o->threads < 0 || o->threads > TOPLU_MAX_THREADS)
    return toplu__errorf(err, TOPLU_ERR_INVALID_ARGUMENT,
                        "calibration_rows %lld, batch_size %lld, threads %d: none may be negative (threads at most %d)",
                        (long long)o->calibration_rows, (long long)o->batch_size, o->threads, TOPLU_MAX_THREADS);
  return check_paths(o, in_memory, err);
}

static const char *const KNOWN_OPS[] = {"Conv", "ConvTranspose", "Gemm", "MatMul", "Add", "Mul"};

static toplu_status_t set_ops(qz_t *q, toplu_error_t *err) {
  const char *spec = q->o->op_types && *q->o->op_types ? q->o->op_types
                     : q->o->dynamic                   ? "MatMul,Gemm"
                                                       : "Conv,ConvTranspose,Gemm,MatMul,Add";
  size_t len = strlen(spec) + 3;
  if (!(q->ops = malloc(len))) return oom(err);
  snprintf(q->ops, len, ",%s,", spec);
  for (const char *p = spec; *p;) {
    const char *e = strchr(p, ',');
    size_t l = e ? (size_t)(e - p) : strlen(p);
    int known = 0;
    for (size_t k = 0; k < sizeof KNOWN_OPS / sizeof *KNOWN_OPS; k++)
      known |= strlen(KNOWN_OPS[k]) == l && !strncmp(KNOWN_OPS[k], p, l);
    if (!known)
      return toplu__errorf(err, TOPLU_ERR_NOT_FOUND,
                          "op_types: '%.*s' is not an op toplu quantizes (Conv, ConvTranspose, Gemm, MatMul, Add, Mul)",
                          (int)l, p);
    if (q->o->dynamic && !(l == 6 && !strncmp(p, "MatMul", 6)) && !(l == 4 && !strncmp(p, "Gemm", 4)))
      return toplu__errorf(err, TOPLU_ERR_INVALID_ARGUMENT,
                          "op_types: '%.*s' is not quantized dynamically (only MatMul and Gemm are)", (int)l, p);
    p += l + (e ? 1 : 0);
  }
  return TOPLU_OK;
}

/* The default-domain opset entry of the model, or NULL. */
static Onnx__OperatorSetIdProto *main_opset(Onnx__ModelProto *mp) {
  for (size_t i = 0; i < mp->n_opset_import; i++) {
    Onnx__OperatorSetIdProto *o = mp->opset_import[i];
    if (!o->domain || !*o->domain || !strcmp(o->domain, "ai.onnx")) return o;
  }
  return NULL;
}

static toplu_status_t prepare(qz_t *q, toplu_error_t *err) {
  const toplu_quantize_options_t *o = q->o;
  unsigned char *buf = NULL;
  size_t len = 0;
  toplu_status_t st = toplu__onnx_read_bytes(o->model, &buf, &len, NULL, 0, err);
  if (st) return st;
  q->mp = onnx__model_proto__unpack(NULL, len, buf);
  free(buf);
  if (!q->mp || !q->mp->graph)
    return toplu__errorf(err, TOPLU_ERR_PARSE, "%s: not an ONNX model (protobuf decoding failed)", o->model);
  q->g = q->mp->graph;
  if (name_nodes(q->g)) return oom(err);
  for (size_t i = 0; i < q->g->n_initializer; i++)
    if (q->g->initializer[i]->has_data_location &&
        q->g->initializer[i]->data_location == ONNX__TENSOR_PROTO__DATA_LOCATION__EXTERNAL)
      return toplu__errorf(err, TOPLU_ERR_UNSUPPORTED, "%s: initializer '%s' is stored as external data, which "
                          "quantization does not read yet", o->model, q->g->initializer[i]->name);
  int nq = 0;
  const char *qop = NULL;
  for (size_t i = 0; i < q->g->n_node; i++) {
    const Onnx__NodeProto *n = q->g->node[i];
    static const char *const qops[] = {"QuantizeLinear", "DequantizeLinear", "QLinearConv", "QLinearMatMul",
                                       "ConvInteger", "MatMulInteger", "DynamicQuantizeLinear"};
    for (size_t k = 0; k < sizeof qops / sizeof *qops; k++)
      if (!strcmp(n->op_type, qops[k])) {
        nq++;
        qop = qops[k];
      }
  }
  if (nq)
    return toplu__errorf(err, TOPLU_ERR_INVALID_ARGUMENT,
                        "%s is quantized already (%d quantization nodes, %s among them): quantize its float model",
                        o->model, nq, qop);
  Onnx__OperatorSetIdProto *os = main_opset(q->mp);
  if (!os) return toplu__errorf(err, TOPLU_ERR_INVALID_MODEL, "%s: no default-domain opset_import", o->model);
  q->opset = os->version;
  toplu_model_options_t mo;
  memset(&mo, 0, sizeof mo);
  mo.no_optimize = 1;
  if ((st = toplu_model_load(o->model, &mo, &q->ref, err))) return st;
  if ((st = constants_to_initializers(q, err)) || (st = fold_bn(q, err)) || (st = fold_bias_add(q, err))) return st;
  q->per_channel = o->per_channel;
  /* dynamic: DynamicQuantizeLinear needs opset 11, and MatMulInteger's per-column zero points no opset 13 */
  if (o->dynamic ? q->opset < 11 : q->opset < 13 && (q->per_channel || q->opset < 10)) {
    char why[1024];
    if (qz_opset_check(q->g, q->opset, rank_of, q, why, sizeof why) == TOPLU_OK) {
      if ((st = qz_opset_rewrite(q->g, q->opset, err))) return st;
      note(q, TOPLU_LOG_NOTE, "%s: opset %lld rewritten to opset 13 (per-axis quantization needs it)", o->model,
           (long long)q->opset);
      os->version = 13;
    } else if (q->opset >= 10 && !o->dynamic) {
      note(q, TOPLU_LOG_WARNING, "%s: opset %lld cannot move to opset 13 (%s): weights get per-tensor scales", o->model,
           (long long)q->opset, why);
      q->per_channel = 0;
    } else {
      return toplu__errorf(err, TOPLU_ERR_UNSUPPORTED,
                          "%s: opset %lld has no %s and cannot move to opset 13: %s", o->model,
                          (long long)q->opset, o->dynamic ? "DynamicQuantizeLinear (opset 11)" : "QuantizeLinear (opset 10)", why);
    }
  }
  if (q->mp->ir_version < 7) {
    q->mp->has_ir_version = 1;
    q->mp->ir_version = 7;
  }
  q->st.opset = os->version;
  q->st.per_channel = q->per_channel;
  return TOPLU_OK;
}

/* toplu_quantize (in_memory 0: the file and report written) and toplu_quantize_model (in_memory 1: the packed
 * QDQ model to *out_buf, malloc'd, *out_len bytes). */
static toplu_status_t quantize_impl(const toplu_quantize_options_t *o, int in_memory, toplu_quantize_stats_t *stats,
                                    unsigned char **out_buf, size_t *out_len, toplu_error_t *err) {
  toplu_error_clear(err);
  if (stats) memset(stats, 0, sizeof *stats);
  toplu_status_t st = check(o, in_memory, err);
  if (st) return st;
  qz_t q;
  memset(&q, 0, sizeof q);
  q.o = o;
  q.in_memory = in_memory;
  if (in_memory && o->n_calibration == 0 && !o->dynamic)
    note(&q, TOPLU_LOG_NOTE,
         "%s: %lld synthetic rows (standard normal) calibrate the int8 model in memory: which nodes become int8 "
         "depends on them; calibration data gives the real choice",
         o->model, (long long)(o->synthetic_rows > 0 ? o->synthetic_rows : 8));
  q.t0 = toplu_monotonic_ns();
  st = set_ops(&q, err);
  if (!st) st = prepare(&q, err);
  if (!st && o->dynamic) {
    st = dynamic_quantize(&q, err);
    goto write;
  }
  if (!st) st = choose(&q, err);
  if (!st) st = run_pass(&q, 1, NULL, 0, err);
  if (!st) {
    compute_params(&q);
    st = check_inputs(&q, err);
    if (!st) st = estimate(&q, err);
    if (!st) {
      leave_noisy_float(&q);
      warn_zero_ranges(&q);
      warn_nonfinite(&q);
    }
  }
  if (!st) st = insert_qdq(&q, err);
  if (!st) {
    qp_compact(q.g);
    st = reorder(&q, err);
  }
write:;
  unsigned char *buf = NULL;
  size_t len = 0;
  if (!st && tidy_initializers(q.g)) st = oom(err);
  if (!st) {
    len = onnx__model_proto__get_packed_size(q.mp);
    if (!(buf = malloc(len ? len : 1))) st = oom(err);
    else onnx__model_proto__pack(q.mp, buf);
  }
  if (!st && o->report && !in_memory) {
    /* pass 2 runs the float model of pass 1: rebuild it from the file for the same tensor names */
    Onnx__ModelProto *qmp = q.mp;
    toplu_status_t st2 = report_targets(&q) ? oom(err) : TOPLU_OK;
    unsigned char *fb = NULL;
    size_t fl = 0;
    if (!st2) st2 = toplu__onnx_read_bytes(o->model, &fb, &fl, NULL, 0, err);
    Onnx__ModelProto *fmp = st2 ? NULL : onnx__model_proto__unpack(NULL, fl, fb);
    free(fb);
    if (!st2 && !fmp) st2 = toplu__errorf(err, TOPLU_ERR_PARSE, "%s: cannot read it again for the report", o->model);
    if (!st2) {
      q.mp = fmp;
      q.g = fmp->graph;
      /* the same naming and folding as pass 1, so the float tensors are the ones quantized */
      int folded = q.st.nodes_folded;
      st2 = name_nodes(q.g) ? oom(err) : TOPLU_OK;
      if (!st2) st2 = constants_to_initializers(&q, err);
      if (!st2) st2 = fold_bn(&q, err);
      if (!st2) st2 = fold_bias_add(&q, err);
      q.st.nodes_folded = folded;
      if (!st2) st2 = run_pass(&q, 2, buf, len, err);
      onnx__model_proto__free_unpacked(fmp, NULL);
      q.mp = qmp;
      q.g = qmp->graph;
    }
    st = st2;
  }
  /* both files to temporary files first, then renamed: a failure or cancel leaves neither */
  char *out_tmp = NULL, *rep_tmp = NULL;
  q.writing = 1;
  if (!st) st = check_cancel(&q, err);
  if (!st && !in_memory) st = tmp_write(&q, "output", o->output, buf, len, &out_tmp, err);
  if (!st && o->report && !in_memory) {
    char *text = report_text(&q);
    if (!text) st = oom(err);
    else st = tmp_write(&q, "report", o->report, text, strlen(text), &rep_tmp, err);
    free(text);
  }
  if (!st && out_tmp) st = tmp_commit(&q, "output", o->output, &out_tmp, err);
  if (!st && rep_tmp) {
    st = tmp_commit(&q, "report", o->report, &rep_tmp, err);
    if (st && err) { /* the output is in place already: say so */
      char why[TOPLU_ERROR_MESSAGE_MAX];
      memcpy(why, err->message, sizeof why);
      st = toplu__errorf(err, st, "%s (the model %s was written)", why, o->output);
    }
  }
  for (int k = 0; k < 2; k++) { /* written, not renamed: a later step failed */
    char *t = k ? rep_tmp : out_tmp;
    if (t) unlink(t);
    free(t);
  }
  if (!st && out_buf) {
    *out_buf = buf;
    *out_len = len;
  } else {
    free(buf);
  }
  q.st.seconds = (double)(toplu_monotonic_ns() - q.t0) * 1e-9;
  if (stats) *stats = q.st;
  for (int k = 0; k < q.n_act; k++) {
    free(q.act[k].name);
    free(q.act[k].ch_sq);
    free(q.act[k].cmp);
    free(q.act[k].s_name);
    free(q.act[k].z_name);
    free(q.act[k].dq_name);
    qz_range_free(&q.act[k].range);
  }
  free(q.act);
  for (int k = 0; k < q.n_cand; k++) {
    free(q.cand[k].name);
    free(q.cand[k].op);
    free(q.cand[k].out);
  }
  free(q.cand);
  free(q.cand_of);
  for (int k = 0; k < q.n_front; k++) onnx__node_proto__free_unpacked(q.front[k], NULL);
  free(q.front);
  free(q.sel);
  free(q.in_act);
  free(q.raw_act);
  free(q.est);
  free(q.est_in);
  free(q.node_out);
  free(q.ops);
  if (q.mp) onnx__model_proto__free_unpacked(q.mp, NULL);
  toplu_model_destroy(q.ref);
  return st;
}

toplu_status_t toplu_quantize(const toplu_quantize_options_t *o, toplu_quantize_stats_t *stats, toplu_error_t *err) {
  return quantize_impl(o, 0, stats, NULL, NULL, err);
}

toplu_status_t toplu_quantize_model(const toplu_quantize_options_t *o, const toplu_model_options_t *mopts,
                                    toplu_model_t **out, toplu_quantize_stats_t *stats, toplu_error_t *err) {
  if (!out) return toplu__errorf(err, TOPLU_ERR_INVALID_ARGUMENT, "toplu_quantize_model: out is NULL");
  *out = NULL;
  unsigned char *buf = NULL;
  size_t len = 0;
  toplu_status_t st = quantize_impl(o, 1, stats, &buf, &len, err);
  if (st) return st;
  char name[4096];
  snprintf(name, sizeof name, "%s (int8)", o->model);
  st = toplu_model_load_buffer(buf, len, name, mopts, out, err);
  free(buf);
  return st;
}
