/*
 * tests/test_plan.c - the planner's pieces that need no model: transformer
 * figures from Hugging Face configs against published ones, the device
 * catalog, cgroup and meminfo parsing, the affine law, the latency model
 * and its calibration fit, and the tuner's statistics.
 *
 * Published figures: Llama-2 7B 6.74 B parameters, 13.5 GB in fp16, KV cache
 * 512 KiB per token (2 x 32 layers x 32 heads x 128 x 2 bytes); Llama-2 70B
 * 68.98 B parameters, 320 KiB per token with 8 KV heads; Mistral 7B 7.24 B;
 * GPT-2 small 124,439,808 parameters (the Hugging Face model card's count);
 * bert-base-uncased as BertForMaskedLM 109,514,298 and as BertModel
 * 109,482,240 (transformers' num_parameters()).  The model identity a
 * tune.json records: FNV-1a 64 of "a" is af63dc4c8601ec8c (the FNV test
 * vectors).  Shape profiles: toplu_shape_profiles_add's pairing of sets,
 * labels and refusals.
 */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>
#include <xxhash.h>

#include "core/cpu.h"
#include "core/hash.h"
#include "core/identity.h"
#include "plan/arch.h"
#include "plan/device.h"
#include "plan/gpu_runtime.h"
#include "plan/latency.h"
#include "plan/memory.h"
#include "toplu/planner.h"
#include "toplu/profile.h"
#include "toplu/tuner.h"
#include "tune/measure.h"

static const char llama2_7b[] =
    "{\"architectures\": [\"LlamaForCausalLM\"], \"hidden_size\": 4096, \"intermediate_size\": 11008,"
    " \"num_attention_heads\": 32, \"num_hidden_layers\": 32, \"num_key_value_heads\": 32, \"vocab_size\": 32000,"
    " \"max_position_embeddings\": 4096, \"torch_dtype\": \"float16\", \"tie_word_embeddings\": false,"
    " \"model_type\": \"llama\", \"hidden_act\": \"silu\", \"rms_norm_eps\": 1e-05}";

static const char llama2_70b[] =
    "{\"hidden_size\": 8192, \"intermediate_size\": 28672, \"num_attention_heads\": 64, \"num_hidden_layers\": 80,"
    " \"num_key_value_heads\": 8, \"vocab_size\": 32000, \"max_position_embeddings\": 4096,"
    " \"torch_dtype\": \"float16\", \"tie_word_embeddings\": false, \"model_type\": \"llama\"}";

static const char mistral_7b[] =
    "{\"hidden_size\": 4096, \"intermediate_size\": 14336, \"num_attention_heads\": 32, \"num_hidden_layers\": 32,"
    " \"num_key_value_heads\": 8, \"vocab_size\": 32000, \"max_position_embeddings\": 32768,"
    " \"torch_dtype\": \"bfloat16\", \"tie_word_embeddings\": false, \"model_type\": \"mistral\"}";

static const char gpt2[] =
    "{\"model_type\": \"gpt2\", \"n_embd\": 768, \"n_head\": 12, \"n_layer\": 12, \"n_positions\": 1024,"
    " \"n_inner\": null, \"vocab_size\": 50257, \"activation_function\": \"gelu_new\"}";

#define BERT_BASE(arch) \
  "{\"architectures\": [\"" arch "\"], \"hidden_act\": \"gelu\", \"hidden_size\": 768," \
  " \"intermediate_size\": 3072, \"max_position_embeddings\": 512, \"model_type\": \"bert\"," \
  " \"num_attention_heads\": 12, \"num_hidden_layers\": 12, \"type_vocab_size\": 2, \"vocab_size\": 30522}"
static const char bert_mlm[] = BERT_BASE("BertForMaskedLM");

/* BERT: encoder-only, no KV cache; parameters as transformers counts them. */
static void test_bert_encoder(void **state) {
  (void)state;
  toplu_arch_plan_t a;
  memset(&a, 0, sizeof a);
  assert_int_equal(toplu__arch_parse(bert_mlm, "bert", -1, &a, NULL), TOPLU_OK);
  assert_true(a.encoder_only);
  assert_int_equal(a.params, INT64_C(109514298));
  assert_int_equal(a.kv_cache_bytes_per_token, 0);
  memset(&a, 0, sizeof a);
  assert_int_equal(toplu__arch_parse(BERT_BASE("BertModel"), "bert", -1, &a, NULL), TOPLU_OK);
  assert_int_equal(a.params, INT64_C(109482240));
  /* a BERT used as a decoder keeps its KV cache */
  memset(&a, 0, sizeof a);
  assert_int_equal(toplu__arch_parse(BERT_BASE("BertLMHeadModel"), "bert", -1, &a, NULL), TOPLU_OK);
  assert_false(a.encoder_only);
  assert_true(a.kv_cache_bytes_per_token > 0);
  /* the plan: sequences per batch from the activations, no decode */
  char path[] = "/tmp/toplu-test-bert-XXXXXX";
  int fd = mkstemp(path);
  assert_true(fd >= 0);
  assert_int_equal(write(fd, bert_mlm, strlen(bert_mlm)), (ssize_t)strlen(bert_mlm));
  close(fd);
  toplu_planner_options_t o;
  toplu_planner_options_init(&o);
  o.device = "a100-40gb";
  toplu_arch_plan_t *p = NULL;
  toplu_error_t err;
  assert_int_equal(toplu_plan_arch(path, &o, &p, &err), TOPLU_OK);
  assert_true(p->encoder_only && p->decode_tokens_per_s == 0);
  assert_int_equal(p->activation_bytes, 512 * p->activation_bytes_per_token);
  double budget = floor(0.8 * 40.0 * 1024 * 1024 * 1024);
  int64_t want = (int64_t)floor((budget - 512.0 * 1024 * 1024 - (double)p->weights_bytes) / (double)p->activation_bytes);
  assert_int_equal(p->max_concurrent_sequences, want);
  char *js = toplu_arch_plan_json(p);
  assert_non_null(strstr(js, "\"encoder_only\": true"));
  assert_non_null(strstr(js, "\"kv_cache_bytes_per_token\": null"));
  assert_non_null(strstr(js, "\"decode_tokens_per_s\": null"));
  free(js);
  toplu_arch_plan_free(p);
  unlink(path);
}

/* Write text to a new temporary file named from tmpl; returns 0. */
static int write_temp(char *tmpl, const char *text) {
  int fd = mkstemp(tmpl);
  if (fd < 0) return -1;
  ssize_t n = write(fd, text, strlen(text));
  close(fd);
  return n == (ssize_t)strlen(text) ? 0 : -1;
}

/* toplu_tune_result_matches_model: the identity a tune.json records. */
static void test_tune_identity(void **state) {
  (void)state;
  char a[] = "/tmp/toplu-test-model-a-XXXXXX", b[] = "/tmp/toplu-test-model-b-XXXXXX";
  char t[] = "/tmp/toplu-test-tune-XXXXXX", old[] = "/tmp/toplu-test-tune-old-XXXXXX";
  char bad[] = "/tmp/toplu-test-tune-bad-XXXXXX";
  assert_int_equal(write_temp(a, "a"), 0);
  assert_int_equal(write_temp(b, "b"), 0);
  char js[2048];
  snprintf(js, sizeof js,
           "{\"model\": \"%s\", \"model_identity\": {\"file\": \"%s\", \"bytes\": 1, \"fnv1a64\": "
           "\"af63dc4c8601ec8c\", \"inputs\": \"x: [B, 4] float32\", \"threads\": 1}, \"results\": []}",
           a, strrchr(a, '/') + 1);
  assert_int_equal(write_temp(t, js), 0);
  int checked = -1;
  toplu_error_t err;
  assert_int_equal(toplu_tune_result_matches_model(t, a, &checked, &err), TOPLU_OK);
  assert_int_equal(checked, 1);
  assert_int_equal(toplu_tune_result_matches_model(t, b, &checked, &err), TOPLU_ERR_INVALID_ARGUMENT);
  assert_int_equal(checked, 0);
  assert_non_null(strstr(err.message, a));
  assert_non_null(strstr(err.message, b));
  assert_non_null(strstr(err.message, "another model"));
  /* no identity record: only another file name is told apart */
  snprintf(js, sizeof js, "{\"model\": \"/elsewhere/%s\", \"results\": []}", strrchr(a, '/') + 1);
  assert_int_equal(write_temp(old, js), 0);
  assert_int_equal(toplu_tune_result_matches_model(old, a, &checked, &err), TOPLU_OK);
  assert_int_equal(checked, 0);
  assert_int_equal(toplu_tune_result_matches_model(old, b, &checked, &err), TOPLU_ERR_INVALID_ARGUMENT);
  /* unreadable files and bad JSON: the reason, never "line -1" */
  assert_int_equal(toplu_tune_result_matches_model("/nonexistent/tune.json", a, NULL, &err), TOPLU_ERR_IO);
  assert_non_null(strstr(err.message, "No such file or directory"));
  assert_int_equal(toplu_tune_result_matches_model("/tmp", a, NULL, &err), TOPLU_ERR_IO);
  assert_non_null(strstr(err.message, "is a directory"));
  assert_int_equal(toplu_tune_result_matches_model(t, "/nonexistent/model.onnx", NULL, &err), TOPLU_ERR_IO);
  assert_int_equal(write_temp(bad, "{\"results\": ["), 0);
  assert_int_equal(toplu_tune_result_matches_model(bad, a, NULL, &err), TOPLU_ERR_PARSE);
  assert_null(strstr(err.message, "line -1"));
  unlink(a);
  unlink(b);
  unlink(t);
  unlink(old);
  unlink(bad);
}

/* core/hash.h: the FNV-1a 64 test vectors, incremental use. */
static void test_core_hash(void **state) {
  (void)state;
  assert_true(toplu__fnv1a64(TOPLU__FNV1A64_INIT, "", 0) == UINT64_C(0xcbf29ce484222325));
  assert_true(toplu__fnv1a64(TOPLU__FNV1A64_INIT, "a", 1) == UINT64_C(0xaf63dc4c8601ec8c));
  assert_true(toplu__fnv1a64(TOPLU__FNV1A64_INIT, "foobar", 6) == UINT64_C(0x85944171f73967e8));
  assert_true(toplu__fnv1a64_str(TOPLU__FNV1A64_INIT, "foobar") == UINT64_C(0x85944171f73967e8));
  assert_true(toplu__fnv1a64(toplu__fnv1a64(TOPLU__FNV1A64_INIT, "foo", 3), "bar", 3) == UINT64_C(0x85944171f73967e8));
}

/* core/identity.h: whole-file and first-and-last-span identities. */
static void test_core_identity(void **state) {
  (void)state;
  const size_t mib = (size_t)1 << 20, n = 3 * mib + 5;
  unsigned char *buf = malloc(n);
  assert_non_null(buf);
  for (size_t i = 0; i < n; i++) buf[i] = (unsigned char)(i * 2654435761u >> 13);
  char path[] = "/tmp/toplu-test-identity-XXXXXX";
  int fd = mkstemp(path);
  assert_true(fd >= 0);
  assert_int_equal(write(fd, buf, n), (ssize_t)n);
  close(fd);
  toplu__file_identity_t id;
  toplu_error_t err;
  assert_int_equal(toplu__file_identity(path, TOPLU__IDENTITY_WHOLE, &id, &err), TOPLU_OK);
  assert_int_equal(id.hashed, 1);
  assert_true(id.bytes == n);
  assert_true(id.mtime_ns > 0);
  assert_string_equal(id.file, strrchr(path, '/') + 1);
  assert_true(id.hash == toplu__fnv1a64(TOPLU__FNV1A64_INIT, buf, n));
  /* first and last MiB, each once */
  assert_int_equal(toplu__file_identity(path, mib, &id, &err), TOPLU_OK);
  uint64_t ends = toplu__fnv1a64(toplu__fnv1a64(TOPLU__FNV1A64_INIT, buf, mib), buf + n - mib, mib);
  assert_true(id.hash == ends);
  /* XXH3-64 (the checkpoints' identities), over the same parts; its streaming over 1 MiB reads is the one-shot hash */
  assert_int_equal(toplu__file_identity_alg(path, TOPLU__IDENTITY_WHOLE, TOPLU__HASH_XXH3_64, &id, &err), TOPLU_OK);
  assert_true(id.alg == TOPLU__HASH_XXH3_64 && id.whole == 1 && id.hash == XXH3_64bits(buf, n));
  assert_int_equal(toplu__file_identity_alg(path, mib, TOPLU__HASH_XXH3_64, &id, &err), TOPLU_OK);
  assert_true(id.whole == 0 && id.hash != XXH3_64bits(buf, n) && id.hash != ends);
  /* a file of at most two spans hashes whole */
  assert_int_equal(toplu__file_identity(path, 2 * mib, &id, &err), TOPLU_OK);
  assert_true(id.hash == toplu__fnv1a64(TOPLU__FNV1A64_INIT, buf, n));
  /* the record tune.json keeps */
  assert_int_equal(toplu__file_identity(path, TOPLU__IDENTITY_WHOLE, &id, &err), TOPLU_OK);
  json_t *rec = toplu__model_identity_json(&id, "x: [B, 4] float32", 2);
  assert_non_null(rec);
  char hex[24];
  snprintf(hex, sizeof hex, "%016llx", (unsigned long long)id.hash);
  assert_string_equal(json_string_value(json_object_get(rec, "fnv1a64")), hex);
  assert_int_equal(json_integer_value(json_object_get(rec, "bytes")), (json_int_t)n);
  json_t *root = json_object();
  json_object_set_new(root, "model_identity", rec);
  int checked = -1;
  assert_int_equal(toplu__model_identity_check(root, "t.json", path, &checked, &err), TOPLU_OK);
  assert_int_equal(checked, 1);
  json_decref(root);
  free(buf);
  unlink(path);
  /* a data file: whole up to 256 MiB; a larger one (sparse here) by its ends and 62 blocks between them, so a
   * change in its middle that the ends miss changes the identity (a dataset regenerated at the same size) */
  {
    char big[] = "/tmp/toplu-test-identity-big-XXXXXX";
    int bfd = mkstemp(big);
    assert_true(bfd >= 0);
    const uint64_t size = (uint64_t)300 << 20;
    assert_int_equal(ftruncate(bfd, (off_t)size), 0);
    assert_int_equal(toplu__file_identity(big, TOPLU__IDENTITY_DATA, &id, &err), TOPLU_OK);
    assert_int_equal(id.whole, 0);
    uint64_t h0 = id.hash;
    assert_int_equal(toplu__file_identity(big, mib, &id, &err), TOPLU_OK);
    uint64_t ends0 = id.hash;
    /* six MiB of other rows in the middle (the first block at or after it is inside the change) */
    unsigned char *six = malloc((size_t)6 << 20);
    assert_non_null(six);
    memset(six, 7, (size_t)6 << 20);
    assert_int_equal(pwrite(bfd, six, (size_t)6 << 20, (off_t)(140u << 20)), (ssize_t)(6u << 20));
    free(six);
    assert_int_equal(toplu__file_identity(big, mib, &id, &err), TOPLU_OK);
    assert_true(id.hash == ends0); /* the old identity missed it */
    assert_int_equal(toplu__file_identity(big, TOPLU__IDENTITY_DATA, &id, &err), TOPLU_OK);
    assert_true(id.hash != h0);
    close(bfd);
    unlink(big);
    char small[] = "/tmp/toplu-test-identity-small-XXXXXX";
    int sfd = mkstemp(small);
    unsigned char *three = calloc(1, (size_t)3 << 20);
    assert_true(sfd >= 0 && three);
    assert_int_equal(write(sfd, three, (size_t)3 << 20), (ssize_t)(3u << 20));
    close(sfd);
    assert_int_equal(toplu__file_identity(small, TOPLU__IDENTITY_DATA, &id, &err), TOPLU_OK);
    assert_int_equal(id.whole, 1);
    assert_true(id.hash == toplu__fnv1a64(TOPLU__FNV1A64_INIT, three, (size_t)3 << 20));
    free(three);
    unlink(small);
  }
  /* errors name the file and the reason */
  assert_int_equal(toplu__file_identity("/nonexistent/m.onnx", 0, &id, &err), TOPLU_ERR_IO);
  assert_string_equal(err.message, "/nonexistent/m.onnx: No such file or directory");
  assert_string_equal(id.file, "m.onnx");
  assert_int_equal(toplu__file_identity("/tmp", 0, &id, &err), TOPLU_ERR_IO);
  assert_string_equal(err.message, "/tmp: is a directory, not a file");
}

/* Messages name option fields, never command-line flags. */
static void test_option_messages(void **state) {
  (void)state;
  char path[] = "/tmp/toplu-test-arch-opts-XXXXXX";
  assert_int_equal(write_temp(path, llama2_7b), 0);
  toplu_planner_options_t o;
  toplu_arch_plan_t *a = NULL;
  toplu_error_t err;
  toplu_planner_options_init(&o);
  o.mem_fraction = 1.5;
  assert_int_equal(toplu_plan_arch(path, &o, &a, &err), TOPLU_ERR_INVALID_ARGUMENT);
  assert_string_equal(err.message, "mem_fraction must be in (0, 1], got 1.5");
  toplu_planner_options_init(&o);
  o.devices = 0;
  assert_int_equal(toplu_plan_arch(path, &o, &a, &err), TOPLU_ERR_INVALID_ARGUMENT);
  assert_string_equal(err.message, "devices must be >= 1, got 0");
  toplu_planner_options_init(&o);
  o.context_length = -3;
  assert_int_equal(toplu_plan_arch(path, &o, &a, &err), TOPLU_ERR_INVALID_ARGUMENT);
  assert_string_equal(err.message, "context_length must be >= 0 (0: the model's maximum), got -3");
  toplu_planner_options_init(&o);
  assert_int_equal(toplu_plan_arch("/nonexistent/config.json", &o, &a, &err), TOPLU_ERR_IO);
  assert_string_equal(err.message, "config file /nonexistent/config.json: No such file or directory");
  unlink(path);
}

static void test_llama2_7b(void **state) {
  (void)state;
  toplu_arch_plan_t a;
  memset(&a, 0, sizeof a);
  assert_int_equal(toplu__arch_parse(llama2_7b, "llama", -1, &a, NULL), TOPLU_OK);
  assert_int_equal(a.params, INT64_C(6738415616));
  assert_int_equal(a.weights_bytes, INT64_C(13476831232));
  assert_true(fabs((double)a.weights_bytes - 13.48e9) < 0.01 * 13.48e9);
  assert_int_equal(a.kv_cache_bytes_per_token, 524288);
  assert_int_equal(a.precision, TOPLU_PRECISION_FP16);
  assert_true(a.gated_mlp);
  assert_false(a.tied_embeddings);
  /* int8 weights: a quarter of fp32, half of fp16; the KV cache stays 16-bit. */
  memset(&a, 0, sizeof a);
  assert_int_equal(toplu__arch_parse(llama2_7b, "llama", TOPLU_PRECISION_INT8, &a, NULL), TOPLU_OK);
  assert_int_equal(a.weights_bytes, INT64_C(6738415616));
  assert_int_equal(a.kv_cache_bytes_per_token, 524288);
}

static void test_llama2_70b_mistral_gpt2(void **state) {
  (void)state;
  toplu_arch_plan_t a;
  memset(&a, 0, sizeof a);
  assert_int_equal(toplu__arch_parse(llama2_70b, "70b", -1, &a, NULL), TOPLU_OK);
  assert_int_equal(a.params, INT64_C(68976648192));
  assert_int_equal(a.kv_cache_bytes_per_token, 327680);
  memset(&a, 0, sizeof a);
  assert_int_equal(toplu__arch_parse(mistral_7b, "mistral", -1, &a, NULL), TOPLU_OK);
  assert_int_equal(a.params, INT64_C(7241732096));
  assert_int_equal(a.kv_cache_bytes_per_token, 131072);
  assert_int_equal(a.precision, TOPLU_PRECISION_BF16);
  memset(&a, 0, sizeof a);
  assert_int_equal(toplu__arch_parse(gpt2, "gpt2", -1, &a, NULL), TOPLU_OK);
  assert_int_equal(a.params, INT64_C(124439808));
  assert_true(a.tied_embeddings);
  assert_false(a.gated_mlp);
  assert_int_equal(a.precision, TOPLU_PRECISION_FP32);
  assert_int_equal(a.kv_cache_bytes_per_token, 2 * 12 * 12 * 64 * 4);
}

static void test_arch_errors(void **state) {
  (void)state;
  toplu_arch_plan_t a;
  toplu_error_t err;
  memset(&a, 0, sizeof a);
  assert_int_equal(toplu__arch_parse("{\"hidden_size\": 64}", "cfg", -1, &a, &err), TOPLU_ERR_PARSE);
  assert_non_null(strstr(err.message, "num_hidden_layers"));
  assert_int_equal(toplu__arch_parse("not json", "cfg", -1, &a, &err), TOPLU_ERR_PARSE);
  assert_int_equal(toplu__arch_parse("{\"num_hidden_layers\": -2, \"hidden_size\": 64, \"num_attention_heads\": 2, "
                                    "\"vocab_size\": 10}",
                                    "cfg", -1, &a, &err),
                   TOPLU_ERR_PARSE);
  assert_non_null(strstr(err.message, "positive"));
  /* a hidden size the heads do not divide: refused unless head_dim is explicit */
  static const char indivisible[] = "{\"model_type\": \"llama\", \"hidden_size\": 4100, \"num_hidden_layers\": 2, "
                                    "\"num_attention_heads\": 32, \"vocab_size\": 100%s}";
  char cfg[512];
  snprintf(cfg, sizeof cfg, indivisible, "");
  assert_int_equal(toplu__arch_parse(cfg, "cfg", -1, &a, &err), TOPLU_ERR_PARSE);
  assert_non_null(strstr(err.message, "not divisible"));
  assert_non_null(strstr(err.message, "head_dim"));
  snprintf(cfg, sizeof cfg, indivisible, ", \"head_dim\": 128");
  memset(&a, 0, sizeof a);
  assert_int_equal(toplu__arch_parse(cfg, "cfg", -1, &a, &err), TOPLU_OK);
  assert_int_equal(a.head_dim, 128);
}

/* Llama-2 7B on a 40 GB A100 at 4096 tokens: the concurrency formula by hand. */
static void test_arch_plan_a100(void **state) {
  (void)state;
  char path[] = "/tmp/toplu-test-plan-XXXXXX";
  int fd = mkstemp(path);
  assert_true(fd >= 0);
  assert_int_equal(write(fd, llama2_7b, strlen(llama2_7b)), (ssize_t)strlen(llama2_7b));
  close(fd);
  toplu_planner_options_t o;
  toplu_planner_options_init(&o);
  o.device = "a100-40gb";
  o.context_length = 4096;
  toplu_arch_plan_t *a = NULL;
  toplu_error_t err;
  assert_int_equal(toplu_plan_arch(path, &o, &a, &err), TOPLU_OK);
  double budget = floor(0.8 * 40.0 * 1024 * 1024 * 1024);
  double act = 4096.0 * (2 * 4096 + (32 + 64) * 128 + 2 * 11008) * 2;
  double per_seq = 524288.0 * 4096 + 32000 * 4;
  int64_t want = (int64_t)floor((budget - 512.0 * 1024 * 1024 - 13476831232.0 - act) / per_seq);
  assert_int_equal(a->max_concurrent_sequences, want);
  assert_true(want >= 1 && want <= 12);
  char *js = toplu_arch_plan_json(a);
  assert_non_null(strstr(js, "\"kv_cache_bytes_per_token\": 524288"));
  assert_non_null(strstr(js, "\"max_concurrent_sequences\""));
  free(js);
  toplu_arch_plan_free(a);
  /* Too small a device: the error says how many devices hold it sharded. */
  o.device = "t4";
  assert_int_equal(toplu_plan_arch(path, &o, &a, &err), TOPLU_ERR_INVALID_ARGUMENT);
  /* ... in the option's own name (the CLI says --devices). */
  assert_non_null(strstr(err.message, "sharded, they fit on 2 devices (devices = 2)"));
  assert_null(strstr(err.message, "--"));
  o.devices = 2;
  assert_int_equal(toplu_plan_arch(path, &o, &a, &err), TOPLU_OK);
  assert_true(a->max_concurrent_sequences >= 1);
  toplu_arch_plan_free(a);
  unlink(path);
}

static void test_catalog(void **state) {
  (void)state;
  const char *required[] = {"v100-16gb", "v100-32gb", "t4",       "a10",       "a10g",     "a30",      "l4",       "l40s",
                            "a100-40gb", "a100-80gb", "a100-40gb-sxm", "a100-80gb-sxm", "h100-pcie", "h100-sxm",
                            "h200",      "rtx-3090",  "rtx-4090"};
  for (size_t i = 0; i < sizeof required / sizeof required[0]; i++) {
    toplu_device_info_t d;
    assert_int_equal(toplu_device_lookup(required[i], 0, &d, NULL), TOPLU_OK);
    assert_int_equal(d.kind, TOPLU_DEVICE_GPU);
    assert_true(d.memory_bytes >= (uint64_t)15 << 30);
    assert_true(d.bandwidth >= 300e9);
    assert_true(d.peak_flops[TOPLU_PRECISION_FP32] > 5e12);
    assert_true(d.peak_flops[TOPLU_PRECISION_FP16] >= 2 * d.peak_flops[TOPLU_PRECISION_FP32] * 0.99);
    assert_true(strlen(d.source) > 20);
  }
  toplu_device_info_t a, h, h200;
  assert_int_equal(toplu_device_lookup("A100_40GB", 0, &a, NULL), TOPLU_OK);
  assert_int_equal(a.memory_bytes, (uint64_t)40 << 30);
  assert_true(fabs(a.peak_flops[TOPLU_PRECISION_FP16] - 312e12) < 1e9);
  assert_int_equal(toplu_device_lookup("h100-sxm", 0, &h, NULL), TOPLU_OK);
  assert_int_equal(h.memory_bytes, (uint64_t)80 << 30);
  assert_true(h.bandwidth > a.bandwidth);
  assert_int_equal(toplu_device_lookup("h200", 0, &h200, NULL), TOPLU_OK);
  assert_true(h200.memory_bytes > h.memory_bytes);
  /* V100 has no bf16: hypothetical, planned with its fp32 peak. */
  toplu_device_info_t v;
  int hyp = 0;
  assert_int_equal(toplu_device_lookup("v100-16gb", 0, &v, NULL), TOPLU_OK);
  assert_true(toplu__device_peak(&v, TOPLU_PRECISION_BF16, &hyp) == v.peak_flops[TOPLU_PRECISION_FP32]);
  assert_true(hyp);
  toplu__device_peak(&v, TOPLU_PRECISION_FP16, &hyp);
  assert_false(hyp);
  toplu_error_t err;
  assert_int_equal(toplu_device_lookup("no-such-gpu", 0, &v, &err), TOPLU_ERR_NOT_FOUND);
  assert_non_null(strstr(err.message, "a100-40gb"));
  assert_non_null(strstr(err.message, "h100-sxm"));
  assert_int_equal(toplu_device_catalog_size(), 18);
}

static void test_cpu_probe(void **state) {
  (void)state;
  toplu_device_info_t c;
  assert_int_equal(toplu_device_lookup("cpu", 1, &c, NULL), TOPLU_OK);
  assert_int_equal(c.kind, TOPLU_DEVICE_CPU);
  assert_int_equal(c.threads, 1);
  assert_true(c.cores >= 1);
  assert_true(c.peak_flops[TOPLU_PRECISION_FP32] > 1e8);
  assert_true(c.bandwidth > 1e8);
  assert_true(c.memory_bytes > (uint64_t)16 << 20);
  assert_true(strlen(c.memory_source) > 0);
  /* cached: the same numbers again */
  toplu_device_info_t c2;
  assert_int_equal(toplu_device_lookup(NULL, 1, &c2, NULL), TOPLU_OK);
  assert_true(c2.peak_flops[0] == c.peak_flops[0] && c2.bandwidth == c.bandwidth);
}

static void test_cgroup_meminfo(void **state) {
  (void)state;
  assert_true(toplu__cgroup_available("max\n", "123\n", NULL) == UINT64_MAX);
  assert_true(toplu__cgroup_available("9223372036854771712\n", "123\n", NULL) == UINT64_MAX);
  /* v2: limit 1 GiB, 512 MiB in use of which 100 MiB and 5 bytes clean page cache (inactive and active) */
  assert_true(toplu__cgroup_available("1073741824\n", "536870912\n", "anon 1\ninactive_file 104857600\nactive_file 5\n") ==
              1073741824ull - (536870912ull - 104857605ull));
  /* v1 stat names the hierarchical counters total_*; dirty and writeback pages are not reclaimable at once */
  assert_true(toplu__cgroup_available("1000000\n", "400000\n", "inactive_file 5\ntotal_inactive_file 100000\n") ==
              1000000ull - 300000ull);
  assert_true(toplu__cgroup_available("1000000\n", "400000\n",
                                      "total_inactive_file 100000\ntotal_active_file 150000\ntotal_dirty 20000\n"
                                      "total_writeback 10000\n") == 1000000ull - (400000ull - 220000ull));
  /* v2 file_dirty */
  assert_true(toplu__cgroup_available("1000\n", "900\n", "inactive_file 300\nactive_file 300\nfile_dirty 100\n") ==
              1000ull - 400ull);
  assert_true(toplu__cgroup_available("1000\n", "5000\n", NULL) == 0);
  assert_true(toplu__meminfo_available("MemTotal: 100 kB\nMemFree: 50 kB\nMemAvailable:   2048 kB\n") == 2048 * 1024);
  assert_true(toplu__meminfo_available("MemTotal: 100 kB\n") == 0);
  char how[256];
  assert_true(toplu_cpu_memory_available(how, sizeof how) > 0);
  assert_true(strlen(how) > 0);
  /* CPU quota: v2 cpu.max, v1 cfs_quota_us / cfs_period_us; rounded up; none */
  assert_int_equal(toplu__cpu_quota_cores("max 100000\n", NULL), 0);
  assert_int_equal(toplu__cpu_quota_cores("400000 100000\n", NULL), 4);
  assert_int_equal(toplu__cpu_quota_cores("150000 100000\n", NULL), 2);
  assert_int_equal(toplu__cpu_quota_cores("50000 100000\n", NULL), 1);
  assert_int_equal(toplu__cpu_quota_cores("-1\n", "100000\n"), 0);
  /* unrounded, and the share of the probes' rates a quota below the threads keeps (a plan under 0.5 core
   * predicted a whole core's speed) */
  assert_true(toplu__cpu_quota_exact("50000 100000\n", NULL) == 0.5);
  assert_true(toplu__cpu_quota_exact("150000\n", "100000\n") == 1.5);
  assert_true(toplu__cpu_quota_exact("max 100000\n", NULL) == 0);
  assert_true(toplu__cpu_quota_share(0.5, 1) == 0.5);
  assert_true(toplu__cpu_quota_share(1.5, 2) == 0.75);
  assert_true(toplu__cpu_quota_share(4, 2) == 1 && toplu__cpu_quota_share(0, 2) == 1);
  assert_int_equal(toplu__cpu_quota_cores("800000\n", "100000\n"), 8);
  assert_int_equal(toplu__cpu_quota_cores("250000\n", "100000\n"), 3);
  assert_int_equal(toplu__cpu_quota_cores("garbage", NULL), 0);
  assert_int_equal(toplu__cpu_quota_cores("400000", NULL), 0); /* no period */
  /* this process: at least 1, at most the online cores, and why */
  int n = toplu_cpu_count(how, sizeof how);
  assert_true(n >= 1 && n <= sysconf(_SC_NPROCESSORS_ONLN));
  assert_true(strlen(how) > 0);
}

static void test_law_and_latency(void **state) {
  (void)state;
  toplu__mem_terms_t t1 = {100, 10, 4, 6, 50}, t2 = {100, 20, 4, 12, 50}, t;
  toplu__mem_law_t law;
  toplu__mem_law_fit(&t1, 1, &t2, 2, &law);
  toplu__mem_law_at(&law, 16, &t);
  assert_true(t.weights == 100 && t.activation == 160 && t.workspace == 4 && t.io == 96 && t.overhead == 50);
  assert_true(toplu__mem_terms_total(&t) == 410);

  /* Two steps: one compute-bound, one memory-bound, both linear in B. */
  int64_t f1[2] = {1000, 0}, m1[2] = {10, 400}, f2[2] = {2000, 0}, m2[2] = {20, 800};
  toplu__plan_point_t p1, p2;
  memset(&p1, 0, sizeof p1);
  memset(&p2, 0, sizeof p2);
  p1.batch = 1, p1.n_steps = 2, p1.step_flops = f1, p1.step_bytes = m1;
  p2.batch = 2, p2.n_steps = 2, p2.step_flops = f2, p2.step_bytes = m2;
  toplu__latency_model_t lm = {.peak_flops = 1000, .bandwidth = 100, .bytes_scale = 1, .node_overhead_s = 0.5,
                              .efficiency = 1, .intercept_s = -1};
  toplu__latency_parts_t parts;
  toplu__latency_parts(&lm, &p1, &p2, 4, &parts);
  /* step 0: max(4000/1000, 40/100) = 4 s compute; step 1: 1600/100 = 16 s memory */
  assert_true(fabs(parts.compute_s - 4) < 1e-9 && fabs(parts.memory_s - 16) < 1e-9);
  assert_true(fabs(toplu__latency_seconds(&lm, &parts) - 21) < 1e-9);
  /* Without a second plan the batch runs row by row. */
  toplu__latency_parts(&lm, &p1, NULL, 4, &parts);
  assert_true(fabs(parts.launches - 8) < 1e-9);

  /* Calibration: measured = 3 x roofline + 0.25 exactly. */
  double r[4] = {1, 2, 4, 8}, m[4];
  for (int i = 0; i < 4; i++) m[i] = 3 * r[i] + 0.25;
  double a = 0, c = 0;
  assert_int_equal(toplu__latency_fit(r, m, 4, 0.1, &a, &c), 0);
  assert_true(fabs(a - 3) < 1e-9 && fabs(c - 0.25) < 1e-9);
  /* One point: the default intercept stays. */
  assert_int_equal(toplu__latency_fit(r, m, 1, 0.25, &a, &c), 0);
  assert_true(fabs(a - 3) < 1e-9 && fabs(c - 0.25) < 1e-9);
  /* A negative intercept is refitted through the origin. */
  double m2b[3] = {0.5, 1.9, 4.0}, r2[3] = {1, 2, 4};
  assert_int_equal(toplu__latency_fit(r2, m2b, 3, 0, &a, &c), 0);
  assert_true(c == 0 && a > 0.9 && a < 1.1);
}

/* The GPU runtime model of plan/gpu_runtime.h on two nodes worked by hand. */
static void test_gpu_profile(void **state) {
  (void)state;
  toplu__gpu_profile_t pr;
  memset(&pr, 0, sizeof pr);
  pr.name = "test";
  pr.fit.ec[0] = 0.5;
  pr.fit.ec[1] = 0.25;
  pr.fit.em = 0.5;
  pr.fit.ihalf = 10;
  pr.fit.kernel_us = 2;
  pr.fit.host_us = 100;
  pr.fit.light_us = 10;
  pr.fit.overlap_k = 2;
  pr.fit.batch_us = 50;
  pr.fit.io_gbs = 10;
  /* node 0: 1e12 FLOPs, 1e9 bytes; node 1: no FLOPs, 2e9 bytes; node 2: a view */
  double flops[3] = {1e12, 0, 0}, bytes[3] = {1e9, 2e9, 0};
  toplu__gpu_parts_t parts;
  /* tensor precision, peak 1e14, bandwidth 1e12, device factor 2: ec 0.5, em 1.0 */
  pr.fit.autocast = 1.5;
  /* device factors: compute 2, memory 2, host 1 */
  toplu__gpu_device_factor_t df = {"test", 2, 2, 1};
  double s = toplu__gpu_profile_latency(&pr, &df, 1e14, 1e12, 1, 0, flops, bytes, 3, 1, 1, 1e8, &parts);
  double compute = (1e12 + 10 * 1e9) / (1e14 * 0.5); /* 0.0202 s > 1e9 / 1e12 */
  double memory = 2e9 / 1e12;                        /* 0.002 s */
  double gpu = compute + memory + 2 * 2e-6, host = 110e-6;
  assert_true(fabs(parts.compute - compute) < 1e-15 && fabs(parts.memory - memory) < 1e-15);
  assert_true(fabs(parts.gpu - gpu) < 1e-15 && fabs(parts.host - host) < 1e-15);
  assert_true(fabs(parts.io - 0.01) < 1e-15);
  assert_true(fabs(s - (sqrt(gpu * gpu + host * host) + 50e-6 + 0.01)) < 1e-12);
  /* fp32: ec[0] = 0.5 x 2 = 1 */
  s = toplu__gpu_profile_latency(&pr, &df, 1e14, 1e12, 0, 0, flops, bytes, 3, 1, 1, 0, &parts);
  assert_true(fabs(parts.compute - (1e12 + 1e10) / 1e14) < 1e-15);
  /* the memory factor alone: em 0.5 x 4 = 2 halves the memory node; host x 3 and x autocast 1.5 */
  toplu__gpu_device_factor_t dm = {"test", 2, 4, 3};
  s = toplu__gpu_profile_latency(&pr, &dm, 1e14, 1e12, 1, 1, flops, bytes, 3, 1, 1, 0, &parts);
  assert_true(fabs(parts.memory - 2e9 / 2e12) < 1e-15 && fabs(parts.compute - compute) < 1e-15);
  assert_true(fabs(parts.host - 110e-6 * 3 * 1.5) < 1e-15);
  /* no factors (NULL): all 1 */
  s = toplu__gpu_profile_latency(&pr, NULL, 1e14, 1e12, 0, 0, flops, bytes, 3, 1, 1, 0, &parts);
  assert_true(fabs(parts.compute - (1e12 + 1e10) / (1e14 * 0.5)) < 1e-15 && fabs(parts.memory - 2e9 / 5e11) < 1e-15);
  /* the profiles: names, aliases, the default, device factors */
  assert_non_null(toplu__gpu_profile_find("TensorRT"));
  assert_string_equal(toplu__gpu_profile_find("trt")->name, "tensorrt");
  assert_string_equal(toplu__gpu_profile_find("torch")->name, "pytorch");
  assert_string_equal(toplu__gpu_profile_find("triton")->name, "triton-tensorrt");
  assert_string_equal(toplu__gpu_profile_find("ort")->name, "onnxruntime-cuda");
  assert_null(toplu__gpu_profile_find("tvm"));
  assert_string_equal(toplu__gpu_profile_default(), "tensorrt");
  assert_true(toplu__gpu_profile_find("pytorch")->fit.tables >= 1);
  assert_int_equal(toplu__gpu_profile_find("onnxruntime-cuda")->fit.tables, 0);
  int fitted = -1;
  const toplu__gpu_device_factor_t *v = toplu__gpu_device_factor("v100-16gb", &fitted);
  assert_true(fitted == 1 && v->compute == 1 && v->memory == 1 && v->host == 1); /* the reference */
  toplu__gpu_device_factor("t4", &fitted);
  assert_int_equal(fitted, 1);
  const toplu__gpu_device_factor_t *h = toplu__gpu_device_factor("h100-sxm", &fitted);
  assert_true(fitted == 0 && h->compute == 1 && h->memory == 1);
  assert_true(h->host == toplu__gpu_device_factor("a100-40gb", NULL)->host); /* the newest host in the tables */
  toplu__gpu_device_factor("a1000", &fitted); /* a prefix, not a family */
  assert_int_equal(fitted, 0);
}

/* int8: steps of integer arithmetic at the int8 rate, the others at the fp32 one; the int8 probe. */
static void test_int8_rate(void **state) {
  (void)state;
  assert_true(toplu__step_is_int8("QLinearConv") && toplu__step_is_int8("QLinearConv+QLinearAdd") &&
              toplu__step_is_int8("QLinearMatMul") && toplu__step_is_int8("ConvInteger") &&
              toplu__step_is_int8("MatMulInteger") && toplu__step_is_int8("DynamicQuantizeMatMul") &&
              toplu__step_is_int8("QLinearConvFloat"));
  assert_false(toplu__step_is_int8("Conv+Relu") || toplu__step_is_int8("QLinearAdd") || toplu__step_is_int8("MatMul") ||
               toplu__step_is_int8("QuantizeLinear") || toplu__step_is_int8("Reorder") || toplu__step_is_int8(NULL));
  /* step 0 (integer): 4000 ops at 4000 OP/s = 1 s, its 40 bytes 0.4 s; step 1 (float): 1600 bytes at 100 B/s = 16 s */
  int64_t f1[2] = {1000, 0}, m1[2] = {10, 400}, f2[2] = {2000, 0}, m2[2] = {20, 800};
  unsigned char i8[2] = {1, 0};
  toplu__plan_point_t p1, p2;
  memset(&p1, 0, sizeof p1);
  memset(&p2, 0, sizeof p2);
  p1.batch = 1, p1.n_steps = 2, p1.step_flops = f1, p1.step_bytes = m1, p1.step_int8 = i8;
  p2.batch = 2, p2.n_steps = 2, p2.step_flops = f2, p2.step_bytes = m2, p2.step_int8 = i8;
  toplu__latency_model_t lm = {.peak_flops = 1000, .int8_peak_flops = 4000, .bandwidth = 100, .bytes_scale = 1,
                              .node_overhead_s = 0.5, .efficiency = 1, .intercept_s = -1};
  toplu__latency_parts_t parts;
  toplu__latency_parts(&lm, &p1, &p2, 4, &parts);
  assert_true(fabs(parts.compute_s - 1) < 1e-9 && fabs(parts.memory_s - 16) < 1e-9);
  lm.int8_peak_flops = 0; /* none: every step at peak_flops (4 s) */
  toplu__latency_parts(&lm, &p1, &p2, 4, &parts);
  assert_true(fabs(parts.compute_s - 4) < 1e-9);
  /* The probe: a rate and the code it used; on a VNNI CPU above the fp32 FMA rate (vpdpbusd: 64 products,
   * 128 ops, an instruction against an FMA's 32 flops; at least 2x wherever VNNI has half the FMA ports) */
  const char *isa = NULL;
  double i8r = toplu_cpu_int8_peak_gops(1, &isa), f32 = toplu_cpu_fp32_peak_gflops(1);
  assert_non_null(isa);
  assert_true(i8r > 0 && f32 > 0);
  assert_true(fabs(toplu_cpu_int8_peak_gops(2, NULL) - 2 * i8r) < 1e-9 * i8r); /* one core's, cached, x threads */
  if (!strcmp(isa, "avx512_vnni") || !strcmp(isa, "avx_vnni")) {
    if (!(i8r > 1.3 * f32)) fprintf(stderr, "int8 %s %.1f GOP/s, fp32 %.1f GFLOP/s\n", isa, i8r, f32);
    assert_true(i8r > 1.3 * f32);
  }
}

static void test_tuner_statistics(void **state) {
  (void)state;
  double x[5] = {1, 2, 3, 4, 5};
  assert_true(toplu__percentile(x, 5, 50) == 3);
  assert_true(fabs(toplu__percentile(x, 5, 90) - 4.6) < 1e-12);
  assert_true(fabs(toplu__percentile(x, 5, 99) - 4.96) < 1e-12);
  assert_true(toplu__percentile(x, 1, 99) == 1);
  double thr[4] = {50, 100, 104, 98}, p99[4] = {9, 10, 10.5, 9.8};
  assert_true(toplu__windows_stable(thr, p99, 4, 0.10));
  assert_false(toplu__windows_stable(thr, p99, 3, 0.10)); /* 50 vs 104 */
  double p99b[4] = {9, 10, 12, 9.8};
  assert_false(toplu__windows_stable(thr, p99b, 4, 0.10));
  assert_false(toplu__windows_stable(thr, p99, 2, 0.10));
  assert_string_equal(toplu_tune_status_name(TOPLU_TUNE_OVER_BUDGET), "over_budget");
  toplu_precision_t p;
  assert_int_equal(toplu_precision_from_name("bfloat16", &p), TOPLU_OK);
  assert_int_equal(p, TOPLU_PRECISION_BF16);
  assert_int_equal(toplu_precision_from_name("fp8", &p), TOPLU_ERR_INVALID_ARGUMENT);
  double w, act;
  toplu__precision_scales(TOPLU_PRECISION_FP16, &w, &act);
  assert_true(w == 0.5 && act == 0.5);
  toplu__precision_scales(TOPLU_PRECISION_INT8, &w, &act);
  assert_true(w == 0.25 && act == 0.5);
}

/* Shape profiles: sets pair up, labels name the resolved sizes, bad text is refused and leaves the list as it was. */
static void test_shape_profiles(void **state) {
  (void)state;
  toplu_shape_profiles_t sp;
  toplu_error_t err;
  toplu_shape_profiles_init(&sp);
  assert_int_equal(sp.n_profiles, 0);
  assert_int_equal(toplu_shape_profiles_add(&sp, "x=1x3x48x{320,640,1280}", &err), TOPLU_OK);
  assert_int_equal(sp.n_profiles, 3);
  assert_int_equal(sp.n_shapes, 1);
  assert_int_equal(sp.n_sets, 1);
  assert_string_equal(sp.labels[1], "x=1x3x48x640");
  assert_int_equal(sp.shapes[2].ndim, 4);
  assert_true(sp.shapes[2].dims[3] == 1280 && sp.shapes[2].dims[2] == 48);
  /* a second input without a set applies to every profile; with a set of the same length it pairs */
  assert_int_equal(toplu_shape_profiles_add(&sp, "m=Bx{16,128,384}", &err), TOPLU_OK);
  assert_int_equal(toplu_shape_profiles_add(&sp, "k=[1, 7]", &err), TOPLU_OK);
  assert_int_equal(sp.n_profiles, 3);
  assert_int_equal(sp.n_shapes, 3);
  assert_string_equal(sp.labels[2], "x=1x3x48x1280 m=1x384 k=1x7");
  assert_string_equal(sp.shapes[1 * 3 + 1].name, "m");
  assert_true(sp.shapes[1 * 3 + 1].dims[1] == 128 && sp.shapes[0 * 3 + 2].dims[1] == 7);
  /* refusals name the text and leave the list unchanged */
  static const struct {
    const char *text, *why;
  } bad[] = {
      {"y=1x{16,128}", "a set of 2 sizes, but x=1x3x48x{320,640,1280} has sets of 3"},
      {"y=1x{}", "dim 1: an empty set {}"},
      {"y=1x{16,}", "a size is missing in the set"},
      {"y=1x{a}", "dim 1 = 'a' is not a number"},
      {"y=1x{16", "not closed"},
      {"y=1x{{16}}", "a set inside a set"},
      {"y=1x{16,32}x{1,2,3}", "sets of different lengths"},
      {"y=1x{16,2147483648,3}", "is too large"},
      {"x=1x3x48x320", "x given twice"},
      {"y", "expected NAME=DIMS"},
      {"y=1x2x3x4x5x6x7x8x9", "more than 8 dims"},
  };
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    assert_int_equal(toplu_shape_profiles_add(&sp, bad[i].text, &err), TOPLU_ERR_INVALID_ARGUMENT);
    if (!strstr(err.message, bad[i].why) || strncmp(err.message, "shapes: ", 8))
      fail_msg("%s: got '%s'", bad[i].text, err.message);
    assert_int_equal(sp.n_profiles, 3);
    assert_int_equal(sp.n_shapes, 3);
  }
  /* a set of one value is that value */
  toplu_shape_profiles_free(&sp);
  assert_int_equal(sp.n_profiles, 0);
  assert_int_equal(toplu_shape_profiles_add(&sp, "x=1x{5}", &err), TOPLU_OK);
  assert_int_equal(sp.n_profiles, 1);
  assert_int_equal(sp.n_sets, 0);
  assert_string_equal(sp.labels[0], "x=1x5");
  /* 64 sizes fit, 65 do not */
  char text[1024] = "z=1x{1";
  for (int i = 2; i <= 64; i++) snprintf(text + strlen(text), sizeof text - strlen(text), ",%d", i);
  strcat(text, "}");
  assert_int_equal(toplu_shape_profiles_add(&sp, text, &err), TOPLU_OK);
  assert_int_equal(sp.n_profiles, 64);
  assert_true(sp.shapes[63 * 2 + 1].dims[1] == 64 && sp.shapes[63 * 2].dims[1] == 5);
  text[strlen(text) - 1] = 0;
  strcat(text, ",65}");
  text[0] = 'w';
  assert_int_equal(toplu_shape_profiles_add(&sp, text, &err), TOPLU_ERR_INVALID_ARGUMENT);
  assert_non_null(strstr(err.message, "more than 64 sizes in a set"));
  toplu_shape_profiles_free(&sp);
  toplu_shape_profiles_free(NULL);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_llama2_7b),       cmocka_unit_test(test_llama2_70b_mistral_gpt2),
      cmocka_unit_test(test_arch_errors),     cmocka_unit_test(test_arch_plan_a100),
      cmocka_unit_test(test_catalog),         cmocka_unit_test(test_cpu_probe),
      cmocka_unit_test(test_cgroup_meminfo),  cmocka_unit_test(test_law_and_latency),
      cmocka_unit_test(test_tuner_statistics), cmocka_unit_test(test_bert_encoder),
      cmocka_unit_test(test_gpu_profile),     cmocka_unit_test(test_int8_rate),
      cmocka_unit_test(test_tune_identity),   cmocka_unit_test(test_core_hash),
      cmocka_unit_test(test_core_identity),   cmocka_unit_test(test_option_messages),
      cmocka_unit_test(test_shape_profiles),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
