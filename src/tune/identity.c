/*
 * tune/identity.c - the model a tune result was measured on (see
 * tune/identity.h) and toplu_tune_result_matches_model (toplu/tuner.h).
 */
#include "tune/identity.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "core/error.h"
#include "toplu/tuner.h"

#define FNV_OFFSET UINT64_C(0xcbf29ce484222325)
#define FNV_PRIME UINT64_C(0x100000001b3)
#define CHUNK ((size_t)1 << 20)

/* The part of path after its last '/'. */
static const char *base_name(const char *path) {
  const char *s = strrchr(path, '/');
  return s ? s + 1 : path;
}

/* Same model file name, ignoring directories and a ".onnx" suffix (a
 * hand-written tune.json may say "resnet50" for resnet50.onnx). */
static int same_model_name(const char *a, const char *b) {
  a = base_name(a);
  b = base_name(b);
  size_t la = strlen(a), lb = strlen(b);
  if (la > 5 && !strcmp(a + la - 5, ".onnx")) la -= 5;
  if (lb > 5 && !strcmp(b + lb - 5, ".onnx")) lb -= 5;
  return la == lb && !strncmp(a, b, la);
}

toplu_status_t toplu_model_identity_of(const char *path, toplu_model_identity_t *id, toplu_error_t *err) {
  memset(id, 0, sizeof *id);
  snprintf(id->file, sizeof id->file, "%s", base_name(path));
  struct stat sb;
  if (stat(path, &sb) == 0 && S_ISDIR(sb.st_mode))
    return toplu_errorf(err, TOPLU_ERR_IO, "%s: is a directory, not a model file", path);
  FILE *f = fopen(path, "rb");
  if (!f) return toplu_errorf(err, TOPLU_ERR_IO, "%s: %s", path, strerror(errno));
  unsigned char *buf = malloc(CHUNK);
  if (!buf) {
    fclose(f);
    return toplu_errorf(err, TOPLU_ERR_OUT_OF_MEMORY, "out of memory");
  }
  uint64_t h = FNV_OFFSET, n = 0;
  size_t got;
  while ((got = fread(buf, 1, CHUNK, f)) > 0) {
    for (size_t i = 0; i < got; i++) {
      h ^= buf[i];
      h *= FNV_PRIME;
    }
    n += got;
  }
  int bad = ferror(f);
  int e = errno;
  fclose(f);
  free(buf);
  if (bad) return toplu_errorf(err, TOPLU_ERR_IO, "%s: read error: %s", path, strerror(e));
  id->bytes = n;
  id->fnv1a64 = h;
  id->hashed = 1;
  return TOPLU_OK;
}

json_t *toplu_model_identity_json(const toplu_model_identity_t *id, const char *inputs, int threads) {
  json_t *o = json_object();
  if (!o) return NULL;
  char hex[24];
  snprintf(hex, sizeof hex, "%016" PRIx64, id->fnv1a64);
  json_object_set_new(o, "file", json_string(id->file));
  json_object_set_new(o, "bytes", id->hashed ? json_integer((json_int_t)id->bytes) : json_null());
  json_object_set_new(o, "fnv1a64", id->hashed ? json_string(hex) : json_null());
  json_object_set_new(o, "inputs", json_string(inputs ? inputs : ""));
  json_object_set_new(o, "threads", json_integer(threads));
  return o;
}

/* "the model measured": the tune.json's model path, else its recorded file name. */
static const char *their_name(json_t *root, json_t *ident) {
  const char *m = json_string_value(json_object_get(root, "model"));
  if (m && *m) return m;
  m = json_string_value(json_object_get(ident, "file"));
  return m && *m ? m : "an unnamed model";
}

toplu_status_t toplu_tune_identity_check(json_t *root, const char *tune_path, const char *model_path, int *checked,
                                         toplu_error_t *err) {
  if (checked) *checked = 0;
  if (!json_is_object(root))
    return toplu_errorf(err, TOPLU_ERR_PARSE, "%s: not a JSON object (expected a toplu tune tune.json)", tune_path);
  json_t *ident = json_object_get(root, "model_identity");
  if (ident && !json_is_null(ident) && !json_is_object(ident))
    return toplu_errorf(err, TOPLU_ERR_PARSE, "%s: \"model_identity\" is not an object", tune_path);
  json_t *jb = json_object_get(ident, "bytes"), *jh = json_object_get(ident, "fnv1a64");
  int have_hash = json_is_string(jh) && json_is_integer(jb);
  if (ident && !have_hash && !(json_is_null(jh) || !jh))
    return toplu_errorf(err, TOPLU_ERR_PARSE, "%s: \"model_identity\" needs \"bytes\" (an integer) and \"fnv1a64\" "
                        "(16 hex digits)", tune_path);
  if (!have_hash) {
    /* No content hash: only a different file name can be told apart. */
    const char *theirs = json_string_value(json_object_get(ident, "file"));
    if (!theirs) theirs = json_string_value(json_object_get(root, "model"));
    if (theirs && *theirs && !same_model_name(theirs, model_path))
      return toplu_errorf(err, TOPLU_ERR_INVALID_ARGUMENT,
                          "%s is a tune result of another model: it was measured on '%s', this model is '%s' (the "
                          "file records no content hash); run `toplu tune %s` to measure this one",
                          tune_path, their_name(root, ident), model_path, model_path);
    return TOPLU_OK;
  }
  const char *hs = json_string_value(jh);
  char *end;
  errno = 0;
  unsigned long long theirs_hash = strtoull(hs, &end, 16);
  if (errno || *end || !*hs || strlen(hs) > 16 || json_integer_value(jb) < 0)
    return toplu_errorf(err, TOPLU_ERR_PARSE, "%s: \"model_identity\": bad \"fnv1a64\" '%s' (expected 16 hex digits)",
                        tune_path, hs);
  uint64_t theirs_bytes = (uint64_t)json_integer_value(jb);
  toplu_model_identity_t mine;
  toplu_status_t st = toplu_model_identity_of(model_path, &mine, err);
  if (st) return st;
  if (mine.bytes != theirs_bytes || mine.fnv1a64 != (uint64_t)theirs_hash)
    return toplu_errorf(err, TOPLU_ERR_INVALID_ARGUMENT,
                        "%s is a tune result of another model: it was measured on '%s' (%" PRIu64
                        " bytes, FNV-1a 64 %016llx), this model is '%s' (%" PRIu64
                        " bytes, FNV-1a 64 %016" PRIx64 "); run `toplu tune %s` to measure this one",
                        tune_path, their_name(root, ident), theirs_bytes, theirs_hash, model_path, mine.bytes,
                        mine.fnv1a64, model_path);
  if (checked) *checked = 1;
  return TOPLU_OK;
}

toplu_status_t toplu_tune_result_matches_model(const char *tune_path, const char *model_path, int *checked,
                                               toplu_error_t *err) {
  toplu_error_clear(err);
  if (checked) *checked = 0;
  if (!tune_path || !model_path)
    return toplu_errorf(err, TOPLU_ERR_INVALID_ARGUMENT, "toplu_tune_result_matches_model: NULL argument");
  struct stat sb;
  if (stat(tune_path, &sb) != 0) return toplu_errorf(err, TOPLU_ERR_IO, "%s: %s", tune_path, strerror(errno));
  if (S_ISDIR(sb.st_mode))
    return toplu_errorf(err, TOPLU_ERR_IO, "%s: is a directory (give the tune.json in it)", tune_path);
  json_error_t je;
  json_t *root = json_load_file(tune_path, 0, &je);
  if (!root) {
    FILE *f = fopen(tune_path, "rb");
    if (!f) return toplu_errorf(err, TOPLU_ERR_IO, "%s: %s", tune_path, strerror(errno));
    fclose(f);
    if (je.line > 0)
      return toplu_errorf(err, TOPLU_ERR_PARSE, "%s: not JSON (line %d: %s)", tune_path, je.line, je.text);
    return toplu_errorf(err, TOPLU_ERR_PARSE, "%s: not JSON (%s)", tune_path, je.text);
  }
  toplu_status_t st = toplu_tune_identity_check(root, tune_path, model_path, checked, err);
  json_decref(root);
  return st;
}
