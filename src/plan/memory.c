/*
 * plan/memory.c - real plans' memory and the affine law (see plan/memory.h).
 */
#include "plan/memory.h"

#include <stdlib.h>
#include <string.h>

#include "core/error.h"

toplu_status_t toplu__plan_point_build(toplu_session_t *s, const toplu__batch_shapes_t *sh, int64_t b, int model_nodes,
                                      toplu__plan_point_t *p, toplu_error_t *err) {
  memset(p, 0, sizeof *p);
  p->batch = b;
  p->model_nodes = model_nodes != 0;
  toplu_tensor_t *in = calloc((size_t)sh->n_inputs + 1, sizeof *in);
  if (!in) return toplu__errorf(err, TOPLU_ERR_OUT_OF_MEMORY, "out of memory");
  toplu__batch_shapes_at(sh, b, in);
  toplu_status_t st = toplu_session_memory(s, in, sh->n_inputs, &p->r);
  if (st) {
    /* a shape the plan assumed (sequence 128) may be the cause: say which (it said only the node) */
    toplu__errorf(err, st, "toplu's plan at batch %lld: %s%s%s", (long long)b, toplu_session_last_error(s),
                  sh->note[0] ? "; " : "", sh->note);
    free(in);
    return st;
  }
  int n = toplu_session_steps(s, in, sh->n_inputs, NULL, 0);
  if (n < 0) {
    st = (toplu_status_t)-n;
    toplu__errorf(err, st, "toplu's plan at batch %lld: %s", (long long)b, toplu_session_last_error(s));
    free(in);
    return st;
  }
  toplu_step_info_t *steps = calloc((size_t)n + 1, sizeof *steps);
  size_t cap = (size_t)(model_nodes ? 5 * n : n) + 1; /* model nodes: a fused SiLU's two nodes back (below) */
  p->step_flops = calloc(cap, sizeof *p->step_flops);
  p->step_bytes = calloc(cap, sizeof *p->step_bytes);
  p->step_int8 = calloc(cap, sizeof *p->step_int8);
  p->step_elems = calloc(cap, sizeof *p->step_elems);
  p->step_labels = calloc(cap, TOPLU__STEP_LABEL);
  if (!steps || !p->step_flops || !p->step_bytes || !p->step_int8 || !p->step_elems || !p->step_labels) {
    free(steps);
    free(in);
    toplu__plan_point_free(p);
    return toplu__errorf(err, TOPLU_ERR_OUT_OF_MEMORY, "out of memory");
  }
  n = toplu_session_steps(s, in, sh->n_inputs, steps, n);
  p->n_plan_steps = n > 0 ? n : 0;
  const int plan_steps = p->n_plan_steps; /* (a fused SiLU adds two below) */
  for (int i = 0; i < plan_steps; i++) {
    if (p->model_nodes && steps[i].inserted) continue; /* the model's nodes only, at their logical sizes */
    p->step_int8[p->n_steps] =
        (unsigned char)(toplu__step_is_int8(steps[i].node_op_type) || toplu__step_is_int8(steps[i].op_type));
    p->step_flops[p->n_steps] = steps[i].flops;
    snprintf(p->step_labels + (size_t)p->n_steps * TOPLU__STEP_LABEL, TOPLU__STEP_LABEL, "'%s' (%s)",
             steps[i].name ? steps[i].name : "", steps[i].op_type ? steps[i].op_type : "");
    p->step_elems[p->n_steps] = steps[i].max_tensor_elements;
    p->step_bytes[p->n_steps++] = p->model_nodes ? steps[i].plain_bytes : steps[i].bytes_moved;
    /* The model's nodes: SiLU, Mul(x, Sigmoid(x)), that toplu fused into the step before it (TOPLU_POST_SWISH) is
     * the model's Sigmoid and Mul again, each costed as toplu's plan costed them before the fusion (an element's
     * FLOP, 2 and 3 float32 tensors read or written), so the GPU runtimes' fits hold: PyTorch runs them as two
     * kernels, and the fitted figures were made so (EfficientNet's tables' plateaus went 43-108% above their
     * measurements with the fused step, 2026-12-06).  At the step's output size. */
    for (const char *lb = p->model_nodes && steps[i].op_type ? strstr(steps[i].op_type, "Sigmoid+Mul") : NULL; lb;
         lb = strstr(lb + 1, "Sigmoid+Mul")) {
      int64_t e = steps[i].output_bytes / 4;
      for (int k = 0; k < 2 && (size_t)p->n_steps + 1 < cap; k++) {
        p->step_int8[p->n_steps] = 0;
        p->step_flops[p->n_steps] = e;
        snprintf(p->step_labels + (size_t)p->n_steps * TOPLU__STEP_LABEL, TOPLU__STEP_LABEL, "'%s' (%s)",
                 steps[i].name ? steps[i].name : "", k ? "Mul" : "Sigmoid");
        p->step_elems[p->n_steps] = e;
        p->step_bytes[p->n_steps++] = (k ? 3 : 2) * 4 * e;
        p->n_plan_steps++;
      }
    }
  }
  free(steps);
  free(in);
  return TOPLU_OK;
}

void toplu__plan_point_free(toplu__plan_point_t *p) {
  if (!p) return;
  free(p->step_flops);
  free(p->step_bytes);
  free(p->step_int8);
  free(p->step_elems);
  free(p->step_labels);
  p->step_labels = NULL;
  p->step_flops = p->step_bytes = p->step_elems = NULL;
  p->step_int8 = NULL;
  p->n_steps = p->n_plan_steps = 0;
}

void toplu__plan_point_terms(const toplu__plan_point_t *p, int io_copies, toplu__mem_terms_t *t) {
  t->weights = (double)p->r.weights_bytes;
  t->activation = (double)p->r.activation_bytes;
  t->workspace = (double)p->r.workspace_bytes;
  t->io = (double)(p->r.input_bytes + p->r.output_bytes) * (io_copies > 0 ? io_copies : 1);
  t->overhead = (double)p->r.kernel_bytes;
}

/* Fixed and per-sample parts of one term. */
static void fit1(double v1, int64_t b1, double v2, int64_t b2, double *fixed, double *slope) {
  *slope = (v2 - v1) / (double)(b2 - b1);
  *fixed = v1 - *slope * (double)b1;
}

void toplu__mem_law_fit(const toplu__mem_terms_t *t1, int64_t b1, const toplu__mem_terms_t *t2, int64_t b2,
                       toplu__mem_law_t *law) {
  fit1(t1->weights, b1, t2->weights, b2, &law->fixed.weights, &law->per_sample.weights);
  fit1(t1->activation, b1, t2->activation, b2, &law->fixed.activation, &law->per_sample.activation);
  fit1(t1->workspace, b1, t2->workspace, b2, &law->fixed.workspace, &law->per_sample.workspace);
  fit1(t1->io, b1, t2->io, b2, &law->fixed.io, &law->per_sample.io);
  fit1(t1->overhead, b1, t2->overhead, b2, &law->fixed.overhead, &law->per_sample.overhead);
}

void toplu__mem_law_at(const toplu__mem_law_t *law, int64_t b, toplu__mem_terms_t *t) {
  double x = (double)b;
  t->weights = law->fixed.weights + law->per_sample.weights * x;
  t->activation = law->fixed.activation + law->per_sample.activation * x;
  t->workspace = law->fixed.workspace + law->per_sample.workspace * x;
  t->io = law->fixed.io + law->per_sample.io * x;
  t->overhead = law->fixed.overhead + law->per_sample.overhead * x;
}

double toplu__mem_terms_total(const toplu__mem_terms_t *t) {
  return t->weights + t->activation + t->workspace + t->io + t->overhead;
}

int toplu__step_is_int8(const char *op_type) {
  static const char *const ops[] = {"QLinearConv", "QLinearMatMul", "ConvInteger", "MatMulInteger", "QGemm",
                                    "DynamicQuantizeMatMul", NULL};
  if (!op_type) return 0;
  for (int k = 0; ops[k]; k++)
    if (strstr(op_type, ops[k])) return 1;
  return 0;
}
