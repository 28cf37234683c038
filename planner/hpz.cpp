// ZeRO++ hpZ's limits and candidates; see hpz.h.
#include "planner/hpz.h"

#include <algorithm>

namespace zeroplan::planner {

std::string hpz_refusal(const Workload& w) {
  if (w.model.params_only)
    return "hpZ's secondary partition is sized per parameter tensor; use --model instead of --params";
  // Recorded against 0.19.8 only (tests/deepspeed/fixtures-hpz): the coordinator's split of a fetch into
  // secondary and primary gathers is read from its partitioned_param_coordinator.py.
  if (w.train.deepspeed_version != DeepSpeedVersion::V0_19_8)
    return "hpZ is modelled as DeepSpeed 0.19.8 runs it (recorded in tests/deepspeed/fixtures-hpz); use "
           "--deepspeed-version 0.19.8";
  if (w.train.method == Method::QLoRA)
    return "the secondary partition of QLoRA's NF4 weights is not modelled; use --method full or lora";
  if (w.train.implementation == Implementation::ZeroplanEngine)
    return "zeroplan's native engine has no hpZ; plan it for DeepSpeed";
  return "";
}

std::vector<int> hpz_candidates(const Workload& w) {
  std::vector<int> out = {1};
  const int g = w.cluster.gpus_per_node;
  if (w.cluster.nodes > 1 && g > 1 && w.train.tensor_parallel <= 1 && hpz_refusal(w).empty())
    out.push_back(g);
  return out;
}

}  // namespace zeroplan::planner
