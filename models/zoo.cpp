// The model zoo: models/zoo/<name>.json are HF config.json files embedded in the binary; the zoo's
// metadata (aliases, the Hub repo each file came from, published parameter counts with their
// citation) lives in models/zoo/_index.json. Files starting with "_" are not models.
#include <algorithm>
#include <filesystem>
#include <string>
#include <vector>

#include "common/embedded_data.h"
#include "common/errors.h"
#include "common/json_file.h"
#include "common/names.h"
#include "models/hf_config.h"
#include "models/model_spec.h"

namespace zeroplan::models {
namespace {

constexpr std::string_view kZooDir = "models/zoo/";
constexpr std::string_view kIndexFile = "models/zoo/_index.json";

struct ZooFile {
  std::string name;
  std::string_view content;
};

std::vector<ZooFile> zoo_files() {
  std::vector<ZooFile> out;
  for (const auto& f : embedded_files_under(kZooDir)) {
    std::string_view base = f.path.substr(kZooDir.size());
    if (base.empty() || base.front() == '_' || base.find('/') != std::string_view::npos) continue;
    if (base.size() <= 5 || base.substr(base.size() - 5) != ".json") continue;
    out.push_back({std::string(base.substr(0, base.size() - 5)), f.content});
  }
  return out;
}

nlohmann::json zoo_index() {
  for (const auto& f : embedded_files_under(kZooDir))
    if (f.path == kIndexFile) return parse_json_text(f.content, kIndexFile, "zoo index");
  ZP_CHECK(false, "{} is not embedded; re-run cmake", kIndexFile);
  return {};
}

}  // namespace

std::vector<ZooEntry> zoo() {
  // The zoo is embedded (immutable for the process's life): parse its index once, however many
  // models a command loads (`zeroplan models` loads every one).
  static const std::vector<ZooEntry> entries = [] {
    const nlohmann::json index = zoo_index();
    const nlohmann::json& models = index.at("models");
    std::vector<ZooEntry> out;
    for (const auto& f : zoo_files()) {
      ZooEntry e;
      e.name = f.name;
      if (auto it = models.find(f.name); it != models.end()) {
        e.source = it->value("source", "");
        e.aliases = it->value("aliases", std::vector<std::string>{});
        e.published_parameters = it->value("published_parameters", int64_t{0});
        e.citation = it->value("citation", "");
      }
      out.push_back(std::move(e));
    }
    return out;
  }();
  return entries;
}

ModelSpec load_model(const std::string& name_or_path) {
  namespace fs = std::filesystem;
  if (name_or_path.find_first_not_of(" \t") == std::string::npos)
    throw_user_error(
        "model name is empty; give a zoo name (e.g. llama-2-7b), an alias (7b) or a config.json path");

  // Zoo names and aliases first: they never contain a path separator.
  const std::string wanted = to_lower(name_or_path);
  const auto entries = zoo();
  for (const auto& e : entries) {
    const bool hit =
        e.name == wanted || std::find(e.aliases.begin(), e.aliases.end(), wanted) != e.aliases.end();
    if (!hit) continue;
    for (const auto& f : zoo_files()) {
      if (f.name != e.name) continue;
      const std::string origin = std::string(kZooDir) + e.name + ".json";
      ModelSpec m = model_from_hf_json(
          origin, parse_json_text(f.content, origin, "model config", PythonJsonTokens::Accept));
      m.name = e.name;
      return m;
    }
  }

  std::error_code ec;
  const bool looks_like_path =
      name_or_path.find('/') != std::string::npos || name_or_path.find('\\') != std::string::npos ||
      (name_or_path.size() > 5 && to_lower(name_or_path.substr(name_or_path.size() - 5)) == ".json");
  if (fs::exists(name_or_path, ec) || looks_like_path) {
    std::string path = name_or_path;
    bool safetensors = false;
    if (fs::is_directory(path, ec)) {
      for (const auto& e : fs::directory_iterator(path, ec))
        if (e.is_regular_file() && e.path().extension() == ".safetensors") safetensors = true;
      path = (fs::path(name_or_path) / "config.json").string();
      if (!fs::exists(path, ec))
        throw_user_error(
            "folder '{}' has no config.json; give the path of a HF model folder (config.json, with its "
            "*.safetensors files for an exact inventory) or of its config.json",
            name_or_path);
    }
    ModelSpec m =
        model_from_hf_json(path, read_json_file(path, "model config", PythonJsonTokens::Accept), safetensors);
    m.name = name_or_path;
    if (safetensors) read_safetensors_folder(name_or_path, m);
    return m;
  }

  std::vector<std::string> known;
  for (const auto& e : entries) {
    known.push_back(e.name);
    known.insert(known.end(), e.aliases.begin(), e.aliases.end());
  }
  const std::string best = nearest_name(name_or_path, known);
  // The zoo has ~60 models: point at `zeroplan models` instead of listing them (one short line).
  if (!best.empty())
    throw_user_error(
        "unknown model '{}'; did you mean '{}'? (run `zeroplan models` for the zoo, or give the path of a "
        "config.json or a model folder)",
        name_or_path, best);
  throw_user_error(
      "unknown model '{}'; run `zeroplan models` for the zoo, or give the path of a HF config.json or a "
      "model "
      "folder",
      name_or_path);
}

}  // namespace zeroplan::models
