#include "executor/cuda/cuda_check.h"

#include <fmt/format.h>

namespace zeroplan::exec::cuda {

void throw_cuda_error(const char* library, const char* call, const char* file, int line,
                      const std::string& detail) {
  throw CudaError(fmt::format("{}:{}: {} call '{}' failed: {}", file, line, library, call, detail));
}

std::string cublas_status_string(cublasStatus_t s) {
  // cublasGetStatusName/String exist since cuBLAS 11.4 (cuBLAS docs, "cublasGetStatusString()").
  return fmt::format("{} ({})", cublasGetStatusName(s), cublasGetStatusString(s));
}

}  // namespace zeroplan::exec::cuda
