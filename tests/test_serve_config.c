/*
 * tests/test_serve_config.c - src/serve/config.c: Triton model configuration
 * parsing (every field, every kind of bad value, with the message naming the
 * file, the field's full path and the value), the check against a loaded
 * model (PaddleOCR direction classifier, x [N,3,?,?] FP32 -> [N,2]), Triton's
 * reshape (parsed, checked, shapes mapped both ways) and the GET .../config
 * JSON read back with jansson.
 *
 * Usage: test_serve_config CLS_MODEL.onnx
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

static const char *g_cls_path;

static srv_config_t g_cfg; /* large: keep it off the stack */
static char g_err[1024];

static int parse(const char *text) {
  g_err[0] = 0;
  return srv_config_parse(text, strlen(text), "repo/m/config.json", &g_cfg, g_err, sizeof g_err);
}

/* text must fail with a message holding every one of the NULL-terminated parts. */
static void refused(const char *text, ...) {
  int rc = parse(text);
  if (rc == 0) fail_msg("accepted: %s", text);
  if (getenv("TOPLU_TEST_VERBOSE")) printf("  %s\n", g_err);
  va_list ap;
  va_start(ap, text);
  const char *part;
  while ((part = va_arg(ap, const char *)) != NULL) {
    if (!strstr(g_err, part)) fail_msg("message \"%s\" lacks \"%s\" (config %s)", g_err, part, text);
  }
  va_end(ap);
  if (strncmp(g_err, "repo/m/config.json: ", 20) != 0) fail_msg("message does not start with the file: %s", g_err);
}

static const char *kFull =
    "{\"name\": \"cls\", \"platform\": \"onnxruntime_onnx\", \"max_batch_size\": 32,"
    " \"input\": [{\"name\": \"x\", \"data_type\": \"TYPE_FP32\", \"dims\": [3, 48, -1]}],"
    " \"output\": [{\"name\": \"softmax_0.tmp_0\", \"data_type\": \"TYPE_FP32\", \"dims\": [2]}],"
    " \"dynamic_batching\": {\"preferred_batch_size\": [8, 16], \"max_queue_delay_microseconds\": \"5000\","
    "   \"preserve_ordering\": true, \"priority_levels\": 3, \"default_priority_level\": 2,"
    "   \"default_queue_policy\": {\"timeout_action\": \"DELAY\", \"default_timeout_microseconds\": 100000,"
    "     \"allow_timeout_override\": true, \"max_queue_size\": 64},"
    "   \"priority_queue_policy\": {\"1\": {\"timeout_action\": \"REJECT\", \"max_queue_size\": 8}}},"
    " \"instance_group\": [{\"name\": \"a\", \"count\": 2, \"kind\": \"KIND_CPU\"}, {\"count\": 1, \"gpus\": [0]}],"
    " \"response_cache\": {\"enable\": true},"
    " \"version_policy\": {\"specific\": {\"versions\": [1, \"3\"]}},"
    " \"model_warmup\": [{\"name\": \"w\", \"batch_size\": 4, \"count\": 2, \"inputs\": {\"x\": {\"data_type\": "
    "\"TYPE_FP32\", \"dims\": [3, 48, 192], \"random_data\": true}}}],"
    " \"parameters\": {\"k\": {\"string_value\": \"v\"}},"
    " \"optimization\": {\"graph\": {\"level\": 1}}}";

static void test_full(void **state) {
  (void)state;
  assert_int_equal(parse(kFull), 0);
  const srv_config_t *c = &g_cfg;
  assert_string_equal(c->name, "cls");
  assert_int_equal(c->max_batch_size, 32);
  assert_int_equal(c->max_batch_size_set, 1);
  assert_int_equal(c->n_inputs, 1);
  assert_string_equal(c->inputs[0].name, "x");
  assert_int_equal(c->inputs[0].dtype, TOPLU_DTYPE_FLOAT);
  assert_int_equal(c->inputs[0].ndim, 3);
  assert_int_equal(c->inputs[0].dims[0], 3);
  assert_int_equal(c->inputs[0].dims[2], -1);
  assert_int_equal(c->n_outputs, 1);
  assert_int_equal(c->outputs[0].dims[0], 2);
  assert_int_equal(c->dynamic_batching, 1);
  assert_int_equal(c->n_preferred, 2);
  assert_int_equal(c->preferred_batch_size[0], 8);
  assert_int_equal(c->preferred_batch_size[1], 16);
  assert_int_equal(c->max_queue_delay_us, 5000);
  assert_int_equal(c->preserve_ordering, 1);
  assert_int_equal(c->priority_levels, 3);
  assert_int_equal(c->default_priority_level, 2);
  assert_int_equal(c->default_queue_policy.timeout_action, SRV_TIMEOUT_DELAY);
  assert_int_equal(c->default_queue_policy.default_timeout_us, 100000);
  assert_int_equal(c->default_queue_policy.allow_timeout_override, 1);
  assert_int_equal(c->default_queue_policy.max_queue_size, 64);
  assert_int_equal(c->priority_policy_set[1], 1);
  assert_int_equal(c->priority_policy_set[2], 0);
  assert_int_equal(c->priority_queue_policy[1].timeout_action, SRV_TIMEOUT_REJECT);
  assert_int_equal(c->priority_queue_policy[1].max_queue_size, 8);
  /* the rest at ModelQueuePolicy's defaults, not the default policy's (Triton's PriorityQueue takes the entry whole) */
  assert_int_equal(c->priority_queue_policy[1].default_timeout_us, 0);
  assert_int_equal(c->priority_queue_policy[1].allow_timeout_override, 0);
  assert_int_equal(c->priority_queue_policy[2].max_queue_size, 64);
  assert_int_equal(c->instance_count, 3);
  assert_int_equal(c->response_cache, 1);
  assert_int_equal(c->version_policy, SRV_VERSIONS_SPECIFIC);
  assert_int_equal(c->n_versions, 2);
  assert_int_equal(c->versions[0], 1);
  assert_int_equal(c->versions[1], 3);
  assert_int_equal(c->n_warmup, 1);
  assert_string_equal(c->warmup[0].name, "w");
  assert_int_equal(c->warmup[0].batch_size, 4);
  assert_int_equal(c->warmup[0].count, 2);
  assert_int_equal(c->warmup[0].n_inputs, 1);
  assert_string_equal(c->warmup[0].inputs[0].name, "x");
  assert_int_equal(c->warmup[0].inputs[0].kind, 1);
  assert_int_equal(c->warmup[0].inputs[0].ndim, 3);
  assert_int_equal(c->warmup[0].inputs[0].dims[2], 192);
  assert_non_null(strstr(c->ignored, "platform"));
  assert_non_null(strstr(c->ignored, "optimization"));
  assert_non_null(strstr(c->ignored, "instance_group[1].gpus"));
}

static void test_defaults(void **state) {
  (void)state;
  assert_int_equal(parse("{}"), 0);
  assert_string_equal(g_cfg.name, "");
  assert_int_equal(g_cfg.max_batch_size_set, 0);
  assert_int_equal(g_cfg.dynamic_batching, 0);
  assert_int_equal(g_cfg.instance_count, 1);
  assert_int_equal(g_cfg.response_cache, 0);
  assert_int_equal(g_cfg.qdq_int8_all, 0);
  assert_int_equal(parse("{\"parameters\": {\"qdq_int8_all\": {\"string_value\": \"true\"}}}"), 0);
  assert_int_equal(g_cfg.qdq_int8_all, 1);
  assert_int_equal(parse("{\"parameters\": {\"qdq_int8_all\": {\"string_value\": \"false\"}}}"), 0);
  assert_int_equal(g_cfg.qdq_int8_all, 0);
  assert_int_equal(parse("{}"), 0);
  assert_int_equal(g_cfg.version_policy, SRV_VERSIONS_LATEST);
  assert_int_equal(g_cfg.num_versions, 1);
  assert_int_equal(g_cfg.priority_levels, 0);
  assert_int_equal(g_cfg.default_queue_policy.timeout_action, SRV_TIMEOUT_REJECT);
  assert_int_equal(g_cfg.default_queue_policy.max_queue_size, 0);
  assert_string_equal(g_cfg.ignored, "");
  /* Triton-exported fields: model_warmup count 0 (once), default_model_filename, a cut ignored list marked */
  assert_int_equal(parse("{\"default_model_filename\": \"custom.onnx\", \"model_warmup\": [{\"name\": \"w\", "
                         "\"count\": 0, \"inputs\": {\"x\": {\"data_type\": \"TYPE_FP32\", \"dims\": [3], "
                         "\"zero_data\": true}}}]}"),
                   0);
  assert_string_equal(g_cfg.model_filename, "custom.onnx");
  assert_int_equal(g_cfg.warmup[0].count, 1);
  assert_int_not_equal(parse("{\"default_model_filename\": \"../x.onnx\"}"), 0);
  {
    char big[8192];
    int o = snprintf(big, sizeof big, "{\"output\": [");
    for (int i = 0; i < 30; i++)
      o += snprintf(big + o, sizeof big - (size_t)o,
                    "%s{\"name\": \"o%d\", \"data_type\": \"TYPE_FP32\", \"dims\": [1], \"is_shape_tensor\": false, \"is_non_linear_format_io\": false}", i ? "," : "",
                    i);
    snprintf(big + o, sizeof big - (size_t)o, "]}");
    if (parse(big)) fail_msg("%s", g_err);
    size_t n = strlen(g_cfg.ignored);
    assert_true(n > 400 && n < sizeof g_cfg.ignored);
    assert_string_equal(g_cfg.ignored + n - 5, ", ...");
  }
  /* lowerCamelCase names (protobuf JSON) and the latest / all policies */
  assert_int_equal(parse("{\"maxBatchSize\": 4, \"dynamicBatching\": {\"maxQueueDelayMicroseconds\": 7},"
                         " \"version_policy\": {\"latest\": {\"num_versions\": 2}}}"),
                   0);
  assert_int_equal(g_cfg.max_batch_size, 4);
  assert_int_equal(g_cfg.max_queue_delay_us, 7);
  assert_int_equal(g_cfg.num_versions, 2);
  assert_int_equal(parse("{\"version_policy\": {\"all\": {}}, \"max_batch_size\": 0}"), 0);
  assert_int_equal(g_cfg.version_policy, SRV_VERSIONS_ALL);
  assert_int_equal(g_cfg.max_batch_size_set, 1);
  assert_int_equal(g_cfg.max_batch_size, 0);
  srv_config_t d;
  srv_config_defaults(&d);
  assert_int_equal(d.instance_count, 1);
  assert_int_equal(d.num_versions, 1);
}

static void test_bad_values(void **state) {
  (void)state;
  refused("{\"dynamic_batching\": {\"max_queue_delay_microseconds\": -5}}",
               "dynamic_batching.max_queue_delay_microseconds: must be a non-negative integer, not -5", NULL);
  refused("{\"sequence_batching\": {}}", "sequence_batching", "not supported", NULL);
  refused("{\"sequenceBatching\": {\"max_sequence_idle_microseconds\": 1000}}", "sequence", "not supported", NULL);
  refused("{\"ensemble_scheduling\": {\"step\": []}}", "ensemble_scheduling", "not supported", NULL);
  /* another runtime's model or a decoupled one: refused, where these were ignored (2026-12-05, night) */
  refused("{\"platform\": \"tensorrt_plan\"}", "platform: \"tensorrt_plan\": toplu serves ONNX models only", NULL);
  refused("{\"backend\": \"python\"}", "backend: \"python\"", "not an ONNX model", NULL);
  refused("{\"platform\": 3}", "platform: must be a string", NULL);
  refused("{\"model_transaction_policy\": {\"decoupled\": true}}", "model_transaction_policy.decoupled",
          "not supported", NULL);
  refused("{\"modelTransactionPolicy\": {\"decoupled\": \"yes\"}}", "decoupled: must be true or false", NULL);
  assert_int_equal(parse("{\"backend\": \"onnxruntime\", \"model_transaction_policy\": {\"decoupled\": false}}"), 0);
  assert_int_equal(parse("{\"backend\": \"openvino\", \"platform\": \"onnxruntime_onnx\"}"), 0);
  refused("{\"max_batch_size\": 8, \"dynamic_batching\": {\"preferred_batch_size\": [4, 16]}}",
               "dynamic_batching.preferred_batch_size[1]", "16 is more than max_batch_size 8", NULL);
  refused("{\"max_batch_size\": 8, \"dynamic_batching\": {\"preferred_batch_size\": [0]}}",
               "dynamic_batching.preferred_batch_size[0]", "not 0", NULL);
  refused("{\"dynamic_batching\": {\"priority_levels\": 2, \"default_priority_level\": 3}}",
               "dynamic_batching.default_priority_level: must be an integer from 1 to 2, not 3", NULL);
  refused("{\"dynamic_batching\": {\"priority_levels\": 2, \"default_priority_level\": 0}}",
               "dynamic_batching.default_priority_level", "not 0", NULL);
  refused("{\"dynamic_batching\": {\"priority_levels\": 2}}", "dynamic_batching.default_priority_level",
               "must be given", NULL);
  refused("{\"dynamic_batching\": {\"priority_levels\": 17, \"default_priority_level\": 1}}",
               "dynamic_batching.priority_levels: must be an integer from 0 to 16, not 17", NULL);
  refused("{\"dynamic_batching\": {\"default_queue_policy\": {\"timeout_action\": \"DROP\"}}}",
               "dynamic_batching.default_queue_policy.timeout_action: must be one of REJECT, DELAY, not \"DROP\"",
               NULL);
  refused("{\"dynamic_batching\": {\"priority_levels\": 2, \"default_priority_level\": 1,"
               " \"priority_queue_policy\": {\"3\": {}}}}",
               "dynamic_batching.priority_queue_policy.3", "from 1 to 2", NULL);
  refused("{\"dynamic_batching\": {\"priority_levels\": 2, \"default_priority_level\": 1,"
               " \"priority_queue_policy\": {\"1\": {\"max_queue_size\": -1}}}}",
               "dynamic_batching.priority_queue_policy.1.max_queue_size", "not -1", NULL);
  refused("{\"max_batch_sise\": 8}", "max_batch_sise: unknown field", "max_batch_size", NULL);
  refused("{\"dynamic_batching\": {\"max_queue_delay\": 8}}", "dynamic_batching.max_queue_delay: unknown field",
               NULL);
  refused("{\"instance_group\": [{\"count\": 0}]}", "instance_group[0].count", "not 0", NULL);
  refused("{\"instance_group\": [{\"kind\": \"KIND_GPU\"}]}", "instance_group[0].kind", "KIND_GPU", NULL);
  refused("{\"instance_group\": [{\"kind\": \"CPU\"}]}", "instance_group[0].kind: must be one of", "\"CPU\"",
               NULL);
  refused("{\"max_batch_size\": -1}", "max_batch_size: must be an integer from 0 to", "not -1", NULL);
  refused("{\"max_batch_size\": \"abc\"}", "max_batch_size", "not \"abc\"", NULL);
  refused("{\"max_batch_size\": \"5x\"}", "max_batch_size", "not \"5x\"", NULL);
  refused("{\"max_batch_size\": 2.5}", "max_batch_size", "not 2.5", NULL);
  refused("{\"max_batch_size\": true}", "max_batch_size", "not true", NULL);
  refused("{\"version_policy\": {\"latest\": {}, \"all\": {}}}", "version_policy: must hold exactly one of",
               NULL);
  refused("{\"version_policy\": {\"specific\": {\"versions\": [0]}}}", "version_policy.specific.versions[0]",
               "not 0", NULL);
  refused("{\"version_policy\": {\"specific\": {\"versions\": []}}}", "version_policy.specific.versions",
               "at least one", NULL);
  refused("{\"version_policy\": {\"latest\": {\"num_versions\": 0}}}", "version_policy.latest.num_versions",
               "not 0", NULL);
  refused("{\"response_cache\": {\"enable\": 1}}", "response_cache.enable: must be true or false, not 1", NULL);
  refused("{\"input\": [{\"name\": \"x\", \"data_type\": \"FP32\", \"dims\": [3]}]}", "input[0].data_type",
               "not \"FP32\"", NULL);
  refused("{\"input\": [{\"name\": \"x\", \"data_type\": \"TYPE_FP32\", \"dims\": [3, 0]}]}",
               "input[0].dims[1]", "not 0", NULL);
  refused("{\"input\": [{\"name\": \"x\", \"data_type\": \"TYPE_FP32\"}]}", "input[0].dims: must be given", NULL);
  refused("{\"output\": [{\"name\": \"y\", \"data_type\": \"TYPE_FP32\", \"dims\": [1], \"colour\": 1}]}",
               "output[0].colour: unknown field", NULL);
  refused("{\"model_warmup\": [{\"inputs\": {\"x\": {\"data_type\": \"TYPE_FP32\", \"dims\": [3],"
               " \"zero_data\": true, \"random_data\": true}}}]}",
               "model_warmup[0].inputs.x: must hold exactly one of", NULL);
  refused("{\"model_warmup\": [{\"inputs\": {\"x\": {\"data_type\": \"TYPE_FP32\", \"dims\": [3],"
               " \"input_data_file\": \"../../etc/passwd\"}}}]}",
               "model_warmup[0].inputs.x.input_data_file", NULL);
  refused("{\"max_batch_size\": 4, \"model_warmup\": [{\"batch_size\": 5, \"inputs\": {\"x\": {\"data_type\":"
               " \"TYPE_FP32\", \"dims\": [3], \"zero_data\": true}}}]}",
               "model_warmup[0].batch_size: must be an integer from 1 to 4, not 5", NULL);
  refused("{\"parameters\": {\"k\": {\"string_value\": 3}}}", "parameters.k.string_value: must be a string",
               NULL);
  refused("{\"parameters\": {\"qdq_int8_all\": {\"string_value\": \"yes\"}}}",
               "parameters.qdq_int8_all.string_value: must be \"true\" or \"false\", not \"yes\"", NULL);
  refused("{\"max_batch_size\": 1, \"maxBatchSize\": 2}", "given twice", NULL);
  refused("[1]", "must be a JSON object", NULL);
  refused("{\"name\": ", "not valid JSON", NULL);
  refused("{\"name\": \"a\", \"name\": \"b\"}", "not valid JSON", NULL);
}

static void test_int_strings(void **state) {
  (void)state;
  assert_int_equal(parse("{\"dynamic_batching\": {\"max_queue_delay_microseconds\": \"5000\"}}"), 0);
  assert_int_equal(g_cfg.max_queue_delay_us, 5000);
  assert_int_equal(parse("{\"dynamic_batching\": {\"default_queue_policy\": {\"default_timeout_microseconds\":"
                         " \"9223372036854775807\"}}}"),
                   0);
  /* 2^63-1 ("no timeout") is held at SRV_MAX_MICROSECONDS: its nanoseconds overflowed int64 */
  assert_int_equal(g_cfg.default_queue_policy.default_timeout_us, SRV_MAX_MICROSECONDS);
  assert_int_equal(parse("{\"max_batch_size\": 16.0}"), 0);
  assert_int_equal(g_cfg.max_batch_size, 16);
  refused("{\"dynamic_batching\": {\"max_queue_delay_microseconds\": \"abc\"}}",
               "dynamic_batching.max_queue_delay_microseconds: must be a non-negative integer, not \"abc\"", NULL);
  refused("{\"dynamic_batching\": {\"max_queue_delay_microseconds\": \"99999999999999999999\"}}",
               "dynamic_batching.max_queue_delay_microseconds", NULL);
  refused("{\"dynamic_batching\": {\"max_queue_delay_microseconds\": \" 5\"}}",
               "dynamic_batching.max_queue_delay_microseconds", NULL);
}

static toplu_model_t *load_cls(void) {
  toplu_model_t *m = NULL;
  toplu_error_t e;
  memset(&e, 0, sizeof e);
  if (toplu_model_load(g_cls_path, NULL, &m, &e) != TOPLU_OK) fail_msg("cannot load %s: %s", g_cls_path, e.message);
  return m;
}

static void check_against(toplu_model_t *m, const char *cfg, const char *part) {
  char err[512] = "";
  assert_int_equal(parse(cfg), 0);
  int rc = srv_config_check_model(&g_cfg, m, err, sizeof err);
  if (!part) {
    if (rc != 0) fail_msg("check refused %s: %s", cfg, err);
    return;
  }
  if (rc == 0) fail_msg("check accepted %s", cfg);
  if (getenv("TOPLU_TEST_VERBOSE")) printf("  %s\n", err);
  if (!strstr(err, part)) fail_msg("check message \"%s\" lacks \"%s\"", err, part);
}

static void test_check_model(void **state) {
  (void)state;
  toplu_model_t *m = load_cls();
  const toplu_value_info_t *x = toplu_model_input(m, 0);
  assert_string_equal(x->name, "x");
  assert_int_equal(x->ndim, 4);
  assert_int_equal(x->dims[1], 3);
  check_against(m, kFull, NULL);
  check_against(m, "{\"max_batch_size\": 8, \"input\": [{\"name\": \"x\", \"data_type\": \"TYPE_FP32\", \"dims\": [3, 48, 192]}]}",
               NULL);
  check_against(m, "{\"max_batch_size\": 8, \"input\": [{\"name\": \"x\", \"data_type\": \"TYPE_FP32\", \"dims\": [4, 48, 192]}]}",
               "input[0].dims[0]: 4, but the model's input 'x' is [3] there");
  check_against(m, "{\"max_batch_size\": 8, \"input\": [{\"name\": \"x\", \"data_type\": \"TYPE_FP32\", \"dims\": [1, 3, 48, 192]}]}",
               "input[0].dims: [1, 3, 48, 192] has 4 dims");
  check_against(m, "{\"max_batch_size\": 0, \"input\": [{\"name\": \"x\", \"data_type\": \"TYPE_FP32\", \"dims\": [-1, 3, 48, 192]}]}",
               NULL);
  check_against(m, "{\"max_batch_size\": 0, \"input\": [{\"name\": \"x\", \"data_type\": \"TYPE_FP32\", \"dims\": [3, 48, 192]}]}",
               "input[0].dims");
  check_against(m, "{\"max_batch_size\": 8, \"input\": [{\"name\": \"x\", \"data_type\": \"TYPE_INT64\", \"dims\": [3, 48, 192]}]}",
               "input[0].data_type: TYPE_INT64, but the model's input 'x' is TYPE_FP32");
  check_against(m, "{\"max_batch_size\": 8, \"input\": [{\"name\": \"image\", \"data_type\": \"TYPE_FP32\", \"dims\": [3]}]}",
               "input[0].name: the model has no input 'image' (its inputs: 'x')");
  check_against(m, "{\"max_batch_size\": 8, \"output\": [{\"name\": \"softmax_0.tmp_0\", \"data_type\": \"TYPE_FP32\", \"dims\": [3]}]}",
               "output[0].dims[0]: 3, but the model's output 'softmax_0.tmp_0' is [2] there");
  check_against(m, "{\"max_batch_size\": 8, \"model_warmup\": [{\"inputs\": {\"x\": {\"data_type\": \"TYPE_FP32\","
                  " \"dims\": [1, 48, 192], \"zero_data\": true}}}]}",
               "model_warmup[0].inputs.x.dims[0]: 1");
  check_against(m, "{\"max_batch_size\": 8, \"model_warmup\": [{\"inputs\": {\"y\": {\"data_type\": \"TYPE_FP32\","
                  " \"dims\": [3, 48, 192], \"zero_data\": true}}}]}",
               "model_warmup[0].inputs.y: the model has no input 'y'");
  check_against(m, "{\"max_batch_size\": 8, \"model_warmup\": [{\"inputs\": {\"x\": {\"data_type\": \"TYPE_UINT8\","
                  " \"dims\": [3, 48, 192], \"zero_data\": true}}}]}",
               "model_warmup[0].inputs.x.data_type: TYPE_UINT8");
  toplu_model_destroy(m);
}

static json_t *obj(json_t *o, const char *k) {
  json_t *v = json_object_get(o, k);
  if (!v) fail_msg("no field %s", k);
  return v;
}

/* Triton's reshape { shape } of input and output entries: parsed, element counts checked piece by
 * piece between -1s, shapes mapped both ways, checked against the model, shown in .../config. */
static void test_reshape(void **state) {
  (void)state;
  assert_int_equal(parse("{\"max_batch_size\": 0, \"input\": [{\"name\": \"Input3\", \"data_type\": \"TYPE_FP32\","
                         " \"dims\": [1, 28, 28], \"reshape\": {\"shape\": [1, 1, 28, 28]}}],"
                         " \"output\": [{\"name\": \"o\", \"data_type\": \"TYPE_FP32\", \"dims\": [10], \"reshape\": {\"shape\": [1, 10]}},"
                         " {\"name\": \"p\", \"data_type\": \"TYPE_FP32\", \"dims\": [10]}]}"),
                   0);
  assert_int_equal(g_cfg.inputs[0].has_reshape, 1);
  assert_int_equal(g_cfg.inputs[0].reshape_ndim, 4);
  assert_int_equal(g_cfg.inputs[0].reshape[3], 28);
  assert_int_equal(g_cfg.outputs[0].has_reshape, 1);
  assert_int_equal(g_cfg.outputs[1].has_reshape, 0);
  assert_null(strstr(g_cfg.ignored, "reshape")); /* read, not ignored */
  assert_int_equal(srv_config_has_reshape(&g_cfg), 1);
  /* requests: [1, 28, 28] -> [1, 1, 28, 28]; outputs: [1, 10] -> [10] */
  int nd = 3;
  int64_t d[TOPLU_MAX_DIMS] = {1, 28, 28};
  assert_int_equal(srv_config_reshape_input(&g_cfg, "Input3", 0, &nd, d), 0);
  assert_int_equal(nd, 4);
  assert_true(d[0] == 1 && d[1] == 1 && d[2] == 28 && d[3] == 28);
  nd = 2;
  d[0] = 1, d[1] = 10;
  assert_int_equal(srv_config_reshape_output(&g_cfg, "o", 0, &nd, d, g_err, sizeof g_err), 0);
  assert_int_equal(nd, 1);
  assert_int_equal(d[0], 10);
  nd = 1, d[0] = 10;
  assert_int_equal(srv_config_reshape_output(&g_cfg, "p", 0, &nd, d, g_err, sizeof g_err), 0); /* no reshape */
  assert_int_equal(nd, 1);
  /* no reshape: the shape is held to the entry's dims (it was passed on whatever it was) */
  nd = 2, d[0] = 1, d[1] = 10;
  assert_int_equal(srv_config_reshape_output(&g_cfg, "p", 0, &nd, d, g_err, sizeof g_err), -1);
  assert_non_null(strstr(g_err, "output 'p': the model gave [1, 10], which does not fit the config's output[1].dims [10]"));
  nd = 2, d[0] = 3, d[1] = 10; /* batching: after the batch dim */
  assert_int_equal(srv_config_reshape_output(&g_cfg, "p", 1, &nd, d, g_err, sizeof g_err), 0);
  nd = 2, d[0] = 2, d[1] = 10;
  assert_int_equal(srv_config_reshape_output(&g_cfg, "o", 0, &nd, d, g_err, sizeof g_err), -1);
  assert_non_null(strstr(g_err, "output 'o': the model gave [2, 10], which does not fit the config's output[0].reshape.shape [1, 10]"));

  /* a scalar: dims [1], reshape {} or {"shape": []} */
  assert_int_equal(parse("{\"max_batch_size\": 0, \"input\": [{\"name\": \"sr\", \"data_type\": \"TYPE_INT64\", \"dims\": [1],"
                         " \"reshape\": {}}]}"),
                   0);
  assert_int_equal(g_cfg.inputs[0].has_reshape, 1);
  assert_int_equal(g_cfg.inputs[0].reshape_ndim, 0);
  nd = 1, d[0] = 1;
  assert_int_equal(srv_config_reshape_input(&g_cfg, "sr", 0, &nd, d), 0);
  assert_int_equal(nd, 0);
  assert_int_equal(parse("{\"input\": [{\"name\": \"sr\", \"data_type\": \"TYPE_INT64\", \"dims\": [1], \"reshape\": {\"shape\": []}}]}"), 0);
  assert_int_equal(g_cfg.inputs[0].has_reshape, 1);

  /* -1s pair up in order; the pieces between them keep their counts (Triton's example) */
  assert_int_equal(parse("{\"max_batch_size\": 4, \"input\": [{\"name\": \"x\", \"data_type\": \"TYPE_FP32\","
                         " \"dims\": [2, 4, -1, 6], \"reshape\": {\"shape\": [8, -1, 1, 6]}}]}"),
                   0);
  nd = 5;
  int64_t e[TOPLU_MAX_DIMS] = {3, 2, 4, 5, 6};
  assert_int_equal(srv_config_reshape_input(&g_cfg, "x", 1, &nd, e), 0);
  assert_int_equal(nd, 5);
  assert_true(e[0] == 3 && e[1] == 8 && e[2] == 5 && e[3] == 1 && e[4] == 6);
  nd = 5;
  int64_t f[TOPLU_MAX_DIMS] = {3, 2, 4, 5, 7};
  assert_int_equal(srv_config_reshape_input(&g_cfg, "x", 1, &nd, f), -1); /* not the config's dims */
  assert_int_equal(srv_config_reshape_input(&g_cfg, "y", 1, &nd, f), 0);  /* no such entry: unchanged */
  assert_int_equal(f[4], 7);

  refused("{\"input\": [{\"name\": \"x\", \"data_type\": \"TYPE_FP32\", \"dims\": [2, 3], \"reshape\": {\"shape\": [4]}}]}",
          "input[0].reshape.shape: [4] has 4 elements, but dims [2, 3] has 6", NULL);
  refused("{\"output\": [{\"name\": \"y\", \"data_type\": \"TYPE_FP32\", \"dims\": [1], \"reshape\": {}}, "
          "{\"name\": \"z\", \"data_type\": \"TYPE_FP32\", \"dims\": [2], \"reshape\": {}}]}",
          "output[1].reshape.shape: [] has 1 elements, but dims [2] has 2", NULL);
  refused("{\"input\": [{\"name\": \"x\", \"data_type\": \"TYPE_FP32\", \"dims\": [-1, 2], \"reshape\": {\"shape\": [4]}}]}",
          "input[0].reshape.shape: [4] has 0 variable (-1) dims, but dims [-1, 2] has 1", NULL);
  refused("{\"input\": [{\"name\": \"x\", \"data_type\": \"TYPE_FP32\", \"dims\": [2, -1, 6], \"reshape\": {\"shape\": [4, -1, 3]}}]}",
          "input[0].reshape.shape: [4, -1, 3] does not keep the elements of dims [2, -1, 6]", "piece 0: 4 against 2", NULL);
  refused("{\"input\": [{\"name\": \"x\", \"data_type\": \"TYPE_FP32\", \"dims\": [4], \"reshape\": {\"shape\": [0, 4]}}]}",
          "input[0].reshape.shape[0]", "not 0", NULL);
  refused("{\"input\": [{\"name\": \"x\", \"data_type\": \"TYPE_FP32\", \"dims\": [4], \"reshape\": {\"dims\": [4]}}]}",
          "input[0].reshape.dims: unknown field", NULL);
  refused("{\"input\": [{\"name\": \"x\", \"data_type\": \"TYPE_FP32\", \"dims\": [4], \"reshape\": [4]}]}",
          "input[0].reshape", NULL);

  /* against the model (x [N, 3, ?, ?] -> softmax_0.tmp_0 [N, 2]): reshape.shape is the model's side */
  toplu_model_t *m = load_cls();
  check_against(m, "{\"max_batch_size\": 8, \"input\": [{\"name\": \"x\", \"data_type\": \"TYPE_FP32\", \"dims\": [144],"
                   " \"reshape\": {\"shape\": [3, 48, 1]}}], \"output\": [{\"name\": \"softmax_0.tmp_0\","
                   " \"data_type\": \"TYPE_FP32\", \"dims\": [1, 2], \"reshape\": {\"shape\": [2]}}]}",
               NULL);
  int64_t sd[TOPLU_MAX_DIMS];
  assert_int_equal(srv_config_served_dims(&g_cfg, toplu_model_input(m, 0), 0, sd), 2);
  assert_true(sd[0] == -1 && sd[1] == 144);
  assert_int_equal(srv_config_served_dims(&g_cfg, toplu_model_output(m, 0), 1, sd), 3);
  assert_true(sd[0] == -1 && sd[1] == 1 && sd[2] == 2);
  pl_buf_t b = {0};
  srv_config_json(&g_cfg, m, NULL, &b);
  pl_buf_putc(&b, 0);
  json_error_t je;
  json_t *root = json_loads(b.data, 0, &je);
  if (!root) fail_msg("bad JSON %s: %s", je.text, b.data);
  json_t *in0 = json_array_get(obj(root, "input"), 0), *out0 = json_array_get(obj(root, "output"), 0);
  assert_int_equal(json_integer_value(json_array_get(obj(in0, "dims"), 0)), 144);
  assert_int_equal(json_array_size(obj(obj(in0, "reshape"), "shape")), 3);
  assert_int_equal(json_integer_value(json_array_get(obj(obj(in0, "reshape"), "shape"), 1)), 48);
  assert_int_equal(json_array_size(obj(out0, "dims")), 2);
  assert_int_equal(json_integer_value(json_array_get(obj(obj(out0, "reshape"), "shape"), 0)), 2);
  json_decref(root);
  pl_buf_free(&b);
  check_against(m, "{\"max_batch_size\": 8, \"input\": [{\"name\": \"x\", \"data_type\": \"TYPE_FP32\", \"dims\": [3, 48, 1],"
                   " \"reshape\": {\"shape\": [144]}}]}",
               "input[0].reshape.shape: [144] has 1 dims, but the model's input 'x' is");
  check_against(m, "{\"max_batch_size\": 8, \"input\": [{\"name\": \"x\", \"data_type\": \"TYPE_FP32\", \"dims\": [144],"
                   " \"reshape\": {\"shape\": [4, 36, 1]}}]}",
               "input[0].reshape.shape[0]: 4, but the model's input 'x' is [3] there");
  check_against(m, "{\"max_batch_size\": 8, \"input\": [{\"name\": \"image\", \"data_type\": \"TYPE_FP32\", \"dims\": [144],"
                   " \"reshape\": {\"shape\": [3, 48, 1]}}]}",
               "input[0].name: the model has no input 'image'");
  /* warm-up data has the clients' shape: the config's dims, not reshape.shape */
  check_against(m, "{\"max_batch_size\": 8, \"input\": [{\"name\": \"x\", \"data_type\": \"TYPE_FP32\", \"dims\": [144],"
                   " \"reshape\": {\"shape\": [3, 48, 1]}}], \"model_warmup\": [{\"inputs\": {\"x\": {\"data_type\":"
                   " \"TYPE_FP32\", \"dims\": [144], \"zero_data\": true}}}]}",
               NULL);
  check_against(m, "{\"max_batch_size\": 8, \"input\": [{\"name\": \"x\", \"data_type\": \"TYPE_FP32\", \"dims\": [144],"
                   " \"reshape\": {\"shape\": [3, 48, 1]}}], \"model_warmup\": [{\"inputs\": {\"x\": {\"data_type\":"
                   " \"TYPE_FP32\", \"dims\": [3, 48, 1], \"zero_data\": true}}}]}",
               "model_warmup[0].inputs.x.dims: [3, 48, 1] does not match the config's input 'x' dims [144]");
  toplu_model_destroy(m);
}

static void test_json(void **state) {
  (void)state;
  toplu_model_t *m = load_cls();
  assert_int_equal(parse(kFull), 0);
  pl_buf_t b = {0};
  srv_config_json(&g_cfg, m, "config.json", &b);
  assert_int_equal(b.oom, 0);
  json_error_t je;
  json_t *r = json_loadb(b.data, b.len, 0, &je);
  if (!r) fail_msg("not JSON (%s): %.*s", je.text, (int)b.len, b.data);
  assert_string_equal(json_string_value(obj(r, "name")), "cls");
  assert_string_equal(json_string_value(obj(r, "platform")), "toplu_onnx");
  assert_int_equal(json_integer_value(obj(r, "max_batch_size")), 32);
  json_t *in = obj(r, "input");
  assert_int_equal(json_array_size(in), 1);
  json_t *x = json_array_get(in, 0);
  assert_string_equal(json_string_value(obj(x, "name")), "x");
  assert_string_equal(json_string_value(obj(x, "data_type")), "TYPE_FP32");
  json_t *dims = obj(x, "dims");
  assert_int_equal(json_array_size(dims), 3); /* without the batch dim */
  /* the config's dims [3, 48, -1], narrower than the model's [3, -1, -1], as Triton shows them */
  assert_int_equal(json_integer_value(json_array_get(dims, 0)), 3);
  assert_int_equal(json_integer_value(json_array_get(dims, 1)), 48);
  assert_int_equal(json_integer_value(json_array_get(dims, 2)), -1);
  json_t *out = json_array_get(obj(r, "output"), 0);
  assert_string_equal(json_string_value(obj(out, "name")), "softmax_0.tmp_0");
  assert_int_equal(json_array_size(obj(out, "dims")), 1);
  assert_int_equal(json_integer_value(json_array_get(obj(out, "dims"), 0)), 2);
  json_t *db = obj(r, "dynamic_batching");
  assert_int_equal(json_array_size(obj(db, "preferred_batch_size")), 2);
  assert_int_equal(json_integer_value(json_array_get(obj(db, "preferred_batch_size"), 1)), 16);
  assert_int_equal(json_integer_value(obj(db, "max_queue_delay_microseconds")), 5000);
  assert_true(json_is_true(obj(db, "preserve_ordering")));
  assert_int_equal(json_integer_value(obj(db, "priority_levels")), 3);
  assert_int_equal(json_integer_value(obj(db, "default_priority_level")), 2);
  json_t *dq = obj(db, "default_queue_policy");
  assert_string_equal(json_string_value(obj(dq, "timeout_action")), "DELAY");
  assert_int_equal(json_integer_value(obj(dq, "default_timeout_microseconds")), 100000);
  assert_true(json_is_true(obj(dq, "allow_timeout_override")));
  assert_int_equal(json_integer_value(obj(dq, "max_queue_size")), 64);
  json_t *pq = obj(obj(db, "priority_queue_policy"), "1");
  assert_string_equal(json_string_value(obj(pq, "timeout_action")), "REJECT");
  assert_int_equal(json_integer_value(obj(pq, "max_queue_size")), 8);
  assert_int_equal(json_object_size(obj(db, "priority_queue_policy")), 1);
  json_t *ig = json_array_get(obj(r, "instance_group"), 0);
  assert_string_equal(json_string_value(obj(ig, "kind")), "KIND_CPU");
  assert_int_equal(json_integer_value(obj(ig, "count")), 3);
  assert_string_equal(json_string_value(obj(ig, "name")), "cls_0");
  assert_true(json_is_true(obj(obj(r, "response_cache"), "enable")));
  json_t *vs = obj(obj(obj(r, "version_policy"), "specific"), "versions");
  assert_int_equal(json_array_size(vs), 2);
  assert_int_equal(json_integer_value(json_array_get(vs, 1)), 3);
  json_t *w = json_array_get(obj(r, "model_warmup"), 0);
  assert_int_equal(json_integer_value(obj(w, "batch_size")), 4);
  assert_true(json_is_true(obj(obj(obj(w, "inputs"), "x"), "random_data")));
  assert_string_equal(json_string_value(obj(obj(obj(r, "parameters"), "max_batch_size_source"), "string_value")),
                      "config.json");
  json_decref(r);
  /* The JSON parses back as a config equal to the first one. */
  srv_config_t first = g_cfg;
  pl_buf_t b2 = {0};
  pl_buf_append(&b2, b.data, b.len);
  pl_buf_free(&b);
  g_err[0] = 0;
  int rc = srv_config_parse(b2.data, b2.len, "back", &g_cfg, g_err, sizeof g_err);
  if (rc) fail_msg("own JSON refused: %s", g_err);
  assert_int_equal(g_cfg.max_batch_size, first.max_batch_size);
  assert_int_equal(g_cfg.n_preferred, first.n_preferred);
  assert_int_equal(g_cfg.max_queue_delay_us, first.max_queue_delay_us);
  assert_int_equal(g_cfg.priority_queue_policy[1].max_queue_size, 8);
  assert_int_equal(g_cfg.instance_count, 3);
  assert_int_equal(g_cfg.n_versions, 2);
  assert_int_equal(g_cfg.n_inputs, 1);
  assert_int_equal(g_cfg.inputs[0].dims[1], 48); /* the config's 48 comes back */
  assert_int_equal(srv_config_check_model(&g_cfg, m, g_err, sizeof g_err), 0);
  pl_buf_free(&b2);

  /* No batching, no dynamic_batching, latest policy, no source: dims keep dim 0. */
  assert_int_equal(parse("{\"name\": \"n\", \"max_batch_size\": 0}"), 0);
  pl_buf_t b3 = {0};
  srv_config_json(&g_cfg, m, NULL, &b3);
  r = json_loadb(b3.data, b3.len, 0, &je);
  assert_non_null(r);
  assert_null(json_object_get(r, "dynamic_batching"));
  assert_int_equal(json_array_size(obj(json_array_get(obj(r, "input"), 0), "dims")), 4);
  assert_int_equal(json_integer_value(obj(obj(obj(r, "version_policy"), "latest"), "num_versions")), 1);
  assert_int_equal(json_object_size(obj(r, "parameters")), 0);
  json_decref(r);
  pl_buf_free(&b3);
  toplu_model_destroy(m);
}

int main(int argc, char **argv) {
  if (argc < 2) {
    fprintf(stderr, "usage: %s CLS_MODEL.onnx\n", argv[0]);
    return 2;
  }
  g_cls_path = argv[1];
  FILE *f = fopen(g_cls_path, "rb");
  if (!f) {
    fprintf(stderr, "missing test data: %s (the PaddleOCR direction classifier; scripts/fetch-models.sh fetches it)\n",
            g_cls_path);
    return 1;
  }
  fclose(f);
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_full),        cmocka_unit_test(test_defaults),    cmocka_unit_test(test_bad_values),
      cmocka_unit_test(test_int_strings), cmocka_unit_test(test_check_model), cmocka_unit_test(test_json),
      cmocka_unit_test(test_reshape),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
