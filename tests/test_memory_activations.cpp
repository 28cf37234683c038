// Activation memory (issue 3) against Korthikanti et al. 2022 ("Reducing Activation Recomputation in
// Large Transformer Models", Table 2 and §4.1) for a GPT-3-style layer, against a hand derivation
// for a Llama-style layer, and LoRA/QLoRA counts against PEFT and the QLoRA paper.
#include <gtest/gtest.h>

#include "model_specs.h"
#include "models/model_spec.h"
#include "planner/memory_stats.h"

namespace zeroplan::planner {
namespace {

hw::ClusterSpec one_gpu() {
  hw::ClusterSpec c;
  c.gpu.name = "test-gpu";
  c.gpu.memory_bytes = 80'000'000'000;
  return c;
}

// GPT-3 175B (Brown et al. 2020, Table 2.1): 96 layers, d_model 12288, 96 heads, d_ff = 4 d_model,
// LayerNorm, GELU, learned positions, dropout; GPT-2 module layout.
models::ModelSpec gpt3_spec() {
  models::ModelSpec m;
  m.name = "gpt3-test";
  m.model_type = "gpt2";
  m.layout = models::Layout::GPT2;
  m.hidden_size = 12288;
  m.num_layers = 96;
  m.num_heads = 96;
  m.num_kv_heads = 96;
  m.head_dim = 128;
  m.intermediate_size = 4 * 12288;
  m.vocab_size = 50257;
  m.max_position_embeddings = 2048;
  m.norm = models::NormKind::LayerNorm;
  m.mlp = models::MlpKind::Plain;
  m.position = models::PositionKind::Learned;
  m.activation = "gelu_new";
  m.tie_word_embeddings = true;
  m.attention_bias = true;
  m.mlp_bias = true;
  m.norm_bias = true;
  m.fused_qkv = true;
  return m;
}

using zeroplan::testing::llama2_7b_spec;

MemoryStats stats(const models::ModelSpec& m, int64_t seq, Attention att, Method method = Method::Full,
                  std::vector<std::string> targets = {}) {
  Workload w;
  w.model = m;
  w.train.seq_len = seq;
  w.train.attention = att;
  w.train.method = method;
  w.train.lora_rank = 16;
  w.train.lora_targets = std::move(targets);
  w.cluster = one_gpu();
  return compute_memory_stats(w);
}

TEST(Activations, Gpt3LayerMatchesKorthikantiTable2) {
  // Korthikanti Table 2, no parallelism: s*b*h*(34 + 5*a*s/h) bytes per layer (16-bit, dropout).
  // s = 2048, b = 1, h = 12288, a = 96: 5*a*s/h = 5*96*2048/12288 = 80, so
  // 2048 * 12288 * (34 + 80) = 25,165,824 * 114 = 2,868,903,936 bytes.
  const MemoryStats s = stats(gpt3_spec(), 2048, Attention::Eager);
  EXPECT_EQ(s.act.layer_full_per_sample, 2'868'903'936);
}

TEST(Activations, SelectiveRecomputationDropsTheAttentionCore) {
  // Korthikanti §5 / Table 2 "selective activation recomputation": 34*s*b*h
  // = 25,165,824 * 34 = 855,638,016 bytes.
  const MemoryStats s = stats(gpt3_spec(), 2048, Attention::Eager);
  EXPECT_EQ(s.act.layer_selective_per_sample, 855'638'016);
}

TEST(Activations, FullRecomputationKeepsTheLayerInput) {
  // Korthikanti Table 2 "full activation recomputation": 2*s*b*h = 2 * 25,165,824 = 50,331,648.
  const MemoryStats s = stats(gpt3_spec(), 2048, Attention::Eager);
  EXPECT_EQ(s.act.layer_input_per_sample, 50'331'648);
}

TEST(Activations, FlashAttentionRemovesTheQuadraticTerm) {
  // FlashAttention saves no s^2 tensors; it saves the fp32 log-sum-exp (4 bytes per head per
  // token): 34*s*h + 4*a*s = 855,638,016 + 4*96*2048 = 855,638,016 + 786,432 = 856,424,448.
  const MemoryStats s = stats(gpt3_spec(), 2048, Attention::Flash);
  EXPECT_EQ(s.act.layer_full_per_sample, 856'424'448);
}

TEST(Activations, LlamaLayerHandDerivation) {
  // Llama-2-7B layer, bf16, FlashAttention-2, per token (h = 4096, kv width = 4096, I = 11008, a = 32):
  //   2 RMSNorms x (fp32 input 4h + normalised 2h)   = 12h = 49,152
  //   q/k/v input 2h, q 2h, k 2kv, v 2kv, out 2h      = 2h + 2h + 2*4096*2 + 2h = 40,960
  //   log-sum-exp 4a                                   = 128
  //   MLP input 2h + gate 2I + silu(gate) 2I + up 2I + product 2I = 8,192 + 88,064 = 96,256
  //   total                                            = 186,496 bytes per token
  // s = 2048: 186,496 * 2048 = 381,943,808 bytes per layer per sample.
  const MemoryStats s = stats(llama2_7b_spec(), 2048, Attention::Flash);
  EXPECT_EQ(s.act.layer_full_per_sample, 381'943'808);
  // Selective recomputation has nothing quadratic to drop with flash attention.
  EXPECT_EQ(s.act.layer_selective_per_sample, 381'943'808);
}

TEST(Activations, LlamaEagerAttentionAddsTheScores) {
  // Eager attention (modeling_llama.py eager_attention_forward): softmax in fp32 saves its output
  // (4 bytes per score), the bf16 cast is saved by matmul with V (2 bytes): 6*a*s^2 per sample =
  // 6 * 32 * 2048^2 = 805,306,368 bytes. The linear part loses the lse (128) and keeps q, repeated
  // k, repeated v (MHA: same width): 186,496 - 128 = 186,368 per token -> 381,681,664.
  const MemoryStats s = stats(llama2_7b_spec(), 2048, Attention::Eager);
  EXPECT_EQ(s.act.layer_selective_per_sample, 381'681'664);
  EXPECT_EQ(s.act.layer_full_per_sample, 381'681'664 + 805'306'368);
}

TEST(Activations, GqaFlashSavesKeysAndValuesAtKvWidth) {
  // Llama-3-8B layer (h 4096, 32 query heads, 8 kv heads of 128 -> kv width 1024, I 14336), bf16,
  // FlashAttention-2, per token: norms 12h = 49,152; attention input 8,192; q 8,192; k 2,048;
  // v 2,048; lse 128; output 8,192; MLP input 8,192 + 8I = 114,688 -> 200,832 bytes.
  // s = 4096: 200,832 * 4096 = 822,607,872 bytes.
  models::ModelSpec m = llama2_7b_spec();
  m.num_kv_heads = 8;
  m.intermediate_size = 14336;
  m.vocab_size = 128256;
  const MemoryStats s = stats(m, 4096, Attention::Flash);
  EXPECT_EQ(s.act.layer_full_per_sample, 822'607'872);
  // Eager attention materialises k and v at the full query width (repeat_kv).
  const MemoryStats e = stats(m, 4096, Attention::Eager);
  EXPECT_EQ(e.act.layer_selective_per_sample, (200'832 - 128 + 2 * (8'192 - 2'048)) * 4096);
}

TEST(Activations, LogitsAndLossInFp32) {
  // Llama-3-8B vocabulary 128,256 at s = 8192: log_softmax output in fp32 = 4 * 128,256 * 8192 =
  // 4,202,692,608 bytes per sample; bf16 logits 2,101,346,304.
  models::ModelSpec m = llama2_7b_spec();
  m.num_kv_heads = 8;
  m.intermediate_size = 14336;
  m.vocab_size = 128256;
  const MemoryStats s = stats(m, 8192, Attention::Flash);
  EXPECT_EQ(s.act.logprobs_fp32_per_sample, 4'202'692'608);
  EXPECT_EQ(s.act.logits_per_sample, 2'101'346'304);
  EXPECT_EQ(s.act.logits_fp32_upcast_per_sample, 4'202'692'608);
}

TEST(Activations, LoraFrozenNormsSaveNoNormalisedCopy) {
  // With LoRA the RMSNorm weights are frozen, so `weight * x` saves only the weight: the two
  // normalised bf16 copies (2 x 2h bytes per token = 16,384) disappear; every linear keeps its
  // input (its LoRA A saves it). 381,943,808 - 16,384 * 2048 = 348,389,376. Each of the 7 adapters'
  // lora_B saves lora_A's output, r = 16 elements per token in bf16 (recorded in
  // tests/deepspeed/fixtures/0.19.8/llama-gqa_*_lora.json: 7 x 8 x 2 B per token at r = 8):
  // 7 x 16 x 2 x 2048 = 458,752 -> 348,848,128.
  const MemoryStats s = stats(llama2_7b_spec(), 2048, Attention::Flash, Method::LoRA);
  EXPECT_EQ(s.act.layer_full_per_sample, 348'848'128);
}

TEST(Lora, Llama2_7bAllSevenProjectionsRank16) {
  // PEFT print_trainable_parameters for Llama-2-7B, r = 16 on q,k,v,o,gate,up,down:
  // "trainable params: 39,976,960". Hand: per layer 4 * 16 * (4096 + 4096) + 3 * 16 * (4096 + 11008)
  // = 524,288 + 724,992 = 1,249,280; x 32 layers = 39,976,960.
  const std::vector<std::string> seven = {"q_proj",    "k_proj",  "v_proj",   "o_proj",
                                          "gate_proj", "up_proj", "down_proj"};
  const MemoryStats s = stats(llama2_7b_spec(), 2048, Attention::Flash, Method::LoRA, seven);
  EXPECT_EQ(s.trainable_params, 39'976'960);
  EXPECT_EQ(s.trainable_tensors.total_numel(), 39'976'960);  // the adapter tensors stage 3 partitions
  EXPECT_EQ(s.frozen_params, 6'738'415'616);                 // Llama-2-7B published count
  EXPECT_EQ(s.total_params, 6'738'415'616);
}

TEST(Lora, QloraStoresBaseLinearsInNf4) {
  // NF4 with double quantisation (Dettmers et al. 2023 §3): for a 4096 x 4096 weight (16,777,216
  // elements): codes 8,388,608 bytes + 262,144 8-bit absmax + ceil(262,144/256) = 1,024 fp32
  // constants (4,096 bytes) = 8,654,848 bytes, i.e. 4.127 bits per parameter.
  EXPECT_EQ(nf4_bytes(16'777'216), 8'654'848);
  const double bits = 8.0 * static_cast<double>(nf4_bytes(16'777'216)) / 16'777'216.0;
  EXPECT_NEAR(bits, 4.127, 0.0005);
  const MemoryStats s = stats(llama2_7b_spec(), 2048, Attention::Flash, Method::QLoRA);
  // Quantised: every decoder linear (32 layers x (4 x 16,777,216 + 3 x 45,088,768)) = 6,476,005,376;
  // embed_tokens, lm_head (2 x 131,072,000) and norms (65 x 4096) stay 16-bit = 262,410,240.
  EXPECT_EQ(s.frozen_quantized_params, 6'476'005'376);
  EXPECT_EQ(s.frozen_16bit_params, 262'410'240);
}

}  // namespace
}  // namespace zeroplan::planner
