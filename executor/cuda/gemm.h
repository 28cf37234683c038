#pragma once
// bf16 GEMMs through cuBLASLt with fp32 accumulation, in ROW-MAJOR terms (the engine's layout):
//   C[m,n] = alpha * op(A)[m,k] * op(B)[k,n] + beta * C
//   op(A) = A    (A stored [m,k], lda >= k)   or  A^T (A stored [k,m], lda >= m)   by trans_a
//   op(B) = B    (B stored [k,n], ldb >= n)   or  B^T (B stored [n,k], ldb >= k)   by trans_b
// C is bf16 or fp32 (fp32 for gradient accumulation in fp32 or for logits).
// A linear layer y = x W^T with W [out,in] (HF layout): gemm(false, true, T, out, in, x, in, W, in, y, out).
//
// cuBLASLt is column-major; a row-major X[r,c] is the column-major X^T, so we compute
// C^T = op(B)^T op(A)^T, i.e. call cuBLASLt with the operands swapped (see gemm.cpp).
// The workspace is owned by the caller so the engine's arena can tag it as overhead; its size is
// explicit (cuBLAS docs, "cublasSetWorkspace": 32 MiB recommended on Hopper, 4 MiB before).
#include <cublasLt.h>
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>
#include <map>
#include <tuple>

#include "executor/communicator.h"  // DType

namespace zeroplan::exec::cuda {

inline constexpr size_t kHopperGemmWorkspaceBytes = size_t{32} << 20;  // cuBLAS docs, see above

struct GemmShape {
  bool trans_a = false, trans_b = false;
  int64_t m = 0, n = 0, k = 0;
  int64_t lda = 0, ldb = 0, ldc = 0;
  double flops() const {
    return 2.0 * static_cast<double>(m) * static_cast<double>(n) * static_cast<double>(k);
  }
  // Densely packed row-major operands: C[m,n] = op(A) op(B), A stored [m,k] ([k,m] when trans_a),
  // B stored [k,n] ([n,k] when trans_b); the leading dimensions follow from the shape.
  static GemmShape row_major(int64_t m, int64_t n, int64_t k, bool trans_a, bool trans_b) {
    GemmShape s;
    s.trans_a = trans_a;
    s.trans_b = trans_b;
    s.m = m;
    s.n = n;
    s.k = k;
    s.lda = trans_a ? m : k;
    s.ldb = trans_b ? k : n;
    s.ldc = n;
    return s;
  }
};

class GemmRunner {
 public:
  // `workspace` (device memory, may be null when workspace_bytes == 0) stays owned by the caller.
  GemmRunner(void* workspace, size_t workspace_bytes);
  ~GemmRunner();
  GemmRunner(const GemmRunner&) = delete;
  GemmRunner& operator=(const GemmRunner&) = delete;

  void gemm(cudaStream_t stream, const GemmShape& shape, const __nv_bfloat16* A, const __nv_bfloat16* B,
            void* C, DType c_type, float alpha = 1.0f, float beta = 0.0f) {
    gemm(stream, shape, A, B, DType::BF16, C, c_type, alpha, beta);
  }
  // A and B of type ab_type: BF16 / F16 (tensor cores, fp32 accumulate) or F32 (plain fp32, no TF32,
  // for the fp32-precision runs). C of type c_type: F32, or ab_type.
  void gemm(cudaStream_t stream, const GemmShape& shape, const void* A, const void* B, DType ab_type, void* C,
            DType c_type, float alpha = 1.0f, float beta = 0.0f);

  size_t workspace_bytes() const { return workspace_bytes_; }
  size_t cached_plans() const { return plans_.size(); }

 private:
  struct Plan;
  using Key = std::tuple<bool, bool, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int, int, int, int,
                         int, bool>;
  Plan& plan_for(const GemmShape& s, DType ab_type, DType c_type, int align_a, int align_b, int align_c,
                 bool beta_nonzero);

  cublasLtHandle_t handle_ = nullptr;
  void* workspace_ = nullptr;
  size_t workspace_bytes_ = 0;
  std::map<Key, Plan*> plans_;
};

}  // namespace zeroplan::exec::cuda
