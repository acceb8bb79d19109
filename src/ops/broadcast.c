/*
 * ops/broadcast.c - multidirectional broadcasting: shape coalescing, the
 * binary-op driver with its fast paths, and flat parallel ranges.  See
 * ops/broadcast.h for the model and how to use it.
 */
#include "ops/broadcast.h"

#include <string.h>

/* Classify a two-input description into one of the fast paths. */
static void classify(toplu__bcast_t *bc, const uint8_t full[][TOPLU_MAX_DIMS]) {
  int nd = bc->ndim;
  int a_all = 1, b_all = 1, a_none = 1, b_none = 1;
  for (int d = 0; d < nd; d++) {
    a_all &= full[0][d], b_all &= full[1][d];
    a_none &= !full[0][d], b_none &= !full[1][d];
  }
  bc->kind = TOPLU_BCAST_GENERAL;
  bc->outer = bc->channels = bc->inner = 1;
  if (bc->numel <= 1 || (a_all && b_all)) {
    bc->kind = TOPLU_BCAST_SAME;
    return;
  }
  if (b_none) {
    bc->kind = TOPLU_BCAST_B_SCALAR;
    return;
  }
  if (a_none) {
    bc->kind = TOPLU_BCAST_A_SCALAR;
    return;
  }
  if (!a_all && !b_all) return;
  /* One side full; the other's pattern alternates along the merged dims. */
  const uint8_t *p = a_all ? full[1] : full[0];
  int b_small = a_all;
  if (nd == 2 && p[0] && !p[1]) {
    bc->kind = b_small ? TOPLU_BCAST_B_CHANNEL : TOPLU_BCAST_A_CHANNEL;
    bc->channels = bc->dims[0];
    bc->inner = bc->dims[1];
  } else if (nd == 2 && !p[0] && p[1]) {
    bc->kind = b_small ? TOPLU_BCAST_B_ROW : TOPLU_BCAST_A_ROW;
    bc->outer = bc->dims[0];
    bc->inner = bc->dims[1];
  } else if (nd == 3 && !p[0] && p[1] && !p[2]) {
    bc->kind = b_small ? TOPLU_BCAST_B_CHANNEL : TOPLU_BCAST_A_CHANNEL;
    bc->outer = bc->dims[0];
    bc->channels = bc->dims[1];
    bc->inner = bc->dims[2];
  }
}

/* Pad, drop size-1 output dims, merge dims alike for every input, then strides. */
int toplu__bcast_init(toplu__bcast_t *bc, int n_in, const toplu_tensor_t *const in[], const toplu_tensor_t *out) {
  memset(bc, 0, sizeof *bc);
  int r = out->ndim;
  if (n_in < 1 || n_in > TOPLU_BCAST_MAX_IN || r < 0 || r > TOPLU_MAX_DIMS) return -1;
  for (int k = 0; k < n_in; k++)
    if (in[k]->ndim < 0 || in[k]->ndim > r) return -1;
  bc->n_in = n_in;
  uint8_t full[TOPLU_BCAST_MAX_IN][TOPLU_MAX_DIMS];
  int nd = 0;
  int64_t numel = 1;
  for (int d = 0; d < r; d++) {
    int64_t o = out->dims[d];
    if (o < 0) return -1;
    numel *= o;
    uint8_t f[TOPLU_BCAST_MAX_IN];
    for (int k = 0; k < n_in; k++) {
      int kd = d - (r - in[k]->ndim);
      int64_t v = kd >= 0 ? in[k]->dims[kd] : 1;
      if (v == o) f[k] = 1;
      else if (v == 1) f[k] = 0;
      else return -1;
    }
    if (o == 1) continue; /* nothing iterates over it */
    int same = nd > 0;
    for (int k = 0; k < n_in && same; k++) same = full[k][nd - 1] == f[k];
    if (same) {
      bc->dims[nd - 1] *= o;
    } else {
      bc->dims[nd] = o;
      for (int k = 0; k < n_in; k++) full[k][nd] = f[k];
      nd++;
    }
  }
  if (nd == 0) { /* one element everywhere */
    nd = 1;
    bc->dims[0] = 1;
    for (int k = 0; k < n_in; k++) full[k][0] = 1;
  }
  bc->ndim = nd;
  bc->numel = numel;
  for (int k = 0; k < n_in; k++) {
    int64_t s = 1;
    for (int d = nd - 1; d >= 0; d--) {
      bc->strides[k][d] = full[k][d] ? s : 0;
      if (full[k][d]) s *= bc->dims[d];
    }
  }
  if (n_in == 2) classify(bc, (const uint8_t(*)[TOPLU_MAX_DIMS])full);
  return 0;
}

/* Decompose the row index over dims[0..ndim-2] (one division per dim). */
void toplu__bcast_iter_seek(const toplu__bcast_t *bc, toplu__bcast_iter_t *it, int64_t row) {
  for (int k = 0; k < TOPLU_BCAST_MAX_IN; k++) it->off[k] = 0;
  for (int d = bc->ndim - 2; d >= 0; d--) {
    int64_t i = bc->dims[d] ? row % bc->dims[d] : 0;
    row = bc->dims[d] ? row / bc->dims[d] : 0;
    it->idx[d] = i;
    for (int k = 0; k < bc->n_in; k++) it->off[k] += i * bc->strides[k][d];
  }
}

typedef struct binary_job {
  const toplu__bcast_t *bc;
  const toplu__binary_loops_t *f;
  const char *a, *b;
  char *y;
} binary_job_t;

/* Output elements [s, e) of a binary op, by fast path. */
static void binary_range(int64_t s, int64_t e, void *user) {
  const binary_job_t *j = user;
  const toplu__bcast_t *bc = j->bc;
  const toplu__binary_loops_t *f = j->f;
  const size_t as = f->a_size, bs = f->b_size, ys = f->y_size;
  const char *a = j->a, *b = j->b;
  char *y = j->y;
  switch (bc->kind) {
    case TOPLU_BCAST_SAME:
      f->vv(e - s, a + s * as, b + s * bs, y + s * ys);
      return;
    case TOPLU_BCAST_B_SCALAR:
      f->vs(e - s, a + s * as, b, y + s * ys);
      return;
    case TOPLU_BCAST_A_SCALAR:
      f->sv(e - s, a, b + s * bs, y + s * ys);
      return;
    case TOPLU_BCAST_B_CHANNEL:
    case TOPLU_BCAST_A_CHANNEL: {
      const int64_t L = bc->inner, C = bc->channels;
      int64_t pos = s, off = s % L, c = (s / L) % C;
      while (pos < e) {
        int64_t len = L - off < e - pos ? L - off : e - pos;
        if (bc->kind == TOPLU_BCAST_B_CHANNEL) f->vs(len, a + pos * as, b + c * bs, y + pos * ys);
        else f->sv(len, a + c * as, b + pos * bs, y + pos * ys);
        pos += len;
        off = 0;
        if (++c == C) c = 0;
      }
      return;
    }
    case TOPLU_BCAST_B_ROW:
    case TOPLU_BCAST_A_ROW: {
      const int64_t L = bc->inner;
      int64_t pos = s, off = s % L;
      while (pos < e) {
        int64_t len = L - off < e - pos ? L - off : e - pos;
        if (bc->kind == TOPLU_BCAST_B_ROW) f->vv(len, a + pos * as, b + off * bs, y + pos * ys);
        else f->vv(len, a + off * as, b + pos * bs, y + pos * ys);
        pos += len;
        off = 0;
      }
      return;
    }
    case TOPLU_BCAST_GENERAL: {
      const int64_t L = bc->dims[bc->ndim - 1];
      const int64_t sa = toplu__bcast_row_step(bc, 0), sb = toplu__bcast_row_step(bc, 1);
      toplu__bcast_iter_t it;
      toplu__bcast_iter_seek(bc, &it, s / L);
      int64_t pos = s, off = s % L;
      while (pos < e) {
        int64_t len = L - off < e - pos ? L - off : e - pos;
        const char *pa = a + (it.off[0] + off * sa) * (int64_t)as;
        const char *pb = b + (it.off[1] + off * sb) * (int64_t)bs;
        char *py = y + pos * ys;
        if (sa && !sb) f->vs(len, pa, pb, py);
        else if (!sa && sb) f->sv(len, pa, pb, py);
        else f->vv(len, pa, pb, py); /* both advance (or L == 1) */
        pos += len;
        off = 0;
        if (pos < e) toplu__bcast_iter_next(bc, &it);
      }
      return;
    }
  }
}

/* Run binary_range over the output, in parallel chunks when large. */
void toplu__bcast_binary(const toplu__bcast_t *bc, const toplu__binary_loops_t *f, const void *a, const void *b, void *y,
                        int threads) {
  if (bc->numel <= 0) return;
  binary_job_t j = {bc, f, a, b, y};
  toplu__parallel_ranges(bc->numel, threads, TOPLU_BCAST_PAR_MIN, binary_range, &j);
}

/* Chunks of a multiple of 64 elements, one per thread. */
void toplu__parallel_ranges(int64_t n, int threads, int64_t min_par, void (*fn)(int64_t begin, int64_t end, void *user),
                           void *user) {
  if (n <= 0) return;
  if (threads <= 1 || n < min_par) {
    fn(0, n, user);
    return;
  }
  int64_t per = ((n + threads - 1) / threads + 63) & ~(int64_t)63;
  int64_t chunks = (n + per - 1) / per;
#pragma omp parallel for num_threads(threads) schedule(static)
  for (int64_t t = 0; t < chunks; t++) {
    int64_t s = t * per, e = s + per < n ? s + per : n;
    fn(s, e, user);
  }
}
