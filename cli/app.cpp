#include "cli/app.h"

#include <CLI/CLI.hpp>

#include "cli/commands.h"
#include "cli/exec_forward.h"
#include "cli/options.h"
#include "cli/output.h"
#include "cli/run_main.h"

namespace zeroplan::cli {

int run_zeroplan(int argc, char** argv, bool own_process) {
  // Only a real process may hand itself over to zeroplan-exec (validate, calibrate): execv.
  if (own_process)
    set_command_line(argc, argv);
  else
    set_command_line(0, nullptr);
  CLI::App app{
      "zeroplan: per-GPU memory, step time and the best DeepSpeed ZeRO configuration for a model on a "
      "cluster.\n"
      "Default action: plan, e.g. `zeroplan --model 13b --gpus 4xA40`.",
      "zeroplan"};
  app.set_version_flag("--version", version_line());
  app.require_subcommand(0, 1);
  PlanFlags flags;
  add_plan_flags(app, flags);
  CommandResult result = -1;
  register_lists(app, result);
  register_subcommands(app, flags, result);
  const auto run = [&] { return result >= 0 ? result : run_plan(flags); };
  return own_process ? run_main(app, argc, argv, run) : run_parsed(app, argc, argv, run);
}

CapturedRun run_zeroplan_captured(const std::vector<std::string>& args) {
  std::vector<std::string> storage;
  storage.reserve(args.size() + 1);
  storage.emplace_back("zeroplan");
  storage.insert(storage.end(), args.begin(), args.end());
  std::vector<char*> argv;
  for (auto& a : storage) argv.push_back(a.data());
  argv.push_back(nullptr);
  CapturedRun r;
  {
    CaptureAnswer capture(r.out, r.error);
    r.exit_code = run_zeroplan(static_cast<int>(storage.size()), argv.data(), /*own_process=*/false);
  }
  // A user or internal error leaves nothing on stdout (the CLI's contract): drop any partial answer.
  if (r.exit_code >= 2) r.out.clear();
  return r;
}

}  // namespace zeroplan::cli
