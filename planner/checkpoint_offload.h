#pragma once
// Checkpoint offload (issue 24 item 4, issue 27 item 1): the decoder layers' checkpointed inputs kept in
// host memory between the forward and the backward instead of on the GPU.
//
// DeepSpeed 0.19.8 has two ways in, both driving one engine (runtime/activation_checkpointing/
// offload_activations.py _ActivationOffloadEngine, PR #8282, in releases from 0.19.6):
//  - deepspeed.checkpointing with ds_config activation_checkpointing.cpu_checkpointing (Megatron-
//    DeepSpeed, or a script that calls deepspeed.checkpointing.configure): checkpointing.py
//    _get_cpu_offload_engine, keep_last_count=1, min_offload_bytes=0;
//  - HF non-reentrant checkpointing inside get_checkpoint_hidden_states_offloading_ctx_manager()
//    (CheckpointHiddenStatesOffload, what ALST scripts wrap the step in): keep_last_count=1.
// Both keep max_fwd_stash_count=2 and copy on a side stream into pinned host buffers.
//
// The engine's schedule, read from the code: each new checkpoint input stays on the GPU as the newest
// ("keep last"); the one it displaces starts an asynchronous D2H and its GPU storage is held in the
// forward stash until the stash window (ids > newest - 2) passes it; so at the forward's end the GPU
// holds the last layer's input and the one before it, and every input but the last has a host copy.
// In the backward, restore_input returns the kept and stashed tensors without a copy and copies each
// other one back H2D on the side stream, which the compute stream waits for: nothing is prefetched, so
// those copies sit on the backward's critical path. The forward's copies overlap the next layers'
// compute.
//
// The blocking path: DeepSpeed before 0.19.6 (0.18.9, 0.16.9), and cpu_checkpointing together with
// partition_activations in every release (checkpointing.py partition_activations: `partition.cpu()`,
// the engine is only for the non-partition path), copies each checkpoint to pageable host memory with
// `.cpu()` in the forward and back with `.to(device)` at its layer's backward, both on the compute
// stream. partition_activations splits each checkpoint over the model-parallel group, which is 1 here
// (no tensor parallelism is planned), so it moves whole checkpoints.
#include <cstdint>
#include <string>

#include "planner/training_spec.h"

namespace zeroplan::planner {

struct CheckpointOffloadPlan {
  bool active = false;           // offload requested and the layers are fully checkpointed
  bool async = false;            // the side-stream engine (else blocking copies)
  bool pinned = false;           // host buffers page-locked (the engine pins; `.cpu()` does not)
  int64_t gpu_checkpoints = 0;   // layer inputs on the GPU at the forward's end
  int64_t host_checkpoints = 0;  // layer inputs with a host copy
  int64_t d2h_copies = 0;        // per micro-step, in the forward
  int64_t h2d_copies = 0;        // per micro-step, in the backward (on its critical path)
};

// The schedule above for `num_layers` decoder layers. Inactive when the offload is off or the plan's
// checkpointing is not full (only full checkpointing keeps one input per layer).
CheckpointOffloadPlan checkpoint_offload_plan(const TrainingSpec& t, int64_t num_layers,
                                              Checkpointing checkpointing);

// Why DeepSpeed cannot run the requested offload for this training spec, or "" when it can.
std::string checkpoint_offload_refusal(const TrainingSpec& t);

// Whether DeepSpeed could run this spec with the checkpoints offloaded (the refusal above, asked with
// the offload on): what --max-seq and the no-fit reasons check before trying it.
bool checkpoint_offload_available(const TrainingSpec& t);

}  // namespace zeroplan::planner
