/*
 * tests/test_ref_kernels.c - the plain-C reference kernels (src/ops/ref/)
 * against the oneDNN-based ones (src/ops/<family>.c), against values worked out by
 * hand, and on whole models.
 *
 * Kernel cases: a one-node graph built in memory (attributes, inputs with
 * seeded random values in [-1, 1), fused post-ops set as graph/fuse.c sets
 * them), output shapes from the op's schema at concrete dims, as a plan
 * gets them.  Each case runs the reference kernel and the kernel
 * toplu__kernel_find() returns, the way runtime/plan.c drives a kernel
 * (prepare, workspace, stream, bind, run, unbind, release), reordering
 * inputs into and the output out of the blocked layouts a oneDNN kernel
 * asks for, and requires max |ref - onednn| <= 1e-4 * max(1, max |ref|).
 * The reference kernel also runs with 3 threads (bit-identical to 1) and,
 * where it says it may, in place (bit-identical to out of place).
 *
 * Hand-worked values (Conv with bias, residual sum and Relu; strided padded
 * Conv; Gemm with alpha, beta, transB and a row C; 1-D MatMul; broadcast
 * Add/Div; ceil-mode MaxPool; GlobalAveragePool; Softmax-11 coercion vs
 * Softmax-13 axis; NaN through Relu and MaxPool) catch both backends being
 * wrong the same way, and a control case checks that the comparison does
 * fail on a one-weight difference.
 *
 * Models: MNIST (../shared/models/mnist/mnist.onnx, argv[1]) optimised and
 * unoptimised, and torchvision resnet18 ($TOPLU_CACHE or ~/.cache/toplu,
 * models/torchvision/resnet18.onnx; skipped when absent) run node by node on
 * the reference kernels alone (every node of the optimised graph must have
 * one) and match a oneDNN session within the same tolerance.  MNIST also
 * checks that a fixed-batch model's batch-free graph shares the main
 * graph's weights (one copy in memory).
 */
#include <float.h>
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "graph/graph.h"
#include "graph/infer.h"
#include "graph/schema.h"
#include "ops/onednn/onednn.h"
#include "ops/kernel.h"
#include "ops/ref/ref.h"
#include "runtime/model_internal.h"
#include "runtime/plan.h"
#include "toplu/toplu.h"

#define TOL 1e-4
#define MAX_IN 8
#define MAX_ATTR 16

static toplu__backend_t *g_backend;
static const char *g_mnist_path;

/* ---- one-node graphs ---- */

typedef struct tcase {
  toplu__graph_t g;
  toplu__node_t n;
  int n_in, n_out;
  int inputs[MAX_IN], outputs[2];
  toplu__attr_t attrs[MAX_ATTR];
  int64_t ints[MAX_ATTR][8];
  char strs[MAX_ATTR][16];
  char names[MAX_ATTR][24];
  toplu_tensor_t in[MAX_IN]; /* data malloc'ed */
  toplu_tensor_t out[2];     /* dtype and dims from the schema, no data */
  uint32_t seed;
} tcase_t;

static float urand(uint32_t *s) {
  *s = *s * 1664525u + 1013904223u;
  return (float)((*s >> 8) & 0xffffff) / (float)0x1000000 * 2.f - 1.f; /* [-1, 1) */
}

static void tc_init(tcase_t *tc, const char *op, int64_t opset, uint32_t seed) {
  memset(tc, 0, sizeof *tc);
  tc->g.path = (char *)"ref-test";
  tc->g.nodes = &tc->n;
  tc->g.n_nodes = 1;
  tc->g.opset = opset;
  tc->n.name = (char *)"node";
  tc->n.op_type = (char *)op;
  tc->n.domain = (char *)"";
  tc->n.opset = opset;
  tc->n.inputs = tc->inputs;
  tc->n.outputs = tc->outputs;
  tc->n.attrs = tc->attrs;
  tc->n_out = 1;
  tc->n.n_outputs = 1;
  tc->outputs[0] = 100;
  tc->outputs[1] = -1;
  tc->seed = seed * 2654435761u + 1u;
}

static toplu__attr_t *tc_attr(tcase_t *tc, const char *name, toplu__attr_type_t type) {
  assert_true(tc->n.n_attrs < MAX_ATTR);
  int k = tc->n.n_attrs++;
  snprintf(tc->names[k], sizeof tc->names[k], "%s", name);
  toplu__attr_t *a = &tc->attrs[k];
  a->name = tc->names[k];
  a->type = type;
  return a;
}

static void tc_int(tcase_t *tc, const char *name, int64_t v) { tc_attr(tc, name, TOPLU_ATTR_INT)->i = v; }
static void tc_float(tcase_t *tc, const char *name, float v) { tc_attr(tc, name, TOPLU_ATTR_FLOAT)->f = v; }

static void tc_str(tcase_t *tc, const char *name, const char *v) {
  toplu__attr_t *a = tc_attr(tc, name, TOPLU_ATTR_STRING);
  int k = (int)(a - tc->attrs);
  snprintf(tc->strs[k], sizeof tc->strs[k], "%s", v);
  a->s = tc->strs[k];
  a->s_len = strlen(v);
}

static void tc_ints(tcase_t *tc, const char *name, int n, const int64_t *v) {
  toplu__attr_t *a = tc_attr(tc, name, TOPLU_ATTR_INTS);
  int k = (int)(a - tc->attrs);
  assert_true(n <= 8);
  memcpy(tc->ints[k], v, (size_t)n * sizeof *v);
  a->ints = tc->ints[k];
  a->n = n;
}

/* Input i: float of the given dims, values random in [-1, 1) (or from vals). */
static float *tc_in(tcase_t *tc, int i, int ndim, const int64_t *dims, const float *vals) {
  assert_true(i >= 0 && i < MAX_IN && tc->n_in >= 0);
  if (i >= tc->n_in) {
    for (int j = tc->n_in > 0 ? tc->n_in : 0; j < i; j++) { /* absent optional inputs in between */
      tc->inputs[j] = -1;
      tc->in[j].ndim = -1;
    }
    tc->n_in = tc->n.n_inputs = i + 1;
  }
  toplu_tensor_t *t = &tc->in[i];
  t->dtype = TOPLU_DTYPE_FLOAT;
  t->ndim = ndim;
  memcpy(t->dims, dims, (size_t)ndim * sizeof *dims);
  int64_t n = toplu_tensor_numel(t);
  float *d = malloc((size_t)(n ? n : 1) * sizeof(float));
  assert_non_null(d);
  for (int64_t k = 0; k < n; k++) d[k] = vals ? vals[k] : urand(&tc->seed);
  t->data = d;
  tc->inputs[i] = i;
  return d;
}

/* Input i: a constant int64 vector (Reshape's shape). */
static void tc_in_i64(tcase_t *tc, int i, int n, const int64_t *vals) {
  tc_in(tc, i, 1, (int64_t[]){n}, NULL);
  toplu_tensor_t *t = &tc->in[i];
  free(t->data);
  t->dtype = TOPLU_DTYPE_INT64;
  t->data = malloc((size_t)n * sizeof(int64_t) + 1);
  memcpy(t->data, vals, (size_t)n * sizeof(int64_t));
}

static void tc_absent(tcase_t *tc, int i) {
  if (i >= tc->n_in) tc->n_in = tc->n.n_inputs = i + 1;
  tc->inputs[i] = -1;
  free(tc->in[i].data);
  memset(&tc->in[i], 0, sizeof tc->in[i]);
  tc->in[i].ndim = -1;
}

static void tc_post(tcase_t *tc, toplu__post_kind_t kind, float alpha, float beta) {
  assert_true(tc->n.n_post < TOPLU_MAX_POST);
  toplu__post_op_t *p = &tc->n.post[tc->n.n_post++];
  memset(p, 0, sizeof *p);
  p->kind = kind;
  p->alpha = alpha;
  p->beta = beta;
}

/* A fused residual: the addend becomes input 3 (after W and a present or
 * absent B), as graph/fuse.c does; random unless vals. */
static void tc_sum(tcase_t *tc, int index, const float *vals) {
  assert_true(tc->n.n_post < TOPLU_MAX_POST);
  toplu__post_op_t *p = &tc->n.post[tc->n.n_post++];
  memset(p, 0, sizeof *p);
  p->kind = TOPLU_POST_SUM;
  p->input = index;
  tc_in(tc, index, tc->out[0].ndim, tc->out[0].dims, vals);
}

static void tc_free(tcase_t *tc) {
  for (int i = 0; i < MAX_IN; i++) {
    free(tc->in[i].data);
    tc->in[i].data = NULL;
  }
}

/* Output shapes from the op's schema (concrete, as at plan time). */
static void tc_infer(tcase_t *tc) {
  const toplu__schema_t *s = toplu__schema_find("", tc->n.op_type);
  assert_non_null(s);
  tc->n.schema = s;
  toplu_error_t err;
  memset(&err, 0, sizeof err);
  toplu__infer_ctx_t ictx = {.graph = &tc->g, .node = &tc->n, .n_in = tc->n_in, .n_out = tc->n_out, .in = tc->in,
                            .out = tc->out, .concrete = 1, .err = &err};
  toplu_status_t st = s->infer(&ictx);
  if (st) fprintf(stderr, "infer: %s\n", err.message);
  assert_int_equal(st, TOPLU_OK);
  for (int k = 0; k < 8; k++) free(ictx.out_const[k]);
}

/* ---- driving a kernel as runtime/plan.c does ---- */

static void *xalloc(size_t bytes) {
  void *p = aligned_alloc(64, (bytes + 63) & ~(size_t)63 ? (bytes + 63) & ~(size_t)63 : 64);
  assert_non_null(p);
  return p;
}

/* Run one kernel ctx through bind/run/unbind with a fresh stream. */
static toplu_status_t exec_ctx(const toplu__kernel_t *k, toplu__kernel_ctx_t *c) {
  dnnl_stream_t stream = NULL;
  toplu_status_t st = toplu__backend_stream_create(g_backend, &stream, c->err);
  if (st) return st;
  c->stream = stream;
  if (!k->bind || (st = k->bind(c)) == TOPLU_OK) {
    st = k->run(c);
    if (k->unbind && c->exec_state) k->unbind(c);
  }
  dnnl_stream_destroy(stream);
  return st;
}

/* oneDNN reorder of t's data between layouts (NULL: plain), into dst. */
static void reorder(const toplu_tensor_t *t, const void *src_md, const void *src, const void *dst_md, void *dst) {
  toplu__node_t rn;
  memset(&rn, 0, sizeof rn);
  rn.name = (char *)"reorder";
  rn.op_type = (char *)"Reorder";
  rn.domain = (char *)"toplu";
  toplu_tensor_t ti = *t, to = *t;
  ti.data = (void *)src;
  to.data = dst;
  const void *mds[2] = {src_md, dst_md};
  toplu_error_t err;
  memset(&err, 0, sizeof err);
  toplu__kernel_ctx_t c = {.node = &rn, .n_in = 1, .n_out = 1, .in = &ti, .out = &to, .in_md = mds, .threads = 1,
                          .backend = g_backend, .err = &err};
  toplu__kernel_info_t info;
  memset(&info, 0, sizeof info);
  toplu_status_t st = toplu__kernel_reorder.prepare(&c, &info);
  void *ws = NULL;
  if (!st) {
    ws = xalloc(info.workspace_bytes);
    c.workspace = ws;
    c.workspace_bytes = info.workspace_bytes;
    st = exec_ctx(&toplu__kernel_reorder, &c);
  }
  if (st) fprintf(stderr, "reorder: %s\n", err.message);
  if (c.state) toplu__kernel_reorder.release(&c);
  free(ws);
  assert_int_equal(st, TOPLU_OK);
}

/*
 * Run kernel k on tc with `threads` threads; output 0 (plain) goes to y.
 * alias >= 0: output 0 shares input alias's buffer (in place).  The status
 * of prepare is returned (err gets the message); run must then succeed.
 */
static toplu_status_t run_k(const toplu__kernel_t *k, tcase_t *tc, int threads, int alias, float *y,
                            toplu_error_t *err) {
  toplu_tensor_t ins[MAX_IN], outs[2];
  const void *in_md[MAX_IN + 1];
  void *owned[MAX_IN + 4];
  int n_owned = 0;
  memcpy(ins, tc->in, sizeof ins);
  memcpy(outs, tc->out, sizeof outs);
  memset(in_md, 0, sizeof in_md);
  memset(err, 0, sizeof *err);
  toplu__kernel_ctx_t c = {.graph = &tc->g, .node = &tc->n, .n_in = tc->n_in, .n_out = tc->n_out, .in = ins,
                          .out = outs, .threads = threads, .backend = g_backend, .in_md = in_md, .err = err};
  for (int j = 0; j < tc->n_out; j++) outs[j].data = NULL;
  toplu__kernel_info_t info;
  memset(&info, 0, sizeof info);
  info.inplace_input = (k->flags & TOPLU_KERNEL_INPLACE) ? 0 : -1;
  toplu_status_t st = k->prepare ? k->prepare(&c, &info) : TOPLU_OK;
  if (st) {
    if (c.state && k->release) k->release(&c);
    return st;
  }
  /* inputs into the layouts the kernel wants */
  for (int i = 0; i < tc->n_in && i < TOPLU_KERNEL_MAX_LAYOUT; i++) {
    if (!info.want_md[i] || !ins[i].data) continue;
    void *b = xalloc(dnnl_memory_desc_get_size(info.want_md[i]));
    reorder(&ins[i], NULL, ins[i].data, info.want_md[i], b);
    ins[i].data = owned[n_owned++] = b;
  }
  size_t ybytes = toplu_tensor_nbytes(&tc->out[0]);
  size_t obytes = info.out_md[0] ? dnnl_memory_desc_get_size(info.out_md[0]) : ybytes;
  if (alias >= 0) {
    assert_null(info.out_md[0]);
    outs[0].data = ins[alias].data;
  } else {
    outs[0].data = owned[n_owned++] = xalloc(obytes);
  }
  for (int j = 1; j < tc->n_out; j++)
    if (outs[j].ndim >= 0) outs[j].data = owned[n_owned++] = xalloc(toplu_tensor_nbytes(&outs[j]) + 8);
  void *ws = xalloc(info.workspace_bytes);
  c.workspace = ws;
  c.workspace_bytes = info.workspace_bytes;
  if (k->flags & TOPLU_KERNEL_VIEW) st = k->run(&c);
  else st = exec_ctx(k, &c);
  if (st) fprintf(stderr, "run: %s\n", err->message);
  assert_int_equal(st, TOPLU_OK);
  if (info.out_md[0]) reorder(&tc->out[0], info.out_md[0], outs[0].data, NULL, y);
  else memcpy(y, outs[0].data, ybytes);
  if (k->release) k->release(&c);
  free(ws);
  for (int i = 0; i < n_owned; i++) free(owned[i]);
  return TOPLU_OK;
}

/* Max |a - b| and max |a|. */
static double max_diff(const float *a, const float *b, int64_t n, double *scale) {
  double d = 0.0, s = 0.0;
  for (int64_t i = 0; i < n; i++) {
    double e = fabs((double)a[i] - (double)b[i]);
    if (e > d || e != e) d = e;
    if (fabs((double)a[i]) > s) s = fabs((double)a[i]);
  }
  *scale = s;
  return d;
}

static const toplu__kernel_t *ref_kernel(const char *op) {
  const toplu__kernel_t *k = toplu__kernel_find_ref("", op);
  if (!k) fprintf(stderr, "no reference kernel for %s\n", op);
  assert_non_null(k);
  assert_false(k->flags & TOPLU_KERNEL_LAYOUT);
  return k;
}

/* The reference output of tc (1 thread), after checking it against 3
 * threads and, when inplace >= 0, against running in place on that input.
 * Caller frees. */
static float *ref_output(tcase_t *tc, int inplace) {
  const toplu__kernel_t *k = ref_kernel(tc->n.op_type);
  int64_t n = toplu_tensor_numel(&tc->out[0]);
  float *y1 = xalloc((size_t)n * sizeof(float) + 4), *y3 = xalloc((size_t)n * sizeof(float) + 4);
  toplu_error_t err;
  toplu_status_t st = run_k(k, tc, 1, -1, y1, &err);
  if (st) fprintf(stderr, "reference prepare: %s\n", err.message);
  assert_int_equal(st, TOPLU_OK);
  assert_int_equal(run_k(k, tc, 3, -1, y3, &err), TOPLU_OK);
  assert_memory_equal(y1, y3, (size_t)n * sizeof(float));
  if (inplace >= 0) {
    /* the input buffer is overwritten: run on a copy */
    toplu_tensor_t keep = tc->in[inplace];
    size_t b = toplu_tensor_nbytes(&keep);
    assert_int_equal(b, (size_t)n * sizeof(float));
    void *copy = xalloc(b);
    memcpy(copy, keep.data, b);
    tc->in[inplace].data = copy;
    assert_int_equal(run_k(k, tc, 2, inplace, y3, &err), TOPLU_OK);
    assert_memory_equal(y1, copy, b);
    tc->in[inplace] = keep;
    free(copy);
  }
  free(y3);
  return y1;
}

/* Reference vs oneDNN on tc; returns the reference output (caller frees). */
static float *check_case(tcase_t *tc, int inplace, const char *what) {
  float *yr = ref_output(tc, inplace);
  const toplu__kernel_t *k = toplu__kernel_find("", tc->n.op_type);
  assert_non_null(k);
  int64_t n = toplu_tensor_numel(&tc->out[0]);
  float *yd = xalloc((size_t)n * sizeof(float) + 4);
  toplu_error_t err;
  toplu_status_t st = run_k(k, tc, 2, -1, yd, &err);
  if (st) fprintf(stderr, "%s: oneDNN kernel: %s\n", what, err.message);
  assert_int_equal(st, TOPLU_OK);
  double scale, d = max_diff(yr, yd, n, &scale);
  double tol = TOL * (scale > 1.0 ? scale : 1.0);
  if (!(d <= tol)) fprintf(stderr, "%s: max |ref - oneDNN| = %g > %g (scale %g)\n", what, d, tol, scale);
  assert_true(d <= tol);
  free(yd);
  return yr;
}

static void expect_values(const float *y, const float *want, int n, double tol) {
  for (int i = 0; i < n; i++) {
    if (!(fabs((double)y[i] - (double)want[i]) <= tol)) fprintf(stderr, "y[%d] = %.9g, want %.9g\n", i, y[i], want[i]);
    assert_true(fabs((double)y[i] - (double)want[i]) <= tol);
  }
}

/* ---- Conv ---- */

typedef struct conv_case {
  int sp;                /* spatial axes */
  int64_t n, c, m, group;
  int64_t in[3], k[3];
  int64_t strides[3], dil[3], pads[6];
  const char *auto_pad;  /* NULL: attribute absent */
  int bias, kernel_shape_attr;
} conv_case_t;

static void conv_setup(tcase_t *tc, const conv_case_t *cc, uint32_t seed) {
  tc_init(tc, "Conv", 13, seed);
  int64_t xd[5] = {cc->n, cc->c}, wd[5] = {cc->m, cc->c / cc->group};
  for (int i = 0; i < cc->sp; i++) {
    xd[2 + i] = cc->in[i];
    wd[2 + i] = cc->k[i];
  }
  tc_in(tc, 0, 2 + cc->sp, xd, NULL);
  tc_in(tc, 1, 2 + cc->sp, wd, NULL);
  if (cc->bias) tc_in(tc, 2, 1, &cc->m, NULL);
  if (cc->group != 1) tc_int(tc, "group", cc->group);
  if (cc->strides[0]) tc_ints(tc, "strides", cc->sp, cc->strides);
  if (cc->dil[0]) tc_ints(tc, "dilations", cc->sp, cc->dil);
  if (cc->auto_pad) tc_str(tc, "auto_pad", cc->auto_pad);
  else tc_ints(tc, "pads", 2 * cc->sp, cc->pads);
  if (cc->kernel_shape_attr) tc_ints(tc, "kernel_shape", cc->sp, cc->k);
  tc_infer(tc);
}

static const conv_case_t conv_cases[] = {
    /* sp  n  c  m  g   in            k          strides    dil        pads             auto_pad bias ks */
    {2, 2, 3, 5, 1, {9, 9}, {3, 3}, {1, 1}, {1, 1}, {1, 1, 1, 1}, NULL, 1, 1},
    {2, 1, 4, 6, 1, {11, 7}, {3, 2}, {2, 1}, {2, 1}, {0, 1, 2, 1}, NULL, 1, 0},  /* asymmetric pads, dilation */
    {2, 2, 4, 6, 2, {8, 9}, {3, 3}, {1, 2}, {1, 1}, {1, 0, 1, 2}, NULL, 0, 1},   /* groups, no bias */
    {2, 1, 6, 6, 6, {10, 10}, {3, 3}, {2, 2}, {1, 1}, {1, 1, 1, 1}, NULL, 1, 1}, /* depthwise */
    {2, 2, 3, 4, 1, {9, 10}, {4, 3}, {2, 3}, {1, 1}, {0}, "SAME_UPPER", 1, 1},   /* odd total pad at the end */
    {2, 2, 3, 4, 1, {9, 10}, {4, 3}, {2, 3}, {1, 1}, {0}, "SAME_LOWER", 1, 1},   /* ... at the beginning */
    {2, 1, 3, 4, 1, {9, 10}, {3, 3}, {2, 2}, {1, 1}, {0}, "VALID", 1, 1},
    {2, 2, 8, 16, 1, {13, 13}, {1, 1}, {2, 2}, {1, 1}, {0, 0, 0, 0}, NULL, 1, 1}, /* resnet downsample */
    {2, 2, 3, 8, 1, {33, 31}, {7, 7}, {2, 2}, {1, 1}, {3, 3, 3, 3}, NULL, 1, 1}, /* resnet stem, threads split */
    {2, 1, 1, 8, 1, {28, 28}, {5, 5}, {1, 1}, {1, 1}, {0}, "SAME_UPPER", 1, 1},  /* MNIST conv1 */
    {1, 2, 3, 4, 1, {17}, {3}, {2}, {2}, {1, 2}, NULL, 1, 1},                     /* 1-D */
    {3, 1, 2, 3, 1, {5, 6, 7}, {3, 2, 3}, {1, 2, 1}, {1, 1, 2}, {1, 0, 1, 1, 1, 0}, NULL, 1, 1}, /* 3-D */
};

static void test_conv_vs_onednn(void **state) {
  (void)state;
  char what[64];
  for (size_t i = 0; i < sizeof conv_cases / sizeof conv_cases[0]; i++) {
    tcase_t tc;
    conv_setup(&tc, &conv_cases[i], (uint32_t)i + 1);
    snprintf(what, sizeof what, "conv case %zu", i);
    free(check_case(&tc, -1, what));
    tc_free(&tc);
  }
}

/* Fused post-ops, as graph/fuse.c leaves them: activations, the residual
 * sum (with and without a bias), chains. */
static void test_conv_post_ops(void **state) {
  (void)state;
  static const struct {
    int n;
    toplu__post_kind_t kind[3];
    float a[3], b[3];
    int bias;
  } posts[] = {
      {1, {TOPLU_POST_RELU}, {0}, {0}, 1},
      {2, {TOPLU_POST_SUM, TOPLU_POST_RELU}, {0}, {0}, 1}, /* resnet: Conv+Add+Relu */
      {2, {TOPLU_POST_SUM, TOPLU_POST_RELU}, {0}, {0}, 0}, /* addend after an absent B */
      {1, {TOPLU_POST_SUM}, {0}, {0}, 1},
      {1, {TOPLU_POST_LEAKY_RELU}, {0.1f}, {0}, 1},
      {1, {TOPLU_POST_CLIP}, {-0.25f}, {0.5f}, 1},
      {1, {TOPLU_POST_SIGMOID}, {0}, {0}, 1},
      {1, {TOPLU_POST_TANH}, {0}, {0}, 1},
      {1, {TOPLU_POST_HARD_SIGMOID}, {0.2f}, {0.5f}, 1},
      {1, {TOPLU_POST_HARD_SWISH}, {0}, {0}, 1},
      {2, {TOPLU_POST_RELU, TOPLU_POST_LINEAR}, {0, 0.5f}, {0, -0.125f}, 1},
      {3, {TOPLU_POST_SUM, TOPLU_POST_RELU, TOPLU_POST_LINEAR}, {0, 0, 2.f}, {0, 0, 1.f}, 0},
  };
  conv_case_t cc = {2, 2, 4, 6, 2, {9, 8}, {3, 3}, {2, 1}, {1, 1}, {1, 1, 1, 1}, NULL, 1, 1};
  char what[64];
  for (size_t i = 0; i < sizeof posts / sizeof posts[0]; i++) {
    tcase_t tc;
    cc.bias = posts[i].bias;
    conv_setup(&tc, &cc, 100 + (uint32_t)i);
    int sum = -1;
    for (int p = 0; p < posts[i].n; p++) {
      if (posts[i].kind[p] == TOPLU_POST_SUM) {
        if (!cc.bias) tc_absent(&tc, 2);
        tc_sum(&tc, 3, NULL);
        sum = 3;
      } else {
        tc_post(&tc, posts[i].kind[p], posts[i].a[p], posts[i].b[p]);
      }
    }
    snprintf(what, sizeof what, "conv post-op case %zu", i);
    free(check_case(&tc, sum, what));
    tc_free(&tc);
  }
}

/* By hand: X = 1..9 (3x3), W = [[1, 2], [3, 4]], B = -50:
 * conv = [37, 47; 67, 77], + B = [-13, -3; 17, 27], + addend [1, 10; -20, 0]
 * = [-12, 7; -3, 27], Relu = [0, 7; 0, 27]. */
static void test_conv_by_hand(void **state) {
  (void)state;
  tcase_t tc;
  tc_init(&tc, "Conv", 11, 1);
  const float x[9] = {1, 2, 3, 4, 5, 6, 7, 8, 9}, w[4] = {1, 2, 3, 4}, b[1] = {-50}, add[4] = {1, 10, -20, 0};
  tc_in(&tc, 0, 4, (int64_t[]){1, 1, 3, 3}, x);
  tc_in(&tc, 1, 4, (int64_t[]){1, 1, 2, 2}, w);
  tc_in(&tc, 2, 1, (int64_t[]){1}, b);
  tc_infer(&tc);
  tc_sum(&tc, 3, add);
  tc_post(&tc, TOPLU_POST_RELU, 0, 0);
  float *y = check_case(&tc, 3, "conv by hand");
  expect_values(y, (const float[]){0, 7, 0, 27}, 4, 0.0);
  free(y);
  tc_free(&tc);
  /* 3x3 of ones, stride 2, pads 1 on 1..9: window sums 12, 16, 24, 28 */
  tc_init(&tc, "Conv", 11, 2);
  const float ones[9] = {1, 1, 1, 1, 1, 1, 1, 1, 1};
  tc_in(&tc, 0, 4, (int64_t[]){1, 1, 3, 3}, x);
  tc_in(&tc, 1, 4, (int64_t[]){1, 1, 3, 3}, ones);
  tc_ints(&tc, "strides", 2, (int64_t[]){2, 2});
  tc_ints(&tc, "pads", 4, (int64_t[]){1, 1, 1, 1});
  tc_infer(&tc);
  y = check_case(&tc, -1, "strided conv by hand");
  assert_int_equal(toplu_tensor_numel(&tc.out[0]), 4);
  expect_values(y, (const float[]){12, 16, 24, 28}, 4, 0.0);
  free(y);
  tc_free(&tc);
}

/* The comparison fails when the kernels compute different things: one
 * weight changed for the oneDNN run only. */
static void test_compare_detects_difference(void **state) {
  (void)state;
  tcase_t tc;
  conv_setup(&tc, &conv_cases[0], 7);
  float *yr = ref_output(&tc, -1);
  ((float *)tc.in[1].data)[5] += 0.01f;
  int64_t n = toplu_tensor_numel(&tc.out[0]);
  float *yd = xalloc((size_t)n * sizeof(float));
  toplu_error_t err;
  assert_int_equal(run_k(toplu__kernel_find("", "Conv"), &tc, 1, -1, yd, &err), TOPLU_OK);
  double scale, d = max_diff(yr, yd, n, &scale);
  assert_true(d > TOL * (scale > 1.0 ? scale : 1.0));
  free(yr);
  free(yd);
  tc_free(&tc);
}

/* ---- Gemm / MatMul ---- */

static void test_gemm(void **state) {
  (void)state;
  static const struct {
    int64_t m, n, k;
    int ta, tb;
    float alpha, beta;
    int c_ndim;
    int64_t c_dims[2];
    int relu;
  } cases[] = {
      {5, 7, 9, 0, 0, 1.f, 1.f, 2, {5, 7}, 0},  {5, 7, 9, 1, 0, 0.5f, 2.f, 1, {7}, 0},
      {5, 7, 9, 0, 1, 1.f, 1.f, 2, {1, 7}, 1},  {5, 7, 9, 1, 1, -1.5f, 0.25f, 2, {5, 1}, 0},
      {3, 4, 6, 0, 1, 1.f, 1.f, 0, {0}, 0},      {3, 4, 6, 0, 0, 2.f, 3.f, 1, {1}, 1},
      {3, 4, 6, 0, 0, 1.f, 0.f, 2, {3, 4}, 0},   {3, 4, 6, 0, 1, 1.f, 1.f, -1, {0}, 1}, /* no C (opset 13) */
      {2, 1000, 512, 0, 1, 1.f, 1.f, 1, {1000}, 0},                                /* resnet fc */
  };
  char what[64];
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    tcase_t tc;
    tc_init(&tc, "Gemm", 13, 200 + (uint32_t)i);
    int64_t ad[2] = {cases[i].ta ? cases[i].k : cases[i].m, cases[i].ta ? cases[i].m : cases[i].k};
    int64_t bd[2] = {cases[i].tb ? cases[i].n : cases[i].k, cases[i].tb ? cases[i].k : cases[i].n};
    tc_in(&tc, 0, 2, ad, NULL);
    tc_in(&tc, 1, 2, bd, NULL);
    if (cases[i].c_ndim >= 0) tc_in(&tc, 2, cases[i].c_ndim, cases[i].c_dims, NULL);
    if (cases[i].ta) tc_int(&tc, "transA", 1);
    if (cases[i].tb) tc_int(&tc, "transB", 1);
    tc_float(&tc, "alpha", cases[i].alpha);
    tc_float(&tc, "beta", cases[i].beta);
    tc_infer(&tc);
    if (cases[i].relu) tc_post(&tc, TOPLU_POST_RELU, 0, 0);
    snprintf(what, sizeof what, "gemm case %zu", i);
    free(check_case(&tc, -1, what));
    tc_free(&tc);
  }
  /* By hand: A = [1 2; 3 4], B = [5 6; 7 8] with transB: A B' = [17 23; 39 53];
   * alpha 2, beta 0.5, C = [1, -2]: [34.5 45; 78.5 105]. */
  tcase_t tc;
  tc_init(&tc, "Gemm", 11, 1);
  tc_in(&tc, 0, 2, (int64_t[]){2, 2}, (const float[]){1, 2, 3, 4});
  tc_in(&tc, 1, 2, (int64_t[]){2, 2}, (const float[]){5, 6, 7, 8});
  tc_in(&tc, 2, 1, (int64_t[]){2}, (const float[]){1, -2});
  tc_int(&tc, "transB", 1);
  tc_float(&tc, "alpha", 2.f);
  tc_float(&tc, "beta", 0.5f);
  tc_infer(&tc);
  float *y = check_case(&tc, -1, "gemm by hand");
  expect_values(y, (const float[]){34.5f, 45.f, 78.5f, 105.f}, 4, 0.0);
  free(y);
  tc_free(&tc);
}

static void test_matmul(void **state) {
  (void)state;
  static const struct {
    int na, nb;
    int64_t a[4], b[4];
    int post;
  } cases[] = {
      {2, 2, {5, 7}, {7, 3}, 0},
      {1, 2, {7}, {7, 3}, 0},             /* 1-D A */
      {2, 1, {5, 7}, {7}, 0},             /* 1-D B */
      {1, 1, {7}, {7}, 0},                /* dot: a scalar */
      {4, 2, {2, 3, 4, 5}, {5, 6}, 1},    /* batched A, shared B, Relu */
      {4, 3, {2, 1, 4, 5}, {3, 5, 6}, 2}, /* batch broadcast both ways, Tanh */
      {2, 3, {4, 5}, {2, 5, 3}, 0},       /* 2-D A against batched B */
      {2, 2, {2, 256}, {256, 10}, 0},     /* MNIST's last MatMul */
  };
  char what[64];
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    tcase_t tc;
    tc_init(&tc, "MatMul", 13, 300 + (uint32_t)i);
    tc_in(&tc, 0, cases[i].na, cases[i].a, NULL);
    tc_in(&tc, 1, cases[i].nb, cases[i].b, NULL);
    tc_infer(&tc);
    if (cases[i].post == 1) tc_post(&tc, TOPLU_POST_RELU, 0, 0);
    if (cases[i].post == 2) tc_post(&tc, TOPLU_POST_TANH, 0, 0);
    snprintf(what, sizeof what, "matmul case %zu", i);
    free(check_case(&tc, -1, what));
    tc_free(&tc);
  }
  /* By hand: [1 2 3] x [1 0; 0 1; 1 1] = [4 5], shape [2] */
  tcase_t tc;
  tc_init(&tc, "MatMul", 9, 1);
  tc_in(&tc, 0, 1, (int64_t[]){3}, (const float[]){1, 2, 3});
  tc_in(&tc, 1, 2, (int64_t[]){3, 2}, (const float[]){1, 0, 0, 1, 1, 1});
  tc_infer(&tc);
  assert_int_equal(tc.out[0].ndim, 1);
  float *y = check_case(&tc, -1, "matmul by hand");
  expect_values(y, (const float[]){4, 5}, 2, 0.0);
  free(y);
  tc_free(&tc);
}

/* ---- element-wise ---- */

static void test_binary(void **state) {
  (void)state;
  static const char *ops[] = {"Add", "Sub", "Mul", "Div"};
  static const struct {
    int na, nb;
    int64_t a[5], b[5];
  } shapes[] = {
      {4, 4, {2, 3, 7, 5}, {2, 3, 7, 5}}, /* same */
      {4, 0, {2, 3, 7, 5}, {0}},          /* scalar B */
      {1, 3, {1}, {4, 5, 3}},             /* scalar-like A */
      {4, 4, {2, 6, 5, 5}, {1, 6, 1, 1}}, /* per channel */
      {3, 1, {4, 5, 9}, {9}},             /* row */
      {3, 3, {61, 1, 33}, {1, 47, 1}},    /* both broadcast */
      {5, 4, {2, 1, 3, 1, 5}, {4, 1, 6, 1}},
      {2, 2, {1, 10}, {2, 10}},           /* MNIST's bias Add, batch 2 */
  };
  char what[64];
  for (size_t o = 0; o < 4; o++)
    for (size_t i = 0; i < sizeof shapes / sizeof shapes[0]; i++) {
      tcase_t tc;
      tc_init(&tc, ops[o], 14, 400 + (uint32_t)(o * 16 + i));
      tc_in(&tc, 0, shapes[i].na, shapes[i].a, NULL);
      tc_in(&tc, 1, shapes[i].nb, shapes[i].b, NULL);
      tc_infer(&tc);
      int same = toplu_tensor_numel(&tc.in[0]) == toplu_tensor_numel(&tc.out[0]);
      snprintf(what, sizeof what, "%s shape case %zu", ops[o], i);
      free(check_case(&tc, same ? 0 : -1, what));
      tc_free(&tc);
    }
  /* By hand: [[1], [2]] + [10, 20, 30]; [1, 2] / [4] */
  tcase_t tc;
  tc_init(&tc, "Add", 7, 1);
  tc_in(&tc, 0, 2, (int64_t[]){2, 1}, (const float[]){1, 2});
  tc_in(&tc, 1, 1, (int64_t[]){3}, (const float[]){10, 20, 30});
  tc_infer(&tc);
  float *y = check_case(&tc, -1, "add by hand");
  expect_values(y, (const float[]){11, 21, 31, 12, 22, 32}, 6, 0.0);
  free(y);
  tc_free(&tc);
  tc_init(&tc, "Div", 13, 1);
  tc_in(&tc, 0, 1, (int64_t[]){2}, (const float[]){1, 2});
  tc_in(&tc, 1, 1, (int64_t[]){1}, (const float[]){4});
  tc_infer(&tc);
  y = check_case(&tc, 0, "div by hand");
  expect_values(y, (const float[]){0.25f, 0.5f}, 2, 0.0);
  free(y);
  tc_free(&tc);
}

static void test_relu(void **state) {
  (void)state;
  tcase_t tc;
  tc_init(&tc, "Relu", 14, 5);
  tc_in(&tc, 0, 4, (int64_t[]){2, 3, 17, 19}, NULL);
  tc_infer(&tc);
  free(check_case(&tc, 0, "relu"));
  tc_free(&tc);
  /* NaN stays NaN (ONNX/numpy); oneDNN's does not, so reference only */
  tc_init(&tc, "Relu", 13, 6);
  tc_in(&tc, 0, 1, (int64_t[]){4}, (const float[]){-1.f, 2.f, NAN, -0.5f});
  tc_infer(&tc);
  float *y = ref_output(&tc, 0);
  assert_true(y[0] == 0.f && y[1] == 2.f && isnan(y[2]) && y[3] == 0.f);
  free(y);
  tc_free(&tc);
}

/* ---- pooling ---- */

typedef struct pool_case {
  int sp;
  int64_t n, c, in[3], k[3], s[3], d[3], pads[6];
  const char *auto_pad;
  int ceil;
} pool_case_t;

static void pool_setup(tcase_t *tc, const pool_case_t *pc, int64_t opset, uint32_t seed) {
  tc_init(tc, "MaxPool", opset, seed);
  int64_t xd[5] = {pc->n, pc->c};
  for (int i = 0; i < pc->sp; i++) xd[2 + i] = pc->in[i];
  tc_in(tc, 0, 2 + pc->sp, xd, NULL);
  tc_ints(tc, "kernel_shape", pc->sp, pc->k);
  if (pc->s[0]) tc_ints(tc, "strides", pc->sp, pc->s);
  if (pc->d[0]) tc_ints(tc, "dilations", pc->sp, pc->d);
  if (pc->auto_pad) tc_str(tc, "auto_pad", pc->auto_pad);
  else tc_ints(tc, "pads", 2 * pc->sp, pc->pads);
  if (pc->ceil) tc_int(tc, "ceil_mode", 1);
  tc_infer(tc);
}

static void test_maxpool(void **state) {
  (void)state;
  static const pool_case_t cases[] = {
      {2, 2, 3, {8, 8}, {2, 2}, {2, 2}, {0}, {0, 0, 0, 0}, NULL, 0},          /* MNIST pool 1 */
      {2, 1, 16, {14, 14}, {3, 3}, {3, 3}, {0}, {0, 0, 0, 0}, NULL, 0},       /* MNIST pool 2 */
      {2, 2, 4, {15, 14}, {3, 3}, {2, 2}, {0}, {1, 1, 1, 1}, NULL, 0},        /* resnet stem pool */
      {2, 2, 3, {9, 10}, {3, 2}, {2, 3}, {0}, {1, 0, 0, 1}, NULL, 1},         /* ceil_mode */
      {2, 1, 3, {11, 12}, {3, 3}, {1, 2}, {2, 2}, {2, 1, 1, 2}, NULL, 0},     /* dilations */
      {2, 2, 3, {9, 10}, {4, 3}, {2, 3}, {0}, {0}, "SAME_UPPER", 0},
      {2, 2, 3, {9, 10}, {4, 3}, {2, 3}, {0}, {0}, "SAME_LOWER", 0},
      {2, 1, 3, {9, 10}, {3, 3}, {2, 2}, {0}, {0}, "VALID", 0},
      {1, 2, 3, {17}, {3}, {2}, {0}, {1, 1}, NULL, 1},                        /* 1-D */
      {3, 1, 2, {5, 6, 7}, {2, 3, 2}, {2, 1, 2}, {0}, {0, 1, 0, 0, 1, 1}, NULL, 0}, /* 3-D */
      {2, 4, 32, {40, 40}, {3, 3}, {2, 2}, {0}, {1, 1, 1, 1}, NULL, 0},       /* threads split */
  };
  char what[64];
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    tcase_t tc;
    pool_setup(&tc, &cases[i], 12, 500 + (uint32_t)i);
    snprintf(what, sizeof what, "maxpool case %zu", i);
    free(check_case(&tc, -1, what));
    tc_free(&tc);
  }
  /* By hand: 1..25 (5x5), 2x2 stride 2, ceil_mode: [7 9 10; 17 19 20; 22 24 25] */
  float x[25];
  for (int i = 0; i < 25; i++) x[i] = (float)(i + 1);
  tcase_t tc;
  tc_init(&tc, "MaxPool", 10, 1);
  tc_in(&tc, 0, 4, (int64_t[]){1, 1, 5, 5}, x);
  tc_ints(&tc, "kernel_shape", 2, (int64_t[]){2, 2});
  tc_ints(&tc, "strides", 2, (int64_t[]){2, 2});
  tc_int(&tc, "ceil_mode", 1);
  tc_infer(&tc);
  assert_int_equal(toplu_tensor_numel(&tc.out[0]), 9);
  float *y = check_case(&tc, -1, "maxpool by hand");
  expect_values(y, (const float[]){7, 9, 10, 17, 19, 20, 22, 24, 25}, 9, 0.0);
  free(y);
  /* a NaN in a window gives NaN (reference only) */
  ((float *)tc.in[0].data)[0] = NAN;
  y = ref_output(&tc, -1);
  assert_true(isnan(y[0]) && y[1] == 9.f);
  free(y);
  tc_free(&tc);
}

static void test_global_average_pool(void **state) {
  (void)state;
  static const struct {
    int nd;
    int64_t d[5];
  } shapes[] = {{4, {2, 5, 7, 7}}, {3, {2, 3, 11}}, {5, {1, 2, 3, 4, 5}}, {4, {2, 512, 7, 7}}};
  char what[64];
  for (size_t i = 0; i < sizeof shapes / sizeof shapes[0]; i++) {
    tcase_t tc;
    tc_init(&tc, "GlobalAveragePool", 13, 600 + (uint32_t)i);
    tc_in(&tc, 0, shapes[i].nd, shapes[i].d, NULL);
    tc_infer(&tc);
    snprintf(what, sizeof what, "global average pool case %zu", i);
    free(check_case(&tc, -1, what));
    tc_free(&tc);
  }
  tcase_t tc;
  tc_init(&tc, "GlobalAveragePool", 1, 1);
  tc_in(&tc, 0, 4, (int64_t[]){1, 2, 2, 2}, (const float[]){1, 2, 3, 4, -1, -1, -1, 5});
  tc_infer(&tc);
  float *y = check_case(&tc, -1, "global average pool by hand");
  expect_values(y, (const float[]){2.5f, 0.5f}, 2, 0.0);
  free(y);
  tc_free(&tc);
}

/* ---- Softmax ---- */

static void test_softmax(void **state) {
  (void)state;
  static const struct {
    int64_t opset, axis; /* axis 99: attribute absent */
    int nd;
    int64_t d[4];
  } cases[] = {
      {13, 99, 2, {2, 1000}}, {13, 1, 3, {2, 5, 7}}, {13, 0, 3, {4, 3, 5}}, {13, -2, 4, {2, 3, 4, 5}},
      {11, 99, 3, {2, 3, 4}}, {11, 0, 3, {2, 3, 4}}, {11, 2, 3, {2, 3, 4}}, {1, -1, 2, {3, 9}},
  };
  char what[64];
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    tcase_t tc;
    tc_init(&tc, "Softmax", cases[i].opset, 700 + (uint32_t)i);
    float *x = tc_in(&tc, 0, cases[i].nd, cases[i].d, NULL);
    for (int64_t k = 0; k < toplu_tensor_numel(&tc.in[0]); k++) x[k] *= 8.f;
    if (cases[i].axis != 99) tc_int(&tc, "axis", cases[i].axis);
    tc_infer(&tc);
    snprintf(what, sizeof what, "softmax case %zu", i);
    free(check_case(&tc, 0, what));
    tc_free(&tc);
  }
  /* By hand, x = [0, 0; 0, ln 5] with axis 0.  Softmax-11 coerces to
   * [1, 4]: e^x / 8 = [1/8, 1/8; 1/8, 5/8].  Softmax-13 goes down the
   * columns: [1/2, 1/6; 1/2, 5/6].  Large offsets check the max subtraction. */
  const float x[4] = {1000.f, 1000.f, 1000.f, 1000.f + logf(5.f)};
  for (int v = 0; v < 2; v++) {
    tcase_t tc;
    tc_init(&tc, "Softmax", v ? 13 : 11, 1);
    tc_in(&tc, 0, 2, (int64_t[]){2, 2}, x);
    tc_int(&tc, "axis", 0);
    tc_infer(&tc);
    float *y = check_case(&tc, -1, "softmax by hand");
    if (v) expect_values(y, (const float[]){0.5f, 1.f / 6.f, 0.5f, 5.f / 6.f}, 4, 1e-4);
    else expect_values(y, (const float[]){0.125f, 0.125f, 0.125f, 0.625f}, 4, 1e-4);
    free(y);
    tc_free(&tc);
  }
}

/* ---- views ---- */

static void test_views(void **state) {
  (void)state;
  tcase_t tc;
  tc_init(&tc, "Flatten", 13, 1);
  tc_in(&tc, 0, 4, (int64_t[]){2, 3, 4, 5}, NULL);
  tc_int(&tc, "axis", 2);
  tc_infer(&tc);
  assert_int_equal(tc.out[0].ndim, 2);
  assert_int_equal(tc.out[0].dims[0], 6);
  float *y = check_case(&tc, -1, "flatten");
  assert_memory_equal(y, tc.in[0].data, 120 * sizeof(float));
  assert_true(ref_kernel("Flatten")->flags & TOPLU_KERNEL_VIEW);
  free(y);
  tc_free(&tc);
  tc_init(&tc, "Reshape", 14, 2);
  tc_in(&tc, 0, 4, (int64_t[]){2, 16, 4, 4}, NULL);
  tc_in_i64(&tc, 1, 2, (const int64_t[]){0, -1}); /* MNIST's [1, 256] with dim 0 freed */
  tc_infer(&tc);
  assert_int_equal(tc.out[0].dims[1], 256);
  y = check_case(&tc, -1, "reshape");
  assert_memory_equal(y, tc.in[0].data, 512 * sizeof(float));
  assert_true(ref_kernel("Reshape")->flags & TOPLU_KERNEL_VIEW);
  free(y);
  tc_free(&tc);
}

/* ---- what the reference backend refuses ---- */

static void test_unsupported(void **state) {
  (void)state;
  toplu_error_t err;
  float y[64];
  tcase_t tc;
  /* int8 input */
  tc_init(&tc, "Relu", 14, 1);
  tc_in(&tc, 0, 1, (int64_t[]){4}, NULL);
  tc_infer(&tc);
  tc.in[0].dtype = TOPLU_DTYPE_INT8;
  tc.out[0].dtype = TOPLU_DTYPE_INT8;
  assert_int_equal(run_k(ref_kernel("Relu"), &tc, 1, -1, y, &err), TOPLU_ERR_UNSUPPORTED);
  assert_non_null(strstr(err.message, "float32"));
  assert_non_null(strstr(err.message, "int8"));
  tc_free(&tc);
  /* MaxPool's Indices output */
  tc_init(&tc, "MaxPool", 12, 1);
  tc_in(&tc, 0, 4, (int64_t[]){1, 1, 4, 4}, NULL);
  tc_ints(&tc, "kernel_shape", 2, (int64_t[]){2, 2});
  tc.n_out = tc.n.n_outputs = 2;
  tc.outputs[1] = 101;
  tc_infer(&tc);
  assert_int_equal(run_k(ref_kernel("MaxPool"), &tc, 1, -1, y, &err), TOPLU_ERR_UNSUPPORTED);
  assert_non_null(strstr(err.message, "Indices"));
  tc_free(&tc);
  /* Softmax axis out of range */
  tc_init(&tc, "Softmax", 13, 1);
  tc_in(&tc, 0, 2, (int64_t[]){2, 3}, NULL);
  tc.out[0] = tc.in[0];
  tc.out[0].data = NULL;
  tc_int(&tc, "axis", 2);
  assert_int_equal(run_k(ref_kernel("Softmax"), &tc, 1, -1, y, &err), TOPLU_ERR_INVALID_MODEL);
  tc_free(&tc);
  /* ops outside the backend */
  assert_null(toplu__kernel_find_ref("", "ConvTranspose"));
  assert_null(toplu__kernel_find_ref("toplu", "Conv"));
  assert_non_null(toplu__kernel_find_ref("ai.onnx", "Conv"));
}

/* ---- whole models on the reference kernels ---- */

/* Run g node by node on the reference kernels with input x (dims xd, batch
 * dim 0 as given): inference and folding at these shapes as a plan does,
 * then every node that is left.  Returns output 0 (malloc'ed), *n its size. */
static float *run_graph_ref(toplu__graph_t *g, int ndim, const int64_t *xd, const float *x, int64_t *n) {
  toplu_error_t err;
  memset(&err, 0, sizeof err);
  toplu__value_table_t *t = toplu__value_table_create(g);
  assert_non_null(t);
  assert_int_equal(g->n_inputs, 1);
  toplu_tensor_t *in = &t->vals[g->inputs[0]];
  in->dtype = TOPLU_DTYPE_FLOAT;
  in->ndim = ndim;
  memcpy(in->dims, xd, (size_t)ndim * sizeof *xd);
  in->data = NULL; /* not a constant: nothing downstream folds */
  toplu_status_t st = toplu__infer_graph(g, t, 1, toplu__plan_eval_node, g_backend, &err);
  if (st) fprintf(stderr, "infer: %s\n", err.message);
  assert_int_equal(st, TOPLU_OK);
  in->data = (void *)x;
  int ran = 0;
  for (int ni = 0; ni < g->n_nodes; ni++) {
    const toplu__node_t *nd = &g->nodes[ni];
    if (nd->dead || t->folded[ni]) continue;
    const toplu__kernel_t *k = toplu__kernel_find_ref(nd->domain, nd->op_type);
    if (!k) fprintf(stderr, "%s: no reference kernel for %s\n", g->path, nd->fused_name ? nd->fused_name : nd->op_type);
    assert_non_null(k);
    toplu_tensor_t ins[16], outs[4];
    assert_true(nd->n_inputs <= 16 && nd->n_outputs <= 4);
    for (int j = 0; j < nd->n_inputs; j++) {
      if (nd->inputs[j] < 0) {
        memset(&ins[j], 0, sizeof ins[j]);
        ins[j].ndim = -1;
      } else {
        ins[j] = t->vals[nd->inputs[j]];
      }
    }
    for (int j = 0; j < nd->n_outputs; j++) {
      outs[j] = nd->outputs[j] >= 0 ? t->vals[nd->outputs[j]] : (toplu_tensor_t){.ndim = -1};
      outs[j].data = NULL;
    }
    toplu__kernel_ctx_t c = {.graph = g, .node = nd, .n_in = nd->n_inputs, .n_out = nd->n_outputs, .in = ins,
                            .out = outs, .threads = 2, .err = &err};
    toplu__kernel_info_t info;
    memset(&info, 0, sizeof info);
    info.inplace_input = -1;
    st = k->prepare ? k->prepare(&c, &info) : TOPLU_OK;
    if (st) fprintf(stderr, "prepare: %s\n", err.message);
    assert_int_equal(st, TOPLU_OK);
    for (int j = 0; j < nd->n_outputs; j++) {
      if (nd->outputs[j] < 0) continue;
      outs[j].data = malloc(toplu_tensor_nbytes(&outs[j]) + 4);
      assert_non_null(outs[j].data);
    }
    void *ws = xalloc(info.workspace_bytes);
    c.workspace = ws;
    c.workspace_bytes = info.workspace_bytes;
    assert_int_equal(k->run(&c), TOPLU_OK); /* no stream: the reference kernels need none */
    if (k->release) k->release(&c);
    free(ws);
    for (int j = 0; j < nd->n_outputs; j++) {
      int v = nd->outputs[j];
      if (v < 0) continue;
      if (t->owned[v]) free(t->vals[v].data);
      t->vals[v] = outs[j];
      t->owned[v] = 1;
    }
    ran++;
  }
  assert_true(ran > 0);
  const toplu_tensor_t *y = &t->vals[g->outputs[0]];
  assert_non_null(y->data);
  *n = toplu_tensor_numel(y);
  float *out = malloc((size_t)*n * sizeof(float) + 4);
  memcpy(out, y->data, (size_t)*n * sizeof(float));
  in->data = NULL;
  toplu__value_table_free(g, t);
  return out;
}

/* Model at path, batch `batch` of random inputs in [0, 1): the reference
 * kernels against a oneDNN session. */
static void check_model(const char *path, int optimize, int batch, double *max_d) {
  toplu_error_t err;
  memset(&err, 0, sizeof err);
  toplu_model_options_t mo = {.no_optimize = !optimize};
  toplu_model_t *m = NULL;
  toplu_status_t st = toplu_model_load(path, &mo, &m, &err);
  if (st) fprintf(stderr, "%s: %s\n", path, err.message);
  assert_int_equal(st, TOPLU_OK);
  const toplu_value_info_t *vi = toplu_model_input(m, 0);
  toplu_tensor_t x;
  memset(&x, 0, sizeof x);
  int64_t dims[TOPLU_MAX_DIMS];
  for (int i = 0; i < vi->ndim; i++) dims[i] = vi->dims[i] < 0 ? batch : vi->dims[i];
  assert_int_equal(dims[0], batch);
  assert_int_equal(toplu_tensor_alloc(&x, TOPLU_DTYPE_FLOAT, vi->ndim, dims), TOPLU_OK);
  uint32_t seed = 12345;
  float *xp = x.data;
  for (int64_t i = 0; i < toplu_tensor_numel(&x); i++) xp[i] = urand(&seed) * 0.5f + 0.5f;
  int64_t n;
  float *yr = run_graph_ref(m->graph, vi->ndim, dims, xp, &n);
  toplu_session_options_t so;
  toplu_session_options_init(&so);
  so.threads = 2;
  toplu_session_t *s = NULL;
  assert_int_equal(toplu_session_create(m, &so, &s, &err), TOPLU_OK);
  toplu_tensor_t y;
  memset(&y, 0, sizeof y);
  st = toplu_session_run(s, &x, 1, &y, 1);
  if (st) fprintf(stderr, "session: %s\n", toplu_session_last_error(s));
  assert_int_equal(st, TOPLU_OK);
  assert_int_equal(toplu_tensor_numel(&y), n);
  double scale, d = max_diff(yr, y.data, n, &scale);
  fprintf(stderr, "%s (%s, batch %d): max |ref - oneDNN| = %.3g on outputs up to %.3g\n", path,
          optimize ? "optimised" : "unoptimised", batch, d, scale);
  assert_true(d <= TOL * (scale > 1.0 ? scale : 1.0));
  if (max_d) *max_d = d;
  toplu_tensor_free(&y);
  toplu_session_destroy(s);
  toplu_tensor_free(&x);
  free(yr);
  toplu_model_destroy(m);
}

static void test_mnist(void **state) {
  (void)state;
  if (!g_mnist_path || access(g_mnist_path, R_OK)) {
    fprintf(stderr, "MNIST model not found (%s)\n", g_mnist_path ? g_mnist_path : "no path given");
    skip();
  }
  check_model(g_mnist_path, 1, 1, NULL);
  check_model(g_mnist_path, 0, 1, NULL);
}

/* MNIST fixes its batch dim to 1, so the model holds a second graph with
 * dim 0 freed (runtime/model.c).  Its weights must be the main graph's
 * (one copy: a ResNet-50 exported at batch 1 held 202 MB after loading
 * instead of 104 before they were shared), and a batch of 3 through the
 * freed graph must give each row what a batch of 1 gives it. */
static void test_fixed_batch_shares_weights(void **state) {
  (void)state;
  if (!g_mnist_path || access(g_mnist_path, R_OK)) skip();
  toplu_error_t err;
  toplu_model_t *m = NULL;
  assert_int_equal(toplu_model_load(g_mnist_path, NULL, &m, &err), TOPLU_OK);
  assert_true(toplu_model_fixed_batch(m));
  assert_non_null(m->batched);
  int64_t shared = 0, own = 0, big = 0;
  for (int v = 0; v < m->batched->n_values; v++) {
    const toplu__value_t *x = &m->batched->values[v];
    if (!x->konst.data) continue;
    int64_t n = toplu_tensor_numel(&x->konst);
    if (x->konst_shared) {
      shared += n;
      int found = 0;
      for (int w = 0; w < m->graph->n_values && !found; w++)
        found = m->graph->values[w].konst.data == x->konst.data && !strcmp(m->graph->values[w].name, x->name);
      assert_true(found); /* the very bytes of the main graph's constant of that name */
    } else {
      own += n;
      if (n >= 64) big++;
    }
  }
  fprintf(stderr, "MNIST's batch-free graph: %lld constant elements shared, %lld its own (%lld tensors of 64+)\n",
          (long long)shared, (long long)own, (long long)big);
  assert_true(shared >= 5900); /* its weights and biases: the file holds 5,998 parameters */
  assert_int_equal(big, 0);
  /* batch 3 through the shared weights against each row alone */
  toplu_session_options_t o;
  toplu_session_options_init(&o);
  o.threads = 1;
  o.batch_override = 1;
  toplu_session_t *s = NULL;
  assert_int_equal(toplu_session_create(m, &o, &s, &err), TOPLU_OK);
  static float x[3 * 784];
  for (int i = 0; i < 3 * 784; i++) x[i] = (float)((i * 37 + (i / 784) * 11) % 255);
  toplu_tensor_t in = {.dtype = TOPLU_DTYPE_FLOAT, .ndim = 4, .dims = {3, 1, 28, 28}, .data = x};
  toplu_tensor_t y = {0};
  assert_int_equal(toplu_session_run(s, &in, 1, &y, 1), TOPLU_OK);
  assert_int_equal(y.dims[0], 3);
  for (int r = 0; r < 3; r++) {
    toplu_tensor_t one = {.dtype = TOPLU_DTYPE_FLOAT, .ndim = 4, .dims = {1, 1, 28, 28}, .data = x + r * 784};
    toplu_tensor_t y1 = {0};
    assert_int_equal(toplu_session_run(s, &one, 1, &y1, 1), TOPLU_OK);
    for (int k = 0; k < 10; k++) {
      float a = ((const float *)y.data)[r * 10 + k], b = ((const float *)y1.data)[k];
      assert_true(fabsf(a - b) <= 1e-4f * (1.f + fabsf(b)));
    }
    toplu_tensor_free(&y1);
  }
  toplu_tensor_free(&y);
  toplu_session_destroy(s);
  toplu_model_destroy(m);
}

static void test_resnet18(void **state) {
  (void)state;
  char path[4096];
  const char *cache = getenv("TOPLU_CACHE"), *home = getenv("HOME");
  if (cache && cache[0]) snprintf(path, sizeof path, "%s/models/torchvision/resnet18.onnx", cache);
  else snprintf(path, sizeof path, "%s/.cache/toplu/models/torchvision/resnet18.onnx", home ? home : ".");
  if (access(path, R_OK)) {
    fprintf(stderr, "resnet18 not found at %s (scripts/fetch-models.sh fetches it)\n", path);
    skip();
  }
  check_model(path, 1, 2, NULL);
}

static int setup(void **state) {
  (void)state;
  toplu_error_t err;
  return toplu__backend_create(&g_backend, &err) == TOPLU_OK ? 0 : -1;
}

static int teardown(void **state) {
  (void)state;
  toplu__backend_destroy(g_backend);
  g_backend = NULL;
  return 0;
}

int main(int argc, char **argv) {
  g_mnist_path = argc > 1 ? argv[1] : NULL;
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_conv_vs_onednn),
      cmocka_unit_test(test_conv_post_ops),
      cmocka_unit_test(test_conv_by_hand),
      cmocka_unit_test(test_compare_detects_difference),
      cmocka_unit_test(test_gemm),
      cmocka_unit_test(test_matmul),
      cmocka_unit_test(test_binary),
      cmocka_unit_test(test_relu),
      cmocka_unit_test(test_maxpool),
      cmocka_unit_test(test_global_average_pool),
      cmocka_unit_test(test_softmax),
      cmocka_unit_test(test_views),
      cmocka_unit_test(test_unsupported),
      cmocka_unit_test(test_mnist),
      cmocka_unit_test(test_fixed_batch_shares_weights),
      cmocka_unit_test(test_resnet18),
  };
  return cmocka_run_group_tests(tests, setup, teardown);
}
