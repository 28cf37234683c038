#pragma once
// Tiny Llama-style ModelSpecs built from fields (the same shapes as models/zoo's tiny-llama-micro and
// tiny-llama-small), for executor tests that must not depend on the zoo loader.
#include "models/model_spec.h"

namespace zeroplan::exec {

// hidden 64, 2 layers, 4 heads, 2 kv heads, intermediate 172, vocab 256, untied.
inline models::ModelSpec tiny_llama_micro_spec() {
  models::ModelSpec m;
  m.name = "tiny-llama-micro";
  m.model_type = "llama";
  m.hidden_size = 64;
  m.num_layers = 2;
  m.num_heads = 4;
  m.num_kv_heads = 2;
  m.head_dim = 16;
  m.intermediate_size = 172;
  m.vocab_size = 256;
  m.max_position_embeddings = 256;
  return m;
}

// hidden 256, 4 layers, 8 heads, 4 kv heads, intermediate 688, vocab 4096, untied.
inline models::ModelSpec tiny_llama_small_spec() {
  models::ModelSpec m = tiny_llama_micro_spec();
  m.name = "tiny-llama-small";
  m.hidden_size = 256;
  m.num_layers = 4;
  m.num_heads = 8;
  m.num_kv_heads = 4;
  m.head_dim = 32;
  m.intermediate_size = 688;
  m.vocab_size = 4096;
  m.max_position_embeddings = 1024;
  return m;
}

// Mixtral-style MoE (transformers MixtralConfig fields): hidden 64, 2 layers, 4 heads, 2 kv heads,
// 4 experts of width 96 (Mixtral's experts are intermediate_size wide), top-2, vocab 256, untied.
// Same as tests/data/models/tiny-mixtral/config.json.
inline models::ModelSpec tiny_mixtral_spec() {
  models::ModelSpec m = tiny_llama_micro_spec();
  m.name = "tiny-mixtral";
  m.model_type = "mixtral";
  m.intermediate_size = 96;
  m.num_experts = 4;
  m.experts_per_token = 2;
  m.moe_style = models::MoeStyle::Mixtral;
  m.moe_intermediate_size = 96;
  return m;
}

// Qwen3 (dense): tiny-llama-micro's shapes with Qwen3's per-head q/k RMSNorms. Same as
// tests/data/models/tiny-qwen3/config.json.
inline models::ModelSpec tiny_qwen3_spec() {
  models::ModelSpec m = tiny_llama_micro_spec();
  m.name = "tiny-qwen3";
  m.model_type = "qwen3";
  m.qk_norm = models::QkNorm::PerHead;
  return m;
}

// Qwen3-MoE (transformers Qwen3MoeConfig fields): tiny-mixtral's shapes with Qwen3's per-head q/k
// RMSNorms, experts registered before the router, norm_topk_prob true (as Qwen3-30B-A3B's config).
// Same as tests/data/models/tiny-qwen3-moe/config.json.
inline models::ModelSpec tiny_qwen3_moe_spec() {
  models::ModelSpec m = tiny_mixtral_spec();
  m.name = "tiny-qwen3-moe";
  m.model_type = "qwen3_moe";
  m.moe_style = models::MoeStyle::PerExpert;
  m.qk_norm = models::QkNorm::PerHead;
  m.norm_topk_prob = true;
  return m;
}

}  // namespace zeroplan::exec
