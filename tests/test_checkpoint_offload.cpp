// Checkpoint offload (issue 24 item 4, issue 27 item 1): --checkpoint-offload cpu keeps the fully
// checkpointed layers' inputs in host memory. Expected values are hand counts from DeepSpeed's code
// (runtime/activation_checkpointing/offload_activations.py _ActivationOffloadEngine, PR #8282, from
// 0.19.6; checkpointing.py's blocking `.cpu()` path before it and with partition_activations) for
// Llama-3.1-8B (config.json: 32 layers, hidden 4096), bf16, one sequence of 8,192 tokens:
//  - one layer input: 2 B x 8,192 x 4,096 = 67,108,864 B;
//  - engine (keep_last_count 1, max_fwd_stash_count 2): at the forward's end the GPU holds the last
//    layer's input (kept) and the one before it (stash): 2 x 67,108,864 = 134,217,728 B; every input but
//    the kept one has a pinned host copy: 31 x 67,108,864 = 2,080,374,784 B; the backward copies back
//    all but the kept and stashed ones: 30 H2D copies per micro-step, each waited for;
//  - blocking copies: one input on the GPU (the restored one), 32 x 67,108,864 = 2,147,483,648 B of
//    pageable host memory, 32 D2H + 32 H2D copies per micro-step, all waited for.
// Copy rates: hwprofiles/gpus/H100.json host_pinned_GBps 52.3, host_pageable_GBps 26.1.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "cli_runner.h"
#include "hwprofiles/cluster.h"
#include "models/model_spec.h"
#include "planner/checkpoint_offload.h"
#include "planner/memory_model.h"
#include "planner/model_stats.h"
#include "planner/time_model.h"

namespace zeroplan::planner {
namespace {

using nlohmann::json;
using zeroplan::testing::run_cli;

using zeroplan::testing::ScratchDir;

constexpr int64_t kLayerInput = int64_t{2} * 8192 * 4096;  // 67,108,864 B (header)
constexpr double kPinnedBps = 52.3e9;                      // H100.json host_pinned_GBps
constexpr double kPageableBps = 26.1e9;                    // H100.json host_pageable_GBps

struct Result {
  MemoryBreakdown mem;
  StepTime time;
};

Workload llama8b(CheckpointOffload off, DeepSpeedVersion v, bool deepspeed_checkpointing) {
  Workload w;
  w.model = models::load_model("llama-3.1-8b");
  w.cluster = hw::parse_cluster("8xH100");
  w.train.seq_len = 8192;
  w.train.checkpoint_offload = off;
  w.train.deepspeed_version = v;
  w.train.deepspeed_checkpointing = deepspeed_checkpointing;
  w.train.checkpoint_reentrant = deepspeed_checkpointing;
  return w;
}

Result plan(const Workload& w) {
  ZeroConfig z = ZeroConfig::deepspeed_defaults(3);
  z.micro_batch = 1;
  z.grad_accum = 1;
  z.checkpointing = Checkpointing::Full;
  const ModelStats ms = compute_model_stats(w);
  return {estimate_memory(w, ms, z), estimate_time(w, ms, z)};
}

int64_t gpu_bytes(const MemoryBreakdown& m, const std::string& prefix) {
  int64_t b = 0;
  for (int i = 0; i < m.num_gpu; ++i)
    if (std::string(m.gpu[static_cast<size_t>(i)].name).rfind(prefix, 0) == 0)
      b += m.gpu[static_cast<size_t>(i)].bytes;
  return b;
}

const Buffer* host_buffer(const MemoryBreakdown& m, const std::string& name) {
  for (int i = 0; i < m.num_host; ++i)
    if (name == m.host[static_cast<size_t>(i)].name) return &m.host[static_cast<size_t>(i)];
  return nullptr;
}

TEST(CheckpointOffload, EngineKeepsTwoInputsOnTheGpuAndPinsTheRest) {
  const Result base = plan(llama8b(CheckpointOffload::None, DeepSpeedVersion::V0_19_8, false));
  const Result off = plan(llama8b(CheckpointOffload::Cpu, DeepSpeedVersion::V0_19_8, false));
  EXPECT_EQ(gpu_bytes(base.mem, "layer inputs (checkpoints"), 32 * kLayerInput);
  EXPECT_EQ(gpu_bytes(off.mem, "layer inputs (checkpoints"), 2 * kLayerInput);
  const Buffer* host = host_buffer(off.mem, "offloaded layer inputs (checkpoints)");
  ASSERT_NE(host, nullptr);
  EXPECT_EQ(host->bytes, 31 * kLayerInput);
  EXPECT_TRUE(host->pinned);
  EXPECT_EQ(host_buffer(base.mem, "offloaded layer inputs (checkpoints)"), nullptr);
  // Eight ranks per node each pin their own copies.
  EXPECT_EQ(off.mem.host_pinned_per_node - base.mem.host_pinned_per_node, 8 * 31 * kLayerInput);
  // Peak GPU memory falls by the 30 inputs that left (the backward's peak holds them all without offload).
  EXPECT_EQ(base.mem.peak - off.mem.peak, 30 * kLayerInput);
}

TEST(CheckpointOffload, EngineBackwardWaitsForItsCopiesBack) {
  const Result base = plan(llama8b(CheckpointOffload::None, DeepSpeedVersion::V0_19_8, false));
  const Result off = plan(llama8b(CheckpointOffload::Cpu, DeepSpeedVersion::V0_19_8, false));
  // A Llama-3.1-8B layer's forward at 8,192 tokens on an H100 (~1.8 TFLOP of GEMMs, milliseconds) is
  // longer than one 1.28 ms D2H copy, so the forward's copies hide; the backward's 30 H2D copies do not.
  const double h2d = 30.0 * static_cast<double>(kLayerInput) / kPinnedBps;
  EXPECT_NEAR(off.time.checkpoint_offload_s, h2d, 1e-9);
  EXPECT_NEAR(off.time.step_s - base.time.step_s, h2d, 1e-9);
  EXPECT_EQ(off.time.checkpoint_copies, 31 + 30);
  EXPECT_EQ(off.time.checkpoint_copy_bytes, kLayerInput);
  EXPECT_NEAR(off.time.checkpoint_copy_s, 61.0 * static_cast<double>(kLayerInput) / kPinnedBps, 1e-9);
  EXPECT_EQ(base.time.checkpoint_copies, 0);
}

TEST(CheckpointOffload, OlderDeepSpeedCopiesBlockingIntoPageableMemory) {
  const Result base = plan(llama8b(CheckpointOffload::None, DeepSpeedVersion::V0_18_9, true));
  const Result off = plan(llama8b(CheckpointOffload::Cpu, DeepSpeedVersion::V0_18_9, true));
  EXPECT_EQ(gpu_bytes(off.mem, "layer inputs (checkpoints"), kLayerInput);
  const Buffer* host = host_buffer(off.mem, "offloaded layer inputs (checkpoints)");
  ASSERT_NE(host, nullptr);
  EXPECT_EQ(host->bytes, 32 * kLayerInput);
  EXPECT_FALSE(host->pinned);
  const double both = 64.0 * static_cast<double>(kLayerInput) / kPageableBps;
  EXPECT_NEAR(off.time.checkpoint_offload_s, both, 1e-9);
  EXPECT_NEAR(off.time.step_s - base.time.step_s, both, 1e-9);
}

TEST(CheckpointOffload, PartitionActivationsTakesTheBlockingPathInEveryRelease) {
  Workload w = llama8b(CheckpointOffload::Cpu, DeepSpeedVersion::V0_19_8, true);
  w.train.partition_activations = true;
  const CheckpointOffloadPlan p = checkpoint_offload_plan(w.train, 32, Checkpointing::Full);
  EXPECT_TRUE(p.active);
  EXPECT_FALSE(p.async);
  EXPECT_EQ(p.host_checkpoints, 32);
  EXPECT_EQ(p.h2d_copies, 32);
  // Only fully checkpointed layers keep one input each.
  EXPECT_FALSE(checkpoint_offload_plan(w.train, 32, Checkpointing::Selective).active);
  // A two-layer model: both inputs stay on the GPU under the engine, nothing is copied back.
  w.train.partition_activations = false;
  const CheckpointOffloadPlan two = checkpoint_offload_plan(w.train, 2, Checkpointing::Full);
  EXPECT_EQ(two.gpu_checkpoints, 2);
  EXPECT_EQ(two.h2d_copies, 0);
  EXPECT_EQ(two.d2h_copies, 1);
}

TEST(CheckpointOffloadCli, RefusesWhatDeepSpeedCannotRun) {
  const std::vector<std::vector<std::string>> bad = {
      {"--checkpointing", "none"},
      {"--checkpointing", "selective"},
      {"--checkpoint-impl", "reentrant"},
      {"--deepspeed-version", "0.18.9"},  // HF checkpointing has no offload before 0.19.6
  };
  for (const auto& extra : bad) {
    std::vector<std::string> args = {"--model", "llama-3.1-8b",         "--gpus",
                                     "8xH100",  "--checkpoint-offload", "cpu"};
    args.insert(args.end(), extra.begin(), extra.end());
    const auto r = run_cli(args);
    EXPECT_EQ(r.exit_code, 2) << extra[0] << " " << extra[1] << "\n" << r.err;
    EXPECT_EQ(r.stderr_lines(), 1) << r.err;
    EXPECT_NE(r.err.find("--checkpoint-offload"), std::string::npos) << r.err;
    EXPECT_TRUE(r.out.empty());
  }
  const auto params = run_cli({"--params", "8e9", "--gpus", "8xH100", "--checkpoint-offload", "cpu"});
  EXPECT_EQ(params.exit_code, 2);
  const auto typo = run_cli({"--model", "llama-3.1-8b", "--gpus", "8xH100", "--checkpoint-offload", "gpu"});
  EXPECT_EQ(typo.exit_code, 2);
  // deepspeed.checkpointing's cpu_checkpointing exists in 0.18.9 (blocking copies).
  const auto ok = run_cli({"--model", "llama-3.1-8b", "--gpus", "8xH100", "--checkpoint-offload", "cpu",
                           "--checkpoint-impl", "deepspeed", "--deepspeed-version", "0.18.9", "--json"});
  ASSERT_EQ(ok.exit_code, 0) << ok.err;
  const json j = json::parse(ok.out);
  const json& rec = j.at("recommendation");
  EXPECT_EQ(rec.at("activation_checkpointing"), "full");
  EXPECT_EQ(rec.at("checkpoint_offload").at("path"), "blocking_copies");
  EXPECT_EQ(rec.at("checkpoint_offload").at("checkpoints_on_host"), 32);
  // Its config turns deepspeed.checkpointing's offload on.
  EXPECT_EQ(rec.at("deepspeed_config").at("activation_checkpointing").at("cpu_checkpointing"), true);
}

TEST(CheckpointOffloadCli, PlanSaysWhatMovesAndWhatItCosts) {
  const std::vector<std::string> base = {
      "--model", "llama-3.1-8b",  "--gpus", "8xH100",       "--seq-len", "8192", "--stage",
      "3",       "--micro-batch", "1",      "--grad-accum", "1"};
  auto with = base;
  with.insert(with.end(), {"--checkpoint-offload", "cpu", "--json"});
  auto without = base;
  without.insert(without.end(), {"--checkpointing", "full", "--json"});
  const auto a = run_cli(with), b = run_cli(without);
  ASSERT_EQ(a.exit_code, 0) << a.err;
  ASSERT_EQ(b.exit_code, 0) << b.err;
  const json ra = json::parse(a.out).at("recommendation"), rb = json::parse(b.out).at("recommendation");
  const json& co = ra.at("checkpoint_offload");
  EXPECT_EQ(co.at("path"), "offload_engine");
  EXPECT_EQ(co.at("host_pinned"), true);
  EXPECT_EQ(co.at("checkpoints_on_gpu"), 2);
  EXPECT_EQ(co.at("checkpoints_on_host"), 31);
  EXPECT_EQ(co.at("bytes_per_copy"), kLayerInput);
  EXPECT_FALSE(rb.contains("checkpoint_offload"));
  EXPECT_EQ(ra.at("memory").at("cpu").at("pinned_per_node").get<int64_t>() -
                rb.at("memory").at("cpu").at("pinned_per_node").get<int64_t>(),
            8 * 31 * kLayerInput);
  // The HF path has no config key: the Trainer snippet tells the script what to wrap.
  auto text = base;
  text.insert(text.end(), {"--checkpoint-offload", "cpu"});
  const auto t = run_cli(text);
  ASSERT_EQ(t.exit_code, 0) << t.err;
  EXPECT_NE(t.out.find("Checkpoint offload per step: 61 copies of 67.1 MB"), std::string::npos) << t.out;
  EXPECT_FALSE(ra.at("deepspeed_config").contains("activation_checkpointing"));
}

TEST(CheckpointOffloadCli, CheckReadsCpuCheckpointingOnlyWhereDeepSpeedCheckpointingRuns) {
  const ScratchDir d;
  const std::string cfg = d.file("ds.json", R"({"train_micro_batch_size_per_gpu": 1,
    "gradient_accumulation_steps": 1, "bf16": {"enabled": true}, "zero_optimization": {"stage": 3},
    "activation_checkpointing": {"cpu_checkpointing": true}})");
  const std::vector<std::string> base = {"check",  cfg,         "--model", "llama-3.1-8b", "--gpus",
                                         "8xH100", "--seq-len", "8192",    "--json"};
  auto hf_args = base;
  hf_args.insert(hf_args.end(), {"--checkpointing", "full"});
  const auto hf = run_cli(hf_args);
  ASSERT_EQ(hf.exit_code, 0) << hf.err;
  EXPECT_NE(hf.out.find("pass --checkpoint-impl deepspeed"), std::string::npos) << hf.out;
  EXPECT_EQ(hf.out.find("\"checkpoint_offload\""), std::string::npos);
  auto ds = base;
  ds.insert(ds.end(), {"--checkpoint-impl", "deepspeed"});
  const auto r = run_cli(ds);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("\"checkpoint_offload\""), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("modelled with deepspeed.checkpointing"), std::string::npos) << r.out;
}

}  // namespace
}  // namespace zeroplan::planner
