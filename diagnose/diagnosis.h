#pragma once
// Diagnosis: a parsed run (RunLog) compared with the planner's prediction for the same run, and the
// causes of its slowness or OOM ranked by predicted gain, each with its evidence and its fix.
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "diagnose/comms_inference.h"
#include "diagnose/run_log.h"
#include "planner/plan.h"
#include "planner/training_spec.h"

namespace zeroplan::diagnose {

// Medians over the steady-state micro-steps (the first one, warm-up, left out when there are >= 3).
struct PhaseTimes {
  double fwd_ms = -1, bwd_ms = -1, bwd_inner_ms = -1, bwd_allreduce_ms = -1, step_ms = -1;
  double total_ms = -1;  // fwd + bwd + step of one micro-step
  int samples = 0;
  bool from_micro = true;  // false: only the global (per optimizer step) lines were found
};
PhaseTimes measured_phases(const RunLog& log);

struct Cause {
  std::string id;     // prefetch_off, tiny_buckets, overlap_off, low_busbw, zero3_hooks, offload_step, oom
  std::string title;  // one sentence with numbers
  std::vector<std::string> evidence;
  double gain_ms = -1;     // predicted step time saved by the fix (per optimizer step); -1 unknown
  std::string gain_basis;  // "planner" (time model, both configs) or "measured" (from the log's timers)
  nlohmann::json fix;      // JSON merge patch on the DeepSpeed config; null when no config change fixes it
  std::string fix_text;
};

struct CollectiveCheck {
  std::string op;
  int64_t message_bytes = 0;  // as logged (per rank for all_gather/reduce_scatter, comms_logging.py)
  int64_t count = 0;
  double measured_busbw_GBps = 0;
  double model_busbw_GBps = -1;  // link model for the full message; -1 without a cluster
  // The process group it ran in, as the plan's layout tells it (planner/step_time.h CollectiveCost::group):
  // "tensor_parallel" for AutoTP's all-reduces (a message of micro x seq x hidden), else "zero".
  std::string group = "zero";
  int group_size = 0;
};

struct DiagnoseInputs {
  std::optional<nlohmann::json> config;  // --config
  std::string config_path;
  std::optional<planner::Workload> workload;  // --model and --gpus
  double memory_margin = 0.05;
};

struct Diagnosis {
  PhaseTimes measured;
  nlohmann::json config;  // the effective user config (null when none was found)
  std::string
      config_source;  // "--config PATH", "the log's engine JSON dump", "the log's engine configuration dump"
  int stage = -1;
  std::optional<planner::Workload> workload;  // as the config runs it
  std::optional<planner::Plan> predicted;     // the planner on the config as run
  std::optional<planner::Plan> fixed;         // the planner on the corrected config
  nlohmann::json fixed_config;                // config with every cause's fix applied (null: nothing to fix)
  std::vector<Cause> causes;                  // ranked: OOM first, then by predicted gain
  std::vector<std::string> observations;      // facts that are not causes
  std::vector<CollectiveCheck> collectives;
  std::vector<std::string> missing;  // what the log lacked, and how to get it
  // Without a config: what the comms logger's calls show (diagnose/comms_inference.h).
  std::optional<CommsInference> inferred;
};

Diagnosis diagnose(const RunLog& log, const DiagnoseInputs& in);

nlohmann::json to_json(const RunLog& log, const Diagnosis& d);
std::string format_text(const RunLog& log, const Diagnosis& d);

}  // namespace zeroplan::diagnose
