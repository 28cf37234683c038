// libFuzzer target: the cluster-spec parser ("4xA40", "2x8xH100", ...).
#include <cstddef>
#include <cstdint>
#include <string>

#include "common/errors.h"
#include "hwprofiles/cluster.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size > 4096) return 0;  // specs are short; longer inputs only slow the search down
  const std::string text(reinterpret_cast<const char*>(data), size);
  if (text.find('/') != std::string::npos || text.find(".json") != std::string::npos)
    return 0;  // no file system access
  try {
    const auto c = zeroplan::hw::parse_cluster(text);
    (void)c.world_size();
  } catch (const zeroplan::UserError&) {
  }
  return 0;
}
