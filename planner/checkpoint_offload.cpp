#include "planner/checkpoint_offload.h"

#include <algorithm>

#include "planner/ds_runtime.h"

namespace zeroplan::planner {
namespace {

// offload_activations.py _ActivationOffloadEngine defaults, as both callers pass them (header comment):
// keep_last_count=1 (checkpointing.py _get_cpu_offload_engine; get_checkpoint_hidden_states_offloading_
// ctx_manager's default) and max_fwd_stash_count=2 (the stash keeps ids > newest - 2, i.e. one entry
// besides the kept one once the kept one has displaced it).
constexpr int64_t kKeepLast = 1;
constexpr int64_t kStashBesidesKept = 1;

// The engine is in DeepSpeed from 0.19.6 (PR #8282, 2026-08-21); of the releases modelled, 0.19.8.
bool has_async_engine(DeepSpeedVersion v) {
  return v == DeepSpeedVersion::V0_19_8;
}

}  // namespace

CheckpointOffloadPlan checkpoint_offload_plan(const TrainingSpec& t, int64_t num_layers,
                                              Checkpointing checkpointing) {
  CheckpointOffloadPlan p;
  if (t.checkpoint_offload != CheckpointOffload::Cpu || checkpointing != Checkpointing::Full ||
      num_layers <= 0)
    return p;
  p.active = true;
  p.async = has_async_engine(t.deepspeed_version) && !t.partition_activations;
  p.pinned = p.async;
  if (p.async) {
    const int64_t on_gpu = std::min(num_layers, kKeepLast + kStashBesidesKept);
    p.gpu_checkpoints = on_gpu;
    p.host_checkpoints = num_layers - kKeepLast;
    p.d2h_copies = num_layers - kKeepLast;
    p.h2d_copies = num_layers - on_gpu;  // the kept and stashed inputs return without a copy
  } else {
    // `.cpu()` in every layer's forward, `.to(device)` at its backward: the restored input is the one
    // checkpoint on the GPU while its layer recomputes.
    p.gpu_checkpoints = 1;
    p.host_checkpoints = num_layers;
    p.d2h_copies = num_layers;
    p.h2d_copies = num_layers;
  }
  return p;
}

std::string checkpoint_offload_refusal(const TrainingSpec& t) {
  if (t.checkpoint_offload != CheckpointOffload::Cpu) return "";
  if (t.implementation == Implementation::ZeroplanEngine)
    return "--checkpoint-offload cpu: zeroplan's native engine keeps its checkpoints on the GPU";
  if (t.checkpointing && *t.checkpointing != Checkpointing::Full)
    return "--checkpoint-offload cpu moves the inputs of fully checkpointed layers; use --checkpointing full";
  if (!t.deepspeed_checkpointing && t.checkpoint_reentrant)
    return "--checkpoint-offload cpu with --checkpoint-impl reentrant: DeepSpeed's offload for HF models "
           "(CheckpointHiddenStatesOffload) hooks non-reentrant checkpointing (offload_activations.py); "
           "use --checkpoint-impl non-reentrant, or deepspeed for deepspeed.checkpointing's "
           "cpu_checkpointing";
  if (!t.deepspeed_checkpointing && !has_async_engine(t.deepspeed_version))
    return "--checkpoint-offload cpu with HF checkpointing needs DeepSpeed >= 0.19.6 "
           "(CheckpointHiddenStatesOffload, runtime/activation_checkpointing/offload_activations.py); "
           "with DeepSpeed " +
           to_string(t.deepspeed_version) +
           " only deepspeed.checkpointing's cpu_checkpointing offloads (--checkpoint-impl deepspeed)";
  return "";
}

bool checkpoint_offload_available(const TrainingSpec& t) {
  TrainingSpec on = t;
  on.checkpoint_offload = CheckpointOffload::Cpu;
  return checkpoint_offload_refusal(on).empty();
}

}  // namespace zeroplan::planner
