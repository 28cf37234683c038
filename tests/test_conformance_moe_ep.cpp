// Expert parallelism (DeepSpeed 0.19.8 AutoEP, planner/expert_parallel.h) against real DeepSpeed: the
// fixtures in tests/deepspeed/fixtures-autoep/0.19.8 were recorded by tests/deepspeed/harness.py (cases
// "*_autoep2" in cases.py: tiny qwen3_moe and mixtral, 4 experts top-2, autoep_size 2, ZeRO 1-3, N = 2
// and 4, micro-batch 2 x seq 64, bf16) on CPU/gloo, with the transformers shim the harness documents.
// Expected values are DeepSpeed's recorded behaviour; the hand counts are written out in each test.
#include <gtest/gtest.h>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "common/json_file.h"
#include "configs/check.h"
#include "hwprofiles/cluster.h"
#include "models/hf_config.h"
#include "models/model_spec.h"
#include "planner/comm_model.h"
#include "planner/ds_runtime_collectives.h"
#include "planner/expert_parallel.h"
#include "planner/memory_model.h"
#include "planner/model_stats.h"
#include "planner/search.h"
#include "planner/time_model.h"

namespace zeroplan::planner {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

const fs::path kDir = fs::path(ZEROPLAN_SOURCE_DIR) / "tests/deepspeed/fixtures-autoep/0.19.8";

std::vector<std::string> fixtures() {
  std::vector<std::string> out;
  if (!fs::exists(kDir)) return out;
  for (const auto& e : fs::directory_iterator(kDir))
    if (e.path().extension() == ".json") out.push_back(e.path().filename().string());
  std::sort(out.begin(), out.end());
  return out;
}

struct Case {
  Workload w;
  ZeroConfig z;
};

// The fixture's run as the planner's input (as tests/test_conformance.cpp builds it), the expert-parallel
// size read from the ds_config by configs::read_deepspeed_config.
Case inputs(const json& fx) {
  Case c;
  c.w.model = models::model_from_hf_json("fixture hf_config", fx["model"]["hf_config"]);
  const int n = fx["world_size"].get<int>();
  c.w.cluster.nodes = 1;
  c.w.cluster.gpus_per_node = n;
  c.w.cluster.gpu.name = "cpu";
  c.w.cluster.gpu.memory_bytes = int64_t{1} << 50;
  c.w.train.seq_len = fx["seq_len"].get<int64_t>();
  c.w.train.micro_batch = fx["micro_batch"].get<int64_t>();
  c.w.train.grad_accum = fx["grad_accum"].get<int64_t>();
  c.w.train.checkpointing = Checkpointing::None;
  c.w.train.runtime = Runtime::Cpu;
  const configs::ReadConfig r = configs::read_deepspeed_config(fx["ds_config"], c.w);
  c.w = configs::workload_for_config(c.w, r);
  c.z = r.zero;
  c.z.checkpointing = Checkpointing::None;
  return c;
}

class AutoEpConformance : public ::testing::TestWithParam<std::string> {};

TEST_P(AutoEpConformance, AgreesWithDeepSpeed) {
  const json fx = read_json_file((kDir / GetParam()).string(), "test data");
  const Case c = inputs(fx);
  ASSERT_EQ(c.z.ep_size, fx["ds_config"]["expert_parallel"]["autoep_size"].get<int>())
      << "the ds_config's expert_parallel section reaches the plan";
  const ModelStats s = compute_model_stats(c.w);
  ASSERT_EQ(s.mem.total_params, fx["model"]["parameters"].get<int64_t>());
  const ExpertParallelCosts e = expert_parallel_costs(c.w, s, c.z);
  const MemoryBreakdown m = estimate_memory(c.w, s, c.z);

  // Model states after the step (host + device: one process memory on CPU).
  const json& ms = fx["model_states"];
  EXPECT_EQ(m.after_step_bytes(Category::Parameters, true), ms["parameters"].get<int64_t>()) << GetParam();
  EXPECT_EQ(m.after_step_bytes(Category::Gradients, true), ms["gradients"].get<int64_t>()) << GetParam();
  EXPECT_EQ(m.after_step_bytes(Category::OptimizerStates, true), ms["optimizer_states"].get<int64_t>())
      << GetParam();

  // Peak (the harness's overall peak of live CPU-allocator bytes), as tests/test_conformance.cpp checks it.
  const int64_t peak = fx["peak_bytes"]["overall"].get<int64_t>();
  const double peak_err = std::abs(static_cast<double>(m.peak - peak)) / static_cast<double>(peak);
  std::printf("%s: peak DeepSpeed %lld planner %lld (%.2f%%)\n", GetParam().c_str(),
              static_cast<long long>(peak), static_cast<long long>(m.peak), peak_err * 100);
  EXPECT_LE(peak_err, 0.03) << GetParam();
  // Saved activations: AutoEP's layer saves other tensors than the HF experts loop the planner's activation
  // model follows (the planner is 1-4% high on these 12 recordings); checked within 5%.
  const int64_t act = m.saved_activation_bytes();
  std::printf("%s: saved activations DeepSpeed %lld planner %lld\n", GetParam().c_str(),
              static_cast<long long>(fx["saved_activations"]["total"].get<int64_t>()),
              static_cast<long long>(act));
  const auto saved = static_cast<double>(fx["saved_activations"]["total"].get<int64_t>());
  EXPECT_NEAR(static_cast<double>(act) / saved, 1.0, 0.05) << GetParam();

  // ZeRO's gradient reduction moves each rank's local parameters (dense + its experts), bf16:
  // stage 1/2 allreduce_bucket (a dense and an expert bucket), stage 3 reduce-scatter input.
  int64_t reduced = 0;
  std::vector<std::string> a2a_ds;
  int64_t combine_bytes = 0, forward_a2a = 0;
  for (const auto& x : fx["collectives"]) {
    const std::string op = x["op"], ph = x["phase"], caller = x.value("caller", "");
    if (ph == "backward" && (op == "all_reduce" || op == "reduce_scatter"))
      reduced += x["bytes"].get<int64_t>();
    if (op != "all_to_all") continue;
    a2a_ds.push_back(ph + ":" + caller);
    if (ph != "forward") continue;
    // Per MoE layer: the count exchange, the dispatch (T*k rows), the combine (the rows this rank received).
    const int64_t slot = forward_a2a++ % 3;
    const int64_t bytes = x["bytes"].get<int64_t>();
    if (slot == 0) {
      EXPECT_EQ(bytes, e.count_bytes) << GetParam() << ": E int32 counts";
    }
    if (slot == 1) {
      EXPECT_EQ(bytes, e.a2a_bytes) << GetParam() << ": dispatch = micro*seq*top_k*hidden*2";
    }
    if (slot == 2) combine_bytes += bytes;
  }
  EXPECT_EQ(reduced, 2 * e.local_params) << GetParam();

  // The planner's all-to-all calls: same order, phases and callers.
  std::vector<std::string> a2a_zp;
  for (const CollectiveCall& k : deepspeed_collectives(c.w, s, c.z))
    if (k.kind == CollectiveKind::AllToAll)
      a2a_zp.push_back(std::string(k.phase == kForward ? "forward" : "backward") + ":" + k.caller);
  EXPECT_EQ(a2a_zp, a2a_ds) << GetParam();
  // The combine sends what routing delivered to this rank: balanced on average, not per call. The
  // recorded rank-0 totals are within 20% of T*k rows per layer (routing of a randomly initialised router).
  const double balanced = static_cast<double>(e.a2a_bytes * e.moe_layers);
  EXPECT_NEAR(static_cast<double>(combine_bytes) / balanced, 1.0, 0.20) << GetParam();
}

std::string name_of(const ::testing::TestParamInfo<std::string>& info) {
  std::string n = info.param.substr(0, info.param.size() - 5);
  for (char& ch : n)
    if (!std::isalnum(static_cast<unsigned char>(ch))) ch = '_';
  return n;
}

INSTANTIATE_TEST_SUITE_P(Fixtures, AutoEpConformance, ::testing::ValuesIn(fixtures()), name_of);

TEST(AutoEpFixtures, AreFound) {
  EXPECT_EQ(fixtures().size(), 12u) << kDir;
}

// Hand counts on the recorded qwen3_moe (hidden 256, 2 MoE layers, 4 experts of width 128, top-2),
// micro-batch 2 x seq 64, ep 2, N 2:
//   routed experts = 2 layers x 4 experts x 3 x 256 x 128 = 786,432 parameters;
//   local = 2,231,808 (transformers' count) - 786,432 + 786,432 / 2 = 1,838,592 -> 3,677,184 bf16 bytes
//   (= the recorded model_states.parameters at stages 1 and 2);
//   one dispatch = 2 x 64 tokens x 2 experts x 256 x 2 bytes = 131,072 bytes;
//   calls per step = 2 layers x (1 count + 2 forward + 2 backward) = 10 (8 data + 2 count exchanges).
TEST(ExpertParallel, HandCountsOnTinyQwen3Moe) {
  const json fx = read_json_file((kDir / "qwen3_moe_s2_n2_bf16_autoep2.json").string(), "test data");
  const Case c = inputs(fx);
  const ModelStats s = compute_model_stats(c.w);
  EXPECT_EQ(routed_expert_parameters(c.w.model), 786432);
  const ExpertParallelCosts e = expert_parallel_costs(c.w, s, c.z);
  EXPECT_EQ(e.local_params, 1838592);
  EXPECT_EQ(e.a2a_bytes, 131072);
  EXPECT_EQ(e.a2a_calls_per_step, 8);
  EXPECT_EQ(e.count_calls_per_step, 2);
  EXPECT_EQ(e.count_bytes, 16);
}

// deepspeed/moe/sharded_moe.py _capacity: ceil(tokens / E * capacity_factor), at least min_capacity;
// top2gating passes capacity_factor * 2, topkgating capacity_factor * k. Hand counts:
//   4096 tokens, 8 experts, top-1, factor 1.0: ceil(512) = 512;
//   4096 tokens, 8 experts, top-2, factor 1.25: ceil(4096 / 8 * 2.5) = 1280;
//   100 tokens, 64 experts, top-8, factor 1.0: ceil(1.5625 * 8) = 13;
//   10 tokens, 64 experts, top-1, factor 1.0, min_capacity 4: ceil(0.156) = 1 -> 4.
TEST(ExpertParallel, NativeMoeCapacityMatchesShardedMoe) {
  EXPECT_EQ(native_moe_capacity(4096, 8, 1, 1.0, 4), 512);
  EXPECT_EQ(native_moe_capacity(4096, 8, 2, 1.25, 4), 1280);
  EXPECT_EQ(native_moe_capacity(100, 64, 8, 1.0, 4), 13);
  EXPECT_EQ(native_moe_capacity(10, 64, 1, 1.0, 4), 4);
}

Workload zoo(const std::string& model, int gpus) {
  Workload w;
  w.model = models::load_model(model);
  w.cluster = hw::parse_cluster(std::to_string(gpus) + "xH100");
  return w;
}

// Refusals (one sentence each) and the sizes the search tries.
TEST(ExpertParallel, RefusesWhatDeepSpeedCannotRun) {
  Workload w = zoo("qwen3-30b-a3b", 8);  // 128 experts
  EXPECT_EQ(expert_parallel_refusal(w, 1), "");
  EXPECT_EQ(expert_parallel_refusal(w, 8), "");
  EXPECT_NE(expert_parallel_refusal(w, 3).find("must divide the 8 GPUs"), std::string::npos);
  EXPECT_EQ(expert_parallel_candidates(w), (std::vector<int>{2, 4, 8}));
  Workload dense = zoo("7b", 8);
  EXPECT_NE(expert_parallel_refusal(dense, 2).find("mixture-of-experts"), std::string::npos);
  EXPECT_TRUE(expert_parallel_candidates(dense).empty());
  Workload oss = zoo("gpt-oss-20b", 8);  // model_type gpt_oss: no AutoEP preset in 0.19.8
  EXPECT_NE(expert_parallel_refusal(oss, 2).find("no preset"), std::string::npos);
  Workload lora = w;
  lora.train.method = Method::LoRA;
  EXPECT_NE(expert_parallel_refusal(lora, 2).find("LoRA"), std::string::npos);
  Workload old = w;
  old.train.deepspeed_version = DeepSpeedVersion::V0_16_9;
  EXPECT_NE(expert_parallel_refusal(old, 2).find("0.19.8"), std::string::npos);
}

// All-to-all time on the bus model: nccl-tests' alltoall bus factor (n-1)/n. 8 ranks, 8 MB:
// bus bytes per rank = 7 x 8,000,000 / 8 = 7,000,000.
TEST(ExpertParallel, AllToAllBusFactor) {
  EXPECT_DOUBLE_EQ(bus_factor(CollectiveKind::AllToAll, 8), 7.0 / 8.0);
  EXPECT_EQ(bus_bytes_per_rank(CollectiveKind::AllToAll, 8, 8'000'000), 7'000'000);
  EXPECT_STREQ(collective_name(CollectiveKind::AllToAll), "all_to_all");
}

// The search compares HF experts under ZeRO with AutoEP for a MoE model and says so.
TEST(ExpertParallel, SearchComparesAndExplains) {
  Workload w = zoo("qwen3-30b-a3b", 8);
  const SearchResult r = search(w, SearchOptions{});
  ASSERT_TRUE(r.best_with_ep.has_value());
  ASSERT_TRUE(r.best_without_ep.has_value());
  EXPECT_GT(r.best_with_ep->zero.ep_size, 1);
  EXPECT_EQ(r.best_without_ep->zero.ep_size, 1);
  bool said = false;
  for (const auto& reason : r.reasons) said = said || reason.rfind("Expert parallelism: with ep", 0) == 0;
  EXPECT_TRUE(said);
  // --ep 1 fixes the HF path: no plan uses AutoEP.
  SearchOptions one;
  one.ep = 1;
  const SearchResult r1 = search(w, one);
  for (const Plan& p : r1.best_per_stage) EXPECT_EQ(p.zero.ep_size, 1);
}

}  // namespace
}  // namespace zeroplan::planner
