/*
 * tests/test_profile.c - the profiler's pieces on hand-made entries
 * (toplu/profile.h): the FMA peak probe (positive, within 1..10000 GFLOP/s
 * per core, cached figure times threads), toplu_profile_top (order, ties,
 * cap, rates worked out by hand) and the trace writer (Trace Event Format
 * fields, views left out, null peak share without a peak).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <jansson.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "toplu/profile.h"

static void test_peak(void **state) {
  (void)state;
  const char *isa = NULL;
  double one = toplu_cpu_fp32_peak_measure(1, 0.02, &isa);
  assert_non_null(isa);
  assert_true(!strcmp(isa, "avx512f") || !strcmp(isa, "avx2+fma") || !strcmp(isa, "scalar"));
  assert_true(one > 1 && one < 10000);
  double p1 = toplu_cpu_fp32_peak_gflops(1);
  assert_true(p1 > 1 && p1 < 10000);
  /* the one-core figure is measured once: more threads multiply it exactly */
  assert_true(toplu_cpu_fp32_peak_gflops(3) == 3 * p1);
  assert_true(toplu_cpu_fp32_peak_gflops(0) >= p1);
}

static const toplu_profile_tensor_t t_in[2] = {
    {.dtype = TOPLU_DTYPE_FLOAT, .ndim = 4, .dims = {2, 3, 8, 8}, .layout = "plain"},
    {.dtype = TOPLU_DTYPE_FLOAT, .ndim = -1, .layout = ""}};
static const toplu_profile_tensor_t t_out[1] = {
    {.dtype = TOPLU_DTYPE_FLOAT, .ndim = 4, .dims = {2, 8, 8, 8}, .layout = "aBcd8b"}};

/* Four steps: a Conv of 2 ms, a view (never run), a Relu of 1 ms, a MatMul of 2 ms (tie with the Conv). */
static void entries(toplu_node_profile_t *n) {
  memset(n, 0, 4 * sizeof *n);
  const char *names[4] = {"conv1", "flat", "relu", "fc"}, *ops[4] = {"Conv+Relu", "Reshape", "Relu", "MatMul"};
  double start[4] = {0, 0, 2000, 3000}, dur[4] = {2000, 0, 1000, 2000};
  int64_t flops[4] = {4000000000LL, 0, 1000, 1000000000LL}, bytes[4] = {1000000, 0, 2000000000LL, 3000};
  for (int i = 0; i < 4; i++) {
    n[i].name = names[i];
    n[i].op_type = ops[i];
    n[i].start_us = start[i];
    n[i].last_us = dur[i];
    n[i].total_us = 3 * dur[i];
    n[i].runs = 3;
    n[i].flops = flops[i];
    n[i].bytes_moved = bytes[i];
    n[i].impl = i == 1 ? "toplu:view" : "jit:avx2";
    n[i].fused = i == 0 ? "relu1" : "";
    n[i].backend = "cpu";
    n[i].ran = i != 1;
  }
  n[0].n_inputs = 2;
  n[0].inputs = t_in;
  n[0].n_outputs = 1;
  n[0].outputs = t_out;
}

static void test_top(void **state) {
  (void)state;
  toplu_node_profile_t n[4];
  entries(n);
  toplu_profile_top_t top[4];
  int k = toplu_profile_top(n, 4, 100.0, top, 4);
  assert_int_equal(k, 3); /* the view is left out */
  assert_int_equal(top[0].step, 0); /* 2 ms, first in run order */
  assert_int_equal(top[1].step, 3); /* 2 ms */
  assert_int_equal(top[2].step, 2); /* 1 ms */
  assert_true(fabs(top[0].ms - 2.0) < 1e-12);
  assert_true(fabs(top[0].share - 0.4) < 1e-12);      /* 2 of 5 ms */
  assert_true(fabs(top[0].gflops_per_s - 2000) < 1e-9); /* 4e9 FLOP in 2 ms */
  assert_true(fabs(top[0].peak_share - 20) < 1e-9);     /* against 100 GFLOP/s */
  assert_true(fabs(top[2].gb_per_s - 2000) < 1e-9);     /* 2e9 bytes in 1 ms */
  assert_string_equal(top[1].name, "fc");
  k = toplu_profile_top(n, 4, 0, top, 2); /* cap 2: the two slowest; no peak: share 0 */
  assert_int_equal(k, 2);
  assert_int_equal(top[0].step, 0);
  assert_int_equal(top[1].step, 3);
  assert_true(top[0].peak_share == 0);
  assert_int_equal(toplu_profile_top(n, 4, 1, top, 0), 0);
  assert_int_equal(toplu_profile_top(NULL, 4, 1, top, 2), 0);
}

static void test_trace(void **state) {
  (void)state;
  toplu_node_profile_t n[4];
  entries(n);
  toplu_profile_info_t info = {.model = "m.onnx", .batch = 2, .threads = 2, .peak_gflops = 100};
  char *s = toplu_profile_trace_json(n, 4, &info);
  assert_non_null(s);
  json_error_t je;
  json_t *o = json_loads(s, 0, &je);
  free(s);
  assert_non_null(o);
  json_t *ev = json_object_get(o, "traceEvents");
  assert_int_equal(json_array_size(ev), 3);
  assert_string_equal(json_string_value(json_object_get(o, "displayTimeUnit")), "ms");
  json_t *e = json_array_get(ev, 0), *a = json_object_get(e, "args");
  assert_string_equal(json_string_value(json_object_get(e, "ph")), "X");
  assert_string_equal(json_string_value(json_object_get(e, "name")), "conv1");
  assert_true(json_number_value(json_object_get(e, "dur")) == 2000);
  assert_string_equal(json_string_value(json_object_get(a, "impl")), "jit:avx2");
  assert_string_equal(json_string_value(json_object_get(a, "fused")), "relu1");
  assert_true(json_integer_value(json_object_get(a, "flops")) == 4000000000LL);
  assert_true(fabs(json_number_value(json_object_get(a, "peak_share")) - 20) < 1e-9);
  json_t *in = json_object_get(a, "inputs");
  assert_int_equal(json_array_size(in), 2);
  assert_true(json_is_null(json_array_get(in, 1)));
  assert_int_equal(json_integer_value(json_array_get(json_object_get(json_array_get(in, 0), "shape"), 3)), 8);
  assert_string_equal(json_string_value(json_object_get(json_array_get(json_object_get(a, "outputs"), 0), "layout")),
                      "aBcd8b");
  assert_string_equal(json_string_value(json_object_get(json_array_get(ev, 1), "name")), "relu"); /* the view left out */
  json_t *od = json_object_get(o, "otherData");
  assert_int_equal(json_integer_value(json_object_get(od, "batch")), 2);
  assert_int_equal(json_integer_value(json_object_get(od, "runs")), 3);
  assert_string_equal(json_string_value(json_object_get(od, "model")), "m.onnx");
  json_decref(o);
  /* no peak: shares are null */
  info.peak_gflops = 0;
  s = toplu_profile_trace_json(n, 4, &info);
  o = json_loads(s, 0, &je);
  free(s);
  assert_non_null(o);
  assert_true(json_is_null(json_object_get(json_object_get(json_array_get(json_object_get(o, "traceEvents"), 0), "args"),
                                           "peak_share")));
  json_decref(o);
  toplu_error_t err;
  assert_int_equal(toplu_profile_write_trace("/nonexistent-dir/t.json", n, 4, &info, &err), TOPLU_ERR_IO);
  assert_non_null(strstr(err.message, "/nonexistent-dir/t.json"));
  assert_int_equal(toplu_profile_write_trace(NULL, n, 4, &info, &err), TOPLU_ERR_INVALID_ARGUMENT);
}

int main(void) {
  const struct CMUnitTest tests[] = {cmocka_unit_test(test_peak), cmocka_unit_test(test_top),
                                     cmocka_unit_test(test_trace)};
  return cmocka_run_group_tests(tests, NULL, NULL);
}
