#pragma once
// --tp auto (issue 26 item 3): the AutoTP sizes inside a node that the layout and the TP model allow are
// searched beside the ZeRO search, each as its own workload (one TP rank's shard, planner/tensor_parallel.h),
// and the fastest plan that fits wins. The reason line compares them with numbers.
#include <string>
#include <vector>

#include "planner/plan.h"
#include "planner/search.h"
#include "planner/training_spec.h"

namespace zeroplan::planner {

struct TensorParallelOption {
  int tp = 1;
  Workload w;      // the workload at this size (w.model is the rank's shard when tp > 1)
  SearchResult r;  // its search
};

// The sizes tried for `w` (a workload without TP): 1, then 2, 4, 8 while they fit a node and pass
// layout::validate and tensor_parallel_refusal (and divide the global batch when one is fixed).
std::vector<int> tensor_parallel_sizes(const Workload& w, const SearchOptions& opts);

// Every size searched, 1 first.
std::vector<TensorParallelOption> search_tensor_parallel(const Workload& w, const SearchOptions& opts);

// The index of the winner: the highest tokens/s among those whose recommendation fits, else 0 (tp 1).
size_t best_tensor_parallel(const std::vector<TensorParallelOption>& options);

// One sentence comparing the sizes searched: each size's best tokens/s and peak, or that it does not fit,
// and which won.
std::string tensor_parallel_choice_sentence(const std::vector<TensorParallelOption>& options, size_t chosen);

}  // namespace zeroplan::planner
