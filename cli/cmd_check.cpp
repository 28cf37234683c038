// `zeroplan check ds_config.json --model M --gpus G`: what a user's existing DeepSpeed config will
// cost and what is wrong with it. Reads the file (malformed -> exit 2), resolves "auto" as the HF
// Trainer would, lints keys/types/values/traps against DeepSpeed v0.16.9, predicts memory and step
// time with the planner, and shows what zeroplan's recommended plan would change, key by key.
//
// Exit codes: 0 the config is valid for DeepSpeed and fits in GPU memory (warnings allowed);
// 1 it does not fit, or DeepSpeed would refuse it (an error-level issue); 2 unreadable input
// (missing/malformed file, bad flags): one line on stderr, nothing on stdout.
#include <fmt/format.h>

#include <algorithm>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>

#include "cli/commands.h"
#include "cli/plan_json.h"
#include "common/errors.h"
#include "common/json_file.h"
#include "configs/check.h"
#include "configs/ds_keys.h"
#include "planner/model_stats.h"
#include "planner/reasons.h"
#include "planner/search.h"

namespace zeroplan::cli {
namespace {

using nlohmann::json;

std::string gb(int64_t bytes) {
  return fmt::format("{:.1f} GB", static_cast<double>(bytes) / 1e9);
}

std::string describe(const planner::Workload& w, const planner::Plan& p) {
  const auto& z = p.zero;
  std::string off = "no offload";
  if (z.offload_optimizer != planner::Offload::None || z.offload_param != planner::Offload::None)
    off = fmt::format("offload optimizer {}, parameters {}{}", planner::to_string(z.offload_optimizer),
                      planner::to_string(z.offload_param), z.pin_memory ? " (pinned)" : " (pageable)");
  return fmt::format(
      "ZeRO-{}, {}, micro-batch {} x grad-accum {} x {} GPUs = global batch {}, seq {}, checkpointing {}, {}",
      z.stage, planner::to_string(p.precision), z.micro_batch, z.grad_accum, w.cluster.world_size(),
      z.micro_batch * z.grad_accum * w.cluster.world_size(), p.seq_len, planner::to_string(z.checkpointing),
      off);
}

CommandResult run_check(const PlanFlags& flags, const std::string& path) {
  // Validate every input before printing anything.
  const planner::SearchOptions opts = build_search_options(flags);
  const json config = read_json_file(path, "DeepSpeed config");
  const planner::Workload w = build_workload(flags);
  configs::ReadConfig rc = configs::read_deepspeed_config(config, w);

  // The workload exactly as the file runs it.
  const planner::Workload wc = configs::workload_for_config(w, rc);
  const planner::ModelStats stats = planner::compute_model_stats(wc);
  const planner::Plan predicted = planner::evaluate_plan(wc, stats, rc.zero, opts.memory_margin);
  // Activation checkpointing lives in the training script (TrainingArguments.gradient_checkpointing),
  // not in the DeepSpeed config: without --checkpointing, check assumes none and says so; when that
  // does not fit, it also evaluates full checkpointing so the user sees whether that is the fix.
  std::optional<planner::Plan> with_ckpt;
  if (flags.checkpointing.empty()) {
    rc.issues.push_back(
        {configs::Severity::Info, "",
         "activation checkpointing is set in the training script, not in ds_config.json; assumed none",
         "pass --checkpointing full if your script enables gradient_checkpointing"});
    if (!predicted.fits) {
      planner::ZeroConfig z = rc.zero;
      z.checkpointing = planner::Checkpointing::Full;
      planner::Workload wf = wc;
      wf.train.checkpointing = z.checkpointing;
      with_ckpt = planner::evaluate_plan(wf, planner::compute_model_stats(wf), z, opts.memory_margin);
    }
  }

  // zeroplan's best plan for the same global batch and precision (micro-batch and accumulation free).
  planner::Workload ws = w;
  ws.train.precision = rc.precision;
  ws.train.micro_batch.reset();
  ws.train.grad_accum.reset();
  ws.train.global_batch = rc.train_batch_size;
  const planner::SearchResult sr = planner::search(ws, opts);
  std::vector<configs::ConfigChange> changes;
  if (sr.recommendation) changes = configs::diff_plans(wc, config, predicted, *sr.recommendation);
  // A recommendation is only worth proposing when the config does not fit or it is faster.
  const bool improves =
      sr.recommendation && (!predicted.fits || sr.recommendation->tokens_per_s > predicted.tokens_per_s);

  // What each knob of this config is worth, one change at a time (planner::knob_effects), best
  // throughput first; a change that stops fitting stays listed, marked.
  std::vector<planner::KnobEffect> knobs = planner::knob_effects(wc, stats, opts, predicted);
  std::stable_sort(knobs.begin(), knobs.end(), [](const auto& a, const auto& b) {
    return a.plan.fits != b.plan.fits ? a.plan.fits : a.plan.tokens_per_s > b.plan.tokens_per_s;
  });

  const bool rejected = configs::has_errors(rc.issues);
  const CommandResult code = (rejected || !predicted.fits) ? 1 : 0;
  const std::string verdict = rejected         ? "DeepSpeed would refuse this config (see the errors above)"
                              : predicted.fits ? "fits"
                                               : "does not fit in GPU memory";

  if (flags.json) {
    json issues = json::array();
    for (const auto& i : rc.issues) issues.push_back(configs::issue_to_json(i));
    json ch = json::array();
    for (const auto& c : changes) ch.push_back(configs::change_to_json(c));
    json kn = json::array();
    for (const auto& k : knobs)
      kn.push_back({{"change", k.what},
                    {"fits", k.plan.fits},
                    {"peak_bytes", k.plan.memory.peak},
                    {"step_s", k.plan.time.step_s},
                    {"tokens_per_s", k.plan.tokens_per_s}});
    json out = {{"zeroplan_version", ZEROPLAN_VERSION},
                {"deepspeed_keys_version", configs::deepspeed_keys_version()},
                {"config_path", path},
                {"config", rc.resolved},
                {"model", model_to_json(wc)},
                {"cluster", cluster_to_json(wc)},
                {"issues", issues},
                {"deepspeed_would_reject", rejected},
                {"fits", predicted.fits},
                {"predicted", plan_to_json(wc, predicted)},
                {"recommended", sr.recommendation ? plan_to_json(ws, *sr.recommendation) : json(nullptr)},
                {"recommended_changes", ch},
                {"knob_effects", kn},
                {"recommendation_improves", improves},
                {"exit_code", code}};
    if (!sr.recommendation) out["no_fit_reason"] = sr.no_fit_reason;
    if (with_ckpt) out["predicted_with_full_checkpointing"] = plan_to_json(wc, *with_ckpt);
    fmt::print("{}\n", out.dump(2));
    return code;
  }

  std::string s = fmt::format("zeroplan check {}: {} on {}x{}x{} (keys checked against DeepSpeed {})\n", path,
                              w.model.name, w.cluster.nodes, w.cluster.gpus_per_node, w.cluster.gpu.name,
                              configs::deepspeed_keys_version());
  s += "As DeepSpeed will run it:\n  " + describe(wc, predicted) + "\n";
  const auto& z = predicted.zero;
  if (z.stage >= 1)
    s += fmt::format("  reduce_bucket_size {}, overlap_comm {}{}\n", z.reduce_bucket_size, z.overlap_comm,
                     z.stage == 3 ? fmt::format(", prefetch {}, persistence threshold {}, max live {}",
                                                z.prefetch_bucket_size, z.param_persistence_threshold,
                                                z.max_live_parameters)
                                  : fmt::format(", allgather_bucket_size {}", z.allgather_bucket_size));
  if (rc.issues.empty()) {
    s += "Issues: none\n";
  } else {
    s += fmt::format("Issues ({} errors, {} warnings, {} notes):\n",
                     configs::count_severity(rc.issues, configs::Severity::Error),
                     configs::count_severity(rc.issues, configs::Severity::Warning),
                     configs::count_severity(rc.issues, configs::Severity::Info));
    for (const auto& i : rc.issues) s += "  " + configs::format_issue(i) + "\n";
  }
  s += fmt::format(
      "Prediction: peak {} per GPU of {} usable ({} total); step {:.2f} s, {:.0f} tokens/s, MFU {:.0f}%\n",
      gb(predicted.memory.peak), gb(predicted.capacity_bytes), gb(w.cluster.gpu.memory_bytes),
      predicted.time.step_s, predicted.tokens_per_s, 100.0 * predicted.mfu);
  s += fmt::format("  host memory per node {} ({} pinned)\n", gb(predicted.memory.host_per_node),
                   gb(predicted.memory.host_pinned_per_node));
  if (with_ckpt)
    s += fmt::format(
        "  with gradient_checkpointing (--checkpointing full) the peak would be {} ({}), step {:.2f} s\n",
        gb(with_ckpt->memory.peak), with_ckpt->fits ? "fits" : "still does not fit", with_ckpt->time.step_s);
  if (!knobs.empty()) {
    s += "One change at a time (best throughput first):\n";
    for (const auto& k : knobs) {
      const double gain =
          predicted.tokens_per_s > 0 ? k.plan.tokens_per_s / predicted.tokens_per_s - 1.0 : 0.0;
      s += fmt::format("  {:<48} peak {:>9}{}, step {:.2f} s, {:.0f} tokens/s ({:+.1f}%)\n", k.what,
                       gb(k.plan.memory.peak), k.plan.fits ? "" : " (does not fit)", k.plan.time.step_s,
                       k.plan.tokens_per_s, 100.0 * gain);
    }
  }
  if (!sr.recommendation) {
    s += "zeroplan finds no plan that fits this global batch: " + sr.no_fit_reason + "\n";
  } else if (changes.empty()) {
    s += "zeroplan's recommended plan is this config.\n";
  } else if (!improves) {
    s += fmt::format(
        "zeroplan's search finds nothing faster for global batch {} (its best: {:.0f} tokens/s, this "
        "config: {:.0f} tokens/s).\n",
        rc.train_batch_size, sr.recommendation->tokens_per_s, predicted.tokens_per_s);
  } else {
    const auto& rec = *sr.recommendation;
    s += fmt::format(
        "zeroplan's recommended plan for global batch {} (peak {}, step {:.2f} s, {:.0f} tokens/s) "
        "changes:\n",
        rc.train_batch_size, gb(rec.memory.peak), rec.time.step_s, rec.tokens_per_s);
    for (const auto& c : changes) s += "  " + configs::format_change(c) + "\n";
    s += "  (write it with: zeroplan --model ... --gpus ... --global-batch " +
         std::to_string(rc.train_batch_size) + " --emit ds_config.json)\n";
  }
  s += "Verdict: " + verdict + "\n";
  fmt::print("{}", s);
  return code;
}

}  // namespace

void register_check(CLI::App& app, PlanFlags& flags, CommandResult& result) {
  auto path = std::make_shared<std::string>();
  auto* sub =
      app.add_subcommand("check",
                         "Read an existing DeepSpeed config (ds_config.json): resolve \"auto\" as the HF "
                         "Trainer would, report unknown "
                         "keys, wrong types and known traps, predict its memory and step time, and show what "
                         "zeroplan would change. "
                         "Exit 0 fits, 1 does not fit or DeepSpeed would refuse it, 2 unreadable input.");
  sub->add_option("config", *path, "Path of the DeepSpeed config JSON")->required();
  sub->fallthrough();
  sub->callback([&flags, &result, path] { result = run_check(flags, *path); });
}

}  // namespace zeroplan::cli
