#pragma once
// The terminal report: one row per ZeRO stage (its best plan), a per-component memory bar for each
// stage that reads without colour (letters per category), then the recommendation and its reasons.
#include <string>

#include "planner/plan.h"
#include "planner/training_spec.h"

namespace zeroplan::planner {

std::string render_report(const Workload& w, const SearchResult& r);

// One stage's memory bar: `width` characters for the usable capacity, one letter per category
// (P parameters, G gradients, O optimizer states, A activations, B buffers, X overhead), '.' for free
// memory and '!' beyond the capacity.
std::string memory_bar(const Plan& p, int width);

}  // namespace zeroplan::planner
