/*
 * plan/profiles.c - shape profiles (`--shape x=1x3x48x{320,640,1280}`) and the
 * planner run once per profile (toplu/planner.h: toplu_shape_profiles_add,
 * toplu_plan_profiles and their reports).
 *
 * Sets pair up: profile k takes the k-th value of every set, as the shapes
 * of one TensorRT optimization profile go together; sets of different
 * lengths are refused.
 */
#include <ctype.h>
#include <errno.h>
#include <jansson.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "core/error.h"
#include "plan/plan_report.h"
#include "plan/profiles.h"
#include "plan/shapes.h"
#include "toplu/planner.h"

#define MAX_DIM INT64_C(2147483647) /* largest dim of a given shape (as plan/shapes.c) */

struct toplu_shape_spec {
  char name[256];
  char text[256]; /* as given, for messages */
  int ndim;
  int count[TOPLU_MAX_DIMS]; /* values of each dim: 1 for a number, >= 2 for a set */
  int64_t values[TOPLU_MAX_DIMS][TOPLU_MAX_SHAPE_PROFILES];
};

void toplu_shape_profiles_init(toplu_shape_profiles_t *sp) {
  if (sp) memset(sp, 0, sizeof *sp);
}

void toplu_shape_profiles_free(toplu_shape_profiles_t *sp) {
  if (!sp) return;
  free(sp->shapes);
  free(sp->labels);
  free(sp->specs_);
  memset(sp, 0, sizeof *sp);
}


/* Parse one whole number at *s for dim d of spec text; advance *s.  0 or an error. */
static toplu_status_t parse_size(const char **s, const char *text, int d, int in_set, int64_t *out,
                                 toplu_error_t *err) {
  const char *p = *s;
  if (*p < '0' || *p > '9') {
    size_t len = strcspn(p, in_set ? ",}" : ",xX])");
    if (*p == '-')
      return toplu__errorf(err, TOPLU_ERR_INVALID_ARGUMENT,
                           "shapes: %s: dim %d = %.*s is negative: sizes are whole numbers >= 1", text, d, (int)len, p);
    if (!len)
      return toplu__errorf(err, TOPLU_ERR_INVALID_ARGUMENT,
                           "shapes: %s: dim %d: a size is missing%s", text, d,
                           in_set ? " in the set (an empty value: write {320,640})" : "");
    return toplu__errorf(err, TOPLU_ERR_INVALID_ARGUMENT,
                         "shapes: %s: dim %d = '%.*s' is not a number: give every dim as a size, e.g. 1,3,224,224%s",
                         text, d, (int)len, p, in_set ? " (a set: {320,640})" : "");
  }
  char *end;
  errno = 0;
  long long v = strtoll(p, &end, 10);
  if (errno == ERANGE || v > MAX_DIM)
    return toplu__errorf(err, TOPLU_ERR_INVALID_ARGUMENT, "shapes: %s: dim %d = %.*s is too large (at most %lld per dim)",
                         text, d, (int)(end - p), p, (long long)MAX_DIM);
  *out = v;
  *s = end;
  return TOPLU_OK;
}

/* Parse "NAME=DIMS" into spec.  0 or TOPLU_ERR_INVALID_ARGUMENT. */
static toplu_status_t parse_spec(const char *text, toplu_shape_spec_t *sp, toplu_error_t *err) {
  memset(sp, 0, sizeof *sp);
  if (!text) return toplu__errorf(err, TOPLU_ERR_INVALID_ARGUMENT, "shapes: NULL text");
  snprintf(sp->text, sizeof sp->text, "%s", text);
  const char *eq = strrchr(text, '=');
  if (!eq || eq == text)
    return toplu__errorf(err, TOPLU_ERR_INVALID_ARGUMENT,
                         "shapes: '%s': expected NAME=DIMS, e.g. x=1,3,224,224 or x=1x3x48x{320,640}", text);
  if ((size_t)(eq - text) >= sizeof sp->name)
    return toplu__errorf(err, TOPLU_ERR_INVALID_ARGUMENT, "shapes: '%.40s...': the input name is too long", text);
  snprintf(sp->name, sizeof sp->name, "%.*s", (int)(eq - text), text);
  const char *s = eq + 1;
  int d = 0;
  /* A letter as dim 0 (B, N) stands for the batch: any size, replaced by the batch size. */
  if (isalpha((unsigned char)s[0]) && (s[1] == ',' || s[1] == 'x' || s[1] == 'X' || !s[1])) {
    sp->count[0] = 1;
    sp->values[0][0] = 1;
    d = 1;
    s += 1;
    if (*s) s++;
  } else {
    while (*s == ' ' || *s == '[' || *s == '(') s++;
  }
  for (;;) {
    while (*s == ' ') s++;
    if (!*s || *s == ']' || *s == ')') break;
    if (d == TOPLU_MAX_DIMS)
      return toplu__errorf(err, TOPLU_ERR_INVALID_ARGUMENT, "shapes: %s: more than %d dims", text, TOPLU_MAX_DIMS);
    toplu_status_t st;
    if (*s == '{') {
      s++;
      int n = 0;
      for (;;) {
        while (*s == ' ') s++;
        if (*s == '}' && n == 0)
          return toplu__errorf(err, TOPLU_ERR_INVALID_ARGUMENT,
                               "shapes: %s: dim %d: an empty set {}: give sizes, e.g. {320,640}", text, d);
        if (*s == '{')
          return toplu__errorf(err, TOPLU_ERR_INVALID_ARGUMENT,
                               "shapes: %s: dim %d: a set inside a set: give sizes, e.g. {320,640}", text, d);
        if (!*s)
          return toplu__errorf(err, TOPLU_ERR_INVALID_ARGUMENT, "shapes: %s: dim %d: the set is not closed with '}'",
                               text, d);
        if (n == TOPLU_MAX_SHAPE_PROFILES)
          return toplu__errorf(err, TOPLU_ERR_INVALID_ARGUMENT,
                               "shapes: %s: dim %d: more than %d sizes in a set", text, d, TOPLU_MAX_SHAPE_PROFILES);
        if ((st = parse_size(&s, text, d, 1, &sp->values[d][n], err))) return st;
        n++;
        while (*s == ' ') s++;
        if (*s == ',') {
          s++;
          continue;
        }
        if (*s == '}') {
          s++;
          break;
        }
        if (!*s)
          return toplu__errorf(err, TOPLU_ERR_INVALID_ARGUMENT, "shapes: %s: dim %d: the set is not closed with '}'",
                               text, d);
        return toplu__errorf(err, TOPLU_ERR_INVALID_ARGUMENT,
                             "shapes: %s: dim %d: unexpected '%c' in the set (separate sizes with commas: {320,640})",
                             text, d, *s);
      }
      sp->count[d] = n;
    } else {
      if (*s == '}')
        return toplu__errorf(err, TOPLU_ERR_INVALID_ARGUMENT, "shapes: %s: dim %d: a '}' without its '{'", text, d);
      if ((st = parse_size(&s, text, d, 0, &sp->values[d][0], err))) return st;
      sp->count[d] = 1;
    }
    d++;
    while (*s == ' ') s++;
    if (*s == ',' || *s == 'x' || *s == 'X') s++;
    else if (*s && *s != ']' && *s != ')')
      return toplu__errorf(err, TOPLU_ERR_INVALID_ARGUMENT,
                           "shapes: %s: unexpected '%c' after dim %d (separate dims with commas or x, e.g. 1,3,224,224)",
                           text, *s, d - 1);
  }
  while (*s == ']' || *s == ')' || *s == ' ') s++;
  if (*s) return toplu__errorf(err, TOPLU_ERR_INVALID_ARGUMENT, "shapes: %s: unexpected text '%s' after the dims", text, s);
  sp->ndim = d;
  return TOPLU_OK;
}

/* The set length of spec (1 without sets); the first set's dim in *dim. */
static int spec_set_length(const toplu_shape_spec_t *sp, int *dim) {
  for (int d = 0; d < sp->ndim; d++)
    if (sp->count[d] > 1) {
      if (dim) *dim = d;
      return sp->count[d];
    }
  return 1;
}

/* Expand specs into profiles: new arrays into sp (old ones freed).  0 or out of memory. */
static toplu_status_t expand(toplu_shape_profiles_t *sp, toplu_error_t *err) {
  int len = 1;
  for (int i = 0; i < sp->n_specs_; i++) {
    int l = spec_set_length(&sp->specs_[i], NULL);
    if (l > len) len = l;
  }
  int n = sp->n_specs_;
  toplu_input_shape_t *shapes = calloc((size_t)len * (size_t)n + 1, sizeof *shapes);
  char(*labels)[256] = calloc((size_t)len, sizeof *labels);
  if (!shapes || !labels) {
    free(shapes);
    free(labels);
    return toplu__errorf(err, TOPLU_ERR_OUT_OF_MEMORY, "out of memory");
  }
  int n_sets = 0;
  for (int i = 0; i < n; i++)
    for (int d = 0; d < sp->specs_[i].ndim; d++) n_sets += sp->specs_[i].count[d] > 1;
  for (int k = 0; k < len; k++) {
    for (int i = 0; i < n; i++) {
      const toplu_shape_spec_t *s = &sp->specs_[i];
      toplu_input_shape_t *sh = &shapes[(size_t)k * (size_t)n + (size_t)i];
      sh->name = s->name;
      sh->ndim = s->ndim;
      toplu__plan_append(labels[k], sizeof labels[k], "%s%s=", i ? " " : "", s->name);
      for (int d = 0; d < s->ndim; d++) {
        sh->dims[d] = s->values[d][s->count[d] > 1 ? k : 0];
        toplu__plan_append(labels[k], sizeof labels[k], "%s%lld", d ? "x" : "", (long long)sh->dims[d]);
      }
    }
  }
  free(sp->shapes);
  free(sp->labels);
  sp->shapes = shapes;
  sp->labels = labels;
  sp->n_profiles = n ? len : 0;
  sp->n_shapes = n;
  sp->n_sets = n_sets;
  return TOPLU_OK;
}

toplu_status_t toplu_shape_profiles_add(toplu_shape_profiles_t *sp, const char *text, toplu_error_t *err) {
  toplu_error_clear(err);
  if (!sp) return toplu__errorf(err, TOPLU_ERR_INVALID_ARGUMENT, "toplu_shape_profiles_add: NULL argument");
  if (sp->n_specs_ >= TOPLU_MAX_SHAPE_SPECS)
    return toplu__errorf(err, TOPLU_ERR_INVALID_ARGUMENT, "shapes: more than %d shapes", TOPLU_MAX_SHAPE_SPECS);
  toplu_shape_spec_t *spec = malloc(sizeof *spec);
  if (!spec) return toplu__errorf(err, TOPLU_ERR_OUT_OF_MEMORY, "out of memory");
  toplu_status_t st = parse_spec(text, spec, err);
  /* A set of one value is that value. */
  for (int d = 0; !st && d < spec->ndim; d++)
    if (spec->count[d] < 1) spec->count[d] = 1;
  /* Sets pair up: every set, in this spec and the ones before, has one length. */
  int d0 = -1, len = st ? 1 : spec_set_length(spec, &d0);
  for (int d = 0; !st && d < spec->ndim; d++)
    if (spec->count[d] > 1 && spec->count[d] != len)
      st = toplu__errorf(err, TOPLU_ERR_INVALID_ARGUMENT,
                         "shapes: %s: sets of different lengths (dim %d has %d sizes, dim %d has %d): sets pair up, "
                         "profile k taking the k-th size of every set (as the shapes of one TensorRT optimization "
                         "profile go together), so give every set the same number of sizes",
                         text, d0, len, d, spec->count[d]);
  for (int i = 0; !st && i < sp->n_specs_; i++) {
    const toplu_shape_spec_t *o = &sp->specs_[i];
    if (!strcmp(o->name, spec->name)) {
      st = toplu__errorf(err, TOPLU_ERR_INVALID_ARGUMENT, "shapes: %s given twice (%s and %s)", spec->name, o->text,
                         text);
      break;
    }
    int l = spec_set_length(o, NULL);
    if (l > 1 && len > 1 && l != len)
      st = toplu__errorf(err, TOPLU_ERR_INVALID_ARGUMENT,
                         "shapes: %s: a set of %d sizes, but %s has sets of %d: sets pair up, profile k taking the "
                         "k-th size of every set (as the shapes of one TensorRT optimization profile go together), so "
                         "give every set the same number of sizes",
                         text, len, o->text, l);
  }
  if (st) {
    free(spec);
    return st;
  }
  toplu_shape_spec_t *specs = realloc(sp->specs_, (size_t)(sp->n_specs_ + 1) * sizeof *specs);
  if (!specs) {
    free(spec);
    return toplu__errorf(err, TOPLU_ERR_OUT_OF_MEMORY, "out of memory");
  }
  specs[sp->n_specs_] = *spec;
  free(spec);
  sp->specs_ = specs;
  sp->n_specs_++;
  /* The names in shapes point into specs_, which may have moved: expand again. */
  if ((st = expand(sp, err))) {
    sp->n_specs_--;
    if (expand(sp, NULL)) { /* out of memory again: no profiles rather than names into moved memory */
      free(sp->shapes);
      free(sp->labels);
      sp->shapes = NULL;
      sp->labels = NULL;
      sp->n_profiles = sp->n_shapes = sp->n_sets = 0;
    }
    return st;
  }
  return TOPLU_OK;
}

toplu_status_t toplu__shape_profiles_check(const toplu_model_t *m, const toplu_shape_profiles_t *sp,
                                           toplu_error_t *err) {
  if (!sp) return TOPLU_OK;
  int fixed = toplu_model_fixed_batch(m);
  for (int i = 0; i < sp->n_specs_; i++) {
    const toplu_shape_spec_t *s = &sp->specs_[i];
    if (s->ndim < 1 || s->count[0] < 2) continue;
    int k = toplu_model_input_index(m, s->name);
    if (k < 0) continue; /* named when its profile is planned */
    const toplu_value_info_t *v = toplu_model_input(m, k);
    if (fixed || v->ndim < 0 || v->dims[0] < 0)
      return toplu__errorf(err, TOPLU_ERR_INVALID_ARGUMENT,
                           "shapes: %s: dim 0 is the batch, which the planner and tuner vary themselves: a set there "
                           "gives the same profile %d times (give the batch sizes to report as batch_sizes)",
                           s->text, s->count[0]);
  }
  return TOPLU_OK;
}

/* ---- the planner once per profile ---- */

void toplu_profile_plans_free(toplu_profile_plans_t *pp) {
  if (!pp) return;
  for (int i = 0; i < pp->n && pp->plans; i++) toplu_batch_plan_free(pp->plans[i]);
  free(pp->plans);
  free(pp->labels);
  free(pp);
}

toplu_status_t toplu_plan_profiles(const toplu_model_t *m, const toplu_planner_options_t *o,
                                   toplu_profile_plans_t **out, toplu_error_t *err) {
  toplu_error_clear(err);
  if (!m || !out) return toplu__errorf(err, TOPLU_ERR_INVALID_ARGUMENT, "toplu_plan_profiles: NULL argument");
  *out = NULL;
  toplu_planner_options_t opts;
  if (o) opts = *o;
  else toplu_planner_options_init(&opts);
  const toplu_shape_profiles_t *sp = opts.profiles;
  int n = sp && sp->n_profiles > 0 ? sp->n_profiles : 1;
  if (sp && sp->n_profiles > 0 && opts.n_shapes > 0)
    return toplu__errorf(err, TOPLU_ERR_INVALID_ARGUMENT,
                         "toplu_plan_profiles: both shapes and profiles given: give the shapes as profiles");
  toplu_status_t cst = toplu__shape_profiles_check(m, sp, err);
  if (cst) return cst;
  toplu_profile_plans_t *pp = calloc(1, sizeof *pp);
  if (!pp) return toplu__errorf(err, TOPLU_ERR_OUT_OF_MEMORY, "out of memory");
  pp->plans = calloc((size_t)n, sizeof *pp->plans);
  pp->labels = calloc((size_t)n, sizeof *pp->labels);
  if (!pp->plans || !pp->labels) {
    toplu_profile_plans_free(pp);
    return toplu__errorf(err, TOPLU_ERR_OUT_OF_MEMORY, "out of memory");
  }
  pp->n = n;
  for (int k = 0; k < n; k++) {
    if (sp && sp->n_profiles > 0) {
      opts.shapes = sp->shapes + (size_t)k * (size_t)sp->n_shapes;
      opts.n_shapes = sp->n_shapes;
      snprintf(pp->labels[k], sizeof pp->labels[k], "%s", sp->labels[k]);
    }
    toplu_status_t st = toplu_plan_model(m, &opts, &pp->plans[k], err);
    if (st) {
      if (n > 1) toplu__error_prefix(err, "profile %d of %d (%s)", k + 1, n, pp->labels[k]);
      toplu_profile_plans_free(pp);
      return st;
    }
  }
  /* The batch that fits every profile: the smallest max (the largest profile bounds it). */
  pp->bounding_profile = 0;
  for (int k = 1; k < n; k++)
    if (pp->plans[k]->max_batch_size < pp->plans[pp->bounding_profile]->max_batch_size) pp->bounding_profile = k;
  pp->max_batch_size = pp->plans[pp->bounding_profile]->max_batch_size;
  *out = pp;
  return TOPLU_OK;
}

char *toplu_profile_plans_json(const toplu_profile_plans_t *pp) {
  if (!pp || pp->n < 1) return NULL;
  if (pp->n == 1) return toplu_batch_plan_json(pp->plans[0]);
  json_t *root = json_object(), *arr = json_array();
  if (!root || !arr) {
    json_decref(root);
    json_decref(arr);
    return NULL;
  }
  for (int k = 0; k < pp->n; k++) {
    json_t *x = json_object(), *plan = toplu__batch_plan_json_object(pp->plans[k]);
    if (!x || !plan) {
      json_decref(x);
      json_decref(plan);
      json_decref(arr);
      json_decref(root);
      return NULL;
    }
    json_object_set_new(x, "profile", json_integer(k + 1));
    json_object_set_new(x, "shapes", json_string(pp->labels[k]));
    json_object_update(x, plan);
    json_decref(plan);
    json_array_append_new(arr, x);
  }
  json_object_set_new(root, "profiles", arr);
  json_object_set_new(root, "max_batch_size_all_profiles", json_integer(pp->max_batch_size));
  json_object_set_new(root, "bounding_profile", json_integer(pp->bounding_profile + 1));
  json_object_set_new(root, "bounding_shapes", json_string(pp->labels[pp->bounding_profile]));
  json_object_set_new(root, "pairing",
                      json_string("profile k takes the k-th size of every set (sets pair up, as the shapes of one "
                                  "TensorRT optimization profile)"));
  char *s = json_dumps(root, TOPLU__PLAN_JSON_FLAGS);
  json_decref(root);
  return s;
}

void toplu_profile_plans_print(const toplu_profile_plans_t *pp, FILE *f) {
  if (!pp || pp->n < 1) return;
  if (pp->n == 1) {
    toplu_batch_plan_print(pp->plans[0], f);
    return;
  }
  for (int k = 0; k < pp->n; k++) {
    fprintf(f, "%s=== profile %d of %d: %s ===\n", k ? "\n" : "", k + 1, pp->n, pp->labels[k]);
    toplu_batch_plan_print(pp->plans[k], f);
  }
  char a[32];
  fprintf(f, "\n=== all %d profiles ===\n", pp->n);
  fprintf(f, "%8s %11s %12s %8s  %s\n", "profile", "max batch", "recommended", "knee", "shapes");
  for (int k = 0; k < pp->n; k++) {
    const toplu_batch_plan_t *p = pp->plans[k];
    fprintf(f, "%8d %11lld %12lld %8lld  %s\n", k + 1, (long long)p->max_batch_size,
            (long long)p->recommended_batch_size, (long long)p->knee_batch_size, pp->labels[k]);
  }
  const toplu_batch_plan_t *b = pp->plans[pp->bounding_profile];
  if (pp->max_batch_size >= 1)
    fprintf(f, "max batch for every profile: %lld: the largest B within %s at every profile (profile %d, %s, bounds "
               "it): one max_batch_size for a server\n",
            (long long)pp->max_batch_size, toplu__fmt_bytes((double)b->budget_bytes, a, sizeof a),
            pp->bounding_profile + 1, pp->labels[pp->bounding_profile]);
  else
    fprintf(f, "max batch for every profile: none: profile %d (%s) does not fit even at batch 1\n",
            pp->bounding_profile + 1, pp->labels[pp->bounding_profile]);
}

void toplu_plan_model_options(const toplu_planner_options_t *o, toplu_model_options_t *mo) {
  if (!mo) return;
  memset(mo, 0, sizeof *mo);
  if (o && o->device && *o->device && strcasecmp(o->device, "cpu")) mo->no_fuse_attention = mo->no_fuse_depthwise = 1;
}
