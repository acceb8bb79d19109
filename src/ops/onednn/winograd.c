/*
 * ops/onednn/winograd.c - 3x3 stride-1 Conv by Winograd F(4x4, 3x3) on AVX2.
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
 * on ResNet's 3x3 layers (issue 12's profile).  This kernel is a candidate
 * tried before oneDNN's convolution (TOPLU_KERNEL_BLOCKED_ALT: when its source
 * arrives in oneDNN's nChw8c layout, as it does after another convolution);
 * supports() takes 2-D, group 1, dilation 1, stride 1, 3x3 kernels with
 * channel counts multiple of 8, float32, on a CPU with AVX2 and FMA, and a
 * shape with enough tiles to keep every thread busy.  prepare transforms
 * and packs the weights once; run does, per block of tiles and per thread:
 * the input transform (8 channels per AVX2 vector, read from nChw8c), the 36
 * products with the 6x16 micro-kernel of ops/onednn/gemm_avx2.h, then
 * the output transform with bias and the node's fused post-ops, written in
 * nChw8c.  Numerics: F(4x4, 3x3) rounds more than direct convolution
 * (relative error about 1e-6..1e-5 per layer in float32); tests compare it
 * with oneDNN's direct convolution.
 */
#include <math.h>
#include <omp.h>
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
/* Scratch per thread for a block of tiles: its transformed input and products. */
#define WG_BLOCK_BYTES (384u << 10)

typedef struct wg_state {
  int64_t n, c, k, h, w, oh, ow, pad_t, pad_l;
  int64_t th, tw, tiles; /* tiles per image rows / cols, tiles in all (n * th * tw) */
  int64_t kpad;          /* K rounded up to WG_NR */
  int64_t tb;            /* tiles per block (a multiple of WG_MR) */
  int64_t blocks;
  int wide;              /* one block shared by all threads stage by stage (few tiles) */
  float *u;              /* weights: [36][kpad / 16][C][16] (shared, toplu__dnnl_pack_custom) */
  float *bias;           /* [kpad] (zeros when the node has none), right after u */
  int sum_input;         /* input holding the residual addend, or -1 */
  dnnl_memory_desc_t src_md, dst_md;
} wg_state_t;

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
  /* oneDNN's AVX-512 direct convolution ran ResNet-50 1.6x faster than this
   * (AVX2 products) on a Zen 5 core (docs/performance.md); TOPLU_MAX_CPU_ISA=avx2 keeps it for A/B */
  if (toplu__gemm_avx512_ok()) return *why = "the CPU has AVX-512, where oneDNN's direct convolution is faster", 0;
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
  if (p->c_in % 8 || p->c_out % 8) return *why = "channel counts multiple of 8", 0;
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
  /* tiles per block: the block's scratch near WG_BLOCK_BYTES, at least one
   * micro-kernel's rows, and blocks a multiple of the threads */
  int64_t per_tile = (int64_t)WG_POS * (ws->c + ws->kpad) * (int64_t)sizeof(float);
  int64_t tb = (int64_t)WG_BLOCK_BYTES / per_tile / WG_MR * WG_MR;
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

  /* layouts: nChw8c in and out (the addend of a fused sum too) */
  dnnl_dims_t sd = {ws->n, ws->c, ws->h, ws->w}, dd = {ws->n, ws->k, ws->oh, ws->ow};
  if (dnnl_memory_desc_init_by_tag(&ws->src_md, 4, sd, dnnl_f32, dnnl_nChw8c) != dnnl_success ||
      dnnl_memory_desc_init_by_tag(&ws->dst_md, 4, dd, dnnl_f32, dnnl_nChw8c) != dnnl_success)
    return toplu__kernel_error(ctx, TOPLU_ERR_INTERNAL, "oneDNN refused an nChw8c descriptor");
  const dnnl_memory_desc_t *in0 = ctx->in_md ? ctx->in_md[0] : NULL;
  if (!in0 || !dnnl_memory_desc_equal(in0, &ws->src_md)) info->want_md[0] = &ws->src_md;
  info->out_md[0] = &ws->dst_md;
  info->impl = "toplu:winograd_f4x4:avx2";
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
#define WG_TARGET __attribute__((target("avx2,fma")))

/* 6x6 input patch (8 channels per vector) -> V = B^T d B, written to v[x * vstride]. */
WG_TARGET static void wg_input_tile(const __m256 d[6][6], float *v, int64_t vstride) {
  const __m256 c4 = _mm256_set1_ps(4.f), c5 = _mm256_set1_ps(5.f), c2 = _mm256_set1_ps(2.f);
  __m256 t[6][6];
  for (int j = 0; j < 6; j++) { /* rows: t = B^T d */
    __m256 d0 = d[0][j], d1 = d[1][j], d2 = d[2][j], d3 = d[3][j], d4 = d[4][j], d5 = d[5][j];
    t[0][j] = _mm256_fnmadd_ps(c5, d2, _mm256_fmadd_ps(c4, d0, d4));
    __m256 a = _mm256_add_ps(d3, d4), b = _mm256_add_ps(d1, d2);
    t[1][j] = _mm256_fnmadd_ps(c4, b, a);
    __m256 a2 = _mm256_sub_ps(d4, d3), b2 = _mm256_sub_ps(d1, d2);
    t[2][j] = _mm256_fmadd_ps(c4, b2, a2);
    __m256 e = _mm256_sub_ps(d4, d2), f = _mm256_sub_ps(d3, d1);
    t[3][j] = _mm256_fmadd_ps(c2, f, e);
    t[4][j] = _mm256_fnmadd_ps(c2, f, e);
    t[5][j] = _mm256_fnmadd_ps(c5, d3, _mm256_fmadd_ps(c4, d1, d5));
  }
  for (int i = 0; i < 6; i++) { /* columns: V = t B */
    __m256 d0 = t[i][0], d1 = t[i][1], d2 = t[i][2], d3 = t[i][3], d4 = t[i][4], d5 = t[i][5];
    float *o = v + (int64_t)i * 6 * vstride;
    _mm256_storeu_ps(o + 0 * vstride, _mm256_fnmadd_ps(c5, d2, _mm256_fmadd_ps(c4, d0, d4)));
    __m256 a = _mm256_add_ps(d3, d4), b = _mm256_add_ps(d1, d2);
    _mm256_storeu_ps(o + 1 * vstride, _mm256_fnmadd_ps(c4, b, a));
    __m256 a2 = _mm256_sub_ps(d4, d3), b2 = _mm256_sub_ps(d1, d2);
    _mm256_storeu_ps(o + 2 * vstride, _mm256_fmadd_ps(c4, b2, a2));
    __m256 e = _mm256_sub_ps(d4, d2), f = _mm256_sub_ps(d3, d1);
    _mm256_storeu_ps(o + 3 * vstride, _mm256_fmadd_ps(c2, f, e));
    _mm256_storeu_ps(o + 4 * vstride, _mm256_fnmadd_ps(c2, f, e));
    _mm256_storeu_ps(o + 5 * vstride, _mm256_fnmadd_ps(c5, d3, _mm256_fmadd_ps(c4, d1, d5)));
  }
}

/* Post-ops in the node's order on one vector of 8 output channels; res: the addend's vector (SUM). */
WG_TARGET static __m256 wg_post(const toplu__node_t *n, __m256 y, const float *res) {
  for (int i = 0; i < n->n_post; i++) {
    const toplu__post_op_t *po = &n->post[i];
    switch (po->kind) {
      case TOPLU_POST_SUM: y = _mm256_add_ps(y, _mm256_loadu_ps(res)); break;
      case TOPLU_POST_RELU: y = _mm256_max_ps(_mm256_setzero_ps(), y); break; /* maxps gives its second operand for NaN: NaN stays */
      case TOPLU_POST_CLIP:
        y = _mm256_min_ps(_mm256_max_ps(y, _mm256_set1_ps(isinf(po->alpha) ? -INFINITY : po->alpha)),
                          _mm256_set1_ps(isinf(po->beta) ? INFINITY : po->beta));
        break;
      case TOPLU_POST_LINEAR: y = _mm256_fmadd_ps(y, _mm256_set1_ps(po->alpha), _mm256_set1_ps(po->beta)); break;
      default: {
        float t[8];
        _mm256_storeu_ps(t, y);
        toplu__post_apply(po, t, 8);
        y = _mm256_loadu_ps(t);
      }
    }
  }
  return y;
}

/* One block of tiles [t0, t0 + count) on one thread; v, m: its scratch. */
/* Input transform of the block's tiles [tl0, tl1) (block: tiles t0 .. t0 +
 * count - 1; rows from count on are zeros): v[x][t][c], x the 36 positions. */
WG_TARGET static void wg_in(const wg_state_t *ws, const float *x, int64_t t0, int64_t count, int64_t tl0, int64_t tl1,
                            float *v) {
  const int64_t C = ws->c, TB = ws->tb, H = ws->h, W = ws->w;
  const int64_t cb_n = C / 8, tpi = ws->th * ws->tw;
  const __m256 zero = _mm256_setzero_ps();
  for (int64_t tl = tl0; tl < tl1; tl++) {
    int64_t t = t0 + tl;
    if (tl >= count) { /* rows past the block's tiles: zeros, products unused */
      for (int xp = 0; xp < WG_POS; xp++) memset(v + ((int64_t)xp * TB + tl) * C, 0, (size_t)C * sizeof(float));
      continue;
    }
    int64_t img = t / tpi, r = t % tpi, ih0 = r / ws->tw * WG_TILE - ws->pad_t, iw0 = r % ws->tw * WG_TILE - ws->pad_l;
    int full = ih0 >= 0 && iw0 >= 0 && ih0 + WG_ALPHA <= H && iw0 + WG_ALPHA <= W;
    for (int64_t cb = 0; cb < cb_n; cb++) {
      const float *xb = x + ((img * cb_n + cb) * H) * W * 8;
      __m256 d[6][6];
      if (full) {
        for (int i = 0; i < 6; i++)
          for (int j = 0; j < 6; j++) d[i][j] = _mm256_loadu_ps(xb + ((ih0 + i) * W + iw0 + j) * 8);
      } else {
        for (int i = 0; i < 6; i++)
          for (int j = 0; j < 6; j++) {
            int64_t ih = ih0 + i, iw = iw0 + j;
            d[i][j] = ih >= 0 && ih < H && iw >= 0 && iw < W ? _mm256_loadu_ps(xb + (ih * W + iw) * 8) : zero;
          }
      }
      wg_input_tile((const __m256(*)[6])d, v + tl * C + cb * 8, TB * C);
    }
  }
}

/* Products j in [j0, j1) of the block, j = x * (kpad / 16) + panel:
 * m[x][t][k] = v[x][t][:] . u[x][:][k] for the panel's 16 k. */
static void wg_products(const wg_state_t *ws, const float *v, float *m, int64_t j0, int64_t j1) {
  const int64_t C = ws->c, KP = ws->kpad, TB = ws->tb, nkp = KP / WG_NR;
  for (int64_t j = j0; j < j1; j++) {
    int64_t xp = j / nkp, kp = j % nkp;
    const float *vx = v + xp * TB * C, *ux = ws->u + xp * KP * C;
    float *mx = m + xp * TB * KP;
    for (int64_t tr = 0; tr < TB; tr += WG_MR)
      toplu__gemm_kernel_6x16(vx + tr * C, C, ux + kp * C * WG_NR, C, mx + tr * KP + kp * WG_NR, KP, 0);
  }
}

/* Output transform of the block's tiles [tl0, tl1), bias, post-ops -> y (nChw8c). */
WG_TARGET static void wg_out(const wg_state_t *ws, const toplu__node_t *node, float *y, const float *res, int64_t t0,
                             int64_t tl0, int64_t tl1, const float *m) {
  const int64_t K = ws->k, KP = ws->kpad, TB = ws->tb, kb_n = K / 8, tpi = ws->th * ws->tw;
  const int64_t OH = ws->oh, OW = ws->ow;
  for (int64_t tl = tl0; tl < tl1; tl++) {
    int64_t t = t0 + tl, img = t / tpi, r = t % tpi, oh0 = r / ws->tw * WG_TILE, ow0 = r % ws->tw * WG_TILE;
    for (int64_t kb = 0; kb < kb_n; kb++) {
      __m256 s[6][6], q[4][6];
      for (int i = 0; i < 6; i++)
        for (int j = 0; j < 6; j++) s[i][j] = _mm256_loadu_ps(m + ((int64_t)(i * 6 + j) * TB + tl) * KP + kb * 8);
      const __m256 c2 = _mm256_set1_ps(2.f), c4 = _mm256_set1_ps(4.f), c8 = _mm256_set1_ps(8.f);
      for (int j = 0; j < 6; j++) { /* q = A^T s */
        __m256 a = _mm256_add_ps(s[1][j], s[2][j]), b = _mm256_sub_ps(s[1][j], s[2][j]);
        __m256 e = _mm256_add_ps(s[3][j], s[4][j]), f = _mm256_sub_ps(s[3][j], s[4][j]);
        q[0][j] = _mm256_add_ps(_mm256_add_ps(s[0][j], a), e);
        q[1][j] = _mm256_fmadd_ps(c2, f, b);
        q[2][j] = _mm256_fmadd_ps(c4, e, a);
        q[3][j] = _mm256_add_ps(_mm256_fmadd_ps(c8, f, b), s[5][j]);
      }
      __m256 bias = _mm256_loadu_ps(ws->bias + kb * 8);
      int64_t base = ((img * kb_n + kb) * OH) * OW * 8;
      for (int i = 0; i < 4; i++) { /* o = q A */
        int64_t oh = oh0 + i;
        if (oh >= OH) break;
        __m256 a = _mm256_add_ps(q[i][1], q[i][2]), b = _mm256_sub_ps(q[i][1], q[i][2]);
        __m256 e = _mm256_add_ps(q[i][3], q[i][4]), f = _mm256_sub_ps(q[i][3], q[i][4]);
        __m256 o[4];
        o[0] = _mm256_add_ps(_mm256_add_ps(q[i][0], a), e);
        o[1] = _mm256_fmadd_ps(c2, f, b);
        o[2] = _mm256_fmadd_ps(c4, e, a);
        o[3] = _mm256_add_ps(_mm256_fmadd_ps(c8, f, b), q[i][5]);
        for (int j = 0; j < 4; j++) {
          int64_t ow = ow0 + j;
          if (ow >= OW) break;
          int64_t off = base + (oh * OW + ow) * 8;
          __m256 val = _mm256_add_ps(o[j], bias);
          if (node->n_post) val = wg_post(node, val, res ? res + off : NULL);
          _mm256_storeu_ps(y + off, val);
        }
      }
    }
  }
}

/* One block of tiles [t0, t0 + count) on one thread; v, m: its scratch. */
static void wg_block(const wg_state_t *ws, const toplu__node_t *node, const float *x, float *y, const float *res,
                     int64_t t0, int64_t count, float *v, float *m) {
  wg_in(ws, x, t0, count, 0, ws->tb, v);
  wg_products(ws, v, m, 0, (int64_t)WG_POS * (ws->kpad / WG_NR));
  wg_out(ws, node, y, res, t0, 0, count, m);
}
#endif

static toplu_status_t wg_run(toplu__kernel_ctx_t *ctx) {
#if WG_X86
  const wg_state_t *ws = ctx->state;
  const float *x = ctx->in[0].data, *res = ws->sum_input >= 0 ? ctx->in[ws->sum_input].data : NULL;
  float *y = ctx->out[0].data;
  size_t per_thread = (size_t)(ws->tb * WG_POS * (ws->c + ws->kpad));
  float *scratch = ctx->workspace;
  int nt = ctx->threads;
  if (ws->wide) {
    /* few tiles: one block, the threads sharing each stage (tiles, then
     * the 36 x panels products, then tiles) */
    float *v = scratch, *m = v + (size_t)(ws->tb * WG_POS * ws->c);
    int64_t nj = (int64_t)WG_POS * (ws->kpad / WG_NR);
#pragma omp parallel num_threads(nt)
    {
#pragma omp for schedule(static)
      for (int64_t tl = 0; tl < ws->tb; tl++) wg_in(ws, x, 0, ws->tiles, tl, tl + 1, v);
#pragma omp for schedule(dynamic, 4)
      for (int64_t j = 0; j < nj; j++) wg_products(ws, v, m, j, j + 1);
#pragma omp for schedule(static)
      for (int64_t tl = 0; tl < ws->tiles; tl++) wg_out(ws, ctx->node, y, res, 0, tl, tl + 1, m);
    }
    return TOPLU_OK;
  }
  /* dynamic: a thread the OS preempts (shared cores) leaves its blocks to the others */
#pragma omp parallel for num_threads(nt) if (nt > 1) schedule(dynamic, 1)
  for (int64_t bl = 0; bl < ws->blocks; bl++) {
    int me = omp_get_thread_num();
    float *v = scratch + (size_t)me * per_thread, *m = v + (size_t)(ws->tb * WG_POS * ws->c);
    int64_t t0 = bl * ws->tb, count = ws->tiles - t0 < ws->tb ? ws->tiles - t0 : ws->tb;
    wg_block(ws, ctx->node, x, y, res, t0, count, v, m);
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
