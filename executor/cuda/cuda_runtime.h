#pragma once
// The cuda Runtime (executor/backend.h): the ranks this process drives, each with a CudaBackend
// and a Communicator.
//   make_cuda_runtime(N, -1): N local GPUs, one rank each, NCCL communicators (ncclCommInitAll);
//                             N = 1 needs no NCCL.
//   make_cuda_runtime(N, r):  one-GPU emulation of rank r of an N-rank plan on GPU 0
//                             (emulated_communicator.h): collectives become local copies, their
//                             times are modelled, not measured.
#include <cstdint>
#include <memory>
#include <optional>

#include "executor/backend.h"

namespace zeroplan::exec::cuda {

class CudaBackend;

// The CudaBackend behind a runtime's backend(rank), or null when it is not a cuda runtime (for the
// device-level memory report: CudaBackend::memory_report()).
CudaBackend* as_cuda_backend(Backend& b);

// True when the runtime's collectives are emulated (times must be reported as modelled).
bool runtime_is_emulated(Runtime& rt);

// What the GPU itself says, beside the engine's tagged accounting (for `validate`):
//   device_used_peak_bytes  maximum of cudaMemGetInfo (total - free) seen during the run: the
//                           engine's tensors plus the CUDA context, cuBLASLt workspace, kernel
//                           scratch, NCCL buffers and allocator rounding/fragmentation
//   baseline_used_bytes     in use before the engine allocated anything (context, streams, workspace)
//   workspace_bytes         cuBLASLt workspace + kernel scratch held by the backend
//   executed_flops          GEMM + attention FLOPs executed since the runtime was made (recomputation
//                           included: hardware FLOPs; divide by the steps run for one step's)
// nullopt when `rank` is not driven by a cuda runtime of this process.
struct DeviceLevelReport {
  int64_t total_bytes = 0;
  int64_t device_used_peak_bytes = 0;
  int64_t baseline_used_bytes = 0;
  int64_t workspace_bytes = 0;
  double executed_flops = 0;
};
std::optional<DeviceLevelReport> device_level_report(Runtime& rt, int rank);

}  // namespace zeroplan::exec::cuda
