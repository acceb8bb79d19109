/* core/status.c - status strings and error formatting. */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "core/error.h"

const char *toplu_strerror(toplu_status_t status) {
  switch (status) {
    case TOPLU_OK: return "success";
    case TOPLU_ERR_INVALID_ARGUMENT: return "invalid argument";
    case TOPLU_ERR_IO: return "input/output error";
    case TOPLU_ERR_PARSE: return "malformed file";
    case TOPLU_ERR_INVALID_MODEL: return "invalid model";
    case TOPLU_ERR_UNSUPPORTED: return "unsupported";
    case TOPLU_ERR_SHAPE: return "shape or type mismatch";
    case TOPLU_ERR_OUT_OF_MEMORY: return "out of memory";
    case TOPLU_ERR_NOT_FOUND: return "not found";
    case TOPLU_ERR_BACKEND: return "backend failure";
    case TOPLU_ERR_INTERNAL: return "internal error";
    case TOPLU_ERR_CANCELLED: return "cancelled";
    case TOPLU_ERR_DEADLINE: return "deadline exceeded";
  }
  return "unknown status";
}

const char *toplu_status_name(toplu_status_t status) {
  switch (status) {
    case TOPLU_OK: return "TOPLU_OK";
    case TOPLU_ERR_INVALID_ARGUMENT: return "TOPLU_ERR_INVALID_ARGUMENT";
    case TOPLU_ERR_IO: return "TOPLU_ERR_IO";
    case TOPLU_ERR_PARSE: return "TOPLU_ERR_PARSE";
    case TOPLU_ERR_INVALID_MODEL: return "TOPLU_ERR_INVALID_MODEL";
    case TOPLU_ERR_UNSUPPORTED: return "TOPLU_ERR_UNSUPPORTED";
    case TOPLU_ERR_SHAPE: return "TOPLU_ERR_SHAPE";
    case TOPLU_ERR_OUT_OF_MEMORY: return "TOPLU_ERR_OUT_OF_MEMORY";
    case TOPLU_ERR_NOT_FOUND: return "TOPLU_ERR_NOT_FOUND";
    case TOPLU_ERR_BACKEND: return "TOPLU_ERR_BACKEND";
    case TOPLU_ERR_INTERNAL: return "TOPLU_ERR_INTERNAL";
    case TOPLU_ERR_CANCELLED: return "TOPLU_ERR_CANCELLED";
    case TOPLU_ERR_DEADLINE: return "TOPLU_ERR_DEADLINE";
  }
  return "TOPLU_ERR_UNKNOWN";
}

void toplu_error_clear(toplu_error_t *err) {
  if (!err) return;
  err->status = TOPLU_OK;
  err->message[0] = '\0';
}

/* Control bytes (0x00-0x1f, 0x7f) of a message as \xNN, in place, truncated to cap bytes with its '\0'.  No
 * format string of toplu's holds one; they come from names in a file (a node named with an escape sequence and a
 * newline wrote over a terminal and forged a log line, a fresh user's finding of 2026-12-07). */
static void escape_controls(char *msg, size_t cap) {
  size_t n = strlen(msg), extra = 0;
  for (size_t i = 0; i < n; i++) extra += (unsigned char)msg[i] < 0x20 || msg[i] == 0x7f ? 3 : 0;
  if (!extra) return;
  char tmp[TOPLU_ERROR_MESSAGE_MAX];
  size_t o = 0;
  for (size_t i = 0; i < n && o + 1 < sizeof tmp && o + 1 < cap; i++) {
    unsigned char c = (unsigned char)msg[i];
    if (c >= 0x20 && c != 0x7f) {
      tmp[o++] = (char)c;
      continue;
    }
    if (o + 5 > sizeof tmp || o + 5 > cap) break;
    snprintf(tmp + o, 5, "\\x%02x", c);
    o += 4;
  }
  tmp[o] = '\0';
  memcpy(msg, tmp, o + 1);
}

toplu_status_t toplu__errorf(toplu_error_t *err, toplu_status_t status, const char *fmt, ...) {
  if (!err) return status;
  err->status = status;
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(err->message, sizeof err->message, fmt, ap);
  va_end(ap);
  escape_controls(err->message, sizeof err->message);
  return status;
}

toplu_status_t toplu__error_prefix(toplu_error_t *err, const char *fmt, ...) {
  if (!err) return TOPLU_OK;
  if (err->status == TOPLU_OK) return TOPLU_OK;
  char prefix[512];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(prefix, sizeof prefix, fmt, ap);
  va_end(ap);
  escape_controls(prefix, sizeof prefix);
  /* message = prefix + ": " + message, truncated to fit */
  size_t pl = strlen(prefix), ml = strlen(err->message), cap = sizeof err->message - 1;
  if (pl + 2 > cap) pl = cap - 2;
  if (pl + 2 + ml > cap) ml = cap - pl - 2;
  memmove(err->message + pl + 2, err->message, ml);
  memcpy(err->message, prefix, pl);
  err->message[pl] = ':';
  err->message[pl + 1] = ' ';
  err->message[pl + 2 + ml] = '\0';
  return err->status;
}

const char *toplu_version(void) { return TOPLU_VERSION_STRING; }
