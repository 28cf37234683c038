#pragma once
// Knobs read from the comms logger's summary alone, for a log that carries no configuration (DeepSpeed
// 0.19 logs at WARNING by default, utils/logging.py, so its engine dump is absent; the timer lines and
// the comms summary print whatever the level: utils/timer.py print_dist, utils/comms_logging.py).
//
// What the calls show, from real 0.19.8 runs (tests/diagnose/q*.log, scripts/make_ds_logs.py):
// - the stage: ZeRO-3 gathers parameters every step and reduce-scatters gradients; ZeRO-1/2 reduce
//   gradients with all_reduce and gather the updated partitions once per step;
// - tiny reduction buckets: many more gradient reductions per step than DeepSpeed's default bucket
//   (5e8 elements, runtime/zero/config.py) would cut the step's gradient bytes into;
// - stage 3's prefetch and persistence: with --model, the log's parameter gathers are compared with
//   the calls DeepSpeed issues (planner::deepspeed_collectives, checked call for call against recorded
//   runs by tests/test_conformance.cpp) under the defaults, prefetch off and persistence 0.
#include <optional>
#include <string>
#include <vector>

#include "diagnose/run_log.h"
#include "planner/training_spec.h"

namespace zeroplan::diagnose {

// One stage-3 setting the gathers were compared against.
struct GatherMatch {
  std::string setting;  // "DeepSpeed's defaults", "stage3_prefetch_bucket_size 0", ...
  int64_t prefetch_bucket_size = 0, persistence_threshold = 0;  // the setting's values
  std::string dtype;  // the parameter dtype it was simulated in: "bf16/fp16" or "fp32"
  bool consistent = false;
  std::string evidence;  // the call that agrees or disagrees, with its counts
};

struct CommsInference {
  int stage = -1;  // 3, 2 (for "1 or 2": the calls of stages 1 and 2 are alike) or -1 unknown
  std::string stage_evidence;
  // Tiny reduction buckets: gradient reductions per step, their bytes per step and the call count
  // DeepSpeed's default bucket would give at most.
  bool tiny_buckets = false;
  double reductions_per_step = 0, reduced_bytes_per_step = 0;
  int64_t default_calls_at_most = 0;
  // Stage 3 with --model: the settings compared, and those the log agrees with. A knob is known when
  // every agreeing setting has the same value of it (with prefetch off, persistence 0 and the default
  // issue the same calls: the persistent parameters' post-step gathers take the place of their fetches).
  std::vector<GatherMatch> matches;
  std::vector<GatherMatch> agreeing;
  bool prefetch_known = false, persistence_known = false;
  bool prefetch_off = false, persistence_zero = false;
};

// `steps`: the optimizer steps the log covers (its timer lines); `workload`: --model/--gpus, or none.
CommsInference infer_from_comms(const RunLog& log, int steps,
                                const std::optional<planner::Workload>& workload);

}  // namespace zeroplan::diagnose
