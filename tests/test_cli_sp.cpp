// --sp end to end (planner/sequence_parallel.h, issue 27): user errors exit 2 with one line; a plan's
// JSON carries the layout and the all-to-alls; --emit writes what DeepSpeed 0.19.8 and accelerate need;
// `check` reads the config back into the same prediction.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "tests/cli_runner.h"

namespace {

namespace fs = std::filesystem;
using zeroplan::testing::expect_cli_user_error;
using zeroplan::testing::run_cli;
using zeroplan::testing::slurp;

TEST(CliSequenceParallel, UserErrors) {
  // 32 heads: sp 3 divides neither them nor 8 GPUs; 2047 tokens do not split over 2.
  expect_cli_user_error({"--model", "llama-3.1-8b", "--gpus", "8xH100", "--sp", "3"}, "--sp");
  expect_cli_user_error({"--model", "llama-3.1-8b", "--gpus", "8xH100", "--sp", "2", "--seq-len", "2047"},
                        "does not divide the sequence length 2047");
  expect_cli_user_error({"--model", "llama-3.1-8b", "--gpus", "8xH100", "--sp", "2", "--global-batch", "5"},
                        "data-parallel ranks");
}

// --sp end to end: the JSON carries the layout and the all-to-alls, --emit writes sequence_parallel_size
// with train_batch_size over the data-parallel ranks and the accelerate/Trainer lines, and `check` reads
// the file back into the same prediction.
TEST(CliSequenceParallel, PlanEmitCheckRoundTrip) {
  const fs::path dir = fs::temp_directory_path() / ("zeroplan-sp-" + std::to_string(::getpid()));
  fs::create_directories(dir);
  const std::string cfg = (dir / "ds.json").string();
  const auto r =
      run_cli({"--model", "llama-3.1-8b", "--gpus", "8xH100", "--seq-len", "32768", "--sp", "4", "--stage",
               "2", "--micro-batch", "1", "--checkpointing", "full", "--json", "--emit", cfg});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto plan = nlohmann::json::parse(r.out);
  const auto& rec = plan["recommendation"];
  EXPECT_EQ(rec["sequence_parallel_size"], 4);
  EXPECT_EQ(rec["data_parallel_size"], 2);
  EXPECT_EQ(rec["global_batch"], 2);
  bool a2a = false;
  for (const auto& c : rec["communication"]["collectives"])
    if (c["kind"] == "all_to_all" && c["calls_per_step"] == 32 * 14) a2a = true;
  EXPECT_TRUE(a2a) << rec["communication"].dump();
  const auto ds = nlohmann::json::parse(slurp(cfg));
  EXPECT_EQ(ds["sequence_parallel_size"], 4);
  EXPECT_EQ(ds["train_batch_size"], 2);
  const std::string args = slurp((dir / "ds.training_args.py").string());
  EXPECT_NE(args.find("sp_size=4"), std::string::npos) << args;
  EXPECT_NE(args.find("dp_replicate_size=2"), std::string::npos) << args;
  EXPECT_NE(slurp((dir / "ds.accelerate.yaml").string()).find("parallelism_config_sp_size: 4"),
            std::string::npos);
  const auto c = run_cli({"check", cfg, "--model", "llama-3.1-8b", "--gpus", "8xH100", "--seq-len", "32768",
                          "--checkpointing", "full", "--json"});
  EXPECT_EQ(c.exit_code, 0) << c.err;
  const auto chk = nlohmann::json::parse(c.out);
  EXPECT_EQ(chk["predicted"]["sequence_parallel_size"], 4) << c.out;
  EXPECT_EQ(chk["predicted"]["memory"]["gpu"]["peak"], rec["memory"]["gpu"]["peak"]) << c.out;
  fs::remove_all(dir);
}

// When nothing fits, the reasons name the smallest Ulysses size under which a plan does, and the plan
// search agrees when run with it (and finds nothing with half of it).
TEST(CliSequenceParallel, NoFitNamesTheSmallestSpThatFits) {
  const std::vector<std::string> base = {"--model",   "llama-3.1-8b", "--gpus", "8xH100",
                                         "--seq-len", "131072",       "--json"};
  const auto r = run_cli(base);
  ASSERT_EQ(r.exit_code, 1) << r.err;  // nothing fits without SP
  const std::string reason = nlohmann::json::parse(r.out)["reason"].get<std::string>();
  const auto at = reason.find("--sp ");
  ASSERT_NE(at, std::string::npos) << reason;
  const int sp = std::stoi(reason.substr(at + 5));
  auto with_sp = [&](int n) {
    auto args = base;
    args.insert(args.end(), {"--sp", std::to_string(n)});
    return run_cli(args).exit_code;
  };
  EXPECT_EQ(with_sp(sp), 0) << reason;
  if (sp > 2) {
    EXPECT_EQ(with_sp(sp / 2), 1) << reason;
  }
}

}  // namespace
