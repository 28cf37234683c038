// The default action: search the ZeRO configurations for a model on a cluster and print the best
// plan of each stage, the recommendation and its reasons (or the JSON contract with --json).
#include <fmt/format.h>

#include <nlohmann/json.hpp>

#include "cli/commands.h"
#include "cli/html_report.h"
#include "cli/output.h"
#include "cli/plan_json.h"
#include "common/atomic_file.h"
#include "common/errors.h"
#include "common/names.h"
#include "configs/emit.h"
#include "planner/deepspeed_estimator.h"
#include "planner/explain.h"
#include "planner/report.h"
#include "planner/search.h"
#include "planner/tensor_parallel_choice.h"

namespace zeroplan::cli {

CommandResult run_plan(const PlanFlags& flags) {
  // Validate everything before any output (no partial output on a user error).
  const planner::SearchOptions opts = build_search_options(flags);
  if (!flags.compare.empty() && to_lower(flags.compare) != "deepspeed")
    throw_user_error("--compare '{}' is not known; the only estimator to compare with is 'deepspeed'",
                     flags.compare);
  if (!flags.compare.empty() && !flags.tp.empty() && flags.tp != "1")
    throw UserError(
        "--compare deepspeed with --tp: DeepSpeed's memory estimators know no tensor parallelism");
  if (flags.hf_auto && flags.emit.empty()) throw UserError("--hf-auto only applies with --emit PATH");
  if (flags.emit_optimizer && flags.emit.empty())
    throw UserError("--emit-optimizer only applies with --emit PATH");
  planner::Workload w = build_workload(flags);
  if (flags.max_seq) {
    if (flags.tp == "auto") throw UserError("--tp auto with --max-seq is not searched yet; give --tp N");
    return run_max_seq(flags, opts, w);
  }

  planner::SearchResult r;
  if (flags.tp == "auto") {
    // --tp auto: every AutoTP size the layout and the TP model allow, the fastest that fits kept.
    std::vector<planner::TensorParallelOption> options = planner::search_tensor_parallel(w, opts);
    const size_t best = planner::best_tensor_parallel(options);
    const std::string why = planner::tensor_parallel_choice_sentence(options, best);
    w = std::move(options[best].w);
    r = std::move(options[best].r);
    r.reasons.insert(r.reasons.begin(), why);
  } else {
    r = planner::search(w, opts);
  }
  const planner::Plan* chosen = r.recommendation ? &*r.recommendation : nullptr;

  std::string emitted;
  if (!flags.emit.empty()) {
    if (!chosen)
      throw_user_error("nothing fits, so no config was written to '{}': {}", flags.emit, r.no_fit_reason);
    configs::EmitOptions eo;
    eo.path = flags.emit;
    eo.hf_auto = flags.hf_auto;
    eo.force = flags.force;
    eo.with_optimizer = flags.emit_optimizer;
    emitted = configs::emit_files(w, *chosen, eo);
  }

  // The JSON contract: printed with --json, and the data of the --html report.
  const auto answer = [&] {
    nlohmann::json out = {{"zeroplan_version", ZEROPLAN_VERSION},
                          {"model", model_to_json(w)},
                          {"cluster", cluster_to_json(w)},
                          {"recommendation", nullptr},
                          {"reasons", r.reasons},
                          {"plans", nlohmann::json::array()},
                          {"candidates_evaluated", r.candidates_evaluated}};
    if (chosen)
      out["recommendation"] = plan_to_json(w, *chosen);
    else
      out["reason"] = r.no_fit_reason;
    for (const auto& p : r.best_per_stage) out["plans"].push_back(plan_to_json(w, p));
    for (const auto& warning : w.model.warnings) out["warnings"].push_back(warning);
    if (!emitted.empty()) out["emitted"] = {{"path", flags.emit}, {"summary", emitted}};
    return out;
  };
  if (!flags.html.empty()) {
    std::vector<ReportPlan> shown;
    bool marked = false;
    for (const auto& p : r.best_per_stage) {
      const bool is_chosen =
          chosen && p.zero.stage == chosen->zero.stage && p.tokens_per_s == chosen->tokens_per_s;
      marked = marked || is_chosen;
      shown.push_back({fmt::format("ZeRO-{}", p.zero.stage), &w, &p, is_chosen});
    }
    // A recommendation that is no stage's best row (e.g. a MoE plan with expert parallelism) still shows.
    if (chosen && !marked) shown.insert(shown.begin(), {"recommended", &w, chosen, true});
    const std::string title = fmt::format("zeroplan: {} on {}", w.model.name, flags.gpus);
    write_file_atomically(
        flags.html,
        render_html_report(report_data("plan", title, answer(), r.reasons, shown, opts.memory_margin)),
        flags.force);
  }
  if (flags.json) {
    write_answer(answer().dump(2) + "\n");
  } else {
    for (const auto& warning : w.model.warnings) fmt::print(stderr, "zeroplan: warning: {}\n", warning);
    std::string text = planner::render_report(w, r);
    // --explain and --compare describe the recommendation, or the best plan of the fixed stage.
    const planner::Plan* focus =
        chosen ? chosen : (r.best_per_stage.empty() ? nullptr : &r.best_per_stage.front());
    if (flags.explain && focus) text += "\n" + planner::render_explain(w, *focus);
    if (flags.explain_time && focus)
      text += "\n" + planner::render_explain_time(w, planner::compute_model_stats(w), *focus);
    if (!flags.compare.empty() && focus) text += "\n" + planner::render_deepspeed_comparison(w, *focus);
    if (!emitted.empty()) text += "\n" + emitted;
    if (!flags.html.empty()) text += "\nWrote the HTML report " + flags.html + "\n";
    write_answer(text);
  }
  return chosen ? 0 : 1;
}

}  // namespace zeroplan::cli
