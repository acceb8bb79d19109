/*
 * tests/test_rows_apart.c - toplu_session_rows_apart on a real model
 * (PaddleOCR's direction classifier, 8 strips of a scanned page, and its
 * ONNX Runtime fixture).
 *
 *   test_rows_apart MODEL.onnx INPUT.npy EXPECTED.npy
 *
 * 1. The first two strips: the model keeps rows apart (apart 1, no reason),
 *    and the check builds each of its plans (1 row and 2 rows) once: the
 *    session's plan cache counts 2 misses, and both plans stay cached
 *    after their runs (it put them back before its runs, which built them
 *    again: 4 misses, a batch job's setup paying two more plan builds).
 * 2. The check leaves the session as it was for runs: the first two strips
 *    then run as a batch from the cached plan (a hit, no miss) and match
 *    ONNX Runtime within 1e-4.
 * 3. A NULL apart is TOPLU_ERR_INVALID_ARGUMENT.
 * Missing files skip (exit 77).
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "model_check.h"
#include "toplu/toplu.h"

int main(int argc, char **argv) {
  toplu_model_t *m = NULL;
  toplu_tensor_t in = {0}, want = {0};
  int rc = load_fixture_args(argc, argv, &m, &in, &want);
  if (rc) return rc;
  int64_t per_row = toplu_tensor_numel(&want) / want.dims[0];
  toplu_error_t err;
  toplu_session_options_t so;
  toplu_session_options_init(&so);
  so.threads = 2;
  toplu_session_t *s = NULL;
  CHECK(!toplu_session_create(m, &so, &s, &err), "session: %s", err.message);

  /* 1 */
  toplu_tensor_t two = in;
  two.dims[0] = 2;
  int apart = -7;
  char why[512] = "unset";
  CHECK(s && toplu_session_rows_apart(s, &two, 1, &apart, why, sizeof why) == TOPLU_OK, "rows_apart: %s",
        s ? toplu_session_last_error(s) : "no session");
  CHECK(apart == 1 && why[0] == 0, "the direction classifier keeps rows apart (apart %d, why '%s')", apart, why);
  toplu_plan_cache_stats_t cs;
  toplu_session_plan_cache(s, &cs);
  CHECK(cs.misses == 2 && cs.n_plans == 2,
        "the check built the plans of 1 and 2 rows once each: misses %lld (want 2), %d plans cached (want 2)",
        (long long)cs.misses, cs.n_plans);

  /* 2 */
  toplu_tensor_t out = {0};
  CHECK(!toplu_session_run(s, &two, 1, &out, 1), "run of the first two strips: %s", toplu_session_last_error(s));
  double worst = 0;
  for (int64_t i = 0; out.data && i < 2 * per_row; i++) {
    double d = fabs((double)((const float *)out.data)[i] - (double)((const float *)want.data)[i]);
    if (!(d <= worst)) worst = d;
  }
  CHECK(out.data && worst <= 1e-4, "the first two strips against ONNX Runtime: max abs diff %.3g (<= 1e-4)", worst);
  toplu_plan_cache_stats_t cs2;
  toplu_session_plan_cache(s, &cs2);
  CHECK(cs2.misses == cs.misses && cs2.hits > cs.hits, "the run found its plan cached: misses %lld -> %lld, hits %lld -> %lld",
        (long long)cs.misses, (long long)cs2.misses, (long long)cs.hits, (long long)cs2.hits);
  toplu_tensor_free(&out);

  /* 3 */
  CHECK(toplu_session_rows_apart(s, &two, 1, NULL, why, sizeof why) == TOPLU_ERR_INVALID_ARGUMENT,
        "NULL apart: TOPLU_ERR_INVALID_ARGUMENT");

  toplu_session_destroy(s);
  return finish_fixture("rows_apart", m, &in, &want);
}
