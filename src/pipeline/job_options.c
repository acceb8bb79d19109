/* pipeline/job_options.c - job files: toplu_job_options_from_json (toplu/pipeline.h). */
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "pipeline/files.h"
#include "pipeline/shard.h"
#include "toplu/pipeline.h"
#include "toplu/session.h"

struct toplu_job_file {
  json_t *root;
  char **owned; /* strings made for the options (paths joined to the file's directory) */
  int n_owned, cap;
  const char **inputs;
};

void toplu_job_file_free(toplu_job_file_t *f) {
  if (!f) return;
  for (int k = 0; k < f->n_owned; k++) free(f->owned[k]);
  free(f->owned);
  free(f->inputs);
  json_decref(f->root);
  free(f);
}

/* Keep a malloc'ed string until the file is freed; NULL when out of memory. */
static const char *keep(toplu_job_file_t *f, char *s) {
  if (s && f->n_owned == f->cap) {
    int cap = f->cap ? f->cap * 2 : 16;
    char **o = realloc(f->owned, sizeof *o * (size_t)cap);
    if (!o) {
      free(s);
      return NULL;
    }
    f->owned = o;
    f->cap = cap;
  }
  if (s) f->owned[f->n_owned++] = s;
  return s;
}

/* path resolved against dir (the job file's directory) unless absolute; NULL when out of memory. */
static const char *job_path(toplu_job_file_t *f, const char *dir, const char *path) {
  if (path[0] == '/' || !strcmp(dir, ".")) return path;
  size_t n = strlen(dir) + strlen(path) + 2;
  char *p = malloc(n);
  if (p) snprintf(p, n, "%s/%s", dir, path);
  return keep(f, p);
}

/* An input spec "[NAME=]SOURCE" with SOURCE resolved against dir (name: NAME given apart). */
static const char *job_input(toplu_job_file_t *f, const char *dir, const char *name, const char *spec) {
  const char *eq = name ? NULL : strchr(spec, '=');
  const char *slash = strchr(spec, '/');
  size_t name_len = name ? strlen(name) : 0;
  if (!name && eq && (!slash || slash > eq)) { /* NAME=SOURCE */
    name = spec;
    name_len = (size_t)(eq - spec);
    spec = eq + 1;
  }
  const char *src = job_path(f, dir, spec);
  if (!src || !name) return src;
  size_t n = name_len + strlen(src) + 2;
  char *p = malloc(n);
  if (p) snprintf(p, n, "%.*s=%s", (int)name_len, name, src);
  return keep(f, p);
}

/* A number as text, in its shortest form that reads back the same. */
static void number_text(json_t *v, char *buf, size_t size) {
  if (json_is_integer(v)) {
    snprintf(buf, size, "%lld", (long long)json_integer_value(v));
    return;
  }
  double x = json_real_value(v);
  for (int prec = 1; prec <= 17; prec++) {
    snprintf(buf, size, "%.*g", prec, x);
    if (strtod(buf, NULL) == x) return;
  }
}

/* The keys besides model and input/inputs, and their types. */
enum { K_TEXT, K_PATH, K_INT, K_SECONDS, K_BOOL };
static const struct {
  const char *key;
  int type;
  int64_t min; /* K_INT */
} keys[] = {{"output", K_PATH, 0},       {"batch_size", K_INT, 1},    {"preprocess", K_TEXT, 0},
            {"postprocess", K_TEXT, 0},  {"labels", K_PATH, 0},       {"workers", K_INT, 1},
            {"prefetch", K_INT, 0},      {"infer_workers", K_INT, 1}, {"threads", K_INT, 0},
            {"shard", K_TEXT, 0},        {"resume", K_BOOL, 0},       {"errors", K_PATH, 0},
            {"fail_fast", K_BOOL, 0}, {"allow_nonfinite", K_BOOL, 0},    {"checkpoint_every", K_SECONDS, 0}, {"tune", K_PATH, 0},
            {"progress", K_TEXT, 0},     {"csv_header", K_TEXT, 0},   {"overwrite", K_BOOL, 0},
            {"max_image_pixels", K_INT, 1}, {"csv_delimiter", K_TEXT, 0}, {"max_line_bytes", K_INT, 1},
            {"sqlite_table", K_TEXT, 0}, {"qdq_int8_all", K_BOOL, 0}, {"length_buckets", K_TEXT, 0}};
#define N_KEYS (sizeof keys / sizeof keys[0])

/* Index of a text value in a NULL-terminated list, or -1. */
static int pick(const char *v, const char *const *names) {
  for (int i = 0; names[i]; i++)
    if (!strcmp(v, names[i])) return i;
  return -1;
}

/* Set one option from its value v; what names it in messages ("PATH: \"key\": value"). */
static toplu_status_t set_key(toplu_job_options_t *o, toplu_job_file_t *f, const char *dir, int k, json_t *v,
                              const char *what, toplu_error_t *err) {
  const char *key = keys[k].key;
  const char *s = json_string_value(v);
  switch (keys[k].type) {
    case K_TEXT:
    case K_PATH:
      if (!s) return toplu__errorf(err, TOPLU_ERR_INVALID_ARGUMENT, "%s: expected a string", what);
      if (keys[k].type == K_PATH && *s && !(s = job_path(f, dir, s)))
        return toplu__errorf(err, TOPLU_ERR_OUT_OF_MEMORY, "%s: out of memory for its paths", what);
      break;
    case K_INT: {
      int batch = !strcmp(key, "batch_size");
      if (batch && s && (!strcmp(s, "auto") || !strcmp(s, "all"))) {
        o->batch_size = !strcmp(s, "auto") ? TOPLU_JOB_BATCH_AUTO : TOPLU_JOB_BATCH_ALL;
        return TOPLU_OK;
      }
      json_int_t x = json_integer_value(v);
      if (json_is_real(v)) { /* JSON has one number type: 4.0 and 4e3 are whole numbers too */
        double r = json_real_value(v);
        if (r == floor(r) && fabs(r) >= 9.2e18)
          return toplu__errorf(err, TOPLU_ERR_INVALID_ARGUMENT, "%s: %g is too large for a whole number", what, r);
        if (r != floor(r)) return toplu__errorf(err, TOPLU_ERR_INVALID_ARGUMENT, "%s is not a whole number", what);
        x = (json_int_t)r;
      }
      int pixels = !strcmp(key, "max_image_pixels"), line = !strcmp(key, "max_line_bytes");
      int64_t max = batch || pixels || line ? INT64_MAX : !strcmp(key, "threads") ? TOPLU_MAX_THREADS : 65536;
      if (!json_is_number(v) || x < keys[k].min || x > max) {
        char most[48] = "";
        if (max < INT64_MAX) snprintf(most, sizeof most, " (at most %lld)", (long long)max);
        return toplu__errorf(err, TOPLU_ERR_INVALID_ARGUMENT, "%s: expected a whole number >= %lld%s", what,
                            (long long)keys[k].min, batch ? ", \"auto\" or \"all\"" : most);
      }
      if (batch) o->batch_size = x;
      else if (pixels) o->max_image_pixels = x;
      else if (line) o->max_line_bytes = x;
      else if (!strcmp(key, "workers")) o->workers = (int)x;
      else if (!strcmp(key, "prefetch")) o->prefetch = (int)x;
      else if (!strcmp(key, "infer_workers")) o->infer_workers = (int)x;
      else o->threads = (int)x;
      return TOPLU_OK;
    }
    case K_SECONDS:
      if (!json_is_number(v) || !(json_number_value(v) >= 0) || json_number_value(v) > 1e6)
        return toplu__errorf(err, TOPLU_ERR_INVALID_ARGUMENT, "%s: expected a number of seconds (0 to 1000000)", what);
      o->checkpoint_seconds = json_number_value(v);
      return TOPLU_OK;
    default:
      if (!json_is_boolean(v)) return toplu__errorf(err, TOPLU_ERR_INVALID_ARGUMENT, "%s: expected true or false", what);
      if (!strcmp(key, "resume")) o->resume = json_is_true(v);
      else if (!strcmp(key, "allow_nonfinite")) o->allow_nonfinite = json_is_true(v);
      else if (!strcmp(key, "qdq_int8_all")) o->qdq_int8_all = json_is_true(v);
      else if (!strcmp(key, "overwrite")) o->overwrite = json_is_true(v);
      else o->fail_fast = json_is_true(v);
      return TOPLU_OK;
  }
  if (!strcmp(key, "output")) o->output = s;
  else if (!strcmp(key, "preprocess")) o->preprocess = s;
  else if (!strcmp(key, "postprocess")) o->postprocess = s;
  else if (!strcmp(key, "labels")) o->labels = s;
  else if (!strcmp(key, "errors")) o->errors = s;
  else if (!strcmp(key, "tune")) o->tune_file = s;
  else if (!strcmp(key, "sqlite_table")) o->sqlite_table = s; /* checked by toplu_job_create */
  else if (!strcmp(key, "length_buckets")) o->length_buckets = s; /* checked by toplu_job_create */
  else if (!strcmp(key, "shard")) {
    int64_t idx, cnt;
    if (pl_shard_parse(s, &idx, &cnt) || cnt > INT32_MAX)
      return toplu__errorf(err, TOPLU_ERR_INVALID_ARGUMENT, "%s: expected \"K/N\" with 0 <= K < N <= 2147483647", what);
    o->shard_index = (int)idx;
    o->shard_count = (int)cnt;
  } else if (!strcmp(key, "csv_delimiter")) {
    if (strlen(s) != 1 || !strchr(",;\t| ", s[0]))
      return toplu__errorf(err, TOPLU_ERR_INVALID_ARGUMENT, "%s: expected one of \",\" \";\" \"\\t\" \"|\" \" \"", what);
    o->csv_delimiter = s[0];
  } else if (!strcmp(key, "progress")) {
    static const char *const modes[] = {"auto", "bar", "lines", "none", NULL};
    int m = pick(s, modes);
    if (m < 0) return toplu__errorf(err, TOPLU_ERR_INVALID_ARGUMENT, "%s: expected auto, bar, lines or none", what);
    o->progress_mode = (toplu_progress_mode_t)m;
  } else {
    static const char *const modes[] = {"auto", "yes", "no", NULL};
    int m = pick(s, modes);
    if (m < 0) return toplu__errorf(err, TOPLU_ERR_INVALID_ARGUMENT, "%s: expected auto, yes or no", what);
    o->csv_header = (toplu_csv_header_t)m;
  }
  return TOPLU_OK;
}

/* The inputs: a string, a list of strings or an object of NAME: SOURCE. */
static toplu_status_t set_inputs(toplu_job_options_t *o, toplu_job_file_t *f, const char *path, const char *dir,
                                 json_t *in, const char *in_key, toplu_error_t *err) {
  size_t n = json_is_string(in) ? 1 : json_is_array(in) ? json_array_size(in) : json_is_object(in) ? json_object_size(in) : 0;
  if (!json_is_string(in) && !json_is_array(in) && !json_is_object(in))
    return toplu__errorf(err, TOPLU_ERR_INVALID_ARGUMENT, "%s: \"%s\": expected a string, a list or an object", path,
                        in_key);
  if (n > INT32_MAX - 1) return toplu__errorf(err, TOPLU_ERR_INVALID_ARGUMENT, "%s: \"%s\": too many inputs", path, in_key);
  f->inputs = calloc(n + 1, sizeof *f->inputs);
  if (!f->inputs) return toplu__errorf(err, TOPLU_ERR_OUT_OF_MEMORY, "%s: out of memory for %zu inputs", path, n);
  int count = 0;
  if (json_is_string(in)) {
    f->inputs[count++] = job_input(f, dir, NULL, json_string_value(in));
  } else if (json_is_array(in)) {
    for (size_t k = 0; k < n; k++) {
      const char *spec = json_string_value(json_array_get(in, k));
      if (!spec)
        return toplu__errorf(err, TOPLU_ERR_INVALID_ARGUMENT, "%s: \"%s\"[%zu]: expected a string \"[NAME=]SOURCE\"",
                            path, in_key, k);
      if (!(f->inputs[count++] = job_input(f, dir, NULL, spec))) break;
    }
  } else {
    const char *name;
    json_t *src;
    json_object_foreach(in, name, src) {
      if (!json_is_string(src))
        return toplu__errorf(err, TOPLU_ERR_INVALID_ARGUMENT,
                            "%s: \"%s\": \"%s\": expected the source's path (a string)", path, in_key, name);
      if (!(f->inputs[count++] = job_input(f, dir, name, json_string_value(src)))) break;
    }
  }
  for (int k = 0; k < count; k++)
    if (!f->inputs[k]) return toplu__errorf(err, TOPLU_ERR_OUT_OF_MEMORY, "%s: out of memory for its paths", path);
  o->inputs = f->inputs;
  o->n_inputs = count;
  return TOPLU_OK;
}

/* Every key of the file into opts (on a copy; the caller keeps it on success). */
static toplu_status_t parse(const char *path, toplu_job_options_t *o, toplu_job_file_t *f, toplu_error_t *err) {
  json_error_t je;
  char *text = NULL;
  size_t text_len = 0;
  /* a regular file (a folder or FIFO: TOPLU_ERR_INVALID_ARGUMENT naming it), at most 16 MiB */
  toplu_status_t rs = pl_file_read_limit(path, (int64_t)16 << 20, "a job file", &text, &text_len, err);
  if (rs) return rs;
  f->root = json_loadb(text, text_len, JSON_REJECT_DUPLICATES, &je);
  free(text);
  if (!f->root) {
    if (je.line > 0) return toplu__errorf(err, TOPLU_ERR_PARSE, "%s: line %d: %s", path, je.line, je.text);
    return toplu__errorf(err, TOPLU_ERR_IO, "%s: %s", path, je.text);
  }
  if (!json_is_object(f->root)) return toplu__errorf(err, TOPLU_ERR_PARSE, "%s: not a JSON object", path);
  char dir[4096];
  const char *sl = strrchr(path, '/');
  if (!sl) snprintf(dir, sizeof dir, ".");
  else if (sl == path) snprintf(dir, sizeof dir, "/");
  else if ((size_t)(sl - path) < sizeof dir) snprintf(dir, sizeof dir, "%.*s", (int)(sl - path), path);
  else return toplu__errorf(err, TOPLU_ERR_INVALID_ARGUMENT, "%s: path too long for its directory", path);
  /* Every unknown key at once. */
  char unknown[1024] = "";
  int n_unknown = 0;
  size_t len = 0;
  const char *key;
  json_t *v;
  json_object_foreach(f->root, key, v) {
    int known = !strcmp(key, "model") || !strcmp(key, "input") || !strcmp(key, "inputs");
    for (size_t k = 0; k < N_KEYS && !known; k++) known = !strcmp(key, keys[k].key);
    if (known) continue;
    int w = snprintf(unknown + len, sizeof unknown - len, "%s\"%s\"", n_unknown++ ? ", " : "", key);
    if (w < 0 || (size_t)w >= sizeof unknown - len) return toplu__errorf(err, TOPLU_ERR_INVALID_ARGUMENT,
                                                                     "%s: more unknown keys than fit a message, the "
                                                                     "first: %s",
                                                                     path, unknown[0] ? unknown : key);
    len += (size_t)w;
  }
  if (n_unknown)
    return toplu__errorf(err, TOPLU_ERR_INVALID_ARGUMENT,
                        "%s: unknown key%s %s (known: model, input, output, batch_size, preprocess, postprocess, "
                        "labels, workers, prefetch, infer_workers, threads, shard, resume, errors, fail_fast, allow_nonfinite, qdq_int8_all, "
                        "checkpoint_every, tune, progress, csv_header, csv_delimiter, overwrite, max_image_pixels, "
                        "max_line_bytes, sqlite_table, length_buckets)",
                        path, n_unknown == 1 ? "" : "s", unknown);
  if (json_object_get(f->root, "input") && json_object_get(f->root, "inputs"))
    return toplu__errorf(err, TOPLU_ERR_INVALID_ARGUMENT, "%s: give \"input\" or \"inputs\", not both", path);
  for (size_t k = 0; k < N_KEYS; k++) {
    v = json_object_get(f->root, keys[k].key);
    if (!v) continue;
    char *dumped = json_is_number(v) ? NULL : json_dumps(v, JSON_ENCODE_ANY | JSON_COMPACT), num[64];
    if (json_is_number(v)) number_text(v, num, sizeof num);
    char what[512];
    snprintf(what, sizeof what, "%s: \"%s\": %.200s", path, keys[k].key, json_is_number(v) ? num : dumped ? dumped : "?");
    free(dumped);
    toplu_status_t st = set_key(o, f, dir, (int)k, v, what, err);
    if (st) return st;
  }
  json_t *m = json_object_get(f->root, "model");
  if (m && (!json_is_string(m) || !*json_string_value(m)))
    return toplu__errorf(err, TOPLU_ERR_INVALID_ARGUMENT, "%s: \"model\": expected the model's path", path);
  if (m && !(o->model = job_path(f, dir, json_string_value(m))))
    return toplu__errorf(err, TOPLU_ERR_OUT_OF_MEMORY, "%s: out of memory for its paths", path);
  json_t *in = json_object_get(f->root, "input");
  const char *in_key = "input";
  if (!in) {
    in = json_object_get(f->root, "inputs");
    in_key = "inputs";
  }
  return in ? set_inputs(o, f, path, dir, in, in_key, err) : TOPLU_OK;
}

toplu_status_t toplu_job_options_from_json(const char *path, toplu_job_options_t *opts, toplu_job_file_t **file,
                                           toplu_error_t *err) {
  toplu_error_clear(err);
  if (file) *file = NULL;
  if (!path || !opts || !file) return toplu__errorf(err, TOPLU_ERR_INVALID_ARGUMENT, "path, opts and file are required");
  toplu_job_file_t *f = calloc(1, sizeof *f);
  if (!f) return toplu__errorf(err, TOPLU_ERR_OUT_OF_MEMORY, "out of memory for the job file %s", path);
  toplu_job_options_t o = *opts;
  toplu_status_t st = parse(path, &o, f, err);
  if (st) {
    toplu_job_file_free(f);
    return st;
  }
  *opts = o;
  *file = f;
  return TOPLU_OK;
}
