// zeroplan._core: the `zeroplan` program as Python functions (issue 30). Everything goes through
// cli/app.h, the code path of the `zeroplan` executable: flags are parsed by the same CLI11 app with
// the same messages, and answers are the same text/JSON, captured instead of printed. Python builds
// its dataclasses and exceptions from that (python/zeroplan/_api.py).
#include <nanobind/nanobind.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/tuple.h>
#include <nanobind/stl/vector.h>

#include <mutex>
#include <string>
#include <tuple>
#include <vector>

#include "cli/app.h"
#include "cli/run_main.h"

namespace nb = nanobind;

NB_MODULE(_core, m) {
  m.doc() = "zeroplan's planner (the library the zeroplan program runs), called in-process";
  m.def(
      "run",
      [](const std::vector<std::string>& args) {
        zeroplan::cli::CapturedRun r;
        {
          // The planner touches no Python object: other Python threads may run meanwhile. Commands run
          // one at a time, though: the CLI code was written for one command per process (e.g. the
          // static --json flags of `models`/`gpus`, cli/cmd_list.cpp).
          nb::gil_scoped_release release;
          static std::mutex one_at_a_time;
          const std::lock_guard<std::mutex> lock(one_at_a_time);
          r = zeroplan::cli::run_zeroplan_captured(args);
        }
        return std::make_tuple(r.exit_code, r.out, r.error);
      },
      nb::arg("args"), "Runs `zeroplan ARGS...` in-process; returns (exit_code, stdout_text, error_line).");
  m.def(
      "main",
      [](const std::vector<std::string>& argv) {
        std::vector<std::string> storage = argv;
        std::vector<char*> cargv;
        for (auto& a : storage) cargv.push_back(a.data());
        cargv.push_back(nullptr);
        // The console script is its own process: signal handlers and the hand-over to zeroplan-exec
        // behave as in the C++ program.
        return zeroplan::cli::run_zeroplan(static_cast<int>(storage.size()), cargv.data(), true);
      },
      nb::arg("argv"), "The `zeroplan` program: prints to stdout/stderr, returns the exit code.");
  m.def("version", [] { return zeroplan::cli::version_line(); });
}
