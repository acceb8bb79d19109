/*
 * fuzz/target_data.c - the data targets: .npy, CSV, JSONL, images, job files.
 *
 * Each writes the input to a temporary file (the readers take paths, as
 * the CLI gives them) and reads it as a batch job does: the job's source
 * (pipeline/source.h) opened for small models of fuzz/data, every row read
 * in chunks of up to 64 and preprocessed (pl_pre_apply), the values freed.
 * Images are decoded from memory and preprocessed with one of several
 * declared specs, chosen by the input's size (not by a byte of it, so the
 * decoder sees the bytes as they are).  Rows that fail are normal; a
 * failed call must say why (traps when not).
 */
#include <stdlib.h>
#include <string.h>

#include "fuzz.h"
#include "pipeline/chunk.h"
#include "pipeline/image.h"
#include "pipeline/preprocess.h"
#include "pipeline/source.h"
#include "toplu/pipeline.h"
#include "toplu/toplu.h"

#define MAX_INPUT_BYTES ((size_t)4 << 20)
#define CHUNK_ROWS 64
#define MAX_ROWS 4096

/* Read every row of src (up to MAX_ROWS) and preprocess each value with spec. */
static void read_all(pl_source_t *src, const toplu_model_t *m, const char *spec) {
  pl_pre_t pre[PL_MAX_FIELDS];
  int bound[PL_MAX_FIELDS];
  toplu_error_t err;
  for (int f = 0; f < src->n_fields; f++) {
    bound[f] = 0;
    toplu_error_clear(&err);
    if (pl_pre_parse(spec, &pre[f], &err)) __builtin_trap(); /* the specs here are valid */
    const toplu_value_info_t *info = toplu_model_input(m, src->field_input[f]);
    if (!info) __builtin_trap();
    if (pl_pre_bind(&pre[f], info, src->is_image, &err) == TOPLU_OK) bound[f] = 1;
    else fz_require_message(err.message);
  }
  int64_t rows = src->rows < MAX_ROWS ? src->rows : MAX_ROWS;
  for (int64_t first = 0; first < rows; first += CHUNK_ROWS) {
    int64_t count = rows - first < CHUNK_ROWS ? rows - first : CHUNK_ROWS;
    size_t nv = (size_t)count * (size_t)src->n_fields;
    pl_value_t *vals = calloc(nv + 1, sizeof *vals);
    char **row_err = calloc((size_t)count + 1, sizeof *row_err);
    if (!vals || !row_err) {
      free(vals);
      free(row_err);
      return;
    }
    toplu_error_clear(&err);
    toplu_status_t st = src->ops->read(src, first, count, vals, row_err, &err);
    if (st != TOPLU_OK) fz_require_message(err.message);
    for (int64_t r = 0; !st && r < count; r++) {
      if (row_err[r]) {
        fz_require_message(row_err[r]);
        continue;
      }
      (void)src->ops->id(src, first + r);
      for (int f = 0; f < src->n_fields; f++) {
        pl_value_t *v = &vals[r * src->n_fields + f];
        if (!bound[f]) continue;
        toplu_tensor_t t;
        memset(&t, 0, sizeof t);
        char why[512] = "";
        if (pl_pre_apply(&pre[f], v, &t, why, sizeof why)) fz_require_message(why);
        toplu_tensor_free(&t);
      }
    }
    for (size_t k = 0; k < nv; k++) pl_value_free(&vals[k]);
    for (int64_t r = 0; r < count; r++) free(row_err[r]);
    free(vals);
    free(row_err);
  }
}

/* Open path as a source for input `input` of data model `model` and read it. */
static void source(const char *path, const char *model, int input, pl_csv_header_t hdr, const char *spec) {
  const toplu_model_t *m = fz_data_model(model);
  if (!m) __builtin_trap(); /* fuzz/data is part of the build */
  pl_source_t *src = NULL;
  toplu_error_t err;
  toplu_error_clear(&err);
  pl_source_cfg_t cfg = {hdr, 0, INT64_C(1) << 20};
  if (pl_source_open(path, m, input, &cfg, &src, &err) != TOPLU_OK) {
    if (src) __builtin_trap();
    fz_require_message(err.message);
    return;
  }
  if (src->rows >= 0) read_all(src, m, spec);
  pl_source_destroy(src);
}

int fz_npy(const uint8_t *data, size_t size) {
  if (size > MAX_INPUT_BYTES) return 0;
  const char *p = fz_temp_file("in.npy", data, size);
  if (!p) return 0;
  char path[4096];
  snprintf(path, sizeof path, "%s", p);
  toplu_error_t err;
  toplu_tensor_t t;
  memset(&t, 0, sizeof t);
  toplu_error_clear(&err);
  long off = 0;
  toplu_status_t st = toplu_npy_read_header(path, &t, &off, &err);
  if (st != TOPLU_OK) {
    fz_require_message(err.message);
  } else if (t.ndim >= 1 && t.dims[0] > 0) {
    /* The first rows, into a buffer of exactly their size. */
    int64_t row = 1;
    for (int d = 1; d < t.ndim && row <= (INT64_C(1) << 24); d++) row *= t.dims[d];
    int64_t count = t.dims[0] < 3 ? t.dims[0] : 3;
    size_t es = toplu_dtype_size(t.dtype);
    if (row <= (INT64_C(1) << 24) && es) {
      size_t bytes = (size_t)row * es * (size_t)count;
      void *buf = malloc(bytes ? bytes : 1);
      if (buf) {
        toplu_error_clear(&err);
        if (toplu_npy_read_rows(path, 0, count, buf, bytes, &err) != TOPLU_OK) fz_require_message(err.message);
        free(buf);
      }
    }
  }
  memset(&t, 0, sizeof t); /* the header read allocates nothing */
  toplu_error_clear(&err);
  if (toplu_npy_read(path, &t, &err) != TOPLU_OK) fz_require_message(err.message);
  toplu_tensor_free(&t);
  source(path, "any_rank.onnx", 0, PL_CSV_HEADER_AUTO, NULL);
  source(path, "two_inputs.onnx", 0, PL_CSV_HEADER_AUTO, "scale=1/255");
  source(path, "two_inputs.onnx", 1, PL_CSV_HEADER_AUTO, NULL);
  return 0;
}

int fz_csv(const uint8_t *data, size_t size) {
  if (size > MAX_INPUT_BYTES) return 0;
  const char *p = fz_temp_file("in.csv", data, size);
  if (!p) return 0;
  char path[4096];
  snprintf(path, sizeof path, "%s", p);
  source(path, "one_input.onnx", 0, PL_CSV_HEADER_AUTO, NULL);
  source(path, "one_input.onnx", 0, PL_CSV_HEADER_YES, "scale=0.5");
  source(path, "two_inputs.onnx", 1, PL_CSV_HEADER_NO, NULL);
  source(path, "any_rank.onnx", 0, PL_CSV_HEADER_AUTO, NULL);
  return 0;
}

int fz_jsonl(const uint8_t *data, size_t size) {
  if (size > MAX_INPUT_BYTES) return 0;
  const char *p = fz_temp_file("in.jsonl", data, size);
  if (!p) return 0;
  char path[4096];
  snprintf(path, sizeof path, "%s", p);
  source(path, "two_inputs.onnx", -1, PL_CSV_HEADER_AUTO, NULL);
  source(path, "one_input.onnx", 0, PL_CSV_HEADER_AUTO, "scale=2");
  source(path, "any_rank.onnx", -1, PL_CSV_HEADER_AUTO, NULL);
  return 0;
}

/* Preprocessing specs for images, with the model input shape each binds to
 * ([N,C,H,W] with C 3 or 1, or [N,H,W,3]; -1 dims are free). */
static const struct {
  const char *spec;
  int ndim;
  int64_t dims[4];
  toplu_dtype_t dtype;
} image_specs[] = {
    {"resize=32x24,scale=1/255,mean=0.485/0.456/0.406,std=0.229/0.224/0.225", 4, {-1, 3, 24, 32}, TOPLU_DTYPE_FLOAT},
    {"resize=40x40:letterbox,pad-value=114,color=bgr", 4, {-1, 3, 40, 40}, TOPLU_DTYPE_FLOAT},
    {"resize=16,crop=16x16,layout=nhwc,dtype=uint8", 4, {-1, 16, 16, 3}, TOPLU_DTYPE_UINT8},
    {"color=gray,pad-multiple=32", 4, {-1, 1, -1, -1}, TOPLU_DTYPE_FLOAT},
    {"crop=7x5,color=gray", 4, {-1, 1, 5, 7}, TOPLU_DTYPE_FLOAT},
    {"resize=3x300", 4, {-1, 3, 300, 3}, TOPLU_DTYPE_FLOAT},
};
#define N_IMAGE_SPECS (sizeof image_specs / sizeof image_specs[0])

/* The pixel limit (width * height) handed to the decoder, which refuses a
 * larger header before decoding (issue 14, item 3: decompression bombs).
 * Default 2^24, so that an image the library would take at its own default
 * (2^28) cannot pass libFuzzer's RSS limit; TOPLU_FUZZ_MAX_PIXELS overrides
 * (0: the library's default). */
static int64_t max_pixels(void) {
  static int64_t v = -1;
  if (v < 0) {
    const char *e = getenv("TOPLU_FUZZ_MAX_PIXELS");
    v = e && e[0] ? strtoll(e, NULL, 10) : INT64_C(1) << 24;
    if (v < 0) v = 0;
  }
  return v;
}

int fz_image(const uint8_t *data, size_t size) {
  if (size > MAX_INPUT_BYTES) return 0;
  size_t k = size % N_IMAGE_SPECS;
  toplu_error_t err;
  pl_pre_t pre;
  toplu_error_clear(&err);
  if (pl_pre_parse(image_specs[k].spec, &pre, &err)) __builtin_trap();
  toplu_value_info_t info;
  memset(&info, 0, sizeof info);
  info.name = "image";
  info.dtype = image_specs[k].dtype;
  info.ndim = image_specs[k].ndim;
  for (int d = 0; d < info.ndim; d++) info.dims[d] = image_specs[k].dims[d];
  if (pl_pre_bind(&pre, &info, 1, &err) != TOPLU_OK) __builtin_trap(); /* the specs fit their shapes */
  int hw = 0, hh = 0;
  pl_pre_hint(&pre, &hw, &hh);
  pl_value_t v;
  memset(&v, 0, sizeof v);
  char why[512] = "";
  if (pl_image_decode(data, size, hw, hh, max_pixels(), &v, why, sizeof why)) {
    fz_require_message(why);
    pl_value_free(&v);
    return 0;
  }
  if (v.kind != PL_VALUE_IMAGE || v.w <= 0 || v.h <= 0 || (v.c != 1 && v.c != 3) || !v.pixels) __builtin_trap();
  toplu_tensor_t t;
  memset(&t, 0, sizeof t);
  why[0] = 0;
  if (pl_pre_apply(&pre, &v, &t, why, sizeof why)) fz_require_message(why);
  toplu_tensor_free(&t);
  return 0;
}

int fz_jobfile(const uint8_t *data, size_t size) {
  if (size > MAX_INPUT_BYTES) return 0;
  const char *path = fz_temp_file("job.json", data, size);
  if (!path) return 0;
  toplu_job_options_t o;
  toplu_job_options_init(&o);
  toplu_job_file_t *file = NULL;
  toplu_error_t err;
  toplu_error_clear(&err);
  toplu_status_t st = toplu_job_options_from_json(path, &o, &file, &err);
  if (st != TOPLU_OK) {
    if (file) __builtin_trap(); /* documented: *file NULL on failure */
    fz_require_message(err.message);
    return 0;
  }
  /* Touch every string the options got: they must live in *file. */
  size_t sum = 0;
  const char *strs[] = {o.model, o.output, o.preprocess, o.postprocess, o.labels, o.errors, o.tune_file};
  for (size_t i = 0; i < sizeof strs / sizeof strs[0]; i++)
    if (strs[i]) sum += strlen(strs[i]);
  for (int i = 0; i < o.n_inputs; i++)
    if (o.inputs && o.inputs[i]) sum += strlen(o.inputs[i]);
  if (o.n_inputs < 0 || (o.n_inputs > 0 && !o.inputs)) __builtin_trap();
  (void)sum;
  toplu_job_file_free(file);
  return 0;
}
