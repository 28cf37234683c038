// BusBwCurve::busbw_at: achieved all-reduce bus bandwidth for a message size, interpolated from
// measured (or modelled) nccl-tests points. busbw definition: nccl-tests doc/PERFORMANCE.md
// (busbw = algbw x 2(n-1)/n for all-reduce).
#include <cmath>

#include "hwprofiles/gpu_profile.h"

namespace zeroplan::hw {

double BusBwCurve::busbw_at(int64_t bytes) const {
  if (points.empty() || bytes <= 0) return 0.0;
  const auto& first = points.front();
  // Below the first point the collective is latency-bound: time is ~constant, so the achieved
  // bandwidth falls in proportion to the size (the left end of every nccl-tests table).
  if (bytes <= first.bytes)
    return first.busbw_GBps * static_cast<double>(bytes) / static_cast<double>(first.bytes);
  const auto& last = points.back();
  if (bytes >= last.bytes) return last.busbw_GBps;  // bandwidth-bound plateau
  // nccl-tests sweeps sizes geometrically (-f 2), so interpolate linearly in log2(bytes).
  const double lb = std::log2(static_cast<double>(bytes));
  for (size_t i = 0; i + 1 < points.size(); ++i) {
    const auto& a = points[i];
    const auto& b = points[i + 1];
    if (bytes >= a.bytes && bytes <= b.bytes) {
      const double la = std::log2(static_cast<double>(a.bytes));
      const double lbb = std::log2(static_cast<double>(b.bytes));
      const double t = lbb > la ? (lb - la) / (lbb - la) : 1.0;
      return a.busbw_GBps + t * (b.busbw_GBps - a.busbw_GBps);
    }
  }
  return last.busbw_GBps;  // unreachable with sorted points; kept for unsorted hand-built curves
}

}  // namespace zeroplan::hw
