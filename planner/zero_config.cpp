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

}  // namespace zeroplan::planner
