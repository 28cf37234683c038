#include "common/names.h"

#include <algorithm>
#include <cctype>

namespace zeroplan {

std::string to_lower(std::string_view s) {
  std::string r(s);
  for (auto& c : r) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return r;
}

size_t edit_distance(std::string_view a_in, std::string_view b_in) {
  const std::string a = to_lower(a_in), b = to_lower(b_in);
  std::vector<size_t> prev(b.size() + 1), cur(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j) prev[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    cur[0] = i;
    for (size_t j = 1; j <= b.size(); ++j)
      cur[j] = std::min({prev[j] + 1, cur[j - 1] + 1, prev[j - 1] + (a[i - 1] == b[j - 1] ? 0 : 1)});
    std::swap(prev, cur);
  }
  return prev[b.size()];
}

std::string nearest_name(std::string_view name, const std::vector<std::string>& candidates) {
  if (name.size() > 256) return "";
  std::string best;
  size_t best_d = static_cast<size_t>(-1);
  for (const auto& c : candidates) {
    const size_t d = edit_distance(name, c);
    if (d < best_d) best_d = d, best = c;
  }
  // A typo is at most a third of the name (at least 2 edits): "4xA4O" -> "A40", not "T4" for "X".
  const size_t limit = std::max<size_t>(2, name.size() / 3);
  return best_d <= limit ? best : "";
}

}  // namespace zeroplan
