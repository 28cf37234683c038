#pragma once
// Checked CUDA, cuBLAS(Lt) calls. Every call into the CUDA runtime or cuBLASLt goes through one of
// these macros; a failure throws CudaError naming the call that failed, where (file:line) and the
// library's own error string — the style of TransformerEngine's NVTE_CHECK_CUDA / NVTE_CHECK_CUBLAS
// (transformer_engine/common/util/logging.h), so a failure on a GPU machine is diagnosable from its
// one line of output. NCCL has its own macro in nccl_communicator.cpp (nccl.h is optional).
#include <cublasLt.h>
#include <cuda_runtime.h>

#include <stdexcept>
#include <string>

namespace zeroplan::exec::cuda {

// A failed CUDA/cuBLAS/NCCL call: not the user's fault (a broken GPU, an OOM, a bug of ours).
class CudaError : public std::runtime_error {
 public:
  explicit CudaError(const std::string& what) : std::runtime_error(what) {}
};

[[noreturn]] void throw_cuda_error(const char* library, const char* call, const char* file, int line,
                                   const std::string& detail);
std::string cublas_status_string(cublasStatus_t s);

}  // namespace zeroplan::exec::cuda

#define ZP_CUDA_CHECK(call)                                                                             \
  do {                                                                                                  \
    const cudaError_t zp_cuda_status_ = (call);                                                         \
    if (zp_cuda_status_ != cudaSuccess)                                                                 \
      ::zeroplan::exec::cuda::throw_cuda_error(                                                         \
          "CUDA", #call, __FILE__, __LINE__,                                                            \
          std::string(cudaGetErrorName(zp_cuda_status_)) + ": " + cudaGetErrorString(zp_cuda_status_)); \
  } while (0)

// After a kernel launch: catches bad launch configurations immediately (asynchronous faults surface
// at the next synchronising call, which is itself checked).
#define ZP_CUDA_CHECK_LAUNCH(kernel_name) ZP_CUDA_CHECK(cudaPeekAtLastError())

#define ZP_CUBLAS_CHECK(call)                                               \
  do {                                                                      \
    const cublasStatus_t zp_cublas_status_ = (call);                        \
    if (zp_cublas_status_ != CUBLAS_STATUS_SUCCESS)                         \
      ::zeroplan::exec::cuda::throw_cuda_error(                             \
          "cuBLAS", #call, __FILE__, __LINE__,                              \
          ::zeroplan::exec::cuda::cublas_status_string(zp_cublas_status_)); \
  } while (0)

// Internal invariant inside .cu files (nvcc's front end rejects fmt's consteval format strings, so
// ZP_CHECK from common/errors.h is for host .cpp files only). `msg` is a std::string expression.
#define ZP_CUDA_REQUIRE(cond, msg)                                                                       \
  do {                                                                                                   \
    if (!(cond)) ::zeroplan::exec::cuda::throw_cuda_error("zeroplan", #cond, __FILE__, __LINE__, (msg)); \
  } while (0)
