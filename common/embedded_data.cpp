#include "common/embedded_data.h"

namespace zeroplan {

std::vector<EmbeddedFile> embedded_files_under(std::string_view prefix) {
  std::vector<EmbeddedFile> out;
  for (const auto& f : embedded_files())
    if (f.path.starts_with(prefix)) out.push_back(f);
  return out;
}

}  // namespace zeroplan
