#include "diagnose/comms_inference.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <set>

#include "common/errors.h"
#include "diagnose/comm_ops.h"
#include "planner/ds_runtime_collectives.h"
#include "planner/model_stats.h"
#include "planner/zero_config.h"

namespace zeroplan::diagnose {
namespace {

bool is_reduce_scatter(const std::string& op) {
  return op.rfind("reduce_scatter", 0) == 0;
}
bool is_all_reduce(const std::string& op) {
  return op.rfind("all_reduce", 0) == 0 || op == "reduce";
}

std::string mib(double b) {
  return fmt::format("{:.2f} MiB", b / (1 << 20));
}

// The stage from which calls run every step (see the header).
void infer_stage(const RunLog& log, int steps, CommsInference& out) {
  const CallTotals rs = call_totals(log, is_reduce_scatter), ar = call_totals(log, is_all_reduce),
                   ag = call_totals(log, is_gather);
  const double gathers_per_step = static_cast<double>(ag.calls) / steps;
  if (rs.calls > 0 && gathers_per_step >= 2) {
    out.stage = 3;
    out.stage_evidence = fmt::format(
        "{:.0f} parameter all-gathers per step and gradient reduce-scatters: ZeRO-3's fetches and "
        "reduction (stage3.py)",
        gathers_per_step);
  } else if (ar.calls > 0 && rs.calls == 0 && ag.calls >= steps && gathers_per_step <= 4) {
    // (at most a few gathers per step: one per param group in 0.19.8; ZeRO-3 with reduce_scatter false
    // all-reduces too, but gathers every module's parameters)
    out.stage = 2;
    out.stage_evidence = fmt::format(
        "gradient all-reduces and {:.0f} all-gather(s) of the updated partitions per step: ZeRO-1 or 2 "
        "(stage_1_and_2.py)",
        gathers_per_step);
  }
}

// Tiny reduction buckets. DeepSpeed's default reduce_bucket_size is 5e8 elements (runtime/zero/config.py),
// at least 1e9 bytes whatever the gradient dtype (2 bytes at the least), so a step's gradient bytes T go
// out in at most ceil(T / 1e9) + 1 calls (the +1: a bucket flushed early when the next parameter does not
// fit). Flagged when the log shows more than 4x that, at least 8 per step, and an average call under
// 2 MiB: under 1e6 elements whatever the dtype, the config rule's "tiny" (diagnosis.cpp kTinyBucket).
void infer_buckets(const RunLog& log, int steps, CommsInference& out) {
  const CallTotals red = call_totals(log, is_reduction);
  if (red.calls == 0) return;
  out.reductions_per_step = static_cast<double>(red.calls) / steps;
  out.reduced_bytes_per_step = red.bytes / steps;
  out.default_calls_at_most = static_cast<int64_t>(std::ceil(out.reduced_bytes_per_step / 1e9)) + 1;
  const double mean_call = red.bytes / static_cast<double>(red.calls);
  out.tiny_buckets = out.reductions_per_step >= 8 &&
                     out.reductions_per_step > 4.0 * static_cast<double>(out.default_calls_at_most) &&
                     mean_call < 2.0 * (1 << 20);
}

// A logged size and a simulated one agree within the comms logger's rounding (utils/comms_logging.py
// convert_size: two decimals of the B/KB/MB/GB unit, 1024-based).
bool same_size(int64_t logged, int64_t simulated) {
  double unit = 1;
  while (unit * 1024 <= static_cast<double>(logged)) unit *= 1024;
  return std::abs(static_cast<double>(logged - simulated)) <= 0.0051 * unit + 0.5;
}

struct Setting {
  const char* name;
  int64_t prefetch;
  int64_t persistence;
};

// The gathers of one optimizer step after the first (planner::deepspeed_collectives: the trace
// complete), as (bytes, calls per step).
std::vector<std::pair<int64_t, int64_t>> gathers_per_step(const planner::Workload& w,
                                                          const planner::ModelStats& s,
                                                          const planner::ZeroConfig& z) {
  std::vector<std::pair<int64_t, int64_t>> out;
  for (const auto& c : planner::deepspeed_collectives(w, s, z)) {
    if (c.kind != planner::CollectiveKind::AllGather || c.bytes < kScalarBytes) continue;
    auto it = std::find_if(out.begin(), out.end(), [&](const auto& p) { return p.first == c.bytes; });
    if (it == out.end())
      out.emplace_back(c.bytes, 1);
    else
      ++it->second;
  }
  return out;
}

// One setting against the log: (1) every gather the setting issues each step is in the log at least
// once per step after the first (the first step is untraced: no prefetch, partition_parameters.py /
// partitioned_param_coordinator.py); (2) every gather size in the log is one the setting issues, either
// in steady state or in the untraced first step (the same setting with prefetch off).
GatherMatch compare(const RunLog& log, int steps, const planner::Workload& w, const planner::ModelStats& s,
                    const Setting& st, const char* dtype) {
  GatherMatch m;
  m.setting = st.name;
  m.dtype = dtype;
  m.prefetch_bucket_size = st.prefetch;
  m.persistence_threshold = st.persistence;
  planner::ZeroConfig z = planner::ZeroConfig::deepspeed_defaults(3);
  z.micro_batch = 1;
  z.grad_accum = 1;
  z.prefetch_bucket_size = st.prefetch;
  z.param_persistence_threshold = st.persistence;
  const auto steady = gathers_per_step(w, s, z);
  planner::ZeroConfig first = z;
  first.prefetch_bucket_size = 0;
  const auto untraced = gathers_per_step(w, s, first);
  auto logged = [&](int64_t bytes) {
    int64_t n = 0;
    for (const auto& r : log.comms)
      if (is_gather(r.op) && same_size(r.message_bytes, bytes)) n += r.count;
    return n;
  };
  for (const auto& [bytes, per_step] : steady) {
    const int64_t need = per_step * std::max(1, steps - 1), have = logged(bytes);
    if (have < need) {
      m.evidence =
          fmt::format("it gathers {} {} time(s) per step; the log has {} call(s) of that size in {} steps",
                      mib(static_cast<double>(bytes)), per_step, have, steps);
      return m;
    }
  }
  for (const auto& r : log.comms) {
    if (!is_gather(r.op) || r.message_bytes < kScalarBytes) continue;
    auto has = [&](const auto& v) {
      return std::any_of(v.begin(), v.end(),
                         [&](const auto& p) { return same_size(r.message_bytes, p.first); });
    };
    if (!has(steady) && !has(untraced)) {
      m.evidence = fmt::format("the log's {} gathers of {} are not a call it issues", r.count,
                               mib(static_cast<double>(r.message_bytes)));
      return m;
    }
  }
  // The largest call it issues, as the agreeing evidence.
  int64_t big = 0, big_n = 0;
  for (const auto& [bytes, n] : steady)
    if (bytes > big) big = bytes, big_n = n;
  m.consistent = true;
  m.evidence = fmt::format(
      "each of its {} gather sizes is in the log every step, the largest {} ({} call(s) per step; the log "
      "has {})",
      steady.size(), mib(static_cast<double>(big)), big_n, logged(big));
  return m;
}

void infer_stage3_knobs(const RunLog& log, int steps, const planner::Workload& in, CommsInference& out) {
  const int world = log.world_size > 0 ? log.world_size : in.cluster.world_size();
  if (world != in.cluster.world_size()) return;  // the gathers' partitions depend on the world
  // DeepSpeed's defaults (runtime/zero/config.py): prefetch 5e7 elements, persistence 1e5 elements.
  constexpr Setting kSettings[] = {{"DeepSpeed's defaults", 50'000'000, 100'000},
                                   {"stage3_prefetch_bucket_size 0", 0, 100'000},
                                   {"stage3_param_persistence_threshold 0", 50'000'000, 0},
                                   {"prefetch 0 and persistence 0", 0, 0}};
  for (auto [prec, name] :
       {std::pair{planner::Precision::BF16, "bf16/fp16"}, std::pair{planner::Precision::FP32, "fp32"}}) {
    planner::Workload w = in;
    w.train.precision = prec;
    w.train.micro_batch = 1;
    w.train.grad_accum = 1;
    try {
      const planner::ModelStats s = planner::compute_model_stats(w);
      for (const Setting& st : kSettings) {
        out.matches.push_back(compare(log, steps, w, s, st, name));
        if (out.matches.back().consistent) out.agreeing.push_back(out.matches.back());
      }
    } catch (const UserError&) {
      // A model the planner cannot simulate at this precision: nothing inferred from it.
    }
  }
  const auto& a = out.agreeing;
  if (a.empty()) return;
  auto same = [&](auto field) {
    return std::all_of(a.begin(), a.end(),
                       [&](const GatherMatch& m) { return m.*field == a.front().*field; });
  };
  out.prefetch_known = same(&GatherMatch::prefetch_bucket_size);
  out.persistence_known = same(&GatherMatch::persistence_threshold);
  out.prefetch_off = out.prefetch_known && a.front().prefetch_bucket_size == 0;
  out.persistence_zero = out.persistence_known && a.front().persistence_threshold == 0;
}

}  // namespace

CommsInference infer_from_comms(const RunLog& log, int steps,
                                const std::optional<planner::Workload>& workload) {
  CommsInference out;
  if (log.comms.empty()) return out;
  steps = std::max(steps, 1);
  infer_stage(log, steps, out);
  infer_buckets(log, steps, out);
  if (out.stage == 3 && workload) infer_stage3_knobs(log, steps, *workload, out);
  return out;
}

}  // namespace zeroplan::diagnose
