/* graph/fuse.c - BatchNormalization folding and post-op fusion (see fuse.h). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "graph/fuse.h"

static int is_const(const toplu_graph_t *g, int v) { return v >= 0 && g->values[v].konst.data != NULL; }

static int sole_reader(const toplu_graph_t *g, int v, int *reader) {
  if (v < 0 || g->values[v].graph_output || g->values[v].n_uses != 1) return 0;
  for (int i = 0; i < g->n_nodes; i++) {
    const toplu_node_t *n = &g->nodes[i];
    if (n->dead) continue;
    for (int j = 0; j < n->n_inputs; j++)
      if (n->inputs[j] == v) {
        *reader = i;
        return 1;
      }
  }
  return 0;
}

static int float_const(const toplu_graph_t *g, int v, int64_t n) {
  return is_const(g, v) && g->values[v].konst.dtype == TOPLU_DTYPE_FLOAT && toplu_tensor_numel(&g->values[v].konst) == n;
}

/* New constant value holding a float buffer (taken over). */
static int add_const(toplu_graph_t *g, const char *base, const char *suffix, float *data, int ndim, const int64_t *dims) {
  char name[700];
  snprintf(name, sizeof name, "%s::%s", base, suffix);
  int v = toplu_graph_add_value(g, name);
  if (v < 0) return -1;
  toplu_value_t *x = &g->values[v];
  x->dtype = TOPLU_DTYPE_FLOAT;
  x->ndim = ndim;
  memcpy(x->dims, dims, (size_t)ndim * sizeof(int64_t));
  x->konst.dtype = TOPLU_DTYPE_FLOAT;
  x->konst.ndim = ndim;
  memcpy(x->konst.dims, dims, (size_t)ndim * sizeof(int64_t));
  x->konst.data = data;
  return v;
}

static int set_fused_name(toplu_node_t *n, const char *add) {
  const char *base = n->fused_name ? n->fused_name : n->op_type;
  size_t len = strlen(base) + strlen(add) + 2;
  char *s = malloc(len);
  if (!s) return -1;
  snprintf(s, len, "%s+%s", base, add);
  free(n->fused_name);
  n->fused_name = s;
  return 0;
}

/* Conv -> BatchNormalization  ==>  Conv with scaled weights and bias. */
static toplu_status_t fold_batchnorm(toplu_graph_t *g, toplu_error_t *err) {
  for (int ci = 0; ci < g->n_nodes; ci++) {
    toplu_node_t *conv = &g->nodes[ci];
    if (conv->dead || strcmp(conv->op_type, "Conv") || conv->domain[0] || conv->n_post) continue;
    if (!is_const(g, conv->inputs[1])) continue;
    if (conv->n_inputs > 2 && conv->inputs[2] >= 0 && !is_const(g, conv->inputs[2])) continue;
    const toplu_value_t *w = &g->values[conv->inputs[1]];
    if (w->konst.dtype != TOPLU_DTYPE_FLOAT || w->konst.ndim < 3) continue;
    int bi;
    if (!sole_reader(g, conv->outputs[0], &bi)) continue;
    toplu_node_t *bn = &g->nodes[bi];
    if (strcmp(bn->op_type, "BatchNormalization") || bn->domain[0] || bn->inputs[0] != conv->outputs[0]) continue;
    if (toplu_node_attr_int(bn, "training_mode", 0) != 0) continue;
    int live_outs = 0;
    for (int j = 1; j < bn->n_outputs; j++) live_outs += bn->outputs[j] >= 0 && g->values[bn->outputs[j]].n_uses > 0;
    if (live_outs) continue;
    int64_t co = w->konst.dims[0];
    if (bn->n_inputs < 5 || !float_const(g, bn->inputs[1], co) || !float_const(g, bn->inputs[2], co) ||
        !float_const(g, bn->inputs[3], co) || !float_const(g, bn->inputs[4], co))
      continue;
    if (conv->n_inputs > 2 && conv->inputs[2] >= 0 && !float_const(g, conv->inputs[2], co)) continue;
    float eps = toplu_node_attr_float(bn, "epsilon", 1e-5f);
    const float *scale = g->values[bn->inputs[1]].konst.data, *bias = g->values[bn->inputs[2]].konst.data;
    const float *mean = g->values[bn->inputs[3]].konst.data, *var = g->values[bn->inputs[4]].konst.data;
    const float *b0 = conv->n_inputs > 2 && conv->inputs[2] >= 0 ? g->values[conv->inputs[2]].konst.data : NULL;
    int64_t per = toplu_tensor_numel(&w->konst) / (co ? co : 1);
    float *nw = malloc(toplu_tensor_nbytes(&w->konst) + 1), *nb = malloc((size_t)co * sizeof(float) + 1);
    if (!nw || !nb) {
      free(nw); free(nb);
      return toplu_errorf(err, TOPLU_ERR_OUT_OF_MEMORY, "out of memory folding BatchNormalization");
    }
    const float *ow = w->konst.data;
    for (int64_t c = 0; c < co; c++) {
      /* double keeps the folded weights as close as the unfused product */
      double s = (double)scale[c] / sqrt((double)var[c] + (double)eps);
      for (int64_t k = 0; k < per; k++) nw[c * per + k] = (float)((double)ow[c * per + k] * s);
      nb[c] = (float)(((b0 ? (double)b0[c] : 0.0) - (double)mean[c]) * s + (double)bias[c]);
    }
    int64_t wdims[TOPLU_MAX_DIMS];
    int wnd = w->konst.ndim;
    memcpy(wdims, w->konst.dims, sizeof wdims);
    int vw = add_const(g, conv->name, "bn_folded_W", nw, wnd, wdims);
    if (vw < 0) {
      free(nw); free(nb);
      return toplu_errorf(err, TOPLU_ERR_OUT_OF_MEMORY, "out of memory");
    }
    int vb = add_const(g, conv->name, "bn_folded_B", nb, 1, &co);
    if (vb < 0) {
      free(nb);
      return toplu_errorf(err, TOPLU_ERR_OUT_OF_MEMORY, "out of memory");
    }
    conv = &g->nodes[ci];
    bn = &g->nodes[bi];
    if (conv->n_inputs < 3) {
      int *ni = realloc(conv->inputs, 3 * sizeof(int));
      if (!ni) return toplu_errorf(err, TOPLU_ERR_OUT_OF_MEMORY, "out of memory");
      conv->inputs = ni;
      conv->n_inputs = 3;
    }
    conv->inputs[1] = vw;
    conv->inputs[2] = vb;
    conv->outputs[0] = bn->outputs[0];
    bn->dead = 1;
    if (set_fused_name(conv, "BatchNormalization")) return toplu_errorf(err, TOPLU_ERR_OUT_OF_MEMORY, "out of memory");
    toplu_graph_recount(g);
  }
  return TOPLU_OK;
}

static int fusable_producer(const toplu_node_t *n) {
  if (n->domain[0]) return 0;
  return !strcmp(n->op_type, "Conv") || !strcmp(n->op_type, "ConvTranspose") || !strcmp(n->op_type, "Gemm") ||
         !strcmp(n->op_type, "MatMul");
}

/* Does act (reading the producer's output as input 0) map to a post-op? */
static int activation_post(const toplu_graph_t *g, const toplu_node_t *act, toplu_post_op_t *po) {
  if (act->domain[0] || act->n_outputs != 1) return 0;
  const char *t = act->op_type;
  memset(po, 0, sizeof *po);
  if (!strcmp(t, "Relu")) po->kind = TOPLU_POST_RELU;
  else if (!strcmp(t, "LeakyRelu")) {
    po->kind = TOPLU_POST_LEAKY_RELU;
    po->alpha = toplu_node_attr_float(act, "alpha", 0.01f);
  } else if (!strcmp(t, "Sigmoid")) po->kind = TOPLU_POST_SIGMOID;
  else if (!strcmp(t, "Tanh")) po->kind = TOPLU_POST_TANH;
  else if (!strcmp(t, "HardSigmoid")) {
    po->kind = TOPLU_POST_HARD_SIGMOID;
    po->alpha = toplu_node_attr_float(act, "alpha", 0.2f);
    po->beta = toplu_node_attr_float(act, "beta", 0.5f);
  } else if (!strcmp(t, "HardSwish")) po->kind = TOPLU_POST_HARD_SWISH;
  else if (!strcmp(t, "Clip")) {
    po->kind = TOPLU_POST_CLIP;
    if (act->opset < 11) {
      po->alpha = toplu_node_attr_float(act, "min", -INFINITY);
      po->beta = toplu_node_attr_float(act, "max", INFINITY);
    } else {
      po->alpha = -INFINITY;
      po->beta = INFINITY;
      for (int k = 1; k < act->n_inputs && k < 3; k++) {
        int v = act->inputs[k];
        if (v < 0) continue;
        const toplu_tensor_t *c = &g->values[v].konst;
        if (!c->data || c->dtype != TOPLU_DTYPE_FLOAT || toplu_tensor_numel(c) != 1) return 0;
        if (k == 1) po->alpha = *(const float *)c->data;
        else po->beta = *(const float *)c->data;
      }
    }
  } else return 0;
  return 1;
}

static int same_shape(const toplu_value_t *a, const toplu_value_t *b) {
  if (a->ndim < 0 || a->ndim != b->ndim || a->dtype != b->dtype) return 0;
  for (int i = 0; i < a->ndim; i++)
    if (a->dims[i] != b->dims[i]) return 0;
  return 1;
}

static toplu_status_t fuse_post_ops(toplu_graph_t *g, toplu_error_t *err) {
  for (int pi = 0; pi < g->n_nodes; pi++) {
    toplu_node_t *p = &g->nodes[pi];
    if (p->dead || !fusable_producer(p) || p->n_outputs < 1) continue;
    if (g->values[p->outputs[0]].dtype != TOPLU_DTYPE_FLOAT) continue;
    for (;;) {
      if (p->n_post >= TOPLU_MAX_POST) break;
      int ai;
      if (!sole_reader(g, p->outputs[0], &ai)) break;
      toplu_node_t *a = &g->nodes[ai];
      toplu_post_op_t po;
      if (a->inputs[0] == p->outputs[0] && activation_post(g, a, &po)) {
        /* fall through to rewire */
      } else if (!strcmp(a->op_type, "Add") && !a->domain[0] && !strcmp(p->op_type, "Conv") && a->n_inputs == 2 &&
                 !p->n_post) {
        int other = a->inputs[0] == p->outputs[0] ? a->inputs[1] : a->inputs[0];
        if (other == p->outputs[0] || other < 0) break;
        if (!same_shape(&g->values[other], &g->values[a->outputs[0]]) ||
            !same_shape(&g->values[p->outputs[0]], &g->values[a->outputs[0]]))
          break;
        int prod = g->values[other].producer;
        if (prod >= pi) break; /* must exist before the Conv runs */
        int *ni = realloc(p->inputs, (size_t)(p->n_inputs + 1 + (p->n_inputs < 3)) * sizeof(int));
        if (!ni) return toplu_errorf(err, TOPLU_ERR_OUT_OF_MEMORY, "out of memory");
        p->inputs = ni;
        while (p->n_inputs < 3) p->inputs[p->n_inputs++] = -1;
        p->inputs[p->n_inputs] = other;
        memset(&po, 0, sizeof po);
        po.kind = TOPLU_POST_SUM;
        po.input = p->n_inputs;
        p->n_inputs++;
      } else {
        break;
      }
      p->post[p->n_post++] = po;
      p->outputs[0] = a->outputs[0];
      a->dead = 1;
      if (set_fused_name(p, a->op_type)) return toplu_errorf(err, TOPLU_ERR_OUT_OF_MEMORY, "out of memory");
      toplu_graph_recount(g);
    }
  }
  return TOPLU_OK;
}

toplu_status_t toplu_graph_fuse(toplu_graph_t *g, toplu_error_t *err) {
  toplu_status_t st = fold_batchnorm(g, err);
  if (!st) st = fuse_post_ops(g, err);
  return st;
}
