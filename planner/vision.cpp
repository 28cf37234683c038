#include "planner/vision.h"

#include <algorithm>
#include <iterator>

namespace zeroplan::planner {

std::vector<models::LayerInventory> vision_groups_as_trained(const Workload& w) {
  std::vector<models::LayerInventory> out = w.model.vision_groups;
  if (w.train.freeze_vision)
    for (auto& g : out)
      for (auto& t : g.tensors) t.frozen = true;
  return out;
}

int64_t vision_lora_parameters_left_out(const Workload& w) {
  if (w.train.method == Method::Full) return 0;
  const auto& tg = w.train.lora_targets;
  const bool all_linear = tg.empty() || std::find(tg.begin(), tg.end(), "all-linear") != tg.end();
  int64_t n = 0;
  for (const auto& g : w.model.vision_groups)
    for (const auto& t : g.tensors)
      if (t.is_linear && !t.is_bias && t.shape.size() == 2 &&
          (all_linear || std::find(tg.begin(), tg.end(), t.module) != tg.end()))
        n += w.train.lora_rank * (t.shape[0] + t.shape[1]);
  return n;
}

std::vector<models::LayerInventory> with_vision(const Workload& w,
                                                std::vector<models::LayerInventory> language) {
  if (w.model.vision_groups.empty()) return language;
  std::vector<models::LayerInventory> out = vision_groups_as_trained(w);
  out.insert(out.end(), std::make_move_iterator(language.begin()), std::make_move_iterator(language.end()));
  return out;
}

}  // namespace zeroplan::planner
