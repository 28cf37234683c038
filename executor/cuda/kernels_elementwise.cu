// RMSNorm, rotary, SwiGLU, embedding and elementwise helpers. Shapes: see kernels.h.
// Every kernel reads bf16, computes in fp32, writes bf16 (one rounding per output).
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <algorithm>
#include <type_traits>

#include "executor/cuda/cuda_check.h"
#include "executor/cuda/kernels.h"

namespace zeroplan::exec::cuda {

namespace {

constexpr int kThreads = 256;

__device__ __forceinline__ float to_f(bf16 x) {
  return __bfloat162float(x);
}
__device__ __forceinline__ bf16 to_b(float x) {
  return __float2bfloat16(x);
}

// Block-wide sum of one float per thread (blockDim.x multiple of 32, <= 1024). `shared` has 32 slots.
__device__ float block_sum(float v, float* shared) {
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  __syncthreads();  // shared may still be read from a previous call
  if (lane == 0) shared[warp] = v;
  __syncthreads();
  const int nwarps = static_cast<int>(blockDim.x) / 32;
  float t = lane < nwarps ? shared[lane] : 0.f;
  for (int o = 16; o > 0; o >>= 1) t += __shfl_xor_sync(0xffffffffu, t, o);
  return t;
}

unsigned grid_for(int64_t n, int threads = kThreads) {
  const int64_t blocks = (n + threads - 1) / threads;
  return static_cast<unsigned>(std::min<int64_t>(std::max<int64_t>(blocks, 1), 65535LL * 32));
}

// ---------------- RMSNorm ----------------
// One block per row.
__global__ void rmsnorm_fwd_kernel(const bf16* __restrict__ x, const bf16* __restrict__ w,
                                   bf16* __restrict__ y, float* __restrict__ rstd, int64_t h, float eps) {
  __shared__ float red[32];
  const int64_t row = blockIdx.x;
  const bf16* xr = x + row * h;
  float ss = 0.f;
  for (int64_t j = threadIdx.x; j < h; j += blockDim.x) {
    const float v = to_f(xr[j]);
    ss += v * v;
  }
  const float r = rsqrtf(block_sum(ss, red) / static_cast<float>(h) + eps);
  if (threadIdx.x == 0) rstd[row] = r;
  bf16* yr = y + row * h;
  // HF LlamaRMSNorm rounds x*rstd to the input dtype before multiplying by w; we keep fp32 until
  // the single final rounding (differences are within one bf16 ulp).
  for (int64_t j = threadIdx.x; j < h; j += blockDim.x) yr[j] = to_b(to_f(xr[j]) * r * to_f(w[j]));
}

// dx = rstd * (g - xhat * mean(g * xhat)), g = dy * w, xhat = x * rstd; dw = sum_rows dy * xhat.
// Each block handles `rows_per_block` rows; each thread owns columns j = tid + k*blockDim and keeps
// their dw partial sums in shared memory (h floats), added once per block into dw_scratch.
// dy and dx may alias (each element is read, then written, by the same thread, after the row's
// reduction), so they are not __restrict__.
__global__ void rmsnorm_bwd_kernel(const bf16* dy, const bf16* __restrict__ x, const bf16* __restrict__ w,
                                   const float* __restrict__ rstd, bf16* dx, float* __restrict__ dw_scratch,
                                   int64_t T, int64_t h, int64_t rows_per_block, bool accumulate_dx) {
  extern __shared__ float dw_part[];  // [h]
  __shared__ float red[32];
  for (int64_t j = threadIdx.x; j < h; j += blockDim.x) dw_part[j] = 0.f;
  const int64_t row0 = blockIdx.x * rows_per_block;
  const int64_t row1 = min(T, row0 + rows_per_block);
  for (int64_t row = row0; row < row1; ++row) {
    const bf16* dyr = dy + row * h;
    const bf16* xr = x + row * h;
    const float r = rstd[row];
    float dot = 0.f;
    for (int64_t j = threadIdx.x; j < h; j += blockDim.x) {
      const float g = to_f(dyr[j]) * to_f(w[j]);
      const float xhat = to_f(xr[j]) * r;
      dot += g * xhat;
      dw_part[j] += to_f(dyr[j]) * xhat;  // column j is touched by this thread only
    }
    const float mean_gx = block_sum(dot, red) / static_cast<float>(h);
    bf16* dxr = dx + row * h;
    for (int64_t j = threadIdx.x; j < h; j += blockDim.x) {
      const float g = to_f(dyr[j]) * to_f(w[j]);
      const float xhat = to_f(xr[j]) * r;
      const float d = r * (g - xhat * mean_gx);
      dxr[j] = to_b(accumulate_dx ? to_f(dxr[j]) + d : d);
    }
  }
  for (int64_t j = threadIdx.x; j < h; j += blockDim.x) atomicAdd(&dw_scratch[j], dw_part[j]);
}

__global__ void finish_dw_kernel(const float* __restrict__ acc, bf16* __restrict__ dw, int64_t h,
                                 bool accumulate) {
  for (int64_t j = blockIdx.x * blockDim.x + threadIdx.x; j < h;
       j += static_cast<int64_t>(gridDim.x) * blockDim.x)
    dw[j] = to_b(acc[j] + (accumulate ? to_f(dw[j]) : 0.f));
}

// ---------------- Rotary ----------------
// One thread per (token, head, pair i < d/2).
__global__ void rotary_kernel(bf16* __restrict__ x, int64_t T, int64_t seq, int64_t heads, int64_t d,
                              float theta, bool inverse) {
  const int64_t half = d / 2;
  const int64_t total = T * heads * half;
  for (int64_t idx = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; idx < total;
       idx += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t i = idx % half;
    const int64_t th = idx / half;  // token * heads + head
    const int64_t t = th / heads;
    const float pos = static_cast<float>(t % seq);
    // HF: inv_freq = 1 / theta^(2i/d), computed in fp32; angle = pos * inv_freq in fp32.
    const float inv_freq = 1.0f / powf(theta, static_cast<float>(2 * i) / static_cast<float>(d));
    float sn, cs;
    sincosf(pos * inv_freq, &sn, &cs);
    if (inverse) sn = -sn;  // R(angle)^T = R(-angle)
    bf16* row = x + th * d;
    const float a = to_f(row[i]), b = to_f(row[i + half]);
    row[i] = to_b(a * cs - b * sn);
    row[i + half] = to_b(b * cs + a * sn);
  }
}

// ---------------- SwiGLU ----------------
__device__ __forceinline__ float sigmoidf_(float g) {
  return 1.f / (1.f + __expf(-g));
}

__global__ void swiglu_fwd_kernel(const bf16* __restrict__ gate, const bf16* __restrict__ up,
                                  bf16* __restrict__ out, int64_t n) {
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const float g = to_f(gate[i]);
    out[i] = to_b(g * sigmoidf_(g) * to_f(up[i]));
  }
}

// d silu(g)/dg = sigma(g) * (1 + g * (1 - sigma(g))).
__global__ void swiglu_bwd_kernel(const bf16* __restrict__ dout, const bf16* __restrict__ gate,
                                  const bf16* __restrict__ up, bf16* __restrict__ dgate,
                                  bf16* __restrict__ dup, int64_t n) {
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const float g = to_f(gate[i]), u = to_f(up[i]), dy = to_f(dout[i]);
    const float sg = sigmoidf_(g);
    dup[i] = to_b(dy * g * sg);
    dgate[i] = to_b(dy * u * sg * (1.f + g * (1.f - sg)));
  }
}

// ---------------- Embedding ----------------
__global__ void embedding_fwd_kernel(const bf16* __restrict__ table, const int32_t* __restrict__ ids,
                                     bf16* __restrict__ out, int64_t h) {
  const int64_t t = blockIdx.x;
  const bf16* src = table + static_cast<int64_t>(ids[t]) * h;
  for (int64_t j = threadIdx.x; j < h; j += blockDim.x) out[t * h + j] = src[j];
}

__global__ void embedding_bwd_kernel(const bf16* __restrict__ dout, const int32_t* __restrict__ ids,
                                     bf16* __restrict__ dtable, int64_t h) {
  const int64_t t = blockIdx.x;
  bf16* dst = dtable + static_cast<int64_t>(ids[t]) * h;
  for (int64_t j = threadIdx.x; j < h; j += blockDim.x) atomicAdd(&dst[j], dout[t * h + j]);
}

// ---------------- helpers (any dtype) ----------------
#define ZP_GRID_STRIDE(i, n)                                                             \
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < (n); \
       i += static_cast<int64_t>(gridDim.x) * blockDim.x)

template <typename T>
__device__ __forceinline__ float ld(const T* p, int64_t i) {
  return static_cast<float>(p[i]);
}
template <>
__device__ __forceinline__ float ld<bf16>(const bf16* p, int64_t i) {
  return __bfloat162float(p[i]);
}
template <>
__device__ __forceinline__ float ld<__half>(const __half* p, int64_t i) {
  return __half2float(p[i]);
}
template <typename T>
__device__ __forceinline__ void st(T* p, int64_t i, float v) {
  p[i] = v;
}
template <>
__device__ __forceinline__ void st<bf16>(bf16* p, int64_t i, float v) {
  p[i] = __float2bfloat16(v);
}
template <>
__device__ __forceinline__ void st<__half>(__half* p, int64_t i, float v) {
  p[i] = __float2half(v);
}

template <typename Y, typename X>
__global__ void cast_kernel(Y* y, const X* x, int64_t n) {
  ZP_GRID_STRIDE(i, n) st(y, i, ld(x, i));
}
template <typename Y, typename X>
__global__ void axpy_kernel(Y* y, const X* x, int64_t n, float alpha) {
  ZP_GRID_STRIDE(i, n) st(y, i, ld(y, i) + alpha * ld(x, i));
}
template <typename T>
__global__ void scale_kernel(T* x, int64_t n, float alpha) {
  ZP_GRID_STRIDE(i, n) st(x, i, ld(x, i) * alpha);
}
template <typename T>
__global__ void fill_kernel(T* x, int64_t n, float v) {
  ZP_GRID_STRIDE(i, n) st(x, i, v);
}
template <typename T>
__global__ void sum_squares_kernel(const T* x, int64_t n, float* out) {
  __shared__ float red[32];
  float s = 0.f;
  ZP_GRID_STRIDE(i, n) {
    const float v = ld(x, i);
    s += v * v;
  }
  s = block_sum(s, red);
  if (threadIdx.x == 0) atomicAdd(out, s);
}

// Calls f(static_cast<T*>(nullptr)) with T the C++ type of `t`.
template <typename F>
void with_type(DType t, F&& f) {
  switch (t) {
    case DType::F32:
      f(static_cast<float*>(nullptr));
      break;
    case DType::BF16:
      f(static_cast<bf16*>(nullptr));
      break;
    case DType::F16:
      f(static_cast<__half*>(nullptr));
      break;
  }
}

}  // namespace

void rmsnorm_fwd(cudaStream_t s, const bf16* x, const bf16* w, bf16* y, float* rstd, int64_t T, int64_t h,
                 float eps) {
  if (T == 0) return;
  rmsnorm_fwd_kernel<<<static_cast<unsigned>(T), kThreads, 0, s>>>(x, w, y, rstd, h, eps);
  ZP_CUDA_CHECK_LAUNCH("rmsnorm_fwd");
}

void rmsnorm_bwd(cudaStream_t s, const bf16* dy, const bf16* x, const bf16* w, const float* rstd, bf16* dx,
                 bf16* dw, float* dw_scratch, int64_t T, int64_t h, bool accumulate_dx, bool accumulate_dw) {
  if (T == 0) return;
  ZP_CUDA_CHECK(cudaMemsetAsync(dw_scratch, 0, static_cast<size_t>(h) * sizeof(float), s));
  // ~4 blocks per SM on a 132-SM H100/H200 keeps the chip busy while bounding the dw atomics to
  // blocks * h.
  const int64_t blocks = std::min<int64_t>(T, 528);
  const int64_t rows_per_block = (T + blocks - 1) / blocks;
  const int64_t nblocks = (T + rows_per_block - 1) / rows_per_block;
  const size_t smem = static_cast<size_t>(h) * sizeof(float);
  if (smem > 48 * 1024)
    ZP_CUDA_CHECK(cudaFuncSetAttribute(rmsnorm_bwd_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                       static_cast<int>(smem)));
  rmsnorm_bwd_kernel<<<static_cast<unsigned>(nblocks), kThreads, smem, s>>>(dy, x, w, rstd, dx, dw_scratch, T,
                                                                            h, rows_per_block, accumulate_dx);
  ZP_CUDA_CHECK_LAUNCH("rmsnorm_bwd");
  finish_dw_kernel<<<grid_for(h), kThreads, 0, s>>>(dw_scratch, dw, h, accumulate_dw);
  ZP_CUDA_CHECK_LAUNCH("rmsnorm_bwd finish_dw");
}

void rotary_apply(cudaStream_t s, bf16* x, int64_t T, int64_t seq, int64_t heads, int64_t d, float theta,
                  bool inverse) {
  if (T == 0) return;
  rotary_kernel<<<grid_for(T * heads * (d / 2)), kThreads, 0, s>>>(x, T, seq, heads, d, theta, inverse);
  ZP_CUDA_CHECK_LAUNCH("rotary");
}

void swiglu_fwd(cudaStream_t s, const bf16* gate, const bf16* up, bf16* out, int64_t n) {
  if (n == 0) return;
  swiglu_fwd_kernel<<<grid_for(n), kThreads, 0, s>>>(gate, up, out, n);
  ZP_CUDA_CHECK_LAUNCH("swiglu_fwd");
}

void swiglu_bwd(cudaStream_t s, const bf16* dout, const bf16* gate, const bf16* up, bf16* dgate, bf16* dup,
                int64_t n) {
  if (n == 0) return;
  swiglu_bwd_kernel<<<grid_for(n), kThreads, 0, s>>>(dout, gate, up, dgate, dup, n);
  ZP_CUDA_CHECK_LAUNCH("swiglu_bwd");
}

void embedding_fwd(cudaStream_t s, const bf16* table, const int32_t* ids, bf16* out, int64_t T, int64_t h) {
  if (T == 0) return;
  embedding_fwd_kernel<<<static_cast<unsigned>(T), kThreads, 0, s>>>(table, ids, out, h);
  ZP_CUDA_CHECK_LAUNCH("embedding_fwd");
}

void embedding_bwd(cudaStream_t s, const bf16* dout, const int32_t* ids, bf16* dtable, int64_t T, int64_t h) {
  if (T == 0) return;
  embedding_bwd_kernel<<<static_cast<unsigned>(T), kThreads, 0, s>>>(dout, ids, dtable, h);
  ZP_CUDA_CHECK_LAUNCH("embedding_bwd");
}

void cast(cudaStream_t s, void* dst, DType dst_t, const void* src, DType src_t, int64_t n) {
  if (n == 0) return;
  with_type(dst_t, [&](auto* ytag) {
    using Y = std::remove_pointer_t<decltype(ytag)>;
    with_type(src_t, [&](auto* xtag) {
      using X = std::remove_pointer_t<decltype(xtag)>;
      cast_kernel<Y, X><<<grid_for(n), kThreads, 0, s>>>(static_cast<Y*>(dst), static_cast<const X*>(src), n);
    });
  });
  ZP_CUDA_CHECK_LAUNCH("cast");
}

void axpy(cudaStream_t s, void* y, DType yt, const void* x, DType xt, int64_t n, float alpha) {
  if (n == 0) return;
  with_type(yt, [&](auto* ytag) {
    using Y = std::remove_pointer_t<decltype(ytag)>;
    with_type(xt, [&](auto* xtag) {
      using X = std::remove_pointer_t<decltype(xtag)>;
      axpy_kernel<Y, X>
          <<<grid_for(n), kThreads, 0, s>>>(static_cast<Y*>(y), static_cast<const X*>(x), n, alpha);
    });
  });
  ZP_CUDA_CHECK_LAUNCH("axpy");
}

void scale(cudaStream_t s, void* x, DType t, int64_t n, float alpha) {
  if (n == 0) return;
  with_type(t, [&](auto* tag) {
    using T = std::remove_pointer_t<decltype(tag)>;
    scale_kernel<T><<<grid_for(n), kThreads, 0, s>>>(static_cast<T*>(x), n, alpha);
  });
  ZP_CUDA_CHECK_LAUNCH("scale");
}

void fill(cudaStream_t s, void* x, DType t, int64_t n, float value) {
  if (n == 0) return;
  with_type(t, [&](auto* tag) {
    using T = std::remove_pointer_t<decltype(tag)>;
    fill_kernel<T><<<grid_for(n), kThreads, 0, s>>>(static_cast<T*>(x), n, value);
  });
  ZP_CUDA_CHECK_LAUNCH("fill");
}

void sum_squares(cudaStream_t s, const void* x, DType t, int64_t n, float* out) {
  if (n == 0) return;
  with_type(t, [&](auto* tag) {
    using T = std::remove_pointer_t<decltype(tag)>;
    sum_squares_kernel<T><<<std::min(grid_for(n), 1024u), kThreads, 0, s>>>(static_cast<const T*>(x), n, out);
  });
  ZP_CUDA_CHECK_LAUNCH("sum_squares");
}

}  // namespace zeroplan::exec::cuda
