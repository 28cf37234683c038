#include "planner/torch_version.h"

#include <fmt/format.h>

#include <cctype>

namespace zeroplan::planner {

namespace {
// Leading decimal digits of `s` from `i` (at most 4); nullopt when there are none.
std::optional<int> digits(std::string_view s, size_t& i) {
  const size_t start = i;
  int v = 0;
  while (i < s.size() && std::isdigit(static_cast<unsigned char>(s[i])) && i - start < 4)
    v = v * 10 + (s[i++] - '0');
  if (i == start) return std::nullopt;
  return v;
}
}  // namespace

std::optional<int> parse_torch_version(std::string_view s) {
  size_t i = 0;
  const auto major = digits(s, i);
  if (!major || i >= s.size() || s[i] != '.') return std::nullopt;
  ++i;
  const auto minor = digits(s, i);
  if (!minor || *minor >= 100) return std::nullopt;
  // An optional ".patch" and a local version ("+cu130") may follow; nothing else.
  if (i < s.size() && s[i] == '.') {
    ++i;
    if (!digits(s, i)) return std::nullopt;
  }
  if (i < s.size() && s[i] != '+') return std::nullopt;
  return *major * 100 + *minor;
}

std::string torch_version_string(int v) {
  return fmt::format("{}.{}", v / 100, v % 100);
}

}  // namespace zeroplan::planner
