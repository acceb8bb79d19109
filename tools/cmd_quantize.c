/*
 * tools/cmd_quantize.c - `toplu quantize MODEL --calibration [NAME=]SOURCE --output OUT.onnx`
 *
 * Static int8 quantization from real calibration data into a QDQ ONNX model
 * (toplu_quantize in toplu/quantize.h): parse the flags, fill the options,
 * one call, map the status to an exit code.
 */
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli.h"
#include "toplu/quantize.h"

const char cmd_quantize_usage[] =
    "usage: toplu quantize MODEL --calibration [NAME=]SOURCE... --output OUT.onnx [options]\n"
    "       toplu quantize MODEL --dynamic --output OUT.onnx [--op-types L] [--exclude N] [--per-tensor]\n"
    "\n"
    "Quantize a float ONNX model to int8 from real calibration data and write a\n"
    "standard QDQ model (QuantizeLinear/DequantizeLinear, opset >= 13) that toplu\n"
    "and ONNX Runtime run.  The calibration rows run through toplu's engine once;\n"
    "every tensor quantized gets its range from them.  Activations are uint8 with\n"
    "a zero point, weights int8 symmetric, per output channel, biases int32.\n"
    "\n"
    "--dynamic writes ONNX Runtime's dynamic quantization instead (no calibration):\n"
    "MatMul and Gemm weights int8 per output column, activations quantized at run\n"
    "time (DynamicQuantizeLinear -> MatMulInteger -> Cast -> Mul [-> Add]).\n"
    "\n"
    "options:\n"
    "  --dynamic              dynamic quantization of MatMul/Gemm (transformers); only\n"
    "                         --op-types (MatMul,Gemm), --exclude, --per-tensor and -q apply\n"
    "  --calibration [NAME=]SOURCE  calibration rows, as toplu run's --input: .npy,\n"
    "                         a folder or glob of images, .csv or .jsonl (repeat per input)\n"
    "  --output OUT.onnx      the quantized model\n"
    "  --preprocess SPEC      as toplu run's (resize=WxH,scale=1/255,mean=...,std=...)\n"
    "  --method M             percentile[=P] (default; P: percent of values kept, default\n"
    "                         99.999), minmax or entropy\n"
    "  --per-channel          per-channel weight scales (the default)\n"
    "  --per-tensor           one scale per weight tensor\n"
    "  --symmetric-activations  int8 activations with zero point 0 (default uint8)\n"
    "  --op-types LIST        ops to quantize (default Conv,ConvTranspose,Gemm,MatMul,Add;\n"
    "                         also Mul)\n"
    "  --exclude NODES        comma-separated node names to leave float (an unnamed node:\n"
    "                         OPTYPE_INDEX, its index among the file's nodes, e.g. Conv_3)\n"
    "  --max-node-error E     leave float a Conv/Gemm/MatMul whose quantization is estimated\n"
    "                         to add more than E relative RMS error to its output\n"
    "                         (default 0.03; none: quantize them all)\n"
    "  --calibration-rows N   use only the first N rows (default all)\n"
    "  --batch-size N         rows per calibration batch (default 8)\n"
    "  --report FILE.json     per tensor range, scale and zero point; per node of --op-types\n"
    "                         whether it was quantized (if not, why), its estimated error and\n"
    "                         the error of its output against float (a 2nd pass)\n"
    "  --threads N            threads per run (default all cores)\n"
    "  --csv-header auto|yes|no  --csv-delimiter C   CSV sources, as toplu run\n"
    "  --quiet, -q            no progress or summary (warnings still show)\n"
    "\n"
    "OUT.onnx and the report are written to new temporary files beside them\n"
    "(OUT.onnx.XXXXXX.part) and renamed when complete; an existing OUT.onnx or report\n"
    "that is not a regular file (a link, device, FIFO) is refused.  SIGINT or SIGTERM\n"
    "stop the call and leave no file (a second one kills).\n"
    "\n"
    "Exit status: 0 written, 1 failed while running (also writing the files: a full\n"
    "disk, a file size limit), 2 bad usage or bad input (a path refused before\n"
    "calibrating, a bad row, an input the model lacks),\n"
    "130 stopped by SIGINT, 143 stopped by SIGTERM.\n";

/* The flag toplu_quantize watches (options.cancel) and the signal that set it. */
static int q_cancel;
static volatile sig_atomic_t q_signal;

/* First SIGINT/SIGTERM: cancel (the library removes its temporary files); a second one kills. */
static void on_stop_signal(int sig) {
  q_signal = sig;
  toplu_run_cancel(&q_cancel);
  signal(sig, SIG_DFL);
}

typedef struct qview {
  int quiet, tty, drawn;
} qview_t;

static void q_log(void *user, toplu_log_level_t level, const char *message) {
  qview_t *v = user;
  if (v->drawn) {
    fputc('\n', stderr);
    v->drawn = 0;
  }
  if (v->quiet && level > TOPLU_LOG_WARNING) return;
  char text[2 * TOPLU_ERROR_MESSAGE_MAX];
  fprintf(stderr, "toplu quantize: %s: %s\n", toplu_log_level_name(level),
          cli_flag_words("quantize", message, text, sizeof text));
}

static void q_progress(void *user, const toplu_quantize_stats_t *s) {
  qview_t *v = user;
  if (v->quiet) return;
  const char *what = s->pass == 2 ? "report pass" : "calibrating";
  double pct = s->rows_total > 0 ? 100.0 * (double)s->rows_done / (double)s->rows_total : 0;
  if (v->tty) {
    int w = 30, fill = (int)(pct / 100.0 * w + 0.5);
    char bar[64];
    for (int i = 0; i < w; i++) bar[i] = i < fill ? '#' : '.';
    bar[w] = '\0';
    fprintf(stderr, "\r%s [%s] %lld/%lld rows %.1f s", what, bar, (long long)s->rows_done, (long long)s->rows_total,
            s->seconds);
    v->drawn = 1;
  } else {
    fprintf(stderr, "toplu quantize: %s %lld/%lld rows (%.0f%%), %.1f s\n", what, (long long)s->rows_done,
            (long long)s->rows_total, pct, s->seconds);
  }
}

int cmd_quantize(int argc, char **argv) {
  toplu_quantize_options_t o;
  toplu_quantize_options_init(&o);
  const char **calib = calloc((size_t)argc + 1, sizeof *calib);
  if (!calib) {
    cli_error("quantize", "out of memory for the list of %d arguments", argc);
    return CLI_FAIL;
  }
  int quiet = 0;
  const char *model = NULL;
  /* the calibration-only flags given (refused with --dynamic), by name */
  const char *calib_only = NULL;
  const char *scales_flag = NULL; /* --per-channel or --per-tensor, the one given */
  int rc = CLI_OK;
  for (int i = 1; i < argc && rc == CLI_OK;) {
    const char *val = NULL, *name = argv[i];
    static const char *const opts[] = {"--calibration", "--output", "--preprocess", "--method", "--op-types",
                                       "--exclude", "--calibration-rows", "--batch-size", "--report", "--threads",
                                       "--csv-header", "--csv-delimiter", "--max-node-error"};
    int r = 0, which = -1;
    for (size_t k = 0; k < sizeof opts / sizeof *opts && r == 0; k++) {
      r = cli_option("quantize", argc, argv, &i, opts[k], &val);
      if (r) which = (int)k;
    }
    if (r < 0) {
      rc = CLI_USAGE;
      break;
    }
    int64_t n;
    if (r > 0) {
      static const int calib_flag[] = {1, 0, 1, 1, 0, 0, 1, 1, 1, 1, 1, 1, 1};
      if (calib_flag[which] && !calib_only) calib_only = opts[which];
      switch (which) {
        case 0: calib[o.n_calibration++] = val; break;
        case 1: o.output = val; break;
        case 2: o.preprocess = val; break;
        case 3:
          if (!strcmp(val, "minmax")) o.method = TOPLU_CALIB_MINMAX;
          else if (!strcmp(val, "entropy")) o.method = TOPLU_CALIB_ENTROPY;
          else if (!strcmp(val, "percentile")) o.method = TOPLU_CALIB_PERCENTILE;
          else if (!strncmp(val, "percentile=", 11)) {
            char *end;
            o.method = TOPLU_CALIB_PERCENTILE;
            o.percentile = strtod(val + 11, &end);
            if (end == val + 11 || *end || !(o.percentile >= 50 && o.percentile <= 100))
              rc = cli_usage_error("quantize", "--method '%s': the percentile is the percent of values kept, 50..100", val);
          } else {
            rc = cli_usage_error("quantize", "--method '%s': expected minmax, entropy or percentile[=P]", val);
          }
          break;
        case 4:
          if (!*val) rc = cli_usage_error("quantize", "--op-types '': name the op types (Conv,ConvTranspose,Gemm,MatMul,Add,Mul)");
          o.op_types = val;
          break;
        case 5: o.exclude = val; break;
        case 6:
          if (cli_parse_int(val, 1, INT64_C(1) << 40, &n)) rc = cli_usage_error("quantize", "--calibration-rows '%s': expected rows >= 1", val);
          o.calibration_rows = n;
          break;
        case 7:
          if (cli_parse_int(val, 1, 1 << 20, &n)) rc = cli_usage_error("quantize", "--batch-size '%s': expected 1..1048576", val);
          o.batch_size = n;
          break;
        case 8: o.report = val; break;
        case 9:
          if (cli_parse_int(val, 1, TOPLU_MAX_THREADS, &n)) rc = cli_usage_error("quantize", "--threads '%s': expected 1..%d", val, TOPLU_MAX_THREADS);
          o.threads = (int)n;
          break;
        case 10:
          if (!strcmp(val, "auto")) o.csv_header = TOPLU_CSV_HEADER_AUTO;
          else if (!strcmp(val, "yes")) o.csv_header = TOPLU_CSV_HEADER_YES;
          else if (!strcmp(val, "no")) o.csv_header = TOPLU_CSV_HEADER_NO;
          else rc = cli_usage_error("quantize", "--csv-header '%s': expected auto, yes or no", val);
          break;
        case 11:
          if (strlen(val) != 1 && strcmp(val, "\\t")) rc = cli_usage_error("quantize", "--csv-delimiter '%s': one character", val);
          o.csv_delimiter = !strcmp(val, "\\t") ? '\t' : val[0];
          break;
        case 12: {
          char *end;
          o.max_node_error = !strcmp(val, "none") ? -1.0 : strtod(val, &end);
          if (strcmp(val, "none") && (end == val || *end || !(o.max_node_error > 0)))
            rc = cli_usage_error("quantize", "--max-node-error '%s': a relative error above 0 (0.03), or none", val);
          break;
        }
      }
    } else if (cli_flag(argv, &i, "--dynamic")) {
      o.dynamic = 1;
    } else if (cli_flag(argv, &i, "--per-channel") || cli_flag(argv, &i, "--per-tensor")) {
      /* both given: refused, not the last one taken (a fresh user's finding of 2026-12-06) */
      int pc = !strcmp(argv[i - 1], "--per-channel");
      if (scales_flag && strcmp(scales_flag, argv[i - 1]))
        rc = cli_usage_error("quantize", "--per-channel and --per-tensor: give one (weights get one or the other)");
      scales_flag = pc ? "--per-channel" : "--per-tensor";
      o.per_channel = pc;
    } else if (cli_flag(argv, &i, "--symmetric-activations")) {
      o.symmetric_activations = 1;
      if (!calib_only) calib_only = "--symmetric-activations";
    } else if (cli_flag(argv, &i, "--quiet") || cli_flag(argv, &i, "-q")) {
      quiet = 1;
    } else if (name[0] == '-' && name[1]) {
      rc = cli_usage_error("quantize", "unknown option '%s'", name);
    } else if (!model) {
      model = argv[i++];
    } else {
      rc = cli_usage_error("quantize", "a second model '%s' (one model per call%s)", name,
                           strchr(name, '=') ? "; give --calibration again for each input's SOURCE" : "");
    }
  }
  if (rc == CLI_OK && !model) rc = cli_usage_error("quantize", "no MODEL given");
  if (rc == CLI_OK && !o.output) rc = cli_usage_error("quantize", "no --output given");
  if (rc == CLI_OK && o.n_calibration == 0 && !o.dynamic)
    rc = cli_usage_error("quantize", "no --calibration source given (or --dynamic)");
  if (rc == CLI_OK && o.dynamic && calib_only)
    rc = cli_usage_error("quantize", "--dynamic takes no %s: it has no calibration rows (activations are quantized at "
                         "run time)", calib_only);
  if (rc == CLI_OK) rc = cli_check_input_file("quantize", "model", model);
  if (rc != CLI_OK) {
    free(calib);
    return rc;
  }
  o.model = model;
  o.calibration = calib;
  qview_t view = {.quiet = quiet, .tty = isatty(2)};
  o.log = q_log;
  o.log_user = &view;
  o.progress = q_progress;
  o.progress_user = &view;
  o.progress_seconds = view.tty ? 0.25 : 5.0;
  toplu_quantize_stats_t s;
  toplu_error_t err;
  q_cancel = 0;
  q_signal = 0;
  o.cancel = &q_cancel;
  void (*old_int)(int) = signal(SIGINT, on_stop_signal);
  void (*old_term)(int) = signal(SIGTERM, on_stop_signal);
  /* a file size limit (ulimit -f) is a write error to report, with the temporary file removed, not a kill */
  void (*old_xfsz)(int) = signal(SIGXFSZ, SIG_IGN);
  toplu_status_t st = toplu_quantize(&o, &s, &err);
  signal(SIGINT, old_int);
  signal(SIGTERM, old_term);
  signal(SIGXFSZ, old_xfsz);
  free(calib);
  if (view.drawn) fputc('\n', stderr);
  if (st) {
    char text[2 * TOPLU_ERROR_MESSAGE_MAX];
    cli_flag_words("quantize", err.message, text, sizeof text);
    if (st == TOPLU_ERR_CANCELLED) {
      int sig = q_signal ? (int)q_signal : SIGINT;
      cli_error("quantize", "interrupted by %s (%s)", sig == SIGTERM ? "SIGTERM" : "SIGINT", text);
      return 128 + sig;
    }
    cli_error("quantize", "%s", text);
    return s.write_failed ? CLI_FAIL : cli_status_exit(st); /* writing is running; a bad path is refused earlier */
  }
  if (!quiet && o.dynamic)
    fprintf(stderr,
            "toplu quantize: %s -> %s: %d nodes quantized dynamically (%d weights int8%s, %d DynamicQuantizeLinear), "
            "opset %lld, %.1f s\n",
            model, o.output, s.nodes_quantized, s.weights_quantized, s.per_channel ? " per column" : " per tensor",
            s.tensors_quantized, (long long)s.opset, s.seconds);
  else if (!quiet) {
    char left[160];
    if (o.max_node_error < 0)
      snprintf(left, sizeof left, "no node left float for its error (--max-node-error none)");
    else if (s.nodes_left_float == 0)
      snprintf(left, sizeof left, "no node left float for its error (limit %g)",
               o.max_node_error > 0 ? o.max_node_error : TOPLU_QUANTIZE_MAX_NODE_ERROR);
    else
      snprintf(left, sizeof left, "%d left float for their estimated error above %g (named in the note above%s)",
               s.nodes_left_float, o.max_node_error > 0 ? o.max_node_error : TOPLU_QUANTIZE_MAX_NODE_ERROR,
               o.report ? " and in --report" : "");
    fprintf(stderr,
            "toplu quantize: %s -> %s: %d nodes quantized (%d weights int8%s, %d activation tensors), %s, %d folded, "
            "opset %lld, %s over %lld calibration rows%s, %.1f s\n",
            model, o.output, s.nodes_quantized, s.weights_quantized, s.per_channel ? " per channel" : " per tensor",
            s.tensors_quantized, left, s.nodes_folded, (long long)s.opset, toplu_calib_method_name(o.method),
            (long long)s.rows_done, s.rows_bad ? " (some bad rows left out)" : "", s.seconds);
  }
  return CLI_OK;
}
