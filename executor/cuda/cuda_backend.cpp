#include "executor/cuda/cuda_backend.h"

#include <fmt/format.h>

#include <chrono>
#include <cstring>
#include <thread>

#include "common/errors.h"
#include "executor/cuda/cuda_check.h"
#include "executor/cuda/device.h"
#include "executor/cuda/host_adam.h"
#include "executor/cuda/kernels.h"
#include "executor/dtype_io.h"

namespace zeroplan::exec::cuda {

namespace {

constexpr int kScratchAttention = 0, kScratchNorm = 1, kScratchScalar = 2, kScratchSlots = 3;
// Offloaded Adam streams its updated 16-bit parameters to the GPU in pieces of this many elements
// (8 MiB of bf16): small enough that the copy of one piece hides behind the CPU update of the next.
constexpr int64_t kAdamPiece = int64_t{4} << 20;
// cuda error code for an allocation failure, reported with the numbers the user needs.
[[noreturn]] void throw_oom(int64_t bytes, const char* tier) {
  size_t free_b = 0, total_b = 0;
  (void)cudaGetLastError();
  (void)cudaMemGetInfo(&free_b, &total_b);
  throw OutOfMemory(
      fmt::format("out of {} memory: asked for {:.3f} GiB with {:.3f} GiB of {:.3f} GiB free on the device",
                  tier, static_cast<double>(bytes) / (1 << 30), static_cast<double>(free_b) / (1 << 30),
                  static_cast<double>(total_b) / (1 << 30)),
      bytes, tier);
}

bool on_host(const void* p) {
  cudaPointerAttributes a{};
  if (cudaPointerGetAttributes(&a, p) != cudaSuccess) {
    (void)cudaGetLastError();
    return true;  // unknown to CUDA: ordinary host memory
  }
  return a.type == cudaMemoryTypeHost || a.type == cudaMemoryTypeUnregistered;
}

cudaMemcpyKind to_cuda(CopyKind k) {
  switch (k) {
    case CopyKind::DeviceToDevice:
      return cudaMemcpyDeviceToDevice;
    case CopyKind::HostToDevice:
      return cudaMemcpyHostToDevice;
    case CopyKind::DeviceToHost:
      return cudaMemcpyDeviceToHost;
    case CopyKind::HostToHost:
      return cudaMemcpyHostToHost;
  }
  return cudaMemcpyDefault;
}

}  // namespace

CudaBackend::CudaBackend(int device) : device_(device), scratch_(kScratchSlots) {
  activate();
  ZP_CUDA_CHECK(cudaFree(nullptr));  // create the context now, so the baseline below includes it
  const DeviceInfo info = device_info(device);
  name_ = fmt::format("cuda:{} ({})", device, info.name);
  ZP_CUDA_CHECK(cudaStreamCreateWithFlags(&compute_, cudaStreamNonBlocking));
  ZP_CUDA_CHECK(cudaStreamCreateWithFlags(&comm_, cudaStreamNonBlocking));
  ZP_CUDA_CHECK(cudaEventCreateWithFlags(&compute_done_, cudaEventDisableTiming));
  ZP_CUDA_CHECK(cudaEventCreateWithFlags(&comm_done_, cudaEventDisableTiming));
  for (auto& e : staging_done_) ZP_CUDA_CHECK(cudaEventCreateWithFlags(&e, cudaEventDisableTiming));
  ZP_CUDA_CHECK(cudaMalloc(&gemm_workspace_, kHopperGemmWorkspaceBytes));
  gemm_ = std::make_unique<GemmRunner>(gemm_workspace_, kHopperGemmWorkspaceBytes);
  ZP_CUDA_CHECK(cudaMallocHost(reinterpret_cast<void**>(&host_scalar_), sizeof(float)));
  const MemInfo mi = mem_info();
  total_ = mi.total_bytes;
  baseline_used_ = mi.used_bytes();
  peak_used_ = baseline_used_;
}

CudaBackend::~CudaBackend() {
  // Destructors must not throw: errors here are ignored (the process is tearing down the device).
  cudaSetDevice(device_);
  cudaDeviceSynchronize();
  for (auto& [p, meta] : allocations_) {
    if (meta.tier == MemTier::Device)
      cudaFree(p);
    else
      cudaFreeHost(p);
  }
  for (auto& s : scratch_)
    if (s.ptr) cudaFree(s.ptr);
  for (void* p : staging_)
    if (p) cudaFreeHost(p);
  if (host_scalar_) cudaFreeHost(host_scalar_);
  gemm_.reset();
  if (gemm_workspace_) cudaFree(gemm_workspace_);
  for (auto e : staging_done_)
    if (e) cudaEventDestroy(e);
  for (auto& ring : event_ring_)
    for (cudaEvent_t e : ring)
      if (e) cudaEventDestroy(e);
  if (compute_done_) cudaEventDestroy(compute_done_);
  if (comm_done_) cudaEventDestroy(comm_done_);
  if (compute_) cudaStreamDestroy(compute_);
  if (comm_) cudaStreamDestroy(comm_);
}

void CudaBackend::activate() const {
  // cudaGetDevice reads the runtime's per-thread state (no driver call); asking it rather than
  // caching keeps us right when other code (NCCL's init, a test) switched devices meanwhile.
  int current = -1;
  ZP_CUDA_CHECK(cudaGetDevice(&current));
  if (current != device_) ZP_CUDA_CHECK(cudaSetDevice(device_));
}

void CudaBackend::require_bf16(DType t, const char* what) const {
  if (t != DType::BF16)
    throw_user_error(
        "the cuda backend runs {} in bf16 only (its kernels and flash attention use bf16 tensor cores); "
        "use --precision bf16",
        what);
}

void CudaBackend::sample_device_memory() {
  const MemInfo mi = mem_info();
  int64_t prev = peak_used_.load();
  while (mi.used_bytes() > prev && !peak_used_.compare_exchange_weak(prev, mi.used_bytes())) {
  }
}

void CudaBackend::reset_peaks() {
  synchronize();
  peak_used_ = mem_info().used_bytes();
  engine_peak_ = engine_live_;
  pinned_peak_ = pinned_live_;
}

CudaMemoryReport CudaBackend::memory_report() const {
  CudaMemoryReport r;
  const MemInfo mi = mem_info();
  r.total_bytes = total_;
  r.baseline_used_bytes = baseline_used_;
  r.current_used_bytes = mi.used_bytes();
  r.peak_used_bytes = std::max(peak_used_.load(), r.current_used_bytes);
  r.workspace_bytes = static_cast<int64_t>(kHopperGemmWorkspaceBytes);
  for (const auto& s : scratch_) r.workspace_bytes += s.bytes;
  r.engine_device_bytes = engine_live_;
  r.engine_device_peak_bytes = engine_peak_;
  r.pinned_host_bytes = pinned_live_;
  r.pinned_host_peak_bytes = pinned_peak_;
  return r;
}

DeviceMemoryInfo CudaBackend::memory_info() const {
  activate();
  const MemInfo mi = mem_info();
  DeviceMemoryInfo d;
  d.used_bytes = mi.used_bytes();
  d.total_bytes = mi.total_bytes;
  return d;
}

void* CudaBackend::allocate(int64_t bytes, MemTier tier) {
  activate();
  ZP_CHECK(bytes >= 0, "negative allocation of {} bytes", bytes);
  void* p = nullptr;
  const size_t n = static_cast<size_t>(std::max<int64_t>(bytes, 1));
  if (tier == MemTier::Device) {
    // cudaMalloc returns 256-byte aligned memory (CUDA C++ Programming Guide, "Device Memory Accesses").
    const cudaError_t e = cudaMalloc(&p, n);
    if (e == cudaErrorMemoryAllocation) throw_oom(bytes, "device");
    ZP_CUDA_CHECK(e);
    engine_live_ += bytes;
    engine_peak_ = std::max(engine_peak_, engine_live_);
  } else {
    const cudaError_t e = cudaMallocHost(&p, n);
    if (e == cudaErrorMemoryAllocation) throw_oom(bytes, "pinned host");
    ZP_CUDA_CHECK(e);
    pinned_live_ += bytes;
    pinned_peak_ = std::max(pinned_peak_, pinned_live_);
  }
  allocations_[p] = {bytes, tier};
  sample_device_memory();
  return p;
}

void CudaBackend::release(void* p, MemTier tier) {
  if (p == nullptr) return;
  activate();
  auto it = allocations_.find(p);
  ZP_CHECK(it != allocations_.end(), "release of a pointer this backend did not allocate");
  ZP_CHECK(it->second.tier == tier, "release with the wrong memory tier");
  if (tier == MemTier::Device) {
    ZP_CUDA_CHECK(cudaFree(p));
    engine_live_ -= it->second.bytes;
  } else {
    ZP_CUDA_CHECK(cudaFreeHost(p));
    pinned_live_ -= it->second.bytes;
  }
  allocations_.erase(it);
}

void CudaBackend::copy(void* dst, const void* src, int64_t bytes, CopyKind kind) {
  if (bytes == 0) return;
  activate();
  if (kind == CopyKind::HostToHost) {
    wait_stream(current_stream());
    std::memcpy(dst, src, static_cast<size_t>(bytes));
    return;
  }
  ZP_CUDA_CHECK(cudaMemcpyAsync(dst, src, static_cast<size_t>(bytes), to_cuda(kind), current_stream()));
}

void CudaBackend::zero(void* dst, int64_t bytes, MemTier tier) {
  if (bytes == 0) return;
  activate();
  if (tier == MemTier::Device) {
    ZP_CUDA_CHECK(cudaMemsetAsync(dst, 0, static_cast<size_t>(bytes), current_stream()));
  } else {
    wait_stream(current_stream());
    std::memset(dst, 0, static_cast<size_t>(bytes));
  }
}

void CudaBackend::upload(void* dst_device, const void* src_host, int64_t bytes) {
  if (bytes == 0) return;
  activate();
  ZP_CUDA_CHECK(cudaMemcpyAsync(dst_device, src_host, static_cast<size_t>(bytes), cudaMemcpyHostToDevice,
                                current_stream()));
  wait_stream(current_stream());
}

void CudaBackend::download(void* dst_host, const void* src_device, int64_t bytes) {
  if (bytes == 0) return;
  activate();
  ZP_CUDA_CHECK(cudaMemcpyAsync(dst_host, src_device, static_cast<size_t>(bytes), cudaMemcpyDeviceToHost,
                                current_stream()));
  wait_stream(current_stream());
}

void CudaBackend::wait(Stream waiter, Stream signaller) {
  if (waiter == signaller) return;
  activate();
  cudaEvent_t ev = signaller == Stream::Compute ? compute_done_ : comm_done_;
  ZP_CUDA_CHECK(cudaEventRecord(ev, stream(signaller)));
  ZP_CUDA_CHECK(cudaStreamWaitEvent(stream(waiter), ev, 0));
}

int64_t CudaBackend::record_event(Stream s) {
  activate();
  const size_t k = static_cast<size_t>(s);
  auto& ring = event_ring_[k];
  if (ring.empty()) ring.assign(static_cast<size_t>(kEventsInFlight), nullptr);
  const int64_t seq = events_recorded_[k]++;
  cudaEvent_t& ev = ring[static_cast<size_t>(seq % kEventsInFlight)];
  if (!ev) ZP_CUDA_CHECK(cudaEventCreateWithFlags(&ev, cudaEventDisableTiming));
  ZP_CUDA_CHECK(cudaEventRecord(ev, stream(s)));
  return seq * 2 + static_cast<int64_t>(k);
}

void CudaBackend::wait_event(Stream waiter, int64_t event) {
  const size_t k = static_cast<size_t>(event % 2);
  if (k == static_cast<size_t>(waiter)) return;  // a stream is ordered with itself
  activate();
  ZP_CHECK(event / 2 < events_recorded_[k], "wait_event on an event that was never recorded");
  ZP_CUDA_CHECK(cudaStreamWaitEvent(stream(waiter),
                                    event_ring_[k][static_cast<size_t>((event / 2) % kEventsInFlight)], 0));
}

void CudaBackend::wait_stream(cudaStream_t s) {
  if (!poll_hook_) {
    ZP_CUDA_CHECK(cudaStreamSynchronize(s));
    return;
  }
  // Polling instead of blocking, so a collective that never completes (a dead peer) is noticed by
  // the hook (ncclCommGetAsyncError + timeout -> ncclCommAbort) instead of hanging forever.
  const auto start = std::chrono::steady_clock::now();
  for (;;) {
    const cudaError_t e = cudaStreamQuery(s);
    if (e == cudaSuccess) return;
    if (e != cudaErrorNotReady) ZP_CUDA_CHECK(e);
    const double waited = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    poll_hook_(waited);
    std::this_thread::sleep_for(std::chrono::microseconds(waited < 0.01 ? 5 : 200));
  }
}

void CudaBackend::synchronize() {
  activate();
  wait_stream(compute_);
  wait_stream(comm_);
  sample_device_memory();
}

std::unique_ptr<Timer> CudaBackend::make_timer() {
  return std::make_unique<CudaTimer>(*this);
}

void* CudaBackend::scratch(int slot, int64_t bytes) {
  Scratch& s = scratch_[static_cast<size_t>(slot)];
  if (s.bytes < bytes) {
    if (s.ptr) {
      synchronize();  // kernels still reading the old scratch must finish before it is freed
      ZP_CUDA_CHECK(cudaFree(s.ptr));
      s.ptr = nullptr;
      s.bytes = 0;
    }
    const cudaError_t e = cudaMalloc(&s.ptr, static_cast<size_t>(bytes));
    if (e == cudaErrorMemoryAllocation) throw_oom(bytes, "device (kernel scratch)");
    ZP_CUDA_CHECK(e);
    s.bytes = bytes;
    sample_device_memory();
  }
  return s.ptr;
}

// ---------------------------------------------------------------- GEMM and elementwise

void CudaBackend::gemm(int64_t m, int64_t n, int64_t k, const void* A, bool trans_a, const void* B,
                       bool trans_b, DType ab, void* C, DType c, float alpha, float beta) {
  activate();
  const GemmShape s = GemmShape::row_major(m, n, k, trans_a, trans_b);
  gemm_->gemm(current_stream(), s, A, B, ab, C, c, alpha, beta);
  flops_.gemm_flops += s.flops();
}

void CudaBackend::cast(void* dst, DType dst_t, const void* src, DType src_t, int64_t n) {
  activate();
  if (on_host(dst) && on_host(src)) {  // offload tier: the CPU does it, after pending copies land
    wait_stream(current_stream());
    for (int64_t i = 0; i < n; ++i) store_elem(dst, dst_t, i, load_elem(src, src_t, i));
    return;
  }
  kernels_cast(dst, dst_t, src, src_t, n);
}

void CudaBackend::kernels_cast(void* dst, DType dst_t, const void* src, DType src_t, int64_t n) {
  cuda::cast(current_stream(), dst, dst_t, src, src_t, n);
}

void CudaBackend::scale(void* x, DType t, int64_t n, float alpha) {
  activate();
  if (on_host(x)) {
    wait_stream(current_stream());
    for (int64_t i = 0; i < n; ++i) store_elem(x, t, i, load_elem(x, t, i) * alpha);
    return;
  }
  cuda::scale(current_stream(), x, t, n, alpha);
}

void CudaBackend::add(void* y, DType yt, const void* x, DType xt, int64_t n, float alpha) {
  activate();
  if (on_host(y) && on_host(x)) {
    wait_stream(current_stream());
    for (int64_t i = 0; i < n; ++i) store_elem(y, yt, i, load_elem(y, yt, i) + alpha * load_elem(x, xt, i));
    return;
  }
  cuda::axpy(current_stream(), y, yt, x, xt, n, alpha);
}

double CudaBackend::sum_squares(const void* x, DType t, int64_t n) {
  activate();
  if (on_host(x)) {
    wait_stream(current_stream());
    double s = 0;
    for (int64_t i = 0; i < n; ++i) {
      const double v = load_elem(x, t, i);
      s += v * v;
    }
    return s;
  }
  // fp32 partial sums per block, added in fp32: relative error ~ blocks * 2^-24, far below what
  // gradient clipping needs.
  auto* acc = static_cast<float*>(scratch(kScratchScalar, sizeof(float)));
  ZP_CUDA_CHECK(cudaMemsetAsync(acc, 0, sizeof(float), current_stream()));
  cuda::sum_squares(current_stream(), x, t, n, acc);
  ZP_CUDA_CHECK(cudaMemcpyAsync(host_scalar_, acc, sizeof(float), cudaMemcpyDeviceToHost, current_stream()));
  wait_stream(current_stream());
  return static_cast<double>(*host_scalar_);
}

// ---------------------------------------------------------------- model kernels

void CudaBackend::embedding_forward(void* out, const void* wte, const int32_t* tokens, int64_t N, int64_t C,
                                    DType t) {
  require_bf16(t, "embedding");
  activate();
  embedding_fwd(current_stream(), static_cast<const bf16*>(wte), tokens, static_cast<bf16*>(out), N, C);
}

void CudaBackend::embedding_backward(void* dwte, const void* dout, const int32_t* tokens, int64_t N,
                                     int64_t C, DType t) {
  require_bf16(t, "embedding");
  activate();
  embedding_bwd(current_stream(), static_cast<const bf16*>(dout), tokens, static_cast<bf16*>(dwte), N, C);
}

void CudaBackend::rmsnorm_forward(void* out, float* rstd, const void* inp, const void* weight, int64_t N,
                                  int64_t C, float eps, DType t) {
  require_bf16(t, "RMSNorm");
  activate();
  rmsnorm_fwd(current_stream(), static_cast<const bf16*>(inp), static_cast<const bf16*>(weight),
              static_cast<bf16*>(out), rstd, N, C, eps);
}

void CudaBackend::rmsnorm_backward(void* dinp, void* dweight, const void* dout, const void* inp,
                                   const void* weight, const float* rstd, int64_t N, int64_t C, DType t) {
  require_bf16(t, "RMSNorm");
  activate();
  auto* dw_scratch = static_cast<float*>(scratch(kScratchNorm, C * static_cast<int64_t>(sizeof(float))));
  rmsnorm_bwd(current_stream(), static_cast<const bf16*>(dout), static_cast<const bf16*>(inp),
              static_cast<const bf16*>(weight), rstd, static_cast<bf16*>(dinp), static_cast<bf16*>(dweight),
              dw_scratch, N, C, /*accumulate_dx=*/true, /*accumulate_dw=*/true);
}

void CudaBackend::rotary(void* x, int64_t B, int64_t T, int64_t H, int64_t D, float theta, bool backward,
                         DType t) {
  require_bf16(t, "rotary embedding");
  activate();
  rotary_apply(current_stream(), static_cast<bf16*>(x), B * T, T, H, D, theta, backward);
}

void CudaBackend::swiglu_forward(void* out, const void* gate, const void* up, int64_t N, int64_t I, DType t) {
  require_bf16(t, "SwiGLU");
  activate();
  swiglu_fwd(current_stream(), static_cast<const bf16*>(gate), static_cast<const bf16*>(up),
             static_cast<bf16*>(out), N * I);
}

void CudaBackend::swiglu_backward(void* dgate, void* dup, const void* dout, const void* gate, const void* up,
                                  int64_t N, int64_t I, DType t) {
  require_bf16(t, "SwiGLU");
  activate();
  swiglu_bwd(current_stream(), static_cast<const bf16*>(dout), static_cast<const bf16*>(gate),
             static_cast<const bf16*>(up), static_cast<bf16*>(dgate), static_cast<bf16*>(dup), N * I);
}

namespace {
AttentionShape attention_shape(int64_t B, int64_t T, int64_t Hq, int64_t Hkv, int64_t D) {
  if (!attention_head_dim_supported(D))
    throw_user_error(
        "the cuda backend's flash attention supports head_dim 16, 32, 64, 96 or 128; this model has {}", D);
  AttentionShape a;
  a.batch = B;
  a.seq = T;
  a.heads = Hq;
  a.kv_heads = Hkv;
  a.head_dim = D;
  return a;
}
}  // namespace

void CudaBackend::attention_forward(void* out, float* lse, const void* q, const void* k, const void* v,
                                    int64_t B, int64_t T, int64_t Hq, int64_t Hkv, int64_t D, DType t) {
  require_bf16(t, "attention");
  activate();
  attention_fwd(current_stream(), attention_shape(B, T, Hq, Hkv, D), static_cast<const bf16*>(q),
                static_cast<const bf16*>(k), static_cast<const bf16*>(v), static_cast<bf16*>(out), lse);
  flops_.attention_flops +=
      2.0 * static_cast<double>(B * Hq * D) * static_cast<double>(T) * static_cast<double>(T);
}

void CudaBackend::attention_backward(void* dq, void* dk, void* dv, const void* dout, const void* q,
                                     const void* k, const void* v, const void* out, const float* lse,
                                     int64_t B, int64_t T, int64_t Hq, int64_t Hkv, int64_t D, DType t) {
  require_bf16(t, "attention");
  activate();
  const AttentionShape a = attention_shape(B, T, Hq, Hkv, D);
  auto* base = static_cast<float*>(scratch(kScratchAttention, AttentionBwdScratch::bytes(a)));
  AttentionBwdScratch sc;
  sc.dq_accum = base;
  sc.delta = base + B * T * Hq * D;
  attention_bwd(current_stream(), a, static_cast<const bf16*>(q), static_cast<const bf16*>(k),
                static_cast<const bf16*>(v), static_cast<const bf16*>(out), static_cast<const bf16*>(dout),
                lse, static_cast<bf16*>(dq), static_cast<bf16*>(dk), static_cast<bf16*>(dv), sc);
  flops_.attention_flops +=
      5.0 * static_cast<double>(B * Hq * D) * static_cast<double>(T) * static_cast<double>(T);
}

// HF's ignore_index (-100, torch.nn.CrossEntropyLoss default); the engine never produces it, but a
// user's data might.
constexpr int32_t kIgnoreIndex = -100;

void CudaBackend::cross_entropy_forward(float* losses, const void* logits, const int32_t* targets, int64_t N,
                                        int64_t V, DType t) {
  require_bf16(t, "cross-entropy");
  activate();
  cross_entropy_fwd(current_stream(), static_cast<const bf16*>(logits), targets, losses, N, V, kIgnoreIndex);
}

void CudaBackend::cross_entropy_backward(void* dlogits, const void* logits, const int32_t* targets,
                                         float dloss, int64_t N, int64_t V, DType t) {
  require_bf16(t, "cross-entropy");
  activate();
  cross_entropy_bwd(current_stream(), static_cast<const bf16*>(logits), targets, static_cast<bf16*>(dlogits),
                    N, V, kIgnoreIndex, dloss);
}

// ---------------------------------------------------------------- optimizer

void CudaBackend::adam_step(std::span<const AdamChunk> chunks, const AdamParams& p, MemTier tier) {
  activate();
  if (tier == MemTier::Device) {
    AdamHyper hp;
    hp.lr = p.lr;
    hp.beta1 = p.beta1;
    hp.beta2 = p.beta2;
    hp.eps = p.eps;
    hp.weight_decay = p.weight_decay;
    hp.step = static_cast<int>(p.step);
    hp.grad_scale = p.grad_scale;
    for (const AdamChunk& c : chunks)
      ZP_CHECK(c.param16 == nullptr || c.param16_dtype != DType::F32,
               "Adam's working copy must be 16-bit (fp32 runs keep no separate copy)");
    // One launch group per 16-bit output dtype (in practice all chunks share one).
    for (DType out_t : {DType::BF16, DType::F16}) {
      std::vector<AdamTensor> ts;
      for (const AdamChunk& c : chunks) {
        if (c.param16 != nullptr && c.param16_dtype != out_t) continue;
        if (c.param16 == nullptr && out_t != DType::BF16) continue;
        ts.push_back({c.param, c.exp_avg, c.exp_avg_sq, c.grad, c.param16, c.n});
      }
      if (!ts.empty()) multi_tensor_adam(current_stream(), ts, DType::F32, out_t, hp);
    }
    return;
  }
  // Host tier (optimizer offload): the gradients were copied to pinned memory on this stream; wait
  // for them, then update on the CPU. Updated 16-bit parameters that live on the GPU go back in
  // pieces through two pinned staging buffers: the copy of piece i runs while the CPU updates
  // piece i+1 (DeepSpeed's CPU Adam overlaps the same way, deepspeed/ops/adam/cpu_adam.py).
  wait_stream(current_stream());
  for (const AdamChunk& c : chunks) {
    ZP_CHECK(on_host(c.param) && on_host(c.grad) && on_host(c.exp_avg) && on_host(c.exp_avg_sq),
             "offloaded Adam needs its fp32 parameters, gradients and moments in host memory");
    if (c.param16 == nullptr || on_host(c.param16)) {
      const bool direct_bf16 = c.param16 != nullptr && c.param16_dtype == DType::BF16;
      host_adam_parallel(c, p, 0, c.n, direct_bf16 ? static_cast<uint16_t*>(c.param16) : nullptr, 0);
      if (c.param16 != nullptr && !direct_bf16)
        for (int64_t i = 0; i < c.n; ++i) store_elem(c.param16, c.param16_dtype, i, c.param[i]);
      continue;
    }
    ZP_CHECK(c.param16_dtype == DType::BF16 || c.param16_dtype == DType::F16,
             "Adam's 16-bit copy must be 16-bit");
    const int64_t piece_bytes = kAdamPiece * 2;
    if (staging_bytes_ < piece_bytes) {
      for (void*& s : staging_) {
        if (s) ZP_CUDA_CHECK(cudaFreeHost(s));
        ZP_CUDA_CHECK(cudaMallocHost(&s, static_cast<size_t>(piece_bytes)));
      }
      pinned_live_ += 2 * (piece_bytes - staging_bytes_);
      pinned_peak_ = std::max(pinned_peak_, pinned_live_);
      staging_bytes_ = piece_bytes;
    }
    bool pending[2] = {false, false};
    int slot = 0;
    for (int64_t b = 0; b < c.n; b += kAdamPiece, slot ^= 1) {
      const int64_t e = std::min(c.n, b + kAdamPiece);
      if (pending[slot]) ZP_CUDA_CHECK(cudaEventSynchronize(staging_done_[slot]));
      auto* stage = static_cast<uint16_t*>(staging_[slot]);
      if (c.param16_dtype == DType::BF16) {
        host_adam_parallel(c, p, b, e, stage, 0);
      } else {
        host_adam_parallel(c, p, b, e, nullptr, 0);
        for (int64_t i = b; i < e; ++i) store_elem(stage, DType::F16, i - b, c.param[i]);
      }
      ZP_CUDA_CHECK(cudaMemcpyAsync(static_cast<char*>(c.param16) + b * 2, stage,
                                    static_cast<size_t>((e - b) * 2), cudaMemcpyHostToDevice,
                                    current_stream()));
      ZP_CUDA_CHECK(cudaEventRecord(staging_done_[slot], current_stream()));
      pending[slot] = true;
    }
    // Staging buffers are reused by the next chunk only after their copies finished.
    for (int s = 0; s < 2; ++s)
      if (pending[s]) ZP_CUDA_CHECK(cudaEventSynchronize(staging_done_[s]));
  }
}

// ---------------------------------------------------------------- timer

CudaTimer::~CudaTimer() {
  for (auto& [a, b] : events_) {
    cudaEventDestroy(a);
    cudaEventDestroy(b);
  }
}

void CudaTimer::begin() {
  be_.activate();
  ZP_CHECK(!open_, "timer begin() twice without end()");
  if (used_ == events_.size()) {
    cudaEvent_t a = nullptr, b = nullptr;
    ZP_CUDA_CHECK(cudaEventCreate(&a));
    ZP_CUDA_CHECK(cudaEventCreate(&b));
    events_.emplace_back(a, b);
  }
  ZP_CUDA_CHECK(cudaEventRecord(events_[used_].first, be_.current_stream()));
  open_ = true;
}

void CudaTimer::end() {
  be_.activate();
  ZP_CHECK(open_, "timer end() without begin()");
  ZP_CUDA_CHECK(cudaEventRecord(events_[used_].second, be_.current_stream()));
  ++used_;
  open_ = false;
}

double CudaTimer::seconds() {
  be_.activate();
  double total = 0;
  for (size_t i = 0; i < used_; ++i) {
    ZP_CUDA_CHECK(cudaEventSynchronize(events_[i].second));
    float ms = 0;
    ZP_CUDA_CHECK(cudaEventElapsedTime(&ms, events_[i].first, events_[i].second));
    total += static_cast<double>(ms) / 1e3;
  }
  return total;
}

void CudaTimer::reset() {
  used_ = 0;
  open_ = false;
}

}  // namespace zeroplan::exec::cuda
