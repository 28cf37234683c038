#pragma once
// Collective costing as pure functions: the seam where a measured table (zeroplan calibrate, or an
// astra-sim-like simulator) can replace the formula without touching the time model.
//
// Definitions (nccl-tests doc/PERFORMANCE.md): for a collective over n ranks on a message of S
// bytes (S = the full, unsharded buffer), algbw = S / t and busbw = algbw * factor with
//   all-reduce 2(n-1)/n,  reduce-scatter (n-1)/n,  all-gather (n-1)/n,  broadcast 1.
// Hence t = S * factor / busbw(S). busbw(S) comes from the link's measured/datasheet-derived curve
// (hw::BusBwCurve): small messages never reach link speed, which is how bucket sizes move time.
#include <cstdint>

#include "hwprofiles/cluster.h"
#include "planner/step_time.h"

namespace zeroplan::planner {

// nccl-tests bus factor for `n` ranks (0 when n <= 1: nothing is sent).
double bus_factor(CollectiveKind k, int n);

// Bytes one rank sends for one call on an S-byte message, with exactly the integer arithmetic of
// exec::Communicator::count() (executor/communicator.h), so predicted and counted volumes match.
int64_t bus_bytes_per_rank(CollectiveKind k, int n, int64_t message_bytes);

// The data-parallel group a ZeRO collective runs over. Assumptions, stated:
//  - one ring (NCCL's tree has the same bandwidth bound) spans all ranks; on one node it runs over
//    the intra-node link, across nodes it crosses the network once per node boundary;
//  - a multi-node ring is bound by its slowest tier: busbw = min(intra busbw, inter busbw). In a
//    ring every edge carries the same bytes and only one edge per ring leaves each node, so the NIC
//    is NOT divided among the node's GPUs; NCCL runs one ring (channel set) per NIC, so the network
//    tier's busbw is the link curve x nics_per_node (hw::ClusterSpec::nics_per_node, whose default
//    1 is the conservative case; DGX-class nodes have one NIC per GPU: pass --nics 8);
//  - latency: the tiers' latency terms add (one intra hop chain + one network hop chain).
struct CommTopology {
  int ranks = 1;
  int nodes = 1;
  const hw::LinkProfile* intra = nullptr;
  const hw::LinkProfile* inter = nullptr;  // null on one node
  int nics_per_node = 1;
  // Groups of this kind on a node that cross the network at the same time and share its NICs: tp for
  // the data-parallel groups of AutoTP (data_parallel_topology); 1 otherwise.
  int nic_sharers = 1;
};
CommTopology topology_of(const hw::ClusterSpec& c);
// The group ZeRO's collectives run in under AutoTP of `tp`: world / tp ranks of one TP index, strided by
// tp (layout/parallel_layout.h), on every node; the tp such groups run at once and share each node's
// NICs. tp = 1: topology_of(c).
CommTopology data_parallel_topology(const hw::ClusterSpec& c, int tp);
// A group of `ranks` contiguous ranks (AutoEP's expert groups, Ulysses SP groups: layout/parallel_layout.h
// builds both as consecutive ranks): on one node's link while it fits a node, else across the network.
CommTopology contiguous_group_topology(const hw::ClusterSpec& c, int ranks);

// Achieved busbw (GB/s, 1e9 bytes/s) for an S-byte message on the topology.
double collective_busbw_GBps(const CommTopology& t, int64_t message_bytes);

// Time of one call: max(latency, S * factor / busbw(S)). The latency is a floor, not an addend:
// busbw curves measured by nccl-tests are computed from times that already include the latency,
// so adding it again would double count; below the curve's first point the latency dominates.
double collective_time_s(const CommTopology& t, CollectiveKind k, int64_t message_bytes);

}  // namespace zeroplan::planner
