#pragma once
// Name matching for friendly errors: "unknown GPU 'A4O'; did you mean 'A40'?"
#include <string>
#include <string_view>
#include <vector>

namespace zeroplan {

std::string to_lower(std::string_view s);
size_t edit_distance(std::string_view a, std::string_view b);  // Levenshtein, case-insensitive
// Closest candidate, or "" when nothing is within a plausible typo distance.
std::string nearest_name(std::string_view name, const std::vector<std::string>& candidates);

}  // namespace zeroplan
