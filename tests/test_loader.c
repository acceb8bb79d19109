/*
 * tests/test_loader.c - malformed models must fail to load with the right
 * status and a message naming the file, the node and the reason.
 *
 * The models are written at test time by a small protobuf encoder below
 * (field numbers from onnx.proto: ModelProto, GraphProto, NodeProto,
 * AttributeProto, TensorProto, ValueInfoProto, TypeProto), into a fresh
 * temporary directory, so no binary fixtures are needed.  Statuses follow
 * include/toplu/model.h: TOPLU_ERR_PARSE for bytes that are not a model,
 * TOPLU_ERR_INVALID_MODEL for well-formed files describing a bad graph,
 * TOPLU_ERR_UNSUPPORTED for valid models toplu lacks something for,
 * TOPLU_ERR_IO for files that cannot be read.
 */
#include <dirent.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "toplu/toplu.h"

/* ---- a minimal protobuf writer ---- */

typedef struct pb {
  unsigned char *d;
  size_t n, cap;
} pb_t;

/* Append n raw bytes. */
static void pb_raw(pb_t *b, const void *p, size_t n) {
  if (b->n + n > b->cap) {
    size_t cap = b->cap ? b->cap : 256;
    while (cap < b->n + n) cap *= 2;
    b->d = realloc(b->d, cap);
    assert_non_null(b->d);
    b->cap = cap;
  }
  if (n) memcpy(b->d + b->n, p, n);
  b->n += n;
}

/* Append a base-128 varint. */
static void pb_varint(pb_t *b, uint64_t v) {
  unsigned char tmp[10];
  size_t k = 0;
  do {
    tmp[k] = (unsigned char)(v & 0x7f);
    v >>= 7;
    if (v) tmp[k] |= 0x80;
    k++;
  } while (v);
  pb_raw(b, tmp, k);
}

/* Field key: field number and wire type (0 varint, 2 length-delimited, 5 fixed32). */
static void pb_key(pb_t *b, int field, int wire) { pb_varint(b, ((uint64_t)field << 3) | (uint64_t)wire); }

static void pb_int(pb_t *b, int field, int64_t v) {
  pb_key(b, field, 0);
  pb_varint(b, (uint64_t)v);
}

static void pb_float(pb_t *b, int field, float v) {
  pb_key(b, field, 5);
  unsigned char le[4];
  uint32_t u;
  memcpy(&u, &v, 4);
  for (int i = 0; i < 4; i++) le[i] = (unsigned char)(u >> (8 * i));
  pb_raw(b, le, 4);
}

static void pb_bytes(pb_t *b, int field, const void *p, size_t n) {
  pb_key(b, field, 2);
  pb_varint(b, n);
  pb_raw(b, p, n);
}

static void pb_str(pb_t *b, int field, const char *s) { pb_bytes(b, field, s, strlen(s)); }

/* Append sub as a length-delimited field and free it. */
static void pb_msg(pb_t *b, int field, pb_t *sub) {
  pb_bytes(b, field, sub->d, sub->n);
  free(sub->d);
  memset(sub, 0, sizeof *sub);
}

/* ---- ONNX messages ---- */

enum { ATTR_FLOAT = 1, ATTR_INT = 2, ATTR_STRING = 3, ATTR_INTS = 7 };

/* ValueInfoProto of a tensor; a dim < 0 becomes dim_param "N". */
static pb_t value_info(const char *name, int elem, int ndim, const int64_t *dims) {
  pb_t shape = {0}, tensor = {0}, type = {0}, vi = {0};
  for (int i = 0; i < ndim; i++) {
    pb_t dim = {0};
    if (dims[i] >= 0) pb_int(&dim, 1, dims[i]);
    else pb_str(&dim, 2, "N");
    pb_msg(&shape, 1, &dim);
  }
  pb_int(&tensor, 1, elem);
  if (ndim >= 0) {
    pb_bytes(&tensor, 2, shape.d, shape.n); /* an empty shape (scalar) is still present */
    free(shape.d);
  }
  pb_msg(&type, 1, &tensor);
  pb_str(&vi, 1, name);
  pb_msg(&vi, 2, &type);
  return vi;
}

/* TensorProto with raw_data (nbytes from data; the dims may disagree on purpose). */
static pb_t tensor_raw(const char *name, int dtype, int ndim, const int64_t *dims, const void *data, size_t nbytes) {
  pb_t t = {0};
  for (int i = 0; i < ndim; i++) pb_int(&t, 1, dims[i]);
  pb_int(&t, 2, dtype);
  pb_str(&t, 8, name);
  pb_bytes(&t, 9, data, nbytes);
  return t;
}

/* TensorProto whose data is external: location, offset, length. */
static pb_t tensor_external(const char *name, int dtype, int ndim, const int64_t *dims, const char *location,
                            long offset, long length) {
  pb_t t = {0};
  for (int i = 0; i < ndim; i++) pb_int(&t, 1, dims[i]);
  pb_int(&t, 2, dtype);
  pb_str(&t, 8, name);
  char num[32];
  const char *keys[3] = {"location", "offset", "length"};
  for (int k = 0; k < 3; k++) {
    pb_t e = {0};
    pb_str(&e, 1, keys[k]);
    if (k == 0) pb_str(&e, 2, location);
    else {
      snprintf(num, sizeof num, "%ld", k == 1 ? offset : length);
      pb_str(&e, 2, num);
    }
    pb_msg(&t, 13, &e);
  }
  pb_int(&t, 14, 1); /* data_location EXTERNAL */
  return t;
}

/* Append each comma-separated name of list (empty names kept) as field. */
static void pb_names(pb_t *b, int field, const char *list) {
  if (!list) return;
  const char *p = list;
  for (;;) {
    const char *e = strchr(p, ',');
    size_t n = e ? (size_t)(e - p) : strlen(p);
    pb_bytes(b, field, p, n);
    if (!e) break;
    p = e + 1;
  }
}

/* NodeProto: inputs and outputs as comma-separated names; attrs (consumed) may be NULL. */
static pb_t node(const char *op, const char *name, const char *inputs, const char *outputs, pb_t *attrs, int n_attrs) {
  pb_t nd = {0};
  pb_names(&nd, 1, inputs);
  pb_names(&nd, 2, outputs);
  pb_str(&nd, 3, name);
  pb_str(&nd, 4, op);
  for (int i = 0; i < n_attrs; i++) pb_msg(&nd, 5, &attrs[i]);
  return nd;
}

static pb_t attr_ints(const char *name, int n, const int64_t *v) {
  pb_t a = {0};
  pb_str(&a, 1, name);
  for (int i = 0; i < n; i++) pb_int(&a, 8, v[i]);
  pb_int(&a, 20, ATTR_INTS);
  return a;
}

static pb_t attr_float(const char *name, float f) {
  pb_t a = {0};
  pb_str(&a, 1, name);
  pb_float(&a, 2, f);
  pb_int(&a, 20, ATTR_FLOAT);
  return a;
}

/* GraphProto from its parts (each array consumed). */
static pb_t graph(pb_t *nodes, int n_nodes, pb_t *inits, int n_inits, pb_t *inputs, int n_inputs, pb_t *outputs,
                  int n_outputs) {
  pb_t g = {0};
  for (int i = 0; i < n_nodes; i++) pb_msg(&g, 1, &nodes[i]);
  pb_str(&g, 2, "test");
  for (int i = 0; i < n_inits; i++) pb_msg(&g, 5, &inits[i]);
  for (int i = 0; i < n_inputs; i++) pb_msg(&g, 11, &inputs[i]);
  for (int i = 0; i < n_outputs; i++) pb_msg(&g, 12, &outputs[i]);
  return g;
}

/* ModelProto: IR 8, default-domain opset `version`, the graph (consumed). */
static pb_t model_opset(pb_t *g, int64_t version) {
  pb_t m = {0}, opset = {0};
  pb_int(&m, 1, 8);
  pb_str(&m, 2, "toplu-test-loader");
  pb_str(&opset, 1, "");
  pb_int(&opset, 2, version);
  pb_msg(&m, 8, &opset);
  pb_msg(&m, 7, g);
  return m;
}

/* ModelProto: IR 8, default-domain opset 13, the graph (consumed). */
static pb_t model(pb_t *g) { return model_opset(g, 13); }

/* ---- files ---- */

static char tmpdir[256];

static int setup_dir(void **state) {
  (void)state;
  snprintf(tmpdir, sizeof tmpdir, "/tmp/toplu-test-loader-XXXXXX");
  return mkdtemp(tmpdir) ? 0 : -1;
}

static int teardown_dir(void **state) {
  (void)state;
  char cmd[512];
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", tmpdir);
  return system(cmd) == 0 ? 0 : -1;
}

/* Write n bytes to tmpdir/name; the path goes to path. */
static void write_file(const char *name, const void *data, size_t n, char *path, size_t size) {
  snprintf(path, size, "%s/%s", tmpdir, name);
  FILE *f = fopen(path, "wb");
  assert_non_null(f);
  if (n) assert_int_equal(fwrite(data, 1, n, f), n);
  assert_int_equal(fclose(f), 0);
}

/* Write a model (consumed) to tmpdir/name. */
static void write_model(const char *name, pb_t *m, char *path, size_t size) {
  write_file(name, m->d, m->n, path, size);
  free(m->d);
  memset(m, 0, sizeof *m);
}

/*
 * Load path and check the status and that the message contains the path and
 * each NULL-terminated substring.  Prints the message when a check fails.
 */
static void expect_load(const char *path, toplu_status_t want, ...) {
  toplu_error_t err;
  toplu_error_clear(&err);
  toplu_model_t *m = NULL;
  toplu_status_t st = toplu_model_load(path, NULL, &m, &err);
  if (st != want) print_error("%s: status %d (%s), expected %d (%s); message: %s\n", path, (int)st,
                              toplu_strerror(st), (int)want, toplu_strerror(want), err.message);
  int got_model = m != NULL;
  toplu_model_destroy(m);
  assert_int_equal(st, want);
  assert_false(got_model); /* a failed load leaves *out NULL */
  if (!strstr(err.message, path)) print_error("message does not name the file '%s': %s\n", path, err.message);
  assert_non_null(strstr(err.message, path));
  va_list ap;
  va_start(ap, want);
  const char *sub;
  while ((sub = va_arg(ap, const char *))) {
    if (!strstr(err.message, sub)) print_error("message lacks '%s': %s\n", sub, err.message);
    assert_non_null(strstr(err.message, sub));
  }
  va_end(ap);
}

/* Y = Relu(X), X float [N, 3]. */
static pb_t relu_model(void) {
  int64_t dims[2] = {-1, 3};
  pb_t nodes[1] = {node("Relu", "relu_node", "X", "Y", NULL, 0)};
  pb_t in[1] = {value_info("X", 1, 2, dims)}, out[1] = {value_info("Y", 1, 2, dims)};
  pb_t g = graph(nodes, 1, NULL, 0, in, 1, out, 1);
  return model(&g);
}

/* ---- tests ---- */

/* The writer itself: a well-formed model loads and runs. */
static void test_valid_model(void **state) {
  (void)state;
  char path[512];
  pb_t m = relu_model();
  write_model("valid.onnx", &m, path, sizeof path);
  toplu_error_t err;
  toplu_error_clear(&err);
  toplu_model_t *model = NULL;
  toplu_status_t st = toplu_model_load(path, NULL, &model, &err);
  if (st) print_error("%s\n", err.message);
  assert_int_equal(st, TOPLU_OK);
  assert_int_equal(toplu_model_input_count(model), 1);
  assert_int_equal(toplu_model_output_count(model), 1);
  toplu_session_t *s = NULL;
  st = toplu_session_create(model, NULL, &s, &err);
  if (st) print_error("%s\n", err.message);
  assert_int_equal(st, TOPLU_OK);
  float x[6] = {-1.5f, 2, -0.0f, 4.25f, -7, 0.5f}, want[6] = {0, 2, 0, 4.25f, 0, 0.5f};
  toplu_tensor_t in = {.dtype = TOPLU_DTYPE_FLOAT, .ndim = 2, .dims = {2, 3}, .data = x};
  toplu_tensor_t out;
  memset(&out, 0, sizeof out);
  st = toplu_session_run(s, &in, 1, &out, 1);
  if (st) print_error("%s\n", toplu_session_last_error(s));
  assert_int_equal(st, TOPLU_OK);
  assert_int_equal(out.dtype, TOPLU_DTYPE_FLOAT);
  assert_int_equal(out.ndim, 2);
  assert_int_equal(out.dims[0], 2);
  assert_int_equal(out.dims[1], 3);
  for (int i = 0; i < 6; i++) assert_float_equal(((float *)out.data)[i], want[i], 0);
  toplu_tensor_free(&out);
  toplu_session_destroy(s);
  toplu_model_destroy(model);
}

/* A call that succeeds leaves err at TOPLU_OK with an empty message, even
 * when an earlier call left an error in it (status.h). */
static void test_success_clears_error(void **state) {
  (void)state;
  char path[512], bad[512];
  pb_t m = relu_model();
  write_model("valid-clear.onnx", &m, path, sizeof path);
  snprintf(bad, sizeof bad, "%s/does-not-exist.onnx", tmpdir);
  toplu_error_t err;
  toplu_model_t *model = NULL;
  assert_int_equal(toplu_model_load(bad, NULL, &model, &err), TOPLU_ERR_IO);
  assert_true(err.message[0] != '\0');
  assert_int_equal(toplu_model_load(path, NULL, &model, &err), TOPLU_OK);
  assert_int_equal(err.status, TOPLU_OK);
  assert_string_equal(err.message, "");
  toplu_session_t *s = NULL;
  assert_int_equal(toplu_model_load(bad, NULL, &(toplu_model_t *){NULL}, &err), TOPLU_ERR_IO);
  assert_int_equal(toplu_session_create(model, NULL, &s, &err), TOPLU_OK);
  assert_int_equal(err.status, TOPLU_OK);
  assert_string_equal(err.message, "");
  toplu_session_destroy(s);
  toplu_model_destroy(model);
}

/* Shapes past 2^40 elements are refused with TOPLU_ERR_OUT_OF_MEMORY before
 * any size arithmetic can wrap (a batch of 2^55 once gave wrapped byte
 * counts, and a SIGFPE inside oneDNN for convolution models). */
static void test_huge_batch_refused(void **state) {
  (void)state;
  char path[512];
  pb_t m = relu_model();
  write_model("valid-huge.onnx", &m, path, sizeof path);
  toplu_error_t err;
  toplu_model_t *model = NULL;
  toplu_session_t *s = NULL;
  assert_int_equal(toplu_model_load(path, NULL, &model, &err), TOPLU_OK);
  assert_int_equal(toplu_session_create(model, NULL, &s, &err), TOPLU_OK);
  const int64_t batches[] = {INT64_C(1) << 20, INT64_C(1) << 55, INT64_MAX};
  for (int i = 0; i < 3; i++) {
    toplu_tensor_t x;
    memset(&x, 0, sizeof x);
    x.dtype = TOPLU_DTYPE_FLOAT;
    x.ndim = 2;
    x.dims[0] = batches[i];
    x.dims[1] = 3;
    toplu_memory_report_t r;
    toplu_status_t st = toplu_session_memory(s, &x, 1, &r);
    if (i == 0) {
      assert_int_equal(st, TOPLU_OK);
      assert_true(r.input_bytes == (size_t)3 * 4 << 20);
    } else {
      assert_int_equal(st, TOPLU_ERR_OUT_OF_MEMORY);
      assert_non_null(strstr(toplu_session_last_error(s), "more than 2^40 elements"));
    }
  }
  toplu_session_destroy(s);
  toplu_model_destroy(model);
}

/* API manners a C user tried (2026-12-05): NULL getters, a NULL outputs
 * array named as such, a tensor on another device refused, rejected inputs
 * not counted as plan-cache misses, a cut shape string that says so. */
static void test_api_manners(void **state) {
  (void)state;
  char path[512], buf[16];
  pb_t m = relu_model();
  write_model("valid-manners.onnx", &m, path, sizeof path);
  toplu_error_t err;
  toplu_model_t *model = NULL;
  toplu_session_t *s = NULL;
  assert_int_equal(toplu_model_load(path, NULL, &model, &err), TOPLU_OK);
  assert_int_equal(toplu_model_input_count(NULL), 0);
  assert_int_equal(toplu_model_output_count(NULL), 0);
  assert_null(toplu_model_input(NULL, 0));
  assert_int_equal(toplu_model_input_index(model, NULL), -1);
  assert_int_equal(toplu_model_output_index(NULL, "y"), -1);
  assert_non_null(toplu_session_last_error(NULL));
  /* a fresh user's C programs (2026-12-05, night): these getters crashed on NULL where their neighbours
   * answered 0, -1 or NULL */
  assert_int_equal(toplu_model_opset(NULL), 0);
  assert_int_equal(toplu_model_ir_version(NULL), 0);
  assert_string_equal(toplu_model_producer(NULL), "");
  assert_null(toplu_model_path(NULL));
  assert_int_equal(toplu_model_op_histogram(NULL, NULL, 5), 0);
  assert_int_equal(toplu_model_op_histogram(model, NULL, 5), 1); /* one Relu: counted, nothing filled */
  assert_int_equal(toplu_model_quantized_nodes(NULL), 0);
  assert_int_equal(toplu_model_node_count(NULL, 0), 0);
  assert_int_equal(toplu_model_node_count(NULL, 1), 0);
  assert_int_equal(toplu_model_param_count(NULL), 0);
  assert_int_equal(toplu_model_param_bytes(NULL), 0);
  assert_int_equal(toplu_model_fixed_batch(NULL), 0);
  assert_int_equal(toplu_model_input_for_spec(model, NULL), -1);
  assert_int_equal(toplu_model_input_for_spec(NULL, "x=a.npy"), -1);
  assert_null(toplu_session_model(NULL));
  assert_int_equal(toplu_session_threads(NULL), 0);
  /* and the rest of the public functions a call with every argument NULL or 0 crashed (a scan of all 150) */
  assert_int_equal(toplu_tensor_numel(NULL), 0);
  toplu_session_clear_plans(NULL);
  toplu_planner_options_init(NULL);
  toplu_tune_options_init(NULL);
  toplu_quantize_options_init(NULL);
  toplu_server_options_init(NULL);
  assert_null(toplu_batch_plan_json(NULL));
  assert_null(toplu_arch_plan_json(NULL));
  assert_null(toplu_tune_json(NULL));
  toplu_batch_plan_print(NULL, stdout);
  toplu_arch_plan_print(NULL, stdout);
  toplu_tune_print(NULL, stdout);
  assert_int_equal(toplu_tune_write(NULL, "/tmp", NULL, 0, &err), TOPLU_ERR_INVALID_ARGUMENT);
  toplu_tensor_t t;
  assert_int_equal(toplu_tensor_alloc(&t, TOPLU_DTYPE_FLOAT, 1, NULL), TOPLU_ERR_INVALID_ARGUMENT);
  assert_int_equal(toplu_session_create(model, NULL, &s, &err), TOPLU_OK);
  assert_true(toplu_session_steps(s, NULL, 0, NULL, 4) < 0);
  float x[6] = {1, -2, 3, -4, 5, -6};
  toplu_tensor_t in = {.dtype = TOPLU_DTYPE_FLOAT, .ndim = 2, .dims = {2, 3}, .data = x};
  assert_int_equal(toplu_session_run_with(s, &in, 1, NULL, 1, NULL, &err), TOPLU_ERR_INVALID_ARGUMENT);
  assert_non_null(strstr(err.message, "outputs is NULL"));
  toplu_tensor_t out;
  memset(&out, 0, sizeof out);
  assert_int_equal(toplu_session_run(s, &in, 1, &out, 1), TOPLU_OK);
  toplu_tensor_free(&out);
  toplu_plan_cache_stats_t cs;
  toplu_session_plan_cache(s, &cs);
  assert_int_equal(cs.misses, 1);
  toplu_tensor_t dev = in;
  dev.device = 3;
  assert_int_equal(toplu_session_run_with(s, &dev, 1, &out, 1, NULL, &err), TOPLU_ERR_INVALID_ARGUMENT);
  assert_non_null(strstr(err.message, "host memory"));
  toplu_tensor_t bad = in;
  bad.dims[1] = 4; /* the model takes [N, 3] */
  assert_int_not_equal(toplu_session_run_with(s, &bad, 1, &out, 1, NULL, &err), TOPLU_OK);
  toplu_session_plan_cache(s, &cs);
  assert_int_equal(cs.misses, 1); /* no plan was built for either */
  assert_int_equal(cs.n_plans, 1);
  int64_t dims[4] = {8, 3, 224, 224};
  assert_string_equal(toplu_shape_format(4, dims, buf, 8), "[8,...]");
  assert_string_equal(toplu_shape_format(4, dims, buf, sizeof buf), "[8, 3, 224,...]");
  assert_string_equal(toplu_shape_format(2, dims, buf, sizeof buf), "[8, 3]");
  /* a C developer's report (2026-12-05): crashes and misleading errors on bad arguments */
  assert_string_equal(toplu_shape_format(2, NULL, buf, sizeof buf), "[?]");
  assert_int_equal(toplu_tensor_nbytes(NULL), 0);
  assert_true(toplu_shape_numel_limited(3, NULL, 100) == UINT64_MAX);
  toplu_job_options_init(NULL);
  toplu_job_stats_t js;
  toplu_job_get_stats(NULL, &js);
  assert_int_equal(js.rows_total, 0);
  float one[1] = {1};
  toplu_tensor_t seq = {.kind = TOPLU_KIND_SEQUENCE, .dtype = TOPLU_DTYPE_FLOAT, .ndim = 1, .dims = {1}, .data = one};
  assert_int_equal(toplu_session_run_with(s, &seq, 1, &out, 1, NULL, &err), TOPLU_ERR_SHAPE); /* data not read as items */
  assert_non_null(strstr(err.message, "is a tensor, but a sequence was given"));
  toplu_planner_options_t po;
  toplu_planner_options_init(&po);
  po.threads = 1;
  po.n_batch_sizes = 3; /* batch_sizes NULL */
  toplu_batch_plan_t *bp = NULL;
  assert_int_equal(toplu_plan_model(model, &po, &bp, &err), TOPLU_ERR_INVALID_ARGUMENT);
  assert_non_null(strstr(err.message, "with their arrays"));
  toplu_batch_plan_free(bp);
  bp = NULL;
  po.n_batch_sizes = 0;
  po.n_shapes = 1; /* shapes NULL */
  assert_int_equal(toplu_plan_model(model, &po, &bp, &err), TOPLU_ERR_INVALID_ARGUMENT);
  toplu_batch_plan_free(bp);
  const char *shards[2] = {"a.jsonl", NULL};
  assert_int_equal(toplu_job_merge("m.jsonl", shards, 2, 0, NULL, 0, &err), TOPLU_ERR_INVALID_ARGUMENT);
  assert_non_null(strstr(err.message, "shards[1] is NULL"));
  assert_int_equal(toplu_profile_write_trace("t.json", NULL, -3, NULL, &err), TOPLU_ERR_INVALID_ARGUMENT);
  toplu_profile_info_t pi = {.peak_gflops = 1.0 / 0.0};
  char *tj = toplu_profile_trace_json(NULL, 0, &pi);
  assert_non_null(tj);
  assert_non_null(strstr(tj, "\"peak_gflops\":null"));
  free(tj);
  toplu_job_options_t jo;
  toplu_job_options_init(&jo);
  toplu_job_file_t *jf = NULL;
  assert_int_equal(toplu_job_options_from_json(tmpdir, &jo, &jf, &err), TOPLU_ERR_INVALID_ARGUMENT);
  assert_non_null(strstr(err.message, "is a directory"));
  toplu_session_destroy(s);
  toplu_model_destroy(model);
}

static void test_missing_file(void **state) {
  (void)state;
  char path[512];
  snprintf(path, sizeof path, "%s/does-not-exist.onnx", tmpdir);
  expect_load(path, TOPLU_ERR_IO, (const char *)NULL);
}

static void test_truncated(void **state) {
  (void)state;
  char path[512];
  pb_t m = relu_model();
  /* Cut inside the graph field (the last field): its length prefix promises more. */
  write_file("truncated.onnx", m.d, m.n - 7, path, sizeof path);
  free(m.d);
  expect_load(path, TOPLU_ERR_PARSE, "not an ONNX model", (const char *)NULL);
}

static void test_empty_file(void **state) {
  (void)state;
  char path[512];
  write_file("empty.onnx", "", 0, path, sizeof path);
  expect_load(path, TOPLU_ERR_PARSE, "the file is empty (0 bytes)", (const char *)NULL);
}

static void test_not_protobuf(void **state) {
  (void)state;
  char path[512];
  static const unsigned char junk[] = {0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01,
                                       'n',  'o',  't',  ' ',  'a',  ' ',  'm',  'o',  'd',  'e',  'l'};
  write_file("junk.onnx", junk, sizeof junk, path, sizeof path);
  expect_load(path, TOPLU_ERR_PARSE, (const char *)NULL);
  static const char text[] = "ir_version: 8\ngraph { node { op_type: \"Relu\" } }\n"; /* textproto, not binary */
  write_file("text.onnx", text, sizeof text - 1, path, sizeof path);
  expect_load(path, TOPLU_ERR_PARSE, (const char *)NULL);
}

/* Conv whose `strides` is a FLOAT instead of INTS. */
static void test_wrong_attribute_type(void **state) {
  (void)state;
  char path[512];
  int64_t xd[4] = {1, 1, 5, 5}, wd[4] = {1, 1, 3, 3}, yd[4] = {1, 1, 3, 3};
  float w[9] = {0};
  pb_t attrs[1] = {attr_float("strides", 2.0f)};
  pb_t nodes[1] = {node("Conv", "conv_node", "X,W", "Y", attrs, 1)};
  pb_t inits[1] = {tensor_raw("W", 1, 4, wd, w, sizeof w)};
  pb_t in[1] = {value_info("X", 1, 4, xd)}, out[1] = {value_info("Y", 1, 4, yd)};
  pb_t g = graph(nodes, 1, inits, 1, in, 1, out, 1);
  pb_t m = model(&g);
  write_model("wrong_attr_type.onnx", &m, path, sizeof path);
  expect_load(path, TOPLU_ERR_INVALID_MODEL, "conv_node", "strides", (const char *)NULL);
}

/* Conv whose `pads` has 3 values for a 2-D kernel (4 needed). */
static void test_bad_attribute_count(void **state) {
  (void)state;
  char path[512];
  int64_t xd[4] = {1, 1, 5, 5}, wd[4] = {1, 1, 3, 3}, yd[4] = {1, 1, 3, 3}, pads[3] = {1, 1, 1};
  float w[9] = {0};
  pb_t attrs[1] = {attr_ints("pads", 3, pads)};
  pb_t nodes[1] = {node("Conv", "conv_node", "X,W", "Y", attrs, 1)};
  pb_t inits[1] = {tensor_raw("W", 1, 4, wd, w, sizeof w)};
  pb_t in[1] = {value_info("X", 1, 4, xd)}, out[1] = {value_info("Y", 1, 4, yd)};
  pb_t g = graph(nodes, 1, inits, 1, in, 1, out, 1);
  pb_t m = model(&g);
  write_model("bad_attr_count.onnx", &m, path, sizeof path);
  expect_load(path, TOPLU_ERR_INVALID_MODEL, "conv_node", "pads", (const char *)NULL);
}

static void test_raw_data_length(void **state) {
  (void)state;
  char path[512];
  int64_t wd[2] = {2, 3}, xd[2] = {2, 3};
  float w[5] = {0}; /* 20 bytes for a [2, 3] float tensor (24) */
  pb_t nodes[1] = {node("Add", "add_node", "X,W", "Y", NULL, 0)};
  pb_t inits[1] = {tensor_raw("W", 1, 2, wd, w, sizeof w)};
  pb_t in[1] = {value_info("X", 1, 2, xd)}, out[1] = {value_info("Y", 1, 2, xd)};
  pb_t g = graph(nodes, 1, inits, 1, in, 1, out, 1);
  pb_t m = model(&g);
  write_model("raw_data_length.onnx", &m, path, sizeof path);
  expect_load(path, TOPLU_ERR_PARSE, "'W'", "raw_data", "20", "24", (const char *)NULL);
}

static void test_missing_node_input(void **state) {
  (void)state;
  char path[512];
  int64_t d[2] = {2, 3};
  pb_t nodes[1] = {node("Add", "add_node", "X,nowhere", "Y", NULL, 0)};
  pb_t in[1] = {value_info("X", 1, 2, d)}, out[1] = {value_info("Y", 1, 2, d)};
  pb_t g = graph(nodes, 1, NULL, 0, in, 1, out, 1);
  pb_t m = model(&g);
  write_model("missing_input.onnx", &m, path, sizeof path);
  expect_load(path, TOPLU_ERR_INVALID_MODEL, "add_node", "'nowhere'", (const char *)NULL);
}

static void test_unknown_op(void **state) {
  (void)state;
  char path[512];
  int64_t d[2] = {2, 3};
  pb_t nodes[1] = {node("Frobnicate", "frob_node", "X", "Y", NULL, 0)};
  pb_t in[1] = {value_info("X", 1, 2, d)}, out[1] = {value_info("Y", 1, 2, d)};
  pb_t g = graph(nodes, 1, NULL, 0, in, 1, out, 1);
  pb_t m = model(&g);
  write_model("unknown_op.onnx", &m, path, sizeof path);
  expect_load(path, TOPLU_ERR_UNSUPPORTED, "frob_node", "Frobnicate", (const char *)NULL);
}

/* T1 = Add(X, T2); T2 = Relu(T1). */
static void test_cycle(void **state) {
  (void)state;
  char path[512];
  int64_t d[2] = {2, 3};
  pb_t nodes[2] = {node("Add", "cycle_add", "X,T2", "T1", NULL, 0), node("Relu", "cycle_relu", "T1", "T2", NULL, 0)};
  pb_t in[1] = {value_info("X", 1, 2, d)}, out[1] = {value_info("T2", 1, 2, d)};
  pb_t g = graph(nodes, 2, NULL, 0, in, 1, out, 1);
  pb_t m = model(&g);
  write_model("cycle.onnx", &m, path, sizeof path);
  expect_load(path, TOPLU_ERR_INVALID_MODEL, "cycle", "cycle_", (const char *)NULL);
}

/* Two nodes produce Y. */
static void test_duplicate_output(void **state) {
  (void)state;
  char path[512];
  int64_t d[2] = {2, 3};
  pb_t nodes[2] = {node("Relu", "first_relu", "X", "Y", NULL, 0), node("Relu", "second_relu", "X", "Y", NULL, 0)};
  pb_t in[1] = {value_info("X", 1, 2, d)}, out[1] = {value_info("Y", 1, 2, d)};
  pb_t g = graph(nodes, 2, NULL, 0, in, 1, out, 1);
  pb_t m = model(&g);
  write_model("duplicate_output.onnx", &m, path, sizeof path);
  expect_load(path, TOPLU_ERR_INVALID_MODEL, "second_relu", "'Y'", (const char *)NULL);
}

/* An output listed as produced by a node and also an initializer. */
static void test_output_shadows_initializer(void **state) {
  (void)state;
  char path[512];
  int64_t d[2] = {2, 3};
  float w[6] = {0};
  pb_t nodes[1] = {node("Relu", "shadow_relu", "X", "W", NULL, 0)};
  pb_t inits[1] = {tensor_raw("W", 1, 2, d, w, sizeof w)};
  pb_t in[1] = {value_info("X", 1, 2, d)}, out[1] = {value_info("W", 1, 2, d)};
  pb_t g = graph(nodes, 1, inits, 1, in, 1, out, 1);
  pb_t m = model(&g);
  write_model("output_shadows_initializer.onnx", &m, path, sizeof path);
  expect_load(path, TOPLU_ERR_INVALID_MODEL, "shadow_relu", "'W'", (const char *)NULL);
}

/* Reshape [2, 3] to [4, 2]: 6 elements cannot become 8. */
static void test_reshape_mismatch(void **state) {
  (void)state;
  char path[512];
  int64_t xd[2] = {2, 3}, sd[1] = {2}, yd[2] = {4, 2}, shape[2] = {4, 2};
  pb_t nodes[1] = {node("Reshape", "reshape_node", "X,shape", "Y", NULL, 0)};
  pb_t inits[1] = {tensor_raw("shape", 7, 1, sd, shape, sizeof shape)};
  pb_t in[1] = {value_info("X", 1, 2, xd)}, out[1] = {value_info("Y", 1, 2, yd)};
  pb_t g = graph(nodes, 1, inits, 1, in, 1, out, 1);
  pb_t m = model(&g);
  write_model("reshape_mismatch.onnx", &m, path, sizeof path);
  expect_load(path, TOPLU_ERR_INVALID_MODEL, "reshape_node", "6", "8", (const char *)NULL);
}

/* A model from an opset newer than toplu knows is refused, not guessed at. */
static void test_opset_too_new(void **state) {
  (void)state;
  char path[512];
  int64_t d[2] = {2, 3};
  pb_t nodes[1] = {node("Relu", "relu_node", "X", "Y", NULL, 0)};
  pb_t in[1] = {value_info("X", 1, 2, d)}, out[1] = {value_info("Y", 1, 2, d)};
  pb_t g = graph(nodes, 1, NULL, 0, in, 1, out, 1);
  pb_t m = model_opset(&g, 99);
  write_model("opset99.onnx", &m, path, sizeof path);
  expect_load(path, TOPLU_ERR_UNSUPPORTED, "opset 99", "newer", (const char *)NULL);
}

/* An initializer whose dims claim ~10^11 elements but holds 24 bytes: a
 * format error naming the sizes, found before anything is allocated. */
static void test_huge_initializer_without_data(void **state) {
  (void)state;
  char path[512];
  int64_t wd[2] = {100000, 1000000}, d[2] = {2, 3};
  float w[6] = {0};
  pb_t nodes[1] = {node("Add", "add_node", "X,W", "Y", NULL, 0)};
  pb_t inits[1] = {tensor_raw("W", 1, 2, wd, w, sizeof w)};
  pb_t in[1] = {value_info("X", 1, 2, d)}, out[1] = {value_info("Y", 1, 2, d)};
  pb_t g = graph(nodes, 1, inits, 1, in, 1, out, 1);
  pb_t m = model(&g);
  write_model("huge_initializer.onnx", &m, path, sizeof path);
  expect_load(path, TOPLU_ERR_PARSE, "'W'", "24 bytes", "400000000000", (const char *)NULL);
}

static void test_rank_above_8(void **state) {
  (void)state;
  char path[512];
  int64_t d9[9] = {1, 1, 1, 1, 1, 1, 1, 1, 2};
  pb_t nodes[1] = {node("Relu", "relu_node", "X", "Y", NULL, 0)};
  pb_t in[1] = {value_info("X", 1, 9, d9)}, out[1] = {value_info("Y", 1, 9, d9)};
  pb_t g = graph(nodes, 1, NULL, 0, in, 1, out, 1);
  pb_t m = model(&g);
  write_model("rank9_input.onnx", &m, path, sizeof path);
  expect_load(path, TOPLU_ERR_UNSUPPORTED, "'X'", "rank 9", (const char *)NULL);

  /* The same as an initializer. */
  float w[2] = {1, 2};
  int64_t xd[1] = {2};
  pb_t nodes2[1] = {node("Add", "add_node", "X,W", "Y", NULL, 0)};
  pb_t inits[1] = {tensor_raw("W", 1, 9, d9, w, sizeof w)};
  pb_t in2[1] = {value_info("X", 1, 1, xd)}, out2[1] = {value_info("Y", 1, -1, NULL)};
  pb_t g2 = graph(nodes2, 1, inits, 1, in2, 1, out2, 1);
  pb_t m2 = model(&g2);
  write_model("rank9_initializer.onnx", &m2, path, sizeof path);
  expect_load(path, TOPLU_ERR_UNSUPPORTED, "'W'", "rank 9", (const char *)NULL);
}

static void test_no_outputs(void **state) {
  (void)state;
  char path[512];
  int64_t d[2] = {2, 3};
  pb_t nodes[1] = {node("Relu", "relu_node", "X", "Y", NULL, 0)};
  pb_t in[1] = {value_info("X", 1, 2, d)};
  pb_t g = graph(nodes, 1, NULL, 0, in, 1, NULL, 0);
  pb_t m = model(&g);
  write_model("no_outputs.onnx", &m, path, sizeof path);
  expect_load(path, TOPLU_ERR_INVALID_MODEL, "no outputs", (const char *)NULL);
}

/* Y = Add(X, W) with W [2, 3] float stored externally. */
static pb_t external_model(const char *location, long offset, long length) {
  int64_t d[2] = {2, 3};
  pb_t nodes[1] = {node("Add", "add_node", "X,W", "Y", NULL, 0)};
  pb_t inits[1] = {tensor_external("W", 1, 2, d, location, offset, length)};
  pb_t in[1] = {value_info("X", 1, 2, d)}, out[1] = {value_info("Y", 1, 2, d)};
  pb_t g = graph(nodes, 1, inits, 1, in, 1, out, 1);
  return model(&g);
}

static void test_external_outside_dir(void **state) {
  (void)state;
  char path[512];
  pb_t m = external_model("../outside.bin", 0, 24);
  write_model("external_dotdot.onnx", &m, path, sizeof path);
  expect_load(path, TOPLU_ERR_PARSE, "'W'", "../outside.bin", "leaves the model's directory", (const char *)NULL);
  m = external_model("/etc/passwd", 0, 24);
  write_model("external_absolute.onnx", &m, path, sizeof path);
  expect_load(path, TOPLU_ERR_PARSE, "'W'", "/etc/passwd", "leaves the model's directory", (const char *)NULL);
}

static void test_external_missing(void **state) {
  (void)state;
  char path[512];
  pb_t m = external_model("missing_weights.bin", 0, 24);
  write_model("external_missing.onnx", &m, path, sizeof path);
  expect_load(path, TOPLU_ERR_IO, "'W'", "missing_weights.bin", (const char *)NULL);
}

static void test_external_short(void **state) {
  (void)state;
  char path[512];
  float w[3] = {1, 2, 3};
  write_file("short_weights.bin", w, sizeof w, path, sizeof path);
  pb_t m = external_model("short_weights.bin", 0, 24);
  write_model("external_short.onnx", &m, path, sizeof path);
  expect_load(path, TOPLU_ERR_IO, "'W'", "short_weights.bin", (const char *)NULL);
}

/* The positive case: W at offset 16 of a side file; the model loads and Y = X + W. */
static void test_external_data_ok(void **state) {
  (void)state;
  char path[512], bin[512];
  float side[4 + 6] = {-1, -1, -1, -1, 0.5f, 1.5f, 2.5f, 3.5f, 4.5f, 5.5f};
  write_file("weights.bin", side, sizeof side, bin, sizeof bin);
  pb_t m = external_model("weights.bin", 16, 24);
  write_model("external_ok.onnx", &m, path, sizeof path);

  toplu_error_t err;
  toplu_error_clear(&err);
  toplu_model_t *model = NULL;
  toplu_status_t st = toplu_model_load(path, NULL, &model, &err);
  if (st) print_error("%s\n", err.message);
  assert_int_equal(st, TOPLU_OK);
  toplu_session_t *s = NULL;
  st = toplu_session_create(model, NULL, &s, &err);
  if (st) print_error("%s\n", err.message);
  assert_int_equal(st, TOPLU_OK);
  float x[6] = {1, 2, 3, 4, 5, 6};
  toplu_tensor_t in = {.dtype = TOPLU_DTYPE_FLOAT, .ndim = 2, .dims = {2, 3}, .data = x};
  toplu_tensor_t out;
  memset(&out, 0, sizeof out);
  st = toplu_session_run(s, &in, 1, &out, 1);
  if (st) print_error("%s\n", toplu_session_last_error(s));
  assert_int_equal(st, TOPLU_OK);
  assert_int_equal(out.dtype, TOPLU_DTYPE_FLOAT);
  assert_int_equal(out.ndim, 2);
  assert_int_equal(out.dims[0], 2);
  assert_int_equal(out.dims[1], 3);
  for (int i = 0; i < 6; i++) assert_float_equal(((float *)out.data)[i], x[i] + side[4 + i], 1e-6);
  toplu_tensor_free(&out);
  toplu_session_destroy(s);
  toplu_model_destroy(model);

  /* From a buffer there is no directory: external data is refused. */
  FILE *f = fopen(path, "rb");
  assert_non_null(f);
  unsigned char buf[4096];
  size_t n = fread(buf, 1, sizeof buf, f);
  fclose(f);
  toplu_error_clear(&err);
  st = toplu_model_load_buffer(buf, n, "in-memory.onnx", NULL, &model, &err);
  assert_int_equal(st, TOPLU_ERR_IO);
  assert_null(model);
  assert_non_null(strstr(err.message, "in-memory.onnx"));
  assert_non_null(strstr(err.message, "weights.bin"));
}

/* Load (and when it loads, run on zeros with symbolic dims = 1) a model file;
 * any status is fine, but a failure must say why and name the file.
 * Returns NULL, or what went wrong (static text). */
static const char *load_and_run_any(const char *path) {
  toplu_error_t err;
  toplu_error_clear(&err);
  toplu_model_t *m = NULL;
  toplu_status_t st = toplu_model_load(path, NULL, &m, &err);
  if (st != TOPLU_OK) {
    if (m) return "a failed load returned a model";
    if (!strstr(err.message, path)) return "the load error does not name the file";
    return NULL;
  }
  toplu_session_options_t so;
  toplu_session_options_init(&so);
  so.threads = 1;
  toplu_session_t *s = NULL;
  if (toplu_session_create(m, &so, &s, &err) != TOPLU_OK) {
    toplu_model_destroy(m);
    return "toplu_session_create failed";
  }
  const char *bad = NULL;
  int n_in = toplu_model_input_count(m), n_out = toplu_model_output_count(m), ok = n_in <= 16 && n_out <= 16;
  toplu_tensor_t in[16], out[16];
  memset(in, 0, sizeof in);
  memset(out, 0, sizeof out);
  for (int i = 0; ok && i < n_in; i++) {
    const toplu_value_info_t *vi = toplu_model_input(m, i);
    int64_t dims[TOPLU_MAX_DIMS];
    if (vi->ndim < 0 || !toplu_dtype_size(vi->dtype)) ok = 0;
    for (int d = 0; ok && d < vi->ndim; d++) dims[d] = vi->dims[d] >= 0 ? vi->dims[d] : 1;
    if (ok && toplu_tensor_alloc(&in[i], vi->dtype, vi->ndim, dims) != TOPLU_OK) ok = 0;
  }
  if (ok && toplu_session_run(s, in, n_in, out, n_out) != TOPLU_OK && !toplu_session_last_error(s)[0])
    bad = "a failed run left no message";
  for (int i = 0; i < 16; i++) {
    toplu_tensor_free(&in[i]);
    toplu_tensor_free(&out[i]);
  }
  toplu_session_destroy(s);
  toplu_model_destroy(m);
  return bad;
}

/* Reproducers of fuzzer findings (the .onnx files in tests/data/malformed):
 * each runs in a child process, so that one that still crashes fails this
 * test without taking the others down.  None may crash or trip a sanitizer
 * (run the suite under -DTOPLU_SANITIZE=ON to check the latter). */
static void test_fuzz_reproducers(void **state) {
  (void)state;
  DIR *d = opendir(TOPLU_MALFORMED_DIR);
  assert_non_null(d);
  struct dirent *e;
  int n = 0, failed = 0;
  while ((e = readdir(d))) {
    size_t len = strlen(e->d_name);
    if (len < 6 || strcmp(e->d_name + len - 5, ".onnx")) continue;
    char path[1024];
    snprintf(path, sizeof path, "%s/%s", TOPLU_MALFORMED_DIR, e->d_name);
    n++;
    fflush(NULL);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
      /* cmocka catches these to fail a test; the child must die of them instead. */
      const int sigs[] = {SIGSEGV, SIGFPE, SIGBUS, SIGILL, SIGABRT};
      for (size_t k = 0; k < sizeof sigs / sizeof sigs[0]; k++) signal(sigs[k], SIG_DFL);
      const char *bad = load_and_run_any(path);
      if (bad) fprintf(stderr, "%s: %s\n", path, bad);
      fflush(NULL);
      _exit(bad ? 1 : 0);
    }
    int status = 0;
    while (waitpid(pid, &status, 0) < 0) {
    }
    if (WIFSIGNALED(status)) {
      print_error("%s: killed by signal %d (%s)\n", path, WTERMSIG(status), strsignal(WTERMSIG(status)));
      failed++;
    } else if (WEXITSTATUS(status) != 0) {
      print_error("%s: exit status %d\n", path, WEXITSTATUS(status));
      failed++;
    }
  }
  closedir(d);
  assert_true(n > 0);
  assert_int_equal(failed, 0);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_valid_model),
      cmocka_unit_test(test_success_clears_error),
      cmocka_unit_test(test_huge_batch_refused),
      cmocka_unit_test(test_missing_file),
      cmocka_unit_test(test_truncated),
      cmocka_unit_test(test_empty_file),
      cmocka_unit_test(test_api_manners),
      cmocka_unit_test(test_not_protobuf),
      cmocka_unit_test(test_wrong_attribute_type),
      cmocka_unit_test(test_opset_too_new),
      cmocka_unit_test(test_huge_initializer_without_data),
      cmocka_unit_test(test_bad_attribute_count),
      cmocka_unit_test(test_raw_data_length),
      cmocka_unit_test(test_missing_node_input),
      cmocka_unit_test(test_unknown_op),
      cmocka_unit_test(test_cycle),
      cmocka_unit_test(test_duplicate_output),
      cmocka_unit_test(test_output_shadows_initializer),
      cmocka_unit_test(test_reshape_mismatch),
      cmocka_unit_test(test_rank_above_8),
      cmocka_unit_test(test_no_outputs),
      cmocka_unit_test(test_external_outside_dir),
      cmocka_unit_test(test_external_missing),
      cmocka_unit_test(test_external_short),
      cmocka_unit_test(test_external_data_ok),
      cmocka_unit_test(test_fuzz_reproducers),
  };
  return cmocka_run_group_tests_name("loader", tests, setup_dir, teardown_dir);
}
