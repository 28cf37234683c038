#include "executor/cuda/device.h"

#include <cuda_runtime.h>

#include "executor/cuda/cuda_check.h"

namespace zeroplan::exec::cuda {

DeviceAvailability probe_devices() {
  DeviceAvailability a;
  int n = 0;
  const cudaError_t e = cudaGetDeviceCount(&n);
  if (e != cudaSuccess) {
    a.reason = std::string(cudaGetErrorName(e)) + ": " + cudaGetErrorString(e);
    (void)cudaGetLastError();  // clear the sticky-free error so later checks start clean
    return a;
  }
  a.count = n;
  if (n == 0) a.reason = "the CUDA runtime reports no devices";
  return a;
}

DeviceInfo device_info(int ordinal) {
  cudaDeviceProp p{};
  ZP_CUDA_CHECK(cudaGetDeviceProperties(&p, ordinal));
  DeviceInfo d;
  d.ordinal = ordinal;
  d.name = p.name;
  d.sm_count = p.multiProcessorCount;
  d.cc_major = p.major;
  d.cc_minor = p.minor;
  d.total_memory_bytes = static_cast<int64_t>(p.totalGlobalMem);
  d.l2_bytes = p.l2CacheSize;
  d.max_shared_per_block_optin = static_cast<int64_t>(p.sharedMemPerBlockOptin);
  // cudaDeviceProp::memoryClockRate was removed in CUDA 13; ask the attribute instead.
  int clock_khz = 0, bus_bits = 0;
  if (cudaDeviceGetAttribute(&clock_khz, cudaDevAttrMemoryClockRate, ordinal) == cudaSuccess)
    d.memory_clock_khz = clock_khz;
  else
    (void)cudaGetLastError();
  if (cudaDeviceGetAttribute(&bus_bits, cudaDevAttrGlobalMemoryBusWidth, ordinal) == cudaSuccess)
    d.memory_bus_width_bits = bus_bits;
  else
    (void)cudaGetLastError();
  return d;
}

MemInfo mem_info() {
  size_t free_b = 0, total_b = 0;
  ZP_CUDA_CHECK(cudaMemGetInfo(&free_b, &total_b));
  return {static_cast<int64_t>(free_b), static_cast<int64_t>(total_b)};
}

}  // namespace zeroplan::exec::cuda
