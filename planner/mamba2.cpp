#include "planner/mamba2.h"

#include <algorithm>

#include "common/checked.h"

namespace zeroplan::planner {

Mamba2Kernels mamba2_kernels(const Workload& w) {
  return w.train.runtime == Runtime::Cpu ? Mamba2Kernels::TorchFallback : Mamba2Kernels::MambaSsm;
}

int64_t mamba2_mixer_saved_per_sample(const models::ModelSpec& m, const Mamba2SaveFlags& f, int64_t e,
                                      int64_t s, Mamba2Kernels k) {
  const int64_t h = m.hidden_size, H = m.mamba_n_heads, P = m.mamba_d_head, N = m.mamba_d_state;
  const int64_t G = m.mamba_n_groups, I = m.mamba_intermediate, conv = m.mamba_conv_dim();
  const int64_t proj = I + conv + H;  // in_proj's output: gate z, x/B/C, dt
  // Both paths, per token: in_proj's input (the layer's normed hidden states) and its whole output
  // (zxbcdt: F.conv1d saves the x/B/C view of it, MambaSplitConv1dScanCombinedFn.forward
  // ctx.save_for_backward(zxbcdt, ...) the tensor itself).
  int64_t per_token = (f.in_saved ? e * h : 0) + e * proj;
  int64_t per_sample = 0;
  if (k == Mamba2Kernels::MambaSsm) {
    // mamba_ssm ops/triton/ssd_combined.py MambaSplitConv1dScanCombinedFn.forward saves, besides zxbcdt and
    // the parameters, out_x (the scan's output before the gated norm, in x's dtype: e * I) and the norm's
    // fp32 rstd (one per group per token); the convolution, the norm and out_proj are recomputed in its
    // backward, and transformers' out_proj module is not called (the function applies outproj_weight).
    per_token += e * I + 4 * G;
  } else {
    // transformers' torch references (modeling_granitemoehybrid.py causal_conv1d_fn, mamba2_chunk_scan,
    // GraniteMoeHybridRMSNormGated), tensor by tensor as autograd saves them; S is the sequence padded to
    // the chunk C = mamba_chunk_size (pad_tensor_by_size), c = S / C chunks, B/C repeated from the groups
    // to the heads:
    //   dt + dt_bias (softplus's input) and softplus's output, in the compute dtype (2 e H); two fp32
    //     copies of dt (`dt[..., None].float()` and `dt.float()`: 8 H); x in fp32 (4 I);
    //   the gated norm in fp32 (the scan's output is fp32): the scan output, z.float(), silu's output, their
    //     product (saved by pow and by the multiply with rsqrt), rsqrt per group, the normalised output
    //     when the weight trains (4 I each), and out_proj's 16-bit input;
    //   per padded token: D's residual input (the padded x, 4 I), exp(segment_sum(A)) and the two score
    //     tensors G and M (4 H C each, M copied for its einsum), the repeated fp32 B and C, B_decay and the
    //     einsums' copies of B_decay and C (20 H N), x * dt copied for two einsums and C_times_states
    //     (4 I x 3), two exp decay vectors (8 H);
    //   per sample: the convolution's output over s + kernel - 1 columns (SiLU's input), the chunk-decay
    //     matrix over c + 1 chunks, and the fp32 states [H, P, N] of every chunk boundary, twice over (the
    //     torch.cat with the initial state, c + 1, and the einsum's copy of the chunk states, c).
    // Recorded at 8 heads of 64, state 32, one group, chunk 64, b 2 (fixtures
    // granitemoehybrid_s2_n2_bf16_s128/_s100): the Mamba-2 layer saves 12,056,978 B at s 128, of which this
    // leaves out 10,322 B (the masks, exp(A_log) and the two layer norms' per-token rsqrt).
    const int64_t C = std::max<int64_t>(1, m.mamba_chunk_size);
    const int64_t padded = ceil_div(s, C) * C;
    const int64_t chunks = padded / C;
    per_token += 2 * e * H + 8 * H + 4 * I;
    per_token +=
        4 * I + 4 * I + 4 * I + 4 * I + 4 * G + (f.norm_trains ? 4 * I : 0) + (f.out_saved ? e * I : 0);
    per_sample = checked_add(per_sample, checked_mul(16 * I + 12 * H * C + 20 * H * N + 8 * H, padded));
    per_sample = checked_add(per_sample, checked_mul(e * conv, s + m.mamba_d_conv - 1));
    per_sample = checked_add(per_sample, 4 * H * (chunks + 1) * (chunks + 1));
    per_sample = checked_add(per_sample, checked_mul(4 * H * P * N, 2 * chunks + 1));
  }
  return checked_add(checked_mul(per_token, s), per_sample);
}

double mamba2_scan_flops_per_token(const models::ModelSpec& m, int64_t s) {
  // The SSD algorithm per head and token with chunk C (Dao & Gu, "Transformers are SSMs", ICML 2024, §6:
  // the chunked scan's four steps), state N and head width P:
  //   intra-chunk scores C B^T: 2 C N; their product with x: 2 C P;
  //   the chunk states B^T x: 2 N P; the states read out by C: 2 N P.
  // The state passing between chunks and the element-wise decays are counted as memory traffic.
  const double c = static_cast<double>(std::min<int64_t>(m.mamba_chunk_size, std::max<int64_t>(1, s)));
  const double n = static_cast<double>(m.mamba_d_state), p = static_cast<double>(m.mamba_d_head);
  return (2.0 * c * n + 2.0 * c * p + 4.0 * n * p) * static_cast<double>(m.mamba_n_heads);
}

}  // namespace zeroplan::planner
