/* tests/test_job_session_log.c - a batch job's session says its notes through the job's log when the
 * caller gave the session no log of its own.  Until 2026-12-07 they went nowhere: `toplu run` never
 * showed that a plan ran uncached, or which threads a batch shape was given.  Here the session's
 * max_plan_bytes (1 byte) keeps every plan out of its cache, which the session notes once.
 *   test_job_session_log MNIST.onnx INPUT.npy OUTDIR   (exit 0 all checks hold, 1 one failed) */
#include <stdio.h>
#include <string.h>

#include "log_capture.h"
#include "toplu/toplu.h"

static log_capture_t job_log; /* the job's log (its session's notes too, unless the session has its own) */

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
  o.log = log_capture;
  o.log_user = &job_log;
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
  check(strstr(job_log.text, "does not fit the plan cache") != NULL,
        "the session's note that a plan runs uncached reaches the job's log");
  if (!strstr(job_log.text, "does not fit the plan cache")) printf("the job's log said:\n%s", job_log.text);

  /* A session with a log of its own keeps its notes. */
  static log_capture_t own_log;
  so.log = log_capture;
  so.log_user = &own_log;
  job_log.text[0] = 0;
  job_log.calls = 0;
  snprintf(out, sizeof out, "%s/job_session_log_b.jsonl", argv[3]);
  remove(out);
  check(run_job(argv[1], argv[2], out, &so) == TOPLU_OK, "the same job, the session with its own log");
  check(own_log.calls >= 1, "the session's own log got its note");
  check(job_log.calls >= 1, "the job's log still got the job's lines");
  printf("session log calls %d, job log calls %d\n", own_log.calls, job_log.calls);
  return failures ? 1 : 0;
}
