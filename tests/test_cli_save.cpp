// The checkpoint save (issue 28 item 4; planner/save_phase.h) through the CLI: a plan whose save needs
// more host RAM than the node has does not fit, and the reason says so with the fix. Expected values
// are hand counts from DeepSpeed's and torch's code (docs/memory-model.md "The checkpoint save"); the
// file sizes themselves are checked against DeepSpeed 0.19.8 recordings in test_conformance.cpp.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <string>

#include "tests/cli_runner.h"

namespace {

using zeroplan::testing::run_cli;

TEST(CliSave, Stage2SaveHostMemoryByHand) {
  // Llama-2-7B (6,738,415,616 parameters, transformers' count), ZeRO-2 on 8 x A100, bf16, no offload.
  // Partition: ceil(Psi / 16) * 2 = 842,301,952 elements. torch.save copies one storage at a time to the
  // host and all 8 ranks save at once: 7 x the fp32 master partition (4 x 842,301,952 = 3,369,207,808)
  // + rank 0's flat 16-bit buffer (2 x 6,738,415,616 = 13,476,831,232, larger than its master) =
  // 37,061,285,888 B. DeepSpeed checkpoint: rank 0's module 13,476,831,232 + 8 x 12 x 842,301,952 =
  // 94,337,818,624 B; the 16-bit model file 13,476,831,232 B.
  const auto ok = run_cli({"--model", "7b", "--gpus", "8xA100", "--stage", "2", "--offload-optimizer", "none",
                           "--micro-batch", "1", "--host-mem", "40GB", "--json"});
  ASSERT_EQ(ok.exit_code, 0) << ok.err;
  const auto r = nlohmann::json::parse(ok.out)["recommendation"];
  EXPECT_EQ(r["save"]["host_bytes_node0"], 37061285888LL);
  EXPECT_EQ(r["save"]["checkpoint_bytes"], 94337818624LL);
  EXPECT_EQ(r["save"]["model16_file_bytes"], 13476831232LL);
  EXPECT_TRUE(r["save"]["host_ok"].get<bool>());

  // 30 GB of host RAM: the same plan trains (no host buffers) but dies at its first save.
  const auto no = run_cli({"--model", "7b", "--gpus", "8xA100", "--stage", "2", "--offload-optimizer", "none",
                           "--micro-batch", "1", "--host-mem", "30GB", "--json"});
  EXPECT_EQ(no.exit_code, 1) << no.err;
  const auto j = nlohmann::json::parse(no.out);
  EXPECT_TRUE(j["recommendation"].is_null());
  const std::string why = j["reason"].get<std::string>();
  EXPECT_NE(why.find("first save"), std::string::npos) << why;
  EXPECT_NE(why.find("zero_to_fp32"), std::string::npos) << why;
}

}  // namespace
