/*
 * graph/schema_matmul.c - MatMul-1/9/13 (numpy matmul: 1-D operands promoted
 * and the added dim removed again, batch dims broadcast) and Gemm-7/9/11/13
 * (Y = alpha * A' * B' + beta * C, C broadcast to [M, N], optional from 11).
 */
#include "graph/schema.h"

static toplu_status_t infer_matmul(toplu__infer_ctx_t *ctx) {
  const toplu_tensor_t *a = &ctx->in[0], *b = &ctx->in[1];
  if (a->dtype != b->dtype)
    return toplu__infer_error(ctx, TOPLU_ERR_SHAPE, "A is %s but B is %s", toplu_dtype_name(a->dtype),
                             toplu_dtype_name(b->dtype));
  if (a->ndim < 1 || b->ndim < 1) return toplu__infer_error(ctx, TOPLU_ERR_SHAPE, "operands must have rank >= 1");
  int64_t ka = a->dims[a->ndim - 1], kb = b->ndim == 1 ? b->dims[0] : b->dims[b->ndim - 2];
  if (ka >= 0 && kb >= 0 && ka != kb) {
    char sa[128], sb[128];
    return toplu__infer_error(ctx, TOPLU_ERR_SHAPE, "A %s and B %s: inner dims %lld and %lld differ",
                             toplu__graph_shape_format(ctx->graph, a->ndim, a->dims, sa, sizeof sa),
                             toplu__graph_shape_format(ctx->graph, b->ndim, b->dims, sb, sizeof sb), (long long)ka,
                             (long long)kb);
  }
  /* batch dims: all but the last two (after promotion) */
  int ba = a->ndim > 2 ? a->ndim - 2 : 0, bb = b->ndim > 2 ? b->ndim - 2 : 0;
  int nb = ba > bb ? ba : bb;
  int64_t dims[TOPLU_MAX_DIMS + 2];
  for (int i = 0; i < nb; i++) {
    int ia = i - (nb - ba), ib = i - (nb - bb);
    int64_t da = ia >= 0 ? a->dims[ia] : 1, db = ib >= 0 ? b->dims[ib] : 1;
    if (da == db || db == 1) dims[i] = da;
    else if (da == 1) dims[i] = db;
    else if (da >= 0 && db >= 0)
      return toplu__infer_error(ctx, TOPLU_ERR_SHAPE, "batch dims %lld and %lld do not broadcast", (long long)da,
                               (long long)db);
    else dims[i] = da >= 0 ? da : db >= 0 ? db : toplu__infer_new_dim(ctx);
  }
  int nd = nb;
  if (a->ndim >= 2) dims[nd++] = a->dims[a->ndim - 2];
  if (b->ndim >= 2) dims[nd++] = b->dims[b->ndim - 1];
  if (nd > TOPLU_MAX_DIMS) return toplu__infer_error(ctx, TOPLU_ERR_UNSUPPORTED, "rank too high");
  toplu__infer_set(ctx, 0, a->dtype, nd, dims);
  return TOPLU_OK;
}

static int64_t flops_matmul(const toplu__infer_ctx_t *ctx) {
  const toplu_tensor_t *a = &ctx->in[0];
  return 2 * toplu_tensor_numel(&ctx->out[0]) * a->dims[a->ndim - 1];
}

static toplu_status_t infer_gemm(toplu__infer_ctx_t *ctx) {
  const toplu_tensor_t *a = &ctx->in[0], *b = &ctx->in[1];
  if (a->ndim != 2 || b->ndim != 2)
    return toplu__infer_error(ctx, TOPLU_ERR_SHAPE, "A and B must be 2-D (ranks %d and %d)", a->ndim, b->ndim);
  if (a->dtype != b->dtype)
    return toplu__infer_error(ctx, TOPLU_ERR_SHAPE, "A is %s but B is %s", toplu_dtype_name(a->dtype),
                             toplu_dtype_name(b->dtype));
  int ta = toplu__node_attr_int(ctx->node, "transA", 0) != 0, tb = toplu__node_attr_int(ctx->node, "transB", 0) != 0;
  int64_t m = a->dims[ta ? 1 : 0], k = a->dims[ta ? 0 : 1], kb = b->dims[tb ? 1 : 0], n = b->dims[tb ? 0 : 1];
  if (k >= 0 && kb >= 0 && k != kb)
    return toplu__infer_error(ctx, TOPLU_ERR_SHAPE, "inner dims %lld (A) and %lld (B) differ", (long long)k,
                             (long long)kb);
  if (toplu__infer_has_input(ctx, 2)) {
    const toplu_tensor_t *c = &ctx->in[2];
    if (c->ndim > 2) return toplu__infer_error(ctx, TOPLU_ERR_SHAPE, "C must have rank <= 2, got %d", c->ndim);
    int64_t want[2] = {m, n};
    for (int i = 0; i < c->ndim; i++) {
      int64_t d = c->dims[i], w = want[2 - c->ndim + i];
      if (d >= 0 && w >= 0 && d != 1 && d != w)
        return toplu__infer_error(ctx, TOPLU_ERR_SHAPE, "C dim %d is %lld, does not broadcast to %lld", i, (long long)d,
                                 (long long)w);
    }
  } else if (ctx->node->opset < 11) {
    return toplu__infer_error(ctx, TOPLU_ERR_INVALID_MODEL, "Gemm before opset 11 needs input C");
  }
  int64_t dims[2] = {m, n};
  toplu__infer_set(ctx, 0, a->dtype, 2, dims);
  return TOPLU_OK;
}

static int64_t flops_gemm(const toplu__infer_ctx_t *ctx) {
  int ta = toplu__node_attr_int(ctx->node, "transA", 0) != 0;
  return 2 * toplu_tensor_numel(&ctx->out[0]) * ctx->in[0].dims[ta ? 0 : 1];
}

static int is_8bit(toplu_dtype_t t) { return t == TOPLU_DTYPE_UINT8 || t == TOPLU_DTYPE_INT8; }

/* MatMul's shapes for integer operands a (input ia) and b (input ib), with
 * output dtype out: MatMulInteger-10 (int32) and QLinearMatMul-10. */
static toplu_status_t infer_int_matmul(toplu__infer_ctx_t *ctx, int ia, int ib, toplu_dtype_t out) {
  const toplu_tensor_t *a = &ctx->in[ia], *b = &ctx->in[ib];
  if (!is_8bit(a->dtype) || !is_8bit(b->dtype))
    return toplu__infer_error(ctx, TOPLU_ERR_UNSUPPORTED, "operands are %s and %s; toplu takes uint8 or int8",
                             toplu_dtype_name(a->dtype), toplu_dtype_name(b->dtype));
  toplu_tensor_t ab[2] = {*a, *b};
  ab[0].dtype = ab[1].dtype = TOPLU_DTYPE_FLOAT;
  toplu__infer_ctx_t sub = *ctx;
  sub.in = ab;
  sub.n_in = 2;
  toplu_status_t st = infer_matmul(&sub);
  if (st) return st;
  ctx->out[0].dtype = out;
  return TOPLU_OK;
}

/* MatMulInteger-10: (A - a_zero_point)(B - b_zero_point) in int32; zero
 * points scalar (or per row of A [M], per column of B [N]). */
static toplu_status_t infer_matmul_integer(toplu__infer_ctx_t *ctx) {
  for (int i = 2; i < 4; i++)
    if (toplu__infer_has_input(ctx, i) && ctx->in[i].dtype != ctx->in[i - 2].dtype)
      return toplu__infer_error(ctx, TOPLU_ERR_INVALID_MODEL, "%s is %s but %s is %s", i == 2 ? "a_zero_point" : "b_zero_point",
                               toplu_dtype_name(ctx->in[i].dtype), i == 2 ? "A" : "B", toplu_dtype_name(ctx->in[i - 2].dtype));
  return infer_int_matmul(ctx, 0, 1, TOPLU_DTYPE_INT32);
}

/* QLinearMatMul-10: a, a_scale, a_zero_point, b, b_scale, b_zero_point,
 * y_scale, y_zero_point -> y of y_zero_point's type. */
static toplu_status_t infer_qlinear_matmul(toplu__infer_ctx_t *ctx) {
  for (int i = 1; i < 8; i++) {
    if (i == 3) continue;
    if (!toplu__infer_has_input(ctx, i)) return toplu__infer_error(ctx, TOPLU_ERR_INVALID_MODEL, "input %d is missing", i);
    int scale = i == 1 || i == 4 || i == 6;
    if (scale && ctx->in[i].dtype != TOPLU_DTYPE_FLOAT)
      return toplu__infer_error(ctx, TOPLU_ERR_INVALID_MODEL, "input %d (a scale) is %s, not float32", i, toplu_dtype_name(ctx->in[i].dtype));
    if (!scale && !is_8bit(ctx->in[i].dtype))
      return toplu__infer_error(ctx, TOPLU_ERR_UNSUPPORTED, "input %d (a zero point) is %s", i, toplu_dtype_name(ctx->in[i].dtype));
  }
  return infer_int_matmul(ctx, 0, 3, ctx->in[7].dtype);
}

/* toplu.QLinearMatMul (made by graph/fuse.c from a QDQ MatMul or Gemm):
 * QLinearMatMul-10's inputs a, a_scale, a_zero_point, b, b_scale,
 * b_zero_point, y_scale, y_zero_point and a ninth, B [N]: int32 in the
 * accumulator's units (a_scale b_scale[n]) added before requantizing; with
 * y_scale and y_zero_point absent the output is float32, a_scale b_scale[n]
 * acc + B, B then float32 in real units, and the node's post-ops follow. */
static toplu_status_t infer_qlinear_matmul_bias(toplu__infer_ctx_t *ctx) {
  int float_out = !toplu__infer_has_input(ctx, 6);
  for (int i = 1; i < 6; i++) {
    if (i == 3) continue;
    if (!toplu__infer_has_input(ctx, i)) return toplu__infer_error(ctx, TOPLU_ERR_INVALID_MODEL, "input %d is missing", i);
  }
  if (float_out == toplu__infer_has_input(ctx, 7))
    return toplu__infer_error(ctx, TOPLU_ERR_INVALID_MODEL, "y_scale and y_zero_point come together or not at all");
  toplu_dtype_t bt = float_out ? TOPLU_DTYPE_FLOAT : TOPLU_DTYPE_INT32;
  if (toplu__infer_has_input(ctx, 8) && (ctx->in[8].dtype != bt || ctx->in[8].ndim != 1))
    return toplu__infer_error(ctx, TOPLU_ERR_INVALID_MODEL, "B must be a 1-D %s row", toplu_dtype_name(bt));
  return infer_int_matmul(ctx, 0, 3, float_out ? TOPLU_DTYPE_FLOAT : ctx->in[7].dtype);
}

/* toplu.DynamicQuantizeMatMul (made by graph/fuse.c from ONNX Runtime's
 * dynamic quantization chain DynamicQuantizeLinear -> MatMulInteger -> Cast
 * -> Mul(x_scale * w_scale) [-> Add(bias)]): x float32 [..., K], w
 * int8/uint8 [K, N] (constant), w_scale float32 [N] or one, w_zero_point
 * (absent, or w's dtype, [N] or one), bias float32 [N] (optional) -> y
 * float32 [..., N].  x is quantized per tensor at run time as
 * DynamicQuantizeLinear does, so every row's result depends on the whole
 * tensor's range: it mixes rows. */
static toplu_status_t infer_dynamic_qmatmul(toplu__infer_ctx_t *ctx) {
  const toplu_tensor_t *x = &ctx->in[0], *w = &ctx->in[1];
  if (x->dtype != TOPLU_DTYPE_FLOAT || !is_8bit(w->dtype) || w->ndim != 2 || x->ndim < 1)
    return toplu__infer_error(ctx, TOPLU_ERR_INVALID_MODEL, "expects float32 x of rank >= 1 and 2-D int8 or uint8 w (got %s rank %d, %s rank %d)",
                             toplu_dtype_name(x->dtype), x->ndim, toplu_dtype_name(w->dtype), w->ndim);
  int64_t k = x->dims[x->ndim - 1], n = w->dims[1];
  if (k >= 0 && w->dims[0] >= 0 && k != w->dims[0])
    return toplu__infer_error(ctx, TOPLU_ERR_SHAPE, "inner dims %lld (x) and %lld (w) differ", (long long)k, (long long)w->dims[0]);
  const char *names[5] = {"x", "w", "w_scale", "w_zero_point", "bias"};
  for (int i = 2; i < 5; i++) {
    if (!toplu__infer_has_input(ctx, i)) {
      if (i == 2) return toplu__infer_error(ctx, TOPLU_ERR_INVALID_MODEL, "w_scale is missing");
      continue;
    }
    const toplu_tensor_t *t = &ctx->in[i];
    int64_t c = toplu_tensor_numel(t);
    toplu_dtype_t want = i == 3 ? w->dtype : TOPLU_DTYPE_FLOAT;
    if (t->dtype != want || t->ndim > 1 || (c >= 0 && n >= 0 && c != n && (c != 1 || i == 4)))
      return toplu__infer_error(ctx, TOPLU_ERR_INVALID_MODEL, "%s must be %s of %lld elements%s", names[i], toplu_dtype_name(want),
                               (long long)n, i == 4 ? "" : " or one");
  }
  int64_t dims[TOPLU_MAX_DIMS];
  for (int i = 0; i < x->ndim; i++) dims[i] = x->dims[i];
  dims[x->ndim - 1] = n;
  toplu__infer_set(ctx, 0, TOPLU_DTYPE_FLOAT, x->ndim, dims);
  return TOPLU_OK;
}

static int64_t flops_dynamic_qmatmul(const toplu__infer_ctx_t *ctx) {
  const toplu_tensor_t *x = &ctx->in[0];
  return 2 * toplu_tensor_numel(&ctx->out[0]) * x->dims[x->ndim - 1] + 3 * toplu_tensor_numel(x);
}

static int rows_always(const toplu__node_t *n, const void *t) {
  (void)n;
  (void)t;
  return 1;
}

/* toplu.ScaledDotProductAttention (made by graph/fuse.c from MatMul, scale,
 * mask, Softmax, MatMul): Q [..., T, d], KT [..., d, S], V [..., S, dv] and
 * an optional mask (float: added; bool: a Where) broadcasting to [..., T, S]
 * -> Y [..., T, dv] float32; the leading dims broadcast across all four,
 * right-aligned, as MatMul's and Add's do. */
/* The [B, H, T, d] view of a rank-4 [B, T, H, d] tensor (perm 0,2,1,3), or
 * for K (key 1) the [B, H, d, S] view of [B, S, H, d] (perm 0,2,3,1). */
void toplu__sdpa_view(const toplu_tensor_t *x, int key, toplu_tensor_t *view) {
  *view = *x;
  if (x->ndim != 4) return;
  view->dims[1] = x->dims[2];
  view->dims[2] = key ? x->dims[3] : x->dims[1];
  view->dims[3] = key ? x->dims[1] : x->dims[3];
}

static toplu_status_t infer_sdpa(toplu__infer_ctx_t *ctx) {
  /* q_bshd, k_bshd, v_bshd, y_bshd (graph/fuse.c, fold_attention_transposes): the tensor is [B, T|S, H, d],
   * the heads' transposes folded in; the checks below see the [B, H, T, d] (KT: [B, H, d, S]) view */
  static const char *const bshd[3] = {"q_bshd", "k_bshd", "v_bshd"};
  toplu_tensor_t views[3];
  for (int i = 0; i < 3; i++) {
    views[i] = ctx->in[i];
    if (toplu__node_attr_int(ctx->node, bshd[i], 0)) {
      if (ctx->in[i].ndim != 4) return toplu__infer_error(ctx, TOPLU_ERR_SHAPE, "%s needs input %d of rank 4", bshd[i], i);
      toplu__sdpa_view(&ctx->in[i], i == 1, &views[i]);
    }
  }
  const toplu_tensor_t *q = &views[0], *kt = &views[1], *v = &views[2];
  int has_mask = toplu__infer_has_input(ctx, 3);
  for (int i = 0; i < 3; i++) {
    if (ctx->in[i].dtype != TOPLU_DTYPE_FLOAT)
      return toplu__infer_error(ctx, TOPLU_ERR_UNSUPPORTED, "input %d is %s; attention takes float32", i,
                               toplu_dtype_name(ctx->in[i].dtype));
    if (ctx->in[i].ndim < 2) return toplu__infer_error(ctx, TOPLU_ERR_SHAPE, "input %d must have rank >= 2", i);
  }
  if (has_mask && ctx->in[3].dtype != TOPLU_DTYPE_FLOAT && ctx->in[3].dtype != TOPLU_DTYPE_BOOL)
    return toplu__infer_error(ctx, TOPLU_ERR_UNSUPPORTED, "mask is %s; float32 or bool expected",
                             toplu_dtype_name(ctx->in[3].dtype));
  int64_t d = q->dims[q->ndim - 1], dk = kt->dims[kt->ndim - 2], s = kt->dims[kt->ndim - 1], sv = v->dims[v->ndim - 2];
  if ((d >= 0 && dk >= 0 && d != dk) || (s >= 0 && sv >= 0 && s != sv && s != 1)) /* S 1: a mask widens it */
    return toplu__infer_error(ctx, TOPLU_ERR_SHAPE, "Q's d %lld, KT's d %lld and S %lld, V's S %lld do not match",
                             (long long)d, (long long)dk, (long long)s, (long long)sv);
  int nd = q->ndim;
  for (int i = 1; i < 3 + has_mask; i++)
    if (ctx->in[i].ndim > nd) nd = ctx->in[i].ndim;
  if (nd > TOPLU_MAX_DIMS) return toplu__infer_error(ctx, TOPLU_ERR_UNSUPPORTED, "rank too high");
  int64_t dims[TOPLU_MAX_DIMS];
  for (int k = 0; k < nd; k++) {
    int64_t out = 1;
    int sym = 0;
    for (int i = 0; i < 3 + has_mask; i++) {
      const toplu_tensor_t *x = i < 3 ? &views[i] : &ctx->in[i];
      int j = k - (nd - x->ndim);
      if (j < 0) continue;
      /* the last two dims: Q's T and V's dv are the output's; KT's and a
       * mask's last dim (S) are not output dims, nor are Q's d and V's S */
      if (k == nd - 1 && i != 2) continue;
      if (k == nd - 2 && (i == 1 || i == 2)) continue;
      int64_t xd = x->dims[j];
      if (xd < 0) {
        if (!sym && out == 1) out = xd;
        sym = 1;
      } else if (xd != 1) {
        if (out >= 0 && out != 1 && out != xd)
          return toplu__infer_error(ctx, TOPLU_ERR_SHAPE, "dim %d: %lld and %lld do not broadcast", k, (long long)out,
                                   (long long)xd);
        out = xd;
      }
    }
    dims[k] = out;
  }
  if (toplu__node_attr_int(ctx->node, "y_bshd", 0)) {
    if (nd != 4) return toplu__infer_error(ctx, TOPLU_ERR_SHAPE, "y_bshd needs a rank-4 output");
    int64_t h = dims[1];
    dims[1] = dims[2];
    dims[2] = h;
  }
  toplu__infer_set(ctx, 0, TOPLU_DTYPE_FLOAT, nd, dims);
  return TOPLU_OK;
}

/* Both products (2 T S d + 2 T S dv per leading index) and the softmax (~5 T S). */
static int64_t flops_sdpa(const toplu__infer_ctx_t *ctx) {
  const toplu_tensor_t *q = &ctx->in[0], *kt = &ctx->in[1], *y = &ctx->out[0];
  int64_t d = q->dims[q->ndim - 1], s = toplu__node_attr_int(ctx->node, "k_bshd", 0) ? kt->dims[1] : kt->dims[kt->ndim - 1];
  int64_t dv = y->dims[y->ndim - 1], rows = toplu_tensor_numel(y) / (dv > 0 ? dv : 1);
  return rows * s * (2 * d + 2 * dv + 5);
}

const toplu__schema_t toplu__schemas_matmul[] = {
    {"MatMul", "", 1, 2, 2, 1, 1, 0, infer_matmul, flops_matmul, NULL},
    {"Gemm", "", 7, 2, 3, 1, 1, 0, infer_gemm, flops_gemm, toplu__rows_gemm},
    /* (A is input 0 in all three: 2 M N K integer operations, as MatMul's; they had counted one per output
     * element, so an int8 MLP showed 3 kFLOP a sample against 813 k for its float model) */
    {"MatMulInteger", "", 10, 2, 4, 1, 1, 0, infer_matmul_integer, flops_matmul, NULL},
    {"QLinearMatMul", "", 10, 8, 8, 1, 1, 0, infer_qlinear_matmul, flops_matmul, NULL},
    {"QLinearMatMul", "toplu", 1, 6, 9, 1, 1, 0, infer_qlinear_matmul_bias, flops_matmul, NULL},
    {"DynamicQuantizeMatMul", "toplu", 1, 3, 5, 1, 1, 0, infer_dynamic_qmatmul, flops_dynamic_qmatmul, rows_always},
    {"ScaledDotProductAttention", "toplu", 1, 3, 4, 1, 1, 0, infer_sdpa, flops_sdpa, NULL},
    {NULL, NULL, 0, 0, 0, 0, 0, 0, NULL, NULL, NULL},
};
