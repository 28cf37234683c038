#pragma once
// AutoTP training as DeepSpeed 0.19.8 runs it for HF models (issue 26): `tensor_parallel.autotp_size`
// in the config; deepspeed.initialize builds a (data_parallel, tensor_parallel) mesh of contiguous TP
// ranks (utils/groups.py _init_tp_mesh_device) and the engine replaces the model's linears
// (runtime/engine.py _apply_autotp_partitioning) following the model's HF tp_plan
// (runtime/tensor_parallel/config.py _get_hf_tp_plan merges config.base_model_tp_plan and the class's
// _tp_plan; module_inject/tp_plan_converter.py). For the Llama-layout models the plan is:
//  - q_proj, k_proj, v_proj, gate_proj, up_proj "colwise": module_inject/layers.py LinearLayer, the
//    weight's rows (and the bias) split; forward ColumnParallel is the identity, its backward
//    all-reduces the input gradient [micro, seq, hidden] in the TP group: one call per column layer;
//  - o_proj, down_proj "rowwise": LinearAllreduce, the weight's columns split, the bias replicated;
//    forward RowParallel all-reduces the output [micro, seq, hidden], backward passes it through;
//  - lm_head "colwise_gather_output": LinearLayer(gather_output=True), the vocabulary split; its forward
//    gathers the logits (GatherFromTensorParallelRegion: all_gather_into_tensor of the padded shards,
//    then torch.cat), its backward all-reduces the input gradient (ColumnParallel);
//  - per-head q_norm / k_norm (Qwen3, Gemma-3) "replicated_with_grad_allreduce": whole on every rank,
//    their gradients all-reduced in the TP group by a hook (auto_tp.py register_replicated_grad_hooks);
//  - everything else (embeddings, norms) replicated; except a tied embedding, which becomes
//    vocabulary-parallel with the lm_head sharing its shard (recorded, fixtures-tp llama-tied): its
//    output all-reduced in the forward, no logits gather, and a vocabulary-parallel cross-entropy
//    (three fp32 all-reduces over the tokens).
// Shard sizes (module_inject/tp_shard.py get_shard_size, tp_grain_size 1): attention projections are
// split by KV-head groups, rank r taking kv/tp groups plus one if r < kv % tp (so with tp > kv the
// ranks from kv on hold no attention shard: engine.py warns and goes on); MLP and lm_head rows near
// evenly, rank r taking n/tp plus one if r < n % tp. Rank 0 holds the largest shard of every kind,
// so the planner models rank 0.
//
// ZeRO then runs over the data-parallel group (world / tp ranks of the same TP index) on the TP
// shards: every ZeRO size of the planner reads the per-rank model (tensor_parallel_rank_model) and
// the layout's zero() group.
#include <cstdint>
#include <string>
#include <vector>

#include "planner/ds_runtime_collectives.h"
#include "planner/memory_breakdown.h"
#include "planner/model_stats.h"
#include "planner/step_time.h"
#include "planner/zero_config.h"

namespace zeroplan::planner {

// Why zeroplan cannot plan `w` with AutoTP of `tp` (one sentence naming the flag), or "" when it can.
// The layout's rules (tp divides the GPUs and heads, stays in a node) are layout::validate's; this
// names the model families and options the TP model does not cover yet. `w.model` is the unsharded
// model.
std::string tensor_parallel_refusal(const Workload& w, int tp);

// The model one TP rank holds (rank 0, the largest shard): attention heads and KV heads of its
// KV-head groups, MLP width and lm_head rows of its near-even share. Hidden size, vocabulary (the
// embedding), norms and row-parallel biases are unchanged. Everything the planner derives from the
// model (parameters, stage-3 tensor sizes, saved activations, GEMMs) then counts this rank's share.
models::ModelSpec tensor_parallel_rank_model(const models::ModelSpec& m, int tp);

// Turns `w` into the TP workload: w.train.tensor_parallel = tp, w.unsharded keeps the model as given
// and w.model becomes its rank-0 shard. Call once, after tensor_parallel_refusal is empty.
void apply_tensor_parallel(Workload& w, int tp);

struct TensorParallelCosts {
  int tp = 1;
  int64_t layers = 0;
  int64_t hidden_bytes = 0;        // one all-reduce: micro * seq * hidden * activation element
  int64_t logits_shard_bytes = 0;  // the lm_head's gathered shard: micro * seq * ceil(V/tp) * element
  int64_t allreduce_calls_per_step = 0;
  int64_t gather_calls_per_step = 0;
  int64_t loss_allreduce_calls_per_step = 0;  // tied models: the vocabulary-parallel loss's scalars
  int64_t loss_scalar_bytes = 0;              // one of them: micro * (seq - 1) fp32
  int64_t norm_grad_calls_per_step = 0;       // per-head q/k norms' gradient all-reduces (Qwen3, Gemma-3)
  int64_t norm_grad_bytes = 0;                // one of them: head_dim x element
  int64_t bytes_per_rank_per_step = 0;        // bus bytes (nccl-tests factors)
  double time_s = 0;                          // all of them per step, exposed
};
// The TP group's costs for one optimizer step; a default object (tp 1) without TP.
TensorParallelCosts tensor_parallel_costs(const Workload& w, const ModelStats& s, const ZeroConfig& z);

// Applied by estimate_memory: for a tied model, the vocabulary-parallel loss's transients beyond the
// transformers loss; untied, nothing beyond the rank model's sizes (the logits gather's transient stays
// below the loss's; tensor_parallel.cpp says why).
void apply_tensor_parallel_memory(const Workload& w, const ModelStats& s, const ZeroConfig& z,
                                  MemoryBreakdown& m);
// Applied by estimate_time: the TP all-reduces and the logits gather as one collective entry, all
// exposed (synchronous on the compute stream: tp_overlap_comm defaults to false). Leaves step_s to the
// caller.
void apply_tensor_parallel_time(const Workload& w, const ModelStats& s, const ZeroConfig& z, StepTime& t);

// The TP group's calls of one optimizer step, in issue order per micro-step.
std::vector<CollectiveCall> tensor_parallel_calls(const Workload& w, const ZeroConfig& z);

}  // namespace zeroplan::planner
