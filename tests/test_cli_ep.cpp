// The --ep flag end to end (planner/expert_parallel.h, docs/moe.md): user errors exit 2 with one
// line and nothing on stdout; an expert-parallel plan emits DeepSpeed 0.19.8's AutoEP section, and
// `check` reads it back into the same prediction.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "tests/cli_runner.h"

namespace {

using zeroplan::testing::expect_cli_user_error;
using zeroplan::testing::run_cli;
using zeroplan::testing::slurp;
namespace fs = std::filesystem;

TEST(CliEp, UserErrors) {
  expect_cli_user_error({"--model", "qwen3-30b-a3b", "--gpus", "8xH100", "--ep", "3"},
                        "must divide the 8 GPUs");
  expect_cli_user_error({"--model", "qwen3-30b-a3b", "--gpus", "8xH100", "--ep", "0"}, "positive integer");
  expect_cli_user_error({"--model", "qwen3-30b-a3b", "--gpus", "8xH100", "--ep", "two"}, "positive integer");
  expect_cli_user_error({"--model", "7b", "--gpus", "8xH100", "--ep", "2"}, "mixture-of-experts");
  expect_cli_user_error({"--model", "gpt-oss-20b", "--gpus", "8xH100", "--ep", "2"}, "no preset");
  // 8 experts over 16 GPUs: ep 16 divides the GPUs but not the experts.
  expect_cli_user_error({"--model", "mixtral-8x7b", "--gpus", "2x8xH100", "--ep", "16"},
                        "must divide the 8 routed experts");
}

TEST(CliEp, EmitAndCheckRoundTrip) {
  const fs::path dir = fs::temp_directory_path() / ("zeroplan-ep-" + std::to_string(::getpid()));
  fs::create_directories(dir);
  const std::string cfg = (dir / "ds.json").string();
  const auto r = run_cli({"--model", "qwen3-30b-a3b", "--gpus", "8xH100", "--ep", "8", "--stage", "2",
                          "--micro-batch", "2", "--checkpointing", "full", "--json", "--emit", cfg});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto plan = nlohmann::json::parse(r.out);
  EXPECT_EQ(plan["recommendation"]["expert_parallel_size"], 8);
  const auto ds = nlohmann::json::parse(slurp(cfg));
  EXPECT_EQ(ds["expert_parallel"], (nlohmann::json{{"enabled", true}, {"autoep_size", 8}}));
  const auto c = run_cli(
      {"check", cfg, "--model", "qwen3-30b-a3b", "--gpus", "8xH100", "--checkpointing", "full", "--json"});
  EXPECT_EQ(c.exit_code, 0) << c.err;
  const auto chk = nlohmann::json::parse(c.out);
  EXPECT_EQ(chk["predicted"]["expert_parallel_size"], 8) << c.out;
  EXPECT_EQ(chk["predicted"]["memory"]["gpu"]["peak"], plan["recommendation"]["memory"]["gpu"]["peak"])
      << c.out;
  fs::remove_all(dir);
}

}  // namespace
