#pragma once
// Reading the text of a ds_config.json the way each launcher reads it: DeepSpeed opens a config path
// with hjson (runtime/config.py DeepSpeedConfig: hjson.load), so comments and trailing commas pass;
// the HF Trainer and accelerate use json.load (transformers integrations/deepspeed.py
// HfDeepSpeedConfig), which refuses them.
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>

namespace zeroplan::configs {

struct ConfigText {
  nlohmann::json config;
  bool lenient = false;  // strict JSON failed; parsed after dropping comments and trailing commas
};

// Strict JSON first; on failure, the same text without // and /* */ comments and without commas
// directly before } or ] (outside strings). nullopt when neither parses.
std::optional<ConfigText> parse_config_text(std::string_view text);

}  // namespace zeroplan::configs
