// `zeroplan diagnose LOG [LOG...] [--config ds_config.json] [--model M --gpus G] [--json] [--emit
// fixed.json]`: reads what a DeepSpeed run printed (diagnose/log_parser.h), compares it with the planner's
// prediction for the same run, and ranks the causes of its slowness or OOM with evidence, predicted
// gain and a fix; --emit writes the corrected config (atomically) and prints its predicted step.
//
// Exit codes: 0 diagnosed (whether or not causes were found); 2 user error (missing file, not a log,
// bad flag): one line on stderr, nothing on stdout, no file written.
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <memory>
#include <nlohmann/json.hpp>

#include "cli/commands.h"
#include "cli/html_report.h"
#include "cli/output.h"
#include "common/atomic_file.h"
#include "common/errors.h"
#include "common/json_file.h"
#include "diagnose/diagnosis.h"
#include "diagnose/log_parser.h"

namespace zeroplan::cli {
namespace {

// Log text is any bytes: strings quoted from it (evidence, NIC names) may not be UTF-8, which
// nlohmann::json refuses to serialize by default; U+FFFD replaces such bytes.
constexpr auto kReplace = nlohmann::json::error_handler_t::replace;

struct DiagnoseArgs {
  std::vector<std::string> logs;
  std::string config;
};

CommandResult run_diagnose(const PlanFlags& flags, const DiagnoseArgs& a) {
  diagnose::DiagnoseInputs in;
  // Flags first (cheap), then files; nothing printed before every input is validated.
  const bool have_model = !flags.model.empty() || !flags.params.empty();
  if (have_model != !flags.gpus.empty())
    throw UserError("pass --model and --gpus together (the prediction needs both), or neither");
  if (have_model) {
    in.workload = build_workload(flags);
    in.memory_margin = build_search_options(flags).memory_margin;
  }
  if (!a.config.empty()) {
    in.config = read_json_file(a.config, "DeepSpeed config");
    if (!in.config->is_object()) throw_user_error("{}: a DeepSpeed config is a JSON object", a.config);
    in.config_path = a.config;
  }
  diagnose::RunLog log;
  for (const auto& p : a.logs) diagnose::parse_log_file(p, log);
  diagnose::require_recognized(log);
  const diagnose::Diagnosis d = diagnose::diagnose(log, in);

  std::string emitted;
  if (!flags.emit.empty()) {
    const bool any_fix = std::any_of(d.causes.begin(), d.causes.end(),
                                     [](const diagnose::Cause& c) { return !c.fix.is_null(); });
    // Knobs read from the comms logger alone have a fix but no config to apply it to.
    if (d.fixed_config.is_null() && any_fix && d.config.is_null())
      throw_user_error(
          "--emit {}: the log carries no config to correct (the fixes above were read from its calls); pass "
          "--config ds_config.json to write the corrected file",
          flags.emit);
    if (d.fixed_config.is_null())
      throw_user_error("--emit {}: no cause with a config fix was found, nothing to write", flags.emit);
    write_file_atomically(flags.emit, d.fixed_config.dump(2, ' ', false, kReplace) + "\n", flags.force);
    emitted = d.fixed ? fmt::format("Wrote {}: predicted step {:.1f} ms -> {:.1f} ms\n", flags.emit,
                                    d.predicted->time.step_s * 1000, d.fixed->time.step_s * 1000)
                      : fmt::format("Wrote {} (pass --model/--gpus for its predicted step)\n", flags.emit);
  }
  const auto answer = [&] {
    nlohmann::json j = diagnose::to_json(log, d);
    j["zeroplan_version"] = ZEROPLAN_VERSION;
    if (!flags.emit.empty()) j["emitted"] = flags.emit;
    return j;
  };
  if (!flags.html.empty()) {
    // The run as its config runs it (when --model/--gpus let the planner predict it), the ranked causes
    // with their fixes, what the log showed and what it lacked; the report shows the corrected config.
    std::vector<ReportPlan> shown;
    if (d.predicted && d.workload) shown.push_back({"the run as logged", &*d.workload, &*d.predicted, false});
    std::vector<std::string> reasons;
    for (const auto& c : d.causes) reasons.push_back(c.title + ": " + c.fix_text);
    for (const auto& o : d.observations) reasons.push_back("observed: " + o);
    for (const auto& m : d.missing) reasons.push_back("missing from the log: " + m);
    // Log text may hold bytes that are not UTF-8 (kReplace above): round-trip through the same handler.
    const nlohmann::json data = nlohmann::json::parse(answer().dump(-1, ' ', false, kReplace));
    const std::string title = fmt::format("zeroplan diagnose {}", fmt::join(a.logs, " "));
    write_file_atomically(
        flags.html,
        render_html_report(report_data("diagnose", title, data, reasons, shown, in.memory_margin)),
        flags.force);
  }
  if (flags.json) {
    write_answer(answer().dump(2, ' ', false, kReplace) + "\n");
  } else {
    write_answer(diagnose::format_text(log, d) + emitted);
  }
  return 0;
}

}  // namespace

void register_diagnose(CLI::App& app, PlanFlags& flags, CommandResult& result) {
  auto args = std::make_shared<DiagnoseArgs>();
  auto* sub = app.add_subcommand(
      "diagnose",
      "Read a DeepSpeed run's logs (wall_clock_breakdown, comms logger, memory lines, engine config dump, "
      "CUDA OOM, NCCL_DEBUG=INFO, HF Trainer metrics), compare them with the prediction for the same run "
      "(--model/--gpus) and rank the causes of slowness or OOM with evidence, predicted gain and a fix. "
      "--emit FILE writes the corrected config.");
  sub->add_option("logs", args->logs, "Log files (any mix of ranks)")->required();
  sub->add_option("--config", args->config, "The run's ds_config.json (default: recovered from the log)");
  sub->fallthrough();
  sub->callback([&flags, &result, args] { result = run_diagnose(flags, *args); });
}

}  // namespace zeroplan::cli
