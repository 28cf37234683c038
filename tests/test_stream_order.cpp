// The stream-order checker (executor/stream_checker.h): planted races are caught, correct ordering
// is accepted, and the engine's Compute/Comm choreography is race-free in every ZeRO stage, rank
// count, overlap_comm, checkpointing, offload, accumulation and clipping combination.
#include <gtest/gtest.h>

#include <ostream>
#include <string>
#include <vector>

#include "executor/cpu_backend.h"
#include "executor/engine.h"
#include "executor/memory.h"
#include "executor/stream_checker.h"
#include "executor/test_models.h"
#include "executor/thread_comm.h"

namespace zeroplan::exec {
namespace {

std::string list(const std::vector<StreamViolation>& vs, size_t max = 8) {
  std::string s;
  for (size_t i = 0; i < vs.size() && i < max; ++i) s += "  " + vs[i].describe() + "\n";
  return s;
}

// ---------------------------------------------------------------------------------------------
// Planted races: each test issues the calls a buggy engine would, on the real cpu backend.
class PlantedRace : public ::testing::Test {
 protected:
  CpuBackend cpu_;
  StreamCheckingBackend be_{cpu_};
  static constexpr int64_t kN = 256;  // floats
  void* a_ = be_.allocate(kN * 4, MemTier::Device);
  void* b_ = be_.allocate(kN * 4, MemTier::Device);
  void TearDown() override {
    be_.release(a_, MemTier::Device);
    be_.release(b_, MemTier::Device);
  }
  // Comm writes a (what a reduction on the communication stream does to its bucket).
  void write_a_on_comm() {
    be_.set_stream(Stream::Comm);
    be_.zero(a_, kN * 4, MemTier::Device);
    be_.set_stream(Stream::Compute);
  }
  // Compute reads a (and writes b, which nobody else touched).
  void read_a_on_compute() { be_.cast(b_, DType::F32, a_, DType::F32, kN); }
};

TEST_F(PlantedRace, CommWriteThenComputeReadWithoutWaitIsOneViolation) {
  write_a_on_comm();
  read_a_on_compute();
  const auto& v = be_.violations();
  ASSERT_EQ(v.size(), 1u) << list(v);
  EXPECT_EQ(v[0].kind, HazardKind::ReadAfterWrite);
  EXPECT_EQ(v[0].op, "cast");
  EXPECT_EQ(v[0].agent, Agent::Compute);
  EXPECT_EQ(v[0].earlier_op, "zero");
  EXPECT_EQ(v[0].earlier_agent, Agent::Comm);
  EXPECT_EQ(v[0].begin, reinterpret_cast<uintptr_t>(a_));
  EXPECT_EQ(v[0].end, reinterpret_cast<uintptr_t>(a_) + kN * 4);
  EXPECT_EQ(be_.model().violation_count(), 1);
}

TEST_F(PlantedRace, WaitComputeOnCommOrdersTheRead) {
  write_a_on_comm();
  be_.wait(Stream::Compute, Stream::Comm);
  read_a_on_compute();
  EXPECT_TRUE(be_.violations().empty()) << list(be_.violations());
}

TEST_F(PlantedRace, WaitInTheWrongDirectionDoesNotOrder) {
  write_a_on_comm();
  be_.wait(Stream::Comm, Stream::Compute);  // Comm waits for Compute: says nothing about Compute
  read_a_on_compute();
  EXPECT_EQ(be_.model().violation_count(), 1);
}

TEST_F(PlantedRace, WaitIssuedBeforeTheWriteDoesNotCoverIt) {
  be_.wait(Stream::Compute, Stream::Comm);  // "everything issued so far on Comm": nothing yet
  write_a_on_comm();
  read_a_on_compute();
  EXPECT_EQ(be_.model().violation_count(), 1);
}

TEST_F(PlantedRace, SynchronizeOrdersEverything) {
  write_a_on_comm();
  be_.synchronize();
  read_a_on_compute();
  // And the other direction: Compute reads b, Comm overwrites it after a synchronize.
  be_.synchronize();
  be_.set_stream(Stream::Comm);
  be_.zero(b_, kN * 4, MemTier::Device);
  be_.set_stream(Stream::Compute);
  EXPECT_TRUE(be_.violations().empty()) << list(be_.violations());
}

TEST_F(PlantedRace, ComputeReadThenCommOverwriteIsWriteAfterRead) {
  be_.zero(a_, kN * 4, MemTier::Device);  // Compute writes, Compute reads: program order
  read_a_on_compute();
  be_.set_stream(Stream::Comm);
  be_.zero(a_, kN * 4, MemTier::Device);  // Comm overwrites while Compute may still read
  const auto& v = be_.violations();
  ASSERT_EQ(v.size(), 2u) << list(v);  // after Compute's write (WAW) and Compute's read (WAR)
  EXPECT_EQ(v[0].kind, HazardKind::WriteAfterRead);
  EXPECT_EQ(v[0].earlier_op, "cast");
  EXPECT_EQ(v[1].kind, HazardKind::WriteAfterWrite);
  EXPECT_EQ(v[1].earlier_op, "zero");
}

// An event orders only what its stream had received when it was recorded: Compute waiting for the
// event after Comm's write of a may read a, but not b, which Comm wrote after the record.
TEST_F(PlantedRace, EventOrdersOnlyTheWorkBeforeItsRecord) {
  write_a_on_comm();
  const int64_t ev = be_.record_event(Stream::Comm);
  be_.set_stream(Stream::Comm);
  be_.zero(b_, kN * 4, MemTier::Device);  // after the record
  be_.set_stream(Stream::Compute);
  be_.wait_event(Stream::Compute, ev);
  be_.scale(a_, DType::F32, kN, 2.0f);  // a: ordered by the event
  EXPECT_EQ(be_.violations().size(), 0u) << list(be_.violations());
  be_.scale(b_, DType::F32, kN, 2.0f);  // b: not (scale reads and writes: RAW and WAW)
  const auto& v = be_.violations();
  ASSERT_EQ(v.size(), 2u) << list(v);
  EXPECT_EQ(v[0].kind, HazardKind::ReadAfterWrite);
  EXPECT_EQ(v[0].earlier_agent, Agent::Comm);
  EXPECT_EQ(v[1].kind, HazardKind::WriteAfterWrite);
}

// Releasing a block to the pool while Comm still writes it is reported even if nothing reuses it
// (the pool may hand it to Compute work next); waiting for Comm first makes the release safe.
TEST_F(PlantedRace, PoolReleaseWhileCommStillUsesTheBlockIsCaught) {
  CachingPool pool(be_);
  for (bool wait_first : {false, true}) {
    const size_t before = be_.violations().size();
    void* p = pool.take(kN * 4, MemTier::Device);
    be_.set_stream(Stream::Comm);
    be_.wait(Stream::Comm, Stream::Compute);  // as the engine's begin_comm_stream: after Compute so far
    be_.zero(p, kN * 4, MemTier::Device);     // e.g. a reduction's staging buffer, on Comm
    be_.set_stream(Stream::Compute);
    if (wait_first) be_.wait(Stream::Compute, Stream::Comm);
    pool.give(p, kN * 4, MemTier::Device);
    const auto& v = be_.violations();
    ASSERT_EQ(v.size() - before, wait_first ? 0u : 1u) << list(v);
    if (!wait_first) {
      EXPECT_EQ(v.back().kind, HazardKind::WriteAfterWrite);
      EXPECT_EQ(v.back().earlier_agent, Agent::Comm);
    }
  }
}

// The engine's own caching pool hands a released block to the next request of the same size
// (executor/memory.h): the new owner writing it on Comm while Compute may still read it for the old
// owner is the caching-allocator reuse hazard.
TEST_F(PlantedRace, PoolBlockReusedAcrossStreamsWithoutWaitIsCaught) {
  CachingPool pool(be_);
  void* p = pool.take(kN * 4, MemTier::Device);
  be_.zero(p, kN * 4, MemTier::Device);
  be_.cast(b_, DType::F32, p, DType::F32, kN);  // last use by the old owner: a Compute read
  be_.synchronize();                            // orders the write above, not ...
  be_.cast(b_, DType::F32, p, DType::F32, kN);  // ... this later read
  pool.give(p, kN * 4, MemTier::Device);
  void* q = pool.take(kN * 4, MemTier::Device);
  ASSERT_EQ(q, p);  // the pool's documented reuse
  be_.set_stream(Stream::Comm);
  be_.zero(q, kN * 4, MemTier::Device);  // new owner writes on Comm
  // The pool's release is itself a Compute write (Backend::pool_released), ordered after the old
  // owner's Compute read; the new owner's Comm write is ordered after neither.
  const auto& v = be_.violations();
  ASSERT_EQ(v.size(), 1u) << list(v);
  EXPECT_EQ(v[0].kind, HazardKind::WriteAfterWrite);
  EXPECT_EQ(v[0].earlier_agent, Agent::Compute);
  pool.give(q, kN * 4, MemTier::Device);
}

TEST_F(PlantedRace, PoolBlockReusedAfterWaitIsFine) {
  CachingPool pool(be_);
  void* p = pool.take(kN * 4, MemTier::Device);
  be_.zero(p, kN * 4, MemTier::Device);
  be_.cast(b_, DType::F32, p, DType::F32, kN);
  pool.give(p, kN * 4, MemTier::Device);
  void* q = pool.take(kN * 4, MemTier::Device);
  ASSERT_EQ(q, p);
  be_.wait(Stream::Comm, Stream::Compute);
  be_.set_stream(Stream::Comm);
  be_.zero(q, kN * 4, MemTier::Device);
  EXPECT_TRUE(be_.violations().empty()) << list(be_.violations());
  pool.give(q, kN * 4, MemTier::Device);
}

// Backend::release keeps the history: whoever gets the address next inherits it.
TEST_F(PlantedRace, ReleaseKeepsTheAccessHistory) {
  void* p = be_.allocate(kN * 4, MemTier::Device);
  be_.zero(p, kN * 4, MemTier::Device);
  be_.cast(b_, DType::F32, p, DType::F32, kN);  // Compute read
  be_.release(p, MemTier::Device);
  // A new owner of these bytes writes them on Comm (replayed on the model: the cpu backend's
  // aligned_alloc need not return the same address again).
  be_.model().operation(Agent::Comm, "new owner", {}, {{p, kN * 4}});
  ASSERT_EQ(be_.violations().size(), 2u) << list(be_.violations());
  EXPECT_EQ(be_.violations()[0].kind, HazardKind::WriteAfterRead);
}

// Only the conflicting part of a range is reported.
TEST_F(PlantedRace, PartialOverlapReportsTheOverlap) {
  be_.set_stream(Stream::Comm);
  be_.zero(static_cast<char*>(a_) + 512, 256, MemTier::Device);  // bytes [512, 768) of a
  be_.set_stream(Stream::Compute);
  read_a_on_compute();
  ASSERT_EQ(be_.violations().size(), 1u);
  EXPECT_EQ(be_.violations()[0].begin, reinterpret_cast<uintptr_t>(a_) + 512);
  EXPECT_EQ(be_.violations()[0].end, reinterpret_cast<uintptr_t>(a_) + 768);
}

// upload/download are synchronous: a host buffer downloaded on Comm can be uploaded on Compute.
// An asynchronous device-to-host copy on Comm is not: CPU Adam (host tier) waits only for the
// current stream (cuda_backend.cpp adam_step), so it races with the copy.
TEST_F(PlantedRace, HostOptimizerAfterAsyncCopyOnOtherStreamIsCaught) {
  const int64_t n = 64;
  void* host = be_.allocate(4 * n * 4, MemTier::Host);
  be_.zero(host, 4 * n * 4, MemTier::Host);
  float* f = static_cast<float*>(host);
  be_.set_stream(Stream::Comm);
  be_.copy(f + 3 * n, a_, n * 4, CopyKind::DeviceToHost);  // gradient to the host, asynchronous
  be_.set_stream(Stream::Compute);
  AdamChunk c;
  c.param = f;
  c.exp_avg = f + n;
  c.exp_avg_sq = f + 2 * n;
  c.grad = f + 3 * n;
  c.n = n;
  c.param16 = nullptr;
  be_.adam_step(std::span<const AdamChunk>(&c, 1), AdamParams{}, MemTier::Host);
  ASSERT_EQ(be_.violations().size(), 1u) << list(be_.violations());
  EXPECT_EQ(be_.violations()[0].agent, Agent::Host);
  EXPECT_EQ(be_.violations()[0].earlier_agent, Agent::Comm);
  EXPECT_EQ(be_.violations()[0].earlier_op, "copy");
  // The same after synchronize(): fine.
  be_.set_stream(Stream::Comm);
  be_.copy(f + 3 * n, a_, n * 4, CopyKind::DeviceToHost);
  be_.set_stream(Stream::Compute);
  be_.synchronize();
  be_.adam_step(std::span<const AdamChunk>(&c, 1), AdamParams{}, MemTier::Host);
  EXPECT_EQ(be_.model().violation_count(), 1);
  be_.release(host, MemTier::Host);
}

// Work issued after a host operation is ordered after it (the host issues it later).
TEST_F(PlantedRace, StreamWorkIssuedAfterHostWorkIsOrdered) {
  void* host = be_.allocate(kN * 4, MemTier::Host);
  be_.set_stream(Stream::Comm);
  be_.zero(host, kN * 4, MemTier::Host);  // host memset after waiting for Comm
  be_.set_stream(Stream::Compute);
  be_.copy(a_, host, kN * 4, CopyKind::HostToDevice);
  EXPECT_TRUE(be_.violations().empty()) << list(be_.violations());
  be_.release(host, MemTier::Host);
}

TEST_F(PlantedRace, ViolationListIsCappedButCounted) {
  for (int i = 0; i < 100; ++i) {
    write_a_on_comm();
    read_a_on_compute();
  }
  EXPECT_EQ(be_.violations().size(), StreamOrderModel::kMaxViolations);
  // The first iteration is one read-after-write; every later one adds a write-after-read (Comm's
  // zero overwrites what Compute read in the previous iteration) to it: 1 + 2 x 99.
  EXPECT_EQ(be_.model().violation_count(), 199);
}

// Two collectives of one communicator on different streams must be ordered, even on disjoint
// buffers (NCCL runs them in issue order on every rank only if the streams are ordered).
TEST(StreamCheckingCommunicator, CollectivesOnBothStreamsMustBeOrdered) {
  auto world = std::make_shared<ThreadWorld>(1);
  ThreadCommunicator inner(world, 0);
  CpuBackend cpu;
  StreamCheckingBackend be(cpu);
  StreamCheckingCommunicator comm(inner, be);
  std::vector<float> x(8, 1.0f), y(8, 2.0f);
  be.set_stream(Stream::Comm);
  comm.all_reduce(x.data(), 8, DType::F32);
  be.set_stream(Stream::Compute);
  comm.all_reduce(y.data(), 8, DType::F32);  // disjoint data, but not ordered after the first
  ASSERT_EQ(be.violations().size(), 1u) << list(be.violations());
  EXPECT_EQ(be.violations()[0].kind, HazardKind::CollectiveOrder);
  EXPECT_EQ(be.violations()[0].earlier_agent, Agent::Comm);
  be.wait(Stream::Comm, Stream::Compute);
  be.set_stream(Stream::Comm);
  comm.all_reduce(x.data(), 8, DType::F32);  // ordered after the Compute one (and x's history)
  EXPECT_EQ(be.model().violation_count(), 1);
}

TEST(StreamCheckingCommunicator, CollectivesRunOnTheCurrentStreamAndMirrorCounters) {
  auto world = std::make_shared<ThreadWorld>(1);
  ThreadCommunicator inner(world, 0);
  CpuBackend cpu;
  StreamCheckingBackend be(cpu);
  StreamCheckingCommunicator comm(inner, be);
  std::vector<float> x(8, 1.0f), y(8, 0.0f);
  be.set_stream(Stream::Comm);
  comm.all_reduce(x.data(), 8, DType::F32);
  be.set_stream(Stream::Compute);
  comm.all_gather(x.data(), y.data(), 8, DType::F32);  // reads x, written on Comm: not ordered
  EXPECT_EQ(be.collectives_on(Stream::Comm), 1);
  EXPECT_EQ(be.collectives_on(Stream::Compute), 1);
  // The read of x (read-after-write) and the collective order (collective-order).
  ASSERT_EQ(be.violations().size(), 2u) << list(be.violations());
  EXPECT_EQ(be.violations()[0].kind, HazardKind::ReadAfterWrite);
  EXPECT_EQ(be.violations()[0].op, "all_gather");
  EXPECT_EQ(be.violations()[0].earlier_op, "all_reduce");
  EXPECT_EQ(be.violations()[1].kind, HazardKind::CollectiveOrder);
  // Counters: the wrapper reports what the inner communicator counted (1 all-reduce, 1 all-gather).
  EXPECT_EQ(comm.counters().calls[static_cast<int>(CollKind::AllReduce)], 1);
  EXPECT_EQ(comm.counters().calls[static_cast<int>(CollKind::AllGather)], 1);
  EXPECT_EQ(comm.counters().calls, inner.counters().calls);
  EXPECT_EQ(x[0], 1.0f);  // one rank: the sum is the value itself, and the call really ran
}

// ---------------------------------------------------------------------------------------------
// The engine through the checker.
struct Case {
  int stage = 0, world = 1;
  bool overlap = false, ckpt = false, offload = false;
  int64_t grad_accum = 1;
  float clip = 0.0f;
  bool mixed = true;
  bool small_model = false;
  int64_t lora_rank = 0;  // LoRA: frozen weights (gathered in stage 3, no gradients), adapters trained
};

std::string case_name(const Case& c);
void PrintTo(const Case& c, std::ostream* os) {
  *os << case_name(c);
}

std::string case_name(const Case& c) {
  std::string s = "stage" + std::to_string(c.stage) + "_N" + std::to_string(c.world);
  if (c.overlap) s += "_overlap";
  if (c.ckpt) s += "_ckpt";
  if (c.offload) s += "_offload";
  if (c.grad_accum > 1) s += "_ga" + std::to_string(c.grad_accum);
  if (c.clip > 0) s += "_clip";
  if (!c.mixed) s += "_fp32";
  if (c.small_model) s += "_small";
  if (c.lora_rank > 0) s += "_lora";
  return s;
}

std::vector<Case> engine_cases() {
  std::vector<Case> v;
  for (int stage = 0; stage <= 3; ++stage)
    for (int world : {1, 2, 4})
      for (bool overlap : {false, true})
        for (bool ckpt : {false, true}) v.push_back({stage, world, overlap, ckpt});
  for (int stage = 1; stage <= 3; ++stage)
    for (int world : {1, 2})
      for (bool overlap : {false, true}) v.push_back({stage, world, overlap, false, true});
  for (int stage = 0; stage <= 3; ++stage) {
    v.push_back({stage, 2, true, false, false, 2});               // accumulation
    v.push_back({stage, 2, true, stage == 3, false, 1, 0.05f});   // clipping (a small max norm: it clips)
    v.push_back({stage, 2, true, false, false, 1, 0.0f, false});  // fp32
  }
  for (int stage = 1; stage <= 3; ++stage) v.push_back({stage, 2, true, true, true, 2, 0.05f});
  v.push_back({3, 2, true, false, false, 1, 0.0f, true, true});  // tiny-llama-small
  v.push_back({2, 2, true, true, false, 1, 0.0f, true, true});
  for (int stage = 0; stage <= 3; ++stage)
    v.push_back({stage, 2, true, stage % 2 == 1, false, 2, 0.0f, true, false, 4});
  v.push_back({3, 2, true, true, true, 1, 0.0f, true, false, 4});
  return v;
}

RunConfig engine_config(const Case& k) {
  RunConfig c;
  c.model = k.small_model ? tiny_llama_small_spec() : tiny_llama_micro_spec();
  c.mixed_precision = k.mixed;
  c.micro_batch = 2;
  c.seq_len = 16;
  c.steps = 3;  // stage 3 records its trace in the first micro-step and prefetches from then on
  c.grad_accum = k.grad_accum;
  c.checkpointing = k.ckpt;
  c.gradient_clipping = k.clip;
  c.zero.stage = k.stage;
  c.zero.offload_optimizer = k.offload;
  c.zero.overlap_comm = k.overlap;
  c.lora.rank = k.lora_rank;
  // Small buckets and thresholds (as tests/test_executor_numerics.cpp) so that every path runs on a
  // 124k-parameter model: several reduce buckets per backward, gradients larger than the bucket,
  // persistent norms next to partitioned weights, stage-3 releases and prefetches that happen.
  c.zero.reduce_bucket_size = k.small_model ? 200000 : 12000;
  c.zero.param_persistence_threshold = 100;
  c.zero.prefetch_bucket_size = k.small_model ? 300000 : 5000;
  c.zero.max_live_parameters = k.small_model ? 2000000 : 40000;
  c.zero.max_reuse_distance = 3000;
  c.zero.sub_group_size = k.small_model ? 500000 : 20000;
  return c;
}

class EngineStreamOrder : public ::testing::TestWithParam<Case> {};

TEST_P(EngineStreamOrder, NoUnorderedAccesses) {
  const Case k = GetParam();
  auto rt = make_stream_checking_runtime(make_cpu_runtime(k.world));
  const RunResult res = run_training(engine_config(k), *rt);
  ASSERT_EQ(res.loss_per_step.size(), 3u);
  EXPECT_EQ(rt->violation_count(), 0) << rt->violation_count() << " unordered accesses, first:\n"
                                      << list(rt->all_violations());
  // Not vacuous: the checker saw the whole run (a layer's forward alone issues 15 backend calls:
  // 2 RMSNorms, 7 GEMMs, 2 rotaries, attention, SwiGLU, 2 residual copies; engine.cpp
  // layer_forward) ...
  const int64_t forward_layer_calls = 15 * k.world * 3 /*steps*/ * k.grad_accum * 2 /*layers (micro)*/;
  EXPECT_GT(rt->ops_on(Agent::Compute), forward_layer_calls);
  int64_t calls = 0;
  for (int r = 0; r < k.world; ++r)
    for (int64_t c : rt->communicator(r).counters().calls) calls += c;
  EXPECT_EQ(rt->collectives_on(Stream::Compute) + rt->collectives_on(Stream::Comm), calls);
  EXPECT_GT(calls, 0);
  // ... and the streams the engine is meant to use: overlap_comm reduces gradient buckets on Comm
  // in stages 1/2 (engine.cpp reduce_ipg_bucket); without it everything stays on Compute.
  // Stage 3 prefetches (all-gathers of upcoming parameters once the trace is recorded) run on Comm
  // (engine.cpp s3_fetch, PPC's __allgather_stream); the small prefetch_bucket_size and
  // max_live_parameters above make prefetching happen.
  if (((k.stage == 1 || k.stage == 2) && k.overlap) || k.stage == 3) {
    EXPECT_GT(rt->collectives_on(Stream::Comm), 0);
  } else {
    EXPECT_EQ(rt->collectives_on(Stream::Comm), 0);
  }
  if (k.offload) {
    EXPECT_GT(rt->ops_on(Agent::Host), 0);  // CPU Adam and host-tier zeroing
  }
  RecordProperty("compute_ops", std::to_string(rt->ops_on(Agent::Compute)));
  RecordProperty("comm_ops", std::to_string(rt->ops_on(Agent::Comm)));
  RecordProperty("host_ops", std::to_string(rt->ops_on(Agent::Host)));
  RecordProperty("comm_collectives", std::to_string(rt->collectives_on(Stream::Comm)));
}

// Fault injection on real engine traffic: the same runs with one of the engine's waits ignored by
// the model must report races, so the zero above is not the checker looking away.
struct Dropped {
  Case c;
  Stream waiter, signaller;
};

class EngineWithoutAWait : public ::testing::TestWithParam<Dropped> {};

TEST_P(EngineWithoutAWait, IsReported) {
  const Dropped d = GetParam();
  auto rt = make_stream_checking_runtime(make_cpu_runtime(d.c.world));
  for (int r = 0; r < d.c.world; ++r) rt->checker(r).drop_waits_for_testing(d.waiter, d.signaller);
  run_training(engine_config(d.c), *rt);
  EXPECT_GT(rt->violation_count(), 0);
  const auto v = rt->all_violations();
  if (!v.empty()) RecordProperty("first_violation", v[0].describe());
}

INSTANTIATE_TEST_SUITE_P(Mutations, EngineWithoutAWait,
                         ::testing::Values(Dropped{{2, 2, true}, Stream::Compute, Stream::Comm},
                                           Dropped{{2, 2, true}, Stream::Comm, Stream::Compute},
                                           Dropped{{1, 2, true}, Stream::Compute, Stream::Comm},
                                           Dropped{{1, 2, true}, Stream::Comm, Stream::Compute},
                                           Dropped{{3, 2}, Stream::Compute, Stream::Comm},
                                           Dropped{{3, 2}, Stream::Comm, Stream::Compute}),
                         [](const ::testing::TestParamInfo<Dropped>& i) {
                           return case_name(i.param.c) + (i.param.waiter == Stream::Compute
                                                              ? "_no_compute_waits_comm"
                                                              : "_no_comm_waits_compute");
                         });

INSTANTIATE_TEST_SUITE_P(AllStages, EngineStreamOrder, ::testing::ValuesIn(engine_cases()),
                         [](const ::testing::TestParamInfo<Case>& i) { return case_name(i.param); });

}  // namespace
}  // namespace zeroplan::exec
