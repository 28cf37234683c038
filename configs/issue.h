#pragma once
// Issue: one finding about a DeepSpeed config (from the key/type validator or the `check` lint),
// addressed by its dotted key path ("zero_optimization.reduce_bucket_size").
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <vector>

namespace zeroplan::configs {

// Error: DeepSpeed (or the HF Trainer) refuses the config, or it cannot do what the user meant.
// Warning: valid but suspicious (a silently ignored key, a known performance or memory trap).
// Info: how zeroplan read the config (an "auto" resolved, a default applied).
enum class Severity { Error, Warning, Info };
std::string_view severity_name(Severity s);

struct Issue {
  Severity severity = Severity::Warning;
  std::string path;        // dotted key path; "" for the whole config
  std::string message;     // one sentence with the numbers
  std::string suggestion;  // what to write instead ("" when none)
  // A mechanical fix `check --fix` applies: {"op": "remove"}, {"op": "set", "value": V} or
  // {"op": "rename", "to": "dotted.key"}; null when the right value is the user's choice.
  nlohmann::json fix;
};

nlohmann::json issue_to_json(const Issue& i);
std::string format_issue(const Issue& i);  // "error: zero_optimization.stgae: ... (did you mean ...)"
bool has_errors(const std::vector<Issue>& issues);
size_t count_severity(const std::vector<Issue>& issues, Severity s);

}  // namespace zeroplan::configs
