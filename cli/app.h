#pragma once
// The `zeroplan` program as functions, so that main() and the Python module (python/zeroplan_ext.cpp)
// build the same CLI11 app, parse the same flags with the same messages and run the same commands
// (issue 30: "the Python module calls the same library the CLI calls and returns the same JSON").
#include <string>
#include <vector>

namespace zeroplan::cli {

// main()'s body: parses argv, runs the command, prints its answer to stdout and an error as one
// stderr line; returns the exit code (0, 1 "no", 2 user error, 3 internal error; cli/main.cpp).
// Installs the SIGINT/SIGTERM handlers only when `own_process` (not inside a Python interpreter).
int run_zeroplan(int argc, char** argv, bool own_process = true);

// One command run in-process: its exit code, what it would have printed on stdout, and for exit
// codes 2 and 3 the one-line error message the CLI prints after "zeroplan: error: ".
struct CapturedRun {
  int exit_code = 0;
  std::string out;
  std::string error;
};

// `args` as typed after the program name, e.g. {"--model", "13b", "--gpus", "4xA40", "--json"}.
CapturedRun run_zeroplan_captured(const std::vector<std::string>& args);

}  // namespace zeroplan::cli
