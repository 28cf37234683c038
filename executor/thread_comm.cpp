#include "executor/thread_comm.h"

#include <cstring>

#include "common/errors.h"
#include "executor/dtype_io.h"

namespace zeroplan::exec {

ThreadWorld::ThreadWorld(int world_size)
    : send(static_cast<size_t>(world_size)), recv(static_cast<size_t>(world_size)), n_(world_size) {
  ZP_CHECK(world_size >= 1, "world size {}", world_size);
}

void ThreadWorld::arrive_and_wait() {
  std::unique_lock lk(mu_);
  if (aborted_) throw InternalError("thread communicator: another rank failed");
  const int64_t gen = generation_;
  if (++waiting_ == n_) {
    waiting_ = 0;
    ++generation_;
    cv_.notify_all();
    return;
  }
  cv_.wait(lk, [&] { return generation_ != gen || aborted_; });
  if (generation_ == gen) throw InternalError("thread communicator: another rank failed");
}

void ThreadWorld::abort() {
  std::lock_guard lk(mu_);
  aborted_ = true;
  cv_.notify_all();
}

void ThreadCommunicator::all_reduce(void* buf, int64_t count, DType dtype) {
  Communicator::count(CollKind::AllReduce, count * dtype_bytes(dtype));
  ThreadWorld& w = *world_;
  const int n = w.world_size();
  w.send[static_cast<size_t>(rank_)] = buf;
  w.arrive_and_wait();
  scratch_.assign(static_cast<size_t>(count), 0.0f);
  for (int q = 0; q < n; ++q)  // fixed order: reproducible sums
    for (int64_t i = 0; i < count; ++i)
      scratch_[static_cast<size_t>(i)] += load_elem(w.send[static_cast<size_t>(q)], dtype, i);
  w.arrive_and_wait();  // everyone has read every buffer before anyone writes its own
  for (int64_t i = 0; i < count; ++i) store_elem(buf, dtype, i, scratch_[static_cast<size_t>(i)]);
  w.arrive_and_wait();
}

void ThreadCommunicator::reduce_scatter(const void* send, void* recv, int64_t count, DType dtype) {
  ThreadWorld& w = *world_;
  const int n = w.world_size();
  Communicator::count(CollKind::ReduceScatter, count * n * dtype_bytes(dtype));
  w.send[static_cast<size_t>(rank_)] = send;
  w.arrive_and_wait();
  scratch_.assign(static_cast<size_t>(count), 0.0f);
  const int64_t base = static_cast<int64_t>(rank_) * count;
  for (int q = 0; q < n; ++q)
    for (int64_t i = 0; i < count; ++i)
      scratch_[static_cast<size_t>(i)] += load_elem(w.send[static_cast<size_t>(q)], dtype, base + i);
  w.arrive_and_wait();
  for (int64_t i = 0; i < count; ++i) store_elem(recv, dtype, i, scratch_[static_cast<size_t>(i)]);
  w.arrive_and_wait();
}

void ThreadCommunicator::all_gather(const void* send, void* recv, int64_t count, DType dtype) {
  ThreadWorld& w = *world_;
  const int n = w.world_size();
  Communicator::count(CollKind::AllGather, count * n * dtype_bytes(dtype));
  const int64_t bytes = count * dtype_bytes(dtype);
  w.send[static_cast<size_t>(rank_)] = send;
  w.arrive_and_wait();
  // Own chunk last: `send` may alias recv's chunk `rank_` (in-place all-gather).
  for (int q = 0; q < n; ++q) {
    if (q == rank_) continue;
    std::memcpy(static_cast<char*>(recv) + q * bytes, w.send[static_cast<size_t>(q)],
                static_cast<size_t>(bytes));
  }
  char* mine = static_cast<char*>(recv) + rank_ * bytes;
  if (mine != send) std::memmove(mine, send, static_cast<size_t>(bytes));
  w.arrive_and_wait();
}

void ThreadCommunicator::broadcast(void* buf, int64_t count, DType dtype, int root) {
  ThreadWorld& w = *world_;
  Communicator::count(CollKind::Broadcast, count * dtype_bytes(dtype));
  if (rank_ == root) w.send[static_cast<size_t>(root)] = buf;
  w.arrive_and_wait();
  if (rank_ != root)
    std::memcpy(buf, w.send[static_cast<size_t>(root)], static_cast<size_t>(count * dtype_bytes(dtype)));
  w.arrive_and_wait();
}

void ThreadCommunicator::barrier() {
  world_->arrive_and_wait();
}

}  // namespace zeroplan::exec
