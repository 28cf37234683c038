#pragma once
// ComputeStats: what the time model needs to know about the model, computed once per Workload from
// the layer inventory (models/model_spec.h) so that costing a candidate is plain arithmetic.
//  - every GEMM of a decoder layer and of the LM head, as (n, k) weight shapes with a multiplicity
//    and the fraction of the micro-batch's tokens it sees (MoE experts see top_k/E of them);
//  - attention core sizes (query heads x head_dim) for the score/value FLOPs;
//  - bytes of memory-bound (element-wise, norm) traffic per token;
//  - the parameter tensors grouped the way DeepSpeed stage 3 fetches them (one group per module,
//    decoder layers repeated), for the per-module all-gathers and the persistence threshold.
// FLOP conventions (cited in compute_stats.cpp): a GEMM [m,k]x[k,n] costs 2*m*n*k FLOPs (one
// multiply + one add per MAC, Kaplan et al. 2020 §2.1); backward = 2x forward for GEMMs whose
// weight is trained (input grad + weight grad), 1x for frozen weights (input grad only, LoRA).
#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "planner/training_spec.h"

namespace zeroplan::planner {

// One weight GEMM family: `count` GEMMs of a weight [n, k] (HF Linear [out, in]) per layer, each
// applied to `token_fraction` of the micro-batch's tokens.
struct GemmShape {
  int64_t n = 0;                // output features
  int64_t k = 0;                // input features
  int64_t count = 1;            // GEMMs of this shape per layer (MoE: number of experts)
  double token_fraction = 1.0;  // share of the micro-batch's tokens each GEMM sees (MoE: top_k/E)
  bool trainable = true;        // false: frozen base weight under LoRA (no weight-grad GEMM)
  // Share of the decoder layers that run it: 1 for uniform layers; a hybrid's attention and Gated
  // DeltaNet projections each run in their own kind's layers (layer kinds / num_layers).
  double layer_fraction = 1.0;
};

// Parameter tensors of one module as stage 3 fetches them (each non-persistent tensor is its own
// partitioned parameter; deepspeed/runtime/zero/partition_parameters.py partitions per parameter).
struct ParamGroup {
  int64_t repeat = 1;           // decoder layers: num_layers
  std::vector<int64_t> numels;  // every tensor of the group
  std::vector<bool> trainable;  // per tensor: receives a gradient (LoRA: only adapters)
  int64_t modules = 0;          // nn.Modules holding parameters in the group (fetch calls)
};

// Stage-3 parameter fetches of one pass (forward or backward) of one micro-step.
struct FetchPass {
  int64_t calls = 0;
  int64_t bytes_per_rank = 0;   // bus-factor bytes each rank sends
  int64_t largest_message = 0;  // bytes of the largest gather
  double time_s = 0;
  // The fetch that starts the pass (nothing to hide it behind): the first module in forward order
  // for the forward pass, the last one (in forward order) for the backward pass, which runs in
  // reverse.
  double first_s = 0;
  int64_t partition_bytes = 0;  // this rank's share of everything fetched (offload_param H2D)
};
struct Stage3Fetches {
  bool valid = false;
  // The config knobs and element size they were computed for.
  int64_t persistence_threshold = 0, max_reuse_distance = 0, elem_bytes = 0;
  FetchPass forward, backward;
};

// Precomputed collective times for the workload's own cluster: the search evaluates thousands of
// candidates that issue the same few message sizes (bucket sizes, step-end gathers, stage-3
// fetches), and busbw interpolation (a log2 per call) dominated the evaluation. Entries are only
// used when the cluster a plan is costed on is the one they were computed for (CommCacheKey).
struct CommCacheKey {
  int ranks = 0, nodes = 0, nics = 0;
  std::string intra, inter;  // link names
  double intra_latency_us = 0, inter_latency_us = 0;
  size_t intra_points = 0, inter_points = 0;  // busbw curve sizes (a calibrated curve differs)
  int tp = 1;                                 // AutoTP size: the ZeRO collectives run in world / tp ranks
};
struct CommCache {
  bool valid = false;
  CommCacheKey key;
  static constexpr int kMaxEntries = 32;
  std::array<uint8_t, kMaxEntries> kind{};  // CollectiveKind
  std::array<int64_t, kMaxEntries> bytes{};
  std::array<double, kMaxEntries> time_s{};
  int size = 0;
  Stage3Fetches stage3_default;  // DeepSpeed's default threshold and reuse distance
};

struct ComputeStats {
  // Which compute_compute_stats call made these stats (unique per call, copies keep it; 0: built by
  // hand): the key of operator_totals' cache (planner/op_model.h). Stats are not changed after.
  uint64_t id = 0;
  bool params_only = false;  // --params: no architecture; FLOPs from 6*Psi only, no shapes

  int64_t num_layers = 0;
  int64_t hidden = 0;
  int64_t vocab = 0;
  int64_t total_params = 0;      // Psi (exact inventory count)
  int64_t active_params = 0;     // MoE: parameters one token touches
  int64_t trainable_params = 0;  // full: Psi; LoRA/QLoRA: adapter parameters only
  // Trained parameter tensors as transformers holds them at run time (MoE experts stacked: two 3-D
  // tensors per layer), which DeepSpeed's optimizer step loops over (time_model.json "deepspeed_step").
  int64_t step_param_tensors = 0;
  bool frozen_base = false;     // LoRA/QLoRA: base weights frozen
  bool quantized_base = false;  // QLoRA: 4-bit NF4 base weights dequantized before each GEMM

  // GEMMs of one decoder layer (applied num_layers times) and of the head (once).
  std::vector<GemmShape> layer_gemms;
  std::vector<GemmShape> head_gemms;
  // The frozen vision tower's forward GEMMs on the batch's images (planner/vision.h; empty without
  // images): token_fraction is the rows each runs per text token (patches, or tokens after the merger, per
  // image x images per sample / sequence length). No backward: nothing in a frozen tower needs a gradient.
  std::vector<GemmShape> vision_gemms;
  // Per-token forward FLOPs of all weight GEMMs (layers + head), for reporting.
  double gemm_flops_per_token_fwd = 0;

  // Attention core: query heads * head_dim (the width of QK^T and PV), per layer.
  int64_t attn_width = 0;
  int64_t kv_width = 0;  // key/value heads * head_dim (GQA: narrower than attn_width)
  // Operator inventory of one decoder layer for the operator-level time model (op_model.cpp):
  double norms_per_layer = 0;   // norm modules in a decoder layer (2 for Llama; Gemma-2: 4), a hybrid's
                                // averaged over its layer kinds
  bool rms_norm = true;         // LlamaRMSNorm-style eager chain (7 kernels) vs fused nn.LayerNorm
  bool rotary = false;          // apply_rotary_pos_emb on q and k
  bool gated_mlp = true;
  // HF attention runs SDPA/flash kernels when asked (--attention flash); false where the modeling
  // file has only an eager path (transformers models/bloom/modeling_bloom.py: ALiBi scores via
  // alibi.baddbmm, no _supports_sdpa), whatever the flag says.
  bool sdpa_supported = true;          // act_fn(gate) * up (2 element-wise kernels) vs one activation
  double mlp_act_elems_per_token = 0;  // intermediate activations per token (MoE: x experts_per_token)
  // The MLP's element-wise work per intermediate element and its launches (forward, backward), from
  // how HF implements the activation (compute_stats.cpp).
  double act_elem_passes_fwd = 5, act_elem_passes_bwd = 8;
  double act_kernels_fwd = 2, act_kernels_bwd = 3;
  double layer_gemm_flops_per_token_fwd = 0;  // decoder-layer weight GEMMs only (recompute, HFU)
  // Element-wise kernels HF runs in training only when the config asks (op_model.cpp, h5 for issue 13):
  // residual dropouts per decoder layer with p > 0 (OPT/GPT-2: after attention and after the MLP;
  // ATen native_dropout, one kernel each) and the output width summed over the decoder layer's
  // trained linear biases (each bias gradient is a separate column-sum reduction of the output
  // gradient in the backward).
  double resid_dropouts_per_layer = 0;
  // Recompute under PyTorch's non-reentrant checkpoint (torch/utils/checkpoint.py: with early stop, on
  // by default, the recompute raises _StopRecomputationError as soon as it has re-packed as many saved
  // tensors as the forward saved). Autograd packs an mm/addmm's saved inputs before it launches the
  // kernel (generated VariableType code), so when the layer's last saved tensors are the inputs of its
  // MLP output linear (down_proj / fc2 / dense_4h_to_h / mlp.c_proj) that GEMM and the residual add
  // after it are never recomputed. Not when anything after it saves a tensor: a residual dropout (its
  // mask), a post-MLP norm (Gemma-2/3, OLMo-2, GLM-4), MoE blocks (the routing-weight multiply), an
  // untargeted 4-bit output linear (bitsandbytes' autograd Function saves after its forward). A
  // LoRA-wrapped one skips only its lora_B GEMM and the scale-and-add (PEFT runs base_layer first).
  // Recorded under DeepSpeed: tests/deepspeed/fixtures-gemm-flops (test_gemm_flops_conformance.cpp).
  // op_model.cpp also keeps the GEMM under ZeRO-3's zero3_linear_wrap (a custom autograd Function:
  // setup_context saves after the GEMM has run) and reentrant checkpoints.
  bool recompute_early_stop = false;
  GemmShape recompute_early_stop_gemm{};   // the skipped GEMM (count 1): the MLP output linear's, or
  bool recompute_early_stop_lora = false;  // its PEFT lora_B (the output linear is LoRA-wrapped)
  // HF hands SDPA an explicit [b, 1, s, s] causal mask (Falcon, compute_stats.cpp): the flash kernel
  // cannot take a mask, so SDPA runs its memory-efficient kernel over the whole s x s square.
  bool attention_explicit_mask = false;
  double bias_grad_width_per_layer = 0;
  // Every non-expert linear bias of a decoder layer, trained or frozen: count and summed output width.
  // Under ZeRO-3 DeepSpeed replaces torch.nn.functional.linear by zero3_linear_wrap, whose forward
  // adds the bias in a separate in-place kernel (op_model.cpp). GPT-2's Conv1D calls torch.addmm
  // itself and is not counted.
  double linear_biases_per_layer = 0;
  double linear_bias_width_per_layer = 0;
  // Memory-bound traffic per token in the forward, in activation ELEMENTS read + written (times the
  // activation dtype size gives bytes): per decoder layer (norms, residual adds, rotary, activation
  // function) and once for the head (softmax/cross-entropy over the vocabulary). Backward counted
  // as 2x (compute_stats.cpp).
  double elementwise_elems_per_token_fwd = 0;
  double head_elementwise_elems_per_token_fwd = 0;

  // Parameter groups in forward order (embedding, decoder layer x L, final norm, head).
  std::vector<ParamGroup> groups;

  // nn.Module forward calls that DeepSpeed stage 3's per-module hooks intercept in one forward pass
  // (the backward fires the same modules' backward hooks): parameter_offload.py
  // _register_deepspeed_module registers the pre/post forward and pre/post backward hooks on EVERY
  // submodule reached through module.children(), with or without parameters, so every module whose
  // forward runs pays fetch_sub_module + release_sub_module (partitioned_param_coordinator.py).
  // Counted from the HF module tree (compute_stats.cpp); 0 for --params (no module tree known).
  int64_t hooked_modules_per_layer = 0;  // one decoder layer
  // The same when the layer's MoE block is a ZeRO-3 leaf module (DeepSpeed hooks the block, not its
  // children: parameter_offload.py _register_deepspeed_module stops at z3_leaf_module); equal to
  // hooked_modules_per_layer for dense models.
  int64_t hooked_modules_per_layer_moe_leaf = 0;
  int64_t hooked_modules_outside_layers = 0;  // embeddings, final norm, head and the model wrappers
  // Hybrids: the decoder layers' hooked module calls beyond num_layers x hooked_modules_per_layer (each
  // other layer kind's difference from the representative attention layer, times its layers).
  int64_t hooked_modules_layers_adjust = 0;
  // Hybrids: the share of decoder layers that run softmax attention (the attention core, rotary, the
  // output transpose) and that run a Gated DeltaNet (planner/gated_delta_net.h); 1 and 0 otherwise.
  double attention_layer_fraction = 1.0;
  double gdn_layer_fraction = 0.0;
  double mamba2_layer_fraction = 0.0;  // Mamba-2 layers (planner/mamba2.h)
  // Hybrids: the Gated DeltaNet layers' chunked-rule FLOPs per token in the forward, all of them together
  // (planner/gated_delta_net.h gdn_rule_flops_per_token x their count).
  double gdn_rule_flops_per_token_fwd = 0;
  // Hybrids: the Mamba-2 layers' chunked-scan FLOPs per token in the forward, all of them together.
  double mamba2_scan_flops_per_token_fwd = 0;
  // Tensors of 1-D/2-D weights quantized in QLoRA (bytes of NF4 weight read per forward).
  int64_t quantized_params = 0;

  // PaLM (Chowdhery et al. 2022, Appendix B) model FLOPs per token, excluding attention:
  // 6*N (2N forward + 4N backward). With frozen base weights the backward has no weight-grad
  // GEMMs for them: 4*N_frozen + 6*N_trainable (stated convention; see compute_stats.cpp).
  double model_flops_per_token_dense = 0;

  // Collective times on the workload's cluster for the messages the search issues, and the stage-3
  // fetches for DeepSpeed's default persistence threshold and reuse distance (they do not depend on
  // the micro-batch); anything else is computed per call.
  CommCache comm;
};

// Builds the stats from the workload's model inventory and training method.
// Which attention code HF's modeling file reaches when the user asks for SDPA (the default): the
// fused SDPA kernels; SDPA's math path (the dispatcher refuses both fused kernels: multi-query Falcon);
// or HF's eager attention (no SDPA path in the modeling file: BLOOM's ALiBi baddbmm, Gemma-2's
// soft-capping). compute_stats.cpp cites the lines. Both the time model (op_model.cpp) and the
// activation memory (memory_stats.cpp) follow it.
enum class HfAttentionPath : uint8_t { Sdpa, SdpaMath, Eager };
HfAttentionPath hf_attention_path(const models::ModelSpec& m);
// HF passes SDPA an explicit [b, 1, s, s] boolean causal mask (Falcon: create_causal_mask with
// allow_is_causal_skip=False), so the flash kernel is never used.
bool hf_attention_explicit_mask(const models::ModelSpec& m);

ComputeStats compute_compute_stats(const Workload& w);

}  // namespace zeroplan::planner
