#pragma once
// DeepSpeed's own model-state estimators, reproduced exactly (DeepSpeed v0.16):
//  - deepspeed/runtime/zero/stage_1_and_2.py estimate_zero2_model_states_mem_needs
//  - deepspeed/runtime/zero/stage3.py estimate_zero3_model_states_mem_needs
// so that `zeroplan --compare deepspeed` can show what users get from them next to zeroplan's full
// prediction (activations, buckets, overhead are what they leave out).
#include <cstdint>
#include <string>

#include "planner/plan.h"
#include "planner/training_spec.h"

namespace zeroplan::planner {

struct DeepSpeedEstimate {
  int64_t cpu_bytes = 0;             // "per CPU" column (host memory per node)
  int64_t gpu_bytes = 0;             // "per GPU" column
  int64_t largest_layer_memory = 0;  // stage 3 only: 4 * largest_layer_params
};

inline constexpr double kDeepSpeedAdditionalBufferFactor = 1.5;  // default additional_buffer_factor

DeepSpeedEstimate deepspeed_zero2_estimate(
    int64_t total_params, int64_t gpus_per_node, int64_t nodes, bool cpu_offload,
    double additional_buffer_factor = kDeepSpeedAdditionalBufferFactor);
DeepSpeedEstimate deepspeed_zero3_estimate(
    int64_t total_params, int64_t largest_layer_params, int64_t gpus_per_node, int64_t nodes,
    bool cpu_offload, bool cpu_offload_params, bool zero_init,
    double additional_buffer_factor = kDeepSpeedAdditionalBufferFactor);

// DeepSpeed prints GiB with two decimals: f"{cpu_mem/2**30:7.2f}GB".
std::string format_deepspeed_gib(int64_t bytes);

// The DeepSpeed estimate for the plan's stage and offload next to zeroplan's prediction, with what the
// estimator leaves out.
std::string render_deepspeed_comparison(const Workload& w, const Plan& p);

}  // namespace zeroplan::planner
