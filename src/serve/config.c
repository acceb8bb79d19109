/*
 * serve/config.c - Triton model configuration (config.json) for toplu serve.
 *
 * Spec: Triton Inference Server model_config.proto (ModelConfig,
 * ModelDynamicBatching, ModelQueuePolicy, ModelInstanceGroup,
 * ModelVersionPolicy, ModelWarmup, ModelInput, ModelOutput,
 * ModelResponseCache, ModelParameter) read through the protobuf JSON
 * mapping: field names in snake_case or lowerCamelCase, 64-bit integers as
 * numbers or decimal strings, enums by name, maps as objects.
 */
#include "serve/config.h"

#include <errno.h>
#include <jansson.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Triton's DataType names (model_config.proto enum DataType) and toplu's dtypes. */
static const struct {
  const char *name;
  toplu_dtype_t dtype;
} kTypes[] = {
    {"TYPE_BOOL", TOPLU_DTYPE_BOOL},     {"TYPE_UINT8", TOPLU_DTYPE_UINT8},     {"TYPE_UINT16", TOPLU_DTYPE_UINT16},
    {"TYPE_UINT32", TOPLU_DTYPE_UINT32}, {"TYPE_UINT64", TOPLU_DTYPE_UINT64},   {"TYPE_INT8", TOPLU_DTYPE_INT8},
    {"TYPE_INT16", TOPLU_DTYPE_INT16},   {"TYPE_INT32", TOPLU_DTYPE_INT32},     {"TYPE_INT64", TOPLU_DTYPE_INT64},
    {"TYPE_FP16", TOPLU_DTYPE_FLOAT16},  {"TYPE_FP32", TOPLU_DTYPE_FLOAT},      {"TYPE_FP64", TOPLU_DTYPE_DOUBLE},
    {"TYPE_STRING", TOPLU_DTYPE_STRING}, {"TYPE_BF16", TOPLU_DTYPE_BFLOAT16},
};

static const char *type_name(toplu_dtype_t d) {
  for (size_t i = 0; i < sizeof kTypes / sizeof kTypes[0]; i++)
    if (kTypes[i].dtype == d) return kTypes[i].name;
  return "TYPE_INVALID";
}

typedef struct cctx {
  const char *file;
  char *err;
  size_t err_size;
  srv_config_t *c;
} cctx_t;

static int fail(cctx_t *x, const char *field, const char *fmt, ...) TOPLU_PRINTF(3, 4);
static int fail(cctx_t *x, const char *field, const char *fmt, ...) {
  if (x->err && x->err_size) {
    int n = snprintf(x->err, x->err_size, "%s: %s: ", x->file, field);
    if (n >= 0 && (size_t)n < x->err_size) {
      va_list ap;
      va_start(ap, fmt);
      vsnprintf(x->err + n, x->err_size - (size_t)n, fmt, ap);
      va_end(ap);
    }
  }
  return -1;
}

/* The JSON text of v for a message, cut to fit. */
static const char *value_text(const json_t *v, char *buf, size_t size) {
  char *s = json_dumps(v, JSON_ENCODE_ANY | JSON_COMPACT);
  if (!s) {
    snprintf(buf, size, "(a JSON value)");
    return buf;
  }
  if (strlen(s) > 60) snprintf(buf, size, "%.57s...", s);
  else snprintf(buf, size, "%s", s);
  free(s);
  return buf;
}

/* Append s to out (length *len, room size), cutting it to fit. */
static void cat(char *out, size_t size, size_t *len, const char *s) {
  size_t n = strlen(s);
  if (*len + n >= size) n = size - 1 - *len;
  memcpy(out + *len, s, n);
  *len += n;
  out[*len] = 0;
}

/* path + "." + key (or key at the top) into out. */
static const char *join(char *out, size_t size, const char *path, const char *key) {
  size_t len = 0;
  out[0] = 0;
  cat(out, size, &len, path);
  if (path[0]) cat(out, size, &len, ".");
  cat(out, size, &len, key);
  return out;
}
/* path + "[i]" into out. */
static const char *join_index(char *out, size_t size, const char *path, size_t i) {
  char idx[32];
  size_t len = 0;
  snprintf(idx, sizeof idx, "[%zu]", i);
  out[0] = 0;
  cat(out, size, &len, path);
  cat(out, size, &len, idx);
  return out;
}

/* A JSON field name in snake_case: protobuf's JSON mapping also accepts the
 * lowerCamelCase form ("maxBatchSize" for max_batch_size). */
static void snake(const char *key, char *out, size_t size) {
  size_t o = 0;
  for (const char *p = key; *p && o + 2 < size; p++) {
    if (*p >= 'A' && *p <= 'Z') {
      if (o > 0) out[o++] = '_';
      out[o++] = (char)(*p - 'A' + 'a');
    } else {
      out[o++] = *p;
    }
  }
  out[o] = 0;
}

static int in_list(const char *s, const char *const *list) {
  for (; list && *list; list++)
    if (strcmp(s, *list) == 0) return 1;
  return 0;
}

static void note_ignored(srv_config_t *c, const char *field) {
  size_t len = strlen(c->ignored), n = strlen(field);
  if (len >= 5 && !strcmp(c->ignored + len - 5, ", ...")) return; /* already cut */
  if (len + n + 3 + 5 >= sizeof c->ignored) { /* no room: say that more followed */
    if (len + 6 <= sizeof c->ignored) memcpy(c->ignored + len, len ? ", ..." : "...", len ? 6 : 4);
    return;
  }
  if (len) {
    memcpy(c->ignored + len, ", ", 2);
    len += 2;
  }
  memcpy(c->ignored + len, field, n + 1);
}

/* Every field of obj (at path) is known (used) or known to Triton (noted in
 * c->ignored); any other field, or one given twice (snake and camel case), is an error. */
static int check_fields(cctx_t *x, const char *path, const json_t *obj, const char *const *known,
                        const char *const *ignored) {
  const char *key;
  const json_t *v;
  char sub[512];
  json_object_foreach((json_t *)obj, key, v) {
    char k[128];
    snake(key, k, sizeof k);
    join(sub, sizeof sub, path, key);
    if (in_list(k, ignored)) {
      note_ignored(x->c, sub);
    } else if (!in_list(k, known)) {
      char list[512] = "";
      size_t len = 0;
      for (const char *const *p = known; *p; p++) {
        int n = snprintf(list + len, sizeof list - len, "%s%s", len ? ", " : "", *p);
        if (n < 0 || (size_t)n >= sizeof list - len) break;
        len += (size_t)n;
      }
      return fail(x, sub, "unknown field (Triton's model configuration has no such field here; toplu reads: %s)", list);
    }
    const char *key2;
    const json_t *v2;
    json_object_foreach((json_t *)obj, key2, v2) {
      if (key2 == key) break;
      char k2[128];
      snake(key2, k2, sizeof k2);
      if (strcmp(k, k2) == 0) return fail(x, sub, "given twice (as '%s' and '%s')", key2, key);
    }
  }
  return 0;
}

/* The field of obj named snake_name (in either case style), or NULL. */
static json_t *field(const json_t *obj, const char *snake_name) {
  const char *key;
  json_t *v;
  json_object_foreach((json_t *)obj, key, v) {
    char k[128];
    snake(key, k, sizeof k);
    if (strcmp(k, snake_name) == 0) return v;
  }
  return NULL;
}

/* An integer in lo..hi: a JSON integer, an integral real, or a decimal string
 * (protobuf JSON writes 64-bit integers as strings). */
static int get_int(cctx_t *x, const char *path, const json_t *v, int64_t lo, int64_t hi, int64_t *out) {
  char vt[80];
  int64_t r = 0;
  int ok = 0;
  if (json_is_integer(v)) {
    r = (int64_t)json_integer_value(v);
    ok = 1;
  } else if (json_is_real(v)) {
    double d = json_real_value(v);
    if (d >= -9.2e18 && d <= 9.2e18 && d == (double)(int64_t)d) {
      r = (int64_t)d;
      ok = 1;
    }
  } else if (json_is_string(v)) {
    const char *s = json_string_value(v);
    const char *p = s[0] == '-' ? s + 1 : s;
    if (*p >= '0' && *p <= '9' && strspn(p, "0123456789") == strlen(p)) {
      errno = 0;
      char *end = NULL;
      long long ll = strtoll(s, &end, 10);
      if (errno == 0 && end && *end == 0) {
        r = (int64_t)ll;
        ok = 1;
      }
    }
  }
  if (!ok || r < lo || r > hi) {
    if (lo == 0 && hi == INT64_MAX)
      return fail(x, path, "must be a non-negative integer, not %s", value_text(v, vt, sizeof vt));
    if (hi == INT64_MAX)
      return fail(x, path, "must be an integer >= %lld, not %s", (long long)lo, value_text(v, vt, sizeof vt));
    return fail(x, path, "must be an integer from %lld to %lld, not %s", (long long)lo, (long long)hi,
                value_text(v, vt, sizeof vt));
  }
  *out = r;
  return 0;
}

static int get_bool(cctx_t *x, const char *path, const json_t *v, int *out) {
  char vt[80];
  if (!json_is_boolean(v)) return fail(x, path, "must be true or false, not %s", value_text(v, vt, sizeof vt));
  *out = json_is_true(v);
  return 0;
}

static int get_string(cctx_t *x, const char *path, const json_t *v, char *out, size_t size) {
  char vt[80];
  if (!json_is_string(v)) return fail(x, path, "must be a string, not %s", value_text(v, vt, sizeof vt));
  const char *s = json_string_value(v);
  if (strlen(s) >= size) return fail(x, path, "longer than %zu bytes", size - 1);
  if (strlen(s) != json_string_length(v)) return fail(x, path, "holds a NUL character");
  memcpy(out, s, strlen(s) + 1);
  return 0;
}

static int get_object(cctx_t *x, const char *path, const json_t *v) {
  char vt[80];
  if (!json_is_object(v)) return fail(x, path, "must be an object, not %s", value_text(v, vt, sizeof vt));
  return 0;
}

static int get_array(cctx_t *x, const char *path, const json_t *v, size_t max) {
  char vt[80];
  if (!json_is_array(v)) return fail(x, path, "must be an array, not %s", value_text(v, vt, sizeof vt));
  if (json_array_size(v) > max) return fail(x, path, "has %zu entries, at most %zu are allowed", json_array_size(v), max);
  return 0;
}

/* An enum by name: index into names, or an error listing them. */
static int get_enum(cctx_t *x, const char *path, const json_t *v, const char *const *names, int *out) {
  char vt[80], list[256] = "";
  if (json_is_string(v)) {
    for (int i = 0; names[i]; i++)
      if (strcmp(json_string_value(v), names[i]) == 0) return *out = i, 0;
  }
  size_t len = 0;
  for (int i = 0; names[i]; i++) {
    int n = snprintf(list + len, sizeof list - len, "%s%s", i ? ", " : "", names[i]);
    if (n < 0 || (size_t)n >= sizeof list - len) break;
    len += (size_t)n;
  }
  return fail(x, path, "must be one of %s, not %s", list, value_text(v, vt, sizeof vt));
}

static int get_dtype(cctx_t *x, const char *path, const json_t *v, toplu_dtype_t *out) {
  char vt[80];
  if (json_is_string(v)) {
    for (size_t i = 0; i < sizeof kTypes / sizeof kTypes[0]; i++)
      if (strcmp(json_string_value(v), kTypes[i].name) == 0) return *out = kTypes[i].dtype, 0;
  }
  return fail(x, path, "must be a Triton data type (TYPE_FP32, TYPE_INT64, TYPE_UINT8, TYPE_BOOL, ...), not %s",
              value_text(v, vt, sizeof vt));
}

/* dims: at most TOPLU_MAX_DIMS entries, each -1 (variable) or >= 1. */
static int get_dims(cctx_t *x, const char *path, const json_t *v, int *ndim, int64_t *dims) {
  if (get_array(x, path, v, TOPLU_MAX_DIMS)) return -1;
  char sub[512];
  for (size_t i = 0; i < json_array_size(v); i++) {
    join_index(sub, sizeof sub, path, i);
    const json_t *d = json_array_get(v, i);
    if (get_int(x, sub, d, -1, INT64_MAX, &dims[i])) return -1;
    if (dims[i] == 0) return fail(x, sub, "must be -1 (variable) or >= 1, not 0");
  }
  *ndim = (int)json_array_size(v);
  return 0;
}

static const char *const kActions[] = {"REJECT", "DELAY", NULL};

static int parse_queue_policy(cctx_t *x, const char *path, const json_t *o, srv_queue_policy_t *q) {
  static const char *const known[] = {"timeout_action", "default_timeout_microseconds", "allow_timeout_override",
                                      "max_queue_size", NULL};
  char sub[512];
  const json_t *v;
  int64_t i64;
  if (get_object(x, path, o) || check_fields(x, path, o, known, NULL)) return -1;
  if ((v = field(o, "timeout_action"))) {
    int a;
    if (get_enum(x, join(sub, sizeof sub, path, "timeout_action"), v, kActions, &a)) return -1;
    q->timeout_action = (srv_timeout_action_t)a;
  }
  if ((v = field(o, "default_timeout_microseconds"))) {
    if (get_int(x, join(sub, sizeof sub, path, "default_timeout_microseconds"), v, 0, INT64_MAX, &i64)) return -1;
    q->default_timeout_us = i64 < SRV_MAX_MICROSECONDS ? i64 : SRV_MAX_MICROSECONDS; /* (2^63-1: "no timeout") */
  }
  if ((v = field(o, "allow_timeout_override")) &&
      get_bool(x, join(sub, sizeof sub, path, "allow_timeout_override"), v, &q->allow_timeout_override))
    return -1;
  if ((v = field(o, "max_queue_size"))) {
    if (get_int(x, join(sub, sizeof sub, path, "max_queue_size"), v, 0, UINT32_MAX, &i64)) return -1;
    q->max_queue_size = i64;
  }
  return 0;
}

static int parse_dynamic_batching(cctx_t *x, const json_t *o) {
  static const char *const known[] = {"preferred_batch_size", "max_queue_delay_microseconds", "preserve_ordering",
                                      "priority_levels", "default_priority_level", "default_queue_policy",
                                      "priority_queue_policy", NULL};
  srv_config_t *c = x->c;
  const char *path = "dynamic_batching";
  char sub[512], sub2[512];
  const json_t *v;
  int64_t i64;
  if (get_object(x, path, o) || check_fields(x, path, o, known, NULL)) return -1;
  c->dynamic_batching = 1;
  if ((v = field(o, "preferred_batch_size"))) {
    join(sub, sizeof sub, path, "preferred_batch_size");
    if (get_array(x, sub, v, SRV_MAX_PREFERRED)) return -1;
    for (size_t i = 0; i < json_array_size(v); i++) {
      join_index(sub2, sizeof sub2, sub, i);
      const json_t *e = json_array_get(v, i);
      if (get_int(x, sub2, e, 1, INT32_MAX, &i64)) return -1;
      if (c->max_batch_size_set && i64 > c->max_batch_size)
        return fail(x, sub2, "%lld is more than max_batch_size %lld", (long long)i64, (long long)c->max_batch_size);
      for (int j = 0; j < c->n_preferred; j++)
        if (c->preferred_batch_size[j] == i64) return fail(x, sub2, "%lld is given twice", (long long)i64);
      c->preferred_batch_size[c->n_preferred++] = i64;
    }
  }
  if ((v = field(o, "max_queue_delay_microseconds"))) {
    if (get_int(x, join(sub, sizeof sub, path, "max_queue_delay_microseconds"), v, 0, INT64_MAX, &i64)) return -1;
    c->max_queue_delay_us = i64 < SRV_MAX_MICROSECONDS ? i64 : SRV_MAX_MICROSECONDS; /* (2^63-1: "no timeout") */
  }
  if ((v = field(o, "preserve_ordering")) &&
      get_bool(x, join(sub, sizeof sub, path, "preserve_ordering"), v, &c->preserve_ordering))
    return -1;
  if ((v = field(o, "priority_levels"))) {
    if (get_int(x, join(sub, sizeof sub, path, "priority_levels"), v, 0, SRV_MAX_PRIORITY_LEVELS, &i64)) return -1;
    c->priority_levels = (int)i64;
  }
  v = field(o, "default_priority_level");
  join(sub, sizeof sub, path, "default_priority_level");
  if (c->priority_levels > 0) {
    if (!v) return fail(x, sub, "must be given (1..%d) when priority_levels is %d", c->priority_levels, c->priority_levels);
    if (get_int(x, sub, v, 1, c->priority_levels, &i64)) return -1;
    c->default_priority_level = (int)i64;
  } else if (v) {
    if (get_int(x, sub, v, 0, 0, &i64)) return -1;
  }
  if ((v = field(o, "default_queue_policy")) &&
      parse_queue_policy(x, join(sub, sizeof sub, path, "default_queue_policy"), v, &c->default_queue_policy))
    return -1;
  for (int l = 1; l <= SRV_MAX_PRIORITY_LEVELS; l++) c->priority_queue_policy[l] = c->default_queue_policy;
  if ((v = field(o, "priority_queue_policy"))) {
    join(sub, sizeof sub, path, "priority_queue_policy");
    if (get_object(x, sub, v)) return -1;
    const char *key;
    json_t *p;
    json_object_foreach((json_t *)v, key, p) {
      join(sub2, sizeof sub2, sub, key);
      json_t *ks = json_string(key);
      int rc = ks ? get_int(x, sub2, ks, 1, c->priority_levels > 0 ? c->priority_levels : 0, &i64) : -1;
      json_decref(ks);
      if (rc) {
        if (c->priority_levels == 0) return fail(x, sub2, "a priority level needs priority_levels > 0");
        return fail(x, sub2, "the key must be a priority level from 1 to %d, not \"%s\"", c->priority_levels, key);
      }
      /* a whole policy, its unset fields at ModelQueuePolicy's defaults, as Triton's PriorityQueue takes the map
       * entry (it inherited the default policy's fields: a fresh user's finding of 2026-12-06) */
      memset(&c->priority_queue_policy[i64], 0, sizeof c->priority_queue_policy[i64]);
      if (parse_queue_policy(x, sub2, p, &c->priority_queue_policy[i64])) return -1;
      c->priority_policy_set[i64] = 1;
    }
  }
  return 0;
}

static int parse_instance_groups(cctx_t *x, const json_t *a) {
  static const char *const known[] = {"name", "kind", "count", NULL};
  static const char *const ignored[] = {"gpus", "secondary_devices", "profile", "passive", "host_policy", "rate_limiter",
                                        NULL};
  static const char *const kinds[] = {"KIND_AUTO", "KIND_GPU", "KIND_CPU", "KIND_MODEL", NULL};
  char sub[512], sub2[512];
  if (get_array(x, "instance_group", a, 64)) return -1;
  int64_t total = 0;
  for (size_t i = 0; i < json_array_size(a); i++) {
    const json_t *g = json_array_get(a, i), *v;
    join_index(sub, sizeof sub, "instance_group", i);
    if (get_object(x, sub, g) || check_fields(x, sub, g, known, ignored)) return -1;
    int64_t count = 1;
    if ((v = field(g, "count")) && get_int(x, join(sub2, sizeof sub2, sub, "count"), v, 1, 1024, &count)) return -1;
    if ((v = field(g, "kind"))) {
      int k;
      join(sub2, sizeof sub2, sub, "kind");
      if (get_enum(x, sub2, v, kinds, &k)) return -1;
      if (k == 1 || k == 3) return fail(x, sub2, "toplu runs models on the CPU: KIND_CPU or KIND_AUTO, not %s", kinds[k]);
    }
    if ((v = field(g, "name"))) {
      char name[SRV_NAME_MAX];
      if (get_string(x, join(sub2, sizeof sub2, sub, "name"), v, name, sizeof name)) return -1;
    }
    total += count;
  }
  if (total > 1024) return fail(x, "instance_group", "%lld instances in all, at most 1024 are allowed", (long long)total);
  if (json_array_size(a) > 0) x->c->instance_count = (int)total;
  return 0;
}

static int parse_version_policy(cctx_t *x, const json_t *o) {
  static const char *const known[] = {"latest", "all", "specific", NULL};
  srv_config_t *c = x->c;
  char sub[512], sub2[512];
  const json_t *v;
  int64_t i64;
  char vt[80];
  if (get_object(x, "version_policy", o) || check_fields(x, "version_policy", o, known, NULL)) return -1;
  if (json_object_size(o) != 1)
    return fail(x, "version_policy", "must hold exactly one of latest, all, specific, not %s", value_text(o, vt, sizeof vt));
  if ((v = field(o, "latest"))) {
    static const char *const k[] = {"num_versions", NULL};
    if (get_object(x, "version_policy.latest", v) || check_fields(x, "version_policy.latest", v, k, NULL)) return -1;
    c->version_policy = SRV_VERSIONS_LATEST;
    const json_t *n = field(v, "num_versions");
    if (n) {
      /* any count, as Triton takes it: more than SRV_MAX_VERSIONS folders serve the newest ones, with a warning
       * (srv_repo's pick); 100 was refused while 2 folders existed (a fresh user's finding of 2026-12-06) */
      if (get_int(x, "version_policy.latest.num_versions", n, 1, INT64_MAX, &i64)) return -1;
      c->num_versions = i64;
    }
  } else if ((v = field(o, "all"))) {
    if (get_object(x, "version_policy.all", v)) return -1;
    static const char *const k[] = {NULL};
    if (check_fields(x, "version_policy.all", v, k, NULL)) return -1;
    c->version_policy = SRV_VERSIONS_ALL;
  } else {
    v = field(o, "specific");
    static const char *const k[] = {"versions", NULL};
    if (get_object(x, "version_policy.specific", v) || check_fields(x, "version_policy.specific", v, k, NULL)) return -1;
    const json_t *a = field(v, "versions");
    snprintf(sub, sizeof sub, "version_policy.specific.versions");
    if (!a) return fail(x, sub, "must be given (a list of version numbers)");
    if (get_array(x, sub, a, SRV_MAX_VERSIONS)) return -1;
    if (json_array_size(a) == 0) return fail(x, sub, "must list at least one version");
    c->version_policy = SRV_VERSIONS_SPECIFIC;
    for (size_t i = 0; i < json_array_size(a); i++) {
      join_index(sub2, sizeof sub2, sub, i);
      if (get_int(x, sub2, json_array_get(a, i), 1, INT64_MAX, &i64)) return -1;
      for (int j = 0; j < c->n_versions; j++)
        if (c->versions[j] == i64) return fail(x, sub2, "version %lld is given twice", (long long)i64);
      c->versions[c->n_versions++] = i64;
    }
  }
  return 0;
}

/* The element count of dims split at its -1s: the product of each piece into
 * pieces (n + 1 of them for n -1s); returns the count of pieces, or -1 when
 * a product passes INT64_MAX. */
static int dim_pieces(int ndim, const int64_t *dims, int64_t *pieces) {
  int n = 0;
  pieces[0] = 1;
  for (int d = 0; d < ndim; d++) {
    if (dims[d] < 0) {
      pieces[++n] = 1;
    } else {
      if (pieces[n] > INT64_MAX / dims[d]) return -1;
      pieces[n] *= dims[d];
    }
  }
  return n + 1;
}

/* reshape { shape } of input/output entry io at path (Triton's ModelTensorReshape):
 * dims >= 1 or -1, the same elements as io->dims (piece by piece between -1s). */
static int parse_reshape(cctx_t *x, const char *path, const json_t *r, srv_config_io_t *io) {
  static const char *const known[] = {"shape", NULL};
  char sub[512];
  if (get_object(x, path, r) || check_fields(x, path, r, known, NULL)) return -1;
  const json_t *sh = field(r, "shape"); /* absent: [] (protobuf leaves an empty list out) */
  join(sub, sizeof sub, path, "shape");
  io->reshape_ndim = 0;
  if (sh && get_dims(x, sub, sh, &io->reshape_ndim, io->reshape)) return -1;
  io->has_reshape = 1;
  int64_t pa[TOPLU_MAX_DIMS + 1], pb[TOPLU_MAX_DIMS + 1];
  int na = dim_pieces(io->ndim, io->dims, pa), nb = dim_pieces(io->reshape_ndim, io->reshape, pb);
  char a[160], b[160];
  size_t la = 0, lb = 0;
  a[0] = b[0] = 0;
  for (int d = 0; d < io->ndim; d++) {
    char t[32];
    snprintf(t, sizeof t, "%s%lld", d ? ", " : "", (long long)io->dims[d]);
    cat(a, sizeof a, &la, t);
  }
  for (int d = 0; d < io->reshape_ndim; d++) {
    char t[32];
    snprintf(t, sizeof t, "%s%lld", d ? ", " : "", (long long)io->reshape[d]);
    cat(b, sizeof b, &lb, t);
  }
  if (na < 0 || nb < 0) return fail(x, sub, "[%s] or dims [%s] has more elements than int64 counts", b, a);
  if (na != nb)
    return fail(x, sub,
                "[%s] has %d variable (-1) dims, but dims [%s] has %d: a reshape keeps the elements, so each -1 of "
                "dims must be a -1 of reshape.shape",
                b, nb - 1, a, na - 1);
  for (int k = 0; k < na; k++)
    if (pa[k] != pb[k]) {
      if (na == 1)
        return fail(x, sub, "[%s] has %lld elements, but dims [%s] has %lld: a reshape must keep the element count", b,
                    (long long)pb[0], a, (long long)pa[0]);
      return fail(x, sub,
                  "[%s] does not keep the elements of dims [%s]: between their -1s, the fixed dims must multiply to "
                  "the same counts (piece %d: %lld against %lld)",
                  b, a, k, (long long)pb[k], (long long)pa[k]);
    }
  return 0;
}

static int parse_io(cctx_t *x, const char *path, const json_t *a, int is_input) {
  static const char *const known[] = {"name", "data_type", "dims", "reshape", NULL};
  static const char *const ign_in[] = {"format", "is_shape_tensor", "allow_ragged_batch", "optional",
                                       "is_non_linear_format_io", NULL};
  static const char *const ign_out[] = {"label_filename", "is_shape_tensor", "is_non_linear_format_io", NULL};
  srv_config_t *c = x->c;
  char sub[512], sub2[512];
  if (get_array(x, path, a, SRV_MAX_IO)) return -1;
  for (size_t i = 0; i < json_array_size(a); i++) {
    const json_t *e = json_array_get(a, i);
    srv_config_io_t *io = is_input ? &c->inputs[i] : &c->outputs[i];
    join_index(sub, sizeof sub, path, i);
    if (get_object(x, sub, e) || check_fields(x, sub, e, known, is_input ? ign_in : ign_out)) return -1;
    static const char *const need[] = {"name", "data_type", "dims"};
    for (int k = 0; k < 3; k++)
      if (!field(e, need[k])) return fail(x, join(sub2, sizeof sub2, sub, need[k]), "must be given");
    if (get_string(x, join(sub2, sizeof sub2, sub, "name"), field(e, "name"), io->name, sizeof io->name)) return -1;
    if (get_dtype(x, join(sub2, sizeof sub2, sub, "data_type"), field(e, "data_type"), &io->dtype)) return -1;
    if (get_dims(x, join(sub2, sizeof sub2, sub, "dims"), field(e, "dims"), &io->ndim, io->dims)) return -1;
    const json_t *rs = field(e, "reshape");
    if (rs && parse_reshape(x, join(sub2, sizeof sub2, sub, "reshape"), rs, io)) return -1;
    for (size_t j = 0; j < i; j++) {
      const srv_config_io_t *o = is_input ? &c->inputs[j] : &c->outputs[j];
      if (strcmp(o->name, io->name) == 0)
        return fail(x, join(sub2, sizeof sub2, sub, "name"), "'%s' is also %s[%zu]", io->name, path, j);
    }
    if (is_input) c->n_inputs = (int)i + 1;
    else c->n_outputs = (int)i + 1;
  }
  return 0;
}

static int parse_warmup(cctx_t *x, const json_t *a) {
  static const char *const known[] = {"name", "batch_size", "count", "inputs", NULL};
  static const char *const in_known[] = {"data_type", "dims", "zero_data", "random_data", "input_data_file", NULL};
  srv_config_t *c = x->c;
  char sub[512], sub2[512], sub3[512];
  const json_t *v;
  int64_t i64;
  if (get_array(x, "model_warmup", a, SRV_MAX_WARMUP)) return -1;
  for (size_t i = 0; i < json_array_size(a); i++) {
    const json_t *w = json_array_get(a, i);
    srv_warmup_t *sw = &c->warmup[i];
    join_index(sub, sizeof sub, "model_warmup", i);
    if (get_object(x, sub, w) || check_fields(x, sub, w, known, NULL)) return -1;
    sw->batch_size = 1;
    sw->count = 1;
    if ((v = field(w, "name")) && get_string(x, join(sub2, sizeof sub2, sub, "name"), v, sw->name, sizeof sw->name))
      return -1;
    if ((v = field(w, "batch_size"))) {
      int64_t hi = !c->max_batch_size_set ? INT32_MAX : c->max_batch_size > 0 ? c->max_batch_size : 1;
      if (get_int(x, join(sub2, sizeof sub2, sub, "batch_size"), v, 1, hi, &i64)) return -1;
      sw->batch_size = i64;
    }
    if ((v = field(w, "count"))) {
      /* 0 is Triton's default, "this sample once" (model_config.proto); Triton writes it in exported configs */
      if (get_int(x, join(sub2, sizeof sub2, sub, "count"), v, 0, 1000000, &i64)) return -1;
      sw->count = i64 > 0 ? i64 : 1;
    }
    join(sub2, sizeof sub2, sub, "inputs");
    if (!(v = field(w, "inputs"))) return fail(x, sub2, "must be given (an object of input name to its data)");
    if (get_object(x, sub2, v)) return -1;
    if (json_object_size(v) > 8) return fail(x, sub2, "has %zu inputs, at most 8 are allowed", json_object_size(v));
    const char *key;
    json_t *in;
    json_object_foreach((json_t *)v, key, in) {
      srv_warmup_input_t *wi = &sw->inputs[sw->n_inputs];
      join(sub3, sizeof sub3, sub2, key);
      if (strlen(key) >= sizeof wi->name) return fail(x, sub3, "the input name is longer than %d bytes", SRV_NAME_MAX - 1);
      memcpy(wi->name, key, strlen(key) + 1);
      if (get_object(x, sub3, in) || check_fields(x, sub3, in, in_known, NULL)) return -1;
      char f[512];
      if (!field(in, "data_type")) return fail(x, join(f, sizeof f, sub3, "data_type"), "must be given");
      if (!field(in, "dims")) return fail(x, join(f, sizeof f, sub3, "dims"), "must be given");
      if (get_dtype(x, join(f, sizeof f, sub3, "data_type"), field(in, "data_type"), &wi->dtype)) return -1;
      if (get_dims(x, join(f, sizeof f, sub3, "dims"), field(in, "dims"), &wi->ndim, wi->dims)) return -1;
      for (int d = 0; d < wi->ndim; d++)
        if (wi->dims[d] < 0) {
          char g[600];
          snprintf(g, sizeof g, "%s[%d]", f, d);
          return fail(x, g, "warm-up data needs a fixed size, not -1");
        }
      int64_t elems = 1;
      for (int d = 0; d < wi->ndim; d++) {
        if (wi->dims[d] > SRV_MAX_WARMUP_ELEMENTS / elems)
          return fail(x, f, "has more than 2^40 elements, more than any request may have");
        elems *= wi->dims[d];
      }
      const json_t *z = field(in, "zero_data"), *r = field(in, "random_data"), *fl = field(in, "input_data_file");
      int kinds = (z != NULL) + (r != NULL) + (fl != NULL);
      if (kinds != 1)
        return fail(x, sub3, "must hold exactly one of zero_data, random_data, input_data_file (it holds %d)", kinds);
      int b = 0;
      if (z) {
        if (get_bool(x, join(f, sizeof f, sub3, "zero_data"), z, &b)) return -1;
        if (!b) return fail(x, f, "must be true when given");
        wi->kind = 0;
      } else if (r) {
        if (get_bool(x, join(f, sizeof f, sub3, "random_data"), r, &b)) return -1;
        if (!b) return fail(x, f, "must be true when given");
        wi->kind = 1;
      } else {
        join(f, sizeof f, sub3, "input_data_file");
        if (get_string(x, f, fl, wi->file, sizeof wi->file)) return -1;
        if (!wi->file[0] || wi->file[0] == '/' || strstr(wi->file, "..") || strchr(wi->file, '\\'))
          return fail(x, f, "must be a file name inside the model's warmup folder, not \"%s\"", wi->file);
        wi->kind = 2;
      }
      sw->n_inputs++;
    }
    if (sw->n_inputs == 0) return fail(x, sub2, "must name at least one input");
    c->n_warmup = (int)i + 1;
  }
  return 0;
}

static int parse_parameters(cctx_t *x, const json_t *o) {
  static const char *const known[] = {"string_value", NULL};
  char sub[512], sub2[512];
  if (get_object(x, "parameters", o)) return -1;
  const char *key;
  json_t *p;
  json_object_foreach((json_t *)o, key, p) {
    join(sub, sizeof sub, "parameters", key);
    if (get_object(x, sub, p) || check_fields(x, sub, p, known, NULL)) return -1;
    const json_t *s = field(p, "string_value");
    char vt[80];
    if (!s || !json_is_string(s))
      return fail(x, join(sub2, sizeof sub2, sub, "string_value"), "must be a string, not %s",
                  s ? value_text(s, vt, sizeof vt) : "absent");
    { /* kept for GET .../config (as given; those past the buffer are dropped from the display only) */
      pl_buf_t e = {0};
      pl_buf_putc(&e, ',');
      pl_buf_json_string(&e, key);
      pl_buf_puts(&e, ":{\"string_value\":");
      pl_buf_json_string(&e, json_string_value(s));
      pl_buf_putc(&e, '}');
      size_t have = strlen(x->c->parameters_json);
      if (!e.oom && e.data && have + e.len < sizeof x->c->parameters_json) memcpy(x->c->parameters_json + have, e.data, e.len + 1);
      pl_buf_free(&e);
    }
    /* toplu's own: qdq_int8_all, every QDQ Conv in int8 (toplu_model_options_t); allow_nonfinite, NaN and Inf
     * inputs run (they are refused otherwise: kernels such as a ReLU fused into a convolution turn NaN into 0) */
    if (!strcmp(key, "qdq_int8_all") || !strcmp(key, "allow_nonfinite")) {
      const char *v = json_string_value(s);
      if (strcmp(v, "true") && strcmp(v, "false"))
        return fail(x, join(sub2, sizeof sub2, sub, "string_value"), "must be \"true\" or \"false\", not \"%.100s\"", v);
      *(!strcmp(key, "qdq_int8_all") ? &x->c->qdq_int8_all : &x->c->allow_nonfinite) = !strcmp(v, "true");
    } else if (strcmp(key, "max_batch_size_source")) { /* (toplu's own GET .../config writes that one) */
      /* any other key is a backend's (ONNX Runtime's intra_op_thread_count) or a misspelling of toplu's
       * (allow_non_finite): logged with the fields toplu does not use, not dropped in silence (a fresh user's
       * finding of 2026-12-06) */
      note_ignored(x->c, sub);
    }
  }
  return 0;
}

void srv_config_defaults(srv_config_t *c) {
  memset(c, 0, sizeof *c);
  c->instance_count = 1;
  c->version_policy = SRV_VERSIONS_LATEST;
  c->num_versions = 1;
  c->default_queue_policy.timeout_action = SRV_TIMEOUT_REJECT;
  for (int l = 0; l <= SRV_MAX_PRIORITY_LEVELS; l++) c->priority_queue_policy[l] = c->default_queue_policy;
}

int srv_config_parse(const char *text, size_t len, const char *path, srv_config_t *out, char *err, size_t err_size) {
  static const char *const known[] = {"name", "max_batch_size", "input", "output", "dynamic_batching",
                                      "instance_group", "response_cache", "version_policy", "model_warmup",
                                      "parameters", "default_model_filename", NULL};
  static const char *const ignored[] = {"platform", "backend", "runtime", "batch_input", "batch_output", "optimization",
                                        "sequence_batching", "ensemble_scheduling", "cc_model_filenames", "metric_tags", "model_operations",
                                        "model_transaction_policy", "model_repository_agents", "model_metrics", NULL};
  cctx_t x = {path ? path : "config.json", err, err_size, out};
  if (err && err_size) err[0] = 0;
  srv_config_defaults(out);
  json_error_t je;
  json_t *root = json_loadb(text, len, JSON_REJECT_DUPLICATES, &je);
  if (!root) {
    if (err && err_size)
      snprintf(err, err_size, "%s: line %d column %d: not valid JSON: %s", x.file, je.line, je.column, je.text);
    return -1;
  }
  int rc = -1;
  const json_t *v;
  int64_t i64;
  if (!json_is_object(root)) {
    char vt[80];
    fail(&x, "(top)", "the configuration must be a JSON object, not %s", value_text(root, vt, sizeof vt));
    goto done;
  }
  if (check_fields(&x, "", root, known, ignored)) goto done;
  /* Fields whose meaning toplu cannot give: ignoring them would serve the model wrongly. */
  if (field(root, "sequence_batching")) {
    fail(&x, "sequence_batching",
         "not supported: toplu serves each request alone, without a sequence's state (correlation IDs, start/end "
         "flags, implicit state), so a stateful model would answer wrongly; remove it to serve the model statelessly");
    goto done;
  }
  if (field(root, "ensemble_scheduling")) {
    fail(&x, "ensemble_scheduling",
         "not supported: toplu runs one ONNX model per model, not a pipeline of other models");
    goto done;
  }
  /* A model for another runtime (a TensorRT plan, a Python model) or a decoupled one: serving it as an
   * ONNX model with one response per request would be wrong, so refused, where these were ignored */
  if ((v = field(root, "platform"))) {
    char pf[64];
    if (get_string(&x, "platform", v, pf, sizeof pf)) goto done;
    if (strcmp(pf, "onnxruntime_onnx") && strcmp(pf, SRV_PLATFORM)) {
      fail(&x, "platform", "\"%s\": toplu serves ONNX models only (platform \"onnxruntime_onnx\", or no platform)",
           pf);
      goto done;
    }
  }
  if ((v = field(root, "backend"))) {
    char be[64];
    if (get_string(&x, "backend", v, be, sizeof be)) goto done;
    if (strcmp(be, "onnxruntime") && strcmp(be, "openvino") && strcmp(be, "toplu")) {
      fail(&x, "backend",
           "\"%s\": toplu runs ONNX files itself, as the onnxruntime and openvino backends do; a model for another "
           "backend is not an ONNX model it can serve",
           be);
      goto done;
    }
  }
  if ((v = field(root, "model_transaction_policy"))) {
    const json_t *d = json_is_object(v) ? field(v, "decoupled") : NULL;
    int dec = 0;
    if (d && get_bool(&x, "model_transaction_policy.decoupled", d, &dec)) goto done;
    if (dec) {
      fail(&x, "model_transaction_policy.decoupled",
           "not supported: toplu answers each request with one response, so a decoupled model's clients would wait "
           "for responses that never come");
      goto done;
    }
  }
  if ((v = field(root, "name")) && get_string(&x, "name", v, out->name, sizeof out->name)) goto done;
  if ((v = field(root, "default_model_filename"))) {
    if (get_string(&x, "default_model_filename", v, out->model_filename, sizeof out->model_filename)) goto done;
    const char *f = out->model_filename;
    if (!*f || !strcmp(f, ".") || !strcmp(f, "..") || strchr(f, '/')) {
      fail(&x, "default_model_filename", "must be a file name inside the version folder (no '/'), not \"%.200s\"", f);
      goto done;
    }
  }
  if ((v = field(root, "max_batch_size"))) {
    if (get_int(&x, "max_batch_size", v, 0, INT32_MAX, &i64)) goto done;
    out->max_batch_size = i64;
    out->max_batch_size_set = 1;
  }
  if ((v = field(root, "input")) && parse_io(&x, "input", v, 1)) goto done;
  if ((v = field(root, "output")) && parse_io(&x, "output", v, 0)) goto done;
  if ((v = field(root, "dynamic_batching")) && parse_dynamic_batching(&x, v)) goto done;
  if ((v = field(root, "instance_group")) && parse_instance_groups(&x, v)) goto done;
  if ((v = field(root, "response_cache"))) {
    static const char *const k[] = {"enable", NULL};
    if (get_object(&x, "response_cache", v) || check_fields(&x, "response_cache", v, k, NULL)) goto done;
    const json_t *e = field(v, "enable");
    if (e && get_bool(&x, "response_cache.enable", e, &out->response_cache)) goto done;
  }
  if ((v = field(root, "version_policy")) && parse_version_policy(&x, v)) goto done;
  if ((v = field(root, "model_warmup")) && parse_warmup(&x, v)) goto done;
  if ((v = field(root, "parameters")) && parse_parameters(&x, v)) goto done;
  rc = 0;
done:
  json_decref(root);
  return rc;
}

/* ---- checking against the model ---- */

static const char *dims_text(int ndim, const int64_t *dims, char *buf, size_t size) {
  size_t o = 0;
  buf[0] = 0;
  o += (size_t)snprintf(buf, size, "[");
  for (int i = 0; i < ndim && o < size; i++) o += (size_t)snprintf(buf + o, size - o, "%s%lld", i ? ", " : "", (long long)dims[i]);
  if (o < size) snprintf(buf + o, size - o, "]");
  return buf;
}

/* Config dims (without the batch dim when batching) against the model's. */
static int check_dims(const srv_config_t *c, const char *field_path, const char *what, int ndim, const int64_t *dims,
                      const toplu_value_info_t *vi, char *err, size_t err_size) {
  if (vi->ndim < 0) return 0; /* rank unknown: the request is checked at run time */
  int skip = c->max_batch_size > 0 ? 1 : 0;
  char a[160], b[160];
  if (skip && vi->ndim < 1) {
    snprintf(err, err_size, "%s: max_batch_size %lld needs a batch dim, but the model's %s '%s' is a scalar", field_path,
             (long long)c->max_batch_size, what, vi->name);
    return -1;
  }
  if (vi->ndim - skip != ndim) {
    snprintf(err, err_size, "%s: %s has %d dims, but the model's %s '%s' is %s%s (%d dims%s)", field_path,
             dims_text(ndim, dims, a, sizeof a), ndim, what, vi->name, dims_text(vi->ndim, vi->dims, b, sizeof b),
             skip ? ", the first the batch dim" : "", vi->ndim - skip, skip ? " without it" : "");
    return -1;
  }
  for (int i = 0; i < ndim; i++) {
    int64_t md = vi->dims[i + skip];
    if (dims[i] >= 0 && md >= 0 && dims[i] != md) {
      snprintf(err, err_size, "%s[%d]: %lld, but the model's %s '%s' is %s there (%s%s)", field_path, i,
               (long long)dims[i], what, vi->name, dims_text(1, &md, a, sizeof a),
               dims_text(vi->ndim, vi->dims, b, sizeof b), skip ? ", the first the batch dim" : "");
      return -1;
    }
  }
  return 0;
}

/* The config's input of this name, or NULL. */
static const srv_config_io_t *config_input(const srv_config_t *c, const char *name) {
  for (int i = 0; i < c->n_inputs; i++)
    if (!strcmp(c->inputs[i].name, name)) return &c->inputs[i];
  return NULL;
}

/* 1 when a shape (ndim dims, the first skip of them batch dims) has the config entry's dims after them (-1: any). */
static int dims_fit(const srv_config_io_t *io, int skip, int ndim, const int64_t *dims) {
  int ok = ndim - skip == io->ndim;
  for (int d = 0; ok && d < io->ndim; d++) ok = io->dims[d] < 0 || io->dims[d] == dims[d + skip];
  return ok;
}

int srv_config_check_request_shape(const srv_config_t *c, const char *field_path, const char *name, int ndim,
                                   const int64_t *dims, char *err, size_t err_size) {
  const srv_config_io_t *io = config_input(c, name);
  if (!io) return 0;
  int skip = c->max_batch_size > 0 && ndim >= 1 ? 1 : 0;
  if (dims_fit(io, skip, ndim, dims)) return 0;
  char a[160], b[160];
  snprintf(err, err_size, "%s: %s does not match the config's input '%s' dims %s%s (-1: any size)", field_path,
           dims_text(ndim, dims, a, sizeof a), name, dims_text(io->ndim, io->dims, b, sizeof b),
           skip ? ", which exclude the batch dim (max_batch_size > 0)" : "");
  return -1;
}

int srv_config_check_model(const srv_config_t *c, const toplu_model_t *m, char *err, size_t err_size) {
  char f[600];
  for (int pass = 0; pass < 2; pass++) {
    int n = pass ? c->n_outputs : c->n_inputs;
    const char *what = pass ? "output" : "input";
    for (int i = 0; i < n; i++) {
      const srv_config_io_t *io = pass ? &c->outputs[i] : &c->inputs[i];
      int k = pass ? toplu_model_output_index(m, io->name) : toplu_model_input_index(m, io->name);
      if (k < 0) {
        char list[256] = "";
        size_t len = 0;
        int cnt = pass ? toplu_model_output_count(m) : toplu_model_input_count(m);
        for (int j = 0; j < cnt; j++) {
          const toplu_value_info_t *vi = pass ? toplu_model_output(m, j) : toplu_model_input(m, j);
          int w = snprintf(list + len, sizeof list - len, "%s'%s'", j ? ", " : "", vi->name);
          if (w < 0 || (size_t)w >= sizeof list - len) break;
          len += (size_t)w;
        }
        snprintf(err, err_size, "%s[%d].name: the model has no %s '%s' (its %ss: %s)", what, i, what, io->name, what, list);
        return -1;
      }
      const toplu_value_info_t *vi = pass ? toplu_model_output(m, k) : toplu_model_input(m, k);
      if (vi->dtype != io->dtype) {
        snprintf(err, err_size, "%s[%d].data_type: %s, but the model's %s '%s' is %s", what, i, type_name(io->dtype), what,
                 vi->name, type_name(vi->dtype));
        return -1;
      }
      /* the clients' shape is the batch dim and dims: 8 dims with batching made 9, beyond every shape array (a
       * stack overflow in GET /v2/models/NAME and at the first request; a fresh user's finding of 2026-12-06) */
      if (c->max_batch_size > 0 && io->ndim + 1 > TOPLU_MAX_DIMS) {
        snprintf(err, err_size, "%s[%d].dims: %d dims and the batch dim (max_batch_size %lld) make %d, more than the "
                 "%d dims a tensor may have", what, i, io->ndim, (long long)c->max_batch_size, io->ndim + 1,
                 TOPLU_MAX_DIMS);
        return -1;
      }
      /* with a reshape, the model's tensor is reshape.shape; dims is the clients' shape */
      snprintf(f, sizeof f, "%s[%d].%s", what, i, io->has_reshape ? "reshape.shape" : "dims");
      if (io->has_reshape ? check_dims(c, f, what, io->reshape_ndim, io->reshape, vi, err, err_size)
                          : check_dims(c, f, what, io->ndim, io->dims, vi, err, err_size))
        return -1;
    }
  }
  for (int w = 0; w < c->n_warmup; w++) {
    for (int i = 0; i < c->warmup[w].n_inputs; i++) {
      const srv_warmup_input_t *wi = &c->warmup[w].inputs[i];
      int k = toplu_model_input_index(m, wi->name);
      if (k < 0) {
        snprintf(err, err_size, "model_warmup[%d].inputs.%s: the model has no input '%s'", w, wi->name, wi->name);
        return -1;
      }
      const toplu_value_info_t *vi = toplu_model_input(m, k);
      if (vi->dtype != wi->dtype) {
        snprintf(err, err_size, "model_warmup[%d].inputs.%s.data_type: %s, but the model's input is %s", w, wi->name,
                 type_name(wi->dtype), type_name(vi->dtype));
        return -1;
      }
      snprintf(f, sizeof f, "model_warmup[%d].inputs.%s.dims", w, wi->name);
      const srv_config_io_t *io = config_input(c, wi->name);
      if (io && io->has_reshape) { /* warm-up data has the clients' shape, the config's dims */
        int ok = wi->ndim == io->ndim;
        for (int d = 0; ok && d < io->ndim; d++) ok = io->dims[d] < 0 || io->dims[d] == wi->dims[d];
        if (!ok) {
          char a[160], b[160];
          snprintf(err, err_size, "%s: %s does not match the config's input '%s' dims %s (the input has a reshape: "
                   "warm-up data has the shape clients send)", f, dims_text(wi->ndim, wi->dims, a, sizeof a), wi->name,
                   dims_text(io->ndim, io->dims, b, sizeof b));
          return -1;
        }
      } else if (check_dims(c, f, "input", wi->ndim, wi->dims, vi, err, err_size)) {
        return -1;
      }
    }
    if (c->warmup[w].n_inputs != toplu_model_input_count(m)) {
      for (int j = 0; j < toplu_model_input_count(m); j++) {
        const char *name = toplu_model_input(m, j)->name;
        int found = 0;
        for (int i = 0; i < c->warmup[w].n_inputs; i++) found |= strcmp(c->warmup[w].inputs[i].name, name) == 0;
        if (!found) {
          snprintf(err, err_size, "model_warmup[%d].inputs: the model's input '%s' is not given", w, name);
          return -1;
        }
      }
    }
  }
  return 0;
}

/* ---- GET .../config ---- */

static void put_dims(pl_buf_t *b, int ndim, const int64_t *dims) {
  pl_buf_putc(b, '[');
  for (int i = 0; i < ndim; i++) {
    if (i) pl_buf_putc(b, ',');
    pl_buf_int(b, dims[i]);
  }
  pl_buf_putc(b, ']');
}

/* An input/output entry; rs (may be NULL): the config's entry, whose reshape is shown when it has one. */
static void put_io(pl_buf_t *b, const char *name, toplu_dtype_t dtype, int ndim, const int64_t *dims,
                   const srv_config_io_t *rs) {
  pl_buf_puts(b, "{\"name\":");
  pl_buf_json_string(b, name);
  pl_buf_printf(b, ",\"data_type\":\"%s\",\"dims\":", type_name(dtype));
  put_dims(b, ndim, dims);
  if (rs && rs->has_reshape) {
    pl_buf_puts(b, ",\"reshape\":{\"shape\":");
    put_dims(b, rs->reshape_ndim, rs->reshape);
    pl_buf_putc(b, '}');
  }
  pl_buf_putc(b, '}');
}

static const srv_config_io_t *config_output(const srv_config_t *c, const char *name);

/* The model's dims of vi with the free ones the config's entry io fixes (NULL: none) filled in. */
static void config_dims(const srv_config_t *c, const toplu_value_info_t *vi, const srv_config_io_t *io, int64_t *dims) {
  for (int d = 0; d < vi->ndim; d++) dims[d] = vi->dims[d];
  int skip = c->max_batch_size > 0 && vi->ndim > 0 ? 1 : 0;
  if (!io || io->has_reshape || io->ndim != vi->ndim - skip) return;
  for (int d = 0; d < io->ndim; d++)
    if (dims[d + skip] < 0 && io->dims[d] >= 0) dims[d + skip] = io->dims[d];
}

void srv_config_input_dims(const srv_config_t *c, const toplu_value_info_t *vi, int64_t *dims) {
  config_dims(c, vi, config_input(c, vi->name), dims);
}

void srv_config_output_dims(const srv_config_t *c, const toplu_value_info_t *vi, int64_t *dims) {
  config_dims(c, vi, config_output(c, vi->name), dims);
}

int srv_config_has_reshape(const srv_config_t *c) {
  for (int i = 0; i < c->n_inputs; i++)
    if (c->inputs[i].has_reshape) return 1;
  for (int i = 0; i < c->n_outputs; i++)
    if (c->outputs[i].has_reshape) return 1;
  return 0;
}

static const srv_config_io_t *config_output(const srv_config_t *c, const char *name) {
  for (int i = 0; i < c->n_outputs; i++)
    if (!strcmp(c->outputs[i].name, name)) return &c->outputs[i];
  return NULL;
}

int srv_config_serves_output(const srv_config_t *c, const char *name) {
  return c->n_outputs == 0 || config_output(c, name) != NULL;
}

int srv_config_served_dims(const srv_config_t *c, const toplu_value_info_t *vi, int is_output, int64_t *dims) {
  const srv_config_io_t *io = is_output ? config_output(c, vi->name) : config_input(c, vi->name);
  int skip = c->max_batch_size > 0 ? 1 : 0;
  if (io && io->has_reshape) {
    if (skip + io->ndim > TOPLU_MAX_DIMS) return -1; /* refused by srv_config_check_model; never written past dims */
    if (skip) dims[0] = -1;
    memcpy(dims + skip, io->dims, (size_t)io->ndim * sizeof dims[0]);
    return skip + io->ndim;
  }
  if (vi->ndim < 0) return -1;
  if (is_output) srv_config_output_dims(c, vi, dims);
  else srv_config_input_dims(c, vi, dims);
  return vi->ndim;
}

/* shape (*ndim dims, the batch dim first when skip) that fits pattern from
 * (-1: any size) into pattern to, the k-th -1 of to taking the size at the
 * k-th -1 of from; 0, or -1 when it does not fit. */
static int map_shape(int from_n, const int64_t *from, int to_n, const int64_t *to, int skip, int *ndim, int64_t *dims) {
  if (*ndim != skip + from_n || skip + to_n > TOPLU_MAX_DIMS) return -1;
  int64_t var[TOPLU_MAX_DIMS];
  int nv = 0, used = 0;
  for (int d = 0; d < from_n; d++) {
    if (from[d] < 0) var[nv++] = dims[skip + d];
    else if (dims[skip + d] != from[d]) return -1;
  }
  int64_t out[TOPLU_MAX_DIMS];
  for (int d = 0; d < to_n; d++) {
    if (to[d] >= 0) out[d] = to[d];
    else if (used < nv) out[d] = var[used++];
    else return -1;
  }
  if (used != nv) return -1;
  memcpy(dims + skip, out, (size_t)to_n * sizeof out[0]);
  *ndim = skip + to_n;
  return 0;
}

int srv_config_reshape_input(const srv_config_t *c, const char *name, int batching, int *ndim, int64_t *dims) {
  const srv_config_io_t *io = config_input(c, name);
  if (!io || !io->has_reshape) return 0;
  return map_shape(io->ndim, io->dims, io->reshape_ndim, io->reshape, batching ? 1 : 0, ndim, dims);
}

int srv_config_reshape_output(const srv_config_t *c, const char *name, int batching, int *ndim, int64_t *dims, char *err,
                              size_t err_size) {
  const srv_config_io_t *io = config_output(c, name);
  if (!io) return 0;
  if (!io->has_reshape) {
    /* the config's dims hold the output as Triton holds them: a shape that departs from a fixed dim is an error,
     * not passed on (they were neither checked nor shown: a fresh user's finding of 2026-12-06) */
    if (dims_fit(io, batching ? 1 : 0, *ndim, dims)) return 0;
    char a[160], b[160];
    snprintf(err, err_size, "output '%s': the model gave %s, which does not fit the config's output[%d].dims %s%s (-1: "
             "any size)", name, dims_text(*ndim, dims, a, sizeof a), (int)(io - c->outputs),
             dims_text(io->ndim, io->dims, b, sizeof b), batching ? " after the batch dim" : "");
    return -1;
  }
  int n = *ndim;
  int64_t was[TOPLU_MAX_DIMS];
  memcpy(was, dims, (size_t)(n > 0 ? n : 0) * sizeof was[0]);
  if (map_shape(io->reshape_ndim, io->reshape, io->ndim, io->dims, batching ? 1 : 0, ndim, dims) == 0) return 0;
  char a[160], b[160];
  snprintf(err, err_size, "output '%s': the model gave %s, which does not fit the config's output[%d].reshape.shape %s%s",
           name, dims_text(n, was, a, sizeof a), (int)(io - c->outputs), dims_text(io->reshape_ndim, io->reshape, b, sizeof b),
           batching ? " (after the batch dim)" : "");
  return -1;
}

static void put_model_io(pl_buf_t *b, const srv_config_t *c, const toplu_model_t *m, int outputs) {
  int n = m ? (outputs ? toplu_model_output_count(m) : toplu_model_input_count(m)) : (outputs ? c->n_outputs : c->n_inputs);
  pl_buf_putc(b, '[');
  for (int i = 0, first = 1; i < n; i++) {
    if (m && outputs && !srv_config_serves_output(c, toplu_model_output(m, i)->name)) continue;
    if (!first) pl_buf_putc(b, ',');
    first = 0;
    if (!m) {
      const srv_config_io_t *io = outputs ? &c->outputs[i] : &c->inputs[i];
      put_io(b, io->name, io->dtype, io->ndim, io->dims, io);
      continue;
    }
    const toplu_value_info_t *vi = outputs ? toplu_model_output(m, i) : toplu_model_input(m, i);
    const srv_config_io_t *io = outputs ? config_output(c, vi->name) : config_input(c, vi->name);
    if (io && io->has_reshape) { /* dims: what clients send or get; reshape.shape: the model's */
      put_io(b, vi->name, vi->dtype, io->ndim, io->dims, io);
    } else if (vi->ndim < 0) {
      int64_t var = -1;
      put_io(b, vi->name, vi->dtype, 1, &var, NULL);
    } else {
      int skip = c->max_batch_size > 0 && vi->ndim > 0 ? 1 : 0;
      int64_t dims[TOPLU_MAX_DIMS];
      if (outputs) srv_config_output_dims(c, vi, dims);
      else srv_config_input_dims(c, vi, dims);
      put_io(b, vi->name, vi->dtype, vi->ndim - skip, dims + skip, NULL);
    }
  }
  pl_buf_putc(b, ']');
}

static void put_policy(pl_buf_t *b, const srv_queue_policy_t *q) {
  pl_buf_printf(b,
                "{\"timeout_action\":\"%s\",\"default_timeout_microseconds\":%lld,\"allow_timeout_override\":%s,"
                "\"max_queue_size\":%lld}",
                kActions[q->timeout_action == SRV_TIMEOUT_DELAY], (long long)q->default_timeout_us,
                q->allow_timeout_override ? "true" : "false", (long long)q->max_queue_size);
}

void srv_config_json(const srv_config_t *c, const toplu_model_t *m, const char *source, pl_buf_t *out) {
  pl_buf_puts(out, "{\"name\":");
  pl_buf_json_string(out, c->name);
  pl_buf_printf(out, ",\"platform\":\"" SRV_PLATFORM "\",\"backend\":\"toplu\",\"max_batch_size\":%lld,\"input\":",
                (long long)c->max_batch_size);
  put_model_io(out, c, m, 0);
  pl_buf_puts(out, ",\"output\":");
  put_model_io(out, c, m, 1);
  if (c->dynamic_batching) {
    pl_buf_puts(out, ",\"dynamic_batching\":{\"preferred_batch_size\":");
    put_dims(out, c->n_preferred, c->preferred_batch_size);
    pl_buf_printf(out,
                  ",\"max_queue_delay_microseconds\":%lld,\"preserve_ordering\":%s,\"priority_levels\":%d,"
                  "\"default_priority_level\":%d,\"default_queue_policy\":",
                  (long long)c->max_queue_delay_us, c->preserve_ordering ? "true" : "false", c->priority_levels,
                  c->default_priority_level);
    put_policy(out, &c->default_queue_policy);
    pl_buf_puts(out, ",\"priority_queue_policy\":{");
    int first = 1;
    for (int l = 1; l <= SRV_MAX_PRIORITY_LEVELS; l++) {
      if (!c->priority_policy_set[l]) continue;
      pl_buf_printf(out, "%s\"%d\":", first ? "" : ",", l);
      put_policy(out, &c->priority_queue_policy[l]);
      first = 0;
    }
    pl_buf_puts(out, "}}");
  }
  pl_buf_puts(out, ",\"instance_group\":[{\"name\":");
  char gname[SRV_NAME_MAX + 8];
  snprintf(gname, sizeof gname, "%s_0", c->name);
  pl_buf_json_string(out, gname);
  pl_buf_printf(out, ",\"kind\":\"KIND_CPU\",\"count\":%d}]", c->instance_count);
  pl_buf_printf(out, ",\"response_cache\":{\"enable\":%s}", c->response_cache ? "true" : "false");
  pl_buf_puts(out, ",\"version_policy\":");
  if (c->version_policy == SRV_VERSIONS_ALL) {
    pl_buf_puts(out, "{\"all\":{}}");
  } else if (c->version_policy == SRV_VERSIONS_SPECIFIC) {
    pl_buf_puts(out, "{\"specific\":{\"versions\":");
    put_dims(out, c->n_versions, c->versions);
    pl_buf_puts(out, "}}");
  } else {
    pl_buf_printf(out, "{\"latest\":{\"num_versions\":%lld}}", (long long)c->num_versions);
  }
  if (c->n_warmup > 0) {
    pl_buf_puts(out, ",\"model_warmup\":[");
    for (int w = 0; w < c->n_warmup; w++) {
      const srv_warmup_t *sw = &c->warmup[w];
      pl_buf_puts(out, w ? ",{\"name\":" : "{\"name\":");
      pl_buf_json_string(out, sw->name);
      pl_buf_printf(out, ",\"batch_size\":%lld,\"count\":%lld,\"inputs\":{", (long long)sw->batch_size,
                    (long long)sw->count);
      for (int i = 0; i < sw->n_inputs; i++) {
        const srv_warmup_input_t *wi = &sw->inputs[i];
        if (i) pl_buf_putc(out, ',');
        pl_buf_json_string(out, wi->name);
        pl_buf_printf(out, ":{\"data_type\":\"%s\",\"dims\":", type_name(wi->dtype));
        put_dims(out, wi->ndim, wi->dims);
        if (wi->kind == 0) pl_buf_puts(out, ",\"zero_data\":true}");
        else if (wi->kind == 1) pl_buf_puts(out, ",\"random_data\":true}");
        else {
          pl_buf_puts(out, ",\"input_data_file\":");
          pl_buf_json_string(out, wi->file);
          pl_buf_putc(out, '}');
        }
      }
      pl_buf_puts(out, "}}");
    }
    pl_buf_putc(out, ']');
  }
  pl_buf_puts(out, ",\"parameters\":{");
  if (source) {
    pl_buf_puts(out, "\"max_batch_size_source\":{\"string_value\":");
    pl_buf_json_string(out, source);
    pl_buf_putc(out, '}');
  }
  /* the configuration's own parameters, each ",\"key\":{...}" */
  if (c->parameters_json[0]) pl_buf_puts(out, source ? c->parameters_json : c->parameters_json + 1);
  pl_buf_puts(out, "}}");
}
