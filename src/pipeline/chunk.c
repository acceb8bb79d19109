/* pipeline/chunk.c - chunks of rows, shape buckets and stacking into batches. */
#include "pipeline/chunk.h"
#include "pipeline/pool.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void pl_value_free(pl_value_t *v) {
  free(v->pixels);
  toplu_tensor_free(&v->t);
  memset(v, 0, sizeof *v);
}

void pl_value_release(struct pl_pool *pool, pl_value_t *v) {
  pl_pool_tensor_put(pool, &v->t);
  pl_value_free(v);
}

int pl_chunk_init(pl_chunk_t *c, int64_t index, int64_t first, int64_t count, int n_inputs, int n_outputs) {
  memset(c, 0, sizeof *c);
  c->index = index;
  c->first = first;
  c->count = count;
  c->n_inputs = n_inputs;
  c->n_outputs = n_outputs;
  c->rows = calloc((size_t)count + 1, sizeof *c->rows);
  if (!c->rows) return -1;
  for (int64_t i = 0; i < count; i++) {
    c->rows[i].index = first + i;
    c->rows[i].batch = -1;
    c->rows[i].seq_len = -1;
    c->rows[i].in = calloc((size_t)n_inputs + 1, sizeof(toplu_tensor_t));
    if (!c->rows[i].in) return -1;
  }
  return 0;
}

/* Free a row's inputs, id, reason and results. */
static void row_clear(pl_row_t *r, int n_inputs, pl_pool_t *pool) {
  if (r->in)
    for (int i = 0; i < n_inputs; i++) pl_pool_tensor_put(pool, &r->in[i]);
  free(r->in);
  free(r->id);
  free(r->fail_reason);
  free(r->res.topk_index);
  free(r->res.topk_score);
}

void pl_chunk_clear(pl_chunk_t *c) {
  for (int64_t i = 0; c->rows && i < c->count; i++) row_clear(&c->rows[i], c->n_inputs, c->pool);
  free(c->rows);
  for (int b = 0; b < c->n_batches; b++) {
    pl_batch_t *bt = &c->batches[b];
    for (int i = 0; bt->in && i < c->n_inputs; i++) {
      if (bt->borrowed) bt->in[i].data = NULL;
      else pl_pool_tensor_put(c->pool, &bt->in[i]);
    }
    for (int j = 0; bt->out && j < c->n_outputs; j++) toplu_tensor_free(&bt->out[j]);
    free(bt->in);
    free(bt->out);
  }
  free(c->batches);
  for (int k = 0; k < PL_CHUNK_BUFS; k++) pl_buf_free(&c->out[k]);
  pl_buf_free(&c->errors);
  memset(c, 0, sizeof *c);
}

void pl_row_fail(pl_row_t *r, const char *stage, const char *fmt, ...) {
  if (r->fail_stage) return;
  char msg[1024];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  r->fail_stage = stage;
  r->fail_reason = strdup(msg);
}

/* 1 when rows a and b have inputs of the same dtypes and shapes. */
static int same_shapes(const pl_row_t *a, const pl_row_t *b, int n) {
  for (int i = 0; i < n; i++) {
    const toplu_tensor_t *x = &a->in[i], *y = &b->in[i];
    if (x->dtype != y->dtype || x->ndim != y->ndim) return 0;
    for (int d = 0; d < x->ndim; d++)
      if (x->dims[d] != y->dims[d]) return 0;
  }
  return 1;
}

int pl_chunk_stack(pl_chunk_t *c) {
  int cap = 0;
  for (int64_t i = 0; i < c->count; i++) {
    pl_row_t *r = &c->rows[i];
    if (r->fail_stage || r->batch >= 0) continue;
    /* A new bucket: this row and every later row of the same shapes. */
    if (c->n_batches == cap) {
      int ncap = cap ? cap * 2 : 2;
      pl_batch_t *nb = realloc(c->batches, (size_t)ncap * sizeof *nb);
      if (!nb) return -1;
      c->batches = nb;
      cap = ncap;
    }
    pl_batch_t *bt = &c->batches[c->n_batches];
    memset(bt, 0, sizeof *bt);
    int b = c->n_batches++;
    bt->in = calloc((size_t)c->n_inputs + 1, sizeof *bt->in);
    bt->out = calloc((size_t)c->n_outputs + 1, sizeof *bt->out);
    if (!bt->in || !bt->out) return -1;
    for (int64_t k = i; k < c->count; k++) {
      pl_row_t *q = &c->rows[k];
      if (q->fail_stage || q->batch >= 0 || !same_shapes(r, q, c->n_inputs)) continue;
      q->batch = b;
      q->pos = bt->n++;
    }
    for (int in = 0; in < c->n_inputs; in++) {
      if (c->whole && c->whole[in].data) { /* passed whole: a copy for this batch */
        const toplu_tensor_t *w = &c->whole[in];
        if (pl_pool_tensor(c->pool, &bt->in[in], w->dtype, w->ndim, w->dims)) return -1;
        memcpy(bt->in[in].data, w->data, toplu_tensor_nbytes(w));
        continue;
      }
      const toplu_tensor_t *t = &r->in[in];
      int64_t dims[TOPLU_MAX_DIMS];
      if (t->ndim + 1 > TOPLU_MAX_DIMS) return -1;
      dims[0] = bt->n;
      memcpy(dims + 1, t->dims, sizeof(int64_t) * (size_t)t->ndim);
      if (pl_pool_tensor(c->pool, &bt->in[in], t->dtype, t->ndim + 1, dims)) return -1; /* every row copied in */
      size_t row_bytes = toplu_tensor_nbytes(t);
      for (int64_t k = i; k < c->count; k++) {
        pl_row_t *q = &c->rows[k];
        if (q->batch != b) continue;
        memcpy((char *)bt->in[in].data + (size_t)q->pos * row_bytes, q->in[in].data, row_bytes);
      }
    }
    for (int64_t k = i; k < c->count; k++)
      if (c->rows[k].batch == b)
        for (int in = 0; in < c->n_inputs; in++) pl_pool_tensor_put(c->pool, &c->rows[k].in[in]);
  }
  return 0;
}

/* Append a batch of the rows at positions first..first+count-1 of batch b, its inputs pointing at their slice of
 * batch b's (whole inputs shared); the new batch's index, or -1 (out of memory). */
static int split_range(pl_chunk_t *c, int b, int64_t first, int64_t count) {
  pl_batch_t *nb = realloc(c->batches, sizeof *nb * (size_t)(c->n_batches + 1));
  if (!nb) return -1;
  c->batches = nb;
  pl_batch_t *src = &c->batches[b], *dst = &c->batches[c->n_batches];
  memset(dst, 0, sizeof *dst);
  dst->n = count;
  dst->borrowed = 1;
  dst->in = calloc((size_t)c->n_inputs + 1, sizeof *dst->in);
  dst->out = calloc((size_t)c->n_outputs + 1, sizeof *dst->out);
  if (!dst->in || !dst->out) {
    free(dst->in);
    free(dst->out);
    return -1;
  }
  for (int i = 0; i < c->n_inputs; i++) {
    const toplu_tensor_t *t = &src->in[i];
    dst->in[i] = *t;
    if (c->whole && c->whole[i].data) continue; /* the same whole tensor */
    dst->in[i].dims[0] = 1;
    size_t rb = toplu_tensor_nbytes(&dst->in[i]);
    dst->in[i].dims[0] = count;
    dst->in[i].data = (char *)t->data + (size_t)first * rb;
  }
  return c->n_batches++;
}

int pl_chunk_split_row(pl_chunk_t *c, int b, pl_row_t *row) {
  int nb = split_range(c, b, row->pos, 1);
  if (nb < 0) return -1;
  row->batch = nb;
  row->pos = 0;
  return 0;
}

int pl_chunk_split_halves(pl_chunk_t *c, int b, int64_t n) {
  int64_t half = n / 2;
  int lo = split_range(c, b, 0, half);
  int hi = lo < 0 ? -1 : split_range(c, b, half, n - half);
  if (hi < 0) {
    if (lo >= 0) c->n_batches--, free(c->batches[lo].in), free(c->batches[lo].out);
    return -1;
  }
  for (int64_t r = 0; r < c->count; r++) {
    pl_row_t *row = &c->rows[r];
    if (row->batch != b || row->fail_stage) continue;
    if (row->pos < half) row->batch = lo;
    else row->batch = hi, row->pos -= half;
  }
  return 0;
}

void pl_chunk_free_inputs(pl_chunk_t *c) {
  for (int b = 0; b < c->n_batches; b++)
    for (int i = 0; c->batches[b].in && i < c->n_inputs; i++) {
      if (c->batches[b].borrowed) c->batches[b].in[i].data = NULL;
      else pl_pool_tensor_put(c->pool, &c->batches[b].in[i]);
    }
}

const void *pl_row_output(const pl_chunk_t *c, const pl_row_t *r, int j, toplu_dtype_t *dtype, int *ndim,
                          int64_t *dims) {
  if (r->fail_stage || r->batch < 0) return NULL;
  const pl_batch_t *bt = &c->batches[r->batch];
  if (!bt->ran) return NULL;
  const toplu_tensor_t *t = &bt->out[j];
  *dtype = t->dtype;
  if (t->ndim >= 1 && t->dims[0] == bt->n) {
    *ndim = t->ndim - 1;
    memcpy(dims, t->dims + 1, sizeof(int64_t) * (size_t)(*ndim));
    int64_t per = 1;
    for (int d = 1; d < t->ndim; d++) per *= t->dims[d];
    if (c->out_seq && c->out_seq[j] && r->seq_len >= 0 && *ndim >= 1 && dims[0] > r->seq_len)
      dims[0] = r->seq_len; /* padded by length buckets: the row's own positions come first */
    return (const char *)t->data + (size_t)(r->pos * per) * toplu_dtype_size(t->dtype);
  }
  /* A batch of one whose output has no batch dim: the whole tensor. */
  *ndim = t->ndim;
  memcpy(dims, t->dims, sizeof(int64_t) * (size_t)t->ndim);
  return t->data;
}
