// ZeRO-3 with HF MoE as DeepSpeed runs it (issue 14 item 4):
//  - models::ModelSpec::runtime_inventory() against transformers 5.24's own model.named_parameters()
//    (tests/data/models/runtime_moe_params.json, written by scripts/runtime_moe_params.py on the meta
//    device): the fused experts' names and shapes, the MoE block paths and their classes;
//  - zero_optimization.leaf_module read as DeepSpeed applies it (utils/z3_leaf_module.py);
//  - moe_leaf_costs on a recorded fixture: the leaf and non-leaf gather counts DeepSpeed issued
//    (tests/deepspeed/fixtures/0.19.8/qwen3_moe_s3_n2_bf16_persist0_prefetch0{,_leafoff}.json).
#include <gtest/gtest.h>

#include <filesystem>
#include <map>
#include <nlohmann/json.hpp>

#include "common/errors.h"
#include "common/json_file.h"
#include "configs/check.h"
#include "hwprofiles/cluster.h"
#include "models/hf_config.h"
#include "planner/ds_runtime_collectives.h"
#include "planner/memory_model.h"
#include "planner/model_stats.h"
#include "planner/zero3_leaf.h"

namespace zeroplan::planner {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

TEST(RuntimeInventory, MatchesTransformersNamedParameters) {
  const json d = read_json_file(
      (fs::path(ZEROPLAN_SOURCE_DIR) / "tests/data/models/runtime_moe_params.json").string(), "test data");
  ASSERT_FALSE(d["models"].empty());
  for (const auto& [type, e] : d["models"].items()) {
    const models::ModelSpec m = models::model_from_hf_json(type, e["config"]);
    std::map<std::string, std::vector<int64_t>> want;  // name -> shape
    std::vector<std::string> want_order;
    for (const auto& p : e["parameters"]) {
      want[p[0].get<std::string>()] = p[1].get<std::vector<int64_t>>();
      want_order.push_back(p[0].get<std::string>());
    }
    std::map<std::string, std::vector<int64_t>> got;
    std::map<std::string, std::string> blocks;
    for (const auto& layer : m.runtime_inventory()) {
      for (const auto& t : layer.tensors) got[t.name] = t.shape;
      if (!layer.moe_block.empty()) {
        blocks[layer.moe_block] = layer.moe_block_class;
        // Within the block, model.named_parameters()' order (DeepSpeed's ds_id order).
        std::vector<std::string> mine, theirs;
        for (const auto& t : layer.tensors)
          if (t.name.rfind(layer.moe_block + ".", 0) == 0) mine.push_back(t.name);
        for (const auto& n : want_order)
          if (n.rfind(layer.moe_block + ".", 0) == 0) theirs.push_back(n);
        EXPECT_EQ(mine, theirs) << type << " " << layer.moe_block;
      }
    }
    EXPECT_EQ(got, want) << type;
    std::map<std::string, std::string> want_blocks;
    for (const auto& [path, cls] : e["moe_blocks"].items()) want_blocks[path] = cls.get<std::string>();
    EXPECT_EQ(blocks, want_blocks) << type;
    // The checkpoint (Hub) inventory keeps the same count.
    int64_t rt = 0;
    for (const auto& layer : m.runtime_inventory()) rt += layer.numel();
    EXPECT_EQ(rt, m.num_parameters()) << type;
  }
}

// leaf_module_config.py / z3_leaf_module.py apply_zero_leaf_module_config, by hand.
TEST(LeafModuleConfig, AsDeepSpeedAppliesIt) {
  const std::string qwen3 = "transformers.models.qwen3_moe.modeling_qwen3_moe.Qwen3MoeSparseMoeBlock";
  const std::string ds3 = "transformers.models.deepseek_v3.modeling_deepseek_v3.DeepseekV3MoE";
  const std::vector<std::string> paths = {"model.layers.0.mlp", "model.layers.1.mlp"};
  const auto V19 = DeepSpeedVersion::V0_19_8;
  using Strs = std::vector<std::string>;
  // Absent `classes`: the defaults (Qwen3-MoE is one, DeepSeek-V3 is not).
  EXPECT_EQ(moe_leaf_from_config(std::nullopt, {}, {}, qwen3, paths, V19), MoeLeaf::On);
  EXPECT_EQ(moe_leaf_from_config(std::nullopt, {}, {}, ds3, paths, V19), MoeLeaf::Off);
  // `classes: []` removes the defaults.
  EXPECT_EQ(moe_leaf_from_config(Strs{}, {}, {}, qwen3, paths, V19), MoeLeaf::Off);
  // Short or fully qualified class names; names; suffixes.
  EXPECT_EQ(moe_leaf_from_config(Strs{"DeepseekV3MoE"}, {}, {}, ds3, paths, V19), MoeLeaf::On);
  EXPECT_EQ(moe_leaf_from_config(Strs{ds3}, {}, {}, ds3, paths, V19), MoeLeaf::On);
  EXPECT_EQ(moe_leaf_from_config(Strs{}, Strs{"model.layers.1.mlp"}, {}, qwen3, paths, V19), MoeLeaf::On);
  EXPECT_EQ(moe_leaf_from_config(Strs{}, {}, Strs{"mlp"}, qwen3, paths, V19), MoeLeaf::On);
  // No default leaves before leaf_module_config existed (0.16.9).
  EXPECT_FALSE(moe_block_is_leaf(qwen3, MoeLeaf::Auto, DeepSpeedVersion::V0_16_9));
  EXPECT_TRUE(moe_block_is_leaf(qwen3, MoeLeaf::Auto, DeepSpeedVersion::V0_18_9));
  EXPECT_FALSE(moe_block_is_leaf(qwen3, MoeLeaf::Off, V19));
  EXPECT_TRUE(moe_block_is_leaf(ds3, MoeLeaf::On, V19));
  EXPECT_EQ(parse_moe_leaf("off"), MoeLeaf::Off);
  // What emit writes: nothing when the default does it; the defaults minus / plus the class otherwise.
  EXPECT_FALSE(leaf_module_classes_for(qwen3, MoeLeaf::On, V19));
  EXPECT_EQ(leaf_module_classes_for(qwen3, MoeLeaf::Off, V19)->size(), 2u);
  EXPECT_EQ(leaf_module_classes_for(ds3, MoeLeaf::On, V19)->back(), ds3);
  EXPECT_EQ(
      moe_leaf_from_config(*leaf_module_classes_for(qwen3, MoeLeaf::Off, V19), {}, {}, qwen3, paths, V19),
      MoeLeaf::Off);
  EXPECT_THROW(parse_moe_leaf("yes"), UserError);
}

// The recorded per-module fetches (stage3_param_persistence_threshold 0, prefetch 0): with the block
// a leaf DeepSpeed gathered 21 times in forward (per layer: input norm, q, q_norm, k, k_norm, v, o,
// post norm, the whole block = 9, x 2 layers, + embedding, final norm, lm_head), without it 23 (the
// router and the experts apart). moe_leaf_costs must give both from one plan.
TEST(MoeLeafCosts, BothWaysAsRecorded) {
  const fs::path dir = fs::path(ZEROPLAN_SOURCE_DIR) / "tests/deepspeed/fixtures/0.19.8";
  int64_t recorded[2] = {0, 0};
  const char* names[2] = {"qwen3_moe_s3_n2_bf16_persist0_prefetch0.json",
                          "qwen3_moe_s3_n2_bf16_persist0_prefetch0_leafoff.json"};
  for (int i = 0; i < 2; ++i) {
    if (!fs::exists(dir / names[i])) GTEST_SKIP() << "fixture not recorded: " << names[i];
    const json f = read_json_file((dir / names[i]).string(), "test data");
    for (const auto& c : f["collectives"]) recorded[i] += c["phase"] == "forward" && c["op"] == "all_gather";
  }
  EXPECT_EQ(recorded[0], 21);
  EXPECT_EQ(recorded[1], 23);
  const json fx = read_json_file((dir / names[0]).string(), "test data");
  Workload w;
  w.model = models::model_from_hf_json("fixture", fx["model"]["hf_config"]);
  w.cluster.nodes = 1;
  w.cluster.gpus_per_node = 2;
  w.cluster.gpu.name = "cpu";
  w.cluster.gpu.memory_bytes = int64_t{1} << 50;
  w.train.seq_len = 64;
  w.train.micro_batch = 2;
  w.train.runtime = Runtime::Cpu;
  ZeroConfig z = ZeroConfig::deepspeed_defaults(3);
  z.micro_batch = 2;
  z.param_persistence_threshold = 0;
  z.prefetch_bucket_size = 0;
  const ModelStats s = compute_model_stats(w);
  const MoeLeafCosts c = moe_leaf_costs(w, s, z);
  ASSERT_TRUE(c.applies);
  EXPECT_TRUE(c.auto_is_leaf);
  // Forward gathers both ways; a leaf gathers the whole block (router + experts) in one call,
  // 394,240 B per rank recorded, not a leaf the experts module alone (393,216 B) and the router apart.
  auto forward_gathers = [&](MoeLeaf leaf, int64_t& count, bool& whole_block) {
    ZeroConfig zz = z;
    zz.moe_leaf = leaf;
    count = 0;
    whole_block = false;
    for (const auto& call : deepspeed_collectives(w, s, zz))
      if (call.phase == kForward && call.kind == CollectiveKind::AllGather) {
        ++count;
        whole_block |= call.bytes == 394240;
      }
  };
  int64_t fwd_leaf = 0, fwd_not = 0;
  bool block_leaf = false, block_not = false;
  forward_gathers(MoeLeaf::On, fwd_leaf, block_leaf);
  forward_gathers(MoeLeaf::Off, fwd_not, block_not);
  EXPECT_EQ(fwd_leaf, recorded[0]);
  EXPECT_EQ(fwd_not, recorded[1]);
  EXPECT_TRUE(block_leaf);
  EXPECT_FALSE(block_not);
  EXPECT_LT(c.leaf.gather_calls, c.not_leaf.gather_calls);
  EXPECT_EQ(c.leaf.gather_bytes, c.not_leaf.gather_bytes);  // the same parameters, fewer calls
  EXPECT_GE(c.leaf.peak_bytes, c.not_leaf.peak_bytes);
}

}  // namespace
}  // namespace zeroplan::planner

namespace zeroplan::planner {
namespace {

// At scale, stage 3 with DeepSpeed's defaults, one 4k-token sample per GPU: Mixtral-8x7B and
// Qwen3-30B-A3B on 8 x H100 (no shared experts: router + one fused experts module per block, so a
// leaf only adds the router to the experts' fetch) and DeepSeek-V3 on 16 x 8 x H100 (shared experts:
// without a leaf the router, the experts and the three shared projections are fetched one by one).
// Prints both sides; a leaf never needs more gather calls, and its fetch (the whole block) is never
// smaller, so its peak is not lower.
TEST(MoeLeafCosts, AtScale) {
  const std::pair<const char*, const char*> runs[] = {
      {"mixtral-8x7b", "8xH100"}, {"qwen3-30b-a3b", "8xH100"}, {"deepseek-v3", "16x8xH100"}};
  for (const auto& [model, gpus] : runs) {
    Workload w;
    w.model = models::load_model(model);
    w.cluster = hw::parse_cluster(gpus);
    w.train.seq_len = 4096;
    w.train.micro_batch = 1;
    const ZeroConfig z = ZeroConfig::deepspeed_defaults(3);
    const ModelStats s = compute_model_stats(w);
    const MoeLeafCosts c = moe_leaf_costs(w, s, z);
    ASSERT_TRUE(c.applies) << model;
    for (const auto* side : {&c.leaf, &c.not_leaf})
      std::printf(
          "%s %s, %s: %lld gathers, %.3f GB/rank, largest %.1f MB, %lld reduce-scatters, comm %.3f s, "
          "peak %.2f GiB\n",
          model, gpus, side == &c.leaf ? "leaf" : "not leaf", static_cast<long long>(side->gather_calls),
          static_cast<double>(side->gather_bytes) / 1e9,
          static_cast<double>(side->largest_gather_bytes) / 1e6, static_cast<long long>(side->reduce_calls),
          side->comm_time_s, static_cast<double>(side->peak_bytes) / (1 << 30));
    EXPECT_LE(c.leaf.gather_calls, c.not_leaf.gather_calls) << model;
    // (Bytes may differ a little: which parameters a prefetch picks up and which stay gathered for the
    // backward depends on the trace's module boundaries.)
    EXPECT_GE(c.leaf.peak_bytes, c.not_leaf.peak_bytes) << model;
  }
  // DeepSpeed's default: Mixtral's and Qwen3-MoE's blocks are leaves, DeepSeek-V3's is not.
}

}  // namespace
}  // namespace zeroplan::planner
