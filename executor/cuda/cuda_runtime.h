#pragma once
// The cuda Runtime (executor/backend.h): the ranks this process drives, each with a CudaBackend
// and a Communicator.
//   make_cuda_runtime(N, -1): N local GPUs, one rank each, NCCL communicators (ncclCommInitAll);
//                             N = 1 needs no NCCL.
//   make_cuda_runtime(N, r):  one-GPU emulation of rank r of an N-rank plan on GPU 0
//                             (emulated_communicator.h): collectives become local copies, their
//                             times are modelled, not measured.
#include <memory>

#include "executor/backend.h"

namespace zeroplan::exec::cuda {

class CudaBackend;

// The CudaBackend behind a runtime's backend(rank), or null when it is not a cuda runtime (for the
// device-level memory report: CudaBackend::memory_report()).
CudaBackend* as_cuda_backend(Backend& b);

// True when the runtime's collectives are emulated (times must be reported as modelled).
bool runtime_is_emulated(Runtime& rt);

}  // namespace zeroplan::exec::cuda
