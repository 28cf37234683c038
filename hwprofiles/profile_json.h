#pragma once
// Field readers shared by the GPU and link profile parsers. Every failure is a UserError naming the
// field and the file (origin), because profiles are user-editable (`zeroplan calibrate` writes them
// and users may hand-edit them).
#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <vector>

namespace zeroplan::hw::detail {

struct FieldReader {
  const nlohmann::json& j;
  std::string_view origin;  // file path or "built-in hwprofiles/gpus/A40.json"
  std::string_view what;    // "GPU profile", "link profile"

  bool has(std::string_view key) const;
  const nlohmann::json& require(std::string_view key) const;
  std::string string(std::string_view key) const;
  std::string string_or(std::string_view key, std::string fallback) const;
  // Finite and > 0 (NaN, infinities, zero and negatives are rejected).
  double positive(std::string_view key) const;
  // Finite, > 0 and <= 1: efficiencies.
  double fraction(std::string_view key) const;
  double fraction_or(std::string_view key, double fallback) const;
  // A positive integer that fits in 64 bits; JSON floats are accepted only when integral (8e9).
  int64_t positive_int(std::string_view key, int64_t max) const;
  int64_t positive_int_or(std::string_view key, int64_t max, int64_t fallback) const;
  bool boolean_or(std::string_view key, bool fallback) const;
  std::vector<std::string> strings_or_empty(std::string_view key) const;
  [[noreturn]] void fail(std::string_view key, std::string_view problem) const;
};

// Rejects keys outside `known`, so a typo ("hbm_GBs") is an error instead of a silent default.
void reject_unknown_keys(const nlohmann::json& j, const std::vector<std::string_view>& known,
                         std::string_view origin, std::string_view what);

// Link objects appear both in hwprofiles/links/*.json and embedded in GPU profiles written by
// `zeroplan calibrate` (measured curves), so both parsers share these.
}  // namespace zeroplan::hw::detail

#include "hwprofiles/gpu_profile.h"

namespace zeroplan::hw::detail {
LinkProfile link_from_object(const nlohmann::json& j, std::string_view origin);
nlohmann::json link_to_object(const LinkProfile& l);
// Lower-case, ' ' and '_' as '-', without a leading "nvidia-": "NVIDIA A100_80GB" -> "a100-80gb".
std::string canonical_key(std::string_view name);
// Printable, bounded copy of user text for error messages.
std::string for_message(std::string_view text);
}  // namespace zeroplan::hw::detail
