/*
 * tests/test_choose_kernels.c - toplu_session_options_t.choose_kernels on a
 * real model: PaddleOCR PP-OCRv4 rec (its SVTR blocks' MatMuls with constant
 * weights) and its ONNX Runtime fixture (4 text lines).
 *
 *   test_choose_kernels MODEL.onnx INPUT.npy EXPECTED.npy
 *
 * 1. Default (choose_kernels 0), 2 threads: outputs match ONNX Runtime (max
 *    abs diff <= 1e-4); every weight MatMul is timed once per distinct
 *    product: one note per (shape, threads, post-ops), each naming the node,
 *    the product's shape, the winner and the loser with their times (at
 *    most one note per MatMul step); the
 *    profile's impl of each such MatMul is the winner's ("onednn:sgemm" or
 *    toplu's GEMM).  A second run and a second batch size's plan that
 *    shares no product add no note for products already timed.
 * 2. TOPLU_CHOOSE_KERNELS=alt (sgemm forced after the timing): outputs
 *    match ONNX Runtime and the own GEMM's (<= 1e-5 relative); every weight
 *    MatMul's impl is "onednn:sgemm", and the plan's weights_bytes are no
 *    more than with the own GEMM (B read in place, where the own GEMM
 *    counts its packed copy, padded to 16 columns, instead).
 * 3. TOPLU_CHOOSE_KERNELS=first: no step runs "onednn:sgemm".
 * 4. choose_kernels -1: no note and no "onednn:sgemm" even with
 *    TOPLU_CHOOSE_KERNELS=alt (nothing is timed, the first candidate runs).
 * Missing files skip (exit 77).
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "model_check.h"
#include "toplu/toplu.h"

#define MAX_NOTES 64

typedef struct {
  int n;
  char text[MAX_NOTES][512];
} notes_t;

static void on_log(void *user, toplu_log_level_t level, const char *msg) {
  notes_t *n = user;
  if (level == TOPLU_LOG_NOTE && strstr(msg, "(choose_kernels)") && n->n < MAX_NOTES)
    snprintf(n->text[n->n++], 512, "%s", msg);
}

static double max_diff(const toplu_tensor_t *a, const toplu_tensor_t *b) {
  const float *x = a->data, *y = b->data;
  int64_t n = toplu_tensor_numel(a);
  double m = 0;
  for (int64_t i = 0; i < n; i++) {
    double d = fabs((double)x[i] - (double)y[i]);
    if (!(d <= m)) m = d;
  }
  return m;
}

typedef struct {
  toplu_session_t *s;
  notes_t notes;
  toplu_tensor_t out;
} side_t;

static int open_side(side_t *sd, toplu_model_t *m, int choose) {
  memset(sd, 0, sizeof *sd);
  toplu_session_options_t so = {.threads = 2, .profile = 1, .choose_kernels = choose, .choose_threads = -1,
                                .log = on_log, .log_user = &sd->notes};
  toplu_error_t err;
  if (toplu_session_create(m, &so, &sd->s, &err)) {
    fprintf(stderr, "session: %s\n", err.message);
    return 1;
  }
  return 0;
}

static int run(side_t *sd, const toplu_tensor_t *in) {
  toplu_tensor_free(&sd->out);
  memset(&sd->out, 0, sizeof sd->out);
  toplu_error_t err;
  toplu_status_t st = toplu_session_run_with(sd->s, in, 1, &sd->out, 1, NULL, &err);
  if (st) fprintf(stderr, "run failed: %s\n", err.message);
  return st;
}

/* Weight MatMul steps of the plan for in, and how many of them run sgemm. */
static void count_impls(side_t *sd, const toplu_tensor_t *in, int *matmuls, int *sgemm, int *own) {
  toplu_node_profile_t prof[2048];
  int n = toplu_session_profile(sd->s, in, 1, prof, 2048);
  *matmuls = *sgemm = *own = 0;
  for (int i = 0; i < n && i < 2048; i++) {
    if (!prof[i].ran || strncmp(prof[i].op_type, "MatMul", 6) || prof[i].n_inputs < 2) continue;
    const char *impl = prof[i].impl ? prof[i].impl : "";
    int is_sgemm = !strcmp(impl, "onednn:sgemm"), is_own = !strncmp(impl, "toplu:gemm_", 11);
    if (is_sgemm || is_own) ++*matmuls;
    *sgemm += is_sgemm;
    *own += is_own;
  }
}

static size_t weights_of(side_t *sd, const toplu_tensor_t *in) {
  toplu_memory_report_t r;
  if (toplu_session_memory(sd->s, in, 1, &r)) return 0;
  return r.weights_bytes;
}

static void close_side(side_t *sd) {
  toplu_tensor_free(&sd->out);
  toplu_session_destroy(sd->s);
}

int main(int argc, char **argv) {
  toplu_model_t *m = NULL;
  toplu_tensor_t in, want;
  int rc = load_fixture_args(argc, argv, &m, &in, &want);
  if (rc) return rc;
  toplu_tensor_t two = in;
  two.dims[0] = 2;

  /* 1. default: timed, one note per product */
  unsetenv("TOPLU_CHOOSE_KERNELS");
  side_t d;
  if (open_side(&d, m, 0) || run(&d, &in)) return 1;
  CHECK(max_diff(&d.out, &want) <= 1e-4, "default: max abs diff %g from ONNX Runtime", max_diff(&d.out, &want));
  int mm = 0, sg = 0, own = 0;
  count_impls(&d, &in, &mm, &sg, &own);
  CHECK(mm >= 8, "default: %d weight MatMul steps on the own GEMM or sgemm (the rec model has 11)", mm);
  CHECK(d.notes.n >= 1 && d.notes.n <= mm, "default: %d notes for %d MatMuls", d.notes.n, mm);
  int n_sgemm_notes = 0;
  for (int i = 0; i < d.notes.n; i++) {
    const char *t = d.notes.text[i];
    CHECK(strstr(t, "MatMul '") && strstr(t, " x ") && strstr(t, "2 threads") && strstr(t, "chose ") &&
              strstr(t, " over ") && strstr(t, "toplu's GEMM") && strstr(t, "oneDNN's sgemm") && strstr(t, "ms a run"),
          "note %d does not say what was timed: %s", i, t);
    n_sgemm_notes += !strncmp(strstr(t, "chose ") ? strstr(t, "chose ") : "", "chose oneDNN's sgemm", 20);
  }
  CHECK((n_sgemm_notes > 0) == (sg > 0), "default: %d notes chose sgemm but %d steps run it", n_sgemm_notes, sg);
  int before = d.notes.n;
  if (run(&d, &in)) return 1;
  CHECK(d.notes.n == before, "default: a second run of the same shape timed again (%d notes, then %d)", before,
        d.notes.n);
  CHECK(max_diff(&d.out, &want) <= 1e-4, "default, second run: max abs diff %g", max_diff(&d.out, &want));
  close_side(&d);

  /* 2. sgemm forced */
  setenv("TOPLU_CHOOSE_KERNELS", "alt", 1);
  side_t a;
  if (open_side(&a, m, 0) || run(&a, &in)) return 1;
  CHECK(max_diff(&a.out, &want) <= 1e-4, "sgemm: max abs diff %g from ONNX Runtime", max_diff(&a.out, &want));
  count_impls(&a, &in, &mm, &sg, &own);
  CHECK(mm >= 8 && sg == mm && own == 0, "sgemm forced: %d MatMuls, %d on sgemm, %d on the own GEMM", mm, sg, own);
  size_t w_sgemm = weights_of(&a, &in);

  /* 3. own GEMM forced */
  setenv("TOPLU_CHOOSE_KERNELS", "first", 1);
  side_t f;
  if (open_side(&f, m, 0) || run(&f, &in)) return 1;
  count_impls(&f, &in, &mm, &sg, &own);
  CHECK(mm >= 8 && sg == 0 && own == mm, "own forced: %d MatMuls, %d on sgemm, %d on the own GEMM", mm, sg, own);
  double scale = 0;
  for (int64_t i = 0; i < toplu_tensor_numel(&f.out); i++) {
    double v = fabs((double)((const float *)f.out.data)[i]);
    if (v > scale) scale = v;
  }
  CHECK(max_diff(&a.out, &f.out) <= 1e-5 * (scale > 1 ? scale : 1), "sgemm against own GEMM: max abs diff %g",
        max_diff(&a.out, &f.out));
  size_t w_own = weights_of(&f, &in);
  CHECK(w_sgemm > 0 && w_sgemm <= w_own,
        "weights: %zu bytes with sgemm (B in place), %zu with the own GEMM's packed copies (expected no fewer)", w_sgemm,
        w_own);
  /* a batch-2 plan on the forced session: new products (other row counts) are timed, no old one again */
  int nf = f.notes.n;
  if (run(&f, &two)) return 1;
  CHECK(f.notes.n > nf, "own forced: the batch-2 plan's products were not timed (%d notes before, %d after)", nf,
        f.notes.n);
  int nf2 = f.notes.n;
  if (run(&f, &in)) return 1;
  CHECK(f.notes.n == nf2, "own forced: batch 4 again timed again (%d notes, then %d)", nf2, f.notes.n);
  close_side(&a);
  close_side(&f);

  /* 4. off: nothing timed, the first candidate */
  setenv("TOPLU_CHOOSE_KERNELS", "alt", 1);
  side_t o;
  if (open_side(&o, m, -1) || run(&o, &in)) return 1;
  count_impls(&o, &in, &mm, &sg, &own);
  CHECK(o.notes.n == 0 && sg == 0 && own == mm && mm >= 8,
        "choose_kernels -1: %d notes, %d of %d MatMuls on sgemm (expected none)", o.notes.n, sg, mm);
  CHECK(max_diff(&o.out, &want) <= 1e-4, "off: max abs diff %g from ONNX Runtime", max_diff(&o.out, &want));
  close_side(&o);
  unsetenv("TOPLU_CHOOSE_KERNELS");
  return finish_fixture("choose_kernels", m, &in, &want);
}
