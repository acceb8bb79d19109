/* pipeline/checkpoint.c - reading, writing and comparing job checkpoints. */
#include "pipeline/checkpoint.h"

#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "pipeline/files.h"

void pl_state_free(pl_state_t *st) {
  json_decref(st->job);
  json_decref(st->extra);
  memset(st, 0, sizeof *st);
}

void pl_state_copy(pl_state_t *dst, const pl_state_t *src) {
  *dst = *src;
  json_incref(dst->job);
  json_incref(dst->extra);
}

static const char *phase_names[] = {"running", "finishing", "complete"};

char *pl_state_dump(const pl_state_t *st) {
  json_t *o = json_object(), *files = json_array();
  if (!o || !files) {
    json_decref(o);
    json_decref(files);
    return NULL;
  }
  for (int i = 0; i < st->n_files; i++) json_array_append_new(files, json_integer(st->file_bytes[i]));
  json_object_set_new(o, "format", json_string("toplu-job-checkpoint-1"));
  json_object_set_new(o, "phase", json_string(phase_names[st->phase]));
  json_object_set_new(o, "next_row", json_integer(st->next_row));
  json_object_set_new(o, "processed", json_integer(st->processed));
  json_object_set_new(o, "failed", json_integer(st->failed));
  json_object_set_new(o, "errors_bytes", json_integer(st->errors_bytes));
  json_object_set_new(o, "file_bytes", files);
  if (st->job) json_object_set(o, "job", st->job);
  if (st->extra) json_object_set(o, "extra", st->extra);
  char *text = json_dumps(o, JSON_SORT_KEYS | JSON_INDENT(1));
  json_decref(o);
  return text;
}

/* An integer member >= 0; -1 when missing or bad. */
static int64_t get_int(json_t *o, const char *key) {
  json_t *v = json_object_get(o, key);
  return json_is_integer(v) && json_integer_value(v) >= 0 ? (int64_t)json_integer_value(v) : -1;
}

toplu_status_t pl_state_parse(const char *text, const char *name, pl_state_t *st, toplu_error_t *err) {
  memset(st, 0, sizeof *st);
  json_error_t je;
  json_t *o = json_loads(text, 0, &je);
  if (!o) return toplu__errorf(err, TOPLU_ERR_PARSE, "checkpoint %s: %s (line %d)", name, je.text, je.line);
  const char *fmt = json_string_value(json_object_get(o, "format"));
  const char *phase = json_string_value(json_object_get(o, "phase"));
  json_t *files = json_object_get(o, "file_bytes");
  toplu_status_t s = TOPLU_OK;
  if (!fmt || strcmp(fmt, "toplu-job-checkpoint-1") || !phase || !json_is_array(files) ||
      json_array_size(files) > PL_STATE_FILES)
    s = toplu__errorf(err, TOPLU_ERR_PARSE, "checkpoint %s: not a toplu job checkpoint (format toplu-job-checkpoint-1)",
                     name);
  int known = 0;
  for (int p = 0; !s && p < 3; p++)
    if (!strcmp(phase, phase_names[p])) {
      st->phase = (pl_phase_t)p;
      known = 1;
    }
  if (!s && !known) s = toplu__errorf(err, TOPLU_ERR_PARSE, "checkpoint %s: unknown phase '%s'", name, phase);
  st->next_row = get_int(o, "next_row");
  st->processed = get_int(o, "processed");
  st->failed = get_int(o, "failed");
  st->errors_bytes = get_int(o, "errors_bytes");
  if (!s && (st->next_row < 0 || st->processed < 0 || st->failed < 0 || st->errors_bytes < 0))
    s = toplu__errorf(err, TOPLU_ERR_PARSE, "checkpoint %s: a counter is missing or negative", name);
  for (size_t i = 0; !s && i < json_array_size(files); i++) {
    json_t *v = json_array_get(files, i);
    if (!json_is_integer(v) || json_integer_value(v) < 0)
      s = toplu__errorf(err, TOPLU_ERR_PARSE, "checkpoint %s: bad file_bytes", name);
    else st->file_bytes[st->n_files++] = (int64_t)json_integer_value(v);
  }
  if (!s) {
    st->job = json_incref(json_object_get(o, "job"));
    st->extra = json_incref(json_object_get(o, "extra"));
  }
  json_decref(o);
  if (s) pl_state_free(st);
  return s;
}

toplu_status_t pl_state_save(const char *path, const pl_state_t *st, toplu_error_t *err) {
  char *text = pl_state_dump(st);
  if (!text) return toplu__errorf(err, TOPLU_ERR_OUT_OF_MEMORY, "out of memory writing %s", path);
  size_t n = strlen(text);
  text[n] = '\0';
  char *t2 = realloc(text, n + 2);
  if (t2) {
    text = t2;
    text[n++] = '\n';
  }
  toplu_status_t s = pl_file_replace(path, text, n, err);
  free(text);
  return s;
}

toplu_status_t pl_state_load(const char *path, pl_state_t *st, int *found, toplu_error_t *err) {
  memset(st, 0, sizeof *st);
  *found = 0;
  if (!pl_exists(path)) return TOPLU_OK;
  char *text;
  size_t len;
  toplu_status_t s = pl_file_read(path, &text, &len, err);
  if (s) return s;
  s = pl_state_parse(text, path, st, err);
  free(text);
  if (!s) *found = 1;
  return s;
}

toplu_status_t pl_state_check_job(const json_t *saved, const json_t *now, const char *where, const char *const *ignore,
                                  toplu_error_t *err) {
  if (!json_is_object(saved))
    return toplu__errorf(err, TOPLU_ERR_PARSE, "checkpoint %s does not record the job's settings", where);
  const char *key;
  json_t *v;
  json_object_foreach((json_t *)now, key, v) {
    int skip = 0;
    for (int i = 0; ignore && ignore[i]; i++) skip |= !strcmp(ignore[i], key);
    if (skip) continue;
    json_t *old = json_object_get(saved, key);
    if (old && json_equal(old, v)) continue;
    char *a = old ? json_dumps(old, JSON_ENCODE_ANY | JSON_COMPACT) : NULL, *b = json_dumps(v, JSON_ENCODE_ANY | JSON_COMPACT);
    toplu__errorf(err, TOPLU_ERR_INVALID_ARGUMENT,
                 "resume: the checkpoint %s is for another job: %s was %s, now %s; start over without resume",
                 where, key, a ? a : "(not recorded)", b ? b : "?");
    free(a);
    free(b);
    return TOPLU_ERR_INVALID_ARGUMENT;
  }
  return TOPLU_OK;
}
