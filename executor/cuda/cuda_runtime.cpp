#include "executor/cuda/cuda_runtime.h"

#include <vector>

#include "common/errors.h"
#include "executor/cuda/cuda_backend.h"
#include "executor/cuda/device.h"
#include "executor/cuda/emulated_communicator.h"
#include "executor/cuda/nccl_communicator.h"
#include "executor/mpi_comm.h"

namespace zeroplan::exec {

namespace {

class CudaRuntime final : public Runtime {
 public:
  CudaRuntime(int world_size, int emulate_rank) : world_(world_size), emulate_rank_(emulate_rank) {
    if (world_size < 1) throw_user_error("the run needs at least one rank, got {}", world_size);
    const cuda::DeviceAvailability dev = cuda::probe_devices();
    if (dev.count == 0)
      throw_user_error("the cuda backend needs a CUDA GPU, but none is usable here ({}); use --backend cpu",
                       dev.reason);
    if (emulate_rank >= 0) {
      if (emulate_rank >= world_size)
        throw_user_error("--emulate-rank {} is outside the plan's {} ranks (0..{})", emulate_rank, world_size,
                         world_size - 1);
      backends_.push_back(std::make_unique<cuda::CudaBackend>(0));
      comms_.push_back(std::make_unique<cuda::EmulatedCommunicator>(*backends_[0], emulate_rank, world_size));
      return;
    }
    if (const int procs = mpi_world_size(); procs > 1) {
      start_as_one_of(procs, dev.count);
      return;
    }
    if (world_size > dev.count)
      throw_user_error(
          "the plan has {} ranks but this machine has {} CUDA GPU(s); run one rank's share with "
          "--emulate-rank R (0..{}) or use a machine with {} GPUs",
          world_size, dev.count, world_size - 1, world_size);
    std::vector<cuda::CudaBackend*> raw;
    for (int r = 0; r < world_size; ++r) {
      backends_.push_back(std::make_unique<cuda::CudaBackend>(r));
      raw.push_back(backends_.back().get());
    }
    if (world_size == 1)
      comms_.push_back(
          std::make_unique<cuda::EmulatedCommunicator>(*backends_[0], 0, 1));  // no peers: no-ops
    else
      comms_ = cuda::make_local_nccl_communicators(raw);
  }
  ~CudaRuntime() override {
    comms_.clear();  // communicators before the backends whose streams they use
    backends_.clear();
  }
  int world_size() const override { return world_; }
  std::vector<int> local_ranks() const override {
    if (emulate_rank_ >= 0) return {emulate_rank_};
    if (process_rank_ >= 0) return {process_rank_};
    std::vector<int> r;
    for (int i = 0; i < world_; ++i) r.push_back(i);
    return r;
  }
  Backend& backend(int rank) override { return *backends_.at(index(rank)); }
  Communicator& communicator(int rank) override { return *comms_.at(index(rank)); }
  bool emulated() const { return emulate_rank_ >= 0 && world_ > 1; }

 private:
  // Multi-process (mpirun/srun, built with MPI; executor/mpi_comm.h): this process is rank
  // MPI_Comm_rank of the plan's ranks and drives one GPU, chosen by its node-local rank; the NCCL
  // communicator is bootstrapped over MPI (nccl_communicator.h).
  void start_as_one_of(int procs, int visible_gpus) {
    if (procs != world_)
      throw_user_error("mpirun started {} processes but the plan has {} ranks", procs, world_);
    process_rank_ = mpi_world_rank();
    // A launcher that gives every process its own GPU (srun --gpus-per-task, CUDA_VISIBLE_DEVICES
    // set per process) leaves one visible device; otherwise the node's processes share the node's
    // GPUs, one each, by local rank.
    const int local = mpi_local_rank();
    const int device = visible_gpus == 1 ? 0 : local;
    if (device >= visible_gpus)
      throw_user_error(
          "rank {} is process {} on its node, which has {} CUDA GPU(s); start at most {} processes per node "
          "(mpirun --npernode {}, srun --ntasks-per-node {})",
          process_rank_, local + 1, visible_gpus, visible_gpus, visible_gpus, visible_gpus);
    backends_.push_back(std::make_unique<cuda::CudaBackend>(device));
    comms_.push_back(cuda::make_mpi_nccl_communicator(*backends_[0], process_rank_, world_));
  }
  size_t index(int rank) const {
    if (process_rank_ >= 0) {
      ZP_CHECK(rank == process_rank_, "rank {} asked of the process that is rank {}", rank, process_rank_);
      return 0;
    }
    if (emulate_rank_ >= 0) {
      ZP_CHECK(rank == emulate_rank_, "rank {} asked of a runtime emulating rank {}", rank, emulate_rank_);
      return 0;
    }
    ZP_CHECK(rank >= 0 && rank < world_, "rank {} outside {} ranks", rank, world_);
    return static_cast<size_t>(rank);
  }
  int world_, emulate_rank_;
  int process_rank_ = -1;  // >= 0: one process of a multi-process run, driving this rank only
  std::vector<std::unique_ptr<cuda::CudaBackend>> backends_;
  std::vector<std::unique_ptr<Communicator>> comms_;
};

}  // namespace

std::unique_ptr<Runtime> make_cuda_runtime(int world_size, int emulate_rank) {
  return std::make_unique<CudaRuntime>(world_size, emulate_rank);
}

namespace cuda {

CudaBackend* as_cuda_backend(Backend& b) {
  return dynamic_cast<CudaBackend*>(&b);
}

bool runtime_is_emulated(Runtime& rt) {
  auto* c = dynamic_cast<CudaRuntime*>(&rt);
  return c != nullptr && c->emulated();
}

std::optional<DeviceLevelReport> device_level_report(Runtime& rt, int rank) {
  if (dynamic_cast<CudaRuntime*>(&rt) == nullptr) return std::nullopt;
  CudaBackend* be = as_cuda_backend(rt.backend(rank));
  if (be == nullptr) return std::nullopt;
  be->synchronize();  // samples the device once more
  const CudaMemoryReport m = be->memory_report();
  DeviceLevelReport r;
  r.total_bytes = m.total_bytes;
  r.device_used_peak_bytes = m.peak_used_bytes;
  r.baseline_used_bytes = m.baseline_used_bytes;
  r.workspace_bytes = m.workspace_bytes;
  r.executed_flops = be->compute_counters().total();
  return r;
}

}  // namespace cuda

}  // namespace zeroplan::exec
