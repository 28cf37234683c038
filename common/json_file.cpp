#include "common/json_file.h"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <utility>
#include <vector>

#include "common/bounded_file.h"
#include "common/errors.h"

namespace zeroplan {

// 64 MiB: far above any real config.json or ds_config.json; guards against reading a huge file.
constexpr std::uintmax_t kMaxJsonBytes = kMaxJsonFileBytes;

std::string describe_json_error(std::string_view text, std::size_t byte, std::string_view origin,
                                std::string_view what, bool caret) {
  // nlohmann counts the byte that failed 1-based; past the end means "unexpected end of input".
  const std::size_t pos = std::min(byte > 0 ? byte - 1 : 0, text.empty() ? 0 : text.size() - 1);
  std::size_t line = 1, line_start = 0;
  for (std::size_t i = 0; i < pos; ++i)
    if (text[i] == '\n') {
      ++line;
      line_start = i + 1;
    }
  std::size_t line_end = text.find('\n', line_start);
  if (line_end == std::string_view::npos) line_end = text.size();
  std::string shown(text.substr(line_start, line_end - line_start));
  if (!shown.empty() && shown.back() == '\r') shown.pop_back();
  std::size_t col = pos - line_start;  // 0-based, in bytes
  // Long lines (minified JSON): show 60 characters either side of the error.
  std::size_t cut = 0;
  if (shown.size() > 120 && col > 60) {
    cut = col - 60;
    shown = "..." + shown.substr(cut, 120);
    col = col - cut + 3;
  } else if (shown.size() > 120) {
    shown = shown.substr(0, 120) + "...";
  }
  for (char& c : shown)
    if (c == '\t') c = ' ';  // so the caret lines up
  const bool at_end = byte > text.size();
  const std::string head = fmt::format("{} '{}' is not valid JSON at line {}, column {}{}", what, origin,
                                       line, pos - line_start + 1, at_end ? " (unexpected end of file)" : "");
  if (!caret) return fmt::format("{}: '{}'; fix the file or regenerate it", head, shown);
  return fmt::format("{}; fix the file or regenerate it\n  {}\n  {}^", head, shown, std::string(col, ' '));
}

namespace {

// Python's json module (what transformers' PretrainedConfig.to_json_file and the HF Trainer's
// json.load use) writes and reads the non-standard tokens Infinity, -Infinity and NaN (json.dumps
// allow_nan=True is its default); real config.json files carry them (Granite-4's
// `time_step_limit: [0.0, Infinity]`, issue 29). Outside strings they become the largest finite
// double (a limit no size reaches) and null. Returns "" when the text has none.
struct PythonTokens {
  std::string text;  // empty when the input has none
  // Per replacement: where it ends in `text` and how many bytes longer it is than the token it
  // replaced, to map a parse error's position back to the user's text.
  std::vector<std::pair<size_t, std::ptrdiff_t>> shifts;
  size_t original_byte(size_t byte) const {
    std::ptrdiff_t shift = 0;
    for (const auto& [end, delta] : shifts)
      if (end < byte) shift += delta;
    return static_cast<size_t>(static_cast<std::ptrdiff_t>(byte) - shift);
  }
};

PythonTokens python_json_tokens_replaced(std::string_view text) {
  PythonTokens r;
  std::string& out = r.text;
  bool in_string = false;
  for (size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (in_string) {
      out += c;
      if (c == '\\' && i + 1 < text.size())
        out += text[++i];
      else if (c == '"')
        in_string = false;
      continue;
    }
    if (c == '"') in_string = true;
    const auto replace = [&](std::string_view token, std::string_view with) {
      if (text.substr(i, token.size()) != token) return false;
      out += with;
      i += token.size() - 1;
      r.shifts.emplace_back(
          out.size(), static_cast<std::ptrdiff_t>(with.size()) - static_cast<std::ptrdiff_t>(token.size()));
      return true;
    };
    if (!replace("-Infinity", "-1.7976931348623157e308") && !replace("Infinity", "1.7976931348623157e308") &&
        !replace("NaN", "null"))
      out += c;
  }
  if (r.shifts.empty()) out.clear();
  return r;
}

}  // namespace

nlohmann::json parse_json_text(std::string_view text, std::string_view origin, std::string_view what,
                               PythonJsonTokens python_tokens) {
  if (text.find_first_not_of(" \t\r\n") == std::string_view::npos)
    throw_user_error("{} '{}' is empty; expected a JSON object", what, origin);
  try {
    nlohmann::json j;
    try {
      j = nlohmann::json::parse(text);
    } catch (const nlohmann::json::parse_error& strict) {
      // Strict JSON failed: accept Python's Infinity/NaN tokens, else report the strict parser's error
      // (its position is in the user's text).
      const PythonTokens python = python_json_tokens_replaced(text);
      if (python.text.empty()) throw;
      if (python_tokens == PythonJsonTokens::Refuse)
        throw UserError(describe_json_error(text, strict.byte, origin, what, /*caret=*/false) +
                        " (Infinity, -Infinity and NaN are not JSON; only model configs, which Python's "
                        "json writes and reads, may carry them)");
      try {
        j = nlohmann::json::parse(python.text);
      } catch (const nlohmann::json::parse_error& e) {
        // The error past the Python tokens, at its position in the user's text.
        throw UserError(
            describe_json_error(text, python.original_byte(e.byte), origin, what, /*caret=*/false));
      }
    }
    if (!j.is_object())
      throw_user_error("{} '{}' must be a JSON object, found {}", what, origin, j.type_name());
    return j;
  } catch (const nlohmann::json::parse_error& e) {
    // e.byte is the 1-based byte at which parsing failed: report it as line:column with the offending
    // line, on one line (`check` shows a caret under it: describe_json_error(..., caret=true)).
    throw UserError(describe_json_error(text, e.byte, origin, what, /*caret=*/false));
  } catch (const nlohmann::json::exception&) {
    // out_of_range 406: a number literal beyond double range (e.g. 1e400) is reported apart from parse
    // errors.
    throw_user_error("{} '{}' holds a number too large to represent; fix the file", what, origin);
  }
}

nlohmann::json read_json_file(const std::string& path, std::string_view what, PythonJsonTokens python) {
  namespace fs = std::filesystem;
  std::error_code ec;
  if (!fs::exists(path, ec)) throw_user_error("{} '{}' does not exist", what, path);
  if (fs::is_directory(path, ec))
    throw_user_error("{} '{}' is a directory; give the path of a JSON file", what, path);
  // A regular file of at most kMaxJsonBytes, checked before reading (common/bounded_file.h).
  return parse_json_text(read_bounded_file(path, kMaxJsonBytes, what), path, what, python);
}

}  // namespace zeroplan
