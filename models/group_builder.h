#pragma once
// GroupBuilder: one LayerInventory group's tensors, named as transformers names them
// ("<prefix>.<path>.weight" / ".bias"), with the tags the planner reads (linear, norm, embedding, frozen).
// Used by the language model's inventory (models/inventory.cpp) and the vision towers
// (models/vision_tower.cpp).
#include <string>
#include <utility>
#include <vector>

#include "models/model_spec.h"

namespace zeroplan::models {

// Builds one group's tensors with HF naming: "<prefix>.<path>.weight" / ".bias".
class GroupBuilder {
 public:
  GroupBuilder(std::string name, std::string prefix, bool decoder) {
    group_.name = std::move(name);
    group_.is_decoder_layer = decoder;
    prefix_ = std::move(prefix);
  }

  // A linear layer `path` (e.g. "self_attn.q_proj") whose module name is its last component.
  void linear(const std::string& path, int64_t out, int64_t in, bool bias) {
    const std::string module = leaf(path);
    TensorSpec w{.name = full(path) + ".weight", .module = module, .shape = {out, in}};
    w.is_linear = true;
    group_.tensors.push_back(std::move(w));
    if (bias) {
      TensorSpec b{.name = full(path) + ".bias", .module = module, .shape = {out}};
      b.is_bias = true;
      group_.tensors.push_back(std::move(b));
    }
  }

  void norm(const std::string& path, int64_t dim, bool bias) {
    if (!norm_params_) return;  // OLMo-1's OlmoLayerNorm holds no parameters
    const std::string module = leaf(path);
    TensorSpec w{.name = full(path) + ".weight", .module = module, .shape = {dim}};
    w.is_norm = true;
    group_.tensors.push_back(std::move(w));
    if (bias) {
      TensorSpec b{.name = full(path) + ".bias", .module = module, .shape = {dim}};
      b.is_norm = true;
      b.is_bias = true;
      group_.tensors.push_back(std::move(b));
    }
  }

  // A parameter that is neither a Linear's weight nor a norm (gpt-oss attention sinks, fused 3-D
  // expert tensors, Cohere's 2-D q/k norm weights): `path` is the full parameter name under the prefix.
  void param(const std::string& path, std::vector<int64_t> shape, std::string module = "",
             bool norm = false) {
    TensorSpec t{.name = full(path),
                 .module = module.empty() ? leaf(path) : std::move(module),
                 .shape = std::move(shape)};
    t.is_norm = norm;
    group_.tensors.push_back(std::move(t));
  }

  // A parameter with requires_grad False (no gradient, no optimizer state).
  void frozen_param(const std::string& path, std::vector<int64_t> shape, std::string module) {
    param(path, std::move(shape), std::move(module));
    group_.tensors.back().frozen = true;
  }

  void embedding(const std::string& path, int64_t rows, int64_t dim) {
    TensorSpec w{.name = full(path) + ".weight", .module = leaf(path), .shape = {rows, dim}};
    w.is_embedding = true;
    group_.tensors.push_back(std::move(w));
  }

  LayerInventory take() { return std::move(group_); }
  // False: norm() adds nothing (ModelSpec::norm_params, OLMo-1's parameter-free LayerNorms).
  void set_norm_params(bool on) { norm_params_ = on; }

 private:
  static std::string leaf(const std::string& path) {
    const auto dot = path.rfind('.');
    return dot == std::string::npos ? path : path.substr(dot + 1);
  }
  std::string full(const std::string& path) const { return prefix_.empty() ? path : prefix_ + "." + path; }

  LayerInventory group_;
  std::string prefix_;
  bool norm_params_ = true;
};

}  // namespace zeroplan::models
