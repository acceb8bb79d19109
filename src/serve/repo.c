/*
 * serve/repo.c - the model repository: the table of loaded versions, load,
 * unload and reload without dropping traffic, and the reaper that frees
 * versions once they have drained.
 *
 * Layout (Triton's "Model Repository"): DIR/<name>/config.pbtxt or
 * DIR/<name>/config.json (optional: defaults without either; both is an
 * error) and DIR/<name>/<version>/model.onnx (or the file
 * default_model_filename names) with numeric
 * version folders; version_policy picks which versions load (latest 1 by
 * default).  A (re)load builds and warms every new version before it
 * replaces the old ones in the table, under one lock, so requests always
 * find a ready version; the old ones stop taking requests, run what they
 * had queued, and are freed once the last request holding them is answered.
 */
#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include "core/error.h"
#include "core/file.h"
#include "serve/pbtxt.h"
#include "serve/server.h"

static int is_dir(const char *p) {
  struct stat st;
  return stat(p, &st) == 0 && S_ISDIR(st.st_mode);
}

static int is_file(const char *p) {
  struct stat st;
  return stat(p, &st) == 0 && S_ISREG(st.st_mode);
}

/* A model name as a folder name: no '/', not "." or "..", not empty. */
int srv_repo_valid_name(const char *n) {
  return n && *n && strcmp(n, ".") && strcmp(n, "..") && !strchr(n, '/') && strlen(n) < SRV_NAME_MAX;
}

srv_model_t *srv_repo_find(srv_server_t *s, const char *name, const char *version) {
  srv_model_t *best = NULL;
  pthread_mutex_lock(&s->repo_mu);
  for (int i = 0; i < s->n_models; i++) {
    srv_model_t *m = s->models[i];
    if (strcmp(m->name, name) || !atomic_load(&m->ready)) continue;
    if (version && *version) {
      if (!strcmp(m->version, version)) {
        best = m;
        break;
      }
    } else if (!best || m->version_num > best->version_num) {
      best = m;
    }
  }
  if (best) srv_model_ref(best);
  pthread_mutex_unlock(&s->repo_mu);
  return best;
}

/* Record (why) or clear (why NULL) the failed load of name, under repo_mu.
 * Returns 1 when an earlier failure of name was dropped, else 0. */
static int set_failed(srv_server_t *s, const char *name, const char *why) {
  int had = 0;
  for (int i = 0; i < s->n_failed; i++) {
    if (!strncmp(s->failed[i], name, strlen(name)) && s->failed[i][strlen(name)] == '\t') {
      free(s->failed[i]);
      s->failed[i] = s->failed[--s->n_failed];
      had = 1;
      break;
    }
  }
  if (!why) return had;
  size_t n = strlen(name) + strlen(why) + 2;
  char *e = malloc(n);
  char **nf = realloc(s->failed, (size_t)(s->n_failed + 1) * sizeof *nf);
  if (!e || !nf) {
    free(e);
    if (nf) s->failed = nf;
    return had;
  }
  s->failed = nf;
  snprintf(e, n, "%s\t%s", name, why);
  s->failed[s->n_failed++] = e;
  return had;
}

static void retire(srv_server_t *s, srv_model_t *m) {
  atomic_store(&m->ready, 0);
  srv_batcher_drain(m->batcher, 0);
  if (s->cache) srv_cache_drop_owner(s->cache, m->owner);
  pthread_mutex_lock(&s->retire_mu);
  srv_model_t **nr = realloc(s->retired, (size_t)(s->n_retired + 1) * sizeof *nr);
  if (nr) {
    s->retired = nr;
    s->retired[s->n_retired++] = m;
  }
  pthread_cond_broadcast(&s->retire_cv);
  pthread_mutex_unlock(&s->retire_mu);
  if (!nr) {
    /* Out of memory for the list: wait for it here. */
    srv_batcher_wait_idle(m->batcher, 0);
    while (atomic_load(&m->refs) > 1) {
      struct timespec ts = {0, 10000000};
      nanosleep(&ts, NULL);
    }
    srv_model_free(m);
    return;
  }
  srv_model_unref(m); /* the table's reference */
}

static int cmp_i64_desc(const void *a, const void *b) {
  int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
  return x < y ? 1 : x > y ? -1 : 0;
}

/* Read DIR/<name>/config.json or config.pbtxt (protobuf text, converted to
 * JSON: serve/pbtxt.h) into cfg, cfg->source naming the file (defaults when
 * neither exists).  Both is an error: Triton reads only config.pbtxt, and
 * picking one silently could serve a configuration the user did not mean. */
static int read_config(srv_server_t *s, const char *name, srv_config_t *cfg, toplu_error_t *err) {
  srv_config_defaults(cfg);
  snprintf(cfg->name, sizeof cfg->name, "%s", name);
  char path[4400], pbtxt[4400];
  snprintf(path, sizeof path, "%s/%s/config.json", s->repo_dir, name);
  snprintf(pbtxt, sizeof pbtxt, "%s/%s/config.pbtxt", s->repo_dir, name);
  struct stat st;
  int has_json = stat(path, &st) == 0, has_pbtxt = stat(pbtxt, &st) == 0;
  if (has_json && has_pbtxt)
    return toplu__errorf(err, TOPLU_ERR_INVALID_MODEL,
                         "%s/%s: both config.json and config.pbtxt exist; keep one (Triton reads config.pbtxt only, "
                         "and toplu will not pick one silently)",
                         s->repo_dir, name),
           -1;
  if (has_pbtxt) memcpy(path, pbtxt, sizeof path);
  /* a FIFO (or a device) would block the open and the read for ever: the server never started and did not stop on
   * SIGTERM (a fresh user's finding of 2026-12-06) */
  if ((has_json || has_pbtxt) && stat(path, &st) == 0 && !S_ISREG(st.st_mode))
    return toplu__errorf(err, TOPLU_ERR_INVALID_MODEL, "%s is %s; a configuration is a regular file", path,
                         toplu__file_kind((unsigned)st.st_mode)),
           -1;
  FILE *f = fopen(path, "rb");
  if (!f) {
    if (errno == ENOENT) return 0;
    return toplu__errorf(err, TOPLU_ERR_IO, "%s: %s", path, strerror(errno)), -1;
  }
  pl_buf_t b = {0};
  char chunk[65536];
  size_t k;
  while ((k = fread(chunk, 1, sizeof chunk, f)) > 0) {
    pl_buf_append(&b, chunk, k);
    if (b.len > (16u << 20)) break;
  }
  int rerr = ferror(f);
  fclose(f);
  if (rerr || b.oom || b.len > (16u << 20)) {
    pl_buf_free(&b);
    return toplu__errorf(err, TOPLU_ERR_IO, "%s: cannot be read%s", path, rerr ? "" : " (over 16 MiB or out of memory)"), -1;
  }
  char why[1024];
  int rc;
  if (has_pbtxt) {
    char *json = srv_pbtxt_to_json(b.data ? b.data : "", b.len, path, why, sizeof why);
    rc = json ? srv_config_parse(json, strlen(json), path, cfg, why, sizeof why) : -1;
    free(json);
  } else {
    rc = srv_config_parse(b.data ? b.data : "", b.len, path, cfg, why, sizeof why);
  }
  pl_buf_free(&b);
  if (rc) return toplu__errorf(err, TOPLU_ERR_INVALID_MODEL, "%s", why), -1;
  if (cfg->name[0] && strcmp(cfg->name, name))
    return toplu__errorf(err, TOPLU_ERR_INVALID_MODEL, "%s: name '%s' is not the folder's name '%s'", path, cfg->name, name), -1;
  snprintf(cfg->name, sizeof cfg->name, "%s", name);
  snprintf(cfg->source, sizeof cfg->source, "%s", has_pbtxt ? "config.pbtxt" : "config.json");
  return 0;
}

/* Free versions that were loaded but never published in the table. */
static void discard(srv_model_t **ms, int n) {
  for (int k = 0; k < n; k++) {
    srv_batcher_drain(ms[k]->batcher, 0);
    srv_model_free(ms[k]);
  }
}

/*
 * Under one lock: take every version of name out of the table (into old, at
 * most cap_old; their count in *n_old) and put the n_in versions of in into
 * it.  Returns 0, or -1 when the table cannot grow (nothing changed).
 */
static int swap_versions(srv_server_t *s, const char *name, srv_model_t **in, int n_in, srv_model_t **old, int cap_old,
                         int *n_old) {
  int no = 0;
  pthread_mutex_lock(&s->repo_mu);
  if (s->n_models + n_in > s->cap_models) {
    int cap = (s->n_models + n_in) * 2;
    srv_model_t **nm = realloc(s->models, (size_t)cap * sizeof *nm);
    if (!nm) {
      pthread_mutex_unlock(&s->repo_mu);
      return -1;
    }
    s->models = nm;
    s->cap_models = cap;
  }
  for (int i = 0; i < s->n_models;) {
    if (!strcmp(s->models[i]->name, name) && no < cap_old) {
      old[no++] = s->models[i];
      s->models[i] = s->models[--s->n_models];
    } else {
      i++;
    }
  }
  for (int k = 0; k < n_in; k++) {
    /* the counters of the version it replaces (the new model has served nothing yet: its own are zero) */
    for (int j = 0; j < no; j++)
      if (old[j]->version_num == in[k]->version_num && old[j]->metrics && in[k]->metrics != old[j]->metrics) {
        srv_metrics_destroy(in[k]->metrics);
        in[k]->metrics = srv_metrics_ref(old[j]->metrics);
        break;
      }
    s->models[s->n_models++] = in[k];
  }
  if (n_in) set_failed(s, name, NULL);
  pthread_mutex_unlock(&s->repo_mu);
  *n_old = no;
  return 0;
}

int srv_repo_add(srv_server_t *s, srv_model_t *m, toplu_error_t *err) {
  srv_model_t *old[SRV_MAX_VERSIONS * 2];
  int no = 0;
  if (swap_versions(s, m->name, &m, 1, old, (int)(sizeof old / sizeof old[0]), &no)) {
    discard(&m, 1);
    return toplu__errorf(err, TOPLU_ERR_OUT_OF_MEMORY, "out of memory for the model table"), -1;
  }
  for (int k = 0; k < no; k++) retire(s, old[k]);
  return 0;
}

static int repo_load(srv_server_t *s, const char *name, const char *mdir, const char *config_json, toplu_error_t *err);

int srv_repo_load(srv_server_t *s, const char *name, const char *config_json, toplu_error_t *err) {
  if (!srv_repo_valid_name(name)) return toplu__errorf(err, TOPLU_ERR_NOT_FOUND, "'%s' is not a model name", name), -1;
  if (name[0] == '.') /* as at start (srv_repo_load_all), where such folders are skipped */
    return toplu__errorf(err, TOPLU_ERR_NOT_FOUND,
                         "'%s' is a hidden folder: toplu serves no folder whose name begins with '.'", name),
           -1;
  char mdir[4400];
  snprintf(mdir, sizeof mdir, "%s/%s", s->repo_dir, name);
  if (!is_dir(mdir)) {
    /* Gone from the repository: its earlier failed load no longer holds readiness back. */
    pthread_mutex_lock(&s->repo_mu);
    set_failed(s, name, NULL);
    pthread_mutex_unlock(&s->repo_mu);
    return toplu__errorf(err, TOPLU_ERR_NOT_FOUND, "no model '%s' in the model repository", name), -1;
  }
  pthread_mutex_lock(&s->repo_mu);
  snprintf(s->loading, sizeof s->loading, "%s", name);
  pthread_mutex_unlock(&s->repo_mu);
  int rc = repo_load(s, name, mdir, config_json, err);
  pthread_mutex_lock(&s->repo_mu);
  s->loading[0] = 0;
  pthread_mutex_unlock(&s->repo_mu);
  return rc;
}

/* srv_repo_load once the model's folder is known to exist. */
static int repo_load(srv_server_t *s, const char *name, const char *mdir, const char *config_json, toplu_error_t *err) {
  srv_config_t cfg;
  if (config_json) {
    char why[1024];
    srv_config_defaults(&cfg);
    /* recorded as a failed load like a bad file's (the index showed no reason for these until 2026-12-06) */
    if (srv_config_parse(config_json, strlen(config_json), "parameters.config", &cfg, why, sizeof why)) {
      toplu__errorf(err, TOPLU_ERR_INVALID_ARGUMENT, "%s", why);
      goto failed;
    }
    if (cfg.name[0] && strcmp(cfg.name, name)) {
      toplu__errorf(err, TOPLU_ERR_INVALID_ARGUMENT, "parameters.config: name '%s' is not the model's name '%s'", cfg.name,
                    name);
      goto failed;
    }
    snprintf(cfg.name, sizeof cfg.name, "%s", name);
    snprintf(cfg.source, sizeof cfg.source, "parameters.config");
  } else if (read_config(s, name, &cfg, err)) {
    goto failed;
  }
  if (cfg.ignored[0])
    srv_log(s, TOPLU_LOG_NOTE, "model '%s': %s fields toplu does not use, ignored: %s", name,
            config_json ? "parameters.config" : cfg.source, cfg.ignored);
  /* every version folder (the first 256 in readdir order were read, so 'latest' could serve an older one when
   * there were more; a fresh user's finding of 2026-12-06) */
  int64_t *vers = NULL;
  int nv = 0, cap_v = 0;
  DIR *d = opendir(mdir);
  if (!d) {
    toplu__errorf(err, TOPLU_ERR_IO, "%s: %s", mdir, strerror(errno));
    goto failed;
  }
  struct dirent *e;
  /* default_model_filename (Triton's): the model file in each version folder */
  const char *fname = cfg.model_filename[0] ? cfg.model_filename : "model.onnx";
  char skipped[256] = ""; /* folders holding the model file whose names are no version numbers */
  while ((e = readdir(d))) {
    /* a version: digits only, from 1, no leading zero, within int64 (strtoll skipped leading spaces and held
     * 99999999999999999999 at 2^63-1, then the folder was looked for under that number) */
    const char *nm = e->d_name;
    size_t nl = strspn(nm, "0123456789");
    long long v = 0;
    if (nl > 0 && nl == strlen(nm) && nm[0] != '0') {
      errno = 0;
      v = strtoll(nm, NULL, 10);
      if (errno == ERANGE) v = 0;
    }
    if (v < 1) {
      char p[5200];
      snprintf(p, sizeof p, "%s/%s/%s", mdir, e->d_name, fname);
      if (e->d_name[0] != '.' && is_file(p)) {
        srv_log(s, TOPLU_LOG_WARNING,
                "model '%s': folder '%s' holds a %s but is no version (versions are whole numbers from 1 to 2^63-1, "
                "without leading zeros): skipped", name, e->d_name, fname);
        size_t at = strlen(skipped);
        if (at + strlen(e->d_name) + 8 < sizeof skipped)
          snprintf(skipped + at, sizeof skipped - at, "%s'%s'", at ? ", " : "", e->d_name);
      }
      continue;
    }
    char p[5200];
    snprintf(p, sizeof p, "%s/%s/%s", mdir, e->d_name, fname);
    if (is_file(p)) {
      if (nv == cap_v) {
        int64_t *nvv = realloc(vers, (size_t)(cap_v ? 2 * cap_v : 16) * sizeof *vers);
        if (!nvv) {
          closedir(d);
          free(vers);
          return toplu__errorf(err, TOPLU_ERR_OUT_OF_MEMORY, "out of memory listing the versions of model '%s'", name), -1;
        }
        vers = nvv;
        cap_v = cap_v ? 2 * cap_v : 16;
      }
      vers[nv++] = v;
    } else srv_log(s, TOPLU_LOG_WARNING, "model '%s': version folder %s has no %s: skipped", name, e->d_name, fname);
  }
  closedir(d);
  if (nv > 1) qsort(vers, (size_t)nv, sizeof vers[0], cmp_i64_desc);
  int64_t pick[SRV_MAX_VERSIONS];
  int np = 0, dropped = 0;
  for (int i = 0; i < nv; i++) {
    int take = 0;
    if (cfg.version_policy == SRV_VERSIONS_ALL) take = 1;
    else if (cfg.version_policy == SRV_VERSIONS_LATEST) take = i < (cfg.num_versions > 0 ? cfg.num_versions : 1);
    else
      for (int k = 0; k < cfg.n_versions; k++) take |= cfg.versions[k] == vers[i];
    if (take && np < SRV_MAX_VERSIONS) pick[np++] = vers[i];
    else if (take) dropped++;
  }
  if (dropped)
    srv_log(s, TOPLU_LOG_WARNING, "model '%s': the version_policy selects %d versions; the %d newest are served (at most %d)",
            name, np + dropped, np, SRV_MAX_VERSIONS);
  /* specific versions without a folder (or without the model file): said, as Triton does */
  for (int k = 0; cfg.version_policy == SRV_VERSIONS_SPECIFIC && k < cfg.n_versions; k++) {
    int found = 0;
    for (int i = 0; i < nv && !found; i++) found = vers[i] == cfg.versions[k];
    if (!found)
      srv_log(s, TOPLU_LOG_WARNING, "model '%s': version_policy names version %lld, but %s/%lld/%s does not exist", name,
              (long long)cfg.versions[k], mdir, (long long)cfg.versions[k], fname);
  }
  free(vers);
  vers = NULL;
  if (np == 0) {
    if (nv)
      toplu__errorf(err, TOPLU_ERR_NOT_FOUND, "%s: no version folder with a %s that the version_policy selects", mdir, fname);
    else
      toplu__errorf(err, TOPLU_ERR_NOT_FOUND, "%s: no version folder with a %s (expected %s/1/%s%s)%s%s", mdir, fname,
                    mdir, fname, cfg.model_filename[0] ? ", default_model_filename" : "",
                    skipped[0] ? "; skipped as no version numbers (whole numbers from 1, no leading zeros): " : "",
                    skipped);
    goto failed;
  }
  srv_model_t *loaded[SRV_MAX_VERSIONS];
  for (int i = 0; i < np; i++) {
    char ver[32], file[5200];
    snprintf(ver, sizeof ver, "%lld", (long long)pick[i]);
    snprintf(file, sizeof file, "%s/%s/%s", mdir, ver, fname);
    if (srv_model_load(s, name, ver, file, &cfg, &loaded[i], err)) {
      discard(loaded, i);
      goto failed;
    }
  }
  /* Swap: the new versions in, the old ones out, under one lock. */
  srv_model_t *old[SRV_MAX_VERSIONS * 2];
  int no = 0;
  if (swap_versions(s, name, loaded, np, old, (int)(sizeof old / sizeof old[0]), &no)) {
    discard(loaded, np);
    return toplu__errorf(err, TOPLU_ERR_OUT_OF_MEMORY, "out of memory for the model table"), -1;
  }
  for (int k = 0; k < no; k++) retire(s, old[k]);
  if (no) srv_log(s, TOPLU_LOG_NOTE, "model '%s' reloaded: %d version(s) in, %d draining", name, np, no);
  return 0;
failed:
  pthread_mutex_lock(&s->repo_mu);
  set_failed(s, name, err ? err->message : "failed to load");
  pthread_mutex_unlock(&s->repo_mu);
  return -1;
}

int srv_repo_unload(srv_server_t *s, const char *name, toplu_error_t *err) {
  srv_model_t *old[SRV_MAX_VERSIONS * 2];
  int no = 0;
  swap_versions(s, name, NULL, 0, old, (int)(sizeof old / sizeof old[0]), &no); /* adds nothing: cannot fail */
  /* An explicit unload also clears the model's failed load (strict readiness, the index). */
  pthread_mutex_lock(&s->repo_mu);
  int had_failed = set_failed(s, name, NULL);
  pthread_mutex_unlock(&s->repo_mu);
  if (!no && !had_failed) return toplu__errorf(err, TOPLU_ERR_NOT_FOUND, "model '%s' is not loaded", name), -1;
  for (int k = 0; k < no; k++) retire(s, old[k]);
  if (no) srv_log(s, TOPLU_LOG_NOTE, "model '%s' unloaded: %d version(s) draining", name, no);
  else srv_log(s, TOPLU_LOG_NOTE, "model '%s' unloaded: it had failed to load; the failure no longer counts", name);
  return 0;
}

static int cmp_str(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

typedef struct index_entry {
  char name[SRV_NAME_MAX];
  int64_t version;             /* 0: none */
  const char *state;
  char reason[1024];
} index_entry_t;

static int cmp_entry(const void *a, const void *b) {
  const index_entry_t *x = a, *y = b;
  int c = strcmp(x->name, y->name);
  return c ? c : (x->version > y->version) - (x->version < y->version);
}

static int push_entry(index_entry_t **e, int *n, int *cap, const char *name, int64_t version, const char *state,
                      const char *reason) {
  if (*n == *cap) {
    int nc = *cap ? *cap * 2 : 16;
    index_entry_t *ne = realloc(*e, (size_t)nc * sizeof *ne);
    if (!ne) return -1;
    *e = ne;
    *cap = nc;
  }
  index_entry_t *x = &(*e)[(*n)++];
  snprintf(x->name, sizeof x->name, "%s", name);
  x->version = version;
  x->state = state;
  snprintf(x->reason, sizeof x->reason, "%s", reason ? reason : "");
  return 0;
}

int srv_repo_known(srv_server_t *s, const char *name) {
  if (!srv_repo_valid_name(name)) return 0;
  int known = 0;
  size_t len = strlen(name);
  pthread_mutex_lock(&s->repo_mu);
  for (int i = 0; i < s->n_failed && !known; i++) /* "NAME\tREASON" */
    known = !strncmp(s->failed[i], name, len) && s->failed[i][len] == '\t';
  pthread_mutex_unlock(&s->repo_mu);
  if (!known && s->repo_dir[0]) {
    char p[4400];
    snprintf(p, sizeof p, "%s/%s", s->repo_dir, name);
    known = is_dir(p);
  }
  return known;
}

void srv_repo_index_json(srv_server_t *s, int ready_only, pl_buf_t *out) {
  index_entry_t *e = NULL;
  int n = 0, cap = 0;
  pthread_mutex_lock(&s->repo_mu);
  for (int i = 0; i < s->n_models; i++) {
    srv_model_t *m = s->models[i];
    int ready = atomic_load(&m->ready);
    if (!ready_only || ready) push_entry(&e, &n, &cap, m->name, m->version_num, ready ? "READY" : "LOADING", NULL);
  }
  for (int i = 0; i < s->n_failed; i++) {
    const char *tab = strchr(s->failed[i], '\t');
    if (!tab) continue;
    char name[SRV_NAME_MAX];
    snprintf(name, sizeof name, "%.*s", (int)(tab - s->failed[i]), s->failed[i]);
    /* A failed reload whose old versions still serve: no entry of its own
     * (one entry per name and version); the serving entries carry the
     * reason, as Triton's do. */
    int serving = 0;
    for (int k = 0; k < n; k++)
      if (!strcmp(e[k].name, name)) {
        serving = 1;
        snprintf(e[k].reason, sizeof e[k].reason, "the latest load failed, this version still serves: %.900s", tab + 1);
      }
    if (!serving && !ready_only)
      push_entry(&e, &n, &cap, name, 0, strcmp(s->loading, name) ? "UNAVAILABLE" : "LOADING",
                 strcmp(s->loading, name) ? tab + 1 : "");
  }
  /* Folders of the repository that are neither loaded nor failed. */
  DIR *d = !ready_only && s->repo_dir[0] ? opendir(s->repo_dir) : NULL;
  struct dirent *de;
  while (d && (de = readdir(d))) {
    if (!srv_repo_valid_name(de->d_name) || de->d_name[0] == '.') continue;
    char p[4400];
    snprintf(p, sizeof p, "%s/%s", s->repo_dir, de->d_name);
    if (!is_dir(p)) continue;
    int known = 0;
    for (int i = 0; i < n && !known; i++) known = !strcmp(e[i].name, de->d_name);
    if (!known) push_entry(&e, &n, &cap, de->d_name, 0, strcmp(s->loading, de->d_name) ? "UNAVAILABLE" : "LOADING",
                           strcmp(s->loading, de->d_name) ? "unloaded" : "");
  }
  if (d) closedir(d);
  pthread_mutex_unlock(&s->repo_mu);
  if (n > 1) qsort(e, (size_t)n, sizeof *e, cmp_entry);
  pl_buf_putc(out, '[');
  for (int i = 0; i < n; i++) {
    pl_buf_puts(out, i ? ",{\"name\":" : "{\"name\":");
    pl_buf_json_string(out, e[i].name);
    if (e[i].version > 0) pl_buf_printf(out, ",\"version\":\"%lld\"", (long long)e[i].version);
    pl_buf_puts(out, ",\"state\":");
    pl_buf_json_string(out, e[i].state);
    if (e[i].reason[0]) {
      pl_buf_puts(out, ",\"reason\":");
      pl_buf_json_string(out, e[i].reason);
    }
    pl_buf_putc(out, '}');
  }
  pl_buf_putc(out, ']');
  free(e);
}

int srv_repo_load_all(srv_server_t *s, toplu_error_t *err) {
  DIR *d = opendir(s->repo_dir);
  if (!d) return toplu__errorf(err, TOPLU_ERR_IO, "model repository %s: %s", s->repo_dir, strerror(errno)), -1;
  char **names = NULL;
  int nn = 0;
  struct dirent *e;
  while ((e = readdir(d))) {
    if (!srv_repo_valid_name(e->d_name)) continue;
    char p[4400];
    snprintf(p, sizeof p, "%s/%s", s->repo_dir, e->d_name);
    if (!is_dir(p)) continue;
    if (e->d_name[0] == '.') { /* skipped, and said (it was silent, while other skipped folders were logged) */
      srv_log(s, TOPLU_LOG_NOTE, "folder '%s' skipped: a hidden folder (its name begins with '.') is no model",
              e->d_name);
      continue;
    }
    char **nn2 = realloc(names, (size_t)(nn + 1) * sizeof *names);
    if (!nn2) break;
    names = nn2;
    if ((names[nn] = strdup(e->d_name))) nn++;
  }
  closedir(d);
  if (nn > 1) qsort(names, (size_t)nn, sizeof *names, cmp_str);
  /* The instances of every model, so that each gets its share of the cores. */
  srv_config_t *cfg = malloc(sizeof *cfg);
  int budget = 0;
  for (int i = 0; i < nn; i++) {
    toplu_error_t e0;
    int count = cfg && read_config(s, names[i], cfg, &e0) == 0 ? cfg->instance_count : 1;
    budget += count > 0 ? count : 1;
  }
  free(cfg);
  s->instance_budget = budget;
  int ok = 0, failed = 0;
  toplu_error_t first;
  toplu_error_clear(&first);
  for (int i = 0; i < nn; i++) {
    toplu_error_t e1;
    toplu_error_clear(&e1);
    if (srv_load_cancelled(s)) { /* a stop while the repository loads: the rest are not loaded */
      free(names[i]);
      continue;
    }
    if (srv_repo_load(s, names[i], NULL, &e1) == 0) {
      ok++;
    } else if (e1.status == TOPLU_ERR_CANCELLED) { /* a stop while it loaded: not a failure of the model */
      srv_log(s, TOPLU_LOG_NOTE, "%s (stopping)", e1.message);
    } else {
      failed++;
      srv_log(s, TOPLU_LOG_ERROR, "%s", e1.message);
      if (!first.status) first = e1;
    }
    free(names[i]);
  }
  free(names);
  if (nn == 0) { /* as tritonserver: start empty; models come with the repository API's load */
    srv_log(s, TOPLU_LOG_WARNING,
            "model repository %s holds no model folders: serving none until one is added and loaded "
            "(POST /v2/repository/models/NAME/load)",
            s->repo_dir);
    return 0;
  }
  if (failed && s->opts.strict_config) return toplu__errorf(err, TOPLU_ERR_INVALID_MODEL, "%s", first.message), -1;
  if (failed && !ok) /* as tritonserver with --exit-on-error=false: up, serving none, not ready (strict readiness) */
    srv_log(s, TOPLU_LOG_WARNING,
            "no model of repository %s could be loaded: serving none until a load through the repository API "
            "succeeds (POST /v2/repository/models/NAME/load)",
            s->repo_dir);
  return 0;
}

static void *reaper_main(void *arg) {
  srv_server_t *s = arg;
  pthread_mutex_lock(&s->retire_mu);
  for (;;) {
    for (int i = 0; i < s->n_retired;) {
      srv_model_t *m = s->retired[i];
      if (atomic_load(&m->refs) == 0 && srv_batcher_pending(m->batcher) == 0) {
        s->retired[i] = s->retired[--s->n_retired];
        pthread_mutex_unlock(&s->retire_mu);
        srv_model_free(m);
        pthread_mutex_lock(&s->retire_mu);
      } else {
        i++;
      }
    }
    if (atomic_load(&s->stopping) == 2 && s->n_retired == 0) break;
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    ts.tv_nsec += 100000000;
    if (ts.tv_nsec >= 1000000000) {
      ts.tv_sec++;
      ts.tv_nsec -= 1000000000;
    }
    pthread_cond_timedwait(&s->retire_cv, &s->retire_mu, &ts);
  }
  pthread_mutex_unlock(&s->retire_mu);
  return NULL;
}

int srv_repo_start(srv_server_t *s, toplu_error_t *err) {
  if (pthread_create(&s->reaper, NULL, reaper_main, s) != 0)
    return toplu__errorf(err, TOPLU_ERR_INTERNAL, "cannot start the reaper thread"), -1;
  s->reaper_started = 1;
  return 0;
}

int srv_repo_drain_all(srv_server_t *s, int64_t deadline_ns) {
  pthread_mutex_lock(&s->repo_mu);
  int n = s->n_models;
  srv_model_t **ms = malloc((size_t)(n > 0 ? n : 1) * sizeof *ms);
  for (int i = 0; ms && i < n; i++) {
    ms[i] = s->models[i];
    srv_model_ref(ms[i]);
  }
  pthread_mutex_unlock(&s->repo_mu);
  if (!ms) return -1;
  int rc = 0;
  for (int i = 0; i < n; i++) srv_batcher_drain(ms[i]->batcher, 0);
  for (int i = 0; i < n; i++)
    if (srv_batcher_wait_idle(ms[i]->batcher, deadline_ns)) rc = -1;
  if (rc) {
    for (int i = 0; i < n; i++) srv_batcher_drain(ms[i]->batcher, 1);
    for (int i = 0; i < n; i++) srv_batcher_wait_idle(ms[i]->batcher, toplu_monotonic_ns() + 5000000000LL);
  }
  /* Retired versions drain too. */
  pthread_mutex_lock(&s->retire_mu);
  int nr = s->n_retired;
  pthread_mutex_unlock(&s->retire_mu);
  (void)nr;
  for (int i = 0; i < n; i++) srv_model_unref(ms[i]);
  free(ms);
  return rc;
}

void srv_repo_destroy(srv_server_t *s) {
  pthread_mutex_lock(&s->repo_mu);
  int n = s->n_models;
  srv_model_t **ms = s->models;
  s->models = NULL;
  s->n_models = s->cap_models = 0;
  pthread_mutex_unlock(&s->repo_mu);
  for (int i = 0; i < n; i++) retire(s, ms[i]);
  free(ms);
  pthread_mutex_lock(&s->retire_mu);
  atomic_store(&s->stopping, 2);
  pthread_cond_broadcast(&s->retire_cv);
  pthread_mutex_unlock(&s->retire_mu);
  if (s->reaper_started) pthread_join(s->reaper, NULL);
  s->reaper_started = 0;
  for (int i = 0; i < s->n_failed; i++) free(s->failed[i]);
  free(s->failed);
  s->failed = NULL;
  s->n_failed = 0;
  free(s->retired);
  s->retired = NULL;
}
