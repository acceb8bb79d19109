/* tests/test_job_session_log.c - a batch job's session says its notes through the job's log when the
 * caller gave the session no log of its own.  Until 2026-12-07 they went nowhere: `toplu run` never
 * showed that a plan ran uncached, or which threads a batch shape was given.  Here the session's
 * max_plan_bytes (1 byte) keeps every plan out of its cache, which the session notes once.
 *   test_job_session_log MNIST.onnx INPUT.npy OUTDIR   (exit 0 all checks hold, 1 one failed) */
#include <stdio.h>
#include <string.h>

#include "toplu/toplu.h"

static char lines[16384];
static int calls_seen;

static void on_log(void *user, toplu_log_level_t level, const char *msg) {
  (void)level;
  int *calls = user;
  (*calls)++;
  size_t n = strlen(lines);
  snprintf(lines + n, sizeof lines - n, "%s\n", msg);
}

static int failures;
static void check(int ok, const char *what) {
  printf("%s %s\n", ok ? "ok  " : "FAIL", what);
  failures += !ok;
}

/* One job of the 8 MNIST rows in batches of 2 into OUT; 0 or the job's status. */
static toplu_status_t run_job(const char *model, const char *input, const char *out, toplu_session_options_t *so) {
  toplu_job_options_t o;
  toplu_job_options_init(&o);
  const char *inputs[] = {input};
  o.model = model;
  o.inputs = inputs;
  o.n_inputs = 1;
  o.output = out;
  o.batch_size = 2;
  o.session = so;
  o.log = on_log;
  o.log_user = &calls_seen;
  toplu_error_t err = {0};
  toplu_job_t *j = NULL;
  toplu_status_t st = toplu_job_create(&o, &j, &err);
  if (!st) st = toplu_job_run(j, &err);
  if (st) printf("job %s: %s: %s\n", out, toplu_status_name(st), err.message);
  toplu_job_destroy(j);
  return st;
}

int main(int argc, char **argv) {
  if (argc != 4) {
    fprintf(stderr, "usage: %s MNIST.onnx INPUT.npy OUTDIR\n", argv[0]);
    return 2;
  }
  char out[1024];
  toplu_session_options_t so;
  toplu_session_options_init(&so);
  so.max_plan_bytes = 1; /* no plan fits the cache: the session notes it */

  snprintf(out, sizeof out, "%s/job_session_log_a.jsonl", argv[3]);
  remove(out);
  check(run_job(argv[1], argv[2], out, &so) == TOPLU_OK, "a job whose plans all run uncached");
  check(strstr(lines, "does not fit the plan cache") != NULL,
        "the session's note that a plan runs uncached reaches the job's log");
  if (!strstr(lines, "does not fit the plan cache")) printf("the job's log said:\n%s", lines);

  /* A session with a log of its own keeps its notes. */
  int own_calls = 0;
  so.log = on_log;
  so.log_user = &own_calls;
  lines[0] = 0;
  calls_seen = 0;
  snprintf(out, sizeof out, "%s/job_session_log_b.jsonl", argv[3]);
  remove(out);
  check(run_job(argv[1], argv[2], out, &so) == TOPLU_OK, "the same job, the session with its own log");
  check(own_calls >= 1, "the session's own log got its note");
  check(calls_seen >= 1, "the job's log still got the job's lines");
  printf("session log calls %d, job log calls %d\n", own_calls, calls_seen);
  return failures ? 1 : 0;
}
