#pragma once
// The comms logger's op names (deepspeed/comm/comm.py: the name of the wrapped torch.distributed call),
// grouped by what ZeRO uses them for.
#include <string>

namespace zeroplan::diagnose {

// Gradient reductions: stages 1-2 all-reduce or reduce buckets, stage 3 reduce-scatters them.
inline bool is_reduction(const std::string& op) {
  return op == "all_reduce" || op == "reduce_scatter" || op == "reduce_scatter_tensor" ||
         op == "all_reduce_coalesced" || op == "reduce_scatter_coalesced" || op == "reduce";
}

// Parameter all-gathers (stage 3's fetches, stages 1-2's gather of the updated partitions).
inline bool is_gather(const std::string& op) {
  return op == "all_gather" || op == "all_gather_into_tensor" || op == "all_gather_coalesced" ||
         op == "allgather_fn";
}

}  // namespace zeroplan::diagnose
