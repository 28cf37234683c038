// NVMe offload needs room on the drive: ZeRO-Infinity swaps the offloaded fp32 master weights, Adam
// states and (offload_param) 16-bit parameter partitions to files (deepspeed/runtime/swap_tensor/).
// A plan whose swapped bytes exceed the node's NVMe capacity does not fit.
#include <gtest/gtest.h>

#include "hwprofiles/cluster.h"
#include "models/model_spec.h"
#include "planner/memory_model.h"
#include "planner/model_stats.h"
#include "planner/search.h"

namespace zeroplan::planner {
namespace {

Workload workload(const char* model, const char* gpus, const hw::ClusterOverrides& ov = {}) {
  Workload w;
  w.model = models::load_model(model);
  w.cluster = hw::parse_cluster(gpus, ov);
  return w;
}

// Hand count: Llama-2-7B has Psi = 6,738,415,616 parameters (Meta's model card / transformers). With
// both offloads on NVMe each node stores 12 bytes (fp32 master, exp_avg, exp_avg_sq) + 2 bytes (bf16
// parameter) per parameter, split over its ranks: 14 x Psi = 94.34 GB, plus the per-parameter
// partition padding (none here: every Llama-2-7B tensor's numel is a multiple of 8), less the
// 16-bit copies of the small persistent parameters that stay whole on the GPU
// (stage3_param_persistence_threshold 1e5: the 65 norms, 2 x 32 x 4096 + 4096 = 266,240 elements);
// their fp32 master and Adam partitions are offloaded like every other parameter's.
TEST(NvmeCapacity, SwappedBytesAreTheOffloadedModelStates) {
  const Workload w = workload("7b", "8xA100-80GB");
  ZeroConfig z = ZeroConfig::deepspeed_defaults(3);
  z.offload_optimizer = Offload::NVMe;
  z.offload_param = Offload::NVMe;
  z.micro_batch = 1;
  const MemoryBreakdown m = estimate_memory(w, compute_model_stats(w), z);
  const double psi = 6'738'415'616.0;
  const double norms = 2.0 * 4096 * 32 + 4096;  // persistent: stay on the GPU, not swapped
  EXPECT_EQ(static_cast<double>(m.nvme_per_node), 12.0 * psi + 2.0 * (psi - norms));
  ZeroConfig cpu = z;
  cpu.offload_optimizer = Offload::CPU;
  cpu.offload_param = Offload::CPU;
  EXPECT_EQ(estimate_memory(w, compute_model_stats(w), cpu).nvme_per_node, 0);
}

// DeepSeek-V3 (671B) on one 8xH100 node needs ~9.4 TB of NVMe for its offloaded states: not with
// the default single 2 TB drive, but with a 30 TB array (DGX H100: 8 x 3.84 TB U.2, NVIDIA DGX H100
// datasheet) it fits, at NVMe speed.
TEST(NvmeCapacity, DeepSeekV3OnOneNodeNeedsTheSpace) {
  const SearchResult r = search(workload("deepseek-v3", "8xH100"), SearchOptions{});
  EXPECT_FALSE(r.recommendation.has_value());
  hw::ClusterOverrides big;
  big.nvme_bytes = 30'000'000'000'000;
  const SearchResult r2 = search(workload("deepseek-v3", "8xH100", big), SearchOptions{});
  ASSERT_TRUE(r2.recommendation.has_value());
  EXPECT_EQ(r2.recommendation->zero.offload_optimizer, Offload::NVMe);
  EXPECT_GT(r2.recommendation->memory.nvme_per_node, 8'000'000'000'000);
  EXPECT_LE(r2.recommendation->memory.nvme_per_node, 30'000'000'000'000);
}

}  // namespace
}  // namespace zeroplan::planner
