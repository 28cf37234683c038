#pragma once
// One-GPU rank emulation (../shared/DESIGN.md "The GPU we can test on"): rank r of an N-rank run
// executes on one GPU, and every collective is replaced by a local device copy of exactly the bytes
// it would deliver, as if all N ranks held the same data as this one:
//   all-reduce(sum)      buf *= N                               (N identical contributions)
//   reduce-scatter(sum)  recv = N * send[r*count, (r+1)*count)  (this rank's chunk of the sum)
//   all-gather           recv[i*count, ...) = send for every i  (the other ranks' chunks filled
//                                                                with copies of our own)
//   broadcast            nothing moves (the buffer already holds what the root would send)
// So every buffer a collective writes is written, with the same sizes and lifetimes as in the real
// run: the rank's memory is its true memory, and compute time is real. Bytes are counted as the
// N-rank collective would send them (Communicator::count with world_size() = N), and the time of a
// collective is NOT measured here: a report must mark communication times as modelled.
// Runs on the backend's current stream, so the engine's stream/event ordering is exercised as is.
#include "executor/communicator.h"

namespace zeroplan::exec::cuda {

class CudaBackend;

class EmulatedCommunicator final : public Communicator {
 public:
  EmulatedCommunicator(CudaBackend& backend, int rank, int world_size);
  int rank() const override { return rank_; }
  int world_size() const override { return world_; }
  void all_reduce(void* buf, int64_t count, DType dtype) override;
  void reduce_scatter(const void* send, void* recv, int64_t count, DType dtype) override;
  void all_gather(const void* send, void* recv, int64_t count, DType dtype) override;
  void broadcast(void* buf, int64_t count, DType dtype, int root) override;
  void barrier() override;
  // Throws UserError: one emulated rank cannot know the colors the other ranks would pass.
  std::unique_ptr<Communicator> split(int color, int key) override;
  // Collective times from this communicator are modelled, never measured.
  static constexpr bool kTimesMeasured = false;

 private:
  CudaBackend& be_;
  int rank_, world_;
};

}  // namespace zeroplan::exec::cuda
