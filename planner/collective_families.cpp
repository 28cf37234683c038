// DeepSpeed's collective calls by family; see collective_families.h.
#include "planner/collective_families.h"

#include <algorithm>
#include <cstring>
#include <functional>
#include <string>
#include <vector>

#include "common/checked.h"
#include "planner/ds_runtime_collectives.h"

namespace zeroplan::planner {

namespace {

CallFamilyId family_of(const CollectiveCall& c) {
  if (c.phase == kForward) return kStage3ForwardGathers;
  if (c.phase == kBackward) {
    if (c.kind == CollectiveKind::AllGather) return kStage3BackwardGathers;
    if (c.kind == CollectiveKind::ReduceScatter) return kStage3ReduceScatter;
    return kGradientReduction;
  }
  if (c.kind == CollectiveKind::AllReduce) return kStepScalars;
  // stage_1_and_2.py / bf16_optimizer.py all_gather_into_tensor_dp_groups vs stage3.py _post_step.
  return std::strcmp(c.caller, "all_gather_into_tensor_dp_groups") == 0 ? kStepEndGather : kPersistentGathers;
}

// The groups a step's ZeRO calls run in: the ZeRO group's topology `t`; ZeRO++ hpZ's secondary group
// (contiguous ranks, group size `sec.ranks`); qgZ's node group and its cross-node group of one rank per
// node (runtime/comm/coalesced_collectives.py all_to_all_quant_reduce: groups local_i and global_j).
struct Groups {
  CommTopology t, sec, node, across;
};

// The calls of `calls` whose micro_step is `micro` (-1: once per step), each priced on its group.
CallFamilies summarize(const std::vector<CollectiveCall>& calls, const Groups& g, int micro) {
  const CommTopology& t = g.t;
  const CommTopology& sec = g.sec;
  CallFamilies out;
  // A step repeats few distinct sizes (one per layer kind): price each once (busbw interpolation
  // takes a log2 per call).
  struct Priced {
    CollectiveKind kind;
    int64_t size;
    const CommTopology* group;  // one of g's members
    double time;
  };
  std::vector<Priced> seen;
  const auto time_of = [&](CollectiveKind k, int64_t size, const CommTopology& on) {
    for (const Priced& p : seen)
      if (p.kind == k && p.size == size && p.group == &on) return p.time;
    const double tm = collective_time_s(on, k, size);
    if (seen.size() < 64) seen.push_back({k, size, &on, tm});
    return tm;
  };
  for (const CollectiveCall& c : calls) {
    if (c.micro_step != micro) continue;
    // ZeRO++ qgZ's all-to-alls replace the gradient reduce-scatter (planner/zeropp_quant.h).
    const bool qgz_node = c.group == CallGroup::kQgzNode;
    const bool qgz_across = c.group == CallGroup::kQgzAcross;
    if (qgz_node || qgz_across) {
      CallFamily& f = out.f[static_cast<size_t>(kStage3ReduceScatter)];
      const CommTopology& on = qgz_node ? g.node : g.across;
      const double time = time_of(CollectiveKind::AllToAll, c.bytes, on);
      f.kind = CollectiveKind::AllToAll;
      if (f.calls == 0) f.first_s = time;
      f.last_s = time;
      ++f.calls;
      f.largest_bytes = std::max(f.largest_bytes, c.bytes);
      f.bus_bytes_per_rank += bus_bytes_per_rank(CollectiveKind::AllToAll, on.ranks, c.bytes);
      f.input_bytes += c.bytes;
      f.time_s += time;
      continue;
    }
    if (c.kind == CollectiveKind::AllToAll) continue;  // AutoEP: priced by planner/expert_parallel.h
    CallFamily& f = out.f[static_cast<size_t>(family_of(c))];
    // nccl-tests size: an all-gather's is its output (input x group); a reduce to one rank costs a
    // broadcast of the message (bus factor 1).
    const int64_t size = c.kind == CollectiveKind::AllGather ? checked_mul(c.bytes, c.group_size) : c.bytes;
    const CollectiveKind priced = c.to_one_rank ? CollectiveKind::Broadcast : c.kind;
    const bool secondary = c.group == CallGroup::kHpzSecondary;
    const CommTopology& on = secondary ? sec : t;
    const double time = time_of(priced, size, on);
    f.kind = c.kind;
    if (secondary) f.secondary_calls++;
    f.to_owner = f.to_owner || c.to_one_rank;
    if (f.calls == 0) f.first_s = time;
    f.last_s = time;
    ++f.calls;
    f.largest_bytes = std::max(f.largest_bytes, size);
    f.bus_bytes_per_rank += bus_bytes_per_rank(priced, on.ranks, size);
    f.input_bytes += c.bytes;
    f.time_s += time;
  }
  return out;
}

// once + first + (accum - 1) x later, family by family: the step's one-off calls, the first
// micro-step's, and those of each later micro-step (first_s from the first in issue order, last_s
// from the last).
CallFamilies combine(const CallFamilies& once, const CallFamilies& first, const CallFamilies& later,
                     int64_t accum) {
  CallFamilies out;
  const int64_t k = accum - 1;
  for (size_t i = 0; i < out.f.size(); ++i) {
    const CallFamily& a = once.f[i];
    const CallFamily& b = first.f[i];
    const CallFamily& c = later.f[i];
    CallFamily& o = out.f[i];
    const CallFamily& any = a.calls > 0 ? a : b.calls > 0 ? b : c;
    o.kind = any.kind;
    o.to_owner = a.to_owner || b.to_owner || c.to_owner;
    o.calls = a.calls + b.calls + k * c.calls;
    o.secondary_calls = a.secondary_calls + b.secondary_calls + k * c.secondary_calls;
    o.largest_bytes = std::max({a.largest_bytes, b.largest_bytes, k > 0 ? c.largest_bytes : 0});
    o.bus_bytes_per_rank = a.bus_bytes_per_rank + b.bus_bytes_per_rank + k * c.bus_bytes_per_rank;
    o.input_bytes = a.input_bytes + b.input_bytes + k * c.input_bytes;
    o.time_s = a.time_s + b.time_s + static_cast<double>(k) * c.time_s;
    o.first_s = b.calls > 0 ? b.first_s : a.calls > 0 ? a.first_s : c.first_s;
    o.last_s = a.calls > 0 ? a.last_s : (k > 0 && c.calls > 0) ? c.last_s : b.last_s;
  }
  return out;
}

// What the per-call list depends on (everything but micro-batch, sequence and checkpointing).
struct Key {
  const void* stats = nullptr;
  int64_t total_params = 0, trainable_params = 0;
  size_t model_hash = 0, cluster_hash = 0;
  int world = 0, nodes = 0, stage = 0, ep = 1, sp = 1, tp = 1, hpz = 1;
  int64_t rbs = 0, prefetch = 0, thr = 0, max_live = 0, reuse = 0, sub_group = 0, lora_rank = 0;
  int flags = 0;
  bool operator==(const Key&) const = default;
};

Key key_of(const Workload& w, const ModelStats& s, const ZeroConfig& z) {
  Key k;
  k.stats = &s;
  k.total_params = s.mem.total_params;
  k.trainable_params = s.mem.trainable_params;
  const auto mix = [](size_t h, size_t v) { return h ^ (v + 0x9e3779b97f4a7c15ULL + (h << 6) + (h >> 2)); };
  const std::hash<std::string> hs;
  k.model_hash = mix(hs(w.model.name), hs(w.model.model_type));
  const hw::ClusterSpec& c = w.cluster;
  k.cluster_hash =
      mix(mix(mix(hs(c.intra_node.name), hs(c.inter_node.name)), hs(c.gpu.name)),
          mix(std::hash<double>{}(c.intra_node.latency_us),
              mix(std::hash<double>{}(c.inter_node.latency_us),
                  mix(static_cast<size_t>(c.nics_per_node),
                      c.intra_node.busbw.points.size() * 131 + c.inter_node.busbw.points.size()))));
  k.world = c.world_size();
  k.nodes = c.nodes;
  k.stage = z.stage;
  k.ep = z.ep_size;
  k.sp = w.train.sequence_parallel;  // Ulysses SP: fp32 gradient reductions, stage 0's SP-group scalars
  k.tp = w.train.tensor_parallel;    // AutoTP: ZeRO's calls in world / tp ranks
  k.hpz = z.hpz(c.world_size());     // ZeRO++ hpZ: the secondary gathers' group
  k.rbs = z.reduce_bucket_size;
  k.prefetch = z.prefetch_bucket_size;
  k.thr = z.param_persistence_threshold;
  k.max_live = z.max_live_parameters;
  k.reuse = z.max_reuse_distance;
  k.sub_group = z.sub_group_size;
  k.lora_rank = w.train.lora_rank;
  k.flags = static_cast<int>(w.train.precision) | static_cast<int>(w.train.method) << 4 |
            static_cast<int>(w.train.deepspeed_version) << 8 | static_cast<int>(z.grad_accum_dtype) << 12 |
            static_cast<int>(z.moe_leaf) << 16 | static_cast<int>(w.train.moe_leaf) << 18 |
            int(z.use_multi_rank_bucket_allreduce) << 20 | int(z.reduce_scatter) << 21 |
            // overlap_comm orders stage 1's reduction (hooks); optimizer offload picks stage 1's wrapper
            // and stage 3's norm all-reduce dtype. Neither changes stage 2's or stage 0's calls.
            int(z.overlap_comm && z.stage == 1) << 22 |
            int(z.offload_optimizer != Offload::None && (z.stage == 1 || z.stage == 3)) << 23 |
            int(w.model.params_only) << 24 | int(z.seq_parallel_comm_fp32) << 25 |
            int(z.muon) << 26 |  // Muon's two param groups: two norms and two post-step gathers
            int(z.qwz()) << 27 | int(z.qgz(c.nodes)) << 28;  // ZeRO++ quantized gathers / reductions
  return k;
}

// The step's one-off calls, its first micro-step's and a later micro-step's, from a list of two
// micro-steps (the first of a longer run starts from the same fetch state, and every later one
// repeats the second).
struct Parts {
  CallFamilies once, first, later;
};

Parts parts_for(const Workload& w, const ModelStats& s, const ZeroConfig& z, const CommTopology& t) {
  // A small per-thread cache: the search's candidates share few distinct keys.
  struct Entry {
    Key key;
    Parts value;
  };
  thread_local std::vector<Entry> cache;
  thread_local size_t next = 0;
  constexpr size_t kEntries = 64;
  const Key k = key_of(w, s, z);
  for (const Entry& e : cache)
    if (e.key == k) return e.value;
  ZeroConfig two = z;
  two.grad_accum = 2;
  const std::vector<CollectiveCall> calls = deepspeed_collectives(w, s, two);
  // ZeRO++ hpZ's group: contiguous ranks (layout/parallel_layout.h GroupKind::ZeroSecondary); qgZ's: a
  // node's ranks, and the ranks of one local index across the nodes (strided by the GPUs per node, the
  // node's L such groups sharing its NICs, as data_parallel_topology prices AutoTP's strided groups).
  const int L = w.cluster.gpus_per_node;
  const Groups g{t, contiguous_group_topology(w.cluster, k.hpz), contiguous_group_topology(w.cluster, L),
                 data_parallel_topology(w.cluster, L)};
  const Parts v{summarize(calls, g, -1), summarize(calls, g, 0), summarize(calls, g, 1)};
  if (cache.size() < kEntries) {
    cache.push_back({k, v});
  } else {
    cache[next] = {k, v};
    next = (next + 1) % kEntries;
  }
  return v;
}

}  // namespace

CallFamilies deepspeed_call_families(const Workload& w, const ModelStats& s, const ZeroConfig& z,
                                     const CommTopology& t) {
  const Parts p = parts_for(w, s, z, t);
  return combine(p.once, p.first, p.later, std::max<int64_t>(1, z.grad_accum));
}

}  // namespace zeroplan::planner
