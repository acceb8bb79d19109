/* pipeline/preprocess.c - declared preprocessing: parsing specs, resizing, normalising, laying out. */
#include "pipeline/preprocess.h"
#include "pipeline/pool.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"

/* ---- parsing ---- */

#define PL_MAX_SIDE 65536

/* "WxH" -> w, h (1..PL_MAX_SIDE); 0, or -1 with the reason in why. */
static int parse_wxh(const char *s, size_t n, int *w, int *h, char *why, size_t why_size) {
  char tmp[64];
  if (n == 0 || n >= sizeof tmp) {
    snprintf(why, why_size, "expected WxH, e.g. 224x224");
    return -1;
  }
  memcpy(tmp, s, n);
  tmp[n] = '\0';
  char *x = strchr(tmp, 'x');
  if (!x) x = strchr(tmp, 'X');
  char *e1, *e2;
  errno = 0;
  long long a = x ? strtoll(tmp, &e1, 10) : 0, b = x ? strtoll(x + 1, &e2, 10) : 0;
  if (!x || e1 != x || e1 == tmp || e2 == x + 1 || *e2) {
    snprintf(why, why_size, "'%s' is not WxH (two whole numbers, e.g. 224x224)", tmp);
    return -1;
  }
  if (a < 1 || b < 1) {
    snprintf(why, why_size, "%s: width and height must be at least 1", tmp);
    return -1;
  }
  if (errno || a > PL_MAX_SIDE || b > PL_MAX_SIDE) {
    snprintf(why, why_size, "%s is too large (at most %d per side)", tmp, PL_MAX_SIDE);
    return -1;
  }
  *w = (int)a;
  *h = (int)b;
  return 0;
}

/* A number, or a fraction "a/b"; 0, or -1 with the reason in why. */
static int parse_num(const char *s, size_t n, double *out, int allow_fraction, char *why, size_t why_size) {
  char tmp[64];
  if (n == 0 || n >= sizeof tmp) {
    snprintf(why, why_size, n ? "the value is too long" : "no value");
    return -1;
  }
  memcpy(tmp, s, n);
  tmp[n] = '\0';
  char *e;
  errno = 0;
  double a = strtod(tmp, &e);
  if (strpbrk(tmp, "xXpP") || e == tmp || (*e && !(*e == '/' && allow_fraction))) {
    snprintf(why, why_size, "'%s' is not a number%s", tmp, allow_fraction ? " (or a fraction like 1/255)" : "");
    return -1;
  }
  if (*e == '/') {
    char *e2;
    double b = strtod(e + 1, &e2);
    if (e2 == e + 1 || *e2) {
      snprintf(why, why_size, "'%s' is not a fraction like 1/255", tmp);
      return -1;
    }
    if (b == 0) {
      snprintf(why, why_size, "'%s' divides by zero", tmp);
      return -1;
    }
    a /= b;
  }
  if (errno == ERANGE || !isfinite(a)) {
    snprintf(why, why_size, "'%s' is out of range", tmp);
    return -1;
  }
  *out = a;
  return 0;
}

/* "R/G/B" or one value for all; 0, or -1 with the reason in why. */
static int parse_rgb(const char *s, size_t n, float *v, char *why, size_t why_size) {
  double x[3];
  int k = 0;
  size_t start = 0;
  for (size_t i = 0; i <= n; i++) {
    if (i < n && s[i] != '/') continue;
    if (k < 3 && parse_num(s + start, i - start, &x[k], 0, why, why_size)) return -1;
    k++;
    start = i + 1;
  }
  if (k != 1 && k != 3) {
    snprintf(why, why_size, "%d values for 3 channels (give one value for all, or R/G/B)", k);
    return -1;
  }
  for (int c = 0; c < 3; c++) v[c] = (float)x[k == 1 ? 0 : c];
  return 0;
}

static const char pre_items[] =
    "resize=WxH, resize=WxH:letterbox, resize=S, crop=WxH, pad-multiple=M, pad-value=V, color=rgb|bgr|gray, "
    "layout=nchw|nhwc, dtype=float32|uint8, scale=S, mean=R/G/B, std=R/G/B, decode=fast|full";

toplu_status_t pl_pre_parse(const char *spec, pl_pre_t *p, toplu_error_t *err) {
  static const char *const keys[] = {"resize", "crop", "pad-multiple", "pad-value", "color", "layout",
                                     "dtype",  "scale", "mean",        "std",       "decode", NULL};
  const char *seen[11] = {0};
  size_t seen_len[11] = {0};
  memset(p, 0, sizeof *p);
  p->scale = 1.0;
  for (int c = 0; c < 3; c++) p->std[c] = 1.0f;
  if (!spec) return TOPLU_OK;
  const char *s = spec;
  while (*s) {
    const char *end = strchr(s, ',');
    size_t n = end ? (size_t)(end - s) : strlen(s);
    const char *eq = memchr(s, '=', n);
    if (n == 0) {
      s += end ? 1 : 0;
      if (!end) break;
      continue;
    }
    size_t kl = eq ? (size_t)(eq - s) : n;
    const char *v = eq ? eq + 1 : s + n;
    size_t vl = eq ? n - kl - 1 : 0;
    int ki = -1;
    for (int k = 0; keys[k]; k++)
      if (kl == strlen(keys[k]) && !strncmp(s, keys[k], kl)) ki = k;
    if (ki < 0)
      return toplu__errorf(err, TOPLU_ERR_INVALID_ARGUMENT, "preprocess: unknown item '%.*s' (known: %s)", (int)n, s,
                          pre_items);
    if (!eq)
      return toplu__errorf(err, TOPLU_ERR_INVALID_ARGUMENT, "preprocess: '%.*s' needs a value (%.*s=...)", (int)n, s,
                          (int)n, s);
    if (seen[ki])
      return toplu__errorf(err, TOPLU_ERR_INVALID_ARGUMENT, "preprocess: %s is given twice ('%.*s' and '%.*s')",
                          keys[ki], (int)seen_len[ki], seen[ki], (int)n, s);
    seen[ki] = s;
    seen_len[ki] = n;
#define KEY(k) (!strcmp(keys[ki], k))
    char why[256] = "";
    int bad = 0;
    if (KEY("resize")) {
      const char *colon = memchr(v, ':', vl);
      size_t wl = colon ? (size_t)(colon - v) : vl;
      double side;
      p->any_image_op = 1;
      if (colon && (vl - wl - 1 != 9 || strncmp(colon + 1, "letterbox", 9))) {
        snprintf(why, sizeof why, "after WxH only ':letterbox' may follow");
        bad = 1;
      } else if (colon || memchr(v, 'x', wl) || memchr(v, 'X', wl)) {
        bad = parse_wxh(v, wl, &p->rw, &p->rh, why, sizeof why);
        if (!bad) p->resize = colon ? PL_RESIZE_LETTERBOX : PL_RESIZE_EXACT;
      } else if (parse_num(v, wl, &side, 0, why, sizeof why)) {
        snprintf(why, sizeof why, "expected WxH, WxH:letterbox or S (the shorter side)");
        bad = 1;
      } else if (side != floor(side) || side < 1) {
        snprintf(why, sizeof why, "the shorter side must be a whole number >= 1");
        bad = 1;
      } else if (side > PL_MAX_SIDE) {
        snprintf(why, sizeof why, "too large (at most %d)", PL_MAX_SIDE);
        bad = 1;
      } else {
        p->resize = PL_RESIZE_SHORT;
        p->rshort = (int)side;
      }
    } else if (KEY("crop")) {
      p->any_image_op = 1;
      bad = parse_wxh(v, vl, &p->crop_w, &p->crop_h, why, sizeof why);
    } else if (KEY("pad-multiple")) {
      double m;
      p->any_image_op = 1;
      bad = parse_num(v, vl, &m, 0, why, sizeof why);
      if (!bad && (m < 1 || m > 4096 || m != floor(m))) {
        snprintf(why, sizeof why, "must be a whole number from 1 to 4096");
        bad = 1;
      }
      if (!bad) p->pad_multiple = (int)m;
    } else if (KEY("pad-value")) {
      double m;
      p->any_image_op = 1;
      bad = parse_num(v, vl, &m, 0, why, sizeof why);
      if (!bad && (m < 0 || m > 255)) {
        snprintf(why, sizeof why, "%g is outside 0..255 (a pixel value before scale/mean/std)", m);
        bad = 1;
      }
      if (!bad) p->pad_value = (float)m;
    } else if (KEY("color")) {
      p->any_image_op = 1;
      if (vl == 3 && !strncmp(v, "rgb", 3)) p->color = PL_COLOR_RGB;
      else if (vl == 3 && !strncmp(v, "bgr", 3)) p->color = PL_COLOR_BGR;
      else if (vl == 4 && !strncmp(v, "gray", 4)) p->color = PL_COLOR_GRAY;
      else bad = snprintf(why, sizeof why, "expected rgb, bgr or gray") > 0;
    } else if (KEY("layout")) {
      p->any_image_op = 1;
      if (vl == 4 && !strncmp(v, "nchw", 4)) p->layout = PL_LAYOUT_NCHW;
      else if (vl == 4 && !strncmp(v, "nhwc", 4)) p->layout = PL_LAYOUT_NHWC;
      else bad = snprintf(why, sizeof why, "expected nchw or nhwc") > 0;
    } else if (KEY("dtype")) {
      if (vl == 7 && !strncmp(v, "float32", 7)) p->dtype = TOPLU_DTYPE_FLOAT;
      else if (vl == 5 && !strncmp(v, "uint8", 5)) p->dtype = TOPLU_DTYPE_UINT8;
      else bad = snprintf(why, sizeof why, "expected float32 or uint8") > 0;
    } else if (KEY("scale")) {
      bad = parse_num(v, vl, &p->scale, 1, why, sizeof why);
      p->has_scale = !bad;
    } else if (KEY("decode")) {
      p->any_image_op = 1;
      if (vl == 4 && !strncmp(v, "fast", 4)) p->decode_full = 0;
      else if (vl == 4 && !strncmp(v, "full", 4)) p->decode_full = 1;
      else bad = snprintf(why, sizeof why, "expected fast or full") > 0;
    } else if (KEY("mean")) {
      p->any_image_op = 1;
      bad = parse_rgb(v, vl, p->mean, why, sizeof why);
      p->has_mean = !bad;
    } else {
      p->any_image_op = 1;
      bad = parse_rgb(v, vl, p->std, why, sizeof why);
      p->has_std = !bad;
      static const char *const ch[] = {"R", "G", "B"};
      for (int c = 0; !bad && c < 3; c++)
        if (p->std[c] == 0) {
          if (p->std[0] == 0 && p->std[1] == 0 && p->std[2] == 0) snprintf(why, sizeof why, "a std of 0 divides by zero");
          else snprintf(why, sizeof why, "the %s value is 0, which divides by zero", ch[c]);
          bad = 1;
        }
    }
#undef KEY
    if (bad) return toplu__errorf(err, TOPLU_ERR_INVALID_ARGUMENT, "preprocess %.*s: %s", (int)n, s, why);
    if (!end) break;
    s = end + 1;
  }
  return TOPLU_OK;
}

/* x rounded up to a multiple of m (m <= 1: x). */
static int64_t round_up(int64_t x, int m) { return m > 1 ? (x + m - 1) / m * m : x; }

/* Where the model fixes H and W (dims hd, wd of info), check that the size
 * steps give that size for every image, so a mismatch is refused before
 * running instead of failing every row. */
static toplu_status_t check_size(const pl_pre_t *p, const toplu_value_info_t *info, int hd, int wd, toplu_error_t *err) {
  int64_t mh = info->dims[hd], mw = info->dims[wd];
  if (mh <= 0 && mw <= 0) return TOPLU_OK;
  char steps[160] = "", sh[128];
  int64_t w = -1, h = -1, shorter = -1;
  if (p->resize == PL_RESIZE_EXACT || p->resize == PL_RESIZE_LETTERBOX) {
    w = p->rw;
    h = p->rh;
    snprintf(steps, sizeof steps, "resize=%dx%d%s", p->rw, p->rh, p->resize == PL_RESIZE_LETTERBOX ? ":letterbox" : "");
  } else if (p->resize == PL_RESIZE_SHORT) {
    shorter = p->rshort;
    snprintf(steps, sizeof steps, "resize=%d", p->rshort);
  }
  if (p->crop_w) {
    w = p->crop_w;
    h = p->crop_h;
    shorter = -1;
    size_t n = strlen(steps);
    snprintf(steps + n, sizeof steps - n, "%scrop=%dx%d", n ? "," : "", p->crop_w, p->crop_h);
  }
  if (p->pad_multiple > 1) {
    if (w > 0) w = round_up(w, p->pad_multiple);
    if (h > 0) h = round_up(h, p->pad_multiple);
    if (shorter > 0) shorter = round_up(shorter, p->pad_multiple);
    size_t n = strlen(steps);
    snprintf(steps + n, sizeof steps - n, "%spad-multiple=%d", n ? "," : "", p->pad_multiple);
  }
  toplu_shape_format(info->ndim, info->dims, sh, sizeof sh);
  if (w > 0 && h > 0 && ((mw > 0 && w != mw) || (mh > 0 && h != mh)))
    return toplu__errorf(err, TOPLU_ERR_INVALID_ARGUMENT,
                        "preprocess %s makes every image %lldx%lld (WxH), but input '%s' is %s: it takes %lldx%lld; "
                        "resize or crop to that size",
                        steps, (long long)w, (long long)h, info->name, sh, (long long)(mw > 0 ? mw : w),
                        (long long)(mh > 0 ? mh : h));
  if (shorter > 0 && mw > 0 && mh > 0 && shorter != (mw < mh ? mw : mh))
    return toplu__errorf(err, TOPLU_ERR_INVALID_ARGUMENT,
                        "preprocess %s makes the shorter side of every image %lld, but input '%s' is %s: it takes "
                        "%lldx%lld; add crop=%lldx%lld or resize=%lldx%lld",
                        steps, (long long)shorter, info->name, sh, (long long)mw, (long long)mh, (long long)mw,
                        (long long)mh, (long long)mw, (long long)mh);
  return TOPLU_OK;
}

toplu_status_t pl_pre_bind(pl_pre_t *p, const toplu_value_info_t *info, int is_image, toplu_error_t *err) {
  toplu_dtype_t mdt = info->dtype;
  if (!is_image) {
    if (p->any_image_op)
      return toplu__errorf(err, TOPLU_ERR_INVALID_ARGUMENT,
                          "preprocess: resize, crop, pad, color, layout, mean, std and decode apply to images; input '%s' "
                          "reads numeric rows (only scale and dtype apply)",
                          info->name);
    if (p->dtype != TOPLU_DTYPE_UNDEFINED && mdt != TOPLU_DTYPE_UNDEFINED && p->dtype != mdt)
      return toplu__errorf(err, TOPLU_ERR_INVALID_ARGUMENT, "preprocess dtype=%s, but input '%s' is %s",
                          toplu_dtype_name(p->dtype), info->name, toplu_dtype_name(mdt));
    return TOPLU_OK;
  }
  if (info->ndim != 4 && info->ndim != 3 && info->ndim >= 0)
    return toplu__errorf(err, TOPLU_ERR_INVALID_ARGUMENT,
                        "input '%s' has rank %d; images go to inputs of rank 4 ([N,C,H,W] or [N,H,W,C]) or 3 "
                        "([N,H,W], gray)",
                        info->name, info->ndim);
  int hd = 2, wd = 3;
  if (info->ndim == 3) {
    p->layout = PL_LAYOUT_HW;
    if (p->color == PL_COLOR_DEFAULT) p->color = PL_COLOR_GRAY;
    if (p->color != PL_COLOR_GRAY)
      return toplu__errorf(err, TOPLU_ERR_INVALID_ARGUMENT, "input '%s' is [N,H,W]: only color=gray fits", info->name);
    hd = 1;
    wd = 2;
  } else if (info->ndim == 4) {
    int64_t c1 = info->dims[1], c3 = info->dims[3];
    int layout_given = p->layout != PL_LAYOUT_DEFAULT;
    if (p->layout == PL_LAYOUT_DEFAULT)
      p->layout = (c1 == 1 || c1 == 3) ? PL_LAYOUT_NCHW : (c3 == 1 || c3 == 3) ? PL_LAYOUT_NHWC : PL_LAYOUT_NCHW;
    int64_t ch = p->layout == PL_LAYOUT_NCHW ? c1 : c3;
    if (p->color == PL_COLOR_DEFAULT) p->color = ch == 1 ? PL_COLOR_GRAY : PL_COLOR_RGB;
    int want = p->color == PL_COLOR_GRAY ? 1 : 3;
    int64_t other = p->layout == PL_LAYOUT_NCHW ? c3 : c1;
    if (ch >= 0 && ch != want && (other == want || other < 0) && layout_given) {
      char sh[128];
      return toplu__errorf(err, TOPLU_ERR_INVALID_ARGUMENT,
                          "preprocess layout=%s puts the channels at dim %d, but input '%s' is %s (channels at dim %d: "
                          "layout=%s)",
                          p->layout == PL_LAYOUT_NCHW ? "nchw" : "nhwc", p->layout == PL_LAYOUT_NCHW ? 1 : 3, info->name,
                          toplu_shape_format(info->ndim, info->dims, sh, sizeof sh),
                          p->layout == PL_LAYOUT_NCHW ? 3 : 1, p->layout == PL_LAYOUT_NCHW ? "nhwc" : "nchw");
    }
    if (ch >= 0 && ch != want)
      return toplu__errorf(err, TOPLU_ERR_INVALID_ARGUMENT,
                          "input '%s' takes %lld channels (layout %s), color=%s gives %d", info->name, (long long)ch,
                          p->layout == PL_LAYOUT_NCHW ? "nchw" : "nhwc",
                          p->color == PL_COLOR_GRAY ? "gray" : p->color == PL_COLOR_BGR ? "bgr" : "rgb", want);
    if (p->layout == PL_LAYOUT_NHWC) {
      hd = 1;
      wd = 2;
    }
  } else {
    if (p->layout == PL_LAYOUT_DEFAULT) p->layout = PL_LAYOUT_NCHW;
    if (p->color == PL_COLOR_DEFAULT) p->color = PL_COLOR_RGB;
  }
  if (p->dtype == TOPLU_DTYPE_UNDEFINED) p->dtype = mdt == TOPLU_DTYPE_UNDEFINED ? TOPLU_DTYPE_FLOAT : mdt;
  if (mdt != TOPLU_DTYPE_UNDEFINED && p->dtype != mdt)
    return toplu__errorf(err, TOPLU_ERR_INVALID_ARGUMENT, "preprocess dtype=%s, but input '%s' is %s",
                        toplu_dtype_name(p->dtype), info->name, toplu_dtype_name(mdt));
  if (!pl_dtype_numeric(p->dtype))
    return toplu__errorf(err, TOPLU_ERR_UNSUPPORTED, "input '%s' is %s: images cannot become that", info->name,
                        toplu_dtype_name(p->dtype));
  if (!pl_dtype_float(p->dtype) && (p->has_scale || p->has_mean || p->has_std))
    return toplu__errorf(err, TOPLU_ERR_INVALID_ARGUMENT,
                        "preprocess: scale, mean and std need a float input; input '%s' is %s (raw pixels)",
                        info->name, toplu_dtype_name(p->dtype));
  /* No size given: resize to the model's fixed H and W. */
  if (info->ndim >= 3 && p->resize == PL_RESIZE_NONE && !p->crop_w && !p->pad_multiple && info->dims[hd] > 0 &&
      info->dims[wd] > 0) {
    p->resize = PL_RESIZE_EXACT;
    p->rw = (int)info->dims[wd];
    p->rh = (int)info->dims[hd];
  }
  if (info->ndim >= 3) return check_size(p, info, hd, wd, err);
  return TOPLU_OK;
}

void pl_pre_describe(const pl_pre_t *p, char *buf, size_t size) {
  char rs[64] = "none";
  if (p->resize == PL_RESIZE_EXACT) snprintf(rs, sizeof rs, "%dx%d", p->rw, p->rh);
  else if (p->resize == PL_RESIZE_LETTERBOX) snprintf(rs, sizeof rs, "%dx%d:letterbox", p->rw, p->rh);
  else if (p->resize == PL_RESIZE_SHORT) snprintf(rs, sizeof rs, "%d", p->rshort);
  static const char *colors[] = {"default", "rgb", "bgr", "gray"};
  static const char *layouts[] = {"default", "nchw", "nhwc", "hw"};
  snprintf(buf, size,
           "resize=%s,crop=%dx%d,pad-multiple=%d,pad-value=%.9g,color=%s,layout=%s,dtype=%s,scale=%.17g,"
           "mean=%.9g/%.9g/%.9g,std=%.9g/%.9g/%.9g",
           rs, p->crop_w, p->crop_h, p->pad_multiple, (double)p->pad_value, colors[p->color], layouts[p->layout],
           toplu_dtype_name(p->dtype), p->scale, (double)p->mean[0], (double)p->mean[1], (double)p->mean[2],
           (double)p->std[0], (double)p->std[1], (double)p->std[2]);
  /* decode=full only when given: the checkpoints of jobs with the default decode keep their text (before
   * 2026-12-06 decode was left out, so a resume or merge mixed the two decodes' pixels) */
  size_t n = strlen(buf);
  if (p->decode_full && n < size) snprintf(buf + n, size - n, ",decode=full");
}

void pl_pre_hint(const pl_pre_t *p, int *w, int *h) {
  *w = *h = 0;
  if (p->decode_full) return; /* every JPEG decoded at its full size */
  if (p->resize == PL_RESIZE_EXACT || p->resize == PL_RESIZE_LETTERBOX) {
    *w = p->rw;
    *h = p->rh;
  } else if (p->resize == PL_RESIZE_SHORT) {
    *w = *h = p->rshort;
  }
}

/* ---- image operations on float HWC images ---- */

typedef struct fimg {
  int w, h, c;
  float *px;
} fimg_t;

/* Filter taps for resizing n_in samples to n_out: for output o, taps
 * [first[o], first[o] + count[o]) with weights w[o * max_taps + k]. */
typedef struct taps {
  int *first, *count;
  float *w;
  int max_taps;
} taps_t;

/* Free filter taps. */
static void taps_free(taps_t *t) {
  free(t->first);
  free(t->count);
  free(t->w);
}

/* Triangle (bilinear) filter, widened by the shrink factor so that every
 * input sample contributes when shrinking (antialiasing). */
static int taps_make(int n_in, int n_out, taps_t *t) {
  double scale = (double)n_in / n_out, fs = scale > 1 ? scale : 1.0, support = fs;
  t->max_taps = (int)ceil(support) * 2 + 2;
  t->first = malloc(sizeof(int) * (size_t)n_out);
  t->count = malloc(sizeof(int) * (size_t)n_out);
  t->w = malloc(sizeof(float) * (size_t)n_out * (size_t)t->max_taps);
  double *ws = malloc(sizeof(double) * (size_t)t->max_taps);
  if (!t->first || !t->count || !t->w || !ws) {
    free(ws);
    return -1;
  }
  for (int o = 0; o < n_out; o++) {
    double center = (o + 0.5) * scale;
    int lo = (int)floor(center - support), hi = (int)ceil(center + support);
    if (lo < 0) lo = 0;
    if (hi > n_in) hi = n_in;
    double total = 0;
    int k = 0;
    for (int i = lo; i < hi && k < t->max_taps; i++, k++) {
      double x = fabs((i + 0.5 - center) / fs);
      ws[k] = x < 1 ? 1 - x : 0;
      total += ws[k];
    }
    if (total <= 0) { /* cannot happen for n_out >= 1, but keep a sample */
      int i = (int)center < n_in ? (int)center : n_in - 1;
      lo = i;
      k = 1;
      ws[0] = total = 1;
    }
    t->first[o] = lo;
    t->count[o] = k;
    for (int j = 0; j < k; j++) t->w[(size_t)o * (size_t)t->max_taps + (size_t)j] = (float)(ws[j] / total);
  }
  free(ws);
  return 0;
}

/* Resize src to w x h (separable: rows, then columns); 0 or -1. */
static int resize(const fimg_t *src, int w, int h, fimg_t *dst) {
  int c = src->c;
  taps_t tx = {0}, ty = {0};
  float *tmp = malloc(sizeof(float) * (size_t)src->h * (size_t)w * (size_t)c);
  dst->w = w;
  dst->h = h;
  dst->c = c;
  dst->px = malloc(sizeof(float) * (size_t)h * (size_t)w * (size_t)c);
  int ok = tmp && dst->px && !taps_make(src->w, w, &tx) && !taps_make(src->h, h, &ty);
  if (ok) {
    for (int y = 0; y < src->h; y++) {
      const float *row = src->px + (size_t)y * (size_t)src->w * (size_t)c;
      float *out = tmp + (size_t)y * (size_t)w * (size_t)c;
      for (int x = 0; x < w; x++) {
        const float *wt = tx.w + (size_t)x * (size_t)tx.max_taps;
        for (int ch = 0; ch < c; ch++) {
          float acc = 0;
          for (int k = 0; k < tx.count[x]; k++) acc += wt[k] * row[(size_t)(tx.first[x] + k) * (size_t)c + (size_t)ch];
          out[(size_t)x * (size_t)c + (size_t)ch] = acc;
        }
      }
    }
    size_t stride = (size_t)w * (size_t)c;
    for (int y = 0; y < h; y++) {
      const float *wt = ty.w + (size_t)y * (size_t)ty.max_taps;
      float *out = dst->px + (size_t)y * stride;
      for (size_t i = 0; i < stride; i++) out[i] = 0;
      for (int k = 0; k < ty.count[y]; k++) {
        const float *in = tmp + (size_t)(ty.first[y] + k) * stride;
        float wk = wt[k];
        for (size_t i = 0; i < stride; i++) out[i] += wk * in[i];
      }
    }
  }
  free(tmp);
  taps_free(&tx);
  taps_free(&ty);
  if (!ok) {
    free(dst->px);
    dst->px = NULL;
    return -1;
  }
  return 0;
}

/* A w x h canvas filled with pad, with src placed at (x0, y0) (clipped). */
static int place(const fimg_t *src, int w, int h, int x0, int y0, float pad, fimg_t *dst) {
  int c = src->c;
  dst->w = w;
  dst->h = h;
  dst->c = c;
  dst->px = malloc(sizeof(float) * (size_t)w * (size_t)h * (size_t)c);
  if (!dst->px) return -1;
  for (int y = 0; y < h; y++) {
    int sy = y - y0;
    float *out = dst->px + (size_t)y * (size_t)w * (size_t)c;
    for (int x = 0; x < w; x++) {
      int sx = x - x0;
      int in = sy >= 0 && sy < src->h && sx >= 0 && sx < src->w;
      for (int ch = 0; ch < c; ch++)
        out[(size_t)x * (size_t)c + (size_t)ch] =
            in ? src->px[((size_t)sy * (size_t)src->w + (size_t)sx) * (size_t)c + (size_t)ch] : pad;
    }
  }
  return 0;
}

/* Replace *img by *next (freeing the old pixels). */
static void swap_in(fimg_t *img, fimg_t *next) {
  free(img->px);
  *img = *next;
  next->px = NULL;
}

/* Where a center crop of c starts in n pixels, as torchvision's CenterCrop: int(round((n - c) / 2)), Python's round
 * (half to even: 13.5 -> 14, 12.5 -> 12; it was floored, one pixel off for odd margins, a fresh user's finding of
 * 2026-12-06); an image smaller than c is padded, (c - n) // 2 before it, as torchvision pads. */
static int crop_offset(int n, int c) {
  if (n < c) return -((c - n) / 2);
  int d = n - c, k = d / 2;
  return d % 2 && k % 2 ? k + 1 : k;
}

/* Colour, resize, crop, pad, normalise and lay out one image. */
static int apply_image(const pl_pre_t *p, pl_value_t *v, toplu_tensor_t *out, char *why, size_t why_size) {
  int want_c = p->color == PL_COLOR_GRAY ? 1 : 3;
  fimg_t img = {v->w, v->h, want_c, NULL}, next = {0, 0, 0, NULL};
  size_t npx = (size_t)v->w * (size_t)v->h;
  img.px = malloc(sizeof(float) * npx * (size_t)want_c + 1);
  if (!img.px) goto oom;
  /* Colour: gray <-> RGB (ITU-R 601 luma, as PIL's convert('L')). */
  for (size_t i = 0; i < npx; i++) {
    const uint8_t *s = v->pixels + i * (size_t)v->c;
    float *d = img.px + i * (size_t)want_c;
    if (want_c == v->c) {
      for (int ch = 0; ch < want_c; ch++) d[ch] = s[ch];
    } else if (want_c == 3) {
      d[0] = d[1] = d[2] = s[0];
    } else {
      d[0] = (float)((s[0] * 299 + s[1] * 587 + s[2] * 114 + 500) / 1000);
    }
  }
  pl_value_free(v);
  /* Resize. */
  if (p->resize == PL_RESIZE_EXACT) {
    if ((img.w != p->rw || img.h != p->rh) && resize(&img, p->rw, p->rh, &next)) goto oom;
    if (next.px) swap_in(&img, &next);
  } else if (p->resize == PL_RESIZE_SHORT) {
    /* the longer side as torchvision's Resize(S) takes it, int(S * long / short): truncated (it was rounded: 384
     * where torchvision makes 383, and after crop=224x224 pixels 132 levels apart; a fresh user's finding of
     * 2026-12-06) */
    int shorter = img.w < img.h ? img.w : img.h, longer = img.w < img.h ? img.h : img.w;
    int nl = (int)((double)p->rshort * (double)longer / (double)shorter);
    int nw = img.w < img.h ? p->rshort : nl, nh = img.w < img.h ? nl : p->rshort;
    if (nw < 1) nw = 1;
    if (nh < 1) nh = 1;
    if (p->max_pixels > 0 && (int64_t)nw * nh > p->max_pixels) { /* a 1x200000 image asked 120 GB */
      free(img.px);
      pl_value_free(v);
      snprintf(why, why_size, "resize=%d makes this %dx%d image %dx%d, %lld pixels, above the limit of %lld (max_image_pixels)",
               p->rshort, img.w, img.h, nw, nh, (long long)nw * nh, (long long)p->max_pixels);
      return -1;
    }
    if ((img.w != nw || img.h != nh) && resize(&img, nw, nh, &next)) goto oom;
    if (next.px) swap_in(&img, &next);
  } else if (p->resize == PL_RESIZE_LETTERBOX) {
    double sx = (double)p->rw / img.w, sy = (double)p->rh / img.h, s = sx < sy ? sx : sy;
    int nw = (int)lround(img.w * s), nh = (int)lround(img.h * s);
    if (nw < 1) nw = 1;
    if (nh < 1) nh = 1;
    if (nw > p->rw) nw = p->rw;
    if (nh > p->rh) nh = p->rh;
    if ((img.w != nw || img.h != nh) && resize(&img, nw, nh, &next)) goto oom;
    if (next.px) swap_in(&img, &next);
    if (place(&img, p->rw, p->rh, (p->rw - nw) / 2, (p->rh - nh) / 2, p->pad_value, &next)) goto oom;
    swap_in(&img, &next);
  }
  /* Center crop (padding when the image is smaller). */
  if (p->crop_w && (img.w != p->crop_w || img.h != p->crop_h)) {
    if (place(&img, p->crop_w, p->crop_h, -crop_offset(img.w, p->crop_w), -crop_offset(img.h, p->crop_h), p->pad_value,
              &next))
      goto oom;
    swap_in(&img, &next);
  }
  /* Pad right and bottom to multiples. */
  if (p->pad_multiple > 1) {
    int m = p->pad_multiple, nw = (img.w + m - 1) / m * m, nh = (img.h + m - 1) / m * m;
    if (nw != img.w || nh != img.h) {
      if (place(&img, nw, nh, 0, 0, p->pad_value, &next)) goto oom;
      swap_in(&img, &next);
    }
  }
  /* Values, channel order and layout. */
  int64_t dims[3];
  int nd = 3;
  int C = img.c, H = img.h, W = img.w;
  if (p->layout == PL_LAYOUT_NHWC) {
    dims[0] = H;
    dims[1] = W;
    dims[2] = C;
  } else if (p->layout == PL_LAYOUT_HW) {
    nd = 2;
    dims[0] = H;
    dims[1] = W;
  } else {
    dims[0] = C;
    dims[1] = H;
    dims[2] = W;
  }
  if (pl_pool_tensor(p->pool, out, p->dtype, nd, dims)) goto oom; /* every element written below */
  /* Output channel k takes colour src[k] (RGB order inside). */
  int src_of[3] = {0, 1, 2};
  if (p->color == PL_COLOR_BGR) {
    src_of[0] = 2;
    src_of[2] = 0;
  }
  float mul[3], add[3];
  for (int k = 0; k < C; k++) {
    int col = C == 1 ? 0 : src_of[k];
    mul[k] = (float)(p->scale / p->std[col]);
    add[k] = -p->mean[col] / p->std[col];
  }
  size_t plane = (size_t)H * (size_t)W;
  if (p->dtype == TOPLU_DTYPE_FLOAT) {
    float *o = out->data;
    for (size_t i = 0; i < plane; i++)
      for (int k = 0; k < C; k++) {
        float x = img.px[i * (size_t)C + (size_t)(C == 1 ? 0 : src_of[k])] * mul[k] + add[k];
        if (p->layout == PL_LAYOUT_NHWC) o[i * (size_t)C + (size_t)k] = x;
        else o[(size_t)k * plane + i] = x;
      }
  } else {
    int is_float = pl_dtype_float(p->dtype);
    for (size_t i = 0; i < plane; i++)
      for (int k = 0; k < C; k++) {
        double x = img.px[i * (size_t)C + (size_t)(C == 1 ? 0 : src_of[k])];
        if (is_float) x = x * mul[k] + add[k];
        int64_t idx = p->layout == PL_LAYOUT_NHWC ? (int64_t)(i * (size_t)C + (size_t)k) : (int64_t)((size_t)k * plane + i);
        pl_elem_set(p->dtype, out->data, idx, x);
      }
  }
  free(img.px);
  return 0;
oom:
  free(img.px);
  free(next.px);
  pl_value_free(v);
  snprintf(why, why_size, "out of memory preprocessing a %dx%d image", img.w, img.h);
  return -1;
}

int pl_pre_apply(const pl_pre_t *p, pl_value_t *v, toplu_tensor_t *out, char *why, size_t why_size) {
  memset(out, 0, sizeof *out);
  if (v->kind == PL_VALUE_IMAGE) return apply_image(p, v, out, why, why_size);
  if (v->kind != PL_VALUE_TENSOR) {
    snprintf(why, why_size, "no value");
    return -1;
  }
  *out = v->t;
  v->t.data = NULL;
  pl_value_free(v);
  if (p->has_scale && p->scale != 1.0) {
    int64_t n = toplu_tensor_numel(out);
    for (int64_t i = 0; i < n; i++) {
      double x = pl_elem_get(out->dtype, out->data, i) * p->scale;
      int code = pl_elem_set(out->dtype, out->data, i, x);
      if (code) { /* an integer input scaled out of its range */
        char what[256];
        pl_elem_why(code, i, x, NULL, out->dtype, what, sizeof what);
        snprintf(why, why_size, "scale=%g: %s", p->scale, what);
        toplu_tensor_free(out);
        return -1;
      }
    }
  }
  return 0;
}
