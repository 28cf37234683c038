// `zeroplan check ds_config.json --model M --gpus G`: what a user's existing DeepSpeed config will
// cost and what is wrong with it. Reads the file (malformed -> exit 2), resolves "auto" as the HF
// Trainer would (or as --runner says), lints keys/types/values/traps against the key table of
// --deepspeed-version (default: the newest, configs/data/ds_keys_<v>.json), predicts memory and step
// time with the planner when DeepSpeed would accept the config, and shows what zeroplan's recommended
// plan would change, key by key.
//
// Exit codes: 0 the config is valid for DeepSpeed and fits in GPU memory (warnings allowed);
// 1 it does not fit, or DeepSpeed would refuse it (an error-level issue); 2 unreadable input
// (missing/malformed file, bad flags): one line on stderr, nothing on stdout.
#include <fmt/format.h>

#include <algorithm>
#include <filesystem>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>

#include "cli/commands.h"
#include "cli/html_report.h"
#include "cli/output.h"
#include "cli/plan_json.h"
#include "common/atomic_file.h"
#include "common/bounded_file.h"
#include "common/errors.h"
#include "common/json_file.h"
#include "configs/check.h"
#include "configs/config_text.h"
#include "configs/ds_keys.h"
#include "configs/fix.h"
#include "planner/model_stats.h"
#include "planner/parallel.h"
#include "planner/reasons.h"
#include "planner/search.h"
#include "planner/tensor_parallel.h"

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
  // bf16.bf16_master_weights_and_grads / bf16_optimizer_states (planner/zero_config.h).
  const std::string precision = planner::to_string(p.precision) +
                                (!z.bf16_master_weights    ? ""
                                 : z.bf16_optimizer_states ? " (bf16 master weights + optimizer states)"
                                                           : " (bf16 master weights, fp32 optimizer states)");
  return fmt::format(
      "ZeRO-{}, {}, micro-batch {} x grad-accum {} x {} {} = global batch {}, seq {}{}, checkpointing {}, {}",
      z.stage, precision, z.micro_batch, z.grad_accum, planner::data_parallel_size(w),
      p.sequence_parallel > 1 || p.tensor_parallel > 1 ? "data-parallel ranks" : "GPUs",
      z.micro_batch * z.grad_accum * planner::data_parallel_size(w), p.seq_len,
      p.sequence_parallel > 1   ? fmt::format(" over Ulysses sp {}", p.sequence_parallel)
      : p.tensor_parallel > 1 ? fmt::format(" over AutoTP tp {}", p.tensor_parallel)
                              : std::string(),
      planner::to_string(z.checkpointing), off);
}

struct CheckFlags {
  std::string path;
  std::string fix;  // --fix out.json
  std::string deepspeed_version;
  std::string runner;
};

// The config file; a syntax error is reported with line, column and the offending line, and (on the two
// stderr lines before the error line) the line again with a caret under the byte the parser stopped at.
struct LoadedConfig {
  json config;
  bool lenient = false;
  std::string strict_error;  // where strict JSON parsing stopped, when lenient
};

LoadedConfig read_config_file(const std::string& path) {
  const std::string text = read_bounded_file(path, kMaxJsonFileBytes, "DeepSpeed config");
  if (text.find_first_not_of(" \t\r\n") == std::string::npos)
    (void)parse_json_text(text, path, "DeepSpeed config");  // throws the "is empty" error
  std::size_t byte = 0;
  try {
    [[maybe_unused]] const json parsed = json::parse(text);
  } catch (const json::parse_error& e) {
    byte = e.byte;
  } catch (const json::exception&) {
    (void)parse_json_text(text, path, "DeepSpeed config");  // number out of range: its own message
  }
  const auto ct = configs::parse_config_text(text);
  if (!ct) {
    // The CLI prints a UserError as one line (cli/run_main.cpp); the offending line and the caret go to
    // stderr just before it, so a terminal shows where to look.
    const std::string full = describe_json_error(text, byte, path, "DeepSpeed config", /*caret=*/true);
    const auto nl = full.find('\n');
    if (nl != std::string::npos) fmt::print(stderr, "{}\n", full.substr(nl + 1));
    throw UserError(describe_json_error(text, byte, path, "DeepSpeed config", /*caret=*/false));
  }
  if (!ct->config.is_object())
    throw_user_error("DeepSpeed config '{}' must be a JSON object, found {}", path, ct->config.type_name());
  LoadedConfig out{ct->config, ct->lenient, ""};
  if (ct->lenient) {
    const std::string d = describe_json_error(text, byte, path, "DeepSpeed config", /*caret=*/false);
    const auto at = d.find("at line");
    const auto end = d.find(';', at);
    out.strict_error = at == std::string::npos ? "" : d.substr(at, end == std::string::npos ? end : end - at);
  }
  return out;
}

std::string issues_text(const std::vector<configs::Issue>& issues) {
  if (issues.empty()) return "Issues: none\n";
  std::string s = fmt::format("Issues ({} errors, {} warnings, {} notes):\n",
                              configs::count_severity(issues, configs::Severity::Error),
                              configs::count_severity(issues, configs::Severity::Warning),
                              configs::count_severity(issues, configs::Severity::Info));
  for (const auto& i : issues) s += "  " + configs::format_issue(i) + "\n";
  return s;
}

// The fields every `check --json` answer starts with: the verdict and how the file was judged.
json json_head(const char* verdict, const std::string& path, const configs::ReadConfig& rc) {
  return {{"zeroplan_version", ZEROPLAN_VERSION},
          {"verdict", verdict},
          {"deepspeed_version", rc.deepspeed_version},
          {"deepspeed_keys_version", rc.deepspeed_version},
          {"runner", configs::runner_name(rc.runner)},
          {"runner_assumed", rc.runner_assumed},
          {"config_path", path},
          {"config", rc.resolved},
          {"resolved", configs::resolved_values(rc)}};
}

// The first line of the text report: the file, the model and cluster, and the DeepSpeed version and
// runner it is judged as.
std::string header_line(const std::string& path, const planner::Workload& w, const configs::ReadConfig& rc) {
  return fmt::format("zeroplan check {}: {} on {}x{}x{} (judged as DeepSpeed {} via the {} runner{})\n", path,
                     w.model.name, w.cluster.nodes, w.cluster.gpus_per_node, w.cluster.gpu.name,
                     rc.deepspeed_version, configs::runner_name(rc.runner),
                     rc.runner_assumed ? ", assumed" : "");
}

// --html for check: the plans shown (none for a refused config), the issues and the changes as reasons.
void write_check_report(const PlanFlags& flags, const std::string& path, const planner::Workload& w,
                        const configs::ReadConfig& rc, const json& answer,
                        const std::vector<ReportPlan>& shown, const std::vector<std::string>& more = {}) {
  std::vector<std::string> reasons;
  for (const auto& i : rc.issues) reasons.push_back(configs::format_issue(i));
  reasons.insert(reasons.end(), more.begin(), more.end());
  const std::string title = fmt::format("zeroplan check {}: {} on {}", path, w.model.name, flags.gpus);
  write_file_atomically(flags.html,
                        render_html_report(report_data("check", title, answer, reasons, shown,
                                                       build_search_options(flags).memory_margin)),
                        flags.force);
}

// A config DeepSpeed refuses never runs: no memory or time is predicted for it (a prediction from
// refused values, e.g. reduce_bucket_size 0, would be meaningless).
CommandResult report_refused(const PlanFlags& flags, const std::string& path, const planner::Workload& w,
                             const configs::ReadConfig& rc) {
  const std::string who =
      rc.runner == configs::Runner::DeepSpeed ? "DeepSpeed" : "DeepSpeed (via the runner)";
  const auto answer = [&] {
    json issues = json::array();
    for (const auto& i : rc.issues) issues.push_back(configs::issue_to_json(i));
    json out = json_head("refused", path, rc);
    out.update(json{{"model", model_to_json(w)},
                    {"cluster", cluster_to_json(w)},
                    {"issues", issues},
                    {"errors", configs::count_severity(rc.issues, configs::Severity::Error)},
                    {"warnings", configs::count_severity(rc.issues, configs::Severity::Warning)},
                    {"deepspeed_would_reject", true},
                    {"fits", nullptr},
                    {"predicted", nullptr},
                    {"recommended", nullptr},
                    {"recommended_changes", json::array()},
                    {"knob_effects", json::array()},
                    {"exit_code", 1}});
    return out;
  };
  if (!flags.html.empty()) write_check_report(flags, path, w, rc, answer(), {});
  if (flags.json) {
    write_answer(answer().dump(2) + "\n");
    return 1;
  }
  std::string s = header_line(path, w, rc);
  s += issues_text(rc.issues);
  s += fmt::format(
      "Prediction: none; {} refuses this config at start-up, so it never runs (fix the errors above)\n", who);
  s += "Verdict: DeepSpeed would refuse this config (see the errors above)\n";
  write_answer(s);
  return 1;
}

// What check computed for a config DeepSpeed accepts: the plan as the file runs it, full
// checkpointing as a what-if when the file does not fit without it, zeroplan's own plan for the same
// global batch, and each knob's worth.
struct CheckAnswer {
  planner::Workload wc;  // the workload exactly as the file runs it
  planner::Plan predicted;
  std::optional<planner::Plan> with_ckpt;
  planner::Workload ws;  // the search's: same global batch and precision, micro-batch and accumulation free
  planner::SearchResult sr;
  std::vector<configs::ConfigChange> changes;
  bool improves = false;  // the recommendation fits where the file does not, or is faster
  std::vector<planner::KnobEffect> knobs;
  CommandResult code = 0;
};

CheckAnswer evaluate_check(const PlanFlags& flags, const planner::SearchOptions& opts,
                           const planner::Workload& w, const json& config, configs::ReadConfig& rc) {
  CheckAnswer a;
  a.wc = configs::workload_for_config(w, rc);
  const planner::ModelStats stats = planner::compute_model_stats(a.wc);
  a.predicted = planner::evaluate_plan(a.wc, stats, rc.zero, opts.memory_margin);
  // Activation checkpointing lives in the training script (TrainingArguments.gradient_checkpointing),
  // not in the DeepSpeed config: without --checkpointing, check assumes none and says so; when that
  // does not fit, it also evaluates full checkpointing so the user sees whether that is the fix.
  // With deepspeed.checkpointing and cpu_checkpointing the layers are checkpointed (configs/check.cpp
  // activation_checkpointing: full assumed and said there).
  const bool implied_full = a.wc.train.checkpoint_offload != planner::CheckpointOffload::None;
  if (flags.checkpointing.empty() && !implied_full) {
    rc.issues.push_back(
        {configs::Severity::Info,
         "",
         "activation checkpointing is set in the training script, not in ds_config.json; assumed none",
         "pass --checkpointing full if your script enables gradient_checkpointing",
         {}});
    if (!a.predicted.fits) {
      planner::ZeroConfig z = rc.zero;
      z.checkpointing = planner::Checkpointing::Full;
      planner::Workload wf = a.wc;
      wf.train.checkpointing = z.checkpointing;
      a.with_ckpt = planner::evaluate_plan(wf, planner::compute_model_stats(wf), z, opts.memory_margin);
    }
  }
  // zeroplan's best plan for the same global batch and precision (micro-batch and accumulation free).
  a.ws = w;
  a.ws.train.precision = rc.precision;
  a.ws.train.micro_batch.reset();
  a.ws.train.grad_accum.reset();
  a.ws.train.global_batch = rc.train_batch_size;
  a.ws.train.sequence_parallel = rc.sequence_parallel;  // the same Ulysses group: same sequences per step
  a.ws.train.muon = rc.zero.muon;                       // the same optimizer, where Muon is priced
  // The same AutoTP size too (the planner's global batch counts distinct sequences: train_batch_size / tp).
  if (a.ws.train.tensor_parallel != rc.tensor_parallel) {
    const models::ModelSpec full = a.ws.full_model();
    a.ws.model = full;
    a.ws.unsharded.reset();
    planner::apply_tensor_parallel(a.ws, rc.tensor_parallel);
  }
  if (a.ws.train.global_batch && rc.tensor_parallel > 1) a.ws.train.global_batch = *a.ws.train.global_batch / rc.tensor_parallel;
  // The config's ZeRO++ hpZ size is searched beside hpZ off, so the recommendation says whether it pays.
  planner::SearchOptions o = opts;
  if (rc.zero.hpz_partition_size > 1 && !o.hpz_auto) o.hpz_choices = {1, rc.zero.hpz_partition_size};
  a.sr = planner::search(a.ws, o);
  if (a.sr.recommendation)
    a.changes = configs::diff_plans(a.wc, config, a.predicted, *a.sr.recommendation, &a.ws);
  // A recommendation is only worth proposing when the config does not fit or it is faster.
  a.improves = a.sr.recommendation &&
               (!a.predicted.fits || a.sr.recommendation->tokens_per_s > a.predicted.tokens_per_s);
  // What each knob of this config is worth, one change at a time (planner::knob_effects), best
  // throughput first; a change that stops fitting stays listed, marked.
  a.knobs = planner::knob_effects(a.wc, stats, opts, a.predicted);
  std::stable_sort(a.knobs.begin(), a.knobs.end(), [](const auto& x, const auto& y) {
    return x.plan.fits != y.plan.fits ? x.plan.fits : x.plan.tokens_per_s > y.plan.tokens_per_s;
  });
  a.code = a.predicted.fits ? 0 : 1;
  return a;
}

json check_json(const std::string& path, const configs::ReadConfig& rc, const CheckAnswer& a) {
  json issues = json::array();
  for (const auto& i : rc.issues) issues.push_back(configs::issue_to_json(i));
  json ch = json::array();
  for (const auto& c : a.changes) ch.push_back(configs::change_to_json(c));
  json kn = json::array();
  for (const auto& k : a.knobs)
    kn.push_back({{"change", k.what},
                  {"fits", k.plan.fits},
                  {"peak_bytes", k.plan.memory.peak},
                  {"step_s", k.plan.time.step_s},
                  {"tokens_per_s", k.plan.tokens_per_s}});
  json out = json_head(a.predicted.fits ? "fits" : "does_not_fit", path, rc);
  out.update(
      json{{"errors", 0},
           {"warnings", configs::count_severity(rc.issues, configs::Severity::Warning)},
           {"model", model_to_json(a.wc)},
           {"cluster", cluster_to_json(a.wc)},
           {"issues", issues},
           {"deepspeed_would_reject", false},
           {"fits", a.predicted.fits},
           {"predicted", plan_to_json(a.wc, a.predicted)},
           {"recommended", a.sr.recommendation ? plan_to_json(a.ws, *a.sr.recommendation) : json(nullptr)},
           {"recommended_changes", ch},
           {"knob_effects", kn},
           {"recommendation_improves", a.improves},
           {"exit_code", a.code}});
  if (!a.sr.recommendation) out["no_fit_reason"] = a.sr.no_fit_reason;
  if (a.with_ckpt) out["predicted_with_full_checkpointing"] = plan_to_json(a.wc, *a.with_ckpt);
  return out;
}

// The text report's prediction: peak, step, host memory, the checkpoint save and the checkpointing what-if.
std::string prediction_text(const planner::Workload& w, const CheckAnswer& a) {
  const planner::Plan& predicted = a.predicted;
  std::string s = fmt::format(
      "Prediction: peak {} per GPU of {} usable ({} total); step {:.2f} s, {:.0f} tokens/s, MFU {:.0f}%\n",
      gb(predicted.memory.peak), gb(predicted.capacity_bytes), gb(w.cluster.gpu.memory_bytes),
      predicted.time.step_s, predicted.tokens_per_s, 100.0 * predicted.mfu);
  s += fmt::format("  host memory per node {} ({} pinned)\n", gb(predicted.memory.host_per_node),
                   gb(predicted.memory.host_pinned_per_node));
  // Page-locked memory counts against the memlock limit (DeepSpeed 0.19.8 utils/pin_memory_tracker.py;
  // runtime/zero/offload_config.py pin_memory: "Disable only on hosts with tight memlock limits").
  if (predicted.memory.host_pinned_per_node > 0)
    s += fmt::format(
        "  pinned memory is page-locked and counts against the memlock limit: `ulimit -l` must be unlimited "
        "or "
        "above {} per process (containers: --ulimit memlock=-1)\n",
        gb(predicted.memory.host_pinned_per_process(w.cluster.gpus_per_node)));
  // The checkpoint save (planner/save_phase.h).
  const planner::SaveEstimate& sv = predicted.save;
  s += fmt::format(
      "  checkpoint save: DeepSpeed checkpoint {} on disk, 16-bit model {}; +{} of host RAM on node 0 while "
      "saving{}\n",
      gb(sv.checkpoint_total_bytes),
      sv.model16_file_bytes > 0
          ? gb(sv.model16_file_bytes)
          : std::string("not written (stage3_gather_16bit_weights_on_model_save is false)"),
      gb(sv.host_bytes_node0),
      sv.host_ok ? "" : ", more than the node has left: the run would die at its first save");
  if (a.with_ckpt)
    s += fmt::format(
        "  with gradient_checkpointing (--checkpointing full) the peak would be {} ({}), step {:.2f} s\n",
        gb(a.with_ckpt->memory.peak), a.with_ckpt->fits ? "fits" : "still does not fit",
        a.with_ckpt->time.step_s);
  return s;
}

// The text report's advice: each knob's worth, then zeroplan's plan for the same global batch.
std::string advice_text(const configs::ReadConfig& rc, const CheckAnswer& a) {
  const planner::Plan& predicted = a.predicted;
  std::string s;
  if (!a.knobs.empty()) {
    s += "One change at a time (best throughput first):\n";
    for (const auto& k : a.knobs) {
      const double gain =
          predicted.tokens_per_s > 0 ? k.plan.tokens_per_s / predicted.tokens_per_s - 1.0 : 0.0;
      s += fmt::format("  {:<48} peak {:>9}{}, step {:.2f} s, {:.0f} tokens/s ({:+.1f}%)\n", k.what,
                       gb(k.plan.memory.peak), k.plan.fits ? "" : " (does not fit)", k.plan.time.step_s,
                       k.plan.tokens_per_s, 100.0 * gain);
    }
  }
  if (!a.sr.recommendation) {
    s += "zeroplan finds no plan that fits this global batch: " + a.sr.no_fit_reason + "\n";
  } else if (a.changes.empty()) {
    s += "zeroplan's recommended plan is this config.\n";
  } else if (!a.improves) {
    s += fmt::format(
        "zeroplan's search finds nothing faster for global batch {} (its best: {:.0f} tokens/s, this "
        "config: {:.0f} tokens/s).\n",
        rc.train_batch_size, a.sr.recommendation->tokens_per_s, predicted.tokens_per_s);
  } else {
    const auto& rec = *a.sr.recommendation;
    s += fmt::format(
        "zeroplan's recommended plan for global batch {} (peak {}, step {:.2f} s, {:.0f} tokens/s) "
        "changes:\n",
        rc.train_batch_size, gb(rec.memory.peak), rec.time.step_s, rec.tokens_per_s);
    for (const auto& c : a.changes) s += "  " + configs::format_change(c) + "\n";
    // --global-batch counts distinct sequences: train_batch_size / tp under AutoTP (planner/parallel.h).
    const int tp = std::max(1, rc.tensor_parallel);
    s += "  (write it with: zeroplan --model ... --gpus ... " +
         (tp > 1 ? fmt::format("--tp {} ", tp) : std::string()) + (rc.zero.muon ? "--optimizer muon " : "") +
         "--global-batch " + std::to_string(rc.train_batch_size / tp) + " --emit ds_config.json)\n";
  }
  return s;
}

std::string check_text(const std::string& path, const planner::Workload& w, const configs::ReadConfig& rc,
                       const CheckAnswer& a) {
  std::string s = header_line(path, w, rc);
  s += "As DeepSpeed will run it:\n  " + describe(a.wc, a.predicted) + "\n";
  const auto& z = a.predicted.zero;
  if (z.stage >= 1)
    s += fmt::format(
        "  reduce_bucket_size {}, overlap_comm {}{}\n", z.reduce_bucket_size, z.overlap_comm,
        z.stage == 3
            ? fmt::format(", prefetch {}, persistence threshold {}, max live {}{}", z.prefetch_bucket_size,
                          z.param_persistence_threshold, z.max_live_parameters,
                          z.hpz_partition_size > 1 ? fmt::format(", ZeRO++ hpZ {}", z.hpz_partition_size)
                                                   : std::string())
            : fmt::format(", allgather_bucket_size {}", z.allgather_bucket_size));
  s += issues_text(rc.issues);
  s += prediction_text(w, a);
  s += advice_text(rc, a);
  s += "Verdict: " + std::string(a.predicted.fits ? "fits" : "does not fit in GPU memory") + "\n";
  return s;
}

// --fix: the corrected file, written atomically (an existing file only with --force); the exit code
// stays the one of the input config.
void write_fixed_config(const PlanFlags& flags, const std::string& fix_path, const json& config,
                        const configs::ReadConfig& rc) {
  const configs::FixResult fr = configs::apply_fixes(config, rc.issues);
  write_file_atomically(fix_path, fr.config.dump(2) + "\n", flags.force);
  std::string msg = fmt::format("wrote {} with {} change(s):\n", fix_path, fr.applied.size());
  for (const auto& a : fr.applied) msg += fmt::format("  {}: {} ({})\n", a.key, a.what, a.why);
  for (const auto& n : fr.not_fixed) msg += "  not fixed (your choice): " + n + "\n";
  fmt::print(stderr, "{}", msg);
}

CommandResult run_check(const PlanFlags& flags, const CheckFlags& cf) {
  const std::string& path = cf.path;
  // Validate every input before printing anything.
  configs::CheckOptions co;
  co.deepspeed_version = configs::resolve_deepspeed_version(cf.deepspeed_version);
  if (!cf.runner.empty()) co.runner = configs::parse_runner(cf.runner);
  const planner::SearchOptions opts = build_search_options(flags);
  namespace fs = std::filesystem;
  std::error_code ec;
  if (!fs::exists(path, ec)) throw_user_error("DeepSpeed config '{}' does not exist", path);
  if (fs::is_directory(path, ec))
    throw_user_error("DeepSpeed config '{}' is a directory; give the path of a JSON file", path);
  const LoadedConfig loaded = read_config_file(path);
  const json& config = loaded.config;
  co.lenient_json = loaded.lenient;
  co.json_error = loaded.strict_error;
  const planner::Workload w = build_workload(flags);
  configs::ReadConfig rc = configs::read_deepspeed_config(config, w, co);
  if (!cf.fix.empty()) write_fixed_config(flags, cf.fix, config, rc);
  if (configs::has_errors(rc.issues)) return report_refused(flags, path, w, rc);

  const CheckAnswer a = evaluate_check(flags, opts, w, config, rc);
  if (!flags.html.empty()) {
    std::vector<ReportPlan> shown{{"your config", &a.wc, &a.predicted, false}};
    if (a.sr.recommendation && a.improves)
      shown.push_back({"zeroplan's plan", &a.ws, &*a.sr.recommendation, true});
    std::vector<std::string> lines;
    for (const auto& c : a.changes) lines.push_back("zeroplan's plan changes " + configs::format_change(c));
    write_check_report(flags, path, w, rc, check_json(path, rc, a), shown, lines);
  }
  write_answer(flags.json ? check_json(path, rc, a).dump(2) + "\n" : check_text(path, w, rc, a));
  return a.code;
}

}  // namespace

void register_check(CLI::App& app, PlanFlags& flags, CommandResult& result) {
  auto cf = std::make_shared<CheckFlags>();
  auto* sub =
      app.add_subcommand("check",
                         "Read an existing DeepSpeed config (ds_config.json): resolve \"auto\" as the HF "
                         "Trainer would, report unknown "
                         "keys, wrong types and known traps, predict its memory and step time, and show what "
                         "zeroplan would change. "
                         "Exit 0 fits, 1 does not fit or DeepSpeed would refuse it, 2 unreadable input.");
  sub->add_option("config", cf->path, "Path of the DeepSpeed config JSON")->required();
  sub->add_option("--deepspeed-version", cf->deepspeed_version,
                  "DeepSpeed release to judge against (default: the newest with a key table; 0.14 to 0.19)");
  sub->add_option(
      "--runner", cf->runner,
      "Who launches it: deepspeed (deepspeed.initialize), hf (HF Trainer), accelerate. Default: hf "
      "when the file contains \"auto\", deepspeed otherwise");
  sub->add_option("--fix", cf->fix,
                  "Write the config with every mechanical fix applied (each change listed on stderr) to this "
                  "path; an existing file only with --force");
  sub->fallthrough();
  sub->callback([&flags, &result, cf] { result = run_check(flags, *cf); });
}

}  // namespace zeroplan::cli
