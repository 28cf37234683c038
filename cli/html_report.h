#pragma once
// `--html FILE` (issue 30): a self-contained HTML report of a plan or a check that works offline (no
// external fetch: inline CSS, inline JavaScript drawing SVG). Its numbers are the command's own JSON
// answer (the `--json` contract) plus, per shown plan, the memory model's named buffers with their
// lifetimes (what --explain lists) and a micro-batch sweep of the same configuration.
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "planner/plan.h"
#include "planner/training_spec.h"

namespace zeroplan::cli {

// One plan shown in the report, under a label ("ZeRO-3", "your config", "zeroplan's plan").
struct ReportPlan {
  std::string label;
  const planner::Workload* workload = nullptr;
  const planner::Plan* plan = nullptr;
  bool recommended = false;
};

// The report's data: {"kind", "title", "answer" (the --json answer), "reasons", "plans": [{"label",
// "recommended", "stage", "fits", "peak", "usable", "phase_total", "buffers", "sweep", ...}]}.
// `memory_margin`: the usable fraction's margin the sweep evaluates with (SearchOptions).
nlohmann::json report_data(const std::string& kind, const std::string& title, const nlohmann::json& answer,
                           const std::vector<std::string>& reasons, const std::vector<ReportPlan>& plans,
                           double memory_margin);

// The HTML page for `data` (report_data): one file, no external resource.
std::string render_html_report(const nlohmann::json& data);

}  // namespace zeroplan::cli
