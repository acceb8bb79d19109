/*
 * serve/model.c - loading one model version for serving: the file, its
 * session, the batch size in force, the check that outputs follow the
 * batch dim, the batcher, the warm-up.
 *
 * The batch size: config.json's max_batch_size when given; otherwise the
 * recommended_batch_size of a tune result beside the model
 * (DIR/<name>/<version>/tune.json, then DIR/<name>/tune.json: written by
 * toplu_tune_write), otherwise the analytic planner's recommendation
 * (toplu_plan_model on this machine's CPU, 80% of its memory), capped at
 * SRV_AUTO_BATCH_MAX.  Where it came from is kept in batch_source.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "core/checked.h"
#include "core/error.h"
#include "core/file.h"
#include "runtime/model_internal.h"
#include "pipeline/autobatch.h"
#include "serve/server.h"
#include "toplu/planner.h"
#include "toplu/profile.h"
#include "toplu/tuner.h"

/* Largest batch size the server takes from the planner or a tune file. */
#define SRV_AUTO_BATCH_MAX 256
/* ... and for a model the planner finds too cheap to recommend a size. */
#define SRV_AUTO_BATCH_CHEAP 64
/* Non-batch symbolic dims of the shapes used to check that outputs follow
 * the batch dim, when no warm-up names them. */
#define SRV_PROBE_DIM 64

int64_t srv_wall_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

void srv_model_ref(srv_model_t *m) { atomic_fetch_add(&m->refs, 1); }

void srv_model_unref(srv_model_t *m) {
  if (!m) return;
  if (atomic_fetch_sub(&m->refs, 1) == 1) {
    /* The last reference: the reaper frees retired versions; a version
     * still in the table always holds the table's reference. */
    srv_server_t *s = m->server;
    pthread_mutex_lock(&s->retire_mu);
    pthread_cond_broadcast(&s->retire_cv);
    pthread_mutex_unlock(&s->retire_mu);
  }
}

void srv_model_free(srv_model_t *m) {
  if (!m) return;
  srv_batcher_destroy(m->batcher);
  if (m->server && m->server->cache) srv_cache_drop_owner(m->server->cache, m->owner);
  toplu_session_destroy(m->session);
  toplu_model_destroy(m->model);
  toplu_allocator_destroy(m->alloc);
  srv_metrics_destroy(m->metrics);
  free(m);
}

static int file_exists(const char *p) {
  struct stat st;
  return stat(p, &st) == 0 && S_ISREG(st.st_mode);
}

/* Non-batch dim wd of model input name as the config fixes it: its
 * reshape.shape, else its dims (the model's shape either way, without the
 * batch dim when batching); -1 when the config leaves it free or does not
 * list the input. */
static int64_t config_dim(const srv_model_t *m, const char *name, int wd) {
  for (int k = 0; k < m->cfg.n_inputs; k++) {
    const srv_config_io_t *c = &m->cfg.inputs[k];
    if (strcmp(c->name, name)) continue;
    int n = c->has_reshape ? c->reshape_ndim : c->ndim;
    const int64_t *d = c->has_reshape ? c->reshape : c->dims;
    return wd >= 0 && wd < n && d[wd] > 0 ? d[wd] : -1;
  }
  return -1;
}

/* The shape of input i at batch rows, symbolic non-batch dims from the
 * config's first warm-up that names the input, else the config's dims or
 * reshape, else SRV_PROBE_DIM. */
static void probe_shape(const srv_model_t *m, int i, int64_t rows, toplu_tensor_t *t) {
  const toplu_value_info_t *v = toplu_model_input(m->model, i);
  memset(t, 0, sizeof *t);
  t->dtype = v->dtype;
  t->ndim = v->ndim < 0 ? 0 : v->ndim;
  const srv_warmup_input_t *w = NULL;
  for (int k = 0; k < m->cfg.n_warmup && !w; k++)
    for (int j = 0; j < m->cfg.warmup[k].n_inputs; j++)
      if (!strcmp(m->cfg.warmup[k].inputs[j].name, v->name)) w = &m->cfg.warmup[k].inputs[j];
  int batching = m->max_batch_size > 0;
  /* warm-up dims are the clients' shape: with the config's reshape of the input, the model's is its reshape.shape */
  int wn = w ? w->ndim : 0;
  int64_t wdims[TOPLU_MAX_DIMS];
  if (w) memcpy(wdims, w->dims, sizeof wdims);
  if (w && srv_config_reshape_input(&m->cfg, v->name, 0, &wn, wdims)) wn = 0;
  for (int d = 0; d < t->ndim; d++) {
    int64_t x = v->dims[d];
    if (batching && d == 0) x = rows;
    else if (x < 0) {
      int wd = batching ? d - 1 : d;
      int64_t cd = config_dim(m, v->name, wd);
      x = (w && wd >= 0 && wd < wn && wdims[wd] > 0) ? wdims[wd] : cd > 0 ? cd : SRV_PROBE_DIM;
    }
    t->dims[d] = x;
  }
}

/* Batching needs every output's dim 0 to be the batch: check the shapes at
 * B = 1 and 2.  Returns the index of the first output that does not follow,
 * -1 when all do, -2 when the check could not run (err says why). */
static int outputs_follow_batch(srv_model_t *m, toplu_error_t *err) {
  int n_in = toplu_model_input_count(m->model), n_out = toplu_model_output_count(m->model);
  toplu_tensor_t in[n_in > 0 ? n_in : 1], out[n_out > 0 ? n_out : 1];
  for (int64_t b = 1; b <= 2; b++) {
    for (int i = 0; i < n_in; i++) probe_shape(m, i, b, &in[i]);
    memset(out, 0, sizeof out);
    toplu_status_t st = toplu_session_output_shapes(m->session, in, n_in, out, n_out);
    if (st != TOPLU_OK) {
      toplu__errorf(err, st, "%s", toplu_session_last_error(m->session));
      return -2;
    }
    for (int j = 0; j < n_out; j++)
      if (out[j].ndim < 1 || out[j].dims[0] != b) return j;
  }
  return -1;
}

/* Whether the model keeps the rows of dim 0 apart (toplu_session_rows_apart),
 * checked on two probe rows of made-up data: floats in [-1, 1) from a fixed
 * generator, integers and bools 0 in the first row and 1 in the second (a
 * valid token id, mask or type id).  A sequence-first model ([seq, batch,
 * d], an nn.TransformerEncoder exported with batch_first False) has the
 * right shapes to batch along dim 0 and answered up to 0.19 off when its
 * requests were batched and padded there (a fresh user's finding of
 * 2026-12-06).  Returns 1 when they stay apart or it could not be told (why
 * then says so, "" otherwise), 0 when they mix (why says where). */
static int rows_stay_apart(srv_model_t *m, char *why, size_t why_size) {
  int n_in = toplu_model_input_count(m->model), apart = 1;
  why[0] = '\0';
  if (n_in < 1 || n_in > 64) return 1;
  toplu_tensor_t in[64];
  for (int i = 0; i < n_in; i++) probe_shape(m, i, 2, &in[i]);
  if (toplu_session_rows_apart_probe(m->session, in, n_in, &apart, why, why_size) != TOPLU_OK) {
    snprintf(why, why_size, "%s", toplu_session_last_error(m->session));
    apart = 1;
  }
  return apart;
}

/* The planner's default memory budget on the CPU (toplu/planner.h):
 * mem_fraction (0.8) of the memory available to this process now
 * (toplu_cpu_memory_available: MemAvailable or the cgroup limit less its
 * usage); *avail gets the memory itself.  Used for the max_batch_size check
 * and as each model's plan-cache bound by default (plan_cache_bytes). */
static uint64_t memory_budget(uint64_t *avail) {
  toplu_planner_options_t po;
  toplu_planner_options_init(&po);
  uint64_t a = toplu_cpu_memory_available(NULL, 0);
  if (avail) *avail = a;
  return (uint64_t)(po.mem_fraction * (double)a);
}

/* Whether a batch of max_batch_size rows fits in memory, before the
 * warm-up (or the first full batch) builds its plan: the plans at 1 and 2
 * rows (toplu_session_memory; warm-up sizes anyway) give the bytes a row
 * adds (activations, workspace, inputs, outputs), and at max_batch_size
 * those, plus the weights, must fit in the planner's default memory budget
 * (memory_budget).  The same affine law
 * the planner fits (docs/plan-tune.md), from two plans instead of its
 * search.  Only for inputs whose non-batch dims are all known (with free
 * dims a batch's bytes follow its requests, each bounded by
 * max_body_bytes).  Returns 0 when it fits or could not be checked, -1 with
 * err set (TOPLU_ERR_INVALID_MODEL: the configuration) when it does not. */
static int batch_fits(srv_model_t *m, int64_t *fits, toplu_error_t *err) {
  int n_in = toplu_model_input_count(m->model);
  uint64_t avail, cap = memory_budget(&avail);
  if (m->max_batch_size <= 2 || cap == 0 || n_in < 1) return 0;
  toplu_tensor_t in[n_in];
  double per[2] = {0, 0}, weights = 0;
  for (int64_t b = 1; b <= 2; b++) {
    for (int i = 0; i < n_in; i++) probe_shape(m, i, b, &in[i]);
    toplu_memory_report_t r;
    if (toplu_session_memory(m->session, in, n_in, &r) != TOPLU_OK) return 0; /* the warm-up reports it */
    per[b - 1] = (double)r.activation_bytes + (double)r.workspace_bytes + (double)r.input_bytes + (double)r.output_bytes;
    weights = (double)r.weights_bytes;
  }
  double row = per[1] - per[0] > 0 ? per[1] - per[0] : per[1] / 2;
  /* Two plans of the largest batch at once: the warm-up times its thread choice on a second plan of the same size
   * (choose_threads) while the first is kept. With one, a 400 MiB container's server was killed in the warm-up at
   * a max_batch_size this check had accepted (a fresh user's finding of 2026-12-06). */
  const double k = m->server->opts.fixed_threads ? 1 : 2; /* fixed threads: nothing timed, one plan */
  double plan = per[0] + row * (double)(m->max_batch_size - 1), need = weights + k * plan;
  if (need <= (double)cap) return 0;
  int64_t fit = weights + k * per[0] < (double)cap ? 1 + (int64_t)(((double)cap - weights - k * per[0]) / (k * row)) : 0;
  if (fits) *fits = fit;
  toplu__errorf(err, TOPLU_ERR_INVALID_MODEL,
                "max_batch_size %lld (%s) does not fit in memory: a batch that large needs about %.3g GB (the weights "
                "and two plans of that batch, one kept while the other's threads are timed; %.3g MB a row, from the "
                "plans at 1 and 2 rows), more than %.3g GB, the planner's budget (%.0f%% of the %.3g GB available); "
                "at most %lld rows fit: lower max_batch_size",
                (long long)m->max_batch_size, m->batch_source, need / 1e9, row / 1e6, (double)cap / 1e9,
                100.0 * (double)cap / (double)avail, (double)avail / 1e9, (long long)fit);
  return -1;
}

/* Zero or random data into t (allocated). */
/* Elements and bytes of warm-up tensor t (rows times the config's dims), checked: 0, or -1 beyond
 * SRV_MAX_WARMUP_ELEMENTS (the unchecked product wrapped past 2^64, and the fill wrote past a 4-byte buffer; a
 * fresh user's finding of 2026-12-06). */
static int warm_size(const toplu_tensor_t *t, int64_t *numel, size_t *bytes) {
  int64_t n = 1;
  for (int d = 0; d < t->ndim; d++) {
    if (t->dims[d] < 0 || (t->dims[d] > 0 && n > SRV_MAX_WARMUP_ELEMENTS / t->dims[d])) return -1;
    n *= t->dims[d];
  }
  *numel = n;
  return toplu__bytes(n, toplu_dtype_size(t->dtype), bytes) ? 0 : -1;
}

static int fill_tensor(toplu_tensor_t *t, int random, unsigned *seed) {
  int64_t n;
  size_t bytes;
  if (warm_size(t, &n, &bytes)) return -1;
  t->data = calloc(1, bytes ? bytes : 1);
  if (!t->data) return -1;
  if (random && t->dtype == TOPLU_DTYPE_FLOAT)
    for (int64_t k = 0; k < n; k++) ((float *)t->data)[k] = (float)rand_r(seed) / (float)RAND_MAX * 2.0f - 1.0f;
  return 0;
}

/* Fill t (allocated) from input_data_file: DIR/<name>/warmup/FILE beside
 * the model's version folders, raw row-major bytes of one row (the whole
 * tensor when not batching), repeated for each of the rows; fewer bytes
 * than that, a missing file or a name leaving the folder is an error naming
 * the file (more bytes: the first ones, as Triton reads them). */
static int fill_from_file(const srv_model_t *m, const char *model_file, const char *file, int64_t rows, toplu_tensor_t *t,
                          toplu_error_t *err) {
  if (!file[0] || file[0] == '/' || strstr(file, ".."))
    return toplu__errorf(err, TOPLU_ERR_INVALID_MODEL, "input_data_file '%s': not a file name inside the model's warmup folder",
                         file), -1;
  char path[4500];
  snprintf(path, sizeof path, "%s", model_file);
  for (int k = 0; k < 2; k++) { /* DIR/<name>/<version>/model.onnx -> DIR/<name> */
    char *sl = strrchr(path, '/');
    if (sl) *sl = 0;
    else snprintf(path, sizeof path, ".");
  }
  size_t dl = strlen(path);
  snprintf(path + dl, sizeof path - dl, "/warmup/%s", file);
  int64_t n;
  size_t es = toplu_dtype_size(t->dtype), bytes;
  if (warm_size(t, &n, &bytes))
    return toplu__errorf(err, TOPLU_ERR_INVALID_MODEL, "input_data_file %s: the input has more than 2^40 elements",
                         file), -1;
  int64_t per = m->max_batch_size > 0 && rows > 0 ? n / rows : n;
  size_t row_bytes = (size_t)per * es;
  t->data = calloc(1, bytes ? bytes : 1);
  if (!t->data) return toplu__errorf(err, TOPLU_ERR_OUT_OF_MEMORY, "out of memory for the warm-up inputs"), -1;
  struct stat fst;
  if (stat(path, &fst) == 0 && !S_ISREG(fst.st_mode)) { /* a FIFO would block the load for ever */
    toplu__errorf(err, TOPLU_ERR_INVALID_MODEL, "input_data_file %s is %s; it must be a regular file", path,
                  toplu__file_kind((unsigned)fst.st_mode));
    goto fail;
  }
  FILE *f = fopen(path, "rb");
  if (!f) {
    toplu__errorf(err, TOPLU_ERR_IO, "input_data_file %s: %s", path, strerror(errno));
    goto fail;
  }
  size_t got = row_bytes ? fread(t->data, 1, row_bytes, f) : 0;
  int rerr = ferror(f);
  fclose(f);
  if (rerr) {
    toplu__errorf(err, TOPLU_ERR_IO, "input_data_file %s: cannot be read", path);
    goto fail;
  }
  if (got < row_bytes) {
    toplu__errorf(err, TOPLU_ERR_INVALID_MODEL, "input_data_file %s holds %zu bytes, the input needs %zu (%lld %s values%s)",
                  path, got, row_bytes, (long long)per, toplu_dtype_name(t->dtype), m->max_batch_size > 0 ? " a row" : "");
    goto fail;
  }
  for (size_t off = row_bytes; row_bytes && off < bytes; off += row_bytes)
    memcpy((char *)t->data + off, t->data, row_bytes);
  return 0;
fail:
  free(t->data);
  t->data = NULL;
  return -1;
}

/* Run one warm-up: batch rows, every input from the warm-up entry w (NULL:
 * zeros at the probe shapes). */
static int warm_once(srv_model_t *m, const char *model_file, const srv_warmup_t *w, int64_t rows, toplu_error_t *err) {
  int n_in = toplu_model_input_count(m->model), n_out = toplu_model_output_count(m->model);
  toplu_tensor_t in[n_in > 0 ? n_in : 1], out[n_out > 0 ? n_out : 1];
  memset(out, 0, sizeof out);
  unsigned seed = 7;
  int rc = 0;
  for (int i = 0; i < n_in; i++) {
    probe_shape(m, i, rows, &in[i]);
    int random = 0;
    const char *file = NULL;
    if (w)
      for (int j = 0; j < w->n_inputs; j++)
        if (!strcmp(w->inputs[j].name, toplu_model_input(m->model, i)->name)) {
          random = w->inputs[j].kind == 1;
          if (w->inputs[j].kind == 2) file = w->inputs[j].file;
        }
    if (file) {
      if (fill_from_file(m, model_file, file, rows, &in[i], err)) {
        for (int k = 0; k < i; k++) free(in[k].data);
        return toplu__error_prefix(err, "input '%s'", toplu_model_input(m->model, i)->name), -1;
      }
    } else if (fill_tensor(&in[i], random, &seed)) {
      for (int k = 0; k < i; k++) free(in[k].data);
      toplu__errorf(err, TOPLU_ERR_OUT_OF_MEMORY, "cannot allocate the warm-up input '%s' (%lld rows): more than 2^40 elements, or out of memory",
                    toplu_model_input(m->model, i)->name, (long long)rows);
      return -1;
    }
  }
  toplu_run_options_t ro;
  toplu_run_options_init(&ro);
  ro.cancel = srv_load_cancel_flag(m->server);
  toplu_status_t st = srv_load_cancelled(m->server)
                          ? toplu__errorf(err, TOPLU_ERR_CANCELLED, "the server is stopping")
                          : toplu_session_run_with(m->session, in, n_in, out, n_out, &ro, err);
  if (st != TOPLU_OK) rc = -1;
  for (int i = 0; i < n_in; i++) free(in[i].data);
  for (int j = 0; j < n_out; j++) toplu_tensor_free(&out[j]);
  return rc;
}

/* 1 when every non-batch dim of every input is known: in the model, or
 * fixed by the config's dims or reshape. */
static int shapes_known(const srv_model_t *m) {
  int n_in = toplu_model_input_count(m->model), batching = m->max_batch_size > 0;
  for (int i = 0; i < n_in; i++) {
    const toplu_value_info_t *v = toplu_model_input(m->model, i);
    if (v->ndim < 0) return 0;
    for (int d = batching ? 1 : 0; d < v->ndim; d++)
      if (v->dims[d] < 0 && config_dim(m, v->name, batching ? d - 1 : d) < 0) return 0;
  }
  return 1;
}

static int warm_up(srv_model_t *m, const char *model_file, toplu_error_t *err) {
  if (m->cfg.n_warmup > 0) {
    for (int k = 0; k < m->cfg.n_warmup; k++) {
      const srv_warmup_t *w = &m->cfg.warmup[k];
      /* a batch_size beyond the max_batch_size chosen at load (none in the configuration: the planner's) ran
       * anyway, its memory the client's to choose (10,000,000 rows: 520 MB; a fresh user's finding of 2026-12-06);
       * Triton refuses it */
      if (w->batch_size > (m->max_batch_size > 0 ? m->max_batch_size : 1)) {
        toplu__errorf(err, TOPLU_ERR_INVALID_MODEL,
                      "model_warmup[%d] ('%s').batch_size %lld is more than max_batch_size %lld (from %s)%s", k,
                      w->name, (long long)w->batch_size, (long long)m->max_batch_size, m->batch_source,
                      m->max_batch_size > 0 ? "" : ": a model served without batching warms up with batch_size 1");
        return -1;
      }
      int64_t rows = m->max_batch_size > 0 ? (w->batch_size > 0 ? w->batch_size : 1) : 1;
      for (int64_t c = 0; c < (w->count > 0 ? w->count : 1); c++)
        if (warm_once(m, model_file, w, rows, err)) {
          toplu__error_prefix(err, "model_warmup[%d] ('%s')", k, w->name);
          return -1;
        }
    }
    return 0;
  }
  if (!shapes_known(m)) {
    srv_log(m->server, TOPLU_LOG_NOTE,
            "model '%s' version %s: no model_warmup and inputs with free dims: plans are built by the first requests of each shape",
            m->name, m->version);
    return 0;
  }
  if (m->max_batch_size <= 0) {
    if (warm_once(m, model_file, NULL, 1, err)) return toplu__error_prefix(err, "warm-up"), -1;
    return 0;
  }
  for (int k = 0; k < m->n_plan_sizes; k++)
    if (warm_once(m, model_file, NULL, m->plan_sizes[k], err))
      return toplu__error_prefix(err, "warm-up at batch %lld", (long long)m->plan_sizes[k]), -1;
  return 0;
}

/* 1 when the model cannot be batched: some input has no dim 0 that is free
 * (a dim 0 fixed to 1 in every input is rebound: batch_override), with why
 * naming the input and its dims. */
static int no_batch_dim(const srv_model_t *m, char *why, size_t size) {
  if (toplu_model_fixed_batch(m->model)) return 0;
  for (int i = 0; i < toplu_model_input_count(m->model); i++) {
    const toplu_value_info_t *v = toplu_model_input(m->model, i);
    if (v->ndim >= 1 && v->dims[0] < 0) continue;
    char dims[256];
    pl_format_info_dims(v, dims, sizeof dims);
    snprintf(why, size, "input '%s' is %s", v->name, dims);
    return 1;
  }
  return 0;
}

/* The batch size when config.json gives none. */
static void auto_batch(srv_model_t *m, const char *model_file) {
  char dir[4096];
  snprintf(dir, sizeof dir, "%s", model_file);
  char *slash = strrchr(dir, '/');
  const char *cands[2];
  char p1[4200], p2[4200];
  int nc = 0;
  if (slash) {
    *slash = 0;
    snprintf(p1, sizeof p1, "%s/tune.json", dir);
    cands[nc++] = p1;
    char *s2 = strrchr(dir, '/');
    if (s2 && !m->server->opts.model_path) {
      *s2 = 0;
      snprintf(p2, sizeof p2, "%s/tune.json", dir);
      cands[nc++] = p2;
    }
  } else {
    snprintf(p1, sizeof p1, "tune.json");
    cands[nc++] = p1;
  }
  for (int k = 0; k < nc; k++) {
    if (!file_exists(cands[k])) continue;
    int64_t b = 0;
    toplu_error_t e;
    /* a tune result of another model (copied beside this one) is not this model's batch size: the check toplu plan
     * --calibration and toplu run --tune make (toplu_tune_result_matches_model) */
    if (toplu_tune_result_matches_model(cands[k], model_file, NULL, &e) == TOPLU_OK &&
        pl_tune_file_batch(cands[k], &b, &e) == TOPLU_OK && b > 0) {
      m->max_batch_size = b < SRV_AUTO_BATCH_MAX ? b : SRV_AUTO_BATCH_MAX;
      snprintf(m->batch_source, sizeof m->batch_source, "recommended_batch_size of the tune result %.900s", cands[k]);
      return;
    }
    srv_log(m->server, TOPLU_LOG_WARNING, "model '%s': tune result %s not used: %s", m->name, cands[k], e.message);
  }
  toplu_planner_options_t po;
  toplu_planner_options_init(&po);
  po.threads = toplu_session_threads(m->session);
  toplu_batch_plan_t *plan = NULL;
  toplu_error_t e;
  if (toplu_plan_model(m->model, &po, &plan, &e) == TOPLU_OK && plan->batchable && plan->recommended_batch_size > 0) {
    int64_t b = plan->recommended_batch_size;
    m->max_batch_size = b < SRV_AUTO_BATCH_MAX ? b : SRV_AUTO_BATCH_MAX;
    snprintf(m->batch_source, sizeof m->batch_source,
             "the planner's recommended_batch_size for this machine (%lld%s, the planner's inputs %.500s)", (long long)b,
             b > SRV_AUTO_BATCH_MAX ? ", capped" : "", plan->inputs);
  } else if (plan && plan->batchable && plan->max_batch_size > 0) {
    /* A model so cheap that no batch size gains (the planner recommends none): its max, within reason. */
    int64_t b = plan->max_batch_size < SRV_AUTO_BATCH_CHEAP ? plan->max_batch_size : SRV_AUTO_BATCH_CHEAP;
    m->max_batch_size = b;
    snprintf(m->batch_source, sizeof m->batch_source,
             "the planner's max_batch_size, capped at %d (it recommends no batch size for a model this cheap)",
             SRV_AUTO_BATCH_CHEAP);
  } else if (plan && !plan->batchable) {
    m->max_batch_size = 0;
    snprintf(m->batch_source, sizeof m->batch_source, "the planner: %.600s", plan->batch_note);
  } else {
    m->max_batch_size = 1;
    snprintf(m->batch_source, sizeof m->batch_source, "default 1: the planner failed (%.600s)", plan ? "no recommendation" : e.message);
  }
  toplu_batch_plan_free(plan);
}

static int cmp_i64(const void *a, const void *b) {
  int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
  return (x > y) - (x < y);
}

/* plan_sizes from max_batch_size and the preferred sizes. */
static void set_plan_sizes(srv_model_t *m) {
  int n = 0;
  int64_t mb = m->max_batch_size;
  if (mb <= 0) {
    m->n_plan_sizes = 0;
    return;
  }
  for (int64_t b = 1; b < mb && n < 40; b *= 2) m->plan_sizes[n++] = b;
  for (int k = 0; k < m->cfg.n_preferred && n < 47; k++)
    if (m->cfg.preferred_batch_size[k] >= 1 && m->cfg.preferred_batch_size[k] < mb) m->plan_sizes[n++] = m->cfg.preferred_batch_size[k];
  m->plan_sizes[n++] = mb;
  qsort(m->plan_sizes, (size_t)n, sizeof m->plan_sizes[0], cmp_i64);
  int w = 0;
  for (int k = 0; k < n; k++)
    if (w == 0 || m->plan_sizes[w - 1] != m->plan_sizes[k]) m->plan_sizes[w++] = m->plan_sizes[k];
  m->n_plan_sizes = w;
}

int64_t srv_model_plan_rows(const srv_model_t *m, int64_t rows) {
  for (int k = 0; k < m->n_plan_sizes; k++)
    if (m->plan_sizes[k] >= rows) return m->plan_sizes[k];
  return rows;
}

/* The session's notes (choose_threads' choice per plan size) into the server's log. */
static void session_log(void *user, toplu_log_level_t level, const char *msg) {
  srv_model_t *m = user;
  srv_log(m->server, level, "model '%s' version %s: %s", m->name, m->version, msg);
}

static int make_session(srv_model_t *m, toplu_error_t *err) {
  toplu_session_destroy(m->session);
  m->session = NULL;
  toplu_session_options_t so;
  toplu_session_options_init(&so);
  int inst = m->cfg.instance_count > 0 ? m->cfg.instance_count : 1;
  int threads = m->server->opts.threads;
  if (threads <= 0) {
    /* The cores divided among all the instances of all the models. */
    long cores = toplu_cpu_count(NULL, 0);
    int share = m->server->instance_budget > inst ? m->server->instance_budget : inst;
    threads = (int)(cores / share);
    if (threads < 1) threads = 1;
  }
  so.threads = threads;
  /* Each plan size runs on `threads` over the whole batch, on one thread,
   * or split into slices run at once, whichever its warm-up (its first run)
   * measured faster (toplu/session.h), and timed again when its runs slow
   * down (other work came to share the cores).  Plans slower than 40 ms a
   * run are not timed, so a live batch waits at most about five runs (200
   * ms) once for the timing.  The limit was 10 ms: PaddleOCR cls at batch
   * 16 on 2 cores beside one busy process ran 20 ms on the whole batch,
   * was never timed, and the server gave 500 inferences/s instead of 1,500
   * (docs/performance.md, "Threads chosen again when the cores get
   * shared"). */
  so.choose_threads = m->server->opts.fixed_threads ? -1 : 1;
  so.choose_threads_max_ms = 40;
  so.choose_threads_long_ms = -1; /* timed at once, in the warm-up: not over live batches */
  so.log = session_log;
  so.log_user = m;
  so.allocator = m->alloc;
  set_plan_sizes(m);
  /* Every plan size, for a few shape groups at once (inputs with free dims). */
  int plans = 4 * (m->n_plan_sizes > 0 ? m->n_plan_sizes : 1);
  so.max_plans = plans < 8 ? 8 : plans > 64 ? 64 : plans;
  so.batch_override = m->max_batch_size > 0 && toplu_model_fixed_batch(m->model);
  /* A byte bound on the cached plans: requests of ever new shapes (free
   * dims) each leave a plan with its own arena, so without one a client
   * sending one row of each of 20 widths held 5 GB of a 24 GB machine. */
  size_t pcb = m->server->opts.plan_cache_bytes;
  if (!pcb) {
    /* By default half of the budget less the weights' packed copies (which the plans share outside this bound;
     * about the model's own weight bytes): the other half is room for a plan of the largest batch built while the
     * cached ones stay (the warm-up times its threads on a second plan; batch_fits asks for both). With the whole
     * budget for cached plans, a 400 MiB container's server grew past its limit and was killed (a fresh user's
     * finding of 2026-12-06). At least an eighth of the budget. */
    uint64_t budget = memory_budget(NULL), w = (uint64_t)(toplu_model_param_bytes(m->model) > 0 ? toplu_model_param_bytes(m->model) : 0);
    pcb = (size_t)(budget > w + budget / 4 ? (budget - w) / 2 : budget / 8);
  }
  so.max_plan_bytes = pcb;
  return toplu_session_create(m->model, &so, &m->session, err) == TOPLU_OK ? 0 : -1;
}

int srv_model_load(srv_server_t *s, const char *name, const char *version, const char *model_file,
                   const srv_config_t *cfg, srv_model_t **out, toplu_error_t *err) {
  *out = NULL;
  srv_model_t *m = calloc(1, sizeof *m);
  if (!m) return toplu__errorf(err, TOPLU_ERR_OUT_OF_MEMORY, "out of memory loading model '%s'", name), -1;
  snprintf(m->name, sizeof m->name, "%s", name);
  snprintf(m->version, sizeof m->version, "%s", version);
  m->version_num = strtoll(version, NULL, 10);
  m->cfg = *cfg;
  m->server = s;
  m->owner = atomic_fetch_add(&s->next_owner, 1) + 1;
  atomic_init(&m->refs, 1);
  atomic_init(&m->ready, 0);
  m->loaded_ms = srv_wall_ms();
  char why[1024];
  toplu_model_options_t mo;
  memset(&mo, 0, sizeof mo);
  mo.qdq_int8_all = cfg->qdq_int8_all;
  if (toplu_model_load(model_file, &mo, &m->model, err) != TOPLU_OK) goto fail;
  if (toplu__model_nonnumeric_io(m->model, why, sizeof why)) { /* BYTES tensors are not served yet (toplu/tensor.h has the layout) */
    toplu__errorf(err, TOPLU_ERR_UNSUPPORTED, "%s: %s; the server takes numeric tensors only", model_file, why);
    goto fail;
  }
  if (toplu_allocator_create(0, &m->alloc) != TOPLU_OK) {
    toplu__errorf(err, TOPLU_ERR_OUT_OF_MEMORY, "out of memory for the allocator");
    goto fail;
  }
  m->max_batch_size = cfg->max_batch_size;
  snprintf(m->batch_source, sizeof m->batch_source, "%s", cfg->source[0] ? cfg->source : "config.json");
  int unbatched = !cfg->max_batch_size_set && no_batch_dim(m, why, sizeof why);
  int by_reshape = !unbatched && !cfg->max_batch_size_set && srv_config_has_reshape(cfg);
  if (by_reshape) {
    /* a reshape's shapes are read with or without the batch dim by max_batch_size: with none given they were
     * checked as unbatched and then served batched by the planner's choice (every request refused, the
     * metadata a dim short; a fresh user's finding of 2026-12-06), so the model is served as configured: unbatched,
     * max_batch_size 0 as in Triton when the field is absent */
    unbatched = 1;
    snprintf(why, sizeof why, "its configuration gives a reshape and no max_batch_size");
  }
  if (unbatched) {
    /* Triton's autocomplete: a model without a batch dim is served unbatched. */
    m->max_batch_size = 0;
    snprintf(m->batch_source, sizeof m->batch_source, "%s: %.900s",
             by_reshape ? "0, the configuration's"
                                         : "the model, chosen since no configuration gives max_batch_size and it has no batch dim",
             why);
  }
  if (make_session(m, err)) goto fail;
  if (!cfg->max_batch_size_set && !unbatched) {
    auto_batch(m, model_file);
    /* a size toplu chose batches requests, as Triton's auto-complete turns the dynamic batcher on with the
     * max_batch_size it fills in: a repository model without a configuration got the planner's size and ran every
     * request alone (a fresh user's finding of 2026-12-06; the single-file mode batched) */
    if (m->max_batch_size > 0) m->cfg.dynamic_batching = 1;
    if (make_session(m, err)) goto fail;
  }
  if (m->max_batch_size > 0 && !toplu_model_fixed_batch(m->model)) {
    /* Batching needs a batch dim: dim 0 of every input free (or fixed to 1, run by batch_override). */
    for (int i = 0; i < toplu_model_input_count(m->model); i++) {
      const toplu_value_info_t *v = toplu_model_input(m->model, i);
      if (v->ndim >= 1 && v->dims[0] < 0) continue;
      char dims[256];
      pl_format_info_dims(v, dims, sizeof dims);
      toplu__errorf(err, TOPLU_ERR_INVALID_MODEL,
                    "max_batch_size %lld (%s) but the model has no batch dim: input '%s' is %s; set max_batch_size 0",
                    (long long)m->max_batch_size, m->batch_source, v->name, dims);
      goto fail;
    }
  }
  if (srv_config_check_model(&m->cfg, m->model, why, sizeof why)) {
    toplu__errorf(err, TOPLU_ERR_INVALID_MODEL, "the configuration's %s (the model file %s)", why, model_file);
    goto fail;
  }
  int64_t fit = 0;
  if (m->max_batch_size > 0 && shapes_known(m) && batch_fits(m, &fit, err)) {
    /* a size toplu chose (tune result, planner) is lowered to what fits; a configured one fails the load */
    if (cfg->max_batch_size_set || fit < 1) goto fail;
    srv_log(s, TOPLU_LOG_WARNING, "model '%s' version %s: max_batch_size %lld (%s) lowered to %lld, what fits in memory",
            name, version, (long long)m->max_batch_size, m->batch_source, (long long)fit);
    char was[sizeof m->batch_source];
    snprintf(was, sizeof was, "%s", m->batch_source);
    snprintf(m->batch_source, sizeof m->batch_source, "%.600s, lowered to what fits in memory", was);
    m->max_batch_size = fit;
    toplu_error_clear(err);
    if (make_session(m, err)) goto fail;
  }
  if (m->max_batch_size > 0) {
    toplu_error_t e;
    toplu_error_clear(&e);
    int j = outputs_follow_batch(m, &e);
    if (j >= 0) {
      srv_log(s, TOPLU_LOG_WARNING,
              "model '%s' version %s: output '%s' has no batch dim tied to dim 0 of the inputs: served without batching "
              "(max_batch_size 0 instead of %lld)",
              m->name, m->version, toplu_model_output(m->model, j)->name, (long long)m->max_batch_size);
      m->max_batch_size = 0;
      snprintf(m->batch_source, sizeof m->batch_source, "0: output '%s' does not follow the batch dim",
               toplu_model_output(m->model, j)->name);
      if (make_session(m, err)) goto fail;
    } else if (j == -2) {
      srv_log(s, TOPLU_LOG_NOTE,
              "model '%s' version %s: could not check that the outputs follow the batch dim (%s); each batch's outputs are "
              "checked as it runs",
              m->name, m->version, e.message);
    }
  }
  if (m->max_batch_size > 0 && !toplu_model_fixed_batch(m->model)) {
    int apart = rows_stay_apart(m, why, sizeof why);
    if (!apart && cfg->max_batch_size_set) {
      /* the configuration asked for batching: as in Triton it gets it (the check can be wrong: a fresh user's
       * per-row model with a data-dependent ScatterND), with a warning that says what may happen */
      srv_log(s, TOPLU_LOG_WARNING,
              "model '%s' version %s: the model may not keep the rows of dim 0 apart (%s); max_batch_size %lld from "
              "%s is kept, so requests batched together may change each other's answers (max_batch_size 0 serves it "
              "unbatched); batches run at their own row count, without padding rows",
              m->name, m->version, why, (long long)m->max_batch_size, m->batch_source);
      m->n_plan_sizes = 0; /* no zero rows added (they took part in a mean over the batch: 0.19 off alone) */
    } else if (!apart) {
      srv_log(s, TOPLU_LOG_WARNING,
              "model '%s' version %s: the model does not keep the rows of dim 0 apart (%s): served without batching "
              "(max_batch_size 0 instead of %lld; a configuration's max_batch_size is kept)",
              m->name, m->version, why, (long long)m->max_batch_size);
      m->max_batch_size = 0;
      snprintf(m->batch_source, sizeof m->batch_source, "0: the model does not keep the rows of dim 0 apart");
      if (make_session(m, err)) goto fail;
    } else if (why[0]) {
      srv_log(s, TOPLU_LOG_NOTE, "model '%s' version %s: could not check that the model keeps rows apart (%s)", m->name,
              m->version, why);
    }
  }
  srv_log(s, TOPLU_LOG_NOTE, "model '%s' version %s: max_batch_size %lld (from %s)%s, %d instance(s) of %d engine thread(s)",
          m->name, m->version, (long long)m->max_batch_size, m->batch_source,
          m->max_batch_size > 0 && m->cfg.dynamic_batching ? ", dynamic batching on" : "",
          m->cfg.instance_count > 0 ? m->cfg.instance_count : 1, toplu_session_threads(m->session));
  m->metrics = srv_metrics_create();
  if (!m->metrics) {
    toplu__errorf(err, TOPLU_ERR_OUT_OF_MEMORY, "out of memory for the metrics");
    goto fail;
  }
  if (warm_up(m, model_file, err)) goto fail;
  if (srv_batcher_create(m, err)) goto fail;
  atomic_store(&m->ready, 1);
  *out = m;
  return 0;
fail:
  toplu__error_prefix(err, "model '%s' version %s", name, version);
  srv_model_free(m);
  return -1;
}
