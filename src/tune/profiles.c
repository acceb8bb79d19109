/*
 * tune/profiles.c - toplu_tune_profiles: one sweep per shape profile
 * (toplu/tuner.h; the profiles are parsed by the plan layer,
 * toplu_shape_profiles_add in toplu/planner.h).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "plan/profiles.h"
#include "toplu/tuner.h"

/* The caller's log, each line prefixed with the profile. */
typedef struct profile_log {
  toplu_log_fn log;
  void *user;
  char prefix[320];
} profile_log_t;

static void prefixed_log(void *user, toplu_log_level_t level, const char *message) {
  const profile_log_t *pl = user;
  char line[2048];
  snprintf(line, sizeof line, "%s%s", pl->prefix, message);
  pl->log(pl->user, level, line);
}

void toplu_tune_profiles_free(toplu_tune_profiles_result_t *r) {
  if (!r) return;
  for (int i = 0; i < r->n_profiles && r->results; i++) toplu_tune_result_free(r->results[i]);
  free(r->results);
  free(r->labels);
  free(r);
}

/* The batch that fits every profile swept. */
static void summarize(toplu_tune_profiles_result_t *r) {
  r->max_fitting_batch_size = r->planned_max_batch_size = 0;
  r->bounding_profile = 0;
  if (r->n < 1 || !r->results[0]->memory_limit_bytes) return;
  for (int k = 0; k < r->n; k++) {
    const toplu_tune_result_t *x = r->results[k];
    const toplu_tune_result_t *b = r->results[r->bounding_profile];
    /* ties (a list of sizes that all fit): the smaller planned max, the larger profile, bounds it */
    if (k == 0 || x->max_fitting_batch_size < r->max_fitting_batch_size ||
        (x->max_fitting_batch_size == r->max_fitting_batch_size &&
         x->planned_max_batch_size < b->planned_max_batch_size)) {
      r->max_fitting_batch_size = x->max_fitting_batch_size;
      r->bounding_profile = k;
    }
    if (k == 0 || x->planned_max_batch_size < r->planned_max_batch_size)
      r->planned_max_batch_size = x->planned_max_batch_size;
  }
}

toplu_status_t toplu_tune_profiles(const toplu_model_t *m, const toplu_tune_options_t *o,
                                   toplu_tune_profiles_result_t **out, toplu_error_t *err) {
  toplu_error_clear(err);
  if (!m || !out) return toplu__errorf(err, TOPLU_ERR_INVALID_ARGUMENT, "toplu_tune_profiles: NULL argument");
  *out = NULL;
  toplu_tune_options_t opts;
  if (o) opts = *o;
  else toplu_tune_options_init(&opts);
  const toplu_shape_profiles_t *sp = opts.profiles;
  int several = sp && sp->n_profiles > 1;
  int n = sp && sp->n_profiles > 0 ? sp->n_profiles : 1;
  if (sp && sp->n_profiles > 0 && opts.n_shapes > 0)
    return toplu__errorf(err, TOPLU_ERR_INVALID_ARGUMENT,
                         "toplu_tune_profiles: both shapes and profiles given: give the shapes as profiles");
  toplu_status_t cst = toplu__shape_profiles_check(m, sp, err);
  if (cst) return cst;
  toplu_tune_profiles_result_t *r = calloc(1, sizeof *r);
  if (!r) return toplu__errorf(err, TOPLU_ERR_OUT_OF_MEMORY, "out of memory");
  r->results = calloc((size_t)n, sizeof *r->results);
  r->labels = calloc((size_t)n, sizeof *r->labels);
  if (!r->results || !r->labels) {
    toplu_tune_profiles_free(r);
    return toplu__errorf(err, TOPLU_ERR_OUT_OF_MEMORY, "out of memory");
  }
  r->n_profiles = n;
  profile_log_t pl;
  memset(&pl, 0, sizeof pl);
  pl.log = o ? o->log : NULL;
  pl.user = o ? o->log_user : NULL;
  for (int k = 0; k < n; k++) {
    if (sp && sp->n_profiles > 0) {
      opts.shapes = sp->shapes + (size_t)k * (size_t)sp->n_shapes;
      opts.n_shapes = sp->n_shapes;
      snprintf(r->labels[k], sizeof r->labels[k], "%s", sp->labels[k]);
    }
    if (several && pl.log) {
      snprintf(pl.prefix, sizeof pl.prefix, "profile %d of %d: %s", k + 1, n, r->labels[k]);
      pl.log(pl.user, TOPLU_LOG_NOTE, pl.prefix);
      snprintf(pl.prefix, sizeof pl.prefix, "profile %d of %d (%s): ", k + 1, n, r->labels[k]);
      opts.log = prefixed_log;
      opts.log_user = &pl;
    }
    toplu_status_t st = toplu_tune_model(m, &opts, &r->results[k], err);
    if (r->results[k]) r->n = k + 1;
    if (st) {
      if (several) toplu__error_prefix(err, "profile %d of %d (%s)", k + 1, n, r->labels[k]);
      summarize(r);
      if (r->n) *out = r;
      else toplu_tune_profiles_free(r);
      return st;
    }
  }
  summarize(r);
  *out = r;
  return TOPLU_OK;
}
