// Host<->device and device<->device copy bandwidth by size: pinned and pageable, both directions
// (GB/s = bytes / time, 1e9), and device copies counted as bytes read + written (METHOD.md).
#include <benchmark/benchmark.h>

#include "bench/bench_cuda_common.h"
#include "executor/cuda/calibration.h"

namespace zeroplan::bench {
namespace {

// range(0): log2(bytes); range(1): 0 pinned H2D, 1 pinned D2H, 2 pageable H2D, 3 pageable D2H, 4 D2D.
void BM_CudaCopy(benchmark::State& state) {
  auto* be = gpu0(state);
  if (be == nullptr) return;
  const int64_t bytes = int64_t{1} << state.range(0);
  const int kind = static_cast<int>(state.range(1));
  const int reps = bytes < (int64_t{1} << 24) ? 50 : 5;
  double GBps = 0;
  for (auto _ : state) {
    GBps = kind == 4 ? exec::cuda::measure_device_copy_GBps(*be, bytes, reps)
                     : exec::cuda::measure_host_copy_GBps(*be, bytes, kind < 2, kind % 2 == 0, reps);
    const double moved = kind == 4 ? 2.0 * static_cast<double>(bytes) : static_cast<double>(bytes);
    state.SetIterationTime(moved / (GBps * 1e9));
  }
  state.counters["GB/s"] = GBps;
  static const char* names[] = {"pinned H2D", "pinned D2H", "pageable H2D", "pageable D2H", "D2D (r+w)"};
  state.SetLabel(names[kind]);
}

BENCHMARK(BM_CudaCopy)
    ->ArgNames({"log2bytes", "kind"})
    ->ArgsProduct({{20, 24, 28, 30}, {0, 1, 2, 3, 4}})
    ->UseManualTime()
    ->Iterations(1)
    ->Unit(benchmark::kMillisecond);

}  // namespace
}  // namespace zeroplan::bench
