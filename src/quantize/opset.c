/*
 * quantize/opset.c - rewrite a default-domain graph of opset 7..12 to opset 13
 * (per-axis QuantizeLinear/DequantizeLinear need 13).
 *
 * The ops whose meaning or signature changed between those opsets
 * (onnx/docs/Changelog.md) take their opset-13 forms: attributes that
 * became inputs (Squeeze, Unsqueeze, ReduceSum and Split at 13; Clip and Pad
 * at 11; Slice and TopK at 10) are moved into new int64/float initializers,
 * Dropout loses ratio (an input since 12; inference ignores it), and
 * Softmax, LogSoftmax and Hardmax are kept when their axis is the last one
 * (the same either way).  Anything else that changed (Upsample, Resize-10, Softmax on
 * another axis, the broadcast attributes of opset < 7, a Reshape with a
 * shape attribute, BatchNormalization's spatial = 0) makes the rewrite
 * refuse, naming the node: nothing is changed until every node passed the
 * check.
 */
#include <float.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "quantize/opset.h"

static int is(const Onnx__NodeProto *n, const char *op) {
  return !strcmp(n->op_type, op) && (!n->domain || !*n->domain || !strcmp(n->domain, "ai.onnx"));
}

/* Why node n cannot move from opset `from` to 13 (NULL: it can). */
static const char *blocker(const Onnx__NodeProto *n, int64_t from, qz_rank_fn rank_of, void *user) {
  if (n->domain && *n->domain && strcmp(n->domain, "ai.onnx")) return NULL; /* other domains keep their versions */
  if (is(n, "Upsample")) return "Upsample was removed in opset 10";
  if (is(n, "Resize") && from < 11) return "Resize-10 has other coordinate rules than Resize-13";
  if ((is(n, "Softmax") || is(n, "LogSoftmax") || is(n, "Hardmax")) && from < 13) {
    /* before 13: over the input flattened to 2-D at axis; the same as 13's per-axis form when axis is the last */
    int64_t axis = qp_attr_int(n, "axis", 1);
    int rank = n->n_input > 0 && rank_of ? rank_of(user, n->input[0]) : -1;
    if (axis != -1 && !(rank > 0 && (axis == rank - 1 || axis + rank == rank - 1)))
      return "over an axis other than the last it means another thing before opset 13";
  }
  if (from < 7 && (qp_attr(n, "broadcast") || qp_attr(n, "consumed_inputs")))
    return "broadcast and consumed_inputs attributes are gone since opset 7";
  if (is(n, "Reshape") && qp_attr(n, "shape")) return "Reshape's shape attribute is gone since opset 5";
  if (is(n, "BatchNormalization") && qp_attr_int(n, "spatial", 1) != 1) return "spatial = 0 is gone since opset 9";
  if (is(n, "Scatter")) return "Scatter was removed in opset 11";
  return NULL;
}

/* Move ints attribute name of n into a new int64 initializer at input k. */
static toplu_status_t ints_to_input(Onnx__GraphProto *g, Onnx__NodeProto *n, const char *name, int k,
                                    toplu_error_t *err) {
  Onnx__AttributeProto *a = qp_attr(n, name);
  if (!a) return TOPLU_OK;
  char base[600];
  snprintf(base, sizeof base, "%s_%s", n->name && *n->name ? n->name : n->output[0], name);
  char *nm = qp_unique(g, base, "");
  int64_t dims[1] = {(int64_t)a->n_ints};
  int ok = nm && qp_init_add(g, nm, TOPLU_DTYPE_INT64, 1, dims, a->ints, a->n_ints * sizeof(int64_t)) >= 0 &&
           !qp_set_input(n, k, nm);
  free(nm);
  qp_attr_remove(n, name);
  return ok ? TOPLU_OK : toplu__errorf(err, TOPLU_ERR_OUT_OF_MEMORY, "out of memory rewriting node '%s'", n->name);
}

/* Move float attribute name of n (or dflt when absent) into a float scalar initializer at input k. */
static toplu_status_t float_to_input(Onnx__GraphProto *g, Onnx__NodeProto *n, const char *name, float dflt, int k,
                                     toplu_error_t *err) {
  Onnx__AttributeProto *a = qp_attr(n, name);
  float v = a && a->has_f ? a->f : dflt;
  char base[600];
  snprintf(base, sizeof base, "%s_%s", n->name && *n->name ? n->name : n->output[0], name);
  char *nm = qp_unique(g, base, "");
  int ok = nm && qp_init_add(g, nm, TOPLU_DTYPE_FLOAT, 0, NULL, &v, sizeof v) >= 0 && !qp_set_input(n, k, nm);
  free(nm);
  qp_attr_remove(n, name);
  return ok ? TOPLU_OK : toplu__errorf(err, TOPLU_ERR_OUT_OF_MEMORY, "out of memory rewriting node '%s'", n->name);
}

toplu_status_t qz_opset_check(const Onnx__GraphProto *g, int64_t from, qz_rank_fn rank_of, void *user, char *why,
                              size_t why_size) {
  for (size_t i = 0; i < g->n_node; i++) {
    const char *b = g->node[i] ? blocker(g->node[i], from, rank_of, user) : NULL;
    if (b) {
      snprintf(why, why_size, "node '%s' (%s): %s", g->node[i]->name ? g->node[i]->name : "", g->node[i]->op_type, b);
      return TOPLU_ERR_UNSUPPORTED;
    }
  }
  return TOPLU_OK;
}

toplu_status_t qz_opset_rewrite(Onnx__GraphProto *g, int64_t from, toplu_error_t *err) {
  toplu_status_t st = TOPLU_OK;
  for (size_t i = 0; !st && i < g->n_node; i++) {
    Onnx__NodeProto *n = g->node[i];
    if (!n || (n->domain && *n->domain && strcmp(n->domain, "ai.onnx"))) continue;
    if (from < 13 && (is(n, "Squeeze") || is(n, "Unsqueeze") || is(n, "ReduceSum"))) st = ints_to_input(g, n, "axes", 1, err);
    else if (from < 13 && is(n, "Split")) st = ints_to_input(g, n, "split", 1, err);
    else if (from < 11 && is(n, "Clip")) {
      st = float_to_input(g, n, "min", -FLT_MAX, 1, err);
      if (!st) st = float_to_input(g, n, "max", FLT_MAX, 2, err);
    } else if (from < 11 && is(n, "Pad")) {
      st = ints_to_input(g, n, "pads", 1, err);
      if (!st) st = float_to_input(g, n, "value", 0.0f, 2, err);
    } else if (from < 10 && is(n, "Slice")) {
      int has_axes = qp_attr(n, "axes") != NULL;
      st = ints_to_input(g, n, "starts", 1, err);
      if (!st) st = ints_to_input(g, n, "ends", 2, err);
      if (!st && has_axes) st = ints_to_input(g, n, "axes", 3, err);
    } else if (from < 10 && is(n, "TopK")) {
      int64_t k = qp_attr_int(n, "k", 1);
      char base[600];
      snprintf(base, sizeof base, "%s_k", n->name && *n->name ? n->name : n->output[0]);
      char *nm = qp_unique(g, base, "");
      int64_t dims[1] = {1};
      if (!nm || qp_init_add(g, nm, TOPLU_DTYPE_INT64, 1, dims, &k, sizeof k) < 0 || qp_set_input(n, 1, nm))
        st = toplu__errorf(err, TOPLU_ERR_OUT_OF_MEMORY, "out of memory rewriting node '%s'", n->name);
      free(nm);
      qp_attr_remove(n, "k");
    } else if (is(n, "Dropout")) {
      qp_attr_remove(n, "ratio");
      qp_attr_remove(n, "is_test");
    } else if (is(n, "BatchNormalization")) {
      qp_attr_remove(n, "spatial");
    }
  }
  return st;
}
