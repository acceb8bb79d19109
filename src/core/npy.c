/*
 * core/npy.c - NumPy .npy files.
 *
 * Follows the format as numpy.lib.format (numpy 1.24) documents and writes it:
 *   "\x93NUMPY" major minor, then the header length (uint16 little-endian for
 *   version 1.0, uint32 for 2.0 and 3.0), then the header: a Python dict
 *   literal {'descr': '<f4', 'fortran_order': False, 'shape': (3, 4), }
 *   padded with spaces and ending in '\n' so that the data starts at a
 *   multiple of 64 bytes, then the raw elements in C order.
 * Reading accepts versions 1.0, 2.0 and 3.0, keys in any order, single or
 * double quotes, any whitespace, with or without trailing commas, and either
 * byte order.  Writing reproduces numpy.save byte for byte (sorted keys, the
 * 21-digit growth padding after the dict, version 1.0 unless the header
 * needs 2.0), little-endian.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "core/checked.h"
#include "core/error.h"
#include "toplu/npy.h"

#define NPY_MAGIC "\x93NUMPY"
#define NPY_MAGIC_LEN 6
#define NPY_ALIGN 64
#define NPY_GROWTH_DIGITS 21        /* numpy's GROWTH_AXIS_MAX_DIGITS */
#define NPY_MAX_HEADER (1u << 20)   /* longer headers are refused as malformed */

/* What a parsed header says. */
typedef struct npy_header {
  toplu_dtype_t dtype;
  int ndim;
  int64_t dims[TOPLU_MAX_DIMS];
  int swap;            /* data byte order differs from the host's */
  long offset;         /* bytes before the data */
  uint64_t data_bytes; /* numel * element size */
} npy_header_t;

/* One dtype as numpy spells it (without the byte-order character). */
typedef struct npy_type {
  const char *code;
  toplu_dtype_t dtype;
} npy_type_t;

static const npy_type_t npy_types[] = {
    {"f4", TOPLU_DTYPE_FLOAT},  {"f2", TOPLU_DTYPE_FLOAT16}, {"f8", TOPLU_DTYPE_DOUBLE},
    {"u1", TOPLU_DTYPE_UINT8},  {"i1", TOPLU_DTYPE_INT8},    {"u2", TOPLU_DTYPE_UINT16},
    {"i2", TOPLU_DTYPE_INT16},  {"u4", TOPLU_DTYPE_UINT32},  {"i4", TOPLU_DTYPE_INT32},
    {"u8", TOPLU_DTYPE_UINT64}, {"i8", TOPLU_DTYPE_INT64},   {"b1", TOPLU_DTYPE_BOOL},
    {"?", TOPLU_DTYPE_BOOL},
};

/* 1 when the host stores integers little-endian. */
static int host_little_endian(void) {
  const uint16_t one = 1;
  unsigned char c;
  memcpy(&c, &one, 1);
  return c == 1;
}

/* numpy's two-letter code for dtype ("f4"), or NULL when numpy has none that toplu writes. */
static const char *npy_code(toplu_dtype_t dtype) {
  for (size_t i = 0; i < sizeof npy_types / sizeof npy_types[0]; i++)
    if (npy_types[i].dtype == dtype) return npy_types[i].code;
  return NULL;
}

/* Reverse the bytes of each of n elements of size es, in place. */
static void swap_bytes(void *data, uint64_t n, size_t es) {
  unsigned char *p = data;
  if (es < 2) return;
  for (uint64_t i = 0; i < n; i++, p += es)
    for (size_t a = 0, b = es - 1; a < b; a++, b--) {
      unsigned char t = p[a];
      p[a] = p[b];
      p[b] = t;
    }
}

/* Thread-safe strerror (the XSI strerror_r that _POSIX_C_SOURCE selects). */
static const char *errno_text(int e, char *buf, size_t size) {
  if (strerror_r(e, buf, size) != 0) snprintf(buf, size, "error %d", e);
  return buf;
}

/* ---- parsing the header dict ---- */

typedef struct dict_parser {
  const char *s;
  size_t n, pos;
  const char *path;
  toplu_error_t *err;
} dict_parser_t;

/* Skip Python whitespace. */
static void skip_ws(dict_parser_t *p) {
  while (p->pos < p->n && (p->s[p->pos] == ' ' || p->s[p->pos] == '\t' || p->s[p->pos] == '\n' ||
                           p->s[p->pos] == '\r' || p->s[p->pos] == '\f' || p->s[p->pos] == '\v'))
    p->pos++;
}

/* A PARSE error that quotes the header and where it went wrong. */
static toplu_status_t syntax_error(dict_parser_t *p, const char *expected) {
  size_t len = p->n;
  while (len && (p->s[len - 1] == ' ' || p->s[len - 1] == '\n')) len--;
  int shown = len > 200 ? 200 : (int)len;
  char found[16];
  if (p->pos >= p->n) snprintf(found, sizeof found, "the end");
  else if ((unsigned char)p->s[p->pos] >= 32 && (unsigned char)p->s[p->pos] < 127)
    snprintf(found, sizeof found, "'%c'", p->s[p->pos]);
  else snprintf(found, sizeof found, "byte 0x%02x", (unsigned char)p->s[p->pos]);
  return toplu__errorf(p->err, TOPLU_ERR_PARSE, "%s: bad .npy header: expected %s at character %zu, found %s (header: %.*s%s)",
                      p->path, expected, p->pos, found, shown, p->s, len > 200 ? "..." : "");
}

/* Consume c (after whitespace) or fail saying what was expected. */
static toplu_status_t expect(dict_parser_t *p, char c, const char *what) {
  skip_ws(p);
  if (p->pos < p->n && p->s[p->pos] == c) {
    p->pos++;
    return TOPLU_OK;
  }
  return syntax_error(p, what);
}

/* A quoted Python string without escapes into buf (NUL-terminated). */
static toplu_status_t parse_string(dict_parser_t *p, char *buf, size_t size, const char *what) {
  skip_ws(p);
  if (p->pos >= p->n || (p->s[p->pos] != '\'' && p->s[p->pos] != '"')) return syntax_error(p, what);
  char q = p->s[p->pos++];
  size_t len = 0;
  while (p->pos < p->n && p->s[p->pos] != q) {
    if (p->s[p->pos] == '\\' || p->s[p->pos] == '\n') return syntax_error(p, "a simple quoted string");
    if (len + 1 < size) buf[len++] = p->s[p->pos];
    p->pos++;
  }
  if (p->pos >= p->n) return syntax_error(p, "a closing quote");
  p->pos++;
  buf[len] = '\0';
  return TOPLU_OK;
}

/* A bare word (True, False). */
static size_t parse_word(dict_parser_t *p, char *buf, size_t size) {
  skip_ws(p);
  size_t len = 0;
  while (p->pos < p->n && ((p->s[p->pos] >= 'A' && p->s[p->pos] <= 'Z') || (p->s[p->pos] >= 'a' && p->s[p->pos] <= 'z'))) {
    if (len + 1 < size) buf[len++] = p->s[p->pos];
    p->pos++;
  }
  buf[len] = '\0';
  return len;
}

/* A non-negative decimal integer (an 'L' suffix, as Python 2 wrote, is allowed). */
static toplu_status_t parse_dim(dict_parser_t *p, int64_t *v) {
  skip_ws(p);
  if (p->pos >= p->n || p->s[p->pos] < '0' || p->s[p->pos] > '9') {
    if (p->pos < p->n && p->s[p->pos] == '-')
      return toplu__errorf(p->err, TOPLU_ERR_PARSE, "%s: bad .npy header: negative dim in 'shape'", p->path);
    return syntax_error(p, "a dim (a non-negative integer)");
  }
  int64_t x = 0;
  while (p->pos < p->n && p->s[p->pos] >= '0' && p->s[p->pos] <= '9') {
    int d = p->s[p->pos++] - '0';
    if (x > (INT64_MAX - d) / 10)
      return toplu__errorf(p->err, TOPLU_ERR_PARSE, "%s: bad .npy header: a dim in 'shape' is too large", p->path);
    x = x * 10 + d;
  }
  if (p->pos < p->n && (p->s[p->pos] == 'L' || p->s[p->pos] == 'l')) p->pos++;
  *v = x;
  return TOPLU_OK;
}

/* The shape tuple: "()", "(3,)", "(3, 4)", "(3, 4,)". */
static toplu_status_t parse_shape(dict_parser_t *p, npy_header_t *h) {
  toplu_status_t st;
  if ((st = expect(p, '(', "'(' starting the shape tuple"))) return st;
  h->ndim = 0;
  for (;;) {
    skip_ws(p);
    if (p->pos < p->n && p->s[p->pos] == ')') {
      p->pos++;
      return TOPLU_OK;
    }
    int64_t d = 0;
    if ((st = parse_dim(p, &d))) return st;
    if (h->ndim == TOPLU_MAX_DIMS)
      return toplu__errorf(p->err, TOPLU_ERR_UNSUPPORTED, "%s: the array has more than %d dims, toplu handles at most %d",
                          p->path, TOPLU_MAX_DIMS, TOPLU_MAX_DIMS);
    h->dims[h->ndim++] = d;
    skip_ws(p);
    if (p->pos < p->n && p->s[p->pos] == ',') {
      p->pos++;
      continue;
    }
    if (p->pos < p->n && p->s[p->pos] == ')') {
      p->pos++;
      return TOPLU_OK;
    }
    return syntax_error(p, "',' or ')' in the shape tuple");
  }
}

/* Turn a descr string ('<f4', '|b1', '>i8') into dtype and byte order. */
static toplu_status_t parse_descr(dict_parser_t *p, const char *descr, npy_header_t *h) {
  const char *code = descr;
  char order = '=';
  if (*code == '<' || *code == '>' || *code == '|' || *code == '=') order = *code++;
  for (size_t i = 0; i < sizeof npy_types / sizeof npy_types[0]; i++)
    if (!strcmp(code, npy_types[i].code)) {
      h->dtype = npy_types[i].dtype;
      int little = host_little_endian();
      h->swap = toplu_dtype_size(h->dtype) > 1 && ((order == '<' && !little) || (order == '>' && little));
      return TOPLU_OK;
    }
  return toplu__errorf(p->err, TOPLU_ERR_UNSUPPORTED,
                      "%s: dtype '%s' is not supported (toplu reads float16, float32, float64, int8, int16, int32, "
                      "int64, uint8, uint16, uint32, uint64 and bool)",
                      p->path, descr);
}

/* Parse the whole header dict into h (dtype, swap, ndim, dims). */
static toplu_status_t parse_dict(const char *s, size_t n, const char *path, npy_header_t *h, toplu_error_t *err) {
  dict_parser_t p = {s, n, 0, path, err};
  int have_descr = 0, have_order = 0, have_shape = 0;
  toplu_status_t st;
  if ((st = expect(&p, '{', "'{' starting the header dict"))) return st;
  for (;;) {
    skip_ws(&p);
    if (p.pos < p.n && p.s[p.pos] == '}') {
      p.pos++;
      break;
    }
    char key[32];
    if ((st = parse_string(&p, key, sizeof key, "a quoted key or '}'"))) return st;
    if ((st = expect(&p, ':', "':' after a key"))) return st;
    if (!strcmp(key, "descr")) {
      skip_ws(&p);
      if (p.pos < p.n && p.s[p.pos] == '[')
        return toplu__errorf(err, TOPLU_ERR_UNSUPPORTED,
                            "%s: the array has a structured dtype (record fields); toplu reads plain numeric arrays",
                            path);
      char descr[32];
      if ((st = parse_string(&p, descr, sizeof descr, "a quoted dtype for 'descr'"))) return st;
      if ((st = parse_descr(&p, descr, h))) return st;
      have_descr++;
    } else if (!strcmp(key, "fortran_order")) {
      char w[8];
      size_t at = p.pos;
      parse_word(&p, w, sizeof w);
      if (!strcmp(w, "True")) {
        return toplu__errorf(err, TOPLU_ERR_UNSUPPORTED,
                            "%s: the array is stored in Fortran order (fortran_order: True); toplu reads C order "
                            "only (save numpy.ascontiguousarray(a) instead)",
                            path);
      } else if (strcmp(w, "False")) {
        p.pos = at;
        skip_ws(&p);
        return syntax_error(&p, "True or False for 'fortran_order'");
      }
      have_order++;
    } else if (!strcmp(key, "shape")) {
      if ((st = parse_shape(&p, h))) return st;
      have_shape++;
    } else {
      return toplu__errorf(err, TOPLU_ERR_PARSE,
                          "%s: bad .npy header: unknown key '%s' (expected 'descr', 'fortran_order' and 'shape')", path,
                          key);
    }
    skip_ws(&p);
    if (p.pos < p.n && p.s[p.pos] == ',') {
      p.pos++;
      continue;
    }
    if (p.pos < p.n && p.s[p.pos] == '}') {
      p.pos++;
      break;
    }
    return syntax_error(&p, "',' or '}' after a value");
  }
  skip_ws(&p);
  if (p.pos < p.n) return syntax_error(&p, "only spaces after the header dict");
  const char *missing = !have_descr ? "descr" : !have_order ? "fortran_order" : !have_shape ? "shape" : NULL;
  if (missing) return toplu__errorf(err, TOPLU_ERR_PARSE, "%s: bad .npy header: no '%s' key", path, missing);
  if (have_descr > 1 || have_order > 1 || have_shape > 1)
    return toplu__errorf(err, TOPLU_ERR_PARSE, "%s: bad .npy header: a key appears twice", path);
  return TOPLU_OK;
}

/* ---- reading ---- */

/* Read and check the magic, version and header of f (at its start) into h. */
static toplu_status_t read_npy_header(FILE *f, const char *path, npy_header_t *h, toplu_error_t *err) {
  unsigned char pre[12];
  memset(h, 0, sizeof *h);
  size_t got = fread(pre, 1, 10, f);
  if (got < 8 || memcmp(pre, NPY_MAGIC, NPY_MAGIC_LEN) != 0) {
    if (ferror(f)) return toplu__errorf(err, TOPLU_ERR_IO, "%s: read error", path);
    return toplu__errorf(err, TOPLU_ERR_PARSE, "%s: not a .npy file (it does not start with \\x93NUMPY)", path);
  }
  unsigned major = pre[6], minor = pre[7];
  if ((major != 1 && major != 2 && major != 3) || minor != 0)
    return toplu__errorf(err, TOPLU_ERR_UNSUPPORTED, "%s: .npy format version %u.%u (toplu reads 1.0, 2.0 and 3.0)",
                        path, major, minor);
  size_t prefix = major == 1 ? 10 : 12;
  if (major > 1 && got == 10) got += fread(pre + 10, 1, 2, f);
  if (got < prefix)
    return toplu__errorf(err, TOPLU_ERR_PARSE, "%s: truncated .npy file: it ends inside the header length", path);
  uint32_t hlen = major == 1 ? (uint32_t)pre[8] | (uint32_t)pre[9] << 8
                             : (uint32_t)pre[8] | (uint32_t)pre[9] << 8 | (uint32_t)pre[10] << 16 | (uint32_t)pre[11] << 24;
  if (hlen > NPY_MAX_HEADER)
    return toplu__errorf(err, TOPLU_ERR_PARSE, "%s: bad .npy header: length %u is implausible (over %u bytes)", path,
                        (unsigned)hlen, (unsigned)NPY_MAX_HEADER);
  char *text = malloc((size_t)hlen + 1);
  if (!text) return toplu__errorf(err, TOPLU_ERR_OUT_OF_MEMORY, "%s: out of memory reading the header", path);
  size_t hgot = fread(text, 1, hlen, f);
  if (hgot < hlen) {
    free(text);
    if (ferror(f)) return toplu__errorf(err, TOPLU_ERR_IO, "%s: read error", path);
    return toplu__errorf(err, TOPLU_ERR_PARSE,
                        "%s: truncated .npy file: the header should be %u bytes but the file ends after %zu", path,
                        (unsigned)hlen, hgot);
  }
  text[hlen] = '\0';
  toplu_status_t st = parse_dict(text, hlen, path, h, err);
  free(text);
  if (st) return st;
  /* core/checked.h: the non-zero dims must multiply to at most
   * TOPLU_MAX_ELEMENTS even when another dim is 0 (a (2, 2^63-1, 0) array
   * holds no data, but its dims wrap int64 as soon as anything multiplies
   * them, as the session and the kernels do). */
  int64_t n;
  size_t bytes;
  if (!toplu__shape_numel(h->ndim, h->dims, &n)) {
    char shape[256];
    return toplu__errorf(err, TOPLU_ERR_PARSE,
                        "%s: bad .npy header: the shape's element count overflows: %s has more than "
                        TOPLU_MAX_ELEMENTS_TEXT " elements (counting only its non-zero dims)",
                        path, toplu_shape_format(h->ndim, h->dims, shape, sizeof shape));
  }
  if (!toplu__bytes(n, toplu_dtype_size(h->dtype), &bytes))
    return toplu__errorf(err, TOPLU_ERR_PARSE, "%s: bad .npy header: the array would take more than the address space",
                        path);
  h->data_bytes = bytes;
  h->offset = (long)(prefix + hlen);
  return TOPLU_OK;
}

/* Describe h ("float32 [7, 3]") into buf. */
static const char *describe(const npy_header_t *h, char *buf, size_t size) {
  char shape[256];
  snprintf(buf, size, "%s %s", toplu_dtype_name(h->dtype), toplu_shape_format(h->ndim, h->dims, shape, sizeof shape));
  return buf;
}

/* For a regular file: check that exactly data_bytes follow the header. */
static toplu_status_t check_length(FILE *f, const char *path, const npy_header_t *h, toplu_error_t *err) {
  struct stat sb;
  if (fstat(fileno(f), &sb) != 0 || !S_ISREG(sb.st_mode)) return TOPLU_OK; /* checked while reading */
  uint64_t have = (uint64_t)sb.st_size > (uint64_t)h->offset ? (uint64_t)sb.st_size - (uint64_t)h->offset : 0;
  char what[300];
  if (have < h->data_bytes)
    return toplu__errorf(err, TOPLU_ERR_PARSE,
                        "%s: truncated .npy file: the header describes %s (%llu bytes of data) but only %llu bytes "
                        "follow the %ld-byte header: %llu bytes missing",
                        path, describe(h, what, sizeof what), (unsigned long long)h->data_bytes,
                        (unsigned long long)have, h->offset, (unsigned long long)(h->data_bytes - have));
  if (have > h->data_bytes)
    return toplu__errorf(err, TOPLU_ERR_PARSE,
                        "%s: bad .npy file: the header describes %s (%llu bytes of data) but %llu bytes follow the "
                        "header: %llu bytes too many",
                        path, describe(h, what, sizeof what), (unsigned long long)h->data_bytes,
                        (unsigned long long)have, (unsigned long long)(have - h->data_bytes));
  return TOPLU_OK;
}

/* Open path and read its header, checking the data length; *f stays open on success. */
static toplu_status_t open_npy(const char *path, FILE **f, npy_header_t *h, toplu_error_t *err) {
  *f = fopen(path, "rb");
  if (!*f) {
    char eb[128];
    return toplu__errorf(err, TOPLU_ERR_IO, "%s: cannot open: %s", path, errno_text(errno, eb, sizeof eb));
  }
  struct stat sb;
  if (fstat(fileno(*f), &sb) == 0 && S_ISDIR(sb.st_mode)) {
    fclose(*f);
    *f = NULL;
    return toplu__errorf(err, TOPLU_ERR_IO, "%s: is a directory, not a .npy file", path);
  }
  toplu_status_t st = read_npy_header(*f, path, h, err);
  if (!st) st = check_length(*f, path, h, err);
  if (st) {
    fclose(*f);
    *f = NULL;
  }
  return st;
}

/* Fill t's dtype and shape from h. */
static void header_to_tensor(const npy_header_t *h, toplu_tensor_t *t) {
  t->dtype = h->dtype;
  t->ndim = h->ndim;
  memset(t->dims, 0, sizeof t->dims);
  memcpy(t->dims, h->dims, (size_t)h->ndim * sizeof h->dims[0]);
  t->data = NULL;
}

/* Read bytes of data into dst, reporting a short file as truncation; then fix byte order and bools. */
static toplu_status_t read_data(FILE *f, const char *path, const npy_header_t *h, void *dst, uint64_t bytes,
                                uint64_t skip, toplu_error_t *err) {
  if (skip && fseeko(f, (off_t)h->offset + (off_t)skip, SEEK_SET) != 0) {
    char eb[128];
    return toplu__errorf(err, TOPLU_ERR_IO, "%s: cannot seek: %s", path, errno_text(errno, eb, sizeof eb));
  }
  size_t got = bytes ? fread(dst, 1, (size_t)bytes, f) : 0;
  if (got < bytes) {
    if (ferror(f)) return toplu__errorf(err, TOPLU_ERR_IO, "%s: read error", path);
    char what[300];
    uint64_t have = skip + got;
    return toplu__errorf(err, TOPLU_ERR_PARSE,
                        "%s: truncated .npy file: the header describes %s (%llu bytes of data) but only %llu bytes "
                        "follow the %ld-byte header: %llu bytes missing",
                        path, describe(h, what, sizeof what), (unsigned long long)h->data_bytes,
                        (unsigned long long)have, h->offset, (unsigned long long)(h->data_bytes - have));
  }
  size_t es = toplu_dtype_size(h->dtype);
  if (h->swap) swap_bytes(dst, bytes / es, es);
  if (h->dtype == TOPLU_DTYPE_BOOL) {
    unsigned char *b = dst;
    for (uint64_t i = 0; i < bytes; i++) b[i] = b[i] != 0;
  }
  return TOPLU_OK;
}

toplu_status_t toplu_npy_read_header(const char *path, toplu_tensor_t *t, long *data_offset, toplu_error_t *err) {
  toplu_error_clear(err);
  if (!path || !t) return toplu__errorf(err, TOPLU_ERR_INVALID_ARGUMENT, "toplu_npy_read_header: NULL argument");
  FILE *f;
  npy_header_t h;
  t->data = NULL;
  toplu_status_t st = open_npy(path, &f, &h, err);
  if (st) return st;
  fclose(f);
  header_to_tensor(&h, t);
  if (data_offset) *data_offset = h.offset;
  return TOPLU_OK;
}

toplu_status_t toplu_npy_read(const char *path, toplu_tensor_t *t, toplu_error_t *err) {
  toplu_error_clear(err);
  if (!path || !t) return toplu__errorf(err, TOPLU_ERR_INVALID_ARGUMENT, "toplu_npy_read: NULL argument");
  FILE *f;
  npy_header_t h;
  t->data = NULL;
  toplu_status_t st = open_npy(path, &f, &h, err);
  if (st) return st;
  toplu_tensor_t tmp;
  memset(&tmp, 0, sizeof tmp);
  if (toplu_tensor_alloc(&tmp, h.dtype, h.ndim, h.dims)) {
    fclose(f);
    return toplu__errorf(err, TOPLU_ERR_OUT_OF_MEMORY, "%s: out of memory for %llu bytes of data", path,
                        (unsigned long long)h.data_bytes);
  }
  st = read_data(f, path, &h, tmp.data, h.data_bytes, 0, err);
  if (!st && fgetc(f) != EOF)
    st = toplu__errorf(err, TOPLU_ERR_PARSE, "%s: bad .npy file: there are bytes after the data the header describes",
                      path);
  fclose(f);
  if (st) {
    toplu_tensor_free(&tmp);
    return st;
  }
  *t = tmp;
  return TOPLU_OK;
}

toplu_status_t toplu_npy_read_rows(const char *path, int64_t first, int64_t count, void *dst, size_t dst_size,
                                   toplu_error_t *err) {
  toplu_error_clear(err);
  if (!path || (!dst && count > 0))
    return toplu__errorf(err, TOPLU_ERR_INVALID_ARGUMENT, "toplu_npy_read_rows: NULL argument");
  FILE *f;
  npy_header_t h;
  toplu_status_t st = open_npy(path, &f, &h, err);
  if (st) return st;
  if (h.ndim < 1) {
    fclose(f);
    return toplu__errorf(err, TOPLU_ERR_INVALID_ARGUMENT, "%s: the array is a scalar; it has no rows to read", path);
  }
  if (first < 0 || count < 0 || first > h.dims[0] || count > h.dims[0] - first) {
    fclose(f);
    return toplu__errorf(err, TOPLU_ERR_INVALID_ARGUMENT, "%s: %lld rows from row %lld asked for, the array has %lld",
                        path, (long long)count, (long long)first, (long long)h.dims[0]); /* (first + count may overflow) */
  }
  uint64_t row = h.dims[0] ? h.data_bytes / (uint64_t)h.dims[0] : 0;
  uint64_t bytes = row * (uint64_t)count;
  if (bytes > dst_size) {
    fclose(f);
    return toplu__errorf(err, TOPLU_ERR_INVALID_ARGUMENT, "%s: %lld rows take %llu bytes, the buffer holds %zu", path,
                        (long long)count, (unsigned long long)bytes, dst_size);
  }
  st = read_data(f, path, &h, dst, bytes, row * (uint64_t)first, err);
  fclose(f);
  return st;
}

/* ---- writing ---- */

/* Build numpy's header for dtype/shape into buf; returns its length (prefix included) or 0 on bad input. */
static size_t build_header(toplu_dtype_t dtype, int ndim, const int64_t *dims, char *buf, size_t size) {
  const char *code = npy_code(dtype);
  char dict[512];
  size_t len = (size_t)snprintf(dict, sizeof dict, "{'descr': '%c%s', 'fortran_order': False, 'shape': (",
                                toplu_dtype_size(dtype) == 1 ? '|' : '<', code);
  for (int i = 0; i < ndim; i++)
    len += (size_t)snprintf(dict + len, sizeof dict - len, i ? ", %lld" : "%lld", (long long)dims[i]);
  len += (size_t)snprintf(dict + len, sizeof dict - len, "%s), }", ndim == 1 ? "," : "");
  if (ndim > 0) { /* numpy's room for growing dim 0 in place */
    char d0[32];
    int digits = snprintf(d0, sizeof d0, "%lld", (long long)dims[0]);
    for (int i = digits; i < NPY_GROWTH_DIGITS; i++) dict[len++] = ' ';
  }
  size_t hlen = len + 1; /* the final '\n' */
  size_t prefix = 10;
  size_t pad = NPY_ALIGN - (prefix + hlen) % NPY_ALIGN;
  if (hlen + pad > 65535) {
    prefix = 12;
    pad = NPY_ALIGN - (prefix + hlen) % NPY_ALIGN;
  }
  size_t total = prefix + hlen + pad;
  if (total > size) return 0;
  uint32_t stored = (uint32_t)(hlen + pad);
  memcpy(buf, NPY_MAGIC, NPY_MAGIC_LEN);
  buf[6] = prefix == 10 ? 1 : 2;
  buf[7] = 0;
  buf[8] = (char)(stored & 0xff);
  buf[9] = (char)((stored >> 8) & 0xff);
  if (prefix == 12) {
    buf[10] = (char)((stored >> 16) & 0xff);
    buf[11] = (char)((stored >> 24) & 0xff);
  }
  memcpy(buf + prefix, dict, len);
  memset(buf + prefix + len, ' ', pad);
  buf[total - 1] = '\n';
  return total;
}

/* Check that dtype and shape can be written. */
static toplu_status_t check_writable(toplu_dtype_t dtype, int ndim, const int64_t *dims, const char *what,
                                     toplu_error_t *err) {
  if (!npy_code(dtype))
    return toplu__errorf(err, TOPLU_ERR_UNSUPPORTED, "%s: cannot write dtype %s to .npy", what,
                        toplu_dtype_name(dtype));
  if (ndim < 0 || ndim > TOPLU_MAX_DIMS || (ndim && !dims))
    return toplu__errorf(err, TOPLU_ERR_INVALID_ARGUMENT, "%s: bad rank %d", what, ndim);
  for (int i = 0; i < ndim; i++)
    if (dims[i] < 0) return toplu__errorf(err, TOPLU_ERR_INVALID_ARGUMENT, "%s: dim %d is negative", what, i);
  return TOPLU_OK;
}

toplu_status_t toplu_npy_write_header(FILE *f, toplu_dtype_t dtype, int ndim, const int64_t *dims,
                                      toplu_error_t *err) {
  toplu_error_clear(err);
  if (!f) return toplu__errorf(err, TOPLU_ERR_INVALID_ARGUMENT, "toplu_npy_write_header: NULL file");
  toplu_status_t st = check_writable(dtype, ndim, dims, "toplu_npy_write_header", err);
  if (st) return st;
  char buf[1024];
  size_t n = build_header(dtype, ndim, dims, buf, sizeof buf);
  if (!n) return toplu__errorf(err, TOPLU_ERR_INTERNAL, "toplu_npy_write_header: header does not fit");
  if (fwrite(buf, 1, n, f) != n) {
    char eb[128];
    return toplu__errorf(err, TOPLU_ERR_IO, "cannot write a .npy header: %s", errno_text(errno, eb, sizeof eb));
  }
  return TOPLU_OK;
}

/* Write n elements of size es little-endian (swapping through a small buffer on big-endian hosts). */
static int write_le(FILE *f, const void *data, size_t n, size_t es) {
  if (es < 2 || host_little_endian()) return fwrite(data, es, n, f) == n;
  unsigned char tmp[4096];
  const unsigned char *p = data;
  size_t per = sizeof tmp / es;
  while (n) {
    size_t k = n < per ? n : per;
    memcpy(tmp, p, k * es);
    swap_bytes(tmp, k, es);
    if (fwrite(tmp, es, k, f) != k) return 0;
    p += k * es;
    n -= k;
  }
  return 1;
}

toplu_status_t toplu_npy_write(const char *path, const toplu_tensor_t *t, toplu_error_t *err) {
  toplu_error_clear(err);
  if (!path || !t) return toplu__errorf(err, TOPLU_ERR_INVALID_ARGUMENT, "toplu_npy_write: NULL argument");
  toplu_status_t st = check_writable(t->dtype, t->ndim, t->dims, path, err);
  if (st) return st;
  size_t numel = (size_t)toplu_tensor_numel(t), es = toplu_dtype_size(t->dtype);
  if (numel && !t->data) return toplu__errorf(err, TOPLU_ERR_INVALID_ARGUMENT, "%s: the tensor has no data", path);
  FILE *f = fopen(path, "wb");
  char eb[128];
  if (!f) return toplu__errorf(err, TOPLU_ERR_IO, "%s: cannot create: %s", path, errno_text(errno, eb, sizeof eb));
  int ok = toplu_npy_write_header(f, t->dtype, t->ndim, t->dims, NULL) == TOPLU_OK &&
           (!numel || write_le(f, t->data, numel, es));
  int saved = errno;
  if (fclose(f) != 0 && ok) {
    ok = 0;
    saved = errno;
  }
  if (ok) return TOPLU_OK;
  remove(path);
  return toplu__errorf(err, TOPLU_ERR_IO, "%s: write error: %s", path, errno_text(saved, eb, sizeof eb));
}

void toplu_npy_file_stem(const char *name, char *buf, size_t size) {
  size_t n = 0;
  if (!size || !buf) return;
  for (const char *p = name ? name : ""; *p && n + 1 < size; p++) {
    char c = *p;
    int ok = (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '.' || c == '_' ||
             c == '-';
    buf[n++] = ok ? c : '_';
  }
  buf[n] = '\0';
}
