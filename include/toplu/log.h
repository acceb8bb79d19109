/*
 * toplu/log.h - how the library reports notes, warnings and progress.
 *
 * libtoplu never writes to stdout, stderr or any stream of its own choosing.
 * Long calls (batch jobs, the tuner, the planner) take a toplu_log_fn in
 * their options and call it with one complete message per call, without a
 * trailing newline, in the library's own terms (option fields, not
 * command-line flags).  A NULL callback means "say nothing".  This is the
 * sqlite3_log / libuv callback model: the caller decides where text goes.
 *
 * Thread-safety: a callback may be called from the library's worker threads,
 * but never from two threads at once for one call (each long call
 * serialises its own messages).  It must not call back into the object
 * that is reporting.
 */
#ifndef TOPLU_LOG_H
#define TOPLU_LOG_H

#ifdef __cplusplus
extern "C" {
#endif

typedef enum toplu_log_level {
  TOPLU_LOG_ERROR = 0,    /* the call is failing; the message says why (the status says it too) */
  TOPLU_LOG_WARNING = 1,  /* something the caller should know: rows skipped, a limit lowered */
  TOPLU_LOG_NOTE = 2,     /* a decision taken: batch size chosen, a fixed-batch model run row by row */
  TOPLU_LOG_PROGRESS = 3, /* a progress line ("1,024/10,000 rows, 812 rows/s, ETA 11 s") */
  TOPLU_LOG_DEBUG = 4
} toplu_log_level_t;

/* user: the pointer given with the callback in the options. */
typedef void (*toplu_log_fn)(void *user, toplu_log_level_t level, const char *message);

/* Static name of a level ("warning", "note", ...).  Thread-safe. */
const char *toplu_log_level_name(toplu_log_level_t level);

#ifdef __cplusplus
}
#endif
#endif /* TOPLU_LOG_H */
