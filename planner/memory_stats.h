#pragma once
// MemoryStats: everything about the model the memory model needs, computed once per Workload (it
// may allocate) so that estimate_memory (planner/memory_model.h) is allocation-free arithmetic for
// every candidate ZeroConfig. Sources of each number are cited in memory_stats.cpp and
// docs/memory-model.md.
#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "planner/training_spec.h"

namespace zeroplan::planner {

// Parameter tensors grouped by size class, sorted by numel ascending, with prefix sums, so that
// "how many elements live in tensors of numel <= t" (the stage-3 persistence threshold,
// deepspeed/runtime/zero/parameter_offload.py mark_persistent_parameters) is a binary search, and
// the stage-3 per-parameter padding ceil(n/N)*N (partition_parameters.py
// Init._partition_param / _padding_size) is a loop over the few distinct sizes.
struct TensorSizeTable {
  std::vector<int64_t> numel;         // distinct tensor numels, ascending
  std::vector<int64_t> count;         // tensors of that numel
  std::vector<int64_t> prefix_numel;  // prefix_numel[i] = sum_{j<i} numel[j]*count[j]; size()+1 entries
  std::vector<int64_t> prefix_count;  // prefix_count[i] = sum_{j<i} count[j]

  void add(int64_t n, int64_t times = 1);  // build phase only
  void finish();                           // sorts/merges and fills the prefix sums
  int64_t total_numel() const { return prefix_numel.empty() ? 0 : prefix_numel.back(); }
  int64_t largest_numel() const { return numel.empty() ? 0 : numel.back(); }
  int64_t total_count() const { return prefix_count.empty() ? 0 : prefix_count.back(); }
  // Index of the first size class with numel > t (binary search).
  size_t first_above(int64_t t) const;
  int64_t numel_at_or_below(int64_t t) const {
    return prefix_numel.empty() ? 0 : prefix_numel[first_above(t)];
  }
  int64_t count_at_or_below(int64_t t) const {
    return prefix_count.empty() ? 0 : prefix_count[first_above(t)];
  }
  // Sum over tensors with numel > t of ceil(numel / n): the per-rank partition of the non-persistent
  // tensors when each one is padded to a multiple of n.
  int64_t partition_numel_above(int64_t t, int64_t n) const;
  // Sum over tensors with numel <= t of ceil(numel / n).
  int64_t partition_numel_at_or_below(int64_t t, int64_t n) const;
};

// Activation bytes of one sample (one sequence of seq_len tokens), by checkpointing mode
// (indexed by static_cast<int>(Checkpointing)). Derivations in memory_stats.cpp.
struct ActivationStats {
  bool known = false;  // false for --params models (no architecture): activations reported as 0
  // Saved tensors of one decoder layer for one sample, with no checkpointing.
  int64_t layer_full_per_sample = 0;
  // Saved tensors of one decoder layer for one sample, with Korthikanti-style selective
  // recomputation (the attention core's softmax/scores/dropout are recomputed).
  int64_t layer_selective_per_sample = 0;
  // Full checkpointing: the layer input kept per layer (2*s*h bytes in 16-bit).
  int64_t layer_input_per_sample = 0;
  // Embedding output (+ dropout mask for GPT-style models) for one sample.
  int64_t embedding_per_sample = 0;
  // Final norm + LM-head input, saved for backward.
  int64_t head_per_sample = 0;
  // Logits in the activation dtype (the lm_head output) for one sample: s * V * elem.
  int64_t logits_per_sample = 0;
  // The lm_head's saved input (part of head_per_sample when the head trains): e * h * s.
  int64_t head_input_per_sample = 0;
  // fp32 log-probabilities saved by cross-entropy (log_softmax output): s * V * 4.
  int64_t logprobs_fp32_per_sample = 0;
  // fp32 upcast of the logits before the loss (transient in forward), s * V * 4.
  int64_t logits_fp32_upcast_per_sample = 0;
  // Number of decoder layers.
  int64_t num_layers = 0;
  // RoPE models: the rotary cos/sin tables and position ids every layer's attention saves, one
  // storage for the whole micro-batch (not per sample). See memory_stats.cpp.
  int64_t rope_tables = 0;
  // Bytes per sample the decoder layers save less than num_layers x the repeated layer: with
  // LoRA/QLoRA and frozen embeddings the first layer's input needs no gradient, so its first norm saves
  // nothing; in a MoE model with dense layers (DeepSeek first_k_dense_replace) each dense layer saves
  // its own MLP's bytes instead of the MoE layer's (memory_stats.cpp). May be negative.
  int64_t first_layer_unsaved_per_sample = 0;
  // Hybrids (Gated DeltaNet layers): the attention cores (layer_full_per_sample - layer_selective_per_sample)
  // that the non-attention layers do not save, per sample, all of them together; 0 otherwise.
  int64_t core_unsaved_per_sample = 0;
  // The largest decoder layer's saved tensors without checkpointing, per sample: what full checkpointing
  // recomputes at once (the repeated layer's layer_full_per_sample unless a hybrid's other kind is larger).
  int64_t recomputed_layer_per_sample = 0;
  // The [b, 1, s, s] causal mask passed to every layer, per sample (eager: compute dtype; Falcon's
  // SDPA call: boolean; 0 where SDPA gets is_causal and no mask). memory_stats.cpp.
  int64_t causal_mask_per_sample = 0;
  // ZeRO stage 3 only (DeepSpeed's memory_efficient_linear, default on, replaces
  // torch.nn.functional.linear by LinearFunctionForZeroStage3, which saves its input even for a frozen
  // weight): the inputs of frozen linears that no LoRA adapter saves anyway, per decoder layer and for
  // the LM head, per sample (memory_stats.cpp). 0 for full fine-tuning.
  int64_t stage3_frozen_linear_inputs_per_layer = 0;
  int64_t stage3_frozen_head_input_per_sample = 0;
};

// Stage 1/2's grads_in_partition, in elements (stage_1_and_2.py copy_grads_in_partition: `total_size
// += param_in_partition.numel()` over params_in_partition, every trainable parameter overlapping the
// rank's slice of the padded flat buffer, each counted whole; get_partition_info). Filled by
// compute_model_stats from the module.parameters() order (planner/ds_runtime_collectives.h).
struct PartitionHoldings {
  bool valid = false;
  int64_t rank0 = 0;    // rank 0's
  int64_t largest = 0;  // the largest over the data-parallel ranks
  // The largest single parameter's share of a rank's partition (the overlap of one parameter with
  // the rank's slice): the biggest of the averaged_gradients views get_grad_norm_direct converts to
  // fp64 one at a time (stage_1_and_2.py `g.data.double()`).
  int64_t rank0_piece = 0;
  int64_t largest_piece = 0;
  // Of `rank0` / `largest`: the trainable parameters no module runs (a vision tower that sees no image,
  // planner/vision.h), which receive no gradient.
  int64_t unused_rank0 = 0;
  int64_t unused_largest = 0;
};

struct MemoryStats {
  bool params_only = false;
  PartitionHoldings params_in_partition;

  int64_t total_params = 0;      // Psi
  int64_t trainable_params = 0;  // full: Psi; LoRA/QLoRA: adapter parameters (PEFT semantics)
  int64_t frozen_params = 0;     // base weights under LoRA/QLoRA (adapters excluded)
  int64_t lora_params = 0;       // adapters (= trainable_params under LoRA/QLoRA)

  // Bytes of one parameter / gradient element in the training dtype (2 for bf16/fp16, 4 for fp32).
  int64_t param_elem_bytes = 2;
  // Bytes of one activation element (2 for bf16/fp16, 4 for fp32).
  int64_t act_elem_bytes = 2;

  // Every parameter tensor of the trained model (base tensors + LoRA adapters), split into the ones
  // that receive gradients and the frozen ones. For --params: one tensor of Psi elements.
  TensorSizeTable trainable_tensors;
  TensorSizeTable frozen_tensors;
  // The 16-bit weights of the decoder layers that a matmul saves for its input gradient (nn.Linear
  // weights and fused 3-D expert weights; not QLoRA's 4-bit ones): under ZeRO-3 with
  // memory_efficient_linear false, torch's own F.linear saves each as a W^T view, which keeps its
  // gathered storage alive after DeepSpeed releases the parameter (memory_model.cpp).
  TensorSizeTable decoder_matmul_weights;
  // Frozen tensors stored in NF4 under QLoRA (the base nn.Linear weights of decoder layers) and the
  // frozen tensors kept in 16-bit (embeddings, norms, lm_head).
  int64_t frozen_quantized_params = 0;
  int64_t frozen_quantized_bytes = 0;  // NF4 + double-quantized absmax constants (memory_stats.cpp)
  int64_t frozen_16bit_params = 0;
  // The largest NF4 weight: bitsandbytes MatMul4Bit dequantizes one weight to 16-bit per matmul.
  int64_t largest_quantized_numel = 0;

  // The largest group of parameters DeepSpeed stage 3 gathers at once: the parameters of one leaf
  // module (fetch_sub_module gathers a module's own parameters), e.g. the embedding or lm_head.
  int64_t largest_module_numel = 0;
  // The largest MoE block (all its parameters, runtime tree) and its transformers class: what one
  // fetch gathers when the block is a ZeRO-3 leaf (planner/zero3_leaf.h); 0 / "" without MoE or under LoRA.
  int64_t largest_moe_block_numel = 0;
  std::string moe_block_class;
  // The largest decoder layer (all its tensors).
  int64_t largest_layer_numel = 0;

  ActivationStats act;
};

MemoryStats compute_memory_stats(const Workload& w);

// NF4 storage of an n-element tensor with QLoRA double quantization (Dettmers et al. 2023, §3 and
// "Double Quantization"): 4-bit codes, one 8-bit absmax per 64-element block, one fp32 constant per
// 256 blocks (second level), i.e. 4 + 8/64 + 32/(64*256) = 4.127 bits/param (0.127 bits overhead).
int64_t nf4_bytes(int64_t n);

}  // namespace zeroplan::planner
