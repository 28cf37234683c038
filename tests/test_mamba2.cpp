// Mamba-2 hybrids (Granite-4.0-H, model_type granitemoehybrid): planned, with their layers told apart.
//  - Parameter counts: transformers 5.24 on the meta device (tests/data/models/param_counts.json
//    defaults/granitemoehybrid, tensor by tensor in test_models_hf).
//  - The torch fallback's saved tensors, model states and collectives: real DeepSpeed 0.19.8 on CPU ranks
//    (tests/deepspeed/fixtures/0.19.8/granitemoehybrid_*, test_conformance), dense and MoE, stages 2 and 3.
//  - The CUDA path (mamba_ssm's MambaSplitConv1dScanCombinedFn) is counted by hand here from its source.
#include <gtest/gtest.h>

#include <fstream>
#include <string>

#include "cli_runner.h"
#include "hwprofiles/cluster.h"
#include "models/model_spec.h"
#include "planner/mamba2.h"
#include "planner/model_stats.h"
#include "planner/op_model.h"

namespace zeroplan::testing {
namespace {

const std::string kDefaults =
    std::string(ZEROPLAN_SOURCE_DIR) + "/tests/data/models/hf_defaults/granitemoehybrid.json";

// GraniteMoeHybridConfig's defaults with the published files' layer spelling: 3 Mamba-2 layers to 1 attention
// layer over 8 layers, no experts (the dense variant's MLP is shared_mlp).
std::string hybrid_config() {
  const std::string path = ::testing::TempDir() + "/granite_h_hybrid.json";
  std::string types;
  for (int i = 0; i < 8; ++i)
    types += std::string(i ? ", " : "") + (i % 4 == 3 ? "\"attention\"" : "\"mamba\"");
  std::ofstream(path)
      << (R"({"model_type": "granitemoehybrid", "hidden_size": 2048, "intermediate_size": 8192,
    "num_hidden_layers": 8, "num_attention_heads": 16, "num_key_value_heads": 4, "vocab_size": 100352,
    "max_position_embeddings": 131072, "num_local_experts": 0, "shared_intermediate_size": 8192,
    "mamba_n_heads": 64, "mamba_d_head": 64, "mamba_d_state": 128, "position_embedding_type": "nope",
    "layer_types": [)" +
          types + "]}");
  return path;
}

TEST(Mamba2, HybridsArePlannedAndSayWhichKernels) {
  for (const std::string& cfg : {kDefaults, hybrid_config()}) {
    const auto r = run_cli({"--model", cfg, "--gpus", "8xH100"});
    EXPECT_EQ(r.exit_code, 0) << cfg << "\n" << r.err;
    EXPECT_NE(r.out.find("Recommended: ZeRO-"), std::string::npos) << r.out;
    EXPECT_NE(r.out.find("assumed Mamba-2 kernels: mamba-ssm + causal-conv1d"), std::string::npos) << r.out;
  }
  const auto sp = run_cli({"--model", hybrid_config(), "--gpus", "8xH100", "--sp", "2", "--seq-len", "8192"});
  EXPECT_EQ(sp.exit_code, 2);
  EXPECT_NE(sp.err.find("Mamba-2 layers"), std::string::npos) << sp.err;
}

// One Mamba-2 mixer at GraniteMoeHybridConfig's defaults (h 4096, inner 8192, 128 heads of 64, state 256, one
// group) for one sample of 2048 bf16 tokens on the CUDA path, tensor by tensor.
TEST(Mamba2, MambaSsmPathSavedBytesByHand) {
  const models::ModelSpec m = models::load_model(kDefaults);
  ASSERT_EQ(m.mamba_intermediate, 8192);
  ASSERT_EQ(m.mamba_conv_dim(), 8192 + 2 * 256);
  const int64_t per_token = 2 * 4096                   // in_proj input (the normed hidden states)
                            + 2 * (8192 + 8704 + 128)  // zxbcdt: in_proj's whole output
                            + 2 * 8192                 // out_x: the scan's output before the gated norm
                            + 4 * 1;                   // the norm's fp32 rstd, one per group
  EXPECT_EQ(planner::mamba2_mixer_saved_per_sample(m, {}, 2, 2048, planner::Mamba2Kernels::MambaSsm),
            per_token * 2048);
}

TEST(Mamba2, OperatorTableRunsEachMixerInItsOwnLayers) {
  planner::Workload w;
  w.model = models::load_model(hybrid_config());
  w.cluster = hw::parse_cluster("1xH100");
  w.train.seq_len = 4096;
  const planner::ModelStats s = planner::compute_model_stats(w);
  const planner::OpTable t = planner::operator_table(w, s.compute, 1, planner::Checkpointing::None, 0);
  const auto kernels = [&](const std::string& prefix) {
    double k = -1;
    for (int i = 0; i < t.size; ++i) {
      const auto& op = t.ops[static_cast<size_t>(i)];
      if (op.pass == planner::OpPass::Forward && std::string(op.name).rfind(prefix, 0) == 0) k = op.kernels;
    }
    return k;
  };
  // 2 of the 8 layers are attention (every fourth), 6 Mamba-2; "nope": no rotary embedding at all.
  EXPECT_EQ(kernels("attention core ("), 2);
  // mamba_ssm's chunked scan forward: chunk cumsum, chunk state, state passing, C B^T, chunk scan.
  EXPECT_EQ(kernels("Mamba-2 chunked scan (mamba_ssm)"), 6 * 5);
  EXPECT_EQ(kernels("Mamba-2 causal conv1d"), 6);
  EXPECT_EQ(kernels("rotary embedding"), -1);
  // in_proj [2048 -> 4096 + 4352 + 64] in the Mamba-2 layers only; q_proj [2048 -> 2048] in the attention
  // ones.
  double in_proj = 0;
  for (int i = 0; i < t.size; ++i) {
    const auto& op = t.ops[static_cast<size_t>(i)];
    if (op.pass == planner::OpPass::Forward && std::string(op.name) == "linear GEMM" && op.n == 8512)
      in_proj += op.kernels;
  }
  EXPECT_EQ(in_proj, 6);
}

}  // namespace
}  // namespace zeroplan::testing
