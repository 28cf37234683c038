#include "executor/cuda/calibration.h"

#include <fmt/format.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstring>
#include <mutex>
#include <random>
#include <thread>

#include "common/errors.h"
#include "executor/cuda/cuda_backend.h"
#include "executor/cuda/cuda_check.h"
#include "executor/cuda/host_adam.h"

namespace zeroplan::exec::cuda {

GemmEfficiencyFit fit_gemm_efficiency(const std::vector<std::pair<double, double>>& points) {
  // Least squares of y = 1/eff on x = 1/f: y = a + b x with a = 1/E, b = H/E, each point weighted by
  // 1/y^2 so that the fit minimises relative residuals. Unweighted, the smallest GEMM (1/eff of
  // ~300 where the others are ~1.3) dominates the sums: on the H200 (docs/validation.md, 2026-11-26)
  // it gave E = 1.10 of the datasheet peak, H = 10.8 GFLOP and a 29% rms residual, a profile zeroplan
  // refuses; weighted, E = 0.83, H = 6.3, 13%.
  const auto n = static_cast<double>(points.size());
  if (points.size() < 2) throw UserError("GEMM efficiency fit needs at least two measured sizes");
  double sw = 0, sx = 0, sy = 0, sxx = 0, sxy = 0;
  for (const auto& [f, e] : points) {
    if (!(f > 0) || !(e > 0)) throw UserError("GEMM efficiency fit got a non-positive size or efficiency");
    const double x = 1.0 / f, y = 1.0 / e, w = 1.0 / (y * y);
    sw += w;
    sx += w * x;
    sy += w * y;
    sxx += w * x * x;
    sxy += w * x * y;
  }
  const double den = sw * sxx - sx * sx;
  if (!(std::abs(den) > 1e-300 * std::max(1.0, sw * sxx)))
    throw UserError("GEMM efficiency fit needs at least two distinct GEMM sizes");
  double b = (sw * sxy - sx * sy) / den;
  double a = (sy - b * sx) / sw;
  GemmEfficiencyFit fit;
  fit.points = static_cast<int>(points.size());
  if (!(a > 0)) throw UserError("GEMM efficiency fit failed (efficiency does not level off with size)");
  if (a < 1.0) {
    // E above the datasheet peak: the card's sustained rate is above its datasheet (or the sizes are
    // too few to see the plateau). The profile's efficiency is a fraction of that peak, at most 1:
    // hold E = 1 and refit H alone (weighted least squares of y - 1 = b x).
    a = 1.0;
    double num = 0, dd = 0;
    for (const auto& [f, e] : points) {
      const double x = 1.0 / f, y = 1.0 / e, w = 1.0 / (y * y);
      num += w * x * (y - 1.0);
      dd += w * x * x;
    }
    b = dd > 0 ? num / dd : 0.0;
    fit.capped_at_peak = true;
  }
  fit.max_efficiency = 1.0 / a;
  fit.half_efficiency_gflop = std::max(0.0, b / a);
  double ss = 0;
  for (const auto& [f, e] : points) {
    const double model = fit.max_efficiency * f / (f + fit.half_efficiency_gflop);
    ss += (model - e) * (model - e) / (e * e);
  }
  fit.rms_relative_residual = std::sqrt(ss / n);
  return fit;
}

double bus_factor(CollKind k, int n) {
  if (n <= 1) return 0.0;
  const double nn = n;
  switch (k) {
    case CollKind::AllReduce:
      return 2.0 * (nn - 1) / nn;
    case CollKind::ReduceScatter:
    case CollKind::AllGather:
      return (nn - 1) / nn;
    case CollKind::Broadcast:
      return 1.0;
    default:
      return 0.0;
  }
}

const char* coll_name(CollKind k) {
  switch (k) {
    case CollKind::AllReduce:
      return "all_reduce";
    case CollKind::ReduceScatter:
      return "reduce_scatter";
    case CollKind::AllGather:
      return "all_gather";
    case CollKind::Broadcast:
      return "broadcast";
    default:
      return "?";
  }
}

std::vector<GemmShape> calibration_gemm_shapes(bool quick) {
  std::vector<GemmShape> out;
  auto add = [&](int64_t m, int64_t n, int64_t k, bool ta, bool tb) {
    out.push_back(GemmShape::row_major(m, n, k, ta, tb));
  };
  for (int64_t d : {256, 512, 1024, 2048, 4096, 8192}) {
    if (quick && (d == 512 || d == 2048)) continue;
    add(d, d, d, false, true);
  }
  // Llama-2-7B (h 4096, ff 11008) at 4096 tokens: forward y = x W^T, backward dX = dY W, dW = dY^T X.
  add(4096, 4096, 4096, false, true);
  add(4096, 11008, 4096, false, true);
  add(4096, 4096, 11008, false, true);
  if (!quick) {
    add(4096, 4096, 11008, false, false);  // dX through the down projection
    add(11008, 4096, 4096, true, false);   // dW of the up projection
    add(1024, 4096, 4096, false, true);    // a small micro-batch
  }
  return out;
}

namespace {

// Random bf16 data (METHOD.md: never time on zeros), generated on the host once.
void fill_random_bf16(CudaBackend& be, void* dst, int64_t n, uint32_t seed) {
  std::vector<uint16_t> h(static_cast<size_t>(n));
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> u(-1.f, 1.f);
  for (auto& x : h) x = float_to_bf16_bits(u(rng));
  be.upload(dst, h.data(), n * 2);
}

class EventPair {
 public:
  EventPair() {
    ZP_CUDA_CHECK(cudaEventCreate(&a_));
    ZP_CUDA_CHECK(cudaEventCreate(&b_));
  }
  ~EventPair() {
    cudaEventDestroy(a_);
    cudaEventDestroy(b_);
  }
  void start(cudaStream_t s) { ZP_CUDA_CHECK(cudaEventRecord(a_, s)); }
  void stop(cudaStream_t s) { ZP_CUDA_CHECK(cudaEventRecord(b_, s)); }
  double seconds() {
    ZP_CUDA_CHECK(cudaEventSynchronize(b_));
    float ms = 0;
    ZP_CUDA_CHECK(cudaEventElapsedTime(&ms, a_, b_));
    return ms / 1e3;
  }

 private:
  cudaEvent_t a_ = nullptr, b_ = nullptr;
};

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

// Device buffer freed on scope exit, through the backend (so its accounting stays right).
struct Buf {
  CudaBackend& be;
  void* p;
  MemTier tier;
  Buf(CudaBackend& b, int64_t bytes, MemTier t = MemTier::Device) : be(b), p(b.allocate(bytes, t)), tier(t) {}
  ~Buf() {
    try {
      be.release(p, tier);
    } catch (...) {
    }
  }
  Buf(const Buf&) = delete;
  Buf& operator=(const Buf&) = delete;
};

constexpr int kBatches = 5;

}  // namespace

double time_gemm(CudaBackend& be, const GemmShape& s, int reps) {
  be.activate();
  const int64_t a_elems = s.m * s.k, b_elems = s.k * s.n, c_elems = s.m * s.n;
  Buf A(be, a_elems * 2), B(be, b_elems * 2), C(be, c_elems * 2);
  fill_random_bf16(be, A.p, a_elems, 1);
  fill_random_bf16(be, B.p, b_elems, 2);
  cudaStream_t st = be.stream(Stream::Compute);
  auto& g = be.gemm_runner();
  for (int i = 0; i < 3; ++i) g.gemm(st, s, A.p, B.p, DType::BF16, C.p, DType::BF16);  // warm-up, heuristic
  EventPair ev;
  std::vector<double> t;
  for (int b = 0; b < kBatches; ++b) {
    ev.start(st);
    for (int i = 0; i < reps; ++i) g.gemm(st, s, A.p, B.p, DType::BF16, C.p, DType::BF16);
    ev.stop(st);
    t.push_back(ev.seconds() / reps);
  }
  return median(t);
}

double measure_device_copy_GBps(CudaBackend& be, int64_t bytes, int reps) {
  be.activate();
  Buf src(be, bytes), dst(be, bytes);
  ZP_CUDA_CHECK(cudaMemset(src.p, 0x5a, static_cast<size_t>(bytes)));
  cudaStream_t st = be.stream(Stream::Compute);
  ZP_CUDA_CHECK(cudaMemcpyAsync(dst.p, src.p, static_cast<size_t>(bytes), cudaMemcpyDeviceToDevice, st));
  EventPair ev;
  std::vector<double> t;
  for (int b = 0; b < kBatches; ++b) {
    ev.start(st);
    for (int i = 0; i < reps; ++i)
      ZP_CUDA_CHECK(cudaMemcpyAsync(dst.p, src.p, static_cast<size_t>(bytes), cudaMemcpyDeviceToDevice, st));
    ev.stop(st);
    t.push_back(ev.seconds() / reps);
  }
  return 2.0 * static_cast<double>(bytes) / median(t) / 1e9;
}

double measure_host_copy_GBps(CudaBackend& be, int64_t bytes, bool pinned, bool host_to_device, int reps) {
  be.activate();
  Buf dev(be, bytes);
  std::vector<char> pageable;
  void* host = nullptr;
  std::unique_ptr<Buf> pinned_buf;
  if (pinned) {
    pinned_buf = std::make_unique<Buf>(be, bytes, MemTier::Host);
    host = pinned_buf->p;
  } else {
    pageable.resize(static_cast<size_t>(bytes));
    host = pageable.data();
  }
  std::memset(host, 0x5a, static_cast<size_t>(bytes));  // touch every page before timing
  cudaStream_t st = be.stream(Stream::Compute);
  auto once = [&] {
    if (host_to_device)
      ZP_CUDA_CHECK(cudaMemcpyAsync(dev.p, host, static_cast<size_t>(bytes), cudaMemcpyHostToDevice, st));
    else
      ZP_CUDA_CHECK(cudaMemcpyAsync(host, dev.p, static_cast<size_t>(bytes), cudaMemcpyDeviceToHost, st));
  };
  once();
  EventPair ev;
  std::vector<double> t;
  for (int b = 0; b < kBatches; ++b) {
    ev.start(st);
    for (int i = 0; i < reps; ++i) once();
    ev.stop(st);
    t.push_back(ev.seconds() / reps);
  }
  return static_cast<double>(bytes) / median(t) / 1e9;
}

CollectiveSample measure_collective(const std::vector<CudaBackend*>& backends,
                                    const std::vector<Communicator*>& comms, CollKind kind, int64_t bytes,
                                    int reps) {
  const int n = static_cast<int>(backends.size());
  ZP_CHECK(n >= 2 && comms.size() == backends.size(), "collective measurement needs >= 2 ranks");
  ZP_CHECK(kind != CollKind::Broadcast && kind != CollKind::kCount, "unsupported collective");
  // fp32 elements; S = full message. Per rank: all-reduce count = S/4; RS/AG chunk = S/(4n).
  const int64_t elems = std::max<int64_t>(bytes / 4 / n * n, n);
  const int64_t chunk = elems / n;
  CollectiveSample out;
  out.kind = kind;
  out.bytes = elems * 4;
  std::vector<double> secs(static_cast<size_t>(n), 0.0);
  std::vector<int> ok(static_cast<size_t>(n), 0);
  std::mutex err_mu;
  std::string first_error;
  auto rank_main = [&](int r) {
    try {
      CudaBackend& be = *backends[static_cast<size_t>(r)];
      Communicator& comm = *comms[static_cast<size_t>(r)];
      be.activate();
      be.set_stream(Stream::Comm);
      const int64_t send_elems = kind == CollKind::AllGather ? chunk : elems;
      const int64_t recv_elems = kind == CollKind::ReduceScatter ? chunk : elems;
      Buf send(be, send_elems * 4), recv(be, recv_elems * 4);
      // Exactly verifiable data: rank r contributes r + 1 everywhere (fp32 integers are exact).
      std::vector<float> h(static_cast<size_t>(std::max(send_elems, recv_elems)), static_cast<float>(r + 1));
      be.upload(send.p, h.data(), send_elems * 4);
      auto run = [&] {
        switch (kind) {
          case CollKind::AllReduce:
            comm.all_reduce(send.p, elems, DType::F32);
            break;
          case CollKind::ReduceScatter:
            comm.reduce_scatter(send.p, recv.p, chunk, DType::F32);
            break;
          case CollKind::AllGather:
            comm.all_gather(send.p, recv.p, chunk, DType::F32);
            break;
          default:
            break;
        }
      };
      run();
      be.synchronize();
      std::vector<float> got(static_cast<size_t>(kind == CollKind::AllReduce ? elems : recv_elems));
      be.download(got.data(), kind == CollKind::AllReduce ? send.p : recv.p,
                  static_cast<int64_t>(got.size()) * 4);
      const float total = static_cast<float>(n * (n + 1) / 2);
      bool good = true;
      for (size_t i = 0; i < got.size() && good; ++i) {
        const float want =
            kind == CollKind::AllGather ? static_cast<float>(static_cast<int64_t>(i) / chunk + 1) : total;
        good = got[i] == want;
      }
      ok[static_cast<size_t>(r)] = good ? 1 : 0;
      for (int i = 0; i < 3; ++i) run();  // warm-up
      EventPair ev;
      std::vector<double> t;
      for (int b = 0; b < kBatches; ++b) {
        ev.start(be.current_stream());
        for (int i = 0; i < reps; ++i) run();
        ev.stop(be.current_stream());
        be.synchronize();  // polls with the NCCL timeout hook
        t.push_back(ev.seconds() / reps);
      }
      secs[static_cast<size_t>(r)] = median(t);
      be.set_stream(Stream::Compute);
    } catch (const std::exception& e) {
      std::lock_guard<std::mutex> lk(err_mu);
      if (first_error.empty()) first_error = fmt::format("rank {}: {}", r, e.what());
    }
  };
  std::vector<std::thread> threads;
  for (int r = 0; r < n; ++r) threads.emplace_back(rank_main, r);
  for (auto& th : threads) th.join();
  if (!first_error.empty()) throw CudaError(first_error);
  out.seconds = *std::max_element(secs.begin(), secs.end());  // the collective ends with its slowest rank
  out.algbw_GBps = static_cast<double>(out.bytes) / out.seconds / 1e9;
  out.busbw_GBps = out.algbw_GBps * bus_factor(kind, n);
  out.verified = std::all_of(ok.begin(), ok.end(), [](int v) { return v == 1; });
  return out;
}

hw::GpuProfile calibrated_profile(const hw::GpuProfile& base, const CalibrationMeasurements& m) {
  if (!(m.gemm.max_efficiency > 0) || !(m.device_copy_GBps > 0) || m.memory_total_bytes <= 0)
    throw UserError(
        "calibration is incomplete (no GEMM fit, copy bandwidth or memory size); no profile written");
  hw::GpuProfile g = base;
  g.name = base.name + "-calibrated";
  g.aliases.clear();
  g.memory_bytes = m.memory_total_bytes;
  g.memory_source = "cudaMemGetInfo total, " + m.stamp;
  g.gemm_max_efficiency = m.gemm.max_efficiency;
  g.gemm_half_efficiency_gflop = m.gemm.half_efficiency_gflop;
  if (base.hbm_GBps > 0) g.hbm_efficiency = m.device_copy_GBps / base.hbm_GBps;
  g.host_pinned_GBps = std::min(m.pinned_h2d_GBps, m.pinned_d2h_GBps);
  g.host_pageable_GBps = std::min(m.pageable_h2d_GBps, m.pageable_d2h_GBps);
  g.cuda_context_bytes = m.baseline_used_bytes;
  g.calibrated = true;
  g.sources.push_back(fmt::format(
      "{}: GEMM fit over {} shapes (E {:.4f}, H {:.4f} GFLOP, rms residual {:.3f}); device copy {:.1f} GB/s; "
      "pinned "
      "H2D/D2H {:.2f}/{:.2f} GB/s; pageable H2D/D2H {:.2f}/{:.2f} GB/s; context+workspace {} bytes",
      m.stamp, m.gemm.points, m.gemm.max_efficiency, m.gemm.half_efficiency_gflop,
      m.gemm.rms_relative_residual, m.device_copy_GBps, m.pinned_h2d_GBps, m.pinned_d2h_GBps,
      m.pageable_h2d_GBps, m.pageable_d2h_GBps, m.baseline_used_bytes));
  if (!m.all_reduce.empty()) {
    hw::BusBwCurve curve;
    for (const auto& c : m.all_reduce) curve.points.push_back({c.bytes, c.busbw_GBps});
    std::sort(curve.points.begin(), curve.points.end(),
              [](const auto& a, const auto& b) { return a.bytes < b.bytes; });
    g.intra_node.busbw = curve;
    // alpha: the time of the smallest all-reduce, where bandwidth no longer matters.
    const auto smallest = std::min_element(m.all_reduce.begin(), m.all_reduce.end(),
                                           [](const auto& a, const auto& b) { return a.bytes < b.bytes; });
    g.intra_node.latency_us = smallest->seconds * 1e6;
    g.intra_node.source = fmt::format("all-reduce busbw measured by {} over {} GPUs", m.stamp, m.gpus);
  }
  return g;
}

}  // namespace zeroplan::exec::cuda
