/*
 * plan/planner.c - toplu_plan_model: the analytic batch-size planner
 * (public API in toplu/planner.h; the formulas are documented there and in
 * docs/plan-tune.md).
 *
 * Steps: resolve the device and input shapes; build toplu's real plans at
 * B = 1 and 2 (a session of our own, with an allocator of our own, so the
 * weights the plan repacks can be told from those it reads in place); fit
 * the affine law of every memory term; scale it for the device and
 * precision; find the largest B under mem_fraction x capacity and check the
 * law there against a real plan (refitting through that plan when they
 * disagree, and searching with real plans when the law still misses); model
 * latency per node; pick the recommended B and the knee; fill the rows.
 */
#include <ctype.h>
#include <errno.h>
#include <jansson.h>
#include <math.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/error.h"
#include "core/file.h"
#include "core/identity.h"
#include "plan/device.h"
#include "plan/gpu_runtime.h"
#include "plan/latency.h"
#include "plan/memory.h"
#include "plan/plan_report.h"
#include "plan/shapes.h"
#include "toplu/alloc.h"
#include "toplu/planner.h"
#include "toplu/session.h"

#define MAX_BATCH_CAP ((int64_t)1 << 20) /* the max-batch search stops here */
#define CHECK_CAP ((int64_t)65536)       /* largest B at which a real plan is built */
#define MAX_DEVICES 4096
/* The recommended batch is the smallest within this share of the best predicted
 * throughput: closer differences are below what the model can tell apart. */
#define RECOMMEND_WITHIN 0.99

void toplu_planner_options_init(toplu_planner_options_t *o) {
  if (!o) return;
  memset(o, 0, sizeof *o);
  o->mem_fraction = 0.8;
  o->precision = TOPLU_PRECISION_FP32;
  o->devices = 1;
}

/* Add a note (one sentence) to the plan. */
static void note(toplu_batch_plan_t *p, const char *fmt, ...) TOPLU_PRINTF(2, 3);
static void note(toplu_batch_plan_t *p, const char *fmt, ...) {
  if (p->n_notes >= TOPLU_PLAN_MAX_NOTES) { /* full: say so in the last one rather than drop notes silently */
    snprintf(p->notes[TOPLU_PLAN_MAX_NOTES - 1], sizeof p->notes[0],
             "more notes than the %d kept (TOPLU_PLAN_MAX_NOTES): the later ones are not shown", TOPLU_PLAN_MAX_NOTES);
    return;
  }
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(p->notes[p->n_notes++], sizeof p->notes[0], fmt, ap);
  va_end(ap);
}

/* Check the options; TOPLU_OK or TOPLU_ERR_INVALID_ARGUMENT with a message. */
static toplu_status_t check_options(const toplu_planner_options_t *o, toplu_error_t *err) {
  if (!(o->mem_fraction > 0 && o->mem_fraction <= 1))
    return toplu__errorf(err, TOPLU_ERR_INVALID_ARGUMENT, "mem_fraction must be in (0, 1], got %g", o->mem_fraction);
  if (o->devices < 1 || o->devices > MAX_DEVICES)
    return toplu__errorf(err, TOPLU_ERR_INVALID_ARGUMENT, "devices must be 1..%d, got %d", MAX_DEVICES, o->devices);
  if (o->threads < 0) return toplu__errorf(err, TOPLU_ERR_INVALID_ARGUMENT, "threads must be >= 0 (0: all), got %d", o->threads);
  if (o->latency_budget_ms < 0 || !isfinite(o->latency_budget_ms))
    return toplu__errorf(err, TOPLU_ERR_INVALID_ARGUMENT, "latency_budget_ms must be a finite number of ms >= 0 (0: none), got %g",
                        o->latency_budget_ms);
  if ((unsigned)o->precision >= TOPLU_PRECISION_COUNT)
    return toplu__errorf(err, TOPLU_ERR_INVALID_ARGUMENT, "unknown precision %d", (int)o->precision);
  if (o->n_batch_sizes < 0 || (o->n_batch_sizes > 0 && !o->batch_sizes) || o->n_shapes < 0 ||
      (o->n_shapes > 0 && !o->shapes))
    return toplu__errorf(err, TOPLU_ERR_INVALID_ARGUMENT,
                        "n_batch_sizes (%d) and n_shapes (%d) must be >= 0, with their arrays when > 0",
                        o->n_batch_sizes, o->n_shapes);
  if (o->n_notes < 0 || (o->n_notes > 0 && !o->notes))
    return toplu__errorf(err, TOPLU_ERR_INVALID_ARGUMENT, "n_notes (%d) must be >= 0, with notes when > 0", o->n_notes);
  for (int i = 0; i < o->n_shapes; i++)
    if (!o->shapes[i].name)
      return toplu__errorf(err, TOPLU_ERR_INVALID_ARGUMENT, "shapes[%d]: the input name is NULL", i);
  for (int i = 0; i < o->n_batch_sizes; i++)
    if (o->batch_sizes[i] < 1 || o->batch_sizes[i] > MAX_BATCH_CAP)
      return toplu__errorf(err, TOPLU_ERR_INVALID_ARGUMENT, "batch_sizes: %lld is not in 1..%lld",
                          (long long)o->batch_sizes[i], (long long)MAX_BATCH_CAP);
  return TOPLU_OK;
}

/* Everything one toplu_plan_model call holds. */
typedef struct planner {
  toplu_batch_plan_t *p;
  const toplu_planner_options_t *o;
  toplu__batch_shapes_t shapes;
  toplu_allocator_t *alloc;
  toplu_session_t *session;
  toplu__plan_point_t p1, p2;  /* real plans at B = 1 and 2 */
  toplu__mem_law_t engine_law; /* toplu's CPU engine, fp32 */
  toplu__latency_model_t lm;
  json_t *calibration;        /* the --calibration tune.json, checked */
  const toplu__gpu_profile_t *gpu; /* a GPU runtime profile; NULL: the CPU or "ideal" (the roofline) */
  double *node_flops, *node_bytes; /* scratch: per-node costs at one batch (gpu) */
  double heavy, light;        /* launched nodes of each kind at batch 1 (gpu; plan/gpu_runtime.h) */
  int cal_n;                  /* a CSV calibration's measurements */
  int64_t *cal_batch;
  double *cal_ms;
  /* One GPU measurement's fit (calibrate): the framework's host time (per-node host time and the per-batch
   * cost) times cal_host, the GPU's node times divided by cal_gpu; 0 means 1 */
  double cal_host, cal_gpu;
} planner_t;

/* Device terms from engine terms: precision scales, the device's runtime
 * overhead (GPUs), weights split over the shards. */
static void device_terms(const planner_t *pl, const toplu__mem_terms_t *e, toplu__mem_terms_t *d) {
  const toplu_batch_plan_t *p = pl->p;
  d->weights = floor(e->weights * p->precision_weight_scale / (double)p->shards);
  d->activation = ceil(e->activation * p->precision_activation_scale);
  d->workspace = ceil(e->workspace * p->precision_activation_scale);
  d->io = e->io;
  d->overhead = p->device.kind == TOPLU_DEVICE_GPU ? (double)p->device.runtime_overhead_bytes : e->overhead;
  if (p->device.kind == TOPLU_DEVICE_GPU && pl->gpu) { /* the runtime's own memory (plan/gpu_runtime.c) */
    const toplu__gpu_profile_t *g = pl->gpu;
    d->overhead = (g->context_bytes > 0 ? g->context_bytes : (double)p->device.runtime_overhead_bytes) +
                  g->workspace_bytes + ceil(g->rounding_fraction * (d->activation + d->workspace)) +
                  g->rounding_per_node * (double)pl->p1.n_plan_steps; /* per step of toplu's plan, as before */
  }
}

/* Device terms at batch b from the engine law. */
static void law_terms(const planner_t *pl, int64_t b, toplu__mem_terms_t *d) {
  toplu__mem_terms_t e;
  toplu__mem_law_at(&pl->engine_law, b, &e);
  device_terms(pl, &e, d);
}

/* The weights do not grow with the batch, but the layout oneDNN packs them
 * in can differ from one batch size to another (on AVX-512, 768 bytes of
 * PaddleOCR cls's 593 KB between batch 1 and 2): the law keeps the largest
 * weight bytes of the plans it was fitted through as a constant, and every
 * row reports that (an upper bound, the same at every batch size).  w: the
 * other plans' weights; the law's own at B = 1 are the plan at B = 1's. */
static void law_weights_constant(planner_t *pl, double w) {
  if (w < pl->engine_law.fixed.weights + pl->engine_law.per_sample.weights)
    w = pl->engine_law.fixed.weights + pl->engine_law.per_sample.weights;
  pl->engine_law.fixed.weights = w;
  pl->engine_law.per_sample.weights = 0;
}

/* Device terms at batch b from a real plan (built, measured, dropped). */
static toplu_status_t real_terms(planner_t *pl, int64_t b, toplu__mem_terms_t *d, toplu__mem_terms_t *engine,
                                 toplu_error_t *err) {
  toplu__plan_point_t pt;
  toplu_status_t st =
      toplu__plan_point_build(pl->session, &pl->shapes, b, pl->p->device.kind == TOPLU_DEVICE_GPU, &pt, err);
  toplu_session_clear_plans(pl->session);
  if (st) return st;
  toplu__mem_terms_t e;
  toplu__plan_point_terms(&pt, pl->o->double_buffer ? 2 : 1, &e);
  toplu__plan_point_free(&pt);
  if (engine) *engine = e;
  device_terms(pl, &e, d);
  return TOPLU_OK;
}

/* Largest B with the law's total within budget (0: none; capped). */
static int64_t law_max_batch(const planner_t *pl, int *capped) {
  toplu__mem_terms_t t0, t1;
  law_terms(pl, 0, &t0);
  law_terms(pl, 1, &t1);
  double fixed = toplu__mem_terms_total(&t0), slope = toplu__mem_terms_total(&t1) - fixed;
  double budget = (double)pl->p->budget_bytes;
  *capped = 0;
  if (fixed + (slope > 0 ? slope : 0) > budget) return 0;
  if (slope <= 0) {
    *capped = 1;
    return MAX_BATCH_CAP;
  }
  double b = floor((budget - fixed) / slope);
  if (b >= (double)MAX_BATCH_CAP) {
    *capped = 1;
    return MAX_BATCH_CAP;
  }
  /* guard against rounding: step down while the law says it does not fit */
  int64_t bi = (int64_t)b;
  toplu__mem_terms_t t;
  while (bi > 0) {
    law_terms(pl, bi, &t);
    if (toplu__mem_terms_total(&t) <= budget) break;
    bi--;
  }
  return bi;
}

/* Find the max batch: the law, checked (and if need be corrected) with real plans. */
static toplu_status_t find_max_batch(planner_t *pl, toplu_error_t *err) {
  toplu_batch_plan_t *p = pl->p;
  int capped = 0;
  int64_t bmax = law_max_batch(pl, &capped);
  p->max_capped = capped;
  if (!p->batchable) {
    p->max_batch_size = bmax >= 1 ? 1 : 0;
    p->max_capped = 0;
    return TOPLU_OK;
  }
  double budget = (double)p->budget_bytes;
  for (int iter = 0; iter < 3 && bmax > 2; iter++) {
    int64_t bc = bmax < CHECK_CAP ? bmax : CHECK_CAP;
    toplu__mem_terms_t real, engine, law;
    toplu_status_t st = real_terms(pl, bc, &real, &engine, err);
    if (st) return st;
    law_terms(pl, bc, &law);
    double rt = toplu__mem_terms_total(&real), lt = toplu__mem_terms_total(&law);
    p->affine_check_batch = bc;
    p->affine_error = rt > 0 ? fabs(lt - rt) / rt : 0;
    if (iter == 0) p->affine_error_first = p->affine_error, p->affine_check_batch_first = bc;
    if (p->affine_error <= 1e-4) break;
    /* Not affine: refit through B = 1 and the checked plan. */
    toplu__mem_terms_t e1;
    toplu__plan_point_terms(&pl->p1, pl->o->double_buffer ? 2 : 1, &e1);
    double w = pl->engine_law.fixed.weights; /* the constant of the first fit */
    toplu__mem_law_fit(&e1, 1, &engine, bc, &pl->engine_law);
    /* Weights that grew by more than a layout's difference (a few KiB at most) are constants the plan
     * folds for its batch size, an RNN's initial state [layers, B, hidden]: they stay per sample.  As one
     * constant they were reported at the large plan's size in every row (24 MiB at B = 1 for an LSTM whose
     * plan there holds 108 KiB). */
    if (!(engine.weights > 1.01 * w + 65536.0)) law_weights_constant(pl, w > engine.weights ? w : engine.weights);
    /* A term that jumps between B = 1 and 2 and then stays (a workspace of 74 KiB at B = 1 and 147 KiB from
     * B = 2 on, an int8 MNIST) fell under the line through 1 and the checked plan: the rows the law filled
     * (B = 3, 8, 64) said 73 KiB less than the real plans (a fresh user's finding, 2026-12-05).  Each term's
     * constant is raised until the law holds the plan at B = 2 too: never below a real plan it was built from. */
    toplu__mem_terms_t e2, l2;
    toplu__plan_point_terms(&pl->p2, pl->o->double_buffer ? 2 : 1, &e2);
    toplu__mem_law_at(&pl->engine_law, 2, &l2);
    toplu__mem_terms_t *lf = &pl->engine_law.fixed;
    int raised = 0;
#define RAISE(f) \
  if (e2.f > l2.f) lf->f += e2.f - l2.f, raised = 1
    RAISE(weights);
    RAISE(activation);
    RAISE(workspace);
    RAISE(io);
    RAISE(overhead);
#undef RAISE
    note(p, "memory is not exactly affine in B: the law from B = 1, 2 was off by %.2f%% at B = %lld, so it was "
            "refitted through B = 1 and %lld%s",
         100 * p->affine_error, (long long)bc, (long long)bc,
         raised ? ", its constants raised to hold the plan at B = 2 as well" : "");
    bmax = law_max_batch(pl, &capped);
    p->max_capped = capped;
  }
  /* The answer must fit for real, and (when the law is not exact) the next size
   * must not: search with real plans when either fails. */
  if (bmax > 2 && bmax <= CHECK_CAP) {
    toplu__mem_terms_t real;
    toplu_status_t st = real_terms(pl, bmax, &real, NULL, err);
    if (st) return st;
    if (toplu__mem_terms_total(&real) <= budget && p->affine_error > 0 && bmax < CHECK_CAP && !p->max_capped) {
      int64_t lo = bmax, hi = bmax + 1, step = 1;
      for (;;) { /* grow until a size does not fit */
        if ((st = real_terms(pl, hi, &real, NULL, err))) return st;
        if (toplu__mem_terms_total(&real) > budget) break;
        lo = hi;
        step *= 2;
        hi = lo + step;
        if (hi > CHECK_CAP) {
          hi = CHECK_CAP + 1;
          break;
        }
      }
      while (hi - lo > 1) {
        int64_t mid = lo + (hi - lo) / 2;
        if ((st = real_terms(pl, mid, &real, NULL, err))) return st;
        if (toplu__mem_terms_total(&real) <= budget) lo = mid;
        else hi = mid;
      }
      if (lo > bmax) note(p, "the max batch was found by a search over toplu's real plans (the law underestimated it)");
      bmax = lo;
      real_terms(pl, bmax, &real, NULL, err);
    }
    if (toplu__mem_terms_total(&real) > budget) {
      int64_t lo = 2, hi = bmax; /* lo fits (from the plan at 2), hi does not */
      toplu__mem_terms_t t2;
      law_terms(pl, 2, &t2);
      if (toplu__mem_terms_total(&t2) > budget) lo = 1;
      while (hi - lo > 1) {
        int64_t mid = lo + (hi - lo) / 2;
        if ((st = real_terms(pl, mid, &real, NULL, err))) return st;
        if (toplu__mem_terms_total(&real) <= budget) lo = mid;
        else hi = mid;
      }
      note(p, "the max batch was found by a search over toplu's real plans (the affine law overestimated it)");
      bmax = lo;
    }
  }
  p->max_batch_size = bmax;
  return TOPLU_OK;
}

/* The largest B at which every tensor of the plan holds at most limit elements, from the plans at B = 1
 * and 2: each costed step's largest tensor grows by its own per-sample part (the two plans cost the same
 * steps; where they do not, the largest of each plan stands for all).  MAX_BATCH_CAP where none grows, 0 when
 * a tensor passes the limit at B = 1 or at every B.  *per_sample: the bounding step's elements per sample. */
static int64_t element_max_batch(const planner_t *pl, int64_t limit, int64_t *per_sample, const char **step) {
  const toplu__plan_point_t *a = &pl->p1, *b = pl->p->batchable ? &pl->p2 : NULL;
  int aligned = b && b->n_steps == a->n_steps;
  int64_t best = MAX_BATCH_CAP, m2 = 0;
  *per_sample = 0;
  *step = "";
  for (int i = 0; i < a->n_steps; i++) {
    int64_t e1 = a->step_elems[i];
    if (e1 > limit) {
      *step = a->step_labels + (size_t)i * TOPLU__STEP_LABEL;
      return 0;
    }
    if (!aligned) continue;
    int64_t e2 = b->step_elems[i], slope = e2 - e1;
    if (slope <= 0) continue;
    int64_t bi = (limit - (e1 - slope)) / slope; /* e1 + slope (B - 1) <= limit */
    if (bi < best || (bi == best && slope > *per_sample))
      best = bi, *per_sample = slope, *step = a->step_labels + (size_t)i * TOPLU__STEP_LABEL;
  }
  if (!b) return 1;
  if (!aligned) { /* the largest tensors of the two plans stand for all */
    int64_t m1 = 0;
    int i2 = 0;
    for (int i = 0; i < a->n_steps; i++)
      if (a->step_elems[i] > m1) m1 = a->step_elems[i];
    for (int i = 0; i < b->n_steps; i++)
      if (b->step_elems[i] > m2) m2 = b->step_elems[i], i2 = i;
    if (m2 > m1)
      best = (limit - (2 * m1 - m2)) / (m2 - m1), *per_sample = m2 - m1,
      *step = b->step_labels + (size_t)i2 * TOPLU__STEP_LABEL;
  }
  return best < 1 ? 0 : best;
}

/* Hold max_batch_size under the GPU runtime's element limit (element_max_batch). */
static void apply_element_limit(planner_t *pl) {
  toplu_batch_plan_t *p = pl->p;
  p->element_max_batch = -1;
  p->max_by_elements = 0;
  if (!pl->gpu || pl->gpu->max_tensor_elements <= 0) return;
  int64_t lim = pl->gpu->max_tensor_elements, per = 0;
  const char *step = "";
  int64_t be = element_max_batch(pl, lim, &per, &step);
  p->element_max_batch = be;
  p->elements_per_sample = per;
  if (be >= p->max_batch_size) return;
  if (be == 0)
    note(p, "no batch size runs under %s: step %s holds a tensor past its %lld-element limit (32-bit indexing)",
         pl->gpu->name, step, (long long)lim);
  else
    note(p, "max batch %lld, not the %lld that fit in memory: %s indexes a tensor's elements in 32 bits and step %s "
            "holds %lld elements per sample",
         (long long)be, (long long)p->max_batch_size, pl->gpu->name, step, (long long)per);
  p->max_batch_size = be;
  p->max_capped = 0;
  p->max_by_elements = 1;
}

/* The runtime profile's latency (s) at b before calibration; parts optional. */
static double gpu_latency(const planner_t *pl, int64_t b, const toplu__latency_parts_t *lp, toplu__gpu_parts_t *gp) {
  const toplu_batch_plan_t *p = pl->p;
  const toplu__plan_point_t *p2 = p->batchable ? &pl->p2 : NULL;
  toplu__latency_node_costs(&pl->lm, &pl->p1, p2, b, pl->node_flops, pl->node_bytes);
  int io_copies = p->double_buffer ? 2 : 1;
  double io = (p->io_fixed + p->io_per_sample * (double)b) / io_copies;
  int tensor = p->precision != TOPLU_PRECISION_FP32 && !p->precision_hypothetical;
  int autocast = (p->precision == TOPLU_PRECISION_FP16 || p->precision == TOPLU_PRECISION_BF16) &&
                 !p->precision_hypothetical;
  double ch = pl->cal_host > 0 ? pl->cal_host : 1, cg = pl->cal_gpu > 0 ? pl->cal_gpu : 1;
  toplu__gpu_device_factor_t df = {NULL, p->device_factor * cg, p->device_memory_factor * cg,
                                   p->device_host_factor * ch};
  double rows = pl->heavy + pl->light > 0 ? lp->launches / (pl->heavy + pl->light) : 1; /* > 1: row by row */
  return toplu__gpu_profile_latency(pl->gpu, &df, p->peak_flops, p->bandwidth, tensor, autocast, pl->node_flops,
                                    pl->node_bytes, pl->p1.n_steps, pl->heavy * rows, pl->light * rows, io, gp) +
         (ch - 1) * pl->gpu->fit.batch_us * 1e-6;
}

/* One GPU measurement (b, measured_s): fit the side of the profile that dominates at b, the host's (its
 * per-node host time and per-batch cost, scaled together) when they exceed the GPU's node times, else the
 * GPU's (its achieved compute and memory rates), so that the prediction at b is the measurement and the other
 * side stays as fitted to the published tables.  Scaling the whole curve instead carried a batch-1
 * measurement, where the framework's host time decides, onto the plateau, where the GPU does: on the H200
 * measured here (bench/gpu/h200_check.py --calibrated) that put the plateau 24-187% high, against -51 to +21%
 * uncalibrated.  Returns 0 and sets pl->cal_host or pl->cal_gpu, -1 when no factor in [1e-3, 1e3] meets the
 * measurement (the caller then scales the whole curve). */
static int calibrate_one_gpu(planner_t *pl, int64_t b, double measured_s, const char **side, double *factor) {
  toplu__latency_parts_t parts;
  toplu__gpu_parts_t gp;
  toplu__latency_parts(&pl->lm, &pl->p1, pl->p->batchable ? &pl->p2 : NULL, b, &parts);
  pl->cal_host = pl->cal_gpu = 1;
  gpu_latency(pl, b, &parts, &gp);
  int host = gp.host + pl->gpu->fit.batch_us * 1e-6 > gp.gpu;
  double *f = host ? &pl->cal_host : &pl->cal_gpu;
  /* latency grows with cal_host and falls with cal_gpu: bisect log f */
  double lo = log(1e-3), hi = log(1e3);
  for (int it = 0; it < 200 && hi - lo > 1e-12; it++) {
    *f = exp(0.5 * (lo + hi));
    double l = gpu_latency(pl, b, &parts, NULL);
    if ((l < measured_s) == host) lo = log(*f);
    else hi = log(*f);
  }
  *f = exp(0.5 * (lo + hi));
  if (fabs(gpu_latency(pl, b, &parts, NULL) / measured_s - 1) > 1e-6) {
    pl->cal_host = pl->cal_gpu = 1;
    return -1;
  }
  *side = host ? "host" : "GPU";
  *factor = host ? *f : 1 / *f;
  return 0;
}

/* Predicted latency (s) at b; parts optional.  With a GPU runtime profile the
 * parts' compute_s and memory_s are the profile's (calibration applied). */
static double latency_at(const planner_t *pl, int64_t b, toplu__latency_parts_t *parts) {
  toplu__latency_parts_t tmp;
  if (!parts) parts = &tmp;
  toplu__latency_parts(&pl->lm, &pl->p1, pl->p->batchable ? &pl->p2 : NULL, b, parts);
  if (!pl->gpu) return toplu__latency_seconds(&pl->lm, parts);
  toplu__gpu_parts_t gp;
  double s = gpu_latency(pl, b, parts, &gp);
  double a = pl->lm.efficiency, c = pl->lm.intercept_s > 0 ? pl->lm.intercept_s : 0;
  parts->compute_s = a * gp.compute;
  parts->memory_s = a * gp.memory;
  parts->roofline_s = parts->compute_s + parts->memory_s;
  return a * s + c;
}

/* Parse a CSV of measurements (batch,latency_ms per line; '#' comments, blank
 * lines and one header line allowed; further columns ignored; a header that
 * names batch_size/batch and latency_ms/p50_ms/ms columns picks those, and a
 * status column skips rows not "ok", so toplu tune's tune.csv reads as is)
 * into pl->cal_batch / pl->cal_ms. */
/* Field k (0-based) of a comma-separated line into out, blanks trimmed; 0 when the line has fewer. */
static int csv_field(const char *line, int k, char *out, size_t size) {
  const char *p = line;
  for (int i = 0; i < k; i++) {
    p = strchr(p, ',');
    if (!p) return 0;
    p++;
  }
  while (*p == ' ' || *p == '\t') p++;
  size_t n = strcspn(p, ",");
  while (n > 0 && (p[n - 1] == ' ' || p[n - 1] == '\t')) n--;
  snprintf(out, size, "%.*s", (int)(n < size ? n : size - 1), p);
  return 1;
}

/* Column of the first of names in a header line, or -1. */
static int csv_column(const char *header, const char *const *names) {
  char f[64];
  for (int k = 0; csv_field(header, k, f, sizeof f); k++)
    for (int j = 0; names[j]; j++)
      if (!strcasecmp(f, names[j])) return k;
  return -1;
}

/* One measurement appended to pl->cal_batch / pl->cal_ms (*cap: their room, grown by doubling). */
static toplu_status_t cal_add(planner_t *pl, int *cap, int64_t b, double ms, toplu_error_t *err) {
  if (pl->cal_n == *cap) {
    int ncap = *cap ? 2 * *cap : 16;
    int64_t *nb = realloc(pl->cal_batch, (size_t)ncap * sizeof *nb);
    if (nb) pl->cal_batch = nb;
    double *nm = realloc(pl->cal_ms, (size_t)ncap * sizeof *nm);
    if (nm) pl->cal_ms = nm;
    if (!nb || !nm) return toplu__errorf(err, TOPLU_ERR_OUT_OF_MEMORY, "out of memory");
    *cap = ncap;
  }
  pl->cal_batch[pl->cal_n] = b;
  pl->cal_ms[pl->cal_n] = ms;
  pl->cal_n++;
  return TOPLU_OK;
}

static toplu_status_t calibration_csv(planner_t *pl, const char *path, const char *data, size_t data_len,
                                      toplu_error_t *err) {
  char line[4096];
  int lineno = 0, cap = 0, seen_data = 0;
  /* A header naming the columns picks them (toplu tune's tune.csv: batch_size, status, p50_ms, ...; rows
   * whose status is not ok are skipped); without one, BATCH,LATENCY_MS are the first two fields. */
  static const char *const batch_names[] = {"batch_size", "batch", NULL};
  /* latency columns by unit: milliseconds (toplu's), microseconds, seconds; the factor to milliseconds */
  static const char *const ms_names[] = {"latency_ms", "p50_ms", "ms", "mean_ms", "avg_ms", "latency_msec", NULL};
  static const char *const us_names[] = {"latency_us", "p50_us", "us", "mean_us", "avg_us", "latency_usec", NULL};
  static const char *const s_names[] = {"latency_s", "p50_s", "s", "seconds", "latency_sec", "sec", NULL};
  static const char *const status_names[] = {"status", NULL};
  int bcol = -1, mcol = -1, scol = -1;
  double to_ms = 1;
  size_t pos = 0;
  while (pos < data_len) { /* one line of the file read whole (calibration_read) */
    const char *nl = memchr(data + pos, '\n', data_len - pos);
    size_t len = nl ? (size_t)(nl - (data + pos)) : data_len - pos;
    lineno++;
    if (len > sizeof line - 2)
      return toplu__errorf(err, TOPLU_ERR_PARSE, "calibration file %s: line %d: longer than %d bytes", path, lineno,
                          (int)sizeof line - 2);
    memcpy(line, data + pos, len);
    line[len] = '\0';
    pos += len + (nl ? 1 : 0);
    len = strlen(line); /* a NUL byte ends the line */
    while (len > 0 && (line[len - 1] == '\r' || line[len - 1] == ' ' || line[len - 1] == '\t')) line[--len] = '\0';
    char *q = line;
    while (*q == ' ' || *q == '\t') q++;
    if (!*q || *q == '#') continue;
    if (bcol >= 0 && mcol >= 0) { /* the header's columns */
      char fb[64], fm[64], fs[64];
      if (scol >= 0 && csv_field(q, scol, fs, sizeof fs) && strcasecmp(fs, "ok")) continue; /* oom, over budget */
      char *e1 = NULL, *e2 = NULL;
      fb[0] = fm[0] = '\0';
      long long b = csv_field(q, bcol, fb, sizeof fb) ? strtoll(fb, &e1, 10) : 0;
      double ms = csv_field(q, mcol, fm, sizeof fm) ? strtod(fm, &e2) : 0;
      int b_ok = fb[0] && e1 && !*e1 && b >= 1 && b <= (INT64_C(1) << 20);
      if (!b_ok || !fm[0] || !e2 || *e2 || !(ms > 0) || !isfinite(ms))
        return toplu__errorf(err, TOPLU_ERR_PARSE,
                            "calibration file %s: line %d: column %d (%s) is '%s': expected %s; got '%.80s'", path,
                            lineno, b_ok ? mcol + 1 : bcol + 1, b_ok ? "the latency" : "the batch size",
                            b_ok ? fm : fb,
                            b_ok ? (to_ms == 1 ? "a latency in milliseconds > 0"
                                    : to_ms < 1 ? "a latency in microseconds > 0"
                                                : "a latency in seconds > 0")
                                 : "a whole batch size from 1 to 1048576",
                            q);
      toplu_status_t st = cal_add(pl, &cap, b, ms * to_ms, err);
      if (st) return st;
      continue;
    }
    /* the first two fields */
    char *comma = strchr(q, ',');
    char *end1, *end2;
    long long b = comma ? strtoll(q, &end1, 10) : 0;
    double ms = comma ? strtod(comma + 1, &end2) : 0;
    int ok = comma != NULL;
    if (ok) {
      while (end1 < comma && (*end1 == ' ' || *end1 == '\t')) end1++;
      while (*end2 == ' ' || *end2 == '\t') end2++;
      ok = end1 == comma && end1 != q && end2 != comma + 1 && (*end2 == '\0' || *end2 == ',') && b >= 1 &&
           b <= (INT64_C(1) << 20) && ms > 0 && isfinite(ms);
    }
    if (!ok) {
      if (!seen_data && !isdigit((unsigned char)*q) && *q != '-' && *q != '+' && *q != '.') { /* a header */
        seen_data = 1;
        bcol = csv_column(q, batch_names), scol = csv_column(q, status_names);
        if ((mcol = csv_column(q, ms_names)) >= 0) to_ms = 1;
        else if ((mcol = csv_column(q, us_names)) >= 0) to_ms = 1e-3;
        else if ((mcol = csv_column(q, s_names)) >= 0) to_ms = 1e3;
        if (bcol >= 0 && mcol < 0) /* a latency in a unit not named, or not known: not guessed (latency_s was read
                                    * as milliseconds: a fresh user's finding of 2026-12-06) */
          return toplu__errorf(err, TOPLU_ERR_PARSE,
                              "calibration file %s: line %d: the header names a batch column but no latency column "
                              "with a unit toplu knows (latency_ms, p50_ms or ms; latency_us, p50_us or us; "
                              "latency_s, p50_s or s), got '%.80s'",
                              path, lineno, q);
        if (bcol < 0 || mcol < 0) {
          bcol = mcol = scol = -1; /* unnamed: the first two fields, in milliseconds */
          to_ms = 1;
          note(pl->p, "calibration file %s: its header '%.80s' names no batch column: columns 1 and 2 are read as "
               "the batch size and its latency in milliseconds", path, q);
        }
        continue;
      }
      return toplu__errorf(err, TOPLU_ERR_PARSE,
                          "calibration file %s: line %d: expected BATCH,LATENCY_MS (a whole batch size from 1 to %d "
                          "and a latency in milliseconds > 0), got '%.80s'",
                          path, lineno, 1 << 20, q);
    }
    seen_data = 1;
    toplu_status_t st = cal_add(pl, &cap, b, ms, err);
    if (st) return st;
  }
  if (pl->cal_n == 0)
    return toplu__errorf(err, TOPLU_ERR_PARSE,
                        "calibration file %s: no measurements (expected lines of BATCH,LATENCY_MS, e.g. 8,3.2)", path);
  note(pl->p, "%s is a CSV of %d measurement%s: it records no model identity, so it was not checked against this model",
       path, pl->cal_n, pl->cal_n == 1 ? "" : "s");
  return TOPLU_OK;
}

/* The largest calibration file read: a tune.json of thousands of results is a few MiB. */
#define CALIBRATION_MAX_BYTES ((off_t)64 << 20)

/* Read the calibration file whole, once, into *data (NUL-terminated, malloc'ed).  Only a regular file: a
 * FIFO without a writer would block the open, and a pipe can be read only once (it had been read twice,
 * to sniff JSON and then to parse, and lost its first line). */
static toplu_status_t calibration_read(const char *path, char **data, size_t *len, toplu_error_t *err) {
  *data = NULL;
  *len = 0;
  int fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC); /* O_NONBLOCK: a FIFO must not wait for a writer */
  if (fd < 0) return toplu__errorf(err, TOPLU_ERR_IO, "calibration file %s: %s", path, strerror(errno));
  struct stat sb;
  if (fstat(fd, &sb) != 0) {
    int e = errno;
    close(fd);
    return toplu__errorf(err, TOPLU_ERR_IO, "calibration file %s: %s", path, strerror(e));
  }
  if (S_ISDIR(sb.st_mode)) {
    close(fd);
    return toplu__errorf(err, TOPLU_ERR_IO, "calibration file %s: is a directory (give the tune.json in it)", path);
  }
  if (!S_ISREG(sb.st_mode)) {
    close(fd);
    return toplu__errorf(err, TOPLU_ERR_INVALID_ARGUMENT,
                        "calibration file %s is %s; toplu reads only regular files (a pipe or process substitution "
                        "can be read only once, and a FIFO blocks): write the measurements to a file and give that",
                        path, toplu__file_kind((unsigned)sb.st_mode));
  }
  if (sb.st_size > CALIBRATION_MAX_BYTES) {
    close(fd);
    return toplu__errorf(err, TOPLU_ERR_INVALID_ARGUMENT,
                        "calibration file %s: %lld bytes, more than the %lld a tune result or a CSV of measurements "
                        "takes",
                        path, (long long)sb.st_size, (long long)CALIBRATION_MAX_BYTES);
  }
  char *buf = malloc((size_t)sb.st_size + 1);
  if (!buf) {
    close(fd);
    return toplu__errorf(err, TOPLU_ERR_OUT_OF_MEMORY, "calibration file %s: out of memory", path);
  }
  ssize_t got = toplu__pread_full(fd, buf, (size_t)sb.st_size, 0);
  int e = errno;
  close(fd);
  if (got < 0) {
    free(buf);
    return toplu__errorf(err, TOPLU_ERR_IO, "calibration file %s: %s", path, strerror(e));
  }
  buf[got] = '\0';
  *data = buf;
  *len = (size_t)got;
  return TOPLU_OK;
}

/* Read the measurements to calibrate from and check them before planning: a
 * tune.json (JSON with a "results" list, measured on this model, the model
 * identity tune records, at the same input shapes; *out: a new reference) or
 * a CSV of batch,latency_ms (any tool's; pl->cal_*).  The file is read once,
 * whole (calibration_read), and parsed from memory. */
static toplu_status_t calibration_load(planner_t *pl, const char *path, json_t **out, toplu_error_t *err) {
  toplu_batch_plan_t *p = pl->p;
  json_error_t je;
  *out = NULL;
  char *data;
  size_t len;
  toplu_status_t st = calibration_read(path, &data, &len, err);
  if (st) return st;
  size_t first = 0;
  while (first < len && (data[first] == ' ' || data[first] == '\t' || data[first] == '\r' || data[first] == '\n'))
    first++;
  if (first == len) {
    free(data);
    return toplu__errorf(err, TOPLU_ERR_PARSE,
                        "calibration file %s is empty (expected a tune result, tune.json, or a CSV of "
                        "BATCH,LATENCY_MS lines)",
                        path);
  }
  if (data[first] != '{') { /* not JSON: a CSV of batch,latency_ms */
    st = calibration_csv(pl, path, data, len, err);
    free(data);
    return st;
  }
  json_t *root = json_loadb(data, len, 0, &je);
  free(data);
  if (!root) {
    if (je.line > 0)
      return toplu__errorf(err, TOPLU_ERR_PARSE, "calibration file %s: not JSON (line %d: %s)", path, je.line, je.text);
    return toplu__errorf(err, TOPLU_ERR_PARSE, "calibration file %s: not JSON (%s)", path, je.text);
  }
  /* A model with no file of its own (made from source_model: the int8 model quantized in memory) was
   * measured by no tune: a tune result is of the file it measured. */
  if (pl->o->source_model) {
    int checked = 0;
    toplu_error_t ierr;
    toplu_status_t ist = toplu__model_identity_check(root, path, pl->o->source_model, &checked, &ierr);
    json_decref(root);
    if (ist == TOPLU_OK && checked)
      return toplu__errorf(err, TOPLU_ERR_INVALID_ARGUMENT,
                          "calibration file %s measured %s as it is (float), but this plan is of the %s model "
                          "quantized from it in memory: its integer kernels run at other speeds, so the float "
                          "latencies would calibrate the wrong model; quantize the model to a file, tune that file "
                          "and plan it with its tune.json, or give a CSV of BATCH,LATENCY_MS measured on the "
                          "quantized model",
                          path, pl->o->source_model, toplu_precision_name(pl->o->precision));
    return toplu__errorf(err, TOPLU_ERR_INVALID_ARGUMENT,
                        "calibration file %s: this plan is of %s quantized in memory (%s), which no tune result "
                        "measured (a tune result is checked against the file it measured): plan the quantized file "
                        "that was tuned with it, or give a CSV of BATCH,LATENCY_MS measured on the quantized model",
                        path, pl->o->source_model, toplu_precision_name(pl->o->precision));
  }
  /* The measurements must be of this model, at these input shapes. */
  int checked = 0;
  st = toplu__model_identity_check(root, path, p->model, &checked, err);
  if (st) {
    json_decref(root);
    return toplu__error_prefix(err, "calibration file");
  }
  const char *their_inputs = json_string_value(json_object_get(json_object_get(root, "model_identity"), "inputs"));
  if (!their_inputs) their_inputs = json_string_value(json_object_get(root, "inputs"));
  if (their_inputs && *their_inputs && strcmp(their_inputs, p->inputs)) {
    st = toplu__errorf(err, TOPLU_ERR_INVALID_ARGUMENT,
                      "calibration file %s was measured with inputs %s, this plan has %s: latency depends on the "
                      "input size, so plan the measured size (shapes: NAME=DIMS) or tune at this one",
                      path, their_inputs, p->inputs);
    json_decref(root);
    return st;
  }
  if (!json_is_array(json_object_get(root, "results"))) {
    json_decref(root);
    return toplu__errorf(err, TOPLU_ERR_PARSE, "calibration file %s: no \"results\" list (expected a tune result, tune.json)",
                        path);
  }
  if (!checked)
    note(p, "%s records no model identity (made by an older toplu or by hand): it was not checked against this "
            "model",
         path);
  *out = root;
  return TOPLU_OK;
}

/* How far the calibrated model misses the k measurements it was fitted to (batch bs[i], m[i] seconds), in a
 * note; and a latency that falls as the batch grows.  A fit of a scale and an intercept cannot follow
 * measurements of another shape (another unit, another model or device), and it said only its formula: a fresh
 * user's CSV of 0.76 ms at batch 1 and 0.5 at 256 gave 0.0134 ms at batch 1 and 493,000 images/s on an A100
 * (2026-12-06). */
static void calibration_misses(planner_t *pl, const char *path, const int64_t *bs, const double *m, int k) {
  double worst = 0, fw = 0;
  int wi = -1;
  for (int i = 0; i < k; i++) {
    double f = latency_at(pl, bs[i], NULL), miss = m[i] > 0 ? f / m[i] - 1 : 0;
    if (wi < 0 || fabs(miss) > fabs(worst)) worst = miss, wi = i, fw = f;
  }
  if (wi < 0) return;
  if (fabs(worst) > 0.25)
    note(pl->p, "the calibrated model misses the measurements by up to %+.0f%% (batch %lld: %.4g ms measured, %.4g "
         "fitted): check their unit (ms per batch), model and device (%s)",
         100 * worst, (long long)bs[wi], m[wi] * 1e3, fw * 1e3, path);
  else if (k > 1)
    note(pl->p, "the calibrated model meets the %d measurements within %.0f%% (batch %lld: %.4g ms measured, %.4g "
         "fitted)", k, 100 * fabs(worst), (long long)bs[wi], m[wi] * 1e3, fw * 1e3);
  for (int i = 0; i < k; i++)
    for (int j = 0; j < k; j++)
      if (bs[j] > bs[i] && m[j] < 0.9 * m[i]) {
        note(pl->p, "the calibration's latency falls as the batch grows (batch %lld: %.4g ms, batch %lld: %.4g ms): "
             "per-sample times, or another model? (%s)",
             (long long)bs[i], m[i] * 1e3, (long long)bs[j], m[j] * 1e3, path);
        return;
      }
}

/* Calibrate the latency model from the measurements calibration_load read
 * (root: a tune.json; NULL: the CSV's).  Without a GPU runtime profile
 * (the CPU, "ideal") the fit is measured = efficiency x roofline + intercept;
 * with one, measured = scale x the profile's latency + intercept from two
 * or more measurements; from one, the side of the profile that dominates at
 * its batch is fitted alone (calibrate_one_gpu). */
static toplu_status_t calibrate(planner_t *pl, json_t *root, const char *path, toplu_error_t *err) {
  toplu_batch_plan_t *p = pl->p;
  json_t *results = root ? json_object_get(root, "results") : NULL;
  size_t n = root ? json_array_size(results) : (size_t)pl->cal_n;
  double *r = calloc(n + 1, sizeof *r), *m = calloc(n + 1, sizeof *m);
  int64_t *bs = calloc(n + 1, sizeof *bs);
  if (!r || !m || !bs) {
    free(r);
    free(m);
    free(bs);
    return toplu__errorf(err, TOPLU_ERR_OUT_OF_MEMORY, "out of memory");
  }
  int k = 0;
  int64_t one_b = 1;
  double launches = 0;
  for (size_t i = 0; i < n; i++) {
    int64_t b;
    double ms;
    if (root) {
      json_t *x = json_array_get(results, i);
      const char *status = json_string_value(json_object_get(x, "status"));
      json_t *jb = json_object_get(x, "batch_size"), *jp = json_object_get(x, "p50_ms");
      if (!status || strcmp(status, "ok") || !json_is_integer(jb) || !json_is_number(jp)) continue;
      b = (int64_t)json_integer_value(jb);
      ms = json_number_value(jp);
    } else {
      b = pl->cal_batch[i];
      ms = pl->cal_ms[i];
    }
    if (b < 1 || !(ms > 0)) continue;
    toplu__latency_parts_t parts;
    toplu__latency_parts(&pl->lm, &pl->p1, p->batchable ? &pl->p2 : NULL, b, &parts);
    r[k] = pl->gpu ? gpu_latency(pl, b, &parts, NULL) : parts.roofline_s;
    m[k] = ms / 1000.0;
    bs[k] = b;
    one_b = b;
    launches = parts.launches;
    k++;
  }
  /* one batch size measured several times (a CSV of repeats): their mean is one measurement (the fit through
   * points at one size was a scale and an intercept from no slope) */
  int distinct = 0;
  double one_mean = 0;
  for (int i = 0; i < k; i++) {
    int seen = 0;
    for (int j = 0; j < i && !seen; j++) seen = bs[j] == bs[i];
    distinct += !seen;
    one_mean += m[i] / k;
  }
  const char *dev = root ? json_string_value(json_object_get(root, "device")) : NULL;
  json_t *jt = root ? json_object_get(root, "threads") : NULL;
  double a = 1, c = 0;
  const char *side = NULL;
  double factor = 1;
  int ok;
  if (pl->gpu && distinct == 1 && calibrate_one_gpu(pl, one_b, one_mean, &side, &factor) == 0)
    ok = 1;
  else
    ok = k > 0 && toplu__latency_fit(r, m, k, pl->gpu ? 0 : launches * pl->lm.node_overhead_s, &a, &c) == 0;
  free(r);
  if (!ok) {
    free(m);
    free(bs);
    return toplu__errorf(err, TOPLU_ERR_INVALID_ARGUMENT,
                        root ? "calibration file %s: no usable measurements (results with status \"ok\" and p50_ms)"
                             : "calibration file %s: no usable measurements (no positive fit of the latencies)",
                        path);
  }
  pl->lm.efficiency = a;
  pl->lm.intercept_s = c;
  p->calibrated = 1;
  p->efficiency = a;
  if (side && k > 1)
    note(p, "latency calibrated from %d measurements of one batch size (their mean, %.4g ms at batch %lld): the %s "
         "profile's %s time decides there, so %s x %.3g meets it; the %s's stays as fitted (%s)",
         k, one_mean * 1e3, (long long)one_b, p->runtime, side, side, factor, strcmp(side, "host") ? "host" : "GPU",
         path);
  else if (side)
    note(p, "latency calibrated from 1 measurement in %s: at batch %lld the %s profile's %s time decides, so %s "
         "x %.3g meets it and the %s's stays as fitted (give a second batch size to scale the whole curve)",
         path, (long long)one_b, p->runtime, side, side, factor, strcmp(side, "host") ? "host" : "GPU");
  else if (pl->gpu)
    note(p, "latency calibrated from %d measurement%s in %s: measured = %.3g x the %s profile + %.3g ms per batch", k,
         k == 1 ? "" : "s", path, a, p->runtime, c * 1e3);
  else
    note(p, "latency calibrated from %d measurement%s in %s: measured = %.3g x roofline + %.3g ms per batch", k,
         k == 1 ? "" : "s", path, a, c * 1e3);
  calibration_misses(pl, path, bs, m, k);
  free(m);
  free(bs);
  if (dev && strcmp(dev, p->device.name))
    note(p, "the calibration was measured on '%s', not '%s': its efficiency may not carry over", dev, p->device.name);
  if (json_is_integer(jt) && p->device.kind == TOPLU_DEVICE_CPU && json_integer_value(jt) != p->device.threads)
    note(p, "the calibration ran with %lld thread%s, this plan uses %d", (long long)json_integer_value(jt),
         json_integer_value(jt) == 1 ? "" : "s",
         p->device.threads);
  return TOPLU_OK;
}

/* A GPU prediction past the device's dense peak for the precision (throughput x FLOPs per sample): say so, once,
 * at the row that goes furthest.  A fitted share times a device factor can pass 1 where no table of the device at
 * that precision is in the fit (ResNet-50 fp32 under tensorrt on an A100: 137% of 19.5 TFLOP/s, a fresh user's
 * finding of 2026-12-06); a calibration from measurements in the wrong unit goes far past it. */
static void peak_note(toplu_batch_plan_t *p) {
  if (p->device.kind == TOPLU_DEVICE_CPU || p->peak_flops <= 0 || p->flops_per_sample <= 0) return;
  double worst = 0;
  int64_t at = 0;
  for (int i = 0; i < p->n_rows; i++) {
    double share = p->rows[i].throughput * (double)p->flops_per_sample / p->peak_flops;
    if (share > worst) worst = share, at = p->rows[i].batch_size;
  }
  if (worst <= 1.0) return;
  note(p, "batch %lld's prediction needs %.0f%% of the %s's dense %s peak (%.1f TFLOP/s): %s", (long long)at,
       100 * worst, p->device.name, toplu_precision_name(p->precision), p->peak_flops / 1e12,
       p->calibrated ? "the calibration implies more than the device can do (check its unit, model and device)"
       : p->precision == TOPLU_PRECISION_FP32
           ? "extrapolated (no fp32 table of this device; TensorRT and cuDNN run fp32 convolutions on TF32 from "
             "Ampere on): an upper bound"
           : "extrapolated past the fitted tables: an upper bound");
}

/* Fill one row at batch b from terms t. */
static void fill_row(planner_t *pl, int64_t b, const toplu__mem_terms_t *t, int exact, toplu_plan_row_t *row) {
  const toplu_batch_plan_t *p = pl->p;
  memset(row, 0, sizeof *row);
  row->batch_size = b;
  row->weights_bytes = (uint64_t)llround(t->weights);
  row->activation_bytes = (uint64_t)llround(t->activation > 0 ? t->activation : 0);
  row->workspace_bytes = (uint64_t)llround(t->workspace > 0 ? t->workspace : 0);
  row->io_bytes = (uint64_t)llround(t->io > 0 ? t->io : 0);
  row->overhead_bytes = (uint64_t)llround(t->overhead > 0 ? t->overhead : 0);
  row->total_bytes =
      row->weights_bytes + row->activation_bytes + row->workspace_bytes + row->io_bytes + row->overhead_bytes;
  toplu__latency_parts_t parts;
  double s = latency_at(pl, b, &parts);
  row->latency_ms = s * 1e3;
  row->throughput = s > 0 ? (double)b / s : 0;
  double eff = pl->gpu ? 1 : pl->lm.efficiency; /* a profile's parts come calibrated */
  row->compute_ms = eff * parts.compute_s * 1e3;
  row->memory_ms = eff * parts.memory_s * 1e3;
  row->overhead_ms = row->latency_ms - row->compute_ms - row->memory_ms;
  row->latency_lo_ms = row->latency_ms * p->latency_band[0];
  row->latency_hi_ms = row->latency_ms * p->latency_band[1];
  row->throughput_lo = row->throughput * p->throughput_band[0];
  row->throughput_hi = row->throughput * p->throughput_band[1];
  row->fits = row->total_bytes <= p->budget_bytes;
  row->within_latency = p->latency_budget_ms <= 0 || row->latency_ms <= p->latency_budget_ms;
  row->exact = exact;
}

/* Add b to a sorted unique list. */
static void add_batch(int64_t *list, int *n, int cap, int64_t b) {
  if (b < 1) return;
  for (int i = 0; i < *n; i++)
    if (list[i] == b) return;
  if (*n >= cap) return;
  int i = *n;
  while (i > 0 && list[i - 1] > b) {
    list[i] = list[i - 1];
    i--;
  }
  list[i] = b;
  (*n)++;
}

/* Recommended batch (most predicted throughput within both budgets) and knee. */
static toplu_status_t choose(planner_t *pl, toplu_error_t *err) {
  toplu_batch_plan_t *p = pl->p;
  int64_t bmax = p->max_batch_size;
  p->recommended_batch_size = p->knee_batch_size = 0;
  if (bmax < 1) return TOPLU_OK;
  /* Powers of two and 1.5 x powers of two (two per bit of bmax), bmax, the
   * rows and the latency budget's largest B: room for every candidate. */
  int cap = 2 * 64 + p->n_rows + 2;
  int64_t *cand = malloc((size_t)cap * sizeof *cand);
  if (!cand) return toplu__errorf(err, TOPLU_ERR_OUT_OF_MEMORY, "out of memory");
  int n = 0;
  for (int64_t b = 1; b <= bmax; b *= 2) {
    add_batch(cand, &n, cap, b);
    if (3 * b / 2 <= bmax && b >= 2) add_batch(cand, &n, cap, 3 * b / 2);
  }
  add_batch(cand, &n, cap, bmax);
  for (int i = 0; i < p->n_rows; i++)
    if (p->rows[i].batch_size <= bmax) add_batch(cand, &n, cap, p->rows[i].batch_size);
  if (p->latency_budget_ms > 0) { /* the largest B within the latency budget */
    int64_t lo = 1, hi = bmax;
    if (latency_at(pl, hi, NULL) * 1e3 <= p->latency_budget_ms) lo = hi;
    while (hi - lo > 1) {
      int64_t mid = lo + (hi - lo) / 2;
      if (latency_at(pl, mid, NULL) * 1e3 <= p->latency_budget_ms) lo = mid;
      else hi = mid;
    }
    add_batch(cand, &n, cap, lo);
  }
  double best = 0;
  for (int i = 0; i < n; i++) {
    double s = latency_at(pl, cand[i], NULL);
    if (p->latency_budget_ms > 0 && s * 1e3 > p->latency_budget_ms) continue;
    double thr = s > 0 ? (double)cand[i] / s : 0;
    if (thr > best) best = thr;
  }
  /* Candidates are sorted: the first within 1% (recommended) and 5% (knee) of
   * the best. */
  p->knee_lo = p->knee_hi = 0;
  for (int i = 0; i < n && best > 0; i++) {
    double s = latency_at(pl, cand[i], NULL);
    if (p->latency_budget_ms > 0 && s * 1e3 > p->latency_budget_ms) continue;
    double thr = (double)cand[i] / s;
    if (!p->knee_batch_size && thr >= 0.95 * best) p->knee_batch_size = cand[i];
    if (!p->recommended_batch_size && thr >= RECOMMEND_WITHIN * best) p->recommended_batch_size = cand[i];
  }
  /* The knee range: the smallest and largest candidate (within the latency
   * budget) in [knee x knee_factor[0], knee x knee_factor[1]] or with a
   * predicted throughput in [knee_share[0], knee_share[1]] x the best; the knee
   * itself is one, so lo <= knee <= hi. */
  if (p->knee_batch_size) {
    double klo = (double)p->knee_batch_size * (p->knee_factor[0] > 0 && p->knee_factor[0] < 1 ? p->knee_factor[0] : 1);
    double khi = (double)p->knee_batch_size * (p->knee_factor[1] > 1 ? p->knee_factor[1] : 1);
    int shares = p->knee_share[0] > 0 && p->knee_share[0] < p->knee_share[1];
    p->knee_lo = p->knee_hi = p->knee_batch_size;
    for (int i = 0; i < n; i++) {
      double s = latency_at(pl, cand[i], NULL);
      if (p->latency_budget_ms > 0 && s * 1e3 > p->latency_budget_ms) continue;
      double share = s > 0 ? (double)cand[i] / s / best : 0;
      int by_factor = (double)cand[i] >= klo * (1 - 1e-9) && (double)cand[i] <= khi * (1 + 1e-9);
      int by_share = shares && share >= p->knee_share[0] && share <= p->knee_share[1];
      if (!by_factor && !by_share) continue;
      if (cand[i] < p->knee_lo) p->knee_lo = cand[i];
      if (cand[i] > p->knee_hi) p->knee_hi = cand[i];
    }
  }
  free(cand);
  return TOPLU_OK;
}

/* Free what one toplu_plan_model call holds (not the result). */
static void planner_free(planner_t *pl) {
  json_decref(pl->calibration);
  free(pl->node_flops);
  free(pl->node_bytes);
  free(pl->cal_batch);
  free(pl->cal_ms);
  toplu__plan_point_free(&pl->p1);
  toplu__plan_point_free(&pl->p2);
  toplu_session_destroy(pl->session);
  toplu_allocator_destroy(pl->alloc);
  toplu__batch_shapes_free(&pl->shapes);
}

/* Human bytes for messages. */
static const char *gib(double bytes, char *buf, size_t size) { return toplu__fmt_bytes(bytes, buf, size); }

/* Sharding: how many devices the weights need; error when more than given. */
static toplu_status_t plan_sharding(planner_t *pl, toplu_error_t *err) {
  toplu_batch_plan_t *p = pl->p;
  toplu__mem_terms_t t1;
  p->shards = 1;
  law_terms(pl, 1, &t1);
  double rest = t1.activation + t1.workspace + t1.io + t1.overhead, budget = (double)p->budget_bytes;
  char a[32], b[32], c[32], d[32];
  if (t1.weights + rest <= budget) {
    p->devices_needed = 1;
    return TOPLU_OK;
  }
  if (rest >= budget)
    return toplu__errorf(err, TOPLU_ERR_INVALID_ARGUMENT,
                        "memory too small: %s (mem_fraction %.2f x capacity %s) does not hold even batch 1's "
                        "activations, workspace, I/O and runtime overhead (%s), before the weights (%s)",
                        gib(budget, a, sizeof a), p->mem_fraction, gib((double)p->capacity_bytes, b, sizeof b),
                        gib(rest, c, sizeof c), gib(t1.weights, d, sizeof d));
  int need = (int)ceil(t1.weights / (budget - rest));
  while (need > 1 && t1.weights / (need - 1) + rest <= budget) need--;
  while (t1.weights / need + rest > budget) need++;
  p->devices_needed = need;
  if (need > p->devices)
    return toplu__errorf(err, TOPLU_ERR_INVALID_ARGUMENT,
                        "memory below the weights: %s of weights and %s for batch 1 do not fit in %s (mem_fraction "
                        "%.2f x %s) on one device; sharded, they fit on %d devices (devices = %d)",
                        gib(t1.weights, a, sizeof a), gib(rest, b, sizeof b), gib(budget, c, sizeof c), p->mem_fraction,
                        gib((double)p->capacity_bytes, d, sizeof d), need, need);
  p->shards = need;
  return TOPLU_OK;
}

/* Batch 1's inputs (x scale) within mem_fraction x cap; TOPLU_ERR_INVALID_ARGUMENT "memory too small ..." when not. */
static toplu_status_t inputs_fit(const toplu__batch_shapes_t *sh, uint64_t cap, double mem_fraction, double scale,
                                 toplu_error_t *err) {
  double budget = floor(mem_fraction * (double)cap);
  double in1 = (double)toplu__batch_shapes_input_bytes(sh, 1) * scale;
  char a[32], b[32], c[32];
  if (cap > 0 && in1 >= budget)
    return toplu__errorf(err, TOPLU_ERR_INVALID_ARGUMENT,
                        "memory too small: %s (mem_fraction %.2f x capacity %s) does not hold even batch 1's inputs "
                        "(%s for %.300s)",
                        gib(budget, a, sizeof a), mem_fraction, gib((double)cap, b, sizeof b), gib(in1, c, sizeof c),
                        sh->desc);
  return TOPLU_OK;
}

toplu_status_t toplu_plan_check_inputs(const toplu_model_t *m, const toplu_planner_options_t *o, toplu_error_t *err) {
  toplu_error_clear(err);
  toplu_planner_options_t defaults;
  if (!o) {
    toplu_planner_options_init(&defaults);
    o = &defaults;
  }
  if (!m) return toplu__errorf(err, TOPLU_ERR_INVALID_ARGUMENT, "toplu_plan_check_inputs: NULL model");
  toplu_status_t st = check_options(o, err);
  if (st) return st;
  toplu_device_info_t dev;
  if ((st = toplu_device_lookup(o->device, o->threads, &dev, err))) return st;
  uint64_t cap = o->memory_bytes ? o->memory_bytes : dev.memory_bytes;
  const toplu_shape_profiles_t *sp = o->profiles;
  int n = sp && sp->n_profiles > 0 ? sp->n_profiles : 1;
  for (int k = 0; k < n && !st; k++) {
    toplu__batch_shapes_t sh;
    memset(&sh, 0, sizeof sh);
    if (sp && sp->n_profiles > 0)
      st = toplu__batch_shapes_init(m, sp->shapes + (size_t)k * (size_t)sp->n_shapes, sp->n_shapes, &sh, err);
    else
      st = toplu__batch_shapes_init(m, o->shapes, o->n_shapes, &sh, err);
    if (!st) st = inputs_fit(&sh, cap, o->mem_fraction, 1.0, err);
    toplu__batch_shapes_free(&sh);
    if (st && n > 1) toplu__error_prefix(err, "profile %d of %d (%s)", k + 1, n, sp->labels[k]);
  }
  return st;
}

/* The GPU runtime profile (options.runtime): its figures into the plan. */
static toplu_status_t choose_runtime(planner_t *pl, toplu_error_t *err) {
  toplu_batch_plan_t *p = pl->p;
  const char *name = pl->o->runtime;
  if (p->device.kind != TOPLU_DEVICE_GPU) {
    if (name && strcasecmp(name, "ideal"))
      return toplu__errorf(err, TOPLU_ERR_INVALID_ARGUMENT,
                          "runtime '%s' applies to GPU devices: the CPU is planned from toplu's own engine", name);
    p->knee_factor[0] = p->knee_factor[1] = 1;
    p->knee_share[0] = p->knee_share[1] = 1;
    return TOPLU_OK;
  }
  p->runtime_default = name == NULL;
  if (!name) name = toplu__gpu_profile_default();
  const toplu__gpu_profile_t *g = toplu__gpu_profile_find(name);
  if (!g)
    return toplu__errorf(err, TOPLU_ERR_INVALID_ARGUMENT, "runtime: unknown runtime '%s' (one of: %s)", name,
                        toplu__gpu_profile_names());
  snprintf(p->runtime, sizeof p->runtime, "%s", g->name);
  snprintf(p->runtime_source, sizeof p->runtime_source, "%s", g->source);
  snprintf(p->runtime_memory_source, sizeof p->runtime_memory_source, "%s", g->memory_source);
  p->runtime_tables = g->fit.tables;
  if (!strcmp(g->name, "ideal")) { /* the bare roofline, as before profiles */
    pl->gpu = NULL;
    p->device_factor = p->device_memory_factor = p->device_host_factor = 1;
    p->device_factor_fitted = 1;
    p->knee_factor[0] = p->knee_factor[1] = 1;
    p->knee_share[0] = p->knee_share[1] = 1;
    return TOPLU_OK;
  }
  pl->gpu = g;
  p->runtime_ec[0] = g->fit.ec[0];
  p->runtime_ec[1] = g->fit.ec[1];
  p->runtime_em = g->fit.em;
  p->runtime_kernel_us = g->fit.kernel_us;
  p->runtime_host_us = g->fit.host_us;
  p->runtime_light_us = g->fit.light_us;
  p->runtime_ihalf = g->fit.ihalf;
  p->runtime_overlap_k = g->fit.overlap_k;
  p->runtime_batch_us = g->fit.batch_us;
  p->runtime_io_gbs = g->fit.io_gbs;
  p->runtime_autocast = g->fit.autocast;
  const toplu__gpu_device_factor_t *df = toplu__gpu_device_factor(p->device.name, &p->device_factor_fitted);
  p->device_factor = df->compute;
  p->device_memory_factor = df->memory;
  p->device_host_factor = df->host;
  p->has_band = 1;
  p->latency_band[0] = g->fit.lat_band[0];
  p->latency_band[1] = g->fit.lat_band[1];
  p->throughput_band[0] = g->fit.thr_band[0];
  p->throughput_band[1] = g->fit.thr_band[1];
  p->knee_factor[0] = g->fit.knee_factor[0];
  p->knee_factor[1] = g->fit.knee_factor[1];
  p->knee_share[0] = g->fit.knee_share[0];
  p->knee_share[1] = g->fit.knee_share[1];
  return TOPLU_OK;
}

toplu_status_t toplu_plan_model(const toplu_model_t *m, const toplu_planner_options_t *opts, toplu_batch_plan_t **out,
                                toplu_error_t *err) {
  toplu_error_clear(err);
  toplu_planner_options_t defaults;
  if (!opts) {
    toplu_planner_options_init(&defaults);
    opts = &defaults;
  }
  if (!m || !out) return toplu__errorf(err, TOPLU_ERR_INVALID_ARGUMENT, "toplu_plan_model: NULL argument");
  *out = NULL;
  toplu_status_t st = check_options(opts, err);
  if (st) return st;
  planner_t pl;
  memset(&pl, 0, sizeof pl);
  pl.o = opts;
  toplu_batch_plan_t *p = pl.p = calloc(1, sizeof *p);
  if (!p) return toplu__errorf(err, TOPLU_ERR_OUT_OF_MEMORY, "out of memory");
  snprintf(p->model, sizeof p->model, "%s", toplu_model_path(m));
  p->mem_fraction = opts->mem_fraction;
  p->devices = opts->devices;
  p->double_buffer = opts->double_buffer;
  p->latency_budget_ms = opts->latency_budget_ms;
  p->precision = opts->precision;

  if ((st = toplu_device_lookup(opts->device, opts->threads, &p->device, err))) goto fail;
  /* An int8 (QDQ or QOperator) model on the CPU is planned as toplu runs it, in int8, whatever the default
   * precision says: it was labelled "fp32" (a fresh user's finding of 2026-12-06) */
  if (p->device.kind == TOPLU_DEVICE_CPU && p->precision == TOPLU_PRECISION_FP32 && toplu_model_quantized_nodes(m) > 0)
    p->precision = TOPLU_PRECISION_INT8;
  int hyp = 0;
  p->peak_flops = toplu__device_peak(&p->device, p->precision, &hyp);
  /* An int8 model planned at int8: its plan holds the int8 weights and activations toplu runs, so nothing is
   * scaled (the time stays hypothetical where the device has no int8 rate: its fp32 peak is used). */
  const int int8_model = p->precision == TOPLU_PRECISION_INT8 && toplu_model_quantized_nodes(m) > 0;
  if (p->device.kind == TOPLU_DEVICE_CPU && p->device.probe_cpu_share > 0 && p->device.probe_cpu_share < 0.65)
    note(p, "the speed probe got %.0f%% of its %d thread%s' time: other work shared the cores, so its rates (%.3g "
            "GFLOP/s, %.3g GB/s) and the latencies from them follow that load; plan on idle cores, or measure "
            "with the tuner (toplu_tune_model)",
         100 * p->device.probe_cpu_share, p->device.threads, p->device.threads == 1 ? "" : "s",
         p->device.peak_flops[TOPLU_PRECISION_FP32] / 1e9, p->device.bandwidth / 1e9);
  if (p->device.kind == TOPLU_DEVICE_CPU) {
    /* toplu's own plan: its float steps at the fp32 rate, its integer steps (an int8 model's, whatever the
     * precision asked) at the CPU's int8 rate where toplu's int8 kernels run (toplu_device_lookup) */
    p->peak_flops = p->device.peak_flops[TOPLU_PRECISION_FP32];
    p->int8_peak_flops = p->device.peak_flops[TOPLU_PRECISION_INT8];
    hyp = int8_model ? p->int8_peak_flops <= 0 : p->precision != TOPLU_PRECISION_FP32;
  }
  p->precision_hypothetical = hyp;
  toplu__precision_scales(p->precision, &p->precision_weight_scale, &p->precision_activation_scale);
  if (int8_model) p->precision_weight_scale = p->precision_activation_scale = 1;
  p->bandwidth = p->device.bandwidth;
  p->node_overhead_us = p->device.node_overhead_us;
  p->efficiency = 1;
  p->latency_band[0] = p->latency_band[1] = p->throughput_band[0] = p->throughput_band[1] = 1;
  if ((st = choose_runtime(&pl, err))) goto fail;

  if ((st = toplu__batch_shapes_init(m, opts->shapes, opts->n_shapes, &pl.shapes, err))) goto fail;
  snprintf(p->inputs, sizeof p->inputs, "%s", pl.shapes.desc);
  if (opts->calibration && (st = calibration_load(&pl, opts->calibration, &pl.calibration, err))) goto fail;

  if ((st = toplu_allocator_create(0, &pl.alloc))) {
    toplu__errorf(err, st, "out of memory");
    goto fail;
  }
  toplu_session_options_t so;
  toplu_session_options_init(&so);
  so.allocator = pl.alloc;
  so.threads = p->device.kind == TOPLU_DEVICE_CPU ? p->device.threads : opts->threads;
  so.batch_override = pl.shapes.fixed_batch;
  so.choose_threads = -1; /* the plan's steps on so.threads, whole batch */
  so.choose_kernels = -1; /* each node's first kernel: no timing noise in the predicted bytes */
  /* a GPU's steps must not depend on the host CPU's kernel choice: Winograd
   * (a blocked alternative) runs on AVX2 CPUs only and holds 4x weights */
  if (p->device.kind != TOPLU_DEVICE_CPU) so.no_blocked = "Conv";
  if ((st = toplu_session_create(m, &so, &pl.session, err))) goto fail;

  /* A lower bound first: batch 1's inputs alone.  Past the memory budget,
   * building the real plans would only say the same, after oneDNN has made
   * primitives for the huge shapes (PaddleOCR det at 100000x100000: 37 s
   * for "memory too small"). */
  if ((st = inputs_fit(&pl.shapes, opts->memory_bytes ? opts->memory_bytes : p->device.memory_bytes, p->mem_fraction,
                       p->precision_activation_scale, err)))
    goto fail;

  /* Real plans at B = 1 and 2.  A GPU's time is costed on the model's own
   * nodes at their logical sizes, without the Reorder and Copy steps toplu's
   * CPU kernels need (plan/memory.h): the same on every host. */
  int gpu_nodes = p->device.kind == TOPLU_DEVICE_GPU;
  if ((st = toplu__plan_point_build(pl.session, &pl.shapes, 1, gpu_nodes, &pl.p1, err))) goto fail;
  size_t packed = toplu_allocator_current(pl.alloc);
  toplu_session_clear_plans(pl.session);
  double w = (double)pl.p1.r.weights_bytes, inplace = w + (double)pl.p1.r.kernel_bytes - (double)packed;
  if (inplace < 0) inplace = 0;
  if (inplace > w) inplace = w;
  p->weights_in_place_bytes = (uint64_t)inplace;
  p->weights_packed_bytes = (uint64_t)(w - inplace);
  p->batchable = pl.shapes.batchable;
  if (!p->batchable)
    snprintf(p->batch_note, sizeof p->batch_note,
             "the model cannot batch: no input has a free batch dim (%.300s); batch 1 is its one useful answer",
             pl.shapes.desc);
  if (p->batchable) {
    if ((st = toplu__plan_point_build(pl.session, &pl.shapes, 2, gpu_nodes, &pl.p2, err))) goto fail;
    toplu_session_clear_plans(pl.session);
    if (pl.p2.r.per_sample) {
      p->batchable = 0;
      snprintf(p->batch_note, sizeof p->batch_note,
               "the model's file fixes batch 1 and toplu cannot prove its ops keep rows apart, so a batch runs one "
               "row at a time: a bigger batch only adds I/O buffers; batch 1 is its one useful answer");
    } else if (pl.shapes.fixed_batch) {
      note(p, "the model's file fixes batch 1; toplu runs any batch in one go with the batch dim freed");
    }
  }
  int io_copies = opts->double_buffer ? 2 : 1;
  toplu__mem_terms_t t1, t2;
  toplu__plan_point_terms(&pl.p1, io_copies, &t1);
  if (p->batchable) {
    toplu__plan_point_terms(&pl.p2, io_copies, &t2);
    toplu__mem_law_fit(&t1, 1, &t2, 2, &pl.engine_law);
    law_weights_constant(&pl, t2.weights);
  } else {
    memset(&pl.engine_law, 0, sizeof pl.engine_law);
    pl.engine_law.fixed = t1;
  }
  p->flops_per_sample = pl.p1.r.flops;
  p->n_nodes = pl.p1.n_steps;
  for (int i = 0; i < pl.p1.n_steps; i++) p->int8_nodes += pl.p1.step_int8[i];
  p->node_costs = calloc((size_t)p->n_nodes * 4 + 1, sizeof *p->node_costs);
  if (!p->node_costs) {
    st = toplu__errorf(err, TOPLU_ERR_OUT_OF_MEMORY, "out of memory");
    goto fail;
  }
  for (int i = 0; i < p->n_nodes; i++) {
    double f1 = (double)pl.p1.step_flops[i], m1 = (double)pl.p1.step_bytes[i];
    double *c = p->node_costs + 4 * i;
    if (f1 > 0 || m1 > 0) {
      if (f1 >= TOPLU__GPU_HEAVY * m1) pl.heavy += 1;
      else pl.light += 1;
    }
    if (p->batchable && pl.p2.n_steps == pl.p1.n_steps) {
      double f2 = (double)pl.p2.step_flops[i], m2 = (double)pl.p2.step_bytes[i];
      c[1] = f2 - f1;
      c[0] = f1 - c[1];
      c[3] = m2 - m1;
      c[2] = m1 - c[3];
    } else {
      c[0] = c[2] = 0;
      c[1] = f1;
      c[3] = m1;
    }
  }
  if (pl.gpu) {
    pl.node_flops = calloc((size_t)p->n_nodes + 1, sizeof *pl.node_flops);
    pl.node_bytes = calloc((size_t)p->n_nodes + 1, sizeof *pl.node_bytes);
    if (!pl.node_flops || !pl.node_bytes) {
      st = toplu__errorf(err, TOPLU_ERR_OUT_OF_MEMORY, "out of memory");
      goto fail;
    }
  }

  /* Capacity and sharding. */
  p->capacity_bytes = opts->memory_bytes ? opts->memory_bytes : p->device.memory_bytes;
  if (opts->memory_bytes)
    snprintf(p->capacity_source, sizeof p->capacity_source, "memory_bytes = %llu",
             (unsigned long long)opts->memory_bytes);
  else if (p->device.kind == TOPLU_DEVICE_CPU)
    snprintf(p->capacity_source, sizeof p->capacity_source, "%s", p->device.memory_source);
  else
    snprintf(p->capacity_source, sizeof p->capacity_source, "%s device memory (catalog)", p->device.description);
  p->budget_bytes = (uint64_t)floor(p->mem_fraction * (double)p->capacity_bytes);
  p->shards = 1;
  if ((st = plan_sharding(&pl, err))) goto fail;

  /* The law in device terms. */
  {
    toplu__mem_terms_t d0, d1;
    law_terms(&pl, 0, &d0);
    law_terms(&pl, 1, &d1);
    p->weights_bytes = (uint64_t)llround(d0.weights);
    p->overhead_bytes = (uint64_t)llround(d0.overhead);
    p->overhead_per_sample = d1.overhead - d0.overhead;
    p->activation_fixed = d0.activation;
    p->activation_per_sample = d1.activation - d0.activation;
    p->workspace_fixed = d0.workspace;
    p->workspace_per_sample = d1.workspace - d0.workspace;
    p->io_fixed = d0.io;
    p->io_per_sample = d1.io - d0.io;
  }
  if ((st = find_max_batch(&pl, err))) goto fail;
  apply_element_limit(&pl);
  {
    toplu__mem_terms_t d0, d1;
    law_terms(&pl, 0, &d0);
    law_terms(&pl, 1, &d1);
    p->weights_per_sample = d1.weights - d0.weights;
    if (p->weights_per_sample > 0) p->weights_bytes = (uint64_t)llround(d0.weights); /* refitted (find_max_batch) */
    else p->weights_per_sample = 0;
    p->activation_fixed = d0.activation;
    p->activation_per_sample = d1.activation - d0.activation;
    p->workspace_fixed = d0.workspace;
    p->workspace_per_sample = d1.workspace - d0.workspace;
    p->io_fixed = d0.io;
    p->io_per_sample = d1.io - d0.io;
  }
  if (!p->batchable) { /* row by row: only the I/O buffers grow with B */
    p->io_per_sample = p->io_fixed;
    p->io_fixed = 0;
  }
  p->global_batch_size = p->max_batch_size * (p->devices / p->shards);

  /* Latency model. */
  pl.lm.peak_flops = p->peak_flops;
  pl.lm.int8_peak_flops = p->int8_peak_flops;
  pl.lm.bandwidth = p->bandwidth;
  pl.lm.bytes_scale = p->device.kind == TOPLU_DEVICE_GPU || p->precision != TOPLU_PRECISION_FP32
                          ? p->precision_activation_scale
                          : 1.0;
  pl.lm.node_overhead_s = p->node_overhead_us * 1e-6;
  pl.lm.efficiency = 1;
  pl.lm.intercept_s = -1;
  {
    toplu__latency_parts_t a, b;
    toplu__latency_parts(&pl.lm, &pl.p1, p->batchable ? &pl.p2 : NULL, 1, &b);
    p->bytes_fixed = 0;
    p->bytes_per_sample = (int64_t)b.bytes;
    if (p->batchable) {
      toplu__latency_parts(&pl.lm, &pl.p1, &pl.p2, 2, &a);
      p->bytes_per_sample = (int64_t)(a.bytes - b.bytes);
      p->bytes_fixed = (int64_t)(b.bytes - (double)p->bytes_per_sample);
    }
  }
  if ((pl.calibration || pl.cal_n > 0) && (st = calibrate(&pl, pl.calibration, opts->calibration, err))) goto fail;
  if (p->latency_budget_ms > 0) {
    toplu__latency_parts_t parts;
    double s1 = latency_at(&pl, 1, &parts) * 1e3;
    if (s1 > p->latency_budget_ms) {
      st = toplu__errorf(err, TOPLU_ERR_INVALID_ARGUMENT,
                        "latency budget %.3g ms is below the predicted latency of batch 1, %.3g ms on %s (compute "
                        "%.3g ms, memory traffic %.3g ms, %.0f node launches %.3g ms): no batch size meets it",
                        p->latency_budget_ms, s1, p->device.name, (pl.gpu ? 1 : pl.lm.efficiency) * parts.compute_s * 1e3,
                        (pl.gpu ? 1 : pl.lm.efficiency) * parts.memory_s * 1e3, parts.launches,
                        s1 - (pl.gpu ? 1 : pl.lm.efficiency) * parts.roofline_s * 1e3);
      goto fail;
    }
  }

  /* Rows. */
  {
    /* The given sizes, or the powers of two up to the max batch (at most
     * 2^20: 21 of them) and the max batch itself. */
    int cap = opts->n_batch_sizes > 0 ? opts->n_batch_sizes : 64 + 1;
    int64_t *list = malloc((size_t)cap * sizeof *list);
    int n = 0;
    if (!list) {
      st = toplu__errorf(err, TOPLU_ERR_OUT_OF_MEMORY, "out of memory");
      goto fail;
    }
    if (opts->n_batch_sizes > 0) {
      for (int i = 0; i < opts->n_batch_sizes; i++) add_batch(list, &n, cap, opts->batch_sizes[i]);
    } else {
      int64_t top = p->max_batch_size >= 1 ? p->max_batch_size : 1;
      if (!p->batchable) top = 1;
      for (int64_t b = 1; b <= top; b *= 2) add_batch(list, &n, cap, b);
      add_batch(list, &n, cap, top);
    }
    p->rows = calloc((size_t)n + 1, sizeof *p->rows);
    if (!p->rows) {
      free(list);
      st = toplu__errorf(err, TOPLU_ERR_OUT_OF_MEMORY, "out of memory");
      goto fail;
    }
    for (int i = 0; i < n; i++) {
      int64_t b = list[i];
      toplu__mem_terms_t t, law_w; /* the weights of every row but --exact's: the law's (law_weights_constant) */
      law_terms(&pl, p->batchable ? b : 1, &law_w);
      int exact = b <= 2 || (b == p->affine_check_batch && p->affine_error <= 1e-4);
      if (b == 1 || (b == 2 && p->batchable)) {
        /* the real plans built first: a law refitted through a larger size
         * is off here when a kernel packs its weights differently at batch
         * 1 (oneDNN on AVX-512: 12 KiB less for PaddleOCR det at batch 2) */
        toplu__mem_terms_t e;
        toplu__plan_point_terms(b == 1 ? &pl.p1 : &pl.p2, io_copies, &e);
        device_terms(&pl, &e, &t);
      } else if (opts->exact && b <= CHECK_CAP && !exact && (p->batchable || b == 1)) {
        if ((st = real_terms(&pl, b, &t, NULL, err))) {
          free(list);
          goto fail;
        }
        exact = 1;
      } else {
        law_terms(&pl, p->batchable ? b : 1, &t);
        if (!p->batchable) { /* row by row: only the I/O buffers grow */
          toplu__mem_terms_t e;
          toplu__plan_point_terms(&pl.p1, io_copies, &e);
          t.io = e.io * (double)b;
          exact = b == 1;
        }
      }
      if (!opts->exact) t.weights = law_w.weights; /* --exact: each real plan's own, as toplu tune predicts */
      fill_row(&pl, b, &t, exact, &p->rows[p->n_rows++]);
    }
    free(list);
  }
  if ((st = choose(&pl, err))) goto fail;
  if (!p->batchable) p->recommended_batch_size = p->knee_batch_size = p->max_batch_size >= 1 ? 1 : 0;
  if (!p->batchable || !p->knee_lo) p->knee_lo = p->knee_hi = p->knee_batch_size;

  /* Notes. */
  peak_note(p);
  for (int i = 0; i < opts->n_notes; i++)
    if (opts->notes && opts->notes[i] && opts->notes[i][0]) note(p, "%s", opts->notes[i]);
  if (pl.shapes.note[0]) note(p, "%s", pl.shapes.note);
  if (int8_model)
    note(p, "the model is int8 (%d quantization nodes): its own plan, bytes as toplu runs it, unscaled",
         toplu_model_quantized_nodes(m));
  if (p->device.kind == TOPLU_DEVICE_CPU && p->precision != TOPLU_PRECISION_FP32 && !int8_model)
    note(p, "%s is hypothetical here: toplu's CPU engine runs this model in fp32; the figures scale its plan",
         toplu_precision_name(p->precision));
  else if (hyp && p->device.kind == TOPLU_DEVICE_CPU)
    note(p, "int8 time is hypothetical on this CPU: %s; its integer steps are costed at the fp32 peak",
         p->device.int8_note[0] ? p->device.int8_note : "it has no int8 rate");
  else if (hyp)
    note(p, "%s is hypothetical on %s (its spec sheet gives no %s rate): its fp32 peak is used",
         toplu_precision_name(p->precision), p->device.description, toplu_precision_name(p->precision));
  if (p->device.kind == TOPLU_DEVICE_GPU && pl.gpu) {
    note(p, "GPU time: toplu's per-node plan through the %s profile (%d published table%s); memory: toplu's plan "
            "plus the runtime's own context and workspace",
         p->runtime, p->runtime_tables, p->runtime_tables == 1 ? "" : "s");
    if (!strcmp(p->runtime, "pytorch") && p->precision == TOPLU_PRECISION_INT8 && !hyp)
      note(p, "int8 is hypothetical under pytorch: its tables are fp32 and mixed precision (eager PyTorch runs no "
              "int8 convolutions on GPUs), so the tensor-core fit meets the int8 peak; TensorRT runs int8");
    if (!p->device_factor_fitted)
      note(p, "no published table covers %s: its compute and memory factors are 1 (as a V100's; its spec sheet's "
              "peaks carry the difference) and its host factor %.3g (the newest host machine in the tables, DGX "
              "A100's), so its band is wider than stated", p->device.name, p->device_host_factor);
  } else if (p->device.kind == TOPLU_DEVICE_GPU) {
    note(p, "GPU figures are estimates from toplu's CPU plan: a GPU runtime picks its own kernels, layouts and "
            "workspaces; the ideal roofline is an upper bound on speed at toplu's unfused byte count (runtime tensorrt, onnxruntime-cuda or pytorch "
            "for measured profiles)");
  }
  if (p->max_capped) note(p, "the max batch search stops at %lld", (long long)MAX_BATCH_CAP);
  if (p->affine_check_batch && p->affine_check_batch < p->max_batch_size)
    note(p, "the affine law was checked against a real plan at B = %lld, below the max batch", (long long)p->affine_check_batch);
  if (p->shards > 1)
    note(p, "the weights are split over %d devices (%d needed); activations are not split (conservative)", p->shards,
         p->devices_needed);
  planner_free(&pl);
  *out = p;
  return TOPLU_OK;
fail:
  planner_free(&pl);
  toplu_batch_plan_free(p);
  return st;
}

void toplu_batch_plan_free(toplu_batch_plan_t *p) {
  if (!p) return;
  free(p->rows);
  free(p->node_costs);
  free(p);
}
