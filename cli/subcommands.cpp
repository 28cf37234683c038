#include "cli/commands.h"

namespace zeroplan::cli {

// One line per subcommand declared in cli/commands.h.
void register_subcommands(CLI::App& app, PlanFlags& flags, CommandResult& result) {
  register_check(app, flags, result);
  register_calibrate(app, flags, result);
  register_validate(app, flags, result);
  register_diagnose(app, flags, result);
}

}  // namespace zeroplan::cli
