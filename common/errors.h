#pragma once
// Two kinds of failure, kept apart on purpose:
//  - UserError: something the user can fix (bad flag, unknown GPU, malformed JSON). The CLI prints
//    its one-line message on stderr and exits with code 2, with nothing on stdout.
//  - InternalError (ZP_CHECK): a broken invariant of ours. Carries file:line, in the style of
//    TransformerEngine's NVTE_CHECK, so a bug report points at the code.
#include <fmt/format.h>

#include <stdexcept>
#include <string>

namespace zeroplan {

class UserError : public std::runtime_error {
 public:
  explicit UserError(const std::string& what) : std::runtime_error(what) {}
};

class InternalError : public std::logic_error {
 public:
  explicit InternalError(const std::string& what) : std::logic_error(what) {}
};

// fmt-formatted user error: throw user_error("unknown GPU '{}'; did you mean '{}'?", name, best)
template <typename... Args>
[[noreturn]] void throw_user_error(fmt::format_string<Args...> f, Args&&... args) {
  throw UserError(fmt::format(f, std::forward<Args>(args)...));
}

}  // namespace zeroplan

#define ZP_CHECK(cond, ...)                                                                                  \
  do {                                                                                                       \
    if (!(cond))                                                                                             \
      throw ::zeroplan::InternalError(                                                                       \
          fmt::format("{}:{}: check '{}' failed: {}", __FILE__, __LINE__, #cond, fmt::format(__VA_ARGS__))); \
  } while (0)
