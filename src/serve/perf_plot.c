/*
 * serve/perf_plot.c - toplu perf's PNG plot: p50 and p99 latency against
 * throughput (toplu_perf_write_plot in toplu/perf.h).  A small rasterizer
 * of its own (lines, boxes, a 5x7 bitmap font drawn at 2x) into an RGB
 * image written by libpng.
 */
#include <errno.h>
#include <math.h>
#include <png.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "serve/perf_priv.h"

enum { W = 800, H = 500, ML = 100, MR = 30, MT = 40, MB = 70, SCALE = 2 };

typedef struct canvas {
  unsigned char *px; /* W*H*3 RGB */
} canvas_t;

static void put(canvas_t *c, int x, int y, const unsigned char *rgb) {
  if (x < 0 || y < 0 || x >= W || y >= H) return;
  memcpy(c->px + ((size_t)y * W + (size_t)x) * 3, rgb, 3);
}

static void box(canvas_t *c, int x, int y, int w, int h, const unsigned char *rgb) {
  for (int j = 0; j < h; j++)
    for (int i = 0; i < w; i++) put(c, x + i, y + j, rgb);
}

/* A line of width 2 (Bresenham with a 2x2 brush). */
static void line(canvas_t *c, int x0, int y0, int x1, int y1, const unsigned char *rgb) {
  int dx = abs(x1 - x0), sx = x0 < x1 ? 1 : -1, dy = -abs(y1 - y0), sy = y0 < y1 ? 1 : -1, e = dx + dy;
  for (;;) {
    box(c, x0, y0, 2, 2, rgb);
    if (x0 == x1 && y0 == y1) break;
    int e2 = 2 * e;
    if (e2 >= dy) e += dy, x0 += sx;
    if (e2 <= dx) e += dx, y0 += sy;
  }
}

/* 5x7 glyphs: 7 rows, bit 4 the leftmost column. */
static const struct {
  char ch;
  unsigned char rows[7];
} font[] = {
    {'0', {0x0E, 0x11, 0x13, 0x15, 0x19, 0x11, 0x0E}}, {'1', {0x04, 0x0C, 0x04, 0x04, 0x04, 0x04, 0x0E}},
    {'2', {0x0E, 0x11, 0x01, 0x02, 0x04, 0x08, 0x1F}}, {'3', {0x1F, 0x02, 0x04, 0x02, 0x01, 0x11, 0x0E}},
    {'4', {0x02, 0x06, 0x0A, 0x12, 0x1F, 0x02, 0x02}}, {'5', {0x1F, 0x10, 0x1E, 0x01, 0x01, 0x11, 0x0E}},
    {'6', {0x06, 0x08, 0x10, 0x1E, 0x11, 0x11, 0x0E}}, {'7', {0x1F, 0x01, 0x02, 0x04, 0x08, 0x08, 0x08}},
    {'8', {0x0E, 0x11, 0x11, 0x0E, 0x11, 0x11, 0x0E}}, {'9', {0x0E, 0x11, 0x11, 0x0F, 0x01, 0x02, 0x0C}},
    {'.', {0, 0, 0, 0, 0, 0x0C, 0x0C}},                {'-', {0, 0, 0, 0x1F, 0, 0, 0}},
    {'/', {0x01, 0x01, 0x02, 0x04, 0x08, 0x10, 0x10}}, {'a', {0, 0, 0x0E, 0x01, 0x0F, 0x11, 0x0F}},
    {'c', {0, 0, 0x0E, 0x10, 0x10, 0x11, 0x0E}},       {'e', {0, 0, 0x0E, 0x11, 0x1F, 0x10, 0x0E}},
    {'f', {0x06, 0x09, 0x08, 0x1C, 0x08, 0x08, 0x08}}, {'i', {0x04, 0, 0x0C, 0x04, 0x04, 0x04, 0x0E}},
    {'k', {0x10, 0x10, 0x12, 0x14, 0x18, 0x14, 0x12}}, {'l', {0x0C, 0x04, 0x04, 0x04, 0x04, 0x04, 0x0E}},
    {'n', {0, 0, 0x16, 0x19, 0x11, 0x11, 0x11}},       {'p', {0, 0, 0x1E, 0x11, 0x1E, 0x10, 0x10}},
    {'r', {0, 0, 0x16, 0x19, 0x10, 0x10, 0x10}},       {'s', {0, 0, 0x0E, 0x10, 0x0E, 0x01, 0x1E}},
    {'t', {0x08, 0x08, 0x1C, 0x08, 0x08, 0x09, 0x06}}, {'u', {0, 0, 0x11, 0x11, 0x11, 0x13, 0x0D}},
    {'y', {0, 0, 0x11, 0x11, 0x0F, 0x01, 0x0E}},       {'M', {0x11, 0x1B, 0x15, 0x15, 0x11, 0x11, 0x11}},
    {'v', {0, 0, 0x11, 0x11, 0x11, 0x0A, 0x04}},       {'o', {0, 0, 0x0E, 0x11, 0x11, 0x11, 0x0E}},
};

/* Width in pixels of text drawn by text(). */
static int text_width(const char *s) { return (int)strlen(s) * 6 * SCALE; }

static void text(canvas_t *c, int x, int y, const char *s, const unsigned char *rgb) {
  for (; *s; s++, x += 6 * SCALE)
    for (size_t g = 0; g < sizeof font / sizeof font[0]; g++) {
      if (font[g].ch != *s) continue;
      for (int r = 0; r < 7; r++)
        for (int b = 0; b < 5; b++)
          if (font[g].rows[r] & (0x10 >> b)) box(c, x + b * SCALE, y + r * SCALE, SCALE, SCALE, rgb);
      break;
    }
}

/* A tick step of 1, 2 or 5 times a power of ten giving about 5 ticks. */
static double nice_step(double range) {
  if (!(range > 0)) return 1;
  double raw = range / 5, p = pow(10, floor(log10(raw))), f = raw / p;
  return (f < 1.5 ? 1 : f < 3.5 ? 2 : f < 7.5 ? 5 : 10) * p;
}

static void tick_label(double v, char *buf, size_t size) {
  if (fabs(v) >= 1e6)
    snprintf(buf, size, "%gM", v / 1e6);
  else if (fabs(v) >= 1e4)
    snprintf(buf, size, "%gk", v / 1e3);
  else
    snprintf(buf, size, "%g", v);
}

static int cmp_x(const void *a, const void *b) {
  const toplu_perf_level_t *x = *(const toplu_perf_level_t *const *)a, *y = *(const toplu_perf_level_t *const *)b;
  return x->infer_per_s < y->infer_per_s ? -1 : x->infer_per_s > y->infer_per_s;
}

static toplu_status_t write_png(const canvas_t *c, const char *path, toplu_error_t *err) {
  FILE *f = fopen(path, "wb");
  if (!f) return toplu__errorf(err, TOPLU_ERR_IO, "%s: %s", path, strerror(errno));
  png_structp png = png_create_write_struct(PNG_LIBPNG_VER_STRING, NULL, NULL, NULL);
  png_infop info = png ? png_create_info_struct(png) : NULL;
  if (!png || !info) {
    png_destroy_write_struct(&png, &info);
    fclose(f);
    return toplu__errorf(err, TOPLU_ERR_OUT_OF_MEMORY, "%s: libpng: out of memory", path);
  }
  if (setjmp(png_jmpbuf(png))) {
    png_destroy_write_struct(&png, &info);
    fclose(f);
    return toplu__errorf(err, TOPLU_ERR_IO, "%s: libpng failed while writing", path);
  }
  png_init_io(png, f);
  png_set_IHDR(png, info, W, H, 8, PNG_COLOR_TYPE_RGB, PNG_INTERLACE_NONE, PNG_COMPRESSION_TYPE_DEFAULT,
               PNG_FILTER_TYPE_DEFAULT);
  png_write_info(png, info);
  for (int y = 0; y < H; y++) png_write_row(png, c->px + (size_t)y * W * 3);
  png_write_end(png, info);
  png_destroy_write_struct(&png, &info);
  if (fclose(f)) return toplu__errorf(err, TOPLU_ERR_IO, "%s: %s", path, strerror(errno));
  return TOPLU_OK;
}

toplu_status_t toplu_perf_write_plot(const toplu_perf_result_t *r, const char *path, toplu_error_t *err) {
  toplu_error_clear(err);
  if (!r || !path || r->n_levels < 1)
    return toplu__errorf(err, TOPLU_ERR_INVALID_ARGUMENT, "plot: no levels to draw");
  static const unsigned char white[3] = {255, 255, 255}, black[3] = {0, 0, 0}, grey[3] = {225, 225, 225},
                             blue[3] = {31, 119, 180}, red[3] = {214, 39, 40};
  canvas_t c = {malloc((size_t)W * H * 3)};
  const toplu_perf_level_t **lv = calloc((size_t)r->n_levels, sizeof *lv);
  if (!c.px || !lv) {
    free(c.px);
    free(lv);
    return toplu__errorf(err, TOPLU_ERR_OUT_OF_MEMORY, "plot: out of memory");
  }
  memset(c.px, 255, (size_t)W * H * 3);
  (void)white;
  double xmax = 0, ymax = 0;
  for (int i = 0; i < r->n_levels; i++) {
    lv[i] = &r->levels[i];
    if (lv[i]->infer_per_s > xmax) xmax = lv[i]->infer_per_s;
    if (lv[i]->p99_us > ymax) ymax = lv[i]->p99_us;
    if (lv[i]->p50_us > ymax) ymax = lv[i]->p50_us;
  }
  qsort(lv, (size_t)r->n_levels, sizeof *lv, cmp_x);
  double xs = nice_step(xmax), ys = nice_step(ymax);
  xmax = xs * ceil(xmax / xs + 1e-9);
  ymax = ys * ceil(ymax / ys + 1e-9);
  if (xmax <= 0) xmax = xs;
  if (ymax <= 0) ymax = ys;
  int pw = W - ML - MR, ph = H - MT - MB;
  char buf[32];
  for (double v = 0; v <= xmax * (1 + 1e-9); v += xs) {
    int x = ML + (int)lround(v / xmax * pw);
    line(&c, x, MT, x, MT + ph, grey);
    line(&c, x, MT + ph, x, MT + ph + 6, black);
    tick_label(v, buf, sizeof buf);
    text(&c, x - text_width(buf) / 2, MT + ph + 12, buf, black);
  }
  for (double v = 0; v <= ymax * (1 + 1e-9); v += ys) {
    int y = MT + ph - (int)lround(v / ymax * ph);
    line(&c, ML, y, ML + pw, y, grey);
    line(&c, ML - 6, y, ML, y, black);
    tick_label(v, buf, sizeof buf);
    text(&c, ML - 10 - text_width(buf), y - 7, buf, black);
  }
  line(&c, ML, MT, ML, MT + ph, black);
  line(&c, ML, MT + ph, ML + pw, MT + ph, black);
  text(&c, ML + pw / 2 - text_width("infer/s") / 2, H - 28, "infer/s", black);
  text(&c, 8, 10, "latency usec", black);
  for (int s = 0; s < 2; s++) {
    const unsigned char *col = s ? red : blue;
    int px = 0, py = 0;
    for (int i = 0; i < r->n_levels; i++) {
      double yv = s ? lv[i]->p99_us : lv[i]->p50_us;
      int x = ML + (int)lround(lv[i]->infer_per_s / xmax * pw), y = MT + ph - (int)lround(yv / ymax * ph);
      if (i) line(&c, px, py, x, y, col);
      box(&c, x - 3, y - 3, 7, 7, col);
      px = x, py = y;
    }
    int lx = W - MR - 120, ly = MT + 8 + s * 22;
    box(&c, lx, ly + 3, 24, 6, col);
    text(&c, lx + 32, ly, s ? "p99" : "p50", black);
  }
  free(lv);
  toplu_status_t st = write_png(&c, path, err);
  free(c.px);
  return st;
}
