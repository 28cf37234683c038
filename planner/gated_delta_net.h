#pragma once
// Gated DeltaNet token mixers (Qwen3-Next, Qwen3.5, Qwen3.5-MoE: layer_types "linear_attention"), as
// transformers 5.24 runs them (models/qwen3_5/modeling_qwen3_5.py Qwen3_5GatedDeltaNet.forward, the
// same in models/qwen3_next): in_proj_qkv (Qwen3-Next: in_proj_qkvz and a torch.cat) -> a depthwise
// causal conv1d with SiLU -> q/k/v split -> beta = sigmoid(in_proj_b), g = -exp(A_log) *
// softplus(in_proj_a + dt_bias) -> chunked gated delta rule (l2-normalised q/k) -> gated RMSNorm with
// SiLU(in_proj_z) -> out_proj.
//
// The two kernels' paths transformers picks between (integrations/hub_kernels.py
// use_kernel_func_from_hub_with_fallback: the original package when it imports, else the torch
// reference):
//  - flash-linear-attention's chunk_gated_delta_rule and causal-conv1d's causal_conv1d_fn, what a GPU
//    user installs (transformers prints "much slower" for the fallbacks);
//  - the torch references torch_chunk_gated_delta_rule and an F.conv1d causal_conv1d_fn, what runs on
//    CPU ranks (the conformance harness) and on a GPU without those packages.
// What each saves for backward, its FLOPs and its element-wise traffic are derived tensor by tensor in
// gated_delta_net.cpp.
#include <cstdint>

#include "models/model_spec.h"
#include "planner/training_spec.h"

namespace zeroplan::planner {

enum class GdnKernels {
  FlashLinearAttention,  // fla chunk_gated_delta_rule + causal_conv1d_fn (CUDA default)
  TorchFallback,         // torch_chunk_gated_delta_rule + F.conv1d (CPU ranks)
};

// The path a plan assumes: the torch fallbacks on CPU ranks (fla's kernels are Triton, CUDA only),
// flash-linear-attention and causal-conv1d on GPUs.
GdnKernels gdn_kernels(const Workload& w);

// The chunk length of both chunked rules: fla chunk_gated_delta_rule_fwd `chunk_size=64`, and
// torch_chunk_gated_delta_rule's default chunk_size=64 (transformers calls it without one).
inline constexpr int64_t kGdnChunk = 64;

// Which of the mixer's linear inputs autograd keeps (LoRA freezes some: memory_stats.cpp LayerFlags).
struct GdnSaveFlags {
  bool in_saved = true;     // in_proj_* input (the layer's normed hidden states)
  bool out_saved = true;    // out_proj input
  bool norm_trains = true;  // the gated RMSNorm's weight
};

// Bytes one Gated DeltaNet mixer saves for backward for one sample of s tokens in the compute dtype of
// e bytes (the layer's norms and MLP excluded; its input norm's output included when in_saved).
int64_t gdn_mixer_saved_per_sample(const models::ModelSpec& m, const GdnSaveFlags& f, int64_t e, int64_t s,
                                   GdnKernels k);

// FLOPs per token of one mixer's chunked delta rule in the forward (projections excluded: they are
// GEMMs on the operator table), at sequence length s (the chunk is min(64, padded s)).
double gdn_rule_flops_per_token(const models::ModelSpec& m, int64_t s);

}  // namespace zeroplan::planner
