#include "configs/config_text.h"

namespace zeroplan::configs {
namespace {

// Drops a comma when the next non-space character (comments already removed) is } or ].
std::string strip_trailing_commas(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  bool in_string = false, escaped = false;
  for (size_t i = 0; i < s.size(); ++i) {
    const char c = s[i];
    if (in_string) {
      out += c;
      if (escaped)
        escaped = false;
      else if (c == '\\')
        escaped = true;
      else if (c == '"')
        in_string = false;
      continue;
    }
    if (c == '"') in_string = true;
    if (c == ',') {
      size_t j = i + 1;
      while (j < s.size() && (s[j] == ' ' || s[j] == '\t' || s[j] == '\r' || s[j] == '\n')) ++j;
      if (j < s.size() && (s[j] == '}' || s[j] == ']')) continue;
    }
    out += c;
  }
  return out;
}

// Removes // and /* */ comments outside strings.
std::string strip_comments(std::string_view s) {
  std::string out;
  bool in_string = false, escaped = false;
  for (size_t i = 0; i < s.size(); ++i) {
    const char c = s[i];
    if (in_string) {
      out += c;
      if (escaped)
        escaped = false;
      else if (c == '\\')
        escaped = true;
      else if (c == '"')
        in_string = false;
      continue;
    }
    if (c == '"') in_string = true;
    if (c == '/' && i + 1 < s.size() && s[i + 1] == '/') {
      while (i < s.size() && s[i] != '\n') ++i;
      out += '\n';
      continue;
    }
    if (c == '/' && i + 1 < s.size() && s[i + 1] == '*') {
      i += 2;
      while (i + 1 < s.size() && !(s[i] == '*' && s[i + 1] == '/')) ++i;
      ++i;
      continue;
    }
    out += c;
  }
  return out;
}

}  // namespace

std::optional<ConfigText> parse_config_text(std::string_view text) {
  nlohmann::json j = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (!j.is_discarded()) return ConfigText{std::move(j), false};
  const std::string cleaned = strip_trailing_commas(strip_comments(text));
  j = nlohmann::json::parse(cleaned, nullptr, /*allow_exceptions=*/false);
  if (!j.is_discarded()) return ConfigText{std::move(j), true};
  return std::nullopt;
}

}  // namespace zeroplan::configs
