/*
 * tests/test_backends.c - the backend seam on real models: the same plan code
 * runs a model on the CPU backend (oneDNN), on the plain-C reference backend,
 * and on mixes of the two with Copy steps at the boundaries; every result
 * matches the CPU backend and ONNX Runtime's fixture.
 *
 *   test_backends MODEL.onnx INPUT.npy EXPECTED.npy ROWS MIX...
 *
 * ROWS: how many rows of the fixture to run (0: all).  Each MIX is a
 * toplu_session_options_t.backends list ("reference", "reference:Conv").
 * For each: max abs diff to the CPU backend <= 1e-4 relative to the
 * output's scale (at least 1), the same to the fixture, the same argmax per
 * row; the plan's steps run where the list says (every non-copy step on
 * "reference" for "reference"; for a mix, steps on both backends and at
 * least one Copy step); a second run gives the same bytes.  Missing files
 * skip (exit 77).
 */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "model_check.h"
#include "toplu/toplu.h"


/* max |a-b| / max(1, max |b|); argmax rows differing in *bad_rows */
static double rel_diff(const toplu_tensor_t *a, const toplu_tensor_t *b, int64_t rows, int *bad_rows) {
  const float *x = a->data, *y = b->data;
  int64_t n = toplu_tensor_numel(a), per = rows ? n / rows : n;
  double m = 0, s = 1;
  for (int64_t i = 0; i < n; i++) {
    double d = fabs((double)x[i] - (double)y[i]);
    if (!(d <= m)) m = d;
    if (fabs(y[i]) > s) s = fabs(y[i]);
  }
  *bad_rows = 0;
  for (int64_t r = 0; r < rows; r++) {
    int64_t ia = 0, ib = 0;
    for (int64_t k = 1; k < per; k++) {
      if (x[r * per + k] > x[r * per + ia]) ia = k;
      if (y[r * per + k] > y[r * per + ib]) ib = k;
    }
    if (ia != ib) (*bad_rows)++;
  }
  return m / s;
}

static toplu_status_t run_on(const toplu_model_t *m, const char *backends, const toplu_tensor_t *in,
                             toplu_tensor_t *out, toplu_step_info_t *steps, int *n_steps, toplu_memory_report_t *mr,
                             toplu_error_t *err) {
  toplu_session_options_t so;
  toplu_session_options_init(&so);
  so.threads = 2;
  so.batch_override = 1;
  so.backends = backends;
  toplu_session_t *s = NULL;
  toplu_status_t st = toplu_session_create(m, &so, &s, err);
  if (st) return st;
  st = toplu_session_run_with(s, in, 1, out, 1, NULL, err);
  if (!st && mr) st = toplu_session_memory(s, in, 1, mr);
  if (!st && steps) {
    int n = toplu_session_steps(s, in, 1, steps, 1024);
    *n_steps = n < 1024 ? n : 1024;
    /* names point into the session: copy what we need */
    static char names[1024][48], backs[1024][16];
    for (int i = 0; i < *n_steps; i++) {
      snprintf(names[i], sizeof names[i], "%s", steps[i].op_type);
      snprintf(backs[i], sizeof backs[i], "%s", steps[i].backend);
      steps[i].op_type = names[i];
      steps[i].backend = backs[i];
    }
    toplu_tensor_t again = {0};
    st = toplu_session_run_with(s, in, 1, &again, 1, NULL, err);
    if (!st && memcmp(again.data, out->data, toplu_tensor_nbytes(out))) {
      fprintf(stderr, "FAIL: %s: a second run gave other bytes\n", backends);
      failures++;
    }
    toplu_tensor_free(&again);
  }
  toplu_session_destroy(s);
  return st;
}

int main(int argc, char **argv) {
  if (argc < 6) {
    fprintf(stderr, "usage: test_backends MODEL.onnx INPUT.npy EXPECTED.npy ROWS MIX...\n");
    return 2;
  }
  toplu_error_t err;
  toplu_model_t *m = NULL;
  toplu_tensor_t in = {0}, want = {0};
  int rc = load_fixture(argv[1], argv[2], argv[3], &m, &in, &want);
  if (rc) return rc;
  int64_t rows = atoll(argv[4]);
  if (rows > 0 && rows < in.dims[0]) {
    in.dims[0] = rows;
    want.dims[0] = rows;
  }
  rows = in.dims[0];
  toplu_tensor_t cpu = {0};
  static toplu_step_info_t steps[1024];
  int n_steps = 0;
  toplu_memory_report_t mr;
  if (run_on(m, "cpu", &in, &cpu, steps, &n_steps, &mr, &err)) {
    fprintf(stderr, "FAIL: cpu backend: %s\n", err.message);
    return 1;
  }
  int bad;
  double d = rel_diff(&cpu, &want, rows, &bad);
  printf("%s: cpu backend vs ONNX Runtime: %.3g (relative), %d argmax rows differ, %d steps\n", argv[1], d, bad,
         n_steps);
  for (int i = 0; i < n_steps; i++) CHECK(!strcmp(steps[i].backend, "cpu"), "cpu plan: step %d on %s", i, steps[i].backend);
  CHECK(mr.device_arena_bytes == 0 && mr.device_weights_bytes == 0 && mr.n_copies == 0,
        "cpu plan: %zu device arena bytes, %zu device weights, %d copies", mr.device_arena_bytes,
        mr.device_weights_bytes, mr.n_copies);
  /* the reference backend's own memory counts against the session's
   * allocator (toplu_allocator_reserve): a limit below what its plan needs
   * refuses the run, and every byte is given back */
  {
    toplu_allocator_t *a = NULL;
    toplu_allocator_create(0, &a);
    toplu_session_options_t so;
    toplu_session_options_init(&so);
    so.allocator = a;
    so.batch_override = 1;
    so.backends = "reference";
    toplu_session_t *s = NULL;
    toplu_tensor_t out = {0};
    CHECK(toplu_session_create(m, &so, &s, &err) == TOPLU_OK, "reference session: %s", err.message);
    CHECK(toplu_session_run_with(s, &in, 1, &out, 1, NULL, &err) == TOPLU_OK, "reference run: %s", err.message);
    size_t need = toplu_allocator_peak(a);
    toplu_tensor_free(&out);
    toplu_session_destroy(s);
    CHECK(toplu_allocator_current(a) == 0, "%zu bytes still counted after the session", toplu_allocator_current(a));
    toplu_allocator_set_limit(a, need / 2);
    CHECK(toplu_session_create(m, &so, &s, &err) == TOPLU_OK, "reference session: %s", err.message);
    toplu_status_t st = toplu_session_run_with(s, &in, 1, &out, 1, NULL, &err);
    CHECK(st == TOPLU_ERR_OUT_OF_MEMORY, "a limit of %zu of the %zu bytes the reference plan needs: status %d '%s'",
          need / 2, need, st, err.message);
    toplu_tensor_free(&out);
    toplu_session_destroy(s);
    CHECK(toplu_allocator_current(a) == 0, "%zu bytes still counted after a refused run", toplu_allocator_current(a));
    CHECK(toplu_allocator_reserve(a, need) == TOPLU_ERR_OUT_OF_MEMORY && toplu_allocator_current(a) == 0,
          "reserve past the limit");
    CHECK(toplu_allocator_reserve(a, need / 4) == TOPLU_OK && toplu_allocator_current(a) == need / 4, "reserve");
    toplu_allocator_release(a, need / 4);
    toplu_allocator_release(a, 100); /* more than is counted: clamps at 0, later allocations still fit */
    CHECK(toplu_allocator_current(a) == 0, "a release past the count left %zu", toplu_allocator_current(a));
    void *blk = toplu_allocator_alloc(a, 64);
    CHECK(blk != NULL, "an allocation after a release past the count");
    toplu_allocator_free(a, blk);
    toplu_allocator_set_limit(a, 0);
    CHECK(toplu_allocator_reserve(a, SIZE_MAX) == TOPLU_ERR_OUT_OF_MEMORY && toplu_allocator_current(a) == 0,
          "reserve of SIZE_MAX on an unlimited allocator");
    toplu_allocator_destroy(a);
    printf("  reference plan peak %zu bytes counted; refused at a limit of %zu\n", need, need / 2);
  }
  /* lists that name no usable backend or op are refused, naming the problem */
  {
    static const char *const bad[][2] = {{"reference:Bogus", "no kernel for op type 'Bogus'"},
                                         {"reference:,cpu", "names no op types"},
                                         {",", "empty backend name"},
                                         {"reference,reference", "listed twice"},
                                         {"gpu", "unknown backend 'gpu'"}};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
      toplu_session_options_t so;
      toplu_session_options_init(&so);
      so.backends = bad[i][0];
      toplu_session_t *s = NULL;
      toplu_status_t st = toplu_session_create(m, &so, &s, &err);
      CHECK(st == TOPLU_ERR_INVALID_ARGUMENT && strstr(err.message, bad[i][1]), "backends \"%s\": %d '%s'", bad[i][0],
            st, err.message);
      toplu_session_destroy(s);
    }
  }
  for (int a = 5; a < argc; a++) {
    const char *mix = argv[a];
    toplu_tensor_t out = {0};
    if (run_on(m, mix, &in, &out, steps, &n_steps, &mr, &err)) {
      CHECK(0, "%s: %s", mix, err.message);
      continue;
    }
    int on_ref = 0, on_cpu = 0, copies = 0;
    for (int i = 0; i < n_steps; i++) {
      if (!strcmp(steps[i].op_type, "Copy")) copies++;
      else if (!strcmp(steps[i].backend, "reference")) on_ref++;
      else if (!strcmp(steps[i].backend, "cpu")) on_cpu++;
    }
    double dc = rel_diff(&out, &cpu, rows, &bad);
    int bad_f;
    double df = rel_diff(&out, &want, rows, &bad_f);
    printf("  backends \"%s\": %d steps on reference, %d on cpu, %d copies; vs cpu %.3g, vs ONNX Runtime %.3g\n", mix,
           on_ref, on_cpu, copies, dc, df);
    CHECK(dc <= 1e-4, "%s: differs from the cpu backend by %.3g (relative)", mix, dc);
    CHECK(df <= 1e-4, "%s: differs from ONNX Runtime by %.3g (relative)", mix, df);
    CHECK(bad == 0 && bad_f == 0, "%s: argmax differs in %d rows (cpu) / %d (ONNX Runtime)", mix, bad, bad_f);
    CHECK(on_ref > 0, "%s: no step ran on the reference backend", mix);
    CHECK(mr.n_copies == copies && mr.device_arena_bytes > 0 && mr.device_arena_bytes < mr.activation_bytes +
          mr.workspace_bytes + 1, "%s: memory report: %d copies (steps say %d), device arena %zu of %zu", mix,
          mr.n_copies, copies, mr.device_arena_bytes, mr.activation_bytes + mr.workspace_bytes);
    if (!strcmp(mix, "reference")) {
      /* reference first for every op: only ops it lacks fall back to cpu */
      CHECK(on_ref >= on_cpu, "reference: only %d of %d steps on the reference backend", on_ref, on_ref + on_cpu);
    } else {
      CHECK(on_cpu > 0 && copies > 0, "%s: a mixed plan needs steps on both backends and copies (%d cpu, %d copies)",
            mix, on_cpu, copies);
    }
    toplu_tensor_free(&out);
  }
  toplu_tensor_free(&cpu);
  return finish_fixture("backends", m, &in, &want);
}
