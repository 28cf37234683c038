#pragma once
// The time model (issue 4): compute, every collective DeepSpeed issues, overlap, offload.
#include <array>

#include "planner/model_stats.h"
#include "planner/op_model.h"
#include "planner/step_time.h"
#include "planner/zero_config.h"

namespace zeroplan::planner {

// Pure and allocation-free: the search calls it for every candidate.
StepTime estimate_time(const Workload& w, const ModelStats& s, const ZeroConfig& z);

// The operators of one micro-step exactly as estimate_time costs them (optimizer partition from the
// DeepSpeed runtime path, ZeRO-3's linear wrapper); --explain-time prints this table.
OpTable step_operator_table(const Workload& w, const ComputeStats& s, const ZeroConfig& z);

// Stage-3 all-gathers of one micro-step's forward and backward passes for a persistence threshold
// and reuse distance (DeepSpeed v0.16 rules, time_model.cpp); elem_bytes = 16-bit param size.
// Bucket sizes the search tries (elements): DeepSpeed's default 5e8 (runtime/zero/config.py), 2e8
// as in DeepSpeed's ZeRO tutorial configs, 5e7 for tight memory (DeepSpeed issues #3338/#724).
inline constexpr std::array<int64_t, 3> kSearchBucketSizes = {50'000'000, 200'000'000, 500'000'000};

// Fills s.comm: collective times on w.cluster for the messages the search issues. Called by
// compute_compute_stats; estimate_time falls back to computing when the cluster differs.
void fill_comm_cache(ComputeStats& s, const Workload& w);
bool comm_cache_matches(const CommCacheKey& k, const hw::ClusterSpec& c, int tp = 1);

// tp: AutoTP's size; the gathers run in the data-parallel group (comm_model.h data_parallel_topology).
Stage3Fetches compute_stage3_fetches(const ComputeStats& s, const hw::ClusterSpec& cluster,
                                     int64_t persistence_threshold, int64_t max_reuse_distance,
                                     int64_t elem_bytes, int tp = 1);

}  // namespace zeroplan::planner
