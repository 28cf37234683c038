#pragma once
// `zeroplan check --fix out.json`: the user's config with every mechanical fix the issues carry
// (Issue::fix) applied, each change explained. Only fixes with one right answer are applied: a key
// DeepSpeed removed or that is set together with its replacement (removed), a misspelled key of a
// pydantic section (renamed to the nearest valid key), a value outside a pydantic constraint (DeepSpeed's
// default), a number written as a string pydantic cannot read ("5e8" -> 500000000), an enum value with a
// near match ("cpuu" -> "cpu"), train_batch_size that breaks DeepSpeed's batch assertion (micro x
// accumulation x GPUs), stage-3 keys below stage 3 and a partial-offload ratio below stage 3 (removed).
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "configs/issue.h"

namespace zeroplan::configs {

struct AppliedFix {
  std::string key;   // dotted path in the input
  std::string what;  // "removed", "renamed to X", "set to V"
  std::string why;   // the issue's message
};

struct FixResult {
  nlohmann::json config;
  std::vector<AppliedFix> applied;
  std::vector<std::string> not_fixed;  // error-level issues without a mechanical fix ("key: message")
};

FixResult apply_fixes(const nlohmann::json& config, const std::vector<Issue>& issues);

}  // namespace zeroplan::configs
