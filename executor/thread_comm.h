#pragma once
// In-process communicator: each rank is a thread of this process and all ranks share one
// ThreadWorld. Collectives are rendezvous: every rank posts its pointers, waits at a barrier, reads
// what it needs, waits again. Sums run over ranks in the fixed order 0..N-1 in fp32 (fp64 is not
// needed at these sizes) and round once to the element type, so a result never depends on thread
// timing: runs are bit-for-bit reproducible. Byte counting follows Communicator::count
// (executor/communicator.h, nccl-tests bus factors).
#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <utility>
#include <vector>

#include "executor/communicator.h"

namespace zeroplan::exec {

class ThreadWorld {
 public:
  explicit ThreadWorld(int world_size);
  int world_size() const { return n_; }
  // Blocks until all ranks arrived (generation-counting barrier, reusable). Throws once the world
  // is aborted, so no rank waits forever for one that failed.
  void arrive_and_wait();
  void abort();
  // Slots where ranks post the pointers of the current collective.
  std::vector<const void*> send;
  std::vector<void*> recv;
  // ThreadCommunicator::split's slots: each rank's (color, key), and the new group's world, posted by
  // the group's first member (lowest rank here) for the others to take.
  std::vector<std::pair<int, int>> split_request;
  std::vector<std::shared_ptr<ThreadWorld>> split_world;

 private:
  int n_;
  std::mutex mu_;
  std::condition_variable cv_;
  int waiting_ = 0;
  int64_t generation_ = 0;
  bool aborted_ = false;
};

class ThreadCommunicator final : public Communicator {
 public:
  ThreadCommunicator(std::shared_ptr<ThreadWorld> world, int rank) : world_(std::move(world)), rank_(rank) {}
  int rank() const override { return rank_; }
  int world_size() const override { return world_->world_size(); }
  void all_reduce(void* buf, int64_t count, DType dtype) override;
  void reduce_scatter(const void* send, void* recv, int64_t count, DType dtype) override;
  void all_gather(const void* send, void* recv, int64_t count, DType dtype) override;
  void broadcast(void* buf, int64_t count, DType dtype, int root) override;
  void barrier() override;
  std::unique_ptr<Communicator> split(int color, int key) override;
  void abort() override { world_->abort(); }

 private:
  std::shared_ptr<ThreadWorld> world_;
  int rank_;
  std::vector<float> scratch_;
};

}  // namespace zeroplan::exec
