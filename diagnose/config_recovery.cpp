#include "diagnose/config_recovery.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <optional>
#include <string>

namespace zeroplan::diagnose {
namespace {

using nlohmann::json;

std::optional<double> num(const std::string& s) {
  double v = 0;
  auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (ec != std::errc() || p != s.data() + s.size() || !std::isfinite(v)) return std::nullopt;
  return v;
}

json scalar(const std::string& s) {
  if (s == "True") return true;
  if (s == "False") return false;
  if (s == "None") return nullptr;
  if (auto v = num(s)) {
    if (std::floor(*v) == *v && std::abs(*v) < 9e15) return static_cast<int64_t>(*v);
    return *v;
  }
  return s;
}

// "DeepSpeedZeroOffloadOptimizerConfig(device='cpu', nvme_path=None, ...)" (0.19) or
// "...(device=<OffloadDeviceEnum.cpu: 'cpu'>, ...)" (0.14): the device, or "" for None.
std::string offload_device(const std::string& v) {
  if (v == "None" || v.empty()) return "";
  const size_t p = v.find("device=");
  if (p == std::string::npos) return "";
  const std::string rest = v.substr(p + 7, 48);
  if (rest.find("nvme") != std::string::npos) return "nvme";
  if (rest.find("cpu") != std::string::npos) return "cpu";
  return "";
}

bool enabled_in(const std::string& v) {
  return v.find("enabled=True") != std::string::npos || v == "True";
}

}  // namespace

json config_from_engine_dump(const RunLog& log) {
  const auto& d = log.engine_config;
  if (d.empty() && log.zero_config.empty()) return nullptr;
  json c = json::object();
  for (const char* k : {"train_micro_batch_size_per_gpu", "gradient_accumulation_steps", "train_batch_size",
                        "gradient_clipping", "steps_per_print", "wall_clock_breakdown"}) {
    if (auto it = d.find(k); it != d.end()) {
      json v = scalar(it->second);
      if (!v.is_string() && !v.is_null()) c[k] = v;
    }
  }
  // Precision: 0.19 prints bfloat16_config/float16_config as "enabled=... ..."; 0.14 prints
  // bfloat16_enabled / fp16_enabled booleans.
  for (auto [key, out] : {std::pair{"bfloat16_config", "bf16"}, std::pair{"bfloat16_enabled", "bf16"},
                          std::pair{"float16_config", "fp16"}, std::pair{"fp16_enabled", "fp16"}}) {
    if (auto it = d.find(key); it != d.end()) c[out]["enabled"] = enabled_in(it->second);
  }
  json z = json::object();
  // DeepSpeedZeroConfig field -> ds_config key (runtime/zero/config.py aliases: stage3_* for the
  // stage-3 knobs).
  static constexpr std::pair<const char*, const char*> kKeys[] = {
      {"stage", "stage"},
      {"contiguous_gradients", "contiguous_gradients"},
      {"reduce_scatter", "reduce_scatter"},
      {"reduce_bucket_size", "reduce_bucket_size"},
      {"allgather_partitions", "allgather_partitions"},
      {"allgather_bucket_size", "allgather_bucket_size"},
      {"overlap_comm", "overlap_comm"},
      {"sub_group_size", "sub_group_size"},
      {"prefetch_bucket_size", "stage3_prefetch_bucket_size"},
      {"param_persistence_threshold", "stage3_param_persistence_threshold"},
      {"max_live_parameters", "stage3_max_live_parameters"},
      {"max_reuse_distance", "stage3_max_reuse_distance"},
      // ZeRO++ (planner/hpz.h; configs/check.cpp reads them): 0.19.8's dump prints them by field name.
      {"zero_hpz_partition_size", "zero_hpz_partition_size"},
      {"zero_quantized_weights", "zero_quantized_weights"},
      {"zero_quantized_gradients", "zero_quantized_gradients"},
  };
  for (auto [from, to] : kKeys) {
    if (auto it = log.zero_config.find(from); it != log.zero_config.end()) {
      json v = scalar(it->second);
      if (!v.is_string() && !v.is_null()) z[to] = v;
    }
  }
  // ZeRO++ only when on: the recovered config stays the run's own keys otherwise.
  if (z.value("zero_hpz_partition_size", json(1)) == json(1)) z.erase("zero_hpz_partition_size");
  for (const char* k : {"zero_quantized_weights", "zero_quantized_gradients"})
    if (z.value(k, json(false)) == json(false)) z.erase(k);
  for (auto [from, to] :
       {std::pair{"offload_optimizer", "offload_optimizer"}, std::pair{"offload_param", "offload_param"}}) {
    if (auto it = log.zero_config.find(from); it != log.zero_config.end()) {
      const std::string dev = offload_device(it->second);
      if (!dev.empty()) z[to] = {{"device", dev}};
    }
  }
  if (!z.contains("stage")) {
    if (auto it = d.find("zero_optimization_stage"); it != d.end())
      if (auto v = num(it->second); v && std::abs(*v) < 1e9) z["stage"] = static_cast<int>(*v);
  }
  if (!z.empty()) c["zero_optimization"] = z;
  return c;
}

planner::ZeroConfig zero_from_config(const json& config) {
  int stage = 0;
  const json* zo = nullptr;
  if (config.is_object() && config.contains("zero_optimization") && config["zero_optimization"].is_object()) {
    zo = &config["zero_optimization"];
    if (zo->contains("stage") && (*zo)["stage"].is_number_integer()) {
      const auto s = (*zo)["stage"].get<int64_t>();
      if (s >= 0 && s <= 3) stage = static_cast<int>(s);
    }
  }
  planner::ZeroConfig z = planner::ZeroConfig::deepspeed_defaults(stage);
  if (!zo) return z;
  auto i64 = [&](const char* k, int64_t& out) {
    if (zo->contains(k) && (*zo)[k].is_number()) {
      const double v = (*zo)[k].get<double>();
      if (v >= 0 && v < 9e15) out = static_cast<int64_t>(v);
    }
  };
  auto bl = [&](const char* k, bool& out) {
    if (zo->contains(k) && (*zo)[k].is_boolean()) out = (*zo)[k].get<bool>();
  };
  i64("reduce_bucket_size", z.reduce_bucket_size);
  i64("allgather_bucket_size", z.allgather_bucket_size);
  i64("stage3_prefetch_bucket_size", z.prefetch_bucket_size);
  i64("stage3_param_persistence_threshold", z.param_persistence_threshold);
  i64("stage3_max_live_parameters", z.max_live_parameters);
  i64("stage3_max_reuse_distance", z.max_reuse_distance);
  i64("sub_group_size", z.sub_group_size);
  int64_t hpz = 1;
  i64("zero_hpz_partition_size", hpz);
  z.hpz_partition_size = static_cast<int>(std::clamp<int64_t>(hpz, 1, 1'000'000));
  bl("overlap_comm", z.overlap_comm);
  bl("contiguous_gradients", z.contiguous_gradients);
  bl("reduce_scatter", z.reduce_scatter);
  auto dev = [&](const char* k) {
    if (!zo->contains(k) || !(*zo)[k].is_object() || !(*zo)[k].contains("device") ||
        !(*zo)[k]["device"].is_string())
      return planner::Offload::None;
    const auto d = (*zo)[k]["device"].get<std::string>();
    return d == "cpu" ? planner::Offload::CPU : d == "nvme" ? planner::Offload::NVMe : planner::Offload::None;
  };
  z.offload_optimizer = dev("offload_optimizer");
  z.offload_param = dev("offload_param");
  if (config.contains("train_micro_batch_size_per_gpu") &&
      config["train_micro_batch_size_per_gpu"].is_number_integer())
    z.micro_batch = std::max<int64_t>(1, config["train_micro_batch_size_per_gpu"].get<int64_t>());
  if (config.contains("gradient_accumulation_steps") &&
      config["gradient_accumulation_steps"].is_number_integer())
    z.grad_accum = std::max<int64_t>(1, config["gradient_accumulation_steps"].get<int64_t>());
  return z;
}

}  // namespace zeroplan::diagnose
