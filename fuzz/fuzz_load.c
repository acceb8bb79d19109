/*
 * fuzz/fuzz_load.c - libFuzzer target for the model loader and the planner.
 *
 * Each input is an ONNX file's bytes.  It is loaded with
 * toplu_model_load_buffer() (with or without optimisation passes); when it
 * loads, every symbolic dim is bound to 1 or 2 (the input's last byte
 * chooses both), inputs are zero-filled, and the
 * model runs once on one thread with a 256 MiB allocator limit.  Beyond
 * crashes and sanitizer reports, a failing call must leave a message: an
 * empty one traps.  Inputs whose declared shapes would need more than
 * 2^20 elements per input are skipped (out-of-memory by design, not a bug).
 * See fuzz/README.md.
 */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "toplu/toplu.h"

#define MAX_INPUT_BYTES (1u << 20)
#define MAX_ELEMENTS (INT64_C(1) << 20)
#define ALLOC_LIMIT ((size_t)256 << 20)

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* oneDNN keeps process-wide caches (primitive cache, JIT code) by design. */
const char *__lsan_default_suppressions(void);
const char *__lsan_default_suppressions(void) { return "leak:libdnnl\nleak:libgomp\n"; }

/* A failure must come with a message; trap (a fuzzer finding) when not. */
static void require_message(const char *msg) {
  if (!msg || !msg[0]) __builtin_trap();
}

/* Bind the model's inputs: symbolic dims to sym, zero data.  Returns the
 * input count, or -1 when the model cannot be fed (unknown rank, dtype
 * without a size, too many elements; with skip_empty, an input with a 0 dim:
 * set TOPLU_FUZZ_SKIP_EMPTY=1 to get past the zero-sized-kernel finding). */
static int make_inputs(const toplu_model_t *m, int64_t sym, int batch0, int skip_empty, toplu_tensor_t *in,
                       int cap) {
  int n = toplu_model_input_count(m);
  if (n > cap) return -1;
  for (int i = 0; i < n; i++) {
    const toplu_value_info_t *vi = toplu_model_input(m, i);
    if (!vi || vi->ndim < 0 || vi->ndim > TOPLU_MAX_DIMS || toplu_dtype_size(vi->dtype) == 0) return -1;
    int64_t dims[TOPLU_MAX_DIMS], numel = 1;
    for (int d = 0; d < vi->ndim; d++) {
      dims[d] = vi->dims[d] >= 0 ? vi->dims[d] : sym;
      if (d == 0 && batch0 > 0 && vi->ndim > 0) dims[0] = batch0;
      if (dims[d] > MAX_ELEMENTS || (skip_empty && dims[d] == 0)) return -1;
      numel *= dims[d];
      if (numel > MAX_ELEMENTS) return -1;
    }
    if (toplu_tensor_alloc(&in[i], vi->dtype, vi->ndim, dims) != TOPLU_OK) return -1;
  }
  return n;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (size > MAX_INPUT_BYTES) return 0;
  toplu_error_t err;
  toplu_error_clear(&err);
  toplu_model_t *m = NULL;
  uint8_t sel = size ? data[size - 1] : 0;
  toplu_model_options_t mo = {.no_optimize = (sel & 4) != 0};
  toplu_status_t st = toplu_model_load_buffer(data, size, "fuzz.onnx", &mo, &m, &err);
  if (st != TOPLU_OK) {
    if (m) __builtin_trap(); /* a failed load must not return a model */
    require_message(err.message);
    return 0;
  }
  int64_t sym = 1 + (sel & 1);
  int batch0 = toplu_model_fixed_batch(m) && (sel & 2) ? 2 : 0;

  toplu_allocator_t *alloc = NULL;
  if (toplu_allocator_create(ALLOC_LIMIT, &alloc) != TOPLU_OK) {
    toplu_model_destroy(m);
    return 0;
  }
  toplu_session_options_t so;
  toplu_session_options_init(&so);
  so.threads = 1;
  so.allocator = alloc;
  so.batch_override = batch0 > 0;
  toplu_session_t *s = NULL;
  toplu_tensor_t in[64], out[64];
  memset(in, 0, sizeof in);
  memset(out, 0, sizeof out);
  int n_in = -1, n_out = toplu_model_output_count(m);
  if (toplu_session_create(m, &so, &s, &err) != TOPLU_OK) {
    require_message(err.message);
    goto done;
  }
  const char *se = getenv("TOPLU_FUZZ_SKIP_EMPTY");
  n_in = make_inputs(m, sym, batch0, se && se[0] == '1', in, 64);
  if (n_in < 0 || n_out > 64) goto done;
  /* Skip runs whose outputs alone would be out-of-memory by design. */
  st = toplu_session_output_shapes(s, in, n_in, out, n_out);
  if (st != TOPLU_OK) {
    require_message(toplu_session_last_error(s));
    goto done;
  }
  for (int i = 0; i < n_out; i++)
    if (out[i].ndim < 0 || out[i].ndim > TOPLU_MAX_DIMS || toplu_tensor_numel(&out[i]) > 16 * MAX_ELEMENTS) goto done;
  memset(out, 0, sizeof out);
  st = toplu_session_run(s, in, n_in, out, n_out);
  if (st != TOPLU_OK) require_message(toplu_session_last_error(s));
done:
  for (int i = 0; i < 64; i++) {
    toplu_tensor_free(&in[i]);
    toplu_tensor_free(&out[i]);
  }
  toplu_session_destroy(s);
  toplu_allocator_destroy(alloc);
  toplu_model_destroy(m);
  return 0;
}
