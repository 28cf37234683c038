// --max-seq (issue 27 item 3, without sequence parallelism yet): the answer is checked against the
// plan search it summarises, run independently: at the reported length `zeroplan --seq-len S` finds a
// plan, at S + 1024 (the search's step) it finds none, and the reported plan is the one the plan search
// recommends at S. User errors exit 2 with one line.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "tests/cli_runner.h"

namespace {

using zeroplan::testing::run_cli;

nlohmann::json plan_at(int64_t seq) {
  const auto r = run_cli({"--model", "7b", "--gpus", "8xA100", "--micro-batch", "1", "--seq-len",
                          std::to_string(seq), "--json"});
  EXPECT_TRUE(r.exit_code == 0 || r.exit_code == 1) << r.err;
  return nlohmann::json::parse(r.out);
}

TEST(CliMaxSeq, TheAnswerIsWhereThePlanSearchStopsFitting) {
  const auto r = run_cli({"--model", "7b", "--gpus", "8xA100", "--max-seq", "--json"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto j = nlohmann::json::parse(r.out);
  const int64_t s = j["max_seq_len"].get<int64_t>();
  ASSERT_GT(s, 0);
  EXPECT_EQ(s % 1024, 0);
  EXPECT_EQ(j["next_seq_len"].get<int64_t>(), s + 1024);
  const auto at = plan_at(s);
  ASSERT_FALSE(at["recommendation"].is_null()) << "seq " << s;
  EXPECT_EQ(at["recommendation"]["memory"]["gpu"]["peak"], j["recommendation"]["memory"]["gpu"]["peak"]);
  EXPECT_TRUE(plan_at(s + 1024)["recommendation"].is_null()) << "seq " << s + 1024;
  // The table: doubling from 1024, every fitting row below the answer, the last row the first that fails.
  const auto& sweep = j["sweep"];
  ASSERT_GE(sweep.size(), 2u);
  EXPECT_EQ(sweep[0]["seq_len"], 1024);
  EXPECT_FALSE(sweep.back()["fits"].get<bool>());
  for (size_t i = 0; i + 1 < sweep.size(); ++i) EXPECT_TRUE(sweep[i]["fits"].get<bool>());
}

TEST(CliMaxSeq, UserErrors) {
  zeroplan::testing::expect_cli_user_error(
      {"--model", "7b", "--gpus", "8xA100", "--max-seq", "--emit", "/tmp/x.json"}, "--max-seq");
}

}  // namespace
