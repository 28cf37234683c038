// NCCL collectives over every local GPU, nccl-tests definitions (doc/PERFORMANCE.md): algbw = S/t,
// busbw = algbw * 2(n-1)/n for all-reduce, (n-1)/n for reduce-scatter and all-gather, S the full
// message. The data is exactly verifiable: rank r contributes r+1 (fp32), so every summed element
// must equal n(n+1)/2 and gathered chunk i must equal i+1; a wrong value fails the benchmark.
// Needs >= 2 GPUs and NCCL; otherwise each benchmark is skipped with the reason.
#include <benchmark/benchmark.h>

#include <memory>
#include <vector>

#include "bench/bench_cuda_common.h"
#include "executor/cuda/calibration.h"
#include "executor/cuda/nccl_communicator.h"

namespace zeroplan::bench {
namespace {

struct World {
  std::vector<std::unique_ptr<exec::cuda::CudaBackend>> backends;
  std::vector<std::unique_ptr<exec::Communicator>> comms;
  std::vector<exec::cuda::CudaBackend*> raw_be;
  std::vector<exec::Communicator*> raw_comm;
};

World* world(benchmark::State& state) {
  static const exec::cuda::DeviceAvailability avail = exec::cuda::probe_devices();
  if (avail.count < 2) {
    state.SkipWithError(avail.count == 0 ? ("no CUDA device: " + avail.reason).c_str()
                                         : "collectives need >= 2 GPUs; this machine has 1");
    return nullptr;
  }
  if (!exec::cuda::nccl_available()) {
    state.SkipWithError("this build has no NCCL");
    return nullptr;
  }
  static std::unique_ptr<World> w = [] {
    auto x = std::make_unique<World>();
    for (int d = 0; d < avail.count; ++d) {
      x->backends.push_back(std::make_unique<exec::cuda::CudaBackend>(d));
      x->raw_be.push_back(x->backends.back().get());
    }
    x->comms = exec::cuda::make_local_nccl_communicators(x->raw_be);
    for (auto& c : x->comms) x->raw_comm.push_back(c.get());
    return x;
  }();
  return w.get();
}

// range(0): collective (0 all-reduce, 1 reduce-scatter, 2 all-gather); range(1): log2(bytes).
void BM_NcclCollective(benchmark::State& state) {
  World* w = world(state);
  if (w == nullptr) return;
  const auto kind = static_cast<exec::CollKind>(state.range(0));
  const int64_t bytes = int64_t{1} << state.range(1);
  exec::cuda::CollectiveSample c;
  for (auto _ : state) {
    c = exec::cuda::measure_collective(w->raw_be, w->raw_comm, kind, bytes,
                                       bytes < (int64_t{1} << 24) ? 50 : 10);
    if (!c.verified) {
      state.SkipWithError("collective delivered wrong values");
      return;
    }
    state.SetIterationTime(c.seconds);
  }
  state.counters["algbw GB/s"] = c.algbw_GBps;
  state.counters["busbw GB/s"] = c.busbw_GBps;
  state.counters["ranks"] = static_cast<double>(w->raw_be.size());
  state.SetLabel(exec::cuda::coll_name(kind));
}

BENCHMARK(BM_NcclCollective)
    ->ArgNames({"coll", "log2bytes"})
    ->ArgsProduct({{0, 1, 2}, {10, 14, 18, 22, 26, 30}})
    ->UseManualTime()
    ->Iterations(1)
    ->Unit(benchmark::kMicrosecond);

}  // namespace
}  // namespace zeroplan::bench
