// Collective cost model; definitions and assumptions in comm_model.h.
#include "planner/comm_model.h"

#include <algorithm>

namespace zeroplan::planner {

// Names as nccl-tests spells its binaries (all_reduce_perf, reduce_scatter_perf, ...), used in the
// JSON contract and reports.
const char* collective_name(CollectiveKind k) {
  switch (k) {
    case CollectiveKind::AllReduce:
      return "all_reduce";
    case CollectiveKind::ReduceScatter:
      return "reduce_scatter";
    case CollectiveKind::AllGather:
      return "all_gather";
    case CollectiveKind::Broadcast:
      return "broadcast";
    case CollectiveKind::AllToAll:
      return "all_to_all";
  }
  return "unknown";
}

double bus_factor(CollectiveKind k, int n) {
  if (n <= 1) return 0.0;
  const double dn = static_cast<double>(n);
  switch (k) {
    case CollectiveKind::AllReduce:
      return 2.0 * (dn - 1.0) / dn;  // nccl-tests PERFORMANCE.md
    case CollectiveKind::ReduceScatter:
    case CollectiveKind::AllGather:
      return (dn - 1.0) / dn;
    case CollectiveKind::Broadcast:
      return 1.0;
    case CollectiveKind::AllToAll:
      return (dn - 1.0) / dn;  // nccl-tests PERFORMANCE.md (alltoall): each rank keeps 1/n of its S bytes
  }
  return 0.0;
}

int64_t bus_bytes_per_rank(CollectiveKind k, int n, int64_t s) {
  // Same integer expressions, in the same order, as exec::Communicator::count().
  if (n <= 1) return 0;
  const int64_t nn = n;
  switch (k) {
    case CollectiveKind::AllReduce:
      return 2 * (nn - 1) * s / nn;
    case CollectiveKind::ReduceScatter:
    case CollectiveKind::AllGather:
      return (nn - 1) * s / nn;
    case CollectiveKind::Broadcast:
      return s;
    case CollectiveKind::AllToAll:
      return (nn - 1) * s / nn;
  }
  return 0;
}

CommTopology topology_of(const hw::ClusterSpec& c) {
  CommTopology t;
  t.ranks = c.world_size();
  t.nodes = c.nodes;
  t.intra = &c.intra_node;
  t.inter = c.nodes > 1 ? &c.inter_node : nullptr;
  t.nics_per_node = std::max(1, c.nics_per_node);
  return t;
}

CommTopology data_parallel_topology(const hw::ClusterSpec& c, int tp) {
  CommTopology t = topology_of(c);
  if (tp <= 1) return t;
  t.ranks = std::max(1, c.world_size() / tp);
  t.nic_sharers = tp;
  return t;
}

CommTopology contiguous_group_topology(const hw::ClusterSpec& c, int ranks) {
  CommTopology t = topology_of(c);
  t.ranks = ranks;
  t.nodes = std::max(1, (ranks + c.gpus_per_node - 1) / std::max(1, c.gpus_per_node));
  if (t.nodes == 1) t.inter = nullptr;
  return t;
}

double collective_busbw_GBps(const CommTopology& t, int64_t s) {
  double bw = 0;
  // One node: the intra-node tier alone. Several nodes with one GPU each: the network alone.
  const bool intra_used = t.ranks > t.nodes;
  if (intra_used && t.intra != nullptr) bw = t.intra->busbw.busbw_at(s);
  if (t.inter != nullptr) {
    // Each of the k rings carries S/k bytes over its own NIC.
    const double k = static_cast<double>(t.nics_per_node);
    const double net = t.inter->busbw.busbw_at(static_cast<int64_t>(static_cast<double>(s) / k)) * k /
                       static_cast<double>(std::max(1, t.nic_sharers));
    bw = intra_used ? std::min(bw, net) : net;  // slowest tier bounds the ring
  }
  return bw;
}

double collective_time_s(const CommTopology& t, CollectiveKind k, int64_t s) {
  if (t.ranks <= 1 || s <= 0) return 0.0;
  double latency_s = 0;
  if (t.ranks > t.nodes && t.intra != nullptr) latency_s += t.intra->latency_us * 1e-6;
  if (t.inter != nullptr) latency_s += t.inter->latency_us * 1e-6;
  const double bw = collective_busbw_GBps(t, s);
  if (bw <= 0) return latency_s;  // a profile without a curve: only the latency is known
  const double transfer = static_cast<double>(s) * bus_factor(k, t.ranks) / (bw * 1e9);
  return std::max(latency_s, transfer);
}

}  // namespace zeroplan::planner
