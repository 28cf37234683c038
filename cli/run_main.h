#pragma once
// What both executables (`zeroplan`, the planner, and `zeroplan-exec`, the executor's commands) do
// around their CLI11 app: signal handling, parsing, and the exit-code contract (0 success, 1 a "no"
// answer, 2 a user error on one stderr line with nothing on stdout, 3 an internal error).
#include <CLI/CLI.hpp>
#include <functional>
#include <string>

namespace zeroplan::cli {

// "zeroplan 0.1.0 (commit v0.1.0-12-gabcdef0)": the project version and the configure-time
// `git describe` of the source tree ("unknown" outside a git checkout).
std::string version_line();

// Installs the SIGINT/SIGTERM handlers (no partial output file is left behind), parses argv into
// `app` and runs `run` (which returns the exit code) after a successful parse; maps every exception
// to the exit-code contract.
int run_main(CLI::App& app, int argc, char** argv, const std::function<int()>& run);

// run_main without the signal handlers: for a caller that is not its own process (the Python
// module, whose interpreter owns SIGINT).
int run_parsed(CLI::App& app, int argc, char** argv, const std::function<int()>& run);

// Runs `body` under the same exception-to-exit-code mapping (for work done outside a parse).
int run_guarded(const std::function<int()>& body);

// One line for stderr, whatever `msg` holds (newlines become spaces, control bytes '?', an echoed
// value longer than 80 characters is shortened).
std::string one_line(const std::string& msg);

}  // namespace zeroplan::cli
