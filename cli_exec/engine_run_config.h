#pragma once
// The engine's RunConfig for a planned ZeRO configuration: the plan's knobs only, as DeepSpeed's
// config would set them (the engine sizes every buffer from its own tensors). One mapping for
// `zeroplan validate` (cli/cmd_validate.cpp, which first refuses what the engine cannot run) and the
// executor-against-planner accounting tests (tests/executor_accounting_util.h).
#include <algorithm>

#include "executor/engine.h"
#include "planner/training_spec.h"
#include "planner/zero3_leaf.h"
#include "planner/zero_config.h"

namespace zeroplan::exec {

inline RunConfig engine_run_config(const planner::Workload& w, const planner::ZeroConfig& z, int steps) {
  RunConfig c;
  // The model as given: under AutoTP the engine shards it itself (RunConfig::parallel.tp), from its own
  // fields, while the planner's w.model is already rank 0's shard (planner/tensor_parallel.h).
  c.model = w.full_model();
  c.parallel.tp = std::max(1, w.train.tensor_parallel);
  if (w.train.method == planner::Method::LoRA) {
    c.lora.rank = w.train.lora_rank;
    c.lora.targets = w.train.lora_targets;
  }
  c.mixed_precision = w.train.precision == planner::Precision::BF16;
  c.micro_batch = z.micro_batch;
  c.seq_len = w.train.seq_len;
  c.grad_accum = z.grad_accum;
  // Selective recomputation (Korthikanti et al. 2022 §5) recomputes the attention core, i.e. the
  // s x s scores; flash-style attention saves none, so selective keeps exactly what "none" keeps
  // (the planner agrees: layer_selective_per_sample = the layer without the core).
  c.checkpointing = z.checkpointing == planner::Checkpointing::Full;
  c.steps = steps;
  c.zero.stage = z.stage;
  c.zero.offload_optimizer = z.offload_optimizer == planner::Offload::CPU;
  c.zero.reduce_bucket_size = z.reduce_bucket_size;
  c.zero.allgather_bucket_size = z.allgather_bucket_size;
  c.zero.overlap_comm = z.overlap_comm;
  c.zero.prefetch_bucket_size = z.prefetch_bucket_size;
  c.zero.param_persistence_threshold = z.param_persistence_threshold;
  c.zero.max_live_parameters = z.max_live_parameters;
  c.zero.max_reuse_distance = z.max_reuse_distance;
  c.zero.sub_group_size = z.sub_group_size;
  // Stage 3 with MoE: the engine gathers the sparse block as the planner says DeepSpeed does for this
  // version and --z3-leaf-moe (one leaf module, or its router and experts submodules apart).
  for (const auto& layer : w.model.runtime_inventory())
    if (!layer.moe_block_class.empty()) {
      c.zero.moe_leaf = planner::moe_block_is_leaf(layer.moe_block_class, planner::effective_moe_leaf(w, z),
                                                   w.train.deepspeed_version);
      break;
    }
  return c;
}

}  // namespace zeroplan::exec
