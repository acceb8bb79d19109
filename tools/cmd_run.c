/*
 * tools/cmd_run.c - `toplu run`: a model over every row of its inputs, as a
 * batch job of the pipeline library (toplu/pipeline.h).
 *
 * Parse the flags (after a --job file's settings, which they override),
 * fill toplu_job_options_t, create and run the job, and map the status to
 * an exit code.  How the job is shown (messages in flag words, the progress
 * bar or lines, the report) is tools/cli_job.c.
 */
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli.h"
#include "toplu/pipeline.h"

const char cmd_run_usage[] =
    "usage: toplu run MODEL --input [NAME=]SOURCE [--input ...] --output SINK\n"
    "                 [--batch-size N|auto|all] [--threads T] [--quiet] [job options]\n"
    "       toplu run --job JOB.json [options that override it]\n"
    "\n"
    "Run MODEL over every row of its inputs and store one result per row.\n"
    "SOURCE: a .npy file (rows along dim 0), a directory or quoted glob of\n"
    "JPEG/PNG images, a .csv (one input row flattened per line) or a .jsonl\n"
    "(one object per line, a key per model input holding a row).  SINK:\n"
    "NAME.jsonl, NAME.csv, NAME.sqlite (table results), or a directory with one\n"
    "<output name>.npy per output and ids.txt (an existing one, a name without\n"
    "an extension, or one ending in '/').  See docs/pipeline.md.\n"
    "\n"
    "options:\n"
    "  --input [NAME=]SOURCE  model input NAME (repeat per input; NAME may be left\n"
    "                         out for a model with one input, or for a .jsonl)\n"
    "  --output SINK          where the results go\n"
    "  --batch-size N|auto|all rows per batch (default: all for .npy inputs into a\n"
    "                         directory, in 8 MiB chunks if rows stay apart;\n"
    "                         else 16; auto: --tune FILE's (or toplu-tune/'s)\n"
    "                         recommended_batch_size, else a short sweep)\n"
    "  --threads T            threads per run (default: all cores)\n"
    "  --fixed-threads        no per-shape choice of threads\n"
    "  --quiet, -q            no progress, notes or summary (warnings show)\n"
    "job options:\n"
    "  --preprocess SPEC      resize=WxH[:letterbox], resize=S, crop=WxH,\n"
    "                         pad-multiple=M, pad-value=V, color=rgb|bgr|gray,\n"
    "                         layout=nchw|nhwc, dtype=float32|uint8, scale=S,\n"
    "                         mean=R/G/B, std=R/G/B: (x*scale-mean)/std,\n"
    "                         decode=full (JPEGs at full size; default fast)\n"
    "  --postprocess SPEC     raw, softmax, argmax, topk=K, output=NAME (picks\n"
    "                         the output; raw,output=NAME writes it alone)\n"
    "  --labels FILE          class names, line k = class k\n"
    "  --workers W            read/decode threads (default 1 on up to 4 cores)\n"
    "  --prefetch K           batches read ahead of inference (default 2; 0: none)\n"
    "  --infer-workers S      batches run at once (default 1)\n"
    "  --shard K/N            part K of N of the rows (default from\n"
    "                         JOB_COMPLETION_INDEX/JOB_COMPLETIONS or SLURM_ARRAY_*);\n"
    "                         join parts with toplu merge\n"
    "  --resume               continue an interrupted job from its checkpoint\n"
    "  --errors FILE          bad rows as JSON lines (id, row, stage, error)\n"
    "  --overwrite            replace a SINK or --errors FILE that no toplu job wrote\n"
    "  --sqlite-table NAME    write into table NAME of the SINK database, other tables kept\n"
    "  --fail-fast            stop at the first bad row\n"
    "  --allow-nonfinite      pass NaN and Inf through (IsNaN models)\n"
    "  --qdq-int8-all         every Conv of a QDQ model in int8 (docs/design.md, Int8)\n"
    "  --length-buckets L     pad sequences to buckets (auto, or 16,32,64,...)\n"
    "  --max-image-pixels N   larger images are bad rows (default 2^28)\n"
    "  --checkpoint-every S   seconds between checkpoints (default 1)\n"
    "  --tune FILE            tune result for --batch-size auto\n"
    "  --progress MODE        auto, bar, lines or none\n"
    "  --csv-header MODE      CSV sources: is line 1 a header? auto, yes, no\n"
    "  --csv-delimiter D      , ; tab | or space (default: detected from line 1)\n"
    "  --max-line-bytes N     longer CSV/JSONL lines are bad rows (default 64 MiB)\n"
    "  --profile FILE.json    Chrome trace of every step; prints the top 10 steps\n"
    "  --job FILE             these settings as JSON keys (model, input, output,\n"
    "                         batch_size...; paths relative to FILE's folder)\n"
    "\n"
    "Results appear under SINK's name only when complete.  SIGINT or SIGTERM stop\n"
    "the job after a checkpoint; run the same command with --resume to finish.\n"
    "Exit status: 0 done, 1 failed while running (or every row failed), 2 bad\n"
    "usage or bad input (checked before anything runs: also a --resume\n"
    "checkpoint of other settings, or another job writing SINK), 130 stopped by\n"
    "SIGINT, 143 stopped by SIGTERM (both resumable).\n";

#define RUN_MAX_INPUTS 256

/* The job being run and the signal that stopped it, for the handler. */
static toplu_job_t *volatile run_job;
static volatile sig_atomic_t run_signal;

/* First SIGINT/SIGTERM: stop after a checkpoint; a second one kills. */
static void on_stop_signal(int sig) {
  toplu_job_t *j = run_job;
  run_signal = sig;
  if (j) toplu_job_cancel(j);
  signal(sig, SIG_DFL);
}

/* Settings from the command line (beside the options they fill). */
typedef struct run_args {
  toplu_job_options_t o;
  const char *inputs[RUN_MAX_INPUTS];
  int n_inputs, quiet, fixed_threads;
  toplu_job_file_t *file;
} run_args_t;

/* Set the option of a flag with a value; CLI_OK or CLI_USAGE (with the usage). */
static int set_flag(run_args_t *a, const char *name, const char *val) {
  toplu_job_options_t *o = &a->o;
  int64_t v, lo = !strcmp(name, "--infer-workers") || !strcmp(name, "--workers") ? 1 : 0;
  if (!strcmp(name, "--batch-size")) {
    if (!strcmp(val, "auto")) o->batch_size = TOPLU_JOB_BATCH_AUTO;
    else if (!strcmp(val, "all")) o->batch_size = TOPLU_JOB_BATCH_ALL;
    else if (cli_parse_int(val, 1, INT64_MAX, &v))
      return cli_usage_error("run", "--batch-size '%s': expected a whole number >= 1, auto or all", val);
    else o->batch_size = v;
  } else if (!strcmp(name, "--threads") || !strcmp(name, "--workers") || !strcmp(name, "--prefetch") ||
             !strcmp(name, "--infer-workers")) {
    int64_t hi = !strcmp(name, "--threads") ? TOPLU_MAX_THREADS : 65536;
    if (cli_parse_int(val, lo, hi, &v))
      return cli_usage_error("run", "%s '%s': expected %lld..%lld", name, val, (long long)lo, (long long)hi);
    *(!strcmp(name, "--threads")   ? &o->threads
      : !strcmp(name, "--workers") ? &o->workers
      : !strcmp(name, "--prefetch") ? &o->prefetch
                                    : &o->infer_workers) = (int)v;
  } else if (!strcmp(name, "--shard")) {
    const char *slash = strchr(val, '/');
    int64_t k = -1, n = 0;
    char kb[32];
    if (slash && (size_t)(slash - val) < sizeof kb) {
      memcpy(kb, val, (size_t)(slash - val));
      kb[slash - val] = '\0';
      if (cli_parse_int(kb, 0, INT32_MAX, &k) || cli_parse_int(slash + 1, 1, INT32_MAX, &n)) k = -1;
    }
    if (k < 0 || k >= n)
      return cli_usage_error("run", "--shard '%s': expected K/N with 0 <= K < N <= 2147483647", val);
    o->shard_index = (int)k;
    o->shard_count = (int)n;
  } else if (!strcmp(name, "--checkpoint-every")) {
    char *e;
    double sec = strtod(val, &e);
    if (e == val || *e || !(sec >= 0) || sec > 1e6)
      return cli_usage_error("run", "--checkpoint-every '%s': expected seconds (0 to 1000000)", val);
    o->checkpoint_seconds = sec;
  } else if (!strcmp(name, "--progress")) {
    static const char *const m[] = {"auto", "bar", "lines", "none"};
    int k = 0;
    while (k < 4 && strcmp(val, m[k])) k++;
    if (k == 4) return cli_usage_error("run", "--progress '%s': expected auto, bar, lines or none", val);
    o->progress_mode = (toplu_progress_mode_t)k;
  } else if (!strcmp(name, "--csv-header")) {
    static const char *const m[] = {"auto", "yes", "no"};
    int k = 0;
    while (k < 3 && strcmp(val, m[k])) k++;
    if (k == 3) return cli_usage_error("run", "--csv-header '%s': expected auto, yes or no", val);
    o->csv_header = (toplu_csv_header_t)k;
  } else if (!strcmp(name, "--csv-delimiter")) {
    char d = !strcmp(val, "tab") || !strcmp(val, "\\t") ? '\t' : !strcmp(val, "space") ? ' ' : val[0];
    if (!(strlen(val) == 1 || d == '\t' || d == ' ') || !d || !strchr(",;\t| ", d))
      return cli_usage_error("run", "--csv-delimiter '%s': expected ',', ';', tab, '|' or space", val);
    o->csv_delimiter = d;
  } else if (!strcmp(name, "--max-line-bytes")) {
    if (cli_parse_int(val, 1, INT64_MAX, &v))
      return cli_usage_error("run", "--max-line-bytes '%s': expected a whole number of bytes >= 1", val);
    o->max_line_bytes = v;
  } else if (!strcmp(name, "--max-image-pixels")) {
    if (cli_parse_int(val, 1, INT64_MAX, &v))
      return cli_usage_error("run", "--max-image-pixels '%s': expected a whole number of pixels >= 1", val);
    o->max_image_pixels = v;
  } else if (!strcmp(name, "--output")) {
    if (!*val) return cli_usage_error("run", "--output: needs a file or directory");
    if (val[0] == '-')
      return cli_usage_error("run", "--output '%s': looks like an option, not a file (for a file named so, write ./%s)",
                             val, val);
    o->output = val;
  } else if (!strcmp(name, "--profile")) {
    if (!*val || val[0] == '-')
      return cli_usage_error("run", "--profile '%s': expected a file for the Chrome trace (FILE.json)", val);
    o->profile = val;
  } else if (!strcmp(name, "--length-buckets")) {
    o->length_buckets = val; /* checked by toplu_job_create (naming length_buckets) */
  } else if (!strcmp(name, "--sqlite-table")) {
    o->sqlite_table = val; /* checked by toplu_job_create (naming sqlite_table, which cli_job.c translates) */
  } else if (!strcmp(name, "--preprocess")) {
    o->preprocess = val;
  } else if (!strcmp(name, "--postprocess")) {
    o->postprocess = val;
  } else if (!strcmp(name, "--labels")) {
    o->labels = val;
  } else if (!strcmp(name, "--errors")) {
    if (!*val) return cli_usage_error("run", "--errors: needs a file (leave the flag out for no errors file)");
    if (val[0] == '-')
      return cli_usage_error("run", "--errors '%s': looks like an option, not a file (for a file named so, write ./%s)",
                             val, val);
    o->errors = val;
  } else {
    o->tune_file = val;
  }
  return CLI_OK;
}

/* The length of NAME in an input "NAME=SOURCE" ('=' before any '/'), 0 when unnamed. */
static size_t input_name_len(const char *in) {
  const char *eq = strchr(in, '='), *slash = strchr(in, '/');
  return eq && (!slash || slash > eq) ? (size_t)(eq - in) : 0;
}

/* Parse argv into a (after the --job file); CLI_OK or an exit status. */
static int parse_args(run_args_t *a, int argc, char **argv) {
  static const char *const value_flags[] = {"--output",   "--batch-size", "--threads",       "--preprocess",
                                            "--postprocess", "--labels",  "--workers",       "--prefetch",
                                            "--infer-workers", "--shard", "--errors",        "--checkpoint-every",
                                            "--tune",     "--progress",   "--csv-header",    "--max-image-pixels",
                                            "--csv-delimiter", "--max-line-bytes", "--sqlite-table", "--profile", "--length-buckets", NULL};
  const char *val, *model = NULL;
  for (int i = 1; i < argc;) { /* the job file first, so the command line overrides it */
    int r = cli_option("run", argc, argv, &i, "--job", &val);
    if (r < 0) return CLI_USAGE;
    if (r == 0) {
      i++;
      continue;
    }
    if (a->file) return cli_usage_error("run", "--job given twice");
    cli_flag_words_job(argc, argv);
    toplu_error_t err;
    toplu_status_t st = toplu_job_options_from_json(val, &a->o, &a->file, &err);
    if (st) {
      cli_error("run", "--job %s", err.message);
      return cli_status_exit(st);
    }
  }
  int n_cli = 0, have_file_model = a->o.model != NULL;
  for (int i = 1; i < argc;) {
    if (cli_option("run", argc, argv, &i, "--job", &val)) continue;
    const char *input = NULL;
    int r = cli_option("run", argc, argv, &i, "--input", &val), matched = 0;
    if (r < 0) return CLI_USAGE;
    if (r) input = val;
    for (int k = 0; value_flags[k] && !input && !matched; k++) {
      if ((r = cli_option("run", argc, argv, &i, value_flags[k], &val)) < 0) return CLI_USAGE;
      if (r && (matched = 1) && (r = set_flag(a, value_flags[k], val)) != CLI_OK) return r;
    }
    if (matched) continue;
    if (input) {
    } else if (cli_flag(argv, &i, "--fixed-threads")) {
      a->fixed_threads = 1;
      continue;
    } else if (cli_flag(argv, &i, "--resume")) {
      a->o.resume = 1;
      continue;
    } else if (cli_flag(argv, &i, "--fail-fast")) {
      a->o.fail_fast = 1;
      continue;
    } else if (cli_flag(argv, &i, "--allow-nonfinite")) {
      a->o.allow_nonfinite = 1;
      continue;
    } else if (cli_flag(argv, &i, "--qdq-int8-all")) {
      a->o.qdq_int8_all = 1;
      continue;
    } else if (cli_flag(argv, &i, "--overwrite")) {
      a->o.overwrite = 1;
      continue;
    } else if (cli_flag(argv, &i, "--quiet") || cli_flag(argv, &i, "-q")) {
      a->quiet = 1;
      continue;
    } else if (argv[i][0] == '-' && argv[i][1]) {
      return cli_usage_error("run", "unknown option '%s'", argv[i]);
    } else if (!model && !have_file_model) {
      model = argv[i++];
      continue;
    } else {
      input = argv[i++];
    }
    if (n_cli == RUN_MAX_INPUTS) return cli_usage_error("run", "more than %d inputs given", RUN_MAX_INPUTS);
    a->inputs[n_cli++] = input;
  }
  if (model) a->o.model = model;
  if (n_cli) { /* inputs on the command line replace the job file's: by name when all are named, else all of them */
    int all_named = 1;
    for (int k = 0; k < a->o.n_inputs && all_named; k++) all_named = input_name_len(a->o.inputs[k]) > 0;
    for (int k = 0; k < n_cli && all_named; k++) all_named = input_name_len(a->inputs[k]) > 0;
    for (int k = 0; all_named && k < a->o.n_inputs; k++) { /* the file's inputs the command line does not name */
      size_t l = input_name_len(a->o.inputs[k]);
      int named = 0;
      for (int c = 0; c < n_cli && !named; c++)
        named = input_name_len(a->inputs[c]) == l && !strncmp(a->inputs[c], a->o.inputs[k], l);
      if (named) continue;
      if (n_cli == RUN_MAX_INPUTS) return cli_usage_error("run", "more than %d inputs given", RUN_MAX_INPUTS);
      a->inputs[n_cli++] = a->o.inputs[k];
    }
    a->o.inputs = a->inputs;
    a->o.n_inputs = n_cli;
  }
  if (!a->o.model) return cli_usage_error("run", "no MODEL given");
  if (!a->o.output) return cli_usage_error("run", "no --output given");
  return CLI_OK;
}

/* --batch-size auto without --tune: what `toplu tune MODEL` left in the
 * working directory, when it measured this model. */
static void find_tune_result(toplu_job_options_t *o, int quiet) {
  static const char path[] = "toplu-tune/tune.json";
  if (o->batch_size != TOPLU_JOB_BATCH_AUTO || o->tune_file || access(path, R_OK) != 0) return;
  toplu_error_t err;
  if (toplu_tune_result_matches_model(path, o->model, NULL, &err) == TOPLU_OK) o->tune_file = path;
  else if (!quiet) fprintf(stderr, "note: not using ./%s: %s\n", path, err.message);
}

int cmd_run(int argc, char **argv) {
  cli_openmp_respawn(argc, argv); /* GOMP_SPINCOUNT=3000 unless set: tools/cli.h */
  run_args_t *a = calloc(1, sizeof *a);
  if (!a) {
    cli_error("run", "out of memory for the job's settings (%zu bytes)", sizeof *a);
    return CLI_FAIL;
  }
  toplu_job_options_init(&a->o);
  int rc = parse_args(a, argc, argv);
  if (!rc) rc = cli_no_fuse_check("run");
  if (rc) {
    toplu_job_file_free(a->file);
    free(a);
    return rc;
  }
  find_tune_result(&a->o, a->quiet);
  cli_job_view_t view;
  cli_job_view_init(&view, a->o.progress_mode, a->quiet);
  a->o.log = cli_job_log;
  a->o.log_user = &view;
  a->o.progress = cli_job_progress;
  a->o.progress_user = &view;
  if (view.mode == TOPLU_PROGRESS_BAR) a->o.progress_seconds = 0.5;
  toplu_session_options_t engine; /* TOPLU_PLAN_DUMP, TOPLU_NO_BLOCKED, TOPLU_BACKENDS */
  toplu_session_options_init(&engine);
  cli_session_env(&engine);
  if (a->fixed_threads) engine.choose_threads = -1;
  toplu_model_options_t mo; /* TOPLU_NO_FUSE, for the model the job loads */
  memset(&mo, 0, sizeof mo);
  cli_model_env(&mo);
  a->o.no_fuse_attention = mo.no_fuse_attention;
  a->o.no_fuse_qdq_residual = mo.no_fuse_qdq_residual;
  a->o.no_fuse_depthwise = mo.no_fuse_depthwise;
  a->o.no_fuse_qdq_lookup = mo.no_fuse_qdq_lookup;
  a->o.no_fuse_projection = mo.no_fuse_projection;
  a->o.session = &engine;

  toplu_error_t err;
  toplu_job_t *job = NULL;
  char text[2 * TOPLU_ERROR_MESSAGE_MAX];
  /* From before the model loads, so that a signal while it loads also ends
   * in 130/143 rather than the default kill (the job then never starts). */
  run_job = NULL;
  run_signal = 0;
  void (*old_int)(int) = signal(SIGINT, on_stop_signal);
  void (*old_term)(int) = signal(SIGTERM, on_stop_signal);
  toplu_status_t st = toplu_job_create(&a->o, &job, &err);
  if (st || run_signal) {
    signal(SIGINT, old_int);
    signal(SIGTERM, old_term);
    if (st) cli_error("run", "%s", cli_flag_words("run", err.message, text, sizeof text));
    else cli_error("run", "interrupted by %s before the job started; nothing was written", run_signal == SIGTERM ? "SIGTERM" : "SIGINT");
    toplu_job_destroy(job);
    toplu_job_file_free(a->file);
    free(a);
    return st ? cli_status_exit(st) : 128 + (int)run_signal;
  }
  run_job = job;
  if (run_signal) toplu_job_cancel(job);
  st = toplu_job_run(job, &err);
  signal(SIGINT, old_int);
  signal(SIGTERM, old_term);
  run_job = NULL;
  toplu_job_stats_t stats;
  toplu_job_get_stats(job, &stats);
  if (st == TOPLU_ERR_CANCELLED) {
    cli_job_report(&view, &stats, a->o.output, 2);
    cli_error("run", "interrupted by %s (%s); run the same command with --resume to finish",
              run_signal == SIGTERM ? "SIGTERM" : "SIGINT", cli_flag_words("run", err.message, text, sizeof text));
    rc = 128 + (run_signal ? (int)run_signal : SIGINT);
  } else if (st) {
    /* a --resume whose output, part or errors file is not what its checkpoint says is refused before any row
     * runs (the sinks find it when they open): bad input, exit 2 as the help says, without a report of nothing */
    int refused = !strncmp(err.message, "resume: ", 8) && stats.batches == 0 && stats.rows_processed == 0 &&
                  stats.rows_failed == 0;
    if (!refused) cli_job_report(&view, &stats, a->o.output, 1);
    /* a write that failed mid-job (a full disk, a file size limit): the rows up to the last checkpoint are kept */
    int resumable = !refused && st == TOPLU_ERR_IO && stats.batches > 0;
    cli_error("run", "%s%s", cli_flag_words("run", err.message, text, sizeof text),
              resumable ? "; the rows up to the last checkpoint are kept: once the cause is fixed, run the same "
                          "command with --resume to finish"
                        : "");
    rc = refused ? CLI_USAGE : CLI_FAIL;
  } else {
    cli_job_report(&view, &stats, a->o.output, 0);
  }
  toplu_job_destroy(job);
  toplu_job_file_free(a->file);
  free(a);
  return rc;
}
