/*
 * core/error.h - setting error messages inside the library.
 *
 * toplu__errorf() formats a message into a toplu_error_t (which may be NULL)
 * and returns the status, so a failing path reads
 *   return toplu__errorf(err, TOPLU_ERR_SHAPE, "node '%s': ...", name);
 * The first error set wins: later calls on an error that already holds a
 * failure only prefix context with toplu__error_prefix().
 */
#ifndef TOPLU_CORE_ERROR_H
#define TOPLU_CORE_ERROR_H

#include "toplu/status.h"

#if defined(__GNUC__) || defined(__clang__)
#define TOPLU_PRINTF(a, b) __attribute__((format(printf, a, b)))
#else
#define TOPLU_PRINTF(a, b)
#endif

/* Set err to status and the formatted message (truncated to fit); returns status. */
toplu_status_t toplu__errorf(toplu_error_t *err, toplu_status_t status, const char *fmt, ...)
    TOPLU_PRINTF(3, 4);

/* Put "prefix: " in front of err's message (when err holds an error). Returns err->status
 * (TOPLU_OK when err is NULL). */
toplu_status_t toplu__error_prefix(toplu_error_t *err, const char *fmt, ...) TOPLU_PRINTF(2, 3);

#endif
