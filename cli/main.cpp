// zeroplan: plan DeepSpeed ZeRO runs in milliseconds, and check the plan on hardware.
//
// Exit codes: 0 success; 1 the answer is "no" (nothing fits, a checked config does not fit, a
// validation missed its tolerance); 2 a user error (one line on stderr, nothing on stdout);
// 3 an internal error (a bug: please report it with the command line).
// `validate` and `calibrate` run in a second program, zeroplan-exec (cli/exec_forward.h): this one
// links no CUDA, cuBLAS, NCCL or MPI.
#include <CLI/CLI.hpp>

#include "cli/commands.h"
#include "cli/exec_forward.h"
#include "cli/options.h"
#include "cli/run_main.h"

int main(int argc, char** argv) {
  using namespace zeroplan;
  cli::set_command_line(argc, argv);
  CLI::App app{
      "zeroplan: per-GPU memory, step time and the best DeepSpeed ZeRO configuration for a model on a "
      "cluster.\n"
      "Default action: plan, e.g. `zeroplan --model 13b --gpus 4xA40`.",
      "zeroplan"};
  app.set_version_flag("--version", cli::version_line());
  app.require_subcommand(0, 1);
  cli::PlanFlags flags;
  cli::add_plan_flags(app, flags);
  cli::CommandResult result = -1;
  cli::register_lists(app, result);
  cli::register_subcommands(app, flags, result);
  return cli::run_main(app, argc, argv, [&] { return result >= 0 ? result : cli::run_plan(flags); });
}
