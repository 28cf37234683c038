// --host-speed (issue 24 item 6: each assumption about the user's stack can be changed by a flag). The
// host figures of planner/data/time_model.json were measured on one host; --host-speed F divides host
// times by F. Hand count: TinyLlama-1.1B (22 layers) runs 22 x 13 + 6 = 292 hooked modules per forward
// (tests/test_time_hooks.cpp counts the HF tree), 584 module passes per micro-step, at 376 us each =
// 219.584 ms of ZeRO-3 hook host time on the reference host, 109.792 ms at speed 2.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <string>

#include "tests/cli_runner.h"

namespace {

using zeroplan::testing::expect_cli_user_error;
using zeroplan::testing::run_cli;

nlohmann::json plan(const std::string& speed) {
  const auto r =
      run_cli({"--model", std::string(ZEROPLAN_SOURCE_DIR) + "/scripts/gpu_models/tinyllama-1.1b.json",
               "--gpus", "1xH100", "--stage", "3", "--micro-batch", "1", "--seq-len", "512",
               "--checkpointing", "none", "--host-speed", speed, "--json"});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  return nlohmann::json::parse(r.out);
}

TEST(CliHostSpeed, DividesTheHostTimes) {
  const nlohmann::json one = plan("1");
  const nlohmann::json two = plan("2");
  const auto& t1 = one.at("recommendation").at("time");
  const auto& t2 = two.at("recommendation").at("time");
  EXPECT_NEAR(t1.at("hook_host_s").get<double>(), 0.219584, 1e-9);
  EXPECT_NEAR(t2.at("hook_host_s").get<double>(), 0.109792, 1e-9);
  EXPECT_EQ(two.at("recommendation").at("host_speed").get<double>(), 2.0);
  // The micro-step is host-bound, so the step gets shorter too.
  EXPECT_LT(t2.at("step_s").get<double>(), t1.at("step_s").get<double>());
}

TEST(CliHostSpeed, TheReportSaysWhichHostItAssumed) {
  const auto r = run_cli({"--model", "7b", "--gpus", "1xH100", "--host-speed", "1.5"});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("assumed host: 1.5x the reference host's speed"), std::string::npos) << r.out;
}

TEST(CliHostSpeed, OutOfRangeIsAUserError) {
  expect_cli_user_error({"--model", "7b", "--gpus", "1xH100", "--host-speed", "0"}, "--host-speed");
  expect_cli_user_error({"--model", "7b", "--gpus", "1xH100", "--host-speed", "fast"}, "--host-speed");
}

}  // namespace
