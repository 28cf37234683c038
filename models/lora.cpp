// LoRA trainable parameters with PEFT's semantics (peft/tuners/lora/layer.py): a targeted
// nn.Linear(in, out) gets lora_A [r, in] and lora_B [out, r], i.e. r * (in + out) parameters; a
// targeted nn.Embedding(rows, dim) gets lora_embedding_A [r, rows] and lora_embedding_B [dim, r].
// A module is targeted when its name equals a target or ends with "." + target
// (peft/tuners/tuners_utils.py check_target_module_exists); our TensorSpec.module is that last
// name component. "all-linear" (peft/tuners/tuners_utils.py _maybe_include_all_linear_layers)
// takes every Linear/Conv1D except the output layer.
#include <algorithm>
#include <set>
#include <string>
#include <vector>

#include "common/checked.h"
#include "common/errors.h"
#include "models/model_spec.h"

namespace zeroplan::models {
namespace {

bool is_output_layer(const ModelSpec& m, const TensorSpec& t) {
  return t.module == (m.layout == Layout::GPTNeoX ? "embed_out" : "lm_head");
}

int64_t lora_size(int64_t rank, const TensorSpec& t) {
  // Linear [out, in] and Embedding [rows, dim] both add r * (sum of the two dimensions).
  return checked_mul(rank, checked_add(t.shape[0], t.shape[1]));
}

}  // namespace

int64_t lora_trainable_parameters(const ModelSpec& m, int64_t rank, const std::vector<std::string>& targets) {
  if (rank <= 0) throw_user_error("LoRA rank must be a positive integer, got {}", rank);
  const auto layers = m.inventory();
  const bool all_linear =
      targets.empty() || std::find(targets.begin(), targets.end(), "all-linear") != targets.end();

  std::set<std::string> linear_modules, embedding_modules;
  const TensorSpec* word_embedding = nullptr;
  for (const auto& l : layers)
    for (const auto& t : l.tensors) {
      if (t.is_linear) linear_modules.insert(t.module);
      if (t.is_embedding) {
        embedding_modules.insert(t.module);
        if (!word_embedding) word_embedding = &t;  // the first embedding is the token table
      }
    }
  // With tied embeddings the HF model still has an output nn.Linear (its weight is the embedding's),
  // so it remains a valid LoRA target with the embedding's shape.
  const std::string output_module = m.layout == Layout::GPTNeoX ? "embed_out" : "lm_head";
  const bool tied_head = m.tie_word_embeddings;
  if (tied_head) linear_modules.insert(output_module);

  if (!all_linear) {
    for (const auto& target : targets) {
      if (linear_modules.count(target) || embedding_modules.count(target)) continue;
      std::string names;
      for (const auto& n : linear_modules) names += (names.empty() ? "" : ", ") + n;
      throw_user_error("LoRA target '{}' is not a module of {}; its linear modules are: {}", target, m.name,
                       names);
    }
  }
  const std::set<std::string> wanted(targets.begin(), targets.end());

  int64_t total = 0;
  for (const auto& l : layers)
    for (const auto& t : l.tensors) {
      if (t.is_bias || t.is_norm) continue;
      bool take = false;
      if (t.is_linear) take = all_linear ? !is_output_layer(m, t) : wanted.count(t.module) > 0;
      if (t.is_embedding) take = !all_linear && wanted.count(t.module) > 0;
      if (take) total = checked_add(total, lora_size(rank, t));
    }
  if (tied_head && !all_linear && wanted.count(output_module) && word_embedding) {
    // [vocab, dim]: the same sum of dimensions as the Linear(dim, vocab) it is tied to.
    total = checked_add(total, lora_size(rank, *word_embedding));
  }
  return total;
}

}  // namespace zeroplan::models
