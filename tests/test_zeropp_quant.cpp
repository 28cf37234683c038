// ZeRO++ qwZ and qgZ (planner/zeropp_quant.h; issue 28 item 1). Their quantizer kernels are CUDA-only, so
// real DeepSpeed cannot be recorded on CPU ranks for them: the checks here are hand counts from DeepSpeed
// 0.19.8's code, applied to a step real DeepSpeed was recorded running without them
// (tests/deepspeed/fixtures/0.19.8/llama-gqa_s3_n4_bf16_default.json, 4 gloo ranks).
//
// qwZ group counts, by hand from CUDAQuantizer.quantize (target group size 8000; first count g from
// ceil(n / 8000) with n % (8 g) == 0, doubled while n % (16 g) == 0 and n / g > 8000):
//   n = 2,097,152 (2^21): ceil = 263; the first g >= 263 with 8 g | 2^21 is 512; 2^21 / 512 = 4096 < 8000,
//     so 512 groups of 4096.
//   n = 128,000: ceil = 16; 128,000 % 128 == 0, so 16 groups of 8000 (not > 8000: no doubling).
//   n = 24: 1 group (24 % 8 == 0).
//   n = 12: no count exists (DeepSpeed asserts "multiple of 8"): 0.
//
// qgZ on 2 nodes x 2 GPUs (world 4, L = 2) for the harness's llama-gqa (hidden 256, intermediate 512,
// 2 layers, 4 heads of 64, 2 KV heads, vocabulary 2048, untied): the trained matrices are per layer
// q 256x256, k 128x256, v 128x256, o 256x256, gate 512x256, up 512x256, down 256x512 (589,824 elements,
// groups max(d0, d1, 4) = 256 x 4 + 512 x 3 = 2,560), x 2 layers, plus embed_tokens and lm_head 2048x256
// (524,288 each, 2,048 groups each): 16 matrices, 2,228,224 elements, 9,216 groups. Each is exchanged
// alone with four all-to-alls: intra data numel / 2 B (1,114,112 B in all), intra scales 4 G B
// (36,864 B), inter data numel / 4 B (557,056 B), inter scales 4 G / 2 B (18,432 B). The 5 norms (256
// elements, 1-D) are reduce-scattered alone: 256 elements (a multiple of 4, no padding) x 2 B = 512 B each.
#include <gtest/gtest.h>
#include <stdlib.h>

#include <filesystem>
#include <string>

#include "common/json_file.h"
#include "hwprofiles/cluster.h"
#include "models/hf_config.h"
#include "planner/ds_runtime_collectives.h"
#include "planner/model_stats.h"
#include "planner/zeropp_quant.h"
#include "tests/cli_runner.h"

namespace zeroplan::planner {
namespace {

using nlohmann::json;
using zeroplan::testing::run_cli;

TEST(ZeroppQuant, QwzGroupCountsByHand) {
  EXPECT_EQ(qwz_groups(2097152), 512);
  EXPECT_EQ(qwz_groups(128000), 16);
  EXPECT_EQ(qwz_groups(24), 1);
  EXPECT_EQ(qwz_groups(12), 0);
}

TEST(ZeroppQuant, QgzExchangeByHand) {
  // A 4096 x 4096 matrix on 2 nodes x 8 GPUs: G = 4096; int4 halves; the node's reduction leaves 1/8.
  const QgzExchange e = qgz_exchange(16777216, 4096, 16, 8);
  EXPECT_TRUE(e.quantized);
  EXPECT_EQ(e.intra_data, 8388608);
  EXPECT_EQ(e.intra_scales, 16384);
  EXPECT_EQ(e.inter_data, 1048576);
  EXPECT_EQ(e.inter_scales, 2048);
  EXPECT_FALSE(qgz_exchange(4096, 0, 16, 8).quantized);  // 1-D
  EXPECT_FALSE(qgz_exchange(100, 10, 16, 8).quantized);  // 100 % 32 != 0
}

json recorded() {
  return read_json_file(
      std::string(ZEROPLAN_SOURCE_DIR) + "/tests/deepspeed/fixtures/0.19.8/llama-gqa_s3_n4_bf16_default.json",
      "test data");
}

Workload llama_gqa(const std::string& gpus) {
  Workload w;
  w.model = models::model_from_hf_json("llama-gqa", recorded()["model"]["hf_config"]);
  w.cluster = hw::parse_cluster(gpus);
  w.train.seq_len = 64;
  return w;
}

// qwZ: every parameter gather DeepSpeed was recorded issuing in the forward and backward becomes the same
// partition in int8 (half the bf16 bytes) and its fp32 scales; the step's persistent-parameter gathers
// (Init._allgather_params_coalesced, which quantizes only frozen int8 parameters) keep 16 bits.
TEST(ZeroppQuant, QwzHalvesEveryRecordedFetch) {
  const json fx = recorded();
  Workload w = llama_gqa("4xA100");
  ZeroConfig z = ZeroConfig::deepspeed_defaults(3);
  z.quantized_weights = true;
  const std::vector<CollectiveCall> calls = deepspeed_collectives(w, compute_model_stats(w), z);
  std::vector<int64_t> expected_data, got_data, got_scales;
  int step_gathers = 0, got_step = 0;
  for (const json& c : fx["collectives"]) {
    if (c["op"] != "all_gather") continue;
    if (c["phase"] == "step") {
      ++step_gathers;
      continue;
    }
    expected_data.push_back(c["bytes"].get<int64_t>() / 2);  // bf16 elements -> int8 bytes
  }
  for (const CollectiveCall& c : calls) {
    if (c.kind != CollectiveKind::AllGather) continue;
    if (c.phase == kStep) {
      EXPECT_EQ(c.elem_bytes, 2);
      ++got_step;
      continue;
    }
    if (c.micro_step != 0 || c.phase != kForward) continue;  // the recording's one forward
    (c.elem_bytes == 1 ? got_data : got_scales).push_back(c.bytes);
  }
  EXPECT_EQ(got_data, expected_data);
  ASSERT_EQ(got_scales.size(), got_data.size());
  for (size_t i = 0; i < got_data.size(); ++i) EXPECT_EQ(got_scales[i], 4 * qwz_groups(got_data[i]));
  EXPECT_EQ(got_step, step_gathers);
}

TEST(ZeroppQuant, QgzCallsByHand) {
  Workload w = llama_gqa("2x2xA100");
  ZeroConfig z = ZeroConfig::deepspeed_defaults(3);
  z.quantized_gradients = true;
  int64_t a2a = 0, rs = 0, intra_data = 0, intra_scales = 0, inter_data = 0, inter_scales = 0;
  for (const CollectiveCall& c : deepspeed_collectives(w, compute_model_stats(w), z)) {
    if (c.phase != kBackward || c.micro_step != 0) continue;
    if (c.kind == CollectiveKind::ReduceScatter) {
      ++rs;
      EXPECT_EQ(c.bytes, 512);
    }
    if (c.kind != CollectiveKind::AllToAll) continue;
    ++a2a;
    const bool intra = std::string(c.caller) == kQgzIntraCaller;
    EXPECT_EQ(c.group_size, 2);
    // The group the time model prices it on: the node's (local_i) or one rank per node (global_j).
    EXPECT_EQ(c.group, intra ? CallGroup::kQgzNode : CallGroup::kQgzAcross);
    (intra ? (c.elem_bytes == 1 ? intra_data : intra_scales)
           : (c.elem_bytes == 1 ? inter_data : inter_scales)) += c.bytes;
  }
  EXPECT_EQ(a2a, 16 * 4);
  EXPECT_EQ(rs, 5);
  EXPECT_EQ(intra_data, 1114112);
  EXPECT_EQ(intra_scales, 36864);
  EXPECT_EQ(inter_data, 557056);
  EXPECT_EQ(inter_scales, 18432);
  // On one node DeepSpeed keeps the reduce-scatter (num_nodes > 1 only): no all-to-all.
  w = llama_gqa("4xA100");
  for (const CollectiveCall& c : deepspeed_collectives(w, compute_model_stats(w), z))
    EXPECT_NE(c.kind, CollectiveKind::AllToAll);
}

// The CLI: flags need stage 3, qgZ is refused beside AutoEP as DeepSpeed refuses it, the plan's JSON says
// what is in force, and --emit writes the keys.
TEST(ZeroppQuant, Cli) {
  auto r = run_cli({"--model", "7b", "--gpus", "2x8xA100", "--stage", "2", "--qwz", "on"});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("--qwz on needs ZeRO stage 3"), std::string::npos) << r.err;
  r = run_cli({"--model", "7b", "--gpus", "2x8xA100", "--qgz", "maybe"});
  EXPECT_EQ(r.exit_code, 2);
  r = run_cli(
      {"--model", "7b", "--gpus", "2x8xA100", "--stage", "3", "--qwz", "on", "--qgz", "on", "--json"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const json j = json::parse(r.out);
  EXPECT_EQ(j["recommendation"]["qwz"], true);
  EXPECT_EQ(j["recommendation"]["qgz"], true);
  char dir[] = "/tmp/zeroplan-qz-XXXXXX";
  ASSERT_NE(mkdtemp(dir), nullptr);
  const std::filesystem::path out = std::filesystem::path(dir) / "ds_config.json";
  ASSERT_EQ(
      run_cli({"--model", "7b", "--gpus", "2x8xA100", "--stage", "3", "--qwz", "on", "--emit", out.string()})
          .exit_code,
      0);
  const json e = read_json_file(out.string(), "test output");
  EXPECT_EQ(e["zero_optimization"]["zero_quantized_weights"], true);
  EXPECT_FALSE(e["zero_optimization"].contains("zero_quantized_gradients"));
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace zeroplan::planner
