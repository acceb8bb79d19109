/*
 * tools/cli.h - shared pieces of the toplu command line.
 *
 * Every .c file in tools/ is linked into the one `toplu` executable.  A subcommand is
 * a function `int cmd_NAME(int argc, char **argv)` (argv[0] is the
 * subcommand's name) plus a usage text; tools/toplu.c lists them in its
 * command table.  Exit status: CLI_OK (0), CLI_FAIL (1: failure while
 * running), CLI_USAGE (2: bad usage or bad input).
 */
#ifndef TOPLU_TOOLS_CLI_H
#define TOPLU_TOOLS_CLI_H

#include <stdint.h>
#include <stdio.h>

#include "toplu/toplu.h"

enum { CLI_OK = 0, CLI_FAIL = 1, CLI_USAGE = 2 };

#if defined(__GNUC__) || defined(__clang__)
#define CLI_PRINTF(a, b) __attribute__((format(printf, a, b)))
#else
#define CLI_PRINTF(a, b)
#endif

/* A subcommand: name, entry point, one-line help, full usage text. */
typedef struct cli_command {
  const char *name;
  int (*run)(int argc, char **argv);
  const char *summary;
  const char *usage;
} cli_command_t;

/* The command table (tools/toplu.c); ends with a NULL name. */
extern const cli_command_t cli_commands[];

/* Find a command by name; NULL when unknown. */
const cli_command_t *cli_find_command(const char *name);

/* Subcommands. */
int cmd_info(int argc, char **argv);
int cmd_run(int argc, char **argv);
int cmd_merge(int argc, char **argv);
extern const char cmd_info_usage[];
extern const char cmd_run_usage[];
extern const char cmd_merge_usage[];
int cmd_plan(int argc, char **argv);
extern const char cmd_plan_usage[];
int cmd_tune(int argc, char **argv);
extern const char cmd_tune_usage[];
int cmd_perf(int argc, char **argv);
extern const char cmd_perf_usage[];
int cmd_serve(int argc, char **argv);
int cmd_quantize(int argc, char **argv);
extern const char cmd_quantize_usage[];
extern const char cmd_serve_usage[];

/* Print "toplu NAME: message" on stderr. */
void cli_error(const char *cmd, const char *fmt, ...) CLI_PRINTF(2, 3);

/* Print the message and the command's synopsis (its usage up to the first blank line, and where the rest
 * is) on stderr; returns CLI_USAGE. */
int cli_usage_error(const char *cmd, const char *fmt, ...) CLI_PRINTF(2, 3);

/*
 * Option parsing for "--name VALUE" and "--name=VALUE".  At argv[*i]: when it
 * is the option `name`, store its value in *value, advance *i past it and
 * return 1; when the value is missing print a usage error and return -1;
 * otherwise return 0.
 */
int cli_option(const char *cmd, int argc, char **argv, int *i, const char *name, const char **value);

/* A flag "--name": 1 (and *i advanced) when argv[*i] is it. */
int cli_flag(char **argv, int *i, const char *name);

/* Parse a non-negative integer in [min, max]; 0 on success, -1 on bad text. */
int cli_parse_int(const char *s, int64_t min, int64_t max, int64_t *out);

/* Parse dims "1,3,224,224" (or "1x3x224x224", "" or "()" for a scalar);
 * returns the rank or -1 on bad text or too many dims. */
int cli_parse_dims(const char *s, int64_t *dims);

/* Largest size cli_parse_shape_dims accepts for one dim. */
#define CLI_MAX_DIM INT64_C(2147483647)

/* As cli_parse_dims, for a user's --shape: also -1 for a dim over
 * CLI_MAX_DIM (or one that overflows); why (may be NULL) gets the reason
 * ("dim 3 = 99999999999 is too large ...", "'p2o.X' is not a number ...").
 * Zero dims are accepted here: whether 0 is allowed depends on the model. */
int cli_parse_shape_dims(const char *s, int64_t *dims, char *why, size_t why_size);

/* Check that a file named on the command line (what: "model", "--arch
 * config") can be read before loading it: prints "toplu CMD: PATH: No such
 * file or directory" / "PATH: is a directory, not a WHAT file" / the errno
 * text and returns CLI_USAGE; CLI_OK when it is a readable non-directory. */
int cli_check_input_file(const char *cmd, const char *what, const char *path);

/* Check that an output directory (opt: "--out") can be created or written
 * without creating it: the directory when it exists, else its nearest
 * existing parent, must be a writable directory in which a directory can be
 * made (one is made and removed: /sys and /proc pass access() for root).
 * Prints why and returns CLI_USAGE when not; CLI_OK otherwise. */
int cli_check_out_dir(const char *cmd, const char *opt, const char *dir);

/* "" for 1, "s" otherwise: "%lld row%s". */
const char *cli_plural(long long n);

/* Format a declared shape "[N, 3, ?, 224]" into buf; "[unknown rank]" for ndim < 0. */
const char *cli_format_info_dims(const toplu_value_info_t *v, char *buf, size_t size);

/* Create dir and its parents (like mkdir -p); 0 or -1 with errno set. */
int cli_mkdir_p(const char *dir);

/* Seconds on a monotonic clock. */
double cli_now(void);

/* Exit status for a failed library call: CLI_USAGE for the caller's input
 * (bad, missing or unsupported files, models, shapes, arguments:
 * TOPLU_ERR_INVALID_ARGUMENT, _IO, _PARSE, _INVALID_MODEL, _UNSUPPORTED,
 * _SHAPE, _NOT_FOUND), CLI_FAIL otherwise (out of memory, backend, internal). */
int cli_status_exit(toplu_status_t st);

/* A toplu_log_fn that writes "LEVEL: message" lines to stderr (user: NULL,
 * or a const int * that is non-zero for quiet, which keeps only errors and
 * warnings). */
void cli_log_stderr(void *user, toplu_log_level_t level, const char *message);

/* The engine's debugging switches from the environment, into session
 * options: TOPLU_PLAN_DUMP (plan_dump, with cli_log_stderr) and
 * TOPLU_NO_BLOCKED (no_blocked), TOPLU_BACKENDS (backends). */
void cli_session_env(toplu_session_options_t *so);
/* 1 when TOPLU_NO_FUSE (a comma-separated list) names name ("attention",
 * "qdq_residual": toplu_model_options_t.no_fuse_qdq_residual). */
int cli_no_fuse(const char *name);
/* The fusions TOPLU_NO_FUSE names, into mo (set, never cleared: what the
 * caller set stays): no_fuse_attention, no_fuse_qdq_residual,
 * no_fuse_depthwise.  The one place the commands (run, info, plan, tune)
 * read TOPLU_NO_FUSE for a model they load. */
void cli_model_env(toplu_model_options_t *mo);
/* CLI_OK when every name in TOPLU_NO_FUSE (comma-separated; unset or empty:
 * none) is a fusion cli_model_env knows; otherwise prints which is not and
 * the names it takes, as cmd's error, and returns CLI_USAGE (a typo would
 * otherwise leave the fusion on without a word, where TOPLU_CONV_DW and
 * TOPLU_BACKENDS refuse theirs). */
int cli_no_fuse_check(const char *cmd);

/*
 * GNU OpenMP's default lets a thread spin for about 300,000 rounds after
 * each parallel region.  On a machine whose cores other processes share,
 * those spinning threads take the cores the busy ones need: `toplu tune`
 * at 2 threads on a loaded 2-core machine measured MNIST's p50 at 32 ms
 * where OMP_WAIT_POLICY=passive gave 0.04 ms; in a server, an idle engine
 * thread held a core at 100%.  3,000 rounds cover the gaps between the
 * parallel regions of one run (as fast as the default on an idle machine:
 * docs/serve.md, docs/performance.md), then the thread sleeps.  So serve,
 * tune, run and plan call this first: unless the user set GOMP_SPINCOUNT,
 * OMP_WAIT_POLICY or KMP_BLOCKTIME, it sets GOMP_SPINCOUNT=3000 (and LLVM
 * OpenMP's KMP_BLOCKTIME=1) and starts the command again (execv of
 * /proc/self/exe with "toplu" and the subcommand's argv: argv[0] is the
 * subcommand's name); it returns only when it does not (or exec fails).
 * Call it before anything starts OpenMP or prints.
 */
void cli_openmp_respawn(int argc, char **argv);

/* "1.23 G" style number with a unit suffix (k, M, G, T) into buf. */
const char *cli_human(double v, char *buf, size_t size);

/* How `toplu run` shows a job (tools/cli_job.c). */
typedef struct cli_job_view {
  int quiet;                  /* -q: warnings and errors only */
  toplu_progress_mode_t mode; /* bar or lines (never auto) or none */
  _Atomic int drawn;          /* a bar line is on the terminal */
} cli_job_view_t;
void cli_job_view_init(cli_job_view_t *v, toplu_progress_mode_t mode, int quiet);
/* toplu_log_fn and toplu_job_progress_fn for toplu_job_options_t (user: the view). */
void cli_job_log(void *user, toplu_log_level_t level, const char *message);
void cli_job_progress(void *user, const toplu_job_stats_t *stats);
/* The final report ("toplu run: N rows -> OUT: ..." and the stage table); stopped: 0 the job finished, 1 an error
 * stopped it (told before the error line), 2 a signal. */
void cli_job_report(cli_job_view_t *v, const toplu_job_stats_t *s, const char *output, int stopped);
/* The library's option fields in a message of command cmd ("run", "merge")
 * as flags (batch_size -> --batch-size) into buf. */
const char *cli_flag_words(const char *cmd, const char *msg, char *buf, size_t size);
/* `toplu run --job FILE ARGS`: from now on cli_flag_words("run", ...) names as
 * flags only the options given in argv; the others came from the job file,
 * whose keys are the library's words (argv is kept, not copied). */
void cli_flag_words_job(int argc, char **argv);

/* Bytes as "23.4 KiB" into buf. */
const char *cli_human_bytes(double bytes, char *buf, size_t size);

#endif
