// bf16 GEMM throughput through the cuda backend's cuBLASLt wrapper (fp32 accumulate), by shape:
// square sizes and the Llama-2-7B projections at 4096 tokens. TFLOP/s = 2mnk / time (CUDA events,
// median of 5 batches inside time_gemm). Random data (METHOD.md: zeros run faster than real data).
#include <benchmark/benchmark.h>

#include "bench/bench_cuda_common.h"
#include "executor/cuda/calibration.h"

namespace zeroplan::bench {
namespace {

void BM_CudaGemmBf16(benchmark::State& state) {
  auto* be = gpu0(state);
  if (be == nullptr) return;
  const auto s = exec::cuda::GemmShape::row_major(state.range(0), state.range(1), state.range(2), false,
                                                  state.range(3) != 0);
  const int reps = std::max(3, static_cast<int>(std::min(200.0, 2000.0 / (s.flops() / 1e9))));
  for (auto _ : state) state.SetIterationTime(exec::cuda::time_gemm(*be, s, reps));
  state.counters["TFLOP/s"] =
      benchmark::Counter(s.flops() / 1e12, benchmark::Counter::kIsIterationInvariantRate);
  state.counters["GFLOP"] = s.flops() / 1e9;
}

BENCHMARK(BM_CudaGemmBf16)
    ->ArgNames({"m", "n", "k", "transB"})
    ->Args({1024, 1024, 1024, 1})
    ->Args({2048, 2048, 2048, 1})
    ->Args({4096, 4096, 4096, 1})
    ->Args({8192, 8192, 8192, 1})
    ->Args({4096, 11008, 4096, 1})  // Llama-2-7B gate/up projection, 4096 tokens
    ->Args({4096, 4096, 11008, 1})  // down projection
    ->Args({4096, 4096, 11008, 0})  // dX through the down projection
    ->Args({4096, 32000, 4096, 1})  // LM head
    ->UseManualTime()
    ->Iterations(3)
    ->Unit(benchmark::kMillisecond);

}  // namespace
}  // namespace zeroplan::bench
