/*
 * graph/schema_linalg.c - schemas of Einsum-12 and Det-11 (ONNX operator
 * spec, https://onnx.ai/onnx/operators/).
 *   Einsum: the equation's terms (letters, at most one "..." each) label
 *     every input dim; the output is the "->" term, or without one the
 *     labels used once in alphabetical order after the "..." dims.  Equal
 *     labels must have equal dims; "..." dims broadcast.
 *   Det: [*, M, M] -> [*].
 * The equation parser is shared with the kernel (graph/einsum.h).
 */
#include <string.h>

#include "graph/einsum.h"
#include "graph/infer.h"
#include "graph/schema.h"

static int is_float(toplu_dtype_t dt) {
  return dt == TOPLU_DTYPE_FLOAT || dt == TOPLU_DTYPE_DOUBLE || dt == TOPLU_DTYPE_FLOAT16;
}

static toplu_status_t infer_einsum(toplu__infer_ctx_t *ctx) {
  toplu_dtype_t dt = ctx->in[0].dtype;
  for (int i = 0; i < ctx->n_in; i++)
    if (ctx->in[i].dtype != dt)
      return toplu__infer_error(ctx, TOPLU_ERR_INVALID_MODEL, "inputs have different types");
  if (!is_float(dt) && dt != TOPLU_DTYPE_INT32 && dt != TOPLU_DTYPE_INT64 && dt != TOPLU_DTYPE_UINT32 &&
      dt != TOPLU_DTYPE_UINT64)
    return toplu__infer_error(ctx, TOPLU_ERR_UNSUPPORTED, "Einsum on %s tensors is not supported", toplu_dtype_name(dt));
  int ranks[TOPLU_EINSUM_MAX_IN];
  if (ctx->n_in > TOPLU_EINSUM_MAX_IN)
    return toplu__infer_error(ctx, TOPLU_ERR_UNSUPPORTED, "more than %d inputs", TOPLU_EINSUM_MAX_IN);
  for (int i = 0; i < ctx->n_in; i++) ranks[i] = ctx->in[i].ndim;
  toplu__einsum_t e;
  char why[200];
  if (toplu__einsum_parse(toplu__node_attr_string(ctx->node, "equation", ""), ctx->n_in, ranks, &e, why, sizeof why))
    return toplu__infer_error(ctx, TOPLU_ERR_INVALID_MODEL, "equation: %s", why);
  int64_t size[TOPLU_EINSUM_MAX_LABELS];
  for (int l = 0; l < e.n_labels; l++) size[l] = 1;
  for (int i = 0; i < ctx->n_in; i++)
    for (int d = 0; d < ranks[i]; d++) {
      int l = e.in_label[i][d];
      int64_t v = ctx->in[i].dims[d];
      if (v == 1 && l < TOPLU_EINSUM_ELLIPSIS_LABELS) continue; /* broadcast */
      if (size[l] == 1 || size[l] == v) size[l] = v;
      else if (v >= 0 && size[l] >= 0)
        return toplu__infer_error(ctx, TOPLU_ERR_SHAPE, "label dims differ (%lld and %lld)", (long long)size[l], (long long)v);
      else if (v < 0 && size[l] >= 0) size[l] = v;
    }
  int64_t dims[TOPLU_MAX_DIMS];
  if (e.out_rank > TOPLU_MAX_DIMS) return toplu__infer_error(ctx, TOPLU_ERR_UNSUPPORTED, "output rank above %d", TOPLU_MAX_DIMS);
  for (int d = 0; d < e.out_rank; d++) dims[d] = size[e.out_label[d]];
  toplu__infer_set(ctx, 0, dt, e.out_rank, dims);
  return TOPLU_OK;
}

static int64_t flops_einsum(const toplu__infer_ctx_t *ctx) {
  int ranks[TOPLU_EINSUM_MAX_IN];
  int n = ctx->n_in < TOPLU_EINSUM_MAX_IN ? ctx->n_in : TOPLU_EINSUM_MAX_IN;
  for (int i = 0; i < n; i++) ranks[i] = ctx->in[i].ndim;
  toplu__einsum_t e;
  char why[8];
  if (toplu__einsum_parse(toplu__node_attr_string(ctx->node, "equation", ""), n, ranks, &e, why, sizeof why)) return 0;
  int64_t size[TOPLU_EINSUM_MAX_LABELS], f = 2 * n;
  for (int l = 0; l < e.n_labels; l++) size[l] = 1;
  for (int i = 0; i < n; i++)
    for (int d = 0; d < ranks[i]; d++)
      if (ctx->in[i].dims[d] > size[e.in_label[i][d]]) size[e.in_label[i][d]] = ctx->in[i].dims[d];
  for (int l = 0; l < e.n_labels; l++) f *= size[l];
  return f;
}

/* Einsum keeps the rows of input 0's dim 0 apart when that dim's label is
 * the output's dim 0: out[b, ...] is then a sum of products of the operands'
 * slices at b (an operand without the label is shared by every row), as in
 * "bij,jk->bik", "bij,bkj->bik" or RoBERTa's "bqhd,bkhd->bhqk".  A label
 * summed over ("bi,bi->i", or used twice without "->") or moved off dim 0
 * combines or moves them: counted as mixing (a fresh user's finding of
 * 2026-12-06: every Einsum was).  An operand whose dims under the label
 * are not its rows (x and x flipped along dim 0) is left to the runs of
 * toplu_session_rows_apart. */
static int rows_einsum(const toplu__node_t *n, const void *tv) {
  const toplu__value_table_t *t = tv;
  if (n->n_inputs < 1 || n->n_inputs > TOPLU_EINSUM_MAX_IN) return 1;
  int ranks[TOPLU_EINSUM_MAX_IN];
  for (int i = 0; i < n->n_inputs; i++) {
    if (n->inputs[i] < 0) return 1;
    ranks[i] = t->vals[n->inputs[i]].ndim;
  }
  toplu__einsum_t e;
  char why[8];
  if (ranks[0] < 1 ||
      toplu__einsum_parse(toplu__node_attr_string(n, "equation", ""), n->n_inputs, ranks, &e, why, sizeof why))
    return 1;
  return e.out_rank < 1 || e.out_label[0] != e.in_label[0][0];
}

static toplu_status_t infer_det(toplu__infer_ctx_t *ctx) {
  const toplu_tensor_t *x = &ctx->in[0];
  if (!is_float(x->dtype)) return toplu__infer_error(ctx, TOPLU_ERR_UNSUPPORTED, "Det takes float tensors");
  int r = x->ndim;
  if (r < 2 || (x->dims[r - 1] >= 0 && x->dims[r - 2] >= 0 && x->dims[r - 1] != x->dims[r - 2]))
    return toplu__infer_error(ctx, TOPLU_ERR_SHAPE, "input must be [*, M, M]");
  toplu__infer_set(ctx, 0, x->dtype, r - 2, x->dims);
  return TOPLU_OK;
}

/* A single matrix whose rows are dim 0. */
static int rows_det(const toplu__node_t *n, const void *tv) {
  const toplu__value_table_t *t = tv;
  return n->n_inputs > 0 && n->inputs[0] >= 0 && t->vals[n->inputs[0]].ndim <= 2;
}

static int64_t flops_det(const toplu__infer_ctx_t *ctx) {
  const toplu_tensor_t *x = &ctx->in[0];
  int64_t m = x->ndim >= 2 ? x->dims[x->ndim - 1] : 1;
  return toplu_tensor_numel(&ctx->out[0]) * 2 * m * m * m / 3;
}

const toplu__schema_t toplu__schemas_linalg[] = {
    {"Einsum", "", 12, 1, 2147483647, 1, 1, 0, infer_einsum, flops_einsum, rows_einsum},
    {"Det", "", 11, 1, 1, 1, 1, 0, infer_det, flops_det, rows_det},
    {NULL, NULL, 0, 0, 0, 0, 0, 0, NULL, NULL, NULL},
};
