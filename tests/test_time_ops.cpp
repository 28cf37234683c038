// Operator-level time model (planner/op_model.h). Expected values: the FlashAttention-3 paper's
// benchmark figures (as recorded in planner/data/time_model.json with their source), Llama-2-7B's
// published config (h 4096, ffn 11008, 32 layers, 32 heads, vocab 32000), PEFT's adapter count for
// r = 16 on all linear projections (39,976,960), and hand counts of HF's eager modules written out
// below.
#include <gtest/gtest.h>

#include <cmath>

#include "models/model_spec.h"
#include "planner/op_model.h"
#include "planner/search.h"
#include "planner/time_model.h"
#include "planner_fixtures.h"

namespace zeroplan::planner {
namespace {

Workload llama7b(const char* gpus, int64_t seq) {
  Workload w;
  w.model = models::load_model("llama-2-7b");
  w.cluster = hw::parse_cluster(gpus);
  w.train.seq_len = seq;
  return w;
}

const OpCost* find_op(const OpTable& t, OpPass pass, const std::string& name_part, int64_t n = 0) {
  for (int i = 0; i < t.size; ++i) {
    const OpCost& c = t.ops[static_cast<size_t>(i)];
    if (c.pass == pass && std::string(c.name).find(name_part) != std::string::npos && (n == 0 || c.n == n))
      return &c;
  }
  return nullptr;
}

TEST(AttentionEfficiency, HopperUsesTheFlashAttention2BarsOfTheFa3Paper) {
  // FA3 paper (arXiv:2407.08608) Fig. 5, H100 SXM5, head dim 128, causal forward, FlashAttention-2:
  // 319 TFLOP/s at 4k, 191 at 512, 335 at 16k; peak 989.5 (H100 SXM dense BF16).
  const hw::GpuProfile h100 = hw::find_gpu("H100");
  EXPECT_NEAR(attention_efficiency(h100, 4096, true, false, AttentionBackend::Flash2), 319.0 / 989.5, 1e-9);
  EXPECT_NEAR(attention_efficiency(h100, 512, true, false, AttentionBackend::Flash2), 191.0 / 989.5, 1e-9);
  // Between two measured lengths: linear in log2(seq). 2896 ~ 2^11.5, halfway between 2k (298)
  // and 4k (319): 308.5 (to the rounding of 2896 vs 2^11.5 = 2896.3).
  EXPECT_NEAR(attention_efficiency(h100, 2896, true, false, AttentionBackend::Flash2) * 989.5, 308.5, 0.05);
  // Long context: flat beyond the last bar (16k: 335), e.g. at 128k.
  EXPECT_NEAR(attention_efficiency(h100, 131072, true, false, AttentionBackend::Flash2), 335.0 / 989.5, 1e-9);
  // Backward, non-causal bar at 4k: 310; causal scaled by the forward's causal ratio 319/368.
  EXPECT_NEAR(attention_efficiency(h100, 4096, false, true, AttentionBackend::Flash2), 310.0 / 989.5, 1e-9);
  EXPECT_NEAR(attention_efficiency(h100, 4096, true, true, AttentionBackend::Flash2),
              310.0 / 989.5 * 319.0 / 368.0, 1e-9);
  // Eager ('standard attention' bars): far below flash at the same length (133 vs 368 at 4k).
  EXPECT_LT(attention_efficiency(h100, 4096, false, false, AttentionBackend::Eager),
            0.5 * attention_efficiency(h100, 4096, false, false, AttentionBackend::Flash2));
  // A100 (Ampere curve: FA2 paper's 73% forward plateau).
  EXPECT_NEAR(attention_efficiency(hw::find_gpu("A100-80GB"), 16384, false, false, AttentionBackend::Flash2),
              0.73, 0.001);
}

// Llama-2-7B, micro-batch 1 of 2048 tokens: the forward's GEMM families by shape (HF nn.Linear
// [out, in]; m = 2048 tokens): q,k,v,o [4096,4096] x 4 per layer = 128 launches; gate, up
// [11008,4096] x 2 = 64; down [4096,11008] x 1 = 32; LM head [32000,4096] once. FLOPs 2*m*n*k.
TEST(OperatorTable, Llama7bForwardGemmsAndEagerModules) {
  const Workload w = llama7b("1xA100-80GB", 2048);
  const ModelStats s = compute_model_stats(w);
  const OpTable t = operator_table(w, s.compute, 1, Checkpointing::None, 0);
  const double m = 2048;
  const OpCost* qkvo = find_op(t, OpPass::Forward, "linear GEMM", 4096);
  ASSERT_NE(qkvo, nullptr);
  // Two shapes have n = 4096: [4096,4096] (k 4096) and down (k 11008); pick by k.
  const OpCost* sq = nullptr;
  const OpCost* down = nullptr;
  const OpCost* gate_up = find_op(t, OpPass::Forward, "linear GEMM", 11008);
  for (int i = 0; i < t.size; ++i) {
    const OpCost& c = t.ops[static_cast<size_t>(i)];
    if (c.pass != OpPass::Forward || c.n != 4096) continue;
    if (c.k == 4096) sq = &c;
    if (c.k == 11008) down = &c;
  }
  ASSERT_TRUE(sq && down && gate_up);
  EXPECT_EQ(sq->kernels, 128);
  EXPECT_DOUBLE_EQ(sq->flops, 128 * 2 * m * 4096 * 4096);
  EXPECT_EQ(gate_up->kernels, 64);
  EXPECT_EQ(down->kernels, 32);
  EXPECT_EQ(sq->m, 2048);
  const OpCost* head = find_op(t, OpPass::Forward, "LM head");
  ASSERT_NE(head, nullptr);
  EXPECT_DOUBLE_EQ(head->flops, 2 * m * 32000 * 4096);
  // Backward: dgrad + wgrad per trained weight (2 launches, 2x the FLOPs).
  const OpCost* sqb = nullptr;
  for (int i = 0; i < t.size; ++i) {
    const OpCost& c = t.ops[static_cast<size_t>(i)];
    if (c.pass == OpPass::Backward && c.n == 4096 && c.k == 4096 && c.m > 0) sqb = &c;
  }
  ASSERT_NE(sqb, nullptr);
  EXPECT_EQ(sqb->kernels, 256);
  EXPECT_DOUBLE_EQ(sqb->flops, 2 * sq->flops);
  // LlamaRMSNorm eager chain (to fp32, pow, mean, +eps, rsqrt, mul, to, weight mul = 8 launches;
  // 36 bytes per hidden element per token, derivation in op_model.cpp), 2 norms per layer:
  // 8 x 2 x 32 = 512 launches, 36 x 4096 x 2048 x 2 x 32 bytes.
  const OpCost* norm = find_op(t, OpPass::Forward, "RMSNorm (eager");
  ASSERT_NE(norm, nullptr);
  EXPECT_EQ(norm->kernels, 512);
  EXPECT_DOUBLE_EQ(norm->bytes, 36.0 * 4096 * m * 2 * 32);
  EXPECT_EQ(norm->bound, OpBound::Memory);
  // Causal attention core: 4 * s^2 * (heads * head_dim) / 2 per layer = 2 * 2048^2 * 4096 x 32.
  const OpCost* attn = find_op(t, OpPass::Forward, "attention core");
  ASSERT_NE(attn, nullptr);
  EXPECT_DOUBLE_EQ(attn->flops, 2.0 * m * m * 4096 * 32);
  // ForCausalLMLoss: fp32 upcast + log_softmax + nll = 14 bytes per vocabulary entry per token.
  const OpCost* loss = find_op(t, OpPass::Forward, "loss");
  ASSERT_NE(loss, nullptr);
  EXPECT_DOUBLE_EQ(loss->bytes, 14.0 * 32000 * m);
  // Every operator's time is its roofline: max(FLOPs / (peak x efficiency), bytes / bandwidth).
  const hw::GpuProfile& g = w.cluster.gpu;
  for (int i = 0; i < t.size; ++i) {
    const OpCost& c = t.ops[static_cast<size_t>(i)];
    const double mem = c.bytes / (g.hbm_GBps * 1e9 * g.hbm_efficiency);
    if (c.bound == OpBound::Compute)
      EXPECT_NEAR(c.time_s, c.flops / (g.bf16_tflops * 1e12 * c.efficiency), 1e-12) << c.name;
    else
      EXPECT_NEAR(c.time_s, mem, 1e-12) << c.name;
    EXPECT_GE(c.time_s + 1e-15, mem) << c.name;
  }
}

// GEMM tile and wave quantization (NVIDIA "Matrix Multiplication Background User's Guide", ch. 3),
// hand counts. GPT-2 124M at nanoGPT's micro-step (12 x 1024 = 12288 tokens, hidden 768) on an
// A100 (108 SMs): the attention output projection writes a [12288 x 768] output.
TEST(GemmQuantization, HandCountedWavesOnA100) {
  // 256x128 tiles: ceil(12288/256) = 48 row tiles x ceil(768/128) = 6 column tiles = 288 blocks;
  // one block per SM: waves = ceil(288/108) = 3 (108 + 108 + 72); utilization 288 / (3 x 108).
  EXPECT_NEAR(gemm_tiling_utilization(12288, 768, 256, 128, 1, 108), 288.0 / 324.0, 1e-12);
  // Tile quantization on top: N = 800 needs ceil(800/128) = 7 column tiles of which 6.25 are
  // useful: 48 x 7 = 336 blocks, ceil(336/108) = 4 waves, useful 48 x 6.25 = 300 of 4 x 108.
  EXPECT_NEAR(gemm_tiling_utilization(12288, 800, 256, 128, 1, 108), 300.0 / 432.0, 1e-12);
  // Split-K multiplies the blocks: [768 x 768] with 128x128 tiles is 6 x 6 = 36 blocks; 3 slices
  // = 108 blocks = exactly one wave.
  EXPECT_NEAR(gemm_tiling_utilization(768, 768, 128, 128, 3, 108), 1.0, 1e-12);
  EXPECT_NEAR(gemm_tiling_utilization(768, 768, 128, 128, 1, 108), 36.0 / 108.0, 1e-12);

  // The best tiling over the guide's list (time_model.json "gemm_quantization"), forward [12288 x
  // 768] over K = 768 (no split: 768/2 = 384 < the 512-element minimum slice). 256x128: 0.889
  // (above); 256x64: 48 x 12 = 576 blocks, 6 waves, 576/648 = 0.889; 128x64: 96 x 12 = 1152
  // blocks, ceil(1152/108) = 11 waves, 1152/1188 = 0.970 (64x128 and 64x64 tie with it).
  const GemmQuantization fwd = gemm_quantization(12288, 768, 768, 108);
  EXPECT_NEAR(fwd.utilization, 1152.0 / 1188.0, 1e-12);
  EXPECT_EQ(fwd.split_k, 1);
  // Its weight gradient, [768 x 768] over the 12288 tokens: without a split the best is 64x64,
  // 12 x 12 = 144 blocks in 2 waves (0.667); 128x128 split 3 fills one wave exactly (above).
  const GemmQuantization wgrad = gemm_quantization(768, 768, 12288, 108);
  EXPECT_NEAR(wgrad.utilization, 1.0, 1e-12);
  EXPECT_EQ(wgrad.tile_m, 128);
  EXPECT_EQ(wgrad.tile_n, 128);
  EXPECT_EQ(wgrad.split_k, 3);

  // A large square GEMM is unchanged: 16384^3 with 256x128 tiles is 64 x 128 = 8192 blocks in
  // ceil(8192/108) = 76 waves, 8192/8208 = 0.998; the best tiling is at least that.
  EXPECT_GE(gemm_quantization(16384, 16384, 16384, 108).utilization, 8192.0 / 8208.0);
  // No SM count in the profile (MI300X), or an output narrower than the smallest listed tile
  // (a LoRA rank-16 GEMM): no quantization.
  EXPECT_EQ(hw::find_gpu("MI300X").sm_count, 0);
  EXPECT_EQ(gemm_quantization(12288, 768, 768, 0).utilization, 1.0);
  EXPECT_EQ(gemm_quantization(4096, 16, 4096, 108).utilization, 1.0);
}

// In the operator table: Llama-2-7B's [4096 x 4096] projections at 2048 tokens on an A100 run at
// the measured square sweep times the quantization of a [2048 x 4096] output. Hand count: 64x64 tiles
// give 32 x 64 = 2048 blocks, ceil(2048/108) = 19 waves, 2048/2052 = 0.998 (the best of the list:
// 256x128 has 256 blocks in 3 waves, 0.790; 128x128 and 128x64 0.948); so the GEMM is unchanged
// to 0.2%, while GPT-2's [12288 x 768] launch loses 3% (32/33, above).
TEST(GemmQuantization, OperatorTableAppliesItPerLaunch) {
  const Workload w = llama7b("1xA100-80GB", 2048);
  const ModelStats s = compute_model_stats(w);
  const OpTable t = operator_table(w, s.compute, 1, Checkpointing::None, 0);
  const OpCost* sq = nullptr;
  for (int i = 0; i < t.size; ++i) {
    const OpCost& c = t.ops[static_cast<size_t>(i)];
    if (c.pass == OpPass::Forward && c.n == 4096 && c.k == 4096) sq = &c;
  }
  ASSERT_NE(sq, nullptr);
  const hw::GpuProfile& g = w.cluster.gpu;
  // One launch is 2 x 2048 x 4096 x 4096 = 68.72 GFLOP, between the A100 sweep's 2048^3 (17.18
  // GFLOP, 221.8 TFLOP/s = 0.711) and 4096^3 (137.4 GFLOP, 228.0 = 0.731) points (Azure ND A100 v4,
  // hwprofiles/gpus/A100-80GB.json): linear in log FLOPs, 68.72 / 17.18 = 4 of a x8 interval,
  // 0.711 + (ln 4 / ln(137.4 / 17.18)) x 0.020 = 0.7243.
  const double measured = 0.711 + std::log(4.0) / std::log(137.4 / 17.18) * (0.731 - 0.711);
  EXPECT_NEAR(sq->efficiency, measured * sustained_tensor_core_factor(g) * 2048.0 / 2052.0, 1e-6);
}

TEST(OperatorTable, ReentrantCheckpointingRecomputesEveryLayerOperatorOnce) {
  Workload w = llama7b("1xA100-80GB", 2048);
  w.train.checkpoint_reentrant = true;
  const ModelStats s = compute_model_stats(w);
  const OpTable none = operator_table(w, s.compute, 2, Checkpointing::None, 0);
  const OpTable full = operator_table(w, s.compute, 2, Checkpointing::Full, 0);
  EXPECT_EQ(none.gpu_s[static_cast<size_t>(OpPass::Recompute)], 0.0);
  // The recomputed pass is the forward minus what lies outside the decoder layers (embedding,
  // final norm, LM head, loss).
  const double outside = [&] {
    double x = 0;
    for (const char* n : {"embedding gather", "final RMSNorm", "LM head", "loss"})
      x += find_op(full, OpPass::Forward, n)->time_s;
    return x;
  }();
  EXPECT_NEAR(full.gpu_s[static_cast<size_t>(OpPass::Recompute)],
              full.gpu_s[static_cast<size_t>(OpPass::Forward)] - outside, 1e-12);
}

TEST(OperatorTable, TinyPassesAreBoundByHostLaunches) {
  // A 7B micro-step of 64 tokens: ~1,260 forward launches (37 per layer + head) at 24.5 us of host
  // time each (planner/data/time_model.json "host") take ~30.9 ms, far above the GPU's work
  // (2 x 6.7e9 x 64 = 0.86 TFLOP, ~3 ms at A100 rates): the pass takes the host time.
  const Workload w = llama7b("1xA100-80GB", 64);
  const ModelStats s = compute_model_stats(w);
  const OpTable t = operator_table(w, s.compute, 1, Checkpointing::None, 0);
  const auto f = static_cast<size_t>(OpPass::Forward);
  EXPECT_GT(t.host_s[f], t.gpu_s[f]);
  EXPECT_DOUBLE_EQ(t.pass_s(OpPass::Forward), t.host_s[f]);
  EXPECT_NEAR(t.host_s[f], t.kernels[f] * time_model_data().host_us_per_kernel * 1e-6, 1e-15);
  // Per layer: 8 x 2 RMSNorm + 7 GEMMs + 10 rotary + 1 attention + 1 transpose copy + 2 MLP
  // element-wise + 2 residual = 39; x 32 layers + embedding 1 + final norm 8 + head 1 + loss 3.
  EXPECT_EQ(t.kernels[f], 39 * 32 + 13);
}

TEST(OperatorTable, EagerAttentionMaterialisesTheFullScoreTensor) {
  // Llama-2-7B, --attention eager, one sequence of 1024 tokens: per layer the score tensor has
  // S = 32 heads x 1024 x 1024 = 33,554,432 elements (no causal skipping). Hand count of
  // transformers' eager_attention_forward in bf16 (2 B; fp32 4 B), elements read + written:
  //   forward:  * scaling r2 w2 = 4 B, + mask r2 (scores) r2 (mask) w2 = 6 B,
  //             softmax(dtype=float32) r2 w4 = 6 B, .to(bf16) r4 w2 = 6 B        -> 22 B, 4 launches
  //   backward: .to() backward r2 w4 = 6 B, _softmax_backward_data r4 r4 w2 = 10 B,
  //             * scaling backward r2 w2 = 4 B                                   -> 20 B, 3 launches
  //   GEMMs: Q K^T and P V forward, 2 x 2 x S x 128 FLOPs; four backward GEMMs, 4 x 2 x S x 128.
  Workload w = llama7b("1xA100-80GB", 1024);
  w.train.attention = Attention::Eager;
  const ModelStats s = compute_model_stats(w);
  const OpTable t = operator_table(w, s.compute, 1, Checkpointing::None, 0);
  const double S = 32.0 * 1024 * 1024, L = 32;
  const OpCost* chain = find_op(t, OpPass::Forward, "attention score chain");
  ASSERT_NE(chain, nullptr);
  EXPECT_DOUBLE_EQ(chain->bytes, 22.0 * S * L);
  EXPECT_DOUBLE_EQ(chain->kernels, 4 * L);
  const OpCost* chain_b = find_op(t, OpPass::Backward, "attention score chain backward");
  ASSERT_NE(chain_b, nullptr);
  EXPECT_DOUBLE_EQ(chain_b->bytes, 20.0 * S * L);
  const OpCost* gemm = find_op(t, OpPass::Forward, "attention QK^T, PV");
  ASSERT_NE(gemm, nullptr);
  EXPECT_DOUBLE_EQ(gemm->flops, 2 * 2 * S * 128 * L);
  const OpCost* gemm_b = find_op(t, OpPass::Backward, "attention QK^T/PV backward");
  ASSERT_NE(gemm_b, nullptr);
  EXPECT_DOUBLE_EQ(gemm_b->flops, 4 * 2 * S * 128 * L);
  // Head dim 128 gives 128 FLOPs per 2-byte score element read or written: below the A100's ridge
  // (312 TFLOP/s over 0.79 x 2.039 TB/s = 194 FLOP/B), so they take at least their bytes' time at
  // the profile's bandwidth (which bound wins depends on these small GEMMs' fitted efficiency).
  EXPECT_GE(gemm->time_s, gemm->bytes / (0.79 * 2.039e12) * (1 - 1e-3));
  // Per layer 39 forward launches with flash (TinyPassesAreBoundByHostLaunches) become 44: the
  // attention core's 1 launch is replaced by 2 GEMMs + 4 element-wise kernels.
  EXPECT_EQ(t.kernels[static_cast<size_t>(OpPass::Forward)], 44 * 32 + 13);
  // GPT-2 (attn_pdrop 0.1 in its config, 12 heads, 12 layers, 1024 tokens) adds native_dropout on
  // the scores: read 2 B, write 2 B + a 1-byte mask = 5 B forward, the same backward.
  Workload g;
  g.model = models::load_model("gpt2");
  g.cluster = hw::parse_cluster("1xA100-80GB");
  g.train.seq_len = 1024;
  g.train.attention = Attention::Eager;
  const OpTable tg = operator_table(g, compute_model_stats(g).compute, 1, Checkpointing::None, 0);
  const double Sg = 12.0 * 1024 * 1024;
  const OpCost* gf = find_op(tg, OpPass::Forward, "attention score chain");
  ASSERT_NE(gf, nullptr);
  EXPECT_DOUBLE_EQ(gf->bytes, (22.0 + 5.0) * Sg * 12);
  const OpCost* gb = find_op(tg, OpPass::Backward, "attention score chain backward");
  ASSERT_NE(gb, nullptr);
  EXPECT_DOUBLE_EQ(gb->bytes, (20.0 + 5.0) * Sg * 12);
}

TEST(OperatorTable, PeftLoraAddsItsScaleAndAddKernels) {
  // Llama-2-7B, LoRA r = 16 on all seven linears of each layer (PEFT's count for this target set is
  // 39,976,960 = 32 layers x 16 x (sum of in + out widths)), one sequence of 2048 tokens, bf16.
  // PEFT lora.Linear.forward: result + lora_B(lora_A(x)) * scaling, per target a mul over lora_B's
  // output (r 2 w 2 B per element) and the add (r 4 w 2): 10 B per output element, 2 launches.
  // Output widths per layer: q, k, v, o 4 x 4096 + gate, up 2 x 11008 + down 4096 = 42,496;
  // input widths: q, k, v, o, gate, up 6 x 4096 + down 11008 = 35,584.
  // Backward: mul backward 4 B per output element; the x gradient summed from the base and
  // lora_A paths, 6 B per input element.
  Workload w = llama7b("1xA100-80GB", 2048);
  w.train.method = Method::LoRA;
  w.train.lora_rank = 16;
  const ModelStats s = compute_model_stats(w);
  const OpTable t = operator_table(w, s.compute, 1, Checkpointing::None, 0);
  const double tokens = 2048, L = 32;
  const OpCost* fwd = find_op(t, OpPass::Forward, "PEFT LoRA: lora_B");
  ASSERT_NE(fwd, nullptr);
  EXPECT_DOUBLE_EQ(fwd->bytes, 10.0 * 42496 * tokens * L);
  EXPECT_DOUBLE_EQ(fwd->kernels, 2 * 7 * L);
  const OpCost* mul_b = find_op(t, OpPass::Backward, "PEFT LoRA: * scaling backward");
  ASSERT_NE(mul_b, nullptr);
  EXPECT_DOUBLE_EQ(mul_b->bytes, 4.0 * 42496 * tokens * L);
  const OpCost* sum_b = find_op(t, OpPass::Backward, "PEFT LoRA: input-gradient sum");
  ASSERT_NE(sum_b, nullptr);
  EXPECT_DOUBLE_EQ(sum_b->bytes, 6.0 * 35584 * tokens * L);
  // Full fine-tuning has no adapters and no such kernels.
  const Workload wf = llama7b("1xA100-80GB", 2048);
  const OpTable tf = operator_table(wf, compute_model_stats(wf).compute, 1, Checkpointing::None, 0);
  EXPECT_EQ(find_op(tf, OpPass::Forward, "PEFT LoRA"), nullptr);
}

TEST(OperatorTable, A100FortyGigabyteMovesBytesAtItsOwnHbmBandwidth) {
  // Same SM (and GEMM rates) as the 80GB part, HBM2 1555 GB/s instead of HBM2e 2039 GB/s (NVIDIA
  // A100 datasheet): a memory-bound kernel takes bytes / (1555e9 x 0.79 STREAM efficiency), i.e.
  // 2039/1555 = 1.311x the 80GB time; a large GEMM takes the same time on both.
  const Workload w40 = llama7b("1xA100-40GB", 2048), w80 = llama7b("1xA100-80GB", 2048);
  const OpTable t40 = operator_table(w40, compute_model_stats(w40).compute, 1, Checkpointing::None, 0);
  const OpTable t80 = operator_table(w80, compute_model_stats(w80).compute, 1, Checkpointing::None, 0);
  const OpCost* r40 = find_op(t40, OpPass::Forward, "residual adds");
  const OpCost* r80 = find_op(t80, OpPass::Forward, "residual adds");
  ASSERT_NE(r40, nullptr);
  ASSERT_NE(r80, nullptr);
  EXPECT_NEAR(r40->time_s, r40->bytes / (1555e9 * 0.79), 1e-12);
  EXPECT_NEAR(r40->time_s / r80->time_s, 2039.0 / 1555.0, 1e-9);
  const OpCost* g40 = find_op(t40, OpPass::Forward, "linear GEMM", 11008);
  const OpCost* g80 = find_op(t80, OpPass::Forward, "linear GEMM", 11008);
  ASSERT_NE(g40, nullptr);
  ASSERT_NE(g80, nullptr);
  EXPECT_DOUBLE_EQ(g40->time_s, g80->time_s);
}

TEST(OperatorTable, LongContextIsDominatedByAttention) {
  // Llama-2-7B at 32k tokens on an A100: per layer the causal attention forward is
  // 2 * 32768^2 * 4096 = 8.8 TFLOP against 2 * 32768 * 202,375,168 = 13.3 TFLOP of weight GEMMs,
  // but it runs at FlashAttention-2's ~0.66 of peak (causal 16k bar) vs GEMMs' ~0.72 and its
  // backward is 2.5x: in the backward, attention is the largest operator.
  const Workload w = llama7b("1xA100-80GB", 32768);
  const ModelStats s = compute_model_stats(w);
  const OpTable t = operator_table(w, s.compute, 1, Checkpointing::None, 0);
  const OpCost* attn_b = find_op(t, OpPass::Backward, "attention core backward");
  ASSERT_NE(attn_b, nullptr);
  for (int i = 0; i < t.size; ++i) {
    const OpCost& c = t.ops[static_cast<size_t>(i)];
    if (c.pass == OpPass::Backward && &c != attn_b) {
      EXPECT_LT(c.time_s, attn_b->time_s) << c.name;
    }
  }
  // Tokens per second fall with sequence length at a fixed token count per micro-step (s^2 term).
  const Workload w4 = llama7b("1xA100-80GB", 4096);
  const ModelStats s4 = compute_model_stats(w4);
  ZeroConfig z32 = ZeroConfig::deepspeed_defaults(0), z4 = z32;
  z32.micro_batch = 1;
  z4.micro_batch = 8;  // the same 32768 tokens
  EXPECT_GT(estimate_time(w, s, z32).step_s, 1.3 * estimate_time(w4, s4, z4).step_s);
}

// MFU counts only the FLOPs the method needs (PaLM Appendix B, extended): LoRA's frozen base weights
// need the forward (2N) and the input gradient (2N) but no weight gradient: 4 N_frozen + 6 N_lora,
// N_lora = 39,976,960 (PEFT prints it for r = 16 on all linear projections of Llama-2-7B), plus the
// causal attention term 6 * L * h * s. HFU adds, under full checkpointing, the recomputed forward of
// the layers: 2 x 32 x 202,375,168 weight FLOPs + 2 * L * h * s of attention per token.
TEST(ModelFlops, LoraCountsFourNAndHfuAddsTheRecomputedForward) {
  Workload w = llama7b("1xA100-80GB", 2048);
  w.train.method = Method::LoRA;
  w.train.lora_rank = 16;
  const ModelStats s = compute_model_stats(w);
  ZeroConfig z = ZeroConfig::deepspeed_defaults(0);
  z.micro_batch = 2;
  z.checkpointing = Checkpointing::Full;
  const StepTime t = estimate_time(w, s, z);
  const double n_total = 6'738'415'616.0, n_lora = 39'976'960.0, tokens = 2 * 2048.0;
  const double attn = 6.0 * 32 * 4096 * 2048;
  EXPECT_NEAR(t.flops_per_step, (4 * n_total + 6 * n_lora + attn) * tokens, 1e4);
  // The recomputed layer forward includes the adapters' own GEMMs (r x in and out x r per target),
  // except down_proj's lora_B [4096 x 16], where the non-reentrant recompute stops.
  const double layer_fwd = 2.0 * (32.0 * 202'375'168 + n_lora) - 2.0 * 4096 * 16 * 32;
  EXPECT_NEAR(t.hardware_flops_per_step - t.flops_per_step, (layer_fwd + attn / 3) * tokens, 1e4);
  EXPECT_NEAR(t.mfu, t.flops_per_step / (t.step_s * 312e12), 1e-12);
  EXPECT_GT(t.hfu, t.mfu);
  // Full fine-tuning of the same model counts 6N: more model FLOPs than LoRA per token.
  Workload wf = llama7b("1xA100-80GB", 2048);
  const StepTime tf = estimate_time(wf, compute_model_stats(wf), z);
  EXPECT_NEAR(tf.flops_per_step, (6 * n_total + attn) * tokens, 1e4);
}

TEST(StepTime, EveryPredictionCarriesTheCalibrationBand) {
  const Workload w = llama7b("8xA100-80GB", 2048);
  const ModelStats s = compute_model_stats(w);
  const Plan p = evaluate_plan(w, s, ZeroConfig::deepspeed_defaults(3), 0.05);
  EXPECT_GT(p.time.error_band, 0.0);
  EXPECT_LT(p.time.error_band, 0.5);
  EXPECT_DOUBLE_EQ(p.time.error_band, time_model_data().error_band);
}

// torch.utils.checkpoint(use_reentrant=False) (transformers 5's default) stops the recompute at the
// last saved tensor: Llama's down_proj inputs, packed by autograd before its mm runs (DeepSpeed's own
// count on tiny models: tests/test_gemm_flops_conformance.cpp). Hand count for Llama-2-7B,
// 2 x 2048 tokens: the recompute leaves out 32 down_proj GEMMs [4096 tokens, 11008] x [11008, 4096]
// = 2 x 4096 x 11008 x 4096 x 32 FLOPs and one of the layer's two residual adds (3 x 2 B x 4096 x 4096
// per layer).
double pass_flops(const OpTable& t, OpPass p) {
  double f = 0;
  for (int i = 0; i < t.size; ++i)
    if (t.ops[static_cast<size_t>(i)].pass == p) f += t.ops[static_cast<size_t>(i)].flops;
  return f;
}

TEST(OperatorTable, NonReentrantRecomputeStopsBeforeTheMlpOutputGemm) {
  Workload w = llama7b("1xA100-80GB", 2048);
  const ModelStats s = compute_model_stats(w);
  ASSERT_TRUE(s.compute.recompute_early_stop);
  const OpTable early = operator_table(w, s.compute, 2, Checkpointing::Full, 0);
  w.train.checkpoint_reentrant = true;
  const OpTable whole = operator_table(w, s.compute, 2, Checkpointing::Full, 0);
  const double down = 2.0 * 4096 * 11008 * 4096 * 32;
  EXPECT_NEAR(pass_flops(whole, OpPass::Recompute) - pass_flops(early, OpPass::Recompute), down, 1.0);
  const OpCost* adds = find_op(early, OpPass::Recompute, "residual adds");
  ASSERT_NE(adds, nullptr);
  EXPECT_DOUBLE_EQ(adds->bytes, 3.0 * 2 * 4096 * 4096 * 32);
  EXPECT_DOUBLE_EQ(adds->kernels, 32);
  // The forward itself is unchanged.
  EXPECT_DOUBLE_EQ(pass_flops(whole, OpPass::Forward), pass_flops(early, OpPass::Forward));

  // ZeRO-3's zero3_linear_wrap saves after its GEMM: the whole layer is recomputed, unless
  // zero_optimization.memory_efficient_linear is false (torch's own linear again).
  Workload w3 = llama7b("8xA100-80GB", 2048);
  ZeroConfig z3 = ZeroConfig::deepspeed_defaults(3);
  z3.micro_batch = 2;
  z3.checkpointing = Checkpointing::Full;
  const ModelStats s3 = compute_model_stats(w3);
  const OpTable wrapped = step_operator_table(w3, s3.compute, z3);
  z3.memory_efficient_linear = false;
  const OpTable plain = step_operator_table(w3, s3.compute, z3);
  EXPECT_NEAR(pass_flops(wrapped, OpPass::Recompute) - pass_flops(plain, OpPass::Recompute), down, 1.0);
  EXPECT_NEAR(pass_flops(wrapped, OpPass::Recompute), pass_flops(whole, OpPass::Recompute), 1.0);

  // HFU counts what the recompute runs: the layers' GEMMs less the 32 down_proj GEMMs, plus the
  // causal attention forward 2 L h s per token.
  ZeroConfig z0 = ZeroConfig::deepspeed_defaults(0);
  z0.micro_batch = 2;
  z0.checkpointing = Checkpointing::Full;
  Workload w0 = llama7b("1xA100-80GB", 2048);
  const StepTime t = estimate_time(w0, s, z0);
  const double tokens = 2 * 2048.0, attn = 6.0 * 32 * 4096 * 2048;
  EXPECT_NEAR(t.hardware_flops_per_step - t.flops_per_step,
              (2.0 * 32.0 * 202'375'168 - 2.0 * 4096 * 11008 * 32 + attn / 3) * tokens, 1e4);
}

// Which layers end with their MLP output linear as the last saved tensor (ComputeStats).
TEST(OperatorTable, EarlyStopOnlyWhereNothingAfterTheMlpOutputSaves) {
  auto early = [](const char* model, Method method = Method::Full, std::vector<std::string> targets = {}) {
    Workload w;
    w.model = models::load_model(model);
    w.cluster = hw::parse_cluster("1xA100-80GB");
    w.train.seq_len = 1024;
    w.train.method = method;
    w.train.lora_targets = std::move(targets);
    return compute_model_stats(w).compute.recompute_early_stop;
  };
  EXPECT_TRUE(early("llama-2-7b"));
  EXPECT_TRUE(early("mistral-7b"));
  // OPT-1.3B's config has dropout 0.1: the residual dropout after fc2 saves its mask.
  EXPECT_FALSE(early("opt-1.3b"));
  // GPT-2: resid_pdrop 0.1 after mlp.c_proj.
  EXPECT_FALSE(early("gpt2"));
  // Gemma-2: post_feedforward_layernorm normalises down_proj's output (and saves it).
  EXPECT_FALSE(early("gemma-2-9b"));
  // Mixtral: the routing-weight multiply after the experts saves their outputs.
  EXPECT_FALSE(early("mixtral-8x7b"));
  // LoRA on down_proj: PEFT runs base_layer before lora_A/lora_B, whose input is saved last: only the
  // lora_B GEMM [out 4096, r 16] is skipped (test_gemm_flops_conformance.cpp has DeepSpeed's count).
  EXPECT_TRUE(early("llama-2-7b", Method::LoRA));
  EXPECT_TRUE(early("llama-2-7b", Method::LoRA, {"q_proj", "v_proj"}));
  // QLoRA's 4-bit linears are bitsandbytes autograd Functions (save after their forward): an
  // untargeted down_proj is recomputed.
  EXPECT_FALSE(early("llama-2-7b", Method::QLoRA, {"q_proj", "v_proj"}));
  Workload lw;
  lw.model = models::load_model("llama-2-7b");
  lw.cluster = hw::parse_cluster("1xA100-80GB");
  lw.train.method = Method::LoRA;
  const ComputeStats ls = compute_model_stats(lw).compute;
  EXPECT_TRUE(ls.recompute_early_stop_lora);
  EXPECT_EQ(ls.recompute_early_stop_gemm.n, 4096);
  EXPECT_EQ(ls.recompute_early_stop_gemm.k, 16);
}

// The DeepSpeed runtime path's own element-wise kernels (time_model.cpp step_operator_table).
// Hand counts from DeepSpeed 0.19.8's code:
//  - stage 3: zero3_linear_wrap (runtime/zero/linear.py) adds each bias of a [b, s, in] input in a
//    separate `output += bias` (read + write the output, 2 x 2 B per element in bf16); OPT-1.3B
//    (h 2048, ffn 8192, 24 layers, biases on q, k, v, out_proj, fc1, fc2) has 6 biases per layer of
//    width 2048 x 4 + 8192 + 2048 = 18,432;
//  - stage 3: reduce_scatter_coalesced (runtime/comm/coalesced_collectives.py) torch.cat's each
//    bucket and div_'s it: 2 passes of r 2 B + w 2 B = 8 B per trained parameter, every micro-step;
//  - stages 1 and 2: stage_1_and_2.py average_tensor's div_: 4 B per trained parameter (stage 2 in
//    the backward of every micro-step, stage 1 once per step);
//  - GPT-2's Conv1D calls torch.addmm itself: no separate bias add.
ZeroConfig stage_config(int stage) {
  ZeroConfig z = ZeroConfig::deepspeed_defaults(stage);
  z.micro_batch = 1;
  z.grad_accum = 1;
  z.checkpointing = Checkpointing::None;
  return z;
}

TEST(RuntimeKernels, Zero3LinearWrapAddsEachBiasInItsOwnKernel) {
  Workload w;
  w.model = models::load_model("opt-1.3b");
  w.cluster = hw::parse_cluster("8xA100-80GB");
  w.train.seq_len = 2048;
  const ModelStats s = compute_model_stats(w);
  const OpTable t3 = step_operator_table(w, s.compute, stage_config(3));
  const OpCost* add = find_op(t3, OpPass::Forward, "ZeRO-3 linear bias add");
  ASSERT_NE(add, nullptr);
  EXPECT_DOUBLE_EQ(add->kernels, 6.0 * 24);
  EXPECT_DOUBLE_EQ(add->bytes, 2.0 * 2.0 * 18432.0 * 2048.0 * 24.0);
  // Stage 2 runs nn.Linear's own addmm (bias fused): no such kernel.
  // (Each table is kept in a variable: find_op points into it.)
  const OpTable t2 = step_operator_table(w, s.compute, stage_config(2));
  EXPECT_EQ(find_op(t2, OpPass::Forward, "bias add"), nullptr);
  // Full checkpointing re-runs it in the recompute.
  ZeroConfig ck = stage_config(3);
  ck.checkpointing = Checkpointing::Full;
  const OpTable tf = step_operator_table(w, s.compute, ck);
  EXPECT_NE(find_op(tf, OpPass::Recompute, "ZeRO-3 linear bias add"), nullptr);

  Workload g = w;
  g.model = models::load_model("gpt2");
  const OpTable tg = step_operator_table(g, compute_model_stats(g).compute, stage_config(3));
  EXPECT_EQ(find_op(tg, OpPass::Forward, "bias add"), nullptr);
}

TEST(RuntimeKernels, GradientReductionPassesFollowTheStage) {
  const Workload w = llama7b("8xA100-80GB", 2048);
  const ModelStats s = compute_model_stats(w);
  const double p = 6738415616.0;  // Llama-2-7B, all trained
  // (Each table is kept in a variable: find_op points into it.)
  const OpTable t3 = step_operator_table(w, s.compute, stage_config(3));
  const OpCost* s3 = find_op(t3, OpPass::Backward, "gradient bucket cat + pre-divide");
  ASSERT_NE(s3, nullptr);
  EXPECT_DOUBLE_EQ(s3->bytes, 8.0 * p);
  // Llama has no linear biases.
  EXPECT_EQ(find_op(t3, OpPass::Forward, "bias add"), nullptr);
  const OpTable t2 = step_operator_table(w, s.compute, stage_config(2));
  const OpCost* s2 = find_op(t2, OpPass::Backward, "gradient bucket pre-divide");
  ASSERT_NE(s2, nullptr);
  EXPECT_DOUBLE_EQ(s2->bytes, 4.0 * p);
  const OpTable t1 = step_operator_table(w, s.compute, stage_config(1));
  EXPECT_EQ(find_op(t1, OpPass::Backward, "gradient bucket pre-divide"), nullptr);
  ASSERT_NE(find_op(t1, OpPass::Step, "gradient bucket pre-divide"), nullptr);
  EXPECT_DOUBLE_EQ(find_op(t1, OpPass::Step, "gradient bucket pre-divide")->bytes, 4.0 * p);
  // The bare operator table (no runtime path given) adds none of them.
  const OpTable bare = operator_table(w, s.compute, 1, Checkpointing::None, 0);
  EXPECT_EQ(find_op(bare, OpPass::Backward, "pre-divide"), nullptr);
}

// Short inner dimension (time_model.json "gemm_inner_dimension", from XLA's sm_90 bf16 matmul table:
// m = n = 4096 at K = 256 / 512 ran 392.2 / 543.1 TFLOP/s against 500.4 / 632.0 for squares of the
// same FLOPs; m = 4096, n = 2048, K = 1024 593.2 against 632.0; K = 2048 as fast as a square).
TEST(GemmInnerDimension, ShortKRunsBelowASquareOfTheSameFlops) {
  EXPECT_NEAR(gemm_inner_dimension_factor(256), 392.2 / 500.4, 0.001);
  EXPECT_NEAR(gemm_inner_dimension_factor(512), 543.1 / 632.0, 0.001);
  EXPECT_NEAR(gemm_inner_dimension_factor(1024), 593.2 / 632.0, 0.001);
  EXPECT_DOUBLE_EQ(gemm_inner_dimension_factor(2048), 1.0);
  EXPECT_DOUBLE_EQ(gemm_inner_dimension_factor(16384), 1.0);
  // GPT-2's 768: log2(768 / 512) = 0.585 of the way from 0.859 to 0.938.
  EXPECT_NEAR(gemm_inner_dimension_factor(768), 0.859 + std::log2(1.5) * (0.938 - 0.859), 1e-9);
  // Below the first point: the first factor (a LoRA rank-16 adapter's K).
  EXPECT_DOUBLE_EQ(gemm_inner_dimension_factor(16), gemm_inner_dimension_factor(256));
  // In the operator table: Llama-2-7B's forward GEMMs have K = 4096 or 11008 (no loss); GPT-2's
  // forward c_attn [768 -> 2304] has K = 768 and carries the factor.
  Workload g;
  g.model = models::load_model("gpt2");
  g.cluster = hw::parse_cluster("1xA100-80GB");
  g.train.seq_len = 1024;
  const OpTable t = operator_table(g, compute_model_stats(g).compute, 12, Checkpointing::None, 0);
  const OpCost* attn = find_op(t, OpPass::Forward, "linear GEMM", 2304);
  ASSERT_NE(attn, nullptr);
  ASSERT_EQ(attn->k, 768);
  const hw::GpuProfile& a100 = g.cluster.gpu;
  const double f = 2.0 * 12 * 1024 * 768 * 2304;
  const auto q = gemm_quantization(12 * 1024, 2304, 768, a100.sm_count);
  EXPECT_NEAR(attn->efficiency,
              hw::gemm_efficiency(a100, f) * sustained_tensor_core_factor(a100) * q.utilization *
                  (0.859 + std::log2(1.5) * (0.938 - 0.859)),
              1e-6);
}

}  // namespace
}  // namespace zeroplan::planner
