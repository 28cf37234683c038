// Parameter counting over the inventory: the exact count is the sum of every tensor once (tied
// embeddings appear once), which is what `sum(p.numel() for p in model.parameters())` prints for the
// HF model and what the Hub's safetensors metadata reports.
#include "models/model_spec.h"

#include <algorithm>

#include "common/checked.h"
#include "common/errors.h"

namespace zeroplan::models {

int64_t TensorSpec::numel() const {
  int64_t n = 1;
  for (const int64_t d : shape) n = checked_mul(n, d);
  return n;
}

int64_t LayerInventory::numel() const {
  int64_t n = 0;
  for (const auto& t : tensors) n = checked_add(n, t.numel());
  return n;
}

int64_t ModelSpec::num_parameters() const {
  if (params_only) return params_only_count;
  int64_t n = 0;
  for (const auto& layer : inventory()) n = checked_add(n, layer.numel());
  return n;
}

int64_t VisionGeometry::patches(int64_t h, int64_t w) const {
  if (fixed_image > 0) return (fixed_image / patch) * (fixed_image / patch) + extra_patches;
  // smart_resize: each side rounded to the nearest multiple of patch x merge (at least one).
  const int64_t f = patch * merge;
  const auto side = [f](int64_t x) { return std::max<int64_t>(1, (x + f / 2) / f) * f; };
  return (side(h) / patch) * (side(w) / patch);
}

int64_t VisionGeometry::tokens(int64_t h, int64_t w) const {
  return fixed_image > 0 ? tokens_per_image : patches(h, w) / (merge * merge);
}

int64_t ModelSpec::vision_parameters() const {
  int64_t n = 0;
  for (const auto& g : vision_groups) n = checked_add(n, g.numel());
  return n;
}

int64_t ModelSpec::num_frozen_parameters() const {
  if (params_only) return 0;
  int64_t n = 0;
  for (const auto& layer : inventory())
    for (const auto& t : layer.tensors)
      if (t.frozen) n = checked_add(n, t.numel());
  return n;
}

int64_t ModelSpec::layers_of_kind(LayerKind k) const {
  int64_t n = 0;
  for (int64_t i = 0; i < num_layers; ++i) n += layer_kind(i) == k ? 1 : 0;
  return n;
}

bool ModelSpec::has_linear_attention() const {
  for (const LayerKind k : layer_kinds)
    if (k != LayerKind::Attention) return true;
  return false;
}

int64_t ModelSpec::num_moe_layers() const {
  int64_t n = 0;
  for (int64_t i = 0; i < num_layers; ++i) n += is_moe_layer(i) ? 1 : 0;
  return n;
}

// A token is routed to experts_per_token of num_experts routed experts in every MoE layer (Mixtral:
// 2 of 8, Jiang et al. 2024 "Mixtral of Experts" §2.1; DeepSeek-V3: 8 of 256 plus 1 shared expert,
// DeepSeek-AI 2024 "DeepSeek-V3 Technical Report" §2.1.2); everything else (attention, dense layers,
// norms, routers, shared experts, embeddings, head) it always touches. The routed experts of a layer
// all have the same shape, so the untouched share is exactly (E - k) / E of that layer's
// routed-expert parameters. Embeddings are included, as in the published "12.9B active" for
// Mixtral-8x7B and "3.3B activated" for Qwen3-30B-A3B (its model card).
bool is_routed_expert_tensor(const std::string& name) {
  return name.find(".experts.") != std::string::npos ||
         name.find(".block_sparse_moe.input_linear.") != std::string::npos ||
         name.find(".block_sparse_moe.output_linear.") != std::string::npos;
}

int64_t ModelSpec::active_parameters() const {
  if (params_only || !is_moe()) return num_parameters();
  int64_t total = 0, untouched = 0;
  for (const auto& layer : inventory()) {
    int64_t routed = 0;
    for (const auto& t : layer.tensors) {
      total = checked_add(total, t.numel());
      // Routed experts (is_routed_expert_tensor); the shared experts are "shared_expert(s)" or
      // GraniteMoeShared's "shared_mlp", which it does not match.
      if (is_routed_expert_tensor(t.name)) routed = checked_add(routed, t.numel());
    }
    if (routed == 0) continue;
    ZP_CHECK(routed % num_experts == 0, "routed expert parameters {} of {} not divisible by {} experts",
             routed, layer.name, num_experts);
    untouched = checked_add(untouched, routed / num_experts * (num_experts - experts_per_token));
  }
  return total - untouched;
}

ModelSpec model_from_param_count(int64_t n) {
  // 1e15 parameters: orders of magnitude beyond any model ever trained; anything above is a typo.
  constexpr int64_t kMaxParams = 1'000'000'000'000'000;
  if (n <= 0) throw_user_error("--params must be a positive parameter count, got {}", n);
  if (n > kMaxParams)
    throw_user_error("--params {} is beyond any real model (limit 1e15); check the value", n);
  ModelSpec m;
  m.name = fmt::format("{} parameters", n);
  m.params_only = true;
  m.params_only_count = n;
  return m;
}

}  // namespace zeroplan::models
