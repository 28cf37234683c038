#include "executor/mpi_comm.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <climits>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>

#include "common/errors.h"
#include "executor/cpu_backend.h"
#include "executor/dtype_io.h"

#if ZEROPLAN_HAVE_MPI
#include <mpi.h>
#endif

namespace zeroplan::exec {

namespace {

const char* env(const char* name) {
  const char* v = std::getenv(name);
  return v != nullptr && *v != '\0' ? v : nullptr;
}

std::atomic<bool> g_left_unfinished{false};

}  // namespace

bool launched_by_mpi_launcher() {
  return env("OMPI_COMM_WORLD_SIZE") != nullptr || env("PMI_SIZE") != nullptr || env("PMIX_RANK") != nullptr;
}

bool mpi_left_unfinished() {
  return g_left_unfinished.load();
}

#if ZEROPLAN_HAVE_MPI

bool mpi_built() {
  return true;
}

namespace {

bool g_initialised_here = false;  // this process's MpiSession called MPI_Init_thread

void mpi_check(int rc, const char* what) {
  if (rc != MPI_SUCCESS) {
    char msg[MPI_MAX_ERROR_STRING] = {};
    int len = 0;
    MPI_Error_string(rc, msg, &len);
    throw InternalError(std::string(what) + " failed: " + std::string(msg, static_cast<size_t>(len)));
  }
}

// Raw element type for moving bytes: the communicator never lets MPI do arithmetic (BF16 has no
// MPI type, and the fixed-order fp32 sum is what keeps results bit-identical to thread ranks).
MPI_Datatype raw_type(DType t) {
  return t == DType::F32 ? MPI_FLOAT : MPI_UINT16_T;
}

int mpi_count(int64_t n) {
  ZP_CHECK(n >= 0 && n <= INT_MAX, "MPI message of {} elements exceeds MPI's int count", n);
  return static_cast<int>(n);
}

constexpr int kAbortTag = 7;
// all_reduce gathers every rank's copy before summing; chunks bound that scratch to
// world x 4 Mi elements.
constexpr int64_t kAllReduceChunk = int64_t{1} << 22;

class MpiCommunicator final : public Communicator {
 public:
  MpiCommunicator() {
    // Own communicators: the engine's collectives never meet other MPI traffic of the process
    // (MpiSession's agreement, the NCCL bootstrap), and failure notices have a channel of their own.
    mpi_check(MPI_Comm_dup(MPI_COMM_WORLD, &data_), "MPI_Comm_dup");
    mpi_check(MPI_Comm_dup(MPI_COMM_WORLD, &notice_), "MPI_Comm_dup");
    MPI_Comm_rank(data_, &rank_);
    MPI_Comm_size(data_, &world_);
  }
  ~MpiCommunicator() override {
    if (g_left_unfinished.load()) return;  // pending operations: freeing would wait for them
    MPI_Comm_free(&data_);
    MPI_Comm_free(&notice_);
  }
  int rank() const override { return rank_; }
  int world_size() const override { return world_; }

  void all_reduce(void* buf, int64_t count, DType dtype) override {
    Communicator::count(CollKind::AllReduce, count * dtype_bytes(dtype));
    const int64_t eb = dtype_bytes(dtype);
    for (int64_t off = 0; off < count; off += kAllReduceChunk) {
      const int64_t c = std::min(kAllReduceChunk, count - off);
      char* chunk = static_cast<char*>(buf) + off * eb;
      gathered_.resize(static_cast<size_t>(world_ * c * eb));
      MPI_Request req = MPI_REQUEST_NULL;
      mpi_check(MPI_Iallgather(chunk, mpi_count(c), raw_type(dtype), gathered_.data(), mpi_count(c),
                               raw_type(dtype), data_, &req),
                "MPI_Iallgather");
      wait(req);
      sum_in_rank_order(gathered_.data(), c, dtype);
      for (int64_t i = 0; i < c; ++i) store_elem(chunk, dtype, i, scratch_[static_cast<size_t>(i)]);
    }
  }

  void reduce_scatter(const void* send, void* recv, int64_t count, DType dtype) override {
    Communicator::count(CollKind::ReduceScatter, count * world_ * dtype_bytes(dtype));
    // Chunk q of every rank's `send` goes to rank q: afterwards gathered_ holds chunk `rank_` of
    // ranks 0..N-1, rank-major.
    gathered_.resize(static_cast<size_t>(world_ * count * dtype_bytes(dtype)));
    MPI_Request req = MPI_REQUEST_NULL;
    mpi_check(MPI_Ialltoall(send, mpi_count(count), raw_type(dtype), gathered_.data(), mpi_count(count),
                            raw_type(dtype), data_, &req),
              "MPI_Ialltoall");
    wait(req);
    sum_in_rank_order(gathered_.data(), count, dtype);
    for (int64_t i = 0; i < count; ++i) store_elem(recv, dtype, i, scratch_[static_cast<size_t>(i)]);
  }

  void all_gather(const void* send, void* recv, int64_t count, DType dtype) override {
    Communicator::count(CollKind::AllGather, count * world_ * dtype_bytes(dtype));
    const char* mine = static_cast<const char*>(recv) + rank_ * count * dtype_bytes(dtype);
    // In-place all-gather (send is recv's chunk `rank_`): MPI wants MPI_IN_PLACE, not aliasing.
    const void* s = send == mine ? MPI_IN_PLACE : send;
    MPI_Request req = MPI_REQUEST_NULL;
    mpi_check(MPI_Iallgather(s, mpi_count(count), raw_type(dtype), recv, mpi_count(count), raw_type(dtype),
                             data_, &req),
              "MPI_Iallgather");
    wait(req);
  }

  void broadcast(void* buf, int64_t count, DType dtype, int root) override {
    Communicator::count(CollKind::Broadcast, count * dtype_bytes(dtype));
    MPI_Request req = MPI_REQUEST_NULL;
    mpi_check(MPI_Ibcast(buf, mpi_count(count), raw_type(dtype), root, data_, &req), "MPI_Ibcast");
    wait(req);
  }

  void barrier() override {
    MPI_Request req = MPI_REQUEST_NULL;
    mpi_check(MPI_Ibarrier(data_, &req), "MPI_Ibarrier");
    wait(req);
  }

  // MPI_Comm_split of both communicators (MPI orders a group by key, then by rank here, as
  // Communicator::split promises). MPI_Comm_split blocks and cannot watch for a failed peer, so a
  // barrier that does (wait()) goes first: the split starts only once every rank has reached it.
  std::unique_ptr<Communicator> split(int color, int key) override {
    barrier();
    const int c = color < 0 ? MPI_UNDEFINED : color;
    MPI_Comm data = MPI_COMM_NULL, notice = MPI_COMM_NULL;
    mpi_check(MPI_Comm_split(data_, c, key, &data), "MPI_Comm_split");
    mpi_check(MPI_Comm_split(notice_, c, key, &notice), "MPI_Comm_split");
    if (data == MPI_COMM_NULL) return nullptr;
    return std::unique_ptr<Communicator>(new MpiCommunicator(data, notice));
  }

  // This rank failed: tell every peer, so that those waiting in a collective for it stop waiting
  // (they throw "another rank failed", as thread ranks do) instead of hanging.
  void abort() override {
    if (sent_notice_ || peer_failed_) return;
    sent_notice_ = true;
    g_left_unfinished = true;
    notices_.resize(static_cast<size_t>(world_), MPI_REQUEST_NULL);
    for (int q = 0; q < world_; ++q)
      if (q != rank_) MPI_Isend(&notice_payload_, 1, MPI_INT, q, kAbortTag, notice_, &notices_[q]);
  }

 private:
  // A split's group: takes ownership of both communicators.
  MpiCommunicator(MPI_Comm data, MPI_Comm notice) : data_(data), notice_(notice) {
    MPI_Comm_rank(data_, &rank_);
    MPI_Comm_size(data_, &world_);
  }
  // Waits for `req`, watching for a peer's failure notice meanwhile. Polling (MPI_Test) rather than
  // MPI_Wait: a blocking collective cannot be interrupted when a peer will never join it.
  void wait(MPI_Request& req) {
    for (;;) {
      int done = 0;
      mpi_check(MPI_Test(&req, &done, MPI_STATUS_IGNORE), "MPI_Test");
      if (done) return;
      int notice = 0;
      MPI_Iprobe(MPI_ANY_SOURCE, kAbortTag, notice_, &notice, MPI_STATUS_IGNORE);
      if (notice) {
        peer_failed_ = true;
        g_left_unfinished = true;  // `req` stays pending
        throw InternalError("mpi communicator: another rank failed");
      }
      std::this_thread::yield();  // processes may outnumber cores (mpirun --oversubscribe)
    }
  }
  // scratch_[i] = sum over q = 0..N-1 of element i of block q (blocks of `count` elements), in
  // fp32 and in that order: ThreadCommunicator's arithmetic, so the results are bit-identical.
  void sum_in_rank_order(const void* blocks, int64_t count, DType dtype) {
    scratch_.assign(static_cast<size_t>(count), 0.0f);
    const int64_t block_bytes = count * dtype_bytes(dtype);
    for (int q = 0; q < world_; ++q) {
      const void* b = static_cast<const char*>(blocks) + q * block_bytes;
      for (int64_t i = 0; i < count; ++i) scratch_[static_cast<size_t>(i)] += load_elem(b, dtype, i);
    }
  }

  MPI_Comm data_ = MPI_COMM_NULL, notice_ = MPI_COMM_NULL;
  int rank_ = 0, world_ = 1;
  std::vector<char> gathered_;
  std::vector<float> scratch_;
  bool sent_notice_ = false, peer_failed_ = false;
  int notice_payload_ = 1;
  std::vector<MPI_Request> notices_;
};

class MpiCpuRuntime final : public Runtime {
 public:
  explicit MpiCpuRuntime(int64_t budget) : backend_(budget) {}
  int world_size() const override { return comm_.world_size(); }
  std::vector<int> local_ranks() const override { return {comm_.rank()}; }
  Backend& backend(int rank) override {
    check(rank);
    return backend_;
  }
  Communicator& communicator(int rank) override {
    check(rank);
    return comm_;
  }

 private:
  void check(int rank) const {
    ZP_CHECK(rank == comm_.rank(), "rank {} asked of the process that is rank {}", rank, comm_.rank());
  }
  CpuBackend backend_;
  MpiCommunicator comm_;
};

}  // namespace

MpiSession::MpiSession() {
  if (!launched_by_mpi_launcher()) return;
  int initialised = 0;
  MPI_Initialized(&initialised);
  if (!initialised) {
    int provided = 0;
    mpi_check(MPI_Init_thread(nullptr, nullptr, MPI_THREAD_SERIALIZED, &provided), "MPI_Init_thread");
    g_initialised_here = true;
    if (provided < MPI_THREAD_SERIALIZED)
      throw InternalError(
          "this MPI library does not allow calls from a thread other than main (MPI_THREAD_SERIALIZED)");
  }
  active_ = true;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank_);
  MPI_Comm_size(MPI_COMM_WORLD, &size_);
}

MpiSession::~MpiSession() {
  if (!active_ || !g_initialised_here) return;
  bool all_here = true;
  if (size_ > 1) {
    // MPI_Ibarrier + polling rather than MPI_Barrier: a peer stuck elsewhere (an error only some
    // ranks hit before their first collective) must not keep this process forever.
    MPI_Request req = MPI_REQUEST_NULL;
    MPI_Ibarrier(MPI_COMM_WORLD, &req);
    const auto until = std::chrono::steady_clock::now() + std::chrono::duration<double>(kExitWaitSeconds);
    int done = 0;
    while (MPI_Test(&req, &done, MPI_STATUS_IGNORE) == MPI_SUCCESS && !done &&
           std::chrono::steady_clock::now() < until)
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    all_here = done != 0;
  }
  if (!all_here || g_left_unfinished.load()) return;
  int finalised = 0;
  MPI_Finalized(&finalised);
  if (!finalised) MPI_Finalize();
  g_initialised_here = false;
}

int MpiSession::lowest_rank_with(bool flag) {
  if (!active_) return flag ? 0 : -1;
  int mine = flag ? rank_ : INT_MAX, lowest = INT_MAX;
  mpi_check(MPI_Allreduce(&mine, &lowest, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD), "MPI_Allreduce");
  return lowest == INT_MAX ? -1 : lowest;
}

std::vector<double> MpiSession::mean_over_processes(const std::vector<double>& v) {
  if (!active_ || size_ == 1) return v;
  const int n = mpi_count(static_cast<int64_t>(v.size()));
  std::vector<double> all(v.size() * static_cast<size_t>(size_));
  mpi_check(MPI_Allgather(v.data(), n, MPI_DOUBLE, all.data(), n, MPI_DOUBLE, MPI_COMM_WORLD),
            "MPI_Allgather");
  std::vector<double> mean(v.size(), 0.0);
  for (int q = 0; q < size_; ++q)  // rank order: every process computes the same sum
    for (size_t i = 0; i < v.size(); ++i) mean[i] += all[static_cast<size_t>(q) * v.size() + i];
  for (auto& m : mean) m /= static_cast<double>(size_);
  return mean;
}

namespace {
bool mpi_running() {
  int initialised = 0, finalised = 0;
  MPI_Initialized(&initialised);
  MPI_Finalized(&finalised);
  return initialised && !finalised;
}
}  // namespace

int mpi_world_size() {
  int n = 1;
  if (mpi_running()) MPI_Comm_size(MPI_COMM_WORLD, &n);
  return n;
}
int mpi_world_rank() {
  int r = 0;
  if (mpi_running()) MPI_Comm_rank(MPI_COMM_WORLD, &r);
  return r;
}

int mpi_local_rank() {
  if (const char* v = env("OMPI_COMM_WORLD_LOCAL_RANK")) return std::atoi(v);
  MPI_Comm node = MPI_COMM_NULL;
  mpi_check(MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &node),
            "MPI_Comm_split_type");
  int local = 0;
  MPI_Comm_rank(node, &local);
  MPI_Comm_free(&node);
  return local;
}

std::unique_ptr<Runtime> make_mpi_cpu_runtime(int64_t device_budget_bytes) {
  int initialised = 0;
  MPI_Initialized(&initialised);
  ZP_CHECK(initialised, "make_mpi_cpu_runtime needs an active MpiSession");
  return std::make_unique<MpiCpuRuntime>(device_budget_bytes);
}

#else  // built without MPI

namespace {
// The process count the launcher announced (Open MPI, PMI-1/2 as srun and MPICH's hydra set
// it), or 0 when it said none (PMIx announces only the rank).
int launcher_world_size() {
  for (const char* name : {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE"})
    if (const char* v = env(name)) return std::atoi(v);
  return 0;
}

}  // namespace

bool mpi_built() {
  return false;
}

MpiSession::MpiSession() {
  if (launched_by_mpi_launcher() && launcher_world_size() != 1)
    throw UserError(
        "this zeroplan was built without MPI, so it cannot run as one of several processes of mpirun/srun; "
        "install libopenmpi-dev and rebuild, or run it without a launcher (one process, thread ranks)");
}
MpiSession::~MpiSession() = default;
int MpiSession::lowest_rank_with(bool flag) {
  return flag ? 0 : -1;
}
std::vector<double> MpiSession::mean_over_processes(const std::vector<double>& v) {
  return v;
}
int mpi_local_rank() {
  return 0;
}
int mpi_world_size() {
  return 1;
}
int mpi_world_rank() {
  return 0;
}
std::unique_ptr<Runtime> make_mpi_cpu_runtime(int64_t) {
  throw UserError("this zeroplan was built without MPI; install libopenmpi-dev and rebuild");
}

#endif

}  // namespace zeroplan::exec
