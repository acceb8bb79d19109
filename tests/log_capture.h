/*
 * tests/log_capture.h - what the C tests of toplu's notes share: a
 * toplu_log_fn that appends each message as a line to the log_capture_t its
 * user points to and counts the calls, and a check() that prints ok or FAIL
 * and counts failures.  Header-only, for test programs.
 */
#ifndef TOPLU_TESTS_LOG_CAPTURE_H
#define TOPLU_TESTS_LOG_CAPTURE_H

#include <stdio.h>
#include <string.h>

#include "toplu/toplu.h"

typedef struct {
  char text[16384]; /* the messages so far, one a line (cut when full) */
  int calls;
} log_capture_t;

static void log_capture(void *user, toplu_log_level_t level, const char *msg) {
  (void)level;
  log_capture_t *c = user;
  c->calls++;
  size_t n = strlen(c->text);
  snprintf(c->text + n, sizeof c->text - n, "%s\n", msg);
}

static int failures;
static void check(int ok, const char *what) {
  printf("%s %s\n", ok ? "ok  " : "FAIL", what);
  failures += !ok;
}

#endif
