#pragma once
// Progress of long work (issue 30, item 5: `validate`, `calibrate`): one line on stderr, rewritten in
// place, with what is done, the ranks, the elapsed time and an ETA, only when stderr is a terminal;
// piped or redirected output stays exactly as before (scripts and tests read it).
#include <chrono>
#include <string>

namespace zeroplan::cli {

class Progress {
 public:
  // `what`: "validate"; `unit`: "step"; `detail`: e.g. "4 thread ranks". Shown when stderr is a
  // terminal and TERM is not "dumb", or when `force` (tests).
  Progress(std::string what, std::string unit, int total, std::string detail, bool force = false);
  ~Progress();  // clears the line, so the answer that follows starts clean
  Progress(const Progress&) = delete;
  Progress& operator=(const Progress&) = delete;

  void update(int done);
  // Erases the line (if shown) so that a line printed next on the same terminal starts clean; the
  // next update() draws it again. `calibrate` prints each measurement as it goes.
  void clear();
  bool shown() const { return enabled_; }

 private:
  std::string what_, unit_, detail_;
  int total_;
  bool enabled_;
  bool printed_ = false;
  std::chrono::steady_clock::time_point start_;
};

// "12 s", "3 min 05 s", "1 h 02 min".
std::string format_duration(double seconds);

}  // namespace zeroplan::cli
