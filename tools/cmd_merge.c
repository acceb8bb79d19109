/*
 * tools/cmd_merge.c - `toplu merge --output SINK SHARD_OUTPUT...`
 *
 * Joins the outputs of `toplu run --shard K/N` jobs into one output in input
 * order (toplu_job_merge in toplu/pipeline.h): JSONL and CSV files, SQLite
 * databases or .npy directories, all of one kind.
 */
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "toplu/pipeline.h"

const char cmd_merge_usage[] =
    "usage: toplu merge --output SINK SHARD_OUTPUT... [--force] [--overwrite] [--quiet]\n"
    "\n"
    "Join the outputs of sharded jobs (toplu run --shard K/N) into SINK, in\n"
    "input order.  The outputs must be of SINK's kind: .jsonl, .csv, .sqlite\n"
    "(or .db) files, or directories of .npy files.  Each shard output's job\n"
    "checkpoint (beside it or, for SQLite, inside it) orders them by shard index\n"
    "and checks them: all complete, all from one job (the same model, inputs,\n"
    "pre- and postprocessing, labels and N), shards 0..N-1 each exactly once.\n"
    "SINK appears only when complete.\n"
    "\n"
    "options:\n"
    "  --output SINK   the joined output\n"
    "  --force         join outputs without a job checkpoint too: every output in\n"
    "                  the order given, unchecked\n"
    "  --overwrite     replace an existing SINK that no toplu job or merge wrote\n"
    "                  (refused by default)\n"
    "  --quiet, -q     no summary line on stderr\n"
    "\n"
    "Exit status: 0 done, 1 failed while writing, 2 bad usage or bad shards (a\n"
    "shard missing, given twice, of another job, not complete, or not there).\n";

int cmd_merge(int argc, char **argv) {
  const char *out = NULL;
  const char **shards = calloc((size_t)argc + 1, sizeof *shards);
  int n = 0, quiet = 0, force = 0, overwrite = 0;
  if (!shards) {
    cli_error("merge", "out of memory for the list of %d arguments", argc);
    return CLI_FAIL;
  }
  for (int i = 1; i < argc;) {
    const char *val;
    int r = cli_option("merge", argc, argv, &i, "--output", &val);
    if (r < 0) {
      free(shards);
      return CLI_USAGE;
    }
    if (r > 0) {
      out = val;
    } else if (cli_flag(argv, &i, "--quiet") || cli_flag(argv, &i, "-q")) {
      quiet = 1;
    } else if (cli_flag(argv, &i, "--force")) {
      force = 1;
    } else if (cli_flag(argv, &i, "--overwrite")) {
      overwrite = 1;
    } else if (argv[i][0] == '-' && argv[i][1]) {
      free(shards);
      return cli_usage_error("merge", "unknown option '%s'", argv[i]);
    } else {
      shards[n++] = argv[i++];
    }
  }
  if (!out || !*out) {
    free(shards);
    return cli_usage_error("merge", "no --output given");
  }
  if (n == 0) {
    free(shards);
    return cli_usage_error("merge", "no shard outputs given");
  }
  char note[512];
  toplu_error_t err;
  double t0 = cli_now();
  toplu_status_t st = toplu_job_merge(out, shards, n, (force ? TOPLU_MERGE_FORCE : 0u) | (overwrite ? TOPLU_MERGE_OVERWRITE : 0u), note, sizeof note, &err);
  free(shards);
  if (st) {
    char text[2 * TOPLU_ERROR_MESSAGE_MAX];
    cli_error("merge", "%s", cli_flag_words("merge", err.message, text, sizeof text));
    return st == TOPLU_ERR_IO ? CLI_FAIL : cli_status_exit(st);
  }
  char text[1024];
  if (!quiet)
    fprintf(stderr, "toplu merge: %d shard output%s -> %s (%s), %.2f s\n", n, n == 1 ? "" : "s", out,
            cli_flag_words("merge", note, text, sizeof text), cli_now() - t0);
  return CLI_OK;
}
