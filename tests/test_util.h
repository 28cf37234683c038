#pragma once
// Small helpers shared by the GoogleTest suites.
#include <functional>
#include <string>

#include "common/errors.h"

namespace zeroplan::testing {

// The message of the UserError `f` throws, or "<no UserError>" when it throws none.
inline std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const UserError& e) {
    return e.what();
  }
  return "<no UserError>";
}

}  // namespace zeroplan::testing
