#pragma once
// The recommendation's reasons: a few plain sentences with numbers a user can check (why this stage
// beats the others, whether offload is needed, the largest micro-batch and what limits it, what to
// change to go faster), and, when nothing fits, why and what would fit.
#include <string>
#include <vector>

#include "planner/model_stats.h"
#include "planner/plan.h"
#include "planner/training_spec.h"

namespace zeroplan::planner {

// Fills result.reasons (and result.no_fit_reason when there is no recommendation). May evaluate a
// few extra plans (the next micro-batch, more GPUs, LoRA) to say what would change.
void explain(const Workload& w, const ModelStats& s, const SearchOptions& opts, SearchResult& result);

// One knob changed from `plan`, evaluated (memory, time, fits).
struct KnobEffect {
  std::string what;  // e.g. "overlap_comm on", "reduce_bucket_size 2e+08", "--grad-accum 4 (global batch 64)"
  Plan plan;
};
// Every one-knob variant of `plan`: overlap_comm flipped, the other reduce bucket sizes, 4x gradient
// accumulation (without a fixed global batch), the other checkpointing modes with their best
// micro-batch, a free micro-batch when it was fixed, stage-3 prefetch when off and the HF "auto"
// persistence threshold. `check` uses it to say what each knob of a user's config is worth.
std::vector<KnobEffect> knob_effects(const Workload& w, const ModelStats& s, const SearchOptions& opts,
                                     const Plan& plan);

// "ZeRO-2, micro-batch 4 x grad-accum 1, selective checkpointing, optimizer offload cpu, ..."
std::string describe_config(const ZeroConfig& z);

}  // namespace zeroplan::planner
