#include "planner/invariants.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include "common/errors.h"
#include "planner/reasons.h"

namespace zeroplan::planner {
namespace {

// Sums of doubles computed in a different order than the model computed them differ by rounding
// only: 1e-9 relative is ~1e7 ulps of slack, far below any real inconsistency (a missing term).
constexpr double kRelTol = 1e-9;

bool close(double a, double b) {
  return std::fabs(a - b) <= kRelTol * std::max({1.0, std::fabs(a), std::fabs(b)});
}

// The dense peak MFU is measured against (same choice as planner/time_model.cpp peak_flops:
// tensor-core bf16/fp16, plain fp32 since PyTorch disables TF32 matmuls by default).
double dense_peak_flops(const hw::GpuProfile& g, Precision p) {
  switch (p) {
    case Precision::FP16:
      return g.fp16_tflops * 1e12;
    case Precision::FP32:
      return g.fp32_tflops * 1e12;
    case Precision::BF16:
      break;
  }
  return g.bf16_tflops * 1e12;
}

// StepTime's overlap slowdown and HFU fields arrive with the time-model rework (issue 16's
// neighbour, planner/time_model.cpp); read them where they exist so these checks build either way.
template <typename T>
double overlap_slowdown_of(const T& t) {
  if constexpr (requires { t.overlap_slowdown_s; })
    return t.overlap_slowdown_s;
  else
    return 0.0;
}

struct Checker {
  std::vector<InvariantViolation> out;
  template <typename... A>
  void fail(const char* quantity, fmt::format_string<A...> f, A&&... a) {
    out.push_back({quantity, fmt::format(f, std::forward<A>(a)...)});
  }
  void finite_nonneg(const char* quantity, double v) {
    if (!std::isfinite(v) || v < 0) fail(quantity, "{} is {} (must be finite and >= 0)", quantity, v);
  }
};

// HFU (and the time model's own MFU) where StepTime carries them (a discarded branch needs a template).
template <typename T>
void check_hfu(Checker& c, const Plan& p, const T& t) {
  if constexpr (requires {
                  t.hfu;
                  t.mfu;
                }) {
    if (!std::isfinite(t.hfu) || t.hfu < 0) c.fail("hfu", "HFU is {} (must be finite and >= 0)", t.hfu);
    if (t.hfu > 1 + kRelTol) c.fail("hfu", "HFU {:.4f} exceeds 1", t.hfu);
    if (t.mfu > t.hfu * (1 + kRelTol) + 1e-12)
      c.fail("hfu", "MFU {:.4f} exceeds HFU {:.4f} (hardware FLOPs include the model FLOPs)", t.mfu, t.hfu);
    if (!close(p.mfu, t.mfu))
      c.fail("mfu", "the plan's MFU {:.6f} differs from the time model's {:.6f}", p.mfu, t.mfu);
  }
}

// Step time: every part finite and >= 0, the step the sum of its parts, the collectives' sums.
void check_time(Checker& c, const StepTime& t) {
  if (!std::isfinite(t.step_s) || t.step_s <= 0)
    c.fail("step_s", "step time is {} s (must be finite and > 0)", t.step_s);
  c.finite_nonneg("compute_s", t.compute_s);
  c.finite_nonneg("forward_s", t.forward_s);
  c.finite_nonneg("backward_s", t.backward_s);
  c.finite_nonneg("recompute_s", t.recompute_s);
  c.finite_nonneg("optimizer_s", t.optimizer_s);
  c.finite_nonneg("communication_s", t.communication_s);
  c.finite_nonneg("exposed_communication_s", t.exposed_communication_s);
  c.finite_nonneg("offload_s", t.offload_s);
  c.finite_nonneg("checkpoint_offload_s", t.checkpoint_offload_s);
  // The checkpoint copies' exposed time is part of offload_s, and at most their whole time
  // (planner/checkpoint_offload.h).
  if (t.checkpoint_offload_s > t.offload_s * (1 + kRelTol) + 1e-15 ||
      t.checkpoint_offload_s > t.checkpoint_copy_s * (1 + kRelTol) + 1e-15)
    c.fail("checkpoint_offload_s",
           "exposed checkpoint copies {} s exceed the offload {} s or their time {} s",
           t.checkpoint_offload_s, t.offload_s, t.checkpoint_copy_s);
  c.finite_nonneg("hook_overhead_s", t.hook_overhead_s);
  const double overlap_slowdown_s = overlap_slowdown_of(t);
  c.finite_nonneg("overlap_slowdown_s", overlap_slowdown_s);
  c.finite_nonneg("flops_per_step", t.flops_per_step);
  const double parts =
      t.compute_s + t.exposed_communication_s + t.offload_s + t.hook_overhead_s + overlap_slowdown_s;
  if (!close(parts, t.step_s))
    c.fail("step_s",
           "step time {} s is not the sum of its parts {} s (compute {} + exposed communication {} + offload "
           "{} + "
           "hooks {} + overlap slowdown {})",
           t.step_s, parts, t.compute_s, t.exposed_communication_s, t.offload_s, t.hook_overhead_s,
           overlap_slowdown_s);
  if (t.exposed_communication_s > t.communication_s * (1 + kRelTol) + 1e-15)
    c.fail("exposed_communication_s", "exposed communication {} s exceeds the communication {} s",
           t.exposed_communication_s, t.communication_s);
  if (t.num_collectives < 0 || t.num_collectives > kMaxCollectives)
    c.fail("collectives", "{} collective families (0..{})", t.num_collectives, kMaxCollectives);
  double coll_time = 0;
  int64_t coll_bytes = 0;
  for (int i = 0; i < std::clamp(t.num_collectives, 0, kMaxCollectives); ++i) {
    const CollectiveCost& k = t.collectives[static_cast<size_t>(i)];
    if (k.count < 0 || k.message_bytes < 0 || k.bytes_per_rank < 0 || !std::isfinite(k.time_s) ||
        k.time_s < 0 || !std::isfinite(k.exposed_s) || k.exposed_s < 0)
      c.fail("collectives",
             "collective '{}' has count {}, message {} B, {} B per rank, time {} s, exposed {} s", k.name,
             k.count, k.message_bytes, k.bytes_per_rank, k.time_s, k.exposed_s);
    if (k.exposed_s > k.time_s * (1 + kRelTol) + 1e-15)
      c.fail("collectives", "collective '{}' exposes {} s of its {} s", k.name, k.exposed_s, k.time_s);
    coll_time += k.time_s;
    coll_bytes += k.bytes_per_rank;
  }
  if (!close(coll_time, t.communication_s))
    c.fail("communication_s", "communication {} s is not the sum {} s of its collectives", t.communication_s,
           coll_time);
  if (coll_bytes != t.comm_bytes_per_rank)
    c.fail("comm_bytes_per_rank", "bytes per rank {} are not the sum {} of its collectives",
           t.comm_bytes_per_rank, coll_bytes);
}

// Throughput, MFU and HFU against the step and the GPU's peak.
void check_throughput(Checker& c, const Workload& w, const Plan& p) {
  const StepTime& t = p.time;
  const double world = static_cast<double>(w.cluster.world_size());
  const double tokens = static_cast<double>(p.global_batch) * static_cast<double>(p.seq_len);
  if (!std::isfinite(p.tokens_per_s) || p.tokens_per_s <= 0)
    c.fail("tokens_per_s", "tokens/s is {} (must be finite and > 0)", p.tokens_per_s);
  else if (t.step_s > 0 && !close(p.tokens_per_s, tokens / t.step_s))
    c.fail("tokens_per_s", "tokens/s {} is not global batch x seq len / step = {}", p.tokens_per_s,
           tokens / t.step_s);
  if (!close(p.tokens_per_s_per_gpu * world, p.tokens_per_s))
    c.fail("tokens_per_s_per_gpu", "tokens/s per GPU {} x {} GPUs is not tokens/s {}", p.tokens_per_s_per_gpu,
           world, p.tokens_per_s);
  const hw::GpuProfile& g = w.cluster.gpu;
  const double peak = dense_peak_flops(g, p.precision);
  if (!std::isfinite(p.mfu) || p.mfu < 0) c.fail("mfu", "MFU is {} (must be finite and >= 0)", p.mfu);
  if (p.mfu > g.gemm_max_efficiency * (1 + kRelTol))
    c.fail("mfu", "MFU {:.4f} exceeds the {} profile's peak GEMM efficiency {:.4f} (gemm_max_efficiency)",
           p.mfu, g.name, g.gemm_max_efficiency);
  check_hfu(c, p, t);
  // MFU from the plan's own throughput: tokens/s x FLOPs per token / (GPUs x peak). flops_per_step is
  // per GPU per step, for the tokens one GPU trains in a step (global batch x seq len / GPUs).
  if (peak > 0 && tokens > 0 && p.tokens_per_s > 0) {
    const double flops_per_token = t.flops_per_step * world / tokens;
    const double mfu_from_throughput = p.tokens_per_s * flops_per_token / (world * peak);
    if (!close(p.mfu, mfu_from_throughput))
      c.fail("mfu", "MFU {:.6f} is not tokens/s {} x {} FLOPs per token / ({} GPUs x {} FLOP/s) = {:.6f}",
             p.mfu, p.tokens_per_s, flops_per_token, world, peak, mfu_from_throughput);
  }
}

// Memory: buffers >= 0, phase totals and the peak their sums, the categories at the peak.
void check_memory(Checker& c, const Plan& p) {
  const MemoryBreakdown& m = p.memory;
  std::array<int64_t, kNumPhases> phase{};
  std::array<std::array<int64_t, kNumCategories>, kNumPhases> phase_cat{};
  for (int i = 0; i < m.num_gpu; ++i) {
    const Buffer& b = m.gpu[static_cast<size_t>(i)];
    if (b.bytes < 0) c.fail("memory.gpu", "GPU buffer '{}' has {} bytes", b.name, b.bytes);
    for (int ph = 0; ph < kNumPhases; ++ph)
      if (b.phases & (1 << ph)) {
        phase[static_cast<size_t>(ph)] += b.bytes;
        phase_cat[static_cast<size_t>(ph)][static_cast<size_t>(b.category)] += b.bytes;
      }
  }
  for (int i = 0; i < m.num_host; ++i) {
    const Buffer& b = m.host[static_cast<size_t>(i)];
    if (b.bytes < 0) c.fail("memory.host", "host buffer '{}' has {} bytes", b.name, b.bytes);
  }
  if (m.host_per_node < 0 || m.host_pinned_per_node < 0 || m.host_load_per_node < 0)
    c.fail("memory.host", "host bytes per node {} (pinned {}, load {}) must be >= 0", m.host_per_node,
           m.host_pinned_per_node, m.host_load_per_node);
  if (m.peak < 0) c.fail("memory.peak", "peak {} bytes", m.peak);
  int64_t max_phase = 0;
  for (int ph = 0; ph < kNumPhases; ++ph) {
    max_phase = std::max(max_phase, phase[static_cast<size_t>(ph)]);
    if (phase[static_cast<size_t>(ph)] != m.phase_total[static_cast<size_t>(ph)])
      c.fail("memory.phase_total", "the {} phase totals {} bytes, but its buffers sum to {}", phase_name(ph),
             m.phase_total[static_cast<size_t>(ph)], phase[static_cast<size_t>(ph)]);
  }
  if (m.peak != max_phase)
    c.fail("memory.peak", "peak {} bytes is not the largest phase total {}", m.peak, max_phase);
  int64_t cat_sum = 0;
  for (auto v : m.at_peak) {
    if (v < 0) c.fail("memory.categories", "a category holds {} bytes at the peak", v);
    cat_sum += v;
  }
  if (cat_sum != m.peak)
    c.fail("memory.categories", "the categories at the peak sum to {} bytes, not the peak {}", cat_sum,
           m.peak);
  if (m.peak_phase >= 0 && m.peak_phase < kNumPhases &&
      phase_cat[static_cast<size_t>(m.peak_phase)] != m.at_peak)
    c.fail("memory.categories", "the categories at the peak differ from the {} phase's buffers",
           phase_name(m.peak_phase));
  if (m.peak < m.model_states())
    c.fail("memory.peak", "peak {} bytes is below the model states {}", m.peak, m.model_states());
}

}  // namespace

std::vector<InvariantViolation> plan_violations(const Workload& w, const Plan& p) {
  Checker c;
  check_time(c, p.time);
  check_throughput(c, w, p);
  check_memory(c, p);
  return c.out;
}

void enforce_plan_invariants(const Workload& w, const Plan& p) {
  const auto v = plan_violations(w, p);
  if (v.empty()) return;
  throw InternalError(fmt::format("plan '{}' ({} on {}x{}) fails the physical check on {}: {}",
                                  describe_config(p.zero), w.model.name, w.cluster.world_size(),
                                  w.cluster.gpu.name, v.front().quantity, v.front().detail));
}

}  // namespace zeroplan::planner
