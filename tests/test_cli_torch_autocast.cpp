// torch_autocast (issue 28): DeepSpeed 0.19.8 runs the config (tests/deepspeed_configs,
// adv_torch_autocast_stage2: both runners "ok"), keeping fp32 parameters, gradients and states and
// running the forward under torch.autocast (runtime/torch_autocast.py). zeroplan does not model
// autocast's step: check must say so instead of calling it plain fp32 training.
#include <gtest/gtest.h>

#include <string>

#include "tests/cli_runner.h"

namespace {

using zeroplan::testing::run_cli;

const std::string kConfig =
    std::string(ZEROPLAN_SOURCE_DIR) + "/tests/deepspeed_configs/configs/adv_torch_autocast_stage2.json";

TEST(CliTorchAutocast, CheckSaysAutocastIsNotModelledRatherThanFp32Training) {
  const auto r = run_cli({"check", kConfig, "--model", "7b", "--gpus", "8xA100"});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("warning: torch_autocast.enabled: torch_autocast is on (bfloat16)"), std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find("zeroplan prices this run as fp32 training"), std::string::npos) << r.out;
  EXPECT_EQ(r.out.find("neither fp16 nor bf16 is enabled"), std::string::npos) << r.out;
}

}  // namespace
