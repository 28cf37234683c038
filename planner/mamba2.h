#pragma once
// Mamba-2 token mixers (Granite-4.0-H: GraniteMoeHybridConfig layer_types "linear_attention" / "mamba"), as
// transformers 5.24 runs them in training (models/granitemoehybrid/modeling_granitemoehybrid.py
// GraniteMoeHybridMambaLayer.forward): in_proj -> [gate z | x, B, C | dt], then either
//  - mamba_ssm's fused mamba_split_conv1d_scan_combined (causal conv1d, the chunked SSD scan, the gated
//    RMSNorm and out_proj in one autograd Function), when mamba_ssm and causal-conv1d are installed (the
//    GPU path), or
//  - the torch references: an F.conv1d causal_conv1d_fn with SiLU, mamba2_chunk_scan (the SSD scan written
//    with einsums over chunks), GraniteMoeHybridRMSNormGated and out_proj (CPU ranks, and a GPU without
//    those packages).
// What each keeps for backward, the scan's FLOPs, and the kernels' traffic: mamba2.cpp and op_model.cpp.
#include <cstdint>

#include "models/model_spec.h"
#include "planner/training_spec.h"

namespace zeroplan::planner {

enum class Mamba2Kernels {
  MambaSsm,       // mamba_ssm mamba_split_conv1d_scan_combined + causal_conv1d (CUDA default)
  TorchFallback,  // transformers' torch references (CPU ranks)
};

// The path a plan assumes: the torch references on CPU ranks (mamba_ssm's kernels are Triton/CUDA), mamba_ssm
// on GPUs.
Mamba2Kernels mamba2_kernels(const Workload& w);

// Which of the mixer's linear inputs autograd keeps (LoRA freezes some: memory_stats.cpp LayerFlags).
struct Mamba2SaveFlags {
  bool in_saved = true;     // in_proj input (the layer's normed hidden states)
  bool out_saved = true;    // out_proj input
  bool norm_trains = true;  // the gated RMSNorm's weight
};

// Bytes one Mamba-2 mixer saves for backward for one sample of s tokens in the compute dtype of e bytes
// (the layer's norms and MLP excluded; its input norm's output included when in_saved).
int64_t mamba2_mixer_saved_per_sample(const models::ModelSpec& m, const Mamba2SaveFlags& f, int64_t e,
                                      int64_t s, Mamba2Kernels k);

// FLOPs per token of one mixer's chunked SSD scan in the forward (projections excluded: they are GEMMs on the
// operator table), at sequence length s (the chunk is min(mamba_chunk_size, s)).
double mamba2_scan_flops_per_token(const models::ModelSpec& m, int64_t s);

}  // namespace zeroplan::planner
