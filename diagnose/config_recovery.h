#pragma once
// The DeepSpeed config of a logged run when the user has no file at hand: rebuilt from the engine's
// start-up dump (runtime/config.py DeepSpeedConfig.print: one "key ..... value" line per resolved
// attribute, zero_config as the pydantic repr "stage=3 reduce_bucket_size=... ..."), and the ZeRO
// knobs of a config read with DeepSpeed's code defaults without a model (for the rules that need no
// planner).
#include <nlohmann/json.hpp>

#include "diagnose/run_log.h"
#include "planner/zero_config.h"

namespace zeroplan::diagnose {

// A ds_config JSON with what the dump shows (batch keys, precision, zero_optimization); null when the
// log has no dump.
nlohmann::json config_from_engine_dump(const RunLog& log);

// zero_optimization of `config` over DeepSpeed's defaults for its stage (planner::ZeroConfig, v0.16
// runtime/zero/config.py); values that are not numbers/booleans (e.g. "auto") keep the default.
planner::ZeroConfig zero_from_config(const nlohmann::json& config);

}  // namespace zeroplan::diagnose
