/*
 * graph/schema_rnn.c - the recurrent ops LSTM-7/14, GRU-7/14 and RNN-7/14
 * (ONNX operator spec, https://onnx.ai/onnx/operators/onnx__LSTM.html,
 * onnx__GRU.html, onnx__RNN.html): shapes and types of Y, Y_h, Y_c.
 *
 * With G gates (LSTM 4, GRU 3, RNN 1), D directions (2 when direction is
 * "bidirectional", else 1) and H = hidden_size:
 *   X  [S, N, I] (layout 0) or [N, S, I] (layout 1, opset 14)
 *   W  [D, G*H, I], R [D, G*H, H], B [D, 2*G*H], sequence_lens [N] int32,
 *   initial_h / initial_c [D, N, H] (layout 0) or [N, D, H] (layout 1),
 *   P  [D, 3*H] (LSTM peepholes)
 *   Y  [S, D, N, H] (layout 0) or [N, S, D, H];  Y_h / Y_c [D, N, H] or [N, D, H].
 * The batch N and sequence S come from X and stay symbolic at load.
 * Layout 0 runs along dim 0 (the sequence): such a node mixes rows.
 */
#include <string.h>

#include "graph/schema.h"

/* Gates per op: LSTM 4, GRU 3, RNN 1. */
static int rnn_gates(const char *op) { return !strcmp(op, "LSTM") ? 4 : !strcmp(op, "GRU") ? 3 : 1; }

/* Check dim d of input `what` (rank known) against want (either may be a symbol). */
static toplu_status_t want_dim(toplu__infer_ctx_t *ctx, int i, const char *what, int d, int64_t want) {
  const toplu_tensor_t *t = &ctx->in[i];
  if (t->dims[d] >= 0 && want >= 0 && t->dims[d] != want)
    return toplu__infer_error(ctx, TOPLU_ERR_SHAPE, "%s dim %d is %lld, expected %lld", what, d,
                              (long long)t->dims[d], (long long)want);
  return TOPLU_OK;
}

static toplu_status_t want_rank(toplu__infer_ctx_t *ctx, int i, const char *what, int rank) {
  if (ctx->in[i].ndim != rank)
    return toplu__infer_error(ctx, TOPLU_ERR_SHAPE, "%s must have rank %d, got %d", what, rank, ctx->in[i].ndim);
  return TOPLU_OK;
}

/* Attribute of the wrong type: an error naming it (missing is fine). */
static toplu_status_t want_attr(toplu__infer_ctx_t *ctx, const char *name, toplu__attr_type_t type, const char *tn) {
  const toplu__attr_t *a = toplu__node_attr(ctx->node, name);
  if (a && a->type != type && !(type == TOPLU_ATTR_FLOAT && a->type == TOPLU_ATTR_INT))
    return toplu__infer_error(ctx, TOPLU_ERR_INVALID_MODEL, "attribute '%s' must be %s", name, tn);
  return TOPLU_OK;
}

static toplu_status_t infer_rnn(toplu__infer_ctx_t *ctx) {
  const toplu__node_t *n = ctx->node;
  const int lstm = !strcmp(n->op_type, "LSTM"), gru = !strcmp(n->op_type, "GRU");
  const int G = rnn_gates(n->op_type);
  toplu_status_t st;
  static const struct {
    const char *name;
    toplu__attr_type_t type;
    const char *tn;
  } attrs[] = {{"hidden_size", TOPLU_ATTR_INT, "an int"},          {"direction", TOPLU_ATTR_STRING, "a string"},
               {"layout", TOPLU_ATTR_INT, "an int"},               {"clip", TOPLU_ATTR_FLOAT, "a float"},
               {"activations", TOPLU_ATTR_STRINGS, "strings"},     {"activation_alpha", TOPLU_ATTR_FLOATS, "floats"},
               {"activation_beta", TOPLU_ATTR_FLOATS, "floats"},   {"input_forget", TOPLU_ATTR_INT, "an int"},
               {"linear_before_reset", TOPLU_ATTR_INT, "an int"}};
  for (size_t k = 0; k < sizeof attrs / sizeof attrs[0]; k++)
    if ((st = want_attr(ctx, attrs[k].name, attrs[k].type, attrs[k].tn))) return st;
  const char *dir = toplu__node_attr_string(n, "direction", "forward");
  int D;
  if (!strcmp(dir, "forward") || !strcmp(dir, "reverse")) D = 1;
  else if (!strcmp(dir, "bidirectional")) D = 2;
  else
    return toplu__infer_error(ctx, TOPLU_ERR_INVALID_MODEL,
                              "direction '%s' is not forward, reverse or bidirectional", dir);
  int64_t layout = toplu__node_attr_int(n, "layout", 0);
  if (layout != 0 && layout != 1) return toplu__infer_error(ctx, TOPLU_ERR_INVALID_MODEL, "layout %lld is not 0 or 1", (long long)layout);
  if (layout && n->opset < 14)
    return toplu__infer_error(ctx, TOPLU_ERR_INVALID_MODEL, "layout is an attribute of opset 14, the node is opset %lld",
                              (long long)n->opset);
  const toplu_tensor_t *x = &ctx->in[0], *w = &ctx->in[1], *r = &ctx->in[2];
  if ((st = want_rank(ctx, 0, "X", 3)) || (st = want_rank(ctx, 1, "W", 3)) || (st = want_rank(ctx, 2, "R", 3)))
    return st;
  if (x->dtype != w->dtype || x->dtype != r->dtype)
    return toplu__infer_error(ctx, TOPLU_ERR_SHAPE, "X, W and R must share a type (%s, %s, %s)",
                              toplu_dtype_name(x->dtype), toplu_dtype_name(w->dtype), toplu_dtype_name(r->dtype));
  int64_t S = x->dims[layout ? 1 : 0], N = x->dims[layout ? 0 : 1], I = x->dims[2];
  /* hidden_size: the attribute, else R's last dim */
  int64_t H = toplu__node_attr_int(n, "hidden_size", -1);
  if (!toplu__node_attr(n, "hidden_size")) H = r->dims[2] >= 0 ? r->dims[2] : toplu__infer_new_dim(ctx);
  else if (H <= 0) return toplu__infer_error(ctx, TOPLU_ERR_INVALID_MODEL, "hidden_size %lld must be positive", (long long)H);
  int64_t GH = H >= 0 ? G * H : -1;
  if ((st = want_dim(ctx, 1, "W", 0, D)) || (st = want_dim(ctx, 1, "W", 1, GH)) || (st = want_dim(ctx, 1, "W", 2, I)) ||
      (st = want_dim(ctx, 2, "R", 0, D)) || (st = want_dim(ctx, 2, "R", 1, GH)) || (st = want_dim(ctx, 2, "R", 2, H)))
    return st;
  if (toplu__infer_has_input(ctx, 3)) { /* B */
    if ((st = want_rank(ctx, 3, "B", 2)) || (st = want_dim(ctx, 3, "B", 0, D)) ||
        (st = want_dim(ctx, 3, "B", 1, GH >= 0 ? 2 * GH : -1)))
      return st;
    if (ctx->in[3].dtype != x->dtype) return toplu__infer_error(ctx, TOPLU_ERR_SHAPE, "B's type is not X's");
  }
  if (toplu__infer_has_input(ctx, 4)) { /* sequence_lens */
    if ((st = want_rank(ctx, 4, "sequence_lens", 1)) || (st = want_dim(ctx, 4, "sequence_lens", 0, N))) return st;
    if (ctx->in[4].dtype != TOPLU_DTYPE_INT32)
      return toplu__infer_error(ctx, TOPLU_ERR_SHAPE, "sequence_lens must be int32, got %s",
                                toplu_dtype_name(ctx->in[4].dtype));
  }
  for (int i = 5; i <= (lstm ? 6 : 5); i++) { /* initial_h, initial_c */
    if (!toplu__infer_has_input(ctx, i)) continue;
    const char *what = i == 5 ? "initial_h" : "initial_c";
    if ((st = want_rank(ctx, i, what, 3)) || (st = want_dim(ctx, i, what, layout ? 1 : 0, D)) ||
        (st = want_dim(ctx, i, what, layout ? 0 : 1, N)) || (st = want_dim(ctx, i, what, 2, H)))
      return st;
    if (ctx->in[i].dtype != x->dtype) return toplu__infer_error(ctx, TOPLU_ERR_SHAPE, "%s's type is not X's", what);
  }
  if (lstm && toplu__infer_has_input(ctx, 7)) { /* P */
    if ((st = want_rank(ctx, 7, "P", 2)) || (st = want_dim(ctx, 7, "P", 0, D)) ||
        (st = want_dim(ctx, 7, "P", 1, H >= 0 ? 3 * H : -1)))
      return st;
    if (ctx->in[7].dtype != x->dtype) return toplu__infer_error(ctx, TOPLU_ERR_SHAPE, "P's type is not X's");
  }
  if (!gru && toplu__node_attr(n, "linear_before_reset"))
    return toplu__infer_error(ctx, TOPLU_ERR_INVALID_MODEL, "linear_before_reset is an attribute of GRU only");
  if (!lstm && toplu__node_attr(n, "input_forget"))
    return toplu__infer_error(ctx, TOPLU_ERR_INVALID_MODEL, "input_forget is an attribute of LSTM only");
  int64_t y[4], yh[3];
  if (layout) {
    y[0] = N, y[1] = S, y[2] = D, y[3] = H;
    yh[0] = N, yh[1] = D, yh[2] = H;
  } else {
    y[0] = S, y[1] = D, y[2] = N, y[3] = H;
    yh[0] = D, yh[1] = N, yh[2] = H;
  }
  toplu__infer_set(ctx, 0, x->dtype, 4, y);
  for (int i = 1; i < ctx->n_out; i++) toplu__infer_set(ctx, i, x->dtype, 3, yh);
  return TOPLU_OK;
}

/* 2 * S * N * D * G*H * (I + H): the input and the recurrent products. */
static int64_t flops_rnn(const toplu__infer_ctx_t *ctx) {
  int64_t layout = toplu__node_attr_int(ctx->node, "layout", 0);
  const toplu_tensor_t *x = &ctx->in[0], *r = &ctx->in[2];
  int64_t S = x->dims[layout ? 1 : 0], N = x->dims[layout ? 0 : 1], I = x->dims[2];
  int64_t D = r->dims[0], GH = r->dims[1], H = r->dims[2];
  return 2 * S * N * D * GH * (I + H);
}

/* Layout 0 has the sequence in dim 0: the node works along it. */
static int rows_rnn(const toplu__node_t *n, const void *t) {
  (void)t;
  return toplu__node_attr_int(n, "layout", 0) == 0;
}

const toplu__schema_t toplu__schemas_rnn[] = {
    {"LSTM", "", 7, 3, 8, 0, 3, 0, infer_rnn, flops_rnn, rows_rnn},
    {"GRU", "", 7, 3, 6, 0, 2, 0, infer_rnn, flops_rnn, rows_rnn},
    {"RNN", "", 7, 3, 6, 0, 2, 0, infer_rnn, flops_rnn, rows_rnn},
    {NULL, NULL, 0, 0, 0, 0, 0, 0, NULL, NULL, NULL},
};
