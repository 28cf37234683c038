// `zeroplan validate --backend cpu`: the command-line contract (text, --json, one-line errors).
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "cli_runner.h"

namespace {

using zeroplan::testing::run_cli;

TEST(CliValidate, TextReportComparesEveryComponent) {
  const auto r = run_cli({"validate", "--backend", "cpu", "--model", "tiny-llama-micro", "--gpus", "2xCPU",
                          "--stage", "2", "--seq-len", "32", "--micro-batch", "2", "--steps", "2",
                          "--reduce-bucket-size", "20000"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  for (const char* row :
       {"parameters", "gradients", "optimizer_states", "activations", "buffers", "overhead", "model states",
        "peak", "communication per rank per step", "time per step", "loss per step"})
    EXPECT_NE(r.out.find(row), std::string::npos) << row;
}

TEST(CliValidate, JsonHasBothSidesWithContractNames) {
  const auto r = run_cli({"validate", "--model", "tiny-llama-micro", "--gpus", "4xCPU", "--stage", "1",
                          "--seq-len", "32", "--steps", "2", "--reduce-bucket-size", "30000", "--json"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto j = nlohmann::json::parse(r.out);
  for (const char* k : {"parameters", "gradients", "optimizer_states", "model_states", "activations",
                        "buffers", "overhead", "peak"}) {
    EXPECT_TRUE(j["predicted"]["memory"]["gpu"].contains(k)) << k;
    EXPECT_TRUE(j["measured"]["memory"]["gpu"].contains(k)) << k;
  }
  // Stage 1, bf16, 4 ranks, tiny-llama-micro (123712 parameters, a multiple of 2N, no padding):
  // 16-bit params 2 Psi = 247424 bytes; fp32 master + Adam 12 Psi / 4 = 371136 bytes (ZeRO paper
  // Table 1 accounting), measured by the executor from its own tensors.
  EXPECT_EQ(j["measured"]["memory"]["gpu"]["parameters"], 247424);
  EXPECT_EQ(j["measured"]["memory"]["gpu"]["optimizer_states"], 371136);
  // Bucketed all-reduce 2(N-1)/N x 2 Psi = 371136 plus the step-end all-gather (N-1)/N x 2 Psi =
  // 185568 (nccl-tests bus factors), on both sides.
  EXPECT_EQ(j["measured"]["communication"]["bytes_per_rank_per_step"], 556704);
  EXPECT_EQ(j["predicted"]["communication"]["bytes_per_rank_per_step"], 556704);
  EXPECT_EQ(j["error"]["communication"]["bytes_per_rank_per_step"], 0.0);
  // Categories are compared in the planner's peak phase, here the step. validate models the engine
  // (planner/engine_runtime.h), whose stage 1 keeps grads_in_partition beside the full gradients:
  // 2 Psi + 2 Psi / N = 247424 + 61856 = 309280 bytes, on both sides.
  EXPECT_EQ(j["error"]["memory"]["gpu"]["parameters"], 0.0);
  EXPECT_EQ(j["error"]["memory"]["gpu"]["optimizer_states"], 0.0);
  EXPECT_EQ(j["measured"]["memory"]["gpu"]["gradients"], 309280);
  EXPECT_EQ(j["predicted"]["memory"]["gpu"]["gradients"], 309280);
}

// LoRA r=4 on tiny-llama-micro, stage 2, 2 ranks, bf16: 9,248 adapters (hand count in
// tests/test_executor_lora.cpp), 123,712 frozen weights. By hand: parameters 2 x (123,712 + 9,248)
// = 265,920 bytes; gradient partition 9,248 / 2 x 2 = 9,248; fp32 master + Adam 12 x 9,248 / 2 =
// 55,488; bucket all-reduce 2(N-1)/N x 2 x 9,248 = 18,496 plus the step-end all-gather
// (N-1)/N x 2 x 9,248 = 9,248. The planner must say the same.
TEST(CliValidate, LoraModelStatesAndTrafficMatchTheHandCountOnBothSides) {
  const auto r =
      run_cli({"validate", "--model", "tiny-llama-micro", "--gpus", "2xCPU", "--stage", "2", "--method",
               "lora", "--lora-rank", "4", "--seq-len", "32", "--steps", "2", "--json"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto j = nlohmann::json::parse(r.out);
  for (const char* side : {"measured", "predicted"}) {
    EXPECT_EQ(j[side]["memory"]["gpu"]["parameters"], 265920) << side;
    EXPECT_EQ(j[side]["memory"]["gpu"]["gradients"], 9248) << side;
    EXPECT_EQ(j[side]["memory"]["gpu"]["optimizer_states"], 55488) << side;
    EXPECT_EQ(j[side]["communication"]["bytes_per_rank_per_step"], 18496 + 9248) << side;
  }
}

TEST(CliValidate, UnsupportedPlansAreOneLineUserErrors) {
  const std::vector<std::vector<std::string>> bad = {
      {"validate", "--model", "tiny-llama-micro", "--gpus", "2xCPU"},  // no --stage
      {"validate", "--model", "tiny-llama-micro", "--gpus", "2xCPU", "--stage", "2", "--precision", "fp16"},
      {"validate", "--model", "tiny-llama-micro", "--gpus", "2xCPU", "--stage", "2", "--backend", "tpu"},
      {"validate", "--model", "tiny-llama-micro", "--gpus", "2xCPU", "--stage", "0", "--offload-optimizer",
       "cpu"},
      {"validate", "--model", "tiny-llama-micro", "--gpus", "2xCPU", "--stage", "2", "--method", "qlora"},
      {"validate", "--model", "tiny-llama-micro", "--gpus", "2xCPU", "--stage", "2", "--method", "lora",
       "--lora-targets", "lm_head"},
      {"validate", "--model", "gpt2", "--gpus", "2xCPU", "--stage", "2"},
      {"validate", "--model", "tiny-llama-micro", "--gpus", "2xCPU", "--stage", "2", "--steps", "0"},
      {"validate", "--model", "tiny-llama-micro", "--gpus", "2xCPU", "--stage", "2", "--attention", "eager"},
      {"validate", "--model", "tiny-llama-micro", "--gpus", "2xCPU", "--stage", "3", "--offload-param",
       "cpu"}};
  for (const auto& args : bad) {
    const auto r = run_cli(args);
    EXPECT_EQ(r.exit_code, 2) << args.back() << ": " << r.err;
    EXPECT_EQ(r.stderr_lines(), 1) << r.err;
    EXPECT_TRUE(r.out.empty());
  }
}

TEST(CliValidate, OutOfMemoryIsAResultNotACrash) {
  // Each thread rank's device tier is capped at --gpu-mem (500 MB here); the default stage-2 bucket
  // is 5e8 elements = 1e9 bytes in bf16 (DeepSpeed's reduce_bucket_size default), so the run must
  // stop when it allocates that bucket, in the backward, and say so with the planner's peak beside.
  const auto r =
      run_cli({"validate", "--backend", "cpu", "--model", "tiny-llama-micro", "--gpus", "2xCPU", "--stage",
               "2", "--seq-len", "32", "--micro-batch", "2", "--steps", "1", "--gpu-mem", "500MB"});
  EXPECT_EQ(r.exit_code, 1) << r.err;
  EXPECT_NE(r.out.find("ran out of device memory in phase backward"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("asking for 1000000000 more"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("predicted not to fit"), std::string::npos) << r.out;
  const auto j =
      run_cli({"validate", "--backend", "cpu", "--model", "tiny-llama-micro", "--gpus", "2xCPU", "--stage",
               "2", "--seq-len", "32", "--micro-batch", "2", "--steps", "1", "--gpu-mem", "500MB", "--json"});
  EXPECT_EQ(j.exit_code, 1);
  const auto oom = nlohmann::json::parse(j.out)["measured"]["out_of_memory"];
  EXPECT_EQ(oom["phase"], "backward");
  EXPECT_EQ(oom["requested_bytes"], 1000000000);
}

}  // namespace
