// ModelStats for a workload; see model_stats.h.
#include "planner/model_stats.h"

#include "planner/ds_runtime_collectives.h"

namespace zeroplan::planner {

ModelStats compute_model_stats(const Workload& w) {
  ModelStats s{compute_memory_stats(w), compute_compute_stats(w)};
  s.mem.params_in_partition = params_in_partition_numel(w, s);
  return s;
}

}  // namespace zeroplan::planner
