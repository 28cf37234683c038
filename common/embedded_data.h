#pragma once
// Data files compiled into the binary (see cmake/EmbedData.cmake): the model zoo, GPU profiles and
// DeepSpeed key tables travel with `zeroplan`, so it runs from any directory.
#include <string_view>
#include <vector>

namespace zeroplan {

struct EmbeddedFile {
  std::string_view path;     // relative to the repository root, e.g. "models/zoo/llama-2-7b.json"
  std::string_view content;  // the file's bytes
};

const std::vector<EmbeddedFile>& embedded_files();

// Files whose path starts with `prefix` (e.g. "models/zoo/"), sorted by path.
std::vector<EmbeddedFile> embedded_files_under(std::string_view prefix);

// The bytes of the embedded file at `path` (e.g. "planner/data/time_model.json"). A file the build did
// not embed is a build error, not a user's: ZP_CHECK with "re-run cmake".
std::string_view embedded_file(std::string_view path);

}  // namespace zeroplan
