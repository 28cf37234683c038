#pragma once
// The cuda backend: one GPU, executor/backend.h implemented with cuBLASLt (gemm.h) and our kernels
// (kernels.h). Two streams (compute, communication) ordered by events; CUDA-event phase timers;
// host tier = pinned memory (cudaMallocHost) so offload copies run asynchronously; CPU AdamW for the
// host tier (host_adam.h) overlapping its host-to-device parameter copies.
//
// Memory it takes itself (not through the engine's arena, hence not in the engine's category
// accounting): the cuBLASLt workspace and kernel scratch (attention backward dQ accumulator, norm
// partial sums). They are reported here as workspace_bytes, and everything else the device holds
// (CUDA context, cuBLAS/NCCL internals, fragmentation) shows up in the device-level numbers
// sampled from cudaMemGetInfo after every allocation and synchronisation.
#include <cuda_runtime.h>

#include <array>
#include <atomic>
#include <functional>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "executor/backend.h"
#include "executor/cuda/gemm.h"

namespace zeroplan::exec::cuda {

struct CudaMemoryReport {
  int64_t total_bytes = 0;          // device capacity (cudaMemGetInfo)
  int64_t baseline_used_bytes = 0;  // used right after the context, streams and cuBLASLt were set up
  int64_t peak_used_bytes = 0;      // maximum of (total - free) seen at any sample
  int64_t current_used_bytes = 0;
  int64_t workspace_bytes = 0;      // cuBLASLt workspace + kernel scratch now held
  int64_t engine_device_bytes = 0;  // live bytes the engine holds through allocate(Device)
  int64_t engine_device_peak_bytes = 0;
  int64_t pinned_host_bytes = 0;  // live host-tier (pinned) bytes, engine + staging
  int64_t pinned_host_peak_bytes = 0;
};

// FLOPs this backend executed, for achieved TFLOP/s and MFU (= achieved / the profile's dense bf16
// peak). GEMMs count 2mnk. Causal attention counts the multiply-adds actually needed: forward
// QK^T and PV over the lower triangle, 2 * 2 * B*Hq*D*S^2/2; backward recomputes QK^T and does dP,
// dV, dK, dQ: 5 products, 2.5x the forward (FlashAttention-2 paper, sec. 4.1 counts the same).
struct CudaComputeCounters {
  double gemm_flops = 0;
  double attention_flops = 0;
  double total() const { return gemm_flops + attention_flops; }
};

class CudaBackend final : public Backend {
 public:
  explicit CudaBackend(int device);
  ~CudaBackend() override;
  CudaBackend(const CudaBackend&) = delete;
  CudaBackend& operator=(const CudaBackend&) = delete;

  std::string name() const override { return name_; }
  void* allocate(int64_t bytes, MemTier tier) override;
  void release(void* p, MemTier tier) override;
  void copy(void* dst, const void* src, int64_t bytes, CopyKind kind) override;
  void zero(void* dst, int64_t bytes, MemTier tier) override;
  void upload(void* dst_device, const void* src_host, int64_t bytes) override;
  void download(void* dst_host, const void* src_device, int64_t bytes) override;
  DeviceMemoryInfo memory_info() const override;

  void set_stream(Stream s) override { current_ = s; }
  void wait(Stream waiter, Stream signaller) override;
  int64_t record_event(Stream s) override;
  void wait_event(Stream waiter, int64_t event) override;
  void synchronize() override;
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

  // ---- cuda specifics
  int device() const { return device_; }
  // Makes this backend's GPU current on the calling thread (each rank thread calls through here).
  void activate() const;
  cudaStream_t stream(Stream s) const { return s == Stream::Compute ? compute_ : comm_; }
  cudaStream_t current_stream() const { return stream(current_); }
  CudaMemoryReport memory_report() const;
  const CudaComputeCounters& compute_counters() const { return flops_; }
  void reset_compute_counters() { flops_ = {}; }
  void sample_device_memory();  // updates the device-level peak from cudaMemGetInfo
  void reset_peaks();           // start measuring a later step on its own
  GemmRunner& gemm_runner() { return *gemm_; }
  // Called while synchronize() polls (NCCL: async-error and timeout check; throws to abort).
  void set_poll_hook(std::function<void(double waited_seconds)> hook) { poll_hook_ = std::move(hook); }

 private:
  void* scratch(int slot, int64_t bytes);  // grow-only device scratch, tagged as workspace
  void wait_stream(cudaStream_t s);        // polls, calling poll_hook_
  void require_bf16(DType t, const char* what) const;
  void kernels_cast(void* dst, DType dst_t, const void* src, DType src_t, int64_t n);

  int device_ = 0;
  std::string name_;
  cudaStream_t compute_ = nullptr, comm_ = nullptr;
  cudaEvent_t compute_done_ = nullptr, comm_done_ = nullptr;
  // record_event's rings, one per stream (a handle encodes stream and sequence number), created lazily.
  std::array<std::vector<cudaEvent_t>, 2> event_ring_;
  std::array<int64_t, 2> events_recorded_{};
  Stream current_ = Stream::Compute;
  void* gemm_workspace_ = nullptr;
  std::unique_ptr<GemmRunner> gemm_;
  struct Scratch {
    void* ptr = nullptr;
    int64_t bytes = 0;
  };
  std::vector<Scratch> scratch_;
  float* host_scalar_ = nullptr;           // pinned, for sum_squares results
  void* staging_[2] = {nullptr, nullptr};  // pinned bf16 staging for offloaded Adam's parameter copies
  int64_t staging_bytes_ = 0;
  cudaEvent_t staging_done_[2] = {nullptr, nullptr};
  std::function<void(double)> poll_hook_;
  CudaComputeCounters flops_;

  int64_t total_ = 0, baseline_used_ = 0;
  std::atomic<int64_t> peak_used_{0};
  int64_t engine_live_ = 0, engine_peak_ = 0, pinned_live_ = 0, pinned_peak_ = 0;
  struct AllocationMeta {
    int64_t bytes = 0;
    MemTier tier = MemTier::Device;
  };
  std::unordered_map<void*, AllocationMeta> allocations_;  // for release() accounting and teardown
};

class CudaTimer final : public Timer {
 public:
  explicit CudaTimer(CudaBackend& be) : be_(be) {}
  ~CudaTimer() override;
  void begin() override;
  void end() override;
  double seconds() override;
  void reset() override;

 private:
  CudaBackend& be_;
  std::vector<std::pair<cudaEvent_t, cudaEvent_t>> events_;
  size_t used_ = 0;
  bool open_ = false;
};

}  // namespace zeroplan::exec::cuda
