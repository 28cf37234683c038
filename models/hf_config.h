#pragma once
// Internal to models/: the config.json reader on an already-parsed JSON object (the zoo and
// load_model parse files with common/json_file.h first).
#include <nlohmann/json.hpp>
#include <string>

#include "models/model_spec.h"

namespace zeroplan::models {

ModelSpec model_from_hf_json(const std::string& origin, const nlohmann::json& j);

}  // namespace zeroplan::models
