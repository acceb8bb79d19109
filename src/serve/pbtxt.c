/*
 * serve/pbtxt.c - Triton's config.pbtxt (protobuf text format) to the
 * protobuf-JSON text srv_config_parse reads (serve/pbtxt.h).
 *
 * Spec: https://protobuf.dev/reference/protobuf/textformat-spec/ and
 * Triton's model_config.proto for which fields are repeated, maps, bools
 * and enums.  A lexer of one token of look-ahead and a recursive-descent
 * parser building a jansson tree, depth and value count bounded.
 */
#include "serve/pbtxt.h"

#include <errno.h>
#include <jansson.h>
#include <math.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- the schema: what text format cannot say by itself ---- */

enum {
  F_REP = 1,     /* repeated: always a JSON array */
  F_MAP = 2,     /* map<K, V>: { key value } entries into a JSON object */
  F_MAP_MSG = 4, /* ... whose values are messages (absent value: {}) */
  F_BOOL = 8,    /* bool: 0 and 1 are false and true */
};

static const char *const kDataTypes[] = {"TYPE_INVALID", "TYPE_BOOL",  "TYPE_UINT8", "TYPE_UINT16", "TYPE_UINT32",
                                         "TYPE_UINT64",  "TYPE_INT8",  "TYPE_INT16", "TYPE_INT32",  "TYPE_INT64",
                                         "TYPE_FP16",    "TYPE_FP32",  "TYPE_FP64",  "TYPE_STRING", "TYPE_BF16",
                                         NULL};
static const char *const kKinds[] = {"KIND_AUTO", "KIND_GPU", "KIND_CPU", "KIND_MODEL", NULL};
static const char *const kFormats[] = {"FORMAT_NONE", "FORMAT_NHWC", "FORMAT_NCHW", NULL};
static const char *const kActions[] = {"REJECT", "DELAY", NULL};

/* Paths are field names from ModelConfig joined by '.'; a map's values add
 * nothing for their key ("model_warmup.inputs.dims"). */
static const struct {
  const char *path;
  int flags;
  const char *const *enums; /* enum names by number */
} kSchema[] = {
    {"input", F_REP, NULL},
    {"input.dims", F_REP, NULL},
    {"input.reshape.shape", F_REP, NULL},
    {"input.data_type", 0, kDataTypes},
    {"input.format", 0, kFormats},
    {"input.is_shape_tensor", F_BOOL, NULL},
    {"input.allow_ragged_batch", F_BOOL, NULL},
    {"input.optional", F_BOOL, NULL},
    {"input.is_non_linear_format_io", F_BOOL, NULL},
    {"output", F_REP, NULL},
    {"output.dims", F_REP, NULL},
    {"output.reshape.shape", F_REP, NULL},
    {"output.data_type", 0, kDataTypes},
    {"output.is_shape_tensor", F_BOOL, NULL},
    {"output.is_non_linear_format_io", F_BOOL, NULL},
    {"batch_input", F_REP, NULL},
    {"batch_input.target_name", F_REP, NULL},
    {"batch_input.source_input", F_REP, NULL},
    {"batch_output", F_REP, NULL},
    {"batch_output.target_name", F_REP, NULL},
    {"batch_output.source_input", F_REP, NULL},
    {"instance_group", F_REP, NULL},
    {"instance_group.kind", 0, kKinds},
    {"instance_group.gpus", F_REP, NULL},
    {"instance_group.secondary_devices", F_REP, NULL},
    {"instance_group.profile", F_REP, NULL},
    {"instance_group.passive", F_BOOL, NULL},
    {"instance_group.rate_limiter.resources", F_REP, NULL},
    {"version_policy.specific.versions", F_REP, NULL},
    {"dynamic_batching.preferred_batch_size", F_REP, NULL},
    {"dynamic_batching.preserve_ordering", F_BOOL, NULL},
    {"dynamic_batching.default_queue_policy.timeout_action", 0, kActions},
    {"dynamic_batching.default_queue_policy.allow_timeout_override", F_BOOL, NULL},
    {"dynamic_batching.priority_queue_policy", F_MAP | F_MAP_MSG, NULL},
    {"dynamic_batching.priority_queue_policy.timeout_action", 0, kActions},
    {"dynamic_batching.priority_queue_policy.allow_timeout_override", F_BOOL, NULL},
    {"sequence_batching.control_input", F_REP, NULL},
    {"sequence_batching.control_input.control", F_REP, NULL},
    {"sequence_batching.control_input.control.int32_false_true", F_REP, NULL},
    {"sequence_batching.control_input.control.fp32_false_true", F_REP, NULL},
    {"sequence_batching.control_input.control.bool_false_true", F_REP, NULL},
    {"sequence_batching.state", F_REP, NULL},
    {"sequence_batching.state.dims", F_REP, NULL},
    {"sequence_batching.state.initial_state", F_REP, NULL},
    {"sequence_batching.state.initial_state.dims", F_REP, NULL},
    {"sequence_batching.oldest.preferred_batch_size", F_REP, NULL},
    {"ensemble_scheduling.step", F_REP, NULL},
    {"ensemble_scheduling.step.input_map", F_MAP, NULL},
    {"ensemble_scheduling.step.output_map", F_MAP, NULL},
    {"optimization.cuda.graph_spec", F_REP, NULL},
    {"optimization.cuda.graph_spec.input", F_MAP | F_MAP_MSG, NULL},
    {"optimization.cuda.graph_spec.input.dim", F_REP, NULL},
    {"optimization.cuda.graph_spec.graph_lower_bound.input", F_MAP | F_MAP_MSG, NULL},
    {"optimization.cuda.graph_spec.graph_lower_bound.input.dim", F_REP, NULL},
    {"optimization.execution_accelerators.gpu_execution_accelerator", F_REP, NULL},
    {"optimization.execution_accelerators.gpu_execution_accelerator.parameters", F_MAP, NULL},
    {"optimization.execution_accelerators.cpu_execution_accelerator", F_REP, NULL},
    {"optimization.execution_accelerators.cpu_execution_accelerator.parameters", F_MAP, NULL},
    {"cc_model_filenames", F_MAP, NULL},
    {"metric_tags", F_MAP, NULL},
    {"parameters", F_MAP | F_MAP_MSG, NULL},
    {"model_warmup", F_REP, NULL},
    {"model_warmup.inputs", F_MAP | F_MAP_MSG, NULL},
    {"model_warmup.inputs.data_type", 0, kDataTypes},
    {"model_warmup.inputs.dims", F_REP, NULL},
    {"model_warmup.inputs.zero_data", F_BOOL, NULL},
    {"model_warmup.inputs.random_data", F_BOOL, NULL},
    {"model_operations.op_library_filename", F_REP, NULL},
    {"model_repository_agents.agents", F_REP, NULL},
    {"model_repository_agents.agents.parameters", F_MAP, NULL},
    {"model_metrics.metric_control", F_REP, NULL},
    {"model_metrics.metric_control.histogram_options.buckets", F_REP, NULL},
    {"response_cache.enable", F_BOOL, NULL},
};

static int schema_find(const char *path) {
  for (size_t i = 0; i < sizeof kSchema / sizeof kSchema[0]; i++)
    if (strcmp(kSchema[i].path, path) == 0) return (int)i;
  return -1;
}

/* ---- lexer ---- */

typedef enum tok_kind { T_EOF, T_IDENT, T_NUM, T_STR, T_SYM, T_BAD } tok_kind_t;

typedef struct tok {
  tok_kind_t kind;
  size_t start, len; /* bytes of text */
  int line, col;
} tok_t;

typedef struct px {
  const char *s;
  size_t n, i;   /* text, its length, the lexer's position */
  int line;      /* of position i */
  size_t bol;    /* offset of the line's first byte */
  tok_t peek;    /* the next token (lexed ahead) */
  const char *file;
  char *err;
  size_t err_size;
  int depth;
  long values;
  int failed;
} px_t;

static int fail_at(px_t *x, int line, int col, const char *fmt, ...) __attribute__((format(printf, 4, 5)));
static int fail_at(px_t *x, int line, int col, const char *fmt, ...) {
  if (x->failed) return -1;
  x->failed = 1;
  if (x->err && x->err_size) {
    int k = snprintf(x->err, x->err_size, "%s: line %d column %d: ", x->file, line, col);
    if (k >= 0 && (size_t)k < x->err_size) {
      va_list ap;
      va_start(ap, fmt);
      vsnprintf(x->err + k, x->err_size - (size_t)k, fmt, ap);
      va_end(ap);
    }
  }
  return -1;
}

static int is_ident_start(int c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_'; }
static int is_digit(int c) { return c >= '0' && c <= '9'; }
static int is_ident_char(int c) { return is_ident_start(c) || is_digit(c); }

/* Skip whitespace and '#' comments, counting lines. */
static void skip_space(px_t *x) {
  while (x->i < x->n) {
    char c = x->s[x->i];
    if (c == '\n') {
      x->i++;
      x->line++;
      x->bol = x->i;
    } else if (c == ' ' || c == '\t' || c == '\r' || c == '\v' || c == '\f') {
      x->i++;
    } else if (c == '#') {
      while (x->i < x->n && x->s[x->i] != '\n') x->i++;
    } else {
      break;
    }
  }
}

/* Lex the token at x->i into x->peek (T_BAD after an error, which is set). */
static void lex(px_t *x) {
  skip_space(x);
  tok_t *t = &x->peek;
  t->start = x->i;
  t->len = 0;
  t->line = x->line;
  t->col = (int)(x->i - x->bol) + 1;
  if (x->i >= x->n) {
    t->kind = T_EOF;
    return;
  }
  unsigned char c = (unsigned char)x->s[x->i];
  if (is_ident_start(c)) {
    while (x->i < x->n && is_ident_char((unsigned char)x->s[x->i])) x->i++;
    t->kind = T_IDENT;
  } else if (is_digit(c) || (c == '.' && x->i + 1 < x->n && is_digit((unsigned char)x->s[x->i + 1]))) {
    /* digits, letters, '_', '.', and a sign after an exponent's e (not in hex) */
    int hex = c == '0' && x->i + 1 < x->n && (x->s[x->i + 1] == 'x' || x->s[x->i + 1] == 'X');
    while (x->i < x->n) {
      unsigned char d = (unsigned char)x->s[x->i];
      if (is_ident_char(d) || d == '.') {
        x->i++;
      } else if ((d == '+' || d == '-') && !hex && (x->s[x->i - 1] == 'e' || x->s[x->i - 1] == 'E')) {
        x->i++;
      } else {
        break;
      }
    }
    t->kind = T_NUM;
  } else if (c == '"' || c == '\'') {
    x->i++;
    for (;;) {
      if (x->i >= x->n || x->s[x->i] == '\n') {
        t->kind = T_BAD;
        fail_at(x, t->line, t->col, "unterminated string (a string ends with its opening quote %c on the same line)",
                (char)c);
        return;
      }
      char d = x->s[x->i];
      if (d == '\\' && x->i + 1 < x->n && x->s[x->i + 1] != '\n') {
        x->i += 2;
      } else {
        x->i++;
        if (d == (char)c) break;
      }
    }
    t->kind = T_STR;
  } else if (strchr("{}[]<>:,;-", c) && c) {
    x->i++;
    t->kind = T_SYM;
  } else {
    t->kind = T_BAD;
    if (c >= 0x20 && c < 0x7f)
      fail_at(x, t->line, t->col, "unexpected character '%c'", (char)c);
    else
      fail_at(x, t->line, t->col, "unexpected byte 0x%02x", c);
    return;
  }
  t->len = x->i - t->start;
}

static tok_t next(px_t *x) {
  tok_t t = x->peek;
  if (t.kind != T_EOF && t.kind != T_BAD) lex(x);
  return t;
}

static int is_sym(const tok_t *t, const px_t *x, char c) { return t->kind == T_SYM && x->s[t->start] == c; }

/* A token for a message: "'{'", "'name'", "the end of the file". */
static const char *tok_text(const px_t *x, const tok_t *t, char *buf, size_t size) {
  if (t->kind == T_EOF) snprintf(buf, size, "the end of the file");
  else if (t->kind == T_STR) snprintf(buf, size, "a string");
  else if (t->len > 40) snprintf(buf, size, "'%.37s...'", x->s + t->start);
  else snprintf(buf, size, "'%.*s'", (int)t->len, x->s + t->start);
  return buf;
}

/* ---- values ---- */

static int count_value(px_t *x, const tok_t *at) {
  if (++x->values > SRV_PBTXT_MAX_VALUES)
    return fail_at(x, at->line, at->col, "more than %d values: too large for a model configuration", SRV_PBTXT_MAX_VALUES);
  return 0;
}

static int hexval(int c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

static void put_utf8(char *o, size_t *k, uint32_t cp) {
  if (cp < 0x80) {
    o[(*k)++] = (char)cp;
  } else if (cp < 0x800) {
    o[(*k)++] = (char)(0xC0 | (cp >> 6));
    o[(*k)++] = (char)(0x80 | (cp & 0x3F));
  } else if (cp < 0x10000) {
    o[(*k)++] = (char)(0xE0 | (cp >> 12));
    o[(*k)++] = (char)(0x80 | ((cp >> 6) & 0x3F));
    o[(*k)++] = (char)(0x80 | (cp & 0x3F));
  } else {
    o[(*k)++] = (char)(0xF0 | (cp >> 18));
    o[(*k)++] = (char)(0x80 | ((cp >> 12) & 0x3F));
    o[(*k)++] = (char)(0x80 | ((cp >> 6) & 0x3F));
    o[(*k)++] = (char)(0x80 | (cp & 0x3F));
  }
}

/* Read exactly n hex digits at s[*p] (within end); -1 when they are not there. */
static long hex_digits(const char *s, size_t *p, size_t end, int n) {
  long v = 0;
  for (int j = 0; j < n; j++) {
    if (*p >= end || hexval((unsigned char)s[*p]) < 0) return -1;
    v = v * 16 + hexval((unsigned char)s[(*p)++]);
  }
  return v;
}

/* Decode the string token t (quotes included) onto out[*k] (room for t.len bytes). */
static int decode_string(px_t *x, const tok_t *t, char *out, size_t *k) {
  const char *s = x->s;
  size_t p = t->start + 1, end = t->start + t->len - 1; /* between the quotes */
  while (p < end) {
    char c = s[p];
    if (c != '\\') {
      out[(*k)++] = c;
      p++;
      continue;
    }
    int ecol = t->col + (int)(p - t->start);
    p++;
    char e = s[p++];
    switch (e) {
      case 'a': out[(*k)++] = '\a'; break;
      case 'b': out[(*k)++] = '\b'; break;
      case 'f': out[(*k)++] = '\f'; break;
      case 'n': out[(*k)++] = '\n'; break;
      case 'r': out[(*k)++] = '\r'; break;
      case 't': out[(*k)++] = '\t'; break;
      case 'v': out[(*k)++] = '\v'; break;
      case '\\': case '\'': case '"': case '?': out[(*k)++] = e; break;
      case 'x': case 'X': {
        int v = 0, nd = 0;
        while (nd < 2 && p < end && hexval((unsigned char)s[p]) >= 0) v = v * 16 + hexval((unsigned char)s[p++]), nd++;
        if (!nd) return fail_at(x, t->line, ecol, "\\x in a string needs one or two hex digits");
        out[(*k)++] = (char)v;
        break;
      }
      case 'u': case 'U': {
        long cp = hex_digits(s, &p, end, e == 'u' ? 4 : 8);
        if (cp < 0) return fail_at(x, t->line, ecol, "\\%c in a string needs %d hex digits", e, e == 'u' ? 4 : 8);
        if (cp >= 0xD800 && cp <= 0xDBFF && p + 1 < end && s[p] == '\\' && s[p + 1] == 'u') {
          size_t q = p + 2;
          long lo = hex_digits(s, &q, end, 4);
          if (lo >= 0xDC00 && lo <= 0xDFFF) {
            cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00);
            p = q;
          }
        }
        if ((cp >= 0xD800 && cp <= 0xDFFF) || cp > 0x10FFFF)
          return fail_at(x, t->line, ecol, "\\%c escape of U+%lX is not a Unicode character", e, cp);
        put_utf8(out, k, (uint32_t)cp);
        break;
      }
      default:
        if (e >= '0' && e <= '7') {
          int v = e - '0', nd = 1;
          while (nd < 3 && p < end && s[p] >= '0' && s[p] <= '7') v = v * 8 + (s[p++] - '0'), nd++;
          if (v > 255) return fail_at(x, t->line, ecol, "octal escape \\%o in a string is over \\377", (unsigned)v);
          out[(*k)++] = (char)v;
        } else {
          return fail_at(x, t->line, ecol, "unknown escape '\\%c' in a string", e >= 0x20 && e < 0x7f ? e : '?');
        }
    }
  }
  return 0;
}

/* One or more adjacent string tokens (joined, as the spec says) into a JSON string. */
static json_t *parse_string(px_t *x) {
  tok_t first = x->peek;
  /* Decoded bytes never outnumber the source's (a \U escape of 10 bytes gives at most 4). */
  size_t room = 0, k = 0;
  char *buf = NULL;
  while (x->peek.kind == T_STR) {
    tok_t t = next(x);
    if (k + t.len + 1 > room) {
      size_t nr = (k + t.len + 1) * 2;
      char *nb = realloc(buf, nr);
      if (!nb) {
        free(buf);
        return fail_at(x, t.line, t.col, "out of memory"), NULL;
      }
      buf = nb;
      room = nr;
    }
    if (decode_string(x, &t, buf, &k)) {
      free(buf);
      return NULL;
    }
  }
  json_t *v = json_stringn(buf ? buf : "", k);
  free(buf);
  if (!v) fail_at(x, first.line, first.col, "the string is not valid UTF-8 (JSON needs UTF-8; use \\u escapes for characters)");
  return v;
}

/* A number token (its text t, negative when neg) as a JSON integer, real or,
 * for an integer beyond int64, a decimal string. */
static json_t *parse_number(px_t *x, const tok_t *t, int neg) {
  char txt[128];
  if (t->len >= sizeof txt) return fail_at(x, t->line, t->col, "number '%.40s...' is too long", x->s + t->start), NULL;
  memcpy(txt, x->s + t->start, t->len);
  txt[t->len] = 0;
  size_t n = t->len;
  int is_hex = n > 2 && txt[0] == '0' && (txt[1] == 'x' || txt[1] == 'X');
  int ok = 1, is_float = 0;
  if (is_hex) {
    for (size_t j = 2; j < n; j++) ok &= hexval((unsigned char)txt[j]) >= 0;
  } else {
    /* float: digits [. digits] [e [+-] digits] [f], or . digits ...; int: digits */
    size_t j = 0, d1 = 0, d2 = 0;
    while (j < n && is_digit((unsigned char)txt[j])) j++, d1++;
    if (j < n && txt[j] == '.') {
      is_float = 1;
      j++;
      while (j < n && is_digit((unsigned char)txt[j])) j++, d2++;
    }
    if (d1 + d2 == 0) ok = 0;
    if (j < n && (txt[j] == 'e' || txt[j] == 'E')) {
      is_float = 1;
      j++;
      if (j < n && (txt[j] == '+' || txt[j] == '-')) j++;
      size_t d3 = 0;
      while (j < n && is_digit((unsigned char)txt[j])) j++, d3++;
      if (!d3) ok = 0;
    }
    if (j < n && (txt[j] == 'f' || txt[j] == 'F')) {
      is_float = 1;
      txt[j] = 0; /* strtod must not see it */
      j++;
    }
    if (j != n) ok = 0;
    /* a leading 0 is octal: every digit 0-7 */
    if (ok && !is_float && d1 > 1 && txt[0] == '0')
      for (size_t q = 1; q < n; q++) ok &= txt[q] <= '7';
    if (ok && is_float && d1 > 1 && txt[0] == '0' && !d2 && strchr(txt, '.') == NULL && !strpbrk(txt, "eE"))
      ok = 0; /* "01f": not a float literal */
  }
  if (!ok) return fail_at(x, t->line, t->col, "'%.*s' is not a number", (int)t->len, x->s + t->start), NULL;
  if (is_float) {
    double d = strtod(txt, NULL);
    if (!isfinite(d)) return fail_at(x, t->line, t->col, "number '%s' is out of range", txt), NULL;
    return json_real(neg ? -d : d);
  }
  errno = 0;
  unsigned long long u = strtoull(txt, NULL, is_hex ? 16 : (txt[0] == '0' && n > 1) ? 8 : 10);
  if (errno == ERANGE)
    return fail_at(x, t->line, t->col, "integer '%s%s' is out of range (beyond 64 bits)", neg ? "-" : "", txt), NULL;
  if (neg) {
    if (u > (unsigned long long)INT64_MAX + 1ull)
      return fail_at(x, t->line, t->col, "integer '-%s' is out of range (below -2^63)", txt), NULL;
    return json_integer(u == (unsigned long long)INT64_MAX + 1ull ? (json_int_t)INT64_MIN : -(json_int_t)u);
  }
  if (u > (unsigned long long)INT64_MAX) {
    char dec[32];
    snprintf(dec, sizeof dec, "%llu", u);
    return json_string(dec);
  }
  return json_integer((json_int_t)u);
}

static int ident_is(const px_t *x, const tok_t *t, const char *w) {
  return t->len == strlen(w) && strncmp(x->s + t->start, w, t->len) == 0;
}

static int ident_is_ci(const px_t *x, const tok_t *t, const char *w) {
  if (t->len != strlen(w)) return 0;
  for (size_t j = 0; j < t->len; j++) {
    char c = x->s[t->start + j];
    if (c >= 'A' && c <= 'Z') c = (char)(c - 'A' + 'a');
    if (c != w[j]) return 0;
  }
  return 1;
}

/* A scalar value of field fname (schema entry sc, -1 when none). */
static json_t *parse_scalar(px_t *x, const char *fname, int sc) {
  tok_t t = x->peek;
  char tb[64];
  json_t *v = NULL;
  if (count_value(x, &t)) return NULL;
  if (t.kind == T_STR) {
    v = parse_string(x);
  } else if (t.kind == T_NUM) {
    next(x);
    v = parse_number(x, &t, 0);
  } else if (is_sym(&t, x, '-')) {
    next(x);
    tok_t u = next(x);
    if (u.kind == T_NUM) {
      v = parse_number(x, &u, 1);
    } else if (u.kind == T_IDENT && (ident_is_ci(x, &u, "inf") || ident_is_ci(x, &u, "infinity") || ident_is_ci(x, &u, "nan"))) {
      char s[16];
      snprintf(s, sizeof s, "-%.*s", (int)u.len, x->s + u.start);
      v = json_string(s);
    } else {
      return fail_at(x, u.line, u.col, "expected a number after '-' for field '%s', not %s", fname,
                     tok_text(x, &u, tb, sizeof tb)), NULL;
    }
  } else if (t.kind == T_IDENT) {
    next(x);
    if (ident_is(x, &t, "true") || ident_is(x, &t, "True") || ident_is(x, &t, "t")) v = json_true();
    else if (ident_is(x, &t, "false") || ident_is(x, &t, "False") || ident_is(x, &t, "f")) v = json_false();
    else v = json_stringn(x->s + t.start, t.len); /* an enum name (or inf, nan) */
  } else {
    if (t.kind != T_BAD)
      fail_at(x, t.line, t.col, "expected a value for field '%s', not %s", fname, tok_text(x, &t, tb, sizeof tb));
    return NULL;
  }
  if (!v) {
    if (!x->failed) fail_at(x, t.line, t.col, "out of memory");
    return NULL;
  }
  if (sc >= 0 && (kSchema[sc].flags & F_BOOL) && json_is_integer(v) &&
      (json_integer_value(v) == 0 || json_integer_value(v) == 1)) {
    json_t *b = json_boolean(json_integer_value(v));
    json_decref(v);
    v = b;
  }
  if (sc >= 0 && kSchema[sc].enums && json_is_integer(v)) {
    json_int_t k = json_integer_value(v);
    const char *const *names = kSchema[sc].enums;
    json_int_t cnt = 0;
    while (names[cnt]) cnt++;
    if (k >= 0 && k < cnt) {
      json_decref(v);
      v = json_string(names[k]);
      if (!v) fail_at(x, t.line, t.col, "out of memory");
    }
  }
  return v;
}

/* ---- messages ---- */

static int parse_message(px_t *x, json_t *obj, const char *path, const tok_t *open);

/* A message value '{ ... }' or '< ... >' at x->peek into a new object. */
static json_t *parse_message_value(px_t *x, const char *path) {
  tok_t open = next(x);
  if (count_value(x, &open)) return NULL;
  if (x->depth >= SRV_PBTXT_MAX_DEPTH)
    return fail_at(x, open.line, open.col, "messages nested deeper than %d levels", SRV_PBTXT_MAX_DEPTH), NULL;
  json_t *o = json_object();
  if (!o) return fail_at(x, open.line, open.col, "out of memory"), NULL;
  x->depth++;
  int rc = parse_message(x, o, path, &open);
  x->depth--;
  if (rc) {
    json_decref(o);
    return NULL;
  }
  return o;
}

static int is_open(const px_t *x, const tok_t *t) { return is_sym(t, x, '{') || is_sym(t, x, '<'); }

/* A map entry { key: K value: V } at x->peek into map (fname at path, schema entry sc). */
static int parse_map_entry(px_t *x, json_t *map, const char *fname, const char *path, int sc) {
  tok_t open = x->peek;
  char tb[64];
  if (!is_open(x, &open))
    return fail_at(x, open.line, open.col, "map field '%s' takes entries { key: ... value: ... }, not %s", fname,
                   tok_text(x, &open, tb, sizeof tb));
  if (x->depth >= SRV_PBTXT_MAX_DEPTH)
    return fail_at(x, open.line, open.col, "messages nested deeper than %d levels", SRV_PBTXT_MAX_DEPTH);
  next(x);
  char close = x->s[open.start] == '{' ? '}' : '>';
  json_t *key = NULL, *val = NULL;
  int rc = -1;
  x->depth++;
  for (;;) {
    tok_t t = x->peek;
    if (is_sym(&t, x, close)) {
      next(x);
      break;
    }
    if (t.kind == T_EOF) {
      fail_at(x, t.line, t.col, "missing '%c' at the end of the file for the entry of '%s' opened at line %d column %d",
              close, fname, open.line, open.col);
      goto done;
    }
    if (t.kind == T_BAD) goto done;
    int is_key = t.kind == T_IDENT && ident_is(x, &t, "key"), is_val = t.kind == T_IDENT && ident_is(x, &t, "value");
    if (!is_key && !is_val) {
      fail_at(x, t.line, t.col,
              "an entry of map field '%s' holds 'key' and 'value' only, not %s (%s { key: \"k\" value: %s })", fname,
              tok_text(x, &t, tb, sizeof tb), fname, (kSchema[sc].flags & F_MAP_MSG) ? "{ ... }" : "\"v\"");
      goto done;
    }
    if ((is_key && key) || (is_val && val)) {
      fail_at(x, t.line, t.col, "'%s' is given twice in an entry of map field '%s'", is_key ? "key" : "value", fname);
      goto done;
    }
    next(x);
    int colon = 0;
    if (is_sym(&x->peek, x, ':')) {
      next(x);
      colon = 1;
    }
    tok_t vt = x->peek;
    json_t *v;
    if (is_open(x, &vt) && is_val) {
      v = parse_message_value(x, path);
    } else if (!colon) {
      fail_at(x, vt.line, vt.col, "expected ':' after '%s' in an entry of map field '%s', not %s", is_key ? "key" : "value",
              fname, tok_text(x, &vt, tb, sizeof tb));
      goto done;
    } else {
      v = parse_scalar(x, is_key ? "key" : "value", is_val ? sc : -1);
    }
    if (!v) goto done;
    if (is_key) {
      if (!(json_is_string(v) || json_is_integer(v) || json_is_boolean(v)) ||
          (json_is_string(v) && strlen(json_string_value(v)) != json_string_length(v))) {
        json_decref(v);
        fail_at(x, vt.line, vt.col, "a key of map field '%s' must be a string without NUL, an integer or a bool", fname);
        goto done;
      }
      key = v;
    } else {
      val = v;
    }
    if (is_sym(&x->peek, x, ';') || is_sym(&x->peek, x, ',')) next(x);
  }
  char kb[32];
  const char *k = "";
  if (key && json_is_string(key)) k = json_string_value(key);
  else if (key && json_is_integer(key)) snprintf(kb, sizeof kb, "%lld", (long long)json_integer_value(key)), k = kb;
  else if (key) k = json_is_true(key) ? "true" : "false";
  else if (strcmp(fname, "priority_queue_policy") == 0) k = "0"; /* absent: the key type's default (uint64 there) */
  if (json_object_get(map, k)) {
    fail_at(x, open.line, open.col, "key \"%.100s\" of map field '%s' is given twice", k, fname);
    goto done;
  }
  if (!val) val = (kSchema[sc].flags & F_MAP_MSG) ? json_object() : json_string("");
  if (!val || json_object_set_new(map, k, val)) {
    val = NULL;
    fail_at(x, open.line, open.col, "out of memory");
    goto done;
  }
  val = NULL;
  rc = 0;
done:
  x->depth--;
  json_decref(key);
  json_decref(val);
  return rc;
}

/* One field at x->peek (an identifier) into obj, whose path is path. */
static int parse_field(px_t *x, json_t *obj, const char *path) {
  tok_t nt = next(x);
  char tb[64], name[256], fpath[512];
  if (nt.len >= sizeof name) return fail_at(x, nt.line, nt.col, "field name '%.40s...' is too long", x->s + nt.start);
  memcpy(name, x->s + nt.start, nt.len);
  name[nt.len] = 0;
  snprintf(fpath, sizeof fpath, "%s%s%s", path, path[0] ? "." : "", name);
  int sc = schema_find(fpath);
  int flags = sc >= 0 ? kSchema[sc].flags : 0;
  int colon = 0;
  if (is_sym(&x->peek, x, ':')) {
    next(x);
    colon = 1;
  }
  tok_t vt = x->peek;
  if (vt.kind == T_BAD) return -1;
  if (!colon && !is_open(x, &vt) && !is_sym(&vt, x, '['))
    return fail_at(x, vt.line, vt.col, "expected ':' or '{' after field name '%s', not %s", name, tok_text(x, &vt, tb, sizeof tb));
  json_t *have = json_object_get(obj, name);
  if (have && !(flags & (F_REP | F_MAP)))
    return fail_at(x, nt.line, nt.col, "field '%s' is given twice (it is not a repeated field of Triton's model configuration)",
                   fpath);
  int list = is_sym(&vt, x, '[');
  if (list) next(x);
  if (flags & F_MAP) {
    if (!have) {
      have = json_object();
      if (!have || json_object_set_new(obj, name, have)) return fail_at(x, nt.line, nt.col, "out of memory");
    }
    if (!list) return parse_map_entry(x, have, name, fpath, sc);
    for (int first = 1;; first = 0) {
      if (is_sym(&x->peek, x, ']')) {
        next(x);
        return 0;
      }
      if (!first) {
        tok_t c = x->peek;
        if (!is_sym(&c, x, ',')) return fail_at(x, c.line, c.col, "expected ',' or ']' in the list of '%s', not %s", name,
                                                tok_text(x, &c, tb, sizeof tb));
        next(x);
        if (is_sym(&x->peek, x, ']'))
          return fail_at(x, x->peek.line, x->peek.col, "expected a value after ',' in the list of '%s', not ']'", name);
      }
      if (parse_map_entry(x, have, name, fpath, sc)) return -1;
    }
  }
  json_t *arr = NULL; /* where values go: the repeated field's array, or a list's own */
  if (flags & F_REP) {
    if (!have) {
      have = json_array();
      if (!have || json_object_set_new(obj, name, have)) return fail_at(x, nt.line, nt.col, "out of memory");
    }
    arr = have;
  } else if (list) {
    arr = json_array();
    if (!arr || json_object_set_new(obj, name, arr)) return fail_at(x, nt.line, nt.col, "out of memory");
  }
  if (!list) {
    json_t *v = is_open(x, &vt) ? parse_message_value(x, fpath) : parse_scalar(x, name, sc);
    if (!v) return -1;
    if (arr ? json_array_append_new(arr, v) : json_object_set_new(obj, name, v))
      return fail_at(x, vt.line, vt.col, "out of memory");
    return 0;
  }
  for (int first = 1;; first = 0) {
    tok_t c = x->peek;
    if (is_sym(&c, x, ']')) {
      next(x);
      return 0;
    }
    if (!first) {
      if (!is_sym(&c, x, ','))
        return fail_at(x, c.line, c.col, "expected ',' or ']' in the list of '%s', not %s", name, tok_text(x, &c, tb, sizeof tb));
      next(x);
      c = x->peek;
      if (is_sym(&c, x, ']')) return fail_at(x, c.line, c.col, "expected a value after ',' in the list of '%s', not ']'", name);
    }
    json_t *v;
    if (is_open(x, &c)) {
      v = parse_message_value(x, fpath);
    } else if (!colon) {
      if (c.kind == T_BAD) return -1;
      return fail_at(x, c.line, c.col, "expected ':' after field name '%s' before a list of values (only a list of messages may go without it), found %s",
                     name, tok_text(x, &c, tb, sizeof tb));
    } else {
      v = parse_scalar(x, name, sc);
    }
    if (!v) return -1;
    if (json_array_append_new(arr, v)) return fail_at(x, c.line, c.col, "out of memory");
  }
}

/* Fields into obj until the close of open ('}' or '>'), or the end of the
 * file when open is NULL (the top level). */
static int parse_message(px_t *x, json_t *obj, const char *path, const tok_t *open) {
  char close = open ? (x->s[open->start] == '{' ? '}' : '>') : 0;
  char tb[64];
  for (;;) {
    tok_t t = x->peek;
    if (t.kind == T_BAD) return -1;
    if (t.kind == T_EOF) {
      if (!open) return 0;
      return fail_at(x, t.line, t.col, "missing '%c' at the end of the file to close the message '%s' opened at line %d column %d",
                     close, path, open->line, open->col);
    }
    if (open && is_sym(&t, x, close)) {
      next(x);
      return 0;
    }
    if (is_sym(&t, x, '[')) return fail_at(x, t.line, t.col, "extension and Any field names ([...]) are not part of Triton's model configuration");
    if (t.kind != T_IDENT) {
      if (open)
        return fail_at(x, t.line, t.col, "expected a field name or '%c' to close '%s' (opened at line %d column %d), not %s",
                       close, path, open->line, open->col, tok_text(x, &t, tb, sizeof tb));
      return fail_at(x, t.line, t.col, "expected a field name, not %s", tok_text(x, &t, tb, sizeof tb));
    }
    if (parse_field(x, obj, path)) return -1;
    if (is_sym(&x->peek, x, ';') || is_sym(&x->peek, x, ',')) next(x);
  }
}

char *srv_pbtxt_to_json(const char *text, size_t len, const char *path, char *err, size_t err_size) {
  px_t x;
  memset(&x, 0, sizeof x);
  x.s = text ? text : "";
  x.n = text ? len : 0;
  x.line = 1;
  x.file = path ? path : "config.pbtxt";
  x.err = err;
  x.err_size = err_size;
  if (err && err_size) err[0] = 0;
  if (x.n > (size_t)1 << 30) { /* lines and columns are ints; configurations are far smaller (repo.c reads 16 MiB) */
    if (err && err_size) snprintf(err, err_size, "%s: over 1 GiB: too large for a model configuration", x.file);
    return NULL;
  }
  lex(&x);
  json_t *root = json_object();
  if (!root) {
    if (err && err_size) snprintf(err, err_size, "%s: out of memory", x.file);
    return NULL;
  }
  char *out = NULL;
  if (parse_message(&x, root, "", NULL) == 0) {
    out = json_dumps(root, JSON_COMPACT);
    if (!out && err && err_size) snprintf(err, err_size, "%s: out of memory", x.file);
  }
  json_decref(root);
  return out;
}
