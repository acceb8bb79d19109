/* core/log.c - messages for the caller's log callback (toplu/log.h). */
#include <stdarg.h>
#include <stdio.h>

#include "core/log.h"

const char *toplu_log_level_name(toplu_log_level_t level) {
  switch (level) {
    case TOPLU_LOG_ERROR: return "error";
    case TOPLU_LOG_WARNING: return "warning";
    case TOPLU_LOG_NOTE: return "note";
    case TOPLU_LOG_PROGRESS: return "progress";
    case TOPLU_LOG_DEBUG: return "debug";
  }
  return "log";
}

void toplu__logf(toplu_log_fn fn, void *user, toplu_log_level_t level, const char *fmt, ...) {
  if (!fn) return;
  char msg[TOPLU_ERROR_MESSAGE_MAX];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  fn(user, level, msg);
}
