/*
 * tests/test_serve_pbtxt.c - src/serve/pbtxt.c: Triton's config.pbtxt
 * (protobuf text format) to the JSON srv_config_parse reads.  Configs as
 * Triton's documentation and examples write them (densenet_onnx, simple,
 * inception_graphdef, dynamic batching with priorities), compared with the
 * JSON they must give and read back through srv_config_parse; a repeated
 * field given once, map fields, comments and separators, every literal form;
 * bad input (unterminated string, missing brace, depth and size bombs, ...)
 * with the message's line and column; every prefix of a config and random
 * bytes never crash.
 *
 * Usage: test_serve_pbtxt
 */
#include <jansson.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "serve/config.h"
#include "serve/pbtxt.h"

static char g_err[1024];
static srv_config_t g_cfg; /* large: keep it off the stack */

/* text converted; NULL (and g_err set) when refused. */
static json_t *convert(const char *text, size_t len) {
  g_err[0] = 0;
  char *s = srv_pbtxt_to_json(text, len, "repo/m/config.pbtxt", g_err, sizeof g_err);
  if (!s) return NULL;
  json_error_t je;
  json_t *v = json_loads(s, 0, &je);
  if (!v) fail_msg("the converter wrote invalid JSON (%s): %s", je.text, s);
  free(s);
  return v;
}

/* text must convert to the JSON want. */
static void gives(const char *text, const char *want) {
  json_t *got = convert(text, strlen(text));
  if (!got) fail_msg("refused: %s\n  config: %s", g_err, text);
  json_error_t je;
  json_t *w = json_loads(want, 0, &je);
  if (!w) fail_msg("bad expected JSON in the test (%s): %s", je.text, want);
  if (!json_equal(got, w)) {
    char *g = json_dumps(got, JSON_COMPACT | JSON_SORT_KEYS), *e = json_dumps(w, JSON_COMPACT | JSON_SORT_KEYS);
    fail_msg("config:\n%s\ngave  %s\nwanted %s", text, g, e);
  }
  json_decref(got);
  json_decref(w);
}

/* text must be refused with "repo/m/config.pbtxt: line L column C: " and every NULL-terminated part. */
static void refused_at(const char *text, size_t len, int line, int col, ...) {
  json_t *got = convert(text, len);
  if (got) {
    char *g = json_dumps(got, JSON_COMPACT);
    fail_msg("accepted as %s: %.200s", g, text);
  }
  if (getenv("TOPLU_TEST_VERBOSE")) printf("  %s\n", g_err);
  char head[128];
  snprintf(head, sizeof head, "repo/m/config.pbtxt: line %d column %d: ", line, col);
  if (strncmp(g_err, head, strlen(head)) != 0) fail_msg("message \"%s\" does not start with \"%s\"", g_err, head);
  va_list ap;
  va_start(ap, col);
  const char *part;
  while ((part = va_arg(ap, const char *)) != NULL)
    if (!strstr(g_err, part)) fail_msg("message \"%s\" lacks \"%s\"", g_err, part);
  va_end(ap);
}

#define REFUSED(text, line, col, ...) refused_at(text, strlen(text), line, col, __VA_ARGS__, NULL)

/* Converted and parsed as a config; 0 or -1 with g_err. */
static int parse_config(const char *text) {
  g_err[0] = 0;
  char *s = srv_pbtxt_to_json(text, strlen(text), "repo/m/config.pbtxt", g_err, sizeof g_err);
  if (!s) return -1;
  int rc = srv_config_parse(s, strlen(s), "repo/m/config.pbtxt", &g_cfg, g_err, sizeof g_err);
  free(s);
  return rc;
}

/* text without its platform line (a static copy, valid until the next call) */
static const char *without_platform(const char *text) {
  static char buf[4096];
  const char *p = strstr(text, "platform:"), *e = p ? strchr(p, '\n') : NULL;
  assert_true(p && e && strlen(text) < sizeof buf);
  snprintf(buf, sizeof buf, "%.*s%s", (int)(p - text), text, e + 1);
  return buf;
}

/* ---- configs from Triton's documentation and examples ---- */

/* densenet_onnx of Triton's quickstart: no batching, a reshape, a label file. */
static const char *kDensenet =
    "name: \"densenet_onnx\"\n"
    "platform: \"onnxruntime_onnx\"\n"
    "max_batch_size : 0\n"
    "input [\n"
    "  {\n"
    "    name: \"data_0\"\n"
    "    data_type: TYPE_FP32\n"
    "    format: FORMAT_NCHW\n"
    "    dims: [ 3, 224, 224 ]\n"
    "    reshape { shape: [ 1, 3, 224, 224 ] }\n"
    "  }\n"
    "]\n"
    "output [\n"
    "  {\n"
    "    name: \"fc6_1\"\n"
    "    data_type: TYPE_FP32\n"
    "    dims: [ 1000 ]\n"
    "    reshape { shape: [ 1, 1000, 1, 1 ] }\n"
    "    label_filename: \"densenet_labels.txt\"\n"
    "  }\n"
    "]\n";

/* simple: two INT32 inputs and outputs, batching to 8. */
static const char *kSimple =
    "name: \"simple\"\n"
    "platform: \"tensorflow_graphdef\"\n"
    "max_batch_size: 8\n"
    "input [\n"
    "  {\n    name: \"INPUT0\"\n    data_type: TYPE_INT32\n    dims: [ 16 ]\n  },\n"
    "  {\n    name: \"INPUT1\"\n    data_type: TYPE_INT32\n    dims: [ 16 ]\n  }\n"
    "]\n"
    "output [\n"
    "  {\n    name: \"OUTPUT0\"\n    data_type: TYPE_INT32\n    dims: [ 16 ]\n  },\n"
    "  {\n    name: \"OUTPUT1\"\n    data_type: TYPE_INT32\n    dims: [ 16 ]\n  }\n"
    "]\n";

/* inception_graphdef: NHWC input, 4 GPU instances. */
static const char *kInception =
    "name: \"inception_graphdef\"\n"
    "platform: \"tensorflow_graphdef\"\n"
    "max_batch_size: 128\n"
    "input [\n  {\n    name: \"input\"\n    data_type: TYPE_FP32\n    format: FORMAT_NHWC\n    dims: [ 299, 299, 3 ]\n  }\n]\n"
    "output [\n  {\n    name: \"InceptionV3/Predictions/Softmax\"\n    data_type: TYPE_FP32\n    dims: [ 1001 ]\n"
    "    label_filename: \"inception_labels.txt\"\n  }\n]\n"
    "instance_group [\n  {\n    kind: KIND_GPU\n    count: 4\n  }\n]\n";

/* pbtxt read through config.pbtxt's path gives the very configuration json gives as config.json. */
static void same_config(const char *pbtxt, const char *json) {
  srv_config_t *a = malloc(sizeof *a);
  assert_non_null(a);
  assert_int_equal(parse_config(pbtxt), 0);
  memcpy(a, &g_cfg, sizeof *a);
  assert_int_equal(srv_config_parse(json, strlen(json), "x", &g_cfg, g_err, sizeof g_err), 0);
  assert_memory_equal(a, &g_cfg, sizeof *a);
  free(a);
}

static void test_triton_examples(void **state) {
  (void)state;
  gives(kDensenet,
        "{\"name\":\"densenet_onnx\",\"platform\":\"onnxruntime_onnx\",\"max_batch_size\":0,"
        "\"input\":[{\"name\":\"data_0\",\"data_type\":\"TYPE_FP32\",\"format\":\"FORMAT_NCHW\",\"dims\":[3,224,224],"
        "\"reshape\":{\"shape\":[1,3,224,224]}}],"
        "\"output\":[{\"name\":\"fc6_1\",\"data_type\":\"TYPE_FP32\",\"dims\":[1000],\"reshape\":{\"shape\":[1,1000,1,1]},"
        "\"label_filename\":\"densenet_labels.txt\"}]}");
  assert_int_equal(parse_config(kDensenet), 0);
  assert_string_equal(g_cfg.name, "densenet_onnx");
  assert_int_equal(g_cfg.max_batch_size_set, 1);
  assert_int_equal(g_cfg.max_batch_size, 0);
  assert_int_equal(g_cfg.n_inputs, 1);
  assert_int_equal(g_cfg.inputs[0].ndim, 3);
  assert_int_equal(g_cfg.inputs[0].dims[1], 224);
  assert_int_equal(g_cfg.n_outputs, 1);
  assert_int_equal(g_cfg.outputs[0].dims[0], 1000);
  assert_non_null(strstr(g_cfg.ignored, "platform"));
  assert_non_null(strstr(g_cfg.ignored, "input[0].format"));

  /* another platform's model is refused (it was ignored until 2026-12-05); the rest of the example, read */
  assert_int_equal(parse_config(kSimple), -1);
  assert_non_null(strstr(g_err, "repo/m/config.pbtxt: platform: \"tensorflow_graphdef\": toplu serves ONNX models only"));
  assert_int_equal(parse_config(without_platform(kSimple)), 0);
  assert_int_equal(g_cfg.max_batch_size, 8);
  assert_int_equal(g_cfg.n_inputs, 2);
  assert_int_equal(g_cfg.n_outputs, 2);
  assert_string_equal(g_cfg.inputs[1].name, "INPUT1");
  assert_int_equal(g_cfg.inputs[1].dtype, TOPLU_DTYPE_INT32);
  assert_string_equal(g_cfg.outputs[1].name, "OUTPUT1");
  assert_int_equal(g_cfg.dynamic_batching, 0);

  gives(kInception,
        "{\"name\":\"inception_graphdef\",\"platform\":\"tensorflow_graphdef\",\"max_batch_size\":128,"
        "\"input\":[{\"name\":\"input\",\"data_type\":\"TYPE_FP32\",\"format\":\"FORMAT_NHWC\",\"dims\":[299,299,3]}],"
        "\"output\":[{\"name\":\"InceptionV3/Predictions/Softmax\",\"data_type\":\"TYPE_FP32\",\"dims\":[1001],"
        "\"label_filename\":\"inception_labels.txt\"}],"
        "\"instance_group\":[{\"kind\":\"KIND_GPU\",\"count\":4}]}");
  /* fields of newer Triton versions are accepted and logged as ignored */
  assert_int_equal(parse_config("model_metrics { metric_control { metric_identifier { family: \"nv_inference_request_duration\" } "
                                "histogram_options { buckets: [ 0.5, 1 ] } } }\n"
                                "input { name: \"x\" data_type: TYPE_FP32 dims: 3 is_non_linear_format_io: false }\n"
                                "output { name: \"y\" data_type: TYPE_FP32 dims: 3 is_non_linear_format_io: 0 }\n"),
                   0);
  assert_string_equal(g_cfg.ignored, "model_metrics, input[0].is_non_linear_format_io, output[0].is_non_linear_format_io");
  /* the JSON parser's own message, naming the field path */
  assert_int_equal(parse_config(without_platform(kInception)), -1);
  assert_non_null(strstr(g_err, "repo/m/config.pbtxt: instance_group[0].kind: toplu runs models on the CPU"));
}

/* Dynamic batching as Triton's model configuration docs write it. */
static const char *kDynamic =
    "# a classifier, batched\n"
    "name: \"cls\"\n"
    "max_batch_size: 16\n"
    "dynamic_batching {\n"
    "  preferred_batch_size: [ 4, 8 ]\n"
    "  max_queue_delay_microseconds: 100\n"
    "  preserve_ordering: true\n"
    "  priority_levels: 2\n"
    "  default_priority_level: 1\n"
    "  default_queue_policy {\n"
    "    timeout_action: DELAY\n"
    "    default_timeout_microseconds: 5000\n"
    "    allow_timeout_override: true\n"
    "    max_queue_size: 10\n"
    "  }\n"
    "  priority_queue_policy {\n"
    "    key: 2\n"
    "    value: {\n"
    "      timeout_action: REJECT\n"
    "      max_queue_size: 3\n"
    "    }\n"
    "  }\n"
    "}\n"
    "instance_group [ { count: 2 kind: KIND_CPU } ]\n"
    "response_cache { enable: true }\n"
    "version_policy: { latest: { num_versions: 2 } }\n"
    "model_warmup [\n"
    "  {\n"
    "    name: \"w\"\n"
    "    batch_size: 4\n"
    "    inputs {\n"
    "      key: \"x\"\n"
    "      value: { data_type: TYPE_FP32 dims: [ 3, 48, 192 ] random_data: true }\n"
    "    }\n"
    "  }\n"
    "]\n"
    "parameters { key: \"qdq_int8_all\" value: { string_value: \"true\" } }\n"
    "parameters { key: \"other\" value: { string_value: \"v\" } }\n";

/* kDynamic as config.json. */
static const char *kDynamicJson =
        "{\"name\":\"cls\",\"max_batch_size\":16,"
        "\"dynamic_batching\":{\"preferred_batch_size\":[4,8],\"max_queue_delay_microseconds\":100,"
        "\"preserve_ordering\":true,\"priority_levels\":2,\"default_priority_level\":1,"
        "\"default_queue_policy\":{\"timeout_action\":\"DELAY\",\"default_timeout_microseconds\":5000,"
        "\"allow_timeout_override\":true,\"max_queue_size\":10},"
        "\"priority_queue_policy\":{\"2\":{\"timeout_action\":\"REJECT\",\"max_queue_size\":3}}},"
        "\"instance_group\":[{\"count\":2,\"kind\":\"KIND_CPU\"}],"
        "\"response_cache\":{\"enable\":true},"
        "\"version_policy\":{\"latest\":{\"num_versions\":2}},"
        "\"model_warmup\":[{\"name\":\"w\",\"batch_size\":4,\"inputs\":{\"x\":{\"data_type\":\"TYPE_FP32\","
        "\"dims\":[3,48,192],\"random_data\":true}}}],"
        "\"parameters\":{\"qdq_int8_all\":{\"string_value\":\"true\"},\"other\":{\"string_value\":\"v\"}}}";

static void test_dynamic_batching(void **state) {
  (void)state;
  gives(kDynamic, kDynamicJson);
  assert_int_equal(parse_config(kDynamic), 0);
  const srv_config_t *c = &g_cfg;
  assert_int_equal(c->max_batch_size, 16);
  assert_int_equal(c->dynamic_batching, 1);
  assert_int_equal(c->n_preferred, 2);
  assert_int_equal(c->preferred_batch_size[1], 8);
  assert_int_equal(c->max_queue_delay_us, 100);
  assert_int_equal(c->preserve_ordering, 1);
  assert_int_equal(c->priority_levels, 2);
  assert_int_equal(c->default_queue_policy.timeout_action, SRV_TIMEOUT_DELAY);
  assert_int_equal(c->default_queue_policy.max_queue_size, 10);
  assert_int_equal(c->priority_policy_set[2], 1);
  assert_int_equal(c->priority_queue_policy[2].max_queue_size, 3);
  assert_int_equal(c->priority_queue_policy[2].timeout_action, SRV_TIMEOUT_REJECT);
  assert_int_equal(c->instance_count, 2);
  assert_int_equal(c->response_cache, 1);
  assert_int_equal(c->num_versions, 2);
  assert_int_equal(c->n_warmup, 1);
  assert_int_equal(c->warmup[0].batch_size, 4);
  assert_string_equal(c->warmup[0].inputs[0].name, "x");
  assert_int_equal(c->warmup[0].inputs[0].kind, 1);
  assert_int_equal(c->qdq_int8_all, 1);
  /* an empty dynamic_batching turns it on */
  assert_int_equal(parse_config("max_batch_size: 4 dynamic_batching { }"), 0);
  assert_int_equal(g_cfg.dynamic_batching, 1);
  assert_int_equal(parse_config("max_batch_size: 4"), 0);
  assert_int_equal(g_cfg.dynamic_batching, 0);
}

/* docs/serve.md: the cls example as config.pbtxt and as config.json give the same config. */
static const char *kDocsPbtxt =
    "name: \"cls\"\n"
    "max_batch_size: 32\n"
    "dynamic_batching {\n"
    "  preferred_batch_size: [ 8, 16 ]\n"
    "  max_queue_delay_microseconds: 5000\n"
    "  priority_levels: 2\n"
    "  default_priority_level: 2\n"
    "  default_queue_policy {\n"
    "    timeout_action: REJECT\n"
    "    default_timeout_microseconds: 100000\n"
    "    allow_timeout_override: true\n"
    "    max_queue_size: 64\n"
    "  }\n"
    "  priority_queue_policy { key: 1 value: { max_queue_size: 16 } }\n"
    "}\n"
    "instance_group [ { count: 2, kind: KIND_CPU } ]\n"
    "response_cache { enable: true }\n"
    "version_policy: { latest: { num_versions: 1 } }\n"
    "model_warmup [ {\n"
    "  name: \"w\"\n"
    "  batch_size: 8\n"
    "  inputs { key: \"x\" value: { data_type: TYPE_FP32 dims: [ 3, 48, 192 ] random_data: true } }\n"
    "} ]\n"
    "input [ { name: \"x\" data_type: TYPE_FP32 dims: [ 3, 48, -1 ] } ]\n"
    "output [ { name: \"softmax_0.tmp_0\" data_type: TYPE_FP32 dims: [ 2 ] } ]\n";
static const char *kDocsJson =
    "{\"name\": \"cls\", \"max_batch_size\": 32,"
    " \"dynamic_batching\": {\"preferred_batch_size\": [8, 16], \"max_queue_delay_microseconds\": 5000,"
    "   \"priority_levels\": 2, \"default_priority_level\": 2,"
    "   \"default_queue_policy\": {\"timeout_action\": \"REJECT\", \"default_timeout_microseconds\": 100000,"
    "     \"allow_timeout_override\": true, \"max_queue_size\": 64},"
    "   \"priority_queue_policy\": {\"1\": {\"max_queue_size\": 16}}},"
    " \"instance_group\": [{\"count\": 2, \"kind\": \"KIND_CPU\"}],"
    " \"response_cache\": {\"enable\": true},"
    " \"version_policy\": {\"latest\": {\"num_versions\": 1}},"
    " \"model_warmup\": [{\"name\": \"w\", \"batch_size\": 8,"
    "   \"inputs\": {\"x\": {\"data_type\": \"TYPE_FP32\", \"dims\": [3, 48, 192], \"random_data\": true}}}],"
    " \"input\": [{\"name\": \"x\", \"data_type\": \"TYPE_FP32\", \"dims\": [3, 48, -1]}],"
    " \"output\": [{\"name\": \"softmax_0.tmp_0\", \"data_type\": \"TYPE_FP32\", \"dims\": [2]}]}";

static void test_docs_example(void **state) {
  (void)state;
  gives(kDocsPbtxt, kDocsJson);
  same_config(kDocsPbtxt, kDocsJson);
  /* the two messages docs/serve.md quotes */
  REFUSED("name: \"det\"\nmax_batch_size: 4\ndynamic_batching {\n  max_queue_delay_microseconds 100\n}\n", 4, 32,
          "expected ':' or '{' after field name 'max_queue_delay_microseconds', not '100'");
  assert_int_equal(parse_config("max_batch_size: 32 dynamic_batching { preferred_batch_size: 64 }"), -1);
  assert_string_equal(g_err, "repo/m/config.pbtxt: dynamic_batching.preferred_batch_size[0]: 64 is more than max_batch_size 32");
}

/* One occurrence of a repeated field is still a list; repeated lines and blocks append. */
static void test_repeated(void **state) {
  (void)state;
  gives("input { name: \"x\" data_type: TYPE_FP32 dims: 16 }",
        "{\"input\":[{\"name\":\"x\",\"data_type\":\"TYPE_FP32\",\"dims\":[16]}]}");
  gives("dynamic_batching { preferred_batch_size: 4 }", "{\"dynamic_batching\":{\"preferred_batch_size\":[4]}}");
  gives("dynamic_batching { preferred_batch_size: 4 preferred_batch_size: 8 }",
        "{\"dynamic_batching\":{\"preferred_batch_size\":[4,8]}}");
  gives("instance_group { count: 2 } instance_group { kind: KIND_CPU }",
        "{\"instance_group\":[{\"count\":2},{\"kind\":\"KIND_CPU\"}]}");
  gives("instance_group [ { count: 1 gpus: 0 } ]", "{\"instance_group\":[{\"count\":1,\"gpus\":[0]}]}");
  gives("version_policy: { specific: { versions: 3 } }", "{\"version_policy\":{\"specific\":{\"versions\":[3]}}}");
  gives("input [ { dims: [ 1 ] dims: 2, dims: [3, 4] } ]", "{\"input\":[{\"dims\":[1,2,3,4]}]}");
  gives("output { reshape { shape: 5 } label_filename: \"l.txt\" }",
        "{\"output\":[{\"reshape\":{\"shape\":[5]},\"label_filename\":\"l.txt\"}]}");
  gives("model_warmup { inputs { key: \"a\" value { dims: 7 zero_data: true } } }",
        "{\"model_warmup\":[{\"inputs\":{\"a\":{\"dims\":[7],\"zero_data\":true}}}]}");
  gives("input [] output: []", "{\"input\":[],\"output\":[]}");
  /* input given twice as blocks, one of them as a list */
  gives("input { name: \"a\" } input [ { name: \"b\" }, { name: \"c\" } ]",
        "{\"input\":[{\"name\":\"a\"},{\"name\":\"b\"},{\"name\":\"c\"}]}");
  /* the ignored sections too: sequence batching, ensembles, optimization */
  gives("sequence_batching { control_input { name: \"S\" control { kind: CONTROL_SEQUENCE_START int32_false_true: [0, 1] } } "
        "state { input_name: \"i\" output_name: \"o\" dims: 4 } }",
        "{\"sequence_batching\":{\"control_input\":[{\"name\":\"S\",\"control\":[{\"kind\":\"CONTROL_SEQUENCE_START\","
        "\"int32_false_true\":[0,1]}]}],\"state\":[{\"input_name\":\"i\",\"output_name\":\"o\",\"dims\":[4]}]}}");
  gives("ensemble_scheduling { step { model_name: \"a\" model_version: -1 input_map { key: \"IN\" value: \"x\" } } }",
        "{\"ensemble_scheduling\":{\"step\":[{\"model_name\":\"a\",\"model_version\":-1,\"input_map\":{\"IN\":\"x\"}}]}}");
  gives("optimization { execution_accelerators { cpu_execution_accelerator : [ { name : \"openvino\" } ] "
        "gpu_execution_accelerator { name: \"tensorrt\" parameters { key: \"precision_mode\" value: \"FP16\" } } } }",
        "{\"optimization\":{\"execution_accelerators\":{\"cpu_execution_accelerator\":[{\"name\":\"openvino\"}],"
        "\"gpu_execution_accelerator\":[{\"name\":\"tensorrt\",\"parameters\":{\"precision_mode\":\"FP16\"}}]}}}");
  /* a field not known to be repeated, given a list: an array, which srv_config_parse then names */
  gives("max_batch_size: [8]", "{\"max_batch_size\":[8]}");
  assert_int_equal(parse_config("max_batch_size: [8]"), -1);
  assert_non_null(strstr(g_err, "max_batch_size: must be an integer"));
}

static void test_maps(void **state) {
  (void)state;
  gives("parameters { key: \"a\" value: { string_value: \"1\" } }\n"
        "parameters: { value { string_value: \"2\" } key: 'b' }\n"
        "parameters [ { key: \"c\" value: { string_value: \"3\" } }, { key: \"d\" } ]",
        "{\"parameters\":{\"a\":{\"string_value\":\"1\"},\"b\":{\"string_value\":\"2\"},\"c\":{\"string_value\":\"3\"},"
        "\"d\":{}}}");
  gives("metric_tags { key: \"team\" value: \"vision\" } cc_model_filenames { key: \"7.5\" value: \"m.plan\" }",
        "{\"metric_tags\":{\"team\":\"vision\"},\"cc_model_filenames\":{\"7.5\":\"m.plan\"}}");
  gives("dynamic_batching { priority_levels: 3 default_priority_level: 3 priority_queue_policy [ { key: 1 value: "
        "{ max_queue_size: 1 } }, { key: 0x2 value: { allow_timeout_override: 1 } } ] }",
        "{\"dynamic_batching\":{\"priority_levels\":3,\"default_priority_level\":3,\"priority_queue_policy\":{"
        "\"1\":{\"max_queue_size\":1},\"2\":{\"allow_timeout_override\":true}}}}");
  gives("model_warmup [ { name: \"two\" inputs { key: \"a\" value { data_type: TYPE_INT64 dims: 1 zero_data: true } } "
        "inputs { key: \"b\" value { data_type: TYPE_FP32 dims: [2, 2] input_data_file: \"b.bin\" } } } ]",
        "{\"model_warmup\":[{\"name\":\"two\",\"inputs\":{\"a\":{\"data_type\":\"TYPE_INT64\",\"dims\":[1],"
        "\"zero_data\":true},\"b\":{\"data_type\":\"TYPE_FP32\",\"dims\":[2,2],\"input_data_file\":\"b.bin\"}}}]}");
  REFUSED("parameters { key: \"a\" value: { string_value: \"1\" } }\nparameters { key: \"a\" }", 2, 12,
          "key \"a\" of map field 'parameters' is given twice");
  REFUSED("parameters {\n  qdq_int8_all: { string_value: \"true\" }\n}", 2, 3,
          "an entry of map field 'parameters' holds 'key' and 'value' only, not 'qdq_int8_all'",
          "parameters { key: \"k\" value: { ... } }");
  REFUSED("parameters { key: \"a\" key: \"b\" }", 1, 23, "'key' is given twice");
  REFUSED("parameters { key { } }", 1, 18, "expected ':' after 'key'");
  REFUSED("parameters { key: 1.5 }", 1, 19, "a key of map field 'parameters' must be a string");
  REFUSED("parameters: \"a\"", 1, 13, "map field 'parameters' takes entries");
}

static void test_literals(void **state) {
  (void)state;
  /* comments, separators, < > delimiters, whitespace and CRLF */
  gives("# top\r\nname: \"m\"; # trailing\r\nmax_batch_size: 4,\r\nresponse_cache < enable: true >\r\n",
        "{\"name\":\"m\",\"max_batch_size\":4,\"response_cache\":{\"enable\":true}}");
  gives("", "{}");
  gives("  # only a comment", "{}");
  /* strings: both quotes, escapes, adjacent strings joined, UTF-8 kept */
  gives("name: 'it''s' \"\\\"q\\\" \\t\\n\\\\\\101\\x42\\u00e9\\U0001F600\" 'caf\xc3\xa9'",
        "{\"name\":\"its\\\"q\\\" \\t\\n\\\\AB\\u00e9\\ud83d\\ude00caf\\u00e9\"}");
  gives("name: \"\\ud83d\\ude00\"", "{\"name\":\"\\ud83d\\ude00\"}");
  /* numbers: hex, octal, negative, floats; int64 limits; beyond int64 as a decimal string */
  gives("a: 0x1F b: 017 c: -5 d: - 3 e: 1.5 f: 2e3 g: .5 h: 1.0f i: 0 j: 9223372036854775807 k: -9223372036854775808 "
        "l: 18446744073709551615 m: -inf n: nan o: 1f",
        "{\"a\":31,\"b\":15,\"c\":-5,\"d\":-3,\"e\":1.5,\"f\":2000.0,\"g\":0.5,\"h\":1.0,\"i\":0,"
        "\"j\":9223372036854775807,\"k\":-9223372036854775808,\"l\":\"18446744073709551615\",\"m\":\"-inf\","
        "\"n\":\"nan\",\"o\":1.0}");
  /* bools: every spelling; 0 and 1 for the bool fields toplu reads */
  gives("a: true b: True c: t d: false e: False f: f", "{\"a\":true,\"b\":true,\"c\":true,\"d\":false,\"e\":false,\"f\":false}");
  gives("response_cache { enable: 1 } dynamic_batching { preserve_ordering: 0 default_queue_policy { allow_timeout_override: 1 } }",
        "{\"response_cache\":{\"enable\":true},\"dynamic_batching\":{\"preserve_ordering\":false,"
        "\"default_queue_policy\":{\"allow_timeout_override\":true}}}");
  /* enum numbers of the fields toplu reads: their names */
  gives("input { data_type: 11 } instance_group { kind: 2 } dynamic_batching { default_queue_policy { timeout_action: 1 } }",
        "{\"input\":[{\"data_type\":\"TYPE_FP32\"}],\"instance_group\":[{\"kind\":\"KIND_CPU\"}],"
        "\"dynamic_batching\":{\"default_queue_policy\":{\"timeout_action\":\"DELAY\"}}}");
  gives("input { data_type: 99 }", "{\"input\":[{\"data_type\":99}]}");
  assert_int_equal(parse_config("input { name: \"x\" data_type: 99 dims: 1 }"), -1);
  assert_non_null(strstr(g_err, "input[0].data_type: must be a Triton data type"));
  /* int64 fields beyond the range: srv_config_parse names the field */
  assert_int_equal(parse_config("max_batch_size: 18446744073709551615"), -1);
  assert_non_null(strstr(g_err, "max_batch_size: must be an integer"));
  /* the config read from config.pbtxt equals the one from the same config as config.json */
  same_config(kDynamic, kDynamicJson);
}

static void test_errors(void **state) {
  (void)state;
  REFUSED("name: \"m\"\nmax_batch_size 8\n", 2, 16, "expected ':' or '{' after field name 'max_batch_size', not '8'");
  REFUSED("name: \"abc\nmax_batch_size: 1\n", 1, 7, "unterminated string");
  REFUSED("name: 'abc", 1, 7, "unterminated string");
  REFUSED("name: \"a\\", 1, 7, "unterminated string");
  REFUSED("dynamic_batching {\n  max_queue_delay_microseconds: 5\n", 3, 1,
          "missing '}' at the end of the file to close the message 'dynamic_batching' opened at line 1 column 18");
  REFUSED("input [ { name: \"x\" dims: [1, 2 }", 1, 33, "expected ',' or ']' in the list of 'dims', not '}'");
  REFUSED("input [ { name: \"x\" }", 1, 22, "expected ',' or ']' in the list of 'input', not the end of the file");
  REFUSED("response_cache < enable: true }", 1, 31, "expected a field name or '>' to close 'response_cache'");
  REFUSED("max_batch_size: 1 }", 1, 19, "expected a field name, not '}'");
  REFUSED("max_batch_size: 1\nmax_batch_size: 2\n", 2, 1, "field 'max_batch_size' is given twice",
          "not a repeated field");
  REFUSED("dynamic_batching { } dynamic_batching { }", 1, 22, "field 'dynamic_batching' is given twice");
  REFUSED("input { dims [1, 2] }", 1, 15, "expected ':' after field name 'dims' before a list of values");
  REFUSED("input [ { name: \"x\" }, ]", 1, 24, "expected a value after ',' in the list of 'input', not ']'");
  REFUSED("dims: [1,]", 1, 10, "expected a value after ','");
  REFUSED("parameters [ { key: \"a\" }, ]", 1, 28, "expected a value after ','");
  REFUSED("max_batch_size:", 1, 16, "expected a value for field 'max_batch_size', not the end of the file");
  REFUSED("max_batch_size: 0x", 1, 17, "'0x' is not a number");
  REFUSED("max_batch_size: 08", 1, 17, "'08' is not a number");
  REFUSED("max_batch_size: 1.2.3", 1, 17, "'1.2.3' is not a number");
  REFUSED("max_batch_size: 12abc", 1, 17, "'12abc' is not a number");
  REFUSED("max_batch_size: 99999999999999999999", 1, 17, "out of range");
  REFUSED("max_batch_size: -99999999999999999999", 1, 18, "out of range");
  REFUSED("max_batch_size: -x", 1, 18, "expected a number after '-'");
  REFUSED("e: 1e999", 1, 4, "out of range");
  REFUSED("name: \"a\\qb\"", 1, 9, "unknown escape '\\q'");
  REFUSED("name: \"\\x\"", 1, 8, "\\x in a string needs one or two hex digits");
  REFUSED("name: \"\\u12\"", 1, 8, "\\u in a string needs 4 hex digits");
  REFUSED("name: \"\\ud800\"", 1, 8, "not a Unicode character");
  REFUSED("name: \"\\477\"", 1, 8, "over \\377");
  REFUSED("name: \"\\xff\"", 1, 7, "not valid UTF-8");
  REFUSED("name: \"\xff\"", 1, 7, "not valid UTF-8");
  REFUSED("name @ 1", 1, 6, "unexpected character '@'");
  REFUSED("[ext.field]: 1", 1, 1, "extension and Any field names");
  REFUSED("\"name\": 1", 1, 1, "expected a field name, not a string");
  REFUSED("name: \"m\"\n\n   \x01", 3, 4, "unexpected byte 0x01");
  refused_at("name: 1\0x", 9, 1, 8, "unexpected byte 0x00", NULL);
  REFUSED("name: {", 1, 8, "missing '}'");
  REFUSED("name: [ {", 1, 10, "missing '}'");
}

/* Depth and size bombs end in an error, not a crash or a huge tree. */
static void test_bombs(void **state) {
  (void)state;
  size_t n = 100000;
  char *s = malloc(2 * n + 1);
  assert_non_null(s);
  for (size_t i = 0; i < n; i++) memcpy(s + 2 * i, "a{", 2);
  s[2 * n] = 0;
  /* the 33rd '{' (column 66) would be 33 levels deep */
  refused_at(s, 2 * n, 1, 2 * (SRV_PBTXT_MAX_DEPTH + 1), "messages nested deeper than 32 levels", NULL);
  for (size_t i = 0; i < n; i++) memcpy(s + 2 * i, "a[", 2);
  refused_at(s, 2 * n, 1, 3, "expected ':' after field name 'a' before a list of values", NULL);
  for (size_t i = 0; i < n; i++) memcpy(s + 2 * i, "a:", 2);
  refused_at(s, 2 * n, 1, 4, "expected a field name, not ':'", NULL);
  for (size_t i = 0; i < n; i++) memcpy(s + 2 * i, "<<", 2);
  refused_at(s, 2 * n, 1, 1, "expected a field name, not '<'", NULL);
  for (size_t i = 0; i < n; i++) memcpy(s + 2 * i, "{a", 2);
  refused_at(s, 2 * n, 1, 1, "expected a field name, not '{'", NULL);
  free(s);
  /* 100001 values in one list */
  size_t m = SRV_PBTXT_MAX_VALUES + 1;
  s = malloc(16 + 2 * m + 8);
  assert_non_null(s);
  size_t k = (size_t)sprintf(s, "dims: [");
  for (size_t i = 0; i < m; i++) k += (size_t)sprintf(s + k, "0,");
  k += (size_t)sprintf(s + k, "0]");
  refused_at(s, k, 1, 8 + 2 * SRV_PBTXT_MAX_VALUES, "more than 100000 values", NULL);
  free(s);
  /* a 16 MiB string converts */
  size_t big = 16u << 20;
  s = malloc(big + 16);
  assert_non_null(s);
  memcpy(s, "name: \"", 7);
  memset(s + 7, 'x', big);
  memcpy(s + 7 + big, "\"", 2);
  char *j = srv_pbtxt_to_json(s, big + 8, "x", g_err, sizeof g_err);
  assert_non_null(j);
  assert_int_equal(strlen(j), big + 11);
  free(j);
  free(s);
}

/* Every prefix of a real config, and random bytes, give JSON or an error with a line: never a crash. */
static void test_never_crashes(void **state) {
  (void)state;
  size_t n = strlen(kDynamic);
  int ok = 0;
  for (size_t len = 0; len <= n; len++) {
    char *buf = malloc(len ? len : 1); /* exactly len bytes: ASan catches a read past them */
    assert_non_null(buf);
    memcpy(buf, kDynamic, len);
    json_t *v = convert(buf, len);
    if (v) ok++;
    else if (!strstr(g_err, ": line ")) fail_msg("prefix %zu: message without a line: %s", len, g_err);
    json_decref(v);
    free(buf);
  }
  assert_true(ok > 10);
  uint64_t r = 0x9E3779B97F4A7C15ull;
  const char alphabet[] = "{}[]<>:;,#\"'\\-.0123456789xefab_ \n\t\x80\xff";
  for (int t = 0; t < 20000; t++) {
    char buf[64];
    size_t len = (size_t)(t % 64);
    for (size_t i = 0; i < len; i++) {
      r ^= r << 13;
      r ^= r >> 7;
      r ^= r << 17;
      buf[i] = (t & 1) ? alphabet[r % (sizeof alphabet - 1)] : (char)(r & 0xff);
    }
    char *heap = malloc(len ? len : 1);
    assert_non_null(heap);
    memcpy(heap, buf, len);
    json_t *v = convert(heap, len);
    if (!v && !strstr(g_err, ": line ")) fail_msg("random input: message without a line: %s", g_err);
    json_decref(v);
    free(heap);
  }
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_triton_examples), cmocka_unit_test(test_dynamic_batching), cmocka_unit_test(test_repeated),
      cmocka_unit_test(test_maps),            cmocka_unit_test(test_literals),         cmocka_unit_test(test_errors),
      cmocka_unit_test(test_bombs),           cmocka_unit_test(test_never_crashes),   cmocka_unit_test(test_docs_example),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
