/*
 * tools/cmd_plan.c - `toplu plan MODEL [options]` and `toplu plan --arch
 * config.json [options]`: the analytic batch-size calculator (see
 * include/toplu/planner.h and docs/plan-tune.md).
 *
 * Prints what memory a batch size takes on a device and what it is made
 * of, the largest batch that fits, predicted latency and throughput per
 * batch size, the recommended batch and the knee; --json prints the same as
 * one JSON object on stdout.
 */
#include <ctype.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "cli_text.h"
#include "toplu/planner.h"
#include "toplu/quantize.h"

/* The planner's option fields as its messages name them, and the flags. */
static const cli_flag_name_t plan_flags[] = {
    {"mem_fraction", "--mem-fraction"},
    {"latency_budget_ms", "--latency-budget"},
    {"batch_sizes", "--batch-sizes"},
    {"context_length", "--context-length"},
    {"memory_bytes = ", "--memory "},
    {"devices = ", "--devices "},
    {"devices must", "--devices must"},
    {"threads must", "--threads must"},
    {"calibration file: ", "--calibration: "},
    {"calibration file ", "--calibration "},
    {"config file ", "--arch "},
    {"shapes: ", "--shape "},
    {"runtime: ", "--runtime: "},
    {"runtime '", "--runtime '"},
    {NULL, NULL},
};

/* toplu_quantize_model's option fields as its messages name them (--precision int8 on a float model). */
static const cli_flag_name_t int8_flags[] = {
    {"(shapes) or calibration rows", "(--shape) or --int8-calibration"},
    {"give calibration rows", "give --int8-calibration"},
    {"calibration: ", "--int8-calibration: "},
    {NULL, NULL},
};

#define PLAN_MAX_INT8_CALIBRATION 16

const char cmd_plan_usage[] =
    "usage: toplu plan MODEL [--device NAME|cpu] [--memory BYTES] [--mem-fraction F]\n"
    "                  [--precision fp32|tf32|fp16|bf16|int8] [--latency-budget MS]\n"
    "                  [--shape NAME=DIMS ...] [--devices N] [--batch-sizes 1,2,4,...]\n"
    "                  [--runtime tensorrt|triton-tensorrt|onnxruntime-cuda|pytorch|ideal]\n"
    "                  [--calibration tune.json|measured.csv] [--threads T] [--double-buffer] [--exact] [--json]\n"
    "                  [--int8-calibration [NAME=]SOURCE ...] [--int8-preprocess SPEC]\n"
    "       toplu plan --arch config.json [--context-length N] [--device NAME] [--memory BYTES]\n"
    "                  [--mem-fraction F] [--precision P] [--devices N] [--threads T (cpu)] [--json]\n"
    "       toplu plan --list-devices\n"
    "\n"
    "Predict the memory each batch size takes (weights + activations + workspace +\n"
    "input/output buffers + runtime overhead, each from toplu's real plan), the\n"
    "largest batch that fits, and latency and throughput per batch size from a\n"
    "per-node roofline; recommend a batch size.  With shape profiles (--shape\n"
    "with {sets}), once per profile, then the batch that fits every profile.\n"
    "\n"
    "options:\n"
    "  --device NAME        a GPU of the catalog (--list-devices) or cpu (default:\n"
    "                       this machine, probed)\n"
    "  --memory BYTES       capacity instead of the device's (suffixes K, M, G, T are\n"
    "                       binary: 16G = 16 GiB; KB, MB, GB, TB decimal)\n"
    "  --mem-fraction F     share of the capacity to plan for (default 0.8)\n"
    "  --precision P        fp32 (default), tf32, fp16, bf16 (half the bytes) or int8 (on\n"
    "                       the CPU: the int8 model toplu quantize would write)\n"
    "  --int8-calibration [NAME=]SOURCE, --int8-preprocess SPEC  its calibration rows\n"
    "                       (default: 8 synthetic ones), as toplu quantize's\n"
    "  --latency-budget MS  largest acceptable latency of one batch\n"
    "  --shape NAME=DIMS    dims for an input's symbolic dims (dim 0 is the batch and\n"
    "                       is ignored), e.g. x=1,3,48,192; defaults: 3x224x224 for\n"
    "                       images, 128 otherwise.  A set of sizes in a dim gives one\n"
    "                       profile per size, planned and reported each:\n"
    "                       x=1x3x48x{320,640,1280}; sets pair up (profile k takes\n"
    "                       the k-th size of every set), so they must be of one length\n"
    "  --devices N          devices: the global batch for data parallelism; the\n"
    "                       weights are split when they do not fit one\n"
    "  --batch-sizes LIST   rows to print (default: powers of two up to the max)\n"
    "  --runtime NAME       GPU devices: the runtime whose profile, fitted to published\n"
    "                       measurements, predicts time and adds its memory:\n"
    "                       tensorrt (default: an engine alone), triton-tensorrt\n"
    "                       (Triton end to end), onnxruntime-cuda, pytorch, or ideal\n"
    "                       (the bare roofline at the spec sheet's peaks)\n"
    "  --calibration FILE   fit the latency model to a `toplu tune` tune.json, or to a\n"
    "                       CSV of BATCH,LATENCY_MS lines measured by any tool\n"
    "  --threads T          CPU threads (default: all)\n"
    "  --double-buffer      count input and output buffers twice\n"
    "  --exact              build toplu's real plan for every row (default: B = 1,\n"
    "                       2 and the max; the rows between follow the affine law)\n"
    "  --json               print one JSON object instead of text\n"
    "  --arch FILE          a transformer language model's Hugging Face config.json:\n"
    "                       weights, KV cache per token, concurrent sequences\n"
    "  --context-length N   tokens per sequence for --arch (default: the model's max)\n"
    "  --list-devices       print the device catalog\n"
    "\n"
    "Exit status: 0 done, 1 failed while planning (out of memory, internal), 2 bad\n"
    "usage, bad input (a missing file, a model toplu cannot run: unsupported op or\n"
    "opset, string inputs; bad shapes; another model's tune.json) or impossible\n"
    "settings (unknown device, memory below the weights, latency budget below\n"
    "batch 1's latency).\n";

#define PLAN_MAX_BATCHES 256

/* Parse "160M", "16GiB", "1.5G", "1000000" into bytes; 0 or -1. */
/* The int8 calibration's notes and warnings, named as the command's ("toplu plan: warning: ..."), in the
 * CLI's words. */
static void plan_log(void *user, toplu_log_level_t level, const char *message) {
  (void)user;
  char text[2 * TOPLU_ERROR_MESSAGE_MAX];
  if (level == TOPLU_LOG_DEBUG || level == TOPLU_LOG_PROGRESS) return;
  fprintf(stderr, "toplu plan: %s: %s\n", toplu_log_level_name(level), cli_flag_words("plan", message, text, sizeof text));
}

static int parse_bytes(const char *s, uint64_t *out) {
  char *end;
  double v = strtod(s, &end);
  if (end == s || !(v > 0) || !isfinite(v)) return -1;
  while (*end == ' ') end++;
  double mult = 1;
  char u = (char)toupper((unsigned char)*end);
  if (u) {
    const char *units = "KMGTP";
    const char *pos = strchr(units, u);
    if (!pos) return -1;
    int k = (int)(pos - units) + 1;
    const char *rest = end + 1;
    int decimal = 0;
    if (!strcasecmp(rest, "iB") || !*rest) decimal = 0;
    else if (!strcasecmp(rest, "B")) decimal = 1;
    else return -1;
    mult = pow(decimal ? 1000.0 : 1024.0, k);
  }
  v *= mult;
  if (v >= 1.8e19) return -1;
  *out = (uint64_t)v;
  return 0;
}

/* Parse "1,2,4" into list; count or -1. */
static int parse_batches(const char *s, int64_t *list, int cap) {
  int n = 0;
  while (*s) {
    char *end;
    long long v = strtoll(s, &end, 10);
    if (end == s || v < 1 || n >= cap) return -1;
    list[n++] = v;
    s = end;
    if (*s == ',') s++;
    else if (*s) return -1;
  }
  return n;
}

static int cmd_plan_run(int argc, char **argv, toplu_shape_profiles_t *profiles);

int cmd_plan(int argc, char **argv) {
  cli_openmp_respawn(argc, argv); /* GOMP_SPINCOUNT=3000 unless set: tools/cli.h */
  toplu_shape_profiles_t profiles; /* --shape, sets and all: parsed and expanded by the library */
  toplu_shape_profiles_init(&profiles);
  int rc = cmd_plan_run(argc, argv, &profiles);
  toplu_shape_profiles_free(&profiles);
  return rc;
}

static int cmd_plan_run(int argc, char **argv, toplu_shape_profiles_t *profiles) {
  const char *model_path = NULL, *arch = NULL, *val;
  toplu_planner_options_t o;
  toplu_planner_options_init(&o);
  int64_t batches[PLAN_MAX_BATCHES];
  const char *int8_cal[PLAN_MAX_INT8_CALIBRATION], *int8_pre = NULL;
  int n_int8_cal = 0;
  int json = 0, list = 0;
  int seen_threads = 0; /* flags given, for the combinations refused below */
  for (int i = 1; i < argc;) {
    int r;
    if ((r = cli_option("plan", argc, argv, &i, "--device", &val)) != 0) {
      if (r < 0) return CLI_USAGE;
      o.device = val;
    } else if ((r = cli_option("plan", argc, argv, &i, "--memory", &val)) != 0) {
      if (r < 0) return CLI_USAGE;
      if (parse_bytes(val, &o.memory_bytes)) return cli_usage_error("plan", "--memory '%s': expected bytes, e.g. 16G", val);
    } else if ((r = cli_option("plan", argc, argv, &i, "--mem-fraction", &val)) != 0) {
      if (r < 0) return CLI_USAGE;
      char *end;
      o.mem_fraction = strtod(val, &end);
      if (end == val || *end || !(o.mem_fraction > 0 && o.mem_fraction <= 1))
        return cli_usage_error("plan", "--mem-fraction '%s': expected a number in (0, 1]", val);
    } else if ((r = cli_option("plan", argc, argv, &i, "--precision", &val)) != 0) {
      if (r < 0) return CLI_USAGE;
      if (toplu_precision_from_name(val, &o.precision))
        return cli_usage_error("plan", "--precision '%s': expected fp32, tf32, fp16, bf16 or int8", val);
      o.precision_set = 1;
    } else if ((r = cli_option("plan", argc, argv, &i, "--latency-budget", &val)) != 0) {
      if (r < 0) return CLI_USAGE;
      char *end;
      o.latency_budget_ms = strtod(val, &end);
      if (end == val || *end || !(o.latency_budget_ms > 0))
        return cli_usage_error("plan", "--latency-budget '%s': expected milliseconds > 0", val);
    } else if ((r = cli_option("plan", argc, argv, &i, "--shape", &val)) != 0) {
      if (r < 0) return CLI_USAGE;
      toplu_error_t serr;
      toplu_status_t sst = toplu_shape_profiles_add(profiles, val, &serr);
      if (sst) {
        cli_library_error("plan", plan_flags, serr.message);
        return cli_status_exit(sst);
      }
    } else if ((r = cli_option("plan", argc, argv, &i, "--devices", &val)) != 0) {
      int64_t v;
      if (r < 0) return CLI_USAGE;
      if (cli_parse_int(val, 1, 4096, &v)) return cli_usage_error("plan", "--devices '%s': expected 1..4096", val);
      o.devices = (int)v;
    } else if ((r = cli_option("plan", argc, argv, &i, "--batch-sizes", &val)) != 0) {
      if (r < 0) return CLI_USAGE;
      int n = parse_batches(val, batches, PLAN_MAX_BATCHES);
      if (n <= 0) return cli_usage_error("plan", "--batch-sizes '%s': expected sizes >= 1 like 1,2,4,8", val);
      o.batch_sizes = batches;
      o.n_batch_sizes = n;
    } else if ((r = cli_option("plan", argc, argv, &i, "--runtime", &val)) != 0) {
      if (r < 0) return CLI_USAGE;
      o.runtime = val;
    } else if ((r = cli_option("plan", argc, argv, &i, "--calibration", &val)) != 0) {
      if (r < 0) return CLI_USAGE;
      o.calibration = val;
    } else if ((r = cli_option("plan", argc, argv, &i, "--int8-calibration", &val)) != 0) {
      if (r < 0) return CLI_USAGE;
      if (n_int8_cal == PLAN_MAX_INT8_CALIBRATION)
        return cli_usage_error("plan", "--int8-calibration: at most %d sources", PLAN_MAX_INT8_CALIBRATION);
      int8_cal[n_int8_cal++] = val;
    } else if ((r = cli_option("plan", argc, argv, &i, "--int8-preprocess", &val)) != 0) {
      if (r < 0) return CLI_USAGE;
      int8_pre = val;
    } else if ((r = cli_option("plan", argc, argv, &i, "--threads", &val)) != 0) {
      int64_t v;
      if (r < 0) return CLI_USAGE;
      if (cli_parse_int(val, 0, 4096, &v)) return cli_usage_error("plan", "--threads '%s': expected 0..4096", val);
      o.threads = (int)v;
      seen_threads = 1;
    } else if ((r = cli_option("plan", argc, argv, &i, "--arch", &val)) != 0) {
      if (r < 0) return CLI_USAGE;
      arch = val;
    } else if ((r = cli_option("plan", argc, argv, &i, "--context-length", &val)) != 0) {
      int64_t v;
      if (r < 0) return CLI_USAGE;
      if (cli_parse_int(val, 1, INT64_C(1) << 40, &v))
        return cli_usage_error("plan", "--context-length '%s': expected tokens >= 1", val);
      o.context_length = v;
    } else if (cli_flag(argv, &i, "--json")) {
      json = 1;
    } else if (cli_flag(argv, &i, "--double-buffer")) {
      o.double_buffer = 1;
    } else if (cli_flag(argv, &i, "--exact")) {
      o.exact = 1;
    } else if (cli_flag(argv, &i, "--list-devices")) {
      list = 1;
    } else if (argv[i][0] == '-' && argv[i][1]) {
      return cli_usage_error("plan", "unknown option '%s'", argv[i]);
    } else {
      if (model_path) return cli_usage_error("plan", "one model at a time ('%s' and '%s')", model_path, argv[i]);
      model_path = argv[i++];
    }
  }
  if (list) {
    cli_print_device_catalog(stdout);
    return CLI_OK;
  }
  o.profiles = profiles;
  toplu_error_t err;
  toplu_error_clear(&err);
  toplu_status_t st;
  const int cpu = !o.device || !strcasecmp(o.device, "cpu");
  if (int8_pre && !n_int8_cal)
    return cli_usage_error("plan", "--int8-preprocess prepares the rows of --int8-calibration: give --int8-calibration "
                                   "[NAME=]SOURCE too (without it the rows are synthetic: nothing to preprocess)");
  if (arch) {
    if (model_path) return cli_usage_error("plan", "give a MODEL or --arch CONFIG, not both");
    /* What a plan from a config.json (no ONNX model: nothing built, run or measured) has no use for */
    const char *unused = o.latency_budget_ms > 0        ? "--latency-budget"
                         : o.calibration                ? "--calibration"
                         : profiles->n_profiles > 0     ? "--shape"
                         : o.n_batch_sizes > 0          ? "--batch-sizes"
                         : o.runtime                    ? "--runtime"
                         : o.exact                      ? "--exact"
                         : o.double_buffer              ? "--double-buffer"
                         : n_int8_cal                   ? "--int8-calibration"
                         : seen_threads && !cpu         ? "--threads"
                                                        : NULL;
    if (unused)
      return cli_usage_error("plan", "%s does not apply to --arch%s: a config.json plan has no ONNX model to build, "
                                     "run or calibrate; --arch takes --context-length, --device, --memory, "
                                     "--mem-fraction, --precision, --devices, --threads (the cpu device's probe) and "
                                     "--json",
                             unused, seen_threads && !cpu && !strcmp(unused, "--threads") ? " on a GPU" : "");
    int rc0 = cli_check_input_file("plan", "config.json", arch);
    if (rc0 != CLI_OK) return rc0;
    toplu_arch_plan_t *a = NULL;
    if ((st = toplu_plan_arch(arch, &o, &a, &err))) {
      cli_library_error("plan", plan_flags, err.message);
      if (st == TOPLU_ERR_NOT_FOUND) fprintf(stderr, "  (toplu plan --list-devices: each device's memory and peak rates)\n");
      return cli_status_exit(st);
    }
    if (json) {
      char *s = toplu_arch_plan_json(a);
      if (!s) {
        toplu_arch_plan_free(a);
        cli_error("plan", "out of memory");
        return CLI_FAIL;
      }
      printf("%s\n", s);
      free(s);
    } else {
      toplu_arch_plan_print(a, stdout);
    }
    toplu_arch_plan_free(a);
    return CLI_OK;
  }
  if (!model_path) return cli_usage_error("plan", "no model given (or --arch config.json)");
  if (o.context_length)
    return cli_usage_error("plan", "--context-length goes with --arch config.json (a transformer's tokens per "
                                   "sequence); for a MODEL give a sequence length with --shape NAME=1xLEN");
  {
    int rc0 = cli_check_input_file("plan", "model", model_path);
    if (rc0 != CLI_OK) return rc0;
  }
  /* Check the device first: an unknown name needs no model. */
  if (o.device) {
    toplu_device_info_t d;
    if (strcasecmp(o.device, "cpu") && (st = toplu_device_lookup(o.device, o.threads, &d, &err))) {
      cli_library_error("plan", plan_flags, err.message);
      fprintf(stderr, "  (toplu plan --list-devices: each device's memory and peak rates)\n");
      return cli_status_exit(st);
    }
  }
  const int nf_rc = cli_no_fuse_check("plan");
  if (nf_rc != CLI_OK) return nf_rc;
  toplu_model_t *m = NULL;
  toplu_model_options_t mo;
  toplu_plan_model_options(&o, &mo);
  cli_model_env(&mo); /* TOPLU_NO_FUSE, as toplu run loads the model */
  if ((st = toplu_model_load(model_path, &mo, &m, &err))) {
    cli_library_error("plan", plan_flags, err.message);
    return cli_status_exit(st);
  }
  /* int8 on the CPU: the int8 model toplu would run; a GPU runtime's int8 engine holds int8 weights where toplu's
   * CPU plan may hold dequantized float ones, so a GPU plan scales the float plan instead */
  const int quantize = o.precision == TOPLU_PRECISION_INT8 && cpu && !toplu_model_quantized_nodes(m);
  if ((n_int8_cal || int8_pre) && !quantize) {
    toplu_model_destroy(m);
    return cli_usage_error("plan", "--int8-calibration and --int8-preprocess go with --precision int8 on a float "
                                   "model on the CPU");
  }
  char int8_note[1024] = "";
  const char *notes[1] = {int8_note};
  if (quantize) {
    /* batch 1's inputs must fit before the model runs on calibration rows at these shapes */
    if ((st = toplu_plan_check_inputs(m, &o, &err))) {
      cli_library_error("plan", plan_flags, err.message);
      toplu_model_destroy(m);
      return cli_status_exit(st);
    }
    toplu_quantize_options_t qo;
    toplu_quantize_options_init(&qo);
    qo.model = model_path;
    qo.calibration = int8_cal;
    qo.n_calibration = n_int8_cal;
    qo.preprocess = int8_pre;
    qo.threads = o.threads;
    if (profiles->n_profiles > 0) {
      qo.shapes = profiles->shapes;
      qo.n_shapes = profiles->n_shapes;
    }
    qo.log = plan_log;
    toplu_quantize_stats_t qs;
    toplu_model_t *m8 = NULL;
    st = toplu_quantize_model(&qo, &mo, &m8, &qs, &err);
    if (st == TOPLU_ERR_UNSUPPORTED && qs.nothing_to_quantize) {
      /* nothing becomes int8: the model runs as it is, so that is what is planned */
      if (qs.subgraph_nodes)
        snprintf(int8_note, sizeof int8_note,
                 "--precision int8: nothing in this model could be quantized, so it is planned in fp32 as toplu "
                 "runs it: its %d Conv, ConvTranspose, Gemm, MatMul or Add node%s %s inside subgraphs (If, Loop or "
                 "Scan bodies), which toplu quantize leaves float",
                 qs.subgraph_nodes, qs.subgraph_nodes == 1 ? "" : "s", qs.subgraph_nodes == 1 ? "is" : "are");
      else
        snprintf(int8_note, sizeof int8_note,
                 "--precision int8: nothing in this model could be quantized (no Conv, ConvTranspose, Gemm, MatMul "
                 "or Add node takes float activations and constant weights), so it is planned in fp32 as toplu "
                 "runs it");
      o.precision = TOPLU_PRECISION_FP32;
      cli_log_stderr(NULL, TOPLU_LOG_NOTE, int8_note); /* also where the fp32 plan fails in turn */
    } else if (st) {
      cli_library_error("plan", int8_flags, err.message);
      toplu_model_destroy(m);
      return cli_status_exit(st);
    } else {
      toplu_model_destroy(m);
      m = m8;
      o.source_model = model_path; /* the plan is of a model no file holds: a tune.json cannot be of it */
      if (!n_int8_cal)
        snprintf(int8_note, sizeof int8_note,
                 "int8: the model was quantized in memory with %lld synthetic rows (standard normal): which nodes "
                 "stay float depends on them; --int8-calibration [NAME=]SOURCE gives the real choice",
                 (long long)(qo.synthetic_rows > 0 ? qo.synthetic_rows : 8));
    }
    if (int8_note[0]) {
      o.notes = notes;
      o.n_notes = 1;
    }
  }
  toplu_profile_plans_t *p = NULL; /* one plan per --shape profile */
  st = toplu_plan_profiles(m, &o, &p, &err);
  if (st) {
    cli_library_error("plan", plan_flags, err.message);
    toplu_model_destroy(m);
    return cli_status_exit(st);
  }
  if (json) {
    char *s = toplu_profile_plans_json(p);
    if (!s) {
      cli_error("plan", "out of memory");
      toplu_profile_plans_free(p);
      toplu_model_destroy(m);
      return CLI_FAIL;
    }
    printf("%s\n", s);
    free(s);
  } else {
    toplu_profile_plans_print(p, stdout);
  }
  toplu_profile_plans_free(p);
  toplu_model_destroy(m);
  return CLI_OK;
}
