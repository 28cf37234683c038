// libFuzzer target: the HF config.json loader. Any input may be rejected with a UserError; nothing
// else may escape, crash, leak or hit undefined behaviour. For accepted configs the inventory and
// parameter count are computed too (that is where the arithmetic lives).
#include <cstddef>
#include <cstdint>
#include <string>

#include "common/errors.h"
#include "models/model_spec.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  try {
    const auto m = zeroplan::models::model_from_hf_config("fuzz", text);
    (void)m.num_parameters();
    (void)zeroplan::models::lora_trainable_parameters(m, 8, {});
  } catch (const zeroplan::UserError&) {
  }
  return 0;
}
