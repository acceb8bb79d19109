/*
 * plan/arch.h - transformer language models from a Hugging Face config.json
 * (toplu_plan_arch in toplu/planner.h); the parser is exposed for tests.
 *
 * Parameter count (per layer, h = hidden size, a = heads x head_dim,
 * k = kv_heads x head_dim, I = intermediate size):
 *   attention  h*a (q) + 2*h*k (k, v) + a*h (o), plus biases where the
 *              family has them (GPT-2 style: all; Qwen2: q, k, v)
 *   MLP        3*h*I gated (SwiGLU: Llama, Mistral, Qwen2, Gemma ...) or
 *              2*h*I (GPT-2, OPT, BERT ...), times the experts of a MoE
 *              plus its router (h x experts)
 *   norms      2 per layer and a final one: h each (RMSNorm) or 2h (LayerNorm)
 * plus the embedding V*h, the LM head V*h unless tied, learned positions
 * context*h (GPT-2, OPT, BERT).  KV cache per token:
 * 2 * layers * kv_heads * head_dim * bytes (Pope et al., "Efficiently
 * Scaling Transformer Inference", 2022, section 2).
 */
#ifndef TOPLU_PLAN_ARCH_H
#define TOPLU_PLAN_ARCH_H

#include "toplu/planner.h"

/*
 * Fill the architecture fields of a (model_type, layers ... max_context,
 * tied_embeddings, gated_mlp, precision, params, weights_bytes,
 * kv_cache_bytes_per_token) from config text.  precision_override >= 0
 * replaces the config's torch_dtype.  name is used in messages.
 * Errors: TOPLU_ERR_PARSE (not JSON, a required key missing or not a
 * positive integer: the message names it).
 */
toplu_status_t toplu__arch_parse(const char *json_text, const char *name, int precision_override, toplu_arch_plan_t *a,
                                toplu_error_t *err);

#endif
