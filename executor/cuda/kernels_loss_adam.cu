// Softmax cross-entropy (fp32 math) and the fused multi-tensor AdamW. Shapes: see kernels.h.
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <algorithm>
#include <cmath>
#include <string>

#include "executor/cuda/cuda_check.h"
#include "executor/cuda/kernels.h"

namespace zeroplan::exec::cuda {

namespace {

constexpr int kThreads = 512;

__device__ __forceinline__ float to_f(bf16 x) {
  return __bfloat162float(x);
}

// Online (max, sum-of-exp) pair merge (Milakov & Gimelshein 2018, "Online normalizer calculation
// for softmax", alg. 3): (m1,s1) + (m2,s2) = (max, s1*e^(m1-max) + s2*e^(m2-max)).
__device__ __forceinline__ void merge(float& m, float& s, float m2, float s2) {
  if (m2 == -INFINITY) return;
  if (m == -INFINITY) {
    m = m2;
    s = s2;
    return;
  }
  const float mx = fmaxf(m, m2);
  s = s * __expf(m - mx) + s2 * __expf(m2 - mx);
  m = mx;
}

// Log-sum-exp of one row by the whole block (all threads get the result). `sm`, `ss`: 32 floats each.
__device__ float row_logsumexp(const bf16* x, int64_t V, float* sm, float* ss) {
  float m = -INFINITY, s = 0.f;
  for (int64_t j = threadIdx.x; j < V; j += blockDim.x) merge(m, s, to_f(x[j]), 1.f);
  for (int o = 16; o > 0; o >>= 1) {
    const float m2 = __shfl_xor_sync(0xffffffffu, m, o), s2 = __shfl_xor_sync(0xffffffffu, s, o);
    merge(m, s, m2, s2);
  }
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  if (lane == 0) {
    sm[warp] = m;
    ss[warp] = s;
  }
  __syncthreads();
  const int nw = static_cast<int>(blockDim.x) / 32;
  m = lane < nw ? sm[lane] : -INFINITY;
  s = lane < nw ? ss[lane] : 0.f;
  for (int o = 16; o > 0; o >>= 1) {
    const float m2 = __shfl_xor_sync(0xffffffffu, m, o), s2 = __shfl_xor_sync(0xffffffffu, s, o);
    merge(m, s, m2, s2);
  }
  return m + logf(s);
}

// One block per token row.
__global__ void cross_entropy_fwd_kernel(const bf16* __restrict__ logits, const int32_t* __restrict__ targets,
                                         float* __restrict__ losses, int64_t V, int32_t ignore_index) {
  __shared__ float sm[32], ss[32];
  const int64_t row = blockIdx.x;
  const bf16* x = logits + row * V;
  const float lse = row_logsumexp(x, V, sm, ss);
  if (threadIdx.x == 0) {
    const int32_t t = targets[row];
    losses[row] = (t == ignore_index) ? 0.f : lse - to_f(x[t]);
  }
}

__global__ void cross_entropy_bwd_kernel(const bf16* logits, const int32_t* __restrict__ targets,
                                         bf16* dlogits, int64_t V, int32_t ignore_index, float scale) {
  __shared__ float sm[32], ss[32];
  const int64_t row = blockIdx.x;
  const int32_t t = targets[row];
  const bf16* x = logits + row * V;
  const float l = row_logsumexp(x, V, sm, ss);  // every read of the row happens before any write below
  __syncthreads();
  bf16* dx = dlogits + row * V;  // may alias x: from here each element is read, then written, by one thread
  for (int64_t j = threadIdx.x; j < V; j += blockDim.x) {
    float g = 0.f;
    if (t != ignore_index) g = scale * (__expf(to_f(x[j]) - l) - (j == t ? 1.f : 0.f));
    dx[j] = __float2bfloat16(g);
  }
}

// ---------------- multi-tensor AdamW ----------------
constexpr int kAdamTensorsPerLaunch = 24;  // keeps the by-value argument ~1.4 KB (< 4 KB param limit)
constexpr int64_t kAdamChunk = 65536;      // elements per block

struct AdamLaunch {
  int n = 0;
  float* p[kAdamTensorsPerLaunch];
  float* m[kAdamTensorsPerLaunch];
  float* v[kAdamTensorsPerLaunch];
  const void* g[kAdamTensorsPerLaunch];
  void* out[kAdamTensorsPerLaunch];
  int64_t numel[kAdamTensorsPerLaunch];
  int64_t chunk_start[kAdamTensorsPerLaunch + 1];  // prefix sum of chunks per tensor
};

template <typename G, typename O>
__global__ void adam_kernel(AdamLaunch L, float lr, float beta1, float beta2, float eps, float weight_decay,
                            float bc1, float bc2, float grad_scale) {
  const int64_t chunk = blockIdx.x;
  int t = 0;
  while (t + 1 < L.n && L.chunk_start[t + 1] <= chunk) ++t;
  const int64_t begin = (chunk - L.chunk_start[t]) * kAdamChunk;
  const int64_t end = min(L.numel[t], begin + kAdamChunk);
  float* __restrict__ p = L.p[t];
  float* __restrict__ m = L.m[t];
  float* __restrict__ v = L.v[t];
  const G* __restrict__ grad = static_cast<const G*>(L.g[t]);
  O* __restrict__ out = static_cast<O*>(L.out[t]);
  for (int64_t i = begin + threadIdx.x; i < end; i += blockDim.x) {
    const float g = static_cast<float>(grad[i]) * grad_scale;
    float pi = p[i];
    pi -= lr * weight_decay * pi;  // decoupled weight decay (AdamW)
    const float mi = beta1 * m[i] + (1.f - beta1) * g;
    const float vi = beta2 * v[i] + (1.f - beta2) * g * g;
    m[i] = mi;
    v[i] = vi;
    pi -= lr * (mi / bc1) / (sqrtf(vi / bc2) + eps);
    p[i] = pi;
    if (out) out[i] = static_cast<O>(pi);
  }
}

}  // namespace

void cross_entropy_fwd(cudaStream_t s, const bf16* logits, const int32_t* targets, float* losses, int64_t T,
                       int64_t V, int32_t ignore_index) {
  if (T == 0) return;
  cross_entropy_fwd_kernel<<<static_cast<unsigned>(T), kThreads, 0, s>>>(logits, targets, losses, V,
                                                                         ignore_index);
  ZP_CUDA_CHECK_LAUNCH("cross_entropy_fwd");
}

void cross_entropy_bwd(cudaStream_t s, const bf16* logits, const int32_t* targets, bf16* dlogits, int64_t T,
                       int64_t V, int32_t ignore_index, float scale) {
  if (T == 0) return;
  cross_entropy_bwd_kernel<<<static_cast<unsigned>(T), kThreads, 0, s>>>(logits, targets, dlogits, V,
                                                                         ignore_index, scale);
  ZP_CUDA_CHECK_LAUNCH("cross_entropy_bwd");
}

template <typename G, typename O>
void launch_adam(cudaStream_t s, const AdamLaunch& L, int64_t blocks, const AdamHyper& hp, float bc1,
                 float bc2) {
  adam_kernel<G, O><<<static_cast<unsigned>(blocks), kThreads, 0, s>>>(
      L, hp.lr, hp.beta1, hp.beta2, hp.eps, hp.weight_decay, bc1, bc2, hp.grad_scale);
  ZP_CUDA_CHECK_LAUNCH("multi_tensor_adam");
}

void multi_tensor_adam(cudaStream_t s, const std::vector<AdamTensor>& tensors, DType grad_t, DType out_t,
                       const AdamHyper& hp) {
  ZP_CUDA_REQUIRE(grad_t != DType::F16, "Adam gradients must be fp32 or bf16");
  ZP_CUDA_REQUIRE(out_t != DType::F32, "Adam's 16-bit parameter copy must be bf16 or fp16");
  ZP_CUDA_REQUIRE(hp.step >= 1, "Adam step must be 1-based, got " + std::to_string(hp.step));
  // Bias corrections in double on the host (torch.optim.AdamW: 1 - beta^step).
  const float bc1 = static_cast<float>(1.0 - std::pow(static_cast<double>(hp.beta1), hp.step));
  const float bc2 = static_cast<float>(1.0 - std::pow(static_cast<double>(hp.beta2), hp.step));
  size_t i = 0;
  while (i < tensors.size()) {
    AdamLaunch L{};
    L.chunk_start[0] = 0;
    while (i < tensors.size() && L.n < kAdamTensorsPerLaunch) {
      const AdamTensor& a = tensors[i++];
      if (a.numel == 0) continue;
      ZP_CUDA_REQUIRE(a.p && a.m && a.v && a.g, "Adam tensor with a null buffer");
      const int k = L.n++;
      L.p[k] = a.p;
      L.m[k] = a.m;
      L.v[k] = a.v;
      L.g[k] = a.g;
      L.out[k] = a.params_out;
      L.numel[k] = a.numel;
      L.chunk_start[k + 1] = L.chunk_start[k] + (a.numel + kAdamChunk - 1) / kAdamChunk;
    }
    if (L.n == 0) break;
    const int64_t blocks = L.chunk_start[L.n];
    ZP_CUDA_REQUIRE(blocks < (int64_t{1} << 31), "Adam launch with " + std::to_string(blocks) + " chunks");
    if (grad_t == DType::BF16)
      out_t == DType::BF16 ? launch_adam<bf16, bf16>(s, L, blocks, hp, bc1, bc2)
                           : launch_adam<bf16, __half>(s, L, blocks, hp, bc1, bc2);
    else
      out_t == DType::BF16 ? launch_adam<float, bf16>(s, L, blocks, hp, bc1, bc2)
                           : launch_adam<float, __half>(s, L, blocks, hp, bc1, bc2);
  }
}

}  // namespace zeroplan::exec::cuda
