/*
 * ops/ref/ref.c - the plain-C reference kernels (see ref.h for the ops,
 * layouts, precision, errors and threading).
 *
 * Every kernel is a direct transcription of the ONNX operator definition:
 * index arithmetic over dense row-major tensors, double accumulators, one
 * rounding to float per output element, then the fused post-ops in float.
 * The only concession to speed is loop order (Conv and MatMul accumulate a
 * whole output row at once, so the inner loop is contiguous) and OpenMP over
 * the outermost independent loop.
 */
#include <float.h>
#include <math.h>
#include <stdint.h>
#include <string.h>
#ifdef _OPENMP
#include <omp.h>
#endif

#include "core/checked.h"
#include "graph/schema.h"
#include "graph/schema_conv.h"
#include "ops/ref/ref.h"

/* a * b * c * d for a thread-count estimate, saturating at INT64_MAX
 * (core/checked.h): outputs times kernel taps can pass 2^63 (pooling
 * kernel dims of 2^31 or more). */
static int64_t work_estimate(int64_t a, int64_t b, int64_t c, int64_t d) {
  bool ok = true;
  int64_t w = toplu__mul_i64_ok(toplu__mul_i64_ok(toplu__mul_i64_ok(a, b, &ok), c, &ok), d, &ok);
  return ok ? w : INT64_MAX;
}

/* ---- shared helpers ---- */

/* Index of the calling thread inside a parallel region (0 outside one). */
static int ref_thread(void) {
#ifdef _OPENMP
  return omp_get_thread_num();
#else
  return 0;
#endif
}

/* Threads for a loop of `work` element operations: 1 below 32768. */
static int ref_threads(const toplu__kernel_ctx_t *ctx, int64_t work, int64_t tasks) {
  int nt = ctx->threads > 1 ? ctx->threads : 1;
  if (work < 32768 || tasks < 2) return 1;
  if (nt > tasks) nt = (int)tasks;
  return nt;
}

/* Threads for a loop whose tasks each use `per_thread` bytes of workspace:
 * no more than the workspace holds (prepare sized it for ctx->threads). */
static int ref_threads_ws(const toplu__kernel_ctx_t *ctx, int64_t work, int64_t tasks, size_t per_thread) {
  int nt = ref_threads(ctx, work, tasks);
  size_t fit = per_thread ? ctx->workspace_bytes / per_thread : (size_t)nt;
  if (fit < 1) fit = 1;
  if ((size_t)nt > fit) nt = (int)fit;
  return nt;
}

static int present(const toplu__kernel_ctx_t *ctx, int i) {
  return i < ctx->n_in && ctx->in[i].ndim >= 0 && ctx->in[i].dtype != TOPLU_DTYPE_UNDEFINED;
}

/* Inputs 0..n-1 that are present must be float32. */
static toplu_status_t need_float(toplu__kernel_ctx_t *ctx, int n) {
  for (int i = 0; i < n && i < ctx->n_in; i++)
    if (present(ctx, i) && ctx->in[i].dtype != TOPLU_DTYPE_FLOAT)
      return toplu__kernel_error(ctx, TOPLU_ERR_UNSUPPORTED,
                                "the reference backend runs %s on float32 only (input %d is %s)", ctx->node->op_type,
                                i, toplu_dtype_name(ctx->in[i].dtype));
  if (ctx->n_out < 1 || ctx->out[0].dtype != TOPLU_DTYPE_FLOAT)
    return toplu__kernel_error(ctx, TOPLU_ERR_UNSUPPORTED, "the reference backend runs %s on float32 only (output is %s)",
                              ctx->node->op_type, ctx->n_out < 1 ? "missing" : toplu_dtype_name(ctx->out[0].dtype));
  return TOPLU_OK;
}

static int64_t prod(const int64_t *d, int a, int b) {
  int64_t p = 1;
  for (int i = a; i < b; i++) p *= d[i];
  return p;
}

static int same_dims(const toplu_tensor_t *a, const toplu_tensor_t *b) {
  if (a->ndim != b->ndim) return 0;
  for (int i = 0; i < a->ndim; i++)
    if (a->dims[i] != b->dims[i]) return 0;
  return 1;
}

/* Fused post-ops: every kind is known, a SUM addend is a present float input
 * of output 0's shape.  *sum_input: the first addend's input index, or -1. */
static toplu_status_t check_post(toplu__kernel_ctx_t *ctx, int *sum_input) {
  const toplu__node_t *n = ctx->node;
  *sum_input = -1;
  if (n->n_post < 0 || n->n_post > TOPLU_MAX_POST)
    return toplu__kernel_error(ctx, TOPLU_ERR_INTERNAL, "%d fused post-ops", n->n_post);
  for (int i = 0; i < n->n_post; i++) {
    const toplu__post_op_t *p = &n->post[i];
    switch (p->kind) {
      case TOPLU_POST_RELU: case TOPLU_POST_LEAKY_RELU: case TOPLU_POST_CLIP: case TOPLU_POST_SIGMOID:
      case TOPLU_POST_TANH: case TOPLU_POST_HARD_SIGMOID: case TOPLU_POST_HARD_SWISH: case TOPLU_POST_LINEAR:
      case TOPLU_POST_GELU_ERF: case TOPLU_POST_SWISH:
        break;
      case TOPLU_POST_MIN_CHANNEL:
        return toplu__kernel_error(ctx, TOPLU_ERR_UNSUPPORTED, "the reference backend has no per-channel Min post-op");
      case TOPLU_POST_QSUM:
        return toplu__kernel_error(ctx, TOPLU_ERR_UNSUPPORTED, "the reference backend has no integer residual post-op");
      case TOPLU_POST_BIAS: {
        int k = p->input;
        const toplu_tensor_t *y = &ctx->out[0];
        if (!present(ctx, k) || ctx->in[k].dtype != TOPLU_DTYPE_FLOAT || y->ndim < 1 ||
            toplu_tensor_numel(&ctx->in[k]) != y->dims[y->ndim - 1])
          return toplu__kernel_error(ctx, TOPLU_ERR_INTERNAL, "fused bias (input %d) is not a float32 row of the "
                                    "output's last dim", k);
        break;
      }
      case TOPLU_POST_SUM: {
        int k = p->input;
        if (!present(ctx, k))
          return toplu__kernel_error(ctx, TOPLU_ERR_INTERNAL, "fused sum reads input %d, which is absent", k);
        if (ctx->in[k].dtype != TOPLU_DTYPE_FLOAT)
          return toplu__kernel_error(ctx, TOPLU_ERR_UNSUPPORTED,
                                    "the reference backend adds float32 residuals only (input %d is %s)", k,
                                    toplu_dtype_name(ctx->in[k].dtype));
        if (toplu_tensor_numel(&ctx->in[k]) != toplu_tensor_numel(&ctx->out[0]))
          return toplu__kernel_error(ctx, TOPLU_ERR_SHAPE, "fused sum: addend (input %d) is not the output's shape", k);
        if (*sum_input < 0) *sum_input = k;
        break;
      }
      default:
        return toplu__kernel_error(ctx, TOPLU_ERR_UNSUPPORTED, "the reference backend has no post-op of kind %d",
                                  (int)p->kind);
    }
  }
  return TOPLU_OK;
}

/* The addend of each SUM post-op (NULL for the others), for post_apply. */
static void post_addends(const toplu__kernel_ctx_t *ctx, const float *add[TOPLU_MAX_POST]) {
  const toplu__node_t *n = ctx->node;
  for (int i = 0; i < TOPLU_MAX_POST; i++) add[i] = NULL;
  for (int i = 0; i < n->n_post && i < TOPLU_MAX_POST; i++)
    if (n->post[i].kind == TOPLU_POST_SUM || n->post[i].kind == TOPLU_POST_BIAS) add[i] = ctx->in[n->post[i].input].data;
}

static float clampf(float v, float lo, float hi) { return v < lo ? lo : v > hi ? hi : v; }

/* v after the node's post-ops, in order; i is the flat output index (for
 * SUM addends), j the index along the last axis (BIAS).  ONNX definitions
 * in float; NaN stays NaN. */
static float post_apply_j(const toplu__node_t *n, const float *const *add, int64_t i, int64_t j, float v) {
  for (int p = 0; p < n->n_post; p++) {
    const toplu__post_op_t *po = &n->post[p];
    float a = po->alpha, b = po->beta;
    switch (po->kind) {
      case TOPLU_POST_RELU: v = v < 0.f ? 0.f : v; break;
      case TOPLU_POST_LEAKY_RELU: v = v < 0.f ? a * v : v; break;
      case TOPLU_POST_CLIP: v = clampf(v, a, b); break;
      case TOPLU_POST_SIGMOID: v = (float)(1.0 / (1.0 + exp(-(double)v))); break;
      case TOPLU_POST_TANH: v = (float)tanh((double)v); break;
      case TOPLU_POST_HARD_SIGMOID: v = clampf(a * v + b, 0.f, 1.f); break;
      case TOPLU_POST_HARD_SWISH: v = v * clampf(v / 6.f + 0.5f, 0.f, 1.f); break;
      case TOPLU_POST_SWISH: v = (float)((double)v / (1.0 + exp(-(double)v))); break;
      case TOPLU_POST_SUM: v = v + add[p][i]; break;
      case TOPLU_POST_LINEAR: v = a * v + b; break;
      case TOPLU_POST_BIAS: v = v + add[p][j]; break;
      case TOPLU_POST_GELU_ERF: v = (float)(0.5 * (double)v * (1.0 + erf((double)v * 0.70710678118654752))); break;
      case TOPLU_POST_MIN_CHANNEL: case TOPLU_POST_QSUM: break; /* refused by check_post */
    }
  }
  return v;
}

/* post_apply_j for nodes without a BIAS (Conv, Gemm: j unused). */
static float post_apply(const toplu__node_t *n, const float *const *add, int64_t i, float v) {
  return post_apply_j(n, add, i, 0, v);
}

/* State made by toplu__kernel_alloc: freed here. */
static void release_state(toplu__kernel_ctx_t *ctx) {
  if (ctx->state) toplu__kernel_free(ctx, ctx->state);
  ctx->state = NULL;
}

/* Copy of st (bytes) into the kernel's state. */
static toplu_status_t keep_state(toplu__kernel_ctx_t *ctx, toplu__kernel_info_t *info, const void *st, size_t bytes) {
  void *p = toplu__kernel_alloc(ctx, bytes);
  if (!p) return toplu__kernel_error(ctx, TOPLU_ERR_OUT_OF_MEMORY, "out of memory preparing the reference kernel");
  memcpy(p, st, bytes);
  ctx->state = p;
  info->state_bytes += bytes;
  return TOPLU_OK;
}

/* ---- Conv ---- */

#define SP 3 /* spatial slots; 1-D and 2-D are right-aligned, unused slots are size 1 */

typedef struct conv_state {
  int64_t n, c, m, group;
  int64_t in[SP], out[SP], k[SP], s[SP], d[SP], pb[SP];
  int has_bias;
} conv_state_t;

static toplu_status_t conv_prepare(toplu__kernel_ctx_t *ctx, toplu__kernel_info_t *info) {
  const toplu__node_t *nd = ctx->node;
  if (strcmp(nd->op_type, "Conv"))
    return toplu__kernel_error(ctx, TOPLU_ERR_UNSUPPORTED, "the reference backend has no %s", nd->op_type);
  if (ctx->n_in < 2 || !present(ctx, 0) || !present(ctx, 1))
    return toplu__kernel_error(ctx, TOPLU_ERR_SHAPE, "Conv needs inputs X and W");
  toplu_status_t st = need_float(ctx, 3);
  if (st) return st;
  toplu__infer_ctx_t ictx = {.graph = (toplu__graph_t *)ctx->graph, .node = nd, .n_in = ctx->n_in, .n_out = ctx->n_out,
                            .in = ctx->in, .out = ctx->out, .concrete = 1, .err = ctx->err};
  toplu__conv_params_t p;
  if ((st = toplu__conv_params(&ictx, &p))) return st;
  const toplu_tensor_t *x = &ctx->in[0], *y = &ctx->out[0];
  if (y->ndim != x->ndim || y->dims[0] != p.n || y->dims[1] != p.c_out)
    return toplu__kernel_error(ctx, TOPLU_ERR_SHAPE, "output Y is not [N, M, ...] for X and W");
  for (int i = 0; i < p.spatial; i++)
    if (y->dims[2 + i] != p.out[i])
      return toplu__kernel_error(ctx, TOPLU_ERR_SHAPE, "spatial axis %d: Y has %lld, the attributes give %lld", i,
                                (long long)y->dims[2 + i], (long long)p.out[i]);
  int has_bias = present(ctx, 2);
  if (has_bias && (ctx->in[2].ndim != 1 || ctx->in[2].dims[0] != p.c_out))
    return toplu__kernel_error(ctx, TOPLU_ERR_SHAPE, "bias B must be [%lld]", (long long)p.c_out);
  int sum_input;
  if ((st = check_post(ctx, &sum_input))) return st;
  conv_state_t cs;
  memset(&cs, 0, sizeof cs);
  cs.n = p.n;
  cs.c = p.c_in;
  cs.m = p.c_out;
  cs.group = p.group;
  cs.has_bias = has_bias;
  for (int j = 0; j < SP; j++) cs.in[j] = cs.out[j] = cs.k[j] = cs.s[j] = cs.d[j] = 1;
  for (int i = 0; i < p.spatial; i++) {
    int j = SP - p.spatial + i;
    cs.in[j] = p.in[i];
    cs.out[j] = p.out[i];
    cs.k[j] = p.kernel[i];
    cs.s[j] = p.stride[i];
    cs.d[j] = p.dilation[i];
    cs.pb[j] = p.pad_begin[i]; /* the end pads only bound the output size */
  }
  int nt = ctx->threads > 1 ? ctx->threads : 1;
  info->workspace_bytes = (size_t)nt * (size_t)(cs.out[SP - 1] > 0 ? cs.out[SP - 1] : 1) * sizeof(double);
  info->inplace_input = sum_input;
  return keep_state(ctx, info, &cs, sizeof cs);
}

/* One output row y[n, m, od, oh, :] accumulated in acc (out[2] doubles). */
static void conv_row(const conv_state_t *cs, const float *x, const float *w, int64_t n, int64_t m, int64_t od,
                     int64_t oh, double *acc) {
  const int64_t D = cs->in[0], H = cs->in[1], W = cs->in[2], OW = cs->out[2];
  const int64_t KD = cs->k[0], KH = cs->k[1], KW = cs->k[2];
  const int64_t cg = cs->c / cs->group, mg = cs->m / cs->group, g = m / mg;
  for (int64_t ow = 0; ow < OW; ow++) acc[ow] = 0.0;
  for (int64_t c = 0; c < cg; c++) {
    const float *xc = x + (n * cs->c + g * cg + c) * D * H * W;
    const float *wc = w + (m * cg + c) * KD * KH * KW;
    for (int64_t kd = 0; kd < KD; kd++) {
      int64_t id = od * cs->s[0] - cs->pb[0] + kd * cs->d[0];
      if (id < 0 || id >= D) continue;
      for (int64_t kh = 0; kh < KH; kh++) {
        int64_t ih = oh * cs->s[1] - cs->pb[1] + kh * cs->d[1];
        if (ih < 0 || ih >= H) continue;
        const float *xr = xc + (id * H + ih) * W;
        for (int64_t kw = 0; kw < KW; kw++) {
          const double wv = wc[(kd * KH + kh) * KW + kw];
          const int64_t sw = cs->s[2], off = kw * cs->d[2] - cs->pb[2]; /* iw = ow * sw + off */
          int64_t lo = off >= 0 ? 0 : (-off + sw - 1) / sw;
          int64_t hi = W - 1 - off < 0 ? 0 : (W - 1 - off) / sw + 1;
          if (hi > OW) hi = OW;
          for (int64_t ow = lo; ow < hi; ow++) acc[ow] += wv * (double)xr[ow * sw + off];
        }
      }
    }
  }
}

static toplu_status_t conv_run(toplu__kernel_ctx_t *ctx) {
  const conv_state_t *cs = ctx->state;
  const float *x = ctx->in[0].data, *w = ctx->in[1].data, *b = cs->has_bias ? ctx->in[2].data : NULL;
  float *y = ctx->out[0].data;
  const float *add[TOPLU_MAX_POST];
  post_addends(ctx, add);
  const int64_t OD = cs->out[0], OH = cs->out[1], OW = cs->out[2], tasks = cs->n * cs->m;
  if (!tasks || !OD || !OH || !OW) return TOPLU_OK;
  const size_t per = (size_t)OW * sizeof(double);
  const int64_t work = work_estimate(tasks * OD * OH * OW, (cs->c / cs->group) * cs->k[0], cs->k[1], cs->k[2]);
  const int nt = ref_threads_ws(ctx, work, tasks, per);
  double *ws = ctx->workspace;
  const toplu__node_t *node = ctx->node;
  (void)nt; /* read only by the OpenMP pragma */
#pragma omp parallel for num_threads(nt) if (nt > 1) schedule(static)
  for (int64_t t = 0; t < tasks; t++) {
    const int64_t n = t / cs->m, m = t % cs->m;
    double *acc = ws + (size_t)ref_thread() * (size_t)OW;
    const double bias = b ? (double)b[m] : 0.0;
    for (int64_t od = 0; od < OD; od++)
      for (int64_t oh = 0; oh < OH; oh++) {
        conv_row(cs, x, w, n, m, od, oh, acc);
        const int64_t base = ((t * OD + od) * OH + oh) * OW;
        for (int64_t ow = 0; ow < OW; ow++) y[base + ow] = post_apply(node, add, base + ow, (float)(acc[ow] + bias));
      }
  }
  return TOPLU_OK;
}

/* ---- Gemm ---- */

typedef struct gemm_state {
  int ta, tb, use_c;
  double alpha, beta;
  int64_t m, n, k;
  int64_t c_rs, c_cs; /* strides of C broadcast to [M, N] (0 on a broadcast dim) */
} gemm_state_t;

static toplu_status_t gemm_prepare(toplu__kernel_ctx_t *ctx, toplu__kernel_info_t *info) {
  const toplu__node_t *nd = ctx->node;
  toplu_status_t st = need_float(ctx, 3);
  if (st) return st;
  const toplu_tensor_t *a = &ctx->in[0], *b = &ctx->in[1], *y = &ctx->out[0];
  if (a->ndim != 2 || b->ndim != 2 || y->ndim != 2)
    return toplu__kernel_error(ctx, TOPLU_ERR_SHAPE, "Gemm takes 2-D A and B (ranks %d and %d)", a->ndim, b->ndim);
  gemm_state_t gs;
  memset(&gs, 0, sizeof gs);
  gs.ta = toplu__node_attr_int(nd, "transA", 0) != 0;
  gs.tb = toplu__node_attr_int(nd, "transB", 0) != 0;
  gs.alpha = toplu__node_attr_float(nd, "alpha", 1.f);
  gs.beta = toplu__node_attr_float(nd, "beta", 1.f);
  gs.m = a->dims[gs.ta ? 1 : 0];
  gs.k = a->dims[gs.ta ? 0 : 1];
  gs.n = b->dims[gs.tb ? 0 : 1];
  if (b->dims[gs.tb ? 1 : 0] != gs.k || y->dims[0] != gs.m || y->dims[1] != gs.n)
    return toplu__kernel_error(ctx, TOPLU_ERR_SHAPE, "Gemm shapes do not agree (A' [%lld, %lld], B' [%lld, %lld])",
                              (long long)gs.m, (long long)gs.k, (long long)b->dims[gs.tb ? 1 : 0], (long long)gs.n);
  gs.use_c = present(ctx, 2) && gs.beta != 0.0;
  if (gs.use_c) {
    const toplu_tensor_t *c = &ctx->in[2];
    if (c->ndim > 2) return toplu__kernel_error(ctx, TOPLU_ERR_SHAPE, "C must have rank <= 2, got %d", c->ndim);
    int64_t cm = c->ndim == 2 ? c->dims[0] : 1, cn = c->ndim >= 1 ? c->dims[c->ndim - 1] : 1;
    if ((cm != 1 && cm != gs.m) || (cn != 1 && cn != gs.n))
      return toplu__kernel_error(ctx, TOPLU_ERR_SHAPE, "C does not broadcast to [%lld, %lld]", (long long)gs.m,
                                (long long)gs.n);
    gs.c_rs = cm == 1 ? 0 : cn;
    gs.c_cs = cn == 1 ? 0 : 1;
  }
  int sum_input;
  if ((st = check_post(ctx, &sum_input))) return st;
  int nt = ctx->threads > 1 ? ctx->threads : 1;
  info->workspace_bytes = (size_t)nt * (size_t)(gs.n > 0 ? gs.n : 1) * sizeof(double);
  info->inplace_input = sum_input;
  return keep_state(ctx, info, &gs, sizeof gs);
}

static toplu_status_t gemm_run(toplu__kernel_ctx_t *ctx) {
  const gemm_state_t *gs = ctx->state;
  const float *a = ctx->in[0].data, *b = ctx->in[1].data, *c = gs->use_c ? ctx->in[2].data : NULL;
  float *y = ctx->out[0].data;
  const float *add[TOPLU_MAX_POST];
  post_addends(ctx, add);
  const int64_t M = gs->m, N = gs->n, K = gs->k;
  if (!M || !N) return TOPLU_OK;
  /* A'(i, k) = A[ta ? k, i : i, k]; B'(k, j) = B[tb ? j, k : k, j] */
  const int64_t a_is = gs->ta ? 1 : K, a_ks = gs->ta ? M : 1, b_ks = gs->tb ? 1 : N, b_js = gs->tb ? K : 1;
  const size_t per = (size_t)N * sizeof(double);
  const int nt = ref_threads_ws(ctx, M * N * (K ? K : 1), M, per);
  double *ws = ctx->workspace;
  const toplu__node_t *node = ctx->node;
  (void)nt;
#pragma omp parallel for num_threads(nt) if (nt > 1) schedule(static)
  for (int64_t i = 0; i < M; i++) {
    double *acc = ws + (size_t)ref_thread() * (size_t)N;
    for (int64_t j = 0; j < N; j++) acc[j] = 0.0;
    for (int64_t kk = 0; kk < K; kk++) {
      const double av = a[i * a_is + kk * a_ks];
      const float *brow = b + kk * b_ks;
      for (int64_t j = 0; j < N; j++) acc[j] += av * (double)brow[j * b_js];
    }
    for (int64_t j = 0; j < N; j++) {
      double v = gs->alpha * acc[j];
      if (c) v += gs->beta * (double)c[i * gs->c_rs + j * gs->c_cs];
      y[i * N + j] = post_apply(node, add, i * N + j, (float)v);
    }
  }
  return TOPLU_OK;
}

/* ---- MatMul ---- */

#define MM_MAX TOPLU_MAX_DIMS

typedef struct matmul_state {
  int r;                                  /* batch rank after promotion */
  int64_t batch[MM_MAX], abatch[MM_MAX], bbatch[MM_MAX];
  int64_t m, n, k, nbatch;
} matmul_state_t;

static toplu_status_t matmul_prepare(toplu__kernel_ctx_t *ctx, toplu__kernel_info_t *info) {
  toplu_status_t st = need_float(ctx, 2);
  if (st) return st;
  const toplu_tensor_t *a = &ctx->in[0], *b = &ctx->in[1];
  if (a->ndim < 1 || b->ndim < 1)
    return toplu__kernel_error(ctx, TOPLU_ERR_SHAPE, "MatMul operands must have rank >= 1");
  matmul_state_t ms;
  memset(&ms, 0, sizeof ms);
  /* numpy: A [K] is [1, K], B [K] is [K, 1]; the added dims are not in Y */
  ms.m = a->ndim >= 2 ? a->dims[a->ndim - 2] : 1;
  ms.k = a->dims[a->ndim - 1];
  ms.n = b->ndim >= 2 ? b->dims[b->ndim - 1] : 1;
  int64_t kb = b->ndim >= 2 ? b->dims[b->ndim - 2] : b->dims[0];
  if (kb != ms.k)
    return toplu__kernel_error(ctx, TOPLU_ERR_SHAPE, "inner dims %lld (A) and %lld (B) differ", (long long)ms.k,
                              (long long)kb);
  int ba = a->ndim > 2 ? a->ndim - 2 : 0, bb = b->ndim > 2 ? b->ndim - 2 : 0;
  ms.r = ba > bb ? ba : bb;
  ms.nbatch = 1;
  for (int i = 0; i < ms.r; i++) {
    int ia = i - (ms.r - ba), ib = i - (ms.r - bb);
    ms.abatch[i] = ia >= 0 ? a->dims[ia] : 1;
    ms.bbatch[i] = ib >= 0 ? b->dims[ib] : 1;
    if (ms.abatch[i] != ms.bbatch[i] && ms.abatch[i] != 1 && ms.bbatch[i] != 1)
      return toplu__kernel_error(ctx, TOPLU_ERR_SHAPE, "batch dims %lld and %lld do not broadcast",
                                (long long)ms.abatch[i], (long long)ms.bbatch[i]);
    ms.batch[i] = ms.abatch[i] == 1 ? ms.bbatch[i] : ms.abatch[i];
    ms.nbatch *= ms.batch[i];
  }
  if (toplu_tensor_numel(&ctx->out[0]) != ms.nbatch * ms.m * ms.n)
    return toplu__kernel_error(ctx, TOPLU_ERR_SHAPE, "output Y does not hold the product's %lld elements",
                              (long long)(ms.nbatch * ms.m * ms.n));
  int sum_input;
  if ((st = check_post(ctx, &sum_input))) return st;
  int nt = ctx->threads > 1 ? ctx->threads : 1;
  info->workspace_bytes = (size_t)nt * (size_t)(ms.n > 0 ? ms.n : 1) * sizeof(double);
  info->inplace_input = sum_input;
  return keep_state(ctx, info, &ms, sizeof ms);
}

static toplu_status_t matmul_run(toplu__kernel_ctx_t *ctx) {
  const matmul_state_t *ms = ctx->state;
  const float *a = ctx->in[0].data, *b = ctx->in[1].data;
  float *y = ctx->out[0].data;
  const float *add[TOPLU_MAX_POST];
  post_addends(ctx, add);
  const int64_t M = ms->m, N = ms->n, K = ms->k, rows = ms->nbatch * M;
  if (!rows || !N) return TOPLU_OK;
  const size_t per = (size_t)N * sizeof(double);
  const int nt = ref_threads_ws(ctx, rows * N * (K ? K : 1), rows, per);
  double *ws = ctx->workspace;
  const toplu__node_t *node = ctx->node;
  (void)nt;
#pragma omp parallel for num_threads(nt) if (nt > 1) schedule(static)
  for (int64_t row = 0; row < rows; row++) {
    const int64_t bi = row / M, i = row % M;
    /* batch index -> the broadcast A and B matrices */
    int64_t rem = bi, aoff = 0, boff = 0, astr = 1, bstr = 1;
    for (int d = ms->r - 1; d >= 0; d--) {
      int64_t idx = rem % ms->batch[d];
      rem /= ms->batch[d];
      aoff += (ms->abatch[d] == 1 ? 0 : idx) * astr;
      boff += (ms->bbatch[d] == 1 ? 0 : idx) * bstr;
      astr *= ms->abatch[d];
      bstr *= ms->bbatch[d];
    }
    const float *ar = a + (aoff * M + i) * K, *bm = b + boff * K * N;
    double *acc = ws + (size_t)ref_thread() * (size_t)N;
    for (int64_t j = 0; j < N; j++) acc[j] = 0.0;
    for (int64_t kk = 0; kk < K; kk++) {
      const double av = ar[kk];
      const float *brow = bm + kk * N;
      for (int64_t j = 0; j < N; j++) acc[j] += av * (double)brow[j];
    }
    float *yr = y + row * N;
    for (int64_t j = 0; j < N; j++) yr[j] = post_apply_j(node, add, row * N + j, j, (float)acc[j]);
  }
  return TOPLU_OK;
}

/* ---- Add / Sub / Mul / Div ---- */

typedef enum bin_op { BIN_ADD, BIN_SUB, BIN_MUL, BIN_DIV } bin_op_t;

static toplu_status_t binary_prepare(toplu__kernel_ctx_t *ctx, toplu__kernel_info_t *info) {
  (void)info;
  if (ctx->n_in != 2 || !present(ctx, 0) || !present(ctx, 1))
    return toplu__kernel_error(ctx, TOPLU_ERR_SHAPE, "%s takes two inputs", ctx->node->op_type);
  toplu_status_t st = need_float(ctx, 2);
  if (st) return st;
  if (ctx->node->opset < 7 && toplu__node_attr(ctx->node, "broadcast"))
    return toplu__kernel_error(ctx, TOPLU_ERR_UNSUPPORTED,
                              "the reference backend has no legacy (opset < 7) broadcast attribute");
  const toplu_tensor_t *y = &ctx->out[0];
  for (int k = 0; k < 2; k++) {
    const toplu_tensor_t *x = &ctx->in[k];
    if (x->ndim > y->ndim) return toplu__kernel_error(ctx, TOPLU_ERR_SHAPE, "input %d has a higher rank than Y", k);
    for (int d = 0; d < x->ndim; d++) {
      int64_t xd = x->dims[d], yd = y->dims[d + y->ndim - x->ndim];
      if (xd != yd && xd != 1)
        return toplu__kernel_error(ctx, TOPLU_ERR_SHAPE, "input %d dim %d (%lld) does not broadcast to %lld", k, d,
                                  (long long)xd, (long long)yd);
    }
  }
  return TOPLU_OK;
}

/* Strides of x broadcast to y's rank and dims: 0 along broadcast dims. */
static void bcast_strides(const toplu_tensor_t *x, const toplu_tensor_t *y, int64_t *st) {
  int64_t s = 1;
  for (int d = y->ndim - 1; d >= 0; d--) {
    int xd = d - (y->ndim - x->ndim);
    if (xd < 0) {
      st[d] = 0;
      continue;
    }
    st[d] = x->dims[xd] == 1 ? 0 : s;
    s *= x->dims[xd];
  }
}

static float bin_apply(bin_op_t op, float a, float b) {
  switch (op) {
    case BIN_ADD: return a + b;
    case BIN_SUB: return a - b;
    case BIN_MUL: return a * b;
    case BIN_DIV: return a / b;
  }
  return 0.f;
}

/* y[idx] = a[idx . sa] op b[idx . sb] over y's index space, the last dim
 * innermost; safe when y is a (then sa walks y exactly). */
static toplu_status_t binary_run(toplu__kernel_ctx_t *ctx, bin_op_t op) {
  const toplu_tensor_t *y = &ctx->out[0];
  const float *a = ctx->in[0].data, *b = ctx->in[1].data;
  float *yp = y->data;
  const int r = y->ndim;
  const int64_t total = toplu_tensor_numel(y);
  if (!total) return TOPLU_OK;
  int64_t sa[TOPLU_MAX_DIMS + 1], sb[TOPLU_MAX_DIMS + 1];
  bcast_strides(&ctx->in[0], y, sa);
  bcast_strides(&ctx->in[1], y, sb);
  const int64_t inner = r ? y->dims[r - 1] : 1, ia = r ? sa[r - 1] : 0, ib = r ? sb[r - 1] : 0;
  const int64_t outer = total / inner;
  const int nt = ref_threads(ctx, total, outer);
  (void)nt;
#pragma omp parallel for num_threads(nt) if (nt > 1) schedule(static)
  for (int64_t o = 0; o < outer; o++) {
    int64_t rem = o, oa = 0, ob = 0;
    for (int d = r - 2; d >= 0; d--) {
      int64_t idx = rem % y->dims[d];
      rem /= y->dims[d];
      oa += idx * sa[d];
      ob += idx * sb[d];
    }
    float *yr = yp + o * inner;
    for (int64_t i = 0; i < inner; i++) yr[i] = bin_apply(op, a[oa + i * ia], b[ob + i * ib]);
  }
  return TOPLU_OK;
}

static toplu_status_t add_run(toplu__kernel_ctx_t *ctx) { return binary_run(ctx, BIN_ADD); }
static toplu_status_t sub_run(toplu__kernel_ctx_t *ctx) { return binary_run(ctx, BIN_SUB); }
static toplu_status_t mul_run(toplu__kernel_ctx_t *ctx) { return binary_run(ctx, BIN_MUL); }
static toplu_status_t div_run(toplu__kernel_ctx_t *ctx) { return binary_run(ctx, BIN_DIV); }

/* ---- Relu ---- */

static toplu_status_t relu_prepare(toplu__kernel_ctx_t *ctx, toplu__kernel_info_t *info) {
  (void)info;
  toplu_status_t st = need_float(ctx, 1);
  if (st) return st;
  if (!same_dims(&ctx->in[0], &ctx->out[0]))
    return toplu__kernel_error(ctx, TOPLU_ERR_SHAPE, "Relu output is not the input's shape");
  return TOPLU_OK;
}

/* max(x, 0); NaN stays NaN (numpy.maximum). */
static toplu_status_t relu_run(toplu__kernel_ctx_t *ctx) {
  const float *x = ctx->in[0].data;
  float *y = ctx->out[0].data;
  const int64_t n = toplu_tensor_numel(&ctx->out[0]);
  for (int64_t i = 0; i < n; i++) y[i] = x[i] < 0.f ? 0.f : x[i];
  return TOPLU_OK;
}

/* ---- MaxPool ---- */

typedef struct maxpool_state {
  int64_t nc;
  int64_t in[SP], out[SP], k[SP], s[SP], d[SP], pb[SP];
} maxpool_state_t;

static toplu_status_t pool_ints(toplu__kernel_ctx_t *ctx, const char *name, int n, int64_t dflt, int64_t *out) {
  int64_t cnt;
  if (toplu__node_attr_ints_n(ctx->node, name, n, dflt, out, &cnt)) return TOPLU_OK;
  return toplu__kernel_error(ctx, TOPLU_ERR_INVALID_MODEL, "attribute %s has %lld values, expected %d", name,
                            (long long)cnt, n);
}

static toplu_status_t maxpool_prepare(toplu__kernel_ctx_t *ctx, toplu__kernel_info_t *info) {
  toplu_status_t st = need_float(ctx, 1);
  if (st) return st;
  if (ctx->n_out > 1 && ctx->out[1].ndim >= 0 && ctx->node->n_outputs > 1 && ctx->node->outputs[1] >= 0)
    return toplu__kernel_error(ctx, TOPLU_ERR_UNSUPPORTED, "the reference backend has no MaxPool Indices output");
  const toplu_tensor_t *x = &ctx->in[0], *y = &ctx->out[0];
  int ns = x->ndim - 2;
  if (ns < 1 || ns > SP)
    return toplu__kernel_error(ctx, TOPLU_ERR_UNSUPPORTED, "the reference backend pools over 1 to 3 axes, not %d", ns);
  if (y->ndim != x->ndim || y->dims[0] != x->dims[0] || y->dims[1] != x->dims[1])
    return toplu__kernel_error(ctx, TOPLU_ERR_SHAPE, "output Y is not [N, C, ...] of X");
  int64_t k[SP], s[SP], d[SP], pads[2 * SP];
  if (toplu__node_attr_ints(ctx->node, "kernel_shape", NULL) < 0)
    return toplu__kernel_error(ctx, TOPLU_ERR_INVALID_MODEL, "attribute kernel_shape is required");
  if ((st = pool_ints(ctx, "kernel_shape", ns, 1, k)) || (st = pool_ints(ctx, "strides", ns, 1, s)) ||
      (st = pool_ints(ctx, "dilations", ns, 1, d)) || (st = pool_ints(ctx, "pads", 2 * ns, 0, pads)))
    return st;
  const char *ap = toplu__node_attr_string(ctx->node, "auto_pad", "NOTSET");
  int upper = !strcmp(ap, "SAME_UPPER"), lower = !strcmp(ap, "SAME_LOWER"), valid = !strcmp(ap, "VALID");
  if (!upper && !lower && !valid && strcmp(ap, "NOTSET") && ap[0])
    return toplu__kernel_error(ctx, TOPLU_ERR_INVALID_MODEL, "unknown auto_pad '%s'", ap);
  maxpool_state_t ps;
  memset(&ps, 0, sizeof ps);
  ps.nc = x->dims[0] * x->dims[1];
  for (int j = 0; j < SP; j++) ps.in[j] = ps.out[j] = ps.k[j] = ps.s[j] = ps.d[j] = 1;
  for (int i = 0; i < ns; i++) {
    int j = SP - ns + i;
    if (k[i] < 1 || s[i] < 1 || d[i] < 1 || pads[i] < 0 || pads[ns + i] < 0)
      return toplu__kernel_error(ctx, TOPLU_ERR_INVALID_MODEL, "kernel_shape, strides, dilations or pads out of range");
    ps.in[j] = x->dims[2 + i];
    ps.out[j] = y->dims[2 + i];
    ps.k[j] = k[i];
    ps.s[j] = s[i];
    ps.d[j] = d[i];
    if (upper || lower) {
      /* ONNX: total = (out - 1) * s + (k - 1) * d + 1 - in; SAME_UPPER puts the odd unit at the end */
      int64_t total = (ps.out[j] - 1) * s[i] + (k[i] - 1) * d[i] + 1 - ps.in[j];
      if (total < 0) total = 0;
      ps.pb[j] = upper ? total / 2 : total - total / 2;
    } else if (!valid) {
      ps.pb[j] = pads[i];
    }
    /* ceil_mode and the end pads only change out[], which the schema inferred */
  }
  return keep_state(ctx, info, &ps, sizeof ps);
}

static toplu_status_t maxpool_run(toplu__kernel_ctx_t *ctx) {
  const maxpool_state_t *ps = ctx->state;
  const float *x = ctx->in[0].data;
  float *y = ctx->out[0].data;
  const int64_t isz = ps->in[0] * ps->in[1] * ps->in[2], osz = ps->out[0] * ps->out[1] * ps->out[2];
  const int nt = ref_threads(ctx, work_estimate(ps->nc * osz, ps->k[0], ps->k[1], ps->k[2]), ps->nc);
  (void)nt;
#pragma omp parallel for num_threads(nt) if (nt > 1) schedule(static)
  for (int64_t c = 0; c < ps->nc; c++) {
    const float *xp = x + c * isz;
    float *yp = y + c * osz;
    int64_t o = 0;
    for (int64_t o0 = 0; o0 < ps->out[0]; o0++)
      for (int64_t o1 = 0; o1 < ps->out[1]; o1++)
        for (int64_t o2 = 0; o2 < ps->out[2]; o2++, o++) {
          float m = -FLT_MAX;
          for (int64_t k0 = 0; k0 < ps->k[0]; k0++) {
            int64_t i0 = o0 * ps->s[0] - ps->pb[0] + k0 * ps->d[0];
            if (i0 < 0 || i0 >= ps->in[0]) continue;
            for (int64_t k1 = 0; k1 < ps->k[1]; k1++) {
              int64_t i1 = o1 * ps->s[1] - ps->pb[1] + k1 * ps->d[1];
              if (i1 < 0 || i1 >= ps->in[1]) continue;
              for (int64_t k2 = 0; k2 < ps->k[2]; k2++) {
                int64_t i2 = o2 * ps->s[2] - ps->pb[2] + k2 * ps->d[2];
                if (i2 < 0 || i2 >= ps->in[2]) continue;
                float v = xp[(i0 * ps->in[1] + i1) * ps->in[2] + i2];
                if (v > m || v != v) m = v; /* a NaN sticks: nothing compares greater */
              }
            }
          }
          yp[o] = m;
        }
  }
  return TOPLU_OK;
}

/* ---- GlobalAveragePool ---- */

static toplu_status_t gap_prepare(toplu__kernel_ctx_t *ctx, toplu__kernel_info_t *info) {
  (void)info;
  toplu_status_t st = need_float(ctx, 1);
  if (st) return st;
  const toplu_tensor_t *x = &ctx->in[0], *y = &ctx->out[0];
  if (x->ndim < 3) return toplu__kernel_error(ctx, TOPLU_ERR_SHAPE, "input X has rank %d, expected >= 3", x->ndim);
  if (toplu_tensor_numel(y) != x->dims[0] * x->dims[1])
    return toplu__kernel_error(ctx, TOPLU_ERR_SHAPE, "output Y is not [N, C, 1, ...]");
  return TOPLU_OK;
}

/* y[n, c] = sum(x[n, c, ...]) / count in double; no elements: NaN (numpy's mean). */
static toplu_status_t gap_run(toplu__kernel_ctx_t *ctx) {
  const toplu_tensor_t *xt = &ctx->in[0];
  const float *x = xt->data;
  float *y = ctx->out[0].data;
  const int64_t nc = xt->dims[0] * xt->dims[1], hw = prod(xt->dims, 2, xt->ndim);
  const int nt = ref_threads(ctx, nc * hw, nc);
  (void)nt;
#pragma omp parallel for num_threads(nt) if (nt > 1) schedule(static)
  for (int64_t c = 0; c < nc; c++) {
    double s = 0.0;
    for (int64_t i = 0; i < hw; i++) s += x[c * hw + i];
    y[c] = (float)(s / (double)hw);
  }
  return TOPLU_OK;
}

/* ---- Softmax ---- */

typedef struct softmax_state {
  int64_t outer, r, inner; /* x as [outer, r, inner], softmax along r */
} softmax_state_t;

static toplu_status_t softmax_prepare(toplu__kernel_ctx_t *ctx, toplu__kernel_info_t *info) {
  toplu_status_t st = need_float(ctx, 1);
  if (st) return st;
  const toplu_tensor_t *x = &ctx->in[0];
  if (!same_dims(x, &ctx->out[0]))
    return toplu__kernel_error(ctx, TOPLU_ERR_SHAPE, "Softmax output is not the input's shape");
  const int old = ctx->node->opset < 13;
  int64_t axis = toplu__node_attr_int(ctx->node, "axis", old ? 1 : -1);
  if (x->ndim < 1 || axis < -x->ndim || axis >= x->ndim)
    return toplu__kernel_error(ctx, TOPLU_ERR_INVALID_MODEL, "axis %lld is out of range for rank %d", (long long)axis,
                              x->ndim);
  if (axis < 0) axis += x->ndim;
  softmax_state_t ss;
  ss.outer = prod(x->dims, 0, (int)axis);
  if (old) {
    /* Softmax-1/11: coerced to 2-D [prod(dims[:axis]), prod(dims[axis:])] */
    ss.r = prod(x->dims, (int)axis, x->ndim);
    ss.inner = 1;
  } else {
    ss.r = x->dims[axis];
    ss.inner = prod(x->dims, (int)axis + 1, x->ndim);
  }
  return keep_state(ctx, info, &ss, sizeof ss);
}

/* y = exp(x - max) / sum(exp(x - max)) along r; reads every x of a column
 * before writing it, so x == y is fine. */
static toplu_status_t softmax_run(toplu__kernel_ctx_t *ctx) {
  const softmax_state_t *ss = ctx->state;
  const float *x = ctx->in[0].data;
  float *y = ctx->out[0].data;
  const int64_t R = ss->r, I = ss->inner, cols = ss->outer * I;
  if (!R) return TOPLU_OK;
  const int nt = ref_threads(ctx, cols * R, cols);
  (void)nt;
#pragma omp parallel for num_threads(nt) if (nt > 1) schedule(static)
  for (int64_t col = 0; col < cols; col++) {
    const int64_t base = (col / I) * R * I + col % I;
    float m = x[base];
    for (int64_t j = 1; j < R; j++) {
      float v = x[base + j * I];
      if (v > m || v != v) m = v;
    }
    double s = 0.0;
    for (int64_t j = 0; j < R; j++) s += exp((double)x[base + j * I] - (double)m);
    for (int64_t j = 0; j < R; j++) y[base + j * I] = (float)(exp((double)x[base + j * I] - (double)m) / s);
  }
  return TOPLU_OK;
}

/* ---- Reshape / Flatten (views) ---- */

static toplu_status_t view_prepare(toplu__kernel_ctx_t *ctx, toplu__kernel_info_t *info) {
  (void)info;
  if (!present(ctx, 0) || ctx->n_out < 1)
    return toplu__kernel_error(ctx, TOPLU_ERR_SHAPE, "%s needs input 0", ctx->node->op_type);
  if (ctx->out[0].dtype != ctx->in[0].dtype || toplu_tensor_numel(&ctx->out[0]) != toplu_tensor_numel(&ctx->in[0]))
    return toplu__kernel_error(ctx, TOPLU_ERR_SHAPE, "%s output does not hold the input's elements", ctx->node->op_type);
  if (!toplu_dtype_size(ctx->in[0].dtype))
    return toplu__kernel_error(ctx, TOPLU_ERR_UNSUPPORTED, "the reference backend has no %s tensors",
                              toplu_dtype_name(ctx->in[0].dtype));
  return TOPLU_OK;
}

/* The planner aliases views and never runs them; direct callers get a copy. */
static toplu_status_t view_run(toplu__kernel_ctx_t *ctx) {
  size_t bytes = toplu_tensor_nbytes(&ctx->out[0]);
  if (bytes && ctx->out[0].data != ctx->in[0].data) memmove(ctx->out[0].data, ctx->in[0].data, bytes);
  return TOPLU_OK;
}

/* ---- table ---- */

const toplu__kernel_t toplu__kernels_ref[] = {
    {"Conv", "", conv_prepare, conv_run, release_state, 0, NULL, NULL, NULL},
    {"Gemm", "", gemm_prepare, gemm_run, release_state, 0, NULL, NULL, NULL},
    {"MatMul", "", matmul_prepare, matmul_run, release_state, 0, NULL, NULL, NULL},
    {"Add", "", binary_prepare, add_run, NULL, TOPLU_KERNEL_INPLACE, NULL, NULL, NULL},
    {"Sub", "", binary_prepare, sub_run, NULL, TOPLU_KERNEL_INPLACE, NULL, NULL, NULL},
    {"Mul", "", binary_prepare, mul_run, NULL, TOPLU_KERNEL_INPLACE, NULL, NULL, NULL},
    {"Div", "", binary_prepare, div_run, NULL, TOPLU_KERNEL_INPLACE, NULL, NULL, NULL},
    {"Relu", "", relu_prepare, relu_run, NULL, TOPLU_KERNEL_INPLACE, NULL, NULL, NULL},
    {"MaxPool", "", maxpool_prepare, maxpool_run, release_state, 0, NULL, NULL, NULL},
    {"GlobalAveragePool", "", gap_prepare, gap_run, NULL, 0, NULL, NULL, NULL},
    {"Softmax", "", softmax_prepare, softmax_run, release_state, TOPLU_KERNEL_INPLACE, NULL, NULL, NULL},
    {"Reshape", "", view_prepare, view_run, NULL, TOPLU_KERNEL_VIEW, NULL, NULL, NULL},
    {"Flatten", "", view_prepare, view_run, NULL, TOPLU_KERNEL_VIEW, NULL, NULL, NULL},
    {NULL, NULL, NULL, NULL, NULL, 0, NULL, NULL, NULL},
};

const toplu__kernel_t *toplu__kernel_find_ref(const char *domain, const char *op_type) {
  if (!domain || !strcmp(domain, "ai.onnx")) domain = "";
  if (!op_type) return NULL;
  for (const toplu__kernel_t *k = toplu__kernels_ref; k->op_type; k++)
    if (!strcmp(k->op_type, op_type) && !strcmp(k->domain, domain)) return k;
  return NULL;
}
