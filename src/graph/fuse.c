/* graph/fuse.c - BatchNormalization folding and post-op fusion (see fuse.h). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "graph/fuse.h"
#include "graph/schema.h"

#define TOPLU_CONV_MAX_SPATIAL_FUSE 3

static int is_const(const toplu__graph_t *g, int v) { return v >= 0 && g->values[v].konst.data != NULL; }

static int readers(const toplu__graph_t *g, int v, int *out, int cap);
static int gelu_pattern(const toplu__graph_t *g, int y, int nodes[5]);
static int put_attr(toplu__attr_t *attrs, int *n, const char *name, toplu__attr_type_t type, float f, int64_t i);
static void install_attrs_inputs(toplu__node_t *o, toplu__attr_t *attrs, int na, int *ins, int n_ins);

/* The one node reading v (which is no graph output), in *reader. */
static int same_shape(const toplu__value_t *a, const toplu__value_t *b);
static int sole_reader(const toplu__graph_t *g, int v, int *reader) {
  if (v < 0 || g->values[v].graph_output || g->values[v].n_uses != 1) return 0;
  return readers(g, v, reader, 1) == 1;
}

static int float_const(const toplu__graph_t *g, int v, int64_t n) {
  return is_const(g, v) && g->values[v].konst.dtype == TOPLU_DTYPE_FLOAT && toplu_tensor_numel(&g->values[v].konst) == n;
}

/* New constant value holding a float buffer (taken over). */
static int add_const(toplu__graph_t *g, const char *base, const char *suffix, float *data, int ndim, const int64_t *dims) {
  char name[700];
  snprintf(name, sizeof name, "%s::%s", base, suffix);
  int v = toplu__graph_add_value(g, name);
  if (v < 0) return -1;
  toplu__value_t *x = &g->values[v];
  x->dtype = TOPLU_DTYPE_FLOAT;
  x->ndim = ndim;
  memcpy(x->dims, dims, (size_t)ndim * sizeof(int64_t));
  x->konst.dtype = TOPLU_DTYPE_FLOAT;
  x->konst.ndim = ndim;
  memcpy(x->konst.dims, dims, (size_t)ndim * sizeof(int64_t));
  x->konst.data = data;
  return v;
}

/* Value of a constant float tensor with one element; 0 if v is not one. */
static int const_scalar(const toplu__graph_t *g, int v, float *out) {
  if (v < 0 || !g->values[v].konst.data || g->values[v].konst.dtype != TOPLU_DTYPE_FLOAT ||
      toplu_tensor_numel(&g->values[v].konst) != 1)
    return 0;
  *out = *(const float *)g->values[v].konst.data;
  return 1;
}

/* The other input of a two-input node, given one of them; -1 if neither. */
static int other_input(const toplu__node_t *n, int v) {
  if (n->n_inputs != 2) return -1;
  if (n->inputs[0] == v) return n->inputs[1];
  if (n->inputs[1] == v) return n->inputs[0];
  return -1;
}

static int is_op(const toplu__node_t *n, const char *op) { return !n->dead && !n->domain[0] && !strcmp(n->op_type, op); }

/* Append label (if not NULL) to n's fused label ("Conv+Relu") and name to
 * its fused node names ("a,b").  -1 when out of memory. */
static int fused_append(toplu__node_t *n, const char *label, const char *name) {
  char *s;
  size_t len;
  if (label) {
    const char *base = n->fused_name ? n->fused_name : n->op_type;
    len = strlen(base) + strlen(label) + 2;
    if (!(s = malloc(len))) return -1;
    snprintf(s, len, "%s+%s", base, label);
    free(n->fused_name);
    n->fused_name = s;
  }
  const char *had = n->fused_nodes ? n->fused_nodes : "";
  len = strlen(had) + strlen(name) + 2;
  if (!(s = malloc(len))) return -1;
  snprintf(s, len, "%s%s%s", had, *had ? "," : "", name);
  free(n->fused_nodes);
  n->fused_nodes = s;
  return 0;
}

static int set_fused_name(toplu__node_t *n, const toplu__node_t *add) { return fused_append(n, add->op_type, add->name); }

/* Make n a node of (domain, op_type) with schema (strings copied).  -1 when
 * out of memory (n unchanged). */
static int set_op(toplu__node_t *n, const char *domain, const char *op_type, const toplu__schema_t *schema) {
  char *op = malloc(strlen(op_type) + 1), *dom = malloc(strlen(domain) + 1);
  if (!op || !dom) {
    free(op);
    free(dom);
    return -1;
  }
  strcpy(op, op_type);
  strcpy(dom, domain);
  free(n->op_type);
  free(n->domain);
  n->op_type = op;
  n->domain = dom;
  n->schema = schema;
  return 0;
}

/* Give n exactly count inputs, new slots absent (-1).  -1 when out of memory. */
static int set_input_count(toplu__node_t *n, int count) {
  if (count > n->n_inputs) {
    int *ni = realloc(n->inputs, (size_t)count * sizeof(int));
    if (!ni) return -1;
    n->inputs = ni;
    for (int i = n->n_inputs; i < count; i++) ni[i] = -1;
  }
  n->n_inputs = count;
  return 0;
}

/* Node di (which produced v) dies when a rewrite left v unread. */
static void drop_if_unread(toplu__graph_t *g, int v, int di) {
  if (g->values[v].n_uses == 0 && !g->values[v].graph_output) {
    g->nodes[di].dead = 1;
    toplu__graph_recount(g);
  }
}

/* Conv -> BatchNormalization  ==>  Conv with scaled weights and bias. */
static toplu_status_t fold_batchnorm(toplu__graph_t *g, toplu_error_t *err) {
  for (int ci = 0; ci < g->n_nodes; ci++) {
    toplu__node_t *conv = &g->nodes[ci];
    if (conv->dead || strcmp(conv->op_type, "Conv") || conv->domain[0] || conv->n_post) continue;
    if (!is_const(g, conv->inputs[1])) continue;
    if (conv->n_inputs > 2 && conv->inputs[2] >= 0 && !is_const(g, conv->inputs[2])) continue;
    const toplu__value_t *w = &g->values[conv->inputs[1]];
    if (w->konst.dtype != TOPLU_DTYPE_FLOAT || w->konst.ndim < 3) continue;
    int bi;
    if (!sole_reader(g, conv->outputs[0], &bi)) continue;
    toplu__node_t *bn = &g->nodes[bi];
    if (strcmp(bn->op_type, "BatchNormalization") || bn->domain[0] || bn->inputs[0] != conv->outputs[0]) continue;
    if (toplu__node_attr_int(bn, "training_mode", 0) != 0) continue;
    int live_outs = 0;
    for (int j = 1; j < bn->n_outputs; j++) live_outs += bn->outputs[j] >= 0 && g->values[bn->outputs[j]].n_uses > 0;
    if (live_outs) continue;
    int64_t co = w->konst.dims[0];
    if (bn->n_inputs < 5 || !float_const(g, bn->inputs[1], co) || !float_const(g, bn->inputs[2], co) ||
        !float_const(g, bn->inputs[3], co) || !float_const(g, bn->inputs[4], co))
      continue;
    if (conv->n_inputs > 2 && conv->inputs[2] >= 0 && !float_const(g, conv->inputs[2], co)) continue;
    float eps = toplu__node_attr_float(bn, "epsilon", 1e-5f);
    const float *scale = g->values[bn->inputs[1]].konst.data, *bias = g->values[bn->inputs[2]].konst.data;
    const float *mean = g->values[bn->inputs[3]].konst.data, *var = g->values[bn->inputs[4]].konst.data;
    const float *b0 = conv->n_inputs > 2 && conv->inputs[2] >= 0 ? g->values[conv->inputs[2]].konst.data : NULL;
    int64_t per = toplu_tensor_numel(&w->konst) / (co ? co : 1);
    float *nw = malloc(toplu_tensor_nbytes(&w->konst) + 1), *nb = malloc((size_t)co * sizeof(float) + 1);
    if (!nw || !nb) {
      free(nw); free(nb);
      return toplu__errorf(err, TOPLU_ERR_OUT_OF_MEMORY, "out of memory folding BatchNormalization");
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
      return toplu__errorf(err, TOPLU_ERR_OUT_OF_MEMORY, "out of memory");
    }
    int vb = add_const(g, conv->name, "bn_folded_B", nb, 1, &co);
    if (vb < 0) {
      free(nb);
      return toplu__errorf(err, TOPLU_ERR_OUT_OF_MEMORY, "out of memory");
    }
    conv = &g->nodes[ci];
    bn = &g->nodes[bi];
    if (conv->n_inputs < 3) {
      int *ni = realloc(conv->inputs, 3 * sizeof(int));
      if (!ni) return toplu__errorf(err, TOPLU_ERR_OUT_OF_MEMORY, "out of memory");
      conv->inputs = ni;
      conv->n_inputs = 3;
    }
    conv->inputs[1] = vw;
    conv->inputs[2] = vb;
    conv->outputs[0] = bn->outputs[0];
    bn->dead = 1;
    if (set_fused_name(conv, bn)) return toplu__errorf(err, TOPLU_ERR_OUT_OF_MEMORY, "out of memory");
    toplu__graph_recount(g);
  }
  return TOPLU_OK;
}

/* Clip(a, lo, hi) bounds as constants (opset < 11 attributes, else inputs). */
static int clip_bounds(const toplu__graph_t *g, const toplu__node_t *c, float *lo, float *hi) {
  *lo = -INFINITY;
  *hi = INFINITY;
  if (c->opset < 11) {
    *lo = toplu__node_attr_float(c, "min", -INFINITY);
    *hi = toplu__node_attr_float(c, "max", INFINITY);
    return 1;
  }
  if (c->n_inputs > 1 && c->inputs[1] >= 0 && !const_scalar(g, c->inputs[1], lo)) return 0;
  if (c->n_inputs > 2 && c->inputs[2] >= 0 && !const_scalar(g, c->inputs[2], hi)) return 0;
  return 1;
}

/*
 * x * Clip(x + 3, 0, 6) / 6  ==>  HardSwish(x)   (HardSwish-14; exporters
 * write it out, PaddleOCR's Paddle2ONNX does).  The Div (or Mul by 1/6)
 * node becomes the HardSwish node; Add, Clip and Mul die.
 */
static toplu_status_t rewrite_hardswish(toplu__graph_t *g, toplu_error_t *err) {
  const toplu__schema_t *hs = toplu__schema_find("", "HardSwish");
  if (!hs) return TOPLU_OK;
  for (int ai = 0; ai < g->n_nodes; ai++) {
    toplu__node_t *add = &g->nodes[ai];
    if (!is_op(add, "Add")) continue;
    float c;
    int x = -1;
    for (int k = 0; k < 2 && x < 0; k++)
      if (const_scalar(g, add->inputs[1 - k], &c) && c == 3.f) x = add->inputs[k];
    if (x < 0 || g->values[x].dtype != TOPLU_DTYPE_FLOAT) continue;
    int ci, mi, di;
    if (!sole_reader(g, add->outputs[0], &ci) || !is_op(&g->nodes[ci], "Clip")) continue;
    float lo, hi;
    if (g->nodes[ci].inputs[0] != add->outputs[0] || !clip_bounds(g, &g->nodes[ci], &lo, &hi) || lo != 0.f || hi != 6.f)
      continue;
    if (!sole_reader(g, g->nodes[ci].outputs[0], &mi) || !is_op(&g->nodes[mi], "Mul") ||
        other_input(&g->nodes[mi], g->nodes[ci].outputs[0]) != x)
      continue;
    if (!sole_reader(g, g->nodes[mi].outputs[0], &di)) continue;
    toplu__node_t *d = &g->nodes[di];
    int ok = 0;
    if (is_op(d, "Div") && d->inputs[0] == g->nodes[mi].outputs[0] && const_scalar(g, d->inputs[1], &c) && c == 6.f)
      ok = 1;
    else if (is_op(d, "Mul") && const_scalar(g, other_input(d, g->nodes[mi].outputs[0]), &c) &&
             fabsf(c - 1.f / 6.f) < 1e-7f)
      ok = 1;
    if (!ok) continue;
    /* The last node becomes HardSwish(x). */
    for (int j = 0; j < d->n_attrs; j++) toplu__attr_clear(&d->attrs[j]);
    d->n_attrs = 0;
    char *op = malloc(sizeof "HardSwish");
    if (!op) return toplu__errorf(err, TOPLU_ERR_OUT_OF_MEMORY, "out of memory");
    memcpy(op, "HardSwish", sizeof "HardSwish");
    free(d->op_type);
    d->op_type = op;
    d->schema = hs;
    d->inputs[0] = x;
    d->n_inputs = 1;
    add->dead = 1;
    g->nodes[ci].dead = 1;
    g->nodes[mi].dead = 1;
    toplu__graph_recount(g);
  }
  return TOPLU_OK;
}

/* Mul(x, HardSigmoid(x, alpha 1/6, beta 0.5)), as torch exports nn.Hardswish below opset 14  ==>
 * HardSwish(x): the same arithmetic (ops/elementwise_unary.c: x * clamp(x * (1/6) + 0.5, 0, 1) either way), one
 * node, and a post-op the convolution before it can take (MobileNetV3). */
static toplu_status_t rewrite_hardsigmoid_mul(toplu__graph_t *g, toplu_error_t *err) {
  const toplu__schema_t *hs = toplu__schema_find("", "HardSwish");
  if (!hs) return TOPLU_OK;
  for (int hi = 0; hi < g->n_nodes; hi++) {
    toplu__node_t *h = &g->nodes[hi];
    if (!is_op(h, "HardSigmoid") || h->n_inputs != 1 || h->n_outputs != 1) continue;
    int x = h->inputs[0], mi;
    if (x < 0 || g->values[x].dtype != TOPLU_DTYPE_FLOAT || g->values[h->outputs[0]].graph_output) continue;
    if (toplu__node_attr_float(h, "alpha", 0.2f) != 1.0f / 6.0f || toplu__node_attr_float(h, "beta", 0.5f) != 0.5f)
      continue;
    if (!sole_reader(g, h->outputs[0], &mi) || !is_op(&g->nodes[mi], "Mul") || g->nodes[mi].n_inputs != 2 ||
        other_input(&g->nodes[mi], h->outputs[0]) != x)
      continue;
    toplu__node_t *m = &g->nodes[mi];
    if (set_op(m, "", "HardSwish", hs) || set_input_count(m, 1) || fused_append(m, NULL, h->name) ||
        fused_append(m, NULL, m->name))
      return toplu__errorf(err, TOPLU_ERR_OUT_OF_MEMORY, "out of memory");
    m->inputs[0] = x;
    if (m->opset < 14) m->opset = 14;
    h->dead = 1;
    toplu__graph_recount(g);
  }
  return TOPLU_OK;
}

/* Per-output-channel values of a constant that broadcasts against a conv
 * output [N, M, spatial...]: a scalar, or [M, 1, ...] / [1, M, 1, ...].
 * Fills vals[0..m-1]; 0 when the constant has another shape. */
static int per_channel(const toplu__graph_t *g, int v, int64_t m, int out_rank, float *vals) {
  if (v < 0 || !g->values[v].konst.data || g->values[v].konst.dtype != TOPLU_DTYPE_FLOAT) return 0;
  const toplu_tensor_t *t = &g->values[v].konst;
  const float *d = t->data;
  int64_t n = toplu_tensor_numel(t);
  if (n == 1) {
    if (t->ndim > out_rank) return 0;
    for (int64_t i = 0; i < m; i++) vals[i] = d[0];
    return 1;
  }
  if (n != m || t->ndim > out_rank || t->ndim < out_rank - 1) return 0;
  /* the channel axis of the output is 1; in t it sits at 1 - (out_rank - ndim) */
  int ax = 1 - (out_rank - t->ndim);
  for (int i = 0; i < t->ndim; i++)
    if (t->dims[i] != (i == ax ? m : 1)) return 0;
  for (int64_t i = 0; i < m; i++) vals[i] = d[i];
  return 1;
}

/* Conv -> Mul(per-channel constant) / Add(per-channel constant)  ==>  Conv
 * with scaled weights and bias (ONNX Runtime's ConvMulFusion/ConvAddFusion). */
static toplu_status_t fold_conv_affine(toplu__graph_t *g, toplu_error_t *err) {
  for (int ci = 0; ci < g->n_nodes; ci++) {
    toplu__node_t *conv = &g->nodes[ci];
    if (!is_op(conv, "Conv") || conv->n_post || conv->n_inputs > 3 || !is_const(g, conv->inputs[1])) continue;
    if (conv->n_inputs > 2 && conv->inputs[2] >= 0 && !is_const(g, conv->inputs[2])) continue;
    for (;;) {
      conv = &g->nodes[ci];
      const toplu__value_t *w = &g->values[conv->inputs[1]];
      if (w->konst.dtype != TOPLU_DTYPE_FLOAT || w->konst.ndim < 3) break;
      int ri;
      if (!sole_reader(g, conv->outputs[0], &ri)) break;
      toplu__node_t *r = &g->nodes[ri];
      int is_mul = is_op(r, "Mul"), is_add = is_op(r, "Add");
      if (!is_mul && !is_add) break;
      int other = other_input(r, conv->outputs[0]);
      int64_t m = w->konst.dims[0];
      int rank = g->values[conv->outputs[0]].ndim;
      float *vals = malloc((size_t)m * sizeof(float) + 1);
      if (!vals) return toplu__errorf(err, TOPLU_ERR_OUT_OF_MEMORY, "out of memory");
      /* the result must keep the conv output's shape */
      if (rank < 3 || !per_channel(g, other, m, rank, vals) || g->values[r->outputs[0]].ndim != rank) {
        free(vals);
        break;
      }
      int has_b = conv->n_inputs > 2 && conv->inputs[2] >= 0;
      const float *b0 = has_b ? g->values[conv->inputs[2]].konst.data : NULL;
      if (has_b && toplu_tensor_numel(&g->values[conv->inputs[2]].konst) != m) {
        free(vals);
        break;
      }
      float *nb = malloc((size_t)m * sizeof(float) + 1), *nw = NULL;
      if (!nb) {
        free(vals);
        return toplu__errorf(err, TOPLU_ERR_OUT_OF_MEMORY, "out of memory");
      }
      int64_t per = toplu_tensor_numel(&w->konst) / (m ? m : 1);
      if (is_mul) {
        nw = malloc(toplu_tensor_nbytes(&w->konst) + 1);
        if (!nw) {
          free(vals); free(nb);
          return toplu__errorf(err, TOPLU_ERR_OUT_OF_MEMORY, "out of memory");
        }
        const float *ow = w->konst.data;
        for (int64_t c = 0; c < m; c++) {
          for (int64_t k = 0; k < per; k++) nw[c * per + k] = ow[c * per + k] * vals[c];
          nb[c] = b0 ? b0[c] * vals[c] : 0.f;
        }
      } else {
        for (int64_t c = 0; c < m; c++) nb[c] = (b0 ? b0[c] : 0.f) + vals[c];
      }
      free(vals);
      int64_t wdims[TOPLU_MAX_DIMS];
      int wnd = w->konst.ndim;
      memcpy(wdims, w->konst.dims, sizeof wdims);
      if (nw) {
        int vw = add_const(g, conv->name, is_mul ? "mul_folded_W" : "W", nw, wnd, wdims);
        if (vw < 0) {
          free(nw); free(nb);
          return toplu__errorf(err, TOPLU_ERR_OUT_OF_MEMORY, "out of memory");
        }
        g->nodes[ci].inputs[1] = vw;
      }
      int vb = add_const(g, g->nodes[ci].name, is_mul ? "mul_folded_B" : "add_folded_B", nb, 1, &m);
      if (vb < 0) {
        free(nb);
        return toplu__errorf(err, TOPLU_ERR_OUT_OF_MEMORY, "out of memory");
      }
      conv = &g->nodes[ci];
      r = &g->nodes[ri];
      if (conv->n_inputs < 3) {
        int *ni = realloc(conv->inputs, 3 * sizeof(int));
        if (!ni) return toplu__errorf(err, TOPLU_ERR_OUT_OF_MEMORY, "out of memory");
        conv->inputs = ni;
        conv->n_inputs = 3;
      }
      conv->inputs[2] = vb;
      conv->outputs[0] = r->outputs[0];
      r->dead = 1;
      if (set_fused_name(conv, r)) return toplu__errorf(err, TOPLU_ERR_OUT_OF_MEMORY, "out of memory");
      toplu__graph_recount(g);
    }
  }
  return TOPLU_OK;
}

/* Same constant value (dtype, shape, bytes), or both absent. */
static int same_const(const toplu__graph_t *g, int a, int b) {
  if (a < 0 || b < 0) return a == b;
  const toplu_tensor_t *x = &g->values[a].konst, *y = &g->values[b].konst;
  if (!x->data || !y->data || x->dtype != y->dtype || x->ndim != y->ndim) return 0;
  for (int i = 0; i < x->ndim; i++)
    if (x->dims[i] != y->dims[i]) return 0;
  return !memcmp(x->data, y->data, toplu_tensor_nbytes(x));
}

/*
 * QuantizeLinear(x, s, z) read only by DequantizeLinear(., s, z) with the same
 * constant scale, zero point and axis  ==>  toplu.QuantizeDequantizeLinear(x,
 * s, z): the float -> int -> float round trip of a QDQ graph in one pass,
 * bit-identical to the pair (ops/quant.c).
 */
static toplu_status_t fuse_qdq(toplu__graph_t *g, toplu_error_t *err) {
  const toplu__schema_t *fq = toplu__schema_find("toplu", "QuantizeDequantizeLinear");
  if (!fq) return TOPLU_OK;
  for (int qi = 0; qi < g->n_nodes; qi++) {
    toplu__node_t *q = &g->nodes[qi];
    if (!is_op(q, "QuantizeLinear") || q->n_outputs != 1) continue;
    int di;
    if (!sole_reader(g, q->outputs[0], &di) || !is_op(&g->nodes[di], "DequantizeLinear")) continue;
    toplu__node_t *d = &g->nodes[di];
    if (d->inputs[0] != q->outputs[0]) continue;
    int qs = q->inputs[1], qz = q->n_inputs > 2 ? q->inputs[2] : -1;
    int ds = d->inputs[1], dz = d->n_inputs > 2 ? d->inputs[2] : -1;
    if (!is_const(g, qs) || !same_const(g, qs, ds) || !same_const(g, qz, dz)) continue;
    if (toplu__node_attr_int(q, "axis", 1) != toplu__node_attr_int(d, "axis", 1)) continue;
    if (g->values[q->inputs[0]].dtype != TOPLU_DTYPE_FLOAT || g->values[d->outputs[0]].dtype != TOPLU_DTYPE_FLOAT)
      continue;
    if (set_op(q, "toplu", "QuantizeDequantizeLinear", fq)) return toplu__errorf(err, TOPLU_ERR_OUT_OF_MEMORY, "out of memory");
    q->outputs[0] = d->outputs[0];
    d->dead = 1;
    toplu__graph_recount(g);
  }
  return TOPLU_OK;
}

/* A constant integer scalar (int8, uint8 or int32, [] or [1]) in *z; an
 * absent value (v < 0) is 0. */
static int const_int_scalar(const toplu__graph_t *g, int v, int32_t *z, toplu_dtype_t *dt) {
  if (v < 0) {
    *z = 0;
    if (dt) *dt = TOPLU_DTYPE_UINT8;
    return 1;
  }
  const toplu_tensor_t *t = &g->values[v].konst;
  if (!t->data || toplu_tensor_numel(t) != 1) return 0;
  if (dt) *dt = t->dtype;
  switch (t->dtype) {
    case TOPLU_DTYPE_INT8: *z = *(const int8_t *)t->data; return 1;
    case TOPLU_DTYPE_UINT8: *z = *(const uint8_t *)t->data; return 1;
    case TOPLU_DTYPE_INT32: *z = *(const int32_t *)t->data; return 1;
    default: return 0;
  }
}

/* The live DequantizeLinear producing v from a non-constant uint8/int8
 * tensor with constant scalar scale and zero point; its node index, or -1.
 * *xq, *s, *z: its input, scale and zero point values; *scale and *zp (may
 * be NULL) what they hold. */
static int int8_dequantize(const toplu__graph_t *g, int v, int *xq, int *s, int *z, float *scale, int32_t *zp_out) {
  if (v < 0 || g->values[v].producer < 0 || g->values[v].graph_output) return -1;
  int di = g->values[v].producer;
  const toplu__node_t *d = &g->nodes[di];
  if (!is_op(d, "DequantizeLinear") || d->n_inputs < 2) return -1;
  toplu_dtype_t dt = g->values[d->inputs[0]].dtype;
  float sc;
  int32_t zp;
  toplu_dtype_t zdt;
  int zv = d->n_inputs > 2 ? d->inputs[2] : -1;
  if (is_const(g, d->inputs[0]) || (dt != TOPLU_DTYPE_INT8 && dt != TOPLU_DTYPE_UINT8)) return -1;
  if (!const_scalar(g, d->inputs[1], &sc) || !(sc > 0.f) || !const_int_scalar(g, zv, &zp, &zdt) || (zv >= 0 && zdt != dt))
    return -1;
  *xq = d->inputs[0];
  *s = d->inputs[1];
  *z = zv;
  if (scale) *scale = sc;
  if (zp_out) *zp_out = zp;
  return di;
}

/* The folded DequantizeLinear (dead, kept by graph/infer.c) that made the
 * float constant v from int8 weights with zero points 0 and a float scale
 * of 1 or m elements (axis 0 then); its node index, or -1. */
static int weights_dq(const toplu__graph_t *g, int v, int64_t m) {
  if (v < 0 || !g->values[v].konst.data || g->values[v].producer < 0) return -1;
  int di = g->values[v].producer;
  const toplu__node_t *d = &g->nodes[di];
  if (!d->dead || d->domain[0] || strcmp(d->op_type, "DequantizeLinear") || d->n_inputs < 2) return -1;
  const toplu_tensor_t *w = &g->values[d->inputs[0]].konst, *sc = &g->values[d->inputs[1]].konst;
  if (!w->data || w->dtype != TOPLU_DTYPE_INT8 || !sc->data || sc->dtype != TOPLU_DTYPE_FLOAT) return -1;
  int64_t ns = toplu_tensor_numel(sc);
  if (ns != 1 && (ns != m || sc->ndim != 1 || toplu__node_attr_int(d, "axis", 1) != 0)) return -1;
  if (d->n_inputs > 2 && d->inputs[2] >= 0) {
    const toplu_tensor_t *z = &g->values[d->inputs[2]].konst;
    if (!z->data || z->dtype != TOPLU_DTYPE_INT8) return -1;
    for (int64_t i = 0; i < toplu_tensor_numel(z); i++)
      if (((const int8_t *)z->data)[i] != 0) return -1;
  }
  return di;
}

/*
 * QDQ Conv  ==>  QLinearConv (ops/onednn/qconv.c: integer convolution):
 *   DequantizeLinear(x_q, sx, zx) -> Conv(., W, B) [+ Relu | Clip fused by
 *   fuse_post_ops] -> QuantizeLinear(., sy, zy)
 * where x_q is uint8/int8, sx, zx, sy, zy constant scalars, W the folded
 * DequantizeLinear of constant int8 weights (zero points 0, scale per
 * tensor or per output channel) and B constant float (or absent).  B
 * becomes int32 round(B / (sx sw[m])), exact when B was DequantizeLinear
 * of int32 with scale sx sw[m] as quantizers write it.  The Conv node takes
 * the QLinearConv inputs (x_q, sx, zx, w_q, sw, zw, sy, zy, B) and the
 * QuantizeLinear's output; the QuantizeLinear dies, and the
 * DequantizeLinear when nothing else reads it.  ONNX Runtime's
 * QDQ selector (onnxruntime/core/optimizer/qdq_transformer) makes the
 * same pairing.
 *
 * The same Conv with no QuantizeLinear as its sole reader becomes toplu's
 * QLinearConvFloat (float32 output, inputs 6 and 7 absent, B float32 in
 * the accumulator's units, unrounded): the float Conv of the dequantized
 * x and W, its sums exact.  One whose Relu or Clip the following
 * quantization does not make redundant stays float (without
 * qdq_int8_all): toplu's results on ONNX Runtime's QDQ models follow ONNX
 * Runtime's float rounding there (MobileNetV2 int8: 9 output steps apart
 * as QLinearConvFloat, 2 as a float Conv).
 */
static toplu_status_t fuse_qlinear_conv(toplu__graph_t *g, int all, toplu_error_t *err) {
  const toplu__schema_t *qs = toplu__schema_find("", "QLinearConv"), *fs = toplu__schema_find("toplu", "QLinearConvFloat");
  if (!qs || !fs) return TOPLU_OK;
  for (int ci = 0; ci < g->n_nodes; ci++) {
    toplu__node_t *c = &g->nodes[ci];
    if (!is_op(c, "Conv") || c->n_inputs < 2 || c->n_inputs > 3 || c->n_outputs != 1) continue;
    int ok = 1;
    for (int k = 0; k < c->n_post; k++)
      if (c->post[k].kind != TOPLU_POST_RELU && c->post[k].kind != TOPLU_POST_CLIP) ok = 0;
    if (!ok) continue;
    int x = c->inputs[0], w = c->inputs[1], b = c->n_inputs > 2 ? c->inputs[2] : -1;
    int xq, sxv, zxv;
    float sx, sy;
    int32_t zy;
    toplu_dtype_t zyt;
    if (int8_dequantize(g, x, &xq, &sxv, &zxv, &sx, NULL) < 0) continue;
    int64_t m = g->values[w].ndim >= 1 ? g->values[w].dims[0] : -1;
    int wd = m > 0 ? weights_dq(g, w, m) : -1;
    if (wd < 0) continue;
    if (b >= 0 && (!is_const(g, b) || g->values[b].konst.dtype != TOPLU_DTYPE_FLOAT || toplu_tensor_numel(&g->values[b].konst) != m))
      continue;
    int qi = -1;
    toplu__node_t *q = NULL;
    int zyv = -1, to_q = sole_reader(g, c->outputs[0], &qi) && is_op(&g->nodes[qi], "QuantizeLinear");
    if (to_q) {
      q = &g->nodes[qi];
      zyv = q->n_inputs > 2 ? q->inputs[2] : -1;
      to_q = q->inputs[0] == c->outputs[0] && const_scalar(g, q->inputs[1], &sy) && sy > 0.f &&
             const_int_scalar(g, zyv, &zy, &zyt) && (zyt == TOPLU_DTYPE_UINT8 || zyt == TOPLU_DTYPE_INT8) &&
             q->n_outputs == 1 && g->values[q->outputs[0]].dtype == zyt;
    }
    /* A fused Relu or Clip goes only when the quantization already clamps
     * at its bounds (then it changes nothing and is dropped): ONNX Runtime
     * keeps the others, and the float convolution before them, so an
     * integer convolution there gives other roundings than the reference
     * (measured on MobileNetV2 int8: Clip(0, 6) before a quantization whose
     * top is 6.0000001 left float, 9 output steps apart when run in int8,
     * 2 when left float). */
    int redundant = to_q;
    if (to_q) {
      double qlo = (double)sy * ((zyt == TOPLU_DTYPE_INT8 ? -128 : 0) - zy),
             qhi = (double)sy * ((zyt == TOPLU_DTYPE_INT8 ? 127 : 255) - zy);
      for (int k = 0; k < c->n_post; k++) {
        const toplu__post_op_t *po = &c->post[k];
        if (po->kind == TOPLU_POST_RELU) redundant &= qlo >= 0.0;
        else redundant &= po->alpha <= qlo && po->beta >= qhi;
      }
    }
    /* Not followed by a quantization it may take over (a float island of a
     * model quantized in part, or a Clip the quantization does not make
     * redundant): the integer convolution with a float output,
     * QLinearConvFloat, the same sums the float Conv makes of the
     * dequantized x and W (exact in int32 instead of rounded in float). */
    int to_float = !to_q;
    if (to_q && !redundant && !all) continue;
    const toplu__node_t *d = &g->nodes[wd];
    const toplu_tensor_t *sw = &g->values[d->inputs[1]].konst;
    int bq = -1;
    if (b >= 0) {
      /* QLinearConv: int32; QLinearConvFloat: float32 in the same units, unrounded (B need not be a multiple of
       * x_scale * w_scale when nothing quantizes the output) */
      int32_t *bi = malloc((size_t)m * sizeof *bi);
      if (!bi) return toplu__errorf(err, TOPLU_ERR_OUT_OF_MEMORY, "out of memory");
      const float *bf = g->values[b].konst.data;
      for (int64_t k = 0; k < m; k++) {
        double v = (double)bf[k] / ((double)sx * ((const float *)sw->data)[toplu_tensor_numel(sw) == 1 ? 0 : k]);
        if (to_float) {
          float f = (float)v;
          memcpy(&bi[k], &f, sizeof f);
          continue;
        }
        v = rint(v);
        bi[k] = v > 2147483647.0 ? INT32_MAX : v < -2147483648.0 ? INT32_MIN : (int32_t)v;
      }
      char name[700];
      snprintf(name, sizeof name, "%s::bias_%s", c->name, to_float ? "acc" : "int32");
      bq = toplu__graph_add_value(g, name);
      if (bq < 0) {
        free(bi);
        return toplu__errorf(err, TOPLU_ERR_OUT_OF_MEMORY, "out of memory");
      }
      c = &g->nodes[ci]; /* add_value may move nothing of nodes, but stay safe */
      toplu__value_t *bv = &g->values[bq];
      bv->dtype = bv->konst.dtype = to_float ? TOPLU_DTYPE_FLOAT : TOPLU_DTYPE_INT32;
      bv->ndim = bv->konst.ndim = 1;
      bv->dims[0] = bv->konst.dims[0] = m;
      bv->konst.data = bi;
    }
    if (set_input_count(c, 9) || (!to_float && fused_append(c, "QuantizeLinear", q->name)) ||
        set_op(c, to_float ? "toplu" : "", to_float ? "QLinearConvFloat" : "QLinearConv", to_float ? fs : qs))
      return toplu__errorf(err, TOPLU_ERR_OUT_OF_MEMORY, "out of memory");
    d = &g->nodes[wd];
    int *ni = c->inputs;
    ni[0] = xq;
    ni[1] = sxv;
    ni[2] = zxv;
    ni[3] = d->inputs[0];
    ni[4] = d->inputs[1];
    ni[5] = d->n_inputs > 2 ? d->inputs[2] : -1;
    ni[6] = to_float ? -1 : q->inputs[1];
    ni[7] = to_float ? -1 : zyv;
    ni[8] = bq;
    c->n_inputs = bq >= 0 ? 9 : 8;
    if (!to_float) {
      if (redundant) c->n_post = 0; /* they change nothing */
      c->outputs[0] = q->outputs[0];
      q->dead = 1;
    }
    toplu__graph_recount(g);
    drop_if_unread(g, x, g->values[x].producer);
  }
  return TOPLU_OK;
}

/* The folded DequantizeLinear (dead, kept by graph/infer.c) that made the
 * float constant v, a MatMul's [K, N] weights (trans: a Gemm's transB
 * [N, K]), from 2-D int8 weights with zero points 0 and a float scale of 1
 * or n elements along the output-column axis; its node index, or -1. */
static int matmul_weights_dq(const toplu__graph_t *g, int v, int64_t n, int trans) {
  if (v < 0 || !g->values[v].konst.data || g->values[v].producer < 0) return -1;
  int di = g->values[v].producer;
  const toplu__node_t *d = &g->nodes[di];
  if (!d->dead || d->domain[0] || strcmp(d->op_type, "DequantizeLinear") || d->n_inputs < 2) return -1;
  const toplu_tensor_t *w = &g->values[d->inputs[0]].konst, *sc = &g->values[d->inputs[1]].konst;
  if (!w->data || w->dtype != TOPLU_DTYPE_INT8 || w->ndim != 2 || !sc->data || sc->dtype != TOPLU_DTYPE_FLOAT) return -1;
  int64_t ns = toplu_tensor_numel(sc), axis = toplu__node_attr_int(d, "axis", 1);
  if (axis < 0) axis += 2;
  if (ns != 1 && (ns != n || sc->ndim != 1 || axis != (trans ? 0 : 1))) return -1;
  if (d->n_inputs > 2 && d->inputs[2] >= 0) {
    const toplu_tensor_t *z = &g->values[d->inputs[2]].konst;
    if (!z->data || z->dtype != TOPLU_DTYPE_INT8) return -1;
    for (int64_t i = 0; i < toplu_tensor_numel(z); i++)
      if (((const int8_t *)z->data)[i] != 0) return -1;
  }
  return di;
}

/* A new constant value taking over data (dtype dt, 1-D [n] or 2-D [n, m] when m > 0); -1 out of memory. */
static int add_const_typed(toplu__graph_t *g, const char *base, const char *suffix, toplu_dtype_t dt, void *data, int64_t n,
                           int64_t m) {
  char name[700];
  snprintf(name, sizeof name, "%s::%s", base, suffix);
  int v = toplu__graph_add_value(g, name);
  if (v < 0) return -1;
  toplu__value_t *x = &g->values[v];
  x->dtype = x->konst.dtype = dt;
  x->ndim = x->konst.ndim = m > 0 ? 2 : 1;
  x->dims[0] = x->konst.dims[0] = n;
  if (m > 0) x->dims[1] = x->konst.dims[1] = m;
  x->konst.data = data;
  return v;
}

/*
 * QDQ MatMul and Gemm  ==>  toplu.QLinearMatMul (ops/onednn/qmatmul.c:
 * oneDNN's u8s8/s8s8 integer matmul):
 *   DequantizeLinear(x_q, sx, zx) -> MatMul(., W) [+ bias row, fused by
 *   fuse_post_ops] | Gemm(., W, C) (transA 0, alpha 1) -> QuantizeLinear(., sy, zy)
 * with x_q uint8/int8, sx, zx, sy, zy constant scalars, W the folded
 * DequantizeLinear of constant 2-D int8 weights (zero points 0, scale per
 * tensor or per output column: axis 1 of a MatMul's [K, N], axis 0 of a
 * Gemm's transB [N, K], transposed here to [K, N]) and the bias (beta C of
 * a Gemm, a MatMul's bias row) a constant float row [N]: it becomes int32
 * round(bias / (sx sw[n])) added to the sums, as for QLinearConv.  No
 * QuantizeLinear after it (a float island, or an activation or residual
 * Add fused after it that the quantization does not take): the float
 * output acc * sx sw[n] + bias (bias in real units, unrounded) and the
 * fused post-ops, the float MatMul of the dequantized x and W with its sums
 * exact.  Only on a CPU with VNNI (TOPLU_FUSE_QDQ_CONV).
 */
static toplu_status_t fuse_qdq_matmul(toplu__graph_t *g, toplu_error_t *err) {
  const toplu__schema_t *qs = toplu__schema_find("toplu", "QLinearMatMul");
  if (!qs) return TOPLU_OK;
  for (int ci = 0; ci < g->n_nodes; ci++) {
    toplu__node_t *c = &g->nodes[ci];
    int gemm = is_op(c, "Gemm");
    if (!(gemm || is_op(c, "MatMul")) || c->n_outputs != 1 || c->n_inputs < 2) continue;
    if (gemm && (toplu__node_attr_int(c, "transA", 0) || toplu__node_attr_float(c, "alpha", 1.f) != 1.f)) continue;
    int trans = gemm && toplu__node_attr_int(c, "transB", 0);
    int x = c->inputs[0], w = c->inputs[1];
    int xq, sxv, zxv;
    float sx;
    if (int8_dequantize(g, x, &xq, &sxv, &zxv, &sx, NULL) < 0) continue;
    const toplu_tensor_t *wf = is_const(g, w) ? &g->values[w].konst : NULL;
    if (!wf || wf->ndim != 2) continue;
    int64_t n = wf->dims[trans ? 0 : 1], k = wf->dims[trans ? 1 : 0];
    int wd = matmul_weights_dq(g, w, n, trans);
    if (wd < 0) continue;
    /* the bias row and the post-ops that stay */
    int bias_v = -1, first_post = 0, ok = 1;
    float beta = 1.f;
    if (gemm) {
      beta = toplu__node_attr_float(c, "beta", 1.f);
      int cv = c->n_inputs > 2 ? c->inputs[2] : -1;
      if (cv >= 0 && beta != 0.f) {
        const toplu_tensor_t *ct = is_const(g, cv) ? &g->values[cv].konst : NULL;
        if (!ct || ct->dtype != TOPLU_DTYPE_FLOAT || toplu_tensor_numel(ct) != n || ct->ndim < 1 || ct->ndim > 2 ||
            (ct->ndim == 2 && ct->dims[0] != 1))
          continue;
        bias_v = cv;
      }
    } else {
      if (c->n_post > 0 && c->post[0].kind == TOPLU_POST_BIAS) {
        bias_v = c->inputs[c->post[0].input];
        first_post = 1;
        if (!float_const(g, bias_v, n)) continue;
      }
    }
    int sum_v = -1;
    for (int i = first_post; i < c->n_post; i++) {
      int kd = c->post[i].kind;
      if (kd == TOPLU_POST_BIAS || kd == TOPLU_POST_MIN_CHANNEL || kd == TOPLU_POST_QSUM) ok = 0;
      if (kd == TOPLU_POST_SUM) {
        if (sum_v >= 0) ok = 0;
        sum_v = c->inputs[c->post[i].input];
      }
    }
    if (!ok) continue;
    int qi = -1, zyv = -1;
    float sy = 0.f;
    int32_t zy = 0;
    toplu_dtype_t zyt = TOPLU_DTYPE_UINT8;
    toplu__node_t *q = NULL;
    int to_q = c->n_post == first_post && sole_reader(g, c->outputs[0], &qi) && is_op(&g->nodes[qi], "QuantizeLinear");
    if (to_q) {
      q = &g->nodes[qi];
      zyv = q->n_inputs > 2 ? q->inputs[2] : -1;
      to_q = q->inputs[0] == c->outputs[0] && const_scalar(g, q->inputs[1], &sy) && sy > 0.f &&
             const_int_scalar(g, zyv, &zy, &zyt) && (zyt == TOPLU_DTYPE_UINT8 || zyt == TOPLU_DTYPE_INT8) &&
             q->n_outputs == 1 && g->values[q->outputs[0]].dtype == zyt;
    }
    if (g->values[c->outputs[0]].dtype != TOPLU_DTYPE_FLOAT) continue;
    const toplu__node_t *d = &g->nodes[wd];
    const toplu_tensor_t *sw = &g->values[d->inputs[1]].konst;
    int64_t nsw = toplu_tensor_numel(sw);
    /* weights as [K, N] */
    int wqv = d->inputs[0];
    if (trans) {
      const int8_t *src = g->values[d->inputs[0]].konst.data;
      int8_t *t = malloc((size_t)(k * n));
      if (!t) return toplu__errorf(err, TOPLU_ERR_OUT_OF_MEMORY, "out of memory");
      for (int64_t i = 0; i < n; i++)
        for (int64_t j = 0; j < k; j++) t[j * n + i] = src[i * k + j];
      if ((wqv = add_const_typed(g, c->name, "weights_kn", TOPLU_DTYPE_INT8, t, k, n)) < 0) {
        free(t);
        return toplu__errorf(err, TOPLU_ERR_OUT_OF_MEMORY, "out of memory");
      }
      c = &g->nodes[ci];
      d = &g->nodes[wd];
      sw = &g->values[d->inputs[1]].konst;
    }
    int bq = -1;
    if (bias_v >= 0) {
      const float *bf = g->values[bias_v].konst.data;
      void *bd = malloc((size_t)n * 4);
      if (!bd) return toplu__errorf(err, TOPLU_ERR_OUT_OF_MEMORY, "out of memory");
      for (int64_t j = 0; j < n; j++) {
        float b = beta * bf[j];
        if (!to_q) {
          ((float *)bd)[j] = b;
          continue;
        }
        double v = rint((double)b / ((double)sx * ((const float *)sw->data)[nsw == 1 ? 0 : j]));
        ((int32_t *)bd)[j] = v > 2147483647.0 ? INT32_MAX : v < -2147483648.0 ? INT32_MIN : (int32_t)v;
      }
      if ((bq = add_const_typed(g, c->name, to_q ? "bias_int32" : "bias_row", to_q ? TOPLU_DTYPE_INT32 : TOPLU_DTYPE_FLOAT, bd,
                                n, 0)) < 0) {
        free(bd);
        return toplu__errorf(err, TOPLU_ERR_OUT_OF_MEMORY, "out of memory");
      }
      c = &g->nodes[ci];
      d = &g->nodes[wd];
    }
    if (set_input_count(c, sum_v >= 0 ? 10 : 9) || (to_q && fused_append(c, "QuantizeLinear", g->nodes[qi].name)) ||
        set_op(c, "toplu", "QLinearMatMul", qs))
      return toplu__errorf(err, TOPLU_ERR_OUT_OF_MEMORY, "out of memory");
    d = &g->nodes[wd];
    int *ni = c->inputs;
    ni[0] = xq;
    ni[1] = sxv;
    ni[2] = zxv;
    ni[3] = wqv;
    ni[4] = d->inputs[1];
    ni[5] = d->n_inputs > 2 ? d->inputs[2] : -1;
    ni[6] = to_q ? g->nodes[qi].inputs[1] : -1;
    ni[7] = to_q ? zyv : -1;
    ni[8] = bq;
    if (sum_v >= 0) ni[9] = sum_v;
    /* the post-ops after the bias; a SUM reads input 9 */
    int np = 0;
    for (int i = first_post; i < c->n_post; i++) {
      toplu__post_op_t po = c->post[i];
      if (po.kind == TOPLU_POST_SUM) po.input = 9;
      c->post[np++] = po;
    }
    c->n_post = np;
    if (to_q) {
      c->outputs[0] = g->nodes[qi].outputs[0];
      g->nodes[qi].dead = 1;
    }
    toplu__graph_recount(g);
    drop_if_unread(g, x, g->values[x].producer);
  }
  return TOPLU_OK;
}

/* New constant value of one integer element of dtype dt (int8 or uint8). */
static int add_int_scalar(toplu__graph_t *g, const char *base, const char *suffix, toplu_dtype_t dt, int32_t v) {
  char name[700];
  snprintf(name, sizeof name, "%s::%s", base, suffix);
  int k = toplu__graph_add_value(g, name);
  if (k < 0) return -1;
  void *d = malloc(1);
  if (!d) return -1;
  if (dt == TOPLU_DTYPE_INT8) *(int8_t *)d = (int8_t)v;
  else *(uint8_t *)d = (uint8_t)v;
  toplu__value_t *x = &g->values[k];
  x->dtype = x->konst.dtype = dt;
  x->ndim = x->konst.ndim = 0;
  x->konst.data = d;
  return k;
}

/* Is v a constant scalar scale (float) and zero point (int8/uint8, or
 * absent: uint8 0) pair equal to (s, z, dt)?  For comparing a
 * DequantizeLinear's and a QuantizeLinear's parameters. */
static int same_qparams(const toplu__graph_t *g, int sv, int zv, float s, int32_t z, toplu_dtype_t dt) {
  float s2;
  int32_t z2;
  toplu_dtype_t dt2;
  return const_scalar(g, sv, &s2) && s2 == s && const_int_scalar(g, zv, &z2, &dt2) && z2 == z && dt2 == dt;
}

/* Quantize a real value: saturate(round_half_even(c / s) + z) for dt. */
static int32_t quantize_value(float c, float s, int32_t z, toplu_dtype_t dt) {
  float v = rintf(c / s) + (float)z;
  float lo = dt == TOPLU_DTYPE_INT8 ? -128.f : 0.f, hi = dt == TOPLU_DTYPE_INT8 ? 127.f : 255.f;
  if (!(v >= lo)) v = lo; /* NaN too */
  if (v > hi) v = hi;
  return (int32_t)v;
}

/*
 * DequantizeLinear(x_q, s, z) -> op -> QuantizeLinear(., s, z), the same
 * constant scale and zero point on both sides  ==>  op on x_q itself, for
 * ops that commute with the monotonic quantization and need no arithmetic:
 *   Relu          ->  Max(x_q, z)
 *   Min/Max(., c) ->  Min/Max(x_q, quantize(c))   (c a constant)
 *   Pad constant  ->  Pad(x_q, quantize(value))
 *   MaxPool       ->  MaxPool(x_q)                (no Indices output; int8 from opset 12)
 * Exact: quantize(min(dequantize(x_q), c)) = min(x_q, quantize(c)) because
 * quantize is monotonic and quantize(dequantize(x_q)) = x_q.  The QDQ graph
 * then moves int8 between its integer convolutions instead of float
 * (ONNX Runtime's QDQ propagation makes the same argument).
 */
static toplu_status_t int8_elementwise(toplu__graph_t *g, toplu_error_t *err) {
  const toplu__schema_t *max_schema = toplu__schema_find("", "Max");
  for (int oi = 0; oi < g->n_nodes; oi++) {
    toplu__node_t *o = &g->nodes[oi];
    int relu = is_op(o, "Relu"), minmax = is_op(o, "Min") || is_op(o, "Max"), pad = is_op(o, "Pad");
    int pool = is_op(o, "MaxPool");
    if (!relu && !minmax && !pad && !pool) continue;
    if (o->n_inputs < 1 || o->n_outputs < 1 || (pool ? o->n_outputs > 1 && o->outputs[1] >= 0 : o->n_outputs != 1))
      continue;
    if (minmax && o->n_inputs != 2) continue;
    if (pad && strcmp(toplu__node_attr_string(o, "mode", "constant"), "constant")) continue;
    int x = o->inputs[0], xq, sv, zv;
    float s;
    int32_t z;
    if (int8_dequantize(g, x, &xq, &sv, &zv, &s, &z) < 0) continue;
    toplu_dtype_t dt = g->values[xq].dtype;
    int qi;
    if (!sole_reader(g, o->outputs[0], &qi) || !is_op(&g->nodes[qi], "QuantizeLinear")) continue;
    toplu__node_t *q = &g->nodes[qi];
    if (q->inputs[0] != o->outputs[0] || !same_qparams(g, q->inputs[1], q->n_inputs > 2 ? q->inputs[2] : -1, s, z, dt))
      continue;
    if (pool) { /* no operand: the same node on the integers */
      o->inputs[0] = xq;
      o->outputs[0] = q->outputs[0];
      if (o->opset < 12) o->opset = 12;
      q->dead = 1;
      toplu__graph_recount(g);
      drop_if_unread(g, x, g->values[x].producer);
      continue;
    }
    int c = -1; /* the new int8 operand */
    if (relu) {
      if (!max_schema) continue;
      c = add_int_scalar(g, o->name, "zero_point", dt, z);
    } else if (minmax) {
      int k = o->inputs[1];
      if (!is_const(g, k) || g->values[k].konst.dtype != TOPLU_DTYPE_FLOAT) continue;
      const toplu_tensor_t *kt = &g->values[k].konst;
      int64_t n = toplu_tensor_numel(kt);
      if (g->values[k].ndim > g->values[xq].ndim) continue;
      char name[700];
      snprintf(name, sizeof name, "%s::quantized", o->name);
      c = toplu__graph_add_value(g, name);
      if (c < 0) return toplu__errorf(err, TOPLU_ERR_OUT_OF_MEMORY, "out of memory");
      toplu__value_t *kv = &g->values[k], *cv = &g->values[c];
      void *buf = malloc(n > 0 ? (size_t)n : 1);
      if (!buf) return toplu__errorf(err, TOPLU_ERR_OUT_OF_MEMORY, "out of memory");
      for (int64_t i = 0; i < n; i++) {
        int32_t v = quantize_value(((const float *)kv->konst.data)[i], s, z, dt);
        if (dt == TOPLU_DTYPE_INT8) ((int8_t *)buf)[i] = (int8_t)v;
        else ((uint8_t *)buf)[i] = (uint8_t)v;
      }
      cv->dtype = cv->konst.dtype = dt;
      cv->ndim = cv->konst.ndim = kv->konst.ndim;
      memcpy(cv->dims, kv->konst.dims, sizeof cv->dims);
      memcpy(cv->konst.dims, kv->konst.dims, sizeof cv->konst.dims);
      cv->konst.data = buf;
    } else {
      float pv = 0.f;
      int pvv = o->n_inputs > 2 ? o->inputs[2] : -1;
      if (pvv >= 0 && !const_scalar(g, pvv, &pv)) continue;
      if (o->n_inputs > 3 && o->inputs[3] >= 0) continue; /* axes */
      if (o->n_inputs < 2 || !is_const(g, o->inputs[1])) continue; /* opset < 11 pads attribute: left as is */
      c = add_int_scalar(g, o->name, "constant_value", dt, quantize_value(pv, s, z, dt));
    }
    if (c < 0) return toplu__errorf(err, TOPLU_ERR_OUT_OF_MEMORY, "out of memory");
    o = &g->nodes[oi];
    q = &g->nodes[qi];
    int slot = pad ? 2 : 1; /* where the integer operand goes */
    if ((relu && set_op(o, "", "Max", max_schema)) || (o->n_inputs <= slot && set_input_count(o, slot + 1)))
      return toplu__errorf(err, TOPLU_ERR_OUT_OF_MEMORY, "out of memory");
    o->inputs[slot] = c;
    if (!pad && o->opset < 13) o->opset = 13; /* Max/Min of int8 */
    o->inputs[0] = xq;
    o->outputs[0] = q->outputs[0];
    q->dead = 1;
    toplu__graph_recount(g);
    drop_if_unread(g, x, g->values[x].producer);
  }
  return TOPLU_OK;
}

/* The unary ops int8_lookup turns into a table: element-wise functions of one float with only attributes
 * besides (Relu, Clip and pooling stay on the integers exactly: int8_elementwise). */
static const char *const LOOKUP_OPS[] = {"Sigmoid", "Tanh",     "HardSigmoid", "HardSwish", "LeakyRelu",
                                         "Elu",     "Selu",     "Celu",        "Gelu",      "Erf",
                                         "Exp",     "Softplus", "Softsign",    "Mish",      "ThresholdedRelu",
                                         "Shrink",  NULL};

static int lookup_op(const toplu__node_t *n) {
  for (int k = 0; LOOKUP_OPS[k]; k++)
    if (is_op(n, LOOKUP_OPS[k])) return n->n_inputs == 1 && n->n_outputs == 1;
  return 0;
}

/* A scalar float scale and an 8-bit scalar zero point (or none) of a QuantizeLinear node. */
static int q_params_ok(const toplu__graph_t *g, const toplu__node_t *q) {
  float sc;
  int32_t z;
  toplu_dtype_t zdt;
  int zv = q->n_inputs > 2 ? q->inputs[2] : -1;
  return q->n_inputs >= 2 && const_scalar(g, q->inputs[1], &sc) && sc > 0.f && const_int_scalar(g, zv, &z, &zdt) &&
         (zv < 0 || zdt == TOPLU_DTYPE_UINT8 || zdt == TOPLU_DTYPE_INT8);
}

/* Mul(x, U(x)) with U a unary op of LOOKUP_OPS read by that Mul alone: U's node index (*mi the Mul's), or -1. */
static int mul_unary_pattern(const toplu__graph_t *g, int x, int *mi) {
  int r[3];
  if (readers(g, x, r, 3) != 2 || g->values[x].graph_output) return -1;
  for (int k = 0; k < 2; k++) {
    const toplu__node_t *u = &g->nodes[r[k]], *m = &g->nodes[r[1 - k]];
    if (!lookup_op(u) || u->inputs[0] != x || !is_op(m, "Mul") || m->n_inputs != 2 || m->n_outputs != 1) continue;
    int uo = u->outputs[0], only;
    if (g->values[uo].graph_output || !sole_reader(g, uo, &only) || only != r[1 - k]) continue;
    if (!((m->inputs[0] == x && m->inputs[1] == uo) || (m->inputs[0] == uo && m->inputs[1] == x))) continue;
    *mi = r[1 - k];
    return r[k];
  }
  return -1;
}

/* QLinearLookup's attributes: a copy of u's (NULL: none), op and, when times_x, times_x 1, in *out (malloc'ed,
 * *n of them).  -1 when out of memory (nothing left allocated). */
static int lookup_attrs(const toplu__node_t *u, const char *op, int times_x, toplu__attr_t **out, int *n) {
  int na = u ? u->n_attrs : 0;
  toplu__attr_t *attrs = NULL, *more;
  char *opname = malloc(strlen(op) + 1);
  if (!opname || (na && toplu__attrs_copy(u->attrs, na, &attrs)) ||
      !(more = realloc(attrs, (size_t)(na + 2) * sizeof *more))) {
    for (int k = 0; k < (attrs ? na : 0); k++) toplu__attr_clear(&attrs[k]);
    free(attrs);
    free(opname);
    return -1;
  }
  attrs = more;
  strcpy(opname, op);
  int at = na;
  if (!put_attr(attrs, &na, "op", TOPLU_ATTR_STRING, 0.f, 0)) {
    attrs[at].s = opname; /* now freed with the attribute */
    attrs[at].s_len = strlen(opname);
    opname = NULL;
  }
  if (opname || (times_x && put_attr(attrs, &na, "times_x", TOPLU_ATTR_INT, 0.f, 1))) {
    for (int k = 0; k < na; k++) toplu__attr_clear(&attrs[k]);
    free(attrs);
    free(opname);
    return -1;
  }
  *out = attrs;
  *n = na;
  return 0;
}

/* Codes of QLinearLookup's pre_ops and post_ops: an element-wise step with a constant float scalar c, applied to t
 * in float as the node it replaces computes it (ops/elementwise.c toplu__qlookup_table). */
enum { LOOKUP_MUL = 0, LOOKUP_ADD = 1, LOOKUP_SUB = 2, LOOKUP_RSUB = 3, LOOKUP_DIV = 4, LOOKUP_RDIV = 5 };
#define LOOKUP_MAX_STEPS 4

/* Node m as one such step on value v (Mul, Add, Sub or Div of v and a constant float scalar, v's shape kept): its
 * code, with the scalar in *c; -1 if it is none. */
static int scalar_step(const toplu__graph_t *g, const toplu__node_t *m, int v, float *c) {
  if (m->domain[0] || m->n_inputs != 2 || m->n_outputs != 1 || m->outputs[0] < 0) return -1;
  int k = m->inputs[0] == v ? 1 : m->inputs[1] == v ? 0 : -1; /* the constant's slot */
  if (k < 0 || m->inputs[k] == v || !const_scalar(g, m->inputs[k], c)) return -1;
  const toplu__value_t *in = &g->values[v], *out = &g->values[m->outputs[0]];
  if (out->dtype != TOPLU_DTYPE_FLOAT || in->ndim < 0 || out->ndim != in->ndim ||
      g->values[m->inputs[k]].konst.ndim > in->ndim) /* a scalar of higher rank would add dims */
    return -1;
  if (is_op(m, "Mul")) return LOOKUP_MUL;
  if (is_op(m, "Add")) return LOOKUP_ADD;
  if (is_op(m, "Sub")) return k == 1 ? LOOKUP_SUB : LOOKUP_RSUB;
  if (is_op(m, "Div")) return k == 1 ? LOOKUP_DIV : LOOKUP_RDIV;
  return -1;
}

/* The steps from v, each the sole reader of the value before it (at most LOOKUP_MAX_STEPS): their nodes, codes and
 * scalars in nodes/codes/vals, their count in *n; returns the value after the last (v when none). */
static int scalar_steps(const toplu__graph_t *g, int v, int *nodes, int64_t *codes, float *vals, int *n) {
  *n = 0;
  int ri = -1, code;
  while (*n < LOOKUP_MAX_STEPS && sole_reader(g, v, &ri) && (code = scalar_step(g, &g->nodes[ri], v, &vals[*n])) >= 0) {
    nodes[*n] = ri;
    codes[*n] = code;
    (*n)++;
    v = g->nodes[ri].outputs[0];
  }
  return v;
}

/* Append attribute name (ints when iv, else floats) of k values to attrs (room for it); -1 when out of memory. */
static int put_array_attr(toplu__attr_t *attrs, int *n, const char *name, const int64_t *iv, const float *fv, int k) {
  void *copy = malloc((size_t)k * (iv ? sizeof *iv : sizeof *fv));
  if (!copy || put_attr(attrs, n, name, iv ? TOPLU_ATTR_INTS : TOPLU_ATTR_FLOATS, 0.f, 0)) {
    free(copy);
    return -1;
  }
  memcpy(copy, iv ? (const void *)iv : (const void *)fv, (size_t)k * (iv ? sizeof *iv : sizeof *fv));
  attrs[*n - 1].n = k;
  if (iv) attrs[*n - 1].ints = copy;
  else attrs[*n - 1].floats = copy;
  return 0;
}

/*
 * DequantizeLinear -> f -> QuantizeLinear with f an element-wise function of
 * one float: a unary op U of LOOKUP_OPS (with its attributes), GELU with
 * erf written out (gelu_pattern), or Mul(x, U(x)) (SiLU as x * Sigmoid(x),
 * HardSwish as x * HardSigmoid(x): mul_unary_pattern), with up to four
 * Mul, Add, Sub or Div by constant float scalars before it and after it (or
 * such steps alone); 8-bit input, constant scalar scales and zero points
 * ==>  toplu.QLinearLookup(x, x_scale, x_zero_point, y_scale, y_zero_point)
 * with attribute op (U, or "Gelu" for the written-out GELU, "" for none),
 * times_x 1 for Mul(x, U(x)), pre_ops/pre_vals and post_ops/post_vals for
 * the scalar steps (LOOKUP_MUL, ...), and U's attributes. PaddleOCR's
 * PP-LCNetV3 blocks are such chains: DequantizeLinear -> Mul -> Add ->
 * HardSwish -> Mul -> Add -> QuantizeLinear (a learnable affine before and
 * after the activation), and DequantizeLinear -> Mul -> Add -> QuantizeLinear.
 * The input has 256 levels, so f's quantized result for each is a table
 * made once when the plan is built (ops/elementwise.c, with the float loops
 * of ops/elementwise_unary.c and ops/quant.c's arithmetic), and each element
 * is one load: a SiLU, HardSwish or GELU between an integer convolution's
 * quantized output and the next quantization stays integer, as ONNX
 * Runtime's QLinearSigmoid and QLinearLeakyRelu do for theirs.
 */
static toplu_status_t int8_lookup(toplu__graph_t *g, toplu_error_t *err) {
  const toplu__schema_t *schema = toplu__schema_find("toplu", "QLinearLookup");
  if (!schema) return TOPLU_OK;
  for (int di = 0; di < g->n_nodes; di++) {
    if (!is_op(&g->nodes[di], "DequantizeLinear") || g->nodes[di].n_outputs != 1) continue;
    int x = g->nodes[di].outputs[0], xq, sv, zv;
    if (int8_dequantize(g, x, &xq, &sv, &zv, NULL, NULL) != di) continue;
    for (;;) { /* each function of x in turn */
      int chain[5 + 2 * LOOKUP_MAX_STEPS], n_chain = 0, last = -1, times_x = 0, unary = -1;
      int pre_nodes[LOOKUP_MAX_STEPS], post_nodes[LOOKUP_MAX_STEPS], n_pre, n_post = 0;
      int64_t pre_ops[LOOKUP_MAX_STEPS], post_ops[LOOKUP_MAX_STEPS];
      float pre_vals[LOOKUP_MAX_STEPS], post_vals[LOOKUP_MAX_STEPS];
      const char *op = NULL;
      int gn[5], mi, r[8];
      int t = scalar_steps(g, x, pre_nodes, pre_ops, pre_vals, &n_pre); /* the value U reads */
      if (gelu_pattern(g, t, gn) >= 0) {
        memcpy(chain, gn, sizeof gn);
        n_chain = 5, last = gn[4], op = "Gelu";
      } else if ((unary = mul_unary_pattern(g, t, &mi)) >= 0) { /* SiLU, HardSwish as x * HardSigmoid(x) */
        chain[0] = unary, chain[1] = mi;
        n_chain = 2, last = mi, op = g->nodes[unary].op_type, times_x = 1;
      }
      int y = -1; /* the value the QuantizeLinear reads */
      if (last >= 0) {
        y = scalar_steps(g, g->nodes[last].outputs[0], post_nodes, post_ops, post_vals, &n_post);
      } else {
        int nr = readers(g, t, r, 8);
        for (int k = 0; k < nr && k < 8 && last < 0; k++) { /* the first unary whose steps end in a QuantizeLinear */
          int qk, yk;
          const toplu__node_t *u = &g->nodes[r[k]];
          /* after scalar steps, t must be the unary's alone (the steps' nodes die with the fusion) */
          if (!lookup_op(u) || u->inputs[0] != t || (n_pre > 0 && !sole_reader(g, t, &qk))) continue;
          yk = scalar_steps(g, u->outputs[0], post_nodes, post_ops, post_vals, &n_post);
          if (sole_reader(g, yk, &qk) && is_op(&g->nodes[qk], "QuantizeLinear") && q_params_ok(g, &g->nodes[qk]))
            chain[0] = r[k], n_chain = 1, last = r[k], op = u->op_type, unary = r[k], y = yk;
        }
      }
      if (last < 0) {
        if (n_pre == 0) break;
        op = ""; /* the scalar steps alone */
        y = t;
        n_post = 0;
      }
      int qi;
      if (g->values[y].graph_output || !sole_reader(g, y, &qi) || !is_op(&g->nodes[qi], "QuantizeLinear") ||
          g->nodes[qi].inputs[0] != y || !q_params_ok(g, &g->nodes[qi]))
        break;
      for (int k = 0; k < n_pre; k++) chain[n_chain++] = pre_nodes[k];
      for (int k = 0; k < n_post; k++) chain[n_chain++] = post_nodes[k];
      toplu__node_t *q = &g->nodes[qi];
      toplu__attr_t *attrs = NULL, *more;
      int na = 0, *ins = malloc(5 * sizeof *ins);
      if (!ins || lookup_attrs(unary >= 0 ? &g->nodes[unary] : NULL, op, times_x, &attrs, &na) ||
          !(more = realloc(attrs, (size_t)(na + 4) * sizeof *more)) || (attrs = more, 0) ||
          (n_pre && (put_array_attr(attrs, &na, "pre_ops", pre_ops, NULL, n_pre) ||
                     put_array_attr(attrs, &na, "pre_vals", NULL, pre_vals, n_pre))) ||
          (n_post && (put_array_attr(attrs, &na, "post_ops", post_ops, NULL, n_post) ||
                      put_array_attr(attrs, &na, "post_vals", NULL, post_vals, n_post)))) {
        for (int k = 0; k < na; k++) toplu__attr_clear(&attrs[k]);
        free(attrs);
        free(ins);
        return toplu__errorf(err, TOPLU_ERR_OUT_OF_MEMORY, "out of memory");
      }
      ins[0] = xq, ins[1] = sv, ins[2] = zv, ins[3] = q->inputs[1], ins[4] = q->n_inputs > 2 ? q->inputs[2] : -1;
      int oom = 0;
      const char *label = *op ? op : g->nodes[chain[0]].op_type; /* the steps alone: the first one's op */
      for (int k = 0; k < n_chain && !oom; k++) oom = fused_append(q, k ? NULL : label, g->nodes[chain[k]].name) != 0;
      if (oom || set_op(q, "toplu", "QLinearLookup", schema)) {
        for (int k = 0; k < na; k++) toplu__attr_clear(&attrs[k]);
        free(attrs);
        free(ins);
        return toplu__errorf(err, TOPLU_ERR_OUT_OF_MEMORY, "out of memory");
      }
      install_attrs_inputs(q, attrs, na, ins, 5);
      for (int k = 0; k < n_chain; k++) g->nodes[chain[k]].dead = 1;
      toplu__graph_recount(g);
    }
    drop_if_unread(g, x, di);
  }
  return TOPLU_OK;
}

/*
 * DequantizeLinear(a) + DequantizeLinear(b) -> Add (Mul) -> QuantizeLinear,
 * one integer type throughout, constant scalar scales and zero points  ==>
 * com.microsoft QLinearAdd (QLinearMul) on the integers (ops/quant_binary.c,
 * the same float arithmetic as the four nodes: bit-identical), as ONNX
 * Runtime's QDQ transformer writes it: the residual Adds of a QDQ ResNet or
 * MobileNetV2 then read and write int8.
 */
static toplu_status_t qdq_binary(toplu__graph_t *g, toplu_error_t *err) {
  for (int oi = 0; oi < g->n_nodes; oi++) {
    toplu__node_t *o = &g->nodes[oi];
    int add = is_op(o, "Add");
    if ((!add && !is_op(o, "Mul")) || o->n_inputs != 2 || o->n_outputs != 1) continue;
    int aq, as, az, bq, bs, bz;
    int da = int8_dequantize(g, o->inputs[0], &aq, &as, &az, NULL, NULL);
    int db = int8_dequantize(g, o->inputs[1], &bq, &bs, &bz, NULL, NULL);
    if (da < 0 || db < 0) continue;
    toplu_dtype_t dt = g->values[aq].dtype;
    if (g->values[bq].dtype != dt) continue;
    int qi;
    if (!sole_reader(g, o->outputs[0], &qi) || !is_op(&g->nodes[qi], "QuantizeLinear")) continue;
    toplu__node_t *q = &g->nodes[qi];
    float sc;
    int32_t zc;
    toplu_dtype_t zct;
    int qz = q->n_inputs > 2 ? q->inputs[2] : -1;
    if (q->inputs[0] != o->outputs[0] || !const_scalar(g, q->inputs[1], &sc) || !(sc > 0.f) ||
        !const_int_scalar(g, qz, &zc, &zct) || zct != dt || g->values[q->outputs[0]].dtype != dt)
      continue;
    const char *name = add ? "QLinearAdd" : "QLinearMul";
    const toplu__schema_t *schema = toplu__schema_find("com.microsoft", name);
    if (!schema) continue;
    int va = o->inputs[0], vb = o->inputs[1];
    /* the fused label first: it starts from the op type ("Add+QuantizeLinear") */
    if (fused_append(o, NULL, g->nodes[da].name) || fused_append(o, NULL, g->nodes[db].name) ||
        fused_append(o, "QuantizeLinear", q->name) || set_input_count(o, 8) || set_op(o, "com.microsoft", name, schema))
      return toplu__errorf(err, TOPLU_ERR_OUT_OF_MEMORY, "out of memory");
    int *ni = o->inputs;
    ni[0] = aq;
    ni[1] = as;
    ni[2] = az;
    ni[3] = bq;
    ni[4] = bs;
    ni[5] = bz;
    ni[6] = q->inputs[1];
    ni[7] = qz;
    o->opset = 1;
    o->outputs[0] = q->outputs[0];
    q->dead = 1;
    toplu__graph_recount(g);
    drop_if_unread(g, va, da);
    drop_if_unread(g, vb, db);
  }
  return TOPLU_OK;
}

/* Set node n's ints attribute name to vals[0..k-1] (added when missing).
 * -1 when out of memory. */
static int set_ints_attr(toplu__node_t *n, const char *name, int k, const int64_t *vals) {
  int64_t *iv = malloc((size_t)k * sizeof *iv);
  if (!iv) return -1;
  memcpy(iv, vals, (size_t)k * sizeof *iv);
  for (int a = 0; a < n->n_attrs; a++)
    if (!strcmp(n->attrs[a].name, name)) {
      free(n->attrs[a].ints);
      n->attrs[a].ints = iv;
      n->attrs[a].n = k;
      n->attrs[a].type = TOPLU_ATTR_INTS;
      return 0;
    }
  toplu__attr_t *na = realloc(n->attrs, (size_t)(n->n_attrs + 1) * sizeof *na);
  char *nm = malloc(strlen(name) + 1);
  if (!na || !nm) {
    if (na) n->attrs = na;
    free(iv);
    free(nm);
    return -1;
  }
  n->attrs = na;
  strcpy(nm, name);
  memset(&na[n->n_attrs], 0, sizeof na[0]);
  na[n->n_attrs].name = nm;
  na[n->n_attrs].type = TOPLU_ATTR_INTS;
  na[n->n_attrs].ints = iv;
  na[n->n_attrs].n = k;
  n->n_attrs++;
  return 0;
}

/*
 * Integer glue around a QLinearConv, folded into it:
 *   - Max(y_q, k) or Min(y_q, k), k a constant scalar, as its only reader:
 *     a Clip post-op at the real value (k - y_zp) y_scale (a Relu when k is
 *     y_zp and the op a Max).  Exact: the bound is a quantization level.
 *   - Pad(x_q, pads, v), constant mode, v = x_zp, spatial axes only, as its
 *     input read by it alone: added to its pads (oneDNN pads with x_zp, the
 *     real zero), as TensorFlow exports "SAME" padding of a strided conv.
 */
static toplu_status_t fold_into_qconv(toplu__graph_t *g, toplu_error_t *err) {
  for (int ci = 0; ci < g->n_nodes; ci++) {
    toplu__node_t *c = &g->nodes[ci];
    if (!is_op(c, "QLinearConv") || c->n_outputs != 1 || c->n_inputs < 8) continue;
    float sy;
    int32_t zy;
    toplu_dtype_t zyt;
    int folded = 1;
    while (folded && c->n_post < TOPLU_MAX_POST) {
      folded = 0;
      int ri;
      if (!const_scalar(g, c->inputs[6], &sy) || !const_int_scalar(g, c->inputs[7], &zy, &zyt)) break;
      if (!sole_reader(g, c->outputs[0], &ri)) break;
      toplu__node_t *r = &g->nodes[ri];
      int isMax = is_op(r, "Max");
      if ((!isMax && !is_op(r, "Min")) || r->n_inputs != 2 || r->inputs[0] != c->outputs[0]) break;
      int32_t k;
      toplu_dtype_t kt;
      toplu__post_op_t po;
      memset(&po, 0, sizeof po);
      int kv = r->inputs[1];
      if (!is_const(g, kv)) break;
      if (!isMax && g->values[kv].konst.dtype == zyt && toplu_tensor_numel(&g->values[kv].konst) > 1) {
        /* per-channel bounds [1, M, 1, ...] or [M, 1, ...] against y [N, M, ...] */
        const toplu__value_t *yv = &g->values[c->outputs[0]], *kvv = &g->values[kv];
        int64_t m = yv->ndim >= 2 ? yv->dims[1] : -1;
        int ok = m > 0 && toplu_tensor_numel(&kvv->konst) == m && kvv->konst.ndim <= yv->ndim &&
                 kvv->konst.ndim >= yv->ndim - 1 && c->n_post < TOPLU_MAX_POST &&
                 c->n_inputs <= 9; /* one per-channel Min per conv (input 9) */
        for (int d2 = 0; ok && d2 < kvv->konst.ndim; d2++)
          ok = kvv->konst.dims[d2] == ((d2 + yv->ndim - kvv->konst.ndim) == 1 ? m : 1);
        if (!ok) break;
        float *bounds = malloc((size_t)m * sizeof *bounds);
        if (!bounds) return toplu__errorf(err, TOPLU_ERR_OUT_OF_MEMORY, "out of memory");
        for (int64_t j = 0; j < m; j++) {
          int32_t q = zyt == TOPLU_DTYPE_INT8 ? ((const int8_t *)kvv->konst.data)[j] : ((const uint8_t *)kvv->konst.data)[j];
          bounds[j] = (float)(q - zy) * sy;
        }
        int64_t bd = m;
        int bv = add_const(g, r->name, "bounds", bounds, 1, &bd);
        if (bv < 0) {
          free(bounds);
          return toplu__errorf(err, TOPLU_ERR_OUT_OF_MEMORY, "out of memory");
        }
        c = &g->nodes[ci];
        r = &g->nodes[ri];
        if (set_input_count(c, 10)) return toplu__errorf(err, TOPLU_ERR_OUT_OF_MEMORY, "out of memory");
        c->inputs[9] = bv;
        po.kind = TOPLU_POST_MIN_CHANNEL;
        po.input = 9;
        c->post[c->n_post++] = po;
        c->outputs[0] = r->outputs[0];
        r->dead = 1;
        if (set_fused_name(c, r)) return toplu__errorf(err, TOPLU_ERR_OUT_OF_MEMORY, "out of memory");
        toplu__graph_recount(g);
        folded = 1;
        continue;
      }
      if (!const_int_scalar(g, kv, &k, &kt) || kt != zyt) break;
      float bound = (float)(k - zy) * sy;
      if (isMax && k == zy) po.kind = TOPLU_POST_RELU;
      else {
        po.kind = TOPLU_POST_CLIP;
        po.alpha = isMax ? bound : -INFINITY;
        po.beta = isMax ? INFINITY : bound;
      }
      c->post[c->n_post++] = po;
      c->outputs[0] = r->outputs[0];
      r->dead = 1;
      if (set_fused_name(c, r)) return toplu__errorf(err, TOPLU_ERR_OUT_OF_MEMORY, "out of memory");
      toplu__graph_recount(g);
      folded = 1;
    }
    /* Pad before it */
    int x = c->inputs[0];
    if (x < 0 || g->values[x].producer < 0 || g->values[x].graph_output || g->values[x].n_uses != 1) continue;
    toplu__node_t *p = &g->nodes[g->values[x].producer];
    if (!is_op(p, "Pad") || p->n_inputs < 2 || !is_const(g, p->inputs[1])) continue;
    if (strcmp(toplu__node_attr_string(p, "mode", "constant"), "constant")) continue;
    if (p->n_inputs > 3 && p->inputs[3] >= 0) continue;
    const char *ap = toplu__node_attr_string(c, "auto_pad", "NOTSET");
    if (strcmp(ap, "NOTSET")) continue;
    int32_t pv, zx;
    toplu_dtype_t pvt, zxt;
    if (!const_int_scalar(g, p->n_inputs > 2 ? p->inputs[2] : -1, &pv, &pvt) ||
        !const_int_scalar(g, c->inputs[2], &zx, &zxt) || pv != zx)
      continue;
    const toplu_tensor_t *pads = &g->values[p->inputs[1]].konst;
    int rank = g->values[x].ndim, sp = rank - 2;
    if (rank < 3 || pads->dtype != TOPLU_DTYPE_INT64 || toplu_tensor_numel(pads) != 2 * rank) continue;
    const int64_t *pp = pads->data;
    int ok = pp[0] == 0 && pp[1] == 0 && pp[rank] == 0 && pp[rank + 1] == 0;
    for (int i = 0; i < 2 * rank; i++) ok = ok && pp[i] >= 0;
    if (!ok) continue;
    int64_t cur[2 * TOPLU_CONV_MAX_SPATIAL_FUSE] = {0}, cnt = 0;
    if (sp > TOPLU_CONV_MAX_SPATIAL_FUSE) continue;
    if (!toplu__node_attr_ints_n(c, "pads", 2 * sp, 0, cur, &cnt)) continue;
    for (int i = 0; i < sp; i++) {
      cur[i] += pp[2 + i];
      cur[sp + i] += pp[rank + 2 + i];
    }
    if (set_ints_attr(c, "pads", 2 * sp, cur)) return toplu__errorf(err, TOPLU_ERR_OUT_OF_MEMORY, "out of memory");
    c->inputs[0] = p->inputs[0];
    p->dead = 1;
    if (fused_append(c, NULL, p->name)) return toplu__errorf(err, TOPLU_ERR_OUT_OF_MEMORY, "out of memory");
    toplu__graph_recount(g);
  }
  return TOPLU_OK;
}

/*
 * The residual Add of a QDQ network, into the integer convolution before it:
 *   QLinearConv(...) -> a_q (scale sa, zero point za: the conv's own y_scale,
 *   y_zero_point) -> DequantizeLinear -> Add(., DequantizeLinear(b_q, sb, zb))
 *   [-> Relu] -> QuantizeLinear(., sy, zy)
 * where a_q is read by that DequantizeLinear alone, b_q (same integer type)
 * is computed before the convolution runs, and scales and zero points are
 * constant scalars  ==>  the QLinearConv writes the QuantizeLinear's output
 * with y_scale sy, y_zero_point zy, and five inputs appended at k (9, or 10
 * after a per-channel Min's bounds): b_q, sb, zb, sa, za, and post-ops
 * [earlier ones] TOPLU_POST_QSUM(input k) [Relu].  TOPLU_POST_QSUM keeps
 * the QDQ graph's meaning: the convolution's real value is quantized to
 * (sa, za) and dequantized, then sb (b_q - zb) is added
 * (ops/onednn/qconv.c).  a_q and the float Add, Relu and QuantizeLinear go;
 * the block writes its integer output in the convolution's layout, the
 * residual read in place (docs/design.md "Int8").  When both addends come
 * from QLinearConvs (a ResNet block with a projection shortcut) the one
 * that runs later takes the sum.  Not with TOPLU_FUSE_NO_QDQ_RESIDUAL.
 */
static toplu_status_t fuse_qdq_residual(toplu__graph_t *g, toplu_error_t *err) {
  for (int oi = 0; oi < g->n_nodes; oi++) {
    toplu__node_t *o = &g->nodes[oi];
    if (!is_op(o, "Add") || o->n_inputs != 2 || o->n_outputs != 1 || o->inputs[0] == o->inputs[1]) continue;
    int q_[2], s_[2], z_[2], d_[2], c_[2] = {-1, -1};
    float sc_[2];
    int32_t zp_[2];
    int ok = 1;
    for (int i = 0; i < 2 && ok; i++) {
      d_[i] = int8_dequantize(g, o->inputs[i], &q_[i], &s_[i], &z_[i], &sc_[i], &zp_[i]);
      if (d_[i] < 0) ok = 0;
      else {
        int pr = g->values[q_[i]].producer;
        if (pr >= 0 && is_op(&g->nodes[pr], "QLinearConv") && g->nodes[pr].outputs[0] == q_[i]) c_[i] = pr;
      }
    }
    if (!ok || g->values[q_[0]].dtype != g->values[q_[1]].dtype) continue;
    toplu_dtype_t dt = g->values[q_[0]].dtype;
    /* the addend whose convolution runs later, if it can take the sum */
    int side = -1;
    for (int pass = 0; pass < 2 && side < 0; pass++) {
      int i = pass == 0 ? (c_[1] > c_[0]) : !(c_[1] > c_[0]);
      int ci = c_[i], other = q_[1 - i];
      if (ci < 0) continue;
      const toplu__node_t *c = &g->nodes[ci];
      const toplu__value_t *av = &g->values[q_[i]];
      if (c->n_outputs != 1 || c->n_inputs < 8 || c->n_inputs > 10 || av->graph_output || av->n_uses != 1 ||
          g->values[o->inputs[i]].n_uses != 1)
        continue;
      if (!same_qparams(g, c->inputs[6], c->inputs[7], sc_[i], zp_[i], dt)) continue;
      if (g->values[other].producer >= ci) continue; /* must exist before the convolution runs */
      if (!same_shape(&g->values[other], av) || c->n_post + 2 > TOPLU_MAX_POST) continue;
      side = i;
    }
    if (side < 0) continue;
    /* [Relu ->] QuantizeLinear of the same integer type */
    int ri = -1, qi, y = o->outputs[0];
    if (sole_reader(g, y, &ri) && is_op(&g->nodes[ri], "Relu") && g->nodes[ri].inputs[0] == y &&
        g->nodes[ri].n_outputs == 1)
      y = g->nodes[ri].outputs[0];
    else
      ri = -1;
    if (g->values[y].graph_output || !sole_reader(g, y, &qi) || !is_op(&g->nodes[qi], "QuantizeLinear")) continue;
    toplu__node_t *q = &g->nodes[qi];
    float sy;
    int32_t zy;
    toplu_dtype_t zyt;
    int qz = q->n_inputs > 2 ? q->inputs[2] : -1;
    if (q->inputs[0] != y || q->n_outputs != 1 || !const_scalar(g, q->inputs[1], &sy) || !(sy > 0.f) ||
        !const_int_scalar(g, qz, &zy, &zyt) || zyt != dt || g->values[q->outputs[0]].dtype != dt ||
        toplu_tensor_numel(&g->values[q->inputs[1]].konst) != 1)
      continue;
    if (ri >= 0 && g->values[o->outputs[0]].graph_output) continue;
    int ci = c_[side], va = o->inputs[side], vb = o->inputs[1 - side];
    toplu__node_t *c = &g->nodes[ci];
    int k = c->n_inputs > 9 ? 10 : 9, n_old = c->n_inputs;
    if (set_input_count(c, k + 5)) return toplu__errorf(err, TOPLU_ERR_OUT_OF_MEMORY, "out of memory");
    for (int j = n_old; j < k; j++) c->inputs[j] = -1; /* absent B */
    c->inputs[k] = q_[1 - side];
    c->inputs[k + 1] = s_[1 - side];
    c->inputs[k + 2] = z_[1 - side];
    c->inputs[k + 3] = c->inputs[6];
    c->inputs[k + 4] = c->inputs[7];
    c->inputs[6] = q->inputs[1];
    c->inputs[7] = qz;
    c->n_inputs = k + 5;
    toplu__post_op_t po;
    memset(&po, 0, sizeof po);
    po.kind = TOPLU_POST_QSUM;
    po.input = k;
    c->post[c->n_post++] = po;
    if (ri >= 0) {
      memset(&po, 0, sizeof po);
      po.kind = TOPLU_POST_RELU;
      c->post[c->n_post++] = po;
    }
    o = &g->nodes[oi];
    q = &g->nodes[qi];
    if (fused_append(c, "Add", o->name) || (ri >= 0 && fused_append(c, "Relu", g->nodes[ri].name)) ||
        fused_append(c, "QuantizeLinear", q->name))
      return toplu__errorf(err, TOPLU_ERR_OUT_OF_MEMORY, "out of memory");
    c->outputs[0] = q->outputs[0];
    o->dead = 1;
    q->dead = 1;
    if (ri >= 0) g->nodes[ri].dead = 1;
    toplu__graph_recount(g);
    drop_if_unread(g, va, d_[side]);
    drop_if_unread(g, vb, d_[1 - side]);
  }
  return TOPLU_OK;
}

/* Live nodes reading value v: up to cap indices in out; returns how many. */
static int readers(const toplu__graph_t *g, int v, int *out, int cap) {
  int n = 0;
  for (int i = 0; i < g->n_nodes; i++) {
    const toplu__node_t *x = &g->nodes[i];
    if (x->dead) continue;
    for (int j = 0; j < x->n_inputs; j++)
      if (x->inputs[j] == v) {
        if (n < cap) out[n] = i;
        n++;
        break;
      }
  }
  return n;
}

/* Is node i a two-input op of type op reading v, with the other input a
 * constant scalar (to *c)?  Either input order when commutes. */
static int op_with_scalar(const toplu__graph_t *g, int i, const char *op, int v, int commutes, float *c) {
  const toplu__node_t *n = &g->nodes[i];
  if (!is_op(n, op) || n->n_inputs != 2) return 0;
  if (n->inputs[0] == v && const_scalar(g, n->inputs[1], c)) return 1;
  return commutes && n->inputs[1] == v && const_scalar(g, n->inputs[0], c);
}

/*
 * GELU with erf written out (PyTorch's export of nn.GELU / F.gelu before
 * opset 20): d = y / sqrt(2) (or y * (1/sqrt 2)); e = Erf(d); a = e + 1;
 * m = y * a; out = m * 0.5.  y must be read by the first and the fourth
 * node only.  Returns the last node's index and the five nodes in nodes[];
 * -1 when y is not the start of that pattern.
 */
static int gelu_pattern(const toplu__graph_t *g, int y, int nodes[5]) {
  if (y < 0 || g->values[y].graph_output || g->values[y].n_uses != 2) return -1;
  int r[2];
  if (readers(g, y, r, 2) != 2) return -1;
  float c;
  for (int first = 0; first < 2; first++) {
    int d = r[first], m = r[1 - first];
    int is_div = op_with_scalar(g, d, "Div", y, 0, &c) && fabsf(c - 1.41421356f) < 1e-5f;
    int is_mul = !is_div && op_with_scalar(g, d, "Mul", y, 1, &c) && fabsf(c - 0.70710678f) < 1e-6f;
    if (!is_div && !is_mul) continue;
    int e, a, o;
    if (!sole_reader(g, g->nodes[d].outputs[0], &e) || !is_op(&g->nodes[e], "Erf")) continue;
    if (!sole_reader(g, g->nodes[e].outputs[0], &a) ||
        !op_with_scalar(g, a, "Add", g->nodes[e].outputs[0], 1, &c) || c != 1.f)
      continue;
    const toplu__node_t *mn = &g->nodes[m];
    if (!is_op(mn, "Mul") || mn->n_inputs != 2 || other_input(mn, y) != g->nodes[a].outputs[0]) continue;
    if (!sole_reader(g, mn->outputs[0], &o) || !op_with_scalar(g, o, "Mul", mn->outputs[0], 1, &c) || c != 0.5f)
      continue;
    nodes[0] = d, nodes[1] = e, nodes[2] = a, nodes[3] = m, nodes[4] = o;
    return o;
  }
  return -1;
}

/* A float constant of n elements shaped [n] or [1, ..., 1, n], rank at most
 * rank: a row added along a MatMul output's last axis. */
static int bias_row(const toplu__graph_t *g, int v, int64_t n, int rank) {
  if (!float_const(g, v, n)) return 0;
  const toplu_tensor_t *t = &g->values[v].konst;
  if (t->ndim < 1 || t->ndim > rank || t->dims[t->ndim - 1] != n) return 0;
  for (int i = 0; i + 1 < t->ndim; i++)
    if (t->dims[i] != 1) return 0;
  return 1;
}

/* Reduction axes of a ReduceMean over only the last axis of a rank-r input (keepdims 1)? */
static int mean_over_last(const toplu__graph_t *g, const toplu__node_t *n, int r) {
  if (!is_op(n, "ReduceMean") || toplu__node_attr_int(n, "keepdims", 1) != 1 || r < 1) return 0;
  const int64_t *ax = NULL;
  int64_t na = 0;
  if (n->opset >= 18) {
    if (n->n_inputs < 2 || n->inputs[1] < 0) return 0;
    const toplu_tensor_t *t = &g->values[n->inputs[1]].konst;
    if (!t->data || t->dtype != TOPLU_DTYPE_INT64) return 0;
    ax = t->data;
    na = toplu_tensor_numel(t);
  } else {
    na = toplu__node_attr_ints(n, "axes", &ax);
  }
  return na == 1 && (ax[0] == -1 || ax[0] == r - 1);
}

/*
 * LayerNorm written out (PyTorch's export of nn.LayerNorm before opset 17):
 * mean = ReduceMean(x, [-1]); d = x - mean; var = ReduceMean(d^2, [-1]);
 * y = d / Sqrt(var + eps) * gamma + beta, with gamma and beta constant rows
 * of x's last dim  ==>  LayerNormalization-17(x, gamma, beta, axis -1,
 * epsilon eps).  The final Add becomes that node; the others die.
 */
static toplu_status_t rewrite_layernorm(toplu__graph_t *g, toplu_error_t *err) {
  const toplu__schema_t *ln = toplu__schema_find("", "LayerNormalization");
  if (!ln) return TOPLU_OK;
  for (int ri = 0; ri < g->n_nodes; ri++) {
    toplu__node_t *rm = &g->nodes[ri];
    if (!is_op(rm, "ReduceMean") || rm->n_inputs < 1) continue;
    int x = rm->inputs[0];
    if (x < 0 || g->values[x].dtype != TOPLU_DTYPE_FLOAT || g->values[x].ndim < 1) continue;
    int r = g->values[x].ndim;
    int64_t c = g->values[x].dims[r - 1];
    if (c <= 0 || !mean_over_last(g, rm, r)) continue;
    int si, pi, qi, ai, ti, di, mi, bi;
    if (!sole_reader(g, rm->outputs[0], &si)) continue;
    toplu__node_t *sub = &g->nodes[si];
    if (!is_op(sub, "Sub") || sub->n_inputs != 2 || sub->inputs[0] != x || sub->inputs[1] != rm->outputs[0]) continue;
    int d = sub->outputs[0], rd[2];
    if (g->values[d].graph_output || g->values[d].n_uses != 2 || readers(g, d, rd, 2) != 2) continue;
    float e2;
    pi = op_with_scalar(g, rd[0], "Pow", d, 0, &e2) && e2 == 2.f ? rd[0] : rd[1];
    di = pi == rd[0] ? rd[1] : rd[0];
    if (!op_with_scalar(g, pi, "Pow", d, 0, &e2) || e2 != 2.f) continue;
    if (!sole_reader(g, g->nodes[pi].outputs[0], &qi) || !mean_over_last(g, &g->nodes[qi], r) ||
        g->nodes[qi].inputs[0] != g->nodes[pi].outputs[0])
      continue;
    float eps;
    if (!sole_reader(g, g->nodes[qi].outputs[0], &ai) ||
        !op_with_scalar(g, ai, "Add", g->nodes[qi].outputs[0], 1, &eps) || !(eps > 0.f))
      continue;
    if (!sole_reader(g, g->nodes[ai].outputs[0], &ti) || !is_op(&g->nodes[ti], "Sqrt")) continue;
    toplu__node_t *dv = &g->nodes[di];
    if (!is_op(dv, "Div") || dv->n_inputs != 2 || dv->inputs[0] != d || dv->inputs[1] != g->nodes[ti].outputs[0])
      continue;
    if (!sole_reader(g, g->nodes[ti].outputs[0], &di) || &g->nodes[di] != dv) continue;
    if (!sole_reader(g, dv->outputs[0], &mi) || !is_op(&g->nodes[mi], "Mul")) continue;
    int gamma = other_input(&g->nodes[mi], dv->outputs[0]);
    if (!bias_row(g, gamma, c, r)) continue;
    if (!sole_reader(g, g->nodes[mi].outputs[0], &bi) || !is_op(&g->nodes[bi], "Add")) continue;
    int beta = other_input(&g->nodes[bi], g->nodes[mi].outputs[0]);
    if (!bias_row(g, beta, c, r)) continue;
    toplu__node_t *last = &g->nodes[bi];
    toplu__attr_t *attrs = calloc(2, sizeof *attrs);
    char *op = malloc(sizeof "LayerNormalization");
    int *ins = malloc(3 * sizeof *ins);
    char *n_axis = malloc(sizeof "axis"), *n_eps = malloc(sizeof "epsilon");
    if (!attrs || !op || !ins || !n_axis || !n_eps) {
      free(attrs), free(op), free(ins), free(n_axis), free(n_eps);
      return toplu__errorf(err, TOPLU_ERR_OUT_OF_MEMORY, "out of memory");
    }
    memcpy(op, "LayerNormalization", sizeof "LayerNormalization");
    memcpy(n_axis, "axis", sizeof "axis");
    memcpy(n_eps, "epsilon", sizeof "epsilon");
    attrs[0].name = n_axis, attrs[0].type = TOPLU_ATTR_INT, attrs[0].i = -1;
    attrs[1].name = n_eps, attrs[1].type = TOPLU_ATTR_FLOAT, attrs[1].f = eps;
    for (int j = 0; j < last->n_attrs; j++) toplu__attr_clear(&last->attrs[j]);
    free(last->attrs);
    last->attrs = attrs;
    last->n_attrs = 2;
    free(last->op_type);
    last->op_type = op;
    last->schema = ln;
    last->opset = 17;
    ins[0] = x, ins[1] = gamma, ins[2] = beta;
    free(last->inputs);
    last->inputs = ins;
    last->n_inputs = 3;
    int gone[8] = {ri, si, pi, qi, ai, ti, (int)(dv - g->nodes), mi};
    for (int k = 0; k < 8; k++) {
      g->nodes[gone[k]].dead = 1;
      if (fused_append(last, NULL, g->nodes[gone[k]].name))
        return toplu__errorf(err, TOPLU_ERR_OUT_OF_MEMORY, "out of memory");
    }
    toplu__graph_recount(g);
  }
  return TOPLU_OK;
}

/* ---- scaled dot-product attention ---- */

/* v's producer when v is read by one node only (and is no graph output),
 * else -1. */
static int sole_producer(const toplu__graph_t *g, int v) {
  if (v < 0 || g->values[v].graph_output || g->values[v].n_uses != 1) return -1;
  return g->values[v].producer;
}

/* v = Mul(x, c), Mul(c, x) or Div(x, c) with c a constant float scalar, v
 * read by one node only: x, with *scale multiplied by c (1 / c for Div) and
 * the node's index in *node.  Else v itself (*node -1). */
static int unscaled(const toplu__graph_t *g, int v, float *scale, int *node) {
  *node = -1;
  int p = sole_producer(g, v);
  float c;
  if (p < 0) return v;
  const toplu__node_t *n = &g->nodes[p];
  if (n->n_inputs != 2 || n->n_outputs != 1) return v;
  if (is_op(n, "Mul") && const_scalar(g, n->inputs[1], &c) && n->inputs[0] >= 0) {
    *scale *= c, *node = p;
    return n->inputs[0];
  }
  if (is_op(n, "Mul") && const_scalar(g, n->inputs[0], &c) && n->inputs[1] >= 0) {
    *scale *= c, *node = p;
    return n->inputs[1];
  }
  if (is_op(n, "Div") && const_scalar(g, n->inputs[1], &c) && c != 0.f && n->inputs[0] >= 0) {
    *scale /= c, *node = p;
    return n->inputs[0];
  }
  return v;
}

/* Is v a float value of rank lo..hi? */
static int float_rank(const toplu__graph_t *g, int v, int lo, int hi) {
  return v >= 0 && g->values[v].dtype == TOPLU_DTYPE_FLOAT && g->values[v].ndim >= lo && g->values[v].ndim <= hi;
}

/* Append a FLOAT or INT attribute to attrs[*n] (names copied).  -1 when out of memory. */
static int put_attr(toplu__attr_t *attrs, int *n, const char *name, toplu__attr_type_t type, float f, int64_t i) {
  char *nm = malloc(strlen(name) + 1);
  if (!nm) return -1;
  strcpy(nm, name);
  memset(&attrs[*n], 0, sizeof attrs[0]);
  attrs[*n].name = nm;
  attrs[*n].type = type;
  attrs[*n].f = f;
  attrs[*n].i = i;
  (*n)++;
  return 0;
}

/* Give node o (made a toplu-domain node by set_op) new attributes and
 * inputs, both malloc'ed and taken over; the old ones are freed and its
 * opset becomes 1 (the toplu domain's). */
static void install_attrs_inputs(toplu__node_t *o, toplu__attr_t *attrs, int na, int *ins, int n_ins) {
  for (int j = 0; j < o->n_attrs; j++) toplu__attr_clear(&o->attrs[j]);
  free(o->attrs);
  o->attrs = attrs;
  o->n_attrs = na;
  o->opset = 1;
  free(o->inputs);
  o->inputs = ins;
  o->n_inputs = n_ins;
}

/*
 * Scaled dot-product attention as PyTorch and others export it:
 *   s = MatMul(Q, KT)                 Q [..., T, d], KT [..., d, S]
 *   s = s / c  or  s * c              optional, c a constant scalar (or a
 *                                     scalar Mul/Div on Q and/or KT before it)
 *   s = s + mask                      optional float mask broadcasting to s, or
 *   s = Where(cond, s, f)             a bool mask with a constant scalar fill f
 *                                     (or Where(cond, f, s))
 *   p = Softmax(s, last axis)
 *   y = MatMul(p, V)                  V [..., S, dv]
 * with every intermediate read by the next node alone  ==>
 * toplu.ScaledDotProductAttention(Q, KT, V[, mask]) with attributes scale,
 * and for a bool mask mask_fill and mask_keep (1: s where cond, else fill;
 * 0: the reverse).  The final MatMul becomes that node; the others die.
 */
static toplu_status_t rewrite_attention(toplu__graph_t *g, toplu_error_t *err) {
  const toplu__schema_t *sdpa = toplu__schema_find("toplu", "ScaledDotProductAttention");
  if (!sdpa) return TOPLU_OK;
  for (int si = 0; si < g->n_nodes; si++) {
    toplu__node_t *sm = &g->nodes[si];
    if (!is_op(sm, "Softmax") || sm->n_inputs != 1 || sm->n_outputs != 1) continue;
    int x = sm->inputs[0];
    if (x < 0 || g->values[x].dtype != TOPLU_DTYPE_FLOAT || g->values[x].ndim < 2) continue;
    int r = g->values[x].ndim;
    int64_t axis = toplu__node_attr_int(sm, "axis", sm->opset < 13 ? 1 : -1);
    if (axis != -1 && axis != r - 1) continue;
    int oi;
    if (!sole_reader(g, sm->outputs[0], &oi)) continue;
    toplu__node_t *o = &g->nodes[oi];
    if (!is_op(o, "MatMul") || o->n_inputs != 2 || o->inputs[0] != sm->outputs[0] || o->n_post) continue;
    int v = o->inputs[1];
    if (!float_rank(g, v, 2, TOPLU_MAX_DIMS) || g->values[o->outputs[0]].dtype != TOPLU_DTYPE_FLOAT) continue;
    /* back from the Softmax's input: the mask, then the scale */
    int mask = -1, mi = -1, keep = 1, s = x;
    float fill = 0.f;
    int p = sole_producer(g, x);
    if (p < 0) continue;
    const toplu__node_t *pn = &g->nodes[p];
    if (is_op(pn, "Add") && pn->n_inputs == 2 && pn->n_outputs == 1) {
      for (int k = 0; k < 2 && mask < 0; k++) {
        int a = pn->inputs[k], b = pn->inputs[1 - k];
        int ap = sole_producer(g, a);
        if (ap < 0 || b < 0 || b == a || g->values[b].dtype != TOPLU_DTYPE_FLOAT) continue;
        if (!is_op(&g->nodes[ap], "MatMul") && !is_op(&g->nodes[ap], "Mul") && !is_op(&g->nodes[ap], "Div")) continue;
        mask = b, s = a;
      }
      if (mask < 0) continue;
      mi = p;
    } else if (is_op(pn, "Where") && pn->n_inputs == 3 && pn->n_outputs == 1) {
      int c = pn->inputs[0];
      if (c < 0 || g->values[c].dtype != TOPLU_DTYPE_BOOL) continue;
      if (const_scalar(g, pn->inputs[2], &fill) && sole_producer(g, pn->inputs[1]) >= 0) keep = 1, s = pn->inputs[1];
      else if (const_scalar(g, pn->inputs[1], &fill) && sole_producer(g, pn->inputs[2]) >= 0) keep = 0, s = pn->inputs[2];
      else continue;
      mask = c, mi = p;
    }
    if (s != x && g->values[s].ndim != r) continue; /* the mask widened the scores' rank */
    float scale = 1.f;
    int sc_node;
    int raw = unscaled(g, s, &scale, &sc_node);
    int mm = sole_producer(g, raw);
    if (mm < 0 || !is_op(&g->nodes[mm], "MatMul") || g->nodes[mm].n_inputs != 2 || g->nodes[mm].n_post) continue;
    float qscale = 1.f, kscale = 1.f;
    int q_node, k_node;
    int q = unscaled(g, g->nodes[mm].inputs[0], &qscale, &q_node);
    int kt = unscaled(g, g->nodes[mm].inputs[1], &kscale, &k_node);
    /* ranks: the kernel broadcasts every dim the unfused ops would (the
     * leading ones, and a mask's T and S over Q's and KT's), but takes no
     * rank-1 operand and no mask of higher rank than the scores */
    if (!float_rank(g, q, 2, r) || !float_rank(g, kt, 2, r) || g->values[raw].ndim != r) continue;
    if (mask >= 0 && (g->values[mask].ndim < 0 || g->values[mask].ndim > r)) continue;
    if (!(isfinite(scale * qscale * kscale))) continue;
    scale *= qscale * kscale;
    /* the final MatMul becomes the attention node */
    toplu__attr_t *attrs = calloc(3, sizeof *attrs);
    int *ins = malloc(4 * sizeof *ins), na = 0;
    if (!attrs || !ins || put_attr(attrs, &na, "scale", TOPLU_ATTR_FLOAT, scale, 0) ||
        (mask >= 0 && g->values[mask].dtype == TOPLU_DTYPE_BOOL &&
         (put_attr(attrs, &na, "mask_fill", TOPLU_ATTR_FLOAT, fill, 0) ||
          put_attr(attrs, &na, "mask_keep", TOPLU_ATTR_INT, 0.f, keep)))) {
      for (int k = 0; attrs && k < na; k++) toplu__attr_clear(&attrs[k]);
      free(attrs), free(ins);
      return toplu__errorf(err, TOPLU_ERR_OUT_OF_MEMORY, "out of memory");
    }
    if (set_op(o, "toplu", "ScaledDotProductAttention", sdpa)) {
      for (int k = 0; k < na; k++) toplu__attr_clear(&attrs[k]);
      free(attrs), free(ins);
      return toplu__errorf(err, TOPLU_ERR_OUT_OF_MEMORY, "out of memory");
    }
    ins[0] = q, ins[1] = kt, ins[2] = v, ins[3] = mask;
    install_attrs_inputs(o, attrs, na, ins, 4);
    int gone[6] = {q_node, k_node, mm, sc_node, mi, si};
    for (int k = 0; k < 6; k++) {
      if (gone[k] < 0) continue;
      g->nodes[gone[k]].dead = 1;
      if (fused_append(o, NULL, g->nodes[gone[k]].name))
        return toplu__errorf(err, TOPLU_ERR_OUT_OF_MEMORY, "out of memory");
    }
    toplu__graph_recount(g);
  }
  return TOPLU_OK;
}

/* Is node n a Transpose with exactly the 4 entries of perm? */
static int transpose_perm(const toplu__node_t *n, const int64_t want[4]) {
  if (!is_op(n, "Transpose") || n->n_inputs != 1 || n->n_outputs != 1) return 0;
  const int64_t *pv = NULL;
  if (toplu__node_attr_ints(n, "perm", &pv) != 4) return 0;
  for (int k = 0; k < 4; k++)
    if (pv[k] != want[k]) return 0;
  return 1;
}

/* Append integer attribute name = v to node n. */
static int append_int_attr(toplu__node_t *n, const char *name, int64_t v) {
  toplu__attr_t *a = realloc(n->attrs, (size_t)(n->n_attrs + 1) * sizeof *a);
  if (!a) return -1;
  n->attrs = a;
  return put_attr(a, &n->n_attrs, name, TOPLU_ATTR_INT, 0.f, v);
}

/*
 * The head transposes around an attention node (rank 4, as BERT and GPT-2
 * export multi-head attention):
 *   Q  = Transpose(q [B, T, H, d], perm 0,2,1,3)    KT = Transpose(k [B, S, H, d], perm 0,2,3,1)
 *   V  = Transpose(v [B, S, H, dv], perm 0,2,1,3)   Transpose(Y, perm 0,2,1,3) -> y [B, T, H, dv]
 * each read by the attention node alone, are dropped: the node reads q, k, v
 * and writes y in place, with attributes q_bshd, k_bshd, v_bshd, y_bshd = 1
 * (ops/onednn/attention.c walks the heads by strides; the products read and
 * write rows H x d apart).  No copy of Q, K, V or Y is made.
 */
static toplu_status_t fold_attention_transposes(toplu__graph_t *g, toplu_error_t *err) {
  static const int64_t heads[4] = {0, 2, 1, 3}, keys[4] = {0, 2, 3, 1};
  int changed = 0;
  for (int i = 0; i < g->n_nodes; i++) {
    toplu__node_t *a = &g->nodes[i];
    if (a->dead || strcmp(a->domain, "toplu") || strcmp(a->op_type, "ScaledDotProductAttention") || a->n_outputs != 1)
      continue;
    if (toplu__node_attr_int(a, "q_bshd", 0) || toplu__node_attr_int(a, "y_bshd", 0)) continue;
    int rank4 = g->values[a->outputs[0]].ndim == 4;
    for (int k = 0; k < 3; k++) rank4 &= a->inputs[k] >= 0 && g->values[a->inputs[k]].ndim == 4;
    if (!rank4) continue;
    static const char *const names[3] = {"q_bshd", "k_bshd", "v_bshd"};
    for (int k = 0; k < 3; k++) {
      int p = sole_producer(g, a->inputs[k]);
      if (p < 0 || !transpose_perm(&g->nodes[p], k == 1 ? keys : heads)) continue;
      int src = g->nodes[p].inputs[0];
      if (src < 0 || g->values[src].ndim != 4 || g->values[src].dtype != TOPLU_DTYPE_FLOAT) continue;
      if (append_int_attr(a, names[k], 1)) return toplu__errorf(err, TOPLU_ERR_OUT_OF_MEMORY, "out of memory");
      a->inputs[k] = src;
      g->nodes[p].dead = 1;
      if (fused_append(a, NULL, g->nodes[p].name)) return toplu__errorf(err, TOPLU_ERR_OUT_OF_MEMORY, "out of memory");
      changed = 1;
    }
    int ti;
    if (sole_reader(g, a->outputs[0], &ti) && transpose_perm(&g->nodes[ti], heads) &&
        g->nodes[ti].inputs[0] == a->outputs[0] && g->values[g->nodes[ti].outputs[0]].ndim == 4) {
      if (append_int_attr(a, "y_bshd", 1)) return toplu__errorf(err, TOPLU_ERR_OUT_OF_MEMORY, "out of memory");
      int y = g->nodes[ti].outputs[0];
      g->nodes[ti].dead = 1;
      g->values[a->outputs[0]].producer = -1;
      g->values[y].producer = i;
      a->outputs[0] = y;
      if (fused_append(a, NULL, g->nodes[ti].name)) return toplu__errorf(err, TOPLU_ERR_OUT_OF_MEMORY, "out of memory");
      changed = 1;
    }
  }
  if (changed) toplu__graph_recount(g);
  return TOPLU_OK;
}

/*
 * ONNX Runtime's dynamic quantization of a MatMul (quantize_dynamic, and
 * toplu quantize --dynamic):
 *   DynamicQuantizeLinear(x) -> (x_q, x_scale, x_zp)
 *   MatMulInteger(x_q, W, x_zp[, W_zp]) -> Cast(to float) -> Mul(., S)
 *   [-> Add(., bias)]       S = Mul(x_scale, w_scale), either order
 * with W a constant 2-D int8/uint8 tensor, w_scale a constant float [N] or
 * one, W_zp absent or constant, bias a constant float [N], every
 * intermediate read by the next node alone  ==>
 *   toplu.DynamicQuantizeMatMul(x, W, w_scale, W_zp, bias)
 * (ops/onednn/qmatmul.c: one oneDNN u8s8 matmul with runtime scales and zero
 * point; ops/quant_matmul.c: plain C).  The same operations in the same
 * float32 order, so the same bits as the unfused nodes.  The
 * DynamicQuantizeLinear dies when no other node reads it (Q, K and V
 * projections share one; each fused node quantizes x itself).
 */
static toplu_status_t fuse_dynamic_matmul(toplu__graph_t *g, toplu_error_t *err) {
  const toplu__schema_t *fs = toplu__schema_find("toplu", "DynamicQuantizeMatMul");
  if (!fs) return TOPLU_OK;
  for (int mi = 0; mi < g->n_nodes; mi++) {
    toplu__node_t *mm = &g->nodes[mi];
    if (!is_op(mm, "MatMulInteger") || mm->n_inputs < 3 || mm->n_outputs != 1) continue;
    int xq = mm->inputs[0], w = mm->inputs[1], xz = mm->inputs[2], wz = mm->n_inputs > 3 ? mm->inputs[3] : -1;
    int di = xq >= 0 ? g->values[xq].producer : -1;
    if (di < 0 || !is_op(&g->nodes[di], "DynamicQuantizeLinear") || g->nodes[di].n_outputs < 3) continue;
    const toplu__node_t *dq = &g->nodes[di];
    if (dq->outputs[0] != xq || dq->outputs[2] != xz || g->values[dq->inputs[0]].dtype != TOPLU_DTYPE_FLOAT) continue;
    const toplu_tensor_t *wt = is_const(g, w) ? &g->values[w].konst : NULL;
    if (!wt || wt->ndim != 2 || (wt->dtype != TOPLU_DTYPE_INT8 && wt->dtype != TOPLU_DTYPE_UINT8)) continue;
    int64_t n = wt->dims[1];
    if (wz >= 0 && (!is_const(g, wz) || g->values[wz].konst.dtype != wt->dtype || g->values[wz].konst.ndim > 1 ||
                    (toplu_tensor_numel(&g->values[wz].konst) != 1 && toplu_tensor_numel(&g->values[wz].konst) != n)))
      continue;
    int ci, ki;
    if (!sole_reader(g, mm->outputs[0], &ci) || !is_op(&g->nodes[ci], "Cast") ||
        toplu__node_attr_int(&g->nodes[ci], "to", 0) != TOPLU_DTYPE_FLOAT)
      continue;
    if (!sole_reader(g, g->nodes[ci].outputs[0], &ki) || !is_op(&g->nodes[ki], "Mul")) continue;
    int sv = other_input(&g->nodes[ki], g->nodes[ci].outputs[0]);
    int si = sv >= 0 ? g->values[sv].producer : -1;
    if (si < 0 || g->values[sv].graph_output || !is_op(&g->nodes[si], "Mul")) continue;
    int wsv = other_input(&g->nodes[si], dq->outputs[1]);
    if (wsv < 0 || wsv == dq->outputs[1] || !is_const(g, wsv) || g->values[wsv].konst.dtype != TOPLU_DTYPE_FLOAT ||
        g->values[wsv].konst.ndim > 1 ||
        (toplu_tensor_numel(&g->values[wsv].konst) != 1 && toplu_tensor_numel(&g->values[wsv].konst) != n))
      continue;
    int out = g->nodes[ki].outputs[0], ai = -1, bias = -1;
    if (sole_reader(g, out, &ai) && is_op(&g->nodes[ai], "Add") && g->nodes[ai].n_outputs == 1) {
      int bv = other_input(&g->nodes[ai], out);
      /* [..., N] + [N] keeps the shape */
      if (bv >= 0 && bv != out && float_const(g, bv, n) && g->values[bv].konst.ndim == 1 &&
          g->values[g->nodes[ai].outputs[0]].dtype == TOPLU_DTYPE_FLOAT) {
        bias = bv;
        out = g->nodes[ai].outputs[0];
      } else {
        ai = -1;
      }
    } else {
      ai = -1;
    }
    int x = dq->inputs[0];
    if (set_input_count(mm, 5) || set_op(mm, "toplu", "DynamicQuantizeMatMul", fs) ||
        fused_append(mm, "Cast", g->nodes[ci].name) || fused_append(mm, "Mul", g->nodes[ki].name) ||
        (ai >= 0 && fused_append(mm, "Add", g->nodes[ai].name)))
      return toplu__errorf(err, TOPLU_ERR_OUT_OF_MEMORY, "out of memory");
    mm->inputs[0] = x;
    mm->inputs[1] = w;
    mm->inputs[2] = wsv;
    mm->inputs[3] = wz;
    mm->inputs[4] = bias;
    mm->outputs[0] = out;
    g->nodes[ci].dead = 1;
    g->nodes[ki].dead = 1;
    if (ai >= 0) g->nodes[ai].dead = 1;
    toplu__graph_recount(g);
    if (g->values[sv].n_uses == 0) {
      g->nodes[si].dead = 1;
      toplu__graph_recount(g);
    }
    int used = 0;
    for (int k = 0; k < g->nodes[di].n_outputs; k++) {
      int o = g->nodes[di].outputs[k];
      used |= o >= 0 && (g->values[o].n_uses > 0 || g->values[o].graph_output);
    }
    if (!used) {
      g->nodes[di].dead = 1;
      toplu__graph_recount(g);
    }
  }
  return TOPLU_OK;
}

/* y = Mul(x, Sigmoid(x)) (SiLU as PyTorch exports it: x read by the Sigmoid and the Mul alone, the Sigmoid's
 * output by the Mul alone): 0 with the Sigmoid's and the Mul's node indices, else -1. */
static int swish_pattern(const toplu__graph_t *g, int x, int *si, int *mi) {
  int r[3];
  if (readers(g, x, r, 3) != 2 || g->values[x].graph_output) return -1;
  for (int k = 0; k < 2; k++) {
    const toplu__node_t *s = &g->nodes[r[k]], *m = &g->nodes[r[1 - k]];
    if (!is_op(s, "Sigmoid") || s->n_outputs != 1 || s->inputs[0] != x || !is_op(m, "Mul") || m->n_inputs != 2 ||
        m->n_outputs != 1)
      continue;
    int so = s->outputs[0], only;
    if (g->values[so].graph_output || !sole_reader(g, so, &only) || only != r[1 - k]) continue;
    if (!((m->inputs[0] == x && m->inputs[1] == so) || (m->inputs[0] == so && m->inputs[1] == x))) continue;
    if (!same_shape(&g->values[x], &g->values[m->outputs[0]])) continue;
    *si = r[k], *mi = r[1 - k];
    return 0;
  }
  return -1;
}

static int fusable_producer(const toplu__node_t *n) {
  if (!strcmp(n->domain, "toplu")) return !strcmp(n->op_type, "DynamicQuantizeMatMul");
  if (n->domain[0]) return 0;
  return !strcmp(n->op_type, "Conv") || !strcmp(n->op_type, "ConvTranspose") || !strcmp(n->op_type, "Gemm") ||
         !strcmp(n->op_type, "MatMul");
}

/* Does act (reading the producer's output as input 0) map to a post-op? */
static int activation_post(const toplu__graph_t *g, const toplu__node_t *act, toplu__post_op_t *po) {
  if (act->domain[0] || act->n_outputs != 1) return 0;
  const char *t = act->op_type;
  memset(po, 0, sizeof *po);
  if (!strcmp(t, "Relu")) po->kind = TOPLU_POST_RELU;
  else if (!strcmp(t, "LeakyRelu")) {
    po->kind = TOPLU_POST_LEAKY_RELU;
    po->alpha = toplu__node_attr_float(act, "alpha", 0.01f);
  } else if (!strcmp(t, "Sigmoid")) po->kind = TOPLU_POST_SIGMOID;
  else if (!strcmp(t, "Tanh")) po->kind = TOPLU_POST_TANH;
  else if (!strcmp(t, "HardSigmoid")) {
    po->kind = TOPLU_POST_HARD_SIGMOID;
    po->alpha = toplu__node_attr_float(act, "alpha", 0.2f);
    po->beta = toplu__node_attr_float(act, "beta", 0.5f);
  } else if (!strcmp(t, "HardSwish")) po->kind = TOPLU_POST_HARD_SWISH;
  else if (!strcmp(t, "Clip")) {
    po->kind = TOPLU_POST_CLIP;
    if (act->opset < 11) {
      po->alpha = toplu__node_attr_float(act, "min", -INFINITY);
      po->beta = toplu__node_attr_float(act, "max", INFINITY);
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

static int same_shape(const toplu__value_t *a, const toplu__value_t *b) {
  if (a->ndim < 0 || a->ndim != b->ndim || a->dtype != b->dtype) return 0;
  for (int i = 0; i < a->ndim; i++)
    if (a->dims[i] != b->dims[i]) return 0;
  return 1;
}

/*
 * Would post[0..n-1] reach oneDNN with no eltwise algorithm twice?  oneDNN
 * 2.6.3 gives the second eltwise post-op of one algorithm in a chain the
 * first one's alpha and beta (measured: Conv + Clip + Mul + Clip, Conv +
 * Relu + Mul + Relu + Mul and Conv + Clip + HardSigmoid came out wrong), so
 * a chain stops before it would repeat one; the node after stays a step of
 * its own.  As ops/onednn/onednn.c maps them: HardSigmoid is linear + clip,
 * and a linear right after a HardSigmoid folds into it.
 */
static int post_chain_ok(const toplu__post_op_t *post, int n) {
  enum { A_RELU = 1, A_CLIP = 2, A_LOGISTIC = 4, A_TANH = 8, A_LINEAR = 16, A_HSWISH = 32, A_GELU = 64, A_SWISH = 128 };
  unsigned seen = 0;
  for (int i = 0; i < n; i++) {
    unsigned a = 0;
    switch (post[i].kind) {
      case TOPLU_POST_RELU:
      case TOPLU_POST_LEAKY_RELU: a = A_RELU; break;
      case TOPLU_POST_CLIP: a = A_CLIP; break;
      case TOPLU_POST_SIGMOID: a = A_LOGISTIC; break;
      case TOPLU_POST_TANH: a = A_TANH; break;
      case TOPLU_POST_HARD_SIGMOID:
        a = A_LINEAR | A_CLIP;
        if (i + 1 < n && post[i + 1].kind == TOPLU_POST_LINEAR) i++;
        break;
      case TOPLU_POST_HARD_SWISH: a = A_HSWISH; break;
      case TOPLU_POST_SWISH: a = A_SWISH; break;
      case TOPLU_POST_LINEAR: a = A_LINEAR; break;
      case TOPLU_POST_GELU_ERF: a = A_GELU; break;
      default: break; /* sum, bias, the integer kinds: not eltwise */
    }
    if (seen & a) return 0;
    seen |= a;
  }
  return 1;
}

/* GELU with erf written out (gelu_pattern) that no step before it took as a post-op (its input comes from an
 * Add of a bias, a DequantizeLinear, a graph input)  ==>  one Gelu-20 node (approximate "none") in place of the
 * five: one pass over the tensor where there were five, and the erf of ops/fastmath.h.  ConvNeXt-T quantized by
 * toplu quantize has Add(bias) -> GELU between its MatMuls: 18 Erf steps took 46% of its batch-1 time. */
static toplu_status_t rewrite_gelu(toplu__graph_t *g, toplu_error_t *err) {
  const toplu__schema_t *schema = toplu__schema_find("", "Gelu");
  if (!schema) return TOPLU_OK;
  for (int y = 0; y < g->n_values; y++) {
    int gn[5];
    if (gelu_pattern(g, y, gn) < 0) continue;
    toplu_dtype_t dt = g->values[y].dtype;
    if (dt != TOPLU_DTYPE_FLOAT && dt != TOPLU_DTYPE_DOUBLE && dt != TOPLU_DTYPE_FLOAT16 && dt != TOPLU_DTYPE_BFLOAT16)
      continue;
    toplu__node_t *d = &g->nodes[gn[0]];
    int out = g->nodes[gn[4]].outputs[0];
    if (set_op(d, "", "Gelu", schema) || set_input_count(d, 1))
      return toplu__errorf(err, TOPLU_ERR_OUT_OF_MEMORY, "out of memory");
    for (int k = 0; k < 5; k++) /* the five nodes' names; the step is a plain Gelu */
      if (fused_append(d, NULL, g->nodes[gn[k]].name)) return toplu__errorf(err, TOPLU_ERR_OUT_OF_MEMORY, "out of memory");
    d->inputs[0] = y;
    d->outputs[0] = out;
    d->opset = 20;
    for (int k = 1; k < 5; k++) g->nodes[gn[k]].dead = 1;
    toplu__graph_recount(g);
  }
  return TOPLU_OK;
}

static toplu_status_t fuse_post_ops(toplu__graph_t *g, toplu_error_t *err) {
  for (int pi = 0; pi < g->n_nodes; pi++) {
    toplu__node_t *p = &g->nodes[pi];
    if (p->dead || !fusable_producer(p) || p->n_outputs < 1) continue;
    if (g->values[p->outputs[0]].dtype != TOPLU_DTYPE_FLOAT) continue;
    for (;;) {
      if (p->n_post >= TOPLU_MAX_POST) break;
      int gn[5];
      if (gelu_pattern(g, p->outputs[0], gn) >= 0) {
        toplu__post_op_t gp = {.kind = TOPLU_POST_GELU_ERF};
        p->post[p->n_post] = gp;
        if (!post_chain_ok(p->post, p->n_post + 1)) break;
        p->post[p->n_post++] = gp;
        p->outputs[0] = g->nodes[gn[4]].outputs[0];
        for (int k = 0; k < 5; k++) {
          g->nodes[gn[k]].dead = 1;
          if (fused_append(p, k ? NULL : "Gelu", g->nodes[gn[k]].name))
            return toplu__errorf(err, TOPLU_ERR_OUT_OF_MEMORY, "out of memory");
        }
        toplu__graph_recount(g);
        continue;
      }
      int si, mi;
      if (swish_pattern(g, p->outputs[0], &si, &mi) >= 0) { /* Mul(x, Sigmoid(x)): oneDNN's eltwise swish */
        toplu__post_op_t sp = {.kind = TOPLU_POST_SWISH};
        p->post[p->n_post] = sp;
        if (!post_chain_ok(p->post, p->n_post + 1)) break;
        p->post[p->n_post++] = sp;
        p->outputs[0] = g->nodes[mi].outputs[0];
        g->nodes[si].dead = g->nodes[mi].dead = 1;
        if (fused_append(p, "Sigmoid", g->nodes[si].name) || fused_append(p, "Mul", g->nodes[mi].name))
          return toplu__errorf(err, TOPLU_ERR_OUT_OF_MEMORY, "out of memory");
        toplu__graph_recount(g);
        continue;
      }
      int ai;
      if (!sole_reader(g, p->outputs[0], &ai)) break;
      toplu__node_t *a = &g->nodes[ai];
      toplu__post_op_t po;
      float sc;
      if (a->inputs[0] == p->outputs[0] && activation_post(g, a, &po)) {
        /* fall through to rewire */
      } else if (is_op(p, "MatMul") && !p->n_post && is_op(a, "Add") && a->n_inputs == 2 &&
                 g->values[p->outputs[0]].ndim >= 1 &&
                 bias_row(g, other_input(a, p->outputs[0]), g->values[p->outputs[0]].dims[g->values[p->outputs[0]].ndim - 1],
                          g->values[p->outputs[0]].ndim) &&
                 same_shape(&g->values[p->outputs[0]], &g->values[a->outputs[0]])) {
        /* MatMul + a row along the last axis: the matmul's bias */
        int *ni = realloc(p->inputs, (size_t)(p->n_inputs + 1) * sizeof(int));
        if (!ni) return toplu__errorf(err, TOPLU_ERR_OUT_OF_MEMORY, "out of memory");
        p->inputs = ni;
        memset(&po, 0, sizeof po);
        po.kind = TOPLU_POST_BIAS;
        po.input = p->n_inputs;
        p->inputs[p->n_inputs++] = other_input(a, p->outputs[0]);
      } else if ((p->n_post > 0 ? p->post[p->n_post - 1].kind != TOPLU_POST_SUM : is_op(p, "MatMul")) &&
                 (is_op(a, "Mul") || is_op(a, "Add") || is_op(a, "Sub") || is_op(a, "Div")) &&
                 const_scalar(g, other_input(a, p->outputs[0]), &sc) &&
                 (a->inputs[0] == p->outputs[0] || is_op(a, "Mul") || is_op(a, "Add")) &&
                 g->values[a->outputs[0]].ndim == g->values[p->outputs[0]].ndim) {
        /* y * s, y + s, y - s, y / s after an activation: a linear post-op */
        memset(&po, 0, sizeof po);
        po.kind = TOPLU_POST_LINEAR;
        po.alpha = is_op(a, "Mul") ? sc : is_op(a, "Div") ? 1.f / sc : 1.f;
        po.beta = is_op(a, "Add") ? sc : is_op(a, "Sub") ? -sc : 0.f;
        int e2;
        if (is_op(a, "Div") && !(sc != 0.f && fabsf(frexpf(sc, &e2)) == 0.5f)) break; /* x/s == x*(1/s) only for powers of 2 */
        toplu__post_op_t *last = p->n_post > 0 ? &p->post[p->n_post - 1] : NULL;
        if (last && last->kind == TOPLU_POST_LINEAR) {
          /* merge: alpha2 (alpha1 x + beta1) + beta2 */
          last->beta = po.alpha * last->beta + po.beta;
          last->alpha *= po.alpha;
          p->outputs[0] = a->outputs[0];
          a->dead = 1;
          if (set_fused_name(p, a)) return toplu__errorf(err, TOPLU_ERR_OUT_OF_MEMORY, "out of memory");
          toplu__graph_recount(g);
          continue;
        }
      } else if (!strcmp(a->op_type, "Add") && !a->domain[0] && a->n_inputs == 2 &&
                 ((!strcmp(p->op_type, "Conv") && !p->n_post) || (!strcmp(p->op_type, "DynamicQuantizeMatMul") && !p->n_post) ||
                  (!strcmp(p->op_type, "MatMul") && (!p->n_post || (p->n_post == 1 && p->post[0].kind == TOPLU_POST_BIAS))))) {
        int other = a->inputs[0] == p->outputs[0] ? a->inputs[1] : a->inputs[0];
        if (other == p->outputs[0] || other < 0) break;
        if (!same_shape(&g->values[other], &g->values[a->outputs[0]]) ||
            !same_shape(&g->values[p->outputs[0]], &g->values[a->outputs[0]]))
          break;
        int prod = g->values[other].producer;
        if (prod >= pi) break; /* must exist before the Conv runs */
        int conv = !strcmp(p->op_type, "Conv"); /* Conv's input 2 is its bias: the addend goes after it */
        int *ni = realloc(p->inputs, (size_t)(p->n_inputs + 1 + (conv ? 3 : 0)) * sizeof(int));
        if (!ni) return toplu__errorf(err, TOPLU_ERR_OUT_OF_MEMORY, "out of memory");
        p->inputs = ni;
        while (conv && p->n_inputs < 3) p->inputs[p->n_inputs++] = -1;
        p->inputs[p->n_inputs] = other;
        memset(&po, 0, sizeof po);
        po.kind = TOPLU_POST_SUM;
        po.input = p->n_inputs;
        p->n_inputs++;
      } else {
        break;
      }
      p->post[p->n_post] = po;
      if (!post_chain_ok(p->post, p->n_post + 1)) break; /* only eltwise kinds can fail it: no operand was added */
      p->post[p->n_post++] = po;
      p->outputs[0] = a->outputs[0];
      a->dead = 1;
      if (set_fused_name(p, a)) return toplu__errorf(err, TOPLU_ERR_OUT_OF_MEMORY, "out of memory");
      toplu__graph_recount(g);
    }
  }
  return TOPLU_OK;
}

/* Conv attribute name has exactly n values, each equal to v (absent: dflt for all). */
static int conv_ints_all(const toplu__node_t *n, const char *name, int cnt, int64_t v, int64_t dflt) {
  const int64_t *vals = NULL;
  int64_t k = toplu__node_attr_ints(n, name, &vals);
  if (k < 0) return dflt == v;
  if (k != cnt) return 0;
  for (int i = 0; i < cnt; i++)
    if (vals[i] != v) return 0;
  return 1;
}

/* A float Conv (2-D, constant weights [M, C/group, k, k], explicit pads,
 * no residual addend, only activation post-ops) with kernel k, group and
 * every stride equal to stride, every pad to pad, dilations 1. */
static int plain_conv2d(const toplu__graph_t *g, const toplu__node_t *c, int64_t k, int64_t group, int64_t stride,
                        int64_t pad) {
  if (!is_op(c, "Conv") || c->n_inputs < 2 || c->n_inputs > 3 || c->n_outputs != 1) return 0;
  int w = c->inputs[1];
  if (!is_const(g, w) || g->values[w].konst.dtype != TOPLU_DTYPE_FLOAT || g->values[w].ndim != 4) return 0;
  const int64_t *wd = g->values[w].dims;
  if (wd[2] != k || wd[3] != k) return 0;
  if (c->inputs[0] < 0 || g->values[c->inputs[0]].ndim != 4 || g->values[c->inputs[0]].dtype != TOPLU_DTYPE_FLOAT)
    return 0;
  if (c->n_inputs == 3 && c->inputs[2] >= 0 && !float_const(g, c->inputs[2], wd[0])) return 0;
  const char *ap = toplu__node_attr_string(c, "auto_pad", "NOTSET");
  if (strcmp(ap, "NOTSET")) return 0;
  if (toplu__node_attr_int(c, "group", 1) != group) return 0;
  if (!conv_ints_all(c, "strides", 2, stride, 1) || !conv_ints_all(c, "pads", 4, pad, 0) ||
      !conv_ints_all(c, "dilations", 2, 1, 1) || !conv_ints_all(c, "kernel_shape", 2, k, k))
    return 0;
  for (int i = 0; i < c->n_post; i++) {
    toplu__post_kind_t kd = c->post[i].kind;
    if (kd == TOPLU_POST_SUM || kd == TOPLU_POST_BIAS || kd == TOPLU_POST_MIN_CHANNEL || kd == TOPLU_POST_QSUM) return 0;
  }
  return 1;
}

/*
 * The expansion and depthwise layers of an inverted residual block
 * (MobileNetV2): Conv 1x1 (stride 1, no pads) [+ activations] whose output
 * only a depthwise Conv 3x3 (group = its channels, stride 1 or 2, pads 1)
 * [+ activations] reads  ==>  one toplu.PointwiseDepthwiseConv(X, W, B,
 * W_dw, B_dw) with attributes dw_stride and post_split (graph/schema_conv.c),
 * the 1x1's post-ops then the depthwise one's.  ops/onednn/conv_dw.c runs it
 * as the two convolutions, or on request as oneDNN's 1x1 convolution with a
 * depthwise post-op (the expanded tensor is never written to memory).  Not
 * with TOPLU_FUSE_NO_DEPTHWISE.
 */
static toplu_status_t fuse_pointwise_depthwise(toplu__graph_t *g, toplu_error_t *err) {
  const toplu__schema_t *sch = toplu__schema_find("toplu", "PointwiseDepthwiseConv");
  if (!sch) return TOPLU_OK;
  int changed = 0;
  for (int pi = 0; pi < g->n_nodes; pi++) {
    toplu__node_t *p = &g->nodes[pi];
    if (!plain_conv2d(g, p, 1, 1, 1, 0)) continue;
    int m = (int)g->values[p->inputs[1]].dims[0], di;
    if (!sole_reader(g, p->outputs[0], &di)) continue;
    toplu__node_t *d = &g->nodes[di];
    if (d->inputs[0] != p->outputs[0]) continue;
    int s1 = plain_conv2d(g, d, 3, m, 1, 1), s2 = !s1 && plain_conv2d(g, d, 3, m, 2, 1);
    if (!s1 && !s2) continue;
    if (g->values[d->inputs[1]].dims[0] != m || g->values[d->inputs[1]].dims[1] != 1) continue;
    if (p->n_post + d->n_post > TOPLU_MAX_POST) continue;
    /* "Conv+Clip+DepthwiseConv+Clip": the depthwise node's own label with its op type renamed */
    char dw_label[256];
    const char *dpost = d->fused_name && !strncmp(d->fused_name, "Conv", 4) ? d->fused_name + 4 : "";
    snprintf(dw_label, sizeof dw_label, "DepthwiseConv%s", dpost);
    toplu__attr_t *attrs = calloc(2, sizeof *attrs);
    int *ins = malloc(5 * sizeof *ins), na = 0;
    if (!attrs || !ins || put_attr(attrs, &na, "dw_stride", TOPLU_ATTR_INT, 0.f, s1 ? 1 : 2) ||
        put_attr(attrs, &na, "post_split", TOPLU_ATTR_INT, 0.f, p->n_post) ||
        fused_append(p, dw_label, d->name) ||
        (d->fused_nodes && fused_append(p, NULL, d->fused_nodes)) ||
        set_op(p, "toplu", "PointwiseDepthwiseConv", sch)) {
      for (int k = 0; attrs && k < na; k++) toplu__attr_clear(&attrs[k]);
      free(attrs), free(ins);
      return toplu__errorf(err, TOPLU_ERR_OUT_OF_MEMORY, "out of memory");
    }
    ins[0] = p->inputs[0];
    ins[1] = p->inputs[1];
    ins[2] = p->n_inputs > 2 ? p->inputs[2] : -1;
    ins[3] = d->inputs[1];
    ins[4] = d->n_inputs > 2 ? d->inputs[2] : -1;
    install_attrs_inputs(p, attrs, na, ins, 5);
    for (int k = 0; k < d->n_post; k++) p->post[p->n_post++] = d->post[k];
    g->values[p->outputs[0]].producer = -1;
    p->outputs[0] = d->outputs[0];
    g->values[d->outputs[0]].producer = pi;
    d->dead = 1;
    changed = 1;
  }
  if (changed) toplu__graph_recount(g);
  return TOPLU_OK;
}

/* 1 when post-ops [from, to) of n are none, one Clip or one Relu (what the own pointwise + depthwise
 * kernel applies in registers). */
static int clamp_range(const toplu__node_t *n, int from, int to) {
  if (to - from > 1) return 0;
  return to == from || n->post[from].kind == TOPLU_POST_CLIP || n->post[from].kind == TOPLU_POST_RELU;
}

/* The 1x1 Conv (stride 1, no pads, group 1, constant float weights [Co, m, 1, 1], bias constant or none)
 * that alone reads v, node pi's output, with activations and at most one residual addend (a SUM post-op,
 * fuse_post_ops' Conv + Add) that exists before node pi runs: 1 with its index in *ci and the addend's value
 * in *residual (-1: none). */
static int pointwise_reader(const toplu__graph_t *g, int pi, int v, int64_t m, int *ci, int *residual) {
  if (!sole_reader(g, v, ci)) return 0;
  const toplu__node_t *c = &g->nodes[*ci];
  if (!is_op(c, "Conv") || c->n_inputs < 2 || c->n_inputs > 4 || c->n_outputs != 1 || c->inputs[0] != v) return 0;
  const int w = c->inputs[1];
  if (!is_const(g, w) || g->values[w].konst.dtype != TOPLU_DTYPE_FLOAT || g->values[w].ndim != 4) return 0;
  const int64_t *wd = g->values[w].dims, co = wd[0];
  if (wd[1] != m || wd[2] != 1 || wd[3] != 1) return 0;
  if (c->n_inputs > 2 && c->inputs[2] >= 0 && !float_const(g, c->inputs[2], co)) return 0;
  if (strcmp(toplu__node_attr_string(c, "auto_pad", "NOTSET"), "NOTSET") || toplu__node_attr_int(c, "group", 1) != 1 ||
      !conv_ints_all(c, "strides", 2, 1, 1) || !conv_ints_all(c, "pads", 4, 0, 0) ||
      !conv_ints_all(c, "dilations", 2, 1, 1) || !conv_ints_all(c, "kernel_shape", 2, 1, 1))
    return 0;
  *residual = -1;
  for (int k = 0; k < c->n_post; k++) {
    const toplu__post_kind_t kd = c->post[k].kind;
    if (kd == TOPLU_POST_SUM && *residual < 0 && c->post[k].input == 3 && c->n_inputs == 4) *residual = c->inputs[3];
    else if (kd == TOPLU_POST_SUM || kd == TOPLU_POST_BIAS || kd == TOPLU_POST_MIN_CHANNEL || kd == TOPLU_POST_QSUM)
      return 0;
  }
  if (c->n_inputs == 4 && *residual < 0) return 0;
  if (*residual >= 0) {
    const toplu__value_t *r = &g->values[*residual];
    if (r->producer >= pi || r->dtype != TOPLU_DTYPE_FLOAT) return 0; /* must exist when the block runs */
  }
  return 1;
}

/* After pointwise_reader: node hi takes over node ci (that 1x1 Conv), whose inputs it already lists: ci's
 * post-ops after its own (a SUM's addend now its input sum_at), ci's output, and ci dies. */
static void absorb_pointwise(toplu__graph_t *g, int hi, int ci, int sum_at) {
  toplu__node_t *h = &g->nodes[hi], *c = &g->nodes[ci];
  for (int k = 0; k < c->n_post; k++) {
    h->post[h->n_post] = c->post[k];
    if (c->post[k].kind == TOPLU_POST_SUM) h->post[h->n_post].input = sum_at;
    h->n_post++;
  }
  g->values[h->outputs[0]].producer = -1;
  h->outputs[0] = c->outputs[0];
  g->values[c->outputs[0]].producer = hi;
  c->dead = 1;
}

/*
 * An inverted residual block's projection (MobileNetV2): a
 * toplu.PointwiseDepthwiseConv whose output only a 1x1 Conv (stride 1, no
 * pads, group 1, constant weights) reads, that Conv with activations and at
 * most one residual addend (a SUM post-op, fuse_post_ops' Conv + Add)  ==>
 * the PointwiseDepthwiseConv with inputs 5-7 W_pj, B_pj, R and attribute
 * pj_split (graph/schema_conv.c): ops/onednn/pwdw_own.c then runs the 1x1
 * on each band of the depthwise output while it is in cache, so the
 * block's widest tensor after E never goes to memory either.  Only where
 * that own kernel is the one the block gets (TOPLU_FUSE_DW_PROJECT: a CPU
 * with AVX-512, where X arrives channels last; E as large per image as
 * toplu__pwdw_own_expand_ok asks; Clip, Relu or nothing after each of the
 * first two convolutions), since oneDNN's ways have no third step.
 * The addend must exist before the block runs (produced by an earlier node,
 * a graph input or a constant).
 */
static toplu_status_t fuse_dw_projection(toplu__graph_t *g, toplu_error_t *err) {
  int changed = 0;
  for (int pi = 0; pi < g->n_nodes; pi++) {
    toplu__node_t *p = &g->nodes[pi];
    if (p->dead || strcmp(p->domain, "toplu") || strcmp(p->op_type, "PointwiseDepthwiseConv") || p->n_inputs > 5) continue;
    const int split = (int)toplu__node_attr_int(p, "post_split", 0);
    if (split < 0 || split > p->n_post || !clamp_range(p, 0, split) || !clamp_range(p, split, p->n_post)) continue;
    const toplu__value_t *x = &g->values[p->inputs[0]];
    const int64_t m = g->values[p->inputs[1]].dims[0];
    const int64_t ds = toplu__node_attr_int(p, "dw_stride", 1);
    if (x->ndim != 4 || x->dims[2] <= 0 || x->dims[3] <= 0 || ds < 1 ||
        !toplu__pwdw_own_expand_ok(x->dims[2], x->dims[3], m, ds))
      continue;
    int ci, residual;
    if (!pointwise_reader(g, pi, p->outputs[0], m, &ci, &residual)) continue;
    toplu__node_t *c = &g->nodes[ci];
    const int w = c->inputs[1];
    if (p->n_post + c->n_post > TOPLU_MAX_POST) continue;
    toplu__attr_t *attrs = calloc((size_t)p->n_attrs + 1, sizeof *attrs);
    int *ins = malloc(8 * sizeof *ins), na = 0;
    int fail = !attrs || !ins;
    for (int k = 0; !fail && k < p->n_attrs; k++)
      fail = put_attr(attrs, &na, p->attrs[k].name, p->attrs[k].type, p->attrs[k].f, p->attrs[k].i) != 0;
    if (!fail) fail = put_attr(attrs, &na, "pj_split", TOPLU_ATTR_INT, 0.f, p->n_post) != 0;
    if (!fail) fail = fused_append(p, c->fused_name ? c->fused_name : c->op_type, c->name) != 0;
    if (!fail && c->fused_nodes) fail = fused_append(p, NULL, c->fused_nodes) != 0;
    if (fail) {
      for (int k = 0; attrs && k < na; k++) toplu__attr_clear(&attrs[k]);
      free(attrs), free(ins);
      return toplu__errorf(err, TOPLU_ERR_OUT_OF_MEMORY, "out of memory");
    }
    for (int k = 0; k < 5; k++) ins[k] = k < p->n_inputs ? p->inputs[k] : -1;
    ins[5] = w;
    ins[6] = c->n_inputs > 2 ? c->inputs[2] : -1;
    ins[7] = residual;
    install_attrs_inputs(p, attrs, na, ins, 8);
    absorb_pointwise(g, pi, ci, 7);
    changed = 1;
  }
  if (changed) toplu__graph_recount(g);
  return TOPLU_OK;
}

/*
 * A depthwise separable pair the pointwise + depthwise rewrite left (no 1x1
 * expansion before the depthwise Conv: MobileNetV2's first block,
 * MobileNetV1's layers): a depthwise Conv 3x3 (group = channels, stride 1
 * or 2, pads 1) [+ Clip | Relu] whose output only a 1x1 Conv [+ residual
 * Add] [+ activations] reads  ==>  one toplu.DepthwisePointwiseConv(X,
 * W_dw, B_dw, W_pw, B_pw, R) with attributes dw_stride and post_split
 * (graph/schema_conv.c), run by the own kernel (ops/onednn/pwdw_own.h):
 * the depthwise output D never goes to memory.  Under the same conditions
 * as the projection (TOPLU_FUSE_DW_PROJECT; D's size per image, as
 * toplu__pwdw_own_size_ok asks of E).
 */
static toplu_status_t fuse_depthwise_pointwise(toplu__graph_t *g, toplu_error_t *err) {
  const toplu__schema_t *sch = toplu__schema_find("toplu", "DepthwisePointwiseConv");
  if (!sch) return TOPLU_OK;
  int changed = 0;
  for (int di = 0; di < g->n_nodes; di++) {
    toplu__node_t *d = &g->nodes[di];
    if (!is_op(d, "Conv") || d->inputs[0] < 0) continue;
    const toplu__value_t *x = &g->values[d->inputs[0]];
    if (x->ndim != 4 || x->dims[1] <= 0) continue;
    const int64_t c = x->dims[1];
    const int s1 = plain_conv2d(g, d, 3, c, 1, 1), s2 = !s1 && plain_conv2d(g, d, 3, c, 2, 1);
    if (!s1 && !s2) continue;
    if (g->values[d->inputs[1]].dims[0] != c || g->values[d->inputs[1]].dims[1] != 1) continue;
    if (!clamp_range(d, 0, d->n_post)) continue;
    const toplu__value_t *y = &g->values[d->outputs[0]];
    if (y->ndim != 4 || y->dims[2] <= 0 || y->dims[3] <= 0 || !toplu__pwdw_own_size_ok(y->dims[2], y->dims[3], c))
      continue;
    int ci, residual;
    if (!pointwise_reader(g, di, d->outputs[0], c, &ci, &residual)) continue;
    toplu__node_t *pw = &g->nodes[ci];
    if (d->n_post + pw->n_post > TOPLU_MAX_POST) continue;
    char label[256];
    snprintf(label, sizeof label, "DepthwiseConv%s", d->fused_name && !strncmp(d->fused_name, "Conv", 4) ? d->fused_name + 4 : "");
    toplu__attr_t *attrs = calloc(2, sizeof *attrs);
    int *ins = malloc(6 * sizeof *ins), na = 0;
    int fail = !attrs || !ins || put_attr(attrs, &na, "dw_stride", TOPLU_ATTR_INT, 0.f, s1 ? 1 : 2) ||
               put_attr(attrs, &na, "post_split", TOPLU_ATTR_INT, 0.f, d->n_post);
    /* the node keeps the depthwise Conv's name and fused nodes; its label reads DepthwiseConv+Clip+Conv[+Add] */
    char *lab = fail ? NULL : malloc(strlen(label) + 1);
    if (!fail && (!lab || set_op(d, "toplu", "DepthwisePointwiseConv", sch))) fail = 1;
    if (fail) free(lab);
    else {
      free(d->fused_name);
      d->fused_name = strcpy(lab, label);
    }
    if (!fail) fail = fused_append(d, pw->fused_name ? pw->fused_name : pw->op_type, pw->name) != 0;
    if (!fail && pw->fused_nodes) fail = fused_append(d, NULL, pw->fused_nodes) != 0;
    if (fail) {
      for (int k = 0; attrs && k < na; k++) toplu__attr_clear(&attrs[k]);
      free(attrs), free(ins);
      return toplu__errorf(err, TOPLU_ERR_OUT_OF_MEMORY, "out of memory");
    }
    ins[0] = d->inputs[0];
    ins[1] = d->inputs[1];
    ins[2] = d->n_inputs > 2 ? d->inputs[2] : -1;
    ins[3] = pw->inputs[1];
    ins[4] = pw->n_inputs > 2 ? pw->inputs[2] : -1;
    ins[5] = residual;
    install_attrs_inputs(d, attrs, na, ins, 6);
    absorb_pointwise(g, di, ci, 5);
    changed = 1;
  }
  if (changed) toplu__graph_recount(g);
  return TOPLU_OK;
}

toplu_status_t toplu__graph_fuse(toplu__graph_t *g, unsigned flags, toplu_error_t *err) {
  toplu_status_t st = rewrite_hardswish(g, err);
  if (!st) st = rewrite_hardsigmoid_mul(g, err);
  if (!st) st = fold_batchnorm(g, err);
  if (!st) st = fold_conv_affine(g, err);
  if (!st) st = rewrite_layernorm(g, err);
  if (!st && !(flags & TOPLU_FUSE_NO_ATTENTION)) st = rewrite_attention(g, err);
  if (!st && !(flags & TOPLU_FUSE_NO_ATTENTION)) st = fold_attention_transposes(g, err);
  if (!st) st = fuse_dynamic_matmul(g, err);
  if (!st) st = fuse_post_ops(g, err);
  if (!st) st = rewrite_gelu(g, err);
  if (!st && !(flags & TOPLU_FUSE_NO_DEPTHWISE)) st = fuse_pointwise_depthwise(g, err);
  if (!st && !(flags & TOPLU_FUSE_NO_DEPTHWISE) && (flags & TOPLU_FUSE_DW_PROJECT)) st = fuse_dw_projection(g, err);
  if (!st && !(flags & TOPLU_FUSE_NO_DEPTHWISE) && (flags & TOPLU_FUSE_DW_PROJECT)) st = fuse_depthwise_pointwise(g, err);
  if (!st && (flags & TOPLU_FUSE_QDQ_CONV)) st = fuse_qlinear_conv(g, (flags & TOPLU_FUSE_QDQ_INT8_ALL) != 0, err);
  if (!st && (flags & TOPLU_FUSE_QDQ_CONV)) st = fuse_qdq_matmul(g, err);
  if (!st) st = int8_elementwise(g, err);
  if (!st && !(flags & TOPLU_FUSE_NO_QDQ_LOOKUP)) st = int8_lookup(g, err);
  if (!st) st = fold_into_qconv(g, err);
  if (!st && !(flags & TOPLU_FUSE_NO_QDQ_RESIDUAL)) st = fuse_qdq_residual(g, err);
  if (!st) st = qdq_binary(g, err);
  if (!st) st = fuse_qdq(g, err);
  return st;
}
