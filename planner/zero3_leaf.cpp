// ZeRO-3 leaf modules for HF MoE blocks; see zero3_leaf.h.
//
// DeepSpeed 0.19.8 (and 0.18.9): engine.py _configure_distributed_model calls
// utils/z3_leaf_module.py apply_zero_leaf_module_config with zero_optimization.leaf_module
// (runtime/zero/leaf_module_config.py DeepSpeedZeroLeafModuleConfig: `classes`, `names`,
// `name_suffixes`), whose `classes` default to DEFAULT_LEAF_MODULE_CLASSES = Mixtral's, Qwen2-MoE's and
// Qwen3-MoE's sparse MoE blocks; `"classes": []` removes the default. DeepSpeed 0.16.9 has no
// leaf_module config (no default leaves; deepspeed.utils.set_z3_leaf_modules only).
// A leaf module: parameter_offload.py _register_deepspeed_module does not descend into it (its children
// get no hooks); partitioned_param_coordinator.py fetch_sub_module / release_sub_module gather and
// free iter_params(module, recurse=True) as one set; stage3.py create_reduce_and_remove_grad_hooks
// reduces its gradients from one register_full_backward_hook (reduce_leaf_module_grads).
#include "planner/zero3_leaf.h"

#include <algorithm>
#include <cstring>

#include "common/errors.h"
#include "planner/comm_model.h"
#include "planner/ds_runtime_collectives.h"
#include "planner/memory_model.h"

namespace zeroplan::planner {

namespace {

// leaf_module_config.py DEFAULT_LEAF_MODULE_CLASSES (0.18.9 and 0.19.8, identical lists).
constexpr const char* kDefaultLeafClasses[] = {
    "transformers.models.mixtral.modeling_mixtral.MixtralSparseMoeBlock",
    "transformers.models.qwen2_moe.modeling_qwen2_moe.Qwen2MoeSparseMoeBlock",
    "transformers.models.qwen3_moe.modeling_qwen3_moe.Qwen3MoeSparseMoeBlock",
};

MoeLeafSide side_of(const Workload& w, const ModelStats& s, const ZeroConfig& z) {
  MoeLeafSide out;
  const std::vector<CollectiveCall> calls = deepspeed_collectives(w, s, z);
  for (const CollectiveCall& c : calls) {
    if (c.kind == CollectiveKind::AllGather) {
      ++out.gather_calls;
      out.gather_bytes += c.bytes;
      out.largest_gather_bytes = std::max(out.largest_gather_bytes, c.bytes);
    } else if (c.kind == CollectiveKind::ReduceScatter) {
      ++out.reduce_calls;
    }
  }
  out.comm_time_s = collectives_time_s(data_parallel_topology(w.cluster, w.train.tensor_parallel), calls);
  out.peak_bytes = estimate_memory(w, s, z).peak;
  return out;
}

}  // namespace

bool moe_block_is_leaf(const std::string& hf_class, MoeLeaf leaf, DeepSpeedVersion v) {
  if (hf_class.empty() || leaf == MoeLeaf::Off) return false;
  if (leaf == MoeLeaf::On) return true;
  if (v == DeepSpeedVersion::V0_16_9) return false;
  for (const char* c : kDefaultLeafClasses)
    if (hf_class == c) return true;
  return false;
}

MoeLeaf effective_moe_leaf(const Workload& w, const ZeroConfig& z) {
  return z.moe_leaf != MoeLeaf::Auto ? z.moe_leaf : w.train.moe_leaf;
}

bool moe_leaf_applies(const Workload& w, const ZeroConfig& z) {
  return z.stage == 3 && !w.model.params_only && w.model.is_moe() && w.train.method == Method::Full;
}

MoeLeafCosts moe_leaf_costs(const Workload& w, const ModelStats& s, const ZeroConfig& z) {
  MoeLeafCosts out;
  out.applies = moe_leaf_applies(w, z) && !s.mem.moe_block_class.empty();
  out.auto_is_leaf = moe_block_is_leaf(s.mem.moe_block_class, MoeLeaf::Auto, w.train.deepspeed_version);
  ZeroConfig on = z, off = z;
  on.moe_leaf = MoeLeaf::On;
  off.moe_leaf = MoeLeaf::Off;
  out.leaf = side_of(w, s, on);
  out.not_leaf = out.applies ? side_of(w, s, off) : out.leaf;
  return out;
}

MoeLeaf moe_leaf_from_config(const std::optional<std::vector<std::string>>& classes,
                             const std::vector<std::string>& names, const std::vector<std::string>& name_suffixes,
                             const std::string& hf_class, const std::vector<std::string>& block_paths,
                             DeepSpeedVersion v) {
  if (hf_class.empty()) return MoeLeaf::Auto;
  bool leaf = false;
  if (classes) {
    // _do_set_z3_leaf_modules: `module_instance.__class__.__name__ == module or
    // _fully_qualified_class_name(module_instance) == module`.
    const std::string short_name = hf_class.substr(hf_class.rfind('.') + 1);
    for (const std::string& c : *classes) leaf |= c == hf_class || c == short_name;
  } else {
    leaf = moe_block_is_leaf(hf_class, MoeLeaf::Auto, v);
  }
  // set_z3_leaf_modules_by_name / _by_suffix over model.named_modules().
  for (const std::string& path : block_paths) {
    for (const std::string& n : names) leaf |= n == path;
    for (const std::string& sfx : name_suffixes)
      leaf |= path.size() >= sfx.size() && path.compare(path.size() - sfx.size(), sfx.size(), sfx) == 0;
  }
  return leaf ? MoeLeaf::On : MoeLeaf::Off;
}

std::optional<std::vector<std::string>> leaf_module_classes_for(const std::string& hf_class, MoeLeaf leaf,
                                                                 DeepSpeedVersion v) {
  if (hf_class.empty() || leaf == MoeLeaf::Auto || v == DeepSpeedVersion::V0_16_9) return std::nullopt;
  const bool dflt = moe_block_is_leaf(hf_class, MoeLeaf::Auto, v);
  if ((leaf == MoeLeaf::On) == dflt) return std::nullopt;
  if (leaf == MoeLeaf::Off) {
    // The defaults minus this class (`classes` replaces the default list).
    std::vector<std::string> rest;
    for (const char* c : kDefaultLeafClasses)
      if (hf_class != c) rest.emplace_back(c);
    return rest;
  }
  std::vector<std::string> with(std::begin(kDefaultLeafClasses), std::end(kDefaultLeafClasses));
  with.push_back(hf_class);
  return with;
}

const char* to_string(MoeLeaf leaf) {
  switch (leaf) {
    case MoeLeaf::Auto:
      return "auto";
    case MoeLeaf::On:
      return "on";
    case MoeLeaf::Off:
      return "off";
  }
  return "auto";
}

MoeLeaf parse_moe_leaf(const std::string& s) {
  if (s == "auto") return MoeLeaf::Auto;
  if (s == "on") return MoeLeaf::On;
  if (s == "off") return MoeLeaf::Off;
  throw_user_error("--z3-leaf-moe must be auto, on or off (got '{}')", s);
}

}  // namespace zeroplan::planner
