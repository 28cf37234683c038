#pragma once
// Plan: one evaluated candidate (config + memory + time + throughput); SearchResult: what the
// search returns (best plan per stage, the recommendation and the reasons behind it).
#include <optional>
#include <string>
#include <vector>

#include "planner/memory_breakdown.h"
#include "planner/save_phase.h"
#include "planner/step_time.h"
#include "planner/zero_config.h"

namespace zeroplan::planner {

struct Plan {
  ZeroConfig zero;
  Precision precision = Precision::BF16;
  int64_t seq_len = 0;
  int sequence_parallel = 1;  // Ulysses SP size (TrainingSpec::sequence_parallel)
  int tensor_parallel = 1;    // AutoTP size (TrainingSpec::tensor_parallel)
  int64_t global_batch = 0;   // sequences per step: micro_batch * grad_accum * data-parallel ranks
  // Tokens of each sequence one rank processes (Ulysses SP splits the sequence).
  int64_t rank_seq_len() const { return seq_len / (sequence_parallel > 1 ? sequence_parallel : 1); }
  MemoryBreakdown memory;
  StepTime time;
  bool fits = false;
  int64_t capacity_bytes = 0;  // GPU memory usable under the safety margin
  double tokens_per_s = 0;
  double tokens_per_s_per_gpu = 0;
  double mfu = 0;
  // The checkpoint save (planner/save_phase.h); a plan whose save does not fit the node's host RAM does
  // not fit (the run would die at its first save).
  SaveEstimate save;
};

struct SearchOptions {
  std::optional<int> stage;  // --stage fixes it
  std::optional<int> ep;     // --ep fixes the expert-parallel size (planner/expert_parallel.h)
  std::optional<Offload> offload_optimizer;  // fixed when given
  std::optional<Offload> offload_param;
  double memory_margin = 0.05;  // keep 5% of GPU memory free: allocator fragmentation headroom
  // --allow bf16-master: also try bf16 master weights, gradients and optimizer states
  // (ZeroConfig::bf16_master_weights / bf16_optimizer_states) at stages 1-3 with the optimizer on the
  // GPU. They change the numerics (updates rounded to bf16), so never searched unless allowed.
  bool allow_bf16_master = false;
  // ZeRO++ hpZ sizes tried at stage 3 (ZeroConfig::hpz_partition_size; --hpz N fixes one, --hpz auto tries
  // 1 and the GPUs per node on several nodes). DeepSpeed reads it at stage 3 only, so stages 0-2 run 1.
  std::vector<int> hpz_choices = {1};
  bool hpz_auto = false;  // --hpz auto: hpz_choices becomes planner/hpz.h hpz_candidates(cluster)
  // ZeRO++ qwZ / qgZ (--qwz, --qgz; planner/zeropp_quant.h): set on every stage-3 candidate. They change
  // the numerics (int8 weights in the forward and backward, int4 gradients), so never searched unless
  // asked; the reasons price them for multi-node stage-3 plans.
  bool qwz = false;
  bool qgz = false;
};

struct SearchResult {
  std::vector<Plan>
      best_per_stage;  // best plan of each searched stage (fits or, if none fits, the least-over)
  std::optional<Plan> recommendation;
  std::vector<std::string> reasons;  // plain sentences with numbers
  std::string no_fit_reason;         // when nothing fits
  int64_t candidates_evaluated = 0;
  // MoE models (planner/expert_parallel.h): the best plan without expert parallelism and the best with
  // it (any stage), for the reason comparing them; ep_refusal says why AutoEP was not searched.
  std::optional<Plan> best_without_ep, best_with_ep;
  std::string ep_refusal;
};

}  // namespace zeroplan::planner
