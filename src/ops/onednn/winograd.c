/*
 * ops/onednn/winograd.c - 3x3 stride-1 Conv by Winograd F(4x4, 3x3) on AVX2 and AVX-512.
 *
 * Source: A. Lavin and S. Gray, "Fast Algorithms for Convolutional Neural
 * Networks", CVPR 2016 (arXiv:1509.09308), section 4 and the F(4x4, 3x3)
 * matrices B^T (6x6), G (6x3) and A^T (4x6) of its appendix.  Each 4x4 tile
 * of the output is A^T [ (G g G^T) . (B^T d B) ] A over a 6x6 input patch d,
 * so the 36 multiplies per input channel and output channel of a tile replace
 * 144 (4x fewer); summed over input channels, the 36 element-wise products
 * become 36 independent matrix products [tiles x C] x [C x K].
 *
 * Why our own kernel: oneDNN 2.6 offers Winograd only on AVX-512 cores; on
 * AVX2 its direct jit:avx2 convolution reaches 49-69% of the fp32 FMA peak
 * on ResNet's 3x3 layers (issue 12's profile).  On AVX-512 oneDNN's own
 * Winograd (jit_wino_4x3, jit_fp32_wino_2x3) is as fast as this kernel, but
 * it chooses its transformed-weight format by the batch size (F(2x2, 3x3)
 * at batch 1, F(4x4, 3x3) with a blocking that changes with the batch above
 * it): a session's plans for several batch sizes would each hold their own
 * copy of 1.8-4x the weights, where this kernel's u is one layout shared by
 * all of them (docs/performance.md, 2026-12-04).  This kernel is a candidate
 * tried before oneDNN's convolution (TOPLU_KERNEL_BLOCKED_ALT: when its
 * source arrives in one of oneDNN's blocked layouts, as it does after
 * another convolution); supports() takes 2-D, group 1, dilation 1, stride
 * 1, 3x3 kernels, float32, channel counts multiple of the vector width, on
 * a CPU with AVX2 and FMA, and a shape with enough tiles per image.
 * prepare transforms and packs the weights once; run does, per block of
 * tiles and per thread: the input transform (read from nChw8c with AVX2,
 * nChw16c with AVX-512: 8 or 16 channels a vector), the 36 products on the
 * micro-kernels of ops/onednn/gemm_avx2.h (6x16 in ymm registers; on
 * AVX-512 6x64 in zmm, four 16-column panels of the same packed u a call),
 * then the output transform with bias and the node's fused post-ops,
 * written in the same blocked layout (ops/onednn/winograd_isa.h has both
 * widths).  On AVX-512 the blocked nChw16c output also lets the 1x1
 * convolutions after it run on oneDNN's jit_1x1, faster there than
 * brgconv_1x1 on channels-last.  TOPLU_CONV_WINOGRAD=0 turns the kernel off
 * (A/B runs).  Numerics: F(4x4, 3x3) rounds more than direct convolution
 * (relative error about 1e-6..1e-5 per layer in float32); tests compare it
 * with oneDNN's direct convolution.
 */
#include <math.h>
#include <omp.h>
#include <stdlib.h>
#include <string.h>

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#define WG_X86 1
#else
#define WG_X86 0
#endif

#include "graph/schema_conv.h"
#include "ops/onednn/gemm_avx2.h"
#include "ops/onednn/onednn.h"

#define WG_TILE 4   /* output tile (m) */
#define WG_ALPHA 6  /* input patch: m + r - 1 */
#define WG_POS 36   /* WG_ALPHA^2 element-wise products */
#define WG_MR 6     /* micro-kernel rows (tiles) */
#define WG_NR 16    /* micro-kernel columns (output channels) */
/* Scratch per thread for a block of tiles: its transformed input and
 * products (AVX2: Zen 3's 512 KiB L2; AVX-512: Zen 5's 1 MiB). */
#define WG_BLOCK_BYTES (384u << 10)
#define WG_BLOCK_BYTES_512 (768u << 10)

typedef struct wg_state {
  int64_t n, c, k, h, w, oh, ow, pad_t, pad_l;
  int64_t th, tw, tiles; /* tiles per image rows / cols, tiles in all (n * th * tw) */
  int64_t kpad;          /* K rounded up to WG_NR */
  int64_t tb;            /* tiles per block (a multiple of WG_MR) */
  int64_t blocks;
  int wide;              /* one block shared by all threads stage by stage (few tiles) */
  int vl;                /* channels a vector: 16 (AVX-512, nChw16c) or 8 (AVX2, nChw8c) */
  int np;                /* 16-column panels a product call: 4 (AVX-512) or 1 */
  float *u;              /* weights: [36][kpad / 16][C][16] (shared, toplu__dnnl_pack_custom) */
  float *bias;           /* [kpad] (zeros when the node has none), right after u */
  int sum_input;         /* input holding the residual addend, or -1 */
  dnnl_memory_desc_t src_md, dst_md;
} wg_state_t;

/* Product calls per position: groups of np 16-column panels. */
static int64_t wg_groups(const wg_state_t *ws) { return (ws->kpad / WG_NR + ws->np - 1) / ws->np; }

static int wg_post_ok(const toplu__node_t *n) {
  for (int i = 0; i < n->n_post; i++) {
    switch (n->post[i].kind) {
      case TOPLU_POST_RELU: case TOPLU_POST_LEAKY_RELU: case TOPLU_POST_CLIP: case TOPLU_POST_SIGMOID:
      case TOPLU_POST_TANH: case TOPLU_POST_HARD_SIGMOID: case TOPLU_POST_HARD_SWISH: case TOPLU_POST_SUM:
      case TOPLU_POST_LINEAR: break;
      default: return 0;
    }
  }
  return 1;
}

/* The geometry this kernel takes; 0 (with the reason in *why) otherwise. */
static int wg_geometry(const toplu__kernel_ctx_t *ctx, toplu__conv_params_t *p, const char **why) {
  *why = NULL;
  if (!toplu__gemm_avx2_ok()) return *why = "the CPU has no AVX2 and FMA", 0;
  if (getenv("TOPLU_CONV_WINOGRAD") && !strcmp(getenv("TOPLU_CONV_WINOGRAD"), "0"))
    return *why = "TOPLU_CONV_WINOGRAD=0", 0; /* A/B runs */
  if (ctx->n_in < 2 || ctx->in[0].dtype != TOPLU_DTYPE_FLOAT || ctx->in[1].dtype != TOPLU_DTYPE_FLOAT ||
      ctx->in[0].ndim != 4 || ctx->in[1].ndim != 4 || !ctx->in[1].data)
    return *why = "float32 2-D convolution with constant weights only", 0;
  if (ctx->n_in > 2 && ctx->in[2].ndim >= 0 && (ctx->in[2].dtype != TOPLU_DTYPE_FLOAT || !ctx->in[2].data))
    return *why = "constant float32 bias only", 0;
  toplu_error_t e;
  toplu_error_clear(&e);
  toplu__infer_ctx_t ictx = {.graph = (toplu__graph_t *)ctx->graph, .node = ctx->node, .n_in = ctx->n_in,
                            .n_out = ctx->n_out, .in = ctx->in, .out = ctx->out, .concrete = 1, .err = &e};
  if (toplu__conv_params(&ictx, p)) return *why = "convolution parameters", 0;
  if (p->transpose || p->spatial != 2 || p->group != 1) return *why = "group 1 only", 0;
  for (int i = 0; i < 2; i++)
    if (p->kernel[i] != 3 || p->stride[i] != 1 || p->dilation[i] != 1 || p->pad_begin[i] > 2 || p->pad_end[i] > 2)
      return *why = "3x3 kernels, stride 1, dilation 1, padding up to 2", 0;
  /* whole vectors of the blocked layout: 16 channels on AVX-512 (nChw16c, the layout of oneDNN's 1x1
   * convolutions there), 8 on AVX2 */
  if (toplu__gemm_avx512_ok() ? p->c_in % 16 || p->c_out % 16 : p->c_in % 8 || p->c_out % 8)
    return *why = toplu__gemm_avx512_ok() ? "channel counts multiple of 16" : "channel counts multiple of 8", 0;
  if (!wg_post_ok(ctx->node)) return *why = "a post-op it cannot apply", 0;
  /* Enough tiles that every thread gets work, and channels enough that the
   * products, not the transforms, dominate (below that oneDNN's direct
   * convolution is as fast: measured, docs/performance.md). */
  /* per image, not per batch: the choice (and the 4x transformed weights it
   * holds) must not change with the batch size, or a session's plans for
   * different batch sizes would hold different weights (the planner counts
   * them once) */
  int64_t tiles = ((p->out[0] + 3) / 4) * ((p->out[1] + 3) / 4);
  /* at least two micro-kernel rows' worth, or the 36 transformed weight
   * matrices (4x the weights) cost more memory traffic than they save */
  if (tiles < 2 * WG_MR) return *why = "too few output tiles", 0;
  if (p->c_in < 16 || p->c_out < 16) return *why = "too few channels", 0;
  return 1;
}

static int wg_supports(const toplu__kernel_ctx_t *ctx) {
  toplu__conv_params_t p;
  const char *why;
  return wg_geometry(ctx, &p, &why);
}

/* u = G g G^T for one 3x3 kernel g (row-major), u row-major 6x6. */
static void wg_weight_tile(const float *g, float *u) {
  static const float G[6][3] = {{1.f / 4, 0, 0},           {-1.f / 6, -1.f / 6, -1.f / 6}, {-1.f / 6, 1.f / 6, -1.f / 6},
                                {1.f / 24, 1.f / 12, 1.f / 6}, {1.f / 24, -1.f / 12, 1.f / 6}, {0, 0, 1}};
  float t[6][3];
  for (int i = 0; i < 6; i++)
    for (int j = 0; j < 3; j++) t[i][j] = G[i][0] * g[0 * 3 + j] + G[i][1] * g[1 * 3 + j] + G[i][2] * g[2 * 3 + j];
  for (int i = 0; i < 6; i++)
    for (int j = 0; j < 6; j++) u[i * 6 + j] = t[i][0] * G[j][0] + t[i][1] * G[j][1] + t[i][2] * G[j][2];
}

typedef struct wg_fill {
  const float *w, *bias; /* W [K][C][3][3]; bias [K] or NULL */
  int64_t k, c, kpad;
} wg_fill_t;

/* The transformed weights u[36][kpad / 16][C][16] (zeros past K) and the bias [kpad]. */
static void wg_fill(void *dst, const void *arg) {
  const wg_fill_t *f = arg;
  float *u = dst, u6[WG_POS];
  size_t n = (size_t)WG_POS * (size_t)f->kpad * (size_t)f->c;
  memset(u, 0, (n + (size_t)f->kpad) * sizeof(float));
  for (int64_t k = 0; k < f->k; k++)
    for (int64_t c = 0; c < f->c; c++) {
      wg_weight_tile(f->w + (k * f->c + c) * 9, u6);
      for (int x = 0; x < WG_POS; x++) u[(((int64_t)x * (f->kpad / WG_NR) + k / WG_NR) * f->c + c) * WG_NR + k % WG_NR] = u6[x];
    }
  if (f->bias) memcpy(u + n, f->bias, (size_t)f->k * sizeof(float));
}

static toplu_status_t wg_prepare(toplu__kernel_ctx_t *ctx, toplu__kernel_info_t *info) {
  toplu__conv_params_t p;
  const char *why;
  if (!wg_geometry(ctx, &p, &why))
    return toplu__kernel_error(ctx, TOPLU_ERR_UNSUPPORTED, "Winograd convolution: %s", why);
  const toplu__node_t *n = ctx->node;
  wg_state_t *ws = toplu__kernel_alloc(ctx, sizeof *ws);
  if (!ws) return toplu__kernel_error(ctx, TOPLU_ERR_OUT_OF_MEMORY, "out of memory");
  memset(ws, 0, sizeof *ws);
  ctx->state = ws;
  ws->sum_input = -1;
  for (int i = 0; i < n->n_post; i++)
    if (n->post[i].kind == TOPLU_POST_SUM) ws->sum_input = n->post[i].input;
  ws->n = p.n, ws->c = p.c_in, ws->k = p.c_out, ws->h = p.in[0], ws->w = p.in[1], ws->oh = p.out[0], ws->ow = p.out[1];
  ws->pad_t = p.pad_begin[0], ws->pad_l = p.pad_begin[1];
  ws->th = (ws->oh + WG_TILE - 1) / WG_TILE, ws->tw = (ws->ow + WG_TILE - 1) / WG_TILE;
  ws->tiles = ws->n * ws->th * ws->tw;
  ws->kpad = (ws->k + WG_NR - 1) / WG_NR * WG_NR;
  ws->vl = toplu__gemm_avx512_ok() ? 16 : 8;
  ws->np = ws->vl == 16 ? 4 : 1;
  /* tiles per block: the block's scratch near WG_BLOCK_BYTES, at least one
   * micro-kernel's rows, and blocks a multiple of the threads */
  int64_t per_tile = (int64_t)WG_POS * (ws->c + ws->kpad) * (int64_t)sizeof(float);
  int64_t tb = (int64_t)(ws->vl == 16 ? WG_BLOCK_BYTES_512 : WG_BLOCK_BYTES) / per_tile / WG_MR * WG_MR;
  if (tb < WG_MR) tb = WG_MR;
  int64_t blocks = (ws->tiles + tb - 1) / tb, nt = ctx->threads;
  /* scratch: the most either way below can use (2 * nt blocks of tb tiles),
   * the same at every batch size, as the planner's memory law expects */
  size_t wsb = (size_t)(2 * nt) * (size_t)(tb * per_tile) + 64 * (size_t)nt;
  if (nt > 1 && blocks < 2 * nt) {
    /* fewer tiles than give every thread two blocks: one block of all of them */
    ws->wide = 1;
    ws->tb = (ws->tiles + WG_MR - 1) / WG_MR * WG_MR;
    ws->blocks = 1;
  } else {
    blocks = (blocks + nt - 1) / nt * nt;
    tb = (ws->tiles + blocks - 1) / blocks;
    tb = (tb + WG_MR - 1) / WG_MR * WG_MR;
    ws->tb = tb;
    ws->blocks = (ws->tiles + tb - 1) / tb;
  }
  info->workspace_bytes = wsb;

  /* weights [K][C][3][3] -> u[36][kpad/16][C][16], then the bias [kpad]:
   * one buffer, shared by the session's plans of other batch sizes */
  size_t ubytes = (size_t)WG_POS * (size_t)ws->kpad * (size_t)ws->c * sizeof(float);
  wg_fill_t fa = {.w = ctx->in[1].data, .bias = ctx->n_in > 2 && ctx->in[2].ndim >= 0 ? ctx->in[2].data : NULL,
                  .k = ws->k, .c = ws->c, .kpad = ws->kpad};
  void *packed = NULL;
  toplu_status_t st = toplu__dnnl_pack_custom(ctx, info, ctx->in[1].data, "winograd_f4x4_u", ubytes +
                                              (size_t)ws->kpad * sizeof(float), wg_fill, &fa, &packed);
  if (st) return st;
  ws->u = packed;
  ws->bias = ws->u + ubytes / sizeof(float);
  if (fa.bias) info->consumed_consts |= 1u << 2;
  info->consumed_consts |= 1u << 1;

  /* layouts: nChw8c (AVX2) or nChw16c (AVX-512) in and out (the addend of a fused sum too) */
  dnnl_dims_t sd = {ws->n, ws->c, ws->h, ws->w}, dd = {ws->n, ws->k, ws->oh, ws->ow};
  dnnl_format_tag_t tag = ws->vl == 16 ? dnnl_nChw16c : dnnl_nChw8c;
  if (dnnl_memory_desc_init_by_tag(&ws->src_md, 4, sd, dnnl_f32, tag) != dnnl_success ||
      dnnl_memory_desc_init_by_tag(&ws->dst_md, 4, dd, dnnl_f32, tag) != dnnl_success)
    return toplu__kernel_error(ctx, TOPLU_ERR_INTERNAL, "oneDNN refused a blocked descriptor");
  const dnnl_memory_desc_t *in0 = ctx->in_md ? ctx->in_md[0] : NULL;
  if (!in0 || !dnnl_memory_desc_equal(in0, &ws->src_md)) info->want_md[0] = &ws->src_md;
  info->out_md[0] = &ws->dst_md;
  info->impl = ws->vl == 16 ? "toplu:winograd_f4x4:avx512" : "toplu:winograd_f4x4:avx2";
  if (ws->sum_input >= 0) {
    if (ws->sum_input >= TOPLU_KERNEL_MAX_LAYOUT)
      return toplu__kernel_error(ctx, TOPLU_ERR_UNSUPPORTED, "Winograd convolution: residual input index");
    const dnnl_memory_desc_t *si = ctx->in_md ? ctx->in_md[ws->sum_input] : NULL;
    if (!si || !dnnl_memory_desc_equal(si, &ws->dst_md)) info->want_md[ws->sum_input] = &ws->dst_md;
    info->inplace_input = ws->sum_input; /* each output vector is read from the addend's place, then written there */
  }
  return TOPLU_OK;
}

#if WG_X86
#define WG_W 256
#define WG_TGT __attribute__((target("avx2,fma")))
#include "ops/onednn/winograd_isa.h"
#undef WG_TGT
#undef WG_W
#define WG_W 512
#define WG_TGT __attribute__((target("avx512f,avx2,fma")))
#include "ops/onednn/winograd_isa.h"
#undef WG_TGT
#undef WG_W
#endif

static toplu_status_t wg_run(toplu__kernel_ctx_t *ctx) {
#if WG_X86
  const wg_state_t *ws = ctx->state;
  const float *x = ctx->in[0].data, *res = ws->sum_input >= 0 ? ctx->in[ws->sum_input].data : NULL;
  const int z = ws->vl == 16;
  float *y = ctx->out[0].data;
  size_t per_thread = (size_t)(ws->tb * WG_POS * (ws->c + ws->kpad));
  float *scratch = ctx->workspace;
  int nt = ctx->threads;
  if (ws->wide) {
    /* few tiles: one block, the threads sharing each stage (tiles, then
     * the 36 x panels products, then tiles) */
    float *v = scratch, *m = v + (size_t)(ws->tb * WG_POS * ws->c);
    int64_t nj = (int64_t)WG_POS * wg_groups(ws);
#pragma omp parallel num_threads(nt)
    {
#pragma omp for schedule(static)
      for (int64_t tl = 0; tl < ws->tb; tl++)
        z ? wg_in_512(ws, x, 0, ws->tiles, tl, tl + 1, v) : wg_in_256(ws, x, 0, ws->tiles, tl, tl + 1, v);
#pragma omp for schedule(dynamic, 4)
      for (int64_t j = 0; j < nj; j++) z ? wg_products_512(ws, v, m, j, j + 1) : wg_products_256(ws, v, m, j, j + 1);
#pragma omp for schedule(static)
      for (int64_t tl = 0; tl < ws->tiles; tl++)
        z ? wg_out_512(ws, ctx->node, y, res, 0, tl, tl + 1, m) : wg_out_256(ws, ctx->node, y, res, 0, tl, tl + 1, m);
    }
    return TOPLU_OK;
  }
  /* dynamic: a thread the OS preempts (shared cores) leaves its blocks to the others */
#pragma omp parallel for num_threads(nt) if (nt > 1) schedule(dynamic, 1)
  for (int64_t bl = 0; bl < ws->blocks; bl++) {
    int me = omp_get_thread_num();
    float *v = scratch + (size_t)me * per_thread, *m = v + (size_t)(ws->tb * WG_POS * ws->c);
    int64_t t0 = bl * ws->tb, count = ws->tiles - t0 < ws->tb ? ws->tiles - t0 : ws->tb;
    z ? wg_block_512(ws, ctx->node, x, y, res, t0, count, v, m) : wg_block_256(ws, ctx->node, x, y, res, t0, count, v, m);
  }
  return TOPLU_OK;
#else
  return toplu__kernel_error(ctx, TOPLU_ERR_UNSUPPORTED, "Winograd convolution needs x86");
#endif
}

static void wg_release(toplu__kernel_ctx_t *ctx) {
  wg_state_t *ws = ctx->state;
  if (!ws) return;
  toplu__dnnl_pack_release(ctx, ws->u); /* the bias lives in the same buffer */
  toplu__kernel_free(ctx, ws);
  ctx->state = NULL;
}

const toplu__kernel_t toplu__kernels_winograd[] = {
    {.op_type = "Conv", .domain = "", .prepare = wg_prepare, .run = wg_run, .release = wg_release,
     .flags = TOPLU_KERNEL_LAYOUT | TOPLU_KERNEL_BLOCKED_ALT, .supports = wg_supports},
    {.op_type = NULL},
};
