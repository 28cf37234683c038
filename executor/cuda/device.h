#pragma once
// Which CUDA devices this process can use, asked without throwing: on CI machines (nvcc present, no
// GPU, often no driver) cudaGetDeviceCount fails with cudaErrorNoDevice or
// cudaErrorInsufficientDriver, and every GPU test, benchmark and `zeroplan calibrate` must then say
// so and stop cleanly rather than crash.
#include <cstdint>
#include <string>

namespace zeroplan::exec::cuda {

struct DeviceAvailability {
  int count = 0;       // usable devices (0 when the runtime reports an error)
  std::string reason;  // why none, when count == 0 (the runtime's error string)
};
DeviceAvailability probe_devices();

struct DeviceInfo {
  int ordinal = 0;
  std::string name;
  int sm_count = 0;
  int cc_major = 0, cc_minor = 0;
  int64_t total_memory_bytes = 0;
  int64_t l2_bytes = 0;
  int64_t max_shared_per_block_optin = 0;
  double memory_clock_khz = 0;  // for the HBM peak estimate in calibrate's report
  int memory_bus_width_bits = 0;
};
DeviceInfo device_info(int ordinal);

// cudaMemGetInfo on the current device: (free, total) in bytes.
struct MemInfo {
  int64_t free_bytes = 0, total_bytes = 0;
  int64_t used_bytes() const { return total_bytes - free_bytes; }
};
MemInfo mem_info();

}  // namespace zeroplan::exec::cuda
