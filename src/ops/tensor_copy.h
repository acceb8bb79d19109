/*
 * ops/tensor_copy.h - the byte-moving engine behind the data-movement
 * kernels (ops/tensor.c, ops/tensor_layout.c).
 *
 * Every layout op that reads its input in some strided order and writes its
 * output densely (Transpose, Slice, Expand, Tile, DepthToSpace,
 * SpaceToDepth) is described as a toplu__strided_t: the output's dims and,
 * per output dim, the input stride in elements (0 broadcasts, negative walks
 * backwards), plus a starting offset.  toplu__strided_simplify() drops dims of
 * 1 and merges dims that are contiguous in both, so a transpose that keeps
 * the last axis last becomes memcpy runs, NCHW<->NHWC becomes a batched 2-D
 * transpose done in cache tiles, and an expand along an inner dim becomes a
 * fill.  Work is by element size (1, 2, 4, 8 bytes), never by dtype.
 */
#ifndef TOPLU_OPS_TENSOR_COPY_H
#define TOPLU_OPS_TENSOR_COPY_H

#include <stddef.h>
#include <stdint.h>

#include "ops/kernel.h"

/* Element types for moving bytes; they may alias whatever the buffer held
 * (float, half...). */
#if defined(__GNUC__) || defined(__clang__)
#define TP_ALIAS __attribute__((__may_alias__))
#else
#define TP_ALIAS
#endif
typedef uint8_t TP_ALIAS e1_t;
typedef uint16_t TP_ALIAS e2_t;
typedef uint32_t TP_ALIAS e4_t;
typedef uint64_t TP_ALIAS e8_t;

#define TOPLU_STRIDED_MAX (2 * TOPLU_MAX_DIMS)

/* Bytes above which the copies use several threads. */
#define TOPLU_COPY_PAR_BYTES ((size_t)1 << 17)

typedef struct toplu__strided {
  int ndim;
  int esize;   /* 1, 2, 4 or 8 */
  int64_t off; /* input offset of output element 0, in elements */
  int64_t dims[TOPLU_STRIDED_MAX]; /* output dims (dense, row-major) */
  int64_t str[TOPLU_STRIDED_MAX];  /* input stride per output dim, in elements */
} toplu__strided_t;

/* Drop dims of 1 and merge neighbours that are contiguous in the input too. */
void toplu__strided_simplify(toplu__strided_t *s);

/* dst[dense] = src[off + sum idx[d] * str[d]]. */
void toplu__strided_copy(const toplu__strided_t *s, void *dst, const void *src, int threads);

/* memcpy split across threads when large. */
void toplu__copy_bytes(void *dst, const void *src, size_t n, int threads);

/* Fill n elements of size es with the element at value. */
void toplu__fill_elems(void *dst, const void *value, int64_t n, int es, int threads);

/* Element size of a tensor's dtype for byte moving: 1, 2, 4 or 8; 0 when the
 * dtype has none (strings) or an odd size. */
int toplu__copy_esize(toplu_dtype_t dt);

/* Row-major strides (elements) of a tensor. */
void toplu__dense_strides(const toplu_tensor_t *t, int64_t *str);

/* Kernels of ops/tensor_layout.c, listed in ops/tensor.c's table. */
toplu_status_t toplu__transpose_prepare(toplu__kernel_ctx_t *ctx, toplu__kernel_info_t *info);
toplu_status_t toplu__slice_prepare(toplu__kernel_ctx_t *ctx, toplu__kernel_info_t *info);
toplu_status_t toplu__expand_prepare(toplu__kernel_ctx_t *ctx, toplu__kernel_info_t *info);
toplu_status_t toplu__tile_prepare(toplu__kernel_ctx_t *ctx, toplu__kernel_info_t *info);
toplu_status_t toplu__depth_to_space_prepare(toplu__kernel_ctx_t *ctx, toplu__kernel_info_t *info);
toplu_status_t toplu__space_to_depth_prepare(toplu__kernel_ctx_t *ctx, toplu__kernel_info_t *info);
toplu_status_t toplu__strided_run(toplu__kernel_ctx_t *ctx);
toplu_status_t toplu__pad_prepare(toplu__kernel_ctx_t *ctx, toplu__kernel_info_t *info);
toplu_status_t toplu__pad_run(toplu__kernel_ctx_t *ctx);
/* Frees ctx->state (made with toplu__kernel_alloc). */
void toplu__tensor_release(toplu__kernel_ctx_t *ctx);

#endif
