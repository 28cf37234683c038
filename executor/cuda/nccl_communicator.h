#pragma once
// NCCL behind the engine's Communicator (executor/communicator.h). Collectives are enqueued on the
// rank's backend's current stream (the engine puts them on its communication stream and orders
// them with events), and byte counts follow Communicator::count.
//
// Bootstraps:
//  - one process driving every local GPU: make_local_nccl_communicators() creates all communicators
//    with ncclCommInitAll (NCCL docs, "Creating a communicator"); the engine then runs one thread per
//    GPU (NCCL allows one thread per communicator);
//  - several processes (mpirun/srun), only when built with MPI (ZEROPLAN_HAVE_MPI): rank 0's
//    ncclUniqueId is broadcast over MPI and each process calls ncclCommInitRank for its GPU.
// Failure handling: a hung or failed collective must end the run with a message, not hang it. The
// communicator installs a poll hook on its backend: while the backend waits for its streams it
// asks ncclCommGetAsyncError and, on an error or after the timeout (ZEROPLAN_NCCL_TIMEOUT_S,
// default 600 s), aborts the communicator (ncclCommAbort) and throws CudaError.
#include <memory>
#include <vector>

#include "executor/communicator.h"

namespace zeroplan::exec::cuda {

class CudaBackend;

// True when this build has NCCL (ZEROPLAN_HAVE_NCCL).
bool nccl_available();

// One communicator per backend (backends[i] drives rank i, on its own GPU).
std::vector<std::unique_ptr<Communicator>> make_local_nccl_communicators(
    const std::vector<CudaBackend*>& backends);

// Multi-process: this process is rank `rank` of `world`; `backend` is its GPU. Needs MPI at build
// time (throws UserError otherwise).
std::unique_ptr<Communicator> make_mpi_nccl_communicator(CudaBackend& backend, int rank, int world);

// Seconds a collective may take before the run is aborted (ZEROPLAN_NCCL_TIMEOUT_S, default 600).
double nccl_timeout_seconds();

}  // namespace zeroplan::exec::cuda
