// Link tiers (hwprofiles/links/*.json): NVLink/NVSwitch generations, PCIe with and without P2P,
// InfiniBand, RoCE and Ethernet, each with a busbw(size) curve. Every curve either comes from a
// published nccl-tests run (cited in the file) or from the stated latency/peak model below.
#include <fmt/ranges.h>

#include <algorithm>
#include <cmath>
#include <map>

#include "common/embedded_data.h"
#include "common/errors.h"
#include "common/json_file.h"
#include "common/names.h"
#include "hwprofiles/gpu_profile.h"
#include "hwprofiles/profile_json.h"

namespace zeroplan::hw {
namespace detail {

namespace {

constexpr std::string_view kWhat = "link profile";
// Bounds that no real link reaches: 100 TB/s, 1 s latency, 1 TiB messages, 1000 points.
constexpr double kMaxGBps = 1e5;
constexpr double kMaxLatencyUs = 1e6;
constexpr int64_t kMaxPointBytes = int64_t{1} << 40;
constexpr size_t kMaxPoints = 1000;

const std::map<std::string, LinkKind>& kinds() {
  static const std::map<std::string, LinkKind> m = {
      {"nvswitch", LinkKind::NVSwitch}, {"nvlink", LinkKind::NVLink},
      {"pcie", LinkKind::PCIe},         {"infiniband", LinkKind::InfiniBand},
      {"roce", LinkKind::RoCE},         {"ethernet", LinkKind::Ethernet},
      {"host", LinkKind::Host}};
  return m;
}

std::string kind_name(LinkKind k) {
  switch (k) {
    case LinkKind::NVSwitch:
      return "NVSwitch";
    case LinkKind::NVLink:
      return "NVLink";
    case LinkKind::PCIe:
      return "PCIe";
    case LinkKind::InfiniBand:
      return "InfiniBand";
    case LinkKind::RoCE:
      return "RoCE";
    case LinkKind::Ethernet:
      return "Ethernet";
    case LinkKind::Host:
      return "Host";
  }
  return "PCIe";
}

// Latency/bandwidth model for links without a published curve (documented in README.md):
// an all-reduce of S bytes takes t = alpha + S*f/B (alpha = latency_us, B = peak busbw,
// f = 2(n-1)/n ~ 2), so busbw = S*f/t = B * S / (S + S_half) with S_half = alpha*B/f.
// Sampled at 1 KiB, 4 KiB, ..., 16 GiB; busbw_at interpolates between the samples.
std::vector<BusBwCurve::Point> model_points(double peak_GBps, double latency_us) {
  constexpr double kBusFactor = 2.0;  // 2(n-1)/n for large n (nccl-tests doc/PERFORMANCE.md)
  const double s_half = latency_us * 1e-6 * peak_GBps * 1e9 / kBusFactor;
  std::vector<BusBwCurve::Point> pts;
  for (int k = 10; k <= 34; k += 2) {
    const double s = std::ldexp(1.0, k);
    pts.push_back({int64_t{1} << k, peak_GBps * s / (s + s_half)});
  }
  return pts;
}

}  // namespace

LinkProfile link_from_object(const nlohmann::json& j, std::string_view origin) {
  if (!j.is_object())
    throw_user_error("{} '{}' must be a JSON object, found {}", kWhat, origin, j.type_name());
  reject_unknown_keys(j,
                      {"name", "aliases", "kind", "unidirectional_GBps", "latency_us", "max_bus_factor",
                       "busbw_points", "busbw_model", "curve_is_model", "source"},
                      origin, kWhat);
  const FieldReader f{j, origin, kWhat};
  LinkProfile l;
  l.name = f.string("name");
  l.aliases = f.strings_or_empty("aliases");
  const std::string kind = f.string("kind");
  const auto it = kinds().find(to_lower(kind));
  if (it == kinds().end())
    f.fail("kind",
           fmt::format("is '{}'; expected one of NVSwitch, NVLink, PCIe, InfiniBand, RoCE, Ethernet, Host",
                       for_message(kind)));
  l.kind = it->second;
  l.unidirectional_GBps = f.positive("unidirectional_GBps");
  if (l.unidirectional_GBps > kMaxGBps)
    f.fail("unidirectional_GBps", "is beyond any real link (> 100000 GB/s)");
  l.latency_us = f.positive("latency_us");
  if (l.latency_us > kMaxLatencyUs) f.fail("latency_us", "is beyond any real link (> 1 s)");
  l.max_bus_factor = f.has("max_bus_factor") ? f.positive("max_bus_factor") : 1.0;
  if (l.max_bus_factor > 2.0)
    f.fail("max_bus_factor",
           "must be at most 2 (all-reduce busbw factor 2(n-1)/n < 2, nccl-tests PERFORMANCE.md)");
  l.source = f.string("source");

  const bool has_points = f.has("busbw_points"), has_model = f.has("busbw_model");
  if (has_points == has_model)
    f.fail("busbw_points", "or \"busbw_model\" must be given (exactly one of them)");
  if (has_model) {
    const auto& m = j.at("busbw_model");
    if (!m.is_object()) f.fail("busbw_model", "must be an object {\"peak_busbw_GBps\": ...}");
    reject_unknown_keys(m, {"peak_busbw_GBps"}, origin, kWhat);
    const FieldReader mf{m, origin, kWhat};
    const double peak = mf.positive("peak_busbw_GBps");
    if (peak > kMaxGBps) mf.fail("peak_busbw_GBps", "is beyond any real link (> 100000 GB/s)");
    l.busbw.points = model_points(peak, l.latency_us);
    l.curve_is_model = true;
    if (f.has("curve_is_model")) f.fail("curve_is_model", "is implied by \"busbw_model\"; remove it");
  } else {
    const auto& pts = j.at("busbw_points");
    if (!pts.is_array() || pts.empty())
      f.fail("busbw_points", "must be a non-empty array of [bytes, GB/s] pairs");
    if (pts.size() > kMaxPoints) f.fail("busbw_points", "has more than 1000 points");
    int64_t prev = 0;
    for (size_t i = 0; i < pts.size(); ++i) {
      const auto& p = pts[i];
      const auto bad = [&](std::string_view why) {
        f.fail("busbw_points",
               fmt::format("entry {} {}; expected [bytes, GB/s] with bytes increasing", i, why));
      };
      if (!p.is_array() || p.size() != 2 || !p[0].is_number() || !p[1].is_number())
        bad("is not a [number, number] pair");
      const double b = p[0].get<double>(), bw = p[1].get<double>();
      if (!std::isfinite(b) || b < 1 || std::floor(b) != b || b > static_cast<double>(kMaxPointBytes))
        bad("has a size that is not a whole number of bytes in [1, 2^40]");
      if (!std::isfinite(bw) || bw <= 0 || bw > kMaxGBps)
        bad("has a bandwidth that is not a positive finite GB/s");
      const auto bytes = static_cast<int64_t>(b);
      if (bytes <= prev) bad("is not larger than the previous size");
      prev = bytes;
      l.busbw.points.push_back({bytes, bw});
    }
    l.curve_is_model = f.boolean_or("curve_is_model", false);
  }
  return l;
}

nlohmann::json link_to_object(const LinkProfile& l) {
  nlohmann::json j;
  j["name"] = l.name;
  if (!l.aliases.empty()) j["aliases"] = l.aliases;
  j["kind"] = kind_name(l.kind);
  j["unidirectional_GBps"] = l.unidirectional_GBps;
  j["latency_us"] = l.latency_us;
  j["max_bus_factor"] = l.max_bus_factor;
  nlohmann::json pts = nlohmann::json::array();
  for (const auto& p : l.busbw.points) pts.push_back({p.bytes, p.busbw_GBps});
  j["busbw_points"] = pts;  // always explicit points, so measured curves survive a round trip
  j["curve_is_model"] = l.curve_is_model;
  if (!l.source.empty()) j["source"] = l.source;
  return j;
}

std::string canonical_key(std::string_view name) {
  std::string k = to_lower(name);
  for (auto& c : k)
    if (c == ' ' || c == '_') c = '-';
  if (k.starts_with("nvidia-")) k.erase(0, 7);
  return k;
}

std::string for_message(std::string_view text) {
  std::string s;
  for (const char c : text.substr(0, 80)) s += (static_cast<unsigned char>(c) < 0x20 || c == 0x7f) ? '?' : c;
  if (text.size() > 80) s += "...";
  return s;
}

}  // namespace detail

LinkProfile link_from_json(const std::string& origin, const std::string& json_text) {
  try {
    return detail::link_from_object(parse_json_text(json_text, origin, "link profile"), origin);
  } catch (const nlohmann::json::exception& e) {  // e.g. out_of_range for "1e400"
    throw_user_error("link profile '{}' could not be read as JSON (nlohmann error {}); fix the file", origin,
                     e.id);
  }
}

std::string link_to_json(const LinkProfile& l) {
  return detail::link_to_object(l).dump(2) + "\n";
}

const std::vector<LinkProfile>& builtin_links() {
  static const std::vector<LinkProfile> links = [] {
    std::vector<LinkProfile> out;
    for (const auto& f : embedded_files_under("hwprofiles/links/"))
      out.push_back(link_from_json("built-in " + std::string(f.path), std::string(f.content)));
    std::map<std::string, std::string> seen;
    for (const auto& l : out) {
      std::vector<std::string> names = l.aliases;
      names.push_back(l.name);
      for (const auto& n : names) {
        const auto [it, fresh] = seen.emplace(detail::canonical_key(n), l.name);
        ZP_CHECK(fresh, "link name '{}' is used by both '{}' and '{}'", n, it->second, l.name);
      }
    }
    return out;
  }();
  return links;
}

std::vector<std::string> known_link_names() {
  std::vector<std::string> names;
  for (const auto& l : builtin_links()) {
    names.push_back(l.name);
    names.insert(names.end(), l.aliases.begin(), l.aliases.end());
  }
  return names;
}

LinkProfile find_link(const std::string& name) {
  const std::string key = detail::canonical_key(name);
  for (const auto& l : builtin_links()) {
    if (detail::canonical_key(l.name) == key) return l;
    for (const auto& a : l.aliases)
      if (detail::canonical_key(a) == key) return l;
  }
  std::vector<std::string> canon;
  for (const auto& l : builtin_links()) canon.push_back(l.name);
  const std::string best = nearest_name(name, known_link_names());
  if (!best.empty())
    throw_user_error("unknown link '{}'; did you mean '{}'? (known: {})", detail::for_message(name), best,
                     fmt::join(canon, ", "));
  throw_user_error("unknown link '{}' (known: {})", detail::for_message(name), fmt::join(canon, ", "));
}

}  // namespace zeroplan::hw
