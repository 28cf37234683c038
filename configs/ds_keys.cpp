#include "configs/ds_keys.h"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <map>

#include "common/embedded_data.h"
#include "common/errors.h"
#include "common/names.h"

namespace zeroplan::configs {
namespace {

using nlohmann::json;

constexpr std::string_view kTablePrefix = "configs/data/ds_keys_";

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

struct Tables {
  std::vector<std::string> versions;  // oldest first
  std::map<std::string, json> by_version;
};

const Tables& tables() {
  static const Tables t = [] {
    Tables out;
    for (const auto& f : embedded_files()) {
      if (f.path.rfind(kTablePrefix, 0) != 0 || f.path.find("manifest") != std::string_view::npos) continue;
      json j = json::parse(f.content, nullptr, /*allow_exceptions=*/false);
      ZP_CHECK(j.is_object() && j.contains("root") && j.contains("deepspeed_version"),
               "embedded {} is malformed", f.path);
      const std::string v = j["deepspeed_version"].get<std::string>();
      out.versions.push_back(v);
      out.by_version.emplace(v, std::move(j));
    }
    ZP_CHECK(!out.versions.empty(), "no configs/data/ds_keys_*.json embedded in the binary; re-run cmake");
    std::sort(out.versions.begin(), out.versions.end(),
              [](const std::string& a, const std::string& b) { return version_parts(a) < version_parts(b); });
    return out;
  }();
  return t;
}

bool is_integral_double(double d) {
  return std::isfinite(d) && std::floor(d) == d && std::fabs(d) < 9.2e18;
}

std::string trim(std::string s) {
  const auto b = s.find_first_not_of(" \t\r\n");
  if (b == std::string::npos) return "";
  const auto e = s.find_last_not_of(" \t\r\n");
  return s.substr(b, e - b + 1);
}

// Python int() / pydantic's str -> int: optional sign, digits with single underscores between them.
std::optional<int64_t> parse_python_int(const std::string& raw) {
  std::string s = trim(raw);
  std::string digits;
  size_t i = 0;
  bool neg = false;
  if (i < s.size() && (s[i] == '+' || s[i] == '-')) neg = s[i++] == '-';
  bool last_us = true;  // no leading underscore
  for (; i < s.size(); ++i) {
    if (s[i] == '_') {
      if (last_us) return std::nullopt;
      last_us = true;
      continue;
    }
    if (s[i] < '0' || s[i] > '9') return std::nullopt;
    digits += s[i];
    last_us = false;
  }
  if (digits.empty() || last_us || digits.size() > 18) return std::nullopt;
  const int64_t v = std::stoll(digits);
  return neg ? -v : v;
}

std::optional<double> parse_python_float(const std::string& raw) {
  std::string s = trim(raw);
  if (s.empty()) return std::nullopt;
  std::string cleaned;
  for (char c : s)
    if (c != '_') cleaned += c;
  char* end = nullptr;
  const double d = std::strtod(cleaned.c_str(), &end);
  if (end != cleaned.c_str() + cleaned.size()) return std::nullopt;
  return d;
}

bool matches_type(const std::string& type, const json& v, bool pydantic, bool v1) {
  if (pydantic) {
    if (type == "int") return pydantic_int(v, v1).has_value();
    if (type == "number") return pydantic_number(v).has_value();
    if (type == "bool") return pydantic_bool(v).has_value();
    if (type == "string" || type == "path") return v.is_string() || (v1 && v.is_number());
  } else {
    if (type == "int")
      return v.is_number_integer() || (v.is_number_float() && is_integral_double(v.get<double>()));
    if (type == "number") return v.is_number();
    if (type == "bool") return v.is_boolean();
    if (type == "string" || type == "path") return v.is_string();
  }
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
         : t == "any"    ? "any value"
                         : "a string";
  }
  return s;
}

// The value pydantic compares with one_of/constraints: coerced for pydantic nodes.
std::optional<double> numeric_value(const json& v, const std::vector<std::string>& types, bool pydantic,
                                    bool v1) {
  if (pydantic) {
    if (std::find(types.begin(), types.end(), "int") != types.end())
      if (const auto i = pydantic_int(v, v1)) return static_cast<double>(*i);
    if (std::find(types.begin(), types.end(), "number") != types.end()) return pydantic_number(v);
    return std::nullopt;
  }
  if (v.is_number()) return v.get<double>();
  return std::nullopt;
}

}  // namespace

std::optional<int64_t> pydantic_int(const json& v, bool pydantic_v1) {
  if (v.is_boolean()) return v.get<bool>() ? 1 : 0;
  if (v.is_number_integer()) return v.get<int64_t>();
  if (v.is_number_float()) {
    const double d = v.get<double>();
    if (!std::isfinite(d) || std::fabs(d) >= 9.2e18) return std::nullopt;
    if (pydantic_v1) return static_cast<int64_t>(std::trunc(d));  // int(5.5) == 5
    return is_integral_double(d) ? std::optional<int64_t>(static_cast<int64_t>(d)) : std::nullopt;
  }
  if (v.is_string()) {
    const std::string s = v.get<std::string>();
    if (const auto i = parse_python_int(s)) return i;
    if (pydantic_v1) return std::nullopt;
    // pydantic v2 also takes "5.0" / "5.000" (a decimal string whose fraction is zero), not "5e8".
    const std::string t = trim(s);
    const auto dot = t.find('.');
    if (dot == std::string::npos || t.find_first_not_of("0", dot + 1) != std::string::npos)
      return std::nullopt;
    return parse_python_int(t.substr(0, dot));
  }
  return std::nullopt;
}

std::optional<double> pydantic_number(const json& v) {
  if (v.is_boolean()) return v.get<bool>() ? 1.0 : 0.0;
  if (v.is_number()) return v.get<double>();
  if (v.is_string()) return parse_python_float(v.get<std::string>());
  return std::nullopt;
}

std::optional<bool> pydantic_bool(const json& v) {
  if (v.is_boolean()) return v.get<bool>();
  if (v.is_number()) {
    const double d = v.get<double>();
    if (d == 0.0) return false;
    if (d == 1.0) return true;
    return std::nullopt;
  }
  if (v.is_string()) {
    std::string s = trim(v.get<std::string>());
    std::transform(s.begin(), s.end(), s.begin(), [](unsigned char c) { return std::tolower(c); });
    for (const char* t : {"true", "yes", "on", "t", "y", "1"})
      if (s == t) return true;
    for (const char* f : {"false", "no", "off", "f", "n", "0"})
      if (s == f) return false;
  }
  return std::nullopt;
}

namespace {

class Validator {
 public:
  Validator(std::vector<Issue>& out, const json& table, const ValidateOptions& o)
      : out_(out),
        table_(table),
        o_(o),
        version_(table["deepspeed_version"].get<std::string>()),
        v1_(table.value("pydantic_api", "v2") == "v1") {
    collect_paths(table_["root"], "", all_paths_);
  }

  void run(const json& config) {
    // Keys DeepSpeed removed: runtime/config.py _reject_removed_config_keys raises DeepSpeedConfigError.
    if (table_.contains("removed_keys"))
      for (const auto& [k, msg] : table_["removed_keys"].items()) {
        const auto dot = k.find('.');
        const bool present =
            dot == std::string::npos
                ? config.contains(k)
                : (config.contains(k.substr(0, dot)) && config[k.substr(0, dot)].is_object() &&
                   config[k.substr(0, dot)].contains(k.substr(dot + 1)));
        if (present)
          add(Severity::Error, k,
              fmt::format("DeepSpeed {} refuses it at start-up: {}", version_, msg.get<std::string>()),
              "remove it", json{{"op", "remove"}});
      }
    object(table_["root"], config, "");
  }

 private:
  bool removed(const std::string& path) const {
    return table_.contains("removed_keys") && table_["removed_keys"].contains(path);
  }

  bool runner_fills(const json& schema) const {
    // The HF Trainer and accelerate fill the same "auto" keys (transformers integrations/deepspeed.py
    // fill_match/fill_only, accelerate accelerator.py _prepare_deepspeed deepspeed_config_process);
    // accelerate does not fill optimizer betas/eps (only lr and weight_decay of its DummyOptim).
    return o_.runner != Runner::DeepSpeed && schema.value("hf_auto", false);
  }
  // Keys only accelerate fills: Accelerator._prepare_deepspeed (accelerate 1.15 accelerator.py) passes
  // config_kwargs {"gradient_clipping": 1.0, "zero_optimization.stage3_gather_16bit_weights_on_model_save":
  // False, ...} to deepspeed_config_process, which the HF Trainer reaches through accelerator.prepare.
  // Recorded: tests/deepspeed_configs adv_gather16_auto runs under the HF Trainer.
  bool accelerate_fills(const std::string& path) const {
    return o_.runner != Runner::DeepSpeed &&
           path == "zero_optimization.stage3_gather_16bit_weights_on_model_save";
  }

  // Top-level keys deepspeed.initialize reads from the raw config before DeepSpeedConfig parses it, so
  // the tables (scripts/ds_keys_dump.py probes DeepSpeedConfig alone) do not list them:
  // deepspeed/__init__.py initialize builds the (data_parallel, sequence_parallel) mesh when
  // "sequence_parallel_size" and "data_parallel_size" are both in the config (present from 0.15.4 on;
  // absent in 0.14.5), and runtime/config.py divides the batch's world size by
  // "sequence_parallel_size" once torch.distributed runs (0.17.x on). Both are integers.
  bool read_by_initialize(const std::string& path) const {
    if (path != "sequence_parallel_size" && path != "data_parallel_size") return false;
    return version_ != "0.14.5";
  }

  void object(const json& schema, const json& value, const std::string& path) {
    const json& keys = schema.contains("keys") ? schema["keys"] : empty_;
    const std::string policy = schema.value("unknown_keys", "opaque");
    const bool pydantic = schema.value("pydantic", false);
    for (const auto& [k, v] : value.items()) {
      const std::string p = join_path(path, k);
      if (removed(p)) continue;  // reported by run()
      const auto it = keys.find(k);
      if (it == keys.end()) {
        if (policy != "opaque" && !read_by_initialize(p)) unknown(keys, k, p, policy, path);
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
      if (child->contains("deprecated")) deprecated(*child, keys, value, k, p, path);
      node(*child, v, p, pydantic);
    }
  }

  void deprecated(const json& schema, const json& keys, const json& parent_value, const std::string& key,
                  const std::string& path, const std::string& parent) {
    const json& d = schema["deprecated"];
    const std::string np = d.value("new_param", "");
    std::string msg = fmt::format("deprecated in DeepSpeed {}", version_);
    if (!np.empty()) msg += fmt::format("; DeepSpeed moves its value to \"{}\"", join_path(parent, np));
    if (d.contains("message")) msg += ". " + d["message"].get<std::string>();
    // config_utils.py _process_deprecated_field: the deprecated field and its replacement both set ->
    // AssertionError "Cannot provide deprecated parameter ... and replacing parameter ... together".
    // The replacement may be written under its field name or its alias.
    std::string np_written;
    if (!np.empty() && np.find('.') == std::string::npos) {
      if (parent_value.contains(np)) np_written = np;
      const auto it = keys.find(np);
      if (np_written.empty() && it != keys.end() && it->contains("alias_of") &&
          parent_value.contains((*it)["alias_of"].get<std::string>()))
        np_written = (*it)["alias_of"].get<std::string>();
      for (const auto& [alias, node] : keys.items())  // np is the alias, the field name written
        if (np_written.empty() && node.contains("alias_of") && node["alias_of"] == np &&
            parent_value.contains(alias))
          np_written = alias;
    }
    if (!np_written.empty() && d.value("sets_new_param", true)) {
      add(Severity::Error, path,
          fmt::format(
              "set together with its replacement \"{}\"; DeepSpeed {} asserts 'Cannot provide deprecated "
              "parameter '{}' and replacing parameter '{}' together'",
              join_path(parent, np_written), version_, key, np),
          fmt::format("remove \"{}\"", key), json{{"op", "remove"}});
      return;
    }
    add(Severity::Warning, path, msg,
        np.empty() ? "" : fmt::format("write \"{}\" instead", join_path(parent, np)));
  }

  void node(const json& schema, const json& v, const std::string& path, bool pydantic) {
    if (v.is_string() && v.get<std::string>() == "auto") {
      if (runner_fills(schema) || accelerate_fills(path)) return;  // check resolves it
      if (o_.runner != Runner::DeepSpeed) {
        // accelerate's DeepSpeedPlugin.deepspeed_config_process walks every key (the HF Trainer goes
        // through it too) and raises for an "auto" nothing filled.
        add(Severity::Error, path,
            fmt::format("\"auto\" here is filled by neither the HF Trainer nor accelerate; accelerate raises "
                        "'`{}` not found in kwargs. Please specify `{}` without `auto`'",
                        path, path),
            "write the value you want");
        return;
      }
      // Where the field's own default is "auto" (ZenFlowConfig select_strategy, select_interval,
      // update_interval; data_types.keep_in_fp32_modules, read with dict.get in runtime/config.py),
      // "auto" is a value DeepSpeed understands, not a placeholder; a pydantic model dropping it
      // (DeepSpeedConfigModel.__init__, runtime/config_utils.py) lands on the same default.
      if (schema.contains("default") && schema["default"] == "auto") return;
      if (pydantic) {
        const std::string def = schema.contains("default") ? short_json(schema["default"]) : "its default";
        add(Severity::Warning, path,
            fmt::format(
                "\"auto\" is not filled in by the {} runner here; DeepSpeed's pydantic model drops it and "
                "uses {}",
                runner_name(o_.runner), def),
            "write the value you want");
      } else {
        add(Severity::Error, path,
            fmt::format(
                "\"auto\" is filled in only by the HF Trainer / accelerate (and only for batch sizes, "
                "gradient_clipping, fp16/bf16.enabled, optimizer/scheduler params and three "
                "zero_optimization sizes); with the {} runner DeepSpeed reads the string \"auto\" here",
                runner_name(o_.runner)),
            o_.runner == Runner::DeepSpeed
                ? "write the value, or pass --runner hf if the HF Trainer launches it"
                : "write the value you want");
      }
      return;
    }
    const auto types = types_of(schema);
    if (v.is_null()) {
      if (!schema.value("nullable", false) && pydantic)
        add(Severity::Error, path, "is null; DeepSpeed's pydantic model needs " + describe_types(types),
            "remove the key or give a value");
      else if (!schema.value("nullable", false) && !(types.size() == 1 && types[0] == "any"))
        add(Severity::Warning, path,
            "is null; DeepSpeed reads it with dict.get and gets None instead of its default",
            "remove the key or give a value");
      return;
    }
    const bool ok = std::any_of(types.begin(), types.end(),
                                [&](const std::string& t) { return matches_type(t, v, pydantic, v1_); });
    if (!ok) {
      type_error(schema, types, v, path, pydantic);
      return;
    }
    if (schema.contains("one_of")) {
      const json& allowed = schema["one_of"];
      bool found = false;
      for (const auto& a : allowed) {
        if (a == v) found = true;
        // pydantic compares an int enum after coercion (v2: "3", 3.0, true; v1: 3.0, true).
        if (a.is_number_integer() && pydantic && !(v1_ && v.is_string())) {
          const auto i = pydantic_int(v, false);
          if (i && *i == a.get<int64_t>()) found = true;
        }
      }
      if (!found) {
        std::string hint;
        if (v.is_string()) {
          std::vector<std::string> names;
          for (const auto& a : allowed)
            if (a.is_string()) names.push_back(a.get<std::string>());
          const std::string near = nearest_name(v.get<std::string>(), names);
          if (!near.empty()) hint = fmt::format("did you mean \"{}\"?", near);
        }
        add(Severity::Error, path,
            fmt::format("is {}, but DeepSpeed {} accepts only {}", short_json(v), version_, allowed.dump()),
            hint, hint.empty() ? json() : json{{"op", "set"}, {"value", hint.substr(14, hint.size() - 16)}});
        return;
      }
    }
    if (const auto d = numeric_value(v, types, pydantic, v1_)) constraints(schema, *d, v, path);
    if (v.is_object() && schema.contains("keys")) object(schema, v, path);
  }

  void type_error(const json& schema, const std::vector<std::string>& types, const json& v,
                  const std::string& path, bool pydantic) {
    (void)schema;
    std::string hint;
    if (v.is_string() && (types[0] == "int" || types[0] == "number"))
      hint = "write it as a JSON number, without quotes";
    if (v.is_number_float() && types[0] == "int") hint = "DeepSpeed needs a whole number here";
    if (v.is_string() && types[0] == "bool") hint = "write true or false, without quotes";
    // A number written as a string DeepSpeed cannot read ("5e8" for an int): the number it means.
    json fix;
    if (v.is_string() && (types[0] == "int" || types[0] == "number"))
      if (const auto d = parse_python_float(v.get<std::string>()); d && std::isfinite(*d)) {
        if (types[0] == "number")
          fix = json{{"op", "set"}, {"value", *d}};
        else if (is_integral_double(*d))
          fix = json{{"op", "set"}, {"value", static_cast<int64_t>(*d)}};
      }
    if (pydantic) {
      add(Severity::Error, path,
          fmt::format("is {}, expected {}; DeepSpeed {}'s pydantic model refuses it", short_json(v),
                      describe_types(types), version_),
          hint, fix);
      return;
    }
    // A plain key: DeepSpeed takes the value as written (dict.get) and fails where it first uses it
    // as a number; a non-bool where a flag is expected is used for its truthiness.
    if (types[0] == "int" || types[0] == "number")
      add(Severity::Error, path,
          fmt::format(
              "is {}, expected {}; DeepSpeed reads this key without conversion and fails where it uses it "
              "as a number",
              short_json(v), describe_types(types)),
          hint);
    else
      add(Severity::Warning, path,
          fmt::format("is {}, expected {}; DeepSpeed reads it without conversion", short_json(v),
                      describe_types(types)),
          hint);
  }

  void constraints(const json& schema, double d, const json& v, const std::string& path) {
    const auto bound = [&](const char* c, const char* words, bool bad) {
      if (bad)
        add(Severity::Error, path,
            fmt::format("is {}; DeepSpeed {} requires it to be {} {} (pydantic Field({}={}) in {})",
                        short_json(v), version_, words, schema[c].dump(), c, schema[c].dump(),
                        schema.value("source", "")),
            schema.contains("default") ? "use DeepSpeed's default " + short_json(schema["default"]) : "",
            schema.contains("default") ? json{{"op", "set"}, {"value", schema["default"]}} : json());
    };
    if (schema.contains("gt")) bound("gt", "greater than", !(d > schema["gt"].get<double>()));
    if (schema.contains("ge")) bound("ge", "at least", !(d >= schema["ge"].get<double>()));
    if (schema.contains("lt")) bound("lt", "less than", !(d < schema["lt"].get<double>()));
    if (schema.contains("le")) bound("le", "at most", !(d <= schema["le"].get<double>()));
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
                      version_, where),
          hint,
          near.empty() ? json{{"op", "remove"}} : json{{"op", "rename"}, {"to", join_path(parent, near)}});
    else
      add(Severity::Warning, path,
          fmt::format("unknown key; DeepSpeed {} never reads it, so it has no effect", version_), hint);
  }

  void add(Severity s, const std::string& path, std::string msg, std::string hint = "", json fix = json()) {
    out_.push_back(Issue{s, path, std::move(msg), std::move(hint), std::move(fix)});
  }

  std::vector<Issue>& out_;
  const json& table_;
  const ValidateOptions& o_;
  std::string version_;
  bool v1_ = false;
  std::vector<std::string> all_paths_;
  const json empty_ = json::object();
};

}  // namespace

std::vector<std::string> deepspeed_versions() {
  return tables().versions;
}

std::string resolve_deepspeed_version(std::string_view requested) {
  const auto& t = tables();
  if (requested.empty()) return t.versions.back();
  if (t.by_version.count(std::string(requested))) return std::string(requested);
  const auto want = version_parts(requested);
  std::string best;
  if (want.size() >= 2)
    for (const auto& v : t.versions) {
      const auto have = version_parts(v);
      if (have.size() >= 2 && have[0] == want[0] && have[1] == want[1]) best = v;  // newest of that minor
    }
  if (best.empty()) {
    std::string all;
    for (const auto& v : t.versions) all += (all.empty() ? "" : ", ") + v;
    throw_user_error(
        "--deepspeed-version '{}' has no key table; known: {} (scripts/ds_keys_dump.py adds one)", requested,
        all);
  }
  return best;
}

const nlohmann::json& deepspeed_key_table(std::string_view version) {
  return tables().by_version.at(resolve_deepspeed_version(version));
}

std::string deepspeed_keys_version(std::string_view version) {
  return deepspeed_key_table(version)["deepspeed_version"].get<std::string>();
}

bool uses_pydantic_v1(std::string_view version) {
  return deepspeed_key_table(version).value("pydantic_api", "v2") == "v1";
}

const nlohmann::json* key_schema(std::string_view dotted_path, std::string_view version) {
  const json* node = &deepspeed_key_table(version)["root"];
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

std::optional<nlohmann::json> key_default(std::string_view dotted_path, std::string_view version) {
  const json* s = key_schema(dotted_path, version);
  if (!s || !s->contains("default")) return std::nullopt;
  return (*s)["default"];
}

std::vector<std::string> valid_key_paths(std::string_view version) {
  std::vector<std::string> out;
  collect_paths(deepspeed_key_table(version)["root"], "", out);
  std::sort(out.begin(), out.end());
  return out;
}

std::vector<Issue> validate_keys(const nlohmann::json& config, const ValidateOptions& o) {
  std::vector<Issue> issues;
  if (!config.is_object()) {
    issues.push_back(
        Issue{Severity::Error,
              "",
              fmt::format("a DeepSpeed config must be a JSON object, found {}", config.type_name()),
              "",
              {}});
    return issues;
  }
  Validator(issues, deepspeed_key_table(o.version), o).run(config);
  return issues;
}

std::vector<int> version_parts(std::string_view v) {
  std::vector<int> out;
  int cur = 0;
  bool any = false;
  for (char c : v) {
    if (c >= '0' && c <= '9') {
      cur = cur * 10 + (c - '0');
      any = true;
    } else if (c == '.') {
      out.push_back(cur);
      cur = 0;
      any = false;
    } else {
      return {};
    }
  }
  if (any) out.push_back(cur);
  return out;
}

}  // namespace zeroplan::configs
