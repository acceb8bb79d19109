/*
 * tools/toplu.c - the toplu command line: dispatch to subcommands.
 *
 *   toplu COMMAND [ARGS...]     run a subcommand (see cli_commands below)
 *   toplu help [COMMAND]        list commands, or print one command's usage
 *   toplu --version             print the version
 *
 * A new subcommand adds a tools/cmd_NAME.c with `int cmd_NAME(int, char **)`
 * and its usage text, declares both in tools/cli.h and adds a row here.
 */
#include <signal.h>
#include <string.h>

#include "cli.h"
#include "core/cpu.h"

const cli_command_t cli_commands[] = {
    {"info", cmd_info, "describe a model: inputs, outputs, ops, parameters, FLOPs", cmd_info_usage},
    {"run", cmd_run, "run a model over .npy, image, CSV or JSONL inputs, in batches, storing the results", cmd_run_usage},
    {"merge", cmd_merge, "join the outputs of sharded jobs (toplu run --shard K/N) in input order", cmd_merge_usage},
    {"quantize", cmd_quantize, "int8-quantize a float model from calibration data into a QDQ ONNX model", cmd_quantize_usage},
    {"plan", cmd_plan, "predict memory, max batch and throughput per batch size on a device", cmd_plan_usage},
    {"tune", cmd_tune, "measure throughput and latency per batch size and pick one", cmd_tune_usage},
    {"serve", cmd_serve, "serve models over HTTP (KServe v2) with dynamic batching and metrics", cmd_serve_usage},
    {"perf", cmd_perf, "measure throughput and latency of a model on a KServe v2 server (perf_analyzer-like)", cmd_perf_usage},
    {NULL, NULL, NULL, NULL},
};

const cli_command_t *cli_find_command(const char *name) {
  for (const cli_command_t *c = cli_commands; c->name; c++)
    if (!strcmp(c->name, name)) return c;
  return NULL;
}

/* The overall usage: commands with their one-line help. */
static void print_usage(FILE *f) {
  fprintf(f,
          "usage: toplu COMMAND [ARGS...]\n"
          "       toplu help [COMMAND]\n"
          "       toplu --version\n"
          "\n"
          "toplu runs ONNX models on the CPU at any batch size.\n"
          "\n"
          "commands:\n");
  for (const cli_command_t *c = cli_commands; c->name; c++) fprintf(f, "  %-8s %s\n", c->name, c->summary);
  fprintf(f, "\nRun 'toplu help COMMAND' for a command's options.\n");
}

/* `toplu help [COMMAND]`. */
static int cmd_help(int argc, char **argv) {
  if (argc < 2) {
    print_usage(stdout);
    return CLI_OK;
  }
  const cli_command_t *c = cli_find_command(argv[1]);
  if (!c) {
    cli_error(NULL, "unknown command '%s'", argv[1]);
    print_usage(stderr);
    return CLI_USAGE;
  }
  fputs(c->usage, stdout);
  return CLI_OK;
}

int main(int argc, char **argv) {
  const char *isa = toplu__cpu_build_missing(); /* compiled for the baseline x86-64 (core/cpu_build.c) */
  if (isa) {
    fprintf(stderr, "toplu: this binary was built for a CPU with %s (-march=native: CMake's TOPLU_NATIVE, on by "
                    "default), which this CPU lacks; build it here, or with -DTOPLU_NATIVE=OFF to run on any "
                    "x86-64\n", isa);
    return 1;
  }
  if (argc < 2) {
    print_usage(stderr);
    return CLI_USAGE;
  }
  const char *name = argv[1];
  if (!strcmp(name, "--version") || !strcmp(name, "-V") || !strcmp(name, "version")) {
    printf("toplu %s\n", TOPLU_VERSION_STRING);
    return CLI_OK;
  }
  if (!strcmp(name, "help") || !strcmp(name, "--help") || !strcmp(name, "-h")) return cmd_help(argc - 1, argv + 1);
  const cli_command_t *c = cli_find_command(name);
  if (!c) {
    cli_error(NULL, "unknown command '%s'", name);
    print_usage(stderr);
    return CLI_USAGE;
  }
  /* `toplu CMD --help` anywhere in its arguments prints its usage. */
  for (int i = 2; i < argc; i++)
    if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
      fputs(c->usage, stdout);
      return CLI_OK;
    }
  /* A log pipe closed early (`toplu run ... 2>&1 | head`) or a file-size limit (ulimit -f) must not kill a
   * batch job, a merge or a server: with these ignored the write fails with EPIPE or EFBIG, and the
   * command reports it (a failed output write names the file and exits 1; a lost log line is lost).
   * Until 2026-12-06 SIGPIPE killed a finished job (exit 141) and SIGXFSZ a run mid-write (153). */
  signal(SIGPIPE, SIG_IGN);
  signal(SIGXFSZ, SIG_IGN);
  return c->run(argc - 1, argv + 1);
}
