/*
 * tools/cmd_perf.c - `toplu perf -m MODEL [-u HOST:PORT] ...`
 *
 * A load generator for KServe v2 servers with Triton perf_analyzer's flags
 * and CSV (toplu_perf_run in toplu/perf.h): parses the flags, runs the
 * sweep, prints the table, writes the CSV and plot.
 */
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "cli.h"
#include "toplu/perf.h"

const char cmd_perf_usage[] =
    "usage: toplu perf -m MODEL [-x VERSION] [-u HOST:PORT] [-b BATCH] [--shape NAME:D1,D2,...]...\n"
    "                  [--concurrency-range START[:END[:STEP]] | --request-rate-range START[:END[:STEP]]]\n"
    "                  [--request-distribution constant|poisson] [--measurement-interval MS]\n"
    "                  [--stability-percentage P] [--max-trials N] [--percentile P] [--latency-threshold MS]\n"
    "                  [--input-data random|zero|FILE|DIR] [--input-tensor-format binary|json]\n"
    "                  [--output-tensor-format binary|json] [-f FILE.csv] [--verbose-csv] [--plot FILE.png]\n"
    "\n"
    "Measure throughput and latency of a model on a KServe v2 (Open Inference\n"
    "Protocol) HTTP server such as toplu serve or Triton, the way Triton's\n"
    "perf_analyzer does: at each concurrency (closed loop: N clients, each sending\n"
    "when its last request is answered) or request rate (open loop), windows of\n"
    "--measurement-interval ms are repeated until the last three agree within\n"
    "--stability-percentage on throughput and latency (or --max-trials windows\n"
    "ran: \"unstable\"); the level reports those three windows.  Server queue and\n"
    "compute times come from the server's /metrics (Triton's nv_inference_*).\n"
    "\n"
    "options:\n"
    "  -m MODEL                   the model's name on the server (required)\n"
    "  -x VERSION                 the model version (default: the server's choice)\n"
    "  -u HOST:PORT               the server (default localhost:8000)\n"
    "  -i http                    the protocol: only http\n"
    "  -b BATCH                   rows per request, dim 0 of every input (default 1)\n"
    "  --shape NAME:D1,D2,...     dims of an input with variable dims, without the\n"
    "                             batch dim when the model batches (repeatable)\n"
    "  --concurrency-range S:E:T  closed loop at concurrency S, S+T, ... E (default 1)\n"
    "  --request-rate-range S:E:T open loop at S, S+T, ... E requests per second\n"
    "  --request-distribution D   open loop arrivals: constant (default) or poisson\n"
    "  --measurement-interval MS, -p MS\n"
    "                             window length (default 5000)\n"
    "  --stability-percentage P, -s P\n"
    "                             windows agree within P percent (default 10)\n"
    "  --max-trials N, -r N       windows per level at most (default 10)\n"
    "  --percentile P             judge stability on the P-th percentile latency\n"
    "                             (default: the average)\n"
    "  --latency-threshold MS, -l MS\n"
    "                             stop the sweep after a level above MS\n"
    "  --input-data D             random (default), zero, a .npy file (one input; with\n"
    "                             the batch dim it sets -b), perf_analyzer's JSON, or a\n"
    "                             directory of a file per input (raw bytes; text lines)\n"
    "  --input-tensor-format F    binary (default: the binary data extension) or json\n"
    "  --output-tensor-format F   binary (default) or json\n"
    "  --shared-memory none       the only kind supported\n"
    "  --request-timeout MS       per inference (default 30000); past it: \"no response\n"
    "                             (N timed out)\"; metadata and /metrics: 30000\n"
    "  --max-connections N        open loop: connections at most (default 1000)\n"
    "  --seed N                   random data and poisson arrivals (default 1)\n"
    "  -H 'NAME: VALUE'           a header sent with every request (repeatable)\n"
    "  --async, -a, --sync        accepted (one event loop serves every client)\n"
    "  -f FILE.csv                perf_analyzer's CSV, a row per level, with toplu's\n"
    "                             \"Errors\" (failed requests) as the last column\n"
    "  --verbose-csv              add Avg latency, request/response, response wait\n"
    "  --plot FILE.png            p50 and p99 latency against throughput\n"
    "  --quiet, -q                no progress lines on stderr\n"
    "\n"
    "One-letter options take their value attached too (-p200, -mcls), as getopt.\n"
    "A client without a response (refused, reset) waits 10 ms, doubling to 1 s.\n"
    "\n"
    "Exit status: 0 done, 1 the server unreachable, the model unknown to it, or a\n"
    "level with failed requests, as perf_analyzer (the table and CSV are still\n"
    "written), 2 bad usage (a flag, a shape, an input with variable dims and no\n"
    "--shape).\n";

static volatile sig_atomic_t perf_stop;
static volatile int perf_cancel;
static void on_sigint(int sig) {
  (void)sig;
  perf_stop = 1;
  perf_cancel = 1;
}

static void perf_log(void *user, toplu_log_level_t level, const char *message) {
  const int *quiet = user;
  if (*quiet && level >= TOPLU_LOG_NOTE) return;
  fprintf(stderr, "toplu perf: %s%s\n", level == TOPLU_LOG_WARNING ? "warning: " : "", message);
}

/* START[:END[:STEP]] into r (0 for the parts not given); the parts given, or -1. */
static int parse_range(const char *s, double *r) {
  r[0] = r[1] = r[2] = 0;
  char *end;
  int k = 0;
  for (; k < 3; k++) {
    r[k] = strtod(s, &end);
    if (end == s || (*end && *end != ':') || !(r[k] >= 0)) return -1;
    if (!*end) break;
    s = end + 1;
  }
  return *end ? -1 : k + 1;
}

/* The library's field names in a message as this command's flags. */
static const char *flag_words(const char *msg, char *buf, size_t size) {
  static const struct {
    const char *from, *to;
  } words[] = {{"shapes", "--shape"},
               {"batch_size", "-b"},
               {"measurement_interval_ms", "--measurement-interval"},
               {"stability_percentage", "--stability-percentage"},
               {"max_trials", "--max-trials"},
               {"percentile", "--percentile"},
               {"input_data", "--input-data"},
               {"concurrency range", "--concurrency-range"},
               {"request rate range", "--request-rate-range"},
               {"url", "-u"}};
  size_t n = 0;
  for (const char *p = msg; *p && n + 1 < size;) {
    int hit = 0;
    for (size_t k = 0; k < sizeof words / sizeof words[0] && !hit; k++) {
      size_t l = strlen(words[k].from);
      if (strncmp(p, words[k].from, l) || (p > msg && (p[-1] == '_' || (p[-1] >= 'a' && p[-1] <= 'z')))) continue;
      int w = snprintf(buf + n, size - n, "%s", words[k].to);
      n += w > 0 && (size_t)w < size - n ? (size_t)w : 0;
      p += l;
      hit = 1;
    }
    if (!hit) buf[n++] = *p++;
  }
  buf[n] = '\0';
  return buf;
}

static void print_table(const toplu_perf_result_t *r) {
  printf("%-12s %12s %10s %9s %9s %9s %9s %9s %9s %9s %9s  %s\n",
         r->mode == TOPLU_PERF_CONCURRENCY ? "concurrency" : "rate/s", "infer/s", "req/s", "p50 us", "p90 us",
         "p95 us", "p99 us", "avg us", "queue us", "compute us", "late us", "errors");
  for (int i = 0; i < r->n_levels; i++) {
    const toplu_perf_level_t *L = &r->levels[i];
    char errs[256] = "";
    size_t n = 0;
    for (int s = 0; s < L->n_statuses; s++)
      if (L->statuses[s].status != 200 && n < sizeof errs) {
        if (L->statuses[s].status)
          n += (size_t)snprintf(errs + n, sizeof errs - n, "%s%lld x HTTP %d", n ? ", " : "", (long long)L->statuses[s].count,
                                L->statuses[s].status);
        else if (L->timeouts)
          n += (size_t)snprintf(errs + n, sizeof errs - n, "%s%lld x no response (%lld timed out)", n ? ", " : "",
                                (long long)L->statuses[s].count, (long long)L->timeouts);
        else
          n += (size_t)snprintf(errs + n, sizeof errs - n, "%s%lld x no response", n ? ", " : "",
                                (long long)L->statuses[s].count);
      }
    char queue[32] = "-", compute[32] = "-", late[32] = "-";
    if (L->server_metrics) {
      snprintf(queue, sizeof queue, "%.0f", L->server_queue_us);
      snprintf(compute, sizeof compute, "%.0f",
               L->server_compute_input_us + L->server_compute_infer_us + L->server_compute_output_us);
    }
    if (r->mode == TOPLU_PERF_REQUEST_RATE) snprintf(late, sizeof late, "%.0f", L->late_avg_us);
    printf("%-12g %12.1f %10.1f %9.0f %9.0f %9.0f %9.0f %9.0f %9s %9s %9s  %s%s\n", L->value, L->infer_per_s,
           L->requests_per_s, L->p50_us, L->p90_us, L->p95_us, L->p99_us, L->avg_us, queue, compute, late,
           n ? errs : "none", L->stable ? "" : " (unstable)");
  }
  /* the response cache, as perf_analyzer's server-side "Cache hit count" and "Cache miss count": requests it
   * answered ran no inference (a fresh user took 25,000 cache lookups a second for inferences) */
  for (int i = 0; i < r->n_levels; i++) {
    const toplu_perf_level_t *L = &r->levels[i];
    int64_t look = L->server_cache_hits + L->server_cache_misses;
    if (!L->server_metrics || look <= 0) continue;
    printf("%-12g cache: %lld hits, %lld misses (%.1f%% of lookups answered from the response cache)\n", L->value,
           (long long)L->server_cache_hits, (long long)L->server_cache_misses,
           100.0 * (double)L->server_cache_hits / (double)look);
    if (L->server_cache_hits * 2 > look)
      fprintf(stderr, "toplu perf: note: at %g most requests were answered from the model's response cache, not "
              "run: the rates and times are the cache's (send varied data with --input-data, or measure a model "
              "without response_cache)\n", L->value);
  }
}

int cmd_perf(int argc, char **argv) {
  toplu_perf_options_t o = {0};
  toplu_perf_shape_t *shapes = calloc((size_t)argc + 1, sizeof *shapes);
  const char *csv = NULL, *plot = NULL;
  int verbose_csv = 0, quiet = 0, have_conc = 0, have_rate = 0, n_headers = 0;
  const char *headers[64];
  double range[3] = {1, 1, 1};
  if (!shapes) return CLI_FAIL;
  int rc = CLI_OK;
  for (int i = 1; i < argc && rc == CLI_OK;) {
    static const char *const names[] = {"-m", "-x", "-u", "-i", "-b", "--shape", "--concurrency-range",
                                        "--request-rate-range", "--request-distribution", "--measurement-interval",
                                        "-p", "--stability-percentage", "-s", "--max-trials", "-r", "-f",
                                        "--input-data", "--shared-memory", "--input-tensor-format",
                                        "--output-tensor-format", "--latency-threshold", "-l", "--percentile",
                                        "--plot", "--seed", "--request-timeout", "-H", "--max-connections", NULL};
    const char *v = NULL;
    int which = -1, r = 0;
    for (int k = 0; names[k] && !r; k++)
      if ((r = cli_option("perf", argc, argv, &i, names[k], &v)) != 0) which = k;
    /* A one-letter option with its value attached, as getopt takes it: -p200, -mrowsum */
    for (int k = 0; names[k] && !r; k++)
      if (names[k][1] != '-' && !names[k][2] && argv[i][0] == '-' && argv[i][1] == names[k][1] && argv[i][2]) {
        v = argv[i] + 2;
        i++;
        which = k;
        r = 1;
      }
    if (r < 0) {
      rc = CLI_USAGE;
      break;
    }
    if (!r) {
      if (cli_flag(argv, &i, "--verbose-csv"))
        verbose_csv = 1;
      else if (cli_flag(argv, &i, "--quiet") || cli_flag(argv, &i, "-q"))
        quiet = 1;
      else if (cli_flag(argv, &i, "--binary"))
        o.json_input = 0;
      else if (cli_flag(argv, &i, "--async") || cli_flag(argv, &i, "-a") || cli_flag(argv, &i, "--sync"))
        ; /* perf_analyzer's client modes: toplu perf's clients are one event loop either way (closed loop at a
           * concurrency, open loop at a rate), so both measure the same thing */
      else
        rc = cli_usage_error("perf", "unknown option '%s'", argv[i]);
      continue;
    }
    const char *flag = names[which];
    int64_t n;
    double d;
    char *end;
    switch (which) {
    case 0: o.model = v; break;
    case 1: o.version = v; break;
    case 2: o.url = v; break;
    case 3:
      if (strcmp(v, "http"))
        rc = cli_usage_error("perf", "-i %s: only http is supported (grpc is not)", v);
      break;
    case 4:
      if (cli_parse_int(v, 1, INT32_MAX, &n)) rc = cli_usage_error("perf", "-b %s: not a batch size (1..2^31-1)", v);
      o.batch_size = n;
      break;
    case 5: {
      const char *colon = strrchr(v, ':');
      char why[200] = "";
      toplu_perf_shape_t *s = &shapes[o.n_shapes];
      if (!colon || colon == v) {
        rc = cli_usage_error("perf", "--shape %s: not NAME:D1,D2,...", v);
        break;
      }
      s->name = strndup(v, (size_t)(colon - v));
      s->ndim = cli_parse_shape_dims(colon + 1, s->dims, why, sizeof why);
      if (!s->name || s->ndim < 0) {
        rc = cli_usage_error("perf", "--shape %s: %s", v, why[0] ? why : "bad dims");
        free((void *)s->name);
        break;
      }
      o.n_shapes++;
      break;
    }
    case 6:
    case 7: {
      int parts = parse_range(v, range);
      if (parts < 0) {
        rc = cli_usage_error("perf", "%s %s: not START[:END[:STEP]]", flag, v);
        break;
      }
      /* perf_analyzer's values: each part given is > 0, and END >= START */
      static const char *const part[] = {"START", "END", "STEP"};
      for (int k = 0; k < parts && rc == CLI_OK; k++)
        if (range[k] == 0) rc = cli_usage_error("perf", "%s %s: %s is 0; it must be above 0", flag, v, part[k]);
      if (rc == CLI_OK && parts >= 2 && range[1] < range[0])
        rc = cli_usage_error("perf", "%s %s: END %g is below START %g", flag, v, range[1], range[0]);
      if (rc != CLI_OK) break;
      if (which == 6) have_conc = 1; else have_rate = 1;
      break;
    }
    case 8:
      if (!strcmp(v, "constant")) o.distribution = TOPLU_PERF_CONSTANT;
      else if (!strcmp(v, "poisson")) o.distribution = TOPLU_PERF_POISSON;
      else rc = cli_usage_error("perf", "--request-distribution %s: constant or poisson", v);
      break;
    case 9:
    case 10:
      if (cli_parse_int(v, 1, 3600000, &n)) rc = cli_usage_error("perf", "%s %s: milliseconds, 1..3600000", flag, v);
      o.measurement_interval_ms = n;
      break;
    case 11:
    case 12:
      d = strtod(v, &end);
      if (end == v || *end || !(d > 0 && d <= 1000))
        rc = cli_usage_error("perf", "%s %s: a percentage in (0, 1000]", flag, v);
      o.stability_percentage = d;
      break;
    case 13:
    case 14:
      if (cli_parse_int(v, 1, 100000, &n)) rc = cli_usage_error("perf", "%s %s: a count, 1..100000", flag, v);
      o.max_trials = (int)n;
      break;
    case 15: csv = v; break;
    case 16: o.input_data = v; break;
    case 17:
      if (strcmp(v, "none"))
        rc = cli_usage_error("perf", "--shared-memory %s: only none is supported", v);
      break;
    case 18:
    case 19:
      if (strcmp(v, "binary") && strcmp(v, "json")) {
        rc = cli_usage_error("perf", "%s %s: binary or json", flag, v);
        break;
      }
      *(which == 18 ? &o.json_input : &o.json_output) = !strcmp(v, "json");
      break;
    case 20:
    case 21:
      d = strtod(v, &end);
      if (end == v || *end || !(d > 0)) rc = cli_usage_error("perf", "%s %s: milliseconds > 0", flag, v);
      o.latency_threshold_ms = d;
      break;
    case 22:
      if (cli_parse_int(v, 1, 99, &n)) rc = cli_usage_error("perf", "--percentile %s: 1..99", v);
      o.percentile = (int)n;
      break;
    case 23: plot = v; break;
    case 24:
      if (cli_parse_int(v, 0, INT64_MAX, &n)) rc = cli_usage_error("perf", "--seed %s: a non-negative integer", v);
      o.seed = (uint64_t)n;
      break;
    case 25:
      if (cli_parse_int(v, 1, 3600000, &n)) rc = cli_usage_error("perf", "--request-timeout %s: 1..3600000 ms", v);
      o.request_timeout_ms = n;
      break;
    case 26:
      if (n_headers == 64) rc = cli_usage_error("perf", "-H: more than 64 headers");
      else if (!strchr(v, ':') || v[0] == ':' || strpbrk(v, "\r\n"))
        rc = cli_usage_error("perf", "-H '%s': expected \"Name: value\"", v);
      else headers[n_headers++] = v;
      break;
    case 27:
      if (cli_parse_int(v, 1, TOPLU_PERF_MAX_CLIENTS, &n))
        rc = cli_usage_error("perf", "--max-connections %s: 1..%d", v, TOPLU_PERF_MAX_CLIENTS);
      o.max_connections = n;
      break;
    default: break;
    }
  }
  if (rc == CLI_OK && (!o.model || !*o.model)) rc = cli_usage_error("perf", "no -m MODEL given");
  if (rc == CLI_OK && have_conc && have_rate)
    rc = cli_usage_error("perf", "--concurrency-range and --request-rate-range exclude each other");
  if (rc == CLI_OK && have_conc)
    for (int k = 0; k < 3 && rc == CLI_OK; k++)
      if (range[k] != (double)(int64_t)range[k] || range[k] > TOPLU_PERF_MAX_CLIENTS)
        rc = cli_usage_error("perf", "--concurrency-range: %g is not a whole number in 1..%d", range[k],
                             TOPLU_PERF_MAX_CLIENTS);
  struct stat idsb;
  if (rc == CLI_OK && o.input_data && strcmp(o.input_data, "random") && strcmp(o.input_data, "zero") &&
      !(stat(o.input_data, &idsb) == 0 && S_ISDIR(idsb.st_mode))) /* a directory: perf_analyzer's per-input files */
    rc = cli_check_input_file("perf", "--input-data", o.input_data);
  if (rc != CLI_OK) {
    for (int k = 0; k < o.n_shapes; k++) free((void *)shapes[k].name);
    free(shapes);
    return rc;
  }
  o.mode = have_rate ? TOPLU_PERF_REQUEST_RATE : TOPLU_PERF_CONCURRENCY;
  o.range_start = range[0];
  o.range_end = range[1];
  o.range_step = range[2];
  o.shapes = shapes;
  o.headers = headers;
  o.n_headers = n_headers;
  o.log = perf_log;
  o.log_user = &quiet;
  o.cancel = &perf_cancel;
  signal(SIGINT, on_sigint);

  toplu_perf_result_t res;
  toplu_error_t err;
  toplu_status_t st = toplu_perf_run(&o, &res, &err);
  for (int k = 0; k < o.n_shapes; k++) free((void *)shapes[k].name);
  free(shapes);
  char text[2 * TOPLU_ERROR_MESSAGE_MAX];
  if (st && st != TOPLU_ERR_CANCELLED) {
    cli_error("perf", "%s", flag_words(err.message, text, sizeof text));
    toplu_perf_result_free(&res);
    /* the server's answers (unreachable, unknown model, bad metadata) are failures; the caller's input is usage */
    int server = st == TOPLU_ERR_IO || st == TOPLU_ERR_OUT_OF_MEMORY || st == TOPLU_ERR_INTERNAL ||
                 ((st == TOPLU_ERR_NOT_FOUND || st == TOPLU_ERR_PARSE) && strstr(err.message, "/v2/models/"));
    return server ? CLI_FAIL : CLI_USAGE;
  }
  print_table(&res);
  rc = st ? CLI_FAIL : CLI_OK;
  if (res.note[0]) cli_error("perf", "first error response: %s", res.note);
  if (csv && res.n_levels && toplu_perf_write_csv(&res, csv, verbose_csv, &err)) {
    cli_error("perf", "%s", err.message);
    rc = CLI_FAIL;
  }
  if (plot && res.n_levels && toplu_perf_write_plot(&res, plot, &err)) {
    cli_error("perf", "%s", err.message);
    rc = CLI_FAIL;
  }
  if (res.failed_level >= 0) {
    cli_error("perf", "every request failed at %s %g", res.mode == TOPLU_PERF_CONCURRENCY ? "concurrency" : "rate",
              res.levels[res.failed_level].value);
    rc = CLI_FAIL;
  }
  /* As perf_analyzer, a measurement with failed requests fails the run. */
  for (int i = 0; i < res.n_levels; i++) {
    const toplu_perf_level_t *L = &res.levels[i];
    if (i == res.failed_level || L->requests <= L->successes) continue;
    cli_error("perf", "%lld of %lld requests failed at %s %g", (long long)(L->requests - L->successes),
              (long long)L->requests, res.mode == TOPLU_PERF_CONCURRENCY ? "concurrency" : "rate", L->value);
    rc = CLI_FAIL;
  }
  if (res.threshold_stop && !quiet) fprintf(stderr, "toplu perf: latency threshold reached; the sweep stopped\n");
  toplu_perf_result_free(&res);
  return rc;
}
