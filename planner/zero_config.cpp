#include "planner/zero_config.h"

namespace zeroplan::planner {

// deepspeed/runtime/zero/config.py (v0.16): DeepSpeedZeroConfig field defaults are the member
// initialisers of ZeroConfig; the one stage-dependent default is overlap_comm, whose validator
// `overlap_comm_valid` sets it to True when stage == 3 and leaves it False otherwise.
ZeroConfig ZeroConfig::deepspeed_defaults(int stage) {
  ZeroConfig z;
  z.stage = stage;
  z.overlap_comm = (stage == 3);
  return z;
}

int64_t master_bytes(const ZeroConfig& z) {
  return z.bf16_master_weights ? 2 : 4;
}

int64_t moment_bytes(const ZeroConfig& z, DeepSpeedVersion v) {
  if (!z.bf16_optimizer_states) return 8;
  const bool offloaded = z.stage >= 1 && z.offload_optimizer != Offload::None;
  return offloaded && v == DeepSpeedVersion::V0_18_9 ? 8 : 4;
}

}  // namespace zeroplan::planner
