#include "planner/gated_delta_net.h"

#include <algorithm>

#include "common/checked.h"

namespace zeroplan::planner {

GdnKernels gdn_kernels(const Workload& w) {
  return w.train.runtime == Runtime::Cpu ? GdnKernels::TorchFallback : GdnKernels::FlashLinearAttention;
}

namespace {

// The gated RMSNorm and out_proj (Qwen3_5RMSNormGated.forward, torch in both paths: its hub kernel is
// used only when transformers' `kernels` integration is asked for), per token, over the value width
// vd = hv * dv in rows of dv:
//   hidden_states.to(float32): a fp32 copy of the rule's output, saved by pow(2) and by the multiply
//     with rsqrt (4 vd); rsqrt's output, one fp32 per row (4 hv);
//   `self.weight * hidden_states.to(input_dtype)`: the 16-bit normalised x, saved when the weight
//     trains (e vd);
//   `hidden_states * silu(gate.to(float32))`: saves the 16-bit product (e vd) and silu's fp32 output
//     (4 vd); silu saves its fp32 input, the upcast z (4 vd);
//   out_proj saves its 16-bit input (e vd) when it trains.
// Recorded per token (tests/deepspeed/fixtures/0.19.8/qwen3_5_*: 1024 rows of dv 32 at b 2, s 128):
// 131,072 + 4,096 + 65,536 + 131,072 + 131,072 + 65,536 + 65,536 B.
int64_t gated_norm_and_out(int64_t e, int64_t hv, int64_t vd, const GdnSaveFlags& f) {
  return 12 * vd + 4 * hv + (f.norm_trains ? e * vd : 0) + e * vd + (f.out_saved ? e * vd : 0);
}

}  // namespace

int64_t gdn_mixer_saved_per_sample(const models::ModelSpec& m, const GdnSaveFlags& f, int64_t e, int64_t s,
                                   GdnKernels k) {
  const int64_t h = m.hidden_size;
  const int64_t hk = m.linear_num_key_heads, hv = m.linear_num_value_heads;
  const int64_t dk = m.linear_key_head_dim, dv = m.linear_value_head_dim;
  const int64_t kd = hk * dk, vd = hv * dv;
  const int64_t conv = 2 * kd + vd;  // the convolution's channels (Qwen3_5GatedDeltaNet.conv_dim)
  const int64_t kernel = m.linear_conv_kernel_dim;
  // Per token, both paths:
  //   the in_proj_* input (the layer's normed hidden states, one storage for the projections);
  //   the convolution's input, in_proj_qkv's output (Qwen3-Next: the torch.cat of q, k, v out of
  //     in_proj_qkvz, the same width): F.conv1d saves its input, causal_conv1d's CausalConv1dFn
  //     ctx.save_for_backward(x, weight, bias, ...) too;
  //   beta = b.sigmoid(): sigmoid saves its 16-bit output (e hv);
  //   g = -A_log.float().exp() * F.softplus(a.float() + dt_bias): softplus saves its fp32 input and
  //     the multiply its fp32 output (8 hv);
  //   the gated norm and out_proj.
  int64_t per_token =
      (f.in_saved ? e * h : 0) + e * conv + e * hv + 8 * hv + gated_norm_and_out(e, hv, vd, f);
  int64_t per_sample = 0;
  if (k == GdnKernels::FlashLinearAttention) {
    // fla ops/gated_delta_rule/chunk.py ChunkGatedDeltaRuleFunction.forward (the @input_guard
    // decorator makes every tensor argument contiguous, so q/k/v, which are split views of the
    // convolution's output, are copied and that output is freed):
    //   use_qk_l2norm_in_kernel: l2norm_fwd returns the normalised q and k (16-bit, at the key heads:
    //     fla takes grouped values natively) and their fp32 rstd per head (2 e kd + 8 hk);
    //   ctx.save_for_backward(q, q_rstd, k, k_rstd, v, g, beta, A, ...): v's contiguous copy (e vd),
    //     g after chunk_local_cumsum (fp32, 4 hv), beta (the sigmoid's output, above), and A, the
    //     solved [64 x 64] chunk matrices in k's dtype (solve_tril output_dtype=k.dtype: e * 64 hv).
    // causal_conv1d_fn (causal_conv1d_interface.py) applies SiLU inside the kernel and saves only x.
    per_token += 2 * e * kd + 8 * hk + e * vd + 4 * hv + e * kGdnChunk * hv;
  } else {
    // transformers' torch references (modeling_qwen3_5.py causal_conv1d_fn, l2norm,
    // torch_chunk_gated_delta_rule), tensor by tensor as autograd saves them; S is the sequence padded
    // to the chunk (F.pad), N = S / 64 chunks, C = 64:
    //   causal_conv1d_fn: F.conv1d(padding = kernel - 1) writes [b, conv, s + kernel - 1], of which
    //     SiLU's input is the first s columns (a view: the whole storage stays);
    //   q and k repeated to the value heads (repeat_interleave) and cast to fp32, contiguous; l2norm
    //     saves each fp32 copy (x * x and x * inv_norm) and its fp32 inv_norm per head (s long);
    //   after F.pad (S long, fp32): query, key, value and beta (v_beta / k_beta multiply by beta),
    //     k_beta (saved by its matmul), the five [C x C] per-chunk tensors (the pairwise decay after
    //     exp, k_beta @ k^T and its product with the decay (the ut system, saved by
    //     solve_triangular), q @ k^T and the intra-chunk attention), the two solve_triangular results
    //     (new_values: dv, k_cumdecay: dk), three exp(decay) vectors, the decayed query and key, and
    //     per chunk v_new [C x dv];
    //   per sample: the recurrent state [hv, dk, dv] in fp32 that each chunk's matmuls save (N of
    //     them) and exp of each chunk's last decay.
    // Recorded at 2 key heads of 64, 4 value heads of 32, b 2 (fixtures qwen3_5_s2_n2_bf16_s128/_s100):
    // layer 0 saves 7,326,304 B at s 128 (N 2).
    const int64_t padded = ceil_div(s, kGdnChunk) * kGdnChunk;
    const int64_t chunks = padded / kGdnChunk;
    per_sample = checked_add(per_sample, checked_mul(e * conv, s + kernel - 1));
    per_sample = checked_add(per_sample, checked_mul(8 * hv * dk + 8 * hv, s));
    const int64_t per_padded_token = hv * (24 * dk + 12 * dv + 20 * kGdnChunk + 16);
    per_sample = checked_add(per_sample, checked_mul(per_padded_token, padded));
    per_sample = checked_add(per_sample, checked_mul(chunks, 4 * hv * dk * dv + 4 * hv));
  }
  return checked_add(checked_mul(per_token, s), per_sample);
}

double gdn_rule_flops_per_token(const models::ModelSpec& m, int64_t s) {
  // fla's chunked rule per value head and token, with chunk C = min(64, s) (Yang, Kautz & Hatamizadeh,
  // "Gated Delta Networks", ICLR 2025, §3.3 and fla chunk_gated_delta_rule_fwd's five kernels):
  //   chunk_scaled_dot_kkt: beta K K^T in the chunk, 2 C dk;
  //   solve_tril: the unit lower-triangular inverse, C^3/3 multiply-adds per chunk, 2 C^2 / 3 per token;
  //   recompute_w_u: w = A (beta K exp(g)), u = A (beta V): 2 C dk + 2 C dv;
  //   chunk_gated_delta_rule_fwd_h: v_new = u - w h and h += k^T v_new, 4 dk dv;
  //   chunk_fwd_o: o = q h + (q k^T . decay) v_new, 2 dk dv + 2 C dk + 2 C dv.
  // The projections, the convolution and the norms are counted elsewhere.
  const double c = static_cast<double>(std::min<int64_t>(kGdnChunk, std::max<int64_t>(1, s)));
  const double dk = static_cast<double>(m.linear_key_head_dim),
               dv = static_cast<double>(m.linear_value_head_dim);
  const double per_head = 6.0 * c * dk + 4.0 * c * dv + 6.0 * dk * dv + 2.0 * c * c / 3.0;
  return per_head * static_cast<double>(m.linear_num_value_heads);
}

}  // namespace zeroplan::planner
