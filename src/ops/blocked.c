/*
 * ops/blocked.c - kernels that work on oneDNN blocked layouts.
 *
 * Convolutions keep their activations in the layout oneDNN picks (nChw8c on
 * AVX2, nChw16c on AVX-512) from one conv to the next; the planner
 * (runtime/plan.c) reorders only at graph edges and before kernels that
 * need plain row-major data.  This file holds the reorder kernel the
 * planner inserts, and layout-aware versions of ops that sit between convs
 * (toplu_kernels_blocked), each built on a oneDNN primitive that accepts any
 * layout and keeps the padded channels zero.  Their prepare returns
 * TOPLU_ERR_UNSUPPORTED for cases they do not cover; the planner then
 * reorders to plain and uses the plain kernel.
 */
#include <stdlib.h>
#include <string.h>

#include "ops/backend.h"

/* ---- Reorder ---- */

typedef struct prim_state {
  toplu_dnnl_prim_t prim;
  dnnl_memory_desc_t out_md; /* the layout of output 0 (kernels that set info->out_md point here) */
} prim_state_t;

static toplu_status_t prim_state_new(toplu_kernel_ctx_t *ctx, prim_state_t **out) {
  prim_state_t *ps = toplu_kernel_alloc(ctx, sizeof *ps);
  if (!ps) return toplu_kernel_error(ctx, TOPLU_ERR_OUT_OF_MEMORY, "out of memory");
  memset(ps, 0, sizeof *ps);
  ctx->state = ps;
  *out = ps;
  return TOPLU_OK;
}

static void prim_release(toplu_kernel_ctx_t *ctx) {
  prim_state_t *ps = ctx->state;
  if (!ps) return;
  toplu_dnnl_prim_destroy(&ps->prim);
  toplu_kernel_free(ctx, ps);
  ctx->state = NULL;
}

static toplu_status_t prim_bind(toplu_kernel_ctx_t *ctx) {
  const prim_state_t *ps = ctx->state;
  return toplu_dnnl_prim_bind(ctx, &ps->prim, &ctx->exec_state);
}

static void prim_unbind(toplu_kernel_ctx_t *ctx) {
  toplu_dnnl_prim_unbind(ctx->exec_state);
  ctx->exec_state = NULL;
}

static toplu_status_t prim_run(toplu_kernel_ctx_t *ctx) {
  const prim_state_t *ps = ctx->state;
  return toplu_dnnl_prim_execute(ctx, &ps->prim, ctx->exec_state);
}

/* The layout of input i: the blocked descriptor it arrives in, or plain. */
static dnnl_status_t input_md(const toplu_kernel_ctx_t *ctx, int i, dnnl_memory_desc_t *md) {
  if (ctx->in_md && ctx->in_md[i]) {
    *md = *(const dnnl_memory_desc_t *)ctx->in_md[i];
    return dnnl_success;
  }
  return toplu_dnnl_plain_md(md, &ctx->in[i]);
}

static toplu_status_t reorder_prepare(toplu_kernel_ctx_t *ctx, toplu_kernel_info_t *info) {
  prim_state_t *ps;
  toplu_status_t st = prim_state_new(ctx, &ps);
  if (st) return st;
  if (toplu_dnnl_dtype(ctx->in[0].dtype) == dnnl_data_type_undef)
    return toplu_kernel_error(ctx, TOPLU_ERR_INTERNAL, "cannot reorder %s tensors", toplu_dtype_name(ctx->in[0].dtype));
  dnnl_memory_desc_t src, dst;
  dnnl_status_t s = input_md(ctx, 0, &src);
  if (s == dnnl_success) {
    if (ctx->in_md[1]) dst = *(const dnnl_memory_desc_t *)ctx->in_md[1];
    else s = toplu_dnnl_plain_md(&dst, &ctx->in[0]);
  }
  dnnl_primitive_attr_t attr = NULL;
  dnnl_primitive_desc_t pd = NULL;
  if (s == dnnl_success) s = dnnl_primitive_attr_create(&attr);
  if (s == dnnl_success) s = dnnl_primitive_attr_set_scratchpad_mode(attr, dnnl_scratchpad_mode_user);
  if (s == dnnl_success)
    s = dnnl_reorder_primitive_desc_create(&pd, &src, ctx->backend->engine, &dst, ctx->backend->engine, attr);
  if (attr) dnnl_primitive_attr_destroy(attr);
  if (s != dnnl_success) return toplu_dnnl_error(ctx, s, "reorder");
  if ((st = toplu_dnnl_prim_create(ctx, &ps->prim, pd, 0, info))) return st;
  toplu_dnnl_prim_arg(&ps->prim, DNNL_ARG_FROM, TOPLU_DNNL_FROM_INPUT, 0, NULL, &src);
  toplu_dnnl_prim_arg(&ps->prim, DNNL_ARG_TO, TOPLU_DNNL_FROM_OUTPUT, 0, NULL, &dst);
  return TOPLU_OK;
}

const toplu_kernel_t toplu_kernel_reorder = {
    .op_type = "Reorder", .domain = "toplu", .prepare = reorder_prepare, .run = prim_run, .release = prim_release,
    .bind = prim_bind, .unbind = prim_unbind, .flags = TOPLU_KERNEL_LAYOUT};

const toplu_kernel_t toplu_kernels_blocked[] = {
    {.op_type = NULL},
};
