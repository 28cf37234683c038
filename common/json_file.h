#pragma once
// Reading a user's JSON file with one clear error per failure: missing, a directory, empty,
// unreadable, or malformed (with the parser's position).
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>

namespace zeroplan {

// `what` names the file's role in messages, e.g. "model config".
nlohmann::json read_json_file(const std::string& path, std::string_view what);
nlohmann::json parse_json_text(std::string_view text, std::string_view origin, std::string_view what);

}  // namespace zeroplan
