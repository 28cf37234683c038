// DeepSpeed's Muon (planner/muon.h; issue 28 item 2), against real DeepSpeed 0.19.8 recorded on CPU ranks
// (tests/deepspeed/fixtures-muon, run_matrix.py --set muon; docs/conformance-muon.md). The planner's
// model states for these runs are compared byte for byte by test_conformance.cpp; here: the groups by hand,
// the staged copy DeepSpeed keeps beside the master, what `check` says of the paths that are not modelled,
// and the CLI.
//
// Hand count, the harness's llama-gqa (hidden 256, intermediate 512, 2 layers, 4 heads of 64, 2 KV heads,
// vocabulary 2048, untied): per layer q 256x256, k 128x256, v 128x256, o 256x256, gate 512x256, up 512x256,
// down 256x512 = 589,824 Muon elements, x 2 layers = 1,179,648; Adam: the embedding and lm_head
// 2 x 2048 x 256 = 1,048,576 and 5 norms of 256 = 1,280, so 1,049,856. Sorted by shape, largest first:
// gate0, up0, gate1, up1 (512x256), down0, down1 (256x512), then q/o, then k/v. Over 2 ranks each
// partition holds 589,824 Muon elements: rank 0's [0, 589,824) touches gate0, up0, gate1, up1 and down0
// (which it shares with rank 1), 5 x 131,072 = 655,360 elements of momentum.
#include <gtest/gtest.h>
#include <stdlib.h>

#include <filesystem>
#include <fstream>

#include "common/json_file.h"
#include "configs/check.h"
#include "hwprofiles/cluster.h"
#include "models/hf_config.h"
#include "models/model_spec.h"
#include "planner/muon.h"
#include "tests/cli_runner.h"

namespace zeroplan::planner {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;
using zeroplan::testing::run_cli;

const fs::path kDir = fs::path(ZEROPLAN_SOURCE_DIR) / "tests/deepspeed/fixtures-muon/0.19.8";

json fixture(const std::string& name) {
  return read_json_file((kDir / (name + ".json")).string(), "test data");
}

models::ModelSpec llama_gqa() {
  return models::model_from_hf_json("llama-gqa", fixture("llama-gqa_s2_n2_bf16_muon")["model"]["hf_config"]);
}

TEST(Muon, GroupsAndHoldingsByHand) {
  const MuonHoldings h = muon_holdings(llama_gqa(), 2);
  ASSERT_TRUE(h.valid);
  EXPECT_EQ(h.muon_params, 1'179'648);
  EXPECT_EQ(h.adam_params, 1'049'856);
  EXPECT_EQ(h.muon_partition, 589'824);
  EXPECT_EQ(h.adam_partition, 524'928);
  EXPECT_EQ(h.momentum_rank0, 655'360);
  EXPECT_EQ(h.matrices_rank0, 5);
  // Four ranks: 294,912 each; rank 0 touches gate0, up0 and gate1: 3 x 131,072.
  EXPECT_EQ(muon_holdings(llama_gqa(), 4).momentum_rank0, 393'216);
}

TEST(Muon, DeepSpeedsTagging) {
  // deepspeed/__init__.py set_optimizer_flags: >= 2 dimensions, and neither "embed" nor "lm_head".
  models::TensorSpec t;
  t.shape = {4096, 4096};
  t.name = "model.layers.0.self_attn.q_proj.weight";
  EXPECT_TRUE(muon_tensor(t));
  t.name = "model.embed_tokens.weight";
  EXPECT_FALSE(muon_tensor(t));
  t.name = "lm_head.weight";
  EXPECT_FALSE(muon_tensor(t));
  t.name = "model.layers.0.input_layernorm.weight";
  t.shape = {4096};
  EXPECT_FALSE(muon_tensor(t));
}

TEST(Muon, StagedCopyBesideTheMaster) {
  // DeepSpeed's _muon_pending_momentum holds (staged momentum, the Muon group's fp32 master partition):
  // 655,360 x 2 B + 589,824 x 4 B at n2 bf16; 655,360 x 4 B + 589,824 x 4 B in fp32; at n4 bf16
  // 393,216 x 2 B + 294,912 x 4 B.
  EXPECT_EQ(fixture("llama-gqa_s2_n2_bf16_muon")["buffers"]["optimizer._muon_pending_momentum"],
            1'310'720 + 2'359'296);
  EXPECT_EQ(fixture("llama-gqa_s2_n2_fp32_muon")["buffers"]["optimizer._muon_pending_momentum"],
            2'621'440 + 2'359'296);
  EXPECT_EQ(fixture("llama-gqa_s2_n4_bf16_muon")["buffers"]["optimizer._muon_pending_momentum"],
            786'432 + 1'179'648);
}

TEST(Muon, GramNewtonSchulzFlops) {
  // 4096 x 11008 (Llama-2-7B's gate_proj): n = 4096 < m = 11008, 8 n^2 m + 30 n^3.
  const double n = 4096, m = 11008;
  EXPECT_DOUBLE_EQ(gram_newton_schulz_flops(11008, 4096), 8 * n * n * m + 30 * n * n * n);
  // Square: the standard iteration, 5 x (2 n^3 for X X^T + 2 n^3 for A A + 2 n^3 for B X).
  EXPECT_DOUBLE_EQ(gram_newton_schulz_flops(4096, 4096), 5 * 6 * n * n * n);
}

configs::ReadConfig check_fixture(const std::string& name) {
  const json fx = fixture(name);
  Workload w;
  w.model = models::model_from_hf_json("llama-gqa", fx["model"]["hf_config"]);
  w.cluster = hw::parse_cluster("2xA100");
  return configs::read_deepspeed_config(fx["ds_config"], w);
}

bool has(const configs::ReadConfig& r, configs::Severity s, const std::string& text) {
  for (const auto& i : r.issues)
    if (i.severity == s && i.message.find(text) != std::string::npos) return true;
  return false;
}

TEST(Muon, CheckAgreesWithWhatDeepSpeedDid) {
  // Modelled: stage 1 and 2, as recorded.
  for (const char* n :
       {"llama-gqa_s1_n2_bf16_muon", "llama-gqa_s2_n2_bf16_muon", "llama-gqa_s2_n2_fp32_muon"}) {
    const auto r = check_fixture(n);
    EXPECT_TRUE(r.zero.muon) << n;
    EXPECT_TRUE(has(r, configs::Severity::Info, "priced as DeepSpeed 0.19.8 runs it")) << n;
  }
  // Ran, not modelled: priced as Adam, said so.
  for (const char* n : {"llama-gqa_s0_n2_bf16_muon", "llama-gqa_s3_n2_bf16_muon_rsoff",
                        "llama-gqa_s2_n2_bf16_muon_offloadopt"}) {
    const auto r = check_fixture(n);
    EXPECT_FALSE(r.zero.muon) << n;
    EXPECT_TRUE(has(r, configs::Severity::Warning, "zeroplan prices Adam's optimizer states")) << n;
  }
  // Refused by DeepSpeed (failures-0.19.8.json: "ValueError: Muon and reduce scatter cannot be used
  // together"): the config of that run, ZeRO-3 with reduce_scatter at its default.
  const json failures = read_json_file((kDir.parent_path() / "failures-0.19.8.json").string(), "test data");
  ASSERT_NE(failures["llama-gqa_s3_n2_bf16_muon"]["error_tail"].get<std::string>().find(
                "Muon and reduce scatter cannot be used together"),
            std::string::npos);
  json ds = fixture("llama-gqa_s3_n2_bf16_muon_rsoff")["ds_config"];
  ds["zero_optimization"].erase("reduce_scatter");
  Workload w;
  w.model = llama_gqa();
  w.cluster = hw::parse_cluster("2xA100");
  const auto r = configs::read_deepspeed_config(ds, w);
  EXPECT_TRUE(has(r, configs::Severity::Error, "Muon and reduce scatter cannot be used together"));
}

TEST(Muon, CliPlansEmitsAndRefuses) {
  const auto p = run_cli({"--model", "7b", "--gpus", "8xA100", "--optimizer", "muon", "--json"});
  ASSERT_EQ(p.exit_code, 0) << p.err;
  const json j = json::parse(p.out);
  EXPECT_EQ(j["recommendation"]["zero"]["optimizer"], "muon");
  const int stage = j["recommendation"]["zero_stage"].get<int>();
  EXPECT_TRUE(stage == 1 || stage == 2);
  // --emit writes the config and its siblings (launch script, accelerate YAML): a directory of its own.
  char dir[] = "/tmp/zeroplan-muon-XXXXXX";
  ASSERT_NE(mkdtemp(dir), nullptr);
  const fs::path out = fs::path(dir) / "ds_config.json";
  ASSERT_EQ(
      run_cli({"--model", "7b", "--gpus", "8xA100", "--optimizer", "muon", "--emit", out.string()}).exit_code,
      0);
  const json e = read_json_file(out.string(), "test output");
  EXPECT_EQ(e["optimizer"]["type"], "muon");
  fs::remove_all(dir);
  for (const std::vector<std::string>& args :
       {std::vector<std::string>{"--model", "7b", "--gpus", "8xA100", "--optimizer", "muon", "--stage", "3"},
        {"--model", "7b", "--gpus", "8xA100", "--optimizer", "muon", "--offload-optimizer", "cpu"},
        {"--model", "mixtral-8x7b", "--gpus", "8xA100", "--optimizer", "muon"},
        {"--params", "7e9", "--gpus", "8xA100", "--optimizer", "muon"},
        {"--model", "7b", "--gpus", "8xA100", "--optimizer", "sgd"}}) {
    const auto r = run_cli(args);
    EXPECT_EQ(r.exit_code, 2) << r.out;
    EXPECT_EQ(r.stderr_lines(), 1) << r.err;
  }
}

}  // namespace
}  // namespace zeroplan::planner
