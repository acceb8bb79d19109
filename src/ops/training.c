/*
 * ops/training.c - kernels of the training ops that inference graphs carry
 * (ONNX operator spec, https://onnx.ai/onnx/operators/):
 *   NegativeLogLikelihoodLoss-12/13: loss[n, d] = -input[n, t, d] * w[t]
 *     with t = target[n, d] (w[t] = 1 without weight); targets equal to
 *     ignore_index give 0 and weigh 0; reduction "none" keeps loss, "sum"
 *     adds it up, "mean" divides the sum by the sum of the weights taken;
 *   SoftmaxCrossEntropyLoss-12/13: the same on log_softmax(scores, axis 1),
 *     which is also the optional second output (log_prob);
 *   Dropout-1/6/7/10/12/13: in inference (training_mode false, is_test for
 *     opset < 7) or with ratio 0, output = data and mask all true; in
 *     training mode with a ratio and a `seed` attribute, the mask is drawn
 *     once at plan time as the ONNX reference draws it (numpy's legacy
 *     generator: MT19937 seeded with init_genrand(seed), one 53-bit uniform
 *     u per element in row-major order, kept where u >= ratio) and
 *     output = data * mask / (1 - ratio); every run of the plan uses that
 *     mask.  Without a seed training-mode dropout is refused.
 *   RandomNormal-1, RandomUniform-1, RandomNormalLike-1, RandomUniformLike-1:
 *     draws of the same MT19937 (a 53-bit uniform in [0, 1) per uniform
 *     element; normals by Box-Muller, two from two uniforms), float or
 *     double; never folded at plan time.  With a `seed` attribute every
 *     run draws from that seed afresh, as the ONNX reference implementation
 *     (np.random.seed at each call) does: the same numbers for the same
 *     shape, in any process (ONNX Runtime instead goes on from run to
 *     run, so only its first run is comparable).  Without one the draws go
 *     on from run to run, the generator seeded from the clock.  The numbers
 *     are not ONNX Runtime's (its generator differs), only their
 *     distribution is.
 * Float, double and float16 tensors; sums in double.
 */
#include <math.h>
#include <pthread.h>
#include <string.h>

#include "ops/elem_io.h"
#include "ops/kernel.h"
#include "ops/tensor_copy.h"
#include "toplu/session.h"

/* ---- NegativeLogLikelihoodLoss, SoftmaxCrossEntropyLoss ---- */

typedef struct loss_state {
  int reduction; /* 0 none, 1 mean, 2 sum */
  int has_ii;
  int64_t ii;    /* ignore_index */
  int softmax;   /* SoftmaxCrossEntropyLoss */
} loss_state_t;

static toplu_status_t prepare_loss(toplu__kernel_ctx_t *ctx, toplu__kernel_info_t *info) {
  if (!toplu__is_float_dtype(ctx->in[0].dtype))
    return toplu__kernel_error(ctx, TOPLU_ERR_UNSUPPORTED, "%s on %s tensors is not supported", ctx->node->op_type,
                              toplu_dtype_name(ctx->in[0].dtype));
  loss_state_t *s = toplu__kernel_alloc(ctx, sizeof *s);
  if (!s) return toplu__kernel_error(ctx, TOPLU_ERR_OUT_OF_MEMORY, "out of memory");
  ctx->state = s;
  info->state_bytes = sizeof *s;
  const char *r = toplu__node_attr_string(ctx->node, "reduction", "mean");
  s->reduction = !strcmp(r, "none") ? 0 : !strcmp(r, "sum") ? 2 : 1;
  s->has_ii = toplu__node_attr(ctx->node, "ignore_index") != NULL;
  s->ii = toplu__node_attr_int(ctx->node, "ignore_index", 0);
  s->softmax = !strcmp(ctx->node->op_type, "SoftmaxCrossEntropyLoss");
  return TOPLU_OK;
}

static void release_state(toplu__kernel_ctx_t *ctx) { toplu__kernel_free(ctx, ctx->state); }

/* One pass over the [N, D] positions; for SoftmaxCrossEntropyLoss each
 * position's log-softmax over the C classes is computed on the way (and
 * written to log_prob when that output is used). */
static toplu_status_t run_loss(toplu__kernel_ctx_t *ctx) {
  const loss_state_t *s = ctx->state;
  const toplu_tensor_t *x = &ctx->in[0], *t = &ctx->in[1];
  const toplu_tensor_t *w = ctx->n_in > 2 && ctx->in[2].ndim >= 0 ? &ctx->in[2] : NULL;
  toplu_tensor_t *y = &ctx->out[0];
  toplu_tensor_t *lp = s->softmax && ctx->n_out > 1 && ctx->out[1].data ? &ctx->out[1] : NULL;
  const int64_t n = x->dims[0], c = x->dims[1], dd = toplu__dims_prod(x->dims, 2, x->ndim);
  double sum = 0, wsum = 0;
  for (int64_t i = 0; i < n; i++)
    for (int64_t d = 0; d < dd; d++) {
      const int64_t pos = i * dd + d, base = i * c * dd + d;
      double lse = 0;
      if (s->softmax) {
        double m = -INFINITY;
        for (int64_t k = 0; k < c; k++) {
          double v = toplu__tensor_get_double(x, base + k * dd);
          if (v > m) m = v;
        }
        double e = 0;
        for (int64_t k = 0; k < c; k++) e += exp(toplu__tensor_get_double(x, base + k * dd) - m);
        lse = m + log(e);
        if (lp)
          for (int64_t k = 0; k < c; k++)
            toplu__store_double(lp, base + k * dd, toplu__tensor_get_double(x, base + k * dd) - lse);
      }
      int64_t k = toplu__tensor_get_int(t, pos);
      double loss = 0, wt = 0;
      if (!(s->has_ii && k == s->ii)) {
        if (k < 0 || k >= c)
          return toplu__kernel_error(ctx, TOPLU_ERR_INVALID_ARGUMENT,
                                    "target %lld (at %lld) is not a class in [0, %lld) nor ignore_index", (long long)k,
                                    (long long)pos, (long long)c);
        wt = w ? toplu__tensor_get_double(w, k) : 1.0;
        loss = -(toplu__tensor_get_double(x, base + k * dd) - lse) * wt;
      }
      if (s->reduction == 0) toplu__store_double(y, pos, loss);
      sum += loss;
      wsum += wt;
    }
  if (s->reduction == 2) toplu__store_double(y, 0, sum);
  else if (s->reduction == 1) toplu__store_double(y, 0, sum / wsum);
  return TOPLU_OK;
}

/* ---- Dropout ---- */

/* MT19937 (Matsumoto and Nishimura, 1998), as numpy's RandomState uses it. */
typedef struct mt19937 {
  uint32_t mt[624];
  int pos;
} mt19937_t;

static void mt_seed(mt19937_t *g, uint32_t seed) {
  g->mt[0] = seed;
  for (int i = 1; i < 624; i++) g->mt[i] = 1812433253u * (g->mt[i - 1] ^ (g->mt[i - 1] >> 30)) + (uint32_t)i;
  g->pos = 624;
}

static uint32_t mt_next(mt19937_t *g) {
  if (g->pos >= 624) {
    for (int i = 0; i < 624; i++) {
      uint32_t y = (g->mt[i] & 0x80000000u) | (g->mt[(i + 1) % 624] & 0x7fffffffu);
      g->mt[i] = g->mt[(i + 397) % 624] ^ (y >> 1) ^ ((y & 1u) ? 0x9908b0dfu : 0u);
    }
    g->pos = 0;
  }
  uint32_t y = g->mt[g->pos++];
  y ^= y >> 11;
  y ^= (y << 7) & 0x9d2c5680u;
  y ^= (y << 15) & 0xefc60000u;
  y ^= y >> 18;
  return y;
}

/* A double in [0, 1) from 53 random bits, as numpy's random_sample. */
static double mt_double(mt19937_t *g) {
  uint32_t a = mt_next(g) >> 5, b = mt_next(g) >> 6;
  return ((double)a * 67108864.0 + (double)b) / 9007199254740992.0;
}

typedef struct dropout_state {
  double scale;   /* 1 / (1 - ratio) */
  uint8_t *mask;  /* NULL: nothing is dropped */
} dropout_state_t;

static toplu_status_t prepare_dropout(toplu__kernel_ctx_t *ctx, toplu__kernel_info_t *info) {
  const toplu__node_t *n = ctx->node;
  if (!toplu__is_float_dtype(ctx->in[0].dtype))
    return toplu__kernel_error(ctx, TOPLU_ERR_UNSUPPORTED, "Dropout on %s tensors is not supported",
                              toplu_dtype_name(ctx->in[0].dtype));
  int training;
  double ratio;
  if (n->opset < 12) {
    training = n->opset < 7 && toplu__node_attr_int(n, "is_test", 0) == 0;
    ratio = toplu__node_attr_float(n, "ratio", 0.5f);
  } else {
    const toplu_tensor_t *r = ctx->n_in > 1 && ctx->in[1].ndim >= 0 ? &ctx->in[1] : NULL;
    const toplu_tensor_t *tm = ctx->n_in > 2 && ctx->in[2].ndim >= 0 ? &ctx->in[2] : NULL;
    if ((r && !r->data) || (tm && !tm->data))
      return toplu__kernel_error(ctx, TOPLU_ERR_UNSUPPORTED, "ratio and training_mode must be known before the run");
    training = tm && toplu__tensor_get_int(tm, 0) != 0;
    ratio = r ? toplu__tensor_get_double(r, 0) : 0.5;
  }
  if (training && !(ratio >= 0 && ratio < 1))
    return toplu__kernel_error(ctx, TOPLU_ERR_INVALID_MODEL, "ratio %g is not in [0, 1)", ratio);
  if (!training || ratio == 0) return TOPLU_OK;
  const toplu__attr_t *sa = toplu__node_attr(n, "seed");
  if (!sa || sa->type != TOPLU_ATTR_INT || sa->i < 0 || sa->i > 0xFFFFFFFFll)
    return toplu__kernel_error(ctx, TOPLU_ERR_UNSUPPORTED,
                              "training-mode Dropout with ratio %g needs a seed attribute in [0, 2^32) (toplu draws "
                              "the mask once, at plan time)", ratio);
  const int64_t count = toplu_tensor_numel(&ctx->in[0]);
  size_t bytes = sizeof(dropout_state_t) + (size_t)count;
  dropout_state_t *s = toplu__kernel_alloc(ctx, bytes);
  if (!s) return toplu__kernel_error(ctx, TOPLU_ERR_OUT_OF_MEMORY, "out of memory");
  ctx->state = s;
  info->state_bytes = bytes;
  s->scale = 1.0 / (1.0 - ratio);
  s->mask = (uint8_t *)(s + 1);
  mt19937_t g;
  mt_seed(&g, (uint32_t)sa->i);
  for (int64_t i = 0; i < count; i++) s->mask[i] = mt_double(&g) >= ratio;
  return TOPLU_OK;
}

/* Copy (or drop with the plan's mask) and write the mask. */
static toplu_status_t run_dropout(toplu__kernel_ctx_t *ctx) {
  const dropout_state_t *s = ctx->state;
  const int64_t count = toplu_tensor_numel(&ctx->in[0]);
  if (s) {
    for (int64_t i = 0; i < count; i++)
      toplu__store_double(&ctx->out[0], i, s->mask[i] ? toplu__tensor_get_double(&ctx->in[0], i) * s->scale : 0.0);
  } else if (ctx->out[0].data && ctx->out[0].data != ctx->in[0].data) {
    toplu__copy_bytes(ctx->out[0].data, ctx->in[0].data, toplu_tensor_nbytes(&ctx->out[0]), ctx->threads);
  }
  if (ctx->n_out > 1 && ctx->out[1].data) {
    toplu_tensor_t *m = &ctx->out[1];
    for (int64_t i = 0; i < count; i++) toplu__store_double(m, i, s ? s->mask[i] : 1.0);
  }
  return TOPLU_OK;
}

/* ---- RandomNormal, RandomUniform and their *Like forms ---- */

/* One MT19937 per plan step: with a seed, seeded again at every run; without
 * one, seeded from the clock and a process-wide count (two steps or two plans
 * draw differently) and going on from run to run.  Runs of one plan from
 * several threads take turns. */
typedef struct random_state {
  mt19937_t g;
  int seeded;
  uint32_t seed;
  pthread_mutex_t lock;
  int normal;      /* 1: normal(a = mean, b = scale); 0: uniform in [a = low, b = high) */
  double a, b;
  int have_spare;  /* Box-Muller's second value, kept for the next draw */
  double spare;
} random_state_t;

static toplu_status_t prepare_random(toplu__kernel_ctx_t *ctx, toplu__kernel_info_t *info) {
  const toplu__node_t *n = ctx->node;
  toplu_dtype_t dt = ctx->out[0].dtype;
  if (dt != TOPLU_DTYPE_FLOAT && dt != TOPLU_DTYPE_DOUBLE)
    return toplu__kernel_error(ctx, TOPLU_ERR_UNSUPPORTED, "%s draws float and double only, not %s", n->op_type,
                              toplu_dtype_name(dt));
  random_state_t *s = toplu__kernel_alloc(ctx, sizeof *s);
  if (!s) return toplu__kernel_error(ctx, TOPLU_ERR_OUT_OF_MEMORY, "out of memory");
  memset(s, 0, sizeof *s);
  if (pthread_mutex_init(&s->lock, NULL)) {
    toplu__kernel_free(ctx, s);
    return toplu__kernel_error(ctx, TOPLU_ERR_OUT_OF_MEMORY, "cannot create a mutex");
  }
  ctx->state = s;
  info->state_bytes = sizeof *s;
  s->normal = !strncmp(n->op_type, "RandomNormal", 12);
  s->a = s->normal ? toplu__node_attr_float(n, "mean", 0.f) : toplu__node_attr_float(n, "low", 0.f);
  s->b = s->normal ? toplu__node_attr_float(n, "scale", 1.f) : toplu__node_attr_float(n, "high", 1.f);
  const toplu__attr_t *sa = toplu__node_attr(n, "seed");
  uint32_t seed;
  if (sa) {
    double v = sa->type == TOPLU_ATTR_INT ? (double)sa->i : (double)sa->f;
    seed = (uint32_t)(int64_t)v;
  } else {
    static uint32_t count;
    uint32_t k = __atomic_add_fetch(&count, 1, __ATOMIC_RELAXED);
    uint64_t t = (uint64_t)toplu_monotonic_ns();
    seed = (uint32_t)(t ^ (t >> 32)) ^ (k * 0x9E3779B9u);
  }
  s->seeded = sa != NULL;
  s->seed = seed;
  mt_seed(&s->g, seed);
  return TOPLU_OK;
}

static toplu_status_t run_random(toplu__kernel_ctx_t *ctx) {
  random_state_t *s = ctx->state;
  toplu_tensor_t *y = &ctx->out[0];
  const int64_t count = toplu_tensor_numel(y);
  pthread_mutex_lock(&s->lock);
  if (s->seeded) mt_seed(&s->g, s->seed), s->have_spare = 0;
  for (int64_t i = 0; i < count; i++) {
    double v;
    if (!s->normal) {
      v = s->a + (s->b - s->a) * mt_double(&s->g);
    } else if (s->have_spare) {
      v = s->a + s->b * s->spare;
      s->have_spare = 0;
    } else { /* Box-Muller: two standard normals from two uniforms, u1 in (0, 1] */
      double u1 = 1.0 - mt_double(&s->g), u2 = mt_double(&s->g), r = sqrt(-2.0 * log(u1));
      s->spare = r * sin(6.283185307179586 * u2);
      s->have_spare = 1;
      v = s->a + s->b * r * cos(6.283185307179586 * u2);
    }
    toplu__store_double(y, i, v);
  }
  pthread_mutex_unlock(&s->lock);
  return TOPLU_OK;
}

static void release_random(toplu__kernel_ctx_t *ctx) {
  random_state_t *s = ctx->state;
  if (!s) return;
  pthread_mutex_destroy(&s->lock);
  toplu__kernel_free(ctx, s);
  ctx->state = NULL;
}

const toplu__kernel_t toplu__kernels_training[] = {
    {"NegativeLogLikelihoodLoss", "", prepare_loss, run_loss, release_state, 0, NULL, NULL, NULL},
    {"SoftmaxCrossEntropyLoss", "", prepare_loss, run_loss, release_state, 0, NULL, NULL, NULL},
    {"Dropout", "", prepare_dropout, run_dropout, release_state, TOPLU_KERNEL_INPLACE, NULL, NULL, NULL},
    {"RandomNormal", "", prepare_random, run_random, release_random, 0, NULL, NULL, NULL},
    {"RandomUniform", "", prepare_random, run_random, release_random, 0, NULL, NULL, NULL},
    {"RandomNormalLike", "", prepare_random, run_random, release_random, 0, NULL, NULL, NULL},
    {"RandomUniformLike", "", prepare_random, run_random, release_random, 0, NULL, NULL, NULL},
    {NULL, NULL, NULL, NULL, NULL, 0, NULL, NULL, NULL},
};
