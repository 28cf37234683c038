// Gated DeltaNet hybrids (Qwen3-Next, Qwen3.5): planned, with their layers told apart.
//  - The torch fallback's saved tensors are checked against real DeepSpeed 0.19.8 on CPU ranks
//    (tests/deepspeed/fixtures/0.19.8/qwen3_5_*, test_conformance): within 1% at 100 and 128 tokens,
//    stages 2 and 3, with and without checkpointing.
//  - The CUDA path (flash-linear-attention + causal-conv1d) is counted by hand here from their sources.
//  - The operator table runs attention in the attention layers only and the chunked rule in the others;
//    the weight GEMMs count each kind's projections in its own layers.
// Expected values: the layer counts of the config (layer_types), the shapes of transformers 5.24's
// Qwen3_5GatedDeltaNet / Qwen3_5Attention, and fla's ChunkGatedDeltaRuleFunction.forward.
#include <gtest/gtest.h>

#include <string>

#include "cli_runner.h"
#include "hwprofiles/cluster.h"
#include "models/model_spec.h"
#include "planner/gated_delta_net.h"
#include "planner/model_stats.h"
#include "planner/op_model.h"

namespace zeroplan::testing {
namespace {

using planner::Workload;

const std::string kQwen35 =
    std::string(ZEROPLAN_SOURCE_DIR) + "/tests/data/models/hf_defaults/qwen3_5_text.json";
const std::string kQwen3Next =
    std::string(ZEROPLAN_SOURCE_DIR) + "/tests/data/models/hf_defaults/qwen3_next.json";

TEST(GatedDeltaNet, HybridsArePlanned) {
  for (const std::string& cfg : {kQwen35, kQwen3Next}) {
    const auto r = run_cli({"--model", cfg, "--gpus", "8xH100"});
    EXPECT_EQ(r.exit_code, 0) << cfg << "\n" << r.err;
    EXPECT_NE(r.out.find("Recommended: ZeRO-"), std::string::npos) << r.out;
  }
}

TEST(GatedDeltaNet, UlyssesAndAutoTpAreRefusedByName) {
  const auto sp = run_cli({"--model", kQwen35, "--gpus", "8xH100", "--sp", "2", "--seq-len", "8192"});
  EXPECT_EQ(sp.exit_code, 2) << sp.out;
  EXPECT_NE(sp.err.find("Gated DeltaNet layers"), std::string::npos) << sp.err;
  EXPECT_NE(sp.err.find("UlyssesSPAttentionHF"), std::string::npos) << sp.err;
  const auto tp = run_cli({"--model", kQwen35, "--gpus", "8xH100", "--tp", "2"});
  EXPECT_EQ(tp.exit_code, 2) << tp.out;
  EXPECT_NE(tp.err.find("Gated DeltaNet"), std::string::npos) << tp.err;
}

// The CUDA path of one Qwen3.5 mixer (hf_defaults/qwen3_5_text: h 4096, 16 key heads and 32 value heads of
// 128, kernel 4) for one sample of 2048 bf16 tokens, tensor by tensor.
TEST(GatedDeltaNet, FlaPathSavedBytesByHand) {
  const models::ModelSpec m = models::load_model(kQwen35);
  ASSERT_EQ(m.linear_num_value_heads, 32);
  const int64_t s = 2048;
  const int64_t per_token = 2 * 4096                 // in_proj_* input (the normed hidden states)
                            + 2 * (2 * 2048 + 4096)  // causal_conv1d's x (in_proj_qkv's output)
                            + 2 * 32                 // sigmoid(b)
                            + 4 * 32 + 4 * 32        // softplus input and output (fp32)
                            + 2 * 2048 + 2 * 2048    // fla: l2-normalised q and k (key heads)
                            + 4 * 16 + 4 * 16        // their fp32 rstd
                            + 2 * 4096               // v, contiguous copy
                            + 4 * 32                 // g after chunk_local_cumsum (fp32)
                            + 2 * 64 * 32            // A: [64] per value head per token, bf16
                            + 4 * 4096 + 4 * 32      // gated norm: fp32 copy, rsqrt per row
                            + 2 * 4096               // normalised x (bf16) for the weight
                            + 2 * 4096 + 4 * 4096    // the product (bf16) and silu's output (fp32)
                            + 4 * 4096               // silu's input z.float()
                            + 2 * 4096;              // out_proj input
  EXPECT_EQ(planner::gdn_mixer_saved_per_sample(m, {}, 2, s, planner::GdnKernels::FlashLinearAttention),
            per_token * s);
}

TEST(GatedDeltaNet, OperatorTableRunsEachMixerInItsOwnLayers) {
  Workload w;
  w.model = models::load_model(kQwen35);
  w.cluster = hw::parse_cluster("1xH100");
  w.train.seq_len = 4096;
  const planner::ModelStats s = planner::compute_model_stats(w);
  // 8 of the 32 layers are full_attention (Qwen3_5TextConfig's default layer_types: every 4th).
  const double attention_layer =
      2.0 * (4096.0 * 8192 + 2 * 4096.0 * 1024 + 4096.0 * 4096);  // q (gated), k, v, o
  const double gdn_layer = 2.0 * (4096.0 * 8192 + 4096.0 * 4096 + 2 * 4096.0 * 32 + 4096.0 * 4096);
  const double mlp = 2.0 * 3 * 4096.0 * 12288;
  const double head = 2.0 * 4096.0 * 248320;
  EXPECT_DOUBLE_EQ(s.compute.gemm_flops_per_token_fwd,
                   8 * attention_layer + 24 * gdn_layer + 32 * mlp + head);
  const planner::OpTable t = planner::operator_table(w, s.compute, 1, planner::Checkpointing::None, 0);
  const auto kernels = [&](const std::string& prefix, planner::OpPass pass) {
    double k = -1;
    for (int i = 0; i < t.size; ++i) {
      const auto& op = t.ops[static_cast<size_t>(i)];
      if (op.pass == pass && std::string(op.name).rfind(prefix, 0) == 0) k = op.kernels;
    }
    return k;
  };
  EXPECT_EQ(kernels("attention core (", planner::OpPass::Forward), 8);
  EXPECT_EQ(kernels("attention output transpose copy", planner::OpPass::Forward), 8);
  // fla's forward: chunk_local_cumsum, chunk_scaled_dot_kkt, solve_tril, recompute_w_u, fwd_h, fwd_o.
  EXPECT_EQ(kernels("Gated DeltaNet chunked rule (fla)", planner::OpPass::Forward), 24 * 6);
  EXPECT_EQ(kernels("Gated DeltaNet causal conv1d", planner::OpPass::Forward), 24);
  // Weight GEMM launches by output width, summed over the table's forward rows: k_proj and v_proj (n 1024)
  // in the 8 attention layers, in_proj_b and in_proj_a (n 32) in the 24 others, gate and up (n 12288) in all.
  const auto gemm_launches = [&](int64_t n) {
    double k = 0;
    for (int i = 0; i < t.size; ++i) {
      const auto& op = t.ops[static_cast<size_t>(i)];
      if (op.pass == planner::OpPass::Forward && std::string(op.name) == "linear GEMM" && op.n == n)
        k += op.kernels;
    }
    return k;
  };
  EXPECT_EQ(gemm_launches(1024), 2 * 8);
  EXPECT_EQ(gemm_launches(32), 2 * 24);
  EXPECT_EQ(gemm_launches(12288), 2 * 32);
}

}  // namespace
}  // namespace zeroplan::testing
