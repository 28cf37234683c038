// Causes of a slow or failed DeepSpeed run: each rule needs a config fact (the knob as DeepSpeed ran
// it) AND log evidence where the log can show it; its gain is the planner's step time for the config
// as run minus the step time with the fix (both through planner::evaluate_plan), or, without
// --model/--gpus, an estimate from the log's own timers (stated as such), or unknown.
#include "diagnose/diagnosis.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include "common/errors.h"
#include "configs/check.h"
#include "diagnose/comm_ops.h"
#include "diagnose/comms_inference.h"
#include "diagnose/config_recovery.h"
#include "planner/comm_model.h"
#include "planner/memory_breakdown.h"
#include "planner/model_stats.h"
#include "planner/search.h"

namespace zeroplan::diagnose {
namespace {

using nlohmann::json;

double median(std::vector<double> v) {
  if (v.empty()) return -1;
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

double gb(int64_t b) {
  return static_cast<double>(b) / 1e9;
}

std::string ms(double x) {
  if (x < 0) return "?";
  if (x >= 10000) return fmt::format("{:.1f} s", x / 1000);
  if (x >= 100) return fmt::format("{:.0f} ms", x);
  return fmt::format("{:.1f} ms", x);
}

std::string gib(int64_t b) {
  return b < 0 ? "?" : fmt::format("{:.2f} GiB", static_cast<double>(b) / (1 << 30));
}

std::string size_str(int64_t b) {
  if (b >= (1LL << 30)) return fmt::format("{:.2f} GiB", static_cast<double>(b) / (1LL << 30));
  if (b >= (1LL << 20)) return fmt::format("{:.2f} MiB", static_cast<double>(b) / (1LL << 20));
  if (b >= 1024) return fmt::format("{:.1f} KiB", static_cast<double>(b) / 1024);
  return fmt::format("{} B", b);
}

// nccl-tests bus factor of what the comms logger calls `op` (deepspeed/utils/comms_logging.py calc_bw_log).
std::optional<planner::CollectiveKind> kind_of(const std::string& op) {
  if (is_gather(op)) return planner::CollectiveKind::AllGather;
  if (op.rfind("reduce_scatter", 0) == 0) return planner::CollectiveKind::ReduceScatter;
  if (op.rfind("all_reduce", 0) == 0) return planner::CollectiveKind::AllReduce;
  if (op == "broadcast") return planner::CollectiveKind::Broadcast;
  return std::nullopt;
}

// Calls of a row family per optimizer step, excluding the scalar all-reduces DeepSpeed issues for
// overflow checks and gradient norms (<= 64 bytes: one fp32/int64 element or a few).
int64_t calls(const RunLog& log, bool (*pred)(const std::string&), int64_t min_bytes = kScalarBytes) {
  return call_totals(log, pred, min_bytes).calls;
}

int optimizer_steps(const RunLog& log) {
  int micro = 0, global = 0;
  for (const auto& t : log.timers) {
    if (t.rank > 0) continue;
    (t.micro ? micro : global)++;
  }
  return std::max(global, 1);
}

json merge(json base, const json& patch) {
  if (!patch.is_object()) return patch;
  if (!base.is_object()) base = json::object();
  for (auto it = patch.begin(); it != patch.end(); ++it) {
    if (it.value().is_null())
      base.erase(it.key());
    else
      base[it.key()] = merge(base.contains(it.key()) ? base[it.key()] : json(nullptr), it.value());
  }
  return base;
}

struct Planned {
  planner::Workload w;
  planner::Plan plan;
};

std::optional<Planned> plan_for(const json& config, const DiagnoseInputs& in,
                                std::vector<std::string>* notes) {
  if (!in.workload || !config.is_object()) return std::nullopt;
  try {
    configs::ReadConfig rc = configs::read_deepspeed_config(config, *in.workload);
    if (!rc.usable) {
      if (notes) notes->push_back("the config could not be turned into a plan (zeroplan check shows why)");
      return std::nullopt;
    }
    // configs::read_deepspeed_config replaces a 0 stage3_prefetch_bucket_size by DeepSpeed's default
    // for its prediction (a zero-sized bucket is outside its memory model); the time model does model
    // prefetch off (planner/time_model.cpp: prefetch = prefetch_bucket_size > 0), which is what the
    // run did, so the literal 0 goes back in here.
    if (rc.zero.stage == 3 && zero_from_config(config).prefetch_bucket_size == 0)
      rc.zero.prefetch_bucket_size = 0;
    Planned p;
    p.w = configs::workload_for_config(*in.workload, rc);
    const auto stats = planner::compute_model_stats(p.w);
    p.plan = planner::evaluate_plan(p.w, stats, rc.zero, in.memory_margin);
    return p;
  } catch (const UserError& e) {
    if (notes) notes->push_back(std::string("the planner refused the config: ") + e.what());
    return std::nullopt;
  }
}

}  // namespace

PhaseTimes measured_phases(const RunLog& log) {
  PhaseTimes t;
  for (bool micro : {true, false}) {
    std::vector<const TimerSample*> s;
    // Rank 0 prints them (timers.log ranks=[0]); a rank-less line is taken as rank 0's.
    for (const auto& x : log.timers)
      if (x.micro == micro && x.rank <= 0) s.push_back(&x);
    if (s.empty()) continue;
    if (s.size() >= 3) s.erase(s.begin());  // first step: allocator warm-up, lazy init
    std::vector<double> f, b, bi, ba, st;
    for (const auto* x : s) {
      if (x->fwd_ms >= 0) f.push_back(x->fwd_ms);
      if (x->bwd_ms >= 0) b.push_back(x->bwd_ms);
      if (x->bwd_inner_ms >= 0) bi.push_back(x->bwd_inner_ms);
      if (x->bwd_allreduce_ms >= 0) ba.push_back(x->bwd_allreduce_ms);
      if (x->step_ms >= 0) st.push_back(x->step_ms);
    }
    t.fwd_ms = median(f), t.bwd_ms = median(b), t.bwd_inner_ms = median(bi), t.bwd_allreduce_ms = median(ba);
    t.step_ms = median(st);
    t.samples = static_cast<int>(s.size());
    t.from_micro = micro;
    if (t.fwd_ms >= 0 && t.bwd_ms >= 0 && t.step_ms >= 0) t.total_ms = t.fwd_ms + t.bwd_ms + t.step_ms;
    return t;
  }
  return t;
}

namespace {

// ---------------------------------------------------------------------------------------------
// The rules (issue 25: diagnose as a table of causes, each with its evidence reader). Each reads the
// run through a RuleContext and returns its Cause, or nothing when its evidence is absent; the slow
// rules run in kSlowRules' order (their observations and planner what-ifs keep that order) and are
// then ranked by gain.

// A cause title's " (about 12.3 ms per step)", or "" when no gain was counted (gain_ms < 0).
std::string gain_suffix(double gain_ms) {
  return gain_ms >= 0 ? fmt::format(" (about {} per step)", ms(gain_ms)) : "";
}

// What every rule reads: the log, the inputs, the diagnosis so far (rules add observations to it), the
// config's knobs with the batch sizes the planner resolved, the prediction and the measured timers.
struct RuleContext {
  const RunLog& log;
  const DiagnoseInputs& in;
  Diagnosis& d;
  planner::ZeroConfig z;
  std::optional<Planned> base;
  int steps = 1;      // optimizer steps the log covers
  int64_t accum = 1;  // gradient accumulation, at least 1
  bool have_timers = false;
  // The planner's predicted gain of a config patch, in ms per step: -1 without a prediction or when
  // the planner refuses the patched config, 0 when it predicts the fix slower (said as an observation).
  double gain_of(const json& patch) const {
    if (!base) return -1;
    auto p = plan_for(merge(d.config, patch), in, nullptr);
    if (!p) return -1;
    const double g = (base->plan.time.step_s - p->plan.time.step_s) * 1000.0;
    // A fix the time model calls slower on this cluster (e.g. a larger last bucket left exposed)
    // still restores DeepSpeed's default; its predicted gain is none, said as such.
    if (g < 0)
      d.observations.push_back(fmt::format(
          "the planner predicts a fix {:.2f} ms per step slower on this cluster: no gain counted", -g));
    return std::max(0.0, g);
  }
};

// 1. The config as run: --config, else the log's JSON dump, else the engine's printed configuration;
// values DeepSpeed resolved and printed win over defaults for keys the user JSON leaves out.
planner::ZeroConfig resolve_config(const RunLog& log, const DiagnoseInputs& in, Diagnosis& d) {
  if (in.config) {
    d.config = *in.config;
    d.config_source = "--config " + in.config_path;
  } else if (log.user_config) {
    d.config = *log.user_config;
    d.config_source = "the log's engine JSON dump (runtime/config.py print_user_config)";
  } else {
    d.config = config_from_engine_dump(log);
    if (!d.config.is_null())
      d.config_source = "the log's engine configuration dump (runtime/config.py print)";
  }
  if (d.config.is_null())
    d.missing.push_back(
        "no DeepSpeed config: pass --config ds_config.json, or keep DeepSpeed's INFO log lines (the engine "
        "prints "
        "'DeepSpeedEngine configuration:' and the JSON at start-up on rank 0)");
  planner::ZeroConfig z = zero_from_config(d.config.is_null() ? json::object() : d.config);
  if (!d.config.is_null()) d.stage = z.stage;
  // Values DeepSpeed resolved and printed win over defaults for keys the user JSON leaves out.
  if (!log.zero_config.empty() && !in.config) {
    const json dump = config_from_engine_dump(log);
    if (dump.contains("zero_optimization")) {
      json zo = d.config.is_object() && d.config.contains("zero_optimization") ? d.config["zero_optimization"]
                                                                               : json::object();
      for (auto it = dump["zero_optimization"].begin(); it != dump["zero_optimization"].end(); ++it)
        if (!zo.contains(it.key())) zo[it.key()] = it.value();
      if (d.config.is_null()) d.config = json::object();
      if (!d.config.contains("zero_optimization")) d.config["zero_optimization"] = json::object();
      d.config["zero_optimization"] = zo;
      z = zero_from_config(d.config);
      d.stage = z.stage;
    }
  }
  return z;
}

// 1b. No config: what the comms logger's calls show (the stage, and the knobs behind them).
void infer_knobs(const RunLog& log, const DiagnoseInputs& in, Diagnosis& d) {
  if (log.comms.empty()) return;
  d.inferred = infer_from_comms(log, optimizer_steps(log), in.workload);
  const CommsInference& inf = *d.inferred;
  if (inf.stage >= 0)
    d.observations.push_back("no config in the log; the comms logger shows " + inf.stage_evidence);
  if (inf.stage == 3) d.stage = 3;  // (stages 1 and 2 issue alike calls: d.stage stays unknown)
  if (inf.stage != 3) return;
  if (!in.workload) {
    d.observations.push_back(
        "pass --model and --gpus to read stage3_prefetch_bucket_size and stage3_param_persistence_threshold "
        "from the gathers (zeroplan compares them with DeepSpeed's calls under each setting)");
  } else if (inf.agreeing.empty()) {
    d.observations.push_back(fmt::format(
        "the gathers were compared with DeepSpeed's calls under {} stage-3 settings and none agrees: the "
        "prefetch "
        "and persistence knobs stay unknown{}",
        inf.matches.size(),
        inf.matches.empty() ? " (the log's ranks differ from --gpus, or the model could not be simulated)"
                            : ""));
  } else {
    const GatherMatch& m = inf.agreeing.front();
    if (inf.prefetch_known && !inf.prefetch_off)
      d.observations.push_back(fmt::format(
          "the gathers show stage-3 prefetch on (they agree with DeepSpeed's calls under {} setting(s), {} "
          "parameters, e.g. {}: {})",
          inf.agreeing.size(), m.dtype, m.setting, m.evidence));
    if (inf.persistence_known && !inf.persistence_zero)
      d.observations.push_back(
          "the gathers show stage3_param_persistence_threshold above 0 (small parameters "
          "persist)");
    if (!inf.prefetch_known || !inf.persistence_known) {
      std::string names;
      for (const auto& g : inf.agreeing)
        names += (names.empty() ? "" : "; ") + g.setting + " (" + g.dtype + ")";
      d.observations.push_back(
          fmt::format("the gathers agree with DeepSpeed's calls under {} settings ({}): {} stays unknown",
                      inf.agreeing.size(), names,
                      !inf.prefetch_known && !inf.persistence_known ? "prefetch and persistence"
                      : !inf.prefetch_known                         ? "stage3_prefetch_bucket_size"
                                                                    : "stage3_param_persistence_threshold"));
    }
  }
}

// 2. The prediction for the same run (the planner's plan of the config on --model/--gpus); the rules
// read the knobs as the config writes them, batch sizes as the planner resolved them.
std::optional<Planned> predict_run(const RunLog& log, const DiagnoseInputs& in, Diagnosis& d,
                                   planner::ZeroConfig& z) {
  std::vector<std::string> plan_notes;
  std::optional<Planned> base = plan_for(d.config, in, &plan_notes);
  for (auto& n : plan_notes) d.observations.push_back(n);
  if (base) {
    d.workload = base->w;
    d.predicted = base->plan;
    // The rules read the knobs as the config writes them (z); batch sizes as the planner resolved them.
    z.micro_batch = base->plan.zero.micro_batch;
    z.grad_accum = base->plan.zero.grad_accum;
  } else if (!in.workload) {
    d.missing.push_back("no --model/--gpus: no prediction to compare with and no planner-predicted gains");
  }
  const int world = log.world_size > 0 ? log.world_size : (log.nccl.nranks > 0 ? log.nccl.nranks : -1);
  if (in.workload && world > 0 && in.workload->cluster.world_size() != world)
    d.observations.push_back(
        fmt::format("the log ran on {} ranks but --gpus describes {}; the prediction uses --gpus", world,
                    in.workload->cluster.world_size()));
  return base;
}

// OOM: always first (a run that died has no step time to speed up).
std::optional<Cause> oom_cause(const RuleContext& x) {
  const RunLog& log = x.log;
  const DiagnoseInputs& in = x.in;
  Diagnosis& d = x.d;
  if (!log.ooms.empty()) {
    const OomEvent& o = log.ooms.front();
    Cause c;
    c.id = "oom";
    c.title = fmt::format("CUDA out of memory{}: tried to allocate {} with {} free of {}",
                          o.gpu >= 0 ? fmt::format(" on GPU {}", o.gpu) : "", gib(o.tried_bytes),
                          gib(o.free_bytes), gib(o.total_bytes));
    c.evidence.push_back(fmt::format("line {}: {}", o.line, o.text));
    if (!o.context.empty()) {
      std::string phase = "unknown phase";
      const auto& ctx = o.context;
      if (ctx.find("step") != std::string::npos || ctx.find("optimizer") != std::string::npos)
        phase = "the optimizer step (optimizer states / fp32 partitions)";
      else if (ctx.find("backward") != std::string::npos || ctx.find("reduce") != std::string::npos)
        phase = "the backward pass (gradients, activations kept for backward)";
      else if (ctx.find("forward") != std::string::npos || ctx.find("fetch") != std::string::npos)
        phase = "the forward pass (activations, gathered parameters)";
      else if (ctx.find("initialize") != std::string::npos || ctx.find("__init__") != std::string::npos ||
               ctx.find("_apply") != std::string::npos)
        phase = "start-up (the model's parameters)";
      c.evidence.push_back(fmt::format("it happened in {} (last frame before it: {})", phase, ctx));
    }
    if (o.allocated_bytes >= 0 && o.reserved_unallocated_bytes >= 0)
      c.evidence.push_back(
          fmt::format("PyTorch held {} allocated and {} reserved but unallocated (fragmentation)",
                      gib(o.allocated_bytes), gib(o.reserved_unallocated_bytes)));
    if (log.ooms.size() > 1) c.evidence.push_back(fmt::format("{} OOM messages in the log", log.ooms.size()));
    if (d.predicted) {
      const auto& mem = d.predicted->memory;
      planner::Category big = planner::Category::Parameters;
      for (int k = 0; k < planner::kNumCategories; ++k)
        if (mem.at_peak[k] > mem.category(big)) big = static_cast<planner::Category>(k);
      c.evidence.push_back(fmt::format(
          "the planner puts this config's peak at {:.1f} GB of {:.1f} GB usable; the largest part is {} "
          "({:.1f} GB)",
          gb(mem.peak), gb(d.predicted->capacity_bytes), planner::category_name(big), gb(mem.category(big))));
      planner::Workload ws = *in.workload;
      ws.train.precision = d.predicted->precision;
      ws.train.micro_batch.reset();
      ws.train.grad_accum.reset();
      ws.train.global_batch = d.predicted->global_batch;
      planner::SearchOptions so;
      so.memory_margin = in.memory_margin;
      const auto sr = planner::search(ws, so);
      if (sr.recommendation) {
        const auto& r = sr.recommendation->zero;
        c.fix_text = fmt::format(
            "what fits, same global batch {}: ZeRO-{}, micro-batch {} x accum {}, checkpointing {}, offload "
            "optimizer {}, "
            "parameters {}: peak {:.1f} GB, step {} (zeroplan --emit writes it)",
            d.predicted->global_batch, r.stage, r.micro_batch, r.grad_accum,
            planner::to_string(r.checkpointing), planner::to_string(r.offload_optimizer),
            planner::to_string(r.offload_param), gb(sr.recommendation->memory.peak),
            ms(sr.recommendation->time.step_s * 1000));
        json zo = {{"stage", r.stage}};
        zo["offload_optimizer"] = r.offload_optimizer == planner::Offload::None
                                      ? json(nullptr)
                                      : json{{"device", planner::to_string(r.offload_optimizer)}};
        zo["offload_param"] = r.offload_param == planner::Offload::None
                                  ? json(nullptr)
                                  : json{{"device", planner::to_string(r.offload_param)}};
        c.fix = {{"zero_optimization", zo},
                 {"train_micro_batch_size_per_gpu", r.micro_batch},
                 {"gradient_accumulation_steps", r.grad_accum}};
        if (d.config.contains("train_batch_size")) c.fix["train_batch_size"] = d.predicted->global_batch;
      } else {
        c.fix_text = "nothing fits this model on these GPUs at this batch: " + sr.no_fit_reason;
      }
    } else {
      c.fix_text =
          "pass --model and --gpus to see which component overflows and a configuration that fits; the usual "
          "levers: "
          "activation checkpointing, a smaller micro-batch with more accumulation, ZeRO-3, optimizer offload";
    }
    return c;
  }
  return std::nullopt;
}

// Without a planner prediction, prefetch off's gain from the log's own timers: a forward is about half a
// backward's compute (2 of the 6 FLOPs per parameter and token), so the forward's excess over half the
// backward's compute is at most the exposed gathers.
void measured_forward_gain(const RuleContext& x, Cause& c) {
  const PhaseTimes& m = x.d.measured;
  if (c.gain_ms < 0 && x.have_timers && m.bwd_inner_ms > 0) {
    c.gain_ms = std::max(0.0, m.fwd_ms - m.bwd_inner_ms / 2) * static_cast<double>(x.accum);
    c.gain_basis = "measured: fwd_microstep minus half of bwd_inner_microstep, the exposed gathers at most";
  }
}

// DeepSpeed's defaults that the fixes restore (runtime/zero/config.py): stage3_prefetch_bucket_size 5e7,
// stage3_param_persistence_threshold 1e5, reduce_bucket_size and allgather_bucket_size 5e8 elements.
constexpr int64_t kDefaultPrefetch = 50'000'000;
constexpr int64_t kDefaultPersistence = 100'000;
constexpr int64_t kDefaultBucket = 500'000'000;

// A cause whose fix restores DeepSpeed's default of one zero_optimization key.
Cause restoring_default(const char* id, const char* key, int64_t value) {
  Cause c;
  c.id = id;
  c.fix = {{"zero_optimization", {{key, value}}}};
  c.fix_text =
      fmt::format("set zero_optimization.{} to {} (DeepSpeed's default, runtime/zero/config.py)", key, value);
  return c;
}

// Stage-3 prefetch off: every forward/backward parameter all-gather waits on the compute stream
// (deepspeed/runtime/zero/partitioned_param_coordinator.py fetch_sub_module: prefetch only when
// prefetch_bucket_size > 0).
std::optional<Cause> prefetch_off_cause(const RuleContext& x) {
  const RunLog& log = x.log;
  Diagnosis& d = x.d;
  const planner::ZeroConfig& z = x.z;
  const PhaseTimes& m = x.d.measured;
  const int steps = x.steps;
  const bool have_timers = x.have_timers;
  if (z.stage == 3 && z.prefetch_bucket_size == 0) {
    Cause c = restoring_default("prefetch_off", "stage3_prefetch_bucket_size", kDefaultPrefetch);
    c.evidence.push_back(fmt::format("stage3_prefetch_bucket_size = 0 in {}", d.config_source));
    const int64_t gathers = calls(log, is_gather, 1);
    if (gathers > 0)
      c.evidence.push_back(
          fmt::format("comms logger: {} parameter all-gathers in {} logged steps, none of them prefetched",
                      gathers, steps));
    if (have_timers && m.bwd_inner_ms > 0)
      c.evidence.push_back(
          fmt::format("fwd_microstep {} against bwd_inner_microstep {}: a forward is about half a backward's "
                      "compute (2 of the 6 FLOPs per parameter and token)",
                      ms(m.fwd_ms), ms(m.bwd_inner_ms)));
    c.gain_ms = x.gain_of(c.fix);
    c.gain_basis = "planner";
    measured_forward_gain(x, c);
    c.title = fmt::format("stage3_prefetch_bucket_size is 0: every stage-3 parameter all-gather is exposed{}",
                          gain_suffix(c.gain_ms));
    return c;
  }
  return std::nullopt;
}

// Tiny buckets: a reduction bucket far below what reaches the link's bandwidth turns one gradient
// reduction into many latency-bound collectives (runtime/zero/stage_1_and_2.py reduce_ipg_grads is
// called each time reduce_bucket_size elements are ready; stage3.py __reduce_and_partition_ipg_grads).
std::optional<Cause> tiny_buckets_cause(const RuleContext& x) {
  const RunLog& log = x.log;
  Diagnosis& d = x.d;
  const planner::ZeroConfig& z = x.z;
  const int steps = x.steps;
  // 1e6 elements: 1/50 of the smallest bucket the planner searches (kSearchBucketSizes, 5e7) and
  // 1/500 of DeepSpeed's default 5e8; 2-4 MB messages are where NCCL all-reduce busbw is still
  // far below its plateau (nccl-tests curves in hwprofiles/links).
  constexpr int64_t kTinyBucket = 1'000'000;
  const bool tiny_r = z.stage >= 1 && z.reduce_bucket_size < kTinyBucket;
  const bool tiny_a = (z.stage == 1 || z.stage == 2) && z.allgather_bucket_size < kTinyBucket;
  if (tiny_r || tiny_a) {
    Cause c;
    c.id = "tiny_buckets";
    json zo = json::object();
    if (tiny_r) zo["reduce_bucket_size"] = kDefaultBucket;
    if (tiny_a) zo["allgather_bucket_size"] = kDefaultBucket;
    c.fix = {{"zero_optimization", zo}};
    c.fix_text =
        fmt::format("set {} to 500000000 (DeepSpeed's default, runtime/zero/config.py)",
                    tiny_r && tiny_a ? "zero_optimization.reduce_bucket_size and allgather_bucket_size"
                    : tiny_r         ? "zero_optimization.reduce_bucket_size"
                                     : "zero_optimization.allgather_bucket_size");
    c.evidence.push_back(fmt::format("reduce_bucket_size = {}, allgather_bucket_size = {} elements in {}",
                                     z.reduce_bucket_size, z.allgather_bucket_size, d.config_source));
    const int64_t red = calls(log, is_reduction);
    if (red > 0) {
      int64_t small = 0;
      for (const auto& r : log.comms)
        if (is_reduction(r.op) && r.message_bytes >= 65 && r.message_bytes < kTinyBucket * 2)
          small += r.count;
      c.evidence.push_back(fmt::format(
          "comms logger: {} gradient reductions in {} logged steps ({:.0f} per step), {} of them under {}",
          red, steps, static_cast<double>(red) / steps, small, size_str(kTinyBucket * 2)));
    }
    c.gain_ms = x.gain_of(c.fix);
    c.gain_basis = "planner";
    c.title = fmt::format(
        "tiny buckets ({} elements): the gradient reduction is split into many latency-bound collectives{}",
        std::min(tiny_r ? z.reduce_bucket_size : INT64_MAX, tiny_a ? z.allgather_bucket_size : INT64_MAX),
        gain_suffix(c.gain_ms));
    return c;
  }
  return std::nullopt;
}

// Stage-3 persistence 0: no parameter stays gathered, so every norm and bias is partitioned and fetched
// again each time its module runs (runtime/zero/parameter_offload.py mark_persistent_parameters: only
// parameters of at most stage3_param_persistence_threshold elements persist; DeepSpeed's config docs:
// "Smaller values use less memory, but can greatly increase communication (especially latency-bound
// messages)").
std::optional<Cause> persistence_zero_cause(const RuleContext& x) {
  const planner::ZeroConfig& z = x.z;
  if (z.stage != 3 || z.param_persistence_threshold != 0) return std::nullopt;
  Cause c = restoring_default("persistence_zero", "stage3_param_persistence_threshold", kDefaultPersistence);
  c.evidence.push_back(fmt::format("stage3_param_persistence_threshold = 0 in {}", x.d.config_source));
  const int64_t gathers = calls(x.log, is_gather, 1);
  if (gathers > 0)
    c.evidence.push_back(
        fmt::format("comms logger: {} parameter all-gathers in {} logged steps ({:.0f} per step)", gathers,
                    x.steps, static_cast<double>(gathers) / x.steps));
  c.gain_ms = x.gain_of(c.fix);
  c.gain_basis = "planner";
  c.title = fmt::format(
      "stage3_param_persistence_threshold is 0: every small parameter (norms, biases) is gathered again each "
      "time its module runs{}",
      gain_suffix(c.gain_ms));
  return c;
}

// Without a config, the knobs the comms logger's calls reveal (diagnose/comms_inference.h). The causes
// carry the ids of the config rules above; their evidence is the calls, and their gain is unknown unless
// the log's timers give one (no config: no plan to compare with).
std::string inferred_source(const CommsInference& inf) {
  return inf.stage_evidence.empty() ? std::string("the comms logger")
                                    : "the comms logger (" + inf.stage_evidence + ")";
}

std::optional<Cause> inferred_buckets_cause(const RuleContext& x) {
  const auto& inf = x.d.inferred;
  if (!inf || !inf->tiny_buckets) return std::nullopt;
  Cause c;
  c.id = "tiny_buckets";
  c.evidence.push_back(fmt::format(
      "comms logger: {:.0f} gradient reductions per step averaging {:.2f} MiB ({:.2f} MiB per step in all)",
      inf->reductions_per_step, inf->reduced_bytes_per_step / inf->reductions_per_step / (1 << 20),
      inf->reduced_bytes_per_step / (1 << 20)));
  c.evidence.push_back(
      fmt::format("DeepSpeed's default reduce_bucket_size (5e8 elements, at least 1 GB) sends that in at "
                  "most {} call(s) per "
                  "step: these buckets hold under 1e6 elements whatever the gradient dtype",
                  inf->default_calls_at_most));
  c.evidence.push_back("read from " + inferred_source(*inf));
  // Only the reduction: 0.19.8 gathers the updated partitions in one call per step whatever
  // allgather_bucket_size says (recorded: q2_tiny_buckets.log, 2000 elements, one 9.54 MiB gather per step).
  c.fix = {{"zero_optimization", {{"reduce_bucket_size", kDefaultBucket}}}};
  c.fix_text =
      "set zero_optimization.reduce_bucket_size to 500000000 (DeepSpeed's default, runtime/zero/config.py)";
  c.title =
      "tiny buckets (inferred from the comms logger): the gradient reduction is split into many "
      "latency-bound "
      "collectives";
  return c;
}

// The stage-3 settings the gathers were compared with, as evidence: the one that agrees, then why each
// other one (in the same dtype) does not.
void gather_evidence(const CommsInference& inf, Cause& c) {
  const std::string& dtype = inf.agreeing.front().dtype;
  for (const auto& m : inf.matches) {
    if (m.dtype != dtype) continue;
    c.evidence.push_back(m.consistent
                             ? fmt::format("the log's parameter all-gathers are the calls DeepSpeed 0.19.8 "
                                           "issues with {} ({} parameters): {}",
                                           m.setting, m.dtype, m.evidence)
                             : fmt::format("not {}: {}", m.setting, m.evidence));
  }
  c.evidence.push_back("read from " + inferred_source(inf));
}

std::optional<Cause> inferred_prefetch_cause(const RuleContext& x) {
  const auto& inf = x.d.inferred;
  if (!inf || !inf->prefetch_off) return std::nullopt;
  Cause c = restoring_default("prefetch_off", "stage3_prefetch_bucket_size", kDefaultPrefetch);
  gather_evidence(*inf, c);
  measured_forward_gain(x, c);
  c.title = fmt::format(
      "stage3_prefetch_bucket_size is 0 (inferred from the comms logger): every stage-3 parameter all-gather "
      "is "
      "exposed{}",
      gain_suffix(c.gain_ms));
  return c;
}

std::optional<Cause> inferred_persistence_cause(const RuleContext& x) {
  const auto& inf = x.d.inferred;
  if (!inf || !inf->persistence_zero) return std::nullopt;
  Cause c = restoring_default("persistence_zero", "stage3_param_persistence_threshold", kDefaultPersistence);
  gather_evidence(*inf, c);
  c.title =
      "stage3_param_persistence_threshold is 0 (inferred from the comms logger): every small parameter is "
      "gathered again each time its module runs";
  return c;
}

// overlap_comm off (stages 1-3): the bucket reductions run on the compute stream, after each
// bucket fills, instead of on DeepSpeed's reduction stream during the backward
// (stage_1_and_2.py / stage3.py: reduction_stream used only with overlap_comm).
std::optional<Cause> overlap_off_cause(const RuleContext& x) {
  Diagnosis& d = x.d;
  const planner::ZeroConfig& z = x.z;
  const PhaseTimes& m = x.d.measured;
  const int64_t accum = x.accum;
  const bool have_timers = x.have_timers;
  if (z.stage >= 1 && !z.overlap_comm) {
    Cause c;
    c.id = "overlap_off";
    c.fix = {{"zero_optimization", {{"overlap_comm", true}}}};
    c.fix_text =
        "set zero_optimization.overlap_comm to true (DeepSpeed's default for stage 3; stages 1-2 default to "
        "false)";
    c.evidence.push_back(fmt::format("overlap_comm = false in {}", d.config_source));
    if (have_timers && m.bwd_allreduce_ms >= 0)
      c.evidence.push_back(
          fmt::format("bwd_allreduce_microstep {} (the reduction not hidden) beside bwd_inner_microstep {}",
                      ms(m.bwd_allreduce_ms), ms(m.bwd_inner_ms)));
    c.gain_ms = x.gain_of(c.fix);
    c.gain_basis = "planner";
    if (c.gain_ms < 0 && have_timers && m.bwd_allreduce_ms >= 0 && m.bwd_inner_ms >= 0) {
      c.gain_ms = std::min(m.bwd_allreduce_ms, m.bwd_inner_ms) * static_cast<double>(accum);
      c.gain_basis = "measured: bwd_allreduce_microstep, at most the backward compute it can hide behind";
    }
    c.title = fmt::format(
        "overlap_comm is off: the gradient reduction runs after the backward instead of during it{}",
        gain_suffix(c.gain_ms));
    return c;
  }
  return std::nullopt;
}

// The logged collectives beside the link model's busbw at their size (Diagnosis::collectives). Under AutoTP
// (--tp, planner/tensor_parallel.h) ZeRO's collectives run in the data-parallel group of world / tp ranks
// and AutoTP's all-reduces of one micro-batch's hidden states (micro x seq x hidden,
// module_inject/layers.py RowParallel / ColumnParallel) in the TP group of tp consecutive GPUs: an
// all-reduce of `tp_bytes` is counted as the TP group's. Returns those calls.
int64_t check_logged_collectives(const RunLog& log, Diagnosis& d, const hw::ClusterSpec& cluster, int tp,
                                 int64_t tp_bytes) {
  const auto topo = planner::data_parallel_topology(cluster, tp);
  const auto tp_topo = planner::contiguous_group_topology(cluster, tp);
  const int n = topo.ranks;
  int64_t tp_calls = 0;
  for (const auto& r : log.comms) {
    const auto k = kind_of(r.op);
    if (!k || r.message_bytes < 65) continue;
    CollectiveCheck cc;
    cc.op = r.op;
    cc.message_bytes = r.message_bytes;
    cc.count = r.count;
    cc.measured_busbw_GBps = r.busbw_gbps / 8.0;  // comms_logging reports Gbps (bits)
    const bool in_tp = *k == planner::CollectiveKind::AllReduce && r.message_bytes == tp_bytes;
    cc.group = in_tp ? "tensor_parallel" : "zero";
    cc.group_size = in_tp ? tp : n;
    if (in_tp) tp_calls += r.count;
    // The logger's size is one rank's part for all-gather/reduce-scatter (calc_bw_log multiplies by n).
    const int64_t full =
        (*k == planner::CollectiveKind::AllGather || *k == planner::CollectiveKind::ReduceScatter)
            ? r.message_bytes * n
            : r.message_bytes;
    cc.model_busbw_GBps = planner::collective_busbw_GBps(in_tp ? tp_topo : topo, full);
    d.collectives.push_back(cc);
  }
  return tp_calls;
}

// AutoTP's all-reduces in the comms logger against the plan's TP-group calls.
void autotp_observation(Diagnosis& d, int64_t tp_bytes, int64_t tp_calls, int steps) {
  int64_t planned = 0;
  for (int i = 0; i < d.predicted->time.num_collectives; ++i) {
    const auto& c = d.predicted->time.collectives[static_cast<size_t>(i)];
    if (c.group != nullptr && std::string(c.group) == "tensor_parallel") planned = c.count;
  }
  d.observations.push_back(
      tp_calls > 0
          ? fmt::format("AutoTP: the comms logger shows {} all-reduces of {} (one micro-batch's hidden "
                        "states: row-parallel outputs and column-parallel input gradients) in {} logged "
                        "step(s), {:.0f} per step; the plan expects {} TP-group calls per step (its "
                        "logits gather included)",
                        tp_calls, size_str(tp_bytes), steps,
                        static_cast<double>(tp_calls) / std::max(1, steps), planned)
          : fmt::format("AutoTP: no all-reduce of {} (micro x seq x hidden) in the comms logger: check "
                        "that tensor_parallel.autotp_size took effect (the engine logs its TP groups)",
                        size_str(tp_bytes)));
}

// The low-busbw cause of the collective `worst`: NCCL's transport as evidence, the fix it points to, and
// the gain of every logged collective >= 1 MiB at the link model's busbw, capped at the measured step's
// excess over the prediction.
Cause low_busbw(const RuleContext& x, const CollectiveCheck& worst, const planner::Workload& wl) {
  const RunLog& log = x.log;
  const Diagnosis& d = x.d;
  const PhaseTimes& m = d.measured;
  Cause c;
  c.id = "low_busbw";
  const double ratio = worst.measured_busbw_GBps / worst.model_busbw_GBps;
  c.title = fmt::format(
      "{} reaches {:.1f} GB/s busbw on {} messages, {:.0f}% of what {} does at that size ({:.1f} GB/s)",
      worst.op, worst.measured_busbw_GBps, size_str(worst.message_bytes), ratio * 100,
      wl.cluster.intra_node.name, worst.model_busbw_GBps);
  c.evidence.push_back(fmt::format("comms logger: {} x {} at busbw {:.2f} Gbps", worst.count,
                                   size_str(worst.message_bytes), worst.measured_busbw_GBps * 8));
  for (const auto& [k, v] : log.nccl.evidence)
    if (k.rfind("transport", 0) == 0 || k == "p2p disabled" || k == "network" || k.rfind("nic", 0) == 0)
      c.evidence.push_back("NCCL: " + v);
  if (log.nccl.transports.empty())
    c.evidence.push_back(
        "no NCCL_DEBUG=INFO lines: run with NCCL_DEBUG=INFO to see which transport NCCL picked");
  const bool shm = log.nccl.transports.count("SHM") || log.nccl.p2p_disabled;
  const bool sock = log.nccl.transports.count("NET/Socket");
  c.fix_text =
      shm    ? "NCCL uses shared memory through the host, not peer-to-peer: check ACS/IOMMU (nvidia-smi "
               "topo -m), NCCL_P2P_DISABLE/NCCL_P2P_LEVEL"
      : sock ? "NCCL uses TCP sockets between nodes: check that the IB/RoCE NIC is visible (NCCL_IB_HCA, "
               "NCCL_SOCKET_IFNAME)"
             : "not a config knob: profile the interconnect with nccl-tests (all_reduce_perf) and compare";
  // Every logged collective of >= 1 MiB at the link model's busbw instead of its own.
  double saved = 0;
  for (const auto& cc : d.collectives) {
    if (cc.message_bytes < (1 << 20) || cc.model_busbw_GBps <= 0 ||
        cc.measured_busbw_GBps >= cc.model_busbw_GBps)
      continue;
    for (const auto& r : log.comms)
      if (r.op == cc.op && r.message_bytes == cc.message_bytes)
        saved += r.total_ms * (1 - cc.measured_busbw_GBps / cc.model_busbw_GBps);
  }
  c.gain_ms = saved / x.steps;
  c.gain_basis =
      "measured: the logged time of every collective >= 1 MiB at the link model's busbw instead, as if "
      "none were hidden behind compute";
  // It cannot save more than the measured step exceeds the prediction.
  if (d.predicted && x.have_timers && m.total_ms > 0) {
    const double excess =
        std::max(0.0, m.total_ms * static_cast<double>(x.accum) - d.predicted->time.step_s * 1000);
    if (c.gain_ms > excess) {
      c.gain_ms = excess;
      c.gain_basis = "measured: capped at the measured step minus the predicted one";
    }
  }
  return c;
}

// Bus bandwidth against the link model (NCCL runs only; gloo on CPU is not what the links describe).
// Also fills Diagnosis::collectives, the logged collectives beside the model's busbw at their size.
std::optional<Cause> low_busbw_cause(const RuleContext& x) {
  const RunLog& log = x.log;
  Diagnosis& d = x.d;
  // The workload as the config runs it, else --model/--gpus as given (a log without its config): the
  // comparison needs the cluster only.
  const planner::Workload* wl = d.workload ? &*d.workload : x.in.workload ? &*x.in.workload : nullptr;
  const bool gpu_backend = !log.cpu_accelerator && log.backend != "gloo" && !(wl && wl->cluster.cpu_backend);
  if (!wl || log.comms.empty()) {
    if (!log.comms.empty())
      d.observations.push_back(
          "comms logger table read; pass --gpus to compare its busbw with the link model");
    return std::nullopt;
  }
  const int tp = std::max(1, wl->train.tensor_parallel);
  int64_t tp_bytes = -1;
  if (tp > 1 && d.predicted && d.workload && !d.workload->model.params_only)
    tp_bytes = d.predicted->zero.micro_batch * d.workload->train.rank_seq_len() *
               d.workload->full_model().hidden_size *
               (d.workload->train.precision == planner::Precision::FP32 ? 4 : 2);
  const int64_t tp_calls = check_logged_collectives(log, d, wl->cluster, tp, tp_bytes);
  if (tp_bytes > 0) autotp_observation(d, tp_bytes, tp_calls, x.steps);
  // The collective that matters most: the largest message moved (busbw is only meaningful there).
  const CollectiveCheck* worst = nullptr;
  double weight = 0;
  for (const auto& cc : d.collectives) {
    const double wgt = static_cast<double>(cc.message_bytes) * static_cast<double>(cc.count);
    if (cc.message_bytes >= (1 << 20) && wgt > weight) weight = wgt, worst = &cc;
  }
  if (!gpu_backend) {
    d.observations.push_back(
        "bus bandwidth not compared with the link model: this run used gloo/CPU, the link model describes "
        "NCCL on GPUs");
  } else if (worst && worst->model_busbw_GBps > 0 &&
             worst->measured_busbw_GBps < 0.4 * worst->model_busbw_GBps) {
    // 40%: below what NCCL reaches at this size on the link's own measured curve by a margin
    // larger than the run-to-run spread of nccl-tests (a few %), so the transport itself is suspect.
    return low_busbw(x, *worst, *wl);
  }
  return std::nullopt;
}

// Optimizer offload dominating the step (DeepSpeedCPUAdam on the host + the PCIe copies).
std::optional<Cause> offload_step_cause(const RuleContext& x) {
  const DiagnoseInputs& in = x.in;
  Diagnosis& d = x.d;
  const planner::ZeroConfig& z = x.z;
  const PhaseTimes& m = x.d.measured;
  const bool have_timers = x.have_timers;
  if (z.offload_optimizer != planner::Offload::None) {
    const double share = have_timers && m.total_ms > 0 ? m.step_ms / m.total_ms : -1;
    const double pshare = d.predicted && d.predicted->time.step_s > 0
                              ? d.predicted->time.offload_s / d.predicted->time.step_s
                              : -1;
    if (share >= 0)
      d.observations.push_back(
          fmt::format("optimizer offloaded to {}: step_microstep {} is {:.0f}% of the micro-step",
                      planner::to_string(z.offload_optimizer), ms(m.step_ms), share * 100));
    // Half the step: then removing offload (when it fits) is worth more than any communication knob.
    if (share >= 0.5 || (share < 0 && pshare >= 0.5)) {
      Cause c;
      c.id = "offload_step";
      c.fix = {{"zero_optimization", {{"offload_optimizer", nullptr}}}};
      c.gain_ms = x.gain_of(c.fix);
      c.gain_basis = "planner";
      auto nofl = plan_for(merge(d.config, c.fix), in, nullptr);
      if (nofl && !nofl->plan.fits) {
        c.fix = nullptr;
        c.gain_ms = -1;
        c.fix_text = fmt::format(
            "offload is needed: without it the planner's peak is {:.1f} GB of {:.1f} GB usable; a larger "
            "micro-batch shares the fixed CPU Adam cost over more tokens",
            gb(nofl->plan.memory.peak), gb(nofl->plan.capacity_bytes));
      } else {
        c.fix_text = "remove zero_optimization.offload_optimizer (run the optimizer on the GPU)";
      }
      c.title = fmt::format("CPU Adam dominates the step: step_microstep {} of {} per micro-step",
                            ms(m.step_ms), ms(m.total_ms));
      c.evidence.push_back(fmt::format("offload_optimizer.device = {} in {}",
                                       planner::to_string(z.offload_optimizer), d.config_source));
      if (pshare >= 0)
        c.evidence.push_back(fmt::format("the planner puts offload at {} of a {} step",
                                         ms(d.predicted->time.offload_s * 1000),
                                         ms(d.predicted->time.step_s * 1000)));
      return c;
    }
  }
  return std::nullopt;
}

// ZeRO-3 module hooks: host time per module pass (planner::StepTime::hook_*), a cause only when
// the planner says ZeRO-2 fits and is faster.
std::optional<Cause> zero3_hooks_cause(const RuleContext& x) {
  const DiagnoseInputs& in = x.in;
  Diagnosis& d = x.d;
  const planner::ZeroConfig& z = x.z;
  if (d.predicted && z.stage == 3 && d.predicted->time.hook_overhead_s > 0.1 * d.predicted->time.step_s) {
    json patch = {{"zero_optimization", {{"stage", 2}, {"overlap_comm", true}}}};
    auto s2 = plan_for(merge(d.config, patch), in, nullptr);
    const auto& t = d.predicted->time;
    // The host time per module pass the prediction used (time_model.json "stage3_hooks" over
    // --host-speed); it said "0.121 ms" here after the model had moved to the measured 0.376 ms.
    const double per_pass_ms =
        t.hooked_module_calls > 0 ? t.hook_host_s * 1000 / static_cast<double>(t.hooked_module_calls) : 0.0;
    const std::string what = fmt::format(
        "ZeRO-3 module hooks: {} module passes x {:.3f} ms = {} per step, {} not hidden",
        t.hooked_module_calls, per_pass_ms, ms(t.hook_host_s * 1000), ms(t.hook_overhead_s * 1000));
    if (s2 && s2->plan.fits && s2->plan.time.step_s < t.step_s) {
      Cause c;
      c.id = "zero3_hooks";
      c.title = what;
      c.evidence.push_back(
          "planner time model (planner/data/time_model.json \"stage3_hooks\": DeepSpeed 0.19.8's host time "
          "per "
          "module pass, measured beside an H100, divided by --host-speed; DeepSpeed #1174, PR #1188)");
      c.fix = patch;
      c.fix_text = fmt::format("ZeRO-2 fits ({:.1f} GB peak): set zero_optimization.stage to 2",
                               gb(s2->plan.memory.peak));
      c.gain_ms = (t.step_s - s2->plan.time.step_s) * 1000;
      c.gain_basis = "planner";
      return c;
    } else {
      d.observations.push_back(what + " (ZeRO-2 does not fit or is not faster: inherent to this run)");
    }
  }
  return std::nullopt;
}

using Rule = std::optional<Cause> (*)(const RuleContext&);
// The rules that make a run slow, in the order their evidence is read (ranking by gain comes after).
constexpr Rule kSlowRules[] = {
    prefetch_off_cause,         persistence_zero_cause, tiny_buckets_cause, inferred_prefetch_cause,
    inferred_persistence_cause, inferred_buckets_cause, overlap_off_cause,  low_busbw_cause,
    offload_step_cause,         zero3_hooks_cause};

// 4. Phase comparison: per micro-step, measured against predicted.
void compare_phases(const RuleContext& x) {
  Diagnosis& d = x.d;
  const PhaseTimes& m = x.d.measured;
  const int64_t accum = x.accum;
  const bool have_timers = x.have_timers;
  if (d.predicted && have_timers) {
    const auto& t = d.predicted->time;
    double fwd_comm = 0, bwd_comm = 0;
    for (int i = 0; i < t.num_collectives; ++i) {
      const std::string nm = t.collectives[i].name;
      (nm.find("forward") != std::string::npos ? fwd_comm : bwd_comm) += t.collectives[i].exposed_s;
    }
    const double a = static_cast<double>(accum);
    const double pf = (t.forward_s + fwd_comm) / a * 1000,
                 pb = (t.backward_s + t.recompute_s + bwd_comm) / a * 1000;
    d.observations.push_back(fmt::format(
        "per micro-step, measured vs predicted: forward {} vs {}, backward {} vs {}, step {} vs "
        "{} (the planner's optimizer and offload, which run once per optimizer step)",
        ms(m.fwd_ms), ms(pf), ms(m.bwd_ms), ms(pb), ms(m.step_ms), ms((t.optimizer_s + t.offload_s) * 1000)));
    if (m.total_ms > 0 && t.step_s > 0) {
      const double ratio = m.total_ms * a / (t.step_s * 1000);
      d.observations.push_back(fmt::format("measured step {} is {:.1f}x the predicted {}", ms(m.total_ms * a),
                                           ratio, ms(t.step_s * 1000)));
    }
  }
}

// Memory: the highest Max_MA the log shows (see_memory_usage / ThroughputTimer print GiB: bytes /
// 1024^3, labelled "GB") against the planner's peak (GB = 1e9 bytes).
void compare_memory(const RuleContext& x) {
  const RunLog& log = x.log;
  Diagnosis& d = x.d;
  if (d.predicted) {
    double max_ma = -1;
    for (const auto& ms_ : log.memory) max_ma = std::max(max_ma, ms_.max_ma_gib);
    if (max_ma > 0)
      d.observations.push_back(fmt::format(
          "memory: highest Max_MA in the log {:.2f} GB against the predicted peak {:.2f} GB ({:.0f}%)",
          max_ma * 1.073741824, gb(d.predicted->memory.peak),
          100.0 * max_ma * 1.073741824 / std::max(1e-9, gb(d.predicted->memory.peak))));
  }
}

// Pinned host memory as DeepSpeed 0.19 reports it (utils/pin_memory_tracker.py): the largest running total
// logged, against the planner's pinned bytes per rank. Page-locked memory cannot be swapped out, and
// DeepSpeed's tracker documents that it counts against the memlock limit (ulimit -l).
void compare_pinned(const RuleContext& x) {
  const RunLog& log = x.log;
  Diagnosis& d = x.d;
  if (log.pinned.empty()) return;
  const PinnedSample* top = &log.pinned.front();
  for (const auto& p : log.pinned)
    if (p.bytes > top->bytes) top = &p;
  const bool offload =
      x.z.offload_optimizer != planner::Offload::None || x.z.offload_param != planner::Offload::None;
  if (top->bytes == 0) {
    if (offload)
      d.observations.push_back(
          fmt::format("pinned memory: DeepSpeed logged 0 B pinned (line {}, '[pinned-memory {}]') although "
                      "the config offloads: "
                      "the offload copies run from pageable memory (pin_memory false, or an accelerator that "
                      "does not pin), "
                      "at the host's pageable copy speed",
                      top->line, top->tag));
    return;
  }
  std::string s = fmt::format(
      "pinned memory: DeepSpeed logged {} pinned in {} allocations per process (line {}, '[pinned-memory "
      "{}]'); "
      "page-locked memory cannot be swapped out and counts against the memlock limit: check `ulimit -l` is "
      "unlimited or above it (DeepSpeed utils/pin_memory_tracker.py)",
      gib(top->bytes), top->allocations, top->line, top->tag);
  if (d.predicted && d.workload) {
    const int per_node = std::max(1, d.workload->cluster.gpus_per_node);
    s += fmt::format("; the planner pins {} per rank ({:.2f} GB per node)",
                     gib(d.predicted->memory.host_pinned_per_node / per_node),
                     gb(d.predicted->memory.host_pinned_per_node));
  }
  d.observations.push_back(std::move(s));
}

// The corrected config: every cause's fix merged into the config as run, and its prediction.
void correct_config(const RuleContext& x) {
  const DiagnoseInputs& in = x.in;
  Diagnosis& d = x.d;
  json fixed = d.config;
  bool any_fix = false;
  for (const auto& c : d.causes)
    if (!c.fix.is_null() && fixed.is_object()) {
      fixed = merge(fixed, c.fix);
      any_fix = true;
    }
  if (any_fix) {
    d.fixed_config = fixed;
    if (auto p = plan_for(fixed, in, nullptr)) d.fixed = p->plan;
  }
}

// 5. What the log lacked.
void list_missing(const RuleContext& x) {
  const RunLog& log = x.log;
  Diagnosis& d = x.d;
  const bool have_timers = x.have_timers;
  if (!have_timers)
    d.missing.push_back(
        "no wall_clock_breakdown lines: set \"wall_clock_breakdown\": true to get fwd/bwd/step times per "
        "micro-step");
  if (log.comms.empty())
    d.missing.push_back(
        "no comms logger summary: set \"comms_logger\": {\"enabled\": true} and call "
        "deepspeed.comm.log_summary() at the end");
  if (log.nccl.transports.empty() && !log.cpu_accelerator && log.backend != "gloo")
    d.missing.push_back("no NCCL_DEBUG=INFO lines: the transport NCCL picked (P2P/SHM/NET) is unknown");
  if (log.memory.empty() && log.ooms.empty())
    d.missing.push_back("no memory lines (see_memory_usage / memory_breakdown): memory was not compared");
  if (d.config.is_null() && log.ooms.empty() && d.causes.empty() && !(d.inferred && d.inferred->stage >= 0))
    d.observations.push_back("without a config no rule could be checked");
}

}  // namespace

Diagnosis diagnose(const RunLog& log, const DiagnoseInputs& in) {
  Diagnosis d;
  d.measured = measured_phases(log);
  planner::ZeroConfig z = resolve_config(log, in, d);
  if (d.config.is_null()) infer_knobs(log, in, d);
  std::optional<Planned> base = predict_run(log, in, d, z);
  const RuleContext x{log,
                      in,
                      d,
                      z,
                      std::move(base),
                      optimizer_steps(log),
                      std::max<int64_t>(1, z.grad_accum),
                      d.measured.samples > 0};
  // 3. Causes: an OOM first, then the slow rules, known gains first, largest first (unknown gains keep
  // rule order).
  if (auto c = oom_cause(x)) d.causes.push_back(std::move(*c));
  std::vector<Cause> slow;
  for (Rule rule : kSlowRules)
    if (auto c = rule(x)) slow.push_back(std::move(*c));
  std::stable_sort(slow.begin(), slow.end(), [](const Cause& a, const Cause& b) {
    if ((a.gain_ms >= 0) != (b.gain_ms >= 0)) return a.gain_ms >= 0;
    return a.gain_ms > b.gain_ms;
  });
  for (auto& c : slow) d.causes.push_back(std::move(c));
  compare_phases(x);
  compare_memory(x);
  compare_pinned(x);
  correct_config(x);
  list_missing(x);
  return d;
}

namespace {

// The knobs read from the comms logger (diagnose/comms_inference.h), or null when a config was found.
json inferred_json(const Diagnosis& d) {
  if (!d.inferred) return nullptr;
  const CommsInference& inf = *d.inferred;
  json matches = json::array();
  for (const auto& m : inf.matches)
    matches.push_back(
        {{"setting", m.setting}, {"dtype", m.dtype}, {"consistent", m.consistent}, {"evidence", m.evidence}});
  return {{"stage", inf.stage < 0 ? json(nullptr) : json(inf.stage)},
          {"stage_evidence", inf.stage_evidence},
          {"reductions_per_step", inf.reductions_per_step},
          {"reduced_bytes_per_step", inf.reduced_bytes_per_step},
          {"default_bucket_calls_at_most", inf.default_calls_at_most},
          {"tiny_buckets", inf.tiny_buckets},
          {"gather_matches", matches},
          {"prefetch_known", inf.prefetch_known},
          {"persistence_known", inf.persistence_known},
          {"prefetch_off", inf.prefetch_off},
          {"persistence_zero", inf.persistence_zero}};
}

json pinned_json(const RunLog& log) {
  json pinned = json::array();
  for (const auto& p : log.pinned)
    pinned.push_back({{"tag", p.tag}, {"bytes", p.bytes}, {"allocations", p.allocations}, {"line", p.line}});
  return pinned;
}

}  // namespace

json to_json(const RunLog& log, const Diagnosis& d) {
  json causes = json::array();
  for (const auto& c : d.causes)
    causes.push_back({{"id", c.id},
                      {"title", c.title},
                      {"evidence", c.evidence},
                      {"predicted_gain_ms", c.gain_ms < 0 ? json(nullptr) : json(c.gain_ms)},
                      {"gain_basis", c.gain_ms < 0 ? json(nullptr) : json(c.gain_basis)},
                      {"fix", c.fix},
                      {"fix_text", c.fix_text}});
  json coll = json::array();
  for (const auto& c : d.collectives)
    coll.push_back({{"op", c.op},
                    {"message_bytes", c.message_bytes},
                    {"count", c.count},
                    {"group", c.group},
                    {"group_size", c.group_size},
                    {"measured_busbw_GBps", c.measured_busbw_GBps},
                    {"model_busbw_GBps", c.model_busbw_GBps < 0 ? json(nullptr) : json(c.model_busbw_GBps)}});
  auto opt = [](double v) { return v < 0 ? json(nullptr) : json(v); };
  json measured = {{"fwd_ms", opt(d.measured.fwd_ms)},
                   {"bwd_ms", opt(d.measured.bwd_ms)},
                   {"bwd_inner_ms", opt(d.measured.bwd_inner_ms)},
                   {"bwd_allreduce_ms", opt(d.measured.bwd_allreduce_ms)},
                   {"step_ms", opt(d.measured.step_ms)},
                   {"total_ms", opt(d.measured.total_ms)},
                   {"samples", d.measured.samples},
                   {"per_micro_step", d.measured.from_micro}};
  json pred = nullptr;
  if (d.predicted) {
    const auto& t = d.predicted->time;
    pred = {{"step_ms", t.step_s * 1000},
            {"forward_ms", t.forward_s * 1000},
            {"backward_ms", t.backward_s * 1000},
            {"recompute_ms", t.recompute_s * 1000},
            {"exposed_communication_ms", t.exposed_communication_s * 1000},
            {"offload_ms", t.offload_s * 1000},
            {"hook_overhead_ms", t.hook_overhead_s * 1000},
            {"peak_bytes", d.predicted->memory.peak},
            {"capacity_bytes", d.predicted->capacity_bytes},
            {"fits", d.predicted->fits}};
  }
  json ooms = json::array();
  for (const auto& o : log.ooms)
    ooms.push_back({{"line", o.line},
                    {"gpu", o.gpu},
                    {"tried_bytes", o.tried_bytes},
                    {"free_bytes", o.free_bytes},
                    {"total_bytes", o.total_bytes},
                    {"context", o.context}});
  json nccl = {{"version", log.nccl.version}, {"transports", log.nccl.transports},
               {"nvls", log.nccl.nvls},       {"p2p_disabled", log.nccl.p2p_disabled},
               {"nics", log.nccl.nics},       {"channels", log.nccl.channels}};
  return {{"files", log.files},
          {"lines", log.lines},
          {"recognized_lines", log.recognized_lines},
          {"deepspeed_version", log.deepspeed_version},
          {"backend", log.backend},
          {"world_size", log.world_size},
          {"config_source", d.config_source},
          {"config", d.config},
          {"inferred_from_comms", inferred_json(d)},
          {"stage", d.stage},
          {"measured", measured},
          {"predicted", pred},
          {"predicted_after_fix_ms", d.fixed ? json(d.fixed->time.step_s * 1000) : json(nullptr)},
          {"fixed_config", d.fixed_config},
          {"causes", causes},
          {"collectives", coll},
          {"ooms", ooms},
          {"pinned_memory", pinned_json(log)},
          {"nccl", nccl},
          {"hf_metrics", log.hf_metrics},
          {"observations", d.observations},
          {"missing", d.missing},
          {"notes", log.notes}};
}

std::string format_text(const RunLog& log, const Diagnosis& d) {
  std::string s;
  std::string files;
  for (size_t i = 0; i < log.files.size() && i < 4; ++i) files += (i ? ", " : "") + log.files[i];
  if (log.files.size() > 4) files += fmt::format(" and {} more", log.files.size() - 4);
  s += fmt::format("zeroplan diagnose: {} ({} lines, {} understood)", files, log.lines, log.recognized_lines);
  if (!log.deepspeed_version.empty()) s += ", DeepSpeed " + log.deepspeed_version;
  if (!log.backend.empty()) s += ", backend " + log.backend;
  if (log.world_size > 0) s += fmt::format(", {} ranks", log.world_size);
  s += "\n";
  if (!d.config.is_null()) {
    const auto z = zero_from_config(d.config);
    s += fmt::format(
        "Config ({}): ZeRO-{}, micro-batch {} x accum {}, overlap_comm {}, reduce_bucket_size {}",
        d.config_source, z.stage, z.micro_batch, z.grad_accum, z.overlap_comm, z.reduce_bucket_size);
    if (z.stage == 3) s += fmt::format(", stage3_prefetch_bucket_size {}", z.prefetch_bucket_size);
    if (z.stage == 1 || z.stage == 2) s += fmt::format(", allgather_bucket_size {}", z.allgather_bucket_size);
    if (z.offload_optimizer != planner::Offload::None)
      s += ", offload_optimizer " + planner::to_string(z.offload_optimizer);
    if (z.offload_param != planner::Offload::None)
      s += ", offload_param " + planner::to_string(z.offload_param);
    s += "\n";
  }
  const auto& m = d.measured;
  if (m.samples > 0)
    s += fmt::format(
        "Measured (median of {} {} timer lines of rank 0): fwd {}, bwd {} (inner {}, allreduce {}), step {}; "
        "total {}\n",
        m.samples, m.from_micro ? "micro-step" : "optimizer-step", ms(m.fwd_ms), ms(m.bwd_ms),
        ms(m.bwd_inner_ms), ms(m.bwd_allreduce_ms), ms(m.step_ms), ms(m.total_ms));
  if (d.predicted && d.workload) {
    const auto& t = d.predicted->time;
    s += fmt::format(
        "Predicted ({} on {}x{}): step {} = compute {} + exposed communication {} + offload {} + hooks {}; "
        "peak {:.2f} GB of {:.2f} GB usable\n",
        d.workload->model.name, d.workload->cluster.world_size(), d.workload->cluster.gpu.name,
        ms(t.step_s * 1000), ms(t.compute_s * 1000), ms(t.exposed_communication_s * 1000),
        ms(t.offload_s * 1000), ms(t.hook_overhead_s * 1000), gb(d.predicted->memory.peak),
        gb(d.predicted->capacity_bytes));
  }
  if (!log.comms.empty()) {
    s += "Collectives (comms logger; busbw in GB/s, model = link model at that size):\n";
    s += fmt::format("  {:<24} {:>12} {:>8} {:>12} {:>10} {:>10}\n", "op", "message", "count", "avg latency",
                     "busbw", "model");
    size_t shown = 0;
    for (const auto& r : log.comms) {
      if (r.message_bytes < 65 || shown >= 12) continue;
      double model = -1;
      for (const auto& c : d.collectives)
        if (c.op == r.op && c.message_bytes == r.message_bytes) model = c.model_busbw_GBps;
      s +=
          fmt::format("  {:<24} {:>12} {:>8} {:>9.2f} ms {:>10.3f} {:>10}\n", r.op, size_str(r.message_bytes),
                      r.count, r.avg_ms, r.busbw_gbps / 8, model < 0 ? "-" : fmt::format("{:.1f}", model));
      ++shown;
    }
  }
  if (!log.nccl.transports.empty()) {
    s += "NCCL transports:";
    for (const auto& [k, v] : log.nccl.transports) s += fmt::format(" {} ({} lines)", k, v);
    if (log.nccl.nvls) s += ", NVLS";
    if (!log.nccl.nics.empty()) s += ", NIC " + log.nccl.nics.front();
    s += "\n";
  }
  if (d.causes.empty()) {
    s += "Causes: none found";
    s += !d.config.is_null()
             ? " (the config's knobs are DeepSpeed's defaults or better, and the log shows no OOM)\n"
         : d.inferred && d.inferred->stage >= 0
             ? " (no config; none of the knobs the comms logger's calls reveal is off DeepSpeed's defaults)\n"
             : " (no config to check)\n";
  } else {
    s += "Causes, most costly first:\n";
    int i = 0;
    for (const auto& c : d.causes) {
      s += fmt::format("  {}. [{}] {}\n", ++i, c.id, c.title);
      for (const auto& e : c.evidence) s += "     evidence: " + e + "\n";
      if (c.gain_ms >= 0)
        s += fmt::format("     predicted gain: {} per step ({})\n", ms(c.gain_ms), c.gain_basis);
      if (!c.fix_text.empty()) s += "     fix: " + c.fix_text + "\n";
    }
  }
  for (const auto& o : d.observations) s += "Note: " + o + "\n";
  for (const auto& o : d.missing) s += "Missing: " + o + "\n";
  for (const auto& o : log.notes) s += "Log: " + o + "\n";
  if (d.predicted && d.fixed)
    s += fmt::format(
        "After the fixes: predicted step {} -> {} ({:.2f}x faster); --emit FILE writes the corrected "
        "config\n",
        ms(d.predicted->time.step_s * 1000), ms(d.fixed->time.step_s * 1000),
        d.fixed->time.step_s > 0 ? d.predicted->time.step_s / d.fixed->time.step_s : 0.0);
  else if (!d.fixed_config.is_null())
    s += "--emit FILE writes the corrected config (pass --model/--gpus for its predicted step)\n";
  return s;
}

}  // namespace zeroplan::diagnose
