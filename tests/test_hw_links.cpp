// Link tiers and busbw curves: interpolation semantics on hand-built curves; every built-in curve is
// non-decreasing in message size and never above the link's unidirectional bandwidth x its bus
// factor bound; measured curves reproduce the cited nccl-tests tables; names resolve with typos.
#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <set>
#include <string>

#include "common/errors.h"
#include "hwprofiles/gpu_profile.h"
#include "test_util.h"

namespace zeroplan::hw {
namespace {

using zeroplan::testing::error_of;

TEST(BusBwCurve, InterpolatesInLog2BytesAndIsLatencyBoundBelowFlatAbove) {
  BusBwCurve c;
  c.points = {{1024, 1.0}, {4096, 3.0}, {16384, 4.0}};
  EXPECT_DOUBLE_EQ(c.busbw_at(1024), 1.0);
  EXPECT_DOUBLE_EQ(c.busbw_at(2048), 2.0);  // log2: halfway between 2^10 and 2^12
  EXPECT_DOUBLE_EQ(c.busbw_at(8192), 3.5);  // halfway between 2^12 and 2^14
  EXPECT_DOUBLE_EQ(c.busbw_at(512), 0.5);   // below the first point: proportional to size
  EXPECT_DOUBLE_EQ(c.busbw_at(1), 1.0 / 1024);
  EXPECT_DOUBLE_EQ(c.busbw_at(1 << 30), 4.0);  // flat above the last point
  EXPECT_DOUBLE_EQ(c.busbw_at(0), 0.0);
  EXPECT_DOUBLE_EQ(c.busbw_at(-7), 0.0);
  EXPECT_DOUBLE_EQ(BusBwCurve{}.busbw_at(1 << 20), 0.0);
}

TEST(LinkProfiles, TheTiersOfIssue2AreBuiltIn) {
  std::set<std::string> names;
  for (const auto& l : builtin_links()) names.insert(l.name);
  for (const char* n : {"nvlink2", "nvlink3", "nvlink4", "nvlink4-nvls", "pcie3", "pcie4", "pcie5",
                        "pcie3-nop2p", "pcie4-nop2p", "pcie5-nop2p", "ib-edr-100", "ib-hdr-200", "ib-ndr-400",
                        "roce-100", "roce-200", "eth-25", "eth-100", "host-shm",
                        // issue 14
                        "nvlink5", "nvlink4-400", "nvlink3-400", "nvlink-c2c", "xgmi-mi300", "ib-xdr-800", "roce-400"})
    EXPECT_TRUE(names.count(n)) << n;
}

TEST(LinkProfiles, EveryCurveIsMonotoneAndBoundedByTheLink) {
  for (const auto& l : builtin_links()) {
    SCOPED_TRACE(l.name);
    EXPECT_GT(l.unidirectional_GBps, 0);
    EXPECT_GT(l.latency_us, 0);
    EXPECT_FALSE(l.source.empty());
    ASSERT_FALSE(l.busbw.points.empty());
    const double bound = l.unidirectional_GBps * l.max_bus_factor;
    double prev = 0;
    // Every power of two and the midpoints (x1.5) between them, 1 B .. 64 GiB.
    for (int k = 0; k <= 36; ++k) {
      for (const double m : {1.0, 1.5}) {
        const auto bytes = static_cast<int64_t>(std::ldexp(m, k));
        const double bw = l.busbw.busbw_at(bytes);
        EXPECT_GE(bw, prev) << bytes;
        EXPECT_LE(bw, bound) << bytes;
        EXPECT_GT(bw, 0) << bytes;
        prev = bw;
      }
    }
    // Point-to-point links cannot exceed the wire rate; only NVLS may (in-switch reduction).
    if (l.name != "nvlink4-nvls") {
      EXPECT_EQ(l.max_bus_factor, 1.0);
    }
  }
}

TEST(LinkProfiles, MeasuredCurvesReproduceTheCitedTables) {
  // Azure/AI-benchmarking-guide ND_A100_v4_results.md (8x A100 SXM4): 1G -> 228.10, 8G -> 231.58, 1K -> 0.04.
  const auto a100 = find_link("nvlink3");
  EXPECT_FALSE(a100.curve_is_model);
  EXPECT_DOUBLE_EQ(a100.busbw.busbw_at(int64_t{1} << 30), 228.10);
  EXPECT_DOUBLE_EQ(a100.busbw.busbw_at(int64_t{8} << 30), 231.58);
  EXPECT_DOUBLE_EQ(a100.busbw.busbw_at(1024), 0.04);
  // ND_H200_v5_results.md (8x H200, NVLS): 1M -> 52.96, 8G -> 479.98.
  const auto nvls = find_link("nvlink4-nvls");
  EXPECT_DOUBLE_EQ(nvls.busbw.busbw_at(1 << 20), 52.96);
  EXPECT_DOUBLE_EQ(nvls.busbw.busbw_at(int64_t{8} << 30), 479.98);
}

TEST(LinkProfiles, ModelCurvesReachHalfPeakAtTheStatedHalfSize) {
  // ib-ndr-400: peak 47 GB/s (NVIDIA/nccl-tests#290), latency 20 us. Model busbw = B*S/(S+S_half),
  // S_half = alpha*B/2 = 20e-6 s * 47e9 B/s / 2 = 470,000 bytes -> busbw(470000) = 23.5 GB/s.
  // The curve is sampled every 4x and interpolated in log2, so allow 2%.
  const auto ndr = find_link("ib-ndr-400");
  EXPECT_TRUE(ndr.curve_is_model);
  EXPECT_NEAR(ndr.busbw.busbw_at(470000), 23.5, 0.02 * 23.5);
  // Large messages approach the peak: 16 GiB -> 47 * 2^34/(2^34 + 470000) = 46.9987.
  EXPECT_NEAR(ndr.busbw.busbw_at(int64_t{16} << 30), 47.0, 0.01);
  // ib-hdr-200 peaks at 24 GB/s per NIC (NVIDIA/nccl-tests#119: ~96 GB/s over 4 HDR NICs).
  EXPECT_NEAR(find_link("ib-hdr-200").busbw.busbw_at(int64_t{8} << 30), 24.0, 0.01);
}

TEST(LinkProfiles, FasterTiersAreFasterAtLargeMessages) {
  const int64_t gib = int64_t{1} << 30;
  const auto at = [&](const char* n) { return find_link(n).busbw.busbw_at(gib); };
  EXPECT_GT(at("nvlink4"), at("nvlink3"));
  EXPECT_GT(at("nvlink3"), at("nvlink2"));
  EXPECT_GT(at("nvlink2"), at("pcie5"));
  EXPECT_GT(at("pcie5"), at("pcie4"));
  EXPECT_GT(at("pcie4"), at("pcie3"));
  EXPECT_GT(at("pcie4"), at("pcie4-nop2p"));
  EXPECT_GT(at("pcie3"), at("pcie3-nop2p"));
  EXPECT_GT(at("ib-ndr-400"), at("ib-hdr-200"));
  EXPECT_GT(at("ib-hdr-200"), at("ib-edr-100"));
  EXPECT_GT(at("roce-200"), at("roce-100"));
  EXPECT_GT(at("eth-100"), at("eth-25"));
}

TEST(LinkLookup, AliasesAndTypos) {
  EXPECT_EQ(find_link("nvlink3-nvswitch").name, "nvlink3");
  EXPECT_EQ(find_link("NVLink4").name, "nvlink4");
  EXPECT_EQ(find_link("HDR").name, "ib-hdr-200");
  EXPECT_EQ(find_link("pcie4_shm").name, "pcie4-nop2p");
  const auto e = error_of([] { find_link("ib-hdr-20"); });
  EXPECT_NE(e.find("unknown link 'ib-hdr-20'; did you mean 'ib-hdr-200'?"), std::string::npos) << e;
  EXPECT_EQ(error_of([] { find_link("carrier-pigeon"); }).find("did you mean"), std::string::npos);
}

TEST(LinkJson, RoundTripsAndRejectsBadCurves) {
  for (const auto& l : builtin_links()) {
    const auto back = link_from_json("rt", link_to_json(l));
    EXPECT_EQ(back.name, l.name);
    EXPECT_EQ(back.kind, l.kind);
    EXPECT_EQ(back.max_bus_factor, l.max_bus_factor);
    EXPECT_EQ(back.curve_is_model, l.curve_is_model);
    ASSERT_EQ(back.busbw.points.size(), l.busbw.points.size());
    for (size_t i = 0; i < l.busbw.points.size(); ++i) {
      EXPECT_EQ(back.busbw.points[i].bytes, l.busbw.points[i].bytes);
      EXPECT_EQ(back.busbw.points[i].busbw_GBps, l.busbw.points[i].busbw_GBps);
    }
  }
  const std::string base =
      R"({"name": "x", "kind": "PCIe", "unidirectional_GBps": 10, "latency_us": 5, "source": "s", )";
  EXPECT_NE(error_of([&] { link_from_json("f", base + R"("busbw_points": []})"); }).find("busbw_points"),
            std::string::npos);
  EXPECT_NE(error_of([&] {
              link_from_json("f", base + R"("busbw_points": [[1024, 1], [1024, 2]]})");
            }).find("not larger"),
            std::string::npos);
  EXPECT_NE(error_of([&] {
              link_from_json("f",
                             base + R"("busbw_points": [[1024, 1]], "busbw_model": {"peak_busbw_GBps": 1}})");
            }).find("exactly one"),
            std::string::npos);
  EXPECT_NE(
      error_of([&] {
        link_from_json(
            "f",
            R"({"name": "x", "kind": "Smoke", "unidirectional_GBps": 1, "latency_us": 1, "source": "s", "busbw_points": [[1, 1]]})");
      }).find("\"kind\""),
      std::string::npos);
}

}  // namespace
}  // namespace zeroplan::hw
