/*
 * tests/test_prepare_later.c - oneDNN primitives made at the end of a plan
 * build, together on the plan's threads (ops/onednn/onednn.h
 * toplu__dnnl_prim_create_later, ops/backend.h prepare_begin/prepare_end).
 *
 * Unit part, on the CPU backend with a oneDNN ReLU primitive descriptor:
 * inside a bracket the primitive is left pending and made by prepare_end;
 * outside one it is made at once; one destroyed before the bracket ends is
 * dropped (ASan: no use after free, no leak); one bound before the end is
 * made by bind and not made twice; nested brackets make each level's own.
 *
 * Model part: MobileNetV2 int8 (integer convolutions) and PaddleOCR cls
 * (float and depthwise convolutions) at batch 1 and 3: the outputs with
 * the primitives made together equal, bit for bit, those made one by one
 * (TOPLU_PARALLEL_PREPARE=off), and every step keeps its implementation
 * name (the profile's impl).
 *
 * usage: test_prepare_later MOBILENET_INT8.onnx PPOCR_CLS.onnx
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ops/backend.h"
#include "ops/onednn/onednn.h"
#include "toplu/toplu.h"

static int failures;
#define CHECK(c, ...)                       \
  do {                                      \
    if (!(c)) {                             \
      failures++;                           \
      fprintf(stderr, "FAIL: " __VA_ARGS__); \
      fprintf(stderr, "\n");                \
    }                                       \
  } while (0)

/* A ReLU forward primitive descriptor on [1, 8] f32, user scratchpad. */
static dnnl_primitive_desc_t relu_pd(toplu__backend_t *b) {
  dnnl_memory_desc_t md;
  dnnl_dims_t dims = {1, 8};
  dnnl_eltwise_desc_t d;
  dnnl_primitive_attr_t attr = NULL;
  dnnl_primitive_desc_t pd = NULL;
  if (dnnl_memory_desc_init_by_tag(&md, 2, dims, dnnl_f32, dnnl_ab) != dnnl_success ||
      dnnl_eltwise_forward_desc_init(&d, dnnl_forward_inference, dnnl_eltwise_relu, &md, 0.f, 0.f) != dnnl_success ||
      dnnl_primitive_attr_create(&attr) != dnnl_success ||
      dnnl_primitive_attr_set_scratchpad_mode(attr, dnnl_scratchpad_mode_user) != dnnl_success ||
      dnnl_primitive_desc_create(&pd, &d, attr, toplu__dnnl_engine(b), NULL) != dnnl_success)
    pd = NULL;
  if (attr) dnnl_primitive_attr_destroy(attr);
  return pd;
}

static void unit_part(void) {
  toplu_error_t err;
  toplu_error_clear(&err);
  toplu__backend_t *b = NULL;
  if (toplu__backend_create_iface(&toplu__backend_cpu, NULL, &b, &err)) {
    CHECK(0, "CPU backend: %s", err.message);
    return;
  }
  CHECK(b->iface->prepare_begin && b->iface->prepare_end, "the CPU backend brackets its kernels' prepare");
  toplu__kernel_ctx_t ctx;
  memset(&ctx, 0, sizeof ctx);
  ctx.backend = b;
  ctx.threads = 2;
  ctx.err = &err;
  toplu__kernel_info_t info;
  memset(&info, 0, sizeof info);
  unsetenv("TOPLU_PARALLEL_PREPARE");

  /* outside a bracket: made at once */
  toplu__dnnl_prim_t p0;
  CHECK(!toplu__dnnl_prim_create_later(&ctx, &p0, relu_pd(b), 0, &info), "no bracket: created");
  CHECK(p0.prim && !p0.pending, "no bracket: made at once (prim %p, pending %p)", (void *)p0.prim, (void *)p0.pending);
  toplu__dnnl_prim_destroy(&p0);

  /* in a bracket: pending until the end; one destroyed first; one bound first */
  toplu__dnnl_prim_t p1, p2, p3, p4;
  b->iface->prepare_begin(b);
  info.impl = NULL;
  CHECK(!toplu__dnnl_prim_create_later(&ctx, &p1, relu_pd(b), 0, &info), "bracket: p1");
  CHECK(info.impl && *info.impl, "bracket: the impl name is known before the primitive is made");
  CHECK(!toplu__dnnl_prim_create_later(&ctx, &p2, relu_pd(b), 0, &info), "bracket: p2");
  CHECK(!toplu__dnnl_prim_create_later(&ctx, &p3, relu_pd(b), 0, &info), "bracket: p3");
  CHECK(!p1.prim && p1.pending && !p2.prim && p2.pending, "bracket: left pending");
  toplu__dnnl_prim_destroy(&p2); /* a kernel released before the end (a candidate kernel rolled back) */
  CHECK(!p2.pending && !p2.prim, "bracket: destroyed while pending");
  float x[8] = {-1, 2, -3, 4, -5, 6, -7, 8}, y[8] = {0};
  dnnl_memory_desc_t md;
  dnnl_dims_t dims = {1, 8};
  dnnl_memory_desc_init_by_tag(&md, 2, dims, dnnl_f32, dnnl_ab);
  toplu__dnnl_prim_arg(&p3, DNNL_ARG_SRC, TOPLU_DNNL_FROM_STATE, 0, x, &md);
  toplu__dnnl_prim_arg(&p3, DNNL_ARG_DST, TOPLU_DNNL_FROM_STATE, 0, y, &md);
  void *stream = NULL, *bound = NULL;
  CHECK(!b->iface->stream_create(b, &stream, &err), "stream: %s", err.message);
  ctx.stream = stream;
  CHECK(!toplu__dnnl_prim_bind(&ctx, &p3, &bound), "bracket: bind of a pending primitive: %s", err.message);
  CHECK(p3.prim && !p3.pending, "bracket: bind made it");
  dnnl_primitive_t made_by_bind = p3.prim;
  /* nested: the inner bracket makes its own, the outer's stay pending */
  b->iface->prepare_begin(b);
  CHECK(!toplu__dnnl_prim_create_later(&ctx, &p4, relu_pd(b), 0, &info), "nested: p4");
  CHECK(!p4.prim && p4.pending, "nested: p4 pending");
  CHECK(!b->iface->prepare_end(b, 2, 1, &err), "nested: inner end: %s", err.message);
  CHECK(p4.prim && !p4.pending && !p1.prim && p1.pending, "nested: the inner end made p4 only");
  CHECK(!b->iface->prepare_end(b, 2, 1, &err), "bracket: end: %s", err.message);
  CHECK(p1.prim && !p1.pending, "bracket: the end made p1");
  CHECK(p3.prim == made_by_bind, "bracket: p3 not made twice");
  if (bound && p3.prim) {
    CHECK(!toplu__dnnl_prim_execute(&ctx, &p3, bound), "run: %s", err.message);
    CHECK(y[0] == 0 && y[1] == 2 && y[6] == 0 && y[7] == 8, "run: ReLU of the input (%g %g %g %g)", y[0], y[1], y[6], y[7]);
  }
  toplu__dnnl_prim_unbind(bound);

  /* a failed build: the end drops nothing the kernels still own; their release destroys it */
  toplu__dnnl_prim_t p5;
  b->iface->prepare_begin(b);
  CHECK(!toplu__dnnl_prim_create_later(&ctx, &p5, relu_pd(b), 0, &info), "failed build: p5");
  CHECK(!b->iface->prepare_end(b, 2, 0, NULL), "failed build: end");
  CHECK(!p5.prim && p5.pending, "failed build: p5 left to its kernel");
  toplu__dnnl_prim_destroy(&p5);

  /* TOPLU_PARALLEL_PREPARE=off: made at once */
  setenv("TOPLU_PARALLEL_PREPARE", "off", 1);
  toplu__dnnl_prim_t p6;
  b->iface->prepare_begin(b);
  CHECK(!toplu__dnnl_prim_create_later(&ctx, &p6, relu_pd(b), 0, &info), "off: p6");
  CHECK(p6.prim && !p6.pending, "off: made at once");
  CHECK(!b->iface->prepare_end(b, 2, 1, &err), "off: end");
  unsetenv("TOPLU_PARALLEL_PREPARE");
  toplu__dnnl_prim_destroy(&p6);

  toplu__dnnl_prim_destroy(&p1);
  toplu__dnnl_prim_destroy(&p3);
  toplu__dnnl_prim_destroy(&p4);
  b->iface->stream_destroy(b, stream);
  toplu__backend_free(b);
}

/* Runs model m at batch `batch` (seeded input of the model's input shape,
 * dim 0 = batch) in a fresh session: output 0 into *out, each step's impl
 * into impls (joined).  0 on success. */
static int run_model(const toplu_model_t *m, int64_t batch, toplu_tensor_t *out, char *impls, size_t impls_size) {
  toplu_error_t err;
  toplu_session_options_t o;
  toplu_session_options_init(&o);
  o.threads = 2;
  o.choose_threads = -1;
  o.choose_kernels = -1;
  o.profile = 1;
  toplu_session_t *s = NULL;
  if (toplu_session_create(m, &o, &s, &err)) {
    fprintf(stderr, "session: %s\n", err.message);
    return 1;
  }
  const toplu_value_info_t *vi = toplu_model_input(m, 0);
  toplu_tensor_t in;
  memset(&in, 0, sizeof in);
  in.dtype = vi->dtype;
  in.ndim = vi->ndim;
  int64_t n = 1;
  for (int i = 0; i < vi->ndim; i++) {
    in.dims[i] = i == 0 ? batch : vi->dims[i] > 0 ? vi->dims[i] : 48;
    n *= in.dims[i];
  }
  size_t esz = in.dtype == TOPLU_DTYPE_UINT8 || in.dtype == TOPLU_DTYPE_INT8 ? 1 : 4;
  unsigned char *buf = malloc((size_t)n * esz);
  uint32_t r = 12345;
  for (int64_t i = 0; i < n; i++) {
    r = r * 1664525u + 1013904223u;
    if (esz == 1) buf[i] = (unsigned char)(r >> 24);
    else ((float *)buf)[i] = (float)(r >> 8) / 16777216.0f * 2.f - 1.f;
  }
  in.data = buf;
  memset(out, 0, sizeof *out);
  int rc = toplu_session_run(s, &in, 1, out, 1) != TOPLU_OK;
  if (rc) fprintf(stderr, "run: %s\n", toplu_session_last_error(s));
  impls[0] = 0;
  int k = rc ? 0 : toplu_session_profile(s, &in, 1, NULL, 0);
  toplu_node_profile_t *np = k > 0 ? calloc((size_t)k, sizeof *np) : NULL;
  if (np && toplu_session_profile(s, &in, 1, np, k) == k)
    for (int i = 0; i < k; i++) {
      size_t used = strlen(impls);
      snprintf(impls + used, impls_size - used, "%s|", np[i].impl ? np[i].impl : "(none)");
    }
  free(np);
  free(buf);
  toplu_session_destroy(s);
  return rc;
}

static void model_part(const char *path) {
  toplu_error_t err;
  toplu_model_t *m = NULL;
  if (toplu_model_load(path, NULL, &m, &err)) {
    CHECK(0, "%s: %s", path, err.message);
    return;
  }
  static char impl_on[1 << 16], impl_off[1 << 16];
  for (int64_t batch = 1; batch <= 3; batch += 2) {
    toplu_tensor_t on, off;
    unsetenv("TOPLU_PARALLEL_PREPARE");
    int a = run_model(m, batch, &on, impl_on, sizeof impl_on);
    setenv("TOPLU_PARALLEL_PREPARE", "off", 1);
    int c = run_model(m, batch, &off, impl_off, sizeof impl_off);
    unsetenv("TOPLU_PARALLEL_PREPARE");
    CHECK(!a && !c, "%s batch %lld: runs", path, (long long)batch);
    if (!a && !c) {
      size_t bytes = toplu_tensor_nbytes(&on);
      CHECK(bytes == toplu_tensor_nbytes(&off) && bytes > 0 && !memcmp(on.data, off.data, bytes),
            "%s batch %lld: outputs made together differ from made one by one", path, (long long)batch);
      CHECK(!strcmp(impl_on, impl_off) && !strstr(impl_on, "(none)|") && strlen(impl_on) > 0,
            "%s batch %lld: impl names differ or are missing:\n  together: %.300s\n  one by one: %.300s", path,
            (long long)batch, impl_on, impl_off);
      printf("%s batch %lld: %zu output bytes equal; impls %.160s...\n", path, (long long)batch, bytes, impl_on);
    }
    toplu_tensor_free(&on);
    toplu_tensor_free(&off);
  }
  toplu_model_destroy(m);
}

int main(int argc, char **argv) {
  if (argc != 3) {
    fprintf(stderr, "usage: test_prepare_later MOBILENET_INT8.onnx PPOCR_CLS.onnx\n");
    return 2;
  }
  unit_part();
  for (int i = 1; i < 3; i++) model_part(argv[i]);
  printf("%s: %d failure(s)\n", failures ? "FAIL" : "ok", failures);
  return failures ? 1 : 0;
}
