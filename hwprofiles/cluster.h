#pragma once
// ClusterSpec: how many nodes, how many GPUs of which profile per node, and the links between them.
// Parsed from "4xA40" (one node of 4), "2x8xH100" (2 nodes of 8), "4xCPU" (executor thread ranks).
#include <cstdint>
#include <optional>
#include <string>

#include "hwprofiles/gpu_profile.h"

namespace zeroplan::hw {

struct ClusterSpec {
  int nodes = 1;
  int gpus_per_node = 1;
  GpuProfile gpu;
  LinkProfile intra_node;                  // GPU<->GPU inside a node (defaults to gpu.intra_node)
  LinkProfile inter_node;                  // node<->node network (only used when nodes > 1)
  int64_t host_memory_bytes_per_node = 0;  // host RAM per node
  double nvme_GBps = 0;                    // NVMe read/write bandwidth per node, for ZeRO-Infinity
  int64_t nvme_bytes_per_node = 0;         // NVMe capacity per node that offload may fill
  bool cpu_backend = false;                // "NxCPU": the executor's thread ranks, not a real GPU cluster
  // Added by hwprofiles (backward compatible): inter-node NICs per node. Inter-node busbw per node
  // is inter_node.busbw × nics_per_node (NCCL drives one ring/channel set per NIC).
  int nics_per_node = 1;
  // True when the user named the network or the NIC count (--network, --nics); false when both are the
  // GPU profile's defaults, which the report then offers a what-if for (planner/reasons.cpp).
  bool network_stated = false;
  int world_size() const { return nodes * gpus_per_node; }
};

struct ClusterOverrides {
  std::optional<std::string> intra_link;     // --intra-link nvlink3|pcie4|...
  std::optional<std::string> inter_link;     // --network ib-hdr-200|...
  std::optional<int64_t> host_memory_bytes;  // --host-mem
  std::optional<double> nvme_GBps;           // --nvme-bw
  std::optional<int64_t> nvme_bytes;         // --nvme-capacity
  // Added by hwprofiles (backward compatible):
  std::optional<int> nics_per_node;            // --nics
  std::optional<int64_t> device_memory_bytes;  // --gpu-mem: replaces gpu.memory_bytes (MIG, CPU rank budget)
};

// Throws UserError for malformed specs ("0xA40", "4xA40x", "x8xH100", "4xA40,", "4xA4O").
ClusterSpec parse_cluster(const std::string& spec, const ClusterOverrides& overrides = {});

}  // namespace zeroplan::hw
