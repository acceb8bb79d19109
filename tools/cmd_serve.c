/*
 * tools/cmd_serve.c - `toplu serve [--model-repository DIR | MODEL.onnx] ...`
 *
 * A KServe v2 HTTP server with dynamic batching (toplu_server_start in
 * toplu/serve.h).  SIGTERM or SIGINT starts a graceful stop: readiness
 * false, no new connections, every queued and running request finished
 * (up to --exit-timeout, then 503), exit 0.
 */
#include <signal.h>
#include <stdlib.h>
#include <unistd.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#include "cli.h"
#include "toplu/serve.h"

const char cmd_serve_usage[] =
    "usage: toplu serve (--model-repository DIR | MODEL.onnx) [options]\n"
    "\n"
    "Serve models over HTTP with the KServe v2 (Open Inference Protocol) REST API,\n"
    "as Triton does: /v2/health/{live,ready}, /v2/models/NAME[/versions/V]\n"
    "[/ready|/config|/stats|/infer], /v2/repository/..., /metrics.  Requests are\n"
    "batched per model as its configuration's dynamic_batching says (docs/serve.md).\n"
    "\n"
    "  --model-repository DIR  DIR/NAME/VERSION/model.onnx, with Triton's model\n"
    "                          configuration in DIR/NAME/config.pbtxt or config.json\n"
    "  MODEL.onnx              one model, named after the file (or --model-name),\n"
    "                          with the planner's batch size and dynamic batching\n"
    "  --model-name NAME       the name of MODEL.onnx's model\n"
    "  --http-port PORT        default 8000 (0: any free port, logged)\n"
    "  --host ADDRESS          address to listen on (default 0.0.0.0)\n"
    "  --threads T             engine threads per model instance (default: the\n"
    "                          cores divided among a model's instances)\n"
    "  --fixed-threads         every batch size on those threads over the whole batch\n"
    "                          (default: each batch size's warm-up times the whole\n"
    "                          batch against one thread or slices on one thread each,\n"
    "                          keeps the faster, and times it again if its runs slow\n"
    "                          down when other work comes to share the cores)\n"
    "  --http-threads N        HTTP polling threads, each serving many connections\n"
    "                          (default: the cores, 2 to 4)\n"
    "  --max-connections N     open connections at once (default 1024; more wait to be accepted)\n"
    "  --max-request-bytes N   largest request body (default 268435456, or a quarter of\n"
    "                          the memory available when less); more is 413\n"
    "  --metrics-port N        also serve GET /metrics on port N (Triton's 8002);\n"
    "                          /metrics is on --http-port either way\n"
    "  --max-inflight-bytes N  request bodies held at once, plus JSON parses (about\n"
    "                          48 bytes a value); more is 503 (default: a quarter of\n"
    "                          the memory available, at least --max-request-bytes)\n"
    "  --cache-size BYTES      response cache bound for models with\n"
    "                          response_cache.enable (default 268435456)\n"
    "  --plan-cache-bytes N    bytes each model instance's cached plans may hold\n"
    "                          (default: half of what 80% of the memory available\n"
    "                          leaves after the model's weights)\n"
    "  --exit-timeout SECONDS  time to finish requests after SIGTERM (default 30)\n"
    "  --request-timeout SECONDS\n"
    "                          a request body still arriving after this is answered\n"
    "                          408 (default 30; 0: no limit)\n"
    "  --header-timeout SECONDS\n"
    "                          a connection without a complete request line and\n"
    "                          headers this long after it opened or after its last\n"
    "                          response is closed, idle keep-alive ones too\n"
    "                          (default 30; 0: no limit)\n"
    "  --exit-on-error [BOOL]  fail to start when any model fails to load (default:\n"
    "                          log it and serve the others)\n"
    "  --strict-readiness true|false\n"
    "                          true (default, as Triton): /v2/health/ready is 503\n"
    "                          while some model failed to load; false: ready when\n"
    "                          the models that did load are\n"
    "  --log-format text|json  server log lines on stderr (default text)\n"
    "  --access-log            one line per request on stdout\n"
    "  --quiet, -q             warnings and errors only (and the port it listens on)\n"
    "\n"
    "Exit status: 0 after a graceful stop, 1 when the server fails while starting\n"
    "(port in use, out of memory), 2 bad usage, a MODEL.onnx that does not load, or with\n"
    "--exit-on-error a repository model that does not.\n";

static toplu_server_t *volatile g_server;
static volatile sig_atomic_t g_stop; /* a SIGTERM/SIGINT came, maybe while the models loaded */
static int g_cancel;                 /* the same for toplu_server_start: loading stops (options.cancel) */
static int g_json, g_quiet;

static void on_signal(int sig) {
  (void)sig;
  g_stop = 1;
  __atomic_store_n(&g_cancel, 1, __ATOMIC_RELEASE); /* lock-free: async-signal-safe */
  toplu_server_t *s = g_server;
  if (s) toplu_server_shutdown(s);
}

static void print_log(FILE *f, toplu_log_level_t level, const char *message) {
  char t[32];
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  struct tm tm;
  gmtime_r(&ts.tv_sec, &tm);
  strftime(t, sizeof t, "%Y-%m-%dT%H:%M:%S", &tm);
  if (g_json) {
    fprintf(f, "{\"time\":\"%s.%03ldZ\",\"level\":\"%s\",\"message\":\"", t, ts.tv_nsec / 1000000, toplu_log_level_name(level));
    for (const unsigned char *p = (const unsigned char *)message; *p; p++) {
      if (*p == '"' || *p == '\\') fprintf(f, "\\%c", *p);
      else if (*p < 0x20) fprintf(f, "\\u%04x", *p);
      else fputc(*p, f);
    }
    fputs("\"}\n", f);
  } else {
    /* One line per message whatever it holds: a request path or model name with a newline or an escape
     * sequence in it (decoded from %0A, %1B) must not forge a log line or drive the terminal. */
    fprintf(f, "%s.%03ldZ %s: ", t, ts.tv_nsec / 1000000, toplu_log_level_name(level));
    for (const unsigned char *p = (const unsigned char *)message; *p; p++) {
      if (*p == '\\') fputs("\\\\", f);
      else if (*p < 0x20 || *p == 0x7f) fprintf(f, "\\x%02x", *p);
      else fputc(*p, f);
    }
    fputc('\n', f);
  }
  fflush(f);
}

static void log_fn(void *user, toplu_log_level_t level, const char *message) {
  (void)user;
  if (level >= TOPLU_LOG_DEBUG || (g_quiet && level > TOPLU_LOG_WARNING)) return;
  print_log(stderr, level, message);
}

static void access_fn(void *user, toplu_log_level_t level, const char *message) {
  (void)user;
  print_log(stdout, level, message);
}

/* GNU OpenMP's spin after each parallel region: tools/cli.h cli_openmp_respawn (docs/serve.md, "Engine
 * threads"). */

/* A boolean as tritonserver's flags take it: true/false, 1/0, yes/no, on/off, any case; -1 otherwise. */
static int bool_word(const char *v) {
  static const char *const t[] = {"true", "1", "yes", "on"}, *const f[] = {"false", "0", "no", "off"};
  for (int k = 0; k < 4; k++) {
    if (!strcasecmp(v, t[k])) return 1;
    if (!strcasecmp(v, f[k])) return 0;
  }
  return -1;
}

int cmd_serve(int argc, char **argv) {
  cli_openmp_respawn(argc, argv);
  toplu_server_options_t o;
  toplu_server_options_init(&o);
  int access = 0;
  for (int i = 1; i < argc;) {
    const char *v;
    int r;
    if ((r = cli_option("serve", argc, argv, &i, "--model-repository", &v)) != 0) {
      if (r < 0) return CLI_USAGE;
      if (o.model_repository) /* tritonserver serves the union of several; toplu serves one */
        return cli_usage_error("serve", "--model-repository given twice ('%s', '%s'): toplu serves one repository; "
                               "put the models in one folder (or link them there)",
                               o.model_repository, v);
      o.model_repository = v;
    } else if ((r = cli_option("serve", argc, argv, &i, "--model-name", &v)) != 0) {
      if (r < 0) return CLI_USAGE;
      o.model_name = v;
    } else if ((r = cli_option("serve", argc, argv, &i, "--host", &v)) != 0) {
      if (r < 0) return CLI_USAGE;
      o.host = v;
    } else if ((r = cli_option("serve", argc, argv, &i, "--log-format", &v)) != 0) {
      if (r < 0) return CLI_USAGE;
      if (!strcmp(v, "json")) g_json = 1;
      else if (strcmp(v, "text")) return cli_usage_error("serve", "--log-format: '%s' is neither text nor json", v);
    } else if ((r = cli_option("serve", argc, argv, &i, "--strict-readiness", &v)) != 0) {
      if (r < 0) return CLI_USAGE;
      int b = bool_word(v);
      if (b < 0) return cli_usage_error("serve", "--strict-readiness: '%s' is neither true nor false", v);
      o.strict_readiness = b;
    } else if (cli_flag(argv, &i, "--access-log")) {
      access = 1;
    } else if (cli_flag(argv, &i, "--fixed-threads")) {
      o.fixed_threads = 1;
    } else if (!strncmp(argv[i], "--exit-on-error=", 16)) { /* tritonserver's --exit-on-error=BOOL */
      int b = bool_word(argv[i] + 16);
      if (b < 0) return cli_usage_error("serve", "--exit-on-error: '%s' is neither true nor false", argv[i] + 16);
      o.strict_config = b;
      i++;
    } else if (cli_flag(argv, &i, "--exit-on-error")) {
      /* alone: true; followed by a boolean word (tritonserver's form): that value */
      int b = i < argc ? bool_word(argv[i]) : -1;
      o.strict_config = b < 0 ? 1 : b;
      if (b >= 0) i++;
    } else if (cli_flag(argv, &i, "--quiet") || cli_flag(argv, &i, "-q")) {
      g_quiet = 1;
    } else if (argv[i][0] == '-' && argv[i][1] == '-') {
      static const struct {
        const char *name;
        int64_t lo, hi;
      } nums[] = {{"--http-port", 0, 65535},          {"--threads", 0, TOPLU_MAX_THREADS},
                  {"--http-threads", 1, 1024},        {"--max-connections", 1, 1000000},
                  {"--max-request-bytes", 1, INT64_C(1) << 40}, {"--cache-size", 0, INT64_C(1) << 40},
                  {"--exit-timeout", 0, 86400}, {"--request-timeout", 0, 86400},
                  {"--header-timeout", 0, 86400}, {"--plan-cache-bytes", 0, INT64_C(1) << 50},
                  {"--max-inflight-bytes", 1, INT64_C(1) << 50}, {"--metrics-port", 0, 65535}};
      int k = 0, n = (int)(sizeof nums / sizeof nums[0]);
      for (; k < n; k++) {
        r = cli_option("serve", argc, argv, &i, nums[k].name, &v);
        if (r) break;
      }
      if (k == n) return cli_usage_error("serve", "unknown option '%s'", argv[i]);
      if (r < 0) return CLI_USAGE;
      int64_t x;
      if (cli_parse_int(v, nums[k].lo, nums[k].hi, &x))
        return cli_usage_error("serve", "%s: '%s' is not an integer in %lld..%lld", nums[k].name, v, (long long)nums[k].lo,
                               (long long)nums[k].hi);
      switch (k) {
      case 0: o.http_port = (int)x; break;
      case 1: o.threads = (int)x; break;
      case 2: o.http_threads = (int)x; break;
      case 3: o.max_connections = (int)x; break;
      case 4: o.max_body_bytes = (size_t)x; break;
      case 5: o.cache_bytes = (size_t)x; break;
      case 6: o.exit_timeout_ms = x * 1000; break;
      case 7: o.request_timeout_s = (int)x; break;
      case 8: o.header_timeout_s = (int)x; break;
      case 9: o.plan_cache_bytes = (size_t)x; break;
      case 10: o.max_inflight_bytes = (size_t)x; break;
      default: o.metrics_port = (int)x; break;
      }
    } else if (argv[i][0] == '-' && argv[i][1]) {
      return cli_usage_error("serve", "unknown option '%s'", argv[i]);
    } else {
      if (o.model_path) return cli_usage_error("serve", "more than one model file given ('%s', '%s')", o.model_path, argv[i]);
      o.model_path = argv[i++];
    }
  }
  if (!o.model_path && !o.model_repository) return cli_usage_error("serve", "give --model-repository DIR or MODEL.onnx");
  if (o.model_path && o.model_repository)
    return cli_usage_error("serve", "give either --model-repository DIR or MODEL.onnx, not both");
  if (o.model_name && (!*o.model_name || !strcmp(o.model_name, ".") || !strcmp(o.model_name, "..") ||
                       strchr(o.model_name, '/') || strlen(o.model_name) >= 256))
    return cli_usage_error("serve",
                           "--model-name: '%s' is not a model name (not empty, \".\" or \"..\", no '/', under 256 bytes), "
                           "as the repository API requires",
                           o.model_name);
  if (o.model_path && cli_check_input_file("serve", "model", o.model_path) != CLI_OK) return CLI_USAGE;
  o.log = log_fn;
  if (access) o.access_log = access_fn;
  struct sigaction sa;
  memset(&sa, 0, sizeof sa);
  sa.sa_handler = SIG_IGN;
  sigaction(SIGPIPE, &sa, NULL);
  /* Caught from before the models load: a stop asked for while they load
   * stops the loading at its next warm-up run (options.cancel) and exits 0,
   * without listening. */
  sa.sa_handler = on_signal;
  sigemptyset(&sa.sa_mask);
  sigaction(SIGTERM, &sa, NULL);
  sigaction(SIGINT, &sa, NULL);
  toplu_error_t err;
  toplu_server_t *srv = NULL;
  o.cancel = &g_cancel;
  toplu_status_t st = toplu_server_start(&o, &srv, &err);
  if (st == TOPLU_ERR_CANCELLED) {
    log_fn(NULL, TOPLU_LOG_NOTE, "stopped by a signal while the models loaded; not listening");
    return CLI_OK;
  }
  if (st != TOPLU_OK) {
    cli_error("serve", "%s", err.message);
    return st == TOPLU_ERR_IO && strstr(err.message, "listen") ? CLI_FAIL : cli_status_exit(st);
  }
  g_server = srv;
  if (g_quiet) { /* -q hides the server's notes, its "listening on" line too: the port is still worth a line */
    char msg[64];
    snprintf(msg, sizeof msg, "listening on port %d", toplu_server_port(srv));
    print_log(stderr, TOPLU_LOG_NOTE, msg);
  }
  if (g_stop) toplu_server_shutdown(srv);
  toplu_server_wait(g_server);
  toplu_server_destroy(g_server);
  g_server = NULL;
  return CLI_OK;
}
