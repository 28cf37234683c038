#pragma once
// The DeepSpeed config keys zeroplan knows, as data generated from DeepSpeed itself
// (scripts/ds_keys_dump.py -> configs/data/ds_keys_<version>.json, one table per DeepSpeed release,
// embedded in the binary): every key DeepSpeed reads, its type, default, pydantic constraints
// (gt/ge/lt/le), aliases, deprecations with their new_param, whether the section is a pydantic model
// (rejects unknown keys, drops "auto", coerces strings) or a plain dict (ignores unknown keys), keys
// DeepSpeed removed (refused at start-up), and the keys the HF Trainer fills for "auto".
// validate_keys() checks a config against one version's table.
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "configs/issue.h"
#include "configs/runner.h"

namespace zeroplan::configs {

// "0.19.8" -> {0, 19, 8}, for ordering releases; anything but digits and dots -> {}.
std::vector<int> version_parts(std::string_view v);

// Versions with a table, oldest first ("0.14.5", ..., "0.19.8").
std::vector<std::string> deepspeed_versions();
// "" -> the newest; "0.16.9" exact; "0.16" or "0.16.4" -> the table of that minor release (the
// config classes do not change within a minor release). Throws UserError listing the versions.
std::string resolve_deepspeed_version(std::string_view requested);

// The parsed table of `version` ("" = newest). InternalError if an embedded file is malformed.
const nlohmann::json& deepspeed_key_table(std::string_view version = {});
std::string deepspeed_keys_version(std::string_view version = {});

// Schema node of a dotted path ("zero_optimization.offload_param.device"), aliases resolved;
// nullptr when the key is unknown.
const nlohmann::json* key_schema(std::string_view dotted_path, std::string_view version = {});
// DeepSpeed's code default for a key, when the table records one.
std::optional<nlohmann::json> key_default(std::string_view dotted_path, std::string_view version = {});
// Every dotted path in the table (aliases included), sorted.
std::vector<std::string> valid_key_paths(std::string_view version = {});

// How pydantic (lax mode) turns a JSON value into the field's type, as DeepSpeed's
// DeepSpeedConfigModel does. v2 (DeepSpeed >= 0.15): int accepts integers, floats without a fraction
// and strings of an integer ("500", " 500 ", "1_000", "5.0"), not "5e8" nor 5.5; v1 (DeepSpeed 0.14,
// deepspeed.pydantic_v1): a float is truncated (5.5 -> 5), strings as Python int() ("5.0" refused).
// Recorded on 2026-11-24 against the installed DeepSpeed 0.19.8 and 0.14.5 (DeepSpeedZeroConfig).
std::optional<int64_t> pydantic_int(const nlohmann::json& v, bool pydantic_v1);
std::optional<double> pydantic_number(const nlohmann::json& v);
// true/false, 0/1, and the strings "true/false/yes/no/on/off/t/f/y/n/1/0" (any case).
std::optional<bool> pydantic_bool(const nlohmann::json& v);
// The table's pydantic API ("v1" for 0.14, "v2" after).
bool uses_pydantic_v1(std::string_view version = {});

struct ValidateOptions {
  std::string version;  // "" = newest table
  Runner runner = Runner::DeepSpeed;
};

// Unknown or misspelled keys (with the nearest valid key, or the section the key belongs in), wrong
// types (after pydantic's coercion), values outside the pydantic constraints, "auto" where the runner
// fills nothing, deprecated keys and their replacements, keys DeepSpeed removed.
// Severity: Error when DeepSpeed (or the runner) refuses the config at start-up; Warning when DeepSpeed
// accepts it but silently ignores or replaces what the user wrote.
std::vector<Issue> validate_keys(const nlohmann::json& config, const ValidateOptions& o = {});

}  // namespace zeroplan::configs
