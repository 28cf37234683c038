#pragma once
// The search (issue 4): stage x offload x micro-batch x grad-accum x checkpointing x bucket sizes x
// overlap_comm; objective: highest tokens/s among plans that fit under the memory margin.
#include "planner/plan.h"
#include "planner/training_spec.h"

namespace zeroplan::planner {

// Evaluates one fully specified candidate (memory + time + throughput + fits).
Plan evaluate_plan(const Workload& w, const ModelStats& s, const ZeroConfig& z, double memory_margin);
SearchResult search(const Workload& w, const SearchOptions& opts);

}  // namespace zeroplan::planner
