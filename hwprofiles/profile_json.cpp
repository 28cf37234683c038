#include "hwprofiles/profile_json.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "common/errors.h"

namespace zeroplan::hw::detail {

void FieldReader::fail(std::string_view key, std::string_view problem) const {
  throw_user_error("{} '{}': field \"{}\" {}", what, origin, key, problem);
}

bool FieldReader::has(std::string_view key) const {
  return j.contains(key) && !j.at(key).is_null();
}

const nlohmann::json& FieldReader::require(std::string_view key) const {
  if (!has(key)) fail(key, "is missing");
  return j.at(key);
}

std::string FieldReader::string(std::string_view key) const {
  const auto& v = require(key);
  if (!v.is_string()) fail(key, fmt::format("must be a string, found {}", v.type_name()));
  auto s = v.get<std::string>();
  if (s.empty()) fail(key, "must not be empty");
  return s;
}

std::string FieldReader::string_or(std::string_view key, std::string fallback) const {
  return has(key) ? string(key) : fallback;
}

double FieldReader::positive(std::string_view key) const {
  const auto& v = require(key);
  if (!v.is_number()) fail(key, fmt::format("must be a number, found {}", v.type_name()));
  const double x = v.get<double>();
  if (!std::isfinite(x) || x <= 0) fail(key, fmt::format("must be a positive finite number, found {}", x));
  return x;
}

double FieldReader::fraction(std::string_view key) const {
  const double x = positive(key);
  if (x > 1) fail(key, fmt::format("is a fraction of peak and must be in (0, 1], found {}", x));
  return x;
}

double FieldReader::fraction_or(std::string_view key, double fallback) const {
  return has(key) ? fraction(key) : fallback;
}

int64_t FieldReader::positive_int(std::string_view key, int64_t max) const {
  const auto& v = require(key);
  if (v.is_number_integer()) {
    // Unsigned JSON integers above INT64_MAX arrive as number_unsigned; reject them via the bound.
    if (v.is_number_unsigned() && v.get<uint64_t>() > static_cast<uint64_t>(max))
      fail(key, fmt::format("must be at most {}", max));
    const int64_t x = v.get<int64_t>();
    if (x <= 0) fail(key, fmt::format("must be a positive integer, found {}", x));
    if (x > max) fail(key, fmt::format("must be at most {}, found {}", max, x));
    return x;
  }
  if (v.is_number_float()) {
    const double x = v.get<double>();
    if (!std::isfinite(x) || x <= 0 || std::floor(x) != x)
      fail(key, fmt::format("must be a positive integer, found {}", x));
    if (x > static_cast<double>(max)) fail(key, fmt::format("must be at most {}, found {}", max, x));
    return static_cast<int64_t>(x);
  }
  fail(key, fmt::format("must be a positive integer, found {}", v.type_name()));
}

int64_t FieldReader::positive_int_or(std::string_view key, int64_t max, int64_t fallback) const {
  return has(key) ? positive_int(key, max) : fallback;
}

bool FieldReader::boolean_or(std::string_view key, bool fallback) const {
  if (!has(key)) return fallback;
  const auto& v = j.at(key);
  if (!v.is_boolean()) fail(key, fmt::format("must be true or false, found {}", v.type_name()));
  return v.get<bool>();
}

std::vector<std::string> FieldReader::strings_or_empty(std::string_view key) const {
  std::vector<std::string> out;
  if (!has(key)) return out;
  const auto& v = j.at(key);
  if (!v.is_array()) fail(key, fmt::format("must be an array of strings, found {}", v.type_name()));
  for (const auto& e : v) {
    if (!e.is_string() || e.get<std::string>().empty()) fail(key, "must contain only non-empty strings");
    out.push_back(e.get<std::string>());
  }
  return out;
}

void reject_unknown_keys(const nlohmann::json& j, const std::vector<std::string_view>& known,
                         std::string_view origin, std::string_view what) {
  for (const auto& [k, v] : j.items()) {
    (void)v;
    if (k.starts_with("_") || k.starts_with("note"))
      continue;  // "_comment", "notes": free-form documentation
    if (std::find(known.begin(), known.end(), std::string_view(k)) == known.end())
      throw_user_error("{} '{}': unknown field \"{}\" (check the spelling; see hwprofiles/README.md)", what,
                       origin, k);
  }
}

}  // namespace zeroplan::hw::detail
