#pragma once
// The search (issue 4): stage x offload x micro-batch x grad-accum x checkpointing x bucket sizes x
// overlap_comm; objective: highest tokens/s among plans that fit under the memory margin.
#include "planner/model_stats.h"
#include "planner/plan.h"
#include "planner/training_spec.h"

namespace zeroplan::planner {

// Evaluates one fully specified candidate (memory + time + throughput + fits).
Plan evaluate_plan(const Workload& w, const ModelStats& s, const ZeroConfig& z, double memory_margin);
// Without --global-batch the gradient accumulation is --grad-accum or 1 (never invented), and the
// micro-batch is searched (powers of two and the largest that fits) unless --micro-batch fixes it.
SearchResult search(const Workload& w, const SearchOptions& opts);
// Same, with the model statistics already computed (benchmarks, repeated searches).
SearchResult search(const Workload& w, const ModelStats& s, const SearchOptions& opts);
// The search without the reasons (the what-if evaluations behind the reasons use it).
SearchResult search_plans(const Workload& w, const ModelStats& s, const SearchOptions& opts);

}  // namespace zeroplan::planner
