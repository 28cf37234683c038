// --model DIR with safetensors shards: the exact tensor inventory from the files' headers.
//
// safetensors format (huggingface/safetensors, README "Format"): 8 bytes little-endian unsigned
// header size N, then N bytes of UTF-8 JSON: {"__metadata__": {...}, "<tensor name>": {"dtype": "BF16",
// "shape": [..], "data_offsets": [begin, end]}, ...}, then the raw data. Only the header is read.
// The reference implementation refuses headers above 100,000,000 bytes (MAX_HEADER_SIZE in
// safetensors/src/tensor.rs); we use the same bound.
#include <algorithm>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <regex>
#include <set>
#include <string>
#include <vector>

#include "common/checked.h"
#include "common/errors.h"
#include "models/model_spec.h"

namespace zeroplan::models {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

constexpr uint64_t kMaxHeaderBytes = 100'000'000;  // safetensors MAX_HEADER_SIZE

// Bytes per element of the safetensors dtypes (safetensors/src/tensor.rs Dtype::bitsize; the 4-bit
// and sub-byte types are not in the format: quantized checkpoints pack them into U8).
int64_t dtype_bytes(const std::string& d, const std::string& origin, const std::string& tensor) {
  static const std::map<std::string, int64_t> k = {{"BOOL", 1},    {"U8", 1},      {"I8", 1},  {"F8_E5M2", 1},
                                                   {"F8_E4M3", 1}, {"F8_E8M0", 1}, {"I16", 2}, {"U16", 2},
                                                   {"F16", 2},     {"BF16", 2},    {"I32", 4}, {"U32", 4},
                                                   {"F32", 4},     {"I64", 8},     {"U64", 8}, {"F64", 8}};
  auto it = k.find(d);
  if (it == k.end())
    throw_user_error("safetensors file '{}': tensor '{}' has dtype '{}', which is not a safetensors dtype",
                     origin, tensor, d);
  return it->second;
}

json read_header(const fs::path& file) {
  std::ifstream in(file, std::ios::binary);
  if (!in) throw_user_error("cannot open safetensors file '{}'", file.string());
  unsigned char len_bytes[8];
  if (!in.read(reinterpret_cast<char*>(len_bytes), 8))
    throw_user_error("safetensors file '{}' is shorter than its 8-byte header length", file.string());
  uint64_t n = 0;
  for (int i = 7; i >= 0; --i) n = (n << 8) | len_bytes[i];
  std::error_code ec;
  const auto size = fs::file_size(file, ec);
  if (n == 0 || n > kMaxHeaderBytes || (!ec && n > size - 8))
    throw_user_error("safetensors file '{}': header length {} is not valid (file size {}, limit {} bytes)",
                     file.string(), n, ec ? 0 : size, kMaxHeaderBytes);
  std::string text(static_cast<size_t>(n), '\0');
  if (!in.read(text.data(), static_cast<std::streamsize>(n)))
    throw_user_error("safetensors file '{}' ends inside its {}-byte header", file.string(), n);
  json j = json::parse(text, nullptr, false);
  if (j.is_discarded() || !j.is_object())
    throw_user_error("safetensors file '{}': the header is not a JSON object", file.string());
  return j;
}

// Which stage-3 group a checkpoint tensor belongs to, from its name: "...layers.<i>." / "...h.<i>."
// / "...blocks.<i>." are decoder layers; embeddings, the final norm and the head by their usual names.
std::string group_of(const std::string& name, int64_t* layer) {
  static const std::regex layer_re(R"((?:^|\.)(?:layers|h|blocks|block|layer)\.(\d+)\.)");
  std::smatch mt;
  if (std::regex_search(name, mt, layer_re)) {
    *layer = std::stoll(mt[1].str());
    return "layers";
  }
  if (name.find("embed_tokens") != std::string::npos || name.find("wte.") != std::string::npos ||
      name.find("wpe.") != std::string::npos || name.find("word_embeddings") != std::string::npos ||
      name.find("embed_in") != std::string::npos || name.find("embed_positions") != std::string::npos)
    return "embed";
  if (name.rfind("lm_head", 0) == 0 || name.rfind("embed_out", 0) == 0 ||
      name.find(".lm_head.") != std::string::npos)
    return "lm_head";
  if (name.find("norm") != std::string::npos || name.find("ln_f") != std::string::npos) return "final_norm";
  return "other";
}

TensorSpec tensor_from(const std::string& name, const json& v, const std::string& origin, int64_t* bytes) {
  if (!v.is_object() || !v.contains("dtype") || !v.contains("shape") || !v["shape"].is_array() ||
      !v["dtype"].is_string())
    throw_user_error("safetensors file '{}': tensor '{}' lacks a dtype string and a shape list", origin,
                     name);
  TensorSpec t;
  t.name = name;
  t.dtype = v["dtype"].get<std::string>();
  for (const auto& d : v["shape"]) {
    if (!d.is_number_integer() || d.get<int64_t>() < 0)
      throw_user_error("safetensors file '{}': tensor '{}' has shape {}", origin, name, v["shape"].dump());
    t.shape.push_back(d.get<int64_t>());
  }
  const int64_t expect = checked_mul(t.numel(), dtype_bytes(t.dtype, origin, name));
  if (v.contains("data_offsets")) {
    const auto& o = v["data_offsets"];
    if (!o.is_array() || o.size() != 2 || !o[0].is_number_integer() || !o[1].is_number_integer() ||
        o[1].get<int64_t>() - o[0].get<int64_t>() != expect)
      throw_user_error("safetensors file '{}': tensor '{}' data_offsets {} do not hold {} bytes of {} {}",
                       origin, name, o.dump(), expect, t.dtype, v["shape"].dump());
  }
  *bytes = checked_add(*bytes, expect);
  // Module name: the component before ".weight"/".bias" (what PEFT target_modules match).
  std::string path = name;
  const bool weight = path.size() > 7 && path.compare(path.size() - 7, 7, ".weight") == 0;
  t.is_bias = path.size() > 5 && path.compare(path.size() - 5, 5, ".bias") == 0;
  if (weight) path.resize(path.size() - 7);
  if (t.is_bias) path.resize(path.size() - 5);
  const auto dot = path.rfind('.');
  t.module = dot == std::string::npos ? path : path.substr(dot + 1);
  const bool embed_name = t.module.find("embed") != std::string::npos || t.module == "wte" ||
                          t.module == "wpe" || t.module == "word_embeddings";
  const bool norm_name = t.module.find("norm") != std::string::npos || t.module.rfind("ln", 0) == 0;
  t.is_norm = norm_name;
  t.is_embedding = weight && embed_name && t.module != "embed_out" && t.shape.size() == 2;
  t.is_linear = weight && !t.is_embedding && !norm_name && t.shape.size() == 2;
  return t;
}

// Layer-independent name: "model.layers.7.mlp.up_proj.weight" -> "model.layers.*.mlp.up_proj.weight".
std::string pattern(const std::string& name) {
  static const std::regex idx(R"(\.\d+\.)");
  return std::regex_replace(name, idx, ".*.");
}

void compare_with_config(const ModelSpec& from_config, ModelSpec& m) {
  std::map<std::string, std::vector<int64_t>> cfg, ckpt;
  int64_t n_cfg = 0;
  for (const auto& l : from_config.inventory())
    for (const auto& t : l.tensors) {
      cfg[t.name] = t.shape;
      n_cfg = checked_add(n_cfg, t.numel());
    }
  int64_t n_ckpt = 0;
  for (const auto& l : m.checkpoint_tensors)
    for (const auto& t : l.tensors) {
      ckpt[t.name] = t.shape;
      n_ckpt = checked_add(n_ckpt, t.numel());
    }
  std::set<std::string> only_cfg, only_ckpt, shape_diff;
  for (const auto& [n, s] : cfg) {
    auto it = ckpt.find(n);
    if (it == ckpt.end())
      only_cfg.insert(pattern(n));
    else if (it->second != s)
      shape_diff.insert(pattern(n));
  }
  for (const auto& [n, s] : ckpt)
    if (!cfg.count(n)) only_ckpt.insert(pattern(n));
  auto list = [](const std::set<std::string>& s) {
    std::string out;
    int k = 0;
    for (const auto& n : s) {
      if (k++ == 6) {
        out += fmt::format(", ... ({} in all)", s.size());
        break;
      }
      out += (out.empty() ? "" : ", ") + n;
    }
    return out;
  };
  if (n_cfg != n_ckpt)
    m.warnings.push_back(
        fmt::format("config.json and the safetensors headers in '{}' disagree: the config's fields give {} "
                    "parameters, the "
                    "checkpoint holds {} elements; zeroplan uses the checkpoint's tensors",
                    m.checkpoint_dir, n_cfg, n_ckpt));
  if (!only_ckpt.empty())
    m.warnings.push_back(
        fmt::format("tensors in the checkpoint that config.json does not describe: {}", list(only_ckpt)));
  if (!only_cfg.empty())
    m.warnings.push_back(
        fmt::format("tensors config.json describes that the checkpoint lacks: {}", list(only_cfg)));
  if (!shape_diff.empty())
    m.warnings.push_back(fmt::format("tensors whose shape differs between config.json and the checkpoint: {}",
                                     list(shape_diff)));
}

}  // namespace

void read_safetensors_folder(const std::string& dir, ModelSpec& m) {
  // A vision-language checkpoint's tower blocks ("model.visual.blocks.N") would be read as decoder layers
  // here: refused until its tensors are split by part; its config.json alone plans it
  // (models/vision_tower.h).
  if (!m.vision_groups.empty())
    throw_user_error(
        "folder '{}' holds a vision-language checkpoint ('{}'): reading its safetensors is not supported "
        "yet; "
        "pass its config.json (--model {}/config.json), which counts the tower and language model exactly",
        dir, m.text_config_of, dir);
  std::vector<fs::path> files;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(dir, ec))
    if (e.is_regular_file() && e.path().extension() == ".safetensors") files.push_back(e.path());
  if (ec) throw_user_error("cannot list folder '{}': {}", dir, ec.message());
  if (files.empty()) throw_user_error("folder '{}' holds no *.safetensors file", dir);
  std::sort(files.begin(), files.end());

  std::map<int64_t, LayerInventory> layers;
  std::map<std::string, LayerInventory> others;
  std::set<std::string> seen;
  std::map<std::string, int64_t> dtype_elems;
  int64_t bytes = 0;
  for (const auto& f : files) {
    const json h = read_header(f);
    for (const auto& [name, v] : h.items()) {
      if (name == "__metadata__") continue;
      if (!seen.insert(name).second)
        throw_user_error("tensor '{}' appears in more than one safetensors file of '{}'", name, dir);
      TensorSpec t = tensor_from(name, v, f.string(), &bytes);
      dtype_elems[t.dtype] = checked_add(dtype_elems[t.dtype], t.numel());
      int64_t layer = -1;
      const std::string g = group_of(name, &layer);
      if (g == "layers") {
        auto& l = layers[layer];
        l.name = "layers." + std::to_string(layer);
        l.is_decoder_layer = true;
        l.tensors.push_back(std::move(t));
      } else {
        auto& l = others[g];
        l.name = g;
        l.tensors.push_back(std::move(t));
      }
    }
  }
  auto by_name = [](const TensorSpec& a, const TensorSpec& b) { return a.name < b.name; };
  ModelSpec from_config = m;  // the config-derived spec, for the comparison below
  const bool had_config = m.hidden_size > 0;
  m.checkpoint_tensors.clear();
  for (const char* g : {"embed", "other"})
    if (others.count(g)) m.checkpoint_tensors.push_back(others[g]);
  for (auto& [i, l] : layers) {
    std::sort(l.tensors.begin(), l.tensors.end(), by_name);
    m.checkpoint_tensors.push_back(std::move(l));
  }
  for (const char* g : {"final_norm", "lm_head"})
    if (others.count(g)) m.checkpoint_tensors.push_back(others[g]);
  m.checkpoint_dir = dir;
  m.checkpoint_bytes = bytes;
  if (had_config && layers.size() != static_cast<size_t>(m.num_layers))
    m.warnings.push_back(fmt::format("config.json says {} layers; the checkpoint in '{}' has tensors for {}",
                                     m.num_layers, dir, layers.size()));
  // A quantized checkpoint stays quantized: say what it holds.
  if (dtype_elems.count("U8") || dtype_elems.count("I8") || dtype_elems.count("F8_E4M3") ||
      dtype_elems.count("F8_E5M2")) {
    std::string d;
    for (const auto& [k, n] : dtype_elems) d += fmt::format("{}{} {}", d.empty() ? "" : ", ", n, k);
    m.warnings.push_back(fmt::format(
        "checkpoint '{}' holds 8-bit or packed quantized tensors ({}); element counts are as stored, so a "
        "packed 4-bit weight counts as its U8 bytes, not as parameters",
        dir, d));
  }
  if (had_config) compare_with_config(from_config, m);
}

}  // namespace zeroplan::models
