#pragma once
// ZeRO-3 leaf modules for HF MoE blocks: which blocks DeepSpeed treats as leaves, and what a plan costs
// both ways (for the search's choice and its reason). The gather/reduce shape itself is modelled in
// planner/ds_runtime_collectives.cpp, the gathered memory in planner/memory_model.cpp.
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "planner/model_stats.h"
#include "planner/zero_config.h"

namespace zeroplan::planner {

// Whether a MoE block of transformers class `hf_class` (models::LayerInventory::moe_block_class) is a
// ZeRO-3 leaf under `leaf` for DeepSpeed `v`.
bool moe_block_is_leaf(const std::string& hf_class, MoeLeaf leaf, DeepSpeedVersion v);

// The leaf setting in force: the ds_config's leaf_module (ZeroConfig::moe_leaf) when it decides,
// else the training script's (TrainingSpec::moe_leaf, --z3-leaf-moe).
MoeLeaf effective_moe_leaf(const Workload& w, const ZeroConfig& z);

// Whether the model has a MoE block the knob changes (a stage-3 plan of a model with MoE layers).
bool moe_leaf_applies(const Workload& w, const ZeroConfig& z);

// One way of running the plan (leaf on or off).
struct MoeLeafSide {
  int64_t gather_calls = 0;       // parameter all-gathers per step (forward + backward + step)
  int64_t gather_bytes = 0;       // their payload per rank
  int64_t largest_gather_bytes = 0;
  int64_t reduce_calls = 0;       // gradient reduce-scatters per step
  double comm_time_s = 0;         // collectives_time_s of the step's calls on the plan's topology
  int64_t peak_bytes = 0;         // MemoryBreakdown::peak
};
struct MoeLeafCosts {
  bool applies = false;  // false: no MoE block or not stage 3 (both sides equal)
  bool auto_is_leaf = false;  // what DeepSpeed does by default for this model and version
  MoeLeafSide leaf, not_leaf;
};
// The plan's step costed with every MoE block a leaf and with none (z.moe_leaf ignored).
MoeLeafCosts moe_leaf_costs(const Workload& w, const ModelStats& s, const ZeroConfig& z);

// zero_optimization.leaf_module as DeepSpeed applies it (utils/z3_leaf_module.py
// apply_zero_leaf_module_config) to the model's MoE blocks: `classes` (nullopt: the key is absent and
// DEFAULT_LEAF_MODULE_CLASSES apply; a class matches by its short or fully qualified name), `names`
// (module paths), `name_suffixes`. On when the blocks are matched, Off otherwise; Auto for a model
// without MoE blocks (`hf_class` empty).
MoeLeaf moe_leaf_from_config(const std::optional<std::vector<std::string>>& classes,
                             const std::vector<std::string>& names, const std::vector<std::string>& name_suffixes,
                             const std::string& hf_class, const std::vector<std::string>& block_paths,
                             DeepSpeedVersion v);

// What a ds_config must say for the MoE blocks (class `hf_class`) to be leaves (`leaf` On) or not (Off)
// under DeepSpeed `v`: the zero_optimization.leaf_module `classes` list to write, or nullopt when
// DeepSpeed's default already does it (Auto, or the default agrees) or cannot (0.16.9 has no
// leaf_module config: the script calls deepspeed.utils.set_z3_leaf_modules instead).
std::optional<std::vector<std::string>> leaf_module_classes_for(const std::string& hf_class, MoeLeaf leaf,
                                                                 DeepSpeedVersion v);

const char* to_string(MoeLeaf leaf);
// "auto" | "on" | "off"; throws UserError otherwise.
MoeLeaf parse_moe_leaf(const std::string& s);

}  // namespace zeroplan::planner
