#pragma once
// Small helpers shared by the GoogleTest suites.
#include <cctype>
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

// A GoogleTest parameter name from free text (a file name, a run name): up to ".json", every character that
// is not a letter or a digit as '_'.
inline std::string test_name_of(std::string text) {
  text = text.substr(0, text.find(".json"));
  for (char& c : text)
    if (!std::isalnum(static_cast<unsigned char>(c))) c = '_';
  return text;
}

}  // namespace zeroplan::testing
