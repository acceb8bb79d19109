/*
 * ops/broadcast.h - multidirectional (numpy) broadcasting for kernels.
 *
 * ONNX's broadcasting rule (docs/Broadcasting.md, used by Add-7/14, Mul,
 * Where-9/16, Max-8/13, Expand-8 ...): shapes are right-aligned, missing
 * leading dims count as 1, and along every dim each input is either 1
 * (broadcast) or equal to the output.
 *
 * toplu__bcast_init() turns the shapes of up to TOPLU_BCAST_MAX_IN inputs and
 * their output into a compact description:
 *   1. every input is padded to the output rank;
 *   2. output dims of size 1 are dropped (nothing iterates over them);
 *   3. neighbouring dims are merged when every input treats both alike
 *      (full in both, or broadcast in both), so [N,C,H,W] + [1,C,1,1]
 *      becomes [N, C, H*W] with strides (0, 1, 0) for the second input;
 *   4. each input gets per-dim strides in elements: 0 where it broadcasts,
 *      its row-major stride elsewhere.
 * The last coalesced dim is the "row": a contiguous run in the output along
 * which every input advances by 0 or 1 element.
 *
 * Users:
 *   - binary ops: toplu__bcast_binary() runs three loops an op provides
 *     (vector-vector, vector-scalar, scalar-vector) over the output, picking
 *     a fast path from bc->kind (same shape, scalar, per-channel, row) and a
 *     general odometer otherwise, with OpenMP over flat output ranges for
 *     large outputs.  The loops see only contiguous pointers, so simple
 *     `for` loops over restrict pointers vectorise.
 *   - any other op (Where, Expand ...): walk rows with toplu_bcast_iter_*:
 *       toplu__bcast_iter_t it;
 *       int64_t L = bc.dims[bc.ndim - 1];
 *       toplu__bcast_iter_seek(&bc, &it, 0);
 *       for (int64_t r = 0; r < bc.numel / L; r++, toplu__bcast_iter_next(&bc, &it))
 *         for (int64_t i = 0; i < L; i++)
 *           y[r * L + i] = x[it.off[0] + i * bc.strides[0][bc.ndim - 1]];
 *     (toplu__bcast_row_step gives that inner stride, 0 or 1).
 * Nothing here allocates; a toplu__bcast_t is a plain value (a few hundred
 * bytes) that a kernel can compute in prepare and keep in its state.
 */
#ifndef TOPLU_OPS_BROADCAST_H
#define TOPLU_OPS_BROADCAST_H

#include <stddef.h>
#include <stdint.h>

#include "toplu/tensor.h"

/* Most inputs one description handles (Where has 3). */
#define TOPLU_BCAST_MAX_IN 4

/* Outputs with fewer elements than this run on one thread. */
#define TOPLU_BCAST_PAR_MIN 32768

/* Which fast path a two-input broadcast takes (input 0 = a, 1 = b). */
typedef enum toplu__bcast_kind {
  TOPLU_BCAST_SAME,      /* a, b and y have the same element count: one flat loop */
  TOPLU_BCAST_B_SCALAR,  /* b has one element */
  TOPLU_BCAST_A_SCALAR,  /* a has one element */
  TOPLU_BCAST_B_CHANNEL, /* a full, b indexed by the middle of [outer, channels, inner] ([1,C,1,1] vs [N,C,H,W]) */
  TOPLU_BCAST_A_CHANNEL, /* mirror of B_CHANNEL */
  TOPLU_BCAST_B_ROW,     /* a full, b is one row of `inner` elements repeated `outer` times ([W] vs [...,W]) */
  TOPLU_BCAST_A_ROW,     /* mirror of B_ROW */
  TOPLU_BCAST_GENERAL    /* anything else: odometer over rows */
} toplu__bcast_kind_t;

typedef struct toplu__bcast {
  int n_in;
  int ndim;                                             /* coalesced rank, >= 1 */
  int64_t numel;                                        /* output elements (may be 0) */
  int64_t dims[TOPLU_MAX_DIMS];                         /* coalesced output dims */
  int64_t strides[TOPLU_BCAST_MAX_IN][TOPLU_MAX_DIMS];  /* per input, elements; 0 = broadcast */
  /* Two-input classification (meaningful when n_in == 2). */
  toplu__bcast_kind_t kind;
  int64_t outer, channels, inner; /* CHANNEL: [outer, channels, inner]; ROW: [outer, inner] */
} toplu__bcast_t;

/*
 * Describe broadcasting in[0..n_in-1] to out (only dtypes are ignored; the
 * shapes are read).  Returns 0, or -1 when n_in is out of 1..TOPLU_BCAST_MAX_IN,
 * a rank is above the output's, or some input dim is neither 1 nor the
 * output's dim (the caller reports the error with the node's name).
 */
int toplu__bcast_init(toplu__bcast_t *bc, int n_in, const toplu_tensor_t *const in[], const toplu_tensor_t *out);

/* Row iterator: element offsets of every input at the start of a row. */
typedef struct toplu__bcast_iter {
  int64_t idx[TOPLU_MAX_DIMS];        /* index over dims[0..ndim-2] */
  int64_t off[TOPLU_BCAST_MAX_IN];    /* element offset of each input at the row's start */
} toplu__bcast_iter_t;

/* Position it at row `row` (0 <= row < numel / dims[ndim-1]). */
void toplu__bcast_iter_seek(const toplu__bcast_t *bc, toplu__bcast_iter_t *it, int64_t row);

/* Advance it to the next row (an odometer step: no division). */
static inline void toplu__bcast_iter_next(const toplu__bcast_t *bc, toplu__bcast_iter_t *it) {
  for (int d = bc->ndim - 2; d >= 0; d--) {
    it->idx[d]++;
    for (int k = 0; k < bc->n_in; k++) it->off[k] += bc->strides[k][d];
    if (it->idx[d] < bc->dims[d]) return;
    for (int k = 0; k < bc->n_in; k++) it->off[k] -= bc->strides[k][d] * bc->dims[d];
    it->idx[d] = 0;
  }
}

/* Stride (0 or 1) of input k along a row. */
static inline int64_t toplu__bcast_row_step(const toplu__bcast_t *bc, int k) {
  return bc->strides[k][bc->ndim - 1];
}

/*
 * The three loops of one binary op for one dtype combination; each computes
 * y[i] = op(a[i], b[i]) for i < n with a and/or b held constant:
 *   vv: a and b advance;  vs: b is the single element *b;  sv: a is *a.
 * Pointers are to contiguous elements of sizes a_size, b_size, y_size bytes.
 * y may be the same buffer as a or b (in-place): a loop must read element i
 * before writing y[i] and never read element j < i again.
 */
typedef void (*toplu__binary_fn)(int64_t n, const void *a, const void *b, void *y);
typedef struct toplu__binary_loops {
  toplu__binary_fn vv, vs, sv;
  uint8_t a_size, b_size, y_size;
} toplu__binary_loops_t;

/*
 * y = op(a, b) with broadcasting described by bc (made with n_in == 2 for
 * a and b, and y's shape).  Uses up to `threads` OpenMP threads when the
 * output has at least TOPLU_BCAST_PAR_MIN elements.
 */
void toplu__bcast_binary(const toplu__bcast_t *bc, const toplu__binary_loops_t *f, const void *a, const void *b, void *y,
                        int threads);

/*
 * Split [0, n) into up to `threads` chunks (boundaries on multiples of 64
 * elements) and call fn(begin, end, user) for each, in parallel when
 * n >= min_par.  For flat loops of unary ops.
 */
void toplu__parallel_ranges(int64_t n, int threads, int64_t min_par, void (*fn)(int64_t begin, int64_t end, void *user),
                           void *user);

#endif
