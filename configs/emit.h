#pragma once
// Turning a Plan into files a user runs as-is: a DeepSpeed config (ds_config.json) that DeepSpeed
// v0.16 accepts, the launch command (single node or a hostfile for several), the HF
// TrainingArguments snippet (gradient checkpointing lives in the training script, not in the
// DeepSpeed config), and an `accelerate launch` config.
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "planner/plan.h"
#include "planner/training_spec.h"

namespace zeroplan::configs {

// Placeholder written where the user must put their NVMe mount point (JSON has no comments).
inline constexpr const char* kNvmePathPlaceholder = "/CHANGE_ME/local_nvme";

struct ConfigOptions {
  bool hf_auto = false;         // HF Trainer style: "auto" where the Trainer fills the value
  bool with_optimizer = false;  // add optimizer (AdamW) and scheduler (WarmupLR) sections
};

struct EmitOptions {
  std::string path;  // the ds_config.json path; siblings are <stem>.launch.sh etc.
  bool hf_auto = false;
  bool force = false;
  bool with_optimizer = false;
};

// The ds_config for `p`. Every key is one DeepSpeed 0.16 accepts (tests validate all stages x
// offload modes x hf_auto against the newest configs/data/ds_keys_<version>.json, and real DeepSpeed
// 0.19.8 runs one step of each variant: tests/deepspeed_configs); numbers are JSON numbers.
nlohmann::json deepspeed_config(const planner::Workload& w, const planner::Plan& p, bool hf_auto);
nlohmann::json deepspeed_config(const planner::Workload& w, const planner::Plan& p, const ConfigOptions& o);

// Snippets that refer to the config at `config_path` (as the user will pass it on the command line).
std::string launch_command(const planner::Workload& w, const std::string& config_path);
std::string launch_script(const planner::Workload& w, const std::string& config_path,
                          const std::string& hostfile_path);
std::string hostfile(const planner::Workload& w);  // one "nodeN slots=G" line per node
std::string training_args_snippet(const planner::Workload& w, const planner::Plan& p,
                                  const std::string& config_path);
std::string accelerate_config(const planner::Workload& w, const planner::Plan& p,
                              const std::string& config_path);

// Warnings the user must act on before running (e.g. the NVMe path placeholder).
std::vector<std::string> emit_warnings(const planner::Workload& w, const planner::Plan& p);

// One file emit_files() writes.
struct EmittedFile {
  std::string path;
  std::string content;
};
// The files for `o.path`: ds_config.json, <stem>.launch.sh, <stem>.training_args.py,
// <stem>.accelerate.yaml and, for several nodes, <stem>.hostfile.
std::vector<EmittedFile> emitted_files(const planner::Workload& w, const planner::Plan& p,
                                       const EmitOptions& o);

// Writes emitted_files() atomically (temporary file + rename, common/atomic_file.h). Refuses, before
// writing anything, when any target exists and !o.force; if a later write fails, files this call
// created are removed again. Returns a human-readable summary (files written, launch command,
// warnings). Throws UserError.
std::string emit_files(const planner::Workload& w, const planner::Plan& p, const EmitOptions& o);

}  // namespace zeroplan::configs
