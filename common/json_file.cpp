#include "common/json_file.h"

#include <filesystem>
#include <fstream>
#include <sstream>
#include <algorithm>

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
  const std::string head = fmt::format("{} '{}' is not valid JSON at line {}, column {}{}", what, origin, line,
                                       pos - line_start + 1, at_end ? " (unexpected end of file)" : "");
  if (!caret) return fmt::format("{}: '{}'; fix the file or regenerate it", head, shown);
  return fmt::format("{}; fix the file or regenerate it\n  {}\n  {}^", head, shown, std::string(col, ' '));
}

nlohmann::json parse_json_text(std::string_view text, std::string_view origin, std::string_view what) {
  if (text.find_first_not_of(" \t\r\n") == std::string_view::npos)
    throw_user_error("{} '{}' is empty; expected a JSON object", what, origin);
  try {
    auto j = nlohmann::json::parse(text);
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

nlohmann::json read_json_file(const std::string& path, std::string_view what) {
  namespace fs = std::filesystem;
  std::error_code ec;
  if (!fs::exists(path, ec)) throw_user_error("{} '{}' does not exist", what, path);
  if (fs::is_directory(path, ec))
    throw_user_error("{} '{}' is a directory; give the path of a JSON file", what, path);
  // A regular file of at most kMaxJsonBytes, checked before reading (common/bounded_file.h).
  return parse_json_text(read_bounded_file(path, kMaxJsonBytes, what), path, what);
}

}  // namespace zeroplan
