#pragma once
// The cuda backend's own kernels (everything that is not a GEMM). Host-callable launchers; each runs
// on the given stream and checks its launch. Shapes use the engine's row-major layout:
//   T = batch * seq tokens, h = hidden, nh / nkv = query / key-value heads (GQA), d = head_dim,
//   ff = intermediate size, V = vocabulary.
//   activations [T, h] ; q [T, nh, d] ; k, v [T, nkv, d] ; logits [T, V]
// Numerics: bf16 storage, fp32 arithmetic inside every kernel (reductions, softmax, Adam).
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstdint>
#include <vector>

#include "executor/communicator.h"  // DType
#include "executor/cuda/attention_tiles.h"

namespace zeroplan::exec::cuda {

using bf16 = __nv_bfloat16;

// ---- RMSNorm (Zhang & Sennrich 2019; HF LlamaRMSNorm: y = w * x / sqrt(mean(x^2) + eps)) ----
// x, y [T, h]; w [h]; rstd [T] fp32 (saved for backward).
void rmsnorm_fwd(cudaStream_t s, const bf16* x, const bf16* w, bf16* y, float* rstd, int64_t T, int64_t h,
                 float eps);
// dx [T, h] and dw [h] bf16: accumulated into (+=) when the flag says so, else overwritten.
// dw_scratch: fp32 [h] device scratch (zeroed here).
void rmsnorm_bwd(cudaStream_t s, const bf16* dy, const bf16* x, const bf16* w, const float* rstd, bf16* dx,
                 bf16* dw, float* dw_scratch, int64_t T, int64_t h, bool accumulate_dx, bool accumulate_dw);

// ---- Rotary position embedding (Su et al. 2021, RoFormer eq. 34; HF rotate_half convention:
// pairs (i, i + d/2), angle = pos * theta^(-2i/d)); pos = token index mod seq. In place. ----
// x [T, heads, d]; inverse=true applies the transpose rotation (the backward).
void rotary_apply(cudaStream_t s, bf16* x, int64_t T, int64_t seq, int64_t heads, int64_t d, float theta,
                  bool inverse);
inline void rotary_fwd(cudaStream_t s, bf16* x, int64_t T, int64_t seq, int64_t heads, int64_t d,
                       float theta) {
  rotary_apply(s, x, T, seq, heads, d, theta, false);
}
inline void rotary_bwd(cudaStream_t s, bf16* dx, int64_t T, int64_t seq, int64_t heads, int64_t d,
                       float theta) {
  rotary_apply(s, dx, T, seq, heads, d, theta, true);
}

// ---- SwiGLU (Shazeer 2020, "GLU Variants Improve Transformer" eq. 6): out = silu(gate) * up ----
// gate, up, out [T, ff] (any row stride equal to ff).
void swiglu_fwd(cudaStream_t s, const bf16* gate, const bf16* up, bf16* out, int64_t n);
// dgate, dup [n]; may not alias gate/up.
void swiglu_bwd(cudaStream_t s, const bf16* dout, const bf16* gate, const bf16* up, bf16* dgate, bf16* dup,
                int64_t n);

// ---- Causal attention, flash-style (Dao et al. 2022, FlashAttention alg. 1/2; online softmax of
// Milakov & Gimelshein 2018): memory linear in seq (only lse [B, nh, S] is saved). ----
// q, o [B*S, nh, d]; k, v [B*S, nkv, d]; lse [B, nh, S] fp32. scale = 1/sqrt(d). d in {16, 32, 64, 96, 128}.
// Tiles (attention_tiles.h): 64 query x 64 key rows per block where the device's per-block shared
// memory allows (every head dim on H100/H200), else 32 x 32 (head_dim 128 backward on A100; head_dim
// 128 forward and head_dim >= 64 backward on A40/L40S, 99 KB); `tiles` forces one (tests run both).
struct AttentionShape {
  int64_t batch = 0, seq = 0, heads = 0, kv_heads = 0, head_dim = 0;
};
bool attention_head_dim_supported(int64_t d);
void attention_fwd(cudaStream_t s, const AttentionShape& a, const bf16* q, const bf16* k, const bf16* v,
                   bf16* o, float* lse, AttentionTiles tiles = AttentionTiles::Auto);
// dq, dk, dv as q, k, v (overwritten). Scratch: dq_accum fp32 [B*S, nh, d] (several key tiles add
// into each query row), delta fp32 [B, nh, S] = rowsum(dO o O).
struct AttentionBwdScratch {
  float* dq_accum = nullptr;
  float* delta = nullptr;
  static int64_t bytes(const AttentionShape& a);  // both, in bytes
};
void attention_bwd(cudaStream_t s, const AttentionShape& a, const bf16* q, const bf16* k, const bf16* v,
                   const bf16* o, const bf16* dout, const float* lse, bf16* dq, bf16* dk, bf16* dv,
                   const AttentionBwdScratch& scratch, AttentionTiles tiles = AttentionTiles::Auto);

// ---- Softmax cross-entropy, fp32 math (targets == ignore_index contribute nothing; HF uses -100) ----
// logits [T, V] bf16; targets [T] int32; losses [T] fp32 = logsumexp(row) - row[target] (0 if ignored).
void cross_entropy_fwd(cudaStream_t s, const bf16* logits, const int32_t* targets, float* losses, int64_t T,
                       int64_t V, int32_t ignore_index);
// dlogits [T, V] = scale * (softmax(logits) - onehot(target)); may alias logits (the row's
// log-sum-exp is recomputed first, so nothing is saved between forward and backward).
void cross_entropy_bwd(cudaStream_t s, const bf16* logits, const int32_t* targets, bf16* dlogits, int64_t T,
                       int64_t V, int32_t ignore_index, float scale);

// ---- Embedding ----
// out [T, h] = table[ids[t]]; ids in [0, vocab).
void embedding_fwd(cudaStream_t s, const bf16* table, const int32_t* ids, bf16* out, int64_t T, int64_t h);
// dtable [vocab, h]: dtable[ids[t]] += dout[t], bf16 atomics (sm_80+) with fp32 rounding per add.
void embedding_bwd(cudaStream_t s, const bf16* dout, const int32_t* ids, bf16* dtable, int64_t T, int64_t h);

// ---- Elementwise helpers, any of F32 / BF16 / F16 (fp32 math, one rounding per store) ----
void cast(cudaStream_t s, void* dst, DType dst_t, const void* src, DType src_t, int64_t n);
void scale(cudaStream_t s, void* x, DType t, int64_t n, float alpha);  // x *= alpha
// y += alpha * x: residual connections, gradient accumulation, bf16 grads into fp32 accumulators.
void axpy(cudaStream_t s, void* y, DType yt, const void* x, DType xt, int64_t n, float alpha);
void fill(cudaStream_t s, void* x, DType t, int64_t n, float value);
// *out += sum(x^2) in fp32 per block, blocks added with atomics (out is an fp32 device scalar;
// zero it first): gradient-norm clipping.
void sum_squares(cudaStream_t s, const void* x, DType t, int64_t n, float* out);

// ---- Fused multi-tensor AdamW (Loshchilov & Hutter 2019, alg. 2; torch.optim.AdamW docs) ----
// fp32 master p, m, v; gradient g in bf16 or fp32; params_out (optional) receives p rounded to
// out_dtype (BF16 or F16, the same for all tensors of one call).
struct AdamTensor {
  float* p = nullptr;
  float* m = nullptr;
  float* v = nullptr;
  const void* g = nullptr;
  void* params_out = nullptr;  // may be null
  int64_t numel = 0;
};
struct AdamHyper {
  float lr = 1e-4f, beta1 = 0.9f, beta2 = 0.999f, eps = 1e-8f, weight_decay = 0.0f;
  int step = 1;            // 1-based, for bias correction
  float grad_scale = 1.f;  // multiplies g first (1/loss-scale * clip coefficient)
};
// grad_t: dtype of every g (F32 or BF16). Launches one kernel per 24 tensors.
void multi_tensor_adam(cudaStream_t s, const std::vector<AdamTensor>& tensors, DType grad_t, DType out_t,
                       const AdamHyper& hp);

}  // namespace zeroplan::exec::cuda
