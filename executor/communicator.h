#pragma once
// The engine's one communication interface. Backends: in-process thread ranks (cpu backend, CI),
// NCCL (cuda backend), and the one-GPU rank emulation (each collective replaced by a local copy of
// exactly the bytes it would deliver). Every implementation counts the bytes each rank sends per
// collective kind, with the nccl-tests bus factors (doc/PERFORMANCE.md):
//   all-reduce  2(n-1)/n * S     reduce-scatter (n-1)/n * S     all-gather (n-1)/n * S
// where S is the full (unsharded) message size in bytes.
#include <array>
#include <cstdint>
#include <memory>

namespace zeroplan::exec {

enum class DType : uint8_t { F32, BF16, F16 };
inline constexpr int64_t dtype_bytes(DType t) {
  return t == DType::F32 ? 4 : 2;
}

enum class CollKind : uint8_t { AllReduce, ReduceScatter, AllGather, Broadcast, kCount };

struct CommCounters {
  std::array<int64_t, static_cast<int>(CollKind::kCount)> calls{};
  std::array<int64_t, static_cast<int>(CollKind::kCount)> bytes_sent{};  // bus-factor bytes, per rank
  int64_t total_bytes_sent() const {
    int64_t s = 0;
    for (auto b : bytes_sent) s += b;
    return s;
  }
};

class Communicator {
 public:
  virtual ~Communicator() = default;
  virtual int rank() const = 0;
  virtual int world_size() const = 0;
  // In place; sums. `count` elements of `dtype` at `buf` (device or host memory per backend).
  virtual void all_reduce(void* buf, int64_t count, DType dtype) = 0;
  // `send` holds world*count elements; rank r receives the sum of chunk r into `recv` (count elements).
  virtual void reduce_scatter(const void* send, void* recv, int64_t count, DType dtype) = 0;
  // Every rank contributes `count` elements; `recv` holds world*count, rank-major.
  virtual void all_gather(const void* send, void* recv, int64_t count, DType dtype) = 0;
  virtual void broadcast(void* buf, int64_t count, DType dtype, int root) = 0;
  virtual void barrier() = 0;
  // A process group (issue 25: the DP, TP, SP and EP groups of layout::ParallelLayout). Collective over
  // every rank of this communicator, as MPI_Comm_split (MPI 4.0 section 7.4.2) and ncclCommSplit (NCCL
  // 2.18) define it: ranks passing the same `color` form one new communicator, ranked by `key` and then
  // by their rank here; a negative color (MPI_UNDEFINED, NCCL_SPLIT_NOCOLOR) joins none and gets
  // nullptr. The new communicator counts its own bytes, with its own size in the bus factors, and must
  // be destroyed before this one.
  virtual std::unique_ptr<Communicator> split(int color, int key) = 0;
  // Called when this rank fails mid-run, so that ranks blocked in a collective stop waiting (thread
  // ranks throw; NCCL may ncclCommAbort). Added by the executor helper; default: nothing.
  virtual void abort() {}
  const CommCounters& counters() const { return counters_; }
  void reset_counters() { counters_ = {}; }

 protected:
  // Implementations call this once per collective with the full message size S in bytes.
  void count(CollKind k, int64_t full_bytes) {
    const int n = world_size();
    int64_t sent = 0;
    if (n > 1) {
      switch (k) {
        case CollKind::AllReduce:
          sent = 2 * (n - 1) * full_bytes / n;
          break;
        case CollKind::ReduceScatter:
        case CollKind::AllGather:
          sent = (n - 1) * full_bytes / n;
          break;
        case CollKind::Broadcast:
          sent = full_bytes;
          break;  // ring broadcast: every rank forwards S
        default:
          break;
      }
    }
    counters_.calls[static_cast<int>(k)] += 1;
    counters_.bytes_sent[static_cast<int>(k)] += sent;
  }
  CommCounters counters_;
};

}  // namespace zeroplan::exec
