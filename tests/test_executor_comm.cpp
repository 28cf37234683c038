// The in-process communicator (executor/thread_comm.h) and the memory tracker (executor/memory.h).
#include <gtest/gtest.h>

#include <Eigen/Core>
#include <atomic>
#include <chrono>
#include <thread>
#include <vector>

#include "common/errors.h"
#include "executor/cpu_backend.h"
#include "executor/memory.h"
#include "executor/thread_comm.h"

namespace zeroplan::exec {
namespace {

// Runs fn(rank, comm) on n thread ranks.
template <class F>
void on_ranks(int n, F fn) {
  auto world = std::make_shared<ThreadWorld>(n);
  std::vector<std::thread> ts;
  for (int r = 0; r < n; ++r)
    ts.emplace_back([&, r] {
      ThreadCommunicator c(world, r);
      fn(r, c);
    });
  for (auto& t : ts) t.join();
}

TEST(ThreadComm, CollectivesComputeAndCountBusBytes) {
  constexpr int n = 4;
  on_ranks(n, [](int r, ThreadCommunicator& c) {
    // all-reduce of 6 floats: rank r contributes r+1 everywhere; sum 1+2+3+4 = 10.
    std::vector<float> a(6, static_cast<float>(r + 1));
    c.all_reduce(a.data(), 6, DType::F32);
    for (float v : a) EXPECT_EQ(v, 10.0f);
    // reduce-scatter: send 4 chunks of 2; chunk q of rank r holds 10q + r; rank r gets sum_r'(10r + r').
    std::vector<float> send(8), recv(2);
    for (int q = 0; q < n; ++q) send[2 * q] = send[2 * q + 1] = static_cast<float>(10 * q + r);
    c.reduce_scatter(send.data(), recv.data(), 2, DType::F32);
    EXPECT_EQ(recv[0], static_cast<float>(40 * r + 6));
    // all-gather in place: rank r's chunk (3 elements) sits at r*3 of the receive buffer.
    std::vector<Eigen::bfloat16> g(12, Eigen::bfloat16(0.0f));
    for (int i = 0; i < 3; ++i) g[static_cast<size_t>(3 * r + i)] = Eigen::bfloat16(static_cast<float>(r));
    c.all_gather(g.data() + 3 * r, g.data(), 3, DType::BF16);
    for (int i = 0; i < 12; ++i)
      EXPECT_EQ(static_cast<float>(g[static_cast<size_t>(i)]), static_cast<float>(i / 3));
    std::vector<float> b(5, r == 2 ? 7.0f : 0.0f);
    c.broadcast(b.data(), 5, DType::F32, 2);
    for (float v : b) EXPECT_EQ(v, 7.0f);
    // Bytes per rank, nccl-tests bus factors with S the full message (executor/communicator.h):
    //   all-reduce 24 B x 2(4-1)/4 = 36; reduce-scatter S = 32 B x 3/4 = 24; all-gather S = 24 B x 3/4 = 18;
    //   broadcast 20 B.
    const CommCounters& k = c.counters();
    EXPECT_EQ(k.bytes_sent[static_cast<int>(CollKind::AllReduce)], 36);
    EXPECT_EQ(k.bytes_sent[static_cast<int>(CollKind::ReduceScatter)], 24);
    EXPECT_EQ(k.bytes_sent[static_cast<int>(CollKind::AllGather)], 18);
    EXPECT_EQ(k.bytes_sent[static_cast<int>(CollKind::Broadcast)], 20);
    EXPECT_EQ(k.total_bytes_sent(), 98);
  });
}

// bf16 sums are rounded once after an fp32 sum in rank order: the same inputs give the same bits
// however the threads are scheduled.
TEST(ThreadComm, Bf16AllReduceIsReproducible) {
  std::vector<float> first;
  for (int trial = 0; trial < 5; ++trial) {
    std::vector<float> out(64);
    on_ranks(3, [&](int r, ThreadCommunicator& c) {
      std::vector<Eigen::bfloat16> a(64);
      for (int i = 0; i < 64; ++i)
        a[static_cast<size_t>(i)] =
            Eigen::bfloat16(0.1f * static_cast<float>(i * (r + 1)) + 1e-3f * static_cast<float>(r));
      c.all_reduce(a.data(), 64, DType::BF16);
      if (r == 0)
        for (int i = 0; i < 64; ++i)
          out[static_cast<size_t>(i)] = static_cast<float>(a[static_cast<size_t>(i)]);
    });
    if (trial == 0)
      first = out;
    else
      EXPECT_EQ(out, first);
  }
}

TEST(MemoryTracker, PeaksPerCategoryAndPhase) {
  CpuBackend be;
  MemoryTracker tr;
  tr.set_phase(StepPhase::Forward);
  DeviceBuffer p(be, tr, MemTier::Device, MemCategory::Parameters, 100, DType::BF16);  // 200 B
  {
    DeviceBuffer a(be, tr, MemTier::Device, MemCategory::Activations, 50, DType::F32);  // 200 B
    tr.set_phase(StepPhase::Backward);
    DeviceBuffer g(be, tr, MemTier::Device, MemCategory::Gradients, 30, DType::F32);  // 120 B
  }
  tr.set_phase(StepPhase::Step);
  DeviceBuffer h(be, tr, MemTier::Host, MemCategory::OptimizerStates, 10, DType::F32);  // host 40 B
  const TierUsage& d = tr.device();
  EXPECT_EQ(d.peak, 520);
  EXPECT_EQ(d.peak_phase, StepPhase::Backward);
  EXPECT_EQ(d.at_peak[static_cast<int>(MemCategory::Activations)], 200);
  EXPECT_EQ(d.phase_peak[0], 400);
  EXPECT_EQ(d.phase_peak[2], 200);  // only the parameters are live in the step
  EXPECT_EQ(d.live_total(), 200);
  EXPECT_EQ(tr.host().peak, 40);
  // 256-byte allocation granularity: 200 -> 256 and 120 -> 256, at most 56 + 56 + 136 bytes extra.
  EXPECT_EQ(tr.alignment_bytes_peak(), 56 + 56 + 136);
}

// A rank that fails releases the others from their collective instead of leaving them waiting.
TEST(ThreadComm, AbortReleasesWaitingRanks) {
  auto world = std::make_shared<ThreadWorld>(3);
  std::atomic<int> released{0};
  std::vector<std::thread> ts;
  for (int r = 1; r < 3; ++r)
    ts.emplace_back([&, r] {
      ThreadCommunicator c(world, r);
      std::vector<float> a(4, 1.0f);
      try {
        c.all_reduce(a.data(), 4, DType::F32);  // rank 0 never joins
      } catch (const InternalError&) {
        released++;
      }
    });
  ThreadCommunicator c0(world, 0);
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  c0.abort();
  for (auto& t : ts) t.join();
  EXPECT_EQ(released.load(), 2);
}

TEST(CachingPool, ReusesReleasedBlocksAndCountsReserved) {
  CpuBackend be;
  MemoryTracker tr;
  CachingPool pool(be);
  void* first = nullptr;
  {
    DeviceBuffer a(pool, tr, MemTier::Device, MemCategory::Activations, 1000, DType::F32);  // 4000 -> 4096 B
    first = a.data();
  }
  DeviceBuffer b(pool, tr, MemTier::Device, MemCategory::Activations, 1000, DType::F32);
  EXPECT_EQ(b.data(), first);  // same rounded size: the cached block comes back
  DeviceBuffer c(pool, tr, MemTier::Device, MemCategory::Buffers, 10, DType::BF16);  // 20 -> 256 B, new block
  EXPECT_EQ(pool.reserved(MemTier::Device), 4096 + 256);
  EXPECT_EQ(tr.device().live_total(), 4000 + 20);  // the tracker counts requested bytes
}

}  // namespace
}  // namespace zeroplan::exec
