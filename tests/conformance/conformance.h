/*
 * tests/conformance/conformance.h - the ONNX node-test conformance runner.
 *
 * toplu-conformance runs the ONNX backend node tests (a directory holding
 * model.onnx and test_data_set_N/{input,output}_M.pb, serialized
 * TensorProto) through toplu, one forked process per test, and gives each a
 * verdict.  See docs/conformance.md for the latest results and
 * tests/conformance/main.c for the command line.
 */
#ifndef TOPLU_CONFORMANCE_H
#define TOPLU_CONFORMANCE_H

#include <stddef.h>

#include "toplu/tensor.h"

typedef enum conf_verdict {
  CONF_PASS = 0,
  CONF_FAIL,        /* wrong shape, dtype or values, or a run-time error */
  CONF_UNSUPPORTED, /* TOPLU_ERR_UNSUPPORTED from load or run, or test data toplu cannot express */
  CONF_LOAD_ERROR,  /* any other failure to load the model */
  CONF_CRASH,       /* the child died of a signal or exited without a verdict */
  CONF_TIMEOUT,     /* the child ran past --timeout */
  CONF_N_VERDICTS
} conf_verdict_t;

/* "PASS", "FAIL", "UNSUPPORTED", "LOAD-ERROR", "CRASH", "TIMEOUT". */
const char *conf_verdict_name(conf_verdict_t v);

/* Options shared by the parent and the per-test children. */
typedef struct conf_options {
  int threads;     /* session threads in a child */
  int no_optimize; /* toplu_model_options_t.no_optimize */
  double rtol, atol;
} conf_options_t;

/*
 * Run one test directory in this process and write the result to fd as
 * text lines: "O <op_type>" once per distinct op of the model (written
 * first, before loading, so a crash still knows its ops), then
 * "V <verdict number>" and "M <message>" (one line, newlines replaced).
 * Returns the verdict.
 */
conf_verdict_t conf_run_test(const char *dir, const conf_options_t *opts, int fd);

/* The outcome of one test, as the parent collects it. */
typedef struct conf_result {
  char *name;        /* directory name, e.g. "test_relu" */
  char *dir;         /* full path */
  conf_verdict_t verdict;
  char *message;     /* reason for a non-PASS verdict ("" for PASS) */
  int n_ops;
  char **ops;        /* distinct op types of the model ("domain.Op" outside ai.onnx) */
  double seconds;
} conf_result_t;

/*
 * Write the Markdown report: counts per verdict, a table op x verdict, the
 * non-PASS tests with their reasons, and the hand-written notes section
 * (between "<!-- notes -->" and "<!-- /notes -->") taken over from the
 * existing file at path when there is one.  root is stripped from messages.
 * Returns 0, or -1 with a message on stderr.
 */
int conf_write_markdown(const char *path, const conf_result_t *results, int n, const char *root);

/* The verdict named name ("PASS", ...), or -1. */
int conf_verdict_from_name(const char *name);

/* One line of the expected-verdict list (tests/conformance-expected.txt):
 * "test_name VERDICT", '#' starts a comment. */
typedef struct conf_expected {
  char *name;
  conf_verdict_t verdict;
} conf_expected_t;

/* Read the list at path into *out (sorted by name, *n entries; free with
 * conf_free_expected).  Returns 0, or -1 with the file and line on stderr
 * (unreadable, a malformed line, a test listed twice). */
int conf_read_expected(const char *path, conf_expected_t **out, int *n);
void conf_free_expected(conf_expected_t *e, int n);
/* The entry for name in a sorted list, or NULL. */
const conf_expected_t *conf_find_expected(const conf_expected_t *e, int n, const char *name);
/* Sort e and write it to path (through path.tmp and a rename).  Returns 0 or -1. */
int conf_write_expected(const char *path, conf_expected_t *e, int n);

/*
 * Compare an output against the expected tensor: dtype, then shape, then
 * values (floats: |got - want| <= atol + rtol*|want|, NaN only equals NaN,
 * inf only equals the same inf; integers and bool exactly).  Returns 1 when
 * they match; otherwise 0 and a description of the first mismatch in msg.
 */
int conf_compare(const char *name, int index, const toplu_tensor_t *got, const toplu_tensor_t *want, double rtol,
                 double atol, char *msg, size_t msg_size);

#endif
