/*
 * ops/onednn/pwdw_own.h - toplu's own channels-last kernel for
 * toplu.PointwiseDepthwiseConv (ops/onednn/conv_dw.c): a 1x1 convolution
 * whose output only a 3x3 depthwise convolution reads (MobileNetV2's
 * inverted residual blocks), run so that the expanded tensor never leaves
 * the cache.
 *
 *   X [N, H, W, C] (channels last, float32)
 *     -> E = post1(X . W1 + B)        [N, H, W, M], M = expanded channels
 *     -> Y = post2(dw3x3_s(E) + B_dw) [N, Ho, Wo, M], stride s (1 or 2),
 *        pads 1, Ho = (H - 1) / s + 1, Wo = (W - 1) / s + 1.
 *
 * How: each thread walks a band of Y's rows of one image.  For a few output
 * rows at a time it computes the rows of E they need into a ring of whole E
 * rows (about 256 KiB, so in L2; E row e in slot e % slots, so the rows the
 * next output rows share stay where they are): the 1x1 part as 6-pixel x
 * 64/32/16-channel register tiles on AVX-512 over W1 packed as
 * ops/onednn/gemm_avx2.h packs B, with the bias and a Clip or Relu applied
 * before the store (elsewhere toplu__gemm_packed, then a pass for them).
 * On that AVX-512 path the ring holds E in 16-channel blocks (block q of
 * every slot's pixels, then block q + 1), so each pixel's 16 channels are
 * 64 contiguous bytes and one block of a row is one contiguous run;
 * elsewhere in whole rows of channels-last pixels.  Then it runs the
 * depthwise part from the ring (16 channels per zmm register on AVX-512,
 * 8 per ymm on AVX2), one channel block at a time over all the step's
 * output rows (the block's share of the E rows they read stays in L1), four
 * output pixels at a time where no padding column is read (each E pixel
 * loaded once for the taps of all four).  With those two changes
 * MobileNetV2's block 2 ran 10-19% faster, blocks 3 and 4 4-10% faster on
 * one thread and level on two (2026-12-07, Xeon with AVX-512,
 * docs/performance.md).  E is never written to memory,
 * which the two-convolution way does (a 112x112x96 E of MobileNetV2's
 * second block is 4.8 MB per image, written once and read once).  Why our
 * own: oneDNN 2.6.3 has the fused form only in blocked layouts, gives wrong
 * values with it in channels-last layouts and offers it at some batch sizes
 * and not others (docs/design.md, "Pointwise + depthwise").
 *
 * Results equal the two convolutions' to float rounding: each E element is
 * the sum over C in order, then the bias; the depthwise taps are summed bias first,
 * then row by row, left to right (kh, kw).  post1 are the node's post-ops
 * [0, post_split), post2 the rest (activations only: no SUM, BIAS,
 * MIN_CHANNEL or QSUM; toplu__pwdw_supported says which).  NaN stays NaN.
 * With the block's projection (graph/fuse.c's fuse_dw_projection):
 *     -> Z = post3(Y . W_pj + B_pj [+ R]) [N, Ho, Wo, Co] (channels last; R,
 *        the residual addend, channels last too)
 * where each step's rows of Y go to a second per-thread buffer (in L2)
 * and the own GEMM (ops/onednn/gemm_avx2.h) turns them into Z's rows, so
 * neither E nor Y is written to memory.  post2 is then the post-ops
 * [post_split, pj_split), post3 the rest (a SUM reads R).
 * Needs AVX2 and FMA (toplu__gemm_avx2_ok).
 */
#ifndef TOPLU_OPS_ONEDNN_PWDW_OWN_H
#define TOPLU_OPS_ONEDNN_PWDW_OWN_H

#include <stddef.h>
#include <stdint.h>

#include "graph/graph.h"

typedef struct toplu__pwdw {
  int64_t c, m, h, w, ho, wo; /* X's channels, E's and Y's channels, X's height and width, Y's */
  int s;                      /* the depthwise stride, 1 or 2 */
  int64_t rows;               /* output rows per step (sets the E buffer's size) */
  const float *w1p;           /* W1 packed as the GEMM's B [C][M] (toplu__pwdw_pack_w1) */
  const float *wdw;           /* W_dw as [9][M], tap kh * 3 + kw (toplu__pwdw_pack_wdw) */
  const float *zero_row;      /* W * M zeros: E's padding rows */
  toplu__node_t post1;        /* the node with n_post = post_split: the GEMM's post-ops */
  const toplu__node_t *node;  /* the node itself (post2 = its post-ops [post_split, post2_end)) */
  int post_split, post2_end;  /* post2_end: pj_split with the projection, else n_post */
  int64_t co;                 /* the projection's output channels; 0: no projection */
  const float *wpjp;          /* W_pj packed as the GEMM's B [M][Co] (toplu__pwdw_pack_w1(W_pj, M, Co)) */
  toplu__node_t post3;        /* the node with its post-ops [pj_split, n_post) moved to the front */
  int pj_simple;              /* post3 is nothing, a SUM and/or one Clip or Relu (the projection's register tiles) */
  int pj_sum;                 /* ... with the SUM first */
  float pj_lo, pj_hi;         /* ... and that clamp (+-inf: none) */
  int dw_first;               /* toplu.DepthwisePointwiseConv: no 1x1 before the depthwise part, which reads X
                                 itself (E = X, M = C, post1 empty) */
  int clamp;                  /* post2 is one Clip or Relu (or none), applied in registers as [lo, hi] */
  float lo, hi;
  int clamp1;                 /* the same for post1 */
  float lo1, hi1;
} toplu__pwdw_t;

/* 1 when node's post-ops are all element-wise activations the kernel can
 * apply (none reads another input), but for the projection's (post-ops from
 * pj_split on, which may hold one SUM).  Thread-safe. */
int toplu__pwdw_supported(const toplu__node_t *node, int pj_split);

/* 1 when post-ops [0, split) and [split, end) are each none, one Clip or
 * one Relu: the kernel then applies them in registers; other activations
 * take a separate pass over E and Y (slower than oneDNN's two primitives on
 * PaddleOCR det's HardSwish chains).  Thread-safe. */
int toplu__pwdw_clamps(const toplu__node_t *node, int split, int end);

/* Fills p from the shapes, the stride and the node (post-ops split at
 * split; co > 0: the projection's output channels, its post-ops from
 * pj_split on); leaves w1p, wdw, wpjp and zero_row for the caller.
 * Thread-safe. */
void toplu__pwdw_init(toplu__pwdw_t *p, const toplu__node_t *node, int split, int64_t c, int64_t m, int64_t h,
                      int64_t w, int s, int64_t co, int pj_split);

/* The same for toplu.DepthwisePointwiseConv: the depthwise 3x3 on X's c
 * channels (its post-ops [0, split)), then the 1x1 to co channels (the
 * rest) as the projection above: X [N, H, W, C] -> Z [N, Ho, Wo, Co].  The
 * depthwise part reads X's rows where they are (no ring); its output rows
 * go to the per-thread buffer.  Thread-safe. */
void toplu__pwdw_init_dw_first(toplu__pwdw_t *p, const toplu__node_t *node, int split, int64_t c, int64_t h, int64_t w,
                               int s, int64_t co);

/* Floats of scratch one thread needs (its E ring, and with the projection
 * its Y rows after it, at a multiple of 16 floats). */
size_t toplu__pwdw_buf_floats(const toplu__pwdw_t *p);

/* Floats of the packed W1 (toplu__gemm_packed_size(C, M)) and of the packed
 * W_dw (9 * M). */
size_t toplu__pwdw_w1_floats(int64_t c, int64_t m);

/* W1 [M][C] (ONNX's [M, C, 1, 1]) into the GEMM's packed B of [C][M];
 * W_dw [M][1][3][3] into [9][M]. */
void toplu__pwdw_pack_w1(const float *w1, int64_t c, int64_t m, float *dst);
void toplu__pwdw_pack_wdw(const float *wdw, int64_t m, float *dst);

/* The biases and the residual addend of one run (NULL where absent). */
typedef struct toplu__pwdw_args {
  const float *b1, *bdw, *bpj; /* [M], [M], [Co] */
  const float *res;            /* R [N, Ho, Wo, Co] (projection with a SUM) */
} toplu__pwdw_args_t;

/*
 * Y (or Z with the projection) = the kernel above for n images of X, on up
 * to threads OpenMP threads (images, and bands of rows when there are
 * fewer images than threads).  ws: threads * ws_stride floats of scratch,
 * ws_stride >= toplu__pwdw_buf_floats(p).  No allocation.  Thread-safe for
 * distinct y and ws.
 */
void toplu__pwdw_run(const toplu__pwdw_t *p, const float *x, const toplu__pwdw_args_t *a, float *y, int64_t n,
                     float *ws, size_t ws_stride, int threads);

#endif
