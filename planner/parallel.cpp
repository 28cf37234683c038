// The plan's parallel layout; see parallel.h.
#include "planner/parallel.h"

#include <algorithm>

namespace zeroplan::planner {

layout::LayoutFacts layout_facts(const Workload& w) {
  layout::LayoutFacts f;
  const models::ModelSpec& m = w.full_model();  // the heads as given, not one TP rank's share
  if (!m.params_only) {
    f.attention_heads = m.num_heads;
    f.kv_heads = m.num_kv_heads;
    f.routed_experts = m.num_experts;
  }
  f.seq_len = w.train.seq_len;
  return f;
}

layout::ParallelLayout layout_of(const Workload& w, const ZeroConfig& z) {
  // Expert parallelism is validated with the model's facts by planner/expert_parallel.h, whose
  // refusals name DeepSpeed's own rules; the layout only needs the group sizes here.
  return layout::ParallelLayout(std::max(1, w.cluster.nodes), std::max(1, w.cluster.gpus_per_node),
                                {std::max(1, w.train.tensor_parallel), std::max(1, w.train.sequence_parallel),
                                 std::max(1, z.ep_size), z.hpz(w.cluster.world_size())},
                                layout::LayoutFacts{});
}

int64_t data_parallel_size(const Workload& w) {
  return w.cluster.world_size() / std::max(1, w.train.sequence_parallel) /
         std::max(1, w.train.tensor_parallel);
}

int64_t deepspeed_batch_world(const Workload& w) {
  return w.cluster.world_size() / std::max(1, w.train.sequence_parallel);
}

}  // namespace zeroplan::planner
