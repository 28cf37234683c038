#include "configs/issue.h"

#include <algorithm>

namespace zeroplan::configs {

std::string_view severity_name(Severity s) {
  switch (s) {
    case Severity::Error:
      return "error";
    case Severity::Warning:
      return "warning";
    case Severity::Info:
      return "info";
  }
  return "unknown";
}

nlohmann::json issue_to_json(const Issue& i) {
  nlohmann::json j = {{"severity", severity_name(i.severity)}, {"key", i.path}, {"message", i.message}};
  if (!i.suggestion.empty()) j["suggestion"] = i.suggestion;
  if (!i.fix.is_null()) j["fix"] = i.fix;
  return j;
}

std::string format_issue(const Issue& i) {
  std::string s(severity_name(i.severity));
  s += ": ";
  if (!i.path.empty()) s += i.path + ": ";
  s += i.message;
  if (!i.suggestion.empty()) s += " (" + i.suggestion + ")";
  return s;
}

bool has_errors(const std::vector<Issue>& issues) {
  return count_severity(issues, Severity::Error) > 0;
}

size_t count_severity(const std::vector<Issue>& issues, Severity s) {
  return static_cast<size_t>(
      std::count_if(issues.begin(), issues.end(), [s](const Issue& i) { return i.severity == s; }));
}

}  // namespace zeroplan::configs
