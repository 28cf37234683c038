#pragma once
// Reading a user's ds_config.json back into what DeepSpeed will actually run: "auto" resolved the
// way the HF Trainer resolves it (transformers/integrations/deepspeed.py), absent keys given
// DeepSpeed's *code* defaults (configs/data/ds_keys_<version>.json, planner/zero_config.h), batch
// arithmetic completed and checked the way runtime/config.py does, and known traps reported.
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "configs/issue.h"
#include "configs/runner.h"
#include "planner/plan.h"
#include "planner/training_spec.h"
#include "planner/zero_config.h"

namespace zeroplan::configs {

// HF TrainingArguments defaults used when the config says "auto" and no flag gives the value
// (transformers TrainingArguments: per_device_train_batch_size=8, gradient_accumulation_steps=1,
// max_grad_norm=1.0).
inline constexpr int64_t kHfDefaultMicroBatch = 8;
inline constexpr int64_t kHfDefaultGradAccum = 1;

struct ReadConfig {
  nlohmann::json resolved;   // the user's config with every "auto" replaced by its value
  planner::ZeroConfig zero;  // stage, offload, batch, every knob (absent -> DeepSpeed's code default)
  planner::Precision precision = planner::Precision::FP32;
  int64_t train_batch_size = 0;
  std::vector<Issue> issues;      // validator findings + arithmetic + traps, in that order
  bool usable = true;             // false when the config cannot be turned into a plan at all
  std::string deepspeed_version;  // the table judged against
  Runner runner = Runner::DeepSpeed;
  bool runner_assumed = false;
  // type(engine.optimizer).__name__ as planner::runtime_path (planner/ds_runtime.h, h1b's model of
  // engine.py _do_optimizer_sanity_check) predicts it; "" when that model does not cover the version.
  std::string optimizer_wrapper;  // not given: chosen from the presence of "auto"
  // activation_checkpointing, where it acts (the script uses deepspeed.checkpointing: --checkpoint-impl
  // deepspeed): cpu_checkpointing and partition_activations (planner/checkpoint_offload.h).
  bool cpu_checkpointing = false;
  bool partition_activations = false;
  // "sequence_parallel_size" (Ulysses SP; runtime/config.py reads it for the batch arithmetic), when
  // zeroplan models it (planner/sequence_parallel.h); 1 otherwise.
  int sequence_parallel = 1;
  // "tensor_parallel.autotp_size" (AutoTP, planner/tensor_parallel.h) when zeroplan models it; 1 otherwise.
  int tensor_parallel = 1;
};

// Which DeepSpeed and which launcher the config is judged for.
struct CheckOptions {
  std::string deepspeed_version;  // "" = the newest table (configs/data/ds_keys_<v>.json)
  // The runner; nullopt = HF when the file contains "auto" anywhere (only the HF Trainer and
  // accelerate fill it), plain deepspeed.initialize otherwise. ReadConfig::runner says which applied.
  std::optional<Runner> runner;
  // The text was not strict JSON (comments or trailing commas; configs/config_text.h): DeepSpeed's
  // hjson reader accepts it, the HF Trainer's and accelerate's json.load refuse it. `json_error`
  // says where strict parsing stopped.
  bool lenient_json = false;
  std::string json_error;
};

// `w` supplies the model (hidden size, tensors), the cluster (world size, GPU memory) and the
// user's batch flags (w.train.micro_batch / grad_accum / global_batch, used for "auto") and
// checkpointing (w.train.checkpointing; none when absent: it is not part of a DeepSpeed config).
ReadConfig read_deepspeed_config(const nlohmann::json& config, const planner::Workload& w,
                                 const CheckOptions& o = {});

// The workload exactly as the config runs it: precision, micro-batch, accumulation, global batch and
// checkpointing from `r` (the model and cluster from `w`). `zeroplan check` evaluates r.zero on it.
planner::Workload workload_for_config(const planner::Workload& w, const ReadConfig& r);
// The values DeepSpeed will run with (batch, stage, precision, offload, buckets, stage-3 knobs,
// optimizer wrapper): `check --json`'s "resolved", compared with real DeepSpeed's records in
// tests/deepspeed_configs.
nlohmann::json resolved_values(const ReadConfig& rc);

// One key-by-key difference between two configs in DeepSpeed terms.
struct ConfigChange {
  std::string key;            // dotted path, or "TrainingArguments.gradient_checkpointing"
  nlohmann::json from;        // null when absent
  nlohmann::json to;          // null when the recommended config does not set it
  bool from_default = false;  // `from` is DeepSpeed's default (the user's file does not set it)
};
nlohmann::json change_to_json(const ConfigChange& c);
std::string format_change(const ConfigChange& c);

// Differences between the user's config (`user_plan`, read from `user_config`) and `recommended`,
// both rendered with deepspeed_config() so defaults are explicit on both sides. `w_recommended` is the
// recommendation's workload where it differs from the config's `w` (e.g. no checkpoint offload).
std::vector<ConfigChange> diff_plans(const planner::Workload& w, const nlohmann::json& user_config,
                                     const planner::Plan& user_plan, const planner::Plan& recommended,
                                     const planner::Workload* w_recommended = nullptr);

}  // namespace zeroplan::configs
