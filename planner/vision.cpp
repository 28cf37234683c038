#include "planner/vision.h"

#include <iterator>

namespace zeroplan::planner {

std::vector<models::LayerInventory> vision_groups_as_trained(const Workload& w) {
  std::vector<models::LayerInventory> out = w.model.vision_groups;
  if (w.train.freeze_vision)
    for (auto& g : out)
      for (auto& t : g.tensors) t.frozen = true;
  return out;
}

std::vector<models::LayerInventory> with_vision(const Workload& w,
                                                std::vector<models::LayerInventory> language) {
  if (w.model.vision_groups.empty()) return language;
  std::vector<models::LayerInventory> out = vision_groups_as_trained(w);
  out.insert(out.end(), std::make_move_iterator(language.begin()), std::make_move_iterator(language.end()));
  return out;
}

}  // namespace zeroplan::planner
