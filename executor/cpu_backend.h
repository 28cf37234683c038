#pragma once
// The cpu backend: Eigen for the matrix work, plain loops for the kernels, fp32 arithmetic
// everywhere (16-bit tensors are widened on load and rounded once on store). Host and device tiers
// are both ordinary memory here; the engine still accounts them apart. Scratch for widening GEMM
// operands is the backend's workspace (like cuBLAS's) and is not part of the engine's accounting.
#include <memory>
#include <unordered_map>
#include <vector>

#include "executor/backend.h"

namespace zeroplan::exec {

class CpuBackend final : public Backend {
 public:
  // device_budget_bytes > 0: the device tier holds at most that many bytes (an emulated GPU's
  // capacity); exceeding it throws OutOfMemory. 0: unlimited.
  explicit CpuBackend(int64_t device_budget_bytes = 0) : budget_(device_budget_bytes) {}
  std::string name() const override { return "cpu"; }
  void* allocate(int64_t bytes, MemTier tier) override;
  void release(void* p, MemTier tier) override;
  void copy(void* dst, const void* src, int64_t bytes, CopyKind kind) override;
  void zero(void* dst, int64_t bytes, MemTier tier) override;
  void upload(void* dst_device, const void* src_host, int64_t bytes) override;
  void download(void* dst_host, const void* src_device, int64_t bytes) override;
  void set_stream(Stream) override {}
  void wait(Stream, Stream) override {}
  void synchronize() override {}
  std::unique_ptr<Timer> make_timer() override;
  void gemm(int64_t m, int64_t n, int64_t k, const void* A, bool trans_a, const void* B, bool trans_b,
            DType ab, void* C, DType c, float alpha, float beta) override;
  void cast(void* dst, DType dst_t, const void* src, DType src_t, int64_t n) override;
  void scale(void* x, DType t, int64_t n, float alpha) override;
  void add(void* y, DType yt, const void* x, DType xt, int64_t n, float alpha) override;
  double sum_squares(const void* x, DType t, int64_t n) override;
  void embedding_forward(void* out, const void* wte, const int32_t* tokens, int64_t N, int64_t C,
                         DType t) override;
  void embedding_backward(void* dwte, const void* dout, const int32_t* tokens, int64_t N, int64_t C,
                          DType t) override;
  void rmsnorm_forward(void* out, float* rstd, const void* inp, const void* weight, int64_t N, int64_t C,
                       float eps, DType t) override;
  void rmsnorm_backward(void* dinp, void* dweight, const void* dout, const void* inp, const void* weight,
                        const float* rstd, int64_t N, int64_t C, DType t) override;
  void rotary(void* x, int64_t B, int64_t T, int64_t H, int64_t D, float theta, bool backward,
              DType t) override;
  void swiglu_forward(void* out, const void* gate, const void* up, int64_t N, int64_t I, DType t) override;
  void swiglu_backward(void* dgate, void* dup, const void* dout, const void* gate, const void* up, int64_t N,
                       int64_t I, DType t) override;
  void attention_forward(void* out, float* lse, const void* q, const void* k, const void* v, int64_t B,
                         int64_t T, int64_t Hq, int64_t Hkv, int64_t D, DType t) override;
  void attention_backward(void* dq, void* dk, void* dv, const void* dout, const void* q, const void* k,
                          const void* v, const void* out, const float* lse, int64_t B, int64_t T, int64_t Hq,
                          int64_t Hkv, int64_t D, DType t) override;
  void cross_entropy_forward(float* losses, const void* logits, const int32_t* targets, int64_t N, int64_t V,
                             DType t) override;
  void cross_entropy_backward(void* dlogits, const void* logits, const int32_t* targets, float dloss,
                              int64_t N, int64_t V, DType t) override;
  void adam_step(std::span<const AdamChunk> chunks, const AdamParams& p, MemTier tier) override;
  bool has_moe_kernels() const override { return true; }
  void moe_route_forward(float* probs, int32_t* idx, float* weights, const void* logits, int64_t N, int64_t E,
                         int64_t k, bool renorm, DType t) override;
  void moe_route_backward(void* dlogits, const float* dweights, const float* probs, const int32_t* idx,
                          int64_t N, int64_t E, int64_t k, bool renorm, DType t) override;
  void gather_rows(void* out, const void* in, const int32_t* pairs, int64_t R, int64_t C, int64_t k,
                   DType t) override;
  void scatter_add_rows(void* out, const void* in, const int32_t* pairs, const float* weights, int64_t R,
                        int64_t C, int64_t k, DType t) override;
  void scatter_add_rows_backward(void* din, float* dweights, const void* dout, const void* in,
                                 const int32_t* pairs, const float* weights, int64_t R, int64_t C, int64_t k,
                                 DType t) override;

 private:
  std::vector<float> wa_, wb_, wc_;  // GEMM widening workspace
  int64_t budget_ = 0;               // device-tier capacity (0 = unlimited)
  int64_t device_live_ = 0;          // device-tier bytes allocated (aligned sizes)
  std::unordered_map<void*, int64_t> device_sizes_;
};

}  // namespace zeroplan::exec
