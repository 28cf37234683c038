#pragma once
// Every collective call one DeepSpeed optimizer step issues, in issue order, per phase: what the
// conformance harness records (tests/deepspeed/fixtures, field "collectives") and what latency-bound
// collectives cost (call counts and sizes, not only bytes). Each rule cites the DeepSpeed function
// issuing the call (DeepSpeed 0.19.8 unless said otherwise; see ds_runtime.h for version rules).
//
// The time model (planner/time_model.cpp) keeps its own per-family CollectiveCost summary; this list
// is the per-call ground it can be checked against (and, later, built from).
#include <cstdint>
#include <vector>

#include "planner/memory_breakdown.h"
#include "planner/model_stats.h"
#include "planner/step_time.h"
#include "planner/zero_config.h"

namespace zeroplan::planner {

// The process group a ZeRO call runs in, where it is not the ZeRO (data-parallel) group: the time model
// prices each call on its group's topology (planner/collective_families.cpp).
enum class CallGroup : uint8_t {
  kZero,          // the ZeRO group (world / (TP x SP) ranks), or the model-parallel group a caller names
  kHpzSecondary,  // ZeRO++ hpZ: a gather of secondary partitions, in the hpZ group of contiguous ranks
  kQgzNode,       // ZeRO++ qgZ: all_to_all_quant_reduce's exchange within a node (group local_i)
  kQgzAcross,     // ZeRO++ qgZ: its exchange across nodes, one rank per node (group global_j)
};

struct CollectiveCall {
  Phase phase = kBackward;   // kForward, kBackward or kStep (the phase of the optimizer step it runs in)
  CollectiveKind kind = CollectiveKind::AllReduce;
  int64_t bytes = 0;         // this rank's input tensor (the harness's "bytes"; all-gather: the partition)
  int64_t elem_bytes = 2;    // element size of the communicated dtype
  int group_size = 1;
  const char* caller = "";   // the DeepSpeed function that issues it
  // dist.reduce to one rank (stage_1_and_2.py allreduce_bucket with `rank=dst`): the bytes of an
  // all-reduce, the result kept by one rank (nccl-tests' reduce: bus factor 1).
  bool to_one_rank = false;
  // The micro-step (0-based) of a call repeated every micro-step; -1 for a call issued once per
  // optimizer step (the step's own calls, stage 0/1's boundary reduction).
  int micro_step = -1;
  CallGroup group = CallGroup::kZero;
};

// One call of a model-parallel group (Ulysses SP's, AutoTP's), issued in micro-step `micro_step`.
inline CollectiveCall group_call(Phase phase, CollectiveKind kind, int64_t bytes, int64_t elem_bytes,
                                 int group_size, const char* caller, int micro_step) {
  CollectiveCall c;
  c.phase = phase;
  c.kind = kind;
  c.bytes = bytes;
  c.elem_bytes = elem_bytes;
  c.group_size = group_size;
  c.caller = caller;
  c.micro_step = micro_step;
  return c;
}

// The op name the conformance harness records: "all_reduce", "reduce", "reduce_scatter", "all_gather".
const char* call_op_name(const CollectiveCall& c);

// The calls of one optimizer step (grad_accum micro-steps) with the trace complete (a step after
// the first). Calls that carry no tensor payload of the model (sanity-check broadcasts of id lists)
// are included where DeepSpeed issues them in steady state. N = 1 issues the same calls (DeepSpeed
// does not skip a world of one except where cited).
std::vector<CollectiveCall> deepspeed_collectives(const Workload& w, const ModelStats& s, const ZeroConfig& z);

// Stage 1/2's grads_in_partition in elements, for rank 0 and for the rank holding the most: the
// trainable parameters in module.parameters() order are laid out in the flat buffer padded to 2N
// elements (stage_1_and_2.py nccl_start_alignment_factor x dp world size); rank r's partition is
// [r P, (r+1) P) with P = padded/N, and every parameter overlapping it is held whole
// (get_partition_info / copy_grads_in_partition). Invalid (zero) for models known by size only.
PartitionHoldings params_in_partition_numel(const Workload& w, const ModelStats& s);

// The communication time of these calls issued one after another (no overlap) on `t`: each call costs
// collective_time_s (comm_model.h) on its nccl-tests size S (all-gather: the input partition x group
// size; dist.reduce: bus factor 1, costed as a broadcast of S). Per-call latency is what makes many
// small calls (reduce_bucket_size 0, prefetch 0) expensive.
struct CommTopology;
double collectives_time_s(const CommTopology& t, const std::vector<CollectiveCall>& calls);

}  // namespace zeroplan::planner
