#pragma once
// The planner's model of zeroplan's own native engine (executor/engine.cpp), the runtime that
// `zeroplan validate` measures (TrainingSpec::implementation == Implementation::ZeroplanEngine).
//
// The engine runs DeepSpeed 0.16.9's ZeRO paths (partitioning, buckets, collectives), so the memory
// model's model states and collectives apply to it unchanged; what differs is written down here,
// read from the engine's code, never by calling it (the comparison in validate is only worth
// something if the two accounts are independent):
//  - activations: fused kernels save one buffer per intermediate (executor/engine.cpp
//    alloc_layer_acts), the loss gradient overwrites the logits in place, and the backward holds a
//    known set of transient gradient buffers per layer: engine_activations() walks the same sequence
//    of allocations and frees from the shapes and returns the two peaks;
//  - gradients: see engine_gradient_rules().
#include <cstdint>

#include "planner/training_spec.h"

namespace zeroplan::planner {

struct EngineActivations {
  int64_t forward_peak = 0;   // live activation bytes at the forward's maximum (cross-entropy)
  int64_t backward_peak = 0;  // live activation bytes at the backward's maximum
};

// Activation-category bytes of one rank for one micro-step of `micro_batch` samples of
// w.train.seq_len tokens, with full recomputation when `full_checkpointing` (the engine has no
// selective mode: a selective plan runs without checkpointing).
EngineActivations engine_activations(const Workload& w, int64_t micro_batch, bool full_checkpointing);

// Where the engine's gradient buffers differ from DeepSpeed 0.16.9's (engine.cpp grad_slot,
// reduce_at_boundary, the offload path).
struct EngineGradientRules {
  // Stage 0 in bf16 (BF16_Optimizer): each 16-bit param.grad is added to the fp32 buffer as soon as
  // it is produced and freed (immediate_grad_update), so one gradient exists at a time, the largest
  // trainable tensor's, where DeepSpeed 0.16.9 keeps all of them until backward_epilogue.
  bool stage0_immediate_grad_update = true;
  // Stage 1: reduce_at_boundary copies the reduced slices into a 16-bit grads_in_partition (2Psi/N)
  // while the full 16-bit gradients still exist, until the step frees both (DeepSpeed's stage 1
  // runs copy_grads_in_partition too, "zero stage 1 - partition only optimizer state" branch of
  // reduce_ipg_grads; 0.16.9 frees it within the reduction).
  bool stage1_grads_in_partition = true;
  // Optimizer offload: the engine copies each reduced gradient straight into the host partition;
  // it has no temp_grad_buffer_for_gpu_offload / _for_cpu_offload staging buffers.
  bool offload_has_staging_buffers = false;
  // Stages 1-3: the backward's GEMMs write each weight gradient straight into its slot (the flat
  // gradient buffer or the reduce bucket: grad_slot), where autograd first materialises param.grad
  // and the reduce hook copies it into the bucket (so DeepSpeed briefly holds the largest one).
  bool param_grad_materialised = false;
  // Stages 0 (and BF16_Optimizer): reduce_at_boundary scales and all-reduces the gradient buffer in
  // place, reduce_bucket_size elements at a time, where DeepSpeed's allreduce_bucket flattens a copy
  // of the bucket (and casts BF16_Optimizer's fp32 gradients to the communication dtype).
  bool allreduce_copies_gradients = false;
  // Stage 0 in fp32 (no wrapper): param.grad of every parameter lives in one padded flat buffer
  // allocated at setup and kept (zeroed, not freed) between steps, where torch frees param.grad
  // at zero_grad and autograd re-creates it during the backward.
  bool stage0_flat_grads_persistent = true;
  // Stage 3 with one rank: DeepSpeed's NoGatherHandle makes every gathered parameter a view of its
  // partition (partition_parameters.py _no_gather_coalesced); the engine gathers into its own buffers
  // whatever the world size (engine.cpp s3_fetch).
  bool single_rank_gathers_are_views = false;
  // Stage 0 bf16 (BF16_Optimizer): reduce_at_boundary all-reduces the fp32 gradient buffer itself,
  // where DeepSpeed's allreduce_bucket first casts it to the communication dtype (bf16).
  bool bf16_optimizer_allreduces_fp32 = true;
};
EngineGradientRules engine_gradient_rules();

}  // namespace zeroplan::planner
