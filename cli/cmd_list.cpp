// `zeroplan models` and `zeroplan gpus`: what the built-in zoo and profiles hold.
#include <fmt/format.h>

#include <algorithm>
#include <nlohmann/json.hpp>

#include "cli/commands.h"
#include "cli/output.h"
#include "hwprofiles/gpu_profile.h"
#include "models/model_spec.h"

namespace zeroplan::cli {
namespace {

std::string join(const std::vector<std::string>& v) {
  std::string s;
  for (const auto& x : v) s += (s.empty() ? "" : ", ") + x;
  return s;
}

int list_models(bool json) {
  nlohmann::json arr = nlohmann::json::array();
  // Widths from the longest name so that long zoo names (llama-4-maverick-17b-128e) keep the columns.
  size_t name_w = 4;
  for (const auto& e : models::zoo()) name_w = std::max(name_w, e.name.size());
  std::string text =
      fmt::format("{:<{}} {:>18} {:>17} {:>6} {:>6} {:>7}  {:<14} {}\n", "name", name_w, "parameters",
                  "active (MoE)", "layers", "hidden", "heads", "aliases", "source");
  for (const auto& e : models::zoo()) {
    const auto m = models::load_model(e.name);
    const int64_t n = m.num_parameters();
    // MoE: the parameters one token touches (top-k routed + shared experts, attention, dense layers,
    // embeddings), models::ModelSpec::active_parameters; blank for dense models (active = total).
    const std::string active = m.is_moe() ? fmt::format("{:L}", m.active_parameters()) : "";
    nlohmann::json row = {{"name", e.name}, {"aliases", e.aliases}, {"parameters", n}, {"source", e.source}};
    if (m.is_moe()) row["active_parameters"] = m.active_parameters();
    arr.push_back(std::move(row));
    text +=
        fmt::format("{:<{}} {:>18L} {:>17} {:>6} {:>6} {:>3}/{:<3}  {:<14} {}\n", e.name, name_w, n, active,
                    m.num_layers, m.hidden_size, m.num_heads, m.num_kv_heads, join(e.aliases), e.source);
  }
  write_answer(json ? arr.dump(2) + "\n" : text);
  return 0;
}

int list_gpus(bool json) {
  nlohmann::json arr = nlohmann::json::array();
  std::string text = fmt::format("{:<12} {:>8} {:>10} {:>9} {:<22} {}\n", "name", "memory", "bf16 TF/s",
                                 "HBM GB/s", "intra-node link", "aliases");
  for (const auto& g : hw::builtin_gpus()) {
    arr.push_back({{"name", g.name},
                   {"aliases", g.aliases},
                   {"memory_bytes", g.memory_bytes},
                   {"bf16_tflops", g.bf16_tflops},
                   {"hbm_GBps", g.hbm_GBps},
                   {"intra_node_link", g.intra_node.name}});
    text += fmt::format("{:<12} {:>6.1f}GB {:>10.1f} {:>9.0f} {:<22} {}\n", g.name,
                        static_cast<double>(g.memory_bytes) / 1e9, g.bf16_tflops, g.hbm_GBps,
                        g.intra_node.name, join(g.aliases));
  }
  write_answer(json ? arr.dump(2) + "\n" : text);
  return 0;
}

}  // namespace

void register_lists(CLI::App& app, CommandResult& result) {
  static bool models_json = false, gpus_json = false;
  // Reset on each registration: the Python module builds a fresh app per call in one process.
  models_json = gpus_json = false;
  auto* m = app.add_subcommand("models", "List the model zoo with exact parameter counts");
  m->add_flag("--json", models_json, "JSON output");
  m->callback([&result] { result = list_models(models_json); });
  auto* g = app.add_subcommand("gpus", "List the built-in GPU profiles");
  g->add_flag("--json", gpus_json, "JSON output");
  g->callback([&result] { result = list_gpus(gpus_json); });
}

}  // namespace zeroplan::cli
