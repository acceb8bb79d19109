/*
 * tools/cli_text.h - the command line's side of the library's manners.
 *
 * The library names option fields in its messages ("mem_fraction must be
 * in (0, 1]", "shapes: x: ...") and reports progress through a
 * toplu_log_fn (toplu/log.h); it never prints.  The commands here turn
 * those into what a user of `toplu` reads: flags instead of field names,
 * "toplu CMD: ..." lines on stderr, a live progress line on a terminal.
 * Not thread-safe: one command runs at a time, and the library serialises
 * its log calls.
 */
#ifndef TOPLU_TOOLS_CLI_TEXT_H
#define TOPLU_TOOLS_CLI_TEXT_H

#include <stddef.h>
#include <stdio.h>

#include "toplu/log.h"

/* A piece of library text and what a user of the command types instead:
 * {"mem_fraction", "--mem-fraction"}, {"shapes: ", "--shape "}.  Tables
 * end with a NULL field; put longer fields before their prefixes. */
typedef struct cli_flag_name {
  const char *field;
  const char *flag;
} cli_flag_name_t;

/* The message with every field of names replaced by its flag where the
 * field starts a word (not after a letter, digit, '_' or '-') and, when it
 * ends in a letter or digit, ends one.  Writes into out (cut to size) and
 * returns it; msg itself when names is NULL. */
const char *cli_flag_names(const char *msg, const cli_flag_name_t *names, char *out, size_t size);

/* "toplu CMD: MESSAGE" on stderr, MESSAGE translated with names. */
void cli_library_error(const char *cmd, const cli_flag_name_t *names, const char *msg);

/* A toplu_log_fn that writes "toplu CMD: MESSAGE" lines to f. */
typedef struct cli_log {
  const char *cmd;
  const cli_flag_name_t *names; /* translation of field names (may be NULL) */
  FILE *f;
  int tty;              /* f is a terminal: progress lines rewrite one line */
  int live;             /* a progress line is showing (terminal) */
  int last_progress;    /* the last line written was progress (not a terminal) */
  double last_progress_t;
} cli_log_t;

void cli_log_init(cli_log_t *l, const char *cmd, const cli_flag_name_t *names, FILE *f);

/* The callback (user: a cli_log_t).  Notes as they come; warnings and
 * errors with "warning: " / "error: "; debug messages dropped.  Progress
 * on a terminal rewrites one line; elsewhere a progress line is written
 * when the line before it was not progress or 10 s have passed since the
 * last one, so logs get one line per stage, not one per window. */
void cli_log(void *user, toplu_log_level_t level, const char *msg);

/* Clear a live progress line (call before printing results). */
void cli_log_end(cli_log_t *l);

/* The planner's device catalog as a table (name, device, memory, bandwidth,
 * peaks per precision), then the cpu entry, from toplu_device_catalog_entry. */
void cli_print_device_catalog(FILE *f);

#endif
