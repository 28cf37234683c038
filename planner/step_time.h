#pragma once
// StepTime: the time model's result for one optimizer step (grad_accum micro-steps).
#include <array>
#include <cstdint>
#include <string_view>

#include "common/checked.h"

namespace zeroplan::planner {

// AllToAll: expert parallelism's token dispatch/combine (planner/expert_parallel.h).
enum class CollectiveKind : uint8_t { AllReduce, ReduceScatter, AllGather, Broadcast, AllToAll };
const char* collective_name(CollectiveKind k);

// One family of collectives the plan issues per step (e.g. "stage-3 forward all-gathers").
struct CollectiveCost {
  const char* name = "";
  CollectiveKind kind = CollectiveKind::AllReduce;
  int64_t count = 0;           // calls per step
  int64_t message_bytes = 0;   // bytes per call (S in nccl-tests' terms)
  int64_t bytes_per_rank = 0;  // bytes each rank sends per step (S * bus factor * count)
  double time_s = 0;           // total time of these calls per step
  double exposed_s = 0;        // part not hidden behind compute
  // The process group the calls run in (layout/parallel_layout.h): "tensor_parallel", "sequence_parallel",
  // "expert_parallel", or null for ZeRO's own calls, which run in the ZeRO group (world / tp ranks; the
  // step's overflow and norm scalars also repeat in the TP or SP group, ds_runtime_collectives.cpp).
  const char* group = nullptr;
  int group_size = 0;  // its ranks; 0 with a null group
};

inline constexpr int kMaxCollectives = 12;

// The names of stage 3's entries (time_model.cpp), which the hpZ and ZeRO++ quantization reasons look up.
inline constexpr const char* kStage3BackwardGathersName = "stage-3 backward parameter all-gathers";
inline constexpr const char* kStage3ForwardGathersName = "stage-3 forward parameter all-gathers";
inline constexpr const char* kStage3ReduceScatterName = "stage-3 gradient reduce-scatter (every micro-step)";
// The same entry under ZeRO++ qgZ on several nodes (planner/zeropp_quant.h).
inline constexpr const char* kStage3QgzName = "stage-3 gradient qgZ all-to-alls (every micro-step)";

struct StepTime {
  double compute_s = 0;  // GPU compute (forward, backward, recompute, optimizer on GPU)
  double forward_s = 0, backward_s = 0, recompute_s = 0, optimizer_s = 0;
  double communication_s = 0;  // sum of all collectives
  double exposed_communication_s = 0;
  double offload_s = 0;  // exposed PCIe/NVMe transfers and CPU Adam
  // Stage 3 only (0 otherwise): DeepSpeed's per-module hooks (fetch_sub_module/release_sub_module on
  // every module's forward and backward, and on the recomputed forward under full checkpointing).
  int64_t hooked_module_calls = 0;  // module passes per step (forward + backward + recomputed forward)
  double hook_host_s = 0;           // their host (Python) time per step
  double hook_overhead_s = 0;       // the part not hidden behind GPU compute; counted in step_s
  // Host time launching the compute's kernels per step (operator table: launches x
  // time_model.json "host"), forward and backward + recompute: with the hooks, a stage-3 pass's host
  // timeline.
  double launch_host_forward_s = 0, launch_host_backward_s = 0;
  // Compute slowed by NCCL kernels running beside it (the hidden communication x the slowdown
  // fraction of planner/data/time_model.json); counted in step_s.
  double overlap_slowdown_s = 0;
  // --checkpoint-offload cpu only (planner/checkpoint_offload.h): the checkpoints' host copies per step
  // (D2H in the forward, H2D in the backward), the bytes of one, their total time and the exposed part
  // (counted in offload_s).
  int64_t checkpoint_copies = 0;
  int64_t checkpoint_copy_bytes = 0;
  double checkpoint_copy_s = 0;
  double checkpoint_offload_s = 0;
  double step_s = 0;  // compute + exposed communication + offload + hook overhead + overlap slowdown
  // Relative error band of step_s (and tokens/s) from the calibration spread: median |error| of the
  // held-out calibration runs (scripts/calibrate_fit.py), e.g. 0.12 for "1.84 s +- 12%".
  double error_band = 0;
  double kernels_per_step = 0;         // GPU kernel launches of the compute (operator table)
  double flops_per_step = 0;           // model FLOPs per GPU (PaLM: 6N or LoRA's 4N+6N_lora, + attention)
  double hardware_flops_per_step = 0;  // + recomputed forward FLOPs (HFU numerator)
  double mfu = 0, hfu = 0;             // over the GPU's dense peak for the precision
  int64_t comm_bytes_per_rank = 0;
  std::array<CollectiveCost, kMaxCollectives> collectives{};
  int num_collectives = 0;
};

// The entry of the step's collective family named `name` (the k...Name constants above), or nullptr.
inline const CollectiveCost* find_collective(const StepTime& t, std::string_view name) {
  for (int i = 0; i < t.num_collectives; ++i)
    if (name == t.collectives[static_cast<size_t>(i)].name) return &t.collectives[static_cast<size_t>(i)];
  return nullptr;
}

// Appends a model-parallel group's calls (Ulysses', AutoTP's) as one entry that is exposed in full
// (synchronous on the compute stream) and adds it to the step's totals; nothing when the table is full.
inline void append_exposed_collective(StepTime& t, const CollectiveCost& c) {
  if (t.num_collectives >= kMaxCollectives) return;
  CollectiveCost& a = t.collectives[static_cast<size_t>(t.num_collectives++)];
  a = c;
  a.exposed_s = c.time_s;
  t.communication_s += a.time_s;
  t.exposed_communication_s += a.exposed_s;
  t.comm_bytes_per_rank = checked_add(t.comm_bytes_per_rank, a.bytes_per_rank);
}

}  // namespace zeroplan::planner
