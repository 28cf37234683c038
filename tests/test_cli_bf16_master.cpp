// --allow bf16-master end to end (issue 28 item 2; planner/zero_config.h bf16_master_weights): user
// errors exit 2 with one line; the search tries bf16 master weights + optimizer states only when
// allowed; the plan says so, emits DeepSpeed's bf16 keys, and `check` reads them back into the same
// prediction. The memory itself is checked against DeepSpeed 0.19.8 recordings
// (tests/deepspeed/fixtures/0.19.8/*bf16master*) and by hand in test_memory_model.cpp.
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

TEST(CliBf16Master, UserErrors) {
  expect_cli_user_error({"--model", "7b", "--gpus", "8xA100", "--allow", "fp8"}, "unknown lever");
  expect_cli_user_error(
      {"--model", "7b", "--gpus", "8xA100", "--allow", "bf16-master", "--precision", "fp16"},
      "needs --precision bf16");
  expect_cli_user_error(
      {"--model", "7b", "--gpus", "8xA100", "--allow", "bf16-master", "--deepspeed-version", "0.16.9"},
      "0.18.3");
}

TEST(CliBf16Master, NotSearchedUnlessAllowed) {
  // 13B on 4 x A40 (48 GB): ZeRO-3 model states with fp32 masters are 16 x 13.0e9 / 4 = 52 GB per GPU,
  // so without offload nothing fits; with bf16 masters and states 10 x 13.0e9 / 4 = 32.5 GB, which does.
  const auto plain = run_cli({"--model", "13b", "--gpus", "4xA40", "--json"});
  ASSERT_EQ(plain.exit_code, 0) << plain.err;
  const auto p = nlohmann::json::parse(plain.out)["recommendation"];
  EXPECT_FALSE(p["zero"]["bf16_master_weights_and_grads"].get<bool>());
  EXPECT_NE(p["offload_optimizer"], "none");

  const fs::path dir = fs::temp_directory_path() / ("zeroplan-bf16m-" + std::to_string(::getpid()));
  fs::create_directories(dir);
  const std::string cfg = (dir / "ds.json").string();
  const auto allowed =
      run_cli({"--model", "13b", "--gpus", "4xA40", "--allow", "bf16-master", "--json", "--emit", cfg});
  ASSERT_EQ(allowed.exit_code, 0) << allowed.err;
  const auto a = nlohmann::json::parse(allowed.out)["recommendation"];
  EXPECT_TRUE(a["zero"]["bf16_master_weights_and_grads"].get<bool>());
  EXPECT_TRUE(a["zero"]["bf16_optimizer_states"].get<bool>());
  EXPECT_EQ(a["offload_optimizer"], "none");
  EXPECT_GT(a["throughput"]["tokens_per_s"].get<double>(), p["throughput"]["tokens_per_s"].get<double>());
  bool said = false;
  const auto answer = nlohmann::json::parse(allowed.out);  // kept: the loop reads into it
  for (const auto& r : answer["reasons"])
    said = said || r.get<std::string>().find("changes the numerics") != std::string::npos;
  EXPECT_TRUE(said) << allowed.out;

  // The emitted config carries DeepSpeed's keys, and check predicts the same peak from it.
  const auto ds = nlohmann::json::parse(slurp(cfg));
  EXPECT_EQ(ds["bf16"]["bf16_master_weights_and_grads"], true);
  EXPECT_EQ(ds["bf16"]["bf16_optimizer_states"], true);
  const auto c = run_cli({"check", cfg, "--model", "13b", "--gpus", "4xA40", "--checkpointing",
                          a["activation_checkpointing"].get<std::string>(), "--json"});
  EXPECT_EQ(c.exit_code, 0) << c.err;
  const auto chk = nlohmann::json::parse(c.out);
  EXPECT_EQ(chk["predicted"]["memory"]["gpu"]["peak"], a["memory"]["gpu"]["peak"]) << c.out;
  EXPECT_TRUE(chk["predicted"]["zero"]["bf16_master_weights_and_grads"].get<bool>());
  fs::remove_all(dir);
}

}  // namespace
