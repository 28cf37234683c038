#pragma once
// The PyTorch release a plan assumes (--torch-version; issue 24 item 6). It matters where PyTorch's own
// choices change what runs: from 2.11, SDPA picks cuDNN's fused attention on Hopper
// (planner/data/time_model.json "sdpa_backend").
#include <optional>
#include <string>
#include <string_view>

namespace zeroplan::planner {

// "2.11", "2.11.0", "2.11.0+cu130" -> 211 (major * 100 + minor); nullopt when not of that form or
// the minor is 100 or more.
std::optional<int> parse_torch_version(std::string_view s);
std::string torch_version_string(int v);  // 211 -> "2.11"

}  // namespace zeroplan::planner
