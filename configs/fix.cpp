#include "configs/fix.h"

#include <fmt/format.h>

namespace zeroplan::configs {
namespace {

using nlohmann::json;

std::vector<std::string> split(const std::string& path) {
  std::vector<std::string> parts;
  size_t start = 0;
  while (true) {
    const size_t dot = path.find('.', start);
    parts.push_back(path.substr(start, dot == std::string::npos ? std::string::npos : dot - start));
    if (dot == std::string::npos) return parts;
    start = dot + 1;
  }
}

// The object holding the last part of `path`, or nullptr.
json* parent_of(json& root, const std::vector<std::string>& parts) {
  json* cur = &root;
  for (size_t i = 0; i + 1 < parts.size(); ++i) {
    if (!cur->is_object() || !cur->contains(parts[i])) return nullptr;
    cur = &(*cur)[parts[i]];
  }
  return cur->is_object() ? cur : nullptr;
}

}  // namespace

FixResult apply_fixes(const json& config, const std::vector<Issue>& issues) {
  FixResult r{config, {}, {}};
  for (const auto& i : issues) {
    if (i.fix.is_null() || i.path.empty()) {
      if (i.severity == Severity::Error)
        r.not_fixed.push_back((i.path.empty() ? "" : i.path + ": ") + i.message);
      continue;
    }
    const auto parts = split(i.path);
    json* parent = parent_of(r.config, parts);
    if (!parent || !parent->contains(parts.back())) continue;  // already removed by an earlier fix
    const std::string op = i.fix.value("op", "");
    if (op == "remove") {
      parent->erase(parts.back());
      r.applied.push_back({i.path, "removed", i.message});
    } else if (op == "set") {
      (*parent)[parts.back()] = i.fix["value"];
      r.applied.push_back({i.path, "set to " + i.fix["value"].dump(), i.message});
    } else if (op == "rename") {
      const auto to = split(i.fix["to"].get<std::string>());
      json* dest = parent_of(r.config, to);
      if (!dest || dest->contains(to.back())) {  // the right key is already there: drop the typo
        parent->erase(parts.back());
        r.applied.push_back(
            {i.path, "removed (" + i.fix["to"].get<std::string>() + " is already set)", i.message});
        continue;
      }
      json v = (*parent)[parts.back()];
      parent->erase(parts.back());
      (*dest)[to.back()] = std::move(v);
      r.applied.push_back({i.path, "renamed to " + i.fix["to"].get<std::string>(), i.message});
    }
  }
  return r;
}

}  // namespace zeroplan::configs
