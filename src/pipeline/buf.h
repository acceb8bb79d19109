/*
 * pipeline/buf.h - growable byte buffers and the text the sinks write.
 *
 * A pl_buf_t is a malloc'ed byte string that grows as it is appended to.
 * JSON numbers are written so that they read back to the same value
 * (shortest "%.Ng" that round-trips), and identically on every run: the
 * byte-identical-resume guarantee rests on this.  Allocation failures are
 * sticky (buf->oom), checked once by the caller.
 */
#ifndef TOPLU_PIPELINE_BUF_H
#define TOPLU_PIPELINE_BUF_H

#include <stddef.h>
#include <stdint.h>

#include "core/error.h"
#include "toplu/model.h"
#include "toplu/tensor.h"

typedef struct pl_buf {
  char *data;
  size_t len, cap;
  int oom; /* an append failed for lack of memory */
} pl_buf_t;

void pl_buf_free(pl_buf_t *b);
/* Make room for n more bytes; 0 or -1 (and oom set). */
int pl_buf_reserve(pl_buf_t *b, size_t n);
void pl_buf_append(pl_buf_t *b, const void *p, size_t n);
void pl_buf_puts(pl_buf_t *b, const char *s);
void pl_buf_putc(pl_buf_t *b, char c);
void pl_buf_printf(pl_buf_t *b, const char *fmt, ...) TOPLU_PRINTF(2, 3);
/* A JSON string literal (quotes and escapes; control characters as \u00XX; valid UTF-8 kept as it is, each byte that is not part of a valid
 * UTF-8 sequence written as \ufffd, so the line is valid JSON whatever the
 * bytes). */
void pl_buf_json_string(pl_buf_t *b, const char *s);
/* An id as one line of ids.txt: backslash as \\, LF as \n, CR as \r, other
 * control characters and DEL as \xHH, then '\n' (so line k is row k's id
 * whatever the file name holds; docs/pipeline.md). */
void pl_buf_id_line(pl_buf_t *b, const char *id);
/* The length (1..4) of the valid UTF-8 sequence at p, 0 when the bytes there
 * are not one (a stray continuation byte, an overlong form, a surrogate,
 * above U+10FFFF, cut short). */
size_t pl_utf8_len(const unsigned char *p);
/* The offset of the first byte of s that is not valid UTF-8, -1 when all is. */
int64_t pl_utf8_invalid(const char *s);
/* A CSV field: quoted when it holds a comma, quote, CR or LF. */
void pl_buf_csv_field(pl_buf_t *b, const char *s);
/* Numbers: float32 and double in their shortest round-tripping form
 * ("1", "0.5", "1e-07"); NaN and Inf as "NaN"/"Infinity"/"-Infinity"
 * (callers reject non-finite rows before formatting). */
void pl_buf_float(pl_buf_t *b, float v);
void pl_buf_double(pl_buf_t *b, double v);
void pl_buf_int(pl_buf_t *b, int64_t v);
/* Element i of data (of dtype) as a number. */
void pl_buf_element(pl_buf_t *b, toplu_dtype_t dtype, const void *data, int64_t i);
/* A tensor (dims, data) as nested JSON arrays; ndim 0 is a bare number. */
void pl_buf_json_tensor(pl_buf_t *b, toplu_dtype_t dtype, int ndim, const int64_t *dims, const void *data);

/* Element i of data (of a numeric dtype) as double; float16/bfloat16 converted. */
double pl_elem_get(toplu_dtype_t dtype, const void *data, int64_t i);
/* Store v into element i.  Integer types take v rounded to nearest; NaN,
 * +-Inf or a value outside the type's range cannot be stored: the element
 * gets 0 (NaN) or the nearest bound and the return says why (a bad row for
 * the caller).  Returns PL_ELEM_OK, PL_ELEM_NAN, PL_ELEM_INF or
 * PL_ELEM_RANGE (float types: always PL_ELEM_OK; bool: v != 0). */
enum { PL_ELEM_OK = 0, PL_ELEM_NAN = 1, PL_ELEM_INF = 2, PL_ELEM_RANGE = 3 };
int pl_elem_set(toplu_dtype_t dtype, void *data, int64_t i, double v);
/* A number read from text (CSV, JSONL): its double, and for an integer
 * literal the exact value, so that int64/uint64 inputs get every digit
 * (9007199254740993 is not a double).  exact: 0 only d; 1 i holds the
 * value; 2 an integer literal beyond int64 and uint64 (or a negative one
 * beyond int64); 3 a literal in (INT64_MAX, UINT64_MAX], i holding its bits. */
typedef struct pl_num {
  double d;
  int64_t i;
  int exact;
} pl_num_t;
/* pl_elem_set for a pl_num_t: integer dtypes take exact values exactly (an
 * exact value outside the type's range is PL_ELEM_RANGE, never rounded
 * into it); everything else goes through pl_elem_set(d). */
int pl_elem_set_num(toplu_dtype_t dtype, void *data, int64_t i, const pl_num_t *n);
/* A problem of pl_elem_set for a row's message, into why: "element 3 is NaN,
 * which int8 cannot hold" after "input 'x': " (what: the input's name, NULL for
 * none); code PL_ELEM_OK writes nothing. */
void pl_elem_why(int code, int64_t element, double v, const char *what, toplu_dtype_t dtype, char *why, size_t size);
/* 1 when toplu computes with this dtype as a number (not string/undefined). */
int pl_dtype_numeric(toplu_dtype_t dtype);
/* 1 for float32/float16/bfloat16/double. */
int pl_dtype_float(toplu_dtype_t dtype);

/* Index of the first NaN or Inf of a float tensor (-1: none; integers have none). */
int64_t pl_first_nonfinite(const toplu_tensor_t *t);

/* A declared shape with its symbols, "[N, 3, ?, 224]", into buf ("[unknown rank]" for ndim < 0). */
const char *pl_format_info_dims(const toplu_value_info_t *v, char *buf, size_t size);

/* Monotonic seconds. */
double pl_now(void);

#endif
