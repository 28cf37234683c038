#include "configs/ds_keys.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include "common/embedded_data.h"
#include "common/errors.h"
#include "common/names.h"

namespace zeroplan::configs {
namespace {

using nlohmann::json;

constexpr std::string_view kTablePath = "configs/data/deepspeed_keys.json";

std::string join_path(const std::string& parent, const std::string& key) {
  return parent.empty() ? key : parent + "." + key;
}

std::string short_json(const json& v) {
  std::string s = v.dump();
  if (s.size() > 60) s = s.substr(0, 57) + "...";
  return s;
}

void collect_paths(const json& node, const std::string& prefix, std::vector<std::string>& out) {
  const auto it = node.find("keys");
  if (it == node.end()) return;
  for (const auto& [k, child] : it->items()) {
    const std::string p = join_path(prefix, k);
    out.push_back(p);
    collect_paths(child, p, out);
  }
}

// Follows alias_of to the canonical sibling.
const json* resolve_alias(const json& keys, const json* node) {
  if (node && node->contains("alias_of")) {
    const auto it = keys.find((*node)["alias_of"].get<std::string>());
    return it == keys.end() ? nullptr : &*it;
  }
  return node;
}

bool is_integral_number(const json& v) {
  if (v.is_number_integer()) return true;
  if (!v.is_number_float()) return false;
  const double d = v.get<double>();
  // pydantic (lax mode) accepts a float with no fractional part for an int field: 5e8 is fine.
  return std::isfinite(d) && std::floor(d) == d && std::fabs(d) < 9.2e18;
}

bool matches_type(const std::string& type, const json& v) {
  if (type == "int") return is_integral_number(v);
  if (type == "number") return v.is_number();
  if (type == "bool") return v.is_boolean();
  if (type == "string" || type == "path") return v.is_string();
  if (type == "object") return v.is_object();
  if (type == "array") return v.is_array();
  return type == "any";
}

std::vector<std::string> types_of(const json& schema) {
  if (!schema.contains("type")) return {"any"};
  const json& t = schema["type"];
  if (t.is_array()) return t.get<std::vector<std::string>>();
  return {t.get<std::string>()};
}

std::string describe_types(const std::vector<std::string>& types) {
  std::string s;
  for (const auto& t : types) {
    if (!s.empty()) s += " or ";
    s += t == "int"      ? "an integer"
         : t == "number" ? "a number"
         : t == "bool"   ? "true/false"
         : t == "object" ? "an object"
         : t == "array"  ? "a list"
         : t == "path"   ? "a path string"
                         : "a string";
  }
  return s;
}

class Validator {
 public:
  explicit Validator(std::vector<Issue>& out) : out_(out), all_paths_(valid_key_paths()) {}

  void object(const json& schema, const json& value, const std::string& path) {
    const json& keys = schema.contains("keys") ? schema["keys"] : empty_;
    const std::string policy = schema.value("unknown_keys", "opaque");
    const bool drops_auto = schema.value("drops_auto", false);
    for (const auto& [k, v] : value.items()) {
      const std::string p = join_path(path, k);
      const auto it = keys.find(k);
      if (it == keys.end()) {
        if (policy != "opaque") unknown(keys, k, p, policy, path);
        continue;
      }
      const json* child = resolve_alias(keys, &*it);
      if (!child) continue;
      if (it->contains("alias_of")) {
        const std::string canonical = (*it)["alias_of"].get<std::string>();
        if (value.contains(canonical))
          add(Severity::Warning, p,
              fmt::format("both '{}' and its alias '{}' are set; pydantic keeps only one of them", canonical,
                          k),
              fmt::format("keep only \"{}\"", canonical));
      }
      node(*child, v, p, drops_auto);
    }
  }

 private:
  void node(const json& schema, const json& v, const std::string& path, bool parent_drops_auto) {
    if (schema.contains("deprecated"))
      add(Severity::Warning, path, "deprecated in DeepSpeed " + deepspeed_keys_version(),
          schema["deprecated"].get<std::string>());
    if (v.is_string() && v.get<std::string>() == "auto") {
      if (schema.value("hf_auto", false)) return;  // the HF Trainer fills it (check resolves it)
      if (parent_drops_auto) {
        const std::string def = schema.contains("default") ? short_json(schema["default"]) : "its default";
        add(Severity::Warning, path,
            fmt::format("\"auto\" is not filled in by the HF Trainer here; DeepSpeed drops it and uses {} "
                        "(accelerate launch fills a few such keys from its own config)",
                        def),
            "write the value you want");
      } else {
        add(Severity::Error, path,
            "\"auto\" is only filled in by the HF Trainer for batch sizes, gradient_clipping, "
            "fp16/bf16.enabled, "
            "the optimizer/scheduler params and three zero_optimization sizes; DeepSpeed reads it here as "
            "the string \"auto\"",
            "write the value you want");
      }
      return;
    }
    if (v.is_null()) {
      if (!schema.value("nullable", false))
        add(Severity::Error, path, "is null; DeepSpeed needs " + describe_types(types_of(schema)),
            "remove the key or give a value");
      return;
    }
    const auto types = types_of(schema);
    const bool ok =
        std::any_of(types.begin(), types.end(), [&](const std::string& t) { return matches_type(t, v); });
    if (!ok) {
      std::string hint;
      if (v.is_string() && (types[0] == "int" || types[0] == "number"))
        hint = "write it as a JSON number, without quotes";
      if (v.is_number_float() && types[0] == "int") hint = "DeepSpeed needs a whole number here";
      if (v.is_string() && types[0] == "bool") hint = "write true or false, without quotes";
      add(Severity::Error, path, fmt::format("is {}, expected {}", short_json(v), describe_types(types)),
          hint);
      return;
    }
    if (v.is_boolean() && std::find(types.begin(), types.end(), "bool") != types.end() &&
        std::find(types.begin(), types.end(), "object") != types.end()) {
      add(Severity::Warning, path, "the boolean form is deprecated; DeepSpeed reads true as stage 1",
          "write {\"stage\": N}");
      return;
    }
    if (schema.contains("one_of")) {
      const json& allowed = schema["one_of"];
      if (std::find(allowed.begin(), allowed.end(), v) == allowed.end()) {
        std::string hint;
        if (v.is_string()) {
          std::vector<std::string> names;
          for (const auto& a : allowed)
            if (a.is_string()) names.push_back(a.get<std::string>());
          const std::string near = nearest_name(v.get<std::string>(), names);
          if (!near.empty()) hint = fmt::format("did you mean \"{}\"?", near);
        }
        add(Severity::Error, path,
            fmt::format("is {}, but DeepSpeed accepts only {}", short_json(v), allowed.dump()), hint);
        return;
      }
    }
    if (v.is_number()) {
      const double d = v.get<double>();
      if (schema.contains("min") && d < schema["min"].get<double>())
        add(Severity::Error, path,
            fmt::format("is {}, below DeepSpeed's minimum {}", short_json(v), schema["min"].dump()));
      else if (schema.contains("max") && d > schema["max"].get<double>())
        add(Severity::Error, path,
            fmt::format("is {}, above DeepSpeed's maximum {}", short_json(v), schema["max"].dump()));
    }
    if (v.is_object() && schema.contains("unknown_keys")) object(schema, v, path);
  }

  void unknown(const json& keys, const std::string& key, const std::string& path, const std::string& policy,
               const std::string& parent) {
    std::vector<std::string> names;
    for (const auto& [k, _] : keys.items()) names.push_back(k);
    std::string hint;
    const std::string near = nearest_name(key, names);
    if (!near.empty()) hint = fmt::format("did you mean \"{}\"?", join_path(parent, near));
    // A valid key written in the wrong section: suggest where it belongs.
    if (hint.empty()) {
      for (const auto& p : all_paths_) {
        const auto dot = p.rfind('.');
        if (dot != std::string::npos && p.substr(dot + 1) == key && p != path) {
          hint = fmt::format("it belongs under \"{}\"", p.substr(0, dot));
          break;
        }
      }
    }
    const std::string where = parent.empty() ? "the top level" : "\"" + parent + "\"";
    if (policy == "rejected")
      add(Severity::Error, path,
          fmt::format("unknown key; DeepSpeed {} rejects unknown keys in {} (pydantic extra='forbid')",
                      deepspeed_keys_version(), where),
          hint);
    else
      add(Severity::Warning, path,
          fmt::format("unknown key; DeepSpeed {} silently ignores it, so it has no effect",
                      deepspeed_keys_version()),
          hint);
  }

  void add(Severity s, const std::string& path, std::string msg, std::string hint = "") {
    out_.push_back(Issue{s, path, std::move(msg), std::move(hint)});
  }

  std::vector<Issue>& out_;
  std::vector<std::string> all_paths_;
  const json empty_ = json::object();
};

}  // namespace

const nlohmann::json& deepspeed_key_table() {
  static const json table = [] {
    for (const auto& f : embedded_files())
      if (f.path == kTablePath) {
        json j = json::parse(f.content, nullptr, /*allow_exceptions=*/false);
        ZP_CHECK(j.is_object() && j.contains("root") && j.contains("deepspeed_version"),
                 "embedded {} is malformed", kTablePath);
        return j;
      }
    ZP_CHECK(false, "{} is not embedded in the binary; re-run cmake", kTablePath);
    return json();
  }();
  return table;
}

std::string deepspeed_keys_version() {
  return deepspeed_key_table()["deepspeed_version"].get<std::string>();
}

const nlohmann::json* key_schema(std::string_view dotted_path) {
  const json* node = &deepspeed_key_table()["root"];
  size_t start = 0;
  while (start <= dotted_path.size()) {
    const size_t dot = dotted_path.find('.', start);
    const std::string part(
        dotted_path.substr(start, dot == std::string_view::npos ? std::string_view::npos : dot - start));
    const auto keys = node->find("keys");
    if (keys == node->end()) return nullptr;
    const auto it = keys->find(part);
    if (it == keys->end()) return nullptr;
    node = resolve_alias(*keys, &*it);
    if (!node) return nullptr;
    if (dot == std::string_view::npos) return node;
    start = dot + 1;
  }
  return nullptr;
}

std::optional<nlohmann::json> key_default(std::string_view dotted_path) {
  const json* s = key_schema(dotted_path);
  if (!s || !s->contains("default")) return std::nullopt;
  return (*s)["default"];
}

std::vector<std::string> valid_key_paths() {
  std::vector<std::string> out;
  collect_paths(deepspeed_key_table()["root"], "", out);
  std::sort(out.begin(), out.end());
  return out;
}

std::vector<Issue> validate_keys(const nlohmann::json& config) {
  std::vector<Issue> issues;
  if (!config.is_object()) {
    issues.push_back(
        Issue{Severity::Error, "",
              fmt::format("a DeepSpeed config must be a JSON object, found {}", config.type_name()), ""});
    return issues;
  }
  Validator(issues).object(deepspeed_key_table()["root"], config, "");
  return issues;
}

}  // namespace zeroplan::configs
