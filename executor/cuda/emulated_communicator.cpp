#include "executor/cuda/emulated_communicator.h"

#include <cuda_runtime.h>
#include <fmt/format.h>

#include "common/errors.h"
#include "executor/cuda/cuda_backend.h"
#include "executor/cuda/cuda_check.h"
#include "executor/cuda/kernels.h"

namespace zeroplan::exec::cuda {

EmulatedCommunicator::EmulatedCommunicator(CudaBackend& backend, int rank, int world_size)
    : be_(backend), rank_(rank), world_(world_size) {
  if (world_size < 1 || rank < 0 || rank >= world_size)
    throw_user_error("--emulate-rank {} is outside the plan's {} ranks (0..{})", rank, world_size,
                     world_size - 1);
}

void EmulatedCommunicator::all_reduce(void* buf, int64_t count, DType dtype) {
  Communicator::count(CollKind::AllReduce, count * dtype_bytes(dtype));
  if (world_ > 1) {
    be_.activate();
    cuda::scale(be_.current_stream(), buf, dtype, count, static_cast<float>(world_));
  }
}

void EmulatedCommunicator::reduce_scatter(const void* send, void* recv, int64_t count, DType dtype) {
  Communicator::count(CollKind::ReduceScatter, world_ * count * dtype_bytes(dtype));
  be_.activate();
  const auto* mine = static_cast<const char*>(send) + rank_ * count * dtype_bytes(dtype);
  if (mine != recv)
    ZP_CUDA_CHECK(cudaMemcpyAsync(recv, mine, static_cast<size_t>(count * dtype_bytes(dtype)),
                                  cudaMemcpyDeviceToDevice, be_.current_stream()));
  if (world_ > 1) cuda::scale(be_.current_stream(), recv, dtype, count, static_cast<float>(world_));
}

void EmulatedCommunicator::all_gather(const void* send, void* recv, int64_t count, DType dtype) {
  const int64_t chunk = count * dtype_bytes(dtype);
  Communicator::count(CollKind::AllGather, world_ * chunk);
  be_.activate();
  for (int i = 0; i < world_; ++i) {
    char* dst = static_cast<char*>(recv) + i * chunk;
    if (dst == send) continue;  // in-place gather: our own chunk is already there
    ZP_CUDA_CHECK(cudaMemcpyAsync(dst, send, static_cast<size_t>(chunk), cudaMemcpyDeviceToDevice,
                                  be_.current_stream()));
  }
}

void EmulatedCommunicator::broadcast(void*, int64_t count, DType dtype, int root) {
  ZP_CHECK(root >= 0 && root < world_, "broadcast root {} outside {} ranks", root, world_);
  Communicator::count(CollKind::Broadcast, count * dtype_bytes(dtype));
}

void EmulatedCommunicator::barrier() {}

std::unique_ptr<Communicator> EmulatedCommunicator::split(int, int) {
  throw UserError(fmt::format(
      "the one-GPU emulation of rank {} of {} cannot form process groups (the other ranks' groups are not "
      "known to it); run every rank: --backend cpu, or one GPU per rank",
      rank_, world_));
}

}  // namespace zeroplan::exec::cuda
