// libFuzzer target: the GPU profile reader (the JSON `--gpus` and `zeroplan calibrate` share).
#include <cstddef>
#include <cstdint>
#include <string>

#include "common/errors.h"
#include "hwprofiles/gpu_profile.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  try {
    const auto g = zeroplan::hw::gpu_from_json("fuzz", text);
    (void)g.intra_node.busbw.busbw_at(1 << 20);
    (void)zeroplan::hw::gpu_from_json("fuzz-roundtrip", zeroplan::hw::gpu_to_json(g));
  } catch (const zeroplan::UserError&) {
  }
  return 0;
}
