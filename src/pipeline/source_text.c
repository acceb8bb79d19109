/*
 * pipeline/source_text.c - CSV and JSONL sources.
 *
 * Both index the offsets of their non-blank lines when opened (a UTF-8 byte
 * order mark at the start is skipped) and read a row with pread, so any
 * thread reads any row.  A line longer than s->max_line bytes is a bad row,
 * never read into memory (the first line of the file: an error of the
 * source).  Row k is the (k+1)-th non-blank line (after a CSV
 * header); messages name the line's number in the file.
 *   CSV:   a line is one input row flattened (C order), decimal numbers
 *          (optional sign, digits, '.', exponent; nan, inf, infinity in any
 *          case) separated by the delimiter: csv_delim, or the one of ',', ';'
 *          and tab that the first line holds most of (',' on a tie; a note
 *          names any other).  Blanks and double quotes around a field are
 *          allowed.  A field that is empty or not a decimal number ("0x10")
 *          makes the row bad.  Lines end at LF, CR LF or CR.  The first line is
 *          a header (skipped) by csv_header: auto when every field is a name
 *          (non-empty, not a number) or the line is exactly the column
 *          indices 0,1,...,n-1 (pandas' header; a note says so), yes, or no.
 *          The row shape is the model input's (its dims after the batch dim;
 *          one unknown dim is taken from the number of columns).
 *   JSONL: a line is one object; each model input the source feeds is a
 *          key whose value is a (nested) array for one row, or a number for
 *          a row of rank 0.  Rows may differ in shape where the model allows.
 *          A one-input source whose first object lacks the input's name but
 *          has exactly one key whose value fits reads that key on every line.
 */
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/error.h"
#include "pipeline/files.h"
#include "pipeline/source.h"

typedef struct text_src {
  int fd;
  int64_t *offs, *lens, *lines, n; /* the non-blank lines: offset, length, line number */
  int64_t skip;                   /* header lines skipped (CSV) */
  int row_ndim;                   /* CSV: the row shape */
  int64_t row_dims[TOPLU_MAX_DIMS];
  int64_t row_elems;
  char delim;                     /* CSV: the field delimiter used */
} text_src_t;

/* The 1-based line number in the file of row i (after the skipped lines). */
/* jansson's message about one line, in line words: each line is parsed alone, so its "end of file" is the end of
 * the line (a fresh user read "line 8: ']' expected near end of file" as the file's end). */
static const char *line_json_error(const json_error_t *je, char *buf, size_t size) {
  const char *t = je->text, *eof = strstr(t, "end of file");
  if (!eof) return t;
  snprintf(buf, size, "%.*send of the line%s", (int)(eof - t), t, eof + strlen("end of file"));
  return buf;
}

static int64_t line_of(const pl_source_t *s, int64_t i) {
  const text_src_t *t = s->impl;
  return t->lines[i + t->skip];
}

/* Read line i (after the skipped ones) into a malloc'ed NUL-terminated
 * buffer; NULL with why on failure, *too_long set when the line is above
 * s->max_line (a bad row; other failures are the source's). */
static char *read_line(const pl_source_t *s, int64_t i, int *too_long, char *why, size_t why_size) {
  const text_src_t *t = s->impl;
  int64_t k = i + t->skip;
  *too_long = t->lens[k] > s->max_line;
  if (*too_long) {
    snprintf(why, why_size, "line %lld: %lld bytes, above the line limit of %lld bytes (max_line_bytes)",
             (long long)t->lines[k], (long long)t->lens[k], (long long)s->max_line);
    return NULL;
  }
  size_t n = (size_t)t->lens[k];
  char *buf = malloc(n + 1);
  if (!buf) {
    snprintf(why, why_size, "%s: out of memory for line %lld (%zu bytes)", s->path, (long long)t->lines[k], n + 1);
    return NULL;
  }
  size_t got = 0;
  while (got < n) {
    ssize_t r = pread(t->fd, buf + got, n - got, (off_t)(t->offs[k] + (int64_t)got));
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) {
      snprintf(why, why_size, "%s: cannot read line %lld: %s", s->path, (long long)t->lines[k],
               r < 0 ? strerror(errno) : "the file is shorter than when it was opened");
      free(buf);
      return NULL;
    }
    got += (size_t)r;
  }
  buf[n] = '\0';
  return buf;
}

/* read_line for opening into *line: a line too long is an error of the source naming the file. */
static toplu_status_t open_line(const pl_source_t *s, int64_t i, char **line, toplu_error_t *err) {
  char why[512];
  int too_long;
  *line = read_line(s, i, &too_long, why, sizeof why);
  if (*line) return TOPLU_OK;
  if (too_long) return toplu__errorf(err, TOPLU_ERR_INVALID_ARGUMENT, "%s: %s", s->path, why);
  return toplu__errorf(err, TOPLU_ERR_IO, "%s", why);
}

/* Close the file and free the index. */
static void text_destroy(pl_source_t *s) {
  text_src_t *t = s->impl;
  if (!t) return;
  if (t->fd >= 0) close(t->fd);
  free(t->offs);
  free(t->lens);
  free(t->lines);
  free(t);
  s->impl = NULL;
}

/* Ids are row numbers. */
static const char *text_id(const pl_source_t *s, int64_t row) {
  (void)s;
  (void)row;
  return NULL;
}

/* Open the file and index its lines. */
static toplu_status_t text_open(pl_source_t *s, toplu_error_t *err) {
  text_src_t *t = calloc(1, sizeof *t);
  if (!t) return toplu__errorf(err, TOPLU_ERR_OUT_OF_MEMORY, "out of memory for the source %s", s->path);
  t->fd = -1;
  s->impl = t;
  toplu_status_t st = pl_index_lines(s->path, &t->offs, &t->lens, &t->lines, &t->n, err);
  if (st) return st;
  return pl_open_regular(s->path, &t->fd, NULL, err);
}

/* ---- CSV ---- */

/* What a CSV field holds. */
enum { CSV_NUMBER, CSV_EMPTY, CSV_TEXT };

/* The fields of one line: their count, how many are names (text), and the first that is not a number. */
typedef struct csv_scan {
  int64_t n, n_text, bad; /* bad: index of the first field that is not a number, -1 for none */
  int bad_kind;           /* CSV_EMPTY or CSV_TEXT */
  char bad_text[48];      /* the start of that field, for the message */
} csv_scan_t;

/* 1 and *v when [b, e) is a decimal number: [+-] digits [. digits] [(e|E) [+-] digits] (at least one digit
 * before the exponent), or nan, inf, infinity in any case.  Hex, "1_000", "1,5" and the empty string are not. */
static int csv_number(const char *b, const char *e, pl_num_t *v) {
  char buf[512];
  size_t n = (size_t)(e - b);
  if (n == 0 || n >= sizeof buf) return 0;
  memcpy(buf, b, n);
  buf[n] = '\0';
  const char *p = buf;
  if (*p == '+' || *p == '-') p++;
  static const char *const words[] = {"nan", "inf", "infinity"};
  for (int w = 0; w < 3; w++) {
    size_t k = 0;
    while (words[w][k] && (p[k] | 0x20) == words[w][k]) k++;
    if (!words[w][k] && !p[k]) {
      v->d = strtod(buf, NULL);
      v->exact = 0;
      return 1;
    }
  }
  int digits = 0;
  while (*p >= '0' && *p <= '9') p++, digits++;
  if (digits && !*p) { /* an integer literal: also exactly */
    v->d = strtod(buf, NULL);
    errno = 0;
    long long ll = strtoll(buf, NULL, 10);
    if (errno != ERANGE) {
      v->i = ll;
      v->exact = 1;
      return 1;
    }
    errno = 0;
    unsigned long long ull = buf[0] == '-' ? 0 : strtoull(buf, NULL, 10);
    v->exact = buf[0] != '-' && errno != ERANGE ? 3 : 2;
    v->i = (int64_t)ull;
    return 1;
  }
  if (*p == '.')
    for (p++; *p >= '0' && *p <= '9'; p++) digits++;
  if (!digits) return 0;
  if (*p == 'e' || *p == 'E') {
    p++;
    if (*p == '+' || *p == '-') p++;
    int x = 0;
    while (*p >= '0' && *p <= '9') p++, x++;
    if (!x) return 0;
  }
  if (*p) return 0;
  v->d = strtod(buf, NULL);
  v->exact = 0;
  return 1;
}

/* Split a CSV line at delim (not inside double quotes); the numbers into vals (up to cap). */
static void csv_fields(const char *line, char delim, pl_num_t *vals, int64_t cap, csv_scan_t *sc) {
  memset(sc, 0, sizeof *sc);
  sc->bad = -1;
  const char *p = line;
  for (;;) {
    while (*p == ' ' || (*p == '\t' && delim != '\t')) p++;
    const char *b, *e;
    int kind = -1;
    if (*p == '"') {
      b = ++p;
      while (*p && *p != '"') p++;
      e = p;
      if (*p == '"') p++;
      else kind = CSV_TEXT; /* no closing quote */
      while (*p == ' ' || (*p == '\t' && delim != '\t')) p++;
      if (*p && *p != delim) { /* text after the closing quote */
        kind = CSV_TEXT;
        while (*p && *p != delim) p++;
      }
    } else {
      b = p;
      while (*p && *p != delim) p++;
      e = p;
      while (e > b && (e[-1] == ' ' || (e[-1] == '\t' && delim != '\t'))) e--;
    }
    pl_num_t v = {0, 0, 0};
    if (kind < 0) kind = b == e ? CSV_EMPTY : csv_number(b, e, &v) ? CSV_NUMBER : CSV_TEXT;
    if (kind == CSV_TEXT) sc->n_text++;
    if (kind != CSV_NUMBER && sc->bad < 0) {
      sc->bad = sc->n;
      sc->bad_kind = kind;
      snprintf(sc->bad_text, sizeof sc->bad_text, "%.*s%s", (int)(e - b > 40 ? 40 : e - b), b, e - b > 40 ? "..." : "");
    }
    if (kind == CSV_NUMBER && sc->n < cap) vals[sc->n] = v;
    sc->n++;
    if (*p != delim) return;
    p++;
  }
}

/* Why field sc->bad is not a number, counting fields from 1 as the messages always have: "field 2 is empty",
 * "field 1 ('0x10') is not a decimal number". */
static void csv_bad_field(const csv_scan_t *sc, char *why, size_t size) {
  if (sc->bad_kind == CSV_EMPTY) snprintf(why, size, "field %lld is empty", (long long)sc->bad + 1);
  else snprintf(why, size, "field %lld ('%s') is not a decimal number", (long long)sc->bad + 1, sc->bad_text);
}

/* Parse CSV lines into rows of the input's shape. */
static toplu_status_t csv_read(pl_source_t *s, int64_t first, int64_t count, pl_value_t *vals, char **row_err,
                               toplu_error_t *err) {
  text_src_t *t = s->impl;
  toplu_dtype_t dt = s->field_info[0]->dtype == TOPLU_DTYPE_UNDEFINED ? TOPLU_DTYPE_FLOAT : s->field_info[0]->dtype;
  pl_num_t *tmp = malloc(sizeof(pl_num_t) * (size_t)(t->row_elems + 1));
  if (!tmp)
    return toplu__errorf(err, TOPLU_ERR_OUT_OF_MEMORY, "%s: out of memory for a row of %lld values", s->path,
                        (long long)t->row_elems);
  for (int64_t r = 0; r < count; r++) {
    char why[512];
    int too_long;
    char *line = read_line(s, first + r, &too_long, why, sizeof why);
    if (!line && too_long) {
      row_err[r] = strdup(why);
      continue;
    }
    if (!line) {
      free(tmp);
      return toplu__errorf(err, TOPLU_ERR_IO, "%s", why);
    }
    csv_scan_t sc;
    csv_fields(line, t->delim, tmp, t->row_elems, &sc);
    free(line);
    int64_t n = sc.n;
    if (sc.bad >= 0) {
      char what[128];
      csv_bad_field(&sc, what, sizeof what);
      snprintf(why, sizeof why, "line %lld: %s", (long long)line_of(s, first + r), what);
    } else if (n != t->row_elems) {
      char sh[128];
      const toplu_value_info_t *fi = s->field_info[0];
      int free_dims = fi->ndim < 0;
      for (int d = 1; d < fi->ndim; d++) free_dims |= fi->dims[d] < 0;
      snprintf(why, sizeof why, "line %lld: %lld field%s, input '%s' takes %lld per row (%s)%s",
               (long long)line_of(s, first + r), (long long)n, n == 1 ? "" : "s", fi->name, (long long)t->row_elems,
               toplu_shape_format(t->row_ndim, t->row_dims, sh, sizeof sh),
               free_dims ? ": the model leaves that shape free, and the file's first row fixed it for every line "
                           "(one CSV file holds rows of one shape)"
                         : "");
    } else {
      pl_value_t *v = &vals[r];
      v->kind = PL_VALUE_TENSOR;
      if (toplu_tensor_alloc(&v->t, dt, t->row_ndim, t->row_dims)) {
        free(tmp);
        return toplu__errorf(err, TOPLU_ERR_OUT_OF_MEMORY, "%s: out of memory for the row of line %lld", s->path,
                            (long long)line_of(s, first + r));
      }
      int code = 0;
      int64_t i = 0;
      for (; i < n && !code; i++) code = pl_elem_set_num(dt, v->t.data, i, &tmp[i]);
      if (!code) continue;
      char what[256];
      pl_elem_why(code, i - 1, tmp[i - 1].d, s->field_info[0]->name, dt, what, sizeof what);
      snprintf(why, sizeof why, "line %lld: %s", (long long)line_of(s, first + r), what);
      pl_value_free(v);
    }
    row_err[r] = strdup(why);
  }
  free(tmp);
  return TOPLU_OK;
}

static const pl_source_ops_t csv_ops = {"csv", csv_read, text_id, text_destroy};

/* The delimiter of a CSV file from its first line: the one of ',', ';' and tab it holds most of outside double
 * quotes (',' on a tie, and for a line of one field). */
static char csv_detect(const char *line) {
  int64_t c[3] = {0, 0, 0};
  int q = 0;
  for (const char *p = line; *p; p++) {
    if (*p == '"') q = !q;
    else if (!q) c[0] += *p == ',', c[1] += *p == ';', c[2] += *p == '\t';
  }
  return c[1] > c[0] && c[1] >= c[2] ? ';' : c[2] > c[0] && c[2] > c[1] ? '\t' : ',';
}

/* 1 when the line is exactly the column indices 0,1,...,n-1 (n >= 2), as
 * pandas writes the header of a frame with default column names. */
static int csv_index_header(const char *line, char delim) {
  int64_t want = 0;
  const char *p = line;
  for (;;) {
    while (*p == ' ' || (*p == '\t' && delim != '\t')) p++;
    int quoted = *p == '"';
    if (quoted) p++;
    const char *d = p;
    while (*p >= '0' && *p <= '9') p++;
    if (p == d || (p - d > 1 && *d == '0')) return 0;
    char *e;
    long long v = strtoll(d, &e, 10);
    if (e != p || v != want) return 0;
    want++;
    if (quoted && *p++ != '"') return 0;
    while (*p == ' ' || (*p == '\t' && delim != '\t')) p++;
    if (*p == delim) {
      p++;
      continue;
    }
    return *p == '\0' && want >= 2;
  }
}

toplu_status_t pl_source_csv_open(pl_source_t *s, toplu_error_t *err) {
  s->ops = &csv_ops;
  toplu_status_t st = text_open(s, err);
  if (st) return st;
  text_src_t *t = s->impl;
  const toplu_value_info_t *info = s->field_info[0];
  if (t->n == 0) return toplu__errorf(err, TOPLU_ERR_INVALID_ARGUMENT, "%s: no rows (the file is empty or blank)", s->path);
  /* The delimiter, a header?  (auto: a first line whose every field is a
   * name, or the column indices 0,1,...,n-1.)  And the number of columns. */
  char *line;
  if ((st = open_line(s, 0, &line, err))) return st;
  int detected = !s->csv_delim;
  t->delim = detected ? csv_detect(line) : s->csv_delim;
  s->csv_delim = t->delim;
  csv_scan_t sc;
  csv_fields(line, t->delim, NULL, 0, &sc);
  int header = s->csv_header == PL_CSV_HEADER_YES;
  if (s->csv_header == PL_CSV_HEADER_AUTO) {
    header = sc.n_text == sc.n;
    if (!header && csv_index_header(line, t->delim)) {
      header = 1;
      s->note_warning = 1; /* a row of data 0,1,2,... would be lost: said even under quiet */
      snprintf(s->note, sizeof s->note,
               "%s: line %lld (\"%.40s%s\") is the column indices 0..%lld, read as a header; set csv_header=no if "
               "it is a row of data",
               s->path, (long long)t->lines[0], line, strlen(line) > 40 ? "..." : "", (long long)sc.n - 1);
    }
  }
  free(line);
  int64_t cols = sc.n;
  if (header) {
    t->skip = 1;
    if (t->n < 2) return toplu__errorf(err, TOPLU_ERR_INVALID_ARGUMENT, "%s: only a header, no rows", s->path);
    if ((st = open_line(s, 0, &line, err))) return st;
    csv_fields(line, t->delim, NULL, 0, &sc);
    free(line);
    if (sc.bad >= 0) {
      char what[128];
      csv_bad_field(&sc, what, sizeof what);
      return toplu__errorf(err, TOPLU_ERR_PARSE, "%s: line %lld: %s (line %lld was taken as a header%s)", s->path,
                          (long long)t->lines[1], what, (long long)t->lines[0],
                          s->csv_header == PL_CSV_HEADER_YES ? ", as csv_header=yes says" : "");
    }
    cols = sc.n;
  }
  if (t->delim != ',') {
    size_t nl = strlen(s->note);
    snprintf(s->note + nl, sizeof s->note - nl, "%s%s: fields separated by %s%s", nl ? "; " : "", s->path,
             t->delim == ';' ? "';'" : t->delim == '\t' ? "tabs" : "the csv_delimiter",
             detected ? " (detected from line 1; set csv_delimiter to choose)" : "");
  }
  if (info->ndim < 1)
    return toplu__errorf(err, TOPLU_ERR_SHAPE, "%s: input '%s' has no batch dim to read rows into", s->path, info->name);
  int64_t known = 1;
  int unknown = -1;
  t->row_ndim = info->ndim - 1;
  for (int d = 1; d < info->ndim; d++) {
    t->row_dims[d - 1] = info->dims[d];
    if (info->dims[d] >= 0) known *= info->dims[d];
    else if (unknown < 0) unknown = d - 1;
    else
      return toplu__errorf(err, TOPLU_ERR_SHAPE,
                          "%s: input '%s' has more than one free dim after the batch dim; a CSV row cannot say its "
                          "shape (use .npy or .jsonl)",
                          s->path, info->name);
  }
  if (unknown >= 0) {
    if (known == 0 || cols % known)
      return toplu__errorf(err, TOPLU_ERR_SHAPE, "%s: %lld columns do not fill input '%s' rows of %lld x ?", s->path,
                          (long long)cols, info->name, (long long)known);
    t->row_dims[unknown] = cols / known;
  } else if (cols != known) {
    char sh[128];
    return toplu__errorf(err, TOPLU_ERR_SHAPE, "%s: %lld columns, input '%s' takes %lld per row (%s)", s->path,
                        (long long)cols, info->name, (long long)known,
                        toplu_shape_format(t->row_ndim, t->row_dims, sh, sizeof sh));
  }
  t->row_elems = 1;
  for (int d = 0; d < t->row_ndim; d++) t->row_elems *= t->row_dims[d];
  s->rows = t->n - t->skip;
  return TOPLU_OK;
}

/* ---- JSONL ---- */

/* Shape of a nested array (following first elements); -1 when too deep. */
static int json_shape(json_t *v, int64_t *dims) {
  int nd = 0;
  while (json_is_array(v)) {
    if (nd == TOPLU_MAX_DIMS) return -1;
    dims[nd++] = (int64_t)json_array_size(v);
    v = json_array_size(v) ? json_array_get(v, 0) : NULL;
    if (!v) break;
  }
  return nd;
}

/* Fill dst (dtype) from v, checking it is rectangular with dims[d..]; 0 or -1 with why. */
static int json_fill(json_t *v, int d, int nd, const int64_t *dims, toplu_dtype_t dt, void *dst, int64_t *i,
                     char *why, size_t why_size) {
  if (d == nd) {
    pl_num_t x = {0, 0, 0};
    if (json_is_integer(v)) x = (pl_num_t){(double)json_integer_value(v), (int64_t)json_integer_value(v), 1};
    else if (json_is_real(v)) x.d = json_real_value(v);
    else if (json_is_boolean(v)) x.d = json_is_true(v);
    else {
      snprintf(why, why_size, "element %lld is not a number", (long long)*i);
      return -1;
    }
    int code = pl_elem_set_num(dt, dst, *i, &x);
    if (code) {
      pl_elem_why(code, *i, x.d, NULL, dt, why, why_size);
      return -1;
    }
    (*i)++;
    return 0;
  }
  if (!json_is_array(v) || (int64_t)json_array_size(v) != dims[d]) {
    snprintf(why, why_size, "ragged nested array (dim %d should be %lld)", d, (long long)dims[d]);
    return -1;
  }
  for (size_t k = 0; k < json_array_size(v); k++)
    if (json_fill(json_array_get(v, k), d + 1, nd, dims, dt, dst, i, why, why_size)) return -1;
  return 0;
}

/* What a JSON value is, for messages. */
static const char *json_kind(const json_t *v) {
  switch (json_typeof(v)) {
    case JSON_OBJECT: return "an object";
    case JSON_ARRAY: return "an array";
    case JSON_STRING: return "a string";
    case JSON_INTEGER: case JSON_REAL: return "a number";
    case JSON_TRUE: case JSON_FALSE: return "a boolean";
    default: return "null";
  }
}

/* Read each line's object and its fields (the keys of s->field_key). */
static toplu_status_t jsonl_read(pl_source_t *s, int64_t first, int64_t count, pl_value_t *vals, char **row_err,
                                 toplu_error_t *err) {
  for (int64_t r = 0; r < count; r++) {
    char why[512];
    long long ln = (long long)line_of(s, first + r);
    int too_long;
    char *line = read_line(s, first + r, &too_long, why, sizeof why);
    if (!line && too_long) {
      row_err[r] = strdup(why);
      continue;
    }
    if (!line) return toplu__errorf(err, TOPLU_ERR_IO, "%s", why);
    json_error_t je;
    json_t *obj = json_loads(line, JSON_DECODE_ANY, &je);
    free(line);
    why[0] = '\0';
    if (!obj || !json_is_object(obj)) {
      char jt[200];
      snprintf(why, sizeof why, "line %lld: %s", ln, obj ? "not a JSON object" : line_json_error(&je, jt, sizeof jt));
    } else {
      for (int f = 0; f < s->n_fields && !why[0]; f++) {
        const toplu_value_info_t *info = s->field_info[f];
        const char *key = s->field_key[f] ? s->field_key[f] : info->name;
        json_t *v = json_object_get(obj, key);
        if (!v) {
          if (strcmp(key, info->name))
            snprintf(why, sizeof why, "line %lld: missing key '%s' (the key this file gives input '%s', as its first line does)",
                     ln, key, info->name);
          else
            snprintf(why, sizeof why, "line %lld: missing key '%s'", ln, key);
          break;
        }
        if (!json_is_array(v) && !json_is_number(v) && !json_is_boolean(v)) {
          snprintf(why, sizeof why, "line %lld: '%s' is %s, expected a number or nested array", ln, key, json_kind(v));
          break;
        }
        int64_t dims[TOPLU_MAX_DIMS];
        int nd = json_shape(v, dims);
        if (nd < 0) {
          snprintf(why, sizeof why, "line %lld: '%s' is nested too deep (more than %d levels)", ln, key, TOPLU_MAX_DIMS);
          break;
        }
        if (info->ndim >= 1) {
          int ok = nd == info->ndim - 1;
          for (int d = 0; ok && d < nd; d++) ok = info->dims[d + 1] < 0 || info->dims[d + 1] == dims[d];
          if (!ok) {
            char got[128], want[128];
            snprintf(why, sizeof why, "line %lld: '%s' has shape %s, the model takes rows of %s (-1: any)", ln, key,
                     toplu_shape_format(nd, dims, got, sizeof got),
                     toplu_shape_format(info->ndim - 1, info->dims + 1, want, sizeof want));
            break;
          }
        }
        toplu_dtype_t dt = info->dtype == TOPLU_DTYPE_UNDEFINED ? TOPLU_DTYPE_FLOAT : info->dtype;
        pl_value_t *pv = &vals[r * s->n_fields + f];
        pv->kind = PL_VALUE_TENSOR;
        if (toplu_tensor_alloc(&pv->t, dt, nd, dims)) {
          json_decref(obj);
          char sh[128];
          return toplu__errorf(err, TOPLU_ERR_OUT_OF_MEMORY, "%s: out of memory for '%s' of line %lld (%s %s)", s->path,
                              key, ln, toplu_dtype_name(dt), toplu_shape_format(nd, dims, sh, sizeof sh));
        }
        int64_t i = 0;
        char w2[256];
        if (json_fill(v, 0, nd, dims, dt, pv->t.data, &i, w2, sizeof w2))
          snprintf(why, sizeof why, "line %lld: '%s': %s", ln, key, w2);
      }
    }
    json_decref(obj);
    if (why[0]) row_err[r] = strdup(why);
  }
  return TOPLU_OK;
}

static const pl_source_ops_t jsonl_ops = {"jsonl", jsonl_read, text_id, text_destroy};

toplu_status_t pl_source_jsonl_open(pl_source_t *s, const toplu_model_t *model, int input, toplu_error_t *err) {
  s->ops = &jsonl_ops;
  toplu_status_t st = text_open(s, err);
  if (st) return st;
  text_src_t *t = s->impl;
  s->rows = t->n;
  if (t->n == 0) return toplu__errorf(err, TOPLU_ERR_INVALID_ARGUMENT, "%s: no rows (the file is empty or blank)", s->path);
  /* The first object decides which keys are read: the model inputs it
   * names; a one-input source whose first object has one other key reads
   * that key on every line. */
  char *line;
  if ((st = open_line(s, 0, &line, err))) return st;
  json_error_t je;
  json_t *obj = json_loads(line, JSON_DECODE_ANY, &je);
  free(line);
  long long ln = (long long)t->lines[0];
  if (!obj || !json_is_object(obj)) {
    json_decref(obj);
    char jt[200];
    return toplu__errorf(err, TOPLU_ERR_PARSE, "%s: line %lld: %s", s->path, ln,
                         obj ? "not a JSON object" : line_json_error(&je, jt, sizeof jt));
  }
  if (input >= 0) {
    s->n_fields = 1;
    s->field_input[0] = input;
    s->field_info[0] = toplu_model_input(model, input);
  } else {
    s->n_fields = 0;
    for (int i = 0; i < toplu_model_input_count(model); i++) {
      const toplu_value_info_t *info = toplu_model_input(model, i);
      if (json_object_get(obj, info->name) && s->n_fields == PL_MAX_FIELDS) {
        json_decref(obj);
        return toplu__errorf(err, TOPLU_ERR_UNSUPPORTED,
                            "%s: line %lld names more than %d of the model's inputs, more than one JSONL source "
                            "feeds; split the keys over several sources (NAME=FILE)",
                            s->path, ln, PL_MAX_FIELDS);
      }
      if (json_object_get(obj, info->name)) {
        s->field_input[s->n_fields] = i;
        s->field_info[s->n_fields++] = info;
      }
    }
    if (s->n_fields == 0 && toplu_model_input_count(model) == 1) {
      s->n_fields = 1;
      s->field_input[0] = 0;
      s->field_info[0] = toplu_model_input(model, 0);
    }
  }
  st = TOPLU_OK;
  if (s->n_fields == 0)
    st = toplu__errorf(err, TOPLU_ERR_INVALID_ARGUMENT,
                      "%s: line %lld names none of the model's inputs (give NAME=%s to read one key)", s->path, ln,
                      s->path);
  /* An input without a row dim (a scalar, or dim 0 fixed in a model that batches elsewhere: Silero VAD's sr [] and
   * state [2, N, 128]) is one tensor for a whole batch, as a .npy source passes it (source_npy.c); lines of rows
   * cannot give it (a scalar was refused as "row is [], the model takes []", and state read as rows of
   * [-1, 128]: a fresh user's findings of 2026-12-06) */
  for (int f = 0; !st && f < s->n_fields; f++) {
    const toplu_value_info_t *info = s->field_info[f];
    if (pl_input_passed_whole(model, info)) {
      char sh[256];
      pl_format_info_dims(info, sh, sizeof sh);
      st = toplu__errorf(err, TOPLU_ERR_INVALID_ARGUMENT,
                        "%s: line %lld gives input '%s', which has no row dim (%s): it is one tensor for every batch, "
                        "not a value per row; give it whole as a .npy source of its own (%s=FILE.npy) and leave its "
                        "key out of the lines",
                        s->path, ln, info->name, sh, info->name);
    }
  }
  if (!st && s->n_fields == 1 && !json_object_get(obj, s->field_info[0]->name) && json_is_object(obj)) {
    /* The input's key is missing: read the one other key whose value fits the input's rows instead (an "id" or
     * other metadata beside it is left alone); none or several that fit: lines without the key are bad rows. */
    const toplu_value_info_t *info = s->field_info[0];
    const char *key, *pick = NULL;
    json_t *v;
    int n_fit = 0;
    char keys[256] = "";
    size_t kl = 0;
    json_object_foreach(obj, key, v) {
      int64_t dims[TOPLU_MAX_DIMS];
      int nd = json_is_array(v) || json_is_number(v) ? json_shape(v, dims) : -1;
      int fits = nd >= 0 && (info->ndim < 1 || nd == info->ndim - 1);
      for (int d = 0; fits && info->ndim >= 1 && d < nd; d++) fits = info->dims[d + 1] < 0 || info->dims[d + 1] == dims[d];
      if (fits && !n_fit++) pick = key;
      if (kl + 1 < sizeof keys) {
        int w = snprintf(keys + kl, sizeof keys - kl, "%s'%.40s'", kl ? ", " : "", key);
        kl = w < 0 ? sizeof keys : kl + (size_t)w;
      }
    }
    if (n_fit == 1) {
      if (!(s->field_key[0] = strdup(pick))) st = toplu__errorf(err, TOPLU_ERR_OUT_OF_MEMORY, "out of memory for the source %s", s->path);
      else if (json_object_size(obj) == 1)
        snprintf(s->note, sizeof s->note, "%s: line %lld has no key '%s'; its only key '%s' is read as input '%s' "
                 "on every line", s->path, ln, info->name, pick, info->name);
      else
        snprintf(s->note, sizeof s->note, "%s: line %lld has no key '%s'; of its keys (%s) only '%s' holds values "
                 "that fit the input, so it is read as input '%s' on every line", s->path, ln, info->name, keys, pick,
                 info->name);
    } else {
      snprintf(s->note, sizeof s->note, "%s: line %lld has no key '%s' (its keys: %s; %s), so lines without it are bad "
               "rows", s->path, ln, info->name, keys,
               n_fit ? "several hold values that fit the input" : "none holds values that fit the input");
    }
  }
  json_decref(obj);
  return st;
}
