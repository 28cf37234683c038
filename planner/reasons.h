#pragma once
// The recommendation's reasons: a few plain sentences with numbers a user can check (why this stage
// beats the others, whether offload is needed, the largest micro-batch and what limits it, what to
// change to go faster), and, when nothing fits, why and what would fit.
#include <string>

#include "planner/model_stats.h"
#include "planner/plan.h"
#include "planner/training_spec.h"

namespace zeroplan::planner {

// Fills result.reasons (and result.no_fit_reason when there is no recommendation). May evaluate a
// few extra plans (the next micro-batch, more GPUs, LoRA) to say what would change.
void explain(const Workload& w, const ModelStats& s, const SearchOptions& opts, SearchResult& result);

// "ZeRO-2, micro-batch 4 x grad-accum 1, selective checkpointing, optimizer offload cpu, ..."
std::string describe_config(const ZeroConfig& z);

}  // namespace zeroplan::planner
