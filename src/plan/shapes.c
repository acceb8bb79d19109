/*
 * plan/shapes.c - input shapes at a batch size (see plan/shapes.h).
 */
#include "plan/shapes.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"

#define MAX_DIM INT64_C(2147483647) /* largest dim of a given shape */

typedef struct symbol {
  const char *name;
  int64_t value;
} symbol_t;

/* Value bound to a named symbol, or -1. */
static int64_t lookup(const symbol_t *syms, int n, const char *name) {
  if (!name || !strcmp(name, "?") || !name[0]) return -1;
  for (int i = 0; i < n; i++)
    if (!strcmp(syms[i].name, name)) return syms[i].value;
  return -1;
}

/* Bind a named symbol (unnamed ones are not shared).  syms holds one entry
 * per dim of every input, so there is always room. */
static void bind(symbol_t *syms, int *n, const char *name, int64_t value) {
  if (!name || !strcmp(name, "?") || !name[0] || lookup(syms, *n, name) >= 0) return;
  syms[*n].name = name;
  syms[*n].value = value;
  (*n)++;
}

/* Default for symbolic dim d of a rank-r input. */
static int64_t default_dim(int r, int d) {
  if (r == 4 && d == 1) return 3;
  if (r == 4 && d >= 2) return 224;
  return 128;
}

void toplu__plan_append(char *buf, size_t size, const char *fmt, ...) {
  size_t l = strlen(buf);
  if (l + 1 >= size) return;
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(buf + l, size - l, fmt, ap);
  va_end(ap);
}

toplu_status_t toplu__batch_shapes_init(const toplu_model_t *m, const toplu_input_shape_t *given, int n_given,
                                       toplu__batch_shapes_t *s, toplu_error_t *err) {
  memset(s, 0, sizeof *s);
  int n = toplu_model_input_count(m);
  s->n_inputs = n;
  s->base = calloc((size_t)n + 1, sizeof *s->base);
  s->batched = calloc((size_t)n + 1, sizeof *s->batched);
  if (!s->base || !s->batched) {
    toplu__batch_shapes_free(s);
    return toplu__errorf(err, TOPLU_ERR_OUT_OF_MEMORY, "out of memory");
  }
  s->fixed_batch = toplu_model_fixed_batch(m);
  const toplu_input_shape_t **by_input = calloc((size_t)n + 1, sizeof *by_input);
  if (!by_input) {
    toplu__batch_shapes_free(s);
    return toplu__errorf(err, TOPLU_ERR_OUT_OF_MEMORY, "out of memory");
  }
  toplu_status_t st = TOPLU_OK;
  /* Match the given shapes to inputs and check them. */
  for (int k = 0; k < n_given && !st; k++) {
    int i = toplu_model_input_index(m, given[k].name);
    if (i < 0) {
      char list[400] = "";
      for (int j = 0; j < n; j++) toplu__plan_append(list, sizeof list, "%s%s", j ? ", " : "", toplu_model_input(m, j)->name);
      if (n)
        st = toplu__errorf(err, TOPLU_ERR_NOT_FOUND, "shapes: %s: the model has no input '%s'; its inputs: %s",
                          given[k].name, given[k].name, list);
      else
        st = toplu__errorf(err, TOPLU_ERR_NOT_FOUND, "shapes: %s: the model has no inputs at all", given[k].name);
      break;
    }
    if (by_input[i]) {
      st = toplu__errorf(err, TOPLU_ERR_SHAPE, "shapes: %s given twice", given[k].name);
      break;
    }
    by_input[i] = &given[k];
    const toplu_value_info_t *v = toplu_model_input(m, i);
    if (v->ndim >= 0 && given[k].ndim != v->ndim) {
      st = toplu__errorf(err, TOPLU_ERR_SHAPE, "shapes: %s: %d dims given, the model's input has rank %d",
                        given[k].name, given[k].ndim, v->ndim);
      break;
    }
    int batch_dim = given[k].ndim >= 1 && (s->fixed_batch || v->ndim < 0 || v->dims[0] < 0);
    double elements = 1;
    for (int d = 0; d < given[k].ndim; d++) {
      if (given[k].dims[d] < 0) {
        st = toplu__errorf(err, TOPLU_ERR_SHAPE, "shapes: %s: dim %d is negative", given[k].name, d);
        break;
      }
      if (given[k].dims[d] > MAX_DIM) {
        st = toplu__errorf(err, TOPLU_ERR_SHAPE, "shapes: %s: dim %d = %lld is too large (at most %lld per dim)",
                          given[k].name, d, (long long)given[k].dims[d], (long long)MAX_DIM);
        break;
      }
      /* 0 only where the model itself declares an empty dim (dim 0 of a batched input is the batch size: ignored) */
      if (given[k].dims[d] == 0 && !(d == 0 && batch_dim) && !(v->ndim >= 0 && v->dims[d] == 0)) {
        st = toplu__errorf(err, TOPLU_ERR_SHAPE,
                          "shapes: %s: dim %d is 0: sizes must be >= 1 (an empty tensor has nothing to plan; the "
                          "model does not declare this dim empty)",
                          given[k].name, d);
        break;
      }
      if (!(d == 0 && batch_dim)) elements *= (double)given[k].dims[d];
      if (v->ndim >= 0 && v->dims[d] >= 0 && given[k].dims[d] != v->dims[d] && !(d == 0 && s->fixed_batch)) {
        st = toplu__errorf(err, TOPLU_ERR_SHAPE, "shapes: %s: dim %d is %lld, the model fixes it to %lld",
                          given[k].name, d, (long long)given[k].dims[d], (long long)v->dims[d]);
        break;
      }
    }
    if (!st && elements > (double)TOPLU_MAX_ELEMENTS)
      st = toplu__errorf(err, TOPLU_ERR_SHAPE,
                        "shapes: %s: %.4g elements per sample, more than toplu plans for (" TOPLU_MAX_ELEMENTS_TEXT
                        "): check the dims",
                        given[k].name, elements);
  }
  /* At most one symbol per dim of every input. */
  symbol_t *syms = st ? NULL : calloc((size_t)n * TOPLU_MAX_DIMS + 1, sizeof *syms);
  int n_syms = 0;
  if (!st && !syms) st = toplu__errorf(err, TOPLU_ERR_OUT_OF_MEMORY, "out of memory");
  /* Batched inputs, and symbols bound by the given shapes. */
  for (int i = 0; i < n && !st; i++) {
    const toplu_value_info_t *v = toplu_model_input(m, i);
    int ndim = v->ndim >= 0 ? v->ndim : (by_input[i] ? by_input[i]->ndim : -1);
    if (ndim < 0) {
      st = toplu__errorf(err, TOPLU_ERR_SHAPE, "input '%s' has no declared rank: give its shape (shapes: %s=DIMS)", v->name,
                        v->name);
      break;
    }
    s->batched[i] = ndim >= 1 && (s->fixed_batch || v->ndim < 0 || v->dims[0] < 0);
    s->batchable |= s->batched[i];
    if (by_input[i] && v->ndim >= 0)
      for (int d = 0; d < ndim; d++)
        if (v->dims[d] < 0 && !(d == 0 && s->batched[i])) bind(syms, &n_syms, v->dim_names[d], by_input[i]->dims[d]);
    if (s->batched[i] && v->ndim >= 0) bind(syms, &n_syms, v->dim_names[0], 1); /* the batch symbol: not reused */
  }
  char assumed[400] = "";
  for (int i = 0; i < n && !st; i++) {
    const toplu_value_info_t *v = toplu_model_input(m, i);
    toplu_tensor_t *t = &s->base[i];
    t->dtype = v->dtype;
    t->ndim = v->ndim >= 0 ? v->ndim : by_input[i]->ndim;
    for (int d = 0; d < t->ndim; d++) {
      if (d == 0 && s->batched[i]) {
        t->dims[d] = 1;
        continue;
      }
      if (by_input[i]) {
        t->dims[d] = by_input[i]->dims[d];
        continue;
      }
      if (v->dims[d] >= 0) {
        t->dims[d] = v->dims[d];
        continue;
      }
      int64_t val = lookup(syms, n_syms, v->dim_names[d]);
      if (val < 0) {
        val = default_dim(t->ndim, d);
        bind(syms, &n_syms, v->dim_names[d], val);
        toplu__plan_append(assumed, sizeof assumed, "%s%s dim %d = %lld", assumed[0] ? ", " : "", v->name, d, (long long)val);
      }
      t->dims[d] = val;
    }
  }
  free(by_input);
  free(syms);
  if (st) {
    toplu__batch_shapes_free(s);
    return st;
  }
  if (assumed[0])
    snprintf(s->note, sizeof s->note, "symbolic dims assumed (give shapes: NAME=DIMS to change them): %s", assumed);
  for (int i = 0; i < n; i++) {
    const toplu_tensor_t *t = &s->base[i];
    toplu__plan_append(s->desc, sizeof s->desc, "%s%s: [", i ? "; " : "", toplu_model_input(m, i)->name);
    for (int d = 0; d < t->ndim; d++) {
      if (d == 0 && s->batched[i]) toplu__plan_append(s->desc, sizeof s->desc, "B");
      else toplu__plan_append(s->desc, sizeof s->desc, "%s%lld", d ? ", " : "", (long long)t->dims[d]);
    }
    toplu__plan_append(s->desc, sizeof s->desc, "] %s", toplu_dtype_name(t->dtype));
  }
  return TOPLU_OK;
}

void toplu__batch_shapes_at(const toplu__batch_shapes_t *s, int64_t b, toplu_tensor_t *out) {
  for (int i = 0; i < s->n_inputs; i++) {
    out[i] = s->base[i];
    out[i].data = NULL;
    if (s->batched[i]) out[i].dims[0] = b;
  }
}

size_t toplu__batch_shapes_input_bytes(const toplu__batch_shapes_t *s, int64_t b) {
  size_t total = 0;
  for (int i = 0; i < s->n_inputs; i++) {
    toplu_tensor_t t = s->base[i];
    if (s->batched[i]) t.dims[0] = b;
    total += toplu_tensor_nbytes(&t);
  }
  return total;
}

void toplu__batch_shapes_free(toplu__batch_shapes_t *s) {
  if (!s) return;
  free(s->base);
  free(s->batched);
  s->base = NULL;
  s->batched = NULL;
}
