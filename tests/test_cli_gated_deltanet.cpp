// Gated DeltaNet hybrids (Qwen3-Next): the parameters are read exactly (tests/test_models_hf.cpp), but
// the planner has no activation or FLOP model for the linear_attention layers, so a plan is refused
// with one line that names what is missing (exit 2), not printed with made-up activations.
#include <gtest/gtest.h>

#include <string>

#include "cli_runner.h"

namespace zeroplan::testing {
namespace {

TEST(GatedDeltaNetCli, PlanIsRefusedNamingWhatIsMissing) {
  const std::string cfg = std::string(ZEROPLAN_SOURCE_DIR) + "/tests/data/models/hf_defaults/qwen3_next.json";
  const auto r = run_cli({"--model", cfg, "--gpus", "8xH100"});
  EXPECT_EQ(r.exit_code, 2) << r.err;
  EXPECT_EQ(r.stderr_lines(), 1) << r.err;
  EXPECT_TRUE(r.out.empty()) << r.out;
  // 36 of the 48 layers are linear_attention (Qwen3NextConfig full_attention_interval 4); the count is
  // transformers 5.24's (tests/data/models/param_counts.json defaults/qwen3_next).
  for (const char* what : {"36 of its 48 decoder layers are Gated DeltaNet", "79674391296",
                           "chunk_gated_delta_rule", "torch_chunk_gated_delta_rule", "causal_conv1d_fn"})
    EXPECT_NE(r.err.find(what), std::string::npos) << what << "\n" << r.err;
}

}  // namespace
}  // namespace zeroplan::testing
