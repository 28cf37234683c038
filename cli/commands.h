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
// cli/cmd_list.cpp: `zeroplan models`, `zeroplan gpus`.
void register_lists(CLI::App& app, CommandResult& result);

// Helpers append their registrations below (check, validate, calibrate).
}  // namespace zeroplan::cli
