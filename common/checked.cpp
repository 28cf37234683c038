#include "common/checked.h"

#include <cerrno>
#include <cstdlib>
#include <string>

namespace zeroplan {

int64_t parse_positive_count(std::string_view text, std::string_view what, int64_t max) {
  std::string s(text);
  if (s.empty()) throw_user_error("{} is empty; give a positive whole number such as 7e9", what);
  char* end = nullptr;
  errno = 0;
  const double v = std::strtod(s.c_str(), &end);
  if (end == s.c_str() || *end != '\0')
    throw_user_error("{} '{}' is not a number; give a positive whole number such as 7e9", what, s);
  if (!std::isfinite(v)) throw_user_error("{} '{}' is not finite; give a positive whole number", what, s);
  if (v <= 0) throw_user_error("{} must be positive, got '{}'", what, s);
  if (v != std::floor(v)) throw_user_error("{} must be a whole number, got '{}'", what, s);
  if (v > static_cast<double>(max)) throw_user_error("{} '{}' is above zeroplan's limit of {}", what, s, max);
  return static_cast<int64_t>(v);
}

}  // namespace zeroplan
