#pragma once
// Shared set-up for the bench_cuda_* benchmarks: one CudaBackend on GPU 0 made on first use, or the
// reason there is none (then every benchmark calls SkipWithError and the binary exits cleanly).
#include <benchmark/benchmark.h>

#include <memory>
#include <string>

#include "executor/cuda/cuda_backend.h"
#include "executor/cuda/device.h"

namespace zeroplan::bench {

inline exec::cuda::CudaBackend* gpu0(benchmark::State& state) {
  static const exec::cuda::DeviceAvailability avail = exec::cuda::probe_devices();
  if (avail.count == 0) {
    state.SkipWithError(("no CUDA device: " + avail.reason).c_str());
    return nullptr;
  }
  static std::unique_ptr<exec::cuda::CudaBackend> be = std::make_unique<exec::cuda::CudaBackend>(0);
  return be.get();
}

}  // namespace zeroplan::bench
