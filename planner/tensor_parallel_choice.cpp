// --tp auto; see tensor_parallel_choice.h.
#include "planner/tensor_parallel_choice.h"

#include <fmt/format.h>

#include "layout/parallel_layout.h"
#include "planner/parallel.h"
#include "planner/tensor_parallel.h"

namespace zeroplan::planner {

std::vector<int> tensor_parallel_sizes(const Workload& w, const SearchOptions& opts) {
  std::vector<int> out{1};
  if (w.train.tensor_parallel > 1 || w.train.sequence_parallel > 1 || (opts.ep && *opts.ep > 1)) return out;
  for (int tp = 2; tp <= w.cluster.gpus_per_node; tp *= 2) {
    if (!layout::validate(w.cluster.nodes, w.cluster.gpus_per_node, {tp, 1, 1}, layout_facts(w), true)
             .empty() ||
        !tensor_parallel_refusal(w, tp).empty())
      continue;
    if (w.train.global_batch && *w.train.global_batch % (w.cluster.world_size() / tp) != 0) continue;
    out.push_back(tp);
  }
  return out;
}

std::vector<TensorParallelOption> search_tensor_parallel(const Workload& w, const SearchOptions& opts) {
  std::vector<TensorParallelOption> out;
  for (int tp : tensor_parallel_sizes(w, opts)) {
    TensorParallelOption o;
    o.tp = tp;
    o.w = w;
    apply_tensor_parallel(o.w, tp);
    o.r = search(o.w, opts);
    out.push_back(std::move(o));
  }
  return out;
}

size_t best_tensor_parallel(const std::vector<TensorParallelOption>& options) {
  size_t best = 0;
  double best_tps = -1;
  for (size_t i = 0; i < options.size(); ++i) {
    const auto& rec = options[i].r.recommendation;
    if (rec && rec->fits && rec->tokens_per_s > best_tps) {
      best = i;
      best_tps = rec->tokens_per_s;
    }
  }
  return best;
}

std::string tensor_parallel_choice_sentence(const std::vector<TensorParallelOption>& options, size_t chosen) {
  std::string each;
  for (const auto& o : options) {
    if (!each.empty()) each += "; ";
    const auto& rec = o.r.recommendation;
    each += rec && rec->fits
                ? fmt::format("tp {}: ZeRO-{}, {:.0f} tokens/s, peak {:.1f} GB", o.tp, rec->zero.stage,
                              rec->tokens_per_s, static_cast<double>(rec->memory.peak) / 1e9)
                : fmt::format("tp {}: nothing fits", o.tp);
  }
  if (options.size() <= 1)
    return "AutoTP sizes searched (--tp auto): only tp 1 applies here (the model, the GPUs per node or the "
           "options rule the others out; zeroplan --tp N says why).";
  const int tp = options[chosen].tp;
  return fmt::format(
      "AutoTP sizes searched (--tp auto): {}. Chosen: tp {}{}. AutoTP's time is priced from DeepSpeed "
      "0.19.8's "
      "calls on the nccl-tests curves, not yet against a measured AutoTP run.",
      each, tp,
      tp == 1 ? " (each larger size's best plan is slower: its all-reduces are exposed and its GEMMs 1/tp as "
                "wide)"
              : "");
}

}  // namespace zeroplan::planner
