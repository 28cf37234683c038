// zeroplan-exec: the executor's commands, `validate` and `calibrate`, in their own program so that
// `zeroplan` (the planner) links no CUDA, cuBLAS, NCCL or MPI (issue 16). `zeroplan validate ...` and
// `zeroplan calibrate ...` exec this program with the same arguments (cli/exec_forward.h); under
// mpirun either program can be started (`mpirun -np 4 zeroplan validate ...` or
// `mpirun -np 4 zeroplan-exec validate ...`). Same flags, messages and exit codes as zeroplan.
#include <CLI/CLI.hpp>

#include "cli/commands.h"
#include "cli/options.h"
#include "cli/run_main.h"
#include "common/errors.h"

int main(int argc, char** argv) {
  using namespace zeroplan;
  CLI::App app{
      "zeroplan-exec: runs a plan on the native executor (validate) or measures this machine's GPU "
      "(calibrate).\nPlanning is `zeroplan --model M --gpus G`.",
      "zeroplan"};
  app.set_version_flag("--version", cli::version_line());
  app.require_subcommand(0, 1);
  cli::PlanFlags flags;
  cli::add_plan_flags(app, flags);
  cli::CommandResult result = -1;
  cli::register_validate(app, flags, result);
  cli::register_calibrate(app, flags, result);
  return cli::run_main(app, argc, argv, [&]() -> int {
    if (result < 0)
      throw UserError(
          "zeroplan-exec runs `validate` and `calibrate` only; plan with `zeroplan --model M --gpus G`");
    return result;
  });
}
