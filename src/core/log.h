/*
 * core/log.h - formatting a message for a caller's toplu_log_fn.
 *
 * toplu__logf(fn, user, level, fmt, ...) formats into a stack buffer of
 * TOPLU_ERROR_MESSAGE_MAX bytes (longer text is cut) and calls fn once;
 * nothing happens when fn is NULL.  Thread-safe (no shared state); callers
 * that report from several threads serialise themselves.
 */
#ifndef TOPLU_CORE_LOG_H
#define TOPLU_CORE_LOG_H

#include "core/error.h"
#include "toplu/log.h"

void toplu__logf(toplu_log_fn fn, void *user, toplu_log_level_t level, const char *fmt, ...) TOPLU_PRINTF(4, 5);

#endif
