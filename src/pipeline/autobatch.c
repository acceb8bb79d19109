/* pipeline/autobatch.c - batch size from a tune result or a short sweep. */
#include "pipeline/autobatch.h"

#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "pipeline/buf.h"

/* recommended_batch_size in o or any object nested in it; -1 when absent;
 * a present but unusable value (not an integer >= 1) goes into *bad. */
static int64_t find_batch(json_t *o, int depth, json_t **bad) {
  if (depth > 8) return -1;
  if (json_is_object(o)) {
    json_t *v = json_object_get(o, "recommended_batch_size");
    if (json_is_integer(v) && json_integer_value(v) >= 1) return (int64_t)json_integer_value(v);
    if (v && !*bad) *bad = v;
    const char *k;
    json_t *x;
    json_object_foreach(o, k, x) {
      int64_t b = find_batch(x, depth + 1, bad);
      if (b > 0) return b;
    }
  } else if (json_is_array(o)) {
    for (size_t i = 0; i < json_array_size(o); i++) {
      int64_t b = find_batch(json_array_get(o, i), depth + 1, bad);
      if (b > 0) return b;
    }
  }
  return -1;
}

toplu_status_t pl_tune_file_batch(const char *path, int64_t *batch, toplu_error_t *err) {
  json_error_t je;
  json_t *o = json_load_file(path, 0, &je);
  if (!o && je.line < 1) return toplu__errorf(err, TOPLU_ERR_IO, "tune_file %s: %s", path, je.text);
  if (!o) return toplu__errorf(err, TOPLU_ERR_PARSE, "tune_file %s: line %d: %s", path, je.line, je.text);
  json_t *bad = NULL;
  int64_t b = find_batch(o, 0, &bad);
  if (b < 1 && bad) {
    char *t = json_dumps(bad, JSON_ENCODE_ANY | JSON_COMPACT);
    toplu__errorf(err, TOPLU_ERR_PARSE, "tune_file %s: recommended_batch_size is %.60s, not a batch size (an integer >= 1; "
                  "0 when the tune ran no size)", path, t ? t : "?");
    free(t);
    json_decref(o);
    return TOPLU_ERR_PARSE;
  }
  json_decref(o);
  if (b < 1) return toplu__errorf(err, TOPLU_ERR_NOT_FOUND, "tune_file %s: no recommended_batch_size in it", path);
  *batch = b;
  return TOPLU_OK;
}

toplu_status_t pl_sweep_batch(toplu_session_t *s, const toplu_tensor_t *row, int n_in, int n_out, int64_t max_batch,
                              double budget_s, int64_t *best, char *how, size_t how_size, toplu_error_t *err) {
  toplu_tensor_t *in = calloc((size_t)n_in + 1, sizeof *in), *out = calloc((size_t)n_out + 1, sizeof *out);
  if (!in || !out) {
    free(in);
    free(out);
    return toplu__errorf(err, TOPLU_ERR_OUT_OF_MEMORY, "out of memory for the batch-size sweep's tensor lists");
  }
  size_t row_bytes = 0;
  for (int i = 0; i < n_in; i++) row_bytes += toplu_tensor_nbytes(&row[i]);
  double t_start = pl_now(), best_rate = 0;
  int falls = 0;
  size_t hn = (size_t)snprintf(how, how_size, "sweep:");
  *best = 1;
  toplu_status_t st = TOPLU_OK;
  for (int64_t b = 1; b <= max_batch && !st; b *= 2) {
    if (b > 1 && row_bytes * (size_t)b > ((size_t)256 << 20)) break;
    for (int i = 0; i < n_in && !st; i++) {
      int64_t dims[TOPLU_MAX_DIMS];
      dims[0] = b;
      memcpy(dims + 1, row[i].dims, sizeof(int64_t) * (size_t)row[i].ndim);
      toplu_tensor_free(&in[i]);
      if (toplu_tensor_alloc(&in[i], row[i].dtype, row[i].ndim + 1, dims)) {
        st = toplu__errorf(err, TOPLU_ERR_OUT_OF_MEMORY, "out of memory for a batch of %lld", (long long)b);
        break;
      }
      size_t rb = toplu_tensor_nbytes(&row[i]);
      for (int64_t k = 0; k < b; k++) memcpy((char *)in[i].data + (size_t)k * rb, row[i].data, rb);
    }
    if (st) break;
    int runs = 0;
    double t0 = 0, el = 0;
    for (;;) {
      for (int j = 0; j < n_out; j++) {
        toplu_tensor_free(&out[j]);
        out[j] = (toplu_tensor_t){0};
      }
      if (runs == 1) t0 = pl_now(); /* run 0 builds the plan and warms up */
      toplu_status_t r = toplu_session_run(s, in, n_in, out, n_out);
      if (r) {
        if (b == 1) st = toplu__errorf(err, r, "batch-size sweep: %s", toplu_session_last_error(s));
        break;
      }
      runs++;
      el = runs > 1 ? pl_now() - t0 : 0;
      if (runs > 1 && (el >= 0.2 || runs >= 12)) break;
    }
    for (int j = 0; j < n_out; j++) toplu_tensor_free(&out[j]);
    if (st || runs < 2) break;
    double rate = (double)b * (runs - 1) / el;
    if (hn < how_size) hn += (size_t)snprintf(how + hn, how_size - hn, " %lld:%.0f/s", (long long)b, rate);
    if (rate > best_rate) {
      best_rate = rate;
      *best = b;
      falls = 0;
    } else if (++falls >= 2) {
      break;
    }
    if (pl_now() - t_start > budget_s) break;
  }
  for (int i = 0; i < n_in; i++) toplu_tensor_free(&in[i]);
  free(in);
  free(out);
  toplu_session_clear_plans(s);
  if (!st && hn < how_size) snprintf(how + hn, how_size - hn, " -> %lld", (long long)*best);
  return st;
}
