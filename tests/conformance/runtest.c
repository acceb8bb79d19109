/*
 * tests/conformance/runtest.c - running one ONNX node test in this process.
 *
 * A test directory holds model.onnx and test_data_set_N/ directories with
 * input_M.pb and output_M.pb (serialized TensorProto, as the ONNX backend
 * test suite writes them).  Inputs are positional: input_M feeds the model's
 * M-th graph input that is not an initializer; output_M is the M-th graph
 * output.  The result goes to a pipe as text lines (see conformance.h) so
 * that the parent keeps what it learned even if this process crashes.
 */
#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "conformance.h"
#include "core/error.h"
#include "onnx_data.pb-c.h"
#include "onnx/onnx_model.h"
#include "toplu/toplu.h"

#define MAX_IO 64

/* Write all of buf to fd (retrying short writes). */
static void write_all(int fd, const char *buf, size_t n) {
  while (n > 0) {
    ssize_t w = write(fd, buf, n);
    if (w < 0) {
      if (errno == EINTR) continue;
      return;
    }
    buf += w;
    n -= (size_t)w;
  }
}

/* Send "<tag> <text>\n" with newlines in text turned into spaces. */
static void send_line(int fd, char tag, const char *text) {
  char line[4096];
  int n = snprintf(line, sizeof line - 1, "%c %s", tag, text);
  if (n < 0) return;
  if ((size_t)n > sizeof line - 2) n = (int)sizeof line - 2;
  for (int i = 2; i < n; i++)
    if (line[i] == '\n' || line[i] == '\r') line[i] = ' ';
  line[n++] = '\n';
  write_all(fd, line, (size_t)n);
}

/* Send the verdict and its message; returns the verdict. */
static conf_verdict_t finish(int fd, conf_verdict_t v, const char *msg) {
  char num[16];
  snprintf(num, sizeof num, "%d", (int)v);
  send_line(fd, 'V', num);
  send_line(fd, 'M', msg ? msg : "");
  return v;
}

/* Read a whole file into malloc'ed memory. */
static int read_file(const char *path, unsigned char **data, size_t *size) {
  *data = NULL;
  *size = 0;
  FILE *f = fopen(path, "rb");
  if (!f) return -1;
  size_t cap = 1 << 16, len = 0;
  unsigned char *buf = malloc(cap);
  while (buf) {
    size_t got = fread(buf + len, 1, cap - len, f);
    len += got;
    if (len < cap) break;
    unsigned char *nb = realloc(buf, cap * 2);
    if (!nb) {
      free(buf);
      buf = NULL;
      break;
    }
    buf = nb;
    cap *= 2;
  }
  int bad = ferror(f) || !buf;
  fclose(f);
  if (bad) {
    free(buf);
    return -1;
  }
  *data = buf;
  *size = len;
  return 0;
}

static int cmp_str(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

/* Names of dir's test_data_set_* subdirectories, sorted.  Returns count (or -1). */
static int list_data_sets(const char *dir, char ***out) {
  *out = NULL;
  DIR *d = opendir(dir);
  if (!d) return -1;
  int n = 0, cap = 0;
  char **names = NULL;
  struct dirent *e;
  while ((e = readdir(d))) {
    if (strncmp(e->d_name, "test_data_set_", 14)) continue;
    if (n == cap) {
      cap = cap ? cap * 2 : 8;
      char **nn = realloc(names, (size_t)cap * sizeof *nn);
      if (!nn) break;
      names = nn;
    }
    if (!(names[n] = strdup(e->d_name))) break;
    n++;
  }
  closedir(d);
  if (n) qsort(names, (size_t)n, sizeof *names, cmp_str);
  *out = names;
  return n;
}

static toplu_status_t decode_value(const void *data, size_t size, const char *path, toplu_kind_t kind,
                                   toplu_tensor_t *t, toplu_error_t *err);

/* A SequenceProto (onnx_data.proto) of tensors into a TOPLU_KIND_SEQUENCE value. */
static toplu_status_t decode_sequence(const void *data, size_t size, const char *path, toplu_tensor_t *t,
                                      toplu_error_t *err) {
  TopluConf__SequenceProto *sp = toplu_conf__sequence_proto__unpack(NULL, size, data);
  if (!sp) return toplu__errorf(err, TOPLU_ERR_PARSE, "%s: not a SequenceProto", path);
  toplu_status_t st = TOPLU_OK;
  if (sp->n_sequence_values || sp->n_optional_values || (sp->has_elem_type && sp->elem_type > 1))
    st = toplu__errorf(err, TOPLU_ERR_UNSUPPORTED, "%s: a sequence of non-tensors", path);
  toplu_tensor_t *items = st ? NULL : calloc(sp->n_tensor_values + 1, sizeof *items);
  if (!st && !items) st = toplu__errorf(err, TOPLU_ERR_OUT_OF_MEMORY, "%s: out of memory", path);
  memset(t, 0, sizeof *t);
  t->kind = TOPLU_KIND_SEQUENCE;
  t->ndim = 1;
  t->data = items;
  for (size_t k = 0; k < sp->n_tensor_values && !st; k++) {
    st = toplu__onnx_tensor_decode(sp->tensor_values[k].data, sp->tensor_values[k].len, path, &items[k], NULL, err);
    if (!st) t->dims[0] = (int64_t)k + 1;
    if (!st) t->dtype = items[k].dtype;
  }
  toplu_conf__sequence_proto__free_unpacked(sp, NULL);
  if (st) toplu_tensor_free(t);
  return st;
}

/* An OptionalProto: its element (a tensor or a sequence), or TOPLU_KIND_NONE. */
static toplu_status_t decode_optional(const void *data, size_t size, const char *path, toplu_tensor_t *t,
                                      toplu_error_t *err) {
  TopluConf__OptionalProto *op = toplu_conf__optional_proto__unpack(NULL, size, data);
  if (!op) return toplu__errorf(err, TOPLU_ERR_PARSE, "%s: not an OptionalProto", path);
  toplu_status_t st = TOPLU_OK;
  memset(t, 0, sizeof *t);
  t->kind = TOPLU_KIND_NONE;
  if (op->has_tensor_value)
    st = decode_value(op->tensor_value.data, op->tensor_value.len, path, TOPLU_KIND_TENSOR, t, err);
  else if (op->has_sequence_value)
    st = decode_value(op->sequence_value.data, op->sequence_value.len, path, TOPLU_KIND_SEQUENCE, t, err);
  else if (op->has_optional_value || (op->has_elem_type && op->elem_type != 0))
    st = toplu__errorf(err, TOPLU_ERR_UNSUPPORTED, "%s: an optional of a map, sparse tensor or optional", path);
  toplu_conf__optional_proto__free_unpacked(op, NULL);
  return st;
}

/* A test-data file as the kind the model declares there. */
static toplu_status_t decode_value(const void *data, size_t size, const char *path, toplu_kind_t kind,
                                   toplu_tensor_t *t, toplu_error_t *err) {
  if (kind == TOPLU_KIND_SEQUENCE) return decode_sequence(data, size, path, t, err);
  if (kind == TOPLU_KIND_OPTIONAL) return decode_optional(data, size, path, t, err);
  return toplu__onnx_tensor_decode(data, size, path, t, NULL, err);
}

/* Decode dir/<prefix>_<i>.pb for i = 0.. into ts, each as the kind the
 * model declares for its input (outputs 0) or output i; returns how many,
 * or -1 with a message and *unsupported set when a file cannot be used. */
static int read_tensors(const toplu_model_t *model, int outputs, const char *dir, const char *prefix,
                        toplu_tensor_t *ts, int cap, char *msg, size_t msg_size, int *unsupported) {
  int n = 0;
  for (;; n++) {
    char path[4096];
    snprintf(path, sizeof path, "%.3000s/%s_%d.pb", dir, prefix, n);
    if (access(path, F_OK) != 0) break;
    if (n == cap) {
      snprintf(msg, msg_size, "more than %d %s files", cap, prefix);
      return -1;
    }
    unsigned char *data;
    size_t size;
    if (read_file(path, &data, &size)) {
      snprintf(msg, msg_size, "cannot read %.1000s", path);
      return -1;
    }
    toplu_error_t err;
    toplu_error_clear(&err);
    const toplu_value_info_t *info = outputs ? toplu_model_output(model, n) : toplu_model_input(model, n);
    toplu_status_t st = decode_value(data, size, path, info ? info->kind : TOPLU_KIND_TENSOR, &ts[n], &err);
    free(data);
    if (st) {
      *unsupported = st == TOPLU_ERR_UNSUPPORTED;
      snprintf(msg, msg_size, "%s", err.message);
      return -1;
    }
  }
  return n;
}

/* numpy has no bfloat16, so the ONNX 1.12 test generator writes bfloat16
 * data as UINT16 tensors holding the bits (test_cast_FLOAT_to_BFLOAT16's
 * output, test_cast_BFLOAT16_to_FLOAT's input).  Where the model declares
 * value i (an input when outputs is 0) bfloat16 and the file holds uint16 of
 * that size, read the file as the bfloat16 bits it is. */
static void relabel_bfloat16(const toplu_model_t *model, int outputs, toplu_tensor_t *ts, int n) {
  for (int i = 0; i < n; i++) {
    const toplu_value_info_t *info = outputs ? toplu_model_output(model, i) : toplu_model_input(model, i);
    if (info && info->dtype == TOPLU_DTYPE_BFLOAT16 && ts[i].dtype == TOPLU_DTYPE_UINT16)
      ts[i].dtype = TOPLU_DTYPE_BFLOAT16;
  }
}

static void free_tensors(toplu_tensor_t *ts, int n) {
  for (int i = 0; i < n; i++) toplu_tensor_free(&ts[i]);
}

/* Whether name is one of the model's initializers. */
static int is_initializer(const toplu__onnx_model_t *om, const char *name) {
  for (int i = 0; i < om->n_initializers; i++)
    if (!strcmp(om->initializers[i].name, name)) return 1;
  return 0;
}

/* Look at the decoded file: send its op types, and find inputs or outputs
 * toplu cannot express (maps, nested sequences; string tensors are arrays of char *,
 * which ops that take none refuse themselves).  Returns 0, or 1
 * with a reason in msg. */
static int precheck(const toplu__onnx_model_t *om, int fd, char *msg, size_t msg_size) {
  for (int i = 0; i < om->n_nodes; i++) {
    const toplu__onnx_node_t *n = &om->nodes[i];
    int seen = 0;
    for (int j = 0; j < i && !seen; j++)
      seen = !strcmp(om->nodes[j].op_type, n->op_type) && !strcmp(om->nodes[j].domain, n->domain);
    if (seen) continue;
    char op[600];
    int dflt = !n->domain[0] || !strcmp(n->domain, "ai.onnx");
    snprintf(op, sizeof op, "%.250s%s%.250s", dflt ? "" : n->domain, dflt ? "" : ".", n->op_type);
    send_line(fd, 'O', op);
  }
  for (int k = 0; k < 2; k++) {
    int count = k ? om->n_outputs : om->n_inputs;
    const toplu__onnx_value_info_t *vs = k ? om->outputs : om->inputs;
    for (int i = 0; i < count; i++) {
      const toplu__onnx_value_info_t *v = &vs[i];
      if (!k && is_initializer(om, v->name)) continue;
      const char *why = NULL;
      if (v->kind < 0) why = "is not a tensor, a sequence of tensors or an optional (a map, or nested)";
      if (why) {
        snprintf(msg, msg_size, "graph %s '%s' %s", k ? "output" : "input", v->name, why);
        return 1;
      }
    }
  }
  return 0;
}

conf_verdict_t conf_run_test(const char *dir, const conf_options_t *opts, int fd) {
  char path[4096], msg[2048];
  toplu_error_t err;
  toplu_error_clear(&err);
  snprintf(path, sizeof path, "%.3000s/model.onnx", dir);

  /* The file as decoded: op types and test data toplu cannot express. */
  toplu__onnx_model_t *om = NULL;
  toplu_status_t st = toplu__onnx_read_file(path, &om, &err);
  if (st) return finish(fd, st == TOPLU_ERR_UNSUPPORTED ? CONF_UNSUPPORTED : CONF_LOAD_ERROR, err.message);
  int unexpressible = precheck(om, fd, msg, sizeof msg);
  toplu__onnx_model_free(om);
  if (unexpressible) return finish(fd, CONF_UNSUPPORTED, msg);

  toplu_model_options_t mo = {.no_optimize = opts->no_optimize};
  toplu_model_t *model = NULL;
  toplu_error_clear(&err);
  st = toplu_model_load(path, &mo, &model, &err);
  if (st) return finish(fd, st == TOPLU_ERR_UNSUPPORTED ? CONF_UNSUPPORTED : CONF_LOAD_ERROR, err.message);

  toplu_session_options_t so;
  toplu_session_options_init(&so);
  so.threads = opts->threads;
  toplu_session_t *sess = NULL;
  toplu_error_clear(&err);
  if ((st = toplu_session_create(model, &so, &sess, &err))) {
    toplu_model_destroy(model);
    return finish(fd, CONF_FAIL, err.message);
  }

  char **sets = NULL;
  int n_sets = list_data_sets(dir, &sets);
  conf_verdict_t v = CONF_PASS;
  msg[0] = '\0';
  if (n_sets <= 0) {
    v = CONF_FAIL;
    snprintf(msg, sizeof msg, "%.1000s: no test_data_set_* directory", dir);
  }
  int n_in_model = toplu_model_input_count(model), n_out_model = toplu_model_output_count(model);
  for (int s = 0; s < n_sets && v == CONF_PASS; s++) {
    char sd[4096];
    snprintf(sd, sizeof sd, "%.3000s/%.900s", dir, sets[s]);
    toplu_tensor_t in[MAX_IO], want[MAX_IO], got[MAX_IO];
    memset(in, 0, sizeof in);
    memset(want, 0, sizeof want);
    memset(got, 0, sizeof got);
    int unsupported = 0;
    int n_in = read_tensors(model, 0, sd, "input", in, MAX_IO, msg, sizeof msg, &unsupported);
    int n_out = n_in < 0 ? -1 : read_tensors(model, 1, sd, "output", want, MAX_IO, msg, sizeof msg, &unsupported);
    if (n_in >= 0 && n_out >= 0) {
      relabel_bfloat16(model, 0, in, n_in < n_in_model ? n_in : n_in_model);
      relabel_bfloat16(model, 1, want, n_out < n_out_model ? n_out : n_out_model);
    }
    if (n_in < 0 || n_out < 0) {
      v = unsupported ? CONF_UNSUPPORTED : CONF_FAIL;
    } else if (n_in != n_in_model) {
      v = CONF_FAIL;
      snprintf(msg, sizeof msg, "%.200s: %d input files, but the model has %d inputs", sets[s], n_in, n_in_model);
    } else if (n_out != n_out_model) {
      v = CONF_FAIL;
      snprintf(msg, sizeof msg, "%.200s: %d output files, but the model has %d outputs", sets[s], n_out, n_out_model);
    } else if ((st = toplu_session_run(sess, in, n_in, got, n_out))) {
      v = st == TOPLU_ERR_UNSUPPORTED ? CONF_UNSUPPORTED : CONF_FAIL;
      snprintf(msg, sizeof msg, "%s%s: %.1900s", v == CONF_FAIL ? "run error: " : "", toplu_strerror(st),
               toplu_session_last_error(sess));
    } else {
      for (int o = 0; o < n_out && v == CONF_PASS; o++) {
        const toplu_value_info_t *info = toplu_model_output(model, o);
        if (!conf_compare(info ? info->name : "?", o, &got[o], &want[o], opts->rtol, opts->atol, msg, sizeof msg)) {
          v = CONF_FAIL;
          if (n_sets > 1) {
            char tmp[2048];
            snprintf(tmp, sizeof tmp, "%.200s: %.1800s", sets[s], msg);
            snprintf(msg, sizeof msg, "%s", tmp);
          }
        }
      }
    }
    free_tensors(in, MAX_IO); /* all zeroed first; free is NULL-safe */
    free_tensors(want, MAX_IO);
    free_tensors(got, MAX_IO);
  }
  for (int s = 0; s < n_sets; s++) free(sets[s]);
  free(sets);
  toplu_session_destroy(sess);
  toplu_model_destroy(model);
  return finish(fd, v, msg);
}
