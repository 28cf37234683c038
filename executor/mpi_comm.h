#pragma once
// Multi-process runs (mpirun / srun): one rank per process, ranks = MPI_COMM_WORLD's ranks.
//
//  - MpiSession: the process's MPI_Init_thread / MPI_Finalize (RAII). It initialises MPI only when
//    a launcher started the process (Open MPI's OMPI_COMM_WORLD_SIZE, PMI's PMI_SIZE, PMIx's
//    PMIX_RANK in the environment), so a plain `zeroplan validate` never touches MPI.
//  - MpiCommunicator (in mpi_comm.cpp): the engine's Communicator (executor/communicator.h) over
//    host memory with MPI collectives, for the cpu backend. Sums follow ThreadCommunicator exactly (fp32 over
//    ranks in the fixed order 0..N-1, rounded once to the element type), so an N-process run is bit-for-bit
//    the N-thread-rank run of the same plan. Bytes are counted with the same nccl-tests bus factors
//    (Communicator::count).
//  - make_mpi_cpu_runtime: the Runtime of one process: rank MPI_Comm_rank of MPI_Comm_size,
//    local_ranks() == {rank}.
// Builds without MPI (ZEROPLAN_HAVE_MPI unset) keep the same API: no session is ever active, and a
// launcher-started process with several peers is told that this build cannot join them.
#include <cstdint>
#include <memory>
#include <vector>

#include "executor/backend.h"

namespace zeroplan::exec {

// True when this build has MPI.
bool mpi_built();

// True when the environment says a launcher (mpirun, srun with PMI/PMIx) started this process.
bool launched_by_mpi_launcher();

class MpiSession {
 public:
  // Initialises MPI (MPI_THREAD_SERIALIZED: the engine calls MPI from its rank thread while the
  // main thread waits) when launched_by_mpi_launcher() and MPI is built and not yet initialised.
  // Without MPI in the build, throws UserError when the launcher started several processes.
  MpiSession();
  // Waits until every process got here (a barrier bounded by kExitWaitSeconds) and then calls
  // MPI_Finalize. The wait matters: mpirun ends the whole job at the first non-zero exit, so a
  // rank that exits quietly with an error must not leave before the reporting rank has printed.
  // Meant to end with the process (a function-local static), i.e. after main printed. Without
  // every process at the barrier in time, or with an operation left pending by a failed peer
  // (mpi_left_unfinished), MPI_Finalize is skipped (it could wait forever).
  ~MpiSession();
  static constexpr double kExitWaitSeconds = 30.0;
  MpiSession(const MpiSession&) = delete;
  MpiSession& operator=(const MpiSession&) = delete;

  // This session initialised MPI (the process runs under a launcher).
  bool active() const { return active_; }
  int rank() const { return rank_; }
  int size() const { return size_; }
  // Several processes: each runs one rank of the plan.
  bool multi_process() const { return active_ && size_ > 1; }

  // The lowest rank whose `flag` is true, or -1 when none (MPI_Allreduce, min): how the processes
  // agree whether any failed and which one reports. Inactive: 0 or -1.
  int lowest_rank_with(bool flag);
  // Element-wise mean of `v` over processes, summed in rank order 0..N-1 (every process gets the
  // same, bit-identical result). Inactive: `v`.
  std::vector<double> mean_over_processes(const std::vector<double>& v);

 private:
  bool active_ = false;
  int rank_ = 0;
  int size_ = 1;
};

// MPI_COMM_WORLD's size and this process's rank in it while MPI is initialised (by an MpiSession
// or anyone else), else 1 and 0: how a runtime learns that it is one process of several.
int mpi_world_size();
int mpi_world_rank();

// The node-local index of this process (for picking its GPU): Open MPI's
// OMPI_COMM_WORLD_LOCAL_RANK when mpirun set it, else this process's rank in
// MPI_Comm_split_type(MPI_COMM_TYPE_SHARED) (the processes sharing its memory = its node).
// SLURM_LOCALID is not trusted: an mpirun inside an sbatch script passes the script's own value on
// to every process it starts. Needs an active MpiSession.
int mpi_local_rank();

// True when a communicator of this process left a collective unfinished because a peer failed (or
// told its peers it failed): MPI_Finalize must then not be called (it would wait for the pending
// operation), and the process just exits with its error.
bool mpi_left_unfinished();

// This process's rank of the MPI world as a cpu Runtime. `device_budget_bytes` as in
// make_cpu_runtime. Needs an active MpiSession.
std::unique_ptr<Runtime> make_mpi_cpu_runtime(int64_t device_budget_bytes = 0);

}  // namespace zeroplan::exec
