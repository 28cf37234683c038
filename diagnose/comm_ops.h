#pragma once
// The comms logger's op names (deepspeed/comm/comm.py: the name of the wrapped torch.distributed call),
// grouped by what ZeRO uses them for.
#include <cstdint>
#include <string>

#include "diagnose/run_log.h"

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

// Rows under 65 bytes are the scalar all-reduces of overflow checks and gradient norms (one fp32 or
// int64 element, or a few): not gradient or parameter traffic.
inline constexpr int64_t kScalarBytes = 65;

// The comms logger's calls of a row family, and their bytes, over the whole log.
struct CallTotals {
  int64_t calls = 0;
  double bytes = 0;
};
inline CallTotals call_totals(const RunLog& log, bool (*pred)(const std::string&),
                              int64_t min_bytes = kScalarBytes) {
  CallTotals t;
  for (const auto& r : log.comms)
    if (pred(r.op) && r.message_bytes >= min_bytes) {
      t.calls += r.count;
      t.bytes += static_cast<double>(r.message_bytes) * static_cast<double>(r.count);
    }
  return t;
}

}  // namespace zeroplan::diagnose
