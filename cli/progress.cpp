#include "cli/progress.h"

#include <fmt/format.h>
#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>

namespace zeroplan::cli {

std::string format_duration(double seconds) {
  const auto s = static_cast<long>(std::lround(std::max(0.0, seconds)));
  if (s < 60) return fmt::format("{} s", s);
  if (s < 3600) return fmt::format("{} min {:02} s", s / 60, s % 60);
  return fmt::format("{} h {:02} min", s / 3600, (s % 3600) / 60);
}

Progress::Progress(std::string what, std::string unit, int total, std::string detail, bool force)
    : what_(std::move(what)),
      unit_(std::move(unit)),
      detail_(std::move(detail)),
      total_(total),
      start_(std::chrono::steady_clock::now()) {
  const char* term = std::getenv("TERM");
  enabled_ = force || (::isatty(STDERR_FILENO) == 1 && !(term && std::strcmp(term, "dumb") == 0));
}

Progress::~Progress() {
  clear();
}

void Progress::clear() {
  // "\r" + erase-in-line (ECMA-48 CSI K): the terminal line is left empty for what follows.
  if (!printed_) return;
  std::fputs("\r\033[K", stderr);
  std::fflush(stderr);
  printed_ = false;
}

void Progress::update(int done) {
  if (!enabled_) return;
  const double elapsed = std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
  // Remaining steps at the mean pace so far (the first step includes setup, so the ETA is pessimistic).
  const std::string eta =
      done > 0 && done < total_ ? ", ETA " + format_duration(elapsed / done * (total_ - done)) : "";
  std::fputs(fmt::format("\r\033[Kzeroplan {}: {} {}/{} ({}), elapsed {}{}", what_, unit_, done, total_,
                         detail_, format_duration(elapsed), eta)
                 .c_str(),
             stderr);
  std::fflush(stderr);
  printed_ = true;
}

}  // namespace zeroplan::cli
