#pragma once
// ZeRO++ hierarchical partitioning (hpZ) as DeepSpeed 0.19.8 runs it at stage 3:
// zero_optimization.zero_hpz_partition_size = H > 1 (runtime/zero/config.py; ZeRO++ paper,
// arXiv 2306.10209, section 3.2).
//  - Groups: consecutive global ranks, `range(i * H, (i + 1) * H)` (utils/groups.py
//    _create_zero_param_parallel_group, which asserts that H divides the world and clamps H to it):
//    layout/parallel_layout.h GroupKind::ZeroSecondary.
//  - Memory: whenever a parameter with no secondary copy is released (Init._partition ->
//    _partition_param_sec), DeepSpeed also keeps it split over the H ranks of its group: aligned_size / H
//    elements in the parameter's dtype, next to the primary 1/N partition. The optimizer step's _post_step
//    drops the trainable parameters' copies (stage3.py invalidate_secondary_tensor); frozen ones keep
//    theirs. planner/memory_model.cpp Stage3Policy::add_hpz_secondary.
//  - Collectives: a fetch gathers the parameters that have a secondary copy in the hpZ group (one
//    all_gather_coalesced) and the rest over the ZeRO group (partitioned_param_coordinator.py
//    __all_gather_params_). So in each step the first micro-step's forward gathers over all ranks, and
//    its backward and every later micro-step gather inside the hpZ group, on its intra-node link when H
//    is at most the GPUs per node (planner/ds_runtime_collectives.cpp stage3_fetch; priced by
//    planner/collective_families.cpp). The gradient reduce-scatter stays over all ranks (hpZ partitions
//    parameters only).
// qwZ / qgZ (zero_quantized_weights / zero_quantized_gradients) are planner/zeropp_quant.h's; their
// quantizer kernels need CUDA (unrecorded: docs/conformance-hpz.md).
#include <string>
#include <vector>

#include "planner/training_spec.h"

namespace zeroplan::planner {

// Why zeroplan cannot plan hpZ for `w` (one clause, without the flag), or "" when it can. The layout's
// rules (H divides the GPUs; not beside TP, SP or EP) are layout::validate's.
std::string hpz_refusal(const Workload& w);

// The sizes `--hpz auto` tries at stage 3: 1, and the GPUs per node on several nodes (ZeRO++'s own
// setting: the secondary group is a node, so the backward's gathers never leave it). Just {1} on one node
// or when hpz_refusal says no.
std::vector<int> hpz_candidates(const Workload& w);

}  // namespace zeroplan::planner
