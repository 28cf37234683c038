#include "planner/zenflow.h"

#include <fmt/format.h>

#include <algorithm>

namespace zeroplan::planner {

std::string zenflow_refusal(const ZenFlowSettings& z, const ZenFlowHost& host) {
  // runtime/zenflow/zenflow_stage_1_and_2.py _configure_zenflow (stage 1/2) and engine_stage3.py (stage 3),
  // reached from engine.py _configure_zero_optimizer.
  if (!host.offload_optimizer_cpu) return "ValueError: Zenflow must be used with cpu offload";
  // runtime/zenflow/engine.py configure_zenflow: `raise Warning(...)` is an exception, so this stops
  // deepspeed.initialize.
  if (z.select_strategy == "auto" && z.select_interval)
    return "Warning: If use auto select strategy, select_interval will be set to 1 and select_strategy will "
           "be set to epoch, thus select_interval would be overwritten.";
  if (z.select_strategy != "auto" && !z.select_interval)
    return "ValueError: If don't use auto select strategy, select_interval must be a number.";
  // Same function: the check runs on the resolved intervals; with "epoch" and no dataloader the select
  // interval becomes 0 and the check is skipped.
  if (z.select_strategy == "step" && z.update_interval && *z.select_interval < *z.update_interval)
    return "ValueError: Select interval must be greater or equal to update interval";
  // zenflow_stage_1_and_2.py ZenFlowZeroOptimizer.__init__.
  if (z.offload && !host.overlap_comm && host.stage <= 2)
    return "AssertionError: offload selective optimizer should be used with overlap_comm";
  return "";
}

std::string zenflow_model_refusal(const std::vector<models::LayerInventory>& runtime_inventory) {
  for (const models::LayerInventory& layer : runtime_inventory)
    for (const models::TensorSpec& t : layer.tensors)
      if (t.shape.size() > 2 && !t.frozen)
        // zenflow_stage_1_and_2.py update_selected_channels: `num_row, num_col = param.shape if
        // len(param.shape) == 2 else (1, param.shape[0])` takes a 3-D parameter as one row of numel
        // columns, selects topk_ratio x numel of them and overruns the index buffer sized for the bucket's
        // columns. Recorded (fixtures-zenflow failures, mixtral_s2_n2_bf16_zenflow, fused experts
        // [4, 256, 256]): "RuntimeError: start (25) + length (26214) exceeds dimension size (300)".
        return fmt::format(
            "DeepSpeed 0.19.8's ZenFlow selects columns of 1-D and 2-D parameters only; '{}' has {} "
            "dimensions, and the first backward fails (update_selected_channels: RuntimeError: start ... + "
            "length ... exceeds dimension size ...)",
            t.name, t.shape.size());
  return "";
}

int64_t zenflow_selective_state_bytes(const std::vector<models::LayerInventory>& runtime_inventory,
                                      double topk_ratio, int param_bytes) {
  // _process_selected_fp32_groups_grad: a 2-D parameter [rows, cols] keeps rows x max(1, int(cols x topk))
  // selected elements (_num_selected_columns); a 1-D one all of its elements.
  // ZenFlowSelectiveAdamW.group_step creates exp_avg and exp_avg_sq with zeros_like(selected_param) (the
  // parameter's dtype) and state["step"], a 0-dim fp32 tensor. Recorded: llama-gqa_s2_n2_bf16_zenflow's
  // selective optimizer holds 877,652 bytes beyond the bf16 parameters it references
  // (docs/conformance-zenflow.md hand count). A parameter split between two ranks' partitions takes int() per
  // piece; whole tensors here.
  int64_t elements = 0, tensors = 0;
  for (const models::LayerInventory& layer : runtime_inventory)
    for (const models::TensorSpec& t : layer.tensors) {
      if (t.frozen) continue;
      ++tensors;
      if (t.shape.size() == 2) {
        const auto cols = static_cast<int64_t>(static_cast<double>(t.shape[1]) * topk_ratio);
        elements += t.shape[0] * std::max<int64_t>(1, cols);
      } else {
        elements += t.numel();
      }
    }
  return elements * 2 * param_bytes + tensors * 4;
}

}  // namespace zeroplan::planner
