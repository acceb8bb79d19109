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

toplu_status_t toplu__errorf(toplu_error_t *err, toplu_status_t status, const char *fmt, ...) {
  if (!err) return status;
  err->status = status;
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(err->message, sizeof err->message, fmt, ap);
  va_end(ap);
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
