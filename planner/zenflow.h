#pragma once
// ZenFlow (ds_config zero_optimization.zenflow; DeepSpeed 0.19.8 runtime/zenflow/), as far as zeroplan
// models it. ZenFlow keeps ZeRO-Offload's CPU Adam for most of each gradient and, on the GPU, updates every
// step the `topk_ratio` most important columns of each 2-D parameter with a small AdamW
// (ops/adam/zenflow_torch_adam.py ZenFlowSelectiveAdamW); the CPU update of the rest runs every
// `update_interval` steps, overlapped with the next steps' compute when `overlap_step` is on.
//  - Rules: the first rule DeepSpeed refuses the settings with (zenflow_refusal), recorded on CPU ranks in
//    tests/deepspeed/fixtures-zenflow (docs/conformance-zenflow.md).
//  - Memory: the selective AdamW's states on the GPU (zenflow_selective_state_bytes), recorded exactly.
//  - Time: not modelled; a plan or check with ZenFlow says so, and prices plain ZeRO-Offload.
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "models/model_spec.h"

namespace zeroplan::planner {

// zero_optimization.zenflow as written; the defaults are ZenFlowConfig's (runtime/zenflow/zenflow_config.py).
struct ZenFlowSettings {
  double topk_ratio = 0.1;
  std::string select_strategy = "auto";    // "auto" | "step" | "epoch"
  std::optional<int64_t> select_interval;  // nullopt: "auto"
  std::optional<int64_t> update_interval;  // nullopt: "auto"
  bool overlap_step = false;
  bool offload = false;  // the selective AdamW's states live in (pinned) host memory between its steps
};

// What the ZeRO side of the config gives ZenFlow.
struct ZenFlowHost {
  int stage = 0;
  bool offload_optimizer_cpu = false;
  bool overlap_comm = false;
};

// DeepSpeed 0.19.8's message for the first rule the settings break, or "" when it runs them.
std::string zenflow_refusal(const ZenFlowSettings& z, const ZenFlowHost& host);

// Both below read the model's runtime tree (ModelSpec::runtime_inventory(), what DeepSpeed partitions: fused
// experts are 3-D there); the caller builds it once for both.
//
// Why DeepSpeed 0.19.8 cannot run ZenFlow on this model ("" when it can): a parameter with more than two
// dimensions (fused MoE experts) breaks the column selection.
std::string zenflow_model_refusal(const std::vector<models::LayerInventory>& runtime_inventory);

// Bytes the selective AdamW keeps on each GPU when `offload` is off: exp_avg and exp_avg_sq of the
// selected columns of every trainable parameter of the model (each rank holds them for all of them, as
// the selected gradients are broadcast to every rank), in the parameters' dtype, plus a 4-byte fp32 step
// counter per parameter tensor.
int64_t zenflow_selective_state_bytes(const std::vector<models::LayerInventory>& runtime_inventory,
                                      double topk_ratio, int param_bytes);

}  // namespace zeroplan::planner
