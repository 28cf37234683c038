#pragma once
// The seam between the ZeRO engine and a device. The engine (executor/engine.*) owns the training
// step: which tensors exist, when they are gathered, reduced, freed; this interface only does the
// arithmetic and the memory on one rank's device. Backends: cpu (executor/cpu_backend.*, Eigen,
// thread ranks) and cuda (executor/cuda/, cuBLASLt + own kernels + NCCL).
//
// Conventions (every kernel):
//  - Row-major, contiguous. Shapes in comments use B batch, T sequence, C hidden, Hq query heads,
//    Hkv key/value heads (GQA: query head h reads kv head h / (Hq/Hkv)), D head dim, I intermediate,
//    V vocab, N = B*T rows.
//  - `void*` tensors carry the DType given next to them ("act" = the activation/16-bit dtype of the
//    run: BF16 in mixed precision, F32 in fp32 mode). Arithmetic is in fp32 inside every kernel.
//  - "+=" in a comment means the kernel ACCUMULATES into that output (gradients of weights that are
//    used more than once, the residual stream); everything else is overwritten.
//  - Token ids and targets are int32 in device memory.
//  - Every call is ordered on the backend's current stream (see Stream); a backend without streams
//    (cpu) runs it synchronously.
#include <cstdint>
#include <memory>
#include <span>
#include <stdexcept>
#include <string>
#include <vector>

#include "executor/communicator.h"

namespace zeroplan::exec {

// Where memory lives. Host is the offload tier (pinned host memory on cuda; ordinary memory on cpu,
// accounted separately so that optimizer offload is visible as its own tier).
enum class MemTier : uint8_t { Device, Host };

enum class CopyKind : uint8_t { DeviceToDevice, HostToDevice, DeviceToHost, HostToHost };

// Streams: the engine issues compute on Compute and collectives on Comm (overlap_comm, stage-3
// prefetch). `wait(a, b)`: work issued later on `a` waits for everything issued so far on `b`
// (cuda: an event recorded on b, cudaStreamWaitEvent on a). cpu: everything is synchronous, no-ops.
enum class Stream : uint8_t { Compute, Comm };

// Accumulating phase timer. cuda: a pair of events per begin/end; seconds() synchronizes.
// An allocation the device (or pinned host memory) could not satisfy. The engine adds the phase and
// the bytes it held at that moment, and `zeroplan validate` reports it as a result ("ran out of
// memory in phase X at Y bytes; the plan predicted peak Z"), not as a crash.
class OutOfMemory : public std::runtime_error {
 public:
  OutOfMemory(const std::string& what, int64_t requested, std::string tier_name)
      : std::runtime_error(what), requested_bytes(requested), tier(std::move(tier_name)) {}
  int64_t requested_bytes = 0;
  std::string tier;         // "device", "pinned host", ...
  std::string phase;        // filled by the engine: "forward", "backward", "step" (or "setup")
  int64_t live_bytes = -1;  // device bytes the engine held when the allocation failed
};

class Timer {
 public:
  virtual ~Timer() = default;
  virtual void begin() = 0;
  virtual void end() = 0;
  virtual double seconds() = 0;  // total of all begin/end intervals so far
  virtual void reset() = 0;
};

// One tensor's share of a multi-tensor AdamW step (all fp32, `n` elements each). `param16`, when
// not null, receives the updated parameter cast to `param16_dtype` (the 16-bit working copy).
struct AdamChunk {
  float* param = nullptr;
  const float* grad = nullptr;
  float* exp_avg = nullptr;
  float* exp_avg_sq = nullptr;
  int64_t n = 0;
  void* param16 = nullptr;
  DType param16_dtype = DType::BF16;
};

// AdamW as torch.optim.AdamW / DeepSpeed FusedAdam (adam_w_mode=True) compute it:
//   m = b1 m + (1-b1) g;  v = b2 v + (1-b2) g^2;  p -= lr * ( (m/(1-b1^t)) / (sqrt(v/(1-b2^t)) + eps) + wd p
//   )
// with g = grad * grad_scale (grad_scale folds in 1/grad_accum and the clipping coefficient).
struct AdamParams {
  float lr = 1e-3f, beta1 = 0.9f, beta2 = 0.999f, eps = 1e-8f, weight_decay = 0.0f;
  int64_t step = 1;  // 1-based, for the bias corrections
  float grad_scale = 1.0f;
};

struct DeviceMemoryInfo {
  int64_t used_bytes = -1;  // device-level (cudaMemGetInfo total - free); -1 where not meaningful
  int64_t total_bytes = -1;
};

class Backend {
 public:
  virtual ~Backend() = default;
  virtual std::string name() const = 0;  // "cpu", "cuda:0 (NVIDIA H200)"

  // ---- memory. The engine carves tensors out of a few large allocations (executor/arena.h);
  // these are the only calls that take memory from the device or the host tier.
  virtual void* allocate(int64_t bytes, MemTier tier) = 0;  // aligned to 256 bytes; throws on OOM
  virtual void release(void* p, MemTier tier) = 0;
  virtual void copy(void* dst, const void* src, int64_t bytes, CopyKind kind) = 0;
  virtual void zero(void* dst, int64_t bytes, MemTier tier) = 0;
  // Copies host data (e.g. tokens, initial weights) into device memory and back, synchronously.
  virtual void upload(void* dst_device, const void* src_host, int64_t bytes) = 0;
  virtual void download(void* dst_host, const void* src_device, int64_t bytes) = 0;
  virtual DeviceMemoryInfo memory_info() const { return {}; }
  // The engine's caching pool (executor/memory.h) took this block back and may hand it to work on
  // any stream next, with no further synchronization (as torch's caching allocator may without
  // record_stream). Nothing to do for a real device; the stream-order checker treats it as a write
  // on Compute (Device tier) or by the host (Host tier), so a block released while another stream
  // still uses it is reported even when the pool happens not to reuse it in a test.
  virtual void pool_released(void* /*p*/, int64_t /*bytes*/, MemTier /*tier*/) {}

  // ---- streams, timers
  virtual void set_stream(Stream s) = 0;
  virtual void wait(Stream waiter, Stream signaller) = 0;
  // Finer ordering for one operation: `record_event(s)` marks the work issued so far on `s` and
  // returns a handle; `wait_event(w, e)` makes work issued later on `w` wait for that mark only
  // (cudaEventRecord / cudaStreamWaitEvent), not for what `s` received after it. Handles stay valid
  // for at least kEventsInFlight later records on the same stream (cuda reuses events in a ring;
  // a reused one marks a later point of the same stream, which only waits longer). cpu: no-ops.
  static constexpr int64_t kEventsInFlight = 4096;
  virtual int64_t record_event(Stream /*s*/) { return 0; }
  virtual void wait_event(Stream /*waiter*/, int64_t /*event*/) {}
  virtual void synchronize() = 0;  // all streams
  virtual std::unique_ptr<Timer> make_timer() = 0;

  // ---- GEMM: C[m,n] = alpha * op(A) * op(B) + beta * C, row-major.
  // op(A) is [m,k]: A is stored [m,k] (trans_a false) or [k,m] (trans_a true); likewise op(B) [k,n]
  // from B stored [k,n] or [n,k]. A and B share `ab`; C has `c` (BF16 or F32). fp32 accumulation.
  // Linear layer y = x W^T with W [out,in] (HF layout): gemm(N,out,in, x, false, W, true, y).
  virtual void gemm(int64_t m, int64_t n, int64_t k, const void* A, bool trans_a, const void* B, bool trans_b,
                    DType ab, void* C, DType c, float alpha, float beta) = 0;

  // ---- elementwise / conversion (n elements)
  virtual void cast(void* dst, DType dst_t, const void* src, DType src_t, int64_t n) = 0;
  virtual void scale(void* x, DType t, int64_t n, float alpha) = 0;                          // x *= alpha
  virtual void add(void* y, DType yt, const void* x, DType xt, int64_t n, float alpha) = 0;  // y += alpha x
  // Sum of squares in fp64 on the host (synchronizes): gradient-norm clipping.
  virtual double sum_squares(const void* x, DType t, int64_t n) = 0;

  // ---- model kernels ("act" dtype = `t`)
  // out[N,C] = wte[tokens[n], :];  wte [V,C]
  virtual void embedding_forward(void* out, const void* wte, const int32_t* tokens, int64_t N, int64_t C,
                                 DType t) = 0;
  // dwte[V,C] += scatter of dout[N,C] by tokens
  virtual void embedding_backward(void* dwte, const void* dout, const int32_t* tokens, int64_t N, int64_t C,
                                  DType t) = 0;
  // out[N,C] = inp * rstd * weight;  rstd[N] (F32) = 1/sqrt(mean(inp^2) + eps) saved for backward
  virtual void rmsnorm_forward(void* out, float* rstd, const void* inp, const void* weight, int64_t N,
                               int64_t C, float eps, DType t) = 0;
  // dinp[N,C] += ..., dweight[C] += ...   (given inp, weight, rstd from the forward)
  virtual void rmsnorm_backward(void* dinp, void* dweight, const void* dout, const void* inp,
                                const void* weight, const float* rstd, int64_t N, int64_t C, DType t) = 0;
  // In place on x[B,T,H,D]: rotate pairs (i, i+D/2) by angle pos * theta^(-2i/D), pos = t
  // (HF LlamaRotaryEmbedding / rotate_half layout). backward=true rotates by -angle (the transpose).
  virtual void rotary(void* x, int64_t B, int64_t T, int64_t H, int64_t D, float theta, bool backward,
                      DType t) = 0;
  // out[N,I] = silu(gate) * up
  virtual void swiglu_forward(void* out, const void* gate, const void* up, int64_t N, int64_t I, DType t) = 0;
  // dgate[N,I], dup[N,I] (overwritten) from dout[N,I]
  virtual void swiglu_backward(void* dgate, void* dup, const void* dout, const void* gate, const void* up,
                               int64_t N, int64_t I, DType t) = 0;
  // Causal softmax(q k^T / sqrt(D)) v with GQA. q,out [B,T,Hq,D]; k,v [B,T,Hkv,D];
  // lse[B,Hq,T] (F32) = log-sum-exp of each score row, saved so memory stays linear in T.
  virtual void attention_forward(void* out, float* lse, const void* q, const void* k, const void* v,
                                 int64_t B, int64_t T, int64_t Hq, int64_t Hkv, int64_t D, DType t) = 0;
  // dq [B,T,Hq,D], dk/dv [B,T,Hkv,D] overwritten.
  virtual void attention_backward(void* dq, void* dk, void* dv, const void* dout, const void* q,
                                  const void* k, const void* v, const void* out, const float* lse, int64_t B,
                                  int64_t T, int64_t Hq, int64_t Hkv, int64_t D, DType t) = 0;
  // losses[N] (F32) = logsumexp(logits[n,:]) - logits[n, targets[n]];  logits [N,V]
  virtual void cross_entropy_forward(float* losses, const void* logits, const int32_t* targets, int64_t N,
                                     int64_t V, DType t) = 0;
  // dlogits[N,V] = (softmax(logits) - onehot(target)) * dloss;  may alias logits (in place)
  virtual void cross_entropy_backward(void* dlogits, const void* logits, const int32_t* targets, float dloss,
                                      int64_t N, int64_t V, DType t) = 0;

  // ---- MoE (Mixtral / Qwen-MoE sparse blocks, transformers modeling_mixtral.py MixtralTopKRouter and
  // MixtralExperts). Routing rows are "pairs" p = n*k + j: token n's j-th selected expert. Backends
  // without these kernels (cuda so far) refuse a MoE run here; the engine checks `has_moe_kernels()`
  // before it starts (check_run_config only knows the model, not the backend).
  virtual bool has_moe_kernels() const { return false; }
  // probs[N,E] (F32) = softmax(logits[N,E]) in fp32; idx[N,k] = the k largest probabilities, in
  // descending order, the lower expert index first on ties (torch.topk's order on CPU);
  // weights[N,k] (F32) = those probabilities, divided by their sum when `renorm` (Mixtral always,
  // Qwen-MoE norm_topk_prob).
  virtual void moe_route_forward(float* /*probs*/, int32_t* /*idx*/, float* /*weights*/, const void* /*logits*/,
                                 int64_t /*N*/, int64_t /*E*/, int64_t /*k*/, bool /*renorm*/, DType /*t*/) {
    throw std::runtime_error(name() + ": no MoE kernels on this backend");
  }
  // dlogits[N,E] (overwritten) from dweights[N,k] (F32), through the renormalisation and the softmax.
  virtual void moe_route_backward(void* /*dlogits*/, const float* /*dweights*/, const float* /*probs*/,
                                  const int32_t* /*idx*/, int64_t /*N*/, int64_t /*E*/, int64_t /*k*/,
                                  bool /*renorm*/, DType /*t*/) {
    throw std::runtime_error(name() + ": no MoE kernels on this backend");
  }
  // out[r,:] = in[pairs[r] / k, :] for r < R (the rows an expert computes on).
  virtual void gather_rows(void* /*out*/, const void* /*in*/, const int32_t* /*pairs*/, int64_t /*R*/,
                           int64_t /*C*/, int64_t /*k*/, DType /*t*/) {
    throw std::runtime_error(name() + ": no MoE kernels on this backend");
  }
  // out[pairs[r] / k, :] += w * in[r, :] for r = 0..R-1 in order, w = weights[pairs[r]] (F32) or 1 when
  // weights is null (index_add_ of the weighted expert outputs; of the rows' input gradients).
  virtual void scatter_add_rows(void* /*out*/, const void* /*in*/, const int32_t* /*pairs*/,
                                const float* /*weights*/, int64_t /*R*/, int64_t /*C*/, int64_t /*k*/,
                                DType /*t*/) {
    throw std::runtime_error(name() + ": no MoE kernels on this backend");
  }
  // Backward of the weighted scatter: din[r,:] = weights[pairs[r]] * dout[pairs[r]/k, :] (overwritten)
  // and dweights[pairs[r]] = <dout[pairs[r]/k, :], in[r, :]> (F32, overwritten).
  virtual void scatter_add_rows_backward(void* /*din*/, float* /*dweights*/, const void* /*dout*/,
                                         const void* /*in*/, const int32_t* /*pairs*/, const float* /*weights*/,
                                         int64_t /*R*/, int64_t /*C*/, int64_t /*k*/, DType /*t*/) {
    throw std::runtime_error(name() + ": no MoE kernels on this backend");
  }

  // ---- optimizer: AdamW over many tensors in one call (DeepSpeed FusedAdam's multi_tensor_apply;
  // CPU Adam for the offload tier, where the chunks are host memory).
  virtual void adam_step(std::span<const AdamChunk> chunks, const AdamParams& p, MemTier tier) = 0;
};

// The ranks of one run: each rank has its own Backend (device) and Communicator.
//  cpu:  world_size thread ranks in this process over one in-process world (executor/thread_comm.h).
//  cuda: one GPU per local rank (NCCL), or one-GPU emulation of rank r of an N-rank run, where
//        local_ranks() == {r} and the communicator copies locally exactly the bytes a collective
//        would deliver (counting them as if sent).
class Runtime {
 public:
  virtual ~Runtime() = default;
  virtual int world_size() const = 0;
  virtual std::vector<int> local_ranks() const = 0;  // ranks this process drives (one thread each)
  virtual Backend& backend(int rank) = 0;
  virtual Communicator& communicator(int rank) = 0;
};

// executor/cpu_backend.cpp
// `device_budget_bytes` > 0 gives each thread rank a device-tier capacity, like a GPU's memory (the
// CPU profile's memory_bytes, or --gpu-mem): an allocation beyond it throws OutOfMemory.
std::unique_ptr<Runtime> make_cpu_runtime(int world_size, int64_t device_budget_bytes = 0);
// executor/cuda/ (only when built with ZEROPLAN_HAVE_CUDA): emulate_rank < 0 drives world_size
// local GPUs; emulate_rank >= 0 runs that one rank on GPU 0.
std::unique_ptr<Runtime> make_cuda_runtime(int world_size, int emulate_rank);

}  // namespace zeroplan::exec
