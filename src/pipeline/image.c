/* pipeline/image.c - decoding JPEG (libturbojpeg) and PNG (libpng) files. */
#include "pipeline/image.h"

#include <png.h>
#include <setjmp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <turbojpeg.h>

#include "core/checked.h"
#include "pipeline/files.h"

/* 0 when w x h pixels are within max_pixels, else -1 with why. */
static int check_pixels(const char *kind, int64_t w, int64_t h, int64_t max_pixels, char *why, size_t why_size) {
  int64_t px;
  if (max_pixels <= 0) max_pixels = PL_IMAGE_MAX_PIXELS_DEFAULT;
  if (toplu__mul_i64(w, h, &px) && px <= max_pixels) return 0;
  snprintf(why, why_size,
           "%s of %lldx%lld pixels is above the limit of %lld pixels (max_image_pixels); not decoded", kind,
           (long long)w, (long long)h, (long long)max_pixels);
  return -1;
}

/* ---- JPEG ---- */

/* Pick the libjpeg scaling factor giving the smallest image at least hint_w x hint_h. */
static tjscalingfactor pick_scale(int w, int h, int hint_w, int hint_h) {
  tjscalingfactor best = {1, 1};
  if (hint_w <= 0 || hint_h <= 0) return best;
  int n = 0;
  tjscalingfactor *f = tjGetScalingFactors(&n);
  int64_t best_area = (int64_t)w * h;
  for (int i = 0; f && i < n; i++) {
    if (f[i].num > f[i].denom) continue;
    /* Only 1/2, 1/4, 1/8: the power-of-two IDCTs are the exact ones. */
    if (f[i].num != 1 || (f[i].denom != 2 && f[i].denom != 4 && f[i].denom != 8)) continue;
    int sw = TJSCALED(w, f[i]), sh = TJSCALED(h, f[i]);
    if (sw < hint_w || sh < hint_h) continue;
    if ((int64_t)sw * sh < best_area) {
      best_area = (int64_t)sw * sh;
      best = f[i];
    }
  }
  return best;
}

/* Decode a JPEG with libturbojpeg (scaled down when hint allows). */
static int decode_jpeg(const uint8_t *data, size_t len, int hint_w, int hint_h, int64_t max_pixels, pl_value_t *v,
                       char *why, size_t why_size) {
  tjhandle h = tjInitDecompress();
  if (!h) {
    snprintf(why, why_size, "cannot start the JPEG decoder");
    return -1;
  }
  int w = 0, ht = 0, subsamp = 0, cs = 0;
  if (tjDecompressHeader3(h, data, (unsigned long)len, &w, &ht, &subsamp, &cs) != 0) {
    snprintf(why, why_size, "JPEG: %s", tjGetErrorStr2(h));
    tjDestroy(h);
    return -1;
  }
  if (check_pixels("JPEG", w, ht, max_pixels, why, why_size)) {
    tjDestroy(h);
    return -1;
  }
  tjscalingfactor sf = pick_scale(w, ht, hint_w, hint_h);
  int sw = TJSCALED(w, sf), sh = TJSCALED(ht, sf);
  int pf = cs == TJCS_GRAY ? TJPF_GRAY : (cs == TJCS_CMYK || cs == TJCS_YCCK) ? TJPF_CMYK : TJPF_RGB;
  int pc = tjPixelSize[pf];
  uint8_t *buf = malloc((size_t)sw * (size_t)sh * (size_t)pc + 1);
  if (!buf) {
    snprintf(why, why_size, "out of memory for a %dx%d image", sw, sh);
    tjDestroy(h);
    return -1;
  }
  if (tjDecompress2(h, data, (unsigned long)len, buf, sw, 0, sh, pf, 0) != 0) {
    const char *msg = tjGetErrorStr2(h);
    if (tjGetErrorCode(h) != TJERR_WARNING || !strstr(msg, "extraneous bytes")) {
      snprintf(why, why_size, "corrupt JPEG: %s", msg);
      free(buf);
      tjDestroy(h);
      return -1;
    }
  }
  tjDestroy(h);
  if (pf == TJPF_CMYK) {
    /* Adobe writes CMYK inverted: R = C * K / 255 on the stored values. */
    uint8_t *rgb = malloc((size_t)sw * (size_t)sh * 3 + 1);
    if (!rgb) {
      free(buf);
      snprintf(why, why_size, "out of memory for a %dx%d image", sw, sh);
      return -1;
    }
    for (size_t i = 0; i < (size_t)sw * (size_t)sh; i++) {
      unsigned k = buf[i * 4 + 3];
      for (int c = 0; c < 3; c++) rgb[i * 3 + c] = (uint8_t)((buf[i * 4 + c] * k + 127) / 255);
    }
    free(buf);
    buf = rgb;
    pc = 3;
  }
  v->kind = PL_VALUE_IMAGE;
  v->w = sw;
  v->h = sh;
  v->c = pc;
  v->pixels = buf;
  return 0;
}

/* ---- PNG ---- */

typedef struct png_ctx {
  const uint8_t *data;
  size_t len, pos;
  char msg[256];
  int not_corrupt; /* msg is the whole reason (too large, out of memory), not libpng's */
  uint8_t *pixels;
  png_bytep *rows;
} png_ctx_t;

/* libpng read callback: bytes from memory. */
static void png_read_mem(png_structp p, png_bytep out, png_size_t n) {
  png_ctx_t *c = png_get_io_ptr(p);
  if (c->len - c->pos < n) png_error(p, "file ends early (truncated)");
  memcpy(out, c->data + c->pos, n);
  c->pos += n;
}

/* libpng error callback: keep the message, jump back. */
static void png_on_error(png_structp p, png_const_charp msg) {
  png_ctx_t *c = png_get_error_ptr(p);
  snprintf(c->msg, sizeof c->msg, "%s", msg);
  png_longjmp(p, 1);
}

/* libpng warning callback: ignored. */
static void png_on_warning(png_structp p, png_const_charp msg) {
  (void)p;
  (void)msg; /* warnings (an unknown chunk, a bad iCCP profile) do not spoil the pixels */
}

/* Decode a PNG with libpng to 8-bit gray or RGB. */
static int decode_png(const uint8_t *data, size_t len, int64_t max_pixels, pl_value_t *v, char *why,
                      size_t why_size) {
  png_ctx_t ctx;
  memset(&ctx, 0, sizeof ctx);
  ctx.data = data;
  ctx.len = len;
  png_ctx_t *c = &ctx;
  png_structp p = png_create_read_struct(PNG_LIBPNG_VER_STRING, c, png_on_error, png_on_warning);
  png_infop info = p ? png_create_info_struct(p) : NULL;
  if (!p || !info) {
    png_destroy_read_struct(p ? &p : NULL, NULL, NULL);
    snprintf(why, why_size, "cannot start the PNG decoder");
    return -1;
  }
  if (setjmp(png_jmpbuf(p))) {
    snprintf(why, why_size, c->not_corrupt ? "%s" : "corrupt PNG: %s", c->msg);
    free(c->pixels);
    free(c->rows);
    png_destroy_read_struct(&p, &info, NULL);
    return -1;
  }
  png_set_read_fn(p, c, png_read_mem);
  png_read_info(p, info);
  if (check_pixels("PNG", png_get_image_width(p, info), png_get_image_height(p, info), max_pixels, c->msg,
                   sizeof c->msg)) {
    c->not_corrupt = 1;
    png_longjmp(p, 1);
  }
  int depth = png_get_bit_depth(p, info), type = png_get_color_type(p, info);
  png_set_expand(p);
  if (depth == 16) png_set_scale_16(p);
  if ((type & PNG_COLOR_MASK_ALPHA) || png_get_valid(p, info, PNG_INFO_tRNS)) png_set_strip_alpha(p);
  png_set_interlace_handling(p);
  png_read_update_info(p, info);
  png_uint_32 w = png_get_image_width(p, info), h = png_get_image_height(p, info);
  int ch = png_get_channels(p, info);
  size_t rowbytes = png_get_rowbytes(p, info);
  if ((ch != 1 && ch != 3) || rowbytes != (size_t)w * (size_t)ch)
    png_error(p, "unexpected channel layout after expansion");
  size_t bytes = 0, alloc = 0;
  if (toplu__mul_size(rowbytes, h, &bytes) && toplu__add_size(bytes, 1, &alloc)) {
    c->pixels = malloc(alloc);
    c->rows = malloc(sizeof(png_bytep) * h + 1);
  }
  if (!c->pixels || !c->rows) { /* a valid image too large for this machine: not corrupt */
    snprintf(c->msg, sizeof c->msg, "PNG of %lux%lu pixels: out of memory for its %zu decoded bytes", (unsigned long)w,
             (unsigned long)h, bytes);
    c->not_corrupt = 1;
    png_longjmp(p, 1);
  }
  for (png_uint_32 y = 0; y < h; y++) c->rows[y] = c->pixels + (size_t)y * rowbytes;
  png_read_image(p, c->rows);
  png_destroy_read_struct(&p, &info, NULL);
  free(c->rows);
  v->kind = PL_VALUE_IMAGE;
  v->w = (int)w;
  v->h = (int)h;
  v->c = ch;
  v->pixels = c->pixels;
  return 0;
}

int pl_image_decode(const uint8_t *data, size_t len, int hint_w, int hint_h, int64_t max_pixels, pl_value_t *v,
                    char *why, size_t why_size) {
  static const uint8_t png_sig[8] = {0x89, 'P', 'N', 'G', '\r', '\n', 0x1a, '\n'};
  if (len >= 3 && data[0] == 0xff && data[1] == 0xd8 && data[2] == 0xff)
    return decode_jpeg(data, len, hint_w, hint_h, max_pixels, v, why, why_size);
  if (len >= 8 && !memcmp(data, png_sig, 8)) return decode_png(data, len, max_pixels, v, why, why_size);
  snprintf(why, why_size, len ? "not a JPEG or PNG file" : "empty file");
  return -1;
}

int pl_image_load(const char *path, int hint_w, int hint_h, int64_t max_pixels, pl_value_t *v, char *why,
                  size_t why_size) {
  char *data;
  size_t len;
  toplu_error_t err;
  if (pl_file_read(path, &data, &len, &err)) {
    snprintf(why, why_size, "%s", err.message);
    return -1;
  }
  int r = pl_image_decode((const uint8_t *)data, len, hint_w, hint_h, max_pixels, v, why, why_size);
  free(data);
  return r;
}
