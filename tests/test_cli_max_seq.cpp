// --max-seq (issue 27 item 3): the answer is checked against the plan search it summarises, run
// independently: at the reported length `zeroplan --seq-len S --sp N` finds a plan, at S + 1024 (the
// search's step) it finds none, and the reported plan is the one the plan search recommends at S.
// Without --sp it plans with the largest Ulysses size one node and the heads allow (8 for Llama-2-7B's 32
// heads on 8 GPUs). Where nothing fits with the checkpoints on the GPU, --max-seq also tries them in host
// memory (--checkpoint-offload cpu), so the check runs the plan search with the same choice. User errors
// exit 2 with one line.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "tests/cli_runner.h"

namespace {

using zeroplan::testing::run_cli;

nlohmann::json plan_at(int64_t seq, bool offload, int sp) {
  const auto r =
      run_cli({"--model", "7b", "--gpus", "8xA100", "--micro-batch", "1", "--seq-len", std::to_string(seq),
               "--checkpoint-offload", offload ? "cpu" : "none", "--sp", std::to_string(sp), "--json"});
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
  const int sp = j["sequence_parallel_size"].get<int>();
  EXPECT_EQ(sp, 8);  // 32 heads, 32 KV heads, 8 GPUs per node
  EXPECT_EQ(j["recommendation"]["sequence_parallel_size"], sp);
  const bool offloaded = j["recommendation"].contains("checkpoint_offload");
  const auto at = plan_at(s, offloaded, sp);
  ASSERT_FALSE(at["recommendation"].is_null()) << "seq " << s;
  EXPECT_EQ(at["recommendation"]["memory"]["gpu"]["peak"], j["recommendation"]["memory"]["gpu"]["peak"]);
  EXPECT_TRUE(plan_at(s + 1024, false, sp)["recommendation"].is_null()) << "seq " << s + 1024;
  EXPECT_TRUE(plan_at(s + 1024, true, sp)["recommendation"].is_null()) << "seq " << s + 1024;
  // With the offload ruled out the answer is where the search without it stops fitting, no longer.
  const auto none =
      run_cli({"--model", "7b", "--gpus", "8xA100", "--max-seq", "--checkpoint-offload", "none", "--json"});
  ASSERT_EQ(none.exit_code, 0) << none.err;
  const int64_t s0 = nlohmann::json::parse(none.out)["max_seq_len"].get<int64_t>();
  EXPECT_LE(s0, s);
  EXPECT_FALSE(plan_at(s0, false, sp)["recommendation"].is_null());
  EXPECT_TRUE(plan_at(s0 + 1024, false, sp)["recommendation"].is_null());
  // Without sequence parallelism (--sp 1) the answer is shorter: each GPU holds the whole sequence.
  const auto one = run_cli({"--model", "7b", "--gpus", "8xA100", "--max-seq", "--sp", "1", "--json"});
  ASSERT_EQ(one.exit_code, 0) << one.err;
  const auto j1 = nlohmann::json::parse(one.out);
  EXPECT_EQ(j1["sequence_parallel_size"], 1);
  const int64_t s1 = j1["max_seq_len"].get<int64_t>();
  EXPECT_LT(s1, s);
  EXPECT_FALSE(
      plan_at(s1, j1["recommendation"].contains("checkpoint_offload"), 1)["recommendation"].is_null());
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
  // 3 divides neither the 8 GPUs nor the 1024-token step: the layout rule speaks first.
  zeroplan::testing::expect_cli_user_error({"--model", "7b", "--gpus", "8xA100", "--max-seq", "--sp", "3"},
                                           "--sp");
}

// Past max_position_embeddings the note follows the position encoding: GPT-2's learned table (1,024 rows,
// GPT2Config n_positions) cannot index further; Granite-4.0-H's NoPE layers run any length.
TEST(CliMaxSeq, TheNoteBeyondThePositionsFollowsTheEncoding) {
  const auto gpt2 = run_cli({"--model", "gpt2", "--gpus", "1xA100-80GB", "--max-seq"});
  ASSERT_EQ(gpt2.exit_code, 0) << gpt2.err;
  EXPECT_NE(gpt2.out.find("learned position table has no rows past it"), std::string::npos) << gpt2.out;
  EXPECT_EQ(gpt2.out.find("RoPE"), std::string::npos) << gpt2.out;
  const auto granite = run_cli(
      {"--model", std::string(ZEROPLAN_SOURCE_DIR) + "/tests/data/models/hf_defaults/granitemoehybrid.json",
       "--gpus", "1xH100", "--max-seq"});
  ASSERT_EQ(granite.exit_code, 0) << granite.err;
  EXPECT_NE(granite.out.find("no position encoding (NoPE)"), std::string::npos) << granite.out;
  EXPECT_EQ(granite.out.find("RoPE"), std::string::npos) << granite.out;
}

}  // namespace
