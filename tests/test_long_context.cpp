// Long context (issue 13 item 5): activation memory at 32k-128k tokens is linear in the sequence with
// flash/SDPA attention and quadratic with eager attention (and the plan says so); the element-wise
// kernels HF adds in training for dropout and linear biases. Expected values are hand counts written
// out below (the per-token Llama-2-7B layer count is derived in test_memory_activations.cpp from
// modeling_llama.py), and OPT-13B's published config (facebook/opt-13b config.json: hidden 5120,
// ffn_dim 20480, 40 layers, enable_bias true, dropout 0.1).
#include <gtest/gtest.h>

#include <string>

#include "model_specs.h"
#include "models/model_spec.h"
#include "planner/memory_stats.h"
#include "planner/op_model.h"
#include "planner/search.h"
#include "planner/time_model.h"

namespace zeroplan::planner {
namespace {

MemoryStats act_stats(int64_t seq, Attention att) {
  Workload w;
  w.model = testing::llama2_7b_spec();
  w.train.seq_len = seq;
  w.train.attention = att;
  w.cluster.gpu.name = "test-gpu";
  w.cluster.gpu.memory_bytes = 80'000'000'000;
  return compute_memory_stats(w);
}

// Llama-2-7B layer, bf16, per token with FlashAttention-2 (test_memory_activations.cpp
// LlamaLayerHandDerivation): norms 49,152 + attention 40,960 + log-sum-exp 128 + MLP 96,256 =
// 186,496 bytes; nothing s^2. Eager drops the lse (186,368 per token) and saves the fp32 softmax
// output and its bf16 cast: 6 bytes x 32 heads x s^2.
TEST(LongContextActivations, FlashIsLinearInSequenceLength) {
  for (int64_t s : {32768LL, 65536LL, 131072LL}) {
    const MemoryStats m = act_stats(s, Attention::Flash);
    EXPECT_EQ(m.act.layer_full_per_sample, 186'496 * s) << "seq " << s;
    EXPECT_EQ(m.act.layer_selective_per_sample, 186'496 * s) << "seq " << s;
  }
  // 32k: 186,496 x 32,768 = 6,111,100,928 bytes (6.11 GB) per layer per sample;
  // 128k is exactly four times that.
  EXPECT_EQ(act_stats(131072, Attention::Flash).act.layer_full_per_sample,
            4 * act_stats(32768, Attention::Flash).act.layer_full_per_sample);
}

TEST(LongContextActivations, EagerIsQuadraticInSequenceLength) {
  // 32k: 186,368 x 32,768 = 6,106,906,624 linear + 6 x 32 x 32,768^2 = 206,158,430,208 scores.
  const MemoryStats e32 = act_stats(32768, Attention::Eager);
  EXPECT_EQ(e32.act.layer_selective_per_sample, 6'106'906'624);
  EXPECT_EQ(e32.act.layer_full_per_sample, 6'106'906'624 + 206'158'430'208);
  // 128k: the scores grow 16x (3,298,534,883,328), the linear part 4x (24,427,626,496).
  const MemoryStats e128 = act_stats(131072, Attention::Eager);
  EXPECT_EQ(e128.act.layer_full_per_sample - e128.act.layer_selective_per_sample, 3'298'534'883'328);
  EXPECT_EQ(e128.act.layer_selective_per_sample, 24'427'626'496);
}

TEST(LongContextActivations, EagerAttentionAtLongSequenceWarns) {
  Workload w;
  w.model = models::load_model("llama-2-7b");
  w.cluster = hw::parse_cluster("8xA100-80GB");
  w.train.seq_len = 32768;
  w.train.attention = Attention::Eager;
  auto has_warning = [](const SearchResult& r) {
    for (const auto& s : r.reasons)
      if (s.find("eager attention materialises the s x s scores") != std::string::npos) return true;
    return false;
  };
  const SearchResult eager = search(w, SearchOptions{});
  EXPECT_TRUE(has_warning(eager));
  w.train.attention = Attention::Flash;
  EXPECT_FALSE(has_warning(search(w, SearchOptions{})));
  // The warning is given when the scores outweigh the rest of the layer: at 2k they already do
  // (6 x 32 x 2048^2 = 805 MB against 186,368 x 2048 = 382 MB); at 512 they do not (50 MB against
  // 95 MB): no warning.
  w.train.attention = Attention::Eager;
  w.train.seq_len = 512;
  EXPECT_FALSE(has_warning(search(w, SearchOptions{})));
}

const OpCost* find_op(const OpTable& t, OpPass pass, const std::string& name_part) {
  for (int i = 0; i < t.size; ++i) {
    const OpCost& c = t.ops[static_cast<size_t>(i)];
    if (c.pass == pass && std::string(c.name).find(name_part) != std::string::npos) return &c;
  }
  return nullptr;
}

OpTable table_for(const char* model, int64_t seq) {
  Workload w;
  w.model = models::load_model(model);
  w.cluster = hw::parse_cluster("8xA100-80GB");
  w.train.seq_len = seq;
  const ModelStats s = compute_model_stats(w);
  return operator_table(w, s.compute, 1, Checkpointing::Full, 0);
}

TEST(TrainingOnlyKernels, OptDropoutAndBiasGradients) {
  // OPT-13B, micro-batch 1 of 2048 tokens, bf16 (a = 2 bytes):
  //  - 2 residual dropouts per layer (after self-attention and after fc2, modeling_opt.py
  //    OPTDecoderLayer.forward), native_dropout r a + w a + w 1-byte mask = 5 bytes per element:
  //    2 x 5 x 5120 x 2048 x 40 = 4,194,304,000 bytes in 80 launches; the same in the backward
  //    (native_dropout_backward) and in the recomputed forward (full checkpointing).
  //  - bias gradients: q, k, v, out_proj (4 x 5120) + fc1 (20480) + fc2 (5120) = 46,080 outputs per
  //    token per layer, each read once (a bytes): 2 x 46,080 x 2048 x 40 = 7,549,747,200 bytes.
  const OpTable t = table_for("opt-13b", 2048);
  const OpCost* d = find_op(t, OpPass::Forward, "residual dropout");
  ASSERT_NE(d, nullptr);
  EXPECT_DOUBLE_EQ(d->bytes, 4'194'304'000.0);
  EXPECT_DOUBLE_EQ(d->kernels, 80.0);
  const OpCost* db = find_op(t, OpPass::Backward, "residual dropout backward");
  ASSERT_NE(db, nullptr);
  EXPECT_DOUBLE_EQ(db->bytes, 4'194'304'000.0);
  const OpCost* dr = find_op(t, OpPass::Recompute, "residual dropout");
  ASSERT_NE(dr, nullptr);
  EXPECT_DOUBLE_EQ(dr->bytes, 4'194'304'000.0);
  const OpCost* bg = find_op(t, OpPass::Backward, "linear bias gradients");
  ASSERT_NE(bg, nullptr);
  EXPECT_DOUBLE_EQ(bg->bytes, 7'549'747'200.0);
}

TEST(TrainingOnlyKernels, LlamaHasNeither) {
  // Llama-2-7B: no linear biases (attention_bias false, mlp_bias false) and attention_dropout 0.0,
  // no residual dropout in modeling_llama.py.
  const OpTable t = table_for("llama-2-7b", 2048);
  EXPECT_EQ(find_op(t, OpPass::Forward, "residual dropout"), nullptr);
  EXPECT_EQ(find_op(t, OpPass::Backward, "linear bias gradients"), nullptr);
}


TEST(FalconAttentionPath, ExplicitMaskAndMultiQueryLeaveTheFlashKernel) {
  // transformers modeling_falcon.py materialises the causal mask (allow_is_causal_skip=False) and
  // passes it to SDPA; PyTorch's dispatcher (sdp_utils_cpp.h) then refuses the flash kernel, and
  // with Falcon-7B's multi-query K/V (1 head against 71 query heads, no enable_gqa) both fused
  // kernels: SDPA's math path, i.e. eager-like attention.
  Workload w;
  w.model = models::load_model("falcon-7b");
  w.cluster = hw::parse_cluster("8xA100-80GB");
  w.train.seq_len = 2048;
  const ModelStats s7 = compute_model_stats(w);
  EXPECT_FALSE(s7.compute.sdpa_supported);
  EXPECT_TRUE(s7.compute.attention_explicit_mask);
  // Falcon-40B (new_decoder_architecture: K/V broadcast to all 128 heads, equal head counts): the
  // memory-efficient kernel over the full square. Config: hidden 8192, 128 heads of 64, 60 layers.
  // Micro-batch 1 of 2048 tokens, forward: 4 x 2048^2 x 8192 x 60 = 8,246,337,208,320 FLOPs (not
  // the causal half, 4,123,168,604,160), plus the bf16 mask read once per layer: 2 x 2048^2 x 60 =
  // 503,316,480 bytes on top of q, k, v, o, all four at the query width 8192 because _split_heads
  // broadcasts the 8 K/V heads to all 128 (2 x 2048 x 4 x 8192 x 60 = 8,053,063,680).
  // The broadcast copies: read 8 x 64 = 512 wide, write 8192 wide, for K and V:
  // 2 x 2 x 2048 x (8192 + 512) x 60 = 4,278,190,080 bytes in 120 launches.
  const OpTable t = table_for("falcon-40b", 2048);
  const OpCost* c = find_op(t, OpPass::Forward, "attention core (SDPA mem-efficient");
  ASSERT_NE(c, nullptr);
  EXPECT_DOUBLE_EQ(c->flops, 8'246'337'208'320.0);
  EXPECT_DOUBLE_EQ(c->bytes, 8'053'063'680.0 + 503'316'480.0);
  const OpCost* bc = find_op(t, OpPass::Forward, "K/V broadcast copies");
  ASSERT_NE(bc, nullptr);
  EXPECT_DOUBLE_EQ(bc->bytes, 4'278'190'080.0);
  EXPECT_DOUBLE_EQ(bc->kernels, 120.0);
  // Backward: 2.5x the forward's FLOPs, same full square.
  const OpCost* cb = find_op(t, OpPass::Backward, "attention core backward (SDPA mem-efficient");
  ASSERT_NE(cb, nullptr);
  EXPECT_DOUBLE_EQ(cb->flops, 2.5 * 8'246'337'208'320.0);
  // Llama keeps the causal flash kernel.
  w.model = models::load_model("llama-2-7b");
  EXPECT_FALSE(compute_model_stats(w).compute.attention_explicit_mask);
}


TEST(LongContextReference, TorchtitanFsdp32kBoundsTheBf16EagerPrediction) {
  // torchtitan benchmarks/llama3_h100_202412_torchtitan.md (planner/data/calibration/
  // long_context_runs.json, lc-tt-l31-8b-32k-H100): Llama 3.1 8B, FSDP 8 / CP 1, seq 32768, local
  // batch 1, full AC, torch.compile + Float8: 3,890 tokens/s per GPU. zeroplan models bf16 HF eager,
  // which must be slower; by how much is bounded by the same page's Table 1 at 8k: compile + Float8
  // gain 8,532 / 5,762 = 1.48x there, and less at 32k where bf16 attention (untouched by Float8) is a
  // larger share. So the prediction must lie in (3,890 / 1.48, 3,890) = (2,627, 3,890).
  Workload w;
  w.model = models::load_model("llama-3.1-8b");
  w.cluster = hw::parse_cluster("8xH100");
  w.train.seq_len = 32768;
  // December 2024: a torch before 2.11, whose SDPA ran the flash kernels (planner/data/time_model.json
  // "sdpa_backend").
  w.train.torch_version = 206;
  const ModelStats s = compute_model_stats(w);
  ZeroConfig z = ZeroConfig::deepspeed_defaults(3);
  z.micro_batch = 1;
  z.grad_accum = 1;
  z.checkpointing = Checkpointing::Full;
  const double tps = 32768.0 / estimate_time(w, s, z).step_s;
  EXPECT_LT(tps, 3890.0);
  EXPECT_GT(tps, 3890.0 * 5762.0 / 8532.0);
}


TEST(FalconAttentionPath, MultiQueryRunsSdpaMathInFp32) {
  // SDPA's math path (aten/src/ATen/native/transformers/attention.cpp
  // _scaled_dot_product_attention_math) upcasts bf16 q, k, v to fp32 unless
  // allow_fp16_bf16_reduction_math_sdp is set (default off): the score GEMMs are fp32 matmuls over
  // the full square. Falcon-7B (71 heads of 64, 32 layers), micro-batch 1 of 2048 tokens: scores
  // 71 x 2048^2 = 297,795,584 per layer; forward QK^T and PV: 2 x 2 x 297,795,584 x 64 x 32 =
  // 2,439,541,424,128 FLOPs, at no more than the fp32/bf16 peak ratio of the GPU.
  const OpTable t = table_for("falcon-7b", 2048);
  const OpCost* c = find_op(t, OpPass::Forward, "SDPA math path, fp32");
  ASSERT_NE(c, nullptr);
  EXPECT_DOUBLE_EQ(c->flops, 2'439'541'424'128.0);
  const hw::GpuProfile a100 = hw::find_gpu("A100-80GB");
  EXPECT_LE(c->efficiency, a100.fp32_tflops / a100.bf16_tflops + 1e-12);
  // FalconConfig hidden_dropout = attention_dropout = 0.0 (falcon-7b config.json): no dropout kernels.
  EXPECT_EQ(find_op(t, OpPass::Forward, "residual dropout"), nullptr);
}


TEST(AttentionPath, Gemma2HasNoSdpaPath) {
  // modeling_gemma2.py: `_supports_sdpa = False  # sdpa does not support softcapping` (Gemma-2's
  // attn_logit_softcapping 50.0): HF runs eager attention; Gemma-3 (no attention soft-capping) keeps SDPA.
  Workload w;
  w.cluster = hw::parse_cluster("8xA100-80GB");
  w.train.seq_len = 4096;
  w.model = models::load_model("gemma-2-9b");
  EXPECT_FALSE(compute_model_stats(w).compute.sdpa_supported);
  w.model = models::load_model("gemma-3-12b");
  EXPECT_TRUE(compute_model_stats(w).compute.sdpa_supported);
}

}  // namespace
}  // namespace zeroplan::planner
