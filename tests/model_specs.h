#pragma once
// ModelSpecs built field by field for planner tests that must not depend on the zoo loader.
#include "models/model_spec.h"

namespace zeroplan::testing {

// A Llama-2-7B-shaped model (config.json of meta-llama/Llama-2-7b-hf: hidden 4096, 32 layers,
// 32 heads, intermediate 11008, vocab 32000, untied embeddings, RMSNorm, SwiGLU, rotary).
inline models::ModelSpec llama2_7b_spec() {
  models::ModelSpec m;
  m.name = "llama-2-7b-test";
  m.model_type = "llama";
  m.hidden_size = 4096;
  m.num_layers = 32;
  m.num_heads = 32;
  m.num_kv_heads = 32;
  m.head_dim = 128;
  m.intermediate_size = 11008;
  m.vocab_size = 32000;
  m.max_position_embeddings = 4096;
  m.norm = models::NormKind::RMSNorm;
  m.mlp = models::MlpKind::Gated;
  m.position = models::PositionKind::Rotary;
  return m;
}

// A Llama-3.1-8B-shaped model (config.json of meta-llama/Llama-3.1-8B: hidden 4096, 32 layers, 32 heads,
// 8 KV heads, head_dim 128, intermediate 14336, vocab 128256, untied embeddings).
inline models::ModelSpec llama31_8b_spec() {
  models::ModelSpec m = llama2_7b_spec();
  m.name = "llama-3.1-8b-test";
  m.num_kv_heads = 8;
  m.intermediate_size = 14336;
  m.vocab_size = 128256;
  m.max_position_embeddings = 131072;
  return m;
}

}  // namespace zeroplan::testing
