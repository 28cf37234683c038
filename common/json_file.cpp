#include "common/json_file.h"

#include <filesystem>
#include <fstream>
#include <sstream>

#include "common/bounded_file.h"
#include "common/errors.h"

namespace zeroplan {

// 64 MiB: far above any real config.json or ds_config.json; guards against reading a huge file.
constexpr std::uintmax_t kMaxJsonBytes = kMaxJsonFileBytes;

nlohmann::json parse_json_text(std::string_view text, std::string_view origin, std::string_view what) {
  if (text.find_first_not_of(" \t\r\n") == std::string_view::npos)
    throw_user_error("{} '{}' is empty; expected a JSON object", what, origin);
  try {
    auto j = nlohmann::json::parse(text);
    if (!j.is_object())
      throw_user_error("{} '{}' must be a JSON object, found {}", what, origin, j.type_name());
    return j;
  } catch (const nlohmann::json::parse_error& e) {
    // e.byte is the 1-based byte at which parsing failed.
    throw_user_error("{} '{}' is not valid JSON (at byte {}); fix the file or regenerate it", what, origin,
                     e.byte);
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
