/*
 * ops/linalg.c - Einsum-12 and Det-11 kernels (ONNX operator spec,
 * https://onnx.ai/onnx/operators/; shapes in graph/schema_linalg.c).
 *   Einsum: y[out labels] = sum over the other labels of the product of the
 *     inputs, each read through per-label strides (a label repeated within a
 *     term adds its strides: the diagonal; a broadcast "..." dim of 1 has
 *     stride 0).  A direct loop over every label (floats in double, integers
 *     wrapping in 64 bits): exact and general, not a GEMM.
 *   Det: LU decomposition with partial pivoting in double, per matrix; the
 *     workspace holds one matrix.
 */
#include <math.h>
#include <string.h>

#include "graph/einsum.h"
#include "ops/elem_io.h"
#include "ops/kernel.h"
#include "ops/tensor_copy.h"

typedef struct einsum_state {
  int n_in, n_out_labels, n_sum_labels;
  int out_labels[TOPLU_EINSUM_MAX_LABELS], sum_labels[TOPLU_EINSUM_MAX_LABELS];
  int64_t size[TOPLU_EINSUM_MAX_LABELS];
  int64_t stride[TOPLU_EINSUM_MAX_IN][TOPLU_EINSUM_MAX_LABELS];
} einsum_state_t;

static toplu_status_t prepare_einsum(toplu__kernel_ctx_t *ctx, toplu__kernel_info_t *info) {
  int ranks[TOPLU_EINSUM_MAX_IN];
  if (ctx->n_in > TOPLU_EINSUM_MAX_IN)
    return toplu__kernel_error(ctx, TOPLU_ERR_UNSUPPORTED, "more than %d inputs", TOPLU_EINSUM_MAX_IN);
  toplu_dtype_t dt = ctx->in[0].dtype;
  if (!toplu__is_float_dtype(dt) && dt != TOPLU_DTYPE_INT32 && dt != TOPLU_DTYPE_INT64 && dt != TOPLU_DTYPE_UINT32 &&
      dt != TOPLU_DTYPE_UINT64)
    return toplu__kernel_error(ctx, TOPLU_ERR_UNSUPPORTED, "Einsum on %s tensors is not supported", toplu_dtype_name(dt));
  for (int i = 0; i < ctx->n_in; i++) ranks[i] = ctx->in[i].ndim;
  toplu__einsum_t e;
  char why[200];
  if (toplu__einsum_parse(toplu__node_attr_string(ctx->node, "equation", ""), ctx->n_in, ranks, &e, why, sizeof why))
    return toplu__kernel_error(ctx, TOPLU_ERR_INVALID_MODEL, "equation: %s", why);
  einsum_state_t *s = toplu__kernel_alloc(ctx, sizeof *s);
  if (!s) return toplu__kernel_error(ctx, TOPLU_ERR_OUT_OF_MEMORY, "out of memory");
  memset(s, 0, sizeof *s);
  ctx->state = s;
  info->state_bytes = sizeof *s;
  s->n_in = ctx->n_in;
  uint8_t used[TOPLU_EINSUM_MAX_LABELS] = {0}, in_out[TOPLU_EINSUM_MAX_LABELS] = {0};
  for (int l = 0; l < TOPLU_EINSUM_MAX_LABELS; l++) s->size[l] = 1;
  for (int i = 0; i < ctx->n_in; i++) {
    int64_t str[TOPLU_MAX_DIMS];
    toplu__dense_strides(&ctx->in[i], str);
    for (int d = 0; d < ranks[i]; d++) {
      int l = e.in_label[i][d];
      int64_t v = ctx->in[i].dims[d];
      used[l] = 1;
      if (v != 1) s->size[l] = v;
      if (v != 1 || l >= TOPLU_EINSUM_ELLIPSIS_LABELS) s->stride[i][l] += str[d];
    }
  }
  for (int d = 0; d < e.out_rank; d++) {
    s->out_labels[s->n_out_labels++] = e.out_label[d];
    in_out[e.out_label[d]] = 1;
  }
  for (int l = 0; l < TOPLU_EINSUM_MAX_LABELS; l++)
    if (used[l] && !in_out[l]) s->sum_labels[s->n_sum_labels++] = l;
  return TOPLU_OK;
}

static void release_state(toplu__kernel_ctx_t *ctx) { toplu__kernel_free(ctx, ctx->state); }

static toplu_status_t run_einsum(toplu__kernel_ctx_t *ctx) {
  const einsum_state_t *s = ctx->state;
  toplu_tensor_t *y = &ctx->out[0];
  const int fl = toplu__is_float_dtype(y->dtype), n = s->n_in;
  const int64_t ny = toplu_tensor_numel(y);
  int64_t nsum = 1;
  for (int k = 0; k < s->n_sum_labels; k++) nsum *= s->size[s->sum_labels[k]];
  for (int64_t o = 0; o < ny; o++) {
    int64_t base[TOPLU_EINSUM_MAX_IN] = {0}, rem = o;
    for (int k = s->n_out_labels - 1; k >= 0; k--) {
      int l = s->out_labels[k];
      int64_t c = rem % s->size[l];
      rem /= s->size[l];
      for (int i = 0; i < n; i++) base[i] += c * s->stride[i][l];
    }
    double accd = 0;
    uint64_t acci = 0;
    for (int64_t t = 0; t < nsum; t++) {
      int64_t off[TOPLU_EINSUM_MAX_IN];
      memcpy(off, base, sizeof off);
      rem = t;
      for (int k = s->n_sum_labels - 1; k >= 0; k--) {
        int l = s->sum_labels[k];
        int64_t c = rem % s->size[l];
        rem /= s->size[l];
        for (int i = 0; i < n; i++) off[i] += c * s->stride[i][l];
      }
      if (fl) {
        double p = 1;
        for (int i = 0; i < n; i++) p *= toplu__tensor_get_double(&ctx->in[i], off[i]);
        accd += p;
      } else {
        uint64_t p = 1;
        for (int i = 0; i < n; i++) p *= (uint64_t)toplu__tensor_get_int(&ctx->in[i], off[i]);
        acci += p;
      }
    }
    if (fl) toplu__store_double(y, o, accd);
    else toplu__store_int(y, o, (int64_t)acci);
  }
  return TOPLU_OK;
}

/* ---- Det ---- */

static toplu_status_t prepare_det(toplu__kernel_ctx_t *ctx, toplu__kernel_info_t *info) {
  if (!toplu__is_float_dtype(ctx->in[0].dtype))
    return toplu__kernel_error(ctx, TOPLU_ERR_UNSUPPORTED, "Det on %s tensors is not supported",
                              toplu_dtype_name(ctx->in[0].dtype));
  int64_t m = ctx->in[0].dims[ctx->in[0].ndim - 1];
  info->workspace_bytes = (size_t)(m * m) * sizeof(double);
  return TOPLU_OK;
}

static toplu_status_t run_det(toplu__kernel_ctx_t *ctx) {
  const toplu_tensor_t *x = &ctx->in[0];
  toplu_tensor_t *y = &ctx->out[0];
  const int64_t m = x->dims[x->ndim - 1], mats = toplu_tensor_numel(y);
  double *a = ctx->workspace;
  for (int64_t k = 0; k < mats; k++) {
    for (int64_t i = 0; i < m * m; i++) a[i] = toplu__tensor_get_double(x, k * m * m + i);
    double det = 1;
    for (int64_t c = 0; c < m && det != 0; c++) {
      int64_t p = c;
      for (int64_t r = c + 1; r < m; r++)
        if (fabs(a[r * m + c]) > fabs(a[p * m + c])) p = r;
      if (a[p * m + c] == 0) {
        det = 0;
        break;
      }
      if (p != c) {
        for (int64_t j = 0; j < m; j++) {
          double t = a[c * m + j];
          a[c * m + j] = a[p * m + j];
          a[p * m + j] = t;
        }
        det = -det;
      }
      det *= a[c * m + c];
      for (int64_t r = c + 1; r < m; r++) {
        double f = a[r * m + c] / a[c * m + c];
        for (int64_t j = c; j < m; j++) a[r * m + j] -= f * a[c * m + j];
      }
    }
    toplu__store_double(y, k, det);
  }
  return TOPLU_OK;
}

const toplu__kernel_t toplu__kernels_linalg[] = {
    {"Einsum", "", prepare_einsum, run_einsum, release_state, 0, NULL, NULL, NULL},
    {"Det", "", prepare_det, run_det, NULL, 0, NULL, NULL, NULL},
    {NULL, NULL, NULL, NULL, NULL, 0, NULL, NULL, NULL},
};
