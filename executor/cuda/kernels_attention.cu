// Causal attention, flash-style (Dao et al. 2022, "FlashAttention", alg. 1 forward; Dao 2023,
// "FlashAttention-2", alg. 2 backward): scores are computed one tile at a time in shared memory with
// an online softmax, so memory is linear in sequence length (only the log-sum-exp per query row is
// saved for the backward). Tile products use tensor cores through WMMA (bf16 inputs, fp32
// accumulation, 16x16x16 fragments); softmax, rescaling and masking are fp32 in shared memory.
//
// Layout (kernels.h): q, o, dq [B*S, nh, D]; k, v, dk, dv [B*S, nkv, D]; lse, delta [B, nh, S].
// GQA: query head h reads key/value head h / (nh / nkv).
// Tiles: one kernel body per pass, templated on the head dim D and the tile rows Rows (query rows
// per tile = key rows per tile). One block = Rows/16 warps = one tile; each warp owns 16 rows of it.
// Rows = 64 (4 warps) where the device's per-block shared memory allows, else 32 (2 warps): the
// shared-memory layout and the choice live in attention_tiles.h.
#include <cuda_bf16.h>
#include <mma.h>

#include <atomic>
#include <iterator>
#include <string>

#include "executor/cuda/attention_tiles.h"
#include "executor/cuda/cuda_check.h"
#include "executor/cuda/kernels.h"

namespace zeroplan::exec::cuda {

namespace {

using namespace nvcuda;

constexpr float kLog2e = 1.4426950408889634f;
constexpr float kLn2 = 0.6931471805599453f;

// Compile-time view of attention_smem_layout(D, Rows): leading dimensions (elements) and section
// offsets (bytes) of one block's dynamic shared memory.
template <int D, int Rows>
struct Lds {
  static constexpr AttentionSmemLayout kL = attention_smem_layout(D, Rows);
  static constexpr int kWarps = Rows / 16;
  static constexpr int kThreads = kWarps * 32;
  static constexpr int kColsPerLane = Rows / 32;  // score columns each lane owns in the softmax loops
  static constexpr int q = static_cast<int>(kL.ld_q);
  static constexpr int s = static_cast<int>(kL.ld_s);
  static constexpr int p = static_cast<int>(kL.ld_p);
  static constexpr int o = static_cast<int>(kL.ld_o);
  static constexpr size_t fwd_q = kL.fwd_q, fwd_k = kL.fwd_k, fwd_v = kL.fwd_v, fwd_s = kL.fwd_s,
                          fwd_p = kL.fwd_p, fwd_o = kL.fwd_o, fwd_m = kL.fwd_m, fwd_l = kL.fwd_l;
  static constexpr size_t bwd_k = kL.bwd_k, bwd_v = kL.bwd_v, bwd_q = kL.bwd_q, bwd_do = kL.bwd_do,
                          bwd_s = kL.bwd_s, bwd_dp = kL.bwd_dp, bwd_p = kL.bwd_p, bwd_ds = kL.bwd_ds,
                          bwd_dk = kL.bwd_dk, bwd_dv = kL.bwd_dv, bwd_lse = kL.bwd_lse,
                          bwd_delta = kL.bwd_delta;
  static constexpr size_t fwd_bytes = kL.fwd_bytes, bwd_bytes = kL.bwd_bytes;
  static_assert(Rows % 32 == 0 && Rows >= 32, "each lane owns Rows/32 score columns; 16-row warps");
  static_assert(D % 16 == 0, "head_dim must be a multiple of the 16-wide WMMA fragment");
  static_assert(kL.bf_tile % 128 == 0 && kL.s_tile % 128 == 0 && kL.p_tile % 128 == 0 &&
                    kL.o_tile % 128 == 0 && kL.stats % 128 == 0,
                "shared-memory sections must stay 128-byte aligned (WMMA needs 32)");
};

// Copies a [Rows][D] bf16 tile whose row r is at src + r * row_stride (rows >= valid are
// zero-filled) into shared memory with leading dimension ld, 16 bytes per thread per step.
template <int D, int Rows>
__device__ void load_tile(bf16* dst, int ld, const bf16* src, int64_t row_stride, int valid) {
  constexpr int kVecPerRow = D / 8;
  for (int idx = threadIdx.x; idx < Rows * kVecPerRow; idx += Lds<D, Rows>::kThreads) {
    const int r = idx / kVecPerRow, c = (idx % kVecPerRow) * 8;
    uint4 val = make_uint4(0, 0, 0, 0);
    if (r < valid) val = *reinterpret_cast<const uint4*>(src + r * row_stride + c);
    *reinterpret_cast<uint4*>(dst + r * ld + c) = val;
  }
}

__device__ __forceinline__ float warp_max(float v) {
  for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
  return v;
}
__device__ __forceinline__ float warp_sum(float v) {
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}

using FragA = wmma::fragment<wmma::matrix_a, 16, 16, 16, bf16, wmma::row_major>;
using FragAT = wmma::fragment<wmma::matrix_a, 16, 16, 16, bf16, wmma::col_major>;
using FragB = wmma::fragment<wmma::matrix_b, 16, 16, 16, bf16, wmma::row_major>;
using FragBT = wmma::fragment<wmma::matrix_b, 16, 16, 16, bf16, wmma::col_major>;
using FragC = wmma::fragment<wmma::accumulator, 16, 16, 16, float>;

// out[16 x Rows] (fp32, ld_out) = A[16 x D] (row-major bf16) * Bm^T where Bm is [Rows x D] row-major.
template <int D, int Rows>
__device__ void mm_abt(const bf16* A, int lda, const bf16* Bm, int ldb, float* out, int ld_out) {
  for (int n = 0; n < Rows / 16; ++n) {
    FragC acc;
    wmma::fill_fragment(acc, 0.f);
    for (int kk = 0; kk < D / 16; ++kk) {
      FragA a;
      FragBT b;  // Bm^T viewed column-major: element (d, key) at Bm[key * ldb + d]
      wmma::load_matrix_sync(a, A + kk * 16, lda);
      wmma::load_matrix_sync(b, Bm + n * 16 * ldb + kk * 16, ldb);
      wmma::mma_sync(acc, a, b, acc);
    }
    wmma::store_matrix_sync(out + n * 16, acc, ld_out, wmma::mem_row_major);
  }
}

// acc[16 x D] (fp32 in shared, ld_acc) (+)= A[16 x Rows] * Bm[Rows x D]; A row-major (or, with
// kATransposed, the transpose of a row-major [Rows x 16] slice: element (r, c) at A[c * lda + r]).
template <int D, int Rows, bool kATransposed, bool kAccumulate>
__device__ void mm_ab(const bf16* A, int lda, const bf16* Bm, int ldb, float* acc_smem, int ld_acc) {
  for (int n = 0; n < D / 16; ++n) {
    FragC acc;
    if (kAccumulate)
      wmma::load_matrix_sync(acc, acc_smem + n * 16, ld_acc, wmma::mem_row_major);
    else
      wmma::fill_fragment(acc, 0.f);
    for (int kk = 0; kk < Rows / 16; ++kk) {
      FragB b;
      wmma::load_matrix_sync(b, Bm + kk * 16 * ldb + n * 16, ldb);
      if constexpr (kATransposed) {
        FragAT a;
        wmma::load_matrix_sync(a, A + kk * 16 * lda, lda);
        wmma::mma_sync(acc, a, b, acc);
      } else {
        FragA a;
        wmma::load_matrix_sync(a, A + kk * 16, lda);
        wmma::mma_sync(acc, a, b, acc);
      }
    }
    wmma::store_matrix_sync(acc_smem + n * 16, acc, ld_acc, wmma::mem_row_major);
  }
}

// ---------------- forward ----------------
template <int D, int Rows>
__global__ void __launch_bounds__(Lds<D, Rows>::kThreads)
    attention_fwd_kernel(const bf16* __restrict__ q, const bf16* __restrict__ k, const bf16* __restrict__ v,
                         bf16* __restrict__ o, float* __restrict__ lse, int S, int nh, int nkv,
                         float scale_log2) {
  using L = Lds<D, Rows>;
  constexpr int kThreads = L::kThreads;
  extern __shared__ __align__(128) unsigned char smem[];
  bf16* Qs = reinterpret_cast<bf16*>(smem + L::fwd_q);
  bf16* Ks = reinterpret_cast<bf16*>(smem + L::fwd_k);
  bf16* Vs = reinterpret_cast<bf16*>(smem + L::fwd_v);
  float* Sf = reinterpret_cast<float*>(smem + L::fwd_s);
  bf16* Pb = reinterpret_cast<bf16*>(smem + L::fwd_p);
  float* Of = reinterpret_cast<float*>(smem + L::fwd_o);
  float* row_m = reinterpret_cast<float*>(smem + L::fwd_m);
  float* row_l = reinterpret_cast<float*>(smem + L::fwd_l);

  // Causal work grows with the tile index: schedule the longest tiles first.
  const int q0 = (static_cast<int>(gridDim.x) - 1 - static_cast<int>(blockIdx.x)) * Rows;
  const int h = blockIdx.y, b = blockIdx.z;
  const int kvh = h / (nh / nkv);
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int64_t q_stride = static_cast<int64_t>(nh) * D, kv_stride = static_cast<int64_t>(nkv) * D;
  const bf16* qb = q + (static_cast<int64_t>(b) * S * nh + h) * D;
  const bf16* kb = k + (static_cast<int64_t>(b) * S * nkv + kvh) * D;
  const bf16* vb = v + (static_cast<int64_t>(b) * S * nkv + kvh) * D;

  load_tile<D, Rows>(Qs, L::q, qb + q0 * q_stride, q_stride, min(Rows, S - q0));
  for (int i = threadIdx.x; i < Rows * L::o; i += kThreads) Of[i] = 0.f;
  for (int i = threadIdx.x; i < Rows; i += kThreads) {
    row_m[i] = -INFINITY;
    row_l[i] = 0.f;
  }
  const int kv_end = min(S, q0 + Rows);  // causal: keys beyond the tile's last query are never needed
  for (int j0 = 0; j0 < kv_end; j0 += Rows) {
    __syncthreads();  // previous tile's K/V fully consumed (and Q/O initialised on the first pass)
    load_tile<D, Rows>(Ks, L::q, kb + j0 * kv_stride, kv_stride, min(Rows, S - j0));
    load_tile<D, Rows>(Vs, L::q, vb + j0 * kv_stride, kv_stride, min(Rows, S - j0));
    __syncthreads();
    const int r0 = warp * 16;
    mm_abt<D, Rows>(Qs + r0 * L::q, L::q, Ks, L::q, Sf + r0 * L::s, L::s);  // S = Q K^T (raw)
    __syncwarp();
    for (int r = 0; r < 16; ++r) {  // online softmax of the warp's rows, log2 domain
      const int R = r0 + r, qi = q0 + R;
      float sv[L::kColsPerLane];
      float row_max = -INFINITY;
      for (int t = 0; t < L::kColsPerLane; ++t) {
        const int c = lane + 32 * t, key = j0 + c;
        sv[t] = (key <= qi && key < S && qi < S) ? Sf[R * L::s + c] * scale_log2 : -INFINITY;
        row_max = fmaxf(row_max, sv[t]);
      }
      const float m_old = row_m[R];
      const float m_new = fmaxf(m_old, warp_max(row_max));
      float psum = 0.f;
      for (int t = 0; t < L::kColsPerLane; ++t) {
        const float p = (m_new == -INFINITY) ? 0.f : exp2f(sv[t] - m_new);
        psum += p;
        Pb[R * L::p + lane + 32 * t] = __float2bfloat16(p);
      }
      const float alpha = (m_old == -INFINITY) ? 0.f : exp2f(m_old - m_new);
      for (int c = lane; c < D; c += 32) Of[R * L::o + c] *= alpha;
      psum = warp_sum(psum);
      if (lane == 0) {
        row_m[R] = m_new;
        row_l[R] = row_l[R] * alpha + psum;
      }
    }
    __syncwarp();
    mm_ab<D, Rows, false, true>(Pb + r0 * L::p, L::p, Vs, L::q, Of + r0 * L::o, L::o);  // O += P V
    __syncwarp();
  }
  __syncthreads();
  for (int r = 0; r < 16; ++r) {
    const int R = warp * 16 + r, qi = q0 + R;
    if (qi >= S) break;
    const float l = row_l[R];
    const float inv = 1.f / l;
    bf16* orow = o + ((static_cast<int64_t>(b) * S + qi) * nh + h) * D;
    for (int c = lane; c < D; c += 32) orow[c] = __float2bfloat16(Of[R * L::o + c] * inv);
    if (lane == 0) lse[(static_cast<int64_t>(b) * nh + h) * S + qi] = (row_m[R] + log2f(l)) * kLn2;
  }
}

// ---------------- backward ----------------
// delta[b,h,s] = sum_d dO * O (FlashAttention-2 alg. 2, line 4: D_i = rowsum(dO_i o O_i)). One warp per row.
__global__ void attention_delta_kernel(const bf16* __restrict__ o, const bf16* __restrict__ dout,
                                       float* __restrict__ delta, int64_t rows, int S, int nh, int D) {
  const int64_t row = (static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x) / 32;
  const int lane = threadIdx.x % 32;
  if (row >= rows) return;
  const bf16* orow = o + row * D;
  const bf16* drow = dout + row * D;
  float s = 0.f;
  for (int c = lane; c < D; c += 32) s += __bfloat162float(orow[c]) * __bfloat162float(drow[c]);
  s = warp_sum(s);
  if (lane == 0) {
    const int64_t t = row / nh;
    const int h = static_cast<int>(row % nh);
    const int64_t b = t / S, si = t % S;
    delta[(b * nh + h) * S + si] = s;
  }
}

// One block per (key tile, key/value head, batch). It loops over the query heads that share this
// key/value head (GQA group) and, for each, over the query tiles that see its keys, so dK and dV are
// summed in shared memory and written once (no fp32 scratch for them); dQ tiles are added into an
// fp32 accumulator with atomics (several key tiles contribute to each query row).
template <int D, int Rows>
__global__ void __launch_bounds__(Lds<D, Rows>::kThreads)
    attention_bwd_kernel(const bf16* __restrict__ q, const bf16* __restrict__ k, const bf16* __restrict__ v,
                         const bf16* __restrict__ dout, const float* __restrict__ lse,
                         const float* __restrict__ delta, float* __restrict__ dq_acc, bf16* __restrict__ dk,
                         bf16* __restrict__ dv, int S, int nh, int nkv, float scale, float scale_log2) {
  using L = Lds<D, Rows>;
  constexpr int kThreads = L::kThreads;
  extern __shared__ __align__(128) unsigned char smem[];
  bf16* Ks = reinterpret_cast<bf16*>(smem + L::bwd_k);
  bf16* Vs = reinterpret_cast<bf16*>(smem + L::bwd_v);
  bf16* Qs = reinterpret_cast<bf16*>(smem + L::bwd_q);
  bf16* dOs = reinterpret_cast<bf16*>(smem + L::bwd_do);
  float* Sf = reinterpret_cast<float*>(smem + L::bwd_s);  // raw scores
  float* dPf = reinterpret_cast<float*>(smem + L::bwd_dp);
  float* dQs = Sf;  // [Rows][L::o], reuses the S|dP region once dS is formed
  bf16* Pb = reinterpret_cast<bf16*>(smem + L::bwd_p);
  bf16* dSb = reinterpret_cast<bf16*>(smem + L::bwd_ds);
  float* dKf = reinterpret_cast<float*>(smem + L::bwd_dk);
  float* dVf = reinterpret_cast<float*>(smem + L::bwd_dv);
  float* lse_s = reinterpret_cast<float*>(smem + L::bwd_lse);  // log2 domain
  float* delta_s = reinterpret_cast<float*>(smem + L::bwd_delta);

  // Causal work shrinks with the key-tile index: schedule the longest tiles first.
  const int j0 = (static_cast<int>(gridDim.x) - 1 - static_cast<int>(blockIdx.x)) * Rows;
  const int kvh = blockIdx.y, b = blockIdx.z;
  const int group = nh / nkv;
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int r0 = warp * 16;
  const int64_t q_stride = static_cast<int64_t>(nh) * D, kv_stride = static_cast<int64_t>(nkv) * D;
  const int64_t kv_off = (static_cast<int64_t>(b) * S * nkv + kvh) * D;

  load_tile<D, Rows>(Ks, L::q, k + kv_off + j0 * kv_stride, kv_stride, min(Rows, S - j0));
  load_tile<D, Rows>(Vs, L::q, v + kv_off + j0 * kv_stride, kv_stride, min(Rows, S - j0));
  for (int i = threadIdx.x; i < Rows * L::o; i += kThreads) {
    dKf[i] = 0.f;
    dVf[i] = 0.f;
  }
  for (int h = kvh * group; h < (kvh + 1) * group; ++h) {
    const int64_t q_off = (static_cast<int64_t>(b) * S * nh + h) * D;
    const float* lse_b = lse + (static_cast<int64_t>(b) * nh + h) * S;
    const float* delta_b = delta + (static_cast<int64_t>(b) * nh + h) * S;
    for (int i0 = (j0 / Rows) * Rows; i0 < S; i0 += Rows) {
      __syncthreads();  // previous tile's Q, dO, P, dS, dQ fully consumed
      const int valid = min(Rows, S - i0);
      load_tile<D, Rows>(Qs, L::q, q + q_off + i0 * q_stride, q_stride, valid);
      load_tile<D, Rows>(dOs, L::q, dout + q_off + i0 * q_stride, q_stride, valid);
      for (int i = threadIdx.x; i < Rows; i += kThreads) {
        lse_s[i] = i < valid ? lse_b[i0 + i] * kLog2e : 0.f;
        delta_s[i] = i < valid ? delta_b[i0 + i] : 0.f;
      }
      __syncthreads();
      mm_abt<D, Rows>(Qs + r0 * L::q, L::q, Ks, L::q, Sf + r0 * L::s, L::s);    // S = Q K^T
      mm_abt<D, Rows>(dOs + r0 * L::q, L::q, Vs, L::q, dPf + r0 * L::s, L::s);  // dP = dO V^T
      __syncwarp();
      for (int r = 0; r < 16; ++r) {
        const int R = r0 + r, qi = i0 + R;
        for (int t = 0; t < L::kColsPerLane; ++t) {
          const int c = lane + 32 * t, key = j0 + c;
          const bool live = key <= qi && key < S && qi < S;
          // P recomputed from the saved log-sum-exp (FlashAttention-2 alg. 2, line 11).
          const float p = live ? exp2f(Sf[R * L::s + c] * scale_log2 - lse_s[R]) : 0.f;
          // dS_raw = scale * P o (dP - delta): gradient w.r.t. Q K^T before the 1/sqrt(d) scaling.
          const float ds = live ? scale * p * (dPf[R * L::s + c] - delta_s[R]) : 0.f;
          Pb[R * L::p + c] = __float2bfloat16(p);
          dSb[R * L::p + c] = __float2bfloat16(ds);
        }
      }
      __syncthreads();  // dV and dK need every warp's rows of P and dS
      mm_ab<D, Rows, true, true>(Pb + r0, L::p, dOs, L::q, dVf + r0 * L::o, L::o);           // dV += P^T dO
      mm_ab<D, Rows, true, true>(dSb + r0, L::p, Qs, L::q, dKf + r0 * L::o, L::o);           // dK += dS^T Q
      mm_ab<D, Rows, false, false>(dSb + r0 * L::p, L::p, Ks, L::q, dQs + r0 * L::o, L::o);  // dQ_i = dS K
      __syncwarp();
      for (int r = 0; r < 16; ++r) {
        const int R = r0 + r, qi = i0 + R;
        if (qi >= S) break;
        float* dst = dq_acc + q_off + static_cast<int64_t>(qi) * q_stride;
        for (int c = lane; c < D; c += 32) atomicAdd(dst + c, dQs[R * L::o + c]);
      }
    }
  }
  __syncwarp();  // each warp wrote (and now reads) only its own 16 rows of dK and dV
  for (int r = 0; r < 16; ++r) {
    const int R = r0 + r, kj = j0 + R;
    if (kj >= S) break;
    const int64_t off = kv_off + static_cast<int64_t>(kj) * kv_stride;
    for (int c = lane; c < D; c += 32) {
      dk[off + c] = __float2bfloat16(dKf[R * L::o + c]);
      dv[off + c] = __float2bfloat16(dVf[R * L::o + c]);
    }
  }
}

__global__ void f32_to_bf16_kernel(const float* in, bf16* out, int64_t n) {
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x)
    out[i] = __float2bfloat16(in[i]);
}

void cast_out(cudaStream_t s, const float* in, bf16* out, int64_t n) {
  const int64_t blocks = std::min<int64_t>((n + 255) / 256, 65535LL * 16);
  f32_to_bf16_kernel<<<static_cast<unsigned>(blocks), 256, 0, s>>>(in, out, n);
  ZP_CUDA_CHECK_LAUNCH("attention cast");
}

void check_shape(const AttentionShape& a) {
  ZP_CUDA_REQUIRE(a.batch > 0 && a.seq > 0 && a.heads > 0 && a.kv_heads > 0, "empty attention shape");
  ZP_CUDA_REQUIRE(a.heads % a.kv_heads == 0, "query heads " + std::to_string(a.heads) +
                                                 " not a multiple of key/value heads " +
                                                 std::to_string(a.kv_heads));
  ZP_CUDA_REQUIRE(
      attention_head_dim_supported(a.head_dim),
      "attention kernel supports head_dim 16, 32, 64, 96 or 128, not " + std::to_string(a.head_dim));
  ZP_CUDA_REQUIRE(a.seq < (int64_t{1} << 30) && a.heads < 65536 && a.batch < 65536,
                  "attention shape too large");
}

// The device's per-block shared-memory opt-in (cudaDevAttrMaxSharedMemoryPerBlockOptin), queried
// once per device: attention runs once per layer per micro-batch, the attribute never changes.
int device_smem_optin() {
  constexpr int kCachedDevices = 64;
  static std::atomic<int> cache[kCachedDevices];  // static storage: zero = not queried yet
  int dev = 0;
  ZP_CUDA_CHECK(cudaGetDevice(&dev));
  int optin = dev >= 0 && dev < kCachedDevices ? cache[dev].load(std::memory_order_relaxed) : 0;
  if (optin > 0) return optin;
  ZP_CUDA_CHECK(cudaDeviceGetAttribute(&optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, dev));
  if (dev >= 0 && dev < kCachedDevices) cache[dev].store(optin, std::memory_order_relaxed);
  return optin;
}

// The tile rows to launch for this pass on the current device: the largest tiles that fit its
// per-block shared memory (attention_tiles.h: 64 rows for every head dim on H100/H200; 32 rows for
// the head_dim-128 backward on A100 and, on 99 KB parts such as the A40, for the head_dim-128
// forward and the head_dim >= 64 backward), or the forced variant. What still does not fit stops
// with a message naming the shortfall instead of failing the launch.
int choose_tile_rows(AttentionPass pass, int64_t head_dim, AttentionTiles tiles) {
  const char* pass_name = pass == AttentionPass::Forward ? "forward" : "backward";
  const int optin = device_smem_optin();
  const bool forced = tiles != AttentionTiles::Auto;
  const int rows = forced ? static_cast<int>(tiles) : attention_tile_rows_for(pass, head_dim, optin);
  ZP_CUDA_REQUIRE(rows == 0 || rows == 64 || rows == 32,
                  "attention tiles of " + std::to_string(rows) + " rows are not instantiated (64 or 32)");
  // Nothing fits: report the smallest tiles' need.
  const int shown = rows > 0 ? rows : kAttentionTileRows[std::size(kAttentionTileRows) - 1];
  const int64_t bytes = attention_smem_bytes(pass, head_dim, shown);
  ZP_CUDA_REQUIRE(rows > 0 && bytes <= optin,
                  std::string("the attention ") + pass_name + " kernel for head_dim " +
                      std::to_string(head_dim) + " needs " + std::to_string(bytes / 1024) +
                      " KB of shared memory per block with " + std::to_string(shown) + "-row tiles" +
                      (forced ? " (forced)" : ", its smallest") + "; this GPU offers " +
                      std::to_string(optin / 1024) + " KB (H100/H200 offer 227 KB)");
  return rows;
}

template <int D, int Rows>
void fwd_impl(cudaStream_t s, const AttentionShape& a, const bf16* q, const bf16* k, const bf16* v, bf16* o,
              float* lse) {
  using L = Lds<D, Rows>;
  const size_t smem = L::fwd_bytes;
  ZP_CUDA_CHECK(cudaFuncSetAttribute(attention_fwd_kernel<D, Rows>,
                                     cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(smem)));
  const dim3 grid(static_cast<unsigned>((a.seq + Rows - 1) / Rows), static_cast<unsigned>(a.heads),
                  static_cast<unsigned>(a.batch));
  const float scale_log2 = kLog2e / sqrtf(static_cast<float>(D));
  attention_fwd_kernel<D, Rows><<<grid, L::kThreads, smem, s>>>(q, k, v, o, lse, static_cast<int>(a.seq),
                                                                static_cast<int>(a.heads),
                                                                static_cast<int>(a.kv_heads), scale_log2);
  ZP_CUDA_CHECK_LAUNCH("attention_fwd");
}

template <int D, int Rows>
void bwd_impl(cudaStream_t s, const AttentionShape& a, const bf16* q, const bf16* k, const bf16* v,
              const bf16* dout, const float* lse, bf16* dk, bf16* dv, const AttentionBwdScratch& sc) {
  using L = Lds<D, Rows>;
  const size_t smem = L::bwd_bytes;
  ZP_CUDA_CHECK(cudaFuncSetAttribute(attention_bwd_kernel<D, Rows>,
                                     cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(smem)));
  const dim3 grid(static_cast<unsigned>((a.seq + Rows - 1) / Rows), static_cast<unsigned>(a.kv_heads),
                  static_cast<unsigned>(a.batch));
  const float scale = 1.f / sqrtf(static_cast<float>(D));
  attention_bwd_kernel<D, Rows><<<grid, L::kThreads, smem, s>>>(
      q, k, v, dout, lse, sc.delta, sc.dq_accum, dk, dv, static_cast<int>(a.seq), static_cast<int>(a.heads),
      static_cast<int>(a.kv_heads), scale, scale * kLog2e);
  ZP_CUDA_CHECK_LAUNCH("attention_bwd");
}

template <int D>
void fwd_tiles(int rows, cudaStream_t s, const AttentionShape& a, const bf16* q, const bf16* k, const bf16* v,
               bf16* o, float* lse) {
  if (rows == 64)
    fwd_impl<D, 64>(s, a, q, k, v, o, lse);
  else
    fwd_impl<D, 32>(s, a, q, k, v, o, lse);
}

template <int D>
void bwd_tiles(int rows, cudaStream_t s, const AttentionShape& a, const bf16* q, const bf16* k, const bf16* v,
               const bf16* dout, const float* lse, bf16* dk, bf16* dv, const AttentionBwdScratch& sc) {
  if (rows == 64)
    bwd_impl<D, 64>(s, a, q, k, v, dout, lse, dk, dv, sc);
  else
    bwd_impl<D, 32>(s, a, q, k, v, dout, lse, dk, dv, sc);
}

}  // namespace

bool attention_head_dim_supported(int64_t d) {
  return d == 16 || d == 32 || d == 64 || d == 96 || d == 128;
}

int64_t AttentionBwdScratch::bytes(const AttentionShape& a) {
  const int64_t tokens = a.batch * a.seq;
  return 4 * (tokens * a.heads * a.head_dim + a.batch * a.heads * a.seq);
}

void attention_fwd(cudaStream_t s, const AttentionShape& a, const bf16* q, const bf16* k, const bf16* v,
                   bf16* o, float* lse, AttentionTiles tiles) {
  check_shape(a);
  const int rows = choose_tile_rows(AttentionPass::Forward, a.head_dim, tiles);
  switch (a.head_dim) {
    case 16:
      fwd_tiles<16>(rows, s, a, q, k, v, o, lse);
      break;
    case 32:
      fwd_tiles<32>(rows, s, a, q, k, v, o, lse);
      break;
    case 64:
      fwd_tiles<64>(rows, s, a, q, k, v, o, lse);
      break;
    case 96:
      fwd_tiles<96>(rows, s, a, q, k, v, o, lse);
      break;
    default:
      fwd_tiles<128>(rows, s, a, q, k, v, o, lse);
      break;
  }
}

void attention_bwd(cudaStream_t s, const AttentionShape& a, const bf16* q, const bf16* k, const bf16* v,
                   const bf16* o, const bf16* dout, const float* lse, bf16* dq, bf16* dk, bf16* dv,
                   const AttentionBwdScratch& sc, AttentionTiles tiles) {
  check_shape(a);
  const int rows = choose_tile_rows(AttentionPass::Backward, a.head_dim, tiles);
  const int64_t tokens = a.batch * a.seq;
  const int64_t q_elems = tokens * a.heads * a.head_dim;
  ZP_CUDA_CHECK(cudaMemsetAsync(sc.dq_accum, 0, static_cast<size_t>(q_elems) * 4, s));
  const int64_t rows_total = tokens * a.heads;
  attention_delta_kernel<<<static_cast<unsigned>((rows_total * 32 + 255) / 256), 256, 0, s>>>(
      o, dout, sc.delta, rows_total, static_cast<int>(a.seq), static_cast<int>(a.heads),
      static_cast<int>(a.head_dim));
  ZP_CUDA_CHECK_LAUNCH("attention_delta");
  switch (a.head_dim) {
    case 16:
      bwd_tiles<16>(rows, s, a, q, k, v, dout, lse, dk, dv, sc);
      break;
    case 32:
      bwd_tiles<32>(rows, s, a, q, k, v, dout, lse, dk, dv, sc);
      break;
    case 64:
      bwd_tiles<64>(rows, s, a, q, k, v, dout, lse, dk, dv, sc);
      break;
    case 96:
      bwd_tiles<96>(rows, s, a, q, k, v, dout, lse, dk, dv, sc);
      break;
    default:
      bwd_tiles<128>(rows, s, a, q, k, v, dout, lse, dk, dv, sc);
      break;
  }
  cast_out(s, sc.dq_accum, dq, q_elems);
}

}  // namespace zeroplan::exec::cuda
