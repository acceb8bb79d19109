/*
 * fuzz/target_model.c - the model target: an ONNX file's bytes.
 *
 * Loaded with toplu_model_load_buffer() or, from a temporary file, with
 * toplu_model_load() (so external data is looked up beside it), with or
 * without the optimisation passes; the input's last byte chooses.  When it
 * loads: a session (one thread, a 256 MiB allocator limit) plans it with
 * toplu_session_memory() at batch 1 and at batch 3 (symbolic dims bound to
 * the batch; models that fix batch 1 with batch_override), and models with
 * at most 4 MiB of parameters run once at batch 1 on zeroed inputs
 * when the plan counts at most 2^30 FLOPs and 2^30 bytes moved (a model
 * slow by design, a 3-D ConvTranspose of 10^11 FLOPs say, is planned only).
 * Inputs over 16 MiB, or declaring inputs of more than 2^20 elements, are
 * skipped: running out of memory by design is not a bug.  Beyond crashes
 * and sanitizer reports, a failing call without a message traps, and so
 * does a failed load that returns a model.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz.h"
#include "toplu/toplu.h"

#define MAX_INPUT_BYTES ((size_t)16 << 20)
#define MAX_ELEMENTS (INT64_C(1) << 20)
#define ALLOC_LIMIT ((size_t)256 << 20)
#define RUN_MAX_PARAM_BYTES (INT64_C(4) << 20)
/* Runs that are slow by design (not a hang) are not tried: the plan's own
 * count of FLOPs and of bytes read and written per run above these (a few
 * seconds of work under ASan at the most). */
#define RUN_MAX_FLOPS (INT64_C(1) << 30)
#define RUN_MAX_BYTES_MOVED (INT64_C(1) << 30)
#define MAX_IO 64

/* TOPLU_FUZZ_VERBOSE=1: say on stderr how far each input got (for replays). */
static void trace(const char *what, const char *msg) {
  static int v = -1;
  if (v < 0) {
    const char *e = getenv("TOPLU_FUZZ_VERBOSE");
    v = e && e[0] == '1';
  }
  if (v) fprintf(stderr, "  model: %s%s%s\n", what, msg && msg[0] ? ": " : "", msg ? msg : "");
}

/* Inputs for batch b: symbolic dims (and dim 0 of a fixed-batch model) set
 * to b, data zeroed.  Returns the input count, or -1 when the model cannot
 * be fed (unknown rank, a dtype without a size, too many elements). */
static int make_inputs(const toplu_model_t *m, int64_t b, toplu_tensor_t *in) {
  int n = toplu_model_input_count(m);
  if (n < 0 || n > MAX_IO) return -1;
  int fixed = toplu_model_fixed_batch(m);
  for (int i = 0; i < n; i++) {
    const toplu_value_info_t *vi = toplu_model_input(m, i);
    if (!vi || vi->ndim < 0 || vi->ndim > TOPLU_MAX_DIMS || toplu_dtype_size(vi->dtype) == 0) return -1;
    int64_t dims[TOPLU_MAX_DIMS], numel = 1;
    for (int d = 0; d < vi->ndim; d++) {
      dims[d] = vi->dims[d] >= 0 ? vi->dims[d] : b;
      if (d == 0 && fixed) dims[0] = b;
      if (dims[d] > MAX_ELEMENTS) return -1;
      numel *= dims[d];
      if (numel > MAX_ELEMENTS) return -1;
    }
    if (toplu_tensor_alloc(&in[i], vi->dtype, vi->ndim, dims) != TOPLU_OK) return -1;
    if (in[i].data) memset(in[i].data, 0, toplu_tensor_nbytes(&in[i]));
  }
  return n;
}

static void free_tensors(toplu_tensor_t *t, int n) {
  for (int i = 0; i < n; i++) toplu_tensor_free(&t[i]);
  memset(t, 0, sizeof *t * (size_t)n);
}

/* Plan (and with run, run) the model at batch b.  Returns 0 to go on. */
static int try_batch(toplu_session_t *s, const toplu_model_t *m, int64_t b, int run) {
  toplu_tensor_t in[MAX_IO], out[MAX_IO];
  memset(in, 0, sizeof in);
  memset(out, 0, sizeof out);
  int n_out = toplu_model_output_count(m);
  int n_in = make_inputs(m, b, in);
  int rc = 0;
  if (n_in < 0 || n_out < 0 || n_out > MAX_IO) {
    trace("inputs not fed (unknown rank or dtype, too large)", NULL);
    rc = -1;
    goto done;
  }
  toplu_memory_report_t rep;
  toplu_status_t st = toplu_session_memory(s, in, n_in, &rep);
  if (st != TOPLU_OK) {
    fz_require_message(toplu_session_last_error(s));
    trace(b == 1 ? "plan at batch 1 failed" : "plan at batch 3 failed", toplu_session_last_error(s));
    rc = -1;
    goto done;
  }
  trace(b == 1 ? "planned at batch 1" : "planned at batch 3", NULL);
  if (!run) goto done;
  if (rep.flops > RUN_MAX_FLOPS || rep.bytes_moved > RUN_MAX_BYTES_MOVED) {
    trace("run skipped: slow by design (FLOPs or bytes moved above the limit)", NULL);
    goto done;
  }
  /* Skip runs whose outputs alone would be out-of-memory by design. */
  st = toplu_session_output_shapes(s, in, n_in, out, n_out);
  if (st != TOPLU_OK) {
    fz_require_message(toplu_session_last_error(s));
    goto done;
  }
  for (int i = 0; i < n_out; i++)
    if (out[i].ndim < 0 || out[i].ndim > TOPLU_MAX_DIMS || toplu_tensor_numel(&out[i]) > 16 * MAX_ELEMENTS) goto done;
  memset(out, 0, sizeof out);
  toplu_error_t err;
  toplu_error_clear(&err);
  st = toplu_session_run_with(s, in, n_in, out, n_out, NULL, &err);
  if (st != TOPLU_OK) fz_require_message(err.message);
  trace(st == TOPLU_OK ? "ran at batch 1" : "run failed", err.message);
done:
  free_tensors(in, MAX_IO);
  free_tensors(out, MAX_IO);
  return rc;
}

int fz_model(const uint8_t *data, size_t size) {
  if (size > MAX_INPUT_BYTES) return 0;
  toplu_error_t err;
  toplu_error_clear(&err);
  toplu_model_t *m = NULL;
  uint8_t sel = size ? data[size - 1] : 0;
  toplu_model_options_t mo = {.no_optimize = (sel & 4) != 0};
  toplu_status_t st;
  if (sel & 8) {
    const char *path = fz_temp_file("model.onnx", data, size);
    if (!path) return 0;
    st = toplu_model_load(path, &mo, &m, &err);
  } else {
    st = toplu_model_load_buffer(data, size, "fuzz.onnx", &mo, &m, &err);
  }
  if (st != TOPLU_OK) {
    if (m) __builtin_trap(); /* a failed load must not return a model */
    fz_require_message(err.message);
    trace("load failed", err.message);
    return 0;
  }
  toplu_allocator_t *alloc = NULL;
  if (toplu_allocator_create(ALLOC_LIMIT, &alloc) != TOPLU_OK) {
    toplu_model_destroy(m);
    return 0;
  }
  toplu_session_options_t so;
  toplu_session_options_init(&so);
  so.threads = 1;
  so.allocator = alloc;
  so.batch_override = toplu_model_fixed_batch(m);
  toplu_session_t *s = NULL;
  trace("loaded", NULL);
  if (toplu_session_create(m, &so, &s, &err) != TOPLU_OK) {
    fz_require_message(err.message);
    trace("session failed", err.message);
  } else {
    int small = toplu_model_param_bytes(m) <= RUN_MAX_PARAM_BYTES;
    if (try_batch(s, m, 1, small) == 0) try_batch(s, m, 3, 0);
  }
  toplu_session_destroy(s);
  toplu_allocator_destroy(alloc);
  toplu_model_destroy(m);
  return 0;
}
