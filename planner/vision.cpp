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

bool vision_tower_frozen(const Workload& w) {
  return w.train.freeze_vision || w.train.method != Method::Full;
}

std::vector<GemmShape> vision_forward_gemms(const Workload& w) {
  std::vector<GemmShape> out;
  const int64_t k = w.train.images_per_sample, seq = w.train.rank_seq_len();
  if (k <= 0 || seq <= 0) return out;
  const models::VisionGeometry& geo = w.model.vision_geometry;
  const double per_token = static_cast<double>(k) / static_cast<double>(seq);
  const double patches = per_token * static_cast<double>(geo.patches(w.train.image_h, w.train.image_w));
  const double tokens = per_token * static_cast<double>(geo.tokens(w.train.image_h, w.train.image_w));
  for (const auto& g : w.model.vision_groups) {
    const bool projector = g.name.rfind("vision.projector", 0) == 0;
    for (const auto& t : g.tensors) {
      GemmShape gm;
      gm.trainable = false;
      if (t.is_linear && t.shape.size() == 2) {
        gm.n = t.shape[0];
        gm.k = t.shape[1];
      } else if (projector && t.shape.size() == 2 && !t.is_embedding && !t.is_norm) {
        // Gemma-3's mm_input_projection_weight [vision h, text h]: matmul(features, weight).
        gm.n = t.shape[1];
        gm.k = t.shape[0];
      } else if (t.shape.size() >= 4) {  // the patch embedding's convolution weight [out, C, (T,) p, p]
        gm.n = t.shape[0];
        gm.k = 1;
        for (size_t d = 1; d < t.shape.size(); ++d) gm.k *= t.shape[d];
      } else {
        continue;
      }
      // The Qwen mergers' first Linear reads merge^2 patches concatenated: it runs at the tokens' rows too.
      gm.token_fraction = projector ? tokens : patches;
      // One entry per shape, its launches in `count` (the blocks repeat their shapes; op_model's table is
      // fixed-size).
      auto same = std::find_if(out.begin(), out.end(), [&](const GemmShape& o) {
        return o.n == gm.n && o.k == gm.k && o.token_fraction == gm.token_fraction;
      });
      if (same != out.end())
        ++same->count;
      else
        out.push_back(gm);
    }
  }
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
