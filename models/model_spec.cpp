// Parameter counting over the inventory: the exact count is the sum of every tensor once (tied
// embeddings appear once), which is what `sum(p.numel() for p in model.parameters())` prints for the
// HF model and what the Hub's safetensors metadata reports.
#include "models/model_spec.h"

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

// A token is routed to experts_per_token of num_experts experts in every MoE layer (Mixtral: 2 of
// 8, Jiang et al. 2024 "Mixtral of Experts" §2.1); everything else (attention, norms, router,
// embeddings) it always touches. All experts of a layer have the same shape, so the untouched share
// is exactly (E - k) / E of the layer's expert parameters. Embeddings are included, as in the
// published "12.9B active" for Mixtral-8x7B.
int64_t ModelSpec::active_parameters() const {
  if (params_only || !is_moe()) return num_parameters();
  int64_t total = 0, expert = 0;
  for (const auto& layer : inventory()) {
    total = checked_add(total, layer.numel());
    for (const auto& t : layer.tensors)
      if (t.name.find(".experts.") != std::string::npos) expert = checked_add(expert, t.numel());
  }
  ZP_CHECK(expert % num_experts == 0, "expert parameters {} not divisible by {} experts", expert,
           num_experts);
  return total - expert / num_experts * (num_experts - experts_per_token);
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
