// parse_cluster: the good/bad spec tables of issue 2, overrides, and the per-class defaults
// (network, NICs, host memory, NVMe) stated in hwprofiles/README.md.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <functional>
#include <limits>
#include <random>
#include <string>

#include "common/errors.h"
#include "hwprofiles/cluster.h"
#include "test_util.h"

namespace zeroplan::hw {
namespace {

constexpr int64_t kGiB = int64_t{1} << 30;

using zeroplan::testing::error_of;

struct GoodSpec {
  const char* spec;
  int nodes;
  int per_node;
  const char* gpu;
};
class ClusterGood : public ::testing::TestWithParam<GoodSpec> {};
TEST_P(ClusterGood, Parses) {
  const auto& p = GetParam();
  const auto c = parse_cluster(p.spec);
  EXPECT_EQ(c.nodes, p.nodes);
  EXPECT_EQ(c.gpus_per_node, p.per_node);
  EXPECT_EQ(c.world_size(), p.nodes * p.per_node);
  EXPECT_EQ(c.gpu.name, p.gpu);
  EXPECT_EQ(c.cpu_backend, std::string(p.gpu) == "CPU");
}
INSTANTIATE_TEST_SUITE_P(
    All, ClusterGood,
    ::testing::Values(GoodSpec{"4xA40", 1, 4, "A40"}, GoodSpec{"2x8xH100", 2, 8, "H100"},
                      GoodSpec{"A40", 1, 1, "A40"}, GoodSpec{"8xa100", 1, 8, "A100-80GB"},
                      GoodSpec{"4X3090", 1, 4, "RTX3090"}, GoodSpec{"4xRTX4090", 1, 4, "RTX4090"},
                      GoodSpec{"1x1xT4", 1, 1, "T4"}, GoodSpec{"  4xA40 ", 1, 4, "A40"},
                      GoodSpec{"16x8xh200", 16, 8, "H200"}, GoodSpec{"4xCPU", 1, 4, "CPU"},
                      GoodSpec{"2x2xcpu", 2, 2, "CPU"}, GoodSpec{"04xL4", 1, 4, "L4"},
                      GoodSpec{"12500x8xH100", 12500, 8, "H100"}));

struct BadSpec {
  const char* label;
  std::string spec;
  const char* expect;  // substring of the message
};
class ClusterBad : public ::testing::TestWithParam<BadSpec> {};
TEST_P(ClusterBad, RejectedWithOneClearLine) {
  const auto e = error_of([&] { parse_cluster(GetParam().spec); });
  EXPECT_NE(e.find(GetParam().expect), std::string::npos) << e;
  EXPECT_EQ(e.find('\n'), std::string::npos) << e;
  EXPECT_LT(e.size(), 400u) << e;
}
INSTANTIATE_TEST_SUITE_P(
    All, ClusterBad,
    ::testing::Values(
        BadSpec{"zero", "0xA40", "invalid --gpus '0xA40': counts must be at least 1"},
        BadSpec{"zero_nodes", "0x8xH100", "at least 1"},
        BadSpec{"trailing_x", "4xA40x", "invalid --gpus '4xA40x': unknown GPU 'A40x'; did you mean 'A40'?"},
        BadSpec{"leading_x", "x8xH100", "invalid --gpus 'x8xH100': it starts with 'x'"},
        BadSpec{"trailing_comma", "4xA40,", "invalid --gpus '4xA40,': it contains ','"},
        BadSpec{"mixed", "4xA40,4xH100", "mixed clusters are not supported"},
        BadSpec{"no_gpu", "4x", "no GPU type after the count"},
        BadSpec{"negative", "-2xA40", "positive whole numbers"},
        BadSpec{"fraction", "1.5xA40", "count '1.5' is not a positive whole number"},
        BadSpec{"exponent", "1e3xA40", "count '1e3' is not a positive whole number"},
        BadSpec{"typo", "4xA4O", "unknown GPU 'A4O'; did you mean 'A40'? (run `zeroplan gpus` for the list)"},
        BadSpec{"three_counts", "2x8x4xH100", "at most two counts"},
        BadSpec{"per_node_absurd", "70000xA40", "70000 GPUs per node"},
        BadSpec{"total_absurd", "20000x8xH100", "160000 GPUs in total"},
        BadSpec{"huge_digits", "99999999999xA40", "absurdly large"}, BadSpec{"empty", "", "empty --gpus"},
        BadSpec{"blank", "   ", "empty --gpus"}, BadSpec{"non_ascii", "4x\xE2\x82\xAC", "unknown GPU"},
        BadSpec{"control_chars",
                "4xA\x01"
                "40",
                "unknown GPU 'A?40'"},
        BadSpec{"too_long", std::string(5000, '4') + "xA40", "too long"},
        BadSpec{"missing_file", "8x/nonexistent/zp/profile.json", "does not exist"}),
    [](const auto& p) { return std::string(p.param.label); });

TEST(ClusterDefaults, LinksNetworksNicsAndHostMemoryFollowTheGpuClass) {
  const auto a40 = parse_cluster("4xA40");
  EXPECT_EQ(a40.intra_node.name, "pcie4");
  EXPECT_EQ(a40.inter_node.name, "eth-100");
  EXPECT_EQ(a40.host_memory_bytes_per_node, 512 * kGiB);  // profile's 4-GPU server, 4 GPUs
  EXPECT_DOUBLE_EQ(a40.nvme_GBps, 3.5);                   // one PCIe 3.0 x4 NVMe drive (Samsung 970 EVO Plus)
  EXPECT_FALSE(a40.cpu_backend);

  const auto a100 = parse_cluster("2x8xA100");
  EXPECT_EQ(a100.intra_node.name, "nvlink3");
  EXPECT_EQ(a100.inter_node.name, "ib-hdr-200");
  EXPECT_EQ(a100.nics_per_node, 8);
  EXPECT_EQ(a100.host_memory_bytes_per_node, int64_t{2} << 40);  // DGX A100 640GB: 2 TB

  const auto h100 = parse_cluster("2x8xH100");
  EXPECT_EQ(h100.inter_node.name, "ib-ndr-400");
  EXPECT_EQ(parse_cluster("2x8xH200").inter_node.name, "ib-ndr-400");
  // 1xH100: the DGX's 2 TiB for 8 GPUs scaled to one GPU = 256 GiB.
  EXPECT_EQ(parse_cluster("H100").host_memory_bytes_per_node, 256 * kGiB);
}

TEST(ClusterOverridesTest, ReplaceDefaultsAndAreValidated) {
  ClusterOverrides ov;
  ov.intra_link = "nvlink3-bridge";
  ov.inter_link = "roce-200";
  ov.host_memory_bytes = 64 * kGiB;
  ov.nvme_GBps = 7.0;
  ov.nics_per_node = 2;
  const auto c = parse_cluster("2x2xA40", ov);
  EXPECT_EQ(c.intra_node.name, "nvlink3-bridge");
  EXPECT_EQ(c.inter_node.name, "roce-200");
  EXPECT_EQ(c.host_memory_bytes_per_node, 64 * kGiB);
  EXPECT_DOUBLE_EQ(c.nvme_GBps, 7.0);
  EXPECT_EQ(c.nics_per_node, 2);

  ClusterOverrides bad_net;
  bad_net.inter_link = "ib-hdr-20";
  const auto e = error_of([&] { parse_cluster("2x8xA100", bad_net); });
  EXPECT_NE(e.find("--network: unknown link 'ib-hdr-20'; did you mean 'ib-hdr-200'?"), std::string::npos)
      << e;

  ClusterOverrides bad_intra;
  bad_intra.intra_link = "nvlink5000";
  EXPECT_NE(error_of([&] { parse_cluster("4xA40", bad_intra); }).find("--intra-link"), std::string::npos);

  ClusterOverrides nan_nvme;
  nan_nvme.nvme_GBps = std::numeric_limits<double>::quiet_NaN();
  EXPECT_NE(error_of([&] { parse_cluster("4xA40", nan_nvme); }).find("--nvme-bw"), std::string::npos);

  ClusterOverrides zero_host;
  zero_host.host_memory_bytes = 0;
  EXPECT_NE(error_of([&] { parse_cluster("4xA40", zero_host); }).find("--host-mem"), std::string::npos);

  ClusterOverrides nics;
  nics.nics_per_node = 0;
  EXPECT_NE(error_of([&] { parse_cluster("4xA40", nics); }).find("--nics"), std::string::npos);
}

TEST(ClusterCpu, ThreadRanksUseAConfigurableHostBudget) {
  const auto c = parse_cluster("4xCPU");
  EXPECT_TRUE(c.cpu_backend);
  EXPECT_EQ(c.gpu.memory_bytes, 8 * kGiB);
  EXPECT_EQ(c.intra_node.name, "host-shm");
  ClusterOverrides ov;
  ov.device_memory_bytes = 2 * kGiB;
  EXPECT_EQ(parse_cluster("4xCPU", ov).gpu.memory_bytes, 2 * kGiB);
  ov.device_memory_bytes = 1;
  EXPECT_NE(error_of([&] { parse_cluster("4xCPU", ov); }).find("--gpu-mem"), std::string::npos);
}

TEST(ClusterPath, ProfileFileInsteadOfAName) {
  const auto dir = std::filesystem::temp_directory_path() / "zp_cluster_xdir";
  std::filesystem::create_directories(dir);
  auto g = find_gpu("A40");
  g.name = "A40-lab";
  g.aliases.clear();
  g.calibrated = true;
  const auto path = (dir / "lab.json").string();
  std::ofstream(path) << gpu_to_json(g);
  const auto c = parse_cluster("8x" + path);  // the path itself contains an 'x'
  EXPECT_EQ(c.gpus_per_node, 8);
  EXPECT_EQ(c.gpu.name, "A40-lab");
  EXPECT_TRUE(c.gpu.calibrated);
  std::filesystem::remove_all(dir);
}

// Random short specs over the characters that matter (digits, x, signs, dots, commas, names):
// parse_cluster either returns a sane cluster or throws UserError, never anything else.
TEST(ClusterRobustness, RandomSpecsOnlySucceedSanelyOrRaiseUserError) {
  const std::string alphabet = "0123456789xX.-+ ,;AaHh4O0Cpu\xe2\x82\xac\x01";
  std::mt19937 rng(4242);
  int ok = 0;
  for (int i = 0; i < 20000; ++i) {
    std::string spec;
    const size_t len = rng() % 12;
    for (size_t k = 0; k < len; ++k) spec += alphabet[rng() % alphabet.size()];
    try {
      const auto c = parse_cluster(spec);
      ++ok;
      EXPECT_GE(c.nodes, 1) << spec;
      EXPECT_GE(c.gpus_per_node, 1) << spec;
      EXPECT_LE(static_cast<int64_t>(c.nodes) * c.gpus_per_node, 100000) << spec;
    } catch (const UserError&) {
    }
  }
  EXPECT_GT(ok, 0);  // some random specs ("4xA40"-like) are valid
}

}  // namespace
}  // namespace zeroplan::hw
