/* pipeline/postprocess.c - softmax, argmax, top-k and labels. */
#include "pipeline/postprocess.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "pipeline/files.h"
#include "toplu/pipeline.h"

toplu_status_t pl_post_parse(const char *spec, pl_post_t *p, toplu_error_t *err) {
  memset(p, 0, sizeof *p);
  p->kind = PL_POST_RAW;
  if (!spec) return TOPLU_OK;
  const char *s = spec;
  int seen_raw = 0;
  if (!*s) return TOPLU_OK; /* "" as not given: raw */
  for (;;) {
    const char *end = strchr(s, ',');
    size_t n = end ? (size_t)(end - s) : strlen(s);
    char item[300];
    if (n >= sizeof item) return toplu__errorf(err, TOPLU_ERR_INVALID_ARGUMENT, "postprocess: item too long");
    memcpy(item, s, n);
    item[n] = '\0';
    if (!n) {
      return toplu__errorf(err, TOPLU_ERR_INVALID_ARGUMENT, "postprocess '%s': an empty item", spec);
    } else if (!strcmp(item, "raw")) {
      if (seen_raw || p->kind != PL_POST_RAW || p->softmax)
        return toplu__errorf(err, TOPLU_ERR_INVALID_ARGUMENT,
                            "postprocess '%s': raw with %s (raw keeps the outputs as they are; give it alone, with "
                            "output=NAME at most)",
                            spec, seen_raw ? "raw again" : p->softmax ? "softmax" : p->kind == PL_POST_ARGMAX ? "argmax" : "topk");
      seen_raw = 1;
    } else if (!strcmp(item, "softmax")) {
      if (p->kind != PL_POST_RAW)
        return toplu__errorf(err, TOPLU_ERR_INVALID_ARGUMENT, "postprocess: softmax must come before argmax/topk");
      if (p->softmax || seen_raw)
        return toplu__errorf(err, TOPLU_ERR_INVALID_ARGUMENT, "postprocess '%s': softmax with %s", spec,
                            p->softmax ? "softmax again" : "raw");
      p->softmax = 1;
    } else if (!strcmp(item, "argmax") || !strncmp(item, "topk=", 5)) {
      if (p->kind != PL_POST_RAW)
        return toplu__errorf(err, TOPLU_ERR_INVALID_ARGUMENT, "postprocess: %s after %s: give argmax or topk=K once",
                            item, p->kind == PL_POST_ARGMAX ? "argmax" : "topk");
      if (seen_raw)
        return toplu__errorf(err, TOPLU_ERR_INVALID_ARGUMENT, "postprocess '%s': %s with raw", spec, item);
      if (item[0] == 'a') {
        p->kind = PL_POST_ARGMAX;
      } else {
        char *e;
        long k = strtol(item + 5, &e, 10);
        if (e == item + 5 || *e || k < 1 || k > 100000)
          return toplu__errorf(err, TOPLU_ERR_INVALID_ARGUMENT, "postprocess: bad '%s' (topk=K, K >= 1)", item);
        p->kind = PL_POST_TOPK;
        p->k = (int)k;
      }
    } else if (!strncmp(item, "output=", 7) && item[7]) {
      if (p->selected)
        return toplu__errorf(err, TOPLU_ERR_INVALID_ARGUMENT, "postprocess '%s': output= given twice ('%s', then '%s')",
                            spec, p->output_name, item + 7);
      snprintf(p->output_name, sizeof p->output_name, "%s", item + 7);
      p->selected = 1;
    } else {
      return toplu__errorf(err, TOPLU_ERR_INVALID_ARGUMENT,
                          "postprocess: unknown item '%s' (raw, softmax, argmax, topk=K, output=NAME)", item);
    }
    if (!end) break;
    s = end + 1;
  }
  return TOPLU_OK;
}

toplu_status_t pl_post_bind(pl_post_t *p, const toplu_model_t *model, const char *labels, char *note, size_t note_size,
                            toplu_error_t *err) {
  if (note && note_size) note[0] = '\0';
  p->output = 0;
  p->model = model;
  if (p->output_name[0]) {
    p->output = toplu_model_output_index(model, p->output_name);
    if (p->output < 0) {
      char names[512] = ""; /* the outputs it has, as the other unknown-name errors list them */
      size_t used = 0;
      int n = toplu_model_output_count(model);
      for (int i = 0; i < n && used < sizeof names; i++) {
        int w = snprintf(names + used, sizeof names - used, "%s'%s'", i ? ", " : "", toplu_model_output(model, i)->name);
        if (w < 0) break;
        used += (size_t)w;
      }
      if (used >= sizeof names) snprintf(names + sizeof names - 5, 5, "...");
      return toplu__errorf(err, TOPLU_ERR_NOT_FOUND, "postprocess output=%s: the model has no such output (it has %s)",
                          p->output_name, n ? names : "none");
    }
  }
  if (toplu_model_output_count(model) < 1)
    return toplu__errorf(err, TOPLU_ERR_INVALID_ARGUMENT, "the model has no outputs");
  const toplu_value_info_t *o = toplu_model_output(model, p->output);
  /* float64 and 32/64-bit integer outputs: scores in float64 (float32 rounded them past 2^24) */
  p->score_f64 = o->dtype == TOPLU_DTYPE_DOUBLE || o->dtype == TOPLU_DTYPE_INT64 || o->dtype == TOPLU_DTYPE_UINT64 ||
                 o->dtype == TOPLU_DTYPE_INT32 || o->dtype == TOPLU_DTYPE_UINT32;
  if (p->softmax && o->dtype != TOPLU_DTYPE_FLOAT && o->dtype != TOPLU_DTYPE_UNDEFINED)
    return toplu__errorf(err, TOPLU_ERR_INVALID_ARGUMENT, "postprocess softmax: output '%s' is %s, not float32",
                        o->name, toplu_dtype_name(o->dtype));
  if ((p->kind != PL_POST_RAW) && !pl_dtype_numeric(o->dtype) && o->dtype != TOPLU_DTYPE_UNDEFINED)
    return toplu__errorf(err, TOPLU_ERR_INVALID_ARGUMENT, "postprocess: output '%s' is %s, not numeric", o->name,
                        toplu_dtype_name(o->dtype));
  /* a row of one value (an output [N], N symbolic: a class id the model picked already, a score): argmax of it is
   * always 0 (an output [1000] of a model without a batch dim is one row's classes) */
  if ((p->kind != PL_POST_RAW || p->softmax) && o->ndim == 1 && o->dims[0] < 0)
    return toplu__errorf(err, TOPLU_ERR_INVALID_ARGUMENT,
                        "postprocess %s: output '%s' is %s [%s], one value a row: there is nothing to %s (keep it "
                        "with raw,output=%s)",
                        p->kind == PL_POST_ARGMAX ? "argmax" : p->kind == PL_POST_TOPK ? "topk" : "softmax", o->name,
                        toplu_dtype_name(o->dtype), o->dim_names[0] ? o->dim_names[0] : "N",
                        p->kind == PL_POST_RAW ? "normalise" : "rank", o->name);
  if (labels && p->kind == PL_POST_RAW)
    return toplu__errorf(err, TOPLU_ERR_INVALID_ARGUMENT,
                        "labels %s: postprocess %s writes no classes to name; give argmax or topk=K with labels",
                        labels, p->softmax ? "softmax" : "raw");
  if (p->kind == PL_POST_TOPK && o->ndim >= 2) { /* K past the classes a row has, where the model says how many */
    int64_t classes = 1;
    for (int d = 1; d < o->ndim && classes > 0; d++) classes = o->dims[d] > 0 ? classes * o->dims[d] : -1;
    if (classes > 0 && p->k > classes)
      return toplu__errorf(err, TOPLU_ERR_INVALID_ARGUMENT,
                          "postprocess topk=%d: output '%s' has %lld class%s a row; give K <= %lld", p->k, o->name,
                          (long long)classes, classes == 1 ? "" : "es", (long long)classes);
  }
  if (!labels) return TOPLU_OK;
  char *text;
  size_t len;
  toplu_status_t st = pl_file_read_limit(labels, TOPLU_JOB_LABELS_MAX_BYTES, "the largest labels file", &text, &len, err);
  if (st) return toplu__error_prefix(err, "labels");
  int cap = 0;
  for (char *line = text; line && *line;) {
    char *nl = strchr(line, '\n');
    if (nl) *nl = '\0';
    size_t l = strlen(line);
    if (l && line[l - 1] == '\r') line[l - 1] = '\0';
    if (p->n_labels == cap) {
      cap = cap ? cap * 2 : 256;
      char **nlb = realloc(p->labels, sizeof(char *) * (size_t)cap);
      if (!nlb) {
        free(text);
        return toplu__errorf(err, TOPLU_ERR_OUT_OF_MEMORY, "out of memory reading %s", labels);
      }
      p->labels = nlb;
    }
    if (!(p->labels[p->n_labels++] = strdup(line))) {
      free(text);
      return toplu__errorf(err, TOPLU_ERR_OUT_OF_MEMORY, "out of memory reading %s", labels);
    }
    line = nl ? nl + 1 : NULL;
  }
  free(text);
  if (p->n_labels == 0) return toplu__errorf(err, TOPLU_ERR_INVALID_ARGUMENT, "labels %s: the file is empty", labels);
  if (!note || !note_size) return TOPLU_OK;
  /* Warnings: a count that differs from the output's classes, blank lines. */
  size_t n = 0;
  int64_t classes = o->ndim >= 2 ? 1 : -1;
  for (int d = 1; d < o->ndim && classes > 0; d++) classes = o->dims[d] > 0 ? classes * o->dims[d] : -1;
  if (classes > 0 && classes != p->n_labels)
    n += (size_t)snprintf(note + n, note_size - n,
                          "labels %s has %d line%s, output '%s' has %lld classes%s", labels, p->n_labels,
                          p->n_labels == 1 ? "" : "s", o->name, (long long)classes,
                          p->n_labels < classes ? ": classes past the last line get no label" : ": the extra lines are unused");
  int blanks = 0;
  for (int i = 0; i < p->n_labels; i++) {
    const char *q = p->labels[i];
    while (*q == ' ' || *q == '\t') q++;
    if (*q) continue;
    if (blanks == 0 && n < note_size)
      n += (size_t)snprintf(note + n, note_size - n, "%slabels %s: blank line%s", n ? "\n" : "", labels, "");
    if (blanks < 8 && n < note_size) n += (size_t)snprintf(note + n, note_size - n, "%s %d", blanks ? "," : "", i + 1);
    blanks++;
  }
  if (blanks && n < note_size)
    snprintf(note + n, note_size - n, "%s (kept: %s class%s an empty label)", blanks > 8 ? ", ..." : "",
             blanks == 1 ? "that" : "those", blanks == 1 ? " gets" : "es get");
  return TOPLU_OK;
}

void pl_post_free(pl_post_t *p) {
  for (int i = 0; i < p->n_labels; i++) free(p->labels[i]);
  free(p->labels);
  p->labels = NULL;
  p->n_labels = 0;
}

void pl_post_describe(const pl_post_t *p, char *buf, size_t size) {
  const char *kind = p->kind == PL_POST_ARGMAX ? "argmax" : p->kind == PL_POST_TOPK ? "topk" : "raw";
  /* raw with output=NAME writes that output alone: told apart from raw (the text before 2026-12-06 kept for the
   * others, so their checkpoints resume) */
  snprintf(buf, size, "%s%s,output=%d,labels=%d,k=%d%s%s", p->softmax ? "softmax," : "", kind, p->output, p->n_labels,
           p->kind == PL_POST_TOPK ? p->k : 0, p->kind == PL_POST_RAW && p->selected ? ",only" : "",
           p->kind == PL_POST_TOPK && p->score_f64 ? ",f64" : ""); /* float32 scores before 2026-12-06: refused */
}

const char *pl_post_label(const pl_post_t *p, int64_t i) {
  return i >= 0 && i < p->n_labels ? p->labels[i] : NULL;
}

/* Name of output j for messages. */
static const char *out_name(const pl_post_t *p, int j) {
  return p->model ? toplu_model_output(p->model, j)->name : "?";
}

/* Softmax over the last axis of a row of n floats with inner size inner. */
static void softmax_rows(float *x, int64_t n, int64_t inner) {
  for (int64_t o = 0; o + inner <= n; o += inner) {
    float m = x[o];
    for (int64_t i = 1; i < inner; i++) m = x[o + i] > m ? x[o + i] : m;
    double sum = 0;
    for (int64_t i = 0; i < inner; i++) {
      x[o + i] = expf(x[o + i] - m);
      sum += x[o + i];
    }
    float inv = (float)(1.0 / sum);
    for (int64_t i = 0; i < inner; i++) x[o + i] *= inv;
  }
}

/* Index of the first non-finite element, or -1. */
static int64_t first_nonfinite(toplu_dtype_t dt, const void *data, int64_t n) {
  if (!pl_dtype_float(dt)) return -1;
  for (int64_t i = 0; i < n; i++)
    if (!isfinite(pl_elem_get(dt, data, i))) return i;
  return -1;
}

/* 1 when element i of data ranks above element j: compared in the dtype's own values (int64 and uint64 exactly,
 * float64 in double; until 2026-12-06 through float and double, which tied or swapped values past their
 * precision: a fresh user's finding), NaN above every number (numpy's argmax, torch.topk). */
static int elem_above(toplu_dtype_t dt, const void *data, int64_t i, int64_t j) {
  switch (dt) {
  case TOPLU_DTYPE_INT64:
    return ((const int64_t *)data)[i] > ((const int64_t *)data)[j];
  case TOPLU_DTYPE_UINT64:
    return ((const uint64_t *)data)[i] > ((const uint64_t *)data)[j];
  default: {
    double a = pl_elem_get(dt, data, i), b = pl_elem_get(dt, data, j);
    if (isnan(a)) return !isnan(b);
    return a > b;
  }
  }
}

int pl_post_chunk(const pl_post_t *p, pl_chunk_t *c) {
  for (int64_t r = 0; r < c->count; r++) {
    pl_row_t *row = &c->rows[r];
    if (row->fail_stage) continue;
    /* Rows that ran: check the outputs that will be written. */
    for (int j = 0; j < c->n_outputs; j++) {
      if (!pl_post_reads(p, j)) continue;
      toplu_dtype_t dt;
      int nd;
      int64_t dims[TOPLU_MAX_DIMS];
      const void *d = pl_row_output(c, row, j, &dt, &nd, dims);
      if (!d) {
        pl_row_fail(row, "infer", "no output");
        break;
      }
      int64_t n = 1;
      for (int k = 0; k < nd; k++) n *= dims[k];
      /* the model's output is checked before softmax, which spreads one NaN over its row (the message named
       * the row's first element, not the model's NaN: a fresh user's finding of 2026-12-06) */
      int64_t bad = p->allow_nonfinite ? -1 : first_nonfinite(dt, d, n);
      if (bad < 0 && j == p->output && p->softmax && dt == TOPLU_DTYPE_FLOAT && n > 0) {
        softmax_rows((float *)(uintptr_t)d, n, nd ? dims[nd - 1] : 1);
        bad = p->allow_nonfinite ? -1 : first_nonfinite(dt, d, n);
      }
      if (bad >= 0) {
        pl_row_fail(row, "postprocess", "output '%s' has %s at element %lld", out_name(p, j),
                    isnan(pl_elem_get(dt, d, bad)) ? "NaN" : "Inf", (long long)bad);
        break;
      }
      if (j != p->output || p->kind == PL_POST_RAW) continue;
      if (n == 0) {
        pl_row_fail(row, "postprocess", "output '%s' is empty", out_name(p, j));
        break;
      }
      if (p->kind == PL_POST_ARGMAX) {
        int64_t best = 0;
        for (int64_t i = 1; i < n; i++)
          if (elem_above(dt, d, i, best)) best = i;
        row->res.argmax = best;
      } else {
        int k = p->k < n ? p->k : (int)n;
        row->res.topk_index = malloc(sizeof(int64_t) * (size_t)k);
        row->res.topk_score = malloc(sizeof(double) * (size_t)k);
        if (!row->res.topk_index || !row->res.topk_score) return -1;
        int m = 0;
        int64_t *idx = row->res.topk_index;
        for (int64_t i = 0; i < n; i++) {
          if (m == k && !elem_above(dt, d, i, idx[k - 1])) continue; /* ties: the lower index stays first */
          int pos = m < k ? m++ : k - 1;
          while (pos > 0 && elem_above(dt, d, i, idx[pos - 1])) {
            idx[pos] = idx[pos - 1];
            pos--;
          }
          idx[pos] = i;
        }
        for (int i = 0; i < k; i++) row->res.topk_score[i] = pl_elem_get(dt, d, idx[i]);
        row->res.k = k;
      }
    }
  }
  return 0;
}
