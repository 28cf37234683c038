#include "executor/thread_comm.h"

#include <algorithm>
#include <cstring>

#include "common/errors.h"
#include "executor/dtype_io.h"

namespace zeroplan::exec {

ThreadWorld::ThreadWorld(int world_size)
    : send(static_cast<size_t>(world_size)),
      recv(static_cast<size_t>(world_size)),
      split_request(static_cast<size_t>(world_size)),
      split_world(static_cast<size_t>(world_size)),
      n_(world_size) {
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

// Three rendezvous: every rank posts (color, key); each group's first member (its lowest rank here)
// creates the group's world and posts it; every member takes it. The new rank is the position in the
// group ordered by (key, rank here), as MPI_Comm_split orders it.
std::unique_ptr<Communicator> ThreadCommunicator::split(int color, int key) {
  ThreadWorld& w = *world_;
  const int n = w.world_size();
  w.split_request[static_cast<size_t>(rank_)] = {color, key};
  w.arrive_and_wait();
  std::vector<std::pair<int, int>> members;  // (key, rank here) of this rank's group
  for (int q = 0; q < n; ++q)
    if (color >= 0 && w.split_request[static_cast<size_t>(q)].first == color)
      members.emplace_back(w.split_request[static_cast<size_t>(q)].second, q);
  std::sort(members.begin(), members.end());
  int first = n;
  for (const auto& m : members) first = std::min(first, m.second);
  if (first == rank_)
    w.split_world[static_cast<size_t>(rank_)] =
        std::make_shared<ThreadWorld>(static_cast<int>(members.size()));
  w.arrive_and_wait();
  std::unique_ptr<Communicator> out;
  if (color >= 0) {
    const auto me = std::find(members.begin(), members.end(), std::make_pair(key, rank_));
    out = std::make_unique<ThreadCommunicator>(w.split_world[static_cast<size_t>(first)],
                                               static_cast<int>(me - members.begin()));
  }
  w.arrive_and_wait();  // every member holds its world before the slots are cleared
  w.split_world[static_cast<size_t>(rank_)].reset();
  return out;
}

}  // namespace zeroplan::exec
