/* pipeline/identity.c - identities of the files a job reads, canonical paths, comparing job settings (see identity.h). */
#include "pipeline/identity.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/identity.h"
#include "onnx/onnx_model.h"
#include "pipeline/files.h"

#define MIB (1 << 20)
/* How pl_identity_diff names a difference in the model's external data files ("external data's size"). */
#define EXTERNAL "external data's "
/* The hash of the identities written now (identity_json); an identity without "hash_alg" has FNV-1a 64's. */
#define HASH_ALG "xxh3_64"

/* A file's identity (core/identity.h) as a checkpoint records it; span as there.  Hashed with XXH3-64
 * ("hash_alg": "xxh3_64"); a checkpoint of an older toplu has no "hash_alg": FNV-1a 64 (legacy_hash). */
static json_t *identity_json(const char *path, uint64_t span, char *why, size_t why_size) {
  toplu__file_identity_t id;
  toplu_error_t err;
  if (toplu__file_identity_alg(path, span, TOPLU__HASH_XXH3_64, &id, &err)) {
    snprintf(why, why_size, "%s", err.message);
    return NULL;
  }
  char canon[PL_PATH_MAX], hex[32];
  if (pl_path_canon(path, canon, sizeof canon)) snprintf(canon, sizeof canon, "%s", path);
  snprintf(hex, sizeof hex, "%016llx", (unsigned long long)id.hash);
  json_t *o = json_object();
  if (!o) {
    snprintf(why, why_size, "out of memory identifying %s", path);
    return NULL;
  }
  json_object_set_new(o, "path", json_string(canon));
  json_object_set_new(o, "bytes", json_integer((json_int_t)id.bytes));
  json_object_set_new(o, "mtime_ns", json_integer(id.mtime_ns));
  json_object_set_new(o, "hash", json_string(hex));
  json_object_set_new(o, "hash_alg", json_string(HASH_ALG));
  if (span == TOPLU__IDENTITY_WHOLE) json_object_set_new(o, "hash_of", json_string("whole file"));
  else if (span == TOPLU__IDENTITY_DATA) json_object_set_new(o, "hash_of", json_string(id.whole ? "every byte" : "sampled"));
  return o;
}

json_t *pl_identity_file(const char *path, char *why, size_t why_size) {
  return identity_json(path, TOPLU__IDENTITY_DATA, why, why_size);
}

json_t *pl_identity_model(const char *path, char *why, size_t why_size) {
  json_t *o = identity_json(path, TOPLU__IDENTITY_WHOLE, why, why_size);
  if (!o) return NULL;
  /* Weights in external data files: each file whole, so that weights replaced beside an unchanged
   * graph file are a changed model (before 2026-12-06 only the .onnx file counted). */
  char **names = NULL;
  int n = 0;
  toplu_error_t err;
  if (toplu__onnx_external_files(path, &names, &n, &err)) {
    snprintf(why, why_size, "%s", err.message);
    json_decref(o);
    return NULL;
  }
  json_t *ext = n ? json_array() : NULL;
  for (int i = 0; i < n && o; i++) {
    json_t *e = identity_json(names[i], TOPLU__IDENTITY_WHOLE, why, why_size);
    if (!e || !ext || json_array_append_new(ext, e)) {
      if (ext && e) snprintf(why, why_size, "out of memory identifying %s", names[i]);
      json_decref(o);
      o = NULL;
    }
  }
  toplu__onnx_free_names(names, n);
  if (o && ext) json_object_set_new(o, "external", ext);
  else json_decref(ext);
  return o;
}

/* 1 when member key of a and b is present in either and differs. */
static int member_differs(const json_t *a, const json_t *b, const char *key) {
  json_t *x = json_object_get(a, key), *y = json_object_get(b, key);
  if (!x && !y) return 0;
  return !x || !y || !json_equal(x, y);
}

/* 1 when identity o's hash covers every byte of the file (a model, its external data, a data file up to
 * TOPLU__IDENTITY_DATA_WHOLE_MAX bytes). */
static int hashed_whole(const json_t *o) {
  const char *h = json_string_value(json_object_get(o, "hash_of"));
  return h && (!strcmp(h, "whole file") || !strcmp(h, "every byte"));
}

/* The hash algorithm of identity o: its "hash_alg", FNV-1a 64's name when it records none (an older toplu). */
static const char *hash_alg(const json_t *o) {
  const char *s = json_string_value(json_object_get(o, "hash_alg"));
  return s ? s : "fnv1a64";
}

/* The FNV-1a 64 hash (16 hex digits into hex) of the file identity o names (its "path"), over the parts its
 * "hash_of" says, as an older toplu recorded it: comparing a checkpoint of an older toplu with an identity of
 * this one re-reads the file once.  0, or -1 when o says no such parts or the file cannot be read. */
static int legacy_hash(const json_t *o, char hex[17]) {
  const char *path = json_string_value(json_object_get(o, "path"));
  const char *of = json_string_value(json_object_get(o, "hash_of"));
  if (!path || !of) return -1;
  uint64_t span = !strcmp(of, "whole file") ? TOPLU__IDENTITY_WHOLE
                  : !strcmp(of, "every byte") || !strcmp(of, "sampled") ? TOPLU__IDENTITY_DATA
                                                                         : 1;
  if (span == 1) return -1;
  toplu__file_identity_t id;
  toplu_error_t err;
  if (toplu__file_identity_alg(path, span, TOPLU__HASH_FNV1A64, &id, &err)) return -1;
  snprintf(hex, 17, "%016llx", (unsigned long long)id.hash);
  return 0;
}

const char *pl_identity_diff(const json_t *a, const json_t *b, int merge) {
  if (!json_is_object(a) || !json_is_object(b)) return NULL;
  json_t *xa = json_object_get(a, "external"), *xb = json_object_get(b, "external");
  if (xa || xb) {
    if (json_array_size(xa) != json_array_size(xb)) return "external data files";
    for (size_t i = 0; i < json_array_size(xa); i++) {
      const char *d = pl_identity_diff(json_array_get(xa, i), json_array_get(xb, i), merge);
      if (d) return !strcmp(d, "size") ? EXTERNAL "size" : EXTERNAL "content"; /* whole-hashed: no mtime */
    }
  }
  if (member_differs(a, b, "files")) return "number of files";
  if (member_differs(a, b, "bytes")) return "size";
  /* a checkpoint of an older toplu hashed a data file's first and last MiB only: its hash is not comparable */
  if (member_differs(a, b, "hash_of") && member_differs(a, b, "hash")) return "content hash";
  if (strcmp(hash_alg(a), hash_alg(b))) {
    /* one side hashed with FNV-1a 64 (a checkpoint of an older toplu), the other with XXH3-64: the file of the
     * XXH3 side hashed again as the older toplu did (the files of "now" on resume; on merge, the other shard's) */
    const json_t *x = strcmp(hash_alg(a), HASH_ALG) ? b : a, *old = x == a ? b : a;
    char hex[17];
    const char *theirs = json_string_value(json_object_get(old, "hash"));
    if (strcmp(hash_alg(old), "fnv1a64") || legacy_hash(x, hex)) return "content hash";
    if (!theirs || strcmp(theirs, hex)) return "content";
  } else if (member_differs(a, b, "hash")) {
    return "content";
  }
  /* a file hashed whole (the model, its external data) is the same file whatever its time: a copy made
   * without -p, or downloaded again, resumes (before 2026-12-06 it was refused as "the same size and bytes,
   * but modified since") */
  if (!merge && !(hashed_whole(a) && hashed_whole(b)) && member_differs(a, b, "mtime_ns"))
    return "modification time";
  return NULL;
}

/* Append component comp (length n) to the canonical path out (length *len), handling "." and "..". */
static int push_component(char *out, size_t size, size_t *len, const char *comp, size_t n) {
  if (n == 0 || (n == 1 && comp[0] == '.')) return 0;
  if (n == 2 && comp[0] == '.' && comp[1] == '.') {
    while (*len > 1 && out[*len - 1] != '/') (*len)--;
    if (*len > 1) (*len)--;
    out[*len] = '\0';
    return 0;
  }
  size_t need = *len + (*len > 1 ? 1 : 0) + n;
  if (need + 1 > size) return -1;
  if (*len > 1) out[(*len)++] = '/';
  memcpy(out + *len, comp, n);
  *len += n;
  out[*len] = '\0';
  return 0;
}

int pl_path_canon(const char *path, char *out, size_t size) {
  char abs[PL_PATH_MAX * 2], tmp[PATH_MAX];
  if (!path || !*path || size < 2) return -1;
  if (path[0] == '/') {
    if (strlen(path) >= sizeof abs) return -1;
    snprintf(abs, sizeof abs, "%s", path);
  } else {
    char cwd[PL_PATH_MAX];
    if (!getcwd(cwd, sizeof cwd)) return -1;
    if ((size_t)snprintf(abs, sizeof abs, "%s/%s", cwd, path) >= sizeof abs) return -1;
  }
  /* The whole path exists: realpath. */
  if (realpath(abs, tmp)) {
    if (strlen(tmp) >= size) return -1;
    snprintf(out, size, "%s", tmp);
    return 0;
  }
  /* Normalise lexically, then resolve the longest existing prefix. */
  char norm[PL_PATH_MAX * 2];
  size_t len = 1;
  norm[0] = '/';
  norm[1] = '\0';
  for (const char *p = abs; *p;) {
    while (*p == '/') p++;
    const char *e = p;
    while (*e && *e != '/') e++;
    if (push_component(norm, sizeof norm, &len, p, (size_t)(e - p))) return -1;
    p = e;
  }
  size_t cut = len;
  for (;;) {
    char save = norm[cut];
    norm[cut] = '\0';
    int ok = realpath(cut ? norm : "/", tmp) != NULL;
    norm[cut] = save;
    if (ok) break;
    while (cut > 0 && norm[cut - 1] != '/') cut--;
    if (cut > 0) cut--;
    if (cut == 0) {
      snprintf(tmp, sizeof tmp, "/");
      break;
    }
  }
  size_t tl = strlen(tmp);
  const char *rest = norm + cut;
  while (*rest == '/') rest++;
  int n = snprintf(out, size, "%s%s%s", tmp, *rest && tl > 1 ? "/" : "", rest);
  return n < 0 || (size_t)n >= size ? -1 : 0;
}

int pl_path_inside(const char *child, const char *dir) {
  size_t n = strlen(dir);
  if (n == 1 && dir[0] == '/') return child[0] == '/';
  return !strncmp(child, dir, n) && (child[n] == '\0' || child[n] == '/');
}

/* A setting as short text for messages (JSON; strings without quotes when short). */
static void show(const json_t *v, char *buf, size_t size) {
  if (!v) {
    snprintf(buf, size, "(not recorded)");
    return;
  }
  if (json_is_string(v)) {
    snprintf(buf, size, "\"%s\"", json_string_value(v));
    return;
  }
  char *t = json_dumps(v, JSON_ENCODE_ANY | JSON_COMPACT);
  snprintf(buf, size, "%s", t ? t : "?");
  free(t);
}

/* Describe how identity b differs from a (what: "size" ...) into why. */
static void explain_identity(const json_t *a, const json_t *b, const char *what, const char *name, int merge, char *why,
                             size_t why_size) {
  const char *pa = json_string_value(json_object_get(a, "path")), *pb = json_string_value(json_object_get(b, "path"));
  char detail[256];
  if (!strcmp(what, "size"))
    snprintf(detail, sizeof detail, "%lld bytes %s, %lld %s", (long long)json_integer_value(json_object_get(a, "bytes")),
             merge ? "in one" : "then", (long long)json_integer_value(json_object_get(b, "bytes")),
             merge ? "in the other" : "now");
  else if (!strcmp(what, "number of files"))
    snprintf(detail, sizeof detail, "%lld files %s, %lld %s", (long long)json_integer_value(json_object_get(a, "files")),
             merge ? "in one" : "then", (long long)json_integer_value(json_object_get(b, "files")),
             merge ? "in the other" : "now");
  else if (!strncmp(what, "external data", strlen("external data"))) {
    /* the first external file that differs, by name */
    json_t *xa = json_object_get(a, "external"), *xb = json_object_get(b, "external");
    const char *file = NULL;
    for (size_t i = 0; i < json_array_size(xa) && i < json_array_size(xb) && !file; i++)
      if (pl_identity_diff(json_array_get(xa, i), json_array_get(xb, i), merge))
        file = json_string_value(json_object_get(json_array_get(xb, i), "path"));
    if (file)
      snprintf(detail, sizeof detail, "the weights file %s differs (%s)", file,
               !strncmp(what, EXTERNAL, strlen(EXTERNAL)) ? what + strlen(EXTERNAL) : what);
    else
      snprintf(detail, sizeof detail, "%zu external data files %s, %zu %s", json_array_size(xa), merge ? "in one" : "then",
               json_array_size(xb), merge ? "in the other" : "now");
  } else if (!strcmp(what, "content hash"))
    snprintf(detail, sizeof detail, "%s",
             "the checkpoint was written by an older toplu, which hashed other parts of the file; start over "
             "without resume");
  else if (!strcmp(what, "content"))
    snprintf(detail, sizeof detail, "%s",
             json_object_get(b, "files") ? "the file names or sizes differ"
             : hashed_whole(b)           ? "the same size, other bytes"
             : json_object_get(b, "hash_of")
                 ? "the same size, other bytes in the parts hashed (its first and last MiB and 62 blocks of 64 KiB "
                   "between them)"
                 : "the same size, other bytes in its first or last MiB");
  else
    snprintf(detail, sizeof detail, "%s",
             json_object_get(b, "files") ? "the same file names and sizes, but a file modified since"
             : hashed_whole(b)           ? "the same size and bytes, but modified since"
             : json_object_get(b, "hash_of")
                 ? "the same size and the same bytes in the parts hashed, but modified since"
                 : "the same size and first and last MiB, but modified since");
  if (merge && !strncmp(what, "external data", strlen("external data")))
    snprintf(why, why_size, "%s differs (%s: %s): %s there, %s here", name, what, detail, pa ? pa : "?", pb ? pb : "?");
  else if (merge)
    snprintf(why, why_size, "%s differs (%s): %s there, %s here", name, what, pa ? pa : "?", pb ? pb : "?");
  else if (pa && pb && strcmp(pa, pb))
    snprintf(why, why_size, "%s changed: the checkpoint's was %s, now %s; its %s differs: %s", name, pa, pb, what, detail);
  else
    snprintf(why, why_size, "%s (%s) changed since the checkpoint: its %s differs: %s", name, pb ? pb : "?", what, detail);
}

/* Plain settings compared on resume (and which also on merge), with what they are when the key does not say it. */
static const struct {
  const char *key, *option;
  int on_merge;
  const char *unset; /* what an absent key means (recorded only when set), NULL: "(not recorded)" */
} plain_keys[] = {
    {"rows", "the number of input rows", 1, NULL},
    {"preprocess", NULL, 1, NULL},
    {"postprocess", NULL, 1, NULL},
    {"csv_header", NULL, 1, NULL},
    {"batch_size", NULL, 0, NULL},
    {"errors", "the errors file", 0, NULL},
    {"shard", NULL, 0, NULL},
    {"row_first", "the shard's first row", 0, NULL},
    {"row_end", "the shard's end row", 0, NULL},
    {"allow_nonfinite", NULL, 1, "false"},
    {"qdq_int8_all", NULL, 1, "false"},
    {"length_buckets", NULL, 1, "none"},
    {"text_format", "how JSON and CSV write bools and negative zero", 1, "bools 0/1, -0 (toplu before 2026-12-06)"},
};

/* A checkpoint's postprocess text (pl_post_describe: "softmax,topk,output=1,labels=1000,k=5[,only]") in the words
 * of the spec a user gives ("softmax,topk=5 of output #1, 1000 labels"); the text itself when it does not parse
 * (the message quoted it, output index and label count as they were: a fresh user's finding of 2026-12-06). */
static void post_readable(const char *desc, char *out, size_t size) {
  int softmax = !strncmp(desc, "softmax,", 8), out_i = 0, labels = 0, k = 0;
  const char *p = softmax ? desc + 8 : desc;
  char kind[16] = "";
  int n = 0;
  if (sscanf(p, "%15[a-z],output=%d,labels=%d,k=%d%n", kind, &out_i, &labels, &k, &n) != 4) {
    snprintf(out, size, "\"%s\"", desc);
    return;
  }
  int only = !strcmp(p + n, ",only"), f64 = !strcmp(p + n, ",f64");
  char what[48];
  if (!strcmp(kind, "topk")) snprintf(what, sizeof what, "topk=%d", k);
  else snprintf(what, sizeof what, "%s", kind);
  if (!strcmp(kind, "raw") && !only && !softmax)
    snprintf(out, size, "raw (every output)");
  else
    snprintf(out, size, "%s%s of output #%d%s%s%.0d%s%s", softmax ? "softmax," : "", what, out_i, only ? " alone" : "",
             labels ? ", " : "", labels, labels ? " labels" : "", f64 ? ", float64 scores" : "");
}

int pl_job_diff(const json_t *saved, const json_t *now, int merge, char *why, size_t why_size) {
  why[0] = '\0';
  if (!json_is_object(saved) || !json_is_object(json_object_get(saved, "model")) ||
      !json_is_array(json_object_get(saved, "inputs")))
    return 2;
  const char *what = pl_identity_diff(json_object_get(saved, "model"), json_object_get(now, "model"), merge);
  if (what) {
    explain_identity(json_object_get(saved, "model"), json_object_get(now, "model"), what, "the model", merge, why,
                     why_size);
    return 1;
  }
  json_t *ia = json_object_get(saved, "inputs"), *ib = json_object_get(now, "inputs");
  if (json_array_size(ia) != json_array_size(ib)) {
    snprintf(why, why_size, "%s %zu sources, %s %zu", merge ? "one reads" : "it read", json_array_size(ia),
             merge ? "the other" : "now", json_array_size(ib));
    return 1;
  }
  for (size_t i = 0; i < json_array_size(ia); i++) {
    json_t *a = json_array_get(ia, i), *b = json_array_get(ib, i);
    const char *fa = json_string_value(json_object_get(a, "feeds")), *fb = json_string_value(json_object_get(b, "feeds"));
    const char *ka = json_string_value(json_object_get(a, "kind")), *kb = json_string_value(json_object_get(b, "kind"));
    char name[512];
    snprintf(name, sizeof name, "input '%s'", fb ? fb : "?");
    if (!fa || !fb || strcmp(fa, fb)) {
      snprintf(why, why_size, "source %zu feeds '%s' %s, '%s' %s", i + 1, fa ? fa : "?", merge ? "in one" : "then",
               fb ? fb : "?", merge ? "in the other" : "now");
      return 1;
    }
    if (!ka || !kb || strcmp(ka, kb)) {
      snprintf(why, why_size, "%s is a %s source %s, a %s source %s", name, ka ? ka : "?", merge ? "in one" : "then",
               kb ? kb : "?", merge ? "in the other" : "now");
      return 1;
    }
    json_t *sa = json_object_get(a, "source"), *sb = json_object_get(b, "source");
    if ((what = pl_identity_diff(sa, sb, merge))) {
      explain_identity(sa, sb, what, name, merge, why, why_size);
      return 1;
    }
  }
  json_t *la = json_object_get(saved, "labels"), *lb = json_object_get(now, "labels");
  if (json_is_object(la) != json_is_object(lb)) {
    snprintf(why, why_size, "labels: %s %s, %s %s", json_is_object(la) ? "a labels file" : "none",
             merge ? "in one" : "then", json_is_object(lb) ? "a labels file" : "none", merge ? "in the other" : "now");
    return 1;
  }
  if ((what = pl_identity_diff(la, lb, merge))) {
    explain_identity(la, lb, what, "the labels file", merge, why, why_size);
    return 1;
  }
  for (size_t k = 0; k < sizeof plain_keys / sizeof plain_keys[0]; k++) {
    if (merge && !plain_keys[k].on_merge) continue;
    json_t *a = json_object_get(saved, plain_keys[k].key), *b = json_object_get(now, plain_keys[k].key);
    if (a && b && json_equal(a, b)) continue;
    if (!a && !b) continue;
    char x[1024], y[1024];
    show(a, x, sizeof x);
    show(b, y, sizeof y);
    if (!a && plain_keys[k].unset) snprintf(x, sizeof x, "%s", plain_keys[k].unset);
    if (!b && plain_keys[k].unset) snprintf(y, sizeof y, "%s", plain_keys[k].unset);
    if (!strcmp(plain_keys[k].key, "postprocess") && json_is_string(a) && json_is_string(b)) {
      post_readable(json_string_value(a), x, sizeof x);
      post_readable(json_string_value(b), y, sizeof y);
    }
    const char *opt = plain_keys[k].option;
    if (merge)
      snprintf(why, why_size, "%s%s%s%s is %s there, %s here", plain_keys[k].key, opt ? " (" : "", opt ? opt : "",
               opt ? ")" : "", x, y);
    else
      snprintf(why, why_size, "%s%s%s%s was %s, now %s", plain_keys[k].key, opt ? " (" : "", opt ? opt : "",
               opt ? ")" : "", x, y);
    return 1;
  }
  if (merge) {
    const char *sa = json_string_value(json_object_get(saved, "shard")), *sb = json_string_value(json_object_get(now, "shard"));
    const char *na = sa ? strchr(sa, '/') : NULL, *nb = sb ? strchr(sb, '/') : NULL;
    if (!na || !nb || strcmp(na, nb)) {
      snprintf(why, why_size, "it is shard %s there, %s here (another number of shards)", sa ? sa : "?", sb ? sb : "?");
      return 1;
    }
  }
  return 0;
}
