// TiledMLP (planner/tiled_mlp.h, issue 27 item 1): the planner's arithmetic against hand counts of what
// DeepSpeed 0.19.8's ulysses_sp.py TiledMLP does, on a Llama-3.1-8B shape (config.json of
// meta-llama/Llama-3.1-8B: hidden 4096, 32 layers, 32 heads, 8 KV heads, intermediate 14336), and the CLI.
// Its recorded runs (tests/deepspeed/fixtures-tiled) are compared by test_conformance.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <string>

#include "cli_runner.h"
#include "hwprofiles/cluster.h"
#include "planner/memory_model.h"
#include "planner/model_stats.h"
#include "planner/op_model.h"
#include "planner/tiled_mlp.h"
#include "tests/model_specs.h"

namespace zeroplan::planner {
namespace {

Workload llama31_8b(int64_t seq, bool tiled) {
  Workload w;
  w.model = testing::llama31_8b_spec();
  w.cluster = hw::parse_cluster("8xH100");
  w.train.seq_len = seq;
  w.train.tiled_mlp = tiled;
  return w;
}

ZeroConfig stage2() {
  ZeroConfig z = ZeroConfig::deepspeed_defaults(2);
  z.micro_batch = 1;
  return z;
}

// The recipe's shard count ceil(seqlen / hidden): 32768 / 4096 = 8.
TEST(TiledMlp, ShardsAreTokensOverHidden) {
  EXPECT_EQ(tiled_mlp_shards(llama31_8b(32768, true)), 8);
  EXPECT_EQ(tiled_mlp_shards(llama31_8b(32769, true)), 9);
  Workload w = llama31_8b(32768, true);
  w.train.sequence_parallel = 4;  // the rank's 8192 tokens
  EXPECT_EQ(tiled_mlp_shards(w), 2);
}

// Forward: the MLP saves only its input, which gate_proj and up_proj save anyway: per layer and token the
// SwiGLU's gate(x), act(gate(x)), up(x) and product (4 x 14336 x 2 B) are no longer saved.
TEST(TiledMlp, SavesOnlyTheMlpInput) {
  const Workload plain = llama31_8b(32768, false), tiled = llama31_8b(32768, true);
  const MemoryBreakdown a = estimate_memory(plain, compute_model_stats(plain), stage2());
  const MemoryBreakdown b = estimate_memory(tiled, compute_model_stats(tiled), stage2());
  EXPECT_EQ(a.saved_activation_bytes() - b.saved_activation_bytes(), int64_t{32} * 32768 * 4 * 14336 * 2);
}

// Backward: the MLP's forward GEMMs (gate, up: 4096 -> 14336; down: 14336 -> 4096) run once more per
// micro-step: 2 x tokens x 3 x 4096 x 14336 FLOPs per layer.
TEST(TiledMlp, RecomputesTheMlpForwardInTheBackward) {
  const Workload w = llama31_8b(32768, true);
  const ModelStats s = compute_model_stats(w);
  const OpTable t = operator_table(w, s.compute, 1, Checkpointing::None, 0);
  double flops = 0;
  for (int i = 0; i < t.size; ++i) {
    const OpCost& op = t.ops[static_cast<size_t>(i)];
    if (std::string(op.name).rfind("TiledMLP: MLP GEMMs", 0) == 0) flops += op.flops;
  }
  EXPECT_DOUBLE_EQ(flops, 32.0 * 2.0 * 32768.0 * 3.0 * 4096.0 * 14336.0);
}

TEST(CliTiledMlp, JsonEmitAndRefusal) {
  const auto r = testing::run_cli({"--model", "llama-3.1-8b", "--gpus", "8xH100", "--seq-len", "32768",
                                   "--kernels", "tiled-mlp", "--json"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["recommendation"]["kernels"]["mlp"], "tiled_mlp");
  EXPECT_EQ(j["recommendation"]["kernels"]["tiled_mlp_shards"], 8);
  const auto plain = testing::run_cli({"--model", "llama-3.1-8b", "--gpus", "8xH100", "--json"});
  ASSERT_EQ(plain.exit_code, 0) << plain.err;
  EXPECT_EQ(nlohmann::json::parse(plain.out)["recommendation"]["kernels"]["mlp"], "module");
  testing::expect_cli_user_error({"--model", "mixtral-8x7b", "--gpus", "8xH100", "--kernels", "tiled-mlp"},
                                 "tiled-mlp");
}

}  // namespace
}  // namespace zeroplan::planner
