/*
 * tools/cmd_tune.c - `toplu tune MODEL [options]`: measure throughput and
 * latency per batch size on this machine and pick one (see
 * include/toplu/tuner.h and docs/plan-tune.md).
 *
 * Progress (the tuner's log callback, tools/cli_text.h) goes to stderr; the table, the recommendation and where the
 * results went to stdout; DIR/tune.json, tune.csv, tune.png (gnuplot) and,
 * with --profile, trace.json.
 */
#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "cli_text.h"
#include "toplu/tuner.h"

/* The tuner's (and planner's) option fields as its messages name them, and the flags. */
static const cli_flag_name_t tune_flags[] = {
    {"latency_budget_ms", "--latency-budget"},
    {"memory_limit_bytes", "--memory-limit"},
    {"batch_sizes", "--batch-sizes"},
    {"max_seconds_per_batch", "--max-seconds"},
    {"max_seconds", "--time-limit"},
    {"max_batch", "--max-batch"},
    {"threads must", "--threads must"},
    {"plateau must", "--plateau must"},
    {"inputs: ", "--input "},
    {"shapes: ", "--shape "},
    {NULL, NULL},
};

const char cmd_tune_usage[] =
    "usage: toplu tune MODEL [--batch-sizes auto|1,2,4,...] [--latency-budget MS]\n"
    "                  [--memory-limit BYTES] [--input NAME=FILE.npy ...] [--shape NAME=DIMS ...]\n"
    "                  [--threads T] [--out DIR] [--profile] [--max-seconds S]\n"
    "                  [--time-limit S] [--max-batch N] [--plateau PCT]\n"
    "\n"
    "Measure latency (p50/p90/p99) and throughput per batch size, with the\n"
    "planner's predictions beside them, and recommend a batch size.\n"
    "\n"
    "options:\n"
    "  --batch-sizes LIST   sizes to measure; one that runs out of memory is recorded\n"
    "                       as oom; default auto: 1, 2, 4, ... until the throughput\n"
    "                       gains less than 5%, the latency budget or the memory\n"
    "                       limit (then a binary search for the largest that fits)\n"
    "  --latency-budget MS  p99 limit per batch; sizes over it are over_budget\n"
    "  --memory-limit BYTES limit on peak bytes (allocator-counted bytes + constants\n"
    "                       the plan reads in place); K, M, G, T suffixes are binary\n"
    "  --input NAME=FILE    data for an input (rows repeated to fill each batch);\n"
    "                       inputs without one get random data\n"
    "  --shape NAME=DIMS    dims for an input's symbolic dims (dim 0 is the batch);\n"
    "                       a set of sizes in a dim gives one sweep per size:\n"
    "                       x=1x3x48x{320,640,1280} (DIR/profile-K/ each, and\n"
    "                       DIR/profiles.json); sets pair up, so one length\n"
    "  --threads T          threads per run (default: all cores)\n"
    "  --out DIR            where tune.json, tune.csv, tune.png go (default toplu-tune)\n"
    "  --profile            profile the recommended size: top ops and DIR/trace.json\n"
    "                       (Chrome trace; open in chrome://tracing or Perfetto)\n"
    "  --max-seconds S      measuring cap per batch size (default 10): measuring stops once S have\n"
    "                       passed and two windows of at least 0.3 s are done (so at least 0.6 s\n"
    "                       a size, plus its warm-up of up to 3 runs), and at 3 x S in any case\n"
    "  --time-limit S       cap on the whole sweep (default 600): checked after each window\n"
    "                       and before each size but the first; a size that starts gets\n"
    "                       its plan, one run and one window (the limit may pass by that)\n"
    "  --max-batch N        largest size the automatic sweep tries (default 4096; measured\n"
    "                       itself when doubling would pass it)\n"
    "  --plateau PCT        the automatic sweep stops when doubling the batch gains\n"
    "                       less than PCT% throughput (default 5; 0: never)\n"
    "\n"
    "Exit status: 0 done, 1 failed while measuring (out of memory outside the\n"
    "limit, internal), 2 bad usage, bad input (a missing file, a model toplu\n"
    "cannot run, bad shapes, an --out that cannot be written: checked before\n"
    "measuring) or impossible settings (memory limit below batch 1's needs,\n"
    "or every listed size's; latency budget below batch 1's latency).\n";

#define TUNE_MAX_ARGS 64
#define TUNE_MAX_BATCHES 256
/* The largest batch size a list may name: 2^40 rows (toplu run's --batch-size bound). */
#define TUNE_MAX_BATCH_SIZE ((int64_t)1 << 40)

/* Bytes with an optional binary (K, M, G, T, KiB ...) or decimal (KB, MB ...) suffix; 0 or -1. */
static int tune_parse_bytes(const char *s, uint64_t *out) {
  char *end;
  double v = strtod(s, &end);
  if (end == s || !(v > 0) || !isfinite(v)) return -1;
  double mult = 1;
  if (*end) {
    const char *units = "KMGTP", *pos = strchr(units, toupper((unsigned char)*end));
    if (!pos) return -1;
    const char *rest = end + 1;
    int decimal;
    if (!*rest || !strcasecmp(rest, "iB")) decimal = 0;
    else if (!strcasecmp(rest, "B")) decimal = 1;
    else return -1;
    mult = pow(decimal ? 1000.0 : 1024.0, (double)(pos - units + 1));
  }
  if (v * mult >= 1.8e19) return -1;
  *out = (uint64_t)(v * mult);
  return 0;
}

static int cmd_tune_run(int argc, char **argv, toplu_shape_profiles_t *profiles);

int cmd_tune(int argc, char **argv) {
  cli_openmp_respawn(argc, argv); /* GOMP_SPINCOUNT=3000 unless set: tools/cli.h */
  toplu_shape_profiles_t profiles; /* --shape, sets and all: parsed and expanded by the library */
  toplu_shape_profiles_init(&profiles);
  int rc = cmd_tune_run(argc, argv, &profiles);
  toplu_shape_profiles_free(&profiles);
  return rc;
}

static int cmd_tune_run(int argc, char **argv, toplu_shape_profiles_t *profiles) {
  const char *model_path = NULL, *out_dir = "toplu-tune", *val;
  toplu_tune_options_t o;
  toplu_tune_options_init(&o);
  toplu_tune_input_t inputs[TUNE_MAX_ARGS];
  char input_names[TUNE_MAX_ARGS][256];
  int64_t batches[TUNE_MAX_BATCHES];
  for (int i = 1; i < argc;) {
    int r;
    if ((r = cli_option("tune", argc, argv, &i, "--batch-sizes", &val)) != 0) {
      if (r < 0) return CLI_USAGE;
      if (!strcmp(val, "auto")) {
        o.batch_sizes = NULL;
        o.n_batch_sizes = 0;
        continue;
      }
      int n = 0;
      const char *s = val;
      while (*s) {
        char *end;
        errno = 0;
        long long v = strtoll(s, &end, 10);
        if (end == s || v < 1 || errno == ERANGE || v > TUNE_MAX_BATCH_SIZE || n >= TUNE_MAX_BATCHES)
          return cli_usage_error("tune", "--batch-sizes '%s': expected auto or up to %d sizes in 1..%lld like 1,2,4,8",
                                 val, TUNE_MAX_BATCHES, (long long)TUNE_MAX_BATCH_SIZE);
        batches[n++] = v;
        s = end;
        if (*s == ',' && s[1]) s++;
        else if (*s) return cli_usage_error("tune", "--batch-sizes '%s': expected auto or sizes like 1,2,4,8", val);
      }
      if (!n) return cli_usage_error("tune", "--batch-sizes: no sizes given");
      o.batch_sizes = batches;
      o.n_batch_sizes = n;
    } else if ((r = cli_option("tune", argc, argv, &i, "--latency-budget", &val)) != 0) {
      if (r < 0) return CLI_USAGE;
      char *end;
      o.latency_budget_ms = strtod(val, &end);
      if (end == val || *end || !(o.latency_budget_ms > 0))
        return cli_usage_error("tune", "--latency-budget '%s': expected milliseconds > 0", val);
    } else if ((r = cli_option("tune", argc, argv, &i, "--memory-limit", &val)) != 0) {
      if (r < 0) return CLI_USAGE;
      if (tune_parse_bytes(val, &o.memory_limit_bytes))
        return cli_usage_error("tune", "--memory-limit '%s': expected bytes, e.g. 160M or 167772160", val);
    } else if ((r = cli_option("tune", argc, argv, &i, "--input", &val)) != 0) {
      if (r < 0) return CLI_USAGE;
      const char *eq = strchr(val, '=');
      if (!eq || eq == val || !eq[1]) return cli_usage_error("tune", "--input '%s': expected NAME=FILE.npy", val);
      if (o.n_inputs == TUNE_MAX_ARGS) return cli_usage_error("tune", "too many --input options");
      snprintf(input_names[o.n_inputs], sizeof input_names[0], "%.*s", (int)(eq - val), val);
      inputs[o.n_inputs].name = input_names[o.n_inputs];
      inputs[o.n_inputs].path = eq + 1;
      o.n_inputs++;
    } else if ((r = cli_option("tune", argc, argv, &i, "--shape", &val)) != 0) {
      if (r < 0) return CLI_USAGE;
      toplu_error_t serr;
      toplu_status_t sst = toplu_shape_profiles_add(profiles, val, &serr);
      if (sst) {
        cli_library_error("tune", tune_flags, serr.message);
        return cli_status_exit(sst);
      }
    } else if ((r = cli_option("tune", argc, argv, &i, "--threads", &val)) != 0) {
      int64_t v;
      if (r < 0) return CLI_USAGE;
      if (cli_parse_int(val, 0, 4096, &v)) return cli_usage_error("tune", "--threads '%s': expected 0..4096", val);
      o.threads = (int)v;
    } else if ((r = cli_option("tune", argc, argv, &i, "--out", &val)) != 0) {
      if (r < 0) return CLI_USAGE;
      out_dir = val;
    } else if ((r = cli_option("tune", argc, argv, &i, "--max-seconds", &val)) != 0) {
      if (r < 0) return CLI_USAGE;
      char *end;
      o.max_seconds_per_batch = strtod(val, &end);
      if (end == val || *end || !(o.max_seconds_per_batch > 0))
        return cli_usage_error("tune", "--max-seconds '%s': expected seconds > 0", val);
    } else if ((r = cli_option("tune", argc, argv, &i, "--time-limit", &val)) != 0) {
      if (r < 0) return CLI_USAGE;
      char *end;
      o.max_seconds = strtod(val, &end);
      if (end == val || *end || !(o.max_seconds > 0))
        return cli_usage_error("tune", "--time-limit '%s': expected seconds > 0", val);
    } else if ((r = cli_option("tune", argc, argv, &i, "--max-batch", &val)) != 0) {
      if (r < 0) return CLI_USAGE;
      if (cli_parse_int(val, 1, INT64_C(1) << 30, &o.max_batch))
        return cli_usage_error("tune", "--max-batch '%s': expected a size >= 1", val);
    } else if ((r = cli_option("tune", argc, argv, &i, "--plateau", &val)) != 0) {
      if (r < 0) return CLI_USAGE;
      char *end;
      double pct = strtod(val, &end);
      if (end == val || *end || !(pct >= 0 && pct <= 1000)) /* NaN fails both */
        return cli_usage_error("tune", "--plateau '%s': expected a percentage >= 0", val);
      o.plateau = pct / 100.0;
    } else if (cli_flag(argv, &i, "--profile")) {
      o.profile = 1;
    } else if (argv[i][0] == '-' && argv[i][1]) {
      return cli_usage_error("tune", "unknown option '%s'", argv[i]);
    } else {
      if (model_path) return cli_usage_error("tune", "one model at a time ('%s' and '%s')", model_path, argv[i]);
      model_path = argv[i++];
    }
  }
  if (!model_path) return cli_usage_error("tune", "no model given");
  /* Everything that can be checked before measuring for minutes. */
  int rc0;
  if ((rc0 = cli_check_input_file("tune", "model", model_path)) != CLI_OK) return rc0;
  if ((rc0 = cli_check_out_dir("tune", "--out", out_dir)) != CLI_OK) return rc0;
  o.inputs = inputs;
  o.profiles = profiles;
  cli_log_t log;
  cli_log_init(&log, "tune", tune_flags, stderr);
  o.log = cli_log;
  o.log_user = &log;
  toplu_error_t err;
  toplu_error_clear(&err);
  toplu_model_t *m = NULL;
  if ((rc0 = cli_no_fuse_check("tune")) != CLI_OK) return rc0;
  toplu_model_options_t mo; /* TOPLU_NO_FUSE, as toplu run loads the model */
  memset(&mo, 0, sizeof mo);
  cli_model_env(&mo);
  toplu_status_t st = toplu_model_load(model_path, &mo, &m, &err);
  if (st) {
    cli_library_error("tune", tune_flags, err.message);
    return cli_status_exit(st);
  }
  toplu_tune_profiles_result_t *r = NULL; /* one sweep per --shape profile */
  st = toplu_tune_profiles(m, &o, &r, &err);
  cli_log_end(&log);
  int rc = st ? cli_status_exit(st) : CLI_OK;
  if (r) {
    char note[4096];
    toplu_error_t werr;
    toplu_tune_profiles_print(r, stdout);
    if (toplu_tune_profiles_write(r, out_dir, note, sizeof note, &werr)) {
      cli_error("tune", "%s", werr.message);
      if (rc == CLI_OK) rc = CLI_FAIL;
    } else if (r->n_profiles == 1) {
      printf("results: %s/tune.json, %s/tune.csv%s\n", out_dir, out_dir, r->results[0]->n_events ? ", trace.json" : "");
      printf("%s\n", note);
    } else {
      printf("results: %s/profiles.json; each profile's tune.json, tune.csv and plot in %s/profile-1 .. profile-%d\n",
             out_dir, out_dir, r->n);
    }
    toplu_tune_profiles_free(r);
  }
  if (st) cli_library_error("tune", tune_flags, err.message);
  toplu_model_destroy(m);
  return rc;
}
