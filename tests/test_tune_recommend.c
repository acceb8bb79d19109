/*
 * tests/test_tune_recommend.c - the tuner's recommended batch size
 * (toplu__tune_recommend, src/tune/tune.c) on hand-made rows whose answer is
 * worked out by hand from the rule documented in include/toplu/tuner.h: the
 * smallest size within the latency budget whose throughput is within 3% of
 * the best measured; with none, the over-budget size of lowest p99.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "tune/measure.h"

/* A result of n rows: batch sizes b[], statuses st[], throughputs thr[], p99 p99[]. */
static int64_t recommend(int n, const int64_t *b, const toplu_tune_status_t *st, const double *thr,
                         const double *p99, toplu_tune_result_t *r) {
  static toplu_tune_row_t rows[16];
  memset(r, 0, sizeof *r);
  memset(rows, 0, sizeof rows);
  for (int i = 0; i < n; i++) {
    rows[i].batch_size = b[i];
    rows[i].status = st[i];
    rows[i].throughput = thr[i];
    rows[i].p99_ms = p99[i];
  }
  r->rows = rows;
  r->n_rows = n;
  r->recommended_batch_size = -1;
  toplu__tune_recommend(r);
  return r->recommended_batch_size;
}

#define OK TOPLU_TUNE_OK
#define OOM TOPLU_TUNE_OOM
#define OVER TOPLU_TUNE_OVER_BUDGET

/* Best 206/s at 16; 3% below is 199.82: 196/s at 4 is not within it (it is
 * within 5%), 205/s at 8 is, so 8. */
static void smallest_within_three_percent(void **state) {
  (void)state;
  toplu_tune_result_t r;
  int64_t b[] = {1, 2, 4, 8, 16};
  toplu_tune_status_t st[] = {OK, OK, OK, OK, OK};
  double thr[] = {100, 180, 196, 205, 206}, p99[] = {1, 2, 3, 4, 5};
  assert_int_equal(recommend(5, b, st, thr, p99, &r), 8);
  assert_int_equal(r.n_notes, 0);
}

/* Throughput that falls after a peak: 300/s at 4 is the best; 8 (295) and 16
 * (299) are within 3% but larger, so 4. */
static void peak_in_the_middle(void **state) {
  (void)state;
  toplu_tune_result_t r;
  int64_t b[] = {1, 2, 4, 8, 16};
  toplu_tune_status_t st[] = {OK, OK, OK, OK, OK};
  double thr[] = {90, 200, 300, 295, 299}, p99[] = {1, 2, 3, 4, 5};
  assert_int_equal(recommend(5, b, st, thr, p99, &r), 4);
}

/* Rows that are oom or over the budget never count as the best: the best ok
 * is 103/s at 4, and 100/s at 1 is within 3% of it, so 1 (the over-budget 500/s
 * at 2 and the oom row are ignored). */
static void only_ok_rows_count(void **state) {
  (void)state;
  toplu_tune_result_t r;
  int64_t b[] = {1, 2, 4, 8};
  toplu_tune_status_t st[] = {OK, OVER, OK, OOM};
  double thr[] = {100, 500, 103, 0}, p99[] = {1, 90, 3, 0};
  assert_int_equal(recommend(4, b, st, thr, p99, &r), 1);
}

/* No size within the budget: the over-budget one with the lowest p99 (40 ms
 * at 2), with a note saying so. */
static void none_ok_lowest_p99(void **state) {
  (void)state;
  toplu_tune_result_t r;
  int64_t b[] = {1, 2, 4};
  toplu_tune_status_t st[] = {OVER, OVER, OOM};
  double thr[] = {10, 30, 0}, p99[] = {50, 40, 0};
  assert_int_equal(recommend(3, b, st, thr, p99, &r), 2);
  assert_int_equal(r.n_notes, 1);
  assert_non_null(strstr(r.notes[0], "batch 2 has the lowest p99"));
}

/* Nothing fit: no recommendation (0). */
static void nothing_fits(void **state) {
  (void)state;
  toplu_tune_result_t r;
  int64_t b[] = {1, 2};
  toplu_tune_status_t st[] = {OOM, OOM};
  double thr[] = {0, 0}, p99[] = {0, 0};
  assert_int_equal(recommend(2, b, st, thr, p99, &r), 0);
  assert_int_equal(r.n_notes, 0);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(smallest_within_three_percent), cmocka_unit_test(peak_in_the_middle),
      cmocka_unit_test(only_ok_rows_count),            cmocka_unit_test(none_ok_lowest_p99),
      cmocka_unit_test(nothing_fits),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
