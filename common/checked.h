#pragma once
// Checked 64-bit byte arithmetic: a byte count that overflows is a user error (absurd input such as
// --params 1e30), never a silent wrap-around.
#include <cmath>
#include <cstdint>
#include <limits>
#include <string_view>

#include "common/errors.h"

namespace zeroplan {

inline int64_t checked_add(int64_t a, int64_t b) {
  int64_t r;
  if (__builtin_add_overflow(a, b, &r))
    throw UserError("byte count overflows 64 bits; the input is beyond zeroplan's limits");
  return r;
}

inline int64_t checked_mul(int64_t a, int64_t b) {
  int64_t r;
  if (__builtin_mul_overflow(a, b, &r))
    throw UserError("byte count overflows 64 bits; the input is beyond zeroplan's limits");
  return r;
}

inline int64_t ceil_div(int64_t a, int64_t b) {
  return (a + b - 1) / b;
}

// Parses a positive integer that users may write as 7e9, 7000000000 or 7.0e9; rejects fractions,
// NaN, infinities, and values above `max`. `what` names the flag in the message.
int64_t parse_positive_count(std::string_view text, std::string_view what, int64_t max);

}  // namespace zeroplan
