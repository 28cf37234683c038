// AutoTP training (planner/tensor_parallel.h, issue 26): the planner's arithmetic against hand counts of
// what DeepSpeed 0.19.8's AutoTP does to an HF model (module_inject/tp_shard.py get_shard_size,
// layers.py LinearLayer / LinearAllreduce), on a Llama-3.1-8B shape (config.json of
// meta-llama/Llama-3.1-8B: hidden 4096, 32 layers, 32 heads, 8 KV heads, head_dim 128, intermediate
// 14336, vocab 128256, untied). The recorded runs of real DeepSpeed (tests/deepspeed/fixtures-tp) are
// test_conformance's; the CLI's are below.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <cstdio>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "hwprofiles/cluster.h"
#include "planner/ds_runtime_collectives.h"
#include "planner/memory_model.h"
#include "planner/model_stats.h"
#include "planner/parallel.h"
#include "planner/tensor_parallel.h"
#include "planner/tensor_parallel_choice.h"
#include "planner/time_model.h"
#include "tests/cli_runner.h"
#include "tests/model_specs.h"

namespace zeroplan::planner {
namespace {

Workload workload(int tp, const std::string& gpus = "4xA100-80GB") {
  Workload w;
  w.model = testing::llama31_8b_spec();
  w.cluster = hw::parse_cluster(gpus);
  w.train.seq_len = 2048;
  apply_tensor_parallel(w, tp);
  return w;
}

ZeroConfig config(int stage, Checkpointing ckpt = Checkpointing::None) {
  ZeroConfig z = ZeroConfig::deepspeed_defaults(stage);
  z.micro_batch = 1;
  z.grad_accum = 1;
  z.checkpointing = ckpt;
  return z;
}

// Rank 0's shard at tp 2, by hand: q 16 heads x 128 = 2048 rows, k and v 4 KV heads x 128 = 512 rows,
// o 2048 columns, gate/up 7168 rows, down 7168 columns, lm_head 64128 rows; embeddings and norms whole.
// Per layer 4096 x (2048 + 512 + 512 + 2048) + 3 x 4096 x 7168 + 2 x 4096 (norms) = 109,060,096;
// x 32 layers + embedding 128256 x 4096 + lm_head 64128 x 4096 + final norm 4096.
TEST(TensorParallel, RankZeroHoldsItsShardByHand) {
  const Workload w = workload(2);
  const int64_t per_layer = int64_t{4096} * (2048 + 512 + 512 + 2048) + 3 * int64_t{4096} * 7168 + 2 * 4096;
  const int64_t want = 32 * per_layer + int64_t{128256} * 4096 + int64_t{64128} * 4096 + 4096;
  EXPECT_EQ(w.model.num_parameters(), want);
  EXPECT_EQ(w.full_model().num_parameters(), testing::llama31_8b_spec().num_parameters());
  // tp 8 over 8 KV heads: one KV head and 4 query heads each; tp 16 would exceed them (the layout refuses
  // a tp above a node anyway).
  const Workload w8 = workload(8, "8xA100-80GB");
  EXPECT_EQ(w8.model.num_heads, 4);
  EXPECT_EQ(w8.model.num_kv_heads, 1);
  EXPECT_EQ(w8.model.intermediate_size, 14336 / 8);
}

// ZeRO partitions over world / tp: at tp 2 on 4 GPUs, stage 2's fp32 states are 12 B x the rank's shard /
// 2, and the global batch counts 2 data-parallel ranks while DeepSpeed's train_batch_size counts 4.
TEST(TensorParallel, ZeroPartitionsOverTheDataParallelGroup) {
  const Workload w = workload(2);
  const ModelStats s = compute_model_stats(w);
  const MemoryBreakdown m = estimate_memory(w, s, config(2));
  const int64_t shard = w.model.num_parameters();
  EXPECT_EQ(layout_of(w, config(2)).zero(), 2);
  EXPECT_EQ(m.after_step_bytes(Category::OptimizerStates), 12 * ((shard + 1) / 2));
  EXPECT_EQ(data_parallel_size(w), 2);
  EXPECT_EQ(deepspeed_batch_world(w), 4);
}

// The TP group's calls of one step, 32 layers: forward 2 all-reduces per layer (o_proj, down_proj) and
// the logits gather; backward 5 per layer (q, k, v, gate, up input gradients) and the lm_head's; all
// 1 x 2048 x 4096 x 2 B = 16,777,216 B in the group of 2. Full checkpointing (non-reentrant) adds o_proj's
// again per layer.
TEST(TensorParallel, CallsPerLayerAndTheirSizes) {
  const Workload w = workload(2);
  const std::vector<CollectiveCall> calls = tensor_parallel_calls(w, config(2));
  ASSERT_EQ(calls.size(), 32u * 7u + 2u);
  int64_t gathers = 0;
  for (const CollectiveCall& c : calls) {
    EXPECT_EQ(c.group_size, 2);
    if (c.kind == CollectiveKind::AllGather) {
      ++gathers;
      EXPECT_EQ(c.bytes, int64_t{2048} * 64128 * 2);
    } else {
      EXPECT_EQ(c.bytes, int64_t{2048} * 4096 * 2);
    }
  }
  EXPECT_EQ(gathers, 1);
  EXPECT_EQ(tensor_parallel_calls(w, config(2, Checkpointing::Full)).size(), 32u * 8u + 2u);
  // The time model prices the same count as one exposed entry.
  const StepTime t = estimate_time(w, compute_model_stats(w), config(2));
  bool found = false;
  for (int i = 0; i < t.num_collectives; ++i) {
    const CollectiveCost& c = t.collectives[static_cast<size_t>(i)];
    if (std::string(c.name).rfind("AutoTP", 0) != 0) continue;
    found = true;
    EXPECT_EQ(c.count, 32 * 7 + 2);
    EXPECT_GT(c.exposed_s, 0.0);
    EXPECT_DOUBLE_EQ(c.exposed_s, c.time_s);
  }
  EXPECT_TRUE(found);
}

// What the TP model does not cover is refused with one message naming --tp.
TEST(TensorParallel, RefusesWhatItDoesNotModel) {
  Workload w;
  w.model = testing::llama31_8b_spec();
  w.cluster = hw::parse_cluster("4xA100-80GB");
  EXPECT_EQ(tensor_parallel_refusal(w, 2), "");
  w.train.sequence_parallel = 2;
  EXPECT_NE(tensor_parallel_refusal(w, 2).find("--sp"), std::string::npos);
  w.train.sequence_parallel = 1;
  w.model.num_experts = 8;
  EXPECT_NE(tensor_parallel_refusal(w, 2).find("MoE"), std::string::npos);
}

TEST(TensorParallelCli, PlanAndEmitCarryTheLayout) {
  const auto r = testing::run_cli({"--model", "llama-3.1-8b", "--gpus", "4xA100-80GB", "--tp", "2", "--stage",
                                   "2", "--micro-batch", "1", "--grad-accum", "2", "--json"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("\"tensor_parallel_size\": 2"), std::string::npos);
  EXPECT_NE(r.out.find("\"data_parallel_size\": 2"), std::string::npos);
  EXPECT_NE(r.out.find("\"autotp_size\": 2"), std::string::npos) << "the emitted config";
  // train_batch_size = micro 1 x accum 2 x 4 GPUs (DeepSpeed counts TP ranks as replicas).
  EXPECT_NE(r.out.find("\"train_batch_size\": 8"), std::string::npos);
}

// The emitted config, read back by check: the same layout, the batch as DeepSpeed counts it.
TEST(TensorParallelCli, CheckReadsTheEmittedConfig) {
  const std::string path = ::testing::TempDir() + "zp_tp_check.json";
  const auto e = testing::run_cli({"--model", "llama-3.1-8b", "--gpus", "4xA100-80GB", "--tp", "2", "--stage", "2",
                                   "--micro-batch", "1", "--grad-accum", "2", "--emit", path, "--force"});
  ASSERT_EQ(e.exit_code, 0) << e.err;
  const auto c = testing::run_cli({"check", path, "--model", "llama-3.1-8b", "--gpus", "4xA100-80GB"});
  EXPECT_EQ(c.exit_code, 0) << c.err;
  EXPECT_NE(c.out.find("micro-batch 1 x grad-accum 2 x 2 data-parallel ranks = global batch 4"), std::string::npos)
      << c.out;
  EXPECT_NE(c.out.find("over AutoTP tp 2"), std::string::npos) << c.out;
  // A size the layout refuses is an error naming the key.
  const std::string bad = ::testing::TempDir() + "zp_tp_bad.json";
  {
    std::FILE* f = std::fopen(bad.c_str(), "w");
    ASSERT_NE(f, nullptr);
    std::fputs(R"({"train_micro_batch_size_per_gpu": 1, "gradient_accumulation_steps": 1,
                   "bf16": {"enabled": true}, "zero_optimization": {"stage": 2},
                   "tensor_parallel": {"autotp_size": 3}})",
               f);
    std::fclose(f);
  }
  const auto b = testing::run_cli({"check", bad, "--model", "llama-3.1-8b", "--gpus", "4xA100-80GB"});
  EXPECT_NE(b.out.find("tensor_parallel.autotp_size"), std::string::npos) << b.out << b.err;
}

// --tp auto searches 1, 2, 4, 8 on one 8-GPU node and keeps the fastest that fits; its reason lists each.
TEST(TensorParallelCli, AutoSearchesTheSizesOfANode) {
  const auto r = testing::run_cli({"--model", "llama-3.1-8b", "--gpus", "8xH100", "--tp", "auto", "--json"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  for (const char* tp : {"tp 1:", "tp 2:", "tp 4:", "tp 8:"})
    EXPECT_NE(r.out.find(tp), std::string::npos) << tp;
  // The sizes, each searched on its own, give the same best plans as --tp N.
  const std::vector<TensorParallelOption> o = [] {
    Workload w;
    w.model = testing::llama31_8b_spec();
    w.cluster = hw::parse_cluster("8xH100");
    return search_tensor_parallel(w, SearchOptions{});
  }();
  ASSERT_EQ(o.size(), 4u);
  const size_t best = best_tensor_parallel(o);
  for (size_t i = 0; i < o.size(); ++i)
    if (o[i].r.recommendation && o[best].r.recommendation) {
      EXPECT_LE(o[i].r.recommendation->tokens_per_s, o[best].r.recommendation->tokens_per_s);
    }
  EXPECT_NE(r.out.find(fmt::format("\"tensor_parallel_size\": {}", o[best].tp)), std::string::npos);
  // A MoE model: only tp 1 applies.
  const auto moe = testing::run_cli({"--model", "mixtral-8x7b", "--gpus", "8xH100", "--tp", "auto"});
  EXPECT_NE(moe.out.find("only tp 1 applies"), std::string::npos) << moe.out << moe.err;
}

// validate --tp 2 runs the executor's AutoTP (its own sharding, executor/engine.cpp) against the plan's
// (planner/tensor_parallel.h), two independent accounts: the TP group's bytes, ZeRO's bytes and the model
// states agree exactly on tiny-llama-micro, TP 2 x DP 2 at ZeRO-1.
TEST(TensorParallelCli, ValidateComparesTheTpGroupsBytes) {
  const auto r =
      testing::run_cli({"validate", "--backend", "cpu", "--model", "tiny-llama-micro", "--gpus", "4xCPU",
                        "--tp", "2", "--stage", "1", "--seq-len", "32", "--micro-batch", "2", "--json"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["error"]["communication"]["tensor_parallel_bytes_per_rank_per_step"].get<double>(), 0.0);
  EXPECT_EQ(j["error"]["communication"]["bytes_per_rank_per_step"].get<double>(), 0.0);
  EXPECT_GT(j["measured"]["communication"]["tensor_parallel_bytes_per_rank_per_step"].get<int64_t>(), 0);
  EXPECT_EQ(j["error"]["memory"]["gpu"]["parameters"].get<double>(), 0.0);
  EXPECT_EQ(j["error"]["memory"]["gpu"]["optimizer_states"].get<double>(), 0.0);
}

// --max-seq with --tp plans the TP shard without Ulysses (AutoTP with SP is not modelled); it used to pick
// sp 8 beside tp 2 and refuse its own layout.
TEST(TensorParallelCli, MaxSeqKeepsTheTpLayout) {
  const auto r = testing::run_cli({"--model", "llama-3.1-8b", "--gpus", "8xH100", "--max-seq", "--tp", "2"});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("Longest sequence that fits"), std::string::npos) << r.out;
}

TEST(TensorParallelCli, RefusalsExitTwo) {
  const auto moe = testing::run_cli({"--model", "mixtral-8x7b", "--gpus", "8xH100", "--tp", "2"});
  EXPECT_EQ(moe.exit_code, 2);
  EXPECT_NE(moe.err.find("--tp 2"), std::string::npos) << moe.err;
  const auto wide = testing::run_cli({"--model", "llama-3.1-8b", "--gpus", "2x4xH100", "--tp", "8"});
  EXPECT_EQ(wide.exit_code, 2);
  for (const std::vector<std::string>& extra : {std::vector<std::string>{"--kernels", "liger"},
                                                {"--compare", "deepspeed"},
                                                {"--sp", "2"},
                                                {"--method", "lora"}}) {
    std::vector<std::string> args{"--model", "llama-3.1-8b", "--gpus", "8xH100", "--tp", "2"};
    args.insert(args.end(), extra.begin(), extra.end());
    const auto r = testing::run_cli(args);
    EXPECT_EQ(r.exit_code, 2) << extra.front();
    EXPECT_EQ(r.stderr_lines(), 1) << r.err;
  }
}

}  // namespace
}  // namespace zeroplan::planner
