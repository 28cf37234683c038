#pragma once
// Where a command's answer goes: stdout for the `zeroplan` program, a string for an in-process caller
// (the Python module, python/zeroplan_ext.cpp). Commands print their answer (the text report or the
// JSON contract) through write_answer(), so `zeroplan --json` and `zeroplan.plan(...)` are produced by
// the same code path and cannot drift apart (issue 30). Warnings and notes still go to stderr.
#include <string>
#include <string_view>

namespace zeroplan::cli {

// Writes `text` to the active capture when one is installed on this thread, else to stdout.
void write_answer(std::string_view text);

// While alive, write_answer() on this thread appends to `out`, and run_main's error path (one line,
// exit 2 or 3) stores its message in `error` instead of printing it. Nested captures are not needed.
class CaptureAnswer {
 public:
  CaptureAnswer(std::string& out, std::string& error);
  ~CaptureAnswer();
  CaptureAnswer(const CaptureAnswer&) = delete;
  CaptureAnswer& operator=(const CaptureAnswer&) = delete;
};

// The capture's error slot, or nullptr when no capture is installed (errors go to stderr).
std::string* captured_error();

}  // namespace zeroplan::cli
