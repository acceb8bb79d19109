/* runtime/model.c - toplu_model_t: load, optimise, describe. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>

#include "core/cpu.h"
#include "core/error.h"
#include "graph/fuse.h"
#include "graph/infer.h"
#include "graph/upcast.h"
#include "onnx/onnx_model.h"
#include "ops/fastmath.h"
#include "ops/kernel.h"
#include "runtime/model_internal.h"
#include "runtime/plan.h"

static char *dupstr(const char *s) {
  size_t n = strlen(s ? s : "");
  char *d = malloc(n + 1);
  if (d) memcpy(d, s ? s : "", n + 1);
  return d;
}

static void fill_info(const toplu__graph_t *g, int v, toplu_value_info_t *info) {
  const toplu__value_t *val = &g->values[v];
  info->name = val->name;
  info->dtype = val->kind == TOPLU_KIND_TENSOR ? val->dtype : val->elem_dtype;
  info->kind = val->kind;
  info->elem_kind = val->kind == TOPLU_KIND_OPTIONAL ? val->elem_kind : val->kind;
  info->ndim = val->ndim;
  for (int d = 0; d < val->ndim && d < TOPLU_MAX_DIMS; d++) {
    if (val->dims[d] >= 0) {
      info->dims[d] = val->dims[d];
      info->dim_names[d] = NULL;
    } else {
      info->dims[d] = -1;
      info->dim_names[d] = toplu__graph_symbol_name(g, TOPLU_SYM_ID(val->dims[d]));
    }
  }
}

/* For a model whose file fixes dim 0 of its inputs to b: make dim 0 of those
 * inputs a symbol, and constant Reshape targets that start with b start with
 * 0 (copy dim 0) instead.  Whether the result really keeps rows apart is
 * checked per plan (runtime/session.c). */
static toplu_status_t free_batch_dim(toplu__graph_t *g, int64_t b, toplu_error_t *err) {
  int sym = toplu__graph_symbol(g, "toplu_batch");
  if (sym < 0) return toplu__errorf(err, TOPLU_ERR_OUT_OF_MEMORY, "out of memory");
  for (int i = 0; i < g->n_inputs; i++) {
    toplu__value_t *v = &g->values[g->inputs[i]];
    if (v->ndim >= 1 && v->dims[0] == b) v->dims[0] = TOPLU_SYM(sym);
  }
  for (int ni = 0; ni < g->n_nodes; ni++) {
    toplu__node_t *n = &g->nodes[ni];
    if (strcmp(n->op_type, "Reshape") || n->n_inputs < 2 || n->inputs[1] < 0) continue;
    if (toplu__node_attr_int(n, "allowzero", 0)) continue;
    toplu__value_t *shape = &g->values[n->inputs[1]];
    if (!shape->konst.data || shape->konst.dtype != TOPLU_DTYPE_INT64 || shape->konst.ndim != 1 ||
        shape->konst.dims[0] < 1 || ((int64_t *)shape->konst.data)[0] != b)
      continue;
    /* A private copy: the same constant may feed other nodes. */
    char name[600];
    snprintf(name, sizeof name, "%s::toplu_batch_free", shape->name);
    int nv = toplu__graph_add_value(g, name);
    if (nv < 0) return toplu__errorf(err, TOPLU_ERR_OUT_OF_MEMORY, "out of memory");
    shape = &g->values[n->inputs[1]]; /* values may have moved */
    toplu__value_t *c = &g->values[nv];
    c->dtype = shape->dtype;
    c->ndim = shape->ndim;
    memcpy(c->dims, shape->dims, sizeof c->dims);
    c->konst = shape->konst;
    size_t bytes = toplu_tensor_nbytes(&shape->konst);
    c->konst.data = malloc(bytes);
    if (!c->konst.data) return toplu__errorf(err, TOPLU_ERR_OUT_OF_MEMORY, "out of memory");
    memcpy(c->konst.data, shape->konst.data, bytes);
    ((int64_t *)c->konst.data)[0] = 0;
    n->inputs[1] = nv;
  }
  toplu__graph_recount(g);
  return TOPLU_OK;
}

/* Parameters of g and of every subgraph inside it (If's branches, Loop's and
 * Scan's bodies hold their own initializers and Constants): initializers
 * and Constant tensors, each counted once where it is stored. */
static void count_params(const toplu__onnx_model_t *g, toplu_model_t *m) {
  for (int i = 0; i < g->n_initializers; i++) {
    m->param_count += toplu_tensor_numel(&g->initializers[i].t);
    m->param_bytes += (int64_t)toplu_tensor_nbytes(&g->initializers[i].t);
  }
  for (int i = 0; i < g->n_nodes; i++) {
    const toplu__onnx_node_t *n = &g->nodes[i];
    for (int a = 0; a < n->n_attrs; a++) {
      const toplu__attr_t *at = &n->attrs[a];
      if (at->type == TOPLU_ATTR_TENSOR && !strcmp(n->op_type, "Constant")) {
        m->param_count += toplu_tensor_numel(&at->t);
        m->param_bytes += (int64_t)toplu_tensor_nbytes(&at->t);
      } else if (at->type == TOPLU_ATTR_GRAPH && at->g) {
        count_params(at->g, m);
      }
    }
  }
}

/* 1 when the file's producer is a framework whose resize with align_corners
 * computes with the integer output length (PyTorch's exporter writes
 * "pytorch"; tf2onnx, keras2onnx and Paddle2ONNX theirs), as ONNX Runtime
 * does for every model; the ONNX reference uses the unrounded in * scale
 * (ops/resize.c). */
/* 1 when an inverted residual block's projection may join its pointwise + depthwise step
 * (TOPLU_FUSE_DW_PROJECT): on a CPU with AVX-512, where oneDNN's convolutions write channels last and the
 * own kernel (ops/onednn/pwdw_own.h), the only one that runs the projection, takes the block; not while
 * TOPLU_CONV_DW forces oneDNN's fused or separate way (A/B runs). */
static int dw_project_ok(void) {
  const char *mode = getenv("TOPLU_CONV_DW");
  return toplu__cpu_avx512_ok() && (!mode || !*mode || !strcmp(mode, "own"));
}

static int exported_by_framework(const char *producer) {
  /* converters, and the tools that re-save their models under their own name (ONNX Runtime's quantize_static and
   * quantize_dynamic write "onnx.quantize", its transformers optimizer "onnxruntime.transformers": a PyTorch model
   * quantized there changed numbers, a fresh user's finding of 2026-12-06) */
  static const char *const names[] = {"pytorch", "tf2onnx", "keras2onnx", "paddle2onnx", "PaddlePaddle",
                                      "onnx.quantize", "onnxruntime.transformers", NULL};
  if (!producer) return 0;
  for (int k = 0; names[k]; k++)
    if (!strcasecmp(producer, names[k])) return 1;
  return 0;
}

/* Its Resize nodes with coordinate_transformation_mode align_corners get the
 * internal attribute toplu_output_length = 1 (ops/resize.c reads it). */
static toplu_status_t mark_output_length(toplu__graph_t *g, toplu_error_t *err) {
  for (int i = 0; i < g->n_nodes; i++) {
    toplu__node_t *n = &g->nodes[i];
    if (strcmp(n->op_type, "Resize") || n->domain[0] || n->attrs_shared ||
        strcmp(toplu__node_attr_string(n, "coordinate_transformation_mode", ""), "align_corners"))
      continue;
    toplu__attr_t *a = realloc(n->attrs, (size_t)(n->n_attrs + 1) * sizeof *a);
    if (!a) return toplu__errorf(err, TOPLU_ERR_OUT_OF_MEMORY, "out of memory");
    n->attrs = a;
    memset(&a[n->n_attrs], 0, sizeof a[0]);
    if (!(a[n->n_attrs].name = dupstr("toplu_output_length")))
      return toplu__errorf(err, TOPLU_ERR_OUT_OF_MEMORY, "out of memory");
    a[n->n_attrs].type = TOPLU_ATTR_INT;
    a[n->n_attrs].i = 1;
    n->n_attrs++;
  }
  return TOPLU_OK;
}

static toplu_status_t build_graph(const unsigned char *data, size_t size, const char *name, const char *base_dir,
                                  const toplu_model_options_t *opts, int64_t batch_free, toplu_model_t *m,
                                  toplu__graph_t **out, toplu_error_t *err) {
  toplu__onnx_model_t *om = NULL;
  toplu_status_t st = toplu__onnx_decode(data, size, name, base_dir, &om, err);
  if (st) return st;
  if (m && !batch_free) {
    /* What the file says, before optimisation. */
    m->ir_version = om->ir_version;
    char prod[512];
    snprintf(prod, sizeof prod, "%s%s%s", om->producer_name, om->producer_version[0] ? " " : "",
             om->producer_version);
    m->producer = dupstr(prod);
    m->n_nodes_file = om->n_nodes;
    count_params(om, m);
    m->hist = calloc((size_t)om->n_nodes + 1, sizeof *m->hist);
    if (!m->hist || !m->producer) {
      toplu__onnx_model_free(om);
      return toplu__errorf(err, TOPLU_ERR_OUT_OF_MEMORY, "out of memory");
    }
    for (int i = 0; i < om->n_nodes; i++) {
      const toplu__onnx_node_t *n = &om->nodes[i];
      int k;
      for (k = 0; k < m->n_hist; k++)
        if (!strcmp(m->hist[k].op_type, n->op_type)) break;
      if (k == m->n_hist) {
        m->hist[k].op_type = dupstr(n->op_type);
        if (!m->hist[k].op_type) {
          toplu__onnx_model_free(om);
          return toplu__errorf(err, TOPLU_ERR_OUT_OF_MEMORY, "out of memory");
        }
        m->n_hist++;
      }
      m->hist[k].count++;
    }
  }
  toplu__graph_t *g = NULL;
  int framework = exported_by_framework(om->producer_name);
  st = toplu__graph_build(om, &g, err);
  toplu__onnx_model_free(om);
  if (st) return st;
  if (framework && (st = mark_output_length(g, err))) {
    toplu__graph_free(g);
    return st;
  }
  if (batch_free && (st = free_batch_dim(g, batch_free, err))) {
    toplu__graph_free(g);
    return st;
  }
  if ((st = toplu__graph_infer(g, toplu__plan_eval_node, NULL, err)) == TOPLU_OK)
    st = toplu__graph_upcast_half(g, err); /* float16 through the float32 kernels (graph/upcast.h) */
  if (st == TOPLU_OK && !(opts && opts->no_optimize))
    st = toplu__graph_fuse(g, (opts && opts->qdq_int8_all ? TOPLU_FUSE_QDQ_INT8_ALL : 0) |
                                  (toplu__cpu_int8_exact() ? TOPLU_FUSE_QDQ_CONV : 0) |
                                  (opts && opts->no_fuse_attention ? TOPLU_FUSE_NO_ATTENTION : 0) |
                                  (opts && opts->no_fuse_qdq_residual ? TOPLU_FUSE_NO_QDQ_RESIDUAL : 0) |
                                  (opts && opts->no_fuse_depthwise ? TOPLU_FUSE_NO_DEPTHWISE : 0) |
                                  (opts && opts->no_fuse_qdq_lookup ? TOPLU_FUSE_NO_QDQ_LOOKUP : 0) |
                                  (dw_project_ok() && !(opts && opts->no_fuse_projection) ? TOPLU_FUSE_DW_PROJECT : 0),
                          err);
  if (!st) toplu__graph_free_unread_consts(g);
  if (st) {
    toplu__graph_free(g);
    return st;
  }
  *out = g;
  return TOPLU_OK;
}

/* The size b >= 1 the file fixes dim 0 of every input to (the same for all;
 * for b > 1 every input has rank 2 or more, so a vector input [b] is not
 * taken for b rows of scalars), or 0. */
static int64_t fixed_rows(const toplu__graph_t *g) {
  if (g->n_inputs == 0) return 0;
  int64_t b = 0;
  for (int i = 0; i < g->n_inputs; i++) {
    const toplu__value_t *v = &g->values[g->inputs[i]];
    if (v->ndim < 1 || v->dims[0] < 1 || (b && v->dims[0] != b)) return 0;
    b = v->dims[0];
  }
  for (int i = 0; i < g->n_inputs && b > 1; i++)
    if (g->values[g->inputs[i]].ndim < 2) return 0;
  return b;
}

/* FNV-1a of a value name, for share_consts' table. */
static uint64_t name_hash(const char *s) {
  uint64_t h = 1469598103934665603ull;
  for (; *s; s++) h = (h ^ (unsigned char)*s) * 1099511628211ull;
  return h;
}

/*
 * The batched graph of a fixed-batch model is built from the same file as
 * the main one, so its weights are a second copy (a ResNet-50 exported at
 * batch 1 held 202 MB after loading against 104 MB for the same file with
 * a free batch dim).  Each numeric constant of b whose name, type, shape
 * and bytes equal a constant of g is pointed at g's data instead
 * (konst_shared: b never frees it; both graphs live as long as the
 * model).  Constants that differ (a
 * shape folded at batch 1, a Reshape target with dim 0 freed) stay b's own.
 * Out of memory for the table: nothing is shared.
 */
static void share_consts(const toplu__graph_t *g, toplu__graph_t *b) {
  size_t cap = 16;
  while (cap < 2 * (size_t)g->n_values + 2) cap *= 2;
  int *slot = malloc(cap * sizeof *slot);
  if (!slot) return;
  for (size_t i = 0; i < cap; i++) slot[i] = -1;
  for (int v = 0; v < g->n_values; v++) {
    if (!g->values[v].konst.data || !g->values[v].name) continue;
    size_t i = (size_t)name_hash(g->values[v].name) & (cap - 1);
    while (slot[i] >= 0) i = (i + 1) & (cap - 1);
    slot[i] = v;
  }
  for (int v = 0; v < b->n_values; v++) {
    toplu__value_t *x = &b->values[v];
    if (!x->konst.data || x->konst_shared || !x->name || x->konst.dtype == TOPLU_DTYPE_STRING) continue;
    for (size_t i = (size_t)name_hash(x->name) & (cap - 1); slot[i] >= 0; i = (i + 1) & (cap - 1)) {
      const toplu__value_t *y = &g->values[slot[i]];
      if (strcmp(y->name, x->name)) continue;
      size_t nb = toplu_tensor_nbytes(&x->konst);
      size_t dims_bytes = (size_t)(x->konst.ndim > 0 ? x->konst.ndim : 0) * sizeof x->konst.dims[0];
      if (y->konst.dtype == x->konst.dtype && y->konst.ndim == x->konst.ndim &&
          !memcmp(y->konst.dims, x->konst.dims, dims_bytes) &&
          toplu_tensor_nbytes(&y->konst) == nb && !memcmp(y->konst.data, x->konst.data, nb)) {
        free(x->konst.data);
        x->konst.data = y->konst.data;
        x->konst_shared = 1;
      }
      break;
    }
  }
  free(slot);
}

static toplu_status_t load(const unsigned char *data, size_t size, const char *name, const char *base_dir,
                           const toplu_model_options_t *opts, toplu_model_t **out, toplu_error_t *err) {
  *out = NULL;
  toplu_model_t *m = calloc(1, sizeof *m);
  if (!m) return toplu__errorf(err, TOPLU_ERR_OUT_OF_MEMORY, "out of memory");
  m->path = dupstr(name);
  toplu_status_t st = build_graph(data, size, name, base_dir, opts, 0, m, &m->graph, err);
  if (st) {
    toplu_model_destroy(m);
    return st;
  }
  const toplu__graph_t *g = m->graph;
  m->fixed_rows = fixed_rows(g);
  m->fixed_batch = m->fixed_rows == 1;
  if (m->fixed_rows) {
    toplu_error_t e2;
    toplu_error_clear(&e2);
    if (build_graph(data, size, name, base_dir, opts, m->fixed_rows, NULL, &m->batched, &e2) != TOPLU_OK)
      m->batched = NULL;
    if (m->batched) share_consts(m->graph, m->batched);
  }
  m->inputs = calloc((size_t)g->n_inputs + 1, sizeof *m->inputs);
  m->outputs = calloc((size_t)g->n_outputs + 1, sizeof *m->outputs);
  if (!m->inputs || !m->outputs || !m->path) {
    toplu_model_destroy(m);
    return toplu__errorf(err, TOPLU_ERR_OUT_OF_MEMORY, "out of memory");
  }
  for (int i = 0; i < g->n_inputs; i++) fill_info(g, g->inputs[i], &m->inputs[i]);
  for (int i = 0; i < g->n_outputs; i++) fill_info(g, g->outputs[i], &m->outputs[i]);
  *out = m;
  return TOPLU_OK;
}

toplu_status_t toplu_model_load(const char *path, const toplu_model_options_t *opts, toplu_model_t **out,
                                toplu_error_t *err) {
  /* first, before code compiled for the build machine's CPU runs (a -march=native library on an older CPU
   * fails here, saying which instructions are missing, instead of dying on SIGILL) */
  if (toplu__cpu_build_check(err)) return TOPLU_ERR_UNSUPPORTED;
  toplu_error_clear(err);
  if (!path || !out) return toplu__errorf(err, TOPLU_ERR_INVALID_ARGUMENT, "toplu_model_load: NULL argument");
  *out = NULL;
  unsigned char *buf;
  size_t len;
  char dir[4096];
  toplu_status_t rst = toplu__onnx_read_bytes(path, &buf, &len, dir, sizeof dir, err);
  if (rst) return rst;
  toplu_status_t st = load(buf, len, path, dir, opts, out, err);
  free(buf);
  return st;
}

toplu_status_t toplu_model_load_buffer(const void *data, size_t size, const char *name,
                                       const toplu_model_options_t *opts, toplu_model_t **out, toplu_error_t *err) {
  if (toplu__cpu_build_check(err)) return TOPLU_ERR_UNSUPPORTED; /* as toplu_model_load */
  toplu_error_clear(err);
  if (!data || !out) return toplu__errorf(err, TOPLU_ERR_INVALID_ARGUMENT, "toplu_model_load_buffer: NULL argument");
  return load(data, size, name ? name : "<memory>", NULL, opts, out, err);
}

void toplu_model_destroy(toplu_model_t *m) {
  if (!m) return;
  toplu__graph_free(m->graph);
  toplu__graph_free(m->batched);
  for (int i = 0; i < m->n_hist; i++) free((char *)m->hist[i].op_type);
  free(m->hist);
  free(m->inputs);
  free(m->outputs);
  free(m->path);
  free(m->producer);
  free(m);
}

int toplu_model_input_count(const toplu_model_t *m) { return m ? m->graph->n_inputs : 0; }
int toplu_model_output_count(const toplu_model_t *m) { return m ? m->graph->n_outputs : 0; }

const toplu_value_info_t *toplu_model_input(const toplu_model_t *m, int i) {
  return m && i >= 0 && i < m->graph->n_inputs ? &m->inputs[i] : NULL;
}

const toplu_value_info_t *toplu_model_output(const toplu_model_t *m, int i) {
  return m && i >= 0 && i < m->graph->n_outputs ? &m->outputs[i] : NULL;
}

int toplu_model_input_index(const toplu_model_t *m, const char *name) {
  for (int i = 0; m && name && i < m->graph->n_inputs; i++)
    if (!strcmp(m->inputs[i].name, name)) return i;
  return -1;
}

int toplu_model_output_index(const toplu_model_t *m, const char *name) {
  for (int i = 0; m && name && i < m->graph->n_outputs; i++)
    if (!strcmp(m->outputs[i].name, name)) return i;
  return -1;
}

int toplu_model_input_for_spec(const toplu_model_t *m, const char *spec) {
  int best = -1;
  size_t best_len = 0;
  for (int i = 0; m && spec && i < m->graph->n_inputs; i++) {
    const char *nm = m->inputs[i].name;
    size_t len = strlen(nm);
    if (!strncmp(spec, nm, len) && spec[len] == '=' && (best < 0 || len > best_len)) {
      best = i;
      best_len = len;
    }
  }
  return best;
}

int64_t toplu_model_opset(const toplu_model_t *m) { return m ? m->graph->opset : 0; }
int64_t toplu_model_ir_version(const toplu_model_t *m) { return m ? m->ir_version : 0; }
const char *toplu_model_producer(const toplu_model_t *m) { return m && m->producer ? m->producer : ""; }
const char *toplu_model_path(const toplu_model_t *m) { return m ? m->path : NULL; }

int toplu_model_op_histogram(const toplu_model_t *m, toplu_op_count_t *counts, int cap) {
  if (!m) return 0;
  for (int i = 0; counts && i < m->n_hist && i < cap; i++) counts[i] = m->hist[i];
  return m->n_hist;
}

int toplu_model_quantized_nodes(const toplu_model_t *m) {
  static const char *const ops[] = {"QuantizeLinear", "DequantizeLinear", "DynamicQuantizeLinear", "ConvInteger",
                                    "MatMulInteger"};
  int n = 0;
  for (int i = 0; m && i < m->n_hist; i++) {
    const char *op = m->hist[i].op_type;
    int q = !strncmp(op, "QLinear", 7);
    for (size_t k = 0; !q && k < sizeof ops / sizeof *ops; k++) q = !strcmp(op, ops[k]);
    if (q) n += m->hist[i].count;
  }
  return n;
}

int toplu_model_node_count(const toplu_model_t *m, int optimized) {
  if (!m) return 0;
  if (!optimized) return m->n_nodes_file;
  int n = 0;
  for (int i = 0; i < m->graph->n_nodes; i++) n += !m->graph->nodes[i].dead;
  return n;
}

int64_t toplu_model_param_count(const toplu_model_t *m) { return m ? m->param_count : 0; }
int64_t toplu_model_param_bytes(const toplu_model_t *m) { return m ? m->param_bytes : 0; }
int toplu_model_fixed_batch(const toplu_model_t *m) { return m ? m->fixed_batch : 0; }
int64_t toplu_model_fixed_batch_size(const toplu_model_t *m) { return m ? m->fixed_rows : 0; }

int toplu_model_input_values_decide(const toplu_model_t *m, int i) {
  return m && i >= 0 && i < m->graph->n_inputs && m->graph->values[m->graph->inputs[i]].value_input;
}

static int nonnumeric(const toplu_model_t *m, int with_outputs, char *why, size_t size) {
  int n_in = toplu_model_input_count(m), n_out = with_outputs ? toplu_model_output_count(m) : 0;
  for (int k = 0; k < n_in + n_out; k++) {
    const toplu_value_info_t *v = k < n_in ? toplu_model_input(m, k) : toplu_model_output(m, k - n_in);
    const char *what = v->kind == TOPLU_KIND_SEQUENCE ? "a sequence"
                       : v->kind == TOPLU_KIND_OPTIONAL ? "an optional"
                       : v->dtype == TOPLU_DTYPE_STRING ? "a string tensor" : NULL;
    if (what) {
      snprintf(why, size, "%s '%s' is %s", k < n_in ? "input" : "output", v->name, what);
      return 1;
    }
  }
  return 0;
}

int toplu__model_nonnumeric_io(const toplu_model_t *m, char *why, size_t size) { return nonnumeric(m, 1, why, size); }

int toplu__model_nonnumeric_inputs(const toplu_model_t *m, char *why, size_t size) {
  return nonnumeric(m, 0, why, size);
}
