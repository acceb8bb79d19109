/*
 * ops/onednn/winograd_isa.h - the vector stages of the Winograd F(4x4, 3x3)
 * convolution (ops/onednn/winograd.c), written once for both vector widths.
 *
 * Included by winograd.c twice, with WG_W 256 (AVX2: 8 channels a vector,
 * activations in nChw8c, the products on the 6x16 kernel one 16-column panel
 * at a time) and WG_W 512 (AVX-512F: 16 channels a vector, nChw16c, four
 * panels at a time on toplu__gemm_kernel_6xp), and WG_TGT the matching
 * target attribute.  Each inclusion defines wg_input_tile_<W>, wg_post_<W>,
 * wg_in_<W>, wg_products_<W>, wg_out_<W> and wg_block_<W>.  The matrices are
 * those of Lavin and Gray (arXiv:1509.09308), as winograd.c says.
 */
#define WG_CAT_(a, b, c) a##b##c
#define WG_CAT(a, b, c) WG_CAT_(a, b, c)
#define VT WG_CAT(__m, WG_W, )            /* __m256 / __m512 */
#define VOP(op) WG_CAT(_mm, WG_W, op)     /* VOP(_add_ps): _mm256_add_ps / _mm512_add_ps */
#define WG_FN(name) WG_CAT(name, _, WG_W) /* wg_in_256 / wg_in_512 */
#define VL (WG_W / 32)                    /* floats a vector */

/* 6x6 input patch (VL channels per vector) -> V = B^T d B, written to v[x * vstride]. */
WG_TGT static void WG_FN(wg_input_tile)(const VT d[6][6], float *v, int64_t vstride) {
  const VT c4 = VOP(_set1_ps)(4.f), c5 = VOP(_set1_ps)(5.f), c2 = VOP(_set1_ps)(2.f);
  VT t[6][6];
  for (int j = 0; j < 6; j++) { /* rows: t = B^T d */
    VT d0 = d[0][j], d1 = d[1][j], d2 = d[2][j], d3 = d[3][j], d4 = d[4][j], d5 = d[5][j];
    t[0][j] = VOP(_fnmadd_ps)(c5, d2, VOP(_fmadd_ps)(c4, d0, d4));
    VT a = VOP(_add_ps)(d3, d4), b = VOP(_add_ps)(d1, d2);
    t[1][j] = VOP(_fnmadd_ps)(c4, b, a);
    VT a2 = VOP(_sub_ps)(d4, d3), b2 = VOP(_sub_ps)(d1, d2);
    t[2][j] = VOP(_fmadd_ps)(c4, b2, a2);
    VT e = VOP(_sub_ps)(d4, d2), f = VOP(_sub_ps)(d3, d1);
    t[3][j] = VOP(_fmadd_ps)(c2, f, e);
    t[4][j] = VOP(_fnmadd_ps)(c2, f, e);
    t[5][j] = VOP(_fnmadd_ps)(c5, d3, VOP(_fmadd_ps)(c4, d1, d5));
  }
  for (int i = 0; i < 6; i++) { /* columns: V = t B */
    VT d0 = t[i][0], d1 = t[i][1], d2 = t[i][2], d3 = t[i][3], d4 = t[i][4], d5 = t[i][5];
    float *o = v + (int64_t)i * 6 * vstride;
    VOP(_storeu_ps)(o + 0 * vstride, VOP(_fnmadd_ps)(c5, d2, VOP(_fmadd_ps)(c4, d0, d4)));
    VT a = VOP(_add_ps)(d3, d4), b = VOP(_add_ps)(d1, d2);
    VOP(_storeu_ps)(o + 1 * vstride, VOP(_fnmadd_ps)(c4, b, a));
    VT a2 = VOP(_sub_ps)(d4, d3), b2 = VOP(_sub_ps)(d1, d2);
    VOP(_storeu_ps)(o + 2 * vstride, VOP(_fmadd_ps)(c4, b2, a2));
    VT e = VOP(_sub_ps)(d4, d2), f = VOP(_sub_ps)(d3, d1);
    VOP(_storeu_ps)(o + 3 * vstride, VOP(_fmadd_ps)(c2, f, e));
    VOP(_storeu_ps)(o + 4 * vstride, VOP(_fnmadd_ps)(c2, f, e));
    VOP(_storeu_ps)(o + 5 * vstride, VOP(_fnmadd_ps)(c5, d3, VOP(_fmadd_ps)(c4, d1, d5)));
  }
}

/* Post-ops in the node's order on one vector of VL output channels; res: the addend's vector (SUM). */
WG_TGT static VT WG_FN(wg_post)(const toplu__node_t *n, VT y, const float *res) {
  for (int i = 0; i < n->n_post; i++) {
    const toplu__post_op_t *po = &n->post[i];
    switch (po->kind) {
      case TOPLU_POST_SUM: y = VOP(_add_ps)(y, VOP(_loadu_ps)(res)); break;
      case TOPLU_POST_RELU: y = VOP(_max_ps)(VOP(_setzero_ps)(), y); break; /* maxps gives its second operand for NaN: NaN stays */
      case TOPLU_POST_CLIP:
        y = VOP(_min_ps)(VOP(_max_ps)(y, VOP(_set1_ps)(isinf(po->alpha) ? -INFINITY : po->alpha)),
                         VOP(_set1_ps)(isinf(po->beta) ? INFINITY : po->beta));
        break;
      case TOPLU_POST_LINEAR: y = VOP(_fmadd_ps)(y, VOP(_set1_ps)(po->alpha), VOP(_set1_ps)(po->beta)); break;
      default: {
        float t[VL];
        VOP(_storeu_ps)(t, y);
        toplu__post_apply(po, t, VL);
        y = VOP(_loadu_ps)(t);
      }
    }
  }
  return y;
}

/* Input transform of the block's tiles [tl0, tl1) (block: tiles t0 .. t0 +
 * count - 1; rows from count on are zeros): v[x][t][c], x the 36 positions. */
WG_TGT static void WG_FN(wg_in)(const wg_state_t *ws, const float *x, int64_t t0, int64_t count, int64_t tl0, int64_t tl1,
                                float *v) {
  const int64_t C = ws->c, TB = ws->tb, H = ws->h, W = ws->w;
  const int64_t cb_n = C / VL, tpi = ws->th * ws->tw;
  const VT zero = VOP(_setzero_ps)();
  for (int64_t tl = tl0; tl < tl1; tl++) {
    int64_t t = t0 + tl;
    if (tl >= count) { /* rows past the block's tiles: zeros, products unused */
      for (int xp = 0; xp < WG_POS; xp++) memset(v + ((int64_t)xp * TB + tl) * C, 0, (size_t)C * sizeof(float));
      continue;
    }
    int64_t img = t / tpi, r = t % tpi, ih0 = r / ws->tw * WG_TILE - ws->pad_t, iw0 = r % ws->tw * WG_TILE - ws->pad_l;
    int full = ih0 >= 0 && iw0 >= 0 && ih0 + WG_ALPHA <= H && iw0 + WG_ALPHA <= W;
    for (int64_t cb = 0; cb < cb_n; cb++) {
      const float *xb = x + ((img * cb_n + cb) * H) * W * VL;
      VT d[6][6];
      if (full) {
        for (int i = 0; i < 6; i++)
          for (int j = 0; j < 6; j++) d[i][j] = VOP(_loadu_ps)(xb + ((ih0 + i) * W + iw0 + j) * VL);
      } else {
        for (int i = 0; i < 6; i++)
          for (int j = 0; j < 6; j++) {
            int64_t ih = ih0 + i, iw = iw0 + j;
            d[i][j] = ih >= 0 && ih < H && iw >= 0 && iw < W ? VOP(_loadu_ps)(xb + (ih * W + iw) * VL) : zero;
          }
      }
      WG_FN(wg_input_tile)((const VT(*)[6])d, v + tl * C + cb * VL, TB * C);
    }
  }
}

/* Products j in [j0, j1) of the block, j = x * groups + g (groups of
 * ws->np 16-column panels): m[x][t][k] = v[x][t][:] . u[x][:][k] for the
 * group's k. */
static void WG_FN(wg_products)(const wg_state_t *ws, const float *v, float *m, int64_t j0, int64_t j1) {
  const int64_t C = ws->c, KP = ws->kpad, TB = ws->tb, nkp = KP / WG_NR, ng = (nkp + ws->np - 1) / ws->np;
  for (int64_t j = j0; j < j1; j++) {
    int64_t xp = j / ng, kp = j % ng * ws->np;
    int np = (int)(nkp - kp < ws->np ? nkp - kp : ws->np);
    const float *vx = v + xp * TB * C, *ux = ws->u + xp * KP * C;
    float *mx = m + xp * TB * KP;
    for (int64_t tr = 0; tr < TB; tr += WG_MR) {
#if WG_W == 512
      toplu__gemm_kernel_6xp(vx + tr * C, C, ux + kp * C * WG_NR, C * WG_NR, C, mx + tr * KP + kp * WG_NR, KP, np);
#else
      for (int q = 0; q < np; q++)
        toplu__gemm_kernel_6x16(vx + tr * C, C, ux + (kp + q) * C * WG_NR, C, mx + tr * KP + (kp + q) * WG_NR, KP, 0);
#endif
    }
  }
}

/* Output transform of the block's tiles [tl0, tl1), bias, post-ops -> y (nChw<VL>c). */
WG_TGT static void WG_FN(wg_out)(const wg_state_t *ws, const toplu__node_t *node, float *y, const float *res, int64_t t0,
                                 int64_t tl0, int64_t tl1, const float *m) {
  const int64_t K = ws->k, KP = ws->kpad, TB = ws->tb, kb_n = K / VL, tpi = ws->th * ws->tw;
  const int64_t OH = ws->oh, OW = ws->ow;
  for (int64_t tl = tl0; tl < tl1; tl++) {
    int64_t t = t0 + tl, img = t / tpi, r = t % tpi, oh0 = r / ws->tw * WG_TILE, ow0 = r % ws->tw * WG_TILE;
    for (int64_t kb = 0; kb < kb_n; kb++) {
      VT s[6][6], q[4][6];
      for (int i = 0; i < 6; i++)
        for (int j = 0; j < 6; j++) s[i][j] = VOP(_loadu_ps)(m + ((int64_t)(i * 6 + j) * TB + tl) * KP + kb * VL);
      const VT c2 = VOP(_set1_ps)(2.f), c4 = VOP(_set1_ps)(4.f), c8 = VOP(_set1_ps)(8.f);
      for (int j = 0; j < 6; j++) { /* q = A^T s */
        VT a = VOP(_add_ps)(s[1][j], s[2][j]), b = VOP(_sub_ps)(s[1][j], s[2][j]);
        VT e = VOP(_add_ps)(s[3][j], s[4][j]), f = VOP(_sub_ps)(s[3][j], s[4][j]);
        q[0][j] = VOP(_add_ps)(VOP(_add_ps)(s[0][j], a), e);
        q[1][j] = VOP(_fmadd_ps)(c2, f, b);
        q[2][j] = VOP(_fmadd_ps)(c4, e, a);
        q[3][j] = VOP(_add_ps)(VOP(_fmadd_ps)(c8, f, b), s[5][j]);
      }
      VT bias = VOP(_loadu_ps)(ws->bias + kb * VL);
      int64_t base = ((img * kb_n + kb) * OH) * OW * VL;
      for (int i = 0; i < 4; i++) { /* o = q A */
        int64_t oh = oh0 + i;
        if (oh >= OH) break;
        VT a = VOP(_add_ps)(q[i][1], q[i][2]), b = VOP(_sub_ps)(q[i][1], q[i][2]);
        VT e = VOP(_add_ps)(q[i][3], q[i][4]), f = VOP(_sub_ps)(q[i][3], q[i][4]);
        VT o[4];
        o[0] = VOP(_add_ps)(VOP(_add_ps)(q[i][0], a), e);
        o[1] = VOP(_fmadd_ps)(c2, f, b);
        o[2] = VOP(_fmadd_ps)(c4, e, a);
        o[3] = VOP(_add_ps)(VOP(_fmadd_ps)(c8, f, b), q[i][5]);
        for (int j = 0; j < 4; j++) {
          int64_t ow = ow0 + j;
          if (ow >= OW) break;
          int64_t off = base + (oh * OW + ow) * VL;
          VT val = VOP(_add_ps)(o[j], bias);
          if (node->n_post) val = WG_FN(wg_post)(node, val, res ? res + off : NULL);
          VOP(_storeu_ps)(y + off, val);
        }
      }
    }
  }
}

/* One block of tiles [t0, t0 + count) on one thread; v, m: its scratch. */
static void WG_FN(wg_block)(const wg_state_t *ws, const toplu__node_t *node, const float *x, float *y, const float *res,
                            int64_t t0, int64_t count, float *v, float *m) {
  WG_FN(wg_in)(ws, x, t0, count, 0, ws->tb, v);
  WG_FN(wg_products)(ws, v, m, 0, (int64_t)WG_POS * wg_groups(ws));
  WG_FN(wg_out)(ws, node, y, res, t0, 0, count, m);
}

#undef VL
#undef WG_FN
#undef VOP
#undef VT
#undef WG_CAT
#undef WG_CAT_
