#include "executor/cuda/nccl_communicator.h"

#include <fmt/format.h>

#include <cstdlib>
#include <memory>
#include <string>
#include <vector>

#include "common/errors.h"
#include "executor/cuda/cuda_backend.h"
#include "executor/cuda/cuda_check.h"

#if ZEROPLAN_HAVE_NCCL
#include <nccl.h>
#endif
#if ZEROPLAN_HAVE_MPI
#include <mpi.h>
#endif

namespace zeroplan::exec::cuda {

double nccl_timeout_seconds() {
  if (const char* s = std::getenv("ZEROPLAN_NCCL_TIMEOUT_S")) {
    char* end = nullptr;
    const double v = std::strtod(s, &end);
    if (end != s && *end == '\0' && v > 0) return v;
    throw_user_error("ZEROPLAN_NCCL_TIMEOUT_S must be a positive number of seconds, got '{}'", s);
  }
  return 600.0;
}

#if ZEROPLAN_HAVE_NCCL

bool nccl_available() {
  return true;
}

#define ZP_NCCL_CHECK(call)                                                                           \
  do {                                                                                                \
    const ncclResult_t zp_nccl_status_ = (call);                                                      \
    if (zp_nccl_status_ != ncclSuccess)                                                               \
      ::zeroplan::exec::cuda::throw_cuda_error(                                                       \
          "NCCL", #call, __FILE__, __LINE__,                                                          \
          std::string(ncclGetErrorString(zp_nccl_status_)) + " (" + ncclGetLastError(nullptr) + ")"); \
  } while (0)

namespace {

ncclDataType_t to_nccl(DType t) {
  switch (t) {
    case DType::F32:
      return ncclFloat32;
    case DType::BF16:
      return ncclBfloat16;
    case DType::F16:
      return ncclFloat16;
  }
  return ncclFloat32;
}

class NcclCommunicator final : public Communicator {
 public:
  // `parent`: the communicator this one was split from (it owns the backend's poll hook and checks
  // this one too); null for a communicator made by a bootstrap.
  NcclCommunicator(ncclComm_t comm, CudaBackend& be, int rank, int world, NcclCommunicator* parent = nullptr)
      : comm_(comm), be_(be), rank_(rank), world_(world), timeout_(nccl_timeout_seconds()), parent_(parent) {
    if (parent_ != nullptr)
      parent_->children_.push_back(this);
    else
      be_.set_poll_hook([this](double waited) { check(waited); });
    be_.activate();
    ZP_CUDA_CHECK(cudaMalloc(&barrier_buf_, sizeof(float)));
  }
  ~NcclCommunicator() override {
    if (parent_ != nullptr)
      std::erase(parent_->children_, this);
    else
      be_.set_poll_hook({});
    cudaFree(barrier_buf_);
    if (comm_ && !aborted_) ncclCommDestroy(comm_);
  }
  int rank() const override { return rank_; }
  int world_size() const override { return world_; }

  void all_reduce(void* buf, int64_t count, DType dtype) override {
    Communicator::count(CollKind::AllReduce, count * dtype_bytes(dtype));
    be_.activate();
    ZP_NCCL_CHECK(ncclAllReduce(buf, buf, static_cast<size_t>(count), to_nccl(dtype), ncclSum, comm_,
                                be_.current_stream()));
  }
  void reduce_scatter(const void* send, void* recv, int64_t count, DType dtype) override {
    Communicator::count(CollKind::ReduceScatter, world_ * count * dtype_bytes(dtype));
    be_.activate();
    ZP_NCCL_CHECK(ncclReduceScatter(send, recv, static_cast<size_t>(count), to_nccl(dtype), ncclSum, comm_,
                                    be_.current_stream()));
  }
  void all_gather(const void* send, void* recv, int64_t count, DType dtype) override {
    Communicator::count(CollKind::AllGather, world_ * count * dtype_bytes(dtype));
    be_.activate();
    ZP_NCCL_CHECK(
        ncclAllGather(send, recv, static_cast<size_t>(count), to_nccl(dtype), comm_, be_.current_stream()));
  }
  void broadcast(void* buf, int64_t count, DType dtype, int root) override {
    Communicator::count(CollKind::Broadcast, count * dtype_bytes(dtype));
    be_.activate();
    ZP_NCCL_CHECK(ncclBroadcast(buf, buf, static_cast<size_t>(count), to_nccl(dtype), root, comm_,
                                be_.current_stream()));
  }
  // A rank that failed mid-run releases its peers stuck in a collective (executor/communicator.h).
  void abort() override { abort_comm(); }
  // ncclCommSplit (NCCL >= 2.18, nccl.h): the child shares this rank's GPU and backend; its health is
  // checked from this communicator's poll hook (the backend has one), so a hung group collective
  // ends the run as the parent's would.
  std::unique_ptr<Communicator> split(int color, int key) override {
    be_.activate();
    ncclComm_t child = nullptr;
    ZP_NCCL_CHECK(ncclCommSplit(comm_, color < 0 ? NCCL_SPLIT_NOCOLOR : color, key, &child, nullptr));
    if (child == nullptr) return nullptr;
    int rank = 0, size = 0;
    ZP_NCCL_CHECK(ncclCommUserRank(child, &rank));
    ZP_NCCL_CHECK(ncclCommCount(child, &size));
    return std::unique_ptr<Communicator>(new NcclCommunicator(child, be_, rank, size, this));
  }
  void barrier() override {
    // A one-element all-reduce that every rank must join, then wait for it (with the timeout).
    be_.activate();
    ZP_NCCL_CHECK(
        ncclAllReduce(barrier_buf_, barrier_buf_, 1, ncclFloat32, ncclSum, comm_, be_.current_stream()));
    be_.synchronize();
  }

 private:
  // Called while the backend polls its streams (a parent checks its split children first).
  void check(double waited) {
    for (NcclCommunicator* c : children_) c->check(waited);
    ncclResult_t async_err = ncclSuccess;
    ZP_NCCL_CHECK(ncclCommGetAsyncError(comm_, &async_err));
    if (async_err != ncclSuccess && async_err != ncclInProgress) {
      abort_comm();
      throw CudaError(fmt::format("NCCL collective failed on rank {} of {}: {}; communicator aborted", rank_,
                                  world_, ncclGetErrorString(async_err)));
    }
    if (waited > timeout_) {
      abort_comm();
      throw CudaError(
          fmt::format("NCCL collective on rank {} of {} did not finish within {:.0f} s (a peer died or "
                      "hangs?); communicator aborted. Set ZEROPLAN_NCCL_TIMEOUT_S to wait longer.",
                      rank_, world_, timeout_));
    }
  }
  void abort_comm() {
    if (!aborted_) {
      ncclCommAbort(comm_);  // also releases the kernels stuck waiting for peers
      aborted_ = true;
    }
  }

  ncclComm_t comm_;
  CudaBackend& be_;
  int rank_, world_;
  double timeout_;
  bool aborted_ = false;
  void* barrier_buf_ = nullptr;
  NcclCommunicator* parent_ = nullptr;
  std::vector<NcclCommunicator*> children_;
};

}  // namespace

std::vector<std::unique_ptr<Communicator>> make_local_nccl_communicators(
    const std::vector<CudaBackend*>& backends) {
  const int n = static_cast<int>(backends.size());
  std::vector<int> devs;
  for (auto* b : backends) devs.push_back(b->device());
  std::vector<ncclComm_t> comms(static_cast<size_t>(n));
  // ncclCommInitAll: "creates a clique of communicators" for a single process (NCCL API docs).
  ZP_NCCL_CHECK(ncclCommInitAll(comms.data(), n, devs.data()));
  std::vector<std::unique_ptr<Communicator>> out;
  for (int r = 0; r < n; ++r)
    out.push_back(std::make_unique<NcclCommunicator>(comms[static_cast<size_t>(r)],
                                                     *backends[static_cast<size_t>(r)], r, n));
  return out;
}

std::unique_ptr<Communicator> make_mpi_nccl_communicator(CudaBackend& backend, int rank, int world) {
#if ZEROPLAN_HAVE_MPI
  ncclUniqueId id{};
  if (rank == 0) ZP_NCCL_CHECK(ncclGetUniqueId(&id));
  // Collective over MPI_COMM_WORLD: every process of the run calls this from its runtime's
  // constructor (executor/cuda/cuda_runtime.cpp), before any engine thread starts.
  if (MPI_Bcast(&id, static_cast<int>(sizeof id), MPI_BYTE, 0, MPI_COMM_WORLD) != MPI_SUCCESS)
    throw CudaError("MPI_Bcast of the NCCL unique id failed");
  backend.activate();
  ncclComm_t comm = nullptr;
  ZP_NCCL_CHECK(ncclCommInitRank(&comm, world, id, rank));
  return std::make_unique<NcclCommunicator>(comm, backend, rank, world);
#else
  (void)backend;
  (void)rank;
  (void)world;
  throw_user_error(
      "multi-process runs need zeroplan built with MPI (OpenMPI); this build has none. Run one process "
      "that drives all local GPUs instead");
#endif
}

#else  // no NCCL in this build

bool nccl_available() {
  return false;
}

std::vector<std::unique_ptr<Communicator>> make_local_nccl_communicators(const std::vector<CudaBackend*>&) {
  throw_user_error(
      "this zeroplan was built without NCCL, so it cannot run several GPUs; use --emulate-rank to run "
      "one rank's share on one GPU");
}

std::unique_ptr<Communicator> make_mpi_nccl_communicator(CudaBackend&, int, int) {
  throw_user_error("this zeroplan was built without NCCL, so it cannot run several GPUs");
}

#endif

}  // namespace zeroplan::exec::cuda
