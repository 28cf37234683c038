// Host-side parts of the cuda backend that need no GPU (so they run in CI): bf16 rounding, the
// offload tier's CPU AdamW, the GEMM-efficiency fit behind `zeroplan calibrate`, nccl-tests bus
// factors, the attention kernels' shared-memory sizes and tile choice. Expected values are computed by hand
// in the comments.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <iterator>
#include <random>
#include <string>
#include <vector>

#include "common/atomic_file.h"
#include "common/errors.h"
#include "executor/cuda/attention_tiles.h"
#include "executor/cuda/calibration.h"
#include "executor/cuda/host_adam.h"
#include "hwprofiles/cluster.h"

namespace zeroplan::exec::cuda {
namespace {

float from_bits(uint32_t u) {
  float f;
  std::memcpy(&f, &u, sizeof f);
  return f;
}

TEST(CudaHostBf16, RoundsToNearestEven) {
  // bf16 keeps the top 16 bits of an fp32: 1.0f = 0x3F800000 -> 0x3F80; -2.0f = 0xC0000000 -> 0xC000.
  EXPECT_EQ(float_to_bf16_bits(1.0f), 0x3F80);
  EXPECT_EQ(float_to_bf16_bits(-2.0f), 0xC000);
  // bf16 has 7 stored mantissa bits: the spacing at 1 is 2^-7. 1 + 2^-8 is exactly halfway between
  // 1 (0x3F80, even) and 1 + 2^-7 (0x3F81, odd): ties go to even -> 0x3F80.
  EXPECT_EQ(float_to_bf16_bits(1.0f + 0.00390625f), 0x3F80);
  // 1 + 3*2^-8 is halfway between 0x3F81 (odd) and 0x3F82 (even) -> 0x3F82.
  EXPECT_EQ(float_to_bf16_bits(1.0f + 3 * 0.00390625f), 0x3F82);
  // Just above the halfway point rounds up: 1 + 2^-8 + 2^-20 -> 0x3F81.
  EXPECT_EQ(float_to_bf16_bits(from_bits(0x3F808000u + 8u)), 0x3F81);
  // NaN stays NaN (exponent all ones, mantissa non-zero).
  const uint16_t nan = float_to_bf16_bits(std::nanf(""));
  EXPECT_EQ(nan & 0x7F80, 0x7F80);
  EXPECT_NE(nan & 0x007F, 0);
  EXPECT_EQ(bf16_bits_to_float(0x3F80), 1.0f);
  EXPECT_EQ(bf16_bits_to_float(0xC000), -2.0f);
}

AdamChunk chunk_of(std::vector<float>& p, std::vector<float>& g, std::vector<float>& m,
                   std::vector<float>& v) {
  AdamChunk c;
  c.param = p.data();
  c.grad = g.data();
  c.exp_avg = m.data();
  c.exp_avg_sq = v.data();
  c.n = static_cast<int64_t>(p.size());
  return c;
}

TEST(CudaHostAdam, FirstStepsByHand) {
  // p = 1, constant g = 0.5, lr = 0.1, betas (0.9, 0.999), eps 1e-8, no weight decay.
  // Step 1: m = 0.05, v = 0.00025; m/(1-0.9) = 0.5, v/(1-0.999) = 0.25, sqrt = 0.5:
  //   p = 1 - 0.1 * 0.5 / (0.5 + 1e-8) = 0.9 (to 2e-9).
  // Step 2: m = 0.095, v = 0.00049975; bias corrections 0.19 and 0.001999 give again 0.5 and 0.25:
  //   p = 0.8. Step 3 likewise: p = 0.7 (a constant gradient moves Adam by lr per step).
  std::vector<float> p{1.0f}, g{0.5f}, m{0.0f}, v{0.0f};
  AdamParams a;
  a.lr = 0.1f;
  a.beta1 = 0.9f;
  a.beta2 = 0.999f;
  a.eps = 1e-8f;
  const float expected[3] = {0.9f, 0.8f, 0.7f};
  for (int s = 1; s <= 3; ++s) {
    a.step = s;
    host_adam_range(chunk_of(p, g, m, v), a, 0, 1, nullptr);
    EXPECT_NEAR(p[0], expected[s - 1], 2e-6f) << "step " << s;
  }
  EXPECT_NEAR(m[0], 0.1355f, 1e-6f);  // 0.9*0.095 + 0.05
}

TEST(CudaHostAdam, DecoupledWeightDecayAndGradScale) {
  // AdamW: p (1 - lr wd) first: 1 * (1 - 0.1 * 0.1) = 0.99, then the step of lr = 0.1 -> 0.89.
  // grad_scale 0.25 on g = 2 gives the same 0.5 as above (the step size does not depend on |g|).
  std::vector<float> p{1.0f}, g{2.0f}, m{0.0f}, v{0.0f};
  AdamParams a;
  a.lr = 0.1f;
  a.weight_decay = 0.1f;
  a.grad_scale = 0.25f;
  a.step = 1;
  uint16_t out = 0;
  host_adam_range(chunk_of(p, g, m, v), a, 0, 1, &out);
  EXPECT_NEAR(p[0], 0.89f, 2e-6f);
  EXPECT_NEAR(m[0], 0.05f, 1e-7f);  // (1 - 0.9) * 0.5
  EXPECT_EQ(out, float_to_bf16_bits(p[0]));
}

TEST(CudaHostAdam, ThreadedSplitMatchesOneThread) {
  // The threaded version must update every element exactly once, with the same arithmetic.
  const int64_t n = 1'000'003;  // not a multiple of any thread count
  std::mt19937 rng(7);
  std::normal_distribution<float> d(0.f, 1.f);
  std::vector<float> p(n), g(n), m(n), v(n);
  for (int64_t i = 0; i < n; ++i) {
    p[i] = d(rng);
    g[i] = d(rng);
    m[i] = 0.1f * d(rng);
    v[i] = std::abs(d(rng));
  }
  auto p2 = p, g2 = g, m2 = m, v2 = v;
  AdamParams a;
  a.step = 5;
  a.weight_decay = 0.01f;
  std::vector<uint16_t> o1(n), o2(n);
  host_adam_range(chunk_of(p, g, m, v), a, 0, n, o1.data());
  host_adam_parallel(chunk_of(p2, g2, m2, v2), a, 0, n, o2.data(), 7);
  EXPECT_EQ(p, p2);
  EXPECT_EQ(m, m2);
  EXPECT_EQ(v, v2);
  EXPECT_EQ(o1, o2);
}

TEST(CudaHostCalibration, GemmFitRecoversTheModel) {
  // Points on eff(f) = 0.8 f / (f + 2): f = 0.5 -> 0.16, 2 -> 0.4, 8 -> 0.64, 32 -> 0.752941...
  std::vector<std::pair<double, double>> pts;
  for (double f : {0.5, 2.0, 8.0, 32.0, 128.0}) pts.emplace_back(f, 0.8 * f / (f + 2.0));
  EXPECT_NEAR(pts[0].second, 0.16, 1e-12);
  EXPECT_NEAR(pts[2].second, 0.64, 1e-12);
  const GemmEfficiencyFit fit = fit_gemm_efficiency(pts);
  EXPECT_NEAR(fit.max_efficiency, 0.8, 1e-9);
  EXPECT_NEAR(fit.half_efficiency_gflop, 2.0, 1e-8);
  EXPECT_LT(fit.rms_relative_residual, 1e-9);
  EXPECT_EQ(fit.points, 5);
}

// The points `zeroplan calibrate --quick` measured on the H200 machine on 2026-11-26
// (docs/validation.md; TFLOP/s over the datasheet's 989.5). The unweighted fit of 1/eff on 1/f was
// pulled by the 256^3 GEMM (3.4 TFLOP/s, launch-bound) to E = 1.10 and a 29% rms residual: a profile
// zeroplan then refused. Hand check of the weighted fit (numpy.linalg.lstsq with weights 1/y^2 on
// the same points): E = 0.834, H = 6.28 GFLOP, rms 0.129.
TEST(CudaHostCalibration, GemmFitOnTheMeasuredH200PointsIsAProfileZeroplanAccepts) {
  const double peak = 989.5;
  const std::vector<std::pair<double, double>> pts = {
      {0.0336, 3.4 / peak},   {2.15, 251.8 / peak},   {137.44, 796.2 / peak}, {1099.51, 788.8 / peak},
      {137.44, 794.1 / peak}, {369.37, 770.8 / peak}, {369.37, 821.9 / peak}};
  const GemmEfficiencyFit fit = fit_gemm_efficiency(pts);
  EXPECT_NEAR(fit.max_efficiency, 0.834, 0.002);
  EXPECT_NEAR(fit.half_efficiency_gflop, 6.28, 0.02);
  EXPECT_NEAR(fit.rms_relative_residual, 0.129, 0.002);
  EXPECT_FALSE(fit.capped_at_peak);
}

TEST(CudaHostCalibration, GemmFitAboveThePeakIsHeldAtThePeak) {
  // Points on eff(f) = 1.2 f / (f + 2): a card faster than its datasheet. E is held at 1 and H refit.
  std::vector<std::pair<double, double>> pts;
  for (double f : {0.5, 2.0, 8.0, 32.0, 128.0}) pts.emplace_back(f, 1.2 * f / (f + 2.0));
  const GemmEfficiencyFit fit = fit_gemm_efficiency(pts);
  EXPECT_TRUE(fit.capped_at_peak);
  EXPECT_DOUBLE_EQ(fit.max_efficiency, 1.0);
  EXPECT_GT(fit.half_efficiency_gflop, 0.0);
}

TEST(CudaHostCalibration, GemmFitRejectsDegenerateInput) {
  EXPECT_THROW(fit_gemm_efficiency({{1.0, 0.5}}), UserError);
  EXPECT_THROW(fit_gemm_efficiency({{1.0, 0.5}, {1.0, 0.6}}), UserError);  // one distinct size
  EXPECT_THROW(fit_gemm_efficiency({{1.0, 0.5}, {2.0, -0.1}}), UserError);
}

TEST(CudaHostCalibration, NcclTestsBusFactors) {
  // doc/PERFORMANCE.md: all-reduce 2(n-1)/n, reduce-scatter and all-gather (n-1)/n.
  EXPECT_DOUBLE_EQ(bus_factor(CollKind::AllReduce, 8), 1.75);
  EXPECT_DOUBLE_EQ(bus_factor(CollKind::AllReduce, 2), 1.0);
  EXPECT_DOUBLE_EQ(bus_factor(CollKind::ReduceScatter, 4), 0.75);
  EXPECT_DOUBLE_EQ(bus_factor(CollKind::AllGather, 8), 0.875);
  EXPECT_DOUBLE_EQ(bus_factor(CollKind::AllReduce, 1), 0.0);
}

TEST(CudaHostCalibration, ShapesCoverSmallAndLarge) {
  // The fit needs sizes on both sides of the half-efficiency point (a few GFLOP on Hopper).
  for (bool quick : {true, false}) {
    double lo = 1e30, hi = 0;
    for (const auto& s : calibration_gemm_shapes(quick)) {
      lo = std::min(lo, s.flops() / 1e9);
      hi = std::max(hi, s.flops() / 1e9);
      EXPECT_EQ(s.lda, s.trans_a ? s.m : s.k);
      EXPECT_EQ(s.ldb, s.trans_b ? s.k : s.n);
    }
    EXPECT_LT(lo, 0.1);   // 256^3 * 2 = 0.034 GFLOP
    EXPECT_GT(hi, 500.);  // 8192^3 * 2 = 1100 GFLOP
  }
}

TEST(CudaHostCalibration, ProfileIsAcceptedByGpus) {
  // Synthetic inputs (not measurements): what calibrate would have found on some H200.
  CalibrationMeasurements m;
  m.stamp = "test";
  m.memory_total_bytes = 150'000'000'000;
  m.baseline_used_bytes = 600'000'000;
  m.gemm = fit_gemm_efficiency({{0.5, 0.8 * 0.5 / 2.5}, {2.0, 0.4}, {8.0, 0.64}});
  m.device_copy_GBps = 4000;
  m.pinned_h2d_GBps = 50;
  m.pinned_d2h_GBps = 48;
  m.pageable_h2d_GBps = 20;
  m.pageable_d2h_GBps = 25;
  m.gpus = 2;
  CollectiveSample big, small;
  big.bytes = int64_t{1} << 30;
  big.seconds = 0.01;
  big.busbw_GBps = 150;
  small.bytes = 1024;
  small.seconds = 20e-6;
  small.busbw_GBps = 0.05;
  m.all_reduce = {big, small};  // out of order on purpose
  const hw::GpuProfile base = hw::find_gpu("H200");
  const hw::GpuProfile g = calibrated_profile(base, m);
  EXPECT_EQ(g.name, base.name + "-calibrated");
  EXPECT_TRUE(g.calibrated);
  EXPECT_NEAR(g.hbm_efficiency, 4000.0 / base.hbm_GBps, 1e-12);
  EXPECT_EQ(g.host_pinned_GBps, 48);  // the slower direction
  EXPECT_EQ(g.host_pageable_GBps, 20);
  EXPECT_NEAR(g.intra_node.latency_us, 20.0, 1e-9);  // the smallest all-reduce's time
  ASSERT_EQ(g.intra_node.busbw.points.size(), 2u);
  EXPECT_EQ(g.intra_node.busbw.points[0].bytes, 1024);  // sorted by size

  // Written as calibrate writes it, read back the way `--gpus 1x<file>` reads it.
  const auto path =
      (std::filesystem::temp_directory_path() / "zeroplan_test_calibrated_profile.json").string();
  write_file_atomically(path, hw::gpu_to_json(g), true);
  const hw::ClusterSpec c = hw::parse_cluster("1x" + path);
  std::filesystem::remove(path);
  EXPECT_EQ(c.world_size(), 1);
  EXPECT_EQ(c.gpu.name, g.name);
  EXPECT_EQ(c.gpu.memory_bytes, 150'000'000'000);
  EXPECT_NEAR(c.gpu.gemm_max_efficiency, 0.8, 1e-9);
  EXPECT_NEAR(c.gpu.gemm_half_efficiency_gflop, 2.0, 1e-8);
  EXPECT_EQ(c.gpu.cuda_context_bytes, 600'000'000);
  EXPECT_TRUE(c.gpu.calibrated);
  EXPECT_EQ(c.gpu.bf16_tflops, base.bf16_tflops);  // datasheet peaks kept

  CalibrationMeasurements empty;
  EXPECT_THROW(calibrated_profile(base, empty), UserError);
}

// ---- attention tiles (attention_tiles.h) ----
// Per-block opt-in shared memory (CUDA C++ Programming Guide, technical specifications per compute
// capability): sm_86/sm_89 (A40, L40S) 99 KB, sm_80 (A100) 163 KB, sm_90 (H100/H200) 227 KB.
constexpr int64_t kSm86Optin = 99 * 1024;   // 101376
constexpr int64_t kSm80Optin = 163 * 1024;  // 166912
constexpr int64_t kSm90Optin = 227 * 1024;  // 232448

// Layout formula (R tile rows, D head dim; bytes):
//   bf = R (D + 8) 2, s = R (R + 4) 4, p = R (R + 8) 2, o = R (D + 4) 4, stats = 4 R
//   forward  = 3 bf + s + p + o + 2 stats
//   backward = 4 bf + max(2 s, o) + 2 p + 2 o + 2 stats
TEST(CudaHostAttentionTiles, SharedMemoryBytesByHand) {
  using P = AttentionPass;
  // D 64, R 64: bf 64*72*2 = 9216, s 64*68*4 = 17408, p 64*72*2 = 9216, o 64*68*4 = 17408, stats 256.
  //   fwd 27648 + 17408 + 9216 + 17408 + 512 = 72192; bwd 36864 + 34816 + 18432 + 34816 + 512 = 125440.
  EXPECT_EQ(attention_smem_bytes(P::Forward, 64, 64), 72192);
  EXPECT_EQ(attention_smem_bytes(P::Backward, 64, 64), 125440);
  // D 64, R 32: bf 32*72*2 = 4608, s 32*36*4 = 4608, p 32*40*2 = 2560, o 32*68*4 = 8704, stats 128.
  //   fwd 13824 + 4608 + 2560 + 8704 + 256 = 29952; bwd 18432 + max(9216, 8704) + 5120 + 17408 + 256 = 50432.
  EXPECT_EQ(attention_smem_bytes(P::Forward, 64, 32), 29952);
  EXPECT_EQ(attention_smem_bytes(P::Backward, 64, 32), 50432);
  // D 128, R 64: bf 64*136*2 = 17408, s 17408, p 9216, o 64*132*4 = 33792.
  //   fwd 52224 + 17408 + 9216 + 33792 + 512 = 113152 (110.5 KB: over the A40's 99 KB);
  //   bwd 69632 + max(34816, 33792) + 18432 + 67584 + 512 = 190976 (186.5 KB: over the A100's 163 KB).
  EXPECT_EQ(attention_smem_bytes(P::Forward, 128, 64), 113152);
  EXPECT_EQ(attention_smem_bytes(P::Backward, 128, 64), 190976);
  // D 128, R 32: bf 32*136*2 = 8704, s 4608, p 2560, o 32*132*4 = 16896 (the dQ tile is larger than
  //   the two score tiles it reuses, 9216, so the region grows to 16896).
  //   fwd 26112 + 4608 + 2560 + 16896 + 256 = 50432; bwd 34816 + 16896 + 5120 + 33792 + 256 = 90880
  //   (88.75 KB: fits 99 KB).
  EXPECT_EQ(attention_smem_bytes(P::Forward, 128, 32), 50432);
  EXPECT_EQ(attention_smem_bytes(P::Backward, 128, 32), 90880);
  // D 256, R 64: bf 64*264*2 = 33792, s 17408, p 9216, o 64*260*4 = 66560.
  //   fwd 101376 + 17408 + 9216 + 66560 + 512 = 195072; bwd 135168 + 66560 + 18432 + 133120 + 512 = 353792.
  EXPECT_EQ(attention_smem_bytes(P::Forward, 256, 64), 195072);
  EXPECT_EQ(attention_smem_bytes(P::Backward, 256, 64), 353792);
  // D 256, R 32: bf 32*264*2 = 16896, s 4608, p 2560, o 32*260*4 = 33280.
  //   fwd 50688 + 4608 + 2560 + 33280 + 256 = 91392; bwd 67584 + 33280 + 5120 + 66560 + 256 = 172800.
  EXPECT_EQ(attention_smem_bytes(P::Forward, 256, 32), 91392);
  EXPECT_EQ(attention_smem_bytes(P::Backward, 256, 32), 172800);
}

TEST(CudaHostAttentionTiles, LargestTileThatFitsEachGpu) {
  using P = AttentionPass;
  struct Case {
    int64_t d, optin;
    int fwd, bwd;  // expected tile rows from the byte counts above (0 = nothing fits)
  };
  const Case cases[] = {
      // D 64: fwd 72192 fits everywhere; bwd 125440 > 101376 -> 32 rows (50432) on sm_86.
      {64, kSm86Optin, 64, 32},
      {64, kSm80Optin, 64, 64},
      {64, kSm90Optin, 64, 64},
      // D 128: fwd 113152 > 101376 -> 32 rows (50432) on sm_86; bwd 190976 > 166912 -> 32 rows (90880)
      // on sm_80 and sm_86; everything at 64 rows on sm_90 (190976 <= 232448).
      {128, kSm86Optin, 32, 32},
      {128, kSm80Optin, 64, 32},
      {128, kSm90Optin, 64, 64},
      // D 256 (not instantiated; the rule alone): fwd 195072 fits only sm_90, else 32 rows (91392);
      // bwd 172800 even at 32 rows: over 166912 and 101376 -> none; sm_90 -> 32 rows.
      {256, kSm86Optin, 32, 0},
      {256, kSm80Optin, 32, 0},
      {256, kSm90Optin, 64, 32},
  };
  for (const Case& c : cases) {
    EXPECT_EQ(attention_tile_rows_for(P::Forward, c.d, c.optin), c.fwd)
        << "D " << c.d << " optin " << c.optin;
    EXPECT_EQ(attention_tile_rows_for(P::Backward, c.d, c.optin), c.bwd)
        << "D " << c.d << " optin " << c.optin;
  }
  // Exactly at the limit fits; one byte under does not.
  EXPECT_EQ(attention_tile_rows_for(P::Backward, 128, 190976), 64);
  EXPECT_EQ(attention_tile_rows_for(P::Backward, 128, 190975), 32);
  EXPECT_EQ(attention_tile_rows_for(P::Backward, 128, 90879), 0);
}

TEST(CudaHostAttentionTiles, SectionsDoNotOverlapAndStayAligned) {
  for (const int64_t d : {16, 32, 64, 96, 128, 256})
    for (const int64_t rows : {32, 64}) {
      const AttentionSmemLayout l = attention_smem_layout(d, rows);
      SCOPED_TRACE("D " + std::to_string(d) + " rows " + std::to_string(rows));
      const int64_t fwd[] = {l.fwd_q, l.fwd_k, l.fwd_v, l.fwd_s,    l.fwd_p,
                             l.fwd_o, l.fwd_m, l.fwd_l, l.fwd_bytes};
      const int64_t fwd_size[] = {l.bf_tile, l.bf_tile, l.bf_tile, l.s_tile,
                                  l.p_tile,  l.o_tile,  l.stats,   l.stats};
      for (size_t i = 0; i + 1 < std::size(fwd); ++i) {
        EXPECT_EQ(fwd[i + 1] - fwd[i], fwd_size[i]) << "forward section " << i;
        EXPECT_EQ(fwd[i] % 128, 0) << "forward section " << i;
      }
      const int64_t bwd[] = {l.bwd_k,  l.bwd_v,  l.bwd_q,  l.bwd_do,  l.bwd_s,     l.bwd_dp,   l.bwd_p,
                             l.bwd_ds, l.bwd_dk, l.bwd_dv, l.bwd_lse, l.bwd_delta, l.bwd_bytes};
      for (size_t i = 0; i + 1 < std::size(bwd); ++i) {
        EXPECT_LE(bwd[i], bwd[i + 1]) << "backward section " << i;
        EXPECT_EQ(bwd[i] % 128, 0) << "backward section " << i;
      }
      // S and dP are adjacent; the dQ tile written over them (after dS is formed) ends before P.
      EXPECT_EQ(l.bwd_dp - l.bwd_s, l.s_tile);
      EXPECT_GE(l.bwd_p - l.bwd_dp, l.s_tile);
      EXPECT_GE(l.bwd_p - l.bwd_s, l.o_tile);
      EXPECT_EQ(l.bwd_bytes - l.bwd_delta, l.stats);
    }
}

}  // namespace
}  // namespace zeroplan::exec::cuda
