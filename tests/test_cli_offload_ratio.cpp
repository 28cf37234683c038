// offload_optimizer.ratio at stage 3 (issue 28 item 2): stage3.py _create_fp32_partitions keeps sub group i
// of a rank's G on the GPU when i < int((1 - ratio) * G). Hand counts: Llama-2-7B (6,738,415,616
// parameters) over 8 ranks is 842,301,952 partition elements: one sub group at the default sub_group_size
// 1e9 (every sub group offloaded, as planned), ceil(842,301,952 / 1e8) = 9 at 1e8, of which
// int(0.7 x 9) = 6 stay on the GPU (not modelled: a warning says so).
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "tests/cli_runner.h"

namespace {

using zeroplan::testing::run_cli;
namespace fs = std::filesystem;

std::string write_config(const std::string& zero_extra) {
  const fs::path p = fs::temp_directory_path() / ("zeroplan-ratio-" + std::to_string(::getpid()) + ".json");
  std::ofstream(p)
      << R"({"train_micro_batch_size_per_gpu": 1, "gradient_accumulation_steps": 1, "bf16": {"enabled": true},
 "zero_optimization": {"stage": 3, "offload_optimizer": {"device": "cpu", "ratio": 0.3})"
      << zero_extra << "}}";
  return p.string();
}

TEST(CliOffloadRatio, OneSubGroupIsWhollyOffloaded) {
  const std::string cfg = write_config("");
  const auto r = run_cli({"check", cfg, "--model", "7b", "--gpus", "8xA100"});
  EXPECT_NE(r.out.find("about 1 sub group(s)"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("wholly offloaded, as planned"), std::string::npos) << r.out;
  fs::remove(cfg);
}

TEST(CliOffloadRatio, SeveralSubGroupsAreSplitAndSaidNotModelled) {
  const std::string cfg = write_config(R"(, "sub_group_size": 100000000)");
  const auto r = run_cli({"check", cfg, "--model", "7b", "--gpus", "8xA100"});
  EXPECT_NE(r.out.find("about 6 of each rank's 9 sub groups stay on the GPU"), std::string::npos) << r.out;
  fs::remove(cfg);
}

}  // namespace
