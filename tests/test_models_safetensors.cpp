// --model DIR with safetensors: the inventory from the files' headers. The committed fixture
// tests/data/models/tiny-llama-safetensors was written by transformers' save_pretrained (bf16) from
// scripts/count_params.py, which also recorded its parameter count from the PyTorch model; the other
// cases write small files by hand (8-byte little-endian header length + JSON header + data).
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>

#include "common/errors.h"
#include "models/model_spec.h"

namespace zeroplan::models {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

const std::string kSource = ZEROPLAN_SOURCE_DIR;
const std::string kFixture = kSource + "/tests/data/models/tiny-llama-safetensors";

int64_t recorded_total() {
  std::ifstream f(kSource + "/tests/data/models/param_counts.json");
  return json::parse(f).at("models").at("safetensors/tiny-llama").at("total").get<int64_t>();
}

class Folder {
 public:
  Folder() {
    const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
    path_ = fs::temp_directory_path() / (std::string("zp_st_") + info->name());
    fs::remove_all(path_);
    fs::create_directories(path_);
  }
  ~Folder() {
    std::error_code ec;
    fs::remove_all(path_, ec);
  }
  std::string path() const { return path_.string(); }
  void write(const std::string& name, const std::string& bytes) const {
    std::ofstream(path_ / name, std::ios::binary) << bytes;
  }
  // A safetensors file: header length (8 bytes LE), header JSON, `data` zero bytes.
  void safetensors(const std::string& name, const json& header, size_t data) const {
    const std::string h = header.dump();
    std::string out;
    uint64_t n = h.size();
    for (int i = 0; i < 8; ++i) out.push_back(static_cast<char>((n >> (8 * i)) & 0xff));
    out += h;
    out.append(data, '\0');
    write(name, out);
  }
  void copy_fixture_config(const json& changes = json::object()) const {
    std::ifstream f(kFixture + "/config.json");
    json c = json::parse(f);
    c.update(changes);
    write("config.json", c.dump());
  }

 private:
  fs::path path_;
};

template <typename F>
void expect_user_error(F&& f, std::initializer_list<std::string> parts) {
  try {
    f();
    ADD_FAILURE() << "expected a UserError";
  } catch (const UserError& e) {
    for (const auto& p : parts) EXPECT_NE(std::string(e.what()).find(p), std::string::npos) << e.what();
  }
}

TEST(Safetensors, FixtureInventoryMatchesPyTorchAndConfig) {
  const ModelSpec m = load_model(kFixture);
  ASSERT_TRUE(m.from_checkpoint());
  EXPECT_EQ(m.num_parameters(), recorded_total());  // PyTorch's sum of p.numel()
  EXPECT_EQ(m.checkpoint_bytes, 2 * recorded_total());  // all bf16
  EXPECT_TRUE(m.warnings.empty()) << m.warnings.front();  // config and checkpoint agree
  // Groups as stage 3 gathers them: embed, 2 layers, final norm, head.
  const auto inv = m.inventory();
  ASSERT_EQ(inv.size(), 5u);
  EXPECT_EQ(inv[0].name, "embed");
  EXPECT_EQ(inv[1].name, "layers.0");
  EXPECT_TRUE(inv[1].is_decoder_layer);
  EXPECT_EQ(inv[3].name, "final_norm");
  EXPECT_EQ(inv[4].name, "lm_head");
  for (const auto& l : inv)
    for (const auto& t : l.tensors) EXPECT_EQ(t.dtype, "BF16") << t.name;
  // Module flags as the planner and LoRA use them.
  bool saw_k = false;
  for (const auto& t : inv[1].tensors)
    if (t.module == "k_proj") {
      saw_k = true;
      EXPECT_TRUE(t.is_linear);
      EXPECT_EQ(t.shape, (std::vector<int64_t>{8, 16}));  // 1 kv head x head_dim 8
    }
  EXPECT_TRUE(saw_k);
  EXPECT_TRUE(inv[0].tensors[0].is_embedding);
  // LoRA r=2 on q_proj,v_proj: 2 layers x (2*(16+16) + 2*(16+8)) by hand = 2 x 112.
  EXPECT_EQ(lora_trainable_parameters(m, 2, {"q_proj", "v_proj"}), 224);
}

TEST(Safetensors, DisagreementWithConfigIsReported) {
  Folder d;
  fs::copy_file(kFixture + "/model.safetensors", d.path() + "/model.safetensors");
  d.copy_fixture_config({{"num_hidden_layers", 3}, {"intermediate_size", 48}});
  const ModelSpec m = load_model(d.path());
  EXPECT_EQ(m.num_parameters(), recorded_total());  // the checkpoint wins
  std::string all;
  for (const auto& w : m.warnings) all += w + "\n";
  EXPECT_NE(all.find("3 layers"), std::string::npos) << all;
  EXPECT_NE(all.find("disagree"), std::string::npos) << all;
  EXPECT_NE(all.find("lacks: model.layers.*.input_layernorm.weight"), std::string::npos) << all;  // layer 2
  EXPECT_NE(all.find("shape differs"), std::string::npos) << all;                                // MLP width
}

TEST(Safetensors, ShardsQuantizedDtypesAndUnknownFamilies) {
  Folder d;
  // Two shards of an unknown MoE family: the config alone would be refused; beside a checkpoint it is read
  // from its standard fields and the checkpoint gives the count.
  d.write("config.json", json{{"model_type", "mycorp_moe"},
                              {"hidden_size", 8},
                              {"num_hidden_layers", 1},
                              {"num_attention_heads", 2},
                              {"intermediate_size", 16},
                              {"vocab_size", 10},
                              {"num_experts", 4}}
                             .dump());
  d.safetensors("model-00001-of-00002.safetensors",
                {{"__metadata__", {{"format", "pt"}}},
                 {"model.embed_tokens.weight", {{"dtype", "BF16"}, {"shape", {10, 8}}, {"data_offsets", {0, 160}}}}},
                160);
  d.safetensors("model-00002-of-00002.safetensors",
                {{"model.layers.0.mlp.experts.gate_up_proj_blocks",
                  {{"dtype", "U8"}, {"shape", {4, 32, 4}}, {"data_offsets", {0, 512}}}},
                 {"model.layers.0.mlp.experts.gate_up_proj_scales",
                  {{"dtype", "U8"}, {"shape", {4, 32}}, {"data_offsets", {512, 640}}}},
                 {"model.norm.weight", {{"dtype", "F32"}, {"shape", {8}}, {"data_offsets", {640, 672}}}}},
                672);
  const ModelSpec m = load_model(d.path());
  EXPECT_EQ(m.num_parameters(), 80 + 512 + 128 + 8);  // stored elements, U8 blocks as stored
  EXPECT_EQ(m.checkpoint_bytes, 160 + 672);
  std::string all;
  for (const auto& w : m.warnings) all += w + "\n";
  EXPECT_NE(all.find("quantized"), std::string::npos) << all;
  EXPECT_NE(all.find("mycorp_moe"), std::string::npos) << all;
}

TEST(Safetensors, MalformedFilesAreUserErrors) {
  Folder d;
  d.copy_fixture_config();
  d.write("model.safetensors", "abc");
  expect_user_error([&] { load_model(d.path()); }, {"shorter than its 8-byte header length"});
  std::string huge(8, '\0');
  huge[4] = 0x10;  // 2^36 bytes: beyond the 100 MB header limit
  d.write("model.safetensors", huge + "{}");
  expect_user_error([&] { load_model(d.path()); }, {"header length", "not valid"});
  d.safetensors("model.safetensors", {{"a.weight", {{"dtype", "BF16"}, {"shape", {2, 2}}, {"data_offsets", {0, 4}}}}},
                4);
  expect_user_error([&] { load_model(d.path()); }, {"data_offsets", "8 bytes"});
  d.safetensors("model.safetensors", {{"a.weight", {{"dtype", "Q4"}, {"shape", {2}}}}}, 0);
  expect_user_error([&] { load_model(d.path()); }, {"'Q4'"});
  d.write("model.safetensors", std::string("\x05\0\0\0\0\0\0\0", 8) + "[1,2]");
  expect_user_error([&] { load_model(d.path()); }, {"not a JSON object"});
}

}  // namespace
}  // namespace zeroplan::models
