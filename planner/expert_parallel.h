#pragma once
// Expert parallelism as DeepSpeed 0.19.8 runs it for Hugging Face MoE models: AutoEP (ds_config
// "expert_parallel": {"enabled": true, "autoep_size": ep}, deepspeed/module_inject/auto_ep*.py), which
// replaces each HF MoE block by an AutoEPMoELayer whose ranks each hold E/ep experts, routes the tokens
// with variable-size all_to_all_single calls (dropless: no capacity factor) and puts the experts'
// parameters in their own ZeRO group partitioned over the expert-data-parallel group of N/ep ranks
// (deepspeed/utils/groups.py _create_expert_and_data_parallel). What it changes per rank, under the
// uniform-routing assumption stated in each function, is modelled here; docs/moe.md walks through it.
//
// Native DeepSpeed-MoE (deepspeed.moe.layer.MoE, a TopKGate with a capacity factor) needs the model's
// code rewritten and is refused at ZeRO-3 (runtime/engine.py _validate_zero3_moe_compatibility:
// "Native DeepSpeed MoE is not supported with ZeRO Stage 3. Use AutoEP or choose ZeRO stage 1/2."); its
// capacity arithmetic is kept (native_moe_capacity) for the emitted snippet's numbers and the tests.
#include <cstdint>
#include <string>
#include <vector>

#include "planner/ds_runtime_collectives.h"
#include "planner/memory_breakdown.h"
#include "planner/model_stats.h"
#include "planner/step_time.h"
#include "planner/zero_config.h"

namespace zeroplan::planner {

// The AutoEP preset DeepSpeed 0.19.8 applies to this model_type (auto_ep_presets/registry.py
// _PRESET_MODULES and each preset's hf_model_types), or nullptr when there is none.
const char* autoep_preset(const models::ModelSpec& m);

// Why DeepSpeed 0.19.8 cannot run this workload with expert parallel size `ep` (one sentence), or ""
// when it can. ep == 1 is always "".
std::string expert_parallel_refusal(const Workload& w, int ep);

// The expert-parallel sizes the search tries: every ep > 1 that divides both the routed experts per
// layer and the GPUs of one node (all-to-all kept on the intra-node link), empty when refused.
std::vector<int> expert_parallel_candidates(const Workload& w);

// The routed experts' parameters of the whole model (shared experts, routers and dense layers
// excluded): num_moe_layers * E * 3 * hidden * expert width (gate, up and down projections).
int64_t routed_expert_parameters(const models::ModelSpec& m);

struct ExpertParallelCosts {
  int ep = 1;
  int64_t moe_layers = 0;
  int64_t expert_params = 0;       // routed experts of the whole model
  int64_t local_params = 0;        // parameters one rank holds unpartitioned: total - experts + experts/ep
  double local_fraction = 1.0;     // local_params / total
  int64_t rows_per_micro = 0;      // token rows one rank dispatches per MoE layer: micro * seq * top-k
  int64_t a2a_bytes = 0;           // one dispatch or combine all_to_all_single: rows * hidden * elem
  int64_t count_bytes = 0;         // the token-count exchange: E int32 counts
  int64_t a2a_calls_per_step = 0;  // dispatch + combine calls (forward, backward, recompute)
  int64_t count_calls_per_step = 0;
  double a2a_time_s = 0;     // all of them per step
  int64_t buffer_bytes = 0;  // send + receive buffers of the layer in flight
};

// Costs for `z` (z.ep_size > 1); a default object when z.ep_size <= 1.
ExpertParallelCosts expert_parallel_costs(const Workload& w, const ModelStats& s, const ZeroConfig& z);

// Applied by estimate_memory before finalize(): full-size (unpartitioned) model-state buffers scale
// to the rank's local parameters; partitioned ones stay (experts/ep over N/ep ranks = experts/N); the
// all-to-all buffers are added.
void apply_expert_parallel_memory(const Workload& w, const ModelStats& s, const ZeroConfig& z,
                                  MemoryBreakdown& m);

// Applied by estimate_time: the ZeRO collectives move the rank's local parameters (scaled by
// local_fraction), and the all-to-alls are added, all exposed (the experts wait for the dispatch).
// Leaves step_s to the caller.
void apply_expert_parallel_time(const Workload& w, const ModelStats& s, const ZeroConfig& z, StepTime& t);

// The all_to_all_single calls of one optimizer step, in issue order per micro-step and MoE layer
// (auto_ep_layer.py: _split_plan_from_expert_counts, _AllToAllV forward and backward).
std::vector<CollectiveCall> expert_parallel_calls(const Workload& w, const ZeroConfig& z);

// Native DeepSpeed-MoE's expert capacity (deepspeed/moe/sharded_moe.py _capacity and its callers):
// ceil(tokens / E * capacity_factor * k) (top1gating: k = 1; top2gating: capacity_factor * 2;
// topkgating: capacity_factor * k), at least min_capacity.
int64_t native_moe_capacity(int64_t tokens, int64_t experts, int k, double capacity_factor,
                            int64_t min_capacity);

}  // namespace zeroplan::planner
