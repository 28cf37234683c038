#pragma once
// Subcommands of `zeroplan`. main.cpp owns the top-level app (the default action is `plan`);
// each subcommand lives in its own cli/cmd_*.cpp and registers itself here.
#include <CLI/CLI.hpp>

#include "cli/options.h"

namespace zeroplan::cli {

// Result of a subcommand that ran: its exit code (0 ok, 1 "does not fit"/validation failed, 2 user error).
using CommandResult = int;

// cli/cmd_plan.cpp: the default action (`zeroplan --model M --gpus G`).
CommandResult run_plan(const PlanFlags& flags);
// cli/cmd_max_seq.cpp: `--max-seq` (the longest sequence that fits), called by run_plan.
CommandResult run_max_seq(const PlanFlags& flags, const planner::SearchOptions& opts,
                          const planner::Workload& w);
// cli/cmd_list.cpp: `zeroplan models`, `zeroplan gpus`.
void register_lists(CLI::App& app, CommandResult& result);
// cli/subcommands.cpp: calls every register_NAME below.
void register_subcommands(CLI::App& app, PlanFlags& flags, CommandResult& result);

// Convention for subcommands (check, validate, calibrate): append a declaration
//   void register_NAME(CLI::App& app, PlanFlags& flags, CommandResult& result);
// which adds `app.add_subcommand("NAME", ...)->fallthrough()` (so the shared plan flags such as
// --model/--gpus registered on the top-level app are accepted after the subcommand) and sets `result` in the
// subcommand's callback. Throw zeroplan::UserError for user mistakes: main prints one line on stderr and
// exits 2. Output goes to stdout only after all inputs were validated (no partial output on error).
// cli/cmd_check.cpp: `zeroplan check ds_config.json --model M --gpus G` (configs helper, issue 5).
void register_check(CLI::App& app, PlanFlags& flags, CommandResult& result);
// cli/cmd_calibrate.cpp: `zeroplan calibrate [--out gpu_profile.json] [--force] [--base NAME] [--quick]`
// (cuda helper, issue 7). Exit 2 with one line when built without CUDA or without a usable GPU.
void register_calibrate(CLI::App& app, PlanFlags& flags, CommandResult& result);
// cli/cmd_validate.cpp: `zeroplan validate --backend cpu|cuda --model M --gpus 4xCPU --stage S [--steps K]
// [--json]` (executor helper, issue 6): runs the plan on the executor, prints predicted vs measured per
// component.
void register_validate(CLI::App& app, PlanFlags& flags, CommandResult& result);
// cli/cmd_diagnose.cpp: `zeroplan diagnose LOG... [--config C] [--model M --gpus G] [--json] [--emit F]`
// (issue 15).
void register_diagnose(CLI::App& app, PlanFlags& flags, CommandResult& result);
}  // namespace zeroplan::cli
