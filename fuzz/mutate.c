/* fuzz/mutate.c - the structure-aware model mutator (fuzz/mutate.h). */
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "mutate.h"
#include "onnx.pb-c.h"

typedef struct rng {
  uint64_t s;
} rng_t;

static uint64_t next(rng_t *r) { /* splitmix64 */
  uint64_t z = (r->s += UINT64_C(0x9e3779b97f4a7c15));
  z = (z ^ (z >> 30)) * UINT64_C(0xbf58476d1ce4e5b9);
  z = (z ^ (z >> 27)) * UINT64_C(0x94d049bb133111eb);
  return z ^ (z >> 31);
}
static size_t below(rng_t *r, size_t n) { return n ? (size_t)(next(r) % n) : 0; }

static void say(char *desc, size_t size, const char *fmt, ...) {
  if (!desc || !size) return;
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(desc, size, fmt, ap);
  va_end(ap);
}

static int64_t interesting_i64(rng_t *r, int64_t old) {
  static const int64_t v[] = {0,
                              1,
                              -1,
                              2,
                              3,
                              -2,
                              7,
                              8,
                              16,
                              255,
                              256,
                              65536,
                              INT32_MAX,
                              (int64_t)INT32_MAX + 1,
                              INT64_C(1) << 32,
                              INT64_C(1) << 40,
                              INT64_C(1) << 62,
                              INT64_MAX,
                              INT64_MIN,
                              INT64_MIN + 1};
  switch (below(r, 4)) { /* wrapping, in unsigned arithmetic */
  case 0: return (int64_t)((uint64_t)old + 1);
  case 1: return (int64_t)((uint64_t)old - 1);
  case 2: return (int64_t)((uint64_t)old * 2);
  default: return v[below(r, sizeof v / sizeof v[0])];
  }
}

static float interesting_f(rng_t *r, float old) {
  static const float v[] = {0.0f, -0.0f, 1.0f, -1.0f, 0.5f, 1e-30f, 1e30f, 3.4e38f, 1e-45f};
  switch (below(r, 5)) {
  case 0: return NAN;
  case 1: return below(r, 2) ? INFINITY : -INFINITY;
  case 2: return old * 1000.0f;
  default: return v[below(r, sizeof v / sizeof v[0])];
  }
}

static char *dupstr(const char *s) {
  size_t n = strlen(s) + 1;
  char *d = malloc(n);
  if (d) memcpy(d, s, n);
  return d;
}

/* Replace *slot (a protobuf-c string, malloc'ed or NULL) with a copy of s. */
static int set_str(char **slot, const char *s) {
  char *d = dupstr(s);
  if (!d) return -1;
  free(*slot);
  *slot = d;
  return 0;
}

static const char *const OPS[] = {
    "Conv", "ConvTranspose", "Relu", "Clip", "Add", "Mul", "Div", "Sub", "MatMul", "Gemm", "Reshape", "Transpose",
    "Concat", "Slice", "Gather", "Shape", "Squeeze", "Unsqueeze", "Cast", "Constant", "Identity", "Softmax",
    "MaxPool", "AveragePool", "GlobalAveragePool", "BatchNormalization", "Resize", "Pad", "Split", "Flatten",
    "QuantizeLinear", "DequantizeLinear", "QLinearConv", "ConstantOfShape", "Expand", "Range", "Tile", "Where",
    "ReduceMean", "Sigmoid", "HardSwish", "LayerNormalization", "Sqrt", "Pow", "Loop", "If", "NoSuchOp", ""};
#define N_OPS (sizeof OPS / sizeof OPS[0])

static const char *const ATTR_NAMES[] = {"kernel_shape", "strides", "pads", "dilations", "group", "axis", "axes",
                                         "perm", "keepdims", "alpha", "beta", "epsilon", "transA", "transB",
                                         "auto_pad", "mode", "output_padding", "output_shape", "to", "value",
                                         "split", "ceil_mode", "allowzero", "coordinate_transformation_mode"};
#define N_ATTR_NAMES (sizeof ATTR_NAMES / sizeof ATTR_NAMES[0])

static const char *const LOCATIONS[] = {"weights.bin", "w..bin", "../weights.bin", "../../../../etc/passwd",
                                        "/etc/passwd", "/dev/zero", ".", "", "model.onnx", "a/../../b",
                                        "in.npy", "/proc/self/mem"};
#define N_LOCATIONS (sizeof LOCATIONS / sizeof LOCATIONS[0])

/* Everything the mutations pick from, gathered from the main graph and
 * the graphs of If/Loop/Scan attributes (one level). */
typedef struct pool {
  Onnx__GraphProto *graphs[16];
  int n_graphs;
  Onnx__TensorProto *tensors[4096];
  int n_tensors;
  Onnx__ValueInfoProto *values[4096];
  int n_values;
  Onnx__NodeProto *nodes[8192];
  Onnx__GraphProto *node_graph[8192];
  int n_nodes;
} pool_t;

static void gather_graph(pool_t *p, Onnx__GraphProto *g, int depth) {
  if (!g || p->n_graphs >= 16) return;
  p->graphs[p->n_graphs++] = g;
  for (size_t i = 0; i < g->n_initializer && p->n_tensors < 4096; i++) p->tensors[p->n_tensors++] = g->initializer[i];
  Onnx__ValueInfoProto **lists[3] = {g->input, g->output, g->value_info};
  size_t ns[3] = {g->n_input, g->n_output, g->n_value_info};
  for (int l = 0; l < 3; l++)
    for (size_t i = 0; i < ns[l] && p->n_values < 4096; i++) p->values[p->n_values++] = lists[l][i];
  for (size_t i = 0; i < g->n_node && p->n_nodes < 8192; i++) {
    Onnx__NodeProto *n = g->node[i];
    p->node_graph[p->n_nodes] = g;
    p->nodes[p->n_nodes++] = n;
    for (size_t a = 0; a < n->n_attribute; a++) {
      Onnx__AttributeProto *at = n->attribute[a];
      if (at->t && p->n_tensors < 4096) p->tensors[p->n_tensors++] = at->t;
      if (depth == 0 && at->g) gather_graph(p, at->g, depth + 1);
      for (size_t k = 0; depth == 0 && k < at->n_graphs; k++) gather_graph(p, at->graphs[k], depth + 1);
    }
  }
}

/* A name used in the graph (a node's input or output), or NULL. */
static const char *some_name(pool_t *p, rng_t *r) {
  if (!p->n_nodes) return NULL;
  Onnx__NodeProto *n = p->nodes[below(r, (size_t)p->n_nodes)];
  if (below(r, 2) && n->n_input) return n->input[below(r, n->n_input)];
  if (n->n_output) return n->output[below(r, n->n_output)];
  return NULL;
}

static Onnx__TensorShapeProto *value_shape(Onnx__ValueInfoProto *v) {
  if (!v->type || v->type->value_case != ONNX__TYPE_PROTO__VALUE_TENSOR_TYPE || !v->type->tensor_type) return NULL;
  return v->type->tensor_type->shape;
}

static int mut_dim(pool_t *p, rng_t *r, char *d, size_t ds) {
  if (!p->n_values) return -1;
  Onnx__ValueInfoProto *v = p->values[below(r, (size_t)p->n_values)];
  Onnx__TensorShapeProto *sh = value_shape(v);
  if (!sh) return -1;
  size_t op = below(r, 8);
  if (op == 0 || sh->n_dim == 0) { /* add a dim */
    Onnx__TensorShapeProto__Dimension *nd = malloc(sizeof *nd);
    Onnx__TensorShapeProto__Dimension **a = realloc(sh->dim, (sh->n_dim + 1) * sizeof *a);
    if (!nd || !a) {
      free(nd);
      if (a) sh->dim = a;
      return -1;
    }
    sh->dim = a;
    onnx__tensor_shape_proto__dimension__init(nd);
    nd->value_case = ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_VALUE;
    nd->dim_value = interesting_i64(r, 1);
    size_t at = below(r, sh->n_dim + 1);
    memmove(&a[at + 1], &a[at], (sh->n_dim - at) * sizeof *a);
    a[at] = nd;
    sh->n_dim++;
    say(d, ds, "dim '%s': dim %zu added (%lld)", v->name ? v->name : "", at, (long long)nd->dim_value);
    return 0;
  }
  size_t k = below(r, sh->n_dim);
  Onnx__TensorShapeProto__Dimension *dm = sh->dim[k];
  if (op == 1) { /* drop it */
    protobuf_c_message_free_unpacked(&dm->base, NULL);
    memmove(&sh->dim[k], &sh->dim[k + 1], (sh->n_dim - k - 1) * sizeof *sh->dim);
    sh->n_dim--;
    say(d, ds, "dim '%s': dim %zu dropped", v->name ? v->name : "", k);
    return 0;
  }
  if (op == 2) { /* a symbol */
    static const char *const syms[] = {"N", "batch", "unk__1", "", "height"};
    const char *s = syms[below(r, 5)];
    if (dm->value_case == ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_PARAM) free(dm->dim_param);
    dm->dim_param = dupstr(s);
    dm->value_case = dm->dim_param ? ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_PARAM
                                   : ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE__NOT_SET;
    say(d, ds, "dim '%s': dim %zu -> symbol '%s'", v->name ? v->name : "", k, s);
    return 0;
  }
  if (op == 3) { /* unset */
    if (dm->value_case == ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_PARAM) free(dm->dim_param);
    dm->value_case = ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE__NOT_SET;
    say(d, ds, "dim '%s': dim %zu unset", v->name ? v->name : "", k);
    return 0;
  }
  int64_t old = dm->value_case == ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_VALUE ? dm->dim_value : 1;
  if (dm->value_case == ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_PARAM) free(dm->dim_param);
  dm->value_case = ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_VALUE;
  dm->dim_value = interesting_i64(r, old);
  say(d, ds, "dim '%s': dim %zu: %lld -> %lld", v->name ? v->name : "", k, (long long)old, (long long)dm->dim_value);
  return 0;
}

static int mut_init_dims(pool_t *p, rng_t *r, char *d, size_t ds) {
  if (!p->n_tensors) return -1;
  Onnx__TensorProto *t = p->tensors[below(r, (size_t)p->n_tensors)];
  size_t op = below(r, 5);
  const char *nm = t->name ? t->name : "";
  if (op == 0 || t->n_dims == 0) {
    int64_t *a = realloc(t->dims, (t->n_dims + 1) * sizeof *a);
    if (!a) return -1;
    t->dims = a;
    a[t->n_dims++] = below(r, 2) ? 1 : interesting_i64(r, 1);
    say(d, ds, "init-dims '%s': dim added (%lld), rank %zu", nm, (long long)a[t->n_dims - 1], t->n_dims);
    return 0;
  }
  size_t k = below(r, t->n_dims);
  if (op == 1) {
    memmove(&t->dims[k], &t->dims[k + 1], (t->n_dims - k - 1) * sizeof *t->dims);
    t->n_dims--;
    say(d, ds, "init-dims '%s': dim %zu dropped", nm, k);
    return 0;
  }
  int64_t old = t->dims[k];
  t->dims[k] = interesting_i64(r, old);
  say(d, ds, "init-dims '%s': dim %zu: %lld -> %lld", nm, k, (long long)old, (long long)t->dims[k]);
  return 0;
}

static int mut_attr(pool_t *p, rng_t *r, char *d, size_t ds) {
  if (!p->n_nodes) return -1;
  Onnx__NodeProto *n = p->nodes[below(r, (size_t)p->n_nodes)];
  const char *op = n->op_type ? n->op_type : "";
  size_t what = below(r, 10);
  if (what == 0 || n->n_attribute == 0) { /* add an int or ints attribute */
    Onnx__AttributeProto *at = malloc(sizeof *at);
    Onnx__AttributeProto **a = realloc(n->attribute, (n->n_attribute + 1) * sizeof *a);
    if (a) n->attribute = a;
    if (!at || !a) {
      free(at);
      return -1;
    }
    onnx__attribute_proto__init(at);
    at->name = dupstr(ATTR_NAMES[below(r, N_ATTR_NAMES)]);
    at->has_type = 1;
    if (below(r, 2)) {
      at->type = ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__INT;
      at->has_i = 1;
      at->i = interesting_i64(r, 1);
    } else {
      at->type = ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__INTS;
      at->n_ints = 1 + below(r, 6);
      at->ints = malloc(at->n_ints * sizeof *at->ints);
      if (!at->ints) at->n_ints = 0;
      for (size_t i = 0; i < at->n_ints; i++) at->ints[i] = below(r, 3) ? 1 : interesting_i64(r, 1);
    }
    a[n->n_attribute++] = at;
    say(d, ds, "attr %s '%s': added", op, at->name ? at->name : "");
    return 0;
  }
  size_t k = below(r, n->n_attribute);
  Onnx__AttributeProto *at = n->attribute[k];
  const char *an = at->name ? at->name : "";
  if (what == 1) {
    say(d, ds, "attr %s '%s': dropped", op, an);
    protobuf_c_message_free_unpacked(&at->base, NULL);
    memmove(&n->attribute[k], &n->attribute[k + 1], (n->n_attribute - k - 1) * sizeof *n->attribute);
    n->n_attribute--;
    return 0;
  }
  if (what == 2) {
    const char *nn = ATTR_NAMES[below(r, N_ATTR_NAMES)];
    say(d, ds, "attr %s '%s': renamed '%s'", op, an, nn);
    return set_str(&at->name, nn);
  }
  if (what == 3) {
    int old = (int)at->type;
    static const int types[] = {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 99};
    at->type = (Onnx__AttributeProto__AttributeType)types[below(r, 16)];
    at->has_type = 1;
    say(d, ds, "attr %s '%s': type %d -> %d", op, an, old, (int)at->type);
    return 0;
  }
  if (at->n_ints && below(r, 4)) {
    size_t sub = below(r, 4);
    if (sub == 0) { /* cut or grow the list */
      if (below(r, 2) && at->n_ints > 0) {
        at->n_ints = below(r, at->n_ints);
        say(d, ds, "attr %s '%s': ints cut to %zu", op, an, at->n_ints);
        return 0;
      }
      int64_t *a = realloc(at->ints, (at->n_ints + 1) * sizeof *a);
      if (!a) return -1;
      at->ints = a;
      a[at->n_ints++] = interesting_i64(r, 1);
      say(d, ds, "attr %s '%s': ints grown to %zu", op, an, at->n_ints);
      return 0;
    }
    size_t e = below(r, at->n_ints);
    int64_t old = at->ints[e];
    at->ints[e] = interesting_i64(r, old);
    say(d, ds, "attr %s '%s' ints[%zu]: %lld -> %lld", op, an, e, (long long)old, (long long)at->ints[e]);
    return 0;
  }
  if (at->n_floats && below(r, 2)) {
    size_t e = below(r, at->n_floats);
    float old = at->floats[e];
    at->floats[e] = interesting_f(r, old);
    say(d, ds, "attr %s '%s' floats[%zu]: %g -> %g", op, an, e, (double)old, (double)at->floats[e]);
    return 0;
  }
  if (at->has_f || at->type == ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__FLOAT) {
    float old = at->f;
    at->has_f = 1;
    at->f = interesting_f(r, old);
    say(d, ds, "attr %s '%s' f: %g -> %g", op, an, (double)old, (double)at->f);
    return 0;
  }
  if (at->has_s && below(r, 2)) {
    static const char *const strs[] = {"", "SAME_UPPER", "VALID", "NOTSET", "linear", "nearest", "cubic",
                                       "half_pixel", "asymmetric", "constant", "reflect", "edge", "garbage"};
    const char *s = strs[below(r, sizeof strs / sizeof strs[0])];
    uint8_t *b = (uint8_t *)dupstr(s);
    if (!b) return -1;
    free(at->s.data);
    at->s.data = b;
    at->s.len = strlen(s);
    say(d, ds, "attr %s '%s' s -> '%s'", op, an, s);
    return 0;
  }
  int64_t old = at->i;
  at->has_i = 1;
  at->i = interesting_i64(r, old);
  say(d, ds, "attr %s '%s' i: %lld -> %lld", op, an, (long long)old, (long long)at->i);
  return 0;
}

static int mut_dtype(pool_t *p, rng_t *r, char *d, size_t ds) {
  int32_t nt = (int32_t)below(r, 24);
  if (below(r, 10) == 0) nt = below(r, 2) ? 99 : -1;
  if (p->n_tensors && (below(r, 2) || !p->n_values)) {
    Onnx__TensorProto *t = p->tensors[below(r, (size_t)p->n_tensors)];
    int32_t old = t->data_type;
    t->has_data_type = 1;
    t->data_type = nt;
    say(d, ds, "dtype tensor '%s': %d -> %d", t->name ? t->name : "", old, nt);
    return 0;
  }
  if (!p->n_values) return -1;
  Onnx__ValueInfoProto *v = p->values[below(r, (size_t)p->n_values)];
  if (!v->type || v->type->value_case != ONNX__TYPE_PROTO__VALUE_TENSOR_TYPE || !v->type->tensor_type) return -1;
  int32_t old = v->type->tensor_type->elem_type;
  v->type->tensor_type->has_elem_type = 1;
  v->type->tensor_type->elem_type = nt;
  say(d, ds, "dtype value '%s': %d -> %d", v->name ? v->name : "", old, nt);
  return 0;
}

static int mut_name(pool_t *p, rng_t *r, char *d, size_t ds) {
  if (!p->n_nodes) return -1;
  size_t ni = below(r, (size_t)p->n_nodes);
  Onnx__NodeProto *n = p->nodes[ni];
  const char *op = n->op_type ? n->op_type : "";
  size_t what = below(r, 8);
  const char *nn = below(r, 4) == 0 ? (below(r, 2) ? "" : "fuzz_new_name") : some_name(p, r);
  if (!nn) nn = "";
  if (what == 0 && n->n_input) {
    size_t k = below(r, n->n_input);
    say(d, ds, "name %s: input %zu dropped", op, k);
    free(n->input[k]);
    memmove(&n->input[k], &n->input[k + 1], (n->n_input - k - 1) * sizeof *n->input);
    n->n_input--;
    return 0;
  }
  if (what == 1) {
    char **a = realloc(n->input, (n->n_input + 1) * sizeof *a);
    if (!a) return -1;
    n->input = a;
    if (!(a[n->n_input] = dupstr(nn))) return -1;
    n->n_input++;
    say(d, ds, "name %s: input '%s' added", op, nn);
    return 0;
  }
  if (what == 2 && p->graphs[0]->n_input) {
    Onnx__GraphProto *g = p->graphs[0];
    Onnx__ValueInfoProto *v = g->input[below(r, g->n_input)];
    say(d, ds, "name graph input '%s' -> '%s'", v->name ? v->name : "", nn);
    return set_str(&v->name, nn);
  }
  if ((what & 1) && n->n_output) {
    size_t k = below(r, n->n_output);
    say(d, ds, "name %s: output %zu '%s' -> '%s'", op, k, n->output[k], nn);
    return set_str(&n->output[k], nn);
  }
  if (!n->n_input) return -1;
  size_t k = below(r, n->n_input);
  say(d, ds, "name %s: input %zu '%s' -> '%s'", op, k, n->input[k], nn);
  return set_str(&n->input[k], nn);
}

static int mut_op(pool_t *p, rng_t *r, char *d, size_t ds) {
  if (!p->n_nodes) return -1;
  Onnx__NodeProto *n = p->nodes[below(r, (size_t)p->n_nodes)];
  if (below(r, 8) == 0) {
    static const char *const doms[] = {"", "ai.onnx", "com.microsoft", "ai.onnx.ml", "bogus"};
    const char *dm = doms[below(r, 5)];
    say(d, ds, "op %s: domain -> '%s'", n->op_type ? n->op_type : "", dm);
    return set_str(&n->domain, dm);
  }
  const char *o = OPS[below(r, N_OPS)];
  say(d, ds, "op %s -> %s", n->op_type ? n->op_type : "", o);
  return set_str(&n->op_type, o);
}

static int mut_init_size(pool_t *p, rng_t *r, char *d, size_t ds) {
  if (!p->n_tensors) return -1;
  Onnx__TensorProto *t = p->tensors[below(r, (size_t)p->n_tensors)];
  const char *nm = t->name ? t->name : "";
  if (t->has_raw_data || t->raw_data.len) {
    size_t old = t->raw_data.len;
    if (below(r, 3) && old) {
      t->raw_data.len = below(r, 4) == 0 ? 0 : below(r, old);
      say(d, ds, "init-size '%s': raw_data %zu -> %zu bytes", nm, old, t->raw_data.len);
      return 0;
    }
    size_t add = 1 + below(r, 64);
    uint8_t *b = realloc(t->raw_data.data, old + add);
    if (!b) return -1;
    memset(b + old, 0x41, add);
    t->raw_data.data = b;
    t->raw_data.len = old + add;
    say(d, ds, "init-size '%s': raw_data %zu -> %zu bytes", nm, old, old + add);
    return 0;
  }
  size_t *counts[] = {&t->n_float_data, &t->n_int32_data, &t->n_int64_data, &t->n_double_data, &t->n_uint64_data};
  for (int i = 0; i < 5; i++)
    if (*counts[i]) {
      size_t old = *counts[i];
      *counts[i] = below(r, old);
      say(d, ds, "init-size '%s': typed data %zu -> %zu values", nm, old, *counts[i]);
      return 0;
    }
  /* No data: give it raw bytes of the wrong length. */
  size_t len = 1 + below(r, 16);
  uint8_t *b = malloc(len);
  if (!b) return -1;
  memset(b, 0x3f, len);
  free(t->raw_data.data);
  t->raw_data.data = b;
  t->raw_data.len = len;
  t->has_raw_data = 1;
  say(d, ds, "init-size '%s': %zu raw bytes given", nm, len);
  return 0;
}

static Onnx__StringStringEntryProto *entry(const char *k, const char *v) {
  Onnx__StringStringEntryProto *e = malloc(sizeof *e);
  if (!e) return NULL;
  onnx__string_string_entry_proto__init(e);
  e->key = dupstr(k);
  e->value = dupstr(v);
  return e;
}

static int mut_external(pool_t *p, rng_t *r, char *d, size_t ds) {
  if (!p->n_tensors) return -1;
  Onnx__TensorProto *t = p->tensors[below(r, (size_t)p->n_tensors)];
  const char *nm = t->name ? t->name : "";
  static const char *const nums[] = {"0", "1", "-1", "4096", "9223372036854775807", "9223372036854775808",
                                     "-9223372036854775808", "18446744073709551615", "1e3", "0x10", "", "abc",
                                     "4611686018427387904"};
#define N_NUMS (sizeof nums / sizeof nums[0])
  if (t->n_external_data && below(r, 2)) { /* change one entry */
    Onnx__StringStringEntryProto *e = t->external_data[below(r, t->n_external_data)];
    const char *v = e->key && !strcmp(e->key, "location") ? LOCATIONS[below(r, N_LOCATIONS)] : nums[below(r, N_NUMS)];
    say(d, ds, "external '%s': %s -> '%s'", nm, e->key ? e->key : "", v);
    return set_str(&e->value, v);
  }
  /* Move the tensor out: location, and perhaps offset, length, a repeated or unknown key. */
  const char *keys[5], *vals[5];
  int nk = 0;
  keys[nk] = "location", vals[nk++] = LOCATIONS[below(r, N_LOCATIONS)];
  if (below(r, 2)) keys[nk] = "offset", vals[nk++] = nums[below(r, N_NUMS)];
  if (below(r, 2)) keys[nk] = "length", vals[nk++] = nums[below(r, N_NUMS)];
  if (below(r, 4) == 0) keys[nk] = "location", vals[nk++] = LOCATIONS[below(r, N_LOCATIONS)];
  if (below(r, 4) == 0) keys[nk] = "checksum", vals[nk++] = "0";
  Onnx__StringStringEntryProto **a = realloc(t->external_data, (t->n_external_data + (size_t)nk) * sizeof *a);
  if (!a) return -1;
  t->external_data = a;
  for (int i = 0; i < nk; i++) {
    Onnx__StringStringEntryProto *e = entry(keys[i], vals[i]);
    if (!e) return -1;
    a[t->n_external_data++] = e;
  }
  t->has_data_location = 1;
  t->data_location = below(r, 8) ? ONNX__TENSOR_PROTO__DATA_LOCATION__EXTERNAL
                                  : ONNX__TENSOR_PROTO__DATA_LOCATION__DEFAULT;
  if (below(r, 4)) { /* drop the data in the file (else both) */
    free(t->raw_data.data);
    t->raw_data.data = NULL;
    t->raw_data.len = 0;
    t->has_raw_data = 0;
  }
  say(d, ds, "external '%s': location '%s'%s%s%s%s, %d keys", nm, vals[0], nk > 1 ? " " : "", nk > 1 ? keys[1] : "",
      nk > 1 ? "=" : "", nk > 1 ? vals[1] : "", nk);
  return 0;
}

static int mut_graph(pool_t *p, rng_t *r, Onnx__ModelProto *m, char *d, size_t ds) {
  Onnx__GraphProto *g = p->graphs[0];
  size_t what = below(r, 7);
  if (what == 0 && g->n_node) {
    size_t k = below(r, g->n_node);
    say(d, ds, "graph: node %zu (%s) dropped", k, g->node[k]->op_type ? g->node[k]->op_type : "");
    protobuf_c_message_free_unpacked(&g->node[k]->base, NULL);
    memmove(&g->node[k], &g->node[k + 1], (g->n_node - k - 1) * sizeof *g->node);
    g->n_node--;
    return 0;
  }
  if (what == 1 && g->n_node > 1) {
    size_t a = below(r, g->n_node), b = below(r, g->n_node);
    Onnx__NodeProto *t = g->node[a];
    g->node[a] = g->node[b];
    g->node[b] = t;
    say(d, ds, "graph: nodes %zu and %zu swapped", a, b);
    return 0;
  }
  if (what == 2 && g->n_initializer) {
    size_t k = below(r, g->n_initializer);
    say(d, ds, "graph: initializer '%s' dropped", g->initializer[k]->name ? g->initializer[k]->name : "");
    protobuf_c_message_free_unpacked(&g->initializer[k]->base, NULL);
    memmove(&g->initializer[k], &g->initializer[k + 1], (g->n_initializer - k - 1) * sizeof *g->initializer);
    g->n_initializer--;
    return 0;
  }
  if (what == 3 && g->n_output) {
    size_t k = below(r, g->n_output);
    say(d, ds, "graph: output '%s' dropped", g->output[k]->name ? g->output[k]->name : "");
    protobuf_c_message_free_unpacked(&g->output[k]->base, NULL);
    memmove(&g->output[k], &g->output[k + 1], (g->n_output - k - 1) * sizeof *g->output);
    g->n_output--;
    return 0;
  }
  if (what == 4 && m->n_opset_import) {
    static const int64_t vs[] = {1, 6, 7, 9, 10, 11, 12, 13, 14, 17, 18, 19, 21, 22, 99, 0, -1};
    Onnx__OperatorSetIdProto *o = m->opset_import[below(r, m->n_opset_import)];
    int64_t old = o->version;
    o->has_version = 1;
    o->version = vs[below(r, sizeof vs / sizeof vs[0])];
    say(d, ds, "graph: opset '%s' %lld -> %lld", o->domain ? o->domain : "", (long long)old, (long long)o->version);
    return 0;
  }
  if (what == 5) {
    int64_t old = m->ir_version;
    m->has_ir_version = 1;
    m->ir_version = below(r, 2) ? (int64_t)below(r, 12) : interesting_i64(r, old);
    say(d, ds, "graph: ir_version %lld -> %lld", (long long)old, (long long)m->ir_version);
    return 0;
  }
  if (what == 6 && g->n_input) { /* an initializer's graph input dropped, or a graph input dropped */
    size_t k = below(r, g->n_input);
    say(d, ds, "graph: input '%s' dropped", g->input[k]->name ? g->input[k]->name : "");
    protobuf_c_message_free_unpacked(&g->input[k]->base, NULL);
    memmove(&g->input[k], &g->input[k + 1], (g->n_input - k - 1) * sizeof *g->input);
    g->n_input--;
    return 0;
  }
  return -1;
}

size_t fz_mutate_model(uint8_t *data, size_t size, size_t max_size, uint64_t seed, char *desc, size_t desc_size) {
  if (desc && desc_size) desc[0] = 0;
  Onnx__ModelProto *m = onnx__model_proto__unpack(NULL, size, data);
  if (!m) return 0;
  if (!m->graph) {
    onnx__model_proto__free_unpacked(m, NULL);
    return 0;
  }
  pool_t *p = calloc(1, sizeof *p);
  if (!p) {
    onnx__model_proto__free_unpacked(m, NULL);
    return 0;
  }
  gather_graph(p, m->graph, 0);
  rng_t r = {seed * UINT64_C(0x2545f4914f6cdd1d) + 1};
  int rc = -1;
  for (int tries = 0; tries < 16 && rc != 0; tries++) {
    switch (below(&r, 10)) {
    case 0: rc = mut_dim(p, &r, desc, desc_size); break;
    case 1: rc = mut_init_dims(p, &r, desc, desc_size); break;
    case 2:
    case 3: rc = mut_attr(p, &r, desc, desc_size); break;
    case 4: rc = mut_dtype(p, &r, desc, desc_size); break;
    case 5: rc = mut_name(p, &r, desc, desc_size); break;
    case 6: rc = mut_op(p, &r, desc, desc_size); break;
    case 7: rc = mut_init_size(p, &r, desc, desc_size); break;
    case 8: rc = mut_external(p, &r, desc, desc_size); break;
    default: rc = mut_graph(p, &r, m, desc, desc_size); break;
    }
  }
  free(p);
  size_t n = 0;
  if (rc == 0) {
    n = onnx__model_proto__get_packed_size(m);
    if (n > max_size) n = 0;
    else onnx__model_proto__pack(m, data);
  }
  onnx__model_proto__free_unpacked(m, NULL);
  return n;
}

size_t fz_mutate_bytes(uint8_t *data, size_t size, uint64_t seed, char *desc, size_t desc_size) {
  rng_t r = {seed * UINT64_C(0x9e3779b97f4a7c15) + 7};
  if (desc && desc_size) desc[0] = 0;
  if (size == 0) return 0;
  switch (below(&r, 5)) {
  case 0: {
    size_t n = below(&r, size);
    say(desc, desc_size, "bytes: truncated %zu -> %zu", size, n);
    return n;
  }
  case 1: {
    size_t cut = 1 + below(&r, size < 64 ? size : 64);
    say(desc, desc_size, "bytes: last %zu cut", cut);
    return size - cut;
  }
  case 2: {
    int k = 1 + (int)below(&r, 8);
    for (int i = 0; i < k; i++) data[below(&r, size)] ^= (uint8_t)(1u << below(&r, 8));
    say(desc, desc_size, "bytes: %d bit flips", k);
    return size;
  }
  case 3: {
    size_t at = below(&r, size), len = 1 + below(&r, 16);
    if (len > size - at) len = size - at;
    uint8_t v = below(&r, 2) ? 0xff : 0x00;
    memset(data + at, v, len);
    say(desc, desc_size, "bytes: %zu bytes at %zu set to 0x%02x", len, at, v);
    return size;
  }
  default: {
    size_t len = 1 + below(&r, 256);
    if (len > size) len = size;
    size_t from = below(&r, size - len + 1), to = below(&r, size - len + 1);
    memmove(data + to, data + from, len);
    say(desc, desc_size, "bytes: %zu bytes copied from %zu to %zu", len, from, to);
    return size;
  }
  }
}
