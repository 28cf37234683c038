#include "executor/cuda/gemm.h"

#include <fmt/format.h>

#include <memory>

#include "common/errors.h"
#include "executor/cuda/cuda_check.h"

namespace zeroplan::exec::cuda {

namespace {

cudaDataType_t to_cuda(DType t) {
  switch (t) {
    case DType::F32:
      return CUDA_R_32F;
    case DType::BF16:
      return CUDA_R_16BF;
    case DType::F16:
      return CUDA_R_16F;
  }
  return CUDA_R_32F;
}

// Largest power of two (<= 256, cuBLASLt's default assumption) dividing the address: the heuristic
// must only offer kernels whose vector loads this pointer supports (cuBLASLt docs,
// CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_*_BYTES, default 256).
int alignment_of(const void* p) {
  auto v = reinterpret_cast<uintptr_t>(p);
  int a = 256;
  while (a > 1 && (v % static_cast<uintptr_t>(a)) != 0) a /= 2;
  return a;
}

}  // namespace

struct GemmRunner::Plan {
  cublasLtMatmulDesc_t op = nullptr;
  cublasLtMatrixLayout_t a = nullptr, b = nullptr, c = nullptr;
  cublasLtMatmulAlgo_t algo{};
  ~Plan() {
    if (a) cublasLtMatrixLayoutDestroy(a);
    if (b) cublasLtMatrixLayoutDestroy(b);
    if (c) cublasLtMatrixLayoutDestroy(c);
    if (op) cublasLtMatmulDescDestroy(op);
  }
};

GemmRunner::GemmRunner(void* workspace, size_t workspace_bytes)
    : workspace_(workspace), workspace_bytes_(workspace_bytes) {
  ZP_CUBLAS_CHECK(cublasLtCreate(&handle_));
}

GemmRunner::~GemmRunner() {
  for (auto& [k, p] : plans_) delete p;
  if (handle_) cublasLtDestroy(handle_);
}

GemmRunner::Plan& GemmRunner::plan_for(const GemmShape& s, DType ab_type, DType c_type, int align_a,
                                       int align_b, int align_c, bool beta_nonzero) {
  const Key key{s.trans_a,
                s.trans_b,
                s.m,
                s.n,
                s.k,
                s.lda,
                s.ldb,
                s.ldc,
                static_cast<int>(ab_type),
                static_cast<int>(c_type),
                align_a,
                align_b,
                align_c,
                beta_nonzero};
  if (auto it = plans_.find(key); it != plans_.end()) return *it->second;

  auto plan = std::make_unique<Plan>();
  ZP_CUBLAS_CHECK(cublasLtMatmulDescCreate(&plan->op, CUBLAS_COMPUTE_32F, CUDA_R_32F));
  // Column-major view (see gemm.h): cuBLASLt's "A" is our B, its "B" is our A, its output is C^T [n,m].
  const cublasOperation_t op_lt_a = s.trans_b ? CUBLAS_OP_T : CUBLAS_OP_N;
  const cublasOperation_t op_lt_b = s.trans_a ? CUBLAS_OP_T : CUBLAS_OP_N;
  ZP_CUBLAS_CHECK(
      cublasLtMatmulDescSetAttribute(plan->op, CUBLASLT_MATMUL_DESC_TRANSA, &op_lt_a, sizeof(op_lt_a)));
  ZP_CUBLAS_CHECK(
      cublasLtMatmulDescSetAttribute(plan->op, CUBLASLT_MATMUL_DESC_TRANSB, &op_lt_b, sizeof(op_lt_b)));
  // Stored shapes in column-major terms: our B un-transposed is [k,n] row-major = col-major n x k.
  const uint64_t a_rows = static_cast<uint64_t>(s.trans_b ? s.k : s.n);
  const uint64_t a_cols = static_cast<uint64_t>(s.trans_b ? s.n : s.k);
  const uint64_t b_rows = static_cast<uint64_t>(s.trans_a ? s.m : s.k);
  const uint64_t b_cols = static_cast<uint64_t>(s.trans_a ? s.k : s.m);
  ZP_CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&plan->a, to_cuda(ab_type), a_rows, a_cols, s.ldb));
  ZP_CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&plan->b, to_cuda(ab_type), b_rows, b_cols, s.lda));
  ZP_CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&plan->c, to_cuda(c_type), static_cast<uint64_t>(s.n),
                                             static_cast<uint64_t>(s.m), s.ldc));

  cublasLtMatmulPreference_t pref = nullptr;
  ZP_CUBLAS_CHECK(cublasLtMatmulPreferenceCreate(&pref));
  struct PrefGuard {
    cublasLtMatmulPreference_t p;
    ~PrefGuard() { cublasLtMatmulPreferenceDestroy(p); }
  } guard{pref};
  const uint64_t ws = workspace_bytes_;
  ZP_CUBLAS_CHECK(
      cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws, sizeof(ws)));
  // Lt's A is our B and vice versa.
  const uint32_t al_a = static_cast<uint32_t>(align_b), al_b = static_cast<uint32_t>(align_a),
                 al_c = static_cast<uint32_t>(align_c);
  ZP_CUBLAS_CHECK(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES,
                                                       &al_a, sizeof(al_a)));
  ZP_CUBLAS_CHECK(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES,
                                                       &al_b, sizeof(al_b)));
  ZP_CUBLAS_CHECK(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES,
                                                       &al_c, sizeof(al_c)));
  ZP_CUBLAS_CHECK(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES,
                                                       &al_c, sizeof(al_c)));
  cublasLtMatmulHeuristicResult_t result{};
  int found = 0;
  ZP_CUBLAS_CHECK(cublasLtMatmulAlgoGetHeuristic(handle_, plan->op, plan->a, plan->b, plan->c, plan->c, pref,
                                                 1, &result, &found));
  if (found == 0)
    throw CudaError(
        fmt::format("cuBLASLt offers no algorithm for GEMM m={} n={} k={} (trans_a={}, "
                    "trans_b={}, lda={}, ldb={}, ldc={}) with {} bytes of workspace",
                    s.m, s.n, s.k, s.trans_a, s.trans_b, s.lda, s.ldb, s.ldc, workspace_bytes_));
  plan->algo = result.algo;
  Plan* raw = plan.release();
  plans_.emplace(key, raw);
  return *raw;
}

void GemmRunner::gemm(cudaStream_t stream, const GemmShape& s, const void* A, const void* B, DType ab_type,
                      void* C, DType c_type, float alpha, float beta) {
  ZP_CHECK(s.m > 0 && s.n > 0 && s.k > 0, "GEMM with an empty dimension m={} n={} k={}", s.m, s.n, s.k);
  ZP_CHECK(s.lda >= (s.trans_a ? s.m : s.k) && s.ldb >= (s.trans_b ? s.k : s.n) && s.ldc >= s.n,
           "GEMM leading dimensions too small (lda={} ldb={} ldc={})", s.lda, s.ldb, s.ldc);
  ZP_CHECK(c_type == DType::F32 || c_type == ab_type, "GEMM output must be fp32 or the input type");
  Plan& p = plan_for(s, ab_type, c_type, alignment_of(A), alignment_of(B), alignment_of(C), beta != 0.0f);
  ZP_CUBLAS_CHECK(cublasLtMatmul(handle_, p.op, &alpha, B, p.a, A, p.b, &beta, C, p.c, C, p.c, &p.algo,
                                 workspace_, workspace_bytes_, stream));
}

}  // namespace zeroplan::exec::cuda
