// `zeroplan calibrate [--out gpu_profile.json] [--force] [--base NAME] [--quick]`: measures the GPU it
// runs on and writes a GPU profile JSON (hw::gpu_to_json) that `--gpus 1xgpu_profile.json` accepts,
// so later predictions on that machine use measured rather than datasheet figures:
//   gemm_max_efficiency, gemm_half_efficiency_gflop  fitted to bf16 GEMM timings by size
//                                                    (executor/cuda/calibration.h for the model)
//   hbm_efficiency                                   device copy (read + write bytes) / datasheet HBM
//   host_pinned_GBps, host_pageable_GBps             host<->device copies, the slower direction
//   memory_bytes                                     cudaMemGetInfo total
//   cuda_context_bytes                               device memory in use after the CUDA context,
//                                                    two streams and the 32 MiB cuBLASLt workspace
//   intra_node_link.busbw, latency_us                all-reduce busbw by message size (nccl-tests
//                                                    definitions), only where >= 2 GPUs exist
// Everything else (datasheet peaks, links, node layout) comes from the base profile: the built-in
// profile matching the device name, or --base. Without a CUDA build or without a usable GPU it
// prints one line and exits 2.
#include <fmt/format.h>

#include <chrono>
#include <ctime>
#include <filesystem>
#include <memory>

#include "cli/commands.h"
#include "cli/progress.h"
#include "common/atomic_file.h"
#include "common/errors.h"
#include "hwprofiles/gpu_profile.h"

#if ZEROPLAN_HAVE_CUDA
#include <cuda_runtime.h>

#include "executor/cuda/calibration.h"
#include "executor/cuda/cuda_backend.h"
#include "executor/cuda/cuda_check.h"
#include "executor/cuda/device.h"
#include "executor/cuda/nccl_communicator.h"
#endif

namespace zeroplan::cli {
namespace {

struct CalibrateFlags {
  std::string out = "gpu_profile.json";
  std::string base;
  bool quick = false;
};

#if ZEROPLAN_HAVE_CUDA

hw::GpuProfile base_profile(const std::string& base, const std::string& device_name) {
  if (!base.empty()) return hw::find_gpu(base);
  // "NVIDIA H200" -> "H200"; "NVIDIA A100-SXM4-80GB" -> tried as is, then shortened.
  std::string n = device_name;
  if (n.rfind("NVIDIA ", 0) == 0) n = n.substr(7);
  std::vector<std::string> tries{n};
  for (char sep : {' ', '-'})
    if (auto p = n.find(sep); p != std::string::npos) tries.push_back(n.substr(0, p));
  for (const auto& t : tries) {
    try {
      return hw::find_gpu(t);
    } catch (const UserError&) {
    }
  }
  throw_user_error(
      "this GPU ('{}') matches no built-in profile; pass --base NAME with the closest one "
      "(run `zeroplan gpus` for the list)",
      device_name);
}

std::string today_utc() {
  const std::time_t t = std::time(nullptr);
  std::tm tm{};
  gmtime_r(&t, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%d", &tm);
  return buf;
}

// bf16 GEMMs of the calibration shapes against the profile's peak, and the efficiency curve fitted to them.
exec::cuda::GemmEfficiencyFit measure_gemms(exec::cuda::CudaBackend& be, const hw::GpuProfile& g,
                                            const std::vector<exec::cuda::GemmShape>& shapes,
                                            Progress& progress, int& done) {
  using namespace exec::cuda;
  fmt::print(
      "\nbf16 GEMM (fp32 accumulate), median of 5 batches:\n  {:>6} {:>6} {:>6} {:>3} {:>9} {:>9} {:>6}\n",
      "m", "n", "k", "op", "GFLOP", "TFLOP/s", "eff");
  std::vector<std::pair<double, double>> points;
  std::fflush(stdout);
  progress.update(done);
  for (const auto& s : shapes) {
    const double gflop = s.flops() / 1e9;
    const int reps = std::max(3, static_cast<int>(std::min(200.0, 2000.0 / gflop)));
    const double sec = time_gemm(be, s, reps);
    progress.clear();
    const double tflops = s.flops() / sec / 1e12;
    const double eff = tflops / g.bf16_tflops;
    points.emplace_back(gflop, eff);
    fmt::print("  {:>6} {:>6} {:>6} {:>3} {:>9.2f} {:>9.1f} {:>6.3f}\n", s.m, s.n, s.k,
               fmt::format("{}{}", s.trans_a ? 'T' : 'N', s.trans_b ? 'T' : 'N'), gflop, tflops, eff);
    std::fflush(stdout);
    progress.update(done += 1);
  }
  progress.clear();
  const exec::cuda::GemmEfficiencyFit fit = exec::cuda::fit_gemm_efficiency(points);
  fmt::print(
      "  fit eff(f) = E f/(f+H): E = {:.3f} of {:.1f} TFLOP/s, H = {:.3f} GFLOP (rms relative residual "
      "{:.3f}{})\n",
      fit.max_efficiency, g.bf16_tflops, fit.half_efficiency_gflop, fit.rms_relative_residual,
      fit.capped_at_peak ? "; E held at the datasheet peak, the free fit was above it" : "");
  return fit;
}

// nccl-tests' collectives over every GPU (all-reduce, reduce-scatter, all-gather; message sizes 1 KiB to
// 1 GiB, `coll_step` powers of two apart), each checked exactly; the all-reduce samples go into `meas`.
void measure_collectives(exec::cuda::CudaBackend& be, int count, int coll_step, Progress& progress, int& done,
                         exec::cuda::CalibrationMeasurements& meas) {
  using namespace exec::cuda;
  auto measured = [&]() {
    std::fflush(stdout);
    progress.update(done += 1);
  };
  std::vector<std::unique_ptr<CudaBackend>> owned;
  std::vector<CudaBackend*> bes{&be};
  for (int d = 1; d < count; ++d) {
    owned.push_back(std::make_unique<CudaBackend>(d));
    bes.push_back(owned.back().get());
  }
  auto comms = make_local_nccl_communicators(bes);
  std::vector<exec::Communicator*> raw;
  for (auto& c : comms) raw.push_back(c.get());
  progress.clear();
  fmt::print("\ncollectives over {} GPUs (nccl-tests definitions; fp32 data verified exactly):\n", count);
  fmt::print("  {:>14} {:>12} {:>10} {:>10} {:>10} {:>8}\n", "collective", "bytes", "time us", "algbw",
             "busbw", "check");
  std::fflush(stdout);
  progress.update(done);
  for (exec::CollKind k :
       {exec::CollKind::AllReduce, exec::CollKind::ReduceScatter, exec::CollKind::AllGather}) {
    for (int lg = 10; lg <= 30; lg += coll_step) {
      const int64_t bytes = int64_t{1} << lg;
      const int reps = lg < 24 ? 50 : 10;
      const CollectiveSample c = measure_collective(bes, raw, k, bytes, reps);
      progress.clear();
      fmt::print("  {:>14} {:>12} {:>10.1f} {:>10.2f} {:>10.2f} {:>8}\n", coll_name(k), c.bytes,
                 c.seconds * 1e6, c.algbw_GBps, c.busbw_GBps, c.verified ? "exact" : "WRONG");
      if (!c.verified)
        throw exec::cuda::CudaError(
            fmt::format("{} of {} bytes delivered wrong values; the GPUs or NCCL are not "
                        "working correctly, so no profile is written",
                        coll_name(k), c.bytes));
      if (k == exec::CollKind::AllReduce) meas.all_reduce.push_back(c);
      measured();
    }
  }
}

CommandResult run_calibrate(const CalibrateFlags& f, bool force) {
  using namespace exec::cuda;
  const DeviceAvailability dev = probe_devices();
  if (dev.count == 0)
    throw_user_error("calibrate needs a CUDA GPU, but none is usable here ({})", dev.reason);
  // Fail on the output path before minutes of measuring (write_file_atomically checks again).
  if (!force && std::filesystem::exists(f.out))
    throw_user_error("'{}' already exists; pass --force to overwrite it", f.out);

  CudaBackend be(0);
  const DeviceInfo info = device_info(0);
  const hw::GpuProfile g = base_profile(f.base, info.name);
  const CudaMemoryReport mem0 = be.memory_report();
  int runtime_version = 0, driver_version = 0;
  cudaRuntimeGetVersion(&runtime_version);
  cudaDriverGetVersion(&driver_version);
  // Progress on a terminal (issue 30 item 5; cli/progress.h): one measurement per GEMM shape, five
  // bandwidths, and per collective kind its message sizes. Each result line is printed as before;
  // the progress line is erased before it and drawn again after.
  const auto shapes = calibration_gemm_shapes(f.quick);
  const int coll_step = f.quick ? 4 : 2;  // message sizes 1 KiB .. 1 GiB, x16 or x4 apart
  const bool collectives = dev.count >= 2 && nccl_available();
  const int total = static_cast<int>(shapes.size()) + 5 + (collectives ? 3 * ((30 - 10) / coll_step + 1) : 0);
  Progress progress("calibrate", "measurement", total,
                    fmt::format("{}, {} GPU{}", info.name, dev.count, dev.count == 1 ? "" : "s"));
  int done = 0;
  auto measured = [&](int n = 1) {
    std::fflush(stdout);
    progress.update(done += n);
  };
  fmt::print("calibrating {} ({} SMs, {:.1f} GiB) against the '{}' profile; CUDA runtime {}, driver {}\n",
             info.name, info.sm_count, static_cast<double>(mem0.total_bytes) / (1 << 30), g.name,
             runtime_version, driver_version);

  // ---- GEMMs
  const GemmEfficiencyFit fit = measure_gemms(be, g, shapes, progress, done);

  // ---- memory bandwidths
  std::fflush(stdout);
  progress.update(done);
  const int64_t big = int64_t{1} << 30, host_bytes = int64_t{256} << 20;
  const double hbm = measure_device_copy_GBps(be, big, 10);
  const double pin_h2d = measure_host_copy_GBps(be, host_bytes, true, true, 5);
  const double pin_d2h = measure_host_copy_GBps(be, host_bytes, true, false, 5);
  const double pag_h2d = measure_host_copy_GBps(be, host_bytes, false, true, 3);
  const double pag_d2h = measure_host_copy_GBps(be, host_bytes, false, false, 3);
  progress.clear();
  fmt::print("\ndevice copy (1 GiB, read+write): {:.0f} GB/s = {:.3f} of the datasheet {:.0f} GB/s\n", hbm,
             hbm / g.hbm_GBps, g.hbm_GBps);
  fmt::print(
      "host copies (256 MiB): pinned H2D {:.1f} GB/s, D2H {:.1f} GB/s; pageable H2D {:.1f} GB/s, D2H {:.1f} "
      "GB/s\n",
      pin_h2d, pin_d2h, pag_h2d, pag_d2h);
  fmt::print("device memory: {} bytes total, {} bytes in use after context + streams + cuBLASLt workspace\n",
             mem0.total_bytes, mem0.baseline_used_bytes);
  measured(5);

  CalibrationMeasurements meas;
  meas.stamp = fmt::format("zeroplan calibrate on '{}' ({} SMs), {}, CUDA runtime {}, driver {}", info.name,
                           info.sm_count, today_utc(), runtime_version, driver_version);
  meas.memory_total_bytes = mem0.total_bytes;
  meas.baseline_used_bytes = mem0.baseline_used_bytes;
  meas.gemm = fit;
  meas.device_copy_GBps = hbm;
  meas.pinned_h2d_GBps = pin_h2d;
  meas.pinned_d2h_GBps = pin_d2h;
  meas.pageable_h2d_GBps = pag_h2d;
  meas.pageable_d2h_GBps = pag_d2h;
  meas.gpus = dev.count;

  // ---- collectives (>= 2 GPUs)
  if (collectives) {
    measure_collectives(be, dev.count, coll_step, progress, done, meas);
  } else {
    fmt::print("\ncollectives: {} GPU(s){}, so the link's busbw curve stays the base profile's (datasheet)\n",
               dev.count, dev.count >= 2 ? " but no NCCL in this build" : "");
  }

  progress.clear();
  write_file_atomically(f.out, hw::gpu_to_json(calibrated_profile(g, meas)), force);
  fmt::print("\nwrote {} (use it as --gpus {}x{})\n", f.out, dev.count, f.out);
  return 0;
}

#else

CommandResult run_calibrate(const CalibrateFlags&, bool) {
  throw UserError(
      "this zeroplan was built without CUDA (no nvcc at build time), so it cannot calibrate a GPU");
}

#endif

}  // namespace

void register_calibrate(CLI::App& app, PlanFlags& flags, CommandResult& result) {
  auto cf = std::make_shared<CalibrateFlags>();
  CLI::App* sub = app.add_subcommand(
      "calibrate",
      "Measure this machine's GPU (GEMM efficiency, HBM and host-copy bandwidth, NCCL busbw) and write "
      "a GPU profile JSON for --gpus");
  sub->fallthrough();  // --force (and --json) are the top-level shared flags
  sub->add_option("--out", cf->out, "Profile file to write (default gpu_profile.json)");
  sub->add_option("--base", cf->base,
                  "Built-in profile to start from (default: matched from the device name)");
  sub->add_flag("--quick", cf->quick, "Fewer GEMM shapes and message sizes (about a minute)");
  sub->callback([cf, &flags, &result] { result = run_calibrate(*cf, flags.force); });
}

}  // namespace zeroplan::cli
