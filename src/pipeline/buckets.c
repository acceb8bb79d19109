/* pipeline/buckets.c - length buckets (see buckets.h). */
#include "pipeline/buckets.h"

#include <ctype.h>
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "core/error.h"
#include "pipeline/buf.h"
#include "runtime/model_internal.h"

/* Parse "auto" or an ascending list into b->len / b->n. */
static toplu_status_t parse_list(pl_buckets_t *b, const char *spec, toplu_error_t *err) {
  if (!strcmp(spec, "auto")) return TOPLU_OK;
  const char *p = spec;
  while (*p) {
    if (b->n == PL_BUCKETS_MAX)
      return toplu__errorf(err, TOPLU_ERR_INVALID_ARGUMENT, "length_buckets '%.200s': more than %d lengths", spec,
                          PL_BUCKETS_MAX);
    char *end = (char *)p;
    long long v = 0;
    errno = 0;
    if (isdigit((unsigned char)*p)) v = strtoll(p, &end, 10);
    if (end == p || errno || v < 1 || (*end && *end != ','))
      return toplu__errorf(err, TOPLU_ERR_INVALID_ARGUMENT,
                          "length_buckets '%.200s': expected auto or ascending lengths >= 1 such as 16,32,64,128 "
                          "(at '%.40s')", spec, p);
    if (b->n > 0 && v <= b->len[b->n - 1])
      return toplu__errorf(err, TOPLU_ERR_INVALID_ARGUMENT, "length_buckets '%.200s': %lld after %lld; the lengths "
                          "must ascend", spec, v, (long long)b->len[b->n - 1]);
    b->len[b->n++] = v;
    p = *end ? end + 1 : end;
    if (*end && !*p)
      return toplu__errorf(err, TOPLU_ERR_INVALID_ARGUMENT, "length_buckets '%.200s': a trailing comma", spec);
  }
  if (b->n == 0) return toplu__errorf(err, TOPLU_ERR_INVALID_ARGUMENT, "length_buckets: empty (auto or lengths)");
  return TOPLU_OK;
}

/* Whether name holds word (any case). */
static int name_has(const char *name, const char *word) {
  size_t n = strlen(word);
  for (const char *p = name; *p; p++)
    if (!strncasecmp(p, word, n)) return 1;
  return 0;
}

/* An input named like an attention mask (attention_mask, input_mask, mask, ...). */
static int mask_like(const char *name) { return name_has(name, "mask"); }

/* A key padding mask (src_key_padding_mask, key_padding_mask, pad_mask): True marks padding (PyTorch's
 * nn.MultiheadAttention and nn.TransformerEncoder convention), the reverse of an attention mask. */
static int padding_mask_like(const char *name) { return mask_like(name) && name_has(name, "pad"); }

toplu_status_t pl_buckets_setup(pl_buckets_t *b, const char *spec, const toplu_model_t *m, const int *in_whole,
                                uint64_t outputs,
                                char *note, size_t note_size, toplu_error_t *err) {
  memset(b, 0, sizeof *b);
  if (note && note_size) note[0] = '\0';
  if (!spec || !*spec) return TOPLU_OK;
  toplu_status_t st = parse_list(b, spec, err);
  if (st) return st;
  int n_in = toplu_model_input_count(m), n_out = toplu_model_output_count(m);
  b->in_axis = malloc(sizeof *b->in_axis * (size_t)(n_in + 1));
  b->out_seq = calloc((size_t)n_out + 1, 1);
  b->in_pad_one = calloc((size_t)n_in + 1, 1);
  if (!b->in_axis || !b->out_seq || !b->in_pad_one) {
    pl_buckets_free(b);
    return toplu__errorf(err, TOPLU_ERR_OUT_OF_MEMORY, "out of memory for length_buckets");
  }
  const char *first_input = NULL, *float_mask = NULL;
  for (int i = 0; i < n_in; i++) {
    b->in_axis[i] = -1;
    const toplu_value_info_t *v = toplu_model_input(m, i);
    if ((in_whole && in_whole[i]) || v->ndim < 2) continue;
    for (int d = 1; d < v->ndim; d++) {
      if (v->dims[d] >= 0) continue;
      const char *name = v->dim_names[d] ? v->dim_names[d] : "?";
      if (b->in_axis[i] >= 0)
        st = toplu__errorf(err, TOPLU_ERR_INVALID_ARGUMENT,
                          "length_buckets: input '%s' has two symbolic dims besides the batch ('%s' and '%s'); "
                          "length buckets pad one sequence dim",
                          v->name, v->dim_names[b->in_axis[i] + 1] ? v->dim_names[b->in_axis[i] + 1] : "?", name);
      else if (first_input && strcmp(b->symbol, name))
        st = toplu__errorf(err, TOPLU_ERR_INVALID_ARGUMENT,
                          "length_buckets: input '%s' calls its sequence dim '%s', input '%s' calls it '%s'; the "
                          "padded inputs must share one", v->name, name, first_input, b->symbol);
      if (st) {
        pl_buckets_free(b);
        return st;
      }
      b->in_axis[i] = d - 1;
      if (!first_input) {
        first_input = v->name;
        snprintf(b->symbol, sizeof b->symbol, "%s", name);
      }
      b->has_mask |= mask_like(v->name);
      int fl = v->dtype == TOPLU_DTYPE_FLOAT || v->dtype == TOPLU_DTYPE_DOUBLE || v->dtype == TOPLU_DTYPE_FLOAT16 ||
               v->dtype == TOPLU_DTYPE_BFLOAT16;
      if (mask_like(v->name) && fl && !float_mask) float_mask = v->name;
      else if (mask_like(v->name) && !fl) b->in_pad_one[i] = padding_mask_like(v->name) ? 1 : 2;
    }
  }
  if (!first_input) {
    pl_buckets_free(b);
    return toplu__errorf(err, TOPLU_ERR_INVALID_ARGUMENT,
                        "length_buckets: no input of the model has a symbolic dim besides the batch (a sequence "
                        "length) to pad");
  }
  for (int j = 0; j < n_out; j++) {
    const toplu_value_info_t *v = toplu_model_output(m, j);
    if (!toplu__output_in(outputs, j)) continue; /* not written nor read (postprocess output=) */
    for (int d = 1; d < v->ndim; d++) {
      if (v->dims[d] >= 0 || !v->dim_names[d] || strcmp(v->dim_names[d], b->symbol)) continue;
      if (d != 1) {
        pl_buckets_free(b);
        return toplu__errorf(err, TOPLU_ERR_INVALID_ARGUMENT,
                            "length_buckets: output '%s' has the sequence dim '%s' at axis %d; padded rows are cut "
                            "back only where it follows the batch dim (axis 1)", v->name, b->symbol, d);
      }
      b->out_seq[j] = 1;
    }
  }
  b->on = 1;
  if (note && !b->has_mask)
    snprintf(note, note_size,
             "length_buckets: no input of the model is named like an attention mask; its padded rows see the "
             "padding (zeros) as tokens, and their results differ from the unpadded rows'");
  else if (note && float_mask)
    snprintf(note, note_size,
             "length_buckets: mask input '%s' is a float tensor; its padding is 0, which masks the padded positions "
             "in a 1/0 mask but not in an additive one (0 to attend, -inf to mask), where the padded rows would see "
             "the padding and differ from the unpadded rows'", float_mask);
  return TOPLU_OK;
}

int64_t pl_buckets_pick(const pl_buckets_t *b, int64_t len) {
  if (b->n == 0) { /* auto: powers of two from 16 */
    int64_t p = 16;
    while (p < len && p < ((int64_t)1 << 40)) p *= 2;
    return p < len ? len : p;
  }
  for (int k = 0; k < b->n; k++)
    if (b->len[k] >= len) return b->len[k];
  int64_t last = b->len[b->n - 1]; /* beyond the list: multiples of its last length */
  return len > INT64_MAX - last ? len : (len + last - 1) / last * last;
}

/* The fill of an integer or bool mask row t (kind as in_pad_one: 1 or 2), from its own values: see
 * buckets.h.  Before 2026-12-06 the name alone decided, and a mask named padding_mask with 1 at the tokens
 * (KerasNLP's) was padded with ones: every row attended to its padding (exit 0). */
static int mask_fill(const toplu_tensor_t *t, int kind) {
  int64_t n = toplu_tensor_numel(t), nonzero = 0;
  for (int64_t k = 0; k < n; k++) nonzero += pl_elem_get(t->dtype, t->data, k) != 0;
  if (n > 0 && nonzero == n) return 0;
  if (nonzero == 0) return kind == 1;
  return pl_elem_get(t->dtype, t->data, n - 1) != 0;
}

/* t padded with zeros (ones when one) along axis to len (t's data replaced); 0 or -1 (out of memory). */
static int pad_axis(toplu_tensor_t *t, int axis, int64_t len, int one) {
  int64_t old = t->dims[axis], outer = 1, inner = 1;
  for (int d = 0; d < axis; d++) outer *= t->dims[d];
  for (int d = axis + 1; d < t->ndim; d++) inner *= t->dims[d];
  int64_t dims[TOPLU_MAX_DIMS];
  memcpy(dims, t->dims, sizeof(int64_t) * (size_t)t->ndim);
  dims[axis] = len;
  toplu_tensor_t p;
  if (toplu_tensor_alloc(&p, t->dtype, t->ndim, dims)) return -1; /* zero-filled */
  size_t es = toplu_dtype_size(t->dtype), from = (size_t)(old * inner) * es, to = (size_t)(len * inner) * es;
  for (int64_t o = 0; o < outer; o++) {
    memcpy((char *)p.data + (size_t)o * to, (const char *)t->data + (size_t)o * from, from);
    for (size_t k = from; one && k < to; k += es) /* integers and bools only (padding_mask_like) */
      (void)pl_elem_set(t->dtype, p.data, (int64_t)(((size_t)o * to + k) / es), 1.0);
  }
  toplu_tensor_free(t);
  *t = p;
  return 0;
}

int pl_buckets_pad_row(const pl_buckets_t *b, pl_row_t *r, const toplu_model_t *m, int n_in, char *why,
                       size_t why_size) {
  int64_t len = -1;
  int first = -1;
  for (int i = 0; i < n_in; i++) {
    int ax = b->in_axis[i];
    if (ax < 0 || ax >= r->in[i].ndim) continue;
    int64_t l = r->in[i].dims[ax];
    if (len >= 0 && l != len) {
      snprintf(why, why_size, "length_buckets: input '%s' has %lld along '%s', input '%s' %lld; a row's sequence "
               "inputs must agree", toplu_model_input(m, i)->name, (long long)l, b->symbol,
               toplu_model_input(m, first)->name, (long long)len);
      return -1;
    }
    len = l;
    first = i;
  }
  if (len < 0) return 0;
  if (len == 0) {
    snprintf(why, why_size, "length_buckets: input '%s' is empty along '%s'; padded, the row would be run on padding "
             "alone", toplu_model_input(m, first)->name, b->symbol);
    return -1;
  }
  int64_t to = pl_buckets_pick(b, len);
  for (int i = 0; i < n_in && to > len; i++) {
    int ax = b->in_axis[i];
    if (ax < 0 || ax >= r->in[i].ndim) continue;
    int one = b->in_pad_one[i] ? mask_fill(&r->in[i], b->in_pad_one[i]) : 0;
    if (pad_axis(&r->in[i], ax, to, one)) {
      snprintf(why, why_size, "out of memory padding input '%s' to %lld", toplu_model_input(m, i)->name, (long long)to);
      return -1;
    }
  }
  r->seq_len = len;
  return 0;
}

void pl_buckets_free(pl_buckets_t *b) {
  free(b->in_axis);
  free(b->out_seq);
  free(b->in_pad_one);
  b->in_axis = NULL;
  b->out_seq = NULL;
  b->in_pad_one = NULL;
  b->on = 0;
}

int pl_buckets_probe_outputs(pl_buckets_t *b, toplu_session_t *s, const toplu_model_t *m, const toplu_tensor_t *whole,
                             char *names, size_t names_size) {
  int n_in = toplu_model_input_count(m), n_out = toplu_model_output_count(m), found = 0;
  if (names && names_size) names[0] = '\0';
  if (!b->on || n_in <= 0 || n_out <= 0 || n_in > 64 || n_out > 64) return 0;
  static const int64_t lens[2] = {5, 7}; /* two short lengths any position table holds */
  int64_t got[2][64];
  for (int p = 0; p < 2; p++) {
    toplu_tensor_t in[64], out[64];
    memset(in, 0, sizeof in);
    memset(out, 0, sizeof out);
    int ok = 1;
    for (int i = 0; i < n_in && ok; i++) {
      const toplu_value_info_t *v = toplu_model_input(m, i);
      if (whole && whole[i].data) {
        in[i] = whole[i];
        continue;
      }
      int64_t dims[TOPLU_MAX_DIMS];
      for (int d = 0; d < v->ndim; d++) dims[d] = d == 0 ? 1 : v->dims[d] >= 0 ? v->dims[d] : 1;
      if (b->in_axis[i] >= 0 && b->in_axis[i] + 1 < v->ndim) dims[b->in_axis[i] + 1] = lens[p];
      /* zeros: a token id, mask or type id every model takes (shapes are what is asked) */
      ok = v->kind == TOPLU_KIND_TENSOR && toplu_tensor_alloc(&in[i], v->dtype, v->ndim, dims) == TOPLU_OK;
    }
    if (ok) ok = toplu_session_output_shapes(s, in, n_in, out, n_out) == TOPLU_OK;
    for (int j = 0; j < n_out; j++) got[p][j] = ok && out[j].kind == TOPLU_KIND_TENSOR && out[j].ndim >= 2 ? out[j].dims[1] : -1;
    for (int i = 0; i < n_in; i++)
      if (!(whole && whole[i].data)) toplu_tensor_free(&in[i]);
    if (!ok) return 0;
  }
  size_t used = 0;
  for (int j = 0; j < n_out; j++) {
    if (b->out_seq[j] || got[0][j] != lens[0] || got[1][j] != lens[1]) continue;
    b->out_seq[j] = 1;
    found++;
    if (names && used < names_size) {
      int w = snprintf(names + used, names_size - used, "%s'%s'", used ? ", " : "", toplu_model_output(m, j)->name);
      used += w > 0 ? (size_t)w : 0;
    }
  }
  return found;
}
