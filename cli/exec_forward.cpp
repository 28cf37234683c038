#include "cli/exec_forward.h"

#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <vector>

#include "cli/commands.h"
#include "common/errors.h"

namespace zeroplan::cli {
namespace {

constexpr const char* kExecName = "zeroplan-exec";

int g_argc = 0;
char** g_argv = nullptr;

bool executable(const std::filesystem::path& p) {
  std::error_code ec;
  return std::filesystem::is_regular_file(p, ec) && ::access(p.c_str(), X_OK) == 0;
}

[[noreturn]] void hand_over(const std::string& command) {
  // In-process callers (the Python module, cli/app.h) record no command line: replacing the
  // interpreter with zeroplan-exec would end the caller's program.
  if (g_argv == nullptr)
    throw_user_error("`{}` runs in the executor program {}; run `zeroplan {}` from a shell", command,
                     kExecName, command);
  std::fflush(stdout);
  const auto prog = find_executor_program();
  if (!prog)
    throw_user_error(
        "`zeroplan {}` runs in the executor program {}, which is neither next to this zeroplan nor on "
        "PATH; build it with `cmake --build build --target {}` (scripts/test.sh builds everything) or set "
        "ZEROPLAN_EXEC to its path",
        command, kExecName, kExecName);
  std::vector<char*> args(g_argv, g_argv + g_argc);
  args.push_back(nullptr);
  ::execv(prog->c_str(), args.data());
  throw_user_error("cannot run the executor program '{}' for `zeroplan {}`: {}", *prog, command,
                   std::strerror(errno));
}

void register_forwarded(CLI::App& app, const std::string& name, const std::string& description) {
  CLI::App* sub = app.add_subcommand(name, description + "\n(runs in " + kExecName + ")");
  sub->allow_extras()->fallthrough();
  // Called when CLI11 meets the subcommand's name, before any of its own arguments are parsed: the
  // executor parses the whole command line itself (help included).
  sub->preparse_callback([name](std::size_t) { hand_over(name); });
}

}  // namespace

void set_command_line(int argc, char** argv) {
  g_argc = argc;
  g_argv = argv;
}

std::optional<std::string> find_executor_program() {
  namespace fs = std::filesystem;
  if (const char* env = std::getenv("ZEROPLAN_EXEC"); env && *env) {
    if (executable(env)) return std::string(env);
    throw_user_error("ZEROPLAN_EXEC '{}' is not an executable file", env);
  }
  std::error_code ec;
  const fs::path self = fs::canonical("/proc/self/exe", ec);
  if (!ec) {
    for (const fs::path& p :
         {self.parent_path() / kExecName, self.parent_path().parent_path() / "lib" / "zeroplan" / kExecName})
      if (executable(p)) return p.string();
  }
  if (const char* path = std::getenv("PATH")) {
    std::string_view rest = path;
    while (!rest.empty()) {
      const auto colon = rest.find(':');
      const std::string dir(rest.substr(0, colon));
      rest = colon == std::string_view::npos ? std::string_view{} : rest.substr(colon + 1);
      if (!dir.empty() && executable(fs::path(dir) / kExecName)) return (fs::path(dir) / kExecName).string();
    }
  }
  return std::nullopt;
}

// zeroplan's versions of the executor subcommands (the real ones, cli/cmd_validate.cpp and
// cli/cmd_calibrate.cpp, are compiled into zeroplan-exec only).
void register_validate(CLI::App& app, PlanFlags&, CommandResult&) {
  register_forwarded(app, "validate",
                     "Run one plan on the executor (cpu: thread ranks, e.g. --gpus 4xCPU; cuda: GPUs) and "
                     "compare the\nmeasured memory, communication and time with the planner's prediction.");
}

void register_calibrate(CLI::App& app, PlanFlags&, CommandResult&) {
  register_forwarded(app, "calibrate", "Measure this machine's GPU and write a GPU profile JSON for --gpus");
}

}  // namespace zeroplan::cli
