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
  // Korthikanti's count has one GeLU tensor (Megatron's fused bias-GeLU); HF's gelu_new saves four
  // (planner/memory_stats.cpp plain_act_tensors), so this test model uses the one-op "gelu".
  m.activation = "gelu";
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

// ---- Tiny HF models as tests/deepspeed/cases.py builds them (transformers 5.24, bf16, b = 1,
// s = 64, SDPA on the CPU runtime). Every term below is a tensor the saved_tensors_hooks dump listed
// (docs/conformance.md "Saved tensors per op"); the recorded per-layer bytes (b = 2) differ from 2x the
// hand count only by the few-bytes-per-token terms the planner leaves out, as stated per test.
MemoryStats tiny(const std::string& json_text, Runtime rt, Precision p = Precision::BF16,
                 Attention att = Attention::Flash, int64_t seq = 64) {
  Workload w;
  w.model = models::model_from_hf_config("test", json_text);
  w.train.seq_len = seq;
  w.train.attention = att;
  w.train.runtime = rt;
  w.train.precision = p;
  w.cluster = one_gpu();
  return compute_memory_stats(w);
}

TEST(ActivationsHf, Gpt2GeluNewAndZeroDropout) {
  // GPT-2 (h 256, 4 heads, n_inner 1024, dropouts 0), bytes per token: ln_1 input 512; c_attn input
  // 512; q/k/v views of c_attn's output, one storage 3 x 512 = 1,536; SDPA lse 4 x 4 = 16 and output
  // (= c_proj input) 512; ln_2 input 512; c_fc input 512; gelu_new: pow's input, tanh's output,
  // 0.5*x and 1 + tanh, 4 x 2,048 = 8,192; c_proj input 2,048; no dropout masks (p = 0).
  // 14,352 x 64 = 918,528. Recorded (gpt2_*_default): 1,838,080 per layer at b = 2 = 2 x 919,040; the
  // 512 B per sample are LayerNorm's mean/rstd (2 norms x 2 x 64 tokens x 2 B), left out.
  const std::string cfg = R"({"model_type": "gpt2", "n_embd": 256, "n_head": 4, "n_inner": 1024, "n_layer": 2,
    "n_positions": 256, "vocab_size": 2048, "attn_pdrop": 0.0, "embd_pdrop": 0.0, "resid_pdrop": 0.0})";
  const MemoryStats s = tiny(cfg, Runtime::Cpu);
  EXPECT_EQ(s.act.layer_full_per_sample, 918'528);
  EXPECT_EQ(s.act.embedding_per_sample, 0);
  // GPT2Config's defaults (0.1) bring back the masks: attention output and MLP output. On CUDA each
  // is a bool per element (at::native_dropout), 256 B per token; on CPU the bf16 noise tensor
  // (Dropout.cpp _dropout_impl), 512 B: recorded as 2 bytes per element in seed_oss_s2_n2_bf16_default.
  const std::string dflt =
      R"({"model_type": "gpt2", "n_embd": 256, "n_head": 4, "n_inner": 1024, "n_layer": 2,
    "n_positions": 256, "vocab_size": 2048})";
  EXPECT_EQ(tiny(dflt, Runtime::Cuda).act.layer_full_per_sample, 918'528 + 2 * 256 * 64);
  EXPECT_EQ(tiny(dflt, Runtime::Cpu).act.layer_full_per_sample, 918'528 + 2 * 2 * 256 * 64);
}

TEST(ActivationsHf, OptReluSavesOneIntermediateTensor) {
  // OPT (h 256, ffn 1024, dropout 0): 2 LayerNorm inputs 1,024; q_proj input 512; q, k, v, output
  // 4 x 512 (+ lse 16); fc1 input 512; relu's output = fc2's input 2,048 -> 6,160 x 64 = 394,240.
  // Recorded (opt_*): 789,504 per layer at b = 2 = 2 x 394,752 (LayerNorm mean/rstd: 512 B).
  const std::string cfg =
      R"({"model_type": "opt", "hidden_size": 256, "ffn_dim": 1024, "num_attention_heads": 4,
    "num_hidden_layers": 2, "max_position_embeddings": 256, "vocab_size": 2048, "word_embed_proj_dim": 256,
    "dropout": 0.0, "attention_dropout": 0.0})";
  EXPECT_EQ(tiny(cfg, Runtime::Cpu).act.layer_full_per_sample, 394'240);
}

TEST(ActivationsHf, Phi3FusedQkvKeepsItsStorageAndConcatRopeCopiesTheOutput) {
  // Phi-3 (h 256, I 512, 4 heads / 2 kv of 64): 2 RMSNorms x (fp32 1,024 + bf16 512) = 3,072; qkv
  // input 512; q 512, k 256 (RoPE outputs), v a view of qkv's output whose storage is
  // 2 x (256 + 128 + 128) = 1,024; SDPA output 512 + lse 16; o_proj input, a copy of the head-major
  // output (torch.cat RoPE) 512; MLP input 512, silu's gate slice (storage: all of gate_up, 2,048),
  // act(gate) 1,024, down input 1,024 -> 4,608. Sum 11,024 x 64 = 705,536. Recorded (phi3_*): layer 1
  // 1,412,096 = 2 x 706,048 (the two RMSNorms' fp32 rsqrt, 2 x 64 x 4 B, left out).
  const std::string cfg = R"({"model_type": "phi3", "hidden_size": 256, "intermediate_size": 512,
    "num_attention_heads": 4, "num_key_value_heads": 2, "num_hidden_layers": 2, "max_position_embeddings": 256,
    "vocab_size": 2048, "tie_word_embeddings": false})";
  EXPECT_EQ(tiny(cfg, Runtime::Cpu).act.layer_full_per_sample, 705'536);
}

TEST(ActivationsHf, Gemma2SoftcapAndFp32Norms) {
  // Gemma-2 eager (h 256, I 512, 4 heads / 2 kv of 64, caps 50 / 30): 4 Gemma RMSNorms x (fp32 input
  // 1,024 + fp32 output 1,024) = 8,192; q_proj input 512; q, repeated k, repeated v 3 x 512; o_proj
  // input 512; MLP 512 + 4 x 1,024 = 4,608 -> 15,360 x 64 = 983,040. Scores (4 x 64 x 64 = 16,384 per
  // sample): tanh output 2 + fp32 softmax 4 + its bf16 cast 2 = 8 B -> 131,072. Layer 1,114,112.
  // Recorded (gemma2_*_eager): layer 1 2,234,368 = 2 x 1,117,184 (rsqrt 4 x 64 x 4 B and the four
  // fp32 (1 + weight) tensors, 4 x 1,024 B per layer, left out). Head: final norm 2,048 + lm_head
  // input 512 + the soft-capped logits' tanh 2 x 2,048 = 6,656 per token.
  const std::string cfg =
      R"({"model_type": "gemma2", "hidden_size": 256, "intermediate_size": 512, "head_dim": 64,
    "num_attention_heads": 4, "num_key_value_heads": 2, "num_hidden_layers": 2, "max_position_embeddings": 256,
    "query_pre_attn_scalar": 64, "sliding_window": 128, "vocab_size": 2048})";
  const MemoryStats s = tiny(cfg, Runtime::Cpu, Precision::BF16, Attention::Eager);
  EXPECT_EQ(s.act.layer_full_per_sample, 1'114'112);
  EXPECT_EQ(s.act.layer_selective_per_sample, 983'040);
  EXPECT_EQ(s.act.head_per_sample, 6'656 * 64);
}

// DeepSeek-V3 as cases.py builds it: MLA with q_lora_rank 64, kv_lora_rank 32, qk nope 32 + rope 16,
// v 32, 4 heads; layer 0 dense (I 512), layer 1 MoE (4 routed of 128, top-2, one shared of 128).
const char* kDeepseekTiny = R"({"model_type": "deepseek_v3", "hidden_size": 256, "intermediate_size": 512,
  "kv_lora_rank": 32, "q_lora_rank": 64, "qk_nope_head_dim": 32, "qk_rope_head_dim": 16, "v_head_dim": 32,
  "num_attention_heads": 4, "num_key_value_heads": 4, "num_hidden_layers": 2, "first_k_dense_replace": 1,
  "moe_intermediate_size": 128, "n_routed_experts": 4, "n_shared_experts": 1, "num_experts_per_tok": 2,
  "n_group": 1, "topk_group": 1, "max_position_embeddings": 256, "vocab_size": 2048,
  "tie_word_embeddings": false})";

TEST(ActivationsHf, DeepseekMlaOnCpuAndDenseFirstLayer) {
  // Per token, both layers: 2 RMSNorms 3,072; q_a/kv_a input 512; q_a_layernorm (64) 256 + 128 and
  // q_b input 128; kv_a_layernorm (32) 128 + 64 and kv_b input 64; SDPA falls back to the CPU math
  // path (q/k head 48, v head 32) in fp32: scaled q and k^T 2 x 4 x 4 x 48 = 1,536, v 4 x 4 x 32 = 512;
  // o_proj input (copy) 2 x 4 x 32 = 256. Attention 3,584. Per sample: fp32 probabilities
  // 4 x 4 x 64 x 64 = 65,536.
  //   dense layer: MLP 512 + 4 x 2 x 512 = 4,608 -> (3,072 + 3,584 + 4,608) x 64 + 65,536 = 786,432
  //     (recorded layer 0: 1,579,008 = 2 x 789,504; rsqrt 4 x 64 x 4 B + RoPE tables 4,096/2 left out);
  //   MoE layer: MLP input 512 + 4 x 2 x (2 x 128 + 128) = 3,584, router sigmoid 16, fp32 router input
  //     1,024, per routed pair 2 x (2 x 512 + 16) = 2,080 -> (3,072 + 3,584 + 6,704) x 64 + 65,536
  //     = 920,576 (recorded layer 1: 1,854,480 = 2 x 927,240, -0.7%).
  const MemoryStats s = tiny(kDeepseekTiny, Runtime::Cpu);
  EXPECT_EQ(s.act.layer_full_per_sample, 920'576);  // the repeated (MoE) layer
  EXPECT_EQ(2 * s.act.layer_full_per_sample - s.act.first_layer_unsaved_per_sample, 786'432 + 920'576);
}

// ---- What CUDA saves differently (issue 12 item 5; docs/conformance.md "What CUDA changes").
TEST(ActivationsCuda, MlaUsesTheEfficientKernelWithPaddedLogsumexp) {
  // On CUDA the memory-efficient kernel takes MLA (q/k head 48 != v head 32): q 384 + k 384 (bf16),
  // v's storage (kv_b_proj output, 4 x (32 + 32) x 2) 512, output = o_proj input 256 -> 1,536 per
  // token instead of the CPU math path's 1,536 + 512 + 256; no s^2 tensor; fp32 logsumexp
  // [4 heads, ceil(64/32) x 32] = 1,024 B per sample. MoE layer: (3,072 + 512 + 384 + 128 + 192 + 64
  // + 1,536 + 6,704) x 64 + 1,024 = 12,592 x 64 + 1,024 = 806,912.
  const MemoryStats s = tiny(kDeepseekTiny, Runtime::Cuda);
  EXPECT_EQ(s.act.layer_full_per_sample, 806'912);
  EXPECT_EQ(s.act.layer_selective_per_sample, 806'912);
}

TEST(ActivationsCuda, Fp32SdpaPadsTheLogsumexpTo32) {
  // fp32 q/k/v are not FlashAttention's (16-bit only): CUDA SDPA runs the efficient kernel, whose
  // logsumexp is [b, heads, ceil(s/32) x 32] fp32. Llama-2-7B, s = 2000: 4 x 32 x 2,016 = 258,048 B
  // per sample where flash (and the CPU kernel) save 4 x 32 x 2,000 = 256,000: 2,048 B more.
  const MemoryStats cuda = [] {
    Workload w;
    w.model = llama2_7b_spec();
    w.train.seq_len = 2000;
    w.train.precision = Precision::FP32;
    w.train.runtime = Runtime::Cuda;
    w.cluster = one_gpu();
    return compute_memory_stats(w);
  }();
  const MemoryStats cpu = [] {
    Workload w;
    w.model = llama2_7b_spec();
    w.train.seq_len = 2000;
    w.train.precision = Precision::FP32;
    w.train.runtime = Runtime::Cpu;
    w.cluster = one_gpu();
    return compute_memory_stats(w);
  }();
  EXPECT_EQ(cuda.act.layer_full_per_sample - cpu.act.layer_full_per_sample, 2'048);
  // bf16: FlashAttention on CUDA, the same lse as the CPU kernel.
  EXPECT_EQ(stats(llama2_7b_spec(), 2000, Attention::Flash).act.layer_full_per_sample, 186'496 * 2000);
}

TEST(Activations, Zero3LinearSavesFrozenLinearInputs) {
  // DeepSpeed 0.19.8 stage 3 replaces F.linear by LinearFunctionForZeroStage3, which saves its input
  // for frozen weights too (zero/linear.py setup_context). Llama-2-7B, bf16, s = 2048:
  //   all-linear LoRA: only the frozen lm_head's input is new, 2 x 4096 x 2048 = 16,777,216 B;
  //   q_proj/v_proj only: per layer also the frozen MLP's inputs, gate/up input 2h = 8,192 and
  //   down_proj input 2I = 22,016 per token -> 30,208 x 2048 = 61,865,984 B (o_proj's input is SDPA's
  //   saved output already).
  const MemoryStats all = stats(llama2_7b_spec(), 2048, Attention::Flash, Method::LoRA);
  EXPECT_EQ(all.act.stage3_frozen_head_input_per_sample, 16'777'216);
  EXPECT_EQ(all.act.stage3_frozen_linear_inputs_per_layer, 0);
  const MemoryStats qv = stats(llama2_7b_spec(), 2048, Attention::Flash, Method::LoRA, {"q_proj", "v_proj"});
  EXPECT_EQ(qv.act.stage3_frozen_linear_inputs_per_layer, 61'865'984);
  EXPECT_EQ(stats(llama2_7b_spec(), 2048, Attention::Flash).act.stage3_frozen_head_input_per_sample, 0);
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

// ---- The attention code HF really runs (compute_stats.h hf_attention_path), whatever --attention says.
namespace hfpath {
MemoryStats of(const char* zoo_name, Attention attn) {
  Workload w;
  w.model = models::load_model(zoo_name);
  w.train.seq_len = 2048;
  w.train.attention = attn;
  w.cluster = one_gpu();
  return compute_memory_stats(w);
}
}  // namespace hfpath

TEST(ActivationsHfPath, Gemma2RunsEagerAttentionUnderSdpa) {
  // modeling_gemma2.py _supports_sdpa = False: eager_attention_forward. Per layer and sample the
  // recomputable core is heads x s^2 x (fp32 softmax 4 + its bf16 cast 2 + soft-cap tanh output 2):
  // gemma-2-9b, 16 heads, s 2048: 16 x 2048 x 2048 x 8 = 536,870,912 B, the same as with --attention
  // eager; and the [b, 1, s, s] bf16 mask every layer receives: 2 x 2048 x 2048 = 8,388,608 B.
  const MemoryStats sdpa = hfpath::of("gemma-2-9b", Attention::Flash);
  EXPECT_EQ(sdpa.act.layer_full_per_sample - sdpa.act.layer_selective_per_sample, 536'870'912);
  EXPECT_EQ(sdpa.act.causal_mask_per_sample, 8'388'608);
  const MemoryStats eager = hfpath::of("gemma-2-9b", Attention::Eager);
  EXPECT_EQ(sdpa.act.layer_full_per_sample, eager.act.layer_full_per_sample);
}

TEST(ActivationsHfPath, MultiQueryFalconRunsSdpaMathInFp32) {
  // Falcon-7B: explicit mask + 1 K/V head against 71 query heads -> SDPA's math path, fp32
  // probabilities saved: 4 x 71 x 2048 x 2048 = 1,191,182,336 B per layer and sample (recomputed by
  // selective checkpointing); the boolean mask 2048 x 2048 = 4,194,304 B.
  const MemoryStats s = hfpath::of("falcon-7b", Attention::Flash);
  EXPECT_EQ(s.act.layer_full_per_sample - s.act.layer_selective_per_sample, 1'191'182'336);
  EXPECT_EQ(s.act.causal_mask_per_sample, 4'194'304);
}

TEST(ActivationsHfPath, Falcon40bEfficientKernelKeepsTheConvertedMaskPerLayer) {
  // Falcon-40B (K/V broadcast to every head): the memory-efficient kernel with an additive bias made
  // from the boolean mask per call and saved for backward, bf16 [b, 1, s, s]: 2 x 2048 x 2048 =
  // 8,388,608 B per layer and sample, not per head.
  const MemoryStats s = hfpath::of("falcon-40b", Attention::Flash);
  EXPECT_EQ(s.act.layer_full_per_sample - s.act.layer_selective_per_sample, 8'388'608);
}

TEST(ActivationsHfPath, LlamaUnderSdpaSavesNoSquare) {
  const MemoryStats s = hfpath::of("llama-2-7b", Attention::Flash);
  EXPECT_EQ(s.act.layer_full_per_sample, s.act.layer_selective_per_sample);
  EXPECT_EQ(s.act.causal_mask_per_sample, 0);
}

}  // namespace
}  // namespace zeroplan::planner
