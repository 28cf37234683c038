#pragma once
// The DeepSpeed config keys zeroplan knows, as data (configs/data/deepspeed_keys.json, embedded in
// the binary): every key DeepSpeed v0.16.9's config classes read, with its type, allowed values,
// code default, whether the HF Trainer fills "auto" there, and whether DeepSpeed rejects or
// silently ignores unknown keys beside it. validate_keys() checks a config against it.
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "configs/issue.h"

namespace zeroplan::configs {

// The parsed table (the "root" node and "deepspeed_version"). Throws InternalError if the embedded
// file is missing or malformed (a build problem, not a user error).
const nlohmann::json& deepspeed_key_table();
std::string deepspeed_keys_version();  // "0.16.9"

// Schema node of a dotted path ("zero_optimization.offload_param.device"), aliases resolved;
// nullptr when the key is unknown.
const nlohmann::json* key_schema(std::string_view dotted_path);
// DeepSpeed's code default for a key, when the table records one.
std::optional<nlohmann::json> key_default(std::string_view dotted_path);
// Every dotted path in the table (aliases included), sorted.
std::vector<std::string> valid_key_paths();

// Unknown or misspelled keys (with the nearest valid key, or the section the key belongs in),
// wrong types, values outside DeepSpeed's ranges, "auto" where nothing fills it, deprecated keys.
// Severity: Error when DeepSpeed (or the HF Trainer) would refuse the config or misread the value;
// Warning when DeepSpeed accepts it but silently ignores or replaces what the user wrote.
std::vector<Issue> validate_keys(const nlohmann::json& config);

}  // namespace zeroplan::configs
