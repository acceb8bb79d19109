/*
 * plan/arch.c - plan a transformer language model from its Hugging Face
 * config.json: weights, KV cache per token, concurrent sequences on a device
 * (formulas in plan/arch.h; config keys as the transformers library's
 * LlamaConfig, MistralConfig, GPT2Config, ... define them).
 */
#include "plan/arch.h"

#include <errno.h>
#include <jansson.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/checked.h"
#include "core/error.h"
#include "plan/device.h"
#include "plan/plan_report.h"

/* Families whose MLP is gated (gate and up projections, SwiGLU/GeGLU). */
static const char *gated_types[] = {"llama", "mistral", "mixtral", "qwen2", "qwen2_moe", "qwen3", "qwen3_moe",
                                    "gemma", "gemma2", "gemma3_text", "phi3", "olmo", "olmo2", "internlm2",
                                    "baichuan", "yi", "cohere", "deepseek", "deepseek_v2", "deepseek_v3",
                                    "granite", "starcoder2_gated", NULL};
/* Families with biases on every linear layer and LayerNorm. */
static const char *bias_types[] = {"gpt2", "gpt_neo", "gpt_neox", "opt", "bert", "roberta", "phi", "bloom",
                                   "gpt_bigcode", "starcoder2", "xlm-roberta", "xlm-roberta-xl", "distilbert",
                                   "electra", "camembert", "megatron-bert", "data2vec-text", "ibert", "ernie",
                                   "layoutlm", "xmod", NULL};
/* Families with LayerNorm (weight and bias) but not all biases. */
static const char *layernorm_types[] = {"falcon", "gptj", NULL};
/* Families with learned absolute position embeddings. */
static const char *learned_pos_types[] = {"gpt2", "gpt_neo", "opt", "bert", "roberta", "gpt_bigcode",
                                          "xlm-roberta", "xlm-roberta-xl", "distilbert", "electra", "camembert",
                                          "megatron-bert", "data2vec-text", "ibert", "ernie", "layoutlm", "xmod",
                                          NULL};
/* BERT-style families whose base model has a pooler (dense h x h + bias). */
static const char *pooler_types[] = {"bert", "roberta", "xlm-roberta", "xlm-roberta-xl", "camembert",
                                     "megatron-bert", "ernie", NULL};
/* Families whose embeddings are not tied unless the config says so. */
static const char *untied_types[] = {"llama", "mistral", "mixtral", "falcon", "gptj", "gpt_neox", "phi3",
                                     "deepseek_v2", "deepseek_v3", "olmo", "internlm2", "baichuan", NULL};

/* Encoder-only families (BERT style): bidirectional attention, no causal LM
 * head, so no KV cache and no token-by-token decode. */
static const char *encoder_types[] = {"bert", "roberta", "xlm-roberta", "xlm-roberta-xl", "distilbert", "albert",
                                      "electra", "deberta", "deberta-v2", "camembert", "mpnet", "ernie",
                                      "nomic_bert", "modernbert", "megatron-bert", "mobilebert", "squeezebert",
                                      "convbert", "roformer", "data2vec-text", "esm", "nezha", "rembert",
                                      "layoutlm", "xmod", "ibert", NULL};
/* Architecture name endings of models that generate text (a causal LM head
 * or a decoder): these keep a KV cache even when the family is BERT's. */
static const char *causal_suffixes[] = {"ForCausalLM", "LMHeadModel", "ForConditionalGeneration", "ForSeq2SeqLM",
                                        NULL};

/* 1 when s ends with suffix. */
static int ends_with(const char *s, const char *suffix) {
  size_t a = strlen(s), b = strlen(suffix);
  return a >= b && !strcmp(s + a - b, suffix);
}

/* 1 when one of the config's "architectures" ends with one of suffixes (or
 * equals name when suffixes is NULL). */
static int has_architecture(json_t *o, const char **suffixes, const char *name) {
  json_t *arr = json_object_get(o, "architectures");
  for (size_t i = 0; i < json_array_size(arr); i++) {
    const char *s = json_string_value(json_array_get(arr, i));
    if (!s) continue;
    if (!suffixes && name && ends_with(s, name)) return 1;
    for (int k = 0; suffixes && suffixes[k]; k++)
      if (ends_with(s, suffixes[k])) return 1;
  }
  return 0;
}

/* 1 when s is one of the NULL-terminated list. */
static int in_list(const char *s, const char **list) {
  for (int i = 0; s && list[i]; i++)
    if (!strcmp(s, list[i])) return 1;
  return 0;
}

/* First present integer key of a list (NULL-terminated); -1 absent; -2 present but not a positive integer. */
static int64_t get_int(json_t *o, const char **keys, const char **found) {
  for (int i = 0; keys[i]; i++) {
    json_t *v = json_object_get(o, keys[i]);
    if (!v || json_is_null(v)) continue;
    if (found) *found = keys[i];
    if (json_is_integer(v) && json_integer_value(v) > 0) return (int64_t)json_integer_value(v);
    /* A whole real below 2^53 (exact in a double; larger ones, 1e300 say,
     * would not convert to int64_t: C11 6.3.1.4, undefined). */
    if (json_is_real(v) && json_real_value(v) > 0 && json_real_value(v) < 9007199254740992.0 &&
        json_real_value(v) == floor(json_real_value(v)))
      return (int64_t)json_real_value(v);
    return -2;
  }
  return -1;
}

/* A required positive integer: the first of keys present. */
static toplu_status_t need_int(json_t *o, const char *name, const char **keys, int64_t *out, toplu_error_t *err) {
  const char *found = keys[0];
  int64_t v = get_int(o, keys, &found);
  if (v == -1)
    return toplu__errorf(err, TOPLU_ERR_PARSE, "%s: no \"%s\" (a required integer of a transformer config)", name,
                        keys[0]);
  if (v == -2) return toplu__errorf(err, TOPLU_ERR_PARSE, "%s: \"%s\" must be a positive integer", name, found);
  *out = v;
  return TOPLU_OK;
}

/* Optional boolean: 1/0, or dflt when absent. */
static int get_bool(json_t *o, const char *key, int dflt) {
  json_t *v = json_object_get(o, key);
  if (json_is_boolean(v)) return json_is_true(v);
  return dflt;
}

toplu_status_t toplu__arch_parse(const char *text, const char *name, int precision_override, toplu_arch_plan_t *a,
                                toplu_error_t *err) {
  json_error_t je;
  json_t *o = json_loads(text, 0, &je);
  if (!o) return toplu__errorf(err, TOPLU_ERR_PARSE, "%s: not JSON (line %d: %s)", name, je.line, je.text);
  if (!json_is_object(o)) {
    json_decref(o);
    return toplu__errorf(err, TOPLU_ERR_PARSE, "%s: not a JSON object", name);
  }
  /* Multimodal configs keep the language model under text_config. */
  json_t *tc = json_object_get(o, "text_config");
  json_t *c = json_is_object(tc) && !json_object_get(o, "num_hidden_layers") ? tc : o;
  toplu_status_t st;
  static const char *k_layers[] = {"num_hidden_layers", "n_layer", "num_layers", "n_layers", NULL};
  static const char *k_hidden[] = {"hidden_size", "n_embd", "d_model", "dim", NULL};
  static const char *k_heads[] = {"num_attention_heads", "n_head", "num_heads", "n_heads", NULL};
  static const char *k_kv[] = {"num_key_value_heads", "n_head_kv", "num_kv_heads", "n_kv_heads", NULL};
  static const char *k_hd[] = {"head_dim", NULL};
  static const char *k_inter[] = {"intermediate_size", "n_inner", "ffn_dim", "ffn_hidden_size", NULL};
  static const char *k_vocab[] = {"vocab_size", "padded_vocab_size", NULL};
  static const char *k_ctx[] = {"max_position_embeddings", "n_positions", "max_sequence_length", "seq_length",
                                "n_ctx", NULL};
  static const char *k_experts[] = {"num_local_experts", "n_routed_experts", "num_experts", NULL};
  static const char *k_top[] = {"num_experts_per_tok", "num_experts_per_token", "moe_top_k", NULL};
  const char *mt = json_string_value(json_object_get(c, "model_type"));
  if (!mt) mt = json_string_value(json_object_get(o, "model_type"));
  snprintf(a->model_type, sizeof a->model_type, "%s", mt ? mt : "unknown");
  if ((st = need_int(c, name, k_layers, &a->layers, err)) || (st = need_int(c, name, k_hidden, &a->hidden, err)) ||
      (st = need_int(c, name, k_heads, &a->heads, err)) || (st = need_int(c, name, k_vocab, &a->vocab, err))) {
    json_decref(o);
    return st;
  }
  int64_t v;
  a->kv_heads = (v = get_int(c, k_kv, NULL)) > 0 ? v : get_bool(c, "multi_query", 0) ? 1 : a->heads;
  v = get_int(c, k_hd, NULL);
  if (v == -2) {
    json_decref(o);
    return toplu__errorf(err, TOPLU_ERR_PARSE, "%s: \"head_dim\" must be a positive integer", name);
  }
  if (v > 0) {
    a->head_dim = v;
  } else if (a->hidden % a->heads) {
    const char *kh = k_hidden[0], *ka = k_heads[0];
    get_int(c, k_hidden, &kh);
    get_int(c, k_heads, &ka);
    json_decref(o);
    return toplu__errorf(err, TOPLU_ERR_PARSE,
                        "%s: \"%s\" %lld is not divisible by \"%s\" %lld (%lld / %lld = %.3f): the head size is "
                        "unknown; give \"head_dim\" in the config if the model really has heads of another size",
                        name, kh, (long long)a->hidden, ka, (long long)a->heads, (long long)a->hidden,
                        (long long)a->heads, (double)a->hidden / (double)a->heads);
  } else {
    a->head_dim = a->hidden / a->heads;
  }
  bool ok = true; /* every product below is checked (core/checked.h) */
  a->intermediate = (v = get_int(c, k_inter, NULL)) > 0 ? v : toplu__mul_i64_ok(4, a->hidden, &ok);
  a->max_context = (v = get_int(c, k_ctx, NULL)) > 0 ? v : 2048;
  a->experts = (v = get_int(c, k_experts, NULL)) > 0 ? v : 0;
  a->experts_per_token = (v = get_int(c, k_top, NULL)) > 0 ? v : (a->experts ? 2 : 0);
  if (a->heads % a->kv_heads && a->kv_heads <= a->heads) {
    json_decref(o);
    return toplu__errorf(err, TOPLU_ERR_PARSE, "%s: %lld attention heads are not a multiple of %lld key-value heads",
                        name, (long long)a->heads, (long long)a->kv_heads);
  }
  const char *act = json_string_value(json_object_get(c, "hidden_act"));
  if (!act) act = json_string_value(json_object_get(c, "activation_function"));
  a->gated_mlp = in_list(mt, gated_types) ||
                 (!in_list(mt, bias_types) && act && (!strcmp(act, "silu") || !strcmp(act, "swiglu")));
  int bias_all = in_list(mt, bias_types);
  int layernorm = bias_all || in_list(mt, layernorm_types);
  int qkv_bias = get_bool(c, "attention_bias", mt && !strcmp(mt, "qwen2"));
  int mlp_bias = get_bool(c, "mlp_bias", 0);
  int learned_pos = in_list(mt, learned_pos_types);
  int causal = has_architecture(o, causal_suffixes, NULL) || has_architecture(c, causal_suffixes, NULL) ||
               get_bool(c, "is_decoder", 0);
  a->encoder_only = !causal && (in_list(mt, encoder_types) || has_architecture(o, NULL, "ForMaskedLM"));
  a->tied_embeddings = get_bool(c, "tie_word_embeddings", get_bool(o, "tie_word_embeddings", !in_list(mt, untied_types)));

  /* Precision of the weights. */
  toplu_precision_t prec = TOPLU_PRECISION_FP32;
  const char *dt = json_string_value(json_object_get(c, "torch_dtype"));
  if (!dt) dt = json_string_value(json_object_get(o, "torch_dtype"));
  if (!dt) dt = json_string_value(json_object_get(c, "dtype"));
  if (dt && toplu_precision_from_name(dt, &prec) != TOPLU_OK) prec = TOPLU_PRECISION_FP32;
  if (precision_override >= 0) prec = (toplu_precision_t)precision_override;
  a->precision = prec;
  a->bytes_per_param_x4 = prec == TOPLU_PRECISION_INT8 ? 4 : (prec == TOPLU_PRECISION_FP16 || prec == TOPLU_PRECISION_BF16) ? 8 : 16;
  a->kv_bytes_per_element = prec == TOPLU_PRECISION_FP32 || prec == TOPLU_PRECISION_TF32 ? 4 : 2;

#define ADD(x, y) toplu__add_i64_ok((x), (y), &ok)
#define MUL(x, y) toplu__mul_i64_ok((x), (y), &ok)
  int64_t h = a->hidden, q = MUL(a->heads, a->head_dim), k = MUL(a->kv_heads, a->head_dim), I = a->intermediate;
  int64_t attn = ADD(ADD(MUL(h, q), MUL(2, MUL(h, k))), MUL(q, h));
  if (bias_all) attn = ADD(attn, ADD(ADD(q, MUL(2, k)), h));
  else if (qkv_bias) attn = ADD(attn, ADD(q, MUL(2, k)));
  int64_t mlp1 = MUL(a->gated_mlp ? 3 : 2, MUL(h, I));
  if (bias_all || mlp_bias) mlp1 = ADD(mlp1, ADD(a->gated_mlp ? MUL(2, I) : I, h));
  int64_t mlp = a->experts ? ADD(MUL(a->experts, mlp1), MUL(h, a->experts)) : mlp1;
  int64_t norm = layernorm ? MUL(2, h) : h;
  int64_t layer = ADD(ADD(attn, mlp), MUL(2, norm));
  int64_t embed = MUL(a->vocab, h);
  a->params = ADD(ADD(ADD(ADD(MUL(a->layers, layer), embed), a->tied_embeddings ? 0 : embed),
                      learned_pos ? MUL(a->max_context, h) : 0),
                  norm);
  if (a->encoder_only) {
    int64_t types = get_int(c, (const char *[]){"type_vocab_size", NULL}, NULL);
    if (types > 0) a->params = ADD(a->params, MUL(types, h)); /* token type (segment) embeddings */
    int mlm = has_architecture(o, NULL, "ForMaskedLM") || has_architecture(o, NULL, "ForPreTraining");
    int pooled = !json_array_size(json_object_get(o, "architectures")) || has_architecture(o, NULL, "Model") ||
                 has_architecture(o, NULL, "ForSequenceClassification") ||
                 has_architecture(o, NULL, "ForMultipleChoice") || has_architecture(o, NULL, "ForPreTraining") ||
                 has_architecture(o, NULL, "ForNextSentencePrediction");
    if (pooled && in_list(mt, pooler_types)) a->params = ADD(a->params, ADD(MUL(h, h), h));
    if (mlm) /* MLM head: transform, its norm, the decoder's bias */
      a->params = ADD(a->params, ADD(ADD(ADD(MUL(h, h), h), norm), a->vocab));
  }
  a->weights_bytes = MUL(a->params, a->bytes_per_param_x4) / 4;
  a->kv_cache_bytes_per_token =
      a->encoder_only ? 0 : MUL(MUL(MUL(MUL(2, a->layers), a->kv_heads), a->head_dim), a->kv_bytes_per_element);
#undef ADD
#undef MUL
  json_decref(o);
  if (!ok)
    return toplu__errorf(err, TOPLU_ERR_PARSE,
                        "%s: the config's sizes (%lld layers, hidden %lld, %lld heads of %lld, intermediate %lld, "
                        "vocabulary %lld, %lld experts) multiply out past 2^63 parameters or bytes",
                        name, (long long)a->layers, (long long)a->hidden, (long long)a->heads, (long long)a->head_dim,
                        (long long)a->intermediate, (long long)a->vocab, (long long)a->experts);
  return TOPLU_OK;
}

/* Add a note (one sentence). */
static void arch_note(toplu_arch_plan_t *a, const char *fmt, ...) TOPLU_PRINTF(2, 3);
static void arch_note(toplu_arch_plan_t *a, const char *fmt, ...) {
  if (a->n_notes >= TOPLU_PLAN_MAX_NOTES) { /* full: say so in the last one rather than drop notes silently */
    snprintf(a->notes[TOPLU_PLAN_MAX_NOTES - 1], sizeof a->notes[0],
             "more notes than the %d kept (TOPLU_PLAN_MAX_NOTES): the later ones are not shown", TOPLU_PLAN_MAX_NOTES);
    return;
  }
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(a->notes[a->n_notes++], sizeof a->notes[0], fmt, ap);
  va_end(ap);
}

toplu_status_t toplu_plan_arch(const char *path, const toplu_planner_options_t *opts, toplu_arch_plan_t **out,
                               toplu_error_t *err) {
  toplu_error_clear(err);
  toplu_planner_options_t defaults;
  if (!opts) {
    toplu_planner_options_init(&defaults);
    opts = &defaults;
  }
  if (!path || !out) return toplu__errorf(err, TOPLU_ERR_INVALID_ARGUMENT, "toplu_plan_arch: NULL argument");
  *out = NULL;
  if (!(opts->mem_fraction > 0 && opts->mem_fraction <= 1))
    return toplu__errorf(err, TOPLU_ERR_INVALID_ARGUMENT, "mem_fraction must be in (0, 1], got %g",
                        opts->mem_fraction);
  if (opts->devices < 1) return toplu__errorf(err, TOPLU_ERR_INVALID_ARGUMENT, "devices must be >= 1, got %d", opts->devices);
  if (opts->context_length < 0)
    return toplu__errorf(err, TOPLU_ERR_INVALID_ARGUMENT, "context_length must be >= 0 (0: the model's maximum), got %lld",
                        (long long)opts->context_length);
  FILE *f = fopen(path, "rb");
  if (!f) return toplu__errorf(err, TOPLU_ERR_IO, "config file %s: %s", path, strerror(errno));
  size_t cap = 1 << 20, n = 0;
  char *text = malloc(cap + 1);
  if (!text) {
    fclose(f);
    return toplu__errorf(err, TOPLU_ERR_OUT_OF_MEMORY, "out of memory");
  }
  n = fread(text, 1, cap, f);
  fclose(f);
  text[n] = 0;
  toplu_arch_plan_t *a = calloc(1, sizeof *a);
  if (!a) {
    free(text);
    return toplu__errorf(err, TOPLU_ERR_OUT_OF_MEMORY, "out of memory");
  }
  snprintf(a->config, sizeof a->config, "%s", path);
  toplu_status_t st = toplu__arch_parse(text, path, opts->precision_set ? (int)opts->precision : -1, a, err);
  free(text);
  if (st) goto fail;
  if ((st = toplu_device_lookup(opts->device, opts->threads, &a->device, err))) goto fail;
  a->context_length = opts->context_length > 0 ? opts->context_length : a->max_context;
  if (a->context_length > a->max_context)
    arch_note(a, "context_length %lld is beyond the model's %lld positions", (long long)a->context_length,
              (long long)a->max_context);
  bool ok = true;
  a->kv_cache_bytes_per_sequence = toplu__mul_i64_ok(a->kv_cache_bytes_per_token, a->context_length, &ok);
  /* The largest moment of a forward pass with FlashAttention-style attention:
   * one layer's tensors during the prefill of one sequence. */
  int act_bytes = a->kv_bytes_per_element;
  int64_t heads = toplu__add_i64_ok(a->heads, toplu__mul_i64_ok(2, a->kv_heads, &ok), &ok);
  int64_t per_tok = toplu__add_i64_ok(toplu__add_i64_ok(toplu__mul_i64_ok(2, a->hidden, &ok),
                                                        toplu__mul_i64_ok(heads, a->head_dim, &ok), &ok),
                                      toplu__mul_i64_ok(2, a->intermediate, &ok), &ok);
  a->activation_bytes_per_token = toplu__mul_i64_ok(per_tok, act_bytes, &ok);
  a->activation_bytes = toplu__mul_i64_ok(a->context_length, a->activation_bytes_per_token, &ok);
  if (!ok) {
    st = toplu__errorf(err, TOPLU_ERR_PARSE,
                       "%s: a %lld-token context's KV cache or activations come to more than 2^63 bytes", path,
                       (long long)a->context_length);
    goto fail;
  }
  a->mem_fraction = opts->mem_fraction;
  a->devices = opts->devices;
  a->capacity_bytes = opts->memory_bytes ? opts->memory_bytes : a->device.memory_bytes;
  double per_dev = floor(opts->mem_fraction * (double)a->capacity_bytes);
  double ovh = a->device.kind == TOPLU_DEVICE_GPU ? (double)a->device.runtime_overhead_bytes : 0;
  /* A decoder: each sequence holds its KV cache and the fp32 logits of its
   * last token beside one prefill's working set.  An encoder: each sequence
   * of a batch holds its share of the forward pass's working set. */
  double per_seq = a->encoder_only ? (double)a->activation_bytes
                                   : (double)a->kv_cache_bytes_per_sequence + (double)a->vocab * 4;
  double shared_act = a->encoder_only ? 0 : (double)a->activation_bytes;
  double need1 = (double)a->weights_bytes + shared_act + per_seq;
  int needed = 0;
  for (int d = 1; d <= 4096; d++)
    if (d * (per_dev - ovh) >= need1) {
      needed = d;
      break;
    }
  a->devices_needed = needed;
  char b1[32], b2[32], b3[32];
  if (!needed || needed > a->devices) {
    st = toplu__errorf(err, TOPLU_ERR_INVALID_ARGUMENT,
                      "memory below the weights: %s of weights + %s for one %lld-token sequence do not fit in %s "
                      "(mem_fraction %.2f x %s%s)%s",
                      toplu__fmt_bytes((double)a->weights_bytes, b1, sizeof b1),
                      toplu__fmt_bytes(shared_act + per_seq, b2, sizeof b2),
                      (long long)a->context_length, toplu__fmt_bytes(per_dev * a->devices, b3, sizeof b3),
                      opts->mem_fraction, a->device.name, a->devices > 1 ? " per device" : "",
                      needed ? "" : "; no device count up to 4096 holds them");
    if (needed) {
      char more[96];
      snprintf(more, sizeof more, "; sharded, they fit on %d devices (devices = %d)", needed, needed);
      size_t l = err ? strlen(err->message) : 0;
      if (err && l + strlen(more) < sizeof err->message) strcat(err->message, more);
    }
    goto fail;
  }
  a->budget_bytes = (uint64_t)(per_dev * a->devices);
  a->overhead_bytes = (uint64_t)(ovh * a->devices);
  double free_bytes = (double)a->budget_bytes - (double)a->overhead_bytes - (double)a->weights_bytes - shared_act;
  double seqs = free_bytes > 0 && per_seq > 0 ? floor(free_bytes / per_seq) : 0;
  a->max_concurrent_sequences = seqs < 9.2e18 ? (int64_t)seqs : INT64_MAX;
  if (a->encoder_only) {
    arch_note(a, "encoder-only (%s, no causal LM head): no KV cache and no token-by-token decode; one forward pass "
                 "encodes a batch of sequences",
              a->model_type);
    arch_note(a, "activations: one layer's working set per %lld-token sequence, context x (2h + (heads + 2 "
                 "kv_heads) x head_dim + 2 I) x %d bytes, times the sequences in the batch",
              (long long)a->context_length, act_bytes);
    if (a->devices > 1) arch_note(a, "weights are split over %d devices (tensor parallel)", a->devices);
    if (!strcmp(a->model_type, "albert"))
      arch_note(a, "ALBERT shares one layer's weights across layers and factorizes the embedding: the parameter "
                   "count here is an upper bound");
    *out = a;
    return TOPLU_OK;
  }
  /* Decode: every step reads the weights and each sequence's KV cache (full context, the worst case). */
  int hyp = 0;
  double peak = toplu__device_peak(&a->device, a->precision, &hyp) * a->devices;
  double bw = a->device.bandwidth * a->devices;
  double s = (double)(a->max_concurrent_sequences > 0 ? a->max_concurrent_sequences : 1);
  double flops = s * (2.0 * (double)a->params + 4.0 * (double)a->layers * (double)a->context_length *
                                                    (double)(a->heads * a->head_dim));
  double bytes = (double)a->weights_bytes + s * (double)a->kv_cache_bytes_per_sequence;
  double t = fmax(flops / peak, bytes / bw) + (double)a->layers * 8 * a->device.node_overhead_us * 1e-6;
  a->decode_ms_per_token = t * 1e3;
  a->decode_tokens_per_s = s / t;
  if (hyp) arch_note(a, "%s is hypothetical on %s: its fp32 peak is used", toplu_precision_name(a->precision), a->device.name);
  if (a->devices > 1) arch_note(a, "weights and KV cache are split over %d devices (tensor parallel)", a->devices);
  arch_note(a, "activations: one layer's working set for a %lld-token prefill, context x (2h + (heads + 2 kv_heads) "
               "x head_dim + 2 I) x %d bytes",
            (long long)a->context_length, act_bytes);
  *out = a;
  return TOPLU_OK;
fail:
  free(a);
  return st;
}

char *toplu_arch_plan_json(const toplu_arch_plan_t *a) {
  if (!a) return NULL;
  json_t *o = json_object();
  if (!o) return NULL;
  json_object_set_new(o, "config", json_string(a->config));
  json_object_set_new(o, "model_type", json_string(a->model_type));
  json_object_set_new(o, "layers", json_integer(a->layers));
  json_object_set_new(o, "hidden_size", json_integer(a->hidden));
  json_object_set_new(o, "attention_heads", json_integer(a->heads));
  json_object_set_new(o, "kv_heads", json_integer(a->kv_heads));
  json_object_set_new(o, "head_dim", json_integer(a->head_dim));
  json_object_set_new(o, "intermediate_size", json_integer(a->intermediate));
  json_object_set_new(o, "vocab_size", json_integer(a->vocab));
  json_object_set_new(o, "max_context", json_integer(a->max_context));
  json_object_set_new(o, "experts", json_integer(a->experts));
  json_object_set_new(o, "tied_embeddings", json_boolean(a->tied_embeddings));
  json_object_set_new(o, "gated_mlp", json_boolean(a->gated_mlp));
  json_object_set_new(o, "encoder_only", json_boolean(a->encoder_only));
  json_object_set_new(o, "precision", json_string(toplu_precision_name(a->precision)));
  json_object_set_new(o, "params", json_integer(a->params));
  json_object_set_new(o, "weights_bytes", json_integer(a->weights_bytes));
  /* an encoder has no KV cache and no decode: null, not 0 */
  json_object_set_new(o, "kv_cache_bytes_per_token",
                      a->encoder_only ? json_null() : json_integer(a->kv_cache_bytes_per_token));
  json_object_set_new(o, "context_length", json_integer(a->context_length));
  json_object_set_new(o, "kv_cache_bytes_per_sequence",
                      a->encoder_only ? json_null() : json_integer(a->kv_cache_bytes_per_sequence));
  json_object_set_new(o, "activation_bytes", json_integer(a->activation_bytes));
  json_object_set_new(o, "activation_bytes_per_token", json_integer(a->activation_bytes_per_token));
  json_object_set_new(o, "activation_bytes_per_sequence", json_integer(a->activation_bytes));
  json_object_set_new(o, "device", toplu__device_json(&a->device));
  json_object_set_new(o, "capacity_bytes", json_integer((json_int_t)a->capacity_bytes));
  json_object_set_new(o, "mem_fraction", json_real(a->mem_fraction));
  json_object_set_new(o, "budget_bytes", json_integer((json_int_t)a->budget_bytes));
  json_object_set_new(o, "overhead_bytes", json_integer((json_int_t)a->overhead_bytes));
  json_object_set_new(o, "devices", json_integer(a->devices));
  json_object_set_new(o, "devices_needed", json_integer(a->devices_needed));
  json_object_set_new(o, "max_concurrent_sequences", json_integer(a->max_concurrent_sequences));
  json_object_set_new(o, "max_batch_size", json_integer(a->max_concurrent_sequences));
  json_object_set_new(o, "decode_ms_per_token", a->encoder_only ? json_null() : json_real(a->decode_ms_per_token));
  json_object_set_new(o, "decode_tokens_per_s", a->encoder_only ? json_null() : json_real(a->decode_tokens_per_s));
  json_t *notes = json_array();
  for (int i = 0; i < a->n_notes; i++) json_array_append_new(notes, json_string(a->notes[i]));
  json_object_set_new(o, "notes", notes);
  char *s = json_dumps(o, JSON_INDENT(2) | JSON_PRESERVE_ORDER | JSON_REAL_PRECISION(10));
  json_decref(o);
  return s;
}

void toplu_arch_plan_print(const toplu_arch_plan_t *a, FILE *f) {
  if (!a || !f) return;
  char b1[32], b2[32], b3[32], b4[32], b5[32], b6[32];
  fprintf(f, "config:     %s (%s%s)\n", a->config, a->model_type, a->encoder_only ? ", encoder-only" : "");
  fprintf(f, "shape:      %lld layers, hidden %lld, %lld heads x %lld, %lld kv heads, intermediate %lld%s, vocab "
             "%lld, context %lld%s%s\n",
          (long long)a->layers, (long long)a->hidden, (long long)a->heads, (long long)a->head_dim,
          (long long)a->kv_heads, (long long)a->intermediate, a->gated_mlp ? " (gated)" : "", (long long)a->vocab,
          (long long)a->max_context, a->tied_embeddings ? ", tied embeddings" : "",
          a->experts ? ", mixture of experts" : "");
  fprintf(f, "parameters: %lld (%.2f B)\n", (long long)a->params, (double)a->params / 1e9);
  fprintf(f, "weights:    %s = %lld parameters x %g bytes (%s)\n", toplu__fmt_bytes((double)a->weights_bytes, b1, sizeof b1),
          (long long)a->params, a->bytes_per_param_x4 / 4.0, toplu_precision_name(a->precision));
  fprintf(f, "            %.2f GB\n", (double)a->weights_bytes / 1e9);
  if (a->encoder_only) {
    fprintf(f, "activations: %lld bytes per token = (2 x hidden + (heads + 2 kv heads) x head dim + 2 x intermediate) x "
               "%d bytes (one layer's working set)\n",
            (long long)a->activation_bytes_per_token, a->kv_bytes_per_element);
    fprintf(f, "            %s per %lld-token sequence\n", toplu__fmt_bytes((double)a->activation_bytes, b1, sizeof b1),
            (long long)a->context_length);
    fprintf(f, "KV cache:   none: an encoder reads the whole input in one forward pass (no token-by-token decode)\n");
    fprintf(f, "device:     %s x %d: %s each (capacity), budget %s = mem_fraction %.2f x capacity%s\n", a->device.name,
            a->devices, toplu__fmt_bytes((double)a->capacity_bytes, b1, sizeof b1),
            toplu__fmt_bytes((double)a->budget_bytes, b2, sizeof b2), a->mem_fraction,
            a->devices > 1 ? " x devices" : "");
    fprintf(f, "sequences:  %lld %lld-token sequence%s per batch = (budget %s - weights %s - runtime %s) / activations "
               "%s per sequence\n",
            (long long)a->max_concurrent_sequences, (long long)a->context_length,
            a->max_concurrent_sequences == 1 ? "" : "s", toplu__fmt_bytes((double)a->budget_bytes, b1, sizeof b1),
            toplu__fmt_bytes((double)a->weights_bytes, b2, sizeof b2),
            toplu__fmt_bytes((double)a->overhead_bytes, b3, sizeof b3),
            toplu__fmt_bytes((double)a->activation_bytes, b4, sizeof b4));
    for (int i = 0; i < a->n_notes; i++) fprintf(f, "note: %s\n", a->notes[i]);
    return;
  }
  fprintf(f, "KV cache:   %lld bytes per token = 2 (K and V) x %lld layers x %lld kv heads x %lld head dim x %d bytes\n",
          (long long)a->kv_cache_bytes_per_token, (long long)a->layers, (long long)a->kv_heads, (long long)a->head_dim,
          a->kv_bytes_per_element);
  fprintf(f, "            %s per %lld-token sequence\n",
          toplu__fmt_bytes((double)a->kv_cache_bytes_per_sequence, b1, sizeof b1), (long long)a->context_length);
  fprintf(f, "device:     %s x %d: %s each (capacity), budget %s = mem_fraction %.2f x capacity%s\n", a->device.name,
          a->devices, toplu__fmt_bytes((double)a->capacity_bytes, b1, sizeof b1),
          toplu__fmt_bytes((double)a->budget_bytes, b2, sizeof b2), a->mem_fraction, a->devices > 1 ? " x devices" : "");
  fprintf(f, "sequences:  %lld concurrent %lld-token sequences = (budget %s - weights %s - runtime %s - activations "
             "%s) / (KV %s + logits %s per sequence)\n",
          (long long)a->max_concurrent_sequences, (long long)a->context_length,
          toplu__fmt_bytes((double)a->budget_bytes, b1, sizeof b1), toplu__fmt_bytes((double)a->weights_bytes, b2, sizeof b2),
          toplu__fmt_bytes((double)a->overhead_bytes, b3, sizeof b3), toplu__fmt_bytes((double)a->activation_bytes, b4, sizeof b4),
          toplu__fmt_bytes((double)a->kv_cache_bytes_per_sequence, b5, sizeof b5),
          toplu__fmt_bytes((double)a->vocab * 4, b6, sizeof b6));
  fprintf(f, "decode:     %.2f ms per step at %lld sequences (roofline: weights + full KV caches read once), %.0f tokens/s\n",
          a->decode_ms_per_token, (long long)a->max_concurrent_sequences, a->decode_tokens_per_s);
  for (int i = 0; i < a->n_notes; i++) fprintf(f, "note: %s\n", a->notes[i]);
}

void toplu_arch_plan_free(toplu_arch_plan_t *a) { free(a); }
