// Communicator::split (executor/communicator.h, issue 25 item 4) on thread ranks: groups as
// MPI_Comm_split forms them (same color together, ordered by key then by parent rank, a negative
// color in none), each group's collectives independent of the others and of the parent, and every
// byte count with the group's own size in the nccl-tests bus factors. Expected values are hand sums
// of small integers (exact in fp32 and bf16) and the bus factors written out.
#include <gtest/gtest.h>

#include <functional>
#include <memory>
#include <thread>
#include <vector>

#include "common/errors.h"
#include "executor/backend.h"
#include "executor/communicator.h"
#include "executor/engine.h"
#include "executor/stream_checker.h"
#include "executor/test_models.h"

namespace zeroplan::exec {
namespace {

// Runs body(rank, communicator) on every rank of a 4-rank cpu runtime, one thread per rank.
void on_ranks(Runtime& rt, const std::function<void(int, Communicator&)>& body) {
  std::vector<std::thread> t;
  for (int r : rt.local_ranks()) t.emplace_back([&, r] { body(r, rt.communicator(r)); });
  for (auto& x : t) x.join();
}

// Two DP groups of 2 out of 4 ranks, as a TP 2 x DP 2 layout makes them: color = rank % 2 gives
// {0, 2} and {1, 3}. Rank r contributes (r + 1) * (i + 1) at element i, so group {0, 2} sums to
// 4 (i + 1) and group {1, 3} to 6 (i + 1).
TEST(CommunicatorSplit, TwoGroupsOfTwoReduceIndependently) {
  auto rt = make_cpu_runtime(4);
  std::vector<std::vector<float>> reduced(4), scattered(4), gathered(4);
  std::vector<int> group_rank(4, -1), group_size(4, -1);
  std::vector<CommCounters> counters(4);
  on_ranks(*rt, [&](int r, Communicator& world) {
    std::unique_ptr<Communicator> dp = world.split(r % 2, r);
    ASSERT_NE(dp, nullptr);
    group_rank[r] = dp->rank();
    group_size[r] = dp->world_size();
    std::vector<float> v(6);
    for (int i = 0; i < 6; ++i) v[i] = static_cast<float>((r + 1) * (i + 1));
    dp->all_reduce(v.data(), 6, DType::F32);
    reduced[r] = v;
    std::vector<float> rs(3);
    for (int i = 0; i < 6; ++i) v[i] = static_cast<float>((r + 1) * (i + 1));
    dp->reduce_scatter(v.data(), rs.data(), 3, DType::F32);
    scattered[r] = rs;
    std::vector<float> ag(4);
    const float mine[2] = {static_cast<float>(10 * r), static_cast<float>(10 * r + 1)};
    dp->all_gather(mine, ag.data(), 2, DType::F32);
    gathered[r] = ag;
    counters[r] = dp->counters();
  });
  // New ranks: by key (= the parent rank) within each color.
  EXPECT_EQ(group_rank, (std::vector<int>{0, 0, 1, 1}));
  EXPECT_EQ(group_size, (std::vector<int>{2, 2, 2, 2}));
  for (int r = 0; r < 4; ++r) {
    const float f = r % 2 == 0 ? 4.0f : 6.0f;  // (1 + 3) or (2 + 4)
    for (int i = 0; i < 6; ++i) EXPECT_EQ(reduced[r][i], f * static_cast<float>(i + 1)) << r << " " << i;
    // Reduce-scatter: group rank g gets elements 3g..3g+2 of the sum.
    const int g = group_rank[r];
    for (int i = 0; i < 3; ++i) EXPECT_EQ(scattered[r][i], f * static_cast<float>(3 * g + i + 1));
    // All-gather: the group's members in group-rank order, parent ranks {0, 2} or {1, 3}.
    const float a = static_cast<float>(r % 2), b = a + 2;
    EXPECT_EQ(gathered[r], (std::vector<float>{10.0f * a, 10.0f * a + 1, 10.0f * b, 10.0f * b + 1}));
    // Bus bytes with n = 2: all-reduce 2 (n-1)/n x 24 B = 24; reduce-scatter and all-gather
    // (n-1)/n x S with S = 24 B and 16 B: 12 and 8.
    const CommCounters& c = counters[r];
    EXPECT_EQ(c.bytes_sent[static_cast<int>(CollKind::AllReduce)], 24);
    EXPECT_EQ(c.bytes_sent[static_cast<int>(CollKind::ReduceScatter)], 12);
    EXPECT_EQ(c.bytes_sent[static_cast<int>(CollKind::AllGather)], 8);
    EXPECT_EQ(c.calls[static_cast<int>(CollKind::AllReduce)], 1);
  }
  // The parent counted none of the groups' traffic.
  for (int r = 0; r < 4; ++r) EXPECT_EQ(rt->communicator(r).counters().total_bytes_sent(), 0);
}

// Key orders the group (MPI_Comm_split: "ordered by key, ties broken by the old rank"): keys
// 3 - r reverse the ranks; ties (key 0 for all) keep the parent's order.
TEST(CommunicatorSplit, KeyOrdersTheGroupAndTiesKeepTheParentOrder) {
  auto rt = make_cpu_runtime(4);
  std::vector<int> reversed(4), tied(4);
  on_ranks(*rt, [&](int r, Communicator& world) {
    reversed[r] = world.split(7, 3 - r)->rank();
    tied[r] = world.split(0, 0)->rank();
  });
  EXPECT_EQ(reversed, (std::vector<int>{3, 2, 1, 0}));
  EXPECT_EQ(tied, (std::vector<int>{0, 1, 2, 3}));
}

// A negative color joins no group; the others form one of 3, and the parent keeps working
// alongside the group (its all-reduce over 4 ranks: 1 + 2 + 3 + 4 = 10).
TEST(CommunicatorSplit, NegativeColorJoinsNoneAndTheParentStillWorks) {
  auto rt = make_cpu_runtime(4);
  std::vector<int> size(4, -1);
  std::vector<float> group_sum(4, -1), world_sum(4, -1);
  on_ranks(*rt, [&](int r, Communicator& world) {
    std::unique_ptr<Communicator> g = world.split(r == 3 ? -1 : 5, r);
    float x = static_cast<float>(r + 1);
    if (g) {
      size[r] = g->world_size();
      g->all_reduce(&x, 1, DType::F32);
      group_sum[r] = x;
    }
    float y = static_cast<float>(r + 1);
    world.all_reduce(&y, 1, DType::F32);
    world_sum[r] = y;
  });
  EXPECT_EQ(size, (std::vector<int>{3, 3, 3, -1}));
  EXPECT_EQ(group_sum, (std::vector<float>{6, 6, 6, -1}));  // 1 + 2 + 3
  EXPECT_EQ(world_sum, (std::vector<float>{10, 10, 10, 10}));
}

// bf16 through a group: 1.5 + 2.5 = 4 exactly (both and the sum representable in bf16).
TEST(CommunicatorSplit, Bf16SumsAreExactForRepresentableValues) {
  auto rt = make_cpu_runtime(4);
  std::vector<uint16_t> out(4);
  on_ranks(*rt, [&](int r, Communicator& world) {
    auto g = world.split(r / 2, r);  // {0, 1} and {2, 3}
    // bf16 bit patterns: 1.5 = 0x3FC0, 2.5 = 0x4020; their sum 4.0 = 0x4080.
    uint16_t v = r % 2 == 0 ? 0x3FC0 : 0x4020;
    g->all_reduce(&v, 1, DType::BF16);
    out[r] = v;
  });
  EXPECT_EQ(out, (std::vector<uint16_t>{0x4080, 0x4080, 0x4080, 0x4080}));
}

// The stream-checking decorator splits its inner communicator and wraps the group the same way.
TEST(CommunicatorSplit, StreamCheckingRuntimeWrapsTheGroup) {
  auto rt = make_stream_checking_runtime(make_cpu_runtime(2));
  std::vector<float> sum(2);
  on_ranks(*rt, [&](int r, Communicator& world) {
    auto g = world.split(0, r);
    float x = static_cast<float>(r + 1);
    g->all_reduce(&x, 1, DType::F32);
    sum[r] = x;
  });
  EXPECT_EQ(sum, (std::vector<float>{3, 3}));
}

// The engine in DP groups (RunConfig::parallel): 4 thread ranks with sp 2 run two DP groups of 2
// ({0, 2} and {1, 3}); SP shards nothing in the engine yet, so each group trains its own replica on
// the data of its DP ranks, exactly what a 2-rank run trains: the same losses, parameters and bytes
// per rank (rank 0 and 2 of the 4 are DP ranks 0 and 1, as are 1 and 3), at every ZeRO stage.
TEST(CommunicatorSplit, EngineRunsItsCollectivesInTheDpGroup) {
  for (int stage : {0, 1, 2, 3}) {
    RunConfig c;
    c.model = tiny_llama_micro_spec();
    c.micro_batch = 2;
    c.seq_len = 16;
    c.steps = 2;
    c.zero.stage = stage;
    c.zero.reduce_bucket_size = 12000;  // several buckets per backward (tests/test_executor_numerics.cpp)
    c.zero.param_persistence_threshold = 100;
    auto two = make_cpu_runtime(2);
    const RunResult a = run_training(c, *two);
    // Ulysses SP shards nothing in the engine yet, so each DP group trains its own replica (AutoTP does
    // shard: tests/test_executor_tensor_parallel.cpp).
    c.parallel.sp = 2;
    auto four = make_cpu_runtime(4);
    const RunResult b = run_training(c, *four);
    EXPECT_EQ(b.loss_per_step, a.loss_per_step) << "stage " << stage;
    EXPECT_EQ(b.final_params, a.final_params) << "stage " << stage;
    ASSERT_EQ(b.ranks.size(), 4u);
    for (int r = 0; r < 4; ++r) {
      EXPECT_EQ(b.ranks[r].rank, r);
      const RankMeasurement& m = a.ranks[static_cast<size_t>(r / 2)];  // DP rank r / 2 of its group
      EXPECT_EQ(b.ranks[r].comm_bytes, m.comm_bytes) << "stage " << stage << " rank " << r;
      EXPECT_EQ(b.ranks[r].device.category_peak, m.device.category_peak)
          << "stage " << stage << " rank " << r;
    }
  }
}

// A layout the engine cannot run is refused before any rank starts.
TEST(CommunicatorSplit, EngineRefusesALayoutThatDoesNotDivideTheRanks) {
  RunConfig c;
  c.model = tiny_llama_micro_spec();
  c.parallel.tp = 3;
  auto four = make_cpu_runtime(4);
  EXPECT_THROW(run_training(c, *four), UserError);
}

}  // namespace
}  // namespace zeroplan::exec
