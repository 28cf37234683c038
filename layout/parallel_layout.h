#pragma once
// ParallelLayout: how a job's ranks divide into tensor-, sequence-, data- and expert-parallel groups,
// the one vocabulary the planner and the executor share (issue 25). It holds the sizes, the rank ->
// (node, local rank) map and the groups DeepSpeed 0.19.8 builds, and validates a layout once, before
// anything is costed, with one message per rule.
//
// Rank order, innermost (fastest-varying) first: TP, then SP, then DP.
//  - DeepSpeed builds TP and DP from a (data_parallel, tensor_parallel) mesh, so TP ranks are
//    contiguous and DP ranks strided by tp (deepspeed/utils/groups.py _init_tp_mesh_device /
//    _create_model_parallel; AutoTP calls it from runtime/tensor_parallel/tp_manager.py).
//  - Ulysses SP is a (data_parallel, sequence_parallel) mesh: contiguous SP blocks
//    (deepspeed/__init__.py initialize with mesh_param; runtime/sequence_parallel/parallel_state_sp.py).
//  - ZeRO partitions dense parameters over SP x DP (runtime/engine.py: the data-parallel group seen by
//    the ZeRO optimizer is the sequence-data-parallel group when SP > 1).
//  - Expert parallelism carves EP groups of contiguous ranks out of the ZeRO group and partitions the
//    experts' states over the expert-data-parallel group of the same slot in each block
//    (groups.py _create_expert_and_data_parallel, E+D order).
// Until the AutoTP issue lands, TP above 1 is refused (validate says so).
#include <cstdint>
#include <string>
#include <vector>

namespace zeroplan::layout {

// The facts about the model and run a layout is checked against (filled by the caller: this module
// knows no model types).
// -1 = unknown (a model known by size only, or a caller that checked the rule itself): its rules
// are skipped.
struct LayoutFacts {
  int64_t attention_heads = -1;
  int64_t kv_heads = -1;
  int64_t routed_experts = -1;  // 0 = a dense model
  int64_t seq_len = -1;
};

struct LayoutSizes {
  int tp = 1;  // tensor parallel (DeepSpeed AutoTP tensor_parallel.autotp_size)
  int sp = 1;  // sequence parallel (Ulysses sequence_parallel_size)
  int ep = 1;  // expert parallel (AutoEP autoep_size)
  // ZeRO++ hierarchical partitioning (zero_optimization.zero_hpz_partition_size, stage 3 only): ranks that
  // hold a secondary copy of the parameter partition between them (DeepSpeed clamps it to the world:
  // utils/groups.py _create_zero_param_parallel_group `min(group_size, world_size)`; the caller does too).
  int hpz = 1;
};

enum class GroupKind : uint8_t {
  TensorParallel,
  SequenceParallel,
  DataParallel,        // ranks holding the same TP and SP slice
  Zero,                // what ZeRO partitions dense parameters over: SP x DP
  ExpertParallel,      // contiguous blocks of ep ranks inside the ZeRO group
  ExpertDataParallel,  // the same slot of every EP block: what expert states are partitioned over
  // ZeRO++ hpZ: contiguous blocks of hpz global ranks (utils/groups.py _create_zero_param_parallel_group
  // builds `range(i * hpz, (i + 1) * hpz)` over the world), which gather from the secondary partition.
  ZeroSecondary
};
const char* group_name(GroupKind k);

struct Group {
  GroupKind kind = GroupKind::DataParallel;
  std::vector<int> ranks;  // ascending global ranks
  bool intra_node = true;  // every member on one node: the collective stays on the intra-node link
  int size() const { return static_cast<int>(ranks.size()); }
};

class ParallelLayout {
 public:
  // Every rank a data-parallel rank: the layout of every plan before TP/SP/EP.
  ParallelLayout() = default;
  // Throws UserError (common/errors.h) naming the flag and the valid values when a rule is broken
  // (validate's messages); a layout that exists is valid.
  ParallelLayout(int nodes, int gpus_per_node, LayoutSizes sizes, const LayoutFacts& facts);

  int world() const { return nodes_ * gpus_per_node_; }
  int nodes() const { return nodes_; }
  int gpus_per_node() const { return gpus_per_node_; }
  int tp() const { return sizes_.tp; }
  int sp() const { return sizes_.sp; }
  int ep() const { return sizes_.ep; }
  int hpz() const { return sizes_.hpz; }
  int dp() const { return world() / (sizes_.tp * sizes_.sp); }
  // The size of the group ZeRO partitions dense parameters, gradients and optimizer states over.
  int zero() const { return dp() * sizes_.sp; }
  // The size of the group the experts' ZeRO states are partitioned over.
  int expert_dp() const { return zero() / sizes_.ep; }

  int node_of(int rank) const { return rank / gpus_per_node_; }
  int local_rank_of(int rank) const { return rank % gpus_per_node_; }

  // The group of `kind` that `rank` belongs to.
  Group group(GroupKind kind, int rank) const;

 private:
  int nodes_ = 1, gpus_per_node_ = 1;
  LayoutSizes sizes_;
};

// The reasons a layout is invalid, one message per broken rule, in checking order; empty when valid.
// `modelled_tp`: whether TP above 1 is modelled yet (false until the AutoTP issue); Ulysses SP is
// (planner/sequence_parallel.h).
std::vector<std::string> validate(int nodes, int gpus_per_node, const LayoutSizes& s, const LayoutFacts& f,
                                  bool modelled_tp = false);

}  // namespace zeroplan::layout
