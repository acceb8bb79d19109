/* core/identity.c - file and model identities (see identity.h). */
#include "core/identity.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <xxhash.h>

#include "core/error.h"
#include "core/hash.h"

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

/* The running hash of one file: FNV-1a 64 in h, or XXH3-64 in x (not NULL). */
typedef struct {
  uint64_t h;
  XXH3_state_t *x;
} hasher_t;

/* Hash len bytes of fd from offset into *hs; 0, or errno (EIO for a file that shrank). */
static int hash_range(int fd, uint64_t offset, uint64_t len, unsigned char *buf, hasher_t *hs) {
  uint64_t done = 0;
  while (done < len) {
    size_t want = len - done < CHUNK ? (size_t)(len - done) : CHUNK;
    ssize_t r = pread(fd, buf, want, (off_t)(offset + done));
    if (r < 0 && errno == EINTR) continue;
    if (r < 0) return errno;
    if (r == 0) return EIO;
    if (hs->x) XXH3_64bits_update(hs->x, buf, (size_t)r);
    else hs->h = toplu__fnv1a64(hs->h, buf, (size_t)r);
    done += (uint64_t)r;
  }
  return 0;
}

toplu_status_t toplu__file_identity(const char *path, uint64_t span, toplu__file_identity_t *id, toplu_error_t *err) {
  return toplu__file_identity_alg(path, span, TOPLU__HASH_FNV1A64, id, err);
}

toplu_status_t toplu__file_identity_alg(const char *path, uint64_t span, toplu__hash_alg_t alg,
                                        toplu__file_identity_t *id, toplu_error_t *err) {
  memset(id, 0, sizeof *id);
  id->alg = alg;
  if (!path) return toplu__errorf(err, TOPLU_ERR_INVALID_ARGUMENT, "file identity: NULL path");
  snprintf(id->file, sizeof id->file, "%s", base_name(path));
  int fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC); /* a FIFO must not block: only regular files are hashed */
  struct stat sb;
  if (fd < 0 || fstat(fd, &sb) != 0) {
    int e = errno;
    if (fd >= 0) close(fd);
    return toplu__errorf(err, TOPLU_ERR_IO, "%s: %s", path, strerror(e));
  }
  if (S_ISDIR(sb.st_mode)) {
    close(fd);
    return toplu__errorf(err, TOPLU_ERR_IO, "%s: is a directory, not a file", path);
  }
  uint64_t size = sb.st_size > 0 ? (uint64_t)sb.st_size : 0;
  hasher_t hs = {TOPLU__FNV1A64_INIT, NULL};
  if (alg == TOPLU__HASH_XXH3_64 && (!(hs.x = XXH3_createState()) || XXH3_64bits_reset(hs.x) != XXH_OK)) {
    XXH3_freeState(hs.x);
    close(fd);
    return toplu__errorf(err, TOPLU_ERR_OUT_OF_MEMORY, "%s: out of memory identifying it", path);
  }
  int bad = 0;
  if (S_ISREG(sb.st_mode) && size > 0) {
    unsigned char *buf = malloc(CHUNK);
    if (!buf) {
      XXH3_freeState(hs.x);
      close(fd);
      return toplu__errorf(err, TOPLU_ERR_OUT_OF_MEMORY, "%s: out of memory identifying it", path);
    }
    const uint64_t ends = span == TOPLU__IDENTITY_DATA ? CHUNK : span, block = (uint64_t)64 << 10;
    if (span == TOPLU__IDENTITY_WHOLE || size <= 2 * ends ||
        (span == TOPLU__IDENTITY_DATA && size <= TOPLU__IDENTITY_DATA_WHOLE_MAX)) {
      bad = hash_range(fd, 0, size, buf, &hs);
      id->whole = 1;
    } else {
      bad = hash_range(fd, 0, ends, buf, &hs);
      /* the blocks between the ends, evenly spaced (the span between is over 254 MiB: they do not overlap) */
      for (uint64_t k = 1; span == TOPLU__IDENTITY_DATA && !bad && k <= TOPLU__IDENTITY_BLOCKS; k++)
        bad = hash_range(fd, ends + (size - 2 * ends - block) / (TOPLU__IDENTITY_BLOCKS + 1) * k, block, buf, &hs);
      if (!bad) bad = hash_range(fd, size - ends, ends, buf, &hs);
    }
    free(buf);
  }
  close(fd);
  uint64_t h = hs.x ? (uint64_t)XXH3_64bits_digest(hs.x) : hs.h;
  XXH3_freeState(hs.x);
  if (bad) return id->whole = 0, toplu__errorf(err, TOPLU_ERR_IO, "%s: read error: %s", path, strerror(bad));
  id->bytes = size;
  id->mtime_ns = (int64_t)sb.st_mtim.tv_sec * 1000000000 + sb.st_mtim.tv_nsec;
  id->hash = h;
  id->hashed = 1;
  return TOPLU_OK;
}

json_t *toplu__model_identity_json(const toplu__file_identity_t *id, const char *inputs, int threads) {
  json_t *o = json_object();
  if (!o) return NULL;
  char hex[24];
  snprintf(hex, sizeof hex, "%016" PRIx64, id->hash);
  json_object_set_new(o, "file", json_string(id->file));
  json_object_set_new(o, "bytes", id->hashed ? json_integer((json_int_t)id->bytes) : json_null());
  json_object_set_new(o, "fnv1a64", id->hashed ? json_string(hex) : json_null());
  json_object_set_new(o, "inputs", json_string(inputs ? inputs : ""));
  json_object_set_new(o, "threads", json_integer(threads));
  return o;
}

/* "the model measured": the tune result's model path, else its recorded file name. */
static const char *their_name(json_t *root, json_t *ident) {
  const char *m = json_string_value(json_object_get(root, "model"));
  if (m && *m) return m;
  m = json_string_value(json_object_get(ident, "file"));
  return m && *m ? m : "an unnamed model";
}

toplu_status_t toplu__model_identity_check(json_t *root, const char *tune_path, const char *model_path, int *checked,
                                           toplu_error_t *err) {
  if (checked) *checked = 0;
  if (!json_is_object(root))
    return toplu__errorf(err, TOPLU_ERR_PARSE, "%s: not a JSON object (expected a tune result, tune.json)", tune_path);
  json_t *ident = json_object_get(root, "model_identity");
  if (ident && !json_is_null(ident) && !json_is_object(ident))
    return toplu__errorf(err, TOPLU_ERR_PARSE, "%s: \"model_identity\" is not an object", tune_path);
  json_t *jb = json_object_get(ident, "bytes"), *jh = json_object_get(ident, "fnv1a64");
  int have_hash = json_is_string(jh) && json_is_integer(jb);
  if (ident && !have_hash && !(json_is_null(jh) || !jh))
    return toplu__errorf(err, TOPLU_ERR_PARSE, "%s: \"model_identity\" needs \"bytes\" (an integer) and \"fnv1a64\" "
                        "(16 hex digits)", tune_path);
  if (!have_hash) {
    /* No content hash: only a different file name can be told apart. */
    const char *theirs = json_string_value(json_object_get(ident, "file"));
    if (!theirs) theirs = json_string_value(json_object_get(root, "model"));
    if (theirs && *theirs && !same_model_name(theirs, model_path))
      return toplu__errorf(err, TOPLU_ERR_INVALID_ARGUMENT,
                          "%s is a tune result of another model: it was measured on '%s', this model is '%s' (the "
                          "file records no content hash); tune this model to calibrate with it",
                          tune_path, their_name(root, ident), model_path);
    return TOPLU_OK;
  }
  const char *hs = json_string_value(jh);
  char *end;
  errno = 0;
  unsigned long long theirs_hash = strtoull(hs, &end, 16);
  if (errno || *end || !*hs || strlen(hs) > 16 || json_integer_value(jb) < 0)
    return toplu__errorf(err, TOPLU_ERR_PARSE, "%s: \"model_identity\": bad \"fnv1a64\" '%s' (expected 16 hex digits)",
                        tune_path, hs);
  uint64_t theirs_bytes = (uint64_t)json_integer_value(jb);
  toplu__file_identity_t mine;
  toplu_status_t st = toplu__file_identity(model_path, TOPLU__IDENTITY_WHOLE, &mine, err);
  if (st) return st;
  if (mine.bytes != theirs_bytes || mine.hash != (uint64_t)theirs_hash)
    return toplu__errorf(err, TOPLU_ERR_INVALID_ARGUMENT,
                        "%s is a tune result of another model: it was measured on '%s' (%" PRIu64
                        " bytes, FNV-1a 64 %016llx), this model is '%s' (%" PRIu64
                        " bytes, FNV-1a 64 %016" PRIx64 "); tune this model to calibrate with it",
                        tune_path, their_name(root, ident), theirs_bytes, theirs_hash, model_path, mine.bytes,
                        mine.hash);
  if (checked) *checked = 1;
  return TOPLU_OK;
}
