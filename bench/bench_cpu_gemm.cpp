// GEMM throughput of the cpu backend (Eigen, executor/cpu_backend.cpp) at the executor's shapes:
// GFLOP/s = 2 m n k / time. Feeds the CPU pseudo-device profile (hwprofiles/gpus/CPU.json, whose
// 96 GFLOP/s per core and gemm efficiencies are stated assumptions to calibrate against this).
#include <benchmark/benchmark.h>

#include <vector>

#include "executor/cpu_backend.h"

namespace {

using zeroplan::exec::CpuBackend;
using zeroplan::exec::DType;

void BM_CpuGemm(benchmark::State& st) {
  const int64_t m = st.range(0), n = st.range(1), k = st.range(2);
  const auto dt = st.range(3) == 0 ? DType::F32 : DType::BF16;
  CpuBackend be;
  std::vector<char> a(static_cast<size_t>(m * k * 4), 1), b(static_cast<size_t>(k * n * 4), 1),
      c(static_cast<size_t>(m * n * 4), 0);
  for (auto _ : st) {
    // Linear layer forward: y[m, n] = x[m, k] W^T, W stored [n, k].
    be.gemm(m, n, k, a.data(), false, b.data(), true, dt, c.data(), dt, 1.0f, 0.0f);
    benchmark::DoNotOptimize(c.data());
  }
  st.counters["GFLOP/s"] =
      benchmark::Counter(2.0 * static_cast<double>(m * n * k), benchmark::Counter::kIsIterationInvariantRate,
                         benchmark::Counter::kIs1000);
  st.SetLabel(dt == DType::F32 ? "fp32" : "bf16 (widened to fp32)");
}

// tokens x out x in: tiny-llama-micro (h 64, I 172, V 256) and tiny-llama-small (h 256, I 688, V 4096)
// at 2 x 64 tokens, and a square 1024 for the machine's peak.
BENCHMARK(BM_CpuGemm)
    ->Args({128, 64, 64, 0})
    ->Args({128, 172, 64, 0})
    ->Args({128, 256, 64, 0})
    ->Args({128, 688, 256, 0})
    ->Args({128, 4096, 256, 0})
    ->Args({128, 4096, 256, 1})
    ->Args({1024, 1024, 1024, 0})
    ->Args({1024, 1024, 1024, 1})
    ->Unit(benchmark::kMicrosecond);

}  // namespace
