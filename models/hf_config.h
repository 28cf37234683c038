#pragma once
// Internal to models/: the config.json reader on an already-parsed JSON object (the zoo and
// load_model parse files with common/json_file.h first).
#include <nlohmann/json.hpp>
#include <string>

#include "models/model_spec.h"

namespace zeroplan::models {

// `with_checkpoint`: the config sits beside *.safetensors files whose headers will give the exact
// inventory, so an unknown family with structural fields is read from its standard fields (for
// activations and FLOPs) with a warning instead of refused.
ModelSpec model_from_hf_json(const std::string& origin, const nlohmann::json& j, bool with_checkpoint = false);

}  // namespace zeroplan::models
