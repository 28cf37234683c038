#pragma once
// Reading a user's JSON file with one clear error per failure: missing, a directory, empty,
// unreadable, or malformed (with the parser's position).
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>

namespace zeroplan {

// Python's json tokens Infinity, -Infinity and NaN (outside strings): read only where Python's json
// reads the file for its user (model configs: transformers' PretrainedConfig), refused elsewhere. A
// DeepSpeed config is read by DeepSpeed with hjson (runtime/config.py DeepSpeedConfig), which takes
// `Infinity` as a quoteless string (and fails on `Infinity}`), never as a number.
enum class PythonJsonTokens : bool { Refuse, Accept };

// `what` names the file's role in messages, e.g. "model config".
nlohmann::json read_json_file(const std::string& path, std::string_view what,
                              PythonJsonTokens python = PythonJsonTokens::Refuse);
// "what 'origin' is not valid JSON at line L, column C: '<the offending line>'; ..." for the 1-based
// `byte` nlohmann::json::parse_error reports. With `caret`, the line and a caret under the byte follow
// on two more lines (used by `zeroplan check`, whose users edit the file by hand).
std::string describe_json_error(std::string_view text, std::size_t byte, std::string_view origin,
                                std::string_view what, bool caret);
nlohmann::json parse_json_text(std::string_view text, std::string_view origin, std::string_view what,
                               PythonJsonTokens python = PythonJsonTokens::Refuse);

}  // namespace zeroplan
