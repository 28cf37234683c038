#include "common/json_file.h"

#include <filesystem>
#include <fstream>
#include <sstream>

#include "common/errors.h"

namespace zeroplan {

// 64 MiB: far above any real config.json or ds_config.json; guards against reading a huge file.
constexpr std::uintmax_t kMaxJsonBytes = 64ull << 20;

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
  const auto size = fs::file_size(path, ec);
  if (!ec && size > kMaxJsonBytes)
    throw_user_error("{} '{}' is larger than 64 MiB; not a config file", what, path);
  std::ifstream in(path, std::ios::binary);
  if (!in) throw_user_error("cannot read {} '{}'", what, path);
  std::stringstream ss;
  ss << in.rdbuf();
  return parse_json_text(ss.str(), path, what);
}

}  // namespace zeroplan
