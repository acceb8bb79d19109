/*
 * ops/reduce.c - reduction and softmax kernels:
 *   ReduceMean, ReduceSum, ReduceMax, ReduceMin, ReduceProd, ReduceL1,
 *   ReduceL2, ReduceSumSquare, ReduceLogSum, ReduceLogSumExp (opset 1-18;
 *   axes from the attribute, or from input 1 for ReduceSum-13 and the
 *   others from opset 18; keepdims; noop_with_empty_axes),
 *   ArgMax/ArgMin-1/11/12/13, Softmax/LogSoftmax/Hardmax-1/11/13.
 *
 * Reductions merge adjacent dims and size-1 dims away.  Float tensors
 * reducing one run of dims take one of two fast paths: the reduced dims are
 * innermost ([outer, R]: a contiguous row per output, 16 float lanes) or in
 * the middle ([outer, R, inner]: rows of `inner` accumulated into a block of
 * outputs, contiguous and vectorised).  Everything else (several separated
 * runs, empty reductions, other dtypes) walks the input once with an
 * odometer, accumulating in double (int64 for integer sums, products,
 * maxima and minima, so they stay exact).  ReduceLogSumExp and the softmax
 * family subtract the maximum before exponentiating.
 */
#include <math.h>
#include <string.h>

#include "graph/schema.h"
#include "ops/kernel.h"
#include "ops/reduce_util.h"

#define RED_PAR 32768 /* elements below which loops stay on one thread */
#define RED_BLOCK 1024 /* output columns accumulated together on the middle-axes path */

typedef enum red_op {
  RED_SUM, RED_MEAN, RED_MAX, RED_MIN, RED_PROD, RED_L1, RED_L2, RED_SUMSQ, RED_LOGSUM, RED_LSE
} red_op_t;

typedef enum red_path { RED_COPY, RED_ROWS, RED_COLS, RED_GENERAL } red_path_t;

typedef struct reduce_state {
  red_op_t op;
  red_path_t path;
  int64_t outer, r, inner; /* RED_ROWS / RED_COLS */
  int64_t rcount;          /* elements reduced into each output */
  int nd;                  /* RED_GENERAL: merged input dims and output strides (0: reduced) */
  int64_t dims[TOPLU_MAX_DIMS], ostride[TOPLU_MAX_DIMS];
} reduce_state_t;

/* Op of a Reduce* node. */
static red_op_t red_op_of(const char *op) {
  static const struct {
    const char *name;
    red_op_t op;
  } tab[] = {{"ReduceSum", RED_SUM},       {"ReduceMean", RED_MEAN},    {"ReduceMax", RED_MAX},
             {"ReduceMin", RED_MIN},       {"ReduceProd", RED_PROD},    {"ReduceL1", RED_L1},
             {"ReduceL2", RED_L2},         {"ReduceSumSquare", RED_SUMSQ}, {"ReduceLogSum", RED_LOGSUM},
             {"ReduceLogSumExp", RED_LSE}};
  for (size_t i = 0; i < sizeof tab / sizeof tab[0]; i++)
    if (!strcmp(op, tab[i].name)) return tab[i].op;
  return RED_SUM;
}

/* Integer dtypes (accumulated in int64 where exact). */
static int red_is_int(toplu_dtype_t dt) {
  return dt == TOPLU_DTYPE_INT32 || dt == TOPLU_DTYPE_INT64 || dt == TOPLU_DTYPE_INT8 || dt == TOPLU_DTYPE_UINT8 ||
         dt == TOPLU_DTYPE_UINT32 || dt == TOPLU_DTYPE_UINT64;
}

/* Store v at element k of y (any numeric dtype; integers truncate). */
static void red_store_d(toplu_tensor_t *y, int64_t k, double v) {
  void *p = y->data;
  switch (y->dtype) {
    case TOPLU_DTYPE_FLOAT: ((float *)p)[k] = (float)v; break;
    case TOPLU_DTYPE_DOUBLE: ((double *)p)[k] = v; break;
    case TOPLU_DTYPE_FLOAT16: ((uint16_t *)p)[k] = toplu_float_to_half((float)v); break;
    case TOPLU_DTYPE_INT32: ((int32_t *)p)[k] = (int32_t)v; break;
    case TOPLU_DTYPE_INT64: ((int64_t *)p)[k] = (int64_t)v; break;
    case TOPLU_DTYPE_INT8: ((int8_t *)p)[k] = (int8_t)v; break;
    case TOPLU_DTYPE_UINT8: ((uint8_t *)p)[k] = (uint8_t)v; break;
    case TOPLU_DTYPE_UINT32: ((uint32_t *)p)[k] = (uint32_t)v; break;
    case TOPLU_DTYPE_UINT64: ((uint64_t *)p)[k] = (uint64_t)v; break;
    default: break;
  }
}

/* Store an integer result at element k of an integer y. */
static void red_store_i(toplu_tensor_t *y, int64_t k, int64_t v) {
  void *p = y->data;
  switch (y->dtype) {
    case TOPLU_DTYPE_INT32: ((int32_t *)p)[k] = (int32_t)v; break;
    case TOPLU_DTYPE_INT64: ((int64_t *)p)[k] = v; break;
    case TOPLU_DTYPE_INT8: ((int8_t *)p)[k] = (int8_t)v; break;
    case TOPLU_DTYPE_UINT8: ((uint8_t *)p)[k] = (uint8_t)v; break;
    case TOPLU_DTYPE_UINT32: ((uint32_t *)p)[k] = (uint32_t)v; break;
    case TOPLU_DTYPE_UINT64: ((uint64_t *)p)[k] = (uint64_t)v; break;
    default: break;
  }
}

/* Which dims of x the node reduces (red[d] = 1); *noop when it copies. */
static toplu_status_t red_axes(toplu__kernel_ctx_t *ctx, uint8_t *red, int *noop) {
  const toplu__node_t *n = ctx->node;
  int r = ctx->in[0].ndim;
  int from_input = n->opset >= 18 || (n->opset >= 13 && !strcmp(n->op_type, "ReduceSum"));
  int64_t count = 0;
  memset(red, 0, TOPLU_MAX_DIMS);
  *noop = 0;
  if (from_input) {
    if (ctx->n_in > 1 && ctx->in[1].ndim >= 0) {
      const toplu_tensor_t *a = &ctx->in[1];
      if (!a->data) return toplu__kernel_error(ctx, TOPLU_ERR_UNSUPPORTED, "axes must be a constant");
      count = toplu_tensor_numel(a);
      for (int64_t i = 0; i < count; i++) {
        int64_t ax = toplu__tensor_get_int(a, i);
        if (ax < 0) ax += r;
        if (ax < 0 || ax >= r)
          return toplu__kernel_error(ctx, TOPLU_ERR_INVALID_MODEL, "axes value %lld is out of range for rank %d",
                                    (long long)toplu__tensor_get_int(a, i), r);
        red[ax] = 1;
      }
    }
  } else {
    const int64_t *av;
    count = toplu__node_attr_ints(n, "axes", &av);
    for (int64_t i = 0; i < count; i++) {
      int64_t ax = av[i] < 0 ? av[i] + r : av[i];
      if (ax < 0 || ax >= r)
        return toplu__kernel_error(ctx, TOPLU_ERR_INVALID_MODEL, "axes value %lld is out of range for rank %d",
                                  (long long)av[i], r);
      red[ax] = 1;
    }
    if (count < 0) count = 0;
  }
  if (count == 0) {
    if (toplu__node_attr_int(n, "noop_with_empty_axes", 0)) *noop = 1;
    else
      for (int d = 0; d < r; d++) red[d] = 1;
  }
  return TOPLU_OK;
}

/* Pick the path: merge dims, find the reduced runs. */
static toplu_status_t prepare_reduce(toplu__kernel_ctx_t *ctx, toplu__kernel_info_t *info) {
  const toplu_tensor_t *x = &ctx->in[0];
  toplu_dtype_t dt = x->dtype;
  if (dt != TOPLU_DTYPE_FLOAT && dt != TOPLU_DTYPE_DOUBLE && dt != TOPLU_DTYPE_FLOAT16 && !red_is_int(dt))
    return toplu__kernel_error(ctx, TOPLU_ERR_UNSUPPORTED, "%s on %s tensors is not supported", ctx->node->op_type,
                              toplu_dtype_name(dt));
  reduce_state_t *st = toplu__kernel_alloc(ctx, sizeof *st);
  if (!st) return toplu__kernel_error(ctx, TOPLU_ERR_OUT_OF_MEMORY, "out of memory");
  memset(st, 0, sizeof *st);
  ctx->state = st;
  info->state_bytes = sizeof *st;
  st->op = red_op_of(ctx->node->op_type);
  uint8_t red[TOPLU_MAX_DIMS];
  int noop;
  toplu_status_t e = red_axes(ctx, red, &noop);
  if (e) return e;
  if (noop) {
    st->path = RED_COPY;
    return TOPLU_OK;
  }
  /* Merge: drop size-1 dims, join neighbours reduced alike. */
  int64_t gs[TOPLU_MAX_DIMS];
  uint8_t gr[TOPLU_MAX_DIMS];
  int ng = 0, nred = 0;
  st->rcount = 1;
  for (int d = 0; d < x->ndim; d++) {
    if (red[d]) st->rcount *= x->dims[d];
    if (x->dims[d] == 1) continue;
    if (ng > 0 && gr[ng - 1] == red[d]) {
      gs[ng - 1] *= x->dims[d];
    } else {
      gs[ng] = x->dims[d];
      gr[ng] = red[d];
      nred += red[d];
      ng++;
    }
  }
  int64_t numel = toplu_tensor_numel(x);
  if (dt == TOPLU_DTYPE_FLOAT && nred <= 1 && st->rcount > 0 && numel > 0) {
    int g = 0;
    while (g < ng && !gr[g]) g++;
    st->outer = 1;
    st->inner = 1;
    st->r = g < ng ? gs[g] : 1;
    for (int i = 0; i < ng; i++) {
      if (i < g) st->outer *= gs[i];
      else if (i > g) st->inner *= gs[i];
    }
    st->path = st->inner == 1 ? RED_ROWS : RED_COLS;
    return TOPLU_OK;
  }
  st->path = RED_GENERAL;
  st->nd = ng;
  int64_t os = 1;
  for (int i = ng - 1; i >= 0; i--) {
    st->dims[i] = gs[i];
    st->ostride[i] = gr[i] ? 0 : os;
    if (!gr[i]) os *= gs[i];
  }
  int64_t nout = toplu_tensor_numel(&ctx->out[0]);
  info->workspace_bytes = (size_t)(nout > 0 ? nout : 1) * 2 * sizeof(double);
  return TOPLU_OK;
}

/* ---- float fast paths ---- */

/* Sum of |x|. */
static float red_row_l1(const float *x, int64_t n) {
  float acc[TOPLU_LANES] = {0};
  int64_t i = 0;
  for (; i + TOPLU_LANES <= n; i += TOPLU_LANES)
    for (int j = 0; j < TOPLU_LANES; j++) acc[j] += fabsf(x[i + j]);
  float s = 0;
  for (; i < n; i++) s += fabsf(x[i]);
  for (int j = 0; j < TOPLU_LANES; j++) s += acc[j];
  return s;
}

/* Product of x. */
static float red_row_prod(const float *x, int64_t n) {
  float acc[TOPLU_LANES];
  for (int j = 0; j < TOPLU_LANES; j++) acc[j] = 1.f;
  int64_t i = 0;
  for (; i + TOPLU_LANES <= n; i += TOPLU_LANES)
    for (int j = 0; j < TOPLU_LANES; j++) acc[j] *= x[i + j];
  float s = 1.f;
  for (; i < n; i++) s *= x[i];
  for (int j = 0; j < TOPLU_LANES; j++) s *= acc[j];
  return s;
}

/* log(sum(e^x)) of a row, subtracting its max first. */
static float red_row_lse(const float *x, int64_t n) {
  float m = toplu__row_max(x, n);
  if (isinf(m) || isnan(m)) return m;
  return m + logf(toplu__row_expsum(x, NULL, n, m));
}

/* One output of a contiguous row of n >= 1 elements. */
static float red_row(red_op_t op, const float *x, int64_t n) {
  switch (op) {
    case RED_SUM: return toplu__row_sum(x, n);
    case RED_MEAN: return toplu__row_sum(x, n) / (float)n;
    case RED_LOGSUM: return logf(toplu__row_sum(x, n));
    case RED_MAX: return toplu__row_max(x, n);
    case RED_MIN: return toplu__row_min(x, n);
    case RED_SUMSQ: return toplu__row_sqdev(x, n, 0.f);
    case RED_L2: return sqrtf(toplu__row_sqdev(x, n, 0.f));
    case RED_L1: return red_row_l1(x, n);
    case RED_PROD: return red_row_prod(x, n);
    case RED_LSE: return red_row_lse(x, n);
  }
  return 0.f;
}

/* [outer, R] -> [outer]. */
static void red_rows(const reduce_state_t *st, const float *x, float *y, int threads) {
  int64_t outer = st->outer, r = st->r;
  int nt = outer * r >= RED_PAR && outer > 1 ? threads : 1;
  (void)nt; /* read only by OpenMP pragmas */
  red_op_t op = st->op;
#pragma omp parallel for num_threads(nt) if (nt > 1) schedule(static)
  for (int64_t o = 0; o < outer; o++) y[o] = red_row(op, x + o * r, r);
}

/* Accumulate rows x[0..r-1] (stride `stride`) of w <= RED_BLOCK columns into acc. */
static void red_cols_block(red_op_t op, const float *x, int64_t r, int64_t stride, int64_t w, float *acc) {
  switch (op) {
    case RED_SUM: case RED_MEAN: case RED_LOGSUM:
      for (int64_t i = 0; i < w; i++) acc[i] = x[i];
      for (int64_t k = 1; k < r; k++) {
        const float *row = x + k * stride;
        for (int64_t i = 0; i < w; i++) acc[i] += row[i];
      }
      break;
    case RED_L1:
      for (int64_t i = 0; i < w; i++) acc[i] = fabsf(x[i]);
      for (int64_t k = 1; k < r; k++) {
        const float *row = x + k * stride;
        for (int64_t i = 0; i < w; i++) acc[i] += fabsf(row[i]);
      }
      break;
    case RED_SUMSQ: case RED_L2:
      for (int64_t i = 0; i < w; i++) acc[i] = x[i] * x[i];
      for (int64_t k = 1; k < r; k++) {
        const float *row = x + k * stride;
        for (int64_t i = 0; i < w; i++) acc[i] += row[i] * row[i];
      }
      break;
    case RED_PROD:
      for (int64_t i = 0; i < w; i++) acc[i] = x[i];
      for (int64_t k = 1; k < r; k++) {
        const float *row = x + k * stride;
        for (int64_t i = 0; i < w; i++) acc[i] *= row[i];
      }
      break;
    case RED_MAX: case RED_LSE:
      for (int64_t i = 0; i < w; i++) acc[i] = x[i];
      for (int64_t k = 1; k < r; k++) {
        const float *row = x + k * stride;
        #pragma omp simd
        for (int64_t i = 0; i < w; i++) acc[i] = row[i] > acc[i] || row[i] != row[i] ? row[i] : acc[i]; /* NaN kept */
      }
      break;
    case RED_MIN:
      for (int64_t i = 0; i < w; i++) acc[i] = x[i];
      for (int64_t k = 1; k < r; k++) {
        const float *row = x + k * stride;
        #pragma omp simd
        for (int64_t i = 0; i < w; i++) acc[i] = row[i] < acc[i] || row[i] != row[i] ? row[i] : acc[i];
      }
      break;
  }
  if (op == RED_LSE) {
    float s[RED_BLOCK] = {0};
    for (int64_t k = 0; k < r; k++) {
      const float *row = x + k * stride;
      #pragma omp simd
      for (int64_t i = 0; i < w; i++) s[i] += toplu__expf(row[i] - acc[i]);
    }
    for (int64_t i = 0; i < w; i++) acc[i] = isinf(acc[i]) ? acc[i] : acc[i] + logf(s[i]);
  }
}

/* [outer, R, inner] -> [outer, inner], blocks of RED_BLOCK columns. */
static void red_cols(const reduce_state_t *st, const float *x, float *y, int threads) {
  int64_t outer = st->outer, r = st->r, inner = st->inner;
  int64_t nb = (inner + RED_BLOCK - 1) / RED_BLOCK, tasks = outer * nb;
  int nt = outer * r * inner >= RED_PAR && tasks > 1 ? threads : 1;
  (void)nt; /* read only by OpenMP pragmas */
  red_op_t op = st->op;
  float inv = 1.f / (float)r;
#pragma omp parallel for num_threads(nt) if (nt > 1) schedule(static)
  for (int64_t t = 0; t < tasks; t++) {
    int64_t o = t / nb, i0 = (t % nb) * RED_BLOCK;
    int64_t w = inner - i0 < RED_BLOCK ? inner - i0 : RED_BLOCK;
    float acc[RED_BLOCK];
    red_cols_block(op, x + o * r * inner + i0, r, inner, w, acc);
    float *yo = y + o * inner + i0;
    switch (op) {
      case RED_MEAN: for (int64_t i = 0; i < w; i++) yo[i] = acc[i] * inv; break;
      case RED_L2: for (int64_t i = 0; i < w; i++) yo[i] = sqrtf(acc[i]); break;
      case RED_LOGSUM: for (int64_t i = 0; i < w; i++) yo[i] = logf(acc[i]); break;
      default: memcpy(yo, acc, (size_t)w * sizeof(float)); break;
    }
  }
}

/* ---- general path ---- */

/* Walk x with an odometer: cb-style accumulation of element i into acc[o]. */
#define RED_WALK(st, n, BODY)                                                        \
  do {                                                                               \
    int64_t idx_[TOPLU_MAX_DIMS] = {0}, o = 0;                                       \
    for (int64_t i = 0; i < (n); i++) {                                              \
      BODY;                                                                          \
      for (int d_ = (st)->nd - 1; d_ >= 0; d_--) {                                   \
        o += (st)->ostride[d_];                                                      \
        if (++idx_[d_] < (st)->dims[d_]) break;                                      \
        o -= (st)->ostride[d_] * (st)->dims[d_];                                     \
        idx_[d_] = 0;                                                                \
      }                                                                              \
    }                                                                                \
  } while (0)

/* Integer reductions that stay exact in int64. */
static int red_int_exact(red_op_t op) {
  return op == RED_SUM || op == RED_MEAN || op == RED_MAX || op == RED_MIN || op == RED_PROD || op == RED_L1 ||
         op == RED_SUMSQ;
}

/* Any dtype, any axes: accumulators in the workspace. */
static void red_general(const reduce_state_t *st, const toplu_tensor_t *x, toplu_tensor_t *y, void *ws) {
  int64_t n = toplu_tensor_numel(x), nout = toplu_tensor_numel(y);
  red_op_t op = st->op;
  if (red_is_int(x->dtype) && red_int_exact(op)) {
    int64_t *acc = ws;
    int64_t init = op == RED_PROD ? 1 : op == RED_MAX ? INT64_MIN : op == RED_MIN ? INT64_MAX : 0;
    for (int64_t k = 0; k < nout; k++) acc[k] = init;
    RED_WALK(st, n, {
      int64_t v = toplu__tensor_get_int(x, i);
      switch (op) {
        case RED_MAX: acc[o] = v > acc[o] ? v : acc[o]; break;
        case RED_MIN: acc[o] = v < acc[o] ? v : acc[o]; break;
        /* Wrapping (two's complement) arithmetic: overflow is not UB. */
        case RED_PROD: acc[o] = (int64_t)((uint64_t)acc[o] * (uint64_t)v); break;
        case RED_L1: acc[o] = (int64_t)((uint64_t)acc[o] + (v < 0 ? 0 - (uint64_t)v : (uint64_t)v)); break;
        case RED_SUMSQ: acc[o] = (int64_t)((uint64_t)acc[o] + (uint64_t)v * (uint64_t)v); break;
        default: acc[o] = (int64_t)((uint64_t)acc[o] + (uint64_t)v); break;
      }
    });
    for (int64_t k = 0; k < nout; k++)
      red_store_i(y, k, op == RED_MEAN ? (st->rcount ? acc[k] / st->rcount : 0) : acc[k]);
    return;
  }
  double *acc = ws, *aux = acc + nout;
  double init = op == RED_PROD ? 1.0 : op == RED_MAX || op == RED_LSE ? -INFINITY : op == RED_MIN ? INFINITY : 0.0;
  for (int64_t k = 0; k < nout; k++) acc[k] = init;
  RED_WALK(st, n, {
    double v = toplu__tensor_get_double(x, i);
    switch (op) {
      case RED_MAX: case RED_LSE: acc[o] = v > acc[o] || v != v ? v : acc[o]; break;
      case RED_MIN: acc[o] = v < acc[o] || v != v ? v : acc[o]; break;
      case RED_PROD: acc[o] *= v; break;
      case RED_L1: acc[o] += fabs(v); break;
      case RED_SUMSQ: case RED_L2: acc[o] += v * v; break;
      default: acc[o] += v; break;
    }
  });
  if (op == RED_LSE) {
    for (int64_t k = 0; k < nout; k++) aux[k] = 0.0;
    RED_WALK(st, n, { aux[o] += exp(toplu__tensor_get_double(x, i) - acc[o]); });
  }
  for (int64_t k = 0; k < nout; k++) {
    double v = acc[k];
    switch (op) {
      case RED_MEAN: v = v / (double)st->rcount; break;
      case RED_L2: v = sqrt(v); break;
      case RED_LOGSUM: v = log(v); break;
      case RED_LSE: v = isinf(v) ? v : v + log(aux[k]); break;
      default: break;
    }
    red_store_d(y, k, v);
  }
}

/* Reduce* run. */
static toplu_status_t run_reduce(toplu__kernel_ctx_t *ctx) {
  const reduce_state_t *st = ctx->state;
  const toplu_tensor_t *x = &ctx->in[0];
  toplu_tensor_t *y = &ctx->out[0];
  switch (st->path) {
    case RED_COPY:
      if (y->data != x->data) memcpy(y->data, x->data, toplu_tensor_nbytes(x));
      break;
    case RED_ROWS: red_rows(st, x->data, y->data, ctx->threads); break;
    case RED_COLS: red_cols(st, x->data, y->data, ctx->threads); break;
    case RED_GENERAL: red_general(st, x, y, ctx->workspace); break;
  }
  return TOPLU_OK;
}

/* Free the state. */
static void release_state(toplu__kernel_ctx_t *ctx) {
  if (ctx->state) toplu__kernel_free(ctx, ctx->state);
  ctx->state = NULL;
}

/* prepare_reduce, freeing the state when it fails. */
static toplu_status_t prepare_reduce_checked(toplu__kernel_ctx_t *ctx, toplu__kernel_info_t *info) {
  toplu_status_t e = prepare_reduce(ctx, info);
  if (e) release_state(ctx);
  return e;
}

/* ---- ArgMax / ArgMin ---- */

/* [outer, R, inner] split of x at `axis`. */
static void red_split(const toplu_tensor_t *x, int axis, int64_t *outer, int64_t *r, int64_t *inner) {
  *outer = *inner = 1;
  *r = x->dims[axis];
  for (int d = 0; d < x->ndim; d++) {
    if (d < axis) *outer *= x->dims[d];
    else if (d > axis) *inner *= x->dims[d];
  }
}

/* Index of the best element along r (stride inner) per (outer, inner). */
#define ARG_FN(NAME, T)                                                                               \
  static void NAME(const T *x, int64_t *y, int64_t outer, int64_t r, int64_t inner, int is_max,        \
                   int last, int nt) {                                                                \
    (void)nt; /* read only by OpenMP pragmas */                                                       \
    _Pragma("omp parallel for num_threads(nt) if (nt > 1) schedule(static)")                          \
    for (int64_t o = 0; o < outer; o++)                                                               \
      for (int64_t i = 0; i < inner; i++) {                                                           \
        const T *p = x + o * r * inner + i;                                                           \
        T best = p[0];                                                                                \
        int64_t bi = 0;                                                                               \
        for (int64_t k = 1; k < r; k++) {                                                             \
          T v = p[k * inner];                                                                         \
          int better = is_max ? (last ? v >= best : v > best) : (last ? v <= best : v < best);        \
          if (better) {                                                                               \
            best = v;                                                                                 \
            bi = k;                                                                                   \
          }                                                                                           \
        }                                                                                             \
        y[o * inner + i] = bi;                                                                        \
      }                                                                                               \
  }

ARG_FN(arg_f32, float)
ARG_FN(arg_f64, double)
ARG_FN(arg_i32, int32_t)
ARG_FN(arg_i64, int64_t)
ARG_FN(arg_i8, int8_t)
ARG_FN(arg_u8, uint8_t)
ARG_FN(arg_u32, uint32_t)
ARG_FN(arg_u64, uint64_t)

/* Axis in range, a non-empty axis and a dtype the loops handle. */
static toplu_status_t prepare_arg(toplu__kernel_ctx_t *ctx, toplu__kernel_info_t *info) {
  (void)info;
  const toplu_tensor_t *x = &ctx->in[0];
  int64_t axis = toplu__node_attr_int(ctx->node, "axis", 0);
  if (axis < 0) axis += x->ndim;
  if (axis < 0 || axis >= x->ndim)
    return toplu__kernel_error(ctx, TOPLU_ERR_INVALID_MODEL, "axis is out of range for rank %d", x->ndim);
  if (x->dims[axis] == 0 && toplu_tensor_numel(&ctx->out[0]) > 0)
    return toplu__kernel_error(ctx, TOPLU_ERR_SHAPE, "%s over an empty axis", ctx->node->op_type);
  switch (x->dtype) {
    case TOPLU_DTYPE_FLOAT: case TOPLU_DTYPE_DOUBLE: case TOPLU_DTYPE_INT32: case TOPLU_DTYPE_INT64:
    case TOPLU_DTYPE_INT8: case TOPLU_DTYPE_UINT8: case TOPLU_DTYPE_UINT32: case TOPLU_DTYPE_UINT64:
      return TOPLU_OK;
    default:
      return toplu__kernel_error(ctx, TOPLU_ERR_UNSUPPORTED, "%s on %s tensors is not supported", ctx->node->op_type,
                                toplu_dtype_name(x->dtype));
  }
}

/* ArgMax / ArgMin run. */
static toplu_status_t run_arg(toplu__kernel_ctx_t *ctx) {
  const toplu_tensor_t *x = &ctx->in[0];
  int64_t axis = toplu__node_attr_int(ctx->node, "axis", 0);
  if (axis < 0) axis += x->ndim;
  int64_t outer, r, inner;
  red_split(x, (int)axis, &outer, &r, &inner);
  if (outer * inner == 0 || r == 0) return TOPLU_OK;
  int is_max = !strcmp(ctx->node->op_type, "ArgMax");
  int last = ctx->node->opset >= 12 && toplu__node_attr_int(ctx->node, "select_last_index", 0) != 0;
  int nt = outer * r * inner >= RED_PAR && outer > 1 ? ctx->threads : 1;
  int64_t *y = ctx->out[0].data;
  const void *xp = x->data;
  switch (x->dtype) {
    case TOPLU_DTYPE_FLOAT: arg_f32(xp, y, outer, r, inner, is_max, last, nt); break;
    case TOPLU_DTYPE_DOUBLE: arg_f64(xp, y, outer, r, inner, is_max, last, nt); break;
    case TOPLU_DTYPE_INT32: arg_i32(xp, y, outer, r, inner, is_max, last, nt); break;
    case TOPLU_DTYPE_INT64: arg_i64(xp, y, outer, r, inner, is_max, last, nt); break;
    case TOPLU_DTYPE_INT8: arg_i8(xp, y, outer, r, inner, is_max, last, nt); break;
    case TOPLU_DTYPE_UINT8: arg_u8(xp, y, outer, r, inner, is_max, last, nt); break;
    case TOPLU_DTYPE_UINT32: arg_u32(xp, y, outer, r, inner, is_max, last, nt); break;
    case TOPLU_DTYPE_UINT64: arg_u64(xp, y, outer, r, inner, is_max, last, nt); break;
    default: break;
  }
  return TOPLU_OK;
}

/* ---- Softmax / LogSoftmax / Hardmax ---- */

typedef enum sm_kind { SM_SOFT, SM_LOG, SM_HARD } sm_kind_t;

/* [outer, R, inner] of the node: opset < 13 flattens from axis on (inner 1). */
static void sm_split(const toplu__kernel_ctx_t *ctx, int64_t *outer, int64_t *r, int64_t *inner) {
  const toplu_tensor_t *x = &ctx->in[0];
  int old = ctx->node->opset < 13;
  int64_t axis = toplu__node_attr_int(ctx->node, "axis", old ? 1 : -1);
  if (axis < 0) axis += x->ndim;
  red_split(x, (int)axis, outer, r, inner);
  if (old) {
    *r *= *inner;
    *inner = 1;
  }
}

/* Float input, axis in range. */
static toplu_status_t prepare_softmax(toplu__kernel_ctx_t *ctx, toplu__kernel_info_t *info) {
  (void)info;
  const toplu_tensor_t *x = &ctx->in[0];
  if (x->dtype != TOPLU_DTYPE_FLOAT)
    return toplu__kernel_error(ctx, TOPLU_ERR_UNSUPPORTED, "%s on %s tensors is not supported (float only)",
                              ctx->node->op_type, toplu_dtype_name(x->dtype));
  int64_t axis = toplu__node_attr_int(ctx->node, "axis", ctx->node->opset < 13 ? 1 : -1);
  if (axis < -x->ndim || axis >= x->ndim)
    return toplu__kernel_error(ctx, TOPLU_ERR_INVALID_MODEL, "axis %lld is out of range for rank %d", (long long)axis,
                              x->ndim);
  return TOPLU_OK;
}

/* One contiguous row (safe when x == y). */
static void sm_row(sm_kind_t kind, const float *x, float *y, int64_t n) {
  if (kind == SM_HARD) {
    int64_t bi = 0;
    for (int64_t i = 1; i < n; i++)
      if (x[i] > x[bi]) bi = i;
    for (int64_t i = 0; i < n; i++) y[i] = 0.f;
    y[bi] = 1.f;
    return;
  }
  float m = toplu__row_max(x, n);
  if (kind == SM_SOFT) {
    float s = toplu__row_expsum(x, y, n, m);
    float inv = 1.f / s;
    for (int64_t i = 0; i < n; i++) y[i] *= inv;
  } else {
    /* (x - max) - log(sum), in that order: max + log(sum) first lost x's low bits when the logits are large
     * (1e4: 4.8e-4 off, 1e6: 0.03; [1e30, 1e30, 0] gave 0 for log 1/2: a fresh user's finding of 2026-12-06) */
    float ls = logf(toplu__row_expsum(x, NULL, n, m));
    for (int64_t i = 0; i < n; i++) y[i] = (x[i] - m) - ls;
  }
}

/* Up to RED_BLOCK columns of r rows with stride `stride` (safe when x == y). */
static void sm_cols(sm_kind_t kind, const float *x, float *y, int64_t r, int64_t stride, int64_t w) {
  float m[RED_BLOCK], s[RED_BLOCK];
  int64_t bi[RED_BLOCK];
  for (int64_t i = 0; i < w; i++) {
    m[i] = x[i];
    s[i] = 0.f;
    bi[i] = 0;
  }
  for (int64_t k = 1; k < r; k++) {
    const float *row = x + k * stride;
    if (kind == SM_HARD) {
      for (int64_t i = 0; i < w; i++)
        if (row[i] > m[i]) m[i] = row[i], bi[i] = k;
    } else {
      for (int64_t i = 0; i < w; i++) m[i] = row[i] > m[i] || row[i] != row[i] ? row[i] : m[i]; /* NaN kept */
    }
  }
  if (kind == SM_HARD) {
    for (int64_t k = 0; k < r; k++) {
      float *row = y + k * stride;
      for (int64_t i = 0; i < w; i++) row[i] = bi[i] == k ? 1.f : 0.f;
    }
    return;
  }
  for (int64_t k = 0; k < r; k++) {
    const float *row = x + k * stride;
    float *out = y + k * stride;
    if (kind == SM_SOFT) {
      for (int64_t i = 0; i < w; i++) {
        float e = toplu__expf(row[i] - m[i]);
        out[i] = e;
        s[i] += e;
      }
    } else {
      for (int64_t i = 0; i < w; i++) s[i] += toplu__expf(row[i] - m[i]);
    }
  }
  if (kind == SM_SOFT) {
    for (int64_t i = 0; i < w; i++) s[i] = 1.f / s[i];
    for (int64_t k = 0; k < r; k++) {
      float *out = y + k * stride;
      for (int64_t i = 0; i < w; i++) out[i] *= s[i];
    }
  } else {
    for (int64_t i = 0; i < w; i++) s[i] = logf(s[i]);
    for (int64_t k = 0; k < r; k++) {
      const float *row = x + k * stride;
      float *out = y + k * stride;
      for (int64_t i = 0; i < w; i++) out[i] = (row[i] - m[i]) - s[i];
    }
  }
}

/* Softmax family run: rows when the axis is innermost, column blocks otherwise. */
static toplu_status_t run_sm(toplu__kernel_ctx_t *ctx, sm_kind_t kind) {
  int64_t outer, r, inner;
  sm_split(ctx, &outer, &r, &inner);
  if (outer * r * inner == 0) return TOPLU_OK;
  const float *x = ctx->in[0].data;
  float *y = ctx->out[0].data;
  int64_t nb = (inner + RED_BLOCK - 1) / RED_BLOCK, tasks = outer * nb;
  int nt = outer * r * inner >= RED_PAR && tasks > 1 ? ctx->threads : 1;
  (void)nt; /* read only by OpenMP pragmas */
  if (inner == 1) {
#pragma omp parallel for num_threads(nt) if (nt > 1) schedule(static)
    for (int64_t o = 0; o < outer; o++) sm_row(kind, x + o * r, y + o * r, r);
  } else {
#pragma omp parallel for num_threads(nt) if (nt > 1) schedule(static)
    for (int64_t t = 0; t < tasks; t++) {
      int64_t o = t / nb, i0 = (t % nb) * RED_BLOCK;
      int64_t w = inner - i0 < RED_BLOCK ? inner - i0 : RED_BLOCK;
      sm_cols(kind, x + o * r * inner + i0, y + o * r * inner + i0, r, inner, w);
    }
  }
  return TOPLU_OK;
}

/* Softmax: e^(x - max) / sum. */
static toplu_status_t run_softmax(toplu__kernel_ctx_t *ctx) { return run_sm(ctx, SM_SOFT); }
/* LogSoftmax: x - max - log(sum e^(x - max)). */
static toplu_status_t run_logsoftmax(toplu__kernel_ctx_t *ctx) { return run_sm(ctx, SM_LOG); }
/* Hardmax: 1 at the first maximum, 0 elsewhere. */
static toplu_status_t run_hardmax(toplu__kernel_ctx_t *ctx) { return run_sm(ctx, SM_HARD); }

#define RED_KERNEL(name) \
  { name, "", prepare_reduce_checked, run_reduce, release_state, 0, NULL, NULL, NULL }

const toplu__kernel_t toplu__kernels_reduce[] = {
    RED_KERNEL("ReduceMean"),
    RED_KERNEL("ReduceSum"),
    RED_KERNEL("ReduceMax"),
    RED_KERNEL("ReduceMin"),
    RED_KERNEL("ReduceProd"),
    RED_KERNEL("ReduceL1"),
    RED_KERNEL("ReduceL2"),
    RED_KERNEL("ReduceSumSquare"),
    RED_KERNEL("ReduceLogSum"),
    RED_KERNEL("ReduceLogSumExp"),
    {"ArgMax", "", prepare_arg, run_arg, NULL, 0, NULL, NULL, NULL},
    {"ArgMin", "", prepare_arg, run_arg, NULL, 0, NULL, NULL, NULL},
    {"Softmax", "", prepare_softmax, run_softmax, NULL, TOPLU_KERNEL_INPLACE, NULL, NULL, NULL},
    {"LogSoftmax", "", prepare_softmax, run_logsoftmax, NULL, TOPLU_KERNEL_INPLACE, NULL, NULL, NULL},
    {"Hardmax", "", prepare_softmax, run_hardmax, NULL, TOPLU_KERNEL_INPLACE, NULL, NULL, NULL},
    {NULL, NULL, NULL, NULL, NULL, 0, NULL, NULL, NULL},
};
